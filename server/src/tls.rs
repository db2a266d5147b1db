//! A TLS listener's side of a new connection (`--tls-cert`, `--tls-key`,
//! `--client-ca`): the handshake, within [`HANDSHAKE_TIMEOUT`], before any
//! request is read. A client that speaks plaintext to it is told so in
//! plaintext (it could read nothing else) and closed; with a client CA, a
//! client without a certificate that CA signed never gets past the
//! handshake, and the subject of one that does is logged.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use ddftp_proto::ErrorCode;
use ddnet::tls::{Stream, TlsAcceptor, HANDSHAKE_RECORD};
use tokio::net::TcpStream;

use crate::connection::{self, ConnError};
use crate::metrics::{Metrics, Refusal};

/// How long a client may take to complete the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A listener's TLS: its certificate and whether clients need one too.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
    mutual: bool,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("mutual", &self.mutual).finish_non_exhaustive()
    }
}

impl Tls {
    /// TLS 1.3 with `cert` and `key` (PEM); with `client_ca`, mutual TLS.
    pub fn new(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<Tls, ddnet::tls::FileError> {
        Ok(Tls { acceptor: ddnet::tls::server_config(cert, key, client_ca)?, mutual: client_ca.is_some() })
    }

    /// TLS with an acceptor made elsewhere (a session's own certificate),
    /// no client certificates.
    pub fn from_acceptor(acceptor: TlsAcceptor) -> Tls {
        Tls { acceptor, mutual: false }
    }
}

/// `sock` as the connection a handler reads requests from: as it is
/// without TLS, after a handshake with it; and the subject of the client's
/// certificate (mutual TLS). Handshakes are counted in `metrics` if given.
pub async fn accept(
    sock: TcpStream,
    tls: Option<&Tls>,
    peer: SocketAddr,
    metrics: Option<&Metrics>,
) -> Result<(Stream, Option<String>), ConnError> {
    let Some(tls) = tls else { return Ok((Stream::Plain(sock), None)) };
    let handshake = async {
        let mut first = [0u8; 1];
        let n = sock.peek(&mut first).await?;
        if n == 0 {
            return Err(ConnError::Io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        if first[0] != HANDSHAKE_RECORD {
            let why = "this server speaks TLS only: connect with ddftps://HOST:PORT (or --tls)";
            let _ = connection::refuse(Stream::Plain(sock), ErrorCode::Forbidden, why.into()).await;
            return Err(ConnError::Refused("a plaintext client on this TLS listener".into()));
        }
        let s = tls.acceptor.accept(sock).await.map_err(|e| ConnError::Tls(ddnet::tls::explain(&e)))?;
        let mut subject = None;
        if tls.mutual {
            subject = s.get_ref().1.peer_certificates().and_then(|c| c.first()).map(ddnet::tls::subject);
            tracing::debug!(%peer, subject = subject.as_deref().unwrap_or("?"), "client certificate");
        }
        Ok((Stream::Tls(Box::new(s.into())), subject))
    };
    let r = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake)
        .await
        .unwrap_or_else(|_| Err(ConnError::Tls(format!("no handshake within {} s", HANDSHAKE_TIMEOUT.as_secs()))));
    if let Some(m) = metrics {
        m.tls_handshake(r.is_ok());
        if r.is_err() {
            m.refused(Refusal::Tls);
        }
    }
    r
}
