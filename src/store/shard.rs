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
//! - **Pin.** [`Shard::pin`] finds the object under the shard's read lock and turns the lock into
//!   a pin (one atomic step that adds to `pins` and leaves the table, `lock.rs`), then keeps a
//!   pointer into the `Arc` the table holds. Dropping the [`Ref`] decrements `pins`.
//! - **Retire.** A writer that removes or replaces an object reads `pins` while it holds the write
//!   lock (`ShardWriter::retire`; the table is private to this module, and only a [`ShardWriter`]
//!   changes it, through `upsert` and `remove`, which both retire what they take out). Zero: no `Ref` exists, and none can be made before
//!   the writer unlocks, so the shard need keep nothing. Otherwise a `Ref` may point at the old
//!   object, and the shard keeps a clone of its `Arc` in `retired`.
//! - **Release.** `retired` is emptied at a moment when `pins` is zero under the write lock: at the
//!   end of every write, or when the last `Ref` goes, if the write lock is free then (`try_write`;
//!   a `Ref`'s drop never waits). Whoever held the write lock and left objects retired (a writer,
//!   or a release that found a `Ref` still live) checks `pins` again once it has unlocked, and
//!   tries again if it is zero, so a last `Ref` that found the lock taken by either leaves nothing
//!   behind. One that found a *reader* holding it (a `list`, a lookup that missed) leaves them
//!   until the shard's next write or next last `Ref`.
//!
//! **Invariant:** while a `Ref` lives, the object it points at is held by an `Arc` in its shard's
//! table or `retired` list. A `Ref` is made under the read lock from an object in the table. The
//! object leaves the table only under the write lock, so after the `Ref` incremented `pins`; the
//! writer's load of `pins` sees that increment (the same atomic step that let the writer in), so
//! it keeps the object in `retired`. `retired` is emptied only under
//! the write lock with `pins` at zero, that is, once every `Ref` made before has gone (its
//! decrement is a release that the zero's acquire load reads, through the release sequence of
//! `pins`), and no `Ref` can be made meanwhile. A count that could wrap would break this, so a
//! pin count that reaches half its field in the lock word aborts, as `Arc` does (`lock.rs`).
//!
//! # What holding a `Ref` costs
//! While any `Ref` into a shard lives, **every** object removed or replaced in that shard (one
//! 64th of the keys, every version of each) stays in memory, however many writes that is: a `Ref`
//! held for the life of a task, or leaked with `mem::forget`, keeps them all, and the whole
//! backlog is freed by whichever `Ref` or write finds the count at zero. A `Ref` is for reading
//! an object now: to keep one, take [`Ref::to_arc`]. A `Ref` is neither `Send` nor `Sync`, so a
//! task spawned on a multi-thread runtime cannot hold one across an `.await` (a current-thread
//! runtime's tasks can: keep the lookup out of the `.await`).
//!
//! `tests/store_loom.rs` model-checks the protocol with loom (`--cfg informer_loom`).

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

#[cfg(informer_loom)]
use loom::sync::atomic::{AtomicBool, Ordering, fence};
#[cfg(not(informer_loom))]
use std::sync::atomic::{AtomicBool, Ordering};

use super::key::StoreKey;
use super::lock::{PinLock, ReadGuard, WriteGuard};
use hashbrown::HashTable;

/// A shard's table and the objects it removed while a [`Ref`] might point at them. Only this
/// module changes the table, through a [`ShardWriter`].
pub(super) struct ShardMap<T> {
    table: HashTable<(StoreKey, Arc<T>)>,
    retired: Vec<Arc<T>>,
}

impl<T> ShardMap<T> {
    /// The table, to read.
    pub(super) fn table(&self) -> &HashTable<(StoreKey, Arc<T>)> {
        &self.table
    }
}

/// A shard's table, read-locked.
pub(super) type ShardRead<'a, T> = ReadGuard<'a, ShardMap<T>>;

/// One shard: see the module docs.
pub(super) struct Shard<T> {
    /// The table, and the count of live [`Ref`]s made from this shard (its pins).
    map: PinLock<ShardMap<T>>,
    /// Whether `retired` is non-empty, for a dropped `Ref` to check without the lock.
    has_retired: AtomicBool,
}

impl<T> Default for Shard<T> {
    fn default() -> Self {
        Shard {
            map: PinLock::new(ShardMap {
                table: HashTable::new(),
                retired: Vec::new(),
            }),
            has_retired: AtomicBool::new(false),
        }
    }
}

impl<T> Shard<T> {
    /// The shard's table, for reading.
    pub(super) fn read(&self) -> ShardRead<'_, T> {
        self.map.read()
    }

    /// A [`Ref`] to the object `find` picks from the table, if any.
    #[inline]
    pub(super) fn pin(
        &self,
        find: impl FnOnce(&ShardMap<T>) -> Option<&Arc<T>>,
    ) -> Option<Ref<'_, T>> {
        let map = self.read();
        // `Arc::as_ptr`, not a reference's address: `Ref::to_arc` hands the pointer back to
        // `Arc::increment_strong_count`, which needs the `Arc`'s own.
        let object = NonNull::new(Arc::as_ptr(find(&map)?).cast_mut())?;
        // Leaves the table and pins in one step (`lock.rs`), so the pin is in place before any
        // writer can change the table. `Ref`s leaked with `mem::forget` would otherwise wrap the
        // count to zero and let a writer free an object a live `Ref` points at: the lock aborts
        // first, as `Arc` does.
        ReadGuard::pin(map);
        Some(Ref {
            object,
            shard: self,
        })
    }

    /// After a write lock kept objects retired and was released: whether `pins` is zero now. The
    /// last `Ref` may have gone while we held the lock: its `try_write` failed, and our load of
    /// `pins` under the lock saw it still live. The pins and the lock are one atomic word
    /// (`lock.rs`), so the `Ref`'s decrement and our unlock are ordered in its modification order:
    /// if the decrement came first, this load (after our unlock) sees it; if our unlock did, the
    /// `Ref`'s `try_write` (after its decrement) saw the lock free. Either way one of us releases.
    fn unpinned_after_unlock(&self) -> bool {
        self.map.pins(Ordering::Relaxed) == 0
    }

    /// Under the write lock: everything retired, if no `Ref` is left.
    #[must_use]
    fn releasable(&self, map: &mut ShardMap<T>) -> Vec<Arc<T>> {
        if map.retired.is_empty() || self.map.pins(Ordering::SeqCst) != 0 {
            return Vec::new();
        }
        // Relaxed: only written under the write lock; a stale `true` seen by a dropping `Ref`
        // costs it a `try_write`, nothing more.
        self.has_retired.store(false, Ordering::Relaxed);
        std::mem::take(&mut map.retired)
    }

    /// No `Ref` is left and objects are retired: free them, if the write lock is free. A reader
    /// holding the read lock just then (a `list`, another lookup) makes this give up; the shard's
    /// next write or last `Ref` releases them instead.
    #[cold]
    fn release_retired(&self) {
        loop {
            // `None`: someone holds the lock: a writer or another release (each checks again once
            // it unlocks), or a reader (the next write or last `Ref` releases).
            let Some(mut map) = self.map.try_write() else {
                return;
            };
            let free = self.releasable(&mut map);
            let kept = !map.retired.is_empty();
            drop(map);
            drop(free);
            // Kept: a `Ref` was live under our lock. If it has gone since, its own release may
            // have met our lock, so try again; if it is still live, its drop will.
            if !kept || !self.unpinned_after_unlock() {
                return;
            }
        }
    }
}

/// A shard held for writing: the only way to change its table. Every object a write takes out of
/// the table goes through [`ShardWriter::retire`], and the lock is released by its `drop`, so the
/// module's invariant is kept here and nowhere else. A writer may make many changes under one lock
/// (a batch, [`Store::apply_all`](super::Store)): no `Ref` can be made while it holds the lock, so
/// checking `pins` at each change is as good as checking it once at the end.
pub(super) struct ShardWriter<'a, T> {
    shard: &'a Shard<T>,
    /// `Some` until dropped.
    map: Option<WriteGuard<'a, ShardMap<T>>>,
}

impl<T> Shard<T> {
    /// Locks the shard for writing.
    pub(super) fn write(&self) -> ShardWriter<'_, T> {
        ShardWriter {
            shard: self,
            map: Some(self.map.write()),
        }
    }
}

impl<T> ShardWriter<'_, T> {
    fn map(&mut self) -> &mut ShardMap<T> {
        self.map.as_mut().expect("held until dropped")
    }

    /// Inserts `obj` under `namespace/name` (whose hash is `hash`), or replaces the object there.
    /// Returns the entry's key and the object replaced. `rehash` hashes a key again when the table
    /// grows.
    pub(super) fn upsert(
        &mut self,
        hash: u64,
        namespace: &str,
        name: &str,
        obj: &Arc<T>,
        rehash: impl Fn(&StoreKey) -> u64,
    ) -> (StoreKey, Option<Arc<T>>) {
        let map = self.map();
        let (key, old) = match map.table.find_mut(hash, |(k, _)| k.is(namespace, name)) {
            Some((k, slot)) => (k.clone(), Some(std::mem::replace(slot, obj.clone()))),
            None => {
                let k = StoreKey::new(namespace, name);
                let key = k.clone();
                map.table
                    .insert_unique(hash, (k, obj.clone()), |(k, _)| rehash(k));
                (key, None)
            }
        };
        if let Some(old) = &old {
            self.retire(old);
        }
        (key, old)
    }

    /// Removes the object under `namespace/name`, if any; returns its entry.
    pub(super) fn remove(
        &mut self,
        hash: u64,
        namespace: &str,
        name: &str,
    ) -> Option<(StoreKey, Arc<T>)> {
        let removed = match self
            .map()
            .table
            .find_entry(hash, |(k, _)| k.is(namespace, name))
        {
            Ok(entry) => Some(entry.remove().0),
            Err(_) => None,
        };
        if let Some((_, old)) = &removed {
            self.retire(old);
        }
        removed
    }

    /// `old` left the table: keep it while a [`Ref`] may point at it.
    fn retire(&mut self, old: &Arc<T>) {
        // Acquire: reading zero means every `Ref` made before has dropped (their decrements
        // release); none can be made while we hold the write lock.
        if self.shard.map.pins(Ordering::Acquire) != 0 {
            self.map().retired.push(old.clone());
            // SeqCst, with the load in `releasable` and a dropping `Ref`'s decrement and load of
            // `has_retired`: either that load sees the `Ref` gone, or the `Ref` sees the flag and
            // tries to release. Without it both could miss the other.
            self.shard.has_retired.store(true, Ordering::SeqCst);
            loom_sequential_consistency();
        }
    }
}

impl<T> Drop for ShardWriter<'_, T> {
    /// Ends a write: releases what no `Ref` can point at any more, and unlocks. Every write ends
    /// here, so what a last `Ref` could not release goes at the shard's next write.
    fn drop(&mut self) {
        let Some(mut guard) = self.map.take() else {
            return;
        };
        let shard = self.shard;
        let free = shard.releasable(&mut guard);
        let kept = !guard.retired.is_empty();
        drop(guard);
        // Dropping objects can take a while: not under the lock.
        drop(free);
        if kept && shard.unpinned_after_unlock() {
            shard.release_retired();
        }
    }
}

/// Nothing, except in the loom model: loom treats `SeqCst` loads, stores and read-modify-writes as
/// acquire/release (it has no single total order for them), so it would report the one pairing
/// that needs that order, a `Ref`'s decrement then load of `has_retired` against a writer's store
/// of it then load of `pins`, as able to miss both ways. A `SeqCst` fence between each pair, which
/// loom does model, gives the model the guarantee the `SeqCst` accesses give the real code.
#[inline(always)]
fn loom_sequential_consistency() {
    #[cfg(informer_loom)]
    fence(Ordering::SeqCst);
}

/// An object borrowed from a [`Store`](super::Store): dereferences to `T`.
///
/// A lookup returns a `Ref` rather than an `Arc<T>` so that it writes nothing to the object's
/// memory (see `src/store/shard.rs`). Read the object through it; keep it with [`Ref::to_arc`].
/// While a `Ref` lives, every object removed or replaced in its shard (one 64th of the keys) is
/// kept too, so hold one for a lookup, not for the life of a task. It is neither `Send` nor
/// `Sync`:
///
/// ```compile_fail
/// fn send<S: Send>(_: S) {}
/// let store = informer::store::Writer::<informer::Pod>::new();
/// send(store.get("default", "web")); // a Ref stays on the thread that looked it up
/// ```
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
        // zero, and pairs with `ShardWriter::retire`'s store of `has_retired` (see there).
        if self.shard.map.unpin(Ordering::SeqCst) != 1 {
            return;
        }
        loom_sequential_consistency();
        if self.shard.has_retired.load(Ordering::SeqCst) {
            self.shard.release_retired();
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Ref<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}
