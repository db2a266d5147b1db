//! `--via-ssh`: a session's connections carried inside ssh, for a host
//! whose firewall lets only ssh through. A second ssh to the host forwards
//! a port on this host's 127.0.0.1 to the remote ddftpd's port there
//! (`ssh -L`, running `cat` there until this process ends: the tunnel is
//! open once its first line, [`READY`], comes); the connections go to that local port, TLS still pinned
//! to the session's certificate and each proving its token (the tunnel is
//! a path, not a trust). Slower than direct connections: every byte is
//! encrypted by ssh as well, and all connections share its one TCP stream
//! and its channel windows.

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::{Announced, Line, SshError, SshMirror};

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

/// What the remote command says once it runs: ssh has bound the local
/// port by then (it sets up `-L` before it opens the session).
const READY: &str = "ddftp-tunnel";

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
        let mut cmd = m.forward(rsh, &format!("127.0.0.1:{port}:{there}:{}", a.port), READY);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).process_group(0);
        let program = cmd.get_program().to_string_lossy().into_owned();
        let mut child = cmd.spawn().map_err(|source| SshError::Spawn { program, source })?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take().expect("piped"));
        let mut t = Tunnel { child, stdin };
        let left = deadline.saturating_duration_since(Instant::now());
        match super::first_line(stdout, left, &AtomicBool::new(false)) {
            Line::Said(line) if line.trim_end() == READY => {
                let here = IpAddr::V4(Ipv4Addr::LOCALHOST);
                return Ok((t, Announced { host: here, port, ..a.clone() }));
            }
            Line::Said(line) => return Err(SshError::Tunnel(format!("the host said {:?}", line.trim_end()))),
            Line::Ended | Line::Cancelled => {
                why = format!("ssh -L ended ({}); its message is above", ended(&mut t.child))
            }
            Line::Late => return Err(SshError::Timeout(within.as_secs())),
        }
    }
    Err(SshError::Tunnel(why))
}

fn ended(c: &mut Child) -> String {
    c.wait().map_or_else(|e| e.to_string(), |s| s.to_string())
}

/// A port on 127.0.0.1 nothing listens on now.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}
