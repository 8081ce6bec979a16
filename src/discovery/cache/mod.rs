//! The cache behind [`ServiceDiscovery`](super::ServiceDiscovery): one cell (a latest-value
//! channel of snapshots) per `(namespace, service, port)` somebody asked about, the informers of
//! each namespace asked about, and the recomputation of a Service's cells when its objects change.
//!
//! By job:
//! - this file: the cache's state, the read path ([`Cache::instances`], [`Cache::cell`]), the
//!   counters and what the last-known-good file is written from;
//! - `services.rs`: the tracked Services and their bounds (which one is forgotten, and how);
//! - `namespaces.rs`: the informers per namespace ([`Watch`]), their bound, the sync waits and the
//!   first full computation of a namespace;
//! - `recompute.rs`: what the informers' handlers report ([`Changes`]) and the recomputation of a
//!   Service's cells from the informers' stores.
//!
//! # Invariants
//! - **Lock order**: the `services` map, then one Service's `state`, then any of `cells`,
//!   `pod_refs`, `slice_seq` (each taken alone, never two of them). The `watches` map is never
//!   held with the `services` map; handlers take the map only to find their Service and release it
//!   before locking the Service. The stale snapshots' lock is taken alone, under a Service's state.
//! - **Revisions** of a Service's cells increase on every content change and are published under
//!   the Service's lock, so in the order they were computed.
//! - **A forgotten Service** (`ServiceInner::evicted`) is never given a cell again: whoever finds
//!   it evicted after taking its lock starts over with a new entry.
//! - **A forgotten namespace** never starts again from a recomputation: only the read path
//!   (`cell`, `has_synced`, `synced`) creates a namespace's informers (`watch`); handlers and the
//!   first computation use `current_watch`.
//! - **A panic does not take discovery down**: every lock is taken with
//!   `PoisonError::into_inner` (a thread spawn failing while one is held leaves it usable), and
//!   creating informers, which can panic, runs under the `watches` map's lock only, which it
//!   releases before the panic goes on.
//! - Atomics: `next_seq` only hands out unique, increasing numbers and `dirty` is a hint for the
//!   saver (both `Relaxed`); `recomputes` and `published` are counters; the flags of a namespace
//!   are argued at [`Watch`].

mod namespaces;
mod recompute;
mod services;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};

use hashbrown::HashTable;
use tokio::sync::watch;

use super::informers::Watch;
use super::persist::{self, Due, StaleSnapshots};
use super::snapshot::Snapshot;
use super::{DiscoveryMetrics, DiscoveryOptions};
use crate::client::Client;
use crate::informer::InformerFactory;

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
pub(crate) struct ServiceEntry {
    namespace: String,
    name: String,
    /// Creation order among entries: eviction forgets the oldest first.
    created: u64,
    state: Mutex<ServiceInner>,
}

pub(crate) struct ServiceInner {
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

/// See the module docs.
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
    /// Last-known-good snapshots, each handed to its cell when the cell is made.
    stale: StaleSnapshots,
    /// A snapshot was published since the last save of the last-known-good file.
    dirty: AtomicBool,
    recomputes: AtomicU64,
    published: AtomicU64,
}

impl Cache {
    pub(crate) fn new(
        client: Client,
        factory: Arc<InformerFactory>,
        options: DiscoveryOptions,
    ) -> Arc<Cache> {
        let runtime = tokio::runtime::Handle::current();
        let stale = StaleSnapshots::load(options.last_known_good.as_deref());
        // A count of one: only this cache can reach the factory (nobody can ask it for informers).
        let owns_factory = Arc::strong_count(&factory) == 1;
        let cache = Arc::new_cyclic(|me| Cache {
            client,
            factory,
            owns_factory,
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
            stale,
            dirty: AtomicBool::new(false),
            recomputes: AtomicU64::new(0),
            published: AtomicU64::new(0),
        });
        if let Some(path) = &cache.options.last_known_good {
            let weak = Arc::downgrade(&cache);
            let poll_weak = weak.clone();
            let poll = move || match poll_weak.upgrade() {
                None => Due::Gone,
                // Relaxed: a hint (see `dirty`).
                Some(cache) if !cache.dirty.load(Ordering::Relaxed) => Due::Unchanged,
                Some(cache) => Due::Save(cache.snapshots_to_save()),
            };
            let weak = Arc::downgrade(&cache);
            let failed = move || {
                if let Some(cache) = weak.upgrade() {
                    // Relaxed: a hint (see `dirty`).
                    cache.dirty.store(true, Ordering::Relaxed);
                }
            };
            let period = cache.options.persist_interval;
            persist::spawn_saver(&cache.runtime, path.clone(), period, poll, failed);
        }
        cache
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
        let initial = match self.stale.take(&key) {
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

    pub(crate) fn metrics(&self) -> DiscoveryMetrics {
        let (watched_namespaces, services_forbidden) = {
            let watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
            let forbidden = watches
                .iter()
                .filter_map(|(ns, w)| {
                    let message = w.services_forbidden()?;
                    Some((ns.clone().unwrap_or_default(), message.to_owned()))
                })
                .collect();
            (watches.len(), forbidden)
        };
        DiscoveryMetrics {
            tracked_ports: self
                .cells
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .len(),
            watched_namespaces,
            services_forbidden,
            // Relaxed: counters read for display; they publish no other memory.
            recomputes: self.recomputes.load(Ordering::Relaxed),
            published: self.published.load(Ordering::Relaxed),
            // The cache-miss path's counters are the fallback's.
            apiserver_reads: 0,
            fetches_shared: 0,
        }
    }

    /// Every cell's current snapshot, for the last-known-good file; clears `dirty` first, so a
    /// change published meanwhile is saved next time.
    fn snapshots_to_save(&self) -> Vec<Arc<Snapshot>> {
        // Relaxed: a hint (see `dirty`).
        self.dirty.store(false, Ordering::Relaxed);
        self.cells
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|c| c.current())
            .collect()
    }

    /// Writes the last-known-good file now, on this thread (no-op without a path). A failed
    /// write leaves the cache marked changed, so the periodic saver tries again.
    pub(crate) fn persist_now(&self) -> std::io::Result<()> {
        let Some(path) = &self.options.last_known_good else {
            return Ok(());
        };
        let saved = persist::save(path, &self.snapshots_to_save());
        if saved.is_err() {
            // Relaxed: a hint (see `dirty`).
            self.dirty.store(true, Ordering::Relaxed);
        }
        saved
    }
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
