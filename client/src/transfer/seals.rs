//! The mirrors' seals of a bundle's blocks, for the blocks another
//! receiver sends (`archive --share`): a bundle has no chunk manifest, and
//! a peer's own seal vouches for nothing (a lying peer seals its lie), so
//! each block from a peer is checked against the seal a mirror gives for
//! it (`Request::Seals`), asked for a run at a time in the direction the
//! stream goes.

use std::collections::HashMap;
use std::sync::Mutex;

use ddftp_proto::frame::MAX_SEALS_BYTES;
use ddftp_proto::manifest::Hash;
use ddftp_proto::Direction;

use crate::session::{Route, Session, SessionError};

/// Seals asked for at once: one round trip per this many blocks a stream
/// takes from a peer (fewer of large blocks: [`MAX_SEALS_BYTES`]).
const RUN: u64 = 256;

/// The seals asked for and not yet used, and the mirror asked.
pub(super) struct Book {
    path: String,
    block_size: u32,
    blocks: u64,
    routes: Vec<Route>,
    token: Option<std::sync::Arc<[u8]>>,
    /// Each seal is used once (a block comes once, unless it came corrupt)
    /// and then forgotten: what is kept is what was asked ahead.
    known: Mutex<HashMap<u64, Hash>>,
    /// The connection to a mirror (one question at a time).
    asking: tokio::sync::Mutex<Option<Session>>,
}

impl Book {
    pub(super) fn new(
        path: &str,
        block_size: u32,
        size: u64,
        routes: Vec<Route>,
        token: Option<std::sync::Arc<[u8]>>,
    ) -> Book {
        Book {
            path: path.to_string(),
            block_size,
            blocks: size.div_ceil(u64::from(block_size.max(1))),
            routes,
            token,
            known: Mutex::default(),
            asking: tokio::sync::Mutex::new(None),
        }
    }

    /// The mirrors' seal of `block`, which a stream going `dir` brought.
    pub(super) async fn seal(&self, block: u64, dir: Direction) -> Result<Hash, SessionError> {
        if let Some(h) = self.take(block) {
            return Ok(h);
        }
        let mut asking = self.asking.lock().await;
        // Asked for while this one waited its turn.
        if let Some(h) = self.take(block) {
            return Ok(h);
        }
        let most = (MAX_SEALS_BYTES / u64::from(self.block_size.max(1))).clamp(1, RUN);
        let (first, count) = run(block, dir, self.blocks, most);
        let mut last = SessionError::NoReply;
        // The connection in hand, else each mirror's in turn.
        let mut held = asking.take();
        let mut next = 0;
        loop {
            let mut session = match held.take() {
                Some(s) => s,
                None => {
                    let Some(r) = self.routes.get(next) else { return Err(last) };
                    next += 1;
                    match Session::open(r, self.token.as_deref()).await {
                        Ok(s) => s,
                        Err(e) => {
                            last = e;
                            continue;
                        }
                    }
                }
            };
            match session.seals(&self.path, self.block_size, first, count as u32).await {
                Ok(hashes) => {
                    *asking = Some(session);
                    let mut known = self.known.lock().expect("seals lock");
                    known.extend((first..).zip(hashes));
                    return known.remove(&block).ok_or(SessionError::NoReply);
                }
                Err(e) => last = e,
            }
        }
    }

    fn take(&self, block: u64) -> Option<Hash> {
        self.known.lock().expect("seals lock").remove(&block)
    }
}

/// The run of seals to ask for when `block` is needed by a stream going
/// `dir`: `block` and those after it in that direction, within the range,
/// at most `most`.
fn run(block: u64, dir: Direction, blocks: u64, most: u64) -> (u64, u64) {
    match dir {
        Direction::Increment => (block, (blocks - block.min(blocks)).clamp(1, most)),
        Direction::Decrement => {
            let first = block.saturating_sub(most - 1);
            (first, block - first + 1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_run_goes_the_stream_s_way_and_stays_in_the_range() {
        assert_eq!(run(0, Direction::Increment, 1000, RUN), (0, RUN));
        assert_eq!(run(990, Direction::Increment, 1000, RUN), (990, 10));
        assert_eq!(run(999, Direction::Decrement, 1000, RUN), (999 - (RUN - 1), RUN));
        assert_eq!(run(3, Direction::Decrement, 1000, RUN), (0, 4));
        assert_eq!(run(500, Direction::Decrement, 1000, 1), (500, 1));
    }

    proptest! {
        /// Whatever block and way: the run holds the block, at most RUN
        /// blocks, all within the range.
        #[test]
        fn a_run_holds_its_block(blocks in 1u64..1_000_000, at in any::<u64>(), inc in any::<bool>(), most in 1..=RUN) {
            let block = at % blocks;
            let dir = if inc { Direction::Increment } else { Direction::Decrement };
            let (first, count) = run(block, dir, blocks, most);
            prop_assert!((1..=most).contains(&count));
            prop_assert!(first <= block && block < first + count);
            prop_assert!(first + count <= blocks);
        }
    }
}
