//! [`WorkQueue`]: the deduplicating, delaying, rate-limited queue (docs/semantics.md W1-W9).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use super::delaying::{DelayedAdds, Scheduled};
use super::metrics::{DurationStats, WorkQueueMetrics};
use super::rate_limiter::{DefaultControllerRateLimiter, RateLimiter};

/// A deduplicating work queue for controller keys, with delayed and rate-limited adds.
///
/// This is client-go's `workqueue.TypedRateLimitingInterface` in one type:
///
/// * [`add`](Self::add) deduplicates: a key waiting in the queue is not queued twice (W2);
/// * [`get`](Self::get) hands a key to one worker, which must call [`done`](Self::done) when it
///   finishes; a key is never handed to two workers at once, and a key added while it is being
///   processed is handed out again after `done` (W3, W4);
/// * [`add_after`](Self::add_after) adds a key once a delay has passed, the earlier time winning
///   for a key added twice (W8);
/// * [`add_rate_limited`](Self::add_rate_limited) adds a key after the delay its [`RateLimiter`]
///   decides, and [`forget`](Self::forget) resets that limiter for the key (W9).
///
/// `WorkQueue` is a cheap handle: clones share the same queue, so informer event handlers and
/// workers each hold their own clone. Keys are typically `String`s (`namespace/name`) or small
/// structs; they are cloned a few times per add, so keep them cheap to clone.
///
/// # Example
///
/// ```
/// use informer::workqueue::WorkQueue;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = WorkQueue::new();
/// queue.add("default/web".to_string());
/// queue.add("default/web".to_string()); // already waiting: deduplicated
/// assert_eq!(queue.len(), 1);
///
/// let key = queue.get().await.unwrap();
/// // ... reconcile `key` ...
/// queue.forget(&key); // success: reset its backoff
/// queue.done(&key);
///
/// queue.shut_down();
/// assert_eq!(queue.get().await, None);
/// # }
/// ```
pub struct WorkQueue<K> {
    shared: Arc<Shared<K>>,
}

impl<K> Clone for WorkQueue<K> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<K> std::fmt::Debug for WorkQueue<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.shared.lock();
        f.debug_struct("WorkQueue")
            .field("len", &state.queue.len())
            .field("in_flight", &state.in_flight)
            .field("shutting_down", &state.shutting_down)
            .finish_non_exhaustive()
    }
}

/// Everything the handles share.
///
/// Synchronization: the queue and the dirty/processing marks change together (W1's invariant spans
/// them), so they sit behind one `std::sync::Mutex`. Critical sections are a few hash and
/// deque operations and never await, which makes a blocking mutex the cheapest correct choice (an
/// async mutex would add a wait queue and cannot be held less). Waiting is done outside the lock
/// on two [`Notify`]s; every waiter registers interest *before* checking the state under the lock,
/// and every state change that could end a wait notifies *after* releasing it, so no wake-up can
/// fall between a waiter's check and its sleep.
struct Shared<K> {
    state: Mutex<State<K>>,
    /// One `notify_one` per key pushed onto `queue` (wakes one `get`); `notify_waiters` on
    /// shutdown (wakes them all, to return `None` once the queue is empty).
    key_pushed: Notify,
    /// `notify_waiters` when `processing` becomes empty during a drain, or when `shut_down`
    /// cancels a drain: wakes `shut_down_with_drain`.
    drain_progress: Notify,
    delayed: Arc<DelayedAdds<K>>,
    limiter: Box<dyn RateLimiter<K>>,
}

struct State<K> {
    /// Keys ready to be handed out, in FIFO order. Every key here is dirty and not processing
    /// (W1).
    queue: VecDeque<K>,
    /// client-go's `dirty` and `processing` sets merged into one map, so that each operation
    /// hashes the key once or twice instead of up to four times. A key is present iff it is
    /// dirty, processing, or both; see [`KeyState`].
    keys: HashMap<K, KeyState>,
    /// Number of keys whose `processing_since` is set.
    in_flight: usize,
    shutting_down: bool,
    /// Set by `shut_down_with_drain`, cleared by `shut_down` (which cancels the drain wait).
    drain: bool,
    adds: u64,
    retries: u64,
    queue_latency: DurationStats,
    work_duration: DurationStats,
    /// Whether to read the clock for the latency/duration metrics (see `set_timing_metrics`).
    timing_metrics: bool,
    /// The timestamp stored in place of a clock reading while `timing_metrics` is off.
    epoch: Instant,
    /// The name the metrics know the queue by (client-go's `Name`), if given.
    name: Option<Arc<str>>,
    /// The queue's Prometheus series, once it has a name.
    #[cfg(feature = "metrics")]
    recorder: Option<crate::metrics::QueueRecorder>,
}

impl<K> State<K> {
    /// The longest running processor and the unfinished work: the longest and the summed time
    /// the keys in flight have been processed so far (zero while timing metrics are off).
    fn running_times(&self) -> (Duration, Duration) {
        let mut longest = Duration::ZERO;
        let mut unfinished = Duration::ZERO;
        if self.timing_metrics {
            let now = Instant::now();
            for key_state in self.keys.values() {
                if let Some(started) = key_state.processing_since {
                    let running = now.saturating_duration_since(started);
                    longest = longest.max(running);
                    unfinished = unfinished.saturating_add(running);
                }
            }
        }
        (longest, unfinished)
    }

    /// The time to stamp a key with: the clock, or a constant if timing metrics are off.
    fn now(&self) -> Instant {
        if self.timing_metrics {
            Instant::now()
        } else {
            self.epoch
        }
    }
}

/// Where a key stands. Stored only while at least one field is set.
#[derive(Clone, Copy, Debug)]
struct KeyState {
    /// Dirty (needs processing) since this add; the start of the queue latency metric. A dirty
    /// key that is not processing is in `queue`; a dirty key that is processing is pushed onto
    /// `queue` by `done`.
    dirty_since: Option<Instant>,
    /// Processing (handed out by `get`, no `done` yet) since then; the start of the work
    /// duration metric.
    processing_since: Option<Instant>,
}

impl<K> Shared<K> {
    /// Locks the queue state. Nothing in here panics while the lock is held (hashing and
    /// equality of `K` aside), and a panic there leaves the sets usable, so poisoning is ignored
    /// rather than turning one bad key into a dead queue.
    fn lock(&self) -> MutexGuard<'_, State<K>> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<K: Clone + Eq + Hash> Shared<K> {
    /// W2. Returns whether the key was pushed onto the queue (and one getter must be woken).
    fn add_locked(state: &mut State<K>, key: K) -> bool {
        if state.shutting_down {
            return false;
        }
        // Read the clock only when the key is not deduplicated away (the common case under load).
        let (timing_metrics, epoch) = (state.timing_metrics, state.epoch);
        let now = || {
            if timing_metrics {
                Instant::now()
            } else {
                epoch
            }
        };
        match state.keys.get_mut(&key) {
            // Already dirty: either waiting in the queue (FIFO `Touch` is a no-op) or being
            // processed and requeued at `done`.
            Some(KeyState {
                dirty_since: Some(_),
                ..
            }) => false,
            // Processing and clean: mark dirty, `done` will queue it.
            Some(key_state) => {
                key_state.dirty_since = Some(now());
                state.adds += 1;
                #[cfg(feature = "metrics")]
                if let Some(r) = &state.recorder {
                    r.adds.inc();
                }
                false
            }
            None => {
                let key_state = KeyState {
                    dirty_since: Some(now()),
                    processing_since: None,
                };
                state.keys.insert(key.clone(), key_state);
                state.queue.push_back(key);
                state.adds += 1;
                #[cfg(feature = "metrics")]
                if let Some(r) = &state.recorder {
                    r.adds.inc();
                }
                true
            }
        }
    }

    fn add_many(&self, keys: impl IntoIterator<Item = K>) {
        let mut pushed = 0;
        {
            let mut state = self.lock();
            for key in keys {
                pushed += usize::from(Self::add_locked(&mut state, key));
            }
        }
        for _ in 0..pushed {
            self.key_pushed.notify_one();
        }
    }
}

impl<K> Drop for Shared<K> {
    fn drop(&mut self) {
        // The timer task only holds a weak reference; tell it to exit now rather than at its next
        // deadline.
        self.delayed.stop();
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> WorkQueue<K> {
    /// A queue using [`DefaultControllerRateLimiter`] (per-key 5 ms..1000 s, overall 10 qps with
    /// burst 100), as client-go's `NewRateLimitingQueue(DefaultControllerRateLimiter())`.
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// let queue: WorkQueue<String> = WorkQueue::new();
    /// assert!(queue.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_rate_limiter(DefaultControllerRateLimiter::new())
    }

    /// A queue whose [`add_rate_limited`](Self::add_rate_limited) delays come from `limiter`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use informer::workqueue::{ItemExponentialRateLimiter, WorkQueue};
    ///
    /// let limiter = ItemExponentialRateLimiter::new(Duration::from_millis(1), Duration::from_secs(30));
    /// let queue: WorkQueue<u64> = WorkQueue::with_rate_limiter(limiter);
    /// ```
    pub fn with_rate_limiter(limiter: impl RateLimiter<K> + 'static) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    keys: HashMap::new(),
                    in_flight: 0,
                    shutting_down: false,
                    drain: false,
                    adds: 0,
                    retries: 0,
                    queue_latency: DurationStats::default(),
                    work_duration: DurationStats::default(),
                    timing_metrics: true,
                    epoch: Instant::now(),
                    name: None,
                    #[cfg(feature = "metrics")]
                    recorder: None,
                }),
                key_pushed: Notify::new(),
                drain_progress: Notify::new(),
                delayed: Arc::new(DelayedAdds::new()),
                limiter: Box::new(limiter),
            }),
        }
    }

    /// Names the queue, as client-go's `RateLimitingQueueConfig.Name`: with the `metrics`
    /// feature, a named queue's figures are exported under client-go's `workqueue_*` names with
    /// the label `name` (see [`metrics`](crate::metrics)); an unnamed queue's are not. Naming
    /// again renames it. Queues of one name share their series.
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// let queue: WorkQueue<String> = WorkQueue::new().with_name("pods");
    /// assert_eq!(queue.name().as_deref(), Some("pods"));
    /// ```
    pub fn with_name(self, name: impl Into<String>) -> Self {
        self.set_name(name.into());
        self
    }

    /// The queue's name, if it was given one ([`with_name`](Self::with_name)).
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// let queue: WorkQueue<String> = WorkQueue::new();
    /// assert_eq!(queue.name(), None);
    /// ```
    pub fn name(&self) -> Option<String> {
        self.shared.lock().name.as_deref().map(str::to_owned)
    }

    /// Names the queue (see [`with_name`](Self::with_name)).
    pub(crate) fn set_name(&self, name: String) {
        let name: Arc<str> = name.into();
        #[cfg(feature = "metrics")]
        let recorder = crate::metrics::QueueRecorder::new(&name);
        let mut state = self.shared.lock();
        #[cfg(feature = "metrics")]
        let first = state.name.is_none();
        #[cfg(feature = "metrics")]
        {
            state.recorder = Some(recorder);
        }
        state.name = Some(name);
        // Registered after the state's lock is released: a gather holds the list of queues while
        // it locks each queue's state, so the two locks are always taken in that order.
        drop(state);
        #[cfg(feature = "metrics")]
        if first {
            // Once, weakly: the gauges go when the queue goes.
            let source: Weak<Shared<K>> = Arc::downgrade(&self.shared);
            crate::metrics::register_queue(source);
        }
    }

    /// Marks `key` as needing processing (W2).
    ///
    /// Ignored while shutting down. If `key` is already waiting it is not queued again; if it is
    /// being processed it is queued again when the worker calls [`done`](Self::done).
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// let queue = WorkQueue::new();
    /// queue.add(7);
    /// queue.add(7);
    /// assert_eq!(queue.len(), 1);
    /// ```
    pub fn add(&self, key: K) {
        // The guard is a temporary: the lock is released before notifying.
        let pushed = Shared::add_locked(&mut self.shared.lock(), key);
        if pushed {
            self.shared.key_pushed.notify_one();
        }
    }

    /// Waits for a key and hands it to the caller, who must call [`done`](Self::done) with it
    /// when finished (W3).
    ///
    /// Returns `None` only once the queue is shutting down **and** empty: keys queued before
    /// shutdown are still handed out. The future is cancel-safe: dropping it takes no key.
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = WorkQueue::new();
    /// queue.add("a");
    /// queue.shut_down();
    /// assert_eq!(queue.get().await, Some("a"));
    /// assert_eq!(queue.get().await, None);
    /// # }
    /// ```
    pub async fn get(&self) -> Option<K> {
        // Fast path: a key is ready, no need to register with the `Notify`.
        if let Some(outcome) = self.try_take() {
            return outcome;
        }
        loop {
            // Register before checking, so a push between the check and the await still wakes
            // us (tokio's `enable` makes the future a registered waiter without polling it).
            let mut pushed = pin!(self.shared.key_pushed.notified());
            pushed.as_mut().enable();
            if let Some(outcome) = self.try_take() {
                // If a `notify_one` was meant for us, dropping `pushed` passes it to the next
                // waiter, so no other getter misses a key.
                return outcome;
            }
            pushed.await;
        }
    }

    /// `Some(Some(key))` if a key was taken, `Some(None)` if shut down and empty, `None` to wait.
    fn try_take(&self) -> Option<Option<K>> {
        let mut state = self.shared.lock();
        let Some(key) = state.queue.pop_front() else {
            return state.shutting_down.then_some(None);
        };
        let now = state.now();
        let state = &mut *state;
        if let Some(key_state) = state.keys.get_mut(&key) {
            if let Some(added_at) = key_state.dirty_since.take()
                && state.timing_metrics
            {
                let waited = now.saturating_duration_since(added_at);
                state.queue_latency.record(waited);
                #[cfg(feature = "metrics")]
                if let Some(r) = &state.recorder {
                    r.queued(waited);
                }
            }
            key_state.processing_since = Some(now);
            state.in_flight += 1;
        }
        Some(Some(key))
    }

    /// Marks `key` as finished (W4). If it was added again while being processed, it goes back
    /// onto the queue now.
    ///
    /// Every key returned by [`get`](Self::get) needs exactly one `done`; a forgotten `done`
    /// blocks that key for ever. A key that is not being processed is ignored.
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = WorkQueue::new();
    /// queue.add("a");
    /// let key = queue.get().await.unwrap();
    /// queue.add("a"); // arrives while "a" is processed: held back
    /// assert_eq!(queue.len(), 0);
    /// queue.done(&key);
    /// assert_eq!(queue.len(), 1); // now handed out again
    /// # }
    /// ```
    pub fn done(&self, key: &K) {
        let mut state = self.shared.lock();
        // One hash lookup in the common case (clean key): remove it outright.
        let Some(key_state) = state.keys.remove(key) else {
            return;
        };
        let Some(started) = key_state.processing_since else {
            // Queued, not processing: a stray `done`. Put the entry back untouched.
            state.keys.insert(key.clone(), key_state);
            return;
        };
        state.in_flight -= 1;
        if state.timing_metrics {
            let worked = started.elapsed();
            state.work_duration.record(worked);
            #[cfg(feature = "metrics")]
            if let Some(r) = &state.recorder {
                r.worked(worked);
            }
        }
        if key_state.dirty_since.is_some() {
            // Added while processing: now it may be handed out again.
            state.keys.insert(
                key.clone(),
                KeyState {
                    processing_since: None,
                    ..key_state
                },
            );
            state.queue.push_back(key.clone());
            drop(state);
            self.shared.key_pushed.notify_one();
        } else if state.in_flight == 0 && state.drain {
            drop(state);
            self.shared.drain_progress.notify_waiters();
        }
    }

    /// Adds `key` once `delay` has passed (W8); a zero delay adds it now. If `key` already waits
    /// for a delay, the earlier ready time wins. Ignored while shutting down; keys still waiting
    /// at shutdown are dropped.
    ///
    /// All delays of a queue share one timer task, started on the first positive delay.
    ///
    /// # Panics
    ///
    /// On the first positive delay, if called outside a Tokio runtime.
    ///
    /// ```
    /// use std::time::Duration;
    /// use informer::workqueue::WorkQueue;
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let queue = WorkQueue::new();
    /// queue.add_after("later", Duration::from_secs(10));
    /// queue.add_after("sooner", Duration::from_secs(1));
    /// assert_eq!(queue.len(), 0);
    /// assert_eq!(queue.get().await, Some("sooner"));
    /// # }
    /// ```
    pub fn add_after(&self, key: K, delay: Duration) {
        {
            let mut state = self.shared.lock();
            if state.shutting_down {
                return;
            }
            state.retries += 1;
            #[cfg(feature = "metrics")]
            if let Some(r) = &state.recorder {
                r.retries.inc();
            }
        }
        if delay.is_zero() {
            self.add(key);
            return;
        }
        let ready_at = Instant::now() + delay;
        if self.shared.delayed.schedule(key, ready_at) == Scheduled::SpawnTimer {
            let queue = Arc::downgrade(&self.shared);
            tokio::spawn(Arc::clone(&self.shared.delayed).run(move |due| add_due(&queue, due)));
        }
    }

    /// Adds `key` after the delay the rate limiter decides for it (W9): one more failure of `key`
    /// as far as the limiter is concerned. Returns that delay.
    ///
    /// # Panics
    ///
    /// As [`add_after`](Self::add_after).
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let queue = WorkQueue::new();
    /// let delay = queue.add_rate_limited("a");
    /// assert_eq!(delay, std::time::Duration::from_millis(5)); // the default limiter's first
    /// assert_eq!(queue.num_requeues(&"a"), 1);
    /// assert_eq!(queue.get().await, Some("a"));
    /// # }
    /// ```
    pub fn add_rate_limited(&self, key: K) -> Duration {
        let delay = self.shared.limiter.when(&key);
        self.add_after(key, delay);
        delay
    }

    /// Resets the rate limiter's history of `key` (after a success). The key still needs its
    /// [`done`](Self::done).
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = WorkQueue::new();
    /// queue.add_rate_limited("a");
    /// queue.forget(&"a");
    /// assert_eq!(queue.num_requeues(&"a"), 0);
    /// # }
    /// ```
    pub fn forget(&self, key: &K) {
        self.shared.limiter.forget(key);
    }

    /// How many times `key` was rate-limited since it was last forgotten.
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// let queue: WorkQueue<&str> = WorkQueue::new();
    /// assert_eq!(queue.num_requeues(&"a"), 0);
    /// ```
    pub fn num_requeues(&self, key: &K) -> u32 {
        self.shared.limiter.num_requeues(key)
    }

    /// Number of keys waiting to be handed out; keys being processed or waiting for a delay are
    /// not counted (W6).
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// let queue = WorkQueue::new();
    /// queue.add("a");
    /// queue.add("b");
    /// assert_eq!(queue.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.shared.lock().queue.len()
    }

    /// Whether [`len`](Self::len) is zero.
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// let queue: WorkQueue<u8> = WorkQueue::new();
    /// assert!(queue.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts shutting down (W5): new adds are ignored, delayed keys are dropped, and
    /// [`get`](Self::get) returns `None` once the queued keys are handed out. Cancels a pending
    /// [`shut_down_with_drain`](Self::shut_down_with_drain) wait. Idempotent.
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// let queue = WorkQueue::new();
    /// queue.shut_down();
    /// queue.add("ignored");
    /// assert!(queue.is_shutting_down());
    /// assert!(queue.is_empty());
    /// ```
    pub fn shut_down(&self) {
        let (already, depth, in_flight) = {
            let mut state = self.shared.lock();
            state.drain = false;
            let already = std::mem::replace(&mut state.shutting_down, true);
            (already, state.queue.len(), state.in_flight)
        };
        if !already {
            tracing::info!(depth, in_flight, "work queue shutting down");
        }
        self.shared.delayed.stop();
        self.shared.key_pushed.notify_waiters();
        self.shared.drain_progress.notify_waiters();
    }

    /// Shuts down like [`shut_down`](Self::shut_down), then waits until no key is being
    /// processed (W5). It waits for in-flight keys, not for the queue to be empty: workers keep
    /// getting queued keys meanwhile, and the wait ends the first time the in-flight set is empty.
    /// A concurrent `shut_down` cancels the wait. Idempotent.
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = WorkQueue::new();
    /// queue.add("a");
    /// let key = queue.get().await.unwrap();
    /// let worker = {
    ///     let queue = queue.clone();
    ///     tokio::spawn(async move {
    ///         tokio::task::yield_now().await;
    ///         queue.done(&key);
    ///     })
    /// };
    /// queue.shut_down_with_drain().await; // returns after the worker's `done`
    /// assert_eq!(queue.metrics().in_flight, 0);
    /// # worker.await.unwrap();
    /// # }
    /// ```
    pub async fn shut_down_with_drain(&self) {
        let (already, depth, in_flight) = {
            let mut state = self.shared.lock();
            state.drain = true;
            let already = std::mem::replace(&mut state.shutting_down, true);
            (already, state.queue.len(), state.in_flight)
        };
        if !already {
            tracing::info!(
                depth,
                in_flight,
                "work queue shutting down, draining in-flight keys"
            );
        }
        self.shared.delayed.stop();
        self.shared.key_pushed.notify_waiters();
        loop {
            let mut progress = pin!(self.shared.drain_progress.notified());
            progress.as_mut().enable();
            {
                let state = self.shared.lock();
                if state.in_flight == 0 || !state.drain {
                    return;
                }
            }
            progress.await;
        }
    }

    /// Whether [`shut_down`](Self::shut_down) or [`shut_down_with_drain`](Self::shut_down_with_drain)
    /// was called.
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// let queue: WorkQueue<u8> = WorkQueue::new();
    /// assert!(!queue.is_shutting_down());
    /// ```
    pub fn is_shutting_down(&self) -> bool {
        self.shared.lock().shutting_down
    }

    /// Turns the clock-based metrics (queue latency, work duration, longest running processor,
    /// unfinished work) on or off; they are on by default. Off, the queue reads no clock on
    /// `add`/`get`/`done` (three reads per key: a quarter to a half of the queue's own cost in
    /// `benches/workqueue.rs`), as client-go does without a metrics provider. Counters and
    /// gauges (depth, in flight, adds, retries) are always kept.
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = WorkQueue::new();
    /// queue.set_timing_metrics(false);
    /// queue.add("a");
    /// let key = queue.get().await.unwrap();
    /// queue.done(&key);
    /// let metrics = queue.metrics();
    /// assert_eq!((metrics.adds, metrics.queue_latency.count), (1, 0));
    /// # }
    /// ```
    pub fn set_timing_metrics(&self, enabled: bool) {
        let mut state = self.shared.lock();
        if enabled && !state.timing_metrics {
            // Keys stamped while timing was off carry the epoch; restart their clocks now.
            let now = Instant::now();
            for key_state in state.keys.values_mut() {
                key_state.dirty_since = key_state.dirty_since.map(|_| now);
                key_state.processing_since = key_state.processing_since.map(|_| now);
            }
        }
        state.timing_metrics = enabled;
    }

    /// A snapshot of the queue's metrics (W10).
    ///
    /// ```
    /// # use informer::workqueue::WorkQueue;
    /// let queue = WorkQueue::new();
    /// queue.add("a");
    /// assert_eq!(queue.metrics().depth, 1);
    /// ```
    pub fn metrics(&self) -> WorkQueueMetrics {
        let delayed = self.shared.delayed.len();
        let state = self.shared.lock();
        let (longest, unfinished) = state.running_times();
        WorkQueueMetrics {
            depth: state.queue.len(),
            in_flight: state.in_flight,
            delayed,
            adds: state.adds,
            retries: state.retries,
            queue_latency: state.queue_latency,
            work_duration: state.work_duration,
            longest_running_processor: longest,
            unfinished_work: unfinished,
        }
    }
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Default for WorkQueue<K> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "metrics")]
impl<K: Send + Sync> crate::metrics::QueueSource for Shared<K> {
    fn gauges(&self) -> Option<crate::metrics::QueueGauges> {
        let state = self.lock();
        let name = state.name.clone()?;
        let (longest, unfinished) = state.running_times();
        Some(crate::metrics::QueueGauges {
            name,
            depth: state.queue.len(),
            unfinished_work: unfinished,
            longest_running_processor: longest,
        })
    }
}

/// The timer task's sink: adds due keys to the queue, or reports that the queue is gone.
fn add_due<K: Clone + Eq + Hash>(queue: &Weak<Shared<K>>, due: Vec<K>) -> bool {
    match queue.upgrade() {
        Some(shared) => {
            shared.add_many(due);
            true
        }
        None => false,
    }
}
