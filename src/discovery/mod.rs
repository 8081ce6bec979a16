//! Service discovery on EndpointSlices: the instances of a Service port, read from shared informer
//! caches in nanoseconds, pushed to subscribers on change.
//!
//! # What
//! [`ServiceDiscovery`] keeps one shared EndpointSlice informer per namespace (or one cluster-wide, see
//! [`WatchScope`]), indexed by the `kubernetes.io/service-name` label, and optionally a Service
//! informer (to tell "Service absent" from "no endpoints") and a metadata-only Pod informer (Pod
//! labels/annotations, Dubbo's `io.dubbo/metadata`). Every `(namespace, service, port name)` that
//! someone asked for has one cell holding the current [`Snapshot`]; a handler on the informers
//! recomputes the cells of a Service when one of its slices (or its Service, or one of its Pods)
//! changes, and publishes a new snapshot only when the content changed.
//!
//! ```no_run
//! # async fn demo(client: informer::Client) {
//! use std::time::Duration;
//! use informer::discovery::{ServiceDiscovery, DiscoveryOptions, ServiceState};
//! let discovery = ServiceDiscovery::new(client, DiscoveryOptions::default());
//! discovery.wait_for_sync("prod", Duration::from_secs(30)).await;
//! let snapshot = discovery.instances("prod", "web", "http");
//! if snapshot.state == ServiceState::Ready {
//!     let first = snapshot.usable().next().unwrap();
//!     println!("rev {} -> {}", snapshot.revision, first.socket_addr());
//! }
//! # }
//! ```
//!
//! # Invariants
//! - **Zero apiserver calls on the read path** once synced: [`ServiceDiscovery::instances`] is a hash
//!   lookup and an `Arc` clone. Only [`ServiceDiscovery::instances_or_fetch`] may call the apiserver, and
//!   only before the caches synced: single-flight per Service, at most one request per Service per
//!   [`DiscoveryOptions::fetch_min_interval`], at most
//!   [`DiscoveryOptions::max_concurrent_fetches`] in flight.
//! - **One versioned snapshot for pull and push.** A cell is a latest-value channel: `instances`
//!   reads it, subscribers are woken by it. Revisions increase per Service on every content
//!   change, and are published in the order they were computed (under the Service's lock), so a
//!   subscriber that got revision N never reads an older one from `instances`.
//! - **Only on change.** Recomputing a cell that yields the same content publishes nothing.
//! - **Latest wins.** A slow subscriber finds the newest snapshot, never a backlog.
//! - **States.** [`ServiceState::NotSynced`] until the informers' first list is in (or a
//!   last-known-good snapshot marked [`Freshness::Stale`]), then `ServiceAbsent`, `NoEndpoints` or
//!   `Ready`. A relist never empties the caches, so it never flaps a snapshot to empty.
//!
//! # Merge rules (discovery.md §3.3)
//! 1. **Union** of every slice labelled `kubernetes.io/service-name=<service>` in the namespace; a
//!    deleted slice (or a tombstone after a relist) drops out. Slices of `addressType: FQDN` (and
//!    any type but IPv4/IPv6) are skipped; with [`DiscoveryOptions::managed_by`] only slices of that
//!    manager count.
//! 2. **Port per slice**: the slice port whose `name` equals the requested Service port name
//!    (`""` = the unnamed port); its number is that slice's, so named target ports resolving to
//!    different numbers on different Pods come out right. A slice without that port contributes
//!    nothing.
//! 3. **One address per endpoint**: `addresses[0]` (the API gives the rest no meaning).
//! 4. **Conditions**: `ready` and `serving` default to true, `terminating` to false.
//! 5. **Duplicates** (an endpoint moving between slices is briefly in two): key
//!    `(address, port)`; the copy from the slice **observed most recently** by this process wins
//!    (a local observation sequence, bumped on every add/update of a slice); on a tie (slices read
//!    by one fetch) the slice with the smaller name wins.
//! 6. **Dual-stack**: an endpoint per family per Pod would count a Pod twice; for Pods with
//!    endpoints in both families only the preferred family ([`IpFamilyPreference`]) is kept.
//!    Endpoints without a Pod `targetRef` are kept as they are.
//! 7. **Selection**: ready endpoints; if none is ready and
//!    [`DiscoveryOptions::serving_terminating_fallback`] is on, serving-and-terminating ones (as
//!    kube-proxy does). Not-ready ones are listed only with
//!    [`DiscoveryOptions::include_not_ready`] (flagged, never counted as usable).
//! 8. **Topology** ([`TopologyPreference`]): if every selected endpoint carries `hints.forNodes`
//!    and some name this node, keep those; else likewise with `hints.forZones` and this zone; else
//!    keep all.
//! 9. **Order**: by `(address, port)`, IPv4 before IPv6, numerically.
//!
//! In [`EndpointSource::Endpoints`] mode the v1 Endpoints object of the Service is read instead:
//! `addresses` are ready, `notReadyAddresses` not ready and not serving; the port is chosen by
//! name per subset; `endpoints.kubernetes.io/over-capacity: truncated` sets
//! [`Snapshot::truncated`] and logs a warning (the list was cut at 1000 addresses).
//!
//! # For RPC clients
//! [`ServiceDiscovery::endpoint_changes`] turns a Service port's snapshots into an
//! [`EndpointStream`] of inserts and removals of usable endpoints (inserts first), a plain
//! stream; with the `tower` feature, `EndpointStream::into_discover` makes it tower's
//! `Discover` for tower's balancers (and, forwarded, tonic's balance channel).

mod cache;
mod changes;
mod compute;
mod fallback;
mod informers;
mod merge;
mod persist;
mod snapshot;
mod subscribe;
#[cfg(feature = "tower")]
mod tower_discover;
mod view;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use changes::{EndpointChange, EndpointSet, EndpointStream};
pub use fallback::FetchError;
pub use snapshot::{
    Freshness, Instance, InstanceDiff, InstanceHints, InstanceMetadata, ServiceState, Snapshot,
    TopologyFilter, diff,
};
pub use subscribe::{Change, Subscription};
#[cfg(feature = "tower")]
pub use tower_discover::TowerDiscover;
pub use view::{ServiceView, port_names};

use crate::client::Client;
use crate::informer::InformerFactory;
use crate::reflector::ReflectorOptions;

/// The label tying an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming a slice's manager.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// The annotation the Endpoints controller sets when it truncated the list at 1000 addresses.
pub const OVER_CAPACITY_ANNOTATION: &str = "endpoints.kubernetes.io/over-capacity";
/// Dubbo's Pod annotation holding instance metadata as a JSON object.
pub const DUBBO_METADATA_ANNOTATION: &str = "io.dubbo/metadata";
/// Name of the index discovery adds to the EndpointSlice store (values: `namespace/service`).
pub const SERVICE_INDEX: &str = "discovery.service-name";

/// Which objects endpoints are read from.
///
/// ```
/// use informer::discovery::EndpointSource;
/// assert_eq!(EndpointSource::default(), EndpointSource::EndpointSlices);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EndpointSource {
    /// `discovery.k8s.io/v1` EndpointSlices (the default).
    #[default]
    EndpointSlices,
    /// Legacy `v1` Endpoints, for clusters older than 1.21; warns when the list was truncated.
    Endpoints,
}

/// How many informers: one per namespace asked for, or one for the whole cluster.
///
/// ```
/// use informer::discovery::WatchScope;
/// assert_eq!(WatchScope::default(), WatchScope::PerNamespace);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WatchScope {
    /// One informer per namespace, started on the first request for that namespace (RBAC can be
    /// namespaced).
    #[default]
    PerNamespace,
    /// One informer over all namespaces (needs cluster-wide `list`/`watch`).
    ClusterWide,
}

/// For Pods with endpoints of both IP families, which one to keep.
///
/// ```
/// use informer::discovery::IpFamilyPreference;
/// assert_eq!(IpFamilyPreference::default(), IpFamilyPreference::PreferIpv4);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IpFamilyPreference {
    /// IPv4 addresses first.
    #[default]
    PreferIpv4,
    /// IPv6 addresses first.
    PreferIpv6,
}

/// Where this process runs, for topology hints. Both `None` (the default): no filtering.
///
/// ```
/// use informer::discovery::TopologyPreference;
/// let here = TopologyPreference { zone: Some("zone-a".into()), node: Some("node-1".into()) };
/// assert!(TopologyPreference::default().zone.is_none());
/// # let _ = here;
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopologyPreference {
    /// This zone, matched against `hints.forZones`.
    pub zone: Option<String>,
    /// This node, matched against `hints.forNodes`.
    pub node: Option<String>,
}

/// Options of a [`ServiceDiscovery`].
///
/// ```
/// use std::time::Duration;
/// use informer::discovery::DiscoveryOptions;
/// let o = DiscoveryOptions { pod_metadata: true, fetch_min_interval: Duration::from_millis(500), ..Default::default() };
/// assert!(o.watch_services && o.serving_terminating_fallback);
/// ```
#[derive(Clone, Debug)]
pub struct DiscoveryOptions {
    /// Where endpoints come from (EndpointSlices, or legacy Endpoints).
    pub source: EndpointSource,
    /// One informer per namespace, or one cluster-wide.
    pub scope: WatchScope,
    /// Watch Services too, to tell [`ServiceState::ServiceAbsent`] from
    /// [`ServiceState::NoEndpoints`] exactly and to take `appProtocol` from the Service port.
    /// Default true. Where listing Services is refused with 403 Forbidden, discovery does not
    /// wait for them: it serves from the endpoint objects alone and says so in
    /// [`DiscoveryMetrics::services_forbidden`].
    pub watch_services: bool,
    /// Join Pod labels and annotations (metadata-only Pod informer). Default false.
    pub pod_metadata: bool,
    /// With no ready endpoint, list the serving-and-terminating ones. Default true.
    pub serving_terminating_fallback: bool,
    /// List not-ready endpoints too (flagged; never usable). Default false.
    pub include_not_ready: bool,
    /// Which IP family comes first in a snapshot.
    pub ip_family: IpFamilyPreference,
    /// Topology-aware filtering of instances.
    pub topology: TopologyPreference,
    /// Only count slices whose `endpointslice.kubernetes.io/managed-by` equals this.
    pub managed_by: Option<String>,
    /// At most one apiserver read per Service per this interval on the cache-miss path.
    /// Default 1 s.
    pub fetch_min_interval: Duration,
    /// At most this many cache-miss reads in flight, all Services together. Default 4.
    pub max_concurrent_fetches: usize,
    /// A file to keep the last-known-good snapshots in: loaded (as [`Freshness::Stale`]) at start,
    /// written every [`persist_interval`](Self::persist_interval) when something changed.
    pub last_known_good: Option<PathBuf>,
    /// Default 10 s.
    pub persist_interval: Duration,
    /// Options of the informers discovery creates.
    pub reflector: ReflectorOptions,
    /// At most this many Services tracked (each asked-about `(namespace, service)` is; callers may
    /// pass any names). Past it, asking about a new one first forgets the oldest Service that has
    /// no subscriber (or, if every one has, the oldest: its subscriptions end). Default 10 000.
    pub max_tracked_services: usize,
    /// At most this many ports tracked per Service; past it the oldest port without a subscriber
    /// (else the oldest) is forgotten. Default 64.
    pub max_ports_per_service: usize,
    /// At most this many namespaces watched with [`WatchScope::PerNamespace`] (each asked-about
    /// namespace starts informers; callers may pass any names). Past it, asking about a new one
    /// first forgets the oldest namespace with no subscriber (or, if every one has, the oldest):
    /// its Services are forgotten (their subscriptions end), its handlers removed, and with
    /// [`ServiceDiscovery::new`] its informers stopped. Default 256.
    pub max_watched_namespaces: usize,
}

impl Default for DiscoveryOptions {
    fn default() -> Self {
        DiscoveryOptions {
            source: EndpointSource::default(),
            scope: WatchScope::default(),
            watch_services: true,
            pod_metadata: false,
            serving_terminating_fallback: true,
            include_not_ready: false,
            ip_family: IpFamilyPreference::default(),
            topology: TopologyPreference::default(),
            managed_by: None,
            fetch_min_interval: Duration::from_secs(1),
            max_concurrent_fetches: 4,
            last_known_good: None,
            persist_interval: Duration::from_secs(10),
            reflector: ReflectorOptions::default(),
            max_tracked_services: 10_000,
            max_ports_per_service: 64,
            max_watched_namespaces: 256,
        }
    }
}

/// Counters of a [`ServiceDiscovery`].
///
/// ```
/// let m = informer::discovery::DiscoveryMetrics::default();
/// assert_eq!(m.apiserver_reads, 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoveryMetrics {
    /// Cells (`namespace/service/port`) tracked.
    pub tracked_ports: usize,
    /// Namespaces whose informers this discovery uses (one entry with
    /// [`WatchScope::ClusterWide`]).
    pub watched_namespaces: usize,
    /// Recomputations of a Service's cells.
    pub recomputes: u64,
    /// Snapshots published (content changed).
    pub published: u64,
    /// HTTP requests made by the cache-miss path.
    pub apiserver_reads: u64,
    /// Calls to the cache-miss path that were answered without a request of their own.
    pub fetches_shared: u64,
    /// **Degraded** namespaces: where listing Services (with
    /// [`watch_services`](DiscoveryOptions::watch_services) on) was refused with 403 Forbidden,
    /// typically RBAC granting EndpointSlices only, with the server's message, by namespace (`""`
    /// for [`WatchScope::ClusterWide`]). There discovery did not wait for Services: it serves
    /// from the endpoint objects alone, as with `watch_services: false` (a Service without any
    /// slice is [`ServiceState::ServiceAbsent`], never `NoEndpoints`, and `appProtocol` is not
    /// taken from the Service). The Service informer keeps retrying with backoff; once it syncs
    /// the namespace leaves this map and its Services are computed with it. Empty when healthy.
    pub services_forbidden: BTreeMap<String, String>,
}

/// Service discovery over shared informers. Cheap to clone; clones share everything.
///
/// Must be created inside a tokio runtime (informers start on it).
///
/// ```no_run
/// # async fn demo(client: informer::Client) {
/// use informer::discovery::{ServiceDiscovery, DiscoveryOptions};
/// let d = ServiceDiscovery::new(client, DiscoveryOptions::default());
/// let mut sub = d.subscribe("prod", "web", "http");
/// if let Some(change) = sub.changed().await {
///     assert!(d.instances("prod", "web", "http").revision >= change.snapshot.revision);
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct ServiceDiscovery {
    cache: Arc<cache::Cache>,
    /// The cache-miss path's state (`instances_or_fetch`).
    fetches: Arc<fallback::Fetches>,
}

impl ServiceDiscovery {
    /// ServiceDiscovery with its own informer factory (built from `options.reflector`).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn new(client: Client, options: DiscoveryOptions) -> ServiceDiscovery {
        let factory = Arc::new(InformerFactory::with_options(
            client.clone(),
            options.reflector.clone(),
        ));
        Self::with_factory(client, factory, options)
    }

    /// ServiceDiscovery on an existing factory, sharing its informers with the rest of the process
    /// (`options.reflector` is then unused: the factory's defaults apply).
    ///
    /// # Panics
    /// Outside a tokio runtime.
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) {
    /// use std::sync::Arc;
    /// use informer::{InformerFactory, discovery::{ServiceDiscovery, DiscoveryOptions}};
    /// let factory = Arc::new(InformerFactory::new(client.clone()));
    /// let d = ServiceDiscovery::with_factory(client, factory, DiscoveryOptions::default());
    /// # let _ = d;
    /// # }
    /// ```
    pub fn with_factory(
        client: Client,
        factory: Arc<InformerFactory>,
        options: DiscoveryOptions,
    ) -> ServiceDiscovery {
        ServiceDiscovery {
            fetches: Arc::new(fallback::Fetches::new(options.max_concurrent_fetches)),
            cache: cache::Cache::new(client, factory, options),
        }
    }

    /// The current snapshot of a Service port (`port` is the Service port name, `""` for an
    /// unnamed port). Never calls the apiserver: the first call for a namespace starts its
    /// informers and answers [`ServiceState::NotSynced`] (or a stale last-known-good snapshot)
    /// until they synced; after that it is a hash lookup and an `Arc` clone.
    ///
    /// ```no_run
    /// # fn demo(d: informer::discovery::ServiceDiscovery) {
    /// let s = d.instances("prod", "web", "http");
    /// for i in s.usable() { println!("{}", i.socket_addr()); }
    /// # }
    /// ```
    pub fn instances(&self, namespace: &str, service: &str, port: &str) -> Arc<Snapshot> {
        self.cache.instances(namespace, service, port)
    }

    /// Like [`instances`](Self::instances), but before the caches synced, reads the Service's
    /// slices from the apiserver once ([`Freshness::Fetched`]): concurrent callers for one Service
    /// share one request, and a Service is read at most once per
    /// [`DiscoveryOptions::fetch_min_interval`]. If the read fails and a stale last-known-good
    /// snapshot exists, that is returned instead of the error.
    ///
    /// ```no_run
    /// # async fn demo(d: informer::discovery::ServiceDiscovery) -> Result<(), informer::discovery::FetchError> {
    /// let s = d.instances_or_fetch("prod", "web", "http").await?;
    /// println!("{:?} {:?}", s.state, s.freshness);
    /// # Ok(()) }
    /// ```
    pub async fn instances_or_fetch(
        &self,
        namespace: &str,
        service: &str,
        port: &str,
    ) -> Result<Arc<Snapshot>, FetchError> {
        fallback::instances_or_fetch(&self.cache, &self.fetches, namespace, service, port).await
    }

    /// Subscribes to a Service port: the current snapshot first, then every content change, with
    /// the diff. Latest wins: a slow subscriber skips revisions, it never queues them.
    ///
    /// ```no_run
    /// # async fn demo(d: informer::discovery::ServiceDiscovery) {
    /// let mut sub = d.subscribe("prod", "web", "http");
    /// while let Some(c) = sub.changed().await {
    ///     for gone in &c.diff.removed { println!("drain {}", gone.socket_addr()); }
    /// }
    /// # }
    /// ```
    pub fn subscribe(&self, namespace: &str, service: &str, port: &str) -> Subscription {
        Subscription::new(self.cache.cell(namespace, service, port).subscribe())
    }

    /// The endpoint changes of a Service port for a load balancer: first an insert per usable
    /// endpoint, then inserts, updates and removals as the snapshot changes, inserts before
    /// removals (see [`EndpointStream`]).
    ///
    /// ```no_run
    /// # async fn demo(d: informer::discovery::ServiceDiscovery) {
    /// let mut changes = d.endpoint_changes("prod", "web", "grpc");
    /// while let Some(change) = changes.next_change().await {
    ///     println!("{change:?}");
    /// }
    /// # }
    /// ```
    pub fn endpoint_changes(&self, namespace: &str, service: &str, port: &str) -> EndpointStream {
        EndpointStream::new(self.subscribe(namespace, service, port))
    }

    /// Whether the informers serving `namespace` finished their first list and handed it to
    /// discovery's handlers (starts them if nothing asked for the namespace yet).
    ///
    /// ```no_run
    /// # fn demo(d: informer::discovery::ServiceDiscovery) {
    /// if !d.has_synced("prod") { println!("warming up"); }
    /// # }
    /// ```
    pub fn has_synced(&self, namespace: &str) -> bool {
        self.cache.has_synced(namespace)
    }

    /// Waits until [`has_synced`](Self::has_synced), at most `timeout`; returns whether it did.
    ///
    /// ```no_run
    /// # async fn demo(d: informer::discovery::ServiceDiscovery) {
    /// assert!(d.wait_for_sync("prod", std::time::Duration::from_secs(30)).await);
    /// # }
    /// ```
    pub async fn wait_for_sync(&self, namespace: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        // Woken by the informers as they sync: no polling.
        if tokio::time::timeout_at(deadline, self.cache.synced(namespace))
            .await
            .is_err()
        {
            return false;
        }
        // The first full computation runs right after the sync; wait for it too.
        self.cache.wait_first_compute(namespace, deadline).await
    }

    /// Writes the last-known-good file now, on this thread: it blocks for the write (from async
    /// code, call it in `tokio::task::spawn_blocking`). A no-op without
    /// [`DiscoveryOptions::last_known_good`]. The periodic saves run on tokio's blocking pool.
    ///
    /// ```no_run
    /// # fn demo(d: informer::discovery::ServiceDiscovery) -> std::io::Result<()> {
    /// d.persist_now()?;
    /// # Ok(()) }
    /// ```
    pub fn persist_now(&self) -> std::io::Result<()> {
        self.cache.persist_now()
    }

    /// A snapshot of the counters.
    ///
    /// ```no_run
    /// # fn demo(d: informer::discovery::ServiceDiscovery) {
    /// println!("{:?}", d.metrics());
    /// # }
    /// ```
    pub fn metrics(&self) -> DiscoveryMetrics {
        let (apiserver_reads, fetches_shared) = self.fetches.counts();
        DiscoveryMetrics {
            apiserver_reads,
            fetches_shared,
            ..self.cache.metrics()
        }
    }
}
