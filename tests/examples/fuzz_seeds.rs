//! Writes seeds for the `requests` fuzz target (`fuzz/seeds/requests`):
//! request sequences that reach the bundle and walk handling, so the
//! fuzzer starts from inputs that get past decoding and unpacking.
//!
//! `cargo run -p ddftp-tests --example fuzz_seeds`

use bytes::BytesMut;
use ddftp_proto::{packed, Request};

fn main() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/seeds/requests");
    std::fs::create_dir_all(dir).unwrap();
    let bundle = |list: &[u8]| {
        let def = packed::pack(&[b"#ddftp-list 1\0".as_slice(), list].concat());
        let mut reqs: Vec<Request> = def
            .chunks(ddftp_proto::frame::MAX_BUNDLE_CHUNK)
            .map(|c| Request::Bundle { data: c.to_vec().into() })
            .collect();
        reqs.push(Request::BundleEnd);
        reqs
    };
    let walk = |p: &str| vec![Request::Walk { path: p.into() }];
    let seeds: Vec<(&str, Vec<Request>)> = vec![
        ("walk-root", walk(".")),
        ("walk-d", walk("d")),
        ("walk-up", walk("d/up")),
        ("walk-base", walk("d/base")),
        ("bundle-file", bundle(b"f 4 644 0.000000000 d/f\0")),
        ("bundle-two", bundle(b"f 4 644 0.000000000 d/f\0f 4 644 0.000000000 d/e/g\0")),
        ("bundle-link", bundle(b"f 23 644 0.000000000 link\0")),
        ("bundle-up", bundle(b"f 23 644 0.000000000 d/up/../outside\0")),
        ("both", [bundle(b"f 4 644 0.000000000 d/f\0"), walk("d")].concat()),
        (
            "seals",
            [
                bundle(b"f 4 644 0.000000000 d/f\0"),
                vec![Request::Seals { path: "@bundle/00".into(), block_size: 512, first: 0, count: 1 }],
            ]
            .concat(),
        ),
    ];
    for (name, reqs) in seeds {
        let mut out = BytesMut::new();
        for r in &reqs {
            r.encode(&mut out);
        }
        std::fs::write(format!("{dir}/{name}"), &out).unwrap();
    }
}
