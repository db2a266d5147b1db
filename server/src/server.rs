//! Accepting connections: a cap on how many are open, a back-off when
//! `accept` fails (out of file descriptors), and a shutdown future passed in
//! so tests and the demo can stop a server.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::access::{self, Cidr};
use crate::connection::{self, Shared};
use crate::digests::{Index, INDEX_DIR_NAME};
use crate::per_client::PerClient;
use crate::ratelimit::RateLimiter;
use crate::root::Root;
use crate::tls::{self, Tls};
use ddftp_proto::ErrorCode;

/// How a server behaves.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub rate_limit: Option<u64>,
    pub follow_symlinks: bool,
    pub max_connections: usize,
    /// The most connections one client address may have open.
    pub max_per_client: usize,
    pub idle_timeout: Duration,
    pub max_block_size: u32,
    /// Log (`tracing`, warn level) one line per failed connection.
    pub log_errors: bool,
    /// Networks allowed to connect; empty allows everyone.
    pub allow: Vec<Cidr>,
    /// Shared token clients must prove they know (challenge-response).
    pub token: Option<Vec<u8>>,
    /// Where file digests are kept (default: `ROOT/.ddftpd-index`).
    pub index_dir: Option<PathBuf>,
    /// Speak TLS only, with this certificate (and client CA).
    pub tls: Option<Tls>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            rate_limit: None,
            follow_symlinks: false,
            max_connections: 1024,
            max_per_client: DEFAULT_PER_CLIENT,
            idle_timeout: Duration::from_secs(300),
            max_block_size: 16 << 20,
            log_errors: true,
            allow: vec![],
            token: None,
            index_dir: None,
            tls: None,
        }
    }
}

/// A producer: a root, a rate limit and its listeners.
#[derive(Debug, Clone)]
pub struct Server {
    shared: Arc<Shared>,
    max_connections: usize,
    per_client: Arc<PerClient>,
    log_errors: bool,
    allow: Arc<[Cidr]>,
    tls: Option<Tls>,
}

/// How long a client refused for lack of a free connection is asked to
/// wait: connections end all the time, and a retry is one round trip.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl Server {
    pub fn new(root: &Path, cfg: &ServerConfig) -> io::Result<Server> {
        let root = Root::new(root, cfg.follow_symlinks)?;
        let index_dir = cfg.index_dir.clone().unwrap_or_else(|| root.dir().join(INDEX_DIR_NAME));
        Ok(Server {
            shared: Arc::new(Shared {
                index: Index::new(index_dir),
                root,
                limiter: RateLimiter::new(cfg.rate_limit),
                idle_timeout: cfg.idle_timeout,
                token: cfg.token.clone(),
                failed_proofs: Default::default(),
                max_block_size: cfg.max_block_size,
                server_id: rand::random(),
                bundles: Default::default(),
                uploads: Arc::new(Semaphore::new(crate::bundle::UPLOADS)),
                defining: Arc::new(Semaphore::new(1)),
                walks: Arc::new(Semaphore::new(WALKS)),
            }),
            max_connections: cfg.max_connections,
            per_client: PerClient::new(cfg.max_per_client),
            log_errors: cfg.log_errors,
            allow: cfg.allow.clone().into(),
            tls: cfg.tls.clone(),
        })
    }

    /// The server's shared send budget (the demo changes it while running).
    pub fn limiter(&self) -> &RateLimiter {
        &self.shared.limiter
    }

    /// Serves on every listener until `shutdown` completes.
    pub async fn run(self, listeners: Vec<TcpListener>, shutdown: impl Future<Output = ()>) {
        let permits = Arc::new(Semaphore::new(self.max_connections));
        let mut tasks = tokio::task::JoinSet::new();
        for l in listeners {
            tasks.spawn(accept_loop(l, self.clone(), permits.clone()));
        }
        shutdown.await;
        tasks.abort_all();
    }
}

/// Convenience: build a server and run it.
pub async fn serve(
    root: &Path,
    cfg: &ServerConfig,
    listeners: Vec<TcpListener>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    Server::new(root, cfg)?.run(listeners, shutdown).await;
    Ok(())
}

async fn accept_loop(listener: TcpListener, server: Server, permits: Arc<Semaphore>) {
    let mut conns = tokio::task::JoinSet::new();
    // Connections over the cap are told so, a few at a time; past that
    // they are closed at once (a flood must not take more descriptors).
    let refusals = Arc::new(Semaphore::new(REFUSING));
    loop {
        let (sock, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                if server.log_errors {
                    tracing::warn!("accept failed: {e}; retrying");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        while conns.try_join_next().is_some() {}
        let shared = server.shared.clone();
        let log = server.log_errors;
        let tls = server.tls.clone();
        // A TLS client is refused inside TLS: it could read nothing else.
        let refusal = |sock, code, message: String| {
            let turn = refusals.clone().try_acquire_owned();
            let tls = tls.clone();
            async move {
                if let Ok(turn) = turn {
                    if let Ok(s) = tls::accept(sock, tls.as_ref(), peer).await {
                        let _ = connection::refuse(s, code, message).await;
                    }
                    drop(turn);
                }
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            if log {
                tracing::warn!(%peer, "refused (busy: {} connections)", server.max_connections);
            }
            let why = ddftp_proto::busy::message(
                &format!(
                    "server busy: it serves at most {} connections at once (--max-connections)",
                    server.max_connections
                ),
                BUSY_WAIT,
            );
            conns.spawn(refusal(sock, ErrorCode::Busy, why));
            continue;
        };
        let Some(held) = server.per_client.admit(peer.ip()) else {
            let max = server.per_client.max();
            if log {
                tracing::warn!(%peer, "refused (it has {max} connections open: --max-per-client)");
            }
            drop(permit);
            let why = ddftp_proto::busy::message(
                &format!(
                    "{} has {max} connections open here already, the most one address may (--max-per-client)",
                    peer.ip()
                ),
                BUSY_WAIT,
            );
            conns.spawn(refusal(sock, ErrorCode::Busy, why));
            continue;
        };
        if !access::allowed(&server.allow, peer.ip()) {
            if log {
                tracing::warn!(%peer, "refused (not in --allow)");
            }
            drop(permit);
            conns.spawn(refusal(sock, ErrorCode::Forbidden, format!("{} is not allowed here", peer.ip())));
            continue;
        }
        conns.spawn(async move {
            let conn = async { connection::handle(tls::accept(sock, tls.as_ref(), peer).await?, shared).await };
            if let Err(e) = conn.await {
                if log {
                    tracing::warn!(%peer, "{e}");
                }
            }
            drop((permit, held));
        });
    }
}

/// Connections one client address may have open by default: far more than
/// a `get` or `archive` opens (two per mirror and local address), far
/// fewer than the whole server's.
pub const DEFAULT_PER_CLIENT: usize = 64;

/// Walks a server runs at once (each on threads of its own).
const WALKS: usize = 2;

/// Refusals being sent at once.
const REFUSING: usize = 64;
