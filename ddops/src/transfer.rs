//! A transfer: the scheduler plus the rules around it, as one state machine
//! with no I/O and no clock (quinn-proto's shape). Whoever drives it (the
//! `get` and `archive` event loop, the simulator) feeds it what happened
//! with `handle_*`, carries out what `poll_action` asks, reports what
//! `poll_event` says, and calls `handle_timeout` once `poll_timeout` is
//! reached.
//!
//! The rules it adds to the scheduler:
//! - **stalls**: a producer that owes items and delivers none for
//!   `stall_timeout` is dropped; the others take its range over. One that
//!   says it waits for its own source (another receiver, fetching the
//!   blocks it passes on) is not stalled for up to [`WAITING_LIMIT`]
//!   stall timeouts: each hop above it sees its own source stall within
//!   one and fetches elsewhere, so only the receiver below a lost one
//!   drops it, not every receiver below that.
//! - **failures and violations**: a producer whose connection failed, or
//!   that sent what it was not asked for, is dropped.
//! - **corruption**: an item that fails verification drops every producer
//!   of its mirror (its copy is bad); the item is fetched elsewhere.
//! - **first grants**: before a producer's rate is known its grant is
//!   bounded in bytes, and covers two round trips at an assumed rate.
//! - **joins**: a mirror that becomes ready late adds producers at once.

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use ddftp_proto::Direction;

use crate::completed::Completed;
use crate::scheduler::{self, Action, ProducerId, Scheduler, Stats, StreamId, Violation};

/// Index of a mirror (a source that may have several producers).
pub type MirrorId = usize;

/// Bytes a stream is granted before its producer's rate is known: bounded
/// in bytes, it is a few round trips of a fast link and little of a slow
/// one's time, whatever the block size (64 blocks of 256 KiB were 1.7 s of
/// an 80 Mbit/s mirror's time that a short transfer's end waited for).
pub const FIRST_GRANT: u64 = 4 << 20;

/// Bytes per second a producer is assumed to move until measured (1
/// Gbit/s), for sizing first grants over long round trips: at 200 ms, two
/// round trips of a 40 MB/s link are 16 MB, and 4 MiB grants would leave
/// such a link idle for most of its first round trips.
pub const FIRST_RATE: f64 = 125e6;

/// How many stall timeouts a producer that says it is waiting for its
/// own source may deliver nothing (a tree's hops each take at most one to
/// replace a lost source, and a tree is at most a few hops deep).
pub const WAITING_LIMIT: u32 = 6;

/// Tuning of a transfer.
#[derive(Debug, Clone)]
pub struct Config {
    pub scheduler: scheduler::Config,
    /// Bytes per item, when items are blocks of data: first grants are
    /// then sized in bytes ([`FIRST_GRANT`], [`FIRST_RATE`]). `None` for
    /// other work (the scheduler's windows as configured).
    pub item_bytes: Option<u64>,
    /// A producer owing items that delivers none for this long is dropped.
    pub stall_timeout: Duration,
}

impl Default for Config {
    /// The scheduler's defaults, windows in items, 5 s stalls.
    fn default() -> Self {
        Config { scheduler: scheduler::Config::default(), item_bytes: None, stall_timeout: Duration::from_secs(5) }
    }
}

impl Config {
    /// As `ddftp get` runs: blocks of `block_size` bytes.
    pub fn for_blocks(block_size: u64) -> Self {
        Config { item_bytes: Some(block_size), ..Config::default() }
    }

    /// The scheduler's configuration with first grants sized in bytes.
    fn scheduler(&self) -> scheduler::Config {
        let mut cfg = self.scheduler.clone();
        if let Some(bytes) = self.item_bytes.filter(|&b| b > 0) {
            let most = cfg.initial_window.max(cfg.min_window);
            cfg.initial_window = (FIRST_GRANT / bytes).clamp(cfg.min_window, most);
            cfg.max_unmeasured_window = most;
            cfg.first_rate = FIRST_RATE / bytes as f64;
        }
        cfg
    }
}

/// Consecutive items of one stream, delivered together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRun {
    pub stream: StreamId,
    /// First item in stream order.
    pub first: u64,
    pub count: u64,
    /// Payload bytes (for the per-mirror accounting).
    pub bytes: u64,
    pub dir: Direction,
}

impl BlockRun {
    /// Lowest and highest item.
    pub fn bounds(&self) -> (u64, u64) {
        match self.dir {
            Direction::Increment => (self.first, self.first + self.count - 1),
            Direction::Decrement => (self.first + 1 - self.count, self.first),
        }
    }
}

/// Why a producer was dropped.
#[derive(Debug, Clone, PartialEq)]
pub enum DropReason {
    /// Its connection failed, or its driver gave up on it.
    Failed(String),
    /// It sent what it was not asked for.
    Violation(Violation),
    /// It owed items and sent none for this long.
    Stalled(Duration),
    /// An item it sent failed verification.
    Corrupt { item: u64 },
    /// Another producer of its mirror sent an item that failed verification.
    MirrorCorrupt { on: ProducerId },
    /// Its mirror sent every item of a range that failed verification.
    RangeCorrupt { first: u64, last: u64 },
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DropReason::Failed(why) => f.write_str(why),
            DropReason::Violation(v) => write!(f, "{v}"),
            DropReason::Stalled(t) => write!(f, "stalled: no data for {:.1} s", t.as_secs_f64()),
            DropReason::Corrupt { item } => write!(
                f,
                "block {item} failed verification (corrupt or changed data); it is fetched again from another mirror"
            ),
            DropReason::MirrorCorrupt { on } => write!(f, "its mirror sent a corrupt block on stream {on}"),
            DropReason::RangeCorrupt { first, last } => write!(
                f,
                "blocks {first}-{last} it sent failed verification as one piece; they are fetched again from another mirror"
            ),
        }
    }
}

/// What the driver should report.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `producer` (of `mirror`) is dropped: its connection should close.
    Dropped { producer: ProducerId, mirror: MirrorId, why: DropReason },
}

#[derive(Debug)]
struct Producer {
    mirror: MirrorId,
    dropped: bool,
    /// When it last delivered, or was last seen owing nothing, or said it
    /// waits (within [`WAITING_LIMIT`]).
    last_progress: Instant,
    /// Since when it has said it waits for its own source, delivering
    /// nothing.
    waiting_since: Option<Instant>,
    items: u64,
    bytes: u64,
}

impl Producer {
    fn new(mirror: MirrorId, now: Instant) -> Producer {
        Producer { mirror, dropped: false, last_progress: now, waiting_since: None, items: 0, bytes: 0 }
    }
}

/// One transfer's state. See the module docs.
#[derive(Debug)]
pub struct Transfer {
    sched: Scheduler,
    completed: Completed,
    producers: Vec<Producer>,
    /// Bytes each mirror delivered.
    mirror_bytes: Vec<u64>,
    /// Mirrors whose data failed verification.
    corrupt: Vec<bool>,
    stall_timeout: Duration,
    events: VecDeque<Event>,
    /// Items `0..limit` may be handed out (a sliding window); the rest
    /// wait for `handle_window`.
    limit: u64,
}

impl Transfer {
    /// A transfer of the items `completed` does not hold yet (all of them
    /// for a fresh one), by producers of the given mirrors (`mirrors` known
    /// so far; `producers[i]` is producer i's mirror). Pairs form in
    /// producer order, (0, 1), (2, 3), ...
    pub fn new(completed: Completed, producers: &[MirrorId], mirrors: usize, cfg: &Config, now: Instant) -> Self {
        let sc = cfg.scheduler();
        let sched = if completed.prefix() == 0 && completed.ranges().is_empty() {
            Scheduler::new(0..completed.len(), producers.len(), sc, now)
        } else {
            Scheduler::resume(&completed.missing(), producers.len(), sc, now)
        };
        let mirrors = mirrors.max(producers.iter().map(|m| m + 1).max().unwrap_or(0));
        Transfer {
            sched,
            completed,
            producers: producers.iter().map(|&mirror| Producer::new(mirror, now)).collect(),
            mirror_bytes: vec![0; mirrors],
            corrupt: vec![false; mirrors],
            stall_timeout: cfg.stall_timeout,
            events: VecDeque::new(),
            limit: u64::MAX,
        }
    }

    /// A transfer as [`Transfer::new`], its items shared out by
    /// [`Scheduler::with_homes`] (`get --share`): `homes`, and the number
    /// of items every share but the last is a multiple of.
    pub fn with_homes(
        completed: Completed,
        producers: &[MirrorId],
        mirrors: usize,
        homes: (&[scheduler::Home], u64),
        cfg: &Config,
        now: Instant,
    ) -> Self {
        let mut t = Transfer::new(Completed::new(0), producers, mirrors, cfg, now);
        t.sched =
            Scheduler::with_homes(&completed.missing(), completed.len(), homes, producers.len(), cfg.scheduler(), now);
        t.completed = completed;
        t
    }

    /// A fresh transfer of items `0..items` of which only `0..window` are
    /// handed out until [`handle_window`](Self::handle_window) moves the
    /// limit: output written in order with bounded memory (`-o -`). The
    /// pairs work inside the window as over a whole file.
    pub fn windowed(
        items: u64,
        window: u64,
        producers: &[MirrorId],
        mirrors: usize,
        cfg: &Config,
        now: Instant,
    ) -> Self {
        let first = window.min(items);
        let mut t = Transfer::new(Completed::new(first), producers, mirrors, cfg, now);
        t.completed = Completed::new(items);
        t.limit = first;
        t
    }

    /// Items below `limit` may now be handed out (it never moves back).
    pub fn handle_window(&mut self, limit: u64, now: Instant) {
        let limit = limit.min(self.completed.len());
        if limit <= self.limit {
            return;
        }
        self.settle(now);
        self.sched.reopen(self.limit..limit, now);
        self.limit = limit;
        self.settle(now);
    }

    /// Items `0..window_limit()` have been handed out or may be.
    pub fn window_limit(&self) -> u64 {
        self.limit.min(self.completed.len())
    }

    /// A fresh transfer of items `0..items`.
    pub fn fresh(items: u64, producers: &[MirrorId], mirrors: usize, cfg: &Config, now: Instant) -> Self {
        Transfer::new(Completed::new(items), producers, mirrors, cfg, now)
    }

    // ----- inputs -----

    /// `producer`'s round trip, measured by its greeting.
    pub fn handle_round_trip(&mut self, producer: ProducerId, rtt: Duration, now: Instant) {
        self.sched.on_round_trip(producer, rtt, now);
    }

    /// `producer` can only send on from where it is (see
    /// [`Scheduler::set_forward_only`]).
    pub fn set_forward_only(&mut self, producer: ProducerId) {
        self.sched.set_forward_only(producer);
    }

    /// Bytes of an item not yet whole arrived from `producer`: it is not
    /// stalled, however long one item takes over its link (a thin link, a
    /// large block, a receiver passing blocks to hundreds of others).
    pub fn handle_bytes(&mut self, producer: ProducerId, now: Instant) {
        if let Some(p) = self.producers.get_mut(producer).filter(|p| !p.dropped) {
            p.last_progress = now;
            p.waiting_since = None;
        }
    }

    /// `producer` says its next item is not there yet: it waits for its
    /// own source (a receiver passing on blocks as it verifies them). It
    /// is not stalled while it says so, for up to [`WAITING_LIMIT`] stall
    /// timeouts without an item; then it is, as any producer.
    pub fn handle_waiting(&mut self, producer: ProducerId, now: Instant) {
        let limit = self.stall_timeout * WAITING_LIMIT;
        if let Some(p) = self.producers.get_mut(producer).filter(|p| !p.dropped) {
            let since = *p.waiting_since.get_or_insert(now);
            if now.saturating_duration_since(since) < limit {
                p.last_progress = now;
            }
        }
    }

    /// A run of items arrived (verified) from `producer`; returns the new
    /// complete prefix if it grew.
    pub fn handle_blocks(&mut self, producer: ProducerId, run: BlockRun, now: Instant) -> Option<u64> {
        if self.producers[producer].dropped {
            return None;
        }
        self.settle(now);
        match self.sched.on_blocks(producer, run.stream, run.first, run.count, now) {
            Ok(()) => {
                let p = &mut self.producers[producer];
                p.last_progress = now;
                p.waiting_since = None;
                p.items += run.count;
                p.bytes += run.bytes;
                self.mirror_bytes[p.mirror] += run.bytes;
                let (lo, hi) = run.bounds();
                let grew = self.completed.mark(lo, hi);
                self.settle(now);
                grew
            }
            Err(v) => {
                self.drop_producer(producer, DropReason::Violation(v), now);
                None
            }
        }
    }

    /// `producer` says `stream` ended after `sent` items.
    pub fn handle_stopped(&mut self, producer: ProducerId, stream: StreamId, sent: u64, now: Instant) {
        if self.producers[producer].dropped {
            return;
        }
        self.settle(now);
        if let Err(v) = self.sched.on_stopped(producer, stream, sent, now) {
            self.drop_producer(producer, DropReason::Violation(v), now);
        }
        self.settle(now);
    }

    /// `producer`'s connection failed.
    pub fn handle_failed(&mut self, producer: ProducerId, why: String, now: Instant) {
        self.drop_producer(producer, DropReason::Failed(why), now);
    }

    /// `item` from `producer` failed verification: every producer of that
    /// mirror goes.
    pub fn handle_corrupt(&mut self, producer: ProducerId, item: u64, now: Instant) {
        let mirror = self.producers[producer].mirror;
        self.corrupt[mirror] = true;
        self.drop_producer(producer, DropReason::Corrupt { item }, now);
        for p in 0..self.producers.len() {
            if self.producers[p].mirror == mirror {
                self.drop_producer(p, DropReason::MirrorCorrupt { on: producer }, now);
            }
        }
    }

    /// Items `lo..=hi`, all delivered, failed a check that spans them (a
    /// piece larger than an item, verified once whole): they are fetched
    /// again. `culprit`, when every one of them came from one mirror, is
    /// that mirror: its producers go, as for [`handle_corrupt`](Self::handle_corrupt).
    pub fn handle_bad_range(&mut self, lo: u64, hi: u64, culprit: Option<MirrorId>, now: Instant) {
        self.settle(now);
        self.completed.unmark(lo, hi);
        self.sched.reopen(lo..hi + 1, now);
        if let Some(mirror) = culprit {
            self.handle_bad_sender(mirror, lo, hi, now);
        }
        self.settle(now);
    }

    /// `mirror` sent items of `lo..=hi` that proved wrong (found once the
    /// range was fetched again and checked): every producer of it goes.
    pub fn handle_bad_sender(&mut self, mirror: MirrorId, lo: u64, hi: u64, now: Instant) {
        self.corrupt[mirror] = true;
        for p in 0..self.producers.len() {
            if self.producers[p].mirror == mirror {
                self.drop_producer(p, DropReason::RangeCorrupt { first: lo, last: hi }, now);
            }
        }
    }

    /// A mirror that was not known when the transfer began.
    pub fn add_mirror(&mut self) -> MirrorId {
        self.mirror_bytes.push(0);
        self.corrupt.push(false);
        self.mirror_bytes.len() - 1
    }

    /// A producer of `mirror` joins; it helps at once.
    pub fn handle_join(&mut self, mirror: MirrorId, now: Instant) -> ProducerId {
        self.settle(now);
        self.producers.push(Producer::new(mirror, now));
        let p = self.sched.add_producer(now);
        debug_assert_eq!(p + 1, self.producers.len());
        self.settle(now);
        p
    }

    /// Time passed: drops the producers that stalled, and lets the
    /// scheduler look at silent work again.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.sched.poll_wake().is_some_and(|w| w <= now) {
            self.sched.on_wake(now);
        }
        // Owing as things stood: a producer given work by another's drop
        // below starts its clock now.
        for (p, owes) in self.sched.owing().into_iter().enumerate() {
            let pr = &self.producers[p];
            if pr.dropped {
                continue;
            }
            if !owes {
                self.producers[p].last_progress = now;
                self.producers[p].waiting_since = None;
            } else if now.saturating_duration_since(pr.last_progress) >= self.stall_timeout {
                // How long nothing came: since it began to wait, if it said so.
                let silent = pr.waiting_since.map_or(self.stall_timeout, |w| now.saturating_duration_since(w));
                self.drop_producer(p, DropReason::Stalled(silent.max(self.stall_timeout)), now);
            }
        }
    }

    // ----- outputs -----

    /// The next command for a producer.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.sched.poll_action()
    }

    /// The next thing to report.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When `handle_timeout` must be called next (a producer owing items
    /// could stall by then, or the scheduler wants to look again).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let owing = self.sched.owing();
        let stall = (0..self.producers.len())
            .filter(|&p| !self.producers[p].dropped && owing[p])
            .map(|p| self.producers[p].last_progress + self.stall_timeout)
            .min();
        match (stall, self.sched.poll_wake()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn is_done(&self) -> bool {
        self.sched.is_done() && self.window_limit() == self.completed.len()
    }

    /// Items remain and every producer is dropped.
    pub fn is_stuck(&self) -> bool {
        self.sched.is_stuck() || (!self.is_done() && self.producers.iter().all(|p| p.dropped))
    }

    /// Every mirror that took part sent data that failed verification: a
    /// rerun against the same mirrors cannot help.
    pub fn every_mirror_corrupt(&self) -> bool {
        !self.corrupt.is_empty() && self.corrupt.iter().all(|&c| c)
    }

    pub fn completed(&self) -> &Completed {
        &self.completed
    }

    pub fn stats(&self) -> &Stats {
        self.sched.stats()
    }

    /// Items each producer delivered (the paper's contributions).
    pub fn contributions(&self) -> Vec<u64> {
        self.sched.contributions()
    }

    /// What the other receivers are to be told this receiver's mirrors
    /// fetch of another's share ([`Scheduler::poll_told`]).
    pub fn poll_told(&mut self) -> Option<scheduler::Told> {
        self.sched.poll_told()
    }

    /// The receiver of share `home` says its mirrors fetch `items` of
    /// another's share, coming in `dir` ([`Scheduler::on_told`]).
    pub fn handle_told(&mut self, home: usize, items: std::ops::Range<u64>, dir: Direction, now: Instant) {
        self.sched.on_told(home, items, dir, now);
    }

    /// How the shares are held (`with_homes`), for the debug log.
    pub fn pacing(&self) -> Option<String> {
        self.sched.pacing()
    }

    pub fn producer_mirror(&self, p: ProducerId) -> MirrorId {
        self.producers[p].mirror
    }

    /// Items and bytes `p` delivered.
    pub fn producer_delivered(&self, p: ProducerId) -> (u64, u64) {
        (self.producers[p].items, self.producers[p].bytes)
    }

    pub fn producers(&self) -> usize {
        self.producers.len()
    }

    /// Bytes each mirror delivered.
    pub fn mirror_bytes(&self) -> &[u64] {
        &self.mirror_bytes
    }

    pub fn is_dropped(&self, p: ProducerId) -> bool {
        self.producers[p].dropped
    }

    // ----- internals -----

    fn drop_producer(&mut self, producer: ProducerId, why: DropReason, now: Instant) {
        let p = &mut self.producers[producer];
        if p.dropped {
            return;
        }
        p.dropped = true;
        let mirror = p.mirror;
        self.settle(now);
        self.sched.on_failed(producer, now);
        self.events.push_back(Event::Dropped { producer, mirror, why });
        self.settle(now);
    }

    /// A producer that owes nothing cannot stall: its clock starts when it
    /// is next asked for items. Called before and after every change.
    fn settle(&mut self, now: Instant) {
        for (p, owes) in self.producers.iter_mut().zip(self.sched.owing()) {
            if !p.dropped && !owes {
                p.last_progress = now;
                p.waiting_since = None;
            }
        }
    }
}

#[cfg(test)]
mod tests;
