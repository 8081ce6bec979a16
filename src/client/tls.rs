//! Building the rustls client configuration from [`TlsConfig`].
//!
//! The crypto provider is passed explicitly (ring), so the client never depends on a process-wide
//! default provider being installed, and never panics for want of one.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::config::{RotatingIdentity, TlsConfig};
use crate::error::{Error, Result};

/// The rustls configuration for `tls`; with `rotating` holding a certificate, handshakes present
/// its current one instead of `tls.identity` (an exec plugin's, replaced at each run).
pub(crate) fn client_config(
    tls: &TlsConfig,
    rotating: Option<Arc<RotatingIdentity>>,
) -> Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Tls(e.to_string()))?;
    let builder = if tls.accept_invalid_certs {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServerCert(
                provider.signature_verification_algorithms,
            )))
    } else {
        let mut roots = RootCertStore::empty();
        for cert in &tls.root_certs {
            roots
                .add(cert.clone())
                .map_err(|e| Error::Tls(format!("unusable certificate authority: {e}")))?;
        }
        builder.with_root_certificates(roots)
    };
    // ALPN (h2, then http/1.1) is set by hyper-rustls's `enable_all_versions`.
    let config = match (rotating.filter(|r| r.is_set()), &tls.identity) {
        (Some(rotating), _) => {
            let mut config = builder.with_client_cert_resolver(rotating);
            // A resumed TLS session keeps the certificate of the session it resumes: after a
            // rotation the server would go on seeing the old one. Full handshakes only (the
            // pool keeps its connections, so this costs one per connection opened).
            config.resumption = rustls::client::Resumption::disabled();
            config
        }
        (None, Some(id)) => builder
            .with_client_auth_cert(id.certs.clone(), id.key.clone_key())
            .map_err(|e| Error::Tls(format!("unusable client certificate or key: {e}")))?,
        (None, None) => builder.with_no_client_auth(),
    };
    Ok(config)
}

/// `insecure-skip-tls-verify`: any certificate is accepted, but handshake signatures are still
/// checked so the connection is at least to the holder of the presented key.
#[derive(Debug)]
struct AcceptAnyServerCert(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AcceptAnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}
