//! `ddftp ls` as `ls` and `rclone lsf` behave: one level by default,
//! `-R` for all, sorted by name, `-l` with a symlink's target, and a file
//! (or a symlink) lists itself.

use crate::util::*;

fn lines(o: &std::process::Output) -> Vec<String> {
    String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect()
}

#[test]
fn ls_is_one_level_sorted_with_targets_and_a_file_lists_itself() {
    let f = Fixture::new();
    let r = f.root();
    std::fs::create_dir_all(r.join("d/e")).unwrap();
    for p in ["zeta", "alpha", "Mid", "d/inner", "d/e/deep"] {
        random_file(&r.join(p), 10, 1);
    }
    std::os::unix::fs::symlink("alpha", r.join("link")).unwrap();
    let idx = f.out("index");
    let m = Mirror::start(&r, &["--index", idx.to_str().unwrap()]);
    // One level, in byte order (as `LC_ALL=C ls`).
    assert_eq!(lines(&ddftp(&["ls", &m.addr], 0)), ["Mid", "alpha", "d", "link", "zeta"]);
    assert_eq!(lines(&ddftp(&["ls", &format!("{}:d", m.addr)], 0)), ["e", "inner"]);
    // -R: everything below, sorted.
    let all = lines(&ddftp(&["ls", "-R", &m.addr], 0));
    assert_eq!(all, ["Mid", "alpha", "d", "d/e", "d/e/deep", "d/inner", "link", "zeta"]);
    // -l: the symlink's target, as ls -l shows it.
    let long = lines(&ddftp(&["ls", "-l", &m.addr], 0));
    assert!(long.iter().any(|l| l.starts_with('l') && l.ends_with(" link -> alpha")), "{long:?}");
    // A file, and a symlink, list themselves, named as given.
    let one = lines(&ddftp(&["ls", "-l", &format!("{}:d/inner", m.addr)], 0));
    assert!(one.len() == 1 && one[0].starts_with("-rw") && one[0].ends_with(" d/inner"), "{one:?}");
    let link = lines(&ddftp(&["ls", "-l", &format!("{}:link", m.addr)], 0));
    assert!(link.len() == 1 && link[0].ends_with(" link -> alpha"), "{link:?}");
    // Not there: exit 7, as get.
    ddftp(&["ls", &format!("{}:d/none", m.addr)], 7);
}
