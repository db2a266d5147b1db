//! Proxies from the environment, as curl reads them: `https_proxy` (or
//! `HTTPS_PROXY`) for https URLs, reached with `CONNECT` (TLS stays end to
//! end: the proxy sees only the host and port); `http_proxy` (lower case
//! only, as curl, since `HTTP_PROXY` can be set by a CGI request header)
//! for http URLs, which then ask with the absolute URL; `no_proxy` (or
//! `NO_PROXY`): hosts, domain suffixes or `*` that are reached directly.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::HttpError;

/// A proxy's address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxy {
    pub host: String,
    pub port: u16,
}

/// The proxy the environment names for `host` over http or https, if any.
pub fn from_env(https: bool, host: &str) -> Result<Option<Proxy>, HttpError> {
    let var = |names: &[&str]| names.iter().find_map(|n| std::env::var(n).ok()).filter(|v| !v.trim().is_empty());
    let proxy = match https {
        true => var(&["https_proxy", "HTTPS_PROXY"]),
        false => var(&["http_proxy"]),
    };
    let Some(proxy) = proxy else { return Ok(None) };
    if var(&["no_proxy", "NO_PROXY"]).is_some_and(|list| bypassed(&list, host)) {
        return Ok(None);
    }
    parse(&proxy).map(Some)
}

/// Whether `no_proxy`'s `list` names `host` (or a domain it is in).
fn bypassed(list: &str, host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase();
    list.split(',').map(|e| e.trim().trim_start_matches('.').to_ascii_lowercase()).any(|e| {
        let e = e.trim_start_matches('[').trim_end_matches(']');
        e == "*" || (!e.is_empty() && (host == e || host.ends_with(&format!(".{e}"))))
    })
}

/// `http://host:port` (the scheme optional, port 1080 if missing: curl's).
fn parse(s: &str) -> Result<Proxy, HttpError> {
    let bad = |why| HttpError::BadUrl(s.to_string(), why);
    let rest = match s.split_once("://") {
        Some(("http", r)) => r,
        Some(_) => return Err(bad("only http:// proxies are supported")),
        None => s,
    };
    let authority = rest.split('/').next().unwrap_or("");
    if authority.contains('@') {
        return Err(bad("proxy user names and passwords are not supported"));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (h, p.parse().map_err(|_| bad("bad proxy port"))?),
        _ => (authority, 1080),
    };
    if host.is_empty() {
        return Err(bad("no proxy host"));
    }
    Ok(Proxy { host: host.trim_start_matches('[').trim_end_matches(']').to_string(), port })
}

impl Proxy {
    pub async fn connect(&self) -> Result<TcpStream, HttpError> {
        TcpStream::connect((self.host.as_str(), self.port)).await.map_err(HttpError::Connect)
    }

    /// Asks the proxy on `sock` for a tunnel to `authority` (`host:port`).
    pub async fn tunnel(&self, sock: &mut TcpStream, authority: &str) -> Result<(), HttpError> {
        let req = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
        sock.write_all(req.as_bytes()).await.map_err(HttpError::Connect)?;
        // The reply head, a byte at a time: nothing of the tunnel's own
        // bytes may be read here.
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            if head.len() > 16 << 10 {
                return Err(HttpError::Malformed("the proxy's CONNECT reply is too long".into()));
            }
            let b = sock.read_u8().await.map_err(|_| HttpError::Closed)?;
            head.push(b);
        }
        let line = String::from_utf8_lossy(&head);
        let status = line.split_whitespace().nth(1).unwrap_or("");
        match status {
            "200" => Ok(()),
            _ => Err(HttpError::Proxy(format!(
                "{}:{} refused CONNECT {authority}: {}",
                self.host,
                self.port,
                line.lines().next().unwrap_or("")
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxies_and_exceptions_are_read_as_curl_reads_them() {
        assert_eq!(parse("http://proxy.site:3128/").unwrap(), Proxy { host: "proxy.site".into(), port: 3128 });
        assert_eq!(parse("proxy.site").unwrap().port, 1080);
        assert!(parse("http://u:p@proxy.site:3128").is_err());
        assert!(parse("socks5://proxy.site:1080").is_err());
        assert!(bypassed("localhost, .example.org", "mirror.example.org"));
        assert!(bypassed("example.org", "example.org"));
        assert!(!bypassed("example.org", "badexample.org"));
        assert!(bypassed("*", "anything"));
        assert!(bypassed("127.0.0.1,::1", "[::1]"));
    }
}
