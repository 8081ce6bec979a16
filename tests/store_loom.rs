//! Model-checks the store's borrowed lookups with loom (`src/store/shard.rs`): every interleaving (up
//! to the preemption bound) of readers holding a `Ref` and a writer replacing and removing the
//! object. While a `Ref` lives, the store must hold the object it points at; once the last `Ref`
//! and the write have both ended, nothing may stay kept.
//!
//! The shard's lock is the store's own (`src/store/lock.rs`: readers, pins and the writer in one
//! word), built on loom's atomics and `UnsafeCell` in this build, so the model also checks that no
//! reader is inside a table while a writer changes it (loom tracks every access to the cell).
//!
//! What loom does not see: the reads of the object itself (plain memory), so this checks the
//! protocol's logic and the orderings of its counters; that a `Ref`'s reads of the object happen
//! before its release is argued in `src/store/shard.rs`. loom treats `SeqCst` accesses as
//! acquire/release, so the model adds a `SeqCst` fence beside the two that need a total order
//! (`loom_sequential_consistency` there).
//!
//! Run with `RUSTFLAGS="--cfg informer_loom" cargo test --test store_loom --release`; compiled out
//! otherwise.
#![cfg(informer_loom)]

use std::sync::Arc;

use loom::thread;

use informer::Pod;
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
        // The last Ref may have found the write lock taken; the next write releases the rest.
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

/// Two readers: the first to go must not release what the other still reads.
#[test]
fn the_last_ref_releases_not_the_first() {
    model(|| {
        let (store, first) = readers_race_a_replace(2, read_a);
        drop(store.insert(pod("a", "3")));
        assert_eq!(Arc::strong_count(&first), 1);
    });
}

/// Nothing is left behind: when the last `Ref` goes while the writer holds the lock (its
/// `try_write` fails), the writer finds the count at zero once it has unlocked and releases what
/// it kept. No further write is needed.
#[test]
fn a_ref_that_goes_during_a_write_leaves_nothing_kept() {
    model(|| {
        let (_store, first) = readers_race_a_replace(1, |store| {
            let r = store.get("ns", "a");
            thread::yield_now();
            drop(r);
        });
        assert_eq!(
            Arc::strong_count(&first),
            1,
            "the replaced object is still kept after its last Ref and the write ended"
        );
    });
}

/// Two readers and a writer, and no write after them: whichever of them holds the lock when the
/// last `Ref` goes (the writer, or the other `Ref`'s release) checks again once it unlocks, so
/// nothing stays kept.
#[test]
fn refs_that_go_during_a_release_leave_nothing_kept() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(4);
    b.check(|| {
        let (_store, first) = readers_race_a_replace(2, |store| drop(store.get("ns", "a")));
        assert_eq!(
            Arc::strong_count(&first),
            1,
            "the replaced object is still kept after every Ref and the write ended"
        );
    });
}

/// The lock itself: lookups, hits and misses, while the writer removes the key and inserts it
/// again (one key, so one shard's table). loom tracks every access to the table, so a reader
/// inside it while the writer changes it fails the model, and so does any interleaving that
/// deadlocks.
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
