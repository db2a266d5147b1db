//! Request sequences as a client sends them, through the server's bundle
//! and walk handling: `Bundle` pieces gathered (up to the upload budget),
//! `BundleEnd` unpacked (up to the definition limit) and registered, its
//! range read; `Walk` paths confined to the root and walked. Against a
//! root with symlinks out of it: nothing is ever read or listed from
//! outside, and nothing panics.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use bytes::BytesMut;
use ddftp_proto::{packed, Request};
use ddftpd::bundle::{self, Bundle};
use ddftpd::root::Root;
use libfuzzer_sys::fuzz_target;

const SECRET: &[u8] = b"SECRET-OUTSIDE-THE-ROOT";

fn fixture() -> &'static (Root, PathBuf) {
    static F: OnceLock<(Root, PathBuf)> = OnceLock::new();
    F.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("ddftp-fuzz-requests-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("d/e")).unwrap();
        std::fs::write(root.join("d/f"), b"data").unwrap();
        std::fs::write(root.join("d/e/g"), b"more").unwrap();
        std::fs::create_dir_all(base.join("outside-dir")).unwrap();
        std::fs::write(base.join("outside-dir/SECRET-NAME"), SECRET).unwrap();
        std::fs::write(base.join("outside"), SECRET).unwrap();
        for f in [root.join("d/f"), root.join("d/e/g"), base.join("outside")] {
            let f = std::fs::File::options().write(true).open(f).unwrap();
            f.set_modified(std::time::UNIX_EPOCH).unwrap();
        }
        let _ = std::os::unix::fs::symlink(base.join("outside"), root.join("link"));
        let _ = std::os::unix::fs::symlink("../outside-dir", root.join("d/up"));
        let _ = std::os::unix::fs::symlink(&base, root.join("d/base"));
        (Root::new(&root, true).unwrap(), root.canonicalize().unwrap())
    })
}

/// A list written where the target can read it after the walk.
#[derive(Clone, Default)]
struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let (root, real) = fixture();
    let mut src = BytesMut::from(data);
    let mut upload: Vec<u8> = vec![];
    while let Ok(Some(req)) = Request::decode(&mut src) {
        match req {
            Request::Bundle { data } => {
                if upload.len() + data.len() > bundle::UPLOADS {
                    return;
                }
                upload.extend_from_slice(&data);
            }
            Request::BundleEnd => {
                let packed = std::mem::take(&mut upload);
                let Ok(list) = packed::unpack(&packed, bundle::MAX_DEFINITION) else { continue };
                assert!(list.len() <= bundle::MAX_DEFINITION);
                let Ok(b) = Bundle::define(root, &list) else { continue };
                if b.size > 1 << 16 {
                    continue;
                }
                let mut buf = vec![0u8; b.size as usize];
                if b.read_exact_at(&mut buf, 0).is_ok() {
                    assert!(!buf.windows(SECRET.len()).any(|w| w == SECRET), "read from outside the root");
                }
            }
            Request::Walk { path } => {
                let Ok(dir) = root.resolve(&path) else { continue };
                assert!(dir.starts_with(real), "{path:?} resolved to {dir:?}");
                if !dir.is_dir() {
                    continue;
                }
                let out = Shared::default();
                let opts = ddtree::walk::Options {
                    threads: 1,
                    label: Some(b"L".to_vec()),
                    on_error: Some(ddtree::walk::OnError(std::sync::Arc::new(|_, _| {}))),
                    ..Default::default()
                };
                let _ = ddtree::walk::walk_with(&dir, &opts, ddtree::walk::Output::List(Box::new(out.clone())));
                let out = out.0.lock().unwrap();
                let text = String::from_utf8_lossy(&out);
                assert!(!text.contains("SECRET-NAME"), "listed from outside the root: {text:?}");
            }
            _ => {}
        }
    }
});
