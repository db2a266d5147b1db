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
//!   version of a file in memory and in an index directory.
//! - [`indexer`]: `ddftpd index DIR`, the digests of a whole tree ahead of time.
//! - [`bundle`]: many files served as one range (`ddftp archive`).
//! - [`connection`]: one client connection: handshake, stat, streams.
//! - [`socket`]: `sendfile`, `MSG_MORE` and `TCP_NOTSENT_LOWAT`.
//! - [`tls`]: a TLS listener's handshake (`--tls-cert`, `--client-ca`).
//! - [`per_client`], [`privileges`]: `--max-per-client`, `--user`.
//! - [`server`]: accepts connections, caps their number, stops on a signal.

pub mod access;
pub mod bundle;
pub mod connection;
pub mod digests;
pub mod indexer;
pub mod per_client;
pub mod privileges;
pub use ddnet::ratelimit;
pub mod root;
pub mod server;
pub mod socket;
pub mod throttle;
pub mod tls;

pub use server::{serve, Server, ServerConfig};

/// Logs to stderr through `tracing`: `DDFTP_LOG` (e.g. `debug`,
/// `ddftp_server=trace`) if set, else `default` (`info`, `warn`...).
pub fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DDFTP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).without_time().try_init();
}
