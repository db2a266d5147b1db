//! rsync's `-L`/`--copy-links` and `--copy-unsafe-links` on a listed
//! tree: a symlink becomes what it points to (a file, or a directory with
//! all it holds), under the link's own name.
//!
//! Nothing here reads a file system: the links are resolved against what
//! the mirrors listed (their paths, relative to their root), so a mirror
//! still reads only paths it listed itself, through no symlink. What the
//! lists do not say ([`Ask`]) is asked of a mirror by the caller, a name
//! at a time, and the tree resolved again. A target is resolved as the
//! kernel would resolve it on the mirror, a component at a time: a
//! symlink on the way is replaced by its own target (at most [`HOPS`]
//! times), `..` climbs from where the walk is, never above the mirrors'
//! root, and an absolute target is not followed (the mirrors serve their
//! root only; rsync, reading the sender's whole file system, would).
//!
//! A followed directory is copied whole; a link inside it is followed in
//! turn, unless it leads back to a directory it is inside (a loop, which
//! rsync would follow until its path is too long): that one is named and
//! left out. A list cannot make this grow without end: at most
//! [`MAX_ADDED`] entries are added.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::list::{Entry, Kind};

/// Symlinks one target may pass through (the kernel's limit).
pub const HOPS: usize = 40;
/// Entries following links may add to a list (a tree of links to links
/// would otherwise double at each level).
pub const MAX_ADDED: usize = 4_000_000;

/// Which symlinks are followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Follow {
    /// None: symlinks are copied as symlinks.
    #[default]
    No,
    /// Every one (`-L`).
    All,
    /// Those pointing outside the tree (`--copy-unsafe-links`, judged as
    /// [`crate::safe_links::is_unsafe`]).
    Unsafe,
}

impl Follow {
    fn follows(self, target: &[u8], rel: &[u8]) -> bool {
        match self {
            Follow::No => false,
            Follow::All => true,
            Follow::Unsafe => crate::safe_links::is_unsafe(target, rel),
        }
    }
}

/// Why a symlink was not followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoReferent {
    #[error("symlink has no referent")]
    Missing,
    #[error("an absolute target: ddftp follows a link only to what the mirrors serve (below their root); not copied")]
    Absolute,
    #[error("its target climbs above what the mirrors serve (their root); not copied")]
    AboveRoot,
    #[error("too many levels of symbolic links")]
    Hops,
    #[error("a symlink loop: it leads back to a directory it is in; not copied")]
    Loop,
    #[error("the list gives no target for it")]
    NoTarget,
    #[error("following links would add more than {MAX_ADDED} entries; not copied")]
    TooMany,
}

/// What a mirror must be asked before a link can be resolved.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ask {
    /// The entry at this path (its parent is a directory the lists hold):
    /// a walk of the parent that lists this name only.
    Name(Vec<u8>),
    /// Everything below this directory: a walk of it with no rules (the
    /// lists hold a filtered walk of it, or none).
    Whole(Vec<u8>),
}

/// What the mirrors listed, by path below their root (no `./`; the root
/// is the empty path), and what is known not to be there.
#[derive(Debug, Default)]
pub struct Known {
    by_path: BTreeMap<Vec<u8>, Entry>,
    /// Paths asked of a mirror that it does not have.
    absent: HashSet<Vec<u8>>,
    /// Directories walked whole (nothing below them left out by rules).
    whole: Vec<Vec<u8>>,
}

/// A listed path as a key: `./a` and `a` are one path, `.` the root.
pub fn key(path: &[u8]) -> &[u8] {
    let mut p = path;
    while let Some(r) = p.strip_prefix(b"./") {
        p = r;
    }
    if p == b"." {
        &[]
    } else {
        p.strip_suffix(b"/").unwrap_or(p)
    }
}

fn below<'p>(path: &'p [u8], dir: &[u8]) -> Option<&'p [u8]> {
    if dir.is_empty() {
        return (!path.is_empty()).then_some(path);
    }
    path.strip_prefix(dir)?.strip_prefix(b"/")
}

impl Known {
    /// Entries a walk gave; `whole_at` is its directory if it was walked
    /// with no rules.
    pub fn add(&mut self, entries: impl IntoIterator<Item = Entry>, whole_at: Option<&[u8]>) {
        for e in entries {
            self.by_path.entry(key(&e.path).to_vec()).or_insert(e);
        }
        if let Some(d) = whole_at {
            self.whole.push(key(d).to_vec());
        }
    }

    /// `path` was asked of a mirror, which does not have it.
    pub fn absent(&mut self, path: &[u8]) {
        self.absent.insert(path.to_vec());
    }

    fn is_whole(&self, dir: &[u8]) -> bool {
        self.whole.iter().any(|w| w.as_slice() == dir || below(dir, w).is_some())
    }

    /// Resolves the target of the symlink at `link` (a listed path) to the
    /// path of a listed entry that is not a symlink, or says what must be
    /// asked first.
    pub fn resolve(&self, link: &[u8], target: &[u8]) -> Result<Result<Vec<u8>, Ask>, NoReferent> {
        if target.is_empty() {
            return Err(NoReferent::Missing);
        }
        if target[0] == b'/' {
            return Err(NoReferent::Absolute);
        }
        let link = key(link);
        let mut done: Vec<&[u8]> = link.split(|&c| c == b'/').filter(|c| !c.is_empty() && *c != b".").collect();
        done.pop();
        let mut todo: Vec<&[u8]> = target.split(|&c| c == b'/').rev().collect();
        let mut hops = 0;
        while let Some(c) = todo.pop() {
            match c {
                b"" | b"." => continue,
                b".." => {
                    done.pop().ok_or(NoReferent::AboveRoot)?;
                    continue;
                }
                name => done.push(name),
            }
            let path = done.join(&b'/');
            if self.absent.contains(&path) {
                return Err(NoReferent::Missing);
            }
            let Some(e) = self.by_path.get(&path) else { return Ok(Err(Ask::Name(path))) };
            match e.kind {
                Kind::Dir => {}
                Kind::Link => {
                    hops += 1;
                    if hops > HOPS {
                        return Err(NoReferent::Hops);
                    }
                    let t = e.meta.target().ok_or(NoReferent::NoTarget)?;
                    if t.first() == Some(&b'/') {
                        return Err(NoReferent::Absolute);
                    }
                    done.pop();
                    todo.extend(t.split(|&c| c == b'/').rev());
                }
                // A file with more path after it: not a directory.
                _ if !todo.is_empty() => return Err(NoReferent::Missing),
                _ => {}
            }
        }
        let path = done.join(&b'/');
        match self.by_path.get(&path) {
            // Reached by `..` or `.` alone: a directory above the link
            // that a list (a hostile one) gives as a symlink.
            Some(e) if e.kind == Kind::Link => Err(NoReferent::Missing),
            Some(_) => Ok(Ok(path)),
            // The root itself, not listed by these walks.
            None => Ok(Err(Ask::Whole(path))),
        }
    }
}

/// A list with its symlinks followed.
#[derive(Debug, Default)]
pub struct Followed {
    /// `(name below DEST, entry)`: a followed link is its referent's entry
    /// (its path the referent's, where the bytes are read) under the
    /// link's name, in the order found (not sorted).
    pub out: Vec<(Vec<u8>, Entry)>,
    /// What a mirror must be asked before the links not in `out` resolve.
    pub ask: BTreeSet<Ask>,
    /// Those links (by their name below DEST): not followed if the
    /// mirrors are asked no more.
    pub waiting: Vec<Vec<u8>>,
    /// The links not followed (by their name below DEST), and why.
    pub failed: Vec<(Vec<u8>, NoReferent)>,
}

/// `listed` (`(name below DEST, entry)`, the entries of `known` that are
/// to be copied) with the symlinks `follow` takes replaced by what they
/// point to, as far as `known` tells.
pub fn follow(listed: Vec<(Vec<u8>, Entry)>, known: &Known, follow: Follow) -> Followed {
    let mut f = Followed::default();
    let mut added = 0usize;
    for (rel, e) in listed {
        match e.meta.target() {
            Some(t) if e.kind == Kind::Link && follow.follows(t, &rel) => {
                let link = key(&e.path).to_vec();
                f.link(known, follow, (rel, link, t.to_vec()), &mut added);
            }
            None if e.kind == Kind::Link && follow == Follow::All => f.failed.push((rel, NoReferent::NoTarget)),
            _ => f.out.push((rel, e)),
        }
    }
    f
}

impl Followed {
    /// Follows one link (`(name below DEST, its listed path, its target)`)
    /// and every link inside a directory it leads to; a stack, not
    /// recursion: a list may nest directories deeply.
    fn link(&mut self, known: &Known, follow: Follow, first: (Vec<u8>, Vec<u8>, Vec<u8>), added: &mut usize) {
        // (name, link's path, target, the links that led here and the
        // directories they led to)
        let mut stack = vec![(first.0, first.1, first.2, vec![])];
        while let Some((rel, link, target, inside)) = stack.pop() {
            let path = match known.resolve(&link, &target) {
                Ok(Ok(p)) => p,
                Ok(Err(ask)) => {
                    self.ask.insert(ask);
                    self.waiting.push(rel);
                    continue;
                }
                Err(why) => {
                    self.failed.push((rel, why));
                    continue;
                }
            };
            let r = &known.by_path[&path];
            if r.kind != Kind::Dir {
                self.out.push((rel, r.clone()));
                continue;
            }
            // Inside the directory it leads to, or one a link that led
            // here is inside: its copy would hold itself.
            let leads_back = |d: &[u8]| d == path.as_slice() || below(d, &path).is_some();
            if leads_back(&link) || inside.iter().any(|d: &Vec<u8>| leads_back(d)) {
                self.failed.push((rel, NoReferent::Loop));
                continue;
            }
            if !known.is_whole(&path) {
                self.ask.insert(Ask::Whole(path));
                self.waiting.push(rel);
                continue;
            }
            let under: Vec<(&Vec<u8>, &Entry)> = match path.is_empty() {
                true => known.by_path.range::<Vec<u8>, _>(..).filter(|(p, _)| !p.is_empty()).collect(),
                false => {
                    let from = [path.as_slice(), b"/"].concat();
                    let to = [path.as_slice(), b"0"].concat();
                    known.by_path.range(from..to).collect()
                }
            };
            if *added + under.len() > MAX_ADDED {
                self.failed.push((rel, NoReferent::TooMany));
                continue;
            }
            *added += under.len();
            self.out.push((rel.clone(), r.clone()));
            let mut inside = inside;
            inside.extend([link, path.clone()]);
            for (p, e) in under {
                let sub = below(p, &path).expect("in range");
                let name = [rel.as_slice(), b"/", sub].concat();
                match e.meta.target() {
                    Some(t) if e.kind == Kind::Link && follow.follows(t, &name) => {
                        stack.push((name, p.clone(), t.to_vec(), inside.clone()))
                    }
                    None if e.kind == Kind::Link && follow == Follow::All => {
                        self.failed.push((name, NoReferent::NoTarget))
                    }
                    _ => self.out.push((name, e.clone())),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::list::{Meta, Time};

    fn entry(path: &str, kind: Kind, target: Option<&str>) -> Entry {
        let mut meta = Meta::default();
        if let Some(t) = target {
            meta.rare_mut().target = Some(t.as_bytes().to_vec());
        }
        Entry { path: path.into(), kind, perm: 0o755, size: 1, mtime: Time { sec: 1, nsec: 0 }, meta }
    }

    /// `src` walked whole: `d` a directory, `f` a file, `l:T` a link to T.
    fn known(specs: &[&str]) -> (Known, Vec<(Vec<u8>, Entry)>) {
        let entries: Vec<Entry> = specs
            .iter()
            .map(|s| match s.split_once(':') {
                Some((p, t)) => entry(p, Kind::Link, Some(t)),
                None if s.ends_with('/') => entry(s.trim_end_matches('/'), Kind::Dir, None),
                None => entry(s, Kind::File, None),
            })
            .collect();
        let mut k = Known::default();
        k.add(entries.clone(), Some(b"src"));
        let listed = entries.into_iter().map(|e| (below(key(&e.path), b"src").unwrap_or(b"").to_vec(), e)).collect();
        (k, listed)
    }

    fn names(f: &Followed) -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = f
            .out
            .iter()
            .map(|(r, e)| (String::from_utf8_lossy(r).into_owned(), String::from_utf8_lossy(&e.path).into_owned()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_file_link_becomes_the_file_and_a_dir_link_the_whole_dir() {
        let (k, listed) =
            known(&["src/", "src/f", "src/d/", "src/d/g", "src/lf:f", "src/ld:d", "src/d/up:../f", "src/chain:lf"]);
        let f = follow(listed, &k, Follow::All);
        assert!(f.failed.is_empty() && f.ask.is_empty(), "{f:?}");
        let want = [
            ("", "src"),
            ("chain", "src/f"),
            ("d", "src/d"),
            ("d/g", "src/d/g"),
            ("d/up", "src/f"),
            ("f", "src/f"),
            ("ld", "src/d"),
            ("ld/g", "src/d/g"),
            ("ld/up", "src/f"),
            ("lf", "src/f"),
        ];
        assert_eq!(names(&f), want.map(|(a, b)| (a.to_string(), b.to_string())));
    }

    #[test]
    fn only_unsafe_links_with_copy_unsafe_links_and_what_is_not_listed_is_asked() {
        let (k, listed) = known(&["src/", "src/f", "src/in:f", "src/out:../other/x", "src/abs:/etc/passwd"]);
        let f = follow(listed, &k, Follow::Unsafe);
        assert_eq!(f.ask.iter().collect::<Vec<_>>(), [&Ask::Name(b"other".to_vec())]);
        assert_eq!(f.failed, [(b"abs".to_vec(), NoReferent::Absolute)]);
        assert!(f.out.iter().any(|(r, e)| r == b"in" && e.kind == Kind::Link), "a safe link stays a link");
        let (mut k, listed) = known(&["src/", "src/out:../other/x"]);
        k.add([entry("other", Kind::Dir, None), entry("other/x", Kind::File, None)], None);
        let f = follow(listed.clone(), &k, Follow::Unsafe);
        assert_eq!(names(&f), [("".into(), "src".into()), ("out".into(), "other/x".into())]);
        k.absent(b"other/x");
        let (mut k2, _) = known(&["src/", "src/out:../other/x"]);
        k2.add([entry("other", Kind::Dir, None)], None);
        k2.absent(b"other/x");
        assert_eq!(follow(listed, &k2, Follow::Unsafe).failed, [(b"out".to_vec(), NoReferent::Missing)]);
    }

    #[test]
    fn loops_climbs_and_dangling_links_are_named_not_followed() {
        let (k, listed) = known(&[
            "src/",
            "src/d/",
            "src/d/back:..",
            "src/self:self",
            "src/gone:nothing",
            "src/high:../../x",
            "src/a/",
            "src/a/tob:../b",
            "src/b/",
            "src/b/toa:../a",
            "src/f",
            "src/nodir:f/x",
        ]);
        let f = follow(listed, &k, Follow::All);
        let mut failed: Vec<(String, NoReferent)> =
            f.failed.iter().map(|(r, w)| (String::from_utf8_lossy(r).into_owned(), w.clone())).collect();
        failed.sort_by(|a, b| a.0.cmp(&b.0));
        let want = [
            ("a/tob/toa", NoReferent::Loop),
            ("b/toa/tob", NoReferent::Loop),
            ("d/back", NoReferent::Loop),
            ("high", NoReferent::AboveRoot),
            ("nodir", NoReferent::Missing),
            ("self", NoReferent::Hops),
        ];
        assert_eq!(failed, want.map(|(a, b)| (a.to_string(), b)));
        assert_eq!(f.ask.iter().collect::<Vec<_>>(), [&Ask::Name(b"src/nothing".to_vec())]);
    }

    #[test]
    fn a_dir_walked_with_rules_is_asked_whole() {
        let (mut k, listed) = known(&["src/", "src/ld:../data"]);
        k.add([entry("data", Kind::Dir, None)], None);
        let f = follow(listed, &k, Follow::All);
        assert_eq!(f.ask.iter().collect::<Vec<_>>(), [&Ask::Whole(b"data".to_vec())]);
    }

    #[test]
    fn a_directory_above_listed_as_a_link_is_no_referent() {
        let mut k = Known::default();
        k.add([entry(".", Kind::Link, Some("./"))], Some(b""));
        let f = follow(vec![(vec![], entry(".", Kind::Link, Some("./")))], &k, Follow::All);
        assert_eq!(f.failed, [(vec![], NoReferent::Missing)]);
    }

    proptest::proptest! {
        /// Whatever links a list holds, following them ends, panics on
        /// nothing, and gives each name below DEST once.
        #[test]
        fn any_links_end_and_give_each_name_once(
            links in proptest::collection::vec(("[a-c]{1,2}", "(\\.\\./|[a-c]{1,2}/|\\./){0,4}[a-c]{0,2}"), 0..8),
            dirs in proptest::collection::vec("[a-c]{1,2}", 0..4),
        ) {
            let mut specs = vec!["src/".to_string()];
            let mut seen = HashSet::new();
            for d in &dirs {
                if seen.insert(d.clone()) {
                    specs.push(format!("src/{d}/"));
                    specs.push(format!("src/{d}/f"));
                }
            }
            for (i, (name, t)) in links.iter().enumerate() {
                let n = format!("{name}{i}");
                if seen.insert(n.clone()) {
                    specs.push(format!("src/{n}:{t}"));
                    if let Some(d) = dirs.first() {
                        specs.push(format!("src/{d}/{n}:{t}"));
                    }
                }
            }
            let specs: Vec<&str> = specs.iter().map(String::as_str).collect();
            let (k, listed) = known(&specs);
            let f = follow(listed, &k, Follow::All);
            let mut names = HashSet::new();
            for (r, _) in &f.out {
                proptest::prop_assert!(names.insert(r.clone()), "{} twice", String::from_utf8_lossy(r));
            }
            proptest::prop_assert!(f.out.iter().all(|(_, e)| e.kind != Kind::Link));
        }
    }
}
