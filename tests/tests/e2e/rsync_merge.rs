//! rsync's per-directory filter files: `-F` (each directory's
//! `.rsync-filter`), `-FF` (the files themselves not copied) and
//! `-f 'dir-merge NAME'`, where they stand among the other rules; and
//! `-f 'merge FILE'`, a file of rules on this host. Real
//! rsync and ddftp on the same tree; their trees, exit codes and `-i`
//! lines compared, a rerun with `--delete` too; and a merge file ddftp
//! cannot take leaves its directory's contents uncopied, said.

use std::path::Path;

use crate::rsync_language::{old_times, same_tree};
use crate::rsync_links::ours;
use crate::rsync_parts::rsync;
use crate::util::*;

/// SRC with merge files at three depths (one clearing what is above).
fn tree(src: &Path) {
    for d in ["build", "sub/build", "sub/deep", "other"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    let files = [
        "a.txt",
        "x.tmp",
        "build/out",
        "sub/keep.tmp",
        "sub/y.tmp",
        "sub/secret.key",
        "sub/build/o",
        "sub/deep/y.tmp",
        "sub/deep/z",
        "sub/deep/secret2",
        "other/w.log",
        "other/v.txt",
    ];
    for (i, p) in files.iter().enumerate() {
        random_file(&src.join(p), 200 + i * 11, 700 + i as u64);
    }
    std::fs::write(src.join(".rsync-filter"), "# the tree's\n- *.tmp\n- /build/\n").unwrap();
    std::fs::write(src.join("sub/.rsync-filter"), "+ keep.tmp\n- secret*\n").unwrap();
    std::fs::write(src.join("sub/deep/.rsync-filter"), "!\n- z\n").unwrap();
    std::fs::write(src.join("other/.merge"), "- v.txt\n").unwrap();
    let ok = std::process::Command::new("find")
        .arg(src)
        .args(["-exec", "touch", "-h", "-d", "@1600000000", "{}", "+"])
        .status();
    assert!(ok.unwrap().success());
}

#[test]
fn per_directory_filter_files_leave_out_what_rsync_leaves_out() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    // A merge file of this host: its rules where `merge` stands, a
    // dir-merge among them.
    let rules = f.out("rules");
    std::fs::write(&rules, "# kept, then left out\n+ keep.tmp\n- *.tmp\n: .rsync-filter\n- w.log\n").unwrap();
    let merge = format!("merge {}", rules.display());
    for (case, opts) in [
        ("merge", &["-a", "-f", &merge][..]),
        ("F", &["-a", "-F"][..]),
        ("FF", &["-a", "-FF"][..]),
        ("F-then-rule", &["-a", "-F", "--exclude", "*.txt", "--include", "keep.tmp"][..]),
        ("rule-then-F", &["-a", "--include", "y.tmp", "-F"][..]),
        ("dir-merge", &["-a", "-f", "dir-merge .merge", "-f", "- *.log"][..]),
    ] {
        as_rsync_then_with_delete(&f, &m, case, opts, &["stray", "sub/old.tmp", "sub/deep/z"]);
    }
}

/// rsync and ddftp from `f`'s `src` with `opts` into DESTs named after
/// `case`: the same exit code, `-i` lines and tree; then `extra` written
/// into both and a rerun with `--delete`: what the rules exclude stays
/// in DEST, what SRC does not have goes, the same in both.
pub(crate) fn as_rsync_then_with_delete(f: &Fixture, m: &Mirror, case: &str, opts: &[&str], extra: &[&str]) {
    let src = f.root().join("src");
    let (theirs, mine) = (f.out(&format!("{case}-rsync")), f.out(&format!("{case}-ddftp")));
    let r = rsync(&src, &theirs, opts);
    assert_eq!(r.0, 0, "{case}: rsync {r:?}");
    let o = ours(m, &mine, opts);
    assert_eq!((o.0, &o.1), (r.0, &r.1), "{case}: exit and -i lines; stderr: {}", o.2);
    same_tree(&theirs, &mine);
    for d in [&theirs, &mine] {
        for name in extra {
            std::fs::write(d.join(name), b"x").unwrap();
            old_times(d, &[name]);
        }
    }
    let again = [opts, &["--delete"]].concat();
    let (mut r, mut o) = (rsync(&src, &theirs, &again), ours(m, &mine, &again));
    // rsync's own order of a directory's line and the deletions below
    // it varies run to run (its generator and receiver print apart):
    // the lines are compared as sets.
    r.1.sort();
    o.1.sort();
    assert_eq!((o.0, &o.1), (r.0, &r.1), "{case} again: exit and -i lines; stderr: {}", o.2);
    same_tree(&theirs, &mine);
}

/// A merge file with a rule ddftp does not take (a modifier): what its
/// directory holds is named and not copied, the rest is (exit 5), and
/// nothing is deleted.
#[test]
fn a_merge_file_ddftp_cannot_take_leaves_its_directory_out_and_says_so() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    std::fs::write(src.join("sub/.rsync-filter"), "-/ keep*\n").unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let mine = f.out("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("stray"), b"x").unwrap();
    let o = ours(&m, &mine, &["-F", "--delete"]);
    assert_eq!(o.0, 5, "{o:?}");
    assert!(o.2.contains("not copying what sub/.rsync-filter's directory holds: line 1"), "{}", o.2);
    assert!(mine.join("stray").exists() && mine.join("a.txt").exists() && mine.join("other/w.log").exists());
    assert!(std::fs::symlink_metadata(mine.join("sub/keep.tmp")).is_err());
}
