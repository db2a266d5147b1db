//! The messages and their bytes.
//!
//! Every frame is `kind: u8 | len: u32 BE | body[len]`. Control bodies are
//! small and capped at [`MAX_CONTROL_BODY`]; a `Block` body is
//! `stream: u32 | block: u64 | payload` and is capped at
//! [`MAX_BLOCK_SIZE`] + 12; a `SealedBlock` (a bundle's) has the BLAKE3
//! hash of its payload between block number and payload. Integers are
//! big-endian.
//!
//! One TCP connection carries one producer stream at a time: the client's
//! `Start`/`Extend`/`End` and the server's `Block`s and `Stopped` travel on it
//! in order, so no control message can overtake the data it refers to.
//!
//! Decoding never trusts a length: a frame is checked against its kind's
//! cap before a byte of it is buffered, and a short or oversized body is
//! [`ProtoError`], which closes the connection.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::auth::{MAC_LEN, NONCE_LEN};
use crate::manifest::{FileDigest, Hash, HASH_LEN, MAX_MANIFEST_HASHES};

/// Bumped on any incompatible change; exchanged in `Hello`.
pub const PROTOCOL_VERSION: u16 = 7;
/// The first bytes of a `Hello` body, so a stray client is recognised at once.
pub const MAGIC: &[u8; 5] = b"DDFTP";
/// Bytes before every body: kind and length.
pub const HEADER_LEN: usize = 5;
/// Bytes of a `Block` body before its payload: stream and block number.
pub const BLOCK_PREFIX_LEN: usize = 12;
/// Bytes of a `SealedBlock` body before its payload: stream, block number, hash.
pub const SEALED_PREFIX_LEN: usize = BLOCK_PREFIX_LEN + HASH_LEN;
/// Largest control-frame body (a path plus a few integers fits easily).
pub const MAX_CONTROL_BODY: usize = 8 * 1024;
/// Longest path a client may name.
pub const MAX_PATH_LEN: usize = 4096;
/// Smallest block size a client may ask for: smaller blocks only burn syscalls.
pub const MIN_BLOCK_SIZE: u32 = 512;
/// Largest piece of a list in one `ListData` reply.
pub const MAX_LIST_CHUNK: usize = 64 * 1024;
/// Largest piece of a bundle's list in one `Bundle` request.
pub const MAX_BUNDLE_CHUNK: usize = MAX_CONTROL_BODY;
/// Bytes of a server's identity in `Hello`.
pub const SERVER_ID_LEN: usize = 16;
/// Largest block size: bounds each connection's buffer on both ends.
pub const MAX_BLOCK_SIZE: u32 = 64 << 20;

const K_HELLO: u8 = 0x01;
const K_STAT: u8 = 0x02;
const K_START: u8 = 0x03;
const K_EXTEND: u8 = 0x04;
const K_END: u8 = 0x05;
const K_AUTH: u8 = 0x06;
const K_MANIFEST: u8 = 0x07;
const K_WALK: u8 = 0x08;
const K_BUNDLE: u8 = 0x09;
const K_BUNDLE_END: u8 = 0x0a;
const K_R_HELLO: u8 = 0x81;
const K_R_STAT: u8 = 0x82;
const K_R_BLOCK: u8 = 0x83;
const K_R_STOPPED: u8 = 0x84;
const K_R_CHALLENGE: u8 = 0x85;
const K_R_MANIFEST: u8 = 0x86;
const K_R_BUNDLE: u8 = 0x87;
const K_R_LIST_DATA: u8 = 0x88;
const K_R_LIST_END: u8 = 0x89;
const K_R_SEALED_BLOCK: u8 = 0x8a;
const K_R_UNREADABLE: u8 = 0x8b;
const K_R_WALK_ERROR: u8 = 0x8c;
const K_R_ERROR: u8 = 0x8f;

/// Which way a producer walks its blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// first, first+1, ... up to `last`.
    Increment,
    /// first, first-1, ... down to `last`.
    Decrement,
}

impl Direction {
    /// The block after `b` in this direction (`None` past block 0).
    pub fn step(self, b: u64) -> Option<u64> {
        match self {
            Direction::Increment => b.checked_add(1),
            Direction::Decrement => b.checked_sub(1),
        }
    }

    /// Number of blocks from `first` to `last` inclusive, or 0 if `last` lies
    /// behind `first` in this direction.
    pub fn span(self, first: u64, last: u64) -> u64 {
        match self {
            Direction::Increment if last >= first => last - first + 1,
            Direction::Decrement if first >= last => first - last + 1,
            _ => 0,
        }
    }
}

/// Client to server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// First message on a connection.
    Hello { version: u16 },
    /// Size, mtime and digests of `path` (relative to the server's root);
    /// with `manifest`, the whole chunk manifest follows the `Stat` reply
    /// (as `Manifest` replies), saving the round trip of asking for it.
    Stat { path: String, manifest: bool },
    /// Chunk hashes `first..first+count` of `path`'s manifest
    /// (`count` ≤ [`MAX_MANIFEST_HASHES`]).
    Manifest { path: String, first: u64, count: u32 },
    /// Stream blocks `first`, `first±1`, ... through `last` (inclusive) of
    /// `path` cut into `block_size`-byte blocks. At `last` the stream pauses:
    /// an `Extend` resumes it; `End`, or a following `Start`, ends it and the
    /// server answers `Stopped`. A `Start` received while another stream is
    /// still sending waits for that one to reach its `last`.
    Start { stream: u32, path: String, block_size: u32, first: u64, last: u64, dir: Direction },
    /// Move a stream's `last` (further or nearer); resumes a paused stream;
    /// ignored if the stream has ended.
    Extend { stream: u32, last: u64 },
    /// End the stream now; the server answers `Stopped`.
    End { stream: u32 },
    /// The answer to a `Challenge`: HMAC-SHA256 of the nonce under the
    /// shared token ([`crate::auth`]).
    Auth { mac: [u8; MAC_LEN] },
    /// List the tree at `path` (a directory under the root, `.` for the
    /// root): `ListData` replies carrying a ddftp list whose paths are
    /// relative to the root, packed ([`crate::packed`]), then `ListEnd`.
    Walk { path: String },
    /// The next piece (≤ [`MAX_BUNDLE_CHUNK`] bytes) of a bundle's
    /// definition: a ddftp list of regular files and symlinks, in order,
    /// packed ([`crate::packed`]).
    Bundle { data: Bytes },
    /// The bundle's definition is complete: the server checks its paths
    /// and answers `Bundle` with the name under which `Stat`, `Manifest`
    /// and `Start` read the entries' bytes as one range (each entry checked
    /// against the list as it is read).
    BundleEnd,
}

/// What went wrong on the server, as a stable code plus a message for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    BadRequest,
    NotFound,
    Forbidden,
    NotAFile,
    Io,
    Busy,
    Unknown(u16),
}

impl ErrorCode {
    fn to_u16(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 1,
            ErrorCode::NotFound => 2,
            ErrorCode::Forbidden => 3,
            ErrorCode::NotAFile => 4,
            ErrorCode::Io => 5,
            ErrorCode::Busy => 6,
            ErrorCode::Unknown(c) => c,
        }
    }
    fn from_u16(c: u16) -> Self {
        match c {
            1 => ErrorCode::BadRequest,
            2 => ErrorCode::NotFound,
            3 => ErrorCode::Forbidden,
            4 => ErrorCode::NotAFile,
            5 => ErrorCode::Io,
            6 => ErrorCode::Busy,
            c => ErrorCode::Unknown(c),
        }
    }
}

/// Server to client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The greeting: the protocol spoken, who this server is (random at
    /// each start: two addresses of one server give one id, so the client
    /// counts it once) and the largest block it serves.
    Hello {
        version: u16,
        server_id: [u8; SERVER_ID_LEN],
        max_block_size: u32,
    },
    Stat {
        size: u64,
        mtime_secs: i64,
        mtime_nanos: u32,
        digest: FileDigest,
    },
    /// Chunk hashes starting at chunk `first`.
    Manifest {
        first: u64,
        hashes: Vec<Hash>,
    },
    /// One block of the running stream; `payload` is `block_size` bytes except
    /// for the file's last block.
    Block {
        stream: u32,
        block: u64,
        payload: Bytes,
    },
    /// A block of a bundle, with the BLAKE3 hash ([`seal`]) of its payload
    /// as the mirror read it: a bundle has no manifest to check it against.
    SealedBlock {
        stream: u32,
        block: u64,
        hash: Hash,
        payload: Bytes,
    },
    /// The stream ended (on `End` or a following `Start`) after sending `sent` blocks.
    Stopped {
        stream: u32,
        sent: u64,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
    /// Instead of `Hello` when the server wants a token: answer with `Auth`.
    Challenge {
        nonce: [u8; NONCE_LEN],
    },
    /// The bundle is registered as `name`; its range is `size` bytes.
    Bundle {
        name: String,
        size: u64,
    },
    /// A piece of a walk's list (≤ [`MAX_LIST_CHUNK`] bytes).
    ListData {
        data: Bytes,
    },
    /// The walk is over; `errors` directories or entries could not be read.
    ListEnd {
        errors: u64,
    },
    /// Entry `index` of a bundle could not be read on this mirror (why, in
    /// `message`): its bytes in the `SealedBlock` that follows are zeros,
    /// not its own, and are not to be written.
    Unreadable {
        index: u64,
        message: String,
    },
    /// What a walk could not read (a directory, an entry) and why, before
    /// its `ListEnd`; the walk went on. `path` as the list would show it.
    WalkError {
        path: String,
        message: String,
    },
}

/// A frame that breaks the protocol. The connection cannot be trusted after it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    #[error("unknown frame kind 0x{0:02x}")]
    UnknownKind(u8),
    #[error("frame kind 0x{kind:02x} has length {len}, more than its limit {max}")]
    TooLong { kind: u8, len: usize, max: usize },
    #[error("frame kind 0x{kind:02x} body is malformed: {why}")]
    Malformed { kind: u8, why: &'static str },
    #[error("not a ddftp peer (bad magic in hello)")]
    BadMagic,
}

fn put_header(dst: &mut BytesMut, kind: u8, len: usize) {
    dst.put_u8(kind);
    dst.put_u32(u32::try_from(len).expect("frame bodies are capped far below 4 GiB"));
}

fn put_str(dst: &mut BytesMut, s: &str) {
    dst.put_u16(u16::try_from(s.len()).expect("strings are capped by their senders"));
    dst.put_slice(s.as_bytes());
}

/// Writes the header of a `Block` frame carrying `payload_len` bytes; the
/// payload follows. Servers use this to place the header in front of a
/// buffer they read the payload into, so a block costs one write.
pub fn put_block_header(dst: &mut [u8], stream: u32, block: u64, payload_len: usize) {
    let mut w = &mut dst[..HEADER_LEN + BLOCK_PREFIX_LEN];
    w.put_u8(K_R_BLOCK);
    w.put_u32((BLOCK_PREFIX_LEN + payload_len) as u32);
    w.put_u32(stream);
    w.put_u64(block);
}

/// Writes the header of a `SealedBlock` frame: as [`put_block_header`],
/// with the payload's `hash` (see [`seal`]).
pub fn put_sealed_block_header(dst: &mut [u8], stream: u32, block: u64, hash: &Hash, payload_len: usize) {
    let mut w = &mut dst[..HEADER_LEN + SEALED_PREFIX_LEN];
    w.put_u8(K_R_SEALED_BLOCK);
    w.put_u32((SEALED_PREFIX_LEN + payload_len) as u32);
    w.put_u32(stream);
    w.put_u64(block);
    w.put_slice(hash);
}

/// The hash a `SealedBlock` carries: BLAKE3 of its payload.
pub fn seal(payload: &[u8]) -> Hash {
    blake3::hash(payload).into()
}

impl Request {
    /// Appends this request's frame to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) {
        match self {
            Request::Hello { version } => {
                put_header(dst, K_HELLO, MAGIC.len() + 2);
                dst.put_slice(MAGIC);
                dst.put_u16(*version);
            }
            Request::Stat { path, manifest } => {
                put_header(dst, K_STAT, 1 + 2 + path.len());
                dst.put_u8(u8::from(*manifest));
                put_str(dst, path);
            }
            Request::Start { stream, path, block_size, first, last, dir } => {
                put_header(dst, K_START, 4 + 4 + 8 + 8 + 1 + 2 + path.len());
                dst.put_u32(*stream);
                dst.put_u32(*block_size);
                dst.put_u64(*first);
                dst.put_u64(*last);
                dst.put_u8(match dir {
                    Direction::Increment => 0,
                    Direction::Decrement => 1,
                });
                put_str(dst, path);
            }
            Request::Extend { stream, last } => {
                put_header(dst, K_EXTEND, 12);
                dst.put_u32(*stream);
                dst.put_u64(*last);
            }
            Request::End { stream } => {
                put_header(dst, K_END, 4);
                dst.put_u32(*stream);
            }
            Request::Auth { mac } => {
                put_header(dst, K_AUTH, MAC_LEN);
                dst.put_slice(mac);
            }
            Request::Manifest { path, first, count } => {
                put_header(dst, K_MANIFEST, 8 + 4 + 2 + path.len());
                dst.put_u64(*first);
                dst.put_u32(*count);
                put_str(dst, path);
            }
            Request::Walk { path } => {
                put_header(dst, K_WALK, 2 + path.len());
                put_str(dst, path);
            }
            Request::Bundle { data } => {
                assert!(data.len() <= MAX_BUNDLE_CHUNK, "bundle pieces are capped");
                put_header(dst, K_BUNDLE, data.len());
                dst.put_slice(data);
            }
            Request::BundleEnd => put_header(dst, K_BUNDLE_END, 0),
        }
    }

    /// Takes one request off the front of `src`: `Ok(None)` if more bytes are
    /// needed, `Err` if the bytes can never be a valid request.
    pub fn decode(src: &mut BytesMut) -> Result<Option<Request>, ProtoError> {
        let Some((kind, len)) = peek_header(src, |k| match k {
            K_HELLO | K_STAT | K_START | K_EXTEND | K_END | K_AUTH | K_MANIFEST | K_WALK | K_BUNDLE_END => {
                Some(MAX_CONTROL_BODY)
            }
            K_BUNDLE => Some(MAX_BUNDLE_CHUNK),
            _ => None,
        })?
        else {
            return Ok(None);
        };
        if src.len() < HEADER_LEN + len {
            src.reserve(HEADER_LEN + len - src.len());
            return Ok(None);
        }
        src.advance(HEADER_LEN);
        let body = src.split_to(len).freeze();
        let mut r = Reader { buf: body, kind };
        let req = match kind {
            K_HELLO => {
                if r.bytes(MAGIC.len())?.as_ref() != MAGIC {
                    return Err(ProtoError::BadMagic);
                }
                Request::Hello { version: r.u16()? }
            }
            K_STAT => {
                let manifest = match r.u8()? {
                    0 => false,
                    1 => true,
                    _ => return Err(ProtoError::Malformed { kind, why: "manifest flag must be 0 or 1" }),
                };
                Request::Stat { path: r.path()?, manifest }
            }
            K_START => {
                let stream = r.u32()?;
                let block_size = r.u32()?;
                let first = r.u64()?;
                let last = r.u64()?;
                let dir = match r.u8()? {
                    0 => Direction::Increment,
                    1 => Direction::Decrement,
                    _ => return Err(ProtoError::Malformed { kind, why: "direction must be 0 or 1" }),
                };
                if !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&block_size) {
                    return Err(ProtoError::Malformed { kind, why: "block size out of range" });
                }
                Request::Start { stream, path: r.path()?, block_size, first, last, dir }
            }
            K_EXTEND => Request::Extend { stream: r.u32()?, last: r.u64()? },
            K_END => Request::End { stream: r.u32()? },
            K_AUTH => Request::Auth { mac: r.array()? },
            K_MANIFEST => {
                let first = r.u64()?;
                let count = r.u32()?;
                if count == 0 || count > MAX_MANIFEST_HASHES {
                    return Err(ProtoError::Malformed { kind, why: "manifest count out of range" });
                }
                Request::Manifest { path: r.path()?, first, count }
            }
            K_WALK => Request::Walk { path: r.path()? },
            K_BUNDLE => {
                let n = r.buf.len();
                Request::Bundle { data: r.bytes(n)? }
            }
            K_BUNDLE_END => Request::BundleEnd,
            _ => unreachable!("kinds were filtered by peek_header"),
        };
        r.finish()?;
        Ok(Some(req))
    }
}

impl Reply {
    /// Appends this reply's frame to `dst` (blocks included, for tests and
    /// small payloads; servers send blocks with [`put_block_header`]).
    pub fn encode(&self, dst: &mut BytesMut) {
        match self {
            Reply::Hello { version, server_id, max_block_size } => {
                put_header(dst, K_R_HELLO, MAGIC.len() + 2 + SERVER_ID_LEN + 4);
                dst.put_slice(MAGIC);
                dst.put_u16(*version);
                dst.put_slice(server_id);
                dst.put_u32(*max_block_size);
            }
            Reply::Stat { size, mtime_secs, mtime_nanos, digest } => {
                put_header(dst, K_R_STAT, 24 + 2 * HASH_LEN);
                dst.put_u64(*size);
                dst.put_i64(*mtime_secs);
                dst.put_u32(*mtime_nanos);
                dst.put_u32(digest.chunk_size);
                dst.put_slice(&digest.sha256);
                dst.put_slice(&digest.manifest);
            }
            Reply::Manifest { first, hashes } => {
                assert!(hashes.len() <= MAX_MANIFEST_HASHES as usize, "manifest replies are capped");
                put_header(dst, K_R_MANIFEST, 8 + HASH_LEN * hashes.len());
                dst.put_u64(*first);
                for h in hashes {
                    dst.put_slice(h);
                }
            }
            Reply::Block { stream, block, payload } => {
                put_header(dst, K_R_BLOCK, BLOCK_PREFIX_LEN + payload.len());
                dst.put_u32(*stream);
                dst.put_u64(*block);
                dst.put_slice(payload);
            }
            Reply::SealedBlock { stream, block, hash, payload } => {
                put_header(dst, K_R_SEALED_BLOCK, SEALED_PREFIX_LEN + payload.len());
                dst.put_u32(*stream);
                dst.put_u64(*block);
                dst.put_slice(hash);
                dst.put_slice(payload);
            }
            Reply::Stopped { stream, sent } => {
                put_header(dst, K_R_STOPPED, 12);
                dst.put_u32(*stream);
                dst.put_u64(*sent);
            }
            Reply::Error { code, message } => {
                let message = truncate(message, MAX_CONTROL_BODY - 4);
                put_header(dst, K_R_ERROR, 4 + message.len());
                dst.put_u16(code.to_u16());
                put_str(dst, message);
            }
            Reply::Challenge { nonce } => {
                put_header(dst, K_R_CHALLENGE, NONCE_LEN);
                dst.put_slice(nonce);
            }
            Reply::Bundle { name, size } => {
                put_header(dst, K_R_BUNDLE, 8 + 2 + name.len());
                dst.put_u64(*size);
                put_str(dst, name);
            }
            Reply::ListData { data } => {
                assert!(data.len() <= MAX_LIST_CHUNK, "list pieces are capped");
                put_header(dst, K_R_LIST_DATA, data.len());
                dst.put_slice(data);
            }
            Reply::Unreadable { index, message } => {
                let message = truncate(message, MAX_CONTROL_BODY - 10);
                put_header(dst, K_R_UNREADABLE, 8 + 2 + message.len());
                dst.put_u64(*index);
                put_str(dst, message);
            }
            Reply::WalkError { path, message } => {
                let path = truncate(path, MAX_CONTROL_BODY / 2);
                let message = truncate(message, MAX_CONTROL_BODY / 2 - 4);
                put_header(dst, K_R_WALK_ERROR, 4 + path.len() + message.len());
                put_str(dst, path);
                put_str(dst, message);
            }
            Reply::ListEnd { errors } => {
                put_header(dst, K_R_LIST_END, 8);
                dst.put_u64(*errors);
            }
        }
    }

    /// Takes one reply off the front of `src` (see [`Request::decode`]). A
    /// block's payload is split off `src` without copying.
    pub fn decode(src: &mut BytesMut) -> Result<Option<Reply>, ProtoError> {
        let Some((kind, len)) = peek_header(src, |k| match k {
            K_R_HELLO | K_R_STAT | K_R_STOPPED | K_R_ERROR | K_R_CHALLENGE | K_R_BUNDLE | K_R_LIST_END
            | K_R_UNREADABLE | K_R_WALK_ERROR => Some(MAX_CONTROL_BODY),
            K_R_LIST_DATA => Some(MAX_LIST_CHUNK),
            K_R_BLOCK => Some(BLOCK_PREFIX_LEN + MAX_BLOCK_SIZE as usize),
            K_R_SEALED_BLOCK => Some(SEALED_PREFIX_LEN + MAX_BLOCK_SIZE as usize),
            K_R_MANIFEST => Some(8 + HASH_LEN * MAX_MANIFEST_HASHES as usize),
            _ => None,
        })?
        else {
            return Ok(None);
        };
        if src.len() < HEADER_LEN + len {
            src.reserve(HEADER_LEN + len - src.len());
            return Ok(None);
        }
        src.advance(HEADER_LEN);
        let body = src.split_to(len).freeze();
        let mut r = Reader { buf: body, kind };
        let reply = match kind {
            K_R_HELLO => {
                if r.bytes(MAGIC.len())?.as_ref() != MAGIC {
                    return Err(ProtoError::BadMagic);
                }
                Reply::Hello { version: r.u16()?, server_id: r.array()?, max_block_size: r.u32()? }
            }
            K_R_STAT => Reply::Stat {
                size: r.u64()?,
                mtime_secs: r.i64()?,
                mtime_nanos: r.u32()?,
                digest: FileDigest { chunk_size: r.u32()?, sha256: r.array()?, manifest: r.array()? },
            },
            K_R_MANIFEST => {
                let first = r.u64()?;
                let partial = r.buf.len() % HASH_LEN;
                if partial != 0 {
                    return Err(ProtoError::Malformed { kind, why: "manifest body is not whole hashes" });
                }
                let hashes = r.buf.chunks_exact(HASH_LEN).map(|c| c.try_into().expect("HASH_LEN bytes")).collect();
                r.buf.clear();
                Reply::Manifest { first, hashes }
            }
            K_R_BLOCK => {
                let stream = r.u32()?;
                let block = r.u64()?;
                let payload = std::mem::take(&mut r.buf);
                Reply::Block { stream, block, payload }
            }
            K_R_SEALED_BLOCK => {
                let (stream, block, hash) = (r.u32()?, r.u64()?, r.array()?);
                Reply::SealedBlock { stream, block, hash, payload: std::mem::take(&mut r.buf) }
            }
            K_R_STOPPED => Reply::Stopped { stream: r.u32()?, sent: r.u64()? },
            K_R_ERROR => {
                let code = ErrorCode::from_u16(r.u16()?);
                Reply::Error { code, message: r.string()? }
            }
            K_R_CHALLENGE => Reply::Challenge { nonce: r.array()? },
            K_R_BUNDLE => {
                let size = r.u64()?;
                Reply::Bundle { size, name: r.string()? }
            }
            K_R_LIST_DATA => {
                let n = r.buf.len();
                Reply::ListData { data: r.bytes(n)? }
            }
            K_R_LIST_END => Reply::ListEnd { errors: r.u64()? },
            K_R_UNREADABLE => Reply::Unreadable { index: r.u64()?, message: r.string()? },
            K_R_WALK_ERROR => Reply::WalkError { path: r.string()?, message: r.string()? },
            _ => unreachable!("kinds were filtered by peek_header"),
        };
        r.finish()?;
        Ok(Some(reply))
    }
}

/// Reads a header if one is there, checking the kind and its length cap
/// before anything of the body is buffered.
fn peek_header(src: &BytesMut, cap: impl Fn(u8) -> Option<usize>) -> Result<Option<(u8, usize)>, ProtoError> {
    if src.is_empty() {
        return Ok(None);
    }
    let kind = src[0];
    let max = cap(kind).ok_or(ProtoError::UnknownKind(kind))?;
    if src.len() < HEADER_LEN {
        return Ok(None);
    }
    let len = u32::from_be_bytes([src[1], src[2], src[3], src[4]]) as usize;
    if len > max {
        return Err(ProtoError::TooLong { kind, len, max });
    }
    Ok(Some((kind, len)))
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Bounds-checked reads from one frame body.
struct Reader {
    buf: Bytes,
    kind: u8,
}

impl Reader {
    fn need(&self, n: usize) -> Result<(), ProtoError> {
        if self.buf.remaining() < n {
            return Err(ProtoError::Malformed { kind: self.kind, why: "body too short" });
        }
        Ok(())
    }
    fn u8(&mut self) -> Result<u8, ProtoError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }
    fn u16(&mut self) -> Result<u16, ProtoError> {
        self.need(2)?;
        Ok(self.buf.get_u16())
    }
    fn u32(&mut self) -> Result<u32, ProtoError> {
        self.need(4)?;
        Ok(self.buf.get_u32())
    }
    fn u64(&mut self) -> Result<u64, ProtoError> {
        self.need(8)?;
        Ok(self.buf.get_u64())
    }
    fn i64(&mut self) -> Result<i64, ProtoError> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], ProtoError> {
        let b = self.bytes(N)?;
        Ok(b.as_ref().try_into().expect("exactly N bytes"))
    }
    fn bytes(&mut self, n: usize) -> Result<Bytes, ProtoError> {
        self.need(n)?;
        Ok(self.buf.split_to(n))
    }
    fn string(&mut self) -> Result<String, ProtoError> {
        let n = self.u16()? as usize;
        let b = self.bytes(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| ProtoError::Malformed { kind: self.kind, why: "string is not UTF-8" })
    }
    fn path(&mut self) -> Result<String, ProtoError> {
        let s = self.string()?;
        if s.len() > MAX_PATH_LEN {
            return Err(ProtoError::Malformed { kind: self.kind, why: "path too long" });
        }
        Ok(s)
    }
    fn finish(self) -> Result<(), ProtoError> {
        if self.buf.has_remaining() {
            return Err(ProtoError::Malformed { kind: self.kind, why: "trailing bytes" });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn dir() -> impl Strategy<Value = Direction> {
        prop_oneof![Just(Direction::Increment), Just(Direction::Decrement)]
    }

    fn request() -> impl Strategy<Value = Request> {
        prop_oneof![
            any::<u16>().prop_map(|version| Request::Hello { version }),
            (".{0,64}", any::<bool>()).prop_map(|(path, manifest)| Request::Stat { path, manifest }),
            (any::<u32>(), ".{0,64}", MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE, any::<u64>(), any::<u64>(), dir()).prop_map(
                |(stream, path, block_size, first, last, dir)| {
                    Request::Start { stream, path, block_size, first, last, dir }
                }
            ),
            (any::<u32>(), any::<u64>()).prop_map(|(stream, last)| Request::Extend { stream, last }),
            any::<u32>().prop_map(|stream| Request::End { stream }),
            any::<[u8; 32]>().prop_map(|mac| Request::Auth { mac }),
            (".{0,64}", any::<u64>(), 1..=MAX_MANIFEST_HASHES).prop_map(|(path, first, count)| Request::Manifest {
                path,
                first,
                count
            }),
            ".{0,64}".prop_map(|path| Request::Walk { path }),
            proptest::collection::vec(any::<u8>(), 0..MAX_BUNDLE_CHUNK)
                .prop_map(|d| Request::Bundle { data: Bytes::from(d) }),
            Just(Request::BundleEnd),
        ]
    }

    fn reply() -> impl Strategy<Value = Reply> {
        prop_oneof![
            (any::<u16>(), any::<[u8; SERVER_ID_LEN]>(), any::<u32>())
                .prop_map(|(version, server_id, max_block_size)| Reply::Hello { version, server_id, max_block_size }),
            (any::<u64>(), any::<i64>(), any::<u32>(), any::<u32>(), any::<[u8; 32]>(), any::<[u8; 32]>()).prop_map(
                |(size, mtime_secs, mtime_nanos, chunk_size, sha256, manifest)| Reply::Stat {
                    size,
                    mtime_secs,
                    mtime_nanos,
                    digest: FileDigest { chunk_size, sha256, manifest }
                }
            ),
            (any::<u64>(), proptest::collection::vec(any::<[u8; 32]>(), 0..64))
                .prop_map(|(first, hashes)| Reply::Manifest { first, hashes }),
            (any::<u32>(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..2048))
                .prop_map(|(stream, block, p)| Reply::Block { stream, block, payload: Bytes::from(p) }),
            (any::<u32>(), any::<u64>(), any::<[u8; 32]>(), proptest::collection::vec(any::<u8>(), 0..2048)).prop_map(
                |(stream, block, hash, p)| Reply::SealedBlock { stream, block, hash, payload: Bytes::from(p) }
            ),
            (any::<u32>(), any::<u64>()).prop_map(|(stream, sent)| Reply::Stopped { stream, sent }),
            (1u16..7, ".{0,64}").prop_map(|(c, message)| Reply::Error { code: ErrorCode::from_u16(c), message }),
            any::<[u8; 32]>().prop_map(|nonce| Reply::Challenge { nonce }),
            (".{0,64}", any::<u64>()).prop_map(|(name, size)| Reply::Bundle { name, size }),
            proptest::collection::vec(any::<u8>(), 0..4096).prop_map(|d| Reply::ListData { data: Bytes::from(d) }),
            any::<u64>().prop_map(|errors| Reply::ListEnd { errors }),
            (any::<u64>(), ".{0,64}").prop_map(|(index, message)| Reply::Unreadable { index, message }),
            (".{0,64}", ".{0,64}").prop_map(|(path, message)| Reply::WalkError { path, message }),
        ]
    }

    proptest! {
        #[test]
        fn requests_round_trip_in_any_chunking(reqs in proptest::collection::vec(request(), 1..8), cut in 1usize..64) {
            let mut wire = BytesMut::new();
            for r in &reqs { r.encode(&mut wire); }
            let mut src = BytesMut::new();
            let mut got = Vec::new();
            for chunk in wire.chunks(cut) {
                src.extend_from_slice(chunk);
                while let Some(r) = Request::decode(&mut src).unwrap() { got.push(r); }
            }
            prop_assert_eq!(got, reqs);
            prop_assert!(src.is_empty());
        }

        #[test]
        fn replies_round_trip(reps in proptest::collection::vec(reply(), 1..8)) {
            let mut wire = BytesMut::new();
            for r in &reps { r.encode(&mut wire); }
            let mut got = Vec::new();
            while let Some(r) = Reply::decode(&mut wire).unwrap() { got.push(r); }
            prop_assert_eq!(got, reps);
        }

        #[test]
        fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut a = BytesMut::from(&bytes[..]);
            while let Ok(Some(_)) = Request::decode(&mut a) {}
            let mut b = BytesMut::from(&bytes[..]);
            while let Ok(Some(_)) = Reply::decode(&mut b) {}
        }
    }

    #[test]
    fn block_header_matches_encode() {
        let payload = Bytes::from_static(b"abcdef");
        let mut a = BytesMut::new();
        Reply::Block { stream: 7, block: 42, payload: payload.clone() }.encode(&mut a);
        let mut b = vec![0u8; HEADER_LEN + BLOCK_PREFIX_LEN];
        put_block_header(&mut b, 7, 42, payload.len());
        b.extend_from_slice(&payload);
        assert_eq!(&a[..], &b[..]);
        let mut a = BytesMut::new();
        Reply::SealedBlock { stream: 7, block: 42, hash: seal(&payload), payload: payload.clone() }.encode(&mut a);
        let mut b = vec![0u8; HEADER_LEN + SEALED_PREFIX_LEN];
        put_sealed_block_header(&mut b, 7, 42, &seal(&payload), payload.len());
        b.extend_from_slice(&payload);
        assert_eq!(&a[..], &b[..]);
    }

    #[test]
    fn oversized_lengths_are_refused_before_buffering() {
        let mut src = BytesMut::from(&[K_STAT, 0xff, 0xff, 0xff, 0xff][..]);
        assert!(matches!(Request::decode(&mut src), Err(ProtoError::TooLong { .. })));
        let mut src = BytesMut::from(&[K_R_BLOCK, 0x7f, 0xff, 0xff, 0xff][..]);
        assert!(matches!(Reply::decode(&mut src), Err(ProtoError::TooLong { .. })));
        let mut src = BytesMut::from(&[0x42u8][..]);
        assert_eq!(Request::decode(&mut src), Err(ProtoError::UnknownKind(0x42)));
    }

    #[test]
    fn bad_fields_are_malformed() {
        let mut wire = BytesMut::new();
        Request::Start { stream: 1, path: "f".into(), block_size: 1, first: 0, last: 0, dir: Direction::Increment }
            .encode(&mut wire);
        assert!(matches!(Request::decode(&mut wire), Err(ProtoError::Malformed { .. })));
        let mut wire = BytesMut::from(&[K_HELLO, 0, 0, 0, 7, b'N', b'O', b'P', b'E', b'!', 0, 1][..]);
        assert_eq!(Request::decode(&mut wire), Err(ProtoError::BadMagic));
        let mut wire = BytesMut::from(&[K_END, 0, 0, 0, 5, 0, 0, 0, 1, 9][..]);
        assert!(matches!(Request::decode(&mut wire), Err(ProtoError::Malformed { why: "trailing bytes", .. })));
    }

    #[test]
    fn direction_span_and_step() {
        assert_eq!(Direction::Increment.span(3, 5), 3);
        assert_eq!(Direction::Increment.span(5, 3), 0);
        assert_eq!(Direction::Decrement.span(5, 3), 3);
        assert_eq!(Direction::Decrement.step(0), None);
        assert_eq!(Direction::Increment.step(0), Some(1));
    }
}
