//! rsync's `-R`/`--relative` and the `/./` marker, on the command line
//! and in `--files-from` lists, and `-r` with `--files-from`: real rsync
//! and ddftp on the same tree, their trees, exit codes and `-i` lines
//! compared.

use std::path::Path;
use std::process::Command;

use crate::util::tree::{assert_equal, scan, Look};
use crate::util::*;

fn run(c: &mut Command) {
    assert!(c.status().expect("run").success(), "{c:?}");
}

/// A tree with directories of their own modes and whole-second times.
fn tree(src: &Path) {
    for d in ["a/b/c/d", "x/y", "x/z"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, p) in ["a/b/c/f", "a/b/c/d/g", "a/top", "x/y/h", "x/z/k", "root"].iter().enumerate() {
        random_file(&src.join(p), 100 + i * 7, 900 + i as u64);
    }
    run(Command::new("chmod").args(["750", "a", "x/y"]).current_dir(src));
    run(Command::new("chmod").args(["711", "a/b"]).current_dir(src));
    run(Command::new("find").arg(src).args(["-exec", "touch", "-h", "-d", "2021-03-04 05:06:07", "{}", "+"]));
}

/// rsync OPTIONS run in `src` (its paths relative to it) into DEST/:
/// exit code and `-i` lines.
fn rsync_in(src: &Path, opts: &[&str], dest: &Path) -> (i32, Vec<String>) {
    let o = Command::new("rsync")
        .args(opts)
        .arg(format!("{}/", dest.display()))
        .current_dir(src)
        .output()
        .expect("rsync (CI installs it)");
    (o.status.code().unwrap_or(-1), lines(&o.stdout, dest))
}

/// ddftp archive OPTIONS from the mirror into `--dest DEST`: exit code and
/// `-i` lines.
fn ours(m: &Mirror, opts: &[&str], dest: &Path) -> (i32, Vec<String>) {
    let o = Command::new(bin("ddftp"))
        .arg("archive")
        .args(opts)
        .args(["-m", &m.addr, "-d", dest.to_str().unwrap(), "-q", "-i"])
        .output()
        .expect("run ddftp");
    (o.status.code().unwrap_or(-1), lines(&o.stdout, dest))
}

/// Output lines with DEST's path shown as `DEST`.
pub(crate) fn lines(out: &[u8], dest: &Path) -> Vec<String> {
    let d = dest.display().to_string();
    let d = d.trim_end_matches('/');
    String::from_utf8_lossy(out).lines().map(|l| l.replace(d, "DEST")).collect()
}

/// Entries, kinds, modes, contents and times (directories' too; not
/// DEST's own: neither copies SRC's onto it, so it is when each wrote in it).
fn same_tree(a: &Path, b: &Path) {
    let look = Look { owners: is_root(), setid: is_root(), devices: false };
    let dest_time_aside = |mut m: std::collections::BTreeMap<Vec<u8>, crate::util::tree::Seen>| {
        let root = m.get_mut(&b""[..]).expect("DEST scanned");
        let at = root.line.find(" dir-mtime ").expect("a directory's time");
        root.line.truncate(at);
        m
    };
    assert_equal(&dest_time_aside(scan(a, look)), &dest_time_aside(scan(b, look)));
}

#[test]
fn dash_r_keeps_each_srcs_path_from_its_dot_marker_as_rsync_does() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&src, &[]);
    for (case, srcs) in
        [("whole", &["a/b/c"][..]), ("marked", &["a/./b/c", "x/./y"][..]), ("a file and a dir", &["a/top", "x/z/"][..])]
    {
        let (theirs, mine) = (f.out(&format!("{case}-rsync")), f.out(&format!("{case}-ddftp")));
        let mut opts = vec!["-aiR"];
        opts.extend(srcs);
        let r = rsync_in(&src, &opts, &theirs);
        let mut opts = vec!["-R"];
        opts.extend(srcs);
        let o = ours(&m, &opts, &mine);
        assert_eq!(r.0, 0, "{case}: rsync {r:?}");
        assert_eq!(o, r, "{case}: exit and -i lines");
        same_tree(&theirs, &mine);
    }
}

#[test]
fn files_from_dot_markers_and_dash_r_copy_what_rsync_copies() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    let list = f.out("list");
    std::fs::write(&list, "a/./b/c\nx/./y\nx/./z/k\n").unwrap();
    let lf = list.to_str().unwrap();
    for (case, flags) in [("named alone", &["-a"][..]), ("named dirs whole", &["-a", "-r"][..])] {
        let (theirs, mine) = (f.out(&format!("{case}-rsync")), f.out(&format!("{case}-ddftp")));
        let mut opts = flags.to_vec();
        opts.extend(["-i", "--files-from", lf, "."]);
        let r = rsync_in(&src, &opts, &theirs);
        let mut opts = flags.to_vec();
        opts.extend(["src", "--files-from", lf]);
        let o = ours(&m, &opts, &mine);
        assert_eq!(r.0, 0, "{case}: rsync {r:?}");
        assert_eq!(o, r, "{case}: exit and -i lines");
        same_tree(&theirs, &mine);
    }
    // A base that climbs out of SRC: refused before anything moves.
    std::fs::write(&list, "../etc/./passwd\n").unwrap();
    let o = ddftp(&["archive", "src", "-m", &m.addr, "-d", f.out("no").to_str().unwrap(), "--files-from", lf], 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("line 1"), "{o:?}");
    assert!(!f.out("no").exists());
}
