//! ddtree: the tree walk and the file lists, shared by `ddftp` (the `walk`
//! and `archive` commands) and `ddftpd` (which walks for clients).
//!
//! # Layout
//! - [`walk`]: the parallel walk; [`walk::drqs`] spreads directories over
//!   threads with no master and ends by Dijkstra's token.
//! - [`list`]: file lists: ours ([`list::ddftp`]) and mpifileutils' v4
//!   ([`list::mfu`]).
pub mod list;
pub mod walk;
