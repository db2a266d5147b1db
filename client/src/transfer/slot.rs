//! One producer slot: a task owning one connection to a mirror. It sends
//! the scheduler's commands and reads blocks, checking each against what
//! must come next on its connection and against its manifest or seal
//! before one `pwrite` puts it in place; it reports runs of blocks, not
//! one message per block.

use super::*;
use crate::session::Leftover;

/// Slot to coordinator.
pub(super) enum Event {
    Blocks {
        slot: ProducerId,
        run: BlockRun,
    },
    Stopped {
        slot: ProducerId,
        stream: StreamId,
        sent: u64,
    },
    Failed {
        slot: ProducerId,
        error: String,
        /// How long the server asked us to wait before asking again.
        wait: Option<Duration>,
    },
    /// Bytes of a block not yet whole came (at most one a second): the
    /// producer is not stalled, however long a block takes over its link.
    Alive {
        slot: ProducerId,
    },
    /// The producer said its next block is not there yet (another
    /// receiver, waiting for its own source; at most one a second).
    Waiting {
        slot: ProducerId,
    },
    /// A block failed verification: its mirror is not to be trusted.
    Corrupt {
        slot: ProducerId,
        block: u64,
    },
    /// Writing the output failed: the whole transfer stops.
    Local(io::Error),
    /// Worth telling the user (a request asked again).
    Warn(String),
    /// An ssh mirror still starting at the start answered (its mirror),
    /// or could not start (`None`).
    Started(Option<Peer>),
    /// The receiver of share `home` says its mirrors fetch `blocks` of
    /// another's share, in `dir`'s order (`told.rs`).
    Told {
        home: usize,
        blocks: std::ops::Range<u64>,
        dir: ddftp_proto::Direction,
    },
    /// A producer of a mirror joining the transfer (a late one, or one
    /// asked again), or why not.
    Joined(Box<(super::producer::Source, Result<Producer, String>)>),
}

/// What a slot expects next on its connection.
pub(super) struct Expect {
    pub(super) stream: StreamId,
    pub(super) cursor: Cursor,
}

pub(super) struct SlotCtx {
    pub(super) file: Arc<dyn Store>,
    pub(super) path: String,
    pub(super) block_size: u32,
    pub(super) size: u64,
    /// What every block is checked against before it is written.
    pub(super) check: Check,
    /// `--limit-rate`: every slot takes what it receives from it.
    pub(super) cap: Option<Arc<ddnet::ratelimit::RateLimiter>>,
    /// Set once the transfer has completed: a slot whose commands end
    /// then hands its connection back ([`crate::pool`]) instead of closing it.
    pub(super) completed: std::sync::atomic::AtomicBool,
    /// The other receivers' slots (`--share`): their connections are kept
    /// open while idle ([`KEEP_OPEN`]), for blocks that may be asked of
    /// them much later (a relay's, a pair's once another share lags).
    pub(super) peers: std::ops::Range<ProducerId>,
}

/// A peer's connection with no request for this long gets one that does
/// nothing (`End` of a stream that never ran): a receiver's server closes
/// a connection idle for a minute.
const KEEP_OPEN: Duration = Duration::from_secs(20);

/// The stream id no `Start` ever uses (ids count up from 1).
const NO_STREAM: StreamId = StreamId::MAX;

/// How a transfer's blocks are checked before they are written.
pub(super) enum Check {
    /// Against the voted chunk manifest.
    Manifest(Arc<Manifest>),
    /// Against the seal each carries (a bundle's); a block another
    /// receiver sends, against the mirrors' seal of it (`peers`).
    Sealed(Option<Box<PeerSeals>>),
    /// Not at all (`--no-verify`, or an empty file).
    Nothing,
}

/// The slots that are other receivers, and the mirrors' seals their
/// blocks are checked against.
pub(super) struct PeerSeals {
    pub(super) book: super::seals::Book,
    pub(super) peers: std::ops::Range<ProducerId>,
}

impl Check {
    /// This check once other receivers (slots `peers`) join the transfer:
    /// a bundle's blocks from them are checked against the mirrors' seals.
    pub(super) fn with_peers(self, spec: &GetSpec, peers: std::ops::Range<usize>, block_size: u32, size: u64) -> Check {
        match self {
            Check::Sealed(None) => {
                let routes = spec.mirrors.iter().flat_map(|ep| super::routes_to(spec, ep)).collect();
                let book = super::seals::Book::new(&spec.path, block_size, size, routes, spec.token.clone());
                Check::Sealed(Some(Box::new(PeerSeals { book, peers })))
            }
            c => c,
        }
    }

    /// The mirrors' seals, when `slot` is another receiver of a bundle.
    fn peer_seals(&self, slot: ProducerId) -> Option<&super::seals::Book> {
        match self {
            Check::Sealed(Some(p)) if p.peers.contains(&slot) => Some(&p.book),
            _ => None,
        }
    }
}

/// How often a slot that receives bytes says so ([`Event::Alive`]), or
/// that its producer waits ([`Event::Waiting`]).
const ALIVE_EVERY: Duration = Duration::from_secs(1);

/// Bytes a read is taken from `--limit-rate` at a time.
const PIECE: usize = 64 * 1024;

/// `event`, if the last of its kind was `ALIVE_EVERY` ago: when it was.
async fn say(event: Event, last: Instant, events: &mpsc::Sender<Event>) -> Instant {
    if last.elapsed() < ALIVE_EVERY {
        return last;
    }
    let _ = events.send(event).await;
    Instant::now()
}

/// Runs the slot until its commands end (the connection back, and what it
/// still owes, if the transfer completed) or its connection fails.
pub(super) async fn run_slot(
    slot: ProducerId,
    mirror: Arc<str>,
    sock: ddnet::tls::Stream,
    ctx: Arc<SlotCtx>,
    mut cmds: mpsc::UnboundedReceiver<Action>,
    events: mpsc::Sender<Event>,
) -> Option<(ddnet::tls::Stream, Leftover)> {
    let (mut rd, mut wr) = sock.into_split();
    let bs = ctx.block_size as usize;
    let mut inbuf = BytesMut::with_capacity(2 * bs + 64 * 1024);
    let mut out = BytesMut::new();
    let mut expect: VecDeque<Expect> = VecDeque::new();
    let fail = |error: String| Event::Failed { slot, error, wait: None };
    let mut alive = Instant::now();
    let mut said_waiting = alive;
    let mut asked = Instant::now();
    let keep_open = ctx.peers.contains(&slot);
    loop {
        tokio::select! {
            // Commands first: once they end, no block is written.
            biased;
            _ = tokio::time::sleep_until((asked + KEEP_OPEN).into()), if keep_open => {
                asked = Instant::now();
                out.clear();
                Request::End { stream: NO_STREAM }.encode(&mut out);
                if let Err(e) = crate::session::send(&mut wr, &out).await {
                    let _ = events.send(fail(format!("send: {e}"))).await;
                    return None;
                }
            }
            cmd = cmds.recv() => {
                asked = Instant::now();
                let Some(cmd) = cmd else {
                    if !ctx.completed.load(std::sync::atomic::Ordering::Acquire) {
                        return None;
                    }
                    let streams = expect.iter().map(|e| e.stream).collect();
                    return hand_back(rd, wr, Leftover { streams, buf: inbuf }).await;
                };
                out.clear();
                match cmd {
                    Action::Start { stream, first, last, dir, .. } => {
                        expect.push_back(Expect { stream, cursor: Cursor::new(first, last, dir) });
                        Request::Start { stream, path: ctx.path.clone(), block_size: ctx.block_size, first, last, dir }.encode(&mut out);
                    }
                    Action::Extend { stream, last, .. } => {
                        for e in expect.iter_mut().filter(|e| e.stream == stream) {
                            e.cursor.set_last(last);
                        }
                        Request::Extend { stream, last }.encode(&mut out);
                    }
                    Action::End { stream, .. } => Request::End { stream }.encode(&mut out),
                }
                if let Err(e) = crate::session::send(&mut wr, &out).await {
                    let _ = events.send(fail(format!("send: {e}"))).await;
                    return None;
                }
            }
            n = rd.read_buf(&mut inbuf) => {
                match n {
                    Ok(0) => { let _ = events.send(fail("connection closed by the server".into())).await; return None; }
                    Err(e) => { let _ = events.send(fail(format!("receive: {e}"))).await; return None; }
                    Ok(n) => {
                        // `--limit-rate`: the next read waits for the budget
                        // (a read may hold many blocks: taken a piece at a
                        // time, the bytes that came said to keep coming).
                        let mut left = n;
                        while let Some(cap) = ctx.cap.as_ref().filter(|_| left > 0) {
                            let piece = left.min(PIECE);
                            cap.acquire(piece).await;
                            left -= piece;
                            if n > PIECE {
                                alive = say(Event::Alive { slot }, alive, &events).await;
                            }
                        }
                    }
                }
                let waited = match drain_frames(slot, &mirror, &ctx, &mut inbuf, &mut expect, &events).await {
                    Ok(waited) => waited,
                    Err(ev) => {
                        let _ = events.send(ev).await;
                        return None;
                    }
                };
                // Only `Waiting` came: the producer is not sending, it says
                // it waits (which counts for a while only); otherwise bytes
                // of blocks came.
                match waited && inbuf.is_empty() {
                    true => said_waiting = say(Event::Waiting { slot }, said_waiting, &events).await,
                    false => alive = say(Event::Alive { slot }, alive, &events).await,
                }
                if inbuf.capacity() - inbuf.len() < 64 * 1024 {
                    inbuf.reserve(bs + 64 * 1024);
                }
            }
        }
    }
}

/// The connection of a completed transfer, for the next file: the streams
/// it still runs (`left`) are ended here, without waiting for them to stop
/// (the next request reads past what they still send).
async fn hand_back(
    rd: ddnet::tls::ReadHalf,
    mut wr: ddnet::tls::WriteHalf,
    left: Leftover,
) -> Option<(ddnet::tls::Stream, Leftover)> {
    let mut out = BytesMut::new();
    for &stream in &left.streams {
        Request::End { stream }.encode(&mut out);
    }
    if !out.is_empty() {
        crate::session::send(&mut wr, &out).await.ok()?;
    }
    Some((ddnet::tls::Stream::unsplit(rd, wr)?, left))
}

/// Handles every complete frame in `inbuf`: checks and writes blocks,
/// reports runs of blocks and stops; whether the producer said it waits.
/// An `Err` is the event that ends the slot.
async fn drain_frames(
    slot: ProducerId,
    mirror: &str,
    ctx: &SlotCtx,
    inbuf: &mut BytesMut,
    expect: &mut VecDeque<Expect>,
    events: &mpsc::Sender<Event>,
) -> Result<bool, Event> {
    let mut run = None;
    let result = take_frames(slot, mirror, ctx, inbuf, expect, events, &mut run).await;
    // Blocks written before a failure count: report them before it.
    if let Some(done) = run {
        let _ = events.send(Event::Blocks { slot, run: done }).await;
    }
    result
}

async fn take_frames(
    slot: ProducerId,
    mirror: &str,
    ctx: &SlotCtx,
    inbuf: &mut BytesMut,
    expect: &mut VecDeque<Expect>,
    events: &mpsc::Sender<Event>,
    run: &mut Option<BlockRun>,
) -> Result<bool, Event> {
    let fail = |error: String| Event::Failed { slot, error, wait: None };
    let mut waited = false;
    loop {
        let reply = match Reply::decode(inbuf) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(fail(format!("protocol error: {e}"))),
        };
        let (stream, block, payload, seal) = match reply {
            Reply::Block { stream, block, payload } => (stream, block, payload, None),
            Reply::SealedBlock { stream, block, hash, payload } => (stream, block, payload, Some(hash)),
            Reply::Stopped { stream, sent } => {
                if let Some(done) = run.take() {
                    let _ = events.send(Event::Blocks { slot, run: done }).await;
                }
                // The running stream, or (after our End) one queued behind it.
                match expect.iter().position(|e| e.stream == stream) {
                    Some(0) => drop(expect.pop_front()),
                    Some(i) if sent == 0 => drop(expect.remove(i)),
                    _ => return Err(fail(format!("Stopped for stream {stream}, which is not running"))),
                }
                let _ = events.send(Event::Stopped { slot, stream, sent }).await;
                continue;
            }
            Reply::Waiting { stream } => match expect.front().is_some_and(|e| e.stream == stream) {
                true => {
                    waited = true;
                    continue;
                }
                false => return Err(fail(format!("Waiting for stream {stream}, which is not running"))),
            },
            Reply::Unreadable { .. } if ctx.check.peer_seals(slot).is_some() => {
                return Err(fail("a receiver said an entry is unreadable: it serves only what it verified".into()));
            }
            Reply::Unreadable { index, message } => {
                ctx.file.unreadable(index, &message, mirror).map_err(|e| fail(format!("protocol error: {e}")))?;
                continue;
            }
            Reply::Error { code, message } => return Err(fail(format!("server error: {message} ({code:?})"))),
            other => return Err(fail(format!("unexpected reply {other:?}"))),
        };
        let Some(e) = expect.front_mut().filter(|e| e.stream == stream) else {
            return Err(fail(format!("block {block} for stream {stream}, which is not running")));
        };
        if e.cursor.peek() != Some(block) {
            let expected = e.cursor.peek().map_or("none".to_string(), |b| b.to_string());
            return Err(fail(format!("block {block} of stream {stream} out of order (expected {expected})")));
        }
        let offset = block * u64::from(ctx.block_size);
        let want = (ctx.size - offset).min(u64::from(ctx.block_size));
        if payload.len() as u64 != want {
            return Err(fail(format!("block {block} has {} bytes, expected {want}", payload.len())));
        }
        let intact = match (&ctx.check, seal) {
            (Check::Nothing, _) => true,
            (Check::Manifest(m), None) => m.verify(offset, &payload),
            (Check::Sealed(_), Some(hash)) => match ctx.check.peer_seals(slot) {
                None => frame::seal(&payload) == hash,
                Some(book) => {
                    let dir = e.cursor.dir();
                    let want = book.seal(block, dir).await.map_err(|why| {
                        fail(format!("no mirror gave the seal of block {block} (to check a receiver's): {why}"))
                    })?;
                    frame::seal(&payload) == want
                }
            },
            (Check::Sealed(_), None) => return Err(fail(format!("block {block} of a bundle came without its seal"))),
            (Check::Manifest(_), Some(_)) => return Err(fail(format!("block {block} came sealed, not as a file's"))),
        };
        if !intact {
            return Err(Event::Corrupt { slot, block });
        }
        ctx.file.write_all_at(&payload, offset).map_err(Event::Local)?;
        e.cursor.take();
        match run {
            Some(r) if r.stream == stream => {
                r.count += 1;
                r.bytes += want;
            }
            _ => {
                let next = BlockRun { stream, first: block, count: 1, bytes: want, dir: e.cursor.dir() };
                if let Some(done) = run.replace(next) {
                    let _ = events.send(Event::Blocks { slot, run: done }).await;
                }
            }
        }
    }
    Ok(waited)
}
