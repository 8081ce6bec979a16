//! `Store::get` latency against a single `RwLock<HashMap<String, Arc<T>>>`
//! (docs/informer-design.md §7), idle and with a writer thread replacing objects the whole time.
//! Criterion reports means; after it, a custom measurement prints per-lookup p50/p99 (batches of
//! 64 lookups timed with `Instant`), then how long a relist of every object holds the store.
//!
//! `cargo bench --bench store -- --warm-up-time 1 --measurement-time 3`

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::thread;
use std::time::Instant;

use criterion::{Criterion, criterion_group};
use informer::Pod;
use informer::fifo::Delta;
use informer::store::{Ref, Writer};

const NAMESPACES: usize = 100;
const PER_NAMESPACE: usize = 100;
const BATCH: usize = 64;

fn pod(ns: usize, name: usize, rv: usize) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.namespace = format!("namespace-{ns}");
    p.metadata.name = format!("pod-{name}-abcde");
    p.metadata.resource_version = rv.to_string().into();
    Arc::new(p)
}

/// Lookup keys, shuffled deterministically: "namespace/name" and where the name starts. Both stores
/// are queried from the same string (the Store with its two halves), so both touch the same memory.
fn keys() -> Vec<(String, usize)> {
    let n = NAMESPACES * PER_NAMESPACE;
    (0..n)
        .map(|i| (i * 7919) % n)
        .map(|i| {
            let ns = format!("namespace-{}", i / PER_NAMESPACE);
            (
                format!("{ns}/pod-{}-abcde", i % PER_NAMESPACE),
                ns.len() + 1,
            )
        })
        .collect()
}

fn get<'a>(store: &'a Writer<Pod>, (full, name_start): &(String, usize)) -> Option<Ref<'a, Pod>> {
    store.get(&full[..name_start - 1], &full[*name_start..])
}

type Baseline = RwLock<HashMap<String, Arc<Pod>>>;

fn fill() -> (Arc<Writer<Pod>>, Arc<Baseline>) {
    let store = Arc::new(Writer::new());
    let mut base = HashMap::new();
    for ns in 0..NAMESPACES {
        for name in 0..PER_NAMESPACE {
            let p = pod(ns, name, 1);
            base.insert(p.metadata.key(), p.clone());
            store.insert(p);
        }
    }
    (store, Arc::new(RwLock::new(base)))
}

/// A writer replacing objects round-robin in both maps until `stop`.
fn writer(
    store: Arc<Writer<Pod>>,
    base: Arc<Baseline>,
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut i = 0usize;
        while !stop.load(Ordering::Relaxed) {
            let p = pod(i % NAMESPACES, (i / NAMESPACES) % PER_NAMESPACE, i);
            base.write().unwrap().insert(p.metadata.key(), p.clone());
            store.insert(p);
            i += 1;
        }
    })
}

fn bench(c: &mut Criterion) {
    let (store, base) = fill();
    let keys = keys();
    for contended in [false, true] {
        let stop = Arc::new(AtomicBool::new(false));
        let w = contended.then(|| writer(store.clone(), base.clone(), stop.clone()));
        let mut g = c.benchmark_group(if contended {
            "store/get-with-writer"
        } else {
            "store/get-idle"
        });
        let mut i = 0;
        g.bench_function("store", |b| {
            b.iter(|| {
                let k = &keys[i % keys.len()];
                i += 1;
                black_box(get(&store, k))
            })
        });
        g.bench_function("rwlock_hashmap_baseline", |b| {
            b.iter(|| {
                let (full, _) = &keys[i % keys.len()];
                i += 1;
                black_box(base.read().unwrap().get(full.as_str()).cloned())
            })
        });
        g.finish();
        stop.store(true, Ordering::Relaxed);
        if let Some(w) = w {
            w.join().unwrap();
        }
    }
}

/// p50 and p99 of per-lookup latencies.
fn p50_p99(mut samples: Vec<f64>) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    (at(0.50), at(0.99))
}

/// Per-lookup latency: time `BATCH` lookups and divide, alternating batch by batch between the store
/// and the baseline so both see the same machine conditions; lookups cycle over the first `working`
/// keys.
fn latency_report() {
    let (store, base) = fill();
    let keys = keys();
    println!("\nper-lookup latency (batches of {BATCH}, store and baseline interleaved):");
    for contended in [false, true] {
        let stop = Arc::new(AtomicBool::new(false));
        let w = contended.then(|| writer(store.clone(), base.clone(), stop.clone()));
        for working in [keys.len(), 512] {
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            for b in 0..20_000 {
                let batch = |k: usize| &keys[(b * BATCH + k) % working];
                let start = Instant::now();
                for k in 0..BATCH {
                    black_box(get(&store, batch(k)));
                }
                ours.push(start.elapsed().as_nanos() as f64 / BATCH as f64);
                let start = Instant::now();
                for k in 0..BATCH {
                    black_box(base.read().unwrap().get(batch(k).0.as_str()).cloned());
                }
                theirs.push(start.elapsed().as_nanos() as f64 / BATCH as f64);
            }
            let ((o50, o99), (t50, t99)) = (p50_p99(ours), p50_p99(theirs));
            let writer = if contended { "writer running" } else { "idle" };
            println!(
                "{working:>6} keys, {writer:<14}  store p50 {o50:>6.1} ns p99 {o99:>6.1} ns   \
                 RwLock<HashMap> p50 {t50:>6.1} ns p99 {t99:>6.1} ns"
            );
        }
        stop.store(true, Ordering::Relaxed);
        if let Some(w) = w {
            w.join().unwrap();
        }
    }
}

/// A relist of every object (each with a new resourceVersion), applied at once (`apply_all`, what
/// an informer does: readers wait for it) and one delta at a time (what it did before): the
/// median of 21 rounds of each, interleaved.
fn relist_report() {
    let (store, _) = fill();
    let n = store.len();
    let relist = |rv: usize| -> Vec<Delta<Pod>> {
        (0..NAMESPACES)
            .flat_map(|ns| (0..PER_NAMESPACE).map(move |name| Delta::Modified(pod(ns, name, rv))))
            .collect()
    };
    let (mut at_once, mut one_by_one) = (Vec::new(), Vec::new());
    for round in 0..21 {
        let deltas = relist(2 * round + 2);
        let start = Instant::now();
        black_box(store.apply_all(&deltas));
        at_once.push(start.elapsed().as_secs_f64() * 1e3);
        let deltas = relist(2 * round + 3);
        let start = Instant::now();
        for d in &deltas {
            black_box(store.apply(d));
        }
        one_by_one.push(start.elapsed().as_secs_f64() * 1e3);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "\na relist of {n} changed objects: apply_all {:.2} ms (the longest a get waits), \
         one delta at a time {:.2} ms (medians of 21)",
        median(at_once),
        median(one_by_one)
    );
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // Skip the custom report when cargo test runs benches in test mode.
    if !std::env::args().any(|a| a == "--test" || a == "--list") {
        latency_report();
        relist_report();
    }
}
