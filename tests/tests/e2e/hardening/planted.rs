//! Item 2 of Hardening II: whoever can write the output directory plants
//! symlinks (and hard links) under the names ddftp writes beside OUT: the
//! part file, the journal's spare, `walk -o`'s temporary list. Run as
//! root, ddftp must never write through them: the victim stays, OUT is a
//! regular file with the source's bytes.

use super::*;

/// A victim file of `size` bytes; its digest, to compare after.
fn victim(f: &Fixture, size: usize) -> (std::path::PathBuf, String) {
    let v = f.out("victim");
    let data = random_file(&v, size, 99);
    (v, sha256_hex(&data))
}

fn digest(p: &Path) -> String {
    sha256_hex(&std::fs::read(p).unwrap())
}

#[test]
fn get_replaces_planted_part_and_journal_names_and_never_writes_through_them() {
    let f = Fixture::new();
    let data = random_file(&f.root().join("f"), 3 << 20, 21);
    let a = Mirror::start(&f.root(), &[]);
    let (v, was) = victim(&f, 1000);
    let out = f.out("out");
    std::os::unix::fs::symlink(&v, f.out("out.ddftp-part")).unwrap();
    std::os::unix::fs::symlink(&v, f.out("out.ddftp-journal-tmp")).unwrap();
    get_into(&a.addr, &out, &[], 0);
    assert_eq!(digest(&v), was, "the victim was written");
    assert!(std::fs::symlink_metadata(&out).unwrap().is_file(), "OUT is a regular file");
    assert!(std::fs::read(&out).unwrap() == data, "OUT is the source");
}

#[test]
fn a_resume_whose_part_file_became_a_symlink_or_hard_link_stops_and_names_it() {
    let f = Fixture::new();
    random_file(&f.root().join("f"), 8 << 20, 22);
    let a = Mirror::with_rate(&f.root(), "2MB");
    let out = f.out("out");
    let mut first = Command::new(bin("ddftp"))
        .args(["get", "f", "--mirrors", &a.addr, "-o", out.to_str().unwrap(), "-q"])
        .spawn()
        .unwrap();
    let journal = f.out("out.ddftp-journal");
    let t = Instant::now();
    while !journal.exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    first.kill().unwrap();
    first.wait().unwrap();
    // The part's own size: a check of the size alone would take it.
    let (v, was) = victim(&f, 8 << 20);
    let part = f.out("out.ddftp-part");
    for plant in ["symlink", "hard link"] {
        std::fs::remove_file(&part).unwrap();
        match plant {
            "symlink" => std::os::unix::fs::symlink(&v, &part).unwrap(),
            _ => std::fs::hard_link(&v, &part).unwrap(),
        }
        let o = Command::new(bin("ddftp"))
            .args(["get", "f", "--mirrors", &a.addr, "-o", out.to_str().unwrap(), "-q"])
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(![0, 101].contains(&o.status.code().unwrap()), "{plant}: {err}");
        assert!(err.contains("out.ddftp-part"), "{plant}: {err}");
        assert_eq!(digest(&v), was, "{plant}: the victim was written");
        assert!(!out.exists());
    }
}

#[test]
fn walk_output_lands_beside_a_planted_temp_name_without_writing_through_it() {
    let f = Fixture::new();
    std::fs::write(f.root().join("x"), b"x").unwrap();
    let (v, was) = victim(&f, 1000);
    let list = f.out("list");
    std::os::unix::fs::symlink(&v, f.out(".list.ddftp-tmp")).unwrap();
    ddftp(&["walk", f.root().to_str().unwrap(), "-o", list.to_str().unwrap()], 0);
    assert_eq!(digest(&v), was, "the victim was written");
    assert!(std::fs::read(&list).unwrap().starts_with(b"#ddftp-list"));
}
