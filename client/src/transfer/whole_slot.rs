//! A producer slot for an HTTP server that ignores `Range`: one `GET`
//! whose body is the file from byte 0. It is an increment-only producer
//! (the scheduler keeps it on the low edge of the partition at block 0,
//! `set_forward_only`): its blocks are checked and placed as they come,
//! in order, while its claim lasts; its partner decrements from the end
//! and they meet. Alone it is a plain download. A `Start` further on
//! reads past the blocks between (a body cannot seek); one behind where
//! the body is asks for the file again.

use bytes::{Buf, BytesMut};

use super::http_slot::Unplaced;
use super::slot::{Event, SlotCtx};
use super::*;
use crate::http::WholeBody;
use ddftp_proto::Direction;

/// The stream being sent: blocks `next..=last`.
struct Running {
    stream: StreamId,
    next: u64,
    last: u64,
    sent: u64,
}

pub(super) async fn run_whole_slot(
    slot: ProducerId,
    mirror: Arc<HttpMirror>,
    ctx: Arc<SlotCtx>,
    mut cmds: mpsc::UnboundedReceiver<Action>,
    events: mpsc::Sender<Event>,
) {
    let bs = u64::from(ctx.block_size);
    let fail = |error: String| Event::Failed { slot, error, wait: None };
    // The body, and the block its next bytes begin.
    let mut body: Option<(WholeBody, u64)> = None;
    // Read from the body but not yet placed (blocks past the claim wait
    // here for an Extend; the body may have ended meanwhile).
    let mut buf = BytesMut::new();
    let mut ended = false;
    let mut run: Option<Running> = None;
    loop {
        let wants = run.as_ref().is_some_and(|r| r.next <= r.last);
        tokio::select! {
            cmd = cmds.recv() => {
                let Some(cmd) = cmd else { return };
                match cmd {
                    Action::Start { stream, first, last, dir, .. } => {
                        if let Some(r) = run.take() {
                            let _ = events.send(Event::Stopped { slot, stream: r.stream, sent: r.sent }).await;
                        }
                        if dir == Direction::Decrement {
                            let why = format!("{}: it ignores Range, and can only send the file from its start", mirror.url);
                            let _ = events.send(fail(why)).await;
                            return;
                        }
                        if body.as_ref().is_some_and(|(_, at)| *at > first) {
                            body = None;
                        }
                        if body.is_none() {
                            match Lane::whole(mirror.clone(), ctx.size).await {
                                Ok(b) => body = Some((b, 0)),
                                Err(e) => {
                                    let _ = events.send(fail(format!("{}: {e}", mirror.url))).await;
                                    return;
                                }
                            }
                            buf.clear();
                            ended = false;
                        }
                        run = Some(Running { stream, next: first, last, sent: 0 });
                    }
                    Action::Extend { stream, last, .. } => {
                        if let Some(r) = run.as_mut().filter(|r| r.stream == stream) {
                            r.last = last;
                        }
                    }
                    Action::End { stream, .. } => {
                        if let Some(r) = run.take_if(|r| r.stream == stream) {
                            let _ = events.send(Event::Stopped { slot, stream, sent: r.sent }).await;
                        }
                    }
                }
            }
            got = async { body.as_mut().expect("while reading").0.next().await }, if wants && !ended && body.is_some() => {
                match got {
                    Ok(Some(d)) => buf.extend_from_slice(&d),
                    // The whole file may be in `buf` already.
                    Ok(None) => ended = true,
                    Err(e) => {
                        let _ = events.send(fail(format!("{}: {e}", mirror.url))).await;
                        return;
                    }
                }
            }
        }
        // Whole blocks (the file's last may be short): skipped up to the
        // claim, then checked and placed while it lasts.
        let (Some((_, at)), Some(r)) = (body.as_mut(), run.as_mut()) else { continue };
        let first = r.next;
        while r.next <= r.last {
            let len = (ctx.size - *at * bs).min(bs) as usize;
            if buf.len() < len {
                break;
            }
            if *at == r.next {
                match super::http_slot::place(&ctx, *at, &buf[..len]) {
                    Ok(()) => {}
                    Err(Unplaced::Corrupt(block)) => {
                        let _ = events.send(Event::Corrupt { slot, block }).await;
                        return;
                    }
                    Err(Unplaced::Local(e)) => {
                        let _ = events.send(Event::Local(e)).await;
                        return;
                    }
                }
                r.next += 1;
                r.sent += 1;
            }
            buf.advance(len);
            *at += 1;
            if let Some(cap) = &ctx.cap {
                cap.acquire(len).await;
            }
        }
        if r.next > first {
            let count = r.next - first;
            let bytes = (r.next * bs).min(ctx.size) - first * bs;
            let run = BlockRun { stream: r.stream, first, count, bytes, dir: Direction::Increment };
            let _ = events.send(Event::Blocks { slot, run }).await;
        }
        if ended && r.next <= r.last {
            // Asked for blocks the body did not hold.
            let _ = events.send(fail(format!("{}: the body ended early", mirror.url))).await;
            return;
        }
    }
}
