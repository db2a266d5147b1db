//! Directories' modes and mtimes.
//!
//! Making an entry in a directory changes its mtime, so a directory is
//! finished once nothing more is made in it: deepest first (making an
//! empty one changes its parent). That is the end of the run, or, in a
//! fresh destination, the moment the last part's files have all been
//! created ahead of their bytes: from then on a directory changes only
//! where a symlink of that part is made (as its target comes) and in DEST
//! itself (the run's journal). The others are finished *early*, while the
//! last part moves: 21,621 directories are ~60 ms of syscalls on two
//! threads that the end no longer waits for.

use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

use ddtree::list::Kind;

use super::tree::{chown_to, finish_entry, make_dir_all};
use super::{local, ArchiveError, Item};

/// Where the directories go and how they are made.
#[derive(Clone, Copy)]
pub(super) struct Dirs<'a> {
    pub dest: &'a super::deep::Dest,
    pub fresh: bool,
    pub umask: u32,
    /// Owners and groups are set (run as root).
    pub owners: bool,
    /// `--modify-window`.
    pub window: super::current::Window,
}

impl Dirs<'_> {
    /// Finishes `dirs` (made first, in a fresh destination, if nothing was
    /// written into one), deepest first, each level on two threads; those
    /// `later` says are only made, if missing, and left for [`Dirs::finish`].
    pub fn finish_except<'i>(
        &self,
        dirs: impl Iterator<Item = &'i Item>,
        later: impl Fn(&Item) -> bool,
    ) -> Result<(), ArchiveError> {
        let mut dirs: Vec<(usize, &Item, bool)> = dirs
            .filter(|it| it.entry.kind == Kind::Dir)
            .map(|it| (it.rel.components().count(), it, !later(it)))
            .collect();
        dirs.sort_unstable_by_key(|&(depth, ..)| std::cmp::Reverse(depth));
        // A directory an earlier run made may have any owner.
        let owner = |it: &Item| chown_to(it.entry.meta.owner, self.owners, self.fresh);
        let finish = |part: &[(usize, &Item, bool)]| -> Result<(), ArchiveError> {
            let mut in_dir = super::deep::InDir::default();
            for &(_, it, now) in part {
                let p = self.dest.join(&it.rel);
                let done = match now {
                    // A resync finds most directories as they should be:
                    // one lstat instead of setting both.
                    true if !self.fresh && is_finished_dir(&mut in_dir, self.dest, it, self.owners, self.window) => {
                        Ok(())
                    }
                    true => finish_entry(&p, &it.entry, self.fresh, self.umask, owner(it)),
                    false => super::deep::symlink_metadata(&p).map(drop),
                };
                match done {
                    Err(e) if self.fresh && e.kind() == io::ErrorKind::NotFound => {
                        make_dir_all(&p).map_err(local(&p))?;
                        if now {
                            finish_entry(&p, &it.entry, self.fresh, self.umask, owner(it)).map_err(local(&p))?;
                        }
                    }
                    r => r.map_err(local(&p))?,
                }
            }
            Ok(())
        };
        for level in dirs.chunk_by(|a, b| a.0 == b.0) {
            let (a, b) = level.split_at(level.len() / 2);
            std::thread::scope(|sc| {
                let other = sc.spawn(|| finish(b));
                finish(a).and(other.join().expect("finishing thread panicked"))
            })?;
        }
        Ok(())
    }

    /// Finishes every one of `dirs`.
    pub fn finish<'i>(&self, dirs: impl Iterator<Item = &'i Item>) -> Result<(), ArchiveError> {
        self.finish_except(dirs, |_| false)
    }
}

/// Whether `dest/it` is a directory [`decide`](super::decide::decide)
/// calls current (mode, mtime to the second and, where kept, owner) whose
/// mtime is the listed one to the nanosecond too: a run that made or
/// removed entries in a directory sets its time back, as rsync does, even
/// where whole seconds call it current (a change no itemize code shows).
fn is_finished_dir(
    in_dir: &mut super::deep::InDir,
    dest: &super::deep::Dest,
    it: &Item,
    owners: bool,
    window: super::current::Window,
) -> bool {
    use super::decide::{decide, Action, Held};
    let e = &it.entry;
    in_dir.lstat(dest, &it.rel).is_ok_and(|m| {
        let held = Held {
            differs: Some(super::current::compare(&super::current::Held::from(&m), e, window)),
            attrs: owners && e.meta.owner.is_some_and(|o| o != (m.uid, m.gid)),
            ..Held::default()
        };
        decide(Kind::Dir, held) == Action::Current && (m.mtime, m.mtime_nsec) == (e.mtime.sec, e.mtime.nsec)
    })
}

/// Directories that may still change while the last part (`moving`)
/// moves: DEST (the journal), those a file or symlink of the part goes
/// into (it is made there, or its part file renamed to its name, once its
/// bytes are verified), and those whose mode would keep their owner from
/// making entries in them.
pub(super) fn still_changing(moving: &[Item]) -> impl Fn(&Item) -> bool + use<> {
    let links: HashSet<PathBuf> = moving
        .iter()
        .filter(|it| it.entry.kind != Kind::Dir)
        .filter_map(|it| it.rel.parent())
        .map(Path::to_path_buf)
        .collect();
    move |d: &Item| d.rel.as_os_str().is_empty() || d.entry.perm & 0o700 != 0o700 || links.contains(d.rel.as_path())
}
