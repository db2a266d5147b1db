//! ddftpd, the DDOps producer: serves the files under a root directory.
//!
//! It knows nothing of other producers. Each connection carries one stream
//! at a time: on `Start` it sends blocks from `first` towards `last` (up or
//! down), moves `last` on `Extend`, stops on `End` or at `last`, and says how
//! many blocks it sent. That is the whole producer side of DDOps.
//!
//! # Layout
//! - [`root`]: maps a client's path to a file under the root, refusing
//!   anything that would leave it.
//! - [`ratelimit`]: one token bucket shared by every connection
//!   (`--rate-limit`), adjustable while running.
//! - [`access`]: `--allow CIDR`.
//! - [`digests`]: whole-file SHA-256 and chunk manifests, cached per
//!   version of a file in memory and in an index directory, outside the
//!   root unless asked ([`index_home`]).
//! - [`indexer`]: `ddftpd index DIR`, the digests of a whole tree ahead of time.
//! - [`watcher`]: indexing of files published while serving (inotify, rescan).
//! - [`bundle`]: many files served as one range (`ddftp archive`).
//! - [`connection`]: one client connection: handshake, stat, streams.
//! - [`socket`]: `sendfile`, `MSG_MORE` and `TCP_NOTSENT_LOWAT`.
//! - [`tls`]: a TLS listener's handshake (`--tls-cert`, `--client-ca`).
//! - [`per_client`], [`privileges`]: `--max-per-client`, `--user`.
//! - [`metrics`]: what the server counts, as the Prometheus text format;
//!   [`exporter`] serves it (`--metrics ADDR`) with [`process_metrics`].
//! - [`share`]: a file a receiver serves while it downloads it
//!   (`ddftp get --share`), block by verified block.
//! - [`server`]: accepts connections, caps their number, drains on shutdown.

pub mod access;
pub mod bundle;
pub mod connection;
pub mod digests;
pub mod exporter;
pub mod index_home;
pub mod indexer;
pub mod logline;
pub mod metrics;
pub mod only;
pub mod per_client;
pub mod privileges;
pub mod process_metrics;
pub use ddnet::ratelimit;
pub mod root;
pub mod seals;
pub mod server;
pub mod session;
pub mod share;
pub mod shared;
pub mod socket;
pub mod throttle;
pub mod tls;
pub mod watcher;

pub use server::{serve, Reload, Server, ServerConfig};
pub use shared::Phase;
