//! `--via-ssh`: a session's connections carried inside ssh, for a host
//! whose firewall lets only ssh through. A second ssh to the host forwards
//! a port on this host's 127.0.0.1 to the remote ddftpd's port there
//! (`ssh -L`, running `cat` there until this process ends); the connections go to that local port, TLS still pinned
//! to the session's certificate and each proving its token (the tunnel is
//! a path, not a trust). Slower than direct connections: every byte is
//! encrypted by ssh as well, and all connections share its one TCP stream
//! and its channel windows.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, Instant};

use super::{Announced, SshError, SshMirror};

/// The forwarding ssh: the tunnel lives as long as this does. Its
/// standard input is ours alone, as the session's is: when this process
/// ends, however, the remote command reading it ends, and ssh with it.
/// Dropped, its whole process group is stopped (an `-e` wrapper script
/// and what it started too).
pub struct Tunnel {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: a signal to the group this child leads (made so at spawn).
            unsafe { libc::kill(-pid, libc::SIGTERM) };
        }
        let _ = self.child.wait();
    }
}

/// Times a tunnel is tried (a local port taken between choosing it and
/// ssh's bind makes ssh give up: another port then).
const TRIES: usize = 3;

/// Opens a tunnel to the port `a` names on `m`, within `within`; returns
/// it and where to connect instead (127.0.0.1 and the local port).
pub fn open(m: &SshMirror, rsh: &[String], a: &Announced, within: Duration) -> Result<(Tunnel, Announced), SshError> {
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
        let mut cmd = m.forward(rsh, &format!("127.0.0.1:{port}:{there}:{}", a.port));
        cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::inherit()).process_group(0);
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd.spawn().map_err(|source| SshError::Spawn { program, source })?;
        let stdin = child.stdin.take();
        let mut t = Tunnel { child, stdin };
        let here = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
        // Open once the local port takes a connection (ssh binds it only
        // after logging in). The probe opens one channel to the remote
        // ddftpd, which sees a connection end before its handshake.
        loop {
            if TcpStream::connect_timeout(&here, Duration::from_secs(1)).is_ok() {
                return Ok((t, Announced { host: here.ip(), port, ..a.clone() }));
            }
            match t.child.try_wait() {
                Ok(Some(status)) => {
                    why = format!("ssh -L ended ({status}); its message is above");
                    break;
                }
                Ok(None) if Instant::now() >= deadline => return Err(SshError::Timeout(within.as_secs())),
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
    Err(SshError::Tunnel(why))
}

/// A port on 127.0.0.1 nothing listens on now.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}
