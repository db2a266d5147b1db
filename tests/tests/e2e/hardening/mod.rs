//! What a hostile or unlucky user broke once (the hardening issue): each
//! test is one numbered case, and failed before its fix.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

fn get_into(mirrors: &str, out: &Path, extra: &[&str], expect: i32) -> std::process::Output {
    let mut args = vec!["get", "f", "--mirrors", mirrors, "-o", out.to_str().unwrap(), "--quiet"];
    args.extend_from_slice(extra);
    ddftp(&args, expect)
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Item 1: `-o` naming a FIFO or a character device is refused, and it stays.
#[test]
fn item01_an_output_that_is_a_device_or_fifo_is_refused_and_kept() {
    let f = Fixture::new();
    random_file(&f.root().join("f"), 100_000, 1);
    let a = Mirror::start(&f.root(), &[]);
    let fifo = f.out("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let err = stderr(&get_into(&a.addr, &fifo, &[], 2));
    assert!(err.contains("FIFO"), "{err}");
    assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo(), "the FIFO was replaced");
    assert!(!f.out("fifo.ddftp-part").exists());
    if is_root() {
        let null = f.out("null");
        assert!(Command::new("mknod").arg(&null).args(["c", "1", "3"]).status().unwrap().success());
        let err = stderr(&get_into(&a.addr, &null, &[], 2));
        assert!(err.contains("character device"), "{err}");
        assert!(std::fs::symlink_metadata(&null).unwrap().file_type().is_char_device(), "the device was replaced");
    }
}

/// A mirror holding another version of `f` than `good`'s.
fn stale_root(f: &Fixture, name: &str) -> std::path::PathBuf {
    let r = f.dir.path().join(name);
    std::fs::create_dir(&r).unwrap();
    random_file(&r.join("f"), 300_000, 99);
    r
}

/// Item 6: One server under two names votes once.
#[test]
fn item06_one_mirror_under_two_names_votes_once() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 300_000, 6);
    let good = Mirror::start(&f.root(), &[]);
    let good2 = Mirror::start(&f.root(), &[]);
    let stale = Mirror::start(&stale_root(&f, "stale"), &[]);
    let port = stale.addr.rsplit(':').next().unwrap();
    let twice = format!("127.0.0.1:{port},localhost:{port}");
    // Two names of the stale mirror against one good mirror: one vote each,
    // so no majority (it used to win 2-1 and the good one was dropped).
    let o = f.out("o1");
    let res = get_into(&format!("{twice},{}", good.addr), &o, &[], 3);
    let err = stderr(&res);
    assert!(err.contains("same server") && err.contains("no majority"), "{err}");
    assert!(!o.exists());
    // With two good mirrors, the good version wins 2-1.
    let o = f.out("o2");
    let res = get_into(&format!("{twice},{},{}", good.addr, good2.addr), &o, &[], 0);
    assert!(stderr(&res).contains("same server"));
    assert!(std::fs::read(&o).unwrap() == data);
}

/// Bytes the journal beside `out` says are done (0 while unreadable).
fn journaled(out: &Path) -> u64 {
    let j = out.with_file_name(format!("{}.ddftp-journal", out.file_name().unwrap().to_str().unwrap()));
    let Ok(text) = std::fs::read(j) else { return 0 };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&text) else { return 0 };
    let j = &v["journal"];
    let (bs, size) = (j["block_size"].as_u64().unwrap(), j["size"].as_u64().unwrap());
    let done = j["done"].as_array().unwrap().iter();
    done.map(|r| ((r[1].as_u64().unwrap() + 1) * bs).min(size) - r[0].as_u64().unwrap() * bs).sum()
}

/// Item 7: A file that cannot fit fails before a byte moves.
#[test]
fn item07_a_file_larger_than_the_disk_fails_up_front() {
    let f = Fixture::new();
    let _disk = SmallDisk::mount(&f.out("disk"), "8m");
    random_file(&f.root().join("f"), 12 << 20, 7);
    let a = Mirror::start(&f.root(), &[]);
    let o = f.out("disk/f");
    let res = get_into(&a.addr, &o, &["--json"], 4);
    let err = stderr(&res);
    assert!(err.contains("needs 12.00 MiB") && !err.contains("run the same command again"), "{err}");
    let j = json(&res);
    assert_eq!(j["exit_code"], 4);
    assert_eq!(std::fs::read_dir(f.out("disk")).unwrap().count(), 0, "nothing left behind");
}

/// Item 7: A disk that fills up during the transfer (someone else's file) does
/// not stop the journal: a rerun reuses what arrived.
#[test]
fn item07_the_journal_keeps_up_when_the_disk_fills() {
    const SIZE: usize = 24 << 20;
    let f = Fixture::new();
    let _disk = SmallDisk::mount(&f.out("disk"), "40m");
    let data = random_file(&f.root().join("f"), SIZE, 77);
    let a = Mirror::with_rate(&f.root(), "6MB");
    let o = f.out("disk/f");
    let mut child = Command::new(bin("ddftp"))
        .args(["get", "f", "--mirrors", &a.addr, "-o", o.to_str().unwrap(), "--quiet"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let wait = |at_least: u64| {
        let t = Instant::now();
        while journaled(&o) < at_least {
            assert!(t.elapsed() < Duration::from_secs(20), "journal stuck at {} bytes", journaled(&o));
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait(2 << 20);
    // Fill every byte left.
    let filler = f.out("disk/filler");
    let dd = Command::new("dd").arg("if=/dev/zero").arg(format!("of={}", filler.display())).arg("bs=64k").output();
    assert!(dd.is_ok_and(|o| String::from_utf8_lossy(&o.stderr).contains("No space left")));
    wait(SIZE as u64 * 2 / 3);
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_file(&filler).unwrap();
    let res = get_into(&a.addr, &o, &["--json"], 0);
    assert!(json(&res)["reused_bytes"].as_u64().unwrap() >= SIZE as u64 * 2 / 3);
    assert!(std::fs::read(&o).unwrap() == data);
}

/// Item 10: `-o newdir/` (not there) is refused before a byte moves.
#[test]
fn item10_an_output_in_a_missing_directory_is_refused_up_front() {
    let f = Fixture::new();
    random_file(&f.root().join("f"), 100_000, 10);
    let a = Mirror::start(&f.root(), &[]);
    let work = f.out("work");
    std::fs::create_dir(&work).unwrap();
    for (out, says) in [("newdir/", "directory name"), ("newdir/f", "newdir")] {
        let res = Command::new(bin("ddftp"))
            .args(["get", "f", "--mirrors", &a.addr, "-o", out, "--quiet"])
            .current_dir(&work)
            .output()
            .unwrap();
        assert_eq!(res.status.code(), Some(2), "{}", stderr(&res));
        let err = stderr(&res);
        assert!(err.contains(says) && !err.contains("run the same command again"), "{err}");
        assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "{out}: something was written");
    }
}

/// Item 11: A block size over what the mirrors serve is lowered to their limit
/// before anything is journaled.
#[test]
fn item11_a_block_size_over_the_mirrors_limit_is_agreed_down() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 40 << 20, 11);
    let a = Mirror::start(&f.root(), &[]);
    let o = f.out("f");
    let res = get_into(&a.addr, &o, &["--block-size", "32MiB", "--json"], 0);
    let j = json(&res);
    assert_eq!(j["block_size"], 16 << 20);
    assert!(stderr(&res).contains("the largest the mirrors serve"));
    assert!(std::fs::read(&o).unwrap() == data);
}

/// Item 12: `--json` prints one object on failure too; the rerun hint only
/// where a rerun helps.
#[test]
fn item12_json_on_failure_and_an_honest_rerun_hint() {
    let f = Fixture::new();
    let a = Mirror::start(&f.root(), &[]);
    let res = ddftp(&["get", "nothere", "--mirrors", &a.addr, "-o", f.out("x").to_str().unwrap(), "--json"], 7);
    let j = json(&res);
    assert_eq!(j["exit_code"], 7);
    assert!(j["error"].as_str().unwrap().contains("nothere"), "{j}");
    assert_eq!(j["resume"], "nothing");

    // Every mirror's copy changed behind its index: every block fails
    // verification, and a rerun cannot help until the mirrors agree again.
    // (No server runs while it changes: one would index the new contents
    // as they are closed, under the old mtime restored after.)
    drop(a);
    const SIZE: u64 = 4 << 20;
    let data = random_file(&f.root().join("f"), SIZE as usize, 12);
    let idx = Command::new(bin("ddftpd")).arg("index").arg(f.root()).output().unwrap();
    assert!(idx.status.success());
    let file = f.root().join("f");
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    let rotten: Vec<u8> = data.iter().map(|b| b ^ 1).collect();
    std::fs::write(&file, rotten).unwrap();
    std::fs::File::options().write(true).open(&file).unwrap().set_modified(mtime).unwrap();
    let (a, b) = (Mirror::start(&f.root(), &[]), Mirror::start(&f.root(), &[]));
    let res = get_into(&mirrors_arg(&[&a, &b]), &f.out("g"), &["--json"], 1);
    let err = stderr(&res);
    assert!(err.contains("fail verification") && !err.contains("run the same command again"), "{err}");
    let j = json(&res);
    assert_eq!((j["exit_code"].as_i64(), j["resume"].as_str()), (Some(1), Some("changed")), "{j}");
    assert_eq!(j["total_bytes"], SIZE);
    assert!(!j["warnings"].as_array().unwrap().is_empty());
}

/// Item 5: where owners are not kept (not root, or `--no-owner`),
/// setuid/setgid bits are not either; run as root, both are kept.
#[test]
fn item05_setuid_and_setgid_bits_are_dropped_with_a_note() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let src = f.root().join("t");
    std::fs::create_dir(&src).unwrap();
    for (name, mode) in [("suid", 0o4755), ("sgid", 0o2750), ("plain", 0o755)] {
        let p = src.join(name);
        std::fs::write(&p, name).unwrap();
        if is_root() {
            std::os::unix::fs::chown(&p, Some(1234), Some(1234)).unwrap();
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let a = Mirror::start(&f.root(), &[]);
    let dest = f.out("dest");
    let d = dest.to_str().unwrap();
    let res = ddftp(&["archive", "t", "--mirrors", &a.addr, "--dest", d, "--json", "--no-owner"], 0);
    assert_eq!(json(&res)["setid_cleared"], 2);
    let mode = |dest: &std::path::Path, n: &str| std::fs::metadata(dest.join(n)).unwrap().permissions().mode() & 0o7777;
    assert_eq!((mode(&dest, "suid"), mode(&dest, "sgid"), mode(&dest, "plain")), (0o755, 0o750, 0o755));
    // The human summary says so; a rerun finds the copies complete.
    let res = ddftp(&["archive", "t", "--mirrors", &a.addr, "--dest", d, "--no-owner"], 0);
    let text = String::from_utf8_lossy(&res.stdout);
    assert!(text.contains("without their setuid/setgid bits"), "{text}");
    if is_root() {
        use std::os::unix::fs::MetadataExt;
        let kept = f.out("kept");
        let res = ddftp(&["archive", "t", "--mirrors", &a.addr, "--dest", kept.to_str().unwrap(), "--json"], 0);
        assert_eq!(json(&res)["setid_cleared"], 0);
        assert_eq!((mode(&kept, "suid"), mode(&kept, "sgid")), (0o4755, 0o2750));
        assert_eq!(std::fs::metadata(kept.join("suid")).unwrap().uid(), 1234);
    }
}

/// A raw connection that greets and sends `reqs`, then reads nothing.
fn raw(addr: &str, reqs: &[ddftp_proto::Request]) -> std::net::TcpStream {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    let mut out = bytes::BytesMut::new();
    ddftp_proto::Request::Hello { version: ddftp_proto::frame::PROTOCOL_VERSION }.encode(&mut out);
    for r in reqs {
        r.encode(&mut out);
    }
    s.write_all(&out).unwrap();
    s
}

/// Item 8: clients that start a stream and never read lose their slot
/// after --idle-timeout; over the cap a client is told the server is busy.
#[test]
fn item08_slow_readers_lose_their_slots_and_over_the_cap_is_busy() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 64 << 20, 8);
    let a = Mirror::start(&f.root(), &["--max-connections", "10", "--idle-timeout", "3"]);
    let start = ddftp_proto::Request::Start {
        stream: 0,
        path: "f".into(),
        block_size: 1 << 20,
        first: 0,
        last: 63,
        dir: ddftp_proto::Direction::Increment,
    };
    let t0 = Instant::now();
    let hogs: Vec<_> = (0..10).map(|_| raw(&a.addr, std::slice::from_ref(&start))).collect();
    std::thread::sleep(Duration::from_millis(300));
    let o = f.out("f");
    // Without retries the busy answer ends it at once (with them it waits: tests/e2e/retry.rs).
    let res = get_into(&a.addr, &o, &["--retries", "0"], 1);
    let err = stderr(&res);
    assert!(err.contains("busy") && !err.contains("timed out"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(3), "the busy answer took {:?}", t0.elapsed());
    // Once the hogs have been idle for 3 s they are gone.
    std::thread::sleep(Duration::from_secs(5).saturating_sub(t0.elapsed()));
    get_into(&a.addr, &o, &[], 0);
    assert!(std::fs::read(&o).unwrap() == data);
    drop(hogs);
}

/// Peak resident memory of a process, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

/// Item 9: bundle definitions uploaded by many connections at once share
/// one budget; the server's memory stays bounded.
#[test]
fn item09_bundle_uploads_share_a_bounded_budget() {
    use ddftp_proto::frame::MAX_BUNDLE_CHUNK;
    use rand::RngCore;
    use std::io::{Read, Write};
    let f = Fixture::new();
    let a = Mirror::start(&f.root(), &[]);
    let mut piece = vec![0u8; MAX_BUNDLE_CHUNK];
    rand::thread_rng().fill_bytes(&mut piece);
    let mut frame = bytes::BytesMut::new();
    ddftp_proto::Request::Bundle { data: piece.into() }.encode(&mut frame);
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (addr, frame) = (a.addr.clone(), frame.clone());
            std::thread::spawn(move || {
                let mut s = raw(&addr, &[]);
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                // 30 MiB each, unless the server says no first.
                for _ in 0..(30 << 20) / MAX_BUNDLE_CHUNK {
                    if s.write_all(&frame).is_err() {
                        break;
                    }
                }
                let mut reply = vec![];
                let _ = s.read_to_end(&mut reply);
                String::from_utf8_lossy(&reply).into_owned()
            })
        })
        .collect();
    let replies: Vec<String> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let busy = replies.iter().filter(|r| r.contains("(retry in 0.5 s)")).count();
    assert!(busy >= 6, "{busy} of 8 uploads were told the server is busy");
    let rss = peak_rss(a.child.id());
    assert!(rss < 120 << 20, "ddftpd peaked at {} MiB", rss >> 20);
    // And it still serves.
    random_file(&f.root().join("f"), 1 << 20, 9);
    get_into(&a.addr, &f.out("f"), &[], 0);
}

mod archive;
mod hostile_mirror;
mod outputs;
mod planted;
mod random_lies;
mod random_outputs;
mod recv;
mod secrets;
mod serving;
