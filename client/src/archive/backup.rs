//! `--backup-dir DIR`: what a run replaces or deletes is moved into DIR,
//! under its path below DEST, instead of being lost (rsync's
//! `--backup-dir`, which implies `--backup`); `-b` alone renames it in
//! place, `NAME~` (`--suffix`), as rsync does. A relative DIR is below DEST
//! and never itself deleted; an absolute one is the user's own path and
//! must be on DEST's filesystem (entries are renamed there, never copied).
//! Both are reached beneath their directory descriptors, as DEST is.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::deep::{self, Beneath, Dest};

/// Where replaced and deleted entries go.
#[derive(Debug, Clone)]
pub(super) struct Backup {
    root: Dest,
    /// DIR below `root` (DEST's when DIR is relative; empty otherwise).
    under: PathBuf,
    /// Appended to a backup's name (`--suffix`).
    suffix: String,
    /// `-b` without `--backup-dir`: beside the entry, in DEST.
    in_place: bool,
}

impl Backup {
    /// `-b` without `--backup-dir`: each backup renamed beside its entry,
    /// `suffix` appended to its name.
    pub(super) fn in_place(dest: &Dest, suffix: String) -> Backup {
        Backup { root: dest.clone(), under: PathBuf::new(), suffix, in_place: true }
    }

    /// DIR as given (`dir`), for `dest` (the user's DEST path, open as `open`).
    pub(super) fn new(dir: &Path, dest: &Dest, suffix: String) -> io::Result<Backup> {
        if dir.is_relative() {
            let mut under = PathBuf::new();
            for c in dir.components() {
                match c {
                    std::path::Component::Normal(n) => under.push(n),
                    std::path::Component::CurDir => {}
                    _ => {
                        let why = "--backup-dir: a relative DIR must stay below DEST (no `..`)";
                        return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
                    }
                }
            }
            if under.as_os_str().is_empty() {
                let why = "--backup-dir: DIR may not be DEST itself";
                return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
            }
            return Ok(Backup { root: dest.clone(), under, suffix, in_place: false });
        }
        // The user's own path: made as `mkdir -p` makes it.
        std::fs::create_dir_all(dir)?;
        // An absolute DIR inside DEST is below DEST as a relative one is:
        // reached beneath DEST's descriptor and kept from `--delete`.
        match below(dir, dest.path()) {
            Some(under) if under.as_os_str().is_empty() => {
                let why = "--backup-dir: DIR may not be DEST itself";
                return Err(io::Error::new(io::ErrorKind::InvalidInput, why));
            }
            Some(under) => return Ok(Backup { root: dest.clone(), under, suffix, in_place: false }),
            None => {}
        }
        Ok(Backup { root: Dest::open(dir)?, under: PathBuf::new(), suffix, in_place: false })
    }

    /// `-b` without `--backup-dir`: backups stay beside their entries.
    pub(super) fn beside(&self) -> bool {
        self.in_place
    }

    /// Whether `rel` (an entry of SRC, below DEST) is DIR itself or holds it:
    /// SRC's entry cannot be put where the backups go.
    pub(super) fn is_in_the_way(&self, dest: &Dest, rel: &Path) -> bool {
        self.inside_dest(dest).is_some_and(|under| under.starts_with(rel))
    }

    /// DIR's path below DEST, when it is there (kept from `--delete`).
    pub(super) fn inside_dest(&self, dest: &Dest) -> Option<&Path> {
        (!self.in_place && self.root.same(dest)).then_some(self.under.as_path())
    }

    /// Moves the entry at `from` (DEST's `rel`) to DIR/`rel`, replacing an
    /// earlier backup of it (not a directory).
    pub(super) fn keep(&self, from: &Beneath, rel: &Path) -> io::Result<()> {
        let mut named = rel.as_os_str().to_owned();
        named.push(&self.suffix);
        let rel = Path::new(&named);
        let to = self.root.join(self.under.join(rel));
        if let Some(parent) = to.parent() {
            let made: Vec<&Path> =
                above(rel).filter(|a| deep::symlink_metadata(&self.root.join(self.under.join(a))).is_err()).collect();
            let dir_made: Vec<&Path> = self
                .under
                .ancestors()
                .take_while(|a| !a.as_os_str().is_empty())
                .filter(|a| deep::symlink_metadata(&self.root.join(a)).is_err())
                .collect();
            deep::make_dir_all(&parent)?;
            // DIR itself as `mkdir -p` would make it (the umask's mode).
            for a in dir_made {
                deep::set_mode(&self.root.join(a), 0o777 & !super::umask())?;
            }
            // As rsync: a directory made for a backup has the mode of the
            // one in DEST it stands for (made owner-only first, then so).
            let mut orig = from.parent();
            for a in above(rel) {
                let Some(o) = orig else { break };
                if made.contains(&a) {
                    if let Ok(m) = deep::symlink_metadata(&o) {
                        deep::set_mode(&self.root.join(self.under.join(a)), m.permissions().mode() & 0o7777)?;
                    }
                }
                orig = o.parent();
            }
        }
        deep::rename(from, &to).map_err(|e| match e.raw_os_error() {
            Some(libc::EXDEV) => {
                io::Error::new(e.kind(), "--backup-dir is on another filesystem than DEST: not replaced")
            }
            _ => e,
        })
    }
}

/// The directories above `rel` (below DEST), nearest first.
fn above(rel: &Path) -> impl Iterator<Item = &Path> {
    rel.ancestors().skip(1).take_while(|a| !a.as_os_str().is_empty())
}

/// `dir` as a path below `dest` (both as they resolve now; empty where it
/// is `dest`), if it is one.
fn below(dir: &Path, dest: &Path) -> Option<PathBuf> {
    let (dir, dest) = (std::fs::canonicalize(dir).ok()?, std::fs::canonicalize(dest).ok()?);
    dir.strip_prefix(&dest).ok().map(Path::to_path_buf)
}
