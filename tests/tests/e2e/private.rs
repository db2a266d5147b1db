//! Private web mirrors: nginx with `auth_basic` reached through a .netrc,
//! `--user` and the URL's user info; a redirect to another host does not
//! carry the credentials; `--header` and `--user-agent` reach the server;
//! the password is never printed.

use crate::util::capture::{Answer, Heads};
use crate::util::nginx::Nginx;
use crate::util::*;

const PASSWORD: &str = "s3cret-pa55";

/// A web server on `addr` that answers every request with `data` whole
/// (200) and keeps each request's head.
fn capturing(addr: &str, data: Vec<u8>) -> (String, Heads) {
    crate::util::capture::capturing(addr, Answer::Body(data))
}

fn no_password(o: &std::process::Output) {
    let all = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    assert!(!all.contains(PASSWORD), "the password was printed: {all}");
}

#[test]
fn nginx_with_basic_auth_through_netrc_user_and_url() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("p.bin"), 2 << 20, 90);
    let users = f.out("htpasswd");
    std::fs::write(&users, format!("alice:{{PLAIN}}{PASSWORD}\n")).unwrap();
    let conf = format!("auth_basic \"private\"; auth_basic_user_file {};", users.display());
    let web = Nginx::start(&f.root(), None, None, &conf);
    let url = format!("{}p.bin", web.url);
    // Without credentials: refused, and told what to give.
    let o = ddftp(&["get", &url, "-o", f.out("none").to_str().unwrap(), "--retries", "0"], 1);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("401") && err.contains("--user USER[:PASS]"), "{err}");
    // --user.
    let out = f.out("by-user");
    let o = ddftp(&["get", &url, "-o", out.to_str().unwrap(), "--user", &format!("alice:{PASSWORD}"), "--json"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    no_password(&o);
    // A .netrc.
    let netrc = f.out("netrc");
    std::fs::write(&netrc, format!("machine 127.0.0.1\n  login alice\n  password {PASSWORD}\n")).unwrap();
    let out = f.out("by-netrc");
    let o = ddftp(&["get", &url, "-o", out.to_str().unwrap(), "--netrc-file", netrc.to_str().unwrap(), "--json"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    no_password(&o);
    // The URL's user info (kept out of every message and of --json).
    let with_info = url.replacen("http://", &format!("http://alice:{PASSWORD}@"), 1);
    let out = f.out("by-url");
    let o = ddftp(&["get", &with_info, "-o", out.to_str().unwrap(), "--json"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    no_password(&o);
    // A wrong password: 401 again, the password still not printed.
    let wrong = url.replacen("http://", "http://alice:nope-not-it@", 1);
    let o = ddftp(&["get", &wrong, "-o", f.out("wrong").to_str().unwrap(), "--retries", "0"], 1);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("nope-not-it"));
}

#[test]
fn a_redirect_to_another_host_does_not_carry_the_credentials() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("away.bin"), 1 << 20, 91);
    // Another host: 127.0.0.2 (loopback, another address).
    let (other, heads) = capturing("127.0.0.2:0", data.clone());
    let users = f.out("htpasswd");
    std::fs::write(&users, format!("alice:{{PLAIN}}{PASSWORD}\n")).unwrap();
    let conf = format!(
        "auth_basic \"private\"; auth_basic_user_file {}; location = /away.bin {{ return 302 http://{other}/away.bin; }}",
        users.display()
    );
    let web = Nginx::start(&f.root(), None, None, &conf);
    let out = f.out("away.bin");
    let o = ddftp(
        &[
            "get",
            &format!("{}away.bin", web.url),
            "-o",
            out.to_str().unwrap(),
            "--user",
            &format!("alice:{PASSWORD}"),
            "-q",
        ],
        0,
    );
    assert_eq!(std::fs::read(&out).unwrap(), data);
    no_password(&o);
    let heads = heads.lock().unwrap();
    assert!(!heads.is_empty(), "the redirect was followed");
    for h in heads.iter() {
        assert!(!h.to_ascii_lowercase().contains("authorization"), "credentials went to another host:\n{h}");
    }
}

#[test]
fn headers_and_the_user_agent_reach_the_server() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("h.bin"), 300_000, 92);
    let (at, heads) = capturing("127.0.0.1:0", data.clone());
    let out = f.out("h.bin");
    let url = format!("http://{at}/h.bin");
    ddftp(
        &[
            "get",
            &url,
            "-o",
            out.to_str().unwrap(),
            "-q",
            "--header",
            "X-Test-Token: abc123",
            "-H",
            "X-Other: 2",
            "--user-agent",
            "tester/1.0",
        ],
        0,
    );
    assert_eq!(std::fs::read(&out).unwrap(), data);
    let heads = heads.lock().unwrap();
    assert!(!heads.is_empty());
    for h in heads.iter().map(|h| h.to_ascii_lowercase()) {
        assert!(h.contains("x-test-token: abc123\r\n") && h.contains("x-other: 2\r\n"), "{h}");
        assert!(h.contains("user-agent: tester/1.0\r\n"), "{h}");
    }
    // A header that would split the request is refused up front.
    ddftp(&["get", &url, "-o", f.out("x").to_str().unwrap(), "-H", "X-A: b\r\nX-B: c"], 2);
}
