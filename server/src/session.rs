//! A server for one client that met it over ssh: the remote end of an
//! `ssh://` mirror (`ddftpd session DIR`), or the local end of a push
//! (`ddftp archive SRC HOST:DIR`, the remote consumer connecting back).
//! It listens on a free port, speaks TLS with a certificate made for the
//! session (in memory only) and serves only connections that prove a
//! token made for it; [`Session::announce`] is what the other end is told
//! over ssh. Digests go to the user's cache directory, never into the
//! served tree.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;

use crate::{Server, ServerConfig};

/// A session's server, bound and ready.
pub struct Session {
    server: Server,
    listener: tokio::net::TcpListener,
    token: String,
    pin: [u8; 32],
}

impl Session {
    /// Serves `root` on a free port of every address of `family`'s kind
    /// (with `only`, only what it allows of `root`: a push's file or
    /// `-R` path, nothing beside it).
    pub async fn start(
        root: &Path,
        family: IpAddr,
        follow_symlinks: bool,
        only: Option<crate::only::Only>,
    ) -> io::Result<Session> {
        let identity = ddnet::pinned::Identity::generate()
            .map_err(|e| io::Error::other(format!("cannot make the session's certificate: {e}")))?;
        let acceptor =
            identity.acceptor().map_err(|e| io::Error::other(format!("cannot use the session's certificate: {e}")))?;
        let token: String = rand::random::<[u8; 32]>().iter().map(|b| format!("{b:02x}")).collect();
        let cfg = ServerConfig {
            follow_symlinks,
            only: only.map(std::sync::Arc::new),
            token: Some(token.clone().into_bytes()),
            index_dir: Some(crate::index_home::default_for(&root.canonicalize()?)?),
            tls: Some(crate::tls::Tls::from_acceptor(acceptor)),
            ..ServerConfig::default()
        };
        let server = Server::new(root, &cfg)?;
        let any = match family {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(any, 0)).await?;
        Ok(Session { server, listener, token, pin: identity.fingerprint() })
    }

    /// The line the other end is told: connect to `host` (or `-`: the
    /// address the ssh client came from) at this session's port.
    pub fn announce(&self, host: &str) -> io::Result<String> {
        Ok(self.announce_at(host, self.port()?))
    }

    /// The line naming `host` and `port` instead: a port forwarded to
    /// this session's (`--via-ssh`).
    pub fn announce_at(&self, host: &str, port: u16) -> String {
        ddftp_proto::session::announce(host, port, &self.token, &self.pin)
    }

    /// The port it listens on.
    pub fn port(&self) -> io::Result<u16> {
        Ok(self.listener.local_addr()?.port())
    }

    /// Serves until `until` resolves.
    pub async fn run(self, until: impl Future<Output = ()> + Send + 'static) {
        self.server.run(vec![self.listener], until).await;
    }
}
