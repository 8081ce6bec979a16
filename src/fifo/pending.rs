//! The consumer's side of the fifo: the per-key coalescing map, the order in which keys leave, relist
//! bookkeeping and the has-synced count. Single-threaded: only the one consumer touches it.
//!
//! Invariants:
//! - keys leave in the order they became pending (a [`KeyedQueue`], O(keys pending) whatever
//!   came and went); a change merged into a pending key keeps its place;
//! - an entry holds one change, or a deletion followed by `Added(y)` (a re-create with a new uid);
//!   the second slot is always `Added`;
//! - `initial_outstanding` counts entries with `initial == true`;
//! - `raw_bytes` counts the JSON bytes of the raw objects the entries hold (a tombstone's last known
//!   state included);
//! - a watch event's object stays raw JSON ([`Held::Raw`]) while it is pending: it is decoded when
//!   its key is handed out, so an event replaced by a newer one is never decoded.

use crate::model::Metadata;
use std::collections::HashSet;
use std::sync::Arc;

use super::{DeletedObject, Delta, KnownObjects};
use crate::key_hash::KeyHasher;
use crate::keyed_queue::KeyedQueue;
use crate::model::Object;
use crate::watch::RawObject;

/// An object as the fifo holds it: decoded (listed objects, events given as [`Delta`]s), or a watch
/// event's JSON with the metadata the coalescing needs.
pub(super) enum Held<T> {
    Decoded(Arc<T>),
    Raw(RawObject),
}

impl<T> Clone for Held<T> {
    fn clone(&self) -> Self {
        match self {
            Held::Decoded(o) => Held::Decoded(o.clone()),
            Held::Raw(r) => Held::Raw(r.clone()),
        }
    }
}

impl<T> Held<T> {
    /// Gives a raw object's JSON an allocation of its own (see `RawObject::own_bytes`): the
    /// consumer calls it on what it takes in, before keeping it pending.
    pub(super) fn own_bytes(&mut self) {
        if let Held::Raw(r) = self {
            r.own_bytes();
        }
    }
}

impl<T: Object> Held<T> {
    pub(super) fn resource_version(&self) -> &str {
        match self {
            Held::Decoded(o) => o.meta().resource_version(),
            Held::Raw(r) => r.resource_version(),
        }
    }

    fn uid(&self) -> &str {
        match self {
            Held::Decoded(o) => o.meta().uid(),
            Held::Raw(r) => r.uid(),
        }
    }

    fn write_key(&self, buf: &mut String) {
        match self {
            Held::Decoded(o) => {
                buf.clear();
                let meta = o.meta();
                if !meta.namespace().is_empty() {
                    buf.push_str(meta.namespace());
                    buf.push('/');
                }
                buf.push_str(meta.name());
            }
            Held::Raw(r) => r.write_key(buf),
        }
    }

    /// 1 for a raw object, else 0.
    fn raw(&self) -> u64 {
        matches!(self, Held::Raw(_)) as u64
    }

    /// The JSON bytes of a raw object, else 0.
    pub(super) fn raw_bytes(&self) -> usize {
        match self {
            Held::Raw(r) => r.bytes().len(),
            Held::Decoded(_) => 0,
        }
    }
}

/// A pending change of one key: a [`Delta`] whose object may still be raw.
pub(super) enum Change<T> {
    Added(Held<T>),
    Modified(Held<T>),
    /// Deleted, with the final state from a watch event.
    Deleted(Held<T>),
    /// Deleted, inferred by a relist ([`DeletedObject::Tombstone`]). Boxed: rare, and inline it
    /// would make every pending entry a key's length larger.
    Tombstone(Box<Tombstone<T>>),
}

/// A relist's inferred deletion: the key and its last known state.
pub(super) struct Tombstone<T> {
    key: String,
    last_known: Held<T>,
}

impl<T> From<Delta<T>> for Change<T> {
    fn from(d: Delta<T>) -> Self {
        match d {
            Delta::Added(o) => Change::Added(Held::Decoded(o)),
            Delta::Modified(o) => Change::Modified(Held::Decoded(o)),
            Delta::Deleted(DeletedObject::Final(o)) => Change::Deleted(Held::Decoded(o)),
            Delta::Deleted(DeletedObject::Tombstone { key, last_known }) => {
                Change::Tombstone(Box::new(Tombstone {
                    key,
                    last_known: Held::Decoded(last_known),
                }))
            }
        }
    }
}

impl<T: Object> Change<T> {
    pub(super) fn held(&self) -> &Held<T> {
        match self {
            Change::Added(h) | Change::Modified(h) | Change::Deleted(h) => h,
            Change::Tombstone(t) => &t.last_known,
        }
    }

    pub(super) fn held_mut(&mut self) -> &mut Held<T> {
        match self {
            Change::Added(h) | Change::Modified(h) | Change::Deleted(h) => h,
            Change::Tombstone(t) => &mut t.last_known,
        }
    }

    pub(super) fn resource_version(&self) -> &str {
        self.held().resource_version()
    }

    /// A relist tombstone's key (`None` for other changes).
    pub(super) fn tombstone_key(&self) -> Option<&str> {
        match self {
            Change::Tombstone(t) => Some(&t.key),
            _ => None,
        }
    }

    pub(super) fn is_tombstone(&self) -> bool {
        matches!(self, Change::Tombstone { .. })
    }

    fn is_deletion(&self) -> bool {
        matches!(self, Change::Deleted(_) | Change::Tombstone { .. })
    }

    /// Writes the cache key into `buf` (cleared first).
    fn write_key(&self, buf: &mut String) {
        match self {
            Change::Tombstone(t) => {
                buf.clear();
                buf.push_str(&t.key);
            }
            other => other.held().write_key(buf),
        }
    }

    /// Turns the change into the [`Delta`] handed out, decoding a raw object with `decode`.
    pub(super) fn into_delta<E>(
        self,
        decode: &mut impl FnMut(RawObject) -> Result<Arc<T>, E>,
    ) -> Result<Delta<T>, E> {
        let mut resolve = |h: Held<T>| match h {
            Held::Decoded(o) => Ok(o),
            Held::Raw(r) => decode(r),
        };
        Ok(match self {
            Change::Added(h) => Delta::Added(resolve(h)?),
            Change::Modified(h) => Delta::Modified(resolve(h)?),
            Change::Deleted(h) => Delta::Deleted(DeletedObject::Final(resolve(h)?)),
            Change::Tombstone(t) => {
                let Tombstone { key, last_known } = *t;
                Delta::Deleted(DeletedObject::Tombstone {
                    key,
                    last_known: resolve(last_known)?,
                })
            }
        })
    }
}

pub(super) struct Entry<T> {
    pub(super) first: Change<T>,
    /// Boxed: only a deletion followed by a re-create with a new uid fills it.
    pub(super) second: Option<Box<Change<T>>>,
    pub(super) initial: bool,
}

impl<T: Object> Entry<T> {
    /// Bytes of the raw objects this entry holds.
    fn raw_bytes(&self) -> usize {
        self.first.held().raw_bytes() + self.second.as_ref().map_or(0, |c| c.held().raw_bytes())
    }
    fn last(&self) -> &Change<T> {
        self.second.as_deref().unwrap_or(&self.first)
    }
    fn last_mut(&mut self) -> &mut Change<T> {
        self.second.as_deref_mut().unwrap_or(&mut self.first)
    }
}

/// Counters the consumer keeps and publishes (see `FifoMetrics`).
#[derive(Default, Clone, Copy)]
pub(super) struct Counters {
    pub(super) received: u64,
    /// Watch events among `received` (listed objects aside).
    pub(super) events: u64,
    pub(super) coalesced: u64,
    pub(super) dropped_stale: u64,
    /// Watch events taken in as raw JSON (decoded only if they survive).
    pub(super) raw_received: u64,
}

pub(super) struct Pending<T> {
    map: KeyedQueue<Entry<T>>,
    /// The running relist's listed keys, if a relist is running.
    relist: Option<ListedKeys>,
    pub(super) first_list_done: bool,
    pub(super) initial_outstanding: usize,
    pub(super) counters: Counters,
    /// JSON bytes of the raw objects held by the entries of `map` (invariants above): the
    /// consumer's drain is bounded by it, so past the budget undecoded objects wait in the inbox,
    /// then in the socket, not here.
    raw_bytes: usize,
    /// Scratch space for computing keys without allocating.
    key_buf: String,
}

/// What a running relist knows of the keys it listed: as much as its end needs to find the keys
/// that were not listed.
enum ListedKeys {
    /// The relist began with nothing stored and nothing pending, and no watch event has come in
    /// since: every key stored or pending now was listed, so the end has no key to tombstone and
    /// no set is kept. The first list's usual case; for 10,000 Endpoints the set and the end's
    /// scan of it took ~1.5 ms, on the consumer, after the list's last page (where a sync waits).
    All,
    /// Every key listed so far.
    Set(HashSet<Arc<str>, KeyHasher>),
}

/// `a` and `b` are the same version. Empty versions are unknown and never equal.
fn rv_equal(a: &str, b: &str) -> bool {
    !a.is_empty() && a == b
}

/// `new` is a duplicate of, or older than, `old` (X6: order only when both parse as integers).
fn rv_stale(new: &str, old: &str) -> bool {
    if rv_equal(new, old) {
        return true;
    }
    matches!((new.parse::<u64>(), old.parse::<u64>()), (Ok(n), Ok(o)) if n < o)
}

impl<T: Object> Pending<T> {
    pub(super) fn new() -> Self {
        Pending {
            map: KeyedQueue::new(),
            relist: None,
            first_list_done: false,
            initial_outstanding: 0,
            counters: Counters::default(),
            raw_bytes: 0,
            key_buf: String::new(),
        }
    }

    /// Number of keys with something pending.
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// JSON bytes of the raw (undecoded) objects the pending entries hold.
    pub(super) fn raw_bytes(&self) -> usize {
        self.raw_bytes
    }

    /// Takes the entry of the key that became pending first.
    pub(super) fn pop_front(&mut self) -> Option<(Arc<str>, Entry<T>)> {
        let (key, entry) = self.map.pop_front()?;
        self.raw_bytes -= entry.raw_bytes();
        Some((key, entry))
    }

    fn insert_new(&mut self, key: Arc<str>, change: Change<T>) {
        self.raw_bytes += change.held().raw_bytes();
        self.map.push_back(
            key,
            Entry {
                first: change,
                second: None,
                initial: false,
            },
        );
    }

    fn remove_entry(&mut self, key: &str) {
        if let Some(e) = self.map.remove(key) {
            self.raw_bytes -= e.raw_bytes();
            if e.initial {
                self.initial_outstanding -= 1;
            }
        }
    }

    /// Marks the entry of `key` as part of the first list, while the first list is running.
    fn mark_initial(&mut self, key: &str) {
        if self.first_list_done || self.relist.is_none() {
            return;
        }
        if let Some(e) = self.map.get_mut(key) {
            if !e.initial {
                e.initial = true;
                self.initial_outstanding += 1;
            }
        }
    }

    /// A watch event: drops it if stale, else coalesces it (docs/informer-design.md §4).
    pub(super) fn event(&mut self, change: Change<T>, known: &dyn KnownObjects<T>) {
        self.track_listed_keys(known);
        self.counters.received += 1;
        self.counters.events += 1;
        self.counters.raw_received += change.held().raw();
        let mut key = std::mem::take(&mut self.key_buf);
        change.write_key(&mut key);
        let stale = match self.map.get(key.as_str()) {
            Some(e) => rv_stale(change.resource_version(), e.last().resource_version()),
            None => {
                let rv = change.resource_version();
                !rv.is_empty() && known.holds_version(&key, rv)
            }
        };
        if stale {
            self.counters.dropped_stale += 1;
        } else {
            self.coalesce(&key, change, known);
        }
        self.key_buf = key;
    }

    /// Coalesces `e` into the entry of `key` by the table of docs/informer-design.md §4 (no
    /// staleness check).
    fn coalesce(&mut self, key: &str, e: Change<T>, known: &dyn KnownObjects<T>) {
        let Some(entry) = self.map.get_mut(key) else {
            self.insert_new(key.into(), e);
            return;
        };
        self.counters.coalesced += 1;
        let raw_before = entry.raw_bytes();
        self.coalesce_entry(key, e, known);
        // The entry may be gone (an Added and a Deleted cancelled out): then `remove_entry`
        // has taken off what it held.
        if let Some(entry) = self.map.get(key) {
            self.raw_bytes = self.raw_bytes + entry.raw_bytes() - raw_before;
        }
    }

    /// The table of `coalesce`, for a key that has an entry.
    fn coalesce_entry(&mut self, key: &str, e: Change<T>, known: &dyn KnownObjects<T>) {
        let Some(entry) = self.map.get_mut(key) else {
            return;
        };
        let two = entry.second.is_some();
        match (entry.last_mut(), e) {
            (last @ Change::Added(_), Change::Added(y) | Change::Modified(y)) => {
                *last = Change::Added(y)
            }
            (last @ Change::Modified(_), Change::Added(y) | Change::Modified(y)) => {
                *last = Change::Modified(y)
            }
            (Change::Added(_), d @ (Change::Deleted(_) | Change::Tombstone { .. })) => {
                // Did the key exist before this Added? After a pending deletion it did not;
                // otherwise ask the store.
                if !two && known.get_by_key(key).is_some() {
                    entry.first = d;
                } else if two {
                    entry.second = None;
                } else {
                    self.remove_entry(key);
                }
            }
            (last @ Change::Modified(_), d @ (Change::Deleted(_) | Change::Tombstone { .. })) => {
                *last = d
            }
            (x @ (Change::Deleted(_) | Change::Tombstone { .. }), Change::Added(y)) => {
                if x.held().uid() != y.uid() {
                    entry.second = Some(Box::new(Change::Added(y)));
                } else {
                    entry.first = Change::Modified(y);
                }
            }
            (last @ (Change::Deleted(_) | Change::Tombstone { .. }), Change::Modified(y)) => {
                *last = Change::Modified(y)
            }
            (x @ (Change::Deleted(_) | Change::Tombstone { .. }), d) => {
                // Deleted(newer); a tombstone never replaces a known final state.
                if !(matches!(x, Change::Deleted(_)) && d.is_tombstone()) {
                    *x = d;
                }
            }
        }
    }

    /// Whether a relist has begun and not ended.
    pub(super) fn relist_running(&self) -> bool {
        self.relist.is_some()
    }

    /// Starts a relist (restarting one that was abandoned mid-way).
    pub(super) fn begin_relist(&mut self, known: &dyn KnownObjects<T>) {
        self.relist = Some(if self.map.is_empty() && known.is_empty() {
            ListedKeys::All
        } else {
            ListedKeys::Set(HashSet::with_hasher(self.map.hasher()))
        });
    }

    /// A watch event comes in during a relist that began from nothing: from here on the keys
    /// listed are no longer all the keys there are, so the set is built from what is stored and
    /// pending, all of it listed so far (see [`ListedKeys::All`]).
    fn track_listed_keys(&mut self, known: &dyn KnownObjects<T>) {
        if !matches!(self.relist, Some(ListedKeys::All)) {
            return;
        }
        let mut set = HashSet::with_hasher(self.map.hasher());
        for (key, _) in self.map.iter() {
            set.insert(key.clone());
        }
        known.for_each_key(&mut |k| {
            if !set.contains(k) {
                set.insert(Arc::from(k));
            }
        });
        self.relist = Some(ListedKeys::Set(set));
    }

    /// One listed object of the running relist.
    pub(super) fn listed(&mut self, obj: Held<T>, known: &dyn KnownObjects<T>) {
        self.counters.received += 1;
        self.counters.raw_received += obj.raw();
        let mut key = std::mem::take(&mut self.key_buf);
        obj.write_key(&mut key);
        let key: Arc<str> = {
            let k = Arc::from(key.as_str());
            self.key_buf = key;
            k
        };
        let listed = self
            .relist
            .get_or_insert_with(|| ListedKeys::Set(HashSet::with_hasher(self.map.hasher())));
        if let ListedKeys::Set(set) = listed {
            set.insert(key.clone());
        }
        match self.map.get(&key) {
            None => match known.get_by_key(&key) {
                // Unchanged: nothing to do, and the store keeps its value. Older than the stored
                // object (a list served by a cache that is behind what the store has seen, such
                // as a LIST at "0" after a cut streaming list): never move the key backwards.
                Some(s) if rv_stale(obj.resource_version(), s.meta().resource_version()) => {
                    self.counters.dropped_stale += 1;
                }
                Some(_) => self.insert_new(key.clone(), Change::Modified(obj)),
                None => self.insert_new(key.clone(), Change::Added(obj)),
            },
            Some(e) => {
                let change = if e.last().is_deletion() {
                    Change::Added(obj)
                } else {
                    Change::Modified(obj)
                };
                if rv_stale(change.resource_version(), e.last().resource_version()) {
                    self.counters.dropped_stale += 1;
                } else {
                    self.coalesce(&key, change, known);
                }
            }
        }
        self.mark_initial(&key);
    }

    /// Ends the running relist: every key known to the store or pending that was not listed gets a
    /// `Deleted(Tombstone)`. Returns whether this completed the first list.
    pub(super) fn end_relist(&mut self, known: &dyn KnownObjects<T>) -> bool {
        let listed = match self.relist.take() {
            Some(ListedKeys::All) => return self.complete_relist(),
            Some(ListedKeys::Set(set)) => set,
            None => HashSet::with_hasher(self.map.hasher()),
        };
        let mut gone: Vec<Arc<str>> = Vec::new();
        for (key, e) in self.map.iter() {
            if !listed.contains(key) && !e.last().is_deletion() {
                gone.push(key.clone());
            }
        }
        let mut stored_only: Vec<Arc<str>> = Vec::new();
        known.for_each_key(&mut |k| {
            if !listed.contains(k) && !self.map.contains_key(k) {
                stored_only.push(k.into());
            }
        });
        // Keep `relist` set while coalescing so the tombstoned entries count as initial.
        self.relist = Some(ListedKeys::Set(listed));
        for key in gone {
            // The pending entry's newest state becomes the tombstone's last known state.
            let Some(entry) = self.map.get(&key) else {
                continue;
            };
            let last_known = entry.last().held().clone();
            let tomb = Change::Tombstone(Box::new(Tombstone {
                key: key.to_string(),
                last_known,
            }));
            self.coalesce(&key, tomb, known);
            self.mark_initial(&key);
        }
        for key in stored_only {
            let Some(obj) = known.get_by_key(&key) else {
                continue;
            };
            let tomb = Change::Tombstone(Box::new(Tombstone {
                key: key.to_string(),
                last_known: Held::Decoded(obj),
            }));
            self.coalesce(&key, tomb, known);
            self.mark_initial(&key);
        }
        self.complete_relist()
    }

    /// No relist runs any more; true if this completed the first list.
    fn complete_relist(&mut self) -> bool {
        self.relist = None;
        let first = !self.first_list_done;
        self.first_list_done = true;
        first
    }

    /// The has-synced condition: the first list is complete and all of its entries were processed.
    pub(super) fn synced(&self) -> bool {
        self.first_list_done && self.initial_outstanding == 0
    }
}
