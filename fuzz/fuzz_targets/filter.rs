//! The filter rules a client sends a mirror with its walk (rsync's
//! patterns, compiled to regular expressions there): any rules compile or
//! are refused, and any path is then matched without a panic, in bounded
//! time (the regex crate's matching is linear in the path).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut parts = text.split('\n');
    let Some(path) = parts.next() else { return };
    let rules: Vec<(bool, String)> = parts.take(64).map(|p| (p.starts_with('+'), p.to_string())).collect();
    if let Ok(f) = ddtree::filter::Filter::from_rules(&rules) {
        let p = std::path::Path::new(path);
        let _ = f.prunes(p, false);
        let _ = f.prunes(p, true);
        let _ = f.excludes(p, false, &mut std::collections::HashMap::new());
    }
});
