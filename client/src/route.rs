//! How a mirror is reached: its address, its TLS, what a mirror started
//! for this command has of its own ([`Own`]), and each route to it (a
//! local address, `--bind`).

use std::net::IpAddr;

use ddftp_proto::Endpoint;
use ddnet::tls::TlsConnector;

/// How a ddftps mirror is reached: the one TLS client configuration of a
/// command (`--ca-file`, `--cert`, `--key`).
#[derive(Clone)]
pub struct Secure(pub TlsConnector);

impl PartialEq for Secure {
    fn eq(&self, other: &Secure) -> bool {
        std::sync::Arc::ptr_eq(self.0.config(), other.0.config())
    }
}

impl Eq for Secure {}

impl std::fmt::Debug for Secure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secure")
    }
}

/// A ddftpd mirror: its address and, for `ddftps://`, its TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    pub endpoint: Endpoint,
    pub tls: Option<Secure>,
    /// What a mirror this command started (an ssh mirror) has of its own.
    pub own: Option<Own>,
}

/// A mirror's own token (made for its session, proved instead of
/// `--token-file`'s) and the name it goes by (its `ssh://` URL, not the
/// session's port). The token is never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Own {
    pub token: std::sync::Arc<[u8]>,
    pub name: std::sync::Arc<str>,
}

impl std::fmt::Debug for Own {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Own").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Peer {
    pub fn plain(endpoint: Endpoint) -> Peer {
        Peer { endpoint, tls: None, own: None }
    }

    /// The route to it from wherever the OS routes, or from `local`.
    pub fn route(&self, local: Option<IpAddr>) -> Route {
        Route { endpoint: self.endpoint.clone(), local, tls: self.tls.clone(), own: self.own.clone() }
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(own) = &self.own {
            return f.write_str(&own.name);
        }
        match self.tls {
            Some(_) => write!(f, "ddftps://{}", self.endpoint),
            None => write!(f, "{}", self.endpoint),
        }
    }
}

/// One way to reach a mirror: from a local address (`--bind`), or from
/// wherever the OS routes. Every route is a producer of its own, so a
/// mirror reached over two NICs is two producers, one per link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub endpoint: Endpoint,
    pub local: Option<IpAddr>,
    pub tls: Option<Secure>,
    /// What the mirror has of its own (see [`Peer::own`]).
    pub own: Option<Own>,
}

impl Route {
    /// Its mirror's name: the address, or the name it goes by.
    pub fn mirror(&self) -> String {
        match &self.own {
            Some(own) => own.name.to_string(),
            None => self.endpoint.to_string(),
        }
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.own, self.local) {
            (Some(own), Some(l)) => return write!(f, "{} via {l}", own.name),
            (Some(own), None) => return f.write_str(&own.name),
            _ => {}
        }
        if self.tls.is_some() {
            f.write_str("ddftps://")?;
        }
        match self.local {
            Some(l) => write!(f, "{} via {l}", self.endpoint),
            None => write!(f, "{}", self.endpoint),
        }
    }
}
