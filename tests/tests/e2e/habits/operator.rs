//! What an operator (coming from nginx) expects of ddftpd: the served root
//! is never written to.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::*;

/// Every entry under `root` (the root too): kind, size, mode, mtime.
fn listing(root: &Path) -> BTreeMap<String, (u32, u64, i64, i64)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        out.insert(rel, (m.mode(), m.size(), m.mtime(), m.mtime_nsec()));
        if m.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    out
}

#[test]
fn the_served_root_is_untouched_by_serving_indexing_and_stopping() {
    let f = Fixture::new();
    let r = f.root();
    std::fs::create_dir_all(r.join("sub/deeper")).unwrap();
    let data = random_file(&r.join("big.bin"), 3 << 20, 1);
    random_file(&r.join("sub/a"), 5000, 2);
    random_file(&r.join("sub/deeper/b"), 70_000, 3);
    std::os::unix::fs::symlink("big.bin", r.join("link")).unwrap();
    let before = listing(&r);
    // Where an operator's user keeps its cache (no --index given).
    let cache = f.out("cache");
    let mut cmd = Command::new(bin("ddftpd"));
    cmd.env("XDG_CACHE_HOME", &cache).env("DDFTP_LOG", "warn").env_remove("STATE_DIRECTORY");
    cmd.arg("--root").arg(&r).args(["--listen", "127.0.0.1:0", "--rescan", "1"]);
    let m = Mirror::command(cmd, false);
    let out = f.out("got");
    ddftp(&["get", "big.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    ddftp(&["archive", "sub", "-m", &m.addr, "--dest", f.out("tree").to_str().unwrap(), "-q"], 0);
    // The background indexer has digested every file: in the cache.
    let t = Instant::now();
    let indexed = || walk_count(&cache) >= 3;
    while !indexed() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(indexed(), "the index is kept in the user's cache directory: {:?}", listing(&cache).keys());
    m.signal(libc::SIGTERM);
    drop(m);
    assert_eq!(listing(&r), before, "the served root changed");
}

/// Regular files below `dir`.
fn walk_count(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else { return 0 };
    rd.map(|e| e.unwrap().path()).map(|p| if p.is_dir() { walk_count(&p) } else { 1 }).sum()
}
