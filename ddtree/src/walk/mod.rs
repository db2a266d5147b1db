//! `ddftp walk`: a parallel tree walk that lstats every entry.
//!
//! [`drqs`] spreads directories over threads with no master; this module is
//! what a worker does with one directory: read it, lstat each entry
//! relative to the open directory (no path lookup from the root), count it,
//! append its record to the worker's own buffer, and queue subdirectories.
//! Symlinks are listed, never followed. A directory that cannot be read is
//! reported and counted, and the walk goes on.
//!
//! Records are formatted by the worker that found them and written in
//! 1 MiB batches, so output costs one write per thousands of entries and
//! memory stays bounded (workers' queues hold directories, not entries).

mod dir;
pub use dir::{open_deep, Dir};
pub mod drqs;
#[cfg(feature = "mpi")]
pub mod mpi;

use std::ffi::CStr;
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use serde::Serialize;

use crate::list::mfu::{self, Spool};
use crate::list::{ddftp, Kind, Meta};

/// `lstat` of a path, as the kernel fills it.
fn lstat_path(p: &Path) -> std::io::Result<libc::stat> {
    let c = std::ffi::CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // SAFETY: `st` is plain data the call fills; `c` is NUL-terminated.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::lstat(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st)
}

/// Where the records go.
pub enum Output {
    /// Counting only.
    None,
    /// A ddftp list.
    List(Box<dyn Write + Send>),
    /// An mpifileutils v4 list, built through a spool (see [`mfu`]).
    Mfu(Spool),
}

/// Totals, counted as `find` counts (the root included).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub dirs: u64,
    pub files: u64,
    pub links: u64,
    /// Block and character devices, FIFOs, sockets.
    pub others: u64,
    /// Sum of the regular files' sizes.
    pub bytes: u64,
    /// Directories that could not be read, and entries that could not be
    /// lstat'ed (each reported on stderr).
    pub errors: u64,
}

impl Totals {
    pub fn entries(&self) -> u64 {
        self.dirs + self.files + self.links + self.others
    }

    pub fn add(&mut self, o: &Totals) {
        self.dirs += o.dirs;
        self.files += o.files;
        self.links += o.links;
        self.others += o.others;
        self.bytes += o.bytes;
        self.errors += o.errors;
    }

    fn count(&mut self, kind: Kind, size: u64) {
        match kind {
            Kind::Dir => self.dirs += 1,
            Kind::File => {
                self.files += 1;
                self.bytes += size;
            }
            Kind::Link => self.links += 1,
            _ => self.others += 1,
        }
    }
}

/// What a walk did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    #[serde(flatten)]
    pub totals: Totals,
    pub seconds: f64,
    /// Entries lstat'ed per worker (shows how DRQS spread the work).
    pub per_worker: Vec<u64>,
    /// Directories each worker read.
    pub per_worker_dirs: Vec<u64>,
    /// Work requests sent, over all workers.
    pub requests: u64,
}

/// Why a walk failed as a whole (a bad directory inside it does not).
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("{}: {source}", path.display())]
    Root { path: PathBuf, source: std::io::Error },
    #[error("writing the list: {0}")]
    Output(#[source] std::io::Error),
}

/// Which records a worker builds.
#[derive(Clone, Copy)]
enum Format {
    None,
    List,
    Mfu,
}

/// One worker's own counts and record buffer.
struct Local {
    totals: Totals,
    entries: u64,
    buf: Vec<u8>,
    /// Bytes `buf` is written out at (see [`FIRST_BATCH`]).
    batch: usize,
    buffered: u64,
    longest: usize,
    ids: mfu::Ids,
    /// Where `getdents64` puts a directory's entries.
    entries_buf: Vec<u8>,
    /// User and group names looked up so far.
    names: crate::names::Names,
}

/// How to walk: threads, how paths are shown, what to leave out.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Worker threads (at least 1).
    pub threads: usize,
    /// Show paths with this in place of the root's own path (a server lists
    /// paths relative to what it serves).
    pub label: Option<Vec<u8>>,
    /// Paths neither listed nor entered (a server's index directory).
    pub skip: Vec<PathBuf>,
    /// Rules that leave entries out (neither listed nor entered), on
    /// paths below the root (`--exclude` sent by a client).
    pub prune: Option<std::sync::Arc<crate::filter::Filter>>,
    /// What alone may be listed or entered, whatever else says (a server
    /// showing only some of its root): given a path below the root.
    pub within: Option<Within>,
    /// Told what could not be read; without it, a `tracing` warning.
    pub on_error: Option<OnError>,
    /// What is listed beyond what `lstat` says.
    pub extra: Extra,
}

/// What a ddftp list may carry beyond `lstat`'s fields, each costing
/// calls per entry.
#[derive(Debug, Clone, Default)]
pub struct Extra {
    /// Each entry's extended attributes (ACLs among them).
    pub xattrs: bool,
    /// The names of each entry's owner and group.
    pub names: bool,
    /// rsync's `dir-merge NAME`: the content of each regular file of
    /// this name is listed with it (its directory's filter rules), and it
    /// is listed even where the prune rules exclude it. Several names
    /// are `/`-separated (no name holds one).
    pub merge: Option<std::sync::Arc<[u8]>>,
    /// rsync's `-x` (1): a directory on another file system than the
    /// root's (a mount point) is listed, not entered; `-xx` (2): not
    /// listed either.
    pub one_fs: u8,
}

impl Extra {
    /// Whether `name` is one of [`Extra::merge`]'s.
    fn is_merge_name(&self, name: &[u8]) -> bool {
        self.merge.as_deref().is_some_and(|m| m.split(|&b| b == b'/').any(|m| m == name))
    }
}

/// Whether a path below a walk's root may be listed at all.
#[derive(Clone)]
pub struct Within(pub std::sync::Arc<dyn Fn(&std::path::Path) -> bool + Send + Sync>);

impl std::fmt::Debug for Within {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Within")
    }
}

/// Where a walk tells what it could not read: the path as it would be
/// listed, and why. The walk goes on.
#[derive(Clone)]
pub struct OnError(pub std::sync::Arc<Tell>);

/// Told a path as it would be listed, and why it could not be read.
pub type Tell = dyn Fn(&[u8], &str) + Send + Sync;

impl std::fmt::Debug for OnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OnError")
    }
}

/// Shared by the workers: the output, behind a lock taken once per batch.
struct Sink {
    format: Format,
    out: Mutex<(Output, Option<std::io::Error>)>,
    /// Bytes of the root's path replaced by `label` in what is recorded.
    cut: usize,
    label: Option<Vec<u8>>,
    skip: Vec<PathBuf>,
    prune: Option<std::sync::Arc<crate::filter::Filter>>,
    within: Option<Within>,
    on_error: Option<OnError>,
    extra: Extra,
    /// With `-x`, the root's file system: directories on others are not
    /// entered.
    dev: Option<u64>,
}

/// Bytes of records a worker writes out at once (the output's lock is
/// taken once per batch)...
const BATCH: usize = 1 << 20;
/// ...after first batches of this, doubling: whoever reads the list as it
/// comes (an archive moves files while a mirror still walks) gets the first
/// entries within milliseconds, not after a megabyte of them.
const FIRST_BATCH: usize = 16 << 10;

impl Sink {
    /// What could not be read at `path` (counted, and told).
    /// `path` as it is listed: the root's own path replaced by the label.
    fn shown<'p>(&self, path: &'p [u8]) -> std::borrow::Cow<'p, [u8]> {
        match &self.label {
            Some(label) => [label, path.get(self.cut..).unwrap_or_default()].concat().into(),
            None => path.into(),
        }
    }

    fn error(&self, l: &mut Local, path: &[u8], why: String) {
        l.totals.errors += 1;
        let path = &*self.shown(path);
        match &self.on_error {
            Some(OnError(tell)) => tell(path, &why),
            None => tracing::warn!(path = %String::from_utf8_lossy(path), "cannot read: {why}"),
        }
    }

    /// What a ddftp list says of an entry beyond its stat's fixed fields:
    /// owner, hard-link id, device numbers, and (a few calls more, made
    /// only where they can find something) a sparse file's data runs and
    /// the xattrs asked for, a symlink's target. `at`: the entry's directory and name. What
    /// cannot be read of these is told, and the entry listed without it.
    fn meta(&self, l: &mut Local, path: &[u8], st: &libc::stat, at: Option<(&dir::Dir, &CStr)>) -> Meta {
        let mut m = Meta::of(st.st_mode, st.st_uid, st.st_gid, st.st_nlink, (st.st_dev, st.st_ino), st.st_rdev);
        if !matches!(self.format, Format::List) {
            return m;
        }
        let file = st.st_mode & libc::S_IFMT == libc::S_IFREG;
        let (size, allocated) = (st.st_size as u64, st.st_blocks as u64 * 512);
        let whole = || std::ffi::CString::new(path).unwrap_or_default();
        if file && size > 0 && allocated < size {
            let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
            let fd = match at {
                Some((d, n)) => dir::open_at(d.fd(), n, flags),
                None => dir::open_at(libc::AT_FDCWD, &whole(), flags),
            };
            match fd.and_then(|fd| crate::attrs::data_runs(std::os::fd::AsRawFd::as_raw_fd(&fd), size)) {
                Ok(Some(runs)) => m.rare_mut().data = Some(runs),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(path = %String::from_utf8_lossy(path), "cannot find its holes (listed whole): {e}")
                }
            }
        }
        if st.st_mode & libc::S_IFMT == libc::S_IFLNK {
            let target = match at {
                Some((d, n)) => crate::attrs::read_link(d.fd(), n),
                None => crate::attrs::read_link(libc::AT_FDCWD, &whole()),
            };
            match target {
                Ok(t) => m.rare_mut().target = Some(t),
                Err(e) => tracing::warn!(path = %String::from_utf8_lossy(path), "cannot read its target: {e}"),
            }
        }
        if let (true, Some((d, n))) = (file, at.filter(|(_, n)| self.extra.is_merge_name(n.to_bytes()))) {
            match read_merge_file(d, n) {
                Ok(text) => m.rare_mut().rules = Some(text),
                Err(e) => self.error(l, path, format!("cannot read its filter rules: {e}")),
            }
        }
        if self.extra.names {
            let user = l.names.user(st.st_uid);
            let group = l.names.group(st.st_gid);
            m.rare_mut().names = Some((user, group));
        }
        if self.extra.xattrs {
            let p = match at {
                Some((d, n)) => crate::attrs::at(d.fd(), n.to_bytes()),
                None => Ok(whole()),
            };
            match p.and_then(|p| crate::attrs::read_xattrs(&p)) {
                Ok(xs) => m.rare_mut().xattrs = Some(xs),
                Err(e) => self.error(l, path, format!("cannot read its extended attributes: {e}")),
            }
        }
        m
    }

    /// Whether `name` is a regular file of the name of [`Extra::merge`].
    fn is_merge_file(&self, name: &CStr, st: &mfu::Stat) -> bool {
        self.extra.is_merge_name(name.to_bytes()) && Kind::from_mode(st.mode) == Some(Kind::File)
    }

    fn record(&self, l: &mut Local, path: &[u8], st: &mfu::Stat, meta: &Meta) {
        l.entries += 1;
        let shown = self.shown(path);
        let path = &*shown;
        let Some(kind) = Kind::from_mode(st.mode) else {
            l.totals.others += 1;
            return;
        };
        l.totals.count(kind, st.size);
        match self.format {
            Format::None => return,
            Format::List => {
                ddftp::push_fields(&mut l.buf, path, kind, st.mode & 0o7777, st.size, st.mtime, meta);
            }
            Format::Mfu => {
                mfu::spool_record(&mut l.buf, &mut l.ids, path, st);
                l.longest = l.longest.max(path.len());
            }
        }
        l.buffered += 1;
        if l.buf.len() >= l.batch {
            self.flush(l);
            l.batch = (l.batch * 2).min(BATCH);
        }
    }

    fn flush(&self, l: &mut Local) {
        if l.buf.is_empty() {
            return;
        }
        let mut g = self.out.lock().expect("output lock");
        let (out, err) = &mut *g;
        if err.is_none() {
            let r = match out {
                Output::None => Ok(()),
                Output::List(w) => w.write_all(&l.buf),
                Output::Mfu(s) => s.append(&l.buf, l.buffered, l.longest, &l.ids),
            };
            if let Err(e) = r {
                *err = Some(e);
            }
        }
        l.buf.clear();
        l.buffered = 0;
        l.ids = mfu::Ids::default();
    }
}

/// Walks `root` with `threads` workers, writing records to `output`.
pub fn walk(root: &Path, threads: usize, output: Output) -> Result<(Report, Output), WalkError> {
    walk_with(root, &Options { threads, ..Options::default() }, output)
}

/// [`walk`] with every option.
pub fn walk_with(root: &Path, opts: &Options, output: Output) -> Result<(Report, Output), WalkError> {
    let threads = opts.threads;
    walk_on(root, opts, output, true, |seed, init, process| drqs::run(threads, seed, init, process))
}

/// The walk around an engine that spreads directories over workers:
/// `engine(seed, init, process)` runs `process` on every directory and
/// returns each worker's state. `first` says whether this process records
/// the root and seeds the walk (under MPI only rank 0 does).
fn walk_on<E>(
    root: &Path,
    opts: &Options,
    output: Output,
    first: bool,
    engine: E,
) -> Result<(Report, Output), WalkError>
where
    E: FnOnce(
        Vec<PathBuf>,
        &(dyn Fn(usize) -> Local + Sync),
        &(dyn Fn(&mut Local, PathBuf, &mut Vec<PathBuf>) + Sync),
    ) -> Vec<(Local, drqs::WorkerStats)>,
{
    let t0 = Instant::now();
    let md = std::fs::symlink_metadata(root).map_err(|source| WalkError::Root { path: root.to_owned(), source })?;
    let format = match output {
        Output::None => Format::None,
        Output::List(_) => Format::List,
        Output::Mfu(_) => Format::Mfu,
    };
    let mut output = output;
    if let Output::List(w) = &mut output {
        w.write_all(ddftp::MAGIC).map_err(WalkError::Output)?;
    }
    let sink = Sink {
        format,
        out: Mutex::new((output, None)),
        // Without its trailing `/`: below `/` itself, a path is `/NAME`.
        cut: root.as_os_str().as_bytes().iter().rposition(|&b| b != b'/').map_or(0, |i| i + 1),
        label: opts.label.clone(),
        skip: opts.skip.clone(),
        prune: opts.prune.clone(),
        within: opts.within.clone(),
        on_error: opts.on_error.clone(),
        extra: opts.extra.clone(),
        dev: (opts.extra.one_fs > 0).then(|| std::os::unix::fs::MetadataExt::dev(&md)),
    };
    let new_local = |_| Local {
        totals: Totals::default(),
        entries: 0,
        buf: Vec::new(),
        batch: FIRST_BATCH,
        buffered: 0,
        longest: 0,
        ids: mfu::Ids::default(),
        entries_buf: Vec::new(),
        names: Default::default(),
    };
    let mut top = new_local(0);
    let mut seed = Vec::new();
    if first {
        let path = root.as_os_str().as_bytes();
        let st = lstat_path(root).map_err(|source| WalkError::Root { path: root.to_owned(), source })?;
        let meta = sink.meta(&mut top, path, &st, None);
        sink.record(&mut top, path, &mfu::Stat::from_metadata(&md), &meta);
        if md.is_dir() {
            seed.push(root.to_owned());
        }
    }
    let results = engine(seed, &new_local, &|l, dir, queue| scan(&sink, l, dir, queue));
    let mut totals = top.totals.clone();
    sink.flush(&mut top);
    let mut per_worker = Vec::new();
    let mut per_worker_dirs = Vec::new();
    let mut requests = 0;
    for (mut l, stats) in results {
        sink.flush(&mut l);
        totals.add(&l.totals);
        per_worker.push(l.entries + if per_worker.is_empty() { top.entries } else { 0 });
        per_worker_dirs.push(stats.items);
        requests += stats.requests;
    }
    let (mut output, err) = sink.out.into_inner().expect("output lock");
    if let Some(e) = err {
        return Err(WalkError::Output(e));
    }
    if let Output::List(w) = &mut output {
        w.flush().map_err(WalkError::Output)?;
    }
    let report = Report { totals, seconds: t0.elapsed().as_secs_f64(), per_worker, per_worker_dirs, requests };
    Ok((report, output))
}

/// Reads one directory: records every entry, queues subdirectories.
fn scan(sink: &Sink, l: &mut Local, dir: PathBuf, queue: &mut Vec<PathBuf>) {
    let mut path = dir.into_os_string().into_vec();
    path.push(0);
    let opened = CStr::from_bytes_with_nul(&path)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a NUL byte in the path"))
        .and_then(dir::Dir::open);
    path.pop();
    let d = match opened {
        Ok(d) => d,
        Err(e) => {
            sink.error(l, &path, format!("cannot read directory: {e}"));
            return;
        }
    };
    if path.last() != Some(&b'/') {
        path.push(b'/');
    }
    let base = path.len();
    let mut buf = std::mem::take(&mut l.entries_buf);
    buf.resize(dir::READ_SIZE, 0);
    loop {
        let n = match d.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                sink.error(l, &path[..base - 1], format!("reading directory: {e}"));
                break;
            }
        };
        for name in dir::names(&buf[..n]) {
            path.truncate(base);
            path.extend_from_slice(name.to_bytes());
            if !sink.skip.is_empty() && sink.skip.iter().any(|s| s.as_os_str().as_bytes() == &path[..]) {
                continue;
            }
            match d.lstat(name) {
                Ok(raw) => {
                    let st = mfu::Stat::from_lstat(&raw);
                    let rel =
                        || std::path::Path::new(std::ffi::OsStr::from_bytes(&path[(sink.cut + 1).min(path.len())..]));
                    if sink.within.as_ref().is_some_and(|w| !(w.0)(rel())) {
                        continue;
                    }
                    if let Some(f) = &sink.prune {
                        let rel = rel();
                        let is_dir = Kind::from_mode(st.mode) == Some(Kind::Dir);
                        if f.prunes(rel, is_dir) && !sink.is_merge_file(name, &st) {
                            continue;
                        }
                    }
                    let here = sink.dev.is_none_or(|dev| raw.st_dev == dev);
                    let is_dir = Kind::from_mode(st.mode) == Some(Kind::Dir);
                    // `-xx`: a mount point is left out, not made empty.
                    if !here && is_dir && sink.extra.one_fs > 1 {
                        continue;
                    }
                    let meta = sink.meta(l, &path, &raw, Some((&d, name)));
                    sink.record(l, &path, &st, &meta);
                    if is_dir && here {
                        queue.push(PathBuf::from(std::ffi::OsString::from_vec(path.clone())));
                    }
                }
                Err(e) => sink.error(l, &path, format!("cannot lstat: {e}")),
            }
        }
    }
    l.entries_buf = buf;
}

/// The content of a merge file `n` in `d` (at most
/// [`crate::filter::merge::MAX_FILE`] bytes; a larger one is refused, not
/// cut: the rules after the cut would be lost).
fn read_merge_file(d: &dir::Dir, n: &CStr) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let fd = dir::open_at(d.fd(), n, libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK)?;
    let max = crate::filter::merge::MAX_FILE;
    let mut text = Vec::new();
    std::fs::File::from(fd).take(max as u64 + 1).read_to_end(&mut text)?;
    if text.len() > max {
        return Err(std::io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(text)
}
