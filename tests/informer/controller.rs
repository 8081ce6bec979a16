//! `InformerController` against the simulator over real loopback HTTP: informer events reach
//! reconcile as keys, reconcile reads the store's current object (absent once deleted), owner and
//! label key functions, one worker per key at a time, workers start after the sync, and shutdown
//! (drain, cancel after a grace period, before the sync).
//!
//! No assertion on speed: waits are bounded but generous (the machine is shared).

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use informer::informer::InformerRequest;
use informer::workqueue::{Action, InformerController, RunSummary};
use informer::{
    Client, Config, ConfigMap, EndpointSlice, Informer, InformerFactory, Resource, Service, Store,
};
use informer_sim::Simulator;
use informer_sim::churn::{Churn, ChurnConfig};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};
use tokio::time::{sleep, timeout};

/// Upper bound of every wait: far above what any step needs, even on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn client(sim: &Simulator) -> Client {
    Client::new(Config::new(sim.url().parse().unwrap())).unwrap()
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"metadata": {"name": name}, "data": {"v": value}})
}

/// Polls `check` every 10 ms until it holds, at most [`PATIENCE`].
async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        sleep(Duration::from_millis(10)).await;
    }
}

/// What one reconcile saw: the key and the object's `data.v` in the store (`None`: absent).
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

fn saw(seen: &Seen, key: &str, value: Option<&str>) -> bool {
    seen.lock()
        .unwrap()
        .iter()
        .any(|(k, v)| k == key && v.as_deref() == value)
}

/// A shutdown signal for `run`, and its trigger.
fn stop_signal() -> (oneshot::Sender<()>, impl Future<Output = ()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    (stop, async {
        stopped.await.ok();
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_reach_reconcile_which_reads_the_current_object_or_its_absence() {
    const INITIAL: usize = 30;
    let sim = Simulator::start().await.unwrap();
    for i in 0..INITIAL {
        sim.create(
            "configmaps",
            Some("default"),
            configmap(&format!("c{i}"), "0"),
        )
        .unwrap();
    }
    let factory = InformerFactory::new(client(&sim));
    let configmaps = factory.informer::<ConfigMap>(None);
    let controller = InformerController::new(&configmaps, 3);
    let queue = controller.queue().clone();
    assert!(Arc::ptr_eq(controller.store(), configmaps.store()));
    // A key queued by hand before the informer even started: no worker may take it before the
    // sync.
    queue.add("default/c0".to_string());

    let seen: Seen = Arc::default();
    let store_sizes = Arc::new(Mutex::new(Vec::new()));
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let (seen, store_sizes) = (Arc::clone(&seen), Arc::clone(&store_sizes));
            move |key: String, store: Arc<Store<ConfigMap>>| {
                let (seen, store_sizes) = (Arc::clone(&seen), Arc::clone(&store_sizes));
                async move {
                    store_sizes.lock().unwrap().push(store.len());
                    let value = store
                        .get_key(&key)
                        .map(|cm| cm.data.get("v").unwrap_or_default().to_string());
                    seen.lock().unwrap().push((key, value));
                    Ok::<_, Infallible>(Action::Done)
                }
            }
        },
        stopped,
    ));
    sleep(Duration::from_millis(100)).await;
    assert!(
        seen.lock().unwrap().is_empty(),
        "reconciled before the sync"
    );
    factory.start();

    // The initial list: every key, each reconciled against the stored object.
    eventually("the initial keys", || seen.lock().unwrap().len() >= INITIAL).await;
    for i in 0..INITIAL {
        assert!(saw(&seen, &format!("default/c{i}"), Some("0")), "c{i}");
    }
    // Workers started after the sync: the very first reconcile saw the whole list.
    assert_eq!(store_sizes.lock().unwrap()[0], INITIAL);

    // Live changes: a patch, a create, a delete.
    sim.patch(
        "configmaps",
        Some("default"),
        "c3",
        &json!({"data": {"v": "1"}}),
    )
    .unwrap();
    sim.create("configmaps", Some("other"), configmap("fresh", "7"))
        .unwrap();
    sim.delete("configmaps", Some("default"), "c5").unwrap();
    eventually("the patched object", || saw(&seen, "default/c3", Some("1"))).await;
    eventually("the created object", || {
        saw(&seen, "other/fresh", Some("7"))
    })
    .await;
    eventually("the deleted object, absent", || {
        saw(&seen, "default/c5", None)
    })
    .await;

    stop.send(()).unwrap();
    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    let reconciles = seen.lock().unwrap().len() as u64;
    assert_eq!(
        summary,
        RunSummary {
            done: reconciles,
            requeued_after: 0,
            failed: 0,
            fenced: 0
        }
    );
    assert!(queue.is_shutting_down());
    assert_eq!(queue.metrics().in_flight, 0);
    assert!(
        configmaps.metrics().handlers.is_empty(),
        "run removed its handler"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owner_and_label_key_functions_enqueue_the_service() {
    let sim = Simulator::start().await.unwrap();
    let web = sim
        .create(
            "services",
            Some("default"),
            json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}),
        )
        .unwrap();
    sim.create(
        "services",
        Some("default"),
        json!({"metadata": {"name": "db"}, "spec": {"ports": [{"port": 5432}]}}),
    )
    .unwrap();
    let slice = |name: &str, owner_kind: &str, owner: &str, label: &str| {
        json!({
            "metadata": {
                "name": name,
                "labels": {"kubernetes.io/service-name": label},
                "ownerReferences": [{"apiVersion": "v1", "kind": owner_kind, "name": owner,
                                     "uid": web["metadata"]["uid"], "controller": true}]
            },
            "addressType": "IPv4",
            "endpoints": []
        })
    };

    let factory = InformerFactory::new(client(&sim));
    let services = factory.informer::<Service>(None);
    let owned_slices = factory.informer::<EndpointSlice>(Some("default"));
    // A second, label-selected informer, keyed by the service-name label.
    let labelled_slices = factory.informer_with(
        InformerRequest::<EndpointSlice>::new(EndpointSlice::api_resource())
            .namespace(Some("default"))
            .label_selector("test=labels"),
    );
    let controller = InformerController::new(&services, 2)
        .owns(&owned_slices)
        .watches(&labelled_slices, |slice: &EndpointSlice| {
            let service = slice.metadata.labels.get("kubernetes.io/service-name")?;
            Some(format!("{}/{service}", slice.metadata.namespace))
        });
    factory.start();

    let counts = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let count = |key: &str| counts.lock().unwrap().get(key).copied().unwrap_or(0);
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let counts = Arc::clone(&counts);
            move |key: String, _services: Arc<Store<Service>>| {
                let counts = Arc::clone(&counts);
                async move {
                    *counts.lock().unwrap().entry(key).or_default() += 1;
                    Ok::<_, Infallible>(Action::Done)
                }
            }
        },
        stopped,
    ));
    eventually("the initial services", || {
        count("default/web") == 1 && count("default/db") == 1
    })
    .await;

    // Owned by a Deployment (not a Service) first, then by the Service web: the informer's
    // handler sees them in this order, so once web is reconciled again the first slice has been
    // handled too, and it must not have enqueued anything.
    sim.create(
        "endpointslices",
        Some("default"),
        slice("by-deployment", "Deployment", "deployment-key", "nothing"),
    )
    .unwrap();
    sim.create(
        "endpointslices",
        Some("default"),
        slice("web-1", "Service", "web", "nothing"),
    )
    .unwrap();
    eventually("web, from its owned slice", || count("default/web") == 2).await;
    assert_eq!(count("default/deployment-key"), 0);
    assert_eq!(count("default/nothing"), 0);

    // By label: a slice labelled for db (owned by nobody the controller knows).
    let mut labelled = slice("db-1", "ReplicaSet", "x", "db");
    labelled["metadata"]["labels"]["test"] = json!("labels");
    sim.create("endpointslices", Some("default"), labelled)
        .unwrap();
    eventually("db, from its labelled slice", || count("default/db") == 2).await;

    // Deleting an owned slice reconciles its owner again (from the slice's final state).
    sim.delete("endpointslices", Some("default"), "web-1")
        .unwrap();
    eventually("web, after its slice's deletion", || {
        count("default/web") == 3
    })
    .await;

    stop.send(()).unwrap();
    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    assert_eq!(
        summary.done,
        counts.lock().unwrap().values().sum::<usize>() as u64
    );
    assert_eq!(count("default/x"), 0);
}

/// Under churn (many events about few keys), four workers never hold one key at once, and every
/// key of the store is reconciled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_is_never_reconciled_by_two_workers_at_once() {
    let sim = Simulator::start().await.unwrap();
    let churn = Churn::new(
        sim.api(),
        ChurnConfig {
            services: 3,
            pods_per_service: 4,
            max_endpoints_per_slice: 2,
            ..Default::default()
        },
    )
    .unwrap();
    let running = churn.run(200.0);

    let factory = InformerFactory::new(client(&sim));
    let slices = factory.informer::<EndpointSlice>(None);
    let services = factory.informer::<Service>(None);
    // Many slices per service, and every slice event enqueues its owner: contention on 3 keys.
    let controller = InformerController::new(&services, 4).owns(&slices);
    let queue = controller.queue().clone();
    factory.start();

    let in_flight = Arc::new(Mutex::new(HashSet::<String>::new()));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let reconciles = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let (in_flight, overlaps, reconciles) = (
                Arc::clone(&in_flight),
                Arc::clone(&overlaps),
                Arc::clone(&reconciles),
            );
            move |key: String, _services| {
                let (in_flight, overlaps, reconciles) = (
                    Arc::clone(&in_flight),
                    Arc::clone(&overlaps),
                    Arc::clone(&reconciles),
                );
                async move {
                    if !in_flight.lock().unwrap().insert(key.clone()) {
                        overlaps.fetch_add(1, Ordering::Relaxed);
                    }
                    // Hold the key across a few scheduling points while events keep coming.
                    sleep(Duration::from_millis(2)).await;
                    tokio::task::yield_now().await;
                    in_flight.lock().unwrap().remove(&key);
                    reconciles.fetch_add(1, Ordering::Relaxed);
                    Ok::<_, Infallible>(Action::Done)
                }
            }
        },
        stopped,
    ));
    // Enough reconciles for keys to be re-added while held, however slow the machine.
    eventually("reconciles under churn", || {
        reconciles.load(Ordering::Relaxed) >= 100
    })
    .await;
    running.stop().await.unwrap();
    stop.send(()).unwrap();
    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    assert_eq!(overlaps.load(Ordering::Relaxed), 0, "a key was held twice");
    assert_eq!(summary.done, reconciles.load(Ordering::Relaxed) as u64);
    assert!(
        queue.metrics().adds > 3,
        "slice events enqueued their services"
    );
    assert_eq!(queue.metrics().in_flight, 0);
}

/// Shutdown while keys are queued and in flight: no new keys are accepted, the in-flight and
/// queued keys are all reconciled to the end, then run returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_in_flight_and_queued_keys() {
    const KEYS: usize = 12;
    let sim = Simulator::start().await.unwrap();
    for i in 0..KEYS {
        sim.create(
            "configmaps",
            Some("default"),
            configmap(&format!("c{i}"), "0"),
        )
        .unwrap();
    }
    let configmaps = Informer::new(
        informer::Api::<ConfigMap>::all(client(&sim)),
        Default::default(),
    );
    configmaps.start();
    let controller = InformerController::new(&configmaps, 2);
    let queue = controller.queue().clone();

    let started = Arc::new(Notify::new());
    let (began, finished) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let (started, began, finished) = (
                Arc::clone(&started),
                Arc::clone(&began),
                Arc::clone(&finished),
            );
            move |_key, _store| {
                let (started, began, finished) = (
                    Arc::clone(&started),
                    Arc::clone(&began),
                    Arc::clone(&finished),
                );
                async move {
                    began.fetch_add(1, Ordering::SeqCst);
                    started.notify_one();
                    sleep(Duration::from_millis(50)).await;
                    finished.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, Infallible>(Action::Done)
                }
            }
        },
        stopped,
    ));
    timeout(PATIENCE, started.notified())
        .await
        .expect("a first reconcile");
    stop.send(()).unwrap();
    // Shutdown is being processed; a change now is not accepted any more (the queue is shut
    // down, the handler removed), and the queued keys still drain.
    eventually("the queue shutting down", || queue.is_shutting_down()).await;
    sim.create("configmaps", Some("default"), configmap("late", "0"))
        .unwrap();

    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    assert_eq!(summary.done, KEYS as u64, "every queued key was drained");
    assert_eq!(began.load(Ordering::SeqCst), KEYS);
    assert_eq!(finished.load(Ordering::SeqCst), KEYS, "none was cut short");
    let metrics = queue.metrics();
    assert_eq!((metrics.in_flight, metrics.depth), (0, 0));
    assert!(configmaps.metrics().handlers.is_empty());
    configmaps.stop();
}

/// With a grace period, a reconcile that does not finish is cancelled and run still returns;
/// the key is released (not left in flight).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_grace_cancels_a_stuck_reconcile() {
    let sim = Simulator::start().await.unwrap();
    sim.create("configmaps", Some("default"), configmap("stuck", "0"))
        .unwrap();
    let configmaps = Informer::new(
        informer::Api::<ConfigMap>::all(client(&sim)),
        Default::default(),
    );
    configmaps.start();
    let controller =
        InformerController::new(&configmaps, 1).shutdown_grace(Duration::from_millis(100));
    let queue = controller.queue().clone();
    let entered = Arc::new(AtomicBool::new(false));
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let entered = Arc::clone(&entered);
            move |_key, _store| {
                let entered = Arc::clone(&entered);
                async move {
                    entered.store(true, Ordering::SeqCst);
                    std::future::pending::<()>().await;
                    Ok::<_, Infallible>(Action::Done)
                }
            }
        },
        stopped,
    ));
    eventually("the stuck reconcile", || entered.load(Ordering::SeqCst)).await;
    stop.send(()).unwrap();
    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    assert_eq!(summary, RunSummary::default());
    assert_eq!(
        queue.metrics().in_flight,
        0,
        "the cancelled key was released"
    );
    configmaps.stop();
}

/// Workers wait for the sync: with the informer never started, not even a key queued by hand is
/// reconciled, and a shutdown still ends the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_before_the_sync_returns_without_reconciling() {
    let sim = Simulator::start().await.unwrap();
    sim.create("configmaps", Some("default"), configmap("c", "0"))
        .unwrap();
    let configmaps = Informer::new(
        informer::Api::<ConfigMap>::all(client(&sim)),
        Default::default(),
    );
    let controller = InformerController::new(&configmaps, 2);
    let queue = controller.queue().clone();
    queue.add("default/c".to_string());
    let reconciles = Arc::new(AtomicUsize::new(0));
    let summary = timeout(
        PATIENCE,
        controller.run(
            {
                let reconciles = Arc::clone(&reconciles);
                move |_key, _store| {
                    reconciles.fetch_add(1, Ordering::SeqCst);
                    async { Ok::<_, Infallible>(Action::Done) }
                }
            },
            sleep(Duration::from_millis(200)),
        ),
    )
    .await
    .expect("run returned");
    assert_eq!(summary, RunSummary::default());
    assert_eq!(reconciles.load(Ordering::SeqCst), 0);
    assert!(queue.is_shutting_down());
    assert!(configmaps.metrics().handlers.is_empty());
}

/// A `run` future dropped midway (here while waiting for a sync that never comes) removes its
/// handlers from the informers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_run_removes_its_handlers() {
    let sim = Simulator::start().await.unwrap();
    let factory = InformerFactory::new(client(&sim));
    let configmaps = factory.informer::<ConfigMap>(None);
    let slices = factory.informer::<EndpointSlice>(None);
    let run = InformerController::new(&configmaps, 1)
        .watches(&slices, |_: &EndpointSlice| None)
        .run(
            |_key, _store| async { Ok::<_, Infallible>(Action::Done) },
            std::future::pending(),
        );
    let mut run = Box::pin(run);
    assert!(timeout(Duration::from_millis(100), &mut run).await.is_err());
    assert_eq!(configmaps.metrics().handlers.len(), 1, "registered by run");
    assert_eq!(slices.metrics().handlers.len(), 1);
    drop(run);
    assert!(configmaps.metrics().handlers.is_empty());
    assert!(slices.metrics().handlers.is_empty());
}
