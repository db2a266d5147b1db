//! File lists: what a tree walk found, in a form another tool can read.
//!
//! Two formats, told apart by their first bytes so `--list` takes either:
//! - [`ddftp`]: ours, one NUL-terminated text record per entry
//!   (`TYPE SIZE MODE MTIME PATH`), readable with `tr '\0' '\n'`; paths are
//!   raw bytes, so any name (newlines, non-UTF-8) round-trips.
//! - [`mfu`]: mpifileutils' binary format v4 (what `dwalk --output` writes),
//!   so ddftp can move what an existing dwalk found and mpifileutils tools
//!   can read our walks.

pub mod ddftp;
pub mod meta;
pub mod mfu;
pub mod shape;

pub use meta::Meta;

use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What kind of entry, with `find -printf %y`'s letters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    File,
    Dir,
    Link,
    Block,
    Char,
    Fifo,
    Socket,
}

impl Kind {
    /// From `st_mode` (its `S_IFMT` bits); `None` for an unknown type.
    pub fn from_mode(mode: u32) -> Option<Kind> {
        Some(match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Link,
            libc::S_IFBLK => Kind::Block,
            libc::S_IFCHR => Kind::Char,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            _ => return None,
        })
    }

    /// The `S_IFMT` bits of this kind.
    pub fn mode_bits(self) -> u32 {
        match self {
            Kind::File => libc::S_IFREG,
            Kind::Dir => libc::S_IFDIR,
            Kind::Link => libc::S_IFLNK,
            Kind::Block => libc::S_IFBLK,
            Kind::Char => libc::S_IFCHR,
            Kind::Fifo => libc::S_IFIFO,
            Kind::Socket => libc::S_IFSOCK,
        }
    }

    /// `find -printf %y`'s letter.
    pub fn letter(self) -> u8 {
        match self {
            Kind::File => b'f',
            Kind::Dir => b'd',
            Kind::Link => b'l',
            Kind::Block => b'b',
            Kind::Char => b'c',
            Kind::Fifo => b'p',
            Kind::Socket => b's',
        }
    }

    pub fn from_letter(c: u8) -> Option<Kind> {
        [Kind::File, Kind::Dir, Kind::Link, Kind::Block, Kind::Char, Kind::Fifo, Kind::Socket]
            .into_iter()
            .find(|k| k.letter() == c)
    }
}

/// A time as `lstat` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time {
    pub sec: i64,
    pub nsec: u32,
}

/// One entry of a list: what the mover needs to recreate it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The path as the walk saw it (bytes, not assumed UTF-8).
    pub path: Vec<u8>,
    pub kind: Kind,
    /// Permission bits (`st_mode & 07777`).
    pub perm: u32,
    /// `st_size` (for a symlink, the length of its target).
    pub size: u64,
    pub mtime: Time,
    /// Owner, hard-link id, device numbers, data runs, xattrs ([`Meta`]).
    pub meta: Meta,
}

impl Entry {
    /// The entry `lstat` describes; `None` for an unknown file type.
    pub fn from_metadata(path: Vec<u8>, md: &std::fs::Metadata) -> Option<Entry> {
        Some(Entry {
            path,
            kind: Kind::from_mode(md.mode())?,
            perm: md.mode() & 0o7777,
            size: md.size(),
            mtime: Time { sec: md.mtime(), nsec: md.mtime_nsec() as u32 },
            meta: Meta::of(md.mode(), md.uid(), md.gid(), md.nlink(), (md.dev(), md.ino()), md.rdev()),
        })
    }
}

/// Why a list could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error(
        "{path}: not a ddftp list or an mpifileutils list (it starts with neither \"#ddftp-list\" nor a v4 header)"
    )]
    UnknownFormat { path: PathBuf },
    #[error("{path}: mpifileutils list version {version}; only version 4 is read")]
    MfuVersion { path: PathBuf, version: u64 },
    #[error("{path}: truncated: {detail}")]
    Truncated { path: PathBuf, detail: String },
    #[error("{path}: record {record}: {detail}")]
    Malformed { path: PathBuf, record: u64, detail: String },
}

/// Reads a list in either format (told apart by its first bytes).
pub fn read(path: &Path) -> Result<Vec<Entry>, ListError> {
    let io = |source| ListError::Io { path: path.to_owned(), source };
    let mut r = BufReader::with_capacity(1 << 20, File::open(path).map_err(io)?);
    let mut head = [0u8; 8];
    let mut got = 0;
    while got < head.len() {
        match r.read(&mut head[got..]).map_err(io)? {
            0 => break,
            n => got += n,
        }
    }
    let head = &head[..got];
    let rest = std::io::Cursor::new(head.to_vec()).chain(r);
    if head == &ddftp::MAGIC[..8] {
        ddftp::read(rest, path)
    } else if got == 8 && head[..7] == [0; 7] {
        mfu::read(rest, path)
    } else {
        Err(ListError::UnknownFormat { path: path.to_owned() })
    }
}
