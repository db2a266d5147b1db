//! The benchmark driver behind `benches/netbed-nics.sh` (one process per
//! side):
//!   netbench serve --listen A:P[,B:P...] [--tcp C:Q] [--sink 1]
//!                      echo the messages of one striped channel back (and,
//!                      with --tcp, of one plain TCP stream accepted on C:Q)
//!   netbench bulk --links A:P[,...] --bytes N     send N bytes in 4 MiB messages
//!   netbench pingpong --links A:P[,...] [--tcp C:Q] --iters K [--rounds R]
//!                     [--min-size M] [--max-size N]
//!                      round trips, 1 KiB (or M)..4 MiB (or N): K per size,
//!                      and for sizes under 64 KiB up to 4 MiB of them (at
//!                      most 4000): short round trips are noisy, and a
//!                      sustained exchange is what a link does
//! `bulk` prints `{"bytes":..,"seconds":..,"mb_per_s":..,"sent":[..]}`, the
//! time running until the peer acknowledged the last byte; `pingpong`
//! prints one JSON line per size with the median round trip (and the bytes
//! each link sent). With `--tcp`, the same two processes also exchange the
//! messages over one plain TCP stream (a length-prefixed message each
//! way: the baseline the paper compares against), the two taking turns
//! in R rounds per size (which goes first alternates): both then run with
//! the same placement on this machine's CPUs. On a VM that placement moves
//! a 1 KiB round trip by ~20% from one pair of processes to the next, and
//! it drifts from ~10 µs to ~90 µs within a pair's first second, more than
//! the two transports differ: so below the striping size (both on link 1)
//! they take turns in short blocks ([`BLOCK`] round trips, the first
//! [`BLOCK_WARM`] not counted), close to the same moments; from it each
//! takes its block of the round's round trips (turns that short would let
//! each refill the token buckets the other drained). Each round's ratio is
//! printed too, and below the striping size also the ratios of the same
//! number of round trips taken in turns one by one (`turn_speedups`): see
//! [`block_rtts`] for why those are not the measure.
use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use ddnet::plan::PlanConfig;
use ddnet::{StripeListener, Striped};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn addrs(s: &str) -> Vec<SocketAddr> {
    s.split(',').map(|a| a.parse().expect("ADDR:PORT")).collect()
}

/// One end of a ping-pong: striped, or one plain TCP stream.
enum Chan {
    Striped(Striped),
    Tcp(TcpStream),
}

impl Chan {
    async fn send(&mut self, msg: Bytes) -> std::io::Result<()> {
        match self {
            Chan::Striped(ch) => ch.send(msg).await,
            Chan::Tcp(s) => {
                // One write per message, as a careful TCP program does.
                let mut buf = Vec::with_capacity(8 + msg.len());
                buf.extend_from_slice(&(msg.len() as u64).to_be_bytes());
                buf.extend_from_slice(&msg);
                s.write_all(&buf).await
            }
        }
    }

    async fn recv(&mut self) -> std::io::Result<Option<Bytes>> {
        match self {
            Chan::Striped(ch) => ch.recv().await,
            Chan::Tcp(s) => {
                let mut len = [0u8; 8];
                match s.read_exact(&mut len).await {
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
                    Err(e) => return Err(e),
                }
                let mut buf = vec![0u8; u64::from_be_bytes(len) as usize];
                s.read_exact(&mut buf).await?;
                Ok(Some(buf.into()))
            }
        }
    }

    fn sent(&self) -> Vec<u64> {
        match self {
            Chan::Striped(ch) => ch.stats().sent,
            Chan::Tcp(_) => vec![],
        }
    }

    async fn close(self) -> std::io::Result<()> {
        match self {
            Chan::Striped(ch) => {
                ch.close().await?;
                while ch.recv().await?.is_some() {}
                Ok(())
            }
            Chan::Tcp(mut s) => s.shutdown().await,
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    // In a task of its own, not in `block_on`: a task woken by another task
    // runs in the same turn, while waking the `block_on` future costs the
    // runtime an extra poll of the kernel (measured: 2-4 us a round trip).
    tokio::spawn(run()).await.expect("benchmark task")
}

async fn run() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).map(|i| args[i + 1].clone());
    match args.get(1).map(String::as_str) {
        Some("serve") => {
            let listen = addrs(&flag("--listen").expect("--listen"));
            let l = StripeListener::bind(&listen).await?;
            let tcp = match flag("--tcp") {
                Some(a) => Some(TcpListener::bind(addrs(&a)[0]).await?),
                None => None,
            };
            println!("ready");
            let echo = flag("--sink").is_none();
            let plain = tokio::spawn(async move {
                let Some(l) = tcp else { return Ok(()) };
                let (s, _) = l.accept().await?;
                s.set_nodelay(true)?;
                serve(Chan::Tcp(s), true).await
            });
            serve(Chan::Striped(l.accept().await?), echo).await?;
            plain.await.expect("tcp echo task")?;
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
            let mut ch = Chan::Striped(connect(&flag("--links").expect("--links")).await?);
            let mut tcp = match flag("--tcp") {
                Some(a) => {
                    let s = TcpStream::connect(addrs(&a)[0]).await?;
                    s.set_nodelay(true)?;
                    Some(Chan::Tcp(s))
                }
                None => None,
            };
            let iters: usize = flag("--iters").map_or(20, |s| s.parse().expect("number"));
            let rounds: usize = flag("--rounds").map_or(1, |s| s.parse().expect("number"));
            let max: usize = flag("--max-size").map_or(4 << 20, |s| s.parse().expect("number"));
            let mut size: usize = flag("--min-size").map_or(1024, |s| s.parse().expect("number"));
            while size <= max {
                let msg = Bytes::from(vec![7u8; size]);
                let before = ch.sent();
                let n = iters.max(((4 << 20) / size).min(4000));
                let per_round = n.div_ceil(rounds).max(3);
                // Each round: this transport's median round trip, and TCP's.
                let mut meds: Vec<(f64, Option<f64>)> = vec![];
                // Below the striping size: TCP / DDNet of single turns.
                let mut turns = vec![];
                // Below the striping size both send every message on link
                // 1: they take turns in blocks of `BLOCK` round trips (and,
                // reported apart, one round trip each). From it, DDNet uses
                // link 2 too, and turns that short would let each refill
                // the token buckets the other drained (neither would be
                // measured sustained): each takes its share of the round.
                let one_link = (size as u64) < PlanConfig::default().small;
                for r in 0..rounds {
                    let first = r % 2 == 0;
                    meds.push(match tcp.as_mut() {
                        Some(c) if one_link => {
                            let (d, t) = block_rtts(&mut ch, c, &msg, per_round, first).await?;
                            let (td, tt) = paired_rtts(&mut ch, c, &msg, per_round, first).await?;
                            turns.push(format!("{:.4}", tt / td));
                            (d, Some(t))
                        }
                        Some(c) if first => {
                            let d = median_rtt(&mut ch, &msg, per_round).await?;
                            (d, Some(median_rtt(c, &msg, per_round).await?))
                        }
                        Some(c) => {
                            let t = median_rtt(c, &msg, per_round).await?;
                            (median_rtt(&mut ch, &msg, per_round).await?, Some(t))
                        }
                        None => (median_rtt(&mut ch, &msg, per_round).await?, None),
                    });
                }
                let med = median(meds.iter().map(|m| m.0).collect());
                let sent: Vec<u64> = ch.sent().iter().zip(&before).map(|(a, b)| a - b).collect();
                let rates: Vec<u64> = match &ch {
                    Chan::Striped(s) => s.stats().rates.iter().map(|r| *r as u64).collect(),
                    Chan::Tcp(_) => vec![],
                };
                // The paper's Eq. 9: effective bandwidth = 8 x size / (RTT / 2).
                let eq9 = |rtt: f64| 8.0 * size as f64 / (rtt / 2.0) / 1e6;
                let mut line = format!(
                    "{{\"size\":{size},\"round_trips\":{},\"rtt_s\":{med:.7},\"mbit_per_s\":{:.2},\"sent\":{sent:?},\"rates\":{rates:?}",
                    per_round * rounds,
                    eq9(med)
                );
                if tcp.is_some() {
                    let tmed = median(meds.iter().filter_map(|m| m.1).collect());
                    let ratios: Vec<String> =
                        meds.iter().filter_map(|&(d, t)| t.map(|t| format!("{:.4}", t / d))).collect();
                    line += &format!(
                        ",\"tcp_rtt_s\":{tmed:.7},\"tcp_mbit_per_s\":{:.2},\"round_speedups\":[{}]",
                        eq9(tmed),
                        ratios.join(",")
                    );
                    if !turns.is_empty() {
                        line += &format!(",\"turn_speedups\":[{}]", turns.join(","));
                    }
                }
                println!("{line}}}");
                size *= 4;
            }
            ch.close().await?;
            if let Some(t) = tcp {
                t.close().await?;
            }
        }
        _ => eprintln!("usage: netbench serve|bulk|pingpong ..."),
    }
    Ok(())
}

/// Echoes (or, `echo` false, only takes) messages until the peer closes;
/// a striped channel reports what each link sent per message size.
async fn serve(mut ch: Chan, echo: bool) -> std::io::Result<()> {
    let (mut size, mut before) = (None, ch.sent());
    while let Some(m) = ch.recv().await? {
        if echo {
            if size != Some(m.len()) {
                report_sent(&ch, size, &mut before);
                size = Some(m.len());
            }
            ch.send(m).await?;
        }
    }
    report_sent(&ch, size, &mut before);
    if let Chan::Striped(ch) = ch {
        ch.close().await?;
    }
    Ok(())
}

/// One round trip of `msg`, in seconds.
async fn rtt(ch: &mut Chan, msg: &Bytes) -> std::io::Result<f64> {
    let t = Instant::now();
    ch.send(msg.clone()).await?;
    let back = ch.recv().await?.expect("echo");
    assert_eq!(back.len(), msg.len());
    Ok(t.elapsed().as_secs_f64())
}

/// The median of `n` round trips of `msg` (after two to warm up).
async fn median_rtt(ch: &mut Chan, msg: &Bytes, n: usize) -> std::io::Result<f64> {
    let mut rtts = vec![];
    for _ in 0..n + 2 {
        rtts.push(rtt(ch, msg).await?);
    }
    rtts.drain(..2);
    Ok(median(rtts))
}

/// The medians of `n` round trips of `msg` over `a` and over `b`, taken in
/// turns, one round trip each (a b, b a, a b, ...; `a_first`: which
/// starts), after two each to warm up: both transports see the same
/// moments of this machine, whose round trips drift several-fold within
/// a second (as the hypervisor moves its vCPUs), more than the
/// transports differ.
async fn paired_rtts(a: &mut Chan, b: &mut Chan, msg: &Bytes, n: usize, a_first: bool) -> std::io::Result<(f64, f64)> {
    let (mut ra, mut rb) = (vec![], vec![]);
    for i in 0..n + 2 {
        if (i % 2 == 0) == a_first {
            ra.push(rtt(a, msg).await?);
            rb.push(rtt(b, msg).await?);
        } else {
            rb.push(rtt(b, msg).await?);
            ra.push(rtt(a, msg).await?);
        }
    }
    ra.drain(..2);
    rb.drain(..2);
    Ok((median(ra), median(rb)))
}

/// Round trips each transport takes in a row in [`block_rtts`], and how
/// many of them come first and are not counted.
const BLOCK: usize = 16;
const BLOCK_WARM: usize = 4;

/// The medians of `n` round trips of `msg` over `a` and over `b`, taken in
/// blocks of [`BLOCK`] (+ [`BLOCK_WARM`]) in turns (`a_first`: which
/// starts): each is measured as it runs alone, sustained, within a few
/// milliseconds of the other. Not one round trip each in turns: on a
/// rate-limited link the two share its token buckets, so whatever one
/// does between its round trips moves the other's wait for tokens, and
/// CPU time the link hides when one runs alone shows, and in one
/// transport's round trips only. Measured on netbed 320mbit, TCP against
/// TCP made 1 µs slower per round trip (a spin): single turns 0.983 /
/// 0.9925 / 0.9995 at 1 / 4 / 16 KiB, blocks 0.979 / 1.0025 / 1.001 (from
/// 4 KiB the link's serialization, ~110 µs a message, hides the µs).
async fn block_rtts(a: &mut Chan, b: &mut Chan, msg: &Bytes, n: usize, a_first: bool) -> std::io::Result<(f64, f64)> {
    let (mut ra, mut rb) = (vec![], vec![]);
    let mut a_next = a_first;
    while ra.len() < n || rb.len() < n {
        for first in [a_next, !a_next] {
            let (c, r) = if first { (&mut *a, &mut ra) } else { (&mut *b, &mut rb) };
            for k in 0..BLOCK + BLOCK_WARM {
                let t = rtt(c, msg).await?;
                if k >= BLOCK_WARM {
                    r.push(t);
                }
            }
        }
        a_next = !a_next;
    }
    Ok((median(ra), median(rb)))
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// The bytes each link sent since `before`, for messages of `size`.
fn report_sent(ch: &Chan, size: Option<usize>, before: &mut Vec<u64>) {
    let now = ch.sent();
    if let (Some(size), Chan::Striped(s)) = (size, ch) {
        let sent: Vec<u64> = now.iter().zip(before.iter()).map(|(a, b)| a - b).collect();
        let rates: Vec<u64> = s.stats().rates.iter().map(|r| *r as u64).collect();
        eprintln!("{{\"size\":{size},\"echo_sent\":{sent:?},\"rates\":{rates:?}}}");
    }
    *before = now;
}

async fn connect(links: &str) -> std::io::Result<Striped> {
    let routes: Vec<_> = addrs(links).into_iter().map(|a| (None, a)).collect();
    Striped::connect(&routes).await
}
