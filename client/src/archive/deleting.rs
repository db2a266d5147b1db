//! `--delete`: the entries of DEST that SRC no longer has (never what a
//! rule excludes, nor what stands under the name of a listed entry that
//! is not copied), at most `--max-delete` of them, backed up first with
//! `--backup-dir`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use ddtree::list::Kind;

use super::backup::Backup;
use super::filter::Filter;
use super::{deep, local, ArchiveError, Archiving, Item};
use crate::transfer::Progress;

/// Entries of DEST that the list does not hold, below the directories it
/// does (so only what SRC covers), and that no rule excludes (excluded
/// entries are never deleted); the bookkeeping of an archive run in DEST
/// itself is kept, and so is whatever stands under the name of a listed
/// entry that is not copied (`kept`). Each with whether it is a
/// directory; a directory's contents come before it.
///
/// In rsync's order, so that `--max-delete N` deletes the N entries rsync
/// deletes: SRC's directories depth first, by name; in each, DEST's
/// extraneous entries in the reverse of rsync's sort (files before
/// directories, by name), a directory's contents (the same way) before it.
/// And the directories that stay for what they hold.
pub(super) fn extraneous(
    items: &[Item],
    dest: &deep::Dest,
    filter: &Filter,
    kept: &HashSet<PathBuf>,
    protect: &str,
) -> std::io::Result<Extraneous> {
    let keep = Keep { filter, inside: filter.in_deleted(), protect };
    use std::os::unix::ffi::OsStrExt;
    fn bytes(p: &Path) -> &[u8] {
        p.as_os_str().as_bytes()
    }
    let mut listed: HashSet<&[u8]> = items.iter().map(|it| bytes(&it.rel)).collect();
    listed.extend(kept.iter().map(|p| bytes(p)));
    let mut dirs: Vec<&Item> = items.iter().filter(|it| it.entry.kind == Kind::Dir).collect();
    // Paths compare component by component: a directory, then what is in it.
    dirs.sort_by(|a, b| a.rel.cmp(&b.rel));
    // A resync of a large tree reads every directory of DEST: spread over
    // the cores, names looked up without a path made for each.
    let found = super::listing::par_map(&dirs, |d| -> std::io::Result<Extraneous> {
        let here = dest.join(&d.rel);
        // Not a directory (or not there): nothing below it to delete.
        let names = match deep::read_dir(&here) {
            Ok(n) => n,
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(libc::ENOTDIR)
                    || deep::is_symlink(&e) =>
            {
                return Ok(Extraneous::default());
            }
            Err(e) => return Err(e),
        };
        let (mut cache, mut out, mut key) = (HashMap::new(), Extraneous::default(), Vec::new());
        let top = d.rel.as_os_str().is_empty();
        let mut gone = vec![];
        for name in names {
            key.clear();
            if !top {
                key.extend_from_slice(bytes(&d.rel));
                key.push(b'/');
            }
            key.extend_from_slice(bytes(&name));
            if listed.contains(&key[..]) || (top && key.starts_with(b".ddftp-archive")) {
                continue;
            }
            let rel = d.rel.join(&name);
            let is_dir = deep::symlink_metadata(&dest.join(&rel)).is_ok_and(|m| m.is_dir());
            if keep.keeps(&rel, is_dir, &mut cache) {
                continue;
            }
            gone.push((rel, is_dir));
        }
        let mut inside = HashMap::new();
        for (rel, is_dir) in in_rsyncs_deletion_order(gone) {
            below(dest, &rel, is_dir, &keep, &mut inside, &mut out)?;
        }
        Ok(out)
    });
    let mut out = Extraneous::default();
    for f in found {
        let f = f?;
        out.gone.extend(f.gone);
        out.non_empty.extend(f.non_empty);
    }
    // A directory where SRC now has a file, symlink or special: what it
    // holds goes (rsync lists it so), the directory itself as it is replaced.
    for it in items.iter().filter(|it| it.entry.kind != Kind::Dir && !kept.contains(&it.rel)) {
        if deep::symlink_metadata(&dest.join(&it.rel)).is_ok_and(|m| m.is_dir()) {
            let mut cache = HashMap::new();
            for name in deep::read_dir(&dest.join(&it.rel))? {
                let rel = it.rel.join(name);
                let is_dir = deep::symlink_metadata(&dest.join(&rel)).is_ok_and(|m| m.is_dir());
                if !keep.keeps_inside(&rel, is_dir, &mut cache) {
                    below(dest, &rel, is_dir, &keep, &mut cache, &mut out)?;
                }
            }
        }
    }
    Ok(out)
}

/// What `--delete` finds: the entries to delete ([`extraneous`]'s order),
/// and the directories that stay for an excluded entry they hold (rsync
/// names them: `cannot delete non-empty directory`).
#[derive(Debug, Default)]
pub(super) struct Extraneous {
    pub gone: Vec<(PathBuf, bool)>,
    pub non_empty: Vec<PathBuf>,
}

/// `rel` and, for a directory, everything in it (contents first) that no
/// rule excludes (perishable rules not heeded: the directory is being
/// deleted). A directory that holds an excluded entry stays, with it (as
/// rsync keeps it: "cannot delete non-empty directory"). Whether all of
/// `rel` goes. `cache`: directories' verdicts inside deleted ones.
fn below(
    dest: &deep::Dest,
    rel: &Path,
    is_dir: bool,
    keep: &Keep,
    cache: &mut HashMap<PathBuf, bool>,
    out: &mut Extraneous,
) -> std::io::Result<bool> {
    let mut whole = true;
    if is_dir {
        let mut inside = vec![];
        for name in deep::read_dir(&dest.join(rel))? {
            let r = rel.join(name);
            let d = deep::symlink_metadata(&dest.join(&r)).is_ok_and(|m| m.is_dir());
            if keep.keeps_inside(&r, d, cache) {
                whole = false;
                continue;
            }
            inside.push((r, d));
        }
        for (r, d) in in_rsyncs_deletion_order(inside) {
            whole &= below(dest, &r, d, keep, cache, out)?;
        }
    }
    match whole {
        true => out.gone.push((rel.to_path_buf(), is_dir)),
        false => out.non_empty.push(rel.to_path_buf()),
    }
    Ok(whole)
}

/// What `--delete` leaves: what a rule excludes (as the receiver heeds
/// rules), and backups made in place (`protect`, their suffix; empty:
/// none).
struct Keep<'a> {
    filter: &'a Filter,
    /// The same inside a directory being deleted (no perishable rules).
    inside: Filter,
    protect: &'a str,
}

impl Keep<'_> {
    fn keeps(&self, rel: &Path, is_dir: bool, cache: &mut HashMap<PathBuf, bool>) -> bool {
        self.backup(rel) || (!self.filter.is_empty() && self.filter.excludes(rel, is_dir, cache))
    }

    fn keeps_inside(&self, rel: &Path, is_dir: bool, cache: &mut HashMap<PathBuf, bool>) -> bool {
        self.backup(rel) || (!self.inside.is_empty() && self.inside.excludes(rel, is_dir, cache))
    }

    fn backup(&self, rel: &Path) -> bool {
        use std::os::unix::ffi::OsStrExt;
        !self.protect.is_empty() && rel.file_name().is_some_and(|n| n.as_bytes().ends_with(self.protect.as_bytes()))
    }
}

/// One directory's entries as rsync deletes them: the reverse of its
/// sort (files before directories, each by name).
fn in_rsyncs_deletion_order(mut entries: Vec<(PathBuf, bool)>) -> Vec<(PathBuf, bool)> {
    entries.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    entries.reverse();
    entries
}

/// The first `max` of `extra` (`--max-delete`; all without it), and how
/// many are held back. A directory comes after what it holds, so one
/// held back keeps its directory too.
pub(super) fn at_most(mut extra: Extraneous, max: Option<u64>) -> (Extraneous, u64) {
    let max = max.map_or(usize::MAX, |m| usize::try_from(m).unwrap_or(usize::MAX));
    let held = extra.gone.len().saturating_sub(max);
    extra.gone.truncate(max);
    (extra, held as u64)
}

/// Removes what [`extraneous`] found (contents before their directory);
/// with `backup`, what is not a directory is moved there instead. What
/// cannot be removed is returned with why (the rest is removed).
pub(super) fn delete(dest: &deep::Dest, extra: &[(PathBuf, bool)], backup: Option<&Backup>) -> Vec<(PathBuf, String)> {
    let mut failed = vec![];
    for (rel, dir) in extra {
        let p = dest.join(rel);
        let gone = match backup {
            Some(b) if !dir => b.keep(&p, rel),
            // Its contents went before it (kept as backups where they are).
            Some(b) if b.beside() => deep::remove_empty_dir(&p),
            _ => deep::remove_any(&p),
        };
        if let Err(e) = gone {
            failed.push((rel.clone(), e.to_string()));
        }
    }
    failed
}

impl Archiving<'_> {
    /// Whether this run deletes: with `--delete`, unless the list is
    /// incomplete (a directory no mirror could read, a symlink not
    /// followed): entries not listed would look gone (rsync's `IO error
    /// encountered -- skipping file deletion`).
    pub(super) fn deletes(&self) -> bool {
        self.spec.delete && !self.tally.lock().expect("tally lock").incomplete
    }

    /// `--delete`: removes what DEST holds below SRC's directories that
    /// the list does not (never what a rule excludes). Not when the list
    /// is incomplete (a directory no mirror could read): its entries would
    /// look gone. What cannot be removed is a failure of its own.
    pub(super) fn delete_extraneous(&self, items: &[Item], progress: &mut dyn Progress) -> Result<u64, ArchiveError> {
        if !self.spec.delete {
            return Ok(0);
        }
        if !self.deletes() {
            progress.warn("not deleting anything: some of SRC could not be read, so what it holds is not known");
            return Ok(0);
        }
        let kept = self.listing.lock().expect("listing lock").kept.clone();
        let extra = extraneous(items, &self.dest, self.delete_filter(), &kept, self.protected())
            .map_err(local(&self.spec.dest))?;
        let (extra, skipped) = at_most(extra, self.spec.max_delete);
        if skipped > 0 {
            let n = self.spec.max_delete.unwrap_or_default();
            progress.warn(&format!("--max-delete {n}: {skipped} more entries SRC no longer has were not deleted"));
            self.tally.lock().expect("tally lock").deletions_skipped = skipped;
        }
        let failed = delete(&self.dest, &extra.gone, self.backup()?.as_ref());
        for (rel, why) in &failed {
            self.failed(rel, format!("cannot delete: {why}"));
        }
        Ok((extra.gone.len() - failed.len()) as u64)
    }
}
