//! Bundles: many files served as one linear range of bytes.
//!
//! `ddftp archive` moves a whole tree with the same dual-direction engine as
//! `get`: it sends each mirror the ordered list of the files (and symlinks)
//! to move, the mirror checks every entry against its own copy (kind and
//! size, so a stale mirror is caught before a byte moves) and registers the
//! bundle under a name derived from the list. `Stat`, `Manifest` and
//! `Start` on that name then treat the entries' bytes, back to back, as one
//! file: a block may hold hundreds of small files, so small files cost no
//! round trip each, and the chunk manifest covers every byte. A symlink's
//! bytes are its target.
//!
//! Every mirror given the same list registers the same name, so any
//! connection to any mirror can serve any block of it.

use std::collections::{HashMap, VecDeque};
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use ddftp_proto::manifest::hex;
use ddtree::layout::Layout;
use ddtree::list::{ddftp, Kind};
use tokio::sync::OnceCell;

use crate::digests::{Digests, Key};
use crate::root::Root;

/// What a bundle name starts with. A name of exactly this form (the prefix
/// and 32 hex digits) always means a bundle, never a file under the root.
pub const PREFIX: &str = "@bundle/";
/// Bundles kept at once; the oldest is forgotten first.
const KEEP: usize = 16;

/// One entry of a bundle.
#[derive(Debug)]
struct Piece {
    path: PathBuf,
    link: bool,
}

/// A registered bundle.
#[derive(Debug)]
pub struct Bundle {
    pub name: String,
    pub size: u64,
    pieces: Vec<Piece>,
    layout: Layout,
    digests: OnceCell<Arc<Digests>>,
}

impl Bundle {
    /// Checks a definition (a ddftp list) against the files under `root`.
    pub fn define(root: &Root, list: &[u8]) -> Result<Bundle, String> {
        let entries = ddftp::read(list, Path::new("bundle definition")).map_err(|e| e.to_string())?;
        let mut pieces = Vec::with_capacity(entries.len());
        let mut dirs = DirStack::new(root.dir()).map_err(|e| format!("{}: {e}", root.dir().display()))?;
        for e in &entries {
            let shown = String::from_utf8_lossy(&e.path);
            let (full, parents, name) = locate(root, &e.path).map_err(|why| format!("{shown}: {why}"))?;
            let dir = dirs.enter(&parents).map_err(|why| format!("{shown}: {why}"))?;
            let md = lstat_at(dir, name).map_err(|err| format!("{shown}: {err}"))?;
            let link = match (e.kind, Kind::from_mode(md.st_mode)) {
                (Kind::File, Some(Kind::File)) => false,
                (Kind::Link, Some(Kind::Link)) => true,
                (want, have) => {
                    return Err(format!("{shown}: listed as {want:?}, but this mirror has {have:?}"));
                }
            };
            if md.st_size as u64 != e.size {
                return Err(format!("{shown}: listed with {} bytes, this mirror's copy has {}", e.size, md.st_size));
            }
            pieces.push(Piece { path: full, link });
        }
        let layout = Layout::new(entries.iter().map(|e| e.size)).ok_or("the sizes add up past 2^64 bytes")?;
        let name = format!("{PREFIX}{}", &hex(blake3::hash(list).as_bytes())[..32]);
        Ok(Bundle { name, size: layout.size(), pieces, layout, digests: OnceCell::new() })
    }

    /// Fills `buf` with the range's bytes from `offset`.
    pub fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.layout.each(offset, buf.len(), |i, within, r| {
            let p = &self.pieces[i];
            let dst = &mut buf[r];
            if p.link {
                let target = std::fs::read_link(&p.path)?;
                let t = target.as_os_str().as_bytes();
                if t.len() as u64 != self.layout.len_of(i) {
                    return Err(io::Error::other(format!("{}: the symlink changed", p.path.display())));
                }
                dst.copy_from_slice(&t[within as usize..within as usize + dst.len()]);
                return Ok(());
            }
            // Never through a symlink put in the file's place since the
            // bundle was checked.
            let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&p.path)?;
            f.read_exact_at(dst, within).map_err(|e| {
                if e.kind() == io::ErrorKind::UnexpectedEof {
                    io::Error::other(format!("{}: the file shrank", p.path.display()))
                } else {
                    e
                }
            })
        })
    }

    /// The range's digests (computed on first use, by reading it once).
    pub async fn digests(self: &Arc<Bundle>) -> io::Result<Arc<Digests>> {
        let b = self.clone();
        self.digests
            .get_or_try_init(|| async move {
                let d = tokio::task::spawn_blocking(move || {
                    let key = Key { dev: 0, ino: 0, size: b.size, mtime_secs: 0, mtime_nanos: 0 };
                    Digests::compute_with(key, |buf, at| b.read_exact_at(buf, at))
                })
                .await
                .map_err(io::Error::other)??;
                Ok::<_, io::Error>(Arc::new(d))
            })
            .await
            .cloned()
    }
}

/// The path of a bundle entry under the root, its directories and its
/// name: relative, no `..`, not the index.
fn locate<'a>(root: &Root, rel: &'a [u8]) -> Result<(PathBuf, Vec<&'a OsStr>, &'a OsStr), &'static str> {
    let p = Path::new(OsStr::from_bytes(rel));
    let mut parts = vec![];
    for c in p.components() {
        match c {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err("'..' is refused"),
            Component::RootDir | Component::Prefix(_) => return Err("absolute paths are refused"),
        }
    }
    let Some(name) = parts.pop() else { return Err("empty path") };
    if parts.is_empty() && name == crate::digests::INDEX_DIR_NAME
        || parts.first().is_some_and(|d| *d == crate::digests::INDEX_DIR_NAME)
    {
        return Err("the digest index is not served");
    }
    let mut full = root.dir().to_path_buf();
    full.extend(&parts);
    full.push(name);
    Ok((full, parts, name))
}

/// The directories open along the path of the last entry checked. Entries
/// come sorted, so most share them: each costs one `lstat` by name in its
/// directory, not a lookup of its whole path. Every directory is opened
/// without following a symlink, so an entry behind a symlinked directory
/// is refused.
struct DirStack {
    root: OwnedFd,
    /// From the root down: each directory's name and descriptor.
    open: Vec<(Vec<u8>, OwnedFd)>,
}

impl DirStack {
    fn new(root: &Path) -> io::Result<DirStack> {
        Ok(DirStack { root: open_dir(libc::AT_FDCWD, root.as_os_str())?, open: vec![] })
    }

    /// The descriptor of directory `parents` (below the root).
    fn enter(&mut self, parents: &[&OsStr]) -> Result<RawFd, &'static str> {
        let same = self.open.iter().zip(parents).take_while(|((n, _), p)| n.as_slice() == p.as_bytes()).count();
        self.open.truncate(same);
        for p in &parents[same..] {
            let at = self.open.last().map_or(self.root.as_raw_fd(), |(_, fd)| fd.as_raw_fd());
            let fd = open_dir(at, p).map_err(|e| match e.raw_os_error() {
                Some(libc::ENOENT) => "no such directory on this mirror",
                _ => "a directory on its path is a symlink or not a directory",
            })?;
            self.open.push((p.as_bytes().to_vec(), fd));
        }
        Ok(self.open.last().map_or(self.root.as_raw_fd(), |(_, fd)| fd.as_raw_fd()))
    }
}

/// Opens a directory (never through a symlink) to look names up in.
fn open_dir(at: RawFd, name: &OsStr) -> io::Result<OwnedFd> {
    let c = CString::new(name.as_bytes()).map_err(io::Error::other)?;
    let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: a valid C string; a descriptor the call returns is ours.
    let fd = unsafe { libc::openat(at, c.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just opened and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `lstat` of `name` in directory `dir`.
fn lstat_at(dir: RawFd, name: &OsStr) -> io::Result<libc::stat> {
    let c = CString::new(name.as_bytes()).map_err(io::Error::other)?;
    // SAFETY: stat is plain data; fstatat fills it for a valid C string.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatat(dir, c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// The bundles a server knows, by name.
#[derive(Debug, Default)]
pub struct Bundles {
    inner: Mutex<Registry>,
}

#[derive(Debug, Default)]
struct Registry {
    map: HashMap<String, Arc<Bundle>>,
    /// Names, oldest first.
    order: VecDeque<String>,
}

impl Bundles {
    /// Registers `b` (or returns the one already registered under its name).
    pub fn insert(&self, b: Bundle) -> Arc<Bundle> {
        let mut g = self.inner.lock().expect("bundles lock");
        let Registry { map, order } = &mut *g;
        if let Some(old) = map.get(&b.name) {
            return old.clone();
        }
        let b = Arc::new(b);
        map.insert(b.name.clone(), b.clone());
        order.push_back(b.name.clone());
        while order.len() > KEEP {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
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
