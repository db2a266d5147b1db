//! A tree checker that trusts no path: it walks with `openat` from each
//! directory's descriptor (so paths past `PATH_MAX` and any name bytes
//! work), `fstatat`s without following symlinks, and records per entry
//! what a faithful copy must keep: type, size, mode, owner, mtime (ns),
//! link target, device numbers, hard-link group, allocated blocks (holes),
//! extended attributes (ACLs among them) and a content hash.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// What a comparison looks at.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    /// Owners and groups (a copy made by root keeps them).
    pub owners: bool,
    /// setuid/setgid bits (dropped by a copy that cannot keep owners).
    pub setid: bool,
    /// Device nodes (only root makes them).
    pub devices: bool,
}

/// One entry's recorded state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub line: String,
    /// Allocated bytes of a regular file (compared as "sparse or not").
    pub allocated: u64,
    pub size: u64,
}

fn open_at(dir: RawFd, name: &CStr, flags: libc::c_int) -> std::io::Result<OwnedFd> {
    // SAFETY: a valid descriptor (or AT_FDCWD) and C string.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: just opened, ours alone.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn stat_at(dir: RawFd, name: &CStr) -> libc::stat {
    // SAFETY: plain data the call fills.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
    assert_eq!(r, 0, "fstatat {name:?}: {}", std::io::Error::last_os_error());
    st
}

fn names(dir: RawFd) -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = std::fs::read_dir(format!("/proc/self/fd/{dir}"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_encoded_bytes())
        .collect();
    v.sort();
    v
}

/// Every entry below `root` (itself as ""), by path bytes.
pub fn scan(root: &std::path::Path, look: Look) -> BTreeMap<Vec<u8>, Seen> {
    let c = CString::new(root.as_os_str().as_encoded_bytes()).unwrap();
    let top = open_at(libc::AT_FDCWD, &c, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW).unwrap();
    let mut out = BTreeMap::new();
    let mut groups: HashMap<(u64, u64), Vec<u8>> = HashMap::new();
    let st = stat_at(libc::AT_FDCWD, &c);
    out.insert(vec![], describe(libc::AT_FDCWD, &c, &st, look, &mut groups, &[]));
    walk(&top, &mut vec![], look, &mut out, &mut groups);
    out
}

fn walk(
    dir: &OwnedFd,
    rel: &mut Vec<u8>,
    look: Look,
    out: &mut BTreeMap<Vec<u8>, Seen>,
    groups: &mut HashMap<(u64, u64), Vec<u8>>,
) {
    for name in names(dir.as_raw_fd()) {
        let c = CString::new(name.clone()).unwrap();
        let st = stat_at(dir.as_raw_fd(), &c);
        let len = rel.len();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(&name);
        let kind = st.st_mode & libc::S_IFMT;
        if !look.devices && (kind == libc::S_IFBLK || kind == libc::S_IFCHR) {
            rel.truncate(len);
            continue;
        }
        out.insert(rel.clone(), describe(dir.as_raw_fd(), &c, &st, look, groups, rel));
        if kind == libc::S_IFDIR {
            let sub = open_at(dir.as_raw_fd(), &c, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW).unwrap();
            walk(&sub, rel, look, out, groups);
        }
        rel.truncate(len);
    }
}

fn describe(
    dir: RawFd,
    name: &CStr,
    st: &libc::stat,
    look: Look,
    groups: &mut HashMap<(u64, u64), Vec<u8>>,
    rel: &[u8],
) -> Seen {
    let kind = st.st_mode & libc::S_IFMT;
    let mut perm = st.st_mode & 0o7777;
    if !look.setid {
        perm &= !0o6000;
    }
    let mut line = format!("type {:o} mode {perm:o}", kind >> 12);
    if look.owners {
        line += &format!(" owner {}:{}", st.st_uid, st.st_gid);
    }
    if kind != libc::S_IFDIR {
        line += &format!(" mtime {}.{:09}", st.st_mtime, st.st_mtime_nsec);
    } else {
        // A directory's mtime is checked too: entries made after it was
        // finished would have moved it.
        line += &format!(" dir-mtime {}.{:09}", st.st_mtime, st.st_mtime_nsec);
    }
    match kind {
        libc::S_IFREG => {
            let f = std::fs::File::from(open_at(dir, name, libc::O_RDONLY | libc::O_NOFOLLOW).unwrap());
            let mut h = sha2::Sha256::new();
            std::io::copy(&mut std::io::BufReader::new(f), &mut h).unwrap();
            use sha2::Digest;
            line += &format!(" size {} sha256 {:x}", st.st_size, h.finalize());
            if st.st_nlink > 1 {
                // The group is named by its first path in walk order (sorted).
                let first = groups.entry((st.st_dev, st.st_ino)).or_insert_with(|| rel.to_vec());
                line += &format!(" links {} first {:?}", st.st_nlink, String::from_utf8_lossy(first));
            }
        }
        libc::S_IFLNK => {
            let mut buf = vec![0u8; 8192];
            // SAFETY: readlinkat writes at most buf.len() bytes.
            let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            assert!(n >= 0);
            buf.truncate(n as usize);
            line += &format!(" target {:?}", String::from_utf8_lossy(&buf));
        }
        libc::S_IFBLK | libc::S_IFCHR => line += &format!(" rdev {}", st.st_rdev),
        _ => {}
    }
    let xpath = if dir == libc::AT_FDCWD {
        name.to_owned()
    } else {
        let mut p = format!("/proc/self/fd/{dir}/").into_bytes();
        p.extend_from_slice(name.to_bytes());
        CString::new(p).unwrap()
    };
    let mut xs = ddtree::attrs::read_xattrs(&xpath).unwrap_or_default();
    xs.sort();
    for (k, v) in xs {
        line += &format!(" xattr {}={:02x?}", String::from_utf8_lossy(&k), v);
    }
    Seen { line, allocated: st.st_blocks as u64 * 512, size: st.st_size as u64 }
}

/// Panics, showing the differences, unless `a` and `b` hold the same
/// entries alike, a sparse file in `a` staying sparse in `b`.
pub fn assert_equal(a: &BTreeMap<Vec<u8>, Seen>, b: &BTreeMap<Vec<u8>, Seen>) {
    let mut diffs = vec![];
    for (k, x) in a {
        match b.get(k) {
            None => diffs.push(format!("missing in copy: {:?}", String::from_utf8_lossy(k))),
            Some(y) if y.line != x.line => {
                diffs.push(format!("{:?}:\n  source {}\n  copy   {}", String::from_utf8_lossy(k), x.line, y.line))
            }
            Some(y) if x.line.starts_with("type 10 ") && x.allocated < x.size && y.allocated > x.allocated => diffs
                .push(format!(
                    "{:?}: sparse in the source ({} of {} bytes allocated), {} in the copy",
                    String::from_utf8_lossy(k),
                    x.allocated,
                    x.size,
                    y.allocated
                )),
            _ => {}
        }
    }
    for k in b.keys().filter(|k| !a.contains_key(*k)) {
        diffs.push(format!("extra in copy: {:?}", String::from_utf8_lossy(k)));
    }
    assert!(diffs.is_empty(), "the copy differs:\n{}", diffs.join("\n"));
}
