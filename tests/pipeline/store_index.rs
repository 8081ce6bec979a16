//! Store: lookups, listing, label selection, indexes (I4-I9) and relist-style replacement via deltas.

use std::sync::Arc;

use informer::fifo::{DeletedObject, Delta};
use informer::store::{NAMESPACE_INDEX, StoreError, Writer};
use informer::{Node, Pod};

fn pod(ns: &str, name: &str, node: &str, labels: &[(&str, &str)]) -> Arc<Pod> {
    let mut p = Pod::default();
    p.metadata.namespace = ns.into();
    p.metadata.name = name.into();
    p.spec.node_name = (!node.is_empty()).then(|| node.to_string());
    for (k, v) in labels {
        p.metadata.labels.insert(k.to_string(), v.to_string());
    }
    Arc::new(p)
}

fn names(objs: &[Arc<Pod>]) -> Vec<String> {
    let mut v: Vec<String> = objs.iter().map(|o| o.metadata.key()).collect();
    v.sort();
    v
}

fn by_node(p: &Pod) -> Vec<String> {
    p.spec.node_name.iter().cloned().collect()
}

#[test]
fn get_list_keys_and_len() {
    let s = Writer::new();
    s.insert(pod("a", "x", "", &[]));
    s.insert(pod("b", "x", "", &[]));
    s.insert(pod("a", "y", "", &[]));
    assert_eq!(s.len(), 3);
    assert!(s.get("a", "x").is_some());
    assert!(s.get("a", "z").is_none());
    assert!(
        s.get("", "a/x").is_none(),
        "namespace and name are not concatenated"
    );
    assert!(s.get_key("b/x").is_some());
    assert_eq!(names(&s.list()), ["a/x", "a/y", "b/x"]);
    let mut keys = s.keys();
    keys.sort();
    assert_eq!(keys, ["a/x", "a/y", "b/x"]);
    assert_eq!(names(&s.list_namespace("a")), ["a/x", "a/y"]);
    assert_eq!(s.index_keys(NAMESPACE_INDEX, "a").unwrap(), ["a/x", "a/y"]);
}

#[test]
fn cluster_scoped_objects_use_the_bare_name() {
    let s = Writer::<Node>::new();
    let mut n = Node::default();
    n.metadata.name = "n1".into();
    s.insert(Arc::new(n));
    assert!(s.get("", "n1").is_some());
    assert!(s.get_key("n1").is_some());
    assert_eq!(s.keys(), ["n1"]);
    assert_eq!(s.index_keys(NAMESPACE_INDEX, "").unwrap(), ["n1"]);
}

#[test]
fn insert_returns_old_and_remove_returns_removed() {
    let s = Writer::new();
    let first = pod("a", "x", "n1", &[]);
    assert!(s.insert(first.clone()).is_none());
    let old = s.insert(pod("a", "x", "n2", &[])).unwrap();
    assert!(Arc::ptr_eq(&old, &first));
    assert_eq!(s.len(), 1);
    assert!(s.remove("a/x").is_some());
    assert!(s.remove("a/x").is_none());
    assert!(s.is_empty());
}

#[test]
fn apply_handles_every_delta_kind() {
    let s = Writer::new();
    assert!(s.apply(&Delta::Added(pod("a", "x", "", &[]))).is_none());
    assert!(s.apply(&Delta::Modified(pod("a", "x", "n", &[]))).is_some());
    let tomb = DeletedObject::Tombstone {
        key: "a/x".into(),
        last_known: pod("a", "x", "", &[]),
    };
    assert!(s.apply(&Delta::Deleted(tomb)).is_some());
    assert!(
        s.apply(&Delta::Deleted(DeletedObject::Final(pod(
            "a",
            "x",
            "",
            &[]
        ))))
        .is_none()
    );
    assert!(s.is_empty());
}

#[test]
fn label_selection() {
    let s = Writer::new();
    s.insert(pod("a", "web", "", &[("app", "web"), ("env", "prod")]));
    s.insert(pod("a", "db", "", &[("app", "db"), ("env", "prod")]));
    s.insert(pod("a", "canary", "", &[("app", "web"), ("canary", "1")]));
    let sel = |q: &str| names(&s.list_selected(&q.parse().unwrap()));
    assert_eq!(sel("app=web"), ["a/canary", "a/web"]);
    assert_eq!(sel("app=web,!canary"), ["a/web"]);
    assert_eq!(sel("env in (prod),app notin (db)"), ["a/web"]);
    assert_eq!(sel("env!=prod"), ["a/canary"]);
    assert_eq!(sel("canary"), ["a/canary"]);
    assert_eq!(sel("").len(), 3);
}

#[test]
fn custom_index_moves_keys_and_drops_empty_buckets() {
    let s = Writer::new();
    s.add_index("node", Arc::new(by_node)).unwrap();
    s.insert(pod("a", "x", "n1", &[]));
    s.insert(pod("a", "y", "n1", &[]));
    assert_eq!(s.index_keys("node", "n1").unwrap(), ["a/x", "a/y"]);
    // Move x to n2: it leaves n1's bucket and the bucket object is the new one.
    let moved = pod("a", "x", "n2", &[]);
    s.insert(moved.clone());
    assert_eq!(s.index_keys("node", "n1").unwrap(), ["a/y"]);
    assert!(Arc::ptr_eq(&s.by_index("node", "n2").unwrap()[0], &moved));
    // Remove y: n1's bucket is empty and disappears (I5).
    s.remove("a/y");
    let mut values = s.index_values("node").unwrap();
    values.sort();
    assert_eq!(values, ["n2"]);
    // Zero values: not indexed at all.
    s.insert(pod("a", "z", "", &[]));
    assert_eq!(s.index_values("node").unwrap(), ["n2"]);
}

#[test]
fn same_value_update_refreshes_the_indexed_object() {
    let s = Writer::new();
    s.insert(pod("a", "x", "", &[("v", "1")]));
    let newer = pod("a", "x", "", &[("v", "2")]);
    s.insert(newer.clone());
    assert!(Arc::ptr_eq(&s.list_namespace("a")[0], &newer));
}

#[test]
fn multi_value_index() {
    let s = Writer::new();
    let labels_fn = |p: &Pod| {
        p.metadata
            .labels
            .keys()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    s.add_index("label-keys", Arc::new(labels_fn)).unwrap();
    s.insert(pod("a", "x", "", &[("k1", ""), ("k2", "")]));
    s.insert(pod("a", "y", "", &[("k2", "")]));
    assert_eq!(s.index_keys("label-keys", "k2").unwrap(), ["a/x", "a/y"]);
    s.insert(pod("a", "x", "", &[("k1", "")]));
    assert_eq!(s.index_keys("label-keys", "k2").unwrap(), ["a/y"]);
    assert_eq!(s.index_keys("label-keys", "k1").unwrap(), ["a/x"]);
}

#[test]
fn add_index_while_running_indexes_existing_objects() {
    let s = Writer::new();
    s.insert(pod("a", "x", "n1", &[]));
    s.insert(pod("b", "y", "n1", &[]));
    s.add_index("node", Arc::new(by_node)).unwrap();
    assert_eq!(s.index_keys("node", "n1").unwrap(), ["a/x", "b/y"]);
    assert_eq!(
        s.add_index("node", Arc::new(by_node)),
        Err(StoreError::IndexConflict("node".into()))
    );
    assert_eq!(
        s.by_index("nope", "v"),
        Err(StoreError::UnknownIndex("nope".into()))
    );
    assert_eq!(
        s.index_keys("node", "absent").unwrap(),
        Vec::<String>::new()
    );
}

#[test]
fn last_applied_resource_version_round_trips() {
    let s = Writer::<Pod>::new();
    assert_eq!(s.last_applied_resource_version(), "");
    s.set_last_applied_resource_version("100");
    s.set_last_applied_resource_version("101");
    assert_eq!(s.last_applied_resource_version(), "101");
}

/// A `Ref` reads the object it found even after the store replaced and removed it; the store keeps
/// that object while the `Ref` lives, and frees it at the shard's next write after the `Ref` went
/// (`src/store/hazard.rs`).
#[test]
fn a_ref_keeps_its_object_until_it_goes() {
    let s = Writer::new();
    let first = pod("a", "x", "node-1", &[]);
    s.insert(first.clone());
    let r = s.get("a", "x").unwrap();
    let second = pod("a", "x", "node-2", &[]);
    drop(s.insert(second.clone()));
    drop(s.remove("a/x"));
    assert_eq!(r.spec.node_name.as_deref(), Some("node-1"));
    assert_eq!(Arc::strong_count(&first), 2, "the test's and the store's");
    assert_eq!(Arc::strong_count(&second), 1, "no Ref points at the second");
    drop(r);
    // The same key lands in the same shard: this write frees what the Ref kept.
    s.insert(pod("a", "x", "node-3", &[]));
    assert_eq!(
        Arc::strong_count(&first),
        1,
        "freed at the write after the Ref"
    );
    assert_eq!(
        s.get("a", "x").unwrap().spec.node_name.as_deref(),
        Some("node-3")
    );
}

/// Without a live `Ref`, a replaced object is the caller's alone: the store keeps no copy.
#[test]
fn without_a_ref_the_store_keeps_nothing_it_removed() {
    let s = Writer::new();
    let first = pod("a", "x", "", &[]);
    s.insert(first.clone());
    drop(s.get("a", "x").unwrap());
    let old = s.insert(pod("a", "x", "node-2", &[])).unwrap();
    assert!(Arc::ptr_eq(&old, &first));
    drop(old);
    assert_eq!(Arc::strong_count(&first), 1);
}

/// Many `Ref`s at once, readers on other threads and a writer replacing every object until they are
/// done: every `Ref` reads a whole object of its key, and once all are gone nothing is kept.
#[test]
fn refs_on_many_threads_while_a_writer_replaces_everything() {
    use informer::store::Ref;
    use std::sync::atomic::{AtomicUsize, Ordering};
    const READERS: usize = 3;
    let s = Arc::new(Writer::new());
    let names: Vec<String> = (0..64).map(|i| format!("p{i}")).collect();
    let firsts: Vec<Arc<Pod>> = names.iter().map(|n| pod("a", n, "0", &[])).collect();
    for p in &firsts {
        s.insert(p.clone());
    }
    let done = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..READERS)
        .map(|t| {
            let (s, names, done) = (s.clone(), names.clone(), done.clone());
            std::thread::spawn(move || {
                let mut kept = Vec::new();
                for _ in 0..200 {
                    // Several Refs held at once, some kept as Arcs.
                    let refs: Vec<Ref<'_, Pod>> =
                        names.iter().filter_map(|n| s.get("a", n)).collect();
                    assert_eq!(refs.len(), names.len());
                    for (r, n) in refs.iter().zip(&names) {
                        assert_eq!(&r.metadata.name, n);
                        assert!(r.spec.node_name.as_deref().unwrap().parse::<u32>().is_ok());
                    }
                    kept.push(Ref::to_arc(&refs[t]));
                }
                done.fetch_add(1, Ordering::Release);
                kept
            })
        })
        .collect();
    let mut round = 0u32;
    while done.load(Ordering::Acquire) < READERS || round < 2000 {
        round += 1;
        let n = &names[round as usize % names.len()];
        drop(s.insert(pod("a", n, &round.to_string(), &[])));
    }
    let kept: Vec<Arc<Pod>> = readers
        .into_iter()
        .flat_map(|r| r.join().unwrap())
        .collect();
    assert!(kept.iter().all(|p| p.metadata.name.starts_with('p')));
    drop(kept);
    // One more write per object frees whatever the last Refs kept.
    for n in &names {
        drop(s.insert(pod("a", n, "9", &[])));
    }
    assert!(firsts.iter().all(|p| Arc::strong_count(p) == 1));
}
