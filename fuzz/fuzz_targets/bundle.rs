//! Arbitrary records as a bundle definition, against a root that has a
//! symlink out of it and a directory symlink pointing back out: whatever
//! registers, reading its whole range never panics and never returns a
//! byte of the file outside the root.
#![no_main]

use std::sync::OnceLock;

use ddftpd::bundle::Bundle;
use ddftpd::root::Root;
use ddtree::list::ddftp;
use libfuzzer_sys::fuzz_target;

const SECRET: &[u8] = b"SECRET-OUTSIDE-THE-ROOT";

fn root() -> &'static Root {
    static R: OnceLock<Root> = OnceLock::new();
    R.get_or_init(|| {
        let base = std::env::temp_dir().join(format!("ddftp-fuzz-bundle-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("d")).unwrap();
        std::fs::write(root.join("d/f"), b"data").unwrap();
        std::fs::write(base.join("outside"), SECRET).unwrap();
        // mtime 0, as the seeds list them: the entries' checks pass and
        // the reads happen (a leak would be read, not refused for its mtime).
        for f in [root.join("d/f"), base.join("outside")] {
            let f = std::fs::File::options().write(true).open(f).unwrap();
            f.set_modified(std::time::UNIX_EPOCH).unwrap();
        }
        let _ = std::os::unix::fs::symlink(base.join("outside"), root.join("link"));
        let _ = std::os::unix::fs::symlink("../outside", root.join("d/up"));
        let _ = std::os::unix::fs::symlink(&base, root.join("d/base"));
        Root::new(&root, true).unwrap()
    })
}

fuzz_target!(|data: &[u8]| {
    // The header is given: the records are what is fuzzed.
    let list = [ddftp::MAGIC, data].concat();
    let Ok(b) = Bundle::define(root(), &list) else { return };
    if b.size > 1 << 16 {
        return;
    }
    let mut buf = vec![0u8; b.size as usize];
    if b.read_exact_at(&mut buf, 0).is_ok() {
        assert!(!buf.windows(SECRET.len()).any(|w| w == SECRET), "read from outside the root: {buf:?}");
    }
});
