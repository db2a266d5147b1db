//! The part file made before the transfer starts, for a download onto an
//! older output: the chunks found in the output are written into it as
//! they are found and hashed (one read of the output, one hash, one write;
//! not read back). Until the transfer takes it, it is removed if the run
//! stops: nothing is left beside the output but a part file with a journal.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// A new part file, removed when dropped unless [`EarlyPart::take`]n.
#[derive(Debug)]
pub(super) struct EarlyPart {
    file: Option<File>,
    path: PathBuf,
    /// Per chunk of the new version: written in the file already.
    pub(super) chunks: Vec<bool>,
}

impl EarlyPart {
    /// The part file `path`, made new and empty (what stood there goes
    /// first, never followed). Its room is reserved when the transfer
    /// takes it (a file that turns out to be the output's twin costs
    /// nothing).
    pub(super) fn create(path: &Path) -> io::Result<EarlyPart> {
        let file = ddtree::scratch::create(path)?;
        Ok(EarlyPart { file: Some(file), path: path.to_path_buf(), chunks: vec![] })
    }

    pub(super) fn file(&self) -> &File {
        self.file.as_ref().expect("an early part holds its file until taken")
    }

    /// The part file, for the transfer to go on with.
    pub(super) fn take(mut self) -> File {
        self.file.take().expect("an early part holds its file until taken")
    }
}

impl Drop for EarlyPart {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_early_part_not_taken_leaves_nothing_and_one_taken_stays() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.ddftp-part");
        drop(EarlyPart::create(&p).unwrap());
        assert!(!p.exists());
        let f = EarlyPart::create(&p).unwrap().take();
        assert!(f.metadata().unwrap().is_file());
        assert!(p.exists());
    }

    #[test]
    fn a_symlink_in_the_way_is_replaced_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, b"keep").unwrap();
        let p = dir.path().join("f.ddftp-part");
        std::os::unix::fs::symlink(&target, &p).unwrap();
        let f = EarlyPart::create(&p).unwrap().take();
        assert_eq!(f.metadata().unwrap().len(), 0);
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(&p).unwrap().file_type().is_symlink());
    }
}
