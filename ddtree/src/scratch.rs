//! Files a run writes under a name of its own beside their final name
//! (a download's part file, a journal's spare, a list or index being
//! written), and puts in place by a rename once whole: the one way ddftp
//! and ddftpd make them.
//!
//! Anyone who can write in the directory can plant a symlink (or a hard
//! link to a file of theirs) under such a name. So a new one is made with
//! `O_CREAT | O_EXCL | O_NOFOLLOW` after whatever stood there is removed
//! (a symlink itself, never its target); one reopened to go on (a resumed
//! download) must be a plain file with one link, opened `O_NOFOLLOW`.
//! The rename replaces the final name's own entry: a symlink there is
//! replaced, not written through.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use ddftp_proto::relpath::NAME_MAX;

/// The name `prefix NAME suffix` for a file beside `name`; a name too long
/// for that is replaced by a hash of it, so the result fits `NAME_MAX`.
pub fn side_name(name: &[u8], prefix: &str, suffix: &str) -> Vec<u8> {
    let mut out = prefix.as_bytes().to_vec();
    if prefix.len() + name.len() + suffix.len() <= NAME_MAX {
        out.extend_from_slice(name);
    } else {
        // A part of the name to read, and a hash for it to be its own.
        let hash = ddftp_proto::manifest::hex(&ddftp_proto::frame::seal(name));
        let keep = NAME_MAX - prefix.len() - suffix.len() - 25;
        let mut cut = keep.min(name.len());
        // Not in the middle of a UTF-8 character.
        while cut > 0 && cut < name.len() && name[cut] & 0xc0 == 0x80 {
            cut -= 1;
        }
        out.extend_from_slice(&name[..cut]);
        out.push(b'-');
        out.extend_from_slice(&hash.as_bytes()[..24]);
    }
    out.extend_from_slice(suffix.as_bytes());
    out
}

/// The path of the file beside `path` named [`side_name`].
pub fn beside(path: &Path, prefix: &str, suffix: &str) -> PathBuf {
    let name = path.file_name().map_or(&[][..], |n| n.as_bytes());
    path.with_file_name(OsStr::from_bytes(&side_name(name, prefix, suffix)))
}

/// A new, empty file at `path`, read-write: what stood under the name
/// goes first (a symlink itself; a directory is an error), and the create
/// fails rather than open anything another made meanwhile.
pub fn create(path: &Path) -> io::Result<File> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// The file at `path` a run made and another goes on with (a resumed
/// download's part file), read-write: never a symlink, and a plain file
/// with no other name (a hard link would write into someone else's).
pub fn reopen(path: &Path) -> io::Result<File> {
    let f = open_file(path, true)?;
    if f.metadata()?.nlink() != 1 {
        return Err(not_ours("a file with other names (hard links)"));
    }
    Ok(f)
}

/// [`reopen`] if `path` is a file of this kind already, else [`create`].
pub fn reopen_or_create(path: &Path) -> io::Result<File> {
    match reopen(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound || e.kind() == io::ErrorKind::InvalidData => create(path),
        r => r,
    }
}

/// The bytes of the file at `path`, never read through a symlink.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut v = vec![];
    io::Read::read_to_end(&mut open_file(path, false)?, &mut v)?;
    Ok(v)
}

/// The regular file at `path` (read-only, or read-write with `write`),
/// never opened through a symlink, nor a FIFO or device waited on.
fn open_file(path: &Path, write: bool) -> io::Result<File> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(write)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => not_ours("a symlink"),
            _ => e,
        })?;
    if !f.metadata()?.is_file() {
        return Err(not_ours("not a regular file"));
    }
    Ok(f)
}

fn not_ours(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("{what} stands under this name (not followed): remove it"))
}

/// A file written under a temporary name beside `path` and renamed to it
/// only once whole: a run that fails (a full disk) leaves no truncated
/// file that reads as a smaller one, and an older `path` stays as it was.
#[derive(Debug)]
pub struct Landing {
    tmp: PathBuf,
    path: PathBuf,
    landed: bool,
}

impl Landing {
    pub fn new(path: &Path) -> Landing {
        Landing { tmp: beside(path, ".", ".ddftp-tmp"), path: path.to_owned(), landed: false }
    }

    /// Where the file lands.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The temporary file, made new.
    pub fn create(&self) -> io::Result<File> {
        create(&self.tmp).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))
    }

    /// Renames the temporary file to `path`.
    pub fn land(mut self) -> io::Result<()> {
        std::fs::rename(&self.tmp, &self.path)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", self.path.display())))?;
        self.landed = true;
        Ok(())
    }
}

impl Drop for Landing {
    fn drop(&mut self) {
        if !self.landed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_planted_symlink_or_hard_link_is_never_written_through() {
        let t = tempfile::tempdir().unwrap();
        let victim = t.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let part = t.path().join("out.ddftp-part");
        std::os::unix::fs::symlink(&victim, &part).unwrap();
        let e = reopen(&part).unwrap_err();
        assert!(e.to_string().contains("symlink"), "{e}");
        assert!(read(&part).is_err());
        io::Write::write_all(&mut create(&part).unwrap(), b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(std::fs::read(&part).unwrap(), b"new");
        std::fs::remove_file(&part).unwrap();
        std::fs::hard_link(&victim, &part).unwrap();
        assert!(reopen(&part).unwrap_err().to_string().contains("hard links"));
        io::Write::write_all(&mut reopen_or_create(&part).unwrap(), b"x").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // A landing replaces a symlink at the final name, not its target.
        let out = t.path().join("list");
        std::os::unix::fs::symlink(&victim, &out).unwrap();
        let l = Landing::new(&out);
        io::Write::write_all(&mut l.create().unwrap(), b"list").unwrap();
        l.land().unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(std::fs::symlink_metadata(&out).unwrap().is_file());
    }

    #[test]
    fn side_names_fit_name_max_and_stay_apart() {
        assert_eq!(side_name(b"f", ".", ".ddftp-part"), b".f.ddftp-part");
        let long = vec![b'a'; 255];
        let mut other = long.clone();
        other[254] = b'b';
        let (a, b) = (side_name(&long, ".", ".ddftp-part"), side_name(&other, ".", ".ddftp-part"));
        assert!(a.len() <= NAME_MAX && b.len() <= NAME_MAX);
        assert_ne!(a, b);
        let mut utf = "é".repeat(127).into_bytes();
        utf.push(b'x');
        assert!(std::str::from_utf8(&side_name(&utf, "", ".ddftp-journal-tmp")).is_ok());
    }
}
