//! Where an archive's bytes land: the destination files and symlinks of
//! a bundle as one linear range, and the calls that finish an entry
//! (mode, mtime).

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use ddtree::layout::Layout;
use ddtree::list::{Entry, Kind, Time};

use super::current::{self, Held, Listed};
use super::{deep, ArchiveError, Item};
use crate::store::Store;

/// Open files kept at once.
const OPEN_FILES: usize = 64;

/// The destination files and symlinks of a bundle, as one linear range.
///
/// A file that one write holds whole (most small files: a block carries
/// hundreds) is created, written and finished (mode, mtime) right there,
/// through one open beneath its directory, opened once for the files of
/// that directory the write holds (a path walked once, not once a file): its
/// bytes were verified before the write, and no pass at the end looks its
/// path up again. Other files are written through
/// a few cached open files and finished once the whole range is verified.
/// A symlink is made as soon as its whole target has come: a block the
/// journal records is on disk, links included, so a rerun that resumes
/// the range (and gets none of those blocks again) finds them there.
#[derive(Debug)]
pub struct TreeStore {
    pieces: Vec<Piece>,
    /// The pieces' directories (one per run of pieces sharing one).
    dirs: Vec<deep::Beneath>,
    pub(super) layout: Layout,
    /// Open files, by piece index (a few at a time).
    open: Mutex<HashMap<usize, Arc<File>>>,
    /// Symlink targets, gathered in memory until they are complete.
    links: Mutex<HashMap<usize, Target>>,
    /// Files and symlinks finished as they were written: a later write of
    /// the same bytes (where a pair's two ends overlapped) is dropped, so
    /// the mtime stays.
    finished: Vec<AtomicBool>,
    /// A new destination (files created with their mode under `umask`), or
    /// one that may hold old files, finished ones of an interrupted run too.
    fresh: bool,
    umask: u32,
    /// Owners and groups are set (run as root).
    owners: bool,
    /// Entries a mirror could not read: never written, reported.
    bad: Vec<AtomicBool>,
    /// The inode each file was written through (0: none yet): what
    /// `archive --share` reads back must be that file, not another put
    /// under its name.
    written: Vec<std::sync::atomic::AtomicU64>,
    /// Why each of those could not be read, and the mirrors that said so.
    why: Mutex<HashMap<usize, Unread>>,
    /// Symlinks whose arriving target was not the listed one: not made,
    /// reported as failed entries (asking other mirrors would bring the
    /// same bytes: the range is verified).
    other_target: Mutex<Vec<usize>>,
}

/// Why an entry could not be read, and the mirrors that could not.
#[derive(Debug, Clone)]
pub(super) struct Unread {
    pub why: String,
    pub mirrors: Vec<String>,
}

/// A symlink's target as its pieces come.
#[derive(Debug, Default)]
struct Target {
    bytes: Vec<u8>,
    /// Where each piece written starts (one may come twice, where a pair's
    /// two ends overlapped), and the bytes they hold.
    pieces: HashSet<u64>,
    have: u64,
}

#[derive(Debug)]
pub(super) struct Piece {
    /// Its directory (in `dirs`) and its name there.
    dir: usize,
    name: CString,
    link: bool,
    /// Mode to create the file with (owner-writable until finished).
    mode: u32,
    /// The listed permission bits and mtime.
    perm: u32,
    mtime: Time,
    /// The listed size, and a sparse file's data runs: the range holds
    /// those alone, and the holes between them are never written.
    size: u64,
    runs: Option<Box<[(u64, u64)]>>,
    /// The listed owner and group.
    owner: Option<(u32, u32)>,
    /// A symlink's listed target: the one that arrives must be it (what
    /// `--safe-links` judged, and what `-i` showed).
    target: Option<Box<[u8]>>,
}

impl TreeStore {
    pub(super) fn new(
        items: &[&Item],
        dest: &deep::Dest,
        fresh: bool,
        umask: u32,
        owners: bool,
    ) -> Result<TreeStore, ArchiveError> {
        let mut dirs: Vec<deep::Beneath> = vec![];
        let mut pieces = Vec::with_capacity(items.len());
        for it in items {
            let bad = |why: &str| ArchiveError::BadEntry { path: it.rel.display().to_string(), why: why.into() };
            let name = it.rel.file_name().ok_or_else(|| bad("no file name"))?;
            let dir = it.rel.parent().unwrap_or(Path::new(""));
            if dirs.last().is_none_or(|d| d.rel() != dir.as_os_str().as_bytes()) {
                dirs.push(dest.join(dir));
            }
            pieces.push(Piece {
                dir: dirs.len() - 1,
                name: CString::new(name.as_bytes()).map_err(|_| bad("NUL byte"))?,
                link: it.entry.kind == Kind::Link,
                mode: it.entry.perm | 0o200,
                perm: it.entry.perm,
                mtime: it.entry.mtime,
                size: it.entry.size,
                runs: it.entry.meta.data().filter(|_| it.entry.kind == Kind::File).map(Box::from),
                owner: it.entry.meta.owner,
                target: it.entry.meta.target().filter(|_| it.entry.kind == Kind::Link).map(Box::from),
            });
        }
        let layout = Layout::new(items.iter().map(|it| it.entry.meta.moved_len(it.entry.size))).ok_or_else(|| {
            ArchiveError::BadEntry {
                path: dest.path().display().to_string(),
                why: "the listed sizes add up past 2^64 bytes".into(),
            }
        })?;
        let finished = items.iter().map(|_| AtomicBool::new(false)).collect();
        let bad = items.iter().map(|_| AtomicBool::new(false)).collect();
        let written = items.iter().map(|_| Default::default()).collect();
        Ok(TreeStore {
            pieces,
            dirs,
            layout,
            open: Mutex::default(),
            links: Mutex::default(),
            finished,
            fresh,
            umask,
            owners,
            bad,
            written,
            why: Mutex::default(),
            other_target: Mutex::default(),
        })
    }

    /// The owner piece `i` is to be given, unless it has it already (an
    /// entry this run made is this process's).
    fn owner(&self, i: usize) -> Option<(u32, u32)> {
        chown_to(self.pieces[i].owner, self.owners, self.fresh)
    }

    /// Where piece `i` goes.
    fn path(&self, i: usize) -> deep::Beneath {
        let p = &self.pieces[i];
        self.dirs[p.dir].join(OsStr::from_bytes(p.name.as_bytes()))
    }

    /// Where file `i` is written while its bytes come in pieces: beside
    /// it, under a name of its own, so that its own name never holds
    /// anything but its whole, verified bytes. The same name in every run,
    /// so a resumed range finds what the journal says is there.
    pub(super) fn part_path(&self, i: usize) -> deep::Beneath {
        let p = &self.pieces[i];
        let part = ddtree::scratch::side_name(p.name.as_bytes(), ".", ".ddftp-part");
        self.dirs[p.dir].join(OsStr::from_bytes(&part))
    }

    /// Whether a mirror could not read entry `i` (and no other sent it whole).
    pub(super) fn is_bad(&self, i: usize) -> bool {
        self.bad[i].load(Ordering::Acquire) && !self.is_finished(i)
    }

    /// The entries a mirror could not read (and no other sent whole), why,
    /// and which mirrors.
    pub(super) fn unread(&self) -> Vec<(usize, Unread)> {
        let why = self.why.lock().expect("store lock");
        let mut v: Vec<(usize, Unread)> =
            why.iter().filter(|(&i, _)| self.is_bad(i)).map(|(&i, w)| (i, w.clone())).collect();
        v.sort_unstable_by_key(|(i, _)| *i);
        v
    }

    /// The symlinks not made because their target was not the listed one.
    pub(super) fn other_targets(&self) -> Vec<usize> {
        let mut v = self.other_target.lock().expect("store lock").clone();
        v.sort_unstable();
        v
    }

    /// Puts file `i` in place once the whole range is verified: its part
    /// file gets its mode and mtime and takes the file's name. A file
    /// written whole (by this run or the interrupted one a resumed range
    /// continues) is finished where it is. `Err(why)` for a file that is
    /// not there to finish.
    pub(super) fn put_in_place(&self, i: usize, e: &Entry) -> io::Result<()> {
        let (part, path) = (self.part_path(i), self.path(i));
        if self.is_bad(i) {
            return remove_any(&part);
        }
        match deep::symlink_metadata(&part) {
            Ok(m) => {
                if m.len() != e.size {
                    // A sparse file's last hole (no byte written there).
                    deep::open(&part, libc::O_WRONLY, 0)?.set_len(e.size)?;
                }
                // The part file is this run's.
                finish_entry(&part, e, self.fresh, self.umask, chown_to(e.meta.owner, self.owners, true))?;
                deep::rename(&part, &path)
            }
            Err(_) if deep::symlink_metadata(&path).is_ok() => {
                finish_entry(&path, e, self.fresh, self.umask, self.owner(i))
            }
            Err(_) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                "its bytes never came (the interrupted run that fetched them lost them): run the archive again",
            )),
        }
    }

    /// Directory `dir`, through `at` (which holds the last one opened);
    /// in a fresh destination made first if it is not there yet.
    fn dir<'a>(&self, dir: usize, at: &'a mut Opened) -> io::Result<&'a OwnedFd> {
        if at.dir.as_ref().is_none_or(|(d, _)| *d != dir) {
            let path = &self.dirs[dir];
            let open = || deep::open(path, libc::O_PATH | libc::O_DIRECTORY, 0).map(OwnedFd::from);
            let fd = match open() {
                Err(e) if self.fresh && e.kind() == io::ErrorKind::NotFound => self.make_dir(path, &mut at.parent)?,
                r => r?,
            };
            at.dir = Some((dir, fd));
        }
        Ok(&at.dir.as_ref().expect("just set").1)
    }

    /// Makes directory `path` (and its missing parents) in a fresh
    /// destination, and opens it. Its parent is kept in `parent`: pieces
    /// come sorted, so the next directory made is most often its sibling,
    /// made in the same descriptor by name.
    fn make_dir(&self, path: &deep::Beneath, parent: &mut Option<(Vec<u8>, OwnedFd)>) -> io::Result<OwnedFd> {
        let (Some(up), Some(name)) = (path.parent(), path.file_name()) else {
            make_dir_all(path)?;
            return deep::open(path, libc::O_PATH | libc::O_DIRECTORY, 0).map(OwnedFd::from);
        };
        if parent.as_ref().is_none_or(|(rel, _)| rel[..] != *up.rel()) {
            let fd = match deep::open(&up, libc::O_PATH | libc::O_DIRECTORY, 0) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    make_dir_all(&up)?;
                    deep::open(&up, libc::O_PATH | libc::O_DIRECTORY, 0)?
                }
                r => r?,
            };
            *parent = Some((up.rel().to_vec(), OwnedFd::from(fd)));
        }
        let (_, fd) = parent.as_ref().expect("just set");
        deep::make_dir_in(fd.as_raw_fd(), name)
    }

    /// Whether `m` (of piece `i`'s path) is the finished file: an earlier
    /// run's, complete and correct.
    fn is_complete(&self, i: usize, m: &std::fs::Metadata) -> bool {
        let p = &self.pieces[i];
        is_finished_file(m, p.size, p.perm, p.mtime)
    }

    /// Writes file `i` whole and finishes it, unless that was done already
    /// (by this run, or an interrupted one whose list this run resumes);
    /// `at` holds the directory opened last.
    fn write_whole(&self, i: usize, data: &[u8], at: &mut Opened) -> io::Result<()> {
        if self.bad[i].load(Ordering::Acquire) || self.finished[i].swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let p = &self.pieces[i];
        if !self.fresh && deep::symlink_metadata(&self.path(i)).is_ok_and(|m| self.is_complete(i, &m)) {
            return Ok(());
        }
        let dir = self.dir(p.dir, at)?;
        // O_TRUNC: an older, longer file under the name (a resync) keeps no tail.
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
        let f = File::from(deep::open_in(dir.as_raw_fd(), &p.name, flags, p.mode)?);
        self.wrote_through(i, &f)?;
        self.write_at(i, &f, data, 0)?;
        if p.runs.is_some() {
            f.set_len(p.size)?;
        }
        let owned = self.owner(i);
        if let Some((uid, gid)) = owned {
            std::os::unix::fs::fchown(&f, Some(uid), Some(gid))?;
        }
        if needs_chmod(p.perm, self.fresh, self.umask) || owned.is_some() {
            f.set_permissions(std::fs::Permissions::from_mode(p.perm))?;
        }
        set_mtime_fd(&f, p.mtime)
    }

    /// Bytes of file `i`'s range from `within`, where they go in the file
    /// (a sparse file's between its holes).
    fn write_at(&self, i: usize, f: &File, data: &[u8], within: u64) -> io::Result<()> {
        match &self.pieces[i].runs {
            None => FileExt::write_all_at(f, data, within),
            Some(runs) => {
                ddtree::layout::each_run(runs, within, data.len(), |at, r| FileExt::write_all_at(f, &data[r], at))
            }
        }
    }

    /// A piece of symlink `i`'s target; the link is made once all of it came.
    fn write_link(&self, i: usize, piece: &[u8], within: u64) -> io::Result<()> {
        if self.is_finished(i) || self.bad[i].load(Ordering::Acquire) {
            return Ok(());
        }
        let len = self.layout.len_of(i);
        let whole = {
            let mut links = self.links.lock().expect("store lock");
            let t = links.entry(i).or_insert_with(|| Target { bytes: vec![0; len as usize], ..Target::default() });
            if t.pieces.insert(within) {
                t.bytes[within as usize..within as usize + piece.len()].copy_from_slice(piece);
                t.have += piece.len() as u64;
            }
            let done = t.have == len && !self.finished[i].swap(true, Ordering::AcqRel);
            done.then(|| links.remove(&i)).flatten()
        };
        let Some(target) = whole else { return Ok(()) };
        if self.pieces[i].target.as_deref().is_some_and(|listed| listed != target.bytes.as_slice()) {
            // Changed on the mirror since it was listed, or a mirror that
            // sends another target than it listed (one `--safe-links`
            // judged safe): not made, said.
            let shown = String::from_utf8_lossy(self.pieces[i].name.as_bytes());
            tracing::warn!("symlink {shown}: its target is not the one listed (changed on the mirror?); not made");
            self.other_target.lock().expect("store lock").push(i);
            return Ok(());
        }
        let path = self.path(i);
        if !self.fresh {
            remove_any(&path)?;
        }
        in_tree(&path, self.fresh, || deep::symlink(&target.bytes, &path))?;
        if let Some((uid, gid)) = chown_to(self.pieces[i].owner, self.owners, true) {
            deep::chown(&path, uid, gid)?;
        }
        deep::set_mtime(&path, self.pieces[i].mtime)
    }

    /// Whether file or symlink `i` was finished as it was written.
    pub(super) fn is_finished(&self, i: usize) -> bool {
        self.finished[i].load(Ordering::Acquire)
    }

    fn file(&self, i: usize) -> io::Result<Arc<File>> {
        let mut open = self.open.lock().expect("store lock");
        if let Some(f) = open.get(&i) {
            return Ok(f.clone());
        }
        if open.len() >= OPEN_FILES {
            open.clear();
        }
        let path = self.part_path(i);
        let create =
            || in_tree(&path, self.fresh, || deep::open(&path, libc::O_RDWR | libc::O_CREAT, self.pieces[i].mode));
        let f = match create() {
            // The part file's name is this archive's own: a symlink there
            // was planted (never followed); it goes, and the part is made.
            Err(e) if deep::is_symlink(&e) => {
                deep::remove_file(&path)?;
                create()?
            }
            r => r?,
        };
        self.wrote_through(i, &f)?;
        let f = Arc::new(f);
        open.insert(i, f.clone());
        Ok(f)
    }

    /// File `i` to read back (`archive --share` serves what it wrote):
    /// the part file being written, else the file under its name (written
    /// whole, or put in place since). Never made here.
    fn reader(&self, i: usize) -> io::Result<Arc<File>> {
        if let Some(f) = self.open.lock().expect("store lock").get(&i) {
            // The descriptor follows the file when it is put in place.
            return Ok(f.clone());
        }
        let by_name = || deep::open(&self.path(i), libc::O_RDONLY, 0);
        let f = match self.is_finished(i) {
            true => by_name()?,
            false => match deep::open(&self.part_path(i), libc::O_RDONLY, 0) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => by_name()?,
                r => r?,
            },
        };
        // Only the file this run wrote is sent: another put under its name
        // (a link to a file someone cannot read) is not ours to send. One
        // an interrupted run wrote has no other name.
        let m = f.metadata()?;
        let ours = match self.written[i].load(Ordering::Acquire) {
            0 => m.is_file() && m.nlink() == 1,
            ino => m.is_file() && m.ino() == ino,
        };
        if !ours {
            return Err(io::Error::other("not the file this archive wrote: not served"));
        }
        Ok(Arc::new(f))
    }

    /// Keeps the inode file `i` is written through.
    fn wrote_through(&self, i: usize, f: &File) -> io::Result<()> {
        self.written[i].store(f.metadata()?.ino(), Ordering::Release);
        Ok(())
    }

    /// Creates the directories of a fresh destination ahead of the files'
    /// bytes, on two threads (the part moving meanwhile leaves the CPU
    /// idle), until `stop`. (No file is made ahead: a file's name holds
    /// nothing until its bytes are verified.) Whether it made them all.
    pub(super) fn create_ahead(&self, stop: &AtomicBool) -> io::Result<bool> {
        if !self.fresh {
            return Ok(false);
        }
        let (n, half) = (self.pieces.len(), self.pieces.len() / 2);
        std::thread::scope(|sc| {
            let other = sc.spawn(|| self.create_range(half..n, stop));
            let first = self.create_range(0..half, stop);
            let second = other.join().expect("creating thread panicked");
            Ok(first? && second?)
        })
    }

    fn create_range(&self, range: std::ops::Range<usize>, stop: &AtomicBool) -> io::Result<bool> {
        let mut at = Opened::default();
        for i in range {
            if stop.load(Ordering::Acquire) {
                return Ok(false);
            }
            self.dir(self.pieces[i].dir, &mut at)?;
        }
        Ok(true)
    }

    /// Makes way for the files: empty files, and files that are all hole,
    /// are made (their bytes, none, are all there is); in an existing destination whatever stands in a
    /// file's place and is not a file (a directory, a symlink) goes. An old
    /// file under the name stays until the new one replaces it whole.
    pub(super) fn create(&self) -> Result<(), ArchiveError> {
        for (i, p) in self.pieces.iter().enumerate() {
            let size = self.layout.len_of(i);
            if p.link {
                continue;
            }
            let path = self.path(i);
            let local = |source| ArchiveError::Local { path: path.to_path_buf(), source };
            if !self.fresh {
                match deep::symlink_metadata(&path) {
                    Ok(m) if self.is_complete(i, &m) => continue,
                    Ok(m) if !m.is_file() => remove_any(&path).map_err(local)?,
                    _ => {}
                }
            }
            if size == 0 {
                // Complete as made: finished at once, like a small file
                // written whole.
                let f = in_tree(&path, self.fresh, || {
                    deep::open(&path, libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, p.mode)
                });
                let owned = self.owner(i);
                let finished = f.and_then(|f| {
                    // A file that is all hole moves no byte, and is still
                    // its listed size (a hole to its end).
                    if p.size > 0 {
                        f.set_len(p.size)?;
                    }
                    if let Some((uid, gid)) = owned {
                        std::os::unix::fs::fchown(&f, Some(uid), Some(gid))?;
                    }
                    if needs_chmod(p.perm, self.fresh, self.umask) || owned.is_some() {
                        f.set_permissions(std::fs::Permissions::from_mode(p.perm))?;
                    }
                    set_mtime_fd(&f, p.mtime)
                });
                finished.map_err(local)?;
                self.finished[i].store(true, Ordering::Release);
            }
        }
        Ok(())
    }
}

/// The directories a run of writes holds open: the one written into
/// last, and the parent the last one made was made in.
#[derive(Default)]
pub(super) struct Opened {
    dir: Option<(usize, OwnedFd)>,
    parent: Option<(Vec<u8>, OwnedFd)>,
}

/// The engine reports a store's errors against the destination: each
/// names the file it happened to.
impl Store for TreeStore {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut at = Opened::default();
        self.layout.each(offset, buf.len(), |i, within, r| {
            if self.bad[i].load(Ordering::Acquire) {
                // A mirror could not read it: these are not its bytes.
                return Ok(());
            }
            let written = if self.pieces[i].link {
                self.write_link(i, &buf[r], within)
            } else if within == 0 && r.len() as u64 == self.layout.len_of(i) {
                self.write_whole(i, &buf[r], &mut at)
            } else {
                self.file(i).and_then(|f| self.write_at(i, &f, &buf[r], within))
            };
            written.map_err(|e| naming(&self.path(i))(e))
        })
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let len = buf.len();
        self.layout.each(offset, len, |i, within, r| {
            if self.pieces[i].link {
                let path = self.path(i);
                let t = deep::read_link(&path).map_err(naming(&path))?;
                let t = t.as_os_str().as_bytes().get(within as usize..within as usize + r.len());
                buf[r].copy_from_slice(t.ok_or_else(|| io::Error::other("symlink target shorter than listed"))?);
                Ok(())
            } else {
                let read = self.reader(i).and_then(|f| match &self.pieces[i].runs {
                    None => FileExt::read_exact_at(&*f, &mut buf[r], within),
                    Some(runs) => {
                        let dst = &mut buf[r];
                        ddtree::layout::each_run(runs, within, dst.len(), |at, r| {
                            FileExt::read_exact_at(&*f, &mut dst[r], at)
                        })
                    }
                });
                read.map_err(|e| naming(&self.path(i))(e))
            }
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        for (i, p) in self.pieces.iter().enumerate() {
            if p.link || self.is_bad(i) {
                continue;
            }
            // A file written whole is under its name; one in pieces in its part file.
            let path = if self.is_finished(i) { self.path(i) } else { self.part_path(i) };
            match deep::open(&path, libc::O_RDONLY, 0) {
                Ok(f) => f.sync_data().map_err(naming(&path))?,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(naming(&path)(e)),
            }
        }
        Ok(())
    }

    fn unreadable(&self, index: u64, why: &str, mirror: &str) -> io::Result<()> {
        let i = usize::try_from(index).ok().filter(|&i| i < self.pieces.len());
        let Some(i) = i else {
            return Err(io::Error::other(format!("entry {index} is past the range's {} entries", self.pieces.len())));
        };
        let mut all = self.why.lock().expect("store lock");
        let u = all.entry(i).or_insert_with(|| Unread { why: why.to_string(), mirrors: vec![] });
        if !u.mirrors.iter().any(|m| m == mirror) {
            u.mirrors.push(mirror.to_string());
        }
        self.bad[i].store(true, Ordering::Release);
        Ok(())
    }
}

/// An error of `path`'s, saying so.
fn naming(path: &Path) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |e| io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Makes entry `path` with `make`; in a fresh destination, whose
/// directories are made by the first entry written into them, the missing
/// ones on its path first.
fn in_tree<T>(path: &deep::Beneath, fresh: bool, make: impl Fn() -> io::Result<T>) -> io::Result<T> {
    match make() {
        Err(e) if fresh && e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                make_dir_all(&dir)?;
            }
            make()
        }
        r => r,
    }
}

/// A directory and its missing parents, owner-only until they are finished.
pub(super) fn make_dir_all(p: &deep::Beneath) -> io::Result<()> {
    deep::make_dir_all(p)
}

pub(super) fn remove_any(p: &deep::Beneath) -> io::Result<()> {
    deep::remove_any(p)
}

/// Whether `m` is a regular file of this size, mode and mtime (to the
/// nanosecond): one a run finished has the listed mtime, and one the plan
/// chose because its mtime differs (at any `--modify-window`) is not it.
/// Where DEST keeps no nanoseconds, a resumed run moves such files again.
pub(super) fn is_finished_file(m: &std::fs::Metadata, size: u64, perm: u32, mtime: Time) -> bool {
    let listed = Listed { kind: Kind::File, size, perm, mtime, rdev: None };
    current::compare(&Held::from(m), listed, current::Window(-1)).none()
}

/// Sets an open file's mtime.
pub(super) fn set_mtime_fd(f: &File, t: Time) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let times = super::deep::mtime_only(t);
    // SAFETY: a valid open descriptor and two timespecs, as futimens wants.
    if unsafe { libc::futimens(f.as_raw_fd(), times.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether a file needs its mode set: an old one may have any mode; a new
/// one was created with `perm | 0o200` under `umask`, and a write by a user
/// without CAP_FSETID clears setuid and setgid.
pub(super) fn needs_chmod(perm: u32, fresh: bool, umask: u32) -> bool {
    !fresh || perm & 0o6000 != 0 || (perm | 0o200) & !umask != perm
}

/// The owner to give an entry listed with `owner`: none where owners are
/// not kept, or where it is `new` (made by this run, so this process's)
/// and the owner is this process's.
pub(super) fn chown_to(owner: Option<(u32, u32)>, owners: bool, new: bool) -> Option<(u32, u32)> {
    // Asked once: this runs for every file written.
    static ME: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    // SAFETY: geteuid and getegid cannot fail.
    let me = *ME.get_or_init(|| unsafe { (libc::geteuid(), libc::getegid()) });
    owner.filter(|&o| owners && !(new && o == me))
}

/// Sets owner (`owner`, first: a chown clears setuid), mtime and mode of a
/// file or directory: through one descriptor opened beneath DEST, so its
/// path is looked up once, not once a call; by name (never following a
/// symlink) where it cannot be opened for reading (a 0333 directory, as
/// its owner).
pub(super) fn finish_entry(
    path: &deep::Beneath,
    e: &Entry,
    fresh: bool,
    umask: u32,
    owner: Option<(u32, u32)>,
) -> io::Result<()> {
    let mode = (e.kind == Kind::Dir || needs_chmod(e.perm, fresh, umask) || owner.is_some()).then_some(e.perm);
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY;
    match deep::open(path, flags, 0) {
        Ok(f) => {
            if let Some((uid, gid)) = owner {
                std::os::unix::fs::fchown(&f, Some(uid), Some(gid))?;
            }
            set_mtime_fd(&f, e.mtime)?;
            if let Some(m) = mode {
                f.set_permissions(std::fs::Permissions::from_mode(m))?;
            }
            Ok(())
        }
        Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
            if let Some((uid, gid)) = owner {
                deep::chown(path, uid, gid)?;
            }
            deep::set_mtime(path, e.mtime)?;
            match mode {
                Some(m) => deep::set_mode(path, m),
                None => Ok(()),
            }
        }
        Err(err) => Err(err),
    }
}

#[cfg(test)]
mod tests;
