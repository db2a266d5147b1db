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

pub(super) async fn run_http_slot(
    slot: ProducerId,
    mirror: Arc<HttpMirror>,
    ctx: Arc<SlotCtx>,
    mut cmds: mpsc::UnboundedReceiver<Action>,
    events: mpsc::Sender<Event>,
) {
    let bs = u64::from(ctx.block_size);
    let mut streams: Streams<()> = Streams::default();
    let mut inflight: VecDeque<Pending> = VecDeque::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut pipe: Option<Pipe> = None;
    let mut requests = 0u64;
    // Requests in flight at most: one, with a server that closes the
    // connection after each reply.
    let mut most = ASKED;
    let fail = |e: HttpError| Event::Failed { slot, error: format!("{}: {e}", mirror.url), wait: e.wait_hint() };
    loop {
        // A connection (at once: the first request need not wait for it).
        if pipe.is_none() {
            let place = {
                let ctx = ctx.clone();
                move |at: u64, block: &[u8]| place(&ctx, at / bs, block)
            };
            match Pipe::open(mirror.clone(), ctx.size, bs as usize, place, tx.clone(), ctx.cap.clone()).await {
                Ok(p) => pipe = Some(p),
                Err(e) => {
                    let _ = events.send(fail(e)).await;
                    return;
                }
            }
        }
        if let Some(p) = pipe.as_mut() {
            // Asked again first (in stream order), after a lost connection.
            let mut asked = 0;
            let mut broken = false;
            for r in inflight.iter_mut().filter_map(|p| match p {
                Pending::Run(r) => Some(r),
                Pending::Stopped(_) => None,
            }) {
                if r.asked_at.is_none() && !broken {
                    requests += 1;
                    broken |= ask(p, r, requests, bs, ctx.size).await.is_err();
                }
                asked += usize::from(r.placed < r.count);
            }
            // Then what the running stream may send. (A request that could
            // not be written is told by the reader, as the connection's end.)
            while asked < most && !broken {
                let dir = streams.running().map_or(Direction::Increment, |s| s.cursor.dir());
                let max = match dir {
                    Direction::Increment => (INCREMENT_RUN / bs).max(1),
                    Direction::Decrement => (DECREMENT_RUN / bs).max(1),
                };
                match streams.step_run(max) {
                    NextRun::Run { stream, first, count, dir } => {
                        let mut r =
                            Run { stream, first, count, dir, placed: 0, reported: 0, asked_at: None, request: 0 };
                        requests += 1;
                        broken |= ask(p, &mut r, requests, bs, ctx.size).await.is_err();
                        inflight.push_back(Pending::Run(r));
                        asked += 1;
                    }
                    NextRun::Stopped(s) => inflight.push_back(Pending::Stopped(s)),
                    NextRun::Wait => break,
                }
            }
        }
        // Report, in stream order, what has landed; stops once the runs
        // before them are reported.
        while let Some(p) = inflight.front_mut() {
            match p {
                Pending::Stopped(s) => {
                    let (stream, sent) = (s.stream, s.sent);
                    inflight.pop_front();
                    let _ = events.send(Event::Stopped { slot, stream, sent }).await;
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
                        let bytes = ((lo + n) * bs).min(ctx.size) - lo * bs;
                        r.reported = ready;
                        let run = BlockRun { stream: r.stream, first, count: n, bytes, dir: r.dir };
                        let _ = events.send(Event::Blocks { slot, run }).await;
                    }
                    if r.reported < r.count {
                        break;
                    }
                    inflight.pop_front();
                }
            }
        }
        tokio::select! {
            cmd = cmds.recv() => {
                let Some(cmd) = cmd else { return };
                let stopped = match cmd {
                    Action::Start { stream, first, last, dir, .. } => match streams.start(stream, first, last, dir, ()) {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = events.send(Event::Failed { slot, error: e.to_string(), wait: None }).await;
                            return;
                        }
                    },
                    Action::Extend { stream, last, .. } => {
                        streams.find_mut(stream).for_each(|s| s.cursor.set_last(last));
                        None
                    }
                    Action::End { stream, .. } => streams.end(stream),
                };
                if let Some(s) = stopped {
                    inflight.push_back(Pending::Stopped(s));
                }
            }
            got = rx.recv() => {
                let got = got.expect("the slot holds a sender");
                let id = match &got {
                    Got::Placed { id, .. } | Got::Done { id } | Got::Failed { id, .. } => *id,
                    Got::Closing => {
                        // Not an error: ask the rest on a new connection,
                        // one request at a time from now on.
                        (pipe, most) = (None, 1);
                        for p in inflight.iter_mut() {
                            if let Pending::Run(r) = p {
                                r.asked_at = r.asked_at.filter(|_| r.placed == r.count);
                            }
                        }
                        continue;
                    }
                };
                let Some(run) = inflight.iter_mut().find_map(|p| match p {
                    Pending::Run(r) if r.request == id && r.asked_at.is_some() => Some(r),
                    _ => None,
                }) else { continue };
                match got {
                    Got::Placed { blocks, .. } => run.placed = run.asked_at.unwrap_or(0) + blocks,
                    Got::Done { .. } => run.placed = run.count,
                    Got::Closing => unreachable!("handled above"),
                    Got::Failed { error: Fail::Place(why), .. } => {
                        let ev = match why {
                            Unplaced::Corrupt(block) => Event::Corrupt { slot, block },
                            Unplaced::Local(e) => Event::Local(e),
                        };
                        let _ = events.send(ev).await;
                        return;
                    }
                    Got::Failed { error: Fail::Http(e), .. } => {
                        let _ = events.send(fail(e)).await;
                        return;
                    }
                }
            }
        }
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
