//! Queue metrics (docs/semantics.md W10): a plain snapshot, taken on demand with
//! [`WorkQueue::metrics`](super::WorkQueue::metrics).
//!
//! client-go pushes its numbers into a metrics provider every 500 ms. Here the counters live inside
//! the queue's state and are updated under the lock the queue already holds, so recording costs a
//! few additions; the time-based gauges (longest running processor, unfinished work) are computed
//! from the in-flight set when the snapshot is taken.

use std::time::Duration;

/// Count, last, mean and maximum of a series of durations.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use informer::workqueue::DurationStats;
///
/// let mut stats = DurationStats::default();
/// stats.record(Duration::from_millis(10));
/// stats.record(Duration::from_millis(30));
/// assert_eq!(stats.count, 2);
/// assert_eq!(stats.last, Duration::from_millis(30));
/// assert_eq!(stats.max, Duration::from_millis(30));
/// assert_eq!(stats.mean(), Duration::from_millis(20));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DurationStats {
    /// Number of recorded durations.
    pub count: u64,
    /// The most recent duration.
    pub last: Duration,
    /// Sum of all durations.
    pub total: Duration,
    /// The longest duration.
    pub max: Duration,
}

impl DurationStats {
    /// Adds one duration to the series.
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use informer::workqueue::DurationStats;
    /// let mut stats = DurationStats::default();
    /// stats.record(Duration::from_secs(1));
    /// assert_eq!(stats.total, Duration::from_secs(1));
    /// ```
    pub fn record(&mut self, duration: Duration) {
        self.count += 1;
        self.last = duration;
        self.total = self.total.saturating_add(duration);
        self.max = self.max.max(duration);
    }

    /// The average duration, zero when nothing was recorded.
    ///
    /// ```
    /// # use informer::workqueue::DurationStats;
    /// assert!(DurationStats::default().mean().is_zero());
    /// ```
    pub fn mean(&self) -> Duration {
        match self.count {
            0 => Duration::ZERO,
            n => {
                let nanos = self.total.as_nanos() / u128::from(n);
                Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
            }
        }
    }
}

/// A snapshot of a [`WorkQueue`](super::WorkQueue)'s metrics, mirroring client-go's workqueue
/// metrics provider.
///
/// # Example
///
/// ```
/// use informer::workqueue::WorkQueue;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = WorkQueue::new();
/// queue.add("a");
/// queue.add("a"); // deduplicated: not counted again
/// let key = queue.get().await.unwrap();
/// queue.done(&key);
/// let metrics = queue.metrics();
/// assert_eq!(metrics.adds, 1);
/// assert_eq!(metrics.depth, 0);
/// assert_eq!(metrics.queue_latency.count, 1);
/// assert_eq!(metrics.work_duration.count, 1);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkQueueMetrics {
    /// Keys waiting in the queue (what [`len`](super::WorkQueue::len) returns).
    pub depth: usize,
    /// Keys handed out by `get` and not yet `done`.
    pub in_flight: usize,
    /// Keys waiting in the delay heap for their `add_after` time.
    pub delayed: usize,
    /// Adds that were not deduplicated away (a key already waiting is not counted again).
    pub adds: u64,
    /// Calls to `add_after`/`add_rate_limited` accepted while not shutting down.
    pub retries: u64,
    /// Time from a key's (first, not deduplicated) add to the `get` that handed it out.
    pub queue_latency: DurationStats,
    /// Time from `get` to `done`.
    pub work_duration: DurationStats,
    /// How long the oldest in-flight key has been processed so far.
    pub longest_running_processor: Duration,
    /// Sum of the processing time so far of all in-flight keys (client-go's unfinished work
    /// seconds): grows steadily if a worker is stuck.
    pub unfinished_work: Duration,
}
