//! Real TCP links on loopback (127.0.0.1 .. 127.0.0.4 are all local).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use ddnet::{StripeListener, Striped, StripedReader, StripedWriter};
use rand::{Rng, RngCore, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A listener on `n` loopback addresses and a channel connected to it.
async fn pair(n: usize) -> (Striped, Striped) {
    let addrs: Vec<SocketAddr> = (1..=n).map(|i| format!("127.0.0.{i}:0").parse().unwrap()).collect();
    let l = StripeListener::bind(&addrs).await.unwrap();
    let routes: Vec<_> = l.local_addrs().unwrap().into_iter().map(|a| (None, a)).collect();
    let (a, b) = tokio::join!(Striped::connect(&routes), l.accept());
    (a.unwrap(), b.unwrap())
}

fn random(len: usize, seed: u64) -> Bytes {
    let mut v = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut v);
    v.into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_round_trip_over_1_to_4_links() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    for links in 1..=4 {
        let (tx, rx) = tokio::time::timeout(std::time::Duration::from_secs(20), pair(links)).await.expect("pair stuck");
        assert_eq!((tx.links(), rx.links()), (links, links));
        let tx = Arc::new(tx);
        let tx_view = tx.clone();
        let mut sizes = vec![0, 1, 1000, 32 * 1024, 64 * 1024 + 3, 1 << 20, 64 << 20];
        sizes.extend((0..20).map(|_| rng.gen_range(0..3_000_000)));
        let msgs: Vec<Bytes> = sizes.iter().enumerate().map(|(i, &n)| random(n, i as u64)).collect();
        let sender = {
            let msgs = msgs.clone();
            tokio::spawn(async move {
                for m in msgs {
                    tx.send(m).await.unwrap();
                }
                tx.close().await.unwrap();
            })
        };
        for (i, m) in msgs.iter().enumerate() {
            let got = match tokio::time::timeout(std::time::Duration::from_secs(20), rx.recv()).await {
                Ok(r) => r.unwrap().expect("a message"),
                Err(_) => panic!(
                    "{links} links: stuck at message {i}; receiver:\n{}\nsender:\n{}",
                    rx.debug_state(),
                    tx_view.debug_state()
                ),
            };
            assert!(got == *m, "{links} links: message {i} ({} bytes) differs", m.len());
        }
        let t = std::time::Duration::from_secs(20);
        match tokio::time::timeout(t, rx.recv()).await {
            Ok(r) => assert!(r.unwrap().is_none(), "the stream ends after close"),
            Err(_) => panic!("{links} links: no end; rx:\n{}\ntx:\n{}", rx.debug_state(), tx_view.debug_state()),
        }
        if tokio::time::timeout(t, sender).await.is_err() {
            panic!("{links} links: close() stuck; rx:\n{}\ntx:\n{}", rx.debug_state(), tx_view.debug_state());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_directions_at_once() {
    let (a, b) = pair(2).await;
    let (a, b) = (Arc::new(a), Arc::new(b));
    let m = random(5 << 20, 9);
    let (m1, a1, b1) = (m.clone(), a.clone(), b.clone());
    let echo = tokio::spawn(async move {
        while let Some(x) = b1.recv().await.unwrap() {
            b1.send(x).await.unwrap();
        }
        b1.close().await.unwrap();
    });
    for _ in 0..5 {
        a1.send(m1.clone()).await.unwrap();
        assert!(a.recv().await.unwrap().unwrap() == m);
    }
    a.close().await.unwrap();
    assert!(a.recv().await.unwrap().is_none());
    echo.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_messages_both_ways_at_once_past_the_window() {
    // Each side streams 96 MiB (past the 64 MiB window) while the other
    // does the same: the acks each side needs to go on arrive between the
    // long runs of the other's messages.
    const N: usize = 48;
    let msgs: Arc<Vec<Bytes>> = Arc::new((0..4).map(|i| random((2 << 20) + i * 4099, 20 + i as u64)).collect());
    for links in [1, 2] {
        let (a, b) = pair(links).await;
        let (a, b) = (Arc::new(a), Arc::new(b));
        let side = |me: Arc<Striped>, shift: usize| {
            let msgs = msgs.clone();
            let send = {
                let (me, msgs) = (me.clone(), msgs.clone());
                tokio::spawn(async move {
                    for i in 0..N {
                        me.send(msgs[(i + shift) % 4].clone()).await.unwrap();
                    }
                    me.close().await.unwrap();
                })
            };
            tokio::spawn(async move {
                // What the other side sent: its shift is the other one.
                for i in 0..N {
                    let m = me.recv().await.unwrap().expect("a message");
                    assert!(m == msgs[(i + 1 - shift) % 4], "{links} links: message {i} differs");
                }
                assert!(me.recv().await.unwrap().is_none(), "the end after close");
                send.await.unwrap();
            })
        };
        let (ja, jb) = (side(a.clone(), 0), side(b.clone(), 1));
        let t = std::time::Duration::from_secs(60);
        if tokio::time::timeout(t, async { (ja.await.unwrap(), jb.await.unwrap()) }).await.is_err() {
            panic!("{links} links: stuck\na:\n{}\nb:\n{}", a.debug_state(), b.debug_state());
        }
    }
}

/// Forwards one connection to `to` and cuts it (both ways) after `limit`
/// bytes went forward.
async fn cut_after(to: SocketAddr, limit: u64) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (a, _) = l.accept().await.unwrap();
        forward(a, to, limit).await;
    });
    at
}

/// Forwards `a` to `to`; after `limit` bytes forward the connection is
/// cut both ways (what was read past the limit is lost, a frame cut
/// mid-way). `u64::MAX`: forwarded whole, its end passed on.
async fn forward(a: TcpStream, to: SocketAddr, limit: u64) {
    let b = TcpStream::connect(to).await.unwrap();
    let ((mut ar, mut aw), (mut br, mut bw)) = (a.into_split(), b.into_split());
    let back = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut br, &mut aw).await;
    });
    let mut buf = vec![0u8; 64 * 1024];
    let mut moved = 0u64;
    while moved < limit {
        let n = ar.read(&mut buf).await.unwrap_or(0).min((limit - moved) as usize);
        if n == 0 || bw.write_all(&buf[..n]).await.is_err() {
            break;
        }
        moved += n as u64;
    }
    if limit == u64::MAX {
        let _ = bw.shutdown().await;
        let _ = back.await;
    } else {
        back.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_cut_mid_message_loses_nothing() {
    for cut_link in 0..3 {
        let addrs: Vec<SocketAddr> = (1..=3).map(|i| format!("127.0.0.{i}:0").parse().unwrap()).collect();
        let l = StripeListener::bind(&addrs).await.unwrap();
        let real = l.local_addrs().unwrap();
        // Cut once 1 MiB went through that link: early in the 96 MiB (a
        // link may carry only a few MiB in all when the others are faster).
        let via = cut_after(real[cut_link], 1 << 20).await;
        let routes: Vec<_> =
            real.iter().enumerate().map(|(i, &a)| (None, if i == cut_link { via } else { a })).collect();
        let (tx, rx) = tokio::join!(Striped::connect(&routes), l.accept());
        let (tx, rx) = (tx.unwrap(), rx.unwrap());
        let msgs: Vec<Bytes> = (0..4).map(|i| random(24 << 20, 100 + i)).collect();
        let sender = {
            let msgs = msgs.clone();
            tokio::spawn(async move {
                for m in msgs {
                    tx.send(m).await.unwrap();
                }
                tx.close().await.unwrap();
                tx.stats()
            })
        };
        for (i, m) in msgs.iter().enumerate() {
            let got = rx.recv().await.unwrap().expect("a message");
            assert!(got == *m, "cut link {cut_link}: message {i} differs");
        }
        assert!(rx.recv().await.unwrap().is_none());
        let stats = sender.await.unwrap();
        assert!(!stats.alive[cut_link], "{stats:?}");
        assert!(stats.resent > 0, "nothing was in flight on the cut link: {stats:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_messages_on_a_link_cut_mid_stream_lose_nothing() {
    // Short messages go whole on the first link, most written by `send`
    // itself: some answered one by one, some queued behind each other.
    let addrs: Vec<SocketAddr> = (1..=2).map(|i| format!("127.0.0.{i}:0").parse().unwrap()).collect();
    let l = StripeListener::bind(&addrs).await.unwrap();
    let real = l.local_addrs().unwrap();
    let via = cut_after(real[0], 300_000).await;
    let routes = [(None, via), (None, real[1])];
    let (tx, rx) = tokio::join!(Striped::connect(&routes), l.accept());
    let (tx, rx) = (Arc::new(tx.unwrap()), rx.unwrap());
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let msgs: Vec<Bytes> = (0..600).map(|i| random(rng.gen_range(0..4000), 300 + i)).collect();
    let echo = tokio::spawn(async move {
        let mut got = vec![];
        while let Some(m) = rx.recv().await.unwrap() {
            // The first half is answered one by one.
            if got.len() < 300 {
                rx.send(Bytes::new()).await.unwrap();
            }
            got.push(m);
        }
        got
    });
    let exchange = async {
        for (i, m) in msgs.iter().enumerate() {
            tx.send(m.clone()).await.unwrap();
            if i < 300 {
                assert_eq!(tx.recv().await.unwrap().map(|b| b.len()), Some(0), "answer {i}");
            }
        }
        tx.close().await.unwrap();
        echo.await.unwrap()
    };
    let got = tokio::time::timeout(std::time::Duration::from_secs(30), exchange).await.expect("a message was lost");
    assert_eq!(got.len(), msgs.len());
    for (i, (g, m)) in got.iter().zip(&msgs).enumerate() {
        assert!(g == m, "message {i} differs");
    }
    let stats = tx.stats();
    assert!(!stats.alive[0], "the cut link is seen as failed: {stats:?}");
    assert!(stats.sent[0] > 0 && stats.sent[1] > 0, "{stats:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_stream_adapters() {
    let (a, b) = pair(3).await;
    let data = random(10_000_019, 5);
    let d = data.clone();
    let w = tokio::spawn(async move {
        let mut w = StripedWriter::new(Arc::new(a));
        for piece in d.chunks(777_777) {
            w.write_all(piece).await.unwrap();
        }
        w.shutdown().await.unwrap();
    });
    let mut got = vec![];
    StripedReader::new(Arc::new(b)).read_to_end(&mut got).await.unwrap();
    w.await.unwrap();
    assert!(got == data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_does_not_read_holds_the_sender_back() {
    // 160 MiB in 1 MiB messages, more than the 64 MiB window.
    let (a, b) = pair(2).await;
    let a = Arc::new(a);
    let msg = random(1 << 20, 7);
    let sender = {
        let (a, msg) = (a.clone(), msg.clone());
        tokio::spawn(async move {
            for _ in 0..160 {
                a.send(msg.clone()).await.unwrap();
            }
            a.close().await.unwrap();
        })
    };
    // Unread, the messages wait at the receiver only as far as the window
    // lets them: the sender cannot finish (loopback would take ~0.1 s).
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(!sender.is_finished(), "the sender ran ahead of a receiver that read nothing");
    let sent: u64 = a.stats().sent.iter().sum();
    assert!(sent <= 80 << 20, "{sent} bytes went out to a receiver that read nothing");
    // Reading lets it go on, and everything arrives.
    for _ in 0..160 {
        assert!(b.recv().await.unwrap().unwrap() == msg);
    }
    assert!(b.recv().await.unwrap().is_none());
    sender.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_messages_count_against_the_window() {
    use std::sync::atomic::{AtomicU64, Ordering};
    // Each held message counts 64 bytes against the 64 MiB window: at most
    // 1 Mi empty messages wait for a receiver that reads none.
    const BOUND: u64 = (64 << 20) / 64;
    const TOTAL: u64 = BOUND + 1000;
    let (a, b) = pair(2).await;
    let a = Arc::new(a);
    let sent = Arc::new(AtomicU64::new(0));
    let sender = {
        let (a, sent) = (a.clone(), sent.clone());
        tokio::spawn(async move {
            for _ in 0..TOTAL {
                a.send(Bytes::new()).await.unwrap();
                sent.fetch_add(1, Ordering::Relaxed);
            }
            a.close().await.unwrap();
        })
    };
    // Until the sender stops getting anywhere.
    loop {
        let n = sent.load(Ordering::Relaxed);
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        if sent.load(Ordering::Relaxed) == n {
            break;
        }
    }
    let n = sent.load(Ordering::Relaxed);
    assert!(!sender.is_finished() && n <= BOUND, "{n} empty messages went to a receiver that read none");
    for _ in 0..TOTAL {
        assert_eq!(b.recv().await.unwrap().map(|m| m.len()), Some(0));
    }
    assert!(b.recv().await.unwrap().is_none());
    sender.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receivers_in_several_tasks_and_abandoned_receives_lose_nothing() {
    const N: u64 = 2000;
    let (a, b) = pair(2).await;
    let b = Arc::new(b);
    // A receive given up on (timed out before anything came) leaves no
    // message behind and takes none.
    assert!(tokio::time::timeout(std::time::Duration::from_millis(20), b.recv()).await.is_err());
    let receivers: Vec<_> = (0..3)
        .map(|r| {
            let b = b.clone();
            tokio::spawn(async move {
                let mut got = vec![];
                loop {
                    // One receiver abandons receives part way, as in a select
                    // loop; the others wait as long as it takes (each must be
                    // woken, not just the last one to wait).
                    let wait = if r == 0 { std::time::Duration::from_micros(300) } else { std::time::Duration::MAX };
                    match tokio::time::timeout(wait, b.recv()).await {
                        Err(_) => continue,
                        Ok(Ok(Some(m))) => got.push(u64::from_be_bytes(m[..8].try_into().unwrap())),
                        Ok(Ok(None)) => return got,
                        Ok(Err(e)) => panic!("recv: {e}"),
                    }
                }
            })
        })
        .collect();
    for i in 0..N {
        a.send(Bytes::copy_from_slice(&i.to_be_bytes())).await.unwrap();
        if i % 97 == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }
    a.close().await.unwrap();
    let mut all = vec![];
    for r in receivers {
        let got =
            tokio::time::timeout(std::time::Duration::from_secs(30), r).await.expect("a receiver never woke").unwrap();
        assert!(got.windows(2).all(|w| w[0] < w[1]), "each receiver sees its messages in order");
        all.extend(got);
    }
    all.sort_unstable();
    assert_eq!(all, (0..N).collect::<Vec<_>>(), "every message taken exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_taken_and_never_answered_is_acknowledged_once_the_receiver_waits_again() {
    let (a, b) = pair(2).await;
    a.send(Bytes::from_static(b"one-way")).await.unwrap();
    assert_eq!(b.recv().await.unwrap().as_deref(), Some(&b"one-way"[..]));
    // The receiver sends nothing back and waits for more: the ack goes out
    // alone (the sender's window is freed without its having to close).
    let b = Arc::new(b);
    let waiting = {
        let b = b.clone();
        tokio::spawn(async move { b.recv().await.unwrap() })
    };
    let t = std::time::Instant::now();
    while !a.debug_state().contains("unacked [] (0 B)") {
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "never acknowledged: {}", a.debug_state());
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    a.close().await.unwrap();
    assert_eq!(waiting.await.unwrap(), None, "the end, once the sender closed");
}

/// Forwards every connection to `to`; the first is cut (both ways) after
/// `limit` bytes went forward, the others are forwarded whole.
async fn cut_first(to: SocketAddr, limit: u64) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = l.local_addr().unwrap();
    tokio::spawn(async move {
        let mut limit = Some(limit);
        while let Ok((a, _)) = l.accept().await {
            tokio::spawn(forward(a, to, limit.take().unwrap_or(u64::MAX)));
        }
    });
    at
}

/// A link lost mid-stream comes back on a new connection (the sending end
/// connects it again, the receiving end takes it back) and carries its
/// part again; a connection naming another session is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_link_comes_back_and_carries_its_part_again() {
    let addrs: Vec<SocketAddr> = (1..=3).map(|i| format!("127.0.0.{i}:0").parse().unwrap()).collect();
    let l = Arc::new(StripeListener::bind(&addrs).await.unwrap());
    let real = l.local_addrs().unwrap();
    let cut = 1;
    let via = cut_first(real[cut], 1 << 20).await;
    let routes: Vec<_> = real.iter().enumerate().map(|(i, &a)| (None, if i == cut { via } else { a })).collect();
    let (tx, rx) = tokio::join!(Striped::connect(&routes), l.accept());
    let (tx, rx) = (tx.unwrap(), rx.unwrap());
    let (relink, rx_relink) = (tx.relink(), rx.relink());
    let back = {
        let (l, r) = (l.clone(), rx.relink());
        tokio::spawn(async move { l.take_back(r).await })
    };
    let msgs: Vec<Bytes> = (0..6).map(|i| random(16 << 20, 200 + i)).collect();
    let receiver = {
        let n = msgs.len();
        tokio::spawn(async move {
            let mut got = vec![];
            for _ in 0..n {
                got.push(rx.recv().await.unwrap().expect("a message"));
            }
            assert!(rx.recv().await.unwrap().is_none());
            (got, rx.stats())
        })
    };
    tx.send(msgs[0].clone()).await.unwrap();
    let lost = async {
        while relink.lost() != [cut] || rx_relink.lost() != [cut] {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), lost).await.expect("the cut is seen at both ends");
    // A stranger naming another session, for the lost link's index.
    let mut stranger = TcpStream::connect(real[cut]).await.unwrap();
    let mut hello = vec![];
    ddnet::wire::Frame::Hello { session: 7, index: cut as u32, count: 3 }.encode(&mut hello, &mut Default::default());
    stranger.write_all(&hello).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(rx_relink.lost(), [cut], "a link of another session is refused");
    let before = tx.stats().sent[cut];
    relink.reconnect(cut).await.unwrap();
    assert!(relink.lost().is_empty());
    for m in &msgs[1..] {
        tx.send(m.clone()).await.unwrap();
    }
    tx.close().await.unwrap();
    let (got, rx_stats) = tokio::time::timeout(std::time::Duration::from_secs(30), receiver).await.unwrap().unwrap();
    for (i, (g, m)) in got.iter().zip(&msgs).enumerate() {
        assert!(g == m, "message {i} differs");
    }
    // (Links close as the receiver ends: `alive` says nothing now.)
    let stats = tx.stats();
    assert_eq!(stats.returned, [0, 1, 0], "{stats:?}");
    assert_eq!(rx_stats.returned, [0, 1, 0], "{rx_stats:?}");
    assert!(stats.sent[cut] > before, "the link carried its part again: {stats:?} (before: {before})");
    back.abort();
}
