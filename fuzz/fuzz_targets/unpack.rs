//! Arbitrary bytes as a packed list (what a mirror's walk or a client's
//! bundle definition carries): unpacking and parsing never panic and never
//! grow past the limit, and a list that parses packs and unpacks back to
//! itself.
#![no_main]

use std::path::Path;

use ddftp_proto::packed;
use ddtree::list::ddftp;
use libfuzzer_sys::fuzz_target;

const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    // Packed input, as the wire brings it.
    if let Ok(list) = packed::unpack(data, LIMIT) {
        assert!(list.len() <= LIMIT);
        let _ = ddftp::read(&list[..], Path::new("fuzz"));
    }
    // Plain input, as a list: what parses survives a round trip.
    if let Ok(entries) = ddftp::read(data, Path::new("fuzz")) {
        let mut again = ddftp::MAGIC.to_vec();
        for e in &entries {
            ddftp::push_record(&mut again, e);
        }
        let back = packed::unpack(&packed::pack(&again), again.len()).expect("own packing unpacks");
        assert_eq!(ddftp::read(&back[..], Path::new("fuzz")).expect("own list parses"), entries);
    }
});
