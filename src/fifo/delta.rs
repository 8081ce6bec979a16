//! The values that flow out of the fifo ([`Delta`], [`DeletedObject`]) and what the fifo needs to
//! know about the store ([`KnownObjects`]).

use crate::model::Metadata;
use std::sync::Arc;

use crate::model::Object;
use crate::watch::RawObject;

/// What happened to a key.
///
/// ```
/// # use std::sync::Arc; use informer::{Pod, fifo::Delta};
/// let d = Delta::Added(Arc::new(Pod::default()));
/// assert_eq!(d.object().metadata.name, "");
/// ```
#[derive(Debug)]
pub enum Delta<T> {
    /// The object was created (or first seen).
    Added(Arc<T>),
    /// The object changed; the store holds the previous state.
    Modified(Arc<T>),
    /// The object is gone.
    Deleted(DeletedObject<T>),
}

impl<T> Clone for Delta<T> {
    fn clone(&self) -> Self {
        match self {
            Delta::Added(o) => Delta::Added(o.clone()),
            Delta::Modified(o) => Delta::Modified(o.clone()),
            Delta::Deleted(d) => Delta::Deleted(d.clone()),
        }
    }
}

/// The object of a `Deleted` delta.
///
/// ```
/// # use std::sync::Arc; use informer::{Pod, fifo::DeletedObject};
/// let t = DeletedObject::Tombstone { key: "ns/a".into(), last_known: Arc::new(Pod::default()) };
/// assert_eq!(t.key(), "ns/a");
/// ```
#[derive(Debug)]
pub enum DeletedObject<T> {
    /// The final state, from a watch `DELETED` event.
    Final(Arc<T>),
    /// The deletion was inferred by a relist; `last_known` is the newest state seen before
    /// (client-go's `DeletedFinalStateUnknown`).
    Tombstone {
        /// The cache key of the deleted object.
        key: String,
        /// The newest state the informer had.
        last_known: Arc<T>,
    },
}

impl<T> Clone for DeletedObject<T> {
    fn clone(&self) -> Self {
        match self {
            DeletedObject::Final(o) => DeletedObject::Final(o.clone()),
            DeletedObject::Tombstone { key, last_known } => DeletedObject::Tombstone {
                key: key.clone(),
                last_known: last_known.clone(),
            },
        }
    }
}

impl<T: Object> DeletedObject<T> {
    /// The cache key of the deleted object.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeletedObject};
    /// let mut p = Pod::default();
    /// (p.metadata.namespace, p.metadata.name) = ("ns".into(), "a".into());
    /// assert_eq!(DeletedObject::Final(Arc::new(p)).key(), "ns/a");
    /// ```
    pub fn key(&self) -> String {
        match self {
            DeletedObject::Final(o) => o.meta().key(),
            DeletedObject::Tombstone { key, .. } => key.clone(),
        }
    }
}

impl<T> DeletedObject<T> {
    /// The final or last known object.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeletedObject};
    /// let p = Arc::new(Pod::default());
    /// assert!(Arc::ptr_eq(DeletedObject::Final(p.clone()).object(), &p));
    /// ```
    pub fn object(&self) -> &Arc<T> {
        match self {
            DeletedObject::Final(o) => o,
            DeletedObject::Tombstone { last_known, .. } => last_known,
        }
    }
}

impl<T> Delta<T> {
    /// The object the delta carries (for `Deleted`, the final or last known state).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::Delta};
    /// let p = Arc::new(Pod::default());
    /// assert!(Arc::ptr_eq(Delta::Modified(p.clone()).object(), &p));
    /// ```
    pub fn object(&self) -> &Arc<T> {
        match self {
            Delta::Added(o) | Delta::Modified(o) => o,
            Delta::Deleted(d) => d.object(),
        }
    }
}

impl<T: Object> Delta<T> {
    /// The cache key of the delta's object.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::Delta};
    /// let mut p = Pod::default();
    /// p.metadata.name = "a".into();
    /// assert_eq!(Delta::Added(Arc::new(p)).key(), "a");
    /// ```
    pub fn key(&self) -> String {
        match self {
            Delta::Deleted(d) => d.key(),
            other => other.object().meta().key(),
        }
    }

    /// The resourceVersion of the delta's object.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::Delta};
    /// let mut p = Pod::default();
    /// p.metadata.resource_version = "9".into();
    /// assert_eq!(Delta::Added(Arc::new(p)).resource_version(), "9");
    /// ```
    pub fn resource_version(&self) -> &str {
        self.object().meta().resource_version()
    }
}

/// What the fifo needs to know about the store: the consumer compares against it and lists its keys
/// at the end of a relist. Implemented by [`Store`](crate::store::Store). The store is expected to
/// change only by the popped deltas, each applied before its [`Popped`](super::Popped) is dropped
/// (as an informer does): a key written to it otherwise during a relist that began with nothing
/// stored is not tombstoned by that relist.
///
/// ```
/// use std::sync::Arc;
/// use informer::{Pod, fifo::KnownObjects};
/// struct Nothing;
/// impl KnownObjects<Pod> for Nothing {
///     fn get_by_key(&self, _: &str) -> Option<Arc<Pod>> { None }
///     fn for_each_key(&self, _: &mut dyn FnMut(&str)) {}
/// }
/// assert!(Nothing.get_by_key("a").is_none());
/// ```
pub trait KnownObjects<T>: Send + Sync {
    /// The stored object with cache key `key`.
    fn get_by_key(&self, key: &str) -> Option<Arc<T>>;
    /// Whether the stored object with cache key `key` is at resourceVersion `rv`: the fifo's
    /// staleness check for each watch event of a key with nothing pending. The default gets the
    /// object; a store can answer without handing out (and so counting) a reference.
    fn holds_version(&self, key: &str, rv: &str) -> bool
    where
        T: crate::model::Object,
    {
        self.get_by_key(key)
            .is_some_and(|s| s.meta().resource_version() == rv)
    }
    /// Calls `f` with every stored key.
    fn for_each_key(&self, f: &mut dyn FnMut(&str));
    /// Whether nothing is stored: a relist that begins from nothing has no deletions to infer at
    /// its end, and keeps no set of the keys it listed. The default asks
    /// [`for_each_key`](Self::for_each_key); a store that counts its objects can answer at once.
    fn is_empty(&self) -> bool {
        let mut empty = true;
        self.for_each_key(&mut |_| empty = false);
        empty
    }
}

/// A watch event whose object is still JSON, for [`DeltaFifo::push`](super::DeltaFifo::push):
/// the object is decoded only if it survives coalescing.
///
/// ```
/// use informer::{fifo::RawDelta, internals::watch::{EventDecoder, RawEvent}, Pod};
/// let mut dec = EventDecoder::<Pod>::new();
/// dec.push(b"{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n");
/// let Some(RawEvent::Deleted(raw)) = dec.next_raw().unwrap() else { panic!() };
/// let delta = RawDelta::Deleted(raw);
/// assert_eq!(delta.object().name(), "a");
/// ```
#[derive(Clone, Debug)]
pub enum RawDelta {
    /// An object was added.
    Added(RawObject),
    /// An object changed.
    Modified(RawObject),
    /// An object was deleted (its last state).
    Deleted(RawObject),
}

impl RawDelta {
    /// The event's object.
    pub fn object(&self) -> &RawObject {
        match self {
            RawDelta::Added(o) | RawDelta::Modified(o) | RawDelta::Deleted(o) => o,
        }
    }
}
