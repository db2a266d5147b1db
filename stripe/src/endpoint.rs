//! A striped endpoint: N TCP links used as one message channel, both ways.
//!
//! Per link, a writer task takes work from the shared [`Plan`] (runs with
//! any pending acks in front, acks alone when they are due, then the
//! closing frame), feeding the plan its backlog and rate from `TCP_INFO`,
//! and a reader task reassembles the peer's runs into whole messages,
//! reporting back how fast each link delivered its part (the plan's other
//! rate source), then lets a receiver it woke run before it goes on. An
//! ack timer task sends acks no run took along. A short
//! message whose link's writer is idle is written by `send` itself, when
//! the socket takes it at once: a task switch is a good part of a 1 KiB
//! message's trip. Messages are delivered in the order they were sent. A
//! sender keeps each message until the peer acknowledges it (which the
//! peer does once its `recv` took the message, on the next frame it sends
//! or, if it sends none, 1 ms (`ACK_DELAY`) after it waits for more, closes or
//! is dropped: the sender's window then bounds what waits at a slow
//! receiver), and remembers which runs each
//! link carried: when a link fails, its runs of unacknowledged messages go
//! back to the plan and the other links send them again (the receiver
//! ignores a run it already has).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Notify};

use crate::plan::{Claim, LinkId, Next, Plan, PlanConfig};
use crate::sys::{connect_from, limit_unsent, tcp_progress};
use crate::wire::{Frame, LinkIds, MAX_MESSAGE};

/// Unacknowledged bytes a sender may have out before `send` waits.
const WINDOW: u64 = 64 << 20;
/// How far past the oldest message it lacks a receiver takes one (ids):
/// bounds what it assembles and holds out of order. A sender has at most
/// this many ids from its oldest unacknowledged one out (that one is at
/// most the receiver's oldest lacking).
const MAX_AHEAD: u64 = 4096;
/// What holding one message costs besides its bytes (its slot, its
/// claim): counted against the window, so a flood of empty or tiny
/// messages is bounded too.
const MESSAGE_COST: u64 = 64;

/// Whether a sender holding `unacked` (`bytes` of it) may send `msg` now.
/// Bytes and ids both: the receiver takes messages at most [`MAX_AHEAD`]
/// ids past the oldest it lacks ([`takes`]), and small ones (a file read
/// in 8 KiB pieces) would fill the byte window with many times that.
fn has_room(unacked: &Unacked, bytes: u64, msg: &Bytes) -> bool {
    unacked.is_empty() || (bytes + held(msg) <= WINDOW && unacked.span() < MAX_AHEAD)
}

/// Whether a receiver whose oldest message not yet arrived is
/// `next_deliver` takes message `msg` (one further ahead breaks the link).
fn takes(msg: u64, next_deliver: u64) -> bool {
    msg <= next_deliver + MAX_AHEAD
}

/// What a held message counts against the window.
fn held(m: &Bytes) -> u64 {
    m.len() as u64 + MESSAGE_COST
}
/// Unsent bytes a link may queue in the kernel: keeps claims close to
/// what the link is really sending, so the two ends of a pair meet where
/// their speeds say.
const UNSENT_LOW_WATER: u32 = 256 * 1024;
/// A link claims a new run only while what it wrote and the peer has not
/// acknowledged is under this much time at its delivery rate (and at least
/// [`MIN_AHEAD`] bytes): claims then follow what each link really delivers,
/// not how fast its socket and queues swallow data, so the two ends of a
/// pair meet where the links' speeds say even for a 256 KiB message.
const AHEAD_SECS: f64 = 0.004;
const MIN_AHEAD: u64 = 64 * 1024;
/// Acks wait for a run to ride with at most this long, or until this many
/// are pending.
const ACK_DELAY: Duration = Duration::from_millis(1);
const ACK_BATCH: usize = 16;
/// Turns of the runtime a batch of acks waits for a run to take it along
/// before the ack timer arms.
const ACK_YIELDS: usize = 4;
/// How long to wait for acknowledgements before looking again.
const PACE_POLL: Duration = Duration::from_millis(1);
/// How long an accepted connection may take to say `Hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// One end of a striped channel.
pub struct Striped {
    shared: Arc<Shared>,
    links: usize,
}

struct Shared {
    state: Mutex<State>,
    /// Each link's socket, sending side: written by whoever holds the
    /// link's `out`.
    wr: Vec<OwnedWriteHalf>,
    /// Each link's sending state, held only while writing without waiting
    /// (the writer waits for a full socket with it let go).
    out: Vec<Mutex<LinkOut>>,
    /// Each link's writer waits here for work.
    work: Vec<Notify>,
    /// Senders wait here for acks (window) and for the end.
    acked: Notify,
    /// Told when a receiver waits with acks pending (and when the reader
    /// queues the first of a batch): one timer makes the batch due later,
    /// so idle writers need not poll for it.
    ack_timer: Notify,
}

struct State {
    plan: Plan,
    /// Sent messages the peer has not acknowledged.
    unacked: Unacked,
    unacked_bytes: u64,
    /// Runs each link carried, oldest first, of unacknowledged messages
    /// (and of some acknowledged out of order: they leave once every older
    /// one is acknowledged; a failed link's are filtered).
    carried: Vec<VecDeque<Claim>>,
    /// Each link's backlog when its writer last looked: an idle writer
    /// does not look, so its partner drains the figure at the link's rate.
    backlog_seen: Vec<(u64, std::time::Instant)>,
    alive: Vec<bool>,
    /// Why each failed link failed.
    lost: Vec<Option<String>>,
    /// Bytes handed back to the plan by failed links.
    resent: u64,
    acks: VecDeque<u64>,
    /// `Delivered` reports for the peer; they ride with the acks.
    reports: Vec<Frame>,
    /// When the ack timer first saw the pending acks (a receiver went to
    /// wait, or a duplicate run was acknowledged): they are due
    /// [`ACK_DELAY`] later.
    acks_since: Option<std::time::Instant>,
    /// `Close` is due once every message is claimed; which links sent it.
    closing: bool,
    close_sent: Vec<bool>,
    close_pending: Vec<bool>,
    /// The endpoint was dropped: writers send what is due (acks) and stop.
    dropped: bool,
    /// A sender found the window full since the last ack: acks wake it.
    window_full: bool,
    error: Option<String>,
    // Receiving.
    assembling: HashMap<u64, Assembly>,
    ready: BTreeMap<u64, Bytes>,
    next_deliver: u64,
    peer_count: Option<u64>,
    /// Messages in order, waiting for `recv`. A message is acknowledged
    /// when `recv` takes it, so the sender's window bounds what waits here.
    inbox: VecDeque<(u64, Bytes)>,
    /// Tasks waiting in `recv`, woken when messages or the end arrive
    /// (kept here, under the lock `recv` takes anyway: a `Notify` costs a
    /// lock of its own each way).
    receivers: Vec<Waker>,
    /// More may come (the peer has not closed, some link works).
    inbox_open: bool,
}

/// Sent messages the peer has not acknowledged, by id. Ids are given in
/// order and mostly acknowledged in order: a ring from the oldest one
/// still held, not a map.
#[derive(Default)]
struct Unacked {
    /// The id of `msgs[0]`.
    first: u64,
    /// `None`: acknowledged, behind one that is not yet.
    msgs: VecDeque<Option<Bytes>>,
    held: usize,
}

impl Unacked {
    /// Holds message `id`, the next id given.
    fn insert(&mut self, id: u64, m: Bytes) {
        if self.msgs.is_empty() {
            self.first = id;
        }
        debug_assert_eq!(id, self.first + self.msgs.len() as u64, "ids come in order");
        self.msgs.push_back(Some(m));
        self.held += 1;
    }

    fn get(&self, id: u64) -> Option<&Bytes> {
        let i = usize::try_from(id.checked_sub(self.first)?).ok()?;
        self.msgs.get(i)?.as_ref()
    }

    fn remove(&mut self, id: u64) -> Option<Bytes> {
        let i = usize::try_from(id.checked_sub(self.first)?).ok()?;
        let m = self.msgs.get_mut(i)?.take()?;
        self.held -= 1;
        while let Some(None) = self.msgs.front() {
            self.msgs.pop_front();
            self.first += 1;
        }
        Some(m)
    }

    fn is_empty(&self) -> bool {
        self.held == 0
    }

    /// Ids from the oldest unacknowledged to the newest given.
    fn span(&self) -> u64 {
        self.msgs.len() as u64
    }

    fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.msgs.iter().zip(self.first..).filter(|(m, _)| m.is_some()).map(|(_, id)| id)
    }
}

struct Assembly {
    buf: BytesMut,
    offsets: HashSet<u64>,
    got: u64,
    /// When its first run arrived, and whether no other message was
    /// arriving meanwhile (then each link's part measures the link).
    first: Instant,
    alone: bool,
    /// Per link: bytes carried, and when its last run arrived.
    parts: Vec<(u64, Instant)>,
}

/// A link's part of a message must span this much, and carry this many
/// bytes, for the receiver to report it as a rate sample.
const REPORT_MIN_MICROS: u64 = 50;
const REPORT_MIN_BYTES: u64 = 8 * 1024;

impl Shared {
    fn wake_receivers(&self) {
        // Waking a task only queues it: no call back into this endpoint.
        for w in self.state.lock().expect("state").receivers.drain(..) {
            w.wake();
        }
    }

    fn wake_writers(&self) {
        for w in &self.work {
            w.notify_waiters();
        }
    }

    /// The link a short message goes on at once, with its sending state, if
    /// its writer is idle: nothing queued in the plan (nothing the message
    /// would overtake), nothing unsent on the link, little unacknowledged
    /// (else the writer weighs what the kernel says first).
    fn idle_link(&self, st: &State, len: usize) -> Option<(LinkId, MutexGuard<'_, LinkOut>)> {
        let link = st.plan.whole_link(len as u64)?;
        // Only tried: a writer holding it takes the state's lock next.
        let out = self.out[link].try_lock().ok()?;
        (out.unsent.is_none() && out.written.saturating_sub(out.acked_seen) <= MIN_AHEAD).then_some((link, out))
    }

    /// Sends `msg` whole on `link` (from [`Shared::idle_link`]) from the
    /// sending task: claimed, framed behind the pending acks and written
    /// under one lock of the state, without a task switch (a good part of
    /// a 1 KiB message's trip). What the socket does not take at once is
    /// the writer's.
    fn send_whole(&self, link: LinkId, mut st: MutexGuard<'_, State>, mut out: MutexGuard<'_, LinkOut>, msg: Bytes) {
        let c = st.plan.claim_whole(msg.len() as u64);
        let mut head = std::mem::take(&mut out.spare_head);
        st.take_acks(&mut head, &mut out.ids);
        Frame::Run { msg: c.msg, msg_len: msg.len() as u64, offset: 0, len: c.len }.encode(&mut head, &mut out.ids);
        st.carried[link].push_back(c);
        // Copied behind its header, the message itself is only held (a
        // clone of a `Bytes` made from a `Vec` allocates).
        let payload = if msg.len() <= COPY_PAYLOAD {
            head.extend_from_slice(&msg);
            Bytes::new()
        } else {
            msg.clone()
        };
        st.unacked.insert(c.msg, msg);
        drop(st);
        out.written += (head.len() + payload.len()) as u64;
        out.unsent = Some(Unsent::frame(head, Some((c, payload))));
        match out.try_flush(&self.wr[link]) {
            Ok(true) => {
                out.take_written();
                out.sent += u64::from(c.len);
                if out.written.saturating_sub(out.acked_seen) > MIN_AHEAD {
                    // What the kernel says of the link (for the next
                    // message's look and the rates), asked once this one is
                    // out, not before it: the next message finds it fresh.
                    if let Some(Some(rate)) = out.look(&self.wr[link]) {
                        self.state.lock().expect("state").plan.set_rate(link, rate);
                    }
                }
            }
            Ok(false) => {
                drop(out);
                self.work[link].notify_waiters();
            }
            Err(e) => {
                self.finish(link, &mut out, Err(e));
            }
        }
    }

    /// A short message for `link` goes out from the sending task itself
    /// when the link's writer is idle and the socket takes it at once: no
    /// task switch on its way out. Whatever is left (a frame the socket
    /// took only part of, more work) is the writer's.
    fn write_now(&self, link: LinkId) {
        let Ok(mut out) = self.out[link].try_lock() else {
            self.work[link].notify_waiters();
            return;
        };
        if out.unsent.is_none() {
            let (work, _) = decide(link, &mut out, self);
            out.unsent = Unsent::of(work);
        }
        let mut idle = None;
        if out.unsent.is_some() {
            match out.try_flush(&self.wr[link]) {
                Ok(false) => {}
                r => match self.finish(link, &mut out, r.map(drop)) {
                    Some(plan_idle) => idle = Some(plan_idle),
                    None => return,
                },
            }
        }
        let idle = out.unsent.is_none() && idle.unwrap_or_else(|| self.state.lock().expect("state").plan.is_idle());
        drop(out);
        if !idle {
            self.work[link].notify_waiters();
        }
    }

    /// `link` wrote its unsent frame (or failed to): the frame's effects.
    /// `None` if the link failed, else whether the plan is idle.
    fn finish(&self, link: LinkId, out: &mut LinkOut, r: io::Result<()>) -> Option<bool> {
        let Some(u) = out.take_written() else { return Some(self.state.lock().expect("state").plan.is_idle()) };
        let mut st = self.state.lock().expect("state");
        if let Err(e) = r {
            st.fail_link(link, e.to_string());
            drop(st);
            self.wake_writers();
            self.acked.notify_waiters();
            return None;
        }
        let idle = st.plan.is_idle();
        if u.close {
            st.close_sent[link] = true;
            drop(st);
            self.acked.notify_waiters();
        } else if let Some(c) = u.run {
            out.sent += u64::from(c.len);
            if st.closing && idle {
                // Writers waiting with nothing to claim now owe their Close.
                drop(st);
                self.wake_writers();
            }
        }
        Some(idle)
    }
}

/// Per-link figures of one endpoint's sending side.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Whether each link still works.
    pub alive: Vec<bool>,
    /// Why each link that failed did.
    pub lost: Vec<Option<String>>,
    /// Payload bytes each link sent.
    pub sent: Vec<u64>,
    /// Bytes sent again because the link carrying them failed.
    pub resent: u64,
    /// Each link's delivery rate as the plan sees it (bytes/s; 0 until
    /// measured).
    pub rates: Vec<f64>,
}

/// Why a striped channel failed.
fn broken(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::BrokenPipe, format!("ddnet: {why}"))
}

impl Striped {
    /// Connects one link per `(local, remote)` pair (`local` `None`: the
    /// OS picks). Links that cannot connect are left out; at least one
    /// must connect.
    pub async fn connect(routes: &[(Option<IpAddr>, SocketAddr)]) -> io::Result<Striped> {
        let mut socks = vec![];
        let mut last_err = None;
        for &(local, remote) in routes {
            match open(local, remote).await {
                Ok(s) => socks.push(s),
                Err(e) => last_err = Some(io::Error::new(e.kind(), format!("{remote}: {e}"))),
            }
        }
        if socks.is_empty() {
            return Err(last_err.unwrap_or_else(|| broken("no route given")));
        }
        let session: u64 = rand::random();
        let count = socks.len() as u32;
        for (i, s) in socks.iter_mut().enumerate() {
            let mut hello = vec![];
            Frame::Hello { session, index: i as u32, count }.encode(&mut hello, &mut LinkIds::default());
            s.write_all(&hello).await?;
        }
        Ok(Striped::start(socks))
    }

    /// Links in use when the channel started.
    pub fn links(&self) -> usize {
        self.links
    }

    /// The whole state, for diagnosing a stuck channel.
    #[doc(hidden)]
    pub fn debug_state(&self) -> String {
        let st = self.shared.state.lock().expect("state");
        let asm: Vec<(u64, u64, usize)> = st.assembling.iter().map(|(k, a)| (*k, a.got, a.buf.len())).collect();
        format!(
            "plan {:?}\nunacked {:?} ({} B)\ncarried {:?}\nalive {:?} acks {:?} closing {} close_sent {:?} \
             dropped {} error {:?}\nassembling {asm:?} ready {:?} next_deliver {} peer_count {:?}",
            st.plan,
            st.unacked.ids().collect::<Vec<_>>(),
            st.unacked_bytes,
            st.carried.iter().map(VecDeque::len).collect::<Vec<_>>(),
            st.alive,
            st.acks,
            st.closing,
            st.close_sent,
            st.dropped,
            st.error,
            st.ready.keys().collect::<Vec<_>>(),
            st.next_deliver,
            st.peer_count
        )
    }

    /// What each link has done so far.
    pub fn stats(&self) -> Stats {
        let (alive, lost, resent, rates) = {
            let st = self.shared.state.lock().expect("state");
            let rates = (0..st.alive.len()).map(|l| st.plan.measured_rate(l)).collect();
            (st.alive.clone(), st.lost.clone(), st.resent, rates)
        };
        // Not under the state's lock: a writer takes that one holding its `out`.
        let sent = self.shared.out.iter().map(|o| o.lock().expect("out").sent).collect();
        Stats { alive, lost, sent, resent, rates }
    }

    fn start(socks: Vec<TcpStream>) -> Striped {
        let n = socks.len();
        let (mut readers, mut writers, mut out) = (vec![], vec![], vec![]);
        for s in socks {
            let _ = s.set_nodelay(true);
            let _ = limit_unsent(&s, UNSENT_LOW_WATER);
            let meter =
                tcp_progress(&s).map_or(Meter { acked: 0, busy_us: 0 }, |(acked, busy_us)| Meter { acked, busy_us });
            let (rd, wr) = s.into_split();
            readers.push(rd);
            writers.push(wr);
            let acked_seen = meter.acked;
            out.push(Mutex::new(LinkOut {
                unsent: None,
                sent: 0,
                written: 0,
                acked_seen,
                meter,
                spare_head: Vec::with_capacity(64),
                ids: LinkIds::default(),
            }));
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                plan: Plan::new(n, PlanConfig::default()),
                unacked: Unacked::default(),
                unacked_bytes: 0,
                carried: vec![VecDeque::new(); n],
                backlog_seen: vec![(0, std::time::Instant::now()); n],
                alive: vec![true; n],
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
            }),
            wr: writers,
            out,
            work: (0..n).map(|_| Notify::new()).collect(),
            acked: Notify::new(),
            ack_timer: Notify::new(),
        });
        tokio::spawn(ack_timer(shared.clone()));
        for (link, rd) in readers.into_iter().enumerate() {
            tokio::spawn(write_link(link, shared.clone()));
            tokio::spawn(read_link(link, rd, shared.clone()));
        }
        Striped { shared, links: n }
    }

    /// Queues one message; waits while too much is unacknowledged. Fails
    /// once every link has failed.
    pub async fn send(&self, msg: Bytes) -> io::Result<()> {
        if msg.len() as u64 > MAX_MESSAGE {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "ddnet: message over 1 GiB"));
        }
        // Registered for acks only once the window is found full.
        let mut wait = None;
        loop {
            {
                let mut st = self.shared.state.lock().expect("state");
                if let Some(e) = &st.error {
                    return Err(broken(e));
                }
                if st.closing {
                    return Err(broken("send after close"));
                }
                let room = has_room(&st.unacked, st.unacked_bytes, &msg);
                if room {
                    st.unacked_bytes += held(&msg);
                    if let Some((link, out)) = self.shared.idle_link(&st, msg.len()) {
                        self.shared.send_whole(link, st, out, msg);
                        return Ok(());
                    }
                    let id = st.plan.push(msg.len() as u64);
                    st.unacked.insert(id, msg);
                    // A short message wakes only the writer it is for.
                    let only = st.plan.sole_link(id);
                    drop(st);
                    match only {
                        Some(link) => self.shared.write_now(link),
                        None => self.shared.wake_writers(),
                    }
                    return Ok(());
                }
                st.window_full = true;
            }
            match wait.as_mut() {
                None => {
                    // Look again once registered: an ack may have come meanwhile.
                    let w = wait.insert(Box::pin(self.shared.acked.notified()));
                    w.as_mut().enable();
                }
                Some(w) => {
                    w.await;
                    wait = None;
                }
            }
        }
    }

    /// The next message, in the order the peer sent them; `None` once the
    /// peer closed and everything it sent was delivered. An error if the
    /// links failed first.
    pub async fn recv(&self) -> io::Result<Option<Bytes>> {
        std::future::poll_fn(|cx| self.try_recv(cx.waker()).map_or(Poll::Pending, Poll::Ready)).await
    }

    /// What `recv` returns, if it need not wait; if it must, `waker` is
    /// woken when it need not.
    fn try_recv(&self, waker: &Waker) -> Option<io::Result<Option<Bytes>>> {
        let mut st = self.shared.state.lock().expect("state");
        if let Some((id, m)) = st.inbox.pop_front() {
            st.queue_ack(id);
            let due = st.acks_due_now();
            drop(st);
            if due {
                self.shared.wake_writers();
            }
            return Some(Ok(Some(m)));
        }
        if st.inbox_open {
            if !st.receivers.iter().any(|w| w.will_wake(waker)) {
                st.receivers.push(waker.clone());
            }
            // About to wait: acks no message of ours took along go once
            // due. (Not armed as each message is taken: the caller usually
            // replies first, and a wake-up a message is a good part of a
            // 1 KiB round trip.)
            let pending = !st.acks.is_empty();
            drop(st);
            if pending {
                self.shared.ack_timer.notify_one();
            }
            return None;
        }
        Some(match (&st.error, st.peer_count) {
            (_, Some(n)) if st.next_deliver == n => Ok(None),
            (Some(e), _) => Err(broken(e)),
            _ => Err(broken("the peer went away")),
        })
    }

    /// Sends no more: waits until the peer has acknowledged every message
    /// (so the data is delivered when this returns).
    pub async fn close(&self) -> io::Result<()> {
        self.shared.state.lock().expect("state").closing = true;
        self.shared.wake_writers();
        loop {
            let wait = self.shared.acked.notified();
            tokio::pin!(wait);
            wait.as_mut().enable();
            {
                let st = self.shared.state.lock().expect("state");
                // Done when the peer has everything and every live link
                // carried our Close (so the peer knows the count even if we
                // exit right away).
                let closed = (0..st.alive.len()).all(|l| !st.alive[l] || st.close_sent[l]);
                if st.unacked.is_empty() && st.plan.is_idle() && closed {
                    return Ok(());
                }
                if let Some(e) = &st.error {
                    return Err(broken(e));
                }
            }
            wait.await;
        }
    }
}

impl Drop for Striped {
    /// Pending acks still go out, then the links close. Messages not yet
    /// sent are lost: call [`Striped::close`] first.
    fn drop(&mut self) {
        self.shared.state.lock().expect("state").dropped = true;
        self.shared.wake_writers();
        self.shared.ack_timer.notify_one();
    }
}

/// Accepts striped channels on one or more addresses.
pub struct StripeListener {
    listeners: Vec<TcpListener>,
}

impl StripeListener {
    pub async fn bind(addrs: &[SocketAddr]) -> io::Result<StripeListener> {
        let mut listeners = vec![];
        for a in addrs {
            listeners.push(TcpListener::bind(a).await.map_err(|e| io::Error::new(e.kind(), format!("{a}: {e}")))?);
        }
        Ok(StripeListener { listeners })
    }

    /// The bound addresses (with the real ports when 0 was asked).
    pub fn local_addrs(&self) -> io::Result<Vec<SocketAddr>> {
        self.listeners.iter().map(|l| l.local_addr()).collect()
    }

    /// The next channel: waits until every link of one session has arrived
    /// (on any of the addresses). Connections that do not greet properly
    /// are dropped.
    pub async fn accept(&self) -> io::Result<Striped> {
        let (tx, mut rx) = mpsc::channel::<(u64, u32, u32, TcpStream)>(64);
        let mut tasks = tokio::task::JoinSet::new();
        let mut pending: HashMap<u64, Vec<Option<TcpStream>>> = HashMap::new();
        loop {
            let accepts = self.listeners.iter().map(|l| Box::pin(l.accept()));
            tokio::select! {
                (r, _, _) = futures_select_all(accepts) => {
                    let (sock, _) = r?;
                    let tx = tx.clone();
                    tasks.spawn(async move {
                        let mut sock = sock;
                        let hello = tokio::time::timeout(HELLO_TIMEOUT, Frame::read_hello(&mut sock)).await;
                        if let Ok(Ok(Frame::Hello { session, index, count })) = hello {
                            let _ = tx.send((session, index, count, sock)).await;
                        }
                    });
                }
                Some((session, index, count, sock)) = rx.recv() => {
                    if count == 0 || index >= count || count > 64 {
                        continue;
                    }
                    let slots = pending.entry(session).or_insert_with(|| (0..count).map(|_| None).collect());
                    if slots.len() != count as usize {
                        continue;
                    }
                    slots[index as usize] = Some(sock);
                    if slots.iter().all(Option::is_some) {
                        let socks = pending.remove(&session).expect("present").into_iter().flatten().collect();
                        return Ok(Striped::start(socks));
                    }
                }
            }
        }
    }
}

/// The first of several futures to finish (all are polled each time).
async fn futures_select_all<F: std::future::Future + Unpin>(futs: impl Iterator<Item = F>) -> (F::Output, usize, ()) {
    let mut futs: Vec<F> = futs.collect();
    std::future::poll_fn(move |cx| {
        for (i, f) in futs.iter_mut().enumerate() {
            if let std::task::Poll::Ready(v) = std::pin::Pin::new(f).poll(cx) {
                return std::task::Poll::Ready((v, i, ()));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

async fn open(local: Option<IpAddr>, remote: SocketAddr) -> io::Result<TcpStream> {
    tokio::time::timeout(HELLO_TIMEOUT, connect_from(local, remote))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?
}

/// What a writer does next.
enum Work {
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
    fn next_work(&mut self, link: LinkId, may_claim: bool, backlog: u64, mut head: Vec<u8>, ids: &mut LinkIds) -> Work {
        if !self.alive[link] {
            return Work::Done;
        }
        // Pending acks ride in front of whatever this link writes next: one
        // write, not one per frame. Alone they wait a little (a reply is
        // usually about to be sent), unless many are pending: whether they
        // are due is asked (it reads the clock) only when no run takes them.
        let take_due_acks = |st: &mut State, head: &mut Vec<u8>, ids: &mut LinkIds| {
            if st.acks_due() {
                st.take_acks(head, ids);
            }
        };
        // Nothing to claim now: the acks go alone, or the writer looks again soon.
        let paced = |head: Vec<u8>| if head.is_empty() { Work::Paced } else { Work::Frame(head, None) };
        if !may_claim && !self.plan.is_idle() {
            take_due_acks(self, &mut head, ids);
            return paced(head);
        }
        // Backlogs weigh only pair decisions (and reading the clock for
        // them is a good part of a short message's cost).
        let pairs = !self.plan.one_link_work();
        if pairs {
            self.note_backlog(link, backlog);
            self.drain_others(link);
        }
        match self.plan.next(link) {
            Next::Run(c) => {
                let Some(data) = self.unacked.get(c.msg) else {
                    // Acknowledged meanwhile (a redo of a run that did arrive).
                    take_due_acks(self, &mut head, ids);
                    return Work::Frame(head, None);
                };
                let (payload, msg_len) =
                    (data.slice(c.offset as usize..c.offset as usize + c.len as usize), data.len());
                self.take_acks(&mut head, ids);
                Frame::Run { msg: c.msg, msg_len: msg_len as u64, offset: c.offset, len: c.len }.encode(&mut head, ids);
                if pairs {
                    // The partner weighs this run as ours from now on.
                    self.note_backlog(link, backlog + (head.len() + payload.len()) as u64);
                }
                self.carried[link].push_back(c);
                return Work::Frame(head, Some((c, payload)));
            }
            Next::Later => {
                take_due_acks(self, &mut head, ids);
                return paced(head);
            }
            Next::Nothing => {}
        }
        take_due_acks(self, &mut head, ids);
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
    fn take_acks(&mut self, head: &mut Vec<u8>, ids: &mut LinkIds) {
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
    fn nothing_for(&self, link: LinkId) -> bool {
        let close_due = self.closing && !self.close_sent[link] && !self.close_pending[link];
        self.alive[link] && self.plan.is_idle() && !close_due && !self.dropped && !self.acks_due()
    }

    fn acks_due(&self) -> bool {
        self.acks_due_now() || (!self.acks.is_empty() && self.acks_since.is_some_and(|t| t.elapsed() >= ACK_DELAY))
    }

    /// Acks due whatever the time: too many, or an end near. (Those due by
    /// their age are the ack timer's: it wakes the writers then.)
    fn acks_due_now(&self) -> bool {
        !self.acks.is_empty()
            && (self.acks.len() >= ACK_BATCH || self.closing || self.dropped || self.peer_count.is_some())
    }

    fn note_backlog(&mut self, link: LinkId, bytes: u64) {
        self.plan.set_backlog(link, bytes);
        self.backlog_seen[link] = (bytes, std::time::Instant::now());
    }

    /// The other links' backlogs as they are likely now: what each had when
    /// its writer last looked, less what it delivered since at its rate.
    fn drain_others(&mut self, link: LinkId) {
        for l in (0..self.alive.len()).filter(|&l| l != link && self.alive[l]) {
            let (bytes, at) = self.backlog_seen[l];
            let gone = self.plan.measured_rate(l) * at.elapsed().as_secs_f64();
            self.plan.set_backlog(l, bytes.saturating_sub(gone as u64));
        }
    }

    fn fail_link(&mut self, link: LinkId, why: String) {
        if !std::mem::replace(&mut self.alive[link], false) {
            return;
        }
        self.lost[link] = Some(why.clone());
        let lost: Vec<Claim> =
            std::mem::take(&mut self.carried[link]).into_iter().filter(|c| self.unacked.get(c.msg).is_some()).collect();
        self.resent += lost.iter().map(|c| u64::from(c.len)).sum::<u64>();
        self.plan.on_failed(link, lost);
        if !self.alive.iter().any(|&a| a) {
            self.error = Some(format!("every link failed (last: {why})"));
            self.inbox_open = false;
        }
    }

    fn on_ack(&mut self, msg: u64) {
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

    fn queue_ack(&mut self, msg: u64) {
        self.acks.push_back(msg);
    }

    /// A run arrived: place it; deliver what is complete, in order.
    fn on_run(&mut self, link: LinkId, msg: u64, msg_len: u64, offset: u64, payload: &[u8]) -> Result<(), String> {
        if msg < self.next_deliver || self.ready.contains_key(&msg) {
            // Sent again after a link failed: already have it.
            self.queue_ack(msg);
            return Ok(());
        }
        if !takes(msg, self.next_deliver) {
            return Err(format!("message {msg} is far ahead of {}", self.next_deliver));
        }
        let now = Instant::now();
        if !self.assembling.contains_key(&msg) {
            let alone = self.assembling.is_empty();
            for a in self.assembling.values_mut() {
                a.alone = false;
            }
            let parts = vec![(0, now); self.alive.len()];
            let a = Assembly {
                buf: BytesMut::zeroed(msg_len as usize),
                offsets: HashSet::new(),
                got: 0,
                first: now,
                alone,
                parts,
            };
            self.assembling.insert(msg, a);
        }
        let a = self.assembling.get_mut(&msg).expect("present");
        if a.buf.len() as u64 != msg_len {
            return Err(format!("message {msg}: length {msg_len}, earlier {}", a.buf.len()));
        }
        if a.offsets.insert(offset) {
            a.buf[offset as usize..offset as usize + payload.len()].copy_from_slice(payload);
            a.got += payload.len() as u64;
            a.parts[link] = (a.parts[link].0 + payload.len() as u64, now);
        }
        if a.got == msg_len {
            let a = self.assembling.remove(&msg).expect("present");
            if a.alone {
                self.report(&a);
            }
            self.complete(msg, a.buf.freeze());
        }
        Ok(())
    }

    /// A run that is a whole message (most short messages): no assembly.
    fn on_whole(&mut self, msg: u64, data: Bytes) -> Result<(), String> {
        if msg < self.next_deliver || self.ready.contains_key(&msg) {
            self.queue_ack(msg);
            return Ok(());
        }
        if !takes(msg, self.next_deliver) {
            return Err(format!("message {msg} is far ahead of {}", self.next_deliver));
        }
        if !self.assembling.is_empty() {
            // Sent whole again after a link failed mid-way: the parts are moot.
            self.assembling.remove(&msg);
            for a in self.assembling.values_mut() {
                a.alone = false;
            }
        }
        self.complete(msg, data);
        Ok(())
    }

    /// Message `msg` is here: deliver what is in order.
    fn complete(&mut self, msg: u64, data: Bytes) {
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
    fn report(&mut self, a: &Assembly) {
        for (link, &(bytes, last)) in a.parts.iter().enumerate() {
            let micros = last.duration_since(a.first).as_micros() as u64;
            if bytes >= REPORT_MIN_BYTES && micros >= REPORT_MIN_MICROS {
                self.reports.push(Frame::Delivered { link: link as u32, bytes, micros });
            }
        }
    }

    fn check_closed(&mut self) {
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
struct Meter {
    acked: u64,
    busy_us: u64,
}

/// Busy time one rate sample spans, and the bytes it must have carried to
/// count.
const METER_SPAN_US: u64 = 20_000;
const METER_MIN_BYTES: u64 = 256 * 1024;

impl Meter {
    /// A rate sample (bytes/s) once enough busy time has passed.
    fn sample(&mut self, acked: u64, busy_us: u64) -> Option<f64> {
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

/// Wakes the writers [`ACK_DELAY`] after it is told of a batch of acks
/// (a receiver waits with acks pending, or a duplicate run was
/// acknowledged), unless a run took the acks along meanwhile. It first lets the
/// tasks already woken run: a reply usually goes out at once and takes the
/// acks, and then no timer is armed (arming one costs more than the whole
/// exchange of a small message on a VM). Ends once the endpoint is dropped
/// or every link failed.
async fn ack_timer(shared: Arc<Shared>) {
    loop {
        shared.ack_timer.notified().await;
        // The batch being waited for (when this timer first saw it), and
        // how many turns it has had.
        let (mut batch, mut turns) = (None, 0);
        loop {
            let since = {
                let mut st = shared.state.lock().expect("state");
                if st.dropped || !st.alive.iter().any(|&a| a) {
                    return;
                }
                // With runs left to claim, a writer takes the acks along
                // (or sends them alone once due, as it looks again).
                if !st.plan.is_idle() || st.acks.is_empty() {
                    break;
                }
                // The acks' age counts from here: the clock is read once a
                // batch, not as each ack is queued.
                *st.acks_since.get_or_insert_with(Instant::now)
            };
            if batch != Some(since) {
                (batch, turns) = (Some(since), 0);
            }
            turns += 1;
            if turns <= ACK_YIELDS {
                tokio::task::yield_now().await;
                continue;
            }
            tokio::time::sleep_until((since + ACK_DELAY).into()).await;
            shared.wake_writers();
            break;
        }
    }
}

/// A link's sending state.
struct LinkOut {
    /// What is left to write of the frame being written.
    unsent: Option<Unsent>,
    /// Payload bytes the link wrote.
    sent: u64,
    /// Bytes put on the link (headers included).
    written: u64,
    /// Bytes the peer had acknowledged when the kernel was last asked.
    acked_seen: u64,
    meter: Meter,
    /// The last frame's header buffer, for the next one (no allocation a
    /// frame).
    spare_head: Vec<u8>,
    /// What the link carried, as its frames were encoded: they are written
    /// in that order (under this lock), so the peer's reader sees the same.
    ids: LinkIds,
}

/// A frame being written: header (acks, reports, run header) and payload.
struct Unsent {
    head: Vec<u8>,
    /// How much of `head` is written.
    head_at: usize,
    payload: Bytes,
    /// The run it carries, or whether it is the closing frame.
    run: Option<Claim>,
    close: bool,
}

impl Unsent {
    /// The frame a piece of work writes, if any.
    fn of(work: Work) -> Option<Unsent> {
        match work {
            Work::Frame(head, run) if !head.is_empty() || run.is_some() => Some(Unsent::frame(head, run)),
            Work::Close(head) => Some(Unsent { head, head_at: 0, payload: Bytes::new(), run: None, close: true }),
            _ => None,
        }
    }

    /// A frame: its header, and the run it carries if any.
    fn frame(mut head: Vec<u8>, run: Option<(Claim, Bytes)>) -> Unsent {
        let (run, mut payload) = run.map_or((None, Bytes::new()), |(c, p)| (Some(c), p));
        if payload.len() <= COPY_PAYLOAD {
            head.extend_from_slice(&payload);
            payload = Bytes::new();
        }
        Unsent { head, head_at: 0, payload, run, close: false }
    }

    fn is_written(&self) -> bool {
        self.head_at == self.head.len() && self.payload.is_empty()
    }

    fn slices(&self) -> [io::IoSlice<'_>; 2] {
        [io::IoSlice::new(&self.head[self.head_at..]), io::IoSlice::new(&self.payload)]
    }

    fn advance(&mut self, n: usize) {
        let from_head = n.min(self.head.len() - self.head_at);
        self.head_at += from_head;
        self.payload.advance(n - from_head);
    }
}

impl LinkOut {
    /// Asks the kernel how far the peer has acknowledged (`acked_seen`)
    /// and feeds the meter: `None` if the kernel would not say, else the
    /// rate sample taken, if any.
    fn look(&mut self, wr: &OwnedWriteHalf) -> Option<Option<f64>> {
        let (acked, busy_us) = tcp_progress(wr.as_ref())?;
        self.acked_seen = acked;
        Some(self.meter.sample(acked, busy_us))
    }

    /// The frame just written (or failed), its header buffer kept for the
    /// next one.
    fn take_written(&mut self) -> Option<Unsent> {
        let mut u = self.unsent.take()?;
        u.head.clear();
        self.spare_head = std::mem::take(&mut u.head);
        Some(u)
    }

    /// Writes the unsent frame to `wr` without waiting: true once all of
    /// it is.
    fn try_flush(&mut self, wr: &OwnedWriteHalf) -> io::Result<bool> {
        let Some(u) = &mut self.unsent else { return Ok(true) };
        while !u.is_written() {
            match wr.as_ref().try_io(Interest::WRITABLE, || send_parts(wr.as_ref(), &u.slices())) {
                Ok(n) => u.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// Payloads up to this long are copied behind their header: one buffer
/// goes out with `send`, which costs the kernel less than a two-part
/// `sendmsg` (a good part of a short message's cost), and copying a few
/// KiB costs less than that. (At 16 KiB the copy costs more: a 16 KiB
/// ping-pong over loopback went from 0.981 to 0.989 of one TCP stream's
/// speed when this was lowered from 16 to 4 KiB.)
const COPY_PAYLOAD: usize = 4 * 1024;

/// One socket call for header and payload (`send` when the payload is
/// empty or was copied behind the header, else `sendmsg`), without the
/// file layer `write` and `writev` go through.
fn send_parts(sock: &TcpStream, parts: &[io::IoSlice<'_>; 2]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let flags = libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT;
    let n = if parts[1].is_empty() {
        // SAFETY: the buffer is valid for its length during the call.
        unsafe { libc::send(sock.as_raw_fd(), parts[0].as_ptr().cast(), parts[0].len(), flags) }
    } else {
        // SAFETY: msghdr is plain data; IoSlice is ABI-compatible with
        // iovec, and the slices outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = parts.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = parts.len() as _;
        unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, flags) }
    };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        0 => Err(io::ErrorKind::WriteZero.into()),
        n => Ok(n as usize),
    }
}

/// What `link` writes next, and whether runs are left to claim after it.
fn decide(link: LinkId, out: &mut LinkOut, shared: &Shared) -> (Work, bool) {
    let mut st = shared.state.lock().expect("state");
    if st.nothing_for(link) {
        return (Work::Wait, false);
    }
    // At most this much is unacknowledged (acks only grow).
    let mut backlog = out.written.saturating_sub(out.acked_seen);
    // Short messages and little in flight: the claim is allowed whatever
    // the kernel says, and no partner weighs our backlog, so a short
    // message goes out under this one lock, without a syscall before it.
    let may_claim = if st.plan.one_link_work() && backlog <= MIN_AHEAD {
        true
    } else {
        drop(st);
        let looked = out.look(&shared.wr[link]);
        st = shared.state.lock().expect("state");
        match looked {
            Some(rate) => {
                backlog = out.written.saturating_sub(out.acked_seen);
                if let Some(rate) = rate {
                    st.plan.set_rate(link, rate);
                }
                backlog <= MIN_AHEAD.max((st.plan.measured_rate(link) * AHEAD_SECS) as u64)
            }
            None => true,
        }
    };
    let work = st.next_work(link, may_claim, backlog, std::mem::take(&mut out.spare_head), &mut out.ids);
    out.written += match &work {
        Work::Frame(head, run) => (head.len() + run.as_ref().map_or(0, |(_, p)| p.len())) as u64,
        Work::Close(head) => head.len() as u64,
        _ => 0,
    };
    (work, !st.plan.is_idle())
}

/// A link's writer: writes what the plan gives the link until the link
/// fails or the endpoint is done, then closes the link's sending side.
async fn write_link(link: LinkId, shared: Arc<Shared>) {
    loop {
        let wait = shared.work[link].notified();
        tokio::pin!(wait);
        wait.as_mut().enable();
        let step = write_step(link, &mut shared.out[link].lock().expect("out"), &shared);
        match step {
            Step::Wrote => {}
            Step::Full => {
                // The frame stays unsent; whoever holds `out` next goes on.
                if let Err(e) = shared.wr[link].writable().await {
                    let mut out = shared.out[link].lock().expect("out");
                    if shared.finish(link, &mut out, Err(e)).is_none() {
                        break;
                    }
                }
            }
            Step::Wait => wait.await,
            Step::Paced => {
                let _ = tokio::time::timeout(PACE_POLL, wait).await;
            }
            Step::Done => break,
        }
    }
    // The peer's reader sees the end of the link.
    shut_write(&shared.wr[link]);
}

/// What a writer does after one step.
enum Step {
    /// Wrote a frame: looks for more at once.
    Wrote,
    /// The socket is full: waits until it takes more.
    Full,
    /// Nothing to write: waits to be told.
    Wait,
    /// Far enough ahead: looks again soon.
    Paced,
    /// The link failed or the endpoint is done.
    Done,
}

/// Writes `link`'s unsent frame, or decides the next and writes it, as
/// far as the socket takes it without waiting.
fn write_step(link: LinkId, out: &mut LinkOut, shared: &Shared) -> Step {
    if out.unsent.is_none() {
        let (work, more) = decide(link, out, shared);
        match work {
            Work::Done => return Step::Done,
            Work::Wait => return Step::Wait,
            Work::Paced => return Step::Paced,
            Work::Frame(_, Some(_)) if more => {
                // A partner that left this segment to us looks again.
                shared.wake_writers();
            }
            _ => {}
        }
        out.unsent = Unsent::of(work);
    }
    match out.try_flush(&shared.wr[link]) {
        Ok(false) => Step::Full,
        r => match shared.finish(link, out, r.map(drop)) {
            Some(_) => Step::Wrote,
            None => Step::Done,
        },
    }
}

/// Closes a link's sending side (the peer reads its end); the socket
/// stays open for reading.
fn shut_write(wr: &OwnedWriteHalf) {
    // SAFETY: shutdown on a socket this endpoint owns.
    unsafe { libc::shutdown(std::os::fd::AsRawFd::as_raw_fd(wr.as_ref()), libc::SHUT_WR) };
}

/// What a batch of frames asks of the other tasks.
#[derive(Default)]
struct Woken {
    /// Acks are due: the writers send them.
    writers: bool,
    /// The first ack of a batch was queued: the ack timer starts.
    ack_timer: bool,
    /// Acks arrived: senders waiting for window or the end look again.
    senders: bool,
    /// Messages arrived, or the end: receivers look again.
    receivers: bool,
}

/// Applies one frame (a run's payload in `payload`) from `link`; an ack
/// only joins `acks` (see [`apply_acks`]).
fn on_frame(
    st: &mut State,
    link: LinkId,
    frame: Frame,
    payload: &[u8],
    w: &mut Woken,
    acks: &mut Vec<u64>,
) -> Result<(), String> {
    let (first, inbox) = (st.acks.is_empty(), st.inbox.len());
    match frame {
        Frame::Run { msg, msg_len, offset, len } if offset == 0 && u64::from(len) == msg_len => {
            // A whole message: no assembly.
            st.on_whole(msg, Bytes::copy_from_slice(payload))?;
        }
        Frame::Run { msg, msg_len, offset, .. } => st.on_run(link, msg, msg_len, offset, payload)?,
        Frame::Ack { msg } => acks.push(msg),
        Frame::Close { count, delivered } => {
            // What the peer delivered is acknowledged, whichever link its
            // acks were on (one that failed may have lost some).
            acks.extend(st.unacked.ids().filter(|&m| m < delivered));
            st.peer_count = Some(count);
            st.check_closed();
            w.receivers |= !st.inbox_open;
            // Our pending acks are due now: the peer is waiting for them.
            w.writers |= !st.acks.is_empty();
        }
        Frame::Delivered { link, bytes, micros } => {
            if (link as usize) < st.alive.len() && micros > 0 {
                st.plan.set_rate(link as usize, bytes as f64 * 1e6 / micros as f64);
            }
        }
        Frame::Hello { .. } => return Err("Hello in mid-stream".to_string()),
    }
    if matches!(frame, Frame::Run { .. }) {
        w.receivers |= st.inbox.len() > inbox || !st.inbox_open;
        w.writers |= st.acks_due_now();
        w.ack_timer |= first && !st.acks.is_empty();
    }
    Ok(())
}

/// What [`apply_frames`] did.
struct Applied {
    woken: Woken,
    /// Bytes the frames applied took.
    took: usize,
    /// A long run whose header came (and its header's length): its reader
    /// reads the rest straight.
    long: Option<(Frame, usize)>,
    /// A waiting receiver was woken.
    delivered: bool,
}

/// Lets the tasks already woken run before this one goes on: a wake of
/// this task, not the runtime's `yield_now` (which waits for the next
/// look at the kernel, a syscall).
async fn yield_once() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if std::mem::replace(&mut yielded, true) {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// Acks that arrived: the messages they name are let go.
fn apply_acks(st: &mut State, acks: &mut Vec<u64>, w: &mut Woken) {
    if acks.is_empty() {
        return;
    }
    for msg in acks.drain(..) {
        st.on_ack(msg);
    }
    // Only `send` with a full window and `close` wait for acks.
    w.senders |= std::mem::take(&mut st.window_full) || st.closing;
}

/// Applies every whole frame at the front of `buf` (under one lock); what
/// is left is the start of the next frame. The acks among them are applied
/// too, unless a waiting receiver was woken: then they stay in `acks` for
/// after its turn (letting go of what they acknowledge can wait, the reply
/// the receiver is about to send cannot).
fn apply_frames(
    shared: &Shared,
    link: LinkId,
    buf: &[u8],
    ids: &mut LinkIds,
    acks: &mut Vec<u64>,
) -> Result<Applied, String> {
    let mut w = Woken::default();
    let mut st = None;
    let mut at = 0;
    let mut long = None;
    while let Some((frame, head)) = Frame::parse(&buf[at..], ids).map_err(|e| e.to_string())? {
        let whole = head + if let Frame::Run { len, .. } = frame { len as usize } else { 0 };
        if buf.len() - at < whole {
            if whole > READ_CHUNK / 2 {
                long = Some((frame, head));
            }
            break;
        }
        let st = st.get_or_insert_with(|| shared.state.lock().expect("state"));
        on_frame(st, link, frame, &buf[at + head..at + whole], &mut w, acks)?;
        ids.carried(&frame);
        at += whole;
    }
    let Some(mut st) = st else { return Ok(Applied { woken: w, took: at, long, delivered: false }) };
    // Under the lock already held (waking a task only queues it).
    let delivered = w.receivers && !st.receivers.is_empty();
    if w.receivers {
        st.receivers.drain(..).for_each(Waker::wake);
        w.receivers = false;
    }
    if !delivered {
        apply_acks(&mut st, acks, &mut w);
    }
    Ok(Applied { woken: w, took: at, long, delivered })
}

/// Bytes a link's reader asks the socket for at once.
const READ_CHUNK: usize = 256 * 1024;

impl Woken {
    fn wake(&self, shared: &Shared) {
        if self.receivers {
            shared.wake_receivers();
        }
        if self.senders {
            shared.acked.notify_waiters();
        }
        if self.writers {
            shared.wake_writers();
        } else if self.ack_timer {
            shared.ack_timer.notify_one();
        }
    }
}

/// Why a link's reader stopped.
enum LinkEnd {
    /// The peer closed the connection (an orderly end after its `Close`).
    PeerClosed,
    Failed(String),
}

impl std::fmt::Display for LinkEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkEnd::PeerClosed => f.write_str("closed by the peer"),
            LinkEnd::Failed(why) => f.write_str(why),
        }
    }
}

/// A link's reader: reads what the socket has, applies every whole frame
/// in it under one lock (a short message and the ack riding in front of
/// it cost one), and wakes whoever the frames concern. When that is a
/// waiting receiver, the receiver runs first and the reader's own rest
/// (the acks, the next look at the socket) after it: a receiver that
/// answers at once has its reply out sooner, and what the reader does
/// then overlaps the peer's work. A long run is read past the buffer,
/// straight into a payload buffer of its own.
async fn read_link(link: LinkId, mut rd: OwnedReadHalf, shared: Arc<Shared>) {
    // What the socket gave; frames from `at` on are not applied yet.
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut at = 0;
    let mut payload = vec![];
    // Acks read but not applied yet.
    let mut acks = vec![];
    // What the link carried, from the frames applied.
    let mut ids = LinkIds::default();
    let why = loop {
        let long = match apply_frames(&shared, link, &buf[at..], &mut ids, &mut acks) {
            Ok(a) => {
                a.woken.wake(&shared);
                at += a.took;
                if a.delivered {
                    // The receiver goes first: what this reader does next
                    // (the acks, a look at the socket, a wait for it) then
                    // happens after the receiver's reply went out, not
                    // before it.
                    yield_once().await;
                    let mut w = Woken::default();
                    apply_acks(&mut shared.state.lock().expect("state"), &mut acks, &mut w);
                    w.wake(&shared);
                }
                a.long
            }
            Err(e) => break LinkEnd::Failed(e),
        };
        if let Some((frame, head)) = long {
            let Frame::Run { len, .. } = frame else { unreachable!("only runs are long") };
            let len = len as usize;
            let have = &buf[at + head..];
            if payload.len() < len {
                payload.resize(len, 0);
            }
            payload[..have.len()].copy_from_slice(have);
            let have = have.len();
            buf.clear();
            at = 0;
            if let Err(e) = rd.read_exact(&mut payload[have..len]).await {
                break LinkEnd::Failed(e.to_string());
            }
            let mut w = Woken::default();
            let r = on_frame(&mut shared.state.lock().expect("state"), link, frame, &payload[..len], &mut w, &mut acks);
            if let Err(e) = r {
                break LinkEnd::Failed(e);
            }
            ids.carried(&frame);
            w.wake(&shared);
            continue;
        }
        if at == buf.len() {
            // All applied: the buffer starts over at its front (memory
            // still in cache).
            buf.clear();
            at = 0;
        } else if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            // Near its end: the start of the next frame moves to the front.
            buf.drain(..at);
            at = 0;
            buf.reserve(READ_CHUNK);
        }
        match rd.read_buf(&mut buf).await {
            Ok(0) => break LinkEnd::PeerClosed,
            Ok(_) => {}
            Err(e) => break LinkEnd::Failed(e.to_string()),
        }
    };
    let mut st = shared.state.lock().expect("state");
    // What the peer acknowledged before a bad frame is not sent again.
    apply_acks(&mut st, &mut acks, &mut Woken::default());
    // A link the peer closed after its Close is an orderly end.
    let orderly = st.peer_count.is_some() && matches!(why, LinkEnd::PeerClosed);
    if !orderly {
        st.fail_link(link, why.to_string());
    }
    drop(st);
    shared.wake_writers();
    shared.acked.notify_waiters();
    shared.wake_receivers();
    shared.ack_timer.notify_one();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The window bug: a file sent in 8 KiB pieces over a slow link. A
    /// sender with no ack back yet may have out only ids its receiver takes
    /// (its oldest unacknowledged id is at most the receiver's oldest not
    /// yet arrived).
    #[test]
    fn a_sender_never_has_out_an_id_its_receiver_refuses() {
        let mut unacked = Unacked::default();
        let (mut bytes, mut id) = (0, 0);
        let piece = Bytes::from(vec![0u8; 8 * 1024]);
        while has_room(&unacked, bytes, &piece) {
            assert!(takes(id, 0), "message {id} sent while message 0 is still on its way");
            unacked.insert(id, piece.clone());
            bytes += held(&piece);
            id += 1;
        }
        assert_eq!(id, MAX_AHEAD, "the window ends at what the receiver takes");
        // An ack of the oldest makes room for one more.
        unacked.remove(0);
        assert!(has_room(&unacked, bytes - held(&piece), &piece) && takes(id, 1));
    }

    /// A channel over one loopback link, and its peer.
    async fn pair() -> (Arc<Striped>, Striped) {
        let l = StripeListener::bind(&["127.0.0.1:0".parse().unwrap()]).await.unwrap();
        let to = l.local_addrs().unwrap()[0];
        let route = [(None, to)];
        let (a, b) = tokio::join!(Striped::connect(&route), l.accept());
        (Arc::new(a.unwrap()), b.unwrap())
    }

    /// `a` sends one message its peer never takes (so never acknowledges);
    /// frames that acknowledge it are then fed to `a` by hand.
    async fn holding_one() -> (Arc<Striped>, Striped) {
        let (a, b) = pair().await;
        a.send(Bytes::from_static(b"held")).await.unwrap();
        assert_eq!(a.shared.state.lock().unwrap().unacked.ids().collect::<Vec<_>>(), [0]);
        (a, b)
    }

    #[tokio::test]
    async fn acks_in_front_of_a_long_runs_header_are_applied_at_once() {
        let (a, _b) = holding_one().await;
        let (mut buf, mut ids) = (vec![], LinkIds::default());
        Frame::Ack { msg: 0 }.encode(&mut buf, &mut ids);
        // A long run's header and the start of its payload: the reader
        // reads the rest straight, and the ack must not wait for that.
        Frame::Run { msg: 0, msg_len: 1 << 20, offset: 0, len: 512 << 10 }.encode(&mut buf, &mut ids);
        buf.extend_from_slice(&[1; 1000]);
        let mut acks = vec![];
        let applied = apply_frames(&a.shared, 0, &buf, &mut LinkIds::default(), &mut acks).unwrap();
        assert!(applied.long.is_some() && !applied.delivered);
        assert!(acks.is_empty() && a.shared.state.lock().unwrap().unacked.is_empty(), "the ack is applied");
    }

    #[tokio::test]
    async fn acks_in_front_of_a_message_for_a_waiting_receiver_wait_for_its_turn() {
        let (a, _b) = holding_one().await;
        let waiting = {
            let a = a.clone();
            tokio::spawn(async move { a.recv().await })
        };
        while a.shared.state.lock().unwrap().receivers.is_empty() {
            tokio::task::yield_now().await;
        }
        let (mut buf, mut ids) = (vec![], LinkIds::default());
        Frame::Ack { msg: 0 }.encode(&mut buf, &mut ids);
        Frame::Run { msg: 0, msg_len: 5, offset: 0, len: 5 }.encode(&mut buf, &mut ids);
        buf.extend_from_slice(b"hello");
        let mut acks = vec![];
        let applied = apply_frames(&a.shared, 0, &buf, &mut LinkIds::default(), &mut acks).unwrap();
        assert!(applied.delivered && applied.took == buf.len());
        assert_eq!(acks, [0], "left for after the receiver's turn");
        assert!(!a.shared.state.lock().unwrap().unacked.is_empty());
        assert_eq!(waiting.await.unwrap().unwrap().as_deref(), Some(&b"hello"[..]));
        let mut w = Woken::default();
        apply_acks(&mut a.shared.state.lock().unwrap(), &mut acks, &mut w);
        assert!(acks.is_empty() && a.shared.state.lock().unwrap().unacked.is_empty());
    }

    #[tokio::test]
    async fn short_messages_in_turn_all_go_out_from_send() {
        // What the kernel says of the link is asked after a message left,
        // so in a ping-pong the next one never finds it stale (which would
        // send it the writer's way, asking the kernel first).
        let (a, b) = pair().await;
        let echo = tokio::spawn(async move {
            while let Some(m) = b.recv().await.unwrap() {
                b.send(m).await.unwrap();
            }
            b.close().await.unwrap();
        });
        let msg = Bytes::from(vec![7u8; 16 << 10]);
        for i in 0..64 {
            {
                let st = a.shared.state.lock().unwrap();
                assert!(a.shared.idle_link(&st, msg.len()).is_some(), "message {i} waits for the writer");
            }
            a.send(msg.clone()).await.unwrap();
            assert_eq!(a.recv().await.unwrap().map(|m| m.len()), Some(msg.len()));
        }
        a.close().await.unwrap();
        assert!(a.recv().await.unwrap().is_none());
        echo.await.unwrap();
    }

    #[test]
    fn unacked_messages_leave_in_any_order() {
        let mut u = Unacked::default();
        for id in 5..10 {
            u.insert(id, Bytes::from(vec![id as u8; 3]));
        }
        assert_eq!(u.get(4), None);
        assert_eq!(u.get(7).map(|b| b[0]), Some(7));
        // Acks that overtook each other on different links.
        assert_eq!(u.remove(7).map(|b| b[0]), Some(7));
        assert_eq!(u.remove(7), None, "acknowledged once");
        assert_eq!(u.remove(5).map(|b| b[0]), Some(5));
        assert_eq!(u.ids().collect::<Vec<_>>(), [6, 8, 9]);
        assert_eq!(u.remove(42), None);
        for id in [9, 6, 8] {
            assert!(u.remove(id).is_some());
        }
        assert!(u.is_empty());
        // Emptied, it starts at the next id given.
        u.insert(10, Bytes::new());
        assert_eq!(u.ids().collect::<Vec<_>>(), [10]);
        assert!(!u.is_empty());
    }
}
