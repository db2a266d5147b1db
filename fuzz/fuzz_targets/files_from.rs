//! A `--files-from` list of any bytes: parsed without a panic, and every
//! entry it names is below SRC, with its directories wanted, and the walk
//! rules made of it parse and keep every entry named.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, text)) = data.split_first() else { return };
    if let Ok(f) = ddtree::files_from::FilesFrom::parse(text, mode & 1 == 1) {
        for p in f.named() {
            assert!(p.components().all(|c| matches!(c, std::path::Component::Normal(_))), "{p:?}");
            assert!(f.wants(p) && f.wants(p.parent().unwrap_or(Path::new(""))));
        }
        // The walk rules made of it are patterns a mirror accepts, and
        // they never prune what the list names.
        if let Some(rules) = f.walk_rules() {
            let filter = ddtree::filter::Filter::from_rules(&rules).expect("walk rules parse");
            for p in f.named() {
                assert!(!filter.prunes(p, false), "{p:?} pruned by {rules:?}");
            }
        }
    }
});
