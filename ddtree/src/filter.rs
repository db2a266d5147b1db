//! `--exclude`, `--include`, `--exclude-from`: which entries below SRC an
//! archive moves (and, with `--delete`, may remove). The client applies
//! them to the list it gets; a mirror given them applies them as it walks,
//! so an excluded directory (`.snapshot`) is never read there.
//!
//! Rules are tried in the order given; the first whose pattern matches
//! decides. Patterns are gitignore-like globs on the path below SRC: `*`
//! and `?` stay within one name, `**` crosses directories, `[abc]` is a
//! class; a pattern with a `/` in it (other than at its end) is anchored
//! at SRC (a leading `/` is allowed), one without matches a name at any
//! depth; a trailing `/` matches directories only. An excluded directory
//! is not entered: nothing below it is moved or deleted, whatever later
//! rules say (as rsync).

use std::collections::HashMap;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};

/// A pattern that is not a valid glob, or a rules file that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{what} {pattern:?}: {why}")]
pub struct FilterError {
    pub what: &'static str,
    pub pattern: String,
    pub why: String,
}

#[derive(Debug, Clone)]
struct Rule {
    include: bool,
    dir_only: bool,
    matcher: GlobMatcher,
    /// As given (sent to a mirror as is).
    pattern: String,
}

/// The rules, in order.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    rules: Vec<Rule>,
}

/// Where a rule came from on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSpec {
    Exclude(String),
    Include(String),
    /// A file of rules: `- PATTERN` or a bare pattern excludes, `+ PATTERN`
    /// includes; blank lines and `#` comments are skipped.
    From(std::path::PathBuf),
}

impl Filter {
    pub fn new(specs: &[RuleSpec]) -> Result<Filter, FilterError> {
        let mut f = Filter::default();
        for s in specs {
            match s {
                RuleSpec::Exclude(p) => f.push(false, p)?,
                RuleSpec::Include(p) => f.push(true, p)?,
                RuleSpec::From(path) => {
                    let text = std::fs::read_to_string(path).map_err(|e| FilterError {
                        what: "--exclude-from",
                        pattern: path.display().to_string(),
                        why: e.to_string(),
                    })?;
                    for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty() && !l.starts_with('#')) {
                        match (line.strip_prefix("+ "), line.strip_prefix("- ")) {
                            (Some(p), _) => f.push(true, p)?,
                            (_, Some(p)) => f.push(false, p)?,
                            _ => f.push(false, line)?,
                        }
                    }
                }
            }
        }
        Ok(f)
    }

    fn push(&mut self, include: bool, pattern: &str) -> Result<(), FilterError> {
        let bad = |why: String| FilterError {
            what: if include { "--include" } else { "--exclude" },
            pattern: pattern.to_string(),
            why,
        };
        let dir_only = pattern.ends_with('/') && pattern.len() > 1;
        let p = pattern.trim_end_matches('/');
        if p.is_empty() {
            return Err(bad("an empty pattern matches nothing".into()));
        }
        let anchored = p.contains('/');
        let p = p.trim_start_matches('/');
        // Unanchored: the name at any depth.
        let glob = if anchored { p.to_string() } else { format!("**/{p}") };
        let matcher = GlobBuilder::new(&glob)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| bad(e.kind().to_string()))?
            .compile_matcher();
        self.rules.push(Rule { include, dir_only, matcher, pattern: pattern.to_string() });
        Ok(())
    }

    /// The rules as (include, pattern), in order: what a mirror is sent.
    pub fn rules(&self) -> Vec<(bool, String)> {
        self.rules.iter().map(|r| (r.include, r.pattern.clone())).collect()
    }

    /// The rules a client sent.
    pub fn from_rules(rules: &[(bool, String)]) -> Result<Filter, FilterError> {
        let mut f = Filter::default();
        for (include, pattern) in rules {
            f.push(*include, pattern)?;
        }
        Ok(f)
    }

    /// Whether a walk leaves `rel` out (neither listed nor entered): the
    /// first matching rule excludes it. Only its own verdict: a walk never
    /// gets below a directory it left out.
    pub fn prunes(&self, rel: &Path, is_dir: bool) -> bool {
        self.verdict(rel, is_dir) == Some(false)
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// What the first matching rule says of `rel` (a path below SRC):
    /// `Some(true)` include, `Some(false)` exclude, `None` no rule matches.
    fn verdict(&self, rel: &Path, is_dir: bool) -> Option<bool> {
        self.rules.iter().find(|r| (is_dir || !r.dir_only) && r.matcher.is_match(rel)).map(|r| r.include)
    }

    /// Whether `rel` is excluded: by a rule on it, or because a directory
    /// above it is. `dirs` caches the directories' verdicts (entries come
    /// grouped by directory).
    pub fn excludes(&self, rel: &Path, is_dir: bool, dirs: &mut HashMap<std::path::PathBuf, bool>) -> bool {
        if self.rules.is_empty() || rel.as_os_str().is_empty() {
            return false;
        }
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            if self.dir_excluded(parent, dirs) {
                return true;
            }
        }
        self.verdict(rel, is_dir) == Some(false)
    }

    fn dir_excluded(&self, dir: &Path, dirs: &mut HashMap<std::path::PathBuf, bool>) -> bool {
        if let Some(&v) = dirs.get(dir) {
            return v;
        }
        let up = dir.parent().filter(|p| !p.as_os_str().is_empty()).is_some_and(|p| self.dir_excluded(p, dirs));
        let v = up || self.verdict(dir, true) == Some(false);
        dirs.insert(dir.to_path_buf(), v);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(specs: &[(&str, bool)]) -> Filter {
        let specs: Vec<RuleSpec> = specs
            .iter()
            .map(|(p, inc)| if *inc { RuleSpec::Include(p.to_string()) } else { RuleSpec::Exclude(p.to_string()) })
            .collect();
        Filter::new(&specs).unwrap()
    }

    fn ex(f: &Filter, p: &str, dir: bool) -> bool {
        f.excludes(Path::new(p), dir, &mut HashMap::new())
    }

    #[test]
    fn names_anchors_dirs_and_first_match() {
        let flt =
            f(&[("keep.tmp", true), ("*.tmp", false), (".snapshot", false), ("scratch/", false), ("/top", false)]);
        assert!(ex(&flt, "a/b/x.tmp", false));
        assert!(!ex(&flt, "a/keep.tmp", false), "the first match wins");
        assert!(ex(&flt, ".snapshot", true) && ex(&flt, "a/.snapshot/f", false), "below an excluded dir");
        assert!(ex(&flt, "a/scratch", true) && !ex(&flt, "a/scratch", false), "dir-only");
        assert!(ex(&flt, "a/scratch/deep/f", false));
        assert!(ex(&flt, "top", false) && !ex(&flt, "a/top", false), "anchored");
        assert!(!ex(&flt, "a/b/x.txt", false));
    }

    #[test]
    fn double_star_crosses_directories_single_does_not() {
        let flt = f(&[("logs/**/*.gz", false), ("data/*.bin", false)]);
        assert!(ex(&flt, "logs/2026/11/a.gz", false) && ex(&flt, "logs/a.gz", false));
        assert!(ex(&flt, "data/x.bin", false) && !ex(&flt, "data/sub/x.bin", false));
        assert!(!ex(&flt, "x/logs/a.gz", false), "a pattern with / is anchored");
    }

    #[test]
    fn an_excluded_dir_is_not_entered_whatever_comes_after() {
        let flt = f(&[("cache", false), ("cache/keep", true)]);
        assert!(ex(&flt, "cache/keep", false));
        let flt = f(&[("cache/keep", true), ("cache/*", false)]);
        assert!(!ex(&flt, "cache/keep", false) && ex(&flt, "cache/other", false));
    }

    #[test]
    fn rules_files_and_bad_patterns() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("rules");
        std::fs::write(&p, "# comment\n\n+ important.log\n- *.log\nbuild/\n").unwrap();
        let flt = Filter::new(&[RuleSpec::From(p)]).unwrap();
        assert!(!ex(&flt, "important.log", false) && ex(&flt, "x/debug.log", false) && ex(&flt, "build", true));
        assert!(Filter::new(&[RuleSpec::Exclude("a[".into())]).is_err());
        assert!(Filter::new(&[RuleSpec::From("/nonexistent/rules".into())]).is_err());
    }
}
