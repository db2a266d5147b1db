//! A striped endpoint's link tasks: per link a writer (work from the
//! state, written without waiting where the socket takes it) and a reader
//! (frames applied under one lock, long runs read straight), and the ack
//! timer.

use std::io;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::TcpStream;

use super::secure::{self, LinkReader, LinkWriter};

use super::state::*;
use super::unsent::Unsent;
use super::Shared;
use crate::plan::LinkId;
use crate::sys::tcp_progress;
use crate::wire::{Frame, LinkIds};

/// Unsent bytes a link may queue in the kernel: keeps claims close to
/// what the link is really sending, so the two ends of a pair meet where
/// their speeds say.
pub(super) const UNSENT_LOW_WATER: u32 = 256 * 1024;
/// A link claims a new run only while what it wrote and the peer has not
/// acknowledged is under this much time at its delivery rate (and at least
/// [`MIN_AHEAD`] bytes): claims then follow what each link really delivers,
/// not how fast its socket and queues swallow data, so the two ends of a
/// pair meet where the links' speeds say even for a 256 KiB message.
pub(super) const AHEAD_SECS: f64 = 0.004;
pub(super) const MIN_AHEAD: u64 = 64 * 1024;

/// Turns of the runtime a batch of acks waits for a run to take it along
/// before the ack timer arms.
pub(super) const ACK_YIELDS: usize = 4;
/// How long to wait for acknowledgements before looking again.
pub(super) const PACE_POLL: Duration = Duration::from_millis(1);

/// Wakes the writers [`ACK_DELAY`] after it is told of a batch of acks
/// (a receiver waits with acks pending, or a duplicate run was
/// acknowledged), unless a run took the acks along meanwhile. It first lets the
/// tasks already woken run: a reply usually goes out at once and takes the
/// acks, and then no timer is armed (arming one costs more than the whole
/// exchange of a small message on a VM). Ends once the endpoint is dropped
/// or every link failed.
/// Four times a [`FROZEN`], asks the kernel how far the peer acknowledged
/// each link and lets the state find the frozen ones ([`State::watch`]).
/// Ends with the endpoint.
pub(super) async fn watch_links(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(FROZEN / 4);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let acked: Vec<Option<u64>> =
            (0..shared.out.len()).map(|l| tcp_progress(shared.wr(l).sock()).map(|(acked, _)| acked)).collect();
        let mut st = shared.state.lock().expect("state");
        if st.dropped || st.error.is_some() {
            return;
        }
        if st.watch(&acked, Instant::now()) {
            drop(st);
            shared.wake_writers();
        }
    }
}

pub(super) async fn ack_timer(shared: Arc<Shared>) {
    loop {
        shared.ack_timer.notified().await;
        // The batch being waited for (when this timer first saw it), and
        // how many turns it has had.
        let (mut batch, mut turns) = (None, 0);
        loop {
            let since = {
                let mut st = shared.state.lock().expect("state");
                if st.dropped || st.error.is_some() {
                    return;
                }
                // Every link lost, the channel waiting for one: acks wait too.
                if !st.alive.iter().any(|&a| a) {
                    break;
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
pub(super) struct LinkOut {
    /// What is left to write of the frame being written.
    pub(super) unsent: Option<Unsent>,
    /// Payload bytes the link wrote.
    pub(super) sent: u64,
    /// Bytes put on the link (headers included).
    pub(super) written: u64,
    /// Bytes the peer had acknowledged when the kernel was last asked.
    pub(super) acked_seen: u64,
    pub(super) meter: Meter,
    /// The last frame's header buffer, for the next one (no allocation a
    /// frame).
    pub(super) spare_head: Vec<u8>,
    /// What the link carried, as its frames were encoded: they are written
    /// in that order (under this lock), so the peer's reader sees the same.
    pub(super) ids: LinkIds,
    /// Which connection of the link this is (a link that failed and came
    /// back is the next): a writer of an earlier one stops.
    pub(super) gen: u64,
}

impl LinkOut {
    /// Asks the kernel how far the peer has acknowledged (`acked_seen`)
    /// and feeds the meter: `None` if the kernel would not say, else the
    /// rate sample taken, if any.
    pub(super) fn look(&mut self, wr: &LinkWriter) -> Option<Option<f64>> {
        let (acked, busy_us) = tcp_progress(wr.sock())?;
        self.acked_seen = acked;
        Some(self.meter.sample(acked, busy_us))
    }

    /// The frame just written (or failed), its header buffer kept for the
    /// next one.
    pub(super) fn take_written(&mut self) -> Option<Unsent> {
        let mut u = self.unsent.take()?;
        u.head.clear();
        self.spare_head = std::mem::take(&mut u.head);
        Some(u)
    }

    /// Writes the unsent frame to `wr` without waiting: true once all of
    /// it is.
    pub(super) fn try_flush(&mut self, wr: &LinkWriter) -> io::Result<bool> {
        let Some(u) = &mut self.unsent else { return Ok(true) };
        if let Some(tls) = &wr.tls {
            return secure::try_flush(wr.sock(), tls, u);
        }
        let sock = wr.sock();
        while !u.is_written() {
            match sock.try_io(Interest::WRITABLE, || send_parts(sock, &u.slices())) {
                Ok(n) => u.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// One socket call for header and payload (`send` when the payload is
/// empty or was copied behind the header, else `sendmsg`), without the
/// file layer `write` and `writev` go through.
pub(super) fn send_parts(sock: &TcpStream, parts: &[io::IoSlice<'_>; 2]) -> io::Result<usize> {
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
pub(super) fn decide(link: LinkId, out: &mut LinkOut, shared: &Shared) -> (Work, bool) {
    let mut st = shared.state.lock().expect("state");
    // The clock is read once here, if at all (see `Now`).
    let mut now = Now::lazy();
    if st.nothing_for(link, &mut now) {
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
        let looked = out.look(&shared.wr(link));
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
    let work = st.next_work(link, may_claim, backlog, std::mem::take(&mut out.spare_head), &mut out.ids, &mut now);
    out.written += match &work {
        Work::Frame(head, run) => (head.len() + run.as_ref().map_or(0, |(_, p)| p.len())) as u64,
        Work::Close(head) => head.len() as u64,
        _ => 0,
    };
    (work, !st.plan.is_idle())
}

/// A link's writer: writes what the plan gives the link until the link
/// fails or the endpoint is done, then closes the link's sending side.
pub(super) async fn write_link(link: LinkId, shared: Arc<Shared>, gen: u64) {
    // This connection's socket (a link that comes back has another).
    let wr = shared.wr(link);
    loop {
        let wait = shared.work[link].notified();
        tokio::pin!(wait);
        wait.as_mut().enable();
        let step = {
            let mut out = shared.out[link].lock().expect("out");
            match out.gen == gen {
                true => write_step(link, &mut out, &shared),
                false => Step::Done,
            }
        };
        match step {
            Step::Wrote => {}
            Step::Full => {
                // The frame stays unsent; whoever holds `out` next goes on.
                if let Err(e) = wr.sock().writable().await {
                    let mut out = shared.out[link].lock().expect("out");
                    if out.gen != gen || shared.finish(link, &mut out, Err(e)).is_none() {
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
    shut_write(&wr);
}

/// What a writer does after one step.
pub(super) enum Step {
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
pub(super) fn write_step(link: LinkId, out: &mut LinkOut, shared: &Shared) -> Step {
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
    match out.try_flush(&shared.wr(link)) {
        Ok(false) => Step::Full,
        r => match shared.finish(link, out, r.map(drop)) {
            Some(_) => Step::Wrote,
            None => Step::Done,
        },
    }
}

/// Closes a link's sending side (the peer reads its end); the socket
/// stays open for reading.
pub(super) fn shut_write(wr: &LinkWriter) {
    // SAFETY: shutdown on a socket this endpoint owns.
    unsafe { libc::shutdown(std::os::fd::AsRawFd::as_raw_fd(wr.sock()), libc::SHUT_WR) };
}

/// What a batch of frames asks of the other tasks.
#[derive(Default)]
pub(super) struct Woken {
    /// Acks are due: the writers send them.
    pub(super) writers: bool,
    /// The first ack of a batch was queued: the ack timer starts.
    pub(super) ack_timer: bool,
    /// Acks arrived: senders waiting for window or the end look again.
    pub(super) senders: bool,
    /// Messages arrived, or the end: receivers look again.
    pub(super) receivers: bool,
}

/// Applies one frame (a run's payload in `payload`) from `link`; an ack
/// only joins `acks` (see [`apply_acks`]).
pub(super) fn on_frame(
    st: &mut State,
    link: LinkId,
    frame: Frame,
    payload: Bytes,
    w: &mut Woken,
    acks: &mut Vec<u64>,
) -> Result<(), BadFrame> {
    let (first, inbox) = (st.acks.is_empty(), st.inbox.len());
    st.heard[link] = Some(Instant::now());
    match frame {
        Frame::Run { msg, msg_len, offset, len } if offset == 0 && u64::from(len) == msg_len => {
            // A whole message: no assembly.
            st.on_whole(msg, payload)?;
        }
        Frame::Run { msg, msg_len, offset, .. } => st.on_run(link, msg, msg_len, offset, payload, &mut Now::lazy())?,
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
        Frame::Hello { .. } => return Err(BadFrame::HelloMidStream),
    }
    if matches!(frame, Frame::Run { .. }) {
        w.receivers |= st.inbox.len() > inbox || !st.inbox_open;
        w.writers |= st.acks_due_now();
        w.ack_timer |= first && !st.acks.is_empty();
    }
    Ok(())
}

/// What [`apply_frames`] did.
pub(super) struct Applied {
    pub(super) woken: Woken,
    /// Bytes the frames applied took.
    pub(super) took: usize,
    /// A long run whose header came (and its header's length): its reader
    /// reads the rest straight.
    pub(super) long: Option<(Frame, usize)>,
    /// A waiting receiver was woken.
    pub(super) delivered: bool,
}

/// Lets the tasks already woken run before this one goes on: a wake of
/// this task, not the runtime's `yield_now` (which waits for the next
/// look at the kernel, a syscall).
pub(super) async fn yield_once() {
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
pub(super) fn apply_acks(st: &mut State, acks: &mut Vec<u64>, w: &mut Woken) {
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
pub(super) fn apply_frames(
    shared: &Shared,
    link: LinkId,
    buf: &[u8],
    ids: &mut LinkIds,
    acks: &mut Vec<u64>,
) -> Result<Applied, BadFrame> {
    let mut w = Woken::default();
    let mut st = None;
    let mut at = 0;
    let mut long = None;
    while let Some((frame, head)) = Frame::parse(&buf[at..], ids)? {
        let whole = head + if let Frame::Run { len, .. } = frame { len as usize } else { 0 };
        if buf.len() - at < whole {
            if whole > READ_CHUNK / 2 {
                long = Some((frame, head));
            }
            break;
        }
        let st = st.get_or_insert_with(|| shared.state.lock().expect("state"));
        // A run's bytes in a buffer of their own: what is read next goes
        // where this run was.
        let payload = Bytes::copy_from_slice(&buf[at + head..at + whole]);
        on_frame(st, link, frame, payload, &mut w, acks)?;
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

/// Reads until `payload` holds `len` bytes (it has the capacity), the
/// reader of a plain link woken for a good part of them at a time
/// ([`crate::wake`]).
async fn read_rest(
    rd: &mut LinkReader,
    payload: &mut BytesMut,
    len: usize,
    mark: &mut Option<crate::wake::Lowat>,
) -> io::Result<()> {
    use bytes::BufMut;
    let r = async {
        while payload.len() < len {
            let want = len - payload.len();
            if let Some(m) = mark.as_mut() {
                m.expect(want);
            }
            let n = rd.read_buf(&mut (&mut *payload).limit(want)).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            if let Some(m) = mark.as_mut() {
                m.got(n, Instant::now());
            }
        }
        Ok(())
    }
    .await;
    if let Some(m) = mark.as_mut() {
        m.reset();
    }
    r
}

/// Bytes a link's reader asks for when a long run is likely next: its
/// header and a few short frames in front of it.
const HEAD_READ: usize = 4096;

/// Bytes a link's reader asks the socket for at once.
pub(super) const READ_CHUNK: usize = 256 * 1024;

impl Woken {
    pub(super) fn wake(&self, shared: &Shared) {
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
pub(super) enum LinkEnd {
    /// The peer closed the connection (an orderly end after its `Close`).
    PeerClosed,
    Io(io::Error),
    Bad(BadFrame),
}

impl std::fmt::Display for LinkEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkEnd::PeerClosed => f.write_str("closed by the peer"),
            LinkEnd::Io(e) => write!(f, "{e}"),
            LinkEnd::Bad(e) => write!(f, "{e}"),
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
pub(super) async fn read_link(link: LinkId, mut rd: LinkReader, shared: Arc<Shared>, gen: u64) {
    // What the socket gave; frames from `at` on are not applied yet.
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut at = 0;
    // Acks read but not applied yet.
    let mut acks = vec![];
    // What the link carried, from the frames applied.
    let mut ids = LinkIds::default();
    // A plain link's low-water mark, for the rest of long runs.
    let mut mark = match &rd {
        LinkReader::Plain(r) => Some(crate::wake::Lowat::new(r.as_ref())),
        LinkReader::Tls(_) => None,
    };
    // After a long run the next one is likely long too: the next read takes
    // little more than its header (and what rides in front of it), so its
    // payload is read into its own buffer, not copied there from this one.
    let mut runs_long = false;
    let why = loop {
        let long = match apply_frames(&shared, link, &buf[at..], &mut ids, &mut acks) {
            Ok(a) => {
                a.woken.wake(&shared);
                at += a.took;
                if a.long.is_none() && a.took >= HEAD_READ {
                    runs_long = false;
                }
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
            Err(e) => break LinkEnd::Bad(e),
        };
        if let Some((frame, head)) = long {
            let Frame::Run { len, .. } = frame else { unreachable!("only runs are long") };
            let len = len as usize;
            // Read into a buffer of the run's own, which the message then
            // holds as it is: neither zeroed first nor copied after.
            let mut payload = BytesMut::with_capacity(len);
            payload.extend_from_slice(&buf[at + head..]);
            buf.clear();
            at = 0;
            if let Err(e) = read_rest(&mut rd, &mut payload, len, &mut mark).await {
                break LinkEnd::Io(e);
            }
            let mut w = Woken::default();
            let payload = payload.freeze();
            let r = on_frame(&mut shared.state.lock().expect("state"), link, frame, payload, &mut w, &mut acks);
            if let Err(e) = r {
                break LinkEnd::Bad(e);
            }
            ids.carried(&frame);
            w.wake(&shared);
            runs_long = true;
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
        let read = match runs_long {
            true => rd.read_buf(&mut bytes::BufMut::limit(&mut buf, HEAD_READ)).await,
            false => rd.read_buf(&mut buf).await,
        };
        match read {
            Ok(0) => break LinkEnd::PeerClosed,
            Ok(_) => {}
            Err(e) => break LinkEnd::Io(e),
        }
    };
    let mut st = shared.state.lock().expect("state");
    // What the peer acknowledged before a bad frame is not sent again.
    apply_acks(&mut st, &mut acks, &mut Woken::default());
    // The link came back on another connection meanwhile: not this one's.
    if st.gen[link] != gen {
        return;
    }
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
