//! Where the apiserver is and how to authenticate to it: everything [`Client`](crate::Client) needs.
//!
//! A [`Config`] is plain data. Build one by hand ([`Config::new`]) or load it the way kubectl does:
//!
//! * [`Config::infer`]: the kubeconfig (`$KUBECONFIG`, else `~/.kube/config`), else in-cluster.
//! * [`Config::from_kubeconfig`] / [`Config::from_custom_kubeconfig`]: one context of a kubeconfig
//!   ([`kubeconfig`]), with client certificates, tokens, token files and exec plugins ([`exec`]).
//! * [`Config::incluster`]: a pod's service account ([`incluster`]).
//!
//! Secrets ([`Secret`], [`Identity`]) never show in `Debug` or `Display` output, and error messages
//! name the file or field at fault without quoting secret values.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hyper::Uri;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::{Error, Result};
use crate::frame::DEFAULT_MAX_FRAME_BYTES;

pub mod exec;
pub mod incluster;
pub mod kubeconfig;
mod proxy_url;
mod token_file;

pub use exec::{
    ExecConfig, ExecCredential, ExecCredentialProvider, ExecEnvVar, InteractiveMode,
    RotatingIdentity,
};
pub use incluster::{InClusterOptions, SERVICE_ACCOUNT_DIR};
pub use kubeconfig::{Kubeconfig, KubeconfigOptions, kubeconfig_paths};
pub use proxy_url::ProxyUrl;
pub use token_file::{DEFAULT_TOKEN_REFRESH_INTERVAL, TokenFile};

/// A secret string (a bearer token, a password). Its `Debug` and `Display` print `[redacted]`.
///
/// ```
/// let s = informer::config::Secret::new("hunter2");
/// assert_eq!(format!("{s:?}"), "Secret([redacted])");
/// assert_eq!(s.to_string(), "[redacted]");
/// assert_eq!(s.expose(), "hunter2");
/// ```
#[derive(Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    /// The secret itself; call only where it is sent.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

/// `url` with any userinfo (`user:password@`) replaced by `[redacted]@`: the one redaction of every
/// URL the crate prints (a config's and a kubeconfig's `Debug`, [`ProxyUrl`]'s `Debug` and
/// `Display`, error messages). The mask is [`Secret`]'s, so every hidden credential reads alike.
/// Only the authority is looked at: an `@` in the path, query or fragment stays.
///
/// ```
/// use informer::config::redact_url;
/// assert_eq!(redact_url("http://me:s3cret@proxy:3128/"), "http://[redacted]@proxy:3128/");
/// assert_eq!(redact_url("https://k:6443"), "https://k:6443");
/// assert_eq!(redact_url("http://u:p@h:1/x@y?z"), "http://[redacted]@h:1/x@y?z");
/// let uri: hyper::Uri = "http://u:p@h:1/x".parse().unwrap();
/// assert_eq!(redact_url(&uri.to_string()), "http://[redacted]@h:1/x");
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}[redacted]{}", &rest[at..]),
        None => url.to_owned(),
    }
}

/// Formats a URL with [`redact_url`] in `Debug` output.
struct RedactedUrl<'a>(&'a str);

impl fmt::Debug for RedactedUrl<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&redact_url(self.0), f)
    }
}

/// `Debug` of an optional URL, redacted.
pub(crate) fn debug_url<'a>(url: Option<&'a str>) -> impl fmt::Debug + 'a {
    url.map(RedactedUrl)
}

/// A client certificate chain and its private key, for x509 authentication.
#[derive(Clone)]
pub struct Identity {
    pub(crate) certs: Vec<CertificateDer<'static>>,
    pub(crate) key: Arc<PrivateKeyDer<'static>>,
}

impl Identity {
    /// Parses a PEM certificate chain and a PEM private key (PKCS#1, PKCS#8 or SEC1).
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Identity> {
        let certs = parse_certificates(cert_pem)?;
        if certs.is_empty() {
            return Err(Error::Config(
                "client certificate: no CERTIFICATE block in the PEM data".into(),
            ));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| {
            Error::Config(format!(
                "client key: no usable private key in the PEM data ({e})"
            ))
        })?;
        Ok(Identity {
            certs,
            key: Arc::new(key),
        })
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("certs", &self.certs.len())
            .field("key", &"[redacted]")
            .finish()
    }
}

/// Parses every `CERTIFICATE` block of a PEM bundle.
///
/// ```
/// assert!(informer::config::parse_certificates(b"not pem").unwrap().is_empty());
/// ```
pub fn parse_certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_slice_iter(pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Config(format!("bad PEM certificate data: {e}")))
}

/// A source of bearer tokens that can change over time (exec plugins, rotated token files).
///
/// The client asks for a token before each request and calls [`invalidate`](Self::invalidate) when
/// the server answers 401, then retries once with a fresh token.
pub trait TokenProvider: Send + Sync + fmt::Debug + 'static {
    /// The current token.
    fn token(&self) -> Pin<Box<dyn Future<Output = Result<Secret>> + Send + '_>>;
    /// Forget any cached token (the server rejected it).
    fn invalidate(&self) {}
    /// The client certificate this provider keeps current (an exec plugin that gives one): the
    /// client presents its latest in TLS handshakes, and takes new connections when it changes.
    fn client_certificate(&self) -> Option<Arc<RotatingIdentity>> {
        None
    }
}

/// How requests authenticate (besides a client certificate, which is part of TLS).
#[derive(Clone, Debug, Default)]
pub enum Auth {
    /// No `Authorization` header.
    #[default]
    None,
    /// A fixed bearer token.
    Bearer(Secret),
    /// HTTP basic authentication.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: Secret,
    },
    /// Tokens from a provider (exec plugin, token file re-read on rotation).
    Provider(Arc<dyn TokenProvider>),
}

/// TLS settings.
#[derive(Clone, Debug, Default)]
pub struct TlsConfig {
    /// Certificate authorities that may sign the server's certificate. Empty means the platform's
    /// roots are not consulted and https fails unless `accept_invalid_certs` is set.
    pub root_certs: Vec<CertificateDer<'static>>,
    /// Skip server certificate verification (kubeconfig `insecure-skip-tls-verify`). Dangerous.
    pub accept_invalid_certs: bool,
    /// Name to verify the server's certificate against instead of the URL's host.
    pub server_name: Option<String>,
    /// Client certificate authentication.
    pub identity: Option<Identity>,
}

/// Everything needed to talk to one apiserver.
///
/// ```
/// let config = informer::Config::new("http://127.0.0.1:8080".parse().unwrap());
/// assert_eq!(config.default_namespace, "default");
/// ```
/// `Debug` shows every field, with the user information of URLs (`http://user:password@...`)
/// redacted, and secrets as [`Secret`]'s `[redacted]`.
///
/// ```
/// let mut config = informer::Config::new("https://k:6443".parse().unwrap());
/// config.proxy_url = Some("http://me:s3cret@proxy:3128".parse().unwrap());
/// config.auth = informer::config::Auth::Bearer(informer::config::Secret::new("t0ken"));
/// let debug = format!("{config:?}");
/// assert!(!debug.contains("s3cret") && !debug.contains("t0ken"), "{debug}");
/// ```
#[derive(Clone)]
pub struct Config {
    /// `https://host:port` (or `http://` for a local, unauthenticated server), with an optional path
    /// prefix.
    pub cluster_url: Uri,
    /// The namespace used when a caller does not name one.
    pub default_namespace: String,
    /// Server CA, client certificate and verification settings.
    pub tls: TlsConfig,
    /// How requests authenticate.
    pub auth: Auth,
    /// Limit on establishing a TCP connection (default 30 s).
    pub connect_timeout: Duration,
    /// Limit on a whole non-watch request, body included (default 5 min). Watches have none: they
    /// end with `timeoutSeconds`, and the reflector detects dead watches itself.
    pub request_timeout: Duration,
    /// Limit on opening any request, watches included: connecting, TLS, and waiting for the
    /// response's status line and headers (default 60 s, the apiserver's own limit on a non-watch
    /// request before it answers 504 itself). A request that times out here gives up its
    /// connection, so the retry never waits on the same dead socket.
    pub open_timeout: Duration,
    /// Limit on a response body that stops arriving (default 30 s): a LIST body with no bytes for
    /// this long, or an error response whose body is not all there this long after its head (a
    /// `500` head, 40 bytes of its `Status`, then silence on an open socket), is given up and
    /// its connection with it. A stalled LIST is an [`Error::Timeout`] (retryable); a stalled
    /// error body is the error its status code says, with what came of it.
    pub body_stall_timeout: Duration,
    /// An HTTP/2 connection that received nothing for this long is sent a PING (default 30 s, like
    /// client-go's `HTTP2_READ_IDLE_TIMEOUT_SECONDS`); `None` turns the check off.
    pub http2_read_idle_timeout: Option<Duration>,
    /// A PING not answered within this long closes the connection, and every request and watch on
    /// it fails with a transport error (default 15 s, client-go's `HTTP2_PING_TIMEOUT_SECONDS`).
    pub http2_ping_timeout: Duration,
    /// Largest accepted watch event (default 16 MiB).
    pub max_frame_bytes: usize,
    /// Largest accepted non-watch response body (default 1 GiB).
    pub max_response_bytes: usize,
    /// An HTTP proxy to tunnel connections through with `CONNECT` (kubeconfig `proxy-url`);
    /// `http://user:password@host:port` sends basic proxy credentials (never printed).
    pub proxy_url: Option<ProxyUrl>,
    /// Threads that run the event handlers of every informer built on a client of this
    /// configuration (its clones, factories and controllers included); `None`, the default, means
    /// the machine's parallelism. Each handler still gets its notifications one at a time and in
    /// order, whatever the number of threads.
    ///
    /// ```
    /// let mut config = informer::Config::new("http://127.0.0.1:1".parse().unwrap());
    /// config.handler_threads = Some(4);
    /// ```
    pub handler_threads: Option<usize>,
    /// Ask for the apiserver's protobuf for the kinds that decode it (the built-in kinds of this
    /// crate, feature `protobuf`; see [`Object::protobuf_decoder`](crate::Object::protobuf_decoder)):
    /// `true` by default. Whatever is asked, an answer in JSON is read. `false` keeps every
    /// request on JSON, for a proxy or a debugging session that must read the bytes.
    ///
    /// ```
    /// let mut config = informer::Config::new("http://127.0.0.1:1".parse().unwrap());
    /// config.protobuf = false;
    /// ```
    pub protobuf: bool,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cluster_url = self.cluster_url.to_string();
        f.debug_struct("Config")
            .field("cluster_url", &RedactedUrl(&cluster_url))
            .field("default_namespace", &self.default_namespace)
            .field("tls", &self.tls)
            .field("auth", &self.auth)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("open_timeout", &self.open_timeout)
            .field("body_stall_timeout", &self.body_stall_timeout)
            .field("http2_read_idle_timeout", &self.http2_read_idle_timeout)
            .field("http2_ping_timeout", &self.http2_ping_timeout)
            // `ProxyUrl`'s own Debug leaves its userinfo out.
            .field("proxy_url", &self.proxy_url)
            .field("handler_threads", &self.handler_threads)
            .field("protobuf", &self.protobuf)
            .finish()
    }
}

impl Config {
    /// A configuration for `cluster_url` with defaults and no authentication.
    pub fn new(cluster_url: Uri) -> Config {
        Config {
            cluster_url,
            default_namespace: "default".into(),
            tls: TlsConfig::default(),
            auth: Auth::None,
            connect_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(300),
            open_timeout: Duration::from_secs(60),
            body_stall_timeout: Duration::from_secs(30),
            http2_read_idle_timeout: Some(Duration::from_secs(30)),
            http2_ping_timeout: Duration::from_secs(15),
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            max_response_bytes: 1 << 30,
            proxy_url: None,
            handler_threads: None,
            protobuf: true,
        }
    }

    /// The configuration kubectl would use: the kubeconfig files of `$KUBECONFIG` (else
    /// `~/.kube/config`) if any exists, else the in-cluster configuration. A kubeconfig that exists
    /// but is broken is an error (not silently skipped); when neither source is available the error
    /// says where it looked.
    ///
    /// ```no_run
    /// # async fn demo() -> informer::Result<()> {
    /// let client = informer::Client::new(informer::Config::infer().await?)?;
    /// # Ok(()) }
    /// ```
    pub async fn infer() -> Result<Config> {
        // Files are read off the runtime's workers (`blocking`).
        let found = crate::blocking::unblock(|| {
            let paths = kubeconfig_paths(
                std::env::var_os("KUBECONFIG").as_deref(),
                kubeconfig::home_dir().as_deref(),
            );
            if paths.iter().any(|p| p.exists()) {
                return Kubeconfig::read_merged(&paths).map(Found::Kubeconfig);
            }
            Config::incluster().map(|c| Found::InCluster(Box::new(c))).map_err(|incluster| {
                let looked: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                let looked = if looked.is_empty() {
                    "nowhere: $KUBECONFIG is empty and $HOME is not set".to_owned()
                } else {
                    looked.join(", ")
                };
                Error::Config(format!(
                    "no cluster configuration: no kubeconfig file (looked at {looked}), and the \
                     in-cluster configuration failed: {incluster}"
                ))
            })
        })
        .await?;
        match found {
            Found::Kubeconfig(kubeconfig) => {
                Config::from_custom_kubeconfig(kubeconfig, &KubeconfigOptions::default()).await
            }
            Found::InCluster(config) => Ok(*config),
        }
    }
}

/// What [`Config::infer`] found: a kubeconfig to build from, or the in-cluster configuration.
enum Found {
    Kubeconfig(Kubeconfig),
    InCluster(Box<Config>),
}
