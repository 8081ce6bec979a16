//! One shard of the store: a table behind a lock, and the pins that let a [`Ref`] borrow an object
//! without writing to the object's reference count.
//!
//! # Why a `Ref` and not an `Arc` clone
//! Cloning an `Arc<T>` is a locked increment on the object's first cache line. In a store of
//! thousands of objects that line is rarely cached, and a locked instruction waits for it before
//! any later load may run, so a lookup that clones costs a full memory round trip that nothing
//! overlaps. A `Ref` touches only the shard (hot: 64 of them) and the table entry; the object's
//! memory is read only if the caller reads the object.
//!
//! # The protocol
//! - **Pin.** [`Shard::pin`] finds the object under the shard's read lock and increments `pins`
//!   *before* it releases the lock, then keeps a pointer into the `Arc` the table holds. Dropping
//!   the [`Ref`] decrements `pins`.
//! - **Retire.** A writer that removes or replaces an object reads `pins` while it holds the write
//!   lock ([`Shard::retire`]). Zero: no `Ref` exists, and none can be made before the writer
//!   unlocks, so the shard need keep nothing. Otherwise a `Ref` may point at the old object, and
//!   the shard keeps a clone of its `Arc` in `retired`.
//! - **Release.** `retired` is emptied at a moment when `pins` is zero under the write lock: at the
//!   next write to the shard, or when the last `Ref` goes, if the write lock is free then
//!   (`try_write`; a `Ref`'s drop never waits).
//!
//! **Invariant:** while a `Ref` lives, the object it points at is held by an `Arc` in its shard's
//! table or `retired` list. A `Ref` is made under the read lock from an object in the table. The
//! object leaves the table only under the write lock, so after the `Ref` incremented `pins`; the
//! writer's load of `pins` sees that increment (it was made before the read unlock that the write
//! lock synchronizes with), so it keeps the object in `retired`. `retired` is emptied only under
//! the write lock with `pins` at zero, that is, once every `Ref` made before has gone (its
//! decrement is a release that the zero's acquire load reads, through the release sequence of
//! `pins`), and no `Ref` can be made meanwhile.
//!
//! # What holding a `Ref` costs
//! While any `Ref` into a shard lives, the objects removed from that shard stay in memory. A `Ref`
//! is for reading an object now: to keep one, take [`Ref::to_arc`]. A `Ref` is not `Send`, so a
//! task spawned on a multi-thread runtime cannot hold one across an `.await`.
//!
//! `tests/store_loom.rs` model-checks the protocol with loom (`--cfg informer_loom`).

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use std::sync::TryLockError;

#[cfg(informer_loom)]
use loom::sync::{
    RwLock, RwLockReadGuard, RwLockWriteGuard,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};
#[cfg(not(informer_loom))]
use std::sync::{
    RwLock, RwLockReadGuard, RwLockWriteGuard,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};

use super::key::StoreKey;
use hashbrown::HashTable;

/// A shard's table and the objects it removed while a [`Ref`] might point at them.
pub(super) struct ShardMap<T> {
    pub(super) table: HashTable<(StoreKey, Arc<T>)>,
    retired: Vec<Arc<T>>,
}

/// One shard: see the module docs.
pub(super) struct Shard<T> {
    map: RwLock<ShardMap<T>>,
    /// Live [`Ref`]s made from this shard.
    pins: AtomicUsize,
    /// Whether `retired` is non-empty, for a dropped `Ref` to check without the lock.
    has_retired: AtomicBool,
}

impl<T> Default for Shard<T> {
    fn default() -> Self {
        Shard {
            map: RwLock::new(ShardMap {
                table: HashTable::new(),
                retired: Vec::new(),
            }),
            pins: AtomicUsize::new(0),
            has_retired: AtomicBool::new(false),
        }
    }
}

impl<T> Shard<T> {
    /// The shard's table, for reading.
    pub(super) fn read(&self) -> RwLockReadGuard<'_, ShardMap<T>> {
        // A panic under a lock cannot leave a map half-updated in a way that breaks readers (every
        // mutation is a single hashbrown call), so poisoning is ignored.
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    /// The shard's table, for a write. Whatever the writer removes from it goes through
    /// [`Shard::retire`] before the guard is dropped.
    pub(super) fn write(&self) -> RwLockWriteGuard<'_, ShardMap<T>> {
        self.map.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A [`Ref`] to the object `find` picks from the table, if any.
    #[inline]
    pub(super) fn pin(
        &self,
        find: impl FnOnce(&ShardMap<T>) -> Option<&Arc<T>>,
    ) -> Option<Ref<'_, T>> {
        let map = self.read();
        let object = NonNull::from(&**find(&map)?);
        // Relaxed: made under the read lock, so it happens-before any writer's load of `pins`
        // (the read unlock releases, the write lock acquires). See the module's invariant.
        self.pins.fetch_add(1, Ordering::Relaxed);
        drop(map);
        Some(Ref {
            object,
            shard: self,
        })
    }

    /// Called under the write lock (`map`) for an object the writer just took out of the table:
    /// keeps it while a [`Ref`] may point at it. Returns what may be freed now (drop it after the
    /// lock is released: dropping objects can take a while).
    #[must_use]
    pub(super) fn retire(&self, map: &mut ShardMap<T>, old: &Arc<T>) -> Vec<Arc<T>> {
        // Acquire: reading zero means every `Ref` made before has dropped (their decrements
        // release); none can be made while we hold the write lock.
        if self.pins.load(Ordering::Acquire) != 0 {
            map.retired.push(old.clone());
            // SeqCst, with the load below and a dropping `Ref`'s decrement and load of
            // `has_retired`: either this load sees that `Ref` gone, or that `Ref` sees the flag
            // and tries to release. Without it both could miss the other.
            self.has_retired.store(true, Ordering::SeqCst);
        }
        self.releasable(map)
    }

    /// Under the write lock (`map`): everything retired, if no `Ref` is left. Every write calls
    /// it (through `retire` when it removed something), so what a last `Ref` could not release
    /// goes at the shard's next write.
    #[must_use]
    pub(super) fn releasable(&self, map: &mut ShardMap<T>) -> Vec<Arc<T>> {
        if map.retired.is_empty() || self.pins.load(Ordering::SeqCst) != 0 {
            return Vec::new();
        }
        // Relaxed: only written under the write lock; a stale `true` seen by a dropping `Ref`
        // costs it a `try_write`, nothing more.
        self.has_retired.store(false, Ordering::Relaxed);
        std::mem::take(&mut map.retired)
    }

    /// The last `Ref` went and objects are retired: free them, if the write lock is free.
    #[cold]
    fn release_retired(&self) {
        let mut map = match self.map.try_write() {
            Ok(map) => map,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            // A writer holds it (it releases what it can itself) or a reader does (the next
            // write or last `Ref` will).
            Err(TryLockError::WouldBlock) => return,
        };
        let free = self.releasable(&mut map);
        drop(map);
        drop(free);
    }
}

/// An object borrowed from a [`Store`](super::Store): dereferences to `T`.
///
/// A lookup returns a `Ref` rather than an `Arc<T>` so that it writes nothing to the object's
/// memory (see `src/store/shard.rs`). Read the object through it; keep it with [`Ref::to_arc`].
/// While a `Ref` lives, objects removed from its shard (one 64th of the store) are kept too, so
/// hold one for a lookup, not for the life of a task. It is not `Send`.
///
/// ```
/// use std::sync::Arc;
/// use informer::{Pod, store::{Ref, Writer}};
///
/// let store = Writer::<Pod>::new();
/// let mut p = Pod::default();
/// (p.metadata.namespace, p.metadata.name) = ("default".into(), "web".into());
/// store.insert(Arc::new(p));
///
/// let web: Ref<'_, Pod> = store.get("default", "web").unwrap();
/// assert_eq!(web.metadata.name, "web"); // reads the object in place
/// let kept: Arc<Pod> = Ref::to_arc(&web); // outlives the lookup, can go to another thread
/// drop(web);
/// store.remove("default/web");
/// assert_eq!(kept.metadata.name, "web");
/// ```
pub struct Ref<'a, T> {
    /// Points into an `Arc<T>` the shard holds (module invariant).
    object: NonNull<T>,
    shard: &'a Shard<T>,
}

impl<T> Ref<'_, T> {
    /// The object as an `Arc` of its own (the store's `Arc`, cloned), to keep or send.
    /// An associated function, so it does not hide a method of `T`.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{ConfigMap, store::{Ref, Writer}};
    /// let store = Writer::<ConfigMap>::new();
    /// let cm = Arc::new(ConfigMap::default());
    /// store.insert(cm.clone());
    /// assert!(Arc::ptr_eq(&Ref::to_arc(&store.get("", "").unwrap()), &cm));
    /// ```
    pub fn to_arc(this: &Self) -> Arc<T> {
        let ptr = this.object.as_ptr().cast_const();
        // SAFETY: `ptr` is `Arc::as_ptr` of an `Arc<T>` that the shard holds while `this` lives
        // (module invariant), so the count is at least one during both calls, and `from_raw`
        // takes over the count the first call added.
        unsafe {
            Arc::increment_strong_count(ptr);
            Arc::from_raw(ptr)
        }
    }
}

impl<T> std::ops::Deref for Ref<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the object is held by an `Arc` in the shard while `self` lives (module
        // invariant), and nothing hands out `&mut` to an object inside an `Arc` the store shares.
        unsafe { self.object.as_ref() }
    }
}

impl<T> Drop for Ref<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SeqCst: releases this `Ref`'s reads of the object to the writer that sees `pins` at
        // zero, and pairs with `retire`'s store of `has_retired` (see there).
        if self.shard.pins.fetch_sub(1, Ordering::SeqCst) == 1
            && self.shard.has_retired.load(Ordering::SeqCst)
        {
            self.shard.release_retired();
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Ref<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}
