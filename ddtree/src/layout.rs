//! Entries' bytes back to back, as one range: a bundle. `ddftpd` reads a
//! bundle's range from the files and `ddftp archive` writes it into the
//! destination files, both through the same offset arithmetic here.

use std::io;
use std::ops::Range;

/// Where each entry's bytes sit in the range.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// End offset of each entry (so entry i is `ends[i-1]..ends[i]`).
    ends: Vec<u64>,
}

impl Layout {
    /// `None` if the sizes add up past `u64::MAX`.
    pub fn new(sizes: impl IntoIterator<Item = u64>) -> Option<Layout> {
        let mut end = 0u64;
        let ends = sizes
            .into_iter()
            .map(|s| {
                end = end.checked_add(s)?;
                Some(end)
            })
            .collect::<Option<Vec<u64>>>()?;
        Some(Layout { ends })
    }

    /// Bytes in the whole range.
    pub fn size(&self) -> u64 {
        self.ends.last().copied().unwrap_or(0)
    }

    /// Entries whole within the first `bytes` of the range.
    pub fn entries_within(&self, bytes: u64) -> usize {
        self.ends.partition_point(|&end| end <= bytes)
    }

    /// Bytes of entry `i`.
    pub fn len_of(&self, i: usize) -> u64 {
        self.ends[i] - self.start_of(i)
    }

    /// Where entry `i`'s bytes start.
    pub fn start_of(&self, i: usize) -> u64 {
        if i == 0 {
            0
        } else {
            self.ends[i - 1]
        }
    }

    /// Calls `f(entry, offset within it, range of the caller's buffer)` for
    /// each entry the `len` bytes from `offset` touch, in order (empty
    /// entries in between are skipped). Past the range's end is an error.
    pub fn each(
        &self,
        offset: u64,
        len: usize,
        mut f: impl FnMut(usize, u64, Range<usize>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut i = self.ends.partition_point(|&end| end <= offset);
        let (mut at, mut done) = (offset, 0);
        while done < len {
            let Some(&end) = self.ends.get(i) else {
                return Err(io::Error::other(format!("bytes {offset}..+{len} reach past the range's {}", self.size())));
            };
            let within = at - self.start_of(i);
            let n = ((end - at) as usize).min(len - done);
            if n > 0 {
                f(i, within, done..done + n)?;
            }
            done += n;
            at += n as u64;
            i += 1;
        }
        Ok(())
    }
}

/// For an entry moved as its data runs alone (a sparse file: see
/// [`crate::list::Meta`]): calls `f(offset in the file, range of the
/// caller's buffer)` for the `len` bytes from `within` of the runs put back
/// to back.
pub fn each_run(
    runs: &[(u64, u64)],
    within: u64,
    len: usize,
    mut f: impl FnMut(u64, Range<usize>) -> io::Result<()>,
) -> io::Result<()> {
    let (mut skipped, mut done) = (0u64, 0usize);
    for &(off, run) in runs {
        if done == len {
            break;
        }
        let at = within + done as u64;
        if at >= skipped + run {
            skipped += run;
            continue;
        }
        let inside = at - skipped;
        let n = ((run - inside) as usize).min(len - done);
        f(off + inside, done..done + n)?;
        done += n;
        skipped += run;
    }
    if done < len {
        return Err(io::Error::other("bytes past the end of the data runs"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_map_packed_bytes_to_file_offsets() {
        let runs = [(0, 4), (100, 3), (200, 5)];
        let mut v = vec![];
        each_run(&runs, 2, 8, |o, r| {
            v.push((o, r));
            Ok(())
        })
        .unwrap();
        assert_eq!(v, vec![(2, 0..2), (100, 2..5), (200, 5..8)]);
        assert!(each_run(&runs, 10, 3, |_, _| Ok(())).is_err());
    }

    fn spans(l: &Layout, offset: u64, len: usize) -> io::Result<Vec<(usize, u64, Range<usize>)>> {
        let mut v = vec![];
        l.each(offset, len, |i, w, r| {
            v.push((i, w, r));
            Ok(())
        })?;
        Ok(v)
    }

    #[test]
    fn spans_cross_entries_and_skip_empty_ones() {
        let l = Layout::new([3, 0, 5, 2]).unwrap();
        assert_eq!(l.size(), 10);
        assert_eq!(l.len_of(2), 5);
        assert_eq!(spans(&l, 0, 10).unwrap(), vec![(0, 0, 0..3), (2, 0, 3..8), (3, 0, 8..10)]);
        assert_eq!(spans(&l, 4, 5).unwrap(), vec![(2, 1, 0..4), (3, 0, 4..5)]);
        assert_eq!(spans(&l, 3, 0).unwrap(), vec![]);
        assert!(spans(&l, 8, 3).is_err());
        assert!(Layout::new([u64::MAX, 1]).is_none());
    }
}
