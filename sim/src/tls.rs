//! TLS material generated at start: a CA, a server certificate for `127.0.0.1` and `localhost`
//! signed by it, and client certificates on demand (for client-certificate auth).
//!
//! The server asks for a client certificate but does not require one: a verified certificate
//! (signed by this CA) authenticates the connection; without one, bearer-token auth applies.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

fn err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("tls setup: {e}"))
}

/// The simulator's CA and server configuration.
pub(crate) struct TlsMaterial {
    pub ca_pem: String,
    ca_cert: Certificate,
    ca_key: KeyPair,
    pub acceptor: tokio_rustls::TlsAcceptor,
}

impl TlsMaterial {
    pub fn generate() -> std::io::Result<TlsMaterial> {
        let ca_key = KeyPair::generate().map_err(err)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "informer-sim-ca");
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca.self_signed(&ca_key).map_err(err)?;

        let key = KeyPair::generate().map_err(err)?;
        let mut p = CertificateParams::new(vec!["localhost".to_string()]).map_err(err)?;
        p.subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        p.distinguished_name
            .push(DnType::CommonName, "informer-sim");
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = p.signed_by(&key, &ca_cert, &ca_key).map_err(err)?;

        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca_cert.der().clone()).map_err(err)?;
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .map_err(err)?;
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(err)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![cert.der().clone(), ca_cert.der().clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(err)?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(TlsMaterial {
            ca_pem: ca_cert.pem(),
            ca_cert,
            ca_key,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(cfg)),
        })
    }

    /// A client certificate (PEM) and its PKCS#8 key (PEM) for common name `cn`, signed by the CA.
    pub fn issue_client_cert(&self, cn: &str) -> std::io::Result<(String, String)> {
        let key = KeyPair::generate().map_err(err)?;
        let mut p = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p
            .signed_by(&key, &self.ca_cert, &self.ca_key)
            .map_err(err)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}
