//! `WorkerPool`: reconcile outcomes, graceful shutdown, panics, exclusivity across workers.
//!
//! Run on a paused clock, so the delays asserted are exact.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::tokens::Lapsing;
use informer::workqueue::{Action, ItemExponentialRateLimiter, RunSummary, WorkQueue, WorkerPool};
use tokio::time::{Instant, sleep, timeout};

const MS: Duration = Duration::from_millis(1);

/// When each key was reconciled, relative to `start`.
type Log = Arc<Mutex<Vec<(&'static str, Duration)>>>;

fn queue_with_backoff(base: Duration) -> WorkQueue<&'static str> {
    WorkQueue::with_rate_limiter(ItemExponentialRateLimiter::new(
        base,
        Duration::from_secs(60),
    ))
}

#[tokio::test(start_paused = true)]
async fn errors_retry_with_backoff_and_success_forgets() {
    let queue = queue_with_backoff(10 * MS);
    let log: Log = Arc::default();
    let start = Instant::now();
    queue.add("flaky");
    let controller = WorkerPool::new(queue.clone(), 2);
    let run = tokio::spawn(controller.run(
        {
            let log = Arc::clone(&log);
            move |key| {
                let log = Arc::clone(&log);
                async move {
                    let mut log = log.lock().unwrap();
                    log.push((key, Instant::now() - start));
                    if log.len() < 3 {
                        Err("not yet")
                    } else {
                        Ok(Action::Done)
                    }
                }
            }
        },
        sleep(Duration::from_secs(1)),
    ));
    let summary = run.await.unwrap();
    assert_eq!(
        summary,
        RunSummary {
            done: 1,
            requeued_after: 0,
            failed: 2,
            ..RunSummary::default()
        }
    );
    assert_eq!(
        *log.lock().unwrap(),
        [
            ("flaky", Duration::ZERO),
            ("flaky", 10 * MS),
            ("flaky", 30 * MS)
        ]
    );
    assert_eq!(
        queue.num_requeues(&"flaky"),
        0,
        "forgotten after the success"
    );
}

#[tokio::test(start_paused = true)]
async fn requeue_after_comes_back_after_the_delay() {
    let queue = queue_with_backoff(10 * MS);
    let log: Log = Arc::default();
    let start = Instant::now();
    queue.add("poll");
    let summary = WorkerPool::new(queue.clone(), 1)
        .run(
            {
                let log = Arc::clone(&log);
                move |key| {
                    let log = Arc::clone(&log);
                    async move {
                        let mut log = log.lock().unwrap();
                        log.push((key, Instant::now() - start));
                        Ok::<_, ()>(if log.len() < 3 {
                            Action::RequeueAfter(Duration::from_secs(5))
                        } else {
                            Action::Done
                        })
                    }
                }
            },
            sleep(Duration::from_secs(60)),
        )
        .await;
    assert_eq!(
        summary,
        RunSummary {
            done: 1,
            requeued_after: 2,
            ..RunSummary::default()
        }
    );
    let times: Vec<Duration> = log.lock().unwrap().iter().map(|(_, at)| *at).collect();
    assert_eq!(
        times,
        [
            Duration::ZERO,
            Duration::from_secs(5),
            Duration::from_secs(10)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn shutdown_finishes_in_flight_and_queued_keys_then_returns() {
    let queue = queue_with_backoff(MS);
    for key in ["a", "b", "c"] {
        queue.add(key);
    }
    let finished = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let summary = WorkerPool::new(queue.clone(), 1)
        .run(
            {
                let finished = Arc::clone(&finished);
                move |key| {
                    let finished = Arc::clone(&finished);
                    async move {
                        sleep(100 * MS).await; // still running when shutdown is requested
                        finished.lock().unwrap().push(key);
                        Ok::<_, ()>(Action::Done)
                    }
                }
            },
            sleep(10 * MS),
        )
        .await;
    assert_eq!(summary.done, 3);
    assert_eq!(*finished.lock().unwrap(), ["a", "b", "c"]);
    assert_eq!(Instant::now() - start, 300 * MS);
    assert!(queue.is_shutting_down());
    assert_eq!(queue.metrics().in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn run_returns_when_the_queue_is_shut_down_elsewhere() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let run = tokio::spawn(WorkerPool::new(queue.clone(), 3).run(
        |_| async { Ok::<_, ()>(Action::Done) },
        std::future::pending(),
    ));
    queue.add(1);
    sleep(MS).await;
    queue.shut_down();
    let summary = timeout(Duration::from_secs(1), run)
        .await
        .expect("run returned")
        .unwrap();
    assert_eq!(summary.done, 1);
}

/// A panic in one key's reconcile is caught: that key alone is retried with backoff (10 ms,
/// then 20 ms), the other key's reconciles go on meanwhile, and the run neither ends nor shuts
/// the queue down.
#[tokio::test(start_paused = true)]
async fn a_panicking_reconcile_is_caught_and_only_its_key_retried_with_backoff() {
    let queue = queue_with_backoff(10 * MS);
    queue.add("ok");
    queue.add("boom");
    let log: Log = Arc::default();
    let start = Instant::now();
    let summary = WorkerPool::new(queue.clone(), 2)
        .run(
            {
                let log = Arc::clone(&log);
                move |key| {
                    let log = Arc::clone(&log);
                    async move {
                        let attempt = {
                            let mut log = log.lock().unwrap();
                            log.push((key, Instant::now() - start));
                            log.iter().filter(|(k, _)| *k == key).count()
                        };
                        if key == "boom" && attempt <= 2 {
                            panic!("reconcile of {key} failed hard");
                        }
                        if key == "ok" && attempt < 4 {
                            sleep(5 * MS).await;
                            return Ok::<_, ()>(Action::RequeueAfter(MS));
                        }
                        Ok(Action::Done)
                    }
                }
            },
            sleep(Duration::from_secs(1)),
        )
        .await;
    assert_eq!(
        summary,
        RunSummary {
            done: 2,
            requeued_after: 3,
            panicked: 2,
            ..RunSummary::default()
        }
    );
    let at = |key: &str| -> Vec<Duration> {
        let log = log.lock().unwrap();
        log.iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, t)| *t)
            .collect()
    };
    assert_eq!(at("boom"), [Duration::ZERO, 10 * MS, 30 * MS], "backoff");
    assert_eq!(at("ok"), [Duration::ZERO, 6 * MS, 12 * MS, 18 * MS]);
    assert_eq!(
        queue.num_requeues(&"boom"),
        0,
        "forgotten after its success"
    );
    assert_eq!(queue.metrics().in_flight, 0);
}

/// Keys re-added while they are being reconciled are never reconciled by two workers at once,
/// and every re-add leads to one more reconcile after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_never_reconcile_one_key_concurrently() {
    const KEYS: u32 = 8;
    const ROUNDS: u32 = 200;
    let queue: WorkQueue<u32> = WorkQueue::new();
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let counts = Arc::new(Mutex::new(HashMap::<u32, u32>::new()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = tokio::spawn(WorkerPool::new(queue.clone(), 4).run(
        {
            let (in_flight, counts) = (Arc::clone(&in_flight), Arc::clone(&counts));
            move |key| {
                let (in_flight, counts) = (Arc::clone(&in_flight), Arc::clone(&counts));
                async move {
                    assert!(
                        in_flight.lock().unwrap().insert(key),
                        "{key} reconciled twice"
                    );
                    tokio::task::yield_now().await;
                    *counts.lock().unwrap().entry(key).or_default() += 1;
                    assert!(in_flight.lock().unwrap().remove(&key));
                    Ok::<_, ()>(Action::Done)
                }
            }
        },
        async {
            stopped.await.ok();
        },
    ));
    let outcome = timeout(Duration::from_secs(60), async {
        for _ in 0..ROUNDS {
            for key in 0..KEYS {
                queue.add(key);
            }
            tokio::task::yield_now().await;
        }
        stop.send(()).unwrap();
        run.await.unwrap()
    })
    .await
    .expect("controller run timed out");
    let counts = counts.lock().unwrap();
    assert_eq!(counts.len(), KEYS as usize);
    assert_eq!(u64::from(counts.values().sum::<u32>()), outcome.done);
    assert!(counts.values().all(|&n| (1..=ROUNDS).contains(&n)));
}

/// Past the grace period, the reconcile still running is cancelled (its key released) and the
/// keys still queued are dropped; what the cancelled worker finished before is still counted.
#[tokio::test(start_paused = true)]
async fn shutdown_grace_cancels_what_still_runs_and_keeps_the_counts() {
    let queue = queue_with_backoff(MS);
    for key in ["quick", "stuck", "never"] {
        queue.add(key);
    }
    let reconciled = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let summary = WorkerPool::new(queue.clone(), 1)
        .shutdown_grace(100 * MS)
        .run(
            {
                let reconciled = Arc::clone(&reconciled);
                move |key| {
                    let reconciled = Arc::clone(&reconciled);
                    async move {
                        reconciled.lock().unwrap().push(key);
                        if key == "stuck" {
                            std::future::pending::<()>().await;
                        }
                        sleep(10 * MS).await;
                        Ok::<_, ()>(Action::Done)
                    }
                }
            },
            sleep(50 * MS),
        )
        .await;
    assert_eq!(summary.done, 1, "counted although its worker was cancelled");
    assert_eq!(*reconciled.lock().unwrap(), ["quick", "stuck"]);
    assert_eq!(
        Instant::now() - start,
        150 * MS,
        "shutdown at 50 ms + 100 ms"
    );
    let metrics = queue.metrics();
    assert_eq!(metrics.in_flight, 0, "the cancelled key was marked done");
    assert!(queue.is_shutting_down());
}

/// A fenced reconcile function that panics before it returns its future costs its key a retry,
/// as in `run`: the other keys are reconciled and the run goes on. (It panicked the run when the
/// call was made outside the caught future.)
#[tokio::test(start_paused = true)]
async fn a_fenced_reconcile_panicking_before_its_future_is_caught() {
    let queue: WorkQueue<&'static str> = queue_with_backoff(10 * MS);
    queue.add("bad");
    queue.add("good");
    let (_fence, fenced) = tokio::sync::watch::channel(Some(1u64));
    let done = Arc::new(Mutex::new(Vec::new()));
    let seen = done.clone();
    let summary = WorkerPool::new(queue.clone(), 1)
        .run_fenced(
            fenced,
            move |key: &'static str, _token: u64| {
                assert_ne!(key, "bad", "a reconcile that panics at once");
                seen.lock().unwrap().push(key);
                async { Ok::<_, String>(Action::Done) }
            },
            sleep(100 * MS),
        )
        .await;
    assert_eq!(*done.lock().unwrap(), ["good"]);
    assert!(summary.panicked >= 1, "{summary:?}");
    assert_eq!(summary.done, 1, "{summary:?}");
}

/// Workers stop at once when their token lapses, and start again when the fence opens with a
/// fresh token equal to the lapsed one.
#[tokio::test(start_paused = true)]
async fn workers_stop_when_the_token_lapses_and_resume_on_a_fresh_equal_one() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let queue: WorkQueue<&'static str> = WorkQueue::new();
    let first = Lapsing::new(1);
    let (fence, fenced) = tokio::sync::watch::channel(Some(first.clone()));
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let pool = WorkerPool::new(queue.clone(), 1);
    let run = tokio::spawn(pool.run_fenced(
        fenced,
        move |_key: &'static str, _token: Lapsing| {
            counted.fetch_add(1, Ordering::SeqCst);
            async {
                sleep(10 * MS).await;
                Ok::<_, String>(Action::RequeueAfter(10 * MS))
            }
        },
        sleep(Duration::from_secs(10)),
    ));
    queue.add("k");
    sleep(100 * MS).await;
    assert!(runs.load(Ordering::SeqCst) >= 4);
    first.lapse();
    sleep(15 * MS).await; // the reconcile in flight is dropped at its next poll
    let lapsed_at = runs.load(Ordering::SeqCst);
    sleep(100 * MS).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        lapsed_at,
        "nothing runs on a lapsed token"
    );
    fence.send_replace(Some(Lapsing::new(1)));
    sleep(100 * MS).await;
    assert!(
        runs.load(Ordering::SeqCst) > lapsed_at,
        "the fresh token opens again"
    );
    let summary = run.await.unwrap();
    assert!(summary.fenced >= 1, "{summary:?}");
}
