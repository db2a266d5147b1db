//! A web server that keeps the head of every request it is sent, for
//! checking what a client gives away (credentials, headers) and to whom.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// What the server answers every request with.
#[derive(Clone)]
pub enum Answer {
    /// 200 with this body, whole (Range ignored).
    Body(Vec<u8>),
    /// 302 to this location.
    Redirect(String),
    /// This status, no body.
    Status(u16),
}

/// The heads a [`capturing`] server was sent, in order.
pub type Heads = Arc<Mutex<Vec<String>>>;

/// A web server on `addr` (port 0 for any) that answers every request
/// with `answer` and keeps each request's head; its address and the heads.
pub fn capturing(addr: &str, answer: Answer) -> (String, Heads) {
    let l = TcpListener::bind(addr).unwrap();
    let at = l.local_addr().unwrap().to_string();
    let heads = Arc::new(Mutex::new(vec![]));
    let kept = heads.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let (answer, kept) = (answer.clone(), kept.clone());
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                loop {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if line == "\r\n" {
                            break;
                        }
                        head.push_str(&line);
                    }
                    kept.lock().unwrap().push(head);
                    let (reply, body) = match &answer {
                        Answer::Body(data) => {
                            (format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", data.len()), &data[..])
                        }
                        Answer::Redirect(to) => {
                            (format!("HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\n\r\n"), &[][..])
                        }
                        Answer::Status(code) => (format!("HTTP/1.1 {code} No\r\nContent-Length: 0\r\n\r\n"), &[][..]),
                    };
                    if s.write_all(reply.as_bytes()).and_then(|()| s.write_all(body)).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (at, heads)
}
