//! The list, checked and chosen from: entries below SRC, nothing below a
//! file or a symlink, what is still to move, and what the mirrors and
//! the resume journal are given.

use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use ddftp_proto::packed::{self, MAX_LIST};
use ddtree::list::{ddftp, Entry, Kind};

use super::current::{self, Held, Quick};
use super::decide;
use super::tree::{is_finished_file, remove_any};
use super::{deep, ArchiveError, Item};

/// The entry's name below SRC (empty for SRC itself) as listed, if it is
/// below SRC; whether the name is a plain one is [`ddtree::list::shape`]'s
/// to say.
pub(super) fn below_src<'e>(e: &'e Entry, src: &[u8]) -> Option<&'e [u8]> {
    if src == b"." {
        // A mirror's walk of its whole root lists `.` and `./NAME`.
        return match e.path.as_slice() {
            b"." => Some(&[]),
            [b'.', b'/', rest @ ..] => Some(rest),
            path => Some(path),
        };
    }
    match e.path.strip_prefix(src)? {
        [] => Some(&[]),
        [b'/', rest @ ..] => Some(rest),
        _ => None,
    }
}

/// Whether the destination already holds this entry, complete and correct.
pub(super) fn is_done(dest: &deep::Beneath, e: &Entry) -> bool {
    e.kind == Kind::File && deep::symlink_metadata(dest).is_ok_and(|m| is_finished_file(&m, e.size, e.perm, e.mtime))
}

/// What DEST holds where a listed file goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// The file, complete and correct.
    Done,
    /// The file, but for its mode.
    ModeOnly,
    /// A directory (it must go, or the entry cannot be made).
    Dir,
    /// Nothing, or something else.
    Missing,
}

/// What DEST's `m` is for the listed file `e` (`quick`: rsync's
/// `--size-only`, `--modify-window`).
fn found(m: &deep::Stat, e: &Entry, quick: Quick) -> Found {
    if m.mode & libc::S_IFMT == libc::S_IFDIR {
        return Found::Dir;
    }
    // The dry run's rule ([`decide`]): owners, xattrs and `--checksum`
    // are looked at apart (the last has set an mtime that moves it).
    let differs = Some(current::compare(&Held::from(m), e, quick.window));
    let held = decide::Held { differs, size_only: quick.size_only, ..decide::Held::default() };
    match decide::decide(Kind::File, held) {
        decide::Action::Current => Found::Done,
        decide::Action::Meta { .. } => Found::ModeOnly,
        _ => Found::Missing,
    }
}

/// `f` over `items` on one thread per core, in order.
pub(super) fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    par_chunks(items, |c| c.iter().map(&f).collect())
}

/// `f` over `items` cut in one run per core (each keeps its own state
/// across its run), results in order.
pub(super) fn par_chunks<T: Sync, R: Send>(items: &[T], f: impl Fn(&[T]) -> Vec<R> + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    if threads == 1 || items.len() < 4096 {
        return f(items);
    }
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let parts: Vec<_> = items.chunks(chunk).map(|c| s.spawn(|| f(c))).collect();
        parts.into_iter().flat_map(|h| h.join().expect("par_chunks thread")).collect()
    })
}

/// The entries to move, and what the listing holds.
pub(super) struct Chosen<'a> {
    pub(super) todo: Vec<&'a Item>,
    pub(super) files: u64,
    pub(super) links: u64,
    /// Symlinks DEST holds already (pointing where the listed ones do).
    pub(super) skipped_links: u64,
    pub(super) skipped_files: u64,
    pub(super) skipped_bytes: u64,
    /// Bytes of the files in `todo`.
    pub(super) bytes: u64,
    /// Files complete but for their mode, which was set here.
    pub(super) modes_fixed: u64,
    /// Files complete but for their owner or group, set here.
    pub(super) owners_fixed: u64,
    /// Entries of `todo` whose name holds a directory in DEST.
    pub(super) dirs_in_way: Vec<&'a Item>,
}

impl Chosen<'_> {
    /// `--compare-dest`: what a basis holds as listed stays out of DEST.
    pub(super) fn leave_out_basis(&mut self, based: &super::basis::Based) {
        let out: HashSet<std::path::PathBuf> =
            self.todo.iter().filter(|it| based.leaves_out(&it.rel, it.entry.kind)).map(|it| it.rel.clone()).collect();
        if !out.is_empty() {
            self.leave_out(&out);
        }
    }

    /// Takes the entries named in `out` out of the move (their bytes too).
    pub(super) fn leave_out(&mut self, out: &HashSet<std::path::PathBuf>) {
        let mut bytes = 0;
        self.todo.retain(|it| {
            let moves = !out.contains(&it.rel);
            if !moves && it.entry.kind == Kind::File {
                bytes += it.entry.meta.moved_len(it.entry.size);
            }
            moves
        });
        self.bytes -= bytes;
    }
}

/// The files and symlinks to move: all of them into a fresh destination,
/// else those not already complete and correct there.
/// With `owners`, a complete file whose owner differs gets the listed one;
/// with `quick.size_only` (rsync's `--size-only`), one of the listed size
/// is complete, its time set.
pub(super) fn choose<'a>(items: &'a [Item], dest: &deep::Dest, fresh: bool, owners: bool, quick: Quick) -> Chosen<'a> {
    let size_only = quick.size_only;
    let mut c = Chosen {
        todo: vec![],
        files: 0,
        links: 0,
        skipped_links: 0,
        skipped_files: 0,
        skipped_bytes: 0,
        bytes: 0,
        modes_fixed: 0,
        owners_fixed: 0,
        dirs_in_way: vec![],
    };
    let entries: Vec<&Item> = items.iter().filter(|it| it.entry.kind != Kind::Dir).collect();
    // What DEST holds of each file: a resync of a large tree is mostly
    // these `lstat`s, spread over the cores.
    let found = match fresh {
        true => vec![(Found::Missing, None); entries.len()],
        false => par_chunks(&entries, |run| {
            let mut dir = deep::InDir::default();
            run.iter()
                .map(|it| {
                    dir.lstat(dest, &it.rel)
                        .map_or((Found::Missing, None), |m| (found(&m, &it.entry, quick), Some((m.uid, m.gid))))
                })
                .collect()
        }),
    };
    for (it, (found, owner)) in entries.into_iter().zip(found) {
        if found == Found::Dir {
            c.dirs_in_way.push(it);
        }
        if it.entry.kind == Kind::File {
            c.files += 1;
            // Same size and mtime (so verified bytes: a file gets its
            // mtime only then; a part file is renamed to its name whole),
            // another mode: a chmod on the source. Set here (and the time,
            // with --size-only); nothing to move (if they cannot be set,
            // it moves).
            let p = dest.join(&it.rel);
            let mode_set = found == Found::ModeOnly
                && deep::set_mode(&p, it.entry.perm).is_ok()
                && (!size_only || deep::set_mtime(&p, it.entry.mtime).is_ok());
            if found == Found::Done || mode_set {
                // Owner too (a chown clears setuid: the mode again after).
                if let Some(want) = it.entry.meta.owner.filter(|&w| owners && owner.is_some_and(|o| o != w)) {
                    let p = dest.join(&it.rel);
                    if deep::chown(&p, want.0, want.1).and_then(|()| deep::set_mode(&p, it.entry.perm)).is_err() {
                        c.bytes += it.entry.meta.moved_len(it.entry.size);
                        c.todo.push(it);
                        continue;
                    }
                    c.owners_fixed += 1;
                }
                c.skipped_files += 1;
                c.skipped_bytes += it.entry.size;
                c.modes_fixed += u64::from(mode_set);
                continue;
            }
            c.bytes += it.entry.meta.moved_len(it.entry.size);
        } else {
            c.links += 1;
            if owner.is_some() && link_kept(dest, it, owners, quick.window) {
                c.skipped_links += 1;
                continue;
            }
        }
        c.todo.push(it);
    }
    c
}

/// Whether the symlink `it` is in DEST already, pointing where the listed
/// one does: then its mtime (and owner, with `owners`) are set here and it
/// does not move. A list that gives no target: it moves.
fn link_kept(dest: &deep::Dest, it: &Item, owners: bool, window: current::Window) -> bool {
    let p = dest.join(&it.rel);
    let Ok(m) = deep::symlink_metadata(&p) else { return false };
    let held = decide::Held {
        differs: Some(current::compare(&Held::from(&m), &it.entry, window)),
        same_target: Some(current::same_target(&p, &it.entry)),
        ..decide::Held::default()
    };
    match decide::decide(Kind::Link, held) {
        decide::Action::Meta { time: true, .. } if deep::set_mtime(&p, it.entry.mtime).is_err() => return false,
        decide::Action::Meta { .. } | decide::Action::Current => {}
        _ => return false,
    }
    match it.entry.meta.owner.filter(|&(u, g)| owners && (m.uid(), m.gid()) != (u, g)) {
        Some((u, g)) => deep::chown(&p, u, g).is_ok(),
        None => true,
    }
}

/// The bundle's definition: `todo` as a ddftp list, packed for the wire.
pub(super) fn definition(todo: &[&Item]) -> Vec<u8> {
    // A mirror checks each entry's kind, size and mtime as it reads it,
    // and reads a sparse file's data runs alone; modes, owners and xattrs
    // are left out, so the packed list reaches a slow mirror sooner.
    packed_list(todo, |e| Entry { perm: 0, meta: e.meta.for_bundle(), ..e.clone() })
}

/// The list of what this run moves, kept beside the journal so that a run
/// interrupted and run again takes up the same range (entries whole).
pub(super) fn saved_list(todo: &[&Item]) -> Vec<u8> {
    packed_list(todo, Entry::clone)
}

pub(super) fn packed_list(todo: &[&Item], entry: impl Fn(&Entry) -> Entry) -> Vec<u8> {
    let mut list = ddftp::MAGIC.to_vec();
    for it in todo {
        ddftp::push_record(&mut list, &entry(&it.entry));
    }
    packed::pack(&list)
}

/// The list an interrupted run was moving, if its journal is still here,
/// the listing still holds every one of its entries unchanged, and every
/// other listed file is complete in `dest` (one that is not, new since or
/// gone from DEST, would otherwise pass as skipped): moving it again
/// resumes from the journal. (Files it finished would pass as complete now,
/// so a list chosen afresh, and its journal, would not match.)
pub(super) fn resumed<'a>(items: &'a [Item], dest: &deep::Dest, saved: &Path, journal: &Path) -> Option<Chosen<'a>> {
    if !journal.exists() {
        return None;
    }
    let list = packed::unpack(&ddtree::scratch::read(saved).ok()?, MAX_LIST).ok()?;
    let entries = ddftp::read(&list[..], saved).ok()?;
    let listed: HashMap<&[u8], &Item> =
        items.iter().filter(|it| it.entry.kind != Kind::Dir).map(|it| (it.entry.path.as_slice(), it)).collect();
    // One path under two names (a symlink followed): the saved list
    // cannot tell them apart, so the run starts afresh.
    if listed.len() != items.iter().filter(|it| it.entry.kind != Kind::Dir).count() {
        return None;
    }
    let mut todo = Vec::with_capacity(entries.len());
    for e in &entries {
        todo.push(*listed.get(e.path.as_slice()).filter(|it| it.entry == *e)?);
    }
    let again: HashSet<&[u8]> = entries.iter().map(|e| e.path.as_slice()).collect();
    let others = items.iter().filter(|it| it.entry.kind == Kind::File && !again.contains(it.entry.path.as_slice()));
    if others.into_iter().any(|it| !is_done(&dest.join(&it.rel), &it.entry)) {
        return None;
    }
    let files = items.iter().filter(|it| it.entry.kind == Kind::File);
    let (all_files, all_bytes) = files.fold((0, 0), |(n, b), it| (n + 1, b + it.entry.size));
    let moving = todo.iter().filter(|it| it.entry.kind == Kind::File);
    let (moved, bytes) = moving.fold((0, 0), |(n, b), it| (n + 1, b + it.entry.size));
    Some(Chosen {
        modes_fixed: 0,
        owners_fixed: 0,
        // The interrupted run made way for these already.
        dirs_in_way: vec![],
        todo,
        files: all_files,
        links: items.iter().filter(|it| it.entry.kind == Kind::Link).count() as u64,
        skipped_links: 0,
        skipped_files: all_files - moved,
        skipped_bytes: all_bytes - bytes,
        bytes,
    })
}

/// Makes the listed directories in an existing destination, owner-writable
/// until the end so files can be created inside (parents sort before
/// children); whatever stands in a directory's place goes. Returns how many
/// directories the list holds.
pub(super) fn make_dirs(items: &[Item], dest: &deep::Dest) -> Result<u64, ArchiveError> {
    let dirs: Vec<&Item> = items.iter().filter(|it| it.entry.kind == Kind::Dir).collect();
    // Already a directory its owner can write in: nothing to do (a resync
    // of a large tree finds all of them so). Looked at over the cores,
    // each through its parent's descriptor; the rest put right in order.
    let ready = par_chunks(&dirs, |run| {
        let mut at = deep::InDir::default();
        run.iter()
            .map(|it| {
                at.lstat(dest, &it.rel).is_ok_and(|m| m.mode & libc::S_IFMT == libc::S_IFDIR && m.mode & 0o700 == 0o700)
            })
            .collect()
    });
    for (it, _) in dirs.iter().zip(ready).filter(|(_, ready)| !ready) {
        let p = dest.join(&it.rel);
        let local = |source| ArchiveError::Local { path: p.to_path_buf(), source };
        let had = deep::symlink_metadata(&p);
        if had.is_ok_and(|m| !m.is_dir()) {
            remove_any(&p).map_err(local)?;
        }
        deep::make_dir_all(&p).map_err(local)?;
        let mode = deep::symlink_metadata(&p).map_err(local)?.mode();
        deep::set_mode(&p, mode | 0o700).map_err(local)?;
    }
    Ok(dirs.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ddtree::list::Time;

    #[test]
    fn paths_below_src() {
        let e = |path: &str| Entry {
            path: path.into(),
            kind: Kind::File,
            perm: 0,
            size: 0,
            mtime: Time::default(),
            meta: Default::default(),
        };
        let rel = |path: &str, src: &str| below_src(&e(path), src.as_bytes()).map(|r| r.to_vec());
        assert_eq!(rel("proj/a/b", "proj").unwrap(), b"a/b");
        // Taken as listed: the list's check refuses what is not plain.
        assert_eq!(rel("proj//a/./b", "proj").unwrap(), b"/a/./b");
        assert_eq!(rel("proj", "proj").unwrap(), b"");
        assert_eq!(rel("project/a", "proj"), None);
        assert_eq!(rel("a/b", ".").unwrap(), b"a/b");
        assert_eq!(rel("./a/b", ".").unwrap(), b"a/b");
        assert_eq!(rel(".", ".").unwrap(), b"");
    }
}
