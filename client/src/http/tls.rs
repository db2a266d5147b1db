//! TLS for HTTPS mirrors: rustls (no OpenSSL to link against, memory-safe,
//! the TLS stack of hyper's own ecosystem), with the system's trusted roots
//! plus any private CA given with `--ca-file`. A certificate that does not
//! verify fails the connection with rustls's reason; there is no fallback
//! to cleartext and no switch to skip verification.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

/// A `--ca-file` that gives no usable certificate.
#[derive(Debug, thiserror::Error)]
#[error("CA file {path}: {why}")]
pub struct CaFileError {
    pub path: String,
    pub why: String,
}

/// The connector every HTTPS lane uses: system roots, then `ca_file`'s
/// certificates (PEM), HTTP/1.1 by ALPN.
pub fn connector(ca_file: Option<&Path>) -> Result<TlsConnector, CaFileError> {
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
        let bad = |why: String| CaFileError { path: path.display().to_string(), why };
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| bad(e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| bad(e.to_string()))?;
        if certs.is_empty() {
            return Err(bad("no PEM certificate in it".into()));
        }
        for c in certs {
            roots.add(c).map_err(|e| bad(format!("not a usable CA certificate: {e}")))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}
