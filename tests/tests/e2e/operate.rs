//! Operating a real ddftpd: its metrics page (read by a real Prometheus
//! text-format parser), SIGTERM with a grace period, SIGHUP reloading
//! `--allow`, the config file under the flags, background indexing of a
//! file published while it runs, and `ddftp ls` against `find`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// Every sample of `page` as parsed by the Python `prometheus_client`
/// text-format parser: lines `NAME{LABELS} VALUE`. Fails if it does not parse.
fn parse_with_prometheus_client(page: &str) -> Vec<(String, String, f64)> {
    let script = "import sys, json\n\
        from prometheus_client.parser import text_string_to_metric_families\n\
        out = []\n\
        for fam in text_string_to_metric_families(sys.stdin.read()):\n\
        \x20   for s in fam.samples:\n\
        \x20       out.append([s.name, json.dumps(s.labels, sort_keys=True), s.value])\n\
        print(json.dumps(out))\n";
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child.stdin.take().unwrap().write_all(page.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "prometheus_client could not parse the page (pip install prometheus_client): {}\n{page}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Vec<(String, String, f64)> = serde_json::from_slice(&out.stdout).unwrap();
    v
}

fn sample(samples: &[(String, String, f64)], name: &str, labels: &str) -> f64 {
    samples
        .iter()
        .find(|(n, l, _)| n == name && l == labels)
        .unwrap_or_else(|| panic!("no sample {name}{labels} in {samples:?}"))
        .2
}

#[test]
fn the_metrics_page_parses_and_counts_the_bytes_sent() {
    let f = Fixture::new();
    random_file(&f.root().join("m.bin"), 24 << 20, 41);
    random_file(&f.root().join("n.bin"), 3 << 20, 42);
    let m = Mirror::start(&f.root(), &["--metrics", "127.0.0.1:0"]);
    let metrics = m.metrics.clone().unwrap();
    let mut received = 0.0;
    for name in ["m.bin", "n.bin"] {
        let out = f.out(name);
        let o = ddftp(&["get", name, "-m", &m.addr, "-o", out.to_str().unwrap(), "--json", "-q"], 0);
        let j = json(&o);
        received += j["bytes"].as_f64().unwrap() + j["duplicate_bytes"].as_f64().unwrap();
    }
    // The connections' ends (and their access lines) come just after the client exits.
    std::thread::sleep(Duration::from_millis(300));
    let page = scrape(&metrics);
    let samples = parse_with_prometheus_client(&page);
    assert_eq!(sample(&samples, "ddftpd_sent_bytes_total", "{}"), received, "{page}");
    assert_eq!(received, f64::from((24 << 20) + (3 << 20)));
    assert_eq!(sample(&samples, "ddftpd_client_sent_bytes", r#"{"client": "127.0.0.1"}"#), received);
    assert_eq!(sample(&samples, "ddftpd_streams", "{}"), 0.0, "no stream left counted");
    assert_eq!(sample(&samples, "ddftpd_connections", r#"{"state": "streaming"}"#), 0.0);
    assert!(sample(&samples, "ddftpd_connections_accepted_total", "{}") >= 2.0);
    assert!(sample(&samples, "ddftpd_streams_started_total", "{}") >= 2.0);
    assert_eq!(sample(&samples, "ddftpd_refused_total", r#"{"cause": "not_allowed"}"#), 0.0);
    // Anything but GET /metrics is not answered with the page.
    let mut s = TcpStream::connect(&metrics).unwrap();
    s.write_all(b"GET /secret HTTP/1.1\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 404"), "{reply}");
}

#[test]
fn sigterm_lets_a_running_download_finish_within_the_grace() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("g.bin"), 24 << 20, 43);
    let log = f.out("ddftpd.log");
    let mut m = Mirror::logged(&f.root(), &["--rate-limit", "8MB", "--grace", "20"], &log);
    let out = f.out("g.bin");
    let mut get = Command::new(bin("ddftp"))
        .args(["get", "g.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q"])
        .spawn()
        .unwrap();
    // 24 MiB at 8 MB/s takes about 3 s: stop the server 1 s in.
    std::thread::sleep(Duration::from_secs(1));
    let asked = Instant::now();
    m.signal(libc::SIGTERM);
    let got = get.wait().unwrap();
    assert!(got.success(), "the download finished after SIGTERM: {got}");
    assert_eq!(std::fs::read(&out).unwrap(), data);
    let stopped = m.child.wait().unwrap();
    let took = asked.elapsed();
    assert!(stopped.success(), "ddftpd exits 0 after draining: {stopped}");
    assert!(took < Duration::from_secs(20), "within the grace: {took:?}");
    assert!(took > Duration::from_millis(500), "it did wait for the transfer: {took:?}");
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(log.contains("SIGTERM"), "{log}");
    assert!(log.contains("outcome=\"ok\""), "each connection ended well: {log}");
}

#[test]
fn past_the_grace_sigterm_closes_the_connections_and_the_client_can_resume() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("s.bin"), 16 << 20, 44);
    let mut m = Mirror::start(&f.root(), &["--rate-limit", "2MB", "--grace", "1"]);
    let out = f.out("s.bin");
    let get = Command::new(bin("ddftp"))
        .args(["get", "s.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q", "--retries", "0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let asked = Instant::now();
    m.signal(libc::SIGTERM);
    assert!(m.child.wait().unwrap().success());
    let took = asked.elapsed();
    assert!(took < Duration::from_secs(4), "closed soon after the 1 s grace: {took:?}");
    let o = get.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "the only mirror left: {}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("shutting down"), "{}", String::from_utf8_lossy(&o.stderr));
    // What came is kept: a restarted server finishes it.
    let m2 = Mirror::start(&f.root(), &[]);
    ddftp(&["get", "s.bin", "-m", &m2.addr, "-o", out.to_str().unwrap(), "-q"], 0);
    assert_eq!(std::fs::read(&out).unwrap(), data);
}

#[test]
fn sighup_reloads_allow_from_the_config_file() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("h.bin"), 1 << 20, 45);
    let conf = f.out("ddftpd.toml");
    // Only a network we are not in, at first.
    std::fs::write(&conf, format!("root = {:?}\nallow = [\"10.99.0.0/16\"]\n", f.root())).unwrap();
    let mut cmd = Command::new(bin("ddftpd"));
    cmd.args(["--config", conf.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
    let m = Mirror::command(cmd, false);
    let out = f.out("h.bin");
    let o = ddftp(&["get", "h.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q", "--retries", "0"], 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not allowed"), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(&conf, format!("root = {:?}\nallow = [\"10.99.0.0/16\", \"127.0.0.0/8\"]\n", f.root())).unwrap();
    m.signal(libc::SIGHUP);
    // The reload is asynchronous: the same server serves us within a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let o = Command::new(bin("ddftp"))
            .args(["get", "h.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q", "--retries", "0"])
            .output()
            .unwrap();
        if o.status.success() {
            break;
        }
        assert!(Instant::now() < deadline, "still refused after SIGHUP: {}", String::from_utf8_lossy(&o.stderr));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read(&out).unwrap(), data);
    // A broken file on the next SIGHUP keeps the rules that work.
    std::fs::write(&conf, "root = [oops").unwrap();
    m.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_file(&out).unwrap();
    ddftp(&["get", "h.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q"], 0);
}

#[test]
fn the_config_file_and_the_flags_combine_as_documented() {
    let f = Fixture::new();
    let other = f.out("other-root");
    std::fs::create_dir_all(&other).unwrap();
    random_file(&other.join("only-in-other"), 1000, 46);
    random_file(&f.root().join("only-in-root"), 1000, 47);
    let conf = f.out("ddftpd.toml");
    // The file names a root and a token; the flag names another root: the
    // flag wins, the token (not given as a flag) comes from the file.
    std::fs::write(f.out("token"), "s3cret-token-of-the-file\n").unwrap();
    std::fs::write(
        &conf,
        format!("root = {:?}\ntoken-file = \"token\"\nlisten = [\"127.0.0.1:0\"]\nrate-limit = \"50MB\"\n", other),
    )
    .unwrap();
    let mut cmd = Command::new(bin("ddftpd"));
    cmd.args(["--config", conf.to_str().unwrap(), "--root"]).arg(f.root()).stderr(Stdio::piped());
    let mut m = Mirror::command(cmd, false);
    let out = f.out("x");
    let tok = f.out("token");
    ddftp(
        &[
            "get",
            "only-in-root",
            "-m",
            &m.addr,
            "-o",
            out.to_str().unwrap(),
            "-q",
            "--token-file",
            tok.to_str().unwrap(),
        ],
        0,
    );
    let o = ddftp(
        &[
            "get",
            "only-in-other",
            "-m",
            &m.addr,
            "-o",
            out.to_str().unwrap(),
            "-q",
            "--token-file",
            tok.to_str().unwrap(),
            "--retries",
            "0",
        ],
        7,
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such file"), "{}", String::from_utf8_lossy(&o.stderr));
    ddftp(&["get", "only-in-root", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q", "--retries", "0"], 1);
    m.kill();
    // The banner says what the merged settings are.
    let mut err = String::new();
    m.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let root = f.root().canonicalize().unwrap();
    assert!(err.contains(&format!("serving {}", root.display())), "{err}");
    assert!(err.contains("auth: token") && err.contains("rate limit: 47.68 MiB/s"), "{err}");
    // A key the server does not know is an error naming it, exit 2.
    std::fs::write(&conf, "root = \"/\"\nrate_limit = 5\n").unwrap();
    let o = Command::new(bin("ddftpd")).args(["--config", conf.to_str().unwrap()]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("rate_limit"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_file_published_while_serving_is_indexed_before_its_first_client() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root().join("incoming")).unwrap();
    let m = Mirror::start(&f.root(), &["--metrics", "127.0.0.1:0", "--rescan", "0"]);
    let metrics = m.metrics.clone().unwrap();
    // Published as a publisher would: written aside, then moved in; and
    // one written in place into a directory made after the start.
    let staged = f.out("staged.bin");
    let data = random_file(&staged, 32 << 20, 48);
    std::fs::rename(&staged, f.root().join("incoming/new.bin")).unwrap();
    std::fs::create_dir_all(f.root().join("later/deeper")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let data2 = random_file(&f.root().join("later/deeper/two.bin"), 8 << 20, 49);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let s = parse_with_prometheus_client(&scrape(&metrics));
        if sample(&s, "ddftpd_indexed_background_total", "{}") >= 2.0 {
            break;
        }
        assert!(Instant::now() < deadline, "not indexed in the background: {s:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    for (name, want) in [("incoming/new.bin", &data), ("later/deeper/two.bin", &data2)] {
        let out = f.out("copy");
        ddftp(&["get", name, "-m", &m.addr, "-o", out.to_str().unwrap(), "-q"], 0);
        assert_eq!(&std::fs::read(&out).unwrap(), want);
        std::fs::remove_file(&out).unwrap();
    }
    let s = parse_with_prometheus_client(&scrape(&metrics));
    assert_eq!(
        sample(&s, "ddftpd_index_lookups_total", r#"{"source": "computed"}"#),
        0.0,
        "no client waited for a digest to be computed: {s:?}"
    );
    assert!(sample(&s, "ddftpd_index_lookups_total", r#"{"source": "memory"}"#) >= 2.0);
}

/// `find ROOT -mindepth 1 -printf '%P\n'`, sorted.
fn find(root: &Path, under: &str) -> Vec<String> {
    let o = Command::new("find").arg(root.join(under)).args(["-mindepth", "1", "-printf", "%P\\n"]).output().unwrap();
    assert!(o.status.success());
    let mut v: Vec<String> = String::from_utf8(o.stdout).unwrap().lines().map(String::from).collect();
    v.sort();
    v
}

#[test]
fn ls_lists_exactly_what_find_lists_under_the_root() {
    let f = Fixture::new();
    let r = f.root();
    for d in ["a/b/c", "empty", "with space/ünïcode", "d.dir"] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    for (i, p) in ["top.bin", "a/x", "a/b/y", "a/b/c/z", "with space/ünïcode/f g", "d.dir/.hidden"].iter().enumerate()
    {
        random_file(&r.join(p), 100 * i, i as u64);
    }
    std::os::unix::fs::symlink("a/x", r.join("link")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", r.join("a/outside")).unwrap();
    // The digest index outside the root, so find and the mirror see one tree.
    let idx = f.out("index");
    let m = Mirror::start(&r, &["--index", idx.to_str().unwrap()]);
    let ls = |args: &[&str]| {
        let o = ddftp(args, 0);
        let mut v: Vec<String> = String::from_utf8(o.stdout).unwrap().lines().map(String::from).collect();
        v.sort();
        v
    };
    assert_eq!(ls(&["ls", "-R", &m.addr]), find(&r, ""));
    assert_eq!(ls(&["ls", "-R", &format!("{}:a", m.addr)]), find(&r, "a"));
    assert_eq!(ls(&["ls", "-RU", &format!("ddftp://{}/with space", m.addr)]), find(&r, "with space"));
    // -l: mode, size, time, path; --json: one object a line.
    let long = ls(&["ls", "-l", &format!("{}:a/b", m.addr)]);
    assert!(long.iter().any(|l| l.starts_with("-rw") && l.ends_with(" y") && l.contains(" 200 ")), "{long:?}");
    assert!(long.iter().any(|l| l.starts_with("drwx") && l.ends_with(" c")), "{long:?}");
    let o = ddftp(&["ls", "-R", "--json", &m.addr], 0);
    let mut paths = vec![];
    for line in String::from_utf8(o.stdout).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v["path"] == "link" {
            assert_eq!(v["kind"], "symlink");
        }
        if v["path"] == "a/b/c/z" {
            assert_eq!((v["kind"].as_str(), v["size"].as_u64()), (Some("file"), Some(300)));
        }
        paths.push(v["path"].as_str().unwrap().to_string());
    }
    paths.sort();
    assert_eq!(paths, find(&r, ""));
    // A path outside the root or not there: a clear error, not a listing.
    let o = ddftp(&["ls", &format!("{}:../etc", m.addr)], 1);
    assert!(String::from_utf8_lossy(&o.stderr).contains("not allowed"), "{}", String::from_utf8_lossy(&o.stderr));
    ddftp(&["ls", &format!("{}:nope", m.addr)], 7);
}

#[test]
fn a_batch_jobs_metrics_file_parses_and_says_what_it_moved() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.root().join("tree")).unwrap();
    random_file(&f.root().join("tree/one.bin"), 3 << 20, 51);
    random_file(&f.root().join("tree/two.bin"), 1 << 20, 52);
    let m = Mirror::start(&f.root(), &[]);
    let prom = f.out("ddftp.prom");
    let p = prom.to_str().unwrap();
    let out = f.out("one.bin");
    ddftp(&["get", "tree/one.bin", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q", "--metrics-file", p], 0);
    let s = parse_with_prometheus_client(&std::fs::read_to_string(&prom).unwrap());
    let job = r#"{"command": "get", "what": "tree/one.bin"}"#;
    assert_eq!(sample(&s, "ddftp_exit_code", job), 0.0);
    assert_eq!(sample(&s, "ddftp_bytes", job), f64::from(3 << 20));
    let mirror = format!(r#"{{"command": "get", "mirror": "{}", "what": "tree/one.bin"}}"#, m.addr);
    assert_eq!(sample(&s, "ddftp_mirror_bytes", &mirror), f64::from(3 << 20));

    let dest = f.out("dest");
    ddftp(&["archive", "tree", "-m", &m.addr, "--dest", dest.to_str().unwrap(), "-q", "--metrics-file", p], 0);
    let s = parse_with_prometheus_client(&std::fs::read_to_string(&prom).unwrap());
    let job = r#"{"command": "archive", "what": "tree"}"#;
    assert_eq!(sample(&s, "ddftp_exit_code", job), 0.0);
    assert_eq!(sample(&s, "ddftp_bytes", job), f64::from(4 << 20));
    assert_eq!(sample(&s, "ddftp_files", job), 2.0);

    // A failed job still writes its exit code.
    ddftp(&["get", "nope", "-m", &m.addr, "-o", out.to_str().unwrap(), "-q", "--retries", "0", "--metrics-file", p], 7);
    let s = parse_with_prometheus_client(&std::fs::read_to_string(&prom).unwrap());
    assert_eq!(sample(&s, "ddftp_exit_code", r#"{"command": "get", "what": "nope"}"#), 7.0);
}
