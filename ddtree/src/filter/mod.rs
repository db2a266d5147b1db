//! `--exclude`, `--include`, `--exclude-from`: which entries below SRC an
//! archive moves (and, with `--delete`, may remove). The client applies
//! them to the list it gets; a mirror given them applies them as it walks,
//! so an excluded directory (`.snapshot`) is never read there.
//!
//! Rules are tried in the order given; the first whose pattern matches
//! decides. Patterns are rsync's, on the path below SRC: `*` and `?` stay
//! within one name, `**` matches anything, `/` included (`logs/**/*.gz`
//! needs a directory between, as in rsync), a trailing `dir/***` is the
//! directory and everything in it, `[abc]` and `[!abc]` are classes, `\`
//! quotes the next character. A pattern that starts with `/` is anchored
//! at SRC; any other matches the end of the path at any depth (`*.tmp` a
//! name anywhere, `deep/f1` also `a/b/deep/f1`: a user who excludes it
//! from a tree means it wherever it is); a trailing `/` matches
//! directories only. An excluded directory is not entered: nothing below
//! it is moved or deleted, whatever later rules say (as rsync).
//!
//! A pattern becomes a regular expression (the `regex` crate: matching
//! in time linear in the path, whatever a mirror's client sends).
//!
//! A rule may speak to one side only ([`word`]: `H`, `P`, `s`, `r`): a
//! filter judges as the sender (what is listed and copied) unless asked
//! for the receiver's view ([`Filter::receiving`]: what `--delete`
//! leaves).
//!
//! rsync's `dir-merge NAME` (`-F`: `.rsync-filter`) puts the rules of
//! each directory's NAME file where it stands among the others
//! ([`merge`]): the mirror reads those files as it walks and lists their
//! rules with them; it prunes only with the rules before that place.

pub mod cvs;
pub mod merge;
pub mod word;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use regex::Regex;

use word::{rule_lines, word, How, MergeHow, Side, Word};

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
    how: How,
    dir_only: bool,
    matcher: Regex,
    /// As given (sent to a mirror as is).
    pattern: String,
}

impl Rule {
    /// A rule of `pattern`; `dir` is the directory below SRC of the merge
    /// file it was read from (empty for the command line's): a pattern
    /// starting with `/` is anchored there, as rsync anchors it.
    fn new(include: bool, how: How, pattern: &str, dir: &str) -> Result<Rule, FilterError> {
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
        let anchored = p.starts_with('/');
        let mut p = p.trim_start_matches('/');
        // Unanchored, a leading `**/` also matches no directory (rsync's
        // `**/deep/*` takes `deep/f1`; anchored, `/**/deep/*` does not).
        while let Some(rest) = p.strip_prefix("**/").filter(|_| !anchored) {
            p = rest;
        }
        let body = translate(p).map_err(bad)?;
        // Unanchored: the end of the path, at any depth.
        let re = match (anchored, dir) {
            (true, "") => format!("^{body}$"),
            (true, dir) => format!("^{}/{body}$", regex::escape(dir)),
            (false, _) => format!("^(?:.*/)?{body}$"),
        };
        let matcher = regex::RegexBuilder::new(&re)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| bad(format!("too complex a pattern ({e})")))?;
        Ok(Rule { include, how, dir_only, matcher, pattern: pattern.to_string() })
    }

    /// Whether the rule holds for `path` (`!`: where the pattern does not
    /// match, rsync's `-! */` every entry but directories).
    fn matches(&self, path: &str, is_dir: bool) -> bool {
        ((is_dir || !self.dir_only) && self.matcher.is_match(path)) != self.how.negate
    }

    /// Whether the rule speaks to what `view` judges.
    fn heeded(&self, view: View) -> bool {
        let side = match self.how.side {
            // `--delete-excluded`: rules for both sides are the sender's.
            Side::Both => !(view.receiver && view.delete_excluded),
            Side::Sender => !view.receiver,
            Side::Receiver => view.receiver,
        };
        side && !(view.in_deleted && self.how.perishable)
    }

    /// The rule as rsync's `-f` takes it.
    fn word(&self) -> String {
        format!("{}{} {}", if self.include { '+' } else { '-' }, self.how.letters(), self.pattern)
    }
}

/// What the first of `rules` heeded by `view` and holding for `path` says.
fn first(rules: &[Rule], view: View, path: &str, is_dir: bool) -> Option<bool> {
    rules.iter().find(|r| r.heeded(view) && r.matches(path, is_dir)).map(|r| r.include)
}

/// Which rules a filter heeds: the sender's (what is listed and copied,
/// the default) or the receiver's (what `--delete` leaves).
#[derive(Debug, Clone, Copy, Default)]
struct View {
    receiver: bool,
    /// `--delete-excluded`: what an excluded entry is, DEST's copy goes.
    delete_excluded: bool,
    /// Inside a directory being deleted: perishable rules not heeded.
    in_deleted: bool,
}

/// The rules, in order.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    rules: Vec<Rule>,
    /// rsync's `x` rules: of xattr names, in order.
    xattr_rules: Vec<Rule>,
    /// rsync's `dir-merge` rules, in order.
    merges: Vec<Merge>,
    view: View,
}

/// rsync's `dir-merge NAME`: where among the rules each directory's NAME
/// file's rules go (the rules before it decide first), and how its files
/// are read.
#[derive(Debug, Clone)]
struct Merge {
    at: usize,
    name: String,
    how: MergeHow,
    /// The rules of the NAME files found, by directory.
    dirs: Arc<merge::DirRules>,
}

/// Where a rule came from on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSpec {
    Exclude(String),
    Include(String),
    /// A file of rules: `- PATTERN` or a bare pattern excludes, `+ PATTERN`
    /// includes; blank lines and `#` or `;` comments are skipped.
    From(std::path::PathBuf),
    /// `--include-from`: the same, a bare pattern including.
    IncludeFrom(std::path::PathBuf),
    /// `-f`/`--filter`: one rule as rsync writes it ([`word`]): `-
    /// PATTERN`, `+ PATTERN`, `H`, `S`, `P`, `R` and their modifiers,
    /// `!` (drop the rules so far), `merge FILE` (`. FILE`: the rules a
    /// file of this host holds, one a line) or `dir-merge NAME` (`: NAME`,
    /// [`merge`]).
    Rule(String),
}

impl Filter {
    pub fn new(specs: &[RuleSpec]) -> Result<Filter, FilterError> {
        let mut f = Filter::default();
        for s in specs {
            match s {
                RuleSpec::Exclude(p) => f.push(false, p)?,
                RuleSpec::Include(p) => f.push(true, p)?,
                RuleSpec::From(path) => f.push_file(path, false)?,
                RuleSpec::IncludeFrom(path) => f.push_file(path, true)?,
                RuleSpec::Rule(r) => f.push_rule(r, 0)?,
            }
        }
        Ok(f)
    }

    /// One `-f` rule as rsync writes it; `depth`: merge files this one is
    /// read from (a file merging itself is refused, not followed forever).
    fn push_rule(&mut self, r: &str, depth: u8) -> Result<(), FilterError> {
        let w = word(r).map_err(|why| refused(r, &why))?;
        self.push_word(w, r, depth)
    }

    fn push_word(&mut self, w: Word, r: &str, depth: u8) -> Result<(), FilterError> {
        match w {
            // rsync's: the rules so far are dropped (dir-merges among them too).
            Word::Clear => (self.rules, self.xattr_rules, self.merges) = (vec![], vec![], vec![]),
            Word::Rule(include, how, p) if how.xattr => self.xattr_rules.push(Rule::new(include, how, p, "")?),
            Word::Rule(include, how, p) => self.rules.push(Rule::new(include, how, p, "")?),
            Word::DirMerge(how, name) => {
                // rsync's `/` before NAME: looked for from SRC down, as without.
                let name = name.trim_start_matches('/');
                if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                    return Err(refused(r, "dir-merge takes a file name (no directory)"));
                }
                if self.merges.iter().any(|m| m.name == name) {
                    return Err(refused(r, "a second dir-merge rule of the same name"));
                }
                // `e`: before the directories' rules, as rsync (a file's
                // own `+ NAME` does not bring it back).
                if how.exclude_self {
                    self.rules.push(Rule::new(false, how.rules, name, "")?);
                }
                let dirs = Arc::new(merge::DirRules::new(how.no_inherit));
                self.merges.push(Merge { at: self.rules.len(), name: name.to_string(), how, dirs });
            }
            Word::Cvs => {
                let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
                let env = std::env::var("CVSIGNORE").ok();
                let list = cvs::global(home.as_deref(), env.as_deref()).map_err(|why| refused(r, &why))?;
                for (p, perishable) in list {
                    self.rules.push(Rule::new(false, How { perishable, ..How::default() }, &p, "")?);
                }
            }
            Word::Merge(how, file) => {
                if depth >= 8 {
                    return Err(refused(r, "merge files nested more than 8 deep (one merging itself?)"));
                }
                let text = std::fs::read_to_string(file).map_err(|e| refused(r, &e.to_string()))?;
                if how.exclude_self {
                    let name = Path::new(file).file_name().map(|n| n.to_string_lossy().into_owned());
                    self.rules.push(Rule::new(false, how.rules, &name.unwrap_or_default(), "")?);
                }
                for (n, line) in rule_lines(&text) {
                    for line in how.words(line) {
                        let w = how.line(line).map_err(|why| refused(r, &format!("{file} line {n}: {why}")))?;
                        self.push_word(w, line, depth + 1)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The rules of a file: `+ `/`- ` prefixes as rsync reads them, a bare
    /// pattern including when `include`.
    fn push_file(&mut self, path: &Path, include: bool) -> Result<(), FilterError> {
        let what = if include { "--include-from" } else { "--exclude-from" };
        let text = std::fs::read_to_string(path).map_err(|e| FilterError {
            what,
            pattern: path.display().to_string(),
            why: e.to_string(),
        })?;
        for (_, line) in rule_lines(&text) {
            match (line.strip_prefix("+ "), line.strip_prefix("- ")) {
                (Some(p), _) => self.push(true, p)?,
                (_, Some(p)) => self.push(false, p)?,
                _ => self.push(include, line)?,
            }
        }
        Ok(())
    }

    fn push(&mut self, include: bool, pattern: &str) -> Result<(), FilterError> {
        self.rules.push(Rule::new(include, How::default(), pattern, "")?);
        Ok(())
    }

    /// The sender's rules as (include, pattern), in order: what a mirror
    /// is sent to prune its walk with. Those before the first it could
    /// not take as they are: a dir-merge (a directory's own rules come
    /// before the others) or a `!` rule; a prefix prunes nothing the
    /// whole list would keep (the first rule that matches decides).
    pub fn rules(&self) -> Vec<(bool, String)> {
        let at = self.merges.first().map_or(self.rules.len(), |m| m.at);
        let sender = View::default();
        self.rules[..at]
            .iter()
            .filter(|r| r.heeded(sender))
            .take_while(|r| !r.how.negate)
            .map(|r| (r.include, as_sent(&r.pattern)))
            .collect()
    }

    /// Every rule as rsync's `-f` takes it, in order (what a push passes on).
    pub fn words(&self) -> Vec<String> {
        let mut v: Vec<String> = self.rules.iter().map(Rule::word).collect();
        // The last first: each goes before those it came before.
        for m in self.merges.iter().rev() {
            // `e` is among the rules already.
            let letters = MergeHow { exclude_self: false, ..m.how }.letters();
            let comma = if letters.is_empty() { "" } else { "," };
            v.insert(m.at, format!("dir-merge{comma}{letters} {}", m.name));
        }
        // Apart from the others: they speak of other names.
        v.extend(self.xattr_rules.iter().map(Rule::word));
        v
    }

    /// This filter as the receiver heeds it, for what `--delete` leaves:
    /// rules for both sides (unless `delete_excluded`) and the receiver's
    /// (`P`, `R`, `r`).
    pub fn receiving(&self, delete_excluded: bool) -> Filter {
        Filter { view: View { receiver: true, delete_excluded, in_deleted: false }, ..self.clone() }
    }

    /// Inside a directory being deleted: perishable rules not heeded.
    pub fn in_deleted(&self) -> Filter {
        Filter { view: View { in_deleted: true, ..self.view }, ..self.clone() }
    }

    /// The names of the files whose rules each directory adds (`-F`:
    /// `.rsync-filter`, `-C`: `.cvsignore`), one a dir-merge rule.
    pub fn merge_names(&self) -> Vec<&str> {
        self.merges.iter().map(|m| m.name.as_str()).collect()
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
        self.rules.is_empty() && self.merges.is_empty()
    }

    /// Whether `x` rules were given (rsync's: they replace its default
    /// choice of namespaces).
    pub fn has_xattr_rules(&self) -> bool {
        !self.xattr_rules.is_empty()
    }

    /// Whether the xattr `name` is copied (the copying side's `x`
    /// rules; the first that matches decides, none: copied).
    pub fn copies_xattr(&self, name: &[u8]) -> bool {
        self.xattr_verdict(View::default(), name) != Some(false)
    }

    /// Whether DEST's xattr `name` may be removed or changed (the
    /// receiving side's `x` rules: `-xr *` leaves every one).
    pub fn touches_xattr(&self, name: &[u8]) -> bool {
        self.xattr_verdict(View { receiver: true, ..View::default() }, name) != Some(false)
    }

    fn xattr_verdict(&self, view: View, name: &[u8]) -> Option<bool> {
        if self.xattr_rules.is_empty() {
            return None;
        }
        first(&self.xattr_rules, view, &String::from_utf8_lossy(name), false)
    }

    /// Whether a merge file in `dir` could not be taken.
    fn is_bad(&self, dir: &Path) -> bool {
        self.merges.iter().any(|m| m.dirs.is_bad(dir))
    }

    /// What the first matching rule says of `rel` (a path below SRC):
    /// `Some(true)` include, `Some(false)` exclude, `None` no rule matches.
    /// A dir-merge's place holds the rules of the directories above
    /// `rel`, the nearest first (rsync's order).
    fn verdict(&self, rel: &Path, is_dir: bool) -> Option<bool> {
        let (path, view) = (rel.to_string_lossy(), self.view);
        let mut from = 0;
        for m in &self.merges {
            let v = first(&self.rules[from..m.at], view, &path, is_dir);
            if let Some(v) = v.or_else(|| m.dirs.verdict(view, rel, &path, is_dir)) {
                return Some(v);
            }
            from = m.at;
        }
        first(&self.rules[from..], view, &path, is_dir)
    }

    /// Whether `rel` is excluded: by a rule on it, or because a directory
    /// above it is. `dirs` caches the directories' verdicts (entries come
    /// grouped by directory).
    pub fn excludes(&self, rel: &Path, is_dir: bool, dirs: &mut HashMap<std::path::PathBuf, bool>) -> bool {
        if self.is_empty() || rel.as_os_str().is_empty() {
            return false;
        }
        if let Some(parent) = rel.parent() {
            if (!parent.as_os_str().is_empty() && self.dir_excluded(parent, dirs)) || self.is_bad(parent) {
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
        // A directory whose merge file could not be taken: what it holds
        // is not known to be wanted.
        let v = up || self.verdict(dir, true) == Some(false) || self.is_bad(dir);
        dirs.insert(dir.to_path_buf(), v);
        v
    }
}

/// Whether rsync reads `p` as a wildcard pattern (`\\` then quotes), not
/// as a plain string.
fn wild(p: &str) -> bool {
    p.contains(['*', '?', '['])
}

/// `name` as an rsync pattern matching exactly it: wildcards quoted, a
/// `\\` as a class (`[\\]`), which reads the same whichever way a `\\` is
/// taken (an older mirror quoted with it always).
pub fn quoted(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        match c {
            '*' | '?' | '[' => out.extend(['\\', c]),
            '\\' => out.push_str("[\\\\]"),
            c => out.push(c),
        }
    }
    out
}

/// A pattern as a mirror is sent it: one without a wildcard keeps its
/// `\\` as itself, however the mirror reads them.
fn as_sent(p: &str) -> String {
    match wild(p) || !p.contains('\\') {
        true => p.to_string(),
        false => p.replace('\\', "[\\\\]"),
    }
}

fn refused(r: &str, why: &str) -> FilterError {
    FilterError { what: "--filter", pattern: r.to_string(), why: why.to_string() }
}

/// An rsync pattern (no leading `/`, no trailing `/`) as the body of a
/// regular expression.
fn translate(p: &str) -> Result<String, String> {
    // rsync: without a wildcard, a plain string (a `\` is itself).
    if !wild(p) {
        return Ok(regex::escape(p));
    }
    // `dir/***`: the directory itself and everything below it.
    let (p, below) = match p.strip_suffix("/***") {
        Some(d) => (d, "(?:/.*)?"),
        None => (p, ""),
    };
    let mut out = String::with_capacity(p.len() * 2);
    let mut chars = p.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '*' if chars.peek() == Some(&'*') => {
                while chars.peek() == Some(&'*') {
                    chars.next();
                }
                out.push_str(".*");
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '\\' => match chars.next() {
                Some(n) => out.push_str(&regex::escape(&n.to_string())),
                None => return Err("ends with a backslash".into()),
            },
            '[' => {
                let mut class = String::new();
                if matches!(chars.peek(), Some('!' | '^')) {
                    chars.next();
                    class.push('^');
                }
                let mut first = true;
                loop {
                    match chars.next() {
                        None => return Err("a [ class is not closed".into()),
                        Some(']') if !first => break,
                        Some('[') if chars.peek() == Some(&':') => {
                            // A POSIX class, [:alpha:], as it is.
                            class.push('[');
                            loop {
                                match chars.next() {
                                    None => return Err("a [: class is not closed".into()),
                                    Some(']') => break,
                                    Some(x) => class.push(x),
                                }
                            }
                            class.push(']');
                        }
                        Some(x @ ('\\' | '[' | ']' | '^' | '&' | '~' | '-')) if x != '-' || first => {
                            class.push('\\');
                            class.push(x);
                        }
                        Some(x) => class.push(x),
                    }
                    first = false;
                }
                // A class never matches the separator.
                out.push_str(&format!("[[^/]&&[{class}]]"));
            }
            c => out.push_str(&regex::escape(&c.to_string())),
        }
    }
    out.push_str(below);
    Ok(out)
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
        assert!(ex(&flt, "logs/2026/11/a.gz", false) && !ex(&flt, "logs/a.gz", false), "as rsync");
        assert!(ex(&flt, "data/x.bin", false) && !ex(&flt, "data/sub/x.bin", false));
        assert!(ex(&flt, "x/logs/2026/a.gz", false), "a pattern with / matches at any depth, as rsync");
        let flt = f(&[("/tmp/***", false), ("a\\*b", false), ("[!x]y", false), ("[[:digit:]]z", false)]);
        assert!(ex(&flt, "tmp", true) && ex(&flt, "tmp/a/b", false) && !ex(&flt, "tmpx", false));
        assert!(ex(&flt, "a*b", false) && !ex(&flt, "axb", false));
        assert!(ex(&flt, "ay", false) && !ex(&flt, "xy", false) && ex(&flt, "d/ay", false));
        assert!(ex(&flt, "7z", false) && !ex(&flt, "qz", false));
        // rsync's answers for these (checked against rsync itself).
        let flt = f(&[("**/a/f1", false)]);
        assert!(ex(&flt, "a/f1", false) && ex(&flt, "x/a/f1", false) && !ex(&flt, "a/b/f1", false));
        let flt = f(&[("/**/a/f1", false)]);
        assert!(!ex(&flt, "a/f1", false) && ex(&flt, "x/a/f1", false));
        let flt = f(&[("a/**/f1", false)]);
        assert!(!ex(&flt, "a/f1", false) && ex(&flt, "a/b/f1", false) && !ex(&flt, "x/a/f1", false));
        let flt = f(&[("a/**", false)]);
        assert!(ex(&flt, "x/a/f1", false) && !ex(&flt, "f1", false));
        let flt = f(&[("/logs/*.gz", false), ("deep/f1", false)]);
        assert!(ex(&flt, "logs/a.gz", false) && !ex(&flt, "x/logs/a.gz", false), "a leading / anchors");
        assert!(ex(&flt, "deep/f1", false) && ex(&flt, "a/b/deep/f1", false) && !ex(&flt, "a/deep/f1x", false));
        assert!(!ex(&flt, "adeep/f1", false), "at a name's start only");
    }

    #[test]
    fn an_excluded_dir_is_not_entered_whatever_comes_after() {
        let flt = f(&[("cache", false), ("cache/keep", true)]);
        assert!(ex(&flt, "cache/keep", false));
        let flt = f(&[("/cache/keep", true), ("/cache/*", false)]);
        assert!(!ex(&flt, "cache/keep", false) && ex(&flt, "cache/other", false));
    }

    proptest::proptest! {
        /// Any pattern a client sends is refused or compiled, and any path
        /// is then matched without a panic; a pattern of plain characters
        /// matches itself.
        #[test]
        fn any_pattern_compiles_or_is_refused(p in "[ -~]{0,40}", path in "[ -~]{0,60}", name in "[a-z0-9._-]{1,12}") {
            if let Ok(flt) = Filter::new(&[RuleSpec::Exclude(p)]) {
                let _ = ex(&flt, &path, false);
                let _ = ex(&flt, &path, true);
            }
            let flt = Filter::new(&[RuleSpec::Exclude(name.clone())]).unwrap();
            let below = format!("d/{}", name);
            proptest::prop_assert!(ex(&flt, &name, false) && ex(&flt, &below, false));
        }
    }

    #[test]
    fn a_quoted_name_matches_itself_only_and_a_plain_backslash_is_itself() {
        for name in ["plain", "a*b", "q?[x]", "back\\slash", "x]{y}", "\\*"] {
            let f = Filter::from_rules(&[(false, format!("/{}", quoted(name)))]).unwrap();
            assert!(f.prunes(Path::new(name), false), "{name}");
            assert!(!f.prunes(Path::new("other"), false) && !f.prunes(Path::new("backslash"), false));
        }
        let flt = f(&[("a\\b", false)]);
        assert!(ex(&flt, "a\\b", false) && !ex(&flt, "ab", false), "rsync: no wildcard, no quoting");
        let sent = Filter::from_rules(&flt.rules()).unwrap();
        assert!(ex(&sent, "a\\b", false) && !ex(&sent, "ab", false));
        assert_eq!(flt.rules(), [(false, "a[\\\\]b".to_string())]);
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
