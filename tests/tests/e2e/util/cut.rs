//! A TCP forwarder that loses a link: every connection is forwarded to
//! the target; the first one is cut (both ways, as a pulled cable) once
//! `limit` bytes went forward, and for `down` after that nothing listens
//! (connections are refused) before it forwards again.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A forwarder's address and what it saw.
pub struct Cut {
    pub at: SocketAddr,
    seen: Arc<Seen>,
}

#[derive(Default)]
struct Seen {
    /// The first connection was cut and the port listens again.
    back: AtomicBool,
    /// Bytes forwarded toward the target by the connections after it.
    after: AtomicU64,
}

impl Cut {
    /// Whether the first connection was cut and the port listens again.
    pub fn back(&self) -> bool {
        self.seen.back.load(Ordering::SeqCst)
    }

    /// Bytes the later connections carried toward the target.
    pub fn carried_after(&self) -> u64 {
        self.seen.after.load(Ordering::SeqCst)
    }
}

/// Listens on a loopback port.
pub fn cut_first(to: SocketAddr, limit: u64, down: Duration) -> Cut {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let at = l.local_addr().expect("addr");
    let seen = Arc::new(Seen::default());
    let shared = seen.clone();
    std::thread::spawn(move || {
        let Ok((a, _)) = l.accept() else { return };
        let (cut_tx, cut) = std::sync::mpsc::channel();
        forward(a, to, limit, Some(cut_tx), None);
        // Away: the port refuses connections, then listens again.
        let _ = cut.recv();
        drop(l);
        std::thread::sleep(down);
        let l = TcpListener::bind(at).expect("bind again");
        shared.back.store(true, Ordering::SeqCst);
        for a in l.incoming() {
            let Ok(a) = a else { return };
            forward(a, to, u64::MAX, None, Some(shared.clone()));
        }
    });
    Cut { at, seen }
}

/// Forwards `a` to `to`, cut after `limit` bytes forward (`cut` told
/// then), counting them in `seen` if given.
fn forward(
    a: TcpStream,
    to: SocketAddr,
    limit: u64,
    cut: Option<std::sync::mpsc::Sender<()>>,
    seen: Option<Arc<Seen>>,
) {
    let Ok(b) = TcpStream::connect(to) else { return };
    let (mut a2, mut b2) = (a.try_clone().expect("clone"), b.try_clone().expect("clone"));
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut b2, &mut a2);
        let _ = a2.shutdown(Shutdown::Write);
    });
    std::thread::spawn(move || {
        let (mut a, mut b) = (a, b);
        let mut buf = vec![0u8; 64 << 10];
        let mut moved = 0u64;
        while moved < limit {
            let n = a.read(&mut buf).unwrap_or(0).min((limit - moved) as usize);
            if n == 0 || b.write_all(&buf[..n]).is_err() {
                break;
            }
            moved += n as u64;
            if let Some(seen) = &seen {
                seen.after.fetch_add(n as u64, Ordering::SeqCst);
            }
        }
        match cut {
            None => {
                let _ = b.shutdown(Shutdown::Write);
            }
            Some(told) => {
                let _ = b.shutdown(Shutdown::Both);
                let _ = a.shutdown(Shutdown::Both);
                let _ = told.send(());
            }
        }
    });
}
