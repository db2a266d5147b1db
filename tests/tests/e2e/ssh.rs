//! Mirrors over ssh, against a real OpenSSH server on 127.0.0.1: `ddftp
//! get -m ssh://HOST/DIR` starts ddftpd there for this command alone; the
//! data is byte-exact, mixed with ddftpd and nginx mirrors; nothing keeps
//! running there after success, failure or a killed client; a client
//! without the session's token is refused.

use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::ssh_rsync::files_below;
use crate::util::nginx::Nginx;
use crate::util::sshd::{gone, Sshd};
use crate::util::*;

/// `ddftp get` flags that reach `sshd` and run this build's ddftpd there.
fn over(sshd: &Sshd) -> Vec<String> {
    vec!["-e".into(), sshd.rsh(), "--remote-ddftpd".into(), bin("ddftpd").display().to_string()]
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Mirrors that sent bytes, in a `--json` report.
fn contributors(j: &serde_json::Value) -> usize {
    let mut names: Vec<&str> = j["producers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["bytes"].as_u64().unwrap_or(0) > 0)
        .filter_map(|p| p["mirror"].as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names.len()
}

#[test]
fn get_from_two_ssh_mirrors_is_byte_exact_and_leaves_nothing_running() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let (a, b) = (f.root().join("a"), f.root().join("b"));
    std::fs::create_dir_all(a.join("d")).unwrap();
    std::fs::create_dir_all(b.join("d")).unwrap();
    let data = random_file(&a.join("d/f.bin"), 24 << 20, 61);
    std::fs::copy(a.join("d/f.bin"), b.join("d/f.bin")).unwrap();
    let out = f.out("got");
    let mut v = vec!["get".into(), "d/f.bin".into(), "-m".into(), format!("{},{}", sshd.url(&a), sshd.url(&b))];
    v.extend(over(&sshd));
    // Long enough (3 s) for the mirror that answers second to join.
    v.extend([
        "-o".into(),
        out.display().to_string(),
        "--json".into(),
        "-q".into(),
        "--limit-rate".into(),
        "8MiB".into(),
    ]);
    let run = ddftp(&args(&v), 0);
    assert!(std::fs::read(&out).unwrap() == data, "the output differs");
    assert_eq!(contributors(&json(&run)), 2, "both ssh mirrors took part");
    assert_eq!(gone(&a), Vec::<String>::new(), "a remote ddftpd is still running");
    assert_eq!(gone(&b), Vec::<String>::new(), "a remote ddftpd is still running");
    // Its digests went to the user's cache, never into the served tree.
    assert!(!a.join(".ddftpd-index").exists() && !b.join(".ddftpd-index").exists());
}

#[test]
fn get_from_ssh_ddftpd_and_nginx_mirrors_mixed_is_byte_exact() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.bin"), 32 << 20, 62);
    let ddftpd = Mirror::start(&f.root(), &[]);
    let nginx = Nginx::serve(&f.root(), None);
    let out = f.out("got");
    let mirrors = format!("{},{},{}", sshd.url(&f.root()), ddftpd.addr, nginx.url);
    let mut v = vec!["get".into(), "f.bin".into(), "-m".into(), mirrors];
    v.extend(over(&sshd));
    v.extend(["-o".into(), out.display().to_string(), "--json".into(), "-q".into()]);
    let run = ddftp(&args(&v), 0);
    assert!(std::fs::read(&out).unwrap() == data, "the output differs");
    assert_eq!(contributors(&json(&run)), 3, "every mirror took part");
    assert_eq!(gone(&f.root()), Vec::<String>::new());
}

#[test]
fn a_failed_get_and_a_missing_directory_leave_nothing_running() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    random_file(&f.root().join("f.bin"), 1 << 20, 63);
    // The file is not there: the transfer fails, the session ends.
    let mut v = vec!["get".into(), "nothing.bin".into(), "-m".into(), sshd.url(&f.root())];
    v.extend(over(&sshd));
    v.extend(["-o".into(), f.out("x").display().to_string(), "-q".into()]);
    let out = Command::new(bin("ddftp")).args(&v).stdin(Stdio::null()).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(gone(&f.root()), Vec::<String>::new());
    // The directory is not there: the remote ddftpd says so, over ssh.
    let missing = f.root().join("no-such-dir");
    let mut v = vec!["get".into(), "f.bin".into(), "-m".into(), sshd.url(&missing)];
    v.extend(over(&sshd));
    v.extend(["-o".into(), f.out("y").display().to_string()]);
    let out = Command::new(bin("ddftp")).args(&v).stdin(Stdio::null()).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    // No mirror could start: a transfer that failed (1), not a usage error.
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("cannot serve") && said.contains("no-such-dir"), "{said}");
    assert!(said.contains("remote ddftpd did not answer"), "{said}");
    // No ddftpd there: said so, with what to do.
    let mut v = vec!["get".into(), "f.bin".into(), "-m".into(), sshd.url(&f.root()), "-e".into(), sshd.rsh()];
    v.extend(["--remote-ddftpd".into(), "/nonexistent/ddftpd".into(), "-o".into(), f.out("z").display().to_string()]);
    let out = Command::new(bin("ddftp")).args(&v).stdin(Stdio::null()).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("--remote-ddftpd PATH"), "{said}");
}

#[test]
fn a_killed_client_leaves_nothing_running() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    random_file(&f.root().join("f.bin"), 64 << 20, 64);
    let mut v = vec!["get".into(), "f.bin".into(), "-m".into(), sshd.url(&f.root())];
    v.extend(over(&sshd));
    v.extend(["-o".into(), f.out("x").display().to_string(), "-q".into(), "--limit-rate".into(), "4MiB".into()]);
    let mut client = Command::new(bin("ddftp")).args(&v).stdin(Stdio::null()).spawn().unwrap();
    let started = std::time::Instant::now();
    while crate::util::sshd::sessions_serving(&f.root()).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(10), "the remote ddftpd never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(client.try_wait().unwrap().is_none(), "the transfer ended before it was killed");
    client.kill().unwrap();
    client.wait().unwrap();
    assert_eq!(gone(&f.root()), Vec::<String>::new(), "killing the client left the remote ddftpd running");
}

/// The session's port, to a client that did not start it: without TLS it
/// is told to use TLS; with the pinned certificate but no token it is
/// asked for one and refused when it asks for a file.
#[test]
fn a_client_without_the_token_is_refused() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    random_file(&f.root().join("f.bin"), 1 << 20, 65);
    let rsh: Vec<String> = sshd.rsh().split_whitespace().map(String::from).collect();
    let remote = format!("'{}' session -- '{}'", bin("ddftpd").display(), f.root().display());
    let mut session = Command::new(&rsh[0])
        .args(&rsh[1..])
        .args(["-p", &sshd.port.to_string(), "--", "127.0.0.1", &remote])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(session.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let f5: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(f5[..2], ["ddftpd-session", "1"], "{line}");
    let port: u16 = f5[3].parse().unwrap();
    let mut pin = [0u8; 32];
    for (i, b) in pin.iter_mut().enumerate() {
        *b = u8::from_str_radix(&f5[5][2 * i..2 * i + 2], 16).unwrap();
    }
    // Plaintext: refused.
    let mut plain = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut hello = bytes::BytesMut::new();
    ddftp_proto::frame::Request::Hello { version: ddftp_proto::frame::PROTOCOL_VERSION }.encode(&mut hello);
    plain.write_all(&hello).unwrap();
    let mut got = vec![];
    let _ = plain.read_to_end(&mut got);
    assert!(String::from_utf8_lossy(&got).contains("TLS only"), "{got:?}");
    // TLS to the right certificate, no token: a challenge, then nothing.
    use ddnet::tls::rustls;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let conn = rustls::ClientConnection::new(ddnet::pinned::client_config(pin), name).unwrap();
    let sock = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, sock);
    tls.write_all(&hello).unwrap();
    let mut buf = bytes::BytesMut::new();
    let reply = read_reply(&mut tls, &mut buf);
    assert!(matches!(reply, Some(ddftp_proto::frame::Reply::Challenge { .. })), "{reply:?}");
    let mut stat = bytes::BytesMut::new();
    ddftp_proto::frame::Request::Stat { path: "f.bin".into(), manifest: false }.encode(&mut stat);
    let _ = tls.write_all(&stat);
    let reply = read_reply(&mut tls, &mut buf);
    assert!(
        !matches!(reply, Some(ddftp_proto::frame::Reply::Stat { .. })),
        "a client without the token was told about a file: {reply:?}"
    );
    drop(session.stdin.take());
    session.wait().unwrap();
    assert_eq!(gone(&f.root()), Vec::<String>::new());
}

/// The next reply on `s`, or None once it closed or failed.
fn read_reply(s: &mut impl Read, buf: &mut bytes::BytesMut) -> Option<ddftp_proto::frame::Reply> {
    loop {
        if let Ok(Some(r)) = ddftp_proto::frame::Reply::decode(buf) {
            return Some(r);
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// What of a tree is compared with rsync's copy of it (ours is compared
/// with the source itself, whole): rsync cannot go past PATH_MAX, and it
/// leaves some special files and symlinks of this tree with the time it
/// made them, run after run on this machine.
fn rsync_view(
    m: std::collections::BTreeMap<Vec<u8>, crate::util::tree::Seen>,
) -> std::collections::BTreeMap<Vec<u8>, crate::util::tree::Seen> {
    m.into_iter()
        .filter(|(k, _)| !k.starts_with(b"long"))
        .map(|(k, mut v)| {
            if ["type 1 ", "type 2 ", "type 6 ", "type 12 ", "type 14 "].iter().any(|t| v.line.starts_with(t)) {
                if let Some(at) = v.line.find(" mtime ") {
                    let end = v.line[at + 7..].find(' ').map_or(v.line.len(), |e| at + 7 + e);
                    v.line.replace_range(at..end, "");
                }
            }
            (k, v)
        })
        .collect()
}

/// A server, and the awkward tree (every entry kind) at ROOT/src; whether
/// the tests run as root.
fn awkward_over_ssh() -> (Sshd, Fixture, std::path::PathBuf, bool) {
    let sshd = Sshd::start();
    let root = is_root();
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    crate::archive_kinds::awkward(&src, root);
    (sshd, f, src, root)
}

/// rsync's form, `ddftp archive HOST:DIR DEST`, of the awkward tree (every
/// entry kind): DEST/DIR as `rsync -aHAXS --numeric-ids -e ssh` makes it.
#[test]
fn archive_host_dir_dest_copies_the_awkward_tree_as_rsync_over_ssh_does() {
    use crate::util::tree::{assert_equal, scan, Look};
    let (sshd, f, src, root) = awkward_over_ssh();
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    let remote = format!("127.0.0.1:{}", src.display());
    let ddftpd = bin("ddftpd").display().to_string();
    let r = ddftp(
        &[
            "archive",
            &remote,
            ours.to_str().unwrap(),
            "-e",
            &rsh,
            "--remote-ddftpd",
            &ddftpd,
            "-X",
            "-H",
            "--json",
            "-q",
        ],
        0,
    );
    assert_eq!(json(&r)["hard_links"].as_u64(), Some(2), "{}", String::from_utf8_lossy(&r.stdout));
    let look = Look { owners: root, setid: root, devices: root };
    let got = scan(&ours.join("src"), look);
    assert_equal(&scan(&src, look), &got);
    let o = Command::new("rsync")
        .args(["-aHAXS", "--numeric-ids", "--exclude", "/src/long", "-e", &rsh, &remote])
        .arg(&theirs)
        .output()
        .expect("rsync (CI installs it)");
    assert!(o.status.success(), "rsync: {}", String::from_utf8_lossy(&o.stderr));
    assert_equal(&rsync_view(scan(&theirs.join("src"), look)), &rsync_view(got));
    assert_eq!(gone(&src), Vec::<String>::new());
}

/// Pushing, rsync's other direction: `ddftp archive SRC HOST:DIR` of the
/// awkward tree makes DIR/SRC as `rsync -aHAXS --numeric-ids -e ssh SRC
/// HOST:DIR` does; nothing keeps running on either side.
#[test]
fn archive_src_host_dir_pushes_the_awkward_tree_as_rsync_over_ssh_does() {
    use crate::util::tree::{assert_equal, scan, Look};
    let (sshd, f, src, root) = awkward_over_ssh();
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    std::fs::create_dir(&ours).unwrap();
    std::fs::create_dir(&theirs).unwrap();
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    let ddftp_bin = bin("ddftp").display().to_string();
    let to = format!("127.0.0.1:{}", ours.display());
    let r = ddftp(
        &["archive", src.to_str().unwrap(), &to, "-e", &rsh, "--remote-ddftp", &ddftp_bin, "-X", "-H", "--json", "-q"],
        0,
    );
    assert_eq!(json(&r)["hard_links"].as_u64(), Some(2), "{}", String::from_utf8_lossy(&r.stdout));
    let look = Look { owners: root, setid: root, devices: root };
    let got = scan(&ours.join("src"), look);
    assert_equal(&scan(&src, look), &got);
    let o = Command::new("rsync")
        .args(["-aHAXS", "--numeric-ids", "--exclude", "/src/long", "-e", &rsh])
        .arg(&src)
        .arg(format!("127.0.0.1:{}", theirs.display()))
        .output()
        .expect("rsync (CI installs it)");
    assert!(o.status.success(), "rsync: {}", String::from_utf8_lossy(&o.stderr));
    assert_equal(&rsync_view(scan(&theirs.join("src"), look)), &rsync_view(got));
    let left = Command::new("pgrep").args(["-f", "session-stdin"]).output().unwrap();
    assert!(left.stdout.is_empty(), "the remote archive is still running: {}", String::from_utf8_lossy(&left.stdout));
    // A host that cannot be reached: ssh's failure, exit 1.
    let bad = "ssh -F /dev/null -p 1 -o BatchMode=yes";
    let out =
        Command::new(bin("ddftp")).args(["archive", src.to_str().unwrap(), &to, "-e", bad, "-q"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("ssh could not connect or log in"), "{said}");
}

/// rsync's form with a file: `ddftp archive HOST:DIR/FILE DEST` puts it
/// in DEST (an existing directory) as rsync does, not in DEST/FILE/.
#[test]
fn archive_host_file_dest_puts_the_file_in_dest() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let data = random_file(&f.root().join("f.bin"), 300_000, 66);
    let (ours, theirs) = (f.out("ours"), f.out("theirs"));
    std::fs::create_dir(&ours).unwrap();
    std::fs::create_dir(&theirs).unwrap();
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    let remote = format!("127.0.0.1:{}", f.root().join("f.bin").display());
    let ddftpd = bin("ddftpd").display().to_string();
    ddftp(&["archive", &remote, ours.to_str().unwrap(), "-e", &rsh, "--remote-ddftpd", &ddftpd, "-q"], 0);
    let o = Command::new("rsync").args(["-a", "-e", &rsh, &remote]).arg(&theirs).status().expect("rsync");
    assert!(o.success());
    assert!(std::fs::read(ours.join("f.bin")).unwrap() == data, "DEST/f.bin");
    assert!(std::fs::read(theirs.join("f.bin")).unwrap() == data);
}

/// `--via-ssh`, where only ssh gets through: an ssh (the test's `-e`
/// wrapper) whose remote ddftpd's line names an address nothing reaches
/// (TEST-NET-1), as a firewall in front of the remote port would leave it.
/// Straight connections fail; through the tunnel the copy is byte-exact
/// from both mirrors, and no forwarding ssh or remote ddftpd is left.
#[test]
fn via_ssh_carries_the_connections_where_only_ssh_gets_through() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let (a, b) = (f.root().join("a"), f.root().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let data = random_file(&a.join("f.bin"), 12 << 20, 62);
    std::fs::copy(a.join("f.bin"), b.join("f.bin")).unwrap();
    let walled = f.root().join("walled-ssh");
    std::fs::write(
        &walled,
        format!("#!/bin/sh\n{} \"$@\" | sed -u 's/^ddftpd-session 1 [^ ]*/ddftpd-session 1 192.0.2.1/'\n", sshd.rsh()),
    )
    .unwrap();
    std::os::unix::fs::PermissionsExt::set_mode(&mut std::fs::metadata(&walled).unwrap().permissions(), 0o755);
    run_ok(Command::new("chmod").arg("755").arg(&walled));
    let mirrors = format!("{},{}", sshd.url(&a), sshd.url(&b));
    let ddftpd = bin("ddftpd").display().to_string();
    let get = |out: &std::path::Path, extra: &[&str], code: i32| {
        let mut v = vec!["get", "f.bin", "-m", &mirrors, "-e", walled.to_str().unwrap(), "--remote-ddftpd", &ddftpd];
        v.extend(["-o", out.to_str().unwrap(), "--connect-timeout", "2", "--retries", "0", "--json", "-q"]);
        v.extend(extra);
        ddftp(&v, code)
    };
    let direct = f.out("direct");
    let failed = get(&direct, &[], 1);
    assert!(!direct.exists(), "{}", String::from_utf8_lossy(&failed.stderr));
    let out = f.out("tunnelled");
    // Long enough (3 s) for the mirror that answers second to join.
    let run = get(&out, &["--via-ssh", "--limit-rate", "4MiB"], 0);
    assert!(std::fs::read(&out).unwrap() == data, "the output differs");
    // Nothing but the copy reached the remote ddftpds (no probe they
    // would warn of on the user's terminal).
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(!said.contains("WARN"), "{said}");
    assert_eq!(contributors(&json(&run)), 2, "both ssh mirrors took part");
    assert_eq!(gone(&a), Vec::<String>::new(), "a remote ddftpd is still running");
    let tunnels = || Command::new("pgrep").args(["-f", "ControlMaster=yes"]).output().unwrap().stdout;
    assert!(tunnels().is_empty(), "a tunnel is still open: {}", String::from_utf8_lossy(&tunnels()));
    // A client killed mid-way (no drop runs): its tunnels end too.
    let mut v = vec!["get", "f.bin", "-m", &mirrors, "-e", walled.to_str().unwrap(), "--remote-ddftpd", &ddftpd];
    let killed = f.out("killed");
    v.extend(["-o", killed.to_str().unwrap(), "--via-ssh", "--limit-rate", "2MB", "-q"]);
    let mut child = Command::new(bin("ddftp")).args(&v).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let began = std::time::Instant::now();
    while tunnels().is_empty() && began.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!tunnels().is_empty(), "the tunnels opened");
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let gone_by = std::time::Instant::now() + Duration::from_secs(10);
    while !tunnels().is_empty() && std::time::Instant::now() < gone_by {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(tunnels().is_empty(), "a killed client's tunnel is still open: {}", String::from_utf8_lossy(&tunnels()));
    assert_eq!(gone(&a), Vec::<String>::new(), "a remote ddftpd is still running");
}

fn run_ok(c: &mut Command) {
    assert!(c.status().expect("run").success(), "{c:?}");
}

/// A push with `--via-ssh`: the remote end connects back through a port
/// ssh forwards (`ssh -R`), not to this host's address, which the test's
/// `-e` wrapper makes one nothing reaches (TEST-NET-1) in the line it
/// passes on. The tree lands whole; nothing is left running.
#[test]
fn a_push_via_ssh_connects_back_inside_ssh() {
    let sshd = Sshd::start();
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    for (i, p) in ["d/x", "y"].iter().enumerate() {
        random_file(&src.join(p), 300_000 + i, 120 + i as u64);
    }
    let walled = f.root().join("walled-ssh");
    let rsh = format!("{} -p {}", sshd.rsh(), sshd.port);
    // ssh itself is the child (exec): it ends when the push does, and sed
    // with the standard input the push then closes.
    let script =
        format!("#!/bin/bash\nexec {rsh} \"$@\" < <(sed -u 's/^ddftpd-session 1 - /ddftpd-session 1 192.0.2.1 /')\n");
    std::fs::write(&walled, script).unwrap();
    run_ok(Command::new("chmod").arg("755").arg(&walled));
    let ours = f.out("ours");
    std::fs::create_dir(&ours).unwrap();
    let ddftp_bin = bin("ddftp").display().to_string();
    let to = format!("127.0.0.1:{}", ours.display());
    let e = walled.to_str().unwrap();
    ddftp(&["archive", src.to_str().unwrap(), &to, "-e", e, "--remote-ddftp", &ddftp_bin, "--via-ssh", "-q"], 0);
    assert_eq!(files_below(&ours.join("src")), files_below(&src));
    let left = Command::new("pgrep").arg("-f").arg(format!("session-stdin.*{}", ours.display())).output().unwrap();
    assert!(left.stdout.is_empty(), "the remote archive is still running: {}", String::from_utf8_lossy(&left.stdout));
}
