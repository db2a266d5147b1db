//! rsync's `-L`/`--copy-links` and `--copy-unsafe-links`: a symlink
//! copied as what it points to (a file, a directory whole, through a
//! chain of links, outside SRC but on the mirror). Real rsync and ddftp on
//! the same tree, their trees, exit codes and `-i` lines compared, on a
//! first copy and a rerun; then what ddftp does on purpose otherwise (an
//! absolute target, a loop) and with `--delete`.

use std::path::Path;
use std::process::Command;

use crate::rsync_language::{old_times, same_tree};
use crate::rsync_parts::rsync;
use crate::rsync_relative::lines;
use crate::util::*;

/// ROOT/src with links of every sort, and ROOT/shared outside it.
fn tree(root: &Path) {
    let (src, shared) = (root.join("src"), root.join("shared"));
    for d in ["src/d/sub", "shared/refdir"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    random_file(&src.join("f"), 3000, 31);
    random_file(&src.join("d/g"), 700, 32);
    random_file(&src.join("d/sub/h"), 50, 33);
    random_file(&shared.join("ref.txt"), 9000, 34);
    random_file(&shared.join("refdir/a"), 400, 35);
    for (link, target) in [
        ("lf", "f"),
        ("ld", "d"),
        ("chain", "lf"),
        ("d/up", "../f"),
        ("d/sub/sibling", "../g"),
        ("out", "../shared/ref.txt"),
        ("outdir", "../shared/refdir"),
        ("gone", "nothing"),
    ] {
        std::os::unix::fs::symlink(target, src.join(link)).unwrap();
    }
    std::os::unix::fs::symlink("../../src/d", shared.join("refdir/back_in")).unwrap();
    let ok = Command::new("chmod").args(["750", "d/sub"]).current_dir(&src).status().unwrap();
    assert!(ok.success());
    let ok = Command::new("find").arg(root).args(["-exec", "touch", "-h", "-d", "@1600000000", "{}", "+"]).status();
    assert!(ok.unwrap().success());
}

/// ddftp archive src OPTS -i into DEST: exit code, lines, stderr.
pub(crate) fn ours(m: &Mirror, dest: &Path, opts: &[&str]) -> (i32, Vec<String>, String) {
    let o = Command::new(bin("ddftp"))
        .args(["archive", "src", "-m", &m.addr, "-d", dest.to_str().unwrap(), "-q", "-i"])
        .args(opts)
        .output()
        .expect("run ddftp");
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    (o.status.code().unwrap_or(-1), lines(&o.stdout, dest), err)
}

#[test]
fn copy_links_and_copy_unsafe_links_copy_what_rsync_copies() {
    let f = Fixture::new();
    tree(&f.root());
    let src = f.root().join("src");
    let m = Mirror::start(&f.root(), &[]);
    // The dangling link fails both (rsync's 23 is ddftp's 5, some
    // entries not copied); with --copy-unsafe-links it is a safe one,
    // kept as a link.
    for (case, opts, code) in [("L", &["-a", "-L"][..], 23), ("unsafe", &["-a", "--copy-unsafe-links"][..], 0)] {
        let (theirs, mine) = (f.out(&format!("{case}-rsync")), f.out(&format!("{case}-ddftp")));
        let r = rsync(&src, &theirs, opts);
        assert_eq!(r.0, code, "{case}: rsync {r:?}");
        let partial = |c: i32| if c == 23 { 5 } else { c };
        let o = ours(&m, &mine, opts);
        assert_eq!((o.0, &o.1), (partial(r.0), &r.1), "{case}: exit and -i lines; stderr: {}", o.2);
        same_tree(&theirs, &mine);
        if code == 23 {
            assert!(o.2.contains("symlink has no referent: \"gone\""), "{}", o.2);
        }
        // A rerun with --delete: only what DEST has that SRC does not
        // changes (rsync deletes nothing when a link failed: nor does ddftp).
        for d in [&theirs, &mine] {
            std::fs::write(d.join("stray"), b"x").unwrap();
            // Kept by both when nothing is deleted: the same time in both.
            old_times(d, &["stray"]);
        }
        let again = [opts, &["--delete"]].concat();
        let (r, o) = (rsync(&src, &theirs, &again), ours(&m, &mine, &again));
        assert_eq!((o.0, &o.1), (partial(r.0), &r.1), "{case} again; stderr: {}", o.2);
        same_tree(&theirs, &mine);
    }
    let mine = f.out("L-ddftp");
    assert_eq!(std::fs::read(mine.join("outdir/back_in/sub/h")).unwrap(), std::fs::read(src.join("d/sub/h")).unwrap());
    assert!(std::fs::symlink_metadata(mine.join("ld/sub/sibling")).unwrap().is_file());
}

/// What ddftp does on purpose otherwise than rsync: an absolute target
/// (outside what a mirror serves) and a loop are named, not followed, the
/// run goes on (exit 5); with `--delete`, what DEST has under their
/// names stays.
#[test]
fn absolute_targets_and_loops_are_named_and_the_rest_copied() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    random_file(&src.join("d/f"), 100, 41);
    let abs = f.root().join("src/d/f");
    std::os::unix::fs::symlink(&abs, src.join("abs")).unwrap();
    std::os::unix::fs::symlink("..", src.join("d/back")).unwrap();
    std::os::unix::fs::symlink("../../..", src.join("d/high")).unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let mine = f.out("mine");
    std::fs::create_dir_all(&mine).unwrap();
    std::fs::write(mine.join("abs"), b"what DEST had").unwrap();
    let o = ours(&m, &mine, &["-L", "--delete"]);
    assert_eq!(o.0, 5, "{o:?}");
    for said in [
        "not following symlink \"abs\": an absolute target",
        "not following symlink \"d/back\": a symlink loop",
        "not following symlink \"d/high\": its target climbs above",
    ] {
        assert!(o.2.contains(said), "{said}: {}", o.2);
    }
    assert_eq!(std::fs::read(mine.join("abs")).unwrap(), b"what DEST had");
    assert!(std::fs::symlink_metadata(mine.join("d/back")).is_err());
    assert_eq!(std::fs::read(mine.join("d/f")).unwrap(), std::fs::read(src.join("d/f")).unwrap());
}
