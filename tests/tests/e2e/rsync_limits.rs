//! rsync's options that leave entries alone by what they are, not by
//! name: `--max-size`, `--min-size` and `-x` (a mount point inside SRC).
//! Real rsync and ddftp on the same tree; trees, exit codes and `-i`
//! lines compared.

use std::path::Path;
use std::process::Command;

use crate::rsync_language::{old_times, same_tree};
use crate::rsync_parts::{ours, rsync, tree};
use crate::util::*;

/// `--max-size`, `--min-size`: a file of another size is not moved, and
/// what DEST has under its name stays (`--delete` too), as rsync's; the
/// sizes read as rsync reads them (`4.9k+1`). A bad size is refused
/// before anything moves.
#[test]
fn max_and_min_size_leave_files_of_other_sizes_as_rsync() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    random_file(&src.join("d/sub/big"), 9000, 20);
    let m = Mirror::start(&f.root(), &[]);
    let (theirs, mine) = (f.out("sz-rsync"), f.out("sz-ddftp"));
    // top: 70 bytes, d/sub/run.sh 300, d/f 5000, d/sub/big 9000.
    for opts in [&["-a", "--max-size=4.9k+1"][..], &["-a", "--min-size", "300", "--max-size=5000"]] {
        let (r, o) = (rsync(&src, &theirs, opts), ours(&m, &mine, opts));
        assert_eq!(r.0, 0, "{r:?}");
        assert_eq!(o, r, "{opts:?}: exit and -i lines");
        same_tree(&theirs, &mine);
    }
    assert!(!mine.join("d/sub/big").exists() && mine.join("top").exists(), "big left out, top in from the first run");
    // What DEST holds of another size stays, with --delete.
    for d in [&theirs, &mine] {
        std::fs::write(d.join("d/sub/big"), b"DEST's own").unwrap();
        // One time in both: two writes a second boundary apart differ.
        old_times(d, &["d/sub/big"]);
    }
    let opts = ["-a", "--delete", "--max-size=1k"];
    let (r, o) = (rsync(&src, &theirs, &opts), ours(&m, &mine, &opts));
    assert_eq!(o, r, "exit and -i lines");
    same_tree(&theirs, &mine);
    assert_eq!(std::fs::read(mine.join("d/sub/big")).unwrap(), b"DEST's own");
    let (code, _) = ours(&m, &f.out("bad"), &["-a", "--max-size=1x"]);
    assert_eq!(code, 2, "a size ddftp cannot read is a usage error");
    assert!(!f.out("bad").exists(), "nothing made");
}

/// A tmpfs mounted inside SRC for as long as it lives (the tests run as
/// root, as CI does).
struct Mounted(std::path::PathBuf);

impl Mounted {
    fn tmpfs(at: &Path) -> Mounted {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount").args(["-t", "tmpfs", "none"]).arg(at).status().expect("mount");
        assert!(ok.success(), "mounting a tmpfs at {} (the tests run as root)", at.display());
        Mounted(at.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// `-x`: a directory on another file system inside SRC (a mount point)
/// is made, empty, and not entered, as rsync's; `-xx` leaves it out;
/// without either it is copied whole.
#[test]
fn one_file_system_makes_a_mount_point_empty_as_rsync() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let mnt = Mounted::tmpfs(&src.join("d/mnt"));
    random_file(&mnt.0.join("inside"), 1000, 21);
    std::fs::create_dir(mnt.0.join("deeper")).unwrap();
    touch(&mnt.0, "@1600000000");
    let m = Mirror::start(&f.root(), &[]);
    let (theirs, mine) = (f.out("x-rsync"), f.out("x-ddftp"));
    let (r, o) = (rsync(&src, &theirs, &["-ax"]), ours(&m, &mine, &["-ax"]));
    assert_eq!(r.0, 0, "{r:?}");
    assert_eq!(o, r, "exit and -i lines");
    same_tree(&theirs, &mine);
    assert!(mine.join("d/mnt").is_dir() && !mine.join("d/mnt/inside").exists(), "made, not entered");
    let (whole, _) = ours(&m, &f.out("whole"), &["-a"]);
    assert_eq!(whole, 0);
    assert!(f.out("whole").join("d/mnt/inside").exists(), "without -x the mount is copied");
    let (theirs, mine) = (f.out("xx-rsync"), f.out("xx-ddftp"));
    let (r, o) = (rsync(&src, &theirs, &["-axx"]), ours(&m, &mine, &["-axx"]));
    assert_eq!(r.0, 0, "{r:?}");
    assert_eq!(o, r, "-xx: exit and -i lines");
    same_tree(&theirs, &mine);
    assert!(!mine.join("d/mnt").exists() && mine.join("d").is_dir(), "-xx: the mount point left out");
}

/// Sets `p`'s mtime (not following a symlink) to `when` (`touch -d`).
fn touch(p: &Path, when: &str) {
    let ok = Command::new("touch").args(["-h", "-d", when]).arg(p).status().unwrap();
    assert!(ok.success());
}

/// `--modify-window`: mtimes in DEST up to N seconds from the listed ones
/// are the same (a FAT disk keeps them to 2 s), further ones not; `-1`
/// compares nanoseconds; `-u` judges "newer" beyond the window too; all
/// as rsync's (lines, trees, exit codes).
#[test]
fn modify_window_takes_close_mtimes_as_the_same_as_rsync() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    let (theirs, mine) = (f.out("mw-rsync"), f.out("mw-ddftp"));
    assert_eq!(rsync(&src, &theirs, &["-a"]).0, 0);
    assert_eq!(ours(&m, &mine, &["-a"]).0, 0);
    // The tree's times are @1600000000: one a second off, one three.
    for d in [&theirs, &mine] {
        touch(&d.join("top"), "@1600000001");
        touch(&d.join("d/f"), "@1600000003");
        touch(&d.join("d/sub/run.sh"), "@1600000000.5");
    }
    for opts in [&["-a", "--modify-window=1"][..], &["-au", "--modify-window", "2"], &["-a", "--modify-window=-1"]] {
        let (r, o) = (rsync(&src, &theirs, opts), ours(&m, &mine, opts));
        assert_eq!(r.0, 0, "{r:?}");
        assert_eq!(o, r, "{opts:?}: exit and -i lines");
        same_tree(&theirs, &mine);
    }
}
