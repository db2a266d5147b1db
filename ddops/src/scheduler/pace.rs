//! Keeping the shares of a file several receivers fetch at once abreast
//! ([`Scheduler::with_homes`]).
//!
//! Every receiver's link carries its own share from the mirrors and the
//! other shares from the peers that fetch them. Left to TCP, the flows
//! into one link do not share it evenly (BBR's estimates, a flow started
//! into a full queue): one share races ahead, another crawls. The one
//! that crawls is then the tail everybody waits for, on one peer's uplink,
//! or the mirrors send it a second time. So no share's streams may claim
//! more of it than the least advanced share has arrived (as fractions of
//! each) plus a slack: a flow held back leaves its room on the link to
//! the one behind, and all shares move together.
//!
//! A share that lags because its producer is slow (a peer's thin uplink),
//! not because the link is busy, would hold the rest back. So the shares
//! run unheld for the first second (the link shows what it can carry),
//! and once the link carries clearly less than that best for a while
//! though shares are held, nothing is held any more: the slow share is
//! left to the helper rules, which need this receiver's own share done
//! early to free its mirrors for it. A link that dips and climbs again is
//! not that: flows crowded out until the others were held are opening
//! their windows.

use super::*;

/// The shares of a file several receivers fetch at once.
#[derive(Debug)]
pub(super) struct Shares {
    /// Share k is blocks `bounds[k]..bounds[k + 1]`.
    bounds: Vec<u64>,
    /// Blocks of each share missing at the start.
    missing: Vec<u64>,
    /// This receiver's own share (worked by its mirrors).
    own: usize,
    /// Blocks each share's own streams may still claim, worked out at
    /// each rebalance; `u64::MAX` where there is no limit.
    room: Vec<u64>,
    /// The most its low and its high end's stream may take of it: an
    /// equal part for each, so that no end of a share waits while the
    /// other takes all the room (its readers would take it for stalled).
    part: Vec<(u64, u64)>,
    /// The segments whose gaps are lowest and highest in each share: the
    /// only edges held, those the other receivers wait for (they read a
    /// share from its ends inward; blocks a helper brings in the middle
    /// are of no use to them until the ends reach them).
    ends: Vec<(Option<usize>, Option<usize>)>,
    /// A share was found slow by itself: nothing is held any more.
    off: bool,
    /// Shares slow by themselves from the start (judged once, when the
    /// first unheld second ends): they hold no other back.
    alone: Option<Vec<bool>>,
    /// What this receiver's link carries (all producers), and the most.
    link: RateMeter,
    rate: f64,
    peak: f64,
    /// Since when the link has carried clearly less than its best, and
    /// the least it has carried since.
    room_since: Option<Dip>,
}

/// How far a share may run ahead of the least advanced one, as a fraction
/// of it and in blocks: what keeps streams from waiting on a grant while
/// the shares move together.
const SLACK: f64 = 0.05;
const SLACK_BLOCKS: u64 = 8;
/// The link carries clearly less than its best below this fraction of it
/// (held flows leave a dip while the one behind speeds up: not that
/// deep)...
const ROOM: f64 = 0.5;
/// ...and for this long, the least advanced share is slow by itself...
const HOLD: Duration = Duration::from_millis(300);
/// ...unless the link's rate has grown by this factor from its lowest
/// since (and by more than the slack of its best): the flows behind are
/// taking the room the held ones left (a TCP flow that was crowded out
/// grows over a few round trips). A share slow by itself leaves the link
/// flat.
const RISE: f64 = 1.5;
/// A dip is given that benefit for this long at most: flows opening their
/// windows fill the link well within it, and a peer that trickles in
/// bursts (a flaky or hostile one) must not keep everything held to its
/// pace.
const RAMP: Duration = Duration::from_secs(3);
/// The link's rate is measured over this much time at least.
const WINDOW: Duration = Duration::from_millis(300);
/// For this long the shares are not held, and the link is not judged:
/// its rate unheld is the best it can do.
const WARM_UP: Duration = Duration::from_secs(1);

impl Shares {
    pub(super) fn new(bounds: Vec<u64>, missing: &[Range<u64>], own: usize) -> Self {
        let count = |k: usize| -> u64 {
            let (lo, hi) = (bounds[k], bounds[k + 1]);
            missing.iter().map(|r| r.end.min(hi).saturating_sub(r.start.max(lo))).sum()
        };
        let missing: Vec<u64> = (0..bounds.len() - 1).map(count).collect();
        let (room, part) = (vec![u64::MAX; missing.len()], vec![(u64::MAX, u64::MAX); missing.len()]);
        let ends = vec![(None, None); missing.len()];
        Shares {
            bounds,
            missing,
            own,
            room,
            part,
            ends,
            off: false,
            alone: None,
            link: RateMeter::default(),
            rate: 0.0,
            peak: 0.0,
            room_since: None,
        }
    }

    /// This receiver's own share.
    pub(super) fn own(&self) -> usize {
        self.own
    }

    /// The share block `b` belongs to.
    pub(super) fn of(&self, b: u64) -> usize {
        self.bounds.partition_point(|&x| x <= b).saturating_sub(1).min(self.missing.len() - 1)
    }

    /// Whether a producer working share `k` is held with it: one of the
    /// share's own (this receiver's mirrors on its own share, a peer on
    /// its share), not a helper.
    fn holds(&self, k: usize, peer: bool) -> bool {
        (k == self.own) != peer
    }

    /// Whether stream `s`, an edge of segment `sid` in share `k`, is held:
    /// one of the share's own, at one of its ends.
    fn held(&self, k: usize, sid: usize, s: &Stream, peer: bool) -> bool {
        let end = match s.dir {
            Direction::Increment => self.ends[k].0,
            Direction::Decrement => self.ends[k].1,
        };
        self.holds(k, peer) && end == Some(sid)
    }

    /// Follows the link's rate: whether it has had room for a while.
    fn link_idles(&mut self, delivered: u64, started: Instant, now: Instant) -> bool {
        self.link.record(now, delivered);
        // Over a whole window only: a burst (claims granted before the
        // rates were known) is no measure of the link.
        let rate = match (self.link.samples.front(), self.link.samples.back()) {
            (Some(&(t0, c0)), Some(&(t1, c1))) if t1.duration_since(t0) >= WINDOW => {
                (c1 - c0) as f64 / t1.duration_since(t0).as_secs_f64()
            }
            _ => return false,
        };
        self.rate = rate;
        self.peak = self.peak.max(rate);
        if now.duration_since(started) < WARM_UP || rate >= ROOM * self.peak {
            self.room_since = None;
            return false;
        }
        let dip = self.room_since.get_or_insert(Dip { began: now, since: now, low: rate });
        dip.low = dip.low.min(rate);
        let rises = rate > RISE * dip.low && rate - dip.low > SLACK * self.peak;
        if rises && now.duration_since(dip.began) < RAMP {
            (dip.since, dip.low) = (now, rate);
            return false;
        }
        now.duration_since(dip.since) >= HOLD
    }
}

/// Which of the other receivers' shares came in the first, unheld
/// second, but at less than a third of the middle one of the others'
/// pace (`done`: each share's part arrived): those receivers are slow by
/// themselves (a thin uplink sends steadily from the start, slowly), and
/// holding the others to them would only leave the link idle until that
/// is found out, and then hold nothing at all. A share that brought
/// nothing yet is not judged: its receiver waits for its own mirrors, or
/// its flow is crowded out by the others (what holding is for). With one
/// other receiver there is nothing to compare with.
fn alone(done: &[f64], own: usize) -> Vec<bool> {
    let peers: Vec<usize> = (0..done.len()).filter(|&k| k != own).collect();
    let mut alone = vec![false; done.len()];
    if peers.len() < 2 {
        return alone;
    }
    for &k in &peers {
        let mut others: Vec<f64> = peers.iter().filter(|&&j| j != k).map(|&j| done[j]).collect();
        others.sort_by(f64::total_cmp);
        let middle = others[others.len() / 2];
        alone[k] = done[k] > 0.0 && done[k] * ALONE < middle;
    }
    alone
}

/// A share this many times behind the others' middle one after the first
/// second is slow by itself ([`alone`]).
const ALONE: f64 = 3.0;

impl Scheduler {
    /// Whether shares are held, the link's best and the room each has
    /// (-1: no limit), for the debug log.
    pub fn pacing(&self) -> Option<String> {
        let sh = self.shares.as_ref()?;
        let room: Vec<i64> = sh.room.iter().map(|&r| if r == u64::MAX { -1 } else { r as i64 }).collect();
        Some(format!("off={} peak={:.0} rate={:.0} room={room:?}", sh.off, sh.peak, sh.rate))
    }

    /// Works out each share's room from where the shares stand now.
    pub(super) fn pace(&mut self, now: Instant) {
        let (delivered, started, piece) = (self.delivered, self.started, self.piece);
        let Some(sh) = self.shares.as_mut() else { return };
        if sh.off {
            return;
        }
        if sh.link_idles(delivered, started, now) {
            sh.off = true;
            sh.room.fill(u64::MAX);
            sh.part.fill((u64::MAX, u64::MAX));
            return;
        }
        let f = self.frontiers();
        let sh = self.shares.as_mut().expect("checked");
        sh.ends = f.iter().map(|f| (f.first_gap.map(|g| g.1), f.last_gap.map(|g| g.1))).collect();
        let n = sh.missing.len();
        // A share nobody works on now (its peer dropped, its rest waiting
        // for a helper) holds no other back: what it waits for may be
        // this receiver's mirrors, held.
        let (mut worked, mut edges) = (vec![false; n], vec![0u64; n]);
        for s in self.streams.values() {
            if let Some(sid) = s.segment.filter(|sid| self.segments.contains_key(sid)) {
                let k = sh.of(self.segments[&sid].lo);
                worked[k] = true;
                edges[k] += u64::from(sh.held(k, sid, s, self.producers[s.producer].shares_own()));
            }
        }
        // Progress as the other receivers see it: the blocks from each end
        // of a share up to the first that has not come.
        let size = |k: usize| (sh.bounds[k + 1] - sh.bounds[k]) as f64;
        let done = |k: usize| f[k].arrived(sh.bounds[k], sh.bounds[k + 1]) as f64 / size(k);
        // Unheld at first, so the link shows what it can carry.
        let warm = now.duration_since(started) >= WARM_UP;
        if warm && sh.alone.is_none() {
            let done: Vec<f64> = (0..n).map(done).collect();
            sh.alone = Some(alone(&done, sh.own));
        }
        let alone = sh.alone.as_deref().unwrap_or(&[]);
        let behind = |k: &usize| {
            sh.missing[*k] > 0 && f[*k].lo_front.is_some() && worked[*k] && !alone.get(*k).is_some_and(|&a| a)
        };
        let least = (0..n).filter(behind).map(done).reduce(f64::min).filter(|_| warm);
        // Where pieces are checked whole, the others see a share move a
        // piece at a time: each end may be a piece ahead, else every
        // receiver would hold its own share for the others' pieces, which
        // wait for theirs.
        let slack_blocks = SLACK_BLOCKS.max(2 * piece);
        sh.room = (0..n)
            .map(|k| match least {
                Some(least) => {
                    let allowed = ((least + SLACK) * size(k)).ceil() as u64 + slack_blocks;
                    allowed.saturating_sub(f[k].claimed(sh.bounds[k], sh.bounds[k + 1]))
                }
                None => u64::MAX,
            })
            .collect();
        sh.part = (0..n)
            .map(|k| match (sh.room[k], edges[k]) {
                (u64::MAX, _) => (u64::MAX, u64::MAX),
                // Room freed a block at a time (as the least share moves)
                // goes to the end that has claimed less: the ends take
                // turns, and neither one's readers wait on the other.
                (room, 2) => {
                    let (lo, hi) = f[k].claimed_ends(sh.bounds[k], sh.bounds[k + 1]);
                    let (half, odd) = (room / 2, room % 2);
                    if lo <= hi {
                        (half + odd, half)
                    } else {
                        (half, half + odd)
                    }
                }
                (room, _) => (room, room),
            })
            .collect();
    }

    /// Caps what a segment's edges ask for (`need`, low and high edge)
    /// by the room left in its share, and takes it from that room. Only
    /// the share's own producers are held (this receiver's mirrors on its
    /// own share, a peer on its share), never a helper.
    pub(super) fn paced(&mut self, sid: usize, seg: &Segment, need: (u64, u64)) -> (u64, u64) {
        let Some(sh) = self.shares.as_ref() else { return need };
        let k = sh.of(seg.lo);
        let held = |id: Option<StreamId>| {
            id.is_some_and(|id| {
                let s = &self.streams[&id];
                sh.held(k, sid, s, self.producers[s.producer].shares_own())
            })
        };
        let (lo_held, hi_held) = (held(seg.up), held(seg.down));
        let asked = if lo_held { need.0 } else { 0 } + if hi_held { need.1 } else { 0 };
        if asked == 0 {
            return need;
        }
        let sh = self.shares.as_mut().expect("checked");
        let ((lo_part, hi_part), room) = (sh.part[k], &mut sh.room[k]);
        let mut take = |held: bool, want: u64, part: u64| -> u64 {
            if !held {
                return want;
            }
            let given = want.min(part).min(*room);
            if *room != u64::MAX {
                *room -= given;
            }
            given
        };
        let given = (take(lo_held, need.0, lo_part), take(hi_held, need.1, hi_part));
        let binding = (lo_held && given.0 < need.0) || (hi_held && given.1 < need.1);
        for id in [seg.up.filter(|_| lo_held), seg.down.filter(|_| hi_held)].into_iter().flatten() {
            let p = self.streams[&id].producer;
            self.producers[p].paced = binding;
        }
        given
    }
}

/// A time the link carried clearly less than its best.
#[derive(Debug, Clone, Copy)]
struct Dip {
    began: Instant,
    /// Since when it has not risen, and the least it carried since.
    since: Instant,
    low: f64,
}

/// Where a share stands: its lowest and highest block not yet claimed
/// (the gaps, with their segments) and not yet come (gaps and claims).
#[derive(Debug, Default, Clone, Copy)]
struct Frontier {
    first_gap: Option<(u64, usize)>,
    last_gap: Option<(u64, usize)>,
    lo_front: Option<u64>,
    hi_front: Option<u64>,
}

impl Frontier {
    fn gap(&mut self, sid: usize, lo: u64, hi: u64) {
        if self.first_gap.is_none_or(|(l, _)| lo < l) {
            self.first_gap = Some((lo, sid));
        }
        if self.last_gap.is_none_or(|(h, _)| hi > h) {
            self.last_gap = Some((hi, sid));
        }
        self.missing(lo, hi - 1);
    }

    fn missing(&mut self, first: u64, last: u64) {
        self.lo_front = Some(self.lo_front.map_or(first, |f| f.min(first)));
        self.hi_front = Some(self.hi_front.map_or(last, |f| f.max(last)));
    }

    /// Blocks come from the ends of share `lo..hi` inward.
    fn arrived(&self, lo: u64, hi: u64) -> u64 {
        match (self.lo_front, self.hi_front) {
            (Some(a), Some(b)) => (a - lo) + (hi - 1 - b),
            _ => hi - lo,
        }
    }

    /// Blocks claimed (or come) from the ends of share `lo..hi` inward.
    fn claimed(&self, lo: u64, hi: u64) -> u64 {
        let (a, b) = self.claimed_ends(lo, hi);
        (a + b).min(hi - lo)
    }

    /// [`Frontier::claimed`] from the low end and from the high end.
    fn claimed_ends(&self, lo: u64, hi: u64) -> (u64, u64) {
        match (self.first_gap, self.last_gap) {
            (Some((a, _)), Some((b, _))) => (a - lo, hi - b),
            _ => (hi - lo, 0),
        }
    }
}

impl Scheduler {
    /// Each share's [`Frontier`].
    fn frontiers(&self) -> Vec<Frontier> {
        let Some(sh) = self.shares.as_ref() else { return vec![] };
        let mut f = vec![Frontier::default(); sh.missing.len()];
        for (&sid, seg) in &self.segments {
            if seg.hi > seg.lo {
                f[sh.of(seg.lo)].gap(sid, seg.lo, seg.hi);
            }
        }
        for s in self.streams.values().filter(|s| s.remaining > 0) {
            let (first, last) = s.claim();
            f[sh.of(first)].missing(first, last);
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::alone;

    #[test]
    fn a_share_that_came_steadily_but_far_slower_than_the_others_is_slow_by_itself() {
        // This receiver's own share (1) is not judged; 3 is a thin uplink.
        assert_eq!(alone(&[0.10, 0.9, 0.11, 0.03], 1), [false, false, false, true]);
        // Nothing come yet: waiting for its mirrors, or crowded out.
        assert_eq!(alone(&[0.10, 0.9, 0.11, 0.0], 1), [false; 4]);
        // One other receiver: nothing to compare with.
        assert_eq!(alone(&[0.01, 0.9], 1), [false; 2]);
        // Within a third of the others: held with them.
        assert_eq!(alone(&[0.10, 0.9, 0.11, 0.04], 1), [false; 4]);
    }
}
