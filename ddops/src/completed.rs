//! Which blocks of a range have arrived: the complete prefix (what the
//! running SHA-256 may read), the completed ranges (what the resume journal
//! records) and the missing ones (what a resumed transfer fetches).

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

    /// Unmarks blocks `lo..=hi` (they turned out wrong: a piece spanning
    /// them failed verification); the prefix shrinks to `lo` if it held them.
    pub fn unmark(&mut self, lo: u64, hi: u64) {
        for b in lo..=hi.min(self.blocks.saturating_sub(1)) {
            self.bits[(b / 64) as usize] &= !(1 << (b % 64));
        }
        self.prefix = self.prefix.min(lo);
    }

    /// Whether every block of `lo..=hi` has arrived.
    pub fn holds(&self, lo: u64, hi: u64) -> bool {
        (lo..=hi.min(self.blocks.saturating_sub(1))).all(|b| self.bits[(b / 64) as usize] & (1 << (b % 64)) != 0)
    }

    /// Blocks in the range.
    pub fn len(&self) -> u64 {
        self.blocks
    }

    pub fn is_empty(&self) -> bool {
        self.blocks == 0
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
        c.unmark(5, 25);
        assert_eq!(c.prefix(), 5);
        assert_eq!(c.ranges(), vec![(0, 4), (26, 29), (64, 130), (299, 299)]);
        assert!(c.holds(26, 29) && !c.holds(25, 26));
        c.mark(5, 25);
        assert_eq!(c.prefix(), 30);
        let empty = Completed::new(5);
        assert_eq!(empty.missing(), vec![0..5]);
        let mut full = Completed::new(5);
        full.mark(0, 4);
        assert_eq!(full.ranges(), vec![(0, 4)]);
        assert!(full.missing().is_empty());
    }
}
