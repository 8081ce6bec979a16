//! The consumer's side of the fifo: the per-key coalescing map, the order in which keys leave, relist
//! bookkeeping and the has-synced count. Single-threaded: only the one consumer touches it.
//!
//! Invariants:
//! - every key in `map` has exactly one live entry in `order`, the one whose sequence number equals
//!   the entry's `seq`; other entries of `order` are dead and skipped (and compacted away when they
//!   outnumber live ones, so `order` stays O(keys));
//! - an entry holds one delta, or `Deleted(x)` followed by `Added(y)` (a re-create with a new uid);
//!   the second slot is always `Added`;
//! - `initial_outstanding` counts entries with `initial == true`.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::{DeletedObject, Delta, KnownObjects};
use crate::model::Object;

pub(super) struct Entry<T> {
    pub(super) first: Delta<T>,
    pub(super) second: Option<Delta<T>>,
    seq: u64,
    pub(super) initial: bool,
}

impl<T> Entry<T> {
    fn last(&self) -> &Delta<T> {
        self.second.as_ref().unwrap_or(&self.first)
    }
    fn last_mut(&mut self) -> &mut Delta<T> {
        self.second.as_mut().unwrap_or(&mut self.first)
    }
}

/// Counters the consumer keeps and publishes (see `FifoMetrics`).
#[derive(Default, Clone, Copy)]
pub(super) struct Counters {
    pub(super) received: u64,
    pub(super) coalesced: u64,
    pub(super) dropped_stale: u64,
}

pub(super) struct Pending<T> {
    map: HashMap<Arc<str>, Entry<T>>,
    order: VecDeque<(u64, Arc<str>)>,
    next_seq: u64,
    /// Keys listed so far by the running relist, if one is running.
    relist: Option<HashSet<Arc<str>>>,
    pub(super) first_list_done: bool,
    pub(super) initial_outstanding: usize,
    pub(super) counters: Counters,
    /// Scratch space for computing keys without allocating.
    key_buf: String,
}

/// Writes the cache key of `delta` into `buf` (cleared first).
fn write_key<T: Object>(delta: &Delta<T>, buf: &mut String) {
    buf.clear();
    match delta {
        Delta::Deleted(DeletedObject::Tombstone { key, .. }) => buf.push_str(key),
        other => {
            let meta = other.object().meta();
            if !meta.namespace.is_empty() {
                buf.push_str(&meta.namespace);
                buf.push('/');
            }
            buf.push_str(&meta.name);
        }
    }
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
            map: HashMap::new(),
            order: VecDeque::new(),
            next_seq: 0,
            relist: None,
            first_list_done: false,
            initial_outstanding: 0,
            counters: Counters::default(),
            key_buf: String::new(),
        }
    }

    /// Number of keys with something pending.
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Takes the entry of the key that became pending first.
    pub(super) fn pop_front(&mut self) -> Option<(Arc<str>, Entry<T>)> {
        while let Some((seq, key)) = self.order.pop_front() {
            if self.map.get(&key).is_some_and(|e| e.seq == seq) {
                let entry = self.map.remove(&key)?;
                return Some((key, entry));
            }
        }
        None
    }

    fn insert_new(&mut self, key: Arc<str>, delta: Delta<T>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.push_back((seq, key.clone()));
        self.map.insert(
            key,
            Entry {
                first: delta,
                second: None,
                seq,
                initial: false,
            },
        );
        if self.order.len() > 64 && self.order.len() > 2 * self.map.len() {
            let map = &self.map;
            self.order
                .retain(|(s, k)| map.get(k).is_some_and(|e| e.seq == *s));
        }
    }

    fn remove_entry(&mut self, key: &str) {
        if let Some(e) = self.map.remove(key) {
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

    /// A watch event: drops it if stale, else coalesces it (informer-design §4).
    pub(super) fn event(&mut self, delta: Delta<T>, known: &dyn KnownObjects<T>) {
        self.counters.received += 1;
        let mut key = std::mem::take(&mut self.key_buf);
        write_key(&delta, &mut key);
        let stale = match self.map.get(key.as_str()) {
            Some(e) => rv_stale(delta.resource_version(), e.last().resource_version()),
            None => known
                .get_by_key(&key)
                .is_some_and(|s| rv_equal(delta.resource_version(), &s.meta().resource_version)),
        };
        if stale {
            self.counters.dropped_stale += 1;
        } else {
            self.coalesce(&key, delta, known);
        }
        self.key_buf = key;
    }

    /// Coalesces `e` into the entry of `key` by the table of informer-design §4 (no staleness check).
    fn coalesce(&mut self, key: &str, e: Delta<T>, known: &dyn KnownObjects<T>) {
        let Some(entry) = self.map.get_mut(key) else {
            self.insert_new(key.into(), e);
            return;
        };
        self.counters.coalesced += 1;
        let two = entry.second.is_some();
        match (entry.last_mut(), e) {
            (last @ Delta::Added(_), Delta::Added(y) | Delta::Modified(y)) => {
                *last = Delta::Added(y)
            }
            (last @ Delta::Modified(_), Delta::Added(y) | Delta::Modified(y)) => {
                *last = Delta::Modified(y)
            }
            (Delta::Added(_), Delta::Deleted(d)) => {
                // Did the key exist before this Added? After a pending Deleted it did not; otherwise
                // ask the store.
                if !two && known.get_by_key(key).is_some() {
                    entry.first = Delta::Deleted(d);
                } else if two {
                    entry.second = None;
                } else {
                    self.remove_entry(key);
                }
            }
            (last @ Delta::Modified(_), Delta::Deleted(d)) => *last = Delta::Deleted(d),
            (Delta::Deleted(x), Delta::Added(y)) => {
                if x.object().meta().uid != y.meta().uid {
                    entry.second = Some(Delta::Added(y));
                } else {
                    entry.first = Delta::Modified(y);
                }
            }
            (last @ Delta::Deleted(_), Delta::Modified(y)) => *last = Delta::Modified(y),
            (Delta::Deleted(x), Delta::Deleted(d)) => {
                // Deleted(newer); a tombstone never replaces a known final state.
                let keep_final = matches!(x, DeletedObject::Final(_))
                    && matches!(d, DeletedObject::Tombstone { .. });
                if !keep_final {
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
    pub(super) fn begin_relist(&mut self) {
        self.relist = Some(HashSet::new());
    }

    /// One listed object of the running relist.
    pub(super) fn listed(&mut self, obj: Arc<T>, known: &dyn KnownObjects<T>) {
        self.counters.received += 1;
        let key: Arc<str> = obj.meta().key().into();
        self.relist
            .get_or_insert_with(HashSet::new)
            .insert(key.clone());
        match self.map.get(&key) {
            None => match known.get_by_key(&key) {
                // Unchanged: nothing to do, and the store keeps its value.
                Some(s) if rv_equal(&s.meta().resource_version, &obj.meta().resource_version) => {
                    self.counters.dropped_stale += 1;
                }
                Some(_) => self.insert_new(key.clone(), Delta::Modified(obj)),
                None => self.insert_new(key.clone(), Delta::Added(obj)),
            },
            Some(e) => {
                let delta = match e.last() {
                    Delta::Deleted(_) => Delta::Added(obj),
                    _ => Delta::Modified(obj),
                };
                if rv_stale(delta.resource_version(), e.last().resource_version()) {
                    self.counters.dropped_stale += 1;
                } else {
                    self.coalesce(&key, delta, known);
                }
            }
        }
        self.mark_initial(&key);
    }

    /// Ends the running relist: every key known to the store or pending that was not listed gets a
    /// `Deleted(Tombstone)`. Returns whether this completed the first list.
    pub(super) fn end_relist(&mut self, known: &dyn KnownObjects<T>) -> bool {
        let listed = self.relist.take().unwrap_or_default();
        let mut gone: Vec<(Arc<str>, Arc<T>)> = Vec::new();
        for (key, e) in &self.map {
            if !listed.contains(key) && !matches!(e.last(), Delta::Deleted(_)) {
                gone.push((key.clone(), e.last().object().clone()));
            }
        }
        let mut stored_only: Vec<Arc<str>> = Vec::new();
        known.for_each_key(&mut |k| {
            if !listed.contains(k) && !self.map.contains_key(k) {
                stored_only.push(k.into());
            }
        });
        gone.extend(stored_only.into_iter().filter_map(|k| {
            let obj = known.get_by_key(&k)?;
            Some((k, obj))
        }));
        // Keep `relist` set while coalescing so the tombstoned entries count as initial.
        self.relist = Some(listed);
        for (key, last_known) in gone {
            let tomb = DeletedObject::Tombstone {
                key: key.to_string(),
                last_known,
            };
            self.coalesce(&key, Delta::Deleted(tomb), known);
            self.mark_initial(&key);
        }
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
