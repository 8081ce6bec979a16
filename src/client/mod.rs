//! The apiserver client: HTTP/1.1 and HTTP/2 over TLS (hyper + rustls), authentication, GET, paged
//! LIST, WATCH and writes.
//!
//! [`Client`] owns the connection pool and the credentials; [`Api`] is a typed view of one resource in
//! one namespace (or all), the way kube-rs users expect:
//!
//! ```no_run
//! # async fn demo() -> informer::Result<()> {
//! use informer::{Api, Client, Config, ListParams, Pod, WatchParams};
//! let client = Client::new(Config::new("http://127.0.0.1:8080".parse().unwrap()))?;
//! let pods: Api<Pod> = Api::namespaced(client, "default");
//! let page = pods.list(&ListParams::default().limit(500)).await?;
//! let mut events = pods
//!     .watch(&WatchParams::default().resource_version(&page.metadata.resource_version).bookmarks(true))
//!     .await?;
//! while let Some(event) = events.next().await {
//!     println!("{:?}", event?);
//! }
//! # Ok(()) }
//! ```
//!
//! Writes (create, replace, patch in the four types, delete, the `status` and `scale`
//! subresources) take kube-rs's parameters ([`PostParams`], [`PatchParams`] with [`Patch`],
//! [`DeleteParams`]) and return the object as stored, with its new resourceVersion; a failure
//! the server explains is an [`Error::Api`] whose [`reason`](Error::reason) says what happened
//! (a stale resourceVersion is [`Conflict`](crate::model::StatusReason::Conflict)):
//!
//! ```no_run
//! # async fn demo(client: informer::Client) -> informer::Result<()> {
//! use informer::{Api, ConfigMap};
//! use informer::client::{Patch, PatchParams};
//! let cms: Api<ConfigMap> = Api::namespaced(client, "default");
//! let patch = serde_json::json!({"metadata": {"labels": {"tier": "gold"}}});
//! let cm = cms.patch("settings", &PatchParams::default(), &Patch::Merge(&patch)).await?;
//! println!("now at resourceVersion {}", cm.metadata.resource_version);
//! # Ok(()) }
//! ```
//!
//! Watch requests never ask for compression (client-go X16: a compressed watch is a concatenation of
//! gzip members), so their bodies are decoded as they arrive.

mod params;
mod pool;
mod proxy;
mod resources;
mod tls;
mod write;

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{ACCEPT, AUTHORIZATION, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_rustls::FixedServerNameResolver;
use hyper_util::client::legacy::connect::HttpConnector;
use serde::{Deserialize, Serialize};

/// Redirects [`Client::send`] takes in a row: as Go's `http.Client`, the request that gets the
/// tenth is the last one (nine followed).
const MAX_REDIRECTS: u32 = 10;

/// What [`Api::watch`] yields: events decoded from a watch response as its bytes arrive.
pub use crate::watch::{Bookmark, WatchEvent, WatchStream};
pub use params::{
    ListParams, VersionMatch, WatchParams, encode_path_segment, validate_name, validate_namespace,
};
pub use pool::{Http2ConnectionStats, PoolStats, ResponseBody};
pub use write::{
    DeleteOutcome, DeleteParams, FieldValidation, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};

use crate::config::{Auth, Config, redact_url};
use crate::error::{Error, Result, excerpt};
use crate::model::ListMeta;
use crate::model::meta::null_as_default;
use crate::thread_pool::ThreadPool;
use crate::watch::{decode_error, parse_json};
use crate::{ApiResource, Object, Resource, Status};

/// Largest error body read to build an error message.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// A handle to one apiserver: a connection pool plus credentials. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Client {
    inner: std::sync::Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    pool: pool::Pool,
    /// `scheme://authority` plus any path prefix, without a trailing `/`.
    base: String,
    config: Config,
    handler_pool: std::sync::Arc<ThreadPool>,
    /// An exec plugin's client certificate, replaced at each of its runs.
    rotating: Option<std::sync::Arc<crate::config::RotatingIdentity>>,
    /// The certificate generation the pool's connections were opened with.
    identity_generation: std::sync::atomic::AtomicU64,
}

impl Client {
    /// A client for `config`. Fails only on unusable TLS material or an unsupported proxy URL.
    ///
    /// ```
    /// let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// assert_eq!(client.default_namespace(), "default");
    /// ```
    pub fn new(mut config: Config) -> Result<Client> {
        // User info in the server URL (`https://user:pass@host`) never goes on the wire in the
        // request URL (nor, over HTTP/2, in `:authority`): it is taken out of the URL, and used
        // where kubectl (Go's net/http) uses it, as basic credentials when no other is set.
        if let Some((url, username, password)) = split_user_info(&config.cluster_url)? {
            config.cluster_url = url;
            if matches!(config.auth, Auth::None) {
                config.auth = Auth::Basic {
                    username,
                    password: crate::config::Secret::new(password),
                };
            }
        }
        let scheme = config.cluster_url.scheme_str().unwrap_or("");
        if scheme != "http" && scheme != "https" {
            return Err(Error::Config(format!(
                "cluster URL {} must start with https:// or http://",
                redact_url(&config.cluster_url.to_string())
            )));
        }
        if scheme == "https" && config.tls.root_certs.is_empty() && !config.tls.accept_invalid_certs
        {
            return Err(Error::Config(
                "https cluster URL without a certificate authority: set one (certificate-authority) \
                 or explicitly accept invalid certificates (insecure-skip-tls-verify)"
                    .into(),
            ));
        }
        if config.tls.accept_invalid_certs && !config.tls.root_certs.is_empty() {
            // client-go refuses this too ("specifying a root certificates file with the insecure
            // flag is not allowed"): one of the two settings is a mistake, and silently dropping
            // the CA would turn off the verification its author asked for.
            return Err(Error::Config(
                "insecure-skip-tls-verify together with a certificate authority \
                 (certificate-authority or certificate-authority-data): verification cannot be \
                 both skipped and done with that CA; remove one of them"
                    .into(),
            ));
        }
        if config.tls.accept_invalid_certs && scheme == "https" {
            tracing::warn!(
                server = %redact_url(&config.cluster_url.to_string()),
                "insecure-skip-tls-verify: the server's certificate is not verified; anyone on \
                 the path can read and change the traffic, credentials included"
            );
        }
        let rotating = match &config.auth {
            Auth::Provider(p) => p.client_certificate(),
            _ => None,
        };
        let tls = tls::client_config(&config.tls, rotating.clone())?;
        // The certificate the pool's connections were opened with (see `send`).
        let identity_generation =
            std::sync::atomic::AtomicU64::new(rotating.as_ref().map_or(0, |r| r.generation()));
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(config.connect_timeout));
        http.set_nodelay(true);
        // TCP keepalive finds a dead peer (a crashed host, a dropped NAT entry) on a connection
        // that waits for data, e.g. a quiet HTTP/1.1 watch: probes after 30 s of silence, every
        // 5 s, given up after 3 (about 45 s, as the HTTP/2 PING below).
        http.set_keepalive(Some(Duration::from_secs(30)));
        http.set_keepalive_interval(Some(Duration::from_secs(5)));
        http.set_keepalive_retries(Some(3));
        let builder = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http();
        let builder = match &config.tls.server_name {
            Some(name) => {
                let name = rustls::pki_types::ServerName::try_from(name.clone())
                    .map_err(|e| Error::Config(format!("tls-server-name {name:?}: {e}")))?;
                builder.with_server_name_resolver(FixedServerNameResolver::new(name))
            }
            None => builder,
        };
        let connector = builder
            .enable_all_versions()
            .wrap_connector(proxy::Connector::new(http, config.proxy_url.as_ref())?);
        let pool = pool::Pool::new(
            connector,
            config.cluster_url.clone(),
            pool::PoolSettings {
                idle_timeout: Duration::from_secs(90),
                max_idle_http1: 100,
                http2_read_idle_timeout: config.http2_read_idle_timeout,
                http2_ping_timeout: config.http2_ping_timeout,
            },
        )
        .map_err(Error::Config)?;
        let base = config
            .cluster_url
            .to_string()
            .trim_end_matches('/')
            .to_owned();
        let handler_pool = std::sync::Arc::new(ThreadPool::new(
            "informer-handlers",
            config
                .handler_threads
                .unwrap_or_else(ThreadPool::default_threads),
        ));
        Ok(Client {
            inner: std::sync::Arc::new(Inner {
                pool,
                base,
                config,
                handler_pool,
                rotating,
                identity_generation,
            }),
        })
    }

    /// The threads that run the handlers of every informer built on this client and its clones
    /// ([`Config::handler_threads`]); they start with the first handler's first notification.
    pub(crate) fn handler_pool(&self) -> &std::sync::Arc<ThreadPool> {
        &self.inner.handler_pool
    }

    /// The namespace of the configuration's context (`default` if none).
    pub fn default_namespace(&self) -> &str {
        &self.inner.config.default_namespace
    }

    /// The configuration the client was built from.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// What the connection pool holds now: connections opened so far, and per HTTP/2 connection
    /// its open streams and the server's limit on them.
    ///
    /// ```
    /// let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    /// assert_eq!(client.pool_stats().connections_opened, 0);
    /// ```
    pub fn pool_stats(&self) -> PoolStats {
        self.inner.pool.stats()
    }

    /// Sends a request to `path_and_query` (e.g. `/api/v1/pods?limit=1`) with authentication, and
    /// returns the response if its status is 2xx; any other status becomes an [`Error`] built from
    /// the body's `Status`. Retries once with a fresh token on 401 when tokens come from a provider.
    ///
    /// Redirects are followed, nine in a row as Go's client does (it stops at the tenth), when
    /// they stay under the configured server URL (its scheme, host, port and path, with no `.`
    /// or `..` segment), so the credentials never go anywhere else: a 307 or 308 with the same
    /// method and body, a 301, 302 or 303 for a `GET` only (these turn other methods into a
    /// `GET`, which would drop a write). Any other redirect is an [`Error::Http`] with its code
    /// and why it was not followed.
    ///
    /// The response's headers must come within [`Config::open_timeout`], else
    /// [`Error::Timeout`]; the connection that did not answer is not used again.
    pub async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(Bytes, &'static str)>,
    ) -> Result<Response<ResponseBody>> {
        self.send_accepting(method, path_and_query, body, JSON)
            .await
    }

    /// [`send`](Self::send) with an `Accept` header of the caller's.
    async fn send_accepting(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(Bytes, &'static str)>,
        accept: &'static str,
    ) -> Result<Response<ResponseBody>> {
        let mut retried = false;
        let mut redirects = 0;
        let mut path = std::borrow::Cow::Borrowed(path_and_query);
        let open_timeout = self.inner.config.open_timeout;
        loop {
            let path_and_query = &*path;
            let req = self
                .build(&method, path_and_query, body.clone(), accept)
                .await?;
            self.retire_connections_of_an_older_certificate();
            let started = std::time::Instant::now();
            let resp = tokio::time::timeout(open_timeout, self.inner.pool.send(req))
                .await
                .map_err(|_| {
                    Error::Timeout(format!(
                        "{method} {path_and_query}: no response within {open_timeout:?} \
                         (the connection is given up)"
                    ))
                })
                .and_then(|r| r.map_err(|e| classify_transport(&method, path_and_query, e)));
            #[cfg(feature = "metrics")]
            crate::metrics::record_request(
                method.as_str(),
                self.metrics_host(),
                resp.as_ref().ok().map(|r| r.status().as_u16()),
                started.elapsed(),
            );
            let resp = match resp {
                Ok(resp) => resp,
                Err(e) => {
                    tracing::debug!(%method, path = path_and_query, error = %e, "request failed");
                    return Err(e);
                }
            };
            let status = resp.status();
            // The time to the response's head: a watch's or a list's body comes after.
            tracing::debug!(
                %method,
                path = path_and_query,
                status = status.as_u16(),
                latency_ms = started.elapsed().as_secs_f64() * 1e3,
                "request"
            );
            if status.is_success() {
                return Ok(resp);
            }
            if matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
                let not_followed = match self.redirect_target(&method, &resp) {
                    // Go's count: the request that got the tenth redirect is the last one.
                    Ok(_) if redirects + 1 == MAX_REDIRECTS => {
                        format!("stopped after {MAX_REDIRECTS} redirects")
                    }
                    Ok(next) => {
                        tracing::debug!(%method, from = path_and_query, to = next, "redirected");
                        redirects += 1;
                        path = std::borrow::Cow::Owned(next);
                        continue;
                    }
                    Err(why) => why,
                };
                return Err(Error::Http {
                    code: status.as_u16(),
                    excerpt: format!(
                        "{method} {path_and_query}: redirect not followed: {not_followed}"
                    ),
                    retry_after_seconds: None,
                });
            }
            if status == StatusCode::UNAUTHORIZED && !retried {
                if let Auth::Provider(p) = &self.inner.config.auth {
                    p.invalidate();
                    retried = true;
                    continue;
                }
            }
            return Err(error_from_response(resp, self.inner.config.body_stall_timeout).await);
        }
    }

    /// Where a redirect answer sends the request next, as a path and query under the server URL,
    /// or why it is not followed (see [`send`](Self::send)).
    fn redirect_target(
        &self,
        method: &Method,
        resp: &Response<ResponseBody>,
    ) -> std::result::Result<String, String> {
        let status = resp.status();
        let keeps_method = matches!(
            status,
            StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
        );
        if !keeps_method && *method != Method::GET {
            return Err(format!(
                "a {} would turn the {method} into a GET",
                status.as_u16()
            ));
        }
        let location = resp
            .headers()
            .get(hyper::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .ok_or("no Location header")?;
        let base = &self.inner.base;
        let full = if location.starts_with('/') && !location.starts_with("//") {
            // An absolute path on the same origin: the base's scheme and authority.
            let origin_end = base
                .find("://")
                .and_then(|i| base[i + 3..].find('/').map(|j| i + 3 + j))
                .unwrap_or(base.len());
            format!("{}{location}", &base[..origin_end])
        } else {
            location.to_owned()
        };
        let path = full.split(['?', '#']).next().unwrap_or("");
        let dot_segment = path.split('/').any(|segment| {
            let segment = segment.to_ascii_lowercase().replace("%2e", ".");
            segment == "." || segment == ".."
        });
        if dot_segment {
            return Err(format!("{location:?} has a dot segment"));
        }
        match full.strip_prefix(base.as_str()) {
            Some(rest) if rest.starts_with('/') => Ok(rest.to_owned()),
            Some(rest) if rest.starts_with('?') || rest.is_empty() => Ok(format!("/{rest}")),
            _ => Err(format!(
                "{location:?} is outside the server URL {}",
                redact_url(base)
            )),
        }
    }

    /// After an exec plugin's certificate changed (a run before its expiry, or after a 401):
    /// no new request on a connection opened with the old one. Requests in flight and watches
    /// finish where they are; client-go's rotation closes them instead.
    fn retire_connections_of_an_older_certificate(&self) {
        let Some(rotating) = &self.inner.rotating else {
            return;
        };
        let current = rotating.generation();
        // Relaxed: a lone value; at worst two requests both retire the pool's connections.
        let seen = self
            .inner
            .identity_generation
            .swap(current, Ordering::Relaxed);
        if seen != current {
            tracing::debug!("the exec plugin's client certificate changed: new connections");
            self.inner.pool.retire_all();
        }
    }

    /// The `host` label of the REST client metrics: the server URL's `host[:port]`, as
    /// client-go's `url.Host`.
    #[cfg(feature = "metrics")]
    fn metrics_host(&self) -> &str {
        let base = &self.inner.base;
        let authority = base
            .split_once("://")
            .map_or(base.as_str(), |(_, rest)| rest);
        authority.split('/').next().unwrap_or(authority)
    }

    async fn build(
        &self,
        method: &Method,
        path_and_query: &str,
        body: Option<(Bytes, &'static str)>,
        accept: &'static str,
    ) -> Result<Request<Full<Bytes>>> {
        let uri: Uri = format!("{}{}", self.inner.base, path_and_query)
            .parse()
            .map_err(|e| Error::Config(format!("bad request path {path_and_query:?}: {e}")))?;
        let mut req = Request::builder()
            .method(method.clone())
            .uri(uri)
            .header(ACCEPT, accept)
            .header(
                hyper::header::USER_AGENT,
                concat!("informer/", env!("CARGO_PKG_VERSION")),
            );
        let authorization = match &self.inner.config.auth {
            Auth::None => None,
            Auth::Bearer(t) => Some(format!("Bearer {}", t.expose())),
            Auth::Basic { username, password } => Some(format!(
                "Basic {}",
                basic_credentials(username, password.expose())
            )),
            // Empty: the provider authenticates by client certificate alone.
            Auth::Provider(p) => Some(p.token().await?)
                .filter(|t| !t.expose().is_empty())
                .map(|t| format!("Bearer {}", t.expose())),
        };
        if let Some(a) = authorization {
            let mut v = HeaderValue::from_str(&a).map_err(|_| {
                Error::Config("credentials contain characters not allowed in a header".into())
            })?;
            v.set_sensitive(true);
            req = req.header(AUTHORIZATION, v);
        }
        let body = match body {
            Some((bytes, content_type)) => {
                req = req.header(hyper::header::CONTENT_TYPE, content_type);
                Full::new(bytes)
            }
            None => Full::new(Bytes::new()),
        };
        req.body(body)
            .map_err(|e| Error::Config(format!("cannot build request: {e}")))
    }

    /// Sends a request and decodes a JSON answer, within the request timeout and body limit.
    pub async fn request<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(Bytes, &'static str)>,
    ) -> Result<T> {
        let bytes = self.request_bytes(method, path_and_query, body).await?;
        parse_json(&bytes).map_err(|e| decode_error(&bytes, 0, &e))
    }

    /// Sends a request and reads the whole answer, within the request timeout and body limit.
    async fn request_bytes(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(Bytes, &'static str)>,
    ) -> Result<Vec<u8>> {
        let answer = self
            .request_answer(method, path_and_query, body, JSON)
            .await?;
        Ok(answer.bytes)
    }

    /// Sends a request with an `Accept` header of the caller's and reads the whole answer, within
    /// the request timeout and body limit, with whether it came in protobuf.
    async fn request_answer(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(Bytes, &'static str)>,
        accept: &'static str,
    ) -> Result<Answer> {
        let timeout = self.inner.config.request_timeout;
        let what = format!("{method} {path_and_query}");
        let stall = self.inner.config.body_stall_timeout;
        let fut = async {
            let resp = self
                .send_accepting(method, path_and_query, body, accept)
                .await?;
            let protobuf = is_protobuf(&resp);
            let bytes = read_body(
                resp.into_body(),
                self.inner.config.max_response_bytes,
                stall,
            )
            .await
            .map_err(|e| match e {
                BodyError::Failed(e) => e,
                BodyError::Stalled { received } => Error::Timeout(format!(
                    "{what}: the response body stopped arriving ({received} bytes received, \
                         then nothing for {stall:?}; the connection is given up)"
                )),
            })?;
            Ok(Answer { bytes, protobuf })
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| Error::Timeout(format!("{what} took longer than {timeout:?}")))?
    }
}

/// A protobuf answer this client cannot read (it did not ask for one).
fn unasked_protobuf(path: &str) -> Error {
    Error::Protocol(format!(
        "GET {path} answered in protobuf, which this client did not ask for and cannot read \
         for this type"
    ))
}

/// A protobuf object or list that does not decode.
fn protobuf_error(object: &[u8], message: String) -> Error {
    Error::Decode {
        offset: 0,
        excerpt: crate::error::redacted_excerpt(object, 0, 80),
        message,
    }
}

/// Without the feature `protobuf`: the stand-in for an opened protobuf body (never made).
#[cfg(not(feature = "protobuf"))]
struct Opened {
    object: Bytes,
}

/// A whole answer, and whether it came in protobuf.
struct Answer {
    bytes: Vec<u8>,
    protobuf: bool,
}

/// JSON, the media type of every request body and of answers by default.
const JSON: &str = "application/json";
/// What client-go's typed clients send for built-in kinds: protobuf, else JSON.
const ACCEPT_PROTOBUF: &str = "application/vnd.kubernetes.protobuf, application/json";
/// The same for a watch: the server picks the stream form of what it answers.
const ACCEPT_PROTOBUF_WATCH: &str =
    "application/vnd.kubernetes.protobuf;stream=watch, application/json";
/// What client-go's metadata client sends for a GET or a WATCH (kube-apiserver answers a watch in
/// its stream form): each object as a `PartialObjectMetadata`, protobuf first; whole objects in
/// JSON from a server that cannot.
const ACCEPT_METADATA_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, \
     application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";
/// The same for a LIST.
const ACCEPT_METADATA_LIST_PROTOBUF: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, \
     application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json";
/// Metadata only, without protobuf ([`Config::protobuf`] off, or the feature).
const ACCEPT_METADATA_JSON: &str =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";
/// The same for a LIST.
const ACCEPT_METADATA_LIST_JSON: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json";

/// Which read an `Accept` header is for.
#[derive(Clone, Copy, PartialEq)]
enum Read {
    One,
    List,
    Watch,
}

/// Whether a response's `Content-Type` is Kubernetes protobuf (with or without `;stream=watch`).
fn is_protobuf(resp: &Response<ResponseBody>) -> bool {
    resp.headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';').next().is_some_and(|t| {
                t.trim()
                    .eq_ignore_ascii_case("application/vnd.kubernetes.protobuf")
            })
        })
}

/// The URL without its user info, and the user name and password it held (percent-decoded);
/// `None` when it holds none.
fn split_user_info(url: &Uri) -> Result<Option<(Uri, String, String)>> {
    let Some(authority) = url.authority() else {
        return Ok(None);
    };
    let Some((user_info, host)) = authority.as_str().rsplit_once('@') else {
        return Ok(None);
    };
    let (user, password) = user_info.split_once(':').unwrap_or((user_info, ""));
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let mut parts = url.clone().into_parts();
    parts.authority = Some(host.parse().map_err(|e| {
        Error::Config(format!("cluster URL {}: {e}", redact_url(&url.to_string())))
    })?);
    let stripped = Uri::from_parts(parts)
        .map_err(|e| Error::Config(format!("cluster URL {}: {e}", redact_url(&url.to_string()))))?;
    Ok(Some((stripped, decode(user), decode(password))))
}

fn basic_credentials(user: &str, password: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// Why [`read_body`] gave up.
enum BodyError {
    /// The body failed (transport error) or was too large.
    Failed(Error),
    /// No bytes came for the stall limit; `received` bytes had come before.
    Stalled { received: usize },
}

/// Largest buffer reserved before the bytes that fill it arrive: a `Content-Length` is a claim,
/// not bytes, so a server announcing 1 GiB and sending 10 bytes costs 64 KiB, not 1 GiB.
const MAX_RESERVED_AHEAD: usize = 64 * 1024;

/// Reads a whole body into one buffer, failing with [`Error::ResponseTooLarge`] past `limit`
/// bytes (at once when the `Content-Length` says so), and with [`BodyError::Stalled`] when no
/// bytes come for `stall`. Each received chunk is appended and dropped, so the peak is the body
/// plus one chunk, not the chunks plus a contiguous copy of them. The buffer grows as bytes
/// arrive (never reserved more than [`MAX_RESERVED_AHEAD`] ahead of them), up to the announced
/// length when there is one, so a truthful `Content-Length` still costs one buffer of its size.
async fn read_body(
    mut body: ResponseBody,
    limit: usize,
    stall: Duration,
) -> std::result::Result<Vec<u8>, BodyError> {
    use hyper::body::Body as _;
    let announced = body.size_hint().lower();
    if announced > limit as u64 {
        return Err(BodyError::Failed(Error::ResponseTooLarge { limit }));
    }
    let announced = announced as usize;
    let mut buf = Vec::with_capacity(announced.min(MAX_RESERVED_AHEAD));
    loop {
        let frame = match tokio::time::timeout(stall, body.frame()).await {
            Err(_) => {
                return Err(BodyError::Stalled {
                    received: buf.len(),
                });
            }
            Ok(None) => return Ok(buf),
            Ok(Some(frame)) => frame,
        };
        let frame =
            frame.map_err(|e| BodyError::Failed(Error::transport("reading response body", e)))?;
        if let Ok(data) = frame.into_data() {
            if data.len() > limit - buf.len() {
                return Err(BodyError::Failed(Error::ResponseTooLarge { limit }));
            }
            let needed = buf.len() + data.len();
            if needed > buf.capacity() && needed <= announced {
                // Growing towards a truthful Content-Length: in steps, the last one exact.
                let target = (buf.capacity() * 2).max(needed).min(announced);
                buf.reserve_exact(target - buf.len());
            }
            buf.extend_from_slice(&data);
        }
    }
}

/// Turns a non-2xx response into an error: a `Status` body is decoded (410 becomes
/// [`Error::Expired`]); anything else is reported as an excerpt. The body must be all there
/// within `stall` of the head: if it is not, the error is built from the status code, the
/// headers and what came of the body (the connection is given up), so a stalled `500` is still
/// a retryable `500` and a stalled `403` still a `403`.
async fn error_from_response(resp: Response<ResponseBody>, stall: Duration) -> Error {
    let code = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u32>().ok());
    let mut body = resp.into_body();
    let mut bytes = Vec::new();
    let read = async {
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| Error::transport("reading an error response", e))?;
            if let Ok(data) = frame.into_data() {
                let room = MAX_ERROR_BODY - bytes.len();
                bytes.extend_from_slice(&data[..data.len().min(room)]);
                if data.len() > room {
                    return Err(Error::ResponseTooLarge {
                        limit: MAX_ERROR_BODY,
                    });
                }
            }
        }
        Ok(())
    };
    match tokio::time::timeout(stall, read).await {
        Ok(Ok(())) => {}
        Ok(Err(Error::ResponseTooLarge { .. })) => bytes = b"(error body too large)".to_vec(),
        Ok(Err(e)) => return e,
        Err(_) => {
            let note = format!(
                " (the body stopped arriving after {} bytes; given up after {stall:?})",
                bytes.len()
            );
            let mut e = error_from_body(code, retry_after, &bytes);
            match &mut e {
                Error::Http { excerpt, .. } => excerpt.push_str(&note),
                Error::Api(s) | Error::Expired(s) => s.message.push_str(&note),
                _ => {}
            }
            return e;
        }
    }
    error_from_body(code, retry_after, &bytes)
}

/// The `Status` of an error answered in protobuf (`k8s\0`, an envelope of kind `Status`).
#[cfg(feature = "protobuf")]
fn protobuf_status(body: &[u8]) -> Option<Status> {
    use crate::model::protobuf as pb;
    let opened = pb::open(Bytes::copy_from_slice(body)).ok()?;
    (opened.kind() == "Status")
        .then(|| pb::status(&opened.object).ok())
        .flatten()
}

#[cfg(not(feature = "protobuf"))]
fn protobuf_status(_: &[u8]) -> Option<Status> {
    None
}

/// See [`error_from_response`].
pub(crate) fn error_from_body(code: u16, retry_after: Option<u32>, body: &[u8]) -> Error {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        kind: String,
    }
    let is_status = serde_json::from_slice::<Probe>(body).is_ok_and(|p| p.kind == "Status");
    let status = if is_status {
        serde_json::from_slice::<Status>(body).ok()
    } else {
        protobuf_status(body)
    };
    {
        if let Some(mut status) = status {
            if status.code == 0 {
                status.code = code;
            }
            if let Some(secs) = retry_after {
                let details = status.details.get_or_insert_with(Default::default);
                details.retry_after_seconds.get_or_insert(secs);
            }
            return Error::from_status(status);
        }
    }
    if code == 410 {
        // A 410 without a Status still means "expired" to every client.
        return Error::from_status(Status {
            code,
            reason: "Expired".into(),
            message: excerpt(body, 0, 200),
            ..Default::default()
        });
    }
    Error::Http {
        code,
        excerpt: excerpt(body, 0, 200),
        retry_after_seconds: retry_after,
    }
}

fn classify_transport(
    method: &Method,
    path: &str,
    e: Box<dyn std::error::Error + Send + Sync>,
) -> Error {
    // rustls errors surface as io::Error inside the connector error; report them as TLS errors so a
    // wrong CA reads as such, not as a generic connection failure.
    // hyper-rustls wraps tokio-rustls's io::Error(InvalidData, rustls::Error) in another
    // io::Error, and io::Error::source() skips the wrapped error itself, so io errors are opened
    // with get_ref() as well as followed through source().
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
    while let Some(s) = source {
        let mut inner = Some(s);
        while let Some(i) = inner {
            if let Some(tls) = i.downcast_ref::<rustls::Error>() {
                return Error::Tls(format!("{method} {path}: {tls}"));
            }
            inner = i
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .map(|r| r as &(dyn std::error::Error + 'static));
        }
        source = s.source();
    }
    Error::transport(format!("{method} {path}"), e)
}

// ---------------------------------------------------------------------------------------------------
// Typed access to one resource.

/// One page of a LIST: the list's metadata and its items.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ObjectList<T> {
    /// The list's `resourceVersion` and `continue` token.
    #[serde(default)]
    pub metadata: ListMeta,
    /// The objects of this page.
    #[serde(default = "Vec::new", deserialize_with = "null_as_default")]
    #[serde(bound(deserialize = "T: serde::de::DeserializeOwned"))]
    pub items: Vec<T>,
}

/// A LIST body as sent, before it is checked to be a list of the requested kind.
#[derive(Deserialize)]
#[serde(bound(deserialize = "T: serde::de::DeserializeOwned"))]
struct ListBody<T> {
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: ListMeta,
    /// `None` when the body has no `items` at all (`null` counts as an empty list).
    #[serde(default, deserialize_with = "present_items")]
    items: Option<Vec<T>>,
    /// A `Status` body's explanation, to quote in the error.
    #[serde(default)]
    message: String,
}

fn present_items<'de, D, T>(d: D) -> std::result::Result<Option<Vec<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    Ok(Some(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default()))
}

impl<T> ListBody<T> {
    /// The page, if the body is a list of `resource`'s kind (`{Kind}List`, or the generic `List`;
    /// a body without `kind` is taken on its `items`).
    /// The list, if it is one: `kind_ok` says whether its kind is one the view reads
    /// (`Api::is_list_kind`).
    fn into_list(self, kind_ok: bool, resource: &ApiResource, path: &str) -> Result<ObjectList<T>> {
        let expected = format!("{}List", resource.kind);
        let problem = if self.kind == "Status" {
            Some(format!("a Status ({:?})", self.message))
        } else if !kind_ok {
            Some(format!("a {}", self.kind))
        } else if self.items.is_none() {
            Some("a body without items".to_owned())
        } else {
            None
        };
        match (problem, self.items) {
            (None, Some(items)) => Ok(ObjectList {
                metadata: self.metadata,
                items,
            }),
            (problem, _) => Err(Error::Protocol(format!(
                "GET {path} answered 200 with {}, not a {expected}",
                problem.unwrap_or_default()
            ))),
        }
    }
}

/// A typed view of one resource, in one namespace or across all namespaces.
///
/// ```
/// use informer::{Api, Client, Config, EndpointSlice};
/// # let client = Client::new(Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
/// let slices: Api<EndpointSlice> = Api::all(client);
/// assert_eq!(slices.collection_path(), "/apis/discovery.k8s.io/v1/endpointslices");
/// ```
#[derive(Debug)]
pub struct Api<T> {
    client: Client,
    resource: ApiResource,
    namespace: Option<String>,
    /// Reads ask for protobuf: the kind decodes it and this is its own resource (see
    /// [`Object::protobuf_decoder`]).
    protobuf: bool,
    _t: PhantomData<fn() -> T>,
}

// By hand: a derived `Clone` would ask `T: Clone`, and an `Api` holds no `T`.
impl<T> Clone for Api<T> {
    fn clone(&self) -> Self {
        Api {
            client: self.client.clone(),
            resource: self.resource.clone(),
            namespace: self.namespace.clone(),
            protobuf: self.protobuf,
            _t: PhantomData,
        }
    }
}

impl<T: Resource> Api<T> {
    /// All namespaces (or a cluster-scoped resource).
    pub fn all(client: Client) -> Self {
        Self::all_with(client, T::api_resource()).own_resource()
    }
    /// One namespace.
    pub fn namespaced(client: Client, namespace: &str) -> Self {
        Self::namespaced_with(client, namespace, T::api_resource()).own_resource()
    }
    /// The client's default namespace.
    pub fn default_namespaced(client: Client) -> Self {
        let ns = client.default_namespace().to_owned();
        Self::namespaced_with(client, &ns, T::api_resource()).own_resource()
    }

    /// The view reads the kind's own resource: protobuf where the kind decodes it. A typed kind
    /// read as another resource (`*_with`: v1beta1 EndpointSlices, say, whose field numbers
    /// differ) stays on JSON.
    fn own_resource(mut self) -> Self {
        self.protobuf = T::protobuf_decoder().is_some();
        self
    }
}

impl<T: Object> Api<T> {
    /// All namespaces of a resource known at run time (CRDs, metadata-only views).
    pub fn all_with(client: Client, resource: ApiResource) -> Self {
        Api {
            client,
            resource,
            namespace: None,
            protobuf: Self::reads_metadata_protobuf(),
            _t: PhantomData,
        }
    }
    /// One namespace of a resource known at run time.
    pub fn namespaced_with(client: Client, namespace: &str, resource: ApiResource) -> Self {
        Api {
            client,
            resource,
            namespace: Some(namespace.to_owned()),
            protobuf: Self::reads_metadata_protobuf(),
            _t: PhantomData,
        }
    }

    /// A view of a resource known at run time reads protobuf only in the metadata-only form,
    /// which is the same message whatever the resource.
    fn reads_metadata_protobuf() -> bool {
        T::metadata_only() && T::protobuf_decoder().is_some()
    }

    /// The resource this view reads.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }
    /// The namespace, or `None` for all.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
    /// The client behind this view.
    pub fn client(&self) -> &Client {
        &self.client
    }
    /// The collection's URL path.
    pub fn collection_path(&self) -> String {
        self.resource.collection_path(self.namespace.as_deref())
    }

    /// The collection's path for a request: the namespace checked ([`validate_namespace`]).
    fn request_collection_path(&self) -> Result<String> {
        if let (Some(ns), true) = (&self.namespace, self.resource.namespaced) {
            validate_namespace(ns).map_err(Error::InvalidName)?;
        }
        Ok(self.collection_path())
    }

    /// GET one object by name. A namespace or name that could reach another path (`..`, `a/b`,
    /// `%2e%2e`) is refused with [`Error::InvalidName`] before anything is sent; other characters
    /// are percent-encoded.
    pub async fn get(&self, name: &str) -> Result<T> {
        validate_name(name).map_err(Error::InvalidName)?;
        let path = format!(
            "{}/{}",
            self.request_collection_path()?,
            encode_path_segment(name)
        );
        let answer = self
            .client
            .request_answer(Method::GET, &path, None, self.accept(Read::One))
            .await?;
        self.decode_one(answer, &path)
    }

    /// The `Accept` header of a read: protobuf first if this view reads it (see
    /// [`Object::protobuf_decoder`]) and [`Config::protobuf`] allows it, JSON otherwise; the
    /// metadata-only form for a type that asks for it ([`Object::metadata_only`]).
    fn accept(&self, read: Read) -> &'static str {
        let protobuf = self.protobuf && self.client.inner.config.protobuf;
        match (T::metadata_only(), protobuf, read) {
            (false, false, _) => JSON,
            (false, true, Read::Watch) => ACCEPT_PROTOBUF_WATCH,
            (false, true, _) => ACCEPT_PROTOBUF,
            (true, false, Read::List) => ACCEPT_METADATA_LIST_JSON,
            (true, false, _) => ACCEPT_METADATA_JSON,
            (true, true, Read::List) => ACCEPT_METADATA_LIST_PROTOBUF,
            (true, true, _) => ACCEPT_METADATA_PROTOBUF,
        }
    }

    /// Whether a LIST answered as `kind` is a list of this view's objects: the resource's
    /// `{Kind}List` (or a plain `List`), or the metadata-only list a view that asks for it gets.
    fn is_list_kind(&self, kind: &str) -> bool {
        kind.is_empty()
            || kind == "List"
            || self.resource.kind.is_empty()
            || kind.strip_suffix("List") == Some(&*self.resource.kind)
            || (T::metadata_only() && kind == "PartialObjectMetadataList")
    }

    /// One object of a GET, in whichever encoding it came.
    fn decode_one(&self, answer: Answer, path: &str) -> Result<T> {
        let bytes = answer.bytes;
        if !answer.protobuf {
            return parse_json(&bytes).map_err(|e| decode_error(&bytes, 0, &e));
        }
        let opened = self.open_protobuf(bytes, path)?;
        let decode = self.protobuf_decoder(path)?;
        decode(&opened.object).map_err(|message| protobuf_error(&opened.object, message))
    }

    /// LIST one page.
    ///
    /// A `200` whose body is not a list of this resource's kind (`{}`, a `Status`, another kind,
    /// a `Table`, no `items`) is an [`Error::Protocol`], never an empty list; a body larger than
    /// [`Config::max_response_bytes`] is an [`Error::ResponseTooLarge`], found without holding
    /// more than the limit.
    pub async fn list(&self, params: &ListParams) -> Result<ObjectList<T>> {
        let path = with_query(self.request_collection_path()?, &params.to_query());
        let answer = self
            .client
            .request_answer(Method::GET, &path, None, self.accept(Read::List))
            .await?;
        let bytes = answer.bytes;
        if !answer.protobuf {
            let body: ListBody<T> = parse_json(&bytes).map_err(|e| decode_error(&bytes, 0, &e))?;
            let kind_ok = self.is_list_kind(&body.kind);
            return body.into_list(kind_ok, &self.resource, &path);
        }
        self.list_protobuf(bytes, &path)
    }

    /// A LIST answered in protobuf.
    #[cfg(feature = "protobuf")]
    fn list_protobuf(&self, bytes: Vec<u8>, path: &str) -> Result<ObjectList<T>> {
        let decode = self.protobuf_decoder(path)?;
        let opened = self.open_protobuf(bytes, path)?;
        let expected = format!("{}List", self.resource.kind);
        let kind = opened.kind();
        if !self.is_list_kind(kind) {
            return Err(Error::Protocol(format!(
                "GET {path} answered 200 with a {kind:?}, not a {expected}"
            )));
        }
        let (metadata, items) = crate::model::protobuf::list(&opened.object, decode)
            .map_err(|message| protobuf_error(&opened.object, message))?;
        Ok(ObjectList { metadata, items })
    }

    /// Without the feature `protobuf` no decoder exists: a protobuf LIST is refused.
    #[cfg(not(feature = "protobuf"))]
    fn list_protobuf(&self, _: Vec<u8>, path: &str) -> Result<ObjectList<T>> {
        Err(unasked_protobuf(path))
    }

    /// The decoder for a protobuf answer: only a view of the kind's own resource reads one (a
    /// typed kind read as another resource or version has other field numbers), whether it
    /// asked or not (a proxy may ignore `Config::protobuf`).
    fn protobuf_decoder(&self, path: &str) -> Result<crate::model::ProtobufDecoder<T>> {
        T::protobuf_decoder()
            .filter(|_| self.protobuf)
            .ok_or_else(|| unasked_protobuf(path))
    }

    /// The object of a protobuf answer, out of its envelope.
    #[cfg(feature = "protobuf")]
    fn open_protobuf(&self, bytes: Vec<u8>, path: &str) -> Result<crate::model::protobuf::Opened> {
        let bytes = Bytes::from(bytes);
        crate::model::protobuf::open(bytes.clone()).map_err(|message| Error::Decode {
            offset: 0,
            excerpt: crate::error::redacted_excerpt(&bytes, 0, 80),
            message: format!("GET {path}: {message}"),
        })
    }

    #[cfg(not(feature = "protobuf"))]
    fn open_protobuf(&self, _: Vec<u8>, path: &str) -> Result<Opened> {
        Err(unasked_protobuf(path))
    }

    /// A pager that yields page after page, holding one page at a time.
    pub fn pager(&self, params: ListParams) -> Pager<'_, T> {
        Pager {
            api: self,
            params,
            done: false,
        }
    }

    /// Starts a WATCH; events are read from the returned stream as they arrive.
    pub async fn watch(&self, params: &WatchParams) -> Result<WatchStream<T, ResponseBody>> {
        let path = with_query(self.request_collection_path()?, &params.to_query());
        let resp = self
            .client
            .send_accepting(Method::GET, &path, None, self.accept(Read::Watch))
            .await?;
        let max_frame = self.client.inner.config.max_frame_bytes;
        if is_protobuf(&resp) {
            self.protobuf_decoder(&path)?;
            #[cfg(feature = "protobuf")]
            return Ok(WatchStream::protobuf(resp.into_body(), max_frame));
        }
        Ok(WatchStream::new(resp.into_body(), max_frame))
    }
}

fn with_query(path: String, query: &str) -> String {
    if query.is_empty() {
        path
    } else {
        format!("{path}?{query}")
    }
}

/// Yields the pages of a paginated LIST (client-go's pager, R8): pages after the first send the
/// `continue` token and no resourceVersion; the list's resourceVersion is the first page's.
///
/// ```no_run
/// # async fn demo(api: informer::Api<informer::Pod>) -> informer::Result<()> {
/// let mut pages = api.pager(informer::ListParams::default().limit(500));
/// while let Some(page) = pages.next_page().await {
///     for pod in page?.items { println!("{}", pod.metadata.name); }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Pager<'a, T> {
    api: &'a Api<T>,
    params: ListParams,
    done: bool,
}

impl<T: Object> Pager<'_, T> {
    /// The next page, or `None` after the last one (or after an error).
    pub async fn next_page(&mut self) -> Option<Result<ObjectList<T>>> {
        if self.done {
            return None;
        }
        let page = self.api.list(&self.params).await;
        match &page {
            Ok(list) if !list.metadata.continue_token.is_empty() => {
                self.params.continue_token = Some(list.metadata.continue_token.clone());
                self.params.resource_version = None;
                self.params.version_match = None;
            }
            _ => self.done = true,
        }
        Some(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_match_rfc7617() {
        assert_eq!(
            basic_credentials("Aladdin", "open sesame"),
            "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="
        );
        assert_eq!(basic_credentials("a", "b"), "YTpi");
        assert_eq!(basic_credentials("ab", "c"), "YWI6Yw==");
    }

    #[test]
    fn html_error_page_is_an_excerpt() {
        let e = error_from_body(
            502,
            None,
            b"<html><body>\n<h1>502 Bad Gateway</h1></body></html>",
        );
        match e {
            Error::Http {
                code: 502, excerpt, ..
            } => assert!(excerpt.contains("502 Bad Gateway")),
            other => panic!("{other:?}"),
        }
    }
}
