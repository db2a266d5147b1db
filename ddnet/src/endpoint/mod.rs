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

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use crate::plan::LinkId;
use crate::sys::{connect_from, fail_when_silent, limit_unsent, tcp_progress};
use crate::wire::{Frame, LinkIds, MAX_MESSAGE};

pub mod assembly;
mod link;
mod listener;
mod secure;
mod state;
mod unsent;

pub use assembly::Message;
pub use secure::ClientSide;
use secure::{LinkReader, LinkWriter, Tls};

use link::*;
pub use listener::StripeListener;
use state::*;
use unsent::{Unsent, COPY_PAYLOAD};

/// A link whose peer acknowledges nothing it sent for this long is lost
/// (a pulled cable, a route gone): its part goes to the others, and it may
/// come back ([`Relink`]).
pub const SILENT_LINK: Duration = Duration::from_secs(5);

/// How long an accepted connection may take to say `Hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// The most connections greeted at once; past it the oldest still silent
/// is dropped, so strangers holding connections open cannot use up the
/// descriptors a sender's links need (a link greets at once).
const MAX_GREETING: usize = 128;

/// One end of a striped channel.
pub struct Striped {
    shared: Arc<Shared>,
    links: usize,
}

struct Shared {
    state: Mutex<State>,
    /// Each link's socket, sending side: written by whoever holds the
    /// link's `out` (replaced, under it, when the link comes back).
    wr: Vec<RwLock<Arc<LinkWriter>>>,
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
    /// The session a link's `Hello` names (one that comes back too).
    session: u64,
    /// Each link's writer and reader tasks, ended when it comes back.
    tasks: Mutex<Vec<Vec<tokio::task::AbortHandle>>>,
    /// The connecting end's way to each link's peer, to connect one that
    /// failed again.
    dial: Option<Dial>,
}

/// How the connecting end reached each link's peer.
struct Dial {
    /// Per link: the local address, the peer's, and the name its TLS
    /// certificate must carry.
    routes: Vec<(Option<IpAddr>, SocketAddr, String)>,
    tls: Option<ClientSide>,
}

impl Shared {
    /// `link`'s socket (its current connection's), sending side.
    fn wr(&self, link: LinkId) -> Arc<LinkWriter> {
        self.wr[link].read().expect("wr").clone()
    }

    /// Starts `link`'s writer and reader on connection `gen`; those of an
    /// earlier connection end.
    fn spawn_link(self: &Arc<Self>, link: LinkId, rd: LinkReader, gen: u64) {
        let w = tokio::spawn(write_link(link, self.clone(), gen)).abort_handle();
        let r = tokio::spawn(read_link(link, rd, self.clone(), gen)).abort_handle();
        let old = std::mem::replace(&mut self.tasks.lock().expect("tasks")[link], vec![w, r]);
        for t in old {
            t.abort();
        }
    }

    /// Puts a new connection (greeted) in place of `link`: it works again
    /// as before. What its old connection carried unacknowledged was
    /// handed to the others when it failed (or is now, if it had not
    /// failed here yet).
    fn revive(self: &Arc<Self>, link: LinkId, sock: TcpStream, tls: Option<Tls>) -> io::Result<()> {
        if link >= self.out.len() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("no link {link}")));
        }
        let (rd, wr, mut fresh) = link_parts(sock, tls);
        let gen = {
            // The writers' order: `out`, then the state.
            let mut out = self.out[link].lock().expect("out");
            let mut st = self.state.lock().expect("state");
            if let Some(e) = &st.error {
                return Err(broken(e));
            }
            let gen = st.gen[link] + 1;
            st.revive_link(link, gen, Instant::now());
            (fresh.gen, fresh.sent) = (gen, out.sent);
            *self.wr[link].write().expect("wr") = Arc::new(wr);
            *out = fresh;
            gen
        };
        self.spawn_link(link, rd, gen);
        self.wake_writers();
        self.acked.notify_waiters();
        self.ack_timer.notify_one();
        Ok(())
    }

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
        match out.try_flush(&self.wr(link)) {
            Ok(true) => {
                out.take_written();
                out.sent += u64::from(c.len);
                if out.written.saturating_sub(out.acked_seen) > MIN_AHEAD {
                    // What the kernel says of the link (for the next
                    // message's look and the rates), asked once this one is
                    // out, not before it: the next message finds it fresh.
                    if let Some(Some(rate)) = out.look(&self.wr(link)) {
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
            match out.try_flush(&self.wr(link)) {
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
            self.ack_timer.notify_one();
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
    /// How many times each link came back after it failed.
    pub returned: Vec<u32>,
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
        Striped::connect_with(routes, None).await
    }

    /// [`Striped::connect`], every link over TLS with `tls` when given (a
    /// link whose handshake fails is left out, like one that cannot
    /// connect, and the error says why).
    pub async fn connect_with(
        routes: &[(Option<IpAddr>, SocketAddr)],
        tls: Option<&ClientSide>,
    ) -> io::Result<Striped> {
        let mut socks = vec![];
        let mut last_err = None;
        for (route, &(local, remote)) in routes.iter().enumerate() {
            match open(local, remote).await {
                Ok(s) => socks.push((s, remote, route)),
                Err(e) => last_err = Some(io::Error::new(e.kind(), format!("{remote}: {e}"))),
            }
        }
        let session: u64 = rand::random();
        let count = socks.len() as u32;
        let mut links = vec![];
        let mut dial = Dial { routes: vec![], tls: tls.cloned() };
        for (i, (s, remote, route)) in socks.into_iter().enumerate() {
            let name = tls.and_then(|t| t.names.get(route).cloned()).unwrap_or_else(|| remote.ip().to_string());
            let hello = Frame::Hello { session, index: i as u32, count };
            match greet(s, hello, tls.map(|t| (&t.connector, name.as_str()))).await {
                Ok(link) => links.push(link),
                Err(e) => last_err = Some(io::Error::new(e.kind(), format!("{remote}: {e}"))),
            }
            dial.routes.push((routes[route].0, remote, name));
        }
        // Every link announced the count: one that failed its handshake
        // would leave the receiver waiting for it.
        if links.len() != count as usize || links.is_empty() {
            return Err(last_err.unwrap_or_else(|| broken("no route given")));
        }
        Ok(Striped::start(links, session, Some(dial)))
    }

    /// A handle that puts lost links back (see [`Relink`]).
    pub fn relink(&self) -> Relink {
        Relink(self.shared.clone())
    }

    /// Links in use when the channel started.
    pub fn links(&self) -> usize {
        self.links
    }

    /// The whole state, for diagnosing a stuck channel.
    #[doc(hidden)]
    pub fn debug_state(&self) -> String {
        let st = self.shared.state.lock().expect("state");
        let asm: Vec<(u64, u64, usize)> = st.assembling.iter().map(|(k, a)| (*k, a.got, a.len as usize)).collect();
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
        let (alive, lost, returned, resent, rates) = {
            let st = self.shared.state.lock().expect("state");
            let rates = (0..st.alive.len()).map(|l| st.plan.measured_rate(l)).collect();
            (st.alive.clone(), st.lost.clone(), st.returned.clone(), st.resent, rates)
        };
        // Not under the state's lock: a writer takes that one holding its `out`.
        let sent = self.shared.out.iter().map(|o| o.lock().expect("out").sent).collect();
        Stats { alive, lost, returned, sent, resent, rates }
    }

    fn start(socks: Vec<(TcpStream, Option<Tls>)>, session: u64, dial: Option<Dial>) -> Striped {
        let n = socks.len();
        let (mut readers, mut writers, mut out) = (vec![], vec![], vec![]);
        for (s, tls) in socks {
            let (rd, wr, o) = link_parts(s, tls);
            readers.push(rd);
            writers.push(RwLock::new(Arc::new(wr)));
            out.push(Mutex::new(o));
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(n, Instant::now())),
            wr: writers,
            out,
            work: (0..n).map(|_| Notify::new()).collect(),
            acked: Notify::new(),
            ack_timer: Notify::new(),
            session,
            tasks: Mutex::new(vec![vec![]; n]),
            dial,
        });
        tokio::spawn(ack_timer(shared.clone()));
        tokio::spawn(watch_links(shared.clone()));
        for (link, rd) in readers.into_iter().enumerate() {
            shared.spawn_link(link, rd, 0);
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
        Ok(self.recv_message().await?.map(Message::into_bytes))
    }

    /// The same as [`Striped::recv`], the message as the runs it arrived
    /// in (no copy into one buffer: for a caller that writes it out).
    pub async fn recv_message(&self) -> io::Result<Option<Message>> {
        std::future::poll_fn(|cx| self.try_recv(cx.waker()).map_or(Poll::Pending, Poll::Ready)).await
    }

    /// What `recv_message` returns, if it need not wait; if it must,
    /// `waker` is woken when it need not.
    fn try_recv(&self, waker: &Waker) -> Option<io::Result<Option<Message>>> {
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

/// A connected link's parts: its reader, its writer and its sending
/// state (connection 0; a link that comes back sets its own).
fn link_parts(s: TcpStream, tls: Option<Tls>) -> (LinkReader, LinkWriter, LinkOut) {
    let _ = s.set_nodelay(true);
    let _ = limit_unsent(&s, UNSENT_LOW_WATER);
    let _ = fail_when_silent(&s, SILENT_LINK.as_millis() as u32);
    let meter = tcp_progress(&s).map_or(Meter { acked: 0, busy_us: 0 }, |(acked, busy_us)| Meter { acked, busy_us });
    let (rd, wr) = s.into_split();
    let reader = match &tls {
        None => LinkReader::Plain(rd),
        Some(t) => LinkReader::Tls(secure::Reader { rd, tls: t.clone() }),
    };
    let out = LinkOut {
        unsent: None,
        sent: 0,
        written: 0,
        acked_seen: meter.acked,
        meter,
        spare_head: Vec::with_capacity(64),
        ids: LinkIds::default(),
        gen: 0,
    };
    (reader, LinkWriter { wr, tls }, out)
}

/// Says `hello` on a connected socket, over TLS (the connector, and the
/// name the peer's certificate must carry) when given.
async fn greet(
    mut s: TcpStream,
    hello: Frame,
    tls: Option<(&crate::tls::TlsConnector, &str)>,
) -> io::Result<(TcpStream, Option<Tls>)> {
    let mut bytes = vec![];
    hello.encode(&mut bytes, &mut LinkIds::default());
    match tls {
        None => {
            s.write_all(&bytes).await?;
            Ok((s, None))
        }
        Some((connector, name)) => {
            let shake = tokio::time::timeout(HELLO_TIMEOUT, secure::connect(connector, name, s, &bytes));
            let (s, t) = shake.await.unwrap_or_else(|_| Err(io::Error::other("TLS handshake timed out")))?;
            Ok((s, Some(t)))
        }
    }
}

/// Puts a channel's lost links back: the connecting end connects one
/// again ([`Relink::reconnect`]); the accepting end takes those that come
/// ([`StripeListener::take_back`]). A link comes back on its own
/// connection, named by the channel's session and its index, and works
/// as before; while it was away the other links carried its part. The
/// retry policy (when and how often) is the caller's.
#[derive(Clone)]
pub struct Relink(Arc<Shared>);

impl Relink {
    /// The channel's links (lost ones too).
    pub fn links(&self) -> usize {
        self.0.out.len()
    }

    /// Links that failed and are not back.
    pub fn lost(&self) -> Vec<usize> {
        let st = self.0.state.lock().expect("state");
        (0..st.alive.len()).filter(|&l| !st.alive[l]).collect()
    }

    /// Whether the channel failed as a whole (every link lost, or a bad
    /// frame): no link can come back then.
    pub fn failed(&self) -> bool {
        self.0.state.lock().expect("state").error.is_some()
    }

    /// With every link lost, the channel waits (sends and receives wait)
    /// for one to come back, until [`give_up`](Self::give_up), instead of
    /// failing at once.
    pub fn wait_for_links(&self) {
        self.0.state.lock().expect("state").patient = true;
    }

    /// Ends the wait: the channel fails with `why` (what waits returns it).
    pub fn give_up(&self, why: &str) {
        {
            let mut st = self.0.state.lock().expect("state");
            if st.error.is_none() {
                st.error = Some(why.to_string());
            }
            st.inbox_open = false;
        }
        self.0.wake_writers();
        self.0.acked.notify_waiters();
        self.0.wake_receivers();
    }

    /// Connecting end: connects `link` again the way it was at the start
    /// (same local and remote address, same TLS name) and puts it back.
    pub async fn reconnect(&self, link: usize) -> io::Result<()> {
        let dial = self.0.dial.as_ref().ok_or_else(|| broken("only the connecting end connects a link again"))?;
        let (local, remote, name) = dial.routes.get(link).ok_or_else(|| broken("no such link"))?;
        let s = open(*local, *remote).await?;
        let hello = Frame::Hello { session: self.0.session, index: link as u32, count: self.0.out.len() as u32 };
        let (s, tls) = greet(s, hello, dial.tls.as_ref().map(|t| (&t.connector, name.as_str()))).await?;
        self.0.revive(link, s, tls)
    }
}

async fn open(local: Option<IpAddr>, remote: SocketAddr) -> io::Result<TcpStream> {
    tokio::time::timeout(HELLO_TIMEOUT, connect_from(local, remote))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?
}

/// What a writer does next.
#[cfg(test)]
mod tests;
