//! Exec credential plugins, with bash scripts standing in for real plugins: the first token, the
//! cache and its expiry, refresh on 401 through the client, failures with stderr, a missing binary
//! with its installHint, v1 and v1beta1, cluster info, and a client certificate used for TLS.
//!
//! Scripts run as `bash SCRIPT` rather than being executed directly: executing a file just written
//! while another test thread forks can fail with ETXTBSY.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::support::config::{Certs, ServerState, TempDir, b64, start_server};
use hyper::Method;
use informer::config::Auth;
use informer::config::{Kubeconfig, TokenProvider};
use informer::{Client, Config, Error};

const V1: &str = "client.authentication.k8s.io/v1";
const V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// A plugin that counts its runs in `count`, saves `KUBERNETES_EXEC_INFO` and prints token
/// `tok-N` with the expiry in `$EXPIRY` (none if empty) under `$API_VERSION`.
fn counting_plugin(dir: &TempDir) -> std::path::PathBuf {
    dir.script(
        "plugin",
        &format!(
            r#"d={dir}
n=$(( $(cat $d/count 2>/dev/null || echo 0) + 1 ))
echo $n > $d/count
printf '%s' "$KUBERNETES_EXEC_INFO" > $d/info-$n.json
exp=""
if [ -n "$EXPIRY" ]; then exp=",\"expirationTimestamp\":\"$EXPIRY\""; fi
echo "{{\"apiVersion\":\"$API_VERSION\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"tok-$n\"$exp}}}}""#,
            dir = dir.path().display()
        ),
    )
}

fn runs(dir: &TempDir) -> u32 {
    std::fs::read_to_string(dir.path().join("count"))
        .map(|s| s.trim().parse().unwrap())
        .unwrap_or(0)
}

fn kubeconfig(server: &str, cluster_extra: &str, exec: &str) -> Kubeconfig {
    Kubeconfig::from_yaml(&format!(
        "clusters:\n- name: c\n  cluster:\n    server: {server}\n{cluster_extra}\
         users:\n- name: u\n  user:\n    exec:\n{exec}\
         contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
    ))
    .unwrap()
}

fn exec_yaml(script: &Path, api_version: &str, expiry: &str) -> String {
    format!(
        "      apiVersion: {api_version}\n      command: /bin/bash\n      args: ['{}']\n      env:\n      - {{name: EXPIRY, value: '{expiry}'}}\n      - {{name: API_VERSION, value: {api_version}}}\n      interactiveMode: Never\n",
        script.display()
    )
}

async fn load(kubeconfig: Kubeconfig) -> informer::Result<Config> {
    Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await
}

fn provider(config: &Config) -> Arc<dyn TokenProvider> {
    match &config.auth {
        Auth::Provider(p) => p.clone(),
        other => panic!("expected a token provider, got {other:?}"),
    }
}

fn rfc3339_in(seconds: i64) -> String {
    let out = std::process::Command::new("date")
        .args([
            "-u",
            "-d",
            &format!("{seconds} seconds"),
            "+%Y-%m-%dT%H:%M:%SZ",
        ])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test]
async fn token_without_expiry_is_cached_until_invalidated() {
    let dir = TempDir::new("exec-cache");
    let plugin = counting_plugin(&dir);
    let config = load(kubeconfig(
        "http://127.0.0.1:1",
        "",
        &exec_yaml(&plugin, V1, ""),
    ))
    .await
    .unwrap();
    assert_eq!(
        runs(&dir),
        1,
        "the plugin runs once when the config is built"
    );
    let tokens = provider(&config);
    assert_eq!(tokens.token().await.unwrap().expose(), "tok-1");
    assert_eq!(tokens.token().await.unwrap().expose(), "tok-1");
    assert_eq!(runs(&dir), 1);
    tokens.invalidate();
    assert_eq!(tokens.token().await.unwrap().expose(), "tok-2");
    assert_eq!(runs(&dir), 2);
    // The token is not in Debug output.
    let debug = format!("{config:?}");
    assert!(!debug.contains("tok-"), "{debug}");
}

#[tokio::test]
async fn expiry_drives_refresh() {
    // Far from expiry: cached.
    let dir = TempDir::new("exec-far");
    let plugin = counting_plugin(&dir);
    let config = load(kubeconfig(
        "http://127.0.0.1:1",
        "",
        &exec_yaml(&plugin, V1, &rfc3339_in(3600)),
    ))
    .await
    .unwrap();
    let tokens = provider(&config);
    tokens.token().await.unwrap();
    tokens.token().await.unwrap();
    assert_eq!(runs(&dir), 1);

    // Within the refresh margin of its expiry (or past it): every use runs the plugin again.
    for seconds in [30, -30] {
        let dir = TempDir::new("exec-near");
        let plugin = counting_plugin(&dir);
        let config = load(kubeconfig(
            "http://127.0.0.1:1",
            "",
            &exec_yaml(&plugin, V1BETA1, &rfc3339_in(seconds)),
        ))
        .await
        .unwrap();
        let tokens = provider(&config);
        assert_eq!(tokens.token().await.unwrap().expose(), "tok-2");
        assert_eq!(tokens.token().await.unwrap().expose(), "tok-3");
    }
}

#[tokio::test]
async fn a_401_runs_the_plugin_again_and_retries_once() {
    let dir = TempDir::new("exec-401");
    let plugin = counting_plugin(&dir);
    let state = Arc::new(ServerState::default());
    state.accepted_tokens.lock().unwrap().push("tok-2".into());
    let addr = start_server(None, state.clone()).await;
    let config = load(kubeconfig(
        &format!("http://{addr}"),
        "",
        &exec_yaml(&plugin, V1, ""),
    ))
    .await
    .unwrap();
    let client = Client::new(config).unwrap();
    let answer: serde_json::Value = client.request(Method::GET, "/api", None).await.unwrap();
    assert_eq!(answer["ok"], true);
    assert_eq!(state.unauthorized.load(Ordering::SeqCst), 1);
    assert_eq!(runs(&dir), 2);

    // A token the server never accepts: one retry, then the 401 is the caller's.
    state.accepted_tokens.lock().unwrap().clear();
    let err = client
        .request::<serde_json::Value>(Method::GET, "/api", None)
        .await
        .unwrap_err();
    assert_eq!(err.http_code(), Some(401), "{err}");
    assert_eq!(state.unauthorized.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn failures_show_exit_status_and_stderr() {
    let dir = TempDir::new("exec-fail");
    let plugin = dir.script(
        "plugin",
        "echo 'partial output'\necho 'error: refresh token expired, run login' >&2\nexit 3",
    );
    let err = load(kubeconfig(
        "http://127.0.0.1:1",
        "",
        &exec_yaml(&plugin, V1, ""),
    ))
    .await
    .unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::Config(_)));
    assert!(
        message.contains("refresh token expired, run login"),
        "{message}"
    );
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("user \"u\""), "{message}");

    let bad_output = [
        ("echo not json", "not an ExecCredential"),
        (
            r#"echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t"}}'"#,
            "apiVersion",
        ),
        (
            r#"echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}}'"#,
            "neither a token",
        ),
        (
            r#"echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"sekrit","expirationTimestamp":"tomorrow"}}'"#,
            "expirationTimestamp",
        ),
    ];
    for (body, expected) in bad_output {
        let plugin = dir.script("bad", body);
        let message = load(kubeconfig(
            "http://127.0.0.1:1",
            "",
            &exec_yaml(&plugin, V1, ""),
        ))
        .await
        .unwrap_err()
        .to_string();
        assert!(
            message.contains(expected),
            "{message:?} should contain {expected:?}"
        );
        assert!(!message.contains("sekrit"), "{message}");
    }
}

#[tokio::test]
async fn missing_binary_shows_the_install_hint() {
    let exec = "      apiVersion: client.authentication.k8s.io/v1\n      command: informer-test-no-such-plugin\n      installHint: |\n        Install it with `brew install no-such-plugin`.\n";
    let message = load(kubeconfig("http://127.0.0.1:1", "", exec))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("informer-test-no-such-plugin"),
        "{message}"
    );
    assert!(message.contains("brew install no-such-plugin"), "{message}");
}

#[tokio::test]
async fn cluster_info_is_passed_when_asked() {
    let certs = Certs::new();
    let dir = TempDir::new("exec-info");
    let plugin = counting_plugin(&dir);
    let cluster_extra = format!(
        "    certificate-authority-data: {}\n    tls-server-name: kubernetes.test\n    extensions:\n    - name: client.authentication.k8s.io/exec\n      extension: {{audience: sts}}\n",
        b64(&certs.ca_pem)
    );
    let exec = format!(
        "{}      provideClusterInfo: true\n",
        exec_yaml(&plugin, V1BETA1, "")
    );
    load(kubeconfig("https://127.0.0.1:6443", &cluster_extra, &exec))
        .await
        .unwrap();
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("info-1.json")).unwrap())
            .unwrap();
    assert_eq!(info["apiVersion"], V1BETA1);
    assert_eq!(info["kind"], "ExecCredential");
    assert_eq!(info["spec"]["interactive"], false);
    let cluster = &info["spec"]["cluster"];
    assert_eq!(cluster["server"], "https://127.0.0.1:6443");
    assert_eq!(cluster["tls-server-name"], "kubernetes.test");
    assert_eq!(cluster["certificate-authority-data"], b64(&certs.ca_pem));
    assert_eq!(cluster["config"]["audience"], "sts");

    // Without provideClusterInfo only `interactive` is sent.
    let dir = TempDir::new("exec-noinfo");
    let plugin = counting_plugin(&dir);
    load(kubeconfig(
        "https://127.0.0.1:6443",
        &cluster_extra,
        &exec_yaml(&plugin, V1, ""),
    ))
    .await
    .unwrap();
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("info-1.json")).unwrap())
            .unwrap();
    assert_eq!(info["apiVersion"], V1);
    assert!(info["spec"].get("cluster").is_none(), "{info}");
}

/// A plugin in `dir` that prints `dir`'s `cert.pem` and `key.pem` (the client certificate of
/// `certs` to begin with) as its credential and counts its runs ([`runs`]), a TLS server that
/// accepts the client certificates `certs`' CA signed, and the `Config` of a kubeconfig joining
/// them.
async fn certificate_plugin(certs: &Certs, dir: &TempDir) -> (Arc<ServerState>, Config) {
    dir.write("cert.pem", &certs.client_cert_pem);
    dir.write("key.pem", &certs.client_key_pem);
    let plugin = dir.script(
        "plugin",
        &format!(
            r#"cd {}
echo $(( $(cat count 2>/dev/null || echo 0) + 1 )) > count
python3 -c 'import json; print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {{"clientCertificateData": open("cert.pem").read(), "clientKeyData": open("key.pem").read()}}}}))'"#,
            dir.path().display()
        ),
    );
    let state = Arc::new(ServerState {
        accept_client_cert: true,
        ..Default::default()
    });
    let addr = start_server(Some(certs), state.clone()).await;
    let cluster_extra = format!("    certificate-authority-data: {}\n", b64(&certs.ca_pem));
    let exec = format!(
        "      apiVersion: {V1}\n      command: /bin/bash\n      args: ['{}']\n",
        plugin.display()
    );
    let config = load(kubeconfig(
        &format!("https://localhost:{}", addr.port()),
        &cluster_extra,
        &exec,
    ))
    .await
    .unwrap();
    (state, config)
}

#[tokio::test]
async fn client_certificate_from_the_plugin_is_used_for_tls() {
    let certs = Certs::new();
    let dir = TempDir::new("exec-cert");
    let (state, config) = certificate_plugin(&certs, &dir).await;
    assert!(config.tls.identity.is_some());
    // The plugin stays the provider (it runs again on a 401 or before an expiry), with no token
    // to send: the server accepts the request by its certificate alone.
    assert!(
        matches!(config.auth, Auth::Provider(_)),
        "the plugin's provider: {:?}",
        config.auth
    );
    assert!(!format!("{config:?}").contains("PRIVATE KEY"));
    let client = Client::new(config).unwrap();
    let answer: serde_json::Value = client.request(Method::GET, "/api", None).await.unwrap();
    assert_eq!(answer["ok"], true);
    assert_eq!(state.unauthorized.load(Ordering::SeqCst), 0);
}

/// A provider running `script` with bash, stdin closed and stderr captured.
fn script_provider(script: &Path) -> informer::config::ExecCredentialProvider {
    let exec = informer::config::ExecConfig {
        api_version: Some(V1.into()),
        command: "/bin/bash".into(),
        args: vec![script.display().to_string()],
        interactive_mode: Some(informer::config::InteractiveMode::Never),
        ..Default::default()
    };
    informer::config::ExecCredentialProvider::new("u", &exec, None).unwrap()
}

// A paused clock: the 60 s limit passes as soon as the runtime has nothing else to do.
#[tokio::test(start_paused = true)]
async fn a_plugin_that_hangs_is_killed_after_the_timeout() {
    let dir = TempDir::new("exec-hang");
    let script = dir.script("plugin", "exec sleep 100000");
    let provider = script_provider(&script);
    let started = tokio::time::Instant::now();
    let err = provider.credential().await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, Error::Config(_)), "{err:?}");
    assert!(
        message.contains("did not finish within 60 s and was killed"),
        "{message}"
    );
    assert_eq!(
        started.elapsed(),
        informer::config::exec::DEFAULT_PLUGIN_TIMEOUT
    );

    // A shorter limit of one's own.
    let provider = script_provider(&script).with_timeout(std::time::Duration::from_secs(2));
    let message = provider.credential().await.unwrap_err().to_string();
    assert!(message.contains("within 2 s"), "{message}");
}

#[tokio::test]
async fn a_plugin_printing_without_end_is_cut_off() {
    let dir = TempDir::new("exec-flood");
    // Endless stdout: read up to the cap, then killed.
    let script = dir.script("plugin", "exec yes '{\"kind\":\"ExecCredential\"}'");
    let message = script_provider(&script)
        .credential()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(&format!(
            "printed more than {} bytes on stdout",
            informer::config::exec::MAX_PLUGIN_OUTPUT
        )),
        "{message}"
    );

    // 8 MB of stderr before failing: only the end is kept and quoted.
    let script = dir.script(
        "noisy",
        "head -c 8000000 /dev/zero | tr '\\0' x >&2; echo ' the reason' >&2; exit 3",
    );
    let message = script_provider(&script)
        .credential()
        .await
        .unwrap_err()
        .to_string();
    assert!(message.contains("the reason"), "{message}");
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.len() < 4096, "{} bytes", message.len());
}

/// client-go's rotation: a 401 to a plugin's certificate runs the plugin again, and the retry
/// goes out on a new connection that presents the new certificate (before: the certificate read
/// when the `Config` was built stayed until a new `Client`, and a 401 was final).
#[tokio::test]
async fn a_rotated_client_certificate_from_the_plugin_replaces_a_rejected_one() {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let certs = Certs::new();
    let dir = TempDir::new("exec-cert-rotation");
    let (state, config) = certificate_plugin(&certs, &dir).await;
    let client = Client::new(config).unwrap();
    let answer: serde_json::Value = client.request(Method::GET, "/api", None).await.unwrap();
    assert_eq!(answer["ok"], true);
    assert_eq!(runs(&dir), 1);

    // The first certificate expires (the server refuses it) and the plugin now gives another.
    let first = CertificateDer::from_pem_slice(certs.client_cert_pem.as_bytes()).unwrap();
    state.revoked_certs.lock().unwrap().push(first.to_vec());
    dir.write("cert.pem", &certs.rotated_cert_pem);
    dir.write("key.pem", &certs.rotated_key_pem);
    let answer: serde_json::Value = client.request(Method::GET, "/api", None).await.unwrap();
    assert_eq!(answer["ok"], true);
    assert_eq!(runs(&dir), 2, "the 401 ran the plugin once more");
    assert_eq!(state.unauthorized.load(Ordering::SeqCst), 1);
    // Later requests present the new certificate with no further run.
    let answer: serde_json::Value = client.request(Method::GET, "/api", None).await.unwrap();
    assert_eq!(answer["ok"], true);
    assert_eq!(
        (runs(&dir), state.unauthorized.load(Ordering::SeqCst)),
        (2, 1)
    );
}
