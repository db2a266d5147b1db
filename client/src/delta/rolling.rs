//! Finding chunks that moved by any number of bytes: a window of one chunk
//! slides over the older copy with rsync's rolling checksum; the strong
//! hash decides on a weak match.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use ddftp_proto::rolling::Rolling;

use crate::manifest::Manifest;

/// Bits of the filter in front of the weak checksums' map: a window whose
/// checksum is not there costs a bit test, not a map lookup.
const FILTER_BITS: u32 = 20;

/// Bytes read at a time.
const READ: usize = 4 << 20;

fn slot(sum: u32) -> usize {
    (sum.wrapping_mul(0x9E37_79B1) >> (32 - FILTER_BITS)) as usize
}

/// Finds the first `weak.len()` (full) chunks of the new version in `local`
/// (`len` bytes) at any offset, into `at`. The strong hashes spent on weak
/// matches that fail are capped (about twice the file's bytes): weak
/// checksums from a mirror, made to match everywhere, cost time, never a
/// wrong chunk, and then not much time.
pub(super) fn find(local: &File, len: u64, m: &Manifest, weak: &[u32], at: &mut [Option<u64>]) -> io::Result<()> {
    let l = m.chunk_size as usize;
    if weak.is_empty() || len < l as u64 {
        return Ok(());
    }
    let mut filter = vec![0u64; 1 << (FILTER_BITS - 6)];
    let mut wanted: HashMap<u32, Vec<u32>> = HashMap::with_capacity(weak.len());
    for (j, &w) in weak.iter().enumerate() {
        filter[slot(w) >> 6] |= 1 << (slot(w) & 63);
        wanted.entry(w).or_default().push(j as u32);
    }
    let mut budget = 2 * len + 64 * l as u64;
    // Once every chunk is found, the rest of the file has nothing to give.
    let mut left = weak.len();
    let mut win = Window::new(local, len, l);
    let mut o = 0u64;
    win.fill(o, l)?;
    let mut r = Rolling::new(win.bytes(o, l));
    loop {
        let s = r.sum();
        let mut matched = None;
        if filter[slot(s) >> 6] & (1 << (slot(s) & 63)) != 0 {
            if let Some(js) = wanted.get(&s).filter(|js| js.iter().any(|&j| at[j as usize].is_none())) {
                if budget < l as u64 {
                    return Ok(());
                }
                budget -= l as u64;
                matched = take(js, m.kind.of(win.bytes(o, l)), m, o, at, &mut left);
            }
        }
        if let Some(mut j) = matched {
            // What matched is taken: the next chunk starts after it, and is
            // most often the next chunk of the new version (data in
            // order): tried first, on its strong hash alone.
            loop {
                o += l as u64;
                if o + l as u64 > len || left == 0 {
                    return Ok(());
                }
                win.fill(o, l)?;
                let next = j as usize + 1;
                if next >= weak.len() || at[next].is_some() || budget < l as u64 {
                    break;
                }
                budget -= l as u64;
                match take(&wanted[&weak[next]], m.kind.of(win.bytes(o, l)), m, o, at, &mut left) {
                    Some(k) => j = k,
                    None => break,
                }
            }
            r = Rolling::new(win.bytes(o, l));
            continue;
        }
        if !win.slide(&mut r, &mut o, l)? {
            return Ok(());
        }
    }
}

/// Takes the window at `o` (strong hash `h`) for every chunk of `js` not
/// found yet whose hash it is; the last one taken, if any.
fn take(
    js: &[u32],
    h: ddftp_proto::manifest::Hash,
    m: &Manifest,
    o: u64,
    at: &mut [Option<u64>],
    left: &mut usize,
) -> Option<u32> {
    let mut last = None;
    for &j in js {
        if at[j as usize].is_none() && m.hashes[j as usize] == h {
            at[j as usize] = Some(o);
            last = Some(j);
            *left -= 1;
        }
    }
    last
}

/// The part of the file the window slides over, read a few MiB at a time.
pub(super) struct Window<'a> {
    file: &'a File,
    len: u64,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    start: u64,
}

impl<'a> Window<'a> {
    /// A window of up to `l`-byte chunks over `file` (`len` bytes).
    pub(super) fn new(file: &'a File, len: u64, l: usize) -> Window<'a> {
        Window { file, len, buf: Vec::with_capacity(READ + 2 * l), start: 0 }
    }

    pub(super) fn len(&self) -> u64 {
        self.len
    }

    pub(super) fn file(&self) -> &'a File {
        self.file
    }

    /// Makes `n` bytes from `o` (all within the file) readable.
    pub(super) fn fill(&mut self, o: u64, n: usize) -> io::Result<()> {
        if o + n as u64 <= self.start + self.buf.len() as u64 {
            return Ok(());
        }
        // Keep from `o` on, read on to a few MiB past it.
        let keep = (o - self.start) as usize;
        self.buf.drain(..keep.min(self.buf.len()));
        self.start = o;
        let have = self.buf.len();
        let want = (n.max(READ) as u64).min(self.len - o) as usize;
        if want > have {
            self.buf.resize(want, 0);
            self.file.read_exact_at(&mut self.buf[have..], o + have as u64)?;
        }
        Ok(())
    }

    /// Slides the window of `l` bytes at `o` (its sum `r`) on by a byte;
    /// false at the file's end.
    pub(super) fn slide(&mut self, r: &mut Rolling, o: &mut u64, l: usize) -> io::Result<bool> {
        if *o + l as u64 >= self.len {
            return Ok(false);
        }
        self.fill(*o, l + 1)?;
        let b = self.bytes(*o, l + 1);
        r.roll(b[0], b[l]);
        *o += 1;
        Ok(true)
    }

    pub(super) fn bytes(&self, o: u64, n: usize) -> &[u8] {
        let i = (o - self.start) as usize;
        &self.buf[i..i + n]
    }
}
