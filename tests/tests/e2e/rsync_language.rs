//! `ddftp archive` speaks rsync's language where it has the same concept:
//! real rsync and ddftp run on the same trees with the same options, and
//! the trees they make (and their exit codes) are compared.

use std::path::Path;
use std::process::Command;

use crate::util::tree::{assert_equal, scan, Look};
use crate::util::*;

/// rsync -a OPTIONS SRC/ DEST/ (local), its exit code.
fn rsync(src: &Path, dest: &Path, opts: &[&str]) -> i32 {
    let o = Command::new("rsync")
        .arg("-a")
        .args(opts)
        .arg(format!("{}/", src.display()))
        .arg(format!("{}/", dest.display()))
        .output()
        .expect("rsync (CI installs it)");
    o.status.code().unwrap_or(-1)
}

/// ddftp archive SRC (below the mirror's root) into DEST with OPTIONS,
/// its exit code.
fn ours(m: &Mirror, src: &str, dest: &Path, opts: &[&str]) -> i32 {
    let mut args = vec!["archive", src, "-m", &m.addr, "-d", dest.to_str().unwrap(), "-q"];
    args.extend(opts);
    let o = Command::new(bin("ddftp")).args(&args).output().expect("run ddftp");
    o.status.code().unwrap_or(-1)
}

/// The same entries, kinds, modes, owners, contents and file times; not
/// directories' times (rsync leaves some of its directories with the time
/// it wrote into them when a filter left entries out).
pub(crate) fn same_tree(a: &Path, b: &Path) {
    let look = Look { owners: is_root(), setid: is_root(), devices: false };
    let strip = |m: std::collections::BTreeMap<Vec<u8>, crate::util::tree::Seen>| {
        m.into_iter()
            .map(|(k, mut v)| {
                if let Some(at) = v.line.find(" dir-mtime ") {
                    v.line.truncate(at);
                }
                (k, v)
            })
            .collect()
    };
    assert_equal(&strip(scan(a, look)), &strip(scan(b, look)));
}

/// `--exclude`/`--include` patterns anchored as rsync anchors them: a
/// leading `/` at SRC, any other at any depth (a file meant to stay
/// private is left out wherever it is), `**`, a trailing `/`, first
/// match wins.
#[test]
fn filter_patterns_leave_out_what_rsync_leaves_out() {
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["deep", "a/deep", "a/b/deep", "logs/2026", "x/logs", "keep", "cache"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, p) in [
        "deep/f1",
        "a/deep/f1",
        "a/b/deep/f1",
        "a/deep/f1x",
        "top.tmp",
        "a/top.tmp",
        "logs/2026/x.gz",
        "logs/y.gz",
        "x/logs/z.gz",
        "keep/secret.key",
        "keep/public.txt",
        "cache/c",
        "a/cache",
    ]
    .iter()
    .enumerate()
    {
        random_file(&src.join(p), 100 + i, i as u64);
    }
    let m = Mirror::start(&f.root(), &[]);
    let sets: [&[&str]; 7] = [
        &["--exclude", "deep/f1"],
        &["--exclude", "/top.tmp", "--exclude", "logs/**/*.gz"],
        &["--include", "public.txt", "--exclude", "keep/*"],
        &["--exclude", "cache/", "--exclude", "a/b/"],
        &["--exclude", "/logs/***", "--exclude", "f[0-9]"],
        &["--exclude", "**/deep/*", "--exclude", "[!a-z]*"],
        &["--exclude", "*.gz", "--include", "*/", "--exclude", "*.key"],
    ];
    // Rules files, and -f rules, in order with the others.
    let rules = f.out("rules");
    std::fs::write(&rules, "# kept\n; also a comment\npublic.txt\n- secret.key\n").unwrap();
    let rules = rules.to_str().unwrap();
    let more: [&[&str]; 3] = [
        &["--include-from", rules, "--exclude", "keep/*"],
        &["-f", "- deep/f1", "--filter", "+ *.gz", "-f", "exclude logs/"],
        &["--exclude-from", rules, "-f", "include_*.key", "--exclude", "*.txt"],
    ];
    for (k, opts) in sets.iter().chain(more.iter()).enumerate() {
        let (theirs, mine) = (f.out(&format!("rsync{k}")), f.out(&format!("ddftp{k}")));
        assert_eq!(rsync(&src, &theirs, opts), 0, "rsync {opts:?}");
        assert_eq!(ours(&m, "src", &mine, opts), 0, "ddftp {opts:?}");
        same_tree(&theirs, &mine);
    }
}

/// `--existing` (`--ignore-non-existing`) updates only what DEST has and
/// makes nothing new; `--ignore-existing` makes only what DEST lacks:
/// from the same DEST, the same trees as rsync's.
#[test]
fn existing_and_ignore_existing_update_what_rsync_updates() {
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["d", "e/deeper"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, p) in ["a", "d/b", "d/new", "e/c", "e/deeper/x"].iter().enumerate() {
        random_file(&src.join(p), 500 + i, 70 + i as u64);
    }
    let m = Mirror::start(&f.root(), &[]);
    // DEST as it was: d/b older (other bytes and mtime), a and e missing.
    let before = |dest: &Path| {
        std::fs::create_dir_all(dest.join("d")).unwrap();
        random_file(&dest.join("d/b"), 300, 99);
        let t = std::fs::File::options().write(true).open(dest.join("d/b")).unwrap();
        t.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000)).unwrap();
    };
    for flag in ["--existing", "--ignore-non-existing", "--ignore-existing"] {
        let (theirs, mine) = (f.out(&format!("rsync{flag}")), f.out(&format!("ddftp{flag}")));
        before(&theirs);
        before(&mine);
        assert_eq!(rsync(&src, &theirs, &[flag]), 0, "rsync {flag}");
        assert_eq!(ours(&m, "src", &mine, &[flag]), 0, "ddftp {flag}");
        same_tree(&theirs, &mine);
    }
}

/// `--backup-dir` keeps what a run replaces or deletes, under its path,
/// in directories with the modes of DEST's (rsync's), not owner-only.
#[test]
fn backup_dir_keeps_what_rsync_keeps_with_its_directories_modes() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["open/inner", "shut"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, p) in ["open/inner/a", "shut/b", "top"].iter().enumerate() {
        random_file(&src.join(p), 400 + i, 80 + i as u64);
    }
    let m = Mirror::start(&f.root(), &[]);
    // DEST: older files in directories of their own modes, one to delete.
    let before = |dest: &Path| {
        for d in ["open/inner", "shut"] {
            std::fs::create_dir_all(dest.join(d)).unwrap();
        }
        for (i, p) in ["open/inner/a", "shut/b", "top", "shut/gone"].iter().enumerate() {
            random_file(&dest.join(p), 100 + i, 90 + i as u64);
            // One time in both DESTs: the backups keep it.
            let t = std::fs::File::options().write(true).open(dest.join(p)).unwrap();
            t.set_modified(std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_500_000_000)).unwrap();
        }
        for (d, mode) in [("open", 0o755), ("open/inner", 0o751), ("shut", 0o750)] {
            std::fs::set_permissions(dest.join(d), std::fs::Permissions::from_mode(mode)).unwrap();
        }
    };
    for (d, mode) in [("open", 0o755), ("open/inner", 0o751), ("shut", 0o750)] {
        std::fs::set_permissions(src.join(d), std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let (theirs, mine) = (f.out("rsync"), f.out("ddftp"));
    before(&theirs);
    before(&mine);
    let opts = ["--delete", "--backup-dir", ".replaced"];
    assert_eq!(rsync(&src, &theirs, &["-b", opts[0], opts[1], opts[2]]), 0);
    assert_eq!(ours(&m, "src", &mine, &opts), 0);
    same_tree(&theirs.join(".replaced"), &mine.join(".replaced"));
    same_tree(&theirs, &mine);
}

/// A SRC named twice is copied once, as rsync does (it used to be refused
/// as two SRCs that overlap).
#[test]
fn a_src_named_twice_is_copied_once() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    random_file(&src.join("a/f"), 300, 5);
    let m = Mirror::start(&f.root(), &[]);
    let (theirs, mine) = (f.out("rsync"), f.out("ddftp"));
    let o = Command::new("rsync")
        .arg("-a")
        .arg(format!("{}/", src.display()))
        .arg(format!("{}/", src.display()))
        .arg(format!("{}/", theirs.display()))
        .status()
        .expect("rsync (CI installs it)");
    assert!(o.success());
    let out = ddftp(&["archive", "src", "src/", "-m", &m.addr, "-d", mine.to_str().unwrap(), "-q"], 0);
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    same_tree(&theirs, &mine);
}

/// `-i` prints rsync's lines in rsync's order: `created directory DEST`
/// for a new DEST, a directory's files before its subdirectories, the
/// deletions first, deepest first in each directory.
#[test]
fn itemized_lines_come_in_rsyncs_order() {
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["k/deep", "b"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, p) in ["z", "k/a", "k/deep/x", "b/y", "c"].iter().enumerate() {
        random_file(&src.join(p), 50 + i, 60 + i as u64);
    }
    let m = Mirror::start(&f.root(), &[]);
    let lines = |out: &[u8], dest: &Path| -> Vec<String> {
        String::from_utf8_lossy(out)
            .lines()
            .filter(|l| !l.starts_with("dry run"))
            .map(|l| l.replace(&dest.display().to_string(), "DEST"))
            .collect()
    };
    let (theirs, mine) = (f.out("rsync"), f.out("ddftp"));
    let r = Command::new("rsync")
        .args(["-ai", "--delete"])
        .arg(format!("{}/", src.display()))
        .arg(&theirs)
        .output()
        .expect("rsync (CI installs it)");
    let o = ddftp(&["archive", "src", "-m", &m.addr, "-d", mine.to_str().unwrap(), "-i", "--delete", "-q"], 0);
    let said = lines(&o.stdout, &mine);
    assert_eq!(said[0], "created directory DEST", "{said:#?}");
    assert_eq!(lines(&r.stdout, &theirs), said);
    // Into the copies: entries to delete, some in a directory to delete.
    for d in [&theirs, &mine] {
        std::fs::create_dir_all(d.join("gone/sub")).unwrap();
        for p in ["gone/f", "gone/sub/g", "k/old", "a0"] {
            std::fs::write(d.join(p), b"x").unwrap();
        }
    }
    let r = Command::new("rsync")
        .args(["-ai", "--delete"])
        .arg(format!("{}/", src.display()))
        .arg(&theirs)
        .output()
        .unwrap();
    let o = ddftp(&["archive", "src", "-m", &m.addr, "-d", mine.to_str().unwrap(), "-i", "--delete", "-q"], 0);
    assert_eq!(lines(&r.stdout, &theirs), lines(&o.stdout, &mine));
}

/// `--max-delete N` deletes the N entries rsync deletes (its order:
/// SRC's directories depth first; in each, its sort reversed, a
/// directory's contents before it) and exits 25 as rsync does.
#[test]
fn max_delete_deletes_what_rsync_deletes_and_exits_25() {
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["a", "b"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
        std::fs::write(src.join(d).join("f"), d).unwrap();
    }
    let m = Mirror::start(&f.root(), &["--index", f.out("idx").to_str().unwrap()]);
    let old = f.out("old");
    for sub in ["a/x", "b", "c/d"] {
        std::fs::create_dir_all(old.join(sub)).unwrap();
    }
    for p in ["a/f", "b/f", "a/x/1", "a/x/2", "a/y", "a/z", "b/k", "c/d/e", "c/q", "top1", "top2"] {
        std::fs::write(old.join(p), "old").unwrap();
    }
    for n in ["1", "2", "3", "5", "9"] {
        let (ours_d, theirs_d) = (f.out(&format!("ours{n}")), f.out(&format!("theirs{n}")));
        for d in [&ours_d, &theirs_d] {
            let ok = Command::new("cp").arg("-a").arg(&old).arg(d).status().unwrap().success();
            assert!(ok, "cp -a");
        }
        let max = format!("--max-delete={n}");
        let theirs = rsync(&src, &theirs_d, &["--delete", &max]);
        let ours = ours(&m, "src", &ours_d, &["--delete", "--max-delete", n]);
        assert_eq!((ours, theirs), (25, 25), "--max-delete {n}");
        same_tree(&ours_d, &theirs_d);
    }
}

/// `-b` (and `--suffix`): what a run replaces or deletes is renamed
/// beside it, as rsync renames it; a later `--delete` leaves the backups
/// (rsync's protect rule for the suffix); with `--backup-dir`, no suffix
/// unless asked.
#[test]
fn backups_in_place_are_what_rsync_makes() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for (p, body) in [("a", "new a"), ("d/b", "new b, longer"), ("same", "same")] {
        std::fs::write(src.join(p), body).unwrap();
    }
    let m = Mirror::start(&f.root(), &["--index", f.out("idx").to_str().unwrap()]);
    let old = f.out("old");
    std::fs::create_dir_all(old.join("d/gone-dir")).unwrap();
    for (p, body) in [("a", "old a"), ("d/b", "old b"), ("gone", "gone"), ("d/gone-dir/x", "x")] {
        std::fs::write(old.join(p), body).unwrap();
    }
    // `same` as SRC has it: not replaced, so no backup of it.
    Command::new("cp").arg("-a").arg(src.join("same")).arg(old.join("same")).status().unwrap();
    let cases: &[&[&str]] =
        &[&["-b"], &["-b", "--suffix=.bak"], &["-b", "--delete"], &["-b", "--suffix=.old", "--delete"]];
    for (i, opts) in cases.iter().enumerate() {
        let (ours_d, theirs_d) = (f.out(&format!("ours{i}")), f.out(&format!("theirs{i}")));
        for d in [&ours_d, &theirs_d] {
            assert!(Command::new("cp").arg("-a").arg(&old).arg(d).status().unwrap().success());
        }
        let theirs = rsync(&src, &theirs_d, opts);
        let ours_opts: Vec<&str> =
            opts.iter().flat_map(|o| o.split_once('=').map_or(vec![*o], |(a, b)| vec![a, b])).collect();
        let code = ours(&m, "src", &ours_d, &ours_opts);
        assert_eq!((code, theirs), (0, 0), "{opts:?}");
        same_tree(&ours_d, &theirs_d);
        // Once more with --delete: the backups stay, in both.
        let delete: &[&str] = if opts.contains(&"--delete") { &[] } else { &["--delete"] };
        let again: Vec<&str> = [&ours_opts[..], delete].concat();
        let theirs = rsync(&src, &theirs_d, &[&opts[..], delete].concat());
        assert_eq!((ours(&m, "src", &ours_d, &again), theirs), (0, 0), "{opts:?} again");
        same_tree(&ours_d, &theirs_d);
    }
    // An empty suffix without --backup-dir would make the entry its own backup.
    assert_eq!(ours(&m, "src", &f.out("none"), &["-b", "--suffix", ""]), 2);
}

/// The lines of an `rsync --stats` block (`NAME: VALUE`), by name.
fn stats_lines(out: &[u8]) -> std::collections::BTreeMap<String, String> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| l.split_once(": ").map(|(k, v)| (k.to_string(), v.to_string())))
        .collect()
}

/// `--stats` (and `--info=stats`) print rsync's block with rsync's
/// numbers: the same counts and sizes for a first copy and for a rerun
/// after one file changed (small files: both move them whole).
#[test]
fn stats_count_what_rsyncs_stats_count() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for (i, p) in ["a", "b", "d/c"].iter().enumerate() {
        random_file(&src.join(p), 1000 * (i + 1), i as u64);
    }
    let m = Mirror::start(&f.root(), &[]);
    let (theirs, mine) = (f.out("rsync"), f.out("ddftp"));
    let same = [
        "Number of files",
        "Number of deleted files",
        "Number of regular files transferred",
        "Total file size",
        "Total transferred file size",
        "Literal data",
        "Matched data",
    ];
    for (round, info) in [(1, "--stats"), (2, "--info=progress2,stats2")] {
        if round == 2 {
            random_file(&src.join("d/c"), 3500, 9);
        }
        let o = Command::new("rsync")
            .args(["-a", "--stats", &format!("{}/", src.display()), &format!("{}/", theirs.display())])
            .output()
            .expect("rsync (CI installs it)");
        assert!(o.status.success());
        let out = ddftp(&["archive", "src", "-m", &m.addr, "-d", mine.to_str().unwrap(), info], 0);
        let (r, d) = (stats_lines(&o.stdout), stats_lines(&out.stdout));
        for k in same {
            let (want, got) = (r.get(k), d.get(k));
            assert!(want.is_some() && want == got, "round {round}, {k}: rsync {want:?}, ddftp {got:?}");
        }
        let want = if round == 1 { "3" } else { "1" };
        assert_eq!(d["Number of regular files transferred"], want);
    }
    // Unknown --info flags are refused, naming what is understood.
    let out = ddftp(&["archive", "src", "-m", &m.addr, "-d", mine.to_str().unwrap(), "--info=name1"], 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("understands progress2"));
}

/// Hard links as rsync keeps them: linked with `-H`, a copy per name
/// without it (`rsync -a`'s default).
#[test]
fn hard_links_are_kept_with_dash_h_and_copied_without_as_rsync_does() {
    use std::os::unix::fs::MetadataExt;
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    random_file(&src.join("a"), 5000, 1);
    std::fs::hard_link(src.join("a"), src.join("d/b")).unwrap();
    let m = Mirror::start(&f.root(), &[]);
    for (n, opts) in [(0, &[][..]), (1, &["-H"][..])] {
        let (theirs, mine) = (f.out(&format!("rsync{n}")), f.out(&format!("ddftp{n}")));
        assert_eq!(rsync(&src, &theirs, opts), 0);
        assert_eq!(ours(&m, "src", &mine, opts), 0);
        same_tree(&theirs, &mine);
        for d in [&theirs, &mine] {
            let (a, b) = (std::fs::metadata(d.join("a")).unwrap(), std::fs::metadata(d.join("d/b")).unwrap());
            assert_eq!(a.ino() == b.ino(), n == 1, "{}: linked {}", d.display(), a.ino() == b.ino());
            assert_eq!(std::fs::read(d.join("a")).unwrap(), std::fs::read(d.join("d/b")).unwrap());
        }
    }
}

/// `-a` (and all of its parts, `-rlptgoD`) asks `archive` for what it
/// keeps anyway: the same tree as `rsync -a`. Parts without `-r` are
/// refused (rsync would skip every directory), nothing copied; parts with
/// it keep only what they name (`rsync_parts`).
#[test]
fn dash_a_and_its_parts_keep_what_rsync_dash_a_keeps() {
    let f = Fixture::new();
    use std::os::unix::fs::PermissionsExt;
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("d/sub")).unwrap();
    random_file(&src.join("d/f"), 5000, 7);
    random_file(&src.join("d/sub/run.sh"), 300, 8);
    std::fs::set_permissions(src.join("d/sub/run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    std::fs::set_permissions(src.join("d/sub"), std::fs::Permissions::from_mode(0o705)).unwrap();
    std::os::unix::fs::symlink("f", src.join("d/link")).unwrap();
    let fifo = std::ffi::CString::new(src.join("d/fifo").into_os_string().into_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o640) }, 0);
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    std::fs::File::options().write(true).open(src.join("d/f")).unwrap().set_modified(old).unwrap();
    old_times(&src, &["d/link", "d/fifo"]);
    let m = Mirror::start(&f.root(), &[]);
    let theirs = f.out("rsync");
    assert_eq!(rsync(&src, &theirs, &[]), 0);
    for (name, opts) in [("a", &["-a"][..]), ("av", &["-av"][..]), ("parts", &["-rlptgoD"][..])] {
        let mine = f.out(name);
        assert_eq!(ours(&m, "src", &mine, opts), 0, "{opts:?}");
        same_tree(&theirs, &mine);
    }
    let none = f.out("rt");
    let out = ddftp(&["archive", "src", "-m", &m.addr, "-d", none.to_str().unwrap(), "-lt"], 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("-lt without -r") && err.contains("give -r"), "{err}");
    assert!(!none.exists(), "nothing is copied");
}

/// `--safe-links` leaves out the symlinks rsync's leaves out (absolute,
/// climbing above DEST counted from the link's directory, or with a `..`
/// after a name), and keeps what DEST has under their names, `--delete`
/// or not.
#[test]
fn safe_links_leaves_out_what_rsync_leaves_out() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    random_file(&src.join("d/f"), 100, 1);
    random_file(&src.join("top"), 100, 2);
    for (link, target) in [
        ("d/ok", "f"),
        ("d/up", "../top"),
        ("d/out", "../../x"),
        ("d/abs", "/etc/passwd"),
        ("d/sneaky", "sub/../../../x"),
        ("d/inner", "sub/../f"),
        ("d/deeper", "../d/f"),
        ("top_link", "d/f"),
        ("above", ".."),
    ] {
        std::os::unix::fs::symlink(target, src.join(link)).unwrap();
        old_times(&src, &[link]);
    }
    let m = Mirror::start(&f.root(), &[]);
    let (theirs, mine) = (f.out("rsync"), f.out("ddftp"));
    for d in [&theirs, &mine] {
        std::fs::create_dir_all(d.join("d")).unwrap();
        std::fs::write(d.join("d/abs"), b"what DEST had").unwrap();
        // Kept as it is by both: the same time in both, not two clock
        // ticks apart.
        old_times(d, &["d/abs"]);
    }
    assert_eq!(rsync(&src, &theirs, &["--safe-links", "--delete"]), 0);
    assert_eq!(ours(&m, "src", &mine, &["--safe-links", "--delete"]), 0);
    same_tree(&theirs, &mine);
    assert_eq!(std::fs::read(mine.join("d/abs")).unwrap(), b"what DEST had");
    for gone in ["d/out", "d/sneaky", "d/inner", "above"] {
        assert!(std::fs::symlink_metadata(mine.join(gone)).is_err(), "{gone} made");
    }
}

/// Gives `names` below `src` (symlinks themselves, FIFOs) an old mtime:
/// rsync 3.5.0 left a new symlink's and FIFO's times as it made them when
/// the source's were within the same second, so the times compared are
/// then the source's.
pub(crate) fn old_times(src: &Path, names: &[&str]) {
    for n in names {
        let ok = Command::new("touch").args(["-h", "-d", "@1600000000"]).arg(src.join(n)).status().unwrap();
        assert!(ok.success(), "touch -h {n}");
    }
}
