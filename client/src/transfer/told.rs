//! Telling and being told what the mirrors fetch of another receiver's
//! share (`--share`, flat groups): the transfer's side of
//! `ddops::scheduler`'s relays. Each peer that speaks `Tell` gets one
//! connection that only listens to it ([`listen`]), and one producer, its
//! relay, that reads the blocks it tells of.

use std::ops::Range;

use bytes::BytesMut;
use ddftp_proto::{Reply, Request};
use tokio::sync::mpsc;

use super::slot::Event;
use super::{connect, Route, Session};
use crate::session::{read_reply, send};

/// Two more connections to a peer that serves the file: its relay's, and
/// one asking it to tell (`Tell`); `None` if either cannot be had (the
/// peer then works without: its share as before).
pub(super) async fn ask(route: &Route, path: &str, token: Option<&[u8]>) -> Option<(Session, Session)> {
    let (relay, ..) = connect(route, None, token).await.ok()?;
    let (mut tells, ..) = connect(route, None, token).await.ok()?;
    let mut out = BytesMut::new();
    Request::Tell { path: path.to_string() }.encode(&mut out);
    send(&mut tells.sock, &out).await.ok()?;
    Some((relay, tells))
}

/// Listens to each telling peer (`(share, connection)`) until it closes
/// or the transfer ends (the tasks are `set`'s, aborted with it): each
/// `Fetching` becomes an [`Event::Told`] for blocks of `block_size`
/// bytes of a `size`-byte file. A peer that sends anything else is not
/// listened to any more (its relay is a producer like any, checked as
/// any).
pub(super) fn listen(
    tells: Vec<(usize, Session)>,
    events: &mpsc::Sender<Event>,
    (block_size, size): (u64, u64),
    set: &mut tokio::task::JoinSet<()>,
) {
    for (home, mut session) in tells {
        let events = events.clone();
        set.spawn(async move {
            let mut buf = BytesMut::with_capacity(4096);
            while let Ok(Reply::Fetching { at, len, dir }) = read_reply(&mut session.sock, &mut buf).await {
                let Some(blocks) = blocks_within(at, len, block_size, size) else { continue };
                if events.send(Event::Told { home, blocks, dir }).await.is_err() {
                    return;
                }
            }
        });
    }
}

/// The whole blocks inside bytes `at..at + len` of a `size`-byte file
/// (the last block may be short), if any.
pub(super) fn blocks_within(at: u64, len: u64, block_size: u64, size: u64) -> Option<Range<u64>> {
    let end = at.checked_add(len)?.min(size);
    if block_size == 0 || end <= at {
        return None;
    }
    let first = at.div_ceil(block_size);
    let last = match end == size {
        true => size.div_ceil(block_size),
        false => end / block_size,
    };
    (first < last).then_some(first..last)
}

/// Blocks `blocks` as bytes of a `size`-byte file: what to tell.
pub(super) fn bytes_of(blocks: &Range<u64>, block_size: u64, size: u64) -> (u64, u64) {
    let at = blocks.start.saturating_mul(block_size).min(size);
    let end = blocks.end.saturating_mul(block_size).min(size);
    (at, end - at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn only_whole_blocks_are_taken_and_the_last_may_be_short() {
        assert_eq!(blocks_within(0, 4096, 1024, 10_000), Some(0..4));
        assert_eq!(blocks_within(100, 4096, 1024, 10_000), Some(1..4));
        assert_eq!(blocks_within(9216, 784, 1024, 10_000), Some(9..10));
        assert_eq!(blocks_within(9216, 10_000, 1024, 10_000), Some(9..10));
        assert_eq!(blocks_within(100, 500, 1024, 10_000), None);
        assert_eq!(blocks_within(u64::MAX, 5, 1024, 10_000), None);
        assert_eq!(blocks_within(20_000, 5, 1024, 10_000), None);
        assert_eq!(bytes_of(&(9..10), 1024, 10_000), (9216, 784));
    }

    proptest! {
        /// Whatever a peer tells, the blocks taken lie inside the file and
        /// inside what it told; blocks told as bytes come back the same.
        #[test]
        fn told_bytes_give_blocks_inside_them(at in any::<u64>(), len in any::<u64>(),
                                              bs in 1u64..1 << 24, size in 0u64..1 << 40) {
            if let Some(b) = blocks_within(at, len, bs, size) {
                let (a, l) = bytes_of(&b, bs, size);
                prop_assert!(a >= at && a + l <= at.saturating_add(len).min(size) && l > 0);
                prop_assert_eq!(blocks_within(a, l, bs, size), Some(b));
            }
        }
    }
}
