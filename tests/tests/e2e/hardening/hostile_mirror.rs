//! A malicious mirror's list cannot make `archive` (run as root, as on a
//! data-mover node) write, chmod, chown, link or delete outside DEST.
//! Each case is a list a walk never sends, served by a scripted mirror
//! ([`FakeMirror`]); a canary tree beside DEST, which the lists aim at,
//! must be byte-, mode-, owner-, mtime- and link-count-identical after
//! (its ctime too: not even touched). Then random lists, in a property test.

use super::*;
use crate::util::fake_mirror::{FakeMirror, Script};
use crate::util::tree::{scan, Look};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

const T: &str = "1700000000.000000000";

/// The canary: what the lists aim at.
fn canary(at: &Path) {
    for d in ["keys", "victim", "vroot/sub", "hl"] {
        std::fs::create_dir_all(at.join(d)).unwrap();
    }
    std::fs::write(at.join("victim/secret"), b"secret\n").unwrap();
    std::fs::write(at.join("vroot/sub/f1"), b"1\n").unwrap();
    std::fs::write(at.join("vroot/sub/f2"), b"2\n").unwrap();
    std::fs::write(at.join("hl/victimfile"), b"victim\n").unwrap();
}

/// Everything about the canary a write, chmod, chown, link or delete
/// would change.
/// The canary's entries as the tree checker sees them, and each one's
/// link count and ctime.
type State = (std::collections::BTreeMap<Vec<u8>, crate::util::tree::Seen>, Vec<(String, u64, i64, i64)>);

fn state(at: &Path) -> State {
    let look = Look { owners: true, setid: true, devices: true };
    let mut touched = vec![];
    for e in walk_all(at) {
        let m = e.symlink_metadata().unwrap();
        touched.push((e.display().to_string(), m.nlink(), m.ctime(), m.ctime_nsec()));
    }
    touched.sort();
    (scan(at, look), touched)
}

fn walk_all(at: &Path) -> Vec<PathBuf> {
    let mut out = vec![at.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        let p = out[i].clone();
        if p.symlink_metadata().unwrap().is_dir() {
            out.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
        i += 1;
    }
    out
}

/// A list's records and the bytes served for each path.
type Served = (Vec<Vec<u8>>, Vec<(Vec<u8>, Vec<u8>)>);

/// A record of list format 2.
fn rec(kind: char, size: usize, mode: &str, attrs: &str, path: &str) -> Vec<u8> {
    format!("{kind} {size} {mode} {T} {attrs} {path}").into_bytes()
}

fn link(path: &str, target: &Path) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let t = target.as_os_str().as_encoded_bytes().to_vec();
    (rec('l', t.len(), "777", "u=0:0", path), path.as_bytes().to_vec(), t)
}

/// Runs `ddftp archive src` from a mirror serving `records` (with
/// `content`) into `dest` with `extra` flags; the exit code.
fn run(dest: &Path, records: Vec<Vec<u8>>, content: Vec<(Vec<u8>, Vec<u8>)>, extra: &[&str]) -> (i32, String) {
    let script = Script { walk: vec![records], content: content.into_iter().collect(), ..Script::default() };
    run_script(dest, script, extra)
}

fn run_script(dest: &Path, script: Script, extra: &[&str]) -> (i32, String) {
    let m = FakeMirror::start(script);
    let mut args = vec!["archive", "src", "--mirrors", &m.addr, "--dest", dest.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = std::process::Command::new(bin("ddftp")).args(&args).stdin(Stdio::null()).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    assert_ne!(code, 101, "ddftp panicked: {}", String::from_utf8_lossy(&out.stderr));
    (code, String::from_utf8_lossy(&out.stderr).into_owned())
}

struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Case {
        let c = Case { dir: tempfile::tempdir().unwrap() };
        canary(&c.outside());
        c
    }
    fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }
    fn dest(&self) -> PathBuf {
        self.dir.path().join("dest")
    }
}

#[test]
fn a_symlinked_directory_in_the_list_takes_no_write_outside() {
    let c = Case::new();
    let before = state(&c.outside());
    let keys = c.outside().join("keys");
    let (l, lp, lt) = link("src/a", &keys);
    let pay = b"ssh-ed25519 AAAA attacker\n";
    let (code, err) = run(
        &c.dest(),
        vec![rec('d', 4096, "755", "u=0:0", "src"), l, rec('f', pay.len(), "600", "u=0:0", "src/a/authorized_keys")],
        vec![(lp, lt), (b"src/a/authorized_keys".to_vec(), pay.to_vec())],
        &[],
    );
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("src/a/authorized_keys") && err.contains("no directory"), "{err}");
    assert_eq!(state(&c.outside()), before);
    // DEST has the symlink, nothing below it.
    assert_eq!(std::fs::read_link(c.dest().join("a")).unwrap(), keys);
}

#[test]
fn a_setuid_file_behind_a_symlink_after_a_streamed_part_stays_out() {
    // The first batch moves (a large sparse file makes a part), the
    // second, seconds later, aims below the symlink.
    let c = Case::new();
    let before = state(&c.outside());
    let (l, lp, lt) = link("src/a", &c.outside());
    let mut first = vec![rec('d', 4096, "755", "u=0:0", "src"), l, rec('f', 64 << 20, "644", "u=0:0,d=0+1", "src/big")];
    first.extend((0..200).map(|i| rec('d', 4096, "755", "u=0:0", &format!("src/d{i:05}"))));
    let pay = b"#!/bin/sh\necho pwned\n";
    let script = Script {
        walk: vec![first, vec![rec('f', pay.len(), "4755", "u=0:0", "src/a/pwned")]],
        pause: std::time::Duration::from_secs(2),
        content: [(lp, lt), (b"src/big".to_vec(), b"X".to_vec()), (b"src/a/pwned".to_vec(), pay.to_vec())]
            .into_iter()
            .collect(),
        ..Script::default()
    };
    let (code, err) = run_script(&c.dest(), script, &[]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("src/a/pwned"), "{err}");
    assert!(!c.outside().join("pwned").exists());
    assert_eq!(state(&c.outside()), before);
}

#[test]
fn a_name_given_twice_as_directory_and_symlink_changes_nothing_outside() {
    for (second, dest_first) in [("src/a", false), ("src/a/", false), ("src/a/", true)] {
        let c = Case::new();
        if dest_first {
            std::fs::create_dir_all(c.dest().join("old")).unwrap();
        }
        let before = state(&c.outside());
        let secret = c.outside().join("victim/secret");
        let t = secret.as_os_str().as_encoded_bytes().to_vec();
        let (code, err) = run(
            &c.dest(),
            vec![
                rec('d', 4096, "755", "u=0:0", "src"),
                rec('d', 4096, "6777", "u=0:0", "src/a"),
                rec('l', t.len(), "777", "u=0:0", second),
            ],
            vec![(second.as_bytes().to_vec(), t)],
            &[],
        );
        assert_eq!(code, 5, "{second}: {err}");
        assert!(err.contains(second), "{err}");
        assert_eq!(state(&c.outside()), before, "{second}, DEST not empty: {dest_first}");
    }
}

#[test]
fn delete_after_a_symlink_run_deletes_and_chowns_nothing_outside() {
    let c = Case::new();
    let before = state(&c.outside());
    let (l, lp, lt) = link("src/a", &c.outside().join("vroot"));
    let (code, err) = run(&c.dest(), vec![rec('d', 4096, "755", "u=0:0", "src"), l], vec![(lp, lt)], &[]);
    assert_eq!(code, 0, "{err}");
    let (code, err) = run(
        &c.dest(),
        vec![
            rec('d', 4096, "755", "u=0:0", "src"),
            rec('c', 0, "600", "u=0:0", "src/a"),
            rec('d', 4096, "777", "u=4242:4242", "src/a/sub"),
        ],
        vec![],
        &["--delete"],
    );
    assert_eq!(code, 5, "{err}");
    assert_eq!(state(&c.outside()), before);
}

#[test]
fn a_hard_link_id_shared_with_a_name_below_a_symlink_links_nothing_outside() {
    let c = Case::new();
    let before = state(&c.outside());
    let (l, lp, lt) = link("src/a", &c.outside().join("hl"));
    let (code, err) = run(&c.dest(), vec![rec('d', 4096, "755", "u=0:0", "src"), l], vec![(lp, lt)], &[]);
    assert_eq!(code, 0, "{err}");
    let t = "1600000000.000000000";
    let (code, err) = run(
        &c.dest(),
        vec![
            rec('d', 4096, "755", "u=0:0", "src"),
            format!("f 7 600 {t} u=0:0,h=9:9 src/a/victimfile").into_bytes(),
            format!("f 7 600 {t} u=0:0,h=9:9 src/x").into_bytes(),
        ],
        vec![],
        &[],
    );
    assert_eq!(code, 5, "{err}");
    let (code, err) = run(
        &c.dest(),
        vec![rec('d', 4096, "755", "u=0:0", "src"), format!("f 7 4777 {t} u=4242:4242 src/x").into_bytes()],
        vec![],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(state(&c.outside()), before);
    assert_eq!(std::fs::metadata(c.dest().join("x")).unwrap().nlink(), 1);
}

#[test]
fn a_resync_whose_list_drops_the_symlink_writes_nothing_through_it() {
    let c = Case::new();
    let before = state(&c.outside());
    let (l, lp, lt) = link("src/a", &c.outside().join("keys"));
    let keep = (b"src/keep".to_vec(), b"ok\n".to_vec());
    let (code, err) = run(
        &c.dest(),
        vec![rec('d', 4096, "755", "u=0:0", "src"), l, rec('f', 3, "644", "u=0:0", "src/keep")],
        vec![(lp, lt), keep.clone()],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let pay = b"* * * * * root /tmp/evil\n";
    for listed_dir in [false, true] {
        let mut recs = vec![rec('d', 4096, "755", "u=0:0", "src"), rec('f', 3, "644", "u=0:0", "src/keep")];
        if listed_dir {
            // Now the list says a directory: the symlink DEST holds is
            // replaced by one, and the file goes inside DEST.
            recs.push(rec('d', 4096, "755", "u=0:0", "src/a"));
        }
        recs.push(rec('f', pay.len(), "644", "u=0:0", "src/a/cronjob"));
        let (code, err) = run(&c.dest(), recs, vec![keep.clone(), (b"src/a/cronjob".to_vec(), pay.to_vec())], &[]);
        assert_eq!(code, if listed_dir { 0 } else { 5 }, "{err}");
        assert_eq!(state(&c.outside()), before);
    }
    assert_eq!(std::fs::read(c.dest().join("a/cronjob")).unwrap(), pay);
}

#[test]
fn a_local_user_planting_symlinks_in_dest_gets_no_write_outside() {
    // DEST exists (a resync) and someone who can write in it planted a
    // symlink where the list has a directory, and part files' names.
    let c = Case::new();
    let before = state(&c.outside());
    std::fs::create_dir_all(c.dest().join("d")).unwrap();
    std::os::unix::fs::symlink(c.outside().join("keys"), c.dest().join("a")).unwrap();
    std::os::unix::fs::symlink(c.outside().join("victim/secret"), c.dest().join("d/.big.ddftp-part")).unwrap();
    std::os::unix::fs::symlink(c.outside().join("hl/victimfile"), c.dest().join("d/small")).unwrap();
    let big: Vec<u8> = (0..3 << 20).map(|i| (i % 251) as u8).collect();
    let (code, err) = run(
        &c.dest(),
        vec![
            rec('d', 4096, "755", "u=0:0", "src"),
            rec('d', 4096, "755", "u=0:0", "src/a"),
            rec('f', 3, "600", "u=0:0", "src/a/authorized_keys"),
            rec('d', 4096, "755", "u=0:0", "src/d"),
            rec('f', big.len(), "644", "u=0:0", "src/d/big"),
            rec('f', 5, "644", "u=0:0", "src/d/small"),
        ],
        vec![(b"src/d/big".to_vec(), big.clone())],
        &[],
    );
    assert_eq!(state(&c.outside()), before, "exit {code}: {err}");
    // The planted part-file symlink is refused (named), the rest lands in DEST.
    assert!(c.dest().join("a").symlink_metadata().unwrap().is_dir(), "{err}");
    assert!(std::fs::symlink_metadata(c.dest().join("d/small")).unwrap().is_file(), "{err}");
    if code == 0 {
        assert_eq!(std::fs::read(c.dest().join("d/big")).unwrap(), big);
    } else {
        assert!(err.contains("big"), "{err}");
    }
}

mod random_lists {
    //! Random lists over a few names (directories, files, symlinks to the
    //! canary, names twice, shared hard-link ids, `..`), two runs into one
    //! DEST, the second with `--delete`: the canary never changes.

    use super::*;
    use proptest::prelude::*;

    fn entry() -> impl Strategy<Value = (String, u8, u8)> {
        let name =
            prop_oneof![Just("a"), Just("b"), Just(".."), Just("c"), Just("bak"), Just("n\nl"), Just("e\u{1b}[1m")];
        (proptest::collection::vec(name, 1..4), 0u8..5, 0u8..3)
            .prop_map(|(p, kind, extra)| (format!("src/{}", p.join("/")), kind, extra))
    }

    fn list(c: &Case, entries: &[(String, u8, u8)]) -> Served {
        let mut recs = vec![rec('d', 4096, "755", "u=0:0", "src")];
        let mut content = vec![];
        let targets = [c.outside().join("keys"), c.outside().join("vroot"), c.outside().join("victim/secret")];
        let mut seen = std::collections::HashSet::new();
        for (path, kind, extra) in entries {
            if !seen.insert(path.clone()) {
                // A name twice: the content served is the first's (the
                // one the client takes), so the mirror is not caught
                // lying about sizes instead.
                recs.push(rec('d', 4096, "755", "u=0:0", path));
                continue;
            }
            match kind {
                0 => recs.push(rec('d', 4096, ["755", "4777", "777"][*extra as usize], "u=4242:4242", path)),
                1 | 2 => {
                    let attrs = if *kind == 2 { "u=0:0,h=7:7" } else { "u=4242:4242" };
                    recs.push(rec('f', 4, ["644", "4755", "600"][*extra as usize], attrs, path));
                    content.push((path.as_bytes().to_vec(), b"evil".to_vec()));
                }
                _ => {
                    let (r, p, t) = link(path, &targets[*extra as usize]);
                    recs.push(r);
                    content.push((p, t));
                }
            }
        }
        (recs, content)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn no_list_changes_anything_outside_dest(
            first in proptest::collection::vec(entry(), 1..8),
            second in proptest::collection::vec(entry(), 1..8),
            backup in 0u8..4,
        ) {
            let c = Case::new();
            let before = state(&c.outside());
            let (r, k) = list(&c, &first);
            let (code, err) = run(&c.dest(), r, k, &[]);
            prop_assert!([0, 5].contains(&code), "first run: exit {} {}", code, err);
            // --delete, with a --backup-dir inside DEST (relative or
            // absolute), outside it, or none.
            let away = c.dir.path().join("backups");
            let dir = match backup {
                0 => None,
                1 => Some("bak".to_string()),
                2 => Some(c.dest().join("bak2").display().to_string()),
                _ => Some(away.display().to_string()),
            };
            let mut extra = vec!["--delete"];
            if let Some(d) = &dir {
                extra.extend(["--backup-dir", d.as_str()]);
            }
            let (r, k) = list(&c, &second);
            let (code, err) = run(&c.dest(), r, k, &extra);
            prop_assert!([0, 5].contains(&code), "second run: exit {} {}", code, err);
            prop_assert_eq!(state(&c.outside()), before);
        }
    }
}

/// A ddftpd whose `Stat` gives a chunk size no ddftpd uses (0: a division
/// by zero; 1 byte of a terabyte: a manifest of 2^40 hashes) is refused,
/// with why; the download does not crash.
#[test]
fn a_stat_with_a_chunk_size_no_ddftpd_uses_is_refused_not_a_crash() {
    for (size, chunk_size) in [(1u64 << 20, 0u32), (1 << 40, 1)] {
        let digest = ddftp_proto::FileDigest { chunk_size, sha256: [7; 32], manifest: [9; 32] };
        let m = FakeMirror::start(Script { stat: Some((size, digest)), ..Script::default() });
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("f");
        let o = ddftp(&["get", "f", "--mirrors", &m.addr, "-o", out.to_str().unwrap()], 1);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(&format!("chunks of {chunk_size} bytes")), "{err}");
    }
}
