//! ddftp, the DDOps consumer: library behind the `ddftp` command.
//!
//! # Layout
//! - [`scheduler`]: the sans-IO DDOps state machine (pairs, meetings, helpers).
//! - [`sim`]: the scheduler against simulated producers (`ddftp simulate`).
pub mod scheduler;
pub mod sim;
