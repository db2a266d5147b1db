//! Hardening III, items 5, 6, 7, 12, 13 and 18: what lands under DEST or
//! `-d` is what was asked for, under its own name, and nothing else.

use super::*;
use crate::util::fake_mirror::{FakeMirror, Script};
use crate::util::nginx::Nginx;

/// Item 5: two files of one command with one output name: the second is
/// refused before anything moves, naming the first; the first lands whole.
#[test]
fn item05_two_files_with_one_output_name_the_second_is_refused() {
    let f = Fixture::new();
    for d in ["d1", "d2"] {
        std::fs::create_dir(f.root().join(d)).unwrap();
    }
    let small = random_file(&f.root().join("d1/s.bin"), 10_000, 51);
    random_file(&f.root().join("d2/s.bin"), 16 << 20, 52);
    let a = Mirror::start(&f.root(), &[]);
    // Several PATHs into one -d.
    let d = f.out("paths");
    let o = ddftp(&["get", "d1/s.bin", "d2/s.bin", "-m", &a.addr, "-d", d.to_str().unwrap(), "-j", "2", "--json"], 5);
    let err = stderr(&o);
    assert!(err.contains("d2/s.bin") && err.contains("d1/s.bin") && err.contains("also"), "{err}");
    assert!(std::fs::read(d.join("s.bin")).unwrap() == small);
    let j = json(&o);
    assert_eq!((j["complete"].as_u64(), j["failed"].as_u64()), (Some(1), Some(1)), "{j}");
    // A list's two out= of one name.
    let list = f.out("list");
    std::fs::write(&list, "d1/s.bin\n  out=same.bin\nd2/s.bin\n  out=same.bin\n").unwrap();
    let d = f.out("list-out");
    let o = ddftp(&["get", "-i", list.to_str().unwrap(), "-m", &a.addr, "-d", d.to_str().unwrap(), "-j", "2"], 5);
    assert!(stderr(&o).contains("same.bin"), "{}", stderr(&o));
    assert!(std::fs::read(d.join("same.bin")).unwrap() == small);
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "no part file or journal left");
    // A Metalink of two <file>s of one name (each from its own URL).
    let web = Nginx::serve(&f.root(), None);
    let file = |name: &str, from: &str| {
        let data = std::fs::read(f.root().join(from)).unwrap();
        format!(
            "<file name=\"{name}\"><size>{}</size><hash type=\"sha-256\">{}</hash><url>{}{from}</url></file>",
            data.len(),
            sha256_hex(&data),
            web.url
        )
    };
    let m = f.out("two.meta4");
    let write = |files: [String; 2]| {
        let head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">";
        std::fs::write(&m, format!("{head}{}</metalink>\n", files.concat())).unwrap();
    };
    write([file("s.bin", "d1/s.bin"), file("s.bin", "d2/s.bin")]);
    let d = f.out("meta");
    ddftp(&["get", "--metalink", m.to_str().unwrap(), "-d", d.to_str().unwrap(), "-j", "2", "-q"], 5);
    assert!(std::fs::read(d.join("s.bin")).unwrap() == small);
    // Names with directories land in them (as aria2c puts them): no clash.
    write([file("d1/s.bin", "d1/s.bin"), file("d2/s.bin", "d2/s.bin")]);
    let d = f.out("meta-dirs");
    ddftp(&["get", "--metalink", m.to_str().unwrap(), "-d", d.to_str().unwrap(), "-j", "2", "-q"], 0);
    assert!(std::fs::read(d.join("d1/s.bin")).unwrap() == small);
    assert_eq!(std::fs::metadata(d.join("d2/s.bin")).unwrap().len(), 16 << 20);
}

/// Found by `random_lies`: a Metalink of one file with `-d D` wrote the
/// file in the working directory, not in D (and a URL's name was not
/// decoded with -d as without).
#[test]
fn a_one_file_metalink_or_url_lands_in_dir() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("a b.bin"), 10_000, 53);
    let web = Nginx::serve(&f.root(), None);
    let m = f.out("one.meta4");
    let xml = format!(
        "<?xml version=\"1.0\"?><metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a b.bin\">\
         <hash type=\"sha-256\">{}</hash><url>{}a%20b.bin</url></file></metalink>",
        sha256_hex(&data),
        web.url
    );
    std::fs::write(&m, xml).unwrap();
    let work = f.out("work");
    std::fs::create_dir(&work).unwrap();
    for (args, d) in
        [(vec!["--metalink", m.to_str().unwrap()], "meta"), (vec![&*format!("{}a%20b.bin", web.url)], "url")]
    {
        let d = f.out(d);
        let mut a = vec!["get", "-d", d.to_str().unwrap(), "-q"];
        a.extend(args);
        let o = std::process::Command::new(bin("ddftp")).args(&a).current_dir(&work).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert!(std::fs::read(d.join("a b.bin")).unwrap() == data, "not in -d");
        assert_eq!(std::fs::read_dir(&work).unwrap().count(), 0, "written in the working directory");
    }
}

/// Item 6: an absolute `--backup-dir` inside DEST is kept from `--delete`
/// (as a relative one is), with what it holds.
#[test]
fn item06_an_absolute_backup_dir_inside_dest_survives_delete() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("keep"), b"v1").unwrap();
    std::fs::write(src.join("gone"), b"old").unwrap();
    let a = Mirror::start(&f.root(), &[]);
    let dest = f.out("dest");
    let d = dest.to_str().unwrap();
    ddftp(&["archive", "src", "-m", &a.addr, "--dest", d, "-q"], 0);
    std::fs::remove_file(src.join("gone")).unwrap();
    std::fs::write(src.join("keep"), b"v2-longer").unwrap();
    let bak = dest.join("bak");
    let b = bak.to_str().unwrap();
    ddftp(&["archive", "src", "-m", &a.addr, "--dest", d, "--delete", "--backup-dir", b, "-q"], 0);
    assert_eq!(std::fs::read(dest.join("keep")).unwrap(), b"v2-longer");
    assert!(!dest.join("gone").exists());
    assert_eq!(std::fs::read(bak.join("gone")).unwrap(), b"old", "the deleted file was backed up and kept");
    assert_eq!(std::fs::read(bak.join("keep")).unwrap(), b"v1", "the replaced file was backed up and kept");
    // A second run with --delete keeps the backups again.
    ddftp(&["archive", "src", "-m", &a.addr, "--dest", d, "--delete", "--backup-dir", b, "-q"], 0);
    assert_eq!(std::fs::read(bak.join("gone")).unwrap(), b"old");
}

/// Item 18, as issue 56 has it since: the directories `--backup-dir`
/// makes are made as rsync makes them (DIR as `mkdir -p` does, one below
/// it with the mode of DEST's it stands for: what was private stays so);
/// a SRC entry where the backup directory is fails naming why.
#[test]
fn item18_backup_dirs_are_made_as_rsync_makes_them_and_an_entry_in_their_way_is_named() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("x"), b"1").unwrap();
    let a = Mirror::start(&f.root(), &[]);
    let dest = f.out("dest");
    let d = dest.to_str().unwrap();
    ddftp(&["archive", "src", "-m", &a.addr, "--dest", d, "-q"], 0);
    std::fs::write(src.join("x"), b"22").unwrap();
    let bak = f.out("away/deep/bak");
    ddftp(&["archive", "src", "-m", &a.addr, "--dest", d, "--backup-dir", bak.to_str().unwrap(), "-q"], 0);
    for p in [f.out("away"), f.out("away/deep"), bak.clone()] {
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o777 & !umask(), "{}", p.display());
    }
    // SRC gains a file named as the (relative) backup directory.
    std::fs::write(src.join("bak"), b"in the way").unwrap();
    std::fs::write(src.join("x"), b"333").unwrap();
    let o = ddftp(&["archive", "src", "-m", &a.addr, "--dest", d, "--backup-dir", "bak"], 5);
    let err = stderr(&o);
    assert!(err.contains("bak") && err.contains("--backup-dir") && !err.contains("Invalid argument"), "{err}");
    assert_eq!(std::fs::read(dest.join("x")).unwrap(), b"333", "the others were copied");
}

/// Item 7: a file that is all hole is copied at its size (and a rerun
/// finds it complete).
#[test]
fn item07_a_file_all_hole_keeps_its_size() {
    let f = Fixture::new();
    let src = f.root().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::File::create(src.join("sparse")).unwrap().set_len(10 << 20).unwrap();
    let a = Mirror::start(&f.root(), &[]);
    let dest = f.out("dest");
    let d = dest.to_str().unwrap();
    ddftp(&["archive", "src", "-m", &a.addr, "--dest", d, "-q"], 0);
    assert_eq!(std::fs::metadata(dest.join("sparse")).unwrap().len(), 10 << 20);
    assert!(std::fs::read(dest.join("sparse")).unwrap().iter().all(|&b| b == 0));
    let j = json(&ddftp(&["archive", "src", "-m", &a.addr, "--dest", d, "--json"], 0));
    assert_eq!(j["skipped_files"], 1, "{j}");
}

const T: &str = "1700000000.000000000";

/// Item 12: a mirror that lists SRC as a file and entries below it: none
/// of them is written.
#[test]
fn item12_nothing_below_a_src_listed_as_a_file_is_written() {
    let f = Fixture::new();
    let r = |k: char, size: usize, mode: &str, p: &str| format!("{k} {size} {mode} {T} u=0:0 {p}").into_bytes();
    let records = [r('f', 6, "644", "src/f"), r('d', 4096, "777", "src/f/h"), r('f', 6, "644", "src/f/x")];
    let records: Vec<&[u8]> = records.iter().map(|v| &v[..]).collect();
    let m = FakeMirror::start(Script::new(&records, &[(b"src/f", b"ffffff"), (b"src/f/x", b"xxxxxx")]));
    let dest = f.out("D");
    let o = std::process::Command::new(bin("ddftp"))
        .args(["archive", "src/f", "--mirrors", &m.addr, "--dest", dest.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(2) | Some(5)), "{o:?}");
    let err = stderr(&o);
    assert!(err.contains("src/f/x") && err.contains("no directory"), "{err}");
    for p in ["h", "x", "f/h", "f/x"] {
        assert!(!dest.join(p).exists(), "{p} was written");
    }
}

/// Item 13: a mirror's words and a Metalink's names reach the terminal
/// escaped in multi-file mode too (stderr and the summary on stdout).
#[test]
fn item13_terminal_escapes_are_escaped_with_several_files() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("a\x1b[31mred.bin"), 5000, 131);
    let web = Nginx::serve(&f.root(), None);
    let m = f.out("esc.meta4");
    let xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\
         <file name=\"a&#27;[31mred.bin\"><size>{}</size><hash type=\"sha-256\">{}</hash><url>{}a%1B%5B31mred.bin</url></file>\
         <file name=\"nothere&#27;]0;TITLE&#7;.bin\"><size>5</size><url>{}nothere.bin</url></file></metalink>\n",
        data.len(),
        sha256_hex(&data),
        web.url,
        web.url
    );
    std::fs::write(&m, xml).unwrap();
    let d = f.out("d");
    let o = ddftp(&["get", "--metalink", m.to_str().unwrap(), "-d", d.to_str().unwrap(), "--retries", "0"], 5);
    let all = [o.stdout.clone(), o.stderr.clone()].concat();
    assert!(!all.contains(&0x1b) && !all.contains(&0x07), "{}", String::from_utf8_lossy(&all));
    assert!(String::from_utf8_lossy(&o.stdout).contains("\\#033"), "{}", String::from_utf8_lossy(&o.stdout));
}

/// Item 19: `ls --json` gives a name that is not UTF-8 as its bytes
/// (never mistaken for one holding a backslash); bidi controls and escape
/// sequences never reach the terminal raw.
#[test]
fn item19_ls_shows_hostile_names_exactly_in_json_and_escaped_on_a_terminal() {
    let r =
        |k: char, size: usize, mode: &str, p: &[u8]| [format!("{k} {size} {mode} {T} u=0:0 ").as_bytes(), p].concat();
    let records = [
        r('d', 4096, "755", b"src"),
        r('f', 6, "644", b"src/bad\xffutf8"),
        r('f', 6, "644", b"src/bad\\xffutf8"),
        r('f', 6, "644", "src/gpj\u{202e}.exe".as_bytes()),
        r('f', 6, "644", b"src/a\x1b[31mRED"),
    ];
    let records: Vec<&[u8]> = records.iter().map(|v| &v[..]).collect();
    let m = FakeMirror::start(Script::new(&records, &[]));
    let target = format!("{}:src", m.addr);
    let o = ddftp(&["ls", &target, "--json"], 0);
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let hex: Vec<&str> = lines.iter().filter_map(|v| v["path_hex"].as_str()).collect();
    assert_eq!(hex.len(), 1, "{lines:?}");
    assert!(hex[0].contains("626164ff75746638"), "{hex:?}");
    let plain = lines
        .iter()
        .find(|v| v["path"].as_str().is_some_and(|p| p.ends_with("bad\\xffutf8")) && v.get("path_hex").is_none());
    assert!(plain.is_some(), "the name holding a backslash is exact: {lines:?}");
    let o = ddftp(&["ls", &target], 0);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(!text.contains('\u{202e}') && !text.contains('\u{1b}'), "{text}");
    assert!(text.contains("\\u{202e}"), "{text}");
}

/// Item 21: a `-i` entry whose `checksum=` does not match says so, not
/// "--checksum" (a flag the user never gave).
#[test]
fn item21_a_list_s_checksum_mismatch_names_the_list() {
    let f = Fixture::new();
    random_file(&f.root().join("c.bin"), 50_000, 21);
    let a = Mirror::start(&f.root(), &[]);
    let list = f.out("list");
    std::fs::write(&list, format!("c.bin\n  checksum=sha-256={}\n", "ab".repeat(32))).unwrap();
    let d = f.out("d");
    let o = ddftp(&["get", "-i", list.to_str().unwrap(), "-m", &a.addr, "-d", d.to_str().unwrap()], 3);
    let err = stderr(&o);
    assert!(err.contains("the list's checksum=") && !err.contains("--checksum"), "{err}");
}

/// This process's umask, from /proc (not changed to read it).
fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Umask:")).expect("Umask in /proc/self/status");
    u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
}

/// A mirror that lists a symlink with one target and sends another (here
/// a safe one listed, an absolute one sent): the link is not made, and
/// the run says so; `--safe-links` judged the listed target, so what
/// lands must be that one.
#[test]
fn a_symlink_target_other_than_the_listed_one_is_not_made() {
    let f = Fixture::new();
    let r = |k: char, size: usize, mode: &str, attrs: &str, p: &str| {
        format!("{k} {size} {mode} {T} {attrs} {p}").into_bytes()
    };
    let records = [
        r('d', 4096, "755", "u=0:0", "src"),
        r('f', 6, "644", "u=0:0", "src/f"),
        // Listed: "f" (hex 66); sent: "/".
        r('l', 1, "777", "u=0:0,l=66", "src/link"),
    ];
    let records: Vec<&[u8]> = records.iter().map(|v| &v[..]).collect();
    let m = FakeMirror::start(Script::new(&records, &[(b"src/f", b"ffffff"), (b"src/link", b"/")]));
    for extra in [&[][..], &["--safe-links"][..]] {
        let dest = f.out(if extra.is_empty() { "plain" } else { "safe" });
        let o = std::process::Command::new(bin("ddftp"))
            .args(["archive", "src", "--mirrors", &m.addr, "--dest", dest.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(err.contains("link") && err.contains("not the one listed"), "{err}");
        // Said as a failed entry: a script sees the tree is not whole.
        assert_eq!(o.status.code(), Some(5), "{err}");
        assert!(std::fs::symlink_metadata(dest.join("link")).is_err(), "the link was made");
        assert_eq!(std::fs::read(dest.join("f")).unwrap(), b"ffffff");
    }
}
