//! The DDOps scheduler: a pure state machine, no I/O, no clock.
//!
//! Events go in (`on_blocks`, `on_stopped`, `on_failed`, each with `now`),
//! actions come out (`poll_action`: `Start`, `Extend`, `End`). The same code
//! drives real sockets ([`crate::transfer`]) and the simulator ([`crate::sim`]),
//! so what the tests and `ddftp simulate` show is what `ddftp get` does.
//!
//! # Model
//! The blocks still to be handed out form *segments*: a gap of unclaimed
//! blocks `[lo, hi)` with an incrementing producer stream on its low edge
//! (`up`) and a decrementing one on its high edge (`down`): the paper's
//! pair, its left and right. A stream *claims*
//! blocks from its edge of the gap; the claim is the `last` bound it was sent
//! in `Start` and then moved with `Extend`. Claims never overlap, so two
//! producers of a pair never send the same block: they meet where their
//! claims meet, and no block crosses the meeting point (no duplicates, and no
//! `End` needed at a meeting).
//!
//! Claims run ahead of the data by each stream's rate times
//! (2 RTT + lookahead), so a producer never waits for a grant. When the gap is
//! smaller than what both edges want, it is split so both edges finish at the
//! same time (rates measured from delivered blocks; contributions before
//! that). Then the segment is empty and its two producers are a *free pair*:
//! they help the segment with the most unprocessed blocks by the paper's
//! rules: cross-matching (rule 2) and the contribution-proportional split of
//! Eq. 1-8. Their `Start`s are sent at once and queue at the server behind the
//! claim it is finishing, so a reassignment costs no round trip. No help is
//! sent to a segment that its own pair finishes within about one round trip.
//!
//! A claim that turned out far too long for its producer (a first grant,
//! made before its rate was known, or one whose producer slowed down) is
//! ended when a free producer would bring its rest much sooner: `End`, and
//! the `Stopped` reply says how far it got; the rest goes back into the
//! gaps, as a failed producer's unfinished claims do. A segment with no
//! producer left is helped first. A producer that joins a running
//! transfer is free from the start, and helps like a free pair.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;
use std::time::{Duration, Instant};

use ddftp_proto::Direction;

pub use relay::Told;

/// Index of a producer stream slot (one connection) given to [`Scheduler::new`].
pub type ProducerId = usize;
/// Identifies one `Start` and the blocks that answer it.
pub type StreamId = u32;

/// Tuning. The defaults suit real networks; tests shrink the windows to make
/// the paper's arithmetic visible.
#[derive(Debug, Clone)]
pub struct Config {
    /// Blocks a stream is granted before its rate is known.
    pub initial_window: u64,
    /// Blocks per second a producer is assumed to move until its rate is
    /// measured, once its round trip is known (`on_round_trip`, or its first
    /// blocks): its grants then cover two round trips of it, up to
    /// `max_unmeasured_window`, so a long path is not left idle between
    /// grants. Zero: no assumption, `initial_window` only.
    pub first_rate: f64,
    /// The most a producer whose rate is not measured yet is granted from
    /// `first_rate`: work no other producer may take over.
    pub max_unmeasured_window: u64,
    /// Smallest grant worth a message once rates are known.
    pub min_window: u64,
    /// Grants run this far ahead of the data, beyond two round trips.
    pub lookahead: Duration,
    /// A segment whose pair finishes its gap within this (or one RTT, if
    /// longer) gets no helpers: a `Start` would not pay for itself.
    pub min_help: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            initial_window: 64,
            first_rate: 0.0,
            max_unmeasured_window: 64,
            min_window: 4,
            lookahead: Duration::from_millis(60),
            min_help: Duration::from_millis(20),
        }
    }
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send `Start` (blocks `first` through `last` in `dir`) on `producer`.
    Start { producer: ProducerId, stream: StreamId, first: u64, last: u64, dir: Direction },
    /// Move a running stream's `last`.
    Extend { producer: ProducerId, stream: StreamId, last: u64 },
    /// Stop a stream now.
    End { producer: ProducerId, stream: StreamId },
}

/// An event that contradicts what the producer was told to do; the driver
/// should drop that producer (the scheduler already did).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Violation {
    #[error("producer {producer} sent block {got} of stream {stream}, expected {expected}")]
    WrongBlock { producer: ProducerId, stream: StreamId, got: u64, expected: u64 },
    #[error("producer {producer} sent blocks for stream {stream}, which is not its running stream")]
    UnknownStream { producer: ProducerId, stream: StreamId },
    #[error("producer {producer} sent more blocks than stream {stream} allows")]
    PastBound { producer: ProducerId, stream: StreamId },
    #[error("producer {producer} says stream {stream} sent {said} blocks, {got} arrived")]
    CountMismatch { producer: ProducerId, stream: StreamId, said: u64, got: u64 },
}

/// Who works one share of a file several receivers fetch
/// ([`Scheduler::with_homes`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Home {
    /// Its producers, paired in order (one alone is the low edge).
    pub producers: Vec<ProducerId>,
    /// They hold only this share's blocks (another receiver): they never
    /// help elsewhere.
    pub only_here: bool,
    /// The share's size against the others' (`ddops::fan::Source::weight`).
    pub weight: u64,
    /// Another receiver's: one more producer on it that reads what its
    /// mirrors fetch of the other shares, as it tells ([`Scheduler::on_told`]).
    pub relay: Option<ProducerId>,
}

/// Where each share of `total` blocks begins, and the end: shares in
/// proportion to `weights` (each at least 1), every bound but the end a
/// multiple of `unit` blocks. A file whose pieces are checked whole (a
/// Metalink's pieces of more than a block) is cut at pieces: a receiver
/// passes a piece on only once it holds all of it, so a piece split
/// between two receivers' shares would reach neither's peers until one
/// fetched the other's part too.
pub fn share_bounds(total: u64, weights: &[u64], unit: u64) -> Vec<u64> {
    let unit = u128::from(unit.max(1));
    let whole: u128 = weights.iter().map(|&w| u128::from(w.max(1))).sum::<u128>().max(1);
    let mut at = 0u128;
    let mut bounds = vec![0];
    for (k, &w) in weights.iter().enumerate() {
        at += u128::from(w.max(1));
        let exact = u128::from(total) * at / whole;
        let cut = match k + 1 == weights.len() {
            true => exact,
            false => ((exact + unit / 2) / unit * unit).min(u128::from(total)),
        };
        bounds.push(cut as u64);
    }
    bounds
}

/// Counts for the summary.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub starts: u64,
    pub extends: u64,
    pub ends: u64,
    /// Blocks delivered more than once (kept at zero by construction; counted
    /// so that a regression shows).
    pub duplicate_blocks: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The low edge: its stream goes up from `lo`.
    Lo,
    /// The high edge: its stream goes down from `hi`.
    Hi,
}

#[derive(Debug)]
struct Stream {
    producer: ProducerId,
    dir: Direction,
    /// Next block expected (meaningless once `remaining` is 0).
    next: u64,
    /// Claimed blocks not yet delivered.
    remaining: u64,
    /// `Start` not sent yet (it goes out with the first grant).
    pending: bool,
    delivered: u64,
    /// The segment whose edge this stream is, if it still has one.
    segment: Option<usize>,
    /// When `Start` went to an idle producer: the first block measures RTT.
    rtt_probe: Option<Instant>,
    /// `End` was sent: its producer stops, and says how far it got.
    ending: bool,
}

impl Stream {
    /// Delivered its whole claim and will not be extended: the server has
    /// it paused until our next `Start` (or `End`) closes it.
    fn finished(&self) -> bool {
        self.remaining == 0 && self.segment.is_none() && !self.pending
    }

    /// Inclusive claim bounds (low, high); only when `remaining > 0`.
    fn claim(&self) -> (u64, u64) {
        match self.dir {
            Direction::Increment => (self.next, self.next + self.remaining - 1),
            Direction::Decrement => (self.next + 1 - self.remaining, self.next),
        }
    }
}

#[derive(Debug, Clone)]
struct Segment {
    lo: u64,
    hi: u64,
    /// Gap size when the segment was made: an edge whose rate is not known
    /// yet claims at most a quarter of it, so the deliveries can still
    /// decide who does more.
    span: u64,
    /// The stream on the low edge (incrementing), and on the high edge.
    up: Option<StreamId>,
    down: Option<StreamId>,
    /// Blocks another receiver (this home) told it fetches from its
    /// mirrors, in this direction: its relay's alone while it lives.
    told: Option<(usize, Direction)>,
}

#[derive(Debug, Default)]
struct Producer {
    failed: bool,
    /// It can only send on from where it is (a server that ignores
    /// `Range`: one body from byte 0): it never helps elsewhere.
    forward_only: bool,
    /// It holds only its home's blocks (a peer: [`Home::only_here`]): it
    /// never helps elsewhere.
    home_only: bool,
    /// It reads what a peer told it fetches ([`Home::relay`]): never held
    /// with a share (it is none's own).
    relay: bool,
    /// Its last grant was cut short by pacing (`pace.rs`): a claim that runs dry is
    /// waiting for this receiver's own share, not for a longer window.
    paced: bool,
    /// Grant size while the rate is unknown; doubles whenever a stream ran
    /// dry before its `Extend` arrived (slow start).
    window: u64,
    /// Least grant once the rate is known. A stream that runs dry shows that
    /// more is in flight (socket buffers, queues) than rate x RTT suggests:
    /// the floor then doubles, up to an eighth of the file.
    floor: u64,
    contributed: u64,
    rate: RateMeter,
    rtt: Option<Duration>,
}

impl Producer {
    /// Whether it works a share as that share's own (a peer on its share;
    /// a relay is none's own), for pacing.
    fn shares_own(&self) -> bool {
        self.home_only && !self.relay
    }
}

/// Blocks per second over the last half second of deliveries.
#[derive(Debug, Default)]
struct RateMeter {
    samples: VecDeque<(Instant, u64)>,
    estimate: Option<f64>,
    /// The last delivery, or when the producer was last given work after
    /// idling: what its silence is counted from.
    last: Option<Instant>,
}

impl RateMeter {
    fn record(&mut self, now: Instant, total: u64) {
        self.last = Some(now);
        if self.samples.back().is_none_or(|&(t, _)| now.duration_since(t) >= Duration::from_millis(10)) {
            self.samples.push_back((now, total));
        }
        while self.samples.len() > 2 && now.duration_since(self.samples[1].0) >= Duration::from_millis(500) {
            self.samples.pop_front();
        }
        let &(t0, c0) = self.samples.front().expect("just pushed");
        let span = now.duration_since(t0).as_secs_f64();
        if span >= 0.05 {
            self.estimate = Some((total - c0) as f64 / span);
        }
    }
    /// Forget history across idle time (it would read as slowness).
    fn restart(&mut self, now: Instant) {
        self.samples.clear();
        self.last = Some(now);
    }
}

/// The DDOps consumer's brain. See the module docs.
#[derive(Debug)]
pub struct Scheduler {
    cfg: Config,
    total: u64,
    delivered: u64,
    producers: Vec<Producer>,
    streams: BTreeMap<StreamId, Stream>,
    segments: BTreeMap<usize, Segment>,
    next_segment: usize,
    next_stream: StreamId,
    actions: VecDeque<Action>,
    stats: Stats,
    started: Instant,
    /// `with_homes`: the shares, and how far peers may run ahead.
    shares: Option<pace::Shares>,
    /// Blocks in a piece checked whole (`with_homes`; 1 where each block
    /// is checked): another receiver passes a share on a piece at a time.
    piece: u64,
    /// `with_homes` in trees (`crate::fan`), or with no share of its own:
    /// the mirrors stand in for a lost peer and never help one that sends.
    relay_only: bool,
    /// When a silent peer's claim could be worth taking over
    /// ([`Scheduler::poll_wake`]).
    wake: Option<Instant>,
    /// The time of the last look at the work (what a claim granted to a
    /// producer that had none dates its silence from).
    now: Instant,
    /// Each home's relay (`with_homes`), and what the other receivers are
    /// to be told ([`Scheduler::poll_told`]).
    relays: relay::Relays,
}

impl Scheduler {
    /// Pairs producers (0,1), (2,3), ... over equal partitions of `blocks`;
    /// an odd last producer gets a partition of its own. For the paper's
    /// virtual pair, give the same server two producer slots.
    pub fn new(blocks: Range<u64>, producers: usize, cfg: Config, now: Instant) -> Self {
        let mut s = Scheduler {
            total: blocks.end.saturating_sub(blocks.start),
            delivered: 0,
            producers: (0..producers).map(|_| Producer { window: cfg.initial_window, ..Producer::default() }).collect(),
            streams: BTreeMap::new(),
            segments: BTreeMap::new(),
            next_segment: 0,
            next_stream: 1,
            actions: VecDeque::new(),
            stats: Stats::default(),
            started: now,
            shares: None,
            piece: 1,
            relay_only: false,
            wake: None,
            now,
            relays: relay::Relays::default(),
            cfg,
        };
        let parts = producers.div_ceil(2) as u64;
        if parts == 0 || s.total == 0 {
            return s;
        }
        let (base, extra) = (s.total / parts, s.total % parts);
        let mut lo = blocks.start;
        for i in 0..parts {
            let hi = lo + base + u64::from(i < extra);
            let sid = s.add_segment(lo, hi);
            let p = 2 * i as usize;
            s.attach(sid, Side::Lo, p, now);
            if p + 1 < producers {
                s.attach(sid, Side::Hi, p + 1, now);
            }
            lo = hi;
        }
        s.rebalance(now);
        s
    }

    /// Starts with only `missing` left to fetch (a resumed transfer): each
    /// range is a segment with no producer yet, and the helper rules spread
    /// the producers over them (one per range first, then pairs and splits).
    pub fn resume(missing: &[Range<u64>], producers: usize, cfg: Config, now: Instant) -> Self {
        let mut s = Scheduler::new(0..0, producers, cfg, now);
        for r in missing.iter().filter(|r| r.end > r.start) {
            s.total += r.end - r.start;
            s.add_segment(r.start, r.end);
        }
        s.rebalance(now);
        s
    }

    /// One receiver's part of a file several receivers fetch at once
    /// (`get --share`): `missing` (of `total` blocks) cut into
    /// `homes.len()` shares in proportion to their weights, share k worked
    /// by `homes[k]`'s producers: this receiver's mirrors, paired over
    /// equal parts of its own share, and each other receiver as a virtual
    /// pair over the share it reads from it (its available range grows
    /// from both ends, as these streams read it; [`crate::fan`] says which
    /// receiver that is). Where a share is cut into several missing
    /// ranges, its producers take the largest and the helper rules the
    /// rest; a share with no producers (a receiver that did not answer) is
    /// helped first. Free producers help as anywhere, except those of a
    /// home [`Home::only_here`], and where this receiver has no share of
    /// its own, they only stand in for lost peers. Shares begin at
    /// multiples of `unit` blocks ([`share_bounds`]).
    pub fn with_homes(
        missing: &[Range<u64>],
        total: u64,
        (homes, unit): (&[Home], u64),
        producers: usize,
        cfg: Config,
        now: Instant,
    ) -> Self {
        let mut s = Scheduler::new(0..0, producers, cfg, now);
        let weights: Vec<u64> = homes.iter().map(|h| h.weight).collect();
        let bounds = share_bounds(total, &weights, unit);
        let own = homes.iter().position(|h| !h.only_here && !h.producers.is_empty());
        s.piece = unit.max(1);
        s.shares = own.filter(|_| homes.len() > 1).map(|own| pace::Shares::new(bounds.clone(), missing, own));
        // Shares that weigh more than one are trees' (`crate::fan`).
        let trees = homes.iter().any(|h| h.weight > 1);
        s.relay_only = (own.is_none() || trees) && homes.iter().any(|h| h.only_here);
        for (k, home) in homes.iter().enumerate() {
            let (lo, hi) = (bounds[k], bounds[k + 1]);
            let pieces: Vec<(u64, u64)> =
                missing.iter().map(|r| (r.start.max(lo), r.end.min(hi))).filter(|(a, b)| a < b).collect();
            let largest = (0..pieces.len()).max_by_key(|&i| (pieces[i].1 - pieces[i].0, std::cmp::Reverse(i)));
            for (i, &(a, b)) in pieces.iter().enumerate() {
                s.total += b - a;
                if Some(i) != largest || home.producers.is_empty() {
                    s.add_segment(a, b);
                    continue;
                }
                let parts = (home.producers.len().div_ceil(2) as u64).min(b - a);
                let mut at = a;
                for (j, pair) in home.producers.chunks(2).take(parts as usize).enumerate() {
                    let end = a + (b - a) * (j as u64 + 1) / parts;
                    let sid = s.add_segment(at, end);
                    s.attach(sid, Side::Lo, pair[0], now);
                    if let Some(&second) = pair.get(1) {
                        s.attach(sid, Side::Hi, second, now);
                    }
                    at = end;
                }
            }
            for &p in home.producers.iter().filter(|_| home.only_here) {
                s.producers[p].home_only = true;
            }
            if let Some(p) = home.relay.filter(|&p| p < producers) {
                s.producers[p].home_only = true;
                s.producers[p].relay = true;
            }
        }
        s.relays = relay::Relays::new(homes, producers);
        s.rebalance(now);
        s
    }

    // ----- inputs -----

    /// `count` consecutive blocks of `stream`, starting with `first`, arrived
    /// from `producer`.
    pub fn on_blocks(
        &mut self,
        producer: ProducerId,
        stream: StreamId,
        first: u64,
        count: u64,
        now: Instant,
    ) -> Result<(), Violation> {
        let check = match self.streams.get(&stream) {
            Some(s) if s.producer == producer && !s.pending => {
                if first != s.next {
                    Err(Violation::WrongBlock { producer, stream, got: first, expected: s.next })
                } else if count > s.remaining {
                    Err(Violation::PastBound { producer, stream })
                } else {
                    Ok(())
                }
            }
            _ => Err(Violation::UnknownStream { producer, stream }),
        };
        if let Err(v) = check {
            self.on_failed(producer, now);
            return Err(v);
        }
        let s = self.streams.get_mut(&stream).expect("checked");
        s.remaining -= count;
        s.delivered += count;
        s.next = match s.dir {
            Direction::Increment => first + count,
            Direction::Decrement => first.wrapping_sub(count),
        };
        // A claim that ran dry while its gap still has blocks: the producer
        // idles until our Extend reaches it. Claims must run further ahead.
        let starved = s.remaining == 0 && s.segment.is_some_and(|sid| self.segments[&sid].hi > self.segments[&sid].lo);
        let probe = self.streams.get_mut(&stream).expect("checked").rtt_probe.take();
        let p = &mut self.producers[producer];
        if let Some(sent) = probe {
            let sample = now.duration_since(sent);
            p.rtt = Some(p.rtt.map_or(sample, |r| r.min(sample)));
        }
        p.contributed += count;
        p.rate.record(now, p.contributed);
        self.delivered += count;
        if starved && !self.producers[producer].paced {
            self.widen(producer);
        }
        self.rebalance(now);
        Ok(())
    }

    /// The server says `stream` ended after sending `sent` blocks.
    pub fn on_stopped(
        &mut self,
        producer: ProducerId,
        stream: StreamId,
        sent: u64,
        now: Instant,
    ) -> Result<(), Violation> {
        let Some(s) = self.streams.get(&stream).filter(|s| s.producer == producer && !s.pending) else {
            self.on_failed(producer, now);
            return Err(Violation::UnknownStream { producer, stream });
        };
        if s.delivered != sent {
            let got = s.delivered;
            self.on_failed(producer, now);
            return Err(Violation::CountMismatch { producer, stream, said: sent, got });
        }
        // The server ended the stream (after our End or a later Start). Any
        // claim it did not deliver goes back to the gaps.
        let _ = self.release(stream);
        self.rebalance(now);
        Ok(())
    }

    /// Blocks `blocks`, delivered before, must be fetched again (a piece
    /// spanning them failed verification once whole): they become a gap
    /// of their own, helped by the free producers like any other.
    pub fn reopen(&mut self, blocks: Range<u64>, now: Instant) {
        if blocks.end <= blocks.start {
            return;
        }
        self.total += blocks.end - blocks.start;
        self.add_segment(blocks.start, blocks.end);
        self.rebalance(now);
    }

    /// A producer joins a running transfer (a mirror that became ready
    /// after the others started): it is free, so it helps at once by the
    /// same rules as a pair whose segment ran out. Returns its id, the next
    /// one after those already known.
    pub fn add_producer(&mut self, now: Instant) -> ProducerId {
        self.producers.push(Producer { window: self.cfg.initial_window, ..Producer::default() });
        self.rebalance(now);
        self.producers.len() - 1
    }

    /// `producer` can only send on from where it is (its first claim is
    /// the low edge of the partition at block 0): it is never sent to help
    /// another segment, nor given a decrementing edge. Give such producers
    /// the first slots.
    pub fn set_forward_only(&mut self, producer: ProducerId) {
        self.producers[producer].forward_only = true;
    }

    /// `producer`'s round trip was measured outside the transfer (its
    /// connection's greeting): grants made before its rate is known can
    /// cover it (see `Config::first_rate`).
    pub fn on_round_trip(&mut self, producer: ProducerId, rtt: Duration, now: Instant) {
        let p = &mut self.producers[producer];
        p.rtt = Some(p.rtt.map_or(rtt, |r| r.min(rtt)));
        self.rebalance(now);
    }

    /// `producer` is gone (connection lost, timed out, misbehaved).
    pub fn on_failed(&mut self, producer: ProducerId, now: Instant) {
        if self.producers[producer].failed {
            return;
        }
        self.producers[producer].failed = true;
        self.relay_lost(producer);
        let ids: Vec<StreamId> =
            self.streams.iter().filter(|(_, s)| s.producer == producer).map(|(&id, _)| id).collect();
        for id in ids {
            let _ = self.release(id);
        }
        self.rebalance(now);
    }

    // ----- outputs -----

    /// The next thing to send, if any.
    /// When [`Scheduler::on_wake`] must be called if nothing arrives before
    /// (a peer that sends nothing may hold a claim a free mirror should
    /// take).
    pub fn poll_wake(&self) -> Option<Instant> {
        self.wake
    }

    /// Time passed with nothing arriving: looks at the work again.
    pub fn on_wake(&mut self, now: Instant) {
        self.rebalance(now);
    }

    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Every block has been delivered.
    pub fn is_done(&self) -> bool {
        self.delivered == self.total
    }

    /// Blocks remain and no producer is left to send them.
    pub fn is_stuck(&self) -> bool {
        !self.is_done() && self.producers.iter().all(|p| p.failed)
    }

    // ----- getters -----

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Blocks each producer delivered (its contribution, the paper's C).
    pub fn contributions(&self) -> Vec<u64> {
        self.producers.iter().map(|p| p.contributed).collect()
    }

    pub fn is_failed(&self, producer: ProducerId) -> bool {
        self.producers[producer].failed
    }

    /// Whether each producer owes blocks it was asked for (a started stream
    /// with claimed blocks not yet delivered): only then can it be stalled.
    /// One pass over the streams: a receiver with many peers asks this for
    /// every block.
    pub fn owing(&self) -> Vec<bool> {
        let mut owes = vec![false; self.producers.len()];
        for s in self.streams.values().filter(|s| !s.pending && s.remaining > 0) {
            owes[s.producer] = true;
        }
        owes
    }
}

mod helpers;
mod pace;
mod rates;
mod relay;
mod segments;

#[cfg(test)]
mod tests;
