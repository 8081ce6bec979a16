//! Where the cluster is: the one seam between kwatch's global options and a [`Config`].
//!
//! `--server` wins over everything and is completed by `--token`, `--certificate-authority` and
//! `--insecure-skip-tls-verify`. Without it kwatch looks for a kubeconfig, then for an in-cluster
//! service account, and says where it looked when it finds neither.

use std::path::PathBuf;

use informer::{Auth, Client, Config, Secret};

use super::args::Global;
use super::{CliError, CliResult};

/// The configuration the global options describe.
pub fn load_config(global: &Global) -> CliResult<Config> {
    let mut config = match &global.server {
        Some(server) => {
            let url = server
                .parse()
                .map_err(|e| CliError::Usage(format!("--server {server:?}: {e}")))?;
            Config::new(url)
        }
        None => infer(global)?,
    };
    if let Some(token) = &global.token {
        config.auth = Auth::Bearer(Secret::new(token.clone()));
    }
    if let Some(path) = &global.certificate_authority {
        let pem = std::fs::read(path).map_err(|e| {
            CliError::Runtime(format!("certificate authority {}: {e}", path.display()))
        })?;
        config.tls.root_certs = informer::config::parse_certificates(&pem)?;
        if config.tls.root_certs.is_empty() {
            return Err(CliError::Runtime(format!(
                "certificate authority {}: no CERTIFICATE block",
                path.display()
            )));
        }
    }
    if global.insecure_skip_tls_verify {
        config.tls.accept_invalid_certs = true;
    }
    Ok(config)
}

/// A client for the global options, and the namespace to work in (`None`: all namespaces).
pub fn connect(global: &Global) -> CliResult<(Client, Option<String>)> {
    let config = load_config(global)?;
    let namespace = if global.all_namespaces {
        None
    } else {
        Some(
            global
                .namespace
                .clone()
                .unwrap_or_else(|| config.default_namespace.clone()),
        )
    };
    Ok((Client::new(config)?, namespace))
}

/// The kubeconfig files kubectl would read: `--kubeconfig`, else `$KUBECONFIG`, else
/// `~/.kube/config`.
fn kubeconfig_candidates(global: &Global) -> Vec<PathBuf> {
    if let Some(p) = &global.kubeconfig {
        return vec![p.clone()];
    }
    if let Some(v) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        return std::env::split_paths(&v).collect();
    }
    std::env::var_os("HOME")
        .map(|h| vec![PathBuf::from(h).join(".kube").join("config")])
        .unwrap_or_default()
}

fn infer(global: &Global) -> CliResult<Config> {
    let candidates = kubeconfig_candidates(global);
    if let Some(found) = candidates.iter().find(|p| p.exists()) {
        return Err(CliError::Runtime(format!(
            "found kubeconfig {} but kubeconfig loading is not available in this build; \
             use --server URL [--token T] [--certificate-authority PATH]",
            found.display()
        )));
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        return Err(CliError::Runtime(
            "running in a cluster, but in-cluster configuration is not available in this build; \
             use --server URL [--token T] [--certificate-authority PATH]"
                .into(),
        ));
    }
    let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    Err(CliError::Runtime(format!(
        "no cluster configuration: no kubeconfig (looked at {}) and not in a cluster \
         (KUBERNETES_SERVICE_HOST is not set); use --server URL, or try `kwatch demo`",
        if looked.is_empty() {
            "nothing: HOME is not set".to_owned()
        } else {
            looked.join(", ")
        }
    )))
}

/// How long a command waits for its informers' first list before giving up.
pub const SYNC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Reflector options for a command-line tool: client-go's, with a shorter backoff ceiling so a
/// user waiting at a terminal sees recovery within seconds.
pub fn reflector_options() -> informer::reflector::ReflectorOptions {
    informer::reflector::ReflectorOptions {
        backoff: informer::reflector::BackoffOptions {
            initial: std::time::Duration::from_millis(100),
            max: std::time::Duration::from_secs(5),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Remembers the last error the reflectors reported, to explain a sync that does not happen.
#[derive(Clone, Default)]
pub struct ErrorCollector {
    last: std::sync::Arc<std::sync::Mutex<Option<String>>>,
}

impl ErrorCollector {
    /// The callback to put in [`ReflectorOptions::on_error`](informer::reflector::ReflectorOptions).
    pub fn callback(&self) -> informer::reflector::ErrorCallback {
        let last = self.last.clone();
        std::sync::Arc::new(move |e: &informer::Error| {
            *last.lock().unwrap() = Some(e.to_string());
        })
    }

    /// The error for `what` not having synced within [`SYNC_TIMEOUT`].
    pub fn sync_failure(&self, what: &str) -> CliError {
        let cause = match self.last.lock().unwrap().as_deref() {
            Some(e) => format!(": last error: {e}"),
            None => String::new(),
        };
        CliError::Runtime(format!(
            "{what}: not synced after {} s{cause}",
            SYNC_TIMEOUT.as_secs()
        ))
    }
}

/// One cheap request (`GET /version`), so that an unreachable or misconfigured server is reported
/// at once instead of after [`SYNC_TIMEOUT`] of retries.
pub async fn probe(client: &Client) -> CliResult {
    let _: serde_json::Value = client
        .request(hyper::Method::GET, "/version", None)
        .await
        .map_err(|e| {
            CliError::Runtime(format!("cannot reach {}: {e}", client.config().cluster_url))
        })?;
    Ok(())
}
