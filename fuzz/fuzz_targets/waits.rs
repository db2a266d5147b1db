//! What a server says of when to come back, and the rates and sizes a
//! user types: a `Busy` refusal's text (a hostile ddftpd's), an HTTP
//! `Retry-After` (a hostile web server's), `--limit-rate`/`--window`.
//! Nothing panics; a wait read is bounded, and the retry policy never
//! waits longer than its cap whatever a server asks.
#![no_main]

use std::time::Duration;

use ddftp::retry::{RetryPolicy, MAX_WAIT};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let busy = ddftp_proto::busy::wait(&text);
    assert!(busy.is_none_or(|w| w <= ddftp_proto::busy::MAX_WAIT));
    let after = ddftp::http::retry_after(&text);
    if let Some(w) = after {
        assert_eq!(Some(w.as_secs()), text.trim().parse::<u64>().ok());
    }
    let policy = RetryPolicy { retries: 3, first_wait: Duration::from_secs(1) };
    for hint in [busy, after] {
        for n in 1..=policy.tries() {
            let w = policy.wait(n, hint).expect("within the budget");
            assert!(w <= MAX_WAIT, "{w:?}");
        }
        assert_eq!(policy.wait(policy.tries() + 1, hint), None);
    }
    if let Ok(r) = ddftp_proto::units::parse_rate(&text) {
        assert!(r > 0);
    }
    let _ = ddftp_proto::units::parse_size(&text);
});
