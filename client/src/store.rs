//! Where a transfer's bytes land: one part file for `get`, or the many
//! files of an archive (see [`crate::archive`]). The engine only writes and
//! reads back (for the running SHA-256) at offsets of one linear range.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

pub trait Store: Send + Sync + std::fmt::Debug {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
    /// Makes what was written durable (`--sync`).
    fn sync_data(&self) -> io::Result<()>;
    /// `mirror` could not read entry `index` of a bundle: its bytes in the
    /// next block are not its own and must not be written. Only a store
    /// of many entries has entries.
    fn unreadable(&self, index: u64, why: &str, mirror: &str) -> io::Result<()> {
        let _ = mirror;
        Err(io::Error::other(format!("entry {index} unreadable ({why}), but this range has no entries")))
    }
    /// The one file it writes, if it is one (a part file): what `--share`
    /// serves, by this descriptor and never by its name again.
    fn as_file(&self) -> Option<&File> {
        None
    }
}

/// A part file that several connections write at once, one `pwrite` at a
/// time. The kernel serializes buffered writes to one file anyway (its
/// inode lock); waiting here sleeps, where waiting for that lock spins
/// while its owner copies (about a tenth of a fast download's CPU).
#[derive(Debug)]
pub struct OneWriter {
    file: File,
    writing: std::sync::Mutex<()>,
}

impl OneWriter {
    pub fn new(file: File) -> OneWriter {
        OneWriter { file, writing: std::sync::Mutex::new(()) }
    }
}

impl Store for OneWriter {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        // A writer that panicked left nothing half done that the lock
        // guards: the bytes are checked again wherever they are read.
        let _one = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        FileExt::write_all_at(&self.file, buf, offset)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.file, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn as_file(&self) -> Option<&File> {
        Some(&self.file)
    }
}

impl Store for File {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        FileExt::write_all_at(self, buf, offset)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        File::sync_data(self)
    }
    fn as_file(&self) -> Option<&File> {
        Some(self)
    }
}
