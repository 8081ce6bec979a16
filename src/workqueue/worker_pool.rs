//! [`WorkerPool`]: N workers draining a [`WorkQueue`] of keys of your own through an async
//! `reconcile(key)`: the lower layer of [`Controller`](super::Controller), for keys that are not
//! Kubernetes objects.
//!
//! This is the worker half of the client-go controller pattern (`processNextWorkItem`):
//!
//! ```text
//! informer handlers --add(key)--> WorkQueue --get--> worker: reconcile(key)
//!                                     ^                 |  Ok(Done)            -> forget
//!                                     |                 |  Ok(RequeueAfter(d)) -> forget, add_after(d)
//!                                     +-----------------+  Err(_) or a panic   -> add_rate_limited
//!                                                       +-> done(key), always
//! ```
//!
//! Invariants: a key is held by at most one worker at a time (the queue's guarantee); every key
//! handed out is marked [`done`](WorkQueue::done), whether its reconcile returned, panicked or
//! was cancelled; a panicking reconcile costs only its own key a retry (with backoff), never
//! the queue or the other workers.
//!
//! The informer half is a hook: anything holding a clone of [`WorkerPool::queue`] (for example an
//! informer event handler mapping an object to its `namespace/name`) feeds the workers by calling
//! [`WorkQueue::add`].

use std::any::Any;
use std::fmt;
use std::future::{Future, poll_fn};
use std::hash::Hash;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::{Either, select};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::WorkQueue;

/// A value a fence holds while open (see [`WorkerPool::run_fenced`]): fenced workers compare it
/// to see the fence move, and every reconcile receives the one it runs under.
///
/// [`holds`](Self::holds) is asked before every poll of a reconcile. A token that knows when it
/// stops holding says so there, and its reconciles stop at that instant, without waiting for
/// whoever closes the fence to run: after a process pause (SIGSTOP, a paused VM, a long
/// stop-the-world) every timer is due at once, and a reconcile polled before the elector's
/// deadline fires would otherwise take one more step on a Lease that another replica may hold
/// by then. A [`FencingToken`](crate::leaderelection::FencingToken) holds until RenewDeadline
/// after its elector's last successful renewal was sent, and never again once its fence closed.
/// Plain values (numbers, strings, `bool`, `()`) hold while the fence holds them, and an `Arc` of
/// a token as the token does; implement the trait for a token of your own with an empty `impl`
/// for the same (for another crate's type, wrap it in a type of your own).
///
/// ```
/// use informer::workqueue::FenceToken;
///
/// #[derive(Clone, PartialEq)]
/// struct Term(u64);
/// impl FenceToken for Term {}
///
/// assert!(Term(7).holds());
/// ```
pub trait FenceToken: Clone + PartialEq + Send + Sync + 'static {
    /// Whether the token still holds now. Called before every poll of a reconcile running under
    /// it; keep it cheap. Once it returns `false` for a token it must not return `true` again
    /// for that token (the fence's owner opens the fence anew instead).
    fn holds(&self) -> bool {
        true
    }
}

/// A shared token holds while the token it shares does.
impl<T: FenceToken> FenceToken for Arc<T> {
    fn holds(&self) -> bool {
        T::holds(self)
    }
}

macro_rules! plain_fence_tokens {
    ($($t:ty),*) => { $(impl FenceToken for $t {})* };
}
plain_fence_tokens!(
    u8,
    u16,
    u32,
    u64,
    u128,
    usize,
    i8,
    i16,
    i32,
    i64,
    i128,
    isize,
    bool,
    (),
    char,
    String,
    &'static str
);

/// What a successful reconcile asks for next.
///
/// An `Err` from reconcile means "failed": [`WorkerPool`] retries it with backoff,
/// [`Controller`](super::Controller) hands it to its error policy, which may answer with an
/// `Action` too.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use informer::workqueue::Action;
///
/// fn next_step(ready: bool) -> Action {
///     if ready { Action::Done } else { Action::RequeueAfter(Duration::from_secs(30)) }
/// }
/// assert_eq!(next_step(true), Action::Done);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Finished: the key's backoff is reset and it is processed again only when added again.
    Done,
    /// Finished for now: the key's backoff is reset and it is processed again after the delay
    /// (for example to poll an external system).
    RequeueAfter(Duration),
}

/// Counts of reconcile outcomes over one [`WorkerPool::run`].
///
/// # Example
///
/// ```
/// use informer::workqueue::RunSummary;
///
/// let summary = RunSummary::default();
/// assert_eq!(summary.done + summary.requeued_after + summary.failed, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Reconciles that returned `Ok(Action::Done)`.
    pub done: u64,
    /// Reconciles that returned `Ok(Action::RequeueAfter(_))`.
    pub requeued_after: u64,
    /// Reconciles that returned `Err(_)`: requeued with rate limiting, or as the
    /// [`Controller`](super::Controller)'s error policy said.
    pub failed: u64,
    /// Reconciles (or error policies) that panicked: the panic was caught and logged, and the
    /// key alone requeued with rate limiting.
    pub panicked: u64,
    /// Keys a [`Controller`](super::Controller) took from the queue whose object was no longer
    /// in the store: not reconciled (deleted objects are cleaned up through finalizers).
    pub absent: u64,
    /// Reconciles cancelled because the fence closed under them
    /// ([`run_fenced`](WorkerPool::run_fenced)); their keys were queued again.
    pub fenced: u64,
}

impl std::ops::AddAssign for RunSummary {
    fn add_assign(&mut self, other: Self) {
        self.done += other.done;
        self.requeued_after += other.requeued_after;
        self.failed += other.failed;
        self.panicked += other.panicked;
        self.absent += other.absent;
        self.fenced += other.fenced;
    }
}

/// Runs `workers` concurrent workers over a [`WorkQueue`], each calling `reconcile(key)`.
///
/// A key is never reconciled by two workers at once (the queue guarantees it), and every key
/// handed out is marked [`done`](WorkQueue::done) even if reconcile panics. For Kubernetes
/// objects use [`Controller`](super::Controller), which reads the object and runs an error
/// policy on top of this; use `WorkerPool` directly for keys of your own.
///
/// # Example
///
/// ```
/// use informer::workqueue::{Action, WorkerPool, WorkQueue};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = WorkQueue::new();
/// let controller = WorkerPool::new(queue.clone(), 2);
/// queue.add("default/web".to_string());
/// queue.add("default/db".to_string());
///
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let run = tokio::spawn(controller.run(
///     |key: String| async move {
///         println!("reconciling {key}");
///         Ok::<_, std::io::Error>(Action::Done)
///     },
///     async { stopped.await.ok(); },
/// ));
/// while !queue.is_empty() || queue.metrics().in_flight > 0 {
///     tokio::task::yield_now().await;
/// }
/// stop.send(()).unwrap();
/// let summary = run.await.unwrap();
/// assert_eq!(summary.done, 2);
/// # }
/// ```
#[derive(Debug)]
pub struct WorkerPool<K> {
    queue: WorkQueue<K>,
    workers: usize,
    /// How long workers may drain after shutdown is requested; `None`: as long as they need.
    shutdown_grace: Option<Duration>,
}

impl<K: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static> WorkerPool<K> {
    /// A controller running `workers` workers (at least one) over `queue`.
    ///
    /// ```
    /// # use informer::workqueue::{WorkerPool, WorkQueue};
    /// let controller: WorkerPool<String> = WorkerPool::new(WorkQueue::new(), 4);
    /// ```
    pub fn new(queue: WorkQueue<K>, workers: usize) -> Self {
        Self {
            queue,
            workers: workers.max(1),
            shutdown_grace: None,
        }
    }

    /// Bounds the drain on shutdown: once shutdown is requested, workers go on with the keys they
    /// hold and the queued ones for at most `grace`; then the reconciles still running are
    /// cancelled (dropped at their next `.await`; their keys are marked done) and the keys still
    /// queued are dropped. `Duration::ZERO` cancels at once. Without it (the default) `run`
    /// drains completely.
    ///
    /// ```
    /// use std::time::Duration;
    /// use informer::workqueue::{Action, WorkerPool, WorkQueue};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let queue = WorkQueue::new();
    /// queue.add("stuck");
    /// let summary = WorkerPool::new(queue, 1)
    ///     .shutdown_grace(Duration::from_secs(1))
    ///     .run(
    ///         |_key| async {
    ///             std::future::pending::<()>().await; // never finishes by itself
    ///             Ok::<_, String>(Action::Done)
    ///         },
    ///         tokio::time::sleep(Duration::from_secs(5)),
    ///     )
    ///     .await; // returns at 6 s: shutdown at 5 s, then 1 s of grace
    /// assert_eq!(summary.done, 0);
    /// # }
    /// ```
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = Some(grace);
        self
    }

    /// The queue the workers drain: clone it into whatever produces keys (informer handlers).
    ///
    /// ```
    /// # use informer::workqueue::{WorkerPool, WorkQueue};
    /// let controller = WorkerPool::new(WorkQueue::new(), 1);
    /// let producer = controller.queue().clone();
    /// producer.add("default/web");
    /// assert_eq!(controller.queue().len(), 1);
    /// ```
    pub fn queue(&self) -> &WorkQueue<K> {
        &self.queue
    }

    /// Spawns the workers and runs until they have all stopped.
    ///
    /// Each worker loops: [`get`](WorkQueue::get) a key, `reconcile(key)`, then
    /// * `Ok(Action::Done)`: [`forget`](WorkQueue::forget) the key;
    /// * `Ok(Action::RequeueAfter(d))`: forget it and [`add_after`](WorkQueue::add_after)`(key, d)`;
    /// * `Err(_)`: [`add_rate_limited`](WorkQueue::add_rate_limited)`(key)`; log the error inside
    ///   reconcile if it matters, it is dropped here (a [`Controller`](super::Controller) logs
    ///   it);
    /// * a panic: caught, logged (`tracing` error with the key and the panic message), counted
    ///   as [`panicked`](RunSummary::panicked), and `add_rate_limited(key)`;
    ///
    /// and always [`done`](WorkQueue::done).
    ///
    /// Graceful shutdown: when `shutdown` completes (or someone shuts the queue down) the queue
    /// stops accepting keys, workers finish the keys they hold and those already queued, and
    /// `run` returns once every worker has exited, so nothing is in flight any more. A reconcile
    /// that never returns therefore keeps `run` from returning, unless a
    /// [`shutdown_grace`](Self::shutdown_grace) bounds the drain.
    ///
    /// # Panics
    ///
    /// A panicking reconcile does not stop the run (unlike client-go's default `HandleCrash`,
    /// which exits the process): only its key is retried, with backoff. `run` itself panics only
    /// if a worker's own code does, after the other workers have finished.
    ///
    /// ```
    /// use informer::workqueue::{Action, WorkerPool, WorkQueue};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let queue = WorkQueue::new();
    /// queue.add(1u32);
    /// queue.add(2u32);
    /// queue.shut_down(); // already queued keys are still reconciled
    /// let summary = WorkerPool::new(queue, 1)
    ///     .run(|_key| async { Ok::<_, String>(Action::Done) }, std::future::pending())
    ///     .await;
    /// assert_eq!(summary.done, 2);
    /// # }
    /// ```
    pub async fn run<R, Fut, E, S>(self, reconcile: R, shutdown: S) -> RunSummary
    where
        R: Fn(K) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Send + 'static,
        S: Future<Output = ()>,
    {
        self.run_outcomes(move |key| failed_on_err(reconcile(key)), shutdown)
            .await
    }

    /// [`run`](Self::run) with reconciles that settle their own [`Outcome`].
    pub(crate) async fn run_outcomes<R, Fut, S>(self, reconcile: R, shutdown: S) -> RunSummary
    where
        R: Fn(K) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
        S: Future<Output = ()>,
    {
        let reconcile = Arc::new(reconcile);
        self.supervise(shutdown, move |queue, counters, _stopping| {
            worker_loop(queue, Arc::clone(&reconcile), counters)
        })
        .await
    }

    /// Like [`run`](Self::run), but the workers reconcile only while `fence` holds a token, and
    /// each reconcile gets the token it runs under: `reconcile(key, token)`.
    ///
    /// * While the fence is `None`, no reconcile starts; keys wait in the queue (still
    ///   deduplicated), so work done when the fence opens again starts from the latest state.
    /// * When the fence closes (or changes to another token) under a running reconcile, that
    ///   reconcile is cancelled (dropped at its next `.await`) and its key queued again; it
    ///   counts as [`fenced`](RunSummary::fenced).
    /// * A fence whose sender is gone counts as closed for good.
    /// * On shutdown, workers that wait for the fence stop at once (the keys they would have
    ///   reconciled are not theirs to do); the others drain as in `run`.
    ///
    /// The fence of a [`LeaderElector`](crate::leaderelection::LeaderElector) closes RenewDeadline
    /// after its last successful renewal was sent, before the Lease can expire for any other
    /// replica; see [`leaderelection`](crate::leaderelection) for what that guarantees.
    ///
    /// ```
    /// use std::time::Duration;
    /// use informer::workqueue::{Action, WorkerPool, WorkQueue};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() {
    /// let (fence, fenced) = tokio::sync::watch::channel(None::<u64>);
    /// let queue = WorkQueue::new();
    /// queue.add("default/web");
    /// let run = tokio::spawn(WorkerPool::new(queue, 1).run_fenced(
    ///     fenced,
    ///     |key: &str, term: u64| async move {
    ///         println!("reconciling {key} in term {term}");
    ///         Ok::<_, String>(Action::Done)
    ///     },
    ///     tokio::time::sleep(Duration::from_secs(2)),
    /// ));
    /// tokio::time::sleep(Duration::from_secs(1)).await;
    /// fence.send_replace(Some(7)); // leading, term 7: the key is reconciled now
    /// assert_eq!(run.await.unwrap().done, 1);
    /// # }
    /// ```
    pub async fn run_fenced<T, R, Fut, E, S>(
        self,
        fence: watch::Receiver<Option<T>>,
        reconcile: R,
        shutdown: S,
    ) -> RunSummary
    where
        T: FenceToken,
        R: Fn(K, T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Send + 'static,
        S: Future<Output = ()>,
    {
        self.run_fenced_outcomes(
            fence,
            move |key, token| failed_on_err(reconcile(key, token)),
            shutdown,
        )
        .await
    }

    /// [`run_fenced`](Self::run_fenced) with reconciles that settle their own [`Outcome`].
    pub(crate) async fn run_fenced_outcomes<T, R, Fut, S>(
        self,
        fence: watch::Receiver<Option<T>>,
        reconcile: R,
        shutdown: S,
    ) -> RunSummary
    where
        T: FenceToken,
        R: Fn(K, T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
        S: Future<Output = ()>,
    {
        let reconcile = Arc::new(reconcile);
        self.supervise(shutdown, move |queue, counters, stopping| {
            fenced_worker_loop(
                queue,
                Arc::clone(&reconcile),
                counters,
                fence.clone(),
                stopping,
            )
        })
        .await
    }

    /// Spawns the workers `worker` makes and runs them until all have stopped: shutdown,
    /// the grace period, panics (see [`run`](Self::run)). `stopping` turns true on shutdown.
    async fn supervise<S, W, F>(self, shutdown: S, mut worker: W) -> RunSummary
    where
        S: Future<Output = ()>,
        W: FnMut(WorkQueue<K>, Arc<Counters>, watch::Receiver<bool>) -> F,
        F: Future<Output = ()> + Send + 'static,
    {
        // Shared, not returned by the workers: a worker cancelled after the grace period has
        // still counted the reconciles it finished.
        let counters = Arc::new(Counters::default());
        let (stopping, stopping_rx) = watch::channel(false);
        let mut workers = JoinSet::new();
        for _ in 0..self.workers {
            workers.spawn(worker(
                self.queue.clone(),
                Arc::clone(&counters),
                stopping_rx.clone(),
            ));
        }

        let mut shutdown = pin!(shutdown);
        let mut shutdown_requested = false;
        // Armed when shutdown is requested with a grace period (no timer otherwise, so a
        // runtime without the time driver is enough).
        let mut grace: Option<Pin<Box<tokio::time::Sleep>>> = None;
        let mut panic = None;
        enum Next {
            Shutdown,
            GraceOver,
            Joined(Option<Result<(), tokio::task::JoinError>>),
        }
        loop {
            // The first of: the shutdown signal (until it has come), the grace period (while
            // armed), a worker ending.
            let next = poll_fn(|cx| {
                if !shutdown_requested && shutdown.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Next::Shutdown);
                }
                if let Some(g) = grace.as_mut() {
                    if g.as_mut().poll(cx).is_ready() {
                        return Poll::Ready(Next::GraceOver);
                    }
                }
                workers.poll_join_next(cx).map(Next::Joined)
            })
            .await;
            match next {
                Next::Shutdown => {
                    shutdown_requested = true;
                    stopping.send_replace(true);
                    // Workers drain the queue and exit; waiting for all of them below is a
                    // stronger guarantee than `shut_down_with_drain` (in-flight set empty once).
                    self.queue.shut_down();
                    grace = self
                        .shutdown_grace
                        .map(|limit| Box::pin(tokio::time::sleep(limit)));
                }
                Next::GraceOver => {
                    grace = None;
                    // Cancelled workers drop their reconcile future, whose `DoneOnDrop` marks
                    // the key done; keys still queued stay in the (shut down) queue.
                    workers.abort_all();
                }
                Next::Joined(None) => break,
                Next::Joined(Some(Ok(()))) => {}
                Next::Joined(Some(Err(error))) => {
                    self.queue.shut_down();
                    if error.is_panic() && panic.is_none() {
                        panic = Some(error.into_panic());
                    }
                }
            }
        }
        if let Some(payload) = panic {
            std::panic::resume_unwind(payload);
        }
        counters.summary()
    }
}

/// Reconcile outcomes, counted by all workers of one run.
#[derive(Default)]
struct Counters {
    done: AtomicU64,
    requeued_after: AtomicU64,
    failed: AtomicU64,
    panicked: AtomicU64,
    absent: AtomicU64,
    fenced: AtomicU64,
}

impl Counters {
    fn summary(&self) -> RunSummary {
        // Relaxed: read after every worker task was joined, which synchronises with its writes.
        RunSummary {
            done: self.done.load(Ordering::Relaxed),
            requeued_after: self.requeued_after.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            panicked: self.panicked.load(Ordering::Relaxed),
            absent: self.absent.load(Ordering::Relaxed),
            fenced: self.fenced.load(Ordering::Relaxed),
        }
    }
}

/// How one reconcile ended, as the worker settles its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Succeeded and asks for this.
    Reconciled(Action),
    /// Failed; `None`: retry with the queue's rate limiter, `Some(action)`: as the error
    /// policy said.
    Failed(Option<Action>),
    /// Panicked (caught, already logged): retried with the queue's rate limiter.
    Panicked,
    /// Not reconciled: the key's object is no longer in the store.
    Absent,
}

/// [`WorkerPool::run`]'s outcome of a reconcile returning `Result<Action, E>`.
async fn failed_on_err<E>(reconcile: impl Future<Output = Result<Action, E>>) -> Outcome {
    match reconcile.await {
        Ok(action) => Outcome::Reconciled(action),
        Err(_) => Outcome::Failed(None),
    }
}

/// Polls a future inside [`std::panic::catch_unwind`], so a panic in it comes out as
/// `Err(payload)` instead of unwinding through the worker.
///
/// A dozen lines here rather than `futures_util::FutureExt::catch_unwind`, which needs
/// futures-util's `std` feature (and with it `slab` and futures-task's std parts) for this one
/// use. `AssertUnwindSafe`: after a panic the future is dropped and never polled again, and
/// what it shared with others (the queue, the counters, the user's context) stays consistent
/// under the same rule as in any panicking thread: the queue takes its locks only in short
/// non-panicking sections, and the user's own state is the user's to keep consistent (as with
/// `tokio::spawn`, whose `JoinError` reports a panic the same way).
pub(crate) struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> CatchUnwind<F> {
    pub(crate) fn new(future: F) -> Self {
        CatchUnwind(Box::pin(future))
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match catch_unwind(AssertUnwindSafe(move || inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

/// Runs one reconcile with its panic caught; a panic is logged here and becomes
/// [`Outcome::Panicked`].
async fn reconcile_caught<K: fmt::Debug>(key: &K, work: impl Future<Output = Outcome>) -> Outcome {
    match CatchUnwind::new(work).await {
        Ok(outcome) => outcome,
        Err(payload) => {
            tracing::error!(
                key = ?key,
                panic = %crate::error::panic_message(&*payload),
                "reconcile panicked; retrying the key with backoff"
            );
            Outcome::Panicked
        }
    }
}

/// Calls `done(key)` when dropped, so a panicking or cancelled reconcile does not leave its key
/// in the in-flight set for ever (which would block the key and any drain).
struct DoneOnDrop<'a, K: Clone + Eq + Hash + Send + Sync + 'static> {
    queue: &'a WorkQueue<K>,
    key: &'a K,
}

impl<K: Clone + Eq + Hash + Send + Sync + 'static> Drop for DoneOnDrop<'_, K> {
    fn drop(&mut self) {
        self.queue.done(self.key);
    }
}

async fn worker_loop<K, R, Fut>(queue: WorkQueue<K>, reconcile: Arc<R>, counters: Arc<Counters>)
where
    K: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static,
    R: Fn(K) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    while let Some(key) = queue.get().await {
        let _done = DoneOnDrop {
            queue: &queue,
            key: &key,
        };
        // The call itself inside the caught future: a reconcile that panics before returning
        // its future is caught too.
        let outcome = reconcile_caught(&key, async { reconcile(key.clone()).await }).await;
        settle(&queue, &key, outcome, &counters);
    }
}

/// What a finished reconcile's outcome does to its key, and the count it adds to.
fn settle<K>(queue: &WorkQueue<K>, key: &K, outcome: Outcome, counters: &Counters)
where
    K: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static,
{
    // Relaxed increments: plain counters, read once every worker has been joined.
    let count = match outcome {
        Outcome::Reconciled(Action::Done) => {
            queue.forget(key);
            &counters.done
        }
        Outcome::Reconciled(Action::RequeueAfter(delay)) => {
            queue.forget(key);
            queue.add_after(key.clone(), delay);
            &counters.requeued_after
        }
        Outcome::Failed(None) => {
            retry_with_backoff(queue, key);
            &counters.failed
        }
        Outcome::Failed(Some(action)) => {
            // The error policy chose the schedule: the key's backoff history goes.
            queue.forget(key);
            if let Action::RequeueAfter(delay) = action {
                tracing::debug!(key = ?key, ?delay, "retrying as the error policy said");
                queue.add_after(key.clone(), delay);
            }
            &counters.failed
        }
        Outcome::Panicked => {
            retry_with_backoff(queue, key);
            &counters.panicked
        }
        Outcome::Absent => {
            queue.forget(key);
            &counters.absent
        }
    };
    count.fetch_add(1, Ordering::Relaxed);
}

fn retry_with_backoff<K>(queue: &WorkQueue<K>, key: &K)
where
    K: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static,
{
    let delay = queue.add_rate_limited(key.clone());
    tracing::debug!(
        key = ?key,
        ?delay,
        requeues = queue.num_requeues(key),
        "retrying with backoff"
    );
}

/// [`worker_loop`] under a fence: see [`WorkerPool::run_fenced`].
async fn fenced_worker_loop<K, T, R, Fut>(
    queue: WorkQueue<K>,
    reconcile: Arc<R>,
    counters: Arc<Counters>,
    mut fence: watch::Receiver<Option<T>>,
    mut stopping: watch::Receiver<bool>,
) where
    K: Clone + Eq + Hash + fmt::Debug + Send + Sync + 'static,
    T: FenceToken,
    R: Fn(K, T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    loop {
        // Wait for the fence to open with a token that holds; on shutdown while it is closed,
        // stop.
        let token = loop {
            // A fence whose sender is gone is closed for good, whatever value it was left
            // holding: an elector dropped while leading renews nothing any more.
            if fence.has_changed().is_err() {
                return;
            }
            // A token that no longer holds is as good as closed: its owner closes the fence (or
            // opens it anew) when it next runs, which wakes this wait.
            if let Some(token) = fence.borrow_and_update().clone().filter(T::holds) {
                break token;
            }
            if *stopping.borrow() {
                return;
            }
            let opened = fence.changed();
            let stopped = stopping.wait_for(|s| *s);
            if let Either::Left((Err(_), _)) = select(pin!(opened), pin!(stopped)).await {
                return; // the fence's sender is gone: closed for good
            }
        };
        let Some(key) = queue.get().await else {
            return;
        };
        let _done = DoneOnDrop {
            queue: &queue,
            key: &key,
        };
        // The fence may have moved while this worker waited for a key.
        if fence.borrow().as_ref() != Some(&token) {
            queue.add(key.clone()); // held back, handed out again after `done`
            continue;
        }
        let work = WhileHolds {
            token: &token,
            // The call itself inside the caught future, as in `worker_loop`: a reconcile that
            // panics before returning its future costs this key a retry, not the worker.
            work: pin!(reconcile_caught(&key, async {
                reconcile(key.clone(), token.clone()).await
            })),
        };
        let moved = fence.wait_for(|now| now.as_ref() != Some(&token));
        match select(pin!(work), pin!(moved)).await {
            Either::Left((Some(outcome), _)) => settle(&queue, &key, outcome, &counters),
            Either::Left((None, _)) => {
                // The token stopped holding before the fence moved (its owner has not run
                // yet): the reconcile was dropped before its next step.
                tracing::debug!(key = ?key, "the fence's token lapsed under a reconcile: cancelled, queued again");
                queue.add(key.clone());
                // Relaxed: a counter read for display.
                counters.fenced.fetch_add(1, Ordering::Relaxed);
            }
            Either::Right((closed, _)) => {
                // Cancelled: the reconcile future is dropped here, at its current `.await`.
                tracing::debug!(key = ?key, "the fence closed under a reconcile: cancelled, queued again");
                queue.add(key.clone());
                // Relaxed: a counter read for display.
                counters.fenced.fetch_add(1, Ordering::Relaxed);
                if closed.is_err() {
                    return; // the sender is gone: closed for good (above)
                }
            }
        }
    }
}

/// Polls a reconcile only while its fence token [holds](FenceToken::holds): `None`, without
/// polling it again, once the token has lapsed.
struct WhileHolds<'a, T, F> {
    token: &'a T,
    work: Pin<&'a mut F>,
}

impl<T: FenceToken, F: Future> Future for WhileHolds<'_, T, F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if !self.token.holds() {
            return Poll::Ready(None);
        }
        self.work.as_mut().poll(cx).map(Some)
    }
}
