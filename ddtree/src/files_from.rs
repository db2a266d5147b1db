//! `--files-from FILE`, in rsync's form: the paths below SRC to copy, one
//! a line (or NUL-separated with `--from0`); blank lines and lines starting
//! with `#` or `;` are comments; a leading `/` or `./` is dropped. Exactly
//! the entries named are copied, and the directories on their way: a
//! directory named is made, not entered (rsync without `-r`), unless it is
//! named with a trailing `/` (or `/.`): then the entries directly in it
//! come too (rsync's implied `--dirs`). Pure: the caller reads the file.

use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// The entries a `--files-from` list names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilesFrom {
    named: HashSet<PathBuf>,
    /// Every directory on the way to a named entry.
    on_the_way: HashSet<PathBuf>,
    /// Directories named with a trailing `/`: what is directly in them too.
    opened: HashSet<PathBuf>,
}

/// A line that names nothing below SRC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {path:?} {why}")]
pub struct BadLine {
    pub line: usize,
    pub path: String,
    pub why: &'static str,
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
            let mut rel = PathBuf::new();
            for c in Path::new(std::ffi::OsStr::from_bytes(raw)).components() {
                match c {
                    Component::Normal(name) => rel.push(name),
                    Component::RootDir | Component::CurDir => {}
                    Component::ParentDir => return Err(bad("goes up with `..`: name entries below SRC")),
                    Component::Prefix(_) => return Err(bad("is not a path")),
                }
            }
            if raw.ends_with(b"/") || raw.ends_with(b"/.") || raw == b"." {
                f.opened.insert(rel.clone());
            }
            if rel.as_os_str().is_empty() {
                // SRC itself, which is always made.
                continue;
            }
            let mut up = rel.parent();
            while let Some(d) = up.filter(|d| !d.as_os_str().is_empty()) {
                if !f.on_the_way.insert(d.to_path_buf()) {
                    break;
                }
                up = d.parent();
            }
            f.named.insert(rel);
        }
        Ok(f)
    }

    /// Whether the entry `rel` (below SRC; empty for SRC) is copied.
    pub fn wants(&self, rel: &Path) -> bool {
        rel.as_os_str().is_empty()
            || self.named.contains(rel)
            || self.on_the_way.contains(rel)
            || rel.parent().is_some_and(|d| self.opened.contains(d))
    }

    /// The entries named.
    pub fn named(&self) -> impl Iterator<Item = &Path> {
        self.named.iter().map(PathBuf::as_path)
    }

    /// Rules for a mirror's walk ([`crate::filter::Filter`]'s patterns,
    /// after the user's own) that keep it to what the list names and the
    /// directories on their way, so the rest of SRC is never read: each
    /// included, anchored at SRC, then everything else excluded. `None`
    /// if a name is not UTF-8 (no pattern can say it): the walk then
    /// reads all of SRC and the list is applied to what it sends.
    pub fn walk_rules(&self) -> Option<Vec<(bool, String)>> {
        let esc = |p: &Path| -> Option<String> {
            let s = p.to_str()?;
            let mut out = String::with_capacity(s.len() + 1);
            out.push('/');
            for c in s.chars() {
                if matches!(c, '*' | '?' | '[' | ']' | '{' | '}' | '\\') {
                    out.push('\\');
                }
                out.push(c);
            }
            Some(out)
        };
        let mut rules = vec![];
        for d in &self.on_the_way {
            rules.push((true, format!("{}/", esc(d)?)));
        }
        for n in &self.named {
            rules.push((true, esc(n)?));
        }
        for d in &self.opened {
            let inside = if d.as_os_str().is_empty() { "/*".to_string() } else { format!("{}/*", esc(d)?) };
            rules.push((true, inside));
        }
        rules.push((false, "*".into()));
        Some(rules)
    }

    /// How many entries the list names.
    pub fn len(&self) -> usize {
        self.named.len()
    }

    pub fn is_empty(&self) -> bool {
        self.named.is_empty()
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
        let rules = crate::filter::Filter::from_rules(&f.walk_rules().unwrap()).unwrap();
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
        assert!(bad.walk_rules().is_none());
    }

    proptest! {
        /// Any bytes: no panic; whatever is wanted is below SRC (no `..`,
        /// not absolute), and every named entry's directories are wanted.
        #[test]
        fn anything_parses_to_paths_below_src(text in proptest::collection::vec(any::<u8>(), 0..256), nul: bool) {
            if let Ok(f) = FilesFrom::parse(&text, nul) {
                for p in f.named.iter().chain(&f.on_the_way).chain(&f.opened) {
                    prop_assert!(p.components().all(|c| matches!(c, Component::Normal(_))), "{p:?}");
                }
                for p in &f.named {
                    for a in p.ancestors() {
                        prop_assert!(f.wants(a));
                    }
                }
            }
        }
    }
}
