//! `ddftp ls MIRROR[:PATH]`: what a ddftpd mirror serves under PATH, from
//! its walk, printed as it comes (memory stays bounded whatever the tree).
//!
//! Paths are relative to PATH, like `find PATH -mindepth 1 -printf '%P\n'`.
//! A name is the mirror's to choose: control characters and invalid UTF-8
//! are printed escaped (`\n`, `\x1b`, `\xff`), never raw to the terminal;
//! `--json` gives each path exactly: a JSON string when it is UTF-8; else
//! `"path"` escaped for reading (`\xNN`) and `"path_hex"` its bytes, so a
//! name that is not UTF-8 is never taken for one holding a backslash.
//! Bidirectional formatting characters (U+202E...) are escaped on the
//! terminal as `\u{202e}`.

use std::io::Write;

use clap::Args;
use ddftp_proto::{parse_endpoint, Endpoint, DEFAULT_PORT};
use ddtree::list::{Entry, Kind};

use super::flags::TlsOpt;
use super::{report_error, Exit};
use ddftp::session::{Peer, WalkAsk};

/// List what a ddftpd mirror serves (from its walk).
#[derive(Debug, Args)]
#[command(after_help = "Examples:
  ddftp ls mirror1                  what mirror1:7400 serves at the top of its root
  ddftp ls -R mirror1:7401:data/run3   everything under data/run3, on port 7401
  ddftp ls -l ddftps://mirror1/data --ca-file ca.pem
  ddftp ls --json [::1]:7400 | jq -r 'select(.kind==\"file\") | .path'
Docs: man ddftp-ls; docs/ddftpd.md")]
pub struct LsOpt {
    /// HOST[:PORT][:PATH], [IPv6]:PORT[:PATH], or ddftp(s)://HOST[:PORT][/PATH];
    /// PATH is a directory under the mirror's root (default: the root).
    pub target: String,
    /// Long listing: mode, size, modification time (UTC), path, and a
    /// symlink's `-> target`.
    #[arg(short = 'l', long = "long")]
    pub long: bool,
    /// Everything below PATH, not only its own entries (ls -R, rclone lsf -R).
    #[arg(short = 'R', long = "recursive")]
    pub recursive: bool,
    /// Print entries as the mirror's walk finds them, unsorted (ls -U):
    /// with -R on a tree of millions, nothing is held to sort.
    #[arg(short = 'U')]
    pub unsorted: bool,
    /// One JSON object per entry and line: path, kind, size, mode, mtime.
    #[arg(long, conflicts_with = "long")]
    pub json: bool,
    #[command(flatten)]
    pub tls: TlsOpt,
}

/// The mirror, whether over TLS, and the path a target names.
pub fn parse_target(s: &str) -> Result<(Endpoint, bool, String), String> {
    if let Some(url) = super::flags::parse_ddftp_url(s) {
        return url.map(|u| (u.endpoint, u.tls, u.path));
    }
    if s.contains("://") {
        return Err(format!("{s:?}: a ddftpd mirror is HOST[:PORT][:PATH] or ddftp(s)://HOST[:PORT][/PATH]"));
    }
    // [v6]:port[:path] | host[:port][:path] | host:path (port 7400).
    let (host, rest) = match s.strip_prefix('[') {
        Some(v6) => {
            let (h, rest) = v6.split_once(']').ok_or_else(|| format!("{s:?}: no ']' after the IPv6 address"))?;
            (format!("[{h}]"), rest.strip_prefix(':').unwrap_or(rest))
        }
        None => {
            let (h, rest) = s.split_once(':').unwrap_or((s, ""));
            (h.to_string(), rest)
        }
    };
    let (port, path) = match rest.split_once(':') {
        Some((p, path)) if p.bytes().all(|b| b.is_ascii_digit()) && !p.is_empty() => (p, path),
        None if !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()) => (rest, ""),
        _ => ("", rest),
    };
    let addr = if port.is_empty() { format!("{host}:{DEFAULT_PORT}") } else { format!("{host}:{port}") };
    let ep = parse_endpoint(&addr).map_err(|e| e.to_string())?;
    Ok((ep, false, path.to_string()))
}

pub fn run(o: LsOpt) -> Exit {
    let (ep, url_tls, path) = match parse_target(&o.target) {
        Ok(t) => t,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    let (tls, token) = match o.tls.connector(url_tls).and_then(|c| Ok((c, o.tls.token()?))) {
        Ok(t) => t,
        Err(e) => {
            report_error(&e);
            return Exit::Usage;
        }
    };
    let peer = Peer { endpoint: ep, tls, own: None };
    let src = if path.trim_matches('/').is_empty() { ".".to_string() } else { path.trim_end_matches('/').to_string() };
    let rt = match super::runtime() {
        Ok(rt) => rt,
        Err(e) => {
            report_error(&format_args!("cannot start: {e}"));
            return Exit::Local;
        }
    };
    let style = if o.json {
        Style::Json
    } else if o.long {
        Style::Long
    } else {
        Style::Short
    };
    let how = How { style, recursive: o.recursive, sorted: !o.unsorted };
    rt.block_on(list_or_file(&peer, &src, token.as_deref(), how))
}

/// What `ls` prints and how much of the tree.
#[derive(Debug, Clone, Copy)]
struct How {
    style: Style,
    recursive: bool,
    sorted: bool,
}

/// `src` listed; a file lists itself (as `ls FILE` does), found in its
/// directory's walk.
async fn list_or_file(peer: &Peer, src: &str, token: Option<&[u8]>, how: How) -> Exit {
    use ddftp_proto::frame::ErrorCode;
    // A file, or a symlink (which the mirror will not walk through).
    let not_a_dir = |e: &ddftp::session::SessionError| {
        matches!(e, ddftp::session::SessionError::Refused { code: ErrorCode::NotAFile | ErrorCode::Forbidden, .. })
    };
    match list(peer, src, token, how, None).await {
        Err(e) if not_a_dir(&e) && src != "." => {
            let (dir, name) = src.rsplit_once('/').unwrap_or((".", src));
            match list(peer, dir, token, how, Some(name)).await {
                Ok((exit, n)) if n > 0 => exit,
                Ok(_) | Err(_) => failed(peer, &e),
            }
        }
        Ok((exit, _)) => exit,
        Err(e) => failed(peer, &e),
    }
}

fn failed(peer: &Peer, e: &ddftp::session::SessionError) -> Exit {
    report_error(&format_args!("{}: {e}", peer.endpoint));
    match e {
        ddftp::session::SessionError::Tls(_) => Exit::Tls,
        ddftp::session::SessionError::Refused { code: ddftp_proto::frame::ErrorCode::NotFound, .. } => Exit::NotFound,
        _ => Exit::Transfer,
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Style {
    Short,
    Long,
    Json,
}

/// The walk of `src` printed (its own entries, or with `-R` all below
/// it; `only`: the one entry of that name) and how many entries; the
/// walk's error, if it could not begin.
async fn list(
    peer: &Peer,
    src: &str,
    token: Option<&[u8]>,
    how: How,
    only: Option<&str>,
) -> Result<(Exit, usize), ddftp::session::SessionError> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<Entry>>(4);
    let mut began = false;
    // The mirror leaves out what is not printed (and walks no deeper).
    let rules = match (only, how.recursive) {
        (Some(name), _) => vec![(true, format!("/{}", literal(name))), (false, "*".to_string())],
        (None, false) => vec![(false, "/*/*".to_string())],
        (None, true) => vec![],
    };
    let ask = WalkAsk { rules, ..WalkAsk::default() };
    let walk = ddftp::archive::walk_stream(peer, src, &ask, token, tx, &mut began);
    let label = src.as_bytes().to_vec();
    let print = async {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let mut line = Vec::with_capacity(256);
        let mut held: Vec<(Vec<u8>, Entry)> = vec![];
        let mut shown = 0;
        while let Some(batch) = rx.recv().await {
            for e in batch {
                let Some(rel) = below(&e.path, &label) else { continue };
                if !how.recursive && rel.contains(&b'/') {
                    continue;
                }
                // A file is shown as it was named.
                let rel = match only {
                    Some(name) if src == "." => name.as_bytes().to_vec(),
                    Some(name) => format!("{src}/{name}").into_bytes(),
                    None => rel.to_vec(),
                };
                shown += 1;
                if how.sorted {
                    held.push((rel, e));
                    continue;
                }
                line.clear();
                render(&mut line, &rel, &e, how.style);
                out.write_all(&line)?;
            }
        }
        held.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (rel, e) in &held {
            line.clear();
            render(&mut line, rel, e, how.style);
            out.write_all(&line)?;
        }
        out.flush().map(|()| shown)
    };
    let (walked, printed) = tokio::join!(walk, print);
    let shown = match printed {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok((Exit::Ok, 1)),
        Err(e) => {
            report_error(&format_args!("writing stdout: {e}"));
            return Ok((Exit::Local, 1));
        }
    };
    match walked {
        Ok(errors) if errors.is_empty() => Ok((Exit::Ok, shown)),
        Ok(errors) => {
            for (p, why) in &errors {
                eprintln!("ddftp: warning: {}: {why} (not listed)", escape(p.as_bytes()));
            }
            report_error(&format_args!("the mirror could not read {} entries; the rest are listed", errors.len()));
            Ok((Exit::Partial, shown))
        }
        Err(e) => Err(e),
    }
}

/// `name` as a walk rule that matches it alone (rsync's wildcards escaped).
fn literal(name: &str) -> String {
    let mut s = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            s.push('\\');
        }
        s.push(c);
    }
    s
}

/// `path` relative to the walked directory `label`; `None` for the
/// directory itself (or anything not below it).
fn below<'a>(path: &'a [u8], label: &[u8]) -> Option<&'a [u8]> {
    let rest = path.strip_prefix(label)?.strip_prefix(b"/")?;
    (!rest.is_empty()).then_some(rest)
}

pub(crate) fn render(line: &mut Vec<u8>, rel: &[u8], e: &Entry, style: Style) {
    match style {
        Style::Short => line.extend_from_slice(escape(rel).as_bytes()),
        Style::Long => {
            let s = format!("{} {:>14} {} {}", mode_string(e.kind, e.perm), e.size, utc(e.mtime.sec), escape(rel));
            line.extend_from_slice(s.as_bytes());
            if let Some(t) = e.meta.target() {
                line.extend_from_slice(format!(" -> {}", escape(t)).as_bytes());
            }
        }
        Style::Json => {
            let mut v = serde_json::json!({
                "path": json_path(rel),
                "kind": kind_name(e.kind),
                "size": e.size,
                "mode": format!("{:04o}", e.perm),
                "mtime": e.mtime.sec,
                "mtime_nsec": e.mtime.nsec,
            });
            // A name that is not UTF-8 has no exact JSON string: its
            // bytes, exactly, beside the escaped form shown in "path".
            if std::str::from_utf8(rel).is_err() {
                v["path_hex"] = rel.iter().map(|b| format!("{b:02x}")).collect::<String>().into();
            }
            if let Some(t) = e.meta.target() {
                v["target"] = json_path(t).into();
            }
            line.extend_from_slice(v.to_string().as_bytes());
        }
    }
    line.push(b'\n');
}

/// A name safe to print: UTF-8 without control characters as it is,
/// everything else escaped.
fn escape(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for chunk in b.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => s.push_str("\\\\"),
                '\n' => s.push_str("\\n"),
                '\t' => s.push_str("\\t"),
                c if c.is_control() => s.push_str(&format!("\\x{:02x}", c as u32)),
                // Bidirectional formatting reorders what a terminal shows.
                c if ddftp_proto::shown::must_escape(c) => s.push_str(&format!("\\u{{{:x}}}", c as u32)),
                c => s.push(c),
            }
        }
        for byte in chunk.invalid() {
            s.push_str(&format!("\\x{byte:02x}"));
        }
    }
    s
}

/// A path as a JSON string: exact when it is UTF-8.
fn json_path(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_string(),
        Err(_) => escape(b),
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::File => "file",
        Kind::Dir => "dir",
        Kind::Link => "symlink",
        Kind::Block => "block",
        Kind::Char => "char",
        Kind::Fifo => "fifo",
        Kind::Socket => "socket",
    }
}

/// `drwxr-xr-x`, as `ls -l` prints it.
fn mode_string(k: Kind, perm: u32) -> String {
    let t = match k {
        Kind::File => '-',
        Kind::Dir => 'd',
        Kind::Link => 'l',
        Kind::Block => 'b',
        Kind::Char => 'c',
        Kind::Fifo => 'p',
        Kind::Socket => 's',
    };
    let mut s = String::with_capacity(10);
    s.push(t);
    for (i, c) in ['r', 'w', 'x', 'r', 'w', 'x', 'r', 'w', 'x'].iter().enumerate() {
        let bit = 0o400 >> i;
        let set = perm & bit != 0;
        let special = match i {
            2 => perm & 0o4000 != 0,
            5 => perm & 0o2000 != 0,
            8 => perm & 0o1000 != 0,
            _ => false,
        };
        s.push(match (special, set, i) {
            (true, true, 8) => 't',
            (true, false, 8) => 'T',
            (true, true, _) => 's',
            (true, false, _) => 'S',
            (false, true, _) => *c,
            (false, false, _) => '-',
        });
    }
    s
}

/// Seconds since the epoch as `YYYY-MM-DD HH:MM:SS` (UTC).
fn utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's days-to-civil.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn targets_name_a_mirror_and_a_path() {
        let t = |s: &str| parse_target(s).map(|(ep, tls, p)| (ep.to_string(), tls, p));
        assert_eq!(t("m1").unwrap(), ("m1:7400".into(), false, "".into()));
        assert_eq!(t("m1:7401").unwrap(), ("m1:7401".into(), false, "".into()));
        assert_eq!(t("m1:7401:data/x").unwrap(), ("m1:7401".into(), false, "data/x".into()));
        assert_eq!(t("m1:data/x").unwrap(), ("m1:7400".into(), false, "data/x".into()));
        assert_eq!(t("[::1]:7401:d").unwrap(), ("[::1]:7401".into(), false, "d".into()));
        assert_eq!(t("ddftps://m1:7401/d/e").unwrap(), ("m1:7401".into(), true, "d/e".into()));
        assert!(t("http://m1/").is_err());
        assert!(t("[::1").is_err());
    }

    #[test]
    fn a_name_that_is_not_utf8_has_its_bytes_in_json_and_bidi_is_escaped() {
        let md = std::fs::symlink_metadata("/").unwrap();
        let e = ddtree::list::Entry::from_metadata(b"x".to_vec(), &md).unwrap();
        let json = |rel: &[u8]| {
            let mut line = vec![];
            render(&mut line, rel, &e, Style::Json);
            serde_json::from_slice::<serde_json::Value>(&line).unwrap()
        };
        let (bad, backslash) = (json(b"a\xff"), json(b"a\\xff"));
        assert_eq!(bad["path_hex"], "61ff");
        assert!(backslash.get("path_hex").is_none());
        assert_eq!(backslash["path"], "a\\xff");
        assert_eq!(escape("gpj\u{202e}.exe".as_bytes()), "gpj\\u{202e}.exe");
    }

    #[test]
    fn names_are_printed_escaped_and_dates_in_utc() {
        assert_eq!(escape(b"a\nb\x1b[31m\xff"), "a\\nb\\x1b[31m\\xff");
        assert_eq!(escape("été".as_bytes()), "été");
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_795_827_374), "2026-11-28 00:56:14");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00:00");
        assert_eq!(mode_string(Kind::Dir, 0o1777), "drwxrwxrwt");
        assert_eq!(mode_string(Kind::File, 0o4644), "-rwSr--r--");
        assert_eq!(below(b"./a/b", b"."), Some(&b"a/b"[..]));
        assert_eq!(below(b".", b"."), None);
        assert_eq!(below(b"dx/a", b"d"), None);
    }

    proptest! {
        #[test]
        fn any_target_parses_or_errs_without_panicking(s in "\\PC{0,40}") {
            let _ = parse_target(&s);
        }

        #[test]
        fn an_escaped_name_has_no_control_characters(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert!(!escape(&b).chars().any(|c| c.is_control()));
        }
    }
}
