//! The state of one archive run ([`Archiving`]) and how a part of it
//! moves: the list taken in, a range made ready, moved from every mirror,
//! and read from another where a mirror's copy changed.

use super::*;

/// What every part of one archive run shares.
pub(super) struct Archiving<'a> {
    pub(super) spec: &'a ArchiveSpec,
    /// SRC, trimmed (`.` for the whole root).
    pub(super) src: &'a str,
    pub(super) umask: u32,
    pub(super) started: Instant,
    /// The umask and user, for [`super::kept`].
    pub(super) here: super::kept::Here,
    /// DEST, opened: every entry is made beneath it.
    pub(super) dest: Dest,
    /// DEST was empty (or new).
    pub(super) fresh: bool,
    /// The list's check and what the list sets aside (specials, second
    /// names of hard links, names kept from `--delete`): written while the
    /// list is read (in a streamed run, beside the parts moving), read
    /// when the run ends. Shared: the stages of a streamed run are
    /// futures of one task that all hold the run.
    pub(super) listing: std::sync::Mutex<Listing>,
    /// What the run reports (failures, counts, progress): added to by the
    /// list, the move's progress and the threads that set metadata over
    /// the cores.
    pub(super) tally: std::sync::Mutex<Tally>,
    /// `--backup-dir`, opened by whichever step first backs something up.
    pub(super) backup_at: std::sync::OnceLock<backup::Backup>,
    /// `--peers`/`--share`: the range the other receivers move too (the
    /// whole list, the same on each), shared once; a range of this run's
    /// own (entries moved again, read elsewhere) is not theirs.
    pub(super) share: std::sync::Mutex<Option<crate::transfer::share::Share>>,
    /// The filter with the rules of the list's merge files (rsync's
    /// `dir-merge`, `-F`), once the list is read ([`Self::filter`]).
    pub(super) merged: std::sync::OnceLock<super::filter::Filter>,
    /// The filter with DEST's merge files, what `--delete` leaves by.
    pub(super) merged_dest: std::sync::OnceLock<super::filter::Filter>,
    /// What `--link-dest`, `--compare-dest` or `--copy-dest` found.
    pub(super) based: std::sync::OnceLock<super::basis::Based>,
}

/// The list's check and what the list sets aside ([`Archiving::listing`]).
#[derive(Default)]
pub(super) struct Listing {
    /// Names admitted so far, entries waiting for their directory.
    pub(super) shape: ddtree::list::shape::Shape<(PathBuf, Entry)>,
    /// The directories' verdicts of the filter so far.
    pub(super) excluded_dirs: std::collections::HashMap<PathBuf, bool>,
    /// Listed entries not copied (their kind): `--delete` keeps what DEST
    /// has under their names.
    pub(super) kept: HashSet<PathBuf>,
    /// FIFOs, sockets, device nodes: no bytes to move, made in place.
    pub(super) specials: Vec<Item>,
    /// Second names of hard-linked files, linked once the first is in place.
    pub(super) linked: Vec<keep::Linked>,
    /// Ids of the owners' and groups' names (`--by-name`).
    pub(super) names: ddtree::names::Names,
    /// rsync's lines for entries an `-a` part not asked for leaves out
    /// (`skipping non-regular file "NAME"`), in list order.
    pub(super) skipping: Vec<(PathBuf, String)>,
}

/// What a run reports ([`Archiving::tally`]).
#[derive(Default)]
pub(super) struct Tally {
    /// Entries that could not be copied, and why.
    pub(super) failures: Vec<Failure>,
    /// Entries a rule excluded.
    pub(super) excluded: u64,
    /// Files whose setuid/setgid bits were dropped.
    pub(super) setid_cleared: u64,
    /// Deletions `--max-delete` held back.
    pub(super) deletions_skipped: u64,
    /// Some of SRC could not be read, or the list refused entries: what
    /// SRC holds is not known whole.
    pub(super) incomplete: bool,
    /// DEST is this run's (rsync's `cd+++++++++ ./`).
    pub(super) dest_made: bool,
    /// Entries listed and moved so far (`moved`: in the parts done), for
    /// the progress display.
    pub(super) counts: EntryCounts,
}

/// A range's files made ready to move: the store they are written
/// through, and their list, kept beside the journal while the range moves
/// (for 100,000 files, tens of milliseconds of work each).
pub(super) struct Ready {
    pub(super) store: Arc<TreeStore>,
    pub(super) saved: Vec<u8>,
}

impl Ready {
    pub(super) fn new(
        todo: &[&Item],
        dest: &Dest,
        fresh: bool,
        umask: u32,
        owners: bool,
    ) -> Result<Ready, ArchiveError> {
        Ok(Ready { store: Arc::new(TreeStore::new(todo, dest, fresh, umask, owners)?), saved: saved_list(todo) })
    }
}

/// `f` on a thread of the runtime's blocking pool.
pub(super) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

impl<'a> Archiving<'a> {
    pub(super) fn new(spec: &'a ArchiveSpec, src: &'a str, started: Instant, fresh: bool, dest: Dest) -> Archiving<'a> {
        Archiving {
            spec,
            src,
            umask: umask(),
            here: super::kept::Here::new(umask()),
            started,
            dest,
            fresh,
            listing: Default::default(),
            tally: Default::default(),
            backup_at: std::sync::OnceLock::new(),
            share: std::sync::Mutex::new(spec.get.share.clone()),
            merged: std::sync::OnceLock::new(),
            merged_dest: std::sync::OnceLock::new(),
            based: std::sync::OnceLock::new(),
        }
    }

    /// Records an entry that could not be copied (the rest goes on).
    pub(super) fn failed(&self, rel: &Path, why: String) {
        let path = Path::new(self.src).join(rel).display().to_string();
        self.tally.lock().expect("tally lock").failures.push(Failure { path, why });
    }

    /// The setuid/setgid bits dropped and the entries excluded, so far
    /// (one lock: a report built in one expression must not take it twice).
    pub(super) fn cleared_and_excluded(&self) -> (u64, u64) {
        let t = self.tally.lock().expect("tally lock");
        (t.setid_cleared, t.excluded)
    }

    pub(super) fn take_failures(&self) -> Vec<Failure> {
        std::mem::take(&mut self.tally.lock().expect("tally lock").failures)
    }

    /// Where the range is journaled (`DEST/.ddftp-archive`, never a file).
    pub(super) fn output(&self) -> PathBuf {
        self.spec.dest.join(".ddftp-archive")
    }

    /// The list of the range being moved, kept beside its journal.
    pub(super) fn saved(&self) -> PathBuf {
        self.spec.dest.join(".ddftp-archive.list")
    }

    /// `todo` made ready to move (the time it took counted as `prepare`).
    pub(super) fn ready(&self, todo: &[&Item], phases: &mut Phases) -> Result<Ready, ArchiveError> {
        let started = Instant::now();
        let ready = Ready::new(todo, &self.dest, self.fresh, self.umask, self.spec.owners)?;
        phases.prepare += started.elapsed().as_secs_f64();
        Ok(ready)
    }

    /// Moves `todo` (files and symlinks, made `ready`) into DEST as one
    /// bundle, from the mirrors registering it (`defs`), and finishes them.
    pub(super) async fn move_part(
        &self,
        todo: &[&Item],
        ready: Ready,
        mut defs: Defining,
        progress: &mut dyn Progress,
        phases: &mut Phases,
    ) -> Result<Option<TransferReport>, ArchiveError> {
        let spec = self.spec;
        let prepared = Instant::now();
        let Ready { store, saved: list } = ready;
        store.create()?;
        phases.prepare += prepared.elapsed().as_secs_f64();
        let waited = Instant::now();
        // The move starts as soon as one mirror has registered the bundle;
        // the others join the running transfer as they do (a slow link
        // takes longer to carry the definition).
        let mut failures = vec![];
        let (name, first) = loop {
            match defs.join_next().await {
                Some((ep, Ok(name))) => break (name, ep),
                Some((ep, Err(e))) => {
                    let w = format!("skipping {ep}: {e}");
                    progress.warn(&w);
                    failures.push(format!("  {w}"));
                }
                None => return Err(ArchiveError::NoBundle { failures }),
            }
        };
        phases.check += waited.elapsed().as_secs_f64();
        let (join_tx, mut joining) = tokio::sync::mpsc::unbounded_channel();
        let defs_def = defs.def.clone();
        let expected = name.clone();
        tokio::spawn(async move {
            while let Some((ep, r)) = defs.join_next().await {
                let r = r.and_then(|n| match n == expected {
                    true => Ok(()),
                    false => Err(SessionError::BundleName { name: n, expected: expected.clone() }),
                });
                if join_tx.send((ep, r)).is_err() {
                    return;
                }
            }
        });
        let mut get = spec.get.clone();
        get.path = name;
        get.mirrors = vec![first];
        get.output = self.output();
        get.store = Some(store.clone() as Arc<dyn Store>);
        get.sealed_size = Some(store.layout.size());
        get.bundle = defs_def;
        get.share = self.share.lock().expect("share lock").take();
        let moving = Instant::now();
        let mut report = None;
        if store.layout.size() > 0 {
            // Kept until the range is complete: a rerun after an interruption
            // moves this list again, and resumes it from the journal.
            let saved = self.saved();
            ddtree::scratch::create(&saved)
                .and_then(|mut f| io::Write::write_all(&mut f, &list))
                .map_err(local(&saved))?;
            let mut counting = Counting { inner: progress, layout: &store.layout, counts: &self.tally };
            let progress = &mut counting as &mut dyn Progress;
            match transfer::get_joining(&get, progress, Some(&mut joining)).await {
                Err(e @ (TransferError::Journal(_) | TransferError::BlockSizeMismatch { .. })) => {
                    // An earlier run's journal for another list: start the range over.
                    progress.warn(&format!("{e}; moving the whole range again"));
                    get.restart = true;
                    report = Some(transfer::get_joining(&get, progress, Some(&mut joining)).await?);
                }
                r => report = Some(r?),
            }
            // The range is complete (its journal is gone with it).
            let _ = std::fs::remove_file(&saved);
        }
        self.tally.lock().expect("tally lock").counts.moved += todo.len() as u64;
        phases.moving += moving.elapsed().as_secs_f64();
        // Symlinks are made as their targets come; one this run got no
        // bytes for (its blocks were on disk from an interrupted run) must be
        // there from that run, or is moved again.
        let lost: Vec<&Item> = todo
            .iter()
            .enumerate()
            .filter(|&(i, it)| it.entry.kind == Kind::Link && !store.is_finished(i) && !store.is_bad(i))
            .filter(|(_, it)| {
                let target = deep::read_link(&self.dest.join(&it.rel));
                !target.is_ok_and(|t| t.as_os_str().len() as u64 == it.entry.size)
            })
            .map(|(_, it)| *it)
            .collect();
        if !lost.is_empty() {
            progress.warn(&format!("symlinks the interrupted run made are gone ({}): moving them again", lost.len()));
            let defs = define_everywhere(spec, Some(definition(&lost)));
            let ready = self.ready(&lost, phases)?;
            let again = Box::pin(self.move_part(&lost, ready, defs, progress, phases)).await?;
            report = merge_reports(report, again);
        }
        for i in store.other_targets() {
            let why = "a symlink whose target is not the one listed (changed on the mirror since the walk?): not made";
            self.failed(&todo[i].rel, why.to_string());
        }
        let unread = store.unread().into_iter().map(|(i, u)| (todo[i], u)).collect();
        let again = self.read_elsewhere(unread, progress, phases).await?;
        report = merge_reports(report, again);
        // The files not finished as they were written, put in place; two
        // threads (two or three syscalls a file).
        let files: Vec<(usize, &&Item)> =
            todo.iter().enumerate().filter(|&(i, it)| it.entry.kind == Kind::File && !store.is_finished(i)).collect();
        let finish = |part: &[(usize, &&Item)]| -> Result<(), ArchiveError> {
            for &(i, it) in part {
                match store.put_in_place(i, &it.entry) {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => self.failed(&it.rel, e.to_string()),
                    r => r.map_err(local(&self.dest.join(&it.rel)))?,
                }
            }
            Ok(())
        };
        let (a, b) = files.split_at(files.len() / 2);
        std::thread::scope(|sc| {
            let other = sc.spawn(|| finish(b));
            finish(a).and(other.join().expect("finishing thread panicked"))
        })?;
        if !self.fresh {
            // An interrupted run that moved another list may have left part
            // files of files this run wrote whole.
            for (i, it) in todo.iter().enumerate() {
                if it.entry.kind == Kind::File && store.is_finished(i) {
                    let p = store.part_path(i);
                    deep::remove_file(&p)
                        .or_else(|e| if e.kind() == io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
                        .map_err(local(&p))?;
                }
            }
        }
        Ok(report)
    }

    /// Entries a mirror could not read asked of the mirrors that did not
    /// say so; what none can read is told, not written.
    pub(super) async fn read_elsewhere(
        &self,
        unread: Vec<(&Item, tree::Unread)>,
        progress: &mut dyn Progress,
        phases: &mut Phases,
    ) -> Result<Option<TransferReport>, ArchiveError> {
        let spec = self.spec;
        let said: HashSet<&str> = unread.iter().flat_map(|(_, u)| u.mirrors.iter().map(String::as_str)).collect();
        let others: Vec<Peer> =
            spec.get.mirrors.iter().filter(|m| !said.contains(m.to_string().as_str())).cloned().collect();
        if unread.is_empty() || others.is_empty() {
            for (it, u) in unread {
                self.failed(&it.rel, u.why);
            }
            return Ok(None);
        }
        let again: Vec<&Item> = unread.iter().map(|(it, _)| *it).collect();
        progress.warn(&format!(
            "{} entries could not be read on {}: asking the other mirrors",
            again.len(),
            said.iter().copied().collect::<Vec<_>>().join(", ")
        ));
        let sub_spec =
            ArchiveSpec { get: GetSpec { mirrors: others, share: None, ..spec.get.clone() }, ..spec.clone() };
        let sub = Archiving::new(&sub_spec, self.src, self.started, self.fresh, self.dest.clone());
        let defs = define_everywhere(&sub_spec, Some(definition(&again)));
        let ready = sub.ready(&again, phases)?;
        let r = Box::pin(sub.move_part(&again, ready, defs, progress, phases)).await?;
        self.tally.lock().expect("tally lock").failures.extend(sub.take_failures());
        Ok(r)
    }

    /// What DEST needs of `items`: the files and symlinks to move, and
    /// what is complete already.
    ///
    /// The mirrors register the list while the files are made ready here.
    /// In a fresh destination a directory is made by the first entry
    /// written into it (while the move waits on the links; ranks making the
    /// same directory at once each take the one that is there), empty ones
    /// at the end. Into an existing destination, directories are put right
    /// first, so nothing is judged through a symlink that stood in a
    /// directory's place; an interrupted one-process run's list is taken up
    /// again if it still holds (not by ranks: its journal is not theirs).
    pub(super) fn chosen<'i>(
        &self,
        items: &'i [Item],
        ranked: bool,
        progress: &mut dyn Progress,
    ) -> Result<Chosen<'i>, ArchiveError> {
        let (dest, owners) = (&self.dest, self.spec.owners);
        if self.fresh {
            return Ok(choose(items, dest, true, owners, super::current::Quick::default()));
        }
        make_dirs(items, dest)?;
        // What the bases hold goes in first: the files then are complete.
        let based = self.based.get();
        if let Some(b) = based {
            b.put(items, dest, owners);
            b.put(&self.listing.lock().expect("listing lock").specials, dest, owners);
        }
        let again = match ranked {
            true => None,
            false => resumed(items, dest, &self.saved(), &journal_path(&self.output())),
        };
        let mut chosen = again.unwrap_or_else(|| choose(items, dest, false, owners, self.spec.quick()));
        if let Some(b) = based {
            chosen.leave_out_basis(b);
        }
        self.make_way(&mut chosen, progress);
        if self.spec.backs_up() {
            self.back_up(&mut chosen, progress);
        }
        Ok(chosen)
    }

    pub(super) fn dirs(&self) -> Dirs<'_> {
        let window = self.spec.modify_window;
        Dirs { dest: &self.dest, fresh: self.fresh, umask: self.umask, owners: self.spec.owners, window }
    }
}

impl Archiving<'_> {
    /// The list (a mirror's walk or `--list`), through the list's check,
    /// the filters and the sync options, as items under DEST; what could
    /// not be read is named.
    pub(super) async fn items(&self, progress: &mut dyn Progress) -> Result<Vec<Item>, ArchiveError> {
        let (mut entries, unread) = fetch_list(self.spec, progress).await?;
        if self.spec.xattrs && self.spec.list.is_some() && entries.iter().all(|e| e.meta.xattrs().is_none()) {
            progress
                .warn("--xattrs: the list given carries no extended attributes (a mirror's walk does): none are set");
        }
        self.tally.lock().expect("tally lock").incomplete = !unread.is_empty();
        for (path, why) in unread {
            progress.warn(&format!("cannot copy {path}: {why}"));
            self.tally.lock().expect("tally lock").failures.push(Failure { path, why });
        }
        // Sorted, a directory comes before what it holds; a name listed twice
        // is refused by the list's check (one of them), not dropped unseen.
        entries.sort_by(|a, b| self.spec.rel_of(a).cmp(&self.spec.rel_of(b)));
        self.listing.lock().expect("listing lock").shape = ddtree::list::shape::Shape::with_capacity(entries.len());
        let (mut items, mut admitted) = (Vec::with_capacity(entries.len()), vec![]);
        match self.spec.follow {
            ddtree::follow::Follow::No => {
                self.take_merge_files(entries.iter().filter_map(|e| Some((self.spec.rel_of(e)?, e))), progress);
                for e in entries {
                    self.admit(e, &mut |w| progress.warn(w), &mut items, &mut admitted);
                }
            }
            _ => {
                let listed = self.follow_links(entries, progress).await;
                self.take_merge_files(listed.iter().map(|(r, e)| (r.as_slice(), e)), progress);
                for (rel, e) in listed {
                    self.admit_as(rel.into(), e, &mut |w| progress.warn(w), &mut items, &mut admitted);
                }
            }
        }
        self.admit_end(&mut |w| progress.warn(w));
        self.split_links(&mut items);
        if let Some(named) = &self.spec.files_from {
            self.name_missing(named, &items, progress);
        }
        if self.spec.ignore_existing {
            self.leave_existing(&mut items);
        }
        if self.spec.update {
            self.leave_newer(&mut items);
        }
        if !self.spec.sizes.all() {
            self.leave_sized(&mut items);
        }
        if self.spec.safe_links {
            self.leave_unsafe_links(&mut items, progress);
        }
        if self.spec.existing {
            self.leave_missing(&mut items);
        }
        self.protect_backup()?;
        if !self.spec.copies_src_itself() {
            items.retain(|it| !it.rel.as_os_str().is_empty());
        }
        if items.is_empty() {
            return Err(ArchiveError::BadEntry { path: self.src.into(), why: "nothing under it in the list".into() });
        }
        Ok(items)
    }
}
