//! `ddftpd`: serve a root ([`flags`] for the command line, [`config`] for
//! `--config FILE`), and `ddftpd index DIR` to compute digests ahead of time.

mod config;
mod flags;
mod logging;
mod manual;
mod session;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{CommandFactory, Parser};
use ddftp_proto::parse_endpoint;
use ddftpd::{Reload, Server, ServerConfig};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

use config::Settings;
use flags::{Command, Flags, Generate};

/// Exit codes (the help and docs/ddftpd.md list them).
const EXIT_CANNOT_SERVE: u8 = 1;
const EXIT_USAGE: u8 = 2;

async fn bind(spec: &str) -> anyhow::Result<TcpListener> {
    let ep = parse_endpoint(spec)?;
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((ep.host.as_str(), ep.port))
        .await
        .with_context(|| format!("resolving {ep}"))?
        .collect();
    let Some(addr) = addrs.first() else { bail!("{ep} resolves to no address") };
    let sock = socket2::Socket::new(socket2::Domain::for_address(*addr), socket2::Type::STREAM, None)?;
    sock.set_reuse_address(true)?;
    sock.bind(&(*addr).into()).with_context(|| format!("binding {addr}"))?;
    sock.listen(1024)?;
    sock.set_nonblocking(true)?;
    Ok(TcpListener::from_std(sock.into())?)
}

/// Reads a token file: its content without trailing white space.
fn read_token(path: &Path) -> anyhow::Result<Vec<u8>> {
    let mut t = std::fs::read(path).with_context(|| format!("reading token file {}", path.display()))?;
    while t.last().is_some_and(|b| b.is_ascii_whitespace()) {
        t.pop();
    }
    if t.is_empty() {
        bail!("token file {} is empty", path.display());
    }
    Ok(t)
}

/// One line on stdout for scripts; a reader that went away is not an error.
fn say(line: std::fmt::Arguments) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(line).and_then(|()| out.write_all(b"\n")).and_then(|()| out.flush());
}

/// What SIGHUP can change, from the settings as they are now.
fn reloadable(s: &Settings) -> anyhow::Result<Reload> {
    let token = s.token_file.as_deref().map(read_token).transpose()?;
    Ok(Reload { allow: s.allow.clone(), token, rate_limit: s.rate_limit })
}

/// `ddftpd index`: prints a summary; fails if any file could not be indexed.
fn index(dir: &Path, index: Option<PathBuf>, jobs: Option<usize>) -> anyhow::Result<()> {
    let root = dir.canonicalize().with_context(|| format!("cannot index {}", dir.display()))?;
    let index = match index {
        Some(i) => i,
        None => ddftpd::index_home::default_for(&root)?,
    };
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let started = std::time::Instant::now();
    let s = ddftpd::indexer::index_tree(&root, &index, jobs);
    for e in &s.errors {
        eprintln!("ddftpd: {e}");
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "indexed {} files ({} bytes, {} already current) into {} in {secs:.1} s",
        s.files,
        s.bytes,
        s.current,
        index.display()
    );
    if !s.errors.is_empty() {
        bail!("{} files could not be indexed", s.errors.len());
    }
    Ok(())
}

/// The start-up banner: what an operator needs to know is being served.
fn banner(s: &Settings, listeners: &[SocketAddr], token: bool) {
    let tls = match (&s.tls, &s.client_ca) {
        (None, _) => "off".to_string(),
        (Some(_), None) => "TLS 1.3".to_string(),
        (Some(_), Some(ca)) => format!("TLS 1.3, client certificates from {}", ca.display()),
    };
    let auth = match (token, s.client_ca.is_some()) {
        (true, true) => "token and client certificate",
        (true, false) => "token",
        (false, true) => "client certificate",
        (false, false) => "none",
    };
    let allow = if s.allow.is_empty() {
        "everyone".to_string()
    } else {
        s.allow.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")
    };
    let rate = s.rate_limit.map_or("none".to_string(), |r| format!("{}/s", ddftp_proto::units::HumanBytes(r)));
    let addrs = listeners.iter().map(|a| a.to_string()).collect::<Vec<_>>().join(", ");
    match s.log_format {
        // One field each, for a log pipeline to read (rate in bytes a second).
        flags::LogFormat::Json => tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            root = %s.root.display(),
            listen = %addrs,
            tls = %tls,
            auth,
            allow = %allow,
            rate_limit_bytes_per_second = s.rate_limit,
            max_connections = s.max_connections,
            max_per_client = s.max_per_client,
            idle_timeout_seconds = s.idle_timeout,
            grace_seconds = s.grace,
            "serving"
        ),
        flags::LogFormat::Text => tracing::info!(
            "ddftpd {} serving {} on {addrs}; tls: {tls}; auth: {auth}; allow: {allow}; rate limit: {rate}; \
             connections: {} ({} per client); idle timeout {} s; grace {} s",
            env!("CARGO_PKG_VERSION"),
            s.root.display(),
            s.max_connections,
            s.max_per_client,
            s.idle_timeout,
            s.grace,
        ),
    }
    let open: Vec<_> = listeners.iter().filter(|a| !a.ip().is_loopback()).map(|a| a.to_string()).collect();
    if auth == "none" && !open.is_empty() {
        tracing::warn!(
            "serving {} without authentication on {}: anyone who can reach it can read every file there; \
             limit it with --allow, --token-file or --client-ca",
            s.root.display(),
            open.join(", ")
        );
    }
}

async fn run(flags: Flags, s: Settings, sink: logging::Sink) -> anyhow::Result<()> {
    // SIGHUP is taken from here on: one sent as soon as the server says it
    // listens (a script, logrotate) reloads, it does not end the server.
    let hup = signal(SignalKind::hangup())?;
    let reload = reloadable(&s)?;
    let tls = match &s.tls {
        Some((cert, key)) => Some(ddftpd::tls::Tls::new(cert, key, s.client_ca.as_deref())?),
        None => None,
    };
    let cfg = ServerConfig {
        rate_limit: reload.rate_limit,
        follow_symlinks: s.follow_symlinks,
        max_connections: s.max_connections,
        max_per_client: s.max_per_client,
        idle_timeout: Duration::from_secs(s.idle_timeout),
        allow: reload.allow.clone(),
        token: reload.token.clone(),
        index_dir: s.index.clone(),
        tls,
        grace: Duration::from_secs(s.grace),
        ..ServerConfig::default()
    };
    let server = Server::new(&s.root, &cfg).with_context(|| format!("cannot serve {}", s.root.display()))?;
    let mut listeners = vec![];
    let mut addrs = vec![];
    for spec in &s.listen {
        let l = bind(spec).await?;
        let addr = l.local_addr()?;
        // Scripts and tests read the real port (useful with port 0) from here.
        say(format_args!("ddftpd listening on {addr}"));
        addrs.push(addr);
        listeners.push(l);
    }
    if let Some(spec) = &s.metrics {
        let l = bind(spec).await.context("--metrics")?;
        say(format_args!("ddftpd metrics on http://{}/metrics", l.local_addr()?));
        tokio::spawn(ddftpd::exporter::serve(l, server.metrics()));
    }
    banner(&s, &addrs, reload.token.is_some());
    if let Some(user) = &s.user {
        ddftpd::privileges::become_user(user).with_context(|| format!("--user {user}"))?;
        tracing::info!(user, "running as {user}");
    }
    server.index_in_background(s.watch, (s.rescan > 0).then(|| Duration::from_secs(s.rescan)));
    tokio::spawn(reload_on_hangup(hup, flags, server.clone(), sink));
    let mut term = signal(SignalKind::terminate())?;
    let shutdown = async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM: no new connections; draining"),
            _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: no new connections; draining"),
        }
    };
    server.run(listeners, shutdown).await;
    tracing::info!("stopped");
    Ok(())
}

/// SIGHUP: the config file and token file read again, `--allow`, the
/// token and the rate limit applied to new connections, the log reopened.
/// A reload that fails keeps everything as it was and says why.
async fn reload_on_hangup(mut hup: tokio::signal::unix::Signal, flags: Flags, server: Server, sink: logging::Sink) {
    while hup.recv().await.is_some() {
        if let logging::Sink::File(f) = &sink {
            if let Err(e) = f.reopen() {
                tracing::error!("SIGHUP: cannot reopen the log file: {e}; still writing the old one");
            }
        }
        let next = config::settings(&flags).map_err(anyhow::Error::from).and_then(|s| reloadable(&s));
        match next {
            Ok(r) => {
                let allow = if r.allow.is_empty() { "everyone".into() } else { format!("{} networks", r.allow.len()) };
                tracing::info!(allow, token = r.token.is_some(), "SIGHUP: reloaded");
                server.reload(r);
            }
            Err(e) => tracing::error!("SIGHUP: not reloaded, the old settings stay: {e:#}"),
        }
    }
}

/// `ddftpd generate man|bash|zsh|fish` (hidden; the package build uses it).
fn generate(what: Generate) -> std::io::Result<()> {
    let mut cmd = Flags::command();
    let out = &mut std::io::stdout();
    let shell = match what {
        Generate::Man => return manual::render(out),
        Generate::Bash => clap_complete::Shell::Bash,
        Generate::Zsh => clap_complete::Shell::Zsh,
        Generate::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(shell, &mut cmd, "ddftpd", out);
    Ok(())
}

fn main() -> ExitCode {
    let flags = Flags::parse();
    match flags.command {
        Some(Command::Index { ref dir, ref index, jobs }) => {
            let _ = logging::init(flags::LogFormat::Text, logging::level(flags.verbose, flags.quiet), None);
            return match self::index(dir, index.clone(), jobs) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ddftpd: {e:#}");
                    ExitCode::from(EXIT_CANNOT_SERVE)
                }
            };
        }
        Some(Command::Session { ref dir, follow_symlinks }) => {
            // Warnings and errors go back to the client over ssh's stderr.
            let _ = logging::init(flags::LogFormat::Text, logging::level(flags.verbose, flags.quiet.max(1)), None);
            return match session::run(dir, follow_symlinks) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ddftpd: {e:#}");
                    ExitCode::from(EXIT_CANNOT_SERVE)
                }
            };
        }
        Some(Command::Generate { what }) => {
            return match generate(what) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ddftpd: {e}");
                    ExitCode::from(EXIT_CANNOT_SERVE)
                }
            };
        }
        None => {}
    }
    let settings = match config::settings(&flags) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ddftpd: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let level = logging::level(flags.verbose, flags.quiet);
    let sink = match logging::init(settings.log_format, level, settings.log_file.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ddftpd: {e}");
            return ExitCode::from(EXIT_CANNOT_SERVE);
        }
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ddftpd: cannot start runtime: {e}");
            return ExitCode::from(EXIT_CANNOT_SERVE);
        }
    };
    let to_file = settings.log_file.is_some();
    let r = rt.block_on(run(flags, settings, sink));
    // Connections still closing when the grace ran out are not waited for.
    rt.shutdown_timeout(Duration::from_millis(100));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if to_file {
                tracing::error!("{e:#}");
            }
            eprintln!("ddftpd: {e:#}");
            ExitCode::from(EXIT_CANNOT_SERVE)
        }
    }
}
