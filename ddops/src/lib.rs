//! Dual-Direction Operations (DDOps), with no I/O and no clock of its own:
//! whoever drives it passes `now` in and carries out what it asks.
//!
//! - [`scheduler`]: pairs of producers working a range of items from both
//!   ends, helpers splitting the busiest pair's rest by contribution
//!   (`handle`-style events in, `poll_action` out). The items may be blocks
//!   of a file, files of a tree, or any range of work.
//! - [`transfer`]: the scheduler plus the rules around it (stalls,
//!   failures, corruption, first grants, joins): what `get`, `archive` and
//!   the simulator drive.
//! - [`consensus`]: the majority vote that drops stale mirrors.
//! - [`completed`]: which items have arrived (prefix, ranges, missing).
//! - [`deal`]: one range dealt in shrinking parts from both ends to
//!   movers that ask as they finish (an archive's MPI ranks).
//! - [`sim`]: the scheduler against simulated producers (`ddftp simulate`).
//! - [`split`]: where a busy segment is cut (the one split rule, also
//!   `ddnet`'s).

pub mod completed;
pub mod consensus;
pub mod deal;
pub mod fan;
pub mod scheduler;
pub mod sim;
pub mod split;
pub mod transfer;
