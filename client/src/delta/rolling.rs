//! Finding chunks that moved by any number of bytes: a window of one chunk
//! slides over the older copy with rsync's rolling checksum; the strong
//! hash decides on a weak match.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

use ddftp_proto::rolling::Rolling;

use super::split::{self, Taken};
use crate::manifest::Manifest;

/// Bits of the filter in front of the weak checksums' map: a window whose
/// checksum is not there costs a bit test, not a map lookup.
const FILTER_BITS: u32 = 20;

/// Bytes read at a time.
const READ: usize = 4 << 20;

fn slot(sum: u32) -> usize {
    (sum.wrapping_mul(0x9E37_79B1) >> (32 - FILTER_BITS)) as usize
}

/// The new version's chunks by weak checksum, a bit filter in front: a
/// window whose checksum is no chunk's costs a bit test, not a map lookup.
pub(super) struct Wanted {
    filter: Vec<u64>,
    map: HashMap<u32, Vec<u32>>,
}

impl Wanted {
    pub(super) fn new(weak: &[u32]) -> Wanted {
        let mut filter = vec![0u64; 1 << (FILTER_BITS - 6)];
        let mut map: HashMap<u32, Vec<u32>> = HashMap::with_capacity(weak.len());
        for (j, &w) in weak.iter().enumerate() {
            filter[slot(w) >> 6] |= 1 << (slot(w) & 63);
            map.entry(w).or_default().push(j as u32);
        }
        Wanted { filter, map }
    }

    /// The chunks whose weak checksum is `sum`.
    pub(super) fn get(&self, sum: u32) -> &[u32] {
        if self.filter[slot(sum) >> 6] & (1 << (slot(sum) & 63)) == 0 {
            return &[];
        }
        self.map.get(&sum).map_or(&[], |v| v)
    }
}

/// Bytes slid over between looks at whether another part's thread has
/// found every chunk (then the rest of this part has nothing to give).
pub(super) const LOOK_EVERY: u64 = 1 << 16;

/// Finds the first `weak.len()` (full) chunks of the new version in `local`
/// (`len` bytes) at any offset, into `at`, the window's offsets cut into
/// parts scanned on every core ([`split`]). The strong hashes spent on weak
/// matches that fail are capped (about twice the file's bytes): weak
/// checksums from a mirror, made to match everywhere, cost time, never a
/// wrong chunk, and then not much time.
pub(super) fn find(local: &File, len: u64, m: &Manifest, weak: &[u32], at: &mut [Option<u64>]) -> io::Result<()> {
    let l = m.chunk_size as usize;
    if weak.is_empty() || len < l as u64 {
        return Ok(());
    }
    let wanted = Wanted::new(weak);
    let look = Look { local, len, m, weak, wanted: &wanted, taken: &Taken::new(weak.len()) };
    let parts = split::parts(len - l as u64 + 1, l as u64);
    let budget = (2 * len + 64 * l as u64) / parts.len() as u64;
    for (j, o) in split::each(&parts, |from, to| look.part(from, to, budget))?.into_iter().flatten() {
        at[j] = Some(o);
    }
    Ok(())
}

/// What every part's scan looks with.
struct Look<'a> {
    local: &'a File,
    len: u64,
    m: &'a Manifest,
    weak: &'a [u32],
    wanted: &'a Wanted,
    taken: &'a Taken,
}

impl Look<'_> {
    /// The chunks found by windows starting in `from..to`: (chunk, offset).
    fn part(&self, from: u64, to: u64, mut budget: u64) -> io::Result<Vec<(usize, u64)>> {
        let (m, weak, l, len) = (self.m, self.weak, self.m.chunk_size as usize, self.len);
        let mut out = vec![];
        let mut win = Window::new(self.local, len, l);
        let mut o = from;
        win.fill(o, l)?;
        let mut r = Rolling::new(win.bytes(o, l));
        loop {
            let s = r.sum();
            let mut matched = None;
            let js = self.wanted.get(s);
            if js.iter().any(|&j| !self.taken.is(j as usize)) {
                if budget < l as u64 {
                    return Ok(out);
                }
                budget -= l as u64;
                matched = self.take(js, m.kind.of(win.bytes(o, l)), o, &mut out);
            }
            if let Some(mut j) = matched {
                // What matched is taken: the next chunk starts after it, and is
                // most often the next chunk of the new version (data in
                // order): tried first, on its strong hash alone.
                loop {
                    o += l as u64;
                    if o + l as u64 > len || o >= to || self.taken.all() {
                        return Ok(out);
                    }
                    win.fill(o, l)?;
                    let next = j as usize + 1;
                    if next >= weak.len() || self.taken.is(next) || budget < l as u64 {
                        break;
                    }
                    budget -= l as u64;
                    match self.take(self.wanted.get(weak[next]), m.kind.of(win.bytes(o, l)), o, &mut out) {
                        Some(k) => j = k,
                        None => break,
                    }
                }
                r = Rolling::new(win.bytes(o, l));
                continue;
            }
            if o + 1 >= to || (o.is_multiple_of(LOOK_EVERY) && self.taken.all()) || !win.slide(&mut r, &mut o, l)? {
                return Ok(out);
            }
        }
    }

    /// Takes the window at `o` (strong hash `h`) for every chunk of `js` not
    /// taken yet whose hash it is; the last one taken, if any.
    fn take(&self, js: &[u32], h: ddftp_proto::manifest::Hash, o: u64, out: &mut Vec<(usize, u64)>) -> Option<u32> {
        let mut last = None;
        for &j in js {
            if !self.taken.is(j as usize) && self.m.hashes[j as usize] == h && self.taken.take(j as usize) {
                out.push((j as usize, o));
                last = Some(j);
            }
        }
        last
    }
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

    /// Whether `n` bytes from `o` are readable without moving the window.
    pub(super) fn holds(&self, o: u64, n: usize) -> bool {
        o >= self.start && o + n as u64 <= self.start + self.buf.len() as u64
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
        let want = (n.max(READ) as u64).min(self.len - o) as usize;
        while self.buf.len() < want {
            let have = self.buf.len();
            self.buf.reserve(want - have);
            let spare = &mut self.buf.spare_capacity_mut()[..want - have];
            // SAFETY: pread(2) writes at most `spare.len()` bytes into memory
            // `buf` owns (never zeroed first: a memset of every byte read
            // saved); the length grows by what it wrote, nothing more.
            let got = unsafe {
                libc::pread(self.file.as_raw_fd(), spare.as_mut_ptr().cast(), spare.len(), (o + have as u64) as i64)
            };
            match got {
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                g if g < 0 => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
                // SAFETY: the first `g` spare bytes were just written.
                g => unsafe { self.buf.set_len(have + g as usize) },
            }
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
