//! What strangers send `ddftp recv` before a channel is theirs: any bytes,
//! cut into greetings (a `Hello` each, with a time step), through the
//! frame parser and the accepting end's book of sessions still arriving.
//! No panic; what is held stays bounded however the greetings go; a
//! session handed over has all its links, each once, in order.
#![no_main]
use std::time::{Duration, Instant};

use ddnet::greeting::{Pending, MAX_LINKS, MAX_PENDING};
use ddnet::wire::{Frame, LinkIds, HELLO_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let mut book = Pending::default();
    let mut now = t0;
    for (i, chunk) in data.chunks(HELLO_LEN + 1).enumerate() {
        let (step, greeting) = chunk.split_first().unwrap_or((&0, &[]));
        now += Duration::from_millis(u64::from(*step) * 50);
        let Ok(Some((Frame::Hello { session, index, count }, _))) = Frame::parse(greeting, &LinkIds::default()) else {
            continue;
        };
        if let Some(links) = book.add(now, session, index, count, (index, i)) {
            assert_eq!(links.len(), count as usize);
            assert!(links.iter().enumerate().all(|(k, (index, _))| *index as usize == k));
        }
        let (sessions, held) = book.held();
        assert!(sessions <= MAX_PENDING && held <= MAX_PENDING * MAX_LINKS as usize);
    }
});
