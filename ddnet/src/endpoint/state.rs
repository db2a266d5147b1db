//! A striped endpoint's state, with no sockets and no clock of its own:
//! what was sent and not acknowledged (the window), which runs each link
//! carried, the plan, the acks owed, and the messages being assembled and
//! delivered in order. The link tasks ([`super::link`]) feed it frames and
//! ask it for work; the time comes in as a [`Now`].

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::task::Waker;
use std::time::{Duration, Instant};

use bytes::Bytes;

pub(super) use super::assembly::{Assembly, Message};
use crate::plan::{Claim, LinkId, Next, Plan, PlanConfig};
use crate::wire::{Frame, LinkIds};

/// The time for one call into the state, read only if a rule needs it
/// (reading the clock is a good part of a short message's cost), at most
/// once. Tests pass a fixed time.
pub(super) struct Now(Option<Instant>);

impl Now {
    /// The clock, read when first needed.
    pub(super) fn lazy() -> Self {
        Now(None)
    }

    /// A given time.
    #[cfg(test)]
    pub(super) fn at(t: Instant) -> Self {
        Now(Some(t))
    }

    pub(super) fn get(&mut self) -> Instant {
        *self.0.get_or_insert_with(Instant::now)
    }
}

/// A frame the peer should not have sent: the link carrying it fails.
#[derive(Debug, thiserror::Error)]
pub(super) enum BadFrame {
    #[error("message {msg} is far ahead of {next}")]
    FarAhead { msg: u64, next: u64 },
    #[error("message {msg}: length {len}, earlier {earlier}")]
    LengthChanged { msg: u64, len: u64, earlier: u64 },
    #[error("Hello in mid-stream")]
    HelloMidStream,
    #[error("{0}")]
    Wire(#[from] std::io::Error),
}

/// Unacknowledged bytes a sender may have out before `send` waits.
pub(super) const WINDOW: u64 = 64 << 20;
/// How far past the oldest message it lacks a receiver takes one (ids):
/// bounds what it assembles and holds out of order. A sender has at most
/// this many ids from its oldest unacknowledged one out (that one is at
/// most the receiver's oldest lacking).
pub(super) const MAX_AHEAD: u64 = 4096;
/// A link whose peer acknowledges nothing of ours for this long, while
/// another link's does, is frozen (see [`State::watch`]).
pub(super) const FROZEN: Duration = Duration::from_secs(1);
/// A link that brought nothing for this long, while another did, carries
/// no acks alone (see [`State::quiet`]).
pub(super) const QUIET: Duration = Duration::from_secs(1);
/// What holding one message costs besides its bytes (its slot, its
/// claim): counted against the window, so a flood of empty or tiny
/// messages is bounded too.
pub(super) const MESSAGE_COST: u64 = 64;

/// Whether a sender holding `unacked` (`bytes` of it) may send `msg` now.
/// Bytes and ids both: the receiver takes messages at most [`MAX_AHEAD`]
/// ids past the oldest it lacks ([`takes`]), and small ones (a file read
/// in 8 KiB pieces) would fill the byte window with many times that.
pub(super) fn has_room(unacked: &Unacked, bytes: u64, msg: &Bytes) -> bool {
    unacked.is_empty() || (bytes + held(msg) <= WINDOW && unacked.span() < MAX_AHEAD)
}

/// Whether a receiver whose oldest message not yet arrived is
/// `next_deliver` takes message `msg` (one further ahead breaks the link).
pub(super) fn takes(msg: u64, next_deliver: u64) -> bool {
    msg <= next_deliver + MAX_AHEAD
}

/// What a held message counts against the window.
pub(super) fn held(m: &Bytes) -> u64 {
    m.len() as u64 + MESSAGE_COST
}

/// Acks wait for a run to ride with at most this long, or until this many
/// are pending.
pub(super) const ACK_DELAY: Duration = Duration::from_millis(1);
pub(super) const ACK_BATCH: usize = 16;

pub(super) struct State {
    pub(super) plan: Plan,
    /// Sent messages the peer has not acknowledged.
    pub(super) unacked: Unacked,
    pub(super) unacked_bytes: u64,
    /// Runs each link carried, oldest first, of unacknowledged messages
    /// (and of some acknowledged out of order: they leave once every older
    /// one is acknowledged; a failed link's are filtered).
    pub(super) carried: Vec<VecDeque<Claim>>,
    /// Each link's backlog when its writer last looked: an idle writer
    /// does not look, so its partner drains the figure at the link's rate.
    pub(super) backlog_seen: Vec<(u64, std::time::Instant)>,
    pub(super) alive: Vec<bool>,
    /// Which connection each link is on (see `LinkOut::gen`): the reader
    /// of an earlier one does not fail the link that came back.
    pub(super) gen: Vec<u64>,
    /// How many times each link came back.
    pub(super) returned: Vec<u32>,
    /// When each link last brought a frame.
    pub(super) heard: Vec<Option<Instant>>,
    /// Each link's bytes the peer acknowledged (the kernel's count), and
    /// when that last grew.
    pub(super) moved: Vec<(u64, Instant)>,
    /// Links found frozen ([`State::watch`]): alive, but given no runs.
    pub(super) frozen: Vec<bool>,
    /// With every link lost the channel waits for one to come back (the
    /// caller gives up, [`super::Relink::give_up`]) instead of failing.
    pub(super) patient: bool,
    /// Why each failed link failed.
    pub(super) lost: Vec<Option<String>>,
    /// Bytes handed back to the plan by failed links.
    pub(super) resent: u64,
    pub(super) acks: VecDeque<u64>,
    /// `Delivered` reports for the peer; they ride with the acks.
    pub(super) reports: Vec<Frame>,
    /// When the ack timer first saw the pending acks (a receiver went to
    /// wait, or a duplicate run was acknowledged): they are due
    /// [`ACK_DELAY`] later.
    pub(super) acks_since: Option<std::time::Instant>,
    /// `Close` is due once every message is claimed; which links sent it.
    pub(super) closing: bool,
    pub(super) close_sent: Vec<bool>,
    pub(super) close_pending: Vec<bool>,
    /// The endpoint was dropped: writers send what is due (acks) and stop.
    pub(super) dropped: bool,
    /// A sender found the window full since the last ack: acks wake it.
    pub(super) window_full: bool,
    pub(super) error: Option<String>,
    // Receiving.
    pub(super) assembling: HashMap<u64, Assembly>,
    pub(super) ready: BTreeMap<u64, Message>,
    pub(super) next_deliver: u64,
    pub(super) peer_count: Option<u64>,
    /// Messages in order, waiting for `recv`. A message is acknowledged
    /// when `recv` takes it, so the sender's window bounds what waits here.
    pub(super) inbox: VecDeque<(u64, Message)>,
    /// Tasks waiting in `recv`, woken when messages or the end arrive
    /// (kept here, under the lock `recv` takes anyway: a `Notify` costs a
    /// lock of its own each way).
    pub(super) receivers: Vec<Waker>,
    /// More may come (the peer has not closed, some link works).
    pub(super) inbox_open: bool,
}

/// Sent messages the peer has not acknowledged, by id. Ids are given in
/// order and mostly acknowledged in order: a ring from the oldest one
/// still held, not a map.
#[derive(Default)]
pub(super) struct Unacked {
    /// The id of `msgs[0]`.
    pub(super) first: u64,
    /// `None`: acknowledged, behind one that is not yet.
    pub(super) msgs: VecDeque<Option<Bytes>>,
    pub(super) held: usize,
}

impl Unacked {
    /// Holds message `id`, the next id given.
    pub(super) fn insert(&mut self, id: u64, m: Bytes) {
        if self.msgs.is_empty() {
            self.first = id;
        }
        debug_assert_eq!(id, self.first + self.msgs.len() as u64, "ids come in order");
        self.msgs.push_back(Some(m));
        self.held += 1;
    }

    pub(super) fn get(&self, id: u64) -> Option<&Bytes> {
        let i = usize::try_from(id.checked_sub(self.first)?).ok()?;
        self.msgs.get(i)?.as_ref()
    }

    pub(super) fn remove(&mut self, id: u64) -> Option<Bytes> {
        let i = usize::try_from(id.checked_sub(self.first)?).ok()?;
        let m = self.msgs.get_mut(i)?.take()?;
        self.held -= 1;
        while let Some(None) = self.msgs.front() {
            self.msgs.pop_front();
            self.first += 1;
        }
        Some(m)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.held == 0
    }

    /// Ids from the oldest unacknowledged to the newest given.
    pub(super) fn span(&self) -> u64 {
        self.msgs.len() as u64
    }

    pub(super) fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.msgs.iter().zip(self.first..).filter(|(m, _)| m.is_some()).map(|(_, id)| id)
    }
}

/// A link's part of a message must span this much, and carry this many
/// bytes, for the receiver to report it as a rate sample.
pub(super) const REPORT_MIN_MICROS: u64 = 50;
pub(super) const REPORT_MIN_BYTES: u64 = 8 * 1024;

impl State {
    /// A fresh endpoint's state over `n` links.
    pub(super) fn new(n: usize, now: Instant) -> Self {
        State {
            plan: Plan::new(n, PlanConfig::default()),
            unacked: Unacked::default(),
            unacked_bytes: 0,
            carried: vec![VecDeque::new(); n],
            backlog_seen: vec![(0, now); n],
            alive: vec![true; n],
            gen: vec![0; n],
            returned: vec![0; n],
            heard: vec![None; n],
            moved: vec![(0, now); n],
            frozen: vec![false; n],
            patient: false,
            lost: vec![None; n],
            resent: 0,
            acks: VecDeque::new(),
            reports: vec![],
            acks_since: None,
            closing: false,
            close_sent: vec![false; n],
            close_pending: vec![false; n],
            dropped: false,
            window_full: false,
            error: None,
            assembling: HashMap::new(),
            ready: BTreeMap::new(),
            next_deliver: 0,
            peer_count: None,
            inbox: VecDeque::new(),
            receivers: vec![],
            inbox_open: true,
        }
    }
}

pub(super) enum Work {
    /// There may be runs to send, but this link is far enough ahead.
    Paced,
    Frame(Vec<u8>, Option<(Claim, Bytes)>),
    /// The closing frame: marked sent once written.
    Close(Vec<u8>),
    Wait,
    Done,
}

impl State {
    /// `backlog`: bytes this link wrote that the peer has not acknowledged.
    /// `head`: an empty buffer to build the frame's header in.
    pub(super) fn next_work(
        &mut self,
        link: LinkId,
        may_claim: bool,
        backlog: u64,
        mut head: Vec<u8>,
        ids: &mut LinkIds,
        now: &mut Now,
    ) -> Work {
        if !self.alive[link] {
            return Work::Done;
        }
        // Pending acks ride in front of whatever this link writes next: one
        // write, not one per frame. Alone they wait a little (a reply is
        // usually about to be sent), unless many are pending: whether they
        // are due is asked (it reads the clock) only when no run takes them.
        let take_due_acks = |st: &mut State, head: &mut Vec<u8>, ids: &mut LinkIds, now: &mut Now| {
            if st.acks_due(now) && !st.quiet(link, now) {
                st.take_acks(head, ids);
            }
        };
        // Nothing to claim now: the acks go alone, or the writer looks again soon.
        let paced = |head: Vec<u8>| if head.is_empty() { Work::Paced } else { Work::Frame(head, None) };
        if !may_claim && !self.plan.is_idle() {
            take_due_acks(self, &mut head, ids, now);
            return paced(head);
        }
        // Backlogs weigh only pair decisions (and reading the clock for
        // them is a good part of a short message's cost).
        let pairs = !self.plan.one_link_work();
        if pairs {
            self.note_backlog(link, backlog, now);
            self.drain_others(link, now);
        }
        match self.plan.next(link) {
            Next::Run(c) => {
                let Some(data) = self.unacked.get(c.msg) else {
                    // Acknowledged meanwhile (a redo of a run that did arrive).
                    take_due_acks(self, &mut head, ids, now);
                    return Work::Frame(head, None);
                };
                let (payload, msg_len) =
                    (data.slice(c.offset as usize..c.offset as usize + c.len as usize), data.len());
                self.take_acks(&mut head, ids);
                Frame::Run { msg: c.msg, msg_len: msg_len as u64, offset: c.offset, len: c.len }.encode(&mut head, ids);
                if pairs {
                    // The partner weighs this run as ours from now on.
                    self.note_backlog(link, backlog + (head.len() + payload.len()) as u64, now);
                }
                self.carried[link].push_back(c);
                return Work::Frame(head, Some((c, payload)));
            }
            Next::Later => {
                take_due_acks(self, &mut head, ids, now);
                return paced(head);
            }
            Next::Nothing => {}
        }
        take_due_acks(self, &mut head, ids, now);
        if self.closing && self.plan.is_idle() && !self.close_sent[link] && !self.close_pending[link] {
            self.close_pending[link] = true;
            Frame::Close { count: self.plan.next_id(), delivered: self.next_deliver }.encode(&mut head, ids);
            return Work::Close(head);
        }
        if !head.is_empty() {
            return Work::Frame(head, None);
        }
        if self.dropped {
            return Work::Done;
        }
        // Acks not due yet: the ack timer wakes the writers when they are.
        Work::Wait
    }

    /// Every pending ack (and rate report), into the header of the frame
    /// being built for a link that carried `ids`.
    pub(super) fn take_acks(&mut self, head: &mut Vec<u8>, ids: &mut LinkIds) {
        while let Some(msg) = self.acks.pop_front() {
            Frame::Ack { msg }.encode(head, ids);
        }
        for r in self.reports.drain(..) {
            r.encode(head, ids);
        }
        self.acks_since = None;
    }

    /// Whether `link`'s writer surely has nothing to do now (checked before
    /// it asks the kernel for its progress).
    pub(super) fn nothing_for(&self, link: LinkId, now: &mut Now) -> bool {
        let close_due = self.closing && !self.close_sent[link] && !self.close_pending[link];
        self.alive[link] && self.plan.is_idle() && !close_due && !self.dropped && !self.acks_due(now)
    }

    pub(super) fn acks_due(&self, now: &mut Now) -> bool {
        self.acks_due_now()
            || (!self.acks.is_empty()
                && self.acks_since.is_some_and(|t| now.get().saturating_duration_since(t) >= ACK_DELAY))
    }

    /// Acks due whatever the time: too many, or an end near. (Those due by
    /// their age are the ack timer's: it wakes the writers then.)
    pub(super) fn acks_due_now(&self) -> bool {
        !self.acks.is_empty()
            && (self.acks.len() >= ACK_BATCH || self.closing || self.dropped || self.peer_count.is_some())
    }

    pub(super) fn note_backlog(&mut self, link: LinkId, bytes: u64, now: &mut Now) {
        self.plan.set_backlog(link, bytes);
        self.backlog_seen[link] = (bytes, now.get());
    }

    /// The other links' backlogs as they are likely now: what each had when
    /// its writer last looked, less what it delivered since at its rate.
    pub(super) fn drain_others(&mut self, link: LinkId, now: &mut Now) {
        for l in (0..self.alive.len()).filter(|&l| l != link && self.alive[l]) {
            let (bytes, at) = self.backlog_seen[l];
            let gone = self.plan.measured_rate(l) * now.get().saturating_duration_since(at).as_secs_f64();
            self.plan.set_backlog(l, bytes.saturating_sub(gone as u64));
        }
    }

    pub(super) fn fail_link(&mut self, link: LinkId, why: String) {
        if !std::mem::replace(&mut self.alive[link], false) {
            return;
        }
        self.lost[link] = Some(why.clone());
        self.hand_back(link);
        self.ack_again();
        if !self.alive.iter().any(|&a| a) && !self.patient {
            self.error = Some(format!("every link failed (last: {why})"));
            self.inbox_open = false;
        }
    }

    /// What `link` carried of messages not yet acknowledged goes back to
    /// the plan, for the other links (the peer ignores a run it has).
    fn hand_back(&mut self, link: LinkId) {
        let lost: Vec<Claim> =
            std::mem::take(&mut self.carried[link]).into_iter().filter(|c| self.unacked.get(c.msg).is_some()).collect();
        self.resent += lost.iter().map(|c| u64::from(c.len)).sum::<u64>();
        self.plan.on_failed(link, lost);
    }

    /// Whether `link` has brought nothing for [`QUIET`] while another has:
    /// acks alone are left to the others then. A link that went silent
    /// (a pulled cable) swallows what is written on it until it is found
    /// lost, and the peer would hold the messages those acks free, its
    /// window full, until then.
    pub(super) fn quiet(&self, link: LinkId, now: &mut Now) -> bool {
        let old = |l: LinkId, now: Instant| self.heard[l].is_none_or(|t| now.saturating_duration_since(t) >= QUIET);
        if self.heard[link].is_none() && self.heard.iter().all(Option::is_none) {
            return false;
        }
        let now = now.get();
        old(link, now) && (0..self.alive.len()).any(|l| l != link && self.alive[l] && !old(l, now))
    }

    /// Looks at how far the peer acknowledged each link (`acked`, the
    /// kernel's counts; `None`: not known). A link with runs of ours the
    /// peer lacks that moved nothing for [`FROZEN`], while another link
    /// moved, is frozen: its runs go to the others (the peer ignores a copy
    /// it has) and it gets no new ones until it moves again. A frozen link
    /// (a cable out for a few seconds: TCP rides it out) would otherwise
    /// hold every message behind its runs, and with them the window, until
    /// it moves or is lost. True if anything changed (writers to wake).
    pub(super) fn watch(&mut self, acked: &[Option<u64>], now: Instant) -> bool {
        let mut changed = false;
        for (l, a) in acked.iter().enumerate() {
            match *a {
                Some(a) if a != self.moved[l].0 => self.moved[l] = (a, now),
                _ => continue,
            }
            if std::mem::replace(&mut self.frozen[l], false) && self.alive[l] {
                self.plan.on_revived(l);
                changed = true;
            }
        }
        let still = |s: &Self, l: LinkId| now.saturating_duration_since(s.moved[l].1) >= FROZEN;
        for l in 0..self.alive.len() {
            if !self.alive[l] || self.frozen[l] || !still(self, l) {
                continue;
            }
            let owes = self.carried[l].iter().any(|c| self.unacked.get(c.msg).is_some());
            let others = (0..self.alive.len()).any(|o| o != l && self.alive[o] && !self.frozen[o] && !still(self, o));
            if owes && others {
                self.frozen[l] = true;
                self.hand_back(l);
                changed = true;
            }
        }
        changed
    }

    /// Acks written on a link that then failed may never arrive (a pulled
    /// cable swallows what the socket took), and the peer would hold those
    /// messages, and its window, for ever: every message `recv` took that
    /// the peer may still hold (it holds at most [`MAX_AHEAD`] ids) is
    /// acknowledged again on the links left. A few KiB, once a failure; an
    /// ack of a message the peer no longer holds is ignored.
    fn ack_again(&mut self) {
        let taken = self.inbox.front().map_or(self.next_deliver, |(id, _)| *id);
        self.acks.extend(taken.saturating_sub(MAX_AHEAD)..taken);
    }

    /// `link` is back, on connection `gen`. If it was still working here
    /// (the peer found it broken first), what its old connection carried
    /// is handed back as for a failed link: the peer may not have it.
    pub(super) fn revive_link(&mut self, link: LinkId, gen: u64, now: Instant) {
        if self.alive[link] {
            self.hand_back(link);
            self.ack_again();
        }
        self.alive[link] = true;
        self.gen[link] = gen;
        self.returned[link] += 1;
        self.lost[link] = None;
        self.backlog_seen[link] = (0, now);
        (self.moved[link], self.frozen[link]) = ((0, now), false);
        self.close_sent[link] = false;
        self.close_pending[link] = false;
        self.plan.on_revived(link);
    }

    pub(super) fn on_ack(&mut self, msg: u64) {
        if let Some(m) = self.unacked.remove(msg) {
            self.unacked_bytes -= held(&m);
            self.plan.on_acked(msg);
            // Acks come mostly in order: the front runs go, each once (a
            // search of every link's runs per ack was quadratic in what
            // is outstanding).
            for c in &mut self.carried {
                while c.front().is_some_and(|r| self.unacked.get(r.msg).is_none()) {
                    c.pop_front();
                }
            }
        }
    }

    pub(super) fn queue_ack(&mut self, msg: u64) {
        self.acks.push_back(msg);
    }

    /// A run arrived: place it; deliver what is complete, in order.
    pub(super) fn on_run(
        &mut self,
        link: LinkId,
        msg: u64,
        msg_len: u64,
        offset: u64,
        payload: Bytes,
        now: &mut Now,
    ) -> Result<(), BadFrame> {
        if msg < self.next_deliver || self.ready.contains_key(&msg) {
            // Sent again after a link failed: already have it.
            self.queue_ack(msg);
            return Ok(());
        }
        if !takes(msg, self.next_deliver) {
            return Err(BadFrame::FarAhead { msg, next: self.next_deliver });
        }
        let now = now.get();
        if !self.assembling.contains_key(&msg) {
            let alone = self.assembling.is_empty();
            for a in self.assembling.values_mut() {
                a.alone = false;
            }
            self.assembling.insert(msg, Assembly::new(msg_len, self.alive.len(), now, alone));
        }
        let a = self.assembling.get_mut(&msg).expect("present");
        if a.len != msg_len {
            return Err(BadFrame::LengthChanged { msg, len: msg_len, earlier: a.len });
        }
        let added = a.place(offset, payload);
        if added > 0 {
            a.parts[link] = (a.parts[link].0 + added, now);
        }
        if a.is_whole() {
            let a = self.assembling.remove(&msg).expect("present");
            if a.alone {
                self.report(&a);
            }
            self.complete(msg, a.into_message());
        }
        Ok(())
    }

    /// A run that is a whole message (most short messages): no assembly.
    pub(super) fn on_whole(&mut self, msg: u64, data: Bytes) -> Result<(), BadFrame> {
        if msg < self.next_deliver || self.ready.contains_key(&msg) {
            self.queue_ack(msg);
            return Ok(());
        }
        if !takes(msg, self.next_deliver) {
            return Err(BadFrame::FarAhead { msg, next: self.next_deliver });
        }
        if !self.assembling.is_empty() {
            // Sent whole again after a link failed mid-way: the parts are moot.
            self.assembling.remove(&msg);
            for a in self.assembling.values_mut() {
                a.alone = false;
            }
        }
        self.complete(msg, Message(vec![data]));
        Ok(())
    }

    /// Message `msg` is here: deliver what is in order.
    pub(super) fn complete(&mut self, msg: u64, data: Message) {
        if msg == self.next_deliver && self.ready.is_empty() {
            // In order (the usual case): no reordering map.
            self.inbox.push_back((msg, data));
            self.next_deliver += 1;
        } else {
            self.ready.insert(msg, data);
            while let Some(m) = self.ready.remove(&self.next_deliver) {
                self.inbox.push_back((self.next_deliver, m));
                self.next_deliver += 1;
            }
        }
        self.check_closed();
    }

    /// Each link's part of a message that arrived alone, as a rate sample
    /// for the peer's plan.
    pub(super) fn report(&mut self, a: &Assembly) {
        for (link, &(bytes, last)) in a.parts.iter().enumerate() {
            let micros = last.duration_since(a.first).as_micros() as u64;
            if bytes >= REPORT_MIN_BYTES && micros >= REPORT_MIN_MICROS {
                self.reports.push(Frame::Delivered { link: link as u32, bytes, micros });
            }
        }
    }

    pub(super) fn check_closed(&mut self) {
        if self.peer_count == Some(self.next_deliver) {
            self.inbox_open = false;
        }
    }
}

/// A link's delivery rate: bytes acknowledged per second of busy time.
///
/// Busy time leaves out the gaps when the link had nothing to send, so a
/// link carrying short messages is measured as fast as it delivers them
/// (latency included), not as slowly as the application feeds it. The
/// kernel counts busy time in scheduler ticks (4 ms here), so a sample
/// spans several of them.
pub(super) struct Meter {
    pub(super) acked: u64,
    pub(super) busy_us: u64,
}

/// Busy time one rate sample spans, and the bytes it must have carried to
/// count.
pub(super) const METER_SPAN_US: u64 = 20_000;
pub(super) const METER_MIN_BYTES: u64 = 256 * 1024;

impl Meter {
    /// A rate sample (bytes/s) once enough busy time has passed.
    pub(super) fn sample(&mut self, acked: u64, busy_us: u64) -> Option<f64> {
        let span = busy_us.checked_sub(self.busy_us)?;
        if span < METER_SPAN_US {
            return None;
        }
        let bytes = acked.saturating_sub(self.acked);
        *self = Meter { acked, busy_us };
        // A span of acknowledgements and short messages only measures latency.
        (bytes >= METER_MIN_BYTES).then(|| bytes as f64 * 1e6 / span as f64)
    }
}

#[cfg(test)]
mod tests;
