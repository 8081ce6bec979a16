//! DeltaFifo push/pop throughput against a `Mutex<VecDeque> + HashMap` coalescing queue (the
//! baseline of docs/informer-design.md §7), with distinct keys and with a few hot keys,
//! single-threaded and with a producer thread racing the consumer.
//!
//! The `slow-consumer` group: a producer pushes raw watch events (JSON, decoded only if they
//! survive) for 2k keys as fast as it can while the consumer spends ~2 µs per popped key on top of
//! the decode: the fifo's bound holds the producer back, coalescing saves the decodes of replaced
//! events, and the run prints the largest number of pending keys and undrained inputs it saw (the
//! memory figure: O(keys) + capacity, whatever the event count).
//!
//! `cargo bench --bench fifo -- --warm-up-time 1 --measurement-time 3`

use std::collections::{HashMap, VecDeque};
use std::hint::black_box;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use informer::Pod;
use informer::fifo::{Delta, DeltaFifo, RawDelta};
use informer::internals::watch::{EventDecoder, RawEvent};
use informer::store::Writer;

const EVENTS: usize = 20_000;

/// `EVENTS` modifications over `keys` distinct keys, with increasing resourceVersions.
fn events(keys: usize) -> Vec<Delta<Pod>> {
    (0..EVENTS)
        .map(|i| {
            let mut p = Pod::default();
            p.metadata.namespace = "bench".into();
            p.metadata.name = format!("pod-{}", (i * 7919) % keys);
            p.metadata.resource_version = (i + 1).to_string().into();
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
                    let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Writer::<Pod>::new()));
                    for e in evs {
                        fifo.push_now(e);
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
                    let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Writer::<Pod>::new()));
                    let producer = thread::spawn(move || {
                        for e in evs {
                            fifo.push_now(e);
                        }
                        fifo.close();
                    });
                    while let Some(p) = consumer.blocking_pop() {
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

/// `n` raw MODIFIED events over `keys` Pods, as the apiserver writes them.
fn raw_events(n: usize, keys: usize) -> Vec<RawDelta> {
    let mut dec = EventDecoder::<Pod>::new();
    (0..n)
        .map(|i| {
            let k = (i * 7919) % keys;
            dec.push(format!(
                "{{\"type\":\"MODIFIED\",\"object\":{{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{{\"name\":\"pod-{k}\",\"namespace\":\"bench\",\"uid\":\"u{k}\",\"resourceVersion\":\"{}\",\"labels\":{{\"app\":\"web\"}}}},\"spec\":{{\"nodeName\":\"node-{k}\",\"containers\":[{{\"name\":\"c\",\"image\":\"nginx:1.25\"}}]}}}}}}\n",
                i + 1
            ).as_bytes());
            match dec.next_raw().unwrap().unwrap() {
                RawEvent::Modified(o) => RawDelta::Modified(o),
                other => panic!("not raw: {other:?}"),
            }
        })
        .collect()
}

/// Spins for about `ns` nanoseconds: a consumer with work of its own per key.
fn work(ns: u64) {
    let t = std::time::Instant::now();
    while (t.elapsed().as_nanos() as u64) < ns {
        std::hint::spin_loop();
    }
}

fn slow_consumer(c: &mut Criterion) {
    const N: usize = 100_000;
    const KEYS: usize = 2_000;
    let input = raw_events(N, KEYS);
    let mut g = c.benchmark_group("fifo/slow-consumer");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10);
    // Keys pending, inputs undrained (at most), decodes saved, the fifo's capacity.
    let mut worst = (0usize, 0usize, 0u64, 0usize);
    g.bench_function("delta_fifo/raw-events-2us-per-key", |b| {
        b.iter_batched(
            || input.clone(),
            |evs| {
                let store = Arc::new(Writer::<Pod>::new());
                let (fifo, mut consumer) = DeltaFifo::new(store.clone());
                let producer = {
                    let fifo = fifo.clone();
                    thread::spawn(move || {
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .build()
                            .unwrap();
                        rt.block_on(async {
                            for e in evs {
                                fifo.push(e).await;
                            }
                        });
                        fifo.close();
                    })
                };
                while let Some(p) = consumer.blocking_pop() {
                    for d in p.deltas() {
                        store.apply(d);
                    }
                    drop(p);
                    work(2_000);
                    let m = fifo.metrics();
                    worst.0 = worst.0.max(m.depth);
                    worst.1 = worst.1.max(m.backlog);
                }
                producer.join().unwrap();
                worst.2 = fifo.metrics().decodes_saved;
                worst.3 = fifo.capacity();
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
    println!(
        "slow-consumer: {N} events over {KEYS} keys: at most {} keys pending and {} inputs undrained (capacity {}); {} of {N} decodes saved in the last run",
        worst.0, worst.1, worst.3, worst.2
    );
}

criterion_group!(benches, bench, slow_consumer);
criterion_main!(benches);
