//! ddftpd's per-address connection cap and `--user`.

use std::net::TcpStream;
use std::time::Duration;

use crate::util::*;

#[test]
fn one_address_gets_at_most_max_per_client_connections() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.bin"), 1 << 20, 31);
    let m = Mirror::start(&f.root(), &["--max-per-client", "2"]);
    // Two idle connections from 127.0.0.1 take its share.
    let held: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(&m.addr).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let out = f.out("o.bin");
    let o = ddftp(&["get", "f.bin", "--mirrors", &m.addr, "-o", out.to_str().unwrap(), "-q"], 1);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--max-per-client"), "the client is told why: {err}");
    // Given back, the slots serve again (the server kept serving).
    drop(held);
    std::thread::sleep(Duration::from_millis(200));
    ddftp(&["get", "f.bin", "--mirrors", &m.addr, "-o", out.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
}

#[test]
fn user_drops_root_after_binding_and_still_serves() {
    need(is_root(), "root: --user needs root");
    let f = Fixture::new();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(f.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(f.root(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let data = random_file(&f.root().join("f.bin"), 1 << 20, 32);
    std::fs::set_permissions(f.root().join("f.bin"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let m = Mirror::start(&f.root(), &["--user", "nobody"]);
    // It says it listens, then drops root: a moment later it is nobody.
    let status = || std::fs::read_to_string(format!("/proc/{}/status", m.child.id())).unwrap();
    let ids = |status: &str, key: &str| -> Vec<String> {
        let line = status.lines().find(|l| l.starts_with(key)).unwrap();
        line.split_whitespace().skip(1).map(String::from).collect()
    };
    let started = std::time::Instant::now();
    while ids(&status(), "Uid:")[0] == "0" && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = status();
    let ids = |key: &str| ids(&status, key);
    assert_eq!(ids("Uid:"), ["65534"; 4], "real, effective, saved and fs uid: {status}");
    assert_ne!(ids("Gid:")[0], "0", "{status}");
    assert!(!ids("Groups:").contains(&"0".to_string()), "{status}");
    let out = f.out("o.bin");
    ddftp(&["get", "f.bin", "--mirrors", &m.addr, "-o", out.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    // A user that does not exist: refused at start, with the name.
    let o = std::process::Command::new(bin("ddftpd"))
        .args(["--root", f.root().to_str().unwrap(), "--listen", "127.0.0.1:0", "--user", "no-such-user-x"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such-user-x"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Hardening II, item 8: eight clients that start a download from a
/// `--max-connections 8 --idle-timeout 3` server and are then frozen
/// (SIGSTOP) hold its slots only until the idle timeout: their streams wait
/// for a grant that never comes, and that wait ends like any other. A
/// normal client is served soon after, while they are still frozen.
#[test]
fn frozen_clients_give_their_slots_back_after_the_idle_timeout() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.bin"), 64 << 20, 32);
    let m = Mirror::start(&f.root(), &["--max-connections", "8", "--idle-timeout", "3", "--rate-limit", "40MB"]);
    let frozen: Vec<std::process::Child> = (0..8)
        .map(|i| {
            let o = f.out(&format!("frozen{i}"));
            std::process::Command::new(bin("ddftp"))
                .args(["get", "f.bin", "--mirrors", &m.addr, "-o", o.to_str().unwrap(), "-q"])
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    for c in &frozen {
        assert!(std::process::Command::new("kill").args(["-STOP", &c.id().to_string()]).status().unwrap().success());
    }
    // Idle timeout, and a margin for the server to notice.
    std::thread::sleep(Duration::from_secs(6));
    let o = f.out("normal");
    ddftp(&["get", "f.bin", "--mirrors", &m.addr, "-o", o.to_str().unwrap(), "-q"], 0);
    assert!(std::fs::read(&o).unwrap() == data);
    for mut c in frozen {
        let _ = std::process::Command::new("kill").args(["-KILL", &c.id().to_string()]).status();
        let _ = c.wait();
    }
}
