//! Helpers shared by the `config_*` tests: temporary folders, test certificates (rcgen) and a tiny
//! HTTPS/HTTP server that answers 200 to accepted credentials and 401 otherwise.
#![allow(dead_code)] // each test file uses a different part

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{CertificateParams, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A folder under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!(
            "informer-{tag}-{}-{n}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
    pub fn write(&self, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, content).unwrap();
        path
    }
    /// Writes an executable script.
    pub fn script(&self, name: &str, body: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.write(name, format!("#!/bin/bash\n{body}\n"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A CA, a server certificate it signed (localhost, 127.0.0.1), a client certificate it signed,
/// and an unrelated CA.
pub struct Certs {
    pub ca_pem: String,
    pub server_cert_pem: String,
    pub server_key_pem: String,
    pub client_cert_pem: String,
    pub client_key_pem: String,
    /// A second client certificate of the same CA (a rotated one).
    pub rotated_cert_pem: String,
    pub rotated_key_pem: String,
    pub other_ca_pem: String,
}

impl Certs {
    pub fn new() -> Certs {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test-ca");
        let ca = ca_params.self_signed(&ca_key).unwrap();

        let server_key = KeyPair::generate().unwrap();
        let server_params = CertificateParams::new(vec![
            "localhost".into(),
            "127.0.0.1".into(),
            "kubernetes.test".into(),
        ])
        .unwrap();
        let server = server_params.signed_by(&server_key, &ca, &ca_key).unwrap();

        let client_key = KeyPair::generate().unwrap();
        let mut client_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        client_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "test-user");
        let client = client_params
            .clone()
            .signed_by(&client_key, &ca, &ca_key)
            .unwrap();
        let rotated_key = KeyPair::generate().unwrap();
        let rotated = client_params.signed_by(&rotated_key, &ca, &ca_key).unwrap();

        let other_key = KeyPair::generate().unwrap();
        let mut other_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        other_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let other = other_params.self_signed(&other_key).unwrap();

        Certs {
            ca_pem: ca.pem(),
            server_cert_pem: server.pem(),
            server_key_pem: server_key.serialize_pem(),
            client_cert_pem: client.pem(),
            client_key_pem: client_key.serialize_pem(),
            rotated_cert_pem: rotated.pem(),
            rotated_key_pem: rotated_key.serialize_pem(),
            other_ca_pem: other.pem(),
        }
    }
}

pub fn b64(data: impl AsRef<[u8]>) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// What the test server accepts and what it saw.
#[derive(Default)]
pub struct ServerState {
    /// Bearer tokens answered with 200.
    pub accepted_tokens: Mutex<Vec<String>>,
    /// Also accept requests whose TLS client presented a certificate the CA signed.
    pub accept_client_cert: bool,
    /// Client certificates (DER) answered with 401 although the CA signed them (expired ones).
    pub revoked_certs: Mutex<Vec<Vec<u8>>>,
    pub requests: AtomicUsize,
    pub unauthorized: AtomicUsize,
}

/// Starts a server on 127.0.0.1: HTTPS with `certs` (client certificates requested, verified
/// against the CA, optional) or plain HTTP. It answers `{"ok":true}` or a 401 Status.
pub async fn start_server(certs: Option<&Certs>, state: Arc<ServerState>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = certs.map(|c| {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(c.ca_pem.as_bytes()).unwrap())
            .unwrap();
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_single_cert(
                vec![CertificateDer::from_pem_slice(c.server_cert_pem.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(c.server_key_pem.as_bytes()).unwrap(),
            )
            .unwrap();
        tokio_rustls::TlsAcceptor::from(Arc::new(config))
    });
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let state = state.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                match acceptor {
                    Some(acceptor) => {
                        let Ok(tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        let cert = tls
                            .get_ref()
                            .1
                            .peer_certificates()
                            .and_then(|c| c.first())
                            .map(|c| c.to_vec());
                        serve(TokioIo::new(tls), state, cert).await;
                    }
                    None => serve(TokioIo::new(tcp), state, None).await,
                }
            });
        }
    });
    addr
}

/// Serves one connection; `cert` is the client certificate its TLS handshake presented, checked
/// against the revoked ones at each request.
async fn serve<IO>(io: TokioIo<IO>, state: Arc<ServerState>, cert: Option<Vec<u8>>)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
        let state = state.clone();
        let has_cert = cert
            .as_ref()
            .is_some_and(|c| !state.revoked_certs.lock().unwrap().contains(c));
        async move {
            state.requests.fetch_add(1, Ordering::SeqCst);
            let token = req
                .headers()
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(str::to_owned);
            let ok = (state.accept_client_cert && has_cert)
                || token.is_some_and(|t| state.accepted_tokens.lock().unwrap().contains(&t));
            let (code, body) = if ok {
                (200, r#"{"ok":true}"#.to_owned())
            } else {
                state.unauthorized.fetch_add(1, Ordering::SeqCst);
                (
                    401,
                    r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#.to_owned(),
                )
            };
            Ok::<_, std::convert::Infallible>(
                Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body)))
                    .unwrap(),
            )
        }
    });
    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
        .serve_connection(io, service)
        .await;
}
