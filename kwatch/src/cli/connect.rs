//! Where the cluster is: the one seam between kwatch's global options and a [`Config`].
//!
//! `--server` wins over everything and is completed by `--token`, `--certificate-authority` and
//! `--insecure-skip-tls-verify`. Without it kwatch looks for a kubeconfig, then for an in-cluster
//! service account, and says where it looked when it finds neither.

use informer::config::KubeconfigOptions;
use informer::config::{Auth, Secret};
use informer::{Client, Config};

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
    if global.insecure_skip_tls_verify && global.certificate_authority.is_none() {
        // kubectl's rule: the flag overrides a CA the kubeconfig names; given together with
        // --certificate-authority, the client refuses the pair.
        config.tls.root_certs.clear();
    }
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

/// How long a one-shot command (`get`, `instances`, `demo`) waits for its informers' first list
/// before giving up; `watch` keeps trying unless given `--sync-timeout`.
pub const SYNC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Reflector options for a command-line tool: client-go's, with a shorter backoff ceiling so a
/// user waiting at a terminal sees recovery within seconds. The first step stays client-go's
/// (0.8 s, jittered): a failing server or proxy is never asked again sooner than that.
pub fn reflector_options() -> informer::reflector::ReflectorOptions {
    informer::reflector::ReflectorOptions {
        backoff: informer::reflector::BackoffOptions {
            max: std::time::Duration::from_secs(5),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// An error as kubectl words it: `You must be logged in to the server (Unauthorized)` for a 401,
/// `Error from server (Forbidden): <the server's message>` for a 403, the error itself otherwise.
pub fn describe(e: &informer::Error) -> String {
    let message = match e {
        informer::Error::Api(s) => s.message.as_str(),
        _ => "",
    };
    match e.http_code() {
        Some(401) => format!(
            "You must be logged in to the server ({})",
            if message.is_empty() {
                "Unauthorized"
            } else {
                message
            }
        ),
        Some(403) if !message.is_empty() => format!("Error from server (Forbidden): {message}"),
        _ => e.to_string(),
    }
}

/// True for the failures retrying cannot fix before someone changes credentials or roles.
fn is_auth_failure(e: &informer::Error) -> bool {
    matches!(e.http_code(), Some(401 | 403))
}

#[derive(Default)]
struct Collected {
    /// The last failure, as [`describe`] words it.
    last: Option<String>,
    /// The first 401/403, as [`describe`] words it.
    auth_failure: Option<String>,
    /// Once the command has synced, every failure is printed as it happens.
    synced: bool,
    /// Every failure is printed as it happens, before the sync too (`kwatch watch`), except a
    /// 401/403 before the sync, which ends the command with its own line.
    print_before_sync: bool,
    /// Resources (the 403 Status's `details.kind`) a command does without: their 403 before the
    /// sync does not end it (`instances`: discovery serves from EndpointSlices alone when
    /// Services are forbidden).
    tolerated_forbidden: Vec<&'static str>,
}

/// Collects what the reflectors report: the last error, to explain a sync that does not happen;
/// a 401 or 403 before the sync, which ends the command at once (kubectl's words, exit status 1);
/// and, after the sync, every failure, printed on stderr while the reflectors retry with backoff.
#[derive(Clone, Default)]
pub struct ErrorCollector {
    collected: std::sync::Arc<std::sync::Mutex<Collected>>,
    /// Wakes [`ErrorCollector::wait_for_sync`] when an authentication failure arrives.
    auth_failed: std::sync::Arc<tokio::sync::Notify>,
}

impl ErrorCollector {
    /// A collector that prints every failure on stderr as it happens, before the first sync too:
    /// for a command that keeps trying (`kwatch watch`) rather than giving up after a while.
    pub fn printing_every_failure() -> ErrorCollector {
        let this = ErrorCollector::default();
        this.lock().print_before_sync = true;
        this
    }

    /// Does not end the command on a 403 for `resource` before the sync (see
    /// `Collected::tolerated_forbidden`).
    pub fn tolerating_forbidden(self, resource: &'static str) -> ErrorCollector {
        self.lock().tolerated_forbidden.push(resource);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Collected> {
        // The callback only assigns fields: a panic elsewhere cannot leave them inconsistent.
        self.collected.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The callback to put in [`ReflectorOptions::on_error`](informer::reflector::ReflectorOptions).
    pub fn callback(&self) -> informer::reflector::ErrorCallback {
        let this = self.clone();
        std::sync::Arc::new(move |e: &informer::Error| {
            let line = describe(e);
            let mut c = this.lock();
            let tolerated = e.http_code() == Some(403)
                && e.status()
                    .and_then(|s| s.details.as_ref())
                    .is_some_and(|d| c.tolerated_forbidden.iter().any(|r| *r == d.kind));
            let auth_before_sync = !c.synced && is_auth_failure(e) && !tolerated;
            if c.synced || (c.print_before_sync && !auth_before_sync) {
                // One line, escaped: the message comes from the server.
                let line = line.replace('\n', " ");
                eprintln!(
                    "kwatch: error: {} (retrying)",
                    super::output::escape_control(&line)
                );
            }
            if auth_before_sync && c.auth_failure.is_none() {
                c.auth_failure = Some(line.clone());
                this.auth_failed.notify_one();
            }
            c.last = Some(line);
        })
    }

    /// From now on every failure is printed as it happens (the command has synced; the
    /// reflectors keep retrying with backoff).
    pub fn mark_synced(&self) {
        self.lock().synced = true;
    }

    /// The error that ends a command which has not synced yet: a 401/403 at once, anything else
    /// after `timeout` from `started` (never without one). `Ok` while it may still sync.
    pub fn check_unsynced(
        &self,
        started: std::time::Instant,
        timeout: Option<std::time::Duration>,
        what: &str,
    ) -> CliResult {
        if let Some(e) = self.lock().auth_failure.clone() {
            return Err(CliError::Runtime(e));
        }
        match timeout {
            Some(t) if started.elapsed() > t => Err(self.sync_failure_after(what, t)),
            _ => Ok(()),
        }
    }

    /// Waits for `synced` (a `wait_for_sync(SYNC_TIMEOUT)` future) unless a 401/403 comes first;
    /// then marks the collector synced.
    pub async fn wait_for_sync(
        &self,
        synced: impl std::future::Future<Output = bool>,
        what: &str,
    ) -> CliResult {
        let auth_failure = async {
            loop {
                let notified = self.auth_failed.notified();
                if let Some(e) = self.lock().auth_failure.clone() {
                    return e;
                }
                notified.await;
            }
        };
        tokio::select! {
            ok = synced => {
                if !ok {
                    return Err(self.sync_failure(what));
                }
            }
            e = auth_failure => return Err(CliError::Runtime(e)),
        }
        self.mark_synced();
        Ok(())
    }

    /// The error for `what` not having synced within [`SYNC_TIMEOUT`].
    pub fn sync_failure(&self, what: &str) -> CliError {
        self.sync_failure_after(what, SYNC_TIMEOUT)
    }

    /// The error for `what` not having synced within `timeout`.
    pub fn sync_failure_after(&self, what: &str, timeout: std::time::Duration) -> CliError {
        let cause = match self.lock().last.as_deref() {
            Some(e) => format!(": last error: {e}"),
            None => String::new(),
        };
        CliError::Runtime(format!(
            "{what}: not synced after {} s{cause}",
            timeout.as_secs_f64()
        ))
    }

    /// Records a failure met outside the informers (discovery), as the callback would.
    pub fn report(&self, e: &informer::Error) {
        (self.callback())(e);
    }
}

/// One cheap request (`GET /version`), so that an unreachable or misconfigured server is reported
/// at once instead of after [`SYNC_TIMEOUT`] of retries.
pub async fn probe(client: &Client) -> CliResult {
    let _: serde_json::Value = client
        .request(hyper::Method::GET, "/version", None)
        .await
        .map_err(|e| match e.http_code() {
            Some(401 | 403) => CliError::Runtime(describe(&e)),
            _ => CliError::Runtime(format!("cannot reach {}: {e}", client.config().cluster_url)),
        })?;
    Ok(())
}
