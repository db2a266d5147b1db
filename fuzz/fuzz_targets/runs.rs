//! What a peer's runs do to a message `ddftp recv` assembles: any offsets
//! and lengths, overlapping, repeated, out of order, past the end. No
//! panic; the message is whole exactly when every byte has come, and then
//! holds exactly the bytes sent.
#![no_main]
use std::time::Instant;

use bytes::Bytes;
use ddnet::endpoint::assembly::Assembly;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&l, rest)) = data.split_first() else { return };
    let len = u64::from(l) * 7 + 1;
    // Bytes past the end too: a run that claims more than the message.
    let truth: Vec<u8> = (0..len + 300).map(|i| (i * 31 + 7) as u8).collect();
    let mut a = Assembly::new(len, 2, Instant::now(), true);
    let mut covered = vec![false; len as usize];
    for pair in rest.chunks(2) {
        let offset = u64::from(pair[0]) * 3 % (len + 2);
        let n = u64::from(*pair.get(1).unwrap_or(&1));
        let end = (offset + n).min(len + 300);
        let run = Bytes::copy_from_slice(&truth[offset.min(end) as usize..end as usize]);
        let before = covered.iter().filter(|&&c| c).count() as u64;
        for c in covered.iter_mut().take(end.min(len) as usize).skip(offset as usize) {
            *c = true;
        }
        let added = a.place(offset, run);
        assert_eq!(added, covered.iter().filter(|&&c| c).count() as u64 - before);
        assert_eq!(a.is_whole(), covered.iter().all(|&c| c));
        if a.is_whole() {
            assert!(a.into_message().into_bytes() == truth[..len as usize]);
            return;
        }
    }
});
