//! Accepting connections: a cap on how many are open, a back-off when
//! `accept` fails (out of file descriptors), and a drained shutdown.
//!
//! Shutdown (mini-redis's way): when the future passed to [`Server::run`]
//! completes, the listeners close and the phase becomes
//! [`Phase::Draining`]: running streams go on, connections with nothing to
//! do close. Every connection task holds a clone of one channel sender;
//! when all are gone the server has drained. Past the grace period the
//! phase becomes [`Phase::Closing`] and each connection closes at its next
//! block boundary, telling its client why (so it takes the rest from other
//! mirrors). Nothing is aborted mid-write.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use std::sync::RwLock;

use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::access::{self, Cidr};
use crate::connection;
use crate::digests::Index;
use crate::metrics::{Metrics, Refusal};
use crate::per_client::PerClient;
use crate::ratelimit::RateLimiter;
use crate::root::Root;
use crate::shared::{Phase, Shared};
use crate::tls::{self, Tls};
use ddftp_proto::ErrorCode;

/// How a server behaves.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub rate_limit: Option<u64>,
    /// Only these paths of the root are shown (a push's), if set.
    pub only: Option<Arc<crate::only::Only>>,
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
    /// Where file digests are kept (default: [`crate::index_home`]).
    pub index_dir: Option<PathBuf>,
    /// Speak TLS only, with this certificate (and client CA).
    pub tls: Option<Tls>,
    /// How long running streams may go on after shutdown begins.
    pub grace: Duration,
    /// Serve these files as they are downloaded (`ddftp get --share`);
    /// a table made with [`Shares::only`](crate::share::Shares::only)
    /// serves nothing else.
    pub shares: Option<Arc<crate::share::Shares>>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            rate_limit: None,
            only: None,
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
            grace: Duration::ZERO,
            shares: None,
        }
    }
}

/// What SIGHUP may change in a running server.
#[derive(Debug, Clone, Default)]
pub struct Reload {
    pub allow: Vec<Cidr>,
    pub token: Option<Vec<u8>>,
    pub rate_limit: Option<u64>,
}

/// A producer: a root, a rate limit and its listeners.
#[derive(Debug, Clone)]
pub struct Server {
    shared: Arc<Shared>,
    max_connections: usize,
    per_client: Arc<PerClient>,
    log_errors: bool,
    tls: Option<Tls>,
    grace: Duration,
}

/// How long a client refused for lack of a free connection is asked to
/// wait: connections end all the time, and a retry is one round trip.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

impl Server {
    pub fn new(root: &Path, cfg: &ServerConfig) -> io::Result<Server> {
        let mut root = Root::new(root, cfg.follow_symlinks)?;
        if let Some(only) = &cfg.only {
            root = root.showing(only.clone());
        }
        let index_dir = match &cfg.index_dir {
            Some(d) => d.clone(),
            None => crate::index_home::default_or_memory(root.dir()),
        };
        Ok(Server {
            shared: Arc::new(Shared {
                index: Index::new(index_dir),
                root,
                limiter: RateLimiter::new(cfg.rate_limit),
                idle_timeout: cfg.idle_timeout,
                token: RwLock::new(cfg.token.clone().map(Arc::from)),
                allow: RwLock::new(cfg.allow.clone().into()),
                metrics: Default::default(),
                phase: watch::Sender::new(Phase::Running),
                failed_proofs: Default::default(),
                max_block_size: cfg.max_block_size,
                server_id: rand::random(),
                bundles: Default::default(),
                uploads: Arc::new(Semaphore::new(crate::bundle::UPLOADS)),
                defining: Arc::new(Semaphore::new(1)),
                walks: Arc::new(Semaphore::new(WALKS)),
                shares: cfg.shares.clone().unwrap_or_default(),
            }),
            max_connections: cfg.max_connections,
            per_client: PerClient::new(cfg.max_per_client),
            log_errors: cfg.log_errors,
            tls: cfg.tls.clone(),
            grace: cfg.grace,
        })
    }

    /// Who this server is (random at each start), as its greeting says.
    pub fn id(&self) -> [u8; ddftp_proto::frame::SERVER_ID_LEN] {
        self.shared.server_id
    }

    /// What the server has counted (`--metrics`).
    pub fn metrics(&self) -> Arc<Metrics> {
        self.shared.metrics.clone()
    }

    /// Indexes files published from now on in the background (with
    /// `watch`, as inotify reports them; the whole tree every `rescan`):
    /// [`crate::watcher`].
    pub fn index_in_background(&self, watch: bool, rescan: Option<Duration>) {
        crate::watcher::spawn(self.shared.clone(), watch, rescan);
    }

    /// Takes a new `--allow`, token and rate limit; connections already
    /// open keep going, new ones meet the new rules.
    pub fn reload(&self, r: Reload) {
        *self.shared.allow.write().expect("allow lock") = r.allow.into();
        *self.shared.token.write().expect("token lock") = r.token.map(Arc::from);
        self.shared.limiter.set_rate(r.rate_limit);
    }

    /// The server's shared send budget (the demo changes it while running).
    pub fn limiter(&self) -> &RateLimiter {
        &self.shared.limiter
    }

    /// Serves on every listener until `shutdown` completes, then drains:
    /// running streams have the grace period to finish (module docs).
    pub async fn run(self, listeners: Vec<TcpListener>, shutdown: impl Future<Output = ()>) {
        let permits = Arc::new(Semaphore::new(self.max_connections));
        let (alive, mut drained) = mpsc::channel::<()>(1);
        for l in listeners {
            tokio::spawn(accept_loop(l, self.clone(), permits.clone(), alive.clone()));
        }
        drop(alive);
        shutdown.await;
        let open = self.max_connections - permits.available_permits();
        self.shared.phase.send_replace(Phase::Draining);
        if self.log_errors && open > 0 {
            tracing::info!("shutting down: {open} connections may finish within {:?} (--grace)", self.grace);
        }
        if tokio::time::timeout(self.grace, drained.recv()).await.is_err() {
            let left = self.max_connections - permits.available_permits();
            // None left: only the listeners were still winding down, and
            // nothing is cut short (no warning on the user's terminal, as
            // an ssh mirror's stderr is).
            if self.log_errors && left > 0 {
                tracing::warn!("grace period over: closing {left} connections");
            }
            self.shared.phase.send_replace(Phase::Closing);
            // Each closes at its next block boundary; a socket that takes
            // nothing is given up with the process.
            let _ = tokio::time::timeout(CLOSING, drained.recv()).await;
        }
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

async fn accept_loop(listener: TcpListener, server: Server, permits: Arc<Semaphore>, alive: mpsc::Sender<()>) {
    // Connections over the cap are told so, a few at a time; past that
    // they are closed at once (a flood must not take more descriptors).
    let refusals = Arc::new(Semaphore::new(REFUSING));
    let mut phase = server.shared.phase.subscribe();
    let metrics = server.shared.metrics.clone();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = phase.wait_for(|p| *p != Phase::Running) => return,
        };
        let (sock, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                if server.log_errors {
                    tracing::warn!("accept failed: {e}; retrying");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        metrics.accepted();
        let shared = server.shared.clone();
        let log = server.log_errors;
        let tls = server.tls.clone();
        // A TLS client is refused inside TLS: it could read nothing else.
        let refusal = |sock, why: Refusal, code, message: String| {
            metrics.refused(why);
            let turn = refusals.clone().try_acquire_owned();
            let (tls, alive) = (tls.clone(), alive.clone());
            async move {
                if let Ok(turn) = turn {
                    if let Ok((s, _)) = tls::accept(sock, tls.as_ref(), peer, None).await {
                        let _ = connection::refuse(s, code, message).await;
                    }
                    drop((turn, alive));
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
            tokio::spawn(refusal(sock, Refusal::Busy, ErrorCode::Busy, why));
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
            tokio::spawn(refusal(sock, Refusal::PerClient, ErrorCode::Busy, why));
            continue;
        };
        if !access::allowed(&server.shared.allow.read().expect("allow lock"), peer.ip()) {
            if log {
                tracing::warn!(%peer, "refused (not in --allow)");
            }
            drop(permit);
            let why = format!("{} is not allowed here", peer.ip());
            tokio::spawn(refusal(sock, Refusal::NotAllowed, ErrorCode::Forbidden, why));
            continue;
        }
        let alive = alive.clone();
        tokio::spawn(async move {
            let m = shared.metrics.clone();
            let state = m.connection();
            let conn = async {
                let (sock, subject) = tls::accept(sock, tls.as_ref(), peer, Some(&m)).await?;
                connection::handle(sock, shared, peer, subject, state).await
            };
            if let Err(e) = conn.await {
                if log {
                    tracing::warn!(%peer, "{}", crate::logline::one_line(&e.to_string()));
                }
            }
            drop((permit, held, alive));
        });
    }
}

/// Connections one client address may have open by default: far more than
/// a `get` or `archive` opens (two per mirror and local address), far
/// fewer than the whole server's.
pub const DEFAULT_PER_CLIENT: usize = 64;

/// Walks a server runs at once (each on threads of its own).
const WALKS: usize = 2;

/// How long connections have to close once the grace period is over.
const CLOSING: Duration = Duration::from_secs(5);

/// Refusals being sent at once.
const REFUSING: usize = 64;
