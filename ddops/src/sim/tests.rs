//! Faults in the simulator: what `benches/netbed-faults.sh` compares with
//! `ddftp get` on netbed (same speeds, same fault).

use super::*;

/// The netbed mirrors (320/240/160/80 mbit goodput in 256 KiB blocks), 512
/// MiB, a fault at 3 s.
fn netbed(fault: FaultKind, server: usize) -> SimReport {
    let speeds = [145.9, 109.4, 72.9, 36.5];
    let spec = SimSpec {
        blocks: 2048,
        servers: servers_like_get(&speeds),
        changes: vec![],
        faults: vec![Fault { at: 3.0, server, kind: fault }],
        one_way_delay: 0.0005,
        config: transfer::Config::for_blocks(256 << 10),
    };
    let r = run(&spec, Instant::now());
    assert!(r.completed, "{r:?}");
    assert_eq!(r.duplicate_blocks, 0);
    assert_eq!(r.server_blocks.iter().sum::<u64>(), 2048, "each block once: {r:?}");
    r
}

#[test]
fn a_failed_mirror_is_dropped_at_once_and_the_rest_finish_at_their_capacity() {
    let r = netbed(FaultKind::Fail, 0);
    assert_eq!(r.dropped.len(), 1);
    assert!(r.dropped[0].at < 3.01 && r.dropped[0].why.contains("reset"), "{r:?}");
    assert!(r.efficiency > 0.98, "{r:?}");
}

#[test]
fn a_stalled_mirror_is_dropped_after_the_stall_timeout() {
    let r = netbed(FaultKind::Stall, 1);
    assert_eq!(r.dropped.len(), 1);
    let d = &r.dropped[0];
    assert!(d.server == 1 && (7.9..8.1).contains(&d.at) && d.why.contains("stalled"), "{r:?}");
    // Its claim waits out the timeout, and no longer.
    assert!(r.makespan < 8.3, "{r:?}");
}

#[test]
fn a_corrupt_block_drops_its_mirror_and_is_fetched_elsewhere() {
    let r = netbed(FaultKind::Corrupt, 0);
    assert_eq!(r.dropped.len(), 1);
    assert!(r.dropped[0].why.contains("failed verification"), "{r:?}");
    assert!(r.efficiency > 0.97, "{r:?}");
}

#[test]
fn every_mirror_failing_ends_the_run_incomplete() {
    let spec = SimSpec {
        blocks: 1000,
        servers: servers_like_get(&[100.0, 100.0]),
        changes: vec![],
        faults: vec![
            Fault { at: 1.0, server: 0, kind: FaultKind::Fail },
            Fault { at: 2.0, server: 1, kind: FaultKind::Fail },
        ],
        one_way_delay: 0.001,
        config: transfer::Config::default(),
    };
    let r = run(&spec, Instant::now());
    assert!(!r.completed && r.dropped.len() == 2, "{r:?}");
    assert!(r.makespan < 2.1, "stops when nothing can finish it: {r:?}");
}

#[test]
fn a_mirror_that_rejoins_takes_its_share_again() {
    // The benchmark's outage: the fastest netbed mirror down from 2 s to 3 s.
    let speeds = [145.9, 109.4, 72.9, 36.5];
    let spec = SimSpec {
        blocks: 2048,
        servers: servers_like_get(&speeds),
        changes: vec![],
        faults: vec![
            Fault { at: 2.0, server: 0, kind: FaultKind::Fail },
            Fault { at: 3.0, server: 0, kind: FaultKind::Rejoin },
        ],
        one_way_delay: 0.0005,
        config: transfer::Config::for_blocks(256 << 10),
    };
    let r = run(&spec, Instant::now());
    assert!(r.completed && r.duplicate_blocks == 0, "{r:?}");
    assert_eq!(r.server_blocks.iter().sum::<u64>(), 2048);
    // Without the outage it would take 2048 / 364.7 = 5.6 s; the outage
    // costs about a second of its 40% share, and it works again after.
    assert!(r.efficiency > 0.95 && r.makespan < 6.2, "{r:?}");
    assert!(r.server_share[0] > 0.3, "it took its share again: {r:?}");
}

#[test]
fn every_mirror_gone_and_one_back_finishes() {
    let spec = SimSpec {
        blocks: 1000,
        servers: servers_like_get(&[100.0, 100.0]),
        changes: vec![],
        faults: vec![
            Fault { at: 1.0, server: 0, kind: FaultKind::Fail },
            Fault { at: 1.0, server: 1, kind: FaultKind::Fail },
            Fault { at: 4.0, server: 1, kind: FaultKind::Rejoin },
        ],
        one_way_delay: 0.0005,
        config: transfer::Config::for_blocks(256 << 10),
    };
    let r = run(&spec, Instant::now());
    assert!(r.completed && r.duplicate_blocks == 0, "{r:?}");
    assert!((r.ideal - 12.0).abs() < 0.1, "200 blocks by 1 s, 800 more at 100/s from 4 s: {r:?}");
    assert!(r.efficiency > 0.98, "{r:?}");
}
