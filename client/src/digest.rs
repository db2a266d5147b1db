//! The SHA-256 of the output, computed while the data is still arriving.
//!
//! Blocks land out of order but a hash must see bytes in order. The
//! coordinator tracks which blocks are complete ([`Completed`]) and tells a
//! hashing thread ([`PrefixHasher`]) how far the contiguous prefix reaches;
//! the thread reads that prefix back (from the page cache) and hashes it.
//! The first pair's incrementing producer fills the file from the start, so
//! most of the hashing overlaps the network time instead of following it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::store::Store;
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use sha2::{Digest, Sha256};

/// SHA-256 of a whole file, read in 1 MiB pieces.
pub fn sha256_file(path: &std::path::Path) -> io::Result<String> {
    let f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let n = f.read_at(&mut buf, at)?;
        if n == 0 {
            return Ok(format!("{:x}", h.finalize()));
        }
        h.update(&buf[..n]);
        at += n as u64;
    }
}

/// Which blocks have arrived, and the length of the complete prefix.
#[derive(Debug)]
pub struct Completed {
    bits: Vec<u64>,
    blocks: u64,
    /// Blocks 0..prefix have all arrived.
    prefix: u64,
}

impl Completed {
    pub fn new(blocks: u64) -> Self {
        Completed { bits: vec![0; blocks.div_ceil(64) as usize], blocks, prefix: 0 }
    }

    /// Marks blocks `lo..=hi`; returns the new prefix if it grew.
    pub fn mark(&mut self, lo: u64, hi: u64) -> Option<u64> {
        for b in lo..=hi.min(self.blocks.saturating_sub(1)) {
            self.bits[(b / 64) as usize] |= 1 << (b % 64);
        }
        let before = self.prefix;
        while self.prefix < self.blocks {
            let (w, bit) = ((self.prefix / 64) as usize, self.prefix % 64);
            if bit == 0 && self.bits[w] == u64::MAX {
                self.prefix += 64;
            } else if self.bits[w] & (1 << bit) != 0 {
                self.prefix += 1;
            } else {
                break;
            }
        }
        self.prefix = self.prefix.min(self.blocks);
        (self.prefix > before).then_some(self.prefix)
    }

    /// Blocks `0..prefix` have all arrived.
    pub fn prefix(&self) -> u64 {
        self.prefix
    }

    /// Completed blocks as inclusive ranges (for the resume journal).
    pub fn ranges(&self) -> Vec<(u64, u64)> {
        let mut out = vec![];
        let mut start = None;
        for b in self.prefix..self.blocks {
            let set = self.bits[(b / 64) as usize] & (1 << (b % 64)) != 0;
            match (set, start) {
                (true, None) => start = Some(b),
                (false, Some(a)) => {
                    out.push((a, b - 1));
                    start = None;
                }
                _ => {}
            }
        }
        if let Some(a) = start {
            out.push((a, self.blocks - 1));
        }
        if self.prefix > 0 {
            match out.first_mut() {
                Some(first) if first.0 == self.prefix => first.0 = 0,
                _ => out.insert(0, (0, self.prefix - 1)),
            }
        }
        out
    }

    /// Blocks not yet completed, as half-open ranges.
    pub fn missing(&self) -> Vec<std::ops::Range<u64>> {
        let mut out = vec![];
        let mut at = 0;
        for (a, b) in self.ranges() {
            if a > at {
                out.push(at..a);
            }
            at = b + 1;
        }
        if at < self.blocks {
            out.push(at..self.blocks);
        }
        out
    }
}

/// A thread hashing the output in order as far as it is complete.
pub struct PrefixHasher {
    tx: Option<mpsc::Sender<u64>>,
    handle: JoinHandle<io::Result<String>>,
}

impl PrefixHasher {
    pub fn spawn(file: Arc<dyn Store>, size: u64) -> io::Result<PrefixHasher> {
        let (tx, rx) = mpsc::channel::<u64>();
        let handle = std::thread::Builder::new().name("ddftp-hash".into()).spawn(move || {
            let mut h = Sha256::new();
            let mut buf = vec![0u8; 1 << 20];
            let (mut hashed, mut avail) = (0u64, 0u64);
            loop {
                while hashed < avail {
                    let n = (avail - hashed).min(buf.len() as u64) as usize;
                    file.read_exact_at(&mut buf[..n], hashed)?;
                    h.update(&buf[..n]);
                    hashed += n as u64;
                }
                if hashed >= size {
                    return Ok(format!("{:x}", h.finalize()));
                }
                match rx.recv() {
                    Ok(v) => avail = v.min(size),
                    Err(_) => return Err(io::Error::new(io::ErrorKind::Interrupted, "transfer ended early")),
                }
                while let Ok(v) = rx.try_recv() {
                    avail = v.min(size);
                }
            }
        })?;
        Ok(PrefixHasher { tx: Some(tx), handle })
    }

    /// The first `bytes` bytes of the file are final.
    pub fn advance(&self, bytes: u64) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(bytes);
        }
    }

    /// Waits for the hash of the whole file (all of it must have been
    /// announced with [`advance`](Self::advance)).
    pub fn finish(mut self) -> io::Result<String> {
        drop(self.tx.take());
        self.handle.join().map_err(|_| io::Error::other("hash thread panicked"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_grows_only_when_contiguous() {
        let mut c = Completed::new(200);
        assert_eq!(c.mark(5, 9), None);
        assert_eq!(c.mark(0, 3), Some(4));
        assert_eq!(c.mark(4, 4), Some(10));
        assert_eq!(c.mark(64, 199), None);
        assert_eq!(c.mark(10, 63), Some(200));
    }

    #[test]
    fn ranges_and_missing() {
        let mut c = Completed::new(300);
        c.mark(0, 9);
        c.mark(20, 29);
        c.mark(64, 130);
        c.mark(299, 299);
        assert_eq!(c.ranges(), vec![(0, 9), (20, 29), (64, 130), (299, 299)]);
        assert_eq!(c.missing(), vec![10..20, 30..64, 131..299]);
        let empty = Completed::new(5);
        assert_eq!(empty.missing(), vec![0..5]);
        let mut full = Completed::new(5);
        full.mark(0, 4);
        assert_eq!(full.ranges(), vec![(0, 4)]);
        assert!(full.missing().is_empty());
    }

    #[test]
    fn hashes_what_is_announced() {
        let path = std::env::temp_dir().join(format!("ddftp-digest-{}", std::process::id()));
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let f = Arc::new(File::open(&path).unwrap());
        let h = PrefixHasher::spawn(f, data.len() as u64).unwrap();
        h.advance(1_000_000);
        h.advance(data.len() as u64);
        assert_eq!(h.finish().unwrap(), format!("{:x}", Sha256::digest(&data)));
        std::fs::remove_file(&path).unwrap();
    }
}
