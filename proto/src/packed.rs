//! Lists on the wire: a walk's list (`ListData` replies) and a bundle's
//! definition (`Bundle` requests) travel as one LZ4 frame, cut into pieces.
//!
//! A list of 100,000 entries is ~7 MB of text that repeats itself (sorted
//! paths share their directories, mtimes their seconds); packed it is ~4x
//! smaller, which on a 80 Mbit/s link is half a second less before a byte
//! of the files moves. Packing costs ~2 ms a MB. The receiver unpacks with
//! a limit: a small frame that would unpack to gigabytes is refused, not
//! followed.

use std::io::{Read, Write};

use lz4_flex::frame::{FrameDecoder, FrameEncoder};

/// Largest list either end unpacks (~3M entries): a bundle's definition,
/// or a walk's list.
pub const MAX_LIST: usize = 256 << 20;

/// Packs a whole list.
pub fn pack(list: &[u8]) -> Vec<u8> {
    let mut p = Packer::new();
    p.write(list);
    p.finish()
}

/// Packs a list given piece by piece, handing out what is packed so far.
pub struct Packer {
    enc: FrameEncoder<Vec<u8>>,
}

impl Default for Packer {
    fn default() -> Self {
        Packer::new()
    }
}

impl Packer {
    pub fn new() -> Packer {
        Packer { enc: FrameEncoder::new(Vec::new()) }
    }

    pub fn write(&mut self, list: &[u8]) {
        self.enc.write_all(list).expect("writing to memory cannot fail");
    }

    /// Packs what was written so far (into a block shorter than the
    /// frame's, if need be), for [`Packer::take`].
    pub fn flush(&mut self) {
        self.enc.flush().expect("writing to memory cannot fail");
    }

    /// The packed bytes so far (taken out).
    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(self.enc.get_mut())
    }

    /// The rest of the packed bytes.
    pub fn finish(self) -> Vec<u8> {
        self.enc.finish().expect("writing to memory cannot fail")
    }
}

/// Why a packed list was refused.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("a packed list that does not unpack: {0}")]
    Corrupt(#[source] std::io::Error),
    #[error("a packed list of more than {limit} bytes")]
    TooLong { limit: usize },
}

/// Unpacks a list of at most `limit` bytes.
pub fn unpack(packed: &[u8], limit: usize) -> Result<Vec<u8>, UnpackError> {
    let mut out = Vec::new();
    let mut dec = FrameDecoder::new(packed).take(limit as u64 + 1);
    dec.read_to_end(&mut out).map_err(UnpackError::Corrupt)?;
    if out.len() > limit {
        return Err(UnpackError::TooLong { limit });
    }
    Ok(out)
}

/// Unpacks a list as its packed pieces arrive: a reader (for a thread)
/// of the unpacked bytes, fed through [`Feed`]; past `limit` unpacked
/// bytes it fails.
pub fn unpacker(limit: usize) -> (Feed, impl Read + Send) {
    let (tx, rx) = std::sync::mpsc::channel();
    let pieces = Pieces { rx, cur: Vec::new(), at: 0 };
    let r = Limited { inner: FrameDecoder::new(pieces), left: limit as u64 };
    (Feed { tx }, r)
}

/// The packed pieces' way in to an [`unpacker`]; dropping it ends the list.
pub struct Feed {
    tx: std::sync::mpsc::Sender<Vec<u8>>,
}

impl Feed {
    /// Hands over the next piece; false once the reader is gone.
    pub fn piece(&self, packed: Vec<u8>) -> bool {
        self.tx.send(packed).is_ok()
    }
}

struct Pieces {
    rx: std::sync::mpsc::Receiver<Vec<u8>>,
    cur: Vec<u8>,
    at: usize,
}

impl Read for Pieces {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.cur.len() {
            match self.rx.recv() {
                Ok(p) => (self.cur, self.at) = (p, 0),
                Err(_) => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len() - self.at);
        buf[..n].copy_from_slice(&self.cur[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

struct Limited<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self
            .inner
            .read(buf)
            .map_err(|e| std::io::Error::other(format!("a packed list that does not unpack: {e}")))?;
        self.left = self
            .left
            .checked_sub(n as u64)
            .ok_or_else(|| std::io::Error::other("a packed list of more than its limit"))?;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: usize) -> Vec<u8> {
        let mut l = b"#ddftp-list 1\0".to_vec();
        for i in 0..entries {
            l.extend_from_slice(
                format!("f {} 644 1700000000.000000000 proj/d{:03}/f{i:06}\0", i % 2048, i / 100).as_bytes(),
            );
        }
        l
    }

    #[test]
    fn lists_round_trip_whole_or_in_pieces_and_shrink() {
        for n in [0, 1, 1000, 100_000] {
            let l = list(n);
            let whole = pack(&l);
            assert_eq!(unpack(&whole, l.len()).unwrap(), l);
            let mut p = Packer::new();
            let mut pieces = vec![];
            for chunk in l.chunks(7919) {
                p.write(chunk);
                pieces.extend(p.take());
            }
            pieces.extend(p.finish());
            assert_eq!(unpack(&pieces, l.len()).unwrap(), l);
            if n == 100_000 {
                assert!(whole.len() * 3 < l.len(), "{} packed to {}", l.len(), whole.len());
            }
        }
    }

    #[test]
    fn a_flushed_piece_unpacks_before_the_next_is_written() {
        let l = list(100);
        let mut p = Packer::new();
        p.write(&l[..1000]);
        let header = p.take();
        assert!(header.len() < 20, "a block of 64 KiB is not full yet: only the frame header");
        p.write(&l[1000..]);
        p.flush();
        let sent = [header, p.take()].concat();
        let (feed, mut r) = unpacker(l.len());
        let t = std::thread::spawn(move || {
            let mut got = vec![0; l.len()];
            r.read_exact(&mut got).map(|()| got == l)
        });
        // The frame never finished: without the flush, nothing to read.
        assert!(feed.piece(sent));
        drop(feed);
        assert!(t.join().unwrap().unwrap());
    }

    #[test]
    fn pieces_unpack_as_they_arrive_within_the_limit() {
        let l = list(20_000);
        let p = pack(&l);
        let read_all = |pieces: Vec<Vec<u8>>, limit| {
            let (feed, mut r) = unpacker(limit);
            let t = std::thread::spawn(move || {
                let mut out = vec![];
                r.read_to_end(&mut out).map(|_| out)
            });
            for piece in pieces {
                feed.piece(piece);
            }
            drop(feed);
            t.join().unwrap()
        };
        let pieces: Vec<Vec<u8>> = p.chunks(1000).map(<[u8]>::to_vec).collect();
        assert_eq!(read_all(pieces.clone(), l.len()).unwrap(), l);
        assert!(read_all(pieces.clone(), l.len() - 1).unwrap_err().to_string().contains("limit"));
        assert!(read_all(pieces[..pieces.len() / 2].to_vec(), l.len()).is_err(), "a list cut short");
    }

    #[test]
    fn too_large_truncated_and_garbage_are_refused() {
        let l = list(1000);
        let p = pack(&l);
        assert!(matches!(unpack(&p, l.len() - 1), Err(UnpackError::TooLong { .. })));
        assert!(unpack(&p[..p.len() / 2], l.len()).is_err());
        assert!(unpack(b"#ddftp-list 1\0", 1 << 20).is_err());
        // Megabytes of zeros pack to little: the limit, not the size of
        // what arrived, decides.
        let zeros = pack(&vec![0u8; 8 << 20]);
        assert!(zeros.len() < 64 << 10);
        assert!(unpack(&zeros, 1 << 20).is_err());
    }
}
