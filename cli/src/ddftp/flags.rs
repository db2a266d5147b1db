//! The flag groups `get` shares with `archive`, `pipe`, `ls` and
//! `simulate` (mirrors, retries, the web, TLS, how to move), and the
//! parsers of their values: one meaning for a flag in every command.

use std::path::{Path, PathBuf};

use clap::Args;
use ddftp_proto::frame::{MAX_BLOCK_SIZE, MIN_BLOCK_SIZE};
use ddftp_proto::units::{parse_size, HumanBytes};
use ddftp_proto::{parse_endpoint, Endpoint};

use super::ssh::Now;
use ddftp::progress::Bar;
use ddftp::scheduler::Config;
use ddftp::session::Secure;
use ddftp::ssh::SshMirror;
use ddftp::transfer::{GetSpec, Peer};

/// When and how often a lost mirror (or link) is asked again: one
/// policy ([`ddftp::retry`]) for `get`, `archive` and `send`.
#[derive(Debug, Clone, Copy, Args)]
pub struct RetryOpt {
    /// A mirror (or link) that failed, stalled, was busy or did not answer
    /// is asked again every 0.1 s for 2 s, then this many times more, the
    /// waits doubling from --retry-wait up to 30 s; when it answers again
    /// it rejoins the transfer. With every mirror (or link) gone, the
    /// transfer waits through these retries before it gives up (`recv`
    /// waits as long as a sender with these flags tries). 0: never.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub retries: u32,
    /// The wait before the first retry after the quick ones (2 s of them).
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS", value_parser = parse_seconds)]
    pub retry_wait: f64,
}

impl RetryOpt {
    pub fn policy(&self) -> ddftp::retry::RetryPolicy {
        ddftp::retry::RetryPolicy {
            retries: self.retries,
            first_wait: std::time::Duration::from_secs_f64(self.retry_wait),
        }
    }
}

/// What requests to web mirrors carry: credentials and headers.
#[derive(Debug, Clone, Args)]
pub struct WebOpt {
    /// Credentials for the web mirrors named (HTTP Basic); without :PASS
    /// the password is asked on the terminal. Never sent to another
    /// server a redirect leads to.
    #[arg(long, value_name = "USER[:PASS]")]
    pub user: Option<String>,
    /// Read web mirrors' credentials from this .netrc (default: ~/.netrc
    /// if there is one).
    #[arg(long, value_name = "FILE")]
    pub netrc_file: Option<PathBuf>,
    /// Send this header with every request to a web mirror (repeatable).
    #[arg(long = "header", short = 'H', value_name = "'Name: value'", value_parser = ddftp::http::auth::header)]
    pub headers: Vec<(String, String)>,
    /// The User-Agent sent to web mirrors (default: ddftp/VERSION).
    #[arg(long, value_name = "TEXT", value_parser = ddftp::http::auth::user_agent)]
    pub user_agent: Option<String>,
}

impl WebOpt {
    /// What every request to a web mirror carries.
    pub fn asking(&self) -> Result<std::sync::Arc<ddftp::http::auth::Asking>, String> {
        use ddftp::http::auth;
        let user = match self.user.as_deref().map(auth::user) {
            None => None,
            Some((user, Some(password))) => Some(auth::Credentials { user, password }),
            Some((user, None)) => {
                let password = ask_password(&format!("password for {user}: "))
                    .map_err(|e| format!("--user {user}: give USER:PASS, or run where a terminal can ask ({e})"))?;
                Some(auth::Credentials { user, password })
            }
        };
        let netrc = match &self.netrc_file {
            Some(f) => {
                let text = std::fs::read_to_string(f).map_err(|e| format!("--netrc-file {}: {e}", f.display()))?;
                warn_if_others_can_read(f);
                auth::netrc(&text)
            }
            None => std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".netrc"))
                .and_then(|p| std::fs::read_to_string(&p).ok().inspect(|_| warn_if_others_can_read(&p)))
                .map(|t| auth::netrc(&t))
                .unwrap_or_default(),
        };
        Ok(std::sync::Arc::new(auth::Asking {
            user_agent: self.user_agent.clone(),
            headers: self.headers.clone(),
            user,
            netrc,
        }))
    }
}

/// A `.netrc` that others may read holds passwords they can read too: it
/// is used, with a warning (once a run), as ssh warns of a key.
fn warn_if_others_can_read(f: &Path) {
    use std::os::unix::fs::PermissionsExt;
    static WARNED: std::sync::Once = std::sync::Once::new();
    let Ok(m) = std::fs::metadata(f) else { return };
    if m.permissions().mode() & 0o077 != 0 {
        WARNED.call_once(|| {
            eprintln!(
                "ddftp: warning: {}: others can read or write this file of passwords (mode {:o}): chmod 600 it",
                ddftp::progress::terminal_safe(&f.display().to_string()),
                m.permissions().mode() & 0o777
            )
        });
    }
}

/// Asks for a password on the terminal, without echo.
fn ask_password(prompt: &str) -> std::io::Result<String> {
    use std::io::{BufRead, Write};
    use std::os::fd::AsRawFd;
    let tty = std::fs::OpenOptions::new().read(true).write(true).open("/dev/tty")?;
    let fd = tty.as_raw_fd();
    // SAFETY: termios of an open terminal descriptor, restored below.
    let mut old: libc::termios = unsafe { std::mem::zeroed() };
    if unsafe { libc::tcgetattr(fd, &mut old) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut quiet = old;
    quiet.c_lflag &= !libc::ECHO;
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &quiet) };
    let mut w = &tty;
    let _ = w.write_all(prompt.as_bytes());
    let mut line = String::new();
    let read = std::io::BufReader::new(&tty).read_line(&mut line);
    unsafe { libc::tcsetattr(fd, libc::TCSANOW, &old) };
    let _ = w.write_all(b"\n");
    read?;
    Ok(line.trim_end_matches(['\r', '\n']).to_string())
}

/// How ddftpd mirrors are reached: TLS and the shared token (`get`,
/// `archive`, `ls`).
#[derive(Debug, Clone, Args)]
pub struct TlsOpt {
    /// Reach every ddftpd mirror over TLS, as if each were ddftps://.
    #[arg(long)]
    pub tls: bool,
    /// A private CA's certificate(s) (PEM) that TLS mirrors (ddftps://,
    /// https://) may be signed by, trusted besides the system's.
    #[arg(long, value_name = "PEM")]
    pub ca_file: Option<PathBuf>,
    /// Our certificate chain (PEM), for mirrors that require client
    /// certificates (ddftpd --client-ca); needs --key.
    #[arg(long, value_name = "CERT.pem", requires = "key")]
    pub cert: Option<PathBuf>,
    /// The private key (PEM) of --cert.
    #[arg(long, value_name = "KEY.pem", requires = "cert")]
    pub key: Option<PathBuf>,
    /// Shared token for mirrors started with --token-file (proved by
    /// challenge-response; it never crosses the network).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
}

impl TlsOpt {
    /// The TLS client configuration when some ddftpd mirror is reached
    /// over TLS (`any`: one given as ddftps://, or --tls).
    pub fn connector(&self, any: bool) -> Result<Option<Secure>, String> {
        if !(any || self.tls) {
            if self.cert.is_some() {
                return Err("--cert is for TLS mirrors: give them as ddftps://HOST[:PORT], or add --tls".into());
            }
            return Ok(None);
        }
        let opt = ddnet::tls::ClientTls {
            ca_file: self.ca_file.as_deref(),
            identity: self.cert.as_deref().zip(self.key.as_deref()),
        };
        Ok(Some(Secure(ddnet::tls::client_config(&opt).map_err(|e| e.to_string())?)))
    }

    /// The token of --token-file, if given.
    pub fn token(&self) -> Result<Option<std::sync::Arc<[u8]>>, String> {
        self.token_file.as_deref().map(read_token).transpose()
    }
}

/// The flags every command that moves data from mirrors takes.
#[derive(Debug, Clone, Args)]
pub struct MoveOpt {
    /// Mirrors serving the same data: ddftpd at HOST[:PORT] (port 7400 if
    /// omitted, IPv6 in brackets), ddftpd over TLS at ddftps://HOST[:PORT],
    /// HTTP servers that honour Range: http://HOST[:PORT]/DIR/ (PATH is
    /// appended) or the file's own URL, or hosts you can ssh to:
    /// ssh://[USER@]HOST[:PORT]/DIR (ddftpd runs there for this command
    /// alone; no daemon needed).
    #[arg(long, short = 'm', value_delimiter = ',', value_parser = parse_mirror)]
    pub mirrors: Vec<Mirror>,
    /// The remote shell for ssh:// mirrors, with its options (rsync's -e):
    /// e.g. -e 'ssh -i ~/.ssh/data_key -o BatchMode=yes'.
    #[arg(long = "rsh", short = 'e', value_name = "COMMAND", default_value = "ssh")]
    pub rsh: String,
    /// The ddftpd to run on ssh:// mirrors (rsync's --rsync-path), if it
    /// is not on the remote PATH as `ddftpd`.
    #[arg(long, value_name = "PATH", default_value = "ddftpd")]
    pub remote_ddftpd: String,
    /// Carry ssh:// mirrors' connections inside ssh (a forwarded port)
    /// instead of straight to the remote ddftpd's port: for hosts whose
    /// firewall lets only ssh through. Slower (ssh encrypts every byte
    /// again, one TCP stream for all): see docs/ssh.md.
    #[arg(long)]
    pub via_ssh: bool,
    /// The ddftp to run on the host an archive is pushed to (`ddftp
    /// archive SRC HOST:DIR`), if it is not on the remote PATH as `ddftp`.
    #[arg(long, value_name = "PATH", default_value = "ddftp")]
    pub remote_ddftp: String,
    #[command(flatten)]
    pub tls: TlsOpt,
    #[command(flatten)]
    pub web: WebOpt,
    /// Block size, e.g. 256KiB or 1MiB.
    #[arg(long, value_parser = parse_block_size, default_value = "256KiB")]
    pub block_size: u32,
    /// Print one JSON object with the results on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress bar and no human summary (errors and warnings still go to stderr).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// When stderr is not a terminal (a log, cron, CI), one progress line
    /// (bytes, percent, rate, ETA, mirrors) every this many seconds.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS", value_parser = parse_seconds)]
    pub progress_interval: f64,
    /// Drop a mirror that owes data and sends nothing for this many seconds;
    /// the others take over its range.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS", value_parser = parse_seconds)]
    pub stall_timeout: f64,
    #[command(flatten)]
    pub retry: RetryOpt,
    /// The most bytes a second to take from all mirrors together, e.g.
    /// 20MB (decimal), 16M or 16MiB (binary, as curl), 400mbit; 0: no
    /// limit. Each mirror keeps its share of it.
    #[arg(long, value_name = "RATE", value_parser = ddftp_proto::units::parse_rate)]
    pub limit_rate: Option<u64>,
    /// How long a mirror has to accept the connection and greet; the
    /// download starts with those that did, a late one joins when it answers.
    #[arg(long, default_value_t = 5.0, value_name = "SECONDS", value_parser = parse_seconds)]
    pub connect_timeout: f64,
    /// When done (or failed), write the run's figures (exit code, bytes,
    /// seconds, bytes per mirror) to this file in the Prometheus text
    /// format, replaced whole: for node_exporter's textfile collector.
    #[arg(long, value_name = "FILE")]
    pub metrics_file: Option<PathBuf>,
    /// Do not verify blocks against the mirrors' chunk manifest as they
    /// arrive (the whole range is still checked against the mirrors'
    /// SHA-256 at the end). For measuring what verification costs.
    #[arg(long)]
    pub no_verify: bool,
}

impl MoveOpt {
    /// A transfer of `path` into `output` with these flags (no resume reset,
    /// no published checksum, no local binds: the caller sets those it has).
    pub fn spec(&self, path: String, output: PathBuf, sync: bool) -> Result<GetSpec, String> {
        let tls = self.tls_connector()?;
        let (mut mirrors, mut http) = (vec![], vec![]);
        let ssh: Vec<SshMirror> =
            self.mirrors.iter().filter_map(|m| if let Mirror::Ssh(s) = m { Some(s.clone()) } else { None }).collect();
        let mut ssh = match ssh.is_empty() {
            true => vec![],
            false => super::ssh::peers(&ssh, &self.rsh()?),
        }
        .into_iter();
        let mut starting = vec![];
        for m in &self.mirrors {
            match m {
                Mirror::Ddftpd(ep, secure, _) => {
                    let tls = (*secure || self.tls.tls).then(|| tls.clone().expect("built when a mirror needs it"));
                    mirrors.push(Peer { endpoint: ep.clone(), tls, own: None })
                }
                Mirror::Http(u) => http.push(u.clone()),
                // Those that started, in the order given; those still
                // starting join the transfer when they answer.
                Mirror::Ssh(_) => match ssh.next() {
                    Some(Now::Up(p)) => mirrors.push(p),
                    Some(Now::Starting(s)) => starting.push(s),
                    Some(Now::Failed) | None => {}
                },
                Mirror::Pinned(p) => mirrors.push(p.clone()),
            }
        }
        if mirrors.is_empty() && http.is_empty() && self.mirrors.iter().any(|m| matches!(m, Mirror::Ssh(_))) {
            return Err(format!("{} (each said why above)", super::ssh::NONE_STARTED));
        }
        Ok(GetSpec {
            path: ddftpd_path(&self.mirrors, &path)?,
            mirrors,
            starting,
            http,
            output,
            block_size: self.block_size,
            sync,
            direct: false,
            stall_timeout: std::time::Duration::from_secs_f64(self.stall_timeout),
            restart: false,
            checksum: None,
            checksum_listed: false,
            token: self.tls.token()?,
            verify: !self.no_verify,
            binds: vec![],
            scheduler: Config::default(),
            store: None,
            sealed_size: None,
            ca_file: self.tls.ca_file.clone(),
            checksum_url: None,
            metalink: None,
            retry: self.retry.policy(),
            connect_timeout: std::time::Duration::from_secs_f64(self.connect_timeout),
            limit_rate: self.limit_rate.and_then(ddftp_proto::units::rate_limit),
            stdout: None,
            bundle: None,
            range: None,
            no_clobber: false,
            delta: false,
            seeds: vec![],
            keep_mtime: false,
            asking: self.web.asking()?,
            pool: None,
            share: None,
        })
    }
}

impl MoveOpt {
    /// How ssh:// mirrors are started.
    fn rsh(&self) -> Result<super::ssh::Rsh<'_>, String> {
        let words = ddftp::ssh::split_rsh(&self.rsh)?;
        let within = std::time::Duration::from_secs_f64(self.connect_timeout.max(30.0));
        Ok(super::ssh::Rsh { words, remote_ddftpd: &self.remote_ddftpd, within, via_ssh: self.via_ssh })
    }

    /// What shows progress: a bar on a terminal, lines in a log.
    /// With `--json` no progress either: stderr has warnings and errors only.
    pub fn bar(&self) -> Bar {
        Bar::new(!self.quiet && !self.json, std::time::Duration::from_secs_f64(self.progress_interval))
    }

    /// The TLS client configuration, when some ddftpd mirror is reached
    /// over TLS (ddftps:// or --tls).
    fn tls_connector(&self) -> Result<Option<Secure>, String> {
        let any = self.mirrors.iter().any(|m| matches!(m, Mirror::Ddftpd(_, true, _)));
        self.tls.connector(any)
    }
}

/// A `--mirrors` entry: a ddftpd (over TLS or not), an HTTP(S) URL, or a
/// host reached over ssh.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mirror {
    /// A ddftpd, over TLS or not, and the path its URL named (a directory
    /// ending in `/` that PATH is put under, or the file itself).
    Ddftpd(Endpoint, bool, Option<String>),
    Http(String),
    Ssh(SshMirror),
    /// A mirror given with its own token and certificate: the serving end
    /// of a push, as it told this end over ssh.
    Pinned(Peer),
}

pub(crate) fn parse_mirror(s: &str) -> Result<Mirror, String> {
    if s.starts_with("ssh://") {
        return SshMirror::parse_url(s).map(Mirror::Ssh);
    }
    if ddftp::http::is_url(s) {
        // Checked now (the path is appended later).
        ddftp::http::HttpMirror::parse(s, "f").map_err(|e| e.to_string())?;
        return Ok(Mirror::Http(s.to_string()));
    }
    if let Some(url) = parse_ddftp_url(s) {
        let u = url?;
        let at = (!u.path.is_empty()).then_some(u.path);
        return Ok(Mirror::Ddftpd(u.endpoint, u.tls, at));
    }
    if s.contains("://") {
        return Err(format!("{s:?}: a mirror is HOST[:PORT], ddftp(s)://HOST[:PORT][/DIR/] or an http(s):// URL"));
    }
    match parse_endpoint(s) {
        Ok(ep) if ep.port == 0 => Err(format!("{s:?}: a mirror's port cannot be 0")),
        Ok(ep) => Ok(Mirror::Ddftpd(ep, false, None)),
        Err(e) => Err(e.to_string()),
    }
}

/// A ddftpd file's (or directory's) URL: `ddftp://HOST[:PORT]/PATH`, or
/// `ddftps://` over TLS; the one form `get`'s arguments, `-i` lists,
/// Metalink files, `--mirrors` and `ls` take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdftpUrl {
    pub endpoint: Endpoint,
    pub tls: bool,
    /// Below the server's root, percent-decoded, without the leading `/`
    /// (a trailing one kept: a directory).
    pub path: String,
}

/// Whether `s` names a file by URL (ddftp, ddftps, http, https).
pub fn is_file_url(s: &str) -> bool {
    ddftp::http::is_url(s) || s.starts_with("ddftp://") || s.starts_with("ddftps://")
}

/// `s` as a [`DdftpUrl`], if it is one (and why it is a bad one).
pub fn parse_ddftp_url(s: &str) -> Option<Result<DdftpUrl, String>> {
    let (rest, tls) = match (s.strip_prefix("ddftps://"), s.strip_prefix("ddftp://")) {
        (Some(r), _) => (r, true),
        (_, Some(r)) => (r, false),
        _ => return None,
    };
    let (addr, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.split(['?', '#']).next().unwrap_or("");
    Some(match parse_endpoint(addr) {
        Ok(ep) if ep.port == 0 => Err(format!("{s:?}: a mirror's port cannot be 0")),
        Ok(endpoint) => {
            Ok(DdftpUrl { endpoint, tls, path: ddftp::http::auth::decode(path).trim_start_matches('/').to_string() })
        }
        Err(e) => Err(format!("{s:?}: {e}")),
    })
}

/// The path every ddftpd mirror is asked for: PATH, or what their URLs
/// name (a directory PATH goes under, or the file itself). The engine asks
/// every ddftpd the same path, so URLs that name different ones are
/// refused with both named.
fn ddftpd_path(mirrors: &[Mirror], path: &str) -> Result<String, String> {
    let mut asked: Option<(String, String)> = None;
    for m in mirrors {
        let Mirror::Ddftpd(ep, _, at) = m else { continue };
        let here = match at.as_deref() {
            None => path.to_string(),
            Some(dir) if dir.ends_with('/') => format!("{dir}{}", path.trim_start_matches('/')),
            Some(file) => file.to_string(),
        };
        match &asked {
            Some((first, by)) if *first != here => {
                return Err(format!(
                    "the ddftpd mirrors would be asked for two paths ({first:?} on {by}, {here:?} on {ep}): \
                     every ddftpd mirror serves the file under one path; give PATH with the mirrors as \
                     HOST:PORT, or URLs that name the same path"
                ))
            }
            Some(_) => {}
            None => asked = Some((here, ep.to_string())),
        }
    }
    Ok(asked.map_or_else(|| path.to_string(), |(p, _)| p))
}

/// A token file's content without trailing white space.
pub(crate) fn read_token(path: &Path) -> Result<std::sync::Arc<[u8]>, String> {
    let mut t = std::fs::read(path).map_err(|e| format!("reading token file {}: {e}", path.display()))?;
    while t.last().is_some_and(|b| b.is_ascii_whitespace()) {
        t.pop();
    }
    if t.is_empty() {
        return Err(format!("token file {} is empty", path.display()));
    }
    Ok(t.into())
}

pub(crate) fn parse_checksum(s: &str) -> Result<String, String> {
    let Some((algo, hex)) = s.split_once('=') else {
        return Err(format!("{s:?}: expected sha-256=HEX"));
    };
    if !matches!(algo.to_ascii_lowercase().as_str(), "sha-256" | "sha256") {
        return Err(format!("{algo:?}: only sha-256 is supported"));
    }
    if !ddftp::checksum::is_sha256_hex(hex) {
        return Err(format!("{hex:?}: a SHA-256 is 64 hexadecimal digits"));
    }
    Ok(hex.to_ascii_lowercase())
}

pub(crate) fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 86_400.0 => Ok(v),
        _ => Err(format!("{s:?}: expected a number of seconds, more than 0")),
    }
}

pub(crate) fn parse_window(s: &str) -> Result<u64, String> {
    match parse_size(s) {
        Ok(v) if v >= 1 << 20 => Ok(v),
        Ok(_) => Err(format!("{s:?}: the window must be at least 1MiB")),
        Err(e) => Err(e.to_string()),
    }
}

pub(crate) fn parse_block_size(s: &str) -> Result<u32, String> {
    let v = parse_size(s).map_err(|e| e.to_string())?;
    if v < u64::from(MIN_BLOCK_SIZE) || v > u64::from(MAX_BLOCK_SIZE) {
        return Err(format!(
            "block size must be between {} and {}",
            HumanBytes(MIN_BLOCK_SIZE.into()),
            HumanBytes(MAX_BLOCK_SIZE.into())
        ));
    }
    Ok(v as u32)
}
