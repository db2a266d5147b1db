//! The README's Quick start, run as written (bash, `set -e`) in a fresh
//! empty directory with the binaries on PATH, as a new user would.

use std::process::Command;

use crate::util::*;

/// The first ```sh block after `heading` in the README.
fn block_after(heading: &str) -> String {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let from = readme.find(heading).unwrap_or_else(|| panic!("README has no {heading:?}"));
    let rest = &readme[from..];
    let start = rest.find("```sh\n").expect("a sh block") + "```sh\n".len();
    let end = rest[start..].find("```").expect("its end");
    rest[start..start + end].to_string()
}

#[test]
fn the_readmes_quick_start_works_as_written() {
    let script = block_after("## Quick start");
    let dir = tempfile::tempdir().unwrap();
    let path = format!("{}:{}", bin_dir().display(), std::env::var("PATH").unwrap_or_default());
    let o = Command::new("bash")
        .args(["-e", "-c", &script])
        .current_dir(dir.path())
        .env("PATH", path)
        .output()
        .expect("bash");
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "the Quick start failed: {}\n{out}\n{err}", o.status);
    let (a, b) = (std::fs::read(dir.path().join("data/big.iso")).unwrap(), std::fs::read(dir.path().join("big.iso")));
    assert!(b.is_ok_and(|b| b == a), "big.iso is the served file");
    assert!(out.contains("already complete"), "the second run moves nothing: {out}");
    // The servers were stopped by the script's last line.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ["127.0.0.1:7401", "127.0.0.1:7402"].iter().any(|a| std::net::TcpStream::connect(a).is_ok()) {
        assert!(std::time::Instant::now() < deadline, "a server still listens after `kill %1 %2`");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
