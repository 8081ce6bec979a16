//! A set of OS threads that runs jobs in the order they were submitted, and grows only when its
//! jobs are stuck.
//!
//! Event handlers are user code that may block, so they do not run on the async runtime's
//! workers. Every informer built from one [`Client`](crate::Client) (and its clones, and the
//! factories and controllers built on it) hands its handlers' work to the one pool the client
//! owns, so a process runs `threads` handler threads however many informers and handlers it has.
//!
//! The pool knows nothing of handlers: a job is a closure. Per-handler order and isolation are the
//! informer's business (`informer/handler.rs`: each handler is a mailbox that has at most one job
//! in the pool at a time, and a job delivers a bounded batch before it queues itself again).
//!
//! A handler that blocks (a slow call, a lock held elsewhere, a bug) holds its thread. So that it
//! holds up only itself, a watchdog thread looks at the queue every [`STUCK_AFTER`] while jobs
//! wait: when the oldest has waited that long and no thread is idle, it starts one more thread
//! (up to [`MAX_EXTRA_THREADS`]), which ends after [`EXTRA_IDLE`] without work. A pool whose jobs
//! keep moving never grows: N informers and H handlers still run `threads` + 1 threads.
//!
//! Invariants:
//! - the threads (and the watchdog) start when the first job is submitted;
//! - `idle` counts threads waiting for a job; a job waits in `jobs` only while no thread is idle or
//!   between a submit and the wake-up it sends;
//! - when the last [`ThreadPool`] handle is dropped the threads run the jobs already queued, then
//!   exit (nothing joins them: a handler stuck in user code must not hang the drop);
//! - a job that panics is caught here, so a thread never dies; jobs should catch their own panics
//!   to report them (the informer's do).

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce() + Send>;

/// How long the oldest job may wait while every thread is busy before the pool grows by one.
pub(crate) const STUCK_AFTER: Duration = Duration::from_millis(100);
/// At most this many threads beyond the pool's size.
pub(crate) const MAX_EXTRA_THREADS: usize = 256;
/// An extra thread ends after this long without a job.
const EXTRA_IDLE: Duration = Duration::from_secs(10);

/// The queue the threads share.
struct Jobs {
    queue: Mutex<Queue>,
    /// Signalled when a job is queued or the pool closes.
    ready: Condvar,
    /// Signalled when the pool closes (wakes the watchdog).
    closing: Condvar,
    name: &'static str,
}

struct Queue {
    jobs: VecDeque<(Instant, Job)>,
    /// Threads waiting for a job.
    idle: usize,
    /// Extra threads running now.
    extra: usize,
    /// No handle is left: the threads exit once `jobs` is empty.
    closed: bool,
}

/// A handle to a pool of `threads` OS threads (plus its watchdog, and extra threads while jobs are
/// stuck). Shared behind an `Arc`; the threads exit when the last handle is dropped.
pub(crate) struct ThreadPool {
    jobs: Arc<Jobs>,
    threads: usize,
    started: OnceLock<()>,
}

impl ThreadPool {
    /// A pool of `threads` threads (at least one), named `name-N`; none starts before the first
    /// job.
    pub(crate) fn new(name: &'static str, threads: usize) -> ThreadPool {
        ThreadPool {
            jobs: Arc::new(Jobs {
                queue: Mutex::new(Queue {
                    jobs: VecDeque::new(),
                    idle: 0,
                    extra: 0,
                    closed: false,
                }),
                ready: Condvar::new(),
                closing: Condvar::new(),
                name,
            }),
            threads: threads.max(1),
            started: OnceLock::new(),
        }
    }

    /// The default size: the machine's parallelism (one thread if it cannot be read).
    pub(crate) fn default_threads() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// Queues `job` behind every job submitted before it.
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) {
        self.started.get_or_init(|| self.start());
        let idle = {
            let mut q = self.jobs.queue.lock().unwrap();
            q.jobs.push_back((Instant::now(), Box::new(job)));
            q.idle
        };
        // With no thread waiting, the busy ones take the job when they look at the queue again
        // (they look under the lock before they wait, and count themselves idle under it): a
        // wake-up would be a system call for nobody, once per job while the pool keeps up.
        if idle > 0 {
            self.jobs.ready.notify_one();
        }
    }

    fn start(&self) {
        for i in 0..self.threads {
            let jobs = self.jobs.clone();
            spawn(format!("{}-{i}", self.jobs.name), move || jobs.run(None));
        }
        let jobs = self.jobs.clone();
        spawn(format!("{}-watchdog", self.jobs.name), move || jobs.watch());
    }
}

/// Starts a thread; a failure (the process is out of threads) is logged, and the pool goes on
/// with the threads it has.
fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> bool {
    match std::thread::Builder::new().name(name.clone()).spawn(f) {
        Ok(_) => true,
        Err(e) => {
            tracing::error!(thread = %name, error = %e, "could not start a handler pool thread");
            false
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.jobs.queue.lock().unwrap().closed = true;
        self.jobs.ready.notify_all();
        self.jobs.closing.notify_all();
    }
}

impl Jobs {
    /// One thread: runs jobs until the pool is closed and the queue empty. An extra thread
    /// (`idle_limit` set) also ends after that long without a job.
    fn run(&self, idle_limit: Option<Duration>) {
        loop {
            let job = {
                let mut q = self.queue.lock().unwrap();
                loop {
                    if let Some((_, job)) = q.jobs.pop_front() {
                        break job;
                    }
                    if q.closed {
                        return;
                    }
                    q.idle += 1;
                    let timed_out;
                    (q, timed_out) = match idle_limit {
                        Some(limit) => {
                            let (q, r) = self.ready.wait_timeout(q, limit).unwrap();
                            (q, r.timed_out())
                        }
                        None => (self.ready.wait(q).unwrap(), false),
                    };
                    q.idle -= 1;
                    if timed_out && q.jobs.is_empty() {
                        q.extra -= 1;
                        return;
                    }
                }
            };
            // A job catches and reports its own panics; this only keeps the thread alive if one
            // does not.
            let _ = catch_unwind(AssertUnwindSafe(job));
        }
    }

    /// The watchdog: while jobs wait and no thread is idle, starts an extra thread each time the
    /// oldest job has waited [`STUCK_AFTER`].
    fn watch(self: Arc<Self>) {
        let mut q = self.queue.lock().unwrap();
        loop {
            if q.closed {
                return;
            }
            let stuck = q.idle == 0
                && q.extra < MAX_EXTRA_THREADS
                && q.jobs
                    .front()
                    .is_some_and(|(at, _)| at.elapsed() >= STUCK_AFTER);
            if stuck {
                q.extra += 1;
                let n = q.extra;
                drop(q);
                tracing::warn!(
                    pool = self.name,
                    extra_threads = n,
                    "handler jobs waited {STUCK_AFTER:?} with every thread busy (a handler that \
                     blocks?): one more thread"
                );
                let jobs = self.clone();
                if !spawn(format!("{}-extra", self.name), move || {
                    jobs.run(Some(EXTRA_IDLE))
                }) {
                    self.queue.lock().unwrap().extra -= 1;
                }
                q = self.queue.lock().unwrap();
                continue;
            }
            q = self.closing.wait_timeout(q, STUCK_AFTER).unwrap().0;
        }
    }
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("name", &self.jobs.name)
            .field("threads", &self.threads)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn jobs_run_on_at_most_the_pool_s_threads_and_a_panic_kills_none() {
        let pool = ThreadPool::new("test-pool", 2);
        let (tx, rx) = mpsc::channel();
        pool.submit(|| panic!("a job that panics"));
        for i in 0..100 {
            let tx = tx.clone();
            pool.submit(move || {
                tx.send((i, std::thread::current().name().unwrap().to_owned()))
                    .unwrap()
            });
        }
        drop(tx);
        let got: Vec<_> = rx.iter().collect();
        assert_eq!(got.len(), 100);
        let mut names: Vec<_> = got.iter().map(|(_, n)| n.as_str()).collect();
        names.sort();
        names.dedup();
        assert!(
            names.iter().all(|n| n.starts_with("test-pool-")),
            "{names:?}"
        );
        assert!(names.len() <= 2);
    }

    #[test]
    fn dropping_the_last_handle_runs_what_was_queued() {
        let pool = ThreadPool::new("test-pool", 1);
        let (tx, rx) = mpsc::channel();
        for i in 0..10 {
            let tx = tx.clone();
            pool.submit(move || tx.send(i).unwrap());
        }
        drop(pool);
        drop(tx);
        assert_eq!(rx.iter().collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
    }

    /// Two jobs block for good on a pool of one thread: the watchdog starts extra threads, and
    /// the job behind them still runs.
    #[test]
    fn jobs_stuck_for_good_do_not_hold_up_the_ones_behind_them() {
        let pool = ThreadPool::new("test-pool", 1);
        let (_never, blocked) = mpsc::channel::<()>();
        let blocked = Arc::new(Mutex::new(blocked));
        for _ in 0..2 {
            let b = blocked.clone();
            pool.submit(move || {
                let _ = b.lock().unwrap().recv();
            });
        }
        let (tx, rx) = mpsc::channel();
        pool.submit(move || {
            tx.send(std::thread::current().name().map(str::to_owned))
                .unwrap()
        });
        let ran_on = rx.recv().unwrap();
        assert_eq!(ran_on.as_deref(), Some("test-pool-extra"));
    }
}
