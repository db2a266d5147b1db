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

/// The alignment (and granule of length and offset) of an `O_DIRECT`
/// write: a page, which every file system's logical block divides.
const DIRECT_ALIGN: usize = 4096;

/// A part file written with `O_DIRECT` where a write is whole pages at a
/// page's offset (`get --direct`, as `dcp --direct`): a block goes from a
/// page-aligned copy of it to the disk, not through the page cache (no
/// copy into the cache, no dirty pages written back later, the cache left
/// to what else the host runs). The last, shorter block goes through the
/// cache, and so does everything once the file system refuses a direct
/// write. Reads go through the cache (they see the direct writes: the
/// kernel drops the cached pages a direct write covers).
#[derive(Debug)]
pub struct DirectWriter {
    /// The file through the cache (the same open file), for reads, the
    /// last block and what the file system refuses to take direct.
    cached: OneWriter,
    direct: File,
    refused: std::sync::atomic::AtomicBool,
}

impl DirectWriter {
    /// `file` with a descriptor of the same file opened `O_DIRECT` (through
    /// `/proc/self/fd`: the open file itself, never its name again), or
    /// why the file system does not take it.
    pub fn new(file: File) -> Result<DirectWriter, (File, io::Error)> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::OpenOptionsExt;
        let at = format!("/proc/self/fd/{}", file.as_raw_fd());
        match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_DIRECT).open(at) {
            Ok(direct) => Ok(DirectWriter { cached: OneWriter::new(file), direct, refused: false.into() }),
            Err(e) => Err((file, e)),
        }
    }
}

thread_local! {
    /// Each writing thread's page-aligned copy of the block it writes.
    static ALIGNED: std::cell::RefCell<Aligned> = const { std::cell::RefCell::new(Aligned(vec![])) };
}

/// Page-aligned bytes: a vector of pages.
struct Aligned(Vec<Page>);

#[repr(C, align(4096))]
#[derive(Clone, Copy)]
struct Page([u8; DIRECT_ALIGN]);

impl Aligned {
    /// `data` copied into whole pages (its length a multiple of a page).
    fn holding(&mut self, data: &[u8]) -> &[u8] {
        let pages = data.len() / DIRECT_ALIGN;
        if self.0.len() < pages {
            self.0.resize(pages, Page([0; DIRECT_ALIGN]));
        }
        // SAFETY: `Page` is plain bytes without padding (repr(C), one
        // array); the vector holds at least `pages` of them.
        let bytes = unsafe { std::slice::from_raw_parts_mut(self.0.as_mut_ptr().cast::<u8>(), pages * DIRECT_ALIGN) };
        bytes.copy_from_slice(data);
        bytes
    }
}

impl Store for DirectWriter {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        use std::sync::atomic::Ordering;
        let whole_pages = buf.len().is_multiple_of(DIRECT_ALIGN) && offset.is_multiple_of(DIRECT_ALIGN as u64);
        if whole_pages && !buf.is_empty() && !self.refused.load(Ordering::Relaxed) {
            let r = ALIGNED.with(|a| FileExt::write_all_at(&self.direct, a.borrow_mut().holding(buf), offset));
            match r {
                Ok(()) => return Ok(()),
                // A file system that takes the open but not the write:
                // the cache from now on, said once.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    if !self.refused.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            "--direct: the file system refused an O_DIRECT write ({e}): writing through the page cache"
                        );
                    }
                }
                Err(e) => return Err(e),
            }
        }
        self.cached.write_all_at(buf, offset)
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.cached.read_exact_at(buf, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.cached.sync_data()
    }
    fn as_file(&self) -> Option<&File> {
        self.cached.as_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_writes_land_whole_and_unaligned_ones_through_the_cache() {
        // On disk where the tests run (/var/tmp); tmpfs may refuse O_DIRECT.
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        let f = File::options().read(true).write(true).create(true).truncate(true).open(dir.path().join("p")).unwrap();
        f.set_len(3 * 65536 + 100).unwrap();
        let w = match DirectWriter::new(f) {
            Ok(w) => w,
            Err((_, e)) => panic!("this file system refuses O_DIRECT: {e}"),
        };
        let data: Vec<u8> = (0..3 * 65536 + 100).map(|i| (i % 251) as u8).collect();
        // Out of order, the shorter last block last.
        for at in [65536usize, 0, 2 * 65536] {
            w.write_all_at(&data[at..at + 65536], at as u64).unwrap();
        }
        w.write_all_at(&data[3 * 65536..], 3 * 65536).unwrap();
        let mut back = vec![0u8; data.len()];
        w.read_exact_at(&mut back, 0).unwrap();
        assert!(back == data);
        assert!(!w.refused.load(std::sync::atomic::Ordering::Relaxed), "the file system took the direct writes");
    }
}
