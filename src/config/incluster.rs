//! In-cluster configuration: the apiserver address from `KUBERNETES_SERVICE_HOST` and
//! `KUBERNETES_SERVICE_PORT`, and the pod's service-account mount (`token`, `ca.crt`, `namespace`).
//!
//! The token is not read once: it goes through a [`TokenFile`], re-read about every minute, because
//! the kubelet rotates projected service-account tokens (hourly by default).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::token_file::{DEFAULT_TOKEN_REFRESH_INTERVAL, TokenFile};
use super::{Auth, Config, parse_certificates};
use crate::error::{Error, Result};

/// Where a pod's service-account token, CA bundle and namespace are mounted.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Inputs of the in-cluster configuration. [`Default`] reads the environment and uses
/// [`SERVICE_ACCOUNT_DIR`]; tests fill the fields by hand.
///
/// ```
/// let options = informer::config::InClusterOptions {
///     service_host: Some("fd00::1".into()),
///     service_port: Some("443".into()),
///     service_account_dir: "/tmp/sa".into(),
///     token_refresh_interval: std::time::Duration::from_secs(1),
/// };
/// assert!(informer::Config::incluster_with(&options).is_err()); // no /tmp/sa/ca.crt
/// ```
#[derive(Clone, Debug)]
pub struct InClusterOptions {
    /// `KUBERNETES_SERVICE_HOST`: an IP address or host name (IPv6 without brackets).
    pub service_host: Option<String>,
    /// `KUBERNETES_SERVICE_PORT`.
    pub service_port: Option<String>,
    /// The folder holding `token`, `ca.crt` and (optionally) `namespace`.
    pub service_account_dir: PathBuf,
    /// How often the token file is re-read.
    pub token_refresh_interval: Duration,
}

impl Default for InClusterOptions {
    fn default() -> Self {
        let var = |name| std::env::var(name).ok().filter(|v| !v.is_empty());
        InClusterOptions {
            service_host: var("KUBERNETES_SERVICE_HOST"),
            service_port: var("KUBERNETES_SERVICE_PORT"),
            service_account_dir: SERVICE_ACCOUNT_DIR.into(),
            token_refresh_interval: DEFAULT_TOKEN_REFRESH_INTERVAL,
        }
    }
}

impl Config {
    /// The configuration of a pod: see [`InClusterOptions::default`].
    ///
    /// ```no_run
    /// let client = informer::Client::new(informer::Config::incluster()?)?;
    /// # Ok::<(), informer::Error>(())
    /// ```
    pub fn incluster() -> Result<Config> {
        Self::incluster_with(&InClusterOptions::default())
    }

    /// The in-cluster configuration from explicit inputs. Errors name the missing variable or the
    /// unreadable file.
    ///
    /// ```no_run
    /// let mut options = informer::config::InClusterOptions::default();
    /// options.service_account_dir = "/tmp/fake-sa".into();
    /// let config = informer::Config::incluster_with(&options)?;
    /// # Ok::<(), informer::Error>(())
    /// ```
    pub fn incluster_with(options: &InClusterOptions) -> Result<Config> {
        let (Some(host), Some(port)) = (&options.service_host, &options.service_port) else {
            return Err(Error::Config(
                "not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT \
                 must both be set"
                    .into(),
            ));
        };
        let host = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]")
        } else {
            host.clone()
        };
        let url = format!("https://{host}:{port}");
        let cluster_url = url.parse().map_err(|e| {
            Error::Config(format!(
                "KUBERNETES_SERVICE_HOST/PORT give the URL {url:?}, which is not valid: {e}"
            ))
        })?;
        let dir = &options.service_account_dir;
        let ca_path = dir.join("ca.crt");
        let ca = std::fs::read(&ca_path)
            .map_err(|e| Error::Config(format!("in-cluster CA {}: {e}", ca_path.display())))?;
        let root_certs = parse_certificates(&ca)
            .map_err(|e| Error::Config(format!("in-cluster CA {}: {e}", ca_path.display())))?;
        if root_certs.is_empty() {
            return Err(Error::Config(format!(
                "in-cluster CA {}: no CERTIFICATE block",
                ca_path.display()
            )));
        }
        let tokens =
            TokenFile::with_refresh_interval(dir.join("token"), options.token_refresh_interval)?;
        let namespace = std::fs::read_to_string(dir.join("namespace"))
            .map(|n| n.trim().to_owned())
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into());
        let mut config = Config::new(cluster_url);
        config.default_namespace = namespace;
        config.tls.root_certs = root_certs;
        config.auth = Auth::Provider(Arc::new(tokens));
        Ok(config)
    }
}
