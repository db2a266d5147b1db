//! A producer slot for an HTTP mirror: the scheduler's commands kept by
//! ddftpd's own stream rules ([`Streams`]), the running stream's blocks
//! fetched a run at a time with `Range` requests on a few keep-alive
//! connections (the next runs asked for while one arrives, so the link
//! does not idle a round trip between ranges; a decrementing stream's runs
//! come from the high end of its claim down).
//!
//! Every connection's body goes to the file as it arrives, a block at a
//! time, each block checked first (against the manifest or the Metalink
//! pieces when there are some): memory is a block per connection, however
//! long the runs. Runs are reported in stream order: an incrementing
//! run's blocks as they land (a long run is one long stream, as from
//! ddftpd), a decrementing run's once it is whole (its highest block, the
//! stream's next, comes last).

use std::collections::VecDeque;

use ddftp_proto::streams::{NextRun, Stopped, Streams};
use ddftp_proto::Direction;
use tokio::task::JoinHandle;

use super::slot::{Check, Event, SlotCtx};
use super::*;
use crate::http::{Fail, HttpMirror, Lane};

/// Bytes one `Range` request asks for at most, incrementing: long, as its
/// blocks are reported as they come.
const INCREMENT_RUN: u64 = 16 << 20;
/// Decrementing: reported only once whole, so short enough to keep a
/// slow mirror's reports well inside the stall timeout.
const DECREMENT_RUN: u64 = 2 << 20;
/// Requests in flight per producer (each on a connection of its own):
/// with decrementing runs, 12 MiB, above a 320 Mbit/s path's 200 ms
/// round trip, so one connection waiting for its reply leaves enough to
/// the others.
pub(super) const LANES: usize = 6;
/// Attempts at a run whose failure may pass (a 503, a cut connection).
const TRIES: u32 = 3;

/// From a connection's task to its slot.
enum LaneMsg {
    /// This many blocks of run `id` are in the file, counted from its low end.
    Placed {
        id: u64,
        blocks: u64,
    },
    Done {
        id: u64,
        lane: Lane,
        result: Result<(), Fail<Unplaced>>,
    },
}

/// Why a block was not placed: it fails verification, or the write failed.
enum Unplaced {
    Corrupt(u64),
    Local(io::Error),
}

struct Run {
    id: u64,
    stream: StreamId,
    first: u64,
    count: u64,
    dir: Direction,
    /// Blocks in the file, from the run's low end.
    placed: u64,
    /// Blocks reported (an incrementing run's are reported as placed).
    reported: u64,
    tries: u32,
    task: JoinHandle<()>,
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

/// What is in flight, in stream order; dropped, its requests stop.
struct InFlight(VecDeque<Pending>);

impl Drop for InFlight {
    fn drop(&mut self) {
        for p in &self.0 {
            if let Pending::Run(r) = p {
                r.task.abort();
            }
        }
    }
}

pub(super) async fn run_http_slot(
    slot: ProducerId,
    mirror: Arc<HttpMirror>,
    probed: Option<Lane>,
    ctx: Arc<SlotCtx>,
    mut cmds: mpsc::UnboundedReceiver<Action>,
    events: mpsc::Sender<Event>,
) {
    let bs = u64::from(ctx.block_size);
    let mut streams: Streams<()> = Streams::default();
    let lanes: usize = std::env::var("XLANES").ok().and_then(|v| v.parse().ok()).unwrap_or(LANES);
    let dec: u64 = std::env::var("XDEC").ok().and_then(|v| v.parse().ok()).unwrap_or(DECREMENT_RUN);
    // The probe's connection is ready now; the others connect at once,
    // and join the free ones when they are (or when they failed: a
    // request on them then connects again, and says why if it cannot).
    let mut free: Vec<Lane> = probed.into_iter().collect();
    let mut inflight = InFlight(VecDeque::new());
    let (tx, mut rx) = mpsc::unbounded_channel();
    for _ in free.len()..lanes {
        let (mut lane, tx) = (Lane::new(mirror.clone()), tx.clone());
        tokio::spawn(async move {
            let _ = lane.warm().await;
            let _ = tx.send(LaneMsg::Done { id: 0, lane, result: Ok(()) });
        });
    }
    let mut next_id = 0u64;
    loop {
        // Ask for what the running stream may send, on every free connection.
        while let Some(lane) = free.pop() {
            let max = |dir| match dir {
                Direction::Increment => (INCREMENT_RUN / bs).max(1),
                Direction::Decrement => (dec / bs).max(1),
            };
            let dir = streams.running().map_or(Direction::Increment, |s| s.cursor.dir());
            match streams.step_run(max(dir)) {
                NextRun::Run { stream, first, count, dir } => {
                    next_id += 1;
                    let mut run = Run {
                        id: next_id,
                        stream,
                        first,
                        count,
                        dir,
                        placed: 0,
                        reported: 0,
                        tries: 0,
                        task: tokio::spawn(async {}),
                    };
                    run.task = spawn_fetch(&run, lane, &ctx, tx.clone(), None);
                    inflight.0.push_back(Pending::Run(run));
                }
                NextRun::Stopped(s) => {
                    inflight.0.push_back(Pending::Stopped(s));
                    free.push(lane);
                }
                NextRun::Wait => {
                    free.push(lane);
                    break;
                }
            }
        }
        // Report, in stream order, what has landed; stops once the runs
        // before them are reported.
        while let Some(p) = inflight.0.front_mut() {
            match p {
                Pending::Stopped(s) => {
                    let (stream, sent) = (s.stream, s.sent);
                    inflight.0.pop_front();
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
                    inflight.0.pop_front();
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
                            let _ = events.send(Event::Failed { slot, error: e.to_string() }).await;
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
                    inflight.0.push_back(Pending::Stopped(s));
                }
            }
            msg = rx.recv() => {
                let msg = msg.expect("the slot holds a sender");
                let Some(run) = inflight.0.iter_mut().find_map(|p| match p {
                    Pending::Run(r) if r.id == msg.id() => Some(r),
                    _ => None,
                }) else {
                    // A run reported whole as its last block landed: its
                    // connection is free again.
                    if let LaneMsg::Done { lane, .. } = msg {
                        free.push(lane);
                    }
                    continue;
                };
                match msg {
                    LaneMsg::Placed { blocks, .. } => run.placed = blocks,
                    LaneMsg::Done { result: Ok(()), lane, .. } => {
                        run.placed = run.count;
                        free.push(lane);
                    }
                    LaneMsg::Done { result: Err(Fail::Place(why)), .. } => {
                        let ev = match why {
                            Unplaced::Corrupt(block) => Event::Corrupt { slot, block },
                            Unplaced::Local(e) => Event::Local(e),
                        };
                        let _ = events.send(ev).await;
                        return;
                    }
                    LaneMsg::Done { result: Err(Fail::Http(e)), lane, .. } => {
                        run.tries += 1;
                        if !e.is_transient() || run.tries >= TRIES {
                            let _ = events.send(Event::Failed { slot, error: format!("{}: {e}", mirror.url) }).await;
                            return;
                        }
                        let wait = Duration::from_secs(u64::from(run.tries));
                        let msg = format!("{}: {e}; asking again in {} s", mirror.url, wait.as_secs());
                        let _ = events.send(Event::Warn(msg)).await;
                        run.task = spawn_fetch(run, lane, &ctx, tx.clone(), Some(wait));
                    }
                }
            }
        }
    }
}

impl LaneMsg {
    fn id(&self) -> u64 {
        match self {
            LaneMsg::Placed { id, .. } | LaneMsg::Done { id, .. } => *id,
        }
    }
}

/// Fetches what of `run` is not in the file yet on `lane` (after `wait`),
/// each block checked and written as it comes.
fn spawn_fetch(
    run: &Run,
    mut lane: Lane,
    ctx: &Arc<SlotCtx>,
    tx: mpsc::UnboundedSender<LaneMsg>,
    wait: Option<Duration>,
) -> JoinHandle<()> {
    let bs = u64::from(ctx.block_size);
    let (id, lo, placed) = (run.id, run.lo(), run.placed);
    let (a, b) = ((lo + placed) * bs, ((lo + run.count) * bs).min(ctx.size) - 1);
    let ctx = ctx.clone();
    tokio::spawn(async move {
        if let Some(w) = wait {
            tokio::time::sleep(w).await;
        }
        let mut blocks = placed;
        let result = lane
            .fetch((a, b), ctx.size, bs as usize, |at, block| {
                place(&ctx, at / bs, block)?;
                blocks += 1;
                let _ = tx.send(LaneMsg::Placed { id, blocks });
                Ok(())
            })
            .await;
        let _ = tx.send(LaneMsg::Done { id, lane, result });
    })
}

/// Checks block `b` and writes it in place; what ends the slot if either
/// fails.
fn place(ctx: &SlotCtx, b: u64, block: &[u8]) -> Result<(), Unplaced> {
    let bs = u64::from(ctx.block_size);
    if let Check::Manifest(m) = &ctx.check {
        if !m.verify(b * bs, block) {
            return Err(Unplaced::Corrupt(b));
        }
    }
    ctx.file.write_all_at(block, b * bs).map_err(Unplaced::Local)
}
