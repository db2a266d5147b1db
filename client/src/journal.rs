//! The resume journal: which blocks of `OUT.ddftp-part` are already good.
//!
//! It sits beside the part file as `OUT.ddftp-journal`, a small JSON object
//! rewritten atomically (temp file + rename) a few times a second while data
//! arrives, and once more when a transfer stops early. It only ever lists
//! blocks whose bytes were written before it was, so after the client is
//! killed at any point the part file holds at least what the journal says
//! (with `--sync`, also after a machine crash: the data is fsynced first).
//!
//! A journal is trusted only if it is intact (its own SHA-256 matches), the
//! part file has the right size, and it describes the same download: path,
//! size, and the SHA-256 the mirrors agreed on (a file changed at the source
//! has another). Anything else is refused with the reason.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

const VERSION: u32 = 2;

/// The journal for an output file.
pub fn journal_path(output: &Path) -> PathBuf {
    ddtree::scratch::beside(output, "", ".ddftp-journal")
}

/// The spare a journal is written into before it takes the journal's name.
fn spare_path(journal: &Path) -> PathBuf {
    ddtree::scratch::beside(journal, "", "-tmp")
}

/// Reserves `len` bytes of `f` on its file system (`fallocate`; where the
/// file system has none, only the length is set). Fails with `ENOSPC`
/// rather than later, in the middle of a write.
pub fn reserve(f: &File, len: u64) -> io::Result<()> {
    if len == 0 {
        return f.set_len(0);
    }
    // SAFETY: a valid descriptor; fallocate only changes the file.
    if unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, len as libc::off_t) } == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => f.set_len(len),
        _ => Err(e),
    }
}

/// Puts `from` in place of `to`: swapped with it where both exist and the
/// file system can (so `to`'s old space is reused), else renamed over it.
fn exchange(from: &Path, to: &Path) -> io::Result<()> {
    let c = |p: &Path| CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other);
    let (a, b) = (c(from)?, c(to)?);
    // SAFETY: valid C strings; the call only renames.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, a.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_EXCHANGE) };
    if r == 0 {
        return Ok(());
    }
    std::fs::rename(from, to)
}

/// What a journal records.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Journal {
    pub version: u32,
    pub path: String,
    pub size: u64,
    /// SHA-256 of the file being fetched (lowercase hex).
    pub sha256: String,
    pub block_size: u32,
    /// Completed blocks, as inclusive `[first, last]` ranges.
    pub done: Vec<(u64, u64)>,
}

#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Sealed {
    journal: Journal,
    /// SHA-256 of the JSON of `journal`.
    sha256: String,
}

/// Why a journal cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("resume journal {}: {source}", .file.display())]
    Io { file: PathBuf, source: io::Error },
    #[error("resume journal {} is damaged ({why}); rerun with --restart to start over", .file.display())]
    Corrupt { file: PathBuf, why: String },
    #[error("resume journal {} is for another download ({why}); rerun with --restart to start over", .file.display())]
    Mismatch { file: PathBuf, why: String },
}

/// What an interrupted run's part file is, as a journal is checked against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartFile {
    Len(u64),
    NotRegular,
    /// Not there, or not to be looked at: why.
    Unreadable(String),
}

impl PartFile {
    /// Looks at `part` (never through a symlink).
    pub fn look(part: &Path) -> PartFile {
        match std::fs::symlink_metadata(part) {
            Ok(m) if !m.is_file() => PartFile::NotRegular,
            Ok(m) => PartFile::Len(m.len()),
            Err(e) => PartFile::Unreadable(e.to_string()),
        }
    }
}

fn seal_hash(j: &Journal) -> String {
    format!("{:x}", Sha256::digest(serde_json::to_vec(j).expect("journal serialises")))
}

impl Journal {
    pub fn new(path: &str, size: u64, sha256: &str, block_size: u32) -> Journal {
        Journal { version: VERSION, path: path.to_string(), size, sha256: sha256.to_string(), block_size, done: vec![] }
    }

    /// Reads a journal; `Ok(None)` if there is none.
    pub fn load(file: &Path) -> Result<Option<Journal>, JournalError> {
        let text = match ddtree::scratch::read(file) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(JournalError::Io { file: file.into(), source }),
        };
        let corrupt = |why: String| JournalError::Corrupt { file: file.into(), why };
        let sealed: Sealed = serde_json::from_slice(&text).map_err(|e| corrupt(format!("not a journal: {e}")))?;
        if seal_hash(&sealed.journal) != sealed.sha256 {
            return Err(corrupt("its checksum does not match its contents".into()));
        }
        let j = sealed.journal;
        if j.version != VERSION {
            return Err(corrupt(format!("version {} (this ddftp writes {VERSION})", j.version)));
        }
        let blocks = j.size.div_ceil(u64::from(j.block_size.max(1)));
        if j.block_size == 0 || j.done.iter().any(|&(a, b)| a > b || b >= blocks) {
            return Err(corrupt("block ranges out of bounds".into()));
        }
        Ok(Some(j))
    }

    /// Checks that this journal describes the download about to run.
    /// `part`: the part file the data went to and what it is, if there is
    /// one (an archive's data is in the destination files).
    pub fn check(
        &self,
        file: &Path,
        path: &str,
        size: u64,
        sha256: &str,
        part: Option<(&Path, &PartFile)>,
    ) -> Result<(), JournalError> {
        let mismatch = |why: String| JournalError::Mismatch { file: file.into(), why };
        if self.path != path {
            return Err(mismatch(format!("it is for {:?}", self.path)));
        }
        if self.size != size {
            return Err(mismatch(format!("the file had {} bytes, the mirrors now say {size}", self.size)));
        }
        if self.sha256 != sha256 {
            return Err(mismatch(format!(
                "the file changed on the mirrors since: it was {}, now {}",
                described(&self.sha256),
                described(sha256)
            )));
        }
        let Some((part, what)) = part else { return Ok(()) };
        match what {
            PartFile::NotRegular => Err(mismatch(format!("{} is not a regular file", part.display()))),
            PartFile::Len(n) if *n == size => Ok(()),
            PartFile::Len(n) => Err(mismatch(format!("{} has {n} bytes, expected {size}", part.display()))),
            PartFile::Unreadable(e) => Err(mismatch(format!("{}: {e}", part.display()))),
        }
    }

    /// Writes the journal atomically, which survives the process dying at
    /// any point; with `durable`, fsynced too (survives a crash of the
    /// machine, when the data was fsynced before).
    ///
    /// A full disk must not stop the journal: the new contents go into a
    /// spare file whose space is reserved (padded with spaces, which the
    /// reader ignores, and grown only when the contents outgrow it), then
    /// the spare and the journal swap names (`RENAME_EXCHANGE`), so the old
    /// journal's space becomes the next spare. No save after the first two
    /// needs a new block from the file system.
    pub fn save(&self, file: &Path, durable: bool) -> io::Result<()> {
        let sealed = Sealed { journal: self.clone(), sha256: seal_hash(self) };
        let mut body = serde_json::to_vec(&sealed).expect("journal serialises");
        let tmp = spare_path(file);
        // The spare keeps its reserved space from save to save; one that is
        // not a plain file of ours (a planted symlink) is made anew.
        let f = ddtree::scratch::reopen_or_create(&tmp)?;
        let have = f.metadata()?.len() as usize;
        let len = if body.len() <= have { have } else { (2 * body.len()).next_multiple_of(4096) };
        if len > have {
            reserve(&f, len as u64)?;
        }
        body.resize(len, b' ');
        f.write_all_at(&body, 0)?;
        if durable {
            f.sync_data()?;
        }
        exchange(&tmp, file)
    }

    /// Removes a journal and its spare.
    pub fn remove(file: &Path) -> io::Result<()> {
        for f in [file.to_path_buf(), spare_path(file)] {
            match std::fs::remove_file(&f) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    /// Bytes covered by the completed ranges.
    pub fn done_bytes(&self) -> u64 {
        let bs = u64::from(self.block_size);
        self.done.iter().map(|&(a, b)| ((b + 1) * bs).min(self.size) - a * bs).sum()
    }
}

/// A journal's file identity in words: a SHA-256 (hex), or what HTTP
/// mirrors said of the file.
fn described(id: &str) -> String {
    match id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        true => format!("SHA-256 {id}"),
        false => id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_damage() {
        let dir = std::env::temp_dir().join(format!("ddftp-journal-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("j");
        let mut j = Journal::new("a/b", 1000, "ab12", 512);
        j.done = vec![(0, 0), (1, 1)];
        j.save(&file, true).unwrap();
        assert_eq!(Journal::load(&file).unwrap(), Some(j.clone()));
        assert_eq!(j.done_bytes(), 1000);
        let mut text = std::fs::read_to_string(&file).unwrap();
        text = text.replace("\"size\":1000", "\"size\":2000");
        std::fs::write(&file, text).unwrap();
        assert!(matches!(Journal::load(&file), Err(JournalError::Corrupt { .. })));
        std::fs::write(&file, b"\x00garbage").unwrap();
        assert!(matches!(Journal::load(&file), Err(JournalError::Corrupt { .. })));
        assert!(Journal::load(&dir.join("none")).unwrap().is_none());
        // Saved again and again, shorter and longer: the padding of a
        // longer save before is ignored.
        Journal::remove(&file).unwrap();
        j.done = (0..200).map(|i| (i, i)).collect();
        j.size = 512 * 200;
        j.save(&file, false).unwrap();
        j.done = vec![(0, 3)];
        j.save(&file, false).unwrap();
        assert_eq!(Journal::load(&file).unwrap(), Some(j.clone()));
        assert!(spare_path(&file).exists(), "the old journal is the next spare");
        Journal::remove(&file).unwrap();
        assert!(!file.exists() && !spare_path(&file).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
