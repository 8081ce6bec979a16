//! A queue of keys, each with one value, that leave in the order they first arrived
//! (crate-private). The fifo's pending changes and every handler's mailbox are this queue with
//! their own coalescing rules on top: a newer change for a waiting key merges into its value and
//! keeps its place; a key whose value is removed loses its place, and comes back at the end.
//!
//! Invariants:
//! - every key of `values` has exactly one live place in `order`: the one whose sequence number
//!   equals its `seq`. Other places are dead (their key was removed, or removed and queued again
//!   later) and are skipped when met;
//! - `order` holds at most `max(COMPACT_FLOOR, 2 × len) + 1` places: once dead places outnumber
//!   live ones, a push compacts them away. So a queue that sees keys come and go for ever holds
//!   O(keys waiting), never O(keys ever seen).
//!
//! ```ignore
//! let mut q = KeyedQueue::new();
//! q.push_back("a".into(), 1);
//! q.push_back("b".into(), 2);
//! *q.get_mut("a").unwrap() += 10; // merged: "a" keeps its place
//! q.remove("b");
//! assert_eq!(q.pop_front(), Some(("a".into(), 11)));
//! assert_eq!(q.pop_front(), None);
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::key_hash::KeyHasher;

/// Below this many places `order` is never compacted (compacting a short queue costs more than
/// the dead places it frees).
const COMPACT_FLOOR: usize = 64;

/// A value and the sequence number of its key's live place in `order`.
struct Place<V> {
    seq: u64,
    value: V,
}

/// Keys in the order they became waiting, one value per key (see the module docs).
pub(crate) struct KeyedQueue<V> {
    values: HashMap<Arc<str>, Place<V>, KeyHasher>,
    order: VecDeque<(u64, Arc<str>)>,
    next_seq: u64,
}

impl<V> KeyedQueue<V> {
    pub(crate) fn new() -> Self {
        KeyedQueue {
            values: HashMap::with_hasher(KeyHasher::new()),
            order: VecDeque::new(),
            next_seq: 0,
        }
    }

    /// Keys waiting.
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The hasher of the keys (for a set of keys beside the queue).
    pub(crate) fn hasher(&self) -> KeyHasher {
        *self.values.hasher()
    }

    pub(crate) fn contains_key(&self, key: &str) -> bool {
        self.values.contains_key(key)
    }

    pub(crate) fn get(&self, key: &str) -> Option<&V> {
        self.values.get(key).map(|p| &p.value)
    }

    /// The value of a waiting key, to merge a newer change into; the key keeps its place.
    pub(crate) fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.values.get_mut(key).map(|p| &mut p.value)
    }

    /// Every waiting key and its value, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &V)> {
        self.values.iter().map(|(k, p)| (k, &p.value))
    }

    /// Queues a key that is not waiting, behind every waiting key.
    pub(crate) fn push_back(&mut self, key: Arc<str>, value: V) {
        self.queue(key, value, false);
    }

    /// Queues a key that is not waiting, ahead of every waiting key (a value taken by
    /// [`pop_front`](Self::pop_front) that must go first again).
    pub(crate) fn push_front(&mut self, key: Arc<str>, value: V) {
        self.queue(key, value, true);
    }

    /// Takes a key out of the queue; its place becomes dead.
    pub(crate) fn remove(&mut self, key: &str) -> Option<V> {
        self.values.remove(key).map(|p| p.value)
    }

    /// Takes the key that has waited longest.
    pub(crate) fn pop_front(&mut self) -> Option<(Arc<str>, V)> {
        while let Some((seq, key)) = self.order.pop_front() {
            if self.values.get(&key).is_some_and(|p| p.seq == seq) {
                let place = self.values.remove(&key)?;
                return Some((key, place.value));
            }
        }
        None
    }

    /// Places in `order`, live or dead (for tests of the bound).
    #[cfg(test)]
    pub(crate) fn places(&self) -> usize {
        self.order.len()
    }

    /// Gives a key that is not waiting a new live place, at the front or at the back.
    fn queue(&mut self, key: Arc<str>, value: V, at_front: bool) {
        let seq = self.next_seq;
        self.next_seq += 1;
        if at_front {
            self.order.push_front((seq, key.clone()));
        } else {
            self.order.push_back((seq, key.clone()));
        }
        let old = self.values.insert(key, Place { seq, value });
        debug_assert!(old.is_none(), "queued a waiting key");
        self.compact();
    }

    /// Drops the dead places once they outnumber the live ones (the second invariant).
    fn compact(&mut self) {
        if self.order.len() > COMPACT_FLOOR && self.order.len() > 2 * self.values.len() {
            let values = &self.values;
            self.order
                .retain(|(seq, k)| values.get(k).is_some_and(|p| p.seq == *seq));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_leave_in_the_order_they_first_arrived_and_a_merge_keeps_the_place() {
        let mut q = KeyedQueue::new();
        q.push_back("a".into(), 1);
        q.push_back("b".into(), 2);
        *q.get_mut("a").unwrap() += 10;
        q.push_front("c".into(), 3);
        assert_eq!(q.pop_front(), Some(("c".into(), 3)));
        assert_eq!(q.pop_front(), Some(("a".into(), 11)));
        assert_eq!(q.pop_front(), Some(("b".into(), 2)));
        assert_eq!(q.pop_front(), None);
    }

    #[test]
    fn a_removed_key_loses_its_place_and_comes_back_at_the_end() {
        let mut q = KeyedQueue::new();
        q.push_back("a".into(), 1);
        q.push_back("b".into(), 2);
        assert_eq!(q.remove("a"), Some(1));
        q.push_back("a".into(), 3);
        assert_eq!(q.pop_front(), Some(("b".into(), 2)));
        assert_eq!(q.pop_front(), Some(("a".into(), 3)));
        assert!(q.is_empty());
    }

    #[test]
    fn keys_that_come_and_go_for_ever_leave_no_trail_of_dead_places() {
        let mut q = KeyedQueue::new();
        q.push_back("stays".into(), 0);
        for i in 0..100_000 {
            let key: Arc<str> = format!("k{}", i % 1000).into();
            q.push_back(key.clone(), i);
            q.remove(&key);
        }
        assert_eq!(q.len(), 1);
        assert!(q.places() <= COMPACT_FLOOR + 1, "{} places", q.places());
        assert_eq!(q.pop_front(), Some(("stays".into(), 0)));
    }
}
