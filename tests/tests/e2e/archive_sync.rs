//! `ddftp archive` as a sync: `--dry-run` lists exactly the changes a run
//! would make (checked against a hand-written list and, where rsync is
//! installed, against `rsync -a -n -i --delete`) and changes nothing;
//! `--delete` then makes DEST equal to SRC; filters keep entries from
//! being moved and from being deleted.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::archive::{assert_same, snapshot};
use crate::util::*;

fn touch(p: &Path, when: &str) {
    assert!(Command::new("touch").arg("-h").arg("-d").arg(when).arg(p).status().unwrap().success());
}

/// A dry run's change lines (its last line, the totals, left out), sorted.
fn dry_run(m: &Mirror, dst: &Path, extra: &[&str]) -> BTreeSet<String> {
    let mut args = vec!["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-n"];
    args.extend(extra);
    let o = ddftp(&args, 0);
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.last().is_some_and(|l| l.starts_with("dry run, nothing changed")), "{out}");
    lines[..lines.len() - 1].iter().map(|l| l.to_string()).collect()
}

/// What `rsync -a -n -i --delete` says of the same pair (CI installs rsync).
fn rsync_says(src: &Path, dst: &Path, extra: &[&str]) -> BTreeSet<String> {
    let o = Command::new("rsync")
        .args(["-a", "-n", "-i", "--delete"])
        .args(extra)
        .arg(format!("{}/", src.display()))
        .arg(format!("{}/", dst.display()))
        .output()
        .expect("rsync (CI installs it)");
    assert!(o.status.success(), "rsync: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().lines().map(String::from).collect()
}

fn set(lines: &[&str]) -> BTreeSet<String> {
    lines.iter().map(|l| l.to_string()).collect()
}

#[test]
fn dry_run_lists_exactly_the_changes_and_delete_makes_dest_equal_to_src() {
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["a/b", "c", "keep"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, p) in ["a/f1", "a/f2", "a/b/f3", "c/f4", "c/old", "top", "keep/k"].iter().enumerate() {
        random_file(&src.join(p), 1000 + i, 80 + i as u64);
    }
    std::os::unix::fs::symlink("a/f1", src.join("link")).unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let dst = f.dir.path().join("dst");
    ddftp(&["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-q"], 0);
    assert_same(&src, &dst);
    assert!(dry_run(&m, &dst, &["--delete"]).is_empty(), "nothing to do after a copy");

    // Add, delete, rename, chmod, touch, replace a file by a directory;
    // and something in DEST that SRC never had.
    random_file(&src.join("a/new"), 10, 90);
    std::fs::remove_file(src.join("c/old")).unwrap();
    std::fs::rename(src.join("a/f2"), src.join("a/f2-renamed")).unwrap();
    std::fs::set_permissions(src.join("a/b/f3"), std::fs::Permissions::from_mode(0o600)).unwrap();
    touch(&src.join("c/f4"), "2020-01-01 00:00:00");
    std::fs::remove_file(src.join("top")).unwrap();
    std::fs::create_dir(src.join("top")).unwrap();
    random_file(&src.join("top/inside"), 5, 91);
    std::fs::create_dir_all(dst.join("extra/deep")).unwrap();
    std::fs::write(dst.join("extra/deep/z"), b"z").unwrap();
    // Directory times as the mutations left them, fixed so the expected
    // list does not depend on the clock.
    for d in ["", "a", "c", "top", "keep"] {
        touch(&src.join(d), "2021-06-01 12:00:00");
    }
    touch(&dst.join("keep"), "2021-06-01 12:00:00");

    let before = snapshot(&dst);
    let ours = dry_run(&m, &dst, &["--delete"]);
    assert_eq!(snapshot(&dst), before, "a dry run changes nothing");
    let expected = set(&[
        ".d..t...... ./",
        ".d..t...... a/",
        ">f+++++++++ a/new",
        ">f+++++++++ a/f2-renamed",
        "*deleting   a/f2",
        ".f...p..... a/b/f3",
        ".d..t...... c/",
        ">f..t...... c/f4",
        "*deleting   c/old",
        "*deleting   extra/",
        "*deleting   extra/deep/",
        "*deleting   extra/deep/z",
        "cd+++++++++ top/",
        ">f+++++++++ top/inside",
    ]);
    assert_eq!(ours, expected);
    assert_eq!(ours, rsync_says(&src, &dst, &[]), "rsync -a -n -i --delete says the same");
    // The totals, with --json.
    let o = ddftp(&["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-n", "--delete", "--json"], 0);
    let j = json(&o)["dry_run"].clone();
    let n = |k: &str| j[k].as_u64().unwrap();
    assert_eq!(
        (n("new_files"), n("changed_files"), n("mode_only"), n("new_dirs"), n("changed_dirs"), n("deletions")),
        (3, 1, 1, 1, 3, 5),
        "{j}"
    );

    // The sync itself: DEST equals SRC again, with nothing left to do.
    let o = ddftp(&["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "--delete", "--json"], 0);
    let r = json(&o);
    assert_eq!((r["deleted"].as_u64(), r["modes_fixed"].as_u64()), (Some(5), Some(1)), "{r}");
    assert_same(&src, &dst);
    assert!(dry_run(&m, &dst, &["--delete"]).is_empty());
    let theirs = rsync_says(&src, &dst, &[]);
    assert!(theirs.is_empty(), "rsync finds a difference: {theirs:?}");
}

#[test]
fn excluded_entries_are_never_moved_nor_deleted() {
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["a/scratch", ".snapshot/daily", "logs/2026/11"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for p in ["a/f", "a/x.tmp", "a/keep.tmp", "a/scratch/s", ".snapshot/daily/old", "logs/2026/11/a.gz", "logs/top.gz"]
    {
        random_file(&src.join(p), 100, 7);
    }
    let rules = f.dir.path().join("rules");
    std::fs::write(&rules, "# the snapshots\n- .snapshot\n").unwrap();
    let dst = f.dir.path().join("dst");
    std::fs::create_dir_all(dst.join("a/scratch")).unwrap();
    std::fs::write(dst.join("a/scratch/mine"), b"local").unwrap();
    std::fs::write(dst.join("a/local.tmp"), b"local").unwrap();
    std::fs::write(dst.join("gone"), b"not in SRC").unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let filters = [
        "--include",
        "keep.tmp",
        "--exclude",
        "*.tmp",
        "--exclude",
        "scratch/",
        "--exclude-from",
        rules.to_str().unwrap(),
        "--exclude",
        "logs/*/**/*.gz",
    ];
    let mut args = vec!["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "--delete", "--json"];
    args.extend(filters);
    let r = json(&ddftp(&args, 0));
    assert_eq!(r["deleted"].as_u64(), Some(1), "only `gone`: {r}");
    for (p, there) in [
        ("a/f", true),
        ("a/keep.tmp", true),
        ("logs/top.gz", true),
        ("a/x.tmp", false),
        ("a/scratch/s", false),
        (".snapshot", false),
        ("logs/2026/11/a.gz", false),
        ("gone", false),
        // Excluded, so protected from --delete:
        ("a/scratch/mine", true),
        ("a/local.tmp", true),
    ] {
        assert_eq!(dst.join(p).exists(), there, "{p}");
    }
    // (The mirror left them out of its walk: none reached the client.)
    assert_eq!(r["excluded"].as_u64(), Some(0), "{r}");
    // The same filters in rsync's hands leave nothing to do either.
    let rs = [
        "--include=keep.tmp",
        "--exclude=*.tmp",
        "--exclude=scratch/",
        "--exclude=.snapshot",
        "--exclude=logs/*/**/*.gz",
    ];
    let theirs = rsync_says(&src, &dst, &rs);
    assert!(theirs.is_empty(), "rsync finds a difference: {theirs:?}");
    // A bad pattern is a usage error, before anything moves.
    ddftp(&["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "--exclude", "a["], 2);
}

#[test]
fn fifos_and_sockets_are_made_and_a_device_is_made_by_root_or_named_with_exit_5() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    random_file(&src.join("f"), 100, 3);
    assert!(Command::new("mkfifo").args(["-m", "640"]).arg(src.join("d/pipe")).status().unwrap().success());
    let sock = std::os::unix::net::UnixListener::bind(src.join("sock")).unwrap();
    drop(sock);
    touch(&src.join("d/pipe"), "2019-03-04 05:06:07");
    touch(&src.join("d"), "2019-03-04 05:06:07");
    let dst = f.dir.path().join("dst");
    let m = Mirror::start(&f.root(), &[]);
    let d = dst.to_str().unwrap();
    ddftp(&["archive", "src", "-d", d, "-m", &m.addr, "-q"], 0);
    assert_same(&src, &dst);
    let p = std::fs::symlink_metadata(dst.join("d/pipe")).unwrap();
    assert!(p.file_type().is_fifo() && p.mode() & 0o7777 == 0o640);
    assert!(std::fs::symlink_metadata(dst.join("sock")).unwrap().file_type().is_socket());
    // A FIFO replaced by a file on DEST: the dry run says it is made again.
    std::fs::remove_file(dst.join("d/pipe")).unwrap();
    std::fs::write(dst.join("d/pipe"), b"x").unwrap();
    touch(&dst.join("d"), "2019-03-04 05:06:07");
    assert_eq!(dry_run(&m, &dst, &["--delete"]), set(&["cS+++++++++ d/pipe"]));
    ddftp(&["archive", "src", "-d", d, "-m", &m.addr, "-q", "--delete"], 0);
    assert_same(&src, &dst);

    // A device node not made (--no-owner: as a user would run): named,
    // exit 5, under --dry-run and --delete too; the rest of the sync done,
    // and what DEST has under its name kept.
    need(is_root(), "root: the device part: mknod needs root");
    assert!(Command::new("mknod").arg(src.join("null")).args(["c", "1", "3"]).status().unwrap().success());
    std::fs::write(dst.join("null"), b"what DEST had under that name").unwrap();
    std::fs::write(dst.join("gone"), b"x").unwrap();
    for extra in [&["-n", "--delete"][..], &["--delete"][..]] {
        let mut args = vec!["archive", "src", "-d", d, "-m", &m.addr, "--no-owner"];
        args.extend(extra);
        let o = ddftp(&args, 5);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains("src/null") && err.contains("Char"), "{extra:?}: {err}");
    }
    assert!(!dst.join("gone").exists(), "the rest of the sync was done");
    assert!(dst.join("null").is_file(), "what stands under the name of an entry not copied is kept");
    // Run as root (owners kept), the device is made, with its numbers.
    touch(&dst, "2000-01-01 00:00:00");
    touch(&src, "2000-01-01 00:00:00");
    assert_eq!(dry_run(&m, &dst, &["--delete"]), set(&["cD+++++++++ null"]));
    ddftp(&["archive", "src", "-d", d, "-m", &m.addr, "-q", "--delete"], 0);
    let n = std::fs::symlink_metadata(dst.join("null")).unwrap();
    assert!(n.file_type().is_char_device() && n.rdev() == libc::makedev(1, 3), "{n:?}");
    assert_same(&src, &dst);
}

/// The rules go to the mirror: it never reads an excluded directory (here
/// one the server, running as nobody, could not read: a walk into it
/// would report it and exit 5).
#[test]
fn the_mirror_does_not_walk_an_excluded_directory_nor_one_files_from_does_not_name() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join(".snapshot/daily")).unwrap();
    random_file(&src.join("f"), 100, 5);
    random_file(&src.join(".snapshot/daily/old"), 100, 6);
    for p in [f.dir.path(), &f.root(), &src] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(src.join("f"), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(src.join(".snapshot"), std::fs::Permissions::from_mode(0o000)).unwrap();
    let m = Mirror::as_nobody(&f.root());
    let dst = f.dir.path().join("dst");
    let d = dst.to_str().unwrap();
    // Without the rule, the walk meets it: named, exit 5.
    let o = ddftp(&["archive", "src", "-d", d, "-m", &m.addr, "-q"], 5);
    assert!(String::from_utf8_lossy(&o.stderr).contains(".snapshot"), "{}", String::from_utf8_lossy(&o.stderr));
    // With it, the mirror leaves it alone.
    std::fs::remove_dir_all(&dst).unwrap();
    let r = json(&ddftp(&["archive", "src", "-d", d, "-m", &m.addr, "--exclude", ".snapshot", "--json"], 0));
    assert_eq!(r["failed"].as_array().map(Vec::len), Some(0), "{r}");
    assert!(dst.join("f").exists() && !dst.join(".snapshot").exists());
    // Nor with --files-from naming what to copy: the mirror is sent the
    // names and reads nothing else.
    let only = f.dir.path().join("only");
    std::fs::write(&only, "f\n").unwrap();
    let sel = f.dir.path().join("sel");
    let (sel_s, only_s) = (sel.to_str().unwrap(), only.to_str().unwrap());
    let r = json(&ddftp(&["archive", "src", "-d", sel_s, "-m", &m.addr, "--files-from", only_s, "--json"], 0));
    assert_eq!(r["failed"].as_array().map(Vec::len), Some(0), "{r}");
    assert!(sel.join("f").exists());
    std::fs::set_permissions(src.join(".snapshot"), std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// rsync's exit code and stdout lines for `rsync -a EXTRA SRC/ DST/`.
fn rsync_run(src: &Path, dst: &Path, extra: &[&str]) -> (i32, BTreeSet<String>) {
    let o = Command::new("rsync")
        .arg("-a")
        .args(extra)
        .arg(format!("{}/", src.display()))
        .arg(format!("{}/", dst.display()))
        .output()
        .expect("rsync (CI installs it)");
    (o.status.code().unwrap(), String::from_utf8(o.stdout).unwrap().lines().map(String::from).collect())
}

#[test]
fn delete_keeps_excluded_entries_and_the_directories_holding_them_as_rsync_does() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a"), b"a").unwrap();
    let dst = f.dir.path().join("dst");
    let theirs = f.dir.path().join("theirs");
    for d in [&dst, &theirs] {
        std::fs::create_dir_all(d.join("keepdir")).unwrap();
        std::fs::write(d.join("keepdir/k.o"), b"k").unwrap();
        std::fs::write(d.join("keepdir/q"), b"q").unwrap();
    }
    let m = Mirror::start(&f.root(), &[]);
    // The dry run says what rsync's says: q goes, k.o and keepdir stay.
    let ours = dry_run(&m, &dst, &["--delete", "--exclude", "*.o"]);
    assert!(ours.contains("*deleting   keepdir/q"), "{ours:?}");
    assert!(!ours.iter().any(|l| l.contains("k.o") || l.ends_with("keepdir/")), "{ours:?}");
    let (code, rs) = rsync_run(&src, &theirs, &["-n", "-i", "--delete", "--exclude=*.o"]);
    assert_eq!(code, 0);
    let rs: BTreeSet<String> = rs.into_iter().filter(|l| l.starts_with("*deleting")).collect();
    let del: BTreeSet<String> = ours.into_iter().filter(|l| l.starts_with("*deleting")).collect();
    assert_eq!(del, rs);
    // The run, and rsync's on its copy: the same tree, exit 0 both.
    let args = ["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "--delete", "--exclude", "*.o"];
    ddftp(&args, 0);
    assert_eq!(rsync_run(&src, &theirs, &["--delete", "--exclude=*.o"]).0, 0);
    for d in [&dst, &theirs] {
        assert!(d.join("keepdir/k.o").exists() && !d.join("keepdir/q").exists(), "{}", d.display());
    }
    // (rsync's note that it keeps keepdir is no difference.)
    let (_, left) = rsync_run(&src, &dst, &["-n", "-i", "--delete", "--exclude=*.o"]);
    let left: Vec<&String> = left.iter().filter(|l| !l.starts_with("cannot delete non-empty directory")).collect();
    assert!(left.is_empty(), "rsync finds a difference: {left:?}");
}

#[test]
fn a_plain_run_never_empties_a_directory_to_make_a_file_or_symlink_only_delete_does() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::os::unix::fs::symlink("nowhere", src.join("dang")).unwrap();
    std::fs::write(src.join("file"), b"f").unwrap();
    std::fs::write(src.join("ok"), b"ok").unwrap();
    let dst = f.dir.path().join("dst");
    let theirs = f.dir.path().join("theirs");
    for d in [&dst, &theirs] {
        std::fs::create_dir_all(d.join("dang/sub")).unwrap();
        std::fs::write(d.join("dang/sub/g"), b"g").unwrap();
        std::fs::create_dir_all(d.join("file/x")).unwrap();
    }
    let m = Mirror::start(&f.root(), &[]);
    let args = ["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr];
    // The dry run says what the run will refuse (rsync -n: 23).
    let mut dry = args.to_vec();
    dry.push("-n");
    let err = String::from_utf8(ddftp(&dry, 5).stderr).unwrap();
    assert!(err.contains("src/dang") && err.contains("--delete"), "{err}");
    assert_eq!(rsync_run(&src, &theirs, &["-n"]).0, 23);
    let out = ddftp(&args, 5);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("src/dang") && err.contains("src/file") && err.contains("--delete"), "{err}");
    // rsync refuses the same (23), and both keep what the directories hold.
    assert_eq!(rsync_run(&src, &theirs, &[]).0, 23);
    for d in [&dst, &theirs] {
        assert!(d.join("dang/sub/g").exists() && d.join("file/x").is_dir(), "{}", d.display());
        assert_eq!(std::fs::read(d.join("ok")).unwrap(), b"ok");
    }
    // With --delete, both replace them.
    let mut del = args.to_vec();
    del.push("--delete");
    ddftp(&del, 0);
    assert_eq!(rsync_run(&src, &theirs, &["--delete"]).0, 0);
    assert_eq!(std::fs::read_link(dst.join("dang")).unwrap(), Path::new("nowhere"));
    assert_eq!(std::fs::read(dst.join("file")).unwrap(), b"f");
    let (_, left) = rsync_run(&src, &dst, &["-n", "-i", "--delete"]);
    assert!(left.is_empty(), "rsync finds a difference: {left:?}");
}
