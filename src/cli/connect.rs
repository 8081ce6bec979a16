//! Where the cluster is: the one seam between kwatch's global options and a [`Config`].
//!
//! `--server` wins over everything and is completed by `--token`, `--certificate-authority` and
//! `--insecure-skip-tls-verify`. Without it kwatch looks for a kubeconfig, then for an in-cluster
//! service account, and says where it looked when it finds neither.

use informer::config::KubeconfigOptions;
use informer::{Auth, Client, Config, Secret};

use super::args::Global;
use super::{CliError, CliResult};

/// The configuration the global options describe.
pub async fn load_config(global: &Global) -> CliResult<Config> {
    let mut config = match &global.server {
        Some(server) => {
            let url = server
                .parse()
                .map_err(|e| CliError::Usage(format!("--server {server:?}: {e}")))?;
            Config::new(url)
        }
        None => infer(global).await?,
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
pub async fn connect(global: &Global) -> CliResult<(Client, Option<String>)> {
    let config = load_config(global).await?;
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

/// kubectl's order: `--kubeconfig`/`--context` name a kubeconfig to use; otherwise
/// `$KUBECONFIG` or `~/.kube/config` if one exists, else the in-cluster service account.
async fn infer(global: &Global) -> CliResult<Config> {
    let explain = |e: informer::Error| {
        CliError::Runtime(format!(
            "{e}; use --server URL, or try `kwatch demo` (no cluster needed)"
        ))
    };
    if global.kubeconfig.is_some() || global.context.is_some() {
        let options = KubeconfigOptions {
            context: global.context.clone(),
            path: global.kubeconfig.clone(),
            ..Default::default()
        };
        return Config::from_kubeconfig(&options).await.map_err(explain);
    }
    Config::infer().await.map_err(explain)
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
