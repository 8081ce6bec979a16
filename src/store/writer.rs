//! [`Writer`]: the write side of a [`Store`].
//!
//! An informer writes its store through crate-private methods and hands out only
//! `Arc<Store<T>>`, whose public methods all read, so no user can put the cache out of step with
//! the server (kube-runtime splits its `reflector::Store` from a `Writer` the same way; client-go
//! hands out a `Lister`). A writer is for code that fills a store of its own: tests, a custom
//! pipeline over [`DeltaFifo`], a cache that is not fed by a watch.
//!
//! [`DeltaFifo`]: crate::fifo::DeltaFifo

use std::sync::Arc;

use super::Store;
use crate::fifo::{Delta, KnownObjects};
use crate::model::Object;

/// The write side of a [`Store`]; it reads too (it dereferences to the store).
///
/// ```
/// use std::sync::Arc;
/// use informer::{Pod, store::Writer};
/// let writer = Writer::<Pod>::new();
/// let reader = writer.reader(); // what you hand out: read-only
/// let mut p = Pod::default();
/// (p.metadata.namespace, p.metadata.name) = ("prod".into(), "web".into());
/// writer.insert(Arc::new(p));
/// assert!(reader.get("prod", "web").is_some());
/// ```
pub struct Writer<T> {
    store: Arc<Store<T>>,
}

impl<T: Object> Default for Writer<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Object> Writer<T> {
    /// A writer of a new, empty store (with the namespace index).
    ///
    /// ```
    /// assert!(informer::store::Writer::<informer::Pod>::new().is_empty());
    /// ```
    pub fn new() -> Writer<T> {
        Writer {
            store: Arc::new(Store::new()),
        }
    }

    /// A read-only handle on the store (the same store; cheap to clone and share).
    ///
    /// ```
    /// let w = informer::store::Writer::<informer::Pod>::new();
    /// assert_eq!(w.reader().len(), 0);
    /// ```
    pub fn reader(&self) -> Arc<Store<T>> {
        self.store.clone()
    }

    /// Inserts or replaces the object under its key; returns the previous object.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, store::Writer};
    /// # fn pod(rv: &str) -> Arc<Pod> { let mut p = Pod::default(); p.metadata.name = "a".into(); p.metadata.resource_version = rv.into(); Arc::new(p) }
    /// let store = Writer::<Pod>::new();
    /// assert!(store.insert(pod("1")).is_none());
    /// assert_eq!(store.insert(pod("2")).unwrap().metadata.resource_version, "1");
    /// ```
    pub fn insert(&self, obj: Arc<T>) -> Option<Arc<T>> {
        self.store.insert(obj)
    }

    /// Removes the object with cache key `key` (`namespace/name`, or `name`); returns it.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, store::Writer};
    /// let store = Writer::<Pod>::new();
    /// let mut p = Pod::default();
    /// (p.metadata.namespace, p.metadata.name) = ("ns".into(), "a".into());
    /// store.insert(Arc::new(p));
    /// assert!(store.remove("ns/a").is_some());
    /// assert!(store.remove("ns/a").is_none());
    /// ```
    pub fn remove(&self, key: &str) -> Option<Arc<T>> {
        self.store.remove(key)
    }

    /// Makes the store hold exactly `items` (a complete list), for callers that do not go through
    /// the [`DeltaFifo`](crate::fifo::DeltaFifo). Objects whose key and resourceVersion are unchanged
    /// keep the stored `Arc`. Returns the removed objects. The change is applied all at once (see
    /// [`apply_all`](Self::apply_all)): no reader sees a mix of old and new state.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, store::Writer};
    /// # fn pod(name: &str) -> Arc<Pod> { let mut p = Pod::default(); p.metadata.name = name.into(); p.metadata.resource_version = "1".into(); Arc::new(p) }
    /// let store = Writer::<Pod>::new();
    /// store.insert(pod("a"));
    /// store.insert(pod("b"));
    /// let removed = store.replace(vec![pod("b"), pod("c")]);
    /// assert_eq!(removed.len(), 1);
    /// let mut keys = store.keys();
    /// keys.sort();
    /// assert_eq!(keys, ["b", "c"]);
    /// ```
    pub fn replace(&self, items: impl IntoIterator<Item = Arc<T>>) -> Vec<Arc<T>> {
        self.store.replace(items)
    }

    /// Applies a popped delta: `Added`/`Modified` insert, `Deleted` removes the key. Returns the
    /// object the store held before (the `old` of an update notification).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::Delta, store::Writer};
    /// let store = Writer::<Pod>::new();
    /// let mut p = Pod::default();
    /// p.metadata.name = "a".into();
    /// assert!(store.apply(&Delta::Added(Arc::new(p))).is_none());
    /// assert_eq!(store.len(), 1);
    /// ```
    pub fn apply(&self, delta: &Delta<T>) -> Option<Arc<T>> {
        self.store.apply(delta)
    }

    /// Applies `deltas` in order, all at once: a reader sees the store before them or after them,
    /// never in between ([`Store::get`] waits for the batch, [`Store::list`] and the index reads
    /// see it whole or not at all). What an informer does with a relist's changes
    /// ([`Popped::is_relist`](crate::fifo::Popped::is_relist)). Returns, for each delta, the
    /// object the store held before it.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::{DeletedObject, Delta}, store::Writer};
    /// # fn pod(name: &str) -> Arc<Pod> { let mut p = Pod::default(); p.metadata.name = name.into(); Arc::new(p) }
    /// let store = Writer::<Pod>::new();
    /// store.insert(pod("a"));
    /// let old = store.apply_all(&[
    ///     Delta::Deleted(DeletedObject::Final(pod("a"))),
    ///     Delta::Added(pod("b")),
    /// ]);
    /// assert!(old[0].is_some() && old[1].is_none());
    /// assert_eq!(store.keys(), ["b"]);
    /// ```
    pub fn apply_all(&self, deltas: &[Delta<T>]) -> Vec<Option<Arc<T>>> {
        self.store.apply_all(deltas)
    }

    /// Records the resourceVersion the store is now exactly at (see
    /// [`Store::last_applied_resource_version`]).
    ///
    /// ```
    /// let store = informer::store::Writer::<informer::Pod>::new();
    /// store.set_last_applied_resource_version("42");
    /// assert_eq!(store.last_applied_resource_version(), "42");
    /// ```
    pub fn set_last_applied_resource_version(&self, rv: &str) {
        self.store.set_last_applied_resource_version(rv)
    }
}

impl<T> std::ops::Deref for Writer<T> {
    type Target = Store<T>;
    fn deref(&self) -> &Store<T> {
        &self.store
    }
}

impl<T: Object> KnownObjects<T> for Writer<T> {
    fn get_by_key(&self, key: &str) -> Option<Arc<T>> {
        self.store.get_by_key(key)
    }

    fn for_each_key(&self, f: &mut dyn FnMut(&str)) {
        self.store.for_each_key(f)
    }

    fn is_empty(&self) -> bool {
        self.store.is_empty()
    }
}
