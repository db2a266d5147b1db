//! `--via-ssh`: a session's connections carried inside ssh, for a host
//! whose firewall lets only ssh through. The ssh that starts the session
//! is made a control master (`ControlMaster=yes`, its socket in a private
//! directory of ours); once the session names its port, a forward of a
//! port on this host's 127.0.0.1 to it is added through that master (`ssh
//! -O forward -L`): no second login. The connections go to that local
//! port, TLS still pinned to the session's certificate and each proving
//! its token (the tunnel is a path, not a trust). The socket is removed
//! once the forward is in place; the forward ends with the session's ssh. Slower than direct connections: every byte is
//! encrypted by ssh as well, and all connections share its one TCP stream
//! and its channel windows.

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::{Announced, SshError, SshMirror};

/// The control master's socket: in a directory only this user can enter,
/// made afresh (never one that was there), removed when dropped.
pub struct Tunnel {
    dir: PathBuf,
}

impl Tunnel {
    /// A place for a master's socket.
    pub fn new() -> Result<Tunnel, SshError> {
        use std::os::unix::fs::DirBuilderExt;
        let name: String = rand::random::<[u8; 8]>().iter().map(|b| format!("{b:02x}")).collect();
        let dir = std::env::temp_dir().join(format!("ddftp-ssh-{name}"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| SshError::Tunnel(format!("no directory for ssh's control socket ({}): {e}", dir.display())))?;
        Ok(Tunnel { dir })
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("c")
    }

    /// The options that make the session's ssh the master.
    pub fn master(&self) -> Vec<String> {
        let path = self.socket().display().to_string();
        ["-o", "ControlMaster=yes", "-o", &format!("ControlPath={path}"), "-o", "ControlPersist=no"]
            .map(String::from)
            .to_vec()
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(self.socket());
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Times a forward is tried (a local port taken between choosing it and
/// the master's bind makes it fail: another port then).
const TRIES: usize = 3;

/// Forwards a free port on this host's 127.0.0.1 to the port `a` names
/// on `m`, through `t`'s master, within `within`; returns where to
/// connect instead (127.0.0.1 and that port).
pub fn open(m: &SshMirror, rsh: &[String], t: &Tunnel, a: &Announced, within: Duration) -> Result<Announced, SshError> {
    // The remote ddftpd listens on every address of the family ssh came
    // in by: its loopback address of that family is one of them.
    let there = match a.host {
        IpAddr::V4(_) => "127.0.0.1",
        IpAddr::V6(_) => "[::1]",
    };
    let deadline = Instant::now() + within;
    let mut why = String::new();
    for _ in 0..TRIES {
        let port = free_port().map_err(|e| SshError::Tunnel(format!("no free local port: {e}")))?;
        let spec = format!("127.0.0.1:{port}:{there}:{}", a.port);
        let socket = t.socket().display().to_string();
        let mut cmd = m.control(rsh, &["-S", &socket, "-O", "forward", "-L", &spec]);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd.spawn().map_err(|source| SshError::Spawn { program, source })?;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Ok(s),
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(SshError::Timeout(within.as_secs()));
                }
                Err(e) => break Err(e),
            }
        };
        let said = child.stderr.take().map(|mut e| {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut std::io::Read::take(&mut e, 4096), &mut s);
            s
        });
        match status {
            Ok(s) if s.success() => return Ok(Announced { host: IpAddr::V4(Ipv4Addr::LOCALHOST), port, ..a.clone() }),
            Ok(s) => why = format!("ssh -O forward ended ({s}): {}", said.unwrap_or_default().trim()),
            Err(e) => why = format!("ssh -O forward: {e}"),
        }
    }
    Err(SshError::Tunnel(why))
}

/// A port on 127.0.0.1 nothing listens on now.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}
