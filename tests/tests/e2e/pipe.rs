//! `tar c | ddftp send --links ...` on one side, `ddftp recv --listen ... |
//! tar x` on the other: the tree arrives intact over several links.

use std::process::{Command, Stdio};

use crate::util::*;

#[test]
fn tar_through_three_links() {
    let f = Fixture::new();
    let src = f.root();
    std::fs::create_dir_all(src.join("a/b")).unwrap();
    random_file(&src.join("a/big"), 20_000_000, 41);
    random_file(&src.join("a/b/small"), 1234, 42);
    std::fs::write(src.join("empty"), b"").unwrap();
    let dst = f.dir.path().join("dst");
    std::fs::create_dir(&dst).unwrap();

    let (mut recv, links, _err) = receiving(Command::new("sh").arg("-c").arg(format!(
        "{} recv --listen 127.0.0.1:0,127.0.0.2:0,127.0.0.3:0 | tar x -C {}",
        bin("ddftp").display(),
        dst.display()
    )));
    assert_eq!(links.split(',').count(), 3);

    let send = Command::new("sh")
        .arg("-c")
        .arg(format!("tar c -C {} . | {} send --links {links}", src.display(), bin("ddftp").display()))
        .output()
        .unwrap();
    assert!(send.status.success(), "send: {}", String::from_utf8_lossy(&send.stderr));
    let summary = String::from_utf8_lossy(&send.stderr);
    assert!(summary.contains("over 3 links"), "{summary}");
    assert!(recv.wait().unwrap().success(), "recv | tar x failed");
    for p in ["a/big", "a/b/small", "empty"] {
        assert_eq!(std::fs::read(dst.join(p)).unwrap(), std::fs::read(src.join(p)).unwrap(), "{p}");
    }
}

#[test]
fn send_with_no_receiver_fails_clearly() {
    // Port 1 on loopback: nobody listens.
    let out =
        Command::new(bin("ddftp")).args(["send", "--links", "127.0.0.1:1"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("127.0.0.1:1"), "{}", String::from_utf8_lossy(&out.stderr));
}
