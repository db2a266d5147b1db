//! A TCP forwarder that loses a link: every connection is forwarded to
//! the target; the first one is cut (both ways, as a pulled cable) once
//! `limit` bytes went forward, and for `down` after that nothing listens
//! (connections are refused) before it forwards again.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

/// Listens on a loopback port; returns its address.
pub fn cut_first(to: SocketAddr, limit: u64, down: Duration) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let at = l.local_addr().expect("addr");
    std::thread::spawn(move || {
        let Ok((a, _)) = l.accept() else { return };
        let (cut_tx, cut) = std::sync::mpsc::channel();
        forward(a, to, limit, Some(cut_tx));
        // Away: the port refuses connections, then listens again.
        let _ = cut.recv();
        drop(l);
        std::thread::sleep(down);
        let l = TcpListener::bind(at).expect("bind again");
        for a in l.incoming() {
            let Ok(a) = a else { return };
            forward(a, to, u64::MAX, None);
        }
    });
    at
}

/// Forwards `a` to `to`, cut after `limit` bytes forward (`cut` told then).
fn forward(a: TcpStream, to: SocketAddr, limit: u64, cut: Option<std::sync::mpsc::Sender<()>>) {
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
