//! `--usermap`/`--groupmap` name patterns (the user's) against names a
//! mirror lists (anyone's): checked and matched without a panic, in
//! bounded time; a pattern that is a plain name matches that name.
#![no_main]
use libfuzzer_sys::fuzz_target;

use ddftp::archive::wild::{check, wild};

fuzz_target!(|data: &[u8]| {
    // pattern, a NUL, the name
    let (pattern, name) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &b""[..]),
    };
    let _ = check(pattern);
    let _ = wild(pattern, name);
    if !name.iter().any(|b| b"*?[\\".contains(b)) {
        assert!(wild(name, name), "{name:?}");
    }
});
