//! The coordinator: the scheduler plus the rules around it (stalls,
//! failures, corrupt blocks, first grants, joins), events from the slots
//! in, commands to them out, the journal and the report.

use super::slot::{run_slot, Check, Event, SlotCtx};
use super::*;

/// The coordinator's state: the scheduler plus what the report needs.
pub(super) struct Coordinator<'a> {
    sched: Scheduler,
    completed: Completed,
    journal: Journal,
    jpath: PathBuf,
    file: Arc<dyn Store>,
    sync: bool,
    /// Blocks completed since the journal was last written.
    unjournaled: bool,
    hasher: Option<&'a PrefixHasher>,
    block_size: u64,
    size: u64,
    /// Command channel per slot; `None` once the slot is dropped.
    cmds: Vec<Option<mpsc::UnboundedSender<Action>>>,
    /// Mirror index of each slot.
    owner: Vec<usize>,
    mirrors: Vec<String>,
    /// Each slot's route, for the report.
    routes: Vec<String>,
    slot_blocks: Vec<u64>,
    slot_bytes: Vec<u64>,
    /// When each slot last delivered a block (or was last found owing none).
    last_progress: Vec<Instant>,
    mirror_bytes: Vec<u64>,
    errors: Vec<String>,
    /// Mirrors dropped for a block that failed verification.
    corrupt: Vec<usize>,
    warnings: &'a mut Vec<String>,
}

impl Coordinator<'_> {
    fn dispatch(&mut self) {
        while let Some(a) = self.sched.poll_action() {
            let p = match &a {
                Action::Start { producer, .. } | Action::Extend { producer, .. } | Action::End { producer, .. } => {
                    *producer
                }
            };
            tracing::debug!(action = ?a, contributions = ?self.sched.contributions(), "scheduler");
            if let Some(tx) = &self.cmds[p] {
                let _ = tx.send(a);
            }
        }
    }

    fn drop_slot(&mut self, slot: ProducerId, why: String, now: Instant, progress: &mut dyn Progress) {
        if self.cmds[slot].take().is_none() {
            return;
        }
        let w = format!("dropping {} (stream {slot}): {why}", self.mirrors[self.owner[slot]]);
        progress.warn(&w);
        self.errors.push(w.clone());
        self.warnings.push(w);
        self.sched.on_failed(slot, now);
    }

    /// The error once no producer is left: a rerun helps unless every
    /// mirror was dropped for sending data that fails verification.
    fn all_failed(&self, missing: u64, total: u64) -> TransferError {
        let resume = if self.corrupt.len() == self.mirrors.len() { Resume::Changed } else { Resume::Kept };
        TransferError::AllMirrorsFailed { missing, total, errors: self.errors.clone(), resume }
    }

    /// Records the completed blocks in the journal (data first with `--sync`).
    fn write_journal(&mut self) -> io::Result<()> {
        if !self.unjournaled {
            return Ok(());
        }
        if self.sync {
            self.file.sync_data()?;
        }
        self.journal.done = self.completed.ranges();
        self.journal.save(&self.jpath, self.sync)?;
        self.unjournaled = false;
        Ok(())
    }

    /// Drops every producer that owes blocks and has sent none for `limit`.
    fn drop_stalled(&mut self, now: Instant, limit: Duration, progress: &mut dyn Progress) {
        for slot in 0..self.cmds.len() {
            if self.cmds[slot].is_none() {
                continue;
            }
            if !self.sched.owes_blocks(slot) {
                self.last_progress[slot] = now;
            } else if now.duration_since(self.last_progress[slot]) >= limit {
                self.drop_slot(slot, format!("stalled: no data for {:.1} s", limit.as_secs_f64()), now, progress);
            }
        }
    }

    fn on_event(&mut self, ev: Event, now: Instant, progress: &mut dyn Progress) -> Result<(), io::Error> {
        match ev {
            Event::Blocks { slot, run } => match self.sched.on_blocks(slot, run.stream, run.first, run.count, now) {
                Ok(()) => {
                    self.last_progress[slot] = now;
                    self.slot_blocks[slot] += run.count;
                    self.slot_bytes[slot] += run.bytes;
                    self.mirror_bytes[self.owner[slot]] += run.bytes;
                    let (lo, hi) = run.bounds();
                    self.unjournaled = true;
                    if let Some(prefix) = self.completed.mark(lo, hi) {
                        if let Some(h) = self.hasher {
                            h.advance((prefix * self.block_size).min(self.size));
                        }
                    }
                }
                Err(v) => self.drop_slot(slot, v.to_string(), now, progress),
            },
            Event::Stopped { slot, stream, sent } => {
                if let Err(v) = self.sched.on_stopped(slot, stream, sent, now) {
                    self.drop_slot(slot, v.to_string(), now, progress);
                }
            }
            Event::Failed { slot, error } => self.drop_slot(slot, error, now, progress),
            Event::Corrupt { slot, block } => {
                // Every stream from that mirror goes: its copy is bad.
                let mirror = self.owner[slot];
                if !self.corrupt.contains(&mirror) {
                    self.corrupt.push(mirror);
                }
                let why = format!("block {block} failed verification (corrupt or changed data); it is fetched again from another mirror");
                self.drop_slot(slot, why, now, progress);
                let same: Vec<ProducerId> = (0..self.owner.len()).filter(|&s| self.owner[s] == mirror).collect();
                for s in same {
                    self.drop_slot(s, format!("its mirror sent a corrupt block on stream {slot}"), now, progress);
                }
            }
            Event::Local(e) => return Err(e),
            Event::Joined { .. } => unreachable!("joins are handled by the transfer loop"),
        }
        Ok(())
    }

    /// A mirror joined over `route`: a new producer, and its slot.
    fn join(
        &mut self,
        route: &Route,
        now: Instant,
        progress: &mut dyn Progress,
    ) -> (ProducerId, mpsc::UnboundedReceiver<Action>) {
        let slot = self.sched.add_producer(now);
        let name = route.endpoint.to_string();
        let mirror = self.mirrors.iter().position(|m| *m == name).unwrap_or_else(|| {
            progress.joined(&name);
            self.mirrors.push(name);
            self.mirror_bytes.push(0);
            self.mirrors.len() - 1
        });
        let (tx, rx) = mpsc::unbounded_channel();
        self.cmds.push(Some(tx));
        self.owner.push(mirror);
        self.routes.push(route.to_string());
        self.slot_blocks.push(0);
        self.slot_bytes.push(0);
        self.last_progress.push(now);
        (slot, rx)
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
    let Prepared { size, block_size, check, file, slots, mirrors, resumed, completed, journal, jpath, reused_bytes } =
        plan;
    let bs = u64::from(block_size);
    let blocks = size.div_ceil(bs);
    let verified = !matches!(check, Check::Nothing);
    let ctx = Arc::new(SlotCtx { file: file.clone(), path: spec.path.clone(), block_size, size, check });
    let (ev_tx, mut ev_rx) = mpsc::channel(1024);
    let mut tasks = tokio::task::JoinSet::new();
    let owner: Vec<usize> = slots.iter().map(|(m, ..)| *m).collect();
    let routes: Vec<String> = slots.iter().map(|(_, r, _)| r.to_string()).collect();
    let mut cmds = vec![];
    let mut rtts = vec![];
    for (slot, (_, route, conn)) in slots.into_iter().enumerate() {
        let (tx, rx) = mpsc::unbounded_channel();
        cmds.push(Some(tx));
        rtts.push(conn.rtt);
        let mirror = route.endpoint.to_string().into();
        tasks.spawn(run_slot(slot, mirror, conn.sock, ctx.clone(), rx, ev_tx.clone()));
    }
    // Kept while mirrors may still join (and by their connecting tasks):
    // the events end only once every slot has ended and none can join.
    let mut join_open = joining.is_some();
    let mut join_tx = join_open.then(|| ev_tx.clone());
    let mut connecting = 0usize;
    drop(ev_tx);
    let now = Instant::now();
    // A grant before the rate is known is work no other producer may take:
    // bounded in bytes, it is a few round trips of a fast link and little of
    // a slow one's time, whatever the block size. Over a long round trip
    // (measured by the greeting) it covers two of them at `FIRST_RATE`, up
    // to the configured window, so the path does not idle between grants.
    let mut cfg = spec.scheduler.clone();
    let most = cfg.initial_window.max(cfg.min_window);
    cfg.initial_window = (INITIAL_GRANT / bs).clamp(cfg.min_window, most);
    cfg.max_unmeasured_window = most;
    cfg.first_rate = FIRST_RATE / bs as f64;
    let mut sched = if resumed {
        Scheduler::resume(&completed.missing(), owner.len(), cfg, now)
    } else {
        Scheduler::new(0..blocks, owner.len(), cfg, now)
    };
    for (p, rtt) in rtts.into_iter().enumerate() {
        sched.on_round_trip(p, rtt, now);
    }
    if let Some(h) = hasher {
        h.advance((completed.prefix() * bs).min(size));
    }
    let mut c = Coordinator {
        sched,
        completed,
        journal,
        jpath,
        file,
        sync: spec.sync,
        unjournaled: false,
        hasher,
        block_size: bs,
        size,
        cmds,
        routes,
        slot_blocks: vec![0; owner.len()],
        slot_bytes: vec![0; owner.len()],
        last_progress: vec![now; owner.len()],
        owner,
        mirror_bytes: vec![0; mirrors.len()],
        mirrors,
        errors: vec![],
        corrupt: vec![],
        warnings,
    };
    progress.start(size, &c.mirrors);
    progress.update(reused_bytes, &c.mirror_bytes);
    let mut last_draw = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    let mut interrupt = std::pin::pin!(tokio::signal::ctrl_c());
    let missing = |c: &Coordinator| size - reused_bytes - c.mirror_bytes.iter().sum::<u64>();
    let outcome = loop {
        c.dispatch();
        if c.sched.is_done() {
            break Ok(());
        }
        if c.sched.is_stuck() && join_tx.is_none() {
            break Err(c.all_failed(missing(&c), size));
        }
        let ev = tokio::select! {
            ev = ev_rx.recv() => ev,
            j = async { joining.as_mut().expect("while joins are open").recv().await }, if join_open => {
                match (j, &join_tx) {
                    (Some((endpoint, Ok(()))), Some(tx)) => {
                        for route in routes_to(spec, &endpoint) {
                            let (tx, token) = (tx.clone(), spec.token.clone());
                            connecting += 1;
                            tokio::spawn(async move {
                                let conn = connect(&route, None, token.as_deref()).await.map(|(c, ..)| c);
                                let _ = tx.send(Event::Joined { route, conn }).await;
                            });
                        }
                    }
                    (Some((endpoint, Err(why))), _) => {
                        let w = format!("skipping {endpoint}: {why}");
                        progress.warn(&w);
                        c.warnings.push(w);
                    }
                    _ => {
                        join_open = false;
                        if connecting == 0 {
                            join_tx = None;
                        }
                    }
                }
                continue;
            }
            _ = tick.tick() => {
                c.drop_stalled(Instant::now(), spec.stall_timeout, progress);
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
            Event::Joined { route, conn } => {
                connecting -= 1;
                let tx = join_tx.clone().expect("kept while a connection is under way");
                if !join_open && connecting == 0 {
                    join_tx = None;
                }
                match conn {
                    Ok(conn) => {
                        let (slot, rx) = c.join(&route, now, progress);
                        c.sched.on_round_trip(slot, conn.rtt, now);
                        let mirror = route.endpoint.to_string().into();
                        tasks.spawn(run_slot(slot, mirror, conn.sock, ctx.clone(), rx, tx));
                    }
                    Err(why) => {
                        let w = format!("skipping {route}: {why}");
                        progress.warn(&w);
                        c.warnings.push(w);
                    }
                }
                continue;
            }
            ev => ev,
        };
        if let Err(source) = c.on_event(ev, now, progress) {
            // A store of its own names the file in `source`; its place is
            // the output's directory.
            let path = match &spec.store {
                Some(_) => spec.output.parent().unwrap_or(&spec.output).to_path_buf(),
                None => part_path(&spec.output),
            };
            break Err(TransferError::Output { path, source, resume: Resume::KeptOnceFixed });
        }
        if now.duration_since(last_draw) >= Duration::from_millis(100) {
            progress.update(reused_bytes + c.mirror_bytes.iter().sum::<u64>(), &c.mirror_bytes);
            last_draw = now;
        }
    };
    progress.update(reused_bytes + c.mirror_bytes.iter().sum::<u64>(), &c.mirror_bytes);
    progress.finish();
    tasks.abort_all();
    if outcome.is_err() {
        // Keep what arrived: the next run resumes from it.
        let _ = c.write_journal();
    }
    outcome?;
    let seconds = started.elapsed().as_secs_f64();
    let stats = c.sched.stats().clone();
    let total: u64 = c.mirror_bytes.iter().sum();
    let producers = c
        .mirrors
        .iter()
        .enumerate()
        .map(|(m, name)| ProducerReport {
            mirror: name.clone(),
            blocks: (0..c.owner.len()).filter(|&s| c.owner[s] == m).map(|s| c.slot_blocks[s]).sum(),
            bytes: c.mirror_bytes[m],
            share: if total > 0 { c.mirror_bytes[m] as f64 / total as f64 } else { 0.0 },
        })
        .collect();
    let mut links: Vec<LinkReport> = vec![];
    for (s, route) in c.routes.iter().enumerate() {
        let i = links.iter().position(|l| l.route == *route).unwrap_or_else(|| {
            links.push(LinkReport { route: route.clone(), blocks: 0, bytes: 0 });
            links.len() - 1
        });
        links[i].blocks += c.slot_blocks[s];
        links[i].bytes += c.slot_bytes[s];
    }
    Ok(TransferReport {
        path: spec.path.clone(),
        output: spec.output.display().to_string(),
        bytes: size,
        reused_bytes,
        seconds,
        block_size,
        starts: stats.starts,
        extends: stats.extends,
        ends: stats.ends,
        duplicate_bytes: stats.duplicate_blocks * bs,
        sha256: None,
        verified,
        producers,
        links,
        warnings: c.warnings.clone(),
    })
}
