//! What peers tell (`Fetching`: any share, any range, either order, any
//! time) into one receiver's scheduler sharing a file with three others,
//! its producers obeying every action as ddftpd would and delivering in
//! an order the input picks: nothing panics, no block comes twice, and
//! once the input is spent the transfer still ends.
#![no_main]

use std::time::{Duration, Instant};

use ddftp_proto::streams::{Next, Streams};
use ddftp_proto::Direction;
use ddops::scheduler::{Action, Config, Home, Scheduler};
use libfuzzer_sys::fuzz_target;

const BLOCKS: u64 = 64;
const PRODUCERS: usize = 12;

/// Receiver 1 of 4: mirrors 0, 1; each other receiver a pair and a relay.
fn homes() -> Vec<Home> {
    let peer = |a: usize| Home { producers: vec![a, a + 1], only_here: true, weight: 1, relay: Some(a + 2) };
    vec![peer(2), Home { producers: vec![0, 1], only_here: false, weight: 1, relay: None }, peer(5), peer(8)]
}

struct Run {
    s: Scheduler,
    q: Vec<Streams<()>>,
    got: Vec<u8>,
    now: Instant,
}

impl Run {
    fn pump(&mut self) {
        while let Some(a) = self.s.poll_action() {
            let ended = match a {
                Action::Start { producer, stream, first, last, dir } => {
                    let e = self.q[producer].start(stream, first, last, dir, ()).expect("one Start waits at most");
                    e.map(|e| (producer, e))
                }
                Action::Extend { producer, stream, last } => {
                    self.q[producer].find_mut(stream).for_each(|q| q.cursor.set_last(last));
                    None
                }
                Action::End { producer, stream } => self.q[producer].end(stream).map(|e| (producer, e)),
            };
            if let Some((p, e)) = ended {
                self.s.on_stopped(p, e.stream, e.sent, self.now).expect("obedient producer");
            }
            for p in 0..PRODUCERS {
                self.close_paused(p);
            }
        }
    }

    fn close_paused(&mut self, p: usize) {
        while self.q[p].has_work() && self.q[p].running().is_some_and(|s| s.cursor.finished()) {
            if let Next::Stopped(e) = self.q[p].step() {
                self.s.on_stopped(p, e.stream, e.sent, self.now).expect("obedient producer");
            }
        }
    }

    fn deliver(&mut self, p: usize) {
        let alive = self.q[p].running().is_some_and(|q| !q.cursor.finished()) && !self.s.is_failed(p);
        if !alive {
            return;
        }
        let Next::Block { stream, block } = self.q[p].step() else { return };
        self.s.on_blocks(p, stream, block, 1, self.now).expect("obedient producer");
        self.got[block as usize] += 1;
        assert!(self.got[block as usize] == 1, "block {block} came twice");
        self.close_paused(p);
        self.pump();
    }
}

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let cfg = Config { initial_window: 2, min_window: 2, ..Config::default() };
    let s = Scheduler::with_homes(&[0..BLOCKS], BLOCKS, (&homes(), 1), PRODUCERS, cfg, now);
    let mut r = Run { s, q: (0..PRODUCERS).map(|_| Streams::default()).collect(), got: vec![0; BLOCKS as usize], now };
    r.pump();
    let mut mirror_lost = false;
    for op in data.chunks(4) {
        match op {
            [0, home, at, len] => {
                let dir = if len & 1 == 0 { Direction::Increment } else { Direction::Decrement };
                let at = u64::from(*at);
                r.s.on_told(usize::from(*home % 6), at..at + u64::from(len >> 1), dir, r.now);
                while r.s.poll_told().is_some() {}
                r.pump();
            }
            [1, p, ..] => {
                let p = usize::from(*p) % PRODUCERS;
                mirror_lost |= p < 2;
                r.q[p] = Streams::default();
                r.s.on_failed(p, r.now);
                r.pump();
            }
            [_, p, ms, ..] => {
                r.now += Duration::from_millis(u64::from(*ms));
                r.deliver(usize::from(*p) % PRODUCERS);
            }
            _ => {}
        }
    }
    // Everyone left delivers in turn until the end: with a mirror left,
    // the file always ends (peers hold only their shares).
    let mut guard = 0;
    while !r.s.is_done() && !r.s.is_stuck() && guard < 10_000 {
        r.now += Duration::from_millis(10);
        for p in 0..PRODUCERS {
            r.deliver(p);
        }
        while r.s.poll_told().is_some() {}
        guard += 1;
    }
    assert!(r.s.is_done() || mirror_lost, "the transfer never ended");
});
