//! Helpers for the tests against a real kube-apiserver (started by `../shared/real-apiserver/start`,
//! which exports `REAL_APISERVER_*`): connection settings, a fresh namespace per test, JSON writes,
//! polling, and etcd compaction.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use informer::config::parse_certificates;
use informer::config::{Auth, Identity, Secret};
use informer::reflector::{BackoffOptions, ReflectorOptions};
use informer::{Api, Client, Config, ConfigMap, Informer, ListParams, Object};
use serde_json::{Value, json};

/// How to run the suite, printed by every test that skips.
pub const HOW_TO_RUN: &str =
    "eval \"$(../shared/real-apiserver/start)\" && cargo test --test real_apiserver";

/// The real server's coordinates, from the environment.
#[derive(Clone, Debug)]
pub struct Real {
    pub url: String,
    pub token: String,
    pub ca_pem: Vec<u8>,
    pub client_cert_pem: Vec<u8>,
    pub client_key_pem: Vec<u8>,
    pub kubeconfig: String,
    pub etcd_url: String,
    pub run_dir: String,
}

impl Real {
    /// The server from `REAL_APISERVER_*`, or `None` (after printing how to run) when unset.
    pub fn from_env(test: &str) -> Option<Real> {
        let Ok(url) = std::env::var("REAL_APISERVER_URL") else {
            println!("{test}: skipped, no real apiserver; run: {HOW_TO_RUN}");
            return None;
        };
        let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is not set"));
        let read = |k: &str| {
            let p = var(k);
            std::fs::read(&p).unwrap_or_else(|e| panic!("{k}={p}: {e}"))
        };
        Some(Real {
            url,
            token: var("REAL_APISERVER_TOKEN"),
            ca_pem: read("REAL_APISERVER_CA"),
            client_cert_pem: read("REAL_APISERVER_CLIENT_CERT"),
            client_key_pem: read("REAL_APISERVER_CLIENT_KEY"),
            kubeconfig: var("REAL_APISERVER_KUBECONFIG"),
            etcd_url: var("REAL_APISERVER_ETCD_URL"),
            run_dir: std::env::var("REAL_APISERVER_RUN")
                .unwrap_or_else(|_| "/tmp/real-apiserver-run".into()),
        })
    }

    /// Verifies the server with its CA, no credentials yet.
    pub fn config_without_auth(&self) -> Config {
        let mut c = Config::new(self.url.parse().unwrap());
        c.tls.root_certs = parse_certificates(&self.ca_pem).unwrap();
        c.request_timeout = Duration::from_secs(30);
        c
    }

    /// CA + bearer token.
    pub fn config(&self) -> Config {
        let mut c = self.config_without_auth();
        c.auth = Auth::Bearer(Secret::new(self.token.clone()));
        c
    }

    /// CA + client certificate (x509 authentication, `O=system:masters`).
    pub fn cert_config(&self) -> Config {
        let mut c = self.config_without_auth();
        c.tls.identity =
            Some(Identity::from_pem(&self.client_cert_pem, &self.client_key_pem).unwrap());
        c
    }

    pub fn client(&self) -> Client {
        Client::new(self.config()).unwrap()
    }

    /// A bearer-token config for an `http://` front of the server that speaks HTTP/1.1 only, as
    /// a TLS-terminating proxy without HTTP/2 does: a relay on loopback takes plain connections
    /// and carries each over TLS to the server (its certificate checked with the CA, ALPN
    /// `http/1.1` only). The relay runs until the test's runtime ends.
    pub async fn http1_front_config(&self) -> Config {
        let mut roots = rustls::RootCertStore::empty();
        for ca in parse_certificates(&self.ca_pem).unwrap() {
            roots.add(ca).unwrap();
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls));
        let upstream: hyper::Uri = self.url.parse().unwrap();
        let host = upstream.host().unwrap().to_owned();
        let port = upstream.port_u16().unwrap_or(443);
        let name = rustls::pki_types::ServerName::try_from(host.clone()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let front = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let (connector, name, host) = (connector.clone(), name.clone(), host.clone());
                tokio::spawn(async move {
                    let Ok(tcp) = tokio::net::TcpStream::connect((host.as_str(), port)).await
                    else {
                        return;
                    };
                    let Ok(mut outbound) = connector.connect(name, tcp).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
            }
        });
        let mut c = Config::new(format!("http://{front}").parse().unwrap());
        c.auth = Auth::Bearer(Secret::new(self.token.clone()));
        c.request_timeout = Duration::from_secs(30);
        c
    }
}

/// Skips the test (returns) when no real server is configured.
macro_rules! real_or_skip {
    ($name:expr) => {
        match crate::support::real_apiserver::Real::from_env($name) {
            Some(r) => r,
            None => return,
        }
    };
}

/// Runs a test body with a hard time limit, so a hung watch fails the test instead of CI.
pub async fn bounded<F: Future<Output = ()>>(secs: u64, body: F) {
    if tokio::time::timeout(Duration::from_secs(secs), body)
        .await
        .is_err()
    {
        panic!("test did not finish within {secs} s");
    }
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Creates a fresh namespace `<prefix>-<pid>-<n>-<time>`; deleted namespaces stay Terminating on a
/// server without controllers, so names are never reused.
pub async fn namespace(client: &Client, prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let name = format!(
        "{prefix}-{}-{}-{:x}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        nanos
    );
    post(
        client,
        "/api/v1/namespaces",
        json!({"metadata": {"name": name}}),
    )
    .await;
    name
}

async fn write(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<Value>,
    ct: &'static str,
) -> Value {
    let body = body.map(|b| (Bytes::from(serde_json::to_vec(&b).unwrap()), ct));
    let what = format!("{method} {path}");
    client
        .request::<Value>(method, path, body)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// POST a JSON object; panics on failure.
pub async fn post(client: &Client, path: &str, body: Value) -> Value {
    write(client, Method::POST, path, Some(body), "application/json").await
}

/// PUT a JSON object; panics on failure.
pub async fn put(client: &Client, path: &str, body: Value) -> Value {
    write(client, Method::PUT, path, Some(body), "application/json").await
}

/// JSON merge patch; panics on failure.
pub async fn merge_patch(client: &Client, path: &str, body: Value) -> Value {
    write(
        client,
        Method::PATCH,
        path,
        Some(body),
        "application/merge-patch+json",
    )
    .await
}

/// DELETE; panics on failure.
pub async fn delete(client: &Client, path: &str) -> Value {
    write(client, Method::DELETE, path, None, "application/json").await
}

/// GET; panics on failure.
pub async fn get(client: &Client, path: &str) -> Value {
    write(client, Method::GET, path, None, "application/json").await
}

/// A ConfigMap body.
pub fn configmap(name: &str, labels: Value, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": data})
}

/// `/api/v1/namespaces/{ns}/configmaps[/{name}]`.
pub fn cm_path(ns: &str, name: Option<&str>) -> String {
    match name {
        Some(n) => format!("/api/v1/namespaces/{ns}/configmaps/{n}"),
        None => format!("/api/v1/namespaces/{ns}/configmaps"),
    }
}

/// The object's `metadata.resourceVersion` as a number (for ordering checks only).
pub fn rv_of(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no numeric resourceVersion in {v}"))
}

/// Reflector timings for tests: short watches, quick backoff, small pages.
pub fn fast_options() -> ReflectorOptions {
    ReflectorOptions {
        min_watch_timeout: Duration::from_secs(10),
        idle_timeout: Some(Duration::from_secs(30)),
        backoff: BackoffOptions {
            initial: Duration::from_millis(20),
            max: Duration::from_millis(500),
            ..Default::default()
        },
        page_size: 3,
        ..Default::default()
    }
}

/// Polls `f` every 20 ms until it holds or `secs` pass; returns whether it held.
pub async fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if f() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `etcdctl compact <rev>` against the server's etcd (all history before `rev` is gone).
pub fn compact_etcd(real: &Real, rev: u64) {
    let out = std::process::Command::new("etcdctl")
        .env("ETCDCTL_API", "3")
        .args(["--endpoints", &real.etcd_url, "compact", &rev.to_string()])
        .output()
        .expect("etcdctl (installed by the start script)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Compacting at or below an earlier compaction is harmless for the tests.
    assert!(
        out.status.success() || stderr.contains("required revision has been compacted"),
        "etcdctl compact {rev}: {stderr}"
    );
}

/// key -> resourceVersion, as the server lists it now.
pub async fn server_state(cms: &Api<ConfigMap>) -> BTreeMap<String, String> {
    let list = cms.list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .map(|o| (o.meta().key(), o.meta().resource_version.to_string()))
        .collect()
}

/// key -> resourceVersion, as the informer's store holds it now.
pub fn store_state(inf: &Informer<ConfigMap>) -> BTreeMap<String, String> {
    inf.store()
        .list()
        .iter()
        .map(|o| (o.meta().key(), o.meta().resource_version.to_string()))
        .collect()
}
