//! `ddftp get --peers`: the server a receiver runs beside its download,
//! serving what it has verified to the other receivers, and how long it
//! stays up once its own copy is whole.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ddftp::transfer::share::{Offer, Offered, Sharing};
use ddftp::transfer::TransferReport;
use ddftpd::share::{Share, Shares};
use ddftpd::{Server, ServerConfig};

/// How a receiver learns of the others.
pub enum Mode {
    /// It is the only one.
    Alone,
    /// `--peers`, serving on `--share-listen`.
    Listen(SocketAddr),
    /// `--share` under mpirun: the ranks.
    #[cfg(feature = "mpi")]
    Ranks(Job),
}

impl Mode {
    /// What the flags ask for.
    /// What the flags ask for: `--share-listen ADDR`, `--share`.
    pub fn of(share_listen: Option<SocketAddr>, share: bool) -> Result<Mode, String> {
        if let Some(a) = share_listen {
            return Ok(Mode::Listen(a));
        }
        if !share {
            return Ok(Mode::Alone);
        }
        #[cfg(feature = "mpi")]
        if ddtree::walk::mpi::launched_by_mpi() {
            let session = ddtree::walk::mpi::Session::init()
                .ok_or("--share: MPI could not be initialised (is this mpirun's OpenMPI?)")?;
            return Ok(Mode::Ranks(Job { session }));
        }
        #[cfg(not(feature = "mpi"))]
        if ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"].iter().any(|v| std::env::var_os(v).is_some()) {
            return Err("--share under mpirun needs a ddftp built with MPI (cargo build --release -p ddftp-cli --features mpi); without MPI, give every receiver --peers and --share-listen".into());
        }
        Err("--share: not started by mpirun; run it under mpirun, or give every receiver --peers and --share-listen"
            .into())
    }
}

impl Mode {
    pub fn is_ranks(&self) -> bool {
        #[cfg(feature = "mpi")]
        if let Mode::Ranks(_) = self {
            return true;
        }
        false
    }

    /// Under mpirun, rank 0 prints every rank's figures; elsewhere the
    /// receiver's own summary was printed.
    #[allow(unused_variables)]
    pub fn report(&self, exit: super::Exit, done: Option<&TransferReport>, how: &super::flags::MoveOpt) {
        #[cfg(feature = "mpi")]
        if let Mode::Ranks(job) = self {
            job.report(exit, done, how);
        }
    }
}

/// The ranks of an MPI job, each a receiver.
#[cfg(feature = "mpi")]
pub struct Job {
    /// MPI, finalised when the job is dropped (at the command's end).
    session: ddtree::walk::mpi::Session,
}

/// What each rank tells rank 0 when done.
#[cfg(feature = "mpi")]
#[derive(serde::Serialize, serde::Deserialize)]
struct RankFigures {
    rank: usize,
    host: String,
    exit: i32,
    seconds: f64,
    bytes: u64,
    from_mirrors: u64,
    from_peers: u64,
}

#[cfg(feature = "mpi")]
impl Job {
    /// Every rank's server, in rank order, this one's at `mine`.
    pub fn peers(&self, mine: SocketAddr) -> Vec<ddftp::transfer::Peer> {
        let all = self.session.all_gather_bytes(mine.to_string().as_bytes(), 64);
        // One entry a rank, in rank order (a rank's place is its rank): an
        // address that does not parse is port 0, not used.
        all.iter()
            .map(|a| std::str::from_utf8(a).ok().and_then(|a| a.parse::<SocketAddr>().ok()))
            .map(|a| a.unwrap_or_else(|| ([0, 0, 0, 0], 0).into()))
            .map(|a| ddftp::transfer::Peer::plain(ddftp_proto::Endpoint { host: a.ip().to_string(), port: a.port() }))
            .collect()
    }

    pub fn rank(&self) -> usize {
        self.session.rank()
    }

    pub fn barrier(&self) {
        self.session.barrier();
    }

    fn report(&self, exit: super::Exit, done: Option<&TransferReport>, how: &super::flags::MoveOpt) {
        let host = std::env::var("HOSTNAME")
            .ok()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|h| h.trim().to_string()))
            .unwrap_or_else(|| "?".into());
        let t = done;
        let mine = RankFigures {
            rank: self.session.rank(),
            host,
            exit: exit as i32,
            seconds: t.map_or(0.0, |t| t.seconds),
            bytes: t.map_or(0, |t| t.bytes),
            from_peers: t.map_or(0, |t| t.from_peers),
            from_mirrors: t.map_or(0, |t| t.producers.iter().filter(|p| !p.peer).map(|p| p.bytes).sum()),
        };
        let all = self.session.all_gather_bytes(&serde_json::to_vec(&mine).expect("serialises"), 1024);
        if self.session.rank() != 0 {
            return;
        }
        let ranks: Vec<RankFigures> = all.iter().filter_map(|b| serde_json::from_slice(b).ok()).collect();
        let size = ranks.iter().map(|r| r.bytes).max().unwrap_or(0);
        let sent: u64 = ranks.iter().map(|r| r.from_mirrors).sum();
        let copies = if size > 0 { sent as f64 / size as f64 } else { 0.0 };
        if how.json {
            let v =
                serde_json::json!({ "receivers": ranks, "mirror_bytes": sent, "mirror_copies": copies, "bytes": size });
            println!("{v}");
        } else if !how.quiet {
            use ddftp_proto::units::HumanBytes;
            for r in &ranks {
                let state = if r.exit == 0 { String::new() } else { format!(", FAILED (exit {})", r.exit) };
                println!(
                    "rank {} ({}): {:.2} s, {} from the mirrors, {} from other ranks{state}",
                    r.rank,
                    r.host,
                    r.seconds,
                    HumanBytes(r.from_mirrors),
                    HumanBytes(r.from_peers)
                );
            }
            println!(
                "{} receivers; the mirrors sent {} ({copies:.2} copies of the file)",
                ranks.len(),
                HumanBytes(sent)
            );
        }
    }
}

/// This host's address toward the first mirror: where the other ranks
/// reach its server.
#[cfg(feature = "mpi")]
pub fn toward(spec: &ddftp::transfer::GetSpec) -> std::net::IpAddr {
    use std::net::ToSocketAddrs;
    let first = spec.mirrors.first().map(|m| (m.endpoint.host.clone(), m.endpoint.port));
    let first = first.or_else(|| {
        let u = spec.http.first()?;
        let host = u.split("://").nth(1)?.split(['/', '?']).next()?;
        Some((host.rsplit_once(':').map_or(host, |(h, _)| h).trim_matches(['[', ']']).to_string(), 80))
    });
    let local = first.and_then(|(h, p)| {
        let to = (h.as_str(), p).to_socket_addrs().ok()?.next()?;
        let any: SocketAddr =
            if to.is_ipv4() { ([0, 0, 0, 0], 0).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, 0).into() };
        let s = std::net::UdpSocket::bind(any).ok()?;
        s.connect(to).ok()?;
        Some(s.local_addr().ok()?.ip())
    });
    local.unwrap_or(std::net::Ipv4Addr::LOCALHOST.into())
}

/// A receiver's server: it serves the file being downloaded, nothing else.
pub struct ShareServer {
    server: Server,
    addr: SocketAddr,
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
        let addr = l.local_addr().map_err(|e| format!("--share-listen {listen}: {e}"))?;
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
        Ok(ShareServer { server, addr, shares, stop: Some(stop), task })
    }

    /// Where it listens.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the download tells of what it verifies.
    pub fn sharing(&self) -> Arc<dyn Sharing> {
        Arc::new(Table { shares: self.shares.clone(), id: self.server.id() })
    }

    /// Serves on while other receivers are connected: until none has been
    /// for `quiet`, at most `most`.
    pub async fn linger(mut self, quiet: Duration, most: Duration) {
        let metrics = self.server.metrics();
        tracing::info!(listen = %self.addr, "serving the file to the other receivers until none is connected");
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
        let share = Arc::new(Share::new(o.file, o.size, o.mtime, o.digest, o.hashes.to_vec()));
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

/// Stands for the server until it is up (the spec is made before).
pub struct Unstarted;

impl Sharing for Unstarted {
    fn server_id(&self) -> [u8; ddftp_proto::frame::SERVER_ID_LEN] {
        [0; ddftp_proto::frame::SERVER_ID_LEN]
    }

    fn offer(&self, _: Offer<'_>) -> std::io::Result<Arc<dyn Offered>> {
        Err(std::io::Error::other("the sharing server is not running"))
    }
}
