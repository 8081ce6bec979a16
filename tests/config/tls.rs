//! A kubeconfig-built client against a local rustls server: the right CA verifies, a wrong CA is
//! `Error::Tls`, `tls-server-name` is honoured, `insecure-skip-tls-verify` skips verification,
//! client-certificate and bearer authentication work, a wrong token is a 401, and `proxy-url`
//! tunnels through an HTTP CONNECT proxy.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::support::config::{Certs, ServerState, b64, start_server};
use hyper::Method;
use informer::config::Kubeconfig;
use informer::{Client, Config, Error};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn client(server: &str, cluster_extra: &str, user: &str) -> informer::Result<Client> {
    let yaml = format!(
        "clusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster_extra}\
         users:\n- name: u\n  user: {{{user}}}\n\
         contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
    );
    Client::new(
        Config::from_custom_kubeconfig(Kubeconfig::from_yaml(&yaml)?, &Default::default()).await?,
    )
}

async fn get(client: &Client) -> informer::Result<serde_json::Value> {
    client.request(Method::GET, "/api", None).await
}

fn ca(pem: &str) -> String {
    format!("    certificate-authority-data: {}\n", b64(pem))
}

async fn server(certs: &Certs) -> (std::net::SocketAddr, Arc<ServerState>) {
    let state = Arc::new(ServerState {
        accept_client_cert: true,
        ..Default::default()
    });
    state
        .accepted_tokens
        .lock()
        .unwrap()
        .push("good-token".into());
    (start_server(Some(certs), state.clone()).await, state)
}

#[tokio::test]
async fn verification_and_authentication() {
    let certs = Certs::new();
    let (addr, state) = server(&certs).await;
    let url = format!("https://localhost:{}", addr.port());

    // Right CA, bearer token.
    let c = client(&url, &ca(&certs.ca_pem), "token: good-token")
        .await
        .unwrap();
    assert_eq!(get(&c).await.unwrap()["ok"], true);

    // Wrong token: 401 from the server, as an API error.
    let c = client(&url, &ca(&certs.ca_pem), "token: bad-token")
        .await
        .unwrap();
    let err = get(&c).await.unwrap_err();
    assert_eq!(err.http_code(), Some(401), "{err}");
    assert!(matches!(err, Error::Api(_)), "{err:?}");

    // Client certificate instead of a token.
    let user = format!(
        "client-certificate-data: {}, client-key-data: {}",
        b64(&certs.client_cert_pem),
        b64(&certs.client_key_pem)
    );
    let c = client(&url, &ca(&certs.ca_pem), &user).await.unwrap();
    assert_eq!(get(&c).await.unwrap()["ok"], true);

    // Wrong CA: a typed TLS error.
    let c = client(&url, &ca(&certs.other_ca_pem), "token: good-token")
        .await
        .unwrap();
    let err = get(&c).await.unwrap_err();
    assert!(matches!(err, Error::Tls(_)), "{err:?}");

    // Verification skipped: no CA needed.
    let insecure = "    insecure-skip-tls-verify: true\n";
    let c = client(&url, insecure, "token: good-token").await.unwrap();
    assert_eq!(get(&c).await.unwrap()["ok"], true);

    // Skipped verification together with a CA is refused, as client-go does (the CA was silently
    // dropped before).
    let both = format!(
        "{}    insecure-skip-tls-verify: true\n",
        ca(&certs.other_ca_pem)
    );
    let err = client(&url, &both, "token: good-token").await.unwrap_err();
    assert!(
        matches!(&err, Error::Config(m) if m.contains("insecure-skip-tls-verify together with a certificate authority")),
        "{err:?}"
    );

    // tls-server-name: the certificate is checked against it instead of the URL's host.
    let ip_url = format!("https://127.0.0.1:{}", addr.port());
    let named = format!(
        "{}    tls-server-name: kubernetes.test\n",
        ca(&certs.ca_pem)
    );
    let c = client(&ip_url, &named, "token: good-token").await.unwrap();
    assert_eq!(get(&c).await.unwrap()["ok"], true);
    let misnamed = format!("{}    tls-server-name: elsewhere.test\n", ca(&certs.ca_pem));
    let c = client(&ip_url, &misnamed, "token: good-token")
        .await
        .unwrap();
    let err = get(&c).await.unwrap_err();
    assert!(matches!(err, Error::Tls(_)), "{err:?}");

    assert!(state.requests.load(Ordering::SeqCst) >= 5);
}

/// A minimal HTTP CONNECT proxy: checks the target and credentials, then relays bytes.
async fn start_proxy(expected_auth: Option<String>) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let tunnels = Arc::new(AtomicUsize::new(0));
    let count = tunnels.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            let expected_auth = expected_auth.clone();
            let count = count.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if inbound.read_exact(&mut byte).await.is_err() {
                        return;
                    }
                    head.push(byte[0]);
                }
                let head = String::from_utf8(head).unwrap();
                let target = head
                    .strip_prefix("CONNECT ")
                    .and_then(|r| r.split(' ').next())
                    .unwrap()
                    .to_owned();
                if let Some(auth) = &expected_auth {
                    if !head.to_ascii_lowercase().contains(&format!(
                        "proxy-authorization: {}",
                        auth.to_ascii_lowercase()
                    )) {
                        let _ = inbound
                            .write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
                            .await;
                        return;
                    }
                }
                let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else {
                    return;
                };
                count.fetch_add(1, Ordering::SeqCst);
                inbound
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await
                    .unwrap();
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    (addr, tunnels)
}

#[tokio::test]
async fn proxy_url_tunnels_with_connect() {
    let certs = Certs::new();
    let (addr, _) = server(&certs).await;
    let url = format!("https://localhost:{}", addr.port());

    let (proxy, tunnels) = start_proxy(None).await;
    let extra = format!("{}    proxy-url: http://{proxy}\n", ca(&certs.ca_pem));
    let c = client(&url, &extra, "token: good-token").await.unwrap();
    assert_eq!(get(&c).await.unwrap()["ok"], true);
    assert_eq!(tunnels.load(Ordering::SeqCst), 1);

    // Credentials in the proxy URL (percent-encoded) become Proxy-Authorization.
    let (proxy, tunnels) = start_proxy(Some(format!("Basic {}", b64("us@r:p:ss")))).await;
    let extra = format!(
        "{}    proxy-url: http://us%40r:p%3Ass@{proxy}\n",
        ca(&certs.ca_pem)
    );
    let c = client(&url, &extra, "token: good-token").await.unwrap();
    assert_eq!(get(&c).await.unwrap()["ok"], true);
    assert_eq!(tunnels.load(Ordering::SeqCst), 1);

    // Wrong proxy credentials: a transport error that says so.
    let extra = format!(
        "{}    proxy-url: http://nobody:x@{proxy}\n",
        ca(&certs.ca_pem)
    );
    let c = client(&url, &extra, "token: good-token").await.unwrap();
    let err = get(&c).await.unwrap_err();
    assert!(err.to_string().contains("proxy"), "{err}");

    // Unsupported proxy schemes are refused when the client is built.
    let extra = format!("{}    proxy-url: socks5://{proxy}\n", ca(&certs.ca_pem));
    let err = client(&url, &extra, "token: good-token").await.unwrap_err();
    assert!(
        matches!(err, Error::Config(ref m) if m.contains("proxy-url")),
        "{err:?}"
    );
}
