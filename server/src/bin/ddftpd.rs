//! `ddftpd --root DIR [--listen ADDR:PORT]... [--rate-limit RATE]`, and
//! `ddftpd index DIR` to compute file digests ahead of time.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use ddftp_proto::{parse_endpoint, DEFAULT_PORT};
use ddftpd::access::Cidr;
use ddftpd::{Server, ServerConfig};
use tokio::net::TcpListener;

/// ddftpd: serves the files under a root directory to ddftp clients
/// (the producer side of Dual-Direction Operations).
#[derive(Debug, Parser)]
#[command(version, subcommand_negates_reqs = true, args_conflicts_with_subcommands = true)]
struct Opt {
    #[command(subcommand)]
    command: Option<Command>,
    /// Directory to serve; clients name files relative to it.
    #[arg(long, required = true)]
    root: Option<PathBuf>,
    /// Directory of the digest index (default: ROOT/.ddftpd-index, which is
    /// never served). Digests computed while serving are written there too.
    #[arg(long, value_name = "DIR")]
    index: Option<PathBuf>,
    /// Address to listen on, HOST[:PORT] or [IPv6]:PORT (repeatable; port 0
    /// picks a free one). Default: 0.0.0.0:7400.
    #[arg(long = "listen", value_name = "ADDR:PORT")]
    listen: Vec<String>,
    /// Cap on the total send rate, in bytes per second: 40MB, 512KiB, 1.5G.
    #[arg(long, value_name = "RATE", value_parser = ddftp_proto::units::parse_rate)]
    rate_limit: Option<u64>,
    /// Follow symlinks that stay inside the root (others are always refused).
    #[arg(long)]
    follow_symlinks: bool,
    /// Most connections open at once.
    #[arg(long, default_value_t = 1024)]
    max_connections: usize,
    /// Most connections one client address may have open at once.
    #[arg(long, default_value_t = ddftpd::server::DEFAULT_PER_CLIENT, value_name = "N")]
    max_per_client: usize,
    /// Run as this user (and its groups) once the listeners are bound and
    /// the root is open: start as root to bind a low port, serve as nobody.
    #[arg(long, value_name = "NAME")]
    user: Option<String>,
    /// Only clients from this network may connect: CIDR like 10.0.0.0/8 or
    /// an address (repeatable; default: everyone).
    #[arg(long, value_name = "CIDR", value_parser = Cidr::parse)]
    allow: Vec<Cidr>,
    /// Clients must prove they know the token in this file (challenge-response;
    /// the token never crosses the network).
    #[arg(long, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// Speak TLS 1.3 only, with this certificate chain (PEM); needs
    /// --tls-key. Clients connect with ddftps://HOST:PORT or --tls.
    #[arg(long, value_name = "CERT.pem", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, value_name = "KEY.pem", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Require client certificates signed by this CA (PEM): mutual TLS. The
    /// subject of each client's certificate is logged.
    #[arg(long, value_name = "CA.pem", requires = "tls_cert")]
    client_ca: Option<PathBuf>,
    /// Close a connection that sends nothing for this many seconds while idle.
    #[arg(long, default_value_t = 300, value_name = "SECONDS")]
    idle_timeout: u64,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Compute the digests (SHA-256 and chunk manifest) of every file under
    /// DIR now, so no client waits for them later.
    Index {
        /// The root to index (the same DIR as `ddftpd --root DIR`).
        dir: PathBuf,
        /// Directory of the digest index (default: DIR/.ddftpd-index).
        #[arg(long, value_name = "DIR")]
        index: Option<PathBuf>,
        /// Files hashed at once (default: one per core).
        #[arg(long, value_name = "N")]
        jobs: Option<usize>,
    },
}

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
fn read_token(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    let mut t = std::fs::read(path).with_context(|| format!("reading token file {}", path.display()))?;
    while t.last().is_some_and(|b| b.is_ascii_whitespace()) {
        t.pop();
    }
    if t.is_empty() {
        bail!("token file {} is empty", path.display());
    }
    Ok(t)
}

/// `ddftpd index`: prints a summary; fails if any file could not be indexed.
fn index(dir: &std::path::Path, index: Option<PathBuf>, jobs: Option<usize>) -> anyhow::Result<()> {
    let root = dir.canonicalize().with_context(|| format!("cannot index {}", dir.display()))?;
    let index = index.unwrap_or_else(|| root.join(ddftpd::digests::INDEX_DIR_NAME));
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

async fn run(opt: Opt) -> anyhow::Result<()> {
    let root = opt.root.expect("clap requires --root without a subcommand");
    let token = opt.token_file.as_deref().map(read_token).transpose()?;
    let tls = match (&opt.tls_cert, &opt.tls_key) {
        (Some(cert), Some(key)) => Some(ddftpd::tls::Tls::new(cert, key, opt.client_ca.as_deref())?),
        _ => None,
    };
    let cfg = ServerConfig {
        rate_limit: opt.rate_limit,
        follow_symlinks: opt.follow_symlinks,
        max_connections: opt.max_connections.max(1),
        max_per_client: opt.max_per_client.max(1),
        idle_timeout: Duration::from_secs(opt.idle_timeout.max(1)),
        allow: opt.allow,
        token,
        index_dir: opt.index,
        tls,
        ..ServerConfig::default()
    };
    let server = Server::new(&root, &cfg).with_context(|| format!("cannot serve {}", root.display()))?;
    let specs = if opt.listen.is_empty() { vec![format!("0.0.0.0:{DEFAULT_PORT}")] } else { opt.listen };
    let mut listeners = vec![];
    for s in &specs {
        let l = bind(s).await?;
        // Scripts and tests read the real port (useful with port 0) from here.
        println!("ddftpd listening on {}", l.local_addr()?);
        listeners.push(l);
    }
    if opt.tls_cert.is_some() {
        let mutual = if opt.client_ca.is_some() { ", client certificates required" } else { "" };
        tracing::info!("TLS 1.3 only{mutual}");
    }
    if let Some(user) = &opt.user {
        ddftpd::privileges::become_user(user).with_context(|| format!("--user {user}"))?;
        tracing::info!(user, "running as {user}");
    }
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    server.run(listeners, shutdown).await;
    Ok(())
}

fn main() -> ExitCode {
    let opt = Opt::parse();
    ddftpd::init_logging("info");
    if let Some(Command::Index { dir, index: idx, jobs }) = opt.command {
        return match index(&dir, idx, jobs) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ddftpd: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ddftpd: cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(opt)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ddftpd: {e:#}");
            ExitCode::FAILURE
        }
    }
}
