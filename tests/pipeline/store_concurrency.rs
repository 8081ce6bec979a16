//! Store under concurrent readers and a writer: no torn state between the map and the indexes, and
//! `add_index` while writes run. Bounded by iteration counts, not by time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use informer::Pod;
use informer::store::Writer;

fn pod(name: &str, node: &str, version: u64) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.namespace = "ns".into();
    p.metadata.name = name.into();
    p.metadata.resource_version = version.to_string().into();
    p.spec.node_name = Some(node.into());
    Arc::new(p)
}

fn by_node(p: &Pod) -> Vec<String> {
    p.spec.node_name.iter().cloned().collect()
}

#[test]
fn readers_never_see_an_object_under_the_wrong_index_value() {
    const KEYS: u64 = 64;
    const ROUNDS: u64 = 200;
    let store = Arc::new(Writer::new());
    store.add_index("node", Arc::new(by_node)).unwrap();
    for k in 0..KEYS {
        store.insert(pod(&format!("p{k}"), "n0", 0));
    }
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (store, done) = (store.clone(), done.clone());
            thread::spawn(move || {
                let mut checks = 0u64;
                while !done.load(Ordering::Relaxed) || checks < 1000 {
                    for node in ["n0", "n1"] {
                        for o in store.by_index("node", node).unwrap() {
                            assert_eq!(o.spec.node_name.as_deref(), Some(node));
                        }
                    }
                    let k = checks % KEYS;
                    let o = store
                        .get("ns", &format!("p{k}"))
                        .expect("keys are never removed");
                    assert!(o.spec.node_name.is_some());
                    assert_eq!(store.len(), KEYS as usize);
                    checks += 1;
                }
            })
        })
        .collect();
    for round in 1..=ROUNDS {
        let node = if round % 2 == 0 { "n0" } else { "n1" };
        for k in 0..KEYS {
            store.insert(pod(&format!("p{k}"), node, round));
        }
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(store.index_keys("node", "n0").unwrap().len(), KEYS as usize);
    assert!(store.index_keys("node", "n1").unwrap().is_empty());
}

#[test]
fn add_index_while_a_writer_runs() {
    let store = Arc::new(Writer::new());
    let writer = {
        let store = store.clone();
        thread::spawn(move || {
            for i in 0..5000u64 {
                store.insert(pod(&format!("p{}", i % 500), &format!("n{}", i % 7), i));
                if i % 3 == 0 {
                    store.remove(&format!("ns/p{}", (i + 250) % 500));
                }
            }
        })
    };
    for i in 0..20 {
        store
            .add_index(&format!("node{i}"), Arc::new(by_node))
            .unwrap();
    }
    writer.join().unwrap();
    // Every index agrees with the map once writes stop.
    let mut expected: Vec<(String, String)> = store
        .list()
        .iter()
        .map(|p| (p.spec.node_name.clone().unwrap(), p.metadata.key()))
        .collect();
    expected.sort();
    for i in 0..20 {
        let index = format!("node{i}");
        let mut got = Vec::new();
        for v in store.index_values(&index).unwrap() {
            for k in store.index_keys(&index, &v).unwrap() {
                got.push((v.clone(), k));
            }
        }
        got.sort();
        assert_eq!(got, expected, "{index}");
    }
}

/// `apply_all` under readers: a list or an index read sees every object at one version (all of
/// one batch or all of the next), and a `Ref` held across batches still reads the object it
/// borrowed.
#[test]
fn readers_see_each_batch_whole() {
    use informer::fifo::Delta;
    const KEYS: u64 = 2_000;
    const ROUNDS: u64 = 50;
    let store = Arc::new(Writer::new());
    store.add_index("node", Arc::new(by_node)).unwrap();
    let batch = |version: u64| -> Vec<Delta<Pod>> {
        (0..KEYS)
            .map(|k| Delta::Modified(pod(&format!("p{k}"), &format!("n{}", version % 2), version)))
            .collect()
    };
    store.apply_all(&batch(0));
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (store, done) = (store.clone(), done.clone());
            thread::spawn(move || {
                let borrowed = store.get("ns", "p0").unwrap();
                let first = borrowed.metadata.resource_version.clone();
                let mut checks = 0u64;
                while !done.load(Ordering::Relaxed) || checks < 100 {
                    // Every batch moves all objects to the other node: one index value holds
                    // all of them or none.
                    let list = if r == 0 {
                        store.list()
                    } else {
                        store.by_index("node", "n0").unwrap()
                    };
                    let mut versions: Vec<&str> = list
                        .iter()
                        .map(|p| p.metadata.resource_version.as_str())
                        .collect();
                    versions.sort_unstable();
                    versions.dedup();
                    assert!(list.len() == KEYS as usize || (r == 1 && list.is_empty()));
                    assert!(versions.len() <= 1, "a read saw two batches: {versions:?}");
                    checks += 1;
                }
                // Borrowed before the batches, read after them all.
                assert_eq!(borrowed.metadata.resource_version, first);
                checks
            })
        })
        .collect();
    for version in 1..=ROUNDS {
        store.apply_all(&batch(version));
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() >= 100);
    }
    assert!(
        store
            .list()
            .iter()
            .all(|p| p.metadata.resource_version == ROUNDS.to_string())
    );
}

/// What a held `Ref` costs: its own object, not every object replaced in its shard meanwhile. A
/// thread holds more `Ref`s than it has hazard slots (eight) while every object is replaced many
/// times; each `Ref` still reads the object it borrowed, the store keeps one old version per
/// `Ref` and no more, and once the `Ref`s are gone one more write frees them all.
#[test]
fn a_held_ref_keeps_its_object_and_nothing_else() {
    const KEYS: usize = 200;
    const HELD: usize = 12;
    let store = Writer::new();
    let first: Vec<Arc<Pod>> = (0..KEYS).map(|k| pod(&format!("p{k}"), "n", 0)).collect();
    for p in &first {
        store.insert(p.clone());
    }
    let held: Vec<_> = (0..HELD)
        .map(|k| store.get("ns", &format!("p{k}")).unwrap())
        .collect();
    let mut replaced = Vec::new();
    for version in 1..=20 {
        for k in 0..KEYS {
            let p = pod(&format!("p{k}"), "n", version);
            replaced.push(Arc::downgrade(&p));
            store.insert(p);
        }
    }
    for (k, r) in held.iter().enumerate() {
        assert_eq!(r.metadata.name, format!("p{k}"));
        assert_eq!(r.metadata.resource_version, "0");
        // The test's, and the store's (kept for the Ref, or owned by it beyond the slots).
        assert_eq!(Arc::strong_count(&first[k]), 2, "p{k}");
    }
    for p in &first[HELD..] {
        assert_eq!(
            Arc::strong_count(p),
            1,
            "an object no Ref points at is kept"
        );
    }
    // Every intermediate version is gone, though Refs into every shard they were in were live.
    let live_intermediate = replaced[..replaced.len() - KEYS]
        .iter()
        .filter(|w| w.strong_count() > 0)
        .count();
    assert_eq!(live_intermediate, 0);
    drop(held);
    // The next write to each shard frees what its Refs kept.
    store.apply_all(&[]);
    assert!(first.iter().all(|p| Arc::strong_count(p) == 1));
}
