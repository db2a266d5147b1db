//! `ddftp get` against real `ddftpd` processes on 127.0.0.1.

use crate::util::*;
use sha2::{Digest, Sha256};

const BS: usize = 64 * 1024;

fn get_json(f: &Fixture, name: &str, mirrors: &str, out: &str) -> serde_json::Value {
    let o = f.out(out);
    let res = ddftp(
        &["get", name, "--mirrors", mirrors, "-o", o.to_str().unwrap(), "--block-size", "64KiB", "--json", "--quiet"],
        0,
    );
    assert!(res.stderr.is_empty(), "--quiet printed: {}", String::from_utf8_lossy(&res.stderr));
    json(&res)
}

#[test]
fn one_to_five_mirrors_at_different_rates() {
    let f = Fixture::new();
    // Large enough that rates are measured well before the end (~0.3-0.7 s).
    let data = random_file(&f.root().join("f.bin"), 8 * 1024 * 1024 + 12345, 1);
    let rates = ["12MB", "8MB", "5MB", "3MB", "2MB"];
    let mirrors: Vec<Mirror> = rates.iter().map(|r| Mirror::with_rate(&f.root(), r)).collect();
    for k in 1..=5 {
        let ms: Vec<&Mirror> = mirrors.iter().take(k).collect();
        let out = format!("k{k}.bin");
        let j = get_json(&f, "f.bin", &mirrors_arg(&ms), &out);
        let got = std::fs::read(f.out(&out)).unwrap();
        assert!(got == data, "k={k}: output differs from the source");
        assert_eq!(j["bytes"], data.len() as u64);
        assert_eq!(j["sha256"], format!("{:x}", Sha256::digest(&data)));
        // One mirror's SHA-256 is checked by computing it; where two or
        // more agree and every block matched their manifest, it is theirs.
        assert_eq!(j["sha256_computed"], k == 1, "k={k}");
        assert_eq!(j["verified"], true);
        let producers = j["producers"].as_array().unwrap();
        assert_eq!(producers.len(), k);
        let sum: u64 = producers.iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
        assert_eq!(sum, data.len() as u64, "k={k}: every byte comes from exactly one mirror");
        assert_eq!(j["duplicate_bytes"], 0);
        assert!(j["starts"].as_u64().unwrap() >= 2);
        if k >= 2 {
            // The fastest mirror sends more than the slowest one.
            let b = |i: usize| producers[i]["bytes"].as_u64().unwrap();
            assert!(b(0) > b(k - 1), "k={k}: shares do not follow rates: {producers:?}");
        }
    }
}

#[test]
fn a_crawling_mirrors_first_grant_is_taken_over() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.bin"), 12 * 1024 * 1024, 4);
    // The crawling mirror's first grant (4 MiB, before its rate is known)
    // is 8 s of its time; the other is done with the rest long before.
    let (fast, slow) = (Mirror::start(&f.root(), &[]), Mirror::with_rate(&f.root(), "500KB"));
    let j = get_json(&f, "f.bin", &mirrors_arg(&[&fast, &slow]), "out.bin");
    assert!(std::fs::read(f.out("out.bin")).unwrap() == data);
    assert_eq!(j["duplicate_bytes"], 0);
    // Its claim was ended, and the rest came from the fast mirror.
    assert!(j["ends"].as_u64().unwrap() >= 1, "{j}");
    let slow_bytes = j["producers"][1]["bytes"].as_u64().unwrap();
    assert!(slow_bytes < 4 * 1024 * 1024, "{j}");
}

#[test]
fn edge_sizes() {
    let f = Fixture::new();
    let sizes = [0, 1, BS - 1, BS, BS + 1, 5 * BS + 7];
    let mut datas = vec![];
    for (i, &s) in sizes.iter().enumerate() {
        datas.push(random_file(&f.root().join(format!("s{i}")), s, 10 + i as u64));
    }
    let a = Mirror::with_rate(&f.root(), "20MB");
    let b = Mirror::with_rate(&f.root(), "10MB");
    let c = Mirror::start(&f.root(), &[]);
    for k in 1..=3 {
        let ms = [&a, &b, &c];
        for (i, data) in datas.iter().enumerate() {
            let out = format!("s{i}-k{k}");
            let j = get_json(&f, &format!("s{i}"), &mirrors_arg(&ms[..k]), &out);
            assert!(std::fs::read(f.out(&out)).unwrap() == *data, "size {} k={k}", data.len());
            assert_eq!(j["bytes"], data.len() as u64);
        }
    }
}

#[test]
fn human_summary_and_default_output_name() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("named.bin"), 300_000, 3);
    let a = Mirror::start(&f.root(), &[]);
    let out = std::process::Command::new(bin("ddftp"))
        .args(["get", "named.bin", "--mirrors", &a.addr])
        .current_dir(f.dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(f.dir.path().join("named.bin")).unwrap() == data);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sha256") && text.contains(&a.addr) && text.contains("Start"), "{text}");
}

#[test]
fn mirrors_disagreeing_on_size_are_named() {
    let f = Fixture::new();
    let other = f.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    random_file(&f.root().join("x"), 1000, 4);
    random_file(&other.join("x"), 2000, 5);
    let a = Mirror::start(&f.root(), &[]);
    let b = Mirror::start(&other, &[]);
    let o = f.out("x");
    let res = ddftp(&["get", "x", "--mirrors", &mirrors_arg(&[&a, &b]), "-o", o.to_str().unwrap(), "--quiet"], 3);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains(&a.addr) && err.contains(&b.addr) && err.contains("1000") && err.contains("2000"), "{err}");
    assert!(!o.exists());
}

#[test]
fn missing_file_is_a_clear_error_and_leaves_nothing() {
    let f = Fixture::new();
    let a = Mirror::start(&f.root(), &[]);
    let o = f.out("nope");
    let res = ddftp(&["get", "nope", "--mirrors", &a.addr, "-o", o.to_str().unwrap()], 7);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("no such file") && err.contains(&a.addr), "{err}");
    assert!(!o.exists());
    assert!(!f.out("nope.ddftp-part").exists());
}

#[test]
fn dead_mirror_is_skipped_with_a_warning() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 1_000_000, 6);
    let a = Mirror::start(&f.root(), &[]);
    let mut b = Mirror::start(&f.root(), &[]);
    let dead = b.addr.clone();
    b.kill();
    let o = f.out("f");
    let res = ddftp(&["get", "f", "--mirrors", &format!("{},{dead}", a.addr), "-o", o.to_str().unwrap(), "--quiet"], 0);
    assert!(String::from_utf8_lossy(&res.stderr).contains(&dead));
    assert!(std::fs::read(&o).unwrap() == data);
}

#[test]
fn mirror_killed_mid_transfer_is_covered() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 8 * 1024 * 1024, 7);
    let a = Mirror::with_rate(&f.root(), "10MB");
    let mut b = Mirror::with_rate(&f.root(), "10MB");
    let o = f.out("f");
    let child = std::process::Command::new(bin("ddftp"))
        .args(["get", "f", "--mirrors", &mirrors_arg(&[&a, &b]), "-o", o.to_str().unwrap(), "--quiet", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    b.kill();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(&o).unwrap() == data);
    assert!(String::from_utf8_lossy(&out.stderr).contains("dropping"));
}

#[test]
fn server_refuses_paths_outside_its_root() {
    let f = Fixture::new();
    random_file(&f.dir.path().join("secret"), 100, 8);
    let a = Mirror::start(&f.root(), &[]);
    for bad in ["../secret", "/etc/passwd"] {
        let o = f.out("stolen");
        let res = ddftp(&["get", bad, "--mirrors", &a.addr, "-o", o.to_str().unwrap()], 1);
        assert!(String::from_utf8_lossy(&res.stderr).contains("not allowed"), "{bad}");
        assert!(!o.exists());
    }
}

#[test]
fn bad_flags_are_usage_errors() {
    ddftp(&["get", "f"], 2);
    ddftp(&["get", "f", "--mirrors", "a:b:c"], 2);
    ddftp(&["get", "f", "--mirrors", "h", "--block-size", "12"], 2);
    ddftp(&["frobnicate"], 2);
    ddftp(&["simulate", "--blocks", "10", "--speeds", "1,0"], 2);
}

#[test]
fn simulate_reports_shares_and_starts() {
    let out = ddftp(&["simulate", "--blocks", "100000", "--speeds", "4000,3000,2000,1000", "--json"], 0);
    let j = json(&out);
    let shares = j["server_share"].as_array().unwrap();
    for (i, want) in [0.4, 0.3, 0.2, 0.1].iter().enumerate() {
        assert!((shares[i].as_f64().unwrap() - want).abs() < 0.03, "{j}");
    }
    assert!(j["starts"].as_u64().unwrap() as f64 <= j["eq10_starts"].as_f64().unwrap());
}

#[test]
fn stalled_mirror_is_dropped_and_covered() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 8 * 1024 * 1024, 9);
    let a = Mirror::with_rate(&f.root(), "8MB");
    let b = Mirror::with_rate(&f.root(), "8MB");
    let o = f.out("f");
    let child = std::process::Command::new(bin("ddftp"))
        .args([
            "get",
            "f",
            "--mirrors",
            &mirrors_arg(&[&a, &b]),
            "-o",
            o.to_str().unwrap(),
            "--quiet",
            "--stall-timeout",
            "1",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SIGSTOP: the connection stays open but no byte comes.
    let pid = b.child.id().to_string();
    assert!(std::process::Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    let _ = std::process::Command::new("kill").args(["-CONT", &pid]).status();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(&o).unwrap() == data);
    assert!(String::from_utf8_lossy(&out.stderr).contains("stalled"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_mirror_slower_than_a_block_per_stall_timeout_is_not_dropped_while_its_bytes_come() {
    // A block takes 5 s over the link (--limit-rate), the stall timeout is
    // 2 s: bytes of the block keep coming, so nothing is stalled.
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 2 << 20, 11);
    let m = Mirror::start(&f.root(), &[]);
    let o = f.out("f");
    let args = ["get", "f", "-m", &m.addr, "-o", o.to_str().unwrap(), "--block-size", "1MiB", "--limit-rate", "400KB"];
    let out = ddftp(&[&args[..], &["--stall-timeout", "2", "--retries", "0", "-q"]].concat(), 0);
    assert!(std::fs::read(&o).unwrap() == data);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("stalled"), "{err}");
}

#[test]
fn published_checksum_is_enforced() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 500_000, 40);
    let a = Mirror::start(&f.root(), &[]);
    let good = format!("sha-256={:x}", Sha256::digest(&data));
    let o = f.out("f");
    ddftp(&["get", "f", "--mirrors", &a.addr, "-o", o.to_str().unwrap(), "-q", "--checksum", &good], 0);
    assert!(std::fs::read(&o).unwrap() == data);
    let o2 = f.out("f2");
    let bad = format!("sha-256={}", "0".repeat(64));
    let res = ddftp(&["get", "f", "--mirrors", &a.addr, "-o", o2.to_str().unwrap(), "-q", "--checksum", &bad], 3);
    assert!(String::from_utf8_lossy(&res.stderr).contains("expected"));
    assert!(!o2.exists() && !f.out("f2.ddftp-part").exists() && !f.out("f2.ddftp-journal").exists());
    ddftp(&["get", "f", "--mirrors", &a.addr, "--checksum", "md5=abc"], 2);
}

/// A stderr that is not a terminal (a log) gets one progress line at each
/// interval: bytes, percent, rate, ETA, mirrors; `--quiet` gets none.
#[test]
fn a_log_gets_progress_lines_at_the_interval() {
    let f = Fixture::new();
    random_file(&f.root().join("f"), 12 << 20, 46);
    let a = Mirror::with_rate(&f.root(), "4MB");
    let out = f.out("f");
    let o = ddftp(&["get", "f", "-m", &a.addr, "-o", out.to_str().unwrap(), "--progress-interval", "0.5"], 0);
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("ddftp: ") && l.contains("%), ")).collect();
    assert!(lines.len() >= 4, "{err}");
    assert!(
        lines.iter().all(|l| l.contains(" of 12.00 MiB (") && l.contains("/s, ETA ") && l.contains(&a.addr)),
        "{err}"
    );
    std::fs::remove_file(&out).unwrap();
    let o = ddftp(&["get", "f", "-m", &a.addr, "-o", out.to_str().unwrap(), "--progress-interval", "0.5", "-q"], 0);
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `--direct` (O_DIRECT, as dcp's): whole blocks past the page cache, the
/// shorter last one through it, onto a disk file; every byte exact. With
/// `-o -` there is no file: a usage error.
#[test]
fn direct_writes_an_exact_copy_to_disk() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("d.bin"), (5 << 20) + 12345, 58);
    let (m1, m2) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    // On disk (the fixture's directory may be tmpfs).
    let disk = tempfile::tempdir_in("/var/tmp").unwrap();
    let out = disk.path().join("d.bin");
    let mirrors = mirrors_arg(&[&m1, &m2]);
    ddftp(&["get", "d.bin", "-m", &mirrors, "-o", out.to_str().unwrap(), "--direct", "-q"], 0);
    assert!(std::fs::read(&out).unwrap() == data, "the copy differs");
    let o = ddftp(&["get", "d.bin", "-m", &mirrors, "-o", "-", "--direct"], 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--direct"));
}

/// A server of protocol 8 (before `Waiting`) refuses a newer client's
/// `Hello`, naming its own version: the client greets again in that one
/// and moves the file; a newer server answers an older client in its own.
#[test]
fn a_server_from_before_protocol_9_is_greeted_again_in_its_version() {
    use crate::util::fake_mirror::{FakeMirror, Script, Served};
    let f = Fixture::new();
    let data = random_file(&f.root().join("unused"), 3 << 20, 58);
    let served = Served { claimed: data.clone(), digest_lie: false, sent: data.clone() };
    let old = FakeMirror::start(Script {
        files: [("f.bin".to_string(), served)].into(),
        speaks: Some(8),
        ..Script::default()
    });
    let j = get_json(&f, "f.bin", &old.addr, "old.bin");
    assert!(std::fs::read(f.out("old.bin")).unwrap() == data, "the copy differs");
    assert_eq!(j["bytes"].as_u64(), Some(3 << 20), "{j}");
}
