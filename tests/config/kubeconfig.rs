//! Kubeconfig loading checked against the real kubectl: files written by `kubectl config set-*`,
//! loaded by us, compared field by field with `kubectl config view --raw --minify -o json`.
//! Also: merging of several files, relative paths, key formats, errors that name the field, and
//! secrets absent from `Debug` output.

use std::path::Path;
use std::process::Command;

use crate::support::config::{Certs, TempDir, b64};
use informer::config::Auth;
use informer::config::{Kubeconfig, KubeconfigOptions};
use informer::{Config, Error};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

const KUBECTL: &str = "/usr/bin/kubectl";

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new(KUBECTL)
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

async fn load(path: &Path, context: &str) -> informer::Result<Config> {
    Config::from_kubeconfig(&KubeconfigOptions {
        context: Some(context.into()),
        path: Some(path.to_owned()),
        ..Default::default()
    })
    .await
}

fn der(pem: &[u8]) -> Vec<Vec<u8>> {
    CertificateDer::pem_slice_iter(pem)
        .map(|c| c.unwrap().to_vec())
        .collect()
}

#[tokio::test]
async fn matches_kubectl_for_every_context() {
    if !Path::new(KUBECTL).exists() {
        eprintln!("skipping: no {KUBECTL}");
        return;
    }
    let dir = TempDir::new("kubectl");
    let certs = Certs::new();
    dir.write("pki/ca.pem", &certs.ca_pem);
    dir.write("pki/client.pem", &certs.client_cert_pem);
    dir.write("pki/client-key.pem", &certs.client_key_pem);
    dir.write("token-file", "file-token-value\n");
    let f = dir.path().join("config");
    let ca = dir.path().join("pki/ca.pem");
    let ca = ca.to_str().unwrap();
    for args in [
        vec![
            "config",
            "set-cluster",
            "embedded",
            "--server=https://10.0.0.1:6443",
            "--embed-certs",
            &format!("--certificate-authority={ca}"),
        ],
        vec![
            "config",
            "set-cluster",
            "by-path",
            "--server=https://[fd00::1]:443/prefix",
            &format!("--certificate-authority={ca}"),
        ],
        vec![
            "config",
            "set-cluster",
            "insecure",
            "--server=https://example.test",
            "--insecure-skip-tls-verify=true",
            "--tls-server-name=kubernetes.test",
        ],
        vec![
            "config",
            "set-credentials",
            "token-user",
            "--token=sekrit-token-value-1",
        ],
        vec![
            "config",
            "set-credentials",
            "basic-user",
            "--username=admin",
            "--password=sekrit-password-2",
        ],
        vec![
            "config",
            "set-credentials",
            "cert-user",
            "--embed-certs",
            "--client-certificate",
            dir.path().join("pki/client.pem").to_str().unwrap(),
            "--client-key",
            dir.path().join("pki/client-key.pem").to_str().unwrap(),
        ],
        vec![
            "config",
            "set-credentials",
            "cert-path-user",
            "--client-certificate",
            dir.path().join("pki/client.pem").to_str().unwrap(),
            "--client-key",
            dir.path().join("pki/client-key.pem").to_str().unwrap(),
        ],
        vec![
            "config",
            "set",
            "users.file-user.tokenFile",
            dir.path().join("token-file").to_str().unwrap(),
        ],
        vec![
            "config",
            "set-context",
            "a",
            "--cluster=embedded",
            "--user=token-user",
            "--namespace=apps",
        ],
        vec![
            "config",
            "set-context",
            "b",
            "--cluster=by-path",
            "--user=basic-user",
        ],
        vec![
            "config",
            "set-context",
            "c",
            "--cluster=insecure",
            "--user=cert-user",
            "--namespace=kube-system",
        ],
        vec![
            "config",
            "set-context",
            "d",
            "--cluster=embedded",
            "--user=cert-path-user",
        ],
        vec![
            "config",
            "set-context",
            "e",
            "--cluster=insecure",
            "--user=file-user",
        ],
        vec!["config", "set-context", "f", "--cluster=insecure"],
        vec!["config", "use-context", "c"],
    ] {
        kubectl(&f, &args);
    }

    for context in ["a", "b", "c", "d", "e", "f"] {
        let view: serde_json::Value = serde_json::from_str(&kubectl(
            &f,
            &[
                "config",
                "view",
                "--raw",
                "--minify",
                "-o",
                "json",
                "--context",
                context,
            ],
        ))
        .unwrap();
        let cluster = &view["clusters"][0]["cluster"];
        let user = &view["users"][0]["user"];
        let ctx = &view["contexts"][0]["context"];
        let config = load(&f, context)
            .await
            .unwrap_or_else(|e| panic!("{context}: {e}"));

        let server = cluster["server"].as_str().unwrap();
        assert_eq!(
            config.cluster_url.to_string().trim_end_matches('/'),
            server.trim_end_matches('/'),
            "{context}"
        );
        assert_eq!(
            config.default_namespace,
            ctx["namespace"].as_str().unwrap_or("default"),
            "{context}"
        );
        assert_eq!(
            config.tls.accept_invalid_certs,
            cluster["insecure-skip-tls-verify"]
                .as_bool()
                .unwrap_or(false),
            "{context}"
        );
        assert_eq!(
            config.tls.server_name.as_deref(),
            cluster["tls-server-name"].as_str(),
            "{context}"
        );
        let expected_ca = match (
            cluster["certificate-authority-data"].as_str(),
            cluster["certificate-authority"].as_str(),
        ) {
            (Some(data), _) => {
                use base64::Engine as _;
                der(&base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .unwrap())
            }
            (None, Some(path)) => der(&std::fs::read(dir.path().join(path)).unwrap()),
            (None, None) => vec![],
        };
        let ours: Vec<Vec<u8>> = config.tls.root_certs.iter().map(|c| c.to_vec()).collect();
        assert_eq!(ours, expected_ca, "{context}");
        match (
            &config.auth,
            user["token"].as_str(),
            user["username"].as_str(),
            user["tokenFile"].as_str(),
        ) {
            (Auth::Bearer(t), Some(token), None, None) => {
                assert_eq!(t.expose(), token, "{context}")
            }
            (Auth::Basic { username, password }, None, Some(u), None) => {
                assert_eq!(username, u);
                assert_eq!(password.expose(), user["password"].as_str().unwrap());
            }
            (Auth::Provider(p), None, None, Some(path)) => {
                let expected = std::fs::read_to_string(dir.path().join(path)).unwrap();
                assert_eq!(
                    p.token().await.unwrap().expose(),
                    expected.trim(),
                    "{context}"
                );
            }
            (Auth::None, None, None, None) => {}
            (auth, ..) => panic!("{context}: {auth:?} vs {user}"),
        }
        let has_cert =
            user["client-certificate-data"].is_string() || user["client-certificate"].is_string();
        assert_eq!(config.tls.identity.is_some(), has_cert, "{context}");
    }

    // No context given: current-context ("c").
    let config = Config::from_kubeconfig(&KubeconfigOptions {
        path: Some(f.clone()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(config.default_namespace, "kube-system");
    // Explicit cluster and user override the context's.
    let config = Config::from_kubeconfig(&KubeconfigOptions {
        path: Some(f.clone()),
        context: Some("a".into()),
        cluster: Some("insecure".into()),
        user: Some("basic-user".into()),
    })
    .await
    .unwrap();
    assert!(config.tls.accept_invalid_certs);
    assert!(matches!(config.auth, Auth::Basic { .. }));
    assert_eq!(config.default_namespace, "apps");

    // Secrets never show in Debug output of the config or of the parsed file.
    let debug = format!(
        "{:?} {:?} {:?}",
        load(&f, "a").await.unwrap(),
        load(&f, "b").await.unwrap(),
        Kubeconfig::read(&f).unwrap()
    );
    for secret in [
        "sekrit-token-value-1",
        "sekrit-password-2",
        "file-token-value",
    ] {
        assert!(!debug.contains(secret), "{secret} leaked in {debug}");
    }
    let key_b64 = b64(&certs.client_key_pem);
    assert!(!debug.contains(&key_b64[..40]));
    assert!(!debug.contains("PRIVATE KEY"));
}

#[tokio::test]
async fn kubeconfig_env_merges_first_wins() {
    let dir = TempDir::new("merge");
    let first = dir.write(
        "one/config",
        "apiVersion: v1\nkind: Config\ncurrent-context: ''\n\
         clusters:\n- name: shared\n  cluster:\n    server: http://first:1\n\
         contexts:\n- name: shared\n  context: {cluster: shared, namespace: first}\n\
         users: null\n",
    );
    let second = dir.write(
        "two/config",
        "current-context: only-second\n\
         clusters:\n- name: shared\n  cluster: {server: 'http://second:2'}\n- name: other\n  cluster: {server: 'http://other:3'}\n\
         contexts:\n- name: shared\n  context: {cluster: shared, namespace: second}\n- name: only-second\n  context: {cluster: other}\n",
    );
    let kubeconfig_env = std::env::join_paths([
        first.as_path(),
        Path::new("/nonexistent/kubeconfig"),
        second.as_path(),
    ])
    .unwrap();
    let paths = informer::config::kubeconfig_paths(Some(&kubeconfig_env), None);
    assert_eq!(paths.len(), 3);
    let merged = Kubeconfig::read_merged(&paths).unwrap();
    assert_eq!(merged.clusters.len(), 2);
    assert_eq!(merged.current_context.as_deref(), Some("only-second"));
    let config = Config::from_custom_kubeconfig(merged.clone(), &Default::default())
        .await
        .unwrap();
    assert_eq!(
        config.cluster_url,
        "http://other:3/".parse::<hyper::Uri>().unwrap()
    );
    let config = Config::from_custom_kubeconfig(
        merged,
        &KubeconfigOptions {
            context: Some("shared".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(
        config.cluster_url,
        "http://first:1/".parse::<hyper::Uri>().unwrap()
    );
    assert_eq!(config.default_namespace, "first");
}

#[tokio::test]
async fn relative_paths_are_resolved_against_the_file() {
    let dir = TempDir::new("relative");
    let certs = Certs::new();
    dir.write("nested/pki/ca.crt", &certs.ca_pem);
    dir.write("nested/pki/tls.crt", &certs.client_cert_pem);
    dir.write("nested/pki/tls.key", &certs.client_key_pem);
    dir.write("nested/token", "relative-token");
    let f = dir.write(
        "nested/kubeconfig",
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443', certificate-authority: pki/ca.crt}}]\n\
         users:\n- name: u\n  user: {client-certificate: pki/tls.crt, client-key: pki/tls.key, tokenFile: token}\n\
         contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
    );
    let config = Config::from_kubeconfig(&KubeconfigOptions {
        path: Some(f),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(config.tls.root_certs.len(), 1);
    assert!(config.tls.identity.is_some());
    match &config.auth {
        Auth::Provider(p) => assert_eq!(p.token().await.unwrap().expose(), "relative-token"),
        other => panic!("{other:?}"),
    }
    informer::Client::new(config).unwrap();
}

/// PKCS#8 (rcgen), SEC1 and PKCS#1 (openssl) client keys all load and give a usable client.
#[tokio::test]
async fn client_key_formats() {
    let dir = TempDir::new("keys");
    let certs = Certs::new();
    let mut keys = vec![(
        "pkcs8",
        certs.client_cert_pem.clone(),
        certs.client_key_pem.clone(),
    )];
    let openssl = |args: &[&str]| {
        let ok = Command::new("openssl")
            .args(args)
            .current_dir(dir.path())
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "openssl {args:?}");
    };
    if Path::new("/usr/bin/openssl").exists() {
        openssl(&[
            "ecparam",
            "-name",
            "prime256v1",
            "-genkey",
            "-noout",
            "-out",
            "ec.key",
        ]);
        openssl(&[
            "req", "-x509", "-new", "-key", "ec.key", "-subj", "/CN=ec", "-days", "2", "-out",
            "ec.crt",
        ]);
        openssl(&["genrsa", "-traditional", "-out", "rsa.key", "2048"]);
        openssl(&[
            "req", "-x509", "-new", "-key", "rsa.key", "-subj", "/CN=rsa", "-days", "2", "-out",
            "rsa.crt",
        ]);
        for (name, key_header) in [
            ("ec", "BEGIN EC PRIVATE KEY"),
            ("rsa", "BEGIN RSA PRIVATE KEY"),
        ] {
            let key = std::fs::read_to_string(dir.path().join(format!("{name}.key"))).unwrap();
            assert!(key.contains(key_header), "{name}: {key_header}");
            let cert = std::fs::read_to_string(dir.path().join(format!("{name}.crt"))).unwrap();
            keys.push((name, cert, key));
        }
    }
    for (name, cert, key) in keys {
        let yaml = format!(
            "clusters: [{{name: c, cluster: {{server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}}}]\n\
             users: [{{name: u, user: {{client-certificate-data: {}, client-key-data: {}}}}}]\n\
             contexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n",
            b64(&cert),
            b64(&key)
        );
        let config = Config::from_custom_kubeconfig(
            Kubeconfig::from_yaml(&yaml).unwrap(),
            &Default::default(),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(config.tls.identity.is_some(), "{name}");
        informer::Client::new(config).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

fn config_error(e: Error) -> String {
    match e {
        Error::Config(m) => m,
        other => panic!("expected Error::Config, got {other:?}"),
    }
}

async fn load_yaml(yaml: &str) -> informer::Result<Config> {
    Config::from_custom_kubeconfig(Kubeconfig::from_yaml(yaml)?, &Default::default()).await
}

#[tokio::test]
async fn errors_name_the_field_or_file() {
    let base = "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n";
    let cases = [
        (
            "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority-data: '!!notbase64'}}]\nusers: [{name: u}]\n",
            "cluster \"c\" certificate-authority-data",
        ),
        (
            "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority: /nonexistent/ca.pem}}]\nusers: [{name: u}]\n",
            "/nonexistent/ca.pem",
        ),
        (
            "clusters: [{name: c, cluster: {server: 'https://h', certificate-authority-data: aGVsbG8=}}]\nusers: [{name: u}]\n",
            "no CERTIFICATE block",
        ),
        (
            "clusters: [{name: c, cluster: {}}]\nusers: [{name: u}]\n",
            "cluster \"c\" server",
        ),
        (
            "clusters: [{name: other, cluster: {server: 'http://h'}}]\nusers: [{name: u}]\n",
            "no cluster named \"c\"",
        ),
        (
            "clusters: [{name: c, cluster: {server: 'http://h'}}]\n",
            "no user named \"u\"",
        ),
        (
            "clusters: [{name: c, cluster: {server: 'http://h'}}]\nusers: [{name: u, user: {client-certificate-data: aGVsbG8=}}]\n",
            "client-certificate without client-key",
        ),
        (
            "clusters: [{name: c, cluster: {server: 'http://h'}}]\nusers: [{name: u, user: {tokenFile: /nonexistent/token}}]\n",
            "/nonexistent/token",
        ),
        (
            "clusters: [{name: c, cluster: {server: 'http://h'}}]\nusers: [{name: u, user: {auth-provider: {name: gcp, config: {access-token: zzz}}}}]\n",
            "gke-gcloud-auth-plugin",
        ),
        (
            "clusters: [{name: c, cluster: {server: 'http://h'}}]\nusers: [{name: u, user: {auth-provider: {name: azure}}}]\n",
            "kubelogin",
        ),
    ];
    for (yaml, expected) in cases {
        let message = config_error(load_yaml(&format!("{yaml}{base}")).await.unwrap_err());
        assert!(
            message.contains(expected),
            "{message:?} should contain {expected:?}"
        );
    }
    let message = config_error(
        load_yaml("clusters: [{name: c, cluster: {server: 'http://h'}}]\ncontexts: [{name: x, context: {cluster: c}}]\ncurrent-context: y\n")
            .await
            .unwrap_err(),
    );
    assert!(
        message.contains("no context named \"y\"") && message.contains("contexts: x"),
        "{message}"
    );
    let message = config_error(load_yaml("clusters: []\n").await.unwrap_err());
    assert!(message.contains("no current-context"), "{message}");
    let message = config_error(
        Config::from_kubeconfig(&KubeconfigOptions {
            path: Some("/nonexistent/kc".into()),
            ..Default::default()
        })
        .await
        .unwrap_err(),
    );
    assert!(message.contains("/nonexistent/kc"), "{message}");
}

#[test]
fn yaml_errors_have_a_line_and_no_values() {
    let dir = TempDir::new("badyaml");
    let f = dir.write(
        "config",
        "clusters:\n- name: c\n  cluster:\n    insecure-skip-tls-verify: sekrit-value\n",
    );
    let message = config_error(Kubeconfig::read(&f).unwrap_err());
    println!("{message}");
    assert!(message.contains(&f.display().to_string()), "{message}");
    assert!(message.contains("line 4"), "{message}");
    assert!(!message.contains("sekrit-value"), "{message}");
    let message = config_error(
        Kubeconfig::from_yaml("users:\n- name: u\n  user: {token: [unclosed\n").unwrap_err(),
    );
    println!("{message}");
    assert!(message.contains("line"), "{message}");
    // Go's nulls, unknown keys, a BOM and an empty file are all fine.
    let f = dir.write("bom", "\u{feff}kind: Config\npreferences: {}\nclusters: null\nextensions: [{name: x, extension: {a: 1}}]\n");
    assert!(Kubeconfig::read(&f).unwrap().clusters.is_empty());
    assert!(Kubeconfig::from_yaml("").is_ok());
}

/// `Config::infer` reads `$KUBECONFIG`; environment variables are per process, so the check runs
/// in a child process (this same test binary) with its own environment.
#[tokio::test]
async fn infer_uses_kubeconfig_env_then_incluster() {
    if let Some(expected) = std::env::var_os("INFORMER_INFER_EXPECT") {
        let result = Config::infer().await;
        let expected = expected.to_str().unwrap();
        match result {
            Ok(config) => assert_eq!(config.default_namespace, expected),
            Err(e) => assert!(e.to_string().contains(expected), "{e}"),
        }
        return;
    }
    let dir = TempDir::new("infer");
    let f = dir.write(
        "kc",
        "clusters: [{name: c, cluster: {server: 'http://h:1'}}]\ncontexts: [{name: x, context: {cluster: c, namespace: from-env}}]\ncurrent-context: x\n",
    );
    let missing = dir.path().join("missing");
    let run = |kubeconfig: &std::ffi::OsStr, expect: &str| {
        let out = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "infer_uses_kubeconfig_env_then_incluster",
                "--quiet",
                "--test-threads=1",
            ])
            .env("KUBECONFIG", kubeconfig)
            .env("HOME", dir.path().join("no-home"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("INFORMER_INFER_EXPECT", expect)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "child expecting {expect:?} failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    };
    run(&std::env::join_paths([&missing, &f]).unwrap(), "from-env");
    run(missing.as_os_str(), "looked at");
    run(missing.as_os_str(), "KUBERNETES_SERVICE_HOST");
}
