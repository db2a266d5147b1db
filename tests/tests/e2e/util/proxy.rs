//! A forward proxy for the tests: `CONNECT host:port` tunnels, and a
//! request naming an absolute URL is passed on to that URL's host (with
//! everything after it on the connection). It counts the connections it
//! carried.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub struct Proxy {
    pub url: String,
    carried: Arc<AtomicUsize>,
}

impl Proxy {
    pub fn start() -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", l.local_addr().expect("addr"));
        let carried = Arc::new(AtomicUsize::new(0));
        let count = carried.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { return };
                let count = count.clone();
                std::thread::spawn(move || carry(c, &count));
            }
        });
        Proxy { url, carried }
    }

    pub fn carried(&self) -> usize {
        self.carried.load(Ordering::SeqCst)
    }
}

/// Reads the first request's head and joins the client to its target.
fn carry(client: TcpStream, count: &AtomicUsize) -> Option<()> {
    let mut rd = BufReader::new(client.try_clone().ok()?);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if rd.read_line(&mut line).ok()? == 0 {
            return None;
        }
        head.push_str(&line);
        if line == "\r\n" {
            break;
        }
    }
    let mut words = head.split_whitespace();
    let (method, target) = (words.next()?, words.next()?);
    let mut upstream;
    if method == "CONNECT" {
        upstream = TcpStream::connect(target).ok()?;
        (&client).write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").ok()?;
    } else {
        let authority = target.strip_prefix("http://")?.split('/').next()?;
        upstream = TcpStream::connect(authority).ok()?;
        upstream.write_all(head.as_bytes()).ok()?;
    }
    count.fetch_add(1, Ordering::SeqCst);
    // What the reader holds already, then both ways until either side ends.
    upstream.write_all(rd.buffer()).ok()?;
    let (mut up_rd, mut down_wr) = (upstream.try_clone().ok()?, client.try_clone().ok()?);
    let back = std::thread::spawn(move || {
        let _ = std::io::copy(&mut up_rd, &mut down_wr);
        let _ = down_wr.shutdown(std::net::Shutdown::Write);
    });
    let mut client_rd = rd.into_inner();
    let _ = std::io::copy(&mut client_rd, &mut upstream);
    let _ = upstream.shutdown(std::net::Shutdown::Write);
    let _ = back.join();
    Some(())
}
