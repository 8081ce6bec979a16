//! Kubeconfig files: parsing, merging the way kubectl does, and turning one context into a
//! [`Config`].
//!
//! * Parsing uses `serde-saphyr` (pure Rust, no `unsafe` C port, panic-free by design) with the
//!   `yaml` feature (off by default: in-cluster config needs none); without it, `serde_json` reads JSON kubeconfigs (YAML's subset,
//!   which kubectl reads too) into the same structures, and a YAML file is an [`Error::Config`]
//!   saying to enable the feature. Everything after parsing is the same. Unknown keys are ignored;
//!   Go's `null` for an empty list is accepted. A syntax or type error is an [`Error::Config`]
//!   naming the file, line and column, with quoted values removed from the message so a token in
//!   a mistyped field cannot leak into a log.
//! * [`Kubeconfig::read`] resolves relative `certificate-authority`, `client-certificate`,
//!   `client-key`, `tokenFile` and exec `command` (when it contains a `/`) against the file's
//!   folder, so merged files keep their meaning.
//! * [`Kubeconfig::merge`]: the first file to define a cluster, user or context name wins, and the
//!   first non-empty `current-context` wins (kubectl's rules for `$KUBECONFIG`).
//! * Secrets (`token`, `password`, `client-key-data`, exec `env` values) are [`Secret`]s: they
//!   never show in `Debug` output.
//! * Credentials, in kube-rs's order: client certificate (alongside any of the others), then
//!   `auth-provider` (an error naming the exec plugin to use), basic, `token`, `tokenFile`, `exec`.
//! * `proxy-url` (`http://` only) becomes [`Config::proxy_url`]; `disable-compression` needs
//!   nothing, as the client never asks for compressed responses.
//!
//! Not supported: several YAML documents in one file, UTF-16 files, impersonation (`as`,
//! `as-groups`), `HTTPS_PROXY`/`NO_PROXY` from the environment, SOCKS and `https://` proxies.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use serde::Deserialize;

use super::exec::{ExecConfig, ExecCredentialProvider};
use super::token_file::TokenFile;
use super::{Auth, Config, Identity, Secret, parse_certificates};
use crate::blocking::unblock;
use crate::error::{Error, Result};
use crate::model::meta::null_as_default;

/// A parsed kubeconfig file (or several merged).
///
/// ```
/// # if cfg!(not(feature = "yaml")) { return Ok(()); } // YAML needs the feature
/// let kubeconfig = informer::config::Kubeconfig::from_yaml(
///     "clusters:\n- name: c\n  cluster: {server: 'https://k:6443'}\ncurrent-context: x\n",
/// )?;
/// assert_eq!(kubeconfig.clusters[0].name, "c");
/// assert_eq!(kubeconfig.current_context.as_deref(), Some("x"));
/// # Ok::<(), informer::Error>(())
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Kubeconfig {
    /// `clusters`: where apiservers are.
    #[serde(default, deserialize_with = "null_as_default")]
    pub clusters: Vec<NamedCluster>,
    /// `users`: credentials.
    #[serde(default, deserialize_with = "null_as_default")]
    pub users: Vec<NamedUser>,
    /// `contexts`: (cluster, user, namespace) triples.
    #[serde(default, deserialize_with = "null_as_default")]
    pub contexts: Vec<NamedContext>,
    /// `current-context`: the context used when none is asked for.
    pub current_context: Option<String>,
}

/// A `clusters[]` entry.
///
/// ```
/// # if cfg!(not(feature = "yaml")) { return Ok(()); } // YAML needs the feature
/// let k = informer::config::Kubeconfig::from_yaml("clusters: [{name: c, cluster: null}]")?;
/// assert!(k.clusters[0].cluster.server.is_none());
/// # Ok::<(), informer::Error>(())
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NamedCluster {
    /// The name contexts refer to.
    pub name: String,
    /// The cluster's settings.
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster: Cluster,
}

/// Where a cluster is and how to trust it.
///
/// ```
/// # if cfg!(not(feature = "yaml")) { return Ok(()); } // YAML needs the feature
/// let k = informer::config::Kubeconfig::from_yaml(
///     "clusters: [{name: c, cluster: {server: 'https://k:6443', insecure-skip-tls-verify: true}}]",
/// )?;
/// assert_eq!(k.clusters[0].cluster.insecure_skip_tls_verify, Some(true));
/// # Ok::<(), informer::Error>(())
/// ```
///
/// `Debug` redacts the user information of `server` and `proxy-url` (`http://user:password@...`).
#[derive(Clone, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Cluster {
    /// `https://host:port`, optionally with a path prefix.
    pub server: Option<String>,
    /// The name to verify the server certificate against instead of the URL's host.
    pub tls_server_name: Option<String>,
    /// Skip server certificate verification.
    pub insecure_skip_tls_verify: Option<bool>,
    /// A PEM file (relative paths are resolved by [`Kubeconfig::read`]).
    pub certificate_authority: Option<PathBuf>,
    /// Base64 of PEM data; wins over `certificate_authority`.
    pub certificate_authority_data: Option<String>,
    /// An `http://` proxy to tunnel through with `CONNECT`.
    pub proxy_url: Option<String>,
    /// Parsed and passed to exec plugins; the client never asks for compressed responses anyway.
    pub disable_compression: Option<bool>,
    /// Extensions; `client.authentication.k8s.io/exec` is passed to exec plugins as `config`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub extensions: Vec<NamedExtension>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("server", &super::debug_url(self.server.as_deref()))
            .field("tls_server_name", &self.tls_server_name)
            .field("insecure_skip_tls_verify", &self.insecure_skip_tls_verify)
            .field("certificate_authority", &self.certificate_authority)
            .field(
                "certificate_authority_data",
                &self.certificate_authority_data,
            )
            .field("proxy_url", &super::debug_url(self.proxy_url.as_deref()))
            .field("disable_compression", &self.disable_compression)
            .field("extensions", &self.extensions)
            .finish()
    }
}

/// A `clusters[].cluster.extensions[]` entry (the exec plugin's `config` lives here).
///
/// ```
/// # if cfg!(not(feature = "yaml")) { return Ok(()); } // YAML needs the feature
/// let k = informer::config::Kubeconfig::from_yaml(
///     "clusters: [{name: c, cluster: {extensions: [{name: x, extension: {a: 1}}]}}]",
/// )?;
/// assert_eq!(k.clusters[0].cluster.extensions[0].extension["a"], 1);
/// # Ok::<(), informer::Error>(())
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NamedExtension {
    /// The extension's name.
    pub name: String,
    /// Its value, as JSON.
    #[serde(default)]
    pub extension: serde_json::Value,
}

/// A `users[]` entry.
///
/// ```
/// # if cfg!(not(feature = "yaml")) { return Ok(()); } // YAML needs the feature
/// let k = informer::config::Kubeconfig::from_yaml("users: [{name: u, user: {token: abc}}]")?;
/// assert_eq!(k.users[0].user.token.as_ref().unwrap().expose(), "abc");
/// # Ok::<(), informer::Error>(())
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NamedUser {
    /// The name contexts refer to.
    pub name: String,
    /// The credentials.
    #[serde(default, deserialize_with = "null_as_default")]
    pub user: User,
}

/// How a user authenticates (`AuthInfo` in client-go). Secret fields are [`Secret`]s.
///
/// ```
/// # if cfg!(not(feature = "yaml")) { return Ok(()); } // YAML needs the feature
/// let k = informer::config::Kubeconfig::from_yaml(
///     "users: [{name: u, user: {username: admin, password: hunter2}}]",
/// )?;
/// assert!(!format!("{:?}", k.users[0].user).contains("hunter2"));
/// # Ok::<(), informer::Error>(())
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct User {
    /// A PEM certificate file (relative paths are resolved by [`Kubeconfig::read`]).
    pub client_certificate: Option<PathBuf>,
    /// Base64 of PEM data; wins over `client_certificate`.
    pub client_certificate_data: Option<String>,
    /// A PEM private key file (PKCS#1, PKCS#8 or SEC1).
    pub client_key: Option<PathBuf>,
    /// Base64 of PEM data; wins over `client_key`.
    pub client_key_data: Option<Secret>,
    /// A bearer token; wins over `token_file`.
    pub token: Option<Secret>,
    /// A file holding a bearer token, re-read periodically ([`TokenFile`]).
    #[serde(rename = "tokenFile")]
    pub token_file: Option<PathBuf>,
    /// Basic authentication user (with `password`).
    pub username: Option<String>,
    /// Basic authentication password.
    pub password: Option<Secret>,
    /// A legacy auth provider: an error with advice.
    pub auth_provider: Option<AuthProvider>,
    /// An exec credential plugin.
    pub exec: Option<ExecConfig>,
}

/// A legacy in-tree `auth-provider` (gcp, azure, oidc): not supported; its name picks the error
/// message pointing at the exec plugin to use instead. Its `config` (which holds tokens) is not
/// read.
///
/// ```
/// # if cfg!(not(feature = "yaml")) { return Ok(()); } // YAML needs the feature
/// let k = informer::config::Kubeconfig::from_yaml(
///     "users: [{name: u, user: {auth-provider: {name: gcp, config: {access-token: x}}}}]",
/// )?;
/// assert_eq!(k.users[0].user.auth_provider.as_ref().unwrap().name, "gcp");
/// # Ok::<(), informer::Error>(())
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
pub struct AuthProvider {
    /// `gcp`, `azure`, `oidc`, ...
    pub name: String,
}

/// A `contexts[]` entry.
///
/// ```
/// # if cfg!(not(feature = "yaml")) { return Ok(()); } // YAML needs the feature
/// let k = informer::config::Kubeconfig::from_yaml(
///     "contexts: [{name: dev, context: {cluster: c, user: u, namespace: apps}}]",
/// )?;
/// assert_eq!(k.contexts[0].context.namespace.as_deref(), Some("apps"));
/// # Ok::<(), informer::Error>(())
/// ```
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NamedContext {
    /// The context's name (`current-context`, `--context`).
    pub name: String,
    /// What it selects.
    #[serde(default, deserialize_with = "null_as_default")]
    pub context: Context,
}

/// A cluster, a user and a namespace (see [`NamedContext`]).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Context {
    /// A cluster name.
    #[serde(default)]
    pub cluster: String,
    /// A user name; empty means no credentials.
    #[serde(default)]
    pub user: String,
    /// The default namespace; `default` when unset.
    pub namespace: Option<String>,
}

/// Which kubeconfig and which parts of it to use; `None` fields mean "as kubectl would".
///
/// ```
/// let options = informer::config::KubeconfigOptions {
///     context: Some("staging".into()),
///     ..Default::default()
/// };
/// assert!(options.path.is_none());
/// ```
#[derive(Clone, Debug, Default)]
pub struct KubeconfigOptions {
    /// The context to use instead of `current-context`.
    pub context: Option<String>,
    /// The cluster to use instead of the context's.
    pub cluster: Option<String>,
    /// The user to use instead of the context's.
    pub user: Option<String>,
    /// One kubeconfig file instead of `$KUBECONFIG` / `~/.kube/config` (kubectl `--kubeconfig`).
    pub path: Option<PathBuf>,
}

impl Kubeconfig {
    /// Parses a kubeconfig. Paths in it are kept as written. Without the `yaml` feature (on by
    /// default) only JSON kubeconfigs are read (YAML is a superset of JSON; kubectl reads both), and
    /// YAML is an [`Error::Config`] saying to enable the feature.
    ///
    /// ```
    /// let err = informer::config::Kubeconfig::from_yaml("clusters: [\n").unwrap_err();
    /// // With `yaml`, the parser's position; without, "not JSON ... `yaml` feature".
    /// assert!(err.to_string().contains(if cfg!(feature = "yaml") { "line" } else { "yaml" }));
    /// let json = r#"{"clusters": [{"name": "c", "cluster": {"server": "https://k:6443"}}]}"#;
    /// assert_eq!(informer::config::Kubeconfig::from_yaml(json)?.clusters[0].name, "c");
    /// # Ok::<(), informer::Error>(())
    /// ```
    pub fn from_yaml(text: &str) -> Result<Kubeconfig> {
        parse_document(text, "kubeconfig")
    }

    /// Reads and parses one file, resolving relative paths against its folder. A UTF-8 byte-order
    /// mark is skipped. Errors name the file.
    ///
    /// ```no_run
    /// let kubeconfig = informer::config::Kubeconfig::read("/root/.kube/config".as_ref())?;
    /// # Ok::<(), informer::Error>(())
    /// ```
    pub fn read(path: &Path) -> Result<Kubeconfig> {
        let bytes = std::fs::read(path)
            .map_err(|e| Error::Config(format!("kubeconfig {}: {e}", path.display())))?;
        let bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&bytes);
        let text = std::str::from_utf8(bytes).map_err(|e| {
            Error::Config(format!("kubeconfig {}: not UTF-8 ({e})", path.display()))
        })?;
        let mut kubeconfig: Kubeconfig =
            parse_document(text, &format!("kubeconfig {}", path.display()))?;
        if let Some(dir) = path.parent() {
            kubeconfig.resolve_relative_paths(dir);
        }
        Ok(kubeconfig)
    }

    /// Reads every file of `paths` that exists and merges them in order (first wins). Files that
    /// do not exist are skipped, as kubectl does for `$KUBECONFIG`.
    ///
    /// ```no_run
    /// let merged = informer::config::Kubeconfig::read_merged(&["a.yaml".into(), "b.yaml".into()])?;
    /// # Ok::<(), informer::Error>(())
    /// ```
    pub fn read_merged(paths: &[PathBuf]) -> Result<Kubeconfig> {
        let mut merged = Kubeconfig::default();
        for path in paths.iter().filter(|p| p.exists()) {
            merged.merge(Kubeconfig::read(path)?);
        }
        Ok(merged)
    }

    /// Adds `other`'s clusters, users and contexts whose names are not yet defined, and its
    /// `current-context` if none is set yet.
    ///
    /// ```
    /// # if cfg!(not(feature = "yaml")) { return Ok(()); } // YAML needs the feature
    /// use informer::config::Kubeconfig;
    /// let mut first = Kubeconfig::from_yaml("contexts: [{name: a, context: {namespace: one}}]")?;
    /// first.merge(Kubeconfig::from_yaml("contexts: [{name: a, context: {namespace: two}}]")?);
    /// assert_eq!(first.contexts.len(), 1);
    /// assert_eq!(first.contexts[0].context.namespace.as_deref(), Some("one"));
    /// # Ok::<(), informer::Error>(())
    /// ```
    pub fn merge(&mut self, other: Kubeconfig) {
        fn append<T>(into: &mut Vec<T>, from: Vec<T>, name: impl Fn(&T) -> &str) {
            for item in from {
                if !into.iter().any(|i| name(i) == name(&item)) {
                    into.push(item);
                }
            }
        }
        append(&mut self.clusters, other.clusters, |c| &c.name);
        append(&mut self.users, other.users, |u| &u.name);
        append(&mut self.contexts, other.contexts, |c| &c.name);
        if self.current_context.as_deref().is_none_or(str::is_empty) {
            self.current_context = other.current_context;
        }
    }

    fn resolve_relative_paths(&mut self, dir: &Path) {
        let resolve = |p: &mut Option<PathBuf>| {
            if let Some(path) = p
                .as_mut()
                .filter(|p| p.is_relative() && !p.as_os_str().is_empty())
            {
                *path = dir.join(&*path);
            }
        };
        for c in &mut self.clusters {
            resolve(&mut c.cluster.certificate_authority);
        }
        for u in &mut self.users {
            resolve(&mut u.user.client_certificate);
            resolve(&mut u.user.client_key);
            resolve(&mut u.user.token_file);
            if let Some(exec) = &mut u.user.exec {
                // As client-go: a bare name is looked up on $PATH, a relative path is the file's.
                if exec.command.contains('/') && Path::new(&exec.command).is_relative() {
                    exec.command = dir.join(&exec.command).to_string_lossy().into_owned();
                }
            }
        }
    }
}

/// The kubeconfig files kubectl would read: the entries of `kubeconfig_env` (the value of
/// `$KUBECONFIG`, split like `PATH`, empty entries skipped) if any, else `<home>/.kube/config`.
///
/// ```
/// use std::path::PathBuf;
/// let paths = informer::config::kubeconfig_paths(Some("a::b".as_ref()), Some("/home/me".as_ref()));
/// assert_eq!(paths, [PathBuf::from("a"), PathBuf::from("b")]);
/// let paths = informer::config::kubeconfig_paths(None, Some("/home/me".as_ref()));
/// assert_eq!(paths, [PathBuf::from("/home/me/.kube/config")]);
/// ```
pub fn kubeconfig_paths(kubeconfig_env: Option<&OsStr>, home: Option<&Path>) -> Vec<PathBuf> {
    let from_env: Vec<PathBuf> = kubeconfig_env
        .map(|v| {
            std::env::split_paths(v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    if !from_env.is_empty() {
        return from_env;
    }
    home.map(|h| vec![h.join(".kube").join("config")])
        .unwrap_or_default()
}

/// Parses a kubeconfig document into `T`: YAML with the `yaml` feature, JSON (YAML's subset,
/// which kubectl reads too) without it. Errors carry `what` (e.g. the file), the line and column,
/// and no quoted values from the input.
fn parse_document<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    #[cfg(feature = "yaml")]
    return parse_yaml(text, what);
    #[cfg(not(feature = "yaml"))]
    return parse_json(text, what);
}

#[cfg(feature = "yaml")]
fn parse_yaml<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    serde_saphyr::from_str(text).map_err(|e| {
        let plain = redact_quoted(&e.without_snippet().to_string());
        match e.location() {
            Some(l) => {
                let suffix = format!(" at line {}, column {}", l.line(), l.column());
                let plain = plain.strip_suffix(&suffix).unwrap_or(&plain);
                Error::Config(format!(
                    "{what}: line {} column {}: {plain}",
                    l.line(),
                    l.column()
                ))
            }
            None => Error::Config(format!("{what}: {plain}")),
        }
    })
}

/// JSON only (the `yaml` feature is off). An empty file is an empty kubeconfig, as in YAML; a
/// document that is not JSON is an error saying to enable the `yaml` feature.
#[cfg(not(feature = "yaml"))]
fn parse_json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    let first = text.trim_start().chars().next();
    if first.is_none() {
        return serde_json::from_str("{}").map_err(|e| Error::Config(format!("{what}: {e}")));
    }
    if first != Some('{') {
        return Err(Error::Config(format!(
            "{what}: not JSON; YAML kubeconfigs need informer's `yaml` feature (`features = [\"yaml\"]`), \
             or convert the file to JSON"
        )));
    }
    serde_json::from_str(text).map_err(|e| {
        let plain = redact_quoted(&e.to_string());
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let plain = plain.strip_suffix(&suffix).unwrap_or(&plain);
        let hint = match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                " (YAML kubeconfigs need informer's `yaml` feature)"
            }
            _ => "",
        };
        Error::Config(format!(
            "{what}: line {} column {}: {plain}{hint}",
            e.line(),
            e.column()
        ))
    })
}

/// Replaces the content of every `"..."` in a parser message with `…` (serde quotes offending
/// values that way; field names are in backticks and stay).
fn redact_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut inside = false;
    for c in message.chars() {
        if c == '"' {
            if inside {
                out.push('…');
            }
            inside = !inside;
            out.push(c);
        } else if !inside {
            out.push(c);
        }
    }
    out
}

impl Config {
    /// Loads the kubeconfig kubectl would use (or `options.path`) and builds the configuration of
    /// the chosen context. An exec plugin is run once here, so that a client certificate it
    /// returns can be part of the TLS configuration.
    ///
    /// ```no_run
    /// # async fn demo() -> informer::Result<()> {
    /// use informer::config::KubeconfigOptions;
    /// let config = informer::Config::from_kubeconfig(&KubeconfigOptions {
    ///     context: Some("kind-kind".into()),
    ///     ..Default::default()
    /// })
    /// .await?;
    /// # Ok(()) }
    /// ```
    pub async fn from_kubeconfig(options: &KubeconfigOptions) -> Result<Config> {
        let path = options.path.clone();
        // Files are read off the runtime's workers (`blocking`).
        let kubeconfig = unblock(move || {
            let paths = match path {
                Some(p) => vec![p],
                None => kubeconfig_paths(
                    std::env::var_os("KUBECONFIG").as_deref(),
                    home_dir().as_deref(),
                ),
            };
            if !paths.iter().any(|p| p.exists()) {
                return Err(Error::Config(format!(
                    "no kubeconfig file found (looked at {})",
                    describe_paths(&paths)
                )));
            }
            Kubeconfig::read_merged(&paths)
        })
        .await?;
        Self::from_custom_kubeconfig(kubeconfig, options).await
    }

    /// Builds the configuration of one context of an already loaded kubeconfig (`options.path` is
    /// ignored).
    ///
    /// ```
    /// # async fn demo() -> informer::Result<()> {
    /// # if cfg!(not(feature = "yaml")) { return Ok(()); } // YAML needs the feature
    /// use informer::config::{Kubeconfig, KubeconfigOptions};
    /// let kubeconfig = Kubeconfig::from_yaml(
    ///     "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:8080'}}]\n\
    ///      contexts: [{name: x, context: {cluster: c, namespace: apps}}]\n\
    ///      current-context: x\n",
    /// )?;
    /// let config = informer::Config::from_custom_kubeconfig(kubeconfig, &KubeconfigOptions::default()).await?;
    /// assert_eq!(config.default_namespace, "apps");
    /// # Ok(()) }
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(demo()).unwrap();
    /// ```
    pub async fn from_custom_kubeconfig(
        kubeconfig: Kubeconfig,
        options: &KubeconfigOptions,
    ) -> Result<Config> {
        let options = options.clone();
        // The files it names (CA, client certificate and key, token file) are read off the
        // runtime's workers (`blocking`); an exec plugin then runs asynchronously.
        let (mut config, exec) = unblock(move || {
            let selected = select(&kubeconfig, &options)?;
            let mut config = cluster_config(selected.cluster_name, selected.cluster)?;
            config.default_namespace = selected
                .namespace
                .filter(|n| !n.is_empty())
                .unwrap_or("default")
                .to_owned();
            let exec = match selected.user {
                Some((user_name, user)) => {
                    apply_user(&mut config, user_name, user, selected.cluster)?
                }
                None => None,
            };
            Ok::<_, Error>((config, exec))
        })
        .await?;
        if let Some(provider) = exec {
            let credential = provider.credential().await?;
            if let Some(identity) = credential.identity {
                // The first certificate; the provider keeps the client's current with later runs.
                config.tls.identity = Some(identity);
            }
            config.auth = Auth::Provider(Arc::new(provider));
        }
        Ok(config)
    }
}

struct Selected<'a> {
    cluster_name: &'a str,
    cluster: &'a Cluster,
    user: Option<(&'a str, &'a User)>,
    namespace: Option<&'a str>,
}

fn select<'a>(kubeconfig: &'a Kubeconfig, options: &'a KubeconfigOptions) -> Result<Selected<'a>> {
    let context_name = options
        .context
        .as_deref()
        .or(kubeconfig.current_context.as_deref())
        .filter(|c| !c.is_empty());
    let context = match context_name {
        Some(name) => Some(
            &kubeconfig
                .contexts
                .iter()
                .find(|c| c.name == name)
                .ok_or_else(|| {
                    Error::Config(format!(
                        "kubeconfig has no context named {name:?} (contexts: {})",
                        names(kubeconfig.contexts.iter().map(|c| &c.name))
                    ))
                })?
                .context,
        ),
        None if options.cluster.is_some() => None,
        None => {
            return Err(Error::Config(
                "kubeconfig has no current-context and no context was given".into(),
            ));
        }
    };
    let cluster_name = options
        .cluster
        .as_deref()
        .or(context.map(|c| c.cluster.as_str()))
        .unwrap_or_default();
    let cluster = &kubeconfig
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .ok_or_else(|| {
            Error::Config(format!(
                "kubeconfig has no cluster named {cluster_name:?}{} (clusters: {})",
                context_name
                    .map(|c| format!(" (used by context {c:?})"))
                    .unwrap_or_default(),
                names(kubeconfig.clusters.iter().map(|c| &c.name))
            ))
        })?
        .cluster;
    let user_name = options
        .user
        .as_deref()
        .or(context.map(|c| c.user.as_str()))
        .filter(|u| !u.is_empty());
    let user = match user_name {
        // An empty user is tolerated, as in client-go: the cluster may need no credentials.
        None => None,
        Some(name) => Some((
            name,
            &kubeconfig
                .users
                .iter()
                .find(|u| u.name == name)
                .ok_or_else(|| {
                    Error::Config(format!(
                        "kubeconfig has no user named {name:?} (users: {})",
                        names(kubeconfig.users.iter().map(|u| &u.name))
                    ))
                })?
                .user,
        )),
    };
    Ok(Selected {
        cluster_name,
        cluster,
        user,
        namespace: context.and_then(|c| c.namespace.as_deref()),
    })
}

fn names<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let list: Vec<&str> = names.map(String::as_str).collect();
    if list.is_empty() {
        "none".into()
    } else {
        list.join(", ")
    }
}

/// The server URL and TLS settings of a cluster.
fn cluster_config(name: &str, cluster: &Cluster) -> Result<Config> {
    let field = |f: &str| format!("cluster {name:?} {f}");
    let server = cluster
        .server
        .as_deref()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::Config(format!("{}: missing", field("server"))))?;
    let url = server
        .parse()
        .map_err(|e| Error::Config(format!("{} {server:?}: {e}", field("server"))))?;
    let mut config = Config::new(url);
    config.tls.accept_invalid_certs = cluster.insecure_skip_tls_verify.unwrap_or(false);
    config.tls.server_name = cluster.tls_server_name.clone().filter(|s| !s.is_empty());
    if let Some(pem) = read_data_or_file(
        &field("certificate-authority"),
        cluster.certificate_authority_data.as_deref(),
        cluster.certificate_authority.as_deref(),
    )? {
        let what = if cluster.certificate_authority_data.is_some() {
            field("certificate-authority-data")
        } else {
            format!(
                "{} {}",
                field("certificate-authority"),
                cluster
                    .certificate_authority
                    .as_deref()
                    .unwrap_or(Path::new(""))
                    .display()
            )
        };
        let certs = parse_certificates(&pem).map_err(|e| Error::Config(format!("{what}: {e}")))?;
        if certs.is_empty() {
            return Err(Error::Config(format!("{what}: no CERTIFICATE block")));
        }
        config.tls.root_certs = certs;
    }
    if let Some(proxy) = cluster.proxy_url.as_deref().filter(|p| !p.is_empty()) {
        config.proxy_url = Some(
            proxy
                .parse()
                .map_err(|e| Error::Config(format!("{}: {e}", field("proxy-url"))))?,
        );
    }
    Ok(config)
}

/// Credentials of a user: client certificate, then one of auth-provider (an error), basic,
/// token, tokenFile, exec (kube-rs's precedence). Reads files; an exec plugin is returned for the
/// caller to run (its credential may hold a client certificate too).
fn apply_user(
    config: &mut Config,
    name: &str,
    user: &User,
    cluster: &Cluster,
) -> Result<Option<ExecCredentialProvider>> {
    let field = |f: &str| format!("user {name:?} {f}");
    let cert = read_data_or_file(
        &field("client-certificate"),
        user.client_certificate_data.as_deref(),
        user.client_certificate.as_deref(),
    )?;
    let key = read_data_or_file(
        &field("client-key"),
        user.client_key_data.as_ref().map(Secret::expose),
        user.client_key.as_deref(),
    )?;
    match (cert, key) {
        (Some(cert), Some(key)) => {
            let identity = Identity::from_pem(&cert, &key)
                .map_err(|e| Error::Config(format!("{}: {e}", field("client certificate/key"))))?;
            config.tls.identity = Some(identity);
        }
        (None, None) => {}
        (Some(_), None) => {
            return Err(Error::Config(format!(
                "{}: client-certificate without client-key",
                field("").trim_end()
            )));
        }
        (None, Some(_)) => {
            return Err(Error::Config(format!(
                "{}: client-key without client-certificate",
                field("").trim_end()
            )));
        }
    }
    if let Some(provider) = &user.auth_provider {
        let advice = match provider.name.as_str() {
            "gcp" => {
                "use the exec plugin gke-gcloud-auth-plugin (`gcloud components install gke-gcloud-auth-plugin`, then `gcloud container clusters get-credentials`)"
            }
            "azure" => "use the exec plugin kubelogin (`kubelogin convert-kubeconfig`)",
            "oidc" => {
                "use an exec plugin such as kubelogin (int128/kubelogin, `kubectl oidc-login`)"
            }
            _ => "use an exec credential plugin instead",
        };
        return Err(Error::Config(format!(
            "{}: auth-provider {:?} is not supported (kubectl dropped in-tree auth providers); {advice}",
            field("auth-provider"),
            provider.name
        )));
    }
    if let (Some(username), Some(password)) = (&user.username, &user.password) {
        config.auth = Auth::Basic {
            username: username.clone(),
            password: password.clone(),
        };
    } else if let Some(token) = user.token.as_ref().filter(|t| !t.expose().is_empty()) {
        config.auth = Auth::Bearer(token.clone());
    } else if let Some(path) = &user.token_file {
        let tokens = TokenFile::new(path)
            .map_err(|e| Error::Config(format!("{}: {e}", field("tokenFile"))))?;
        config.auth = Auth::Provider(Arc::new(tokens));
    } else if let Some(exec) = &user.exec {
        let cluster_info = exec
            .provide_cluster_info
            .then(|| exec_cluster_info(cluster))
            .transpose()?;
        return ExecCredentialProvider::new(name, exec, cluster_info).map(Some);
    }
    Ok(None)
}

/// The `spec.cluster` object of `KUBERNETES_EXEC_INFO` (client-go's `clientauthentication.Cluster`).
fn exec_cluster_info(cluster: &Cluster) -> Result<serde_json::Value> {
    let ca = read_data_or_file(
        "cluster certificate-authority",
        cluster.certificate_authority_data.as_deref(),
        cluster.certificate_authority.as_deref(),
    )?;
    let mut info = serde_json::json!({ "server": cluster.server.clone().unwrap_or_default() });
    let mut set = |key: &str, value: serde_json::Value| {
        info[key] = value;
    };
    if let Some(name) = cluster.tls_server_name.as_ref().filter(|n| !n.is_empty()) {
        set("tls-server-name", name.clone().into());
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        set("insecure-skip-tls-verify", true.into());
    }
    if let Some(ca) = ca {
        set(
            "certificate-authority-data",
            base64::engine::general_purpose::STANDARD.encode(ca).into(),
        );
    }
    if let Some(proxy) = cluster.proxy_url.as_ref().filter(|p| !p.is_empty()) {
        set("proxy-url", proxy.clone().into());
    }
    if cluster.disable_compression == Some(true) {
        set("disable-compression", true.into());
    }
    if let Some(ext) = cluster
        .extensions
        .iter()
        .find(|e| e.name == "client.authentication.k8s.io/exec")
    {
        set("config", ext.extension.clone());
    }
    Ok(info)
}

/// Base64 `data` if set, else the content of `file` if set. Errors name `what` and the file.
fn read_data_or_file(
    what: &str,
    data: Option<&str>,
    file: Option<&Path>,
) -> Result<Option<Vec<u8>>> {
    if let Some(data) = data.filter(|d| !d.is_empty()) {
        let compact: String = data.split_whitespace().collect();
        return base64::engine::general_purpose::STANDARD
            .decode(compact)
            .map(Some)
            .map_err(|e| Error::Config(format!("{what}-data: not valid base64 ({e})")));
    }
    match file.filter(|f| !f.as_os_str().is_empty()) {
        Some(path) => std::fs::read(path)
            .map(Some)
            .map_err(|e| Error::Config(format!("{what} {}: {e}", path.display()))),
        None => Ok(None),
    }
}

fn describe_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "nothing: $KUBECONFIG is empty and $HOME is not set".into();
    }
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `$HOME` (`%USERPROFILE%` on Windows).
pub(crate) fn home_dir() -> Option<PathBuf> {
    let var = if cfg!(windows) { "USERPROFILE" } else { "HOME" };
    std::env::var_os(var)
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}
