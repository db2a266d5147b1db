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

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
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
/// Largest definition a client may upload (a list of ~2M entries).
pub const MAX_DEFINITION: usize = 256 << 20;
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
        let mut dirs_ok: HashSet<PathBuf> = HashSet::new();
        for e in &entries {
            let shown = String::from_utf8_lossy(&e.path);
            let full = locate(root, &e.path, &mut dirs_ok).map_err(|why| format!("{shown}: {why}"))?;
            let md = full.symlink_metadata().map_err(|err| format!("{shown}: {err}"))?;
            let link = match (e.kind, Kind::from_mode(md.mode())) {
                (Kind::File, Some(Kind::File)) => false,
                (Kind::Link, Some(Kind::Link)) => true,
                (want, have) => {
                    return Err(format!("{shown}: listed as {want:?}, but this mirror has {have:?}"));
                }
            };
            if md.size() != e.size {
                return Err(format!("{shown}: listed with {} bytes, this mirror's copy has {}", e.size, md.size()));
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

/// The path of a bundle entry under the root: relative, no `..`, not the
/// index, and every directory on the way a real directory inside the root
/// (symlinked directories are refused; the entry itself may be a symlink,
/// served as its target's text). `dirs_ok` remembers checked directories.
fn locate(root: &Root, rel: &[u8], dirs_ok: &mut HashSet<PathBuf>) -> Result<PathBuf, &'static str> {
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
    let Some((name, dirs)) = parts.split_last() else { return Err("empty path") };
    if dirs.is_empty() && *name == crate::digests::INDEX_DIR_NAME
        || dirs.first().is_some_and(|d| *d == crate::digests::INDEX_DIR_NAME)
    {
        return Err("the digest index is not served");
    }
    let mut full = root.dir().to_path_buf();
    for d in dirs {
        full.push(d);
        if dirs_ok.contains(&full) {
            continue;
        }
        match full.symlink_metadata() {
            Ok(m) if m.is_dir() => {
                dirs_ok.insert(full.clone());
            }
            Ok(_) => return Err("a directory on its path is a symlink or not a directory"),
            Err(_) => return Err("no such directory on this mirror"),
        }
    }
    full.push(name);
    Ok(full)
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
