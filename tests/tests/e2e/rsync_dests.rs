//! rsync's `--link-dest`, `--compare-dest` and `--copy-dest`: a snapshot
//! made against an earlier one (relative to DEST, several tried in
//! order, one that does not exist said and skipped), into a new DEST and
//! into one that holds copies; real rsync and ddftp on the same trees:
//! the trees, which files are hard links of the basis's, exit codes and
//! `-i` lines (dry runs too).

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::rsync_language::same_tree;
use crate::rsync_links::ours;
use crate::rsync_parts::rsync;
use crate::util::*;

const OLD: i64 = 1_600_000_000;

fn touch(p: &Path, t: i64) {
    let ok = std::process::Command::new("touch").args(["-h", "-d", &format!("@{t}")]).arg(p).status();
    assert!(ok.unwrap().success());
}

/// SRC, and `prev` (an earlier copy: one file older, one of another
/// mode, one of other content, one missing, a directory missing) and
/// `older` (a second basis holding what `prev` lacks).
fn trees(root: &Path) {
    let src = root.join("src");
    for d in ["d", "e"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    for (i, f) in ["same", "newer", "perm", "sizes", "only", "d/same2", "e/z", "in-older"].iter().enumerate() {
        random_file(&src.join(f), 300 + i * 17, 40 + i as u64);
    }
    std::os::unix::fs::symlink("same", src.join("lnk")).unwrap();
    for fifo in ["fifo", "fifo2"] {
        let c = std::ffi::CString::new(src.join(fifo).as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
    }
    let ok = std::process::Command::new("rsync")
        .arg("-a")
        .arg(format!("{}/", src.display()))
        .arg(root.join("prev"))
        .status();
    assert!(ok.unwrap().success());
    let prev = root.join("prev");
    std::fs::write(prev.join("sizes"), b"another version").unwrap();
    std::fs::set_permissions(prev.join("perm"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    std::fs::remove_file(prev.join("only")).unwrap();
    // A special of another mode there: made here, itemized against it.
    std::fs::set_permissions(prev.join("fifo2"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    std::fs::remove_file(prev.join("in-older")).unwrap();
    std::fs::remove_dir_all(prev.join("e")).unwrap();
    std::fs::create_dir_all(root.join("older")).unwrap();
    std::fs::copy(src.join("in-older"), root.join("older/in-older")).unwrap();
    for p in ["src", "src/d", "src/e", "prev", "prev/d", "older"] {
        for e in std::fs::read_dir(root.join(p)).unwrap() {
            touch(&e.unwrap().path(), OLD);
        }
        touch(&root.join(p), OLD);
    }
    touch(&prev.join("newer"), OLD - 1000);
    touch(&prev, OLD + 5);
}

/// Which of `names` in `dest` are the very files `basis` has.
fn linked(dest: &Path, basis: &Path, names: &[&str]) -> Vec<bool> {
    let ino = |p: &Path| std::fs::symlink_metadata(p).map(|m| (m.dev(), m.ino())).ok();
    names.iter().map(|n| ino(&dest.join(n)).is_some() && ino(&dest.join(n)) == ino(&basis.join(n))).collect()
}

#[test]
fn link_compare_and_copy_dest_do_what_rsync_does() {
    let f = Fixture::new();
    trees(&f.root());
    let m = Mirror::start(&f.root(), &[]);
    let names = ["same", "d/same2", "lnk", "perm", "newer", "in-older", "fifo"];
    for flag in ["--link-dest", "--compare-dest", "--copy-dest"] {
        let (theirs, mine) = (f.out(&format!("{flag}-rsync")), f.out(&format!("{flag}-ddftp")));
        let older = f.root().join("older");
        let opts =
            [&["-a"][..], &[flag, "../root/prev", flag, "/does/not/exist", flag, older.to_str().unwrap()]].concat();
        // A dry run, then the run, then a run into the DEST it made.
        for (step, extra) in [("dry", &["-n"][..]), ("first", &[][..]), ("again", &[][..])] {
            let o = [&opts[..], extra].concat();
            let (r, mut d) = (rsync(&f.root().join("src"), &theirs, &o), ours(&m, &mine, &o));
            // The DEST's own name in `created directory`; the dry run's
            // summary is ddftp's own.
            d.1.retain(|l| !l.starts_with("dry run"));
            for l in d.1.iter_mut() {
                *l = l.replace(mine.to_str().unwrap(), theirs.to_str().unwrap());
            }
            assert_eq!((d.0, &d.1), (r.0, &r.1), "{flag} {step}: exit and -i lines; stderr: {}", d.2);
            if step != "again" {
                // What the bases held shows: the same files not moved, one
                // of another mode copied, the others against the basis.
                for l in ["cf...p..... perm", ">f..t...... newer", ">f+++++++++ only"] {
                    assert!(r.1.iter().any(|x| x == l), "{flag} {step}: {l} in {:?}", r.1);
                }
                assert!(!r.1.iter().any(|x| x.contains("same") || x.contains("in-older")), "{:?}", r.1);
            }
            if step != "dry" {
                assert!(d.2.contains(&format!("{flag} arg does not exist: /does/not/exist")), "{}", d.2);
                same_tree(&theirs, &mine);
                let basis =
                    |d: &Path| [linked(d, &f.root().join("prev"), &names), linked(d, &f.root().join("older"), &names)];
                assert_eq!(basis(&mine), basis(&theirs), "{flag} {step}: hard links of the bases'");
                let link = flag == "--link-dest";
                assert_eq!(basis(&mine)[0][..3], [link, link, link], "{flag}: same, d/same2, lnk");
                assert_eq!(basis(&mine)[1][5], link, "{flag}: in-older, from the second basis");
                assert_eq!(basis(&mine)[0][6], link, "{flag}: a FIFO, linked too");
            }
        }
    }
}

/// Into a DEST that holds copies: `--link-dest` puts the basis's same
/// file in each one's place, `--compare-dest` removes it, as rsync.
#[test]
fn a_dest_holding_copies_gets_the_basis_files_as_rsync_puts_them() {
    let f = Fixture::new();
    trees(&f.root());
    let m = Mirror::start(&f.root(), &[]);
    let names = ["same", "d/same2", "perm", "newer"];
    for flag in ["--link-dest", "--compare-dest"] {
        let (theirs, mine) = (f.out(&format!("{flag}-rsync")), f.out(&format!("{flag}-ddftp")));
        for d in [&theirs, &mine] {
            assert_eq!(rsync(&f.root().join("src"), d, &["-a"]).0, 0);
        }
        let opts = ["-a", flag, "../root/prev"];
        let (r, d) = (rsync(&f.root().join("src"), &theirs, &opts), ours(&m, &mine, &opts));
        assert_eq!((d.0, &d.1), (r.0, &r.1), "{flag}: exit and -i lines; stderr: {}", d.2);
        same_tree(&theirs, &mine);
        let prev = f.root().join("prev");
        assert_eq!(linked(&mine, &prev, &names), linked(&theirs, &prev, &names), "{flag}");
    }
}
