//! A real nginx on 127.0.0.1 serving a directory (HTTP mirrors), and a
//! small HTTP server that misbehaves on demand (what nginx will not do).

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A running nginx, stopped when dropped.
pub struct Nginx {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

/// A certificate and its key (PEM files) for nginx's HTTPS.
pub struct Cert {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

impl Nginx {
    /// Serves `root` at `http://127.0.0.1:PORT/`; `rate` (nginx's
    /// `limit_rate`, e.g. "2m") slows each response.
    pub fn serve(root: &Path, rate: Option<&str>) -> Nginx {
        Nginx::start(root, rate, None, "")
    }

    /// The same over HTTPS with `cert`.
    pub fn serve_tls(root: &Path, cert: &Cert) -> Nginx {
        Nginx::start(root, None, Some(cert), "")
    }

    /// With `extra` server-level configuration (e.g. a redirect).
    pub fn start(root: &Path, rate: Option<&str>, tls: Option<&Cert>, extra: &str) -> Nginx {
        let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("nginx is needed for the HTTP tests (apt-get install nginx-light; .ci/run installs it)");
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let d = dir.path().display();
        let limit = rate.map(|r| format!("limit_rate {r};")).unwrap_or_default();
        let (ssl, scheme) = match tls {
            Some(c) => (
                format!(" ssl; ssl_certificate {}; ssl_certificate_key {};", c.cert.display(), c.key.display()),
                "https",
            ),
            None => (";".to_string(), "http"),
        };
        let conf = format!(
            "worker_processes 1; daemon off; pid {d}/nginx.pid; error_log {d}/error.log;\n\
             events {{ worker_connections 256; }}\n\
             http {{ access_log off; sendfile on; client_body_temp_path {d}; proxy_temp_path {d};\n\
             fastcgi_temp_path {d}; uwsgi_temp_path {d}; scgi_temp_path {d};\n\
             server {{ listen 127.0.0.1:{port}{ssl} root {}; {limit} {extra} }} }}\n",
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
        Nginx { child, url: format!("{scheme}://127.0.0.1:{port}/"), _dir: dir }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM: the master stops its workers (SIGKILL would orphan them).
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
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
    /// 503 with `Retry-After: 1` to every request for more than byte 0
    /// (the probe's) during half a second from the first, then right.
    UnavailableAWhile,
    /// Never: every answer right, with a `Repr-Digest` of the file.
    Never,
    /// Every answer right, with a `Repr-Digest` of other bytes.
    WrongDigest,
    /// Every answer right, then the connection closed (`Connection: close`).
    OneReplyPerConnection,
    /// Every answer a 302 to a target with bytes no request may hold as
    /// they are (`<`, `>`, a backtick, `"`).
    RedirectOdd,
    /// Every answer a 302 to a 70,000-byte target.
    RedirectLong,
    /// Every answer right, no digest.
    Plain,
    /// Range replies (not the probe's) in chunked framing with a
    /// `Content-Length` too (the framing cut to that length).
    TeAndCl,
    /// Range replies (not the probe's) saying `Content-Encoding: gzip`.
    Gzip,
    /// From the third request on, other bytes of the same size under a
    /// new `Last-Modified`; an `If-Range` naming the old one gets 200 and
    /// the whole new file (as nginx answers).
    Replaced,
    /// Every answer a redirect to the same file, each after 20 s.
    SlowRedirect,
    /// Its first connection answers after 5 s; the others right away.
    SlowFirst,
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
            let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            for (answered, conn) in l.incoming().enumerate() {
                let Ok(mut s) = conn else { return };
                let (data, asked) = (data.clone(), asked.clone());
                let first = answered == 0;
                std::thread::spawn(move || serve(&mut s, &data, how, first, &asked));
            }
        });
        BadServer { url: format!("http://127.0.0.1:{port}/f.bin") }
    }
}

/// The whole reply of the misbehaving kinds that answer every request
/// their own way (`None`: answered as usual).
fn misbehaving(
    how: Misbehave,
    data: &[u8],
    (a, b): (usize, usize),
    if_range: Option<&str>,
    asked: &std::sync::atomic::AtomicUsize,
) -> Option<Vec<u8>> {
    let n = data.len();
    let probe = (a, b) == (0, 0);
    let lm = "Wed, 25 Nov 2026 00:00:00 GMT";
    let range = |lm: &str, extra: &str, body: &[u8], len: usize| {
        let mut r = format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {a}-{b}/{n}\r\nContent-Length: {len}\r\nLast-Modified: {lm}\r\n{extra}\r\n"
        )
        .into_bytes();
        r.extend_from_slice(body);
        r
    };
    match how {
        Misbehave::TeAndCl if !probe => {
            let mut chunked = format!("{:x}\r\n", b - a + 1).into_bytes();
            chunked.extend_from_slice(&data[a..=b]);
            chunked.extend_from_slice(b"\r\n0\r\n\r\n");
            chunked.truncate(b - a + 1);
            Some(range(lm, "Transfer-Encoding: chunked\r\n", &chunked, b - a + 1))
        }
        Misbehave::SlowRedirect => {
            std::thread::sleep(std::time::Duration::from_secs(20));
            Some(b"HTTP/1.1 302 Found\r\nLocation: /f.bin\r\nContent-Length: 0\r\n\r\n".to_vec())
        }
        Misbehave::Gzip if !probe => {
            // Encoded bytes are not the range's (here: of the same length).
            let encoded: Vec<u8> = data[a..=b].iter().map(|x| x ^ 0xaa).collect();
            Some(range(lm, "Content-Encoding: gzip\r\n", &encoded, b - a + 1))
        }
        Misbehave::Replaced => {
            let new = asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst) >= 2;
            if !new {
                return Some(range(lm, "", &data[a..=b], b - a + 1));
            }
            let alt: Vec<u8> = data.iter().map(|x| x ^ 0x55).collect();
            let lm2 = "Thu, 26 Nov 2026 00:00:00 GMT";
            if if_range.is_some_and(|v| v != lm2) {
                let mut r =
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\nLast-Modified: {lm2}\r\n\r\n").into_bytes();
                r.extend_from_slice(&alt);
                return Some(r);
            }
            Some(range(lm2, "", &alt[a..=b], b - a + 1))
        }
        _ => None,
    }
}

fn serve(s: &mut TcpStream, data: &[u8], how: Misbehave, mut good: bool, asked: &std::sync::atomic::AtomicUsize) {
    use sha2::Digest;
    let digest = match how {
        Misbehave::Never => Some(base64(&sha2::Sha256::digest(data))),
        Misbehave::WrongDigest => Some(base64(&sha2::Sha256::digest(b"other bytes"))),
        _ => None,
    };
    let digest = digest.map(|d| format!("Repr-Digest: sha-256=:{d}:\r\n")).unwrap_or_default();
    if matches!(how, Misbehave::SlowFirst) && good {
        std::thread::sleep(std::time::Duration::from_secs(5));
    }
    let mut rd = BufReader::new(s.try_clone().expect("clone"));
    loop {
        let mut range = None;
        let mut if_range = None;
        let mut line = String::new();
        loop {
            line.clear();
            if rd.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.strip_prefix("If-Range: ").or_else(|| line.strip_prefix("if-range: ")) {
                if_range = Some(v.trim().to_string());
            }
            if let Some(r) = line.to_ascii_lowercase().strip_prefix("range: bytes=") {
                let (a, b) = r.trim().split_once('-').expect("a-b");
                range = Some((a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap()));
            }
        }
        let (a, b) = range.unwrap_or((0, data.len() - 1));
        if let Some(reply) = misbehaving(how, data, (a, b), if_range.as_deref(), asked) {
            if s.write_all(&reply).is_err() {
                return;
            }
            continue;
        }
        let location = match how {
            Misbehave::RedirectOdd => Some("/a<b>c`d\"e".to_string()),
            Misbehave::RedirectLong => Some(format!("/{}", "a".repeat(70_000))),
            _ => None,
        };
        if let Some(l) = location {
            let reply = format!("HTTP/1.1 302 Found\r\nLocation: {l}\r\nContent-Length: 0\r\n\r\n");
            if s.write_all(reply.as_bytes()).is_err() {
                return;
            }
            continue;
        }
        if let Misbehave::UnavailableAWhile = how {
            // The probe asks for byte 0 alone; `asked` holds when the
            // first other request came (ms since the epoch).
            let now = std::time::UNIX_EPOCH.elapsed().unwrap().as_millis() as usize;
            let first = asked.compare_exchange(0, now, SeqCst, SeqCst).map_or_else(|was| was, |_| now);
            good = (a, b) == (0, 0) || now.saturating_sub(first) > 500;
        }
        let n = data.len();
        let head = |status: &str, extra: &str, len: usize| {
            format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\nLast-Modified: Wed, 25 Nov 2026 00:00:00 GMT\r\n{digest}{extra}\r\n")
        };
        let ok = |s: &mut TcpStream| {
            let h = head("206 Partial Content", &format!("Content-Range: bytes {a}-{b}/{n}\r\n"), b - a + 1);
            s.write_all(h.as_bytes()).and_then(|_| s.write_all(&data[a..=b]))
        };
        let r = match (good, how) {
            (_, Misbehave::OneReplyPerConnection) => {
                let h = head(
                    "206 Partial Content",
                    &format!("Content-Range: bytes {a}-{b}/{n}\r\nConnection: close\r\n"),
                    b - a + 1,
                );
                let _ = s.write_all(h.as_bytes()).and_then(|_| s.write_all(&data[a..=b]));
                // Closing with a pipelined request unread would reset the
                // connection and cut the reply short in the client's
                // buffer: close as nginx does (lingering), our side first,
                // then read until the client closes.
                let _ = s.shutdown(std::net::Shutdown::Write);
                let _ = s.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let _ = std::io::copy(&mut rd, &mut std::io::sink());
                return;
            }
            // The kinds answered above, or answering right.
            (true, _)
            | (
                _,
                Misbehave::Never
                | Misbehave::WrongDigest
                | Misbehave::RedirectOdd
                | Misbehave::RedirectLong
                | Misbehave::Plain
                | Misbehave::TeAndCl
                | Misbehave::Gzip
                | Misbehave::Replaced
                | Misbehave::SlowRedirect
                | Misbehave::SlowFirst,
            ) => ok(s),
            (false, Misbehave::UnavailableAWhile) => {
                s.write_all(head("503 Service Unavailable", "Retry-After: 1\r\n", 0).as_bytes())
            }
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
        // Misbehaving once is enough for some.
        good = matches!(how, Misbehave::UnavailableAWhile | Misbehave::Never | Misbehave::WrongDigest);
    }
}

/// Standard base64 with padding.
fn base64(b: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A private CA and a certificate it signed for 127.0.0.1 (or, with
/// `name`, only for that DNS name), made with the openssl command in `dir`.
pub fn test_ca(dir: &Path, name: Option<&str>) -> (std::path::PathBuf, Cert) {
    let run = |args: &str, subj: Option<&str>| {
        let mut cmd = Command::new("openssl");
        cmd.args(args.split_whitespace()).current_dir(dir).stderr(Stdio::null());
        if let Some(s) = subj {
            cmd.args(["-subj", s]);
        }
        assert!(cmd.status().expect("openssl is needed for the HTTPS tests").success(), "openssl {args}");
    };
    let key = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
    run(&format!("req -x509 {key} -keyout ca.key -out ca.pem -days 2"), Some("/CN=ddftp test CA"));
    run(&format!("req {key} -keyout srv.key -out srv.csr"), Some("/CN=ddftp test server"));
    let san = match name {
        Some(n) => format!("subjectAltName=DNS:{n}"),
        None => "subjectAltName=IP:127.0.0.1".into(),
    };
    std::fs::write(dir.join("ext.cnf"), format!("{san}\n")).expect("ext.cnf");
    run("x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile ext.cnf", None);
    (dir.join("ca.pem"), Cert { cert: dir.join("srv.pem"), key: dir.join("srv.key") })
}
