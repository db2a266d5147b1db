//! TLS for HTTPS mirrors: rustls (no OpenSSL to link against, memory-safe,
//! the TLS stack of hyper's own ecosystem), with the system's trusted roots
//! plus any private CA given with `--ca-file` ([`ddnet::tls::client_roots`],
//! as for ddftps mirrors). A certificate that does not verify fails the
//! connection with rustls's reason; there is no fallback to cleartext and
//! no switch to skip verification.

use std::path::Path;
use std::sync::Arc;

use rustls::ClientConfig;
use tokio_rustls::TlsConnector;

/// A `--ca-file` that gives no usable certificate.
pub type CaFileError = ddnet::tls::FileError;

/// The connector every HTTPS lane uses: system roots, then `ca_file`'s
/// certificates (PEM), HTTP/1.1 by ALPN.
pub fn connector(ca_file: Option<&Path>) -> Result<TlsConnector, CaFileError> {
    let roots = ddnet::tls::client_roots(ca_file)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}
