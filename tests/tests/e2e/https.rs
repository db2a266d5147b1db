//! HTTPS mirrors: real nginx with a certificate from a CA made in the test.

use crate::util::nginx::{test_ca, Nginx};
use crate::util::proxy::Proxy;
use crate::util::*;

#[test]
fn https_mirrors_signed_by_a_private_ca_serve_with_ca_file_beside_http_and_ddftpd() {
    let f = Fixture::new();
    let pki = tempfile::tempdir().unwrap();
    let (ca, cert) = test_ca(pki.path(), None);
    let data = random_file(&f.root().join("big.bin"), 6 << 20, 11);
    let a = Nginx::serve_tls(&f.root(), &cert);
    let b = Nginx::serve_tls(&f.root(), &cert);
    let c = Nginx::serve(&f.root(), Some("4m"));
    let d = Mirror::with_rate(&f.root(), "4MB");
    let out = f.out("o.bin");
    let mirrors = format!("{},{},{},{}", a.url, b.url, c.url, d.addr);
    let args = ["get", "big.bin", "--mirrors", &mirrors, "-o", out.to_str().unwrap(), "--json", "-q"];
    let j = json(&ddftp(&[&args[..], &["--ca-file", ca.to_str().unwrap()]].concat(), 0));
    assert_eq!(std::fs::read(&out).unwrap(), data);
    assert_eq!(j["producers"].as_array().unwrap().len(), 4, "{j}");
    assert_eq!((j["sha256_checked"].as_str(), j["verified"].as_bool()), (Some("mirrors"), Some(true)), "{j}");
    assert!(a.url.starts_with("https://"));
}

#[test]
fn a_certificate_that_does_not_verify_is_fatal_with_the_reason() {
    let f = Fixture::new();
    let pki = tempfile::tempdir().unwrap();
    let (ca, cert) = test_ca(pki.path(), None);
    random_file(&f.root().join("f.bin"), 1 << 20, 12);
    let s = Nginx::serve_tls(&f.root(), &cert);
    let out = f.out("o.bin");
    // Not trusted: no --ca-file. Exit 6: TLS is why nothing could be used.
    let o = ddftp(&["get", "f.bin", "--mirrors", &s.url, "-o", out.to_str().unwrap()], 6);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("TLS") && err.contains("UnknownIssuer"), "{err}");
    assert!(!out.exists());
    // Trusted CA, but the certificate names another host.
    let other = tempfile::tempdir().unwrap();
    let (ca2, cert2) = test_ca(other.path(), Some("mirror.example"));
    let s2 = Nginx::serve_tls(&f.root(), &cert2);
    let o = ddftp(
        &["get", "f.bin", "--mirrors", &s2.url, "-o", out.to_str().unwrap(), "--ca-file", ca2.to_str().unwrap()],
        6,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not valid for name"), "{err}");
    // No cleartext fallback: an https URL to a plain HTTP server fails.
    let plain = Nginx::serve(&f.root(), None);
    let url = plain.url.replace("http://", "https://");
    let o =
        ddftp(&["get", "f.bin", "--mirrors", &url, "-o", out.to_str().unwrap(), "--ca-file", ca.to_str().unwrap()], 6);
    assert!(String::from_utf8_lossy(&o.stderr).contains("TLS"), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!out.exists());
    // A CA file that is not one is a usage error, before anything moves.
    let o = ddftp(&["get", "f.bin", "--mirrors", &s.url, "-o", out.to_str().unwrap(), "--ca-file", "/etc/hostname"], 2);
    assert!(String::from_utf8_lossy(&o.stderr).contains("CA file"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn mirrors_are_reached_through_the_environments_proxies_unless_no_proxy_says() {
    let f = Fixture::new();
    let pki = tempfile::tempdir().unwrap();
    let (ca, cert) = test_ca(pki.path(), None);
    let data = random_file(&f.root().join("f.bin"), 3 << 20, 13);
    let (secure, plain) = (Nginx::serve_tls(&f.root(), &cert), Nginx::serve(&f.root(), None));
    let proxy = Proxy::start();
    let out = f.out("o.bin");
    let run = |no_proxy: &str| {
        let mirrors = format!("{},{}", secure.url, plain.url);
        let o = std::process::Command::new(bin("ddftp"))
            .args(["get", "f.bin", "--mirrors", &mirrors, "-o", out.to_str().unwrap(), "-q", "--restart"])
            .args(["--ca-file", ca.to_str().unwrap()])
            .env("https_proxy", &proxy.url)
            .env("http_proxy", &proxy.url)
            .env("no_proxy", no_proxy)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::read(&out).unwrap(), data);
    };
    // CONNECT for https (TLS end to end, the CA still checked), the
    // absolute URL for http.
    run("");
    let through = proxy.carried();
    assert!(through >= 4, "both mirrors' probes and producers went through it: {through}");
    run("localhost,127.0.0.1");
    assert_eq!(proxy.carried(), through, "no_proxy: straight to the mirrors");
}
