//! The SHA-256 of the output, computed while the data is still arriving.
//!
//! Blocks land out of order but a hash must see bytes in order. The
//! coordinator tracks which blocks are complete ([`Completed`], from
//! `ddops`) and tells a
//! hashing thread ([`PrefixHasher`]) how far the contiguous prefix reaches;
//! the thread reads that prefix back (from the page cache) and hashes it.
//! The first pair's incrementing producer fills the file from the start, so
//! most of the hashing overlaps the network time instead of following it.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

pub use ddops::completed::Completed;

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

/// A thread hashing the output in order as far as it is complete.
pub struct PrefixHasher {
    tx: Option<mpsc::Sender<u64>>,
    handle: JoinHandle<io::Result<String>>,
}

/// Where the bytes the hasher reads go next, in order (`-o -`: standard
/// output, and the reorder window freed behind them).
pub trait Sink: Send {
    /// `data` is the file's next bytes, ending at byte `end`.
    fn put(&mut self, data: &[u8], end: u64) -> io::Result<()>;
}

impl PrefixHasher {
    pub fn spawn(file: Arc<dyn Store>, size: u64) -> io::Result<PrefixHasher> {
        PrefixHasher::spawn_into(file, size, None)
    }

    /// [`spawn`](Self::spawn), each piece hashed then handed to `sink`.
    pub fn spawn_into(file: Arc<dyn Store>, size: u64, mut sink: Option<Box<dyn Sink>>) -> io::Result<PrefixHasher> {
        let (tx, rx) = mpsc::channel::<u64>();
        let handle = std::thread::Builder::new().name("ddftp-hash".into()).spawn(move || {
            let mut h = Sha256::new();
            // No bigger than the file: a list of small files makes one a file.
            let mut buf = vec![0u8; size.clamp(1, 1 << 20) as usize];
            let (mut hashed, mut avail) = (0u64, 0u64);
            loop {
                while hashed < avail {
                    let n = (avail - hashed).min(buf.len() as u64) as usize;
                    file.read_exact_at(&mut buf[..n], hashed)?;
                    h.update(&buf[..n]);
                    hashed += n as u64;
                    if let Some(s) = &mut sink {
                        s.put(&buf[..n], hashed)?;
                    }
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
