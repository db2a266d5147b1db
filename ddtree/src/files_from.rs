//! `--files-from FILE`, in rsync's form: the paths below SRC to copy, one
//! a line (or NUL-separated with `--from0`); blank lines and lines starting
//! with `#` or `;` are comments; a leading `/` or `./` is dropped. Exactly
//! the entries named are copied, and the directories on their way: a
//! directory named is made, not entered (rsync without `-r`), unless it is
//! named with a trailing `/` (or `/.`): then the entries directly in it
//! come too (rsync's implied `--dirs`); with `-r` ([`FilesFrom::recursing`])
//! a directory named comes with everything in it. A `/./` in a line marks
//! where its name starts, as rsync's `--relative` reads it: `a/./b/c` is
//! `SRC/a/b/c`, copied as `DEST/b/c` (its base `a`, walked as a SRC of its
//! own; the lines of each base walk that base alone). `ddftp archive -R`
//! reads its SRCs the same way. Pure: the caller reads the file.

use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// What the lines of one base name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Names {
    named: HashSet<PathBuf>,
    /// Every directory on the way to a named entry.
    on_the_way: HashSet<PathBuf>,
    /// Directories named with a trailing `/`: what is directly in them too.
    opened: HashSet<PathBuf>,
    /// A line names the base itself (`.`, `./NAME`, `a/./`).
    itself: bool,
}

/// The entries a `--files-from` list names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilesFrom {
    /// Every line's name, whatever its base: the names under DEST.
    all: Names,
    /// Each base (empty: SRC itself) and its lines' names, in the order
    /// the list first gives them.
    bases: Vec<(PathBuf, Names)>,
    /// A directory named comes whole (rsync's `-r` with `--files-from`).
    recurse: bool,
}

/// A line that names nothing below SRC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {path:?} {why}")]
pub struct BadLine {
    pub line: usize,
    pub path: String,
    pub why: &'static str,
}

/// A path's components below SRC (`/` and `.` dropped), or why not.
fn below(raw: &[u8]) -> Result<PathBuf, &'static str> {
    let mut rel = PathBuf::new();
    for c in Path::new(std::ffi::OsStr::from_bytes(raw)).components() {
        match c {
            Component::Normal(name) => rel.push(name),
            Component::RootDir | Component::CurDir => {}
            Component::ParentDir => return Err("goes up with `..`: name entries below SRC"),
            Component::Prefix(_) => return Err("is not a path"),
        }
    }
    Ok(rel)
}

impl Names {
    fn add(&mut self, rel: PathBuf, opened: bool) {
        if opened {
            self.opened.insert(rel.clone());
        }
        if rel.as_os_str().is_empty() {
            // The base itself, which is always made.
            return;
        }
        let mut up = rel.parent();
        while let Some(d) = up.filter(|d| !d.as_os_str().is_empty()) {
            if !self.on_the_way.insert(d.to_path_buf()) {
                break;
            }
            up = d.parent();
        }
        self.named.insert(rel);
    }

    fn wants(&self, rel: &Path, recurse: bool) -> bool {
        rel.as_os_str().is_empty()
            || self.named.contains(rel)
            || self.on_the_way.contains(rel)
            || rel.parent().is_some_and(|d| self.opened.contains(d))
            || (recurse && self.whole(rel))
    }

    /// Under `-r`: whether `rel` is in a directory named (or the base
    /// itself was named: everything).
    fn whole(&self, rel: &Path) -> bool {
        self.opened.contains(Path::new("")) || rel.ancestors().skip(1).any(|a| self.named.contains(a))
    }
}

impl FilesFrom {
    /// Parses the list's bytes; `nul`: NUL-separated (`--from0`).
    pub fn parse(text: &[u8], nul: bool) -> Result<FilesFrom, BadLine> {
        let mut f = FilesFrom::default();
        let sep = if nul { b'\0' } else { b'\n' };
        for (n, raw) in text.split(|&b| b == sep).enumerate() {
            let raw = if nul { raw } else { raw.strip_suffix(b"\r").unwrap_or(raw) };
            if raw.is_empty() || (!nul && (raw[0] == b'#' || raw[0] == b';')) {
                continue;
            }
            let bad = |why| BadLine { line: n + 1, path: String::from_utf8_lossy(raw).into_owned(), why };
            // rsync's marker: the name starts after the first `/./`.
            let (base, name) = match raw.windows(3).position(|w| w == b"/./") {
                Some(i) => (below(&raw[..i]).map_err(bad)?, &raw[i + 3..]),
                None => (PathBuf::new(), raw),
            };
            let rel = below(name).map_err(bad)?;
            let opened = name.is_empty() || name.ends_with(b"/") || name.ends_with(b"/.") || name == b".";
            // rsync sends `.` with a name that starts from it (`./d`).
            let itself = name.is_empty() || name == b"." || name.starts_with(b"./");
            let at = match f.bases.iter().position(|(b, _)| *b == base) {
                Some(at) => at,
                None => {
                    f.bases.push((base, Names::default()));
                    f.bases.len() - 1
                }
            };
            f.bases[at].1.itself |= itself;
            f.all.itself |= itself;
            f.bases[at].1.add(rel.clone(), opened);
            f.all.add(rel, opened);
        }
        Ok(f)
    }

    /// A directory named comes with everything in it (rsync's `-r` with
    /// `--files-from`, and `-R`'s SRCs).
    pub fn recursing(self) -> FilesFrom {
        FilesFrom { recurse: true, ..self }
    }

    /// Whether the entry `rel` (below its base; empty for the base) is
    /// copied.
    pub fn wants(&self, rel: &Path) -> bool {
        self.all.wants(rel, self.recurse)
    }

    /// The entries named (below their bases).
    pub fn named(&self) -> impl Iterator<Item = &Path> {
        self.all.named.iter().map(PathBuf::as_path)
    }

    /// Whether a line names its base itself (`.`, `./NAME`, `a/./`): the
    /// base is then copied as a directory of the list (its mode and times
    /// onto DEST), as rsync does.
    pub fn names_a_base(&self) -> bool {
        self.all.itself
    }

    /// The bases the lines name their entries below (an empty path for
    /// SRC itself, the base of lines without `/./`), in the list's order:
    /// each is walked as a SRC of its own.
    pub fn bases(&self) -> impl Iterator<Item = &Path> {
        self.bases.iter().map(|(b, _)| b.as_path())
    }

    /// Rules for a mirror's walk of base `base` (an index into
    /// [`FilesFrom::bases`]; [`crate::filter::Filter`]'s patterns, after
    /// the user's own) that keep it to what the list names there and the
    /// directories on their way, so the rest is never read: each
    /// included, anchored at the base, then everything else excluded.
    /// `None` if a name is not UTF-8 (no pattern can say it): the walk
    /// then reads all of it and the list is applied to what it sends.
    pub fn walk_rules(&self, base: usize) -> Option<Vec<(bool, String)>> {
        let names = &self.bases.get(base)?.1;
        if self.recurse && names.opened.contains(Path::new("")) {
            return Some(vec![]);
        }
        let esc = |p: &Path| -> Option<String> { Some(format!("/{}", crate::filter::quoted(p.to_str()?))) };
        let mut rules = vec![];
        for d in &names.on_the_way {
            rules.push((true, format!("{}/", esc(d)?)));
        }
        for n in &names.named {
            rules.push((true, esc(n)?));
            if self.recurse {
                rules.push((true, format!("{}/***", esc(n)?)));
            }
        }
        for d in &names.opened {
            let inside = if d.as_os_str().is_empty() { "/*".to_string() } else { format!("{}/*", esc(d)?) };
            rules.push((true, inside));
        }
        rules.push((false, "*".into()));
        Some(rules)
    }

    /// How many entries the list names.
    pub fn len(&self) -> usize {
        self.all.named.len()
    }

    pub fn is_empty(&self) -> bool {
        self.all.named.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rsync_s_form() {
        let f = FilesFrom::parse(b"# comment\n; too\n\n./a/b/c\n/top\nd/\r\ne/.\nf\n", false).unwrap();
        assert_eq!(f.len(), 5);
        for yes in ["", "a", "a/b", "a/b/c", "top", "d", "d/x", "e/y", "f"] {
            assert!(f.wants(Path::new(yes)), "{yes}");
        }
        for no in ["a/x", "a/b/c/d", "b", "topx", "d/x/y", "f/z"] {
            assert!(!f.wants(Path::new(no)), "{no}");
        }
        let z = FilesFrom::parse(b"a\nb\0#c\0", true).unwrap();
        assert!(z.wants(Path::new("a\nb")) && z.wants(Path::new("#c")));
        let e = FilesFrom::parse(b"ok\nx/../../etc\n", false).unwrap_err();
        assert_eq!(e.line, 2);
    }

    #[test]
    fn walk_rules_keep_a_walk_to_what_is_named() {
        let f = FilesFrom::parse(b"a/b/c\nd/\nodd[*]?{x}\\\n", false).unwrap();
        let rules = crate::filter::Filter::from_rules(&f.walk_rules(0).unwrap()).unwrap();
        for (rel, dir, pruned) in [
            ("a", true, false),
            ("a/b", true, false),
            ("a/b/c", false, false),
            ("a/x", false, true),
            ("a/b/d", true, true),
            ("d", true, false),
            ("d/e", true, false),
            ("d/e/f", false, true),
            ("odd[*]?{x}\\", false, false),
            ("oddz", false, true),
            ("top", false, true),
        ] {
            assert_eq!(rules.prunes(Path::new(rel), dir), pruned, "{rel}");
        }
        let bad = FilesFrom::parse(b"\xff\n", false).unwrap();
        assert!(bad.walk_rules(0).is_none());
    }

    #[test]
    fn a_dot_marker_starts_the_name_each_base_walked_alone() {
        let f = FilesFrom::parse(b"a/./b/c\nx/./y\na/./top\nplain\n", false).unwrap();
        let bases: Vec<&Path> = f.bases().collect();
        assert_eq!(bases, [Path::new("a"), Path::new("x"), Path::new("")]);
        for yes in ["b", "b/c", "y", "top", "plain"] {
            assert!(f.wants(Path::new(yes)), "{yes}");
        }
        assert!(!f.wants(Path::new("a")) && !f.wants(Path::new("b/c/d")));
        // Base a's walk takes b/c and top, not y.
        let rules = crate::filter::Filter::from_rules(&f.walk_rules(0).unwrap()).unwrap();
        for (rel, dir, pruned) in [("b", true, false), ("b/c", false, false), ("top", false, false), ("y", true, true)]
        {
            assert_eq!(rules.prunes(Path::new(rel), dir), pruned, "{rel}");
        }
        assert!(f.walk_rules(3).is_none());
        assert!(!f.names_a_base());
        for itself in [&b"./d\n"[..], b".\n", b"a/./\n"] {
            assert!(FilesFrom::parse(itself, false).unwrap().names_a_base(), "{itself:?}");
        }
        assert!(!FilesFrom::parse(b"/top\nd/.\n", false).unwrap().names_a_base());
        let e = FilesFrom::parse(b"../x/./y\n", false).unwrap_err();
        assert_eq!(e.line, 1);
        assert!(FilesFrom::parse(b"a/./../y\n", false).is_err());
    }

    #[test]
    fn recursing_takes_a_named_directory_whole() {
        let f = FilesFrom::parse(b"a/b\nf\n", false).unwrap().recursing();
        for yes in ["a", "a/b", "a/b/c", "a/b/c/d", "f"] {
            assert!(f.wants(Path::new(yes)), "{yes}");
        }
        assert!(!f.wants(Path::new("a/x")) && !f.wants(Path::new("g")));
        let rules = crate::filter::Filter::from_rules(&f.walk_rules(0).unwrap()).unwrap();
        for (rel, dir, pruned) in
            [("a", true, false), ("a/b/c", true, false), ("a/b/c/d", false, false), ("a/x", true, true)]
        {
            assert_eq!(rules.prunes(Path::new(rel), dir), pruned, "{rel}");
        }
        // SRC itself named: everything.
        let all = FilesFrom::parse(b".\n", false).unwrap().recursing();
        assert!(all.wants(Path::new("any/thing")) && all.walk_rules(0) == Some(vec![]));
    }

    proptest! {
        /// Any bytes: no panic; whatever is wanted is below SRC (no `..`,
        /// not absolute), and every named entry's directories are wanted.
        #[test]
        fn anything_parses_to_paths_below_src(text in proptest::collection::vec(any::<u8>(), 0..256), nul: bool) {
            if let Ok(f) = FilesFrom::parse(&text, nul) {
                for p in f.all.named.iter().chain(&f.all.on_the_way).chain(&f.all.opened) {
                    prop_assert!(p.components().all(|c| matches!(c, Component::Normal(_))), "{p:?}");
                }
                for p in &f.all.named {
                    for a in p.ancestors() {
                        prop_assert!(f.wants(a));
                    }
                }
            }
        }
    }
}
