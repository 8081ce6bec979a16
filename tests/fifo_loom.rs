//! Model-checks the fifo's concurrency core with loom: every interleaving (up to the preemption bound)
//! of producers, the consumer's drain/wait protocol, close, and the has-synced publication.
//!
//! Run with `RUSTFLAGS="--cfg informer_loom" cargo test --test fifo_loom --release`; compiled out otherwise.
#![cfg(informer_loom)]

use std::collections::HashMap;
use std::sync::Arc;

use loom::sync::Mutex;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use informer::Pod;
use informer::fifo::{Delta, DeltaFifo, KnownObjects};

fn pod(name: &str, rv: &str) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.name = name.into();
    p.metadata.resource_version = rv.into();
    Arc::new(p)
}

/// A store modelled with a loom mutex, so loom sees its synchronisation.
#[derive(Default)]
struct ModelStore(Mutex<HashMap<String, Arc<Pod>>>);

impl KnownObjects<Pod> for ModelStore {
    fn get_by_key(&self, key: &str) -> Option<Arc<Pod>> {
        self.0.lock().unwrap().get(key).cloned()
    }
    fn for_each_key(&self, f: &mut dyn FnMut(&str)) {
        for k in self.0.lock().unwrap().keys() {
            f(k);
        }
    }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Two producers push concurrently while the consumer pops (and sleeps when idle); a close after both
/// must still let the consumer see both keys and then end. A lost wake-up shows up as a deadlock.
#[test]
fn two_producers_one_consumer_nothing_lost() {
    model(|| {
        let (fifo, mut consumer) = DeltaFifo::new(Arc::new(ModelStore::default()));
        let producers: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|name| {
                let fifo = fifo.clone();
                thread::spawn(move || assert!(fifo.push_now(Delta::Added(pod(name, "1")))))
            })
            .collect();
        let reader = thread::spawn(move || {
            let mut keys = Vec::new();
            while let Some(p) = consumer.blocking_pop() {
                keys.push(p.key().to_string());
            }
            keys.sort();
            keys
        });
        for p in producers {
            p.join().unwrap();
        }
        fifo.close();
        assert_eq!(reader.join().unwrap(), ["a", "b"]);
    });
}

/// Events for one key racing with pops: versions come out in order, the newest is always delivered,
/// and nothing is delivered twice.
#[test]
fn coalescing_races_with_pops() {
    model(|| {
        let (fifo, mut consumer) = DeltaFifo::new(Arc::new(ModelStore::default()));
        let producer = {
            let fifo = fifo.clone();
            thread::spawn(move || {
                fifo.push_now(Delta::Added(pod("a", "1")));
                fifo.push_now(Delta::Modified(pod("a", "2")));
                fifo.close();
            })
        };
        let mut seen = Vec::new();
        while let Some(p) = consumer.blocking_pop() {
            for d in p.deltas() {
                seen.push(d.resource_version().to_string());
            }
        }
        producer.join().unwrap();
        assert!(seen == ["2"] || seen == ["1", "2"], "{seen:?}");
    });
}

/// `has_synced() == true` must imply that the consumer's processing of the first list is visible
/// (the Release/Acquire pair on the synced flag).
#[test]
fn has_synced_publishes_processing() {
    model(|| {
        let store = Arc::new(ModelStore::default());
        let (fifo, mut consumer) = DeltaFifo::new(store.clone());
        let processed = Arc::new(AtomicUsize::new(0));
        fifo.begin_relist();
        fifo.relist_page_now(vec![pod("a", "1")]);
        fifo.end_relist();
        let worker = {
            let processed = processed.clone();
            thread::spawn(move || {
                let p = consumer.blocking_pop().unwrap();
                // Relaxed on purpose: only the fifo's synced flag may order this for the observer.
                processed.store(1, Ordering::Relaxed);
                drop(p);
            })
        };
        if fifo.has_synced() {
            assert_eq!(processed.load(Ordering::Relaxed), 1);
        }
        worker.join().unwrap();
        assert!(fifo.has_synced());
    });
}

/// A consumer asleep in `pop` is woken by `close`.
#[test]
fn close_wakes_a_sleeping_consumer() {
    model(|| {
        let (fifo, mut consumer) = DeltaFifo::new(Arc::new(ModelStore::default()));
        let reader = thread::spawn(move || consumer.blocking_pop().is_none());
        fifo.close();
        assert!(reader.join().unwrap());
    });
}
