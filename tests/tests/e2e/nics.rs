//! Several local addresses (NICs), one transfer: `ddftp get --bind`.
//!
//! On loopback (127.0.0.x are all local), and over two real shaped links
//! (netbed `--nics`): those tests need root and a working netbed (CI has
//! both) and fail without them.

use std::path::Path;
use std::process::Command;

use crate::util::*;

#[test]
fn every_mirror_and_local_address_is_a_producer() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 6 * 1024 * 1024, 31);
    let a = Mirror::with_rate(&f.root(), "12MB");
    let b = Mirror::with_rate(&f.root(), "6MB");
    let o = f.out("f");
    // 192.0.2.7 (TEST-NET) is no local address: its routes are skipped.
    let res = ddftp(
        &[
            "get",
            "f",
            "--mirrors",
            &mirrors_arg(&[&a, &b]),
            "--bind",
            "127.0.0.1,127.0.0.2,192.0.2.7",
            "-o",
            o.to_str().unwrap(),
            "--block-size",
            "64KiB",
            "--json",
            "--quiet",
        ],
        0,
    );
    assert_eq!(std::fs::read(&o).unwrap(), data);
    let err = String::from_utf8_lossy(&res.stderr);
    assert!(err.contains("via 192.0.2.7"), "{err}");
    let j = json(&res);
    let links = j["links"].as_array().unwrap();
    assert_eq!(links.len(), 4, "{links:?}");
    for l in links {
        assert!(l["bytes"].as_u64().unwrap() > 0, "a route carried nothing: {l}");
    }
    let sum: u64 = links.iter().map(|l| l["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, data.len() as u64);
    assert_eq!(j["producers"].as_array().unwrap().len(), 2);
}

#[test]
fn unknown_interface_is_a_usage_error() {
    let res = ddftp(&["get", "f", "--mirrors", "127.0.0.1:1", "--nic", "nosuchnic9"], 2);
    assert!(String::from_utf8_lossy(&res.stderr).contains("no network interface named"));
}

/// Removes a netbed bed when dropped.
struct Bed(String);

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = Command::new(netbed()).args(["down", &self.0]).output();
    }
}

fn netbed() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/testbed/netbed"))
}

fn netbed_usable() -> bool {
    netbed().exists()
        && Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
        && Command::new(netbed()).arg("check").output().is_ok_and(|o| o.status.success())
}

#[test]
fn bind_over_two_netbed_nics() {
    need(netbed_usable(), "root and a working netbed (../shared/testbed/netbed)");
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 16 * 1024 * 1024, 32);
    let bed = Bed(format!("dn{}", std::process::id() % 100_000));
    let up = Command::new(netbed()).args(["up", &bed.0, "--nics", "200mbit,100mbit"]).output().unwrap();
    assert!(up.status.success(), "netbed up: {}", String::from_utf8_lossy(&up.stderr));
    let mut server = Command::new(netbed())
        .args(["exec", &format!("{}-s", bed.0), "--"])
        .arg(bin("ddftpd"))
        .arg("--root")
        .arg(f.root())
        .args(["--listen", "0.0.0.0:7400"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(server.stdout.take().unwrap()), &mut line).unwrap();
    assert!(line.starts_with("ddftpd listening"), "{line}");
    let o = f.out("f");
    let res = Command::new(netbed())
        .args(["exec", &format!("{}-c", bed.0), "--"])
        .arg(bin("ddftp"))
        .args(["get", "f", "--mirrors", "10.78.1.2", "--bind", "10.78.1.1,10.78.2.1", "-o"])
        .arg(&o)
        .args(["--json", "--quiet"])
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(res.status.success(), "ddftp: {}", String::from_utf8_lossy(&res.stderr));
    assert_eq!(std::fs::read(&o).unwrap(), data);
    let j = json(&res);
    let links = j["links"].as_array().unwrap();
    assert_eq!(links.len(), 2, "{links:?}");
    // 200 + 100 mbit: each link carries a real part of the file.
    for l in links {
        assert!(l["bytes"].as_u64().unwrap() > data.len() as u64 / 6, "{l}");
    }
}

/// `ddftp send < FILE` over two shaped links (the file read in small
/// pieces used to fill the sender's window with more messages than the
/// receiver takes ahead: "message N is far ahead"): byte-exact, both links
/// used, near the links' goodput.
#[test]
fn send_of_a_file_over_two_netbed_nics() {
    send_over_two_netbed_nics(false);
}

/// The same over TLS (each link its own handshake; the receiver's
/// certificate names both addresses).
#[test]
fn send_over_tls_on_two_netbed_nics() {
    send_over_two_netbed_nics(true);
}

fn send_over_two_netbed_nics(tls: bool) {
    need(netbed_usable(), "root and a working netbed (../shared/testbed/netbed)");
    let f = Fixture::new();
    let pki = crate::util::pki::Pki::new(f.dir.path(), "netbed CA");
    let srv = pki.issue("receiver", "IP:10.78.1.2,IP:10.78.2.2", false);
    let recv_tls: Vec<&str> = if tls { vec!["--tls-cert", srv.cert(), "--tls-key", srv.key()] } else { vec![] };
    let send_tls: Vec<&str> = if tls { vec!["--tls", "--ca-file", pki.ca()] } else { vec![] };
    let input = f.out("in");
    let data = random_file(&input, 64 << 20, 33);
    let bed = Bed(format!("dp{}{}", std::process::id() % 100_000, if tls { "t" } else { "" }));
    let up = Command::new(netbed()).args(["up", &bed.0, "--nics", "320mbit,160mbit"]).output().unwrap();
    assert!(up.status.success(), "netbed up: {}", String::from_utf8_lossy(&up.stderr));
    let out = f.out("out");
    let mut recv = Command::new(netbed())
        .args(["exec", &format!("{}-s", bed.0), "--"])
        .arg(bin("ddftp"))
        .args(["recv", "--listen", "10.78.1.2:7600,10.78.2.2:7600", "-q"])
        .args(&recv_tls)
        .stdout(std::fs::File::create(&out).unwrap())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let t = std::time::Instant::now();
    let send = Command::new(netbed())
        .args(["exec", &format!("{}-c", bed.0), "--"])
        .arg(bin("ddftp"))
        .args(["send", "--links", "10.78.1.2:7600,10.78.2.2:7600"])
        .args(&send_tls)
        .stdin(std::fs::File::open(&input).unwrap())
        .output()
        .unwrap();
    let secs = t.elapsed().as_secs_f64();
    let received = recv.wait().unwrap();
    let said = String::from_utf8_lossy(&send.stderr);
    assert!(send.status.success() && received.success(), "{said}");
    assert!(std::fs::read(&out).unwrap() == data, "the output differs");
    // The links' TCP goodput: 480 mbit * 1448/1514 = 57.4 MB/s. A loose
    // bound (the benchmark measures it): it failed outright before.
    let rate = data.len() as f64 / secs / 1e6;
    assert!(rate > 0.75 * 57.4, "{rate:.1} MB/s: {said}");
}
