//! TLS (generated CA, ALPN h2/http1.1) and authentication (bearer token, read-only token,
//! client certificates), over real loopback connections.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use informer_sim::Simulator;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

const T: std::time::Duration = std::time::Duration::from_secs(20);

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn connect(sim: &Simulator, alpn: &[&[u8]], client: Option<(String, String)>) -> Tls {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(sim.ca_pem().unwrap().as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut cfg = match client {
        Some((cert, key)) => b
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => b.with_no_client_auth(),
    };
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await
        .expect("TLS handshake with the simulator's CA")
}

/// One HTTP/1.1 request over TLS; returns (status, body).
async fn http1(
    sim: &Simulator,
    path: &str,
    auth: Option<&str>,
    client: Option<(String, String)>,
) -> (u16, String) {
    let mut s = connect(sim, &[b"http/1.1"], client).await;
    let auth = auth
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await; // peers may skip close_notify
    let text = String::from_utf8(out).unwrap();
    let status = text[9..12].parse().unwrap();
    let body = text.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

#[tokio::test]
async fn https_with_bearer_token() {
    timeout(T * 3, async {
        let sim = Simulator::builder().tls(true).token("s3cret").start().await.unwrap();
        assert!(sim.url().starts_with("https://127.0.0.1:"));
        let (s, body) = http1(&sim, "/api/v1/pods", None, None).await;
        assert_eq!(s, 401);
        assert_eq!(
            body,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#
        );
        let (s, _) = http1(&sim, "/api/v1/pods", Some("wrong"), None).await;
        assert_eq!(s, 401);
        let (s, body) = http1(&sim, "/api/v1/pods", Some("s3cret"), None).await;
        assert_eq!(s, 200, "{body}");
        assert!(body.contains("\"kind\":\"PodList\""));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn read_only_token_gets_403_on_writes() {
    timeout(T * 3, async {
        let sim = Simulator::builder().token("admin").read_only_token("ro").start().await.unwrap();
        let addr = sim.addr();
        let body = br#"{"metadata":{"name":"a"}}"#;
        let req = format!(
            "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ro\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(req.as_bytes()).await.unwrap();
        s.write_all(body).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
        let st: Value = serde_json::from_str(out.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(st["reason"], "Forbidden");
        assert_eq!(
            st["message"],
            "configmaps is forbidden: User \"reader\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\""
        );
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /api/v1/configmaps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ro\r\nConnection: close\r\n\r\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn client_certificate_auth() {
    timeout(T * 3, async {
        let sim = Simulator::builder()
            .tls(true)
            .client_cert_auth(true)
            .start()
            .await
            .unwrap();
        let (s, _) = http1(&sim, "/api/v1/pods", None, None).await;
        assert_eq!(s, 401, "no certificate, no token");
        let cert = sim.issue_client_cert("alice").unwrap();
        assert!(cert.0.starts_with("-----BEGIN CERTIFICATE-----"));
        let (s, body) = http1(&sim, "/api/v1/pods", None, Some(cert)).await;
        assert_eq!(s, 200, "{body}");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn http2_over_alpn_lists_and_watches() {
    timeout(T * 3, async {
        let sim = Simulator::builder().tls(true).start().await.unwrap();
        sim.create("pods", Some("default"), json!({"metadata": {"name": "a"}}))
            .unwrap();
        let tls = connect(&sim, &[b"h2", b"http/1.1"], None).await;
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (mut send, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        let req = |path: &str| {
            hyper::Request::get(format!("https://127.0.0.1{path}"))
                .body(Empty::<Bytes>::new())
                .unwrap()
        };
        let resp = send.send_request(req("/api/v1/pods")).await.unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.version(), hyper::Version::HTTP_2);
        let list: Value =
            serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
        assert_eq!(list["items"][0]["metadata"]["name"], "a");
        // A watch on the same connection: the frames arrive in DATA frames.
        let rv = sim.resource_version();
        let mut resp = send
            .send_request(req(&format!("/api/v1/pods?watch=1&resourceVersion={rv}")))
            .await
            .unwrap();
        sim.create("pods", Some("default"), json!({"metadata": {"name": "b"}}))
            .unwrap();
        let mut buf = Vec::new();
        while !buf.contains(&b'\n') {
            let frame = resp.body_mut().frame().await.unwrap().unwrap();
            if let Ok(d) = frame.into_data() {
                buf.extend_from_slice(&d);
            }
        }
        let e: Value =
            serde_json::from_slice(&buf[..buf.iter().position(|b| *b == b'\n').unwrap()]).unwrap();
        assert_eq!(e["type"], "ADDED");
        assert_eq!(e["object"]["metadata"]["name"], "b");
    })
    .await
    .unwrap();
}
