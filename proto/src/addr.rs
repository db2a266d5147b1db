//! Mirror and listen addresses: `HOST[:PORT]`, `[IPv6]:PORT`.
//!
//! Mirrors given without a port use [`DEFAULT_PORT`]; IPv6 literals go in
//! brackets so the port is never ambiguous. Names are kept as given and
//! resolved by the caller (this crate does no I/O).

use std::fmt;

/// The port `ddftpd` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 7400;

/// A host (name or literal, without brackets) and a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// An address that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid address {input:?}: {why} (expected HOST, HOST:PORT or [IPv6]:PORT)")]
pub struct AddrError {
    pub input: String,
    pub why: &'static str,
}

/// Parses `HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT`. Port 0 is accepted
/// (a listener picks a free port); a client must refuse it for a peer.
pub fn parse_endpoint(input: &str) -> Result<Endpoint, AddrError> {
    let err = |why| AddrError { input: input.to_string(), why };
    let s = input.trim();
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let close = rest.find(']').ok_or_else(|| err("missing ']'"))?;
        let host = &rest[..close];
        match &rest[close + 1..] {
            "" => (host, None),
            tail => (host, Some(tail.strip_prefix(':').ok_or_else(|| err("junk after ']'"))?)),
        }
    } else {
        match s.matches(':').count() {
            0 => (s, None),
            1 => {
                let (h, p) = s.split_once(':').expect("one colon");
                (h, Some(p))
            }
            _ => return Err(err("IPv6 addresses need brackets")),
        }
    };
    if host.is_empty() {
        return Err(err("empty host"));
    }
    if host.chars().any(|c| c.is_whitespace() || c == '/' || c == ',') {
        return Err(err("bad character in host"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => p.parse::<u16>().map_err(|_| err("port must be 0-65535"))?,
    };
    Ok(Endpoint { host: host.to_string(), port })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(h: &str, p: u16) -> Endpoint {
        Endpoint { host: h.into(), port: p }
    }

    #[test]
    fn forms() {
        assert_eq!(parse_endpoint("a.example"), Ok(ep("a.example", 7400)));
        assert_eq!(parse_endpoint("127.0.0.1:9000"), Ok(ep("127.0.0.1", 9000)));
        assert_eq!(parse_endpoint("[::1]:7401"), Ok(ep("::1", 7401)));
        assert_eq!(parse_endpoint("[::1]"), Ok(ep("::1", 7400)));
        assert_eq!(ep("::1", 7401).to_string(), "[::1]:7401");
    }

    #[test]
    fn errors() {
        for bad in ["", ":80", "::1", "h:99999", "h:x", "[::1", "[::1]x", "a b"] {
            assert!(parse_endpoint(bad).is_err(), "{bad}");
        }
    }
}
