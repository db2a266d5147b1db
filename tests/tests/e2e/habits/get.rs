//! `get` as a user of curl, wget and aria2c types it: one `-o` for one
//! file, the ddftp:// URL form, sizes and rates as those tools read them,
//! "not found" with its own exit code, their muscle-memory flags, rejected
//! credentials, `-v` showing the HTTP requests.

use crate::util::nginx::{free_port, Nginx};
use crate::util::*;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn one_output_for_several_files_is_refused_with_the_way_to_do_it() {
    let f = Fixture::new();
    random_file(&f.root().join("a"), 1000, 1);
    random_file(&f.root().join("b"), 1000, 2);
    let m = Mirror::start(&f.root(), &[]);
    let out = f.out("one");
    let o = ddftp(&["get", "a", "b", "-m", &m.addr, "-o", out.to_str().unwrap()], 2);
    assert!(stderr(&o).contains("use -d DIR"), "{}", stderr(&o));
    assert!(!out.exists(), "nothing was fetched");
}

#[test]
fn a_ddftpd_file_has_a_url_taken_as_an_argument_a_mirror_a_list_and_a_metalink_entry() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root().join("pub")).unwrap();
    let data = random_file(&f.root().join("pub/x.iso"), 3 << 20, 3);
    let m = Mirror::start(&f.root(), &[]);
    let url = format!("ddftp://{}/pub/x.iso", m.addr);
    // An argument, as an http URL is.
    let out = f.out("arg.iso");
    ddftp(&["get", &url, "-o", out.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    // A mirror's directory URL, PATH appended.
    let out = f.out("dir.iso");
    ddftp(&["get", "x.iso", "-m", &format!("ddftp://{}/pub/", m.addr), "-o", out.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    // An -i list's line.
    let list = f.out("list.txt");
    std::fs::write(&list, format!("{url}\n  out=listed.iso\n")).unwrap();
    let dir = f.out("d");
    ddftp(&["get", "-i", list.to_str().unwrap(), "-d", dir.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::read(dir.join("listed.iso")).unwrap(), data);
    // A Metalink's <url>.
    let meta = f.out("x.meta4");
    std::fs::write(
        &meta,
        format!(
            "<?xml version=\"1.0\"?><metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"x.iso\">\
             <size>{}</size><hash type=\"sha-256\">{}</hash><url>{url}</url></file></metalink>",
            data.len(),
            sha256_hex(&data)
        ),
    )
    .unwrap();
    let out = f.out("meta.iso");
    ddftp(&["get", "-M", meta.to_str().unwrap(), "-o", out.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    // Two URLs that ask for different paths are refused, naming both.
    let o = ddftp(&["get", "x.iso", "-m", &format!("ddftp://{}/pub/,{}", m.addr, m.addr)], 2);
    assert!(stderr(&o).contains("\"pub/x.iso\"") && stderr(&o).contains("\"x.iso\""), "{}", stderr(&o));
}

#[test]
fn single_letter_sizes_are_powers_of_two_and_a_zero_rate_is_no_limit() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("r.bin"), 1 << 20, 4);
    let m = Mirror::start(&f.root(), &[]);
    for rate in ["0", "50M", "512k"] {
        let out = f.out(&format!("r-{rate}"));
        ddftp(&["get", "r.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q", "--limit-rate", rate], 0);
        assert_eq!(std::fs::read(&out).unwrap(), data);
    }
    // `--block-size 1M` is 1 MiB (a power of two, as the block size must
    // divide the chunk size); "1MB" is not one.
    let out = f.out("bs");
    let o = ddftp(&["get", "r.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "--json", "--block-size", "1M"], 0);
    assert_eq!(json(&o)["block_size"], 1 << 20);
}

#[test]
fn a_file_no_mirror_has_exits_7_and_says_so() {
    let f = Fixture::new();
    random_file(&f.root().join("here.bin"), 1000, 5);
    let m = Mirror::start(&f.root(), &[]);
    let web = Nginx::serve(&f.root(), None);
    let args = ["get", "gone.bin", "-m", &format!("{},{}", m.addr, web.url), "-o"];
    let o = ddftp(&[&args[..], &[f.out("g").to_str().unwrap(), "--retries", "0"]].concat(), 7);
    assert!(stderr(&o).contains("no mirror has gone.bin"), "{}", stderr(&o));
    // One mirror down and one without it is not "not found": the down one
    // may have it.
    let dead = format!("127.0.0.1:{}", free_port());
    let o = ddftp(&["get", "gone.bin", "-m", &format!("{},{dead}", m.addr), "--retries", "0", "-o", "x"], 1);
    assert!(stderr(&o).contains("no mirror could serve"), "{}", stderr(&o));
}

#[test]
fn wget_curl_and_aria2c_flags_are_understood() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("c.bin"), 1 << 20, 6);
    let m = Mirror::start(&f.root(), &[]);
    let dir = f.out("cd");
    ddftp(&["get", "c.bin", "-c", "-O", "-m", &m.addr, "-d", dir.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::read(dir.join("c.bin")).unwrap(), data);
    // A mistyped flag is not to be passed "as a value" after `--`.
    let o = ddftp(&["get", "c.bin", "-x", "-m", &m.addr], 2);
    assert!(stderr(&o).contains("unexpected argument '-x'") && !stderr(&o).contains("-- -x"), "{}", stderr(&o));
    // A mirror given without -m.
    let o = ddftp(&["get", "c.bin", &m.addr], 2);
    assert!(stderr(&o).contains(&format!("--mirrors {}", m.addr)), "{}", stderr(&o));
}

/// nginx asking for Basic credentials: bob, password "right".
fn guarded(root: &std::path::Path, users: &std::path::Path) -> Nginx {
    std::fs::write(users, "bob:{PLAIN}right\n").unwrap();
    let extra = format!("auth_basic \"files\"; auth_basic_user_file {};", users.display());
    Nginx::start(root, None, None, &extra)
}

#[test]
fn wrong_credentials_are_told_apart_from_none() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("s.bin"), 1 << 16, 7);
    let web = guarded(&f.root(), &f.out("users"));
    let url = format!("{}s.bin", web.url);
    let o = ddftp(&["get", &url, "-o", f.out("none").to_str().unwrap(), "--retries", "0"], 1);
    assert!(stderr(&o).contains("give --user"), "{}", stderr(&o));
    let o = ddftp(&["get", &url, "--user", "bob:wrong", "-o", f.out("w").to_str().unwrap(), "--retries", "0"], 1);
    assert!(stderr(&o).contains("credentials sent were rejected"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("wrong"), "no password shown: {}", stderr(&o));
    let out = f.out("ok");
    ddftp(&["get", &url, "--user", "bob:right", "-o", out.to_str().unwrap(), "-q", "--checksum"], 2);
    let hex = format!("sha-256={}", sha256_hex(&data));
    ddftp(&["get", &url, "--user", "bob:right", "-o", out.to_str().unwrap(), "-q", "--checksum", &hex], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
}

#[test]
fn verbose_shows_each_http_request_and_its_status_without_secrets() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("v.bin"), 1 << 20, 8);
    let web = guarded(&f.root(), &f.out("users"));
    let url = format!("{}v.bin?sig=SECRETSIG", web.url);
    let out = f.out("v");
    let hex = format!("sha-256={}", sha256_hex(&data));
    let o = ddftp(&["get", &url, "--user", "bob:right", "-o", out.to_str().unwrap(), "-v", "--checksum", &hex], 0);
    let err = stderr(&o);
    assert!(err.contains(&format!("> GET {}v.bin?... (Range: bytes=0-0)", web.url)), "{err}");
    assert!(err.contains("< 206 Partial Content") || err.contains("206 Partial Content from"), "{err}");
    for secret in ["SECRETSIG", "right", "Authorization", "Ym9i"] {
        assert!(!err.contains(secret), "{secret} shown: {err}");
    }
}

#[test]
fn a_directory_url_without_its_slash_is_followed_once_into_the_directory() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root().join("tree")).unwrap();
    let data = random_file(&f.root().join("tree/f.bin"), 1 << 20, 9);
    let web = Nginx::serve(&f.root(), None);
    let out = f.out("f");
    let hex = format!("sha-256={}", sha256_hex(&data));
    let dir = format!("{}tree", web.url);
    let o = ddftp(&["get", "f.bin", "-m", &dir, "-o", out.to_str().unwrap(), "--checksum", &hex, "-v"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    let asked_dir = stderr(&o).matches(&format!("> GET {dir} ")).count();
    assert_eq!(asked_dir, 1, "the directory is asked once: {}", stderr(&o));
}

#[test]
fn a_multi_file_summary_flags_each_file_nothing_verified() {
    let f = Fixture::new();
    let a = random_file(&f.root().join("a.bin"), 1 << 16, 10);
    random_file(&f.root().join("b.bin"), 1 << 16, 11);
    let web = Nginx::serve(&f.root(), None);
    let list = f.out("l.txt");
    std::fs::write(&list, format!("{0}a.bin\n  checksum=sha-256={1}\n{0}b.bin\n", web.url, sha256_hex(&a))).unwrap();
    let dir = f.out("d");
    let o = ddftp(&["get", "-i", list.to_str().unwrap(), "-d", dir.to_str().unwrap()], 0);
    let out = String::from_utf8_lossy(&o.stdout);
    let line = |name: &str| out.lines().find(|l| l.contains(name)).unwrap_or_default().to_string();
    assert!(line("b.bin").contains("NOT VERIFIED") && !line("a.bin").contains("NOT VERIFIED"), "{out}");
    assert!(out.contains("1 NOT VERIFIED"), "{out}");
    let o = ddftp(&["get", "-i", list.to_str().unwrap(), "-d", dir.to_str().unwrap(), "--json"], 0);
    assert_eq!(json(&o)["not_verified"], 1);
}
