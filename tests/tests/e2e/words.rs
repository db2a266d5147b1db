//! Messages that say what to do: each case a new user met, with the text
//! that names the cause and the next step, and the exit code of the
//! README's table.

use std::process::Command;

use crate::util::nginx::Nginx;
use crate::util::*;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_directory_given_to_get_is_a_usage_error_pointing_to_archive() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root().join("tree/sub")).unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let o = ddftp(&["get", "tree", "-m", &m.addr, "-o", f.out("t").to_str().unwrap(), "--retries", "0"], 2);
    assert!(stderr(&o).contains("ddftp archive tree --mirrors"), "{}", stderr(&o));
}

#[test]
fn http_and_ddftpd_mixed_up_say_which_to_write() {
    let f = Fixture::new();
    random_file(&f.root().join("a.bin"), 1000, 1);
    let m = Mirror::start(&f.root(), &[]);
    // A ddftpd given as a web server.
    let url = format!("http://{}/", m.addr);
    let o = ddftp(&["get", "a.bin", "-m", &url, "-o", f.out("a").to_str().unwrap(), "--retries", "0"], 1);
    assert!(stderr(&o).contains("if it is a ddftpd, give it as HOST:PORT"), "{}", stderr(&o));
    // A web server given as a ddftpd.
    let web = Nginx::serve(&f.root(), None);
    let addr = web.url.trim_start_matches("http://").trim_end_matches('/').to_string();
    let o = ddftp(&["get", "a.bin", "-m", &addr, "-o", f.out("b").to_str().unwrap(), "--retries", "0"], 1);
    assert!(stderr(&o).contains("it answered in HTTP, not as a ddftpd"), "{}", stderr(&o));
    assert!(stderr(&o).contains("http://HOST:PORT/DIR/"), "{}", stderr(&o));
}

#[test]
fn an_output_directory_gets_the_files_own_name_suggested() {
    let f = Fixture::new();
    random_file(&f.root().join("big.iso"), 1000, 2);
    let m = Mirror::start(&f.root(), &[]);
    let dir = f.out("ro");
    std::fs::create_dir_all(&dir).unwrap();
    let o = ddftp(&["get", "big.iso", "-m", &m.addr, "-o", &format!("{}/", dir.display())], 2);
    assert!(stderr(&o).contains(&format!("-o {}/big.iso", dir.display())), "{}", stderr(&o));
    assert!(!stderr(&o).contains("//"), "{}", stderr(&o));
}

#[test]
fn json_gets_one_object_for_a_usage_error_too() {
    let o = ddftp(&["get", "x", "-m", "127.0.0.1:1", "--json", "--no-such-flag"], 2);
    let j = json(&o);
    assert_eq!(j["exit_code"], 2);
    assert!(j["error"].as_str().unwrap().contains("--no-such-flag"), "{j}");
    // Help is not an error.
    let o = Command::new(bin("ddftp")).args(["get", "--help", "--json"]).output().unwrap();
    assert!(o.status.success() && !o.stdout.starts_with(b"{"), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn rates_in_any_case_and_in_bits() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("r.bin"), 1 << 20, 3);
    let m = Mirror::start(&f.root(), &[]);
    for rate in ["40mb", "320mbit", "1Gbps", "64MiB"] {
        let out = f.out(&format!("r-{rate}"));
        ddftp(&["get", "r.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q", "--limit-rate", rate], 0);
        assert_eq!(std::fs::read(&out).unwrap(), data);
    }
    let o = ddftp(&["get", "r.bin", "-m", &m.addr, "--limit-rate", "12parsecs"], 2);
    assert!(stderr(&o).contains("400mbit"), "the examples name the bit form: {}", stderr(&o));
}

#[test]
fn list_on_a_terminal_is_one_entry_a_line() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root().join("d")).unwrap();
    random_file(&f.root().join("d/one"), 10, 4);
    random_file(&f.root().join("d/two"), 20, 5);
    let list = f.out("tree.list");
    ddftp(&["walk", f.root().join("d").to_str().unwrap(), "-o", list.to_str().unwrap(), "-q"], 0);
    // Through a pty (script(1)), as on a terminal.
    let cmd = format!("{} list {}", bin("ddftp").display(), list.display());
    let o = Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().expect("script (util-linux)");
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout).replace('\r', "");
    assert!(!text.contains('\0'), "{text:?}");
    let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 3, "the directory and its two files: {text:?}");
    assert!(lines.iter().any(|l| l.starts_with("-rw") && l.contains(" 20 ") && l.ends_with("/two")), "{lines:?}");
    // Piped, the list format (NUL-terminated records); -0 forces it.
    let piped = ddftp(&["list", list.to_str().unwrap()], 0);
    assert!(piped.stdout.contains(&0), "piped: the records");
    let cmd = format!("{} list -0 {}", bin("ddftp").display(), list.display());
    let o = Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().unwrap();
    assert!(o.stdout.contains(&0));
}

#[test]
fn dest_parents_are_made_with_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    std::fs::create_dir_all(f.root().join("t")).unwrap();
    random_file(&f.root().join("t/x"), 100, 6);
    let m = Mirror::start(&f.root(), &[]);
    let dest = f.out("new/parents/dest");
    let cmd = format!("umask 022; {} archive t -m {} --dest {} -q", bin("ddftp").display(), m.addr, dest.display());
    assert!(Command::new("sh").args(["-c", &cmd]).status().unwrap().success());
    for p in [f.out("new"), f.out("new/parents")] {
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755, "{} made as mkdir -p makes it", p.display());
    }
    assert!(dest.join("x").exists());
}

#[test]
fn verbose_shows_each_mirrors_starts() {
    let f = Fixture::new();
    random_file(&f.root().join("v.bin"), 4 << 20, 7);
    let (a, b) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let out = f.out("v.bin");
    let o = ddftp(&["get", "v.bin", "-m", &mirrors_arg(&[&a, &b]), "-o", out.to_str().unwrap(), "-q", "-v"], 0);
    let err = stderr(&o);
    assert!(err.contains("INFO") && err.contains("Start"), "-v names the scheduler's starts: {err}");
    assert!(err.contains(&a.addr) && err.contains(&b.addr), "{err}");
    assert!(!err.contains("Extend"), "grants are -vv's: {err}");
}

#[test]
fn check_asks_every_mirror_and_votes_without_moving_data() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("c.bin"), 2 << 20, 8);
    let stale = f.out("stale");
    std::fs::create_dir_all(&stale).unwrap();
    let mut other = data.clone();
    other[1000] ^= 1;
    std::fs::write(stale.join("c.bin"), &other).unwrap();
    let (a, b, c) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]), Mirror::start(&stale, &[]));
    let web = Nginx::serve(&f.root(), None);
    let out = f.out("c.bin");
    // All agree (two ddftpd and a web server of the same size): exit 0.
    let web_mirror = web.url.clone();
    let o = ddftp(
        &[
            "get",
            "c.bin",
            "-m",
            &format!("{},{},{web_mirror}", a.addr, b.addr),
            "--check",
            "--json",
            "-o",
            out.to_str().unwrap(),
        ],
        0,
    );
    let j = json(&o);
    assert_eq!(j["sha256"], sha256_hex(&data), "{j}");
    assert_eq!(j["mirrors"].as_array().unwrap().len(), 3);
    assert!(j["mirrors"].as_array().unwrap().iter().all(|m| m["agrees"] == true && m["rtt_ms"].is_number()), "{j}");
    assert!(!out.exists(), "nothing moved");
    // One stale: named, exit 3.
    let o = ddftp(&["get", "c.bin", "-m", &mirrors_arg(&[&a, &b, &c]), "--check"], 3);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.lines().any(|l| l.contains(&c.addr) && l.contains("DIFFERS")), "{text}");
    // One silent, the others agree: exit 1, it is named.
    let o = ddftp(&["get", "c.bin", "-m", &format!("{},127.0.0.1:1", a.addr), "--check", "--retries", "0"], 1);
    assert!(String::from_utf8_lossy(&o.stdout).contains("127.0.0.1:1") && !out.exists());
}
