//! Delayed adds (docs/semantics.md W8): the heap behind [`WorkQueue::add_after`](super::WorkQueue::add_after).
//!
//! One timer task per queue (not one per key) owns the waiting: keys sit in a min-heap ordered by
//! their ready time, and a map from key to its live heap entry deduplicates them. Scheduling a key
//! that already waits keeps the **earlier** ready time. When a key becomes due the task hands it
//! to a sink (the queue's `add`), so the main queue deduplicates it against keys added directly.
//!
//! The heap uses lazy deletion: moving a key earlier pushes a second entry and re-points the map at
//! it (by sequence number); the old entry is skipped when it surfaces. Each key therefore has at
//! most one *live* entry, and stale ones are bounded by the number of "earlier" reschedules.
//!
//! Synchronization: the heap and map sit behind a `std::sync::Mutex` (short, non-async critical
//! sections, shared by every producer and the timer task). The task waits on a [`Notify`] with
//! exactly one consumer, so `notify_one` either wakes it or leaves a permit for its next wait: a
//! wake-up is never lost even if it arrives while the task is busy adding due keys. Producers only
//! notify when their key became the new earliest deadline, so bulk `add_after` calls with later
//! deadlines cost no wake-ups at all.
//!
//! The task is spawned on the first `add_after` with a positive delay, so a queue that never
//! delays anything needs no runtime and no task. It holds only a weak reference to the queue and
//! exits on shutdown, on drop of the queue, or when it finds the queue gone.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_util::future::select;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The shared state between `add_after` callers and the timer task.
pub(crate) struct DelayedAdds<K> {
    state: Mutex<DelayState<K>>,
    /// Wakes the timer task: a new earliest deadline, or stop.
    wake: Notify,
}

struct DelayState<K> {
    /// Min-heap by `(ready_at, seq)`; may hold stale entries (see module docs).
    heap: BinaryHeap<Entry<K>>,
    /// The live entry of each waiting key: `(ready_at, seq)`.
    live: HashMap<K, (Instant, u64)>,
    next_seq: u64,
    task_started: bool,
    stopped: bool,
}

/// A heap entry. Ordered by `(ready_at, seq)` only, reversed so that `BinaryHeap` (a max-heap)
/// pops the earliest first; the key takes no part in the order.
struct Entry<K> {
    ready_at: Instant,
    seq: u64,
    key: K,
}

impl<K> PartialEq for Entry<K> {
    fn eq(&self, other: &Self) -> bool {
        (self.ready_at, self.seq) == (other.ready_at, other.seq)
    }
}

impl<K> Eq for Entry<K> {}

impl<K> PartialOrd for Entry<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K> Ord for Entry<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.ready_at, other.seq).cmp(&(self.ready_at, self.seq))
    }
}

/// What a `schedule` call requires from its caller.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Scheduled {
    /// Nothing: the key already waits for an earlier (or equal) time, or a later one was added.
    Quietly,
    /// The key is the new earliest deadline and the timer task was told.
    WokeTimer,
    /// The timer task does not exist yet: the caller must call [`DelayedAdds::run`] on a task.
    SpawnTimer,
    /// Delayed adds were stopped; the key was dropped.
    Stopped,
}

impl<K> DelayedAdds<K> {
    /// A panic while holding this lock leaves the heap and the map consistent enough (at worst a
    /// stale entry or an unscheduled key), so poisoning is ignored.
    fn lock(&self) -> MutexGuard<'_, DelayState<K>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Drops every waiting key and makes the timer task exit (idempotent).
    pub(crate) fn stop(&self) {
        let mut state = self.lock();
        state.stopped = true;
        state.heap = BinaryHeap::new();
        state.live = HashMap::new();
        drop(state);
        self.wake.notify_one();
    }

    /// Number of keys waiting for their ready time.
    pub(crate) fn len(&self) -> usize {
        self.lock().live.len()
    }
}

impl<K: Clone + Eq + Hash> DelayedAdds<K> {
    pub(crate) fn new() -> Self {
        Self {
            state: Mutex::new(DelayState {
                heap: BinaryHeap::new(),
                live: HashMap::new(),
                next_seq: 0,
                task_started: false,
                stopped: false,
            }),
            wake: Notify::new(),
        }
    }

    /// Makes `key` due at `ready_at`, unless it is already due earlier.
    pub(crate) fn schedule(&self, key: K, ready_at: Instant) -> Scheduled {
        let mut state = self.lock();
        if state.stopped {
            return Scheduled::Stopped;
        }
        let seq = state.next_seq;
        match state.live.get_mut(&key) {
            Some(live) if live.0 <= ready_at => return Scheduled::Quietly,
            Some(live) => *live = (ready_at, seq),
            None => {
                state.live.insert(key.clone(), (ready_at, seq));
            }
        }
        state.next_seq += 1;
        state.heap.push(Entry { ready_at, seq, key });
        let is_earliest = state.heap.peek().is_some_and(|top| top.seq == seq);
        if !state.task_started {
            state.task_started = true;
            Scheduled::SpawnTimer
        } else if is_earliest {
            drop(state);
            self.wake.notify_one();
            Scheduled::WokeTimer
        } else {
            Scheduled::Quietly
        }
    }

    /// The timer loop. Each round moves every due key out of the heap (under the lock), hands
    /// them to `sink` (outside the lock: the sink takes the queue's own lock, and the two locks
    /// are never held together), then sleeps until the next deadline or a wake-up. `sink` returns
    /// `false` once the queue is gone, which ends the loop.
    pub(crate) async fn run(self: Arc<Self>, mut sink: impl FnMut(Vec<K>) -> bool) {
        loop {
            let mut due = Vec::new();
            let next_deadline = {
                let mut state = self.lock();
                if state.stopped {
                    return;
                }
                let now = Instant::now();
                while state.heap.peek().is_some_and(|top| top.ready_at <= now) {
                    let Some(entry) = state.heap.pop() else { break };
                    if state
                        .live
                        .get(&entry.key)
                        .is_some_and(|live| live.1 == entry.seq)
                    {
                        state.live.remove(&entry.key);
                        due.push(entry.key);
                    }
                }
                state.heap.peek().map(|top| top.ready_at)
            };
            if !due.is_empty() && !sink(due) {
                return;
            }
            match next_deadline {
                Some(deadline) => {
                    let sleep = pin!(tokio::time::sleep_until(deadline));
                    let _ = select(sleep, pin!(self.wake.notified())).await;
                }
                None => self.wake.notified().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn schedule_keeps_the_earliest_time_and_wakes_only_for_a_new_minimum() {
        let delayed = DelayedAdds::new();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(delayed.schedule("a", at(30)), Scheduled::SpawnTimer);
        assert_eq!(
            delayed.schedule("b", at(40)),
            Scheduled::Quietly,
            "not the earliest"
        );
        assert_eq!(
            delayed.schedule("a", at(50)),
            Scheduled::Quietly,
            "later time ignored"
        );
        assert_eq!(
            delayed.schedule("b", at(10)),
            Scheduled::WokeTimer,
            "new minimum"
        );
        assert_eq!(delayed.len(), 2);
        // "b" has a stale entry at 40 ms; only the live one (10 ms) may fire.
        let state = delayed.lock();
        assert_eq!(state.heap.len(), 3);
        assert_eq!(state.live.get("b").map(|live| live.0), Some(at(10)));
        drop(state);
        delayed.stop();
        assert_eq!(delayed.len(), 0);
        assert_eq!(delayed.schedule("c", at(1)), Scheduled::Stopped);
    }

    #[tokio::test(start_paused = true)]
    async fn run_skips_stale_entries_and_delivers_in_time_order() {
        let delayed = Arc::new(DelayedAdds::new());
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        delayed.schedule("a", at(30));
        delayed.schedule("b", at(20));
        delayed.schedule("a", at(10));
        let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel();
        let task = tokio::spawn(
            Arc::clone(&delayed).run(move |due| sender.send((Instant::now() - t0, due)).is_ok()),
        );
        let mut deliveries = Vec::new();
        for _ in 0..2 {
            deliveries.push(receiver.recv().await.unwrap());
        }
        assert_eq!(
            deliveries,
            [
                (Duration::from_millis(10), vec!["a"]),
                (Duration::from_millis(20), vec!["b"])
            ]
        );
        // The stale 30 ms entry of "a" delivers nothing.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(receiver.try_recv().is_err());
        delayed.stop();
        task.await.unwrap();
    }
}
