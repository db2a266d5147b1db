//! Which entries below SRC an archive takes by name: `--files-from`
//! (with `-r`, and rsync's `/./` bases) and `-R`/`--relative`'s SRCs,
//! read as rsync reads them ([`ddtree::files_from`]); the bases named
//! become the SRCs walked.

use std::path::{Path, PathBuf};

/// What of `archive`'s flags says which entries are named.
pub struct Naming<'a> {
    /// `--files-from FILE`.
    pub files_from: Option<&'a PathBuf>,
    /// `-0`.
    pub from0: bool,
    /// `--session-stdin`: a `-` list is the one a push sent.
    pub session_stdin: bool,
    /// `-R`.
    pub relative: bool,
    /// `-r` given.
    pub recursive: bool,
}

/// `--files-from FILE` (or `-R`'s SRCs, read as one), parsed; its `/./`
/// bases become the SRCs walked, below the SRC given.
pub fn files_from(o: &Naming<'_>, src: &mut Vec<String>) -> Result<Option<ddtree::files_from::FilesFrom>, String> {
    use ddtree::files_from::FilesFrom;
    let f = match (listed(o)?, o.relative) {
        // rsync's -r with --files-from: a directory named comes whole.
        (Some(f), _) => match o.recursive {
            true => f.recursing(),
            false => f,
        },
        // -R: the SRCs as a list, each whole, below the mirrors' root.
        (None, true) => {
            let names = src.join("\0");
            let f = FilesFrom::parse(names.as_bytes(), true).map_err(|e| format!("-R: {}: {}", e.path, e.why))?;
            *src = vec![".".into()];
            f.recursing()
        }
        (None, false) => return Ok(None),
    };
    let bases: Vec<&Path> = f.bases().collect();
    if bases.len() > 1 || bases.first().is_some_and(|b| !b.as_os_str().is_empty()) {
        if src.len() > 1 {
            return Err("--files-from with `/./` in its lines takes one SRC, the directory its names start from".into());
        }
        let root = src[0].trim_end_matches('/').to_string();
        let root = root.as_str();
        *src = bases
            .iter()
            .map(|b| match (root, b.to_string_lossy()) {
                (_, b) if b.is_empty() => root.to_string(),
                ("" | ".", b) => b.into_owned(),
                (r, b) => format!("{r}/{b}"),
            })
            .collect();
    }
    Ok(Some(f))
}

/// `--files-from FILE`, read and parsed (`-`: standard input; under
/// `--session-stdin`, the list the pushing end sent after its line).
fn listed(o: &Naming<'_>) -> Result<Option<ddtree::files_from::FilesFrom>, String> {
    let Some(path) = o.files_from else { return Ok(None) };
    let shown = |e: &dyn std::fmt::Display| format!("--files-from {}: {e}", path.display());
    let text = match o.session_stdin && path.as_os_str() == "-" {
        true => super::push::read_sent_list(&mut std::io::stdin().lock())?,
        false => read_list(path)?,
    };
    ddtree::files_from::FilesFrom::parse(&text, o.from0).map(Some).map_err(|e| shown(&e))
}

/// The bytes of a `--files-from` list (`-`: standard input, as rsync).
pub fn read_list(path: &Path) -> Result<Vec<u8>, String> {
    let read = match path.as_os_str() == "-" {
        true => {
            let mut all = vec![];
            std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut all).map(|_| all)
        }
        false => std::fs::read(path),
    };
    read.map_err(|e| format!("--files-from {}: {e}", path.display()))
}
