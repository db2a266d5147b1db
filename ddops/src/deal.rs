//! One range dealt in parts to movers that ask as they finish (an
//! archive's MPI ranks, each moving its parts with its own pairs of
//! mirrors).
//!
//! The parts are cut from the range's two ends (even movers take from the
//! front, odd ones from the back, so a mover's parts stay contiguous and
//! the last parts meet in the middle) and shrink as the range empties:
//! each is the asking mover's share of half of what is left, its share
//! being its measured rate over the movers' summed rates. A slow mover thus
//! asks rarely and gets little; the last parts are small, so every mover
//! finishes within about one small part of the others, without a running
//! part ever being cut short (which would need a channel into a mover's
//! running transfer).

use std::ops::Range;

/// Which end of what is left a mover takes its parts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Front,
    Back,
}

/// Deals `0..size` to `movers` in parts (see the module's docs).
#[derive(Debug, Clone)]
pub struct Dealer {
    /// What is not dealt yet: `front..back`.
    front: u64,
    back: u64,
    /// Cuts fall on multiples of this (a block), unless moved by `snap`.
    align: u64,
    /// No part is smaller, but the last.
    min: u64,
    /// Each mover's bytes a second over its last part (none before its first).
    rates: Vec<Option<f64>>,
}

impl Dealer {
    /// A dealer of `0..size` to `movers` movers, cutting on multiples of
    /// `align`, no part under `min` bytes but the last.
    pub fn new(size: u64, movers: usize, align: u64, min: u64) -> Dealer {
        let align = align.max(1);
        Dealer { front: 0, back: size, align, min: min.max(align), rates: vec![None; movers.max(1)] }
    }

    /// The end mover `m` takes its parts from.
    pub fn end(m: usize) -> End {
        if m.is_multiple_of(2) {
            End::Front
        } else {
            End::Back
        }
    }

    /// Bytes not dealt yet.
    pub fn remaining(&self) -> u64 {
        self.back - self.front
    }

    /// Mover `m` moved a part of `bytes` in `secs`: its rate for its next parts.
    pub fn handle_done(&mut self, m: usize, bytes: u64, secs: f64) {
        if let Some(r) = self.rates.get_mut(m) {
            if bytes > 0 && secs > 0.0 && secs.is_finite() {
                *r = Some(bytes as f64 / secs);
            }
        }
    }

    /// Mover `m`'s share of the movers' summed rate (equal shares until
    /// rates are known; a mover not measured yet counts as the mean).
    fn share(&self, m: usize) -> f64 {
        let known: Vec<f64> = self.rates.iter().flatten().copied().collect();
        if known.is_empty() {
            return 1.0 / self.rates.len() as f64;
        }
        let mean = known.iter().sum::<f64>() / known.len() as f64;
        let rate = |r: &Option<f64>| r.unwrap_or(mean);
        let sum: f64 = self.rates.iter().map(rate).sum();
        match sum > 0.0 {
            true => self.rates.get(m).map_or(mean, rate) / sum,
            false => 1.0 / self.rates.len() as f64,
        }
    }

    /// The next part for mover `m`, none once all is dealt. `snap(x)` is
    /// where a cut wanted at `x` may fall (at or before `x`: not inside an
    /// entry that must not be split).
    pub fn poll_part(&mut self, m: usize, snap: impl Fn(u64) -> u64) -> Option<Range<u64>> {
        let left = self.remaining();
        if left == 0 {
            return None;
        }
        let want = (left as f64 * self.share(m) / 2.0) as u64;
        let want = want.div_ceil(self.align).saturating_mul(self.align).max(self.min);
        if want.saturating_add(self.min) >= left {
            // What would remain is less than a part: all of it.
            let part = self.front..self.back;
            self.front = self.back;
            return Some(part);
        }
        let part = match Dealer::end(m) {
            End::Front => {
                let cut = snap(self.front + want).min(self.front + want);
                let cut = if cut > self.front { cut } else { self.back };
                let part = self.front..cut;
                self.front = cut;
                part
            }
            End::Back => {
                let cut = snap(self.back - want).min(self.back - want);
                let cut = if cut > self.front { cut } else { self.front };
                let part = cut..self.back;
                self.back = cut;
                part
            }
        };
        Some(part)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn deal_all(d: &mut Dealer, movers: usize, snap: impl Fn(u64) -> u64) -> Vec<(usize, Range<u64>)> {
        let mut out = vec![];
        let mut m = 0;
        while let Some(p) = d.poll_part(m, &snap) {
            out.push((m, p));
            m = (m + 1) % movers;
        }
        out
    }

    #[test]
    fn parts_shrink_and_come_from_both_ends() {
        let mut d = Dealer::new(1000 << 20, 2, 1 << 18, 4 << 20);
        let parts = deal_all(&mut d, 2, |x| x);
        let front: Vec<&Range<u64>> = parts.iter().filter(|(m, _)| *m == 0).map(|(_, p)| p).collect();
        let back: Vec<&Range<u64>> = parts.iter().filter(|(m, _)| *m == 1).map(|(_, p)| p).collect();
        assert_eq!(front[0].start, 0);
        assert_eq!(back[0].end, 1000 << 20);
        assert!(front.windows(2).all(|w| w[0].end == w[1].start && w[1].end - w[1].start <= w[0].end - w[0].start));
        assert!(back.windows(2).all(|w| w[1].end == w[0].start));
        assert!(parts.len() > 6, "{parts:?}");
    }

    #[test]
    fn a_faster_mover_gets_larger_parts() {
        let mut d = Dealer::new(1 << 30, 2, 1, 1 << 20);
        d.handle_done(0, 100, 1.0);
        d.handle_done(1, 300, 1.0);
        let a = d.poll_part(0, |x| x).unwrap();
        let mut d2 = d.clone();
        let b = d2.poll_part(1, |x| x).unwrap();
        assert!(b.end - b.start > 2 * (a.end - a.start), "{a:?} {b:?}");
    }

    #[test]
    fn a_cut_is_snapped_back_to_where_it_may_fall() {
        let mut d = Dealer::new(100 << 20, 3, 1 << 18, 1 << 20);
        // Nothing may be cut between 10 and 30 MiB (one entry there).
        let snap = |x: u64| if x > 10 << 20 && x < 30 << 20 { 10 << 20 } else { x };
        for (_, p) in deal_all(&mut d, 3, snap) {
            for cut in [p.start, p.end] {
                assert!(!(cut > 10 << 20 && cut < 30 << 20), "{p:?}");
            }
        }
    }

    proptest! {
        /// Every byte is dealt exactly once, whatever the rates, the
        /// snapping and the order movers ask in.
        #[test]
        fn every_byte_is_dealt_once(
            size in 0u64..(1 << 34),
            movers in 1usize..6,
            align in 1u64..(1 << 20),
            min in 1u64..(64 << 20),
            rates in proptest::collection::vec((0u64..1 << 30, 0.0f64..10.0), 0..8),
            holes in proptest::collection::vec((0u64..(1 << 34), 1u64..(1 << 22)), 0..8),
            asks in proptest::collection::vec(0usize..6, 1..400),
        ) {
            let mut d = Dealer::new(size, movers, align, min);
            for (i, (bytes, secs)) in rates.iter().enumerate() {
                d.handle_done(i % movers, *bytes, *secs);
            }
            let snap = |x: u64| holes.iter().find(|(a, l)| x > *a && x < a + l).map_or(x, |(a, _)| *a);
            let mut parts = vec![];
            for m in asks.iter().chain(std::iter::repeat_n(&0, 10_000)) {
                match d.poll_part(m % movers, snap) {
                    Some(p) => parts.push(p),
                    None => break,
                }
            }
            prop_assert_eq!(d.remaining(), 0);
            parts.sort_by_key(|p| p.start);
            let mut at = 0;
            for p in &parts {
                prop_assert_eq!(p.start, at);
                prop_assert!(p.end > p.start);
                at = p.end;
            }
            prop_assert_eq!(at, size);
            prop_assert!(d.poll_part(0, snap).is_none());
        }
    }
}
