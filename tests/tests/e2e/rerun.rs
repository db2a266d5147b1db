//! Skip what is done: a rerun of a completed `get` moves nothing, an OUT
//! holding another file is kept with `--no-clobber`, and OUT gets the
//! mirror's modification time (ddftpd's to the nanosecond, a web server's
//! Last-Modified to the second), as `curl -R` and wget keep it.

use std::os::unix::fs::MetadataExt;

use crate::util::nginx::Nginx;
use crate::util::*;

#[test]
fn a_rerun_of_a_complete_get_moves_nothing_and_keeps_the_file() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("r.bin"), 6 << 20, 60);
    let (a, b) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let out = f.out("r.bin");
    let o = ddftp(&["get", "r.bin", "-m", &mirrors_arg(&[&a, &b]), "-o", out.to_str().unwrap(), "--json", "-q"], 0);
    assert_eq!(json(&o)["already_complete"], false);
    let before = std::fs::metadata(&out).unwrap();
    let o = ddftp(&["get", "r.bin", "-m", &mirrors_arg(&[&a, &b]), "-o", out.to_str().unwrap(), "--json", "-q"], 0);
    let j = json(&o);
    assert_eq!((j["already_complete"].as_bool(), j["reused_bytes"].as_u64()), (Some(true), Some(6 << 20)), "{j}");
    assert!(j["producers"].as_array().unwrap().is_empty(), "no mirror sent a block: {j}");
    let after = std::fs::metadata(&out).unwrap();
    assert_eq!((before.ino(), before.ctime(), before.ctime_nsec()), (after.ino(), after.ctime(), after.ctime_nsec()));
    assert_eq!(std::fs::read(&out).unwrap(), data);
    // The human summary says so.
    let o = ddftp(&["get", "r.bin", "-m", &a.addr, "-o", out.to_str().unwrap()], 0);
    assert!(String::from_utf8_lossy(&o.stdout).contains("already complete"), "{}", String::from_utf8_lossy(&o.stdout));
    // A different file under the name is replaced (without --no-clobber).
    std::fs::write(&out, b"something else").unwrap();
    ddftp(&["get", "r.bin", "-m", &a.addr, "-o", out.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
}

#[test]
fn no_clobber_keeps_another_file_and_says_so() {
    let f = Fixture::new();
    random_file(&f.root().join("c.bin"), 1 << 20, 61);
    let m = Mirror::start(&f.root(), &[]);
    let out = f.out("c.bin");
    std::fs::write(&out, b"mine, not the mirror's").unwrap();
    let o = ddftp(&["get", "c.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "--no-clobber"], 4);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--no-clobber keeps it"), "{err}");
    assert_eq!(std::fs::read(&out).unwrap(), b"mine, not the mirror's");
    assert!(!f.out("c.bin.ddftp-part").exists(), "nothing moved");
}

#[test]
fn the_output_gets_the_mirrors_mtime() {
    let f = Fixture::new();
    let src = f.root().join("t.bin");
    random_file(&src, 3 << 20, 62);
    let when = std::time::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 123_456_789);
    std::fs::File::options().write(true).open(&src).unwrap().set_modified(when).unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let out = f.out("t.bin");
    ddftp(&["get", "t.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q"], 0);
    let got = std::fs::metadata(&out).unwrap();
    assert_eq!((got.mtime(), got.mtime_nsec()), (1_700_000_000, 123_456_789));
    // --no-mtime: the time of the download.
    let out2 = f.out("t2.bin");
    ddftp(&["get", "t.bin", "-m", &m.addr, "-o", out2.to_str().unwrap(), "-q", "--no-mtime"], 0);
    assert!(std::fs::metadata(&out2).unwrap().mtime() > 1_700_000_000 + 86_400);
    // From a web server: its Last-Modified, to the second.
    let web = Nginx::serve(&f.root(), None);
    let out3 = f.out("t3.bin");
    let url = format!("{}t.bin", web.url);
    ddftp(&["get", &url, "-o", out3.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::metadata(&out3).unwrap().mtime(), 1_700_000_000);
}
