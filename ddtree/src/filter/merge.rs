//! rsync's per-directory merge files (`dir-merge NAME`, `-F`'s
//! `.rsync-filter`): the rules a directory's NAME file holds apply to what
//! is below that directory, before the rules of the directories above it
//! (the nearest directory's first), all of them where the dir-merge rule
//! stands among the command line's. A pattern starting with `/` is
//! anchored at the file's directory; `!` (or `clear`) drops the rules
//! before it, those inherited from above too. The dir-merge rule's
//! modifiers say how the files are read ([`super::word::MergeHow`]: each
//! line a pattern, not inherited, sides).
//!
//! The files come from a mirror: each is bounded ([`MAX_FILE`]), as are the
//! rules of all of them together ([`MAX_RULES`]); a file that cannot be
//! taken (a rule rsync would refuse, a modifier or a nested merge not
//! supported, too large) makes its directory's contents unwanted (named
//! by the caller, not copied), never silently ignored: a rule left out
//! could copy what the user meant to keep private.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::word::{rule_lines, MergeHow, Word};
use super::{first, Filter, Rule, View};

/// Bytes one merge file may hold (a mirror does not read past it).
pub const MAX_FILE: usize = 64 << 10;
/// Rules all the merge files of one tree may hold together.
pub const MAX_RULES: usize = 100_000;

/// The rules of the merge files found, by directory below SRC.
#[derive(Debug, Default)]
pub struct DirRules {
    by_dir: HashMap<PathBuf, Dir>,
    /// Directories whose merge file could not be taken.
    bad: HashSet<PathBuf>,
    /// rsync's `n`: a directory's rules apply to what it holds only.
    no_inherit: bool,
}

#[derive(Debug)]
struct Dir {
    rules: Vec<Rule>,
    /// A `!` dropped what the directories above give.
    cleared: bool,
}

impl DirRules {
    pub(super) fn new(no_inherit: bool) -> DirRules {
        DirRules { no_inherit, ..Default::default() }
    }

    /// What the rules of the directories above `rel` say of it, the
    /// nearest first (`path`: `rel` as a string).
    pub(super) fn verdict(&self, view: View, rel: &Path, path: &str, is_dir: bool) -> Option<bool> {
        if self.by_dir.is_empty() {
            return None;
        }
        let up = if self.no_inherit { 1 } else { usize::MAX };
        for dir in rel.parent().into_iter().flat_map(Path::ancestors).take(up) {
            if let Some(d) = self.by_dir.get(dir) {
                if let Some(v) = first(&d.rules, view, path, is_dir) {
                    return Some(v);
                }
                if d.cleared {
                    break;
                }
            }
        }
        None
    }

    pub(super) fn is_bad(&self, dir: &Path) -> bool {
        !self.bad.is_empty() && self.bad.contains(dir)
    }
}

/// The rules of one merge file found in `dir` (below SRC, `/`-separated),
/// read as `how` says, and whether it clears what the directories above
/// give.
fn parse(text: &[u8], dir: &str, how: MergeHow) -> Result<(Vec<Rule>, bool), String> {
    if text.len() > MAX_FILE {
        return Err(format!("larger than {MAX_FILE} bytes"));
    }
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8 text".to_string())?;
    let (mut rules, mut cleared) = (vec![], false);
    for (n, line) in rule_lines(text) {
        for line in how.words(line) {
            let rule = match how.line(line).map_err(|why| format!("line {n}: {line:?}: {why}"))? {
                Word::Clear => {
                    rules.clear();
                    cleared = true;
                    continue;
                }
                Word::Rule(_, how, _) if how.xattr => {
                    return Err(format!(
                        "line {n}: {line:?}: an xattr (x) rule in a per-directory file is not supported"
                    ));
                }
                Word::Rule(include, how, p) => Rule::new(include, how, p, dir),
                Word::Merge(..) | Word::DirMerge(..) | Word::Cvs => {
                    let why = "a merge or -C inside a per-directory file is not supported";
                    return Err(format!("line {n}: {line:?}: {why}"));
                }
            };
            rules.push(rule.map_err(|e| format!("line {n}: {e}"))?);
        }
    }
    Ok((rules, cleared))
}

impl Filter {
    /// This filter with the rules of the merge files `files` (`(the
    /// file's path below SRC, its bytes or why they could not be read)`,
    /// each of a dir-merge rule's name); the files that could not be
    /// taken, and why (what is below their directory is then excluded).
    pub fn with_merge_files(&self, files: Vec<(PathBuf, Result<Vec<u8>, String>)>) -> (Filter, Vec<(PathBuf, String)>) {
        let mut merged = self.clone();
        let (mut failed, mut total) = (vec![], 0usize);
        let mut dirs: Vec<DirRules> = self.merges.iter().map(|m| DirRules::new(m.how.no_inherit)).collect();
        for (file, text) in files {
            let Some(k) = self.merges.iter().position(|m| file.file_name() == Some(m.name.as_ref())) else { continue };
            let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
            let shown = dir.to_string_lossy().into_owned();
            let parsed = text.and_then(|t| parse(&t, &shown, self.merges[k].how)).and_then(|(rules, cleared)| {
                total += rules.len();
                match total > MAX_RULES {
                    true => Err(format!("the merge files hold more than {MAX_RULES} rules")),
                    false => Ok(Dir { rules, cleared }),
                }
            });
            match parsed {
                Ok(d) => {
                    dirs[k].by_dir.insert(dir, d);
                }
                Err(why) => {
                    dirs[k].bad.insert(dir);
                    failed.push((file, why));
                }
            }
        }
        for (m, d) in merged.merges.iter_mut().zip(dirs) {
            m.dirs = Arc::new(d);
        }
        (merged, failed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::RuleSpec;
    use super::*;

    fn ex(f: &Filter, p: &str, dir: bool) -> bool {
        f.excludes(Path::new(p), dir, &mut HashMap::new())
    }

    fn merged(specs: &[RuleSpec], files: &[(&str, &str)]) -> (Filter, Vec<(PathBuf, String)>) {
        let f = Filter::new(specs).unwrap();
        let name = f.merge_names()[0].to_string();
        f.with_merge_files(files.iter().map(|(d, t)| (Path::new(d).join(&name), Ok(t.as_bytes().to_vec()))).collect())
    }

    #[test]
    fn a_directorys_rules_apply_below_it_nearest_first_where_the_dir_merge_stands() {
        let specs = [
            RuleSpec::Include("keep.log".into()),
            RuleSpec::Rule("dir-merge /.rsync-filter".into()),
            RuleSpec::Exclude("*.log".into()),
        ];
        let (f, bad) = merged(
            &specs,
            &[("", "- *.tmp\n- /top-only\n"), ("a", "# a's\n+ x.tmp\n- /sub/\n- keep.log\n"), ("a/b", "!\n- y\n")],
        );
        assert!(bad.is_empty(), "{bad:?}");
        assert_eq!(f.merge_names(), [".rsync-filter"]);
        assert!(ex(&f, "z.tmp", false) && ex(&f, "c/z.tmp", false), "the root's rules everywhere");
        assert!(!ex(&f, "a/x.tmp", false), "a's own rule first");
        assert!(ex(&f, "top-only", false) && !ex(&f, "a/top-only", false), "anchored at its directory");
        assert!(ex(&f, "a/sub", true) && ex(&f, "a/sub/f", false) && !ex(&f, "a/b/sub", true));
        assert!(!ex(&f, "a/keep.log", false), "the command line's rules before the dir-merge come first");
        assert!(ex(&f, "a/other.log", false), "and those after it last");
        assert!(!ex(&f, "a/b/z.tmp", false) && ex(&f, "a/b/y", false), "`!` drops what is above");
        assert_eq!(f.rules(), [(true, "keep.log".to_string())], "a mirror prunes with what comes first");
        assert_eq!(f.words(), ["+ keep.log", "dir-merge .rsync-filter", "- *.log"]);
    }

    #[test]
    fn a_file_that_cannot_be_taken_leaves_its_directory_out() {
        let specs = [RuleSpec::Rule(": .f".into())];
        let (f, bad) = merged(&specs, &[("a", "- ok\n-/ /etc/abs\n"), ("b", "- [\n"), ("c", "- fine\n")]);
        let bad: Vec<&str> = bad.iter().map(|(d, _)| d.to_str().unwrap()).collect();
        assert_eq!(bad, ["a/.f", "b/.f"]);
        assert!(!ex(&f, "a", true) && ex(&f, "a/anything", false) && ex(&f, "b/deep/x", false));
        assert!(ex(&f, "c/fine", false) && !ex(&f, "c/other", false));
        let big = "- x\n".repeat(MAX_FILE / 4 + 1);
        assert_eq!(merged(&specs, &[("", &big)]).1.len(), 1);
        assert!(Filter::new(&[RuleSpec::Rule(": a/b".into())]).is_err());
        assert!(Filter::new(&[RuleSpec::Rule(": x".into()), RuleSpec::Rule(": x".into())]).is_err());
    }

    #[test]
    fn a_merge_file_of_this_host_puts_its_rules_in_place_and_a_bang_clears() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::write(&a, format!("+ keep.tmp\n- *.tmp\n: .f\n. {}\n", b.display())).unwrap();
        std::fs::write(&b, "- x\n").unwrap();
        let spec = |s: String| RuleSpec::Rule(s);
        let f = Filter::new(&[spec(format!("merge {}", a.display())), RuleSpec::Exclude("y".into())]).unwrap();
        assert_eq!(f.words(), ["+ keep.tmp", "- *.tmp", "dir-merge .f", "- x", "- y"]);
        let f = Filter::new(&[RuleSpec::Exclude("z".into()), spec("!".into()), RuleSpec::Exclude("y".into())]).unwrap();
        assert_eq!(f.words(), ["- y"]);
        std::fs::write(&b, format!(". {}\n", b.display())).unwrap();
        assert!(Filter::new(&[spec(format!("merge {}", b.display()))]).is_err(), "a file merging itself");
    }

    #[test]
    fn sides_perishable_negation_and_how_a_merge_reads_its_files() {
        let spec = |r: &str| RuleSpec::Rule(r.into());
        let specs = [spec("P keep"), spec("H hidden"), spec("-p *.o"), spec(":-n .gitignore")];
        let (f, bad) = merged(&specs, &[("", "# c\n!\n*.log\n"), ("a", "x\n")]);
        assert!(bad.is_empty(), "{bad:?}");
        let (recv, gone) = (f.receiving(false), f.receiving(true));
        assert!(
            !ex(&f, "d/keep", false) && ex(&recv, "d/keep", false) && ex(&gone, "d/keep", false),
            "P: receiver only"
        );
        assert!(ex(&f, "hidden", false) && !ex(&recv, "hidden", false), "H: sender only");
        assert!(ex(&recv, "a.o", false) && !ex(&recv.in_deleted(), "a.o", false), "perishable");
        assert!(!ex(&gone, "x.log", false) && ex(&recv, "x.log", false), "--delete-excluded");
        assert!(ex(&f, "!", false) && ex(&f, "z.log", false), "`-` reads each line as a pattern");
        let f = Filter::new(&[spec("-! */")]).unwrap();
        assert!(ex(&f, "plain", false) && !ex(&f, "dir", true), "-! */: all but directories");
        let (f, _) = merged(&[spec(":-n .gitignore")], &[("", "*.log\n"), ("a", "x\n")]);
        assert!(ex(&f, "z.log", false) && !ex(&f, "a/z.log", false) && ex(&f, "a/x", false), "n: not inherited");
        let f = Filter::new(&[spec("+ k"), spec(":e .f"), spec("-! */"), spec("- y")]).unwrap();
        assert_eq!(f.rules(), [(true, "k".to_string()), (false, ".f".to_string())]);
        assert_eq!(f.words(), ["+ k", "- .f", "dir-merge .f", "-! */", "- y"]);
        let (f, _) = f.with_merge_files(vec![(PathBuf::from(".f"), Ok(b"+ .f\n".to_vec()))]);
        assert!(ex(&f, ".f", false), "e: before the file's own rules");
        let f = Filter::new(&[spec("P a"), spec("- b"), spec("-! c")]).unwrap();
        assert_eq!(f.rules(), [(false, "b".to_string())], "a mirror is sent the sender's rules up to a `!`");
        assert_eq!(f.words(), ["-r a", "- b", "-! c"]);
    }

    #[test]
    fn several_dir_merges_each_in_its_place_and_cvs_rules_last() {
        let spec = |r: &str| RuleSpec::Rule(r.into());
        let specs = [spec("+ keep.o"), spec(": .rsync-filter"), spec("- *.log"), spec(":C"), spec("-C")];
        let f = Filter::new(&specs).unwrap();
        assert_eq!(f.merge_names(), [".rsync-filter", ".cvsignore"]);
        let files = vec![
            (PathBuf::from(".rsync-filter"), Ok(b"+ a.log\n- *.tmp\n".to_vec())),
            (PathBuf::from("d/.cvsignore"), Ok(b"x.tmp y  a.log\n! z\n".to_vec())),
            (PathBuf::from("e/.cvsignore"), Ok(b"sub\n".to_vec())),
        ];
        let (f, bad) = f.with_merge_files(files);
        assert!(bad.is_empty(), "{bad:?}");
        assert!(!ex(&f, "keep.o", false) && ex(&f, "other.o", false) && ex(&f, "CVS", true));
        assert!(!ex(&f, "d/a.log", false), "the .rsync-filter's rules come before the .cvsignore's");
        assert!(ex(&f, "d/y.tmp", false) && ex(&f, "d/z", false) && !ex(&f, "d/y", false), "`!` clears");
        assert!(ex(&f, "e/sub", true) && !ex(&f, "e/f/sub", true), ":C's rules are not inherited");
        assert!(ex(&f, "b.log", false), "the command line's between the two");
        let words = f.words();
        assert_eq!(&words[..4], ["+ keep.o", "dir-merge .rsync-filter", "- *.log", "dir-merge,C .cvsignore"]);
        assert_eq!(words[4], "-p RCS");
        assert_eq!(f.rules(), [(true, "keep.o".to_string())]);
    }

    proptest::proptest! {
        /// Any bytes as a mirror's merge file: taken or refused, never a
        /// panic; a refused one excludes what is below its directory.
        #[test]
        fn any_merge_file_is_taken_or_its_directory_left_out(text in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200), path in "[a-z./]{0,20}", how in 0..3usize) {
            let f = Filter::new(&[RuleSpec::Rule([": .f", ":C .f", ":w .f"][how].into())]).unwrap();
            let (f, bad) = f.with_merge_files(vec![(PathBuf::from("d/.f"), Ok(text))]);
            let _ = ex(&f, &path, false);
            if !bad.is_empty() {
                proptest::prop_assert!(ex(&f, "d/x", false));
            }
        }
    }
}
