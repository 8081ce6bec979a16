//! The cells: one latest-value channel per `(namespace, service, port)`, the informers behind them
//! and the handlers that recompute them.
//!
//! Lock order: `services` map, then a Service's `state`, then `cells`/`pod_refs`/`slice_seq`.
//! Handlers take the map only to find the Service, and release it before locking the Service.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock, Weak};

use futures_util::future::{Either, select};
use hashbrown::HashTable;
use tokio::sync::{Notify, watch};

use super::fallback::Fetches;
use super::merge::{self, MergeContext, Merged, ObservedSlice};
use super::snapshot::{Freshness, InstanceMetadata, ServiceState, Snapshot};
use super::{
    DiscoveryMetrics, DiscoveryOptions, EndpointSource, SERVICE_INDEX, SERVICE_NAME_LABEL,
    WatchScope, persist,
};
use crate::client::Client;
use crate::informer::{HandlerFns, HandlerId, Informer, InformerFactory};
use crate::model::{
    EndpointSlice, Endpoints, Object, ObjectMeta, PartialObjectMetadata, Pod, Resource, Service,
};
use crate::store::Ref;

/// `(namespace, service)`.
pub(crate) type ServiceKey = (String, String);

/// One `(namespace, service, port)`: the latest snapshot, as a watch channel.
pub(crate) struct Cell {
    namespace: String,
    service: String,
    port: String,
    hash: u64,
    tx: watch::Sender<Arc<Snapshot>>,
}

impl Cell {
    pub(crate) fn current(&self) -> Arc<Snapshot> {
        self.tx.borrow().clone()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.tx.subscribe()
    }

    fn is(&self, namespace: &str, service: &str, port: &str) -> bool {
        self.namespace == namespace && self.service == service && self.port == port
    }

    fn has_subscribers(&self) -> bool {
        self.tx.receiver_count() > 0
    }
}

/// A Service somebody asked about, and its cells.
struct ServiceEntry {
    namespace: String,
    name: String,
    /// Creation order among entries: eviction forgets the oldest first.
    created: u64,
    state: Mutex<ServiceInner>,
}

struct ServiceInner {
    revision: u64,
    /// In creation order.
    cells: Vec<Arc<Cell>>,
    /// Pods (`namespace/name`) the last computation referenced, to keep `pod_refs` exact.
    pods: BTreeSet<String>,
    /// Set (under this lock) when the entry was forgotten: a caller that fetched the entry just
    /// before must start over instead of adding a cell nobody would recompute.
    evicted: bool,
}

impl ServiceEntry {
    fn has_subscribers(&self) -> bool {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .cells
            .iter()
            .any(|c| c.has_subscribers())
    }
}

/// The informers of one namespace (or of the cluster) and their sync progress.
struct Watch {
    /// Creation order among watches: eviction forgets the oldest first.
    created: u64,
    /// Set when the namespace was forgotten (past `max_watched_namespaces`): its first
    /// computation never comes.
    evicted: AtomicBool,
    /// Wakes the first-computation task when `evicted` is set.
    evicted_notify: Notify,
    /// Removes this cache's handlers from the informers (run on eviction).
    unregister: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    slices: Option<Informer<EndpointSlice>>,
    endpoints: Option<Informer<Endpoints>>,
    services: Option<Informer<Service>>,
    pods: Option<Informer<PartialObjectMetadata>>,
    /// Our handler on each informer (slices, endpoints, services, pods), set by `wire`.
    handlers: OnceLock<[Option<HandlerId>; 4]>,
    /// Set once every informer synced, just before the first full computation: from then on
    /// handlers recompute.
    ///
    /// Ordering (`SeqCst` at every use): a handler writes its store, then loads this flag; the
    /// computation stores the flag, then reads the stores. Either the handler sees the flag (and
    /// recomputes) or the computation sees the handler's write; no event falls between. The
    /// stores' own locks already give that (a handler's unlock and the computation's lock are
    /// ordered one way or the other), so Release/Acquire would do; `SeqCst` makes the argument
    /// hold without leaning on the locks, and costs nothing here (once per namespace, and one
    /// load per event).
    computing: AtomicBool,
    /// Set after the first full computation. `SeqCst`, like `computing`: a waiter loads it after
    /// registering with `computed_notify`, the computation stores it before notifying; Release/
    /// Acquire would do, `SeqCst` keeps the pairing obvious (not on a hot path).
    computed: AtomicBool,
    computed_notify: Notify,
}

impl Watch {
    /// Removes handler `id` from `inf` when this namespace is evicted.
    fn on_evict<T: Object + Clone>(&self, inf: &Informer<T>, id: HandlerId) {
        let inf = inf.clone();
        self.unregister
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::new(move || {
                inf.remove_handler(id);
            }));
    }

    /// Every informer synced and our handler on it has been handed its whole initial list. Not
    /// just the informers: the first computation reads the stores, and a handler still holding an
    /// initial add could see it cancelled by a delete (the queue drops an add never delivered)
    /// and never recompute the Service.
    fn has_synced(&self) -> bool {
        let ids = self.handlers.get().copied().unwrap_or_default();
        handler_synced_now(&self.slices, ids[0])
            && handler_synced_now(&self.endpoints, ids[1])
            && handler_synced_now(&self.services, ids[2])
            && handler_synced_now(&self.pods, ids[3])
    }

    /// Completes once [`has_synced`](Self::has_synced) (each informer wakes its waiter).
    async fn synced(&self) {
        let ids = self.handlers.get().copied().unwrap_or_default();
        handler_synced(&self.slices, ids[0]).await;
        handler_synced(&self.endpoints, ids[1]).await;
        handler_synced(&self.services, ids[2]).await;
        handler_synced(&self.pods, ids[3]).await;
    }
}

fn handler_synced_now<T: Object + Clone>(inf: &Option<Informer<T>>, id: Option<HandlerId>) -> bool {
    match (inf, id) {
        (Some(inf), Some(id)) => inf.handler_has_synced(id),
        (Some(inf), None) => inf.has_synced(),
        (None, _) => true,
    }
}

async fn handler_synced<T: Object + Clone>(inf: &Option<Informer<T>>, id: Option<HandlerId>) {
    match (inf, id) {
        (Some(inf), Some(id)) => inf.handler_synced(id).await,
        (Some(inf), None) => inf.synced().await,
        (None, _) => {}
    }
}

pub(crate) struct Cache {
    pub(crate) client: Client,
    factory: Arc<InformerFactory>,
    /// Nobody else holds the factory (`Discovery::new`): evicting a namespace also makes the
    /// factory forget, and so stop, its informers.
    owns_factory: bool,
    pub(crate) options: DiscoveryOptions,
    runtime: tokio::runtime::Handle,
    me: Weak<Cache>,
    hasher: RandomState,
    /// The read path: every cell, by `(namespace, service, port)`.
    cells: RwLock<HashTable<Arc<Cell>>>,
    services: Mutex<HashMap<ServiceKey, Arc<ServiceEntry>>>,
    /// By namespace (`None` cluster-wide).
    watches: Mutex<HashMap<Option<String>, Arc<Watch>>>,
    /// Slice key -> observation sequence of its latest add/update (merge rule 5).
    slice_seq: Mutex<HashMap<String, u64>>,
    next_seq: AtomicU64,
    /// Pod `namespace/name` -> Services whose endpoints target it.
    pod_refs: Mutex<HashMap<String, HashSet<ServiceKey>>>,
    /// Last-known-good snapshots loaded at start, by `(namespace, service, port)`.
    pub(crate) stale: Mutex<HashMap<(String, String, String), Snapshot>>,
    pub(crate) fetches: Fetches,
    pub(crate) dirty: AtomicBool,
    recomputes: AtomicU64,
    published: AtomicU64,
    pub(crate) apiserver_reads: AtomicU64,
    pub(crate) fetches_shared: AtomicU64,
}

impl Cache {
    pub(crate) fn new(
        client: Client,
        factory: Arc<InformerFactory>,
        options: DiscoveryOptions,
    ) -> Arc<Cache> {
        let runtime = tokio::runtime::Handle::current();
        let stale = options
            .last_known_good
            .as_deref()
            .map(persist::load)
            .unwrap_or_default();
        // A count of one: only this cache can reach the factory (nobody can ask it for informers).
        let owns_factory = Arc::strong_count(&factory) == 1;
        let cache = Arc::new_cyclic(|me| Cache {
            client,
            factory,
            owns_factory,
            fetches: Fetches::new(options.max_concurrent_fetches),
            options,
            runtime,
            me: me.clone(),
            hasher: RandomState::new(),
            cells: RwLock::new(HashTable::new()),
            services: Mutex::new(HashMap::new()),
            watches: Mutex::new(HashMap::new()),
            slice_seq: Mutex::new(HashMap::new()),
            next_seq: AtomicU64::new(1),
            pod_refs: Mutex::new(HashMap::new()),
            stale: Mutex::new(stale),
            dirty: AtomicBool::new(false),
            recomputes: AtomicU64::new(0),
            published: AtomicU64::new(0),
            apiserver_reads: AtomicU64::new(0),
            fetches_shared: AtomicU64::new(0),
        });
        if cache.options.last_known_good.is_some() {
            persist::spawn_saver(&cache);
        }
        cache
    }

    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.runtime
    }

    fn hash(&self, namespace: &str, service: &str, port: &str) -> u64 {
        self.hasher.hash_one((namespace, service, port))
    }

    /// The read path: a hash lookup and an `Arc` clone once the cell exists.
    pub(crate) fn instances(&self, namespace: &str, service: &str, port: &str) -> Arc<Snapshot> {
        let hash = self.hash(namespace, service, port);
        if let Some(cell) = self
            .cells
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .find(hash, |c| c.is(namespace, service, port))
        {
            return cell.current();
        }
        self.cell(namespace, service, port).current()
    }

    /// The cell of a Service port, created (and its namespace's informers started) on first use.
    pub(crate) fn cell(&self, namespace: &str, service: &str, port: &str) -> Arc<Cell> {
        let hash = self.hash(namespace, service, port);
        if let Some(cell) = self
            .cells
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .find(hash, |c| c.is(namespace, service, port))
        {
            return cell.clone();
        }
        let watch = self.watch(namespace);
        let entry = self.service_entry(namespace, service);
        let mut inner = entry.state.lock().unwrap_or_else(PoisonError::into_inner);
        if inner.evicted {
            // Forgotten between the lookup and the lock: a new entry is needed.
            drop(inner);
            return self.cell(namespace, service, port);
        }
        // Relaxed: `forget_namespace` sets the flag before it takes the services lock to remove
        // the namespace's entries, and `service_entry` took that lock after or before it. After:
        // the lock orders the flag before this load, and this entry (made after the namespace
        // was forgotten) would have no informers, so it is forgotten too. Before: the entry was
        // removed and marked `evicted` above.
        if watch.evicted.load(Ordering::Relaxed) {
            drop(inner);
            self.forget_entry(&entry);
            return self.cell(namespace, service, port);
        }
        if let Some(cell) = inner.cells.iter().find(|c| c.port == port) {
            return cell.clone();
        }
        if inner.cells.len() >= self.options.max_ports_per_service.max(1) {
            let victim = inner
                .cells
                .iter()
                .position(|c| !c.has_subscribers())
                .unwrap_or(0);
            let gone = inner.cells.remove(victim);
            self.forget_cells(std::slice::from_ref(&gone));
        }
        let key = (namespace.to_owned(), service.to_owned(), port.to_owned());
        let initial = match self
            .stale
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key)
        {
            Some(mut stale) => {
                inner.revision = inner.revision.max(stale.revision);
                stale.revision = inner.revision;
                stale
            }
            None => Snapshot::not_synced(namespace, service, port),
        };
        let cell = Arc::new(Cell {
            namespace: key.0,
            service: key.1,
            port: key.2,
            hash,
            tx: watch::Sender::new(Arc::new(initial)),
        });
        inner.cells.push(cell.clone());
        self.cells
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert_unique(hash, cell.clone(), |c| c.hash);
        // SeqCst: see `Watch::computing`.
        if watch.computing.load(Ordering::SeqCst) {
            self.recompute_locked(&entry, &mut inner, &watch);
        }
        cell
    }

    /// The entry of a Service, created on first use; creating one past
    /// [`max_tracked_services`](super::DiscoveryOptions::max_tracked_services) forgets the oldest
    /// entry without subscribers (else the oldest).
    fn service_entry(&self, namespace: &str, service: &str) -> Arc<ServiceEntry> {
        let key = (namespace.to_owned(), service.to_owned());
        let (entry, victim) = {
            let mut services = self.services.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(e) = services.get(&key) {
                return e.clone();
            }
            let victim = if services.len() >= self.options.max_tracked_services.max(1) {
                let oldest = |evictable: &dyn Fn(&ServiceEntry) -> bool| {
                    services
                        .iter()
                        .filter(|(_, e)| evictable(e))
                        .min_by_key(|(_, e)| e.created)
                        .map(|(k, _)| k.clone())
                };
                let key = oldest(&|e| !e.has_subscribers()).or_else(|| oldest(&|_| true));
                key.and_then(|k| services.remove(&k))
            } else {
                None
            };
            let entry = Arc::new(ServiceEntry {
                namespace: namespace.to_owned(),
                name: service.to_owned(),
                // Relaxed: only a unique, increasing number is needed (compared under this lock).
                created: self.next_seq.fetch_add(1, Ordering::Relaxed),
                state: Mutex::new(ServiceInner {
                    revision: 0,
                    cells: Vec::new(),
                    pods: BTreeSet::new(),
                    evicted: false,
                }),
            });
            services.insert(key, entry.clone());
            (entry, victim)
        };
        if let Some(victim) = victim {
            // After the services lock is released (never a Service's lock inside it for long).
            self.forget_entry_state(&victim);
        }
        entry
    }

    /// Removes `entry` from the tracked Services (if it is still there) and forgets its state.
    fn forget_entry(&self, entry: &Arc<ServiceEntry>) {
        {
            let mut services = self.services.lock().unwrap_or_else(PoisonError::into_inner);
            let key = (entry.namespace.clone(), entry.name.clone());
            if services.get(&key).is_some_and(|e| Arc::ptr_eq(e, entry)) {
                services.remove(&key);
            }
        }
        self.forget_entry_state(entry);
    }

    /// Marks a Service entry that is no longer tracked as evicted and drops its cells (their
    /// subscriptions end) and Pod references.
    fn forget_entry_state(&self, entry: &ServiceEntry) {
        let mut inner = entry.state.lock().unwrap_or_else(PoisonError::into_inner);
        inner.evicted = true;
        let cells = std::mem::take(&mut inner.cells);
        self.forget_cells(&cells);
        let pods = std::mem::take(&mut inner.pods);
        self.update_pod_refs(&entry.namespace, &entry.name, &pods, &BTreeSet::new());
    }

    /// Removes cells from the read path. Their subscribers' streams end (the senders drop).
    fn forget_cells(&self, cells: &[Arc<Cell>]) {
        let mut table = self.cells.write().unwrap_or_else(PoisonError::into_inner);
        for cell in cells {
            if let Ok(found) = table.find_entry(cell.hash, |c| Arc::ptr_eq(c, cell)) {
                found.remove();
            }
        }
    }

    /// Namespaces with a Service somebody subscribed to.
    fn subscribed_namespaces(&self) -> HashSet<String> {
        let entries: Vec<Arc<ServiceEntry>> = self
            .services
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        entries
            .iter()
            .filter(|e| e.has_subscribers())
            .map(|e| e.namespace.clone())
            .collect()
    }

    /// Forgets an evicted namespace: its handlers, its Services (their subscriptions end), their
    /// cells and Pod references, its slice sequence numbers, and (when this cache owns the
    /// factory) its informers. Asking about the namespace again starts over.
    fn forget_namespace(&self, namespace: &str, watch: &Watch) {
        // Relaxed: a stop flag for the watch's first-computation task, read after the
        // notification below (whose release/acquire pair orders it); nothing else goes through it.
        watch.evicted.store(true, Ordering::Relaxed);
        watch.evicted_notify.notify_waiters();
        let unregister = std::mem::take(
            &mut *watch
                .unregister
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        for remove in unregister {
            remove();
        }
        let entries: Vec<Arc<ServiceEntry>> = {
            let mut services = self.services.lock().unwrap_or_else(PoisonError::into_inner);
            let keys: Vec<ServiceKey> = services
                .keys()
                .filter(|(ns, _)| ns == namespace)
                .cloned()
                .collect();
            keys.iter().filter_map(|k| services.remove(k)).collect()
        };
        for entry in entries {
            self.forget_entry_state(&entry);
        }
        let prefix = format!("{namespace}/");
        self.slice_seq
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|key, _| !key.starts_with(&prefix));
        if self.owns_factory {
            self.factory.forget_namespace(namespace);
        }
    }

    pub(crate) fn has_synced(&self, namespace: &str) -> bool {
        self.watch(namespace).has_synced()
    }

    /// Completes once the informers serving `namespace` have synced.
    pub(crate) async fn synced(&self, namespace: &str) {
        self.watch(namespace).synced().await
    }

    pub(crate) async fn wait_first_compute(
        &self,
        namespace: &str,
        deadline: tokio::time::Instant,
    ) -> bool {
        let watch = self.watch(namespace);
        loop {
            let notified = watch.computed_notify.notified();
            // SeqCst: see `Watch::computed`.
            if watch.computed.load(Ordering::SeqCst) {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                // SeqCst: see `Watch::computed`.
                return watch.computed.load(Ordering::SeqCst);
            }
        }
    }

    pub(crate) fn metrics(&self) -> DiscoveryMetrics {
        DiscoveryMetrics {
            tracked_ports: self
                .cells
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .len(),
            watched_namespaces: self
                .watches
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len(),
            // Relaxed: counters read for display; they publish no other memory.
            recomputes: self.recomputes.load(Ordering::Relaxed),
            published: self.published.load(Ordering::Relaxed),
            apiserver_reads: self.apiserver_reads.load(Ordering::Relaxed),
            fetches_shared: self.fetches_shared.load(Ordering::Relaxed),
        }
    }

    /// Every cell's current snapshot (for the last-known-good file).
    pub(crate) fn all_snapshots(&self) -> Vec<Arc<Snapshot>> {
        self.cells
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|c| c.current())
            .collect()
    }

    // -----------------------------------------------------------------------------------------
    // Informers

    fn scope_key(&self, namespace: &str) -> Option<String> {
        match self.options.scope {
            WatchScope::PerNamespace => Some(namespace.to_owned()),
            WatchScope::ClusterWide => None,
        }
    }

    /// The informers serving `namespace` if they exist; never creates them.
    fn current_watch(&self, namespace: &str) -> Option<Arc<Watch>> {
        self.watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&self.scope_key(namespace))
            .cloned()
    }

    /// The informers serving `namespace`, created, wired and started on first use; creating one
    /// past [`max_watched_namespaces`](super::DiscoveryOptions::max_watched_namespaces) forgets the
    /// oldest namespace without subscribers (else the oldest).
    fn watch(&self, namespace: &str) -> Arc<Watch> {
        let key = self.scope_key(namespace);
        if let Some(w) = self
            .watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return w.clone();
        }
        // Taken before the watches lock, which is never held with the services lock.
        let subscribed = self.subscribed_namespaces();
        let mut watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(w) = watches.get(&key) {
            return w.clone();
        }
        // Creating the informers spawns threads, which can fail (and panic) under resource limits:
        // catch that here, release the lock, then go on panicking, so that the map is not poisoned
        // and the next call tries again.
        let created = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.new_watch(key.as_deref())
        }));
        let watch = match created {
            Ok(watch) => watch,
            Err(panic) => {
                drop(watches);
                std::panic::resume_unwind(panic);
            }
        };
        let victim = if watches.len() >= self.options.max_watched_namespaces.max(1) {
            let oldest = |evictable: &dyn Fn(&str) -> bool| {
                watches
                    .iter()
                    .filter_map(|(k, w)| Some((k.as_deref()?, w)))
                    .filter(|(ns, _)| evictable(ns))
                    .min_by_key(|(_, w)| w.created)
                    .map(|(ns, _)| ns.to_owned())
            };
            let ns = oldest(&|ns| !subscribed.contains(ns)).or_else(|| oldest(&|_| true));
            ns.and_then(|ns| Some((ns.clone(), watches.remove(&Some(ns))?)))
        } else {
            None
        };
        watches.insert(key.clone(), watch.clone());
        drop(watches);
        if let Some((ns, victim)) = victim {
            self.forget_namespace(&ns, &victim);
        }
        let me = self.me.clone();
        let w = watch.clone();
        self.runtime.spawn(async move {
            // Synced, or evicted first (its informers may then never sync).
            let evicted = async {
                loop {
                    // Created before the check: a notification after it is not lost.
                    let notified = w.evicted_notify.notified();
                    // Relaxed: the flag is set before `notify_waiters`, whose release/acquire
                    // pair orders it before this load.
                    if w.evicted.load(Ordering::Relaxed) {
                        return;
                    }
                    notified.await;
                }
            };
            let (synced, evicted) = (pin!(w.synced()), pin!(evicted));
            if let Either::Right(_) = select(synced, evicted).await {
                return;
            }
            let Some(cache) = me.upgrade() else { return };
            // Before the full computation: events handled from now on recompute themselves, and
            // the ones handled before are already in the stores the computation reads.
            // SeqCst: see `Watch::computing`.
            w.computing.store(true, Ordering::SeqCst);
            let entries: Vec<Arc<ServiceEntry>> = {
                let services = cache
                    .services
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                services
                    .values()
                    .filter(|e| key.is_none() || key.as_deref() == Some(e.namespace.as_str()))
                    .cloned()
                    .collect()
            };
            for e in entries {
                cache.recompute(&e);
            }
            // SeqCst: see `Watch::computed`.
            w.computed.store(true, Ordering::SeqCst);
            w.computed_notify.notify_waiters();
        });
        watch
    }

    /// The informers of one namespace (`None`: all), wired to this cache and started.
    fn new_watch(&self, ns: Option<&str>) -> Arc<Watch> {
        let o = &self.options;
        let slices = (o.source == EndpointSource::EndpointSlices).then(|| {
            let inf: Informer<EndpointSlice> =
                self.factory
                    .informer_with(EndpointSlice::api_resource(), ns, None, None);
            // Already there when the factory is shared with another ServiceDiscovery: same function.
            let _ = inf.store().add_index(
                SERVICE_INDEX,
                Arc::new(|s: &EndpointSlice| {
                    s.metadata
                        .labels
                        .get(SERVICE_NAME_LABEL)
                        .map(|svc| vec![format!("{}/{svc}", s.metadata.namespace)])
                        .unwrap_or_default()
                }),
            );
            inf
        });
        let endpoints = (o.source == EndpointSource::Endpoints).then(|| {
            self.factory
                .informer_with(Endpoints::api_resource(), ns, None, None)
        });
        let services = o.watch_services.then(|| {
            self.factory
                .informer_with(Service::api_resource(), ns, None, None)
        });
        let pods = o.pod_metadata.then(|| {
            self.factory
                .informer_with::<PartialObjectMetadata>(Pod::api_resource(), ns, None, None)
        });
        let watch = Arc::new(Watch {
            // Relaxed: only a unique, increasing number is needed (compared under the watches lock).
            created: self.next_seq.fetch_add(1, Ordering::Relaxed),
            evicted: AtomicBool::new(false),
            evicted_notify: Notify::new(),
            unregister: Mutex::new(Vec::new()),
            slices,
            endpoints,
            services,
            pods,
            handlers: OnceLock::new(),
            computing: AtomicBool::new(false),
            computed: AtomicBool::new(false),
            computed_notify: Notify::new(),
        });
        let handlers = self.wire(&watch);
        let _ = watch.handlers.set(handlers);
        watch
    }

    /// Registers the handlers that recompute Services and starts the informers; returns the
    /// handlers' ids (slices, endpoints, services, pods).
    fn wire(&self, w: &Watch) -> [Option<HandlerId>; 4] {
        let rt = &self.runtime;
        let mut ids = [None; 4];
        if let Some(inf) = &w.slices {
            let (a, u, d) = (self.me.clone(), self.me.clone(), self.me.clone());
            let id = inf.add_handler(
                HandlerFns::new()
                    .on_add(move |s: &Arc<EndpointSlice>, _| {
                        if let Some(c) = a.upgrade() {
                            c.slice_changed(s, true);
                        }
                    })
                    .on_update(move |old: &Arc<EndpointSlice>, new: &Arc<EndpointSlice>| {
                        if let Some(c) = u.upgrade() {
                            if service_of(old) != service_of(new) {
                                c.slice_changed(old, false);
                            }
                            c.slice_changed(new, true);
                        }
                    })
                    .on_delete(move |s| {
                        if let Some(c) = d.upgrade() {
                            c.slice_changed(s.object(), false);
                        }
                    }),
            );
            ids[0] = Some(id);
            w.on_evict(inf, id);
            inf.start_on(rt);
        }
        if let Some(inf) = &w.endpoints {
            let id = notify_on_change(
                inf,
                &self.me,
                |_, _| false,
                |c, m| c.service_changed(&m.namespace, &m.name),
            );
            ids[1] = Some(id);
            w.on_evict(inf, id);
            inf.start_on(rt);
        }
        if let Some(inf) = &w.services {
            // Only the ports of a Service enter its instances.
            let id = notify_on_change(
                inf,
                &self.me,
                |old: &Service, new| old.spec.ports == new.spec.ports,
                |c, m| c.service_changed(&m.namespace, &m.name),
            );
            ids[2] = Some(id);
            w.on_evict(inf, id);
            inf.start_on(rt);
        }
        if let Some(inf) = &w.pods {
            // Only the labels and annotations of a Pod enter its instances' metadata.
            let id = notify_on_change(
                inf,
                &self.me,
                |old: &PartialObjectMetadata, new| {
                    old.metadata.labels == new.metadata.labels
                        && old.metadata.annotations == new.metadata.annotations
                },
                |c, m| c.pod_changed(m.key()),
            );
            ids[3] = Some(id);
            w.on_evict(inf, id);
            inf.start_on(rt);
        }
        ids
    }

    fn slice_changed(&self, slice: &EndpointSlice, present: bool) {
        let key = slice.metadata.key();
        {
            let mut seqs = self
                .slice_seq
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if present {
                // Relaxed: only a unique, increasing number is needed (compared under `slice_seq`'s lock).
                seqs.insert(key, self.next_seq.fetch_add(1, Ordering::Relaxed));
            } else {
                seqs.remove(&key);
            }
        }
        if let Some(svc) = service_of(slice) {
            self.service_changed(&slice.metadata.namespace, svc);
        }
    }

    fn pod_changed(&self, pod_key: String) {
        let services: Vec<ServiceKey> = match self
            .pod_refs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&pod_key)
        {
            Some(s) => s.iter().cloned().collect(),
            None => return,
        };
        for (ns, svc) in services {
            self.service_changed(&ns, &svc);
        }
    }

    /// Recomputes a tracked Service (nothing for Services nobody asked about).
    fn service_changed(&self, namespace: &str, service: &str) {
        let entry = self
            .services
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(namespace.to_owned(), service.to_owned()))
            .cloned();
        if let Some(entry) = entry {
            self.recompute(&entry);
        }
    }

    // -----------------------------------------------------------------------------------------
    // Computation

    fn recompute(&self, entry: &ServiceEntry) {
        // Never `self.watch`: a handler or the first computation of a namespace that was just
        // forgotten must not start its informers again (and evict a namespace in use for it).
        let Some(watch) = self.current_watch(&entry.namespace) else {
            return;
        };
        // SeqCst: see `Watch::computing`.
        if !watch.computing.load(Ordering::SeqCst) {
            return;
        }
        let mut inner = entry.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.recompute_locked(entry, &mut inner, &watch);
    }

    /// Recomputes every cell of a Service from the informer stores and publishes the ones whose
    /// content changed, all with one new revision. Runs under the Service's lock, so revisions are
    /// published in the order they were computed.
    fn recompute_locked(&self, entry: &ServiceEntry, inner: &mut ServiceInner, watch: &Watch) {
        // Relaxed: a counter read for display; it publishes no other memory.
        self.recomputes.fetch_add(1, Ordering::Relaxed);
        let (ns, name) = (entry.namespace.as_str(), entry.name.as_str());
        // An `Arc`, not a `Ref`: the merge below runs over every cell, and a `Ref` held that long
        // would keep whatever its shard drops meanwhile (see `store::Ref`).
        let service = watch
            .services
            .as_ref()
            .map(|i| i.store().get(ns, name).map(|s| Ref::to_arc(&s)));
        let source = self.read_source(watch, ns, name);
        let pods = watch.pods.as_ref().map(|p| p.store().clone());
        let pod_lookup = |pns: &str, pname: &str| -> Option<Arc<InstanceMetadata>> {
            let store = pods.as_ref()?;
            store
                .get(pns, pname)
                .map(|p| Arc::new(merge::instance_metadata(&p)))
        };
        let mut updates = Vec::new();
        let mut referenced = BTreeSet::new();
        for cell in &inner.cells {
            let ctx = MergeContext {
                options: &self.options,
                namespace: ns,
                port_name: &cell.port,
                service: service.as_ref().and_then(|s| s.as_deref()),
                pod: &pod_lookup,
            };
            let merged = compute(&source, service.as_ref().map(|s| s.is_some()), &ctx);
            referenced.extend(merged.instances.iter().filter_map(|i| i.pod.clone()));
            let current = cell.current();
            let candidate = snapshot(ns, name, &cell.port, 0, merged, Freshness::Live);
            if !candidate.same_content(&current) || current.freshness != Freshness::Live {
                updates.push((cell.clone(), candidate));
            }
        }
        if self.options.pod_metadata {
            // Every Pod the slices target, including those not cached yet (so their arrival
            // triggers a recomputation).
            referenced.extend(source.target_pods(ns));
            self.update_pod_refs(ns, name, &inner.pods, &referenced);
            inner.pods = referenced;
        }
        if updates.is_empty() {
            return;
        }
        inner.revision += 1;
        for (cell, mut snap) in updates {
            snap.revision = inner.revision;
            cell.tx.send_replace(Arc::new(snap));
            // Relaxed: a counter read for display; it publishes no other memory.
            self.published.fetch_add(1, Ordering::Relaxed);
        }
        // Relaxed: a hint for the saver, which reads the cells through their channels; a late flag
        // only delays a save by one interval.
        self.dirty.store(true, Ordering::Relaxed);
    }

    /// The endpoint objects of a Service, from the informer stores.
    fn read_source(&self, watch: &Watch, ns: &str, name: &str) -> Source {
        if let Some(inf) = &watch.endpoints {
            let endpoints = inf.store().get(ns, name);
            return Source::Endpoints(endpoints.map(|e| Ref::to_arc(&e)));
        }
        let Some(inf) = &watch.slices else {
            return Source::Slices(Vec::new());
        };
        let slices = inf
            .store()
            .by_index(SERVICE_INDEX, &format!("{ns}/{name}"))
            .unwrap_or_default();
        let seqs = self
            .slice_seq
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Source::Slices(
            slices
                .into_iter()
                .map(|slice| {
                    let seq = seqs.get(&slice.metadata.key()).copied().unwrap_or(0);
                    ObservedSlice { slice, seq }
                })
                .collect(),
        )
    }

    fn update_pod_refs(
        &self,
        ns: &str,
        name: &str,
        before: &BTreeSet<String>,
        after: &BTreeSet<String>,
    ) {
        let key = (ns.to_owned(), name.to_owned());
        let mut refs = self.pod_refs.lock().unwrap_or_else(PoisonError::into_inner);
        for gone in before.difference(after) {
            if let Some(set) = refs.get_mut(gone) {
                set.remove(&key);
                if set.is_empty() {
                    refs.remove(gone);
                }
            }
        }
        for new in after.difference(before) {
            refs.entry(new.clone()).or_default().insert(key.clone());
        }
    }
}

/// The endpoint objects of one Service.
pub(crate) enum Source {
    Slices(Vec<ObservedSlice>),
    Endpoints(Option<Arc<Endpoints>>),
}

impl Source {
    /// `namespace/name` of every Pod an endpoint targets.
    fn target_pods(&self, ns: &str) -> Vec<String> {
        let refs: Vec<&crate::model::ObjectReference> = match self {
            Source::Slices(slices) => slices
                .iter()
                .flat_map(|s| s.slice.endpoints.iter())
                .filter_map(|e| e.target_ref.as_ref())
                .collect(),
            Source::Endpoints(e) => e
                .iter()
                .flat_map(|e| e.subsets.iter())
                .flat_map(|s| s.addresses.iter().chain(s.not_ready_addresses.iter()))
                .filter_map(|a| a.target_ref.as_ref())
                .collect(),
        };
        refs.into_iter()
            .filter(|r| (r.kind.is_empty() || r.kind == "Pod") && !r.name.is_empty())
            .map(|r| {
                let pns = if r.namespace.is_empty() {
                    ns
                } else {
                    &r.namespace
                };
                format!("{pns}/{}", r.name)
            })
            .collect()
    }
}

/// The snapshot content for one port. `service_exists` is `None` when Services are not watched:
/// then a Service without any slice (or Endpoints object) counts as absent, since the controllers
/// keep one for every Service.
pub(crate) fn compute(
    source: &Source,
    service_exists: Option<bool>,
    ctx: &MergeContext<'_>,
) -> Merged {
    let absent = match (service_exists, source) {
        (Some(exists), _) => !exists,
        (None, Source::Slices(s)) => s.is_empty(),
        (None, Source::Endpoints(e)) => e.is_none(),
    };
    if absent {
        return Merged {
            state: ServiceState::ServiceAbsent,
            instances: Vec::new(),
            terminating_fallback: false,
            topology: Default::default(),
            truncated: false,
        };
    }
    match source {
        Source::Slices(slices) => merge::from_slices(slices, ctx),
        Source::Endpoints(Some(e)) => merge::from_endpoints(e, ctx),
        Source::Endpoints(None) => merge::from_slices(&[], ctx),
    }
}

pub(crate) fn snapshot(
    ns: &str,
    service: &str,
    port: &str,
    revision: u64,
    m: Merged,
    freshness: Freshness,
) -> Snapshot {
    Snapshot {
        namespace: ns.to_owned(),
        service: service.to_owned(),
        port_name: port.to_owned(),
        revision,
        state: m.state,
        instances: m.instances,
        terminating_fallback: m.terminating_fallback,
        topology: m.topology,
        truncated: m.truncated,
        freshness,
    }
}

/// Registers a handler on `inf` that calls `changed(cache, metadata)` for every add and delete,
/// and for every update unless `unchanged(old, new)`: the Services, Endpoints and Pods handlers
/// differ only in those two functions.
fn notify_on_change<T: Object + Clone>(
    inf: &Informer<T>,
    me: &Weak<Cache>,
    unchanged: fn(&T, &T) -> bool,
    changed: fn(&Cache, &ObjectMeta),
) -> HandlerId {
    let me = me.clone();
    let call = Arc::new(move |m: &ObjectMeta| {
        if let Some(c) = me.upgrade() {
            changed(&c, m);
        }
    });
    let (on_add, on_update, on_delete) = (call.clone(), call.clone(), call);
    inf.add_handler(
        HandlerFns::new()
            .on_add(move |o: &Arc<T>, _| on_add(o.meta()))
            .on_update(move |old: &Arc<T>, new: &Arc<T>| {
                if !unchanged(old, new) {
                    on_update(new.meta());
                }
            })
            .on_delete(move |d| on_delete(d.object().meta())),
    )
}

fn service_of(slice: &EndpointSlice) -> Option<&str> {
    slice.metadata.labels.get(SERVICE_NAME_LABEL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::ServiceState;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_under_its_locks_does_not_break_discovery() {
        // Nothing listens there: the informers just retry in the background.
        let client =
            Client::new(crate::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
        let factory = Arc::new(InformerFactory::new(client.clone()));
        let cache = Cache::new(client, factory, DiscoveryOptions::default());
        // As a thread spawn failing while they are held would: every lock poisoned.
        let c = cache.clone();
        let _ = std::thread::spawn(move || {
            let _watches = c.watches.lock();
            let _services = c.services.lock();
            let _cells = c.cells.write();
            panic!("cannot spawn a thread");
        })
        .join();
        assert!(cache.watches.is_poisoned() && cache.services.is_poisoned());
        let snapshot = cache.instances("ns", "svc", "http");
        assert_eq!(snapshot.state, ServiceState::NotSynced);
        assert_eq!(cache.metrics().tracked_ports, 1);
    }

    /// A recomputation that comes late for a forgotten namespace (its first computation, or a
    /// handler, still running) must not start that namespace again and evict one in use. It did,
    /// and left a cell behind that no namespace bound (CI run of stop 19).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_late_recomputation_does_not_revive_a_forgotten_namespace() {
        let client =
            Client::new(crate::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
        let factory = Arc::new(InformerFactory::new(client.clone()));
        let options = DiscoveryOptions {
            max_watched_namespaces: 1,
            ..DiscoveryOptions::default()
        };
        let cache = Cache::new(client, factory, options);
        cache.instances("ns-0", "web", "http");
        let late = cache.services.lock().unwrap()[&("ns-0".to_owned(), "web".to_owned())].clone();
        cache.instances("ns-1", "web", "http");
        assert_eq!(cache.metrics().tracked_ports, 1);

        cache.recompute(&late);
        let m = cache.metrics();
        assert_eq!((m.watched_namespaces, m.tracked_ports), (1, 1), "{m:?}");
        assert!(cache.current_watch("ns-1").is_some());
    }
}
