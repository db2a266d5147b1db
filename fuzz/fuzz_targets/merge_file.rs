//! A mirror's `.rsync-filter` (rsync's dir-merge file, listed with its
//! directory by a walk): any bytes are taken as rules or refused without
//! a panic, and a refused one leaves out what its directory holds.
#![no_main]
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ddtree::filter::{Filter, RuleSpec};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |&b| b == 0);
    let path = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let text = parts.next().unwrap_or_default().to_vec();
    let f = Filter::new(&[RuleSpec::Rule("dir-merge .rsync-filter".into())]).expect("a dir-merge rule");
    let (f, bad) = f.with_merge_files(vec![(PathBuf::from("d"), Ok(text))]);
    let _ = f.excludes(Path::new(&path), false, &mut HashMap::new());
    let _ = f.excludes(Path::new(&path), true, &mut HashMap::new());
    if !bad.is_empty() {
        assert!(f.excludes(Path::new("d/x"), false, &mut HashMap::new()));
    }
});
