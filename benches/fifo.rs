//! DeltaFifo push/pop throughput against a `Mutex<VecDeque> + HashMap` coalescing queue (the
//! baseline of informer-design §7), with distinct keys and with a few hot keys, single-threaded and
//! with a producer thread racing the consumer.
//!
//! `cargo bench --bench fifo -- --warm-up-time 1 --measurement-time 3`

use std::collections::{HashMap, VecDeque};
use std::hint::black_box;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use informer::Pod;
use informer::fifo::{Delta, DeltaFifo};
use informer::store::Store;

const EVENTS: usize = 20_000;

/// `EVENTS` modifications over `keys` distinct keys, with increasing resourceVersions.
fn events(keys: usize) -> Vec<Delta<Pod>> {
    (0..EVENTS)
        .map(|i| {
            let mut p = Pod::default();
            p.metadata.namespace = "bench".into();
            p.metadata.name = format!("pod-{}", (i * 7919) % keys);
            p.metadata.resource_version = (i + 1).to_string();
            Delta::Modified(Arc::new(p))
        })
        .collect()
}

/// Key order, key -> newest delta, closed.
type BaselineState = (VecDeque<Arc<str>>, HashMap<Arc<str>, Delta<Pod>>, bool);

/// The baseline: one mutex over an ordered key queue and a key -> newest delta map (last wins).
struct MutexQueue {
    inner: Mutex<BaselineState>,
    ready: Condvar,
}

impl MutexQueue {
    fn new() -> Self {
        MutexQueue {
            inner: Mutex::new(Default::default()),
            ready: Condvar::new(),
        }
    }
    fn push(&self, d: Delta<Pod>) {
        let key: Arc<str> = d.key().into();
        let mut g = self.inner.lock().unwrap();
        let (order, map, _) = &mut *g;
        if let Some(slot) = map.get_mut(&key) {
            *slot = d;
        } else {
            order.push_back(key.clone());
            map.insert(key, d);
        }
        drop(g);
        self.ready.notify_one();
    }
    fn close(&self) {
        self.inner.lock().unwrap().2 = true;
        self.ready.notify_one();
    }
    fn pop(&self) -> Option<(Arc<str>, Delta<Pod>)> {
        let mut g = self.inner.lock().unwrap();
        loop {
            let (order, map, closed) = &mut *g;
            if let Some(k) = order.pop_front() {
                let d = map.remove(&k).unwrap();
                return Some((k, d));
            }
            if *closed {
                return None;
            }
            g = self.ready.wait(g).unwrap();
        }
    }
}

fn bench(c: &mut Criterion) {
    for (label, keys) in [("distinct-keys", EVENTS), ("hot-16-keys", 16)] {
        let input = events(keys);
        let mut g = c.benchmark_group(format!("fifo/{label}"));
        g.throughput(Throughput::Elements(EVENTS as u64));

        g.bench_function("delta_fifo/push-then-pop", |b| {
            b.iter_batched(
                || input.clone(),
                |evs| {
                    let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
                    for e in evs {
                        fifo.push(e);
                    }
                    while let Some(p) = consumer.try_pop() {
                        black_box(p.deltas());
                    }
                },
                BatchSize::LargeInput,
            )
        });
        g.bench_function("mutex_baseline/push-then-pop", |b| {
            b.iter_batched(
                || input.clone(),
                |evs| {
                    let q = MutexQueue::new();
                    for e in evs {
                        q.push(e);
                    }
                    q.close();
                    while let Some(p) = q.pop() {
                        black_box(p);
                    }
                },
                BatchSize::LargeInput,
            )
        });

        g.bench_function("delta_fifo/producer-thread", |b| {
            b.iter_batched(
                || input.clone(),
                |evs| {
                    let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
                    let producer = thread::spawn(move || {
                        for e in evs {
                            fifo.push(e);
                        }
                        fifo.close();
                    });
                    while let Some(p) = consumer.pop() {
                        black_box(p.deltas());
                    }
                    producer.join().unwrap();
                },
                BatchSize::LargeInput,
            )
        });
        g.bench_function("mutex_baseline/producer-thread", |b| {
            b.iter_batched(
                || input.clone(),
                |evs| {
                    let q = Arc::new(MutexQueue::new());
                    let producer = {
                        let q = q.clone();
                        thread::spawn(move || {
                            for e in evs {
                                q.push(e);
                            }
                            q.close();
                        })
                    };
                    while let Some(p) = q.pop() {
                        black_box(p);
                    }
                    producer.join().unwrap();
                },
                BatchSize::LargeInput,
            )
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
