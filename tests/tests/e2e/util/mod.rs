//! Fixtures: real `ddftpd` processes on 127.0.0.1, real files, and the
//! `ddftp` binary run as a user would run it.

#![allow(dead_code)] // each test file uses its own subset

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;

use rand::{RngCore, SeedableRng};

pub mod capture;
pub mod cut;
pub mod fake_mirror;
pub mod nginx;
pub mod pki;
pub mod proxy;
pub mod sshd;
pub mod tree;

/// The directory holding the workspace's binaries for this test profile.
/// `cargo test` only rebuilds binaries of packages that have integration
/// tests, so the binaries are brought up to date here, once per run.
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test exe path");
        let dir = exe.parent().and_then(Path::parent).expect("target/<profile>").to_path_buf();
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args([
            "build",
            "--quiet",
            "--bins",
            "--manifest-path",
            concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml"),
        ]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        assert!(cmd.status().expect("run cargo build").success(), "building the binaries failed");
        dir
    })
}

pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// A running `ddftpd`, killed when dropped.
pub struct Mirror {
    pub child: Child,
    pub addr: String,
    /// Where its metrics page is (`--metrics`), if asked for.
    pub metrics: Option<String>,
}

impl Mirror {
    pub fn start(root: &Path, extra: &[&str]) -> Mirror {
        Mirror::spawn_with(Mirror::quiet(), root, extra, Stdio::inherit())
    }

    /// Like [`start`](Self::start), with the server's stderr going to `log`.
    pub fn logged(root: &Path, extra: &[&str], log: &Path) -> Mirror {
        Mirror::spawn(root, extra, std::fs::File::create(log).expect("create log").into())
    }

    /// A server running as nobody when the tests run as root, so that
    /// file permissions apply to it.
    pub fn as_nobody(root: &Path) -> Mirror {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]).arg(bin("ddftpd"));
        Mirror::spawn_with(if is_root() { cmd } else { Command::new(bin("ddftpd")) }, root, &[], Stdio::inherit())
    }

    fn spawn(root: &Path, extra: &[&str], stderr: Stdio) -> Mirror {
        Mirror::spawn_with(Command::new(bin("ddftpd")), root, extra, stderr)
    }

    /// `ddftpd`, its banner and access lines left out of the test output
    /// (warnings stay); [`logged`](Self::logged) servers log everything.
    fn quiet() -> Command {
        let mut cmd = Command::new(bin("ddftpd"));
        cmd.env("DDFTP_LOG", "warn");
        cmd
    }

    /// A server listening at `addr` (a restart on the port of one killed).
    pub fn at(root: &Path, addr: &str, extra: &[&str]) -> Mirror {
        Mirror::spawn_listening(Mirror::quiet(), root, addr, extra, Stdio::inherit())
    }

    fn spawn_with(cmd: Command, root: &Path, extra: &[&str], stderr: Stdio) -> Mirror {
        Mirror::spawn_listening(cmd, root, "127.0.0.1:0", extra, stderr)
    }

    fn spawn_listening(mut cmd: Command, root: &Path, listen: &str, extra: &[&str], stderr: Stdio) -> Mirror {
        let mut child = cmd
            .arg("--root")
            .arg(root)
            .args(["--listen", listen])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start ddftpd");
        let (addr, metrics) = read_addresses(&mut child, extra.contains(&"--metrics"));
        Mirror { child, addr, metrics }
    }

    /// A server started by `cmd` as it is (its own flags, a config file).
    pub fn command(mut cmd: Command, metrics: bool) -> Mirror {
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("start ddftpd");
        let (addr, metrics) = read_addresses(&mut child, metrics);
        Mirror { child, addr, metrics }
    }

    /// Sends `sig` (SIGTERM, SIGHUP...) to the server.
    pub fn signal(&self, sig: i32) {
        // SAFETY: a plain kill(2) of our own child.
        assert_eq!(unsafe { libc::kill(self.child.id() as i32, sig) }, 0, "signal ddftpd");
    }

    pub fn with_rate(root: &Path, rate: &str) -> Mirror {
        Mirror::start(root, &["--rate-limit", rate])
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads ddftpd's first stdout lines: the (first) listening address, and
/// the metrics address when `--metrics` was given.
fn read_addresses(child: &mut Child, metrics: bool) -> (String, Option<String>) {
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read ddftpd's first line");
    let addr = line
        .trim()
        .strip_prefix("ddftpd listening on ")
        .unwrap_or_else(|| panic!("unexpected ddftpd output {line:?}"))
        .to_string();
    let metrics = metrics.then(|| {
        line.clear();
        out.read_line(&mut line).expect("read ddftpd's metrics line");
        line.trim()
            .strip_prefix("ddftpd metrics on http://")
            .and_then(|a| a.strip_suffix("/metrics"))
            .unwrap_or_else(|| panic!("unexpected ddftpd output {line:?}"))
            .to_string()
    });
    (addr, metrics)
}

pub fn mirrors_arg(ms: &[&Mirror]) -> String {
    ms.iter().map(|m| m.addr.clone()).collect::<Vec<_>>().join(",")
}

/// A file of `size` pseudo-random bytes (seeded, so failures reproduce).
pub fn random_file(path: &Path, size: usize, seed: u64) -> Vec<u8> {
    let mut data = vec![0u8; size];
    rand::rngs::StdRng::seed_from_u64(seed).fill_bytes(&mut data);
    std::fs::write(path, &data).expect("write test file");
    data
}

/// Runs `ddftp ARGS` and returns its output; `expect` says which exit code
/// the test needs, and a mismatch prints everything about the run.
pub fn ddftp(args: &[&str], expect: i32) -> Output {
    let mut cmd = Command::new(bin("ddftp"));
    // The servers are on 127.0.0.1: a proxy of the machine's is not for them.
    for v in ["http_proxy", "https_proxy", "HTTPS_PROXY"] {
        cmd.env_remove(v);
    }
    let out = cmd.args(args).stdin(Stdio::null()).output().expect("run ddftp");
    if out.status.code() != Some(expect) {
        panic!(
            "ddftp {args:?}: exit {:?}, expected {expect}\n--- stdout\n{}\n--- stderr\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

pub fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| o.stdout.starts_with(b"0\n")).unwrap_or(false)
}

/// A test whose needs this machine does not meet fails, saying what it
/// needs: it does not pass having tested nothing. CI runs the tests as
/// root with what `.ci/run` installs; elsewhere, leave such a test out
/// with `--skip NAME`.
pub fn need(ok: bool, what: &str) {
    assert!(ok, "this test needs {what} (CI runs as root with what .ci/run installs; else --skip it)");
}

/// A temp dir with a served root inside.
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        let f = Fixture { dir: tempfile::tempdir().expect("tempdir") };
        std::fs::create_dir(f.root()).expect("mkdir root");
        f
    }
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }
    pub fn out(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// SHA-256 of `data`, in hex.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(data))
}

/// A small tmpfs mounted on a directory, unmounted when dropped.
pub struct SmallDisk(pub PathBuf);

impl SmallDisk {
    /// A tmpfs of `size` at `at`; the test fails where this process may
    /// not mount (not root, or no mount allowed in this container).
    pub fn mount(at: &Path, size: &str) -> SmallDisk {
        std::fs::create_dir_all(at).unwrap();
        let opt = format!("size={size}");
        let ok = Command::new("mount").args(["-t", "tmpfs", "-o", &opt, "tmpfs"]).arg(at).status();
        need(ok.is_ok_and(|s| s.success()), "to mount a tmpfs (root)");
        SmallDisk(at.to_owned())
    }

    pub fn grow(&self, size: &str) {
        let opt = format!("remount,size={size}");
        assert!(Command::new("mount").args(["-o", &opt]).arg(&self.0).status().unwrap().success());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Starts a `ddftp recv` (`cmd`, its stderr taken here) and reads the
/// addresses it says it receives on: the child, those addresses (for
/// `send --links`), and the rest of its stderr.
pub fn receiving(cmd: &mut Command) -> (Child, String, std::io::BufReader<std::process::ChildStderr>) {
    let mut child = cmd.stderr(Stdio::piped()).spawn().expect("start ddftp recv");
    let mut err = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut err, &mut line).expect("read recv's first line");
    let links = line.trim().strip_prefix("ddftp: receiving on ").unwrap_or_else(|| panic!("{line:?}")).to_string();
    (child, links, err)
}

/// The most memory process `pid` has held so far (VmHWM), in bytes; 0
/// once it is gone.
pub fn peak_memory(pid: u32) -> u64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return 0 };
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// The metrics page at `addr`, fetched as a scraper would.
pub fn scrape(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to the metrics address");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").expect("an HTTP reply");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    body.to_string()
}

/// The value of the sample `name` (without labels) on the metrics page
/// `page`, read as the text format writes it (`NAME VALUE`).
pub fn metric(page: &str, name: &str) -> f64 {
    page.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {name} on the metrics page:\n{page}"))
}
