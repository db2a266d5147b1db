//! A crowd of hostile clients against one real `ddftpd`, while a normal
//! client downloads once a second: ddftpd's peak memory and the normal
//! client's times. Run by `benches/hostile-rss.sh`.
//!
//! `hostile_load BIN_DIR CONNECTIONS SECONDS MAX_CONNECTIONS`
//!
//! Kinds, in equal shares: connections that never greet, that greet and
//! idle, that start a stream and never read it, that upload bundle
//! definitions of random bytes, that ask for a walk and never read it,
//! and clients that send garbage and reconnect.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use ddftp_proto::frame::{MAX_BUNDLE_CHUNK, PROTOCOL_VERSION};
use ddftp_proto::{Direction, Request};
use rand::RngCore;

fn frames(reqs: &[Request]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for r in reqs {
        r.encode(&mut out);
    }
    out.to_vec()
}

fn hello() -> Request {
    Request::Hello { version: PROTOCOL_VERSION }
}

fn connect(addr: &str) -> Option<TcpStream> {
    let s = TcpStream::connect(addr).ok()?;
    s.set_write_timeout(Some(Duration::from_millis(200))).ok()?;
    Some(s)
}

/// Connections the server at `addr` has open now (from `ss`).
fn server_conns(addr: &str) -> u64 {
    let port = addr.rsplit(':').next().unwrap_or_default();
    let out = Command::new("ss").args(["-Htn", "state", "established", &format!("( sport = :{port} )")]).output();
    out.map_or(0, |o| o.stdout.iter().filter(|&&c| c == b'\n').count() as u64)
}

/// Resident and peak resident memory of `pid`, in KiB.
fn rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
    };
    (field("VmRSS:").unwrap_or(0), field("VmHWM:").unwrap_or(0))
}

/// What the server under load serves: a 16 MiB file and a tree of 2,000
/// small files (in a directory that lives as long as the first value).
fn served_root() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("tree")).unwrap();
    let mut data = vec![0u8; 16 << 20];
    rand::thread_rng().fill_bytes(&mut data);
    std::fs::write(root.join("f"), &data).unwrap();
    for i in 0..2000 {
        std::fs::write(root.join(format!("tree/{i}")), i.to_string()).unwrap();
    }
    (dir, root)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bin = PathBuf::from(&args[1]);
    let n: usize = args[2].parse().unwrap();
    let seconds: u64 = args[3].parse().unwrap();
    let max_conn = &args[4];

    let (dir, root) = served_root();
    let mut server = Command::new(bin.join("ddftpd"))
        .arg("--root")
        .arg(&root)
        .args(["--listen", "127.0.0.1:0", "--max-connections", max_conn])
        // The whole crowd comes from 127.0.0.1: what is measured is the
        // server's cap, not the per-address one.
        .args(["--max-per-client", "1000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("ddftpd listening on ").unwrap().to_string();
    let pid = server.id();
    // The file indexed once, before the crowd comes.
    let normal = |out: &Path| {
        let t = Instant::now();
        let ok = Command::new(bin.join("ddftp"))
            .args(["get", "f", "--mirrors", &addr, "-q", "-o"])
            .arg(out)
            .status()
            .is_ok_and(|s| s.success());
        (ok, t.elapsed().as_secs_f64())
    };
    let out = dir.path().join("out");
    assert!(normal(&out).0, "the first normal get failed");

    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicU64::new(0));
    let per = n / 6;
    let mut crowd = vec![];
    let start = Request::Start {
        stream: 0,
        path: "f".into(),
        block_size: 1 << 20,
        first: 0,
        last: 15,
        dir: Direction::Increment,
    };
    let kinds: Vec<(&str, Vec<u8>)> = vec![
        ("silent", vec![]),
        ("greet-idle", frames(&[hello()])),
        ("start-no-read", frames(&[hello(), start])),
        ("walk-no-read", frames(&[hello(), Request::Walk { path: "tree".into() }])),
    ];
    for (_, first) in kinds {
        let (addr, stop, opened) = (addr.clone(), stop.clone(), opened.clone());
        crowd.push(std::thread::spawn(move || {
            let mut held = vec![];
            while held.len() < per && !stop.load(Ordering::Relaxed) {
                if let Some(mut s) = connect(&addr) {
                    let _ = s.write_all(&first);
                    held.push(s);
                    opened.fetch_add(1, Ordering::Relaxed);
                }
            }
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }));
    }
    // Uploaders: definitions of random bytes, a piece per connection per
    // round, reconnecting when refused.
    {
        let (addr, stop, opened) = (addr.clone(), stop.clone(), opened.clone());
        crowd.push(std::thread::spawn(move || {
            let mut piece = vec![0u8; MAX_BUNDLE_CHUNK];
            rand::thread_rng().fill_bytes(&mut piece);
            let frame = frames(&[Request::Bundle { data: piece.into() }]);
            let mut held: Vec<TcpStream> = vec![];
            while !stop.load(Ordering::Relaxed) {
                while held.len() < per {
                    let Some(mut s) = connect(&addr) else { break };
                    let _ = s.write_all(&frames(&[hello()]));
                    held.push(s);
                    opened.fetch_add(1, Ordering::Relaxed);
                }
                held.retain_mut(|s| s.write_all(&frame).is_ok());
                std::thread::sleep(Duration::from_millis(5));
            }
        }));
    }
    // Garbage, reconnecting.
    {
        let (addr, stop, opened) = (addr.clone(), stop.clone(), opened.clone());
        crowd.push(std::thread::spawn(move || {
            let junk = [0xffu8; 64];
            let mut held: Vec<TcpStream> = vec![];
            while !stop.load(Ordering::Relaxed) {
                held.retain(|_| rand::random::<u8>() > 8);
                while held.len() < n - 5 * per {
                    let Some(mut s) = connect(&addr) else { break };
                    let _ = s.write_all(&junk);
                    held.push(s);
                    opened.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }));
    }

    let began = Instant::now();
    let (mut worst, mut gets, mut failed, mut peak) = (0.0f64, 0, 0, 0);
    let mut conns = vec![];
    while began.elapsed() < Duration::from_secs(seconds) {
        let (ok, took) = normal(&out);
        gets += 1;
        if !ok {
            failed += 1;
        }
        worst = worst.max(took);
        peak = peak.max(rss(pid).0);
        conns.push(server_conns(&addr));
        std::thread::sleep(Duration::from_millis(1000u64.saturating_sub((took * 1000.0) as u64)));
    }
    let (now, hwm) = rss(pid);
    conns.sort_unstable();
    let (conns_min, conns_median) =
        (conns.first().copied().unwrap_or(0), conns.get(conns.len() / 2).copied().unwrap_or(0));
    stop.store(true, Ordering::Relaxed);
    for t in crowd {
        let _ = t.join();
    }
    let _ = server.kill();
    let _ = server.wait();
    println!(
        "{{\"connections\": {n}, \"max_connections\": {max_conn}, \"seconds\": {seconds}, \"hostile_opened\": {}, \
         \"server_connections_min\": {conns_min}, \"server_connections_median\": {conns_median}, \
         \"normal_gets\": {gets}, \"normal_failed\": {failed}, \"normal_worst_s\": {worst:.3}, \
         \"rss_sampled_peak_mib\": {:.1}, \"rss_end_mib\": {:.1}, \"rss_hwm_mib\": {:.1}}}",
        opened.load(Ordering::Relaxed),
        peak as f64 / 1024.0,
        now as f64 / 1024.0,
        hwm as f64 / 1024.0
    );
}
