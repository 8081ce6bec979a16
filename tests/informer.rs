//! The informer against the simulator over real HTTP: sync, live changes, handlers (late, slow,
//! panicking, removed), relists, and a seeded fault-convergence run of 200+ scenarios.

#[path = "support/convergence.rs"]
mod convergence;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use convergence::{
    ForwardTo, Mirror, client, cm, eventually, options, scenario, server_state, store_state,
};
use informer::sim::Simulator;
use informer::{Api, ConfigMap, HandlerFns, Informer};
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
    assert!(inf.wait_for_sync(Duration::from_secs(60)).await);
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
    assert_eq!(got.data["v"], "1");
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
    assert!(inf.wait_for_sync(Duration::from_secs(60)).await);
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
    let slow_calls = Arc::new(AtomicUsize::new(0));
    let s = slow_calls.clone();
    let slow = inf.add_handler(HandlerFns::new().on_update(move |_, _| {
        s.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(200));
    }));
    inf.add_handler(HandlerFns::new().on_update(|_, _| panic!("handler bug")));
    let fast = Arc::new(Mirror::default());
    inf.add_handler(ForwardTo(fast.clone()));
    inf.start();
    assert!(inf.wait_for_sync(Duration::from_secs(60)).await);
    for v in 1..=300 {
        sim.patch(
            "configmaps",
            Some("a"),
            "hot",
            &json!({"data": {"v": v.to_string()}}),
        )
        .unwrap();
    }
    // The store and the fast handler catch up with the last write while the slow one sleeps.
    assert!(eventually(60, || store_state(&inf) == server_state(&sim)).await);
    assert!(eventually(60, || *fast.objects.lock().unwrap() == server_state(&sim)).await);
    let m = inf.metrics();
    let slow_metrics = m.handlers.iter().find(|(id, _)| *id == slow).unwrap().1;
    assert!(
        slow_metrics.depth <= 1,
        "one key: at most one waiting notification, got {}",
        slow_metrics.depth
    );
    assert!(
        slow_calls.load(Ordering::Relaxed) < 100,
        "the slow handler got coalesced updates"
    );
    // The panicking handler keeps being called (printing a backtrace can take a while).
    assert!(
        eventually(60, || inf
            .metrics()
            .handlers
            .iter()
            .any(|(_, h)| h.panics > 1))
        .await
    );
    assert!(fast.violations.lock().unwrap().is_empty());
    inf.stop();
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
    assert!(inf.wait_for_sync(Duration::from_secs(60)).await);
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
