//! Secrets never show in `Debug` output: a configuration, a kubeconfig's users and clusters, and
//! an exec plugin's arguments and environment, each formatted with a secret inside.

use informer::Config;
use informer::config::{Auth, Secret};
use informer::config::{ExecConfig, ExecCredentialProvider, Kubeconfig, KubeconfigOptions};

const SECRET: &str = "s3cretT0ken";

fn assert_redacted(what: &str, debug: String) {
    assert!(!debug.contains(SECRET), "{what} shows the secret: {debug}");
}

fn kubeconfig() -> Kubeconfig {
    Kubeconfig::from_yaml(&format!(
        r#"
clusters:
- name: c
  cluster:
    server: https://admin:{SECRET}@k.example:6443
    proxy-url: http://me:{SECRET}@proxy.example:3128
users:
- name: token
  user: {{token: {SECRET}, password: {SECRET}, username: me}}
- name: key
  user: {{client-key-data: {SECRET}}}
- name: exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: plugin
      args: ["--token={SECRET}", "{SECRET}"]
      env: [{{name: TOKEN, value: {SECRET}}}]
contexts:
- name: ctx
  context: {{cluster: c, user: token}}
current-context: ctx
"#
    ))
    .unwrap()
}

#[test]
fn config_debug_hides_tokens_passwords_and_url_credentials() {
    let mut config = Config::new(
        format!("https://admin:{SECRET}@k.example:6443")
            .parse()
            .unwrap(),
    );
    config.proxy_url = Some(
        format!("http://me:{SECRET}@proxy.example:3128")
            .parse()
            .unwrap(),
    );
    for auth in [
        Auth::Bearer(Secret::new(SECRET)),
        Auth::Basic {
            username: "me".into(),
            password: Secret::new(SECRET),
        },
    ] {
        config.auth = auth;
        assert_redacted("Config", format!("{config:?}"));
        assert_redacted("Config (pretty)", format!("{config:#?}"));
    }
    let debug = format!("{config:?}");
    assert!(debug.contains("proxy.example:3128"), "{debug}");
    assert!(debug.contains("[redacted]@k.example:6443"), "{debug}");
}

#[test]
fn kubeconfig_debug_hides_credentials_and_plugin_arguments() {
    let k = kubeconfig();
    assert_redacted("Kubeconfig", format!("{k:?}"));
    assert_redacted("Kubeconfig (pretty)", format!("{k:#?}"));
    for user in &k.users {
        assert_redacted("User", format!("{:?}", user.user));
    }
    let exec = k.users[2].user.exec.clone().unwrap();
    assert_eq!(exec.args.len(), 2, "the arguments are still there to use");
    assert_redacted("ExecConfig", format!("{exec:?}"));
    assert_redacted("ExecEnvVar", format!("{:?}", exec.env));
    let debug = format!("{exec:?}");
    assert!(
        debug.contains("plugin") && debug.contains("TOKEN"),
        "{debug}"
    );
}

#[tokio::test]
async fn exec_provider_and_config_from_a_kubeconfig_hide_them_too() {
    // A plugin given the secret as an argument, printing it as its token.
    let credential = format!(
        r#"{{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{{"token":"{SECRET}"}}}}"#
    );
    let exec = ExecConfig {
        command: "/bin/sh".into(),
        args: vec![
            "-c".into(),
            format!("printf '%s' '{credential}'"),
            format!("--token={SECRET}"),
        ],
        provide_cluster_info: true,
        ..kubeconfig().users[2].user.exec.clone().unwrap()
    };
    let provider = ExecCredentialProvider::new("me", &exec, None).unwrap();
    assert_redacted("ExecCredentialProvider", format!("{provider:?}"));
    let got = provider.credential().await.unwrap();
    assert_eq!(got.token.as_ref().unwrap().expose(), SECRET);
    assert_redacted("ExecCredential", format!("{got:?}"));
    assert_redacted(
        "ExecCredentialProvider, with a cached credential",
        format!("{provider:#?}"),
    );

    let config = Config::from_custom_kubeconfig(kubeconfig(), &KubeconfigOptions::default())
        .await
        .unwrap();
    assert_redacted("Config from a kubeconfig", format!("{config:#?}"));
}
