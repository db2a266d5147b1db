use super::*;
use proptest::prelude::*;

/// Claims every byte with links taking turns by `weights` (a link with
/// weight w claims w times per round); returns claims per link.
fn drain(p: &mut Plan, weights: &[usize], fail: Option<(usize, usize)>) -> Vec<Vec<Claim>> {
    let mut got = vec![vec![]; weights.len()];
    let mut round = 0;
    while !p.is_idle() {
        round += 1;
        assert!(round < 1_000_000, "no progress");
        for (l, &w) in weights.iter().enumerate() {
            if fail.is_some_and(|(fl, at)| fl == l && round == at) {
                let lost = std::mem::take(&mut got[l]);
                p.on_failed(l, lost);
            }
            for _ in 0..w {
                if let Some(c) = p.claim(l) {
                    got[l].push(c);
                }
            }
        }
    }
    got
}

/// Every byte of every message exactly once.
fn check_cover(claims: &[Vec<Claim>], lens: &[u64]) {
    for (id, &len) in lens.iter().enumerate() {
        let mut mine: Vec<Claim> = claims.iter().flatten().filter(|c| c.msg == id as u64).copied().collect();
        mine.sort_by_key(|c| (c.offset, c.len));
        let mut at = 0;
        for c in &mine {
            assert_eq!(c.offset, at, "message {id}: gap or overlap at {at}: {mine:?}");
            at += u64::from(c.len);
        }
        assert_eq!(at, len, "message {id}");
        if len == 0 {
            assert_eq!(mine.len(), 1, "an empty message is one empty run");
        }
    }
}

#[test]
fn two_links_meet_in_proportion_to_speed() {
    let mut p = Plan::new(2, PlanConfig::default());
    p.push(64 << 20);
    let got = drain(&mut p, &[2, 1], None);
    check_cover(&got, &[64 << 20]);
    let bytes: Vec<u64> = got.iter().map(|c| c.iter().map(|c| u64::from(c.len)).sum()).collect();
    let share = bytes[0] as f64 / (64u64 << 20) as f64;
    assert!((share - 2.0 / 3.0).abs() < 0.02, "{share}");
}

#[test]
fn a_failed_links_claims_of_an_acknowledged_message_are_not_resent() {
    let mut p = Plan::new(2, PlanConfig::default());
    p.push(1 << 20);
    p.push(1 << 20);
    let got = drain(&mut p, &[1, 1], None);
    // Link 0 fails (its peer closed it) before the ack of message 0,
    // carried by link 1, arrives: its runs of both messages come back.
    p.on_failed(0, got[0].clone());
    assert!(!p.is_idle());
    p.on_acked(0);
    assert!(!p.is_idle(), "message 1 still needs its runs");
    p.on_acked(1);
    assert!(p.is_idle(), "nothing left to send: every message was acknowledged");
}

#[test]
fn short_messages_and_single_links_are_one_link_work() {
    let mut p = Plan::new(2, PlanConfig::default());
    assert!(p.one_link_work());
    p.push(1024);
    assert!(p.one_link_work());
    p.push(1 << 20);
    assert!(!p.one_link_work(), "a striped message needs the backlogs");
    let mut one = Plan::new(1, PlanConfig::default());
    one.push(1 << 20);
    assert!(one.one_link_work());
}

#[test]
fn one_wild_rate_sample_moves_nothing() {
    let mut p = Plan::new(1, PlanConfig::default());
    for _ in 0..5 {
        p.set_rate(0, 40e6);
    }
    p.set_rate(0, 60e3);
    assert_eq!(p.measured_rate(0), 40e6);
    p.set_rate(0, 900e6);
    assert_eq!(p.measured_rate(0), 40e6);
    // A lasting change wins once it is most of the window.
    for _ in 0..5 {
        p.set_rate(0, 5e6);
    }
    assert_eq!(p.measured_rate(0), 5e6);
}

/// A pair on links of 2:1 speeds whose sockets take a whole message at
/// once: the backlogs, not the claim order, decide the split.
#[test]
fn backlogs_split_a_short_message_by_speed() {
    let rates = [40e6, 20e6];
    let mut p = Plan::new(2, PlanConfig::default());
    for (l, &r) in rates.iter().enumerate() {
        p.set_rate(l, r);
    }
    let len = 64 * 1024;
    p.push(len);
    let mut backlog = [0u64; 2];
    while !p.is_idle() {
        let mut progress = false;
        for (l, b) in backlog.iter_mut().enumerate() {
            p.set_backlog(l, *b);
            if let Next::Run(c) = p.next(l) {
                *b += u64::from(c.len);
                progress = true;
            }
        }
        assert!(progress, "neither link would take the rest: {p:?}");
    }
    let share = backlog[0] as f64 / len as f64;
    assert!((share - 2.0 / 3.0).abs() < 0.13, "the fast link sent {share} of the message");
    // The slow link's last run ends no later than the fast link's.
    assert!(backlog[1] as f64 / rates[1] <= backlog[0] as f64 / rates[0] + 8192.0 / rates[1]);
}

#[test]
fn small_messages_go_whole_to_the_fastest_link() {
    let mut p = Plan::new(3, PlanConfig::default());
    p.set_rate(1, 100e6);
    p.set_rate(0, 10e6);
    p.push(1000);
    assert_eq!(p.claim(0), None);
    assert_eq!(p.claim(1), Some(Claim { msg: 0, offset: 0, len: 1000 }));
    assert!(p.is_idle());
    // Just under the striping size, still one run: one frame, one write.
    p.push(32 * 1024 - 1);
    assert_eq!(p.claim(1), Some(Claim { msg: 1, offset: 0, len: 32 * 1024 - 1 }));
    assert!(p.is_idle());
    // Claimed as it is queued: the same link, the next id, nothing left.
    assert_eq!(p.whole_link(1000), Some(1));
    assert_eq!(p.claim_whole(1000), Claim { msg: 2, offset: 0, len: 1000 });
    assert!(p.is_idle());
    assert_eq!(p.whole_link(0), Some(1));
    assert_eq!(p.claim_whole(0), Claim { msg: 3, offset: 0, len: 0 });
    // Not a striped message, nor one that would overtake a queued one.
    assert_eq!(p.whole_link(32 * 1024), None);
    p.push(1000);
    assert_eq!(p.whole_link(1000), None);
    assert_eq!(p.claim(1), Some(Claim { msg: 4, offset: 0, len: 1000 }));
    // A failed link is not given one.
    p.on_failed(1, []);
    assert_eq!(p.whole_link(1000), Some(0), "measured, unlike link 2");
}

#[test]
fn a_failed_links_claims_are_sent_again() {
    let mut p = Plan::new(2, PlanConfig::default());
    p.push(8 << 20);
    p.push(0);
    p.push(100);
    let got = drain(&mut p, &[1, 1], Some((0, 3)));
    assert!(got[0].is_empty(), "the failed link's claims all went back to the plan");
    check_cover(&got, &[8 << 20, 0, 100]);
}

proptest! {
    #[test]
    fn every_byte_exactly_once(
        lens in proptest::collection::vec(prop_oneof![Just(0u64), 1u64..100_000, 1u64..20_000_000], 1..6),
        weights in proptest::collection::vec(1usize..5, 1..5),
        fail in proptest::option::of((0usize..4, 1usize..40)),
    ) {
        let mut p = Plan::new(weights.len(), PlanConfig::default());
        for &l in &lens { p.push(l); }
        // A failure is only survivable with another link left.
        let fail = fail.filter(|&(l, _)| l < weights.len() && weights.len() > 1);
        // A failed link's claims are dropped from `got` when it fails:
        // the others must have sent every byte again.
        let got = drain(&mut p, &weights, fail);
        check_cover(&got, &lens);
    }
}
