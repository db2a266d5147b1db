//! A mirror's list of symlinks, directories and files, followed for
//! `archive -L`: any list and targets end without a panic,
//! and with `-L` never leave a symlink among what is copied.
#![no_main]
use std::collections::HashSet;

use ddtree::follow::{follow, Follow, Known};
use ddtree::list::{Entry, Kind, Meta, Time};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Records separated by NUL: a kind letter, then `PATH` or
    // `PATH\x01TARGET` for a link.
    let mut entries = vec![];
    for rec in data.split(|&b| b == 0).take(64) {
        let Some((&k, rest)) = rec.split_first() else { continue };
        let kind = match k % 3 {
            0 => Kind::Dir,
            1 => Kind::File,
            _ => Kind::Link,
        };
        let (path, target) = match rest.iter().position(|&b| b == 1) {
            Some(i) => (&rest[..i], Some(rest[i + 1..].to_vec())),
            None => (rest, None),
        };
        let mut meta = Meta::default();
        if kind == Kind::Link {
            meta.rare_mut().target = target;
        }
        entries.push(Entry { path: path.to_vec(), kind, perm: 0o755, size: 1, mtime: Time { sec: 1, nsec: 0 }, meta });
    }
    let mut known = Known::default();
    known.add(entries.iter().cloned(), Some(b""));
    let mut seen = HashSet::new();
    let listed: Vec<(Vec<u8>, Entry)> = entries
        .into_iter()
        .filter(|e| seen.insert(ddtree::follow::key(&e.path).to_vec()))
        .map(|e| (ddtree::follow::key(&e.path).to_vec(), e))
        .collect();
    for how in [Follow::All, Follow::Unsafe] {
        let f = follow(listed.clone(), &known, how);
        if how == Follow::All {
            assert!(f.out.iter().all(|(_, e)| e.kind != Kind::Link));
        }
        assert!(f.out.len() <= listed.len() + ddtree::follow::MAX_ADDED);
    }
});
