//! rsync's way of naming an archive's ends: `ddftp archive SRC... DEST`
//! (DEST last, without `--dest`) and `[USER@]HOST:DIR` as SRC, a host
//! reached over ssh (an `ssh://` mirror, see docs/ssh.md), or as DEST,
//! a host to push SRC to. As rsync:
//! `HOST:DIR` copies the directory DIR into DEST (DEST/NAME),
//! `HOST:DIR/` copies what is in it.

use std::path::{Path, PathBuf};

use ddftp::ssh::SshMirror;

/// What rsync's form says: the SRCs, DEST, and the ssh mirror if a SRC
/// named a host.
#[derive(Debug, PartialEq, Eq)]
pub struct Ends {
    pub src: Vec<String>,
    pub dest: PathBuf,
    pub mirror: Option<SshMirror>,
    /// DEST is `HOST:DIR`: SRC (local) is pushed there.
    pub push: Option<SshMirror>,
    /// DEST is the DEST given with SRC's name added (a directory SRC goes
    /// there; a file SRC into the DEST given).
    pub named: bool,
    /// DEST was given last (not `--dest`) and not as `DIR/`: a file SRC
    /// into a DEST that does not exist becomes DEST, as `rsync -a FILE
    /// NEWNAME` makes it.
    pub may_be_file: bool,
}

/// Whether `s` names a remote path as rsync reads it: a colon before any
/// slash (`host:dir`, `user@host:dir`), not a local path with a colon in
/// a later component.
fn is_remote(s: &str) -> bool {
    match (s.find(':'), s.find('/')) {
        (Some(c), Some(sl)) => c < sl && c > 0,
        (Some(c), None) => c > 0,
        _ => false,
    }
}

/// A SRC named twice is copied once, as rsync does (`a` and `a/` are
/// one SRC here: its content).
fn once_each(src: Vec<String>) -> Vec<String> {
    let key = |s: &str| match s.trim_end_matches('/') {
        "" => ".".to_string(),
        k => k.to_string(),
    };
    let mut seen = std::collections::HashSet::new();
    src.into_iter().filter(|s| seen.insert(key(s))).collect()
}

/// Reads `src` (and `dest`, if given) as rsync would; `mirrors`
/// tells whether `--mirrors` was given too.
#[cfg(test)]
pub fn ends(src: Vec<String>, dest: Option<&Path>, mirrors: bool) -> Result<Ends, String> {
    ends_as(src, dest, mirrors, false)
}

/// [`ends`], `relative` with rsync's `-R`: a `HOST:DIR` SRC is then a
/// path kept under DEST (from its `/./` on, or whole), served from the
/// filesystem's root (or the home directory, for a relative DIR).
pub fn ends_as(mut src: Vec<String>, dest: Option<&Path>, mirrors: bool, relative: bool) -> Result<Ends, String> {
    if dest.is_none() && src.len() >= 2 && src.last().is_some_and(|d| is_remote(d)) {
        let to = src.pop().expect("two or more");
        if src.iter().any(|s| is_remote(s)) {
            return Err("a push takes local SRCs only (ddftp archive SRC... HOST:DIR)".into());
        }
        if mirrors {
            return Err(format!("{to}: a push serves SRC from here; --mirrors has no place in it"));
        }
        let push = SshMirror::parse_rsync(&to)?;
        let dest = PathBuf::from(&push.dir);
        return Ok(Ends {
            src: once_each(src),
            dest,
            mirror: None,
            push: Some(push),
            named: false,
            may_be_file: false,
        });
    }
    let last = dest.is_none() && src.len() >= 2 && src.last().is_some_and(|d| !d.ends_with('/'));
    let may_be_file = last && src.len() == 2;
    let dest = match dest {
        Some(d) => d.to_path_buf(),
        None if src.len() >= 2 => PathBuf::from(src.pop().expect("two or more")),
        None => return Err("no DEST: give it last (rsync's form: ddftp archive HOST:DIR DEST) or as --dest DIR".into()),
    };
    let remote: Vec<&String> = src.iter().filter(|s| is_remote(s)).collect();
    if remote.is_empty() {
        return Ok(Ends { src: once_each(src), dest, mirror: None, push: None, named: false, may_be_file });
    }
    if remote.len() < src.len() || remote.len() > 1 {
        return Err("one HOST:DIR source at a time (its tree is copied from that host over ssh)".into());
    }
    if mirrors {
        return Err(format!(
            "{}: a HOST:DIR source names its mirror; with --mirrors, give SRC relative to the mirrors' root instead",
            remote[0]
        ));
    }
    if remote[0].contains("::") {
        return Err(format!(
            "{}: rsync daemon sources (HOST::MODULE) are not mirrors; give ssh://HOST/DIR or a ddftpd",
            remote[0]
        ));
    }
    let whole = SshMirror::parse_rsync(remote[0])?;
    if relative {
        let (root, path) = match (whole.dir.strip_prefix('/'), whole.dir.strip_prefix("~/")) {
            (Some(p), _) => ("/", p.to_string()),
            (_, Some(p)) => ("~", p.to_string()),
            _ => (".", whole.dir.clone()),
        };
        let path = if path.is_empty() { ".".to_string() } else { path };
        let mirror = SshMirror { dir: root.into(), ..whole };
        return Ok(Ends { src: vec![path], dest, mirror: Some(mirror), push: None, named: false, may_be_file: false });
    }
    // DIR/ (or the home directory itself): its content goes into DEST.
    let (dir, name) = match whole.dir.trim_end_matches('/') {
        d if whole.dir.ends_with('/') || d == "." || d.is_empty() || d == "~" => (whole.dir.clone(), None),
        d => match d.rsplit_once('/') {
            Some(("", n)) => ("/".to_string(), Some(n.to_string())),
            Some((parent, n)) => (parent.to_string(), Some(n.to_string())),
            None => (".".to_string(), Some(d.to_string())),
        },
    };
    let mirror = SshMirror { dir, ..whole };
    Ok(match name {
        Some(n) => {
            let dest = dest.join(&n);
            Ends { src: vec![n], dest, mirror: Some(mirror), push: None, named: true, may_be_file }
        }
        None => Ends { src: vec![".".into()], dest, mirror: Some(mirror), push: None, named: false, may_be_file },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_file_src_may_become_a_dest_given_last_without_a_slash() {
        let may = |src: &[&str], dest: Option<&Path>| ends(v(src), dest, true).unwrap().may_be_file;
        assert!(may(&["f", "/x/new"], None));
        assert!(!may(&["f", "/x/new/"], None), "NEWDIR/ is a directory");
        assert!(!may(&["f", "g", "/x/new"], None), "several SRCs go into a directory");
        assert!(!may(&["f"], Some(Path::new("/x/new"))), "--dest is a directory");
        assert!(ends(v(&["h:/srv/f", "/x/new"]), None, false).unwrap().may_be_file);
    }

    #[test]
    fn dest_is_the_last_argument_without_dest() {
        let e = ends(v(&["data", "/scratch/x"]), None, true).unwrap();
        assert_eq!((e.src, e.dest, e.mirror), (v(&["data"]), PathBuf::from("/scratch/x"), None));
        let e = ends(v(&["a", "b"]), Some(Path::new("/d")), true).unwrap();
        assert_eq!((e.src, e.dest), (v(&["a", "b"]), PathBuf::from("/d")));
        assert!(ends(v(&["data"]), None, true).is_err());
    }

    #[test]
    fn host_dir_copies_the_directory_and_host_dir_slash_its_content() {
        let e = ends(v(&["u@h:/srv/tree", "/d"]), None, false).unwrap();
        let m = e.mirror.unwrap();
        assert_eq!((m.user.as_deref(), m.host.as_str(), m.dir.as_str()), (Some("u"), "h", "/srv"));
        assert_eq!((e.src, e.dest), (v(&["tree"]), PathBuf::from("/d/tree")));
        let e = ends(v(&["h:/srv/tree/", "/d"]), None, false).unwrap();
        assert_eq!((e.mirror.unwrap().dir, e.src, e.dest), ("/srv/tree/".to_string(), v(&["."]), PathBuf::from("/d")));
        let e = ends(v(&["h:rel", "/d"]), None, false).unwrap();
        assert_eq!((e.mirror.unwrap().dir, e.src), (".".to_string(), v(&["rel"])));
        let e = ends(v(&["h:/top", "/d"]), None, false).unwrap();
        assert_eq!((e.mirror.unwrap().dir, e.src), ("/".to_string(), v(&["top"])));
        let e = ends(v(&["h:", "/d"]), None, false).unwrap();
        assert_eq!((e.mirror.unwrap().dir, e.src), (".".to_string(), v(&["."])));
    }

    #[test]
    fn a_src_named_twice_is_one() {
        let e = ends(v(&["a", "b", "a/", "b"]), Some(Path::new("/d")), true).unwrap();
        assert_eq!(e.src, v(&["a", "b"]));
    }

    #[test]
    fn a_remote_dest_is_a_push_of_local_srcs() {
        let e = ends(v(&["tree", "u@h:/srv"]), None, false).unwrap();
        assert_eq!((e.src, e.push.map(|p| (p.host, p.dir))), (v(&["tree"]), Some(("h".into(), "/srv".into()))));
        assert_eq!(ends(v(&["a", "b/", "a/", "h:/srv"]), None, false).unwrap().src, v(&["a", "b/"]));
        assert!(ends(v(&["a", "g:/b", "h:/srv"]), None, false).is_err());
        assert!(ends(v(&["g:/a", "h:/srv"]), None, false).is_err());
        assert!(ends(v(&["a", "h:/srv"]), None, true).is_err());
    }

    #[test]
    fn local_looking_paths_mixed_forms_and_daemons_are_told_apart() {
        // A colon after a slash: a local name, as rsync reads it.
        assert!(ends(v(&["dir/a:b", "/d"]), None, true).unwrap().mirror.is_none());
        assert!(ends(v(&["h:/a", "/d"]), None, true).is_err(), "with --mirrors");
        assert!(ends(v(&["h:/a", "g:/b", "/d"]), None, false).is_err());
        assert!(ends(v(&["h::mod", "/d"]), None, false).is_err());
        assert!(ends(v(&["-oProxyCommand=x:/a", "/d"]), None, false).is_err());
    }

    #[test]
    fn dash_r_serves_a_host_dir_from_the_root_and_keeps_its_path() {
        let e = ends_as(v(&["u@h:/var/./log/x", "/d"]), None, false, true).unwrap();
        assert_eq!((e.src, e.dest, e.named), (v(&["var/./log/x"]), PathBuf::from("/d"), false));
        assert_eq!(e.mirror.unwrap().dir, "/");
        let e = ends_as(v(&["h:data/run", "/d"]), None, false, true).unwrap();
        assert_eq!((e.src, e.mirror.unwrap().dir), (v(&["data/run"]), ".".to_string()));
    }
}
