//! Deterministic simulation: the real [`Scheduler`] against simulated
//! producers, with a simulated clock, no sockets and no sleeps.
//!
//! Each simulated server has a speed (blocks per second) shared equally by
//! its streams that have blocks to send (a virtual pair is two streams on one
//! server), a one-way delay for control messages and blocks, and speed
//! changes at given times. Servers obey `Start`/`Extend`/`End` exactly as
//! `ddftpd` does: a `Start` queues behind the running stream, a stream stops
//! at its `last` and reports `Stopped`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ddftp_proto::Cursor;

use crate::scheduler::{Action, Config, Scheduler, StreamId};

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

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimSpec {
    pub blocks: u64,
    pub servers: Vec<SimServer>,
    pub changes: Vec<SpeedChange>,
    /// One-way delay between consumer and every server, seconds.
    pub one_way_delay: f64,
    pub config: Config,
}

/// What happened.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SimReport {
    pub blocks: u64,
    pub makespan: f64,
    /// Time if every server's capacity were used from t = 0 to the end, plus
    /// one round trip (the first block cannot arrive sooner).
    pub ideal: f64,
    pub efficiency: f64,
    pub starts: u64,
    pub extends: u64,
    pub ends: u64,
    pub duplicate_blocks: u64,
    /// Blocks delivered by each server.
    pub server_blocks: Vec<u64>,
    /// Each server's share of the blocks and of the total capacity (integrated
    /// over the run).
    pub server_share: Vec<f64>,
    pub capacity_share: Vec<f64>,
    pub completed: bool,
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
struct SimStream {
    id: StreamId,
    cursor: Cursor,
}

#[derive(Debug)]
enum ToClient {
    Block { stream: StreamId, block: u64 },
    Stopped { stream: StreamId, sent: u64 },
}

#[derive(Debug, Default)]
struct SimProducer {
    running: Option<SimStream>,
    queued: VecDeque<SimStream>,
    /// (arrival time, message), in order.
    inbox: VecDeque<(f64, Action)>,
    outbox: VecDeque<(f64, ToClient)>,
}

impl SimProducer {
    fn has_work(&self) -> bool {
        self.running.as_ref().is_some_and(|s| !s.cursor.finished())
    }

    fn apply(&mut self, a: Action, now: f64, delay: f64) {
        match a {
            Action::Start { stream, first, last, dir, .. } => {
                self.queued.push_back(SimStream { id: stream, cursor: Cursor::new(first, last, dir) })
            }
            Action::Extend { stream, last, .. } => {
                for s in self.running.iter_mut().chain(self.queued.iter_mut()) {
                    if s.id == stream {
                        s.cursor.set_last(last);
                    }
                }
            }
            Action::End { stream, .. } => {
                if self.running.as_ref().is_some_and(|s| s.id == stream) {
                    let s = self.running.take().expect("checked");
                    self.outbox.push_back((now + delay, ToClient::Stopped { stream: s.id, sent: s.cursor.sent() }));
                } else if let Some(i) = self.queued.iter().position(|s| s.id == stream) {
                    self.queued.remove(i);
                    self.outbox.push_back((now + delay, ToClient::Stopped { stream, sent: 0 }));
                }
            }
        }
        self.advance(now, delay);
    }

    /// A stream paused at its `last` ends when a `Start` waits behind it.
    fn advance(&mut self, now: f64, delay: f64) {
        if let Some(s) = &self.running {
            if !s.cursor.finished() || self.queued.is_empty() {
                return;
            }
            self.outbox.push_back((now + delay, ToClient::Stopped { stream: s.id, sent: s.cursor.sent() }));
            self.running = None;
        }
        self.running = self.queued.pop_front();
    }

    fn send_one(&mut self, now: f64, delay: f64) {
        let s = self.running.as_mut().expect("has work");
        let b = s.cursor.take().expect("has work");
        self.outbox.push_back((now + delay, ToClient::Block { stream: s.id, block: b }));
        self.advance(now, delay);
    }
}

/// Runs the scheduler against the simulated servers until every block is in
/// (or a generous time limit passes).
pub fn run(spec: &SimSpec) -> SimReport {
    let t0 = Instant::now();
    let at = |t: f64| t0 + Duration::from_secs_f64(t);
    let owner: Vec<usize> =
        spec.servers.iter().enumerate().flat_map(|(i, s)| std::iter::repeat_n(i, s.streams)).collect();
    let mut speeds: Vec<f64> = spec.servers.iter().map(|s| s.speed).collect();
    let mut changes = spec.changes.clone();
    changes.sort_by(|a, b| a.at.total_cmp(&b.at));
    let mut changes: VecDeque<SpeedChange> = changes.into();
    let mut prods: Vec<SimProducer> = owner.iter().map(|_| SimProducer::default()).collect();
    let mut sched = Scheduler::new(0..spec.blocks, owner.len(), spec.config.clone(), t0);
    let delay = spec.one_way_delay;
    let max_speed = speeds.iter().chain(changes.iter().map(|c| &c.speed)).fold(1e-9f64, |a, &b| a.max(b));
    let dt = 1.0 / max_speed;
    let mut budget = vec![0.0f64; speeds.len()];
    let mut rr = vec![0usize; speeds.len()];
    let mut server_blocks = vec![0u64; speeds.len()];
    let mut capacity = vec![0.0f64; speeds.len()];
    let mut t = 0.0;
    let limit = 1e4 * (spec.blocks as f64 / speeds.iter().sum::<f64>().max(1e-9) + delay + 1.0);
    let mut completed = sched.is_done();
    while !completed && t < limit {
        while changes.front().is_some_and(|c| c.at <= t) {
            let c = changes.pop_front().expect("front");
            speeds[c.server] = c.speed;
        }
        // Consumer: send what the scheduler wants, take in what arrived.
        while let Some(a) = sched.poll_action() {
            let p = match &a {
                Action::Start { producer, .. } | Action::Extend { producer, .. } | Action::End { producer, .. } => {
                    *producer
                }
            };
            prods[p].inbox.push_back((t + delay, a));
        }
        for (p, prod) in prods.iter_mut().enumerate() {
            while prod.outbox.front().is_some_and(|(when, _)| *when <= t) {
                match prod.outbox.pop_front().expect("front").1 {
                    ToClient::Block { stream, block } => {
                        server_blocks[owner[p]] += 1;
                        sched.on_blocks(p, stream, block, 1, at(t)).expect("simulated producers obey");
                    }
                    ToClient::Stopped { stream, sent } => {
                        sched.on_stopped(p, stream, sent, at(t)).expect("simulated producers obey")
                    }
                }
            }
        }
        if sched.is_done() {
            completed = true;
            break;
        }
        // Servers: apply control messages, then send this step's blocks.
        for prod in prods.iter_mut() {
            while prod.inbox.front().is_some_and(|(when, _)| *when <= t) {
                let a = prod.inbox.pop_front().expect("front").1;
                prod.apply(a, t, delay);
            }
        }
        for (srv, &speed) in speeds.iter().enumerate() {
            capacity[srv] += speed * dt;
            let mine: Vec<usize> = (0..prods.len()).filter(|&p| owner[p] == srv).collect();
            budget[srv] += speed * dt;
            let mut sent_any = true;
            while budget[srv] >= 1.0 && sent_any {
                sent_any = false;
                for _ in 0..mine.len() {
                    rr[srv] = (rr[srv] + 1) % mine.len();
                    let p = mine[rr[srv]];
                    if prods[p].has_work() {
                        prods[p].send_one(t, delay);
                        budget[srv] -= 1.0;
                        sent_any = true;
                        break;
                    }
                }
            }
            if !mine.iter().any(|&p| prods[p].has_work()) {
                budget[srv] = budget[srv].min(1.0);
            }
        }
        t += dt;
    }
    let makespan = t;
    let ideal = ideal_time(spec) + 2.0 * delay;
    let total: u64 = server_blocks.iter().sum();
    let cap_total: f64 = capacity.iter().sum();
    let stats = sched.stats().clone();
    SimReport {
        blocks: spec.blocks,
        makespan,
        ideal,
        efficiency: if makespan > 0.0 { ideal / makespan } else { 1.0 },
        starts: stats.starts,
        extends: stats.extends,
        ends: stats.ends,
        duplicate_blocks: stats.duplicate_blocks,
        server_share: server_blocks.iter().map(|&b| b as f64 / total.max(1) as f64).collect(),
        capacity_share: capacity.iter().map(|&c| c / cap_total.max(1e-9)).collect(),
        server_blocks,
        completed,
    }
}

/// Time for the total capacity (with its changes) to reach `blocks`.
pub fn ideal_time(spec: &SimSpec) -> f64 {
    let mut speeds: Vec<f64> = spec.servers.iter().map(|s| s.speed).collect();
    let mut changes = spec.changes.clone();
    changes.sort_by(|a, b| a.at.total_cmp(&b.at));
    let (mut t, mut left) = (0.0, spec.blocks as f64);
    for c in changes {
        let rate: f64 = speeds.iter().sum();
        let span = (c.at - t).max(0.0);
        if rate * span >= left {
            break;
        }
        left -= rate * span;
        t = c.at.max(t);
        speeds[c.server] = c.speed;
    }
    t + left / speeds.iter().sum::<f64>().max(1e-9)
}
