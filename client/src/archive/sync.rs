//! What makes an archive a sync: the changes a run would make, one line
//! each in rsync's `--itemize-changes` letters (`--dry-run`), and the
//! entries of DEST that SRC no longer has (`--delete`).
//!
//! Lines are `YXcstpoguax PATH`: `>f` a file moved (`+++++++++` new, else
//! `s` size and `t` mtime differ), `.f...p.....` a file whose mode alone
//! changes (set here, nothing moved), `cd+++++++++` a new directory,
//! `.d..tp.....` one whose mtime or mode changes, `cL+++++++++` a new
//! symlink, `*deleting   PATH` a removal (directories end in `/`).

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};

use crate::progress::escaped;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ddtree::list::Kind;

use super::backup::Backup;
use super::basis::Based;
use super::current::{self, Held};
use super::decide;
use super::deleting::{at_most, extraneous, Extraneous};
use super::judge::{judge, Keep};
use super::keep::Linked;
use super::{deep, local, ArchiveError, ArchiveReport, Archiving, Item, Phases};
use crate::transfer::Progress;
use ddtree::files_from::FilesFrom;

/// The changes a run would make, and their counts.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Plan {
    pub new_files: u64,
    /// Files moved again (size or mtime differ).
    pub changed_files: u64,
    /// Files whose mode alone differs (fixed without moving them).
    pub mode_only: u64,
    pub new_dirs: u64,
    /// Directories whose mode or mtime will be set.
    pub changed_dirs: u64,
    pub new_links: u64,
    /// FIFOs and sockets to make.
    pub new_specials: u64,
    pub deletions: u64,
    /// Deletions `--max-delete` holds back.
    pub deletions_skipped: u64,
    /// Bytes of the files to move.
    pub bytes: u64,
    /// One line per change, in path order (deletions where their
    /// directory is).
    pub lines: Vec<String>,
    /// The entry (below SRC) each line is of.
    #[serde(skip)]
    rels: Vec<PathBuf>,
}

impl Plan {
    /// Counts `action` on the listed entry `e`.
    fn count(&mut self, e: &ddtree::list::Entry, action: decide::Action) {
        use decide::Action::*;
        match (e.kind, action) {
            (Kind::Dir, Make) => self.new_dirs += 1,
            (Kind::Dir, Meta { .. }) => self.changed_dirs += 1,
            (Kind::File, Make) => {
                self.new_files += 1;
                self.bytes += e.meta.moved_len(e.size);
            }
            (Kind::File, Move { .. }) => {
                self.changed_files += 1;
                self.bytes += e.meta.moved_len(e.size);
            }
            (Kind::File, Meta { .. }) => self.mode_only += 1,
            (Kind::Link, Make | Remake { .. }) => self.new_links += 1,
            (Kind::Block | Kind::Char | Kind::Fifo | Kind::Socket, Make) => self.new_specials += 1,
            _ => {}
        }
    }

    /// DEST (`dest`, as given) is made by this run: its line is a new
    /// directory's, and rsync's `created directory DEST` comes first.
    fn dest_made(&mut self, dest: &Path) {
        use std::os::unix::ffi::OsStrExt;
        if let Some(at) = self.rels.iter().position(|r| r.as_os_str().is_empty()) {
            if !self.lines[at].starts_with("cd") {
                self.lines[at] = "cd+++++++++ ./".into();
                self.changed_dirs = self.changed_dirs.saturating_sub(1);
                self.new_dirs += 1;
            }
        }
        let shown = escaped(dest.as_os_str().as_bytes());
        self.lines.insert(0, format!("created directory {}", shown.trim_end_matches('/')));
        self.rels.insert(0, PathBuf::new());
    }

    /// rsync's `skipping non-regular file` lines (with the entries they
    /// are of) where rsync says them: as it lists a directory, just before
    /// that directory's own line (or the first of what is in it; at the end
    /// if nothing there changes).
    fn skipping(&mut self, skipped: Vec<(PathBuf, String)>) {
        if skipped.is_empty() {
            return;
        }
        let first = usize::from(self.lines.first().is_some_and(|l| l.starts_with("created directory ")));
        // Where each directory's lines begin: the first line of it or of
        // anything below it (one pass, each line's ancestors).
        let mut begins: HashMap<&Path, usize> = HashMap::new();
        for (i, rel) in self.rels.iter().enumerate().skip(first) {
            // A directory seen had its own directories seen with it.
            for a in rel.ancestors().take_while(|a| !begins.contains_key(a)).collect::<Vec<_>>() {
                begins.insert(a, i);
            }
        }
        let n = self.rels.len();
        let mut at: Vec<(usize, PathBuf, String)> = skipped
            .into_iter()
            .map(|(rel, line)| (begins.get(rel.parent().unwrap_or(Path::new(""))).copied().unwrap_or(n), rel, line))
            .collect();
        // In list order among those at one place.
        at.sort_by_key(|(i, ..)| *i);
        let (lines, rels) = (std::mem::take(&mut self.lines), std::mem::take(&mut self.rels));
        let mut at = at.into_iter().peekable();
        for (i, (line, rel)) in lines.into_iter().zip(rels).enumerate() {
            while let Some((_, r, l)) = at.next_if(|(a, ..)| *a == i) {
                self.lines.push(l);
                self.rels.push(r);
            }
            self.lines.push(line);
            self.rels.push(rel);
        }
        for (_, r, l) in at {
            self.lines.push(l);
            self.rels.push(r);
        }
    }

    /// The lines of the changes a run made: those of the entries it did
    /// not name in `failed` (paths as [`Failure`] gives them, below `src`).
    pub(super) fn made(self, src: &str, failed: &[super::Failure]) -> Vec<String> {
        let failed: HashSet<&str> = failed.iter().map(|f| f.path.as_str()).collect();
        let ok = |rel: &PathBuf| !failed.contains(Path::new(src).join(rel).display().to_string().as_str());
        self.rels.iter().zip(self.lines).filter(|(rel, _)| ok(rel)).map(|(_, l)| l).collect()
    }
}

fn shown(rel: &Path, dir: bool) -> String {
    use std::os::unix::ffi::OsStrExt;
    let s = escaped(rel.as_os_str().as_bytes());
    match (s.is_empty(), dir) {
        (true, _) => "./".into(),
        (false, true) => format!("{s}/"),
        (false, false) => s,
    }
}

/// DEST as a run finds it: the directory, and what the bases hold of
/// the entries it lacks (`--link-dest`...).
pub(super) struct Onto<'a> {
    pub dest: &'a deep::Dest,
    pub based: &'a Based,
}

/// What a run would do to DEST for `items` (sorted by path), and, with
/// `extra` (from [`extraneous`]), what it would delete, leaving out
/// `blocked` (what it would refuse to replace); `keep`: whether
/// owners and xattrs are compared too.
pub(super) fn plan(
    items: &[Item],
    specials: &[Item],
    linked: &[Linked],
    onto: Onto,
    extra: &Extraneous,
    blocked: &HashSet<PathBuf>,
    keep: Keep,
) -> Plan {
    let Onto { dest, based } = onto;
    let mut p = Plan::default();
    let mut lines: Vec<(PathBuf, Shown, String)> = vec![];
    let specials = specials.iter().filter(|it| !blocked.contains(&it.rel));
    let linked = linked.iter().filter(|l| !blocked.contains(&l.item.rel));
    let items = items.iter().filter(|it| !blocked.contains(&it.rel));
    for l in linked {
        let (to, from) = (dest.join(&l.item.rel), dest.join(&l.to));
        let same = |a: &std::fs::Metadata, b: &std::fs::Metadata| a.dev() == b.dev() && a.ino() == b.ino();
        match (deep::symlink_metadata(&to), deep::symlink_metadata(&from)) {
            (Ok(a), Ok(b)) if same(&a, &b) => {}
            _ => {
                p.new_links += 1;
                let line = format!("hf+++++++++ {} => {}", shown(&l.item.rel, false), l.to.display());
                lines.push((l.item.rel.clone(), Shown::Other, line));
            }
        }
    }
    for it in specials.chain(items) {
        let e = &it.entry;
        let path = dest.join(&it.rel);
        let m = deep::symlink_metadata(&path).ok();
        let (action, code) = match (based.code(&it.rel, e.kind), &m) {
            // DEST lacked it and a basis holds it (`--link-dest`...):
            // counted as new only if moved.
            (Some(code), _) => {
                if based.leaves_out(&it.rel, e.kind) {
                    continue;
                }
                let moved = based.found.get(&it.rel).is_some_and(|b| matches!(b.action, decide::Action::Move { .. }));
                (if moved { decide::Action::Make } else { decide::Action::Current }, code)
            }
            (None, Some(m)) => {
                let (action, attrs) = judge(&keep, &path, m, it);
                (action, decide::code(e.kind, action, attrs.as_deref()))
            }
            (None, None) => (decide::Action::Make, decide::code(e.kind, decide::Action::Make, None)),
        };
        p.count(e, action);
        if let Some(mut code) = code {
            if !keep.times && matches!(action, decide::Action::Move { time: true, .. }) {
                code.replace_range(4..5, "T");
            }
            let to = e.meta.target().filter(|_| e.kind == Kind::Link);
            let to = to.map(|t| format!(" -> {}", escaped(t))).unwrap_or_default();
            let what = if e.kind == Kind::Dir { Shown::Dir } else { Shown::Other };
            lines.push((it.rel.clone(), what, format!("{code} {}{to}", shown(&it.rel, e.kind == Kind::Dir))));
        }
    }
    for (rel, dir) in &extra.gone {
        p.deletions += 1;
        lines.push((rel.clone(), Shown::Deleted, format!("*deleting   {}", shown(rel, *dir))));
    }
    for rel in &extra.non_empty {
        let line = format!("cannot delete non-empty directory: {}", shown(rel, false));
        lines.push((rel.clone(), Shown::Deleted, line));
    }
    let deleted: HashSet<&Path> = extra.gone.iter().map(|(r, _)| r.as_path()).collect();
    lines.sort_by_cached_key(|(rel, what, _)| in_rsyncs_order(rel, *what, &deleted));
    (p.rels, p.lines) = lines.into_iter().map(|(r, _, l)| (r, l)).unzip();
    p
}

/// A line's place: deletions (0) or the rest (1), the directory path in
/// the recursion's order, and for deletions the path reversed.
type Place = (u8, Vec<(u8, Vec<u8>)>, Reverse<Vec<u8>>);

/// What a line is of, for its place among the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Deleted,
    Other,
    Dir,
}

/// A line's place in rsync's order (its recursion, directory by
/// directory): the deletions first, directory by directory, each
/// directory's in reverse order (what a deleted directory held before
/// it); then a directory's line, its other entries by name, then each
/// subdirectory the same way, by name.
fn in_rsyncs_order(rel: &Path, what: Shown, deleted: &HashSet<&Path>) -> Place {
    use std::os::unix::ffi::OsStrExt;
    let walk = |p: &Path, what: Shown| -> Vec<(u8, Vec<u8>)> {
        let names: Vec<&[u8]> = p.iter().map(|c| c.as_bytes()).collect();
        let last = names.len().saturating_sub(1);
        names
            .iter()
            .enumerate()
            .map(|(i, n)| (if i == last && what == Shown::Other { 1 } else { 2 }, n.to_vec()))
            .collect()
    };
    if what != Shown::Deleted {
        return (1, walk(rel, what), Reverse(vec![]));
    }
    // The top of the deleted subtree `rel` is in: its directory's group.
    let top = rel.ancestors().filter(|a| deleted.contains(a)).last().unwrap_or(rel);
    let dir = top.parent().unwrap_or(Path::new(""));
    (0, walk(dir, Shown::Dir), Reverse(rel.as_os_str().as_bytes().to_vec()))
}

/// What DEST's entry at `p` needs to become the FIFO, socket or device
/// node `e`: [`decide::decide`], owners compared where kept.
fn special_action(p: &deep::Beneath, e: &ddtree::list::Entry, owners: bool, window: current::Window) -> decide::Action {
    let m = deep::symlink_metadata(p).ok();
    let owner = e.meta.owner.filter(|_| owners);
    let held = decide::Held {
        differs: m.as_ref().map(|m| current::compare(&Held::from(m), e, window)),
        attrs: matches!((&m, owner), (Some(m), Some(o)) if (m.uid(), m.gid()) != o),
        ..decide::Held::default()
    };
    decide::decide(e.kind, held)
}

/// Carries out `action` ([`special_action`]) for the FIFO, socket or
/// device node `e` at `p`: what else stands there goes.
fn make_special(
    p: &deep::Beneath,
    e: &ddtree::list::Entry,
    owners: bool,
    delete: bool,
    action: decide::Action,
) -> std::io::Result<()> {
    match (action, e.meta.owner.filter(|_| owners)) {
        (decide::Action::Current, _) => return Ok(()),
        (decide::Action::Meta { time, perm }, owner) => {
            if let Some((uid, gid)) = owner {
                deep::chown(p, uid, gid)?;
            }
            // A chown clears setuid: the mode again.
            if perm || owner.is_some() {
                deep::set_mode(p, e.perm)?;
            }
            return if time { deep::set_mtime(p, e.mtime) } else { Ok(()) };
        }
        _ => {}
    }
    deep::clear_dir(p, delete)?;
    match deep::remove_file(p) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    if let Some(parent) = p.parent() {
        deep::make_dir_all(&parent)?;
    }
    deep::make_node(p, e.kind.mode_bits(), e.perm, e.meta.rdev().unwrap_or(0))?;
    if let Some((uid, gid)) = super::tree::chown_to(e.meta.owner, owners, true) {
        deep::chown(p, uid, gid)?;
    }
    // The umask may have taken bits off.
    deep::set_mode(p, e.perm)?;
    deep::set_mtime(p, e.mtime)
}

/// What the sync options do in a run.
impl Archiving<'_> {
    /// `--dry-run`: what a run would do, changing nothing.
    pub(super) fn dry_run(&self, items: &[Item], differ: &HashSet<PathBuf>) -> std::io::Result<ArchiveReport> {
        let plan = self.plan(items, differ, true)?;
        let count = |k: Kind| items.iter().filter(|it| it.entry.kind == k).count() as u64;
        let seconds = self.started.elapsed().as_secs_f64();
        let (setid_cleared, excluded) = self.cleared_and_excluded();
        Ok(ArchiveReport {
            src: self.src.to_string(),
            dest: self.spec.dest.display().to_string(),
            files: count(Kind::File),
            dirs: count(Kind::Dir),
            dirs_finished_early: 0,
            links: count(Kind::Link),
            bytes: 0,
            resumed_bytes: 0,
            matched_bytes: 0,
            skipped_files: 0,
            skipped_bytes: 0,
            seconds,
            files_per_second: 0.0,
            mb_per_s: 0.0,
            phases: Phases::default(),
            setid_cleared,
            failed: self.take_failures(),
            parts: 0,
            excluded,
            deleted: 0,
            deletions_skipped: plan.deletions_skipped,
            modes_fixed: 0,
            specials: 0,
            hard_links: 0,
            attrs_set: 0,
            dry_run: Some(plan),
            changes: vec![],
            transfer: None,
            ranks: vec![],
        })
    }

    /// What is compared of an entry (`differ`: `--checksum`'s files).
    pub(super) fn keep<'d>(&'d self, differ: &'d HashSet<PathBuf>) -> Keep<'d> {
        Keep {
            owners: self.spec.owners,
            xattrs: self.spec.xattrs,
            times: self.spec.kept.times,
            size_only: self.spec.size_only,
            window: self.spec.modify_window,
            differ,
            names: &self.spec.filter,
        }
    }

    /// The changes a run would make now (`--dry-run`, `--itemize-changes`).
    /// `name_blocked`: what the run would refuse to replace is named now,
    /// as the run names it (a real run names it as it comes to it).
    pub(super) fn plan(&self, items: &[Item], differ: &HashSet<PathBuf>, name_blocked: bool) -> std::io::Result<Plan> {
        let (extra, skipped) = match self.deletes() {
            true => {
                let kept = self.listing.lock().expect("listing lock").kept.clone();
                at_most(
                    extraneous(items, &self.dest, self.delete_filter(), &kept, self.protected())?,
                    self.spec.max_delete,
                )
            }
            false => (Extraneous::default(), 0),
        };
        let (specials, linked) = {
            let l = self.listing.lock().expect("listing lock");
            (l.specials.clone(), l.linked.clone())
        };
        let mut blocked = HashSet::new();
        let others = items.iter().chain(specials.iter()).chain(linked.iter().map(|l| &l.item));
        for it in others.filter(|it| it.entry.kind != Kind::Dir) {
            if let Err(e) = deep::dir_may_go(&self.dest.join(&it.rel), self.spec.delete) {
                if name_blocked {
                    self.failed(&it.rel, e.to_string());
                }
                blocked.insert(it.rel.clone());
            }
        }
        let keep = self.keep(differ);
        let none = Based::default();
        let based = self.based.get().unwrap_or(&none);
        let onto = Onto { dest: &self.dest, based };
        let mut plan = plan(items, &specials, &linked, onto, &extra, &blocked, keep);
        plan.deletions_skipped = skipped;
        if self.spec.delete && !self.deletes() {
            // Where rsync says it: before the changes.
            plan.lines.insert(0, "IO error encountered -- skipping file deletion".into());
            plan.rels.insert(0, PathBuf::new());
        }
        let dry_made = self.spec.dry_run && self.spec.dest.symlink_metadata().is_err();
        if self.tally.lock().expect("tally lock").dest_made || dry_made {
            plan.dest_made(&self.spec.dest);
        }
        plan.skipping(std::mem::take(&mut self.listing.lock().expect("listing lock").skipping));
        Ok(plan)
    }

    /// With `--backup-dir`, moves what DEST has at `p` (its `rel`) there
    /// if `replaced` says the run will replace it (a directory only with
    /// `--delete`, else it stays and the run names it); nothing otherwise.
    pub(super) fn back_up_one(
        &self,
        p: &deep::Beneath,
        rel: &Path,
        replaced: impl FnOnce(&std::fs::Metadata) -> bool,
    ) -> Result<(), String> {
        let Ok(m) = deep::symlink_metadata(p) else { return Ok(()) };
        if (m.is_dir() && !self.spec.delete) || !replaced(&m) {
            return Ok(());
        }
        match self.backup() {
            Ok(Some(b)) => b.keep(p, rel).map_err(|e| e.to_string()),
            Ok(None) => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The suffix of backups made in place (`-b` without `--backup-dir`):
    /// `--delete` leaves them, as rsync's protect rule `P *~` does.
    pub(super) fn protected(&self) -> &str {
        match (&self.spec.backup_dir, &self.spec.backup_suffix) {
            (None, Some(s)) => s,
            _ => "",
        }
    }

    /// `--backup-dir`'s place, if one is asked for.
    pub(super) fn backup(&self) -> Result<Option<Backup>, ArchiveError> {
        if !self.spec.backs_up() {
            return Ok(None);
        }
        if let Some(b) = self.backup_at.get() {
            return Ok(Some(b.clone()));
        }
        let suffix = self.spec.backup_suffix.clone().unwrap_or_default();
        let b = match &self.spec.backup_dir {
            Some(dir) => Backup::new(dir, &self.dest, suffix).map_err(local(dir))?,
            None => Backup::in_place(&self.dest, suffix),
        };
        Ok(Some(self.backup_at.get_or_init(|| b).clone()))
    }

    /// A `--backup-dir` below DEST is never deleted as an entry SRC lacks.
    pub(super) fn protect_backup(&self) -> Result<(), ArchiveError> {
        if let Some(b) = self.backup()? {
            if let Some(rel) = b.inside_dest(&self.dest) {
                self.listing.lock().expect("listing lock").kept.insert(rel.to_path_buf());
            }
        }
        Ok(())
    }

    /// `--backup-dir`: what DEST holds where `chosen` puts a file or
    /// symlink goes to the backup first; one that cannot is named, and
    /// its entry is not moved (nothing is lost).
    pub(super) fn back_up(&self, chosen: &mut super::listing::Chosen<'_>, progress: &mut dyn Progress) {
        let mut kept = HashSet::new();
        let backup = self.backup().ok().flatten();
        for it in &chosen.todo {
            let p = self.dest.join(&it.rel);
            let in_the_way = backup.as_ref().is_some_and(|b| b.is_in_the_way(&self.dest, &it.rel));
            let r = match in_the_way {
                true => Err("it is where --backup-dir puts what a run replaces (give another --backup-dir)".into()),
                false => self.back_up_one(&p, &it.rel, |m| !m.is_dir()),
            };
            if let Err(e) = r {
                let why = format!("cannot move the copy DEST has to --backup-dir, so it is kept: {e}");
                progress.warn(&format!("not copying {}: {why}", Path::new(self.src).join(&it.rel).display()));
                self.failed(&it.rel, why);
                self.listing.lock().expect("listing lock").kept.insert(it.rel.clone());
                kept.insert(it.rel.clone());
            }
        }
        chosen.leave_out(&kept);
    }

    /// `--files-from`: a named entry the list of SRC does not hold is
    /// named, as rsync names it (exit 5); the others are copied.
    pub(super) fn name_missing(&self, named: &FilesFrom, items: &[Item], progress: &mut dyn Progress) {
        let (specials, linked, kept) = {
            let l = self.listing.lock().expect("listing lock");
            (l.specials.clone(), l.linked.clone(), l.kept.clone())
        };
        let seen: HashSet<&Path> = (items.iter().chain(specials.iter()).chain(linked.iter().map(|l| &l.item)))
            .map(|it| it.rel.as_path())
            .chain(kept.iter().map(PathBuf::as_path))
            .collect();
        let mut missing: Vec<&Path> = named.named().filter(|p| !seen.contains(p)).collect();
        missing.sort();
        for rel in missing {
            let why = "--files-from names it, but SRC on the mirrors does not hold it (or a rule excludes it)";
            progress.warn(&format!("not copying {}: {why}", Path::new(self.src).join(rel).display()));
            self.failed(rel, why.into());
        }
    }

    /// Makes the FIFOs and sockets (with their modes and mtimes) where DEST
    /// does not have them already; one that cannot be made is named, the
    /// rest go on. Before directories get their times: making an entry
    /// changes its directory's.
    pub(super) fn make_specials(&self) -> u64 {
        let specials = self.listing.lock().expect("listing lock").specials.clone();
        let mut made = 0;
        let based = self.based.get();
        for it in specials.iter().filter(|it| !based.is_some_and(|b| b.leaves_out(&it.rel, it.entry.kind))) {
            let p = self.dest.join(&it.rel);
            let action = special_action(&p, &it.entry, self.spec.owners, self.spec.modify_window);
            if let Err(e) = self.back_up_one(&p, &it.rel, |_| action == decide::Action::Make) {
                self.failed(&it.rel, format!("cannot move the copy DEST has to --backup-dir, so it is kept: {e}"));
                continue;
            }
            match make_special(&p, &it.entry, self.spec.owners, self.spec.delete, action) {
                Ok(()) => made += 1,
                Err(e) => self.failed(&it.rel, format!("cannot make it: {e}")),
            }
        }
        made
    }

    /// Clears the directories that stand where `chosen` makes a file or a
    /// symlink ([`deep::clear_dir`]); an entry whose directory may not go
    /// is taken out of the move, named and kept (exit 5).
    pub(super) fn make_way(&self, chosen: &mut super::listing::Chosen<'_>, progress: &mut dyn Progress) {
        let mut blocked = HashSet::new();
        for it in std::mem::take(&mut chosen.dirs_in_way) {
            let p = self.dest.join(&it.rel);
            // With --backup-dir, a directory that must go (--delete) goes
            // there whole: what it holds keeps its path below DEST.
            let gone = self
                .back_up_one(&p, &it.rel, std::fs::Metadata::is_dir)
                .map_err(std::io::Error::other)
                .and_then(|()| deep::clear_dir(&p, self.spec.delete));
            if let Err(e) = gone {
                progress.warn(&format!("not copying {}: {e}", Path::new(self.src).join(&it.rel).display()));
                self.failed(&it.rel, e.to_string());
                self.listing.lock().expect("listing lock").kept.insert(it.rel.clone());
                blocked.insert(it.rel.clone());
            }
        }
        chosen.leave_out(&blocked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn skipped_entries_are_said_where_rsync_lists_their_directory() {
        let mut p = Plan::default();
        for (rel, line) in [("", "created directory D"), ("", "cd+++++++++ ./"), ("top", ">f top"), ("d", "cd d/")] {
            p.lines.push(line.into());
            p.rels.push(rel.into());
        }
        p.lines.push(">f d/f".into());
        p.rels.push("d/f".into());
        let skip = |r: &str| (PathBuf::from(r), format!("skipping {r}"));
        p.skipping(vec![skip("l"), skip("d/l"), skip("d/p"), skip("e/q")]);
        let want = [
            "created directory D",
            "skipping l",
            "cd+++++++++ ./",
            ">f top",
            "skipping d/l",
            "skipping d/p",
            "cd d/",
            ">f d/f",
            "skipping e/q",
        ];
        assert_eq!(p.lines, want);
        assert_eq!(p.rels.len(), p.lines.len());
    }

    #[test]
    fn names_are_escaped_as_rsync_escapes_them() {
        assert_eq!(escaped(b"a\nb"), "a\\#012b");
        assert_eq!(escaped(b"t\x1b[31m"), "t\\#033[31m");
        assert_eq!(escaped(b"\xff\xfe"), "\\#377\\#376");
        assert_eq!(escaped("plain é".as_bytes()), "plain é");
    }

    proptest! {
        /// Whatever bytes a mirror names: one line, no control character.
        #[test]
        fn an_escaped_name_holds_no_control_character(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert!(!escaped(&b).chars().any(char::is_control));
        }
    }
}
