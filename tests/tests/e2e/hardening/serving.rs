//! Hardening III, items 3, 8, 9, 10, 11, 14, 15 and 20: the server's log
//! file, metrics page, config and watcher against a hostile local account
//! or client, and a client that cannot reach its only mirror.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;

use super::*;

/// ddftpd run with `args`, expected to end by itself: one still running
/// after 10 s (it accepted what it should have refused, and serves) is
/// killed, and its status is then no exit code.
fn ddftpd_output(args: &[&str]) -> std::process::Output {
    let mut c = Command::new(bin("ddftpd"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while c.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = c.kill();
    c.wait_with_output().unwrap()
}

/// Item 3: a log file planted as a symlink (by the account that can write
/// its directory) is refused at start, its target untouched; a reopen on
/// SIGHUP goes through the directory held from the start, so a
/// root-owned directory works with logrotate's `create`.
#[test]
fn item03_the_log_file_is_never_reached_through_a_symlink() {
    need(is_root(), "root (ddftpd starts as root and drops to nobody)");
    let f = Fixture::new();
    random_file(&f.root().join("f"), 10_000, 3);
    let logs = f.out("logs");
    std::fs::create_dir(&logs).unwrap();
    std::os::unix::fs::chown(&logs, Some(65534), Some(65534)).unwrap();
    let secret = f.out("root-only");
    std::fs::write(&secret, b"root's\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::symlink(&secret, logs.join("ddftpd.log")).unwrap();
    let log = logs.join("ddftpd.log");
    let (root, l) = (f.root(), log.to_str().unwrap().to_string());
    let o = ddftpd_output(&["--root", root.to_str().unwrap(), "--listen", "127.0.0.1:0", "--log-file", &l]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("symlink"), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&secret).unwrap(), b"root's\n", "nothing appended through the symlink");
    // A hard link planted under the name is refused too.
    std::fs::remove_file(&log).unwrap();
    std::fs::hard_link(&secret, &log).unwrap();
    let o = ddftpd_output(&["--root", root.to_str().unwrap(), "--listen", "127.0.0.1:0", "--log-file", &l]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(std::fs::read(&secret).unwrap(), b"root's\n");
    // A root-owned directory: rotated with `create` (a new file the server's
    // user owns), SIGHUP reopens it, and new lines go there.
    let owned = f.out("owned");
    std::fs::create_dir(&owned).unwrap();
    let log = owned.join("ddftpd.log");
    let mut cmd = Command::new(bin("ddftpd"));
    cmd.args(["--user", "nobody", "--log-file", log.to_str().unwrap()]);
    cmd.arg("--root").arg(&root).args(["--listen", "127.0.0.1:0"]);
    let m = Mirror::command(cmd, false);
    ddftp(&["get", "f", "-m", &m.addr, "-o", f.out("o1").to_str().unwrap(), "-q"], 0);
    std::fs::rename(&log, owned.join("ddftpd.log.1")).unwrap();
    std::fs::write(&log, b"").unwrap();
    std::os::unix::fs::chown(&log, Some(65534), Some(65534)).unwrap();
    m.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    ddftp(&["get", "f", "-m", &m.addr, "-o", f.out("o2").to_str().unwrap(), "-q"], 0);
    std::thread::sleep(Duration::from_millis(300));
    let new = std::fs::read_to_string(&log).unwrap();
    assert!(new.contains("served"), "the reopened log has the new access lines: {new:?}");
}

/// Item 8: a single mirror that cannot be reached fails fast, with the
/// cause: a name that does not resolve at once, a refused port after the
/// quick tries (about 2 s), for ddftpd and web mirrors alike.
#[test]
fn item08_an_unreachable_only_mirror_fails_fast_with_its_cause() {
    let f = Fixture::new();
    // (The binaries are brought up to date before anything is timed.)
    bin_dir();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    let o = |s: &str| f.out(s).to_str().unwrap().to_string();
    let cases = [
        (vec!["get", "f", "--mirrors", "no-such-host.invalid:7400"], "no such host", 2),
        (vec!["get", "http://no-such-host.invalid/f"], "no such host", 2),
        (vec!["get", "f", "--mirrors", &closed], "refused", 5),
    ];
    for (args, says, within) in cases {
        let t = Instant::now();
        let out = o("x");
        let mut a = args.clone();
        a.extend(["-o", &out]);
        let res = ddftp(&a, 1);
        let err = stderr(&res);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(t.elapsed() < Duration::from_secs(within), "{args:?} took {:?}", t.elapsed());
    }
}

/// Item 9: idle sockets held on the metrics port do not delay a scrape.
#[test]
fn item09_a_scrape_is_answered_with_100_idle_sockets_held() {
    let f = Fixture::new();
    let m = Mirror::start(&f.root(), &["--metrics", "127.0.0.1:0"]);
    let at = m.metrics.clone().unwrap();
    let held: Vec<_> = (0..100).map(|_| std::net::TcpStream::connect(&at).unwrap()).collect();
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let page = scrape(&at);
    assert!(t.elapsed() < Duration::from_secs(1), "the scrape took {:?}", t.elapsed());
    assert!(page.contains("ddftpd_connections_accepted_total"));
    drop(held);
}

/// Item 10: a rate limit that is no size in the config file is refused as
/// the flag is, at start and on reload (the old settings stay, the server
/// serves). (0 is no limit, as curl's `--limit-rate 0`.)
#[test]
fn item10_config_values_are_checked_as_flags_are() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 300_000, 10);
    let conf = f.out("ddftpd.toml");
    let root = f.root().display().to_string();
    std::fs::write(&conf, format!("root = \"{root}\"\nlisten = [\"127.0.0.1:0\"]\nrate-limit = \"fast\"\n")).unwrap();
    let o = ddftpd_output(&["--config", conf.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stderr).contains("rate-limit"), "{o:?}");
    for (key, value) in [("max-connections", "9223372036854775807"), ("idle-timeout", "18446744073709551615")] {
        std::fs::write(&conf, format!("root = \"{root}\"\nlisten = [\"127.0.0.1:0\"]\n{key} = {value}\n")).unwrap();
        let o = ddftpd_output(&["--config", conf.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{key}: {o:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains(key), "{o:?}");
    }
    // Started good, reloaded with 0: still serving at full speed.
    std::fs::write(&conf, format!("root = \"{root}\"\nlisten = [\"127.0.0.1:0\"]\nrate-limit = \"50MB\"\n")).unwrap();
    let mut cmd = Command::new(bin("ddftpd"));
    cmd.arg("--config").arg(&conf);
    let m = Mirror::command(cmd, false);
    std::fs::write(&conf, format!("root = \"{root}\"\nlisten = [\"127.0.0.1:0\"]\nrate-limit = \"fast\"\n")).unwrap();
    m.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    let out = f.out("f");
    ddftp(&["get", "f", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q", "--retries", "0"], 0);
    assert!(std::fs::read(&out).unwrap() == data);
}

/// Item 15: a connection count past what the server can hold is a usage
/// error, not a panic once listening.
#[test]
fn item15_a_huge_max_connections_is_refused_up_front() {
    let f = Fixture::new();
    let r = f.root();
    let o = ddftpd_output(&[
        "--root",
        r.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--max-connections",
        "9223372036854775807",
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("listening"), "{o:?}");
}

/// Item 14: a refused request naming a file whose name holds a newline
/// cannot forge a log line, in text or JSON logs.
#[test]
fn item14_a_name_with_a_newline_cannot_forge_a_log_line() {
    let f = Fixture::new();
    let name = "x\nFORGED-LINE INFO ddftpd::access: served client=6.6.6.6:1";
    random_file(&f.root().join(name), 1000, 14);
    for format in ["text", "json"] {
        let log = f.out(&format!("log-{format}"));
        let m = Mirror::logged(&f.root(), &["--log-format", format], &log);
        let start = ddftp_proto::Request::Start {
            stream: 0,
            path: name.into(),
            block_size: 4096,
            first: 99,
            last: 99,
            dir: ddftp_proto::Direction::Increment,
        };
        let mut s = raw(&m.addr, &[start]);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut reply = vec![];
        let _ = s.read_to_end(&mut reply);
        std::thread::sleep(Duration::from_millis(300));
        drop(m);
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(text.contains("FORGED-LINE"), "the refusal was logged: {text}");
        assert!(!text.lines().any(|l| l.starts_with("FORGED-LINE")), "{format}: a forged line:\n{text}");
    }
}

/// The watches ddftpd's inotify descriptor holds.
fn watches(pid: u32) -> usize {
    for fd in std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().flatten() {
        if std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy().contains("inotify")) {
            let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy()));
            return info.unwrap().lines().filter(|l| l.starts_with("inotify")).count();
        }
    }
    panic!("no inotify descriptor");
}

/// Items 11 and 20: a watched directory moved out of the root and replaced
/// by a symlink to `/usr` takes the watcher nowhere outside; renames of a
/// large watched tree cost no walk and no warning.
#[test]
fn item11_item20_the_watcher_stays_beneath_the_root() {
    let f = Fixture::new();
    let root = f.root();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    for i in 0..500 {
        std::fs::create_dir_all(root.join(format!("t0/d{}/e{i}", i % 20))).unwrap();
    }
    let log = f.out("log");
    let m = Mirror::logged(&root, &[], &log);
    std::thread::sleep(Duration::from_millis(500));
    let before = watches(m.child.id());
    assert_eq!(before, 1 + 2 + 1 + 20 + 500, "root, a, a/b, t0, t0/d*, their e*");
    let away = f.out("away");
    std::fs::rename(root.join("a"), &away).unwrap();
    std::os::unix::fs::symlink("/usr", root.join("a")).unwrap();
    std::fs::create_dir(away.join("new")).unwrap();
    std::fs::create_dir(away.join("b/new2")).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(watches(m.child.id()), before - 2, "a and a/b are no longer watched, nothing outside is");
    for i in 1..=20 {
        std::fs::rename(root.join(format!("t{}", i - 1)), root.join(format!("t{i}"))).unwrap();
    }
    std::fs::write(root.join("t20/d3/e3/new.bin"), b"new").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(watches(m.child.id()), before - 2, "renamed directories keep their watches");
    drop(m);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("WARN"), "{text}");
}
