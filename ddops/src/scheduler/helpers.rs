//! Free producers helping: the busiest segment is cross-matched or split
//! by contribution (the paper's Eq. 1-8), long claims taken over.

use super::*;
use crate::split::lower_share;

impl Scheduler {
    pub(super) fn rebalance(&mut self, now: Instant) {
        self.now = now;
        self.pace(now);
        self.start_relays(now);
        let ids: Vec<usize> = self.segments.keys().copied().collect();
        for sid in ids {
            self.grant(sid);
        }
        self.assign_helpers(now);
        self.take_over(now);
    }

    /// A claim its producer is still delivering, with nothing left to hand
    /// out around it, is ended if it holds more than twice the time grants
    /// run ahead by and a free producer would bring what is left of it
    /// (after `End` reaches its producer) much sooner: the rest goes back
    /// to the gaps and the helpers take it. Such a claim was made before
    /// the producer's rate was known (a first grant: many seconds of a slow
    /// mirror's time), or before it slowed down, or is the smallest grant
    /// of a slow one; the paper's grants never need this.
    pub(super) fn take_over(&mut self, now: Instant) {
        self.wake = None;
        let free = self.candidates();
        let fastest =
            free.iter().filter_map(|&c| self.speed(c, now).map(|r| (c, r))).max_by(|a, b| a.1.total_cmp(&b.1));
        let Some((helper, fast)) = fastest else { return };
        let rtt = |p: ProducerId| self.producers[p].rtt.unwrap_or_default().as_secs_f64();
        let finishes = self.finishes(now);
        let slowest = self
            .streams
            .iter()
            .filter(|(_, s)| s.segment.is_none() && !s.ending && !s.pending && s.producer != helper)
            .filter_map(|(&id, s)| {
                let (p, slow) = (s.producer, self.claim_rate(id, now)?);
                // What it still delivers alone (more than twice what grants
                // run ahead by), against what comes back after `End` and is
                // shared with the helper.
                let alone = s.remaining as f64 / slow;
                let ahead = 2.0 * rtt(p) + self.cfg.lookahead.as_secs_f64();
                // Whole blocks only: a claim of one block whose producer
                // sends less than a block a round trip comes back whole.
                let back = s.remaining as f64 - (slow * rtt(p)).floor();
                let shared = rtt(p) + rtt(helper) + back / (slow + fast);
                let worth = alone > 2.0 * ahead && alone > 2.0 * shared;
                // Another receiver's claim only where it is slow (see
                // `PEER_HELP_SPEEDUP`).
                // At the end (all else this receiver waits for done well
                // before), a few seconds' wait costs more than the blocks.
                let straggles = finishes.straggles(alone, Work::Claim(id));
                let worth = worth
                    && (!self.producers[p].home_only
                        || (!self.relay_only
                            && (fast > PEER_HELP_SPEEDUP * slow || straggles)
                            && (alone > PEER_HELP_AFTER.as_secs_f64() || straggles && alone > LAST_WAIT)));
                (worth && back >= 1.0).then_some((id, alone))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((id, _)) = slowest {
            let s = self.streams.get_mut(&id).expect("live");
            s.ending = true;
            self.stats.ends += 1;
            self.actions.push_back(Action::End { producer: s.producer, stream: id });
        }
        self.wake = self.peer_wake(now);
    }

    /// When a peer's claim, silent now, would be worth looking at again
    /// ([`Scheduler::take_over`]): no block arrives to make the scheduler
    /// look when a peer sends nothing. Only while a helper is free.
    fn peer_wake(&self, now: Instant) -> Option<Instant> {
        let waiting = |s: &&Stream| !s.ending && !s.pending && s.remaining > 0;
        self.streams
            .values()
            .filter(waiting)
            .filter(|s| self.producers[s.producer].home_only && self.rate(s.producer).is_some())
            .filter_map(|s| {
                let since = self.silent_since(s.producer)?;
                let gap = s.segment.map_or(0, |sid| self.segments[&sid].hi.saturating_sub(self.segments[&sid].lo));
                // Its work at one block per `silent` seconds takes longer
                // than PEER_HELP_AFTER from then on.
                let after = PEER_HELP_AFTER.div_f64((s.remaining + gap).max(1) as f64).max(rates::SILENT);
                let at = since + after;
                Some(if at > now { at } else { now + rates::SILENT })
            })
            .min()
    }

    /// Producers that can take new work: alive, not the edge of any segment,
    /// and with at most one stream still finishing (its `Start` would queue
    /// behind that one).
    pub(super) fn candidates(&self) -> Vec<ProducerId> {
        let (busy, edge) = self.load();
        let free = |p: usize| {
            let q = &self.producers[p];
            !q.failed && !q.forward_only && !q.home_only && !edge[p] && busy[p] <= 1
        };
        (0..self.producers.len()).filter(|&p| free(p)).collect()
    }

    /// Blocks a segment's own edges will deliver within the help horizon.
    pub(super) fn help_threshold(&self, seg: &Segment) -> u64 {
        let mut blocks = 0.0;
        for id in [seg.up, seg.down].into_iter().flatten() {
            let p = self.streams[&id].producer;
            let horizon = self.producers[p].rtt.unwrap_or_default().max(self.cfg.min_help);
            blocks += self.rate(p).unwrap_or(0.0) * horizon.as_secs_f64();
        }
        blocks as u64
    }

    /// Rule 1: free producers help the segment with the most unprocessed
    /// blocks, as long as helping pays. A segment that has lost an edge
    /// (its producer failed) gets a new one first: one `Start` rather than
    /// a split's two, the pair is whole again, and the file fills in order
    /// behind it (a hole left at a lost incrementing edge would keep the
    /// running SHA-256 and `-o -` waiting until the end); the helpers'
    /// rules rebalance the rest as before.
    pub(super) fn assign_helpers(&mut self, now: Instant) {
        for _ in 0..self.producers.len() * 2 {
            let mut cands = self.candidates();
            if cands.is_empty() {
                return;
            }
            let unprocessed = |seg: &Segment| -> u64 {
                let edge = |id: Option<StreamId>| id.map_or(0, |id| self.streams[&id].remaining);
                seg.hi - seg.lo + edge(seg.up) + edge(seg.down)
            };
            // A segment no peer works (this receiver's own share) before
            // another receiver's: blocks of its share that the mirrors
            // bring here leave them twice.
            let own = |seg: &Segment| {
                ![seg.up, seg.down].into_iter().flatten().any(|id| self.producers[self.streams[&id].producer].home_only)
            };
            let target = self
                .segments
                .iter()
                .filter(|(_, seg)| {
                    let gap = seg.hi.saturating_sub(seg.lo);
                    gap > 0
                        && !self.waits_for_relay(seg)
                        && (seg.up.is_none() && seg.down.is_none() || gap > self.help_threshold(seg))
                        && (!self.relay_only || own(seg))
                })
                .max_by_key(|(&sid, seg)| {
                    // A relay's segment has one edge by design: not a lost one.
                    let none = seg.up.is_none() && seg.down.is_none();
                    let half = seg.told.is_none() && seg.up.is_none() != seg.down.is_none();
                    (none, half, own(seg), unprocessed(seg), std::cmp::Reverse(sid))
                })
                .map(|(&sid, _)| sid);
            let Some(sid) = target else { return };
            let seg = self.segments[&sid].clone();
            // A helper pays only if its share (a grant at least) arrives
            // before the segment's own edges would have delivered the whole
            // gap: at the end, a slow producer given the last blocks is
            // what the transfer waits for.
            let edges = [seg.up, seg.down].into_iter().flatten();
            let pair: f64 = edges.map(|id| self.speed_now(id, now).unwrap_or(0.0)).sum();
            let peer =
                [seg.up, seg.down].into_iter().flatten().any(|id| self.producers[self.streams[&id].producer].home_only);
            // A peer that has sent nothing yet waits for its own mirrors
            // (with many receivers, seconds): it is not slow, and if it
            // never sends, the stall timeout drops it and its share is
            // helped as one with no edge. Where pieces are checked whole
            // it sends nothing until a piece is, then the piece at once:
            // it is judged once a piece has come.
            let sent: u64 = [seg.up, seg.down].into_iter().flatten().map(|id| self.streams[&id].delivered).sum();
            if peer && (pair == 0.0 || (self.piece > 1 && sent < self.piece)) {
                return;
            }
            if pair > 0.0 {
                let gap = seg.hi.saturating_sub(seg.lo) as f64;
                // Another receiver's share (`with_homes`) is helped only
                // where that receiver is slow: blocks this receiver's
                // mirrors bring of it leave them twice, and while the peer
                // keeps up the link is full either way.
                if peer {
                    let much_faster = |p: ProducerId| self.speed(p, now).is_some_and(|r| r > PEER_HELP_SPEEDUP * pair);
                    let straggles = self.finishes(now).straggles(unprocessed(&seg) as f64 / pair, Work::Segment(sid));
                    let left = gap / pair;
                    if left < PEER_HELP_AFTER.as_secs_f64() && !(straggles && left > LAST_WAIT) {
                        return;
                    }
                    if !straggles {
                        cands.retain(|&p| much_faster(p));
                    }
                }
                cands.retain(|&p| match self.speed(p, now) {
                    Some(r) if r > 0.0 => {
                        let share = (gap * r / (r + pair)).max(self.cfg.min_window as f64);
                        share / r + self.producers[p].rtt.unwrap_or_default().as_secs_f64() < gap / pair
                    }
                    _ => true,
                });
                if cands.is_empty() {
                    return;
                }
            }
            // Faster candidates first (by contribution), ties by id.
            cands.sort_by_key(|&p| (std::cmp::Reverse(self.producers[p].contributed), p));
            // Where a peer's told run grows into this gap, the helper
            // starts away from it (the far end, or the middle).
            let mid = seg.lo + (seg.hi - seg.lo) / 2;
            match (seg.up, seg.down) {
                (None, None) if self.fed_from_below(&seg) => self.attach(sid, Side::Hi, cands[0], now),
                (None, Some(_)) if self.fed_from_below(&seg) && mid > seg.lo => self.stripe(sid, mid, cands[0], now),
                (Some(_), None) if self.fed_from_above(&seg) && mid > seg.lo => self.stripe(sid, mid, cands[0], now),
                (None, _) => self.attach(sid, Side::Lo, cands[0], now),
                (_, None) => self.attach(sid, Side::Hi, cands[0], now),
                (Some(l), Some(r)) => match self.stripe_at(&seg) {
                    Some(at) => self.stripe(sid, at, cands[0], now),
                    None => self.split(sid, l, r, &cands, now),
                },
            }
            let ids: Vec<usize> = self.segments.keys().copied().collect();
            for sid in ids {
                self.grant(sid);
            }
        }
    }

    /// When the work this receiver waits for would end, seconds from now:
    /// each segment at its edges' speed, each claim outside one at its
    /// producer's (the two latest kept: what [`straggles`] weighs against).
    ///
    /// [`straggles`]: Finishes::straggles
    fn finishes(&self, now: Instant) -> Finishes {
        let speed = |id: &StreamId| self.speed_now(*id, now).unwrap_or(0.0);
        let segments = self.segments.iter().filter_map(|(&sid, seg)| {
            let edges = [seg.up, seg.down].into_iter().flatten();
            let work = seg.hi.saturating_sub(seg.lo) + edges.clone().map(|id| self.streams[&id].remaining).sum::<u64>();
            let pair: f64 = edges.map(|id| speed(&id)).sum();
            (work > 0 && pair > 0.0).then(|| (Work::Segment(sid), work as f64 / pair))
        });
        let claims = self
            .streams
            .iter()
            .filter(|(_, s)| s.segment.is_none() && !s.finished())
            .filter_map(|(&id, s)| self.claim_rate(id, now).map(|r| (Work::Claim(id), s.remaining as f64 / r)));
        let mut f = Finishes { latest: None, second: 0.0 };
        for (w, t) in segments.chain(claims) {
            match f.latest {
                Some((_, l)) if t <= l => f.second = f.second.max(t),
                _ => {
                    f.second = f.latest.map_or(0.0, |(_, l)| l);
                    f.latest = Some((w, t));
                }
            }
        }
        f
    }

    /// Splits a busy segment for one or two helpers (rule 2 and Eq. 1-8).
    pub(super) fn split(&mut self, sid: usize, il: StreamId, dr: StreamId, cands: &[ProducerId], now: Instant) {
        let seg = self.segments[&sid].clone();
        let (sl, sr) = (&self.streams[&il], &self.streams[&dr]);
        let (pl, pr) = (sl.producer, sr.producer);
        // P(S_il), P(S_dr): next block each will deliver (Eq. 1).
        let p_il = if sl.remaining > 0 { sl.next } else { seg.lo };
        let p_dr = if sr.remaining > 0 { sr.next } else { seg.hi - 1 };
        let unsent = (p_dr + 1).saturating_sub(p_il);
        let c = |p: ProducerId| self.producers[p].contributed.max(1) as u128;
        let lower_busy_slower = c(pl) <= c(pr);
        let (split, dl, ir) = if cands.len() >= 2 && seg.hi - seg.lo >= 2 {
            // Rule 2: the slower busy producer gets the faster free one.
            let (fast, slow) = (cands[0], cands[1]);
            let (dl, ir) = if lower_busy_slower { (fast, slow) } else { (slow, fast) };
            // Eq. 2-3; Eq. 7-8 (the paper's left is our lower part):
            // P(S_dl) = P(S_il) + U(left) - 1, P(S_ir) = P(S_dl) + 1.
            let u_lower = lower_share(unsent, c(pl) + c(dl), c(pl) + c(dl) + c(ir) + c(pr)) as u128;
            let split = (p_il as u128 + u_lower).clamp(seg.lo as u128 + 1, seg.hi as u128 - 1) as u64;
            (split, Some(dl), Some(ir))
        } else {
            let h = cands[0];
            if lower_busy_slower {
                let u_lower = lower_share(unsent, c(pl) + c(h), c(pl) + c(h) + c(pr)) as u128;
                ((p_il as u128 + u_lower).clamp(seg.lo as u128 + 1, seg.hi as u128) as u64, Some(h), None)
            } else {
                let u_lower = lower_share(unsent, c(pl), c(pl) + c(h) + c(pr)) as u128;
                ((p_il as u128 + u_lower).clamp(seg.lo as u128, seg.hi as u128 - 1) as u64, None, Some(h))
            }
        };
        let upper = self.cut(sid, split);
        if let Some(h) = dl {
            self.attach(sid, Side::Hi, h, now);
        }
        if let Some(h) = ir {
            self.attach(upper, Side::Lo, h, now);
        }
    }
}

/// A free producer helps another receiver's share only if it is this many
/// times faster than that receiver's streams...
const PEER_HELP_SPEEDUP: f64 = 4.0;
/// ...and they would take longer than this for what is left; or they
/// straggle: they would take this many times longer than everything this
/// receiver still waits for.
const PEER_HELP_AFTER: Duration = Duration::from_secs(2);
const PEER_STRAGGLER: f64 = 1.5;
/// ...or, where it straggles so, longer than this (seconds): what is left
/// at the end is worth a few blocks fetched twice.
const LAST_WAIT: f64 = 0.5;

/// A piece of work [`Finishes::straggles`] weighs against the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Work {
    Segment(usize),
    Claim(StreamId),
}

/// The two latest ends of [`Scheduler::finishes`].
struct Finishes {
    latest: Option<(Work, f64)>,
    second: f64,
}

impl Finishes {
    /// Whether another receiver's work (`this`) that takes it `left`
    /// seconds more would end well after all the rest this receiver waits
    /// for: that receiver is slow (a thin uplink), not the link busy, and
    /// this receiver's free producers help it even at the cost of its
    /// blocks leaving the mirrors twice. Peers that keep pace with each
    /// other are never stragglers, however fast this receiver's own share
    /// came.
    fn straggles(&self, left: f64, this: Work) -> bool {
        let rest = match self.latest {
            Some((w, t)) if w != this => t,
            _ => self.second,
        };
        rest > 0.0 && left > PEER_STRAGGLER * rest
    }
}
