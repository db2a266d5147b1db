//! File-system calls on paths of any length.
//!
//! The kernel takes at most `PATH_MAX` (4,096) bytes of path in one call;
//! a tree can be deeper. Each call here splits its path into the
//! directory and the last name: a short path goes to the `*at` call as
//! it is (relative to the working directory, as std's calls do), a long
//! one has its directory opened a piece at a time
//! ([`ddtree::walk::open_deep`]) and the name made beneath it.

use std::ffi::CString;
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use ddtree::list::Time;

/// Bytes of path handed to one call as they are.
const SHORT: usize = 4000;

/// Where a path's last name is: its directory (the working directory's
/// `AT_FDCWD` for a short path, given whole as `name`) and the name.
struct At {
    dir: Option<OwnedFd>,
    name: CString,
}

impl At {
    fn new(path: &Path) -> io::Result<At> {
        let b = path.as_os_str().as_bytes();
        let c = |s: &[u8]| CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"));
        if b.len() <= SHORT {
            return Ok(At { dir: None, name: c(b)? });
        }
        let i = b.iter().rposition(|&ch| ch == b'/').filter(|&i| i > 0).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "a path component longer than the kernel allows")
        })?;
        let dir = ddtree::walk::open_deep(libc::AT_FDCWD, &b[..i], libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)?;
        Ok(At { dir: Some(dir), name: c(&b[i + 1..])? })
    }

    fn fd(&self) -> libc::c_int {
        self.dir.as_ref().map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd)
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `openat` of `path` with `flags` (`O_CLOEXEC` added) and `mode`.
pub(super) fn open(path: &Path, flags: libc::c_int, mode: u32) -> io::Result<File> {
    let at = At::new(path)?;
    // SAFETY: a valid directory descriptor (or AT_FDCWD) and C string; the
    // descriptor returned is ours alone.
    let fd = unsafe { libc::openat(at.fd(), at.name.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) };
    check(fd)?;
    // SAFETY: just opened, owned by nobody else.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// A directory kept open while the entries looked up in it share it:
/// `fstatat` of a name in it costs the kernel one lookup, where `lstat`
/// of a full path walks every component again (most of a resync's time).
#[derive(Default)]
pub(super) struct InDir {
    dir: Option<(PathBuf, Option<File>)>,
}

/// What `lstat` says of a path: what the archive compares.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stat {
    pub mode: u32,
    pub size: u64,
    pub mtime: i64,
    pub mtime_nsec: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Stat {
    pub fn is_file(&self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }
}

impl InDir {
    /// `lstat` of `dest/rel`: through its directory's descriptor, opened
    /// once for every entry of that directory in a row.
    pub(super) fn lstat(&mut self, dest: &Path, rel: &Path) -> io::Result<Stat> {
        let (Some(parent), Some(name)) = (rel.parent(), rel.file_name()) else {
            return symlink_metadata(&dest.join(rel)).map(|m| stat_of(&m));
        };
        if self.dir.as_ref().is_none_or(|(p, _)| p != parent) {
            let fd = open(&dest.join(parent), libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW, 0).ok();
            self.dir = Some((parent.to_path_buf(), fd));
        }
        let Some((_, Some(dir))) = &self.dir else { return symlink_metadata(&dest.join(rel)).map(|m| stat_of(&m)) };
        let name = CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a valid descriptor, C string and a stat buffer to fill.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        check(unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) })?;
        Ok(Stat {
            mode: st.st_mode,
            size: st.st_size as u64,
            mtime: st.st_mtime,
            mtime_nsec: st.st_mtime_nsec as u32,
            uid: st.st_uid,
            gid: st.st_gid,
        })
    }
}

fn stat_of(m: &Metadata) -> Stat {
    use std::os::unix::fs::MetadataExt;
    Stat {
        mode: m.mode(),
        size: m.size(),
        mtime: m.mtime(),
        mtime_nsec: m.mtime_nsec() as u32,
        uid: m.uid(),
        gid: m.gid(),
    }
}

/// The metadata of `path` itself (a symlink's own).
pub(super) fn symlink_metadata(path: &Path) -> io::Result<Metadata> {
    if path.as_os_str().len() <= SHORT {
        return path.symlink_metadata();
    }
    open(path, libc::O_PATH | libc::O_NOFOLLOW, 0)?.metadata()
}

pub(super) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    let (a, b) = (At::new(from)?, At::new(to)?);
    // SAFETY: valid descriptors and C strings.
    check(unsafe { libc::renameat(a.fd(), a.name.as_ptr(), b.fd(), b.name.as_ptr()) })
}

pub(super) fn remove_file(path: &Path) -> io::Result<()> {
    let at = At::new(path)?;
    // SAFETY: a valid descriptor and C string.
    check(unsafe { libc::unlinkat(at.fd(), at.name.as_ptr(), 0) })
}

/// Removes whatever is at `path` (a directory with all it holds).
pub(super) fn remove_any(path: &Path) -> io::Result<()> {
    match symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            for e in read_dir(path)? {
                remove_any(&path.join(e))?;
            }
            let at = At::new(path)?;
            // SAFETY: a valid descriptor and C string.
            check(unsafe { libc::unlinkat(at.fd(), at.name.as_ptr(), libc::AT_REMOVEDIR) })
        }
        Ok(_) => remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The names in directory `path`.
pub(super) fn read_dir(path: &Path) -> io::Result<Vec<PathBuf>> {
    if path.as_os_str().len() <= SHORT {
        return std::fs::read_dir(path)?.map(|e| e.map(|e| PathBuf::from(e.file_name()))).collect();
    }
    let dir = open(path, libc::O_RDONLY | libc::O_DIRECTORY, 0)?;
    // Through /proc: std reads a directory only by path, and this one's is
    // short.
    let proc = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    std::fs::read_dir(proc)?.map(|e| e.map(|e| PathBuf::from(e.file_name()))).collect()
}

/// A directory and its missing parents, owner-only until they are finished.
pub(super) fn make_dir_all(path: &Path) -> io::Result<()> {
    if path.as_os_str().len() <= SHORT {
        return std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700).create(path);
    }
    let made = At::new(path).and_then(|at| {
        // SAFETY: a valid descriptor and C string.
        check(unsafe { libc::mkdirat(at.fd(), at.name.as_ptr(), 0o700) })
    });
    match made {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            make_dir_all(path.parent().unwrap_or(Path::new("/")))?;
            make_dir_all(path)
        }
        r => r,
    }
}

pub(super) fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    let at = At::new(path)?;
    // SAFETY: a valid descriptor and C string.
    check(unsafe { libc::fchmodat(at.fd(), at.name.as_ptr(), mode as libc::mode_t, 0) })
}

/// Sets `path`'s mtime (`flags`: `AT_SYMLINK_NOFOLLOW` for a symlink's own).
pub(super) fn set_mtime(path: &Path, t: Time, flags: libc::c_int) -> io::Result<()> {
    let at = At::new(path)?;
    let times = super::tree::mtime_only(t);
    // SAFETY: a valid descriptor, C string and two timespecs.
    check(unsafe { libc::utimensat(at.fd(), at.name.as_ptr(), times.as_ptr(), flags) })
}

pub(super) fn read_link(path: &Path) -> io::Result<PathBuf> {
    let at = At::new(path)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat writes at most buf.len() bytes into buf.
    let n = unsafe { libc::readlinkat(at.fd(), at.name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(PathBuf::from(std::ffi::OsString::from_vec(buf)))
}

/// Makes a FIFO, socket or device node (`kind`: `S_IFIFO`, `S_IFSOCK`,
/// `S_IFBLK`, `S_IFCHR`; `rdev` for a device) at `path`.
pub(super) fn make_node(path: &Path, kind: libc::mode_t, perm: u32, rdev: u64) -> io::Result<()> {
    let at = At::new(path)?;
    // SAFETY: a valid descriptor and C string.
    check(unsafe { libc::mknodat(at.fd(), at.name.as_ptr(), kind | perm as libc::mode_t, rdev as libc::dev_t) })
}

/// A second name `to` for the file at `from`.
pub(super) fn hard_link(from: &Path, to: &Path) -> io::Result<()> {
    let (a, b) = (At::new(from)?, At::new(to)?);
    // SAFETY: valid descriptors and C strings.
    check(unsafe { libc::linkat(a.fd(), a.name.as_ptr(), b.fd(), b.name.as_ptr(), 0) })
}

/// Sets owner and group of `path` itself (a symlink's own).
pub(super) fn chown(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    let at = At::new(path)?;
    // SAFETY: a valid descriptor and C string.
    check(unsafe { libc::fchownat(at.fd(), at.name.as_ptr(), uid, gid, libc::AT_SYMLINK_NOFOLLOW) })
}

/// `f` given a path to `path` that xattr calls take (which have no `*at`
/// form): as it is if short, else through its open directory in /proc.
pub(super) fn with_short_path<T>(path: &Path, f: impl FnOnce(&std::ffi::CStr) -> io::Result<T>) -> io::Result<T> {
    let at = At::new(path)?;
    match &at.dir {
        None => f(&at.name),
        Some(d) => f(&ddtree::attrs::at(d.as_raw_fd(), at.name.as_bytes())?),
    }
}

pub(super) fn symlink(target: &[u8], path: &Path) -> io::Result<()> {
    let at = At::new(path)?;
    let t = CString::new(target).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte"))?;
    // SAFETY: valid C strings and descriptor.
    check(unsafe { libc::symlinkat(t.as_ptr(), at.fd(), at.name.as_ptr()) })
}
