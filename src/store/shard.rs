//! One shard of the store: a table behind a read-write lock, and the objects it took out while a
//! [`Ref`] might still point at them.
//!
//! # Why a `Ref` and not an `Arc` clone
//! Cloning an `Arc<T>` is a locked increment on the object's first cache line. In a store of
//! thousands of objects that line is rarely cached, and a locked instruction waits for it before
//! any later load may run, so a lookup that clones costs a full memory round trip that nothing
//! overlaps. A lookup that returns a `Ref` makes two locked instructions, the shard lock's (hot:
//! 64 of them) and writes two plain stores to a line of its own thread's (`hazard.rs`); the
//! object's memory is read only if the caller reads the object.
//!
//! # The protocol
//! - **Look up.** [`Shard::pin`] finds the object under the read lock and, before unlocking,
//!   protects its address in a hazard slot of this thread's (`hazard.rs`); the [`Ref`] empties
//!   the slot when dropped. A thread whose slots are all taken gets a `Ref` that owns an `Arc`
//!   count instead.
//! - **Retire.** A writer that removes or replaces an object, under the write lock, keeps a clone
//!   of its `Arc` in `retired` if a hazard slot holds its address (`ShardWriter::retire`; the
//!   table is private to this module, and only a [`ShardWriter`] changes it, through `upsert` and
//!   `remove`, which both retire what they take out).
//! - **Release.** At the end of every write, under the lock, what `retired` holds that no slot
//!   holds is freed (after unlocking).
//!
//! The slots are read once per write, when it first retires something, and the addresses are
//! shared by every shard the write holds ([`Hazards`]): they are read under all of its locks, and
//! a `Ref` into a locked shard cannot be made meanwhile.
//!
//! **Invariant:** while a `Ref` lives, the object it points at is held by an `Arc` in its shard's
//! table or `retired` list, or by the `Ref` itself. `hazard.rs` proves it for slots: a writer that
//! takes an object out sees every slot that holds its address, or the null its `Ref` left
//! behind, which orders the `Ref`'s reads before the free.
//!
//! # What holding a `Ref` costs
//! While a `Ref` lives, the store keeps its object if it is removed or replaced (and frees it at
//! its shard's next write after the `Ref` went): one object per live `Ref`, not a backlog. A
//! `Ref` is still for reading an object now, on this thread: to keep one, take [`Ref::to_arc`].
//! A `Ref` is neither `Send` nor `Sync`, so a task spawned on a multi-thread runtime cannot hold
//! one across an `.await` (a current-thread runtime's tasks can: keep the lookup out of the
//! `.await`). A thread holding more than eight `Ref`s at once pays an `Arc` clone for each
//! further one.
//!
//! `tests/store_loom.rs` model-checks the protocol with loom (`--cfg informer_loom`).

use std::cell::OnceCell;
use std::fmt;
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::Arc;

#[cfg(informer_loom)]
use loom::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(informer_loom))]
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::hazard::{self, Slot};
use super::key::StoreKey;
use hashbrown::HashTable;

/// A shard's table and the objects it removed while a [`Ref`] might point at them. Only this
/// module changes the table, through a [`ShardWriter`].
pub(super) struct ShardMap<T> {
    table: HashTable<Entry<T>>,
    retired: Vec<Arc<T>>,
}

impl<T> ShardMap<T> {
    /// The table, to read.
    pub(super) fn table(&self) -> &HashTable<Entry<T>> {
        &self.table
    }
}

/// One table entry: a key and its object on a cache line of their own (64 bytes, aligned), so a
/// lookup that compares the key and takes the object reads one line of the table's entries.
/// Unaligned, the 48 bytes of an entry would straddle two lines at every other slot.
#[repr(align(64))]
pub(super) struct Entry<T> {
    pub(super) key: StoreKey,
    pub(super) object: Arc<T>,
}

/// A shard's table, read-locked.
pub(super) type ShardRead<'a, T> = RwLockReadGuard<'a, ShardMap<T>>;

/// One shard: see the module docs.
pub(super) struct Shard<T> {
    map: RwLock<ShardMap<T>>,
}

impl<T> Default for Shard<T> {
    fn default() -> Self {
        Shard {
            map: RwLock::new(ShardMap {
                table: HashTable::new(),
                retired: Vec::new(),
            }),
        }
    }
}

impl<T> Shard<T> {
    /// The shard's table, for reading. A panic under the lock cannot leave the table half-changed
    /// in a way that breaks readers (each change is one hashbrown call), so poisoning is ignored.
    pub(super) fn read(&self) -> ShardRead<'_, T> {
        self.map.read().unwrap_or_else(|e| e.into_inner())
    }

    /// A [`Ref`] to the object `find` picks from the table, if any.
    #[inline]
    pub(super) fn pin(
        &self,
        find: impl FnOnce(&ShardMap<T>) -> Option<&Arc<T>>,
    ) -> Option<Ref<'_, T>> {
        let map = self.read();
        let found = find(&map)?;
        // `Arc::as_ptr`, not a reference's address: `Ref::to_arc` and the fallback below hand the
        // pointer back to `Arc`'s raw-pointer functions, which need the `Arc`'s own.
        let object = NonNull::new(Arc::as_ptr(found).cast_mut())?;
        // Under the read lock, so before any writer can take the object out (module docs).
        let slot = hazard::protect(object.as_ptr().cast_const().cast());
        if slot.is_none() {
            // Every slot of this thread's is taken: the `Ref` owns a count instead, given back in
            // its drop.
            std::mem::forget(Arc::clone(found));
        }
        drop(map);
        Some(Ref {
            object,
            slot,
            _shard: PhantomData,
        })
    }
}

/// The addresses every thread's `Ref`s point at, read once per write, when it first retires
/// something (a write that takes nothing out never reads them), and shared by the shards one
/// write holds. Read only once every shard sharing it is write-locked.
#[derive(Default)]
pub(super) struct Hazards(OnceCell<Vec<*const ()>>);

impl Hazards {
    fn protects<T>(&self, object: &Arc<T>) -> bool {
        let address = Arc::as_ptr(object).cast::<()>();
        self.0.get_or_init(hazard::protected).contains(&address)
    }
}

/// A shard held for writing: the only way to change its table. Every object a write takes out of
/// the table goes through [`ShardWriter::retire`], and the lock is released by its `drop`, so the
/// module's invariant is kept here and nowhere else.
pub(super) struct ShardWriter<'a, T> {
    /// `Some` until dropped.
    map: Option<RwLockWriteGuard<'a, ShardMap<T>>>,
    hazards: &'a Hazards,
}

impl<T> Shard<T> {
    /// Locks the shard for writing; `hazards` is the write's (one per write, however many shards
    /// it locks: see [`Hazards`]).
    pub(super) fn write<'a>(&'a self, hazards: &'a Hazards) -> ShardWriter<'a, T> {
        ShardWriter {
            map: Some(self.map.write().unwrap_or_else(|e| e.into_inner())),
            hazards,
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
        let (key, old) = match map.table.find_mut(hash, |e| e.key.is(namespace, name)) {
            Some(e) => (
                e.key.clone(),
                Some(std::mem::replace(&mut e.object, obj.clone())),
            ),
            None => {
                let key = StoreKey::new(namespace, name);
                let entry = Entry {
                    key: key.clone(),
                    object: obj.clone(),
                };
                map.table.insert_unique(hash, entry, |e| rehash(&e.key));
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
            .find_entry(hash, |e| e.key.is(namespace, name))
        {
            Ok(entry) => {
                let Entry { key, object } = entry.remove().0;
                Some((key, object))
            }
            Err(_) => None,
        };
        if let Some((_, old)) = &removed {
            self.retire(old);
        }
        removed
    }

    /// `old` left the table: keep it while a [`Ref`] may point at it.
    fn retire(&mut self, old: &Arc<T>) {
        if self.hazards.protects(old) {
            self.map().retired.push(old.clone());
        }
    }
}

impl<T> Drop for ShardWriter<'_, T> {
    /// Ends a write: frees what no `Ref` points at any more, and unlocks. Every write ends here,
    /// so what a `Ref` kept goes at the shard's next write after it.
    fn drop(&mut self) {
        let Some(mut map) = self.map.take() else {
            return;
        };
        let free = if map.retired.is_empty() {
            Vec::new()
        } else {
            let (kept, free) = std::mem::take(&mut map.retired)
                .into_iter()
                .partition(|o| self.hazards.protects(o));
            map.retired = kept;
            free
        };
        drop(map);
        // Dropping objects can take a while: not under the lock.
        drop(free);
    }
}

/// An object borrowed from a [`Store`](super::Store): dereferences to `T`.
///
/// A lookup returns a `Ref` rather than an `Arc<T>` so that it writes nothing to the object's
/// memory (see `src/store/shard.rs`). Read the object through it; keep it with [`Ref::to_arc`].
/// While a `Ref` lives, the store keeps its object even if it is removed or replaced, until the
/// shard's next write after the `Ref` went. It is neither `Send` nor `Sync`:
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
    /// Points into an `Arc<T>` the shard holds, or whose count this `Ref` owns (module
    /// invariant).
    object: NonNull<T>,
    /// The hazard slot that protects `object`; `None` if this `Ref` owns a count instead.
    slot: Option<&'static Slot>,
    /// Borrows the store; neither `Send` nor `Sync` (the slot is this thread's).
    _shard: PhantomData<(&'a Shard<T>, *const ())>,
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
        // SAFETY: `ptr` is `Arc::as_ptr` of an `Arc<T>` that is held while `this` lives (module
        // invariant), so the count is at least one during both calls, and `from_raw` takes over
        // the count the first call added.
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
        // SAFETY: the object is held by an `Arc` while `self` lives (module invariant), and
        // nothing hands out `&mut` to an object inside an `Arc` the store shares.
        unsafe { self.object.as_ref() }
    }
}

impl<T> Drop for Ref<'_, T> {
    #[inline]
    fn drop(&mut self) {
        match self.slot {
            Some(slot) => hazard::release(slot),
            // SAFETY: `Shard::pin` added a count for this `Ref` to own (it forgot a clone of the
            // `Arc` whose `as_ptr` `object` is); given back once, here.
            None => unsafe { Arc::decrement_strong_count(self.object.as_ptr().cast_const()) },
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Ref<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_one_cache_line() {
        // The key (up to 37 bytes inline) and the `Arc` fill 48 bytes; the alignment pads the
        // rest, so no entry straddles two lines.
        assert_eq!(std::mem::size_of::<(StoreKey, Arc<u8>)>(), 48);
        assert_eq!(std::mem::size_of::<Entry<u8>>(), 64);
        assert_eq!(std::mem::align_of::<Entry<u8>>(), 64);
    }
}
