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

/// Bumped on any change; exchanged in `Hello`.
pub const PROTOCOL_VERSION: u16 = 11;
/// The oldest version still spoken: 8 only added `WeakSums`, which a
/// client asks only of a server that said 8, 9 `Waiting`, which a
/// server sends only to a client that said 9, 10 several merge names
/// in `WalkFiltered`, which a client sends only to a server that said 10,
/// and 11 `Tell`, which a client asks only of a server that said 11.
pub const OLDEST_PROTOCOL_VERSION: u16 = 7;
/// The first version with `WeakSums`.
pub const WEAK_SUMS_VERSION: u16 = 8;
/// The first version with `Waiting`.
pub const WAITING_VERSION: u16 = 9;
/// The first version whose `WalkFiltered` takes several merge names
/// and leaves mount points out (`-xx`).
pub const MERGE_NAMES_VERSION: u16 = 10;
/// The first version with `Tell` (and its `Fetching`).
pub const TELL_VERSION: u16 = 11;

/// Whether a peer's `Hello` version is one this side speaks.
pub fn spoken(version: u16) -> bool {
    (OLDEST_PROTOCOL_VERSION..=PROTOCOL_VERSION).contains(&version)
}
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
/// Rules a `WalkFiltered` may carry (all of them fit in one control frame).
pub const MAX_WALK_RULES: usize = 256;
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

/// The most bytes of blocks one `Seals` request covers (`count` times
/// `block_size`): a mirror reads and hashes what it has not kept, and one
/// request must not make it read gigabytes.
pub const MAX_SEALS_BYTES: u64 = 256 << 20;
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
const K_WALK_FILTERED: u8 = 0x0b;
const K_SEALS: u8 = 0x0c;
const K_WEAK_SUMS: u8 = 0x0d;
const K_TELL: u8 = 0x0e;
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
const K_R_WEAK_SUMS: u8 = 0x8d;
const K_R_WAITING: u8 = 0x8e;
const K_R_ERROR: u8 = 0x8f;
const K_R_FETCHING: u8 = 0x90;

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
    /// `Walk`, leaving out what these rules exclude (`(include, pattern)`,
    /// in order, the first match deciding; gitignore-like patterns on
    /// paths below `path`): an excluded directory is not read at all.
    /// With `xattrs`, each entry's extended attributes are listed too;
    /// with `names`, its owner's and group's names. A non-empty `merge`
    /// (rsync's `dir-merge NAME`; from protocol 10 several, `/`-separated)
    /// names the files whose
    /// content (at most 64 KiB) is listed with them: each directory's
    /// filter rules, which the client applies (they are read even where
    /// `rules` exclude them). With `one_fs` 1 (rsync's `-x`, protocol 9: an
    /// older server refuses the flag, so a client asks it only of one that
    /// said 9), a directory on another file system than `path` is listed
    /// but not entered; with 2 (`-xx`, protocol 10), not listed either.
    WalkFiltered { path: String, rules: Vec<(bool, String)>, xattrs: bool, names: bool, merge: String, one_fs: u8 },
    /// The next piece (≤ [`MAX_BUNDLE_CHUNK`] bytes) of a bundle's
    /// definition: a ddftp list of regular files and symlinks, in order,
    /// packed ([`crate::packed`]).
    Bundle { data: Bytes },
    /// The bundle's definition is complete: the server checks its paths
    /// and answers `Bundle` with the name under which `Stat`, `Manifest`
    /// and `Start` read the entries' bytes as one range (each entry checked
    /// against the list as it is read).
    BundleEnd,
    /// The seals (as a `SealedBlock` would carry them) of blocks
    /// `first..first+count` of a bundle (or file) cut into `block_size`-byte blocks,
    /// answered as `Manifest` replies (`count` ≤ [`MAX_MANIFEST_HASHES`],
    /// and `count * block_size` ≤ [`MAX_SEALS_BYTES`]).
    /// A receiver that takes a bundle's blocks from another receiver
    /// (`archive --share`) checks them against these, from a mirror: a
    /// peer's own seal vouches for nothing. Of a file (protocol 8): a
    /// client updating an older copy finds which pieces of a changed chunk
    /// it holds, and asks only for the others.
    Seals { path: String, block_size: u32, first: u64, count: u32 },
    /// The weak (rolling) checksums of chunks `first..first+count` of
    /// `path`'s manifest ([`crate::rolling`]; `count` ≤
    /// [`MAX_MANIFEST_HASHES`]), answered as `WeakSums` replies: what a
    /// client slides over an older copy to find chunks that moved.
    WeakSums { path: String, first: u64, count: u32 },
    /// A receiver sharing `path` (`ddftp get --share`) is to tell, as
    /// `Fetching` replies, which bytes of it its mirrors fetch of another
    /// receiver's share (those told so far, then each as it comes), until
    /// the client closes: the connection does nothing else.
    Tell { path: String },
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
    /// The running stream's next block is not here yet (a receiver's
    /// server: it has not verified that block yet, and is fetching it);
    /// sent about once a second while it waits, so the client can tell a
    /// producer that waits for its own source from one that stalled.
    Waiting {
        stream: u32,
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
    /// Weak checksums of chunks starting at chunk `first`.
    WeakSums {
        first: u64,
        sums: Vec<u32>,
    },
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
    /// Answers `Tell`: this receiver's mirrors fetch bytes `at..at + len`
    /// of the file, in `dir`'s order.
    Fetching {
        at: u64,
        len: u64,
        dir: Direction,
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

mod codec;

#[cfg(test)]
mod tests;
