//! Private web mirrors: what every request carries beyond the basics
//! (`--header`, `--user-agent`) and whose credentials go to which server.
//!
//! Credentials come from the URL's user info, else `--user`, else the
//! `.netrc` entry of the server's host (or its `default`). They are bound
//! to the origin (scheme, host, port) they were given for: a redirect to
//! another origin carries only what `.netrc` says for that one, never the
//! first server's (as curl without `--location-trusted`). A password is
//! never printed: [`Credentials`] shows the user only, and URLs are kept
//! without their user info.

use std::fmt;

/// A user and password for HTTP Basic authentication.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credentials({:?}, password hidden)", self.user)
    }
}

impl Credentials {
    /// The `Authorization` header's value.
    pub fn basic(&self) -> String {
        format!("Basic {}", base64(format!("{}:{}", self.user, self.password).as_bytes()))
    }
}

/// One `.netrc` entry: a machine (or the default) and its login.
#[derive(Clone, PartialEq, Eq)]
pub struct NetrcEntry {
    /// `None` for `default`.
    pub machine: Option<String>,
    pub login: Credentials,
}

impl fmt::Debug for NetrcEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NetrcEntry({:?}, {:?})", self.machine, self.login)
    }
}

/// What requests to web mirrors carry, for every mirror of a run.
#[derive(Debug, Clone, Default)]
pub struct Asking {
    /// `--user-agent` (default: `ddftp/VERSION`).
    pub user_agent: Option<String>,
    /// `--header 'Name: value'`, each checked by [`header`].
    pub headers: Vec<(String, String)>,
    /// `--user USER[:PASS]`: for the mirrors the user named.
    pub user: Option<Credentials>,
    /// `.netrc`'s entries (`--netrc-file`, else `~/.netrc`).
    pub netrc: Vec<NetrcEntry>,
}

impl Asking {
    /// The credentials for a mirror at `host` the user named (`url_user`:
    /// its URL's user info), in the order of precedence.
    pub fn for_named(&self, host: &str, url_user: Option<Credentials>) -> Option<Credentials> {
        url_user.or_else(|| self.user.clone()).or_else(|| self.from_netrc(host))
    }

    /// The credentials `.netrc` gives `host` (a server a redirect led to).
    pub fn from_netrc(&self, host: &str) -> Option<Credentials> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let exact = self.netrc.iter().find(|e| e.machine.as_deref().is_some_and(|m| m.eq_ignore_ascii_case(host)));
        exact.or_else(|| self.netrc.iter().find(|e| e.machine.is_none())).map(|e| e.login.clone())
    }

    /// What goes to another origin than the one the user named (a
    /// redirect's): no `--header`s, which may hold tokens or cookies.
    pub fn elsewhere(&self) -> Asking {
        Asking { headers: vec![], ..self.clone() }
    }

    /// The User-Agent to send.
    pub fn user_agent(&self) -> String {
        self.user_agent.clone().unwrap_or_else(|| concat!("ddftp/", env!("CARGO_PKG_VERSION")).to_string())
    }
}

/// `text` (a message, a label, a JSON value) with the user info of every
/// URL in it taken out: `http://alice:PW@host/f` shows as
/// `http://host/f`. The one rule for what reaches stdout, stderr,
/// `--json` and `--metrics-file` from a URL the user typed, wherever the
/// URL came through (a usage error, a failed file's label).
pub fn hide_user_info(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("://") || !text.contains('@') {
        return text.into();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        out.push_str(&rest[..i + 3]);
        rest = &rest[i + 3..];
        // The authority runs to the path, the query, the fragment, or
        // anything that ends a URL inside a text.
        let end = rest.find(|c: char| "/?#\" <>".contains(c) || c.is_whitespace() || c.is_control());
        let authority = &rest[..end.unwrap_or(rest.len())];
        if let Some(at) = authority.rfind('@') {
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out.into()
}

/// `--header 'Name: value'` as (name, value): a token name (not one ddftp
/// sets itself) and a value of visible ASCII and spaces, so no header can
/// split a request.
pub fn header(s: &str) -> Result<(String, String), String> {
    let (name, value) = s.split_once(':').ok_or_else(|| format!("{s:?}: a header is 'Name: value'"))?;
    let (name, value) = (name.trim(), value.trim());
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || !name.chars().all(token) {
        return Err(format!("{name:?}: not a header name"));
    }
    if !value.bytes().all(|b| b == b' ' || b == b'\t' || (b'!'..=b'~').contains(&b)) {
        return Err(format!("{name}: its value may hold visible ASCII and spaces only"));
    }
    const OURS: [&str; 5] = ["host", "range", "if-range", "content-length", "transfer-encoding"];
    if OURS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(format!("{name}: ddftp sets this header itself"));
    }
    Ok((name.to_string(), value.to_string()))
}

/// `--user-agent TEXT`: visible ASCII and spaces, so it cannot split a
/// request.
pub fn user_agent(s: &str) -> Result<String, String> {
    match s.bytes().all(|b| b == b' ' || (b'!'..=b'~').contains(&b)) {
        true => Ok(s.to_string()),
        false => Err("a User-Agent may hold visible ASCII and spaces only".into()),
    }
}

/// `--user USER[:PASS]`; the password is `None` when not given (asked).
pub fn user(s: &str) -> (String, Option<String>) {
    match s.split_once(':') {
        Some((u, p)) => (u.to_string(), Some(p.to_string())),
        None => (s.to_string(), None),
    }
}

/// The entries of a `.netrc` file (`machine`, `default`, `login`,
/// `password`; `account` and `macdef` bodies skipped). Malformed parts are
/// skipped, never an error: the file is the user's own.
pub fn netrc(text: &str) -> Vec<NetrcEntry> {
    let mut out = vec![];
    let mut machine: Option<Option<String>> = None;
    let (mut login, mut password) = (None::<String>, None::<String>);
    let flush = |m: &mut Option<Option<String>>,
                 l: &mut Option<String>,
                 p: &mut Option<String>,
                 out: &mut Vec<NetrcEntry>| {
        if let (Some(m), Some(l)) = (m.take(), l.take()) {
            out.push(NetrcEntry { machine: m, login: Credentials { user: l, password: p.take().unwrap_or_default() } });
        }
        *p = None;
    };
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let mut words = line.split_whitespace();
        while let Some(w) = words.next() {
            match w {
                "machine" => {
                    flush(&mut machine, &mut login, &mut password, &mut out);
                    machine = Some(words.next().map(String::from));
                }
                "default" => {
                    flush(&mut machine, &mut login, &mut password, &mut out);
                    machine = Some(None);
                }
                "login" => login = words.next().map(String::from),
                "password" => password = words.next().map(String::from),
                "account" => {
                    words.next();
                }
                "macdef" => {
                    // Its body runs to the next empty line.
                    for l in lines.by_ref() {
                        if l.trim().is_empty() {
                            break;
                        }
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    flush(&mut machine, &mut login, &mut password, &mut out);
    // A `machine` without a name is not a default.
    out.retain(|e| e.machine.as_deref() != Some(""));
    out
}

/// Percent-decodes a part of a URL (user info, a path); a bad `%` escape
/// is kept as written.
pub fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (b[i], b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, ..) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn basic_auth_is_base64_of_user_colon_password() {
        let c = Credentials { user: "Aladdin".into(), password: "open sesame".into() };
        assert_eq!(c.basic(), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        assert!(!format!("{c:?}").contains("sesame"), "never printed");
        assert_eq!(base64(b"a"), "YQ==");
        assert_eq!(base64(b"ab"), "YWI=");
    }

    #[test]
    fn netrc_machines_and_default() {
        let e = netrc("machine a.example login u1 password p1\n\nmacdef init\ncd x\n\nmachine b login u2\n  password p2\ndefault login anon password x\n");
        let asking = Asking { netrc: e, ..Asking::default() };
        assert_eq!(asking.from_netrc("A.example").unwrap().password, "p1");
        assert_eq!(asking.from_netrc("b").unwrap(), Credentials { user: "u2".into(), password: "p2".into() });
        assert_eq!(asking.from_netrc("elsewhere").unwrap().user, "anon");
        let url = Credentials { user: "x".into(), password: "y".into() };
        assert_eq!(asking.for_named("b", Some(url.clone())), Some(url), "the URL's user info first");
    }

    #[test]
    fn headers_cannot_split_a_request_or_replace_ours() {
        assert_eq!(header("X-Token:  abc ").unwrap(), ("X-Token".into(), "abc".into()));
        assert!(header("X-A: b\r\nX-B: c").is_err());
        assert!(header("Bad Name: x").is_err());
        assert!(header("Range: bytes=0-").is_err());
        assert!(header("novalue").is_err());
        assert_eq!(user("u:p:q"), ("u".into(), Some("p:q".into())));
        assert_eq!(decode("us%40er:p%3Ass"), "us@er:p:ss");
    }

    #[test]
    fn user_info_is_hidden_in_any_text() {
        assert_eq!(hide_user_info("http://alice:PW@h:8/f x"), "http://h:8/f x");
        assert_eq!(hide_user_info("[\"https://u:p@a/\",\"http://b:q@c\"]"), "[\"https://a/\",\"http://c\"]");
        assert_eq!(hide_user_info("ftp://a:b@c:d@host?x"), "ftp://host?x");
        assert_eq!(hide_user_info("mail a@b, see http://h/p@q"), "mail a@b, see http://h/p@q");
        assert_eq!(hide_user_info("\"http://u:p@h:99999\": bad port"), "\"http://h:99999\": bad port");
    }

    proptest! {
        #[test]
        fn a_url_s_password_never_survives_hiding(
            pre in "\\PC{0,20}", user in "[a-zA-Z0-9._~%!$&'()*+,;=-]{0,12}",
            pw in "[a-zA-Z0-9._~%!$&'()*+,;=:-]{6,16}", host in "[a-z0-9.]{1,12}", post in "\\PC{0,20}",
        ) {
            let text = format!("{pre}http://{user}:{pw}@{host}/f{post}");
            let shown = hide_user_info(&text);
            prop_assert!(!shown.contains(&format!(":{pw}@")), "{text:?} -> {shown:?}");
        }

        #[test]
        fn any_netrc_and_header_text_parse_without_panicking(t in "\\PC{0,200}") {
            let _ = netrc(&t);
            if let Ok((n, v)) = header(&t) {
                prop_assert!(!n.contains(['\r', '\n']) && !v.contains(['\r', '\n']));
            }
            let _ = decode(&t);
        }
    }
}
