//! rsync's parts of `-a` given alone (`-rt`, `-rlpt`, `-rlptD`, `-r`,
//! `-a --no-t`): what is not asked for is not kept (`-r` must be among
//! them). Real rsync and ddftp on the same tree with
//! the same parts; their trees (modes, times, which entries), exit codes and `-i` lines (`skipping non-regular
//! file` among them) compared, on a first copy and on a rerun over a DEST
//! whose modes were changed.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::rsync_language::same_tree;
use crate::rsync_relative::lines;
use crate::util::*;

/// A tree of files, a directory, a symlink and a FIFO with their own
/// modes and old times.
pub(crate) fn tree(src: &Path) {
    std::fs::create_dir_all(src.join("d/sub")).unwrap();
    random_file(&src.join("d/f"), 5000, 17);
    random_file(&src.join("d/sub/run.sh"), 300, 18);
    random_file(&src.join("top"), 70, 19);
    std::fs::set_permissions(src.join("d/sub/run.sh"), std::fs::Permissions::from_mode(0o4750)).unwrap();
    std::fs::set_permissions(src.join("top"), std::fs::Permissions::from_mode(0o666)).unwrap();
    std::fs::set_permissions(src.join("d/sub"), std::fs::Permissions::from_mode(0o707)).unwrap();
    std::os::unix::fs::symlink("f", src.join("d/link")).unwrap();
    let fifo = std::ffi::CString::new(src.join("d/fifo").into_os_string().into_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o640) }, 0);
    let ok = Command::new("find").arg(src).args(["-exec", "touch", "-h", "-d", "@1600000000", "{}", "+"]).status();
    assert!(ok.unwrap().success());
}

/// rsync OPTS -i SRC/ DEST/: exit code and lines.
pub(crate) fn rsync(src: &Path, dest: &Path, opts: &[&str]) -> (i32, Vec<String>) {
    let o = Command::new("rsync")
        .args(opts)
        .arg("-i")
        .arg(format!("{}/", src.display()))
        .arg(format!("{}/", dest.display()))
        .output()
        .expect("rsync (CI installs it)");
    (o.status.code().unwrap_or(-1), lines(&o.stdout, dest))
}

/// ddftp archive src OPTS -i into DEST: exit code and lines.
pub(crate) fn ours(m: &Mirror, dest: &Path, opts: &[&str]) -> (i32, Vec<String>) {
    let o = Command::new(bin("ddftp"))
        .args(["archive", "src", "-m", &m.addr, "-d", dest.to_str().unwrap(), "-q", "-i"])
        .args(opts)
        .output()
        .expect("run ddftp");
    (o.status.code().unwrap_or(-1), lines(&o.stdout, dest))
}

#[test]
fn parts_of_dash_a_keep_what_rsync_keeps_with_them() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    for (case, opts) in [
        ("rt", &["-rt"][..]),
        ("rlpt", &["-rlpt"][..]),
        ("rlptD", &["-r", "-l", "-p", "-t", "-D"][..]),
        ("a-no-perms-no-D", &["-a", "--no-perms", "--no-D"][..]),
        ("a-no-l-no-g", &["-a", "--no-l", "--no-g"][..]),
    ] {
        let (theirs, mine) = (f.out(&format!("{case}-rsync")), f.out(&format!("{case}-ddftp")));
        let r = rsync(&src, &theirs, opts);
        assert_eq!(r.0, 0, "{case}: rsync {r:?}");
        let o = ours(&m, &mine, opts);
        assert_eq!(o, r, "{case}: exit and -i lines");
        same_tree(&theirs, &mine);
        // A rerun over modes changed in DEST: without -p they stay.
        for d in [&theirs, &mine] {
            std::fs::set_permissions(d.join("top"), std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let (r, o) = (rsync(&src, &theirs, opts), ours(&m, &mine, opts));
        assert_eq!(o, r, "{case} again: exit and -i lines");
        same_tree(&theirs, &mine);
    }
}

/// Without `-t` (`-r`, `-rlp`, `-a --no-t`): what is made gets the time
/// it is made, as rsync's; a rerun moves every file again (`>f..T......`),
/// as rsync's does. Trees compared but for times; no entry in either DEST
/// has SRC's time.
#[test]
fn without_t_what_is_made_gets_the_time_it_is_made_as_rsync() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    let timeless = |d: &Path| -> Vec<(Vec<u8>, String)> {
        let look = crate::util::tree::Look { owners: is_root(), setid: is_root(), devices: false };
        let seen = crate::util::tree::scan(d, look);
        seen.into_iter()
            .map(|(k, v)| {
                assert!(
                    !v.line.contains("mtime 1600000000."),
                    "{}: SRC's time kept: {}",
                    String::from_utf8_lossy(&k),
                    v.line
                );
                let words: Vec<&str> = v.line.split(' ').collect();
                let mut kept = vec![];
                let mut i = 0;
                while i < words.len() {
                    match words[i] {
                        "mtime" | "dir-mtime" => i += 2,
                        w => {
                            kept.push(w);
                            i += 1;
                        }
                    }
                }
                (k, kept.join(" "))
            })
            .collect()
    };
    for (case, opts) in [("r", &["-r"][..]), ("rlp", &["-rlp"][..]), ("a-no-t", &["-a", "--no-t"][..])] {
        let (theirs, mine) = (f.out(&format!("{case}-rsync")), f.out(&format!("{case}-ddftp")));
        let r = rsync(&src, &theirs, opts);
        assert_eq!(r.0, 0, "{case}: rsync {r:?}");
        let o = ours(&m, &mine, opts);
        assert_eq!(o, r, "{case}: exit and -i lines");
        assert_eq!(timeless(&mine), timeless(&theirs), "{case}");
        let (r, o) = (rsync(&src, &theirs, opts), ours(&m, &mine, opts));
        assert!(r.1.iter().any(|l| l.starts_with(">f..T......")), "{case}: rsync moves files again: {r:?}");
        assert_eq!(o, r, "{case} again: exit and -i lines");
        assert_eq!(timeless(&mine), timeless(&theirs), "{case} again");
    }
}

/// `-avzP`, what rsync users type most: taken (nothing compressed, the
/// progress ddftp shows anyway, partial work always kept); the tree
/// rsync makes, exit 0, and with `-i` (no progress lines) rsync's lines.
#[test]
fn avzp_as_rsync_users_type_it_makes_what_rsync_makes() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    let (theirs, mine) = (f.out("avzP-rsync"), f.out("avzP-ddftp"));
    let r = rsync(&src, &theirs, &["-az", "--partial"]);
    let o = ours(&m, &mine, &["-az", "--partial"]);
    assert_eq!((r.0, &o), (0, &r), "exit and -i lines");
    same_tree(&theirs, &mine);
    let (theirs, mine) = (f.out("avzP-rsync-2"), f.out("avzP-ddftp-2"));
    let ok = Command::new("rsync").arg("-avzP").arg(format!("{}/", src.display())).arg(&theirs).output().unwrap();
    assert!(ok.status.success());
    let out = Command::new(bin("ddftp"))
        .args(["archive", "src", "-m", &m.addr, "-d", mine.to_str().unwrap(), "-avzP"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    same_tree(&theirs, &mine);
}

/// `-u`: a file DEST holds with a later time stays as it is, one with an
/// earlier time is replaced, as rsync's (lines and trees compared, with
/// `--delete`: what stays is not deleted).
#[test]
fn update_leaves_what_is_newer_in_dest_as_rsync() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    let (theirs, mine) = (f.out("u-rsync"), f.out("u-ddftp"));
    assert_eq!(rsync(&src, &theirs, &["-a"]).0, 0);
    assert_eq!(ours(&m, &mine, &["-a"]).0, 0);
    for d in [&theirs, &mine] {
        for (name, when) in [("top", "@1900000000"), ("d/f", "@1500000000"), ("d/sub/run.sh", "@1600000000.5")] {
            std::fs::write(d.join(name), format!("changed in DEST {name}\n")).unwrap();
            let ok = Command::new("touch").args(["-h", "-d", when]).arg(d.join(name)).status().unwrap();
            assert!(ok.success());
        }
    }
    let opts = ["-au", "--delete"];
    let (r, o) = (rsync(&src, &theirs, &opts), ours(&m, &mine, &opts));
    assert_eq!(r.0, 0, "{r:?}");
    assert_eq!(o, r, "exit and -i lines");
    same_tree(&theirs, &mine);
    assert!(std::fs::read_to_string(mine.join("top")).unwrap().starts_with("changed"), "newer: kept");
}

/// `--size-only`: a file DEST holds at SRC's size stays (its time set,
/// `.f..t......`), one of another size is moved, as rsync's.
#[test]
fn size_only_takes_a_file_of_the_same_size_as_complete_as_rsync() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    let (theirs, mine) = (f.out("so-rsync"), f.out("so-ddftp"));
    assert_eq!(rsync(&src, &theirs, &["-a"]).0, 0);
    assert_eq!(ours(&m, &mine, &["-a"]).0, 0);
    let size = std::fs::metadata(src.join("top")).unwrap().len() as usize;
    for d in [&theirs, &mine] {
        std::fs::write(d.join("top"), vec![b'z'; size]).unwrap();
        std::fs::write(d.join("d/f"), b"another size").unwrap();
        for name in ["top", "d/f"] {
            let ok = Command::new("touch").args(["-h", "-d", "@1700000000"]).arg(d.join(name)).status().unwrap();
            assert!(ok.success());
        }
    }
    let opts = ["-a", "--size-only"];
    let (r, o) = (rsync(&src, &theirs, &opts), ours(&m, &mine, &opts));
    assert_eq!(r.0, 0, "{r:?}");
    assert_eq!(o, r, "exit and -i lines");
    same_tree(&theirs, &mine);
    assert_eq!(std::fs::read(mine.join("top")).unwrap(), vec![b'z'; size], "the same size: left");
    let (r, o) = (rsync(&src, &theirs, &opts), ours(&m, &mine, &opts));
    assert_eq!((o.0, o.1.len()), (r.0, 0), "nothing more to do: {o:?}");
}

/// `--chmod`: the changes made to each listed mode as though SRC had it,
/// as rsync's: with `-a` on what is made and on what DEST has (`p` in
/// `-i`), `D`/`F` items only on directories/files, `X`, a class copied;
/// without `-p` only what the run makes shows them. Several `--chmod` add
/// up. A change rsync would refuse is refused before anything moves.
#[test]
fn chmod_changes_modes_as_rsync() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    let (theirs, mine) = (f.out("chmod-rsync"), f.out("chmod-ddftp"));
    for opts in [
        &["-a", "--chmod=Dg+s,ug+w,Fo-w,+X"][..],
        &["-a", "--chmod=F600", "--chmod", "D750"],
        &["-a", "--chmod=go=u,o-w"],
        &["-rlt", "--chmod=a-rwx"],
    ] {
        let (r, o) = (rsync(&src, &theirs, opts), ours(&m, &mine, opts));
        assert_eq!(r.0, 0, "{opts:?}: rsync {r:?}");
        assert_eq!(o, r, "{opts:?}: exit and -i lines");
        same_tree(&theirs, &mine);
    }
    // Without -p a new file takes the change; the ones DEST has stay.
    random_file(&src.join("new"), 10, 3);
    let opts = ["-rlt", "--chmod=F640"];
    let (r, o) = (rsync(&src, &theirs, &opts), ours(&m, &mine, &opts));
    assert_eq!(o, r, "new file: exit and -i lines");
    same_tree(&theirs, &mine);
    let (code, _) = ours(&m, &f.out("bad"), &["-a", "--chmod=u+q"]);
    assert_eq!(code, 2, "a change rsync refuses is a usage error");
    assert!(!f.out("bad").exists(), "nothing made");
}

/// `--chown USER:GROUP`: every entry's owner and group those (names or
/// numbers), as rsync's, with `-a` and with parts of it (it implies `-o`,
/// `-g`); a second run to another group changes only that (`g` in
/// `-i`). A user this machine does not know is refused before anything
/// moves. Owners are compared as root (CI runs as root).
#[test]
fn chown_sets_owners_as_rsync() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    for (case, runs) in [
        ("a", &[&["-a", "--chown=nobody:nogroup"][..], &["-a", "--chown=:daemon"]][..]),
        ("rlt", &[&["-rlt", "--chown=daemon"][..], &["-rlt", "--chown", "65534:"]]),
    ] {
        let (theirs, mine) = (f.out(&format!("chown-{case}-rsync")), f.out(&format!("chown-{case}-ddftp")));
        for opts in runs.iter() {
            let (r, o) = (rsync(&src, &theirs, opts), ours(&m, &mine, opts));
            assert_eq!(r.0, 0, "{opts:?}: rsync {r:?}");
            assert_eq!(o, r, "{opts:?}: exit and -i lines");
            same_tree(&theirs, &mine);
        }
    }
    if is_root() {
        let top = std::fs::metadata(f.out("chown-a-ddftp").join("top")).unwrap();
        use std::os::unix::fs::MetadataExt;
        // The second run maps the group only: the owner is SRC's again (-a).
        assert_eq!((top.uid(), top.gid()), (0, 1), "root (SRC's), group daemon");
    }
    let (code, _) = ours(&m, &f.out("bad"), &["-a", "--chown=no-such-user-here"]);
    assert_eq!(code, 2, "an unknown user is a usage error");
    assert!(!f.out("bad").exists(), "nothing made");
}
