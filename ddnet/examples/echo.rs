//! A runnable DDNet example on one machine: a listener on two loopback
//! addresses (standing in for two NICs), a client striping messages over
//! both, and an echo. `cargo run --release -p ddnet --example echo`
use std::sync::Arc;

use bytes::Bytes;
use ddnet::{StripeListener, Striped};

#[tokio::main]
async fn main() -> std::io::Result<()> {
    // The receiving side listens on every NIC's address.
    let listener = StripeListener::bind(&["127.0.0.1:0".parse().unwrap(), "127.0.0.2:0".parse().unwrap()]).await?;
    let addrs = listener.local_addrs()?;
    let server = tokio::spawn(async move {
        let ch = listener.accept().await?;
        // Echo every message back, then close our direction too.
        while let Some(m) = ch.recv().await? {
            ch.send(m).await?;
        }
        ch.close().await
    });

    // The client: one (local address, remote address) pair per link.
    let ch = Arc::new(Striped::connect(&[(None, addrs[0]), (None, addrs[1])]).await?);
    for size in [0usize, 1000, 64 * 1024, 8 << 20] {
        let msg = Bytes::from((0..size).map(|i| (i % 251) as u8).collect::<Vec<u8>>());
        let t = std::time::Instant::now();
        ch.send(msg.clone()).await?;
        let back = ch.recv().await?.expect("echoed");
        assert_eq!(back, msg);
        println!("{size:>9} bytes there and back in {:?}", t.elapsed());
    }
    ch.close().await?;
    assert!(ch.recv().await?.is_none());
    server.await.expect("server task")?;
    let s = ch.stats();
    println!("bytes sent per link: {:?}; links alive: {:?}", s.sent, s.alive);
    Ok(())
}
