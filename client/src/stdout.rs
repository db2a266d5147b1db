//! `get -o -`: the file in order on standard output, memory bounded by a
//! reorder window. Blocks land in a ring of `window` bytes ([`Ring`]) at
//! their offset modulo the window; the hashing thread reads the complete
//! prefix back, hashes it and writes it out ([`StdoutSink`]), which frees
//! its place in the ring. The transfer hands out no block past what has
//! been written plus the window (`Transfer::windowed`), so a block never
//! lands on bytes not yet written.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::digest::Sink;
use crate::store::Store;

/// The reorder window: block `b` lives in place `b % places`.
#[derive(Debug)]
pub struct Ring {
    block: u64,
    places: Vec<Mutex<Box<[u8]>>>,
    /// Bytes written out so far: the ring holds `written..written + window`.
    written: Arc<AtomicU64>,
    /// Told whenever more is written out, or writing failed.
    pub moved: Arc<tokio::sync::Notify>,
    /// Writing out failed (a closed pipe): the transfer must stop.
    broken: Arc<AtomicBool>,
}

impl Ring {
    /// A ring of at least two blocks of `block` bytes, about `window` bytes.
    pub fn new(window: u64, block: u32) -> Ring {
        let n = (window / u64::from(block)).max(2);
        let places = (0..n).map(|_| Mutex::new(vec![0u8; block as usize].into_boxed_slice())).collect();
        Ring { block: u64::from(block), places, written: Arc::default(), moved: Arc::default(), broken: Arc::default() }
    }

    /// Blocks the ring holds.
    pub fn blocks(&self) -> u64 {
        self.places.len() as u64
    }

    /// Bytes written out so far.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// Writing out failed.
    pub fn broken(&self) -> bool {
        self.broken.load(Ordering::Acquire)
    }

    /// The sink that writes the ring's bytes out to `out` and frees them.
    pub fn sink(&self, out: Box<dyn Write + Send>) -> StdoutSink {
        StdoutSink { out, written: self.written.clone(), moved: self.moved.clone(), broken: self.broken.clone() }
    }

    fn place(&self, offset: u64) -> io::Result<(&Mutex<Box<[u8]>>, usize)> {
        let (b, within) = (offset / self.block, (offset % self.block) as usize);
        let window = self.blocks() * self.block;
        if offset >= self.written() + window {
            // Never over bytes not yet written: a rule of the transfer's,
            // checked here rather than trusted.
            return Err(io::Error::other(format!("byte {offset} is past the reorder window")));
        }
        Ok((&self.places[(b % self.blocks()) as usize], within))
    }
}

impl Store for Ring {
    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            let (p, within) = self.place(offset)?;
            let mut p = p.lock().expect("ring lock");
            let n = buf.len().min(p.len() - within);
            p[within..within + n].copy_from_slice(&buf[..n]);
            buf = &buf[n..];
            offset += n as u64;
        }
        Ok(())
    }

    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            let (p, within) = self.place(offset)?;
            let p = p.lock().expect("ring lock");
            let n = buf.len().min(p.len() - within);
            buf[..n].copy_from_slice(&p[within..within + n]);
            buf = &mut buf[n..];
            offset += n as u64;
        }
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes the file's bytes out in order, freeing the ring behind them.
pub struct StdoutSink {
    out: Box<dyn Write + Send>,
    written: Arc<AtomicU64>,
    moved: Arc<tokio::sync::Notify>,
    broken: Arc<AtomicBool>,
}

impl Sink for StdoutSink {
    fn put(&mut self, data: &[u8], end: u64) -> io::Result<()> {
        let r = self.out.write_all(data).and_then(|()| self.out.flush());
        match &r {
            Ok(()) => self.written.store(end, Ordering::Release),
            Err(_) => self.broken.store(true, Ordering::Release),
        }
        self.moved.notify_one();
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_in_any_order_come_out_in_order_and_never_past_the_window() {
        let ring = Ring::new(4 * 1024, 1024);
        assert_eq!(ring.blocks(), 4);
        let data: Vec<u8> = (0..10 * 1024u32).map(|i| (i % 253) as u8).collect();
        let out = Arc::new(Mutex::new(Vec::new()));
        struct Shared(Arc<Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut sink = ring.sink(Box::new(Shared(out.clone())));
        let mut at = 0u64;
        for window in data.chunks(4 * 1024) {
            let base = at;
            for (i, b) in window.chunks(1024).enumerate().rev() {
                ring.write_all_at(b, base + 1024 * i as u64).unwrap();
            }
            assert!(ring.write_all_at(&[0], base + 4 * 1024).is_err(), "past the window");
            let mut buf = vec![0u8; window.len()];
            ring.read_exact_at(&mut buf, base).unwrap();
            at += window.len() as u64;
            sink.put(&buf, at).unwrap();
        }
        assert_eq!(*out.lock().unwrap(), data);
    }
}
