//! The calls behind [`crate::list::Meta`]'s rarer fields: a sparse file's
//! data runs (`SEEK_DATA`/`SEEK_HOLE`) and extended attributes, read and
//! set without following symlinks.
//!
//! Entries are named relative to an open directory: xattr calls take a
//! path only, so one is made through `/proc/self/fd/DIR/NAME`, which the
//! kernel resolves from the descriptor (no lookup from the root, and a
//! path of any depth).

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;

use crate::list::meta::MAX_RUNS;

/// `NAME` in the directory open as `dir`, as a path xattr calls take.
pub fn at(dir: RawFd, name: &[u8]) -> io::Result<CString> {
    let mut p = format!("/proc/self/fd/{dir}/").into_bytes();
    p.extend_from_slice(name);
    CString::new(p).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in a name"))
}

/// The target of the symlink `name` in the directory open as `dir` (an
/// empty `name`: `dir` is the symlink itself, opened `O_PATH|O_NOFOLLOW`).
pub fn read_link(dir: RawFd, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: readlinkat writes at most buf.len() bytes into buf.
    let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// The data runs `(offset, length)` of the open file `fd` of `size` bytes,
/// `None` if it has no holes, or too many runs to list (it then moves
/// whole).
pub fn data_runs(fd: RawFd, size: u64) -> io::Result<Option<Vec<(u64, u64)>>> {
    let mut runs = vec![];
    let mut at = 0u64;
    while at < size {
        // SAFETY: lseek on a descriptor the caller holds open.
        let data = unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            match io::Error::last_os_error().raw_os_error() {
                // No data past `at`: the rest is a hole.
                Some(libc::ENXIO) => break,
                _ => return Err(io::Error::last_os_error()),
            }
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(io::Error::last_os_error());
        }
        let (data, hole) = (data as u64, (hole as u64).min(size));
        if hole > data {
            runs.push((data, hole - data));
        }
        if runs.len() > MAX_RUNS {
            return Ok(None);
        }
        at = hole.max(data + 1);
    }
    let dense = runs.len() == 1 && runs[0] == (0, size);
    Ok((!dense).then_some(runs))
}

/// Every extended attribute of `path` (not following a symlink), names in
/// the order the file system lists them.
pub fn read_xattrs(path: &CStr) -> io::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut names = vec![0u8; 1024];
    let n = loop {
        // SAFETY: the kernel writes at most `names.len()` bytes.
        let n = unsafe { libc::llistxattr(path.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
        if n >= 0 {
            break n as usize;
        }
        match io::Error::last_os_error().raw_os_error() {
            Some(libc::ERANGE) => names.resize(names.len() * 4, 0),
            Some(libc::ENOTSUP) => return Ok(vec![]),
            _ => return Err(io::Error::last_os_error()),
        }
    };
    let mut out = vec![];
    for name in names[..n].split(|&c| c == 0).filter(|n| !n.is_empty()) {
        let cname = CString::new(name).expect("split at NULs");
        let mut value = vec![0u8; 256];
        loop {
            // SAFETY: as above, for the value.
            let got = unsafe { libc::lgetxattr(path.as_ptr(), cname.as_ptr(), value.as_mut_ptr().cast(), value.len()) };
            if got >= 0 {
                value.truncate(got as usize);
                break;
            }
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::ERANGE) => value.resize(value.len() * 4, 0),
                // Gone since it was listed.
                Some(libc::ENODATA) => {
                    value.clear();
                    break;
                }
                _ => return Err(io::Error::last_os_error()),
            }
        }
        out.push((name.to_vec(), value));
    }
    Ok(out)
}

/// Makes `path`'s extended attributes `want`: sets what differs, removes
/// what `want` lacks, of the names `touch` allows (rsync's receiving `x`
/// rules; the others are left as they are). Whether anything changed.
pub fn write_xattrs(path: &CStr, want: &[(Vec<u8>, Vec<u8>)], touch: &dyn Fn(&[u8]) -> bool) -> io::Result<bool> {
    let have = read_xattrs(path)?;
    let mut changed = false;
    for (k, _) in have.iter().filter(|(k, _)| touch(k) && !want.iter().any(|(w, _)| w == k)) {
        let k = CString::new(k.clone()).expect("listed names hold no NUL");
        // SAFETY: two C strings.
        if unsafe { libc::lremovexattr(path.as_ptr(), k.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        changed = true;
    }
    for (k, v) in want {
        if !touch(k) || have.iter().any(|(h, hv)| h == k && hv == v) {
            continue;
        }
        let k = CString::new(k.clone()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a name"))?;
        // SAFETY: C strings and a buffer of `v.len()` bytes.
        if unsafe { libc::lsetxattr(path.as_ptr(), k.as_ptr(), v.as_ptr().cast(), v.len(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        changed = true;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileExt;

    #[test]
    fn finds_the_data_runs_of_a_sparse_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sparse");
        let f = std::fs::File::create(&p).unwrap();
        f.write_all_at(&[7u8; 4096], 1 << 20).unwrap();
        f.set_len(4 << 20).unwrap();
        let runs = data_runs(f.as_raw_fd(), 4 << 20).unwrap().expect("holes found");
        assert_eq!(runs.iter().map(|r| r.1).sum::<u64>() % 4096, 0);
        assert!(runs.iter().any(|&(o, l)| o <= 1 << 20 && o + l >= (1 << 20) + 4096));
        assert!(runs.iter().map(|r| r.1).sum::<u64>() < 1 << 20);
        let dense = d.path().join("dense");
        std::fs::write(&dense, vec![1u8; 10000]).unwrap();
        let f = std::fs::File::open(&dense).unwrap();
        assert_eq!(data_runs(f.as_raw_fd(), 10000).unwrap(), None);
    }

    #[test]
    fn xattrs_are_set_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        let c = CString::new(p.as_os_str().as_bytes()).unwrap();
        let want = vec![(b"user.one".to_vec(), vec![0, 1, 0xff]), (b"user.two".to_vec(), vec![])];
        match write_xattrs(&c, &want, &|_| true) {
            Err(e) if e.raw_os_error() == Some(libc::ENOTSUP) => return,
            r => assert!(r.unwrap()),
        }
        let mut got = read_xattrs(&c).unwrap();
        got.sort();
        assert_eq!(got, want);
        assert!(!write_xattrs(&c, &want, &|_| true).unwrap(), "nothing to change");
        // A name left alone is neither removed nor set.
        assert!(!write_xattrs(&c, &want[..1], &|k| k != b"user.two").unwrap(), "user.two left");
        assert!(write_xattrs(&c, &want[..1], &|_| true).unwrap());
        assert_eq!(read_xattrs(&c).unwrap(), want[..1]);
    }
}
