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

#[test]
fn on_the_journal_lines_carry_a_priority_and_no_second_timestamp() {
    let f = Fixture::new();
    random_file(&f.root().join("x"), 1000, 4);
    let log = f.out("journal.log");
    let file = std::fs::File::create(&log).unwrap();
    let m = file.metadata().unwrap();
    let mut cmd = Command::new(bin("ddftpd"));
    cmd.env("JOURNAL_STREAM", format!("{}:{}", m.dev(), m.ino())).env_remove("DDFTP_LOG");
    cmd.arg("--root").arg(f.root()).args(["--listen", "127.0.0.1:0", "--index", f.out("idx").to_str().unwrap()]);
    cmd.stderr(file);
    let mirror = Mirror::command(cmd, false);
    ddftp(&["get", "nothere", "-m", &mirror.addr, "-o", f.out("o").to_str().unwrap(), "--retries", "0"], 7);
    mirror.signal(libc::SIGTERM);
    drop(mirror);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with('<')).collect();
    assert!(lines.iter().any(|l| l.starts_with("<6>") && l.contains("serving")), "{text}");
    for l in &lines {
        assert!(!l.contains("2026-") && !l.contains("Z "), "a second timestamp: {l}");
    }
    // Not on the journal (another stream): timestamps as before.
    let other = f.out("plain.log");
    let mut cmd = Command::new(bin("ddftpd"));
    cmd.env("JOURNAL_STREAM", "1:1").env_remove("DDFTP_LOG");
    cmd.arg("--root").arg(f.root()).args(["--listen", "127.0.0.1:0", "--index", f.out("idx").to_str().unwrap()]);
    cmd.stderr(std::fs::File::create(&other).unwrap());
    let mirror = Mirror::command(cmd, false);
    let text = written(&other);
    drop(mirror);
    assert!(text.lines().next().is_some_and(|l| !l.starts_with('<') && l.contains('T')), "{text}");
}

#[test]
fn metrics_have_the_process_families_and_the_version_and_the_json_banner_has_fields() {
    let f = Fixture::new();
    let log = f.out("log.json");
    let mut cmd = Command::new(bin("ddftpd"));
    cmd.env_remove("DDFTP_LOG").env_remove("JOURNAL_STREAM");
    cmd.arg("--root").arg(f.root()).args(["--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0"]);
    cmd.args(["--log-format", "json", "--rate-limit", "40MB", "--index", f.out("idx").to_str().unwrap()]);
    cmd.stderr(std::fs::File::create(&log).unwrap());
    let m = Mirror::command(cmd, true);
    let page = scrape(m.metrics.as_deref().unwrap());
    for family in [
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_start_time_seconds",
    ] {
        assert!(page.contains(&format!("# TYPE {family} ")), "{family}: {page}");
    }
    let version = format!("ddftpd_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
    assert!(page.contains(&version), "{page}");
    let banner = written(&log);
    let v: serde_json::Value = serde_json::from_str(banner.lines().next().unwrap()).unwrap();
    assert_eq!((v["message"].as_str(), v["auth"].as_str()), (Some("serving"), Some("none")), "{v}");
    assert_eq!(v["rate_limit_bytes_per_second"], 40_000_000, "{v}");
    assert!(v["listen"].as_str().is_some_and(|l| l == m.addr), "{v}");
}

#[test]
fn the_exit_code_tables_list_exactly_the_codes_ddftp_gives() {
    // What `ddftp --help` names (from the Exit enum's own list).
    let o = std::process::Command::new(bin("ddftp")).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&o.stdout).to_string();
    let line: String = help.split("Exit codes:").nth(1).unwrap().split("Docs:").next().unwrap().replace('\n', " ");
    let mut codes: Vec<u32> = line.split(',').filter_map(|p| p.split_whitespace().next()?.parse().ok()).collect();
    codes.sort_unstable();
    assert!(codes.contains(&7) && codes.contains(&130), "{line}");
    for doc in ["README.md", "docs/get.md"] {
        let text = std::fs::read_to_string(format!("{}/../{doc}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let table = text.split("| code | meaning |").nth(1).unwrap_or_else(|| panic!("{doc} has no exit table"));
        let mut listed: Vec<u32> = table
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| l.trim_start_matches('|').split('|').next()?.trim().parse().ok())
            .collect();
        listed.sort_unstable();
        assert_eq!(listed, codes, "{doc}'s exit table");
        assert!(!table.contains("`archive` only"), "{doc}: 5 is `get`'s too");
    }
}

/// A server's log once it has its first line: the banner follows the
/// listening line on stdout, so it is waited for, not raced.
fn written(log: &Path) -> String {
    let t = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap();
        if text.contains('\n') || t.elapsed() > Duration::from_secs(10) {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
