//! The coordinator: the I/O loop around the pure [`Transfer`] (which owns
//! the scheduler and the rules around it): events from the slots in,
//! commands to them out, the journal, progress and the report.

use ddops::transfer::{self, Event as TransferEvent, Transfer};

use super::pieces::{Checked, Pieces};
use super::producer::Source;
use super::rejoin::Wanted;
use super::slot::{Check, Event, SlotCtx};
use super::slots::spawn_slot;
use super::*;
use ddops::transfer::DropReason;

mod joining;

/// The driver's state around the pure [`Transfer`]: the connections, the
/// journal, the names for the report.
pub(super) struct Coordinator<'a> {
    tr: Transfer,
    journal: Journal,
    jpath: PathBuf,
    file: Arc<dyn Store>,
    sync: bool,
    /// Blocks completed since the journal was last written.
    unjournaled: bool,
    hasher: Option<&'a PrefixHasher>,
    /// Pieces larger than a block, checked once whole.
    pieces: Option<Pieces>,
    /// `-o -`: the reorder window (no journal then).
    ring: Option<Arc<crate::stdout::Ring>>,
    block_size: u64,
    size: u64,
    /// Command channel per slot; `None` once the slot is dropped.
    cmds: Vec<Option<mpsc::UnboundedSender<Action>>>,
    /// The slots' tasks, and each slot's: a dropped producer's is stopped
    /// at once, so its connection is never handed to another file.
    slot_tasks: tokio::task::JoinSet<()>,
    tasks: Vec<tokio::task::AbortHandle>,
    /// What every slot shares (the file, the checks).
    ctx: Arc<SlotCtx>,
    /// Where completed slots hand their connections ([`crate::pool`]).
    pool: Option<Arc<crate::pool::Pool>>,
    /// Connections to joining mirrors under way.
    connecting: usize,
    /// ssh mirrors still starting, and their waits.
    starting: usize,
    starts: tokio::task::JoinSet<()>,
    /// How each slot reaches its mirror (to ask it again).
    sources: Vec<Source>,
    /// Routes being asked again, not yet back.
    retrying: std::collections::HashSet<String>,
    /// The wait a failed slot's server asked for (`Retry-After`).
    waits: std::collections::HashMap<ProducerId, Duration>,
    /// Slots from this one on joined while the transfer ran.
    first_joined: usize,
    /// The other receivers' slots (`--share`): not asked again once lost
    /// (a peer rejoining would help with shares it does not hold).
    peers: std::ops::Range<usize>,
    /// What this receiver serves (`--share`), told of each verified run.
    offered: Option<Arc<dyn super::share::Offered>>,
    /// Listening to what the peers' mirrors fetch (`told.rs`).
    tellers: tokio::task::JoinSet<()>,
    wanted: Arc<Wanted>,
    /// For the retries' answers.
    events: mpsc::Sender<Event>,
    mirrors: Vec<String>,
    /// Each slot's route, for the report.
    routes: Vec<String>,
    errors: Vec<String>,
    warnings: &'a mut Vec<String>,
}

impl Coordinator<'_> {
    /// Carries out what the transfer asks: commands to slots, drops reported.
    fn dispatch(&mut self, progress: &mut dyn Progress) {
        while let Some(a) = self.tr.poll_action() {
            let p = match &a {
                Action::Start { producer, .. } | Action::Extend { producer, .. } | Action::End { producer, .. } => {
                    *producer
                }
            };
            // -v: where each mirror starts and stops (pairs, splits) beside
            // each HTTP request; -vv: every decision, grants included.
            let mirror = &self.mirrors[self.tr.producer_mirror(p)];
            match &a {
                Action::Extend { .. } => {
                    tracing::debug!(action = ?a, contributions = ?self.tr.contributions(), pacing = ?self.tr.pacing(), "scheduler")
                }
                _ => tracing::info!(%mirror, action = ?a, contributions = ?self.tr.contributions(), "scheduler"),
            }
            if let Some(tx) = &self.cmds[p] {
                let _ = tx.send(a);
            }
        }
        while let Some(t) = self.tr.poll_told() {
            if let Some(o) = &self.offered {
                let (at, len) = super::told::bytes_of(&t.blocks, self.block_size, self.size);
                o.fetching(at, len, t.dir);
            }
        }
        while let Some(TransferEvent::Dropped { producer, mirror, why }) = self.tr.poll_event() {
            self.cmds[producer] = None;
            self.tasks[producer].abort();
            let w = format!("dropping {} (stream {producer}): {why}", self.mirrors[mirror]);
            tracing::info!(mirror = %self.mirrors[mirror], producer, "dropped: {why}");
            progress.warn(&w);
            self.errors.push(w.clone());
            self.warnings.push(w);
            // A mirror that was lost (not one that lied) is asked again.
            if matches!(why, DropReason::Failed(_) | DropReason::Stalled(_)) && !self.peers.contains(&producer) {
                let wait = self.waits.remove(&producer);
                self.ask_again(self.sources[producer].clone(), wait);
            }
        }
    }

    /// `-o -`: hands out the blocks the written-out bytes made room for
    /// (a quarter of the window at a time, not a segment per block).
    fn slide(&mut self, now: Instant) -> io::Result<()> {
        let Some(r) = &self.ring else { return Ok(()) };
        if r.broken() {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "standard output was closed"));
        }
        let room = r.written() / self.block_size + r.blocks();
        let step = (r.blocks() / 4).max(1);
        let total = self.tr.completed().len();
        if room >= self.tr.window_limit() + step || (room >= total && self.tr.window_limit() < total) {
            self.tr.handle_window(room, now);
        }
        Ok(())
    }

    /// Every retry has ended and no mirror may join: nothing more can come.
    fn nothing_coming(&self) -> bool {
        self.retrying.is_empty() && self.starting == 0
    }

    /// The error once no producer is left: a rerun helps unless every
    /// mirror was dropped for sending data that fails verification.
    fn all_failed(&self, missing: u64, total: u64) -> TransferError {
        let resume = if self.tr.every_mirror_corrupt() { Resume::Changed } else { Resume::Kept };
        TransferError::AllMirrorsFailed { missing, total, errors: self.errors.clone(), resume }
    }

    /// Records the completed blocks in the journal (data first with `--sync`).
    fn write_journal(&mut self) -> io::Result<()> {
        if !self.unjournaled || self.ring.is_some() {
            return Ok(());
        }
        if self.sync {
            self.file.sync_data()?;
        }
        self.journal.done = self.tr.completed().ranges();
        self.journal.save(&self.jpath, self.sync)?;
        self.unjournaled = false;
        Ok(())
    }

    fn on_event(&mut self, ev: Event, now: Instant) -> Result<(), io::Error> {
        match ev {
            Event::Blocks { slot, run } => {
                tracing::trace!(slot, bytes = run.bytes, dir = ?run.dir, "delivered");
                self.unjournaled = true;
                let grew = self.tr.handle_blocks(slot, run, now);
                // Checked, then written; pieces checked whole are offered
                // once good (`on_checked`).
                if let (Some(o), None) = (&self.offered, &self.pieces) {
                    let (lo, hi) = run.bounds();
                    o.verified(lo * self.block_size, (hi + 1 - lo) * self.block_size);
                }
                match &mut self.pieces {
                    // The running SHA-256 reads only what its pieces vouch for.
                    Some(p) if !self.tr.is_dropped(slot) => {
                        let (lo, hi) = run.bounds();
                        p.arrived(lo, hi, Some(self.tr.producer_mirror(slot)), self.tr.completed());
                    }
                    Some(_) => {}
                    None => {
                        if let (Some(prefix), Some(h)) = (grew, self.hasher) {
                            h.advance((prefix * self.block_size).min(self.size));
                        }
                    }
                }
            }
            Event::Stopped { slot, stream, sent } => self.tr.handle_stopped(slot, stream, sent, now),
            Event::Failed { slot, error, wait } => {
                if let Some(w) = wait {
                    self.waits.insert(slot, w);
                }
                self.tr.handle_failed(slot, error, now)
            }
            Event::Corrupt { slot, block } => self.tr.handle_corrupt(slot, block, now),
            Event::Alive { slot } => self.tr.handle_bytes(slot, now),
            Event::Waiting { slot } => self.tr.handle_waiting(slot, now),
            Event::Told { home, blocks, dir } => self.tr.handle_told(home, blocks, dir, now),
            Event::Local(e) => return Err(e),
            Event::Joined(_) | Event::Warn(_) | Event::Started(_) => unreachable!("handled by the transfer loop"),
        }
        Ok(())
    }

    /// Piece `piece`'s check said `ok`: the hash may read further, or its
    /// blocks are fetched again.
    fn on_checked(
        &mut self,
        piece: u64,
        (ok, hashes): (bool, Vec<ddftp_proto::manifest::Hash>),
        path: &str,
        now: Instant,
        progress: &mut dyn Progress,
    ) -> Result<(), TransferError> {
        let Some(p) = &mut self.pieces else { return Ok(()) };
        let (lo, hi) = p.span(piece);
        match p.checked(piece, ok, hashes, path)? {
            Checked::Good { prefix, liars } => {
                if let Some(o) = &self.offered {
                    o.verified(lo * self.block_size, (hi + 1 - lo) * self.block_size);
                }
                if let (Some(bytes), Some(h)) = (prefix, self.hasher) {
                    h.advance(bytes);
                }
                // Blocks that were wrong when the piece failed: their
                // senders lied.
                for (mirror, lo, hi) in liars {
                    self.tr.handle_bad_sender(mirror, lo, hi, now);
                }
            }
            Checked::Bad { lo, hi, culprit } => {
                if culprit.is_none() {
                    let w = format!(
                        "piece {piece} of {path} (blocks {lo}-{hi}, from several mirrors) failed verification; fetching it again"
                    );
                    progress.warn(&w);
                    self.warnings.push(w);
                }
                self.tr.handle_bad_range(lo, hi, culprit, now);
                self.unjournaled = true;
            }
        }
        Ok(())
    }

    /// Bytes delivered by the mirrors in this run.
    fn fetched(&self) -> u64 {
        self.tr.mirror_bytes().iter().sum()
    }
}

/// How long a completed transfer waits for its slots to hand their
/// connections back (each only ends its streams; none waits for a reply).
const HAND_BACK: Duration = Duration::from_millis(500);

impl Coordinator<'_> {
    /// Ends a completed transfer's slots: the ddftpd ones hand their
    /// connections to the pool (the next file of the command takes them),
    /// the others stop at once.
    async fn hand_back(&mut self) {
        self.ctx.completed.store(true, std::sync::atomic::Ordering::Release);
        self.tellers.abort_all();
        self.starts.abort_all();
        self.cmds.clear();
        for (task, source) in self.tasks.iter().zip(&self.sources) {
            if !matches!(source, Source::Ddftpd(_)) {
                task.abort();
            }
        }
        let tasks = &mut self.slot_tasks;
        let _ = tokio::time::timeout(HAND_BACK, async { while tasks.join_next().await.is_some() {} }).await;
        tasks.abort_all();
    }

    /// Tells the user `w` and keeps it for the report.
    fn tell(&mut self, progress: &mut dyn Progress, w: String) {
        super::tell(progress, self.warnings, w);
    }

    /// The report of the completed transfer: what each mirror and each
    /// route delivered, the scheduler's counts.
    fn report(&self, spec: &GetSpec, reused_bytes: u64, verified: bool, seconds: f64) -> TransferReport {
        let stats = self.tr.stats();
        let total = self.fetched();
        let mirror_bytes = self.tr.mirror_bytes();
        let tr = &self.tr;
        let delivered = |m: usize, from: usize, pick: fn((u64, u64)) -> u64| -> u64 {
            (from..tr.producers()).filter(|&s| tr.producer_mirror(s) == m).map(|s| pick(tr.producer_delivered(s))).sum()
        };
        let producers = self
            .mirrors
            .iter()
            .enumerate()
            .map(|(m, name)| ProducerReport {
                mirror: name.clone(),
                blocks: delivered(m, 0, |d| d.0),
                bytes: mirror_bytes[m],
                joined_bytes: delivered(m, self.first_joined, |d| d.1),
                share: if total > 0 { mirror_bytes[m] as f64 / total as f64 } else { 0.0 },
                peer: self.peers.clone().any(|s| tr.producer_mirror(s) == m),
            })
            .collect::<Vec<_>>();
        let from_peers = producers.iter().filter(|p| p.peer).map(|p| p.bytes).sum();
        let links = LinkReport::per_route(&self.routes, |s| tr.producer_delivered(s));
        TransferReport {
            path: spec.path.clone(),
            output: spec.output.display().to_string(),
            bytes: self.size,
            reused_bytes,
            matched_bytes: 0,
            piece_bytes: 0,
            seconds,
            block_size: self.ctx.block_size,
            starts: stats.starts,
            extends: stats.extends,
            ends: stats.ends,
            duplicate_bytes: stats.duplicate_blocks * self.block_size,
            sha256: None,
            verified,
            sha256_checked: Sha256Checked::Mirrors,
            sha256_computed: false,
            producers,
            from_peers,
            links,
            warnings: self.warnings.clone(),
            already_complete: false,
        }
    }
}

/// A coordinator, and what its loop needs beside it.
struct Started<'a> {
    c: Coordinator<'a>,
    events: mpsc::Receiver<Event>,
    reused_bytes: u64,
    verified: bool,
}

impl<'a> Coordinator<'a> {
    /// The coordinator of `plan`: its slots started, its transfer made,
    /// the mirrors that did not answer at the start asked again.
    fn start(
        spec: &GetSpec,
        plan: Prepared,
        warnings: &'a mut Vec<String>,
        hasher: Option<&'a PrefixHasher>,
    ) -> Result<Started<'a>, TransferError> {
        let Prepared {
            size,
            block_size,
            check,
            pieces,
            file,
            slots,
            mirrors,
            completed,
            journal,
            jpath,
            reused_bytes,
            wanted,
            later,
            ring,
            shared,
        } = plan;
        let (mut slots, mut mirrors) = (slots, mirrors);
        let first_peer = slots.len();
        let (offered, joined) = shared.map(|(o, peers)| (o, peers.join(&mut slots, &mut mirrors))).unzip();
        let (homes, tells) = joined.map(|j| (j.homes, j.tells)).unzip();
        let check = match homes {
            Some(_) => check.with_peers(spec, first_peer..slots.len(), block_size, size),
            None => check,
        };
        let bs = u64::from(block_size);
        let verified = !matches!(check, Check::Nothing) || pieces.is_some();
        let mut pieces = match pieces {
            Some(m) => Some(Pieces::new(m, block_size, size, file.clone()).map_err(|source| {
                TransferError::Output { path: part_path(&spec.output), source, resume: Resume::Kept }
            })?),
            None => None,
        };
        if let Some(p) = &mut pieces {
            p.check_whole(&completed);
        }
        let cap = spec.limit_rate.map(|r| Arc::new(ddnet::ratelimit::RateLimiter::new(Some(r))));
        let ctx = Arc::new(SlotCtx {
            file: file.clone(),
            path: spec.path.clone(),
            block_size,
            size,
            check,
            cap,
            completed: Default::default(),
            peers: first_peer..slots.len(),
        });
        let (ev_tx, ev_rx) = mpsc::channel(1024);
        let mut tellers = tokio::task::JoinSet::new();
        super::told::listen(tells.unwrap_or_default(), &ev_tx, (bs, size), &mut tellers);
        let mut slot_set = tokio::task::JoinSet::new();
        let owner: Vec<usize> = slots.iter().map(|(m, ..)| *m).collect();
        let routes: Vec<String> = slots.iter().map(|(_, p)| p.route()).collect();
        let sources: Vec<Source> = slots.iter().map(|(_, p)| p.source()).collect();
        let mut cmds = vec![];
        let mut rtts = vec![];
        let mut slot_tasks = vec![];
        let first_joined = slots.len();
        let forward_only: Vec<usize> = (0..slots.len()).filter(|&i| slots[i].1.whole_only()).collect();
        for (slot, (_, producer)) in slots.into_iter().enumerate() {
            let (tx, rx) = mpsc::unbounded_channel();
            cmds.push(Some(tx));
            let (rtt, task) = spawn_slot(producer, &mut slot_set, slot, &ctx, rx, ev_tx.clone(), spec.pool.as_ref());
            rtts.push(rtt);
            slot_tasks.push(task);
        }
        let now = Instant::now();
        let cfg = transfer::Config {
            scheduler: spec.scheduler.clone(),
            item_bytes: Some(bs),
            stall_timeout: spec.stall_timeout,
        };
        if let Some(h) = hasher.filter(|_| pieces.is_none()) {
            h.advance((completed.prefix() * bs).min(size));
        }
        let mut tr = match &ring {
            // `-o -`: no block past what is written out plus the window.
            Some(r) => Transfer::windowed(completed.len(), r.blocks(), &owner, mirrors.len(), &cfg, now),
            None => match &homes {
                Some(h) => {
                    let unit = pieces.as_ref().map_or(1, |p| p.per_piece());
                    Transfer::with_homes(completed, &owner, mirrors.len(), (h, unit), &cfg, now)
                }
                None => Transfer::new(completed, &owner, mirrors.len(), &cfg, now),
            },
        };
        for p in forward_only {
            tr.set_forward_only(p);
        }
        for (p, rtt) in rtts.into_iter().enumerate() {
            tr.handle_round_trip(p, rtt, now);
        }
        let mut c = Coordinator {
            tr,
            journal,
            jpath,
            file,
            sync: spec.sync,
            unjournaled: false,
            hasher,
            pieces,
            ring,
            block_size: bs,
            size,
            cmds,
            slot_tasks: slot_set,
            tasks: slot_tasks,
            ctx,
            pool: spec.pool.clone(),
            connecting: 0,
            starting: 0,
            starts: tokio::task::JoinSet::new(),
            sources,
            retrying: Default::default(),
            waits: Default::default(),
            first_joined,
            peers: first_peer..first_joined,
            offered,
            tellers,
            wanted,
            events: ev_tx,
            routes,
            mirrors,
            errors: vec![],
            warnings,
        };
        // Mirrors that did not answer at the start are asked again, and join
        // when they answer.
        for source in later {
            c.ask_again(source, None);
        }
        for s in &spec.starting {
            let (s, events) = (s.clone(), c.events.clone());
            c.starts.spawn(async move {
                let _ = events.send(Event::Started(s.started().await)).await;
            });
        }
        c.starting = spec.starting.len();
        Ok(Started { c, events: ev_rx, reused_bytes, verified })
    }
}

pub(super) async fn run_transfer(
    spec: &GetSpec,
    plan: Prepared,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
    started: Instant,
    hasher: Option<&PrefixHasher>,
    mut joining: Option<&mut Joining>,
) -> Result<TransferReport, TransferError> {
    let Started { mut c, events: mut ev_rx, reused_bytes, verified } =
        Coordinator::start(spec, plan, warnings, hasher)?;
    let size = c.size;
    // Mirrors may still join (an archive's, as each registers the bundle).
    let mut join_open = joining.is_some();
    progress.start(size, &c.mirrors);
    progress.update(reused_bytes, c.tr.mirror_bytes());
    let mut last_draw = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut interrupt = std::pin::pin!(tokio::signal::ctrl_c());
    let missing = |c: &Coordinator| size - reused_bytes - c.fetched();
    // The transfer's next timeout (a stall); one timer, moved only when the
    // deadline moves (not a new timer for every event).
    let far = || tokio::time::Instant::now() + Duration::from_secs(86_400);
    let mut timeout = std::pin::pin!(tokio::time::sleep_until(far()));
    let mut armed: Option<Instant> = None;
    let outcome = loop {
        c.dispatch(progress);
        if c.tr.is_done() && c.pieces.as_ref().is_none_or(Pieces::idle) {
            break Ok(());
        }
        if c.tr.is_stuck() && !join_open && c.connecting == 0 && c.nothing_coming() {
            break Err(c.all_failed(missing(&c), size));
        }
        let deadline = c.tr.poll_timeout();
        if deadline != armed {
            timeout.as_mut().reset(deadline.map_or_else(far, Into::into));
            armed = deadline;
        }
        let ev = tokio::select! {
            ev = ev_rx.recv() => ev,
            j = async { joining.as_mut().expect("while joins are open").recv().await }, if join_open => {
                join_open = c.on_joining(spec, j, progress);
                continue;
            }
            (piece, ok) = async { c.pieces.as_mut().expect("checked").next().await },
                if c.pieces.as_ref().is_some_and(|p| !p.idle()) =>
            {
                let ok = match ok {
                    Ok(ok) => ok,
                    Err(source) => {
                        break Err(TransferError::Output { path: part_path(&spec.output), source, resume: Resume::KeptOnceFixed })
                    }
                };
                if let Err(e) = c.on_checked(piece, ok, &spec.path, Instant::now(), progress) {
                    break Err(e);
                }
                continue;
            }
            _ = async { c.ring.as_ref().expect("checked").moved.notified().await }, if c.ring.is_some() => {
                if let Err(source) = c.slide(Instant::now()) {
                    break Err(TransferError::Output { path: "standard output".into(), source, resume: Resume::Nothing });
                }
                continue;
            }
            _ = &mut timeout, if armed.is_some() => {
                c.tr.handle_timeout(Instant::now());
                continue;
            }
            _ = tick.tick() => {
                if let Err(source) = c.write_journal() {
                    break Err(TransferError::Output { path: c.jpath.clone(), source, resume: Resume::KeptOnceFixed });
                }
                continue;
            }
            _ = &mut interrupt => break Err(TransferError::Interrupted { missing: missing(&c), total: size }),
        };
        let Some(ev) = ev else {
            // Every slot has ended; only failures end a slot.
            break Err(c.all_failed(missing(&c), size));
        };
        let now = Instant::now();
        let ev = match ev {
            Event::Joined(joined) => {
                let (source, got) = *joined;
                c.on_joined(source, got, now, progress);
                continue;
            }
            Event::Warn(w) => {
                c.tell(progress, w);
                continue;
            }
            Event::Started(peer) => {
                c.on_started(spec, peer);
                continue;
            }
            ev => ev,
        };
        if let Err(source) = c.on_event(ev, now) {
            // A store of its own names the file in `source`; its place is
            // the output's directory.
            let path = match &spec.store {
                Some(_) => spec.output.parent().unwrap_or(&spec.output).to_path_buf(),
                None => part_path(&spec.output),
            };
            break Err(TransferError::Output { path, source, resume: Resume::KeptOnceFixed });
        }
        if now.duration_since(last_draw) >= Duration::from_millis(100) {
            progress.update(reused_bytes + c.fetched(), c.tr.mirror_bytes());
            last_draw = now;
        }
    };
    progress.update(reused_bytes + c.fetched(), c.tr.mirror_bytes());
    progress.finish();
    // What the slots still send is not waited for.
    drop(ev_rx);
    match outcome.is_ok() {
        true => c.hand_back().await,
        false => {
            c.slot_tasks.abort_all();
            c.starts.abort_all();
        }
    }
    if outcome.is_err() {
        // Keep what arrived: the next run resumes from it.
        let _ = c.write_journal();
    }
    outcome?;
    Ok(c.report(spec, reused_bytes, verified, started.elapsed().as_secs_f64()))
}
