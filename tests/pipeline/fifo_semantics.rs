//! DeltaFifo semantics: every cell of the coalescing table (docs/informer-design.md §4), stale and
//! duplicate drops, order, relist with tombstones, has_synced, and client-go's T5 vectors adapted.

use std::sync::Arc;

use informer::Pod;
use informer::fifo::{DeletedObject, Delta, DeltaFifo, FifoConsumer, RawDelta};
use informer::internals::watch::{EventDecoder, RawEvent};
use informer::store::{Ref, Writer};

fn pod(key: &str, rv: &str, uid: &str) -> Arc<Pod> {
    let mut p = Pod::default();
    let (ns, name) = key.split_once('/').unwrap_or(("", key));
    p.metadata.namespace = ns.into();
    p.metadata.name = name.into();
    p.metadata.resource_version = rv.into();
    p.metadata.uid = uid.into();
    Arc::new(p)
}

fn setup(stored: &[(&str, &str)]) -> (Arc<Writer<Pod>>, DeltaFifo<Pod>, FifoConsumer<Pod>) {
    let store = Arc::new(Writer::new());
    for (k, rv) in stored {
        store.insert(pod(k, rv, "u1"));
    }
    let (fifo, consumer) = DeltaFifo::new(store.clone());
    (store, fifo, consumer)
}

/// A compact rendering of a delta: `A:rv`, `M:rv`, `D:rv` (final) or `T:rv` (tombstone).
fn show(d: &Delta<Pod>) -> String {
    let rv = d.resource_version();
    match d {
        Delta::Added(_) => format!("A:{rv}"),
        Delta::Modified(_) => format!("M:{rv}"),
        Delta::Deleted(DeletedObject::Final(_)) => format!("D:{rv}"),
        Delta::Deleted(DeletedObject::Tombstone { .. }) => format!("T:{rv}"),
    }
}

/// Pops everything pending (applying each delta to the store), as `key=[deltas]`.
fn drain(store: &Writer<Pod>, c: &mut FifoConsumer<Pod>) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(p) = c.try_pop() {
        if !p.is_relist() {
            for d in p.deltas() {
                store.apply(d);
            }
            let ds: Vec<String> = p.deltas().iter().map(show).collect();
            out.push(format!("{}=[{}]", p.key(), ds.join(",")));
            continue;
        }
        // A relist after the first: every key at once, shown key by key.
        store.apply_all(p.deltas());
        let mut keys: Vec<(String, Vec<String>)> = Vec::new();
        for d in p.deltas() {
            match keys.last_mut() {
                Some((k, ds)) if *k == d.key() => ds.push(show(d)),
                _ => keys.push((d.key(), vec![show(d)])),
            }
        }
        out.extend(keys.iter().map(|(k, ds)| format!("{k}=[{}]", ds.join(","))));
    }
    out
}

fn added(k: &str, rv: &str) -> Delta<Pod> {
    Delta::Added(pod(k, rv, "u1"))
}
fn modified(k: &str, rv: &str) -> Delta<Pod> {
    Delta::Modified(pod(k, rv, "u1"))
}
fn deleted(k: &str, rv: &str) -> Delta<Pod> {
    Delta::Deleted(DeletedObject::Final(pod(k, rv, "u1")))
}

/// Pushes `events` for key `a` onto a fifo whose store holds `stored`, pops everything. The same
/// events are also pushed as raw watch events (JSON, decoded only when popped): both must give the
/// same result.
fn net(stored: &[(&str, &str)], events: Vec<Delta<Pod>>) -> Vec<String> {
    let (store, fifo, mut c) = setup(stored);
    for e in events.iter().cloned() {
        assert!(fifo.push_now(e));
    }
    let decoded = drain(&store, &mut c);
    let (store, fifo, mut c) = setup(stored);
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async {
            for e in events {
                match as_raw(&e) {
                    Some(raw) => assert!(fifo.push(raw).await),
                    None => assert!(fifo.push_now(e)),
                }
            }
        });
    let raw = drain(&store, &mut c);
    assert_eq!(decoded, raw, "raw watch events coalesce like decoded ones");
    decoded
}

/// The watch event a decoded delta stands for, as the reflector hands it to the fifo (tombstones
/// come from relists, never from a watch: `None`).
fn as_raw(d: &Delta<Pod>) -> Option<RawDelta> {
    let ty = match d {
        Delta::Added(_) => "ADDED",
        Delta::Modified(_) => "MODIFIED",
        Delta::Deleted(DeletedObject::Final(_)) => "DELETED",
        Delta::Deleted(DeletedObject::Tombstone { .. }) => return None,
    };
    let json = format!(
        "{{\"type\":\"{ty}\",\"object\":{}}}\n",
        serde_json::to_string(&**d.object()).unwrap()
    );
    Some(raw_delta(&json))
}

/// The event of one watch line, taken raw (panics if the decoder does not take it raw).
fn raw_delta(line: &str) -> RawDelta {
    let mut dec = EventDecoder::<Pod>::new();
    dec.push(line.as_bytes());
    match dec.next_raw().unwrap().unwrap() {
        RawEvent::Added(o) => RawDelta::Added(o),
        RawEvent::Modified(o) => RawDelta::Modified(o),
        RawEvent::Deleted(o) => RawDelta::Deleted(o),
        other => panic!("not raw: {other:?}"),
    }
}

#[test]
fn row_none() {
    assert_eq!(net(&[], vec![added("a", "1")]), ["a=[A:1]"]);
    assert_eq!(net(&[("a", "1")], vec![modified("a", "2")]), ["a=[M:2]"]);
    assert_eq!(net(&[("a", "1")], vec![deleted("a", "2")]), ["a=[D:2]"]);
}

#[test]
fn row_added() {
    assert_eq!(
        net(&[], vec![added("a", "1"), added("a", "2")]),
        ["a=[A:2]"]
    );
    assert_eq!(
        net(&[], vec![added("a", "1"), modified("a", "2")]),
        ["a=[A:2]"]
    );
    // Store does not hold the key: the add and the delete cancel out.
    assert!(net(&[], vec![added("a", "1"), deleted("a", "2")]).is_empty());
    // Store holds the key: the delete must reach it.
    assert_eq!(
        net(&[("a", "0")], vec![added("a", "1"), deleted("a", "2")]),
        ["a=[D:2]"]
    );
}

#[test]
fn row_modified() {
    let s = &[("a", "1")];
    assert_eq!(
        net(s, vec![modified("a", "2"), added("a", "3")]),
        ["a=[M:3]"]
    );
    assert_eq!(
        net(s, vec![modified("a", "2"), modified("a", "3")]),
        ["a=[M:3]"]
    );
    assert_eq!(
        net(s, vec![modified("a", "2"), deleted("a", "3")]),
        ["a=[D:3]"]
    );
}

#[test]
fn row_deleted() {
    let s = &[("a", "1")];
    let recreated = Delta::Added(pod("a", "3", "u2"));
    assert_eq!(net(s, vec![deleted("a", "2"), recreated]), ["a=[D:2,A:3]"]);
    assert_eq!(
        net(s, vec![deleted("a", "2"), added("a", "3")]),
        ["a=[M:3]"]
    );
    assert_eq!(
        net(s, vec![deleted("a", "2"), modified("a", "3")]),
        ["a=[M:3]"]
    );
    assert_eq!(
        net(s, vec![deleted("a", "2"), deleted("a", "3")]),
        ["a=[D:3]"]
    );
}

#[test]
fn recreate_pair_keeps_coalescing() {
    let s = &[("a", "1")];
    let re = || Delta::Added(pod("a", "3", "u2"));
    let m4 = Delta::Modified(pod("a", "4", "u2"));
    assert_eq!(net(s, vec![deleted("a", "2"), re(), m4]), ["a=[D:2,A:4]"]);
    // The re-created object is deleted again before anyone saw it: only the first delete is left.
    let d4 = Delta::Deleted(DeletedObject::Final(pod("a", "4", "u2")));
    assert_eq!(net(s, vec![deleted("a", "2"), re(), d4]), ["a=[D:2]"]);
}

#[test]
fn duplicates_and_stale_events_are_dropped() {
    let (store, fifo, mut c) = setup(&[("a", "5")]);
    fifo.push_now(modified("a", "5")); // equals the stored version, nothing pending
    fifo.push_now(modified("a", "7"));
    fifo.push_now(modified("a", "7")); // duplicate of pending
    fifo.push_now(modified("a", "6")); // older than pending
    assert_eq!(drain(&store, &mut c), ["a=[M:7]"]);
    let m = fifo.metrics();
    assert_eq!(
        (m.received, m.dropped_stale, m.coalesced, m.depth),
        (4, 3, 0, 0)
    );

    // Non-numeric versions are compared for equality only.
    let (store, fifo, mut c) = setup(&[]);
    fifo.push_now(added("b", "x9"));
    fifo.push_now(modified("b", "x10"));
    fifo.push_now(modified("b", "x10"));
    assert_eq!(drain(&store, &mut c), ["b=[A:x10]"]);
}

#[test]
fn keys_leave_in_first_pending_order() {
    // client-go TestDeltaFIFO_detectLineJumpers.
    let (store, fifo, mut c) = setup(&[]);
    for (k, rv) in [
        ("foo", "10"),
        ("bar", "1"),
        ("foo", "11"),
        ("foo", "13"),
        ("zab", "30"),
    ] {
        fifo.push_now(added(k, rv));
    }
    assert_eq!(
        drain(&store, &mut c),
        ["foo=[A:13]", "bar=[A:1]", "zab=[A:30]"]
    );
}

#[test]
fn a_key_cancelled_out_goes_to_the_back_when_pending_again() {
    let (store, fifo, mut c) = setup(&[]);
    fifo.push_now(added("a", "1"));
    fifo.push_now(added("b", "2"));
    fifo.push_now(deleted("a", "3"));
    fifo.push_now(added("a", "4"));
    assert_eq!(drain(&store, &mut c), ["b=[A:2]", "a=[A:4]"]);
}

#[test]
fn relist_unchanged_changed_new_and_gone() {
    let (store, fifo, mut c) = setup(&[("ns/same", "1"), ("ns/changed", "1"), ("ns/gone", "1")]);
    let same_before = Ref::to_arc(&store.get("ns", "same").unwrap());
    fifo.begin_relist();
    fifo.relist_page_now(vec![
        pod("ns/same", "1", "u1"),
        pod("ns/changed", "2", "u1"),
    ]);
    fifo.relist_page_now(vec![pod("ns/new", "3", "u1")]);
    fifo.end_relist();
    assert_eq!(
        drain(&store, &mut c),
        ["ns/changed=[M:2]", "ns/new=[A:3]", "ns/gone=[T:1]"]
    );
    // The unchanged object kept the store's allocation.
    let same = store.get("ns", "same").unwrap();
    assert!(Arc::ptr_eq(&Ref::to_arc(&same), &same_before));
    assert_eq!(store.len(), 3);
}

#[test]
fn relist_tombstones_pending_keys_with_their_newest_state() {
    let (store, fifo, mut c) = setup(&[("a", "1")]);
    fifo.push_now(modified("a", "2"));
    fifo.begin_relist();
    fifo.end_relist();
    let p = c.try_pop().unwrap();
    match p.deltas() {
        [Delta::Deleted(DeletedObject::Tombstone { key, last_known })] => {
            assert_eq!(
                (key.as_str(), last_known.metadata.resource_version.as_str()),
                ("a", "2")
            );
        }
        other => panic!("{other:?}"),
    }
    drop(p);
    drop(store);
}

#[test]
fn relist_pages_interleaved_with_pops() {
    let (store, fifo, mut c) = setup(&[("a", "1"), ("b", "1")]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "2", "u1")]);
    assert_eq!(drain(&store, &mut c), ["a=[M:2]"]);
    fifo.relist_page_now(vec![pod("c", "1", "u1")]);
    fifo.end_relist();
    // `a` was listed on an earlier page: no tombstone for it.
    assert_eq!(drain(&store, &mut c), ["c=[A:1]", "b=[T:1]"]);
}

#[test]
fn a_relist_from_nothing_tombstones_what_an_event_brought_in() {
    // Begun with nothing stored or pending, a relist keeps no set of listed keys until a watch
    // event comes in; from then on it must still find the keys that were not listed.
    let (store, fifo, mut c) = setup(&[]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "1", "u1")]);
    fifo.push_now(added("x", "5"));
    assert_eq!(drain(&store, &mut c), ["a=[A:1]", "x=[A:5]"]);
    fifo.relist_page_now(vec![pod("b", "1", "u1")]);
    fifo.push_now(added("y", "6"));
    fifo.end_relist();
    // `y` was added and tombstoned while pending: nothing to hand out.
    assert_eq!(drain(&store, &mut c), ["b=[A:1]", "x=[T:5]"]);
    assert_eq!(store.len(), 2);
    assert!(fifo.has_synced());
}

#[test]
fn a_relist_from_nothing_keeps_what_was_listed_and_applied_before_an_event() {
    // The event comes when the listed `a` is stored and nothing is pending: the set of listed
    // keys must be built from the store too.
    let (store, fifo, mut c) = setup(&[]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "1", "u1")]);
    assert_eq!(drain(&store, &mut c), ["a=[A:1]"]);
    fifo.push_now(added("x", "5"));
    fifo.relist_page_now(vec![pod("b", "1", "u1")]);
    fifo.end_relist();
    // `x` was added and tombstoned while pending; `a` stays.
    assert_eq!(drain(&store, &mut c), ["b=[A:1]"]);
    assert_eq!(store.len(), 2);
    assert!(fifo.has_synced());
}

#[test]
fn a_relist_begun_again_after_pops_tombstones_what_it_does_not_list() {
    let (store, fifo, mut c) = setup(&[]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "1", "u1"), pod("b", "1", "u1")]);
    assert_eq!(drain(&store, &mut c), ["a=[A:1]", "b=[A:1]"]);
    // Abandoned and begun again: now something is stored.
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("b", "1", "u1")]);
    fifo.end_relist();
    assert_eq!(drain(&store, &mut c), ["a=[T:1]"]);
    assert_eq!(store.len(), 1);
    assert!(fifo.has_synced());
}

#[test]
fn a_relist_from_nothing_infers_no_deletion() {
    let (store, fifo, mut c) = setup(&[]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "1", "u1"), pod("b", "1", "u1")]);
    assert_eq!(drain(&store, &mut c), ["a=[A:1]", "b=[A:1]"]);
    fifo.relist_page_now(vec![pod("c", "1", "u1")]);
    fifo.end_relist();
    assert_eq!(drain(&store, &mut c), ["c=[A:1]"]);
    assert_eq!(store.len(), 3);
    // The next relist begins with objects stored: `a` and `c` were not listed again.
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("b", "1", "u1")]);
    fifo.end_relist();
    let mut gone = drain(&store, &mut c);
    gone.sort(); // stored keys are tombstoned in the store's order
    assert_eq!(gone, ["a=[T:1]", "c=[T:1]"]);
}

#[test]
fn has_synced_after_the_first_list_is_processed() {
    let (store, fifo, mut c) = setup(&[]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "1", "u1"), pod("b", "1", "u1")]);
    fifo.end_relist();
    fifo.push_now(added("c", "2"));
    let p = c.try_pop().unwrap();
    assert!(p.in_initial_list());
    store.apply(&p.deltas()[0]);
    drop(p);
    assert!(!fifo.has_synced());
    let p = c.try_pop().unwrap();
    assert!(p.in_initial_list());
    assert!(!fifo.has_synced(), "popped but not processed yet");
    drop(p);
    assert!(fifo.has_synced());
    let p = c.try_pop().unwrap();
    assert_eq!(p.key(), "c");
    assert!(!p.in_initial_list());
}

#[test]
fn an_initial_entry_cancelled_out_does_not_block_sync() {
    let (_store, fifo, mut c) = setup(&[]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "1", "u1")]);
    fifo.push_now(deleted("a", "2")); // Added + Deleted, store lacks the key: nothing left
    fifo.relist_page_now(vec![pod("b", "1", "u1")]);
    fifo.push_now(deleted("b", "2"));
    fifo.end_relist();
    assert!(c.try_pop().is_none());
    assert!(fifo.has_synced());
}

/// The first list's keys are handed out as listed: events behind the list's end wait until the
/// list is out (synced), then come as their own deltas, in order. A bookmark right behind the
/// list only names the state the list reaches.
#[test]
fn the_first_list_goes_out_before_the_events_behind_it() {
    let (store, fifo, mut c) = setup(&[]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "1", "u1"), pod("b", "1", "u1")]);
    fifo.end_relist();
    fifo.bookmark("5");
    fifo.push_now(modified("a", "6"));
    fifo.push_now(deleted("b", "7"));
    fifo.push_now(added("c", "8"));
    let mut seen = Vec::new();
    while let Some(p) = c.try_pop() {
        for d in p.deltas() {
            store.apply(d);
        }
        let d = p.deltas().first().map(|d| match d {
            Delta::Added(o) => format!("added {}@{}", o.metadata.name, o.metadata.resource_version),
            Delta::Modified(o) => format!(
                "modified {}@{}",
                o.metadata.name, o.metadata.resource_version
            ),
            Delta::Deleted(_) => "deleted".to_owned(),
        });
        seen.push((
            p.key().to_owned(),
            d,
            p.in_initial_list(),
            p.caught_up_resource_version().map(str::to_owned),
        ));
        drop(p);
        if seen.len() == 2 {
            assert!(fifo.has_synced(), "the list is out");
        }
    }
    let s = |k: &str, d: Option<&str>, initial: bool, rv: Option<&str>| {
        (
            k.to_owned(),
            d.map(str::to_owned),
            initial,
            rv.map(str::to_owned),
        )
    };
    assert_eq!(
        seen,
        [
            s("a", Some("added a@1"), true, None),
            s("b", Some("added b@1"), true, Some("5")),
            s("a", Some("modified a@6"), false, None),
            s("b", Some("deleted"), false, None),
            s("c", Some("added c@8"), false, Some("8")),
        ]
    );
}

#[test]
fn later_relists_are_not_initial() {
    let (store, fifo, mut c) = setup(&[]);
    fifo.begin_relist();
    fifo.end_relist();
    assert!(c.try_pop().is_none());
    assert!(fifo.has_synced());
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "1", "u1")]);
    fifo.end_relist();
    assert!(!c.try_pop().unwrap().in_initial_list());
    drop(store);
}

// client-go T5 (Q7), adapted: knownObjects = {foo5, bar6, baz7}; unchanged listed objects produce
// nothing, a delete pending stays (a tombstone never replaces a final state), and Added+Deleted of a
// stored key is a delete.
#[test]
fn t5_delete_then_replace() {
    let (store, fifo, mut c) = setup(&[("foo", "5"), ("bar", "6"), ("baz", "7")]);
    fifo.push_now(deleted("baz", "10"));
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("foo", "5", "u1")]);
    fifo.end_relist();
    assert_eq!(drain(&store, &mut c), ["baz=[D:10]", "bar=[T:6]"]);
    assert_eq!(store.keys(), ["foo"]);
}

#[test]
fn t5_add_then_replace() {
    let (store, fifo, mut c) = setup(&[("foo", "5"), ("bar", "6"), ("baz", "7")]);
    fifo.push_now(added("baz", "10"));
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("foo", "5", "u1")]);
    fifo.end_relist();
    assert_eq!(drain(&store, &mut c), ["baz=[T:10]", "bar=[T:6]"]);
    assert_eq!(store.keys(), ["foo"]);
}

#[test]
fn t5_delete_add_then_replace() {
    let (store, fifo, mut c) = setup(&[("foo", "5"), ("bar", "6"), ("baz", "7")]);
    fifo.push_now(deleted("bar", "6x"));
    fifo.push_now(Delta::Added(pod("bar", "100", "u2")));
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("foo", "5", "u1")]);
    fifo.end_relist();
    // The re-created bar is gone again by the list: only the delete of the first one is left.
    assert_eq!(drain(&store, &mut c), ["bar=[D:6x]", "baz=[T:7]"]);
    assert_eq!(store.keys(), ["foo"]);
}

#[test]
fn close_delivers_what_was_pushed_before() {
    let (_store, fifo, mut c) = setup(&[]);
    fifo.push_now(added("a", "1"));
    fifo.close();
    assert!(!fifo.push_now(added("b", "1")));
    assert_eq!(c.blocking_pop().unwrap().key(), "a");
    assert!(c.blocking_pop().is_none());
    assert!(c.blocking_pop().is_none());
}

#[tokio::test]
async fn pop_waits_for_a_producer() {
    let (_store, fifo, mut c) = setup(&[]);
    let producer = fifo.clone();
    let task = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        producer.push_now(added("a", "1"));
        producer.close();
    });
    assert_eq!(c.pop().await.unwrap().key(), "a");
    assert!(c.pop().await.is_none());
    task.await.unwrap();
}

#[tokio::test]
async fn pop_is_cancel_safe() {
    let (_store, fifo, mut c) = setup(&[]);
    let timed_out = tokio::time::timeout(std::time::Duration::from_millis(10), c.pop())
        .await
        .is_err();
    assert!(timed_out);
    fifo.push_now(added("a", "1"));
    assert_eq!(c.pop().await.unwrap().key(), "a");
    assert_eq!(fifo.len(), 0);
}

#[test]
fn relist_over_a_pending_delete() {
    let (store, fifo, mut c) = setup(&[("a", "1"), ("b", "1")]);
    fifo.push_now(deleted("a", "5"));
    fifo.push_now(deleted("b", "5"));
    fifo.begin_relist();
    // `a` was re-created (new uid) after the delete; `b` is listed from an older snapshot.
    fifo.relist_page_now(vec![pod("a", "6", "u2"), pod("b", "4", "u1")]);
    fifo.end_relist();
    assert_eq!(drain(&store, &mut c), ["a=[D:5,A:6]", "b=[D:5]"]);
    assert_eq!(store.keys(), ["a"]);
    assert!(fifo.has_synced());
}

#[test]
fn a_stalled_consumer_holds_one_entry_per_key() {
    let (store, fifo, mut c) = setup(&[]);
    for i in 1..=10_000u64 {
        fifo.push_now(modified(&format!("k{}", i % 10), &i.to_string()));
    }
    assert_eq!(fifo.metrics().backlog, 10_000);
    let first = c.try_pop().unwrap().key().to_string();
    let m = fifo.metrics();
    assert_eq!(
        (m.depth, m.backlog, m.coalesced),
        (9, 10_000 - 4096, 4096 - 10)
    );
    assert_eq!(first, "k1");
    // Later drains may make a popped key pending again, at most once per key per drain batch.
    let rest = drain(&store, &mut c).len();
    assert!((9..=9 + 2 * 10).contains(&rest), "{rest}");
    assert_eq!(fifo.len(), 0);
    assert_eq!(
        store.get("", "k0").unwrap().metadata.resource_version,
        "10000"
    );
}

#[tokio::test]
async fn the_consumer_can_move_into_a_task() {
    let (_store, fifo, mut c) = setup(&[]);
    let task = tokio::spawn(async move {
        let mut n = 0;
        while let Some(_p) = c.pop().await {
            n += 1;
        }
        n
    });
    fifo.push_now(added("a", "1"));
    fifo.push_now(added("b", "1"));
    fifo.close();
    assert_eq!(task.await.unwrap(), 2);
}

/// `(key, caught-up version)` of every pop.
fn caught_up(c: &mut FifoConsumer<Pod>) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    while let Some(p) = c.try_pop() {
        let rv = p.caught_up_resource_version().map(str::to_string);
        out.push((p.key().to_string(), rv));
    }
    out
}

fn cu(key: &str, rv: Option<&str>) -> (String, Option<String>) {
    (key.to_string(), rv.map(str::to_string))
}

#[test]
fn caught_up_version_only_when_nothing_else_is_pending() {
    let (_store, fifo, mut c) = setup(&[]);
    fifo.push_now(added("a", "1"));
    fifo.push_now(added("b", "2"));
    assert_eq!(caught_up(&mut c), [cu("a", None), cu("b", Some("2"))]);
    // A bookmark with nothing pending: a pop without deltas reports it, once.
    fifo.bookmark("5");
    let p = c.try_pop().unwrap();
    assert!(p.deltas().is_empty());
    assert_eq!(p.caught_up_resource_version(), Some("5"));
    drop(p);
    assert!(c.try_pop().is_none());
    // A bookmark behind pending events is reported with the last of them.
    fifo.push_now(modified("a", "6"));
    fifo.bookmark("9");
    assert_eq!(caught_up(&mut c), [cu("a", Some("9"))]);
}

#[test]
fn no_caught_up_version_during_a_relist() {
    let (store, fifo, mut c) = setup(&[("old", "1")]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "3", "u1")]);
    assert_eq!(caught_up(&mut c), [cu("a", None)]);
    fifo.end_relist();
    fifo.bookmark("10"); // the list's resourceVersion
    assert_eq!(caught_up(&mut c), [cu("old", Some("10"))]);
    drop(store);
}

// ----- raw events: back-pressure, decodes saved, decode failures ----------------------------------

/// One MODIFIED event for pod `ns/p{key}` at resourceVersion `rv`, as the apiserver writes it.
fn raw_event(key: u64, rv: u64) -> RawDelta {
    let line = format!(
        "{{\"type\":\"MODIFIED\",\"object\":{{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{{\"name\":\"p{key}\",\"namespace\":\"ns\",\"uid\":\"u{key}\",\"resourceVersion\":\"{rv}\"}},\"spec\":{{\"nodeName\":\"n{key}\"}}}}}}\n"
    );
    raw_delta(&line)
}

#[test]
fn a_stalled_consumer_holds_the_producer_and_memory_stays_o_keys() {
    // 1M events over 10k keys, pushed as fast as an async producer can; the consumer first stalls,
    // then pops slowly. Pending entries never exceed the keys, undrained inputs never exceed the
    // capacity, and only what survives is decoded.
    const KEYS: u64 = 10_000;
    const EVENTS: u64 = 1_000_000;
    let store = Arc::new(Writer::<Pod>::new());
    let (fifo, mut consumer) = DeltaFifo::with_capacity(store.clone(), 256);
    let capacity = fifo.capacity();
    let pushed = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let producer = {
        let (fifo, pushed) = (fifo.clone(), pushed.clone());
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(async {
                    for i in 0..EVENTS {
                        assert!(fifo.push(raw_event(i % KEYS, i + 1)).await);
                        pushed.store(i + 1, std::sync::atomic::Ordering::SeqCst);
                    }
                })
        })
    };
    // Stalled: the producer fills the inbox to its capacity and waits there.
    while fifo.metrics().backlog < capacity {
        std::thread::yield_now();
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    let stalled_at = pushed.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        stalled_at <= capacity as u64 + 1,
        "the producer went on to {stalled_at} events past a stalled consumer (capacity {capacity})"
    );
    // Now consume, checking the bounds at every pop.
    let (mut max_depth, mut max_backlog) = (0, 0);
    let mut pops = 0u64;
    loop {
        let done = producer.is_finished();
        let Some(p) = consumer.try_pop() else {
            if done {
                break;
            }
            std::thread::yield_now();
            continue;
        };
        for d in p.deltas() {
            store.apply(d);
        }
        drop(p);
        pops += 1;
        let m = fifo.metrics();
        max_depth = max_depth.max(m.depth);
        max_backlog = max_backlog.max(m.backlog);
        if pops.is_multiple_of(4) {
            // A consumer slower than the producer: yield so the backlog builds up behind it.
            std::thread::yield_now();
        }
    }
    producer.join().unwrap();
    assert!(max_depth <= KEYS as usize, "pending keys {max_depth}");
    assert!(
        max_backlog <= capacity + 1,
        "undrained inputs {max_backlog} > capacity {capacity}"
    );
    // Converged: every key holds its newest version.
    assert_eq!(store.len(), KEYS as usize);
    for k in 0..KEYS {
        let newest = EVENTS - KEYS + k + 1;
        assert_eq!(
            store
                .get("ns", &format!("p{k}"))
                .unwrap()
                .metadata
                .resource_version,
            newest.to_string()
        );
    }
    let m = fifo.metrics();
    assert_eq!(m.raw_received, EVENTS);
    assert_eq!(m.decoded + m.decodes_saved, EVENTS, "{m:?}");
    assert_eq!(m.decoded, pops, "one decode per key handed out");
}

/// A MODIFIED event for pod `ns/p{key}` whose JSON is about `size` bytes (a long node name).
fn big_raw_event(key: u64, rv: u64, size: usize) -> RawDelta {
    let pad = "n".repeat(size);
    let line = format!(
        "{{\"type\":\"MODIFIED\",\"object\":{{\"metadata\":{{\"name\":\"p{key}\",\"namespace\":\"ns\",\"resourceVersion\":\"{rv}\"}},\"spec\":{{\"nodeName\":\"{pad}\"}}}}}}\n"
    );
    raw_delta(&line)
}

#[test]
fn undecoded_bytes_held_pending_stay_within_the_budget() {
    // 8,000 distinct keys of ~4 KB each (32 MB of JSON, twice the budget) from an async producer,
    // and a consumer that pops slowly: the pending keys hold at most the budget (plus the one input
    // that crossed it) of undecoded JSON, whatever the key count; the rest waits in the inbox, then
    // in the producer. Everything arrives.
    const KEYS: u64 = 8_000;
    const SIZE: usize = 4_000;
    // The fifo's budget of undecoded JSON held by pending keys, as its module docs state it
    // ("Bounds"; a crate-private constant, not API).
    const PENDING_RAW_BYTES: usize = 16 << 20;
    let store = Arc::new(Writer::<Pod>::new());
    let (fifo, mut consumer) = DeltaFifo::with_capacity(store.clone(), 64);
    let producer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap()
                .block_on(async {
                    for k in 0..KEYS {
                        assert!(fifo.push(big_raw_event(k, k + 1, SIZE)).await);
                    }
                })
        })
    };
    let (mut max_raw, mut pops) = (0, 0u64);
    loop {
        let done = producer.is_finished();
        // Slower than the producer: pop only while it waits for room (or has finished).
        if !done && fifo.metrics().backlog < fifo.capacity() {
            std::thread::yield_now();
            continue;
        }
        let Some(p) = consumer.try_pop() else {
            if done {
                break;
            }
            continue;
        };
        for d in p.deltas() {
            store.apply(d);
        }
        drop(p);
        pops += 1;
        max_raw = max_raw.max(fifo.metrics().pending_raw_bytes);
    }
    producer.join().unwrap();
    assert!(
        max_raw <= PENDING_RAW_BYTES + SIZE + 200,
        "pending keys held {max_raw} undecoded bytes (budget {PENDING_RAW_BYTES})"
    );
    assert!(
        max_raw > PENDING_RAW_BYTES / 2,
        "the budget was never used: {max_raw}"
    );
    assert_eq!((store.len(), pops), (KEYS as usize, KEYS));
}

#[test]
fn a_raw_object_that_does_not_decode_is_dropped_reported_and_blocks_caught_up() {
    let (store, fifo, mut c) = setup(&[]);
    let bad = "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"},\"spec\":{\"containers\":7}}}\n";
    let RawDelta::Modified(raw) = raw_delta(bad) else {
        panic!("the envelope and metadata are fine: the event is taken raw")
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async { assert!(fifo.push(RawDelta::Modified(raw)).await) });
    let p = c.try_pop().unwrap();
    assert_eq!(p.key(), "a");
    assert!(p.deltas().is_empty(), "nothing to apply");
    assert_eq!(
        p.caught_up_resource_version(),
        None,
        "the store missed an event: it is not the server's state at 5"
    );
    drop(p);
    rt.block_on(fifo.decode_failed());
    let e = fifo.take_decode_error().expect("reported");
    assert!(e.to_string().contains("invalid type"), "{e}");
    assert_eq!(fifo.metrics().decode_errors, 1);
    // Bookmarks do not claim a caught-up version either, until a relist ends.
    fifo.bookmark("6");
    assert_eq!(c.try_pop().unwrap().caught_up_resource_version(), None);
    assert!(
        c.try_pop().is_none(),
        "that bookmark was taken, not left pending"
    );
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("a", "6", "u1")]);
    fifo.end_relist();
    fifo.bookmark("6");
    drain(&store, &mut c);
    fifo.bookmark("7");
    assert_eq!(c.try_pop().unwrap().caught_up_resource_version(), Some("7"));
    assert_eq!(store.get("", "a").unwrap().metadata.resource_version, "6");
}

/// The object of [`raw_event`], as a streaming list's initial event hands it over.
fn raw_listed(key: u64, rv: u64) -> informer::internals::watch::RawObject {
    match raw_event(key, rv) {
        RawDelta::Modified(o) => o,
        _ => unreachable!(),
    }
}

#[test]
fn a_consumer_that_keeps_up_still_gets_half_the_list_decoded_by_the_producer() {
    // The consumer is never behind (capacity 1024), yet the producer decodes every other listed
    // object, so the first list's decode is shared from its first page, and pages of any length
    // split the same way.
    let store = Arc::new(Writer::<Pod>::new());
    let (fifo, mut c) = DeltaFifo::new(store.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert!(fifo.begin_relist());
    for page in [0..5, 5..8] {
        rt.block_on(async {
            let page: Vec<_> = page.map(|k| raw_listed(k, k + 1)).collect();
            assert!(fifo.relist_page(page).await)
        });
    }
    fifo.end_relist();
    assert_eq!(drain(&store, &mut c).len(), 8);
    let m = fifo.metrics();
    // Counted across pages (5, then 3): the producer decoded the odd ones (p1, p3, p5, p7), the
    // consumer the other four.
    assert_eq!((m.raw_received, m.decoded), (4, 4), "{m:?}");
    assert_eq!(store.len(), 8);
    assert!(fifo.has_synced());
}

#[test]
fn the_producer_decodes_no_more_of_a_list_than_its_budget() {
    // 80 listed objects of ~256 KiB each (20 MiB of JSON), the consumer never behind: the producer
    // decodes every other one until it has decoded its budget (8 MiB: 32 of them; the module
    // docs' "Bounds"), and the consumer decodes the other 48. A new relist starts a new budget.
    const PRODUCER_DECODE_BUDGET: usize = 8 << 20;
    const OBJECTS: u64 = 80;
    const PAD: usize = 256 << 10;
    let listed = |key: u64, rv: u64| {
        let line = format!(
            "{{\"type\":\"ADDED\",\"object\":{{\"metadata\":{{\"name\":\"p{key}\",\"namespace\":\"ns\",\"resourceVersion\":\"{rv}\",\"annotations\":{{\"pad\":\"{}\"}}}}}}}}\n",
            "x".repeat(PAD)
        );
        match raw_delta(&line) {
            RawDelta::Added(o) => o,
            _ => unreachable!(),
        }
    };
    let per_budget = (PRODUCER_DECODE_BUDGET / PAD) as u64;
    assert_eq!(per_budget, 32);
    let store = Arc::new(Writer::<Pod>::new());
    let (fifo, mut c) = DeltaFifo::new(store.clone());
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for (round, rv) in [(1, 1), (2, 2)] {
        assert!(fifo.begin_relist());
        for first in (0..OBJECTS).step_by(10) {
            rt.block_on(async {
                let page: Vec<_> = (first..first + 10).map(|k| listed(k, rv)).collect();
                assert!(fifo.relist_page(page).await)
            });
            drain(&store, &mut c);
        }
        fifo.end_relist();
        drain(&store, &mut c);
        let m = fifo.metrics();
        assert_eq!(
            (m.raw_received, m.decoded),
            (
                round * (OBJECTS - per_budget),
                round * (OBJECTS - per_budget)
            ),
            "{m:?}"
        );
    }
    assert_eq!(store.len(), OBJECTS as usize);
    assert_eq!(
        store.get("ns", "p79").unwrap().metadata.resource_version,
        "2"
    );
}

#[test]
fn a_lagging_consumer_gets_listed_objects_decoded_by_the_producer() {
    // Capacity 3. The consumer is not behind: of the first page, the producer decodes every other
    // object (p1, p3) and the rest go over raw. The consumer takes the page in and pops one key,
    // so it has 3 still to go through: behind. The producer then decodes all of the next page
    // itself, but for the object that is not a Pod: that one goes over raw and the consumer
    // reports it.
    let store = Arc::new(Writer::<Pod>::new());
    let (fifo, mut c) = DeltaFifo::with_capacity(store.clone(), 3);
    let bad = "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"p9\",\"namespace\":\"ns\",\"resourceVersion\":\"9\"},\"spec\":{\"containers\":7}}}\n";
    let RawDelta::Added(bad) = raw_delta(bad) else {
        panic!("the envelope and metadata are fine: the object is taken raw")
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert!(fifo.begin_relist());
    rt.block_on(async {
        let page: Vec<_> = (0..4).map(|k| raw_listed(k, k + 1)).collect();
        assert!(fifo.relist_page(page).await)
    });
    let p = c.try_pop().unwrap();
    store.apply(&p.deltas()[0]);
    drop(p);
    assert_eq!((fifo.metrics().depth, fifo.metrics().decoded), (3, 1));
    rt.block_on(async {
        let page = vec![raw_listed(4, 5), bad, raw_listed(5, 6)];
        assert!(fifo.relist_page(page).await)
    });
    fifo.end_relist();
    let applied = drain(&store, &mut c);
    assert_eq!(applied.len(), 6, "{applied:?}");
    assert_eq!(store.len(), 6);
    assert_eq!(
        store.get("ns", "p5").unwrap().metadata.resource_version,
        "6"
    );
    let m = fifo.metrics();
    // p0 and p2 came raw and were decoded by the consumer, and so did the bad one, which it failed
    // to decode; the producer decoded p1, p3, p4 and p5.
    assert_eq!(
        (m.raw_received, m.decoded, m.decode_errors),
        (3, 2, 1),
        "{m:?}"
    );
    let e = fifo.take_decode_error().expect("reported");
    assert!(e.to_string().contains("invalid type"), "{e}");
    assert!(fifo.has_synced());
}

/// The changes of a relist after the first come out in one pop, when it ends, with whatever was
/// pending before it: nothing pops while it is taken in (the store keeps its state until the
/// relist is whole), its raw objects are decoded as they come (no JSON waits with them), and a
/// relist that lists nothing tombstones everything in one pop too.
#[test]
fn a_relist_after_the_first_comes_out_in_one_pop() {
    let listed_raw = |key: &str, rv: &str| {
        let line = format!(
            "{{\"type\":\"ADDED\",\"object\":{{\"metadata\":{{\"name\":\"{key}\",\"namespace\":\"ns\",\"resourceVersion\":\"{rv}\",\"uid\":\"u1\"}}}}}}\n"
        );
        match raw_delta(&line) {
            RawDelta::Added(o) => o,
            _ => unreachable!(),
        }
    };
    let (store, fifo, mut c) = setup(&[]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("ns/a", "1", "u1"), pod("ns/b", "1", "u1")]);
    fifo.end_relist();
    // The first list goes out key by key.
    assert_eq!(drain(&store, &mut c), ["ns/a=[A:1]", "ns/b=[A:1]"]);

    // An event pending when the relist's first page comes goes out first, on its own; then
    // nothing pops until the relist ends.
    fifo.push_now(added("ns/x", "2"));
    fifo.begin_relist();
    fifo.relist_page_now(vec![listed_raw("b", "3"), listed_raw("c", "3")]);
    assert_eq!(drain(&store, &mut c), ["ns/x=[A:2]"]);
    assert!(
        c.try_pop().is_none(),
        "nothing pops while the relist is taken in"
    );
    assert_eq!(
        fifo.metrics().pending_raw_bytes,
        0,
        "its objects were decoded"
    );
    fifo.relist_page_now(vec![listed_raw("x", "2")]);
    assert!(c.try_pop().is_none());
    fifo.end_relist();
    fifo.bookmark("3");
    let p = c.try_pop().unwrap();
    assert!(p.is_relist());
    assert_eq!(p.key(), "");
    let shown: Vec<String> = p
        .deltas()
        .iter()
        .map(|d| format!("{}={}", d.key(), show(d)))
        .collect();
    // `x` was listed unchanged: nothing for it.
    assert_eq!(shown, ["ns/b=M:3", "ns/c=A:3", "ns/a=T:1"]);
    assert_eq!(p.caught_up_resource_version(), Some("3"));
    store.apply_all(p.deltas());
    drop(p);
    assert!(c.try_pop().is_none());
    let mut keys = store.keys();
    keys.sort();
    assert_eq!(keys, ["ns/b", "ns/c", "ns/x"]);
    let m = fifo.metrics();
    // What came raw (the producer decodes some itself) was decoded once, by the consumer.
    assert_eq!((m.raw_received, m.decode_errors), (m.decoded, 0), "{m:?}");

    // A relist that lists nothing: every stored key goes, in one pop.
    fifo.begin_relist();
    fifo.end_relist();
    let p = c.try_pop().unwrap();
    assert!(p.is_relist());
    assert_eq!(p.deltas().len(), 3);
    store.apply_all(p.deltas());
    drop(p);
    assert!(store.is_empty());
    assert!(fifo.has_synced());
}

/// A relist held when the fifo closes goes out as it stands, and then the consumer ends: nothing
/// pushed before `close` is lost.
#[test]
fn a_relist_held_at_close_goes_out_before_the_end() {
    let (store, fifo, mut c) = setup(&[]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("ns/a", "1", "u1")]);
    fifo.end_relist();
    assert_eq!(drain(&store, &mut c), ["ns/a=[A:1]"]);
    fifo.begin_relist();
    fifo.relist_page_now(vec![pod("ns/a", "2", "u1"), pod("ns/b", "2", "u1")]);
    assert!(c.try_pop().is_none());
    fifo.close();
    let p = c.blocking_pop().unwrap();
    assert!(p.is_relist());
    let shown: Vec<String> = p.deltas().iter().map(show).collect();
    assert_eq!(shown, ["M:2", "A:2"]);
    drop(p);
    assert!(c.blocking_pop().is_none());
}
