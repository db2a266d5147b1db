//! Deterministic simulation: the real [`Transfer`] (the scheduler and the
//! rules around it) against simulated producers, with a simulated clock,
//! no sockets and no sleeps.
//!
//! Each simulated server has a speed (blocks per second) shared equally by
//! its streams that have blocks to send (a virtual pair is two streams on one
//! server), a one-way delay for control messages and blocks, and speed
//! changes at given times. Servers keep their streams by ddftpd's own rules
//! ([`Streams`]). Faults: a server that fails (its connections drop), one
//! that stalls (stays connected, sends nothing), one that sends a block that
//! fails verification; and a server that comes back (a producer of it
//! joins the running transfer).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ddftp_proto::streams::{Next, Stopped, Streams};
use ddftp_proto::Direction;

use crate::scheduler::{Action, StreamId};
use crate::transfer::{self, BlockRun, Event, Transfer};

pub mod group;

/// One simulated mirror.
#[derive(Debug, Clone)]
pub struct SimServer {
    /// Blocks per second.
    pub speed: f64,
    /// Producer streams on this server: 1, or 2 for a virtual pair.
    pub streams: usize,
}

/// A speed change: at `at` seconds, server `server` runs at `speed`.
#[derive(Debug, Clone)]
pub struct SpeedChange {
    pub at: f64,
    pub server: usize,
    pub speed: f64,
}

/// What goes wrong with a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Its connections drop (the process died, the link went down).
    Fail,
    /// It stays connected and sends nothing (a hung process, a dead route).
    Stall,
    /// Its next block fails verification.
    Corrupt,
    /// It answers again (a restarted server, a link back up): a new
    /// producer of it joins the running transfer, as `ddftp get`'s retries
    /// make one.
    Rejoin,
}

/// At `at` seconds, `kind` happens to server `server`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub at: f64,
    pub server: usize,
    pub kind: FaultKind,
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimSpec {
    pub blocks: u64,
    pub servers: Vec<SimServer>,
    pub changes: Vec<SpeedChange>,
    pub faults: Vec<Fault>,
    /// One-way delay between consumer and every server, seconds.
    pub one_way_delay: f64,
    pub config: transfer::Config,
}

/// What happened.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SimReport {
    pub blocks: u64,
    pub makespan: f64,
    /// Time if every server's capacity were used from t = 0 to the end, plus
    /// one round trip (the first block cannot arrive sooner). A server
    /// that fails, stalls or sends a corrupt block has none from then on.
    pub ideal: f64,
    pub efficiency: f64,
    pub starts: u64,
    pub extends: u64,
    pub ends: u64,
    pub duplicate_blocks: u64,
    /// Blocks delivered by each server (a corrupt one not counted).
    pub server_blocks: Vec<u64>,
    /// Each server's share of the blocks and of the total capacity (integrated
    /// over the run).
    pub server_share: Vec<f64>,
    pub capacity_share: Vec<f64>,
    /// Servers dropped, with when and why.
    pub dropped: Vec<SimDrop>,
    pub completed: bool,
}

/// A server's producer the transfer dropped.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SimDrop {
    pub at: f64,
    pub server: usize,
    pub why: String,
}

/// Builds the producer slots for `k` servers as `ddftp get` does: one stream
/// each, and a virtual pair (two streams) on the last server when `k` is odd.
pub fn servers_like_get(speeds: &[f64]) -> Vec<SimServer> {
    let k = speeds.len();
    speeds
        .iter()
        .enumerate()
        .map(|(i, &speed)| SimServer { speed, streams: if k % 2 == 1 && i == k - 1 { 2 } else { 1 } })
        .collect()
}

#[derive(Debug)]
enum ToClient {
    Block {
        stream: StreamId,
        block: u64,
        dir: Direction,
    },
    Corrupt {
        block: u64,
    },
    Stopped(Stopped),
    /// The server refused a request (it broke the stream rules).
    Refused(String),
}

#[derive(Debug, Default)]
struct SimProducer {
    streams: Streams<()>,
    /// (arrival time, message), in order.
    inbox: VecDeque<(f64, Action)>,
    outbox: VecDeque<(f64, ToClient)>,
    /// Dropped by the consumer, or its server failed: gone for good.
    gone: bool,
}

impl SimProducer {
    fn apply(&mut self, a: Action, now: f64, delay: f64) {
        let reply = match a {
            Action::Start { stream, first, last, dir, .. } => match self.streams.start(stream, first, last, dir, ()) {
                Ok(ended) => ended.map(ToClient::Stopped),
                Err(full) => Some(ToClient::Refused(full.to_string())),
            },
            Action::Extend { stream, last, .. } => {
                self.streams.find_mut(stream).for_each(|s| s.cursor.set_last(last));
                None
            }
            Action::End { stream, .. } => self.streams.end(stream).map(ToClient::Stopped),
        };
        if let Some(r) = reply {
            self.outbox.push_back((now + delay, r));
        }
        // Like ddftpd, a stream at its `last` with a `Start` behind it ends
        // at once, whatever the link's rate.
        while self.streams.has_work() && self.streams.running().is_some_and(|s| s.cursor.finished()) {
            if let Next::Stopped(s) = self.streams.step() {
                self.outbox.push_back((now + delay, ToClient::Stopped(s)));
            }
        }
    }

    /// Sends one block (and any `Stopped` before it); false if it had none.
    fn send_one(&mut self, now: f64, delay: f64, corrupt: &mut bool) -> bool {
        loop {
            match self.streams.step() {
                Next::Block { stream, block } => {
                    let dir = self.streams.running().expect("it sent a block").cursor.dir();
                    let msg = if std::mem::take(corrupt) {
                        ToClient::Corrupt { block }
                    } else {
                        ToClient::Block { stream, block, dir }
                    };
                    self.outbox.push_back((now + delay, msg));
                    return true;
                }
                Next::Stopped(s) => self.outbox.push_back((now + delay, ToClient::Stopped(s))),
                Next::Wait => return false,
            }
        }
    }
}

/// Per-server state of the run.
struct ServerState {
    speed: f64,
    /// Failed or stalled: sends nothing more, counts no capacity.
    down: bool,
    /// Its next block is to fail verification.
    corrupt_next: bool,
    budget: f64,
    rr: usize,
    blocks: u64,
    capacity: f64,
}

/// The simulated world of one run: the consumer's transfer, its
/// producers and the servers behind them, and what is still to happen.
struct World {
    origin: Instant,
    /// Server of each producer.
    owner: Vec<usize>,
    servers: Vec<ServerState>,
    prods: Vec<SimProducer>,
    tr: Transfer,
    changes: VecDeque<SpeedChange>,
    faults: VecDeque<Fault>,
    dropped: Vec<SimDrop>,
    delay: f64,
}

/// Runs the transfer against the simulated servers from `origin` (any
/// instant: the simulated clock is `origin` plus simulated seconds) until
/// every block is in, nothing can finish it, or a generous limit passes.
pub fn run(spec: &SimSpec, origin: Instant) -> SimReport {
    let mut w = World::new(spec, origin);
    let max_speed = w.servers.iter().map(|s| s.speed).chain(w.changes.iter().map(|c| c.speed)).fold(1e-9f64, f64::max);
    let dt = 1.0 / max_speed;
    let mut t = 0.0;
    let total_speed: f64 = w.servers.iter().map(|s| s.speed).sum();
    let stall = spec.config.stall_timeout.as_secs_f64();
    let limit = 1e4 * (spec.blocks as f64 / total_speed.max(1e-9) + w.delay + 1.0) + 10.0 * stall;
    let rejoins = |f: &VecDeque<Fault>| f.iter().any(|f| f.kind == FaultKind::Rejoin);
    while !w.tr.is_done() && (!w.tr.is_stuck() || rejoins(&w.faults)) && t < limit {
        w.happen(t);
        w.consumer(t);
        if w.tr.is_done() {
            break;
        }
        w.serve(t, dt);
        t += dt;
    }
    w.report(spec, t)
}

impl World {
    fn new(spec: &SimSpec, origin: Instant) -> World {
        let owner: Vec<usize> =
            spec.servers.iter().enumerate().flat_map(|(i, s)| std::iter::repeat_n(i, s.streams)).collect();
        let servers: Vec<ServerState> = spec
            .servers
            .iter()
            .map(|s| ServerState {
                speed: s.speed,
                down: false,
                corrupt_next: false,
                budget: 0.0,
                rr: 0,
                blocks: 0,
                capacity: 0.0,
            })
            .collect();
        let mut changes = spec.changes.clone();
        changes.sort_by(|a, b| a.at.total_cmp(&b.at));
        let mut faults = spec.faults.clone();
        faults.sort_by(|a, b| a.at.total_cmp(&b.at));
        let prods = owner.iter().map(|_| SimProducer::default()).collect();
        let tr = Transfer::fresh(spec.blocks, &owner, servers.len(), &spec.config, origin);
        World {
            origin,
            owner,
            servers,
            prods,
            tr,
            changes: changes.into(),
            faults: faults.into(),
            dropped: vec![],
            delay: spec.one_way_delay,
        }
    }

    fn at(&self, t: f64) -> Instant {
        self.origin + Duration::from_secs_f64(t)
    }

    /// The speed changes and faults due by `t`.
    fn happen(&mut self, t: f64) {
        while self.changes.front().is_some_and(|c| c.at <= t) {
            let c = self.changes.pop_front().expect("front");
            self.servers[c.server].speed = c.speed;
        }
        while self.faults.front().is_some_and(|f| f.at <= t) {
            let f = self.faults.pop_front().expect("front");
            match f.kind {
                FaultKind::Fail | FaultKind::Stall => self.servers[f.server].down = true,
                FaultKind::Corrupt => self.servers[f.server].corrupt_next = true,
                FaultKind::Rejoin => {
                    self.servers[f.server].down = false;
                    self.owner.push(f.server);
                    self.prods.push(SimProducer::default());
                    let p = self.tr.handle_join(f.server, self.at(t));
                    debug_assert_eq!(p + 1, self.prods.len());
                }
            }
            if f.kind == FaultKind::Fail {
                // Its connections drop: the consumer sees it a one-way
                // delay later.
                for p in (0..self.prods.len()).filter(|&p| self.owner[p] == f.server) {
                    self.prods[p].outbox.clear();
                    let reset = ToClient::Refused("connection reset by peer".into());
                    self.prods[p].outbox.push_back((t + self.delay, reset));
                }
            }
        }
    }

    /// The consumer: takes in what arrived by `t`, sends what the transfer
    /// wants.
    fn consumer(&mut self, t: f64) {
        let now = self.at(t);
        if self.tr.poll_timeout().is_some_and(|d| d <= now) {
            self.tr.handle_timeout(now);
        }
        for p in 0..self.prods.len() {
            while self.prods[p].outbox.front().is_some_and(|(when, _)| *when <= t) {
                match self.prods[p].outbox.pop_front().expect("front").1 {
                    ToClient::Block { stream, block, dir } => {
                        let run = BlockRun { stream, first: block, count: 1, bytes: 1, dir };
                        if !self.tr.is_dropped(p) {
                            self.servers[self.owner[p]].blocks += 1;
                        }
                        self.tr.handle_blocks(p, run, now);
                    }
                    ToClient::Corrupt { block } => self.tr.handle_corrupt(p, block, now),
                    ToClient::Stopped(s) => self.tr.handle_stopped(p, s.stream, s.sent, now),
                    ToClient::Refused(why) => self.tr.handle_failed(p, why, now),
                }
            }
        }
        while let Some(a) = self.tr.poll_action() {
            let p = match &a {
                Action::Start { producer, .. } | Action::Extend { producer, .. } | Action::End { producer, .. } => {
                    *producer
                }
            };
            self.prods[p].inbox.push_back((t + self.delay, a));
        }
        while let Some(Event::Dropped { producer, mirror, why }) = self.tr.poll_event() {
            self.prods[producer].gone = true;
            self.prods[producer].inbox.clear();
            self.prods[producer].outbox.clear();
            self.dropped.push(SimDrop { at: t, server: mirror, why: why.to_string() });
        }
    }

    /// The servers: apply control messages due by `t`, then send this
    /// step's blocks (`dt` seconds of each one's speed).
    fn serve(&mut self, t: f64, dt: f64) {
        let delay = self.delay;
        for (p, prod) in self.prods.iter_mut().enumerate() {
            while prod.inbox.front().is_some_and(|(when, _)| *when <= t) {
                let a = prod.inbox.pop_front().expect("front").1;
                if !self.servers[self.owner[p]].down {
                    prod.apply(a, t, delay);
                }
            }
        }
        for (srv, s) in self.servers.iter_mut().enumerate() {
            if s.down {
                continue;
            }
            s.capacity += s.speed * dt;
            s.budget += s.speed * dt;
            let mine: Vec<usize> =
                (0..self.prods.len()).filter(|&p| self.owner[p] == srv && !self.prods[p].gone).collect();
            let mut sent_any = true;
            while s.budget >= 1.0 && sent_any && !mine.is_empty() {
                sent_any = false;
                for _ in 0..mine.len() {
                    s.rr = (s.rr + 1) % mine.len();
                    let corrupt = s.corrupt_next;
                    if self.prods[mine[s.rr]].send_one(t, delay, &mut s.corrupt_next) {
                        // A mirror whose data fails verification is of no
                        // more use: its capacity ends there.
                        s.down |= corrupt;
                        s.budget -= 1.0;
                        sent_any = true;
                        break;
                    }
                }
            }
            if !sent_any || mine.is_empty() {
                s.budget = s.budget.min(1.0);
            }
        }
    }

    /// The run's report, ended at `makespan`.
    fn report(self, spec: &SimSpec, makespan: f64) -> SimReport {
        let ideal = ideal_time(spec) + 2.0 * self.delay;
        let total: u64 = self.servers.iter().map(|s| s.blocks).sum();
        let cap_total: f64 = self.servers.iter().map(|s| s.capacity).sum();
        let stats = self.tr.stats().clone();
        SimReport {
            blocks: spec.blocks,
            makespan,
            ideal,
            efficiency: match self.tr.is_done() {
                true if makespan > 0.0 => ideal / makespan,
                true => 1.0,
                false => 0.0,
            },
            starts: stats.starts,
            extends: stats.extends,
            ends: stats.ends,
            duplicate_blocks: stats.duplicate_blocks,
            server_share: self.servers.iter().map(|s| s.blocks as f64 / total.max(1) as f64).collect(),
            capacity_share: self.servers.iter().map(|s| s.capacity / cap_total.max(1e-9)).collect(),
            server_blocks: self.servers.iter().map(|s| s.blocks).collect(),
            completed: self.tr.is_done(),
            dropped: self.dropped,
        }
    }
}

/// Time for the total capacity (with its changes and faults) to reach
/// `blocks`.
pub fn ideal_time(spec: &SimSpec) -> f64 {
    // What each server is set to run at, and whether it is up: a server
    // that is down counts nothing until it rejoins.
    let mut set: Vec<f64> = spec.servers.iter().map(|s| s.speed).collect();
    let mut up = vec![true; set.len()];
    #[derive(Clone, Copy)]
    enum Step {
        Speed(f64),
        Down,
        Up,
    }
    let mut steps: Vec<(f64, usize, Step)> =
        spec.changes.iter().map(|c| (c.at, c.server, Step::Speed(c.speed))).collect();
    steps.extend(
        spec.faults.iter().map(|f| (f.at, f.server, if f.kind == FaultKind::Rejoin { Step::Up } else { Step::Down })),
    );
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let rate = |set: &[f64], up: &[bool]| set.iter().zip(up).filter(|(_, &u)| u).map(|(s, _)| s).sum::<f64>();
    let (mut t, mut left) = (0.0, spec.blocks as f64);
    for (when, server, step) in steps {
        let r = rate(&set, &up);
        let span = (when - t).max(0.0);
        if r * span >= left {
            break;
        }
        left -= r * span;
        t = when.max(t);
        match step {
            Step::Speed(v) => set[server] = v,
            Step::Down => up[server] = false,
            Step::Up => up[server] = true,
        }
    }
    let r = rate(&set, &up);
    // No capacity left: no time would do.
    if r > 0.0 {
        t + left / r
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests;
