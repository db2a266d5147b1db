//! Every file-system call an archive makes on DEST, beneath DEST.
//!
//! DEST is opened once ([`Dest`]); an entry's path ([`Beneath`]) is its
//! name below it, and every call resolves that name from DEST's
//! descriptor with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
//! ([`ddtree::beneath`]), then acts on the last name with an `*at` call
//! that does not follow it either. So no symlink, whether a mirror's
//! list made it or a local user planted it, and no `..` ever takes a
//! write, a chmod, a chown, a link or a delete outside DEST: the kernel
//! refuses the path (`ELOOP`, `EXDEV`). Paths of any length work: past
//! `PATH_MAX` the directory is opened a piece at a time.

use std::ffi::{CString, OsStr};
use std::fs::{File, Metadata};
use std::io;
use std::ops::Deref;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ddtree::list::Time;

/// DEST, opened once: the directory every entry is resolved beneath.
#[derive(Debug, Clone)]
pub(super) struct Dest(Arc<Root>);

#[derive(Debug)]
struct Root {
    path: PathBuf,
    /// `None` where DEST does not exist (a dry run): nothing is below it.
    fd: Option<OwnedFd>,
}

impl Dest {
    /// Whether `other` is this very DEST (the same opening).
    pub(super) fn same(&self, other: &Dest) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Opens DEST (the user's own path, followed as given). A DEST that
    /// does not exist is one with nothing in it.
    pub(super) fn open(path: &Path) -> io::Result<Dest> {
        let fd = match File::open(path) {
            Ok(f) if f.metadata()?.is_dir() => Some(OwnedFd::from(f)),
            Ok(_) => return Err(io::Error::new(io::ErrorKind::NotADirectory, "DEST is not a directory")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        Ok(Dest(Arc::new(Root { path: path.to_path_buf(), fd })))
    }

    pub(super) fn path(&self) -> &Path {
        &self.0.path
    }

    /// Whether it exists (was opened).
    pub(super) fn exists(&self) -> bool {
        self.0.fd.is_some()
    }

    /// Entry `rel` (a name below DEST; empty for DEST itself).
    pub(super) fn join(&self, rel: impl AsRef<Path>) -> Beneath {
        let rel = rel.as_ref().as_os_str().as_bytes();
        let mut full = self.0.path.as_os_str().as_bytes().to_vec();
        let at = if rel.is_empty() {
            full.len()
        } else {
            full.push(b'/');
            full.len()
        };
        full.extend_from_slice(rel);
        Beneath { dest: self.clone(), full: PathBuf::from(std::ffi::OsString::from_vec(full)), at }
    }

    fn fd(&self) -> io::Result<RawFd> {
        self.0.fd.as_ref().map(AsRawFd::as_raw_fd).ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
    }
}

/// An entry below DEST: shown (and compared) as DEST's path joined with
/// its name; every call resolves the name beneath DEST's descriptor.
#[derive(Debug, Clone)]
pub(super) struct Beneath {
    dest: Dest,
    full: PathBuf,
    /// Where the name below DEST starts in `full`.
    at: usize,
}

impl Deref for Beneath {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.full
    }
}

impl AsRef<Path> for Beneath {
    fn as_ref(&self) -> &Path {
        &self.full
    }
}

impl Beneath {
    /// The name below DEST (empty for DEST itself).
    pub(super) fn rel(&self) -> &[u8] {
        &self.full.as_os_str().as_bytes()[self.at..]
    }

    /// Its directory, unless it is DEST itself.
    pub(super) fn parent(&self) -> Option<Beneath> {
        let rel = self.rel();
        if rel.is_empty() {
            return None;
        }
        Some(self.dest.join(OsStr::from_bytes(ddftp_proto::relpath::parent(rel))))
    }

    /// Entry `name` in this directory.
    pub(super) fn join(&self, name: impl AsRef<Path>) -> Beneath {
        let rel = self.rel();
        let mut r = rel.to_vec();
        if !r.is_empty() {
            r.push(b'/');
        }
        r.extend_from_slice(name.as_ref().as_os_str().as_bytes());
        self.dest.join(OsStr::from_bytes(&r))
    }

    /// The entry named `name` beside this one.
    pub(super) fn with_file_name(&self, name: impl AsRef<OsStr>) -> Beneath {
        match self.parent() {
            Some(p) => p.join(name.as_ref()),
            None => self.dest.join(name.as_ref()),
        }
    }
}

/// Where an entry's last name is: its directory, opened beneath DEST
/// (or DEST's own descriptor), and the name.
struct At {
    dir: Option<OwnedFd>,
    base: RawFd,
    name: CString,
}

impl At {
    fn new(p: &Beneath) -> io::Result<At> {
        let base = p.dest.fd()?;
        let rel = p.rel();
        let c = |s: &[u8]| CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"));
        if rel.is_empty() {
            // DEST itself.
            return Ok(At { dir: None, base, name: c(b".")? });
        }
        ddftp_proto::relpath::check(rel).map_err(|e| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("not a name below DEST ({e}): refused"))
        })?;
        let (dir, name) = match rel.iter().rposition(|&ch| ch == b'/') {
            None => (None, rel),
            Some(i) => (Some(beneath(base, &rel[..i], libc::O_PATH | libc::O_DIRECTORY, 0)?), &rel[i + 1..]),
        };
        Ok(At { dir, base, name: c(name)? })
    }

    fn fd(&self) -> RawFd {
        self.dir.as_ref().map_or(self.base, AsRawFd::as_raw_fd)
    }
}

fn beneath(base: RawFd, rel: &[u8], flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    ddtree::beneath::open(base, rel, flags, mode).map_err(|e| match e.raw_os_error() {
        Some(errno @ libc::ELOOP) => {
            io::Error::new(e.kind(), Refused { errno, why: "a symlink on the way (not followed below DEST)" })
        }
        Some(errno @ libc::EXDEV) => io::Error::new(e.kind(), Refused { errno, why: "leads outside DEST (refused)" }),
        _ => e,
    })
}

/// A path the kernel would not resolve beneath DEST, said plainly.
#[derive(Debug)]
struct Refused {
    errno: i32,
    why: &'static str,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.why)
    }
}

impl std::error::Error for Refused {}

/// Whether `e` says a symlink stood on the path or at its end (and was
/// not followed).
pub(super) fn is_symlink(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
        || e.get_ref().and_then(|i| i.downcast_ref::<Refused>()).is_some_and(|r| r.errno == libc::ELOOP)
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Opens `p` with `flags` (`O_NOFOLLOW` and `O_CLOEXEC` added) and `mode`:
/// a symlink at `p` is never opened through (`ELOOP`), but opened itself
/// with `O_PATH`.
pub(super) fn open(p: &Beneath, flags: libc::c_int, mode: u32) -> io::Result<File> {
    let base = p.dest.fd()?;
    let rel = if p.rel().is_empty() { &b"."[..] } else { p.rel() };
    if rel != b"." {
        ddftp_proto::relpath::check(rel)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("not a name below DEST ({e})")))?;
    }
    Ok(File::from(beneath(base, rel, flags | libc::O_NOFOLLOW, mode)?))
}

/// A directory kept open while the entries looked up in it share it:
/// `fstatat` of a name in it costs the kernel one lookup, where a path
/// resolved from DEST walks every component again (most of a resync's time).
#[derive(Default)]
pub(super) struct InDir {
    dir: Option<(PathBuf, Option<File>)>,
}

/// What `lstat` says of an entry: what the archive compares.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stat {
    pub mode: u32,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub uid: u32,
    pub gid: u32,
    pub rdev: u64,
}

impl InDir {
    /// `lstat` of `dest/rel`: through its directory's descriptor, opened
    /// once for every entry of that directory in a row.
    pub(super) fn lstat(&mut self, dest: &Dest, rel: &Path) -> io::Result<Stat> {
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return stat_at(&dest.join(rel));
        };
        if self.dir.as_ref().is_none_or(|(p, _)| p != parent) {
            let fd = open(&dest.join(parent), libc::O_PATH | libc::O_DIRECTORY, 0).ok();
            self.dir = Some((parent.to_path_buf(), fd));
        }
        let Some((_, Some(dir))) = &self.dir else { return stat_at(&dest.join(rel)) };
        let name = CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        fstatat(dir.as_raw_fd(), &name)
    }
}

fn stat_at(p: &Beneath) -> io::Result<Stat> {
    let at = At::new(p)?;
    fstatat(at.fd(), &at.name)
}

fn fstatat(dir: RawFd, name: &CString) -> io::Result<Stat> {
    // SAFETY: a valid descriptor, C string and a stat buffer to fill.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    check(unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
    Ok(Stat {
        mode: st.st_mode,
        size: st.st_size as u64,
        mtime: st.st_mtime,
        mtime_nsec: st.st_mtime_nsec as u32,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev,
    })
}

/// The metadata of the entry itself (a symlink's own).
pub(super) fn symlink_metadata(p: &Beneath) -> io::Result<Metadata> {
    open(p, libc::O_PATH, 0)?.metadata()
}

pub(super) fn rename(from: &Beneath, to: &Beneath) -> io::Result<()> {
    let (a, b) = (At::new(from)?, At::new(to)?);
    // SAFETY: valid descriptors and C strings.
    check(unsafe { libc::renameat(a.fd(), a.name.as_ptr(), b.fd(), b.name.as_ptr()) })
}

pub(super) fn remove_file(p: &Beneath) -> io::Result<()> {
    let at = At::new(p)?;
    // SAFETY: a valid descriptor and C string.
    check(unsafe { libc::unlinkat(at.fd(), at.name.as_ptr(), 0) })
}

/// Removes whatever is at `p` (a directory with all it holds; a symlink
/// itself, never what it points to).
/// An empty directory removed; one that is not empty is left, as it is
/// (`-b`'s backups made in it stay, as rsync leaves them).
pub(super) fn remove_empty_dir(p: &Beneath) -> io::Result<()> {
    let at = At::new(p)?;
    // SAFETY: a valid descriptor and C string.
    match check(unsafe { libc::unlinkat(at.fd(), at.name.as_ptr(), libc::AT_REMOVEDIR) }) {
        Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => Ok(()),
        r => r,
    }
}

pub(super) fn remove_any(p: &Beneath) -> io::Result<()> {
    match symlink_metadata(p) {
        Ok(m) if m.is_dir() => {
            for e in read_dir(p)? {
                remove_any(&p.join(e))?;
            }
            let at = At::new(p)?;
            // SAFETY: a valid descriptor and C string.
            check(unsafe { libc::unlinkat(at.fd(), at.name.as_ptr(), libc::AT_REMOVEDIR) })
        }
        Ok(_) => remove_file(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Whether a directory stands at `p`, where an entry that is no
/// directory is to be made, and may go: an empty one may; a non-empty one
/// only with `delete` (the user's `--delete`: without it a plain run never
/// deletes what a directory holds, as rsync without `--force`), else the
/// error says so. `Ok(false)`: no directory there.
pub(super) fn dir_may_go(p: &Beneath, delete: bool) -> io::Result<bool> {
    match symlink_metadata(p) {
        Ok(m) if m.is_dir() => match delete || read_dir(p)?.is_empty() {
            true => Ok(true),
            false => Err(io::Error::new(
                io::ErrorKind::DirectoryNotEmpty,
                "a non-empty directory stands in its place: replaced only with --delete",
            )),
        },
        _ => Ok(false),
    }
}

/// Clears the way for an entry that is no directory: a directory at `p`
/// goes if [`dir_may_go`]. Anything else is left for the caller to replace.
pub(super) fn clear_dir(p: &Beneath, delete: bool) -> io::Result<()> {
    match dir_may_go(p, delete)? {
        true => remove_any(p),
        false => Ok(()),
    }
}

/// The names in directory `p`.
pub(super) fn read_dir(p: &Beneath) -> io::Result<Vec<PathBuf>> {
    let dir = ddtree::walk::Dir::from_fd(OwnedFd::from(open(p, libc::O_RDONLY | libc::O_DIRECTORY, 0)?));
    Ok(dir.read_names()?.into_iter().map(|n| PathBuf::from(std::ffi::OsString::from_vec(n))).collect())
}

/// A directory and its missing parents, owner-only until they are finished.
pub(super) fn make_dir_all(p: &Beneath) -> io::Result<()> {
    if p.rel().is_empty() {
        return Ok(());
    }
    let made = At::new(p).and_then(|at| {
        // SAFETY: a valid descriptor and C string.
        check(unsafe { libc::mkdirat(at.fd(), at.name.as_ptr(), 0o700) })
    });
    match made {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound && p.dest.0.fd.is_some() => {
            if let Some(parent) = p.parent() {
                make_dir_all(&parent)?;
            }
            make_dir_all_once(p)
        }
        r => r,
    }
}

fn make_dir_all_once(p: &Beneath) -> io::Result<()> {
    let at = At::new(p)?;
    // SAFETY: a valid descriptor and C string.
    match check(unsafe { libc::mkdirat(at.fd(), at.name.as_ptr(), 0o700) }) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        r => r,
    }
}

/// Makes directory `name` (owner-only until it is finished) in `dir`, a
/// directory opened beneath DEST, and opens it (`O_PATH`; one there
/// already is taken, a symlink refused).
pub(super) fn make_dir_in(dir: RawFd, name: &OsStr) -> io::Result<OwnedFd> {
    let name = CString::new(name.as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))?;
    // SAFETY: a valid descriptor and C string.
    match check(unsafe { libc::mkdirat(dir, name.as_ptr(), 0o700) }) {
        Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    open_in(dir, &name, libc::O_PATH | libc::O_DIRECTORY, 0)
}

/// Sets the mode of the entry itself: a symlink at `p` is refused, never
/// followed.
pub(super) fn set_mode(p: &Beneath, mode: u32) -> io::Result<()> {
    let at = At::new(p)?;
    // SAFETY: a valid descriptor and C string.
    check(unsafe { libc::fchmodat(at.fd(), at.name.as_ptr(), mode as libc::mode_t, libc::AT_SYMLINK_NOFOLLOW) })
}

/// Sets the entry's own mtime (a symlink's own, never its target's).
pub(super) fn set_mtime(p: &Beneath, t: Time) -> io::Result<()> {
    let at = At::new(p)?;
    let times = mtime_only(t);
    // SAFETY: a valid descriptor, C string and two timespecs.
    check(unsafe { libc::utimensat(at.fd(), at.name.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) })
}

pub(super) fn read_link(p: &Beneath) -> io::Result<PathBuf> {
    let at = At::new(p)?;
    let target = ddtree::attrs::read_link(at.fd(), &at.name)?;
    Ok(PathBuf::from(std::ffi::OsString::from_vec(target)))
}

/// Makes a FIFO, socket or device node (`kind`: `S_IFIFO`, `S_IFSOCK`,
/// `S_IFBLK`, `S_IFCHR`; `rdev` for a device) at `p`.
pub(super) fn make_node(p: &Beneath, kind: libc::mode_t, perm: u32, rdev: u64) -> io::Result<()> {
    let at = At::new(p)?;
    // SAFETY: a valid descriptor and C string.
    check(unsafe { libc::mknodat(at.fd(), at.name.as_ptr(), kind | perm as libc::mode_t, rdev as libc::dev_t) })
}

/// A second name `to` for the entry at `from` (both beneath DEST; a
/// symlink at `from` is linked itself, not followed).
pub(super) fn hard_link(from: &Beneath, to: &Beneath) -> io::Result<()> {
    let (a, b) = (At::new(from)?, At::new(to)?);
    // SAFETY: valid descriptors and C strings.
    check(unsafe { libc::linkat(a.fd(), a.name.as_ptr(), b.fd(), b.name.as_ptr(), 0) })
}

/// Sets owner and group of the entry itself (a symlink's own).
pub(super) fn chown(p: &Beneath, uid: u32, gid: u32) -> io::Result<()> {
    let at = At::new(p)?;
    // SAFETY: a valid descriptor and C string.
    check(unsafe { libc::fchownat(at.fd(), at.name.as_ptr(), uid, gid, libc::AT_SYMLINK_NOFOLLOW) })
}

/// `f` given a path to `p` that xattr calls take (which have no `*at`
/// form; ours are the `l*` ones, which do not follow the last name):
/// through its directory's descriptor in /proc, opened beneath DEST.
pub(super) fn with_short_path<T>(p: &Beneath, f: impl FnOnce(&std::ffi::CStr) -> io::Result<T>) -> io::Result<T> {
    let at = At::new(p)?;
    f(&ddtree::attrs::at(at.fd(), at.name.as_bytes())?)
}

pub(super) fn symlink(target: &[u8], p: &Beneath) -> io::Result<()> {
    let at = At::new(p)?;
    let t = CString::new(target).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))?;
    // SAFETY: valid C strings and descriptor.
    check(unsafe { libc::symlinkat(t.as_ptr(), at.fd(), at.name.as_ptr()) })
}

/// `openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode)`: a name in a
/// directory already opened beneath DEST.
pub(super) fn open_in(dir: RawFd, name: &CString, flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    // SAFETY: a valid C string; a descriptor the call returns is ours.
    let fd =
        unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC, mode as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Access time left alone, modification time `t`.
pub(super) fn mtime_only(t: Time) -> [libc::timespec; 2] {
    [
        libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        libc::timespec { tv_sec: t.sec as libc::time_t, tv_nsec: t.nsec as libc::c_long },
    ]
}
