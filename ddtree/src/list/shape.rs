//! Whether a list describes a tree: the check every list passes before
//! anything is made from it (a mirror's walk, streamed or whole, and a
//! `--list` file alike).
//!
//! A walk lists each path once, every entry's directory as a directory,
//! and every name canonical. A list that does not (a name twice, once as a
//! directory and once as a symlink; an entry below a symlink or a file;
//! an entry whose directory is not listed; `..`, `//`, a trailing `/`) is
//! not a walk's: what it would make could go through what it makes
//! itself. Such entries are refused, with why, before any is written;
//! the rest of the list stands.
//!
//! A parallel walk's batches can bring a directory's entries before the
//! directory itself: an entry whose directory has not come yet waits for
//! it ([`Shape::finish`] refuses those still waiting when the list ends).

use std::collections::HashMap;

use ddftp_proto::relpath::{self, RelPathError};

/// Why an entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("its name is not a plain path below SRC: {0}")]
    Name(#[from] RelPathError),
    #[error("the list gives this name twice (the first one was taken)")]
    Twice,
    #[error("it is below {}, which the list gives as no directory", String::from_utf8_lossy(.0))]
    BelowNonDir(Vec<u8>),
    #[error("its directory {} is not in the list", String::from_utf8_lossy(.0))]
    NoParent(Vec<u8>),
    #[error("SRC itself is listed as no directory")]
    RootNotDir,
    #[error("it is below SRC, which the list gives as no directory")]
    BelowRootNotDir,
}

/// The names admitted so far (whether each is a directory), and the
/// entries waiting for their directory.
#[derive(Debug)]
pub struct Shape<T> {
    known: HashMap<Box<[u8]>, bool>,
    /// The root (SRC itself, the empty name) was listed; and as no
    /// directory (nothing is below it then).
    root_listed: bool,
    root_not_dir: bool,
    /// The directory admitted last: a walk's entries mostly follow their
    /// directory, so most parents are this one (no lookup).
    last_dir: Option<Box<[u8]>>,
    waiting: HashMap<Box<[u8]>, Vec<Waiting<T>>>,
}

/// An entry waiting for its directory: its name, whether it is a directory, and it.
type Waiting<T> = (Box<[u8]>, bool, T);

impl<T> Default for Shape<T> {
    fn default() -> Self {
        Shape {
            known: HashMap::new(),
            root_listed: false,
            root_not_dir: false,
            last_dir: None,
            waiting: HashMap::new(),
        }
    }
}

impl<T> Shape<T> {
    /// A check with room for `n` names (a whole list's: no rehashing).
    pub fn with_capacity(n: usize) -> Shape<T> {
        Shape { known: HashMap::with_capacity(n), ..Shape::default() }
    }

    /// Takes entry `rel` (below SRC; empty for SRC itself), a directory or
    /// not: admitted entries (it, and any that waited for it) go to `out`,
    /// refused ones to `refused`; one whose directory has not come yet waits.
    /// (`rel` is owned: it becomes the key the name is remembered by.)
    pub fn admit(&mut self, rel: Box<[u8]>, is_dir: bool, item: T, out: &mut Vec<T>, refused: &mut Vec<(T, Refused)>) {
        if rel.is_empty() {
            match (self.root_listed, is_dir) {
                (true, _) => refused.push((item, Refused::Twice)),
                (false, false) => {
                    self.root_listed = true;
                    self.root_not_dir = true;
                    refused.push((item, Refused::RootNotDir));
                }
                (false, true) => {
                    self.root_listed = true;
                    out.push(item);
                }
            }
            return;
        }
        if let Err(e) = relpath::check(&rel) {
            refused.push((item, e.into()));
            return;
        }
        // SRC listed as a file: nothing listed after it is below it.
        if self.root_not_dir {
            refused.push((item, Refused::BelowRootNotDir));
            return;
        }
        // (A name known already has its directory known: it is refused as
        // given twice where it would be taken.)
        let parent = relpath::parent(&rel);
        match self.kind_of(parent) {
            Some(true) => {}
            Some(false) => {
                let parent = parent.to_vec();
                refused.push((item, Refused::BelowNonDir(parent)));
                return;
            }
            None => {
                let w = self.waiting.entry(parent.into()).or_default();
                // One name waiting twice is refused when it would be admitted.
                w.push((rel, is_dir, item));
                return;
            }
        }
        self.take(rel, is_dir, item, out, refused);
    }

    /// Whether `name` is a known directory (`Some(true)`), known as
    /// something else, or not known yet. DEST itself is a directory.
    fn kind_of(&self, name: &[u8]) -> Option<bool> {
        if name.is_empty() || self.last_dir.as_deref() == Some(name) {
            return Some(true);
        }
        self.known.get(name).copied()
    }

    /// Admits `rel` (its directory is known to be one, its name not yet)
    /// and, if it is a directory, the entries that waited for it; below
    /// anything else they are refused.
    fn take(&mut self, rel: Box<[u8]>, is_dir: bool, item: T, out: &mut Vec<T>, refused: &mut Vec<(T, Refused)>) {
        use std::collections::hash_map::Entry;
        // A walk's list brings most directories before what they hold:
        // nothing waits for them, and a file needs its name no more.
        let waiting = !self.waiting.is_empty();
        let name = (waiting || is_dir).then(|| rel.clone());
        match self.known.entry(rel) {
            Entry::Occupied(_) => {
                refused.push((item, Refused::Twice));
                return;
            }
            Entry::Vacant(v) => {
                v.insert(is_dir);
            }
        }
        out.push(item);
        let Some(name) = name else { return };
        let below = match waiting {
            true => self.waiting.remove(&name),
            false => None,
        };
        for (child, d, it) in below.into_iter().flatten() {
            match is_dir {
                true => self.take(child, d, it, out, refused),
                false => refused.push((it, Refused::BelowNonDir(name.to_vec()))),
            }
        }
        if is_dir {
            self.last_dir = Some(name);
        }
    }

    /// The list has ended: entries still waiting for their directory are
    /// refused.
    pub fn finish(&mut self) -> Vec<(T, Refused)> {
        let mut refused = vec![];
        for (dir, waiting) in self.waiting.drain() {
            for (_, _, it) in waiting {
                refused.push((it, Refused::NoParent(dir.to_vec())));
            }
        }
        refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(list: &[(&str, bool)]) -> (Vec<String>, Vec<(String, Refused)>) {
        let mut s = Shape::default();
        let (mut out, mut refused) = (vec![], vec![]);
        for &(p, d) in list {
            s.admit(p.as_bytes().into(), d, p.to_string(), &mut out, &mut refused);
        }
        refused.extend(s.finish());
        (out, refused)
    }

    #[test]
    fn a_walks_list_passes_in_any_order_of_batches() {
        let (out, refused) = run(&[("a/b/c", false), ("", true), ("a/b", true), ("x", false), ("a", true)]);
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(out.len(), 5);
    }

    #[test]
    fn nothing_below_a_root_listed_as_a_file_is_admitted() {
        // (A walk lists SRC first; what came before it was admitted then.)
        let (out, refused) = run(&[("", false), ("h", true), ("h/y", false), ("x", false)]);
        assert!(out.is_empty(), "{out:?}");
        let why: Vec<Refused> = refused.into_iter().map(|(_, r)| r).collect();
        assert!(why.contains(&Refused::RootNotDir) && why.contains(&Refused::BelowRootNotDir), "{why:?}");
    }

    #[test]
    fn hostile_shapes_are_refused_with_why() {
        let (out, refused) = run(&[
            ("", true),
            ("a", false),
            ("a/authorized_keys", false),
            ("d", true),
            ("d", false),
            ("d/", false),
            ("e/f", false),
            ("../x", false),
            ("l/y/z", false),
            ("l", false),
        ]);
        assert_eq!(out, ["", "a", "d", "l"]);
        let why: Vec<(&str, Refused)> = refused.iter().map(|(p, r)| (p.as_str(), r.clone())).collect();
        assert!(why.contains(&("a/authorized_keys", Refused::BelowNonDir(b"a".to_vec()))));
        assert!(why.contains(&("d", Refused::Twice)));
        assert!(why.contains(&("d/", Refused::Name(RelPathError::TrailingSlash))));
        assert!(why.contains(&("e/f", Refused::NoParent(b"e".to_vec()))));
        assert!(why.contains(&("../x", Refused::Name(RelPathError::Dots))));
        assert!(why.contains(&("l/y/z", Refused::NoParent(b"l/y".to_vec()))));
        let (_, r) = run(&[("", false)]);
        assert_eq!(r[0].1, Refused::RootNotDir);
    }

    proptest! {
        /// Whatever order a list comes in: every admitted entry's
        /// directory was admitted as a directory, no name is admitted
        /// twice, and every entry is admitted or refused, once.
        #[test]
        fn admitted_entries_form_a_tree(list in proptest::collection::vec(
            (proptest::collection::vec(prop_oneof![Just("a"), Just("b"), Just(".."), Just("")], 0..4), any::<bool>()),
            0..40)) {
            let list: Vec<(String, bool)> = list.into_iter().map(|(p, d)| (p.join("/"), d)).collect();
            let mut s = Shape::default();
            let (mut out, mut refused) = (vec![], vec![]);
            for (i, (p, d)) in list.iter().enumerate() {
                s.admit(p.as_bytes().into(), *d, i, &mut out, &mut refused);
            }
            refused.extend(s.finish());
            prop_assert_eq!(out.len() + refused.len(), list.len());
            // Once SRC is listed as a file (its first listing), nothing
            // listed after it is admitted.
            if let Some(at) = list.iter().position(|(p, _)| p.is_empty()).filter(|&i| !list[i].1) {
                prop_assert!(out.iter().all(|&i| i < at), "{:?} admitted after SRC listed as a file", out);
            }
            let mut dirs: HashMap<&str, bool> = HashMap::new();
            for &i in &out {
                let (p, d) = (&list[i].0, list[i].1);
                prop_assert!(dirs.insert(p.as_str(), d).is_none(), "{} admitted twice", p);
            }
            for &i in &out {
                let p = list[i].0.as_str();
                if p.is_empty() { continue; }
                let parent = p.rfind('/').map_or("", |k| &p[..k]);
                prop_assert!(parent.is_empty() || dirs.get(parent) == Some(&true), "{} admitted below {:?}", p, parent);
            }
        }
    }
}
