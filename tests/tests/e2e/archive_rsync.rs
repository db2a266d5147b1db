//! `ddftp archive` speaks rsync where it claims to: `-n` prints the lines
//! `rsync -aniAX --delete` prints for the same change (symlinks with their
//! targets, ACLs as `a` and other xattrs as `x`, the entries of a directory
//! that a symlink or file replaces, whole-second mtimes), and `-i` prints
//! them again on the real run, after which rsync finds nothing to do.

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
    let twin = f.dir.path().join("twin");
    run(Command::new("cp").arg("-a").arg(&dst).arg(&twin));
    let m = Mirror::start(&f.root(), &[]);
    let src = f.root().join("src");

    let theirs = rsync_says(&src, &dst);
    let dry = ours(&m, &dst, &["-n"]);
    assert_eq!(dry, theirs, "ddftp archive -n --delete --xattrs vs rsync -aniAX --delete");
    // What the comparison covers, should rsync ever change its words.
    for want in [
        "cL+++++++++ newlink -> f",
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
    // A second run changes nothing, and says nothing.
    assert_eq!(ours(&m, &twin, &["-i", "-q"]), Vec::<String>::new());
}
