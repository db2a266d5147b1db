//! The rules around the scheduler, driven by hand with a fake clock.

use super::*;
use crate::scheduler::Action;

fn cfg() -> Config {
    Config { stall_timeout: Duration::from_secs(5), ..Config::default() }
}

fn actions(t: &mut Transfer) -> Vec<Action> {
    std::iter::from_fn(|| t.poll_action()).collect()
}

fn start_of(a: &[Action], p: ProducerId) -> (StreamId, u64, u64, Direction) {
    a.iter()
        .find_map(|a| match *a {
            Action::Start { producer, stream, first, last, dir } if producer == p => Some((stream, first, last, dir)),
            _ => None,
        })
        .expect("a Start for the producer")
}

fn one(stream: StreamId, first: u64, dir: Direction) -> BlockRun {
    BlockRun { stream, first, count: 1, bytes: 1, dir }
}

#[test]
fn a_producer_owing_items_that_sends_none_is_dropped_at_its_timeout() {
    let t0 = Instant::now();
    let mut t = Transfer::fresh(1000, &[0, 1], 2, &cfg(), t0);
    let a = actions(&mut t);
    let (s0, first, _, dir) = start_of(&a, 0);
    assert_eq!(t.poll_timeout(), Some(t0 + Duration::from_secs(5)));
    // Producer 0 delivers at 3 s; producer 1 never does.
    let at3 = t0 + Duration::from_secs(3);
    t.handle_blocks(0, one(s0, first, dir), at3);
    assert_eq!(t.poll_timeout(), Some(t0 + Duration::from_secs(5)), "producer 1's clock still runs");
    t.handle_timeout(t0 + Duration::from_secs(5));
    let ev = t.poll_event().expect("producer 1 dropped");
    assert_eq!(ev, Event::Dropped { producer: 1, mirror: 1, why: DropReason::Stalled(Duration::from_secs(5)) });
    assert!(t.poll_event().is_none(), "producer 0 delivered 2 s ago");
    assert_eq!(t.poll_timeout(), Some(at3 + Duration::from_secs(5)));
}

#[test]
fn a_producer_whose_bytes_keep_coming_is_not_stalled_however_long_an_item_takes() {
    let t0 = Instant::now();
    let mut t = Transfer::fresh(1000, &[0, 1], 2, &cfg(), t0);
    actions(&mut t);
    // Each first item takes 12 s over its link: bytes every 4 s.
    for s in [4, 8, 12] {
        let at = t0 + Duration::from_secs(s);
        t.handle_bytes(0, at);
        t.handle_bytes(1, at);
        t.handle_timeout(at);
    }
    assert!(t.poll_event().is_none(), "bytes came: not stalled");
    assert_eq!(t.poll_timeout(), Some(t0 + Duration::from_secs(17)));
    t.handle_timeout(t0 + Duration::from_secs(17));
    let dropped: Vec<ProducerId> =
        std::iter::from_fn(|| t.poll_event()).map(|Event::Dropped { producer, .. }| producer).collect();
    assert_eq!(dropped, vec![0, 1], "nothing for 5 s: both stalled");
}

#[test]
fn a_producer_that_says_it_waits_for_its_source_is_not_stalled_up_to_its_limit() {
    let t0 = Instant::now();
    let mut t = Transfer::fresh(1000, &[0, 1], 2, &cfg(), t0);
    let a = actions(&mut t);
    let (s1, first, _, dir) = start_of(&a, 1);
    let at = |s: u64| t0 + Duration::from_secs(s);
    // Producer 1 (a receiver whose own source is slow) says every second
    // that it waits; producer 0 says nothing.
    for s in 1..=12 {
        t.handle_waiting(1, at(s));
        t.handle_timeout(at(s));
    }
    let ev = t.poll_event().expect("producer 0 stalled at 5 s");
    assert_eq!(ev, Event::Dropped { producer: 0, mirror: 0, why: DropReason::Stalled(Duration::from_secs(5)) });
    assert!(t.poll_event().is_none(), "producer 1 said it waits");
    // An item resets its wait: the limit counts from the next time it says so.
    t.handle_blocks(1, one(s1, first, dir), at(13));
    for s in 14..=43 {
        t.handle_waiting(1, at(s));
        t.handle_timeout(at(s));
    }
    assert!(t.poll_event().is_none(), "29 s of waiting, within 6 stall timeouts");
    // From 44 s (30 s after it began to wait) its word counts for nothing:
    // 5 s after the last that counted it is stalled, silent for 34 s.
    for s in 44..=48 {
        t.handle_waiting(1, at(s));
        t.handle_timeout(at(s));
    }
    let ev = t.poll_event().expect("producer 1 stalled 5 s after its limit");
    assert_eq!(ev, Event::Dropped { producer: 1, mirror: 1, why: DropReason::Stalled(Duration::from_secs(34)) });
}

#[test]
fn a_corrupt_item_drops_every_producer_of_its_mirror() {
    let t0 = Instant::now();
    // Producers 0 and 2 are both mirror 0 (two links to it).
    let mut t = Transfer::fresh(1000, &[0, 1, 0], 2, &cfg(), t0);
    actions(&mut t);
    t.handle_corrupt(2, 17, t0);
    let dropped: Vec<(ProducerId, DropReason)> =
        std::iter::from_fn(|| t.poll_event()).map(|Event::Dropped { producer, why, .. }| (producer, why)).collect();
    assert_eq!(dropped, vec![(2, DropReason::Corrupt { item: 17 }), (0, DropReason::MirrorCorrupt { on: 2 })]);
    assert!(!t.is_dropped(1) && !t.every_mirror_corrupt());
    t.handle_corrupt(1, 3, t0);
    assert!(t.is_stuck() && t.every_mirror_corrupt());
}

#[test]
fn a_producer_asked_for_items_late_gets_a_whole_timeout() {
    let t0 = Instant::now();
    let mut t = Transfer::fresh(2000, &[0, 1], 2, &cfg(), t0);
    let a = actions(&mut t);
    let (s0, f0, _, d0) = start_of(&a, 0);
    let (s1, f1, _, d1) = start_of(&a, 1);
    let at4 = t0 + Duration::from_secs(4);
    t.handle_blocks(0, one(s0, f0, d0), at4);
    t.handle_blocks(1, one(s1, f1, d1), at4);
    // A mirror joining at 8 s owed nothing before: its clock starts then.
    let at8 = t0 + Duration::from_secs(8);
    let m = t.add_mirror();
    let p = t.handle_join(m, at8);
    assert!(actions(&mut t).iter().any(|a| matches!(a, Action::Start { producer, .. } if *producer == p)));
    t.handle_timeout(at4 + Duration::from_secs(5));
    let dropped: Vec<ProducerId> =
        std::iter::from_fn(|| t.poll_event()).map(|Event::Dropped { producer, .. }| producer).collect();
    assert_eq!(dropped, vec![0, 1], "the joiner's 5 s run from 8 s");
    assert_eq!(t.poll_timeout(), Some(at8 + Duration::from_secs(5)));
}

#[test]
fn first_grants_are_bounded_in_bytes() {
    let t0 = Instant::now();
    // 1 MiB blocks: 4 MiB, 4 blocks before any rate is known.
    let mut t = Transfer::fresh(10_000, &[0, 1], 2, &Config::for_blocks(1 << 20), t0);
    let (_, first, last, dir) = start_of(&actions(&mut t), 0);
    assert_eq!(dir.span(first, last), 4);
}

#[test]
fn a_violation_drops_the_producer_and_its_range_goes_to_the_others() {
    let t0 = Instant::now();
    let mut t = Transfer::fresh(100, &[0, 1], 2, &cfg(), t0);
    actions(&mut t);
    t.handle_blocks(0, one(999, 0, Direction::Increment), t0);
    assert!(matches!(t.poll_event(), Some(Event::Dropped { producer: 0, why: DropReason::Violation(_), .. })));
    assert!(!t.is_stuck());
}

#[test]
fn resumed_transfers_fetch_only_what_is_missing() {
    let t0 = Instant::now();
    let mut done = Completed::new(100);
    done.mark(0, 49);
    done.mark(80, 99);
    let mut t = Transfer::new(done, &[0, 1], 2, &cfg(), t0);
    for a in actions(&mut t) {
        if let Action::Start { first, last, .. } = a {
            assert!((50..80).contains(&first) && (50..80).contains(&last), "{a:?}");
        }
    }
}

/// Producers that carry out every action at once: each stream delivers
/// its whole claim.
#[derive(Default)]
struct Eager {
    /// Each stream's producer, next block, last block and direction.
    streams: std::collections::HashMap<StreamId, (ProducerId, u64, u64, Direction)>,
}

impl Eager {
    /// Delivers until the transfer asks for nothing more; what it asked.
    fn deliver_all(&mut self, t: &mut Transfer, now: Instant) -> Vec<Action> {
        let mut seen = vec![];
        for _ in 0..1000 {
            let a = actions(t);
            if a.is_empty() {
                return seen;
            }
            for a in a {
                seen.push(a.clone());
                match a {
                    Action::Start { producer, stream, first, last, dir } => {
                        self.streams.insert(stream, (producer, first, last, dir));
                    }
                    Action::Extend { stream, last, .. } => self.streams.get_mut(&stream).expect("started").2 = last,
                    Action::End { producer, stream } => t.handle_stopped(producer, stream, 0, now),
                }
            }
            let mut ids: Vec<_> = self.streams.keys().copied().collect();
            ids.sort();
            for id in ids {
                let (p, next, last, dir) = self.streams[&id];
                let count = match dir {
                    Direction::Increment if next <= last => last - next + 1,
                    Direction::Decrement if next >= last && next != u64::MAX => next - last + 1,
                    _ => continue,
                };
                t.handle_blocks(p, BlockRun { stream: id, first: next, count, bytes: count, dir }, now);
                let after = match dir {
                    Direction::Increment => next + count,
                    Direction::Decrement => next.wrapping_sub(count),
                };
                self.streams.get_mut(&id).expect("live").1 = after;
            }
        }
        panic!("the transfer never settles");
    }
}

#[test]
fn a_range_failing_as_one_piece_is_fetched_again_and_its_only_sender_dropped() {
    let t0 = Instant::now();
    let mut t = Transfer::fresh(64, &[0, 1], 2, &cfg(), t0);
    let mut eager = Eager::default();
    eager.deliver_all(&mut t, t0);
    assert!(t.is_done() && t.completed().prefix() == 64);
    // A piece of blocks 8..=15 that mirror 0 sent fails: 0 goes, 1 refetches.
    t.handle_bad_range(8, 15, Some(0), t0);
    assert!(!t.is_done() && t.completed().prefix() == 8);
    let dropped: Vec<_> = std::iter::from_fn(|| t.poll_event()).collect();
    assert_eq!(
        dropped,
        vec![Event::Dropped { producer: 0, mirror: 0, why: DropReason::RangeCorrupt { first: 8, last: 15 } }]
    );
    eager.deliver_all(&mut t, t0);
    assert!(t.is_done() && t.completed().prefix() == 64 && t.producer_delivered(1).0 >= 8);
    // Blame unknown (several mirrors sent it): refetched, nobody dropped.
    t.handle_bad_range(0, 3, None, t0);
    assert!(t.poll_event().is_none() && !t.is_done());
    eager.deliver_all(&mut t, t0);
    assert!(t.is_done() && t.stats().duplicate_blocks == 0);
}

#[test]
fn a_windowed_transfer_hands_out_nothing_past_its_window() {
    let t0 = Instant::now();
    let mut t = Transfer::windowed(100, 20, &[0, 1], 2, &cfg(), t0);
    let beyond = |a: &[Action], lim: u64| {
        a.iter().any(|a| match *a {
            Action::Start { first, last, .. } => first.max(last) >= lim,
            Action::Extend { last, .. } => last >= lim,
            Action::End { .. } => false,
        })
    };
    let (mut limit, mut eager) = (20, Eager::default());
    loop {
        let a = eager.deliver_all(&mut t, t0);
        assert!(!beyond(&a, limit), "past {limit}: {a:?}");
        assert_eq!(t.completed().prefix(), limit, "the window is filled, no more");
        if limit == 100 {
            break;
        }
        assert!(!t.is_done());
        limit += 20;
        t.handle_window(limit, t0);
    }
    assert!(t.is_done() && t.stats().duplicate_blocks == 0);
}
