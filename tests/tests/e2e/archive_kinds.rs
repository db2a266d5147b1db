//! `ddftp archive` keeps every kind of entry: an awkward tree (odd names,
//! a path past `PATH_MAX`, a 0555 directory with entries, hard links, a
//! sparse file, FIFO, socket, device nodes, owners, setuid, xattrs and
//! ACLs) is copied, checked with an `openat`-walking checker
//! ([`crate::util::tree`]) and with `rsync -aHAXSc --numeric-ids`, then
//! mutated and resynced (`--dry-run` lists exactly the changes, `--delete`
//! makes DEST equal again). As root, and as an unprivileged user
//! (`setpriv`), who gets what a user can have and is told the rest.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::util::tree::{assert_equal, scan, Look};
use crate::util::*;

fn touch(p: &Path, when: &str) {
    assert!(Command::new("touch").arg("-h").arg("-d").arg(when).arg(p).status().unwrap().success());
}

fn c(b: &[u8]) -> CString {
    CString::new(b).unwrap()
}

fn set_xattr(p: &Path, k: &str, v: &[u8]) -> bool {
    let (p, k) = (c(p.as_os_str().as_encoded_bytes()), c(k.as_bytes()));
    // SAFETY: C strings and a buffer of v.len() bytes.
    unsafe { libc::lsetxattr(p.as_ptr(), k.as_ptr(), v.as_ptr().cast(), v.len(), 0) == 0 }
}

/// A directory chain deeper than `PATH_MAX` (made with `mkdirat` from each
/// level's descriptor) with a file at the bottom; returns nothing: the
/// checker finds it.
fn deep_chain(top: &Path) {
    std::fs::create_dir(top).unwrap();
    let mut dir = OwnedFd::from(std::fs::File::open(top).unwrap());
    let name = "d".repeat(200);
    for _ in 0..24 {
        let n = c(name.as_bytes());
        // SAFETY: a valid descriptor and C string.
        assert_eq!(unsafe { libc::mkdirat(dir.as_raw_fd(), n.as_ptr(), 0o755) }, 0);
        let fd = unsafe { libc::openat(dir.as_raw_fd(), n.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
        assert!(fd >= 0);
        // SAFETY: just opened.
        dir = unsafe { OwnedFd::from_raw_fd(fd) };
    }
    let f = c(b"bottom");
    let fd = unsafe { libc::openat(dir.as_raw_fd(), f.as_ptr(), libc::O_WRONLY | libc::O_CREAT, 0o640) };
    assert!(fd >= 0);
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    std::io::Write::write_all(&mut file, b"at the bottom of a 4,800-byte path").unwrap();
}

/// The awkward tree. `root`: with device nodes and other owners.
pub(crate) fn awkward(src: &Path, root: bool) {
    let p = |s: &str| src.join(s);
    std::fs::create_dir_all(p("plain/sub")).unwrap();
    random_file(&p("plain/big"), 3 << 20, 1);
    std::fs::write(p("plain/empty"), b"").unwrap();
    for (i, name) in
        [&b"new\nline"[..], b"\xff\xfe-bytes", b"-leading-dash", b"with space", &[b'n'; 255][..]].iter().enumerate()
    {
        let path = src.join("names").join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(name));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        random_file(&path, 100 + i, 10 + i as u64);
    }
    deep_chain(&p("long"));
    // A read-only directory with entries.
    std::fs::create_dir(p("ro")).unwrap();
    random_file(&p("ro/inside"), 500, 3);
    std::fs::set_permissions(p("ro/inside"), std::fs::Permissions::from_mode(0o444)).unwrap();
    // Hard links across directories.
    random_file(&p("plain/linked"), 4000, 4);
    std::fs::hard_link(p("plain/linked"), p("plain/sub/linked-too")).unwrap();
    std::fs::hard_link(p("plain/linked"), p("zz-linked")).unwrap();
    // Sparse: 16 MiB with data at 1 MiB and at the end.
    let f = std::fs::File::create(p("sparse")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, &[7u8; 5000], 1 << 20).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&f, b"end", (16 << 20) - 3).unwrap();
    drop(f);
    std::os::unix::fs::symlink("plain/big", p("link")).unwrap();
    std::os::unix::fs::symlink("/nowhere/at/all", p("dangling")).unwrap();
    assert!(Command::new("mkfifo").arg(p("fifo")).status().unwrap().success());
    let _sock = std::os::unix::net::UnixListener::bind(p("sock")).unwrap();
    random_file(&p("plain/setuid"), 100, 5);
    std::fs::set_permissions(p("plain/setuid"), std::fs::Permissions::from_mode(0o4755)).unwrap();
    assert!(set_xattr(&p("plain/big"), "user.origin", b"site-a\0\xff"));
    assert!(set_xattr(&p("plain"), "user.dir", b"yes"));
    // ACLs (setfacl: the acl package, which CI installs).
    for (args, at) in [(&["-m", "u:4242:rwx"][..], "plain/sub"), (&["-d", "-m", "g:4243:rx"], "plain")] {
        let s = Command::new("setfacl").args(args).arg(p(at)).status().expect("setfacl (CI installs acl)");
        assert!(s.success(), "setfacl {args:?} {at}");
    }
    if root {
        for (name, kind, dev) in
            [("blk", libc::S_IFBLK, libc::makedev(7, 99)), ("chr", libc::S_IFCHR, libc::makedev(1, 3))]
        {
            let path = c(p(name).as_os_str().as_encoded_bytes());
            // SAFETY: a C string.
            assert_eq!(unsafe { libc::mknod(path.as_ptr(), kind | 0o640, dev) }, 0);
        }
        for (path, id) in [("plain/big", 1234), ("plain/sub", 2345), ("plain/setuid", 3456), ("link", 4567)] {
            let cp = c(p(path).as_os_str().as_encoded_bytes());
            // SAFETY: a C string.
            assert_eq!(unsafe { libc::lchown(cp.as_ptr(), id, id + 1) }, 0);
        }
        // chown cleared the bit: set it again.
        std::fs::set_permissions(p("plain/setuid"), std::fs::Permissions::from_mode(0o4755)).unwrap();
    }
    for d in ["ro", "plain/sub", "plain", "names", ""] {
        touch(&p(d), "2022-02-02 02:02:02");
    }
    std::fs::set_permissions(p("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
}

/// What `rsync -aHAXSc --numeric-ids -n -i --delete` says is left to do
/// (the path past `PATH_MAX` left out: rsync cannot express it), if rsync
/// is installed.
pub(crate) fn rsync_left(src: &Path, dst: &Path) -> Vec<String> {
    let o = Command::new("rsync")
        .args(["-aHAXSc", "--numeric-ids", "-n", "-i", "--delete", "--exclude", "/long"])
        .arg(format!("{}/", src.display()))
        .arg(format!("{}/", dst.display()))
        .output()
        .expect("rsync (CI installs it)");
    assert!(o.status.success(), "rsync: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect()
}

fn archive(m: &Mirror, dst: &Path, extra: &[&str], expect: i32) -> serde_json::Value {
    let mut args = vec!["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-X", "-H", "--json", "-q"];
    args.extend(extra);
    json(&ddftp(&args, expect))
}

#[test]
fn every_kind_of_entry_is_kept_and_a_resync_makes_dest_equal_again() {
    let root = is_root();
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    awkward(&src, root);
    let m = Mirror::start(&f.root(), &[]);
    let dst = f.out("dst");
    let look = Look { owners: root, setid: root, devices: root };

    let r = archive(&m, &dst, &[], 0);
    assert_eq!(r["hard_links"].as_u64(), Some(2), "{r}");
    assert_equal(&scan(&src, look), &scan(&dst, look));
    let left = rsync_left(&src, &dst);
    assert!(left.is_empty(), "rsync -aHAXSc finds differences: {left:#?}");
    // The holes did not move: the bytes moved are the data's.
    assert!(r["bytes"].as_u64().unwrap() < (3 << 20) + (1 << 20), "{r}");

    // Mutate SRC: add, delete, rename, chmod, touch, a file replaced by a
    // directory, a new entry in the 0555 directory, a hard link broken.
    std::fs::set_permissions(src.join("ro"), std::fs::Permissions::from_mode(0o755)).unwrap();
    random_file(&src.join("ro/added"), 300, 20);
    random_file(&src.join("plain/added"), 300, 21);
    std::fs::remove_file(src.join("plain/empty")).unwrap();
    std::fs::rename(src.join("names/with space"), src.join("names/renamed")).unwrap();
    std::fs::set_permissions(src.join("plain/linked"), std::fs::Permissions::from_mode(0o600)).unwrap();
    touch(&src.join("plain/big"), "2019-09-09 09:09:09");
    std::fs::remove_file(src.join("zz-linked")).unwrap();
    std::fs::create_dir(src.join("zz-linked")).unwrap();
    random_file(&src.join("zz-linked/now-a-dir"), 10, 22);
    for d in ["ro", "plain", "names", "zz-linked", ""] {
        touch(&src.join(d), "2023-03-03 03:03:03");
    }
    std::fs::set_permissions(src.join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();

    let o = ddftp(&["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-X", "-H", "-n", "--delete"], 0);
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: BTreeSet<&str> = out.lines().filter(|l| !l.starts_with("dry run")).collect();
    let expected: BTreeSet<&str> = [
        ".d..t...... ./",
        ".d..t...... names/",
        ">f+++++++++ names/renamed",
        "*deleting   names/with space",
        ".d..t...... plain/",
        ">f+++++++++ plain/added",
        ">f..t...... plain/big",
        "*deleting   plain/empty",
        ".f...p..... plain/linked",
        ".d..t...... ro/",
        ">f+++++++++ ro/added",
        "cd+++++++++ zz-linked/",
        ">f+++++++++ zz-linked/now-a-dir",
    ]
    .into();
    assert_eq!(lines, expected, "{out}");

    let r = archive(&m, &dst, &["--delete"], 0);
    assert_eq!(r["deleted"].as_u64(), Some(2), "{r}");
    assert_equal(&scan(&src, look), &scan(&dst, look));
    let left = rsync_left(&src, &dst);
    assert!(left.is_empty(), "rsync -aHAXSc finds differences after the resync: {left:#?}");
    let o = ddftp(&["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-X", "-H", "-n", "--delete"], 0);
    let out = String::from_utf8(o.stdout).unwrap();
    assert_eq!(out.lines().count(), 1, "nothing left to do: {out}");
}

#[test]
fn an_unprivileged_user_gets_what_a_user_can_and_is_told_the_rest() {
    need(is_root(), "root: setpriv needs root to become another user");
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    awkward(&src, true);
    let m = Mirror::start(&f.root(), &[]);
    // nobody must reach DEST: the fixture's temp dir is root's alone.
    std::fs::set_permissions(f.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dst = f.out("dst");
    std::fs::create_dir(&dst).unwrap();
    assert!(Command::new("chown").arg("nobody:nogroup").arg(&dst).status().unwrap().success());
    let nobody = || {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"]).arg(bin("ddftp"));
        c.args(["archive", "src", "-d", dst.to_str().unwrap(), "-m", &m.addr, "-X", "-H"]);
        c
    };
    let as_nobody = |extra: &[&str]| {
        let o = nobody().args(["--json", "-q"]).args(extra).output().unwrap();
        assert_eq!(o.status.code(), Some(5), "devices are not made: exit 5\n{}", String::from_utf8_lossy(&o.stderr));
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        for d in ["blk", "chr"] {
            assert!(stderr.contains(&format!("not copied: src/{d}: a ")), "{d} named: {stderr}");
        }
        json(&o)
    };
    let r = as_nobody(&[]);
    assert_eq!(r["failed"].as_array().unwrap().len(), 2, "{r}");
    assert_eq!(r["setid_cleared"].as_u64(), Some(1), "{r}");
    let look = Look { owners: false, setid: false, devices: false };
    assert_equal(&scan(&src, look), &scan(&dst, look));

    // A new entry in the 0555 directory reaches the copy's 0555 directory;
    // a file gone from SRC goes. The dry run says so (the devices named,
    // exit 5, there too).
    std::fs::set_permissions(src.join("ro"), std::fs::Permissions::from_mode(0o755)).unwrap();
    random_file(&src.join("ro/added"), 300, 20);
    touch(&src.join("ro"), "2023-03-03 03:03:03");
    std::fs::set_permissions(src.join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
    std::fs::remove_file(src.join("plain/empty")).unwrap();
    touch(&src.join("plain"), "2022-02-02 02:02:02");
    let o = nobody().args(["-n", "--delete"]).output().unwrap();
    assert_eq!(o.status.code(), Some(5));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: BTreeSet<&str> = out.lines().filter(|l| !l.starts_with("dry run")).collect();
    assert_eq!(lines, [".d..t...... ro/", ">f+++++++++ ro/added", "*deleting   plain/empty"].into(), "{out}");
    as_nobody(&["--delete"]);
    assert_equal(&scan(&src, look), &scan(&dst, look));
}

/// `--checksum` finds a copy whose content changed under the same size
/// and mtime (the quick check cannot), and a file that shrank on the
/// mirror leaves no tail of its old bytes in the copy.
#[test]
fn checksum_finds_changed_content_and_a_shrunk_file_keeps_no_old_tail() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    random_file(&src.join("same-size"), 3000, 30);
    random_file(&src.join("big"), 1 << 20, 31);
    random_file(&src.join("shrinks"), 5000, 32);
    let m = Mirror::start(&f.root(), &[]);
    let dst = f.out("dst");
    let d = dst.to_str().unwrap();
    ddftp(&["archive", "src", "-d", d, "-m", &m.addr, "-q"], 0);
    // Bit rot in the copy: same size, same mtime.
    for name in ["same-size", "big"] {
        let p = dst.join(name);
        let when = std::fs::metadata(&p).unwrap().modified().unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&file, b"ROT", 1000).unwrap();
        file.set_modified(when).unwrap();
    }
    let dry = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["archive", "src", "-d", d, "-m", &m.addr, "-n"];
        args.extend(extra);
        let out = String::from_utf8(ddftp(&args, 0).stdout).unwrap();
        out.lines().filter(|l| !l.starts_with("dry run")).map(String::from).collect()
    };
    assert!(dry(&[]).is_empty(), "the quick check sees nothing");
    assert_eq!(dry(&["--checksum"]), vec![">fc........ big", ">fc........ same-size"]);
    ddftp(&["archive", "src", "-d", d, "-m", &m.addr, "-q", "--checksum"], 0);
    let look = Look { owners: is_root(), setid: true, devices: true };
    assert_equal(&scan(&src, look), &scan(&dst, look));
    assert!(dry(&["--checksum"]).is_empty());

    random_file(&src.join("shrinks"), 700, 33);
    ddftp(&["archive", "src", "-d", d, "-m", &m.addr, "-q"], 0);
    assert_eq!(std::fs::read(dst.join("shrinks")).unwrap(), std::fs::read(src.join("shrinks")).unwrap());
    assert_equal(&scan(&src, look), &scan(&dst, look));
}

/// A file rewritten on the mirror while the archive reads it is never
/// written half old, half new: it is named (exit 5), everything else is
/// copied, and a rerun copies the new version.
#[test]
fn a_file_changing_on_the_mirror_while_read_is_reported_and_the_rest_copied() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    random_file(&src.join("changing"), 48 << 20, 40);
    random_file(&src.join("steady"), 1000, 41);
    // 16 MB/s: the big file takes three seconds to read.
    let m = Mirror::with_rate(&f.root(), "16MB");
    let dst = f.out("dst");
    let d = dst.to_str().unwrap();
    let run = Command::new(bin("ddftp"))
        .args(["archive", "src", "-d", d, "-m", &m.addr, "-q", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let file = std::fs::OpenOptions::new().write(true).open(src.join("changing")).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&file, b"NEW BYTES", 40 << 20).unwrap();
    drop(file);
    let o = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(5), "{err}");
    assert!(err.contains("not copied: src/changing") && err.contains("changed on the mirror"), "{err}");
    assert!(!dst.join("changing").exists(), "nothing half old, half new under its name");
    assert_eq!(std::fs::read(dst.join("steady")).unwrap(), std::fs::read(src.join("steady")).unwrap());
    ddftp(&["archive", "src", "-d", d, "-m", &m.addr, "-q"], 0);
    assert_eq!(std::fs::read(dst.join("changing")).unwrap(), std::fs::read(src.join("changing")).unwrap());
}

/// `--by-name`: an owner listed by name takes the id that name has here
/// (a name unknown here keeps its number); without it, the number. The
/// list is a walk's with its owners rewritten as a mirror with another
/// passwd would list them (this machine has one passwd for both ends).
#[test]
fn owners_by_name_take_this_machine_s_ids_and_by_number_the_listed_ones() {
    use std::os::unix::fs::MetadataExt;
    need(is_root(), "root: only root sets owners");
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    random_file(&src.join("named"), 100, 50);
    random_file(&src.join("unknown-name"), 100, 51);
    let m = Mirror::start(&f.root(), &[]);
    let list = f.out("list");
    ddftp(&["walk", src.to_str().unwrap(), "-o", list.to_str().unwrap(), "-q"], 0);
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    let mut text = std::fs::read(&list).unwrap();
    for (name, attrs) in [
        ("named", format!("u=4242:4243,n={}:{}", hex("nobody"), hex("nogroup"))),
        ("unknown-name", format!("u=4244:4245,n={}:{}", hex("no-such-user-here"), hex("no-such-group-here"))),
    ] {
        let rec_end = format!(" {}/{name}\0", src.display());
        let at = text.windows(rec_end.len()).position(|w| w == rec_end.as_bytes()).unwrap();
        let start = text[..at].iter().rposition(|&b| b == b' ').unwrap() + 1;
        text.splice(start..at, attrs.bytes());
    }
    std::fs::write(&list, &text).unwrap();
    let owner = |dst: &Path, n: &str| {
        let m = std::fs::metadata(dst.join(n)).unwrap();
        (m.uid(), m.gid())
    };
    let nobody = |what: &str| {
        let o = Command::new("id").arg(what).arg("nobody").output().unwrap();
        String::from_utf8_lossy(&o.stdout).trim().parse::<u32>().unwrap()
    };
    let ngid = {
        let o = Command::new("getent").args(["group", "nogroup"]).output().unwrap();
        String::from_utf8_lossy(&o.stdout).split(':').nth(2).unwrap().parse::<u32>().unwrap()
    };
    let strip = f.root().display().to_string();
    for (flag, named, unknown) in
        [("--by-name", (nobody("-u"), ngid), (4244, 4245)), ("--numeric-ids", (4242, 4243), (4244, 4245))]
    {
        let dst = f.out(flag.trim_start_matches('-'));
        let (d, l) = (dst.to_str().unwrap(), list.to_str().unwrap());
        ddftp(&["archive", "src", "-d", d, "-m", &m.addr, "--list", l, "--strip", &strip, flag, "-q"], 0);
        assert_eq!((owner(&dst, "named"), owner(&dst, "unknown-name")), (named, unknown), "{flag}");
    }
}
