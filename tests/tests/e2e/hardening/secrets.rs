//! Hardening III, items 1, 2, 16 and 17: credentials and header values
//! stay with their origin and are never printed.

use std::process::Command;

use crate::util::capture::{capturing, Answer, Heads};
use crate::util::*;

const PASSWORD: &str = "pw-Zq81xK";
const TOKEN: &str = "tok-Hh27Lm";
const COOKIE: &str = "sid-Pp93Qa";

fn all_heads(h: &Heads) -> String {
    h.lock().unwrap().join("\n---\n")
}

/// Item 1: `-H` headers (a token, a cookie) and the user info's Basic
/// credentials do not follow a redirect to another host or another port;
/// the same origin keeps them.
#[test]
fn item01_headers_do_not_follow_a_redirect_to_another_origin() {
    let f = Fixture::new();
    let data = random_file(&f.out("src.bin"), 200_000, 101);
    for (what, other_addr) in [("another host", "127.0.0.2:0"), ("another port", "127.0.0.1:0")] {
        let (other, other_heads) = capturing(other_addr, Answer::Body(data.clone()));
        let (first, first_heads) = capturing("127.0.0.1:0", Answer::Redirect(format!("http://{other}/f.bin")));
        let out = f.out("f.bin");
        let _ = std::fs::remove_file(&out);
        let auth = format!("Authorization: Bearer {TOKEN}");
        let cookie = format!("Cookie: sid={COOKIE}");
        let url = format!("http://{first}/f.bin");
        ddftp(&["get", &url, "-o", out.to_str().unwrap(), "-q", "-H", &auth, "-H", &cookie], 0);
        assert!(std::fs::read(&out).unwrap() == data);
        let (first, other) = (all_heads(&first_heads), all_heads(&other_heads));
        assert!(first.contains(TOKEN) && first.contains(COOKIE), "the server named gets them:\n{first}");
        assert!(!other.is_empty(), "the redirect was followed");
        assert!(!other.contains(TOKEN) && !other.contains(COOKIE), "{what} got the headers:\n{other}");
        assert!(!other.to_ascii_lowercase().contains("authorization"), "{what}:\n{other}");
    }
}

/// Item 1: `-H 'Authorization: ...'` with user info in the URL sends one
/// Authorization header, the user's own.
#[test]
fn item01_one_authorization_header_never_two() {
    let f = Fixture::new();
    let data = random_file(&f.out("src.bin"), 100_000, 102);
    let (at, heads) = capturing("127.0.0.1:0", Answer::Body(data.clone()));
    let out = f.out("g.bin");
    let url = format!("http://alice:{PASSWORD}@{at}/g.bin");
    ddftp(&["get", &url, "-o", out.to_str().unwrap(), "-q", "-H", &format!("Authorization: Bearer {TOKEN}")], 0);
    assert!(std::fs::read(&out).unwrap() == data);
    for h in heads.lock().unwrap().iter() {
        let n = h.to_ascii_lowercase().matches("authorization:").count();
        assert_eq!(n, 1, "{h}");
        assert!(h.contains(TOKEN), "{h}");
    }
}

/// Everything `o` wrote, with the files named.
fn everything(o: &std::process::Output, files: &[&std::path::Path]) -> String {
    let mut all = String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr);
    for f in files {
        all += &std::fs::read_to_string(f).unwrap_or_default();
    }
    all
}

fn no_secret(all: &str, what: &str) {
    for s in [PASSWORD, TOKEN, COOKIE] {
        assert!(!all.contains(s), "{what}: {s} was printed:\n{all}");
    }
}

/// Item 2 and "Done when" 3: a failing `get` with credentials in the URL
/// and secrets in `-H` writes neither anywhere: stdout, stderr, `--json`,
/// `--metrics-file`, logs at `-vv`; for one URL, several, a `-i` list and
/// a usage error.
#[test]
fn item02_a_failing_get_prints_no_password_or_header_value() {
    let f = Fixture::new();
    let (refusing, _) = capturing("127.0.0.1:0", Answer::Status(404));
    let (redirecting, _) = capturing("127.0.0.1:0", Answer::Redirect(format!("http://{refusing}/gone")));
    let metrics = f.out("metrics.prom");
    let list = f.out("list.txt");
    let creds = format!("alice:{PASSWORD}");
    let u = |at: &str, name: &str| format!("http://{creds}@{at}/{name}");
    std::fs::write(&list, format!("{}\n  out=a.bin\n{}\n  out=b.bin\n", u(&refusing, "a"), u(&redirecting, "b")))
        .unwrap();
    let secrets = ["-H", &format!("Authorization: Bearer {TOKEN}"), "-H", &format!("Cookie: sid={COOKIE}")];
    let m = metrics.to_str().unwrap().to_string();
    let d = f.out("d").to_str().unwrap().to_string();
    let cases: Vec<(&str, Vec<String>, i32)> = vec![
        ("one URL", vec![u(&refusing, "x.bin"), "-o".into(), f.out("x").to_str().unwrap().into()], 7),
        ("a redirect", vec![u(&redirecting, "y.bin"), "-o".into(), f.out("y").to_str().unwrap().into()], 7),
        ("several URLs", vec![u(&refusing, "z.bin"), u(&redirecting, "z.bin")], 7),
        ("a -i list", vec!["-i".into(), list.to_str().unwrap().into(), "-d".into(), d.clone()], 7),
        ("a bad port", vec![format!("http://{creds}@127.0.0.1:99999/p.bin")], 2),
        ("a path on a mirror", vec!["p.bin".into(), "--mirrors".into(), u(&refusing, ""), "-d".into(), d.clone()], 7),
    ];
    for (what, args, exit) in cases {
        for json in [true, false] {
            let _ = std::fs::remove_file(&metrics);
            let mut a: Vec<&str> = vec!["get", "--retries", "0", "--metrics-file", &m, "-vv"];
            a.extend(args.iter().map(String::as_str));
            a.extend(secrets);
            if json {
                a.push("--json");
            }
            let o = ddftp(&a, exit);
            no_secret(&everything(&o, &[&metrics]), what);
            if exit != 2 {
                assert!(metrics.exists(), "{what}: the metrics file was written");
            }
        }
    }
}

/// Item 16: a `.netrc` that others can read is used, with a warning (as
/// ssh warns of a key others can read).
#[test]
fn item16_a_netrc_others_can_read_is_warned_of() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let data = random_file(&f.out("src.bin"), 50_000, 116);
    let (at, _) = capturing("127.0.0.1:0", Answer::Body(data));
    let netrc = f.out("netrc");
    std::fs::write(&netrc, format!("machine 127.0.0.1 login alice password {PASSWORD}\n")).unwrap();
    let get = |mode: u32| {
        std::fs::set_permissions(&netrc, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = f.out("n.bin");
        let _ = std::fs::remove_file(&out);
        let url = format!("http://{at}/n.bin");
        let o = ddftp(&["get", &url, "-o", out.to_str().unwrap(), "--netrc-file", netrc.to_str().unwrap()], 0);
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = get(0o644);
    assert!(err.contains("others can read") && err.contains("chmod 600"), "{err}");
    no_secret(&err, "the warning");
    let err = get(0o600);
    assert!(!err.contains("others can read"), "{err}");
}

/// Item 17: `--user-agent` with CR/LF is refused, naming the flag.
#[test]
fn item17_a_user_agent_that_would_split_a_request_names_the_flag() {
    let o = Command::new(bin("ddftp"))
        .args(["get", "http://127.0.0.1:9/f", "-o", "/dev/null/x", "--user-agent", "a\r\nX-Evil: 1"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--user-agent") && !err.contains("/dev/null"), "{err}");
}
