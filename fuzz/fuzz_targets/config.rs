//! ddftpd's `--config` file: any text through the parser and the merge
//! with the (empty) command line, as ddftpd reads it at start and on
//! SIGHUP. No panic; what is accepted is what the flags would accept
//! (no rate of 0, counts a semaphore holds, times a clock holds), so the
//! server built from it cannot panic once serving.
#![no_main]
use std::time::{Duration, Instant};

use clap::Parser;
use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../cli/src/ddftpd/flags.rs"]
mod flags;

#[allow(dead_code)]
#[path = "../../cli/src/ddftpd/config.rs"]
mod config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(file) = config::FileConfig::parse(text) else { return };
    let flags = flags::Flags::parse_from(["ddftpd"]);
    let Ok(s) = config::merge(&flags, file) else { return };
    assert_ne!(s.rate_limit, Some(0));
    assert!(s.max_connections >= 1 && s.max_connections <= config::MAX_CONNECTIONS);
    assert!(s.max_per_client >= 1 && s.max_per_client <= config::MAX_CONNECTIONS);
    let _ = tokio::sync::Semaphore::new(s.max_connections);
    for secs in [s.idle_timeout, s.grace, s.rescan] {
        assert!(secs <= config::MAX_SECONDS);
        let _ = Instant::now() + Duration::from_secs(secs);
    }
});
