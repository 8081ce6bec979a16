//! DeltaFifo under concurrent producers and a blocking (or async) consumer: the store ends exactly at
//! the producers' final state, each key's versions are seen in increasing order, and coalescing keeps
//! the pending depth within the number of keys. Bounded by event counts, not by time.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread;

use informer::Pod;
use informer::fifo::{DeletedObject, Delta, DeltaFifo, FifoConsumer, Popped};
use informer::store::Writer;

const PRODUCERS: usize = 2;
const KEYS_PER_PRODUCER: usize = 50;
const EVENTS_PER_PRODUCER: u64 = 20_000;

fn pod(name: &str, rv: u64, uid: u64) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.namespace = "ns".into();
    p.metadata.name = name.into();
    p.metadata.resource_version = rv.to_string().into();
    p.metadata.uid = uid.to_string();
    Arc::new(p)
}

/// Pushes a deterministic mix of adds, updates, deletes and re-creates; returns the final state:
/// key -> resourceVersion of the live object (absent if deleted).
fn produce(fifo: DeltaFifo<Pod>, producer: usize) -> HashMap<String, u64> {
    let mut live: HashMap<String, (u64, u64)> = HashMap::new(); // key -> (rv, uid)
    let mut uid = 0;
    for i in 0..EVENTS_PER_PRODUCER {
        // Versions increase globally per producer, and keys are disjoint between producers.
        let rv = i * PRODUCERS as u64 + producer as u64 + 1;
        let k = (i.wrapping_mul(2654435761) % KEYS_PER_PRODUCER as u64) as usize;
        let name = format!("p{producer}-{k}");
        let key = format!("ns/{name}");
        let delta = match live.get(&key).copied() {
            None => {
                uid += 1;
                live.insert(key, (rv, uid));
                Delta::Added(pod(&name, rv, uid))
            }
            Some((_, u)) if i % 7 == 0 => {
                live.remove(&key);
                Delta::Deleted(DeletedObject::Final(pod(&name, rv, u)))
            }
            Some((_, u)) => {
                live.insert(key, (rv, u));
                Delta::Modified(pod(&name, rv, u))
            }
        };
        assert!(fifo.push_now(delta));
    }
    live.into_iter().map(|(k, (rv, _))| (k, rv)).collect()
}

/// Applies one pop (one key, or every key of a relist at once), checking versions only move
/// forward.
fn apply(store: &Writer<Pod>, seen: &mut HashMap<String, u64>, p: &Popped<'_, Pod>) {
    for d in p.deltas() {
        let key = d.key();
        let rv: u64 = d.resource_version().parse().unwrap();
        let last = seen.entry(key.clone()).or_insert(0);
        // A relist tombstone carries the last known state: not newer, but never older.
        let tombstone = matches!(d, Delta::Deleted(DeletedObject::Tombstone { .. }));
        assert!(
            rv > *last || (tombstone && rv == *last),
            "{key}: version {rv} after {last}"
        );
        *last = rv;
        if !p.is_relist() {
            store.apply(d);
        }
    }
    if p.is_relist() {
        store.apply_all(p.deltas());
    }
}

fn check(store: &Writer<Pod>, expected: HashMap<String, u64>) {
    let mut got: Vec<(String, u64)> = store
        .list()
        .iter()
        .map(|p| {
            (
                p.metadata.key(),
                p.metadata.resource_version.parse().unwrap(),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, u64)> = expected.into_iter().collect();
    want.sort();
    assert_eq!(got, want);
}

fn run_producers(fifo: &DeltaFifo<Pod>) -> thread::JoinHandle<HashMap<String, u64>> {
    let fifo = fifo.clone();
    thread::spawn(move || {
        let handles: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let fifo = fifo.clone();
                thread::spawn(move || produce(fifo, p))
            })
            .collect();
        let mut all = HashMap::new();
        for h in handles {
            all.extend(h.join().unwrap());
        }
        fifo.close();
        all
    })
}

#[test]
fn blocking_consumer_ends_at_the_producers_final_state() {
    let store = Arc::new(Writer::new());
    let (fifo, mut consumer): (_, FifoConsumer<Pod>) = DeltaFifo::new(store.clone());
    let producers = run_producers(&fifo);
    let (mut seen, mut pops, mut max_depth) = (HashMap::new(), 0u64, 0);
    while let Some(p) = consumer.blocking_pop() {
        apply(&store, &mut seen, &p);
        pops += 1;
        max_depth = max_depth.max(fifo.metrics().depth);
    }
    check(&store, producers.join().unwrap());
    let m = fifo.metrics();
    assert_eq!(m.received, EVENTS_PER_PRODUCER * PRODUCERS as u64);
    assert!(pops <= m.received);
    assert!(
        max_depth <= PRODUCERS * KEYS_PER_PRODUCER,
        "depth {max_depth}"
    );
    assert_eq!((m.depth, m.backlog), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_consumer_ends_at_the_producers_final_state() {
    let store = Arc::new(Writer::new());
    let (fifo, mut consumer) = DeltaFifo::new(store.clone());
    let producers = run_producers(&fifo);
    let mut seen = HashMap::new();
    while let Some(p) = consumer.pop().await {
        apply(&store, &mut seen, &p);
        if p.key().ends_with("-3") {
            tokio::task::yield_now().await; // a slower handler now and then
        }
    }
    check(&store, producers.join().unwrap());
}

#[test]
fn relist_racing_with_a_consumer_converges() {
    let store = Arc::new(Writer::new());
    let (fifo, mut consumer) = DeltaFifo::new(store.clone());
    let producer = {
        let fifo = fifo.clone();
        thread::spawn(move || {
            for round in 0..50u64 {
                fifo.begin_relist();
                // Each round lists a sliding window of keys, so some are new, some unchanged, some gone.
                for page in 0..4u64 {
                    let items: Vec<_> = (0..25u64)
                        .map(|i| {
                            let k = round + page * 25 + i;
                            pod(&format!("k{k}"), 1_000 * (k + 1) + round / 10, k)
                        })
                        .collect();
                    fifo.relist_page_now(items);
                }
                fifo.end_relist();
            }
            fifo.close();
        })
    };
    let mut seen = HashMap::new();
    let mut initial = 0;
    while let Some(p) = consumer.blocking_pop() {
        initial += usize::from(p.in_initial_list());
        apply(&store, &mut seen, &p);
    }
    producer.join().unwrap();
    assert!(fifo.has_synced());
    assert!(initial <= 100);
    let want: HashMap<String, u64> = (49..149u64)
        .map(|k| (format!("ns/k{k}"), 1_000 * (k + 1) + 4))
        .collect();
    check(&store, want);
}
