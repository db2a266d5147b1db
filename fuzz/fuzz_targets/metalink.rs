//! Arbitrary text as a Metalink 4 document (from a user, or a server that
//! lies): parsing never panics; what parses names a plain relative file,
//! http(s) URLs only, a 64-hex-digit SHA-256 if any, and exactly as many
//! piece hashes as the size and piece length call for.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(xml) = std::str::from_utf8(data) else { return };
    let Ok(files) = ddftp::metalink::parse(xml) else { return };
    for f in files {
        assert!(ddftp_proto::relpath::check(f.name.as_bytes()).is_ok(), "{:?}", f.name);
        assert!(f.urls.iter().all(|u| u.starts_with("http://") || u.starts_with("https://")));
        assert!(f.sha256.as_ref().is_none_or(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())));
        if let Some(p) = &f.pieces {
            let size = f.size.expect("pieces only with a size");
            assert!(p.chunk_size > 0);
            assert_eq!(p.hashes.len() as u64, size.div_ceil(u64::from(p.chunk_size)));
        }
    }
});
