//! rsync's `x` filter rules with `-X`: which xattrs are copied (`-x
//! NAME`, `-x! NAME`) and which of DEST's are left as they are (a rule
//! for both sides, or `-xr` for the receiving one). Real rsync and ddftp
//! onto the same drifted copies: the `-i` lines, exit codes and every
//! file's xattrs compared.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::rsync_links::ours;
use crate::rsync_parts::rsync;
use crate::util::*;

fn set_xattr(p: &Path, name: &str, value: &[u8]) {
    let (p, n) = (CString::new(p.as_os_str().as_bytes()).unwrap(), CString::new(name).unwrap());
    // SAFETY: valid C strings and a value of the length given.
    let r = unsafe { libc::lsetxattr(p.as_ptr(), n.as_ptr(), value.as_ptr().cast(), value.len(), 0) };
    assert_eq!(r, 0, "lsetxattr {p:?} {name}: {}", std::io::Error::last_os_error());
}

/// One file's xattrs, `(name, value)`, sorted.
type Xattrs = Vec<(Vec<u8>, Vec<u8>)>;

/// Each file's user xattrs, by name below `dir`.
fn xattrs(dir: &Path, names: &[&str]) -> BTreeMap<String, Xattrs> {
    let read = |n: &str| {
        let p = CString::new(dir.join(n).as_os_str().as_bytes()).unwrap();
        let mut xs = ddtree::attrs::read_xattrs(&p).unwrap();
        xs.retain(|(k, _)| k.starts_with(b"user."));
        xs.sort();
        xs
    };
    names.iter().map(|n| (n.to_string(), read(n))).collect()
}

#[test]
fn x_rules_choose_the_xattrs_copied_and_left_as_rsync() {
    let f = Fixture::new();
    let src = f.root().join("src");
    let names = ["a", "b", "d/c"];
    std::fs::create_dir_all(src.join("d")).unwrap();
    for (i, n) in names.iter().enumerate() {
        random_file(&src.join(n), 100 + i * 10, 60 + i as u64);
        set_xattr(&src.join(n), "user.a", b"one");
        set_xattr(&src.join(n), "user.b", format!("two {i}").as_bytes());
        set_xattr(&src.join(n), "user.keep", b"kept");
    }
    let m = Mirror::start(&f.root(), &[]);
    for (case, rules) in [
        ("x", &["-f", "-x user.b"][..]),
        ("x-not", &["-f", "-x! user.a"][..]),
        ("xr", &["-f", "-xr user.local", "-f", "-x user.keep"][..]),
    ] {
        let (theirs, mine) = (f.out(&format!("{case}-rsync")), f.out(&format!("{case}-ddftp")));
        for d in [&theirs, &mine] {
            assert_eq!(rsync(&src, d, &["-aX"]).0, 0);
            // DEST drifted: a value changed, a name of its own.
            for n in names {
                set_xattr(&d.join(n), "user.b", b"changed in DEST");
                set_xattr(&d.join(n), "user.local", b"DEST's");
            }
        }
        let opts = [&["-aX"][..], rules].concat();
        let (r, o) = (rsync(&src, &theirs, &opts), ours(&m, &mine, &opts));
        assert_eq!(r.0, 0, "{case}: rsync {r:?}");
        assert_eq!((o.0, &o.1), (r.0, &r.1), "{case}: exit and -i lines; stderr: {}", o.2);
        assert_eq!(xattrs(&mine, &names), xattrs(&theirs, &names), "{case}: the xattrs");
        // What each case means, so the comparison above shows something.
        let got = xattrs(&mine, &["a"]).remove("a").unwrap();
        let has = |k: &str, v: &[u8]| got.iter().any(|(n, x)| n == k.as_bytes() && x == v);
        match case {
            "x" => {
                assert!(has("user.b", b"changed in DEST") && !got.iter().any(|(n, _)| n == b"user.local"), "{got:?}")
            }
            "x-not" => assert!(has("user.b", b"changed in DEST") && has("user.local", b"DEST's"), "{got:?}"),
            // user.keep: neither copied nor touched, DEST's stays.
            _ => {
                assert!(has("user.local", b"DEST's") && has("user.b", b"two 0") && has("user.keep", b"kept"), "{got:?}")
            }
        }
    }
}
