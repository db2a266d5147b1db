//! A mirror's `.rsync-filter` (rsync's dir-merge file, listed with its
//! directory by a walk), read as each kind of dir-merge rule reads it
//! (rule words, `-`/`+` patterns only, `n`, sides, perishable, words
//! split at blanks, a `.cvsignore`): any bytes
//! are taken as rules or refused without a panic, and a refused one
//! leaves out what its directory holds, on either side.
#![no_main]
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ddtree::filter::{Filter, RuleSpec};
use libfuzzer_sys::fuzz_target;

const MERGES: [&str; 8] = ["dir-merge .f", ":- .f", ":n+ .f", ":sp .f", ":re .f", "dir-merge,n .f", ":C .f", ":w .f"];

fuzz_target!(|data: &[u8]| {
    let Some((&how, data)) = data.split_first() else { return };
    let mut parts = data.splitn(2, |&b| b == 0);
    let path = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let text = parts.next().unwrap_or_default().to_vec();
    let rule = MERGES[usize::from(how) % MERGES.len()];
    let f = Filter::new(&[RuleSpec::Rule(rule.into())]).expect("a dir-merge rule");
    let (f, bad) = f.with_merge_files(vec![(PathBuf::from("d/.f"), Ok(text))]);
    for view in [f.clone(), f.receiving(false), f.receiving(true).in_deleted()] {
        let _ = view.excludes(Path::new(&path), false, &mut HashMap::new());
        let _ = view.excludes(Path::new(&path), true, &mut HashMap::new());
        if !bad.is_empty() {
            assert!(view.excludes(Path::new("d/x"), false, &mut HashMap::new()));
        }
    }
});
