//! ddftpd's metrics page: whatever a scraper (or anyone who reaches
//! `--metrics`) sends as a request head, it is answered or refused
//! without a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = ddftpd::exporter::asks_for_page(data);
});
