//! `get -o -`: the file in order on standard output, through a bounded
//! reorder window, with nothing written to disk.

use std::io::{Read, Write};
use std::process::{Command, Stdio};

use rand::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

use crate::util::*;

/// A file of `size` seeded pseudo-random bytes written a piece at a time
/// (a 2 GiB test file is not held in memory); its SHA-256.
fn big_file(path: &std::path::Path, size: u64, seed: u64) -> String {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let (mut h, mut buf, mut left) = (Sha256::new(), vec![0u8; 8 << 20], size);
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        rng.fill_bytes(&mut buf[..n]);
        h.update(&buf[..n]);
        f.write_all(&buf[..n]).unwrap();
        left -= n as u64;
    }
    f.flush().unwrap();
    format!("{:x}", h.finalize())
}

#[test]
fn a_2_gib_file_to_stdout_is_exact_in_bounded_memory() {
    const WINDOW: u64 = 256 << 20;
    let f = Fixture::new();
    let want = big_file(&f.root().join("f"), 2 << 30, 50);
    assert!(Command::new(bin("ddftpd")).arg("index").arg(f.root()).status().unwrap().success());
    let (a, b, c) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let work = f.out("work");
    std::fs::create_dir(&work).unwrap();
    let mut child = Command::new(bin("ddftp"))
        .args(["get", "f", "-m", &mirrors_arg(&[&a, &b, &c]), "-o", "-", "--json"])
        .current_dir(&work)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        err.read_to_string(&mut s).unwrap();
        s
    });
    let (mut h, mut buf, mut got, mut peak) = (Sha256::new(), vec![0u8; 1 << 20], 0u64, 0u64);
    loop {
        let n = out.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        got += n as u64;
        peak = peak.max(peak_memory(pid));
    }
    let status = child.wait().unwrap();
    let err = errs.join().unwrap();
    assert!(status.success(), "{err}");
    assert_eq!((got, format!("{:x}", h.finalize())), (2 << 30, want), "{err}");
    assert!(peak < WINDOW + (64 << 20), "{} MiB resident with a {} MiB window", peak >> 20, WINDOW >> 20);
    let j: serde_json::Value = serde_json::from_str(err.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    assert_eq!(j["verified"], true, "{j}");
    assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "nothing on disk");
}

#[test]
fn stdout_that_is_closed_early_ends_the_download_with_why() {
    let f = Fixture::new();
    random_file(&f.root().join("f"), 64 << 20, 51);
    let a = Mirror::start(&f.root(), &[]);
    let mut child = Command::new(bin("ddftp"))
        .args(["get", "f", "-m", &a.addr, "-o", "-", "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&o.stderr).contains("standard output"));
}
