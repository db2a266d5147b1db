//! Background indexing: files published while the server runs get their
//! digests before a client asks, so the first `Stat` of a new file is a
//! lookup, not a read of the whole file.
//!
//! inotify watches every directory under the root (not the index
//! directory); a file closed after writing, or moved in, is indexed
//! through [`Root::open_file`](crate::root::Root::open_file), so a path
//! the event names is confined exactly as a client's would be. A new
//! directory is watched and its files indexed. inotify can miss events
//! (its queue overflows, `max_user_watches` runs out, a network file
//! system does not report them): a periodic rescan of the whole tree
//! (`ddftpd index`'s walk, which costs one small read per current file)
//! catches whatever it missed.
//!
//! Every directory is opened and listed beneath the root's descriptor,
//! following no symlink ([`ddtree::beneath`]), and watched through that
//! descriptor: a directory moved out of the root and replaced by a symlink
//! leads nowhere outside. A directory moved out is no longer watched; one
//! renamed within the root keeps its watches under its new name (no walk
//! again). At most [`MAX_WATCHES`] are held, and running out is told once.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::root::PathError;
use crate::shared::Shared;

/// Files waiting to be indexed; past it events are dropped (the rescan
/// finds those files).
const QUEUED: usize = 4096;

/// Starts indexing new and changed files in the background: with `watch`
/// an inotify thread (if inotify is available) and, with `rescan`, a
/// rescan of the whole tree that often. Runs until the process ends.
pub fn spawn(shared: Arc<Shared>, watch: bool, rescan: Option<Duration>) {
    if watch {
        let (tx, rx) = mpsc::channel::<String>(QUEUED);
        tokio::spawn(index_queued(shared.clone(), rx));
        let root = shared.root.dir().to_path_buf();
        let skip = shared.index.dir().to_path_buf();
        match Watches::new(&root, &skip) {
            Ok(w) => {
                let _ = std::thread::Builder::new().name("ddftpd-inotify".into()).spawn(move || w.run(&tx));
            }
            Err(e) => tracing::warn!("cannot watch {} for new files ({e}); relying on the rescan", root.display()),
        }
    }
    if let Some(every) = rescan {
        tokio::spawn(rescan_every(shared, every));
    }
}

/// Indexes each queued path (relative to the root), one at a time.
async fn index_queued(shared: Arc<Shared>, mut rx: mpsc::Receiver<String>) {
    while let Some(rel) = rx.recv().await {
        let file = match shared.root.open_file(&rel) {
            Ok(f) => Arc::new(f),
            // Gone again, a symlink, not a regular file: nothing to index.
            Err(PathError::NotFound(_) | PathError::NotAFile(_) | PathError::Forbidden(..)) => continue,
            Err(e) => {
                tracing::debug!("not indexed: {e}");
                continue;
            }
        };
        match shared.index.digests(file).await {
            Ok(_) => {
                shared.metrics.indexed_in_background();
                tracing::debug!(path = rel, "indexed");
            }
            Err(e) => tracing::warn!(path = rel, "cannot index: {e}"),
        }
    }
}

async fn rescan_every(shared: Arc<Shared>, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let (root, index) = (shared.root.dir().to_path_buf(), shared.index.dir().to_path_buf());
        let Ok(s) = tokio::task::spawn_blocking(move || crate::indexer::index_tree(&root, &index, 1)).await else {
            continue;
        };
        let new = s.files - s.current;
        if new > 0 {
            tracing::info!("rescan indexed {new} files ({} already current)", s.current);
        }
        for e in s.errors.iter().take(5) {
            tracing::warn!("rescan: {e}");
        }
    }
}

/// An inotify instance and what each of its watches is, relative to the root.
struct Watches {
    fd: std::os::fd::OwnedFd,
    /// The root, open: every directory is reached beneath it.
    root_fd: std::os::fd::OwnedFd,
    root: PathBuf,
    skip: PathBuf,
    dirs: HashMap<i32, PathBuf>,
    /// Running out of watches was told.
    told_full: bool,
}

/// The most directories watched; past it the rescan covers the rest.
const MAX_WATCHES: usize = 1 << 18;

/// (No `IN_DONT_FOLLOW`: a watch is added through `/proc/self/fd/N`, the
/// magic link to the directory already opened beneath the root.)
const DIR_EVENTS: u32 =
    libc::IN_CLOSE_WRITE | libc::IN_MOVED_TO | libc::IN_MOVED_FROM | libc::IN_CREATE | libc::IN_ONLYDIR;

impl Watches {
    fn new(root: &Path, skip: &Path) -> io::Result<Watches> {
        // SAFETY: inotify_init1 takes flags only; the result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor this function owns.
        let fd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
        let root_fd = std::fs::File::open(root)?.into();
        let mut w = Watches {
            fd,
            root_fd,
            root: root.to_path_buf(),
            skip: skip.to_path_buf(),
            dirs: HashMap::new(),
            told_full: false,
        };
        w.watch_tree(Path::new(""), None);
        Ok(w)
    }

    /// Watches `rel` and every directory below it, each opened beneath the
    /// root following no symlink; with `found`, queues the files already
    /// there (a directory moved in with its files). Directories that cannot
    /// be watched are left to the rescan.
    fn watch_tree(&mut self, rel: &Path, found: Option<&mpsc::Sender<String>>) {
        use std::os::fd::AsRawFd;
        let mut todo = vec![rel.to_path_buf()];
        while let Some(rel) = todo.pop() {
            if self.root.join(&rel) == self.skip {
                continue;
            }
            if self.dirs.len() >= MAX_WATCHES {
                self.full(&io::Error::other(format!("{MAX_WATCHES} directories watched already")));
                return;
            }
            let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW;
            let dir = match rel.as_os_str().is_empty() {
                true => ddtree::beneath::open(self.root_fd.as_raw_fd(), b".", flags, 0),
                false => ddtree::beneath::open(self.root_fd.as_raw_fd(), rel.as_os_str().as_bytes(), flags, 0),
            };
            // Gone, or a symlink now: nothing to watch there.
            let Ok(dir) = dir else { continue };
            let via = CString::new(format!("/proc/self/fd/{}", dir.as_raw_fd())).expect("no NUL");
            // SAFETY: a valid descriptor and a NUL-terminated path.
            let wd = unsafe { libc::inotify_add_watch(self.fd.as_raw_fd(), via.as_ptr(), DIR_EVENTS) };
            if wd < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::ENOSPC) | Some(libc::ENOMEM) => {
                        self.full(&e);
                        return;
                    }
                    _ => continue,
                }
            }
            self.dirs.insert(wd, rel.clone());
            let Ok(entries) = read_dir_fd(dir) else { continue };
            for (name, is_dir) in entries {
                let child = rel.join(OsStr::from_bytes(&name));
                match (is_dir, found) {
                    (true, _) => todo.push(child),
                    (false, Some(tx)) => queue(tx, &child),
                    (false, None) => {}
                }
            }
        }
    }

    /// No more watches can be held: told once; the rescan covers the rest.
    fn full(&mut self, e: &io::Error) {
        if !std::mem::replace(&mut self.told_full, true) {
            tracing::warn!("cannot watch more directories ({e}); the rescan covers the rest");
        }
    }

    /// `rel` and everything below it moved out of the root: no longer watched.
    fn unwatch_below(&mut self, rel: &Path) {
        use std::os::fd::AsRawFd;
        let gone: Vec<i32> = self.dirs.iter().filter(|(_, d)| d.starts_with(rel)).map(|(wd, _)| *wd).collect();
        for wd in gone {
            self.dirs.remove(&wd);
            // SAFETY: a watch of our own descriptor.
            unsafe { libc::inotify_rm_watch(self.fd.as_raw_fd(), wd) };
        }
    }

    /// `from` was renamed `to` within the root: its watches stay, under the new names.
    fn renamed(&mut self, from: &Path, to: &Path) {
        for d in self.dirs.values_mut() {
            if let Ok(below) = d.strip_prefix(from) {
                *d = to.join(below);
            }
        }
    }

    fn run(mut self, tx: &mpsc::Sender<String>) {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            // SAFETY: buf is valid for its length.
            let n =
                unsafe { libc::read(std::os::fd::AsRawFd::as_raw_fd(&self.fd), buf.as_mut_ptr().cast(), buf.len()) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::warn!("inotify stopped ({e}); relying on the rescan");
                return;
            }
            // Directories moved away in this read, by cookie: renamed
            // within the root if a move to comes, else gone from it.
            let mut moved: HashMap<u32, PathBuf> = HashMap::new();
            for ev in events(&buf[..n as usize]) {
                if ev.mask & libc::IN_Q_OVERFLOW != 0 {
                    tracing::warn!("inotify queue overflowed; the rescan will index what it missed");
                    continue;
                }
                let Some(dir) = self.dirs.get(&ev.wd).cloned() else { continue };
                if ev.mask & libc::IN_IGNORED != 0 {
                    self.dirs.remove(&ev.wd);
                    continue;
                }
                if ev.name.is_empty() {
                    continue;
                }
                let rel = dir.join(OsStr::from_bytes(ev.name));
                if ev.mask & libc::IN_ISDIR != 0 {
                    if ev.mask & libc::IN_MOVED_FROM != 0 {
                        moved.insert(ev.cookie, rel);
                    } else if let Some(from) =
                        (ev.mask & libc::IN_MOVED_TO != 0).then(|| moved.remove(&ev.cookie)).flatten()
                    {
                        self.renamed(&from, &rel);
                    } else if ev.mask & (libc::IN_CREATE | libc::IN_MOVED_TO) != 0 {
                        self.watch_tree(&rel, Some(tx));
                    }
                } else if ev.mask & (libc::IN_CLOSE_WRITE | libc::IN_MOVED_TO) != 0 {
                    queue(tx, &rel);
                }
            }
            for gone in moved.into_values() {
                self.unwatch_below(&gone);
            }
        }
    }
}

fn queue(tx: &mpsc::Sender<String>, rel: &Path) {
    // Paths a client could not name (not UTF-8) are not indexed ahead.
    if let Some(s) = rel.to_str() {
        let _ = tx.try_send(s.to_string());
    }
}

/// One inotify event as read.
#[derive(Debug, PartialEq, Eq)]
struct Event<'a> {
    wd: i32,
    mask: u32,
    cookie: u32,
    name: &'a [u8],
}

/// The entries of directory `dir` (its names, and whether each is a
/// directory, by `lstat`: a symlink is not one), read through the
/// descriptor.
fn read_dir_fd(dir: std::os::fd::OwnedFd) -> io::Result<Vec<(Vec<u8>, bool)>> {
    use std::os::fd::IntoRawFd;
    // SAFETY: fdopendir takes ownership of the descriptor; closedir frees both.
    let d = unsafe { libc::fdopendir(dir.into_raw_fd()) };
    if d.is_null() {
        return Err(io::Error::last_os_error());
    }
    let mut out = vec![];
    loop {
        // SAFETY: a valid DIR stream, read until it returns null.
        let e = unsafe { libc::readdir64(d) };
        if e.is_null() {
            break;
        }
        // SAFETY: readdir's entry is valid until the next call; d_name is NUL-terminated.
        let (name, kind) = unsafe { (std::ffi::CStr::from_ptr((*e).d_name.as_ptr()).to_bytes().to_vec(), (*e).d_type) };
        if name == b"." || name == b".." {
            continue;
        }
        // DT_UNKNOWN (some file systems): the file is a directory if
        // opening it as one beneath the root works later; queued as a file
        // here, which `open_file` refuses harmlessly.
        out.push((name, kind == libc::DT_DIR));
    }
    // SAFETY: the stream opened above.
    unsafe { libc::closedir(d) };
    Ok(out)
}

/// The events in what one `read` of an inotify descriptor returned; a
/// short or inconsistent record ends the list rather than panicking.
fn events(mut b: &[u8]) -> Vec<Event<'_>> {
    const HEAD: usize = 16;
    let mut out = vec![];
    while b.len() >= HEAD {
        let word = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let (wd, mask, cookie, len) = (word(0) as i32, word(4), word(8), word(12) as usize);
        let Some(name) = b.get(HEAD..HEAD + len) else { break };
        let name = &name[..name.iter().position(|&c| c == 0).unwrap_or(name.len())];
        out.push(Event { wd, mask, cookie, name });
        b = &b[HEAD + len..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn record(wd: i32, mask: u32, name: &[u8], pad: usize) -> Vec<u8> {
        let mut v = vec![];
        v.extend_from_slice(&wd.to_ne_bytes());
        v.extend_from_slice(&mask.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(&((name.len() + pad) as u32).to_ne_bytes());
        v.extend_from_slice(name);
        v.resize(v.len() + pad, 0);
        v
    }

    #[test]
    fn reads_records_and_their_padded_names() {
        let mut b = record(1, libc::IN_CLOSE_WRITE, b"a.bin", 3);
        b.extend(record(2, libc::IN_ISDIR | libc::IN_CREATE, b"", 0));
        let ev = events(&b);
        assert_eq!(
            ev,
            vec![
                Event { wd: 1, mask: libc::IN_CLOSE_WRITE, cookie: 0, name: b"a.bin" },
                Event { wd: 2, mask: libc::IN_ISDIR | libc::IN_CREATE, cookie: 0, name: b"" },
            ]
        );
    }

    proptest! {
        #[test]
        fn any_bytes_give_events_without_panicking(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            for e in events(&b) {
                prop_assert!(e.name.len() <= b.len());
            }
        }
    }

    #[test]
    fn a_file_written_under_the_root_is_queued() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        let w = Watches::new(d.path(), &d.path().join(".ddftpd-index")).unwrap();
        let (tx, mut rx) = mpsc::channel(16);
        std::thread::spawn(move || w.run(&tx));
        std::fs::write(d.path().join("sub/new.bin"), b"x").unwrap();
        std::fs::create_dir(d.path().join("later")).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        std::fs::write(d.path().join("later/n2"), b"y").unwrap();
        // A file in a directory being watched may be queued twice (found
        // there, then closed): a set.
        let mut got = std::collections::BTreeSet::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while got.len() < 2 {
            match rx.try_recv() {
                Ok(p) => _ = got.insert(p),
                Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("{e}: got only {got:?}"),
            }
        }
        assert_eq!(got.into_iter().collect::<Vec<_>>(), ["later/n2", "sub/new.bin"]);
    }
}
