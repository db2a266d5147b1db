//! TLS between two ends that met over another channel (ssh): the serving
//! end makes a certificate of its own for this session alone and tells
//! the other end its SHA-256 over that channel; the other end accepts
//! that certificate and no other, whatever name or CA it shows. Nothing
//! is written to disk and no CA is involved: the channel that carried the
//! fingerprint (ssh, with its host keys) vouches for it.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};
use sha2::{Digest, Sha256};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use crate::tls::{acceptor, provider, ALPN};

/// A certificate's fingerprint: SHA-256 of its DER.
pub type Fingerprint = [u8; 32];

/// The fingerprint of `cert`.
pub fn fingerprint(cert: &CertificateDer<'_>) -> Fingerprint {
    Sha256::digest(cert.as_ref()).into()
}

/// A certificate and key made for one session.
pub struct Identity {
    cert: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl Identity {
    /// A new self-signed certificate (ECDSA P-256) and its key.
    pub fn generate() -> Result<Identity, rcgen::Error> {
        let key = rcgen::KeyPair::generate()?;
        let cert = rcgen::CertificateParams::new(vec!["ddftp-session".to_string()])?.self_signed(&key)?;
        Ok(Identity { cert: cert.der().clone(), key: PrivatePkcs8KeyDer::from(key.serialize_der()) })
    }

    /// What the other end pins.
    pub fn fingerprint(&self) -> Fingerprint {
        fingerprint(&self.cert)
    }

    /// The acceptor of a listener with this identity (TLS 1.3, ALPN `ddftp`).
    pub fn acceptor(&self) -> Result<TlsAcceptor, rustls::Error> {
        let config = ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(vec![self.cert.clone()], PrivateKeyDer::Pkcs8(self.key.clone_key()))?;
        Ok(acceptor(config))
    }
}

/// The connector of a client that accepts the server whose certificate
/// has `pin` as its fingerprint, and no other.
pub fn connector(pin: Fingerprint) -> TlsConnector {
    TlsConnector::from(client_config(pin))
}

/// [`connector`]'s configuration (for a blocking client too).
pub fn client_config(pin: Fingerprint) -> Arc<ClientConfig> {
    let provider = provider();
    let verifier = Pinned { pin, algorithms: provider.signature_verification_algorithms };
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("ring supports TLS 1.3")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    config.alpn_protocols = vec![ALPN.to_vec()];
    Arc::new(config)
}

/// Accepts one certificate, by fingerprint; the handshake's signatures are
/// still checked against it (the server proves it holds the key).
#[derive(Debug)]
struct Pinned {
    pin: Fingerprint,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match fingerprint(end_entity) == self.pin {
            true => Ok(ServerCertVerified::assertion()),
            false => Err(rustls::Error::InvalidCertificate(rustls::CertificateError::ApplicationVerificationFailure)),
        }
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // TLS 1.3 only: never asked.
        Err(rustls::Error::PeerIncompatible(rustls::PeerIncompatible::Tls12NotOffered))
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pinned client completes a handshake with the identity it pins and
    /// fails with any other.
    #[tokio::test]
    async fn only_the_pinned_certificate_is_accepted() {
        let (a, b) = (Identity::generate().unwrap(), Identity::generate().unwrap());
        assert_ne!(a.fingerprint(), b.fingerprint());
        for (pin, ok) in [(a.fingerprint(), true), (b.fingerprint(), false)] {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let at = l.local_addr().unwrap();
            let acc = a.acceptor().unwrap();
            let server = tokio::spawn(async move {
                let (s, _) = l.accept().await.unwrap();
                acc.accept(s).await.is_ok()
            });
            let s = tokio::net::TcpStream::connect(at).await.unwrap();
            let name = ServerName::try_from("127.0.0.1").unwrap();
            let client = connector(pin).connect(name, s).await;
            assert_eq!(client.is_ok(), ok);
            assert_eq!(server.await.unwrap(), ok);
        }
    }
}
