//! A symlink's target and path as a mirror lists them, judged for
//! `archive --safe-links`: any bytes are judged without a panic, and an
//! absolute or empty target is always unsafe.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |&b| b == 0);
    let target = parts.next().unwrap_or_default();
    let rel = parts.next().unwrap_or_default();
    let verdict = ddtree::safe_links::is_unsafe(target, rel);
    assert!(verdict || !(target.is_empty() || target[0] == b'/'));
});
