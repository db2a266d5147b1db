//! ddftp, the DDOps consumer: the library behind the `ddftp` command.
//!
//! # Layout
//! - [`scheduler`], [`sim`], [`consensus`]: from the `ddops` crate (the
//!   sans-IO DDOps state machine, its simulator, the majority vote).
//! - [`session`]: one connection to a mirror, up to where blocks stream.
//! - [`transfer`]: sockets and positional writes driving the scheduler (`get`).
//! - [`manifest`]: chunk hashes, fetched once, checked on every block.
//! - [`nic`]: `--nic IFACE` to the interface's addresses.
//! - [`store`]: where a transfer's bytes land (a part file, an archive's files).
//! - [`digest`]: SHA-256 of the output, hashed in order while blocks arrive.
//! - [`journal`]: the resume journal beside a part file.
//! - [`progress`]: the terminal progress bar.
//! - [`archive`]: a tree as one bundle through the same engine (`archive`).
//!
//! The command line is not here: it is the `ddftp-cli` crate's (`cli/`),
//! so this library needs neither clap nor the server.
pub mod archive;
pub mod checksum;
pub mod delta;
pub mod digest;
pub mod http;
pub mod input_list;
pub mod journal;
pub mod manifest;
pub mod metalink;
pub mod nic;
pub mod pool;
pub mod progress;
pub mod reach;
pub mod retry;
pub mod route;
pub mod session;
pub mod ssh;
pub mod stdout;
pub mod store;
pub mod transfer;

pub use ddops::{consensus, scheduler, sim};
