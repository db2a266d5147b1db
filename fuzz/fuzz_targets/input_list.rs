//! `ddftp get -i LIST`: any text as an aria2c-style input file. No panic,
//! and an entry not marked bad never names an output outside where it is
//! put (absolute, or climbing with `..`).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (entries, _) = ddftp::input_list::parse(text);
    for e in entries.iter().filter(|e| e.bad.is_none()) {
        for p in e.out.iter().chain(&e.dir) {
            assert!(!p.starts_with('/') && !p.split('/').any(|c| c == ".."), "{p:?}");
        }
    }
});
