//! The benchmark driver behind `benches/netbed-nics.sh` (one process per
//! side):
//!   netbench serve --listen A:P[,B:P...]       echo messages back, once
//!   netbench bulk --links A:P[,...] --bytes N  send N bytes in 4 MiB messages
//!   netbench pingpong --links A:P[,...] --iters K  round trips, 1 KiB..4 MiB
//! `bulk` prints `{"bytes":..,"seconds":..,"mb_per_s":..,"sent":[..]}`, the
//! time running until the peer acknowledged the last byte; `pingpong`
//! prints one JSON line per size with the median round trip.
use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use ddnet::{StripeListener, Striped};

fn addrs(s: &str) -> Vec<SocketAddr> {
    s.split(',').map(|a| a.parse().expect("ADDR:PORT")).collect()
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
    match args.get(1).map(String::as_str) {
        Some("serve") => {
            let l = StripeListener::bind(&addrs(&flag("--listen").expect("--listen"))).await?;
            println!("ready");
            let ch = l.accept().await?;
            let echo = flag("--sink").is_none();
            while let Some(m) = ch.recv().await? {
                if echo {
                    ch.send(m).await?;
                }
            }
            ch.close().await?;
        }
        Some("bulk") => {
            let ch = connect(&flag("--links").expect("--links")).await?;
            let total: u64 = flag("--bytes").expect("--bytes").parse().expect("number");
            let chunk = Bytes::from(vec![0x5au8; 4 << 20]);
            let t = Instant::now();
            let mut left = total;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                ch.send(chunk.slice(..n)).await?;
                left -= n as u64;
            }
            ch.close().await?;
            let secs = t.elapsed().as_secs_f64();
            let s = ch.stats();
            println!(
                "{{\"bytes\":{total},\"seconds\":{secs:.4},\"mb_per_s\":{:.3},\"sent\":{:?},\"resent\":{}}}",
                total as f64 / secs / 1e6,
                s.sent,
                s.resent
            );
        }
        Some("pingpong") => {
            let ch = connect(&flag("--links").expect("--links")).await?;
            let iters: usize = flag("--iters").map_or(20, |s| s.parse().expect("number"));
            let mut size = 1024usize;
            while size <= 4 << 20 {
                let msg = Bytes::from(vec![7u8; size]);
                let mut rtts = vec![];
                for _ in 0..iters + 2 {
                    let t = Instant::now();
                    ch.send(msg.clone()).await?;
                    let back = ch.recv().await?.expect("echo");
                    assert_eq!(back.len(), size);
                    rtts.push(t.elapsed().as_secs_f64());
                }
                rtts.drain(..2); // warm-up
                rtts.sort_by(f64::total_cmp);
                let med = rtts[rtts.len() / 2];
                // The paper's Eq. 9: effective bandwidth = 8 x size / (RTT / 2).
                println!(
                    "{{\"size\":{size},\"rtt_s\":{med:.6},\"mbit_per_s\":{:.2}}}",
                    8.0 * size as f64 / (med / 2.0) / 1e6
                );
                size *= 4;
            }
            ch.close().await?;
            while ch.recv().await?.is_some() {}
        }
        _ => eprintln!("usage: netbench serve|bulk|pingpong ..."),
    }
    Ok(())
}

async fn connect(links: &str) -> std::io::Result<Striped> {
    let routes: Vec<_> = addrs(links).into_iter().map(|a| (None, a)).collect();
    Striped::connect(&routes).await
}
