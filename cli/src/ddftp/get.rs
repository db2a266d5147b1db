//! `ddftp get PATH --mirrors A,B,... [-o OUT]`, `ddftp get URL URL...`,
//! `ddftp get --metalink F.meta4`: one file from k mirrors.

use std::path::{Path, PathBuf};

use clap::Args;
use ddftp_proto::frame::{MAX_BLOCK_SIZE, MIN_BLOCK_SIZE};
use ddftp_proto::units::{parse_size, HumanBytes};
use ddftp_proto::{parse_endpoint, Endpoint};

use super::{report_error, runtime, Exit};
use ddftp::metalink::{self, MetalinkFile};
use ddftp::progress::Bar;
use ddftp::scheduler::Config;
use ddftp::session::Secure;
use ddftp::transfer::{self, GetSpec, Peer, Sha256Checked, TransferError, TransferReport};

/// Default block size: large enough that per-block costs vanish at GB/s,
/// small enough that the last pair meets within milliseconds on slow links.
pub const DEFAULT_BLOCK_SIZE: u32 = 256 * 1024;

/// Download files from several mirrors at once (Dual-Direction Operations).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  ddftp get big.iso -m mirror1,mirror2 -o /data/big.iso
  ddftp get a.iso b.iso c.iso -m mirror1,mirror2 -d /data
  ddftp get -i files.txt -m mirror1,mirror2 -d /data        (aria2c's -i form)
  ddftp get https://a.example.org/big.iso https://b.example.org/pub/big.iso
  ddftp get --metalink big.iso.meta4
  ddftp get big.iso -m ddftps://mirror1 --ca-file ca.pem -o - | tar x
Docs: man ddftp-get; docs/get.md")]
#[derive(Clone)]
pub struct GetOpt {
    /// Path of the file on the mirrors (relative to their --root, or to a
    /// directory URL; with --mirrors, several PATHs are several files); or,
    /// without --mirrors, the file's URLs on several HTTP(S) servers
    /// (aria2 style).
    #[arg(value_name = "PATH... | URL...")]
    pub path: Vec<String>,
    /// Read the files to get from LIST (aria2c's input file: a file per
    /// line, its URLs separated by tabs or its path on --mirrors; options
    /// on the indented lines below: out=NAME, dir=DIR, checksum=sha-256=HEX).
    #[arg(short = 'i', long = "input-file", value_name = "LIST")]
    pub input_file: Option<PathBuf>,
    /// Put each output in DIR, under its own name.
    #[arg(short = 'd', long = "dir", value_name = "DIR", conflicts_with = "output")]
    pub dir: Option<PathBuf>,
    /// With several files: how many move at once.
    #[arg(short = 'j', long = "jobs", value_name = "N", default_value_t = 4)]
    pub jobs: usize,
    /// A Metalink 4 file (.meta4, RFC 5854): the mirrors, size, SHA-256 and
    /// piece hashes come from it; every piece is verified as it arrives.
    #[arg(long, value_name = "FILE")]
    pub metalink: Option<PathBuf>,
    /// A SHA256SUMS-style listing (`HEX  NAME` lines) that gives the file's
    /// SHA-256; a mismatch discards the download and exits with 3.
    #[arg(long, value_name = "URL")]
    pub checksum_url: Option<String>,
    /// Where to write the file (default: its name, in the current
    /// directory); `-` writes it in order to standard output (nothing on
    /// disk, no resume; the report and progress go to stderr).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// With `-o -`: the most bytes held to put blocks back in order
    /// (the mirrors work inside a window this large that slides forward).
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = parse_window)]
    pub window: u64,
    #[command(flatten)]
    pub moving: MoveOpt,
    /// fsync the file before it is put in place.
    #[arg(long)]
    pub sync: bool,
    /// Start over: discard the part file and resume journal of an earlier,
    /// interrupted run of the same download.
    #[arg(long)]
    pub restart: bool,
    /// Keep an OUT that holds another file: fail (exit 4) instead of
    /// replacing it. (An OUT that already holds this file, by size and
    /// SHA-256, is kept either way and nothing moves.)
    #[arg(long)]
    pub no_clobber: bool,
    /// Move nothing: ask every mirror about the file and vote, then print
    /// each one's size, digest, round trip and whether it agrees (exit 0:
    /// all answer and agree; 3: some serve another version; 1: some did not
    /// answer).
    #[arg(long)]
    pub check: bool,
    /// Do not give OUT the mirror's modification time (it gets it by
    /// default, as with `curl -R` and wget).
    #[arg(long)]
    pub no_mtime: bool,
    /// The published digest the file must have: sha-256=HEX. A mismatch
    /// discards the download and exits with 3.
    #[arg(long, value_name = "sha-256=HEX", value_parser = parse_checksum)]
    pub checksum: Option<String>,
    /// `checksum` is a `-i` list entry's `checksum=` (set by the list).
    #[arg(skip)]
    pub checksum_listed: bool,
    /// Connect from these local addresses (e.g. one per NIC): every
    /// (mirror, address) pair is a producer of its own, so one mirror
    /// reached over two NICs works as a pair across them.
    #[arg(long, value_delimiter = ',', value_name = "ADDR,...")]
    pub bind: Vec<std::net::IpAddr>,
    /// Like --bind, naming interfaces (their first address, IPv4 first).
    #[arg(long, value_delimiter = ',', value_name = "IFACE,...")]
    pub nic: Vec<String>,
}

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
    /// or HTTP servers that honour Range: http://HOST[:PORT]/DIR/ (PATH is
    /// appended) or the file's own URL.
    #[arg(long, short = 'm', value_delimiter = ',', value_parser = parse_mirror)]
    pub mirrors: Vec<Mirror>,
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
    /// 20MB (decimal) or 16MiB; each mirror keeps its share of it.
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
        for m in &self.mirrors {
            match m {
                Mirror::Ddftpd(ep, secure) => {
                    let tls = (*secure || self.tls.tls).then(|| tls.clone().expect("built when a mirror needs it"));
                    mirrors.push(Peer { endpoint: ep.clone(), tls })
                }
                Mirror::Http(u) => http.push(u.clone()),
            }
        }
        Ok(GetSpec {
            path,
            mirrors,
            http,
            output,
            block_size: self.block_size,
            sync,
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
            limit_rate: self.limit_rate,
            stdout: None,
            bundle: None,
            range: None,
            no_clobber: false,
            keep_mtime: false,
            asking: self.web.asking()?,
            pool: None,
        })
    }
}

impl MoveOpt {
    /// What shows progress: a bar on a terminal, lines in a log.
    pub fn bar(&self) -> Bar {
        Bar::new(!self.quiet, std::time::Duration::from_secs_f64(self.progress_interval))
    }

    /// The TLS client configuration, when some ddftpd mirror is reached
    /// over TLS (ddftps:// or --tls).
    fn tls_connector(&self) -> Result<Option<Secure>, String> {
        let any = self.mirrors.iter().any(|m| matches!(m, Mirror::Ddftpd(_, true)));
        self.tls.connector(any)
    }
}

/// A `--mirrors` entry: a ddftpd (over TLS or not) or an HTTP(S) URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mirror {
    Ddftpd(Endpoint, bool),
    Http(String),
}

pub(crate) fn parse_mirror(s: &str) -> Result<Mirror, String> {
    if ddftp::http::is_url(s) {
        // Checked now (the path is appended later).
        ddftp::http::HttpMirror::parse(s, "f").map_err(|e| e.to_string())?;
        return Ok(Mirror::Http(s.to_string()));
    }
    let (addr, tls) = match (s.strip_prefix("ddftps://"), s.strip_prefix("ddftp://")) {
        (Some(a), _) => (a.trim_end_matches('/'), true),
        (_, Some(a)) => (a.trim_end_matches('/'), false),
        _ if s.contains("://") => {
            return Err(format!("{s:?}: a mirror is HOST[:PORT], ddftps://HOST[:PORT] or an http(s):// URL"))
        }
        _ => (s, false),
    };
    match parse_endpoint(addr) {
        Ok(ep) if ep.port == 0 => Err(format!("{s:?}: a mirror's port cannot be 0")),
        Ok(ep) => Ok(Mirror::Ddftpd(ep, tls)),
        Err(e) => Err(e.to_string()),
    }
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

/// `%XX` escapes decoded (a URL's last segment as a file name).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (b[i], s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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

fn parse_window(s: &str) -> Result<u64, String> {
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

/// The result of a finished `get`, as printed with `--json`.
#[derive(Debug, serde::Serialize)]
pub struct GetResult {
    #[serde(flatten)]
    pub transfer: TransferReport,
    pub mb_per_s: f64,
}

impl GetOpt {
    /// `--bind` addresses, then those of `--nic` interfaces.
    fn binds(&self) -> Result<Vec<std::net::IpAddr>, String> {
        let mut binds = self.bind.clone();
        for n in &self.nic {
            binds.push(ddftp::nic::addresses(n).map_err(|e| e.to_string())?[0]);
        }
        Ok(binds)
    }

    pub fn spec(&self) -> Result<GetSpec, String> {
        let (path, urls, metalink) = self.what()?;
        let output = match &self.output {
            Some(o) => o.clone(),
            None => {
                // Its last name, which must be one a file can have here (a
                // URL's `%00` decodes to a NUL), in -d DIR if given.
                let name =
                    Path::new(&path).file_name().filter(|n| ddftp_proto::relpath::check(n.as_encoded_bytes()).is_ok());
                let name =
                    name.ok_or_else(|| format!("{path:?} names no file that can be written here; give -o OUT"))?;
                self.dir.as_deref().unwrap_or(Path::new("")).join(name)
            }
        };
        let to_stdout = output.as_os_str() == "-";
        if to_stdout && self.restart {
            return Err("-o - keeps nothing to resume from: --restart has nothing to discard".into());
        }
        if !to_stdout {
            let name = Path::new(&path).file_name().and_then(|n| n.to_str());
            check_output(&output, name)?;
        }
        if let Some(u) = &self.checksum_url {
            ddftp::http::HttpMirror::parse(u, "").map_err(|e| format!("--checksum-url: {e}"))?;
        }
        let mut spec = GetSpec {
            restart: self.restart,
            checksum: self.checksum.clone(),
            checksum_listed: self.checksum_listed,
            binds: self.binds()?,
            checksum_url: self.checksum_url.clone(),
            metalink,
            stdout: to_stdout.then_some(self.window),
            no_clobber: self.no_clobber,
            keep_mtime: !self.no_mtime,
            ..self.moving.spec(path, output, self.sync)?
        };
        spec.http.splice(0..0, urls);
        if spec.mirrors.is_empty() && spec.http.is_empty() {
            return Err("no mirrors: give --mirrors A,B,..., the file's URLs, or --metalink F.meta4".into());
        }
        Ok(spec)
    }

    /// The file asked for, URLs of it given as arguments (or in the
    /// Metalink), and the Metalink's description of it.
    fn what(&self) -> Result<(String, Vec<String>, Option<MetalinkFile>), String> {
        if let Some(f) = &self.metalink {
            let shown = f.display();
            let xml = std::fs::read_to_string(f).map_err(|e| format!("--metalink {shown}: {e}"))?;
            let files = metalink::parse(&xml).map_err(|e| format!("--metalink {shown}: {e}"))?;
            let file = match (&self.path[..], &files[..]) {
                ([], [one]) => one.clone(),
                ([name], _) => files
                    .iter()
                    .find(|m| m.name == *name)
                    .cloned()
                    .ok_or_else(|| format!("--metalink {shown} lists no file {name:?}"))?,
                ([], _) => {
                    let names: Vec<&str> = files.iter().map(|m| m.name.as_str()).collect();
                    return Err(format!(
                        "--metalink {shown} lists {} files; name one: {}",
                        files.len(),
                        names.join(", ")
                    ));
                }
                _ => return Err("with --metalink, name at most one file (of those it lists)".into()),
            };
            for u in &file.urls {
                parse_mirror(u).map_err(|e| format!("--metalink {shown}: {e}"))?;
            }
            return Ok((file.name.clone(), file.urls.clone(), Some(file)));
        }
        match &self.path[..] {
            [] => Err("name the file: ddftp get PATH --mirrors A,B,... (or its URLs, or --metalink F.meta4)".into()),
            [one] if !ddftp::http::is_url(one) => Ok((one.clone(), vec![], None)),
            urls => {
                for u in urls {
                    match parse_mirror(u) {
                        Ok(Mirror::Http(_)) if !u.ends_with('/') => {}
                        Ok(_) if urls.len() == 1 => {
                            return Err(format!(
                                "{u:?} is a directory URL, which names no file: give the file's own URL, \
                                 or the file's path with it as a mirror (ddftp get PATH --mirrors {u})"
                            ))
                        }
                        Ok(_) => return Err(format!("{u:?}: with several arguments, each is the file's own URL")),
                        Err(e) => return Err(e),
                    }
                }
                let name = urls[0].split(['?', '#']).next().unwrap_or("").rsplit('/').next().unwrap_or("");
                Ok((percent_decode(name), urls.to_vec(), None))
            }
        }
    }
}

/// Refuses, before a byte moves, an output that cannot be a downloaded
/// file: a directory, a name in a directory that is not there, or a device,
/// FIFO or socket (the data lands in `OUT.ddftp-part`, which is renamed
/// over `OUT` at the end: that would destroy a device, and blocks come in
/// no order a stream could take).
pub fn check_output(output: &Path, name: Option<&str>) -> Result<(), String> {
    let shown = output.display();
    if output.as_os_str().as_encoded_bytes().ends_with(b"/") || output.is_dir() {
        let dir = shown.to_string();
        let into = Path::new(dir.trim_end_matches('/')).join(name.unwrap_or("NAME"));
        return Err(format!("{shown} is a directory name; give the file's name in it: -o {}", into.display()));
    }
    if let Ok(m) = std::fs::metadata(output) {
        if !m.is_file() {
            let kind = transfer::file_kind(&m);
            return Err(format!(
                "{shown} is a {kind}: ddftp writes blocks as they come, anywhere in the file, into a regular \
                 file it puts in place at the end; give a file name (e.g. on /dev/shm to measure speed)"
            ));
        }
    }
    let dir = match output.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!("{} is not a directory, so {shown} cannot be written", dir.display())),
        Err(e) => Err(format!("directory {} for {shown}: {e}", dir.display())),
    }
}

/// What `--json` prints when a command fails: one object, as on success.
pub fn json_failure(error: &dyn std::fmt::Display, exit: Exit, known: serde_json::Value) -> String {
    let mut v = serde_json::json!({ "error": error.to_string(), "exit_code": exit as i32 });
    if let (Some(o), serde_json::Value::Object(k)) = (v.as_object_mut(), known) {
        o.extend(k);
    }
    hide_user_info(&mut v);
    v.to_string()
}

/// Every string in `v` without the user info of the URLs in it: what a
/// failure echoes of the command line (the URLs as typed) shows no password.
pub fn hide_user_info(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            if let std::borrow::Cow::Owned(h) = ddftp::http::auth::hide_user_info(s) {
                *s = h;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(hide_user_info),
        serde_json::Value::Object(o) => o.values_mut().for_each(hide_user_info),
        _ => {}
    }
}

/// Prints the human summary: totals, then one line per mirror.
pub fn print_summary(r: &GetResult, to: &mut dyn std::io::Write) -> std::io::Result<()> {
    let t = &r.transfer;
    if t.already_complete {
        return writeln!(
            to,
            "{} -> {}: already complete ({}, sha256 {} matches {}): nothing moved",
            t.path,
            t.output,
            HumanBytes(t.reused_bytes),
            t.sha256.as_deref().unwrap_or("?"),
            t.sha256_checked.source()
        );
    }
    writeln!(
        to,
        "{} -> {}: {} in {:.2} s ({}/s)\nsha256 {} ({}{})",
        t.path,
        t.output,
        HumanBytes(t.bytes.saturating_sub(t.reused_bytes)),
        t.seconds,
        HumanBytes((r.mb_per_s * 1e6) as u64),
        t.sha256.as_deref().unwrap_or("not computed"),
        match t.sha256_checked {
            Sha256Checked::Nothing => {
                "NOT VERIFIED: HTTP mirrors gave no digest; pass --checksum sha-256=HEX or --checksum-url URL".into()
            }
            Sha256Checked::Sealed => "sealed blocks".into(),
            c => format!("matches {}", c.source()),
        },
        if t.verified { "; every block verified as it arrived" } else { "" }
    )?;
    if t.reused_bytes > 0 {
        writeln!(
            to,
            "resumed: {} were already there from the interrupted run ({} in all)",
            HumanBytes(t.reused_bytes),
            HumanBytes(t.bytes)
        )?;
    }
    writeln!(to, "  {:<28} {:>8} {:>12} {:>7}", "mirror", "blocks", "bytes", "share")?;
    for p in &t.producers {
        writeln!(
            to,
            "  {:<28} {:>8} {:>12} {:>6.1}%",
            p.mirror,
            p.blocks,
            HumanBytes(p.bytes).to_string(),
            100.0 * p.share
        )?;
    }
    if t.links.len() > t.producers.len() {
        writeln!(to, "  {:<40} {:>8} {:>12}", "route", "blocks", "bytes")?;
        for l in &t.links {
            writeln!(to, "  {:<40} {:>8} {:>12}", l.route, l.blocks, HumanBytes(l.bytes).to_string())?;
        }
    }
    writeln!(
        to,
        "  control messages: {} Start, {} Extend, {} End; duplicate bytes: {}",
        t.starts, t.extends, t.ends, t.duplicate_bytes
    )
}

/// `get --check`: the mirrors' answers and the vote, no data.
fn check(opt: &GetOpt, spec: &GetSpec, rt: &tokio::runtime::Runtime) -> Exit {
    let r = match rt.block_on(transfer::check(spec)) {
        Ok(r) => r,
        Err(e) => {
            report_error(&e);
            return exit_for(&e);
        }
    };
    let exit = match (r.all_agree(), r.some_silent()) {
        (true, _) => Exit::Ok,
        (false, true) if r.mirrors.iter().all(|m| m.agrees != Some(false)) => Exit::Transfer,
        _ => Exit::Integrity,
    };
    if opt.moving.json {
        let mut v = serde_json::to_value(&r).expect("report serialises");
        v["exit_code"] = serde_json::json!(exit as i32);
        println!("{v}");
    } else {
        let version = match (r.size, &r.sha256) {
            (Some(s), Some(h)) => format!("{} bytes, sha256 {h}", s),
            (Some(s), None) => format!("{s} bytes (no digest)"),
            _ => "no majority".to_string(),
        };
        println!("{}: {version}", r.path);
        for m in &r.mirrors {
            let verdict = match m.agrees {
                Some(true) => "agrees".to_string(),
                Some(false) => format!(
                    "DIFFERS ({} bytes, sha256 {})",
                    m.size.unwrap_or(0),
                    m.sha256.as_deref().map_or("not given", |h| &h[..h.len().min(16)])
                ),
                None => format!("no answer: {}", m.error.as_deref().unwrap_or("?")),
            };
            let rtt = m.rtt_ms.map_or(String::new(), |t| format!("  rtt {t:.1} ms"));
            println!("  {:<40} {verdict}{rtt}", m.mirror);
        }
    }
    exit
}

/// Exit code for a failed transfer.
pub fn exit_for(e: &TransferError) -> Exit {
    match e {
        TransferError::NoMirrors | TransferError::CaFile(_) | TransferError::NotAFile { .. } => Exit::Usage,
        TransferError::NoMajority { .. }
        | TransferError::Journal(_)
        | TransferError::BlockSizeMismatch { .. }
        | TransferError::BlockSizeOverLimit { .. }
        | TransferError::ChecksumMismatch { .. }
        | TransferError::NoChecksum { .. }
        | TransferError::DigestMismatch { .. }
        | TransferError::PieceKeepsFailing { .. }
        | TransferError::UnconfirmedDigest(_)
        | TransferError::WrittenOut { .. } => Exit::Integrity,
        TransferError::Interrupted { .. } => Exit::Interrupted,
        TransferError::Untrusted { .. } => Exit::Tls,
        TransferError::Output { .. } | TransferError::NoSpace { .. } | TransferError::Clobber { .. } => Exit::Local,
        TransferError::NoUsableMirror { .. } | TransferError::AllMirrorsFailed { .. } => Exit::Transfer,
    }
}

/// Runs a transfer.
pub async fn fetch(spec: &GetSpec, bar: &mut dyn transfer::Progress) -> Result<GetResult, TransferError> {
    let report = transfer::get(spec, bar).await?;
    // This run's speed: bytes an interrupted run left are not counted.
    let moved = report.bytes.saturating_sub(report.reused_bytes);
    let mb_per_s = if report.seconds > 0.0 { moved as f64 / report.seconds / 1e6 } else { 0.0 };
    Ok(GetResult { transfer: report, mb_per_s })
}

/// `ddftp get` of one file (several: [`super::many`]).
pub fn run(opt: GetOpt) -> Exit {
    if let Some(d) = &opt.dir {
        // One file into DIR, under its own name (spec() names it).
        if let Err(e) = std::fs::create_dir_all(d) {
            report_error(&format_args!("-d {}: {e}", d.display()));
            return Exit::Local;
        }
    }
    let known = |warnings: &[String], e: Option<&TransferError>| {
        let output = opt.output.clone().or_else(|| opt.spec().ok().map(|s| s.output));
        let mut v = serde_json::json!({
            "path": opt.path,
            "output": output.as_ref().map(|o| o.display().to_string()),
            "warnings": warnings,
        });
        let (missing, total, resume) = match e {
            Some(TransferError::AllMirrorsFailed { missing, total, resume, .. }) => {
                (Some(missing), Some(total), *resume)
            }
            Some(TransferError::Interrupted { missing, total }) => (Some(missing), Some(total), transfer::Resume::Kept),
            Some(TransferError::Output { resume, .. }) => (None, None, *resume),
            _ => (None, None, transfer::Resume::Nothing),
        };
        v["missing_bytes"] = serde_json::json!(missing);
        v["total_bytes"] = serde_json::json!(total);
        v["resume"] = serde_json::json!(resume);
        v
    };
    let spec = match opt.spec() {
        Ok(s) => s,
        Err(e) => {
            report_error(&e);
            if opt.moving.json {
                println!("{}", json_failure(&e, Exit::Usage, known(&[], None)));
            }
            return Exit::Usage;
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    if opt.check {
        return check(&opt, &spec, &rt);
    }
    let mut bar = opt.moving.bar();
    // With `-o -` standard output is the file's: the report goes to stderr.
    let report = |text: &str| match spec.stdout {
        Some(_) => eprintln!("{text}"),
        None => println!("{text}"),
    };
    let (exit, done) = match rt.block_on(fetch(&spec, &mut bar)) {
        Ok(r) => {
            if opt.moving.json {
                report(&serde_json::to_string(&r).expect("report serialises"));
                if !opt.moving.quiet && spec.stdout.is_none() {
                    let _ = print_summary(&r, &mut std::io::stderr());
                }
            } else if !opt.moving.quiet {
                let _ = match spec.stdout {
                    Some(_) => print_summary(&r, &mut std::io::stderr()),
                    None => print_summary(&r, &mut std::io::stdout()),
                };
            }
            (Exit::Ok, Some(r))
        }
        Err(e) => {
            report_error(&e);
            let exit = exit_for(&e);
            if opt.moving.json {
                report(&json_failure(&e, exit, known(bar.warnings(), Some(&e))).to_string());
            }
            (exit, None)
        }
    };
    if let Some(f) = &opt.moving.metrics_file {
        let what = done.as_ref().map_or_else(|| opt.path.join(" "), |r| r.transfer.path.clone());
        super::metrics_file::write_or_warn(
            f,
            &super::metrics_file::get_page(&what, exit, done.as_ref().map(|r| &r.transfer)),
        );
    }
    exit
}
