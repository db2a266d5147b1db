//! TLS for every connection the tools open: ddftpd's listener, ddftp's
//! mirrors and ddnet's links. rustls (memory-safe, no OpenSSL to link),
//! TLS 1.3 only and ALPN `ddftp`, so an HTTPS client or server reached by
//! mistake fails the handshake instead of talking past us.
//!
//! - [`server_config`]: a certificate chain and key, and with a client CA
//!   mutual TLS (a client without a certificate that CA signed is refused).
//! - [`client_config`]: the system's roots plus `--ca-file`'s, and a
//!   client certificate for mutual TLS.
//! - [`Stream`]: a connection, plain or TLS, split into halves that a
//!   reader and a writer task own. A plain one keeps its `TcpStream`
//!   halves, so the code that calls `sendfile` or `sendmsg` on the socket
//!   still can.
//!
//! Nothing here falls back to cleartext or skips verification.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

pub use rustls;
pub use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The ALPN protocol ddftp's TLS speaks.
pub const ALPN: &[u8] = b"ddftp";

/// The first byte of a TLS record carrying a handshake: what a TLS client
/// sends first, and no ddftp or ddnet frame starts with.
pub const HANDSHAKE_RECORD: u8 = 0x16;

/// A certificate, key or CA file that cannot be used, and why.
#[derive(Debug, thiserror::Error)]
#[error("{what} {path}: {why}")]
pub struct FileError {
    pub what: &'static str,
    pub path: String,
    pub why: String,
}

fn file_error(what: &'static str, path: &Path, why: impl ToString) -> FileError {
    FileError { what, path: path.display().to_string(), why: why.to_string() }
}

pub(crate) fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Every certificate in a PEM file (at least one).
pub fn read_certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, FileError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(what, path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(what, path, e))?;
    if certs.is_empty() {
        return Err(file_error(what, path, "no PEM certificate in it"));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, FileError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_error("key", path, format!("no usable PEM private key: {e}")))
}

/// `ca_file`'s certificates as trust anchors.
fn roots_from(what: &'static str, ca_file: &Path, roots: &mut RootCertStore) -> Result<(), FileError> {
    for c in read_certs(what, ca_file)? {
        roots.add(c).map_err(|e| file_error(what, ca_file, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(())
}

/// The system's trusted roots, then `ca_file`'s (a private CA).
pub fn client_roots(ca_file: Option<&Path>) -> Result<RootCertStore, FileError> {
    let mut roots = RootCertStore::empty();
    // A system store that cannot be read leaves the private CA (if any):
    // every handshake then says which certificate was not trusted.
    let native = rustls_native_certs::load_native_certs();
    for e in &native.errors {
        tracing::debug!("system certificates: {e}");
    }
    let (added, ignored) = roots.add_parsable_certificates(native.certs);
    tracing::debug!(added, ignored, "system roots");
    if let Some(path) = ca_file {
        roots_from("CA file", path, &mut roots)?;
    }
    Ok(roots)
}

/// What a client presents and trusts.
#[derive(Debug, Clone, Default)]
pub struct ClientTls<'a> {
    /// A private CA the servers' certificates may be signed by.
    pub ca_file: Option<&'a Path>,
    /// Our certificate chain and key, for servers that require one.
    pub identity: Option<(&'a Path, &'a Path)>,
}

/// The connector for ddftpd mirrors and ddnet links: TLS 1.3, ALPN
/// `ddftp`, the system's roots and `ca_file`'s.
pub fn client_config(opt: &ClientTls<'_>) -> Result<TlsConnector, FileError> {
    let roots = client_roots(opt.ca_file)?;
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("ring supports TLS 1.3")
        .with_root_certificates(roots);
    let mut config = match opt.identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(read_certs("certificate", cert)?, read_key(key)?)
            .map_err(|e| file_error("certificate", cert, format!("does not go with key {}: {e}", key.display())))?,
    };
    config.alpn_protocols = vec![ALPN.to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

/// The acceptor of a TLS listener: TLS 1.3 only, ALPN `ddftp`; with
/// `client_ca`, only clients with a certificate it signed get in.
pub fn server_config(cert: &Path, key: &Path, client_ca: Option<&Path>) -> Result<TlsAcceptor, FileError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("ring supports TLS 1.3");
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            roots_from("client CA", ca, &mut roots)?;
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider())
                .build()
                .map_err(|e| file_error("client CA", ca, e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder
        .with_single_cert(read_certs("certificate", cert)?, read_key(key)?)
        .map_err(|e| file_error("certificate", cert, format!("does not go with key {}: {e}", key.display())))?;
    Ok(acceptor(config))
}

/// A listener's acceptor from its configuration: ALPN `ddftp`, no tickets.
pub(crate) fn acceptor(mut config: ServerConfig) -> TlsAcceptor {
    config.alpn_protocols = vec![ALPN.to_vec()];
    // No resumption: every connection is a full handshake, so tickets are
    // work for nothing.
    config.send_tls13_tickets = 0;
    TlsAcceptor::from(Arc::new(config))
}

/// The name a server's certificate must carry: an address (IP SAN) or a
/// DNS name.
pub fn server_name(host: &str) -> io::Result<rustls::pki_types::ServerName<'static>> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host:?} is not a TLS server name: {e}")))
}

/// Says why a TLS handshake failed in words a user can act on: the
/// certificate problem rustls found, or what a plaintext peer looks like.
pub fn explain(e: &io::Error) -> String {
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>());
    match inner {
        Some(rustls::Error::InvalidCertificate(c)) => {
            let hint = match c {
                rustls::CertificateError::UnknownIssuer | rustls::CertificateError::BadSignature => {
                    " (not signed by a CA we trust: give the CA with --ca-file)"
                }
                rustls::CertificateError::Expired | rustls::CertificateError::ExpiredContext { .. } => " (expired)",
                rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. } => {
                    " (issued for another name than the one we connected to)"
                }
                _ => "",
            };
            format!("certificate does not verify: {c:?}{hint}")
        }
        Some(rustls::Error::InvalidMessage(_)) | Some(rustls::Error::InappropriateMessage { .. }) => {
            format!("TLS handshake failed ({e}): the peer does not speak TLS (a plaintext ddftpd or ddnet?)")
        }
        Some(rustls::Error::AlertReceived(a)) => {
            let hint = match a {
                rustls::AlertDescription::CertificateRequired => {
                    ": the server requires a client certificate (give --cert and --key)"
                }
                rustls::AlertDescription::UnknownCA | rustls::AlertDescription::BadCertificate => {
                    ": it does not trust the certificate presented to it"
                }
                rustls::AlertDescription::NoApplicationProtocol => ": it does not speak ddftp over TLS",
                _ => "",
            };
            format!("the peer refused the TLS handshake ({a:?}){hint}")
        }
        Some(other) => format!("TLS: {other}"),
        None if e.kind() == io::ErrorKind::UnexpectedEof => {
            "the peer closed the connection during the TLS handshake (a plaintext server, or it refused us)".into()
        }
        None => format!("TLS handshake: {e}"),
    }
}

/// A connection, plain or TLS.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket under it.
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::Tls(_))
    }

    /// Connects `sock` as a TLS client of `name`.
    pub async fn connect(connector: &TlsConnector, name: &str, sock: TcpStream) -> io::Result<Stream> {
        let s = connector.connect(server_name(name)?, sock).await?;
        Ok(Stream::Tls(Box::new(s.into())))
    }

    /// A reader half and a writer half, each for its own task.
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Plain(s) => {
                let (r, w) = s.into_split();
                (ReadHalf::Plain(r), WriteHalf::Plain(w))
            }
            Stream::Tls(s) => {
                let (r, w) = tokio::io::split(*s);
                (ReadHalf::Tls(r), WriteHalf::Tls(w))
            }
        }
    }

    /// The stream again from the halves [`Stream::into_split`] made of it
    /// (to use the connection for something else); `None` for halves of
    /// two streams.
    pub fn unsplit(r: ReadHalf, w: WriteHalf) -> Option<Stream> {
        match (r, w) {
            (ReadHalf::Plain(r), WriteHalf::Plain(w)) => r.reunite(w).ok().map(Stream::Plain),
            (ReadHalf::Tls(r), WriteHalf::Tls(w)) if r.is_pair_of(&w) => Some(Stream::Tls(Box::new(r.unsplit(w)))),
            _ => None,
        }
    }
}

/// The reading half of a [`Stream`].
pub enum ReadHalf {
    Plain(OwnedReadHalf),
    Tls(tokio::io::ReadHalf<tokio_rustls::TlsStream<TcpStream>>),
}

/// The writing half of a [`Stream`]. After writing, `flush` it: TLS may
/// hold the last record until then.
pub enum WriteHalf {
    Plain(OwnedWriteHalf),
    Tls(tokio::io::WriteHalf<tokio_rustls::TlsStream<TcpStream>>),
}

impl WriteHalf {
    /// The socket itself, when nothing stands between us and it.
    pub fn plain(&self) -> Option<&TcpStream> {
        match self {
            WriteHalf::Plain(w) => Some(w.as_ref()),
            WriteHalf::Tls(_) => None,
        }
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Self::Plain($s) => {
                let $s = Pin::new($s);
                $e
            }
            Self::Tls($s) => {
                let $s = Pin::new($s);
                $e
            }
        }
    };
}

/// `AsyncRead` for a plain-or-TLS type, by delegation.
macro_rules! read_by_delegation {
    ($t:ty) => {
        impl AsyncRead for $t {
            fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
                delegate!(self, s => s.poll_read(cx, buf))
            }
        }
    };
}

/// `AsyncWrite` for a plain-or-TLS type, by delegation.
macro_rules! write_by_delegation {
    ($t:ty) => {
        impl AsyncWrite for $t {
            fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
                delegate!(self, s => s.poll_write(cx, buf))
            }
            fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                delegate!(self, s => s.poll_flush(cx))
            }
            fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
                delegate!(self, s => s.poll_shutdown(cx))
            }
        }
    };
}

read_by_delegation!(Stream);
read_by_delegation!(ReadHalf);
write_by_delegation!(Stream);
write_by_delegation!(WriteHalf);

/// The subject of a peer's first certificate (`CN=..., O=...`), for logs.
pub fn subject(cert: &CertificateDer<'_>) -> String {
    crate::der::subject(cert.as_ref()).unwrap_or_else(|| "(unreadable subject)".into())
}
