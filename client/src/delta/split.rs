//! Looking and placing on every core: a local file's window offsets (or
//! the chunks to place) are cut into contiguous parts, one per thread.
//! The threads share which chunks are taken, so a chunk is taken once and
//! every thread stops once all are.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Threads at most: past this the reads of one file, not the hashing,
/// decide.
const MOST_THREADS: usize = 4;

/// A part is never smaller than this: below it a thread costs more than
/// it saves. (The unit tests' files are small: cut them too.)
const SMALLEST_PART: u64 = if cfg!(test) { 16 << 10 } else { 32 << 20 };

/// The chunks of the new version taken so far, by any thread.
pub(super) struct Taken {
    flags: Vec<AtomicBool>,
    left: AtomicUsize,
}

impl Taken {
    pub(super) fn new(n: usize) -> Taken {
        Taken { flags: (0..n).map(|_| AtomicBool::new(false)).collect(), left: AtomicUsize::new(n) }
    }

    pub(super) fn is(&self, j: usize) -> bool {
        self.flags[j].load(Ordering::Relaxed)
    }

    /// Takes chunk `j`; false if another took it first.
    pub(super) fn take(&self, j: usize) -> bool {
        let won = !self.flags[j].swap(true, Ordering::AcqRel);
        if won {
            self.left.fetch_sub(1, Ordering::AcqRel);
        }
        won
    }

    /// Every chunk taken: the rest of the file has nothing to give.
    pub(super) fn all(&self) -> bool {
        self.left.load(Ordering::Acquire) == 0
    }
}

/// `0..len` cut into contiguous parts, each starting at a multiple of
/// `align` (data in place then starts a part on a chunk), one per core
/// up to [`MOST_THREADS`], none under [`SMALLEST_PART`].
pub(super) fn parts(len: u64, align: u64) -> Vec<(u64, u64)> {
    // Asked once: the answer reads the scheduler's and the cgroup's
    // limits, which costs more than a small file's look.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let cores = cores.min(MOST_THREADS) as u64;
    let n = (len / SMALLEST_PART).clamp(1, cores);
    let align = align.max(1);
    let mut out = Vec::with_capacity(n as usize);
    let mut from = 0;
    for k in 1..=n {
        let to = match k == n {
            true => len,
            false => (len * k / n) / align * align,
        };
        if to > from {
            out.push((from, to));
            from = to;
        }
    }
    out
}

/// `work` on each part, the first on this thread, the others on threads of
/// their own; the results in the parts' order, or the first error.
pub(super) fn each<T: Send>(
    parts: &[(u64, u64)],
    work: impl Fn(u64, u64) -> io::Result<T> + Sync,
) -> io::Result<Vec<T>> {
    let Some((&(a, b), rest)) = parts.split_first() else { return Ok(vec![]) };
    let work = &work;
    std::thread::scope(|s| {
        let others: Vec<_> = rest.iter().map(|&(x, y)| s.spawn(move || work(x, y))).collect();
        let mut out = vec![work(a, b)?];
        for h in others {
            out.push(joined(h)?);
        }
        Ok(out)
    })
}

/// What a part's thread gave (a thread that panicked is an error).
pub(super) fn joined<T>(h: std::thread::ScopedJoinHandle<'_, io::Result<T>>) -> io::Result<T> {
    h.join().map_err(|_| io::Error::other("a delta thread panicked"))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parts_cover_the_range_once_in_order(len in 0u64..(1 << 34), align in 1u64..(1 << 20)) {
            let p = parts(len, align);
            let mut at = 0;
            for &(a, b) in &p {
                prop_assert_eq!(a, at);
                prop_assert!(b > a);
                at = b;
            }
            prop_assert_eq!(at, len);
            for &(a, _) in p.iter().skip(1) {
                prop_assert_eq!(a % align, 0);
            }
        }
    }

    #[test]
    fn a_chunk_is_taken_once() {
        let t = Taken::new(3);
        assert!(t.take(1));
        assert!(!t.take(1));
        assert!(t.is(1) && !t.is(0));
        assert!(t.take(0) && t.take(2));
        assert!(t.all());
    }
}
