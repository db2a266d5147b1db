//! rsync's `--usermap` and `--groupmap`: SRC's owners and groups mapped
//! by the first pair that matches (an id, a range, a name pattern with
//! `*`, `?` or `[...]` classes, `*`),
//! as root; the trees (owners compared), exit codes and `-i` lines
//! against real rsync's, and a mapping that changes on a second run.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::rsync_language::same_tree;
use crate::rsync_parts::{ours, rsync};
use crate::util::*;

fn chown(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(gid)).unwrap();
}

#[test]
fn usermap_and_groupmap_map_owners_as_rsync() {
    need(is_root(), "root (owners are set only as root; CI runs as root)");
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    // Owners: root, a range, a name (nobody), an id without a name.
    for (name, uid, gid) in [("r", 0, 0), ("low", 50, 50), ("nob", 65534, 65534), ("anon", 4242, 4343), ("d/x", 51, 7)]
    {
        random_file(&src.join(name), 100, uid as u64);
        chown(&src.join(name), uid, gid);
    }
    let ok = std::process::Command::new("find")
        .arg(&src)
        .args(["-exec", "touch", "-h", "-d", "@1600000000", "{}", "+"])
        .status();
    assert!(ok.unwrap().success());
    let m = Mirror::start(&f.root(), &[]);
    for (case, runs) in [
        (
            "ids",
            &[&["-a", "--usermap=0:1,40-60:2,nob*:3,*:4", "--groupmap=7:8,:9"][..], &["-a", "--usermap=40-60:5"]][..],
        ),
        ("names", &[&["-rt", "--usermap=nobody:daemon,4242:bin"][..], &["-a", "--groupmap=*:daemon"]]),
        // rsync's classes: a set, a negated one (an id without a name has
        // the empty name, which no class matches), a range.
        ("classes", &[&["-a", "--usermap=[mn]obody:daemon,[!r]*:bin", "--groupmap=[^n]*:daemon,[0-9]*:bin"][..]]),
    ] {
        let (theirs, mine) = (f.out(&format!("{case}-rsync")), f.out(&format!("{case}-ddftp")));
        for opts in runs.iter() {
            let (r, o) = (rsync(&src, &theirs, opts), ours(&m, &mine, opts));
            assert_eq!(r.0, 0, "{opts:?}: rsync {r:?}");
            assert_eq!(o, r, "{opts:?}: exit and -i lines");
            same_tree(&theirs, &mine);
            for name in ["r", "low", "nob", "anon", "d/x"] {
                let (a, b) = (
                    std::fs::symlink_metadata(theirs.join(name)).unwrap(),
                    std::fs::symlink_metadata(mine.join(name)).unwrap(),
                );
                assert_eq!((b.uid(), b.gid()), (a.uid(), a.gid()), "{case} {opts:?}: {name}'s owner");
            }
        }
    }
    let nob = std::fs::symlink_metadata(f.out("ids-ddftp").join("nob")).unwrap();
    assert_eq!(nob.uid(), 65534, "the second run maps 40-60 only: nobody is SRC's again");
    let (code, _) = ours(&m, &f.out("bad"), &["-a", "--usermap=0:no-such-user-here"]);
    assert_eq!(code, 2, "an unknown TO is a usage error");
    assert!(!f.out("bad").exists(), "nothing made");
}
