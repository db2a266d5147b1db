//! Bundles: many files served as one linear range of bytes.
//!
//! `ddftp archive` moves a whole tree with the same dual-direction engine as
//! `get`: it sends each mirror the ordered list of the files (and symlinks)
//! to move, and the mirror registers the bundle under a name derived from
//! the list. `Start` on that name then treats the entries' bytes, back to
//! back, as one file: a block may hold hundreds of small files, so small
//! files cost no round trip each. A symlink's bytes are its target.
//!
//! A bundle has no digests to vote on and no chunk manifest: computing
//! them would read the whole tree on every mirror before a byte moves
//! (for 100,000 small files that took longer than the walk, and for an
//! archive of terabytes it would be hours). Instead each block goes out
//! sealed (`Reply::SealedBlock`): with the BLAKE3 hash of its bytes as this
//! mirror read them, which the client checks before it writes them. What
//! makes every mirror's bytes the same is the check of each entry against
//! the list (kind, size, and a file's mtime: the quick check rsync and our
//! digest index rely on), made whenever the entry is read, on the
//! descriptor it is read through: a stale mirror is refused at its first
//! differing entry, which the client is told, and the other mirrors send
//! those blocks.
//!
//! Registering only checks the paths (relative, no `..`, not the index): a
//! mirror answers at once, with no pass over a hundred thousand files
//! before the move can start. Entries are opened beneath
//! the root with `openat2` refusing every symlink on the way
//! (`RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`): a symlinked directory cannot
//! lead a bundle out of the root, not even one put in place after the
//! bundle was registered. A read opens each directory so once and its
//! files beneath it (the files of a block share a few directories: one
//! path walk each, not one a file).
//!
//! Every mirror given the same list registers the same name, so any
//! connection to any mirror can serve any block of it.

use std::collections::{HashMap, VecDeque};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::{Arc, Mutex};

use ddftp_proto::manifest::hex;
use ddtree::layout::Layout;
use ddtree::list::{ddftp, Kind, Time};

use crate::root::Root;

/// What a bundle name starts with. A name of exactly this form (the prefix
/// and 32 hex digits) always means a bundle, never a file under the root.
pub const PREFIX: &str = "@bundle/";
/// Bundles kept at once; the oldest is forgotten first.
const KEEP: usize = 16;
/// Memory the kept bundles may take (their entries' paths and sizes).
/// The newest bundle is always kept.
const KEEP_BYTES: usize = 64 << 20;
/// Largest definition a server takes in, unpacked (about 400,000 entries
/// of 50-byte paths). With the packed bytes of definitions being uploaded
/// ([`UPLOADS`], server-wide) and one definition turned into a bundle at a
/// time, this bounds what bundles cost the server whatever clients do.
pub const MAX_DEFINITION: usize = 32 << 20;
/// Packed definition bytes all connections together may have uploaded
/// and not yet registered.
pub const UPLOADS: usize = 32 << 20;
/// What one entry costs a bundle besides its path.
const PIECE_COST: usize = std::mem::size_of::<Piece>() + 16;

/// One entry of a bundle: its directory (in `Bundle::dirs`) and name
/// there, whether it is a symlink, and its listed mtime (its size is the
/// layout's).
#[derive(Debug)]
struct Piece {
    dir: usize,
    name: CString,
    link: bool,
    mtime: Time,
    /// The file's listed size, and for a sparse one the data runs it
    /// moves (the layout's bytes are the runs back to back).
    size: u64,
    runs: Option<Box<[(u64, u64)]>>,
}

/// A registered bundle.
#[derive(Debug)]
pub struct Bundle {
    pub name: String,
    pub size: u64,
    /// Memory its entries take (about).
    footprint: usize,
    /// The root, opened once: entries are opened beneath it.
    root: OwnedFd,
    /// The entries' directories below the root (one per run of entries
    /// sharing one; empty: the root).
    dirs: Vec<CString>,
    pieces: Vec<Piece>,
    layout: Layout,
    /// When it was registered: an entry changed since (its ctime says) is
    /// being written while the archive runs, not a stale copy.
    registered: (i64, i64),
    /// Seals of blocks sent or asked for (`Seals`), by (block size,
    /// block): receivers sharing the bundle ask for the seals of blocks
    /// another receiver took from here, so each is read and hashed about
    /// once. At most [`KEPT_SEALS`]; past that, computed again.
    seals: Mutex<HashMap<(u32, u64), [u8; 32]>>,
}

/// Seals a bundle keeps (about 48 bytes each).
const KEPT_SEALS: usize = 1 << 16;

/// Why a bundle definition was refused.
#[derive(Debug, thiserror::Error)]
pub enum DefineError {
    #[error("{0}")]
    Unpack(#[from] ddftp_proto::packed::UnpackError),
    #[error("{0}")]
    List(#[from] ddtree::list::ListError),
    #[error("{path}: {why}")]
    Outside { path: String, why: &'static str },
    #[error("{path}: a {kind} has no bytes to serve")]
    NoBytes { path: String, kind: String },
    #[error("{}: {source}", dir.display())]
    Root { dir: std::path::PathBuf, source: std::io::Error },
    #[error("the sizes add up past 2^64 bytes")]
    TooLarge,
}

impl Bundle {
    /// Registers a definition (a ddftp list) whose paths stay inside `root`.
    pub fn define(root: &Root, list: &[u8]) -> Result<Bundle, DefineError> {
        let entries = ddftp::read(list, Path::new("bundle definition"))?;
        let mut pieces = Vec::with_capacity(entries.len());
        let mut dirs: Vec<CString> = vec![];
        for e in &entries {
            let shown = || String::from_utf8_lossy(&e.path).into_owned();
            let path = below_root(&e.path).map_err(|why| DefineError::Outside { path: shown(), why })?;
            let path = path.as_bytes();
            if !root.allows(Path::new(std::ffi::OsStr::from_bytes(path))) {
                return Err(DefineError::Outside { path: shown(), why: "not among what this server shows" });
            }
            let (dir, name) = match path.iter().rposition(|&c| c == b'/') {
                Some(i) => (&path[..i], &path[i + 1..]),
                None => (&b""[..], path),
            };
            if dirs.last().is_none_or(|d| d.as_bytes() != dir) {
                dirs.push(CString::new(dir).expect("no NUL: below_root checked"));
            }
            let name = CString::new(name).expect("no NUL: below_root checked");
            let link = match e.kind {
                Kind::File => false,
                Kind::Link => true,
                other => return Err(DefineError::NoBytes { path: shown(), kind: format!("{other:?}") }),
            };
            let runs = e.meta.data().filter(|_| !link).map(Box::from);
            pieces.push(Piece { dir: dirs.len() - 1, name, link, mtime: e.mtime, size: e.size, runs });
        }
        let dir = root.dir();
        let root = open_root(dir).map_err(|source| DefineError::Root { dir: dir.to_owned(), source })?;
        let layout = Layout::new(entries.iter().map(|e| e.meta.moved_len(e.size))).ok_or(DefineError::TooLarge)?;
        let name = format!("{PREFIX}{}", &hex(blake3::hash(list).as_bytes())[..32]);
        let runs = |p: &Piece| p.runs.as_ref().map_or(0, |r| r.len() * 16);
        let footprint = pieces.iter().map(|p| p.name.as_bytes().len() + PIECE_COST + runs(p)).sum::<usize>()
            + dirs.iter().map(|d| d.as_bytes().len() + PIECE_COST).sum::<usize>();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let registered = (now.as_secs() as i64, i64::from(now.subsec_nanos()));
        Ok(Bundle {
            name,
            size: layout.size(),
            footprint,
            root,
            dirs,
            pieces,
            layout,
            registered,
            seals: Mutex::default(),
        })
    }

    /// Keeps the seal of block `block` (of `block_size` bytes) as read.
    pub fn keep_seal(&self, block_size: u32, block: u64, seal: [u8; 32]) {
        let mut kept = self.seals.lock().expect("seals lock");
        if kept.len() < KEPT_SEALS {
            kept.insert((block_size, block), seal);
        }
    }

    /// The seals of blocks `first..first + count` of `block_size` bytes, as
    /// a `SealedBlock` from here would carry them: kept ones, the others
    /// read and hashed. A block holding an entry this mirror cannot read
    /// has no seal here (an error naming it), nor one differing from the
    /// list.
    pub fn seals(&self, block_size: u32, first: u64, count: u32) -> io::Result<Vec<[u8; 32]>> {
        let bs = u64::from(block_size);
        let run = crate::seals::run(self.size, block_size, first, count, "bundle")?;
        let mut out = Vec::with_capacity(count as usize);
        let mut buf = vec![];
        for block in run {
            let kept = self.seals.lock().expect("seals lock").get(&(block_size, block)).copied();
            if let Some(s) = kept {
                out.push(s);
                continue;
            }
            let at = block * bs;
            buf.resize((self.size - at).min(bs) as usize, 0);
            let unreadable = self.read_exact_at(&mut buf, at)?;
            if let Some(u) = unreadable.first() {
                let why = format!("block {block} holds entry {} this mirror cannot read: {}", u.index, u.why);
                return Err(io::Error::other(why));
            }
            let s = ddftp_proto::frame::seal(&buf);
            self.keep_seal(block_size, block, s);
            out.push(s);
        }
        Ok(out)
    }

    /// Fills `buf` with the range's bytes from `offset`; an entry that is
    /// not what the list says (kind, size, and for a file mtime) is an
    /// error naming it: this mirror is stale, the others serve it. An entry
    /// this mirror cannot read (permissions, a bad disk) is not: its bytes
    /// are zeros and it is returned, with why, so the client skips that
    /// entry alone and takes everything else.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<Vec<Unreadable>> {
        let mut unreadable = vec![];
        // The directory opened last.
        let mut at: Option<(usize, OwnedFd)> = None;
        self.layout.each(offset, buf.len(), |i, within, r| {
            let dst = &mut buf[r];
            match self.read_piece(i, within, dst, &mut at) {
                Err(e) if cannot_read(&e) => {
                    dst.fill(0);
                    unreadable.push(Unreadable { index: i as u64, why: e.to_string() });
                    Ok(())
                }
                r => r,
            }
        })?;
        Ok(unreadable)
    }

    /// Entry `i`'s bytes from `within` into `dst`; `at` holds the
    /// directory opened last.
    fn read_piece(&self, i: usize, within: u64, dst: &mut [u8], at: &mut Option<(usize, OwnedFd)>) -> io::Result<()> {
        let p = &self.pieces[i];
        let shown = || {
            let dir = String::from_utf8_lossy(self.dirs[p.dir].as_bytes());
            let name = String::from_utf8_lossy(p.name.as_bytes());
            if dir.is_empty() {
                name.into_owned()
            } else {
                format!("{dir}/{name}")
            }
        };
        let dir = match (&*at, self.dirs[p.dir].as_bytes()) {
            (_, b"") => Ok(self.root.as_raw_fd()),
            (Some((d, fd)), _) if *d == p.dir => Ok(fd.as_raw_fd()),
            (_, _) => open_beneath(self.root.as_raw_fd(), &self.dirs[p.dir], Open::Dir)
                .map(|fd| at.insert((p.dir, fd)).1.as_raw_fd()),
        };
        let fd =
            dir.and_then(|d| open_beneath(d, &p.name, if p.link { Open::Link } else { Open::File })).map_err(|e| {
                let why = match e.raw_os_error() {
                    Some(libc::ELOOP) => "a symlink on its path (not followed)".to_string(),
                    Some(libc::ENOENT) => "not on this mirror".to_string(),
                    Some(libc::ENOSYS) => "this kernel has no openat2 (Linux 5.6 or later serves bundles)".to_string(),
                    _ => return naming(e, &shown()),
                };
                io::Error::new(e.kind(), format!("{}: {why}", shown()))
            })?;
        let f = File::from(fd);
        let md = f.metadata()?;
        let want = if p.link { Kind::Link } else { Kind::File };
        let have = Kind::from_mode(md.mode());
        if have != Some(want) {
            return Err(io::Error::other(format!("{}: listed as {want:?}, but this mirror has {have:?}", shown())));
        }
        let listed = self.layout.len_of(i);
        if p.link {
            let t = read_link(&f).map_err(|e| naming(e, &shown()))?;
            if t.len() as u64 != listed {
                return Err(io::Error::other(format!(
                    "{}: listed with a {listed}-byte target, this mirror's has {}",
                    shown(),
                    t.len()
                )));
            }
            dst.copy_from_slice(&t[within as usize..within as usize + dst.len()]);
            return Ok(());
        }
        // Changed since the bundle was registered: a file being written
        // now. That entry is not served (the client names it; a rerun takes
        // it), and nothing else is held up; a copy that differed before is
        // a stale mirror's (below).
        let changed_since = (md.ctime(), md.ctime_nsec()) >= self.registered;
        let differs =
            md.len() != p.size || !same_mtime(p.mtime, Time { sec: md.mtime(), nsec: md.mtime_nsec() as u32 });
        if differs && changed_since {
            return Err(io::Error::other(CannotRead(format!(
                "{}: changed on the mirror while the archive ran (run it again to copy the new version)",
                shown()
            ))));
        }
        if md.len() != p.size {
            return Err(io::Error::other(format!(
                "{}: listed with {} bytes, this mirror's copy has {}",
                shown(),
                p.size,
                md.len()
            )));
        }
        let have = Time { sec: md.mtime(), nsec: md.mtime_nsec().clamp(0, 999_999_999) as u32 };
        if !same_mtime(p.mtime, have) {
            return Err(io::Error::other(format!(
                "{}: listed with mtime {}.{:09}, this mirror's copy has {}.{:09} (another version?)",
                shown(),
                p.mtime.sec,
                p.mtime.nsec,
                have.sec,
                have.nsec
            )));
        }
        let read = match &p.runs {
            None => f.read_exact_at(dst, within),
            Some(runs) => ddtree::layout::each_run(runs, within, dst.len(), |at, r| f.read_exact_at(&mut dst[r], at)),
        };
        read.map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                io::Error::other(format!("{}: the file shrank", shown()))
            } else {
                naming(e, &shown())
            }
        })?;
        // A file written while it was read may have given part old, part
        // new bytes: it is not served (the client names it, and a rerun
        // takes the new version).
        let after = f.metadata()?;
        if after.len() != md.len()
            || after.mtime() != md.mtime()
            || after.mtime_nsec() != md.mtime_nsec()
            || after.ctime() != md.ctime()
            || after.ctime_nsec() != md.ctime_nsec()
        {
            return Err(io::Error::other(CannotRead(format!(
                "{}: changed on the mirror while it was read (run the archive again to copy the new version)",
                shown()
            ))));
        }
        Ok(())
    }
}

/// An entry a mirror could not read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    pub index: u64,
    pub why: String,
}

/// Why an entry cannot be read here (permissions, a bad disk), as opposed
/// to a copy that differs from the list, which makes the mirror stale.
#[derive(Debug)]
struct CannotRead(String);

impl std::fmt::Display for CannotRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CannotRead {}

/// `e` (of the entry `shown`) with its path, marked [`CannotRead`] where
/// it says this mirror cannot read the entry.
fn naming(e: io::Error, shown: &str) -> io::Error {
    let why = format!("{shown}: {e}");
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM | libc::EIO) => io::Error::new(e.kind(), CannotRead(why)),
        _ => io::Error::new(e.kind(), why),
    }
}

fn cannot_read(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|inner| inner.is::<CannotRead>())
}

/// Whether a copy's mtime `have` is the listed one: the same second, and
/// the same nanoseconds unless either has none (a file system, or a copy
/// tool, that keeps whole seconds only).
fn same_mtime(listed: Time, have: Time) -> bool {
    listed.sec == have.sec && (listed.nsec == have.nsec || listed.nsec == 0 || have.nsec == 0)
}

/// A bundle entry's path below the root: relative, no `..`, not the index
/// (`.` and empty components dropped, as `Path::components` does).
fn below_root(rel: &[u8]) -> Result<CString, &'static str> {
    if rel.first() == Some(&b'/') {
        return Err("absolute paths are refused");
    }
    let mut out = Vec::with_capacity(rel.len() + 1);
    for part in rel.split(|&c| c == b'/') {
        match part {
            b"" | b"." => continue,
            b".." => return Err("'..' is refused"),
            _ if out.is_empty() && part == crate::digests::INDEX_DIR_NAME.as_bytes() => {
                return Err("the digest index is not served");
            }
            _ => {
                if !out.is_empty() {
                    out.push(b'/');
                }
                out.extend_from_slice(part);
            }
        }
    }
    if out.is_empty() {
        return Err("empty path");
    }
    CString::new(out).map_err(|_| "NUL byte")
}

/// The root directory, as a handle to open entries beneath.
fn open_root(dir: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(dir.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: a valid C string; a descriptor the call returns is ours.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// What [`open_beneath`] opens.
#[derive(Clone, Copy)]
enum Open {
    /// A regular file, for reading.
    File,
    /// A symlink itself.
    Link,
    /// A directory, to open entries beneath.
    Dir,
}

/// Opens `path` beneath `root` following no symlink on the way, at any
/// depth ([`ddtree::beneath`]).
fn open_beneath(root: RawFd, path: &CString, what: Open) -> io::Result<OwnedFd> {
    // Non-blocking: a FIFO (or device) where the list says a file must not
    // hang the open; it is refused once fstat says what it is.
    let flags = match what {
        Open::File => libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY,
        Open::Link => libc::O_PATH | libc::O_NOFOLLOW,
        Open::Dir => libc::O_PATH | libc::O_DIRECTORY,
    };
    ddtree::beneath::open(root, path.as_bytes(), flags, 0)
}

/// The target of the symlink `f` (opened with `O_PATH | O_NOFOLLOW`).
fn read_link(f: &File) -> io::Result<Vec<u8>> {
    ddtree::attrs::read_link(f.as_raw_fd(), c"")
}

/// The bundles a server knows, by name: at most [`KEEP`] of them and
/// [`KEEP_BYTES`] of their entries, the oldest forgotten first (a stream
/// already reading one keeps it; a new `Start` on a forgotten one is told
/// to define it again).
#[derive(Debug)]
pub struct Bundles {
    inner: Mutex<Registry>,
    keep_bytes: usize,
}

impl Default for Bundles {
    fn default() -> Bundles {
        Bundles { inner: Mutex::default(), keep_bytes: KEEP_BYTES }
    }
}

#[derive(Debug, Default)]
struct Registry {
    map: HashMap<String, Arc<Bundle>>,
    /// Names, oldest first.
    order: VecDeque<String>,
    /// The kept bundles' footprints, summed.
    held: usize,
}

impl Bundles {
    /// Registers `b` (or returns the one already registered under its name).
    pub fn insert(&self, b: Bundle) -> Arc<Bundle> {
        let mut g = self.inner.lock().expect("bundles lock");
        let Registry { map, order, held } = &mut *g;
        if let Some(old) = map.get_mut(&b.name) {
            // The same list again (same footprint): registered anew, so an
            // entry changed before now counts as a stale copy, not as one
            // changing while it is read.
            *old = Arc::new(b);
            return old.clone();
        }
        let b = Arc::new(b);
        *held += b.footprint;
        map.insert(b.name.clone(), b.clone());
        order.push_back(b.name.clone());
        while order.len() > KEEP || (*held > self.keep_bytes && order.len() > 1) {
            if let Some(old) = order.pop_front().and_then(|n| map.remove(&n)) {
                *held -= old.footprint;
            }
        }
        b
    }

    pub fn get(&self, name: &str) -> Option<Arc<Bundle>> {
        self.inner.lock().expect("bundles lock").map.get(name).cloned()
    }
}

/// Whether `path` has the form of a bundle name.
pub fn is_bundle_name(path: &str) -> bool {
    path.strip_prefix(PREFIX).is_some_and(|h| h.len() == 32 && h.bytes().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_showing_only_some_refuses_a_bundle_of_anything_else() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        std::fs::write(dir.path().join("d/f"), b"x").unwrap();
        std::fs::write(dir.path().join("g"), b"y").unwrap();
        let only = std::sync::Arc::new(crate::only::Only::new([std::path::PathBuf::from("d")]));
        let root = Root::new(dir.path(), false).unwrap().showing(only);
        let inside = Bundle::define(&root, b"#ddftp-list 1\0f 1 644 0.000000000 d/f\0");
        assert!(inside.is_ok(), "{:?}", inside.err());
        let beside = Bundle::define(&root, b"#ddftp-list 1\0f 1 644 0.000000000 g\0");
        assert!(matches!(beside, Err(DefineError::Outside { .. })), "{:?}", beside.err());
    }

    #[test]
    fn kept_bundles_stay_within_their_memory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"x").unwrap();
        let root = Root::new(dir.path(), false).unwrap();
        let define = |i: usize| {
            let list = format!("#ddftp-list 1\0f 1 644 0.{i:09} f\0");
            Bundle::define(&root, list.as_bytes()).unwrap()
        };
        let one = define(0).footprint;
        // Room for three bundles of one entry.
        let bundles = Bundles { inner: Mutex::default(), keep_bytes: 3 * one };
        let names: Vec<String> = (0..5).map(|i| bundles.insert(define(i)).name.clone()).collect();
        let kept: Vec<bool> = names.iter().map(|n| bundles.get(n).is_some()).collect();
        assert_eq!(kept, [false, false, true, true, true]);
        assert_eq!(bundles.inner.lock().unwrap().held, 3 * one);
        // The newest is kept even alone past the budget.
        let tight = Bundles { inner: Mutex::default(), keep_bytes: 1 };
        let n = tight.insert(define(7)).name.clone();
        assert!(tight.get(&n).is_some());
    }

    proptest::proptest! {
        /// `Seals` answers exactly the blocks of the range, each the seal
        /// of the block as read (kept or read again), and refuses a run
        /// past its end.
        #[test]
        fn seals_are_the_blocks_seals(sizes in proptest::collection::vec(0usize..5000, 1..4),
                                      bs in 512u32..2048, first in 0u64..40, count in 0u32..40) {
            let dir = tempfile::tempdir().unwrap();
            let mut list = String::from("#ddftp-list 1\0");
            for (i, &n) in sizes.iter().enumerate() {
                let data: Vec<u8> = (0..n).map(|b| (b * 7 + i) as u8).collect();
                std::fs::write(dir.path().join(format!("f{i}")), &data).unwrap();
                let m = std::fs::metadata(dir.path().join(format!("f{i}"))).unwrap();
                list.push_str(&format!("f {n} 644 {}.{:09} f{i}\0", m.mtime(), m.mtime_nsec()));
            }
            let root = Root::new(dir.path(), false).unwrap();
            let b = Bundle::define(&root, list.as_bytes()).unwrap();
            let blocks = b.size.div_ceil(u64::from(bs));
            match b.seals(bs, first, count) {
                Ok(got) => {
                    proptest::prop_assert!(count > 0 && first + u64::from(count) <= blocks);
                    for (k, s) in got.iter().enumerate() {
                        let at = (first + k as u64) * u64::from(bs);
                        let mut buf = vec![0; (b.size - at).min(u64::from(bs)) as usize];
                        b.read_exact_at(&mut buf, at).unwrap();
                        proptest::prop_assert_eq!(*s, ddftp_proto::frame::seal(&buf));
                    }
                    proptest::prop_assert_eq!(b.seals(bs, first, count).unwrap(), got);
                }
                Err(_) => proptest::prop_assert!(count == 0 || first + u64::from(count) > blocks),
            }
        }
    }

    #[test]
    fn entries_deeper_than_path_max_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let name = "d".repeat(200);
        // 30 levels of 201 bytes, made one step at a time beneath the last.
        let mut at = open_root(dir.path()).unwrap();
        let c = CString::new(name.clone()).unwrap();
        for _ in 0..30 {
            // SAFETY: a valid directory descriptor and C string.
            assert_eq!(unsafe { libc::mkdirat(at.as_raw_fd(), c.as_ptr(), 0o755) }, 0);
            at = open_beneath(at.as_raw_fd(), &c, Open::Dir).unwrap();
        }
        // SAFETY: as above; the descriptor returned is ours.
        let fd = unsafe { libc::openat(at.as_raw_fd(), c"f".as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o644) };
        assert!(fd >= 0);
        // SAFETY: just opened, owned by nobody else.
        let f = unsafe { File::from_raw_fd(fd) };
        f.write_all_at(b"deep", 0).unwrap();
        let mtime = f.metadata().unwrap().mtime();
        let nsec = f.metadata().unwrap().mtime_nsec();
        let path = format!("{}/f", vec![name.as_str(); 30].join("/"));
        let list = format!("#ddftp-list 1\0f 4 644 {mtime}.{nsec:09} {path}\0");
        let root = Root::new(dir.path(), false).unwrap();
        let b = Bundle::define(&root, list.as_bytes()).unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(b.read_exact_at(&mut buf, 0).unwrap(), vec![]);
        assert_eq!(&buf, b"deep");
    }

    #[test]
    fn mtimes_match_to_the_nanosecond_where_both_have_them() {
        let t = |sec, nsec| Time { sec, nsec };
        assert!(same_mtime(t(100, 5), t(100, 5)));
        assert!(!same_mtime(t(100, 5), t(100, 6)));
        assert!(!same_mtime(t(100, 5), t(101, 5)));
        assert!(same_mtime(t(100, 5), t(100, 0)), "a copy on a file system of whole seconds");
        assert!(same_mtime(t(100, 0), t(100, 5)), "a list of whole seconds");
        assert!(!same_mtime(t(100, 0), t(99, 0)));
    }

    #[test]
    fn entry_paths_stay_below_the_root() {
        let ok = |p: &[u8]| below_root(p).map(|c| c.into_bytes());
        assert_eq!(ok(b"a/b").unwrap(), b"a/b");
        assert_eq!(ok(b"./a//b/.").unwrap(), b"a/b");
        assert_eq!(ok(b"x/.ddftpd-index").unwrap(), b"x/.ddftpd-index");
        for (bad, why) in [
            (&b"/etc/passwd"[..], "absolute"),
            (b"a/../../b", "'..'"),
            (b"..", "'..'"),
            (b"", "empty"),
            (b"./.", "empty"),
            (b".ddftpd-index/x", "index"),
            (b"./.ddftpd-index", "index"),
            (b"a\0b", "NUL"),
        ] {
            assert!(ok(bad).unwrap_err().contains(why), "{bad:?}");
        }
    }
}
