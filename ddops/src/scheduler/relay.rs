//! What one receiver's mirrors fetch of a third receiver's share, the
//! others read from it (`with_homes`).
//!
//! A receiver with a thin link sends its share slowly, so every other
//! receiver's free mirrors help fetch it ([`super::helpers`]). Each
//! fetching all of it would send it from the mirrors once per receiver,
//! and the mirrors' uplinks are what the others wait for. So a receiver
//! tells the others which blocks of another's share its mirrors were
//! granted ([`Scheduler::poll_told`]), and a receiver told so
//! ([`Scheduler::on_told`]) takes those blocks out of its own gaps and
//! reads them from the teller, through one more connection to it (its
//! [`Home::relay`]), in the order they come there. The first to be
//! granted a block fetches it; the others read it from that one.
//!
//! No block is ever read in a circle: a receiver reads from another only
//! blocks that one was granted to its mirrors, and never blocks it told
//! of itself (which it fetches from its mirrors or the share's own
//! receiver, whoever it lost them to). A relay that is lost, lies or
//! stalls is dropped like any peer, and the blocks it was to bring go
//! back to the helper rules.

use super::*;

/// Blocks this receiver's mirrors were granted of another receiver's
/// share, lowest first: to be told to the other receivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Told {
    pub blocks: Range<u64>,
    /// The order they come in.
    pub dir: Direction,
}

/// Segments one peer may reserve at once: its mirrors' claims grow as
/// runs (a few at a time); a peer telling of more is not heeded.
const MAX_TOLD: usize = 8;

#[derive(Debug, Default)]
pub(super) struct Relays {
    /// Each home's relay producer.
    of: Vec<Option<ProducerId>>,
    /// What the other receivers are still to be told.
    out: VecDeque<Told>,
    /// What this receiver told, merged (`lo -> hi`, exclusive): never read
    /// from another receiver.
    mine: BTreeMap<u64, u64>,
}

impl Relays {
    pub(super) fn new(homes: &[Home], producers: usize) -> Self {
        let of = homes.iter().map(|h| h.relay.filter(|&p| p < producers)).collect();
        Relays { of, ..Relays::default() }
    }

    fn push(&mut self, told: Told) {
        insert(&mut self.mine, told.blocks.start, told.blocks.end);
        if let Some(last) = self.out.back_mut().filter(|l| l.dir == told.dir) {
            let joined = match told.dir {
                Direction::Increment => last.blocks.end == told.blocks.start,
                Direction::Decrement => told.blocks.end == last.blocks.start,
            };
            if joined {
                last.blocks = last.blocks.start.min(told.blocks.start)..last.blocks.end.max(told.blocks.end);
                return;
            }
        }
        self.out.push_back(told);
    }
}

/// Adds `lo..hi` to merged ranges.
fn insert(map: &mut BTreeMap<u64, u64>, lo: u64, hi: u64) {
    let (mut lo, mut hi) = (lo, hi);
    let touching: Vec<(u64, u64)> =
        map.range(..=hi).rev().take_while(|&(_, &e)| e >= lo).map(|(&s, &e)| (s, e)).collect();
    for (s, e) in touching {
        map.remove(&s);
        lo = lo.min(s);
        hi = hi.max(e);
    }
    map.insert(lo, hi);
}

/// The first part of `lo..hi` outside the ranges of `map`.
fn first_outside(map: &BTreeMap<u64, u64>, lo: u64, hi: u64) -> Option<(u64, u64)> {
    let mut at = lo;
    if let Some((_, &e)) = map.range(..=at).next_back() {
        at = at.max(e);
    }
    if at >= hi {
        return None;
    }
    let end = map.range(at..hi).next().map_or(hi, |(&s, _)| s);
    Some((at, end))
}

impl Scheduler {
    /// What the other receivers are to be told this receiver's mirrors
    /// fetch (pass it to each of them: [`Scheduler::on_told`] there).
    pub fn poll_told(&mut self) -> Option<Told> {
        self.relays.out.pop_front()
    }

    /// `granted` was just granted to `producer`: told if it is a mirror's
    /// claim on another receiver's share (flat shares only: in trees the
    /// mirrors never help one).
    pub(super) fn tell(&mut self, producer: ProducerId, dir: Direction, granted: Range<u64>) {
        if self.relay_only || self.producers[producer].home_only || granted.is_empty() {
            return;
        }
        let Some(sh) = &self.shares else { return };
        if sh.of(granted.start) == sh.own() {
            return;
        }
        self.relays.push(Told { blocks: granted, dir });
    }

    /// Receiver `home` (a share's index) says its mirrors were granted
    /// `blocks`, coming in `dir`: the part of them still in this
    /// receiver's gaps, outside its own share and what it told itself, is
    /// read from that receiver's relay instead.
    pub fn on_told(&mut self, home: usize, blocks: Range<u64>, dir: Direction, now: Instant) {
        if !self.relay_alive(home) {
            return;
        }
        let Some(own) = self.shares.as_ref().map(|sh| sh.own()) else { return };
        let reserved = self.segments.values().filter(|s| s.told.is_some_and(|t| t.0 == home)).count();
        loop {
            let sh = self.shares.as_ref().expect("checked");
            let piece = self.segments.iter().find_map(|(&sid, seg)| {
                let k = sh.of(seg.lo);
                if seg.told.is_some() || k == own || k == home {
                    return None;
                }
                let (a, b) = (seg.lo.max(blocks.start), seg.hi.min(blocks.end));
                let (a, b) = first_outside(&self.relays.mine, a, b)?;
                (a < b).then_some((sid, a, b))
            });
            let Some((sid, a, b)) = piece else { break };
            let merges = self.segments.values().any(|s| joins(s, home, dir, a, b));
            if !merges && reserved >= MAX_TOLD {
                break;
            }
            self.carve(sid, a..b, home, dir);
        }
        self.rebalance(now);
    }

    /// Takes `cut` (inside segment `sid`'s gap) out of it for `home`'s
    /// relay: the rest of the gap keeps its edges (an edge whose side of
    /// the gap is gone finishes its claim and is free), and `cut` joins a
    /// segment of that relay's it continues, or is one of its own.
    fn carve(&mut self, sid: usize, cut: Range<u64>, home: usize, dir: Direction) {
        let seg = self.segments.remove(&sid).expect("live segment");
        self.keep(seg.lo..cut.start, seg.up, Side::Lo);
        self.keep(cut.end..seg.hi, seg.down, Side::Hi);
        let (a, b) = (cut.start, cut.end);
        let joined = self.segments.iter_mut().find(|(_, s)| joins(s, home, dir, a, b));
        match joined {
            Some((_, s)) => {
                s.lo = s.lo.min(a);
                s.hi = s.hi.max(b);
                s.span += b - a;
            }
            None => {
                let id = self.add_segment(a, b);
                self.segments.get_mut(&id).expect("just made").told = Some((home, dir));
            }
        }
    }

    /// What is left of a carved gap on one side, with that side's edge:
    /// a segment of its own, or (nothing left) the edge finishes its claim
    /// and is free (one not started yet never starts).
    fn keep(&mut self, gap: Range<u64>, edge: Option<StreamId>, side: Side) {
        match edge {
            Some(id) if !gap.is_empty() => {
                let part = self.add_segment(gap.start, gap.end);
                let s = self.segments.get_mut(&part).expect("just made");
                match side {
                    Side::Lo => s.up = Some(id),
                    Side::Hi => s.down = Some(id),
                }
                self.streams.get_mut(&id).expect("live").segment = Some(part);
            }
            Some(id) if self.streams[&id].pending => {
                self.streams.remove(&id);
            }
            Some(id) => self.streams.get_mut(&id).expect("live").segment = None,
            None if !gap.is_empty() => {
                self.add_segment(gap.start, gap.end);
            }
            None => {}
        }
    }

    /// Where this receiver's first helper starts in another receiver's
    /// share that its own pair still works from both ends, with relays:
    /// receivers helping the same slow share all at once would otherwise
    /// split it alike and fetch the same blocks from the mirrors before
    /// hearing of each other. The others (all but that share's) start
    /// evenly spaced inside the gap, each in its own place by its number,
    /// and each reads the rest from the others as they tell.
    pub(super) fn stripe_at(&self, seg: &Segment) -> Option<u64> {
        let sh = self.shares.as_ref()?;
        let (k, own) = (sh.of(seg.lo), sh.own());
        let n = self.relays.of.len();
        let pair =
            [seg.up, seg.down].into_iter().flatten().all(|id| self.producers[self.streams[&id].producer].shares_own());
        if k == own || n < 3 || !pair || !self.relays.of.iter().any(Option::is_some) {
            return None;
        }
        let (j, m) = (if own < k { own } else { own - 1 } as u64, n as u64 - 1);
        let at = seg.lo + (seg.hi - seg.lo) * (j + 1) / (m + 1);
        (seg.lo < at && at < seg.hi).then_some(at)
    }

    /// Cuts segment `sid` at `at`: its low edge keeps the part below, its
    /// high edge the part above, and `helper` works that part up from `at`.
    pub(super) fn stripe(&mut self, sid: usize, at: u64, helper: ProducerId, now: Instant) {
        let upper = self.cut(sid, at);
        self.attach(upper, Side::Lo, helper, now);
    }

    /// Whether a helper attached at the low end of `seg` would run into a
    /// peer's told run from behind (a reserved segment ends where `seg`
    /// begins, the peer's mirrors granting on upward): the two would take
    /// turns at the next few blocks, each yielding to the other's tale.
    pub(super) fn fed_from_below(&self, seg: &Segment) -> bool {
        self.segments.values().any(|s| s.told.is_some_and(|(_, d)| d == Direction::Increment) && s.hi == seg.lo)
    }

    /// The same from above: a peer's run granted downward ends at `seg`'s top.
    pub(super) fn fed_from_above(&self, seg: &Segment) -> bool {
        self.segments.values().any(|s| s.told.is_some_and(|(_, d)| d == Direction::Decrement) && s.lo == seg.hi)
    }

    /// Whether `home` has a relay that may still bring blocks.
    fn relay_alive(&self, home: usize) -> bool {
        self.relays.of.get(home).copied().flatten().is_some_and(|p| !self.producers[p].failed)
    }

    /// A reserved segment whose gap is empty but whose relay has started:
    /// kept, so that what the peer tells next (the run it continues) is
    /// granted on the same stream, not a new `Start` for every few blocks.
    pub(super) fn relay_waits_on(&self, seg: &Segment) -> bool {
        let started = [seg.up, seg.down].into_iter().flatten().any(|id| !self.streams[&id].pending);
        started && seg.told.is_some_and(|(h, _)| self.relay_alive(h))
    }

    /// A segment reserved for a live relay with no edge yet: the mirrors
    /// leave it to that relay.
    pub(super) fn waits_for_relay(&self, seg: &Segment) -> bool {
        seg.up.is_none() && seg.down.is_none() && seg.told.is_some_and(|(h, _)| self.relay_alive(h))
    }

    /// Each relay with nothing to do takes the oldest segment reserved for
    /// it, from the end its blocks come in first.
    pub(super) fn start_relays(&mut self, now: Instant) {
        let waiting: Vec<(usize, usize, Direction)> = self
            .segments
            .iter()
            .filter(|(_, s)| s.hi > s.lo && self.waits_for_relay(s))
            .filter_map(|(&sid, s)| s.told.map(|(h, d)| (sid, h, d)))
            .collect();
        if waiting.is_empty() {
            return;
        }
        // A relay kept on an empty segment for what comes next leaves it
        // for one with blocks waiting.
        for &(_, home, _) in &waiting {
            let Some(p) = self.relays.of[home] else { continue };
            let idle = self.segments.iter().find(|(_, s)| {
                s.hi <= s.lo && [s.up, s.down].into_iter().flatten().any(|id| self.streams[&id].producer == p)
            });
            if let Some((&sid, _)) = idle {
                let seg = self.segments.remove(&sid).expect("found");
                for id in [seg.up, seg.down].into_iter().flatten() {
                    self.streams.get_mut(&id).expect("live").segment = None;
                }
            }
        }
        let (busy, mut edge) = self.load();
        for (sid, home, dir) in waiting {
            let Some(p) = self.relays.of[home] else { continue };
            if edge[p] || busy[p] > 1 {
                continue;
            }
            edge[p] = true;
            let side = match dir {
                Direction::Increment => Side::Lo,
                Direction::Decrement => Side::Hi,
            };
            self.attach(sid, side, p, now);
        }
    }

    /// `producer` is gone: if it was a relay, the blocks reserved for it
    /// go back to the helper rules.
    pub(super) fn relay_lost(&mut self, producer: ProducerId) {
        let Some(home) = self.relays.of.iter().position(|&r| r == Some(producer)) else { return };
        for seg in self.segments.values_mut().filter(|s| s.told.is_some_and(|t| t.0 == home)) {
            seg.told = None;
        }
    }
}

/// Whether `a..b`, told by `home` coming in `dir`, continues segment `s`
/// (reserved for it, the same way, with no edge on the side it grows).
fn joins(s: &Segment, home: usize, dir: Direction, a: u64, b: u64) -> bool {
    s.told == Some((home, dir))
        && match dir {
            Direction::Increment => s.hi == a && s.down.is_none(),
            Direction::Decrement => s.lo == b && s.up.is_none(),
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_the_first_part_outside_them_is_found() {
        let mut m = BTreeMap::new();
        insert(&mut m, 10, 20);
        insert(&mut m, 30, 40);
        insert(&mut m, 20, 25);
        assert_eq!(m.iter().map(|(&a, &b)| (a, b)).collect::<Vec<_>>(), vec![(10, 25), (30, 40)]);
        assert_eq!(first_outside(&m, 0, 50), Some((0, 10)));
        assert_eq!(first_outside(&m, 12, 50), Some((25, 30)));
        assert_eq!(first_outside(&m, 30, 40), None);
        assert_eq!(first_outside(&m, 35, 45), Some((40, 45)));
    }
}
