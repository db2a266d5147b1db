//! A fresh DEST, SRC walked by a mirror: the move starts while the walk
//! goes on. Entries become parts (a bundle each), the next one made ready
//! and its directories created while the one before it moves; the last
//! part's directories are finished while it moves.

use super::*;

/// A part of a streamed archive: its files and symlinks, sorted, made
/// ready to move while the part before it moves, and the mirrors
/// registering them.
struct Part {
    items: Arc<Vec<Item>>,
    ready: Ready,
    defs: Defining,
    /// Seconds it took to make ready.
    readying: f64,
    /// Its files being created while the part before it moves.
    ahead: Option<Ahead>,
    /// The last part: every directory of the walk (finished while it
    /// moves, if its files were all created ahead).
    dirs: Option<Vec<Item>>,
}

/// A part's files and directories created ahead of their bytes, on a
/// thread of their own, while the part before it moves: creating 100,000
/// small files is much of the CPU time of moving them, and the part of
/// large files before them leaves the CPU idle. Stopped when the part
/// starts moving (a file not created yet is created by its write).
struct Ahead {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<bool>,
}

impl Ahead {
    fn start(store: Arc<TreeStore>) -> Ahead {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // An error here (a full disk, say) is met again, and told, by the write.
        let task = tokio::task::spawn_blocking(move || store.create_ahead(&flag).unwrap_or(false));
        Ahead { stop, task }
    }

    /// Whether every file of the part was created before it stopped.
    async fn stop(mut self) -> bool {
        self.stop.store(true, Ordering::Release);
        (&mut self.task).await.unwrap_or(false)
    }
}

/// Dropped with its part (the archive failed): stops at once.
impl Drop for Ahead {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Directories being finished while the last part moves: gives them
/// back, and the indexes of those left for the end.
type FinishingEarly = tokio::task::JoinHandle<(Vec<Item>, Result<Vec<usize>, ArchiveError>)>;

/// How the walk went, told to the stages that run beside it.
#[derive(Default)]
struct WalkFlags {
    /// A mirror's walk failed after some of its list came.
    broke: AtomicBool,
    /// A mirror could not read all of SRC.
    unreadable: AtomicBool,
}

/// What the split stage leaves for the end: the walk's directories, the
/// entries not cut into a part yet, the parts' channel and warnings.
type Split = (Vec<Item>, Vec<Item>, tokio::sync::mpsc::Sender<Part>, Vec<String>);

/// What the mover leaves: the parts moved, their merged report, how many
/// moved, the time spent, and the directories with those finished early.
type Moved = (Vec<Arc<Vec<Item>>>, Option<TransferReport>, u64, Phases, Option<(Vec<Item>, Option<Vec<usize>>)>);

impl Archiving<'_> {
    /// A fresh DEST, SRC walked by a mirror: the move starts while the
    /// mirror still walks. Whenever the mover is free and enough entries
    /// have come, they become a part (a bundle of its own, registered
    /// while the part before it moves); the last part is what is left when
    /// the walk ends. Interrupted, a rerun finds DEST not fresh and takes
    /// the careful path: the whole list, the files already complete
    /// skipped. So does this run (`None`) if the walk breaks after some
    /// of the list came and another mirror may walk it whole.
    pub(super) async fn streamed(&self, progress: &mut dyn Progress) -> Result<Option<ArchiveReport>, ArchiveError> {
        let (walk_tx, walk_rx) = tokio::sync::mpsc::channel(16);
        let (part_tx, part_rx) = tokio::sync::mpsc::channel::<Part>(1);
        // Parts cut and not moved yet. While a part moves (or waits to),
        // the next waits for the walk's end (then it is registered, and its
        // files created, while that part moves): fewer, larger parts.
        let busy = &AtomicUsize::new(0);
        let flags = &WalkFlags::default();
        let mut phases = Phases::default();
        let mut specials = 0;
        let listing = async {
            let (walked, split) =
                tokio::join!(self.walk_mirrors(walk_tx, flags), self.split_walk(walk_rx, part_tx, busy));
            let (dirs, mut pending, part_tx, warnings) = walked.and(split)?;
            phases.list = self.started.elapsed().as_secs_f64();
            // Before any directory is finished: making them changes their
            // directories' mtimes.
            specials = self.make_specials();
            if pending.is_empty() {
                return Ok::<_, ArchiveError>((Some(dirs), warnings));
            }
            // Hard links are made after the move, into directories not yet
            // finished: none is finished early then.
            let links = !self.listing.lock().expect("listing lock").linked.is_empty();
            let ahead = busy.fetch_add(1, Ordering::AcqRel) > 0 && !links;
            self.cut(&mut pending, &part_tx, ahead, Some(dirs)).await?;
            Ok((None, warnings))
        };
        let mut whole = Parts::new(progress);
        let joined = tokio::try_join!(listing, self.move_parts(part_rx, &mut whole, busy));
        progress.finish();
        let ((listed, warnings), (moved, transfer, parts, spent, last)) = match joined {
            Err(ArchiveError::Walk { failures, .. })
                if flags.broke.load(Ordering::Acquire)
                    && (self.spec.get.mirrors.len() > 1 || flags.unreadable.load(Ordering::Acquire)) =>
            {
                let why = failures.iter().map(|f| f.trim()).collect::<Vec<_>>().join("; ");
                progress.warn(&format!(
                    "the walk of {} stopped part way ({why}); asking the mirrors for all of it",
                    self.src
                ));
                return Ok(None);
            }
            r => r?,
        };
        for w in &warnings {
            progress.warn(w);
        }
        let (dirs, finished) = match (listed, last) {
            (Some(dirs), _) => (dirs, None),
            (None, Some(last)) => last,
            (None, None) => unreachable!("the walk's directories went with its last part"),
        };
        if dirs.is_empty() && moved.iter().all(|p| p.is_empty()) {
            return Err(ArchiveError::BadEntry { path: self.src.into(), why: "nothing under it on the mirror".into() });
        }
        let hard_links = self.make_links();
        let dirs_finished_early = match finished {
            // Checked while the last part moved.
            Some(later) => {
                self.dirs().finish(later.iter().map(|&i| &dirs[i]))?;
                (dirs.len() - later.len()) as u64
            }
            None => {
                self.dirs().finish(dirs.iter())?;
                0
            }
        };
        // The list overlaps the rest: `finish` is what came after both.
        let seconds = self.started.elapsed().as_secs_f64();
        let Phases { prepare, check, moving, .. } = spent;
        phases = Phases { prepare, check, moving, ..phases };
        phases.finish = (seconds - phases.list.max(prepare + check + moving)).max(0.0);
        let mut report = self.streamed_report(&dirs, &moved, seconds, phases);
        (report.dirs_finished_early, report.specials, report.hard_links) = (dirs_finished_early, specials, hard_links);
        (report.transfer, report.parts) = (transfer, parts);
        // Freeing 100,000 entries is milliseconds nobody needs to wait for.
        std::thread::spawn(move || drop((dirs, moved)));
        Ok(Some(report))
    }

    /// The walk stage: each mirror in turn walks SRC into `walk_tx` until
    /// one reads all of it. Another mirror is asked only if this one sent
    /// nothing: what it did send may be moving already.
    async fn walk_mirrors(
        &self,
        walk_tx: tokio::sync::mpsc::Sender<Vec<ddtree::list::Entry>>,
        flags: &WalkFlags,
    ) -> Result<(), ArchiveError> {
        let spec = self.spec;
        let (mut failures, mut untrusted, mut files) = (vec![], false, 0);
        let ask = spec.walk_ask(0);
        for ep in &spec.get.mirrors {
            let mut began = false;
            match walk_stream(ep, self.src, &ask, spec.get.token.as_deref(), walk_tx.clone(), &mut began).await {
                Ok(errors) if errors.is_empty() => return Ok(()),
                Ok(errors) => {
                    // The careful path takes it from here: another
                    // mirror may read all of it, or the list with the
                    // fewest holes is moved and the holes are told.
                    failures.push(format!("  {ep}: {} entries could not be read", errors.len()));
                    flags.unreadable.store(true, Ordering::Release);
                }
                Err(e) => {
                    untrusted |= matches!(e, SessionError::Tls(_));
                    files += usize::from(super::mirrors::names_a_file(&e));
                    failures.push(format!("  {ep}: {e}"))
                }
            }
            if began {
                flags.broke.store(true, Ordering::Release);
                break;
            }
        }
        let a_file = files > 0 && files == failures.len();
        Err(ArchiveError::Walk { src: self.src.to_string(), failures, untrusted, a_file })
    }

    /// The split stage: entries into parts, cut whenever the mover is free
    /// and enough have come; directories kept for the end, hard-linked
    /// files for the last part.
    async fn split_walk(
        &self,
        mut walk_rx: tokio::sync::mpsc::Receiver<Vec<ddtree::list::Entry>>,
        part_tx: tokio::sync::mpsc::Sender<Part>,
        busy: &AtomicUsize,
    ) -> Result<Split, ArchiveError> {
        let mut warnings = vec![];
        let mut dirs = vec![];
        let mut pending: Vec<Item> = vec![];
        // Hard-linked files wait for the whole list: which name comes
        // first (and moves; the others are linked to it) is known then.
        let mut linked: Vec<Item> = vec![];
        let mut bytes = 0;
        // Files and symlinks listed so far (all move: DEST is fresh).
        let mut movable = 0u64;
        let mut listed_bytes = 0u64;
        let mut scratch = vec![];
        while let Some(batch) = walk_rx.recv().await {
            let listed = batch.len() as u64;
            let mut admitted = vec![];
            for e in batch {
                self.admit(e, &mut |w| warnings.push(w.to_string()), &mut admitted, &mut scratch);
            }
            for it in admitted {
                if it.entry.kind == Kind::Dir {
                    dirs.push(it);
                    continue;
                }
                movable += 1;
                if it.entry.kind == Kind::File {
                    listed_bytes += it.entry.size;
                }
                if it.entry.kind == Kind::File && it.entry.meta.link().is_some() {
                    linked.push(it);
                } else {
                    bytes += it.entry.size;
                    pending.push(it);
                }
            }
            {
                let c = &mut self.tally.lock().expect("tally lock").counts;
                c.listed += listed;
                c.listed_bytes = listed_bytes;
                c.walking = true;
                c.to_move = movable;
            }
            let worth = bytes >= self.spec.part_bytes || pending.len() >= PART_FILES;
            if worth && busy.load(Ordering::Acquire) == 0 {
                busy.fetch_add(1, Ordering::AcqRel);
                self.cut(&mut pending, &part_tx, false, None).await?;
                bytes = 0;
            }
        }
        self.admit_end(&mut |w| warnings.push(w.to_string()));
        linked.sort_unstable_by(|a, b| a.entry.path.cmp(&b.entry.path));
        self.split_links(&mut linked);
        {
            // Second names of hard-linked files are linked, not moved.
            let links = self.listing.lock().expect("listing lock").linked.len() as u64;
            let c = &mut self.tally.lock().expect("tally lock").counts;
            c.walking = false;
            c.to_move = movable - links;
        }
        pending.append(&mut linked);
        Ok((dirs, pending, part_tx, warnings))
    }

    /// The mover: each part as it comes, its files created ahead stopped,
    /// the walk's directories finished while the last part moves if they
    /// can be.
    async fn move_parts(
        &self,
        mut part_rx: tokio::sync::mpsc::Receiver<Part>,
        whole: &mut Parts<'_>,
        busy: &AtomicUsize,
    ) -> Result<Moved, ArchiveError> {
        let mut moved: Vec<Arc<Vec<Item>>> = vec![];
        let (mut transfer, mut parts) = (None, 0);
        let mut spent = Phases::default();
        // The walk's directories, and those not finished early.
        let mut last = None;
        while let Some(part) = part_rx.recv().await {
            let todo: Vec<&Item> = part.items.iter().collect();
            spent.prepare += part.readying;
            let created = match part.ahead {
                Some(ahead) => ahead.stop().await,
                None => false,
            };
            let early = match part.dirs {
                Some(dirs) if created => Some(self.finish_early(dirs, part.items.clone())),
                Some(dirs) => {
                    last = Some((dirs, None));
                    None
                }
                None => None,
            };
            let r = self.move_part(&todo, part.ready, part.defs, whole, &mut spent).await;
            if let Some(early) = early {
                let (dirs, done) = early.await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
                last = Some((dirs, Some(done?)));
            }
            let r = r?;
            parts += u64::from(r.is_some());
            transfer = merge_reports(transfer, r);
            drop(todo);
            moved.push(part.items);
            busy.fetch_sub(1, Ordering::AcqRel);
        }
        Ok((moved, transfer, parts, spent, last))
    }

    /// The report of a streamed run: what moved (`dirs` and the parts
    /// `moved`), in `seconds`.
    fn streamed_report(&self, dirs: &[Item], moved: &[Arc<Vec<Item>>], seconds: f64, phases: Phases) -> ArchiveReport {
        // The parts as they were moved, not gathered into one list (100,000
        // entries copied are milliseconds the end waits for).
        let items = || dirs.iter().chain(moved.iter().flat_map(|p| p.iter()));
        let attrs_set = self.keep_meta(items());
        let files = items().filter(|it| it.entry.kind == Kind::File);
        let (files, bytes) = files.fold((0, 0), |(n, b), it| (n + 1, b + it.entry.meta.moved_len(it.entry.size)));
        let (setid_cleared, excluded) = self.cleared_and_excluded();
        ArchiveReport {
            src: self.src.to_string(),
            dest: self.spec.dest.display().to_string(),
            files,
            dirs: dirs.iter().filter(|it| it.entry.kind == Kind::Dir).count() as u64,
            dirs_finished_early: 0,
            links: items().filter(|it| it.entry.kind == Kind::Link).count() as u64,
            bytes,
            resumed_bytes: 0,
            matched_bytes: 0,
            skipped_files: 0,
            skipped_bytes: 0,
            seconds,
            files_per_second: files as f64 / seconds.max(1e-9),
            mb_per_s: bytes as f64 / 1e6 / seconds.max(1e-9),
            phases,
            setid_cleared,
            failed: self.take_failures(),
            parts: 0,
            excluded,
            deleted: 0,
            deletions_skipped: 0,
            modes_fixed: 0,
            specials: 0,
            hard_links: 0,
            attrs_set,
            dry_run: None,
            changes: vec![],
            transfer: None,
            ranks: vec![],
        }
    }

    /// `pending` (emptied) as the next part: sorted, sent to every mirror
    /// to register, and made ready to move; its files created `ahead` if
    /// a part is moving.
    async fn cut(
        &self,
        pending: &mut Vec<Item>,
        parts: &tokio::sync::mpsc::Sender<Part>,
        ahead: bool,
        dirs: Option<Vec<Item>>,
    ) -> Result<(), ArchiveError> {
        // Tens of milliseconds of work for a large part, each on a thread of
        // its own: the runtime's threads meanwhile take in the part moving.
        let mut items = std::mem::take(pending);
        let (items, def) = blocking(move || {
            items.sort_unstable_by(|a, b| a.entry.path.cmp(&b.entry.path));
            let def = definition(&items.iter().collect::<Vec<_>>());
            (items, def)
        })
        .await;
        let defs = define_everywhere(self.spec, Some(def));
        let (dest, fresh, umask, owners) = (self.dest.clone(), self.fresh, self.umask, self.spec.owners);
        let (items, ready, readying) = blocking(move || {
            let started = Instant::now();
            let ready = Ready::new(&items.iter().collect::<Vec<_>>(), &dest, fresh, umask, owners);
            (items, ready, started.elapsed().as_secs_f64())
        })
        .await;
        let ready = ready?;
        // The mover is gone only when it failed: its error is the one told.
        let ahead = ahead.then(|| Ahead::start(ready.store.clone()));
        let _ = parts.send(Part { items: Arc::new(items), ready, defs, readying, ahead, dirs }).await;
        Ok(())
    }

    /// The last part (`moving`) has all its files (created ahead): on a
    /// thread while it moves, `dirs` are finished but those the part may
    /// still change (`still_changing`). Gives `dirs` back, and the indexes
    /// of those left.
    fn finish_early(&self, dirs: Vec<Item>, moving: Arc<Vec<Item>>) -> FinishingEarly {
        let later = still_changing(&moving);
        let (dest, fresh, umask, owners) = (self.dest.clone(), self.fresh, self.umask, self.spec.owners);
        let window = self.spec.modify_window;
        // Spawned now (a `blocking` future would start only when awaited).
        tokio::task::spawn_blocking(move || {
            let done = Dirs { dest: &dest, fresh, umask, owners, window }.finish_except(dirs.iter(), &later);
            let left = dirs.iter().enumerate().filter(|(_, d)| later(d)).map(|(i, _)| i).collect();
            (dirs, done.map(|()| left))
        })
    }
}
