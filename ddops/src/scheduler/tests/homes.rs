//! `Scheduler::with_homes`: one receiver's share-out of a file several
//! receivers fetch (`get --share`).

use super::*;

/// The whole file of the share tests.
pub(super) const WHOLE: Range<u64> = 0..60;

/// Receiver 1 of 3: its mirrors (0, 1) and the other receivers' virtual
/// pairs (2, 3: share 0; 4, 5: share 2).
pub(super) fn homes() -> Vec<Home> {
    vec![
        Home { producers: vec![2, 3], only_here: true, weight: 1, relay: None },
        Home { producers: vec![0, 1], only_here: false, weight: 1, relay: None },
        Home { producers: vec![4, 5], only_here: true, weight: 1, relay: None },
    ]
}

fn shared_harness(missing: &[Range<u64>]) -> Harness {
    homes_harness(missing, 60, tight())
}

/// Receiver 1 of 3 ([`homes`]) over `total` blocks, `missing` to come.
fn homes_harness(missing: &[Range<u64>], total: u64, cfg: Config) -> Harness {
    harness_of(&homes(), missing, total, cfg)
}

pub(super) fn harness_of(homes: &[Home], missing: &[Range<u64>], total: u64, cfg: Config) -> Harness {
    harness_cut(homes, missing, total, 1, cfg)
}

/// As [`harness_of`], shares cut at multiples of `unit` blocks.
fn harness_cut(homes: &[Home], missing: &[Range<u64>], total: u64, unit: u64, cfg: Config) -> Harness {
    let now = Instant::now();
    let ids = homes.iter().flat_map(|h| h.producers.iter().copied().chain(h.relay));
    let n = ids.max().map_or(6, |m| m + 1).max(6);
    let mut h = Harness {
        s: Scheduler::with_homes(missing, total, (homes, unit), n, cfg, now),
        now,
        queues: (0..n).map(|_| Streams::default()).collect(),
        got: vec![0; total as usize],
        log: vec![],
        base: 0,
    };
    h.pump();
    h
}

/// Blocks each producer delivered, lowest and highest.
pub(super) fn span_of(h: &Harness, p: ProducerId) -> Option<(u64, u64)> {
    let starts = h.log.iter().filter_map(|a| match *a {
        Action::Start { producer, first, last, .. } if producer == p => Some((first.min(last), first.max(last))),
        _ => None,
    });
    starts.reduce(|a, b| (a.0.min(b.0), a.1.max(b.1)))
}

#[test]
fn with_homes_each_share_is_started_by_its_own_producers_from_both_ends() {
    let h = shared_harness(&[WHOLE]);
    let firsts: Vec<(ProducerId, u64, Direction)> = h
        .log
        .iter()
        .filter_map(|a| match *a {
            Action::Start { producer, first, dir, .. } => Some((producer, first, dir)),
            _ => None,
        })
        .collect();
    for want in [
        (2, 0, Direction::Increment),
        (3, 19, Direction::Decrement),
        (0, 20, Direction::Increment),
        (1, 39, Direction::Decrement),
        (4, 40, Direction::Increment),
        (5, 59, Direction::Decrement),
    ] {
        assert!(firsts.contains(&want), "{want:?} not in {firsts:?}");
    }
}

#[test]
fn with_homes_a_peer_never_leaves_its_share_and_mirrors_help_where_peers_are_slow() {
    let mut h = shared_harness(&[WHOLE]);
    // The mirrors deliver a block a round (10 a second), the peers one in
    // sixteen: their shares would take them seconds more.
    let mut round = 0u64;
    while !h.s.is_done() {
        for p in 0..6 {
            if h.has_work(p) && (p < 2 || round.is_multiple_of(16)) {
                h.deliver(p);
            }
        }
        round += 1;
        // Rates need time to pass: a peer not measured yet is not slow.
        h.now += Duration::from_millis(100);
        assert!(round < 100_000, "no progress");
    }
    h.assert_each_block_once();
    assert!(span_of(&h, 2).unwrap().1 < 20 && span_of(&h, 3).unwrap().1 < 20, "{:?}", h.log);
    assert!(span_of(&h, 4).unwrap().0 >= 40 && span_of(&h, 5).unwrap().0 >= 40, "{:?}", h.log);
    let c = h.s.contributions();
    assert!(c[0] + c[1] > 20, "the mirrors took over part of the slow shares: {c:?}");
}

#[test]
fn with_homes_a_failed_peer_s_share_goes_to_the_mirrors() {
    fail_receiver_2(&homes(), 20);
}

/// Receiver 2 (producers 4, 5) fails at once: the mirrors bring at least
/// `least` blocks, its share among them.
fn fail_receiver_2(homes: &[Home], least: u64) {
    let mut h = harness_of(homes, &[WHOLE], 60, tight());
    h.fail(4);
    h.fail(5);
    h.run_round_robin();
    h.assert_each_block_once();
    let c = h.s.contributions();
    assert_eq!(c[4] + c[5], 0);
    assert!(c[0] + c[1] >= least, "{c:?}");
}

#[test]
fn with_homes_a_resumed_share_starts_on_its_largest_missing_piece() {
    // Share 0 is missing 2..5 and 8..18; share 2 is whole.
    let mut h = shared_harness(&[2..5, 8..18, 20..60]);
    assert!(h.log.iter().any(|a| matches!(*a, Action::Start { producer: 2, first: 8, .. })), "{:?}", h.log);
    h.run_round_robin();
    assert!(h.s.is_done());
    for b in (2..5).chain(8..18).chain(20..60) {
        assert_eq!(h.got[b as usize], 1, "block {b}");
    }
    assert!(h.got[..2].iter().chain(&h.got[5..8]).chain(&h.got[18..20]).all(|&c| c == 0));
}

/// The whole file of the timed share tests.
const SIX_HUNDRED: Range<u64> = 0..600;

/// Runs the shared harness with the clock moving 10 ms a round; producer
/// `p` delivers a block every `every(p)` rounds.
fn run_timed(h: &mut Harness, every: impl Fn(ProducerId) -> u64) {
    let mut round = 0u64;
    while !h.s.is_done() {
        h.now += Duration::from_millis(10);
        for p in 0..6 {
            if h.has_work(p) && round.is_multiple_of(every(p)) {
                h.deliver(p);
            }
        }
        round += 1;
        assert!(round < 100_000, "no progress");
    }
    h.assert_each_block_once();
}

#[test]
fn with_homes_mirrors_leave_a_peer_that_keeps_up_alone() {
    // 600 blocks, shares of 200: the peers as fast as the mirrors.
    let cfg = Config { min_help: Duration::ZERO, lookahead: Duration::ZERO, ..Config::default() };
    let mut h = homes_harness(&[SIX_HUNDRED], 600, cfg);
    run_timed(&mut h, |_| 1);
    let c = h.s.contributions();
    assert_eq!(c[0] + c[1], 200, "the mirrors brought their own share only: {c:?}");
}

#[test]
fn with_homes_mirrors_help_a_peer_far_slower_than_they_are() {
    let cfg = Config { min_help: Duration::ZERO, lookahead: Duration::ZERO, ..Config::default() };
    let mut h = homes_harness(&[SIX_HUNDRED], 600, cfg);
    // Receiver 2 (producers 4, 5) is ten times slower than the mirrors.
    run_timed(&mut h, |p| if p >= 4 { 10 } else { 1 });
    let c = h.s.contributions();
    assert!(c[0] + c[1] > 250, "the mirrors took over much of the slow share: {c:?}");
    assert!(c[2] + c[3] >= 190, "the peer that keeps up kept its share: {c:?}");
}

/// Runs `rounds` rounds of [`run_timed`]'s clock, or until done.
fn run_rounds(h: &mut Harness, rounds: u64, every: impl Fn(ProducerId) -> u64) {
    for round in 0..rounds {
        if h.s.is_done() {
            return;
        }
        h.now += Duration::from_millis(10);
        for p in 0..6 {
            if h.has_work(p) && round.is_multiple_of(every(p)) {
                h.deliver(p);
            }
        }
    }
}

/// Blocks of `range` delivered so far.
fn got_in(h: &Harness, range: Range<usize>) -> u64 {
    h.got[range].iter().sum()
}

/// The whole file of the link tests.
const SIX_THOUSAND: Range<u64> = 0..6000;

/// Runs `rounds` rounds of 10 ms over one link that carries ten blocks a
/// round, each to the first of `order` that has work (a flow that takes
/// the link from the others, as TCP flows do).
fn run_link(h: &mut Harness, rounds: u64, order: &[ProducerId]) {
    run_link_at(h, rounds, order, |_| 10);
}

/// Blocks held of each share of [`SIX_THOUSAND`].
fn by_share(h: &Harness) -> [u64; 3] {
    [got_in(h, 0..2000), got_in(h, 2000..4000), got_in(h, 4000..6000)]
}

/// Runs the link (as [`run_link`]) until the file is whole, and checks
/// that each block came once.
fn finish_link(h: &mut Harness, order: &[ProducerId]) {
    run_link(h, 10_000, order);
    assert!(h.s.is_done());
    h.assert_each_block_once();
}

/// Runs `rounds` rounds of 10 ms over one link that carries ten blocks a
/// round, shared evenly by the producers (0..`producers`) that have work.
fn run_fair(h: &mut Harness, rounds: u64, producers: usize) {
    let mut next = 0;
    for _ in 0..rounds {
        h.now += Duration::from_millis(10);
        for _ in 0..10 {
            if let Some(p) = (0..producers).map(|i| (next + i) % producers).find(|&p| h.has_work(p)) {
                h.deliver(p);
                next = p + 1;
            }
        }
    }
}

/// Blocks of `range` held from each of its ends inward.
fn ends_in(h: &Harness, range: Range<usize>) -> usize {
    let lo = h.got[range.clone()].iter().take_while(|&&g| g > 0).count();
    let hi = h.got[range.clone()].iter().rev().take_while(|&&g| g > 0).count();
    (lo + hi).min(range.len())
}

/// [`run_link`] with the link carrying `cap(round)` blocks in a round.
fn run_link_at(h: &mut Harness, rounds: u64, order: &[ProducerId], cap: impl Fn(u64) -> u64) {
    for round in 0..rounds {
        h.now += Duration::from_millis(10);
        for _ in 0..cap(round) {
            if let Some(&p) = order.iter().find(|&&p| h.has_work(p)) {
                h.deliver(p);
            }
        }
    }
}

#[test]
fn with_homes_a_share_that_races_ahead_is_held_to_the_one_behind() {
    let mut h = homes_harness(&[SIX_THOUSAND], 6000, Config::default());
    // Share 0's peer takes the whole link while it may: for the first
    // second (unheld) it has all of it.
    let order = [2, 3, 0, 1, 4, 5];
    run_link(&mut h, 100, &order);
    assert!(got_in(&h, 0..2000) >= 900, "unheld at first: {}", got_in(&h, 0..2000));
    // Then it waits for the others, which get the link, and the link
    // stays full: holding is not switched off.
    run_link(&mut h, 200, &order);
    let got = by_share(&h);
    assert!(got[1].min(got[2]) >= 700, "the others got the link: {got:?}");
    assert!(got[0] <= 1150, "share 0 held while the others caught up: {got:?}");
    finish_link(&mut h, &order);
}

#[test]
fn with_homes_flows_crowded_out_that_grow_back_once_others_are_held_keep_the_shares_held() {
    let mut h = homes_harness(&[SIX_THOUSAND], 6000, Config::default());
    let order = [2, 3, 0, 1, 4, 5];
    run_link(&mut h, 100, &order);
    // Held, share 0's flows leave the link; the others', crowded out
    // until now, carry a block a round for 0.4 s, then take the link
    // (TCP windows opening): the link is below half its best for longer
    // than a slow share is given, but it climbs again.
    run_link_at(&mut h, 200, &order, |r| if r < 40 { 1 } else { 10 });
    let pacing = h.s.pacing().expect("shares");
    assert!(pacing.starts_with("off=false"), "holding kept: {pacing}");
    let got = by_share(&h);
    assert!(got[0] <= 1150, "share 0 still held: {got:?}");
    finish_link(&mut h, &order);
}

#[test]
fn with_homes_a_share_slow_by_itself_stops_holding_the_others_once_the_link_has_room() {
    let mut h = homes_harness(&[SIX_HUNDRED], 600, Config::default());
    // Share 2's peer (4, 5) brings a block in eight rounds; held to it,
    // shares 0 and 1 would take 800 rounds.
    let slow = |p: ProducerId| if p >= 4 { 8 } else { 1 };
    run_rounds(&mut h, 300, slow);
    assert_eq!((got_in(&h, 0..200), got_in(&h, 200..400)), (200, 200), "held back by the slow share");
    // It came steadily from the start, far slower than share 0: it is
    // left out of the holding, which still keeps the others abreast.
    let pacing = h.s.pacing().expect("shares");
    assert!(pacing.starts_with("off=false"), "{pacing}");
    run_timed(&mut h, slow);
}

#[test]
fn with_homes_blocks_a_helper_brings_in_the_middle_of_a_share_are_not_its_progress() {
    let mut h = homes_harness(&[SIX_THOUSAND], 6000, Config::default());
    // The peers' shares move first: the own share is the busiest when a
    // third mirror joins, and it splits the own share in the middle.
    run_link(&mut h, 20, &[2, 3, 4, 5]);
    let joined = h.s.add_producer(h.now);
    h.queues.push(Streams::default());
    h.pump();
    // Past the unheld first second, with the link shared evenly, the
    // own share's ends keep pace with the other shares' ends (what the
    // other receivers can take of each): the blocks the joined mirror
    // brings in its middle are not counted as its progress.
    run_fair(&mut h, 250, 7);
    assert!(got_in(&h, 2000..4000) > ends_in(&h, 2000..4000) as u64 + 100, "the joined mirror worked the middle");
    let (own, peers) = (ends_in(&h, 2000..4000), ends_in(&h, 0..2000).min(ends_in(&h, 4000..6000)));
    assert!(own * 10 >= peers * 9, "the own share's ends held back: {own} against {peers}");
    finish_link(&mut h, &[0, 1, 2, 3, 4, 5, joined]);
}

#[test]
fn with_homes_a_share_that_trickles_in_bursts_does_not_keep_the_others_held() {
    let mut h = homes_harness(&[SIX_THOUSAND], 6000, Config::default());
    let order = [2, 3, 0, 1, 4, 5];
    run_link(&mut h, 100, &order);
    // Held, the link carries a block a round and every 0.3 s a burst of
    // a hundred (a peer that sends in spurts, flaky or hostile): it
    // climbs again and again, as flows opening their windows would, but
    // for longer than they take: holding stops all the same.
    run_link_at(&mut h, 500, &order, |r| if r % 30 == 0 { 100 } else { 1 });
    let pacing = h.s.pacing().expect("shares");
    assert!(pacing.starts_with("off=true"), "held to the bursts for 5 s: {pacing}");
}

#[test]
fn with_homes_a_peer_that_goes_silent_holding_its_last_blocks_is_relieved_by_the_free_mirrors() {
    // A receiver waits for a block it has not got itself: it sends nothing,
    // and its last rate would call it as fast as ever. No block arrives to
    // make the scheduler look again: it asks to be woken.
    let cfg = Config { min_help: Duration::ZERO, lookahead: Duration::ZERO, ..Config::default() };
    let mut h = homes_harness(&[SIX_HUNDRED], 600, cfg);
    let start = h.now;
    let mut silent = false;
    while !h.s.is_done() {
        h.now += Duration::from_millis(10);
        // Receiver 2 (producers 4, 5) stops with 20 blocks of its share to go.
        silent |= got_in(&h, 400..600) >= 180;
        for p in 0..6 {
            if h.has_work(p) && !(silent && p >= 4) {
                h.deliver(p);
            }
        }
        if h.s.poll_wake().is_some_and(|w| w <= h.now) {
            h.s.on_wake(h.now);
            h.pump();
        }
        let waited = h.now - start;
        assert!(waited < Duration::from_secs(4), "waiting on the silent peer: {:?}", h.s.contributions());
    }
    h.assert_each_block_once();
    let c = h.s.contributions();
    assert!(c[4] + c[5] >= 180 && c[0] + c[1] <= 220 + 20, "{c:?}");
}

#[test]
fn with_homes_a_held_share_grows_from_both_its_ends() {
    // The own share (2000..4000: mirrors 0 and 1) is held to the peers'
    // pace, room coming free a block or two at a time. The other
    // receivers read it from both ends: an end that got none of that room
    // would send them nothing (and be dropped as stalled).
    let mut h = homes_harness(&[SIX_THOUSAND], 6000, tight());
    for round in 0..400u64 {
        h.now += Duration::from_millis(10);
        for p in 0..6 {
            for _ in 0..if p < 2 { 5 } else { 3 } {
                if h.has_work(p) {
                    h.deliver(p);
                }
            }
        }
        // Once held (after the first second), both ends keep moving.
        if round >= 150 && round % 50 == 0 {
            let lo = h.got[2000..4000].iter().take_while(|&&g| g > 0).count();
            let hi = h.got[2000..4000].iter().rev().take_while(|&&g| g > 0).count();
            let (c0, c1) = (h.s.contributions()[0], h.s.contributions()[1]);
            assert!(
                lo.abs_diff(hi) <= 40,
                "round {round}: own share {lo} from its low end, {hi} from its high ({c0}, {c1})"
            );
        }
    }
}

/// [`homes`] as one receiver of many sees them (`crate::fan`'s trees: each
/// share weighs as many receivers as pass it on).
fn tree_homes() -> Vec<Home> {
    homes().into_iter().map(|h| Home { weight: 2, ..h }).collect()
}

#[test]
fn with_homes_in_trees_the_mirrors_never_help_a_peer_that_sends() {
    // Receiver 2 is ten times slower: in a flat group the mirrors would
    // take much of its share; in trees the blocks they brought would leave
    // them again for every receiver below this one.
    let cfg = Config { min_help: Duration::ZERO, lookahead: Duration::ZERO, ..Config::default() };
    let mut h = harness_of(&tree_homes(), &[SIX_HUNDRED], 600, cfg);
    run_timed(&mut h, |p| if p >= 4 { 10 } else { 1 });
    let c = h.s.contributions();
    assert_eq!(c[0] + c[1], 200, "the mirrors brought their own share only: {c:?}");
}

#[test]
fn with_homes_in_trees_a_lost_parent_s_share_comes_from_the_mirrors() {
    fail_receiver_2(&tree_homes(), 40);
}

#[test]
fn shares_are_cut_at_pieces_when_pieces_are_checked_whole() {
    assert_eq!(share_bounds(60, &[1, 1, 1], 1), vec![0, 20, 40, 60]);
    assert_eq!(share_bounds(61, &[1, 1, 1], 1), vec![0, 20, 40, 61]);
    // Pieces of 8 blocks: each cut to the nearest piece.
    assert_eq!(share_bounds(60, &[1, 1, 1], 8), vec![0, 24, 40, 60]);
    // Fewer pieces than shares: a share may be empty.
    assert_eq!(share_bounds(24, &[1, 1, 1], 20), vec![0, 0, 20, 24]);
    assert_eq!(share_bounds(10, &[2, 1], 64), vec![0, 0, 10]);
}

#[test]
fn a_receiver_whose_own_share_is_empty_still_gets_the_whole_file() {
    // Receiver 1's share is empty (pieces of 30 blocks over 60, three
    // shares: 0..30, 30..30, 30..60); its mirrors help and its peers send.
    let mut h = harness_cut(&homes(), &[WHOLE], 60, 30, tight());
    run_fair(&mut h, 200, 6);
    assert!(h.got.iter().all(|&g| g == 1), "{:?}", h.got);
}

proptest::proptest! {
    #[test]
    fn share_bounds_rise_to_the_end_at_multiples_of_the_unit(
        total in 0u64..1_000_000,
        weights in proptest::collection::vec(0u64..40, 1..70),
        unit in 1u64..5000,
    ) {
        let b = share_bounds(total, &weights, unit);
        proptest::prop_assert_eq!(b.len(), weights.len() + 1);
        proptest::prop_assert_eq!((b[0], b[weights.len()]), (0, total));
        proptest::prop_assert!(b.windows(2).all(|w| w[0] <= w[1]), "{:?}", b);
        for &x in &b[..weights.len()] {
            proptest::prop_assert!(x % unit == 0 || x == total, "{} in {:?}", x, b);
        }
        // Unit 1: in proportion to the weights, as before pieces.
        let whole: u128 = weights.iter().map(|&w| u128::from(w.max(1))).sum();
        let mut at = 0u128;
        for (k, &w) in weights.iter().enumerate() {
            at += u128::from(w.max(1));
            proptest::prop_assert_eq!(share_bounds(total, &weights, 1)[k + 1], (u128::from(total) * at / whole) as u64);
        }
    }
}

#[test]
fn with_homes_in_pieces_the_own_share_may_run_a_piece_ahead_at_each_end() {
    // Pieces of 500 blocks: the other receivers pass a share on a piece
    // at a time, so theirs show nothing until this one's first pieces are
    // whole (and theirs wait for them): the own share is not held until
    // a piece is in at each end, and holding stays on.
    let mut h = harness_cut(&homes(), &[SIX_THOUSAND], 6000, 500, Config::default());
    run_link_at(&mut h, 300, &[0, 1], |_| 1);
    let pacing = h.s.pacing().expect("shares");
    assert!(pacing.starts_with("off=false"), "holding kept: {pacing}");
    assert!(got_in(&h, 2000..4000) >= 290, "the own share ran on: {}", got_in(&h, 2000..4000));
}

/// Shares of 200 blocks in pieces of `unit`: the mirrors fetch theirs at
/// a block a round, the peers send nothing for 1.5 s (their first piece
/// is not whole yet), then a block a round. What the mirrors brought.
fn mirrors_bring_with_late_peers(unit: u64) -> u64 {
    let cfg = Config { min_help: Duration::ZERO, lookahead: Duration::ZERO, ..Config::default() };
    let mut h = harness_cut(&homes(), &[SIX_HUNDRED], 600, unit, cfg);
    let mut round = 0u64;
    while !h.s.is_done() {
        h.now += Duration::from_millis(10);
        for p in 0..6 {
            if h.has_work(p) && (p < 2 || round >= 150) {
                h.deliver(p);
            }
        }
        round += 1;
        assert!(round < 100_000, "no progress");
    }
    h.assert_each_block_once();
    let c = h.s.contributions();
    c[0] + c[1]
}

#[test]
fn with_homes_in_pieces_a_peer_is_not_judged_slow_before_a_piece_has_come() {
    // Their first blocks come at a crawl's rate measure; blocks checked
    // one by one, such a peer is helped (it looks slow), in pieces it is
    // not until a piece has come (and then it keeps up).
    assert!(mirrors_bring_with_late_peers(1) > 200);
    assert_eq!(mirrors_bring_with_late_peers(100), 200, "the mirrors brought their own share only");
}
