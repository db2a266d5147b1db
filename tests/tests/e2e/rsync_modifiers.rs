//! rsync's filter rules beyond `-` and `+`: `H`/`S` (what is copied),
//! `P`/`R` (what `--delete` leaves), the modifiers `!`, `s`, `r`, `p`,
//! long names, `--delete-excluded`, a merge's `-`, `n` and `e` (a
//! `.gitignore` read as rsync's `:- .gitignore`), a pattern without a
//! wildcard taken as it is. Real rsync and ddftp on the same tree and the
//! same DEST; their trees, exit codes and `-i` lines compared. A modifier
//! ddftp does not take is refused before anything moves, named.

use std::path::Path;

use crate::rsync_language::{old_times, same_tree};
use crate::rsync_links::ours;
use crate::rsync_parts::rsync;
use crate::util::*;

fn tree(src: &Path) {
    for d in ["sub/deep", "other"] {
        std::fs::create_dir_all(src.join(d)).unwrap();
    }
    let files = [
        "a.txt",
        "x.o",
        "keep.log",
        "debug.log",
        "hidden.key",
        "lit\\b",
        "sub/y.o",
        "sub/z.txt",
        "sub/deep/w.txt",
        "sub/deep/v.o",
        "other/v1",
        "other/u",
    ];
    for (i, p) in files.iter().enumerate() {
        random_file(&src.join(p), 150 + i * 13, 900 + i as u64);
    }
    std::fs::write(src.join("sub/.gitignore"), "# git's\n*.txt\n!\n").unwrap();
    std::fs::write(src.join(".gitignore"), "*.o\n").unwrap();
    std::fs::write(src.join("other/.rules"), "+ .rules\n- v*\n").unwrap();
    let ok = std::process::Command::new("find")
        .arg(src)
        .args(["-exec", "touch", "-h", "-d", "@1600000000", "{}", "+"])
        .status();
    assert!(ok.unwrap().success());
}

/// DEST as an earlier copy left it, with what SRC does not have: a file
/// a `P` rule protects, one an `H` rule hides, objects in a directory SRC
/// no longer has.
fn earlier(dest: &Path) {
    std::fs::create_dir_all(dest.join("gone")).unwrap();
    std::fs::create_dir_all(dest.join("sub")).unwrap();
    let extra = ["stray", "prot.keep", "other.keep", "hidden.key", "sub/old.o", "gone/c.o", "gone/d", "x.o"];
    for e in extra {
        std::fs::write(dest.join(e), b"earlier").unwrap();
    }
    old_times(dest, &extra);
}

#[test]
fn rule_kinds_and_modifiers_copy_and_delete_what_rsync_does() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    let patterns = f.out("patterns");
    std::fs::write(&patterns, "# each line a pattern\n*.log\n!\n").unwrap();
    let merge = format!("merge,- {}", patterns.display());
    for (case, opts) in [
        ("protect-hide", &["-f", "P *.keep", "-f", "H *.key", "-f", "- *.o"][..]),
        ("risk-first", &["-f", "R prot.keep", "-f", "protect *.keep", "-f", "exclude,s *.o"][..]),
        ("perishable", &["-f", "-p *.o"][..]),
        ("not-perishable", &["-f", "- *.o"][..]),
        ("negated", &["-f", "+ *.txt", "-f", "-! */"][..]),
        ("sides", &["-f", "-r *.keep", "-f", "+s keep.log", "-f", "-s *.log", "-f", "show hidden.key"][..]),
        ("delete-excluded", &["--delete-excluded", "--exclude", "*.o", "-f", "P prot*"][..]),
        ("gitignore", &["-f", ":- .gitignore"][..]),
        ("gitignore-n", &["-f", "dir-merge,n- .gitignore"][..]),
        ("exclude-self", &["-f", ":e .rules", "-f", "- u"][..]),
        ("merge-plain", &["-f", &merge][..]),
        ("literal", &["-f", "- lit\\b", "-f", "-_debug.log"][..]),
    ] {
        let (theirs, mine) = (f.out(&format!("{case}-rsync")), f.out(&format!("{case}-ddftp")));
        earlier(&theirs);
        earlier(&mine);
        let opts = [&["-a", "--delete"][..], opts].concat();
        let (mut r, mut o) = (rsync(&src, &theirs, &opts), ours(&m, &mine, &opts));
        assert_eq!(r.0, 0, "{case}: rsync {r:?}");
        // rsync's own order of a directory's line and the deletions below
        // it varies run to run: the lines are compared as sets.
        r.1.sort();
        o.1.sort();
        assert_eq!((o.0, &o.1), (r.0, &r.1), "{case}: exit and -i lines; stderr: {}", o.2);
        same_tree(&theirs, &mine);
        // A second run changes nothing, as rsync's.
        let (r, o) = (rsync(&src, &theirs, &opts), ours(&m, &mine, &opts));
        assert_eq!((o.0, &o.1), (r.0, &r.1), "{case} again; stderr: {}", o.2);
    }
}

#[test]
fn a_modifier_ddftp_does_not_take_is_refused_before_anything_moves() {
    let f = Fixture::new();
    let src = f.root().join("src");
    tree(&src);
    let m = Mirror::start(&f.root(), &[]);
    let mine = f.out("mine");
    for (rule, says) in [
        ("-/ /etc/passwd", "`/` (a pattern on the absolute path)"),
        ("-C x", "takes nothing after it"),
        ("Hr x", "`H` gives its side"),
        ("Q x", "takes `- PATTERN`"),
    ] {
        let o = ours(&m, &mine, &["-a", "-f", rule]);
        assert_eq!(o.0, 2, "{rule}: {o:?}");
        assert!(o.2.contains(says) && o.2.contains(rule), "{rule}: {}", o.2);
        assert!(!mine.exists(), "nothing made");
    }
}
