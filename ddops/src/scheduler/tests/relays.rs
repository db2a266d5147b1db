//! Relays (`scheduler/relay.rs`): what another receiver's mirrors fetch
//! of a third's share is read from it, told so.

use super::homes::{harness_of, homes, span_of, WHOLE};
use super::*;

/// [`homes`], each peer with a relay: 6 for share 0's receiver, 7 for
/// share 2's.
fn relay_homes() -> Vec<Home> {
    let mut h = homes();
    h[0].relay = Some(6);
    h[2].relay = Some(7);
    h
}

/// Blocks `p` delivered, in the order they came.
fn delivered_by(h: &Harness, p: ProducerId) -> Vec<(u64, u64, Direction)> {
    h.log
        .iter()
        .filter_map(|a| match *a {
            Action::Start { producer, first, last, dir, .. } if producer == p => Some((first, last, dir)),
            _ => None,
        })
        .collect()
}

#[test]
fn blocks_a_peer_tells_it_fetches_of_a_third_share_are_read_from_its_relay_in_that_order() {
    let mut h = harness_of(&relay_homes(), &[WHOLE], 60, tight());
    // Receiver 0's mirrors fetch blocks 45..50 of receiver 2's share,
    // from the top down.
    h.s.on_told(0, 45..50, Direction::Decrement, h.now);
    h.pump();
    assert_eq!(delivered_by(&h, 6).first().map(|s| (s.0, s.2)), Some((49, Direction::Decrement)), "{:?}", h.log);
    h.run_round_robin();
    h.assert_each_block_once();
    let (lo, hi) = span_of(&h, 6).expect("the relay worked");
    assert!(lo >= 45 && hi <= 49, "the relay reads only what it was told: {:?}", delivered_by(&h, 6));
    assert!(h.s.contributions()[6] > 0);
    // Share 2's own receiver never sent them.
    for p in [4, 5] {
        assert!(delivered_by(&h, p).iter().all(|&(a, b, _)| a.max(b) < 45 || a.min(b) >= 50), "{:?}", h.log);
    }
}

#[test]
fn a_peer_telling_of_this_receiver_s_own_share_or_of_its_own_is_not_heeded() {
    let mut h = harness_of(&relay_homes(), &[WHOLE], 60, tight());
    h.s.on_told(0, 20..40, Direction::Increment, h.now);
    h.s.on_told(0, 0..20, Direction::Increment, h.now);
    h.s.on_told(5, 0..60, Direction::Increment, h.now);
    h.s.on_told(1, 40..60, Direction::Increment, h.now);
    h.pump();
    assert!(delivered_by(&h, 6).is_empty() && delivered_by(&h, 7).is_empty(), "{:?}", h.log);
}

#[test]
fn the_mirrors_grants_on_another_share_are_told_and_never_read_back() {
    let mut h = harness_of(&relay_homes(), &[WHOLE], 60, tight());
    // Share 2's receiver is slow: the mirrors help it.
    let mut round = 0u64;
    let mut told = vec![];
    while !h.s.is_done() {
        for p in 0..8 {
            if h.has_work(p) && (!(4..6).contains(&p) || round.is_multiple_of(16)) {
                h.deliver(p);
            }
        }
        while let Some(t) = h.s.poll_told() {
            told.push(t);
        }
        // What it told, told back by another receiver: not read from it.
        for t in &told {
            h.s.on_told(0, t.blocks.clone(), t.dir, h.now);
        }
        h.pump();
        round += 1;
        h.now += Duration::from_millis(100);
        assert!(round < 100_000, "no progress");
    }
    h.assert_each_block_once();
    assert!(!told.is_empty(), "the mirrors helped share 2 and said so");
    for t in &told {
        assert!(t.blocks.start >= 40 && t.blocks.end <= 60, "only another's share is told: {t:?}");
    }
    assert!(delivered_by(&h, 6).is_empty(), "{:?}", delivered_by(&h, 6));
}

#[test]
fn a_lost_relay_s_blocks_go_back_to_the_mirrors() {
    let mut h = harness_of(&relay_homes(), &[WHOLE], 60, tight());
    h.s.on_told(0, 42..58, Direction::Increment, h.now);
    h.pump();
    h.deliver(6);
    h.fail(6);
    h.run_round_robin();
    h.assert_each_block_once();
    assert_eq!(h.s.contributions()[6], 1);
}

#[test]
fn runs_told_one_after_another_are_one_stream_of_the_relay() {
    let mut h = harness_of(&relay_homes(), &[WHOLE], 60, tight());
    for at in (44..56).step_by(4) {
        h.s.on_told(2, at..at + 4, Direction::Increment, h.now);
        h.pump();
    }
    h.run_round_robin();
    h.assert_each_block_once();
    // Told by share 2's receiver of share 2: not heeded (it is its own);
    // told by share 0's instead:
    assert!(delivered_by(&h, 7).is_empty());
    let mut h = harness_of(&relay_homes(), &[WHOLE], 60, tight());
    for at in (44..56).step_by(4) {
        h.s.on_told(0, at..at + 4, Direction::Increment, h.now);
        h.pump();
    }
    let starts = delivered_by(&h, 6);
    assert_eq!(starts.len(), 1, "one Start, then Extends: {starts:?}");
    h.run_round_robin();
    h.assert_each_block_once();
    assert_eq!(h.s.contributions()[6], 12, "the relay brought all it was told of");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    /// Whatever peers tell (any home, any range, either order, at any
    /// time, a relay lost on the way), every block still comes exactly
    /// once and the transfer ends.
    #[test]
    fn whatever_peers_tell_every_block_comes_once(
        told in proptest::collection::vec((0usize..5, 0u64..80, 0u64..40, any::<bool>(), 0u64..40), 0..12),
        lose in proptest::option::of(6usize..8),
    ) {
        let mut h = harness_of(&relay_homes(), &[WHOLE], 60, tight());
        let mut round = 0u64;
        let mut told = told;
        while !h.s.is_done() {
            for p in 0..8 {
                if h.has_work(p) && (!(4..6).contains(&p) || round.is_multiple_of(8)) {
                    h.deliver(p);
                }
            }
            let now: Vec<_> = told.iter().filter(|t| t.4 == round).cloned().collect();
            told.retain(|t| t.4 != round);
            for (home, at, len, down, _) in now {
                let dir = if down { Direction::Decrement } else { Direction::Increment };
                h.s.on_told(home, at..at + len, dir, h.now);
            }
            if round == 10 {
                if let Some(p) = lose {
                    h.fail(p);
                }
            }
            while h.s.poll_told().is_some() {}
            h.pump();
            round += 1;
            h.now += Duration::from_millis(100);
            prop_assert!(round < 20_000, "no progress");
        }
        h.assert_each_block_once();
    }
}
