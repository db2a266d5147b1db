//! `ddftp get --peers` and `ddftp archive --peers`: the flags, the server
//! a receiver runs beside its download, serving what it has verified to
//! the other receivers, and how long it stays up once its own copy is
//! whole.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ddftp::transfer::share::{Offer, Offered, Offering, Sharing};
use ddftp::transfer::TransferReport;
use ddftpd::share::{ReadAt, Share, Shares};
use ddftpd::{Server, ServerConfig};

/// How long a receiver waits for the other --peers to serve the file.
const SHARE_WAIT: Duration = Duration::from_secs(30);
/// A receiver whose copy is whole serves on until no peer has been
/// connected for this long...
const SHARE_QUIET: Duration = Duration::from_secs(2);
/// ...or this long at most.
const SHARE_LINGER: Duration = Duration::from_secs(600);

/// The flags of several receivers of one file or tree (`get`, `archive`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ShareOpt {
    /// Every receiver, this one included, each running the same command:
    /// each fetches its share from the mirrors and the rest from the
    /// others, which serve what they have verified (see
    /// docs/fan-out.md). The same list, in the same order, on every one.
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...", requires = "share_listen")]
    pub peers: Vec<String>,
    /// Where this receiver serves to the --peers: its entry in that list
    /// (or 0.0.0.0:PORT). It serves what this command moves only, and
    /// stays up until no peer has been connected for a few seconds.
    #[arg(long, value_name = "ADDR", requires = "peers")]
    pub share_listen: Option<SocketAddr>,
    /// Under mpirun (a build with the `mpi` feature): every rank is a
    /// receiver, as with --peers, the ranks finding each other through
    /// MPI. Rank 0 prints every rank's figures.
    #[arg(long, conflicts_with = "peers")]
    pub share: bool,
    /// This receiver's certificate chain (PEM): its server speaks TLS
    /// only, and the other receivers are reached over TLS too, checked
    /// against --ca-file (or the system's CAs) by the name or address
    /// they are listed under. Every receiver needs one.
    #[arg(long, value_name = "CERT.pem", requires = "share_key")]
    pub share_cert: Option<std::path::PathBuf>,
    /// The private key (PEM) of --share-cert.
    #[arg(long, value_name = "KEY.pem", requires = "share_cert")]
    pub share_key: Option<std::path::PathBuf>,
}

/// TLS between receivers (`--share-cert`): this one's server's, and how
/// it reaches the others.
#[derive(Clone, Default)]
pub struct PeerTls {
    server: Option<(std::path::PathBuf, std::path::PathBuf)>,
    client: Option<ddftp::session::Secure>,
}

impl ShareOpt {
    /// TLS between the receivers, with `how`'s CA file and client
    /// certificate: none without --share-cert.
    pub fn tls(&self, how: &super::flags::TlsOpt) -> Result<PeerTls, String> {
        let Some(server) = self.share_cert.clone().zip(self.share_key.clone()) else {
            let sharing = !self.peers.is_empty() || self.share;
            if sharing && how.tls {
                // Blocks from peers are verified either way; what TLS adds
                // is privacy, which needs each receiver's certificate.
                eprintln!("ddftp: warning: the receivers reach each other in plain TCP (--tls is for the mirrors): give each a --share-cert and --share-key for TLS between them");
            }
            return Ok(PeerTls::default());
        };
        let client = how.connector(true).map_err(|e| format!("--share-cert: {e}"))?;
        Ok(PeerTls { server: Some(server), client })
    }

    /// `--peers`, as the share of a download (its server comes later: a
    /// placeholder that serves nothing until [`ShareServer`] is up).
    pub fn peers(&self, to_stdout: bool) -> Result<Option<ddftp::transfer::share::Share>, String> {
        use ddftp::transfer::share::{Share as Sharing, ShareError};
        if self.peers.is_empty() {
            return Ok(None);
        }
        let mut peers = vec![];
        for p in &self.peers {
            match super::flags::parse_mirror(p) {
                // Over TLS or not, as `start` says (--share-cert).
                Ok(super::flags::Mirror::Ddftpd(ep, false, None)) => peers.push(ddftp::transfer::Peer::plain(ep)),
                Ok(_) => return Err(format!("--peers {p:?}: a peer is HOST:PORT (its --share-listen)")),
                Err(e) => return Err(format!("--peers: {e}")),
            }
        }
        if to_stdout {
            return Err("--peers: a receiver serves the file from its disk; give -o FILE, not -o -".into());
        }
        // Addresses given as numbers: this receiver must be among them.
        let listed: Option<Vec<SocketAddr>> = self.peers.iter().map(|p| p.parse().ok()).collect();
        let listen = self.share_listen.filter(|a| !a.ip().is_unspecified());
        let me = listen.and_then(|a| self.peers.iter().position(|p| p.parse() == Ok(a)));
        if listed.is_some() && listen.is_some() && me.is_none() {
            return Err(format!("--share: {}", ShareError::NotListed));
        }
        Ok(Some(Sharing { peers, me, sharing: Arc::new(Unstarted), wait: SHARE_WAIT }))
    }

    /// How this receiver learns of the others.
    pub fn mode(&self) -> Result<Mode, String> {
        Mode::of(self.share_listen, self.share)
    }
}

/// Starts this receiver's server as `mode` asks (over TLS if `tls` says)
/// and puts it (and, under MPI, the ranks' servers) in `spec`'s share;
/// `None` for a lone receiver.
pub async fn start(
    spec: &mut ddftp::transfer::GetSpec,
    mode: &Mode,
    tls: &PeerTls,
) -> Result<Option<ShareServer>, ddftp::transfer::share::ShareError> {
    use ddftp::transfer::share::ShareError;
    let listen = match mode {
        Mode::Alone => return Ok(None),
        Mode::Listen(a) => *a,
        #[cfg(feature = "mpi")]
        Mode::Ranks(_) => SocketAddr::new(toward(spec), 0),
    };
    let server =
        ShareServer::start(listen, spec.token.as_deref(), tls.server.as_ref()).await.map_err(ShareError::Listen)?;
    #[cfg(feature = "mpi")]
    if let Mode::Ranks(job) = mode {
        let peers = job.peers(server.addr());
        let me = Some(job.rank());
        spec.share = Some(ddftp::transfer::share::Share { peers, me, sharing: server.sharing(), wait: SHARE_WAIT });
    }
    if let Some(s) = &mut spec.share {
        s.sharing = server.sharing();
        for p in &mut s.peers {
            p.tls = tls.client.clone();
        }
    }
    Ok(Some(server))
}

/// Once this receiver's copy is whole: under MPI every rank serves on
/// until the last has its copy (here); otherwise the caller reports, then
/// serves on ([`ShareServer::linger`]) while the others take blocks.
pub fn serve_on(mode: &Mode, server: Option<ShareServer>) -> Option<ShareServer> {
    #[cfg(feature = "mpi")]
    if let Mode::Ranks(job) = mode {
        job.barrier();
        return None;
    }
    let _ = mode;
    server
}

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
    pub async fn start(
        listen: SocketAddr,
        token: Option<&[u8]>,
        tls: Option<&(std::path::PathBuf, std::path::PathBuf)>,
    ) -> Result<ShareServer, String> {
        let tls = tls
            .map(|(cert, key)| ddftpd::tls::Tls::new(cert, key, None))
            .transpose()
            .map_err(|e| format!("--share-cert: {e}"))?;
        let l = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("--share-listen {listen}: {e} (another receiver or program on that port?)"))?;
        let addr = l.local_addr().map_err(|e| format!("--share-listen {listen}: {e}"))?;
        let shares = Arc::new(Shares::only());
        let cfg = ServerConfig {
            token: token.map(<[u8]>::to_vec),
            shares: Some(shares.clone()),
            tls,
            log_errors: false,
            // The peers' streams wait for blocks that are on their way.
            idle_timeout: Duration::from_secs(60),
            // Every other receiver's connections (its pair, its relay and
            // the one it is told on), should they all come from one
            // address (several receivers on a node, NAT).
            max_per_client: 4 * ddops::fan::FLAT + 2,
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
    /// for a few seconds, at most ten minutes.
    pub async fn linger(mut self) {
        let (quiet, most) = (SHARE_QUIET, SHARE_LINGER);
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
        let share = match o.bytes {
            Offering::File { file, mtime, digest, hashes } => Share::new(file, o.size, mtime, digest, hashes.to_vec()),
            Offering::Sealed(store) => Share::sealed(Arc::new(Stored(store)), o.size),
        };
        let share = Arc::new(share);
        self.shares.offer(o.path, share.clone());
        Ok(Arc::new(Verified(share)))
    }

    fn decline(&self) {
        self.shares.decline()
    }
}

/// A bundle's bytes as the archive wrote them (its store reads beneath
/// DEST, never through a symlink).
struct Stored(Arc<dyn ddftp::store::Store>);

impl ReadAt for Stored {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.0.read_exact_at(buf, offset)
    }
}

struct Verified(Arc<Share>);

impl Offered for Verified {
    fn verified(&self, at: u64, len: u64) {
        self.0.verified(at, len)
    }

    fn fetching(&self, at: u64, len: u64, dir: ddftp_proto::Direction) {
        self.0.fetching(ddftpd::share::Fetching { at, len, dir })
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

    fn decline(&self) {}
}
