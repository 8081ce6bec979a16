//! A fixed set of OS threads that runs jobs in the order they were submitted.
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
//! Invariants:
//! - the threads start when the first job is submitted, all at once, and never more than
//!   `threads` run;
//! - when the last [`ThreadPool`] handle is dropped the threads run the jobs already queued, then
//!   exit (nothing joins them: a handler stuck in user code must not hang the drop);
//! - a job that panics is caught here, so a thread never dies; jobs should catch their own panics
//!   to report them (the informer's do).

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

type Job = Box<dyn FnOnce() + Send>;

/// The queue the threads share.
struct Jobs {
    queue: Mutex<Queue>,
    ready: Condvar,
}

struct Queue {
    jobs: VecDeque<Job>,
    /// No handle is left: the threads exit once `jobs` is empty.
    closed: bool,
}

/// A handle to a pool of `threads` OS threads. Cheap to share behind an `Arc`; the threads exit
/// when the last handle is dropped.
pub(crate) struct ThreadPool {
    jobs: Arc<Jobs>,
    threads: usize,
    name: &'static str,
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
                    closed: false,
                }),
                ready: Condvar::new(),
            }),
            threads: threads.max(1),
            name,
            started: OnceLock::new(),
        }
    }

    /// The default size: the machine's parallelism (one thread if it cannot be read).
    pub(crate) fn default_threads() -> usize {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }

    /// Queues `job` behind every job submitted before it.
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) {
        self.started.get_or_init(|| self.spawn_threads());
        self.jobs
            .queue
            .lock()
            .unwrap()
            .jobs
            .push_back(Box::new(job));
        self.jobs.ready.notify_one();
    }

    fn spawn_threads(&self) {
        for i in 0..self.threads {
            let jobs = self.jobs.clone();
            std::thread::Builder::new()
                .name(format!("{}-{i}", self.name))
                .spawn(move || jobs.run())
                .expect("spawn a thread of the handler pool");
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.jobs.queue.lock().unwrap().closed = true;
        self.jobs.ready.notify_all();
    }
}

impl Jobs {
    /// One thread: runs jobs until the pool is closed and the queue empty.
    fn run(&self) {
        loop {
            let job = {
                let mut q = self.queue.lock().unwrap();
                loop {
                    if let Some(job) = q.jobs.pop_front() {
                        break job;
                    }
                    if q.closed {
                        return;
                    }
                    q = self.ready.wait(q).unwrap();
                }
            };
            // A job catches and reports its own panics; this only keeps the thread alive if one
            // does not.
            let _ = catch_unwind(AssertUnwindSafe(job));
        }
    }
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("name", &self.name)
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
}
