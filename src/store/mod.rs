//! The local cache: a sharded, indexed map from key (`namespace/name`, or `name` for cluster-scoped
//! objects) to `Arc<T>`.
//!
//! # Reading
//! An informer hands out a read-only [`Store`] ([`Informer::store`](crate::Informer::store)); its
//! pipeline is the only writer. Lookups take no network round trip: [`Store::get`] by namespace and
//! name borrows the object (a [`Ref`], which writes nothing to it); [`Store::list`],
//! [`Store::list_namespace`], [`Store::list_selected`] by label selector, and [`Store::by_index`]
//! for the indexes added with [`Store::add_index`] return `Arc`s. [`Writer`] is the write side, for
//! tests and custom pipelines.
//!
//! ```
//! use std::sync::Arc;
//! use informer::{ConfigMap, store::Writer};
//!
//! let writer = Writer::<ConfigMap>::new();
//! let mut cm = ConfigMap::default();
//! (cm.metadata.namespace, cm.metadata.name) = ("default".into(), "app".into());
//! writer.insert(Arc::new(cm));
//! let store = writer.reader(); // what an informer hands out: reads only
//! assert!(store.get("default", "app").is_some());
//! assert_eq!(store.list_namespace("default").len(), 1);
//! ```
//!
//! # Design
//! - **Shards.** 64 cache-line-padded `RwLock<HashMap>`s. A reader locks one shard for one lookup, so
//!   readers on different shards never touch the same cache line and a writer blocks 1/64th of the
//!   readers, briefly.
//! - **Allocation-free lookups.** [`Store::get`] takes a borrowed `(namespace, name)` and queries
//!   the shard's `hashbrown::HashTable` with a precomputed hash and an equality closure (`key.rs`).
//!   The key's hash (a fast keyed hash, seeded per store so crafted names cannot be precomputed to
//!   collide) is computed once per lookup and reused by the shard's map.
//! - **Lookups that do not write to the object.** [`Store::get`] returns a [`Ref`]: the lookup
//!   writes the object's address into a hazard slot of its thread's, and a writer that removes an
//!   object a slot holds keeps it until the `Ref` has gone (`shard.rs`, `hazard.rs`). An `Arc`
//!   clone's locked increment would land on the object's own cache line, cold in a large store,
//!   and cost more than the rest of the lookup; a lookup makes two locked instructions, the
//!   shard lock's, as client-go's does.
//! - **Indexes.** All indexes live behind one `RwLock`. Each bucket (index value) maps key to object,
//!   in key order, so [`Store::by_index`] reads the index alone and [`Store::index_keys`] comes out
//!   sorted. The namespace index ([`NAMESPACE_INDEX`]) is built in. Empty buckets are removed (I5).
//!
//! # Consistency
//! A write takes the index lock, then the shard lock (always in that order, so writers and
//! [`Store::add_index`] cannot deadlock), changes the map, releases the shard (so readers of the
//! shard do not wait for index work), updates the indexes and releases the index lock. Every read
//! takes one of the two locks, so it sees a write whole or not at all; and reads never go back in
//! time: once a `get` saw a write, the writer already holds the index lock, so a later index read
//! waits for the index update; once an index read saw it, the write is complete. Concurrent writers
//! are serialised by the index lock, so map and indexes apply them in the same order. Reads of the
//! whole store (`list`, `keys`, `list_selected`) read-lock every shard, in order, before they read
//! any, so each sees one moment of the store; while one runs, a write waits for it, and a lookup
//! on the shard that write waits for waits too (std's lock lets a waiting writer go first).
//!
//! A batch ([`Writer::apply_all`], what an informer does with a relist) takes the index lock, then
//! every shard's write lock in the same order, changes the maps, releases the shards and updates
//! the indexes: a `get` waits for it and sees all of it, a whole-store read sees it whole or not at
//! all, and index reads wait for the index lock. So no reader sees half of a relist.

mod hazard;
mod key;
mod selector;
mod shard;
mod writer;

use crate::model::Metadata;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

use crate::error::panic_message;
use crate::fifo::{DeletedObject, Delta, KnownObjects};
use crate::key_hash::{KeyHasher, hash_parts};
use crate::model::Object;
use key::{StoreKey, split_key};

pub use selector::{LabelSelector, Requirement, SelectorParseError};
pub use shard::Ref;
use shard::{Hazards, Shard};
pub use writer::Writer;

/// Name of the built-in index from namespace to objects (client-go's `NamespaceIndex`). Cluster-scoped
/// objects are indexed under `""` (I9).
pub const NAMESPACE_INDEX: &str = "namespace";

/// Number of shards; a power of two, so the shard is a mask of the hash.
const SHARDS: usize = 64;

/// A user index function: the index values of an object (zero or more).
///
/// A panic in it is caught: the object is then left out of that index, the panic is counted
/// ([`Store::index_panics`]), logged, and passed to the hook set with [`Store::on_index_panic`].
pub type IndexFn<T> = Arc<dyn Fn(&T) -> Vec<String> + Send + Sync>;

/// Told of every caught index-function panic: `(index name, object key, panic message)`. Called
/// after the store's locks are released, so it may read the store.
pub type IndexPanicHook = Arc<dyn Fn(&str, &str, &str) + Send + Sync>;

/// Caught index-function panics: a counter and the hook to tell.
#[derive(Default)]
struct IndexPanics {
    count: AtomicU64,
    hook: Mutex<Option<IndexPanicHook>>,
}

/// One caught panic, reported once the locks are released: (index, key, message).
type CaughtPanic = (String, String, String);

/// Errors of the index API, with client-go's messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// `by_index`/`index_keys`/`index_values` with a name no index has.
    UnknownIndex(String),
    /// `add_index` with a name already used.
    IndexConflict(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::UnknownIndex(n) => write!(f, "Index with name {n} does not exist"),
            StoreError::IndexConflict(n) => write!(f, "indexer conflict: {n}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// Keeps each shard on its own cache lines (128 bytes covers adjacent-line prefetching).
#[repr(align(128))]
struct Padded<S>(S);

/// Index value -> (key -> object), in key order.
type Buckets<T> = HashMap<String, BTreeMap<StoreKey, Arc<T>>>;

struct Index<T> {
    func: IndexFn<T>,
    buckets: Buckets<T>,
}

/// The sharded, indexed cache, read-only: every public method reads. An informer hands out
/// `Arc<Store<T>>` and writes it only from its pipeline, so the cache changes only with the server;
/// a [`Writer`] fills a store of your own.
///
/// ```
/// use std::sync::Arc;
/// use informer::{Pod, store::{Store, Writer}};
/// # fn pod(ns: &str, name: &str, rv: &str) -> Arc<Pod> {
/// #     let mut p = Pod::default();
/// #     (p.metadata.namespace, p.metadata.name, p.metadata.resource_version) = (ns.into(), name.into(), rv.into());
/// #     Arc::new(p)
/// # }
/// let writer = Writer::<Pod>::new(); // an informer's pipeline holds this
/// let store: Arc<Store<Pod>> = writer.reader(); // users get this
/// writer.insert(pod("prod", "web", "1"));
/// assert_eq!(store.get("prod", "web").unwrap().metadata.resource_version, "1");
/// assert_eq!(store.list_namespace("prod").len(), 1);
/// ```
pub struct Store<T> {
    /// Keyed hash for keys (see `key.rs`).
    hasher: KeyHasher,
    shards: Box<[Padded<Shard<T>>]>,
    /// Lock order: `indexes` before any shard.
    /// Padded, like `len` and `last_applied_rv`: the writer's lock and counter traffic must not
    /// share a cache line with `hasher` and `shards`, which every lookup reads.
    indexes: Padded<RwLock<HashMap<String, Index<T>>>>,
    /// Number of objects; written under the index write lock.
    len: Padded<AtomicUsize>,
    last_applied_rv: Padded<Mutex<String>>,
    index_panics: Padded<IndexPanics>,
}

impl<T: Object> Default for Store<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Object> Store<T> {
    /// An empty store with the namespace index.
    ///
    /// ```
    /// let store = informer::store::Writer::<informer::Pod>::new();
    /// assert!(store.is_empty());
    /// ```
    pub fn new() -> Store<T> {
        let namespace_fn: IndexFn<T> = Arc::new(|o: &T| vec![o.meta().namespace().to_owned()]);
        let indexes = HashMap::from([(
            NAMESPACE_INDEX.to_string(),
            Index {
                func: namespace_fn,
                buckets: HashMap::new(),
            },
        )]);
        Store {
            hasher: KeyHasher::new(),
            shards: (0..SHARDS).map(|_| Padded(Shard::default())).collect(),
            indexes: Padded(RwLock::new(indexes)),
            len: Padded(AtomicUsize::new(0)),
            last_applied_rv: Padded(Mutex::new(String::new())),
            index_panics: Padded(IndexPanics::default()),
        }
    }

    /// The key's hash and its shard.
    fn locate(&self, namespace: &str, name: &str) -> (u64, &Shard<T>) {
        let (hash, shard) = self.locate_index(namespace, name);
        (hash, &self.shards[shard].0)
    }

    /// The key's hash and the index of its shard.
    fn locate_index(&self, namespace: &str, name: &str) -> (u64, usize) {
        let hash = hash_parts(&self.hasher, namespace, name);
        // hashbrown uses the low bits for the bucket and the top 7 for its tag byte; bits 32.. are
        // independent of both for any table under 2^32 buckets.
        (hash, (hash >> 32) as usize & (SHARDS - 1))
    }

    /// Every shard, read-locked in order: a snapshot no write can land in the middle of. Writers
    /// that take several shards ([`apply_all`](Self::apply_all)) take them in the same order.
    fn read_all(&self) -> Vec<shard::ShardRead<'_, T>> {
        self.shards.iter().map(|s| s.0.read()).collect()
    }

    /// The object `namespace/name` (`namespace` empty for cluster-scoped), borrowed: read it
    /// through the [`Ref`], keep it with [`Ref::to_arc`]. Allocates nothing and writes nothing to
    /// the object.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Node, store::Store};
    /// let store = informer::store::Writer::<Node>::new();
    /// let mut n = Node::default();
    /// n.metadata.name = "node-1".into();
    /// store.insert(Arc::new(n));
    /// assert!(store.get("", "node-1").is_some());
    /// ```
    pub fn get(&self, namespace: &str, name: &str) -> Option<Ref<'_, T>> {
        let (hash, shard) = self.locate(namespace, name);
        shard.pin(|map| {
            map.table()
                .find(hash, |e| e.key.is(namespace, name))
                .map(|e| &e.object)
        })
    }

    /// The object with cache key `key` (`namespace/name` or `name`).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, store::Store};
    /// let store = informer::store::Writer::<Pod>::new();
    /// assert!(store.get_key("default/web").is_none());
    /// ```
    pub fn get_key(&self, key: &str) -> Option<Ref<'_, T>> {
        let (namespace, name) = split_key(key);
        self.get(namespace, name)
    }

    /// Number of objects.
    ///
    /// ```
    /// assert_eq!(informer::store::Store::<informer::Pod>::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        // Relaxed: a count, not a synchronisation point; it is exact whenever no write is running.
        self.len.0.load(Ordering::Relaxed)
    }

    /// Whether the store holds no object.
    ///
    /// ```
    /// assert!(informer::store::Store::<informer::Pod>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every object, in no particular order.
    ///
    /// ```
    /// assert!(informer::store::Store::<informer::Pod>::new().list().is_empty());
    /// ```
    pub fn list(&self) -> Vec<Arc<T>> {
        let mut out = Vec::with_capacity(self.len());
        for shard in self.read_all() {
            out.extend(shard.table().iter().map(|e| e.object.clone()));
        }
        out
    }

    /// Every key, in no particular order.
    ///
    /// ```
    /// assert!(informer::store::Store::<informer::Pod>::new().keys().is_empty());
    /// ```
    pub fn keys(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.len());
        for shard in self.read_all() {
            out.extend(shard.table().iter().map(|e| e.key.as_str().to_owned()));
        }
        out
    }

    /// The objects of one namespace, in key order (`""` lists cluster-scoped objects).
    ///
    /// ```
    /// assert!(informer::store::Store::<informer::Pod>::new().list_namespace("x").is_empty());
    /// ```
    pub fn list_namespace(&self, namespace: &str) -> Vec<Arc<T>> {
        self.by_index(NAMESPACE_INDEX, namespace)
            .unwrap_or_default()
    }

    /// The objects whose labels match `selector`.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, store::Store};
    /// let store = informer::store::Writer::<Pod>::new();
    /// let mut p = Pod::default();
    /// p.metadata.name = "a".into();
    /// p.metadata.labels.insert("app".into(), "web".into());
    /// store.insert(Arc::new(p));
    /// assert_eq!(store.list_selected(&"app=web".parse().unwrap()).len(), 1);
    /// assert_eq!(store.list_selected(&"app!=web".parse().unwrap()).len(), 0);
    /// ```
    pub fn list_selected(&self, selector: &LabelSelector) -> Vec<Arc<T>> {
        let mut out = Vec::new();
        for shard in self.read_all() {
            let selected = shard
                .table()
                .iter()
                .filter(|e| selector.matches_with(|key| e.object.meta().label(key)));
            out.extend(selected.map(|e| e.object.clone()));
        }
        out
    }

    /// Inserts or replaces the object under its key; returns the previous object.
    pub(crate) fn insert(&self, obj: Arc<T>) -> Option<Arc<T>> {
        let meta = obj.meta();
        let (namespace, name) = (meta.namespace(), meta.name());
        let (hash, shard) = self.locate(namespace, name);
        let mut indexes = write(&self.indexes.0);
        // Readers of this shard need not wait for the index work (see "Consistency"): the shard
        // is unlocked at the end of this statement.
        let (key, old) =
            shard
                .write(&Hazards::default())
                .upsert(hash, namespace, name, &obj, |k| {
                    hash_parts(&self.hasher, k.namespace(), k.name())
                });
        if old.is_none() {
            // Relaxed: see `len`; the index write lock orders the updates.
            self.len.0.fetch_add(1, Ordering::Relaxed);
        }
        let mut caught = Vec::new();
        for (name, index) in indexes.iter_mut() {
            update_index(index, name, &key, old.as_deref(), Some(&obj), &mut caught);
        }
        drop(indexes);
        self.report_index_panics(caught);
        old
    }

    /// Removes the object with cache key `key`; returns it.
    pub(crate) fn remove(&self, key: &str) -> Option<Arc<T>> {
        let (namespace, name) = split_key(key);
        let (hash, shard) = self.locate(namespace, name);
        let mut indexes = write(&self.indexes.0);
        let (k, old) = shard
            .write(&Hazards::default())
            .remove(hash, namespace, name)?;
        // Relaxed: see `len`.
        self.len.0.fetch_sub(1, Ordering::Relaxed);
        let mut caught = Vec::new();
        for (name, index) in indexes.iter_mut() {
            update_index(index, name, &k, Some(&old), None, &mut caught);
        }
        drop(indexes);
        self.report_index_panics(caught);
        Some(old)
    }

    /// Sets the hook told of every caught index-function panic (the informer passes them to its
    /// error callback).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, store::Store};
    /// let store = informer::store::Writer::<Pod>::new();
    /// store.on_index_panic(Arc::new(|index, key, message| eprintln!("{index} {key}: {message}")));
    /// ```
    pub fn on_index_panic(&self, hook: IndexPanicHook) {
        *self
            .index_panics
            .0
            .hook
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// How many index-function calls panicked (each was caught; see [`IndexFn`]).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, store::Store};
    /// let store = informer::store::Writer::<Pod>::new();
    /// store.add_index("bad", Arc::new(|_: &Pod| panic!("index bug"))).unwrap();
    /// store.insert(Arc::new(Pod::default()));
    /// assert_eq!(store.index_panics(), 1);
    /// assert_eq!(store.len(), 1, "the object is stored, only left out of that index");
    /// ```
    pub fn index_panics(&self) -> u64 {
        // Relaxed: a counter for metrics only; nothing is ordered by it.
        self.index_panics.0.count.load(Ordering::Relaxed)
    }

    fn report_index_panics(&self, caught: Vec<CaughtPanic>) {
        if caught.is_empty() {
            return;
        }
        // Relaxed: a counter for metrics only.
        self.index_panics
            .0
            .count
            .fetch_add(caught.len() as u64, Ordering::Relaxed);
        let hook = self
            .index_panics
            .0
            .hook
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (index, key, message) in caught {
            tracing::error!(%index, %key, %message, "an index function panicked; the object is left out of that index");
            if let Some(hook) = &hook {
                hook(&index, &key, &message);
            }
        }
    }

    /// Makes the store hold exactly `items` (a complete list), all at once (see
    /// [`apply_all`](Self::apply_all)), for callers that do not go through the
    /// [`DeltaFifo`](crate::fifo::DeltaFifo). Objects whose key and resourceVersion are unchanged
    /// keep the stored `Arc`. Returns the removed objects.
    pub(crate) fn replace(&self, items: impl IntoIterator<Item = Arc<T>>) -> Vec<Arc<T>> {
        let mut listed = std::collections::HashSet::new();
        let mut deltas = Vec::new();
        for item in items {
            let meta = item.meta();
            listed.insert(meta.key());
            let unchanged = self.get(meta.namespace(), meta.name()).is_some_and(|s| {
                !meta.resource_version().is_empty()
                    && s.meta().resource_version() == meta.resource_version()
            });
            if !unchanged {
                deltas.push(Delta::Modified(item));
            }
        }
        let listed_changes = deltas.len();
        for key in self.keys().into_iter().filter(|k| !listed.contains(k)) {
            if let Some(last_known) = self.get_by_key(&key) {
                deltas.push(Delta::Deleted(DeletedObject::Tombstone { key, last_known }));
            }
        }
        let olds = self.apply_all(&deltas);
        olds.into_iter().skip(listed_changes).flatten().collect()
    }

    /// Applies a popped delta: `Added`/`Modified` insert, `Deleted` removes the key. Returns the
    /// object the store held before (the `old` of an update notification).
    pub(crate) fn apply(&self, delta: &Delta<T>) -> Option<Arc<T>> {
        match delta {
            Delta::Added(o) | Delta::Modified(o) => self.insert(o.clone()),
            Delta::Deleted(d) => self.remove(&d.key()),
        }
    }

    /// Applies `deltas` in order, all at once: no reader sees some of them and not others. Every
    /// shard is write-locked (in order, under the index lock) while the maps change, so a
    /// [`get`](Self::get) waits for the batch and sees all of it, a [`list`](Self::list) (which
    /// read-locks every shard first) sees the store before or after, and index reads wait for the
    /// index lock, held until the indexes are done. Returns, for each delta, the object the store
    /// held before it.
    pub(crate) fn apply_all(&self, deltas: &[Delta<T>]) -> Vec<Option<Arc<T>>> {
        let mut indexes = write(&self.indexes.0);
        // One read of the hazard slots for the whole batch, once every shard is locked.
        let hazards = Hazards::default();
        let mut shards: Vec<_> = self.shards.iter().map(|s| s.0.write(&hazards)).collect();
        // (key, old, new) of each change, for the indexes.
        let mut changes = Vec::with_capacity(deltas.len());
        for delta in deltas {
            match delta {
                Delta::Added(obj) | Delta::Modified(obj) => {
                    let meta = obj.meta();
                    let (namespace, name) = (meta.namespace(), meta.name());
                    let (hash, shard) = self.locate_index(namespace, name);
                    let (key, old) = shards[shard].upsert(hash, namespace, name, obj, |k| {
                        hash_parts(&self.hasher, k.namespace(), k.name())
                    });
                    if old.is_none() {
                        // Relaxed: see `len`; the index write lock orders the updates.
                        self.len.0.fetch_add(1, Ordering::Relaxed);
                    }
                    changes.push((Some(key), old, Some(obj)));
                }
                Delta::Deleted(d) => {
                    let key = d.key();
                    let (namespace, name) = split_key(&key);
                    let (hash, shard) = self.locate_index(namespace, name);
                    match shards[shard].remove(hash, namespace, name) {
                        Some((key, old)) => {
                            // Relaxed: see `len`.
                            self.len.0.fetch_sub(1, Ordering::Relaxed);
                            changes.push((Some(key), Some(old), None));
                        }
                        None => changes.push((None, None, None)),
                    }
                }
            }
        }
        // Every change is in: readers may go on, while the indexes catch up under their lock.
        drop(shards);
        let mut caught = Vec::new();
        for (key, old, new) in &changes {
            let Some(key) = key else { continue };
            for (name, index) in indexes.iter_mut() {
                update_index(index, name, key, old.as_deref(), *new, &mut caught);
            }
        }
        drop(indexes);
        self.report_index_panics(caught);
        changes.into_iter().map(|(_, old, _)| old).collect()
    }

    /// Adds a named index and indexes every stored object with it (allowed while running, I8).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, store::Store};
    /// let store = informer::store::Writer::<Pod>::new();
    /// let mut p = Pod::default();
    /// (p.metadata.name, p.spec.node_name) = ("a".into(), Some("node-1".into()));
    /// store.insert(Arc::new(p));
    /// store.add_index("node", Arc::new(|p: &Pod| p.spec.node_name.iter().cloned().collect())).unwrap();
    /// assert_eq!(store.index_keys("node", "node-1").unwrap(), ["a"]);
    /// assert!(store.add_index("node", Arc::new(|_: &Pod| vec![])).is_err());
    /// ```
    pub fn add_index(&self, name: &str, func: IndexFn<T>) -> Result<(), StoreError> {
        let mut indexes = write(&self.indexes.0);
        if indexes.contains_key(name) {
            return Err(StoreError::IndexConflict(name.to_string()));
        }
        let mut index = Index {
            func,
            buckets: HashMap::new(),
        };
        let mut caught = Vec::new();
        for s in self.shards.iter() {
            for e in s.0.read().table().iter() {
                update_index(&mut index, name, &e.key, None, Some(&e.object), &mut caught);
            }
        }
        indexes.insert(name.to_string(), index);
        drop(indexes);
        self.report_index_panics(caught);
        Ok(())
    }

    /// The objects whose index `index` has value `value`, in key order.
    ///
    /// ```
    /// # use informer::{Pod, store::{Store, StoreError}};
    /// let store = informer::store::Writer::<Pod>::new();
    /// assert!(store.by_index("namespace", "x").unwrap().is_empty());
    /// assert_eq!(store.by_index("nope", "x"), Err(StoreError::UnknownIndex("nope".into())));
    /// ```
    pub fn by_index(&self, index: &str, value: &str) -> Result<Vec<Arc<T>>, StoreError> {
        self.with_bucket(index, value, |b| b.values().cloned().collect())
    }

    /// The keys whose index `index` has value `value`, sorted.
    ///
    /// ```
    /// assert!(informer::store::Store::<informer::Pod>::new().index_keys("namespace", "x").unwrap().is_empty());
    /// ```
    pub fn index_keys(&self, index: &str, value: &str) -> Result<Vec<String>, StoreError> {
        self.with_bucket(index, value, |b| {
            b.keys().map(|k| k.as_str().to_owned()).collect()
        })
    }

    /// Every value index `index` currently has (non-empty buckets only), in no particular order.
    ///
    /// ```
    /// assert!(informer::store::Store::<informer::Pod>::new().index_values("namespace").unwrap().is_empty());
    /// ```
    pub fn index_values(&self, index: &str) -> Result<Vec<String>, StoreError> {
        let indexes = read(&self.indexes.0);
        let index = indexes
            .get(index)
            .ok_or_else(|| StoreError::UnknownIndex(index.into()))?;
        Ok(index.buckets.keys().cloned().collect())
    }

    fn with_bucket<R: Default>(
        &self,
        index: &str,
        value: &str,
        f: impl FnOnce(&BTreeMap<StoreKey, Arc<T>>) -> R,
    ) -> Result<R, StoreError> {
        let indexes = read(&self.indexes.0);
        let index = indexes
            .get(index)
            .ok_or_else(|| StoreError::UnknownIndex(index.into()))?;
        Ok(index.buckets.get(value).map(f).unwrap_or_default())
    }

    /// The resourceVersion the store is known to be exactly at (see docs/informer-design.md §5);
    /// empty until set.
    ///
    /// ```
    /// let store = informer::store::Writer::<informer::Pod>::new();
    /// store.set_last_applied_resource_version("42");
    /// assert_eq!(store.last_applied_resource_version(), "42");
    /// ```
    pub fn last_applied_resource_version(&self) -> String {
        self.last_applied_rv
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Records the resourceVersion the store is now exactly at: the informer calls this with
    /// [`Popped::caught_up_resource_version`](crate::fifo::Popped::caught_up_resource_version) after
    /// applying the popped deltas.
    pub(crate) fn set_last_applied_resource_version(&self, rv: &str) {
        let mut cur = self
            .last_applied_rv
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        cur.clear();
        cur.push_str(rv);
    }
}

/// Moves `key` from the buckets of `old`'s values to those of `new`'s, refreshing the object pointer
/// in buckets it stays in, and drops buckets that become empty (I4, I5).
fn update_index<T>(
    index: &mut Index<T>,
    name: &str,
    key: &StoreKey,
    old: Option<&T>,
    new: Option<&Arc<T>>,
    caught: &mut Vec<CaughtPanic>,
) {
    // A panicking index function leaves the object out of this index; the panic is reported by
    // the caller once the locks are released.
    let mut values_of = |o: &T| match catch_unwind(AssertUnwindSafe(|| (index.func)(o))) {
        Ok(values) => Some(values),
        Err(payload) => {
            caught.push((
                name.to_owned(),
                key.as_str().to_owned(),
                panic_message(&*payload),
            ));
            None
        }
    };
    let Some(old_values) = old.map_or(Some(Vec::new()), &mut values_of) else {
        // The old values are unknown: take the key out of every bucket (rare, so a full scan).
        index.buckets.retain(|_, bucket| {
            bucket.remove(key);
            !bucket.is_empty()
        });
        if let Some(new) = new {
            for v in values_of(new).unwrap_or_default() {
                index
                    .buckets
                    .entry(v)
                    .or_default()
                    .insert(key.clone(), new.clone());
            }
        }
        return;
    };
    let new_values = new.and_then(|n| values_of(n)).unwrap_or_default();
    for v in old_values.iter().filter(|v| !new_values.contains(v)) {
        if let Some(bucket) = index.buckets.get_mut(v.as_str()) {
            bucket.remove(key);
            if bucket.is_empty() {
                index.buckets.remove(v.as_str());
            }
        }
    }
    if let Some(new) = new {
        for v in new_values {
            index
                .buckets
                .entry(v)
                .or_default()
                .insert(key.clone(), new.clone());
        }
    }
}

fn read<S>(lock: &RwLock<S>) -> RwLockReadGuard<'_, S> {
    // A panic under a lock cannot leave a map half-updated in a way that breaks readers (every
    // mutation is a single std call or index bookkeeping), so poisoning is ignored.
    lock.read().unwrap_or_else(|e| e.into_inner())
}

fn write<S>(lock: &RwLock<S>) -> std::sync::RwLockWriteGuard<'_, S> {
    lock.write().unwrap_or_else(|e| e.into_inner())
}

impl<T: Object> KnownObjects<T> for Store<T> {
    fn get_by_key(&self, key: &str) -> Option<Arc<T>> {
        let (namespace, name) = split_key(key);
        let (hash, shard) = self.locate(namespace, name);
        let map = shard.read();
        let found = map.table().find(hash, |e| e.key.is(namespace, name));
        found.map(|e| e.object.clone())
    }

    fn holds_version(&self, key: &str, rv: &str) -> bool {
        // No `Arc` clone: its atomic increment on the object's cold cache line would cost more
        // than the rest of the check (see `shard.rs`).
        let (namespace, name) = split_key(key);
        let (hash, shard) = self.locate(namespace, name);
        shard
            .read()
            .table()
            .find(hash, |e| e.key.is(namespace, name))
            .is_some_and(|e| e.object.meta().resource_version() == rv)
    }

    fn is_empty(&self) -> bool {
        Store::is_empty(self)
    }

    fn for_each_key(&self, f: &mut dyn FnMut(&str)) {
        for s in self.shards.iter() {
            for e in s.0.read().table().iter() {
                f(e.key.as_str());
            }
        }
    }
}
