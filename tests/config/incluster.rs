//! In-cluster configuration from a temporary folder standing in for the service-account mount:
//! URL building (IPv6 too), namespace, CA, errors naming the missing piece, and token rotation
//! picked up by the re-read interval or after a 401.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::support::config::{Certs, ServerState, TempDir, start_server};
use hyper::Method;
use informer::config::Auth;
use informer::config::{InClusterOptions, TokenFile, TokenProvider};
use informer::{Client, Config, Error};

fn mount(certs: &Certs, namespace: Option<&str>) -> TempDir {
    let dir = TempDir::new("sa");
    dir.write("token", "sa-token-1\n");
    dir.write("ca.crt", &certs.ca_pem);
    if let Some(ns) = namespace {
        dir.write("namespace", ns);
    }
    dir
}

fn options(dir: &TempDir, host: &str, port: u16, refresh: Duration) -> InClusterOptions {
    InClusterOptions {
        service_host: Some(host.into()),
        service_port: Some(port.to_string()),
        service_account_dir: dir.path().to_owned(),
        token_refresh_interval: refresh,
    }
}

fn tokens(config: &Config) -> Arc<dyn TokenProvider> {
    match &config.auth {
        Auth::Provider(p) => p.clone(),
        other => panic!("expected a token provider, got {other:?}"),
    }
}

#[tokio::test]
async fn builds_url_namespace_ca_and_token() {
    let certs = Certs::new();
    let dir = mount(&certs, Some("team-a\n"));
    let config =
        Config::incluster_with(&options(&dir, "10.96.0.1", 443, Duration::from_secs(60))).unwrap();
    assert_eq!(config.cluster_url.to_string(), "https://10.96.0.1:443/");
    assert_eq!(config.default_namespace, "team-a");
    assert_eq!(config.tls.root_certs.len(), 1);
    assert_eq!(
        tokens(&config).token().await.unwrap().expose(),
        "sa-token-1"
    );
    assert!(!format!("{config:?}").contains("sa-token-1"));

    let dir = mount(&certs, None);
    let config = Config::incluster_with(&options(
        &dir,
        "fd00:10:96::1",
        6443,
        Duration::from_secs(60),
    ))
    .unwrap();
    assert_eq!(
        config.cluster_url.to_string(),
        "https://[fd00:10:96::1]:6443/"
    );
    assert_eq!(config.default_namespace, "default");
}

#[test]
fn errors_name_what_is_missing() {
    let certs = Certs::new();
    let dir = mount(&certs, None);
    let mut opts = options(&dir, "10.0.0.1", 443, Duration::from_secs(60));
    opts.service_host = None;
    let message = Config::incluster_with(&opts).unwrap_err().to_string();
    assert!(message.contains("KUBERNETES_SERVICE_HOST"), "{message}");

    std::fs::remove_file(dir.path().join("token")).unwrap();
    let message = Config::incluster_with(&options(&dir, "10.0.0.1", 443, Duration::from_secs(60)))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(&dir.path().join("token").display().to_string()),
        "{message}"
    );

    std::fs::remove_file(dir.path().join("ca.crt")).unwrap();
    let message = Config::incluster_with(&options(&dir, "10.0.0.1", 443, Duration::from_secs(60)))
        .unwrap_err()
        .to_string();
    assert!(message.contains("ca.crt"), "{message}");

    let empty = TempDir::new("empty-token");
    empty.write("token", "  \n");
    let err = TokenFile::new(empty.path().join("token")).unwrap_err();
    assert!(
        matches!(err, Error::Config(ref m) if m.contains("empty")),
        "{err}"
    );
}

#[tokio::test]
async fn rotated_token_is_picked_up_after_the_interval() {
    let certs = Certs::new();
    let dir = mount(&certs, None);
    let path = dir.path().join("token");

    // A long interval: the rotation is not seen until the provider is invalidated (a 401).
    let slow = TokenFile::with_refresh_interval(&path, Duration::from_secs(3600)).unwrap();
    // A short one: the rotation is seen once the interval has passed.
    let fast = TokenFile::with_refresh_interval(&path, Duration::from_millis(20)).unwrap();
    std::fs::write(&path, "sa-token-2").unwrap();
    assert_eq!(slow.token().await.unwrap().expose(), "sa-token-1");
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(fast.token().await.unwrap().expose(), "sa-token-2");
    slow.invalidate();
    assert_eq!(slow.token().await.unwrap().expose(), "sa-token-2");

    // A failed re-read keeps the last good token.
    std::fs::remove_file(&path).unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(fast.token().await.unwrap().expose(), "sa-token-2");
}

#[tokio::test]
async fn a_401_rereads_the_token_file() {
    let certs = Certs::new();
    let dir = mount(&certs, None);
    let state = Arc::new(ServerState::default());
    state
        .accepted_tokens
        .lock()
        .unwrap()
        .push("sa-token-2".into());
    let addr = start_server(Some(&certs), state.clone()).await;
    let config = Config::incluster_with(&options(
        &dir,
        "localhost",
        addr.port(),
        Duration::from_secs(3600),
    ))
    .unwrap();
    let client = Client::new(config).unwrap();
    // The server already wants the rotated token.
    std::fs::write(dir.path().join("token"), "sa-token-2").unwrap();
    let answer: serde_json::Value = client.request(Method::GET, "/api", None).await.unwrap();
    assert_eq!(answer["ok"], true);
    assert_eq!(state.unauthorized.load(Ordering::SeqCst), 1);
}
