//! rsync's `-C` (`--cvs-exclude`): CVS's ignore list and each directory's
//! `.cvsignore` (words, a `!` clearing), after every other rule; with
//! `-F` beside it (two per-directory merge files); and a merge rule's `w`
//! (each word a rule). Real rsync and ddftp on the same tree: trees, exit
//! codes and `-i` lines compared, a rerun with `--delete` too.

use std::path::Path;

use crate::rsync_links::ours;
use crate::rsync_merge::as_rsync_then_with_delete;
use crate::util::*;

/// A source tree as a CVS or git checkout leaves it.
fn tree(src: &Path) {
    for d in ["CVS", ".git/objects", "lib", "lib/deep", "doc", "core.d"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    let files = [
        "main.c",
        "main.o",
        "core",
        "notes.txt~",
        "#autosave#",
        "CVS/Entries",
        ".git/objects/ab",
        "lib/util.c",
        "lib/util.o",
        "lib/gen.c",
        "lib/table.dat",
        "lib/deep/gen.c",
        "lib/deep/x.log",
        "doc/a.bak",
        "doc/keep.bak",
        "doc/x.log",
        "doc/y.tmp",
        "core.d/f",
    ];
    for (i, p) in files.iter().enumerate() {
        random_file(&src.join(p), 150 + i * 13, 900 + i as u64);
    }
    // Words on a line and across lines; `!` drops those before it.
    std::fs::write(src.join("lib/.cvsignore"), "gen.c  table.dat\n*.log\n").unwrap();
    std::fs::write(src.join("doc/.cvsignore"), "x.log ! y.tmp\n").unwrap();
    std::fs::write(src.join(".rsync-filter"), "+ keep.bak\n- *.dat\n").unwrap();
    std::fs::write(src.join("doc/.ignore"), "a.bak y.tmp\n").unwrap();
    let ok = std::process::Command::new("find")
        .arg(src)
        .args(["-exec", "touch", "-h", "-d", "@1600000000", "{}", "+"])
        .status();
    assert!(ok.unwrap().success());
}

#[test]
fn cvs_exclude_and_word_split_merges_leave_out_what_rsync_leaves_out() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    for (case, opts) in [
        ("C", &["-a", "-C"][..]),
        ("C-and-F", &["-a", "-C", "-F"][..]),
        ("C-then-include", &["-a", "-C", "--include", "core", "--include", "*.o"][..]),
        ("rules", &["-a", "-f", "- *.c", "-f", ":C", "-f", "-C"][..]),
        ("w", &["-a", "-f", ":-w .ignore"][..]),
    ] {
        as_rsync_then_with_delete(&f, &m, case, opts, &["stray", "stray.o", "lib/gen.c", "doc/y.tmp"]);
    }
}

/// A second dir-merge rule needs a mirror that lists several merge
/// files' rules (protocol 10): asked of one that does, it works (above);
/// a merge file of `-C`'s inside a `.rsync-filter` is named and its
/// directory left out, as any rule ddftp cannot take there.
#[test]
fn a_cvs_rule_inside_a_per_directory_file_leaves_its_directory_out_and_says_so() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    std::fs::write(src.join("lib/.rsync-filter"), "-C\n").unwrap();
    let m = Mirror::start(&f.root(), &[]);
    let mine = f.out("mine");
    let o = ours(&m, &mine, &["-a", "-F"]);
    assert_eq!(o.0, 5, "{o:?}");
    assert!(o.2.contains("not copying what lib/.rsync-filter's directory holds"), "{}", o.2);
    assert!(mine.join("main.c").exists() && !mine.join("lib/util.c").exists());
}
