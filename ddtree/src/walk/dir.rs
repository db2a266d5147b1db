//! One directory, read and lstat'ed the way the kernel hands it out.
//!
//! A walk's time is almost all in the kernel: a `getdents64` per few
//! hundred entries and an lstat per entry. What is left for us to waste is
//! around those calls, and `std::fs::read_dir` spends it: a name
//! allocation and a reference count per entry, an `fstat` per directory
//! (glibc's `opendir`), and a conversion of every lstat. Here the entries
//! are read into the worker's own buffer with `getdents64`, each name is
//! passed to `fstatat` where it lies in that buffer (the kernel writes it
//! NUL-terminated), and nothing is allocated per entry.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Bytes of directory entries one `getdents64` may return (glibc's
/// `readdir` asks for as much).
pub const READ_SIZE: usize = 32 * 1024;

/// An open directory.
pub struct Dir {
    fd: OwnedFd,
}

impl Dir {
    /// Opens the directory at `path` (NUL-terminated). A symlink put in
    /// its place since it was lstat'ed is refused, not followed.
    ///
    /// A path longer than the kernel takes in one call (`PATH_MAX`) is
    /// opened a piece at a time, each piece relative to the directory the
    /// one before opened: a tree of any depth can be walked.
    pub fn open(path: &CStr) -> io::Result<Dir> {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        Ok(Dir { fd: open_deep(libc::AT_FDCWD, path.to_bytes(), flags)? })
    }

    /// Reads the next entries into `buf`: the bytes filled, 0 at the end.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, self.fd.as_raw_fd(), buf.as_mut_ptr(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// A directory already open (for reading) as `fd`.
    pub fn from_fd(fd: OwnedFd) -> Dir {
        Dir { fd }
    }

    /// Every name in it (`.` and `..` left out), read to the end.
    pub fn read_names(&self) -> io::Result<Vec<Vec<u8>>> {
        let (mut buf, mut out) = (vec![0u8; READ_SIZE], vec![]);
        loop {
            match self.read(&mut buf)? {
                0 => return Ok(out),
                n => out.extend(names(&buf[..n]).map(|c| c.to_bytes().to_vec())),
            }
        }
    }

    /// The descriptor (entries are named relative to it).
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }

    /// lstat of the entry `name` in this directory.
    pub fn lstat(&self, name: &CStr) -> io::Result<libc::stat> {
        // SAFETY: `st` is plain data the call fills; `name` is NUL-terminated.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let r = unsafe { libc::fstatat(self.fd.as_raw_fd(), name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }
}

/// `openat(at, name, flags | O_CLOEXEC)`.
pub fn open_at(at: libc::c_int, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a valid C string; a descriptor the call returns is ours.
    let fd = unsafe { libc::openat(at, name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Bytes of path one `openat` is given at most (under `PATH_MAX`, 4096).
const PIECE: usize = 4000;

/// `openat(at, path, flags)` for a path of any length: a long one is
/// opened in pieces of whole components, each (but the last, opened with
/// `flags`) as an `O_PATH` directory the next is opened beneath.
pub fn open_deep(at: libc::c_int, path: &[u8], flags: libc::c_int) -> io::Result<OwnedFd> {
    let mut held: Option<OwnedFd> = None;
    let mut rest = path;
    loop {
        let last = rest.len() <= PIECE;
        let cut = match last {
            true => rest.len(),
            // A piece ends at a '/' (a name is at most 255 bytes, so one is
            // near); a leading '/' stays with the first piece.
            false => rest[..PIECE].iter().rposition(|&c| c == b'/').filter(|&i| i > 0).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, "a path component longer than the kernel allows")
            })?,
        };
        let piece = std::ffi::CString::new(&rest[..cut])
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
        let f = if last { flags } else { libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC };
        let dir = held.as_ref().map_or(at, |d| d.as_raw_fd());
        // SAFETY: a valid directory descriptor (or AT_FDCWD) and a C string;
        // the fd returned is ours alone.
        let fd = unsafe { libc::openat(dir, piece.as_ptr(), f) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just opened and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        if last {
            return Ok(fd);
        }
        held = Some(fd);
        rest = &rest[cut..];
        while rest.first() == Some(&b'/') {
            rest = &rest[1..];
        }
    }
}

/// The names in what one [`Dir::read`] filled (`.` and `..` left out).
///
/// A `linux_dirent64` record: inode (8 bytes), offset (8), record length
/// (2), type (1), then the name, NUL-terminated and padded to the record
/// length. A record that does not fit what was read ends the iteration.
pub fn names(buf: &[u8]) -> impl Iterator<Item = &CStr> {
    const NAME_AT: usize = 19;
    let mut at = 0;
    std::iter::from_fn(move || loop {
        let rec = buf.get(at..)?;
        let len = usize::from(u16::from_ne_bytes([*rec.get(16)?, *rec.get(17)?]));
        let rec = rec.get(..len).filter(|_| len > NAME_AT)?;
        at += len;
        let name = CStr::from_bytes_until_nul(&rec[NAME_AT..]).ok()?;
        if !matches!(name.to_bytes(), b"." | b"..") {
            return Some(name);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;

    fn c(p: &std::path::Path) -> CString {
        CString::new(p.as_os_str().as_bytes()).unwrap()
    }

    #[test]
    fn reads_every_name_with_a_small_buffer_and_lstats_without_following() {
        let d = tempfile::tempdir().unwrap();
        let mut want = vec![b"a b".to_vec(), b"new\nline".to_vec(), vec![b'x', 0xff, b'y'], b"link".to_vec()];
        for n in &want[..3] {
            std::fs::write(d.path().join(std::ffi::OsStr::from_bytes(n)), n).unwrap();
        }
        std::os::unix::fs::symlink("/nowhere", d.path().join("link")).unwrap();
        for i in 0..300 {
            let n = format!("file-with-a-longish-name-{i:04}");
            std::fs::write(d.path().join(&n), b"").unwrap();
            want.push(n.into_bytes());
        }
        let dir = Dir::open(&c(d.path())).unwrap();
        // Small enough that the names take several reads.
        let mut buf = vec![0u8; 1024];
        let mut got = vec![];
        loop {
            let n = dir.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend(names(&buf[..n]).map(|s| s.to_bytes().to_vec()));
        }
        want.sort();
        got.sort();
        assert_eq!(got, want);
        let st = dir.lstat(c"link").unwrap();
        assert_eq!(st.st_mode & libc::S_IFMT, libc::S_IFLNK);
        assert_eq!(st.st_size, "/nowhere".len() as i64);
        assert_eq!(dir.lstat(c"a b").unwrap().st_size, 3);
        assert_eq!(dir.lstat(c"gone").unwrap_err().kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn a_symlink_to_a_directory_is_not_opened() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", d.path().join("link")).unwrap();
        assert!(Dir::open(&c(&d.path().join("real"))).is_ok());
        assert!(Dir::open(&c(&d.path().join("link"))).is_err());
    }

    #[test]
    fn a_cut_record_ends_the_names() {
        // One record for "ab": 19 bytes of header, the name, NUL, padded to 24.
        let mut rec = vec![0u8; 24];
        rec[16..18].copy_from_slice(&24u16.to_ne_bytes());
        rec[19..21].copy_from_slice(b"ab");
        let two = [rec.clone(), rec.clone()].concat();
        assert_eq!(names(&two).count(), 2);
        assert_eq!(names(&two[..30]).count(), 1);
        let mut zero = rec.clone();
        zero[16..18].copy_from_slice(&0u16.to_ne_bytes());
        assert_eq!(names(&zero).count(), 0, "a zero length does not loop");
    }
}
