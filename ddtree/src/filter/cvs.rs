//! rsync's `-C` (`--cvs-exclude`) rule: CVS's ignore list in its place.
//! The list is CVS's defaults (perishable, as rsync's: a directory being
//! deleted is emptied of them too), then the words of the user's
//! `~/.cvsignore` and of `$CVSIGNORE`; a `!` word drops the words before
//! it. Every word is an exclude pattern. Each directory's own
//! `.cvsignore` is the `:C` dir-merge rule's ([`super::word`]).

use std::path::Path;

/// CVS's defaults as rsync lists them.
pub const DEFAULTS: &str = "RCS SCCS CVS CVS.adm RCSLOG cvslog.* tags TAGS .make.state .nse_depinfo *~ #* .#* ,* \
                            _$* *$ *.old *.bak *.BAK *.orig *.rej .del-* *.a *.olb *.o *.obj *.so *.exe *.Z *.elc \
                            *.ln core .svn/ .git/ .hg/ .bzr/";

/// The global CVS excludes, as `(pattern, perishable)`, in order: the
/// defaults, `home`'s `.cvsignore` (if it has one) and `env` (the value
/// of `$CVSIGNORE`).
pub(super) fn global(home: Option<&Path>, env: Option<&str>) -> Result<Vec<(String, bool)>, String> {
    let mut list: Vec<(String, bool)> = vec![];
    let mut add = |text: &str, perishable: bool| {
        for w in text.split_ascii_whitespace() {
            match w {
                "!" => list.clear(),
                w => list.push((w.to_string(), perishable)),
            }
        }
    };
    add(DEFAULTS, true);
    if let Some(home) = home {
        let file = home.join(".cvsignore");
        match std::fs::read(&file) {
            Ok(text) => add(&String::from_utf8_lossy(&text), false),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", file.display())),
        }
    }
    add(env.unwrap_or_default(), false);
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_then_home_then_the_environment_and_a_bang_clears() {
        let list = global(None, None).unwrap();
        assert_eq!(list.len(), 36);
        assert!(list.iter().all(|(_, p)| *p), "the defaults are perishable");
        assert_eq!(list[0].0, "RCS");
        assert_eq!(list.last().unwrap().0, ".bzr/");
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(".cvsignore"), "*.log\n build/ ").unwrap();
        let list = global(Some(home.path()), Some("x ! y  z")).unwrap();
        assert_eq!(list, [("y".to_string(), false), ("z".to_string(), false)]);
        let list = global(Some(home.path()), None).unwrap();
        assert_eq!(&list[36..], [("*.log".to_string(), false), ("build/".to_string(), false)]);
        assert_eq!(global(Some(&home.path().join("none")), None).unwrap().len(), 36, "no file: none of its words");
    }

    proptest::proptest! {
        /// Any `$CVSIGNORE` is words, each an exclude the filter takes or
        /// refuses (named), never a panic.
        #[test]
        fn any_cvsignore_value_is_words_that_compile_or_are_refused(env in "[ -~\t]{0,60}") {
            let list = global(None, Some(&env)).unwrap();
            proptest::prop_assert!(list.iter().all(|(w, _)| !w.is_empty() && !w.contains(char::is_whitespace)));
            for (w, _) in &list {
                let _ = super::super::Filter::new(&[super::super::RuleSpec::Exclude(w.clone())]);
            }
        }
    }
}
