//! Delta: the chunks of a new version that a local file (the old output)
//! already holds, found with the mirror's chunk manifest, so that only the
//! rest moves.
//!
//! The local file is read once. With the mirror's weak checksums, a window
//! of one chunk slides over it a byte at a time (rsync's rolling checksum,
//! [`rolling`]): where the window's weak checksum is one of the new
//! version's, its strong hash decides, and a match moves the window on by a
//! whole chunk; so chunks are found wherever they moved, by any number of
//! bytes. Without them, the file is hashed a chunk at a time at every whole
//! chunk offset: chunks at their own place or moved by whole chunks (an
//! insertion or removal of whole chunks, pieces reordered). What is found is then
//! copied into the part file beside the old output, each chunk hashed again
//! as it is copied: a local file that changes meanwhile (a lying seed) costs
//! that chunk a download, never a wrong byte. The old output is only read;
//! the finished part file replaces it.

pub mod claim;
pub mod pieces;
mod rolling;
mod split;

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use ddftp_proto::manifest::{Hash, MAX_CHUNK};

use crate::manifest::Manifest;
use crate::store::Store;

/// Where each chunk of the new version lies in the local file, if it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Per chunk of the new version: its offset in the local file.
    pub at: Vec<Option<u64>>,
}

impl Found {
    /// Chunks found.
    pub fn count(&self) -> u64 {
        self.at.iter().filter(|a| a.is_some()).count() as u64
    }

    /// Whether every chunk (of `chunk` bytes) was found at its own offset.
    pub fn all_in_place(&self, chunk: u32) -> bool {
        self.at.iter().enumerate().all(|(j, a)| *a == Some(j as u64 * u64::from(chunk)))
    }
}

/// Chunk length of chunk `j` of a file of `size` bytes.
pub fn chunk_len(size: u64, chunk: u64, j: u64) -> usize {
    (size - j * chunk).min(chunk) as usize
}

/// Whether a manifest can be matched at all (a Metalink's pieces larger
/// than a block are checked whole, not block by block).
pub fn usable(m: &Manifest, size: u64) -> bool {
    m.chunk_size > 0
        && m.chunk_size <= MAX_CHUNK
        && m.hashes.len() as u64 == ddftp_proto::manifest::chunk_count(size, m.chunk_size)
}

/// Reads the local file (`len` bytes) once and finds the chunks of the new
/// version (`size` bytes, `m` its manifest) it holds: at any offset with
/// `weak` (the mirror's weak checksums, one per chunk), else at whole-chunk
/// offsets. The new version's last, shorter chunk is looked for where it
/// was and at the local file's end.
pub fn find(local: &File, len: u64, m: &Manifest, size: u64, weak: Option<&[u32]>) -> io::Result<Found> {
    let chunk = u64::from(m.chunk_size);
    let n = m.hashes.len() as u64;
    let mut at = vec![None; n as usize];
    if !usable(m, size) || n == 0 {
        return Ok(Found { at });
    }
    let full = if size.is_multiple_of(chunk) { n } else { n - 1 };
    match weak.filter(|w| w.len() as u64 == n) {
        Some(w) => rolling::find(local, len, m, &w[..full as usize], &mut at)?,
        None => aligned(local, len, m, full, &mut at)?,
    }
    if full < n {
        let j = n - 1;
        let tail = chunk_len(size, chunk, j) as u64;
        let mut b = vec![0u8; tail as usize];
        for place in [j * chunk, len.wrapping_sub(tail)] {
            if at[j as usize].is_none() && len >= tail && place <= len - tail {
                FileExt::read_exact_at(local, &mut b, place)?;
                if m.kind.of(&b) == m.hashes[j as usize] {
                    at[j as usize] = Some(place);
                }
            }
        }
    }
    Ok(Found { at })
}

/// The first `full` chunks of the new version found at whole-chunk offsets.
fn aligned(local: &File, len: u64, m: &Manifest, full: u64, at: &mut [Option<u64>]) -> io::Result<()> {
    let chunk = u64::from(m.chunk_size);
    // Full chunks by hash (several chunks may share one: runs of zeros).
    let mut wanted: HashMap<Hash, Vec<u32>> = HashMap::with_capacity(full as usize);
    for j in 0..full {
        wanted.entry(m.hashes[j as usize]).or_default().push(j as u32);
    }
    let per_read = (4 << 20) / chunk.max(1);
    let mut buf = vec![0u8; (chunk * per_read.max(1)) as usize];
    let mut off = 0u64;
    while off + chunk <= len {
        let want = ((len - off) / chunk).min(per_read.max(1)) * chunk;
        let b = &mut buf[..want as usize];
        FileExt::read_exact_at(local, b, off)?;
        for (k, piece) in b.chunks_exact(chunk as usize).enumerate() {
            if let Some(js) = wanted.get(&m.kind.of(piece)) {
                for &j in js {
                    at[j as usize].get_or_insert(off + k as u64 * chunk);
                }
            }
        }
        off += want;
    }
    Ok(())
}

/// Bytes copied (and read back) at once: a run of chunks that lie in the
/// same order in the local file, up to this.
const RUN: u64 = 4 << 20;

/// Copies the found chunks from the local file into `store` at their place
/// in the new version and marks them in `placed` (those already marked,
/// from another file, are left alone; `then` sees each mark in the first
/// part, a prefix of `placed`). Each chunk is checked against its hash as
/// it landed: into a part file, a run of chunks is copied by the kernel
/// (`copy_file_range`: shared extents where the file system has them, no
/// copy through this process otherwise) and read back; elsewhere it is
/// read, checked, then written. A local file that changes meanwhile costs
/// the chunks it changed a download, never a wrong byte. A local read that
/// fails leaves the chunk to be fetched; a write that fails is the
/// output's error. The chunks are cut into parts placed on every core.
pub fn place(
    local: &File,
    found: &Found,
    m: &Manifest,
    size: u64,
    store: &dyn Store,
    placed: &mut [bool],
    then: impl FnMut(&[bool]),
) -> io::Result<()> {
    let chunk = u64::from(m.chunk_size);
    let n = placed.len().min(found.at.len());
    let mut slices = vec![];
    let mut rest = &mut placed[..n];
    for (a, b) in split::parts(n as u64 * chunk, chunk) {
        let (part, r) = std::mem::take(&mut rest).split_at_mut(((b - a) / chunk) as usize);
        slices.push(((a / chunk) as usize, part));
        rest = r;
    }
    let into = Into { local, found, m, size, store };
    let mut slices = slices.into_iter();
    let Some((_, first)) = slices.next() else { return Ok(()) };
    std::thread::scope(|s| {
        let into = &into;
        let others: Vec<_> = slices.map(|(base, part)| s.spawn(move || into.part(base, part, |_| ()))).collect();
        into.part(0, first, then)?;
        for h in others {
            split::joined(h)?;
        }
        Ok(())
    })
}

/// Where found chunks go, and how they are checked.
struct Into<'a> {
    local: &'a File,
    found: &'a Found,
    m: &'a Manifest,
    size: u64,
    store: &'a dyn Store,
}

impl Into<'_> {
    /// Places the chunks from `base` on, `placed` being theirs.
    fn part(&self, base: usize, placed: &mut [bool], mut then: impl FnMut(&[bool])) -> io::Result<()> {
        let (local, m, size, store) = (self.local, self.m, self.size, self.store);
        let at = &self.found.at[base..base + placed.len()];
        let chunk = u64::from(m.chunk_size);
        let per_run = (RUN / chunk).max(1) as usize;
        // Made when a chunk is to be placed (most often none is: the output's
        // chunks landed as they were found).
        let mut buf = vec![];
        let room = (chunk * per_run as u64).min(size.div_ceil(chunk) * chunk) as usize;
        let mut kernel = store.as_file();
        let n = placed.len();
        let mut j = 0;
        while j < n {
            let from = match at[j] {
                Some(f) if !placed[j] => f,
                _ => {
                    j += 1;
                    continue;
                }
            };
            let mut k = j + 1;
            while k < n && k - j < per_run && !placed[k] && at[k] == Some(from + (k - j) as u64 * chunk) {
                k += 1;
            }
            buf.resize(room, 0);
            let to = (base + j) as u64 * chunk;
            let len = ((base + k) as u64 * chunk).min(size) - to;
            if let Some(dst) = kernel {
                if copy_range(local, from, dst, to, len).is_ok() {
                    let b = &mut buf[..len as usize];
                    FileExt::read_exact_at(dst, b, to)?;
                    for (i, c) in b.chunks(chunk as usize).enumerate() {
                        if m.kind.of(c) == m.hashes[base + j + i] {
                            placed[j + i] = true;
                            then(placed);
                        }
                    }
                    j = k;
                    continue;
                }
                // Not between these files: read and write from now on.
                kernel = None;
            }
            for i in j..k {
                let b = &mut buf[..chunk_len(size, chunk, (base + i) as u64)];
                let at = from + (i - j) as u64 * chunk;
                if FileExt::read_exact_at(local, b, at).is_err() || m.kind.of(b) != m.hashes[base + i] {
                    continue;
                }
                store.write_all_at(b, (base + i) as u64 * chunk)?;
                placed[i] = true;
                then(placed);
            }
            j = k;
        }
        Ok(())
    }
}

/// `len` bytes of `src` from `from` copied by the kernel into `dst` at `to`.
fn copy_range(src: &File, from: u64, dst: &File, to: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (mut off_in, mut off_out) = (from as libc::loff_t, to as libc::loff_t);
    let mut left = len as usize;
    while left > 0 {
        // SAFETY: both descriptors are open files borrowed for the call;
        // the offsets are this function's own.
        let n = unsafe { libc::copy_file_range(src.as_raw_fd(), &mut off_in, dst.as_raw_fd(), &mut off_out, left, 0) };
        match n {
            n if n > 0 => left -= n as usize,
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            _ => return Err(io::Error::last_os_error()),
        }
    }
    Ok(())
}

/// The blocks of `block_size` bytes whose every chunk was placed, as
/// inclusive ranges.
pub fn whole_blocks(placed: &[bool], chunk: u32, block_size: u32) -> Vec<(u64, u64)> {
    let per = (block_size / chunk.max(1)).max(1) as usize;
    let mut out: Vec<(u64, u64)> = vec![];
    for (b, chunks) in placed.chunks(per).enumerate() {
        if !chunks.iter().all(|&p| p) {
            continue;
        }
        let b = b as u64;
        match out.last_mut() {
            Some((_, hi)) if *hi + 1 == b => *hi = b,
            _ => out.push((b, b)),
        }
    }
    out
}

#[cfg(test)]
mod tests;
