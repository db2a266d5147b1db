//! rsync's `--link-dest`, `--compare-dest` and `--copy-dest`: directories
//! (`DIR`, relative to DEST unless absolute; up to 20, tried in order)
//! that hold an earlier copy of the tree. An entry DEST does not have is
//! looked up under its name in each, and the best match decides, as
//! rsync's `try_dests_reg`/`try_dests_non`:
//!
//! - the same entry (size, mtime, target, and the mode, owner and xattrs
//!   kept): `--link-dest` hard-links it into DEST, `--compare-dest` leaves
//!   it out of DEST, `--copy-dest` copies it here; nothing is itemized.
//!   A file DEST already holds is looked up too (not with `--copy-dest`):
//!   the basis's same one is linked in its place, or with
//!   `--compare-dest` DEST's is removed, as rsync does;
//! - a file whose content matches (size and mtime) but whose mode, owner
//!   or xattrs differ: copied here from the basis (no network), itemized
//!   `cf` with what differs from the basis (`cf...p.....`);
//! - another version: moved as without, itemized against the basis
//!   (`>f.st......`); a directory or symlink made, itemized the same way
//!   (`cd..t......`).
//!
//! Symlinks, FIFOs, sockets and device nodes are linked too (Linux links
//! them), or left out, or made here.
//!
//! A basis is the user's own path; what is below it is resolved beneath
//! its descriptor, never through a symlink, as DEST's entries are.

use std::collections::HashMap;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use ddtree::list::Kind;

use super::decide::Action;
use super::deep;
use super::Item;

/// rsync caps the basis directories at this many.
pub const MAX_BASES: usize = 20;

/// Which of rsync's three options gave the directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BasisHow {
    Link,
    Compare,
    Copy,
}

impl BasisHow {
    pub fn flag(self) -> &'static str {
        match self {
            BasisHow::Link => "--link-dest",
            BasisHow::Compare => "--compare-dest",
            BasisHow::Copy => "--copy-dest",
        }
    }
}

/// The basis directories, as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bases {
    pub how: BasisHow,
    pub dirs: Vec<PathBuf>,
}

/// The best match of one entry DEST does not have.
#[derive(Debug, Clone)]
pub(super) struct Match {
    /// The basis directory it is in.
    pub(super) base: usize,
    /// The entry there against the listed one: `Current` (the same),
    /// `Meta` (the same content, other metadata), else another version.
    pub(super) action: Action,
    /// The owner, group and xattr letters that differ, for the code.
    pub(super) attrs: Option<String>,
    /// DEST holds a file under its name, which the basis's same one
    /// replaces (`--link-dest`: linked in its place; `--compare-dest`:
    /// removed), as rsync's.
    pub(super) replaces: bool,
}

/// What each basis says of the entries DEST lacks.
#[derive(Debug, Default)]
pub(super) struct Based {
    pub(super) how: Option<BasisHow>,
    pub(super) bases: Vec<deep::Dest>,
    pub(super) found: HashMap<PathBuf, Match>,
}

/// How close a match is, as rsync ranks them (3: the same).
fn level(action: Action) -> u8 {
    match action {
        Action::Current => 3,
        Action::Meta { .. } => 2,
        Action::Move { .. } | Action::Remake { .. } => 1,
        Action::Make => 0,
    }
}

impl Based {
    /// Opens the basis directories of `bases` (relative to `dest`); one
    /// that cannot be opened is left out, said (`warn`), as rsync does.
    pub(super) fn open(bases: &Bases, dest: &Path, mut warn: impl FnMut(String)) -> Based {
        let mut opened = vec![];
        for dir in &bases.dirs {
            let path = match dir.is_absolute() {
                true => dir.clone(),
                false => lexical(&dest.join(dir)),
            };
            match deep::Dest::open(&path) {
                Ok(d) if d.exists() => opened.push(d),
                Ok(_) => warn(format!("{} arg does not exist: {}", bases.how.flag(), dir.display())),
                Err(e) => warn(format!("{} {}: {e}", bases.how.flag(), dir.display())),
            }
        }
        Based { how: Some(bases.how), bases: opened, found: HashMap::new() }
    }

    /// Looks up each of `items` that DEST lacks in the bases; `judge`
    /// says what a run would do to an entry held as the lstat given (at
    /// the path given) and what owner, group or xattr letters differ.
    /// `dest_made`: DEST itself is this run's, compared as a directory
    /// DEST lacked (rsync's `cd..t...... ./` against the basis).
    pub(super) fn look(
        &mut self,
        items: &[Item],
        dest: &deep::Dest,
        dest_made: bool,
        judge: impl Fn(&deep::Beneath, &std::fs::Metadata, &Item) -> (Action, Option<String>),
    ) {
        if self.bases.is_empty() {
            return;
        }
        for it in items {
            let made = dest_made && it.rel.as_os_str().is_empty();
            let held = deep::symlink_metadata(&dest.join(&it.rel)).ok().filter(|_| !made);
            // A file DEST holds: only the basis's same one counts, and not
            // for --copy-dest (rsync's `find_exact_for_existing`).
            let replaces = match &held {
                None => false,
                Some(m) if m.is_file() && it.entry.kind == Kind::File && self.how != Some(BasisHow::Copy) => true,
                Some(_) => continue,
            };
            let mut best: Option<Match> = None;
            for (k, base) in self.bases.iter().enumerate() {
                let p = base.join(&it.rel);
                let Ok(m) = deep::symlink_metadata(&p) else { continue };
                let (action, attrs) = judge(&p, &m, it);
                let l = level(action);
                if l > 0 && best.as_ref().is_none_or(|b| l > level(b.action)) {
                    best = Some(Match { base: k, action, attrs, replaces });
                }
                if l == 3 {
                    break;
                }
            }
            if let Some(b) = best.filter(|b| !replaces || b.action == Action::Current) {
                self.found.insert(it.rel.clone(), b);
            }
        }
    }

    /// The itemize code of an entry with a match (`code`: as if DEST held
    /// the basis's entry): `None` if nothing is said of it.
    pub(super) fn code(&self, rel: &Path, kind: Kind) -> Option<Option<String>> {
        let m = self.found.get(rel)?;
        let code = super::decide::code(kind, m.action, m.attrs.as_deref());
        // A local change (the basis's entry copied, a directory or
        // symlink made): `c` where rsync puts it.
        let local = matches!(m.action, Action::Meta { .. }) || (kind != Kind::File && level(m.action) == 1);
        Some(match (code, local) {
            (Some(mut c), true) => {
                c.replace_range(0..1, "c");
                // A symlink or special made anew: rsync reports the change
                // (`cLc.t......`, `cSc..p.....`).
                if !matches!(kind, Kind::File | Kind::Dir) {
                    c.replace_range(2..3, "c");
                }
                Some(c)
            }
            (c, _) => c,
        })
    }

    /// Whether the entry at `rel` is left out of DEST (`--compare-dest`'s
    /// same entry: anything but a directory).
    pub(super) fn leaves_out(&self, rel: &Path, kind: Kind) -> bool {
        self.how == Some(BasisHow::Compare)
            && kind != Kind::Dir
            && self.found.get(rel).is_some_and(|m| m.action == Action::Current)
    }

    /// Puts into DEST what the bases hold of `items` (files and symlinks
    /// DEST lacks): hard links (`--link-dest`, falling back to a copy
    /// where the file system refuses one) and copies; one it could not
    /// put is moved as without. Returns how many it put.
    pub(super) fn put(&self, items: &[Item], dest: &deep::Dest, owners: bool) -> u64 {
        let mut put = 0;
        for it in items.iter().filter(|it| it.entry.kind != Kind::Dir) {
            let Some(m) = self.found.get(&it.rel) else { continue };
            let (from, to) = (self.bases[m.base].join(&it.rel), dest.join(&it.rel));
            let file = it.entry.kind == Kind::File;
            if m.replaces {
                put += u64::from(self.replace(&from, &to).is_ok());
                continue;
            }
            let link = self.how == Some(BasisHow::Link) && m.action == Action::Current;
            let copy = file
                && (matches!(m.action, Action::Meta { .. })
                    || (m.action == Action::Current && self.how == Some(BasisHow::Copy)));
            let done = match link {
                // A file system that refuses the link: a copy, as rsync's.
                true => deep::hard_link(&from, &to).is_ok() || (file && copy_in(&from, &to, it, owners).is_ok()),
                false => copy && copy_in(&from, &to, it, owners).is_ok(),
            };
            put += u64::from(done);
        }
        put
    }
}

impl Based {
    /// DEST's file `to`, where the basis's `from` is the same: linked in
    /// its place (`--link-dest`; nothing if it is that file already) or
    /// removed (`--compare-dest`).
    fn replace(&self, from: &deep::Beneath, to: &deep::Beneath) -> io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        if self.how == Some(BasisHow::Compare) {
            return deep::remove_file(to);
        }
        let (a, b) = (deep::symlink_metadata(from)?, deep::symlink_metadata(to)?);
        if (a.dev(), a.ino()) == (b.dev(), b.ino()) {
            return Ok(());
        }
        let name = to.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let part = to.with_file_name(format!(".{name}.ddftp-basis"));
        deep::hard_link(from, &part)?;
        deep::rename(&part, to).inspect_err(|_| {
            let _ = deep::remove_file(&part);
        })
    }
}

/// `path` with its `..` taken as the name before it gone (rsync's
/// `clean_fname`): `DEST/../prev` is found before DEST exists (a dry
/// run, a first run).
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if matches!(out.components().next_back(), Some(Component::Normal(_))) => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Copies the basis file `from` to `to` (beneath DEST, through a part
/// name renamed at the end: DEST never holds half a file under its name)
/// with the listed mode, mtime and (with `owners`) owner.
fn copy_in(from: &deep::Beneath, to: &deep::Beneath, it: &Item, owners: bool) -> io::Result<()> {
    let name = to.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let part = to.with_file_name(format!(".{name}.ddftp-basis"));
    let result = (|| {
        let src = deep::open(from, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK, 0)?;
        if !src.metadata()?.is_file() {
            return Err(io::Error::other("not a regular file"));
        }
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let mut dst = deep::open(&part, flags, 0o600)?;
        copy_all(&src, &mut dst)?;
        if let Some((uid, gid)) = it.entry.meta.owner.filter(|_| owners) {
            deep::chown(&part, uid, gid)?;
        }
        deep::set_mode(&part, it.entry.perm)?;
        deep::set_mtime(&part, it.entry.mtime)?;
        deep::rename(&part, to)
    })();
    if result.is_err() {
        let _ = deep::remove_file(&part);
    }
    result
}

/// The whole of `src` into `dst`, by the kernel where it can
/// (`copy_file_range`: shared extents on file systems that have them).
fn copy_all(src: &std::fs::File, dst: &mut std::fs::File) -> io::Result<()> {
    loop {
        // SAFETY: valid descriptors; null offsets use and move the files'.
        let n = unsafe {
            libc::copy_file_range(
                src.as_raw_fd(),
                std::ptr::null_mut(),
                dst.as_raw_fd(),
                std::ptr::null_mut(),
                1 << 30,
                0,
            )
        };
        match n {
            0 => return Ok(()),
            n if n > 0 => {}
            _ => {
                let e = io::Error::last_os_error();
                return match e.raw_os_error() {
                    Some(libc::EXDEV | libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP) => {
                        let mut src = src;
                        io::copy(&mut src, dst).map(|_| ())
                    }
                    _ => Err(e),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_basis_is_found_from_dest_as_named() {
        assert_eq!(lexical(Path::new("out/../prev")), Path::new("prev"));
        assert_eq!(lexical(Path::new("/b/out/./../../prev/x")), Path::new("/prev/x"));
        assert_eq!(lexical(Path::new("../../a")), Path::new("../../a"), "above where it starts: kept");
        assert_eq!(lexical(Path::new("/../a")), Path::new("/../a").components().collect::<PathBuf>());
    }
}
