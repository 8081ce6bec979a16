//! Work queue behaviour: client-go vectors T8/T9 and rules W1-W10 (docs/client-go.md §1.8, §5).
//!
//! Timing-sensitive tests run on a paused clock (`start_paused`): time only moves when every task
//! is idle, so delays are exact and nothing depends on the machine's load.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use informer::workqueue::{
    DefaultControllerRateLimiter, ItemExponentialRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, MaxWaitRateLimiter, RateLimiter, TokenBucketRateLimiter, WorkQueue,
};
use tokio::time::{Instant, timeout};

const MS: Duration = Duration::from_millis(1);

/// A `get` that must not return: it times out (instantly, on a paused clock).
async fn assert_get_blocks<K>(queue: &WorkQueue<K>)
where
    K: Clone + Eq + std::hash::Hash + Send + Sync + std::fmt::Debug + 'static,
{
    let got = timeout(Duration::from_secs(60), queue.get()).await;
    assert!(got.is_err(), "get returned {got:?}, expected it to block");
}

// ---- T8 ------------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn t8_three_adds_before_get_give_one_get() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("a");
    queue.add("a");
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get().await, Some("a"));
    assert_get_blocks(&queue).await;
}

#[tokio::test(start_paused = true)]
async fn t8_add_while_processing_comes_back_after_done() {
    let queue = WorkQueue::new();
    queue.add("a");
    let key = queue.get().await.unwrap();
    queue.add("a");
    assert_get_blocks(&queue).await;
    queue.done(&key);
    assert_eq!(queue.get().await, Some("a"));
}

#[tokio::test(start_paused = true)]
async fn t8_shutdown_hands_out_queued_then_none() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    queue.shut_down();
    assert_eq!(queue.get().await, Some("a"));
    assert_eq!(queue.get().await, Some("b"));
    assert_eq!(queue.get().await, None);
    assert_eq!(queue.get().await, None);
}

// ---- T9 ------------------------------------------------------------------------------------

#[test]
fn t9_item_exponential_5ms_doubles_and_forget_resets() {
    let limiter = ItemExponentialRateLimiter::new(5 * MS, Duration::from_secs(1000));
    assert_eq!(limiter.when(&"a"), 5 * MS);
    assert_eq!(limiter.when(&"a"), 10 * MS);
    assert_eq!(limiter.when(&"a"), 20 * MS);
    assert_eq!(limiter.num_requeues(&"a"), 3);
    limiter.forget(&"a");
    assert_eq!(limiter.num_requeues(&"a"), 0);
    assert_eq!(limiter.when(&"a"), 5 * MS);
}

#[test]
fn t9_bucket_reservations_accumulate() {
    let bucket = TokenBucketRateLimiter::new(10.0, 100);
    let now = Instant::now();
    for call in 1..=100 {
        assert_eq!(bucket.reserve_at(now), Duration::ZERO, "call {call}");
    }
    assert_eq!(bucket.reserve_at(now), 100 * MS);
    assert_eq!(bucket.reserve_at(now), 200 * MS);
    assert_eq!(bucket.reserve_at(now), 300 * MS);
    // Half a second later five tokens came back (-3 + 5 = 2): the next reservation is free.
    assert_eq!(bucket.reserve_at(now + 500 * MS), Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn t9_default_controller_limiter_is_max_of_exponential_and_bucket() {
    let limiter = DefaultControllerRateLimiter::new();
    // 100 distinct keys at one frozen instant: the bucket allows them all, per-key says 5 ms.
    for key in 0..100 {
        assert_eq!(limiter.when(&key), 5 * MS, "key {key}");
    }
    // The 101st and 102nd calls (any keys) wait for reserved tokens.
    assert_eq!(limiter.when(&100), 100 * MS);
    assert_eq!(limiter.when(&101), 200 * MS);
    // Per-key backoff still counts: key 0 is at its 2nd failure (10 ms), the bucket says 300 ms.
    assert_eq!(limiter.when(&0), 300 * MS);
    assert_eq!(limiter.num_requeues(&0), 2);
    limiter.forget(&0);
    assert_eq!(limiter.num_requeues(&0), 0);
}

#[test]
fn t9_default_per_key_sequence_reaches_cap_on_19th_call() {
    let limiter = ItemExponentialRateLimiter::new(5 * MS, Duration::from_secs(1000));
    let delays: Vec<Duration> = (0..20).map(|_| limiter.when(&"a")).collect();
    assert_eq!(delays[17], Duration::from_millis(655_360)); // 18th call: 17 doublings
    assert_eq!(delays[18], Duration::from_secs(1000)); // 19th call: capped
    assert_eq!(delays[19], Duration::from_secs(1000));
}

// ---- W2: add ---------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn w2_add_is_ignored_while_shutting_down() {
    let queue = WorkQueue::new();
    queue.shut_down();
    queue.add("a");
    assert_eq!(queue.len(), 0);
    assert_eq!(queue.get().await, None);
}

#[tokio::test(start_paused = true)]
async fn w2_keys_keep_fifo_order_and_dedup_keeps_first_position() {
    let queue = WorkQueue::new();
    for key in ["a", "b", "a", "c", "b"] {
        queue.add(key);
    }
    assert_eq!(queue.len(), 3);
    for expected in ["a", "b", "c"] {
        assert_eq!(queue.get().await, Some(expected));
    }
}

#[tokio::test(start_paused = true)]
async fn w2_key_added_while_processing_is_not_queued_and_dedups_with_itself() {
    let queue = WorkQueue::new();
    queue.add(1);
    let key = queue.get().await.unwrap();
    queue.add(1);
    queue.add(1);
    assert_eq!(queue.len(), 0, "a processing key must not be queued");
    queue.done(&key);
    assert_eq!(queue.len(), 1, "requeued once at done");
    assert_eq!(queue.get().await, Some(1));
    queue.done(&1);
    assert_get_blocks(&queue).await;
}

// ---- W3: get ---------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn w3_get_blocks_until_an_add_from_another_task() {
    let queue = WorkQueue::new();
    let getter = tokio::spawn({
        let queue = queue.clone();
        async move { queue.get().await }
    });
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!getter.is_finished());
    queue.add("late");
    assert_eq!(getter.await.unwrap(), Some("late"));
}

#[tokio::test(start_paused = true)]
async fn w3_shutdown_wakes_every_blocked_getter() {
    let queue: WorkQueue<u32> = WorkQueue::new();
    let getters: Vec<_> = (0..4)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.get().await })
        })
        .collect();
    tokio::task::yield_now().await;
    queue.shut_down();
    for getter in getters {
        assert_eq!(getter.await.unwrap(), None);
    }
}

#[tokio::test(start_paused = true)]
async fn w3_each_add_wakes_a_distinct_getter() {
    let queue = WorkQueue::new();
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let queue = queue.clone();
            tokio::spawn(async move { queue.get().await })
        })
        .collect();
    tokio::task::yield_now().await;
    queue.add(1);
    queue.add(2);
    queue.add(3);
    let mut got = HashSet::new();
    for getter in getters {
        got.insert(getter.await.unwrap().unwrap());
    }
    assert_eq!(got, HashSet::from([1, 2, 3]));
}

#[tokio::test(start_paused = true)]
async fn w3_cancelled_get_takes_no_key() {
    let queue = WorkQueue::new();
    assert!(timeout(MS, queue.get()).await.is_err());
    queue.add("a");
    assert_eq!(queue.get().await, Some("a"));
}

// ---- W4: done --------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn w4_done_of_a_key_not_processing_is_ignored() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.done(&"a"); // queued, not processing: must not queue it a second time
    queue.done(&"zzz");
    assert_eq!(queue.len(), 1);
    assert_eq!(queue.get().await, Some("a"));
    queue.done(&"a");
    assert_get_blocks(&queue).await;
}

// ---- W5: shutdown ----------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn w5_drain_waits_for_in_flight_keys() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    let a = queue.get().await.unwrap();
    let b = queue.get().await.unwrap();
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!drain.is_finished());
    assert!(queue.is_shutting_down());
    queue.done(&a);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!drain.is_finished(), "b is still in flight");
    queue.done(&b);
    drain.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn w5_drain_waits_for_in_flight_not_for_queued_keys() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    let a = queue.get().await.unwrap();
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    tokio::task::yield_now().await;
    queue.done(&a);
    drain.await.unwrap();
    assert_eq!(queue.len(), 1, "b is still queued");
    assert_eq!(queue.get().await, Some("b"));
}

#[tokio::test(start_paused = true)]
async fn w5_drain_with_nothing_in_flight_returns_at_once_and_is_idempotent() {
    let queue: WorkQueue<u8> = WorkQueue::new();
    queue.shut_down_with_drain().await;
    queue.shut_down_with_drain().await;
    queue.shut_down();
    queue.shut_down();
    assert!(queue.is_shutting_down());
}

#[tokio::test(start_paused = true)]
async fn w5_shut_down_cancels_a_drain_wait() {
    let queue = WorkQueue::new();
    queue.add("a");
    let _a = queue.get().await.unwrap();
    let drain = tokio::spawn({
        let queue = queue.clone();
        async move { queue.shut_down_with_drain().await }
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!drain.is_finished());
    queue.shut_down();
    timeout(Duration::from_secs(1), drain)
        .await
        .expect("drain cancelled")
        .unwrap();
}

// ---- W6: len ---------------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn w6_len_excludes_processing_and_delayed_keys() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    queue.add_after("c", Duration::from_secs(1));
    let _a = queue.get().await.unwrap();
    assert_eq!(queue.len(), 1);
    let metrics = queue.metrics();
    assert_eq!(
        (metrics.depth, metrics.in_flight, metrics.delayed),
        (1, 1, 1)
    );
}

// ---- W7: rate limiters -----------------------------------------------------------------------

#[test]
fn w7_exponential_guards_against_overflow() {
    let limiter = ItemExponentialRateLimiter::new(Duration::from_secs(1), Duration::MAX);
    let last = (0..200).map(|_| limiter.when(&"a")).last().unwrap();
    assert_eq!(last, Duration::MAX);
    let zero = ItemExponentialRateLimiter::new(Duration::ZERO, Duration::from_secs(1));
    assert_eq!(
        (0..100).map(|_| zero.when(&"a")).last().unwrap(),
        Duration::ZERO
    );
}

#[test]
fn w7_fast_slow_counts_per_key() {
    let limiter = ItemFastSlowRateLimiter::new(MS, Duration::from_secs(1), 3);
    assert_eq!([(); 3].map(|_| limiter.when(&"a")), [MS; 3]);
    assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
    assert_eq!(limiter.when(&"b"), MS);
    assert_eq!(limiter.num_requeues(&"a"), 4);
    limiter.forget(&"a");
    assert_eq!(limiter.when(&"a"), MS);
}

#[test]
fn w7_max_of_calls_every_limiter_and_forgets_all() {
    let exponential = Arc::new(ItemExponentialRateLimiter::new(MS, Duration::from_secs(10)));
    let fast_slow = Arc::new(ItemFastSlowRateLimiter::new(
        3 * MS,
        Duration::from_secs(1),
        1,
    ));
    let limiter = MaxOfRateLimiter::new(vec![
        Box::new(Arc::clone(&exponential)) as Box<dyn RateLimiter<&str>>,
        Box::new(Arc::clone(&fast_slow)),
    ]);
    assert_eq!(limiter.when(&"a"), 3 * MS);
    assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
    assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
    // Both advanced on every call.
    assert_eq!(exponential.num_requeues(&"a"), 3);
    assert_eq!(fast_slow.num_requeues(&"a"), 3);
    assert_eq!(limiter.num_requeues(&"a"), 3);
    limiter.forget(&"a");
    assert_eq!(exponential.num_requeues(&"a"), 0);
    assert_eq!(fast_slow.num_requeues(&"a"), 0);
}

#[tokio::test(start_paused = true)]
async fn w7_max_wait_clamps_and_bucket_keeps_no_per_key_state() {
    let bucket = TokenBucketRateLimiter::new(1.0, 1);
    let limiter = MaxWaitRateLimiter::new(bucket, Duration::from_millis(1500));
    let delays: Vec<Duration> = (0..4).map(|_| limiter.when(&"a")).collect();
    let expected = [0, 1000, 1500, 1500].map(Duration::from_millis); // 2 s and 3 s are clamped
    assert_eq!(delays, expected);
    assert_eq!(limiter.num_requeues(&"a"), 0);
    limiter.forget(&"a"); // no per-key state: the bucket stays in debt
    assert_eq!(limiter.when(&"b"), Duration::from_millis(1500));
}

// ---- W8: add_after ---------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn w8_add_after_hands_out_by_ready_time_and_earlier_wins() {
    let queue = WorkQueue::new();
    let start = Instant::now();
    queue.add_after("a", 30 * MS);
    queue.add_after("b", 10 * MS);
    queue.add_after("c", 20 * MS);
    queue.add_after("a", 5 * MS); // earlier: wins
    queue.add_after("b", 50 * MS); // later: ignored
    assert_eq!(queue.len(), 0);
    for (key, at) in [("a", 5), ("b", 10), ("c", 20)] {
        assert_eq!(queue.get().await, Some(key));
        assert_eq!(Instant::now() - start, at * MS, "{key}");
        queue.done(&key);
    }
    // Neither the superseded 30 ms entry of "a" nor the 50 ms one of "b" fires.
    assert_get_blocks(&queue).await;
    assert_eq!(queue.metrics().delayed, 0);
}

#[tokio::test(start_paused = true)]
async fn w8_zero_delay_adds_now_and_due_keys_dedup_with_direct_adds() {
    let queue = WorkQueue::new();
    queue.add_after("now", Duration::ZERO);
    assert_eq!(queue.len(), 1);
    queue.add("x");
    queue.add_after("x", 10 * MS);
    tokio::time::sleep(20 * MS).await;
    assert_eq!(
        queue.len(),
        2,
        "x was already queued: the delayed add dedups"
    );
}

#[tokio::test(start_paused = true)]
async fn w8_new_earliest_deadline_preempts_a_sleeping_timer() {
    let queue = WorkQueue::new();
    let start = Instant::now();
    queue.add_after("slow", Duration::from_secs(3600));
    tokio::time::sleep(MS).await; // the timer task now sleeps for an hour
    queue.add_after("fast", MS);
    assert_eq!(queue.get().await, Some("fast"));
    assert_eq!(Instant::now() - start, 2 * MS);
}

#[tokio::test(start_paused = true)]
async fn w8_shutdown_drops_delayed_keys_and_ignores_new_ones() {
    let queue = WorkQueue::new();
    queue.add_after("a", 10 * MS);
    queue.shut_down();
    queue.add_after("b", 10 * MS);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(queue.get().await, None);
    assert_eq!(queue.metrics().delayed, 0);
}

#[tokio::test(start_paused = true)]
async fn w8_many_delayed_keys_fire_in_ready_order() {
    let queue = WorkQueue::new();
    let start = Instant::now();
    // Scheduled in a scrambled order; each key k is due at k ms.
    for k in (0..200u32).map(|i| (i * 7919) % 200 + 1) {
        queue.add_after(k, k * MS);
    }
    for k in 1..=200u32 {
        assert_eq!(queue.get().await, Some(k));
        assert_eq!(Instant::now() - start, k * MS);
        queue.done(&k);
    }
}

#[tokio::test(start_paused = true)]
async fn w8_timer_task_exits_when_the_queue_is_dropped() {
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let queue = WorkQueue::new();
    queue.add_after("a", Duration::from_secs(3600));
    tokio::task::yield_now().await;
    assert_eq!(alive(), 1, "the timer task");
    drop(queue);
    for _ in 0..100 {
        if alive() == 0 {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the timer task outlived its queue");
}

// ---- W9: rate-limited adds -------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn w9_add_rate_limited_waits_the_limiter_delay_and_forget_resets() {
    let limiter = ItemExponentialRateLimiter::new(10 * MS, Duration::from_secs(1));
    let queue = WorkQueue::with_rate_limiter(limiter);
    for expected in [10, 20, 40] {
        let start = Instant::now();
        queue.add_rate_limited("a");
        assert_eq!(queue.get().await, Some("a"));
        assert_eq!(Instant::now() - start, expected * MS);
        queue.done(&"a");
    }
    assert_eq!(queue.num_requeues(&"a"), 3);
    queue.forget(&"a");
    assert_eq!(queue.num_requeues(&"a"), 0);
    let start = Instant::now();
    queue.add_rate_limited("a");
    assert_eq!(queue.get().await, Some("a"));
    assert_eq!(Instant::now() - start, 10 * MS);
    assert_eq!(queue.metrics().retries, 4);
}

// ---- W10: metrics ----------------------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn w10_metrics_track_latency_work_duration_and_in_flight_time() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("a");
    queue.add("b");
    tokio::time::sleep(100 * MS).await;
    let a = queue.get().await.unwrap();
    tokio::time::sleep(50 * MS).await;
    let b = queue.get().await.unwrap();
    tokio::time::sleep(200 * MS).await;

    let metrics = queue.metrics();
    assert_eq!(metrics.adds, 2);
    assert_eq!(metrics.depth, 0);
    assert_eq!(metrics.in_flight, 2);
    assert_eq!(metrics.queue_latency.count, 2);
    assert_eq!(metrics.queue_latency.last, 150 * MS);
    assert_eq!(metrics.queue_latency.max, 150 * MS);
    assert_eq!(metrics.queue_latency.mean(), 125 * MS);
    assert_eq!(metrics.longest_running_processor, 250 * MS);
    assert_eq!(metrics.unfinished_work, 450 * MS);

    queue.done(&a);
    queue.done(&b);
    let metrics = queue.metrics();
    assert_eq!(metrics.work_duration.count, 2);
    assert_eq!(metrics.work_duration.max, 250 * MS);
    assert_eq!(metrics.work_duration.total, 450 * MS);
    assert_eq!(metrics.unfinished_work, Duration::ZERO);
}

#[tokio::test(start_paused = true)]
async fn w10_latency_of_a_key_added_while_processing_counts_from_that_add() {
    let queue = WorkQueue::new();
    queue.add("a");
    let a = queue.get().await.unwrap();
    tokio::time::sleep(10 * MS).await;
    queue.add("a");
    tokio::time::sleep(30 * MS).await;
    queue.done(&a);
    assert_eq!(queue.get().await, Some("a"));
    assert_eq!(queue.metrics().queue_latency.last, 30 * MS);
}

#[tokio::test(start_paused = true)]
async fn w10_timing_metrics_can_be_switched_off_and_back_on() {
    let queue = WorkQueue::new();
    queue.set_timing_metrics(false);
    queue.add("a");
    queue.add("b");
    tokio::time::sleep(100 * MS).await;
    let a = queue.get().await.unwrap();
    tokio::time::sleep(100 * MS).await;
    queue.done(&a);
    let metrics = queue.metrics();
    assert_eq!(
        (metrics.adds, metrics.depth),
        (2, 1),
        "counters are always kept"
    );
    assert_eq!(metrics.queue_latency.count, 0);
    assert_eq!(metrics.work_duration.count, 0);

    // "b" was stamped while timing was off: its clock restarts when timing comes back.
    queue.set_timing_metrics(true);
    tokio::time::sleep(10 * MS).await;
    let b = queue.get().await.unwrap();
    tokio::time::sleep(20 * MS).await;
    assert_eq!(queue.metrics().longest_running_processor, 20 * MS);
    queue.done(&b);
    let metrics = queue.metrics();
    assert_eq!(metrics.queue_latency.last, 10 * MS);
    assert_eq!(metrics.work_duration.last, 20 * MS);
}

// ---- Stress: exclusivity and no lost adds ----------------------------------------------------

/// Producers hammer a small key space while workers process. Asserts that no key is ever in
/// flight twice, and that every add is followed by a processing of that key that started after
/// it (the "add while processing comes back after done" rule, under contention).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_no_key_processed_twice_at_once_and_no_add_lost() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicU64, Ordering};

    const KEYS: usize = 32;
    const PRODUCERS: usize = 6;
    const ADDS_PER_PRODUCER: usize = 20_000;
    const WORKERS: usize = 6;

    let queue: WorkQueue<usize> = WorkQueue::new();
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    // Per key: the version bumped before every add, and the highest version a processing saw.
    let added: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let processed = Arc::new(AtomicU64::new(0));

    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (queue, in_flight) = (queue.clone(), Arc::clone(&in_flight));
            let (added, seen, processed) = (
                Arc::clone(&added),
                Arc::clone(&seen),
                Arc::clone(&processed),
            );
            tokio::spawn(async move {
                while let Some(key) = queue.get().await {
                    assert!(
                        in_flight.lock().unwrap().insert(key),
                        "key {key} handed out twice"
                    );
                    // Read the version after taking the key: every add before this point is
                    // covered by this processing.
                    let version = added[key].load(Ordering::SeqCst);
                    seen[key].fetch_max(version, Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    assert!(in_flight.lock().unwrap().remove(&key));
                    processed.fetch_add(1, Ordering::Relaxed);
                    queue.done(&key);
                }
            })
        })
        .collect();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (queue, added) = (queue.clone(), Arc::clone(&added));
            tokio::spawn(async move {
                for i in 0..ADDS_PER_PRODUCER {
                    let key = (i * 7 + p) % KEYS;
                    added[key].fetch_add(1, Ordering::SeqCst);
                    queue.add(key);
                    if i % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();

    timeout(Duration::from_secs(60), async {
        for producer in producers {
            producer.await.unwrap();
        }
        // Everything is added; shutting down still hands out what is queued or requeued.
        queue.shut_down();
        for worker in workers {
            worker.await.unwrap();
        }
    })
    .await
    .expect("stress test timed out");

    for key in 0..KEYS {
        assert_eq!(
            seen[key].load(Ordering::SeqCst),
            added[key].load(Ordering::SeqCst),
            "key {key}: its last add was never processed"
        );
    }
    let processed = processed.load(Ordering::Relaxed);
    assert!(processed >= KEYS as u64);
    assert!(processed <= (PRODUCERS * ADDS_PER_PRODUCER) as u64);
    let metrics = queue.metrics();
    assert_eq!((metrics.depth, metrics.in_flight), (0, 0));
    assert_eq!(metrics.work_duration.count, processed);
}
