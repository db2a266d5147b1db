//! `ddftp get --peers`: the server a receiver runs beside its download,
//! serving what it has verified to the other receivers, and how long it
//! stays up once its own copy is whole.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ddftp::transfer::share::{Offer, Offered, Sharing};
use ddftpd::share::{Share, Shares};
use ddftpd::{Server, ServerConfig};

/// A receiver's server: it serves the file being downloaded, nothing else.
pub struct ShareServer {
    server: Server,
    shares: Arc<Shares>,
    /// Ends the server.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl ShareServer {
    /// Listens on `listen`; peers must prove they know `token`, as for
    /// the mirrors.
    pub async fn start(listen: SocketAddr, token: Option<&[u8]>) -> Result<ShareServer, String> {
        let l = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("--share-listen {listen}: {e} (another receiver or program on that port?)"))?;
        let shares = Arc::new(Shares::only());
        let cfg = ServerConfig {
            token: token.map(<[u8]>::to_vec),
            shares: Some(shares.clone()),
            log_errors: false,
            // The peers' streams wait for blocks that are on their way.
            idle_timeout: Duration::from_secs(60),
            ..ServerConfig::default()
        };
        // Its root is never read: a sharing server serves its shares only.
        let server = Server::new(&std::env::temp_dir(), &cfg).map_err(|e| format!("--share-listen: {e}"))?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let run = server.clone();
        let task = tokio::spawn(async move {
            run.run(vec![l], async move {
                let _ = stopped.await;
            })
            .await
        });
        Ok(ShareServer { server, shares, stop: Some(stop), task })
    }

    /// What the download tells of what it verifies.
    pub fn sharing(&self) -> Arc<dyn Sharing> {
        Arc::new(Table { shares: self.shares.clone(), id: self.server.id() })
    }

    /// Serves on while other receivers are connected: until none has been
    /// for `quiet`, at most `most`.
    pub async fn linger(mut self, quiet: Duration, most: Duration) {
        let metrics = self.server.metrics();
        let began = Instant::now();
        let mut idle_since = Instant::now();
        while began.elapsed() < most {
            if metrics.open_connections() > 0 {
                idle_since = Instant::now();
            } else if idle_since.elapsed() >= quiet {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        let _ = self.task.await;
    }
}

struct Table {
    shares: Arc<Shares>,
    id: [u8; ddftp_proto::frame::SERVER_ID_LEN],
}

impl Sharing for Table {
    fn server_id(&self) -> [u8; ddftp_proto::frame::SERVER_ID_LEN] {
        self.id
    }

    fn offer(&self, o: Offer<'_>) -> std::io::Result<Arc<dyn Offered>> {
        let file = std::fs::File::open(o.part)?;
        let share = Arc::new(Share::new(file, o.size, o.mtime, o.digest, o.hashes.to_vec()));
        self.shares.offer(o.path, share.clone());
        Ok(Arc::new(Verified(share)))
    }
}

struct Verified(Arc<Share>);

impl Offered for Verified {
    fn verified(&self, at: u64, len: u64) {
        self.0.verified(at, len)
    }
}

/// Stands for the server until it is up (`GetOpt::spec` runs before).
pub struct Unstarted;

impl Sharing for Unstarted {
    fn server_id(&self) -> [u8; ddftp_proto::frame::SERVER_ID_LEN] {
        [0; ddftp_proto::frame::SERVER_ID_LEN]
    }

    fn offer(&self, _: Offer<'_>) -> std::io::Result<Arc<dyn Offered>> {
        Err(std::io::Error::other("the sharing server is not running"))
    }
}
