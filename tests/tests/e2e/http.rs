//! HTTP mirrors as producers: real nginx on 127.0.0.1, alone and beside
//! ddftpd mirrors, and a small server for what nginx will not do wrong.

use std::sync::Arc;
use std::time::Duration;

use crate::util::nginx::{BadServer, Misbehave, Nginx};
use crate::util::*;

const SIZE: usize = 6 << 20;

fn get_json(path: &str, mirrors: &str, out: &std::path::Path, extra: &[&str], expect: i32) -> serde_json::Value {
    let mut args = vec!["get", path, "--mirrors", mirrors, "-o", out.to_str().unwrap(), "--json", "-q"];
    args.extend_from_slice(extra);
    json(&ddftp(&args, expect))
}

#[test]
fn one_to_four_http_mirrors_give_the_exact_file() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("big.bin"), SIZE, 1);
    let servers: Vec<Nginx> = (0..4).map(|i| Nginx::serve(&f.root(), (i % 2 == 1).then_some("4m"))).collect();
    for k in 1..=4 {
        let mirrors: Vec<String> = servers[..k].iter().map(|s| s.url.clone()).collect();
        let out = f.out(&format!("k{k}.bin"));
        let j = get_json("big.bin", &mirrors.join(","), &out, &[], 0);
        assert_eq!(std::fs::read(&out).unwrap(), data, "k = {k}");
        assert_eq!(j["sha256_checked"], "nothing", "no digest from HTTP mirrors: told, not claimed");
        assert_eq!(j["producers"].as_array().unwrap().len(), k);
    }
}

#[test]
fn the_url_of_the_file_itself_and_a_directory_url_both_work() {
    let f = Fixture::new();
    std::fs::create_dir(f.root().join("pub dir")).unwrap();
    let data = random_file(&f.root().join("pub dir/a+b.bin"), 1 << 20, 2);
    let s = Nginx::serve(&f.root(), None);
    let file_url = format!("{}pub%20dir/a%2Bb.bin", s.url);
    let dir_url = format!("{}pub%20dir/", s.url);
    let out = f.out("o.bin");
    get_json("a+b.bin", &format!("{file_url},{dir_url}"), &out, &[], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
}

#[test]
fn a_mixed_set_verifies_the_http_blocks_against_the_ddftpd_manifest() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("big.bin"), SIZE, 3);
    // A corrupted copy of the same size behind one nginx.
    let bad_root = f.out("bad");
    std::fs::create_dir(&bad_root).unwrap();
    let mut bad = data.clone();
    for i in (0..SIZE).step_by(100_000) {
        bad[i] ^= 0x55;
    }
    std::fs::write(bad_root.join("big.bin"), &bad).unwrap();
    let d = Mirror::start(&f.root(), &[]);
    let good = Nginx::serve(&f.root(), Some("8m"));
    let lying = Nginx::serve(&bad_root, None);
    let out = f.out("o.bin");
    let j = get_json("big.bin", &format!("{},{},{}", d.addr, good.url, lying.url), &out, &[], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    assert_eq!(j["sha256_checked"], "mirrors");
    assert_eq!(j["verified"], true);
    let warnings = j["warnings"].to_string();
    assert!(warnings.contains("failed verification") && warnings.contains(&lying.url), "{warnings}");
}

#[test]
fn checksum_mismatch_fails_with_exit_3_and_a_match_is_reported() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("big.bin"), 1 << 20, 4);
    let s = Nginx::serve(&f.root(), None);
    let out = f.out("o.bin");
    let zeros = format!("sha-256={}", "0".repeat(64));
    let j = get_json("big.bin", &s.url, &out, &["--checksum", &zeros], 3);
    assert!(j["error"].as_str().unwrap().contains("SHA-256"), "{j}");
    assert!(!out.exists());
    let right = format!("sha-256={}", sha256_hex(&data));
    let j = get_json("big.bin", &s.url, &out, &["--checksum", &right], 0);
    assert_eq!(j["sha256_checked"], "checksum");
    assert_eq!(std::fs::read(&out).unwrap(), data);
}

#[test]
fn a_missing_file_is_named_with_the_status() {
    let f = Fixture::new();
    let s = Nginx::serve(&f.root(), None);
    let out = ddftp(&["get", "nothere.bin", "--mirrors", &s.url, "-o", f.out("o").to_str().unwrap()], 7);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("404") && err.contains("nothere.bin"), "{err}");
}

#[test]
fn a_server_that_misbehaves_mid_download_is_dropped_and_the_others_finish() {
    for how in [
        Misbehave::IgnoreRange,
        Misbehave::ShortBody,
        Misbehave::NotSatisfiable,
        Misbehave::Unavailable,
        Misbehave::SizeChanged,
    ] {
        let f = Fixture::new();
        let data = Arc::new(random_file(&f.root().join("f.bin"), SIZE, 5));
        let good = Nginx::serve(&f.root(), Some("8m"));
        let bad = BadServer::start(data.clone(), how);
        let out = f.out("o.bin");
        let j = get_json("f.bin", &format!("{},{}", good.url, bad.url), &out, &[], 0);
        assert_eq!(std::fs::read(&out).unwrap(), *data, "{how:?}");
        let warnings = j["warnings"].to_string();
        assert!(warnings.contains(&bad.url), "{how:?}: {warnings}");
    }
}

/// Starts `get big.bin` from `url` into `out` and SIGKILLs it 1.5 s in.
fn killed_early(url: &str, out: &std::path::Path) {
    let mut child = std::process::Command::new(bin("ddftp"))
        .args(["get", "big.bin", "--mirrors", url, "-o", out.to_str().unwrap(), "-q"])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn an_http_download_killed_mid_way_resumes() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("big.bin"), 32 << 20, 7);
    // nginx limits each request to 1 MB/s; two producers (a virtual pair)
    // with a few requests each: several seconds, killed early.
    let s = Nginx::serve(&f.root(), Some("1m"));
    let out = f.out("o.bin");
    killed_early(&s.url, &out);
    assert!(!out.exists());
    let j = get_json("big.bin", &s.url, &out, &[], 0);
    assert!(j["reused_bytes"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(std::fs::read(&out).unwrap(), data);
}

#[test]
fn a_file_replaced_on_the_server_is_not_resumed_into() {
    let f = Fixture::new();
    let path = f.root().join("big.bin");
    random_file(&path, 32 << 20, 8);
    let s = Nginx::serve(&f.root(), Some("1m"));
    let out = f.out("o.bin");
    killed_early(&s.url, &out);
    // Same size, other bytes, a later Last-Modified.
    std::thread::sleep(Duration::from_millis(1100));
    let new = random_file(&path, 32 << 20, 9);
    let o = ddftp(&["get", "big.bin", "--mirrors", &s.url, "-o", out.to_str().unwrap()], 3);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("changed") && err.contains("--restart"), "{err}");
    let fast = Nginx::serve(&f.root(), None);
    get_json("big.bin", &fast.url, &out, &["--restart"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), new);
}

#[test]
fn a_redirect_to_a_target_no_request_may_hold_drops_that_mirror_not_the_download() {
    let f = Fixture::new();
    let data = Arc::new(random_file(&f.root().join("f.bin"), 1 << 20, 3));
    let good = Nginx::serve(&f.root(), None);
    for how in [Misbehave::RedirectOdd, Misbehave::RedirectLong] {
        let bad = BadServer::start(data.clone(), how);
        let out = f.out(&format!("{how:?}.bin"));
        // The bad one listed first and last: either way no panic (exit
        // 101), the good one delivers, and the output is exact.
        for mirrors in [format!("{},{}", bad.url, good.url), format!("{},{}", good.url, bad.url)] {
            let _ = std::fs::remove_file(&out);
            get_json("f.bin", &mirrors, &out, &[], 0);
            assert_eq!(std::fs::read(&out).unwrap(), *data, "{how:?}");
        }
    }
}

#[test]
fn a_repr_digest_tie_exits_3_before_a_byte_moves_whichever_mirror_is_named_first() {
    let f = Fixture::new();
    let data = Arc::new(random_file(&f.root().join("f.bin"), 4 << 20, 5));
    let honest = BadServer::start(data.clone(), Misbehave::Never);
    let liar = BadServer::start(data.clone(), Misbehave::WrongDigest);
    for mirrors in [format!("{},{}", honest.url, liar.url), format!("{},{}", liar.url, honest.url)] {
        let out = f.out("f.bin");
        let j = get_json("f.bin", &mirrors, &out, &[], 3);
        assert!(j["error"].as_str().unwrap().contains("no majority"), "{j}");
        assert!(!out.exists() && !f.out("f.bin.ddftp-part").exists(), "nothing written: {j}");
    }
}

/// Hardening II, item 4: one mirror's digest, the others silent: a
/// download that does not match it is kept aside (not thrown away after
/// every byte moved), named for what it is, and the header's sender named.
#[test]
fn a_lone_digest_the_download_does_not_match_keeps_the_data_aside() {
    let f = Fixture::new();
    let data = Arc::new(random_file(&f.root().join("f.bin"), 4 << 20, 5));
    let liar = BadServer::start(data.clone(), Misbehave::WrongDigest);
    let silent = BadServer::start(data.clone(), Misbehave::Plain);
    let out = f.out("f.bin");
    let j = get_json("f.bin", &format!("{},{}", liar.url, silent.url), &out, &[], 3);
    let e = j["error"].as_str().unwrap();
    assert!(e.contains(&liar.url) && e.contains("kept at"), "{j}");
    assert!(!out.exists() && !f.out("f.bin.ddftp-part").exists(), "{j}");
    assert!(std::fs::read(f.out("f.bin.ddftp-unverified")).unwrap() == *data, "the bytes are kept: {j}");
}

/// Hardening II, item 7: a reply whose body is not the file's bytes as
/// they are (chunked framing with a Content-Length, gzip) drops that
/// mirror; a file replaced at the same size mid-download is not mixed
/// into the output (If-Range). None of these downloads has a digest to
/// catch it: each used to end silently wrong.
#[test]
fn replies_that_are_not_the_files_bytes_drop_their_mirror_and_nothing_is_mixed() {
    let f = Fixture::new();
    let data = Arc::new(random_file(&f.root().join("f.bin"), 8 << 20, 6));
    for how in [Misbehave::TeAndCl, Misbehave::Gzip, Misbehave::Replaced] {
        let good = BadServer::start(data.clone(), Misbehave::Plain);
        let bad = BadServer::start(data.clone(), how);
        let out = f.out(&format!("{how:?}.bin"));
        let j = get_json("f.bin", &format!("{},{}", bad.url, good.url), &out, &[], 0);
        assert!(std::fs::read(&out).unwrap() == *data, "{how:?}: the output is not the file: {j}");
        assert!(j.to_string().contains(&bad.url), "{how:?}: the bad mirror is not named: {j}");
    }
}

/// Hardening II, item 6: one mirror whose every redirect takes 20 s does
/// not hold the start: the others answered, the download starts with them
/// within the grace, and the slow one is named.
#[test]
fn a_slow_mirror_does_not_hold_the_start_of_the_others() {
    let f = Fixture::new();
    let data = Arc::new(random_file(&f.root().join("f.bin"), 2 << 20, 7));
    let good = BadServer::start(data.clone(), Misbehave::Plain);
    let slow = BadServer::start(data.clone(), Misbehave::SlowRedirect);
    let out = f.out("f.bin");
    bin_dir(); // built before the clock starts
    let t = std::time::Instant::now();
    let j = get_json("f.bin", &format!("{},{}", slow.url, good.url), &out, &[], 0);
    assert!(t.elapsed() < Duration::from_secs(10), "took {:?}: {j}", t.elapsed());
    assert!(std::fs::read(&out).unwrap() == *data);
    assert!(j.to_string().contains(&slow.url) && j.to_string().contains("no answer within"), "{j}");
}

/// Hardening II, item 10: a URL whose last name decodes to one no file
/// can have (`%00`) is a usage error naming the fix (-o), not a journal
/// error; one directory URL alone is told it names no file. Both before
/// anything connects.
#[test]
fn urls_that_name_no_file_are_usage_errors_with_the_way_out() {
    let f = Fixture::new();
    let dir = f.dir.path().to_str().unwrap().to_string();
    let o = ddftp(&["get", "http://127.0.0.1:9/a%00b"], 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("give -o OUT"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = ddftp(&["get", "http://127.0.0.1:9/pub/"], 2);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("directory URL") && err.contains("--mirrors http://127.0.0.1:9/pub/"), "{err}");
    assert!(!err.contains("several"), "{err}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "nothing written but the fixture's root");
}

/// A web mirror slower than a block per stall timeout (nginx's
/// `limit_rate`) is not dropped while the block's bytes keep coming (its
/// reader says so at most once a second), as for a ddftpd mirror.
#[test]
fn a_web_mirror_slower_than_a_block_per_stall_timeout_is_not_dropped_while_its_bytes_come() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 2 << 20, 12);
    let web = Nginx::serve(&f.root(), Some("400k"));
    let o = f.out("f");
    let url = format!("{}f", web.url);
    let args = ["get", &url, "-o", o.to_str().unwrap(), "--block-size", "1MiB"];
    let out = ddftp(&[&args[..], &["--stall-timeout", "2", "--retries", "0", "-q"]].concat(), 0);
    assert!(std::fs::read(&o).unwrap() == data);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("stalled"), "{err}");
}
