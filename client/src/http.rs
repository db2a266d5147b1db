//! HTTP mirrors as producers: any server that honours `Range`. A mirror
//! is a URL; a producer of it fetches runs of blocks with `Range` requests
//! on a few keep-alive connections of its own (so the link does not idle
//! between ranges), and every reply is checked before a byte is used:
//! `206`, the `Content-Range` asked for, of the size agreed on, and exactly
//! that many bytes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{self, HeaderMap};
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// How long connecting and each reply's head may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// One HTTP mirror of the file: where to send `GET`s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpMirror {
    /// As the user gave it (with PATH appended to a directory URL).
    pub url: String,
    pub host: String,
    pub port: u16,
    /// The request target: the URL's path (and query), percent-encoded.
    pub target: String,
}

/// What goes wrong with an HTTP mirror.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0:?}: {1}")]
    BadUrl(String, &'static str),
    #[error("connect: {0}")]
    Connect(std::io::Error),
    #[error("timed out")]
    Timeout,
    #[error("{0}")]
    Http(#[from] hyper::Error),
    #[error("HTTP {0}")]
    Status(StatusCode),
    #[error("it ignores Range requests (answered 200 with the whole file)")]
    IgnoresRange,
    #[error("asked for bytes {asked}, it answered Content-Range {got:?}")]
    WrongRange { asked: String, got: String },
    #[error("the file's size is now {now}, not {was}: it changed")]
    Changed { was: u64, now: u64 },
    #[error("asked for {want} bytes, it sent {got}")]
    ShortBody { want: u64, got: u64 },
}

impl HttpMirror {
    /// `http://host[:port]/path`; one ending in `/` is a directory, and
    /// `path` (the file asked for) is appended to it.
    pub fn parse(url: &str, path: &str) -> Result<HttpMirror, HttpError> {
        let bad = |why| HttpError::BadUrl(url.to_string(), why);
        let rest = match url.split_once("://") {
            Some(("http", rest)) => rest,
            Some(("https", _)) => return Err(bad("https is not supported yet (plain http only)")),
            _ => return Err(bad("not an http:// URL")),
        };
        let (authority, target) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() || authority.contains('@') {
            return Err(bad("no host (or user info, which is not supported)"));
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h.to_string(), p.parse().map_err(|_| bad("bad port"))?)
            }
            _ => (authority.to_string(), 80),
        };
        let (target, url) = if target.ends_with('/') {
            let enc = encode_path(path.trim_start_matches('/'));
            (format!("{target}{enc}"), format!("{url}{}", path.trim_start_matches('/')))
        } else {
            (target.to_string(), url.to_string())
        };
        Ok(HttpMirror { url, host, port, target })
    }

    fn host_header(&self) -> String {
        if self.port == 80 {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Percent-encodes a path for a request target, keeping `/`.
fn encode_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for &b in p.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// What a mirror says of its file before data moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpVersion {
    pub size: u64,
    /// The probe's round trip on an open connection.
    pub rtt: Duration,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

/// One keep-alive connection to a mirror.
pub struct Lane {
    mirror: Arc<HttpMirror>,
    sender: Option<SendRequest<Empty<Bytes>>>,
}

impl Lane {
    pub fn new(mirror: Arc<HttpMirror>) -> Lane {
        Lane { mirror, sender: None }
    }

    async fn connect(&mut self) -> Result<&mut SendRequest<Empty<Bytes>>, HttpError> {
        if self.sender.as_ref().is_some_and(|s| !s.is_closed()) {
            return Ok(self.sender.as_mut().expect("checked"));
        }
        let m = &self.mirror;
        let fut = async {
            let sock = TcpStream::connect((m.host.trim_start_matches('[').trim_end_matches(']'), m.port))
                .await
                .map_err(HttpError::Connect)?;
            sock.set_nodelay(true).map_err(HttpError::Connect)?;
            let (sender, conn) = http1::handshake(TokioIo::new(sock)).await?;
            tokio::spawn(conn);
            Ok::<_, HttpError>(sender)
        };
        let sender = tokio::time::timeout(TIMEOUT, fut).await.map_err(|_| HttpError::Timeout)??;
        Ok(self.sender.insert(sender))
    }

    /// Sends `GET` with `Range: bytes=a-b`; the reply's status and headers.
    async fn ask(&mut self, a: u64, b: u64) -> Result<hyper::Response<hyper::body::Incoming>, HttpError> {
        let req = Request::get(&self.mirror.target)
            .header(header::HOST, self.mirror.host_header())
            .header(header::RANGE, format!("bytes={a}-{b}"))
            .header(header::USER_AGENT, concat!("ddftp/", env!("CARGO_PKG_VERSION")))
            .body(Empty::new())
            .expect("a valid request");
        let sender = self.connect().await?;
        sender.ready().await?;
        tokio::time::timeout(TIMEOUT, sender.send_request(req))
            .await
            .map_err(|_| HttpError::Timeout)?
            .map_err(Into::into)
    }

    /// `r`, and a connection that failed is not used again (it may hold the
    /// rest of a reply we will not read).
    fn settle<T>(&mut self, r: Result<T, HttpError>) -> Result<T, HttpError> {
        if r.is_err() {
            self.sender = None;
        }
        r
    }

    /// What the mirror says of its file: its size (from a one-byte range,
    /// which also shows it honours `Range`), `ETag` and `Last-Modified`.
    pub async fn probe(&mut self) -> Result<HttpVersion, HttpError> {
        let r = self.probe_once().await;
        self.settle(r)
    }

    async fn probe_once(&mut self) -> Result<HttpVersion, HttpError> {
        self.connect().await?;
        let asked = std::time::Instant::now();
        let resp = self.ask(0, 0).await?;
        let rtt = asked.elapsed();
        let text = |n: header::HeaderName| resp.headers().get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
        let (etag, last_modified) = (text(header::ETAG), text(header::LAST_MODIFIED));
        let size = match resp.status() {
            StatusCode::PARTIAL_CONTENT => match content_range(resp.headers()) {
                Some((_, _, total)) => total,
                None => {
                    let got = text(header::CONTENT_RANGE).unwrap_or_default();
                    return Err(HttpError::WrongRange { asked: "0-0".into(), got });
                }
            },
            // An empty file has no byte 0.
            StatusCode::RANGE_NOT_SATISFIABLE if text(header::CONTENT_RANGE).as_deref() == Some("bytes */0") => 0,
            s => return Err(unexpected(s)),
        };
        drain(resp, 1).await?;
        Ok(HttpVersion { size, rtt, etag, last_modified })
    }

    /// Bytes `a..=b` of a file of `size` bytes, checked: `206`, that range
    /// of that size, exactly that many bytes.
    pub async fn fetch(&mut self, a: u64, b: u64, size: u64) -> Result<Bytes, HttpError> {
        let r = self.fetch_once(a, b, size).await;
        self.settle(r)
    }

    async fn fetch_once(&mut self, a: u64, b: u64, size: u64) -> Result<Bytes, HttpError> {
        let resp = self.ask(a, b).await?;
        if resp.status() != StatusCode::PARTIAL_CONTENT {
            return Err(unexpected(resp.status()));
        }
        match content_range(resp.headers()) {
            Some((x, y, total)) if (x, y) == (a, b) && total == size => {}
            Some((_, _, total)) if total != size => return Err(HttpError::Changed { was: size, now: total }),
            _ => {
                let got = resp.headers().get(header::CONTENT_RANGE).and_then(|v| v.to_str().ok()).unwrap_or("none");
                return Err(HttpError::WrongRange { asked: format!("{a}-{b}"), got: got.to_string() });
            }
        }
        let want = b - a + 1;
        let body = drain(resp, want).await?;
        match body.len() as u64 {
            got if got == want => Ok(body),
            got => Err(HttpError::ShortBody { want, got }),
        }
    }
}

/// A status other than the one asked for. A 200 is a whole file we did
/// not ask for: never read.
fn unexpected(s: StatusCode) -> HttpError {
    match s {
        StatusCode::OK => HttpError::IgnoresRange,
        s => HttpError::Status(s),
    }
}

/// The body, at most `limit` bytes (more is an error, not a read).
async fn drain(resp: hyper::Response<hyper::body::Incoming>, limit: u64) -> Result<Bytes, HttpError> {
    let body = Limited::new(resp.into_body(), limit as usize);
    let read = tokio::time::timeout(TIMEOUT + Duration::from_secs(limit / (64 << 10)), body.collect()).await;
    match read {
        Err(_) => Err(HttpError::Timeout),
        Ok(Ok(c)) => Ok(c.to_bytes()),
        Ok(Err(e)) => match e.downcast::<hyper::Error>() {
            Ok(h) => Err(HttpError::Http(*h)),
            Err(_) => Err(HttpError::ShortBody { want: limit, got: limit + 1 }),
        },
    }
}

/// `Content-Range: bytes A-B/TOTAL`.
fn content_range(h: &HeaderMap) -> Option<(u64, u64, u64)> {
    let v = h.get(header::CONTENT_RANGE)?.to_str().ok()?;
    let (range, total) = v.strip_prefix("bytes ")?.split_once('/')?;
    let (a, b) = range.split_once('-')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?, total.trim().parse().ok()?))
}

/// Whether a `--mirrors` entry is a URL rather than `host[:port]`.
pub fn is_url(s: &str) -> bool {
    s.starts_with("http://") || s.starts_with("https://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_file_or_a_directory() {
        let m = HttpMirror::parse("http://example.org:8080/pub/", "a dir/f+1.iso").unwrap();
        assert_eq!((m.host.as_str(), m.port), ("example.org", 8080));
        assert_eq!(m.target, "/pub/a%20dir/f%2B1.iso");
        assert_eq!(m.url, "http://example.org:8080/pub/a dir/f+1.iso");
        let m = HttpMirror::parse("http://example.org/x/f.iso", "ignored").unwrap();
        assert_eq!((m.port, m.target.as_str()), (80, "/x/f.iso"));
        assert!(HttpMirror::parse("ftp://x/", "f").is_err());
        assert!(HttpMirror::parse("http:///f", "f").is_err());
    }

    #[test]
    fn content_range_is_read_exactly() {
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_RANGE, "bytes 10-19/100".parse().unwrap());
        assert_eq!(content_range(&h), Some((10, 19, 100)));
        h.insert(header::CONTENT_RANGE, "bytes */100".parse().unwrap());
        assert_eq!(content_range(&h), None);
    }
}
