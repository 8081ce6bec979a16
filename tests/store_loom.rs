//! Model-checks the store's borrowed lookups with loom (`src/store/shard.rs`, `src/store/hazard.rs`):
//! every interleaving (up to the preemption bound) of readers holding a `Ref` and a writer
//! replacing and removing the object. While a `Ref` lives, the store must hold the object it
//! points at; once the `Ref` has gone, the shard's next write must free it.
//!
//! The shard lock is loom's `RwLock` and the hazard slots loom's atomics in this build. Most
//! models count `Arc`s, which checks the protocol's logic; `a_refs_reads_happen_before_the_free`
//! reads an object whose value is a loom `UnsafeCell` that its drop writes, so loom also checks
//! that the slots' orderings put every read through a `Ref` before the free (with the slots'
//! stores and loads relaxed, that model fails). The table itself is not in a loom cell: that no
//! reader is inside it while a writer changes it is the `RwLock`'s to guarantee.
//!
//! Run with `RUSTFLAGS="--cfg informer_loom" cargo test --test store_loom --release`; compiled out
//! otherwise.
#![cfg(informer_loom)]

use std::sync::Arc;

use loom::thread;

use loom::cell::UnsafeCell;

use informer::Pod;
use informer::model::{Object, ObjectMeta};
use informer::store::{Ref, Writer};

fn pod(name: &str, rv: &str) -> Arc<Pod> {
    let mut p = Pod::default();
    (p.metadata.namespace, p.metadata.name) = ("ns".into(), name.into());
    p.metadata.resource_version = rv.into();
    Arc::new(p)
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Looks `ns/a` up and, after letting the writer run, checks the store still holds what it found.
/// The test keeps its own `Arc` of every object, so a bug shows as a count, not as a use after free:
/// the test's, the one taken here, and the store's make three.
fn read_a(store: &Writer<Pod>) {
    if let Some(r) = store.get("ns", "a") {
        thread::yield_now();
        let held = Ref::to_arc(&r);
        assert!(
            Arc::strong_count(&held) >= 3,
            "rv {} is no longer held by the store while a Ref points at it",
            r.metadata.resource_version
        );
        assert_eq!(r.metadata.name, "a");
    }
}

/// A reader's `Ref` races with a replace and a remove of its object.
#[test]
fn a_ref_outlives_replace_and_remove() {
    model(|| {
        let store = Arc::new(Writer::<Pod>::new());
        let (first, second) = (pod("a", "1"), pod("a", "2"));
        store.insert(first.clone());
        let reader = {
            let store = store.clone();
            thread::spawn(move || read_a(&store))
        };
        drop(store.insert(second.clone()));
        drop(store.remove("ns/a"));
        reader.join().unwrap();
        // What the Ref kept goes at the shard's next write.
        drop(store.insert(pod("a", "3")));
        assert_eq!(Arc::strong_count(&first), 1);
        assert_eq!(Arc::strong_count(&second), 1);
    });
}

/// A store holding `ns/a` at rv 1 (returned, for its count), `n` threads running `reader` on it,
/// and this thread replacing `ns/a` with rv 2 meanwhile; returns once every reader has joined.
fn readers_race_a_replace(n: usize, reader: fn(&Writer<Pod>)) -> (Arc<Writer<Pod>>, Arc<Pod>) {
    let store = Arc::new(Writer::<Pod>::new());
    let first = pod("a", "1");
    store.insert(first.clone());
    let readers: Vec<_> = (0..n)
        .map(|_| {
            let store = store.clone();
            thread::spawn(move || reader(&store))
        })
        .collect();
    drop(store.insert(pod("a", "2")));
    for r in readers {
        r.join().unwrap();
    }
    (store, first)
}

/// Two readers: the first to go must not free what the other still reads.
#[test]
fn one_ref_going_does_not_free_what_another_reads() {
    model(|| {
        let (store, first) = readers_race_a_replace(2, read_a);
        drop(store.insert(pod("a", "3")));
        assert_eq!(Arc::strong_count(&first), 1);
    });
}

/// What a `Ref` kept goes at its shard's next write after it: one more write, and the replaced
/// object is the test's alone, whenever the `Ref` went (before, during or after the replace).
#[test]
fn what_a_ref_kept_goes_at_the_next_write() {
    model(|| {
        let (store, first) = readers_race_a_replace(1, |store| {
            let r = store.get("ns", "a");
            thread::yield_now();
            drop(r);
        });
        assert!(
            Arc::strong_count(&first) <= 2,
            "more than one Arc of the replaced object is kept"
        );
        drop(store.insert(pod("a", "3")));
        assert_eq!(
            Arc::strong_count(&first),
            1,
            "the replaced object is still kept after its Ref and a later write"
        );
    });
}

/// A thread holding more `Ref`s than it has hazard slots: the ones beyond own an `Arc` count, and
/// every one still reads its object while the writer replaces them all.
#[test]
fn refs_beyond_the_slots_own_their_objects() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(|| {
        let store = Arc::new(Writer::<Pod>::new());
        let names: Vec<String> = (0..9).map(|i| format!("p{i}")).collect();
        let firsts: Vec<Arc<Pod>> = names.iter().map(|n| pod(n, "1")).collect();
        for p in &firsts {
            store.insert(p.clone());
        }
        let reader = {
            let store = store.clone();
            let names = names.clone();
            thread::spawn(move || {
                let refs: Vec<_> = names.iter().map(|n| store.get("ns", n).unwrap()).collect();
                thread::yield_now();
                for (r, n) in refs.iter().zip(&names) {
                    assert_eq!(&r.metadata.name, n);
                    // The test's, the store's (or the Ref's own, beyond the slots), this one.
                    assert!(Arc::strong_count(&Ref::to_arc(r)) >= 3);
                }
            })
        };
        drop(store.insert(pod("p8", "2")));
        reader.join().unwrap();
        drop(store.insert(pod("p8", "3")));
        assert!(firsts.iter().skip(8).all(|p| Arc::strong_count(p) == 1));
    });
}

/// Lookups, hits and misses, while the writer removes the key and inserts it again (one key, so
/// one shard's table): every hit reads a whole object, and no interleaving deadlocks.
#[test]
fn lookups_never_overlap_a_write() {
    model(|| {
        let store = Arc::new(Writer::<Pod>::new());
        store.insert(pod("a", "1"));
        let reader = {
            let store = store.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    if let Some(r) = store.get("ns", "a") {
                        assert_eq!(r.metadata.name, "a");
                    }
                }
            })
        };
        store.remove("ns/a");
        store.insert(pod("a", "2"));
        reader.join().unwrap();
        assert_eq!(store.get("ns", "a").unwrap().metadata.resource_version, "2");
    });
}

/// An object whose value is a loom cell, written when the object is freed: loom reports a read
/// through a `Ref` that does not happen before the free.
struct Tracked {
    metadata: ObjectMeta,
    value: UnsafeCell<u64>,
}

// SAFETY: `value` is written only in `drop`, when no other reference to the object exists; loom
// checks exactly that in the model below.
unsafe impl Sync for Tracked {}

impl Tracked {
    fn new(rv: &str) -> Arc<Tracked> {
        let mut metadata = ObjectMeta::default();
        (metadata.namespace, metadata.name) = ("ns".into(), "a".into());
        metadata.resource_version = rv.into();
        Arc::new(Tracked {
            metadata,
            value: UnsafeCell::new(7),
        })
    }

    fn read(&self) -> u64 {
        // SAFETY: loom checks that no write (the drop's) is concurrent with this read.
        self.value.with(|v| unsafe { *v })
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        // SAFETY: as for `read`.
        self.value.with_mut(|v| unsafe { *v = 0 });
    }
}

impl<'de> serde::Deserialize<'de> for Tracked {
    fn deserialize<D: serde::Deserializer<'de>>(_: D) -> Result<Self, D::Error> {
        Err(serde::de::Error::custom("a test object, never decoded"))
    }
}

impl Object for Tracked {
    type Meta = ObjectMeta;

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// A reader reads its object through a `Ref` while the writer replaces it and then writes again
/// (which frees what the `Ref` kept, once it has gone): every read happens before the free.
#[test]
fn a_refs_reads_happen_before_the_free() {
    model(|| {
        let store = Arc::new(Writer::<Tracked>::new());
        store.insert(Tracked::new("1"));
        let reader = {
            let store = store.clone();
            thread::spawn(move || {
                if let Some(r) = store.get("ns", "a") {
                    assert_eq!(r.read(), 7);
                }
            })
        };
        drop(store.insert(Tracked::new("2")));
        store.apply_all(&[]);
        reader.join().unwrap();
    });
}
