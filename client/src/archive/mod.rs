//! `ddftp archive`: a whole tree through the DDOps engine.
//!
//! The file list (a mirror's walk of SRC, or a given list) is sorted by
//! path, and the regular files and symlinks still to move become one
//! *bundle*: their bytes back to back, one linear range. Every mirror
//! registers the bundle under one name and checks each entry against its
//! own copy (kind, size, mtime) as it reads it (ddftpd's `bundle` module); then
//! the range is moved exactly like `get` moves a file (pairs from both
//! ends, helpers, the resume journal), only written through `tree::TreeStore`
//! straight into the destination files, and with each block checked
//! against the seal (BLAKE3) its mirror computed as it read it, not
//! against a voted manifest: a manifest would have every mirror read the
//! whole tree before the first byte moves. Small files cost no round trip
//! each: a block holds as many as fit.
//!
//! Into an empty DEST the move does not wait for a mirror's walk: the
//! list is read as it comes, and the files are moved in parts (a bundle
//! each) while the walk goes on (`Archiving::streamed`).
//!
//! Files get their mode and mtime only once their bytes are verified,
//! so a rerun skips exactly the files that are complete and correct (same
//! type, size, mode and mtime to the second, as rsync's quick check) and
//! an interrupted run resumes its range block by block from the journal.

mod decide;
mod deep;
mod deleting;
mod dirs;
mod followed;
pub use ddtree::filter;
mod archiving;
mod backup;
pub mod basis;
mod checksum;
pub mod chmod;
mod current;
pub use current::Window;
mod judge;
mod keep;
pub mod kept;
pub mod leaving;
mod listing;
mod merged;
mod mirrors;
mod new_name;
mod parts;
#[cfg(feature = "mpi")]
pub mod ranks;
mod report;
mod streamed;
pub mod sync;
mod tree;
mod update;
pub mod wild;

pub use mirrors::walk_stream;
use report::merge_reports;
pub use report::{ArchiveReport, Failure, Phases, RankReport};

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ddtree::list::{self, Entry, Kind};

use crate::journal::journal_path;
use crate::session::SessionError;
use crate::store::Store;
use crate::transfer::{self, EntryCounts, GetSpec, Peer, Progress, TransferError, TransferReport};

use archiving::{blocking, Archiving, Ready};
use deep::Dest;
use dirs::{still_changing, Dirs};
use listing::{choose, definition, make_dirs, resumed, saved_list, Chosen};
use mirrors::{define_everywhere, fetch_list, Defining};
use parts::{Counting, Parts};
use tree::TreeStore;

/// What a part of a streamed archive waits for while the walk goes on
/// (after it, the rest is the last part): bytes worth keeping the links
/// busy with, or many files. Small files are moved by the CPU more than
/// by the links, and the walk needs the CPU too: moving them early gains
/// little where both share a machine, and each part costs a definition
/// and a few round trips.
pub const PART_BYTES: u64 = 64 << 20;
const PART_FILES: usize = 65_536;

/// What an archive run needs.
#[derive(Debug, Clone)]
pub struct ArchiveSpec {
    /// The subtree on the mirrors (relative to their root; `.` for all).
    pub src: String,
    /// Further subtrees, merged into DEST after SRC as `rsync -a A/ B/ DEST/`
    /// merges them: a name an earlier one has, it gives. None below another.
    pub more_src: Vec<String>,
    pub dest: PathBuf,
    /// A list to move instead of asking a mirror to walk SRC.
    pub list: Option<PathBuf>,
    /// Removed from the front of every listed path (dwalk writes absolute ones).
    pub strip: Option<String>,
    /// Bytes a part of a streamed archive waits for while the walk goes
    /// on ([`PART_BYTES`] unless a test wants many parts).
    pub part_bytes: u64,
    /// Which entries below SRC are moved (and may be deleted).
    pub filter: filter::Filter,
    /// Change nothing: say what would be done ([`sync::Plan`]).
    pub dry_run: bool,
    /// `--itemize-changes`: the report lists the changes made, one line
    /// each in rsync's letters (the list is then taken whole first).
    pub itemize: bool,
    /// Remove what DEST has below SRC's directories that SRC does not
    /// (excluded entries are kept).
    pub delete: bool,
    /// `--delete-excluded`: what the rules exclude goes from DEST too
    /// (rules for both sides are then the sender's; `P` still protects).
    pub delete_excluded: bool,
    /// Set owners and groups (numeric ids) and make device nodes: by
    /// default when run as root.
    pub owners: bool,
    /// Owners and groups by name (a name this machine knows takes its id
    /// here; others keep their number), as rsync without `--numeric-ids`.
    pub by_name: bool,
    /// Extended attributes, ACLs among them (`--xattrs`).
    pub xattrs: bool,
    /// `-H`: the names of a hard-linked file are linked here as on the
    /// mirror; without it each is a file of its own (moved as one), as
    /// rsync without `-H`.
    pub hard_links: bool,
    /// Compare contents (`--checksum`): a file whose size and mtime match
    /// is moved again if its SHA-256 differs from the mirrors'.
    pub checksum: bool,
    /// `--files-from`: only the entries it names (and the directories on
    /// their way) are copied.
    pub files_from: Option<ddtree::files_from::FilesFrom>,
    /// Which of rsync's `-a` parts are kept (all, unless some were asked
    /// for alone: [`kept`]).
    pub kept: kept::Kept,
    /// `--chmod`: changes to each listed mode, as though SRC had it
    /// (before `kept`: without `-p` only what the run makes shows them).
    pub chmod: chmod::Chmod,
    /// `--chown`: the owner and group every entry gets (after `kept`).
    pub chown: kept::Chown,
    /// `--ignore-existing`: an entry (not a directory) DEST holds under
    /// its name is left as it is.
    pub ignore_existing: bool,
    /// `--safe-links`: a symlink pointing outside the tree (absolute, or
    /// climbing above DEST) is not made, and what DEST has under its name
    /// is left as it is, as rsync's.
    pub safe_links: bool,
    /// `-L`/`--copy-links`, `--copy-unsafe-links`: which symlinks are
    /// copied as what they point to ([`followed`]).
    pub follow: ddtree::follow::Follow,
    /// rsync's `HOST:DIR/NAME DEST` made DEST `DEST/NAME`, for a directory
    /// NAME: a file NAME goes into the DEST given (its parent here).
    pub file_to_parent: bool,
    /// A file SRC into a DEST (the one given: see `file_to_parent`) that
    /// does not exist becomes DEST itself, as `rsync -a FILE NEWNAME`
    /// makes it (DEST given last, not as `DIR/` nor `--dest`).
    pub file_to_name: bool,
    /// `--existing`: only what DEST already has under its name is
    /// updated; nothing new is made (DEST itself aside), as rsync's.
    pub existing: bool,
    /// `-u`/`--update`: a file DEST holds with a later mtime than the
    /// listed one is left as it is, as rsync's.
    pub update: bool,
    /// `--size-only`: a file DEST holds at the listed size is complete,
    /// whatever its mtime (set to the listed one), as rsync's.
    pub size_only: bool,
    /// `--max-size`, `--min-size`: a file of another size is not moved,
    /// and what DEST has under its name is left as it is, as rsync's.
    pub sizes: leaving::Sizes,
    /// `--modify-window`: how far apart an mtime in DEST and the listed
    /// one may be and still be the same.
    pub modify_window: current::Window,
    /// `-x`: the mirrors list a directory on another file system than
    /// SRC's (a mount point) and do not enter it, as rsync's.
    pub one_fs: u8,
    /// `--max-delete N`: at most N entries deleted; the others are named
    /// as not deleted.
    pub max_delete: Option<u64>,
    /// `--link-dest`, `--compare-dest`, `--copy-dest`: directories holding
    /// an earlier copy, as rsync's ([`basis`]).
    pub bases: Option<basis::Bases>,
    /// `--backup-dir DIR`: what a run replaces or deletes is moved there
    /// (under its path below DEST) instead; relative to DEST.
    pub backup_dir: Option<PathBuf>,
    /// `-b`/`--backup` (and `--suffix`): backups are made, named with this
    /// suffix (rsync's `~` in place; none by default in `--backup-dir`).
    pub backup_suffix: Option<String>,
    /// SRC's directory is walked for one file ([`archive_by`] sets it when
    /// SRC is a file): DEST's own mode and mtime are not SRC's to set.
    pub file_src: bool,
    /// The engine's settings (`path` and `output` are set here).
    pub get: GetSpec,
}

impl ArchiveSpec {
    /// The DEST the user gave: rsync's `HOST:DIR/NAME DEST` made `dest`
    /// DEST/NAME (`file_to_parent`), where a file SRC goes into DEST.
    fn given_dest(&self) -> &Path {
        match self.dest.parent() {
            Some(p) if self.file_to_parent && !p.as_os_str().is_empty() => p,
            _ => &self.dest,
        }
    }

    /// How the quick check is asked (`--size-only`, `--modify-window`).
    pub(super) fn quick(&self) -> current::Quick {
        current::Quick { size_only: self.size_only, window: self.modify_window }
    }

    /// Whether what a run replaces or deletes is kept (`-b`, `--backup-dir`).
    pub(super) fn backs_up(&self) -> bool {
        self.backup_dir.is_some() || self.backup_suffix.is_some()
    }
}

impl ArchiveSpec {
    /// Every SRC, in order, as the mirrors name it (`.` for the root).
    pub(crate) fn srcs(&self) -> impl Iterator<Item = &str> {
        std::iter::once(&self.src).chain(&self.more_src).map(|s| match s.trim_end_matches('/') {
            "" => ".",
            s => s,
        })
    }

    /// Whether SRC itself is copied onto DEST (its mode and times): not
    /// for a file SRC, nor for a `--files-from` list (or `-R`) that does
    /// not name it, as rsync; DEST is then made as `mkdir -p` makes it.
    pub(crate) fn copies_src_itself(&self) -> bool {
        !self.file_src && self.files_from.as_ref().is_none_or(|f| f.names_a_base())
    }

    /// A listed entry's name below the SRC it is of (empty for that SRC).
    pub(crate) fn rel_of<'e>(&self, e: &'e Entry) -> Option<&'e [u8]> {
        self.srcs().find_map(|src| listing::below_src(e, src.as_bytes()))
    }

    /// Several SRCs must be apart: one below (or equal to) another would
    /// give its entries two names.
    fn check_srcs(&self) -> Result<(), ArchiveError> {
        let srcs: Vec<&str> = self.srcs().collect();
        for (i, a) in srcs.iter().enumerate() {
            for b in &srcs[i + 1..] {
                let below =
                    |x: &str, y: &str| x == y || y == "." || x.strip_prefix(y).is_some_and(|r| r.starts_with('/'));
                if below(a, b) || below(b, a) {
                    let why = format!("SRCs {a} and {b} overlap: give SRCs none of which is below another");
                    return Err(ArchiveError::BadEntry { path: a.to_string(), why });
                }
            }
        }
        Ok(())
    }

    /// What the mirror's walk of SRC number `src` (in [`Self::srcs`]) is
    /// asked for.
    fn walk_ask(&self, src: usize) -> crate::session::WalkAsk {
        // The user's rules first (what they exclude stays out), then
        // --files-from's, so the mirror reads only what the list names.
        // A list with `/./` bases gave one SRC per base, in its order.
        let mut rules = self.filter.rules();
        let base = |f: &ddtree::files_from::FilesFrom| if f.bases().count() > 1 { src } else { 0 };
        rules.extend(self.files_from.as_ref().and_then(|f| f.walk_rules(base(f))).unwrap_or_default());
        let merge = self.filter.merge_names().join("/");
        let names = self.owners && (self.by_name || self.chown.needs_names());
        let (xattrs, one_fs) = (self.xattrs, self.one_fs);
        crate::session::WalkAsk { rules, xattrs, names, merge, one_fs }
    }
}

/// Why an archive failed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    List(#[from] list::ListError),
    #[error("listing {src} on the mirrors failed:\n{}", failures.join("\n"))]
    Walk {
        src: String,
        failures: Vec<String>,
        /// Some mirror failed its TLS handshake.
        untrusted: bool,
        /// Every mirror that answered says SRC is a file.
        a_file: bool,
    },
    #[error("{path}: {why}")]
    BadEntry { path: String, why: String },
    #[error("no mirror can serve the files to move:\n{}", failures.join("\n"))]
    NoBundle { failures: Vec<String> },
    #[error("{}: {source}", path.display())]
    Local { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Transfer(#[from] TransferError),
    #[error("{who} failed: {why}\nDEST keeps what was moved: run the same command again (with any number of ranks) to finish; complete files are not moved again")]
    Rank { who: String, why: String },
}

/// Who moves the files: this process, or the ranks of an MPI job (this
/// process their lead, rank 0).
#[derive(Clone, Copy)]
pub enum Movers<'j> {
    One,
    #[cfg(feature = "mpi")]
    Ranks(&'j ranks::Job),
    #[doc(hidden)]
    #[cfg(not(feature = "mpi"))]
    _Never(std::marker::PhantomData<&'j ()>),
}

/// One listed entry, placed under the destination.
#[derive(Clone)]
struct Item {
    entry: Entry,
    /// Path below SRC (empty for SRC itself).
    rel: PathBuf,
}

/// Runs an archive in this process.
pub async fn archive(spec: &ArchiveSpec, progress: &mut dyn Progress) -> Result<ArchiveReport, ArchiveError> {
    archive_by(spec, Movers::One, progress).await
}

/// Runs an archive, the files moved by `movers`.
pub async fn archive_by(
    spec: &ArchiveSpec,
    movers: Movers<'_>,
    progress: &mut dyn Progress,
) -> Result<ArchiveReport, ArchiveError> {
    let existed = spec.dest.symlink_metadata().is_ok();
    // rsync's `FILE NEWNAME`: the DEST given, if a file SRC may become it.
    let given = spec.given_dest();
    let onto_file = given.symlink_metadata().is_ok_and(|m| !m.is_dir());
    let to_name = (spec.file_to_name && !spec.dry_run && (onto_file || given.symlink_metadata().is_err()))
        .then(|| given.to_path_buf());
    // A DEST that is a file takes a file SRC only (a tree there is refused).
    let mut r = match (onto_file && to_name.is_some(), spec.more_src.is_empty() && spec.list.is_none()) {
        // SRC not a file there (its directory holds no such file): what
        // a tree into a file is.
        (true, true) => match archive_file(spec, movers, progress, existed, to_name.as_deref()).await {
            Err(ArchiveError::BadEntry { .. }) => archive_into(spec, movers, progress).await,
            r => r,
        },
        _ => archive_into(spec, movers, progress).await,
    };
    if let (Err(ArchiveError::Walk { a_file: true, .. }), None, true) = (&r, &spec.list, spec.more_src.is_empty()) {
        r = archive_file(spec, movers, progress, existed, to_name.as_deref()).await;
    }
    if r.is_err() && !existed && holds_no_data(&spec.dest) {
        // DEST is this run's, and nothing in it is worth a rerun: a failed
        // archive leaves no empty tree behind.
        let _ = std::fs::remove_dir_all(&spec.dest);
    }
    r
}

/// SRC is a file on the mirrors: it is copied into DEST under its name (as
/// `rsync -a SRC DEST/`), its directory walked for it alone (directories
/// there pruned), and DEST's own mode and mtime left as they are (made
/// with the umask's mode if new, as `mkdir -p` makes it). With `to_name`
/// (rsync's `FILE NEWNAME`, NEWNAME not there), it is copied into a
/// scratch directory beside NEWNAME and renamed to it.
async fn archive_file(
    spec: &ArchiveSpec,
    movers: Movers<'_>,
    progress: &mut dyn Progress,
    existed: bool,
    to_name: Option<&Path>,
) -> Result<ArchiveReport, ArchiveError> {
    let src = spec.src.trim_end_matches('/');
    let (dir, name) = match src.rsplit_once('/') {
        Some((d, n)) => (if d.is_empty() { "." } else { d }, n),
        None => (".", src),
    };
    let named = ddtree::files_from::FilesFrom::parse(name.as_bytes(), true)
        .map_err(|e| ArchiveError::BadEntry { path: src.into(), why: e.why.into() })?;
    let mut rules = spec.filter.rules();
    rules.push((false, "*/".into()));
    let filter = filter::Filter::from_rules(&rules)
        .map_err(|e| ArchiveError::BadEntry { path: src.into(), why: e.to_string() })?;
    let scratch = to_name.map(|n| new_name::Scratch::beside(n).map_err(local(n))).transpose()?;
    let dest = match &scratch {
        Some(s) => s.path().to_path_buf(),
        None => spec.given_dest().to_path_buf(),
    };
    let one = ArchiveSpec {
        src: dir.into(),
        files_from: Some(named),
        filter,
        file_src: true,
        dest: dest.clone(),
        ..spec.clone()
    };
    if !existed && !spec.dry_run {
        // The walk that found SRC a file made DEST private, for a tree.
        for made in [Some(spec.dest.as_path()), to_name.filter(|n| n.is_dir())].into_iter().flatten() {
            if holds_no_data(made) {
                let _ = std::fs::remove_dir_all(made);
            }
        }
        if scratch.is_none() {
            std::fs::create_dir_all(&dest).map_err(local(&dest))?;
        }
    }
    if let (Some(s), Some(n)) = (&scratch, to_name) {
        // NEWNAME a file already: linked in as the older version (a rerun
        // skips it if complete, updates it by delta if not); renamed over
        // only once the new one is whole.
        if n.symlink_metadata().is_ok_and(|m| m.is_file()) {
            let _ = s.link_in(n, name);
        }
    }
    let got = archive_into(&one, movers, progress).await;
    let mut report = match (&scratch, to_name) {
        (Some(s), Some(n)) => renamed(got, s, name, n)?,
        _ => got?,
    };
    report.src = spec.src.clone();
    Ok(report)
}

/// The file archived as `name` in `scratch` renamed to `to`; what the
/// report says of it named as `to`.
fn renamed(
    got: Result<ArchiveReport, ArchiveError>,
    scratch: &new_name::Scratch,
    name: &str,
    to: &Path,
) -> Result<ArchiveReport, ArchiveError> {
    let mut r = got?;
    if scratch.holds_dir(name) && to.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
        let why = "DEST is not a directory (it must be one, or not exist yet)";
        return Err(local(to)(io::Error::new(io::ErrorKind::NotADirectory, why)));
    }
    scratch.rename_out(name, to).map_err(local(to))?;
    let (old, new) = (format!(" {name}"), format!(" {}", to.file_name().unwrap_or_default().to_string_lossy()));
    for l in &mut r.changes {
        if let Some(head) = l.strip_suffix(&old) {
            *l = format!("{head}{new}");
        }
    }
    r.dest = to.display().to_string();
    Ok(r)
}

/// Whether `dir` holds directories only (and an archive's journal).
fn holds_no_data(dir: &Path) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else { return false };
    rd.flatten().all(|e| {
        let name = e.file_name();
        match e.file_type() {
            Ok(t) if t.is_dir() => holds_no_data(&e.path()),
            Ok(_) => name.as_encoded_bytes().starts_with(b".ddftp-archive"),
            Err(_) => false,
        }
    })
}

async fn archive_into(
    spec: &ArchiveSpec,
    movers: Movers<'_>,
    progress: &mut dyn Progress,
) -> Result<ArchiveReport, ArchiveError> {
    let started = Instant::now();
    let ranked = !matches!(movers, Movers::One);
    spec.check_srcs()?;
    if ranked && !spec.kept.times {
        let why = "parts of -a without -t are not taken under mpirun yet: give -t (or -a), or run in one process";
        return Err(ArchiveError::BadEntry { path: spec.src.clone(), why: why.into() });
    }
    let src = spec.src.trim_end_matches('/');
    let src = if src.is_empty() { "." } else { src };
    let (dest, mut fresh, dest_made) = open_dest(spec, ranked)?;
    // With bases, what DEST lacks is looked up in them first.
    fresh &= spec.bases.is_none();
    // Receivers sharing a tree move one range, the whole list, the same
    // on each: not parts cut as a walk goes.
    let streams = !spec.dry_run
        && !spec.itemize
        && spec.files_from.is_none()
        && spec.more_src.is_empty()
        && spec.follow == ddtree::follow::Follow::No
        && spec.kept.times
        && spec.filter.merge_names().is_empty()
        && spec.get.share.is_none();
    if fresh && spec.list.is_none() && streams && !ranked {
        match (Archiving::new(spec, src, started, fresh, dest.clone())).streamed(progress).await? {
            Some(report) => return Ok(report),
            // The walk broke part way: the whole list from the mirrors,
            // into what is now not a fresh destination. A part cut short
            // then is this run's: its journal is no resume point.
            None => {
                fresh = false;
                let run = Archiving::new(spec, src, started, fresh, dest.clone());
                let _ = crate::journal::Journal::remove(&journal_path(&run.output()));
                let _ = std::fs::remove_file(run.saved());
            }
        }
    }
    let run = Archiving::new(spec, src, started, fresh, dest.clone());
    run.tally.lock().expect("tally lock").dest_made = dest_made;
    let items = run.items(progress).await?;
    progress.status(&format!("comparing {} entries with {}", items.len(), spec.dest.display()));
    if let Some(bases) = &spec.bases {
        let mut based = basis::Based::open(bases, &spec.dest, |w| progress.warn(&w));
        let none = HashSet::new();
        let keep = run.keep(&none);
        let specials = run.listing.lock().expect("listing lock").specials.clone();
        for listed in [&items[..], &specials[..]] {
            based.look(listed, &run.dest, dest_made, |p, m, it| judge::judge(&keep, p, m, it));
        }
        let _ = run.based.set(based);
    }
    let differ = match spec.checksum && !fresh {
        true => checksum::differing(spec, &run.dest, &items, progress).await?,
        false => HashSet::new(),
    };
    if spec.dry_run {
        return run.dry_run(&items, &differ).map_err(local(&spec.dest));
    }
    let planned = match spec.itemize {
        true => Some(run.plan(&items, &differ, false).map_err(local(&spec.dest))?),
        false => None,
    };
    let listed = started.elapsed();
    let mut chosen = run.chosen(&items, ranked, progress)?;
    let updates = run.updates(&mut chosen);
    run.tally.lock().expect("tally lock").counts = EntryCounts {
        listed: items.len() as u64,
        listed_bytes: items.iter().filter(|it| it.entry.kind == Kind::File).map(|it| it.entry.size).sum(),
        walking: false,
        moved: 0,
        to_move: chosen.todo.len() as u64,
    };
    let defs = define_everywhere(spec, (!chosen.todo.is_empty()).then(|| definition(&chosen.todo)));
    let mut phases = Phases { list: listed.as_secs_f64(), ..Phases::default() };
    phases.prepare = (started.elapsed() - listed).as_secs_f64();
    let (transfer, ranks): (_, Vec<RankReport>) = match (chosen.todo.is_empty(), movers) {
        (true, _) => (None, vec![]),
        (false, Movers::One) => {
            let ready = run.ready(&chosen.todo, &mut phases)?;
            (run.move_part(&chosen.todo, ready, defs, progress, &mut phases).await?, vec![])
        }
        #[cfg(feature = "mpi")]
        (false, Movers::Ranks(job)) => (None, ranks::lead(&run, job, &chosen.todo, defs, progress, &mut phases).await?),
        #[cfg(not(feature = "mpi"))]
        (false, Movers::_Never(_)) => unreachable!("no ranks without MPI"),
    };
    let updated = run.update(&updates, progress).await;
    let specials = run.make_specials();
    let hard_links = run.make_links();
    let deleted = run.delete_extraneous(&items, progress)?;
    run.dirs().finish(items.iter())?;
    let attrs_set = run.keep_meta(items.iter()) + chosen.owners_fixed;
    if !spec.kept.times {
        let moved = chosen.todo.iter().chain(&updates).filter(|it| it.entry.kind == Kind::File);
        for (rel, why) in kept::stamp_now(&run.dest, moved.map(|it| it.rel.as_path())) {
            run.failed(&rel, format!("cannot set its time: {why}"));
        }
    }
    let moved = chosen.todo.iter().filter(|it| it.entry.kind == Kind::File).count() as u64 + updated.files;
    let failed = run.take_failures();
    let changes = planned.map(|p| p.made(src, &failed)).unwrap_or_default();
    let Chosen { files, links, skipped_files, skipped_bytes, bytes, modes_fixed, .. } = chosen;
    // What an interrupted run had moved of the range is not this run's.
    let resumed_bytes = transfer.as_ref().map_or(0, |t| t.reused_bytes).min(bytes);
    let bytes = bytes - resumed_bytes + updated.moved;
    let dirs = items.iter().filter(|it| it.entry.kind == Kind::Dir).count() as u64;
    let seconds = started.elapsed().as_secs_f64();
    phases.finish = seconds - phases.list - phases.prepare - phases.check - phases.moving;
    let (setid_cleared, excluded, deletions_skipped) = {
        let t = run.tally.lock().expect("tally lock");
        (t.setid_cleared, t.excluded, t.deletions_skipped)
    };
    Ok(ArchiveReport {
        src: spec.srcs().collect::<Vec<_>>().join(" "),
        dest: spec.dest.display().to_string(),
        files,
        dirs,
        dirs_finished_early: 0,
        links,
        bytes,
        resumed_bytes,
        matched_bytes: updated.matched,
        skipped_files,
        skipped_bytes,
        seconds,
        files_per_second: moved as f64 / seconds.max(1e-9),
        mb_per_s: bytes as f64 / 1e6 / seconds.max(1e-9),
        phases,
        setid_cleared,
        failed,
        parts: ranks.iter().map(|r| r.parts).sum::<u64>().max(u64::from(transfer.is_some())),
        excluded,
        deleted,
        deletions_skipped,
        modes_fixed,
        specials,
        hard_links,
        attrs_set,
        dry_run: None,
        changes,
        transfer,
        ranks,
    })
}

/// DEST checked, made if missing (private until its entries are in
/// place), opened; whether it is fresh (empty or new: nothing to skip or
/// replace) and whether this run made it.
fn open_dest(spec: &ArchiveSpec, ranked: bool) -> Result<(Dest, bool, bool), ArchiveError> {
    if std::fs::metadata(&spec.dest).is_ok_and(|m| !m.is_dir()) {
        let why = "DEST is not a directory (it must be one, or not exist yet)";
        return Err(ArchiveError::Local {
            path: spec.dest.clone(),
            source: io::Error::new(io::ErrorKind::NotADirectory, why),
        });
    }
    // A destination that is empty (or new) holds nothing to skip or replace.
    let fresh = std::fs::read_dir(&spec.dest).map_or(true, |mut d| d.next().is_none());
    let dest_made = !spec.dry_run && spec.dest.symlink_metadata().is_err();
    if !spec.dry_run {
        // DEST itself is the user's path; what is below it is the mirrors'.
        // Its missing parents are made as `mkdir -p` makes them (the
        // umask's mode); DEST is private until its entries are in place
        // (when SRC's mode is to be DEST's; if not, it is made as its
        // parents).
        if let Some(parent) = spec.dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(local(parent))?;
        }
        let mode = if spec.copies_src_itself() { 0o700 } else { 0o777 };
        match std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), mode).create(&spec.dest) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(local(&spec.dest)(e)),
            _ => {}
        }
    }
    let dest = Dest::open(&spec.dest).map_err(local(&spec.dest))?;
    if !spec.dry_run {
        clear_rank_journals(&spec.dest, ranked);
    }
    Ok((dest, fresh, dest_made))
}

/// The prefix of the journals an MPI job's ranks write in DEST.
const RANK_JOURNALS: &str = ".ddftp-archive.rank";

/// Removes the part journals an MPI job's ranks left in DEST when it was
/// killed (no run resumes them: parts are dealt anew), and, for ranks, the
/// journal and list of an interrupted one-process run (the ranks move
/// what is missing, not that run's range).
fn clear_rank_journals(dest: &Path, ranked: bool) {
    let Ok(rd) = std::fs::read_dir(dest) else { return };
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.as_encoded_bytes();
        let ours = name.starts_with(RANK_JOURNALS.as_bytes()) || (ranked && name.starts_with(b".ddftp-archive"));
        if ours && e.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn local(path: &Path) -> impl FnOnce(io::Error) -> ArchiveError {
    let path = path.to_path_buf();
    move |source| ArchiveError::Local { path, source }
}

/// The process's umask (set and restored at once).
pub fn umask() -> u32 {
    // SAFETY: umask cannot fail; the old value is put back immediately.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
}
