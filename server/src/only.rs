//! A server that shows only some of its root: a pushed file (served from
//! its directory) or `-R`'s path (served from where it starts). Only the
//! named paths, what is below them, and the directories on their way may
//! be read, stat'ed or walked; a walk lists nothing else, not even beside
//! what it leads to. Whatever the other end asks beyond that is refused as
//! a path outside the root is.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

/// The paths a server shows of its root.
#[derive(Debug, Clone)]
pub struct Only {
    named: Vec<PathBuf>,
    on_the_way: HashSet<PathBuf>,
}

impl Only {
    /// `named`: paths below the root (their `.` components dropped; one
    /// with a `..` names nothing).
    pub fn new(named: impl IntoIterator<Item = PathBuf>) -> Only {
        let named: Vec<PathBuf> = named.into_iter().filter_map(|p| plain(&p)).collect();
        let on_the_way = named.iter().flat_map(|n| n.ancestors().skip(1).map(Path::to_path_buf)).collect();
        Only { named, on_the_way }
    }

    /// Whether `rel` (a path below the root) may be shown: a named path,
    /// one below it, or a directory on the way to one (the root too).
    pub fn allows(&self, rel: &Path) -> bool {
        match plain(rel) {
            Some(p) => self.on_the_way.contains(&p) || self.named.iter().any(|n| p.starts_with(n)),
            None => false,
        }
    }
}

/// `p`'s names alone, if it has no `..` and is not absolute.
fn plain(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_named_what_is_below_and_the_way_there_nothing_beside() {
        let only = Only::new([PathBuf::from("a/./b/c"), PathBuf::from("f")]);
        for yes in ["", ".", "a", "a/b", "a/b/c", "./a/b/c/d/e", "f"] {
            assert!(only.allows(Path::new(yes)), "{yes}");
        }
        for no in ["a/x", "a/b/cc", "a/bb/c", "g", "f2", "a/b/c/../../x", "/a/b/c", "..", "b"] {
            assert!(!only.allows(Path::new(no)), "{no}");
        }
        assert!(!Only::new([PathBuf::from("../x")]).allows(Path::new("x")));
    }

    proptest::proptest! {
        /// Nothing outside the named paths and their way is allowed.
        #[test]
        fn only_what_leads_to_or_lies_below_a_named_path(path in "[ab./]{0,12}") {
            let only = Only::new([PathBuf::from("a/b")]);
            let p = Path::new(&path);
            if only.allows(p) {
                let q = plain(p).unwrap();
                proptest::prop_assert!(q.starts_with("a/b") || Path::new("a/b").starts_with(&q));
            }
        }
    }
}
