//! `ddftp get -i LIST`: aria2c's input-file form. A file per line: its
//! sources separated by tabs (URLs of the same file, or one path on the
//! `--mirrors`); options for it on the indented lines below (` out=NAME`,
//! ` dir=DIR`, ` checksum=sha-256=HEX`); `#` starts a comment line.
//!
//! A list may come from anywhere: `out=` and `dir=` must be relative paths
//! without `..` (they land under `-d` or the current directory), and an
//! entry that breaks a rule is kept with why, so the others still move.

/// One file the list asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its line (1-based), for messages.
    pub line: usize,
    /// URLs of the file, or one path on the mirrors.
    pub sources: Vec<String>,
    pub out: Option<String>,
    pub dir: Option<String>,
    /// `sha-256=HEX` (as `--checksum` takes it).
    pub checksum: Option<String>,
    /// Why this entry cannot be fetched, if it cannot.
    pub bad: Option<String>,
}

/// The entries of a list, and warnings about what it says that is ignored
/// (aria2c options ddftp does not take), each naming its line.
pub fn parse(text: &str) -> (Vec<Entry>, Vec<String>) {
    let mut entries: Vec<Entry> = vec![];
    let mut warnings = vec![];
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let trimmed = raw.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if raw.starts_with([' ', '\t']) {
            let Some(e) = entries.last_mut() else {
                warnings.push(format!("line {line}: an option before any file, ignored"));
                continue;
            };
            let Some((key, value)) = trimmed.split_once('=') else {
                warnings.push(format!("line {line}: {trimmed:?} is not KEY=VALUE, ignored"));
                continue;
            };
            let value = value.trim().to_string();
            match key.trim() {
                "out" => {
                    let why = relative(&value).err();
                    e.out = Some(value);
                    e.bad = e.bad.take().or(why.map(|w| format!("line {line}: out= {w}")));
                }
                "dir" => {
                    let why = relative(&value).err();
                    e.dir = Some(value);
                    e.bad = e.bad.take().or(why.map(|w| format!("line {line}: dir= {w}")));
                }
                "checksum" => e.checksum = Some(value),
                other => warnings.push(format!("line {line}: option {other:?} is not one ddftp takes, ignored")),
            }
            continue;
        }
        let sources: Vec<String> =
            trimmed.split('\t').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        entries.push(Entry { line, sources, out: None, dir: None, checksum: None, bad: None });
    }
    (entries, warnings)
}

/// Whether `p` is a relative path that stays below where it is put.
fn relative(p: &str) -> Result<(), &'static str> {
    if p.is_empty() {
        return Err("is empty");
    }
    if p.starts_with('/') {
        return Err("must be a relative path");
    }
    if p.split('/').any(|c| c == "..") {
        return Err("must not climb with ..");
    }
    if p.contains('\0') {
        return Err("holds a NUL byte");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn files_their_sources_and_options() {
        let list = "# two files\nhttp://a/x.iso\thttp://b/x.iso\n  out=y.iso\n  checksum=sha-256=00ff\n\ndata/z.bin\n\tdir=sub\n\tsplit=4\n";
        let (e, w) = parse(list);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].sources, ["http://a/x.iso", "http://b/x.iso"]);
        assert_eq!((e[0].out.as_deref(), e[0].checksum.as_deref()), (Some("y.iso"), Some("sha-256=00ff")));
        assert_eq!(
            (e[1].line, e[1].sources.clone(), e[1].dir.as_deref()),
            (6, vec!["data/z.bin".to_string()], Some("sub"))
        );
        assert_eq!(w, ["line 8: option \"split\" is not one ddftp takes, ignored"]);
    }

    #[test]
    fn an_entry_that_would_write_elsewhere_is_kept_with_why() {
        let (e, _) = parse("a\n out=../../etc/passwd\nb\n dir=/etc\nc\n");
        assert!(e[0].bad.as_deref().unwrap().contains("line 2: out= must not climb"));
        assert!(e[1].bad.as_deref().unwrap().contains("line 4: dir= must be a relative path"));
        assert_eq!(e[2].bad, None);
    }

    proptest! {
        #[test]
        fn any_text_gives_entries_that_stay_below(t in "\\PC{0,300}") {
            let (entries, _) = parse(&t);
            for e in entries {
                if e.bad.is_none() {
                    for p in e.out.iter().chain(&e.dir) {
                        prop_assert!(!p.starts_with('/') && !p.split('/').any(|c| c == ".."));
                    }
                }
            }
        }
    }
}
