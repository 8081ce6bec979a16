//! The controller toolkit's work queue: client-go's rate-limited, deduplicating `workqueue`
//! (docs/semantics.md W1-W10), async on tokio.
//!
//! A controller does not act on informer events directly. Its event handlers reduce each event to
//! a **key** (usually `namespace/name`) and [`add`](WorkQueue::add) it to a [`WorkQueue`]; workers
//! [`get`](WorkQueue::get) keys, reconcile the current state of that object, and call
//! [`done`](WorkQueue::done). Because only keys are queued, ten events about one object collapse
//! into one reconcile of its latest state.
//!
//! # Guarantees
//!
//! * **Deduplication.** A key waiting in the queue is queued at most once, however often it is
//!   added.
//! * **Exclusive processing.** A key is never handed to two workers at once. A key added while a
//!   worker processes it is held back and handed out again after that worker's `done`, so the
//!   change that caused the add is not lost.
//! * **FIFO** among waiting keys.
//! * **Shutdown** stops new adds but still hands out the keys already queued; `get` returns
//!   `None` once the queue is empty. [`shut_down_with_drain`](WorkQueue::shut_down_with_drain)
//!   also waits for the in-flight keys.
//!
//! Internally the state is client-go's (W1): a FIFO `queue`, a `dirty` set (needs processing) and
//! a `processing` set (handed out), with the invariant that every queued key is dirty and not
//! processing. The two sets are stored as one map from key to its two marks, so that an
//! add/get/done cycle hashes each key about five times instead of eight.
//!
//! # Pieces
//!
//! * [`WorkQueue`]: the queue, including [`add_after`](WorkQueue::add_after) (one timer task and
//!   a heap per queue, earlier ready time wins) and
//!   [`add_rate_limited`](WorkQueue::add_rate_limited).
//! * [`RateLimiter`] and its implementations, [`DefaultControllerRateLimiter`] being the usual
//!   choice.
//! * [`WorkQueueMetrics`]: depth, adds, retries, queue latency, work duration, longest running
//!   processor, unfinished work; the clock-based ones can be switched off with
//!   [`set_timing_metrics`](WorkQueue::set_timing_metrics).
//! * [`Controller`]: **the** way to reconcile Kubernetes objects (kube-rs's `Controller`,
//!   client-go's sample-controller): shared informers' handlers enqueue [`ObjectRef`]s (an
//!   object's own, its controlling owner's, or any mapper's), and workers call
//!   `reconcile(Arc<K>, Arc<Ctx>) -> Result<Action, E>` with the object read from the primary
//!   informer's [`Store`](crate::store::Store) at that moment; errors go to an
//!   [`ErrorPolicy`] (by default [`Backoff`]), panics are caught and retried; workers start
//!   once the informers have synced.
//! * [`finalizer()`]: a reconcile under a finalizer (kube-rs's `runtime::finalizer`): the
//!   finalizer is added on the first reconcile, `Cleanup` runs once the object is being
//!   deleted, then the finalizer is removed so the apiserver finishes the deletion.
//! * [`WorkerPool`]: the lower layer, N workers running an async
//!   `reconcile(key) -> Result<Action, E>` over keys of your own, with graceful shutdown (drain,
//!   or cancel after a grace period) and caught panics.
//!
//! One way per task: objects go through `Controller` (the string-key `InformerController`
//! it replaced made every reconcile look its object up again and dropped errors silently),
//! anything else through `WorkerPool`.
//!
//! # Tracing
//!
//! `shut_down` logs at info (once), a retry with backoff at debug (with the key), a panicking
//! reconcile at error; a `Controller` adds a span per reconcile and logs errors at warn. There
//! is no maximum number of retries, so nothing is ever dropped for retrying too often (the
//! backoff caps at the rate limiter's maximum delay). Without a subscriber none of this
//! formats anything.
//!
//! # Differences from client-go
//!
//! * `add_after` never blocks: delayed keys go straight into the heap instead of through a
//!   1000-slot channel to the waiting loop, and there is no 10 s heartbeat (the timer task is
//!   woken when a new earliest deadline arrives).
//! * The FIFO is fixed (no pluggable `Queue[T]` with `Touch`).
//! * Metrics are a pull-based snapshot instead of a push to a named provider every 500 ms. With
//!   the feature `metrics`, a named queue ([`WorkQueue::with_name`]) is also exported under
//!   client-go's `workqueue_*` names (see the `metrics` module).
//! * `shut_down` tells the timer task to stop but, being synchronous, does not wait for it.
//! * `done` of a key that is not being processed is ignored (client-go would queue it twice).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use informer::workqueue::{Action, WorkerPool, WorkQueue};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let queue: WorkQueue<String> = WorkQueue::new();
//! // An informer's event handler would do this for every event:
//! queue.add("default/web".to_string());
//!
//! let controller = WorkerPool::new(queue.clone(), 4);
//! let summary = controller
//!     .run(
//!         |key: String| async move {
//!             // Read the object for `key` from the store and make the world match it.
//!             let _ = key;
//!             Ok::<_, std::io::Error>(Action::Done)
//!         },
//!         // Shut down (gracefully) after one second.
//!         tokio::time::sleep(Duration::from_secs(1)),
//!     )
//!     .await;
//! assert_eq!(summary.done, 1);
//! # }
//! ```

mod controller;
mod delaying;
mod finalizer;
mod metrics;
mod queue;
mod rate_limiter;
mod worker_pool;

pub use controller::{Backoff, Controller, ErrorPolicy, ObjectRef};
pub use finalizer::{FinalizerError, FinalizerEvent, finalizer};
pub use metrics::{DurationStats, WorkQueueMetrics};
pub use queue::WorkQueue;
pub use rate_limiter::{
    DefaultControllerRateLimiter, ItemExponentialRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, MaxWaitRateLimiter, RateLimiter, TokenBucketRateLimiter,
};
pub use worker_pool::{Action, FenceToken, RunSummary, WorkerPool};
