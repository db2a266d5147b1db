//! `--safe-links` (rsync's): a symlink whose target leaves the tree
//! (absolute, empty, or climbing above DEST with `..`) is not made. The
//! rule is rsync's `unsafe_symlink()`, so the same links are left out.

/// Whether a symlink at `rel` (its path below DEST, `/`-separated) with
/// `target` points outside the tree, as rsync 3.2.4 and later judge it:
/// absolute or empty; a `..` anywhere but in a run at the start, or at
/// the end after a name; or its leading `..`s climb above DEST, counted
/// from the link's own directory.
pub fn is_unsafe(target: &[u8], rel: &[u8]) -> bool {
    if target.is_empty() || target[0] == b'/' {
        return true;
    }
    let mut rest = target;
    while let Some(r) = rest.strip_prefix(b"../") {
        rest = r;
        while let Some(r) = rest.strip_prefix(b"/") {
            rest = r;
        }
    }
    if rest.windows(4).any(|w| w == b"/../") || (target.len() > 3 && target.ends_with(b"/..")) {
        return true;
    }
    let parts = |p: &'_ [u8]| -> Vec<Vec<u8>> {
        // rsync collapses repeated slashes after a segment.
        let mut v: Vec<Vec<u8>> = vec![];
        for (i, seg) in p.split(|&b| b == b'/').enumerate() {
            if i > 0 && seg.is_empty() && !v.is_empty() {
                continue;
            }
            v.push(seg.to_vec());
        }
        v
    };
    // How deep the link's directory is: a `..` starts the count again,
    // `.` counts nothing.
    let mut depth: i64 = 0;
    let src = parts(rel);
    let (name, dirs) = src.split_last().expect("one part at least");
    for d in dirs {
        match d.as_slice() {
            b".." => depth = 0,
            b"." => {}
            _ => depth += 1,
        }
    }
    if name.as_slice() == b".." {
        depth = 0;
    }
    let dest = parts(target);
    let (last, walk) = dest.split_last().expect("one part at least");
    for d in walk {
        match d.as_slice() {
            b".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            b"." => {}
            _ => depth += 1,
        }
    }
    if last.as_slice() == b".." {
        depth -= 1;
    }
    depth < 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rsyncs_verdicts() {
        // (target, link's path, unsafe)
        let cases: &[(&[u8], &[u8], bool)] = &[
            (b"f", b"link", false),
            (b"../f", b"link", true),
            (b"../f", b"d/link", false),
            (b"../../f", b"d/link", true),
            (b"..//../f", b"d/e/link", false),
            (b"/etc/passwd", b"d/link", true),
            (b"", b"d/link", true),
            // A `..` after a name: rsync 3.2.4 and later refuse it.
            (b"sub/../x", b"d/link", true),
            (b"./../f", b"d/e/link", true),
            (b"a/..", b"d/link", true),
            (b"..", b"d/link", false),
            (b"..", b"link", true),
            (b"a//b/./c", b"link", false),
        ];
        for &(t, rel, want) in cases {
            assert_eq!(is_unsafe(t, rel), want, "{} at {}", String::from_utf8_lossy(t), String::from_utf8_lossy(rel));
        }
    }

    proptest! {
        #[test]
        fn never_panics_and_what_never_climbs_is_safe(target in proptest::collection::vec(any::<u8>(), 0..64), rel in "[a-z/.]{0,24}") {
            let verdict = is_unsafe(&target, rel.as_bytes());
            if target.first() == Some(&b'/') || target.is_empty() {
                prop_assert!(verdict);
            }
            let climbs = target.split(|&b| b == b'/').any(|p| p == b"..");
            prop_assert!(!verdict || climbs || target.first() == Some(&b'/') || target.is_empty());
            if !climbs && target.first() != Some(&b'/') && !target.is_empty() {
                prop_assert!(!verdict);
            }
        }
    }
}
