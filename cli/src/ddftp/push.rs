//! Pushing: `ddftp archive SRC [USER@]HOST:DIR`. The local end serves SRC
//! ([`ddftpd::session`]: a free port, TLS with a certificate made for
//! this push, a token made for it) and runs `ddftp archive` on the host
//! over ssh, the consumer there connecting back; the serving end's line
//! goes to it on ssh's standard input (never on a command line another
//! user could read). The remote archive's summary and exit code are the
//! push's; the local server stops when ssh ends.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use ddftp::ssh::SshMirror;

use super::{report_error, Exit};

/// What this end serves and the remote end runs.
#[derive(Debug, PartialEq, Eq)]
struct Ends {
    /// The directory served.
    root: PathBuf,
    /// Only this of it shown (a file's name, `-R`'s path), if not all.
    only: Option<PathBuf>,
    /// The remote end's SRC, below `root`.
    src: String,
    /// The remote end's DEST.
    dest: String,
}

/// What the remote end runs: its SRC (below what this end serves) and
/// its DEST, as rsync places a SRC under HOST:DIR; with `-R`
/// (`relative`), the path kept below DIR as rsync keeps it (from a `/./`
/// on, else all of it).
fn ends(src: &str, dir: &str, relative: bool) -> Result<Ends, String> {
    let into = if dir.is_empty() { ".".to_string() } else { dir.to_string() };
    if relative {
        return relative_ends(src, into);
    }
    let path = Path::new(src);
    let full = path.canonicalize().map_err(|e| format!("{src}: {e}"))?;
    let under = |name: &str| match dir.trim_end_matches('/') {
        "" if dir.starts_with('/') => format!("/{name}"),
        "" => name.to_string(),
        d => format!("{d}/{name}"),
    };
    if src.ends_with('/') || !full.is_dir() && full.parent().is_none() {
        return Ok(Ends { root: full, only: None, src: ".".into(), dest: into });
    }
    let name = full.file_name().ok_or_else(|| format!("{src}: names no entry"))?.to_string_lossy().into_owned();
    // A directory is served itself (the host is shown nothing beside it),
    // its content going into DIR/NAME; a file from its directory (only
    // it shown), into DIR.
    if full.is_dir() {
        return Ok(Ends { root: full, only: None, src: ".".into(), dest: under(&name) });
    }
    let root = full.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/"));
    Ok(Ends { root, only: Some(PathBuf::from(&name)), src: name, dest: into })
}

/// `-R`'s ends: served from where the kept path starts (the `/./`, else
/// `/` or the working directory), only that path shown.
fn relative_ends(src: &str, dest: String) -> Result<Ends, String> {
    let (base, kept) = match src.split_once("/./") {
        Some((b, k)) => (if b.is_empty() { "/" } else { b }, k),
        None if src.starts_with('/') => ("/", src.trim_start_matches('/')),
        None => (".", src),
    };
    let kept = kept.trim_end_matches('/');
    if Path::new(kept)
        .components()
        .any(|c| !matches!(c, std::path::Component::Normal(_) | std::path::Component::CurDir))
    {
        return Err(format!("-R {src}: a `..` in the kept path is not supported in a push (rsync keeps it); name it from a `/./` after it"));
    }
    let root = Path::new(base).canonicalize().map_err(|e| format!("{src}: {base}: {e}"))?;
    if kept.is_empty() || kept == "." {
        return Ok(Ends { root, only: None, src: ".".into(), dest });
    }
    std::fs::symlink_metadata(root.join(kept)).map_err(|e| format!("{src}: {e}"))?;
    Ok(Ends { root, only: Some(PathBuf::from(kept)), src: kept.to_string(), dest })
}

/// How a push runs: the flags the remote archive is given, the remote
/// shell and the remote ddftp.
pub struct How<'a> {
    pub flags: Vec<String>,
    /// `--files-from`'s list (read here): sent after the serving end's
    /// line, the remote archive given `--files-from -`.
    pub list: Option<Vec<u8>>,
    pub rsh: &'a str,
    pub remote_ddftp: &'a str,
    /// `--via-ssh`: the remote end connects back through a port ssh
    /// forwards to this end's (`ssh -R`), not to this host's address.
    pub via_ssh: bool,
    /// `-R`: SRC's path kept below DIR ([`relative_ends`]).
    pub relative: bool,
}

/// A port on the host's loopback for `ssh -R` to forward (one in use
/// makes ssh fail, saying so: the push can be run again).
fn forwarded_port() -> u16 {
    rand::Rng::gen_range(&mut rand::thread_rng(), 20_000..60_000)
}

/// Pushes each of `srcs` to `to` in turn, as rsync places several SRCs
/// in one DIR (one ssh session each; a SRC that fails does not stop the
/// others): the one exit when all ended alike, else [`Exit::Partial`].
pub fn run_each(srcs: &[String], to: &SshMirror, how: &How<'_>) -> Exit {
    let exits: Vec<Exit> = srcs.iter().map(|src| run(src, to, how)).collect();
    combined(&exits)
}

/// The exit of several pushes: the first failure's where none worked.
fn combined(exits: &[Exit]) -> Exit {
    let failed: Vec<Exit> = exits.iter().copied().filter(|&e| e != Exit::Ok).collect();
    match failed.first() {
        None => Exit::Ok,
        Some(&e) if failed.len() == exits.len() => e,
        Some(_) => Exit::Partial,
    }
}

/// Pushes `src` to `to` (its `dir` the remote DIR).
pub fn run(src: &str, to: &SshMirror, how: &How<'_>) -> Exit {
    // With --files-from, SRC is where the listed names start (as rsync:
    // never a directory of its own name under DIR).
    let src = match (&how.list, src.ends_with('/')) {
        (Some(_), false) => format!("{src}/"),
        _ => src.to_string(),
    };
    // With --files-from the names are kept as they are (rsync's -R).
    let Ends { root, only, src: name, dest } = match ends(&src, &to.dir, how.relative && how.list.is_none()) {
        Ok(e) => e,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    let rsh = match ddftp::ssh::split_rsh(how.rsh) {
        Ok(r) => r,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    let flags = &how.flags;
    let rt = match super::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&e);
            return Exit::Local;
        }
    };
    rt.block_on(async {
        let family = to.host.parse::<IpAddr>().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let only = only.map(|p| ddftpd::only::Only::new([p]));
        let session = match ddftpd::session::Session::start(&root, family, false, only).await {
            Ok(s) => s,
            Err(e) => {
                report_error(&format_args!("cannot serve {}: {e}", root.display()));
                return Exit::Local;
            }
        };
        let (line, forward) = match (how.via_ssh, session.port()) {
            (_, Err(e)) => {
                report_error(&e);
                return Exit::Local;
            }
            // The remote end connects to its own loopback, ssh carrying it
            // here (to this end's loopback, of the family it listens on).
            (true, Ok(port)) => {
                let there = forwarded_port();
                let here = if family.is_ipv6() { "[::1]" } else { "127.0.0.1" };
                (session.announce_at("127.0.0.1", there), Some(format!("127.0.0.1:{there}:{here}:{port}")))
            }
            (false, Ok(port)) => (session.announce_at("-", port), None),
        };
        let mut words: Vec<&str> = vec![how.remote_ddftp, "archive", "--session-stdin"];
        words.extend(flags.iter().map(String::as_str));
        words.extend(["-d", &dest, "--", &name]);
        let opts: Vec<&str> = match &forward {
            Some(spec) => vec!["-o", "ExitOnForwardFailure=yes", "-R", spec],
            None => vec![],
        };
        let mut cmd = to.remote_with(&rsh, &opts, &words);
        cmd.stdin(Stdio::piped()).stdout(Stdio::inherit()).stderr(Stdio::inherit());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                report_error(&format_args!("cannot run {}: {e}", rsh[0]));
                return Exit::Usage;
            }
        };
        // The line, and standard input kept open while the push runs.
        let mut stdin = child.stdin.take().expect("piped");
        let _ = writeln!(stdin, "{line}").and_then(|()| send_list(&mut stdin, how.list.as_deref()));
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let waiting = tokio::task::spawn_blocking(move || {
            let status = child.wait();
            let _ = done_tx.send(());
            drop(stdin);
            status
        });
        session
            .run(async move {
                let _ = done.await;
            })
            .await;
        let status = waiting.await.map_err(std::io::Error::other).and_then(|s| s);
        match status.map(|s| s.code()) {
            Ok(Some(0)) => Exit::Ok,
            Ok(Some(255)) => {
                report_error(&format_args!("{to}: ssh could not connect or log in (its message is above)"));
                Exit::Transfer
            }
            Ok(Some(127)) => {
                report_error(&format_args!(
                    "{to}: ddftp is not on the remote PATH: install it there, or name it with --remote-ddftp PATH"
                ));
                Exit::Transfer
            }
            Ok(Some(c)) => Exit::from_code(c),
            Ok(None) | Err(_) => Exit::Transfer,
        }
    })
}

/// The list after the line, as the remote end reads it
/// ([`read_sent_list`]): its length on a line, then its bytes.
fn send_list(to: &mut impl Write, list: Option<&[u8]>) -> std::io::Result<()> {
    if let Some(l) = list {
        writeln!(to, "files-from {}", l.len())?;
        to.write_all(l)?;
    }
    to.flush()
}

/// The most a list sent after the line may hold.
const MAX_SENT_LIST: u64 = 1 << 30;

/// The list [`send_list`] sent, read by the remote end from `from`.
pub fn read_sent_list(from: &mut impl std::io::BufRead) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut head = String::new();
    let mut first = std::io::Read::take(&mut *from, 64);
    std::io::BufRead::read_line(&mut first, &mut head).map_err(|e| format!("reading the pushed --files-from: {e}"))?;
    let len = head
        .strip_prefix("files-from ")
        .and_then(|n| n.trim_end().parse::<u64>().ok())
        .filter(|&n| n <= MAX_SENT_LIST)
        .ok_or_else(|| format!("the pushing end sent no --files-from list ({:?})", head.trim_end()))?;
    let mut list = Vec::with_capacity(len.min(1 << 20) as usize);
    from.take(len).read_to_end(&mut list).map_err(|e| format!("reading the pushed --files-from: {e}"))?;
    match list.len() as u64 == len {
        true => Ok(list),
        false => Err(format!("the pushed --files-from ended after {} of {len} bytes", list.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_sent_after_the_line_is_read_back_whole_and_a_short_or_odd_one_refused() {
        let mut sent = vec![];
        send_list(&mut sent, Some(b"a\nb/c\n")).unwrap();
        sent.extend_from_slice(b"what follows");
        let mut r = std::io::Cursor::new(sent);
        assert_eq!(read_sent_list(&mut r).unwrap(), b"a\nb/c\n");
        for bad in [&b"files-from 9\nab"[..], b"files-from x\n", b"nothing\n", b"files-from 99999999999\n"] {
            assert!(read_sent_list(&mut std::io::Cursor::new(bad.to_vec())).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn several_pushes_end_as_one_partial_where_some_failed() {
        assert_eq!(combined(&[Exit::Ok, Exit::Ok]), Exit::Ok);
        assert_eq!(combined(&[Exit::Ok, Exit::Local]), Exit::Partial);
        assert_eq!(combined(&[Exit::Transfer, Exit::Local]), Exit::Transfer);
        assert_eq!(combined(&[Exit::MaxDelete]), Exit::MaxDelete);
    }

    #[test]
    fn a_directory_goes_under_dir_its_content_with_a_slash_a_file_beside() {
        let d = tempfile::tempdir().unwrap();
        let tree = d.path().join("tree");
        std::fs::create_dir(&tree).unwrap();
        std::fs::write(d.path().join("f"), b"x").unwrap();
        let t = tree.to_str().unwrap();
        let at = |root: &Path, only: Option<&str>, src: &str, dest: &str| Ends {
            root: root.canonicalize().unwrap(),
            only: only.map(PathBuf::from),
            src: src.into(),
            dest: dest.into(),
        };
        assert_eq!(ends(t, "/srv", false).unwrap(), at(&tree, None, ".", "/srv/tree"));
        assert_eq!(ends(&format!("{t}/"), "/srv", false).unwrap(), at(&tree, None, ".", "/srv"));
        let f = d.path().join("f");
        assert_eq!(ends(f.to_str().unwrap(), "in", false).unwrap(), at(d.path(), Some("f"), "f", "in"));
        assert_eq!(ends(t, "", false).unwrap().dest, "tree");
        std::fs::create_dir_all(tree.join("b/c")).unwrap();
        let dotted = format!("{t}/./b/c/");
        assert_eq!(ends(&dotted, "in", true).unwrap(), at(&tree, Some("b/c"), "b/c", "in"));
        let whole = format!("{t}/b");
        let kept = whole.trim_start_matches('/');
        assert_eq!(ends(&whole, "", true).unwrap(), at(Path::new("/"), Some(kept), kept, "."));
        assert!(ends(&format!("{t}/./b/../x"), "in", true).is_err());
        assert!(ends(&format!("{t}/./nothing"), "in", true).is_err());
    }
}
