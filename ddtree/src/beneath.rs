//! Opening a path beneath a directory descriptor, following no symlink
//! anywhere on the way (`openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`): the one way ddftpd reads below its root and
//! ddftp writes below DEST. A symlink in the middle or at the end, `..`
//! or an absolute path is refused by the kernel (`ELOOP`, `EXDEV`), so
//! nothing a list, a mirror or a local user puts in the tree can send
//! the call elsewhere.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Bytes of path one `openat2` is given at most (under `PATH_MAX`).
pub const PIECE: usize = 4000;

/// Opens `path` (relative) beneath `root` with `flags` (`O_CLOEXEC` is
/// added) and `mode`, at any depth: a path longer than one call takes is
/// opened a piece of whole names at a time, each beneath the directory the
/// one before opened. With `O_PATH | O_NOFOLLOW` a final symlink is opened
/// itself; otherwise a final symlink is refused (`ELOOP`).
pub fn open(root: RawFd, path: &[u8], flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let mut held: Option<OwnedFd> = None;
    let mut rest = path;
    loop {
        let at = held.as_ref().map_or(root, AsRawFd::as_raw_fd);
        if rest.len() <= PIECE {
            return open_once(at, rest, flags, mode);
        }
        let cut = rest[..PIECE].iter().rposition(|&c| c == b'/').filter(|&i| i > 0);
        let Some(cut) = cut else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "a path component longer than the kernel allows"));
        };
        held = Some(open_once(at, &rest[..cut], libc::O_PATH | libc::O_DIRECTORY, 0)?);
        rest = &rest[cut + 1..];
    }
}

/// Makes the directories of `rel` (relative; plain names) beneath `root`
/// that are missing, with `mode` (less the umask), as `mkdir -p` does but
/// following no symlink: a symlink (or anything not a directory) on the
/// way is refused. Returns the last one, open (`O_PATH`).
pub fn make_dirs(root: RawFd, rel: &[u8], mode: u32) -> io::Result<OwnedFd> {
    let mut held = open_once(root, b".", libc::O_PATH | libc::O_DIRECTORY, 0)?;
    for name in rel.split(|&c| c == b'/').filter(|n| !n.is_empty() && *n != b".") {
        if name == b".." {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "`..` in a directory to make"));
        }
        let c =
            CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
        // SAFETY: a valid directory descriptor and C string.
        if unsafe { libc::mkdirat(held.as_raw_fd(), c.as_ptr(), mode as libc::mode_t) } != 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::AlreadyExists {
                return Err(e);
            }
        }
        held = open_once(held.as_raw_fd(), name, libc::O_PATH | libc::O_DIRECTORY, 0)?;
    }
    Ok(held)
}

/// Opens `path` (at most `PATH_MAX`) beneath `root` following no symlink.
fn open_once(root: RawFd, path: &[u8], flags: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    let path = CString::new(path).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // SAFETY: open_how is plain data; zeroed is "no flags".
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    if flags & (libc::O_CREAT | libc::O_TMPFILE) != 0 {
        how.mode = u64::from(mode);
    }
    how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_SYMLINKS | libc::RESOLVE_NO_MAGICLINKS;
    // SAFETY: a valid directory descriptor, C string and open_how of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root,
            path.as_ptr(),
            &how as *const libc::open_how,
            size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn no_symlink_and_no_dotdot_is_followed_at_any_depth() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), b"s").unwrap();
        let root = t.path().join("root");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/f"), b"f").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("l")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("d/s")).unwrap();
        let r = std::fs::File::open(&root).unwrap();
        let fd = r.as_raw_fd();
        assert!(open(fd, b"d/f", libc::O_RDONLY, 0).is_ok());
        for bad in [&b"l/secret"[..], b"d/s", b"../root/d/f", b"d/../../x"] {
            let e = open(fd, bad, libc::O_RDONLY, 0).unwrap_err();
            assert!(matches!(e.raw_os_error(), Some(libc::ELOOP | libc::EXDEV)), "{bad:?}: {e}");
        }
        let abs = outside.path().join("secret");
        assert!(open(fd, abs.as_os_str().as_bytes(), libc::O_RDONLY, 0).is_err());
        // A final symlink itself, with O_PATH | O_NOFOLLOW.
        assert!(open(fd, b"d/s", libc::O_PATH | libc::O_NOFOLLOW, 0).is_ok());
        // O_CREAT does not follow a final symlink either.
        let e = open(fd, b"d/s", libc::O_WRONLY | libc::O_CREAT, 0o600).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP));
        // Past PATH_MAX, through a symlink deep down: refused.
        let mut deep = Vec::new();
        let mut p = root.join("d");
        for _ in 0..40 {
            let name = "n".repeat(200);
            p.push(&name);
            deep.extend_from_slice(name.as_bytes());
            deep.push(b'/');
        }
        std::fs::create_dir_all(p.parent().unwrap()).ok();
        let made = ddtree_mkdir_deep(&root.join("d"), &deep);
        assert!(made);
        let mut via = b"d/".to_vec();
        via.extend_from_slice(&deep);
        via.extend_from_slice(b"f");
        assert!(open(fd, &via, libc::O_WRONLY | libc::O_CREAT, 0o600).is_ok());
        let mut bad = b"d/".to_vec();
        bad.extend_from_slice(&deep);
        bad.extend_from_slice(b"../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../../l/secret");
        assert!(open(fd, &bad, libc::O_RDONLY, 0).is_err());
    }

    #[test]
    fn make_dirs_makes_what_is_missing_and_refuses_a_symlink_on_the_way() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("a")).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("a/l")).unwrap();
        let r = std::fs::File::open(t.path()).unwrap();
        assert!(make_dirs(r.as_raw_fd(), b"a/b/./c/", 0o755).is_ok());
        assert!(t.path().join("a/b/c").is_dir());
        for bad in [&b"a/l/x"[..], b"a/l", b"a/../../x"] {
            assert!(make_dirs(r.as_raw_fd(), bad, 0o755).is_err(), "{bad:?}");
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "nothing made through the symlink");
    }

    /// Makes `deep` (names ending in '/') below `base` a piece at a time.
    fn ddtree_mkdir_deep(base: &std::path::Path, deep: &[u8]) -> bool {
        let mut dir = std::fs::File::open(base).unwrap();
        for name in deep.split(|&c| c == b'/').filter(|n| !n.is_empty()) {
            let c = CString::new(name).unwrap();
            // SAFETY: a valid descriptor and C string.
            unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), 0o700) };
            let fd = open(dir.as_raw_fd(), name, libc::O_RDONLY | libc::O_DIRECTORY, 0).unwrap();
            dir = std::fs::File::from(fd);
        }
        true
    }
}
