//! TLS: ddftpd with --tls-cert (and --client-ca), `get`, `archive` and
//! `send`/`recv` over it, byte-exact; certificates that do not verify,
//! missing client certificates and plaintext/TLS mix-ups refused with a
//! clear message, the server serving others all along. The CA and the
//! certificates are made here with openssl (util/pki.rs).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::util::pki::{Issued, Pki};
use crate::util::*;

fn tls_mirror(root: &Path, srv: &Issued, extra: &[&str]) -> Mirror {
    let mut args = vec!["--tls-cert", srv.cert(), "--tls-key", srv.key()];
    args.extend(extra);
    Mirror::start(root, &args)
}

fn tls_mirror_logged(root: &Path, srv: &Issued, extra: &[&str], log: &Path) -> Mirror {
    let mut args = vec!["--tls-cert", srv.cert(), "--tls-key", srv.key()];
    args.extend(extra);
    Mirror::logged(root, &args, log)
}

fn ddftps(m: &Mirror) -> String {
    format!("ddftps://{}", m.addr)
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `get f.bin` from `mirrors` with `extra` flags, expecting exit `code`.
fn get(f: &Fixture, mirrors: &str, extra: &[&str], code: i32) -> std::process::Output {
    let out = f.out("o.bin");
    let _ = std::fs::remove_file(&out);
    let mut args = vec!["get", "f.bin", "--mirrors", mirrors, "-o", out.to_str().unwrap(), "-q"];
    args.extend(extra);
    ddftp(&args, code)
}

#[test]
fn get_and_archive_over_tls_are_byte_exact() {
    let f = Fixture::new();
    let pki = Pki::new(f.dir.path(), "ddftp test CA");
    let srv = pki.issue("ddftp test server", "IP:127.0.0.1", false);
    let data = random_file(&f.root().join("f.bin"), 6_000_000, 61);
    std::fs::create_dir_all(f.root().join("tree/a/b")).unwrap();
    random_file(&f.root().join("tree/a/big"), 3_000_000, 62);
    for i in 0..20 {
        random_file(&f.root().join(format!("tree/a/b/s{i}")), 100 * i + 1, 63 + i as u64);
    }
    let (a, b) = (tls_mirror(&f.root(), &srv, &[]), tls_mirror(&f.root(), &srv, &[]));
    let mirrors = format!("{},{}", ddftps(&a), ddftps(&b));
    get(&f, &mirrors, &["--ca-file", pki.ca(), "--block-size", "64KiB"], 0);
    assert_eq!(std::fs::read(f.out("o.bin")).unwrap(), data);

    // The archive: plain addresses with --tls.
    let dest = f.dir.path().join("copy");
    let plain = format!("{},{}", a.addr, b.addr);
    ddftp(&["archive", "tree", "-d", dest.to_str().unwrap(), "-m", &plain, "--tls", "--ca-file", pki.ca(), "-q"], 0);
    assert_eq!(std::fs::read(dest.join("a/big")).unwrap(), std::fs::read(f.root().join("tree/a/big")).unwrap());
    for i in 0..20 {
        let p = format!("a/b/s{i}");
        assert_eq!(std::fs::read(dest.join(&p)).unwrap(), std::fs::read(f.root().join("tree").join(&p)).unwrap());
    }
    // With a token too: the challenge runs inside TLS.
    let token = f.dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let t = tls_mirror(&f.root(), &srv, &["--token-file", token.to_str().unwrap()]);
    get(&f, &ddftps(&t), &["--ca-file", pki.ca(), "--token-file", token.to_str().unwrap()], 0);
    assert_eq!(std::fs::read(f.out("o.bin")).unwrap(), data);
}

#[test]
fn certificates_that_do_not_verify_are_refused() {
    let f = Fixture::new();
    random_file(&f.root().join("f.bin"), 300_000, 64);
    let pki = Pki::new(f.dir.path(), "ddftp test CA");
    let other = Pki::new(f.dir.path(), "another CA");
    let good = tls_mirror(&f.root(), &pki.issue("good", "IP:127.0.0.1", false), &[]);
    let expired = tls_mirror(&f.root(), &pki.issue("expired", "IP:127.0.0.1", true), &[]);
    let misnamed = tls_mirror(&f.root(), &pki.issue("misnamed", "DNS:other.example", false), &[]);

    let cases = [
        (&good, other.ca(), "not signed by a CA we trust"),
        (&expired, pki.ca(), "Expired"),
        (&misnamed, pki.ca(), "issued for another name"),
    ];
    for (m, ca, why) in cases {
        let o = get(&f, &ddftps(m), &["--ca-file", ca], 6);
        assert!(stderr(&o).contains(why), "{why}: {}", stderr(&o));
        assert!(!f.out("o.bin").exists(), "nothing is written");
    }
    // No --ca-file: the system's roots do not know the test CA.
    let o = get(&f, &ddftps(&good), &[], 6);
    assert!(stderr(&o).contains("UnknownIssuer"), "{}", stderr(&o));
    // One good mirror among bad ones: the bad are skipped, named, the copy made.
    let o = get(&f, &format!("{},{}", ddftps(&good), ddftps(&expired)), &["--ca-file", pki.ca()], 0);
    assert!(stderr(&o).contains("Expired"), "the skipped mirror is named: {}", stderr(&o));
    // The archive's walk is refused the same way, with the same exit.
    std::fs::create_dir(f.root().join("d")).unwrap();
    let dest = f.dir.path().join("copy");
    let o = ddftp(&["archive", "d", "-d", dest.to_str().unwrap(), "-m", &ddftps(&good), "-q"], 6);
    assert!(stderr(&o).contains("UnknownIssuer"), "{}", stderr(&o));
    // The server kept serving.
    get(&f, &ddftps(&good), &["--ca-file", pki.ca()], 0);
}

#[test]
fn mutual_tls_requires_a_client_certificate_from_the_ca() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.bin"), 500_000, 65);
    let pki = Pki::new(f.dir.path(), "ddftp test CA");
    let other = Pki::new(f.dir.path(), "another CA");
    let srv = pki.issue("server", "IP:127.0.0.1", false);
    let client = pki.issue("ddftp test client", "", false);
    let stranger = other.issue("stranger", "", false);
    let log = f.dir.path().join("server.log");
    let m = tls_mirror_logged(&f.root(), &srv, &["--client-ca", pki.ca()], &log);

    let o = get(&f, &ddftps(&m), &["--ca-file", pki.ca()], 6);
    assert!(stderr(&o).contains("requires a client certificate"), "{}", stderr(&o));
    let o = get(&f, &ddftps(&m), &["--ca-file", pki.ca(), "--cert", stranger.cert(), "--key", stranger.key()], 6);
    assert!(stderr(&o).contains("does not trust the certificate"), "{}", stderr(&o));

    get(&f, &ddftps(&m), &["--ca-file", pki.ca(), "--cert", client.cert(), "--key", client.key()], 0);
    assert_eq!(std::fs::read(f.out("o.bin")).unwrap(), data);
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("CN=ddftp test client"), "the client's subject is logged: {log}");
}

#[test]
fn plaintext_and_tls_mix_ups_are_refused_clearly() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.bin"), 300_000, 66);
    let pki = Pki::new(f.dir.path(), "ddftp test CA");
    let srv = pki.issue("server", "IP:127.0.0.1", false);
    let tls_log = f.dir.path().join("tls.log");
    let plain_log = f.dir.path().join("plain.log");
    let secure = tls_mirror_logged(&f.root(), &srv, &[], &tls_log);
    let plain = Mirror::logged(&f.root(), &[], &plain_log);

    // A plaintext client is told, in plaintext, that TLS is needed.
    let o = get(&f, &secure.addr, &[], 1);
    assert!(stderr(&o).contains("speaks TLS only"), "{}", stderr(&o));
    // A TLS client finds no TLS: no fallback to cleartext.
    let o = get(&f, &ddftps(&plain), &["--ca-file", pki.ca()], 6);
    assert!(stderr(&o).contains("TLS handshake"), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&plain_log).unwrap().contains("a TLS client on this plaintext listener"));
    assert!(std::fs::read_to_string(&tls_log).unwrap().contains("a plaintext client on this TLS listener"));
    // Both go on serving the clients that match them.
    get(&f, &ddftps(&secure), &["--ca-file", pki.ca()], 0);
    assert_eq!(std::fs::read(f.out("o.bin")).unwrap(), data);
    get(&f, &plain.addr, &[], 0);
    assert_eq!(std::fs::read(f.out("o.bin")).unwrap(), data);
}

#[test]
fn send_and_recv_over_tls() {
    let f = Fixture::new();
    let pki = Pki::new(f.dir.path(), "ddftp test CA");
    let srv = pki.issue("receiver", "IP:127.0.0.1,IP:127.0.0.2", false);
    let data = random_file(&f.root().join("in.bin"), 12_000_000, 67);
    let got = f.dir.path().join("got.bin");
    let (mut recv, links, mut err) = receiving(
        Command::new(bin("ddftp"))
            .args(["recv", "--listen", "127.0.0.1:0,127.0.0.2:0", "--tls-cert", srv.cert(), "--tls-key", srv.key()])
            .stdout(std::fs::File::create(&got).unwrap()),
    );

    // A plaintext sender is refused (the receiver drops its links and waits on).
    let send = |extra: &[&str]| {
        let mut c = Command::new(bin("ddftp"))
            .args(["send", "--links", &links])
            .args(extra)
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = c.stdin.take().unwrap();
        let d = data.clone();
        let writer = std::thread::spawn(move || {
            let _ = input.write_all(&d);
        });
        let o = c.wait_with_output().unwrap();
        writer.join().unwrap();
        o
    };
    // What the sender reads depends on a race: the receiver's alert ("the
    // peer speaks TLS"), or a reset if the receiver closed with the
    // sender's bytes unread. Either way it fails; the receiver says why.
    let o = send(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    // A sender that does not trust the receiver's CA stops before sending.
    let o = send(&["--tls"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not signed by a CA we trust"), "{}", stderr(&o));

    let o = send(&["--tls", "--ca-file", pki.ca()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("over 2 links"), "{}", stderr(&o));
    assert!(recv.wait().unwrap().success());
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut rest);
    assert!(rest.contains("link refused") && rest.contains("does not speak TLS"), "the receiver says why: {rest}");
    assert_eq!(std::fs::read(&got).unwrap(), data);
}
