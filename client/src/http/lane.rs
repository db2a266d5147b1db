//! Connections to a mirror (TCP, or TLS over it, through a proxy if the
//! environment names one), and what hyper asks on them before data moves:
//! the probe, and a small file whole (a checksum listing); redirects
//! followed. The rule every range reply is checked by is here too; the
//! data itself comes through [`super::Pipe`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};

use super::{content_range, HttpError, HttpMirror, TIMEOUT};
use crate::checksum;

/// Redirects followed from a mirror's URL before it counts as broken.
const MAX_REDIRECTS: usize = 5;

/// A byte stream to a mirror: TCP, or TLS over it.
pub(super) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// Connects to `m` (and does the TLS handshake for `https`).
pub(super) async fn open(m: &HttpMirror) -> Result<Box<dyn Io>, HttpError> {
    let fut = async {
        let host = m.host.trim_start_matches('[').trim_end_matches(']');
        let sock = match &m.proxy {
            None => crate::reach::connect(host, m.port).await.map_err(HttpError::Connect)?,
            Some(p) if m.https => {
                let mut sock = p.connect().await?;
                p.tunnel(&mut sock, &format!("{}:{}", m.host, m.port)).await?;
                sock
            }
            Some(p) => p.connect().await?,
        };
        sock.set_nodelay(true).map_err(HttpError::Connect)?;
        if !m.https {
            return Ok::<Box<dyn Io>, HttpError>(Box::new(sock));
        }
        let tls = m.tls.as_ref().ok_or_else(|| HttpError::BadUrl(m.url.clone(), "https without TLS set up"))?;
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| HttpError::BadUrl(m.url.clone(), "not a host name TLS can check"))?;
        Ok(Box::new(tls.connect(name, sock).await.map_err(HttpError::Tls)?))
    };
    tokio::time::timeout(TIMEOUT, fut).await.map_err(|_| HttpError::Timeout)?
}

/// What a mirror says of its file before data moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpVersion {
    pub size: u64,
    /// The probe's round trip on an open connection.
    pub rtt: Duration,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// The whole file's SHA-256 (hex), from `Repr-Digest` or `Digest`.
    pub sha256: Option<String>,
    /// It honours `Range`; if not, it sends the whole file from byte 0.
    pub ranges: bool,
}

/// A connection to a mirror for the requests before data moves.
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
        let io = open(&self.mirror).await?;
        let handshake = tokio::time::timeout(TIMEOUT, http1::handshake(TokioIo::new(io)));
        let (sender, conn) = handshake.await.map_err(|_| HttpError::Timeout)??;
        tokio::spawn(conn);
        Ok(self.sender.insert(sender))
    }

    /// Sends `GET` (with `Range: bytes=a-b`); the reply's status and headers.
    async fn ask(&mut self, range: Option<(u64, u64)>) -> Result<Response<Incoming>, HttpError> {
        let mut req = Request::get(self.mirror.request_target())
            .header(header::HOST, self.mirror.host_header())
            .header("want-repr-digest", "sha-256=10");
        for (name, value) in self.mirror.request_headers() {
            req = req.header(name, value);
        }
        let shown = range.map(|(a, b)| format!(" (Range: bytes={a}-{b})")).unwrap_or_default();
        tracing::info!("> GET {}{shown}", self.mirror.shown_in_log());
        if let Some((a, b)) = range {
            req = req.header(header::RANGE, format!("bytes={a}-{b}"));
            if let Some(v) = &self.mirror.if_range {
                req = req.header(header::IF_RANGE, v.as_str());
            }
        }
        // A target the builder still refuses (longer than a URI may be):
        // this mirror is dropped with why, never the download.
        let req = req.body(Empty::new()).map_err(|_| {
            let mut shown: String = self.mirror.request_target().chars().take(200).collect();
            shown.push_str("...");
            HttpError::BadUrl(shown, "cannot be asked for (too long, or bytes a request may not hold)")
        })?;
        let sender = self.connect().await?;
        sender.ready().await?;
        tokio::time::timeout(TIMEOUT, sender.send_request(req))
            .await
            .map_err(|_| HttpError::Timeout)?
            .map_err(Into::into)
    }

    /// Asks `mirror` (with `range`), following redirects (a few): the
    /// reply, the lane it came on and the round trip of its request.
    async fn follow(
        mirror: Arc<HttpMirror>,
        range: Option<(u64, u64)>,
    ) -> Result<(Lane, Response<Incoming>, Duration), HttpError> {
        let mut lane = Lane::new(mirror);
        for _ in 0..=MAX_REDIRECTS {
            // Connected first: the round trip is the request's alone.
            lane.connect().await?;
            let asked = Instant::now();
            let resp = lane.ask(range).await?;
            let rtt = asked.elapsed();
            tracing::info!("< {:?} {} from {}", resp.version(), resp.status(), lane.mirror.shown_in_log());
            if resp.status() == StatusCode::UNAUTHORIZED && lane.mirror.sends_credentials() {
                return Err(HttpError::Rejected(resp.status()));
            }
            if !resp.status().is_redirection() {
                return Ok((lane, resp, rtt));
            }
            let to = resp.headers().get(header::LOCATION).and_then(|v| v.to_str().ok());
            let to = to.ok_or_else(|| HttpError::status(resp.status(), resp.headers()))?;
            lane = Lane::new(Arc::new(lane.mirror.redirected(to)?));
        }
        Err(HttpError::Redirect(format!("more than {MAX_REDIRECTS} redirects")))
    }

    /// What the mirror says of its file: its size (from a one-byte range,
    /// which also shows it honours `Range`), `ETag`, `Last-Modified` and a
    /// digest if it sends one; and the mirror redirects led to.
    pub async fn probe(mirror: Arc<HttpMirror>) -> Result<(Arc<HttpMirror>, HttpVersion), HttpError> {
        let (lane, resp, rtt) = Lane::follow(mirror, Some((0, 0))).await?;
        let h = resp.headers();
        let text = |n: header::HeaderName| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
        let (etag, last_modified) = (text(header::ETAG), text(header::LAST_MODIFIED));
        let sha256 = checksum::digest_header(h);
        check_coding(h)?;
        let size = match resp.status() {
            StatusCode::PARTIAL_CONTENT => match content_range(h) {
                Some((_, _, total)) => total,
                None => {
                    let got = text(header::CONTENT_RANGE).unwrap_or_default();
                    return Err(HttpError::WrongRange { asked: "0-0".into(), got });
                }
            },
            // An empty file has no byte 0.
            StatusCode::RANGE_NOT_SATISFIABLE if text(header::CONTENT_RANGE).as_deref() == Some("bytes */0") => 0,
            // It ignores Range: the whole file, of the length it says (a
            // body of no stated length cannot be scheduled). Not read here.
            StatusCode::OK => match content_length(h) {
                Some(size) => {
                    let v = HttpVersion { size, rtt, etag, last_modified, sha256, ranges: false };
                    return Ok((lane.mirror, v));
                }
                None => return Err(HttpError::IgnoresRange),
            },
            s => return Err(unexpected(s, h)),
        };
        read_body(resp, 1).await?;
        Ok((lane.mirror, HttpVersion { size, rtt, etag, last_modified, sha256, ranges: true }))
    }

    /// The whole file from a server that ignores `Range`: its body, once
    /// the reply says it is the `size` bytes of the file as they are.
    pub async fn whole(mirror: Arc<HttpMirror>, size: u64) -> Result<WholeBody, HttpError> {
        let (_, resp, _) = Lane::follow(mirror, None).await?;
        if resp.status() != StatusCode::OK {
            return Err(HttpError::status(resp.status(), resp.headers()));
        }
        check_coding(resp.headers())?;
        match content_length(resp.headers()) {
            Some(n) if n == size => Ok(WholeBody(resp.into_body())),
            Some(n) => Err(HttpError::Changed { was: size, now: n }),
            None => Err(HttpError::IgnoresRange),
        }
    }
}

/// The body of [`Lane::whole`].
pub struct WholeBody(Incoming);

impl WholeBody {
    /// Its next bytes; `None` at its end.
    pub async fn next(&mut self) -> Result<Option<Bytes>, HttpError> {
        next_frame(&mut self.0).await
    }
}

/// A reply's `Content-Length`.
fn content_length(h: &header::HeaderMap) -> Option<u64> {
    h.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok())
}

impl Lane {
    /// A small file whole (a checksum listing): `200`, at most `limit`
    /// bytes; redirects followed.
    pub async fn get_small(mirror: Arc<HttpMirror>, limit: usize) -> Result<Bytes, HttpError> {
        let (_, resp, _) = Lane::follow(mirror, None).await?;
        if resp.status() != StatusCode::OK {
            return Err(HttpError::status(resp.status(), resp.headers()));
        }
        read_body(resp, limit).await
    }
}

/// A reply's body, at most `limit` bytes (more is an error, not a read).
async fn read_body(resp: Response<Incoming>, limit: usize) -> Result<Bytes, HttpError> {
    let mut body = resp.into_body();
    let mut out = BytesMut::new();
    while let Some(f) = next_frame(&mut body).await? {
        if out.len() + f.len() > limit {
            return Err(HttpError::ShortBody { want: limit as u64, got: (out.len() + f.len()) as u64 });
        }
        out.extend_from_slice(&f);
    }
    Ok(out.freeze())
}

/// The reply to `bytes=a-b` of a `size`-byte file: 206 with exactly that
/// `Content-Range` (and `Content-Length`, if given): a rule for every
/// connection kind.
pub(super) fn check_range(
    status: StatusCode,
    h: &header::HeaderMap,
    a: u64,
    b: u64,
    size: u64,
) -> Result<(), HttpError> {
    if status != StatusCode::PARTIAL_CONTENT {
        return Err(unexpected(status, h));
    }
    check_coding(h)?;
    match content_range(h) {
        Some((x, y, total)) if (x, y) == (a, b) && total == size => {}
        Some((_, _, total)) if total != size => return Err(HttpError::Changed { was: size, now: total }),
        _ => {
            let got = h.get(header::CONTENT_RANGE).and_then(|v| v.to_str().ok()).unwrap_or("none");
            return Err(HttpError::WrongRange { asked: format!("{a}-{b}"), got: got.to_string() });
        }
    }
    match content_length(h) {
        Some(n) if n != b - a + 1 => Err(HttpError::ShortBody { want: b - a + 1, got: n }),
        _ => Ok(()),
    }
}

/// A reply whose body is not the file's bytes as they are: encoded
/// (`Content-Encoding`: gzip bytes of the range are not the range), or
/// framed two ways at once (`Transfer-Encoding` with `Content-Length`,
/// which a reader taking the length would write the chunk framing of as
/// data, and which smuggles one reply into another).
fn check_coding(h: &header::HeaderMap) -> Result<(), HttpError> {
    let coding = h.get(header::CONTENT_ENCODING).map(|v| String::from_utf8_lossy(v.as_bytes()).to_string());
    if let Some(c) = coding.filter(|c| !c.trim().eq_ignore_ascii_case("identity")) {
        return Err(HttpError::Malformed(format!(
            "its reply is encoded (Content-Encoding: {c}): not the file's bytes"
        )));
    }
    if h.contains_key(header::TRANSFER_ENCODING) && h.contains_key(header::CONTENT_LENGTH) {
        let why = "a reply with both Transfer-Encoding and Content-Length (its framing is ambiguous)";
        return Err(HttpError::Malformed(why.to_string()));
    }
    Ok(())
}

/// The body's next data, with a timeout for each piece.
async fn next_frame(body: &mut Incoming) -> Result<Option<Bytes>, HttpError> {
    loop {
        let frame = tokio::time::timeout(TIMEOUT, body.frame()).await.map_err(|_| HttpError::Timeout)?;
        match frame {
            None => return Ok(None),
            Some(f) => {
                if let Ok(data) = f?.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// A status other than the one asked for. A 200 is a whole file we did
/// not ask for: never read.
fn unexpected(s: StatusCode, h: &header::HeaderMap) -> HttpError {
    match s {
        StatusCode::OK => HttpError::IgnoresRange,
        s => HttpError::status(s, h),
    }
}
