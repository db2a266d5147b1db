//! A producer slot for an HTTP mirror: the scheduler's commands kept by
//! ddftpd's own stream rules ([`Streams`]), the running stream's blocks
//! fetched a run at a time with `Range` requests pipelined on one
//! keep-alive connection ([`Pipe`]): the next runs are asked for while one
//! arrives, so the link does not idle a round trip between ranges; a
//! decrementing stream's runs come from the high end of its claim down.
//!
//! Bodies go to the file as they arrive, a block at a time, each block
//! checked first (against the manifest or the Metalink pieces when there
//! are some): memory is a block or two, however long the runs. Runs are
//! reported in stream order: an incrementing run's blocks as they land (a
//! long run is one long stream, as from ddftpd), a decrementing run's once
//! it is whole (its highest block, the stream's next, comes last). A lost
//! connection ends the slot, as a lost ddftpd connection does: its claims
//! go back to the scheduler and the mirror is asked again under the one
//! retry policy ([`crate::retry`], through `rejoin`), a server's
//! `Retry-After` believed. A connection the server closes after a reply
//! (it said so) is simply opened again, what has not arrived asked again.

use std::collections::VecDeque;

use super::slot::{Check, Event, SlotCtx};
use super::*;
use crate::http::{Fail, Got, HttpError, HttpMirror, Pipe};
use ddftp_proto::streams::{NextRun, Stopped, Streams};
use ddftp_proto::Direction;

/// Bytes one `Range` request asks for at most, incrementing: long, as its
/// blocks are reported as they come.
const INCREMENT_RUN: u64 = 16 << 20;
/// Decrementing: reported only once whole, so short enough to keep a
/// slow mirror's reports well inside the stall timeout.
const DECREMENT_RUN: u64 = 2 << 20;
/// Requests in flight on the connection (the claim bounds them too).
const ASKED: usize = 16;

/// Why a block was not placed: it fails verification, or the write failed.
pub(super) enum Unplaced {
    Corrupt(u64),
    Local(io::Error),
}

struct Run {
    stream: StreamId,
    first: u64,
    count: u64,
    dir: Direction,
    /// Blocks in the file, from the run's low end.
    placed: u64,
    /// Blocks reported (an incrementing run's are reported as placed).
    reported: u64,
    /// `placed` when its current request was sent; none: to be sent.
    asked_at: Option<u64>,
    /// Its current request's id (replies to an earlier one are stale).
    request: u64,
}

impl Run {
    fn lo(&self) -> u64 {
        match self.dir {
            Direction::Increment => self.first,
            Direction::Decrement => self.first + 1 - self.count,
        }
    }
}

enum Pending {
    Run(Run),
    Stopped(Stopped),
}

/// One HTTP producer's slot: the streams the coordinator gave it, turned
/// into range requests pipelined on one connection, and what landed
/// reported back in stream order.
struct HttpSlot {
    slot: ProducerId,
    mirror: Arc<HttpMirror>,
    ctx: Arc<SlotCtx>,
    events: mpsc::Sender<Event>,
    bs: u64,
    streams: Streams<()>,
    inflight: VecDeque<Pending>,
    pipe: Option<Pipe>,
    requests: u64,
    /// Requests in flight at most: one, with a server that closes the
    /// connection after each reply.
    most: usize,
}

/// Whether a slot goes on after an event.
type Going = std::ops::ControlFlow<()>;

pub(super) async fn run_http_slot(
    slot: ProducerId,
    mirror: Arc<HttpMirror>,
    ctx: Arc<SlotCtx>,
    mut cmds: mpsc::UnboundedReceiver<Action>,
    events: mpsc::Sender<Event>,
) {
    let bs = u64::from(ctx.block_size);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut s = HttpSlot {
        slot,
        mirror,
        ctx,
        events,
        bs,
        streams: Streams::default(),
        inflight: VecDeque::new(),
        pipe: None,
        requests: 0,
        most: ASKED,
    };
    loop {
        // A connection (at once: the first request need not wait for it).
        if s.pipe.is_none() {
            let place = {
                let ctx = s.ctx.clone();
                move |at: u64, block: &[u8]| place(&ctx, at / bs, block)
            };
            match Pipe::open(s.mirror.clone(), s.ctx.size, bs as usize, place, tx.clone(), s.ctx.cap.clone()).await {
                Ok(p) => s.pipe = Some(p),
                Err(e) => return s.fail(e).await,
            }
        }
        s.ask().await;
        s.report_landed().await;
        let going = tokio::select! {
            cmd = cmds.recv() => match cmd {
                Some(cmd) => s.on_command(cmd).await,
                None => Going::Break(()),
            },
            got = rx.recv() => s.on_got(got.expect("the slot holds a sender")).await,
        };
        if going.is_break() {
            return;
        }
    }
}

impl HttpSlot {
    /// Tells the coordinator the mirror failed.
    async fn fail(&mut self, e: HttpError) {
        let ev = Event::Failed { slot: self.slot, error: format!("{}: {e}", self.mirror.url), wait: e.wait_hint() };
        let _ = self.events.send(ev).await;
    }

    /// Asks again first (in stream order) what a lost connection left
    /// unasked, then what the running stream may send. (A request that
    /// could not be written is told by the reader, as the connection's end.)
    async fn ask(&mut self) {
        let Some(p) = self.pipe.as_mut() else { return };
        let (bs, size) = (self.bs, self.ctx.size);
        let mut asked = 0;
        let mut broken = false;
        for r in self.inflight.iter_mut().filter_map(|p| match p {
            Pending::Run(r) => Some(r),
            Pending::Stopped(_) => None,
        }) {
            if r.asked_at.is_none() && !broken {
                self.requests += 1;
                broken |= ask(p, r, self.requests, bs, size).await.is_err();
            }
            asked += usize::from(r.placed < r.count);
        }
        while asked < self.most && !broken {
            let dir = self.streams.running().map_or(Direction::Increment, |s| s.cursor.dir());
            let max = match dir {
                Direction::Increment => (INCREMENT_RUN / bs).max(1),
                Direction::Decrement => (DECREMENT_RUN / bs).max(1),
            };
            match self.streams.step_run(max) {
                NextRun::Run { stream, first, count, dir } => {
                    let mut r = Run { stream, first, count, dir, placed: 0, reported: 0, asked_at: None, request: 0 };
                    self.requests += 1;
                    broken |= ask(p, &mut r, self.requests, bs, size).await.is_err();
                    self.inflight.push_back(Pending::Run(r));
                    asked += 1;
                }
                NextRun::Stopped(s) => self.inflight.push_back(Pending::Stopped(s)),
                NextRun::Wait => break,
            }
        }
    }

    /// Reports, in stream order, what has landed; stops once the runs
    /// before them are reported.
    async fn report_landed(&mut self) {
        let slot = self.slot;
        while let Some(p) = self.inflight.front_mut() {
            match p {
                Pending::Stopped(s) => {
                    let (stream, sent) = (s.stream, s.sent);
                    self.inflight.pop_front();
                    let _ = self.events.send(Event::Stopped { slot, stream, sent }).await;
                }
                Pending::Run(r) => {
                    let ready = match r.dir {
                        Direction::Increment => r.placed,
                        Direction::Decrement if r.placed == r.count => r.count,
                        Direction::Decrement => 0,
                    };
                    if ready > r.reported {
                        let first = match r.dir {
                            Direction::Increment => r.first + r.reported,
                            Direction::Decrement => r.first,
                        };
                        let n = ready - r.reported;
                        let (lo, _) = (BlockRun { stream: r.stream, first, count: n, bytes: 0, dir: r.dir }).bounds();
                        let bytes = ((lo + n) * self.bs).min(self.ctx.size) - lo * self.bs;
                        r.reported = ready;
                        let run = BlockRun { stream: r.stream, first, count: n, bytes, dir: r.dir };
                        let _ = self.events.send(Event::Blocks { slot, run }).await;
                    }
                    if r.reported < r.count {
                        break;
                    }
                    self.inflight.pop_front();
                }
            }
        }
    }

    /// A command of the coordinator's.
    async fn on_command(&mut self, cmd: Action) -> Going {
        let stopped = match cmd {
            Action::Start { stream, first, last, dir, .. } => match self.streams.start(stream, first, last, dir, ()) {
                Ok(s) => s,
                Err(e) => {
                    let _ = self.events.send(Event::Failed { slot: self.slot, error: e.to_string(), wait: None }).await;
                    return Going::Break(());
                }
            },
            Action::Extend { stream, last, .. } => {
                self.streams.find_mut(stream).for_each(|s| s.cursor.set_last(last));
                None
            }
            Action::End { stream, .. } => self.streams.end(stream),
        };
        if let Some(s) = stopped {
            self.inflight.push_back(Pending::Stopped(s));
        }
        Going::Continue(())
    }

    /// What the connection's reader says of a request.
    async fn on_got(&mut self, got: Got<Unplaced>) -> Going {
        let id = match got {
            Got::Placed { id, .. } | Got::Done { id } | Got::Failed { id, .. } => id,
            Got::Alive => {
                let _ = self.events.send(Event::Alive { slot: self.slot }).await;
                return Going::Continue(());
            }
            Got::Closing => {
                // Not an error: ask the rest on a new connection, one
                // request at a time from now on.
                (self.pipe, self.most) = (None, 1);
                for p in self.inflight.iter_mut() {
                    if let Pending::Run(r) = p {
                        r.asked_at = r.asked_at.filter(|_| r.placed == r.count);
                    }
                }
                return Going::Continue(());
            }
        };
        let Some(run) = self.inflight.iter_mut().find_map(|p| match p {
            Pending::Run(r) if r.request == id && r.asked_at.is_some() => Some(r),
            _ => None,
        }) else {
            return Going::Continue(());
        };
        match got {
            Got::Placed { blocks, .. } => run.placed = run.asked_at.unwrap_or(0) + blocks,
            Got::Done { .. } => run.placed = run.count,
            Got::Closing | Got::Alive => unreachable!("handled above"),
            Got::Failed { error: Fail::Place(why), .. } => {
                let ev = match why {
                    Unplaced::Corrupt(block) => Event::Corrupt { slot: self.slot, block },
                    Unplaced::Local(e) => Event::Local(e),
                };
                let _ = self.events.send(ev).await;
                return Going::Break(());
            }
            Got::Failed { error: Fail::Http(e), .. } => {
                self.fail(e).await;
                return Going::Break(());
            }
        }
        Going::Continue(())
    }
}

/// Asks on `p`, as request `id`, for what of `r` is not in the file yet.
async fn ask(p: &mut Pipe, r: &mut Run, id: u64, bs: u64, size: u64) -> Result<(), HttpError> {
    (r.asked_at, r.request) = (Some(r.placed), id);
    if r.placed == r.count {
        return Ok(());
    }
    let lo = r.lo();
    p.ask(id, (lo + r.placed) * bs, ((lo + r.count) * bs).min(size) - 1).await
}

/// Checks block `b` and writes it in place; what ends the slot if either
/// fails.
pub(super) fn place(ctx: &SlotCtx, b: u64, block: &[u8]) -> Result<(), Unplaced> {
    let bs = u64::from(ctx.block_size);
    if let Check::Manifest(m) = &ctx.check {
        if !m.verify(b * bs, block) {
            return Err(Unplaced::Corrupt(b));
        }
    }
    ctx.file.write_all_at(block, b * bs).map_err(Unplaced::Local)
}
