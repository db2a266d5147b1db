//! `ddftp walk` against `find -printf` on generated trees, and the list
//! formats: ours, and mpifileutils' v4 (a real dwalk sample and our writer).

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::util::*;

/// (type, size, mode, mtime seconds, mtime ns) of one path.
type Fields = (char, u64, u32, i64, u32);

/// A tree with every shape the walk must get right: deep, wide, empty
/// directories, symlinks (dangling, to a directory: never followed), names
/// with spaces, newlines and non-UTF-8 bytes, odd modes, an old mtime, a
/// FIFO and an unreadable directory (readable only by the test's own
/// user; the walks run as nobody when the tests run as root).
fn make_tree(root: &Path) {
    let mut deep = root.join("deep");
    for i in 0..40 {
        deep.push(format!("d{i}"));
    }
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join("bottom"), b"at the bottom").unwrap();
    let wide = root.join("wide");
    std::fs::create_dir(&wide).unwrap();
    for i in 0..1500 {
        std::fs::write(wide.join(format!("f{i:05}")), vec![b'x'; i % 37]).unwrap();
    }
    for i in 0..30 {
        std::fs::create_dir_all(wide.join(format!("sub{i}/inner"))).unwrap();
    }
    std::fs::create_dir_all(root.join("empty/also empty")).unwrap();
    let odd = root.join("odd names");
    std::fs::create_dir(&odd).unwrap();
    std::fs::write(odd.join("with space"), b"1").unwrap();
    std::fs::write(odd.join("new\nline"), b"22").unwrap();
    std::fs::write(odd.join(std::ffi::OsStr::from_bytes(b"bytes-\xff\xfe-\x01")), b"333").unwrap();
    std::fs::write(odd.join(" leading and trailing "), b"").unwrap();
    std::os::unix::fs::symlink("../nowhere", odd.join("dangling")).unwrap();
    std::os::unix::fs::symlink("../wide", odd.join("to-dir")).unwrap();
    std::os::unix::fs::symlink("with space", odd.join("to file")).unwrap();
    let setuid = odd.join("setuid");
    std::fs::write(&setuid, b"#!").unwrap();
    std::fs::set_permissions(&setuid, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let private = odd.join("private");
    std::fs::write(&private, b"secret").unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    let status = Command::new("touch").arg("-h").arg("-d").arg("1999-12-31 23:59:59.123456789").arg(&private).status();
    assert!(status.unwrap().success());
    assert!(Command::new("mkfifo").arg(odd.join("fifo")).status().unwrap().success());
    let locked = root.join("locked");
    std::fs::create_dir_all(locked.join("hidden")).unwrap();
    std::fs::write(locked.join("hidden/x"), b"x").unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// Runs `cmd`, as nobody when we are root (so permissions apply).
fn as_walker(program: &Path, args: &[&std::ffi::OsStr]) -> Output {
    let mut cmd = if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(program);
        c
    } else {
        Command::new(program)
    };
    cmd.args(args).stdin(Stdio::null()).output().expect("run walker")
}

/// A temp dir the walkers (maybe nobody) can enter.
fn tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = dir.path().join("tree");
    std::fs::create_dir(&root).unwrap();
    make_tree(&root);
    if is_root() {
        // Owned by root with 0700: nobody cannot read it.
    } else {
        std::fs::set_permissions(root.join("locked"), std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    (dir, root)
}

fn parse_mtime(s: &str) -> (i64, u32) {
    let (sec, frac) = s.split_once('.').unwrap_or((s, "0"));
    let mut digits = frac.to_string();
    digits.truncate(9);
    while digits.len() < 9 {
        digits.push('0');
    }
    (sec.parse().unwrap(), digits.parse().unwrap())
}

/// The records of a ddftp list (`TYPE SIZE MODE MTIME ATTRS PATH`) as
/// `find -printf` writes them (ATTRS left out).
fn ddftp_records(list: &[u8]) -> Vec<u8> {
    let body = list.strip_prefix(b"#ddftp-list 2\0".as_slice()).expect("list header");
    let mut out = vec![];
    for rec in body.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let f: Vec<&[u8]> = rec.splitn(6, |&b| b == b' ').collect();
        out.extend_from_slice(&[f[0], f[1], f[2], f[3], f[5]].join(&b' '));
        out.push(0);
    }
    out
}

/// Parses NUL-terminated `TYPE SIZE MODE MTIME PATH` records.
fn parse_records(data: &[u8]) -> BTreeMap<Vec<u8>, Fields> {
    let mut map = BTreeMap::new();
    for rec in data.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let mut it = rec.splitn(5, |&b| b == b' ');
        let mut next = || std::str::from_utf8(it.next().unwrap()).unwrap().to_string();
        let (kind, size, mode, mtime) = (next(), next(), next(), next());
        let path = it.next().unwrap().to_vec();
        let (sec, ns) = parse_mtime(&mtime);
        let fields =
            (kind.chars().next().unwrap(), size.parse().unwrap(), u32::from_str_radix(&mode, 8).unwrap(), sec, ns);
        assert!(map.insert(path.clone(), fields).is_none(), "listed twice: {}", String::from_utf8_lossy(&path));
    }
    map
}

fn find_list(root: &Path) -> BTreeMap<Vec<u8>, Fields> {
    let out = as_walker(Path::new("find"), &[root.as_os_str(), "-printf".as_ref(), "%y %s %m %T@ %p\\0".as_ref()]);
    parse_records(&out.stdout)
}

fn walk_list(root: &Path, threads: usize) -> (Output, BTreeMap<Vec<u8>, Fields>) {
    let t = threads.to_string();
    let out = as_walker(
        &bin("ddftp"),
        &["walk".as_ref(), root.as_os_str(), "-t".as_ref(), t.as_ref(), "-o".as_ref(), "-".as_ref()],
    );
    let list = ddftp_records(&out.stdout);
    (out, parse_records(&list))
}

fn show(m: &BTreeMap<Vec<u8>, Fields>) -> String {
    m.iter().map(|(p, f)| format!("{:?} {f:?}\n", String::from_utf8_lossy(p))).collect()
}

#[test]
fn walk_lists_exactly_what_find_lists() {
    let (_dir, root) = tree();
    let want = find_list(&root);
    assert!(want.len() > 1600, "find saw {} entries", want.len());
    assert!(want.keys().any(|p| p.ends_with(b"bytes-\xff\xfe-\x01")));
    assert!(want.contains_key(root.join("locked").as_os_str().as_bytes()));
    assert!(!want.contains_key(root.join("locked/hidden").as_os_str().as_bytes()));
    for threads in [1, 2, 3, 8] {
        let (out, got) = walk_list(&root, threads);
        assert_eq!(out.status.code(), Some(1), "an unreadable directory makes exit 1: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("cannot read directory") && stderr.contains("locked"), "{stderr}");
        if got != want {
            panic!("{threads} threads: walk and find differ\n--- walk\n{}--- find\n{}", show(&got), show(&want));
        }
    }
}

#[test]
fn json_totals_count_as_find_counts() {
    let (_dir, root) = tree();
    let want = find_list(&root);
    let count = |c: char| want.values().filter(|f| f.0 == c).count() as u64;
    let bytes: u64 = want.values().filter(|f| f.0 == 'f').map(|f| f.1).sum();
    let out =
        as_walker(&bin("ddftp"), &["walk".as_ref(), root.as_os_str(), "--json".as_ref(), "-t".as_ref(), "4".as_ref()]);
    assert_eq!(out.status.code(), Some(1));
    let j = json(&out);
    assert_eq!(j["dirs"], count('d'));
    assert_eq!(j["files"], count('f'));
    assert_eq!(j["links"], count('l'));
    assert_eq!(j["others"], count('p'));
    assert_eq!(j["bytes"], bytes);
    assert_eq!(j["errors"], 1);
    assert!(j["seconds"].as_f64().unwrap() > 0.0);
    let per_worker: u64 = j["per_worker"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(per_worker, want.len() as u64);
}

#[test]
fn a_missing_root_is_a_clear_usage_error() {
    let out = ddftp(&["walk", "/nonexistent/ddftp-walk-root"], 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/ddftp-walk-root"));
}

/// The expected entries of the dwalk sample: path → fields.
fn dwalk_expected() -> BTreeMap<Vec<u8>, Fields> {
    let tsv = std::fs::read_to_string(sample_dir().join("expected.tsv")).unwrap();
    tsv.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let mode = u32::from_str_radix(f[2], 8).unwrap() & 0o7777;
            (
                f[0].as_bytes().to_vec(),
                (
                    f[1].chars().next().unwrap(),
                    f[3].parse().unwrap(),
                    mode,
                    f[4].parse().unwrap(),
                    f[5].parse().unwrap(),
                ),
            )
        })
        .collect()
}

fn sample_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data/dwalk-v4-sample")
}

fn list_of(path: &Path, expect: i32) -> Output {
    ddftp(&["list", path.to_str().unwrap()], expect)
}

#[test]
fn the_dwalk_sample_reads_back_to_its_expected_entries() {
    let want = dwalk_expected();
    assert_eq!(want.len(), 20);
    let out = list_of(&sample_dir().join("list.mfu"), 0);
    let got = parse_records(&ddftp_records(&out.stdout));
    if got != want {
        panic!("sample differs\n--- read\n{}--- expected\n{}", show(&got), show(&want));
    }
}

#[test]
fn our_mfu_list_reads_back_to_what_was_walked() {
    let (dir, root) = tree();
    let (_, walked) = walk_list(&root, 2);
    let mfu = dir.path().join("walk.mfu");
    let out = as_walker(
        &bin("ddftp"),
        &[
            "walk".as_ref(),
            root.as_os_str(),
            "--output-format".as_ref(),
            "mfu".as_ref(),
            "-o".as_ref(),
            "-".as_ref(),
            "-q".as_ref(),
        ],
    );
    std::fs::write(&mfu, &out.stdout).unwrap();
    assert_eq!(&out.stdout[..8], &4u64.to_be_bytes());
    let back = list_of(&mfu, 0);
    let got = parse_records(&ddftp_records(&back.stdout));
    assert_eq!(got, walked);
}

#[test]
fn truncated_lists_and_version_3_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = std::fs::read(sample_dir().join("list.mfu")).unwrap();
    for cut in [4, 40, 600, data.len() - 50] {
        let p = dir.path().join(format!("cut{cut}"));
        std::fs::write(&p, &data[..cut]).unwrap();
        let err = String::from_utf8_lossy(&list_of(&p, 2).stderr).to_string();
        assert!(err.contains("truncated") || err.contains("not a ddftp list"), "cut at {cut}: {err}");
    }
    let p = dir.path().join("v3");
    let mut v3 = data.clone();
    v3[7] = 3;
    std::fs::write(&p, &v3).unwrap();
    let err = String::from_utf8_lossy(&list_of(&p, 2).stderr).to_string();
    assert!(err.contains("version 3") && err.contains("only version 4"), "{err}");
}

#[test]
fn a_list_that_does_not_fit_leaves_no_truncated_list_and_the_old_one_stays() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("tree");
    std::fs::create_dir(&root).unwrap();
    for i in 0..1000 {
        std::fs::write(root.join(format!("a-file-with-a-name-long-enough-to-fill-a-list-{i:04}")), b"x").unwrap();
    }
    let disk = SmallDisk::mount(&t.path().join("disk"), "8k");
    let mut lists = vec![];
    for format in ["ddftp", "mfu"] {
        let list = disk.0.join(format!("{format}.list"));
        std::fs::write(&list, b"the list of yesterday").unwrap();
        let args = [OsStr::new("walk"), root.as_os_str(), OsStr::new("--output-format"), OsStr::new(format)];
        let out = Command::new(bin("ddftp")).args(args).arg("-o").arg(&list).arg("-q").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{err}");
        assert!(err.contains("No space left on device"), "{err}");
        assert_eq!(std::fs::read(&list).unwrap(), b"the list of yesterday");
        lists.push(std::ffi::OsString::from(format!("{format}.list")));
        let mut names: Vec<_> = std::fs::read_dir(&disk.0).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        lists.sort();
        assert_eq!(names, lists, "only the old lists are left");
    }
}
