//! A real OpenSSH server on 127.0.0.1 for the ssh mirror tests: its own
//! host key, a client key made here and authorized, no password. `rsh()`
//! is the `-e` that reaches it without prompts.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A running sshd, stopped when dropped.
pub struct Sshd {
    child: Child,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Sshd {
    pub fn start() -> Sshd {
        let sshd = Path::new("/usr/sbin/sshd");
        assert!(sshd.exists(), "the ssh tests need sshd (apt-get install openssh-server; .ci/run installs it)");
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        for key in ["host", "id"] {
            let ok = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(d.join(key))
                .status()
                .expect("run ssh-keygen");
            assert!(ok.success(), "ssh-keygen failed");
        }
        std::fs::copy(d.join("id.pub"), d.join("authorized_keys")).expect("authorize the key");
        // Privilege separation wants this directory (root's sshd).
        let _ = std::fs::create_dir_all("/run/sshd");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let conf = format!(
            "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\nAuthorizedKeysFile {d}/authorized_keys\n\
             StrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n\
             PermitRootLogin prohibit-password\nPidFile {d}/sshd.pid\nLogLevel ERROR\n",
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), conf).expect("write sshd_config");
        let child = Command::new(sshd)
            .arg("-D")
            .arg("-f")
            .arg(d.join("sshd_config"))
            .arg("-E")
            .arg(d.join("sshd.log"))
            .spawn()
            .expect("start sshd");
        let s = Sshd { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "sshd did not listen: {}", s.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    /// The remote shell that logs in with the test's key, no prompts.
    pub fn rsh(&self) -> String {
        let d = self.dir.path().display();
        format!(
            "ssh -F /dev/null -i {d}/id -o UserKnownHostsFile={d}/known_hosts -o StrictHostKeyChecking=accept-new \
             -o BatchMode=yes -o LogLevel=ERROR"
        )
    }

    /// A mirror URL for `dir` on this server.
    pub fn url(&self, dir: &Path) -> String {
        format!("ssh://127.0.0.1:{}{}", self.port, dir.display())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `ddftpd session` processes serving `dir` (their pids), as `ps` lists them.
pub fn sessions_serving(dir: &Path) -> Vec<String> {
    let out = Command::new("ps").args(["-eo", "pid,args"]).output().expect("run ps");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("ddftpd session") && l.contains(&*dir.to_string_lossy()))
        .map(|l| l.trim().to_string())
        .collect()
}

/// Waits up to 10 s for every `ddftpd session` serving `dir` to end;
/// returns those still running.
pub fn gone(dir: &Path) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = sessions_serving(dir);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
