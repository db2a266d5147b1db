//! The hardening cases of `ddftp archive`: unreadable entries, walk
//! errors, deep paths, part files, a failed archive's DEST.

use super::*;

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
        .args(["archive", "t", "--mirrors", &a.addr, "--dest", dest.to_str().unwrap(), "-q", "--retries", "0"])
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
    let f = Fixture::new();
    let data = random_file(&f.out("in"), 24 << 20, 13);
    let out = f.out("out");
    let (mut recv, links, mut err) = receiving(Command::new("sh").arg("-c").arg(format!(
        "{} recv --listen 127.0.0.1:0,127.0.0.2:0 > {}",
        bin("ddftp").display(),
        out.display()
    )));
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
