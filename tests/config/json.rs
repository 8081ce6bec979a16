//! JSON kubeconfigs, which load with or without the `yaml` feature (YAML is a superset of JSON;
//! kubectl reads both), the simulator's own kubeconfig among them; and, without the feature, the
//! clear error a YAML kubeconfig gives.

use crate::support::config::TempDir;
use informer::config::{Auth, Kubeconfig, KubeconfigOptions};
use informer::{Api, Client, Config, Error, ListParams, Pod};
use informer_sim::Simulator;

fn config_error(e: Error) -> String {
    match e {
        Error::Config(m) => m,
        other => panic!("expected Error::Config, got {other:?}"),
    }
}

#[tokio::test]
async fn a_json_kubeconfig_loads() {
    let dir = TempDir::new("json");
    let path = dir.write(
        "config",
        r#"{
  "apiVersion": "v1",
  "kind": "Config",
  "clusters": [{"name": "c", "cluster": {"server": "https://k.example:6443", "certificate-authority": "ca.crt"}}],
  "users": [{"name": "u", "user": {"token": "json-token"}}],
  "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "apps"}}],
  "current-context": "x",
  "preferences": {}
}"#,
    );
    let kubeconfig = Kubeconfig::read(&path).unwrap();
    assert_eq!(
        kubeconfig.clusters[0].cluster.certificate_authority,
        Some(dir.path().join("ca.crt")),
        "relative paths resolve against the file's folder, as for YAML"
    );
    let mut kubeconfig = kubeconfig;
    kubeconfig.clusters[0].cluster.certificate_authority = None;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeconfigOptions::default())
        .await
        .unwrap();
    assert_eq!(config.cluster_url.to_string(), "https://k.example:6443/");
    assert_eq!(config.default_namespace, "apps");
    match &config.auth {
        Auth::Bearer(t) => assert_eq!(t.expose(), "json-token"),
        other => panic!("expected a token, got {other:?}"),
    }

    // An empty file is an empty kubeconfig, as in YAML.
    let empty = dir.write("empty", "\n");
    assert!(Kubeconfig::read(&empty).unwrap().clusters.is_empty());
}

#[tokio::test]
async fn json_errors_name_the_file_and_line_but_not_the_value() {
    let dir = TempDir::new("json-errors");
    let f = dir.write(
        "config",
        "{\"clusters\": [{\"name\": \"c\",\n \"cluster\": {\"insecure-skip-tls-verify\": \"sekrit-value\"}}]}",
    );
    let message = config_error(Kubeconfig::read(&f).unwrap_err());
    assert!(message.contains(&f.display().to_string()), "{message}");
    assert!(message.contains("line 2"), "{message}");
    assert!(!message.contains("sekrit-value"), "{message}");
}

#[tokio::test]
async fn the_simulators_kubeconfig_loads_and_works() {
    let sim = Simulator::builder()
        .tls(true)
        .token("sim-token")
        .start()
        .await
        .unwrap();
    let dir = TempDir::new("json-sim");
    let path = dir.write("kubeconfig", sim.kubeconfig());
    let config = Config::from_kubeconfig(&KubeconfigOptions {
        path: Some(path),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(config.default_namespace, "default");
    let pods: Api<Pod> = Api::all(Client::new(config).unwrap());
    pods.list(&ListParams::default()).await.unwrap();
}

/// Without the `yaml` feature a YAML kubeconfig (block or flow style) is a configuration error that
/// names the file and says what to do.
#[cfg(not(feature = "yaml"))]
#[test]
fn yaml_without_the_feature_says_to_enable_it() {
    let dir = TempDir::new("json-yaml");
    for (name, text) in [
        ("block", "apiVersion: v1\nkind: Config\nclusters: []\n"),
        ("comment", "# written by hand\n{\"clusters\": []}\n"),
        (
            "flow",
            "{clusters: [{name: c, cluster: {server: 'https://k:6443'}}]}\n",
        ),
    ] {
        let f = dir.write(name, text);
        let message = config_error(Kubeconfig::read(&f).unwrap_err());
        assert!(message.contains(&f.display().to_string()), "{message}");
        assert!(message.contains("`yaml` feature"), "{message}");
    }
}
