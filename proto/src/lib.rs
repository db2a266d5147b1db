//! ddftp's wire protocol: what the consumer (`ddftp`) and the producer
//! (`ddftpd`) say to each other, and the few conventions both ends must agree
//! on (default port, byte-size notation).
//!
//! No I/O, no clock and no randomness here (the server draws nonces), so
//! every rule about bytes on the wire can be tested exactly and fuzzed.
//!
//! # Layout
//! - [`frame`]: the messages ([`Request`], [`Reply`]), their encoding, and a
//!   decoder that distinguishes "need more bytes" from "malformed".
//! - [`manifest`]: file and chunk digests (SHA-256) and the chunk size.
//! - [`auth`]: shared-token challenge-response (HMAC-SHA256).
//! - [`cursor`]: a stream's walk (next block, bound, direction), shared by
//!   the server that sends and the client that checks.
//! - [`streams`]: a producer's streams (one running, one `Start` waiting),
//!   the rules the server, the simulator and the scheduler's tests share.
//! - [`units`]: byte sizes and rates as users type them (`40MB`, `512KiB`).
//! - [`addr`]: `HOST[:PORT]` with the default port and bracketed IPv6.
//! - [`packed`]: lists (walks, bundle definitions) packed with LZ4 on the wire.
//! - [`relpath`]: the one check of a relative path below a directory.

pub mod addr;
pub mod auth;
pub mod busy;
pub mod cursor;
pub mod frame;
pub mod manifest;
pub mod packed;
pub mod relpath;
pub mod rolling;
pub mod session;
pub mod shown;
pub mod streams;
pub mod units;

pub use addr::{parse_endpoint, Endpoint, DEFAULT_PORT};
pub use cursor::Cursor;
pub use frame::{Direction, ErrorCode, ProtoError, Reply, Request};
pub use manifest::{FileDigest, Hash};
