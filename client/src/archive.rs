//! `ddftp archive`: a whole tree through the DDOps engine.
//!
//! The file list (a mirror's walk of SRC, or a given list) is sorted by
//! path, and the regular files and symlinks still to move become one
//! *bundle*: their bytes back to back, one linear range. Every mirror
//! registers the bundle under one name and checks each entry against its
//! own copy (kind, size, mtime) as it reads it ([`ddftpd::bundle`]); then
//! the range is moved exactly like `get` moves a file (pairs from both
//! ends, helpers, the resume journal), only written through [`TreeStore`]
//! straight into the destination files, and with each block checked
//! against the seal (BLAKE3) its mirror computed as it read it, not
//! against a voted manifest: a manifest would have every mirror read the
//! whole tree before the first byte moves. Small files cost no round trip
//! each: a block holds as many as fit.
//!
//! Into an empty DEST the move does not wait for a mirror's walk: the
//! list is read as it comes, and the files are moved in parts (a bundle
//! each) while the walk goes on (`Run::streamed`).
//!
//! Files get their mode and mtime only once their bytes are verified,
//! so a rerun skips exactly the files that are complete and correct (same
//! type, size, mode and mtime to the nanosecond, as rsync's quick check) and
//! an interrupted run resumes its range block by block from the journal.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ddftp_proto::frame::MAX_BUNDLE_CHUNK;
use ddftp_proto::packed::{self, MAX_LIST};
use ddftp_proto::{Endpoint, Reply, Request};
use ddtree::layout::Layout;
use ddtree::list::{self, ddftp, Entry, Kind, Time};
use tokio::io::AsyncWriteExt;

use crate::journal::journal_path;
use crate::store::Store;
use crate::transfer::{self, read_reply, unexpected, GetSpec, Progress, Route, TransferError, TransferReport};

/// What an archive run needs.
#[derive(Debug, Clone)]
pub struct ArchiveSpec {
    /// The subtree on the mirrors (relative to their root; `.` for all).
    pub src: String,
    pub dest: PathBuf,
    /// A list to move instead of asking a mirror to walk SRC.
    pub list: Option<PathBuf>,
    /// Removed from the front of every listed path (dwalk writes absolute ones).
    pub strip: Option<String>,
    /// Bytes a part of a streamed archive waits for while the walk goes
    /// on ([`PART_BYTES`] unless a test wants many parts).
    pub part_bytes: u64,
    /// The engine's settings (`path` and `output` are set here).
    pub get: GetSpec,
}

/// Why an archive failed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error(transparent)]
    List(#[from] list::ListError),
    #[error("listing {src} on the mirrors failed:\n{}", failures.join("\n"))]
    Walk { src: String, failures: Vec<String> },
    #[error("{path}: {why}")]
    BadEntry { path: String, why: String },
    #[error("no mirror can serve the files to move:\n{}", failures.join("\n"))]
    NoBundle { failures: Vec<String> },
    #[error("{}: {source}", path.display())]
    Local { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Transfer(#[from] TransferError),
}

/// What an archive did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ArchiveReport {
    pub src: String,
    pub dest: String,
    /// Regular files in the list, moved or skipped.
    pub files: u64,
    pub dirs: u64,
    pub links: u64,
    /// Bytes of regular files moved in this run.
    pub bytes: u64,
    /// Files skipped because they were already complete and correct.
    pub skipped_files: u64,
    pub skipped_bytes: u64,
    pub seconds: f64,
    pub files_per_second: f64,
    pub mb_per_second: f64,
    /// Where the time went.
    pub phases: Phases,
    /// Bundles the files moved in: one, or in a streamed archive as many
    /// as were cut while the mirror walked.
    pub parts: u64,
    /// The engine's report for the range (shares per mirror, ...), if
    /// anything moved (the parts' together).
    pub transfer: Option<TransferReport>,
}

/// Seconds of each part of a run. They add up to the whole, except in a
/// streamed archive, where the walk runs while the first parts move:
/// there `list` ends when the walk does, the next three are summed over
/// the parts, and `finish` is the rest.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Phases {
    /// Getting the list (a mirror's walk, or reading LIST) and sorting it.
    pub list: f64,
    /// Directories, the check of what is already there, empty files.
    pub prepare: f64,
    /// Waiting for the mirrors to register the bundle (they start during `prepare`).
    pub check: f64,
    /// Moving the bytes.
    pub moving: f64,
    /// Symlinks, modes and mtimes.
    pub finish: f64,
}

/// One listed entry, placed under the destination.
struct Item {
    entry: Entry,
    /// Path below SRC (empty for SRC itself).
    rel: PathBuf,
}

/// The destination files and symlinks of a bundle, as one linear range.
///
/// A file that one write holds whole (most small files: a block carries
/// hundreds) is created, written and finished (mode, mtime) right there,
/// through one open: its bytes were verified before the write, and no
/// pass at the end looks its path up again. Other files are written through
/// a few cached open files and finished once the whole range is verified.
#[derive(Debug)]
pub struct TreeStore {
    pieces: Vec<Piece>,
    layout: Layout,
    /// Open files, by piece index (a few at a time).
    open: Mutex<HashMap<usize, Arc<File>>>,
    /// Symlink targets, gathered in memory until they are complete.
    links: Mutex<HashMap<usize, Vec<u8>>>,
    /// Files finished as they were written: a later write of the same
    /// bytes (where a pair's two ends overlapped) is dropped, so the mtime
    /// stays.
    finished: Vec<AtomicBool>,
    /// A new destination (files created with their mode under `umask`), or
    /// one that may hold old files, finished ones of an interrupted run too.
    fresh: bool,
    umask: u32,
}

#[derive(Debug)]
struct Piece {
    path: PathBuf,
    link: bool,
    /// Mode to create the file with (owner-writable until finished).
    mode: u32,
    /// The listed permission bits and mtime.
    perm: u32,
    mtime: Time,
}

/// Open files kept at once.
const OPEN_FILES: usize = 64;
/// Entries a walk hands over at a time.
const WALK_BATCH: usize = 4096;
/// What a part of a streamed archive waits for while the walk goes on
/// (after it, the rest is the last part): bytes worth keeping the links
/// busy with, or many files. Small files are moved by the CPU more than
/// by the links, and the walk needs the CPU too: moving them early gains
/// little where both share a machine, and each part costs a definition
/// and a few round trips.
pub const PART_BYTES: u64 = 64 << 20;
const PART_FILES: usize = 65_536;

impl TreeStore {
    fn new(items: &[&Item], dest: &Path, fresh: bool, umask: u32) -> Result<TreeStore, ArchiveError> {
        let pieces = items
            .iter()
            .map(|it| Piece {
                path: dest.join(&it.rel),
                link: it.entry.kind == Kind::Link,
                mode: it.entry.perm | 0o200,
                perm: it.entry.perm,
                mtime: it.entry.mtime,
            })
            .collect();
        let layout = Layout::new(items.iter().map(|it| it.entry.size)).ok_or_else(|| ArchiveError::BadEntry {
            path: dest.display().to_string(),
            why: "the listed sizes add up past 2^64 bytes".into(),
        })?;
        let finished = items.iter().map(|_| AtomicBool::new(false)).collect();
        Ok(TreeStore { pieces, layout, open: Mutex::default(), links: Mutex::default(), finished, fresh, umask })
    }

    /// Whether `m` (of piece `i`'s path) is the finished file: an earlier
    /// run's, complete and correct.
    fn is_complete(&self, i: usize, m: &std::fs::Metadata) -> bool {
        let p = &self.pieces[i];
        is_finished_file(m, self.layout.len_of(i), p.perm, p.mtime)
    }

    /// Writes file `i` whole and finishes it, unless that was done already
    /// (by this run, or an interrupted one whose list this run resumes).
    fn write_whole(&self, i: usize, data: &[u8]) -> io::Result<()> {
        if self.finished[i].swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let p = &self.pieces[i];
        if !self.fresh && p.path.symlink_metadata().is_ok_and(|m| self.is_complete(i, &m)) {
            return Ok(());
        }
        let f = in_tree(&p.path, self.fresh, || {
            OpenOptions::new().write(true).create(true).truncate(false).mode(p.mode).open(&p.path)
        })?;
        FileExt::write_all_at(&f, data, 0)?;
        if needs_chmod(p.perm, self.fresh, self.umask) {
            f.set_permissions(std::fs::Permissions::from_mode(p.perm))?;
        }
        set_mtime_fd(&f, p.mtime)
    }

    /// Whether file `i` was finished as it was written.
    fn is_finished(&self, i: usize) -> bool {
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
        let p = &self.pieces[i];
        let f = Arc::new(in_tree(&p.path, self.fresh, || {
            OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(p.mode).open(&p.path)
        })?);
        open.insert(i, f.clone());
        Ok(f)
    }

    /// Makes way for the files: in a fresh destination only empty files
    /// need creating (the others are created by their first write); in an
    /// existing one, whatever is in the way (a directory, a symlink) goes,
    /// and what an interrupted run wrote stays (finished files untouched).
    fn create(&self) -> Result<(), ArchiveError> {
        for (i, p) in self.pieces.iter().enumerate() {
            let size = self.layout.len_of(i);
            if p.link || (self.fresh && size > 0) {
                continue;
            }
            let local = |source| ArchiveError::Local { path: p.path.clone(), source };
            if !self.fresh {
                match p.path.symlink_metadata() {
                    Ok(m) if self.is_complete(i, &m) => continue,
                    Ok(m) if !m.is_file() => remove_any(&p.path).map_err(local)?,
                    _ => {}
                }
            }
            let f = in_tree(&p.path, self.fresh, || {
                OpenOptions::new().write(true).create(true).truncate(false).mode(p.mode).open(&p.path)
            });
            f.and_then(|f| f.set_len(size)).map_err(local)?;
        }
        Ok(())
    }
}

impl Store for TreeStore {
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.layout.each(offset, buf.len(), |i, within, r| {
            let p = &self.pieces[i];
            if p.link {
                let mut links = self.links.lock().expect("store lock");
                let t = links.entry(i).or_insert_with(|| vec![0; self.layout.len_of(i) as usize]);
                t[within as usize..within as usize + r.len()].copy_from_slice(&buf[r]);
                Ok(())
            } else if within == 0 && r.len() as u64 == self.layout.len_of(i) {
                self.write_whole(i, &buf[r])
            } else {
                FileExt::write_all_at(&*self.file(i)?, &buf[r], within)
            }
        })
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let len = buf.len();
        self.layout.each(offset, len, |i, within, r| {
            let p = &self.pieces[i];
            if p.link {
                let links = self.links.lock().expect("store lock");
                let t = links.get(&i).ok_or_else(|| io::Error::other("symlink target not received"))?;
                buf[r.clone()].copy_from_slice(&t[within as usize..within as usize + r.len()]);
                Ok(())
            } else {
                FileExt::read_exact_at(&*self.file(i)?, &mut buf[r], within)
            }
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        for i in 0..self.pieces.len() {
            if !self.pieces[i].link {
                self.file(i)?.sync_data()?;
            }
        }
        Ok(())
    }
}

/// Makes entry `path` with `make`; in a fresh destination, whose
/// directories are made by the first entry written into them, the missing
/// ones on its path first.
fn in_tree<T>(path: &Path, fresh: bool, make: impl Fn() -> io::Result<T>) -> io::Result<T> {
    match make() {
        Err(e) if fresh && e.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                make_dir_all(dir)?;
            }
            make()
        }
        r => r,
    }
}

/// A directory and its missing parents, owner-only until they are finished.
fn make_dir_all(p: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(p)
}

fn remove_any(p: &Path) -> io::Result<()> {
    match p.symlink_metadata() {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The list: from `--list` (with `--strip`), or walked by the first mirror
/// that answers.
async fn fetch_list(spec: &ArchiveSpec) -> Result<Vec<Entry>, ArchiveError> {
    if let Some(path) = &spec.list {
        let mut entries = list::read(path)?;
        if let Some(prefix) = &spec.strip {
            let prefix = prefix.trim_end_matches('/').as_bytes();
            for e in &mut entries {
                let rest =
                    e.path.strip_prefix(prefix).filter(|r| r.is_empty() || r.starts_with(b"/")).ok_or_else(|| {
                        ArchiveError::BadEntry {
                            path: String::from_utf8_lossy(&e.path).into_owned(),
                            why: format!("does not start with --strip {:?}", String::from_utf8_lossy(prefix)),
                        }
                    })?;
                let rest = rest.strip_prefix(b"/").unwrap_or(rest);
                e.path = if rest.is_empty() { b".".to_vec() } else { rest.to_vec() };
            }
        }
        return Ok(entries);
    }
    let mut failures = vec![];
    for ep in &spec.get.mirrors {
        match walk_on(ep, &spec.src, spec.get.token.as_deref()).await {
            Ok(entries) => return Ok(entries),
            Err(e) => failures.push(format!("  {ep}: {e}")),
        }
    }
    Err(ArchiveError::Walk { src: spec.src.clone(), failures })
}

async fn greet(ep: &Endpoint, token: Option<&[u8]>) -> Result<tokio::net::TcpStream, String> {
    let route = Route { endpoint: ep.clone(), local: None };
    Ok(transfer::connect(&route, None, token).await?.0)
}

/// Asks one mirror to walk `src`.
async fn walk_on(ep: &Endpoint, src: &str, token: Option<&[u8]>) -> Result<Vec<Entry>, String> {
    let (tx, mut rx) = tokio::sync::mpsc::channel(16);
    let mut began = false;
    let walk = walk_stream(ep, src, token, tx, &mut began);
    let collect = async {
        let mut all = vec![];
        while let Some(mut batch) = rx.recv().await {
            all.append(&mut batch);
        }
        all
    };
    let (walked, all) = tokio::join!(walk, collect);
    walked.map(|()| all)
}

/// Asks one mirror to walk `src`, handing its entries to `out` a batch at
/// a time as the walk goes (the list is unpacked and read on a thread);
/// `began` is set once some of the list has come.
async fn walk_stream(
    ep: &Endpoint,
    src: &str,
    token: Option<&[u8]>,
    out: tokio::sync::mpsc::Sender<Vec<Entry>>,
    began: &mut bool,
) -> Result<(), String> {
    let mut sock = greet(ep, token).await?;
    let mut req = BytesMut::new();
    Request::Walk { path: src.to_string() }.encode(&mut req);
    sock.write_all(&req).await.map_err(|e| format!("send: {e}"))?;
    let (feed, unpacked) = packed::unpacker(MAX_LIST);
    let reader = tokio::task::spawn_blocking(move || {
        ddftp::read_batches(unpacked, Path::new("the mirror's list"), WALK_BATCH, |b| out.blocking_send(b).is_ok())
    });
    let mut buf = BytesMut::new();
    let errors = loop {
        match read_reply(&mut sock, &mut buf).await {
            Ok(Reply::ListData { data }) => {
                *began = true;
                if !feed.piece(data.to_vec()) {
                    break None;
                }
            }
            Ok(Reply::ListEnd { errors }) => break Some(Ok(errors)),
            Ok(other) => break Some(Err(unexpected(other))),
            Err(e) => break Some(Err(e)),
        }
    };
    drop(feed);
    let read = reader.await.map_err(|e| e.to_string())?;
    match errors {
        Some(Ok(0)) => read.map_err(|e| e.to_string()),
        Some(Ok(errors)) => Err(format!("{errors} entries under {src} could not be read on this mirror")),
        Some(Err(e)) => Err(e),
        // The list could not be read (the reader says why).
        None => read.map_err(|e| e.to_string()).and(Err("the list stopped".into())),
    }
}

/// Defines the bundle on one mirror (`def`: the packed list); its name, or why not.
async fn define_on(ep: &Endpoint, def: &[u8], token: Option<&[u8]>) -> Result<String, String> {
    let mut sock = greet(ep, token).await?;
    let mut out = BytesMut::with_capacity(def.len() + def.len() / MAX_BUNDLE_CHUNK * 8 + 64);
    for piece in def.chunks(MAX_BUNDLE_CHUNK) {
        Request::Bundle { data: bytes::Bytes::copy_from_slice(piece) }.encode(&mut out);
    }
    Request::BundleEnd.encode(&mut out);
    sock.write_all(&out).await.map_err(|e| format!("send: {e}"))?;
    let mut buf = BytesMut::new();
    match tokio::time::timeout(Duration::from_secs(600), read_reply(&mut sock, &mut buf)).await {
        Ok(Ok(Reply::Bundle { name, .. })) => Ok(name),
        Ok(Ok(other)) => Err(unexpected(other)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("no answer in 600 s".into()),
    }
}

/// The entry's path below SRC, refusing anything that could leave DEST.
fn below_src(e: &Entry, src: &[u8]) -> Result<Option<PathBuf>, ArchiveError> {
    // A walk's paths are already clean: taken as they are.
    let rest =
        if src == b"." { Some(&e.path[..]) } else { e.path.strip_prefix(src).and_then(|r| r.strip_prefix(b"/")) };
    if let Some(rel) = rest.filter(|r| r.split(|&c| c == b'/').all(|p| !p.is_empty() && p != b"." && p != b"..")) {
        return Ok(Some(PathBuf::from(OsStr::from_bytes(rel))));
    }
    let bad =
        |why: &str| ArchiveError::BadEntry { path: String::from_utf8_lossy(&e.path).into_owned(), why: why.into() };
    let path = Path::new(OsStr::from_bytes(&e.path));
    let src = Path::new(OsStr::from_bytes(src));
    let rel = match path.strip_prefix(src) {
        Ok(r) => r,
        Err(_) if src == Path::new(".") => path,
        Err(_) => return Ok(None),
    };
    let mut clean = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => clean.push(p),
            Component::CurDir => {}
            _ => return Err(bad("absolute or '..' paths are refused")),
        }
    }
    Ok(Some(clean))
}

/// Refuses a list that puts an entry below one that is not a directory
/// (a symlink, a file): making it would go through what the list itself
/// puts there, out of DEST maybe. A walk never lists such a thing. (Sorted
/// `items` cost least; any order is checked right.)
fn check_nesting(items: &[Item]) -> Result<(), ArchiveError> {
    fn bytes(it: &Item) -> &[u8] {
        it.rel.as_os_str().as_bytes()
    }
    fn parent(p: &[u8]) -> Option<&[u8]> {
        p.iter().rposition(|&c| c == b'/').map(|i| &p[..i])
    }
    // Every directory some entry lies below (entries come sorted: most
    // share their parent with the one before, and an ancestor already in
    // the set has its own ancestors there too).
    let mut below: HashSet<&[u8]> = HashSet::new();
    let mut last = None;
    for it in items {
        let mut up = parent(bytes(it));
        if up == last {
            continue;
        }
        last = up;
        while let Some(dir) = up.filter(|d| below.insert(d)) {
            up = parent(dir);
        }
    }
    match items.iter().find(|it| it.entry.kind != Kind::Dir && below.contains(bytes(it))) {
        Some(n) => {
            let under = items.iter().find(|it| bytes(it).strip_prefix(bytes(n)).is_some_and(|r| r.starts_with(b"/")));
            Err(ArchiveError::BadEntry {
                path: under.map_or_else(String::new, |it| String::from_utf8_lossy(&it.entry.path).into_owned()),
                why: format!("it is below {}, which the list gives as a {:?}", n.rel.display(), n.entry.kind),
            })
        }
        None => Ok(()),
    }
}

/// Whether the destination already holds this entry, complete and correct.
fn is_done(dest: &Path, e: &Entry) -> bool {
    e.kind == Kind::File && dest.symlink_metadata().is_ok_and(|m| is_finished_file(&m, e.size, e.perm, e.mtime))
}

/// Whether `m` is a regular file of this size, mode and mtime (to the
/// nanosecond): rsync's quick check, modes included.
fn is_finished_file(m: &std::fs::Metadata, size: u64, perm: u32, mtime: Time) -> bool {
    m.is_file()
        && m.size() == size
        && m.mode() & 0o7777 == perm
        && m.mtime() == mtime.sec
        && m.mtime_nsec() as u32 == mtime.nsec
}

/// Sets a path's mtime (`flags`: `AT_SYMLINK_NOFOLLOW` for a symlink's own).
fn set_mtime(path: &Path, t: Time, flags: libc::c_int) -> io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(io::Error::other)?;
    let times = mtime_only(t);
    // SAFETY: c is a valid C string and times two timespecs, as utimensat wants.
    let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), flags) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets an open file's mtime.
fn set_mtime_fd(f: &File, t: Time) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let times = mtime_only(t);
    // SAFETY: a valid open descriptor and two timespecs, as futimens wants.
    if unsafe { libc::futimens(f.as_raw_fd(), times.as_ptr()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Access time left alone, modification time `t`.
fn mtime_only(t: Time) -> [libc::timespec; 2] {
    [
        libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_OMIT },
        libc::timespec { tv_sec: t.sec as libc::time_t, tv_nsec: t.nsec as libc::c_long },
    ]
}

/// Whether a file needs its mode set: an old one may have any mode; a new
/// one was created with `perm | 0o200` under `umask`, and a write by a user
/// without CAP_FSETID clears setuid and setgid.
fn needs_chmod(perm: u32, fresh: bool, umask: u32) -> bool {
    !fresh || perm & 0o6000 != 0 || (perm | 0o200) & !umask != perm
}

/// Sets mtime and mode of a file or directory (by path: no open).
fn finish_entry(path: &Path, e: &Entry, fresh: bool, umask: u32) -> io::Result<()> {
    set_mtime(path, e.mtime, 0)?;
    if e.kind == Kind::Dir || needs_chmod(e.perm, fresh, umask) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(e.perm))?;
    }
    Ok(())
}

/// The process's umask (set and restored at once).
fn umask() -> u32 {
    // SAFETY: umask cannot fail; the old value is put back immediately.
    unsafe {
        let old = libc::umask(0o022);
        libc::umask(old);
        old as u32
    }
}

/// Runs an archive.
pub async fn archive(spec: &ArchiveSpec, progress: &mut dyn Progress) -> Result<ArchiveReport, ArchiveError> {
    let started = Instant::now();
    let src = spec.src.trim_end_matches('/');
    let src = if src.is_empty() { "." } else { src };
    // A destination that is empty (or new) holds nothing to skip or replace.
    let fresh = std::fs::read_dir(&spec.dest).map_or(true, |mut d| d.next().is_none());
    let run = Run { spec, src, umask: umask(), started, fresh };
    if fresh && spec.list.is_none() {
        return run.streamed(progress).await;
    }
    let mut entries = fetch_list(spec).await?;
    entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    entries.dedup_by(|a, b| a.path == b.path);
    let mut items = vec![];
    for e in entries {
        if let Some(item) = run.item(e, &mut |w| progress.warn(w))? {
            items.push(item);
        }
    }
    if items.is_empty() {
        return Err(ArchiveError::BadEntry { path: src.into(), why: "nothing under it in the list".into() });
    }
    check_nesting(&items)?;
    let listed = started.elapsed();
    // The mirrors register the list while the files are made ready here.
    // In a fresh destination a directory is made by the first entry
    // written into it (while the move waits on the links), empty ones at
    // the end. Into an existing destination, directories are put right
    // first, so nothing is judged through a symlink that stood in a
    // directory's place; an interrupted run's list is taken up again if it
    // still holds.
    let chosen = if fresh {
        make_dir_all(&spec.dest).map_err(local(&spec.dest))?;
        choose(&items, &spec.dest, fresh)
    } else {
        make_dirs(&items, &spec.dest)?;
        let again = resumed(&items, &spec.dest, &run.saved(), &journal_path(&run.output()));
        again.unwrap_or_else(|| choose(&items, &spec.dest, fresh))
    };
    let defs = define_everywhere(spec, (!chosen.todo.is_empty()).then(|| definition(&chosen.todo)));
    let mut phases = Phases { list: listed.as_secs_f64(), ..Phases::default() };
    phases.prepare = (started.elapsed() - listed).as_secs_f64();
    let transfer = match chosen.todo.is_empty() {
        true => None,
        false => run.move_part(&chosen.todo, defs, progress, &mut phases).await?,
    };
    run.finish_dirs(&items)?;
    let moved = chosen.todo.iter().filter(|it| it.entry.kind == Kind::File).count() as u64;
    let Chosen { files, links, skipped_files, skipped_bytes, bytes, .. } = chosen;
    let dirs = items.iter().filter(|it| it.entry.kind == Kind::Dir).count() as u64;
    let seconds = started.elapsed().as_secs_f64();
    phases.finish = seconds - phases.list - phases.prepare - phases.check - phases.moving;
    Ok(ArchiveReport {
        src: src.to_string(),
        dest: spec.dest.display().to_string(),
        files,
        dirs,
        links,
        bytes,
        skipped_files,
        skipped_bytes,
        seconds,
        files_per_second: moved as f64 / seconds.max(1e-9),
        mb_per_second: bytes as f64 / 1e6 / seconds.max(1e-9),
        phases,
        parts: u64::from(transfer.is_some()),
        transfer,
    })
}

fn local(path: &Path) -> impl FnOnce(io::Error) -> ArchiveError {
    let path = path.to_path_buf();
    move |source| ArchiveError::Local { path, source }
}

/// What every part of one archive run shares.
struct Run<'a> {
    spec: &'a ArchiveSpec,
    /// SRC, trimmed (`.` for the whole root).
    src: &'a str,
    umask: u32,
    started: Instant,
    /// DEST was empty (or new).
    fresh: bool,
}

/// The mirrors registering a bundle, each answering with its name for it.
type Defining = tokio::task::JoinSet<(Endpoint, Result<String, String>)>;

/// A part of a streamed archive: its files and symlinks, sorted, and the
/// mirrors registering them.
struct Part {
    items: Vec<Item>,
    defs: Defining,
}

impl Run<'_> {
    /// Where the range is journaled (`DEST/.ddftp-archive`, never a file).
    fn output(&self) -> PathBuf {
        self.spec.dest.join(".ddftp-archive")
    }

    /// The list of the range being moved, kept beside its journal.
    fn saved(&self) -> PathBuf {
        self.spec.dest.join(".ddftp-archive.list")
    }

    /// A listed entry as an item under DEST, if it is below SRC; a kind
    /// that is not archived is skipped with a warning.
    fn item(&self, e: Entry, warn: &mut dyn FnMut(&str)) -> Result<Option<Item>, ArchiveError> {
        let Some(rel) = below_src(&e, self.src.as_bytes())? else { return Ok(None) };
        if !matches!(e.kind, Kind::File | Kind::Dir | Kind::Link) {
            warn(&format!("skipping {}: a {:?} is not archived", String::from_utf8_lossy(&e.path), e.kind));
            return Ok(None);
        }
        Ok(Some(Item { entry: e, rel }))
    }

    /// A fresh DEST, SRC walked by a mirror: the move starts while the
    /// mirror still walks. Whenever the mover is free and enough entries
    /// have come, they become a part (a bundle of its own, registered
    /// while the part before it moves); the last part is what is left when
    /// the walk ends. Interrupted, a rerun finds DEST not fresh and takes
    /// the careful path: the whole list, the files already complete
    /// skipped.
    async fn streamed(&self, progress: &mut dyn Progress) -> Result<ArchiveReport, ArchiveError> {
        let spec = self.spec;
        make_dir_all(&spec.dest).map_err(local(&spec.dest))?;
        let (walk_tx, mut walk_rx) = tokio::sync::mpsc::channel(16);
        let (part_tx, mut part_rx) = tokio::sync::mpsc::channel::<Part>(1);
        // While a part moves, the next waits for the walk's end (then it
        // is registered while that part moves): fewer, larger parts.
        let idle = &AtomicBool::new(true);
        let mut phases = Phases::default();
        let walk = async move {
            let mut failures = vec![];
            for ep in &spec.get.mirrors {
                let mut began = false;
                match walk_stream(ep, self.src, spec.get.token.as_deref(), walk_tx.clone(), &mut began).await {
                    Ok(()) => return Ok(()),
                    Err(e) => failures.push(format!("  {ep}: {e}")),
                }
                // Another mirror is asked only if this one sent nothing:
                // what it did send may be moving already.
                if began {
                    break;
                }
            }
            Err(ArchiveError::Walk { src: self.src.to_string(), failures })
        };
        // Entries into parts; directories kept for the end.
        let split = async move {
            let mut warnings = vec![];
            let mut dirs = vec![];
            let mut pending: Vec<Item> = vec![];
            let mut bytes = 0;
            while let Some(batch) = walk_rx.recv().await {
                for e in batch {
                    match self.item(e, &mut |w| warnings.push(w.to_string()))? {
                        Some(it) if it.entry.kind == Kind::Dir => dirs.push(it),
                        Some(it) => {
                            bytes += it.entry.size;
                            pending.push(it)
                        }
                        None => {}
                    }
                }
                let worth = bytes >= spec.part_bytes || pending.len() >= PART_FILES;
                if worth && idle.load(Ordering::Acquire) && part_tx.capacity() > 0 {
                    self.cut(&mut pending, &part_tx).await;
                    bytes = 0;
                }
            }
            Ok::<_, ArchiveError>((dirs, pending, part_tx, warnings))
        };
        let listing = async {
            let (walked, split) = tokio::join!(walk, split);
            let (dirs, mut pending, part_tx, warnings) = walked.and(split)?;
            phases.list = self.started.elapsed().as_secs_f64();
            if !pending.is_empty() {
                self.cut(&mut pending, &part_tx).await;
            }
            Ok::<_, ArchiveError>((dirs, warnings))
        };
        let mut whole = Parts { inner: progress, before: 0, part: 0 };
        let mover = async {
            let mut moved: Vec<Item> = vec![];
            let (mut transfer, mut parts) = (None, 0);
            let mut spent = Phases::default();
            while let Some(part) = part_rx.recv().await {
                idle.store(false, Ordering::Release);
                let todo: Vec<&Item> = part.items.iter().collect();
                let r = self.move_part(&todo, part.defs, &mut whole, &mut spent).await?;
                parts += u64::from(r.is_some());
                transfer = merge_reports(transfer, r);
                drop(todo);
                moved.extend(part.items);
                idle.store(true, Ordering::Release);
            }
            Ok::<_, ArchiveError>((moved, transfer, parts, spent))
        };
        let joined = tokio::try_join!(listing, mover);
        progress.finish();
        let ((dirs, warnings), (moved, transfer, parts, spent)) = joined?;
        for w in &warnings {
            progress.warn(w);
        }
        let mut items = dirs;
        items.extend(moved);
        if items.is_empty() {
            return Err(ArchiveError::BadEntry { path: self.src.into(), why: "nothing under it on the mirror".into() });
        }
        // A walk never puts an entry below a file or a symlink; a mirror
        // that did is named (what was written stayed inside DEST).
        check_nesting(&items)?;
        self.finish_dirs(&items)?;
        let files = items.iter().filter(|it| it.entry.kind == Kind::File);
        let (files, bytes) = files.fold((0, 0), |(n, b), it| (n + 1, b + it.entry.size));
        let seconds = self.started.elapsed().as_secs_f64();
        // The list overlaps the rest: `finish` is what came after both.
        let Phases { prepare, check, moving, .. } = spent;
        phases = Phases { prepare, check, moving, ..phases };
        phases.finish = (seconds - phases.list.max(prepare + check + moving)).max(0.0);
        Ok(ArchiveReport {
            src: self.src.to_string(),
            dest: spec.dest.display().to_string(),
            files,
            dirs: items.iter().filter(|it| it.entry.kind == Kind::Dir).count() as u64,
            links: items.iter().filter(|it| it.entry.kind == Kind::Link).count() as u64,
            bytes,
            skipped_files: 0,
            skipped_bytes: 0,
            seconds,
            files_per_second: files as f64 / seconds.max(1e-9),
            mb_per_second: bytes as f64 / 1e6 / seconds.max(1e-9),
            phases,
            parts,
            transfer,
        })
    }

    /// `pending` (emptied) as the next part: sorted, and sent to every
    /// mirror to register.
    async fn cut(&self, pending: &mut Vec<Item>, parts: &tokio::sync::mpsc::Sender<Part>) {
        let mut items = std::mem::take(pending);
        items.sort_unstable_by(|a, b| a.entry.path.cmp(&b.entry.path));
        let refs: Vec<&Item> = items.iter().collect();
        let defs = define_everywhere(self.spec, Some(definition(&refs)));
        drop(refs);
        // The mover is gone only when it failed: its error is the one told.
        let _ = parts.send(Part { items, defs }).await;
    }

    /// Moves `todo` (files and symlinks) into DEST as one bundle, from the
    /// mirrors registering it (`defs`), and finishes them.
    async fn move_part(
        &self,
        todo: &[&Item],
        mut defs: Defining,
        progress: &mut dyn Progress,
        phases: &mut Phases,
    ) -> Result<Option<TransferReport>, ArchiveError> {
        let (spec, fresh, umask) = (self.spec, self.fresh, self.umask);
        let prepared = Instant::now();
        let store = Arc::new(TreeStore::new(todo, &spec.dest, fresh, umask)?);
        store.create()?;
        phases.prepare += prepared.elapsed().as_secs_f64();
        let waited = Instant::now();
        // The move starts as soon as one mirror has registered the bundle;
        // the others join the running transfer as they do (a slow link
        // takes longer to carry the definition).
        let mut failures = vec![];
        let (name, first) = loop {
            match defs.join_next().await.map(|r| r.expect("define task")) {
                Some((ep, Ok(name))) => break (name, ep),
                Some((ep, Err(e))) => {
                    let w = format!("skipping {ep}: {e}");
                    progress.warn(&w);
                    failures.push(format!("  {w}"));
                }
                None => return Err(ArchiveError::NoBundle { failures }),
            }
        };
        phases.check += waited.elapsed().as_secs_f64();
        let (join_tx, mut joining) = tokio::sync::mpsc::unbounded_channel();
        let expected = name.clone();
        tokio::spawn(async move {
            while let Some((ep, r)) = defs.join_next().await.map(|r| r.expect("define task")) {
                let r = r.and_then(|n| match n == expected {
                    true => Ok(()),
                    false => Err(format!("it registered the list as {n}, the first mirror as {expected}")),
                });
                if join_tx.send((ep, r)).is_err() {
                    return;
                }
            }
        });
        let mut get = spec.get.clone();
        get.path = name;
        get.mirrors = vec![first];
        get.output = self.output();
        get.store = Some(store.clone() as Arc<dyn Store>);
        get.sealed_size = Some(store.layout.size());
        let moving = Instant::now();
        let mut report = None;
        if store.layout.size() > 0 {
            // Kept until the range is complete: a rerun after an interruption
            // moves this list again, and resumes it from the journal.
            let saved = self.saved();
            std::fs::write(&saved, saved_list(todo)).map_err(local(&saved))?;
            match transfer::get_joining(&get, progress, Some(&mut joining)).await {
                Err(e @ (TransferError::Journal(_) | TransferError::BlockSizeMismatch { .. })) => {
                    // An earlier run's journal for another list: start the range over.
                    progress.warn(&format!("{e}; moving the whole range again"));
                    get.restart = true;
                    report = Some(transfer::get_joining(&get, progress, Some(&mut joining)).await?);
                }
                r => report = Some(r?),
            }
            // The range is complete (its journal is gone with it).
            let _ = std::fs::remove_file(&saved);
        }
        phases.moving += moving.elapsed().as_secs_f64();
        let targets = std::mem::take(&mut *store.links.lock().expect("store lock"));
        for (i, it) in todo.iter().enumerate().filter(|(_, it)| it.entry.kind == Kind::Link) {
            let p = spec.dest.join(&it.rel);
            let target = targets.get(&i).cloned().unwrap_or_default();
            remove_any(&p).map_err(local(&p))?;
            in_tree(&p, fresh, || std::os::unix::fs::symlink(OsStr::from_bytes(&target), &p)).map_err(local(&p))?;
            set_mtime(&p, it.entry.mtime, libc::AT_SYMLINK_NOFOLLOW).map_err(local(&p))?;
        }
        // The files not finished as they were written; two threads (two
        // syscalls a file).
        let files: Vec<&&Item> = todo
            .iter()
            .enumerate()
            .filter(|&(i, it)| it.entry.kind == Kind::File && !store.is_finished(i))
            .map(|(_, it)| it)
            .collect();
        let finish = |part: &[&&Item]| -> Result<(), ArchiveError> {
            for it in part {
                let p = spec.dest.join(&it.rel);
                finish_entry(&p, &it.entry, fresh, umask).map_err(local(&p))?;
            }
            Ok(())
        };
        let (a, b) = files.split_at(files.len() / 2);
        std::thread::scope(|sc| {
            let other = sc.spawn(|| finish(b));
            finish(a).and(other.join().expect("finishing thread panicked"))
        })?;
        Ok(report)
    }

    /// Directories last, deepest first: writing inside one changes its
    /// mtime. In a fresh destination, one nothing was written into is made
    /// now (which changes only its parent, one level up). Each level on two
    /// threads.
    fn finish_dirs(&self, items: &[Item]) -> Result<(), ArchiveError> {
        let mut dirs: Vec<(usize, &Item)> =
            items.iter().filter(|it| it.entry.kind == Kind::Dir).map(|it| (it.rel.components().count(), it)).collect();
        dirs.sort_unstable_by_key(|&(depth, _)| std::cmp::Reverse(depth));
        let finish = |part: &[(usize, &Item)]| -> Result<(), ArchiveError> {
            for (_, it) in part {
                let p = self.spec.dest.join(&it.rel);
                let made = match finish_entry(&p, &it.entry, self.fresh, self.umask) {
                    Err(e) if self.fresh && e.kind() == io::ErrorKind::NotFound => {
                        make_dir_all(&p).map_err(local(&p))?;
                        finish_entry(&p, &it.entry, self.fresh, self.umask)
                    }
                    r => r,
                };
                made.map_err(local(&p))?;
            }
            Ok(())
        };
        for level in dirs.chunk_by(|a, b| a.0 == b.0) {
            let (a, b) = level.split_at(level.len() / 2);
            std::thread::scope(|sc| {
                let other = sc.spawn(|| finish(b));
                finish(a).and(other.join().expect("finishing thread panicked"))
            })?;
        }
        Ok(())
    }
}

/// The progress of a streamed archive's parts as one: their bytes add up,
/// and the bar ends when the archive does.
struct Parts<'a> {
    inner: &'a mut dyn Progress,
    /// Bytes of the parts before this one.
    before: u64,
    /// Bytes of this one.
    part: u64,
}

impl Progress for Parts<'_> {
    fn start(&mut self, total: u64, mirrors: &[String]) {
        self.part = total;
        self.inner.start(self.before + total, mirrors);
    }
    fn update(&mut self, done: u64, per_mirror: &[u64]) {
        self.inner.update(self.before + done, per_mirror);
    }
    fn warn(&mut self, msg: &str) {
        self.inner.warn(msg);
    }
    fn joined(&mut self, mirror: &str) {
        self.inner.joined(mirror);
    }
    fn finish(&mut self) {
        self.before += self.part;
        self.part = 0;
    }
}

/// One report for the parts of a streamed archive: sums, and each
/// mirror's share of all of it.
fn merge_reports(a: Option<TransferReport>, b: Option<TransferReport>) -> Option<TransferReport> {
    let (mut a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (a, b) => return a.or(b),
    };
    a.bytes += b.bytes;
    a.reused_bytes += b.reused_bytes;
    a.seconds += b.seconds;
    a.starts += b.starts;
    a.extends += b.extends;
    a.ends += b.ends;
    a.duplicate_bytes += b.duplicate_bytes;
    a.verified &= b.verified;
    for p in b.producers {
        match a.producers.iter_mut().find(|q| q.mirror == p.mirror) {
            Some(q) => {
                q.blocks += p.blocks;
                q.bytes += p.bytes;
            }
            None => a.producers.push(p),
        }
    }
    let total: u64 = a.producers.iter().map(|p| p.bytes).sum();
    for p in &mut a.producers {
        p.share = if total > 0 { p.bytes as f64 / total as f64 } else { 0.0 };
    }
    for l in b.links {
        match a.links.iter_mut().find(|m| m.route == l.route) {
            Some(m) => {
                m.blocks += l.blocks;
                m.bytes += l.bytes;
            }
            None => a.links.push(l),
        }
    }
    a.warnings.extend(b.warnings);
    Some(a)
}

/// The entries to move, and what the listing holds.
struct Chosen<'a> {
    todo: Vec<&'a Item>,
    files: u64,
    links: u64,
    skipped_files: u64,
    skipped_bytes: u64,
    /// Bytes of the files in `todo`.
    bytes: u64,
}

/// The files and symlinks to move: all of them into a fresh destination,
/// else those not already complete and correct there.
fn choose<'a>(items: &'a [Item], dest: &Path, fresh: bool) -> Chosen<'a> {
    let mut c = Chosen { todo: vec![], files: 0, links: 0, skipped_files: 0, skipped_bytes: 0, bytes: 0 };
    for it in items.iter().filter(|it| it.entry.kind != Kind::Dir) {
        if it.entry.kind == Kind::File {
            c.files += 1;
            if !fresh && is_done(&dest.join(&it.rel), &it.entry) {
                c.skipped_files += 1;
                c.skipped_bytes += it.entry.size;
                continue;
            }
            c.bytes += it.entry.size;
        } else {
            c.links += 1;
        }
        c.todo.push(it);
    }
    c
}

/// The bundle's definition: `todo` as a ddftp list, packed for the wire.
fn definition(todo: &[&Item]) -> Vec<u8> {
    // A mirror checks each entry's kind, size and mtime as it reads it;
    // modes are left out (zero), so the packed list reaches a slow mirror
    // sooner.
    packed_list(todo, |e| Entry { perm: 0, ..e.clone() })
}

/// The list of what this run moves, kept beside the journal so that a run
/// interrupted and run again takes up the same range (entries whole).
fn saved_list(todo: &[&Item]) -> Vec<u8> {
    packed_list(todo, Entry::clone)
}

fn packed_list(todo: &[&Item], entry: impl Fn(&Entry) -> Entry) -> Vec<u8> {
    let mut list = ddftp::MAGIC.to_vec();
    for it in todo {
        ddftp::push_record(&mut list, &entry(&it.entry));
    }
    packed::pack(&list)
}

/// Asks every mirror to register the bundle defined by `def` (if there is
/// anything to move); each task answers with its mirror.
fn define_everywhere(
    spec: &ArchiveSpec,
    def: Option<Vec<u8>>,
) -> tokio::task::JoinSet<(Endpoint, Result<String, String>)> {
    let mut set = tokio::task::JoinSet::new();
    let Some(def) = def else { return set };
    let def: Arc<[u8]> = def.into();
    for ep in &spec.get.mirrors {
        let (ep, def, token) = (ep.clone(), def.clone(), spec.get.token.clone());
        set.spawn(async move {
            let r = define_on(&ep, &def, token.as_deref()).await;
            (ep, r)
        });
    }
    set
}

/// The list an interrupted run was moving, if its journal is still here,
/// the listing still holds every one of its entries unchanged, and every
/// other listed file is complete in `dest` (one that is not, new since or
/// gone from DEST, would otherwise pass as skipped): moving it again
/// resumes from the journal. (Files it finished would pass as complete now,
/// so a list chosen afresh, and its journal, would not match.)
fn resumed<'a>(items: &'a [Item], dest: &Path, saved: &Path, journal: &Path) -> Option<Chosen<'a>> {
    if !journal.exists() {
        return None;
    }
    let list = packed::unpack(&std::fs::read(saved).ok()?, MAX_LIST).ok()?;
    let entries = ddftp::read(&list[..], saved).ok()?;
    let listed: HashMap<&[u8], &Item> =
        items.iter().filter(|it| it.entry.kind != Kind::Dir).map(|it| (it.entry.path.as_slice(), it)).collect();
    let mut todo = Vec::with_capacity(entries.len());
    for e in &entries {
        todo.push(*listed.get(e.path.as_slice()).filter(|it| it.entry == *e)?);
    }
    let again: HashSet<&[u8]> = entries.iter().map(|e| e.path.as_slice()).collect();
    let others = items.iter().filter(|it| it.entry.kind == Kind::File && !again.contains(it.entry.path.as_slice()));
    if others.into_iter().any(|it| !is_done(&dest.join(&it.rel), &it.entry)) {
        return None;
    }
    let files = items.iter().filter(|it| it.entry.kind == Kind::File);
    let (all_files, all_bytes) = files.fold((0, 0), |(n, b), it| (n + 1, b + it.entry.size));
    let moving = todo.iter().filter(|it| it.entry.kind == Kind::File);
    let (moved, bytes) = moving.fold((0, 0), |(n, b), it| (n + 1, b + it.entry.size));
    Some(Chosen {
        todo,
        files: all_files,
        links: items.iter().filter(|it| it.entry.kind == Kind::Link).count() as u64,
        skipped_files: all_files - moved,
        skipped_bytes: all_bytes - bytes,
        bytes,
    })
}

/// Makes the listed directories in an existing destination, owner-writable
/// until the end so files can be created inside (parents sort before
/// children); whatever stands in a directory's place goes. Returns how many
/// directories the list holds.
fn make_dirs(items: &[Item], dest: &Path) -> Result<u64, ArchiveError> {
    let mut dirs = 0;
    for it in items.iter().filter(|it| it.entry.kind == Kind::Dir) {
        dirs += 1;
        let p = dest.join(&it.rel);
        let local = |source| ArchiveError::Local { path: p.clone(), source };
        if p.symlink_metadata().is_ok_and(|m| !m.is_dir()) {
            remove_any(&p).map_err(local)?;
        }
        std::fs::create_dir_all(&p).map_err(local)?;
        let mode = p.metadata().map_err(local)?.mode();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode | 0o700)).map_err(local)?;
    }
    Ok(dirs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(path: &str, size: u64, perm: u32, sec: i64) -> Item {
        let entry = Entry { path: path.into(), kind: Kind::File, perm, size, mtime: Time { sec, nsec: 5 } };
        Item { entry, rel: PathBuf::from(path) }
    }

    #[test]
    fn paths_below_src_and_nesting() {
        let e = |path: &str, kind| Entry { path: path.into(), kind, perm: 0, size: 0, mtime: Time::default() };
        let rel = |path: &str, src: &str| {
            below_src(&e(path, Kind::File), src.as_bytes()).map(|r| r.map(|p| p.into_os_string()))
        };
        assert_eq!(rel("proj/a/b", "proj").unwrap().unwrap(), "a/b");
        assert_eq!(rel("proj//a/./b", "proj").unwrap().unwrap(), "a/b");
        assert_eq!(rel("proj", "proj").unwrap().unwrap(), "");
        assert_eq!(rel("project/a", "proj").unwrap(), None);
        assert_eq!(rel("a/b", ".").unwrap().unwrap(), "a/b");
        assert!(rel("proj/../etc", "proj").is_err());
        let items = |list: &[(&str, Kind)]| -> Vec<Item> {
            list.iter().map(|&(p, k)| Item { entry: e(p, k), rel: PathBuf::from(p) }).collect()
        };
        let ok = [("a", Kind::Dir), ("a-b", Kind::File), ("a/b", Kind::Dir), ("a/b/c", Kind::Link), ("ab", Kind::File)];
        assert!(check_nesting(&items(&ok)).is_ok());
        for (bad, under) in [
            (&[("a", Kind::Link), ("a-b", Kind::File), ("a/b", Kind::File)][..], "a/b"),
            (&[("a", Kind::Dir), ("a/b", Kind::File), ("a/b/c/d", Kind::File)][..], "a/b/c/d"),
        ] {
            match check_nesting(&items(bad)) {
                Err(ArchiveError::BadEntry { path, .. }) => assert_eq!(path, under),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn whole_files_are_finished_as_written_and_once() {
        let dir = tempfile::tempdir().unwrap();
        let items = [item("a", 3, 0o640, 1_000_000_000), item("b", 2, 0o444, 1_100_000_000)];
        let refs: Vec<&Item> = items.iter().collect();
        let store = TreeStore::new(&refs, dir.path(), true, 0o022).unwrap();
        store.create().unwrap();
        store.write_all_at(b"abcde", 0).unwrap();
        for (it, want) in items.iter().zip([&b"abc"[..], b"de"]) {
            let p = dir.path().join(&it.rel);
            assert_eq!(std::fs::read(&p).unwrap(), want);
            assert!(is_done(&p, &it.entry), "{p:?} not finished");
        }
        assert!(store.is_finished(0) && store.is_finished(1));
        // The same bytes again (a pair's overlap): dropped, mtime kept.
        store.write_all_at(b"abcde", 0).unwrap();
        assert!(is_done(&dir.path().join("a"), &items[0].entry));
    }

    #[test]
    fn a_resumed_run_leaves_files_an_interrupted_one_finished() {
        let dir = tempfile::tempdir().unwrap();
        let items = [item("a", 3, 0o444, 1_000_000_000), item("b", 3, 0o644, 1_000_000_000)];
        let refs: Vec<&Item> = items.iter().collect();
        TreeStore::new(&refs, dir.path(), true, 0o022).unwrap().write_all_at(b"abc", 0).unwrap();
        // Same size, mode and mtime: complete, so not written again (the
        // other bytes prove it), though read-only.
        std::fs::set_permissions(dir.path().join("a"), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::write(dir.path().join("a"), b"xyz").unwrap();
        std::fs::set_permissions(dir.path().join("a"), std::fs::Permissions::from_mode(0o444)).unwrap();
        set_mtime(&dir.path().join("a"), items[0].entry.mtime, 0).unwrap();
        let again = TreeStore::new(&refs, dir.path(), false, 0o022).unwrap();
        again.create().unwrap();
        again.write_all_at(b"abcdef", 0).unwrap();
        assert_eq!(std::fs::read(dir.path().join("a")).unwrap(), b"xyz");
        assert_eq!(std::fs::read(dir.path().join("b")).unwrap(), b"def");
        assert!(is_done(&dir.path().join("b"), &items[1].entry));
    }
}
