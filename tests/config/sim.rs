//! Kubeconfigs for the simulator (TLS on), loaded by us and used by the client: the simulator's
//! own kubeconfig (CA data + token), a client certificate it issued, an exec plugin handing out
//! its token, and a wrong token (401).

use crate::support::config::{TempDir, b64};
use informer::config::{Kubeconfig, KubeconfigOptions};
use informer::{Api, Client, Config, ListParams, Pod};
use informer_sim::Simulator;

async fn list_pods(config: Config) -> informer::Result<usize> {
    let pods: Api<Pod> = Api::all(Client::new(config)?);
    Ok(pods.list(&ListParams::default()).await?.items.len())
}

#[tokio::test]
async fn simulator_kubeconfigs() {
    let sim = Simulator::builder()
        .tls(true)
        .token("sim-token")
        .client_cert_auth(true)
        .start()
        .await
        .unwrap();

    // The simulator's kubeconfig, as a file.
    let dir = TempDir::new("sim");
    let path = dir.write("kubeconfig", sim.kubeconfig());
    let config = Config::from_kubeconfig(&KubeconfigOptions {
        path: Some(path),
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(!format!("{config:?}").contains("sim-token"));
    list_pods(config).await.unwrap();

    let (cert, key) = sim.issue_client_cert("alice").unwrap();
    let plugin = dir.script(
        "plugin",
        r#"echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"sim-token"}}'"#,
    );
    let yaml = format!(
        "clusters: [{{name: sim, cluster: {{server: '{}', certificate-authority-data: {}}}}}]\n\
         users:\n\
         - name: cert\n  user: {{client-certificate-data: {}, client-key-data: {}}}\n\
         - name: exec\n  user: {{exec: {{apiVersion: client.authentication.k8s.io/v1beta1, command: /bin/bash, args: ['{}']}}}}\n\
         - name: wrong\n  user: {{token: not-the-token}}\n\
         contexts:\n\
         - {{name: cert, context: {{cluster: sim, user: cert}}}}\n\
         - {{name: exec, context: {{cluster: sim, user: exec}}}}\n\
         - {{name: wrong, context: {{cluster: sim, user: wrong}}}}\n",
        sim.url(),
        b64(sim.ca_pem().unwrap()),
        b64(&cert),
        b64(&key),
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
        list_pods(config)
            .await
            .unwrap_or_else(|e| panic!("{context}: {e}"));
    }
    let options = KubeconfigOptions {
        context: Some("wrong".into()),
        ..Default::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    let err = list_pods(config).await.unwrap_err();
    assert_eq!(err.http_code(), Some(401), "{err}");
}
