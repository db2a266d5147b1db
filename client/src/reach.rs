//! Whether a mirror was reached at all: a name that does not resolve and
//! a refused connection are told apart from a mirror that answered and
//! went away, for the retry rule at the start ([`crate::retry::Start`]).

use std::io;
use std::net::SocketAddr;

use tokio::net::TcpStream;

/// A host name that resolves to no address (a typo, a name gone).
#[derive(Debug, thiserror::Error)]
#[error("{host}: no such host ({source})")]
pub struct NoSuchHost {
    host: String,
    source: io::Error,
}

/// How a mirror could not be reached, if that is why it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreached {
    /// Its name resolves to nothing.
    NoSuchHost,
    /// Nothing listens there (the connection was refused).
    Refused,
}

/// What a failed connection `e` says about the mirror.
pub fn unreached(e: &io::Error) -> Option<Unreached> {
    if e.get_ref().is_some_and(|inner| inner.is::<NoSuchHost>()) {
        return Some(Unreached::NoSuchHost);
    }
    (e.kind() == io::ErrorKind::ConnectionRefused).then_some(Unreached::Refused)
}

/// The addresses of `host:port`; a name that resolves to none is a
/// [`NoSuchHost`] (wrapped in the `io::Error`).
pub async fn resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let no = |source| io::Error::new(io::ErrorKind::NotFound, NoSuchHost { host: host.to_string(), source });
    match tokio::net::lookup_host((host, port)).await {
        Ok(a) => {
            let addrs: Vec<SocketAddr> = a.collect();
            match addrs.is_empty() {
                true => Err(no(io::Error::other("no address"))),
                false => Ok(addrs),
            }
        }
        Err(e) => Err(no(e)),
    }
}

/// A TCP connection to `host:port`, each address in turn (as
/// `TcpStream::connect` does), a name that does not resolve told apart.
pub async fn connect(host: &str, port: u16) -> io::Result<TcpStream> {
    let mut last = None;
    for a in resolve(host, port).await? {
        match TcpStream::connect(a).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no address")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_that_does_not_resolve_and_a_refused_port_are_told_apart() {
        let e = connect("no-such-host.invalid", 80).await.unwrap_err();
        assert_eq!(unreached(&e), Some(Unreached::NoSuchHost), "{e}");
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let e = connect("127.0.0.1", port).await.unwrap_err();
        assert_eq!(unreached(&e), Some(Unreached::Refused), "{e}");
        assert_eq!(unreached(&io::Error::from(io::ErrorKind::TimedOut)), None);
    }
}
