//! Arbitrary bytes as list format 2 (what a hostile mirror's walk, or a
//! `--list` file, gives `archive`): parsing never panics; a record that
//! parses writes back to one that parses to the same entry; and the
//! list's tree check (`ddtree::list::shape`) admits only entries whose
//! names are plain and whose directory was admitted as one, each once,
//! whatever the order.
#![no_main]

use std::collections::HashMap;
use std::path::Path;

use ddtree::list::ddftp;
use ddtree::list::shape::Shape;
use ddtree::list::Kind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut list = b"#ddftp-list 2\0".to_vec();
    list.extend_from_slice(data);
    let Ok(entries) = ddftp::read(&list[..], Path::new("fuzz")) else {
        // Record by record: a bad one is refused alone, never a panic.
        for rec in data.split(|&b| b == 0) {
            let _ = ddftp::parse_record(rec);
        }
        return;
    };
    for e in &entries {
        let mut again = Vec::new();
        ddftp::push_record(&mut again, e);
        let back = ddftp::parse_record(&again[..again.len() - 1]).expect("a written record parses");
        assert_eq!(&back, e);
    }
    let mut shape = Shape::default();
    let (mut out, mut refused) = (vec![], vec![]);
    for (i, e) in entries.iter().enumerate() {
        shape.admit(e.path.as_slice().into(), e.kind == Kind::Dir, i, &mut out, &mut refused);
    }
    refused.extend(shape.finish());
    assert_eq!(out.len() + refused.len(), entries.len());
    let mut admitted: HashMap<&[u8], bool> = HashMap::new();
    for &i in &out {
        let e = &entries[i];
        assert!(admitted.insert(&e.path, e.kind == Kind::Dir).is_none(), "admitted twice");
    }
    for &i in &out {
        let p = &entries[i].path[..];
        if p.is_empty() {
            continue;
        }
        assert!(ddftp_proto::relpath::check(p).is_ok());
        let parent = ddftp_proto::relpath::parent(p);
        assert!(parent.is_empty() || admitted.get(parent) == Some(&true), "admitted below a non-directory");
    }
});
