//! HTTP(S) mirrors as producers: any server that honours `Range`. A
//! mirror is a URL; a producer of it fetches runs of blocks with `Range`
//! requests on a few keep-alive connections of its own (so the link does
//! not idle between ranges), and every reply is checked before a byte is
//! used: `206`, the `Content-Range` asked for, of the size agreed on, and
//! exactly that many bytes.
//!
//! hyper 1 (its low-level `client::conn`): we choose the connections,
//! how many and when, which a pooled client hides; rustls for TLS ([`tls`]).

use std::sync::Arc;
use std::time::Duration;

use hyper::header::{self, HeaderMap};
use hyper::StatusCode;
use tokio_rustls::TlsConnector;

pub mod auth;
mod lane;
mod pipe;
pub mod proxy;
pub mod tls;

pub use lane::{HttpVersion, Lane, WholeBody};
pub use pipe::{Fail, Got, Pipe};

/// How long connecting, each reply's head and each piece of a body may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// One HTTP(S) mirror of the file: where to send `GET`s.
#[derive(Clone)]
pub struct HttpMirror {
    /// As the user gave it (with PATH appended to a directory URL), or
    /// where a redirect led; its query shown as `?...` (a signed URL's
    /// signature is a secret) and never with credentials. For messages.
    pub url: String,
    pub host: String,
    pub port: u16,
    /// The request target: the URL's path (and query), percent-encoded.
    pub target: String,
    pub https: bool,
    /// For an `https` mirror: the connector (roots and `--ca-file`).
    pub tls: Option<TlsConnector>,
    /// The proxy the environment names for it (`https_proxy`, ...).
    pub proxy: Option<proxy::Proxy>,
    /// The version agreed at the probe (a strong `ETag`, else
    /// `Last-Modified`), sent as `If-Range`: a file replaced since answers
    /// 200 whole, which is never read, instead of the new file's bytes.
    pub if_range: Option<String>,
    /// It ignores `Range` (its probe got the whole file, 200): it can only
    /// send one body from byte 0, as an increment-only producer.
    pub whole_only: bool,
    /// The PATH asked for when the URL was taken for the file's own (no
    /// trailing `/`): put under it if the server redirects the URL to
    /// itself with a `/` (a directory, as nginx and Apache answer).
    pub(crate) wanted: String,
    /// What every request carries (`--header`, `--user-agent`, where
    /// credentials come from).
    pub asking: Arc<auth::Asking>,
    /// The credentials for this mirror's origin, if any ([`auth`]).
    pub(crate) credentials: Option<auth::Credentials>,
}

impl std::fmt::Debug for HttpMirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url)
    }
}

/// What goes wrong with an HTTP mirror.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("{0:?}: {1}")]
    BadUrl(String, &'static str),
    #[error("connect: {0}")]
    Connect(std::io::Error),
    #[error("TLS: {0}")]
    Tls(std::io::Error),
    #[error("timed out")]
    Timeout,
    #[error("{0}{hint}", hint = not_http_hint(.0))]
    Http(#[from] hyper::Error),
    #[error("HTTP {0}{hint}", hint = status_hint(*.0))]
    Status(StatusCode),
    /// A 503 or 429 with `Retry-After` in seconds.
    #[error("HTTP {0} (retry in {secs} s)", secs = .1.as_secs())]
    RetryAfter(StatusCode, Duration),
    #[error("redirect: {0}")]
    Redirect(String),
    #[error("HTTP {0}: the credentials sent were rejected (check --user's password, the ~/.netrc entry or the URL's user info)")]
    Rejected(StatusCode),
    #[error("proxy: {0}")]
    Proxy(String),
    #[error("it ignores Range requests (answered 200 with the whole file)")]
    IgnoresRange,
    #[error("asked for bytes {asked}, it answered Content-Range {got:?}")]
    WrongRange { asked: String, got: String },
    #[error("the file's size is now {now}, not {was}: it changed")]
    Changed { was: u64, now: u64 },
    #[error("asked for {want} bytes, it sent {got}")]
    ShortBody { want: u64, got: u64 },
    #[error("the connection closed")]
    Closed,
    #[error("not HTTP as asked: {0}")]
    Malformed(String),
}

/// A URL as messages show it: its query (which may carry a signature or
/// a token) as `?...`.
pub fn without_query(url: &str) -> String {
    match url.split_once('?') {
        Some((before, _)) => format!("{before}?..."),
        None => url.to_string(),
    }
}

/// What to do about a refusal that credentials would lift.
fn status_hint(s: StatusCode) -> &'static str {
    match s.as_u16() {
        401 => ": it wants credentials: give --user USER[:PASS], a ~/.netrc entry (or --netrc-file), or user info in the URL",
        403 => ": refused (wrong credentials, or not for this user)",
        _ => "",
    }
}

/// What to do when a "web server" does not answer in HTTP (most often a
/// ddftpd given with http://).
fn not_http_hint(e: &hyper::Error) -> &'static str {
    match e.is_parse() {
        true => ": it does not answer in HTTP; if it is a ddftpd, give it as HOST:PORT or ddftp://HOST:PORT/DIR/ (ddftps:// over TLS), not http://",
        false => "",
    }
}

impl HttpError {
    /// Whether asking again may work: a server error of the moment, or a
    /// connection lost, cut or timed out. A wrong answer is never retried.
    pub fn is_transient(&self) -> bool {
        match self {
            HttpError::Status(s) => matches!(s.as_u16(), 500 | 502 | 503 | 504 | 429),
            HttpError::RetryAfter(..)
            | HttpError::Connect(_)
            | HttpError::Timeout
            | HttpError::Http(_)
            | HttpError::Closed
            | HttpError::ShortBody { .. } => true,
            _ => false,
        }
    }

    /// Whether the server was never reached, and how ([`crate::reach`]).
    pub fn unreached(&self) -> Option<crate::reach::Unreached> {
        match self {
            HttpError::Connect(e) => crate::reach::unreached(e),
            _ => None,
        }
    }

    /// How long the server asked us to wait (`Retry-After`).
    pub fn wait_hint(&self) -> Option<Duration> {
        match self {
            HttpError::RetryAfter(_, wait) => Some(*wait),
            _ => None,
        }
    }

    /// The error for a reply of `status` that is not the one asked for;
    /// a busy server's `Retry-After` (in seconds; a date is not read) is
    /// kept as the wait it asks for.
    pub(crate) fn status(status: StatusCode, h: &HeaderMap) -> HttpError {
        let busy = matches!(status.as_u16(), 503 | 429);
        let after = h.get(header::RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(retry_after);
        match after {
            Some(wait) if busy => HttpError::RetryAfter(status, wait),
            _ => HttpError::Status(status),
        }
    }
}

/// `Retry-After: <seconds>` as a wait; anything else (a date, junk) is
/// none, and the retry policy's own wait applies. Bounded by the policy.
pub fn retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if v.is_empty() || v.len() > 9 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok().map(Duration::from_secs)
}

impl HttpMirror {
    /// `http(s)://host[:port]/path`; one ending in `/` is a directory, and
    /// `path` (the file asked for) is appended to it.
    pub fn parse(url: &str, path: &str) -> Result<HttpMirror, HttpError> {
        let bad = |why| HttpError::BadUrl(url.to_string(), why);
        let (https, rest) = match url.split_once("://") {
            Some(("http", rest)) => (false, rest),
            Some(("https", rest)) => (true, rest),
            _ => return Err(bad("not an http:// or https:// URL")),
        };
        let (authority, target) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        // User info is taken out: a URL is shown in messages and --json,
        // a password never.
        let (credentials, authority, url) = match authority.rsplit_once('@') {
            Some((info, host)) => {
                let (user, password) = info.split_once(':').unwrap_or((info, ""));
                let c = auth::Credentials { user: auth::decode(user), password: auth::decode(password) };
                let shown = format!("{}://{host}{}", if https { "https" } else { "http" }, &rest[authority.len()..]);
                (Some(c), host, shown)
            }
            None => (None, authority, url.to_string()),
        };
        let url = url.as_str();
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        let default = if https { 443 } else { 80 };
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                (h.to_string(), p.parse().map_err(|_| bad("bad port"))?)
            }
            _ => (authority.to_string(), default),
        };
        let wanted = if target.ends_with('/') { String::new() } else { path.trim_start_matches('/').to_string() };
        let (target, url) = if target.ends_with('/') {
            let enc = encode_path(path.trim_start_matches('/'));
            (format!("{target}{enc}"), format!("{url}{}", path.trim_start_matches('/')))
        } else {
            (encode_target(target), url.to_string())
        };
        let url = without_query(&url);
        let proxy = proxy::from_env(https, &host)?;
        Ok(HttpMirror {
            url,
            host,
            port,
            target,
            https,
            tls: None,
            proxy,
            if_range: None,
            whole_only: false,
            wanted,
            asking: Arc::default(),
            credentials,
        })
    }

    /// This mirror, named by the user, asking as `asking` says: with its
    /// URL's credentials, else `--user`'s, else `.netrc`'s for its host.
    pub fn asking(mut self, asking: Arc<auth::Asking>) -> HttpMirror {
        self.credentials = asking.for_named(&self.host, self.credentials.take());
        self.asking = asking;
        self
    }

    /// The headers every request to it carries besides Host and Range:
    /// User-Agent, `--header`s, and Authorization for its own origin.
    pub(crate) fn request_headers(&self) -> Vec<(String, String)> {
        let mut h = vec![("User-Agent".to_string(), self.asking.user_agent())];
        h.extend(self.asking.headers.iter().cloned());
        // A `--header 'Authorization: ...'` is the user's own choice and
        // replaces the Basic one (as curl's does): never two.
        let own = self.asking.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("authorization"));
        if let (Some(c), false) = (&self.credentials, own) {
            h.push(("Authorization".to_string(), c.basic()));
        }
        h
    }

    /// Whether its requests carry credentials (ours, or the user's own
    /// `Authorization` header).
    pub(crate) fn sends_credentials(&self) -> bool {
        self.request_headers().iter().any(|(n, _)| n.eq_ignore_ascii_case("authorization"))
    }

    fn same_origin(&self, other: &HttpMirror) -> bool {
        (self.https, self.host.to_ascii_lowercase(), self.port)
            == (other.https, other.host.to_ascii_lowercase(), other.port)
    }

    /// Where a redirect's `Location` leads from here: the same file (a
    /// `Location` is never a directory to append to), never from `https`
    /// down to `http`.
    pub fn redirected(&self, location: &str) -> Result<HttpMirror, HttpError> {
        let mut next = if location.starts_with('/') && !location.starts_with("//") {
            let url = without_query(&format!("{}{location}", self.origin()));
            HttpMirror { url, target: encode_target(location), ..self.clone() }
        } else if is_url(location) {
            let mut m = HttpMirror::parse(location.trim_end_matches('/'), "")?;
            m.tls = self.tls.clone();
            // Credentials and `--header`s stay with their origin: another
            // server gets only what .netrc says for it (or the Location's
            // own user info), and no header the user gave (a token, a
            // cookie), as curl since CVE-2018-1000007 and CVE-2022-27776.
            let same = self.same_origin(&m);
            m.asking = match same {
                true => self.asking.clone(),
                false => Arc::new(self.asking.elsewhere()),
            };
            if m.credentials.is_none() {
                m.credentials = match same {
                    true => self.credentials.clone(),
                    false => self.asking.from_netrc(&m.host),
                };
            }
            m
        } else {
            return Err(HttpError::Redirect(format!("to {location:?}, which is not an absolute URL or path")));
        };
        if self.https && !next.https {
            return Err(HttpError::Redirect(format!("from https down to {}: refused", next.url)));
        }
        next.tls = self.tls.clone();
        // `-m http://host/dir` without its slash: the server says it is a
        // directory (a redirect to `dir/`), so PATH goes under it, asked
        // once, instead of the same redirect again and again.
        let into_dir = location.split(['?', '#']).next().is_some_and(|l| l.ends_with('/'));
        let here = self.target.split('?').next().unwrap_or("");
        if into_dir && !self.wanted.is_empty() && self.same_origin(&next) && next.target.trim_end_matches('/') == here {
            next.target = format!("{here}/{}", encode_path(&self.wanted));
            next.url = format!("{}/{}", self.url.trim_end_matches('/'), self.wanted);
            next.wanted.clear();
        }
        Ok(next)
    }

    /// This mirror with its requests bound to `v`, the version its probe
    /// found ([`HttpMirror::if_range`]). A weak `ETag` cannot be used in
    /// `If-Range`; a validator that is not plain visible ASCII is not sent.
    pub fn pinned(&self, v: &lane::HttpVersion) -> HttpMirror {
        let strong = v.etag.clone().filter(|e| e.starts_with('"'));
        let if_range =
            strong.or_else(|| v.last_modified.clone()).filter(|t| t.bytes().all(|b| (b' '..=b'~').contains(&b)));
        HttpMirror { if_range, whole_only: !v.ranges, ..self.clone() }
    }

    /// The mirror as `-v` names it in a request line: origin and path,
    /// never the query (a signed URL's signature) nor credentials.
    pub(crate) fn shown_in_log(&self) -> String {
        let (path, query) = self.target.split_once('?').map_or((self.target.as_str(), ""), |(p, _)| (p, "?..."));
        format!("{}{path}{query}", self.origin())
    }

    fn origin(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.host_header())
    }

    /// What a request names: the path, or through an `http_proxy` the
    /// whole URL (an https mirror's proxy is a tunnel, and sees no request).
    fn request_target(&self) -> String {
        match (&self.proxy, self.https) {
            (Some(_), false) => format!("{}{}", self.origin(), self.target),
            _ => self.target.clone(),
        }
    }

    fn host_header(&self) -> String {
        match (self.https, self.port) {
            (false, 80) | (true, 443) => self.host.clone(),
            _ => format!("{}:{}", self.host, self.port),
        }
    }
}

/// A target as given (by the user, a Metalink or a redirect), with what
/// may not appear in one percent-encoded: spaces, bytes outside the URL
/// set and those RFC 3986 leaves out (`"<>\^`{|}`), which the request
/// builder refuses; `%` stays, as already encoded.
fn encode_target(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    for &b in t.as_bytes() {
        match b {
            b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}' => out.push_str(&format!("%{b:02X}")),
            b'!'..=b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
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

/// `Content-Range: bytes A-B/TOTAL`.
pub(crate) fn content_range(h: &HeaderMap) -> Option<(u64, u64, u64)> {
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
        let r = m.redirected("/y/g%20h.iso").unwrap();
        assert_eq!((r.url.as_str(), r.target.as_str()), ("http://example.org/y/g%20h.iso", "/y/g%20h.iso"));
        let r = m.redirected("https://other.org:8443/z").unwrap();
        assert!(r.https && r.port == 8443 && r.target == "/z");
        assert!(r.redirected("http://example.org/x").is_err(), "no downgrade from https");
        assert!(m.redirected("relative/path").is_err());
        assert!(HttpMirror::parse("ftp://x/", "f").is_err());
        let m = HttpMirror::parse("https://example.org/d/", "f").unwrap();
        assert!(m.https && m.port == 443 && m.target == "/d/f");
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

    #[test]
    fn a_busy_reply_says_how_long_to_wait_in_seconds_only() {
        let mut h = HeaderMap::new();
        h.insert(header::RETRY_AFTER, "3".parse().unwrap());
        let e = HttpError::status(StatusCode::SERVICE_UNAVAILABLE, &h);
        assert_eq!(e.wait_hint(), Some(Duration::from_secs(3)));
        assert!(e.is_transient());
        assert_eq!(e.to_string(), "HTTP 503 Service Unavailable (retry in 3 s)");
        // Only a busy server's wait is one; a date or junk is none.
        assert_eq!(HttpError::status(StatusCode::NOT_FOUND, &h).wait_hint(), None);
        h.insert(header::RETRY_AFTER, "Fri, 27 Nov 2026 20:00:00 GMT".parse().unwrap());
        assert_eq!(HttpError::status(StatusCode::TOO_MANY_REQUESTS, &h).wait_hint(), None);
        assert!(HttpError::status(StatusCode::TOO_MANY_REQUESTS, &h).is_transient());
        for v in ["", "-1", "1.5", "+2", "9999999999", " 7 "] {
            assert_eq!(retry_after(v), (v == " 7 ").then(|| Duration::from_secs(7)), "{v:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_retry_after_reads_without_panic_and_as_whole_seconds(s in ".{0,20}", n in 0u64..1_000_000_000) {
            if let Some(d) = retry_after(&s) {
                proptest::prop_assert_eq!(Some(d.as_secs()), s.trim().parse::<u64>().ok());
            }
            proptest::prop_assert_eq!(retry_after(&n.to_string()), Some(Duration::from_secs(n)));
        }
    }
}
