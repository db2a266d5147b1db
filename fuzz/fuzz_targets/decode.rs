//! Arbitrary bytes through both decoders: never a panic, never an endless
//! loop, and whatever decodes encodes back to the same bytes.
#![no_main]

use bytes::BytesMut;
use ddftp_proto::{Reply, Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut src = BytesMut::from(data);
    while let Ok(Some(req)) = Request::decode(&mut src) {
        let mut wire = BytesMut::new();
        req.encode(&mut wire);
        assert_eq!(Request::decode(&mut wire).unwrap(), Some(req));
        assert!(wire.is_empty());
    }
    let mut src = BytesMut::from(data);
    while let Ok(Some(reply)) = Reply::decode(&mut src) {
        let mut wire = BytesMut::new();
        reply.encode(&mut wire);
        assert_eq!(Reply::decode(&mut wire).unwrap(), Some(reply));
    }
});
