//! Never gives up: a mirror that fails, restarts, is busy or says nothing
//! is asked again and rejoins the running download; with every mirror
//! gone the download waits through its retries instead of exiting.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// `ddftp get f` from `mirrors` into `out` with `--json`, running.
fn spawn_get(mirrors: &str, out: &std::path::Path, extra: &[&str]) -> Child {
    Command::new(bin("ddftp"))
        .args(["get", "f", "--mirrors", mirrors, "-o", out.to_str().unwrap(), "--json", "-q"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Its exit code, JSON and stderr.
fn finish(child: Child) -> (Option<i32>, serde_json::Value, String) {
    let o = child.wait_with_output().unwrap();
    let j = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o.status.code(), j, String::from_utf8_lossy(&o.stderr).into_owned())
}

/// The bytes `mirror`'s producers that joined mid-transfer delivered.
fn joined_bytes(j: &serde_json::Value, mirror: &str) -> u64 {
    j["producers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["mirror"] == mirror)
        .map(|p| p["joined_bytes"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_mirror_restarted_mid_download_rejoins_and_sends_again() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 48 << 20, 40);
    let mut a = Mirror::with_rate(&f.root(), "8MB");
    let b = Mirror::with_rate(&f.root(), "8MB");
    let out = f.out("f");
    let get = spawn_get(&mirrors_arg(&[&a, &b]), &out, &[]);
    std::thread::sleep(Duration::from_millis(800));
    let addr = a.addr.clone();
    a.kill();
    std::thread::sleep(Duration::from_millis(500));
    let _a = Mirror::at(&f.root(), &addr, &["--rate-limit", "8MB"]);
    let (code, j, err) = finish(get);
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::read(&out).unwrap() == data);
    assert!(joined_bytes(&j, &addr) > 0, "nothing from {addr} after its restart: {j}");
    assert!(err.contains("rejoins"), "{err}");
}

#[test]
fn every_mirror_down_for_3_s_then_back_finishes_without_a_rerun() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 32 << 20, 41);
    let mut a = Mirror::with_rate(&f.root(), "6MB");
    let mut b = Mirror::with_rate(&f.root(), "6MB");
    let (aa, ba) = (a.addr.clone(), b.addr.clone());
    let out = f.out("f");
    let get = spawn_get(&mirrors_arg(&[&a, &b]), &out, &[]);
    std::thread::sleep(Duration::from_millis(800));
    a.kill();
    b.kill();
    std::thread::sleep(Duration::from_secs(3));
    let (_a, _b) = (Mirror::at(&f.root(), &aa, &[]), Mirror::at(&f.root(), &ba, &[]));
    let (code, _, err) = finish(get);
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::read(&out).unwrap() == data);
    assert!(err.contains("asking again"), "the waits are told: {err}");
}

#[test]
fn a_single_mirror_restarted_mid_download_is_waited_for() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 24 << 20, 42);
    let mut a = Mirror::with_rate(&f.root(), "8MB");
    let addr = a.addr.clone();
    let out = f.out("f");
    let get = spawn_get(&addr, &out, &[]);
    std::thread::sleep(Duration::from_millis(700));
    a.kill();
    std::thread::sleep(Duration::from_millis(1500));
    let _a = Mirror::at(&f.root(), &addr, &[]);
    let (code, j, err) = finish(get);
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::read(&out).unwrap() == data);
    assert!(joined_bytes(&j, &addr) > 0, "{j}");
}

#[test]
fn a_mirror_that_accepts_and_never_answers_holds_no_one_past_the_connect_timeout() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 1 << 20, 43);
    let good = Mirror::start(&f.root(), &[]);
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    // Accepts, holds every connection open, never says a word.
    std::thread::spawn(move || {
        let mut held = vec![];
        for c in silent.incoming() {
            held.push(c);
        }
    });
    let out = f.out("f");
    let t = Instant::now();
    let get = spawn_get(&format!("{silent_addr},{}", good.addr), &out, &["--connect-timeout", "2", "--retries", "0"]);
    let (code, _, err) = finish(get);
    assert_eq!(code, Some(0), "{err}");
    assert!(t.elapsed() < Duration::from_millis(3500), "took {:?}: {err}", t.elapsed());
    assert!(std::fs::read(&out).unwrap() == data);
    assert!(err.contains(&silent_addr), "the silent mirror is named: {err}");
}

#[test]
fn a_busy_server_is_waited_for_and_the_get_succeeds() {
    use std::io::Write;
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 1 << 20, 44);
    let a = Mirror::start(&f.root(), &["--max-connections", "2"]);
    // Two clients hold both connections for 2 s.
    let hold: Vec<_> = (0..2)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(&a.addr).unwrap();
            let mut out = bytes::BytesMut::new();
            ddftp_proto::Request::Hello { version: ddftp_proto::frame::PROTOCOL_VERSION }.encode(&mut out);
            s.write_all(&out).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let out = f.out("f");
    let t = Instant::now();
    let get = spawn_get(&a.addr, &out, &[]);
    std::thread::sleep(Duration::from_secs(2));
    drop(hold);
    let (code, _, err) = finish(get);
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::read(&out).unwrap() == data);
    assert!(err.contains("busy") && err.contains("asking again"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(6), "took {:?}", t.elapsed());
}

#[test]
fn with_no_retries_a_dead_mirror_fails_at_once() {
    let f = Fixture::new();
    random_file(&f.root().join("f"), 1 << 20, 45);
    let mut a = Mirror::start(&f.root(), &[]);
    let addr = a.addr.clone();
    a.kill();
    let t = Instant::now();
    let (code, j, _) = finish(spawn_get(&addr, &f.out("f"), &["--retries", "0"]));
    assert_eq!(code, Some(1), "{j}");
    assert!(t.elapsed() < Duration::from_secs(2));
}

/// `--limit-rate` caps the total over all mirrors.
#[test]
fn limit_rate_holds_the_total_over_three_mirrors() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 60_000_000, 47);
    assert!(Command::new(bin("ddftpd")).arg("index").arg(f.root()).status().unwrap().success());
    let ms: Vec<Mirror> = (0..3).map(|_| Mirror::start(&f.root(), &[])).collect();
    let out = f.out("f");
    let (code, j, err) =
        finish(spawn_get(&mirrors_arg(&ms.iter().collect::<Vec<_>>()), &out, &["--limit-rate", "20MB"]));
    assert_eq!(code, Some(0), "{err}");
    assert!(std::fs::read(&out).unwrap() == data);
    let rate = 60e6 / j["seconds"].as_f64().unwrap();
    assert!((rate - 20e6).abs() < 0.05 * 20e6, "{:.2} MB/s against a cap of 20 MB/s", rate / 1e6);
}

/// `archive`: a mirror restarted while the bundle moves has forgotten the
/// bundle; it registers it again and rejoins, and sends again.
#[test]
fn an_archive_mirror_restarted_mid_move_registers_the_bundle_again_and_rejoins() {
    let f = Fixture::new();
    let src = f.root().join("t");
    std::fs::create_dir(&src).unwrap();
    let files: Vec<Vec<u8>> = (0..24).map(|i| random_file(&src.join(format!("f{i:02}")), 1 << 20, 60 + i)).collect();
    let mut a = Mirror::with_rate(&f.root(), "4MB");
    let b = Mirror::with_rate(&f.root(), "4MB");
    let addr = a.addr.clone();
    let dest = f.out("dest");
    let child = Command::new(bin("ddftp"))
        .args(["archive", "t", "--mirrors", &mirrors_arg(&[&a, &b]), "--dest", dest.to_str().unwrap(), "--json", "-q"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    a.kill();
    std::thread::sleep(Duration::from_millis(500));
    let _a = Mirror::at(&f.root(), &addr, &["--rate-limit", "4MB"]);
    let (code, _, err) = finish(child);
    assert_eq!(code, Some(0), "{err}");
    for (i, want) in files.iter().enumerate() {
        assert!(std::fs::read(dest.join(format!("f{i:02}"))).unwrap() == *want, "f{i:02}");
    }
    let back = err.find(&format!("{addr}: back; it rejoins")).unwrap_or_else(|| panic!("{addr} did not rejoin: {err}"));
    assert!(!err[back..].contains(&format!("dropping {addr}")), "it rejoined, then failed: {err}");
}

/// An HTTP mirror that does not answer in time at the start is asked
/// again and joins the running download when it does.
#[test]
fn a_late_http_mirror_joins_the_running_download() {
    use crate::util::nginx::{BadServer, Misbehave};
    let f = Fixture::new();
    let data = std::sync::Arc::new(random_file(&f.root().join("f.bin"), 24 << 20, 49));
    let on_time = BadServer::start(data.clone(), Misbehave::Plain);
    let late = BadServer::start(data.clone(), Misbehave::SlowFirst);
    let out = f.out("f.bin");
    // Paced, so the download is still running when the late one answers.
    let args = ["get", &on_time.url, &late.url, "-o", out.to_str().unwrap(), "--json", "-q"];
    let o = ddftp(&[&args[..], &["--connect-timeout", "1", "--limit-rate", "8MB"]].concat(), 0);
    assert!(std::fs::read(&out).unwrap() == *data);
    let j = json(&o);
    assert!(joined_bytes(&j, &late.url) > 0, "{j}");
}
