//! `ddftp archive`: a tree from k real mirrors equals its source (content,
//! type, mode, mtime, link targets); reruns skip what is complete; dwalk
//! lists with --strip; a stale mirror is left out, and one whose copy
//! changes after it registered the bundle is dropped.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

/// The source tree: nested and empty directories, 300 small files, one
/// of 3 MB, symlinks (one dangling), odd names, modes and an old mtime.
fn make_source(proj: &Path) {
    std::fs::create_dir_all(proj.join("a/b/c")).unwrap();
    std::fs::create_dir_all(proj.join("empty/also empty")).unwrap();
    for i in 0..300u64 {
        let dir = proj.join(["a", "a/b", "a/b/c"][(i % 3) as usize]);
        random_file(&dir.join(format!("f{i:03}")), ((i * 7919) % 5000) as usize, i);
    }
    random_file(&proj.join("big.bin"), 3_000_000, 99);
    std::fs::write(proj.join("empty-file"), b"").unwrap();
    std::fs::write(proj.join("with space"), b"s").unwrap();
    std::fs::write(proj.join("new\nline"), b"n").unwrap();
    std::fs::write(proj.join(OsStr::from_bytes(b"bytes-\xff")), b"b").unwrap();
    std::os::unix::fs::symlink("a/f000", proj.join("link")).unwrap();
    std::os::unix::fs::symlink("../nowhere", proj.join("a/dangling")).unwrap();
    let ro = proj.join("a/read-only");
    std::fs::write(&ro, b"ro").unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    std::fs::set_permissions(proj.join("a/f006"), std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(proj.join("a/b"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let old =
        Command::new("touch").arg("-h").arg("-d").arg("2001-02-03 04:05:06.789").arg(proj.join("big.bin")).status();
    assert!(old.unwrap().success());
    let old = Command::new("touch").arg("-h").arg("-d").arg("2002-02-03 04:05:06").arg(proj.join("link")).status();
    assert!(old.unwrap().success());
}

/// Everything a copy must keep, by path below `root` (the root's own
/// mtime and mode included).
pub(crate) fn snapshot(root: &Path) -> BTreeMap<Vec<u8>, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let full = root.join(&rel);
        let m = full.symlink_metadata().unwrap();
        let what = if m.is_dir() {
            for e in std::fs::read_dir(&full).unwrap() {
                stack.push(rel.join(e.unwrap().file_name()));
            }
            "dir".to_string()
        } else if m.file_type().is_symlink() {
            format!("link -> {:?}", std::fs::read_link(&full).unwrap())
        } else if !m.is_file() {
            // A FIFO, socket or device: its type (reading would block).
            use std::os::unix::fs::FileTypeExt;
            let t = m.file_type();
            format!(
                "special fifo {} socket {} char {} rdev {}",
                t.is_fifo(),
                t.is_socket(),
                t.is_char_device(),
                m.rdev()
            )
        } else {
            format!("file {}", sha256_hex(&std::fs::read(&full).unwrap()))
        };
        let line = format!(
            "{what} size {} mode {:o} mtime {}.{:09}",
            if m.is_dir() { 0 } else { m.size() },
            m.mode(),
            m.mtime(),
            m.mtime_nsec()
        );
        out.insert(rel.as_os_str().as_bytes().to_vec(), line);
    }
    out
}

pub(crate) fn assert_same(src: &Path, dst: &Path) {
    let (a, b) = (snapshot(src), snapshot(dst));
    if a != b {
        let show = |m: &BTreeMap<Vec<u8>, String>| -> String {
            m.iter().map(|(k, v)| format!("{:?} {v}\n", String::from_utf8_lossy(k))).collect()
        };
        panic!("copy differs from source\n--- source\n{}--- copy\n{}", show(&a), show(&b));
    }
}

#[test]
fn archive_equals_the_source_from_one_two_and_three_mirrors() {
    let f = Fixture::new();
    let proj = f.root().join("proj");
    make_source(&proj);
    let mirrors: Vec<Mirror> = (0..3).map(|_| Mirror::start(&f.root(), &[])).collect();
    for k in 1..=3 {
        let dest = f.out(&format!("copy{k}"));
        let ms: Vec<&Mirror> = mirrors.iter().take(k).collect();
        let out = ddftp(
            &[
                "archive",
                "proj",
                "--mirrors",
                &mirrors_arg(&ms),
                "--dest",
                dest.to_str().unwrap(),
                "--json",
                "-q",
                "--block-size",
                "64KiB",
            ],
            0,
        );
        let j = json(&out);
        assert_eq!(j["files"], 306, "{j}");
        assert_eq!(j["skipped_files"], 0);
        assert_eq!(j["links"], 2);
        assert_eq!(j["dirs"], 6);
        let producers = j["transfer"]["producers"].as_array().unwrap();
        assert_eq!(producers.len(), k, "{j}");
        assert_same(&proj, &dest);
    }
}

#[test]
fn a_rerun_moves_only_what_is_missing_or_wrong() {
    let f = Fixture::new();
    let proj = f.root().join("proj");
    make_source(&proj);
    let (m1, m2) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let dest = f.out("copy");
    let args =
        ["archive", "proj", "--mirrors", &mirrors_arg(&[&m1, &m2]), "--dest", dest.to_str().unwrap(), "--json", "-q"];
    ddftp(&args, 0);
    std::fs::remove_file(dest.join("a/b/c/f002")).unwrap();
    std::fs::write(dest.join("big.bin"), b"damaged").unwrap();
    // Right bytes (size and mtime), wrong mode: given its mode, not moved.
    std::fs::set_permissions(dest.join("a/b/f001"), std::fs::Permissions::from_mode(0o600)).unwrap();
    let j = json(&ddftp(&args, 0));
    assert_eq!((j["skipped_files"].as_u64(), j["modes_fixed"].as_u64()), (Some(304), Some(1)), "{j}");
    let len = |p: &str| std::fs::metadata(proj.join(p)).unwrap().len();
    assert_eq!(j["bytes"], 3_000_000 + len("a/b/c/f002"), "{j}");
    assert_same(&proj, &dest);
    let j = json(&ddftp(&args, 0));
    assert_eq!((j["skipped_files"].as_u64(), j["bytes"].as_u64()), (Some(306), Some(0)), "{j}");
}

#[test]
fn a_dwalk_format_list_with_strip_drives_the_copy() {
    let f = Fixture::new();
    let proj = f.root().join("proj");
    make_source(&proj);
    let root = f.root().canonicalize().unwrap();
    let list = f.out("list.mfu");
    let walked = root.join("proj");
    ddftp(&["walk", walked.to_str().unwrap(), "--output-format", "mfu", "-o", list.to_str().unwrap(), "-q"], 0);
    let m = Mirror::start(&f.root(), &[]);
    let dest = f.out("copy");
    let (dest_s, list_s) = (dest.to_str().unwrap(), list.to_str().unwrap());
    let archive = |strip: &str, expect: i32| {
        let args =
            ["archive", "proj", "--mirrors", &m.addr, "--dest", dest_s, "--list", list_s, "--strip", strip, "-q"];
        ddftp(&args, expect)
    };
    archive(root.to_str().unwrap(), 0);
    assert_same(&proj, &dest);
    let out = archive("/elsewhere", 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--strip"));
}

#[test]
fn a_large_tree_moves_in_parts_while_the_mirror_walks() {
    let f = Fixture::new();
    let proj = f.root().join("proj");
    for d in 0..100 {
        let dir = proj.join(format!("d{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..200usize {
            std::fs::write(dir.join(format!("f{i:03}")), vec![(d + i) as u8; i % 97]).unwrap();
        }
    }
    let (m1, m2) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    // 20,000 files, handed over 4,096 at a time: the first part is cut
    // from the first of them (the mover is free), while the walk goes
    // on; the rest come in one or more parts after.
    let (dest, args, j) = archive_in_parts(&f, &[&m1, &m2]);
    assert_eq!(j["files"], 20_000);
    assert_eq!(j["dirs"], 101);
    // One report for all the parts: their bytes, each mirror's share.
    assert_eq!(j["transfer"]["bytes"], j["bytes"], "{j}");
    let shares: f64 = j["transfer"]["producers"].as_array().unwrap().iter().map(|p| p["share"].as_f64().unwrap()).sum();
    assert!((shares - 1.0).abs() < 1e-9, "{j}");
    assert_same(&proj, &dest);
    // Run again: nothing to move, every file found complete.
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let j = json(&ddftp(&args, 0));
    assert_eq!((j["skipped_files"].as_u64(), j["parts"].as_u64()), (Some(20_000), Some(0)), "{j}");
}

/// `ddftp archive proj` from `mirrors` into a new `copy`, a part cut
/// whenever the mover is free; asserts it moved in parts. The copy, the
/// arguments (to run again) and the report.
fn archive_in_parts(f: &Fixture, mirrors: &[&Mirror]) -> (PathBuf, Vec<String>, serde_json::Value) {
    let dest = f.out("copy");
    let (m, d) = (mirrors_arg(mirrors), dest.to_str().unwrap().to_string());
    let args: Vec<String> = ["archive", "proj", "--mirrors", &m, "--dest", &d, "--json", "-q", "--part-bytes", "1"]
        .map(String::from)
        .into();
    let j = json(&ddftp(&args.iter().map(String::as_str).collect::<Vec<_>>(), 0));
    assert!(j["parts"].as_u64().unwrap() >= 2, "{j}");
    (dest, args, j)
}

#[test]
fn directories_finished_while_the_last_part_moves_keep_their_modes_and_mtimes() {
    let f = Fixture::new();
    let proj = f.root().join("proj");
    // The root's entries come first in the walk, and the mover cuts a
    // part from the first it gets: a 3 MB file there makes that part take
    // ~1 s from two 1.5 MB/s mirrors, and the last part (the rest of the
    // 6,000 files) is created ahead meanwhile.
    std::fs::create_dir_all(&proj).unwrap();
    random_file(&proj.join("big.bin"), 3_000_000, 1);
    for d in 0..60u64 {
        let dir = proj.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..100u64 {
            random_file(&dir.join(format!("f{i:03}")), (i * 13 % 300) as usize, d * 1000 + i);
        }
    }
    // Directories the last part still changes (a symlink made into them,
    // one its owner cannot write) and empty ones, nested.
    std::os::unix::fs::symlink("f001", proj.join("d07/link")).unwrap();
    std::fs::create_dir_all(proj.join("d09/sub/only-a-link")).unwrap();
    std::os::unix::fs::symlink("../../f002", proj.join("d09/sub/only-a-link/l")).unwrap();
    std::fs::create_dir_all(proj.join("empty/deeper/deepest")).unwrap();
    std::fs::set_permissions(proj.join("d11"), std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::set_permissions(proj.join("d12"), std::fs::Permissions::from_mode(0o711)).unwrap();
    for (dir, date) in
        [("d05", "2003-01-01 00:00:01.5"), ("d07", "2004-01-01"), ("d11", "2005-01-01"), ("empty", "2006-01-01")]
    {
        let t = Command::new("touch").arg("-d").arg(date).arg(proj.join(dir)).status();
        assert!(t.unwrap().success());
    }
    let (m1, m2) = (Mirror::with_rate(&f.root(), "1500KB"), Mirror::with_rate(&f.root(), "1500KB"));
    let (dest, _, j) = archive_in_parts(&f, &[&m1, &m2]);
    assert_eq!(j["dirs"], 66, "{j}");
    // Never DEST (the journal is there) nor d11 (its owner cannot write
    // in it), nor a directory the last part puts a file or symlink in
    // (made, or renamed to its name, as its bytes come): those of the
    // parts before it.
    let early = j["dirs_finished_early"].as_u64().unwrap();
    assert!((1..=64).contains(&early), "{j}");
    assert_same(&proj, &dest);
    for root in [&proj, &dest] {
        std::fs::set_permissions(root.join("d11"), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// The source under the fixture's root, and a copy of it under another
/// root `name` (for a second mirror).
fn source_and_copy(f: &Fixture, name: &str) -> (PathBuf, PathBuf) {
    let proj = f.root().join("proj");
    make_source(&proj);
    let other = f.out(name);
    std::fs::create_dir(&other).unwrap();
    assert!(Command::new("cp").arg("-a").arg(&proj).arg(&other).status().unwrap().success());
    (proj, other)
}

#[test]
fn a_stale_mirror_is_left_out() {
    let f = Fixture::new();
    let (proj, stale) = source_and_copy(&f, "stale");
    // An older copy: same sizes but other mtimes (as a mirror synced an
    // hour ago would have), and one file of another size.
    for e in walkdir(&stale.join("proj")) {
        if e.symlink_metadata().unwrap().is_file() {
            let m = e.metadata().unwrap();
            let older = filetime_of(m.mtime() - 3600, m.mtime_nsec());
            assert!(Command::new("touch").arg("-d").arg(older).arg(&e).status().unwrap().success());
        }
    }
    std::fs::write(stale.join("proj/a/f003"), b"an older, shorter version").unwrap();
    let (good, bad) = (Mirror::start(&f.root(), &[]), Mirror::start(&stale, &[]));
    let dest = f.out("copy");
    let out = ddftp(
        &["archive", "proj", "--mirrors", &mirrors_arg(&[&good, &bad]), "--dest", dest.to_str().unwrap(), "-q"],
        0,
    );
    // Refused at the first entry it reads: the other mirror sends its blocks.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("dropping {}", bad.addr)) && err.contains("listed with"), "{err}");
    assert_same(&proj, &dest);
}

/// `touch -d` form of a time.
fn filetime_of(sec: i64, nsec: i64) -> String {
    format!("@{sec}.{nsec:09}")
}

#[test]
fn a_mirror_whose_copy_changes_after_registering_is_dropped() {
    let f = Fixture::new();
    let (proj, other) = source_and_copy(&f, "other");
    // The good mirror slowed, so the changing one is asked for blocks
    // however late it answers (a loaded machine: it would not be).
    let (good, changing) = (Mirror::start(&f.root(), &["--rate-limit", "8MB"]), Mirror::start(&other, &[]));
    let archive = |dest: &Path| {
        let m = mirrors_arg(&[&good, &changing]);
        ddftp(&["archive", "proj", "--mirrors", &m, "--dest", dest.to_str().unwrap(), "-q", "--block-size", "64KiB"], 0)
    };
    // Both mirrors register the bundle and serve it while their copies agree.
    let first = f.out("first");
    archive(&first);
    assert_same(&proj, &first);
    // Then every file of the second copy grows by a byte: the second
    // mirror still registers the list, but each block it would send is
    // refused as it reads the entry.
    for e in walkdir(&other.join("proj")) {
        if e.symlink_metadata().unwrap().is_file() {
            let mut perm = e.metadata().unwrap().permissions();
            perm.set_mode(0o644);
            std::fs::set_permissions(&e, perm).unwrap();
            let mut data = std::fs::read(&e).unwrap();
            data.push(b'!');
            std::fs::write(&e, data).unwrap();
        }
    }
    let second = f.out("second");
    let out = archive(&second);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("dropping {}", changing.addr)) && err.contains("listed with"), "{err}");
    assert_same(&proj, &second);
}

/// Every path below `dir` (not following symlinks).
fn walkdir(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.symlink_metadata().unwrap().is_dir() {
            out.extend(walkdir(&p));
        }
        out.push(p);
    }
    out
}

#[test]
fn an_entry_below_a_symlink_in_the_list_is_refused_and_the_rest_copied() {
    let f = Fixture::new();
    let outside = f.out("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::create_dir(f.root().join("proj")).unwrap();
    std::os::unix::fs::symlink(&outside, f.root().join("proj/a")).unwrap();
    // A list (from --list, or a hostile mirror) with the symlink `a`, out
    // of DEST, and a directory below it.
    let list = f.out("list");
    let mut l = b"#ddftp-list 1\0d 0 755 0.000000000 proj\0".to_vec();
    l.extend_from_slice(format!("l {} 777 0.000000000 proj/a\0", outside.as_os_str().len()).as_bytes());
    l.extend_from_slice(b"d 0 755 0.000000000 proj/a/b\0");
    std::fs::write(&list, l).unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let dest = f.out("copy");
    let args =
        ["archive", "proj", "--mirrors", &m.addr, "--dest", dest.to_str().unwrap(), "--list", list.to_str().unwrap()];
    // The entry below the symlink is named and not made (exit 5); the
    // rest of the list is copied.
    let out = ddftp(&args, 5);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("proj/a/b") && err.contains("no directory"), "{err}");
    assert!(!outside.join("b").exists(), "made a directory out of DEST");
    assert_eq!(std::fs::read_link(dest.join("a")).unwrap(), outside);
}

#[test]
fn a_missing_source_is_a_clear_error() {
    let f = Fixture::new();
    let m = Mirror::start(&f.root(), &[]);
    let out = ddftp(&["archive", "nope", "--mirrors", &m.addr, "--dest", f.out("copy").to_str().unwrap()], 1);
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"));
}

#[test]
fn a_full_disk_is_a_clear_error_naming_the_file_and_a_rerun_completes() {
    let f = Fixture::new();
    let proj = f.root().join("proj");
    make_source(&proj);
    let disk = SmallDisk::mount(&f.out("disk"), "1m");
    let m = Mirror::start(&f.root(), &[]);
    let dest = disk.0.join("copy");
    let args = ["archive", "proj", "--mirrors", &m.addr, "--dest", dest.to_str().unwrap(), "-q"];
    let out = ddftp(&args, 4);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("No space left on device") && err.contains(&format!("{}/", dest.display())), "{err}");
    assert!(err.contains("run the same command again"), "{err}");
    disk.grow("16m");
    ddftp(&args, 0);
    assert_same(&proj, &dest);
}

#[test]
fn a_dest_that_is_a_file_is_a_clear_error_and_stays() {
    let f = Fixture::new();
    make_source(&f.root().join("proj"));
    let m = Mirror::start(&f.root(), &[]);
    let dest = f.out("copy");
    std::fs::write(&dest, b"keep me").unwrap();
    let out = ddftp(&["archive", "proj", "--mirrors", &m.addr, "--dest", dest.to_str().unwrap()], 4);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not a directory"), "{err}");
    assert_eq!(std::fs::read(&dest).unwrap(), b"keep me");
}

/// Archives 40 files of 150 KB from two mirrors at 1.5 MB/s each, killed
/// (SIGKILL) once the journal records some blocks; the source, and the
/// arguments that run it.
fn interrupted_archive(f: &Fixture, mirrors: &[&Mirror]) -> (PathBuf, Vec<String>) {
    let proj = f.root().join("proj");
    std::fs::create_dir_all(proj.join("sub")).unwrap();
    for i in 0..40u64 {
        random_file(&proj.join(format!("sub/f{i:02}")), 150_000, 100 + i);
    }
    let dest = f.out("copy");
    let args: Vec<String> = ["archive", "proj", "--mirrors", &mirrors_arg(mirrors), "--dest", dest.to_str().unwrap()]
        .into_iter()
        .chain(["--json", "-q"])
        .map(String::from)
        .collect();
    killed_once_journaled(&args, &dest);
    (proj, args)
}

/// Runs ddftp with `args` and kills it (SIGKILL) once the journal in
/// `dest` records some completed blocks.
fn killed_once_journaled<S: AsRef<std::ffi::OsStr>>(args: &[S], dest: &Path) {
    let mut child = Command::new(bin("ddftp")).args(args).stdout(std::process::Stdio::null()).spawn().unwrap();
    let journal = dest.join(".ddftp-archive.ddftp-journal");
    let t0 = std::time::Instant::now();
    while !std::fs::read_to_string(&journal).is_ok_and(|j| j.contains("\"done\":[[")) {
        assert!(t0.elapsed().as_secs() < 20, "no journal with completed blocks appeared");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn an_interrupted_archive_resumes_where_it_stopped() {
    let f = Fixture::new();
    let (m1, m2) = (Mirror::with_rate(&f.root(), "1500KB"), Mirror::with_rate(&f.root(), "1500KB"));
    let (proj, args) = interrupted_archive(&f, &[&m1, &m2]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let j = json(&ddftp(&args, 0));
    let reused = j["transfer"]["reused_bytes"].as_u64().unwrap();
    assert!(reused > 0 && reused < 6_000_000, "the rerun should reuse what arrived before the kill: {j}");
    // The rerun's bytes and rate are its own; what was resumed is said apart.
    let n = |k: &str| j[k].as_u64().unwrap();
    assert_eq!(n("resumed_bytes"), reused, "{j}");
    assert_eq!(n("bytes") + n("resumed_bytes"), j["transfer"]["bytes"].as_u64().unwrap(), "{j}");
    let rate = j["mb_per_s"].as_f64().unwrap() * 1e6 * j["seconds"].as_f64().unwrap();
    assert!((rate - n("bytes") as f64).abs() < 1.0, "the rate counts this run's bytes: {j}");
    assert_same(&proj, &f.out("copy"));
}

#[test]
fn symlinks_an_interrupted_archive_made_and_lost_since_are_moved_again() {
    let f = Fixture::new();
    let proj = f.root().join("proj");
    std::fs::create_dir_all(proj.join("sub")).unwrap();
    // Links first in path order: the first block from the range's left end.
    for i in 0..20u64 {
        std::os::unix::fs::symlink(format!("sub/f{i:02}"), proj.join(format!("a-link{i:02}"))).unwrap();
    }
    for i in 0..40u64 {
        random_file(&proj.join(format!("sub/f{i:02}")), 150_000, 300 + i);
    }
    let (m1, m2) = (Mirror::with_rate(&f.root(), "1500KB"), Mirror::with_rate(&f.root(), "1500KB"));
    let dest = f.out("copy");
    let m = mirrors_arg(&[&m1, &m2]);
    let args = ["archive", "proj", "--mirrors", &m, "--dest", dest.to_str().unwrap(), "--json", "-q"];
    killed_once_journaled(&args, &dest);
    let made: Vec<PathBuf> = (0..20).map(|i| dest.join(format!("a-link{i:02}"))).filter(|l| l.is_symlink()).collect();
    assert!(!made.is_empty(), "the links' block was journaled, so the links were made");
    for l in &made {
        std::fs::remove_file(l).unwrap();
    }
    let out = ddftp(&args, 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("symlinks the interrupted run made are gone ({})", made.len())), "{err}");
    assert_same(&proj, &dest);
}

#[test]
fn an_archive_interrupted_while_it_moves_in_parts_completes_on_a_rerun() {
    let f = Fixture::new();
    let proj = f.root().join("proj");
    for d in 0..6 {
        let dir = proj.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..1000u64 {
            random_file(&dir.join(format!("f{i:04}")), 1000, d * 1000 + i);
        }
    }
    let (m1, m2) = (Mirror::with_rate(&f.root(), "1500KB"), Mirror::with_rate(&f.root(), "1500KB"));
    let dest = f.out("copy");
    let m = mirrors_arg(&[&m1, &m2]);
    let d = dest.to_str().unwrap();
    let args = ["archive", "proj", "--mirrors", &m, "--dest", d, "--json", "-q", "--part-bytes", "1"];
    // 6 MB at 3 MB/s in two parts at least: killed once a journal records
    // some blocks (of the first part or a later one).
    killed_once_journaled(&args, &dest);
    let j = json(&ddftp(&args, 0));
    assert_eq!(j["files"], 6000, "{j}");
    assert!(j["skipped_files"].as_u64().unwrap() < 6000, "{j}");
    assert_same(&proj, &dest);
}

#[test]
fn a_walk_that_breaks_part_way_is_taken_again_from_the_mirrors() {
    let f = Fixture::new();
    std::fs::set_permissions(f.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let proj = f.root().join("proj");
    make_source(&proj);
    // A directory the first mirror (as nobody) cannot read: its walk sends
    // the rest of the list, then fails.
    let locked = proj.join("locked");
    std::fs::create_dir(&locked).unwrap();
    random_file(&locked.join("inside"), 3000, 77);
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    if !is_root() {
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    }
    let (partial, whole) = (Mirror::as_nobody(&f.root()), Mirror::start(&f.root(), &[]));
    let dest = f.out("copy");
    let m = mirrors_arg(&[&partial, &whole]);
    let out = ddftp(&["archive", "proj", "--mirrors", &m, "--dest", dest.to_str().unwrap(), "--json", "-q"], 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stopped part way") && err.contains(&partial.addr), "{err}");
    if !is_root() {
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    assert_same(&proj, &dest);
}

#[test]
fn a_file_new_since_an_interrupted_archive_is_moved_too() {
    let f = Fixture::new();
    let (m1, m2) = (Mirror::with_rate(&f.root(), "1500KB"), Mirror::with_rate(&f.root(), "1500KB"));
    let (proj, args) = interrupted_archive(&f, &[&m1, &m2]);
    // Neither in the interrupted run's list nor in DEST: it must not pass
    // as already there (the interrupted list is then not resumed).
    random_file(&proj.join("sub/new"), 5000, 99);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let j = json(&ddftp(&args, 0));
    assert_eq!(j["files"], 41, "{j}");
    assert!(j["skipped_files"].as_u64().unwrap() < 40, "{j}");
    assert_same(&proj, &f.out("copy"));
}
