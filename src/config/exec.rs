//! Exec credential plugins (`users[].user.exec`): client-go's `client.authentication.k8s.io/v1`
//! and `v1beta1` `ExecCredential` protocol.
//!
//! The plugin is run with `std::process` (its pipes read on threads of their own), with the configured `args` and `env` and
//! `KUBERNETES_EXEC_INFO` set to an `ExecCredential` request (its `spec.cluster` filled when
//! `provideClusterInfo` is true). It prints an `ExecCredential` whose `status` holds a bearer
//! `token` and/or a `clientCertificateData`/`clientKeyData` pair, and optionally an
//! `expirationTimestamp`.
//!
//! Invariants:
//! * A credential is cached until [`REFRESH_MARGIN`] before its expiry (forever without one) and
//!   dropped when the server answers 401 ([`TokenProvider::invalidate`]), so the client's single
//!   retry runs the plugin again. Concurrent callers wait for one run instead of starting several.
//! * A failure says which plugin, for which user, its exit status and the end of its stderr; a
//!   missing binary adds the `installHint`. Token and key never appear in messages or `Debug`.
//! * A run is bounded: the plugin is killed after [`DEFAULT_PLUGIN_TIMEOUT`] (or
//!   [`ExecCredentialProvider::with_timeout`]) and when it prints more than [`MAX_PLUGIN_OUTPUT`]
//!   bytes; of its stderr only the last few KiB are kept, however much it writes.
//! * `interactiveMode`: there is no TTY handling. `Never` and `IfAvailable` run the plugin with
//!   stdin closed (`spec.interactive: false`) and capture stderr for error messages; `Always`
//!   inherits stdin and stderr so the plugin can prompt (`spec.interactive: true`), and its stderr
//!   is then not in error messages.
//! * A client certificate from the plugin is read when the [`Config`](super::Config) is built (the
//!   plugin runs once then) and becomes the TLS identity, and each later run's certificate
//!   replaces it (client-go's rotation): TLS handshakes take the plugin's latest certificate, and
//!   once it changed the client opens new connections for new requests (requests in flight, and
//!   watches, finish on the old ones). A plugin that gives only a certificate still runs again on
//!   a 401 and before its `expirationTimestamp`, as one that gives a token does.

use std::future::Future;
use std::pin::Pin;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use rustls::client::ResolvesClientCert;
use rustls::sign::CertifiedKey;

use serde::Deserialize;

use super::{Identity, Secret, TokenProvider};
use crate::error::{Error, Result};
use crate::model::meta::null_as_default;
use crate::model::time::parse_rfc3339;

/// A credential is refreshed when less than this remains before its `expirationTimestamp`.
pub const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// Most bytes of a plugin's stderr quoted in an error (the end is kept: that is where the reason
/// usually is).
const STDERR_EXCERPT: usize = 2048;

/// How long a plugin may run before it is killed and the run fails (a hung plugin must not hang
/// every request waiting for a token). [`ExecCredentialProvider::with_timeout`] changes it.
pub const DEFAULT_PLUGIN_TIMEOUT: Duration = Duration::from_secs(60);

/// The most a plugin may print on stdout: an `ExecCredential` is a few KiB (a certificate chain
/// with its key at most); a plugin printing more is killed and the run fails.
pub const MAX_PLUGIN_OUTPUT: usize = 1 << 20;

/// The `exec` section of a kubeconfig user.
///
/// ```
/// let exec: informer::config::ExecConfig = serde_json::from_str(
///     r#"{"apiVersion": "client.authentication.k8s.io/v1", "command": "aws", "args": ["eks", "get-token"]}"#,
/// ).unwrap();
/// assert_eq!(exec.args, ["eks", "get-token"]);
/// ```
///
/// `Debug` does not show `args` (plugins take tokens and keys as arguments), only how many there
/// are; `env` values are [`Secret`]s.
///
/// ```
/// let exec = informer::config::ExecConfig {
///     command: "plugin".into(),
///     args: vec!["--token=s3cret".into()],
///     ..Default::default()
/// };
/// assert!(!format!("{exec:?}").contains("s3cret"));
/// ```
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecConfig {
    /// `client.authentication.k8s.io/v1` or `client.authentication.k8s.io/v1beta1`.
    pub api_version: Option<String>,
    /// The program: a name looked up on `$PATH`, or a path.
    #[serde(default)]
    pub command: String,
    /// Arguments.
    #[serde(default, deserialize_with = "null_as_default")]
    pub args: Vec<String>,
    /// Extra environment variables (values are treated as secrets).
    #[serde(default, deserialize_with = "null_as_default")]
    pub env: Vec<ExecEnvVar>,
    /// Shown when the program cannot be found.
    pub install_hint: Option<String>,
    /// Pass the cluster's details in `KUBERNETES_EXEC_INFO`.
    #[serde(default)]
    pub provide_cluster_info: bool,
    /// Defaults to `IfAvailable`.
    pub interactive_mode: Option<InteractiveMode>,
}

impl std::fmt::Debug for ExecConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecConfig")
            .field("api_version", &self.api_version)
            .field("command", &self.command)
            .field("args", &format_args!("[{} redacted]", self.args.len()))
            .field("env", &self.env)
            .field("install_hint", &self.install_hint)
            .field("provide_cluster_info", &self.provide_cluster_info)
            .field("interactive_mode", &self.interactive_mode)
            .finish()
    }
}

/// One `env` entry of an [`ExecConfig`].
///
/// ```
/// let v: informer::config::ExecEnvVar = serde_json::from_str(r#"{"name": "K", "value": "v"}"#).unwrap();
/// assert_eq!(format!("{v:?}"), r#"ExecEnvVar { name: "K", value: Secret([redacted]) }"#);
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ExecEnvVar {
    /// Variable name.
    pub name: String,
    /// Its value (often a secret: redacted in `Debug`).
    pub value: Secret,
}

/// Whether the plugin may talk to the user (see the module docs for what each mode does here).
///
/// ```
/// use informer::config::InteractiveMode;
/// assert_eq!(InteractiveMode::default(), InteractiveMode::IfAvailable);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub enum InteractiveMode {
    /// Never interactive: stdin closed.
    Never,
    /// Interactive if possible; here, as `Never` (no TTY detection).
    #[default]
    IfAvailable,
    /// Interactive: stdin and stderr inherited.
    Always,
}

/// What a plugin returned (see [`ExecCredentialProvider::credential`]).
#[derive(Clone, Debug)]
pub struct ExecCredential {
    /// `status.token`.
    pub token: Option<Secret>,
    /// `status.clientCertificateData` and `clientKeyData`.
    pub identity: Option<Identity>,
    /// `status.expirationTimestamp`; `None` means valid until the server rejects it.
    pub expires_at: Option<SystemTime>,
}

/// A [`TokenProvider`] that runs an exec plugin and caches its credential.
///
/// ```no_run
/// # async fn demo() -> informer::Result<()> {
/// use informer::config::{ExecConfig, ExecCredentialProvider, TokenProvider};
/// let exec = ExecConfig { command: "my-plugin".into(), ..Default::default() };
/// let provider = ExecCredentialProvider::new("me", &exec, None)?;
/// let token = provider.token().await?;
/// # let _ = token; Ok(()) }
/// ```
pub struct ExecCredentialProvider {
    user: String,
    exec: ExecConfig,
    api_version: String,
    /// The `KUBERNETES_EXEC_INFO` JSON.
    exec_info: String,
    cached: Mutex<Option<ExecCredential>>,
    /// Held while the plugin runs, so concurrent callers share one run.
    running: tokio::sync::Mutex<()>,
    /// A run longer than this is killed and fails.
    timeout: Duration,
    /// The client certificate of the latest run that gave one, for TLS handshakes.
    identity: Arc<RotatingIdentity>,
}

/// The exec configuration as [`ExecConfig`] shows it; `KUBERNETES_EXEC_INFO` (which carries the
/// cluster's `config` extension) and the cached credential are left out.
impl std::fmt::Debug for ExecCredentialProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecCredentialProvider")
            .field("user", &self.user)
            .field("exec", &self.exec)
            .field("api_version", &self.api_version)
            .finish_non_exhaustive()
    }
}

impl ExecCredentialProvider {
    /// A provider for `user`'s `exec` section. `cluster` is the `spec.cluster` object sent when
    /// `provideClusterInfo` is set. Nothing is run yet.
    ///
    /// ```
    /// use informer::config::{ExecConfig, ExecCredentialProvider};
    /// let exec = ExecConfig { api_version: Some("v0".into()), command: "x".into(), ..Default::default() };
    /// assert!(ExecCredentialProvider::new("me", &exec, None).is_err());
    /// ```
    pub fn new(
        user: &str,
        exec: &ExecConfig,
        cluster: Option<serde_json::Value>,
    ) -> Result<ExecCredentialProvider> {
        let api_version = exec
            .api_version
            .clone()
            .unwrap_or_else(|| "client.authentication.k8s.io/v1".into());
        if !matches!(
            api_version.as_str(),
            "client.authentication.k8s.io/v1" | "client.authentication.k8s.io/v1beta1"
        ) {
            return Err(Error::Config(format!(
                "user {user:?} exec apiVersion {api_version:?} is not supported (use \
                 client.authentication.k8s.io/v1 or v1beta1)"
            )));
        }
        if exec.command.is_empty() {
            return Err(Error::Config(format!(
                "user {user:?} exec: command is empty"
            )));
        }
        let interactive = exec.interactive_mode.unwrap_or_default() == InteractiveMode::Always;
        let mut spec = serde_json::json!({ "interactive": interactive });
        if let Some(cluster) = cluster.filter(|_| exec.provide_cluster_info) {
            spec["cluster"] = cluster;
        }
        let exec_info = serde_json::json!({
            "apiVersion": api_version,
            "kind": "ExecCredential",
            "spec": spec,
        })
        .to_string();
        Ok(ExecCredentialProvider {
            user: user.to_owned(),
            exec: exec.clone(),
            api_version,
            exec_info,
            cached: Mutex::new(None),
            identity: Arc::new(RotatingIdentity::new()),
            running: tokio::sync::Mutex::new(()),
            timeout: DEFAULT_PLUGIN_TIMEOUT,
        })
    }

    /// The same provider with another limit on one run of the plugin (default
    /// [`DEFAULT_PLUGIN_TIMEOUT`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use informer::config::{ExecConfig, ExecCredentialProvider};
    /// let exec = ExecConfig { command: "my-plugin".into(), ..Default::default() };
    /// let provider = ExecCredentialProvider::new("me", &exec, None)?
    ///     .with_timeout(Duration::from_secs(10));
    /// # Ok::<(), informer::Error>(())
    /// ```
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The cached credential if still fresh, else the plugin's new one.
    ///
    /// ```no_run
    /// # async fn demo(provider: informer::config::ExecCredentialProvider) -> informer::Result<()> {
    /// let credential = provider.credential().await?;
    /// println!("valid until {:?}", credential.expires_at);
    /// # Ok(()) }
    /// ```
    pub async fn credential(&self) -> Result<ExecCredential> {
        if let Some(c) = self.fresh() {
            return Ok(c);
        }
        let _running = self.running.lock().await;
        if let Some(c) = self.fresh() {
            return Ok(c);
        }
        let credential = self.run().await?;
        if let Some(identity) = &credential.identity {
            self.identity.set(identity)?;
        }
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = Some(credential.clone());
        Ok(credential)
    }

    fn fresh(&self) -> Option<ExecCredential> {
        let cached = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        cached
            .as_ref()
            .filter(|c| match c.expires_at {
                None => true,
                Some(at) => SystemTime::now() + REFRESH_MARGIN < at,
            })
            .cloned()
    }

    fn describe(&self) -> String {
        format!(
            "exec plugin {:?} of user {:?}",
            self.exec.command, self.user
        )
    }

    async fn run(&self) -> Result<ExecCredential> {
        let interactive = self.exec.interactive_mode.unwrap_or_default() == InteractiveMode::Always;
        let mut command = std::process::Command::new(&self.exec.command);
        command
            .args(&self.exec.args)
            .envs(self.exec.env.iter().map(|v| (&v.name, v.value.expose())))
            .env("KUBERNETES_EXEC_INFO", &self.exec_info)
            .stdin(if interactive {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(if interactive {
                Stdio::inherit()
            } else {
                Stdio::piped()
            });
        let mut child = KillOnDrop(Some(command.spawn().map_err(|e| {
            let hint = match &self.exec.install_hint {
                Some(h) if !h.trim().is_empty() => h.trim().to_owned(),
                _ => "the kubeconfig gives no installHint".to_owned(),
            };
            Error::Config(format!(
                "{} could not be started: {e}. {hint}",
                self.describe()
            ))
        })?));
        let stdout = child.child().stdout.take().expect("stdout is piped");
        let stderr = child.child().stderr.take();
        let outcome = tokio::time::timeout(self.timeout, async {
            // Both pipes at once, each on a thread of its own: a plugin blocked writing to a full
            // stderr pipe never exits.
            let stdout = on_thread(move || read_capped(stdout))?;
            let stderr = on_thread(move || read_tail(stderr))?;
            // stdout ends when the plugin exits (or closes it), or at the cap.
            let stdout = stdout.await.map_err(std::io::Error::other)??;
            let status = child.wait().await?;
            let stderr = stderr.await.unwrap_or_default();
            std::io::Result::Ok((stdout, stderr, status))
        })
        .await;
        // Past here the plugin has exited, or fails the run and is killed when `child` drops.
        let (stdout, stderr, status) = match outcome {
            Err(_) => {
                return Err(Error::Config(format!(
                    "{} did not finish within {} s and was killed",
                    self.describe(),
                    self.timeout.as_secs_f64()
                )));
            }
            Ok(Err(e)) => {
                return Err(Error::Config(format!("{}: {e}", self.describe())));
            }
            Ok(Ok(done)) => done,
        };
        if !status.success() {
            let stderr = if interactive {
                "(stderr went to the terminal)".to_owned()
            } else {
                stderr_excerpt(&stderr)
            };
            return Err(Error::Config(format!(
                "{} failed ({status}); stderr: {stderr}",
                self.describe(),
            )));
        }
        self.parse_output(&stdout)
    }

    fn parse_output(&self, stdout: &[u8]) -> Result<ExecCredential> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Output {
            api_version: Option<String>,
            kind: Option<String>,
            status: Option<Status>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Status {
            expiration_timestamp: Option<String>,
            token: Option<Secret>,
            client_certificate_data: Option<String>,
            client_key_data: Option<Secret>,
        }
        let fail = |what: String| Error::Config(format!("{}: {what}", self.describe()));
        // serde_json's messages give line and column, never the input text.
        let output: Output = serde_json::from_slice(stdout)
            .map_err(|e| fail(format!("output is not an ExecCredential JSON object: {e}")))?;
        if output.kind.as_deref() != Some("ExecCredential") {
            return Err(fail(format!(
                "output has kind {:?}, expected \"ExecCredential\"",
                output.kind.unwrap_or_default()
            )));
        }
        if output.api_version.as_deref() != Some(&self.api_version) {
            return Err(fail(format!(
                "output has apiVersion {:?}, but the kubeconfig asks for {:?}",
                output.api_version.unwrap_or_default(),
                self.api_version
            )));
        }
        let status = output
            .status
            .ok_or_else(|| fail("output has no status".into()))?;
        let expires_at = match status.expiration_timestamp.as_deref() {
            None | Some("") => None,
            Some(t) => Some(parse_rfc3339(t).ok_or_else(|| {
                fail(format!(
                    "status.expirationTimestamp {t:?} is not an RFC 3339 time"
                ))
            })?),
        };
        let token = status.token.filter(|t| !t.expose().is_empty());
        let identity = match (status.client_certificate_data, status.client_key_data) {
            (Some(cert), Some(key)) if !cert.is_empty() => Some(
                Identity::from_pem(cert.as_bytes(), key.expose().as_bytes()).map_err(|e| {
                    fail(format!("status.clientCertificateData/clientKeyData: {e}"))
                })?,
            ),
            (Some(cert), None) if !cert.is_empty() => {
                return Err(fail(
                    "status.clientCertificateData without status.clientKeyData".into(),
                ));
            }
            _ => None,
        };
        if token.is_none() && identity.is_none() {
            return Err(fail(
                "status has neither a token nor a client certificate".into(),
            ));
        }
        Ok(ExecCredential {
            token,
            identity,
            expires_at,
        })
    }
}

impl TokenProvider for ExecCredentialProvider {
    /// The plugin's token; empty (no `Authorization` header) when it gives only a client
    /// certificate, which the run has installed for TLS.
    fn token(&self) -> Pin<Box<dyn Future<Output = Result<Secret>> + Send + '_>> {
        Box::pin(async move {
            let credential = self.credential().await?;
            Ok(credential.token.unwrap_or_else(|| Secret::new("")))
        })
    }

    fn client_certificate(&self) -> Option<Arc<RotatingIdentity>> {
        Some(self.identity.clone())
    }

    fn invalidate(&self) {
        *self.cached.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// A running plugin, killed (and reaped on a thread of its own) if it is dropped before it has
/// exited: on a timeout, an error, or when the caller stops waiting for the credential.
struct KillOnDrop(Option<std::process::Child>);

impl KillOnDrop {
    fn child(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("taken only when dropped")
    }

    /// Waits for the plugin to exit without blocking the runtime: `std`'s `wait` cannot be
    /// interrupted to kill the plugin, so this polls `try_wait`, at first often (a plugin that has
    /// closed stdout is usually exiting), then every 20 ms.
    async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(status) = self.child().try_wait()? {
                return Ok(status);
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let Some(mut child) = self.0.take() else {
            return;
        };
        if let Ok(None) = child.try_wait() {
            let _ = child.kill();
            // Reaped off the runtime: `wait` blocks until the kill has taken effect.
            let _ = std::thread::Builder::new()
                .name("exec-plugin-reaper".into())
                .spawn(move || {
                    let _ = child.wait();
                });
        }
    }
}

/// Runs `read` on a thread of its own; its result arrives through the receiver.
fn on_thread<T: Send + 'static>(
    read: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<tokio::sync::oneshot::Receiver<T>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("exec-plugin-pipe".into())
        .spawn(move || {
            let _ = tx.send(read());
        })?;
    Ok(rx)
}

/// Everything the plugin prints on stdout, or an error once it passes [`MAX_PLUGIN_OUTPUT`].
fn read_capped(stdout: std::process::ChildStdout) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut out = Vec::new();
    // One byte more than allowed tells "exactly the limit" from "more".
    let read = stdout
        .take(MAX_PLUGIN_OUTPUT as u64 + 1)
        .read_to_end(&mut out)?;
    if read > MAX_PLUGIN_OUTPUT {
        return Err(std::io::Error::other(format!(
            "it printed more than {MAX_PLUGIN_OUTPUT} bytes on stdout; killed"
        )));
    }
    Ok(out)
}

/// The last bytes of the plugin's stderr (at most twice [`STDERR_EXCERPT`] held at any time);
/// nothing when stderr is not piped or cannot be read.
fn read_tail(stderr: Option<std::process::ChildStderr>) -> Vec<u8> {
    use std::io::Read;
    let Some(mut stderr) = stderr else {
        return Vec::new();
    };
    let mut tail = Vec::with_capacity(2 * STDERR_EXCERPT);
    let mut buf = [0u8; 4096];
    loop {
        match stderr.read(&mut buf) {
            Ok(0) => return tail,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return tail,
            Ok(n) => {
                tail.extend_from_slice(&buf[..n]);
                if tail.len() > 2 * STDERR_EXCERPT {
                    tail.drain(..tail.len() - STDERR_EXCERPT);
                }
            }
        }
    }
}

/// The last [`STDERR_EXCERPT`] bytes of `stderr`, trimmed, as one printable line.
fn stderr_excerpt(stderr: &[u8]) -> String {
    let start = stderr.len().saturating_sub(STDERR_EXCERPT);
    let text = String::from_utf8_lossy(&stderr[start..]);
    let text = text.trim();
    if text.is_empty() {
        return "(empty)".into();
    }
    let mut line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if start > 0 {
        line.insert(0, '…');
    }
    line
}

/// The client certificate an exec plugin gave last, which TLS handshakes present (rustls asks
/// [`resolve`](ResolvesClientCert::resolve) at each one). Empty until a run gives a certificate.
pub struct RotatingIdentity {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    /// Bumped at each change, so the client knows its pooled connections carry an older one.
    generation: AtomicU64,
}

impl RotatingIdentity {
    fn new() -> RotatingIdentity {
        RotatingIdentity {
            current: RwLock::new(None),
            generation: AtomicU64::new(0),
        }
    }

    /// Installs `identity` if it differs from the current one.
    fn set(&self, identity: &Identity) -> Result<()> {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if current.as_ref().is_some_and(|c| c.cert == identity.certs) {
            return Ok(());
        }
        let key = rustls::crypto::ring::sign::any_supported_type(&identity.key)
            .map_err(|e| Error::Config(format!("the plugin's client key is unusable: {e}")))?;
        *current = Some(Arc::new(CertifiedKey::new(identity.certs.clone(), key)));
        // Release: a reader that sees the new generation also sees the new certificate (the lock
        // already orders them; the pairing keeps that true without it).
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Whether a run has given a certificate.
    pub(crate) fn is_set(&self) -> bool {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// A number that changes whenever the certificate does.
    pub(crate) fn generation(&self) -> u64 {
        // Acquire: pairs with the Release in `set`.
        self.generation.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for RotatingIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RotatingIdentity")
            .field("generation", &self.generation())
            .finish_non_exhaustive()
    }
}

impl ResolvesClientCert for RotatingIdentity {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn has_certs(&self) -> bool {
        true
    }
}
