//! The informer against the simulator over real HTTP: sync, live changes, handlers (late, slow,
//! panicking, removed), relists, and a seeded fault-convergence run of 200+ scenarios.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::support::convergence::{
    ForwardTo, Mirror, client, cm, eventually, options, scenario, server_state, store_state,
};
use informer::reflector::ReflectorOptions;
use informer::{Api, ConfigMap, HandlerFns, Informer};
use informer_sim::Simulator;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syncs_follows_changes_and_notifies() {
    let sim = Simulator::start().await.unwrap();
    for i in 0..20 {
        sim.create(
            "configmaps",
            Some(if i % 2 == 0 { "a" } else { "b" }),
            cm("", &format!("c{i}"), 0),
        )
        .unwrap();
    }
    let inf: Informer<ConfigMap> = Informer::new(Api::all(client(&sim)), options());
    let mirror = Arc::new(Mirror::default());
    let m = mirror.clone();
    let h = inf.add_handler(ForwardTo(m));
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    assert_eq!(store_state(&inf), server_state(&sim));
    assert!(eventually(60, || inf.handler_has_synced(h)).await);
    assert_eq!(mirror.initial.load(Ordering::Relaxed), 20);

    sim.patch("configmaps", Some("a"), "c0", &json!({"data": {"v": "1"}}))
        .unwrap();
    sim.delete("configmaps", Some("b"), "c1").unwrap();
    sim.create("configmaps", Some("a"), cm("a", "new", 0))
        .unwrap();
    assert!(eventually(60, || store_state(&inf) == server_state(&sim)).await);
    assert!(eventually(60, || *mirror.objects.lock().unwrap() == server_state(&sim)).await);
    assert!(
        mirror.violations.lock().unwrap().is_empty(),
        "{:?}",
        mirror.violations.lock().unwrap()
    );
    let got = inf.store().get("a", "c0").unwrap();
    assert_eq!(&got.data["v"], "1");
    assert_eq!(
        inf.store().last_applied_resource_version(),
        sim.resource_version().to_string()
    );
    inf.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_handler_gets_the_store_first_then_live_events() {
    let sim = Simulator::start().await.unwrap();
    for i in 0..50 {
        sim.create("configmaps", Some("a"), cm("a", &format!("c{i}"), 0))
            .unwrap();
    }
    let inf: Informer<ConfigMap> = Informer::new(Api::namespaced(client(&sim), "a"), options());
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    let late = Arc::new(Mirror::default());
    let id = inf.add_handler(ForwardTo(late.clone()));
    assert!(eventually(60, || inf.handler_has_synced(id)).await);
    assert_eq!(late.initial.load(Ordering::Relaxed), 50);
    sim.delete("configmaps", Some("a"), "c3").unwrap();
    assert!(eventually(60, || *late.objects.lock().unwrap() == server_state(&sim)).await);
    assert!(late.violations.lock().unwrap().is_empty());
    assert!(inf.remove_handler(id));
    assert!(!inf.remove_handler(id));
    inf.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_panicking_handlers_do_not_hold_up_the_store_or_others() {
    let sim = Simulator::start().await.unwrap();
    sim.create("configmaps", Some("a"), cm("a", "hot", 0))
        .unwrap();
    let inf: Informer<ConfigMap> = Informer::new(Api::all(client(&sim)), options());
    // The slow handler's first update blocks until the test opens the gate: "slow" is then not a
    // matter of timing under load, it is stuck for as long as the test needs.
    let gate = Gate::default();
    let slow_calls = Arc::new(AtomicUsize::new(0));
    let (s, g) = (slow_calls.clone(), gate.clone());
    let slow = inf.add_handler(HandlerFns::new().on_update(move |_, _| {
        s.fetch_add(1, Ordering::Relaxed);
        g.wait();
    }));
    inf.add_handler(HandlerFns::new().on_update(|_, _| panic!("handler bug")));
    let fast = Arc::new(Mirror::default());
    inf.add_handler(ForwardTo(fast.clone()));
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    for v in 1..=300 {
        sim.patch(
            "configmaps",
            Some("a"),
            "hot",
            &json!({"data": {"v": v.to_string()}}),
        )
        .unwrap();
    }
    // The store and the fast handler catch up with the last write while the slow one is stuck.
    assert!(eventually(60, || store_state(&inf) == server_state(&sim)).await);
    assert!(eventually(60, || *fast.objects.lock().unwrap() == server_state(&sim)).await);
    let m = inf.metrics();
    let slow_metrics = m.handlers.iter().find(|(id, _)| *id == slow).unwrap().1;
    assert!(
        slow_metrics.depth <= 1,
        "one key: at most one waiting notification, got {}",
        slow_metrics.depth
    );
    // Let the slow handler go: it finds one coalesced update waiting, at most.
    gate.open();
    assert!(
        eventually(60, || {
            let m = inf.metrics();
            let h = m.handlers.iter().find(|(id, _)| *id == slow).unwrap().1;
            // Delivered counts the initial add too.
            h.depth == 0 && h.delivered == slow_calls.load(Ordering::Relaxed) as u64 + 1
        })
        .await
    );
    assert!(
        slow_calls.load(Ordering::Relaxed) < 100,
        "the slow handler got coalesced updates"
    );
    assert!(slow_calls.load(Ordering::Relaxed) <= 2);
    // The panicking handler keeps being called: once it has panicked (its updates may all have
    // coalesced into one while it started), a new write reaches it again.
    let panics = |inf: &Informer<ConfigMap>| {
        inf.metrics()
            .handlers
            .iter()
            .map(|(_, h)| h.panics)
            .max()
            .unwrap_or(0)
    };
    assert!(eventually(60, || panics(&inf) >= 1).await);
    let before = panics(&inf);
    sim.patch(
        "configmaps",
        Some("a"),
        "hot",
        &json!({"data": {"v": "after the panics"}}),
    )
    .unwrap();
    assert!(eventually(60, || panics(&inf) > before).await);
    assert!(fast.violations.lock().unwrap().is_empty());
    inf.stop();
}

/// A gate handler threads wait at until the test opens it (for good).
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn wait(&self) {
        let (open, changed) = &*self.0;
        let mut open = open.lock().unwrap();
        while !*open {
            open = changed.wait(open).unwrap();
        }
    }
    fn open(&self) {
        *self.0.0.lock().unwrap() = true;
        self.0.1.notify_all();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relists_after_expiry_and_falls_back_from_streaming_lists() {
    let sim = Simulator::start().await.unwrap();
    for i in 0..10 {
        sim.create("configmaps", Some("a"), cm("a", &format!("c{i}"), 0))
            .unwrap();
    }
    sim.faults().disable_watch_list(true);
    let inf: Informer<ConfigMap> = Informer::new(Api::all(client(&sim)), options());
    let mirror = Arc::new(Mirror::default());
    inf.add_handler(ForwardTo(mirror.clone()));
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    let lists = inf.health().lists;
    // Changes the informer cannot see as events: compact the history, cut the watches.
    sim.faults().stall_watches();
    sim.delete("configmaps", Some("a"), "c0").unwrap();
    sim.patch("configmaps", Some("a"), "c1", &json!({"data": {"v": "9"}}))
        .unwrap();
    sim.create("configmaps", Some("a"), cm("a", "c99", 0))
        .unwrap();
    sim.compact();
    sim.faults().resume_watches();
    sim.faults().inject_410();
    // The resumed watch can bring the store up to date before the 410 reaches the reflector:
    // wait for the relist itself, then for the state.
    assert!(
        eventually(60, || inf.health().lists > lists).await,
        "a relist happened"
    );
    assert!(eventually(60, || store_state(&inf) == server_state(&sim)).await);
    assert!(eventually(60, || *mirror.objects.lock().unwrap() == server_state(&sim)).await);
    assert!(
        mirror.violations.lock().unwrap().is_empty(),
        "{:?}",
        mirror.violations.lock().unwrap()
    );
    inf.stop();
}

/// A relist changes the store in one step, when it ends (client-go 1.36's atomic relists): while
/// a streaming relist that brings a change has not sent its end bookmark (withheld here), the
/// store and the handlers still have the state from before it, though its objects have arrived;
/// once a relist ends, both have the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relist_changes_nothing_until_it_ends() {
    let sim = Simulator::start().await.unwrap();
    for i in 0..10 {
        sim.create("configmaps", Some("a"), cm("a", &format!("c{i}"), 0))
            .unwrap();
    }
    let mut opts = options();
    // The relist below must still be running when its objects have arrived, all ten of them in
    // one page.
    opts.initial_events_deadline = Duration::from_secs(3600);
    opts.page_size = 10;
    let inf: Informer<ConfigMap> = Informer::new(Api::namespaced(client(&sim), "a"), opts);
    let (updates, mut updated) = tokio::sync::mpsc::unbounded_channel();
    inf.add_handler(HandlerFns::new().on_update(move |_, cm: &Arc<ConfigMap>| {
        let _ = updates.send((cm.metadata.name.to_string(), cm.data["v"].to_string()));
    }));
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    let lists = inf.health().lists;
    let received = inf.metrics().fifo.received;

    // A change no watch can bring: made while the watches are stalled, then the history is
    // compacted and the watches are cut, so the reflector's next watch gets 410 and it relists.
    sim.faults().stall_watches();
    sim.patch("configmaps", Some("a"), "c1", &json!({"data": {"v": "9"}}))
        .unwrap();
    sim.compact();
    sim.faults().withhold_initial_events_end(true);
    sim.faults().close_all_watches();
    sim.faults().resume_watches();

    // The relist's ten objects reach the fifo; its end never comes.
    assert!(
        eventually(60, || inf.metrics().fifo.received >= received + 10).await,
        "the relist's objects arrived"
    );
    assert_eq!(inf.health().lists, lists, "the relist has not ended");
    assert_eq!(&inf.store().get("a", "c1").unwrap().data["v"], "0");
    assert!(updated.try_recv().is_err(), "no handler heard of it yet");

    // Let the next streaming list end: the relist completes, and with it the change.
    sim.faults().withhold_initial_events_end(false);
    sim.faults().close_all_watches();
    let got = tokio::time::timeout(Duration::from_secs(60), updated.recv())
        .await
        .expect("the relist's update reached the handler")
        .unwrap();
    assert_eq!(got, ("c1".to_owned(), "9".to_owned()));
    assert!(inf.health().lists > lists);
    assert_eq!(&inf.store().get("a", "c1").unwrap().data["v"], "9");
    inf.stop();
}

/// The test for atomic relists: a relist of 10,000 objects that changes, deletes and adds
/// some of them reaches readers in one step. Readers list the store (and its namespace index)
/// without pause while it runs: every snapshot holds one generation only, 10,000 objects of it.
/// The first handler call of the relist already finds the whole new list in the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_never_see_a_relist_half_applied() {
    /// The generations a list of the store held, and its length.
    type Snapshot = (BTreeSet<String>, usize);
    const OBJECTS: usize = 10_000;
    let sim = Simulator::start().await.unwrap();
    for i in 0..OBJECTS {
        sim.create("configmaps", Some("a"), cm("a", &format!("c{i}"), 1))
            .unwrap();
    }
    // A paginated LIST (500 a page), so that the relist comes in twenty-two pieces, and the
    // watch stays stalled throughout, never given up as idle nor timed out and watched again
    // (a new watch replays history, stall or not): the changes below can only come by the list.
    sim.faults().disable_watch_list(true);
    let opts = ReflectorOptions {
        page_size: 500,
        idle_timeout: None,
        min_watch_timeout: Duration::from_secs(3600),
        ..options()
    };
    let inf: Informer<ConfigMap> = Informer::new(Api::all(client(&sim)), opts);
    let store = inf.store().clone();
    // The store as the first handler call of the relist found it.
    let at_first_call: Arc<Mutex<Option<Snapshot>>> = Arc::default();
    let seen = at_first_call.clone();
    let handler_store = store.clone();
    inf.add_handler(HandlerFns::new().on_update(move |_, cm: &Arc<ConfigMap>| {
        let mut seen = seen.lock().unwrap();
        if seen.is_none() && &cm.data["v"] == "2" {
            let list = handler_store.list();
            let generations = list.iter().map(|o| o.data["v"].to_string()).collect();
            *seen = Some((generations, list.len()));
        }
    }));
    inf.start();
    inf.wait_for_sync(Duration::from_secs(120)).await.unwrap();
    assert_eq!(store.len(), OBJECTS);

    sim.faults().stall_watches();
    // Generation 2: c0..c999 deleted, c1000..c9999 changed, c10000..c10999 added.
    for i in 0..1_000 {
        sim.delete("configmaps", Some("a"), &format!("c{i}"))
            .unwrap();
    }
    for i in 1_000..OBJECTS {
        sim.patch(
            "configmaps",
            Some("a"),
            &format!("c{i}"),
            &json!({"data": {"v": "2"}}),
        )
        .unwrap();
    }
    for i in OBJECTS..OBJECTS + 1_000 {
        sim.create("configmaps", Some("a"), cm("a", &format!("c{i}"), 2))
            .unwrap();
    }

    // Readers on threads of their own, listing until told to stop.
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|r| {
            let (store, stop) = (store.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut snapshots = 0u64;
                let mut mixed = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let list = if r == 0 {
                        store.list()
                    } else {
                        store.list_namespace("a")
                    };
                    let generations: BTreeSet<&str> = list.iter().map(|o| &o.data["v"]).collect();
                    let first_new = list.iter().any(|o| o.metadata.name == "c10000");
                    if generations.len() != 1
                        || list.len() != OBJECTS
                        || first_new != generations.contains("2")
                    {
                        mixed.push((
                            generations
                                .into_iter()
                                .map(str::to_owned)
                                .collect::<Vec<_>>(),
                            list.len(),
                        ));
                    }
                    snapshots += 1;
                }
                (snapshots, mixed)
            })
        })
        .collect();

    let events = inf.metrics().fifo.events;
    let relisted = inf.relist(Duration::from_secs(120));
    relisted.await.unwrap();
    assert_eq!(
        inf.metrics().fifo.events,
        events,
        "no change came as a watch event"
    );
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        let (snapshots, mixed) = r.join().unwrap();
        assert!(snapshots > 0);
        assert!(
            mixed.is_empty(),
            "{} mixed snapshots of {snapshots}, first: {:?}",
            mixed.len(),
            mixed[0]
        );
    }
    let all: BTreeSet<String> = store
        .list()
        .iter()
        .map(|o| o.data["v"].to_string())
        .collect();
    assert_eq!(
        (all, store.len()),
        (BTreeSet::from(["2".to_owned()]), OBJECTS)
    );
    assert!(
        eventually(60, || at_first_call.lock().unwrap().is_some()).await,
        "the handler heard of the relist"
    );
    assert_eq!(
        at_first_call.lock().unwrap().take().unwrap(),
        (BTreeSet::from(["2".to_owned()]), OBJECTS),
        "the store held the whole new list before the first handler call"
    );
    inf.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handler_and_index_panics_are_caught_counted_and_reported() {
    let sim = Simulator::start().await.unwrap();
    sim.create("configmaps", Some("a"), cm("a", "c1", 0))
        .unwrap();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let e = errors.clone();
    let inf: Informer<ConfigMap> = Informer::new(
        Api::all(client(&sim)),
        ReflectorOptions {
            on_error: Some(Arc::new(move |err: &informer::Error| {
                e.lock().unwrap().push(err.to_string())
            })),
            ..options()
        },
    );
    // An index function that panics on objects named "bad", a handler that panics on them too.
    inf.store()
        .add_index(
            "by-v",
            Arc::new(|o: &ConfigMap| {
                assert!(o.metadata.name != "bad", "index bug");
                vec![o.data.get("v").unwrap_or_default().to_string()]
            }),
        )
        .unwrap();
    inf.add_handler(
        HandlerFns::new()
            .on_add(|o: &Arc<ConfigMap>, _| assert!(o.metadata.name != "bad", "handler bug")),
    );
    let mirror = Arc::new(Mirror::default());
    inf.add_handler(ForwardTo(mirror.clone()));
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    sim.create("configmaps", Some("a"), cm("a", "bad", 1))
        .unwrap();
    sim.create("configmaps", Some("a"), cm("a", "c2", 2))
        .unwrap();
    // The informer keeps going: the store, and the other handler, see every object.
    assert!(eventually(60, || store_state(&inf) == server_state(&sim)).await);
    assert!(eventually(60, || *mirror.objects.lock().unwrap() == server_state(&sim)).await);
    assert!(
        eventually(60, || inf
            .metrics()
            .handlers
            .iter()
            .any(|(_, h)| h.panics == 1))
        .await
    );
    let m = inf.metrics();
    assert_eq!(m.index_panics, 1, "one index call panicked");
    assert_eq!(inf.store().index_keys("by-v", "2").unwrap(), ["a/c2"]);
    assert!(
        inf.store().get("a", "bad").is_some(),
        "stored, only left out of the index"
    );
    let errors = errors.lock().unwrap().clone();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("index function \"by-v\", on a/bad panicked")
                && e.contains("index bug")),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| e.contains("on_add of a/bad panicked") && e.contains("handler bug")),
        "{errors:?}"
    );
    inf.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resync_period_of_zero_means_never() {
    let sim = Simulator::start().await.unwrap();
    sim.create("configmaps", Some("a"), cm("a", "c1", 0))
        .unwrap();
    let inf: Informer<ConfigMap> = Informer::new(Api::all(client(&sim)), options());
    let updates = Arc::new(AtomicUsize::new(0));
    let u = updates.clone();
    let id = inf.add_handler_with_resync(
        HandlerFns::new().on_update(move |_, _| {
            u.fetch_add(1, Ordering::Relaxed);
        }),
        Duration::ZERO,
    );
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    assert!(eventually(60, || inf.handler_has_synced(id)).await);
    // One real change: the handler hears of it, and of nothing else (a zero period used to resync
    // in a loop, flooding the handler with updates).
    sim.patch("configmaps", Some("a"), "c1", &json!({"data": {"v": "1"}}))
        .unwrap();
    assert!(eventually(60, || updates.load(Ordering::Relaxed) >= 1).await);
    let delivered = |inf: &Informer<ConfigMap>| inf.metrics().handlers[0].1.delivered;
    assert_eq!(updates.load(Ordering::Relaxed), 1);
    assert_eq!(delivered(&inf), 2, "the initial add and the one update");
    inf.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_from_an_in_stream_429_html_errors_and_a_bogus_200() {
    let sim = Simulator::start().await.unwrap();
    for i in 0..5 {
        sim.create("configmaps", Some("a"), cm("a", &format!("c{i}"), 0))
            .unwrap();
    }
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let e = errors.clone();
    let inf: Informer<ConfigMap> = Informer::new(
        Api::all(client(&sim)),
        ReflectorOptions {
            on_error: Some(Arc::new(move |err: &informer::Error| {
                e.lock().unwrap().push(err.to_string())
            })),
            ..options()
        },
    );
    let mirror = Arc::new(Mirror::default());
    inf.add_handler(ForwardTo(mirror.clone()));
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    assert!(
        eventually(60, || inf.health().phase
            == informer::reflector::Phase::Watching)
        .await
    );
    // 429 in the stream: watch again from the same version, no relist.
    let lists = inf.health().lists;
    sim.faults().inject_429();
    sim.delete("configmaps", Some("a"), "c0").unwrap();
    assert!(eventually(60, || store_state(&inf) == server_state(&sim)).await);
    assert!(
        eventually(60, || errors
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.contains("429")))
        .await
    );
    assert_eq!(inf.health().lists, lists, "no relist after a 429");
    // A proxy's HTML 502s and a bogus 200 `{}` on the way back after a relist.
    sim.faults().fail_next_html(2, 502);
    sim.faults().answer_next_with_empty_object(1);
    sim.faults().inject_410();
    sim.patch("configmaps", Some("a"), "c1", &json!({"data": {"v": "9"}}))
        .unwrap();
    assert!(eventually(60, || inf.health().lists > lists).await);
    assert!(eventually(60, || store_state(&inf) == server_state(&sim)).await);
    assert!(eventually(60, || *mirror.objects.lock().unwrap() == server_state(&sim)).await);
    assert!(mirror.violations.lock().unwrap().is_empty());
    let errors = errors.lock().unwrap().clone();
    assert!(errors.iter().any(|e| e.contains("HTTP 502")), "{errors:?}");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("not a ConfigMapList") || e.contains("cannot decode")),
        "{errors:?}"
    );
    inf.stop();
}

async fn scenarios(from: u64, count: u64) {
    let sim = Simulator::builder()
        .seed(from)
        .bookmark_interval(Duration::from_millis(200))
        .start()
        .await
        .unwrap();
    let mut failures = Vec::new();
    for seed in from..from + count {
        if let Err(e) = scenario(&sim, seed).await {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} scenarios diverged: {failures:#?}",
        failures.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_convergence_scenarios_0_to_69() {
    scenarios(0, 70).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_convergence_scenarios_70_to_139() {
    scenarios(70, 70).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_convergence_scenarios_140_to_209() {
    scenarios(140, 70).await;
}

/// A wait for a sync that cannot happen says why: the reflector's phase and the server's 403,
/// not a bare `false`. The wait is asked only after the reflector has reported a failure (its
/// error callback), so its answer does not depend on how fast the machine is.
#[tokio::test]
async fn a_sync_that_cannot_happen_says_why() {
    let sim = Simulator::start().await.unwrap();
    sim.faults().forbid_reads(true);
    let client = informer::Client::new(informer::Config::new(sim.url().parse().unwrap())).unwrap();
    let (failed, mut first_failure) = tokio::sync::mpsc::unbounded_channel();
    let options = ReflectorOptions {
        on_error: Some(Arc::new(move |_: &informer::Error| {
            let _ = failed.send(());
        })),
        ..Default::default()
    };
    let informer: Informer<ConfigMap> = Informer::new(Api::all(client), options);
    informer.start();
    first_failure.recv().await.unwrap();
    let why = loop {
        let e = informer
            .wait_for_sync(Duration::from_millis(10))
            .await
            .unwrap_err();
        if e.last_error.is_some() {
            break e;
        }
        // The callback runs before the health is written: wait for the next failure.
        first_failure.recv().await.unwrap();
    };
    assert!(why.consecutive_failures >= 1, "{why:?}");
    let text = why.to_string();
    assert!(text.contains("403") && text.contains("forbidden"), "{text}");
    assert!(text.starts_with("not synced after 10ms"), "{text}");
}

/// A handler may `tokio::spawn`: it runs inside the runtime the informer started on (on a pool
/// thread, where no runtime is entered by itself).
#[tokio::test]
async fn a_handler_may_spawn_tasks() {
    let sim = Simulator::start().await.unwrap();
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "a"}}),
    )
    .unwrap();
    let client = informer::Client::new(informer::Config::new(sim.url().parse().unwrap())).unwrap();
    let informer: Informer<ConfigMap> = Informer::new(Api::all(client), Default::default());
    let (spawned, mut ran) = tokio::sync::mpsc::unbounded_channel();
    informer.add_handler(HandlerFns::new().on_add(move |cm: &Arc<ConfigMap>, _| {
        let spawned = spawned.clone();
        let name = cm.metadata.name.clone();
        tokio::spawn(async move {
            let _ = spawned.send(name);
        });
    }));
    informer.start();
    // Without the runtime entered the handler panics ("no reactor running"), caught and
    // counted, and nothing is ever sent.
    let name = tokio::time::timeout(Duration::from_secs(60), ran.recv())
        .await
        .expect("the handler's task never ran");
    assert_eq!(name.as_deref(), Some("a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_closed_while_a_watch_opens_are_retried_without_a_relist() {
    // R23: what client-go's REST client retries itself (here three connections closed with no
    // answer, as a load balancer or an apiserver going away does) costs the server no LIST.
    let sim = Simulator::start().await.unwrap();
    sim.create("configmaps", Some("a"), cm("a", "c1", 0))
        .unwrap();
    let inf: Informer<ConfigMap> = Informer::new(Api::all(client(&sim)), options());
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    let (lists, watches) = (inf.health().lists, inf.health().watches);

    sim.faults().reset_next(3);
    sim.faults().close_all_watches();
    sim.create("configmaps", Some("a"), cm("a", "c2", 0))
        .unwrap();
    assert!(eventually(60, || inf.store().get("a", "c2").is_some()).await);
    let health = inf.health();
    assert_eq!(health.lists, lists, "no relist: {health:?}");
    assert!(health.watches > watches, "watched again: {health:?}");
    assert_eq!(
        sim.faults().injected_pending(),
        0,
        "the three connections were closed"
    );
    // Routine, as client-go's REST client retries them before its reflector sees an error: no
    // failure in the health (nor in `on_error`).
    assert_eq!(health.consecutive_failures, 0, "{health:?}");
    assert_eq!(health.last_error, None, "{health:?}");
    inf.stop();
}

/// `ReflectorOptions::drop_managed_fields`: objects from the list and from the watch are stored
/// without `managedFields`, and a transform of the caller's still runs, after the drop; without
/// the option they are kept. (#47: the largest part of a stored Pod.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_managed_fields_strips_listed_and_watched_objects_before_the_callers_transform() {
    let sim = Simulator::start().await.unwrap();
    let managed = |v: u64| {
        json!({"metadata": {"name": "c1", "managedFields": [
                   {"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                    "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:v": {}}}}]},
               "data": {"v": v.to_string()}})
    };
    sim.create("configmaps", Some("a"), managed(0)).unwrap();
    let kept: Informer<ConfigMap> = Informer::new(Api::namespaced(client(&sim), "a"), options());
    let dropping = ReflectorOptions {
        drop_managed_fields: true,
        ..options()
    };
    let stripped = Informer::with_transform(
        Api::<ConfigMap>::namespaced(client(&sim), "a"),
        dropping,
        Arc::new(|mut c: ConfigMap| {
            // The caller's transform sees the object after the drop.
            let dropped = c.metadata.managed_fields.is_none();
            c.metadata
                .labels
                .insert("dropped-before".into(), dropped.to_string());
            c
        }),
    );
    kept.start();
    stripped.start();
    kept.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    stripped
        .wait_for_sync(Duration::from_secs(60))
        .await
        .unwrap();
    let listed = informer::store::Ref::to_arc(&stripped.store().get("a", "c1").unwrap());
    assert!(listed.metadata.managed_fields.is_none(), "{listed:?}");
    assert_eq!(listed.metadata.labels.get("dropped-before"), Some("true"));
    assert!(
        kept.store()
            .get("a", "c1")
            .unwrap()
            .metadata
            .managed_fields
            .is_some()
    );

    sim.replace("configmaps", Some("a"), "c1", managed(1))
        .unwrap();
    let at_1 = |inf: &Informer<ConfigMap>| {
        inf.store()
            .get("a", "c1")
            .is_some_and(|c| c.data.get("v") == Some("1"))
    };
    assert!(eventually(60, || at_1(&stripped) && at_1(&kept)).await);
    let watched = informer::store::Ref::to_arc(&stripped.store().get("a", "c1").unwrap());
    assert!(watched.metadata.managed_fields.is_none(), "{watched:?}");
    assert_eq!(watched.metadata.labels.get("dropped-before"), Some("true"));
    assert!(
        kept.store()
            .get("a", "c1")
            .unwrap()
            .metadata
            .managed_fields
            .is_some()
    );
    kept.stop();
    stripped.stop();
}
