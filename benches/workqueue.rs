//! Work queue throughput beside a minimal baseline.
//!
//! The baseline is a `Mutex<(VecDeque, HashSet)>` plus a `Notify`: it deduplicates waiting keys
//! the same way, but has no processing set (no exclusivity, no requeue at `done`), no delays and
//! no metrics. The ratio is the price of those guarantees.
//!
//! ```text
//! CARGO_TARGET_DIR=/work/target-wq cargo bench -j 2 --bench workqueue -- --warm-up-time 1 --measurement-time 3
//! ```

use std::collections::{HashSet, VecDeque};
use std::hash::Hash;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use informer::workqueue::WorkQueue;
use tokio::runtime::{Builder, Runtime};
use tokio::sync::Notify;

/// The simplest queue with the same deduplication of waiting keys.
struct BaselineQueue<K> {
    state: Mutex<BaselineState<K>>,
    key_pushed: Notify,
}

struct BaselineState<K> {
    queue: VecDeque<K>,
    queued: HashSet<K>,
    closed: bool,
}

impl<K: Clone + Eq + Hash> BaselineQueue<K> {
    fn new() -> Self {
        Self {
            state: Mutex::new(BaselineState {
                queue: VecDeque::new(),
                queued: HashSet::new(),
                closed: false,
            }),
            key_pushed: Notify::new(),
        }
    }

    fn add(&self, key: K) {
        let pushed = {
            let mut state = self.state.lock().unwrap();
            !state.closed && state.queued.insert(key.clone()) && {
                state.queue.push_back(key);
                true
            }
        };
        if pushed {
            self.key_pushed.notify_one();
        }
    }

    fn try_take(&self) -> Option<Option<K>> {
        let mut state = self.state.lock().unwrap();
        match state.queue.pop_front() {
            Some(key) => {
                state.queued.remove(&key);
                Some(Some(key))
            }
            None => state.closed.then_some(None),
        }
    }

    async fn get(&self) -> Option<K> {
        if let Some(outcome) = self.try_take() {
            return outcome;
        }
        loop {
            let mut pushed = pin!(self.key_pushed.notified());
            pushed.as_mut().enable();
            if let Some(outcome) = self.try_take() {
                return outcome;
            }
            pushed.await;
        }
    }

    fn shut_down(&self) {
        self.state.lock().unwrap().closed = true;
        self.key_pushed.notify_waiters();
    }
}

const KEYS: u64 = 1_000;

fn current_thread() -> Runtime {
    Builder::new_current_thread().enable_all().build().unwrap()
}

/// Add 1000 distinct keys (each twice: the second add is deduplicated), then get and done each.
fn single_thread(c: &mut Criterion) {
    let rt = current_thread();
    let mut group = c.benchmark_group("single_thread_add_get_done");
    group.throughput(Throughput::Elements(KEYS));

    let queue: WorkQueue<u64> = WorkQueue::new();
    group.bench_function("workqueue", |b| {
        b.iter(|| {
            rt.block_on(async {
                for key in 0..KEYS {
                    queue.add(key);
                    queue.add(key);
                }
                for _ in 0..KEYS {
                    let key = queue.get().await.unwrap();
                    queue.done(&key);
                }
            })
        })
    });

    let untimed: WorkQueue<u64> = WorkQueue::new();
    untimed.set_timing_metrics(false);
    group.bench_function("workqueue_without_timing_metrics", |b| {
        b.iter(|| {
            rt.block_on(async {
                for key in 0..KEYS {
                    untimed.add(key);
                    untimed.add(key);
                }
                for _ in 0..KEYS {
                    let key = untimed.get().await.unwrap();
                    untimed.done(&key);
                }
            })
        })
    });

    let baseline: BaselineQueue<u64> = BaselineQueue::new();
    group.bench_function("baseline_mutex_vecdeque_hashset", |b| {
        b.iter(|| {
            rt.block_on(async {
                for key in 0..KEYS {
                    baseline.add(key);
                    baseline.add(key);
                }
                for _ in 0..KEYS {
                    baseline.get().await.unwrap();
                }
            })
        })
    });
    group.finish();
}

/// `producers` tasks each add 5000 keys from an overlapping range of 1000 while 2 consumer tasks
/// get (and done) until shutdown, on a 2-thread runtime.
fn multi_producer(c: &mut Criterion) {
    const ADDS_PER_PRODUCER: u64 = 5_000;
    const CONSUMERS: usize = 2;
    let rt = Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("multi_producer");
    for producers in [2u64, 8] {
        group.throughput(Throughput::Elements(producers * ADDS_PER_PRODUCER));
        group.bench_with_input(
            BenchmarkId::new("workqueue", producers),
            &producers,
            |b, &n| {
                b.iter(|| {
                    rt.block_on(async {
                        let queue: WorkQueue<u64> = WorkQueue::new();
                        let consumers: Vec<_> = (0..CONSUMERS)
                            .map(|_| {
                                let queue = queue.clone();
                                tokio::spawn(async move {
                                    while let Some(key) = queue.get().await {
                                        queue.done(&key);
                                    }
                                })
                            })
                            .collect();
                        let producers: Vec<_> = (0..n)
                            .map(|p| {
                                let queue = queue.clone();
                                tokio::spawn(async move {
                                    for i in 0..ADDS_PER_PRODUCER {
                                        queue.add((i * 7 + p) % KEYS);
                                    }
                                })
                            })
                            .collect();
                        for task in producers {
                            task.await.unwrap();
                        }
                        queue.shut_down();
                        for task in consumers {
                            task.await.unwrap();
                        }
                    })
                })
            },
        );
        group.bench_with_input(
            BenchmarkId::new("baseline_mutex_vecdeque_hashset", producers),
            &producers,
            |b, &n| {
                b.iter(|| {
                    rt.block_on(async {
                        let queue: Arc<BaselineQueue<u64>> = Arc::new(BaselineQueue::new());
                        let consumers: Vec<_> = (0..CONSUMERS)
                            .map(|_| {
                                let queue = Arc::clone(&queue);
                                tokio::spawn(async move { while queue.get().await.is_some() {} })
                            })
                            .collect();
                        let producers: Vec<_> = (0..n)
                            .map(|p| {
                                let queue = Arc::clone(&queue);
                                tokio::spawn(async move {
                                    for i in 0..ADDS_PER_PRODUCER {
                                        queue.add((i * 7 + p) % KEYS);
                                    }
                                })
                            })
                            .collect();
                        for task in producers {
                            task.await.unwrap();
                        }
                        queue.shut_down();
                        for task in consumers {
                            task.await.unwrap();
                        }
                    })
                })
            },
        );
    }
    group.finish();
}

/// Scheduling 1000 delayed keys (due far in the future) on a fresh queue: heap push, map insert
/// and, for the earliest key only, a timer wake-up.
fn add_after(c: &mut Criterion) {
    let rt = current_thread();
    let mut group = c.benchmark_group("add_after");
    group.throughput(Throughput::Elements(KEYS));
    group.bench_function("schedule_1000_keys", |b| {
        b.iter(|| {
            rt.block_on(async {
                let queue: WorkQueue<u64> = WorkQueue::new();
                for key in 0..KEYS {
                    queue.add_after(key, Duration::from_secs(3600 + key));
                }
                queue.shut_down();
            })
        })
    });
    group.finish();
}

criterion_group!(benches, single_thread, multi_producer, add_after);
criterion_main!(benches);
