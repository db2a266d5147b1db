//! rsync's `FILE NEWNAME`: a file SRC copied into a scratch directory
//! beside NEWNAME, then renamed to it. The scratch directory is made here
//! (never one found there) and held open: the file is linked in and
//! renamed out through that descriptor, so a local user who can write
//! NEWNAME's directory and swaps the scratch directory for a symlink
//! cannot make this run move a file from elsewhere.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The scratch directory beside NEWNAME, removed when dropped.
pub(super) struct Scratch {
    path: PathBuf,
    dir: File,
}

impl Scratch {
    /// Makes (0700, its parent as `mkdir -p` would) and opens the scratch
    /// directory beside `newname`.
    pub(super) fn beside(newname: &Path) -> io::Result<Scratch> {
        let name = newname.file_name().map(|n| n.as_encoded_bytes()).unwrap_or(b"dest");
        let side = ddtree::scratch::side_name(name, ".", &format!(".ddftp-new-{}", std::process::id()));
        let path = newname.with_file_name(std::ffi::OsStr::from_bytes(&side));
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let mut b = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(&path)?;
        let flags = libc::O_DIRECTORY | libc::O_NOFOLLOW;
        let dir = match std::fs::OpenOptions::new().read(true).custom_flags(flags).open(&path) {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_dir(&path);
                return Err(e);
            }
        };
        Ok(Scratch { path, dir })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Links `older` (a regular file, not followed if a symlink) in as
    /// `name`: the older version a rerun finds complete or updates.
    pub(super) fn link_in(&self, older: &Path, name: &str) -> io::Result<()> {
        let (from, to) = (c(older.as_os_str().as_bytes())?, c(name.as_bytes())?);
        // SAFETY: valid C strings; the scratch directory's descriptor is open.
        check(unsafe { libc::linkat(libc::AT_FDCWD, from.as_ptr(), self.dir.as_raw_fd(), to.as_ptr(), 0) })
    }

    /// Whether `name` in the scratch directory is a directory (SRC was
    /// one, not a file).
    pub(super) fn holds_dir(&self, name: &str) -> bool {
        let Ok(n) = c(name.as_bytes()) else { return false };
        // SAFETY: a zeroed stat is a valid out-parameter.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid descriptor, C string and out-parameter.
        let r = unsafe { libc::fstatat(self.dir.as_raw_fd(), n.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFDIR
    }

    /// Renames `name` out of the scratch directory to `to`.
    pub(super) fn rename_out(&self, name: &str, to: &Path) -> io::Result<()> {
        let (from, to) = (c(name.as_bytes())?, c(to.as_os_str().as_bytes())?);
        // SAFETY: valid C strings; the scratch directory's descriptor is open.
        check(unsafe { libc::renameat(self.dir.as_raw_fd(), from.as_ptr(), libc::AT_FDCWD, to.as_ptr()) })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // Not followed if it is a symlink now: only the link would go.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn c(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a name with a NUL byte"))
}

fn check(r: libc::c_int) -> io::Result<()> {
    match r {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}
