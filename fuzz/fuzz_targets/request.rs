//! Requests as the server handles them: every decoded path goes through the
//! root confinement (which must never resolve outside the root) and every
//! `Start` through the range check (which must never accept a block past
//! the end of the file or panic on any number).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use bytes::BytesMut;
use ddftp_proto::Request;
use ddftpd::connection::check_start;
use ddftpd::root::Root;
use libfuzzer_sys::fuzz_target;

fn fixture() -> &'static (Root, PathBuf) {
    static F: OnceLock<(Root, PathBuf)> = OnceLock::new();
    F.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("ddftp-fuzz-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/f"), b"data").unwrap();
        std::fs::write(base.join("outside"), b"secret").unwrap();
        let _ = std::os::unix::fs::symlink(base.join("outside"), root.join("link"));
        let _ = std::os::unix::fs::symlink("../outside", root.join("d/up"));
        let real = root.canonicalize().unwrap();
        (Root::new(&root, true).unwrap(), real)
    })
}

fuzz_target!(|data: &[u8]| {
    let (root, real) = fixture();
    let mut src = BytesMut::from(data);
    while let Ok(Some(req)) = Request::decode(&mut src) {
        match &req {
            Request::Stat { path, .. } | Request::Start { path, .. } | Request::Manifest { path, .. } if !path.is_empty() => {
                if let Ok(p) = root.resolve(path) {
                    assert!(p.starts_with(real), "{path:?} resolved to {p:?}");
                }
            }
            _ => {}
        }
        if let Request::Start { block_size, first, last, dir, .. } = req {
            for size in [0u64, 1, 4096, u64::MAX] {
                if check_start(size, block_size, first, last, dir).is_ok() {
                    let blocks = size.div_ceil(u64::from(block_size));
                    assert!(first < blocks && last < blocks);
                }
            }
        }
    }
});
