//! Files a receiver serves while it downloads them (`ddftp get --share`):
//! every block it has verified is one more source for the other
//! receivers of the same file.
//!
//! A [`Share`] is offered once the receiver knows what the file is (the
//! version the mirrors agreed on and its chunk manifest): `Stat` and
//! `Manifest` answer from it, never from the disk, so a peer vouches only
//! for what the mirrors said. Its bytes are the receiver's part file;
//! a block is sent once every byte of it is verified, and a stream whose
//! next block is not yet there waits (the pipelining: blocks pass on as
//! they arrive, never a whole file stored first).
//!
//! A bundle (`ddftp archive --share`) is shared the same way, read back
//! through the receiver's own store and sent sealed; the other receivers
//! check each block against the mirrors' seals (`Seals`), never this one's.
//!
//! A server made for sharing serves its shares and nothing else: no other
//! path, no walk, no bundle of its own ([`Shares::only`]).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::sync::{Arc, Mutex, RwLock};

use ddftp_proto::manifest::{FileDigest, Hash};
use ddftp_proto::Direction;
use tokio::sync::watch;

use crate::digests::{Digests, Key};

/// Where a share's bytes are read.
pub enum ShareBytes {
    /// A file's: its part file (read only), sent as it is.
    File(Arc<File>),
    /// A bundle's: the receiver's store, read block by block and sealed.
    Sealed(Arc<dyn ReadAt>),
}

impl std::fmt::Debug for ShareBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ShareBytes::File(_) => "File",
            ShareBytes::Sealed(_) => "Sealed",
        })
    }
}

/// A range's bytes by offset.
pub trait ReadAt: Send + Sync {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
}

/// One file (or bundle) being shared.
#[derive(Debug)]
pub struct Share {
    pub bytes: ShareBytes,
    /// What the mirrors said the file is.
    pub digests: Arc<Digests>,
    /// Verified byte ranges, `start -> end`, merged.
    have: Mutex<BTreeMap<u64, u64>>,
    /// Bumped whenever `have` grows; streams waiting for a block watch it.
    grew: watch::Sender<u64>,
    /// What this receiver's mirrors fetch of other receivers' shares, in
    /// the order it was said (`Tell`); its length is what the watchers see.
    told: Mutex<Vec<Fetching>>,
    told_grew: watch::Sender<usize>,
}

/// Bytes `at..at + len` of a share this receiver's mirrors fetch, in
/// `dir`'s order ([`Share::fetching`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetching {
    pub at: u64,
    pub len: u64,
    pub dir: Direction,
}

/// Runs told at most (a grant each: a receiver's mirrors help another's
/// share in a few hundred); past this, nothing more is told, and the
/// others fetch those blocks as they would untold.
const MAX_TOLD: usize = 16 * 1024;

impl Share {
    /// A share of `file` (empty so far) that is the `size`-byte file the
    /// mirrors described with `digest`, `hashes` and `mtime`.
    pub fn new(file: File, size: u64, mtime: (i64, u32), digest: FileDigest, hashes: Vec<Hash>) -> Share {
        let key = Key { dev: 0, ino: 0, size, mtime_secs: mtime.0, mtime_nanos: mtime.1 };
        Share::of(ShareBytes::File(Arc::new(file)), Digests { key, digest, hashes, weak: vec![] })
    }

    /// A share of the `size`-byte bundle `bytes` reads: `Stat` says its
    /// size (and digests of zeros: a bundle has none).
    pub fn sealed(bytes: Arc<dyn ReadAt>, size: u64) -> Share {
        let key = Key { dev: 0, ino: 0, size, mtime_secs: 0, mtime_nanos: 0 };
        let digest =
            FileDigest { chunk_size: ddftp_proto::manifest::chunk_size(size), sha256: [0; 32], manifest: [0; 32] };
        Share::of(ShareBytes::Sealed(bytes), Digests { key, digest, hashes: vec![], weak: vec![] })
    }

    fn of(bytes: ShareBytes, digests: Digests) -> Share {
        Share {
            bytes,
            digests: Arc::new(digests),
            have: Mutex::new(BTreeMap::new()),
            grew: watch::Sender::new(0),
            told: Mutex::new(vec![]),
            told_grew: watch::Sender::new(0),
        }
    }

    /// Bytes of the share from `offset`.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        match &self.bytes {
            ShareBytes::File(f) => std::os::unix::fs::FileExt::read_exact_at(&**f, buf, offset),
            ShareBytes::Sealed(r) => r.read_exact_at(buf, offset),
        }
    }

    pub fn size(&self) -> u64 {
        self.digests.key.size
    }

    /// Bytes `at..at + len` are verified and written.
    pub fn verified(&self, at: u64, len: u64) {
        let end = at.saturating_add(len).min(self.size());
        if end <= at {
            return;
        }
        let mut have = self.have.lock().expect("share lock");
        let (mut lo, mut hi) = (at, end);
        // Merge with every range that touches [lo, hi).
        let touching: Vec<(u64, u64)> =
            have.range(..=hi).rev().take_while(|&(_, &e)| e >= lo).map(|(&s, &e)| (s, e)).collect();
        for (s, e) in touching {
            have.remove(&s);
            lo = lo.min(s);
            hi = hi.max(e);
        }
        have.insert(lo, hi);
        drop(have);
        self.grew.send_modify(|n| *n += 1);
    }

    /// Whether every byte of `at..at + len` is verified.
    pub fn has(&self, at: u64, len: u64) -> bool {
        let have = self.have.lock().expect("share lock");
        have.range(..=at).next_back().is_some_and(|(_, &e)| e >= at.saturating_add(len))
    }

    /// Verified bytes so far.
    pub fn verified_bytes(&self) -> u64 {
        self.have.lock().expect("share lock").iter().map(|(s, e)| e - s).sum()
    }

    /// This receiver's mirrors fetch `f` of another receiver's share: the
    /// receivers that asked to be told (`Tell`) are.
    pub fn fetching(&self, f: Fetching) {
        let end = f.at.saturating_add(f.len).min(self.size());
        if end <= f.at {
            return;
        }
        let mut told = self.told.lock().expect("share lock");
        if told.len() >= MAX_TOLD {
            return;
        }
        told.push(Fetching { len: end - f.at, ..f });
        let n = told.len();
        drop(told);
        self.told_grew.send_replace(n);
    }

    /// What was told from run `from` on, and what to watch for more.
    pub fn told(&self, from: usize) -> Vec<Fetching> {
        self.told.lock().expect("share lock").get(from..).map(<[_]>::to_vec).unwrap_or_default()
    }

    /// Changes whenever something more is told ([`Share::fetching`]).
    pub fn watch_told(&self) -> watch::Receiver<usize> {
        self.told_grew.subscribe()
    }

    /// Resolves once more is verified than when `seen` was taken
    /// ([`Share::watch`]).
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.grew.subscribe()
    }
}

/// The files a server shares, by the path clients ask for.
#[derive(Debug, Default)]
pub struct Shares {
    map: RwLock<HashMap<String, Arc<Share>>>,
    /// Serve these and nothing else (a receiver's server).
    only: bool,
    /// Everything this server will share is offered (or it shares
    /// nothing): a path not offered now never will be.
    settled: std::sync::atomic::AtomicBool,
}

impl Shares {
    /// A table for a server that serves its shares only.
    pub fn only() -> Shares {
        Shares { map: RwLock::default(), only: true, settled: Default::default() }
    }

    /// Serves `share` as `path` from now on (and nothing else: a receiver
    /// moves one file or one tree's range).
    pub fn offer(&self, path: &str, share: Arc<Share>) {
        self.map.write().expect("shares lock").insert(path.to_string(), share);
        self.decline();
    }

    /// Nothing (more) will be offered: a receiver that cannot share what
    /// it moves, or moves something else than it is asked for.
    pub fn decline(&self) {
        self.settled.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether a path not offered now never will be.
    pub fn settled(&self) -> bool {
        self.settled.load(std::sync::atomic::Ordering::Acquire)
    }

    pub fn get(&self, path: &str) -> Option<Arc<Share>> {
        self.map.read().expect("shares lock").get(path).cloned()
    }

    /// The server serves shares and nothing else.
    pub fn is_only(&self) -> bool {
        self.only
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn share(size: u64) -> Share {
        let digest = FileDigest { chunk_size: 1, sha256: [0; 32], manifest: [0; 32] };
        Share::new(tempfile::tempfile().unwrap(), size, (0, 0), digest, vec![])
    }

    #[test]
    fn a_block_is_there_once_every_byte_of_it_is_verified() {
        let s = share(100);
        assert!(!s.has(0, 10));
        s.verified(0, 5);
        assert!(s.has(0, 5) && !s.has(0, 10) && !s.has(4, 2));
        s.verified(5, 5);
        assert!(s.has(0, 10));
        s.verified(20, 10);
        assert!(!s.has(5, 20));
        s.verified(10, 10);
        assert!(s.has(0, 30));
        // Past the end is cut to the size.
        s.verified(90, 50);
        assert_eq!(s.verified_bytes(), 40);
    }

    proptest! {
        /// Whatever order ranges are verified in, `has` says exactly
        /// whether every byte of the asked range was among them.
        #[test]
        fn has_is_the_union_of_what_was_verified(ranges in proptest::collection::vec((0u64..200, 0u64..40), 0..30),
                                                 ask in (0u64..220, 1u64..60)) {
            let s = share(200);
            let mut bytes = [false; 200];
            for &(at, len) in &ranges {
                s.verified(at, len);
                for b in at..(at + len).min(200) {
                    bytes[b as usize] = true;
                }
            }
            let (at, len) = ask;
            let want = at + len <= 200 && (at..at + len).all(|b| bytes[b as usize]);
            prop_assert_eq!(s.has(at, len), want);
            prop_assert_eq!(s.verified_bytes(), bytes.iter().filter(|&&b| b).count() as u64);
        }
    }
}
