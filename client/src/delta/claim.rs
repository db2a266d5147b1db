//! Finding chunks before the manifest is known. The manifest's root is
//! BLAKE3 over the chunk hashes in order, so a client that finds a chunk
//! in its older copy can hash it itself: only the hashes of the chunks it
//! did not find need to travel, and the root then checks every chunk at
//! once (`Manifest::checked`). Without strong hashes to decide, a weak
//! match is taken only when the next chunk's weak checksum matches right
//! after it too (zsync's two in a row): a false match then needs two
//! collisions side by side. A claim that is still wrong makes the root
//! disagree, and the caller fetches the whole manifest and looks again.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use ddftp_proto::manifest::Hash;
use ddftp_proto::rolling::{weak as weak_of, Rolling};

use super::rolling::{Wanted, Window, LOOK_EVERY};
use super::split::{self, Taken};
use super::Found;
use crate::manifest::ChunkHash;

/// Chunks found by their weak checksums: where each lies in the local file
/// and its hash, computed here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub found: Found,
    pub hashes: Vec<Option<Hash>>,
    /// Per chunk: written into `into` as claimed.
    pub landed: Vec<bool>,
}

impl Claims {
    /// The runs of chunks not claimed, as (first, count).
    pub fn missing(&self) -> Vec<(u64, u32)> {
        let mut out: Vec<(u64, u32)> = vec![];
        for (j, h) in self.hashes.iter().enumerate() {
            if h.is_some() {
                continue;
            }
            match out.last_mut() {
                Some((a, c)) if *a + u64::from(*c) == j as u64 => *c += 1,
                _ => out.push((j as u64, 1)),
            }
        }
        out
    }
}

/// Where claimed chunks are written, as they are found.
#[derive(Debug, Clone, Copy)]
pub struct Into<'a> {
    pub file: &'a File,
    /// From the first chunk on; else from the first difference on (a
    /// local file that is the new version already then costs no write).
    pub from_start: bool,
}

/// Claims the chunks of a new version of `size` bytes in chunks of `chunk`
/// (`weak`: one weak checksum per chunk, the last chunk's too) that
/// `local` (`len` bytes) holds, hashing each with `kind`. With `into`, a
/// chunk claimed is also written there at its place in the new version,
/// the very bytes hashed (so a local file changing meanwhile cannot put
/// other bytes there than the hash says). A write that fails is the error.
pub fn claim(
    local: &File,
    len: u64,
    (chunk, size): (u32, u64),
    weak: &[u32],
    kind: ChunkHash,
    into: Option<Into>,
) -> io::Result<Claims> {
    let n = weak.len();
    let mut c = Claims { found: Found { at: vec![None; n] }, hashes: vec![None; n], landed: vec![false; n] };
    let l = chunk as usize;
    if chunk == 0 || n as u64 != ddftp_proto::manifest::chunk_count(size, chunk) || n == 0 {
        return Ok(c);
    }
    let full = if size.is_multiple_of(u64::from(chunk)) { n } else { n - 1 };
    if full > 0 && len >= l as u64 {
        scan(local, len, l, &weak[..full], (kind, into), &mut c)?;
    }
    if full < n {
        let t = (size - (n as u64 - 1) * u64::from(chunk)) as usize;
        tail(local, len, t, n - 1, l, weak[n - 1], kind, &mut c)?;
    }
    Ok(c)
}

/// The new version's last, shorter chunk: where it was, or at the local
/// file's end, by its weak checksum and its neighbour's claim.
#[allow(clippy::too_many_arguments)]
fn tail(
    local: &File,
    len: u64,
    tail: usize,
    j: usize,
    l: usize,
    w: u32,
    kind: ChunkHash,
    c: &mut Claims,
) -> io::Result<()> {
    let before = j.checked_sub(1).and_then(|k| c.found.at[k]).map(|a| a + l as u64);
    let mut b = vec![0u8; tail];
    for place in [before, Some((j * l) as u64), len.checked_sub(tail as u64)].into_iter().flatten() {
        if place + tail as u64 > len {
            continue;
        }
        local.read_exact_at(&mut b, place)?;
        // The last chunk has no next one to confirm it: the chunk before
        // it, claimed right before this place, does (or a file of one chunk).
        let confirmed = j == 0 || before == Some(place);
        if confirmed && weak_of(&b) == w {
            c.found.at[j] = Some(place);
            c.hashes[j] = Some(kind.of(&b));
            return Ok(());
        }
    }
    Ok(())
}

/// The full chunks (`weak`), at any offset, the window's offsets cut into
/// parts scanned on every core.
fn scan(
    local: &File,
    len: u64,
    l: usize,
    weak: &[u32],
    (kind, into): (ChunkHash, Option<Into>),
    c: &mut Claims,
) -> io::Result<()> {
    let wanted = Wanted::new(weak);
    let taken = Taken::new(weak.len());
    let from_start = into.is_some_and(|i| i.from_start);
    let into = into.map(|i| i.file);
    let writing = std::sync::Mutex::new(());
    let look = Look { local, len, l, weak, kind, into, from_start, wanted: &wanted, taken: &taken, writing };
    let parts = split::parts(len - l as u64 + 1, l as u64);
    // Checking weak matches (a chunk's checksum read, a candidate looked
    // at) is capped at about twice the file's bytes: weak checksums from a
    // lying mirror, made to match everywhere, cost time, not much, and
    // the chunks not claimed then are asked for.
    let budget = (2 * len + 64 * l as u64) / parts.len() as u64;
    for (j, o, h, landed) in split::each(&parts, |from, to| look.part(from, to, budget))?.into_iter().flatten() {
        c.found.at[j] = Some(o);
        c.hashes[j] = Some(h);
        c.landed[j] = landed;
    }
    Ok(())
}

/// What every part's scan looks with.
struct Look<'a> {
    local: &'a File,
    len: u64,
    l: usize,
    weak: &'a [u32],
    kind: ChunkHash,
    into: Option<&'a File>,
    from_start: bool,
    wanted: &'a Wanted,
    taken: &'a Taken,
    /// One write into `into` at a time: the kernel serializes writes to
    /// one file anyway (its inode lock), and a thread waiting for that
    /// spins while the other copies (for long, when the host has
    /// descheduled the other's CPU); waiting for this sleeps.
    writing: std::sync::Mutex<()>,
}

/// Chunks landing side by side in the local file and in the new version:
/// written with one call when the run ends (not one per chunk).
#[derive(Debug, Default)]
struct Run {
    first: usize,
    at: u64,
    count: usize,
}

impl Look<'_> {
    /// Chunk `j` found at `o`: its hash, and whether it lands (once
    /// `landing`; added to `run`, written when the run ends).
    fn land(&self, win: &Window, run: &mut Run, (j, o): (usize, u64), landing: bool) -> io::Result<Claimed> {
        let l = self.l;
        let h = self.kind.of(win.bytes(o, l));
        if !landing || self.into.is_none() {
            return Ok((j, o, h, false));
        }
        if run.count > 0 && (run.first + run.count != j || run.at + (run.count * l) as u64 != o) {
            self.flush(win, run)?;
        }
        if run.count == 0 {
            (run.first, run.at) = (j, o);
        }
        run.count += 1;
        Ok((j, o, h, true))
    }

    /// Writes the run (its bytes still in the window).
    fn flush(&self, win: &Window, run: &mut Run) -> io::Result<()> {
        if let Some(f) = self.into.filter(|_| run.count > 0) {
            let _one = self.writing.lock().unwrap_or_else(|e| e.into_inner());
            f.write_all_at(win.bytes(run.at, run.count * self.l), (run.first * self.l) as u64)?;
        }
        run.count = 0;
        Ok(())
    }

    /// Makes `n` bytes at `o` readable in the window, writing the run
    /// first if they would move the window past it.
    fn fill(&self, win: &mut Window, run: &mut Run, o: u64, n: usize) -> io::Result<()> {
        if !win.holds(o, n) {
            self.flush(win, run)?;
        }
        win.fill(o, n)
    }

    /// The chunks claimed by windows starting in `from..to`: (chunk,
    /// offset, hash, landed).
    fn part(&self, from: u64, to: u64, budget: u64) -> io::Result<Vec<Claimed>> {
        let mut run = Run::default();
        let mut win = Window::new(self.local, self.len, self.l);
        let out = self.scan(&mut win, &mut run, (from, to), budget)?;
        self.flush(&win, &mut run)?;
        Ok(out)
    }

    fn scan(
        &self,
        win: &mut Window,
        run: &mut Run,
        (from, to): (u64, u64),
        mut budget: u64,
    ) -> io::Result<Vec<Claimed>> {
        let (len, l, weak) = (self.len, self.l, self.weak);
        let mut out = vec![];
        // Unless from the start, chunks are written from the first
        // difference on: a chunk not at its place in the new version, or a
        // byte slid over.
        let mut landing = self.from_start;
        let mut o = from;
        win.fill(o, l)?;
        let mut r = Rolling::new(win.bytes(o, l));
        loop {
            let mut taken = None;
            for &j in self.wanted.get(r.sum()) {
                let j = j as usize;
                if self.taken.is(j) {
                    continue;
                }
                budget = match budget.checked_sub(l as u64) {
                    Some(b) => b,
                    None => return Ok(out),
                };
                if !win.holds(o, 2 * l) {
                    self.flush(win, run)?;
                }
                if !confirmed(win, o, l, j, weak)? || !self.taken.take(j) {
                    continue;
                }
                landing |= o != (j * l) as u64;
                out.push(self.land(win, run, (j, o), landing)?);
                taken = Some(j);
            }
            if let Some(mut j) = taken {
                // The chunks that follow in order, each confirmed by the one
                // before it.
                loop {
                    o += l as u64;
                    if o + l as u64 > len || o >= to || self.taken.all() {
                        return Ok(out);
                    }
                    self.fill(win, run, o, l)?;
                    let next = j + 1;
                    if next >= weak.len() || self.taken.is(next) || weak_of(win.bytes(o, l)) != weak[next] {
                        break;
                    }
                    if !self.taken.take(next) {
                        break;
                    }
                    landing |= o != (next * l) as u64;
                    out.push(self.land(win, run, (next, o), landing)?);
                    j = next;
                }
                // Sliding moves the window on: what landed is written first.
                self.flush(win, run)?;
                r = Rolling::new(win.bytes(o, l));
                continue;
            }
            if o + 1 >= to || (o.is_multiple_of(LOOK_EVERY) && self.taken.all()) || !win.slide(&mut r, &mut o, l)? {
                return Ok(out);
            }
            landing = true;
        }
    }
}

/// A chunk claimed: (chunk, offset in the local file, hash, landed).
type Claimed = (usize, u64, Hash, bool);

/// Whether the window at `o`, weakly chunk `j`, has chunk `j + 1` right
/// after it (or, for the last full chunk, `j - 1` right before it).
fn confirmed(win: &mut Window, o: u64, l: usize, j: usize, weak: &[u32]) -> io::Result<bool> {
    let lu = l as u64;
    if j + 1 < weak.len() {
        if o + 2 * lu > win.len() {
            return Ok(false);
        }
        win.fill(o, 2 * l)?;
        return Ok(weak_of(win.bytes(o + lu, l)) == weak[j + 1]);
    }
    if j == 0 {
        return Ok(true);
    }
    if o < lu {
        return Ok(false);
    }
    // The window reads forward only: read the one before on its own.
    let mut b = vec![0u8; l];
    std::os::unix::fs::FileExt::read_exact_at(win.file(), &mut b, o - lu)?;
    Ok(weak_of(&b) == weak[j - 1])
}

#[cfg(test)]
mod tests;
