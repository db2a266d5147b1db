//! Mirrors reached over ssh, with no daemon running there: `ddftp` runs
//! `ssh [USER@]HOST ddftpd session DIR` (the user's ssh, keys, agent and
//! `~/.ssh/config`; `-e`/`--rsh` and `--remote-ddftpd` as rsync's `-e`
//! and `--rsync-path`). The remote ddftpd listens on a free port and
//! answers one line on the ssh channel: the address the ssh client
//! reached, the port, a token made for this session and its certificate's
//! SHA-256. The data then goes over direct TCP connections to that port,
//! TLS pinned to that certificate, each proving the token: a mirror as any
//! other, so DDOps pairs and several NICs work. The remote ddftpd ends
//! when the ssh session does; the session ends when this process does
//! (the ssh client's standard input is ours alone: closed, however we
//! end, it ends the remote command).
//!
//! Nothing from the user reaches a shell unquoted: the host and user are
//! ssh's arguments after `--` (and may not look like options), the
//! remote command line is built of single-quoted words.

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ddftp_proto::Endpoint;

use crate::session::{Own, Peer, Secure};

pub use ddftp_proto::session::GREETING;

/// `ssh://[USER@]HOST[:PORT]/DIR`, or rsync's `[USER@]HOST:DIR`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SshMirror {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
    /// The directory on the host: absolute, or from the home directory.
    pub dir: String,
}

impl std::fmt::Display for SshMirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ssh://")?;
        if let Some(u) = &self.user {
            write!(f, "{u}@")?;
        }
        match self.host.contains(':') {
            true => write!(f, "[{}]", self.host)?,
            false => f.write_str(&self.host)?,
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        match self.dir.starts_with('/') {
            true => f.write_str(&self.dir),
            false => write!(f, "/~/{}", self.dir),
        }
    }
}

/// Whether a host or user name can be given to ssh as it is: not empty,
/// not an option, no white space, control characters, or characters
/// ssh's config expansion or a shell would read.
fn plain_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':' | '%'))
}

impl SshMirror {
    /// Parses `ssh://[USER@]HOST[:PORT]/DIR` (`/~/DIR` or a DIR with no
    /// leading slash after the host's: from the home directory).
    pub fn parse_url(s: &str) -> Result<SshMirror, String> {
        let rest =
            s.strip_prefix("ssh://").ok_or_else(|| format!("{s:?}: an ssh mirror is ssh://[USER@]HOST[:PORT]/DIR"))?;
        let (auth, dir) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/~"),
        };
        let dir = match dir.strip_prefix("/~") {
            Some("") => ".".to_string(),
            Some(d) if d.starts_with('/') => d.trim_start_matches('/').to_string(),
            _ => dir.to_string(),
        };
        let (user, hostport) = match auth.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_string()), h),
            None => (None, auth),
        };
        let (host, port) = match hostport.strip_prefix('[') {
            Some(v6) => {
                let (h, after) = v6.split_once(']').ok_or_else(|| format!("{s:?}: an IPv6 host ends with ]"))?;
                (h.to_string(), after.strip_prefix(':'))
            }
            None => match hostport.split_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (hostport.to_string(), None),
            },
        };
        let port = match port {
            None => None,
            Some(p) => {
                Some(p.parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| format!("{s:?}: {p:?} is not a port"))?)
            }
        };
        SshMirror { user, host, port, dir }.checked(s)
    }

    /// Parses rsync's `[USER@]HOST:DIR` (DIR from the home directory
    /// unless absolute).
    pub fn parse_rsync(s: &str) -> Result<SshMirror, String> {
        let (auth, dir) = s.split_once(':').ok_or_else(|| format!("{s:?}: expected [USER@]HOST:DIR"))?;
        let (user, host) = match auth.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_string()), h.to_string()),
            None => (None, auth.to_string()),
        };
        let dir = if dir.is_empty() { ".".to_string() } else { dir.to_string() };
        SshMirror { user, host, port: None, dir }.checked(s)
    }

    fn checked(self, s: &str) -> Result<SshMirror, String> {
        if !plain_name(&self.host) {
            return Err(format!("{s:?}: {:?} is not a host name ssh can be given", self.host));
        }
        if let Some(u) = self.user.as_deref().filter(|u| !plain_name(u) || u.contains(':')) {
            return Err(format!("{s:?}: {u:?} is not a user name ssh can be given"));
        }
        if self.dir.contains('\0') || self.dir.chars().any(char::is_control) {
            return Err(format!("{s:?}: the directory has control characters"));
        }
        Ok(self)
    }

    /// The command that starts the remote ddftpd: `rsh` (ssh and its
    /// options), ssh options of ours (`opts`), the port and user, `--`,
    /// the host, and the remote command as single-quoted words.
    pub fn command(&self, rsh: &[String], opts: &[&str], remote_ddftpd: &str) -> Command {
        self.remote_with(rsh, opts, &[remote_ddftpd, "session", "--", &self.dir])
    }

    /// The command that runs `words` on the host (each single-quoted).
    pub fn remote(&self, rsh: &[String], words: &[&str]) -> Command {
        self.remote_with(rsh, &[], words)
    }

    /// [`SshMirror::remote`] with ssh options of ours (`opts`, before `--`).
    pub fn remote_with(&self, rsh: &[String], opts: &[&str], words: &[&str]) -> Command {
        let mut c = self.ssh(rsh);
        c.args(opts);
        let remote = words.iter().map(|w| quote(w)).collect::<Vec<_>>().join(" ");
        c.arg("--").arg(&self.host).arg(remote);
        c
    }

    /// A command to a running control master for the host (`opts`:
    /// `-S PATH -O ...`; [`tunnel`]), no remote command.
    pub fn control(&self, rsh: &[String], opts: &[&str]) -> Command {
        let mut c = self.ssh(rsh);
        c.args(opts).arg("--").arg(&self.host);
        c
    }

    /// `rsh` (ssh and its options) with this mirror's port and user.
    fn ssh(&self, rsh: &[String]) -> Command {
        let (program, opts) = match rsh.split_first() {
            Some((p, o)) => (p.as_str(), o),
            None => ("ssh", &[][..]),
        };
        let mut c = Command::new(program);
        c.args(opts);
        if let Some(p) = self.port {
            c.arg("-p").arg(p.to_string());
        }
        if let Some(u) = &self.user {
            c.arg("-l").arg(u);
        }
        c
    }
}

/// `s` as one word to a POSIX shell: single-quoted, a single quote inside
/// closed, escaped and opened again.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Splits `-e`'s command into words as a shell would for plain words and
/// quotes (no expansion): `ssh -i 'my key' -o X=1`.
pub fn split_rsh(s: &str) -> Result<Vec<String>, String> {
    let (mut words, mut cur, mut quote, mut started) = (vec![], String::new(), None, false);
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => (quote, started) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (None | Some('"'), '\\') => match chars.next() {
                Some(n) => (cur.push(n), started = true).0,
                None => return Err(format!("{s:?}: ends with a backslash")),
            },
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut cur));
                    started = false;
                }
            }
            (_, c) => {
                cur.push(c);
                started = true;
            }
        }
    }
    if quote.is_some() {
        return Err(format!("{s:?}: a quote is not closed"));
    }
    if started {
        words.push(cur);
    }
    if words.is_empty() {
        return Err("-e/--rsh: an empty command".into());
    }
    Ok(words)
}

/// What a remote ddftpd said: where to connect and how.
#[derive(Clone, PartialEq, Eq)]
pub struct Announced {
    pub host: IpAddr,
    pub port: u16,
    pub token: Arc<[u8]>,
    pub pin: [u8; 32],
}

impl std::fmt::Debug for Announced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announced").field("host", &self.host).field("port", &self.port).finish_non_exhaustive()
    }
}

/// Parses the remote ddftpd's line. What it names is checked as anything
/// from a mirror: a port that is not 0, a token of 16 to 128 visible
/// characters, a fingerprint of 64 hexadecimal digits.
pub fn parse_announce(line: &str) -> Result<Announced, String> {
    let rest = line.trim_end().strip_prefix(GREETING).ok_or("it did not answer as a ddftpd session does")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let [host, port, token, pin] = f[..] else { return Err("its answer has the wrong number of fields".into()) };
    let host: IpAddr = host.parse().map_err(|_| "its answer names no address")?;
    let port = port.parse::<u16>().ok().filter(|&p| p > 0).ok_or("its answer names no port")?;
    if !(16..=128).contains(&token.len()) || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("its answer has no usable token".into());
    }
    let mut pin_bytes = [0u8; 32];
    if pin.len() != 64 || !pin.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("its answer has no certificate fingerprint".into());
    }
    for (i, b) in pin_bytes.iter_mut().enumerate() {
        *b = u8::from_str_radix(&pin[2 * i..2 * i + 2], 16).map_err(|_| "bad fingerprint")?;
    }
    Ok(Announced { host, port, token: Arc::from(token.as_bytes()), pin: pin_bytes })
}

/// Why an ssh mirror could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SshError {
    #[error("cannot run {program}: {source}")]
    Spawn { program: String, source: std::io::Error },
    #[error("ssh could not connect or log in (its message is above); check that `ssh HOST` works without a prompt")]
    Login,
    #[error("ddftpd is not on the remote PATH: install it there, or name it with --remote-ddftpd PATH")]
    NoDdftpd,
    #[error("the remote ddftpd did not answer ({status}); its message is above")]
    Ended { status: String },
    #[error("no answer from ssh within {0} s (a password or host key prompt? use keys, an agent, or -e 'ssh -o BatchMode=yes')")]
    Timeout(u64),
    #[error("the remote ddftpd answered, but {0}")]
    Announce(String),
    /// The command ended (done, failed) before this mirror answered.
    #[error("not started: the command ended before it answered")]
    Cancelled,
    #[error("the ssh tunnel (--via-ssh) did not open: {0}")]
    Tunnel(String),
}

/// A running ssh session with a remote ddftpd: the remote end lives as
/// long as this does (dropping it closes ssh's standard input and waits a
/// moment for ssh to end, then stops it).
pub struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
}

impl Session {
    /// Closes ssh's standard input: the remote ddftpd begins to end (and
    /// with its ssh, any `--via-ssh` forward). Several sessions hung up
    /// first end together when dropped after.
    pub fn hang_up(&mut self) {
        drop(self.stdin.take());
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.hang_up();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `m`'s remote ddftpd (over `rsh`, running `remote_ddftpd`) and
/// returns the session and the mirror to connect to: TLS pinned to the
/// session's certificate, its token; `via_ssh`: through a tunnel inside
/// ssh ([`tunnel`]). Waits at most `within` for each answer; once
/// `cancel` is set (the command ends), gives up at once and stops ssh.
pub fn start(
    m: &SshMirror,
    rsh: &[String],
    remote_ddftpd: &str,
    within: Duration,
    via_ssh: bool,
    cancel: &AtomicBool,
) -> Result<(Session, Peer), SshError> {
    let began = Instant::now();
    // `--via-ssh`: this ssh is also the master its forward goes through.
    let tunnel = via_ssh.then(tunnel::Tunnel::new).transpose()?;
    let opts = tunnel.as_ref().map(tunnel::Tunnel::master).unwrap_or_default();
    let mut cmd = m.command(rsh, &opts.iter().map(String::as_str).collect::<Vec<_>>(), remote_ddftpd);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd.spawn().map_err(|source| SshError::Spawn { program, source })?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take().expect("piped");
    let mut session = Session { child, stdin };
    let line = match first_line(stdout, within, cancel) {
        Line::Said(l) => l,
        Line::Ended => {
            return Err(match session.child.wait() {
                // ssh's own failures; a shell's "command not found".
                Ok(s) if s.code() == Some(255) => SshError::Login,
                Ok(s) if s.code() == Some(127) => SshError::NoDdftpd,
                Ok(s) => SshError::Ended { status: s.to_string() },
                Err(e) => SshError::Ended { status: e.to_string() },
            });
        }
        Line::Late => return Err(SshError::Timeout(within.as_secs())),
        Line::Cancelled => {
            // Nobody waits for this mirror any more: not even for ssh to
            // end politely.
            let _ = session.child.kill();
            return Err(SshError::Cancelled);
        }
    };
    let mut a = parse_announce(&line).map_err(SshError::Announce)?;
    tracing::debug!(mirror = %m, after = ?began.elapsed(), "the remote ddftpd answered");
    if let Some(t) = tunnel {
        a = tunnel::open(m, rsh, &t, &a, within)?;
        // The forward is in place: the master needs its socket no more,
        // and nothing is left here even if this process is killed.
        drop(t);
    }
    Ok((session, peer(a, m.to_string())))
}

/// What came of waiting for a remote command's first line.
enum Line {
    Said(String),
    /// It ended (or failed) before writing one.
    Ended,
    /// Nothing within the time given.
    Late,
    /// Given up on by the caller.
    Cancelled,
}

/// How often a wait for a first line looks whether it was given up on.
const CANCEL_EVERY: Duration = Duration::from_millis(20);

/// The first line (at most 1 KiB) a remote command writes, read on a
/// thread of its own so that a silent ssh can be given up on after
/// `within`, or as soon as `cancel` is set.
fn first_line(stdout: std::process::ChildStdout, within: Duration, cancel: &AtomicBool) -> Line {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let r = std::io::Read::take(BufReader::new(stdout), 1024).read_line(&mut line);
        let _ = tx.send(r.map(|_| line));
    });
    let deadline = Instant::now() + within;
    loop {
        if cancel.load(Ordering::Acquire) {
            return Line::Cancelled;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(CANCEL_EVERY)) {
            Ok(Ok(l)) if !l.is_empty() => return Line::Said(l),
            Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Line::Ended,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if left.is_zero() => return Line::Late,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
}

/// The mirror a session's line names: TLS pinned to its certificate, its
/// token, going by `name`.
pub fn peer(a: Announced, name: String) -> Peer {
    let endpoint = Endpoint { host: a.host.to_string(), port: a.port };
    let own = Own { token: a.token, name: name.into() };
    Peer { endpoint, tls: Some(Secure(ddnet::pinned::connector(a.pin))), own: Some(own) }
}

mod starting;
#[cfg(test)]
mod tests;
pub mod tunnel;

pub use starting::{starting, Answer, Starting};
