//! A `--files-from` list of any bytes: parsed without a panic, and every
//! entry it names is below SRC, with its directories wanted, and the walk
//! rules made of it parse and keep every entry named.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, text)) = data.split_first() else { return };
    if let Ok(f) = ddtree::files_from::FilesFrom::parse(text, mode & 1 == 1) {
        let f = if mode & 2 == 2 { f.recursing() } else { f };
        for p in f.named() {
            assert!(p.components().all(|c| matches!(c, std::path::Component::Normal(_))), "{p:?}");
            assert!(f.wants(p) && f.wants(p.parent().unwrap_or(Path::new(""))));
        }
        // The walk rules made of it are patterns a mirror accepts, and
        // they never prune what the list names (below the base of the
        // lines that name it).
        for (i, base) in f.bases().enumerate() {
            assert!(base.components().all(|c| matches!(c, std::path::Component::Normal(_))), "{base:?}");
            if let Some(rules) = f.walk_rules(i) {
                ddtree::filter::Filter::from_rules(&rules).expect("walk rules parse");
            }
        }
        if let (1, Some(rules)) = (f.bases().count(), f.walk_rules(0)) {
            let filter = ddtree::filter::Filter::from_rules(&rules).expect("walk rules parse");
            for p in f.named() {
                assert!(!filter.prunes(p, false), "{p:?} pruned by {rules:?}");
            }
        }
    }
});
