//! Relays (`get --peers`): receivers whose free mirrors help a slow
//! receiver's share tell each other which blocks they fetch (`Tell`), and
//! read those from each other instead of each fetching them all.

use std::process::Child;
use std::time::{Duration, Instant};

use ddftp_proto::frame::TELL_VERSION;
use ddftp_proto::{Reply, Request};

use crate::fan_out::{asked_of_receiver, each_exact_and_shared, free_addrs, receiver, setup, sharing, SIZE};

#[test]
fn receivers_helping_a_slow_one_tell_what_their_mirrors_fetch_of_its_share_and_every_copy_is_exact() {
    let s = setup();
    let began = Instant::now();
    let peers = free_addrs(3);
    let out = |i: usize| s.outs.join(format!("c{i}")).to_str().unwrap().to_string();
    // Receiver 2 downloads at 1 MB/s: its share (a third) reaches the
    // others slowly, and their free mirrors help it.
    let mut kids: Vec<Child> =
        (0..2).map(|i| receiver(&s.mirrors(), &s.outs.join(format!("c{i}")), &peers, &peers[i])).collect();
    let slow = ["get", "big.bin", "-m", &s.mirrors(), "-o", &out(2), "--limit-rate", "1M"];
    kids.push(sharing(&slow, &peers, &peers[2]));
    // What receiver 0's mirrors fetch of the others' shares, as it tells
    // (all told so far, then as it comes).
    let mut tell = asked_of_receiver(&peers[0], TELL_VERSION, Request::Tell { path: "big.bin".into() });
    let mut told = vec![];
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        match tell.reply_within(Duration::from_secs(10)) {
            Some(Reply::Fetching { at, len, dir }) => told.push((at, len, dir)),
            Some(other) => panic!("a telling connection sent {other:?}"),
            None => break,
        }
        if told.iter().map(|t| t.1).sum::<u64>() >= (SIZE / 12) as u64 {
            break;
        }
    }
    // Held open, the connection would keep receiver 0 serving (it serves
    // on while anyone is connected): its server closes it once its copy
    // is whole, so the receivers all end (with runs told since still
    // unread here).
    each_exact_and_shared(kids, &s.outs, &s.data);
    // (Receiver 2 takes about 25 s at its 1 MB/s; lingering would be 10 min.)
    assert!(began.elapsed() < Duration::from_secs(120), "receiver 0 lingered: {:?}", began.elapsed());
    while let Some(r) = tell.reply_within(Duration::from_millis(500)) {
        assert!(matches!(r, Reply::Fetching { .. }), "a telling connection sent {r:?}");
    }
    assert!(!told.is_empty(), "receiver 0's mirrors helped the slow share and said so");
    // Only another receiver's share is told, never receiver 0's own (the
    // first third).
    for &(at, len, _) in &told {
        assert!(len > 0 && at + len <= SIZE as u64, "{told:?}");
        assert!(at >= SIZE as u64 / 3, "its own share told: {told:?}");
    }
}
