//! What every connection of a server shares, and the phase of the
//! server's life they watch. The server makes it; connections, the TLS
//! acceptor and the watcher read it.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use ddftp_proto::frame::SERVER_ID_LEN;
use tokio::sync::{watch, Semaphore};

use crate::access::Cidr;
use crate::bundle::Bundles;
use crate::digests::Index;
use crate::metrics::Metrics;
use crate::ratelimit::RateLimiter;
use crate::root::Root;

/// Where a server is in its life: connections watch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Running,
    /// No new connections; running streams go on, idle connections close.
    Draining,
    /// Past the grace period: every connection closes now.
    Closing,
}

/// What every connection shares.
#[derive(Debug)]
pub struct Shared {
    pub root: Root,
    pub limiter: RateLimiter,
    /// A connection with no stream and no request for this long is closed
    /// (no slowloris).
    pub idle_timeout: Duration,
    /// Shared token clients must prove they know (`--token-file`;
    /// replaced on reload).
    pub token: RwLock<Option<Arc<[u8]>>>,
    /// Networks allowed to connect (`--allow`; replaced on reload).
    pub allow: RwLock<Arc<[Cidr]>>,
    /// What the server counts (`--metrics`).
    pub metrics: Arc<Metrics>,
    /// Running, draining or closing: every connection watches it.
    pub phase: watch::Sender<Phase>,
    /// Wrong proofs of it, per client address.
    pub failed_proofs: crate::throttle::Throttle,
    /// Largest block a client may ask for: bounds what one block costs the
    /// client (its receive buffer) and how long one block delays an `End`.
    pub max_block_size: u32,
    /// Who this server is (random at each start), told in `Hello`.
    pub server_id: [u8; SERVER_ID_LEN],
    /// File digests, computed once per version.
    pub index: Index,
    /// Bundles clients defined (`ddftp archive`), shared by all connections.
    pub bundles: Bundles,
    /// Bytes of bundle definitions all connections may hold while uploading.
    pub uploads: Arc<Semaphore>,
    /// One definition is registered at a time.
    pub defining: Arc<Semaphore>,
    /// Files receivers download and share as they go (`ddftp get --share`).
    pub shares: Arc<crate::share::Shares>,
    /// Walks running at once; more wait their turn.
    pub walks: Arc<Semaphore>,
}
