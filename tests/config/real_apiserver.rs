//! Loading the real kube-apiserver's kubeconfig and credentials (shared/real-apiserver): bearer
//! token, client certificate, and an exec plugin. Skipped unless `REAL_APISERVER_KUBECONFIG` is
//! set; run with `eval "$(shared/real-apiserver/start)"; cargo test --test config real_apiserver`.

use crate::support::config::{TempDir, b64};
use hyper::Method;
use informer::config::{Kubeconfig, KubeconfigOptions};
use informer::{Client, Config};

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

async fn list_namespaces(config: Config) -> informer::Result<serde_json::Value> {
    Client::new(config)?
        .request(Method::GET, "/api/v1/namespaces?limit=1", None)
        .await
}

#[tokio::test]
async fn real_apiserver_credentials() {
    let Some(kubeconfig) = env("REAL_APISERVER_KUBECONFIG") else {
        eprintln!("skipped: run `eval \"$(shared/real-apiserver/start)\"` first");
        return;
    };
    // The generated kubeconfig: server, CA data, token.
    let config = Config::from_kubeconfig(&KubeconfigOptions {
        path: Some(kubeconfig.into()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(
        list_namespaces(config).await.unwrap()["kind"],
        "NamespaceList"
    );

    let url = env("REAL_APISERVER_URL").unwrap();
    let ca = std::fs::read(env("REAL_APISERVER_CA").unwrap()).unwrap();
    let token = env("REAL_APISERVER_TOKEN").unwrap();
    let dir = TempDir::new("real");
    let plugin = dir.script(
        "plugin",
        &format!(
            "echo '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'"
        ),
    );
    let yaml = format!(
        "clusters: [{{name: real, cluster: {{server: '{url}', certificate-authority-data: {}}}}}]\n\
         users:\n\
         - name: cert\n  user: {{client-certificate: {}, client-key: {}}}\n\
         - name: exec\n  user: {{exec: {{apiVersion: client.authentication.k8s.io/v1, command: /bin/bash, args: ['{}']}}}}\n\
         - name: wrong\n  user: {{token: not-the-token}}\n\
         contexts:\n\
         - {{name: cert, context: {{cluster: real, user: cert}}}}\n\
         - {{name: exec, context: {{cluster: real, user: exec}}}}\n\
         - {{name: wrong, context: {{cluster: real, user: wrong}}}}\n",
        b64(&ca),
        env("REAL_APISERVER_CLIENT_CERT").unwrap(),
        env("REAL_APISERVER_CLIENT_KEY").unwrap(),
        plugin.display()
    );
    let kubeconfig = Kubeconfig::from_yaml(&yaml).unwrap();
    for context in ["cert", "exec"] {
        let options = KubeconfigOptions {
            context: Some(context.into()),
            ..Default::default()
        };
        let config = Config::from_custom_kubeconfig(kubeconfig.clone(), &options)
            .await
            .unwrap();
        let list = list_namespaces(config)
            .await
            .unwrap_or_else(|e| panic!("{context}: {e}"));
        assert_eq!(list["kind"], "NamespaceList", "{context}");
    }
    let options = KubeconfigOptions {
        context: Some("wrong".into()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    assert_eq!(
        list_namespaces(config).await.unwrap_err().http_code(),
        Some(401)
    );
}
