//! Many receivers at once (`ddftp simulate --receivers`, `get --share`):
//! each receiver runs the real [`Transfer::with_homes`] against the mirrors
//! and every other receiver, as `ddftp get --share` builds it, and each
//! receiver serves the blocks it has verified, so the model can be checked
//! at sizes no test machine holds.
//!
//! The network: every mirror has an uplink, every receiver an uplink and a
//! downlink (blocks per second), shared by the connections on them as TCP
//! roughly shares them (see [`Group::send`]). A receiver's connection
//! waits at a block the receiver does not hold yet (as ddftpd's share
//! source does: the whole connection waits, its later streams too), and
//! says so every second (`Waiting`).
//! Control messages and blocks take the one-way delay.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use ddftp_proto::streams::{Next, Streams};

use super::{servers_like_get, ToClient};
use crate::completed::Completed;
use crate::scheduler::{Action, Home};
use crate::transfer::{self, BlockRun, Event, Transfer};

/// One receiver's links, in blocks per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Link {
    pub down: f64,
    pub up: f64,
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct GroupSpec {
    pub blocks: u64,
    /// Each mirror's uplink, blocks per second.
    pub mirrors: Vec<f64>,
    pub receivers: Vec<Link>,
    /// One-way delay between any two hosts, seconds.
    pub one_way_delay: f64,
    pub config: transfer::Config,
}

/// One receiver's run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReceiverRun {
    /// When it held every block; `None` if it never did.
    pub done_at: Option<f64>,
    pub from_mirrors: u64,
    pub from_peers: u64,
    /// Its own bound: the file over its downlink.
    pub bound: f64,
}

/// What happened.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GroupReport {
    pub blocks: u64,
    /// When the last receiver held every block (the end of the run if one
    /// never did).
    pub last: f64,
    /// No schedule beats this: max(S/r, S/U, N*S/(U + N*r)) with each
    /// receiver's own rates, plus one round trip.
    pub bound: f64,
    /// What the mirrors sent, in copies of the file.
    pub mirror_copies: f64,
    pub receivers: Vec<ReceiverRun>,
    /// Producers a receiver dropped, with when and why.
    pub dropped: Vec<GroupDrop>,
    pub completed: bool,
}

/// A producer one receiver dropped.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GroupDrop {
    pub at: f64,
    /// The receiver that dropped it (0-based).
    pub receiver: usize,
    /// Who served it: "mirror M" or "receiver R" (1-based, as printed).
    pub from: String,
    pub why: String,
}

/// The bound of [`GroupReport::bound`], without the round trip.
pub fn bound(spec: &GroupSpec) -> f64 {
    let s = spec.blocks as f64;
    let u: f64 = spec.mirrors.iter().sum();
    let ups: f64 = spec.receivers.iter().map(|r| r.up).sum();
    let n = spec.receivers.len() as f64;
    let slowest = spec.receivers.iter().map(|r| s / r.down).fold(0.0, f64::max);
    slowest.max(s / u).max(n * s / (u + ups))
}

/// Who sends on a producer's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Mirror(usize),
    Receiver(usize),
}

/// One producer connection: receiver `to`'s producer `local`, served by `from`.
#[derive(Debug)]
struct Conn {
    to: usize,
    local: usize,
    from: Node,
    streams: Streams<()>,
    /// Dropped by its receiver: gone for good.
    gone: bool,
    /// In its node's ready queue.
    queued: bool,
    /// Blocks it may send (its share of the links so far).
    credit: f64,
    /// When its receiver last heard bytes of a block not yet whole come
    /// (the client's `Alive`, at most once a second).
    alive_at: f64,
}

/// A host's uplink: its speed and the connections that may have something
/// to send.
#[derive(Debug, Default)]
struct Uplink {
    speed: f64,
    ready: VecDeque<usize>,
    sent: u64,
}

enum Msg {
    Control(usize, Action),
    Reply(usize, ToClient),
    /// Receiver `to` is told its share `home`'s receiver fetches these
    /// blocks from its mirrors (`scheduler/relay.rs`).
    Told {
        to: usize,
        home: usize,
        told: crate::scheduler::Told,
    },
}

struct Receiver {
    tr: Transfer,
    /// Global connection of each local producer.
    conns: Vec<usize>,
    down: f64,
    /// Connections waiting for a block this receiver does not hold yet.
    waiting: HashMap<u64, Vec<usize>>,
    run: ReceiverRun,
}

struct Group {
    origin: Instant,
    conns: Vec<Conn>,
    mirrors: Vec<Uplink>,
    /// Receivers' uplinks, by receiver.
    ups: Vec<Uplink>,
    receivers: Vec<Receiver>,
    dropped: Vec<GroupDrop>,
    /// Messages by the step they arrive in (a ring, `delay_steps + 1` long).
    wheel: Vec<Vec<Msg>>,
    delay_steps: usize,
    step: usize,
    dt: f64,
}

/// Runs every receiver's transfer until each holds the file, nothing can
/// finish it, or a generous limit passes.
pub fn run(spec: &GroupSpec, origin: Instant) -> GroupReport {
    let mut g = Group::new(spec, origin);
    let limit = 100.0 * (bound(spec) + spec.one_way_delay + 1.0) + 10.0 * spec.config.stall_timeout.as_secs_f64();
    let mut t = 0.0;
    while t < limit {
        g.deliver(t);
        g.consumers(t);
        if g.receivers.iter().all(|r| r.tr.is_done() || r.tr.is_stuck()) {
            break;
        }
        g.send(t);
        g.step += 1;
        t += g.dt;
    }
    let copies = g.mirrors.iter().map(|m| m.sent).sum::<u64>() as f64 / spec.blocks.max(1) as f64;
    let receivers: Vec<ReceiverRun> = g.receivers.into_iter().map(|r| r.run).collect();
    let completed = receivers.iter().all(|r| r.done_at.is_some());
    GroupReport {
        blocks: spec.blocks,
        last: match completed {
            true => receivers.iter().filter_map(|r| r.done_at).fold(0.0, f64::max),
            false => t,
        },
        bound: bound(spec) + 2.0 * spec.one_way_delay,
        mirror_copies: copies,
        receivers,
        dropped: g.dropped,
        completed,
    }
}

impl Group {
    fn new(spec: &GroupSpec, origin: Instant) -> Group {
        let n = spec.receivers.len();
        let mirror_streams = servers_like_get(&spec.mirrors);
        let fastest = spec.mirrors.iter().chain(spec.receivers.iter().flat_map(|r| [&r.down, &r.up]));
        let dt = 1.0 / fastest.fold(1e-9f64, |a, &b| a.max(b));
        let delay_steps = (spec.one_way_delay / dt).round().max(1.0) as usize;
        let mut conns = vec![];
        let mut receivers = vec![];
        for (i, link) in spec.receivers.iter().enumerate() {
            // As `get --share` lays them out: the mirrors' producers, then
            // two for each other receiver, each a mirror of its own.
            let mut owner = vec![];
            let mut from = vec![];
            for (m, s) in mirror_streams.iter().enumerate() {
                owner.extend(std::iter::repeat_n(m, s.streams));
                from.extend(std::iter::repeat_n(Node::Mirror(m), s.streams));
            }
            let mine = owner.len();
            let mut homes = vec![];
            let mut peer = spec.mirrors.len();
            for source in crate::fan::sources(n, i) {
                let weight = source.weight;
                let Some(k) = source.from else {
                    homes.push(Home { producers: (0..mine).collect(), only_here: false, weight, relay: None });
                    continue;
                };
                // With a relay (the third), as `get` has one in flat groups.
                let relay = (n <= crate::fan::FLAT).then_some(owner.len() + 2);
                homes.push(Home { producers: vec![owner.len(), owner.len() + 1], only_here: true, weight, relay });
                let streams = 2 + usize::from(relay.is_some());
                owner.extend(std::iter::repeat_n(peer, streams));
                from.extend(std::iter::repeat_n(Node::Receiver(k), streams));
                peer += 1;
            }
            let tr = Transfer::with_homes(Completed::new(spec.blocks), &owner, peer, (&homes, 1), &spec.config, origin);
            let local: Vec<usize> = (0..owner.len()).map(|p| conns.len() + p).collect();
            conns.extend(from.into_iter().enumerate().map(|(p, from)| Conn {
                to: i,
                local: p,
                from,
                streams: Streams::default(),
                gone: false,
                queued: false,
                credit: 0.0,
                alive_at: 0.0,
            }));
            receivers.push(Receiver {
                tr,
                conns: local,
                down: link.down,
                waiting: HashMap::new(),
                run: ReceiverRun {
                    done_at: None,
                    from_mirrors: 0,
                    from_peers: 0,
                    bound: spec.blocks as f64 / link.down,
                },
            });
        }
        Group {
            origin,
            conns,
            mirrors: spec.mirrors.iter().map(|&speed| Uplink { speed, ..Uplink::default() }).collect(),
            ups: spec.receivers.iter().map(|r| Uplink { speed: r.up, ..Uplink::default() }).collect(),
            receivers,
            dropped: vec![],
            wheel: (0..=delay_steps).map(|_| vec![]).collect(),
            delay_steps,
            step: 0,
            dt,
        }
    }

    /// Every other receiver hears what receiver `from` told (in flat
    /// groups, share k is receiver k's).
    fn tell(&mut self, from: usize, told: crate::scheduler::Told) {
        for to in (0..self.receivers.len()).filter(|&to| to != from) {
            self.post(Msg::Told { to, home: from, told: told.clone() });
        }
    }

    fn at(&self, t: f64) -> Instant {
        self.origin + Duration::from_secs_f64(t)
    }

    fn post(&mut self, m: Msg) {
        let slot = (self.step + self.delay_steps) % self.wheel.len();
        self.wheel[slot].push(m);
    }

    /// What arrives this step: replies and blocks at the receivers, control
    /// messages at the senders.
    fn deliver(&mut self, t: f64) {
        let now = self.at(t);
        let slot = self.step % self.wheel.len();
        for m in std::mem::take(&mut self.wheel[slot]) {
            match m {
                Msg::Control(c, a) => self.control(c, a),
                Msg::Reply(c, r) => self.reply(c, r, t, now),
                Msg::Told { to, home, told } => self.receivers[to].tr.handle_told(home, told.blocks, told.dir, now),
            }
        }
    }

    fn control(&mut self, c: usize, a: Action) {
        let conn = &mut self.conns[c];
        if conn.gone {
            return;
        }
        let reply = match a {
            Action::Start { stream, first, last, dir, .. } => match conn.streams.start(stream, first, last, dir, ()) {
                Ok(ended) => ended.map(ToClient::Stopped),
                Err(full) => Some(ToClient::Refused(full.to_string())),
            },
            Action::Extend { stream, last, .. } => {
                conn.streams.find_mut(stream).for_each(|s| s.cursor.set_last(last));
                None
            }
            Action::End { stream, .. } => conn.streams.end(stream).map(ToClient::Stopped),
        };
        if let Some(r) = reply {
            self.post(Msg::Reply(c, r));
        }
        self.wake(c);
    }

    fn reply(&mut self, c: usize, r: ToClient, t: f64, now: Instant) {
        let (to, local, from) = (self.conns[c].to, self.conns[c].local, self.conns[c].from);
        let rx = &mut self.receivers[to];
        match r {
            ToClient::Block { stream, block, dir } => {
                if rx.tr.is_dropped(local) {
                    return;
                }
                match from {
                    Node::Mirror(_) => rx.run.from_mirrors += 1,
                    Node::Receiver(_) => rx.run.from_peers += 1,
                }
                let run = BlockRun { stream, first: block, count: 1, bytes: 1, dir };
                rx.tr.handle_blocks(local, run, now);
                if rx.tr.completed().holds(block, block) {
                    if let Some(ws) = rx.waiting.remove(&block) {
                        ws.into_iter().for_each(|w| self.wake(w));
                    }
                }
                let rx = &mut self.receivers[to];
                if rx.run.done_at.is_none() && rx.tr.is_done() {
                    rx.run.done_at = Some(t);
                }
            }
            ToClient::Corrupt { block } => rx.tr.handle_corrupt(local, block, now),
            ToClient::Stopped(s) => rx.tr.handle_stopped(local, s.stream, s.sent, now),
            ToClient::Refused(why) => rx.tr.handle_failed(local, why, now),
        }
    }

    /// Each receiver's transfer: its timeouts, then what it asks for.
    fn consumers(&mut self, t: f64) {
        let now = self.at(t);
        // Stalls are seconds long: looking every 10 ms is as good as every
        // step, and a timeout check costs one pass over the producers.
        let look = self.step.is_multiple_of(((0.01 / self.dt).ceil() as usize).max(1));
        // A receiver's server says every second that a stream waits.
        if self.step.is_multiple_of(((1.0 / self.dt).round() as usize).max(1)) {
            self.say_waiting(now);
        }
        for i in 0..self.receivers.len() {
            let tr = &mut self.receivers[i].tr;
            if look && tr.poll_timeout().is_some_and(|d| d <= now) {
                tr.handle_timeout(now);
            }
            while let Some(a) = self.receivers[i].tr.poll_action() {
                let p = match &a {
                    Action::Start { producer, .. } | Action::Extend { producer, .. } | Action::End { producer, .. } => {
                        *producer
                    }
                };
                let c = self.receivers[i].conns[p];
                self.post(Msg::Control(c, a));
            }
            while let Some(told) = self.receivers[i].tr.poll_told() {
                self.tell(i, told);
            }
            while let Some(Event::Dropped { producer, why, .. }) = self.receivers[i].tr.poll_event() {
                let c = self.receivers[i].conns[producer];
                self.conns[c].gone = true;
                let from = match self.conns[c].from {
                    Node::Mirror(m) => format!("mirror {}", m + 1),
                    Node::Receiver(r) => format!("receiver {}", r + 1),
                };
                self.dropped.push(GroupDrop { at: t, receiver: i, from, why: why.to_string() });
            }
        }
    }

    /// Each connection waiting for a block its receiver's server does not
    /// hold yet: its client hears `Waiting` (the delay aside).
    fn say_waiting(&mut self, now: Instant) {
        let waiting: Vec<usize> = self.receivers.iter().flat_map(|r| r.waiting.values().flatten().copied()).collect();
        for c in waiting.into_iter().filter(|&c| !self.conns[c].gone) {
            let (to, local) = (self.conns[c].to, self.conns[c].local);
            self.receivers[to].tr.handle_waiting(local, now);
        }
    }

    /// Puts connection `c` in its sender's queue if it may have something
    /// to send.
    fn wake(&mut self, c: usize) {
        let conn = &mut self.conns[c];
        if conn.gone || conn.queued || !conn.streams.has_work() {
            return;
        }
        conn.queued = true;
        let from = conn.from;
        self.uplink(from).ready.push_back(c);
    }

    fn uplink(&mut self, n: Node) -> &mut Uplink {
        match n {
            Node::Mirror(m) => &mut self.mirrors[m],
            Node::Receiver(r) => &mut self.ups[r],
        }
    }

    /// This step's blocks. Each uplink splits its speed equally among its
    /// connections that can send; a downlink offered more than it carries
    /// takes from each in proportion (TCP's sharing, roughly). A
    /// connection sends a block whenever its credit reaches one.
    fn send(&mut self, t: f64) {
        let dt = self.dt;
        let mut active: Vec<(usize, f64)> = vec![];
        let nodes = (0..self.mirrors.len()).map(Node::Mirror).chain((0..self.ups.len()).map(Node::Receiver));
        for n in nodes.collect::<Vec<_>>() {
            let ready = std::mem::take(&mut self.uplink(n).ready);
            let mut keep = VecDeque::with_capacity(ready.len());
            for c in ready {
                if self.can_send(n, c) {
                    keep.push_back(c);
                } else {
                    self.conns[c].queued = false;
                    self.conns[c].credit = 0.0;
                }
            }
            let share = self.uplink(n).speed / keep.len().max(1) as f64;
            active.extend(keep.iter().map(|&c| (c, share)));
            self.uplink(n).ready = keep;
        }
        let mut offered = vec![0.0; self.receivers.len()];
        for &(c, rate) in &active {
            offered[self.conns[c].to] += rate;
        }
        for (c, rate) in active {
            let to = self.conns[c].to;
            let scale = (self.receivers[to].down / offered[to]).min(1.0);
            self.conns[c].credit += rate * scale * dt;
            // Bytes of a block are on their way: its receiver hears them
            // (the delay aside), as a slot says `Alive`.
            if t >= self.conns[c].alive_at + 1.0 {
                self.conns[c].alive_at = t;
                let (local, now) = (self.conns[c].local, self.at(t));
                self.receivers[to].tr.handle_bytes(local, now);
            }
            let n = self.conns[c].from;
            while self.conns[c].credit >= 1.0 && self.can_send(n, c) {
                if self.step_conn(c) {
                    self.conns[c].credit -= 1.0;
                    self.uplink(n).sent += 1;
                }
            }
        }
    }

    /// Whether connection `c` has a block or reply to send now; if it waits
    /// for a block its receiver does not hold yet, it is woken when it
    /// does (the whole connection waits: later streams wait behind it).
    fn can_send(&mut self, n: Node, c: usize) -> bool {
        let conn = &self.conns[c];
        if conn.gone || !conn.streams.has_work() {
            return false;
        }
        if let (Node::Receiver(k), Some(b)) = (n, self.next_block(c)) {
            if !self.receivers[k].tr.completed().holds(b, b) {
                self.receivers[k].waiting.entry(b).or_default().push(c);
                return false;
            }
        }
        true
    }

    /// The block connection `c` sends next, if its running stream has one.
    fn next_block(&self, c: usize) -> Option<u64> {
        self.conns[c].streams.running()?.cursor.peek()
    }

    /// Steps connection `c` once: a block (true), or a `Stopped`.
    fn step_conn(&mut self, c: usize) -> bool {
        let conn = &mut self.conns[c];
        match conn.streams.step() {
            Next::Block { stream, block } => {
                let dir = conn.streams.running().expect("it sent a block").cursor.dir();
                self.post(Msg::Reply(c, ToClient::Block { stream, block, dir }));
                true
            }
            Next::Stopped(s) => {
                self.post(Msg::Reply(c, ToClient::Stopped(s)));
                false
            }
            Next::Wait => false,
        }
    }
}

#[cfg(test)]
mod tests;
