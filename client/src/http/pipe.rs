//! The data path to an HTTP mirror: one connection with several `Range`
//! requests in flight (HTTP/1.1 pipelining), the replies read in order as
//! one continuous stream, as a ddftpd connection streams: no idle round
//! trip between ranges and one congestion window kept full, also at a
//! 200 ms round trip. (hyper's client sends one request at a time per
//! connection; it does the probe.) Every reply is checked by the same rule
//! as the probe's connection ([`check_range`]) and its body handed over a
//! block at a time as it arrives, straight from the receive buffer.

use ddnet::ratelimit::RateLimiter;
use std::sync::Arc;

use bytes::{Buf, BytesMut};
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::lane::{check_range, open, Io};
use super::{HttpError, HttpMirror, TIMEOUT};

/// A reply's head larger than this is not one.
const MAX_HEAD: usize = 64 << 10;

/// Why a request ended early: the mirror, or what the caller did with a block.
#[derive(Debug)]
pub enum Fail<E> {
    Http(HttpError),
    Place(E),
}

/// What the reader of a pipe tells: per request `id`, the blocks of its
/// range in the file so far, then that it is done or why not.
pub enum Got<E> {
    Placed {
        id: u64,
        blocks: u64,
    },
    Done {
        id: u64,
    },
    Failed {
        id: u64,
        error: Fail<E>,
    },
    /// The server closes the connection after that reply (`Connection:
    /// close`, HTTP/1.0): the requests after it go unanswered.
    Closing,
    /// Bytes keep coming though no block is whole yet (a thin link, a
    /// large block, `--limit-rate`): at most once a second.
    Alive,
}

/// What paces a reply's reading: `--limit-rate`'s budget, and telling
/// that bytes keep coming ([`Got::Alive`]).
struct Pace<'a> {
    cap: Option<&'a RateLimiter>,
    alive: &'a mut (dyn FnMut() + Send),
}

/// How often [`Got::Alive`] may be said.
const ALIVE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One pipelined connection; dropped, it closes.
pub struct Pipe {
    wr: WriteHalf<Box<dyn Io>>,
    asked: mpsc::UnboundedSender<(u64, u64, u64)>,
    reader: JoinHandle<()>,
    mirror: Arc<HttpMirror>,
}

impl Drop for Pipe {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Pipe {
    /// Connects to `mirror`, whose file has `size` bytes. Each reply's
    /// blocks (`bs` bytes, the file's last maybe shorter) go to `place`
    /// with their offset, in order; progress goes to `tx`.
    pub async fn open<E, F>(
        mirror: Arc<HttpMirror>,
        size: u64,
        bs: usize,
        place: F,
        tx: mpsc::UnboundedSender<Got<E>>,
        cap: Option<Arc<RateLimiter>>,
    ) -> Result<Pipe, HttpError>
    where
        E: Send + 'static,
        F: FnMut(u64, &[u8]) -> Result<(), E> + Send + 'static,
    {
        let (rd, wr) = tokio::io::split(open(&mirror).await?);
        let (asked, asks) = mpsc::unbounded_channel();
        let reader = tokio::spawn(read_replies(rd, asks, (size, bs), place, tx, cap, mirror.shown_in_log()));
        Ok(Pipe { wr, asked, reader, mirror })
    }

    /// Asks for bytes `a..=b` (a block boundary to the end of a block or
    /// the file); the reply is reported as request `id`.
    pub async fn ask(&mut self, id: u64, a: u64, b: u64) -> Result<(), HttpError> {
        let m = &self.mirror;
        let if_range = m.if_range.as_ref().map(|v| format!("If-Range: {v}\r\n")).unwrap_or_default();
        let extra: String = m.request_headers().iter().map(|(n, v)| format!("{n}: {v}\r\n")).collect();
        let req = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nRange: bytes={a}-{b}\r\n{if_range}{extra}\r\n",
            m.request_target(),
            m.host_header(),
        );
        tracing::info!("> GET {} (Range: bytes={a}-{b})", m.shown_in_log());
        let _ = self.asked.send((id, a, b));
        match tokio::time::timeout(TIMEOUT, self.wr.write_all(req.as_bytes())).await {
            Ok(r) => r.map_err(|_| HttpError::Closed),
            Err(_) => Err(HttpError::Timeout),
        }
    }
}

async fn read_replies<E, F>(
    mut rd: ReadHalf<Box<dyn Io>>,
    mut asks: mpsc::UnboundedReceiver<(u64, u64, u64)>,
    (size, bs): (u64, usize),
    mut place: F,
    tx: mpsc::UnboundedSender<Got<E>>,
    cap: Option<Arc<RateLimiter>>,
    shown: String,
) where
    E: Send,
    F: FnMut(u64, &[u8]) -> Result<(), E> + Send,
{
    let mut buf = BytesMut::with_capacity(2 * bs.max(64 << 10));
    let mut said = tokio::time::Instant::now();
    let mut alive = || {
        if said.elapsed() >= ALIVE_EVERY {
            said = tokio::time::Instant::now();
            let _ = tx.send(Got::Alive);
        }
    };
    while let Some((id, a, b)) = asks.recv().await {
        let mut blocks = 0;
        let placing = &mut |at, block: &[u8]| {
            place(at, block)?;
            blocks += 1;
            let _ = tx.send(Got::Placed { id, blocks });
            Ok(())
        };
        let pace = Pace { cap: cap.as_deref(), alive: &mut alive };
        let r = read_reply(&mut rd, &mut buf, (a, b), (size, bs), pace, placing, &shown).await;
        match r {
            Ok(last) => {
                let _ = tx.send(Got::Done { id });
                if last {
                    let _ = tx.send(Got::Closing);
                    return;
                }
            }
            Err(error) => {
                let _ = tx.send(Got::Failed { id, error });
                return;
            }
        }
    }
}

/// Reads more into `buf`; a closed connection is an error here.
async fn fill(rd: &mut ReadHalf<Box<dyn Io>>, buf: &mut BytesMut, want: usize) -> Result<(), HttpError> {
    buf.reserve(want);
    match tokio::time::timeout(TIMEOUT, rd.read_buf(buf)).await {
        Err(_) => Err(HttpError::Timeout),
        Ok(Ok(0)) | Ok(Err(_)) => Err(HttpError::Closed),
        Ok(Ok(_)) => Ok(()),
    }
}

/// The reply to `bytes=a-b`, checked, its body placed a block at a time;
/// whether the server closes the connection after it.
async fn read_reply<E, F: FnMut(u64, &[u8]) -> Result<(), E> + Send>(
    rd: &mut ReadHalf<Box<dyn Io>>,
    buf: &mut BytesMut,
    (a, b): (u64, u64),
    (size, bs): (u64, usize),
    pace: Pace<'_>,
    place: &mut F,
    shown: &str,
) -> Result<bool, Fail<E>> {
    let Pace { cap, alive } = pace;
    let (status, headers, keep_alive) = loop {
        if let Some(head) = parse_head(buf).map_err(Fail::Http)? {
            break head;
        }
        if buf.len() > MAX_HEAD {
            return Err(Fail::Http(HttpError::Malformed(format!("a reply head over {MAX_HEAD} bytes"))));
        }
        fill(rd, buf, 16 << 10).await.map_err(Fail::Http)?;
    };
    tracing::info!("< {status} from {shown} (bytes {a}-{b})");
    check_range(status, &headers, a, b, size).map_err(Fail::Http)?;
    if !headers.contains_key(hyper::header::CONTENT_LENGTH) {
        let why = "a range reply without Content-Length (chunked): cannot be pipelined".to_string();
        return Err(Fail::Http(HttpError::Malformed(why)));
    }
    let (mut at, end) = (a, b + 1);
    while at < end {
        let full = ((end - at) as usize).min(bs);
        while buf.len() < full {
            let got = at - a + buf.len() as u64;
            fill(rd, buf, full - buf.len()).await.map_err(|e| {
                Fail::Http(match e {
                    HttpError::Closed => HttpError::ShortBody { want: end - a, got },
                    e => e,
                })
            })?;
            alive();
        }
        place(at, &buf[..full]).map_err(Fail::Place)?;
        buf.advance(full);
        at += full as u64;
        // `--limit-rate`: the next read waits for the budget, taken a piece
        // at a time (the bytes that came said to keep coming).
        let mut left = full;
        while let Some(cap) = cap.filter(|_| left > 0) {
            let piece = left.min(64 << 10);
            cap.acquire(piece).await;
            left -= piece;
            alive();
        }
    }
    Ok(!keep_alive)
}

/// A whole reply head at the start of `buf` (then taken off it), or none yet.
/// Whether the connection stays open after it: HTTP/1.1 without
/// `Connection: close`.
fn parse_head(buf: &mut BytesMut) -> Result<Option<(StatusCode, HeaderMap, bool)>, HttpError> {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut r = httparse::Response::new(&mut slots);
    let n = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(HttpError::Malformed(format!("a reply head: {e}"))),
    };
    let bad = |what: &str| HttpError::Malformed(format!("a reply head: {what}"));
    let status = StatusCode::from_u16(r.code.ok_or_else(|| bad("no status"))?).map_err(|_| bad("status"))?;
    let mut headers = HeaderMap::new();
    for h in r.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| bad("header name"))?;
        headers.append(name, HeaderValue::from_bytes(h.value).map_err(|_| bad("header value"))?);
    }
    let close = headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .any(|v| v.to_str().is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"))));
    let keep_alive = r.version == Some(1) && !close;
    buf.advance(n);
    Ok(Some((status, headers, keep_alive)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_are_parsed_whole_or_not_at_all() {
        let mut b = BytesMut::from(&b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-3/9\r\nContent-Le"[..]);
        assert!(parse_head(&mut b).unwrap().is_none());
        b.extend_from_slice(b"ngth: 4\r\n\r\nabcdHTTP/1.1");
        let (s, h, keep) = parse_head(&mut b).unwrap().unwrap();
        assert_eq!((s, h["content-length"].to_str().unwrap(), keep), (StatusCode::PARTIAL_CONTENT, "4", true));
        assert_eq!(&b[..], b"abcdHTTP/1.1", "the body and the next reply stay");
        let mut old = BytesMut::from(&b"HTTP/1.0 206 Partial Content\r\n\r\n"[..]);
        assert!(!parse_head(&mut old).unwrap().unwrap().2, "HTTP/1.0 closes");
        let mut close = BytesMut::from(&b"HTTP/1.1 206 OK\r\nConnection: Close\r\n\r\n"[..]);
        assert!(!parse_head(&mut close).unwrap().unwrap().2);
        let mut junk = BytesMut::from(&b"\x00\x01 not http\r\n\r\n"[..]);
        assert!(parse_head(&mut junk).is_err());
    }
}
