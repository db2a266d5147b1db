//! Never a wrong byte: stale mirrors are voted out before data moves, a
//! corrupt block is caught on arrival and fetched again elsewhere, and the
//! file's SHA-256 is checked at the end whatever happens.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::util::*;

const SIZE: usize = 8 * 1024 * 1024;

/// Three roots holding the same file `f`.
fn three_copies(f: &Fixture) -> (Vec<PathBuf>, Vec<u8>) {
    let data = random_file(&f.root().join("f"), SIZE, 21);
    let roots: Vec<PathBuf> = (0..3).map(|i| f.dir.path().join(format!("r{i}"))).collect();
    for r in &roots {
        std::fs::create_dir(r).unwrap();
        std::fs::copy(f.root().join("f"), r.join("f")).unwrap();
    }
    (roots, data)
}

fn get(mirrors: &str, out: &Path, extra: &[&str], expect: i32) -> std::process::Output {
    let mut args = vec!["get", "f", "--mirrors", mirrors, "-o", out.to_str().unwrap(), "--block-size", "64KiB"];
    args.extend_from_slice(&["--json", "--quiet"]);
    args.extend_from_slice(extra);
    ddftp(&args, expect)
}

/// Flips one byte every 256 KiB of `file` in place and puts its mtime back:
/// the inode, size and mtime are those the server indexed, the content is
/// not (bit rot, or a file rewritten behind the server's back).
fn rot_in_place(file: &Path) {
    let mtime = std::fs::metadata(file).unwrap().modified().unwrap();
    let f = std::fs::OpenOptions::new().write(true).read(true).open(file).unwrap();
    for at in (1000..SIZE as u64).step_by(256 * 1024) {
        let mut b = [0u8];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x40], at).unwrap();
    }
    f.set_modified(mtime).unwrap();
}

fn index(root: &Path) {
    let out = std::process::Command::new(bin("ddftpd")).arg("index").arg(root).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("indexed 1 files"), "ddftpd index: {text}");
}

/// Three mirrors of `f`; the third indexed it, then its copy rotted.
fn third_mirror_rotten(f: &Fixture) -> (Vec<Mirror>, Vec<u8>) {
    let (roots, data) = three_copies(f);
    index(&roots[2]);
    rot_in_place(&roots[2].join("f"));
    (roots.iter().map(|r| Mirror::start(r, &[])).collect(), data)
}

#[test]
fn stale_mirror_is_voted_out_and_named() {
    let f = Fixture::new();
    let (roots, data) = three_copies(&f);
    // Same size, other content: only the digest tells them apart.
    random_file(&roots[2].join("f"), SIZE, 22);
    let ms: Vec<Mirror> = roots.iter().map(|r| Mirror::start(r, &[])).collect();
    let o = f.out("f");
    // Listed first: its chunk manifest (sent with its Stat) must not be used.
    let res = get(&mirrors_arg(&[&ms[2], &ms[0], &ms[1]]), &o, &[], 0);
    assert_eq!(std::fs::read(&o).unwrap(), data);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains(&ms[2].addr) && err.contains("differs from the majority"), "{err}");
    let j = json(&res);
    let used: Vec<&str> = j["producers"].as_array().unwrap().iter().map(|p| p["mirror"].as_str().unwrap()).collect();
    assert!(!used.contains(&ms[2].addr.as_str()), "the stale mirror served blocks: {used:?}");
    assert_eq!(used.len(), 2);
}

#[test]
fn no_majority_is_an_integrity_error() {
    let f = Fixture::new();
    let (roots, _) = three_copies(&f);
    random_file(&roots[1].join("f"), SIZE, 23);
    let a = Mirror::start(&roots[0], &[]);
    let b = Mirror::start(&roots[1], &[]);
    let o = f.out("f");
    let res = get(&mirrors_arg(&[&a, &b]), &o, &[], 3);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("no majority") && err.contains(&a.addr) && err.contains(&b.addr), "{err}");
    assert!(!o.exists() && !f.out("f.ddftp-part").exists());
}

#[test]
fn corrupt_blocks_are_caught_on_arrival_and_fetched_again() {
    let f = Fixture::new();
    let (ms, data) = third_mirror_rotten(&f);
    let o = f.out("f");
    let res = get(&mirrors_arg(&[&ms[0], &ms[1], &ms[2]]), &o, &[], 0);
    assert_eq!(std::fs::read(&o).unwrap(), data, "the output has a bad block");
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains(&ms[2].addr) && err.contains("failed verification"), "{err}");
    let j = json(&res);
    assert_eq!(j["verified"], true);
    assert_eq!(j["sha256"].as_str().unwrap(), sha256_hex(&data));
}

#[test]
fn without_block_verification_the_final_digest_still_refuses_bad_data() {
    let f = Fixture::new();
    let (ms, _) = third_mirror_rotten(&f);
    let o = f.out("f");
    let res = get(&mirrors_arg(&[&ms[0], &ms[1], &ms[2]]), &o, &["--no-verify"], 3);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("the mirrors reported") && err.contains("discarded"), "{err}");
    assert!(!o.exists() && !f.out("f.ddftp-part").exists() && !f.out("f.ddftp-journal").exists());
}

#[test]
fn the_index_directory_is_not_served() {
    let f = Fixture::new();
    let (roots, _) = three_copies(&f);
    // An index kept in the root, as `--index ROOT/.ddftpd-index` asks.
    let inside = roots[0].join(".ddftpd-index");
    let out =
        std::process::Command::new(bin("ddftpd")).arg("index").arg(&roots[0]).arg("--index").arg(&inside).output();
    assert!(out.unwrap().status.success());
    let a = Mirror::start(&roots[0], &["--index", inside.to_str().unwrap()]);
    let name = std::fs::read_dir(roots[0].join(".ddftpd-index")).unwrap().next().unwrap().unwrap().file_name();
    let path = format!(".ddftpd-index/{}", name.to_str().unwrap());
    let o = f.out("idx");
    let res = ddftp(&["get", &path, "--mirrors", &a.addr, "-o", o.to_str().unwrap(), "--quiet"], 1);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("not served"), "{err}");
}
