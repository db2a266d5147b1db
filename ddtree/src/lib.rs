//! ddtree: the tree walk and the file lists, shared by `ddftp` (the `walk`
//! and `archive` commands) and `ddftpd` (which walks for clients).
//!
//! # Layout
//! - [`walk`]: the parallel walk; [`walk::drqs`] spreads directories over
//!   threads with no master and ends by Dijkstra's token.
//! - [`beneath`]: opening below a directory, following no symlink.
//! - [`layout`]: entries' bytes back to back as one range (bundles).
//! - [`scratch`]: files written beside their final name, never through a symlink.
//! - [`follow`]: symlinks replaced by what they point to (rsync's `-L`).
//! - [`safe_links`]: which symlinks point outside the tree (rsync's
//!   `--safe-links` rule).
//! - [`list`]: file lists: ours ([`list::ddftp`]) and mpifileutils' v4
//!   ([`list::mfu`]).
pub mod attrs;
pub mod beneath;
pub mod files_from;
pub mod filter;
pub mod follow;
pub mod layout;
pub mod list;
pub mod names;
pub mod safe_links;
pub mod scratch;
pub mod walk;
