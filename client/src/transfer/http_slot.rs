//! A producer slot for an HTTP mirror: the scheduler's commands kept by
//! ddftpd's own stream rules ([`Streams`]), the running stream's blocks
//! fetched a run at a time with `Range` requests on a few keep-alive
//! connections (the next runs asked for while one arrives, so the link
//! does not idle a round trip between ranges; a decrementing stream's runs
//! come from the high end of its claim down). Runs are delivered in stream
//! order; each block is checked (against the manifest when a ddftpd mirror
//! gave one) before one `pwrite` puts the run in place.

use std::collections::VecDeque;

use bytes::Bytes;
use ddftp_proto::streams::{NextRun, Stopped, Streams};
use ddftp_proto::Direction;
use tokio::task::JoinHandle;

use super::slot::{Check, Event, SlotCtx};
use super::*;
use crate::http::{HttpError, HttpMirror, Lane};

/// Bytes one `Range` request asks for at most.
const RUN_BYTES: u64 = 2 << 20;
/// Requests in flight per producer (each on a connection of its own):
/// 8 MiB, a 320 Mbit/s path's 200 ms round trip.
pub(super) const LANES: usize = 4;

type Fetched = (Lane, Result<Bytes, HttpError>);

enum Pending {
    Run { stream: StreamId, first: u64, count: u64, dir: Direction, task: JoinHandle<Fetched> },
    Stopped(Stopped),
}

/// What is in flight, in stream order; dropped, its requests stop.
struct InFlight(VecDeque<Pending>);

impl Drop for InFlight {
    fn drop(&mut self) {
        for p in &self.0 {
            if let Pending::Run { task, .. } = p {
                task.abort();
            }
        }
    }
}

pub(super) async fn run_http_slot(
    slot: ProducerId,
    mirror: Arc<HttpMirror>,
    ctx: Arc<SlotCtx>,
    mut cmds: mpsc::UnboundedReceiver<Action>,
    events: mpsc::Sender<Event>,
) {
    let bs = u64::from(ctx.block_size);
    let max = (RUN_BYTES / bs).max(1);
    let mut streams: Streams<()> = Streams::default();
    let mut free: Vec<Lane> = (0..LANES).map(|_| Lane::new(mirror.clone())).collect();
    let mut inflight = InFlight(VecDeque::new());
    loop {
        // Ask for what the running stream may send, on every free connection.
        while let Some(lane) = free.pop() {
            match streams.step_run(max) {
                NextRun::Run { stream, first, count, dir } => {
                    let lo = match dir {
                        Direction::Increment => first,
                        Direction::Decrement => first + 1 - count,
                    };
                    let (a, b) = (lo * bs, ((lo + count) * bs).min(ctx.size) - 1);
                    let size = ctx.size;
                    let mut lane = lane;
                    let task = tokio::spawn(async move {
                        let r = lane.fetch(a, b, size).await;
                        (lane, r)
                    });
                    inflight.0.push_back(Pending::Run { stream, first, count, dir, task });
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
        // Stops are told once the runs before them are.
        while let Some(Pending::Stopped(s)) = inflight.0.front() {
            let (stream, sent) = (s.stream, s.sent);
            inflight.0.pop_front();
            let _ = events.send(Event::Stopped { slot, stream, sent }).await;
        }
        let front = inflight.0.front_mut();
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
            done = async { match front { Some(Pending::Run { task, .. }) => task.await, _ => std::future::pending().await } } => {
                let Some(Pending::Run { stream, first, count, dir, .. }) = inflight.0.pop_front() else { unreachable!() };
                let (lane, body) = match done {
                    Ok(x) => x,
                    Err(e) => {
                        let _ = events.send(Event::Failed { slot, error: format!("fetch task: {e}") }).await;
                        return;
                    }
                };
                free.push(lane);
                let body = match body {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = events.send(Event::Failed { slot, error: format!("{}: {e}", mirror.url) }).await;
                        return;
                    }
                };
                let run = BlockRun { stream, first, count, bytes: body.len() as u64, dir };
                if let Some(ev) = place(slot, &ctx, run, &body) {
                    let _ = events.send(ev).await;
                    return;
                }
                let _ = events.send(Event::Blocks { slot, run }).await;
            }
        }
    }
}

/// Checks every block of a fetched run and writes the run in one `pwrite`;
/// what ends the slot if that fails.
fn place(slot: ProducerId, ctx: &SlotCtx, run: BlockRun, body: &[u8]) -> Option<Event> {
    let (lo, _) = run.bounds();
    let bs = u64::from(ctx.block_size);
    if let Check::Manifest(m) = &ctx.check {
        for (i, block) in body.chunks(bs as usize).enumerate() {
            let b = lo + i as u64;
            if !m.verify(b * bs, block) {
                return Some(Event::Corrupt { slot, block: b });
            }
        }
    }
    ctx.file.write_all_at(body, lo * bs).err().map(Event::Local)
}
