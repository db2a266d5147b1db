//! The least a walk that lstats every entry can cost here: one thread,
//! `getdents64` and `fstatat` on each name relative to its open directory,
//! `openat` for subdirectories, nothing else (no records, no counts, no
//! queue). `benches/walk.sh` times it beside `ddftp walk`: its time over
//! the number of cores is what a perfectly parallel walk would take, the
//! bound to compare `fd` (which stats nothing) against.
//!
//!   cargo run --release -p ddtree --example stat_floor -- TREE

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;

fn main() {
    let Some(root) = std::env::args_os().nth(1) else {
        eprintln!("usage: stat_floor TREE");
        std::process::exit(2);
    };
    let root = CString::new(root.as_bytes()).expect("a path has no NUL");
    // SAFETY: `root` is NUL-terminated.
    let fd = unsafe { libc::open(root.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    if fd < 0 {
        eprintln!("{}: {}", root.to_string_lossy(), std::io::Error::last_os_error());
        std::process::exit(1);
    }
    let mut buf = vec![0u8; 32 * 1024];
    let entries = walk(fd, &mut buf);
    println!("{entries}");
}

/// lstats everything under the open directory `fd`, closes it, returns how
/// many entries it lstat'ed.
fn walk(fd: libc::c_int, buf: &mut [u8]) -> u64 {
    let mut entries = 0;
    let mut subdirs: Vec<CString> = Vec::new();
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n <= 0 {
            break;
        }
        let mut at = 0;
        while at < n as usize {
            let len = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
            let name = CStr::from_bytes_until_nul(&buf[at + 19..at + len]).expect("names are NUL-terminated");
            at += len;
            if matches!(name.to_bytes(), b"." | b"..") {
                continue;
            }
            // SAFETY: `st` is plain data the call fills; `name` is NUL-terminated.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            if unsafe { libc::fstatat(fd, name.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) } == 0 {
                entries += 1;
                if st.st_mode & libc::S_IFMT == libc::S_IFDIR {
                    subdirs.push(name.to_owned());
                }
            }
        }
    }
    for name in subdirs {
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `name` is NUL-terminated.
        let sub = unsafe { libc::openat(fd, name.as_ptr(), flags) };
        if sub >= 0 {
            entries += walk(sub, buf);
        }
    }
    // SAFETY: `fd` is ours and closed once.
    unsafe { libc::close(fd) };
    entries
}
