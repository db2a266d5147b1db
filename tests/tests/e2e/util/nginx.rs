//! A real nginx on 127.0.0.1 serving a directory (HTTP mirrors), and a
//! small HTTP server that misbehaves on demand (what nginx will not do).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A running nginx, stopped when dropped.
pub struct Nginx {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Nginx {
    /// Serves `root` at `http://127.0.0.1:PORT/`; `rate` (nginx's
    /// `limit_rate`, e.g. "2m") slows each response.
    pub fn serve(root: &Path, rate: Option<&str>) -> Nginx {
        let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("nginx is needed for the HTTP tests (apt-get install nginx-light; .ci/run installs it)");
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let d = dir.path().display();
        let limit = rate.map(|r| format!("limit_rate {r};")).unwrap_or_default();
        let conf = format!(
            "worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/error.log;\n\
             events {{ worker_connections 256; }}\n\
             http {{ access_log off; sendfile on; client_body_temp_path {d}; proxy_temp_path {d};\n\
             fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
             server {{ listen 127.0.0.1:{port}; root {}; {limit} }} }}\n",
            root.display()
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).expect("write nginx.conf");
        let child = Command::new(nginx)
            .arg("-c")
            .arg(dir.path().join("nginx.conf"))
            .stderr(Stdio::null())
            .spawn()
            .expect("start nginx");
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "nginx did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx { child, url: format!("http://127.0.0.1:{port}/"), _dir: dir }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers (SIGKILL would orphan them).
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// How a [`BadServer`] answers the ranges after its first (the probe's,
/// answered correctly).
#[derive(Clone, Copy, Debug)]
pub enum Misbehave {
    /// 200 with the whole file: Range ignored.
    IgnoreRange,
    /// The right headers, half the bytes, then the connection closes.
    ShortBody,
    /// 416.
    NotSatisfiable,
    /// 503.
    Unavailable,
    /// The file grew: `Content-Range` names another total size.
    SizeChanged,
}

/// An HTTP/1.1 server of one file that answers the first range request
/// right and misbehaves after.
pub struct BadServer {
    pub url: String,
}

impl BadServer {
    pub fn start(data: Arc<Vec<u8>>, how: Misbehave) -> BadServer {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        std::thread::spawn(move || {
            for (answered, conn) in l.incoming().enumerate() {
                let Ok(mut s) = conn else { return };
                let data = data.clone();
                let first = answered == 0;
                std::thread::spawn(move || serve(&mut s, &data, how, first));
            }
        });
        BadServer { url: format!("http://127.0.0.1:{port}/f.bin") }
    }
}

fn serve(s: &mut TcpStream, data: &[u8], how: Misbehave, mut good: bool) {
    let mut rd = BufReader::new(s.try_clone().expect("clone"));
    loop {
        let mut range = None;
        let mut line = String::new();
        loop {
            line.clear();
            if rd.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some(r) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                let (a, b) = r.trim().split_once('-').expect("a-b");
                range = Some((a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap()));
            }
        }
        let (a, b) = range.unwrap_or((0, data.len() - 1));
        let n = data.len();
        let head = |status: &str, extra: &str, len: usize| {
            format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\nLast-Modified: Wed, 25 Nov 2026 00:00:00 GMT\r\n{extra}\r\n")
        };
        let ok = |s: &mut TcpStream| {
            let h = head("206 Partial Content", &format!("Content-Range: bytes {a}-{b}/{n}\r\n"), b - a + 1);
            s.write_all(h.as_bytes()).and_then(|_| s.write_all(&data[a..=b]))
        };
        let r = match (good, how) {
            (true, _) => ok(s),
            (false, Misbehave::IgnoreRange) => {
                s.write_all(head("200 OK", "", n).as_bytes()).and_then(|_| s.write_all(data))
            }
            (false, Misbehave::ShortBody) => {
                let h = head("206 Partial Content", &format!("Content-Range: bytes {a}-{b}/{n}\r\n"), b - a + 1);
                let _ = s.write_all(h.as_bytes()).and_then(|_| s.write_all(&data[a..a + (b - a) / 2]));
                return;
            }
            (false, Misbehave::NotSatisfiable) => s.write_all(head("416 Range Not Satisfiable", "", 0).as_bytes()),
            (false, Misbehave::Unavailable) => s.write_all(head("503 Service Unavailable", "", 0).as_bytes()),
            (false, Misbehave::SizeChanged) => {
                let h = head("206 Partial Content", &format!("Content-Range: bytes {a}-{b}/{}\r\n", n + 1), b - a + 1);
                s.write_all(h.as_bytes()).and_then(|_| s.write_all(&data[a..=b]))
            }
        };
        if r.is_err() {
            return;
        }
        good = false;
    }
}
