//! rsync's options over ssh, both ways (`archive HOST:DIR DEST`, `archive
//! SRC HOST:DIR`), against `rsync -e ssh` with the same options on the
//! same trees, a real OpenSSH server on 127.0.0.1: filter rules and their
//! modifiers, per-directory filter files, backups, several SRCs,
//! `--files-from`, `-R`, `-L`.

use std::process::Command;
use std::time::Duration;

use crate::util::sshd::Sshd;
use crate::util::*;

/// Every file below `dir` with its contents, by relative path.
pub(crate) fn files_below(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            match p.is_dir() {
                true => todo.push(p),
                false => {
                    let rel = p.strip_prefix(dir).unwrap().display().to_string();
                    out.insert(rel, std::fs::read(&p).unwrap());
                }
            }
        }
    }
    out
}

/// The files below `ours` (by relative path, with their contents), which
/// must be those below `theirs`.
fn same_files(ours: &std::path::Path, theirs: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let (mine, rs) = (files_below(ours), files_below(theirs));
    assert_eq!(mine.keys().collect::<Vec<_>>(), rs.keys().collect::<Vec<_>>());
    assert_eq!(mine, rs);
    mine
}

/// `rsync -a -e RSH ARGS 127.0.0.1:DIR`, which must succeed.
fn rsync_push(rsh: &str, args: &[&str], dir: &std::path::Path) {
    let o = Command::new("rsync")
        .args(["-a", "-e", rsh])
        .args(args)
        .arg(format!("127.0.0.1:{}", dir.display()))
        .output()
        .expect("rsync (CI installs it)");
    assert!(o.status.success(), "rsync: {}", String::from_utf8_lossy(&o.stderr));
}

/// A push with rsync's filter rules (from a file, on the command line, in
/// their order) and backups: the remote end gets what `rsync -e ssh` with
/// the same options makes there.
#[test]
fn a_push_with_filter_rules_and_backups_makes_what_rsync_makes() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["keep", "deep", "logs"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, p) in ["a.txt", "b.log", "keep/x.log", "deep/f1", "logs/y.txt", "top.tmp"].iter().enumerate() {
        random_file(&src.join(p), 100 + i, 40 + i as u64);
    }
    let rules = f.root().join("rules");
    std::fs::write(&rules, "# logs stay here\n*.log\n- *.tmp\n").unwrap();
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    for d in [&ours, &theirs] {
        std::fs::create_dir_all(d.join("src")).unwrap();
        std::fs::write(d.join("src/a.txt"), b"the older a").unwrap();
    }
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    let opts =
        ["--include", "keep/***", "--exclude-from", rules.to_str().unwrap(), "-f", "- deep/", "-b", "--suffix=.old"];
    let mut rs_args = opts.to_vec();
    rs_args.push(src.to_str().unwrap());
    rsync_push(&rsh, &rs_args, &theirs);
    let ddftp_bin = bin("ddftp").display().to_string();
    let to = format!("127.0.0.1:{}", ours.display());
    let mut args = vec!["archive", src.to_str().unwrap(), &to, "-e", &rsh, "--remote-ddftp", &ddftp_bin, "-q"];
    args.extend(opts);
    ddftp(&args, 0);
    let mine = same_files(&ours, &theirs);
    assert_eq!(mine["src/a.txt.old"], b"the older a");
}

/// Several SRCs pushed at once land where `rsync -a -e ssh` puts them (a
/// directory under DIR, a directory's content with its slash, a file
/// beside them); `--delete` is refused with several (each SRC is pushed
/// on its own and would delete the others').
#[test]
fn several_srcs_pushed_land_where_rsync_puts_them() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let (a, b) = (f.root().join("a"), f.root().join("b"));
    for d in [a.join("deep"), b.join("inner")] {
        std::fs::create_dir_all(d).unwrap();
    }
    for (i, p) in
        [a.join("deep/x"), a.join("y"), b.join("inner/z"), b.join("w"), f.root().join("f.txt")].iter().enumerate()
    {
        random_file(p, 1000 + i, 80 + i as u64);
    }
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    std::fs::create_dir(&ours).unwrap();
    std::fs::create_dir(&theirs).unwrap();
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    let srcs = [a.display().to_string(), format!("{}/", b.display()), f.root().join("f.txt").display().to_string()];
    rsync_push(&rsh, &srcs.iter().map(String::as_str).collect::<Vec<_>>(), &theirs);
    let ddftp_bin = bin("ddftp").display().to_string();
    let to = format!("127.0.0.1:{}", ours.display());
    let mut args = vec!["archive"];
    args.extend(srcs.iter().map(String::as_str));
    args.extend([to.as_str(), "-e", &rsh, "--remote-ddftp", &ddftp_bin, "-q"]);
    ddftp(&args, 0);
    same_files(&ours, &theirs);
    args.push("--delete");
    let out = ddftp(&args, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("--delete with several SRCs"));
}

/// A push with `--files-from` (a list on this host, sent to the remote
/// end after the serving end's line) copies the names it lists, and the
/// directories on their way, where `rsync --files-from -e ssh` does.
#[test]
fn a_push_with_files_from_copies_what_rsync_copies() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["a/deep", "b", "c"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, p) in ["a/deep/x", "a/y", "b/z", "c/w", "top"].iter().enumerate() {
        random_file(&src.join(p), 500 + i, 90 + i as u64);
    }
    let list = f.root().join("list");
    std::fs::write(&list, "# what goes\na/deep/x\nb/z\ntop\n").unwrap();
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    std::fs::create_dir(&ours).unwrap();
    std::fs::create_dir(&theirs).unwrap();
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    let from = format!("--files-from={}", list.display());
    rsync_push(&rsh, &[&from, src.to_str().unwrap()], &theirs);
    let ddftp_bin = bin("ddftp").display().to_string();
    let to = format!("127.0.0.1:{}", ours.display());
    let args = ["archive", &from, src.to_str().unwrap(), &to, "-e", &rsh, "--remote-ddftp", &ddftp_bin, "-q"];
    ddftp(&args, 0);
    let mine = same_files(&ours, &theirs);
    assert_eq!(mine.len(), 3, "{:?}", mine.keys());
}

/// rsync's `-R` from a host (`HOST:/path/./a/b DEST`: DEST/a/b, the remote
/// ddftpd serving `/`), and `/./` in a pushed `--files-from` list: where
/// rsync over ssh puts them.
#[test]
fn dash_r_from_a_host_and_dot_markers_in_a_pushed_list_land_where_rsync_puts_them() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["a/b/c", "x/y"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, p) in ["a/b/c/f", "a/b/g", "a/top", "x/y/h"].iter().enumerate() {
        random_file(&src.join(p), 700 + i, 40 + i as u64);
    }
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    let ddftpd = bin("ddftpd").display().to_string();
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    let remote = format!("127.0.0.1:{}/./a/b", src.display());
    let r = Command::new("rsync").args(["-aR", "-e", &rsh, &remote]).arg(&theirs).status().expect("rsync");
    assert!(r.success());
    ddftp(&["archive", "-R", &remote, ours.to_str().unwrap(), "-e", &rsh, "--remote-ddftpd", &ddftpd, "-q"], 0);
    let got = same_files(&ours, &theirs);
    assert_eq!(got.keys().collect::<Vec<_>>(), ["a/b/c/f", "a/b/g"]);
    // The session that served `/` has ended.
    let serving_root = || -> Vec<String> {
        crate::util::sshd::sessions_serving(std::path::Path::new("/"))
            .into_iter()
            .filter(|l| l.ends_with(" /"))
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !serving_root().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(serving_root(), Vec::<String>::new());

    let list = f.root().join("list");
    std::fs::write(&list, "a/./b/c/f\nx/./y/h\n").unwrap();
    let (ours, theirs) = (f.out("ours-pushed"), f.out("theirs-pushed"));
    std::fs::create_dir(&ours).unwrap();
    std::fs::create_dir(&theirs).unwrap();
    let from = format!("--files-from={}", list.display());
    rsync_push(&rsh, &[&from, src.to_str().unwrap()], &theirs);
    let ddftp_bin = bin("ddftp").display().to_string();
    let to = format!("127.0.0.1:{}", ours.display());
    ddftp(&["archive", &from, src.to_str().unwrap(), &to, "-e", &rsh, "--remote-ddftp", &ddftp_bin, "-q"], 0);
    let got = same_files(&ours, &theirs);
    assert_eq!(got.keys().collect::<Vec<_>>(), ["b/c/f", "y/h"]);
}

/// `-L` over ssh, both ways: pulled (`HOST:DIR DEST`, a link leading out
/// of DIR followed on the host) and pushed (a link inside SRC followed;
/// one leading out of SRC named, not followed: the host is shown nothing
/// beside SRC), the files where `rsync -aL -e ssh` puts them.
#[test]
fn copy_links_over_ssh_both_ways_copies_what_rsync_copies() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    std::fs::create_dir_all(f.root().join("shared")).unwrap();
    random_file(&src.join("d/f"), 2000, 61);
    random_file(&f.root().join("shared/ref"), 3000, 62);
    std::os::unix::fs::symlink("d", src.join("ld")).unwrap();
    std::os::unix::fs::symlink("d/f", src.join("lf")).unwrap();
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    let (ddftpd, ddftp_bin) = (bin("ddftpd").display().to_string(), bin("ddftp").display().to_string());
    let remote = format!("127.0.0.1:{}", src.display());
    // Pulled, with a link out of DIR.
    std::os::unix::fs::symlink("../shared/ref", src.join("out")).unwrap();
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    let o = Command::new("rsync").args(["-aL", "-e", &rsh, &remote]).arg(&theirs).output().expect("rsync");
    assert!(o.status.success(), "rsync: {}", String::from_utf8_lossy(&o.stderr));
    let to = ours.to_str().unwrap();
    ddftp(&["archive", "-L", &remote, to, "-e", &rsh, "--remote-ddftpd", &ddftpd, "-q"], 0);
    let mine = same_files(&ours, &theirs);
    assert_eq!(mine["src/out"], std::fs::read(f.root().join("shared/ref")).unwrap());
    assert_eq!(mine["src/ld/f"], mine["src/d/f"]);
    // Pushed: the link out of SRC is named and the rest copied.
    let (ours, theirs) = (f.out("ours-push"), f.out("theirs-push"));
    std::fs::remove_file(src.join("out")).unwrap();
    rsync_push(&rsh, &["-L", src.to_str().unwrap()], &theirs);
    let to = format!("127.0.0.1:{}", ours.display());
    let args = ["archive", "-L", src.to_str().unwrap(), &to, "-e", &rsh, "--remote-ddftp", &ddftp_bin, "-q"];
    ddftp(&args, 0);
    same_files(&ours, &theirs);
    std::os::unix::fs::symlink("../shared/ref", src.join("out")).unwrap();
    let out = ddftp(&args, 5);
    assert!(String::from_utf8_lossy(&out.stderr).contains("\"out\": its target climbs above"), "{out:?}");
}

/// `-F` pushed: the `.rsync-filter` files of this host's tree are read by
/// the serving end and their rules applied on the host, where `rsync -F
/// -e ssh` puts what they leave.
#[test]
fn a_push_with_per_directory_filter_files_makes_what_rsync_makes() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    for (i, p) in ["a.txt", "x.tmp", "sub/y.tmp", "sub/keep.tmp", "sub/z"].iter().enumerate() {
        random_file(&src.join(p), 300 + i, 120 + i as u64);
    }
    std::fs::write(src.join(".rsync-filter"), "- *.tmp\n").unwrap();
    std::fs::write(src.join("sub/.rsync-filter"), "+ keep.tmp\n- z\n").unwrap();
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    std::fs::create_dir(&ours).unwrap();
    std::fs::create_dir(&theirs).unwrap();
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    rsync_push(&rsh, &["-FF", src.to_str().unwrap()], &theirs);
    let ddftp_bin = bin("ddftp").display().to_string();
    let to = format!("127.0.0.1:{}", ours.display());
    ddftp(&["archive", "-FF", src.to_str().unwrap(), &to, "-e", &rsh, "--remote-ddftp", &ddftp_bin, "-q"], 0);
    let mine = same_files(&ours, &theirs);
    assert_eq!(mine.keys().collect::<Vec<_>>(), ["src/a.txt", "src/sub/keep.tmp"]);
    // Again with --delete and rules for one side, perishable: passed on
    // with their modifiers, the remote end deletes what rsync's does.
    for d in [&ours, &theirs] {
        std::fs::create_dir_all(d.join("src/gone")).unwrap();
        for extra in ["src/old.keep", "src/stray", "src/gone/c.o", "src/gone/p.keep"] {
            std::fs::write(d.join(extra), b"x").unwrap();
        }
    }
    let rules = ["-FF", "--delete", "-f", "-p *.o", "-f", "P old.keep", "-f", "H a.txt", "-f", "risk,p p.keep"];
    rsync_push(&rsh, &[&rules[..], &[src.to_str().unwrap()]].concat(), &theirs);
    let ours_args =
        [&["archive"][..], &rules, &[src.to_str().unwrap(), &to, "-e", &rsh, "--remote-ddftp", &ddftp_bin, "-q"]];
    ddftp(&ours_args.concat(), 0);
    let mine = same_files(&ours, &theirs);
    assert_eq!(mine.keys().collect::<Vec<_>>(), ["src/old.keep", "src/sub/keep.tmp"]);
    assert!(!ours.join("src/gone").exists());
}

/// `-R` pushed (`SRC/./a/b HOST:DIR` and a SRC without a marker): where
/// `rsync -aR -e ssh` puts it, the directories on the way with SRC's modes.
#[test]
fn dash_r_pushed_lands_where_rsync_puts_it() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let src = f.root().join("src");
    for d in ["a/b/c", "a/side", "x"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, p) in ["a/b/c/f", "a/b/g", "a/top", "a/side/s", "x/h"].iter().enumerate() {
        random_file(&src.join(p), 500 + i, 60 + i as u64);
    }
    std::fs::set_permissions(src.join("a/b"), std::os::unix::fs::PermissionsExt::from_mode(0o750)).unwrap();
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    let ddftp_bin = bin("ddftp").display().to_string();
    for (case, path, want) in [
        ("marker", format!("{}/./a/b", src.display()), &["a/b/c/f", "a/b/g"][..]),
        ("whole", src.join("a/b/c").display().to_string(), &[][..]),
    ] {
        let (ours, theirs) = (f.out(&format!("{case}-ours")), f.out(&format!("{case}-theirs")));
        std::fs::create_dir(&ours).unwrap();
        std::fs::create_dir(&theirs).unwrap();
        rsync_push(&rsh, &["-R", &path], &theirs);
        let to = format!("127.0.0.1:{}", ours.display());
        ddftp(&["archive", "-a", "-R", &path, &to, "-e", &rsh, "--remote-ddftp", &ddftp_bin, "-q"], 0);
        let got = same_files(&ours, &theirs);
        if !want.is_empty() {
            assert_eq!(got.keys().collect::<Vec<_>>(), want, "{case}");
            let mode = |d: &std::path::Path| std::fs::metadata(d.join("a/b")).unwrap().permissions();
            assert_eq!(mode(&ours), mode(&theirs), "{case}: a directory on the way");
        } else {
            assert_eq!(got.len(), 1, "{case}: {got:?}");
        }
    }
}

/// A remote end that asks a push for more than it was given (the whole
/// served directory, or a file beside the one pushed) gets nothing beside
/// it: the pushing end shows only what it pushes.
#[test]
fn a_remote_end_asking_a_push_for_more_gets_nothing_beside_what_is_pushed() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    for p in ["a/b/pushed", "a/secret", "beside"] {
        std::fs::write(src.join(p), format!("{p}\n")).unwrap();
    }
    // A merge file a walk lists even where rules prune: not beside.
    std::fs::write(src.join("a/.rsync-filter"), "- nothing\n").unwrap();
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    // The remote ddftp, replaced: the SRC it is given (the last word,
    // after `--`) becomes what it was not given, with -F.
    for (case, path, asks) in [
        ("-R", format!("{}/./a/b", src.display()), "."),
        ("-R, a sibling", format!("{}/./a/b", src.display()), "a/secret"),
        ("a file", src.join("beside").display().to_string(), "a/secret"),
        ("a file, the rest", src.join("beside").display().to_string(), "."),
    ] {
        let greedy = f.root().join("greedy.sh");
        std::fs::write(
            &greedy,
            format!("#!/bin/bash\nexec {} \"${{@:1:$(($#-2))}}\" -F -- {asks}\n", bin("ddftp").display()),
        )
        .unwrap();
        std::fs::set_permissions(&greedy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let into = f.out(&format!("into-{}", case.replace([' ', ','], "")));
        std::fs::create_dir(&into).unwrap();
        let to = format!("127.0.0.1:{}", into.display());
        let relative: &[&str] = if case.starts_with("-R") { &["-R"] } else { &[] };
        let out = Command::new(bin("ddftp"))
            .args(["archive", "-a"])
            .args(relative)
            .args([&path, &to, "-e", &rsh, "--remote-ddftp", greedy.to_str().unwrap(), "-q"])
            .output()
            .unwrap();
        let got: Vec<String> = files_below(&into).into_keys().collect();
        match asks {
            // The walk of what is served lists the pushed entry alone.
            "." => {
                assert!(got.len() == 1 && (got[0].ends_with("pushed") || got[0] == "beside"), "{case}: {got:?} {out:?}")
            }
            _ => assert!(!out.status.success() && got.is_empty(), "{case}: {got:?} {out:?}"),
        }
    }
}
