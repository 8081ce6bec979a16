//! An embedded kube-apiserver simulator: the server side of the list/watch protocol, over real
//! HTTP on loopback, for tests, benchmarks and demos. A crate of the `informer` workspace, apart
//! from the library so that the library's users build no server, TLS acceptor or certificate
//! generator; the library's tests, examples and benches, `kwatch`, and your own tests (as a
//! dev-dependency) use it.
//!
//! It follows the wire rules X1–X17 (docs/semantics.md) and the real 1.20 captures in
//! `/work/shared/wire`: list shapes and continue tokens, resourceVersion semantics (one global
//! revision, bounded history, 410s with the real messages), watch framing (compact JSON + `\n`,
//! chunked, headers flushed first), bookmarks, `sendInitialEvents`, selector transitions, and the
//! apiserver's `Status` errors. Objects are stored as `serde_json::Value`, so any resource works:
//! the builtin core kinds, `discovery.k8s.io/v1` EndpointSlices, and CRDs added with
//! [`Simulator::register_resource`]. Discovery (`/api`, `/apis`, `/version`) is enough for kubectl.
//! A client whose `Accept` asks for protobuf first gets ConfigMaps (GET, LIST, WATCH) in the
//! apiserver's protobuf form, translated from the JSON (`protobuf.rs`;
//! [`SimulatorBuilder::protobuf`] turns it off); other kinds answer JSON.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use informer_sim::Simulator;
//! use serde_json::json;
//! let sim = Simulator::start().await?;                 // http://127.0.0.1:PORT
//! sim.create("pods", Some("default"), json!({"metadata": {"name": "web-1"}}))?;
//! sim.faults().fail_next(2, 503);                      // the next two requests get 503
//! println!("{}", sim.url());
//! sim.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # HTTP surface
//!
//! | path | methods |
//! |---|---|
//! | `/version`, `/api`, `/apis`, `/api/v1`, `/apis/{g}/{v}` | GET: discovery (shortNames `po`, `svc`, `ep`, `cm`, `ns`, `no`, `ev`) |
//! | `/openapi/v3`, `/openapi/v3/api/v1`, `/openapi/v3/apis/{g}/{v}` | GET: schema-less docs declaring `fieldValidation` (so `kubectl create -f` validates server-side); `/openapi/v2` is 404 |
//! | `/healthz`, `/readyz`, `/livez` | GET: `ok` |
//! | `…/{plural}`, `…/namespaces/{ns}/{plural}` | GET list or `?watch=1`; POST create (201) |
//! | `…/{plural}/{name}`, `…/namespaces/{ns}/{plural}/{name}` | GET, PUT, PATCH (JSON patch, merge, strategic merge for builtins, server-side apply), DELETE; GET `?watch=1` watches one object |
//! | `…/{plural}` DELETE | deletecollection (label/field selectors): the listed objects, each deleted as DELETE would |
//! | `…/{name}/status` | GET, PUT, PATCH, for pods, services, namespaces, nodes, deployments, CRDs and custom resources declaring it |
//! | `…/{name}/scale` | GET, PUT, PATCH of an `autoscaling/v1` Scale: deployments, custom resources declaring it |
//! | `/apis/apiextensions.k8s.io/v1/customresourcedefinitions` | CRDs: a created CRD is served at once (conditions `NamesAccepted`, `Established`); deleting it deletes its objects and stops serving it |
//!
//! List/watch rules (docs/semantics.md X1, X2): RV `""` latest; `"0"` any (limit ignored); `NotOlderThan` waits up
//! to [`SimulatorBuilder::rv_wait`] then 504 `ResourceVersionTooLarge`; `Exact` and the legacy
//! exact read (`limit` + RV ∉ {"", "0"}) rebuild the state at that RV from history or answer 410;
//! continue tokens are the apiserver's base64 JSON (`{"v":"meta.k8s.io/v1","rv":N,"start":"key\u0000"}`)
//! and a compacted one answers 410 with a fresh `"rv":-1` token. Watches: resume from an RV (410
//! as an ERROR event in a 200 stream when too old: older than the retained history, or than the
//! resource's registration, as the 1.20 watch cache refuses versions before its first list), synthetic ADDED for RV `""`/`"0"`,
//! `sendInitialEvents` with the `k8s.io/initial-events-end` bookmark, periodic bookmarks plus one
//! ~2 s before `timeoutSeconds` (each only at a version newer than the watch's start, as the watch
//! cache sends them: a watch of a quiet resource gets none), clean end at the deadline, selector exit as DELETED of the old
//! object stamped with the new RV. A watcher more than [`SimulatorBuilder::watch_buffer`] events
//! behind is closed cleanly, as the apiserver does with unresponsive watchers.
//!
//! DELETE answers the deleted object for pods and namespaces (their registries set
//! `ReturnDeletedObject`) and a `Success` Status (with `details.uid`) for the others, custom
//! resources included, as the 1.20 server does (the Endpoints capture; the real-apiserver suite's
//! custom resource writes). An object finalizers hold is answered as it now is.
//!
//! # Modules
//!
//! `server` (accept loop, auth, routing, handlers), `store` (objects, the global RV, history,
//! list pages, watch starts), `watch` (streaming), `selector`, `faults`, `tls`, `resources`
//! (registry + discovery), `errors` (Status bodies), `body` (response bodies), [`churn`] (a
//! workload generator).
//!
//! # Writes
//!
//! Through HTTP, writes follow the apiserver (see `strategy.rs`, `patch.rs`, `apply.rs`,
//! `crd.rs`): status subresources (main writes keep `.status`, `/status` writes change only it,
//! creates reset it), `generation` (custom resources: anything but metadata/status; builtins:
//! `spec`), `dryRun=All` (a dry-run create answers a uid and creationTimestamp but no
//! resourceVersion; nothing is stored, no event), `fieldManager` and `managedFields` (`Update`
//! entries for POST/PUT/PATCH, the default manager being the User-Agent up to its first `/`),
//! server-side apply with conflicts and `force`, finalizers (`deletionTimestamp` then deletion when
//! the last one goes; no new ones once deleting), DeleteOptions (`preconditions`,
//! `propagationPolicy` adding the `orphan`/`foregroundDeletion` finalizers, `gracePeriodSeconds`:
//! a Pod bound to a node waits for a kubelet that never comes, others go at once).
//!
//! Refused, with the apiserver's error shape: strategic merge for custom resources (415), any
//! `dryRun` but `All` and unknown `fieldValidation` values (422), apply without `fieldManager`
//! and `force` outside apply (422), apply bodies that are YAML but not JSON (415: the simulator
//! reads only the JSON form of YAML).
//!
//! Differences: `fieldValidation` is accepted and ignored (no schemas; 1.20 ignores it too); no
//! garbage collector (dependents stay, as in a cluster without controller-manager); namespaces are
//! deleted at once (no namespace controller or `kubernetes` finalizer); apply tracks lists as
//! atomic except ObjectMeta's and the builtin associative lists of `patch::list_type`, custom
//! resources' lists always atomic, maps always granular; managedFields entries carry
//! `subresource` as 1.22+ servers do; builtin Go fields serialized when empty (a Pod's `spec`) get
//! a `".": {}` the apiserver does not write; `$setElementOrder` puts named elements first;
//! a CRD's conditions are set inside its create; deleting a CRD deletes its objects at once.
//!
//! The programmatic API ([`Simulator::create`] ...) is a privileged writer: objects are stored as
//! given (status included, no managedFields), so tests can set up any state.
//!
//! Deliberate simplifications: no namespace existence checks, no admission/defaulting beyond the
//! above, no Table output, no protobuf, no gzip.

mod apply;
mod body;
pub mod churn;
mod crd;
mod errors;
mod faults;
mod leases;
mod patch;
mod private_file;
mod protobuf;
mod resources;
mod rng;
mod selector;
mod server;
mod store;
mod strategy;
mod tls;
mod watch;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch as tokio_watch;
use tokio::task::JoinHandle;

pub use errors::ApiError;
pub use faults::Faults;
pub use resources::ScaleInfo;
pub use selector::{FieldSelector, JsonLabelSelector};

use informer::model::ApiResource;
use resources::ResourceInfo as Info;
use server::{ServerConfig, Shared};
use store::{HistoryLimits, Store};
use tls::TlsMaterial;

/// Configures and starts a [`Simulator`].
///
/// ```no_run
/// # async fn demo() -> std::io::Result<()> {
/// use std::time::Duration;
/// let sim = informer_sim::Simulator::builder()
///     .tls(true)
///     .token("secret")
///     .history_max_events(1000)
///     .bookmark_interval(Duration::from_secs(1))
///     .start()
///     .await?;
/// assert!(sim.url().starts_with("https://127.0.0.1:"));
/// let _ca = sim.ca_pem().unwrap();
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SimulatorBuilder {
    addr: SocketAddr,
    tls: bool,
    token: Option<String>,
    read_only_token: Option<String>,
    client_cert_auth: bool,
    history: HistoryLimits,
    bookmark_interval: Duration,
    rv_wait: Duration,
    default_watch_timeout: Duration,
    watch_buffer: usize,
    initial_rv: u64,
    seed: Option<u64>,
    endpoint_slices_v1beta1: bool,
    protobuf: bool,
}

impl Default for SimulatorBuilder {
    fn default() -> Self {
        SimulatorBuilder {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            token: None,
            read_only_token: None,
            client_cert_auth: false,
            history: HistoryLimits {
                max_events: 100_000,
                max_age: None,
            },
            bookmark_interval: Duration::from_secs(60),
            rv_wait: Duration::from_secs(3),
            default_watch_timeout: Duration::from_secs(1800),
            watch_buffer: 65_536,
            initial_rv: 1,
            seed: None,
            endpoint_slices_v1beta1: false,
            protobuf: true,
        }
    }
}

impl SimulatorBuilder {
    /// Listen address (default `127.0.0.1:0`, an ephemeral port).
    pub fn addr(mut self, addr: SocketAddr) -> Self {
        self.addr = addr;
        self
    }

    /// Serve HTTPS with a certificate for `127.0.0.1`/`localhost` signed by a fresh CA (default off).
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Require `Authorization: Bearer <token>` (or a client certificate, if enabled); 401 otherwise.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Also accept `Authorization: Bearer <token>` for a read-only user `reader`: get/list/watch
    /// work, writes get 403 Forbidden with the apiserver's RBAC message.
    pub fn read_only_token(mut self, token: impl Into<String>) -> Self {
        self.read_only_token = Some(token.into());
        self
    }

    /// Accept client certificates signed by the simulator's CA as authentication (requires TLS).
    /// When on, requests with neither a certificate nor the token get 401.
    pub fn client_cert_auth(mut self, on: bool) -> Self {
        self.client_cert_auth = on;
        self
    }

    /// Keep at most `n` events of history (default 100 000); older RVs answer 410.
    pub fn history_max_events(mut self, n: usize) -> Self {
        self.history.max_events = n.max(1);
        self
    }

    /// Drop history events older than `d` (checked on each write; default: no age limit).
    pub fn history_max_age(mut self, d: Duration) -> Self {
        self.history.max_age = Some(d);
        self
    }

    /// Period of BOOKMARK events on watches with `allowWatchBookmarks=true` (default 60 s). As
    /// from the watch cache, a bookmark goes out only once the store's resourceVersion is newer
    /// than the watch's start: a watch of a quiet store gets none.
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }

    /// How long a list waits for a resourceVersion ahead of the store before 504 (default 3 s).
    pub fn rv_wait(mut self, d: Duration) -> Self {
        self.rv_wait = d;
        self
    }

    /// Watch duration when the request has no `timeoutSeconds` (default 1800 s).
    pub fn default_watch_timeout(mut self, d: Duration) -> Self {
        self.default_watch_timeout = d;
        self
    }

    /// Events a watcher may fall behind before the server closes it (default 65 536).
    pub fn watch_buffer(mut self, n: usize) -> Self {
        self.watch_buffer = n;
        self
    }

    /// The resourceVersion of the empty store (default 1); the first write gets this + 1.
    pub fn initial_resource_version(mut self, rv: u64) -> Self {
        self.initial_rv = rv;
        self
    }

    /// Seed for generated names and uids (default: random).
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// Serve EndpointSlices as `discovery.k8s.io/v1beta1` only, as servers 1.17 to 1.20 do
    /// (default off: `v1` only, as from 1.25): `/apis/discovery.k8s.io/v1/...` answers 404 and
    /// discovery lists `v1beta1`. Objects are stored as written (the `v1beta1` schema, with its
    /// endpoints' `topology` map); `"endpointslices"` in the programmatic API names this version.
    ///
    /// ```no_run
    /// # async fn f() {
    /// let sim = informer_sim::Simulator::builder().endpoint_slices_v1beta1(true).start().await.unwrap();
    /// # }
    /// ```
    pub fn endpoint_slices_v1beta1(mut self, on: bool) -> Self {
        self.endpoint_slices_v1beta1 = on;
        self
    }

    /// Answer in protobuf a client whose `Accept` asks for it first, as kube-apiserver does (default
    /// on): LIST, GET and WATCH of ConfigMaps, the kind the simulator translates (`protobuf.rs`);
    /// every other resource answers JSON. Off: JSON to everyone.
    ///
    /// ```no_run
    /// # async fn f() {
    /// let sim = informer_sim::Simulator::builder().protobuf(false).start().await.unwrap();
    /// # }
    /// ```
    pub fn protobuf(mut self, on: bool) -> Self {
        self.protobuf = on;
        self
    }

    /// Binds and starts serving.
    pub async fn start(self) -> std::io::Result<Simulator> {
        let listener = server::listen(self.addr)?;
        let addr = listener.local_addr()?;
        let tls = if self.tls {
            Some(Arc::new(TlsMaterial::generate()?))
        } else {
            None
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let store = Arc::new(Store::new(
            self.history,
            self.initial_rv,
            self.watch_buffer,
            self.seed,
        ));
        if self.endpoint_slices_v1beta1 {
            store.serve_endpoint_slices_v1beta1_only();
        }
        let faults = Faults::new(store.clone());
        let (shutdown_tx, shutdown_rx) = tokio_watch::channel(false);
        let shared = Arc::new(Shared {
            store,
            faults,
            cfg: ServerConfig {
                token: self.token,
                read_only_token: self.read_only_token,
                client_cert_auth: self.client_cert_auth,
                bookmark_interval: self.bookmark_interval,
                rv_wait: self.rv_wait,
                default_watch_timeout: self.default_watch_timeout,
                address: addr.to_string(),
                protobuf: self.protobuf,
            },
            shutdown: shutdown_rx.clone(),
        });
        let acceptor = tls.as_ref().map(|t| t.acceptor.clone());
        let task = tokio::spawn(server::serve(
            listener,
            shared.clone(),
            acceptor,
            shutdown_rx,
        ));
        Ok(Simulator {
            shared,
            url: format!("{scheme}://{addr}"),
            addr,
            tls,
            shutdown_tx,
            task: Some(task),
        })
    }
}

/// A running simulator. Stops when dropped or on [`shutdown`](Self::shutdown).
///
/// The programmatic API (`create`, `get`, `replace`, `patch`, `delete`, `list`) has exactly the
/// semantics of the HTTP API and records the same events, without going through HTTP. A
/// `resource` argument is a plural (`pods`), `plural.group` (`endpointslices.discovery.k8s.io`),
/// a kind (`Pod`) or a short name (`po`).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use informer_sim::Simulator;
/// use serde_json::json;
/// let sim = Simulator::start().await?;
/// let pod = sim.create("pods", Some("default"), json!({"metadata": {"name": "a", "labels": {"app": "x"}}}))?;
/// assert_eq!(pod["metadata"]["resourceVersion"], "2");
/// sim.patch("pods", Some("default"), "a", &json!({"metadata": {"labels": {"app": "y"}}}))?;
/// let err = sim.get("pods", Some("default"), "missing").unwrap_err();
/// assert_eq!(err.code, 404);
/// sim.delete("pods", Some("default"), "a")?;
/// assert_eq!(sim.resource_version(), 4);
/// # Ok(()) }
/// ```
pub struct Simulator {
    shared: Arc<Shared>,
    url: String,
    addr: SocketAddr,
    tls: Option<Arc<TlsMaterial>>,
    shutdown_tx: tokio_watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl Simulator {
    /// Starts a plain-HTTP simulator on `127.0.0.1` with an ephemeral port and default settings.
    pub async fn start() -> std::io::Result<Simulator> {
        SimulatorBuilder::default().start().await
    }

    /// A builder for non-default settings.
    pub fn builder() -> SimulatorBuilder {
        SimulatorBuilder::default()
    }

    /// Base URL, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The CA certificate (PEM) that signed the server certificate, when TLS is on.
    pub fn ca_pem(&self) -> Option<&str> {
        self.tls.as_ref().map(|t| t.ca_pem.as_str())
    }

    /// Issues a client certificate and key (both PEM) for common name `cn`, signed by the CA.
    /// `None` when TLS is off.
    pub fn issue_client_cert(&self, cn: &str) -> Option<(String, String)> {
        self.tls.as_ref().and_then(|t| t.issue_client_cert(cn).ok())
    }

    /// A kubeconfig for this simulator: its URL, the CA (when TLS is on, as
    /// `certificate-authority-data`) and the bearer token (when one is set), context `sim`,
    /// namespace `default`. Write it to a file and point kubectl or a client at it. It is JSON
    /// (which kubectl reads as it reads YAML), so it loads without informer's `yaml` feature too.
    ///
    /// ```no_run
    /// # async fn demo() -> std::io::Result<()> {
    /// let sim = informer_sim::Simulator::builder().tls(true).token("t").start().await?;
    /// let json = sim.kubeconfig(); // or sim.write_kubeconfig(path): a private file
    /// // kubectl --kubeconfig /tmp/sim.kubeconfig get pods
    /// # Ok(()) }
    /// ```
    pub fn kubeconfig(&self) -> String {
        use base64::Engine;
        let mut cluster = serde_json::json!({ "server": self.url.clone() });
        if let Some(ca) = self.ca_pem() {
            let b64 = base64::engine::general_purpose::STANDARD.encode(ca);
            cluster["certificate-authority-data"] = b64.into();
        }
        let mut user = serde_json::json!({});
        if let Some(t) = &self.shared.cfg.token {
            user["token"] = t.clone().into();
        }
        let kubeconfig = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{ "name": "sim", "cluster": cluster }],
            "users": [{ "name": "sim", "user": user }],
            "contexts": [{
                "name": "sim",
                "context": { "cluster": "sim", "user": "sim", "namespace": "default" },
            }],
            "current-context": "sim",
        });
        format!("{kubeconfig:#}\n")
    }

    /// Writes [`kubeconfig`](Self::kubeconfig) to `path` (it holds the token): a new file only the
    /// owner can read (0600), written under a unique temporary name and renamed over `path`.
    ///
    /// ```no_run
    /// # async fn demo() -> std::io::Result<()> {
    /// let sim = informer_sim::Simulator::builder().token("t").start().await?;
    /// sim.write_kubeconfig(std::path::Path::new("/tmp/sim.kubeconfig"))?;
    /// # Ok(()) }
    /// ```
    pub fn write_kubeconfig(&self, path: &std::path::Path) -> std::io::Result<()> {
        crate::private_file::write(path, self.kubeconfig().as_bytes())
    }

    /// The fault-injection handle.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.current_rv()
    }

    /// Watch streams currently open. A stream counts until it ends: deadline, close, fault, or
    /// the client going away (noticed at once, even without events).
    pub fn active_watches(&self) -> u64 {
        self.shared
            .faults
            .state
            .active_watches
            // SeqCst: pairs with the gauge's updates in `watch.rs`; not on a hot path.
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Drops all history: every older resourceVersion now answers 410.
    pub fn compact(&self) {
        self.shared.store.compact();
    }

    /// Serves another resource (a CRD, say); `short_names` appear in discovery. Custom resources
    /// are listed with `kind`/`apiVersion` on each item and DELETE returns the object.
    ///
    /// Like a CRD's watch cache on the real apiserver, which is built from a list at the version
    /// current when the resource is first served, a watch of it from an older resourceVersion
    /// answers `410 Expired` ("too old resource version"), whatever history the store still holds.
    pub fn register_resource(&self, api: ApiResource, short_names: &[&str]) {
        self.shared
            .store
            .register(Info::new(api, short_names, false));
    }

    /// Like [`register_resource`](Self::register_resource), with the subresources a CRD may
    /// declare: `status` (`{name}/status`) and `scale` (`{name}/scale`).
    pub fn register_resource_with(
        &self,
        api: ApiResource,
        short_names: &[&str],
        status: bool,
        scale: Option<ScaleInfo>,
    ) {
        let mut info = Info::new(api, short_names, false);
        if status {
            info = info.with_status();
        }
        if let Some(s) = scale {
            info = info.with_scale(s);
        }
        self.shared.store.register(info);
    }

    /// A cloneable handle to the programmatic API (for tasks that outlive a borrow).
    pub fn api(&self) -> SimHandle {
        SimHandle {
            store: self.shared.store.clone(),
        }
    }

    /// Creates an object (POST). `namespace` `None` means the object's own or `default`.
    pub fn create(
        &self,
        resource: &str,
        namespace: Option<&str>,
        obj: Value,
    ) -> Result<Value, ApiError> {
        self.api().create(resource, namespace, obj)
    }

    /// Reads an object (GET).
    pub fn get(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.api().get(resource, namespace, name)
    }

    /// Replaces an object (PUT); a non-empty `metadata.resourceVersion` must be current (else 409).
    pub fn replace(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        self.api().replace(resource, namespace, name, obj)
    }

    /// Applies a JSON merge patch (PATCH, `application/merge-patch+json`).
    pub fn patch(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        self.api().patch(resource, namespace, name, patch)
    }

    /// Deletes an object; returns its last state stamped with the deletion resourceVersion.
    pub fn delete(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.api().delete(resource, namespace, name)
    }

    /// The current list document (`{"kind":"PodList",...}`) for one namespace or all (`None`).
    pub fn list(&self, resource: &str, namespace: Option<&str>) -> Result<Value, ApiError> {
        self.api().list(resource, namespace)
    }

    /// Stops accepting connections, ends open watches cleanly and waits for the accept loop.
    pub async fn shutdown(mut self) {
        self.shared.faults.close_all_watches();
        self.shutdown_tx.send_replace(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

/// The programmatic API of a [`Simulator`], cheap to clone and `Send`: the same semantics and
/// events as the HTTP API. Obtained from [`Simulator::api`].
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let sim = informer_sim::Simulator::start().await?;
/// let api = sim.api();
/// tokio::spawn(async move {
///     api.create("configmaps", Some("default"), serde_json::json!({"metadata": {"name": "c"}})).unwrap();
/// });
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SimHandle {
    store: Arc<Store>,
}

impl SimHandle {
    fn idx(&self, resource: &str) -> Result<usize, ApiError> {
        self.store.resolve(resource)
    }

    /// See [`Simulator::create`].
    pub fn create(
        &self,
        resource: &str,
        namespace: Option<&str>,
        obj: Value,
    ) -> Result<Value, ApiError> {
        let idx = self.idx(resource)?;
        let o = self.store.create(idx, namespace, obj)?;
        Ok(o.to_value(&self.store.info(idx)))
    }

    /// See [`Simulator::get`].
    pub fn get(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        self.store.get_value(self.idx(resource)?, namespace, name)
    }

    /// See [`Simulator::replace`].
    pub fn replace(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        obj: Value,
    ) -> Result<Value, ApiError> {
        let idx = self.idx(resource)?;
        let o = self.store.replace(idx, namespace, name, obj)?;
        Ok(o.to_value(&self.store.info(idx)))
    }

    /// See [`Simulator::patch`].
    pub fn patch(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Value, ApiError> {
        let idx = self.idx(resource)?;
        let o = self.store.patch(idx, namespace, name, patch)?;
        Ok(o.to_value(&self.store.info(idx)))
    }

    /// See [`Simulator::delete`].
    pub fn delete(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let idx = self.idx(resource)?;
        let o = self.store.delete(idx, namespace, name, None)?;
        Ok(o.to_value(&self.store.info(idx)))
    }

    /// See [`Simulator::list`].
    pub fn list(&self, resource: &str, namespace: Option<&str>) -> Result<Value, ApiError> {
        let idx = self.idx(resource)?;
        let info = self.store.info(idx);
        let (rv, items) = self.store.list_values(idx, namespace);
        Ok(serde_json::json!({
            "kind": format!("{}List", info.api.kind),
            "apiVersion": info.api.api_version(),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        }))
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.store.current_rv()
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        self.shared.faults.close_all_watches();
        self.shutdown_tx.send_replace(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn handles_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::Simulator>();
        check::<super::SimHandle>();
        check::<super::Faults>();
        check::<super::churn::Churn>();
    }
}
