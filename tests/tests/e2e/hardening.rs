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
    let Some(_disk) = SmallDisk::mount(&f.out("disk"), "8m") else {
        eprintln!("SKIP: cannot mount a tmpfs here");
        return;
    };
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
    let Some(_disk) = SmallDisk::mount(&f.out("disk"), "40m") else {
        eprintln!("SKIP: cannot mount a tmpfs here");
        return;
    };
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
    let res = ddftp(&["get", "nothere", "--mirrors", &a.addr, "-o", f.out("x").to_str().unwrap(), "--json"], 1);
    let j = json(&res);
    assert_eq!(j["exit_code"], 1);
    assert!(j["error"].as_str().unwrap().contains("nothere"), "{j}");
    assert_eq!(j["resume"], "nothing");

    // Every mirror's copy changed behind its index: every block fails
    // verification, and a rerun cannot help until the mirrors agree again.
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

/// Item 5: Owners are not kept, so setuid/setgid bits are not either.
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
    let res = ddftp(&["archive", "t", "--mirrors", &a.addr, "--dest", dest.to_str().unwrap(), "--json"], 0);
    assert_eq!(json(&res)["setid_cleared"], 2);
    let mode = |n: &str| std::fs::metadata(dest.join(n)).unwrap().permissions().mode() & 0o7777;
    assert_eq!((mode("suid"), mode("sgid"), mode("plain")), (0o755, 0o750, 0o755));
    // The human summary says so; a rerun finds the copies complete.
    let res = ddftp(&["archive", "t", "--mirrors", &a.addr, "--dest", dest.to_str().unwrap()], 0);
    let text = String::from_utf8_lossy(&res.stdout);
    assert!(text.contains("without their setuid/setgid bits"), "{text}");
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
    let res = get_into(&a.addr, &o, &[], 1);
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
    let busy = replies.iter().filter(|r| r.contains("try again shortly")).count();
    assert!(busy >= 6, "{busy} of 8 uploads were told the server is busy");
    let rss = peak_rss(a.child.id());
    assert!(rss < 120 << 20, "ddftpd peaked at {} MiB", rss >> 20);
    // And it still serves.
    random_file(&f.root().join("f"), 1 << 20, 9);
    get_into(&a.addr, &f.out("f"), &[], 0);
}

/// Regular files, symlinks and directories below `root`, by relative path:
/// (kind and content or target, mtime).
fn tree(root: &Path) -> std::collections::BTreeMap<String, (String, i64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![std::path::PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let full = root.join(&rel);
        let Ok(m) = full.symlink_metadata() else { continue };
        let what = if m.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&full) {
                stack.extend(rd.map(|e| rel.join(e.unwrap().file_name())));
            }
            "dir".to_string()
        } else if m.file_type().is_symlink() {
            format!("link {:?}", std::fs::read_link(&full).unwrap())
        } else {
            match std::fs::read(&full) {
                Ok(data) => format!("file {}", sha256_hex(&data)),
                Err(e) => format!("unreadable {e}"),
            }
        };
        out.insert(rel.display().to_string(), (what, if m.is_dir() { 0 } else { m.mtime() }));
    }
    out
}

/// A tree for the archive tests: small files in subdirectories, two large
/// ones, a symlink and an empty directory.
fn make_tree(t: &Path) {
    for d in ["a", "a/b", "empty"] {
        std::fs::create_dir_all(t.join(d)).unwrap();
    }
    for i in 0..200u64 {
        random_file(&t.join(["a", "a/b"][(i % 2) as usize]).join(format!("f{i}")), (i * 97 % 9000) as usize, i);
    }
    random_file(&t.join("big1"), 3 << 20, 1000);
    random_file(&t.join("a/big2"), 3 << 20, 1001);
    std::os::unix::fs::symlink("a/f0", t.join("link")).unwrap();
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `got` (a copy) holds exactly `want` (the source) less `missing` (paths
/// and everything below them), and no part files.
fn assert_copied_but(want: &Path, got: &Path, missing: &[&str]) {
    let mut w = tree(want);
    w.retain(|p, _| !missing.iter().any(|m| p == m || p.starts_with(&format!("{m}/"))));
    let g = tree(got);
    let parts: Vec<&String> = g.keys().filter(|p| p.contains("ddftp")).collect();
    assert!(parts.is_empty(), "left in DEST: {parts:?}");
    for (p, v) in &w {
        assert_eq!(g.get(p), Some(v), "{p}");
    }
    let extra: Vec<&String> = g.keys().filter(|p| !w.contains_key(*p)).collect();
    assert!(extra.is_empty(), "in DEST, not to be copied: {extra:?}");
}

/// Item 2: one file the mirror cannot read is skipped and named; every
/// other entry is copied; nothing wrong appears under a file's name; a
/// rerun says the same and moves nothing else.
#[test]
fn item02_an_unreadable_file_is_skipped_and_named_and_the_rest_copied() {
    let f = Fixture::new();
    chmod(f.dir.path(), 0o755);
    let t = f.root().join("t");
    make_tree(&t);
    random_file(&t.join("locked"), 5000, 2);
    random_file(&t.join("a/locked-big"), 2 << 20, 3);
    let a = Mirror::as_nobody(&f.root());
    chmod(&t.join("locked"), 0);
    chmod(&t.join("a/locked-big"), 0);
    let dest = f.out("dest");
    let args = ["archive", "t", "--mirrors", &a.addr, "--dest", dest.to_str().unwrap(), "--json"];
    let res = ddftp(&args, 5);
    let err = stderr(&res);
    assert!(err.contains("not copied: t/locked: ") && err.contains("not copied: t/a/locked-big: "), "{err}");
    let j = json(&res);
    assert_eq!(j["failed"].as_array().unwrap().len(), 2, "{j}");
    chmod(&t.join("locked"), 0o644);
    chmod(&t.join("a/locked-big"), 0o644);
    assert_copied_but(&t, &dest, &["locked", "a/locked-big"]);
    chmod(&t.join("locked"), 0);
    chmod(&t.join("a/locked-big"), 0);
    let j = json(&ddftp(&args, 5));
    assert_eq!(j["skipped_files"], j["files"].as_u64().unwrap() - 2, "{j}");
}

/// Item 2: an archive whose every mirror dies part way leaves no file
/// under its name that is not the source's, whole.
#[test]
fn item02_a_failed_archive_leaves_no_wrong_file_under_its_name() {
    let f = Fixture::new();
    let t = f.root().join("t");
    make_tree(&t);
    let mut a = Mirror::with_rate(&f.root(), "2MB");
    let dest = f.out("dest");
    let child = Command::new(bin("ddftp"))
        .args(["archive", "t", "--mirrors", &a.addr, "--dest", dest.to_str().unwrap(), "-q"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    a.kill();
    let res = child.wait_with_output().unwrap();
    assert_eq!(res.status.code(), Some(1), "{}", stderr(&res));
    let (want, got) = (tree(&t), tree(&dest));
    let mut files = 0;
    for (p, v) in &got {
        if v.0.starts_with("file") && !p.contains("ddftp") {
            files += 1;
            assert_eq!(Some(v), want.get(p), "{p} is under its name with other bytes");
        }
    }
    assert!(files < want.values().filter(|v| v.0.starts_with("file")).count(), "the archive was not cut short");
}

/// Item 3: a directory no mirror can read is named; the rest is copied.
#[test]
fn item03_an_unreadable_directory_is_named_and_the_rest_copied() {
    let f = Fixture::new();
    chmod(f.dir.path(), 0o755);
    let t = f.root().join("t");
    make_tree(&t);
    std::fs::create_dir(t.join("secret")).unwrap();
    random_file(&t.join("secret/x"), 100, 4);
    let (a, b) = (Mirror::as_nobody(&f.root()), Mirror::as_nobody(&f.root()));
    chmod(&t.join("secret"), 0);
    let dest = f.out("dest");
    let ms = mirrors_arg(&[&a, &b]);
    let res = ddftp(&["archive", "t", "--mirrors", &ms, "--dest", dest.to_str().unwrap(), "--json"], 5);
    let err = stderr(&res);
    assert!(err.contains("not copied: t/secret: "), "{err}");
    // The directory is listed (made, empty, with its mode); its entries are not.
    chmod(&t.join("secret"), 0o755);
    chmod(&dest.join("secret"), 0o755);
    assert_copied_but(&t, &dest, &["secret/x"]);
}

/// A TCP relay to `to` that cuts both ways `after` its connection came
/// (never, for `None`); its address.
fn cutting_relay(to: String, after: Option<Duration>) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (a, _) = l.accept().unwrap();
        let b = std::net::TcpStream::connect(&to).unwrap();
        let (mut a1, mut b1, mut a2, mut b2) =
            (a.try_clone().unwrap(), b.try_clone().unwrap(), a.try_clone().unwrap(), b.try_clone().unwrap());
        std::thread::spawn(move || std::io::copy(&mut b1, &mut a1));
        std::thread::spawn(move || std::io::copy(&mut a2, &mut b2));
        if let Some(after) = after {
            std::thread::sleep(after);
            let _ = a.shutdown(std::net::Shutdown::Both);
            let _ = b.shutdown(std::net::Shutdown::Both);
        }
    });
    addr
}

/// Item 13: a link lost under `send`/`recv` is told, and the summary
/// counts it; the data still arrives whole over the other.
#[test]
fn item13_a_link_lost_under_send_is_reported() {
    use std::io::{BufRead, BufReader};
    let f = Fixture::new();
    let data = random_file(&f.out("in"), 24 << 20, 13);
    let out = f.out("out");
    let mut recv = Command::new("sh")
        .arg("-c")
        .arg(format!("{} recv --listen 127.0.0.1:0,127.0.0.2:0 > {}", bin("ddftp").display(), out.display()))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(recv.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let links = line.trim().strip_prefix("ddftp: receiving on ").unwrap().to_string();
    let recv_said = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        rest
    });
    let (one, two) = links.split_once(',').unwrap();
    // Both links through relays, alike; the second is cut part way while
    // the input comes over about a second.
    let whole = cutting_relay(one.to_string(), None);
    let relay = cutting_relay(two.to_string(), Some(Duration::from_millis(300)));
    let mut child = Command::new(bin("ddftp"))
        .args(["send", "--links", &format!("{whole},{relay}")])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    for chunk in data.chunks(512 << 10) {
        std::io::Write::write_all(&mut input, chunk).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(input);
    let t = Instant::now();
    while child.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let send = child.wait_with_output().unwrap();
    let said = stderr(&send);
    let t = Instant::now();
    while recv.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("pkill").args(["-f", &format!("recv --listen {links}")]).status();
    let received = recv.wait().unwrap();
    let recv_said = recv_said.join().unwrap();
    assert!(send.status.success() && received.success(), "send: {said}\nrecv: {recv_said}");
    assert!(said.contains(&format!("link {relay} was lost")) && said.contains("(1 lost on the way)"), "{said}");
    assert!(std::fs::read(&out).unwrap() == data);
}

/// Item 13: a failed archive does not leave DEST behind; a fresh DEST is
/// never warned about a journal "for another download" (its own part's).
#[test]
fn item13_a_failed_archive_leaves_no_dest_and_a_fresh_one_no_journal_warning() {
    let f = Fixture::new();
    chmod(f.dir.path(), 0o755);
    let a = Mirror::start(&f.root(), &[]);
    let dest = f.out("dest");
    let res = ddftp(&["archive", "nothere", "--mirrors", &a.addr, "--dest", dest.to_str().unwrap(), "--json"], 1);
    assert!(!dest.exists(), "{}", stderr(&res));
    // With --json, one object on failure too.
    assert_eq!(json(&res)["exit_code"], 1);

    // A walk that breaks part way on the first mirror (it cannot read one
    // directory) while a large file's part already moves.
    let t = f.root().join("t");
    make_tree(&t);
    random_file(&t.join("aaa-large"), 24 << 20, 131);
    // Enough entries that the walk is still going when the large file's
    // part moves.
    for d in 0..100 {
        let dir = t.join(format!("many/{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for i in 0..200 {
            std::fs::write(dir.join(i.to_string()), b"").unwrap();
        }
    }
    std::fs::create_dir(t.join("zzz")).unwrap();
    random_file(&t.join("zzz/x"), 100, 132);
    chmod(&t.join("zzz"), 0o700);
    let (nobody, root) = (Mirror::as_nobody(&f.root()), Mirror::with_rate(&f.root(), "20MB"));
    if !is_root() {
        chmod(&t.join("zzz"), 0);
    }
    let ms = mirrors_arg(&[&nobody, &root]);
    let res = ddftp(&["archive", "t", "--mirrors", &ms, "--dest", dest.to_str().unwrap(), "--part-bytes", "1MiB"], 0);
    let err = stderr(&res);
    assert!(!err.contains("another download"), "{err}");
    chmod(&t.join("zzz"), 0o755);
    assert_copied_but(&t, &dest, &[]);
}

/// Item 4: a tree deeper than PATH_MAX is walked whole (by the walk and
/// by a mirror walking for a client) and archived whole.
#[test]
fn item04_a_tree_deeper_than_path_max_is_walked_and_archived_whole() {
    let f = Fixture::new();
    let name = "d".repeat(150);
    // 40 levels of 151 bytes: 6,040 bytes of path below the root, made
    // one relative step at a time.
    let made = Command::new("python3")
        .arg("-c")
        .arg(format!(
            "import os\nos.chdir({:?})\nos.mkdir('t')\nos.chdir('t')\nfor _ in range(40):\n    os.mkdir('{name}')\n    os.chdir('{name}')\nopen('leaf', 'w').write('leaf')",
            f.root().display().to_string()
        ))
        .status()
        .unwrap();
    assert!(made.success());
    let out = ddftp(&["walk", f.root().join("t").to_str().unwrap(), "-o", "-"], 0);
    let list = String::from_utf8_lossy(&out.stdout);
    let deepest = format!("{}/leaf", vec![name.as_str(); 40].join("/"));
    assert!(list.contains(&deepest), "the leaf is not listed: {}", stderr(&out));
    assert_eq!(list.matches('\0').count(), 1 + 1 + 40 + 1, "header, t, 40 directories and the leaf");
    // A mirror's walk for a client reaches it too, with nothing unread.
    let a = Mirror::start(&f.root(), &[]);
    let mut s = raw(&a.addr, &[ddftp_proto::Request::Walk { path: "t".into() }]);
    let mut buf = bytes::BytesMut::new();
    let (mut packed, mut hello) = (vec![], false);
    loop {
        match ddftp_proto::Reply::decode(&mut buf).unwrap() {
            Some(ddftp_proto::Reply::Hello { .. }) => hello = true,
            Some(ddftp_proto::Reply::ListData { data }) => packed.extend_from_slice(&data),
            Some(ddftp_proto::Reply::ListEnd { errors }) => {
                assert_eq!(errors, 0);
                break;
            }
            Some(other) => panic!("{other:?}"),
            None => {
                let mut chunk = [0u8; 65536];
                let n = std::io::Read::read(&mut s, &mut chunk).unwrap();
                assert!(n > 0, "closed");
                buf.extend_from_slice(&chunk[..n]);
            }
        }
    }
    assert!(hello);
    let list = ddftp_proto::packed::unpack(&packed, 1 << 20).unwrap();
    assert!(String::from_utf8_lossy(&list).contains(&deepest));
    // And an archive copies all of it, into a fresh DEST and again over it.
    let dest = f.out("dest");
    for _ in 0..2 {
        ddftp(&["archive", "t", "--mirrors", &a.addr, "--dest", dest.to_str().unwrap(), "-q"], 0);
        let check = Command::new("python3")
            .arg("-c")
            .arg(format!(
                "import os\nos.chdir({:?})\nfor _ in range(40):\n    os.chdir('{name}')\nassert open('leaf').read() == 'leaf'",
                dest.display().to_string()
            ))
            .status()
            .unwrap();
        assert!(check.success(), "the deepest file is not in DEST");
    }
}

/// Item 9: an archive whose mirror is busy taking in other definitions
/// asks again, and goes on once there is room.
#[test]
fn item09_an_archive_waits_out_a_mirror_busy_with_other_definitions() {
    use ddftp_proto::frame::MAX_BUNDLE_CHUNK;
    use std::io::Write;
    let f = Fixture::new();
    let t = f.root().join("t");
    make_tree(&t);
    let a = Mirror::start(&f.root(), &[]);
    // One connection holds the whole upload budget.
    let mut hog = raw(&a.addr, &[]);
    let mut frame = bytes::BytesMut::new();
    ddftp_proto::Request::Bundle { data: vec![7u8; MAX_BUNDLE_CHUNK].into() }.encode(&mut frame);
    for _ in 0..(32 << 20) / MAX_BUNDLE_CHUNK {
        hog.write_all(&frame).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let dest = f.out("dest");
    let child = Command::new(bin("ddftp"))
        .args(["archive", "t", "--mirrors", &a.addr, "--dest", dest.to_str().unwrap(), "-q"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    drop(hog);
    let res = child.wait_with_output().unwrap();
    assert!(res.status.success(), "{}", stderr(&res));
    assert_copied_but(&t, &dest, &[]);
}
