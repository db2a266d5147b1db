//! The dry run says what the real run does: over random trees and random
//! changes to SRC and DEST, the entries `archive -n --delete` names are
//! exactly those `archive --delete` then changes in DEST (made, moved,
//! given another mode or mtime, made again, deleted; files, symlinks, a
//! FIFO and directories), and afterwards DEST is SRC. One rule decides both (`client/src/archive/decide.rs`).

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use proptest::prelude::*;

use crate::archive::{assert_same, snapshot};
use crate::util::*;

const DIRS: [&str; 3] = ["a", "a/b", "c"];
const FILES: [&str; 5] = ["f1", "a/f2", "a/b/f3", "c/f4", "f5"];
const FIFO: &str = "a/p1";
const LINKS: [(&str, &str); 2] = [("l1", "f1"), ("a/l2", "../c")];

fn touch(p: &Path, when: &str) {
    assert!(Command::new("touch").arg("-h").arg("-d").arg(when).arg(p).status().unwrap().success());
}

fn mkfifo(p: &Path) {
    assert!(Command::new("mkfifo").arg(p).status().unwrap().success());
    touch(p, "2020-01-01 00:00:00");
}

/// A change to one file of SRC.
#[derive(Debug, Clone, Copy)]
enum Change {
    Keep,
    /// New bytes of another size.
    Rewrite,
    Chmod,
    Touch,
    Remove,
    /// A directory (holding a file) in its place.
    Dir,
}

fn any_change() -> impl Strategy<Value = Change> {
    prop_oneof![
        3 => Just(Change::Keep),
        1 => Just(Change::Rewrite),
        1 => Just(Change::Chmod),
        1 => Just(Change::Touch),
        1 => Just(Change::Remove),
        1 => Just(Change::Dir),
    ]
}

/// The entries a dry run names (`./` is the root, a directory's `/` and a
/// symlink's ` -> TARGET` left out).
fn named(lines: &BTreeSet<String>) -> BTreeSet<Vec<u8>> {
    lines
        .iter()
        .map(|l| {
            let path = l.get(12..).unwrap_or_default();
            let path = path.split(" -> ").next().unwrap();
            let path = if path == "./" { "" } else { path.trim_end_matches('/') };
            path.as_bytes().to_vec()
        })
        .collect()
}

/// A dry run's change lines (its totals line left out).
fn dry_run(m: &Mirror, dst: &Path) -> BTreeSet<String> {
    let o = ddftp(&["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-n", "--delete"], 0);
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines.last().is_some_and(|l| l.starts_with("dry run, nothing changed")), "{out}");
    lines[..lines.len() - 1].iter().map(|l| l.to_string()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn the_dry_run_names_exactly_what_the_real_run_changes(
        files in proptest::collection::vec(any::<bool>(), FILES.len()),
        links in proptest::collection::vec(any::<bool>(), LINKS.len()),
        changes in proptest::collection::vec(any_change(), FILES.len()),
        added in proptest::collection::vec(any::<bool>(), FILES.len()),
        relink in proptest::collection::vec(0u8..3, LINKS.len()),
        dir_times in proptest::collection::vec(any::<bool>(), DIRS.len() + 1),
        (extra, dest_chmod, seed) in (any::<bool>(), any::<bool>(), any::<u64>()),
        (fifo, fifo_change) in (any::<bool>(), 0u8..4),
    ) {
        let f = Fixture::new();
        let src = f.root().join("src");
        for d in DIRS {
            std::fs::create_dir_all(src.join(d)).unwrap();
        }
        // SRC as first copied: some files and links, every time fixed.
        for (i, (p, there)) in FILES.iter().zip(&files).enumerate() {
            if *there {
                random_file(&src.join(p), 100 + i * 37, seed ^ i as u64);
                touch(&src.join(p), "2020-01-01 00:00:00");
            }
        }
        for ((p, to), there) in LINKS.iter().zip(&links) {
            if *there {
                std::os::unix::fs::symlink(to, src.join(p)).unwrap();
                touch(&src.join(p), "2020-01-01 00:00:00");
            }
        }
        if fifo {
            mkfifo(&src.join(FIFO));
        }
        for d in DIRS.iter().copied().chain([""]) {
            touch(&src.join(d), "2021-01-01 00:00:00");
        }
        let m = Mirror::start(&f.root(), &[]);
        let dst = f.dir.path().join("dst");
        ddftp(&["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-q"], 0);
        assert_same(&src, &dst);

        // Then SRC changes, and DEST too.
        for (i, (p, change)) in FILES.iter().zip(&changes).enumerate() {
            let at = src.join(p);
            match (files[i], change) {
                (false, _) if added[i] => {
                    random_file(&at, 50 + i, seed ^ 99);
                }
                (false, _) | (true, Change::Keep) => {}
                (true, Change::Rewrite) => {
                    let _ = random_file(&at, 7 + i * 3, seed ^ 77);
                    touch(&at, "2022-02-02 00:00:00");
                }
                (true, Change::Chmod) => std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600)).unwrap(),
                (true, Change::Touch) => touch(&at, "2019-03-03 00:00:00"),
                (true, Change::Remove) => std::fs::remove_file(&at).unwrap(),
                (true, Change::Dir) => {
                    std::fs::remove_file(&at).unwrap();
                    std::fs::create_dir(&at).unwrap();
                    let _ = random_file(&at.join("inside"), 5, seed);
                }
            }
        }
        for (i, (p, _)) in LINKS.iter().enumerate() {
            let at = src.join(p);
            match (links[i], relink[i]) {
                (true, 1) => {
                    std::fs::remove_file(&at).unwrap();
                    std::os::unix::fs::symlink("elsewhere", &at).unwrap();
                }
                (true, 2) => std::fs::remove_file(&at).unwrap(),
                _ => {}
            }
        }
        let at = src.join(FIFO);
        match (fifo, fifo_change) {
            (false, 1) => mkfifo(&at),
            (true, 1) => std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600)).unwrap(),
            (true, 2) => touch(&at, "2019-03-03 00:00:00"),
            (true, 3) => std::fs::remove_file(&at).unwrap(),
            _ => {}
        }
        // Each directory keeps its time or gets another (whole seconds:
        // the time a run sees is the one it sets).
        for (d, later) in DIRS.iter().copied().chain([""]).zip(&dir_times) {
            if src.join(d).is_dir() {
                touch(&src.join(d), if *later { "2023-04-04 00:00:00" } else { "2021-01-01 00:00:00" });
            }
        }
        if extra {
            std::fs::create_dir_all(dst.join("extra/deep")).unwrap();
            std::fs::write(dst.join("extra/deep/z"), b"z").unwrap();
            touch(&dst, "2021-01-01 00:00:00");
        }
        if dest_chmod && dst.join("c/f4").is_file() {
            std::fs::set_permissions(dst.join("c/f4"), std::fs::Permissions::from_mode(0o640)).unwrap();
        }

        let before = snapshot(&dst);
        let said = dry_run(&m, &dst);
        prop_assert_eq!(&snapshot(&dst), &before, "a dry run changes nothing");
        ddftp(&["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-q", "--delete"], 0);
        let after = snapshot(&dst);
        let changed: BTreeSet<Vec<u8>> = before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .cloned()
            .collect();
        let show = |s: &BTreeSet<Vec<u8>>| s.iter().map(|p| String::from_utf8_lossy(p).into_owned()).collect::<Vec<_>>();
        prop_assert_eq!(show(&named(&said)), show(&changed), "the dry run said {:?}", said);
        assert_same(&src, &dst);
    }
}
