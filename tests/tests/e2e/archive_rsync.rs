//! `ddftp archive` speaks rsync where it claims to: `-n` prints the lines
//! `rsync -aniAX --delete` prints for the same change (symlinks with their
//! targets, ACLs as `a` and other xattrs as `x`, the entries of a directory
//! that a symlink or file replaces, whole-second mtimes), and `-i` prints
//! them again on the real run (as does `-v`), after which rsync finds
//! nothing to do.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Command;

use crate::util::*;

fn run(cmd: &mut Command) {
    let o = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e} (CI installs it)"));
    assert!(o.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&o.stderr));
}

fn touch(p: &Path, when: &str) {
    run(Command::new("touch").arg("-h").arg("-d").arg(when).arg(p));
}

fn set_xattr(p: &Path, name: &str, value: &[u8]) {
    let (p, n) = (CString::new(p.as_os_str().as_bytes()).unwrap(), CString::new(name).unwrap());
    // SAFETY: valid C strings and a value of the length given.
    let r = unsafe { libc::lsetxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    assert_eq!(r, 0, "lsetxattr {p:?} {name}: {}", std::io::Error::last_os_error());
}

/// rsync's lines for `rsync -a -n -i -A -X --delete SRC/ DST/`, sorted.
fn rsync_says(src: &Path, dst: &Path) -> Vec<String> {
    let o = Command::new("rsync")
        .args(["-aniAX", "--delete"])
        .arg(format!("{}/", src.display()))
        .arg(format!("{}/", dst.display()))
        .output()
        .expect("rsync (CI installs it)");
    assert!(o.status.success(), "rsync: {}", String::from_utf8_lossy(&o.stderr));
    let mut lines: Vec<String> = String::from_utf8(o.stdout).unwrap().lines().map(String::from).collect();
    lines.sort();
    lines
}

/// Our change lines (a dry run's totals line left out; a run is given -q), sorted.
fn ours(m: &Mirror, dst: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "--delete", "--xattrs"];
    args.extend(extra);
    let out = String::from_utf8(ddftp(&args, 0).stdout).unwrap();
    let mut lines: Vec<String> = out.lines().filter(|l| !l.starts_with("dry run, ")).map(String::from).collect();
    lines.sort();
    lines
}

/// SRC, and DEST as an earlier copy of it that has since drifted in every
/// way the issue names.
fn trees(root: &Path, dst: &Path) {
    let src = root.join("src");
    let p = |r: &str| src.join(r);
    for d in ["sub", "dacl", "keep"] {
        std::fs::create_dir_all(p(d)).unwrap();
    }
    for (i, f) in ["f", "g", "acl", "ax", "ux", "dirfile", "keep/k"].iter().enumerate() {
        random_file(&p(f), 300 + i, 100 + i as u64);
    }
    // Names and targets a hostile mirror might give: escaped, as rsync does.
    random_file(&p("new\nline"), 10, 399);
    std::os::unix::fs::symlink("t\x1b[31m", p("esc")).unwrap();
    for (link, to) in [("newlink", "f"), ("chlink", "f"), ("samelink", "f"), ("dirlink", "sub")] {
        std::os::unix::fs::symlink(to, p(link)).unwrap();
    }
    run(Command::new("setfacl").args(["-m", "u:nobody:r"]).arg(p("acl")));
    run(Command::new("setfacl").args(["-m", "u:nobody:rw"]).arg(p("ax")));
    set_xattr(&p("ax"), "user.k", b"v");
    set_xattr(&p("ux"), "user.k", b"v");
    run(Command::new("setfacl").args(["-d", "-m", "u:nobody:rx"]).arg(p("dacl")));
    for f in ["f", "g", "acl", "ax", "ux", "dirfile", "keep/k", "newlink", "chlink", "samelink", "dirlink"] {
        touch(&p(f), "2020-01-01 00:00:00.5");
    }
    touch(&p("samelink"), "2021-01-01");

    // The earlier copy.
    run(Command::new("cp").arg("-a").arg(&src).arg(dst));
    let q = |r: &str| dst.join(r);
    std::fs::remove_file(q("newlink")).unwrap();
    std::fs::remove_file(q("new\nline")).unwrap();
    std::fs::remove_file(q("esc")).unwrap();
    std::fs::remove_file(q("chlink")).unwrap();
    std::os::unix::fs::symlink("other", q("chlink")).unwrap();
    touch(&q("samelink"), "2020-01-01");
    // A directory where SRC now has a symlink, and one where it has a file.
    std::fs::remove_file(q("dirlink")).unwrap();
    std::fs::create_dir_all(q("dirlink/x")).unwrap();
    std::fs::write(q("dirlink/x/q"), b"q").unwrap();
    std::fs::write(q("dirlink/w"), b"w").unwrap();
    std::fs::remove_file(q("dirfile")).unwrap();
    std::fs::create_dir_all(q("dirfile/sub")).unwrap();
    std::fs::write(q("dirfile/sub/a"), b"a").unwrap();
    std::fs::write(q("dirfile/b"), b"b").unwrap();
    // ACLs and xattrs gone from the copy.
    for f in ["acl", "ax", "dacl"] {
        run(Command::new("setfacl").arg("-b").arg(q(f)));
        if f == "ax" {
            run(Command::new("setfacl").args(["-m", "u:nobody:r"]).arg(q(f)));
        }
    }
    set_xattr(&q("ux"), "user.k", b"old");
    set_xattr(&q("ax"), "user.k", b"old");
    std::fs::create_dir_all(q("gone/deep")).unwrap();
    std::fs::write(q("gone/deep/z"), b"z").unwrap();
    // Times: the files as SRC's, but a sub-second apart (the same second:
    // no change to rsync); every directory too.
    for f in ["f", "acl", "ax", "ux", "keep/k", "chlink"] {
        touch(&q(f), "2020-01-01 00:00:00.5");
    }
    touch(&q("g"), "2020-01-01 00:00:00.7");
    for d in ["", "sub", "dacl", "keep"] {
        touch(&p(d), "2020-01-01 00:00:00.5");
        touch(&q(d), "2020-01-01 00:00:00.7");
    }
}

#[test]
fn dry_run_and_itemized_run_print_what_rsync_prints() {
    let f = Fixture::new();
    let dst = f.dir.path().join("dst");
    trees(&f.root(), &dst);
    let (twin, triplet) = (f.dir.path().join("twin"), f.dir.path().join("triplet"));
    run(Command::new("cp").arg("-a").arg(&dst).arg(&twin));
    run(Command::new("cp").arg("-a").arg(&dst).arg(&triplet));
    let m = Mirror::start(&f.root(), &[]);
    let src = f.root().join("src");

    let theirs = rsync_says(&src, &dst);
    let dry = ours(&m, &dst, &["-n"]);
    assert_eq!(dry, theirs, "ddftp archive -n --delete --xattrs vs rsync -aniAX --delete");
    // What the comparison covers, should rsync ever change its words.
    for want in [
        "cL+++++++++ newlink -> f",
        "cL+++++++++ esc -> t\\#033[31m",
        ">f+++++++++ new\\#012line",
        "cLc........ chlink -> f",
        ".L..t...... samelink -> f",
        "cL+++++++++ dirlink -> sub",
        "*deleting   dirlink/x/q",
        "*deleting   dirlink/x/",
        "*deleting   dirlink/w",
        "*deleting   dirfile/sub/a",
        ">f+++++++++ dirfile",
        ".f........x ux",
        ".d.......a. dacl/",
        "*deleting   gone/deep/z",
        "*deleting   gone/",
    ] {
        assert!(dry.contains(&want.to_string()), "{want:?} missing from {dry:#?}");
    }
    assert!(dry.iter().any(|l| l.starts_with(".f...") && l.ends_with("a. acl")), "{dry:#?}");
    assert!(dry.iter().any(|l| l.ends_with("ax ax")), "{dry:#?}");
    // Sub-second differences are none, to rsync and to us.
    for quiet in [" g", " sub/", " keep/", " ./"] {
        assert!(!dry.iter().any(|l| l.ends_with(quiet)), "{quiet:?} in {dry:#?}");
    }

    // The real run with -i prints the same lines, and leaves nothing to do.
    let made = ours(&m, &twin, &["-i", "-q"]);
    assert_eq!(made, dry, "archive -i prints what archive -n printed");
    assert_eq!(rsync_says(&src, &twin), Vec::<String>::new(), "rsync finds nothing left to do");
    // -v lists them as well (logs go to stderr, the lines to stdout).
    assert_eq!(ours(&m, &triplet, &["-v", "-q"]), dry, "archive -v prints what archive -n printed");
    // A second run changes nothing, and says nothing.
    assert_eq!(ours(&m, &twin, &["-i", "-q"]), Vec::<String>::new());
}

/// rsync's exit code and sorted stdout lines for `rsync -a ARGS SRC/ DST/`.
fn rsync_with(src: &Path, dst: &Path, args: &[&str]) -> (i32, Vec<String>) {
    rsync_many(&[src], dst, args)
}

/// Every regular file below `dir` with its bytes, and every directory.
fn contents(dir: &Path) -> std::collections::BTreeMap<String, Option<Vec<u8>>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p);
                out.insert(rel + "/", None);
            } else {
                out.insert(rel, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    out
}

/// The same tree twice: `a` and `b` (copies made with `cp -a`).
fn twins(from: &Path, a: &Path, b: &Path) {
    for to in [a, b] {
        run(Command::new("cp").arg("-a").arg(from).arg(to));
    }
}

/// A source of a few directories and files, with whole-second mtimes.
fn small_src(root: &Path) -> std::path::PathBuf {
    let src = root.join("src");
    for d in ["a/b", "a/x", "d/e", "keep"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, f) in ["a/b/c", "a/x/y", "top", "d/e/f", "d/g", "keep/k", "new"].iter().enumerate() {
        random_file(&src.join(f), 200 + i * 10, 700 + i as u64);
    }
    run(Command::new("find").arg(&src).args(["-exec", "touch", "-h", "-d", "2020-02-02 02:02:02", "{}", "+"]));
    src
}

#[test]
fn files_from_copies_what_it_names_as_rsync_does() {
    let f = Fixture::new();
    let src = small_src(&f.root());
    let m = Mirror::start(&f.root(), &[]);
    let list = f.out("files");
    std::fs::write(&list, "# the run's files\na/b/c\n/top\n./d/\n; d is made, not entered\n").unwrap();
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    let lf = list.to_str().unwrap();
    ddftp(&["archive", "src", "-m", &m.addr, "-d", ours.to_str().unwrap(), "--files-from", lf, "-q"], 0);
    let (code, _) = rsync_with(&src, &theirs, &["--files-from", lf]);
    assert_eq!(code, 0);
    assert_eq!(contents(&ours), contents(&theirs));
    let names: Vec<String> = contents(&ours).into_keys().collect();
    // d/ with its slash: what is directly in it too (rsync's implied --dirs).
    assert_eq!(
        names,
        ["a/", "a/b/", "a/b/c", "d/", "d/e/", "d/g", "top"],
        "what is named and the directories on the way"
    );
    // Nothing left to do, to rsync (times and modes too).
    assert_eq!(rsync_with(&src, &ours, &["-n", "-i", "--files-from", lf]), (0, vec![]));

    // A name SRC lacks: named, exit 5, the rest copied (rsync: 23).
    std::fs::write(&list, "top\nnot-there\n").unwrap();
    let fresh = f.out("fresh");
    let o = ddftp(&["archive", "src", "-m", &m.addr, "-d", fresh.to_str().unwrap(), "--files-from", lf, "-q"], 5);
    assert!(String::from_utf8_lossy(&o.stderr).contains("src/not-there: --files-from names it"), "{o:?}");
    assert!(fresh.join("top").exists());
    assert_eq!(rsync_with(&src, &f.out("fresh-rsync"), &["--files-from", lf]).0, 23);
    // A line that leaves SRC is a usage error, before anything moves.
    std::fs::write(&list, "../../etc/passwd\n").unwrap();
    let o = ddftp(&["archive", "src", "-m", &m.addr, "-d", f.out("no").to_str().unwrap(), "--files-from", lf], 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 1"), "{o:?}");
    assert!(!f.out("no").exists());
}

#[test]
fn ignore_existing_leaves_what_dest_has_as_rsync_does() {
    let f = Fixture::new();
    let src = small_src(&f.root());
    let m = Mirror::start(&f.root(), &[]);
    let old = f.out("old");
    run(Command::new("cp").arg("-a").arg(&src).arg(&old));
    std::fs::write(old.join("top"), b"an older, different top").unwrap();
    std::fs::remove_file(old.join("new")).unwrap();
    std::fs::remove_file(old.join("a/x/y")).unwrap();
    run(Command::new("touch").arg("-d").arg("2020-02-02 02:02:02").arg(old.join("a/x")).arg(&old));
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    twins(&old, &ours, &theirs);
    let dry = String::from_utf8(
        ddftp(&["archive", "src", "-m", &m.addr, "-d", ours.to_str().unwrap(), "--ignore-existing", "-n"], 0).stdout,
    )
    .unwrap();
    let mut dry: Vec<String> = dry.lines().filter(|l| !l.starts_with("dry run")).map(String::from).collect();
    dry.sort();
    let (_, said) = rsync_with(&src, &theirs, &["-n", "-i", "--ignore-existing"]);
    assert_eq!(dry, said);
    assert_eq!(dry, [">f+++++++++ a/x/y", ">f+++++++++ new"]);
    ddftp(&["archive", "src", "-m", &m.addr, "-d", ours.to_str().unwrap(), "--ignore-existing", "-q"], 0);
    assert_eq!(rsync_with(&src, &theirs, &["--ignore-existing"]).0, 0);
    assert_eq!(contents(&ours), contents(&theirs));
    assert_eq!(std::fs::read(ours.join("top")).unwrap(), b"an older, different top", "kept as it was");
}

#[test]
fn max_delete_stops_deleting_at_n_as_rsync_does() {
    let f = Fixture::new();
    let src = small_src(&f.root());
    let m = Mirror::start(&f.root(), &[]);
    let old = f.out("old");
    run(Command::new("cp").arg("-a").arg(&src).arg(&old));
    for x in ["gone1", "a/gone2", "d/e/gone3", "keep/gone4", "gone5"] {
        std::fs::write(old.join(x), x).unwrap();
    }
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    twins(&old, &ours, &theirs);
    let extra = |d: &Path| contents(d).into_keys().filter(|k| k.contains("gone")).count();
    let args = |d: &Path, more: &[&'static str]| {
        let mut a = vec!["archive".to_string(), "src".into(), "-m".into(), m.addr.clone(), "-d".into()];
        a.push(d.to_str().unwrap().into());
        a.extend(["--delete", "--max-delete", "2"].iter().chain(more).map(|s| s.to_string()));
        a
    };
    let dry = ddftp(&args(&ours, &["-n"]).iter().map(String::as_str).collect::<Vec<_>>(), 25);
    let said = String::from_utf8(dry.stdout.clone()).unwrap();
    let (code, theirs_said) = rsync_with(&src, &theirs, &["-n", "-i", "--delete", "--max-delete=2"]);
    assert_eq!(code, 25);
    let deleting = |lines: Vec<String>| lines.iter().filter(|l| l.starts_with("*deleting")).count();
    assert_eq!(deleting(said.lines().map(String::from).collect()), deleting(theirs_said));
    assert!(String::from_utf8_lossy(&dry.stderr).contains("--max-delete 2: 3 entries"), "{dry:?}");

    let o = ddftp(&args(&ours, &["--json", "-q"]).iter().map(String::as_str).collect::<Vec<_>>(), 25);
    let r = json(&o);
    assert_eq!((r["deleted"].as_u64(), r["deletions_skipped"].as_u64()), (Some(2), Some(3)), "{r}");
    assert_eq!(rsync_with(&src, &theirs, &["--delete", "--max-delete=2"]).0, 25);
    assert_eq!((extra(&ours), extra(&theirs)), (3, 3), "both deleted two of five");
    // The same two: rsync's order (SRC's directories depth first; in each,
    // its sort reversed, a directory's contents before it).
    let left = |d: &Path| contents(d).into_keys().filter(|k| k.contains("gone")).collect::<Vec<_>>();
    assert_eq!(left(&ours), left(&theirs));
}

#[test]
fn backup_dir_keeps_what_a_run_replaces_or_deletes_as_rsync_does() {
    let f = Fixture::new();
    let src = small_src(&f.root());
    let m = Mirror::start(&f.root(), &[]);
    let old = f.out("old");
    run(Command::new("cp").arg("-a").arg(&src).arg(&old));
    std::fs::write(old.join("top"), b"the old top, another size").unwrap();
    std::fs::write(old.join("a/b/c"), b"old c").unwrap();
    std::fs::create_dir_all(old.join("gone/deep")).unwrap();
    std::fs::write(old.join("gone/deep/z"), b"z").unwrap();
    std::fs::write(old.join("d/stale"), b"stale").unwrap();
    // A directory where SRC now has the file `new`.
    std::fs::remove_file(old.join("new")).unwrap();
    std::fs::create_dir_all(old.join("new/inner")).unwrap();
    std::fs::write(old.join("new/inner/z"), b"in the way").unwrap();
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    twins(&old, &ours, &theirs);
    let o = ddftp(
        &[
            "archive",
            "src",
            "-m",
            &m.addr,
            "-d",
            ours.to_str().unwrap(),
            "--delete",
            "--backup-dir",
            "bak",
            "--json",
            "-q",
        ],
        0,
    );
    assert_eq!(json(&o)["deleted"].as_u64(), Some(4), "gone/deep/z, gone/deep/, gone/, d/stale");
    assert_eq!(rsync_with(&src, &theirs, &["--delete", "--backup-dir=bak"]).0, 0);
    let (a, b) = (contents(&ours), contents(&theirs));
    assert_eq!(a, b);
    assert_eq!(a["bak/top"].as_deref(), Some(&b"the old top, another size"[..]));
    assert_eq!(a["bak/gone/deep/z"].as_deref(), Some(&b"z"[..]));
    assert_eq!(a["bak/new/inner/z"].as_deref(), Some(&b"in the way"[..]), "a directory a file replaces");
    // The copy is SRC, but for the backups.
    let (_, left) = rsync_with(&src, &ours, &["-n", "-i", "--delete", "--exclude=/bak"]);
    assert_eq!(left, Vec::<String>::new());
    // A rerun keeps the backups: the backup dir is not something SRC lacks.
    ddftp(&["archive", "src", "-m", &m.addr, "-d", ours.to_str().unwrap(), "--delete", "--backup-dir", "bak", "-q"], 0);
    assert!(ours.join("bak/top").exists());
}

/// rsync's sorted itemized lines and exit code for `rsync -a ARGS SRC/... DST/`.
fn rsync_many(srcs: &[&Path], dst: &Path, args: &[&str]) -> (i32, Vec<String>) {
    let mut cmd = Command::new("rsync");
    cmd.arg("-a").args(args);
    for s in srcs {
        cmd.arg(format!("{}/", s.display()));
    }
    let o = cmd.arg(format!("{}/", dst.display())).output().expect("rsync (CI installs it)");
    let mut lines: Vec<String> = String::from_utf8(o.stdout).unwrap().lines().map(String::from).collect();
    lines.retain(|l| !l.starts_with("created directory"));
    lines.sort();
    (o.status.code().unwrap_or(-1), lines)
}

#[test]
fn several_srcs_merge_into_dest_as_rsync_merges_them() {
    let f = Fixture::new();
    let (one, two) = (f.root().join("one"), f.root().join("two"));
    for (d, dirs) in [(&one, ["d", "a"]), (&two, ["d", "b"])] {
        for sub in dirs {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
    }
    std::fs::write(one.join("x"), b"the first SRC's x").unwrap();
    std::fs::write(two.join("x"), b"the second's, longer x").unwrap();
    std::fs::write(one.join("d/a1"), b"a1").unwrap();
    std::fs::write(two.join("d/b1"), b"b1").unwrap();
    std::fs::write(two.join("b/only"), b"only").unwrap();
    std::fs::set_permissions(one.join("d"), std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
    run(Command::new("find").arg(f.root()).args(["-exec", "touch", "-h", "-d", "2020-03-03 03:03:03", "{}", "+"]));
    run(Command::new("touch").args(["-d", "2021-01-01"]).arg(two.join("d")));
    let m = Mirror::start(&f.root(), &[]);
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    let d = ours.to_str().unwrap();
    let out = ddftp(&["archive", "one", "two", "-m", &m.addr, "-d", d, "-i", "-q"], 0);
    let mut lines: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(String::from).collect();
    // As rsync_many has it (the line and its place: rsync_language.rs).
    lines.retain(|l| !l.starts_with("created directory"));
    lines.sort();
    let (code, said) = rsync_many(&[&one, &two], &theirs, &["-i"]);
    assert_eq!(code, 0);
    assert_eq!(lines, said, "archive -i one two vs rsync -ai one/ two/");
    assert_eq!(contents(&ours), contents(&theirs));
    assert_eq!(std::fs::read(ours.join("x")).unwrap(), b"the first SRC's x", "the first SRC's name wins");
    assert_eq!(rsync_many(&[&one, &two], &ours, &["-n", "-i"]), (0, vec![]), "modes and times as rsync's too");

    // A change in the second, a stray in DEST: the dry runs agree, and
    // --delete keeps what either SRC has.
    std::fs::write(two.join("b/new"), b"new").unwrap();
    std::fs::write(ours.join("stray"), b"stray").unwrap();
    std::fs::write(theirs.join("stray"), b"stray").unwrap();
    let out = ddftp(&["archive", "one", "two", "-m", &m.addr, "-d", d, "-n", "--delete"], 0);
    let mut dry: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("dry run"))
        .map(String::from)
        .collect();
    dry.sort();
    assert_eq!(dry, rsync_many(&[&one, &two], &theirs, &["-n", "-i", "--delete"]).1);
    ddftp(&["archive", "one", "two", "-m", &m.addr, "-d", d, "--delete", "-q"], 0);
    assert_eq!(rsync_many(&[&one, &two], &ours, &["-n", "-i", "--delete"]), (0, vec![]));

    // SRCs one below another would name entries twice: a usage error.
    let o = ddftp(&["archive", "one", "one/d", "-m", &m.addr, "-d", f.out("no").to_str().unwrap()], 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("overlap"), "{o:?}");
}

#[test]
fn a_file_as_src_is_copied_into_dest_as_rsync_copies_it() {
    let f = Fixture::new();
    let src = small_src(&f.root());
    let m = Mirror::start(&f.root(), &[]);
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    std::fs::create_dir(&ours).unwrap();
    std::fs::write(ours.join("other"), b"DEST's own").unwrap();
    let before = std::fs::metadata(&ours).unwrap();
    let d = ours.to_str().unwrap();
    let out = ddftp(&["archive", "src/a/b/c", "-m", &m.addr, "-d", d, "-i", "-q", "--delete"], 0);
    let o =
        Command::new("rsync").arg("-ai").arg(src.join("a/b/c")).arg(format!("{}/", theirs.display())).output().unwrap();
    assert!(o.status.success(), "rsync: {o:?}");
    let said: Vec<String> =
        String::from_utf8(o.stdout).unwrap().lines().filter(|l| !l.starts_with("created")).map(String::from).collect();
    assert_eq!(said, [">f+++++++++ c"]);
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().collect::<Vec<_>>(), said);
    assert_eq!(std::fs::read(ours.join("c")).unwrap(), std::fs::read(src.join("a/b/c")).unwrap());
    assert_eq!(std::fs::read(ours.join("other")).unwrap(), b"DEST's own", "--delete of one file deletes nothing else");
    let after = std::fs::metadata(&ours).unwrap();
    assert_eq!(before.permissions(), after.permissions(), "DEST's own mode is not the file's directory's");
    // Its mtime is the mirror's: nothing left to do, for rsync or a rerun.
    let o = Command::new("rsync").args(["-ani"]).arg(src.join("a/b/c")).arg(format!("{d}/")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "");
    let j = json(&ddftp(&["archive", "src/a/b/c", "-m", &m.addr, "-d", d, "--json", "-q"], 0));
    assert_eq!((j["skipped_files"].as_u64(), j["bytes"].as_u64()), (Some(1), Some(0)), "{j}");
    // Into a DEST that does not exist yet: made with the umask's mode.
    let new = f.out("new/deeper");
    ddftp(&["archive", "src/top", "-m", &m.addr, "-d", new.to_str().unwrap(), "-q"], 0);
    assert!(new.join("top").is_file());
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&new).unwrap().permissions()) & 0o777;
    assert_eq!(mode, 0o755, "as mkdir -p makes it (umask 022)");
}

/// rsync's `FILE NEWNAME` (DEST given last, not there yet): the file
/// becomes NEWNAME; run again, it is complete; changed on the mirror, it
/// is updated in place of NEWNAME. `NEWDIR/` (or `--dest`) still means a
/// directory to copy the file into.
#[test]
fn a_file_src_to_a_new_name_becomes_that_name_as_rsync_makes_it() {
    use std::os::unix::fs::MetadataExt;
    let f = Fixture::new();
    let src = small_src(&f.root());
    let m = Mirror::start(&f.root(), &[]);
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    std::fs::create_dir(&ours).unwrap();
    std::fs::create_dir(&theirs).unwrap();
    let (mine, rs) = (ours.join("renamed"), theirs.join("renamed"));
    let same_as_rsync = || {
        let o = Command::new("rsync").arg("-a").arg(src.join("a/b/c")).arg(&rs).output().unwrap();
        assert!(o.status.success(), "rsync: {o:?}");
        let (a, b) = (std::fs::metadata(&rs).unwrap(), std::fs::metadata(&mine).unwrap());
        assert!(b.is_file(), "{} is not a file", mine.display());
        assert_eq!((a.mode(), a.mtime(), a.len()), (b.mode(), b.mtime(), b.len()));
        assert_eq!(std::fs::read(&rs).unwrap(), std::fs::read(&mine).unwrap());
    };
    let o = ddftp(&["archive", "src/a/b/c", mine.to_str().unwrap(), "-m", &m.addr, "-i", "-q"], 0);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), ">f+++++++++ renamed");
    same_as_rsync();
    let names: Vec<_> = std::fs::read_dir(&ours).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["renamed"], "no scratch directory left beside it");
    // Again: nothing to move.
    let j = json(&ddftp(&["archive", "src/a/b/c", mine.to_str().unwrap(), "-m", &m.addr, "--json", "-q"], 0));
    assert_eq!((j["skipped_files"].as_u64(), j["bytes"].as_u64()), (Some(1), Some(0)), "{j}");
    // Changed on the mirror: NEWNAME updated.
    random_file(&src.join("a/b/c"), 333, 9);
    ddftp(&["archive", "src/a/b/c", mine.to_str().unwrap(), "-m", &m.addr, "-q"], 0);
    same_as_rsync();
    // NEWDIR/ is a directory, as rsync reads it.
    let dir = ours.join("newdir");
    ddftp(&["archive", "src/a/b/c", &format!("{}/", dir.display()), "-m", &m.addr, "-q"], 0);
    assert!(dir.join("c").is_file());
    // A tree onto a file: refused, the file left as it was.
    let before = std::fs::read(&mine).unwrap();
    let o = ddftp(&["archive", "src/a", mine.to_str().unwrap(), "-m", &m.addr, "-q"], 4);
    assert!(String::from_utf8_lossy(&o.stderr).contains("DEST is not a directory"), "{o:?}");
    assert_eq!(std::fs::read(&mine).unwrap(), before);
}
