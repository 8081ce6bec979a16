//! `Controller` against the simulator over real loopback HTTP: informer events reach reconcile
//! as the store's current object with the user's context (not at all once deleted; with a
//! deletionTimestamp like any other), owner and label mappers, errors through the error policy
//! (backoff, or the policy's requeue), caught panics, requeue-after, one worker per object at a
//! time, workers start after the sync, and shutdown (drain, cancel after a grace period, before
//! the sync).
//!
//! No assertion on speed: waits are bounded but generous (the machine is shared), and the only
//! timing asserted is a lower bound (a delay asked for has passed), which load cannot break.

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::tokens::Lapsing;
use informer::informer::InformerRequest;
use informer::workqueue::{
    Action, Controller, ItemExponentialRateLimiter, ObjectRef, RunSummary, WorkQueue,
};
use informer::{
    Client, Config, ConfigMap, EndpointSlice, Informer, InformerFactory, Resource, Service,
};
use informer_sim::Simulator;
use informer_sim::churn::{Churn, ChurnConfig};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;
use tokio::time::{sleep, timeout};

/// Upper bound of every wait: far above what any step needs, even on a loaded machine.
pub(crate) const PATIENCE: Duration = Duration::from_secs(60);

pub(crate) fn client(sim: &Simulator) -> Client {
    Client::new(Config::new(sim.url().parse().unwrap())).unwrap()
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"metadata": {"name": name}, "data": {"v": value}})
}

/// Polls `check` every 10 ms until it holds, at most [`PATIENCE`].
pub(crate) async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
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
async fn events_reach_reconcile_with_the_current_object_and_a_deleted_one_is_not_reconciled() {
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
    let controller = Controller::new(&configmaps, 3);
    let queue = controller.queue().clone();
    assert!(Arc::ptr_eq(controller.store(), configmaps.store()));
    // A ref queued by hand before the informer even started: no worker may take it before the
    // sync.
    queue.add(ObjectRef::new("c0").within("default"));

    let seen: Seen = Arc::default();
    let store_sizes = Arc::new(Mutex::new(Vec::new()));
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let (seen, store_sizes) = (Arc::clone(&seen), Arc::clone(&store_sizes));
            let store = Arc::clone(configmaps.store());
            move |cm: Arc<ConfigMap>, _ctx: Arc<()>| {
                let (seen, store_sizes) = (Arc::clone(&seen), Arc::clone(&store_sizes));
                store_sizes.lock().unwrap().push(store.len());
                async move {
                    let value = cm.data.get("v").unwrap_or_default().to_string();
                    seen.lock()
                        .unwrap()
                        .push((ObjectRef::from_obj(&*cm).to_string(), Some(value)));
                    Ok::<_, Infallible>(Action::Done)
                }
            }
        },
        Arc::new(()),
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

    // Live changes: a create, a delete, then a patch. The informer hands them to its handler
    // in this order, so once the patch is reconciled the deleted object's ref is queued (or
    // done), and the drain on shutdown takes it.
    sim.create("configmaps", Some("other"), configmap("fresh", "7"))
        .unwrap();
    sim.delete("configmaps", Some("default"), "c5").unwrap();
    sim.patch(
        "configmaps",
        Some("default"),
        "c3",
        &json!({"data": {"v": "1"}}),
    )
    .unwrap();
    eventually("the patched object", || saw(&seen, "default/c3", Some("1"))).await;
    eventually("the created object", || {
        saw(&seen, "other/fresh", Some("7"))
    })
    .await;

    stop.send(()).unwrap();
    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    let reconciles = seen.lock().unwrap().len() as u64;
    assert_eq!(
        summary,
        RunSummary {
            done: reconciles,
            absent: 1,
            ..RunSummary::default()
        },
        "the deleted object was not reconciled"
    );
    assert_eq!(
        seen.lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k == "default/c5")
            .count(),
        1,
        "c5: only its initial reconcile"
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
    let controller = Controller::new(&services, 2).owns(&owned_slices).watches(
        &labelled_slices,
        |slice: &EndpointSlice| {
            let service = slice.metadata.labels.get("kubernetes.io/service-name")?;
            Some(ObjectRef::new(service).within(slice.metadata.namespace.as_str()))
        },
    );
    factory.start();

    let counts = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let count = |key: &str| counts.lock().unwrap().get(key).copied().unwrap_or(0);
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let counts = Arc::clone(&counts);
            move |service: Arc<Service>, _ctx: Arc<()>| {
                let counts = Arc::clone(&counts);
                async move {
                    let key = ObjectRef::from_obj(&*service).to_string();
                    *counts.lock().unwrap().entry(key).or_default() += 1;
                    Ok::<_, Infallible>(Action::Done)
                }
            }
        },
        Arc::new(()),
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
    // The owned slice enqueued its owner and the label mapper its service; the refs to objects
    // that do not exist were taken and not reconciled.
    assert_eq!(
        summary.absent, 0,
        "nothing enqueued a Service that does not exist"
    );
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
    let controller = Controller::new(&services, 4).owns(&slices);
    let queue = controller.queue().clone();
    factory.start();

    let in_flight = Arc::new(Mutex::new(HashSet::<ObjectRef>::new()));
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
            move |service: Arc<Service>, _ctx: Arc<()>| {
                let (in_flight, overlaps, reconciles) = (
                    Arc::clone(&in_flight),
                    Arc::clone(&overlaps),
                    Arc::clone(&reconciles),
                );
                async move {
                    let key = ObjectRef::from_obj(&*service);
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
        Arc::new(()),
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
    let controller = Controller::new(&configmaps, 2);
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
            move |_cm: Arc<ConfigMap>, _ctx: Arc<()>| {
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
        Arc::new(()),
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
    let controller = Controller::new(&configmaps, 1).shutdown_grace(Duration::from_millis(100));
    let queue = controller.queue().clone();
    let entered = Arc::new(AtomicBool::new(false));
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let entered = Arc::clone(&entered);
            move |_cm: Arc<ConfigMap>, _ctx: Arc<()>| {
                let entered = Arc::clone(&entered);
                async move {
                    entered.store(true, Ordering::SeqCst);
                    std::future::pending::<()>().await;
                    Ok::<_, Infallible>(Action::Done)
                }
            }
        },
        Arc::new(()),
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
    let controller = Controller::new(&configmaps, 2);
    let queue = controller.queue().clone();
    queue.add(ObjectRef::from("default/c"));
    let reconciles = Arc::new(AtomicUsize::new(0));
    let summary = timeout(
        PATIENCE,
        controller.run(
            {
                let reconciles = Arc::clone(&reconciles);
                move |_cm: Arc<ConfigMap>, _ctx: Arc<()>| {
                    reconciles.fetch_add(1, Ordering::SeqCst);
                    async { Ok::<_, Infallible>(Action::Done) }
                }
            },
            Arc::new(()),
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
    let run = Controller::new(&configmaps, 1)
        .watches(&slices, |_: &EndpointSlice| None::<ObjectRef>)
        .run(
            |_cm: Arc<ConfigMap>, _ctx: Arc<()>| async { Ok::<_, Infallible>(Action::Done) },
            Arc::new(()),
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

/// Receives the next message, at most [`PATIENCE`] away.
async fn next<T>(rx: &mut mpsc::UnboundedReceiver<T>, what: &str) -> T {
    timeout(PATIENCE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .expect("sender alive")
}

/// A controller on the simulator's ConfigMaps in `default`, started, with `queue`.
async fn configmap_controller(
    sim: &Simulator,
    names: &[&str],
    queue: WorkQueue<ObjectRef>,
) -> (Informer<ConfigMap>, Controller<ConfigMap>) {
    for name in names {
        sim.create("configmaps", Some("default"), configmap(name, "0"))
            .unwrap();
    }
    let configmaps = Informer::new(
        informer::Api::<ConfigMap>::namespaced(client(sim), "default"),
        Default::default(),
    );
    configmaps.start();
    let controller = Controller::with_queue(&configmaps, queue, 2);
    (configmaps, controller)
}

fn backoff_queue(base: Duration) -> WorkQueue<ObjectRef> {
    WorkQueue::with_rate_limiter(ItemExponentialRateLimiter::new(
        base,
        Duration::from_secs(60),
    ))
}

/// The user's context for the tests below: a name, and where reconciles report.
struct Ctx<T> {
    name: &'static str,
    seen: mpsc::UnboundedSender<T>,
}

/// Reconcile gets the object as the store holds it (an `Arc` it may hold across awaits) and the
/// context given to `run`; an object with a deletionTimestamp is reconciled like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconcile_gets_the_object_and_the_context() {
    let sim = Simulator::start().await.unwrap();
    let (configmaps, controller) = configmap_controller(&sim, &["app"], WorkQueue::new()).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ctx = Arc::new(Ctx {
        name: "ctx-1",
        seen: tx,
    });
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        |cm: Arc<ConfigMap>, ctx: Arc<Ctx<(Arc<ConfigMap>, usize, &'static str)>>| async move {
            tokio::task::yield_now().await; // the object is held across an await
            let _ = ctx.seen.send((cm, Arc::as_ptr(&ctx) as usize, ctx.name));
            Ok::<_, Infallible>(Action::Done)
        },
        Arc::clone(&ctx),
        stopped,
    ));

    let (cm, ctx_ptr, name) = next(&mut rx, "the first reconcile").await;
    assert_eq!(
        (cm.metadata.name.as_str(), cm.data.get("v")),
        ("app", Some("0"))
    );
    assert_eq!(
        ctx_ptr,
        Arc::as_ptr(&ctx) as usize,
        "the context given to run"
    );
    assert_eq!(name, "ctx-1");

    // Deletion requested (the simulator has no finalizers; a client may set the field): still
    // in the store, so reconciled, with the timestamp for a finalizer helper to act on.
    sim.patch(
        "configmaps",
        Some("default"),
        "app",
        &json!({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z",
                             "finalizers": ["example.com/cleanup"]}, "data": {"v": "1"}}),
    )
    .unwrap();
    let (cm, _, _) = next(&mut rx, "the reconcile of the terminating object").await;
    assert_eq!(cm.data.get("v"), Some("1"));
    assert_eq!(
        cm.metadata.deletion_timestamp.as_deref(),
        Some("2030-01-01T00:00:00Z")
    );

    stop.send(()).unwrap();
    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    assert!(summary.done >= 2, "{summary:?}");
    assert_eq!((summary.failed, summary.panicked), (0, 0));
    configmaps.stop();
}

/// An `Err` goes to the default error policy: the object's ref is retried with the queue's
/// per-key exponential backoff (20, 40, 80 ms at least), and its history is forgotten once it
/// succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_is_retried_with_backoff_by_the_default_policy() {
    const BASE: Duration = Duration::from_millis(20);
    let sim = Simulator::start().await.unwrap();
    let queue = backoff_queue(BASE);
    let (configmaps, controller) = configmap_controller(&sim, &["flaky"], queue.clone()).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let attempts = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let attempts = Arc::clone(&attempts);
            move |cm: Arc<ConfigMap>, ctx: Arc<Ctx<Instant>>| {
                let attempt = attempts.fetch_add(1, Ordering::SeqCst) + 1;
                async move {
                    let _ = ctx.seen.send(Instant::now());
                    if attempt <= 3 {
                        return Err(format!(
                            "{} not ready (attempt {attempt})",
                            cm.metadata.name
                        ));
                    }
                    Ok(Action::Done)
                }
            }
        },
        Arc::new(Ctx { name: "", seen: tx }),
        stopped,
    ));
    let mut at = Vec::new();
    for i in 0..4 {
        at.push(next(&mut rx, &format!("attempt {i}")).await);
    }
    for (i, pair) in at.windows(2).enumerate() {
        let least = BASE * 2u32.pow(i as u32);
        assert!(
            pair[1] - pair[0] >= least,
            "retry {i} came after {:?}, before its backoff of {least:?}",
            pair[1] - pair[0]
        );
    }
    stop.send(()).unwrap();
    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    assert_eq!(
        summary,
        RunSummary {
            done: 1,
            failed: 3,
            ..RunSummary::default()
        }
    );
    assert_eq!(attempts.load(Ordering::SeqCst), 4);
    assert_eq!(queue.metrics().retries, 3);
    assert_eq!(
        queue.num_requeues(&ObjectRef::from("default/flaky")),
        0,
        "forgotten after the success"
    );
    configmaps.stop();
}

/// A user error policy gets the object, the error and the context, and its
/// `RequeueAfter(d)` brings the object back after `d`, not after the rate limiter's delay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_policys_requeue_after_brings_the_object_back_after_its_delay() {
    const AFTER: Duration = Duration::from_millis(150);
    let sim = Simulator::start().await.unwrap();
    // A rate limiter far slower than the policy's delay: a retry through it would time out.
    let queue = backoff_queue(Duration::from_secs(3600));
    let (configmaps, controller) = configmap_controller(&sim, &["flaky"], queue.clone()).await;
    let (policy_tx, mut policy_rx) = mpsc::unbounded_channel();
    let controller = controller.error_policy(
        move |cm: Arc<ConfigMap>, error: &String, ctx: Arc<Ctx<Instant>>| {
            let _ = policy_tx.send((cm.metadata.name.clone(), error.clone(), ctx.name));
            Action::RequeueAfter(AFTER)
        },
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let attempts = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let attempts = Arc::clone(&attempts);
            move |_cm: Arc<ConfigMap>, ctx: Arc<Ctx<Instant>>| {
                let attempt = attempts.fetch_add(1, Ordering::SeqCst) + 1;
                async move {
                    let _ = ctx.seen.send(Instant::now());
                    if attempt == 1 {
                        return Err("the first attempt fails".to_string());
                    }
                    Ok(Action::Done)
                }
            }
        },
        Arc::new(Ctx {
            name: "ctx-policy",
            seen: tx,
        }),
        stopped,
    ));
    let first = next(&mut rx, "the failing attempt").await;
    let (name, error, ctx) = next(&mut policy_rx, "the error policy").await;
    assert_eq!(
        (name.as_str(), error.as_str(), ctx),
        ("flaky", "the first attempt fails", "ctx-policy")
    );
    let second = next(&mut rx, "the retry").await;
    assert!(
        second - first >= AFTER,
        "retried after {:?}",
        second - first
    );
    stop.send(()).unwrap();
    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    assert_eq!(
        summary,
        RunSummary {
            done: 1,
            failed: 1,
            ..RunSummary::default()
        }
    );
    assert_eq!(
        queue.metrics().retries,
        1,
        "one add_after, no rate-limited add"
    );
    assert_eq!(queue.num_requeues(&ObjectRef::from("default/flaky")), 0);
    configmaps.stop();
}

/// A panic in one object's reconcile (or in the error policy for it) is caught and counted,
/// and that object is retried with backoff, while another object's reconciles go on and the
/// queue stays up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_is_caught_and_retried_while_other_objects_go_on() {
    let sim = Simulator::start().await.unwrap();
    // 300 ms, then 600 ms: long enough that "fine" is reconciled again in between.
    let queue = backoff_queue(Duration::from_millis(300));
    let (configmaps, controller) =
        configmap_controller(&sim, &["boom", "bad-policy", "fine"], queue.clone()).await;
    let controller = controller.error_policy(
        |_cm: Arc<ConfigMap>, error: &String, _ctx: Arc<Ctx<(String, String)>>| -> Action {
            panic!("the error policy fails on {error}")
        },
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let attempts = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let attempts = Arc::clone(&attempts);
            move |cm: Arc<ConfigMap>, ctx: Arc<Ctx<(String, String)>>| {
                let name = cm.metadata.name.clone();
                let attempt = {
                    let mut attempts = attempts.lock().unwrap();
                    let n = attempts.entry(name.clone()).or_default();
                    *n += 1;
                    *n
                };
                async move {
                    let v = cm.data.get("v").unwrap_or_default().to_string();
                    let _ = ctx.seen.send((name.clone(), format!("{attempt}:{v}")));
                    match name.as_str() {
                        "boom" if attempt <= 2 => panic!("reconcile of {name} failed hard"),
                        "bad-policy" if attempt == 1 => Err("an error".to_string()),
                        _ => Ok(Action::Done),
                    }
                }
            }
        },
        Arc::new(Ctx { name: "", seen: tx }),
        stopped,
    ));
    let mut log = Vec::new();
    let mut wait_for = async |item: (&str, &str)| {
        while !log
            .iter()
            .any(|(n, a): &(String, String)| (n.as_str(), a.as_str()) == item)
        {
            log.push(next(&mut rx, &format!("{item:?}")).await);
        }
    };
    wait_for(("boom", "1:0")).await;
    wait_for(("fine", "1:0")).await;
    // boom is waiting out its backoff; the queue and the workers go on with fine.
    sim.patch(
        "configmaps",
        Some("default"),
        "fine",
        &json!({"data": {"v": "2"}}),
    )
    .unwrap();
    wait_for(("fine", "2:2")).await;
    wait_for(("boom", "3:0")).await;
    wait_for(("bad-policy", "2:0")).await;
    stop.send(()).unwrap();
    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    // Every attempt is accounted for: boom's two panics and bad-policy's policy panic, the rest
    // done. fine is reconciled at least twice; a third time when its patch's event reaches the
    // queue after a reconcile that already read the patched object (2 runs in 48 here).
    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(
        (attempts["boom"], attempts["bad-policy"]),
        (3, 2),
        "{attempts:?}, seen {log:?}"
    );
    assert!(attempts["fine"] >= 2, "{attempts:?}, seen {log:?}");
    assert_eq!(
        summary,
        RunSummary {
            done: attempts.values().sum::<usize>() as u64 - 3,
            panicked: 3,
            ..RunSummary::default()
        },
        "boom twice, bad-policy's policy once; attempts {attempts:?}, seen {log:?}"
    );
    assert_eq!(queue.metrics().in_flight, 0);
    assert_eq!(queue.num_requeues(&ObjectRef::from("default/boom")), 0);
    configmaps.stop();
}

/// `Ok(Action::RequeueAfter(d))` brings the object back after `d` with no event about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requeue_after_reconciles_the_object_again_after_the_delay() {
    const AFTER: Duration = Duration::from_millis(100);
    let sim = Simulator::start().await.unwrap();
    let queue = WorkQueue::new();
    let (configmaps, controller) = configmap_controller(&sim, &["poll"], queue.clone()).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let attempts = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = stop_signal();
    let run = tokio::spawn(controller.run(
        {
            let attempts = Arc::clone(&attempts);
            move |_cm: Arc<ConfigMap>, ctx: Arc<Ctx<Instant>>| {
                let attempt = attempts.fetch_add(1, Ordering::SeqCst) + 1;
                async move {
                    let _ = ctx.seen.send(Instant::now());
                    Ok::<_, Infallible>(if attempt < 3 {
                        Action::RequeueAfter(AFTER)
                    } else {
                        Action::Done
                    })
                }
            }
        },
        Arc::new(Ctx { name: "", seen: tx }),
        stopped,
    ));
    let mut at = Vec::new();
    for i in 0..3 {
        at.push(next(&mut rx, &format!("reconcile {i}")).await);
    }
    for pair in at.windows(2) {
        assert!(
            pair[1] - pair[0] >= AFTER,
            "back after {:?}",
            pair[1] - pair[0]
        );
    }
    stop.send(()).unwrap();
    let summary = timeout(PATIENCE, run).await.expect("run returned").unwrap();
    assert_eq!(
        summary,
        RunSummary {
            done: 1,
            requeued_after: 2,
            ..RunSummary::default()
        }
    );
    assert_eq!(queue.metrics().retries, 2, "two delayed adds");
    configmaps.stop();
}

/// Stalls the simulator's watches once `configmaps` watches (a watch opened later would replay
/// the change), then sets `default/c1`'s `v` to 1, which the store does not see.
async fn hide_a_change(sim: &Simulator, configmaps: &Informer<ConfigMap>) {
    timeout(PATIENCE, async {
        while configmaps.health().phase != informer::reflector::Phase::Watching {
            sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the informer watches");
    sim.faults().stall_watches();
    sim.patch(
        "configmaps",
        Some("default"),
        "c1",
        &json!({"data": {"v": "1"}}),
    )
    .unwrap();
    sleep(Duration::from_millis(100)).await;
    assert_eq!(
        &configmaps.store().get("default", "c1").unwrap().data["v"],
        "0",
        "the stalled watch hides the change"
    );
}

/// A fenced controller whose fence reopens while its watches hid a change (as a partition does):
/// the workers start only once the store holds a list started after the opening, so no
/// reconcile under the new opening reads the older object. Without the catch-up, the requeued
/// key would be reconciled at once on the stale store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reopened_fence_waits_for_a_fresh_list_before_any_reconcile() {
    let sim = Simulator::start().await.unwrap();
    sim.faults().disable_watch_list(true); // relists are LISTs, which stalled watches let through
    let (configmaps, controller) = configmap_controller(&sim, &["c1"], WorkQueue::new()).await;
    let (fence, fenced) = tokio::sync::watch::channel(None::<u64>);
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<(u64, String)>();
    let (stop, stopped) = stop_signal();
    let run =
        tokio::spawn(controller.run_fenced(
            fenced,
            move |cm: Arc<ConfigMap>,
                  seen: Arc<mpsc::UnboundedSender<(u64, String)>>,
                  token: u64| async move {
                let _ = seen.send((token, cm.data["v"].to_string()));
                // Back in the queue at once: the key is due again whenever the fence opens.
                Ok::<_, Infallible>(Action::RequeueAfter(Duration::from_millis(20)))
            },
            Arc::new(seen_tx),
            stopped,
        ));

    fence.send_replace(Some(1));
    assert_eq!(
        next(&mut seen, "a reconcile under token 1").await,
        (1, "0".into())
    );
    fence.send_replace(None);
    // Reconciles under token 1 may still finish; none starts once the workers saw the close.
    // The key is requeued and due meanwhile.
    hide_a_change(&sim, &configmaps).await;
    let lists = configmaps.health().lists;

    fence.send_replace(Some(2));
    loop {
        let (token, v) = next(&mut seen, "a reconcile under token 2").await;
        if token == 2 {
            assert_eq!(
                v, "1",
                "the first reconcile of the new opening reads the fresh list"
            );
            break;
        }
    }
    assert_eq!(
        configmaps.health().lists,
        lists + 1,
        "one relist caught the store up"
    );
    sim.faults().resume_watches();
    stop.send(()).ok();
    run.await.unwrap();
    configmaps.stop();
}

/// The first opening of a fence waits for a list started after it too: the informers' first
/// lists, however recent, prove nothing of what a watch that broke or hung since has missed.
/// Before, the first opening accepted any list started after the controller was built, and a
/// shard whose watch broke after its first list reconciled an object the sharder had moved
/// (found by the seeded shard runs, `tests/replicas.rs`). (#46)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_opening_waits_for_a_list_started_after_it() {
    let sim = Simulator::start().await.unwrap();
    sim.faults().disable_watch_list(true); // relists are LISTs, which stalled watches let through
    let (configmaps, controller) = configmap_controller(&sim, &["c1"], WorkQueue::new()).await;
    let (fence, fenced) = tokio::sync::watch::channel(None::<u64>);
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<(u64, String)>();
    let (stop, stopped) = stop_signal();
    let run =
        tokio::spawn(controller.run_fenced(
            fenced,
            move |cm: Arc<ConfigMap>,
                  seen: Arc<mpsc::UnboundedSender<(u64, String)>>,
                  token: u64| async move {
                let _ = seen.send((token, cm.data["v"].to_string()));
                Ok::<_, Infallible>(Action::Done)
            },
            Arc::new(seen_tx),
            stopped,
        ));
    configmaps.wait_for_sync(PATIENCE).await.unwrap();
    hide_a_change(&sim, &configmaps).await;
    let lists = configmaps.health().lists;

    fence.send_replace(Some(1));
    assert_eq!(
        next(&mut seen, "the first reconcile").await,
        (1, "1".into()),
        "the first reconcile reads a list started after the opening"
    );
    assert_eq!(configmaps.health().lists, lists + 1, "one relist");
    sim.faults().resume_watches();
    stop.send(()).ok();
    run.await.unwrap();
    configmaps.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_brings_what_a_hung_watch_hid() {
    let sim = Simulator::start().await.unwrap();
    sim.faults().disable_watch_list(true);
    sim.create("configmaps", Some("default"), configmap("c1", "0"))
        .unwrap();
    let configmaps = Informer::new(
        informer::Api::<ConfigMap>::namespaced(client(&sim), "default"),
        Default::default(),
    );
    configmaps.start();
    configmaps.wait_for_sync(PATIENCE).await.unwrap();
    sim.faults().stall_watches();
    sim.patch(
        "configmaps",
        Some("default"),
        "c1",
        &json!({"data": {"v": "1"}}),
    )
    .unwrap();
    sim.create("configmaps", Some("default"), configmap("c2", "0"))
        .unwrap();
    configmaps.relist(PATIENCE).await.unwrap();
    let store = configmaps.store();
    assert_eq!(&store.get("default", "c1").unwrap().data["v"], "1");
    assert!(store.get("default", "c2").is_some());
    let health = configmaps.health();
    assert_eq!(health.lists, 2, "{health:?}");
    assert_eq!(
        health.consecutive_failures, 0,
        "a relist asked for is no failure"
    );
    sim.faults().resume_watches();
    configmaps.stop();
}

/// The controller's gate opens again for a fresh token equal to the lapsed one it holds. Before,
/// it took the equal token for the one already open, the workers kept the lapsed one, and
/// nothing was reconciled again for as long as the leadership lasted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_token_equal_to_a_lapsed_one_opens_the_gate_again() {
    let sim = Simulator::start().await.unwrap();
    let (configmaps, controller) = configmap_controller(&sim, &["c1"], WorkQueue::new()).await;
    let first = Lapsing::new(1);
    let (fence, fenced) = tokio::sync::watch::channel(Some(first.clone()));
    let (seen_tx, mut seen) = mpsc::unbounded_channel::<u64>();
    let (stop, stopped) = stop_signal();
    let run =
        tokio::spawn(
            controller.run_fenced(
                fenced,
                move |_cm: Arc<ConfigMap>,
                      seen: Arc<mpsc::UnboundedSender<u64>>,
                      token: Lapsing| async move {
                    let _ = seen.send(token.term);
                    Ok::<_, Infallible>(Action::RequeueAfter(Duration::from_millis(20)))
                },
                Arc::new(seen_tx),
                stopped,
            ),
        );
    assert_eq!(
        next(&mut seen, "a reconcile under the first token").await,
        1
    );
    first.lapse();
    // Whatever was in flight has ended (a reconcile here takes no time): drain it.
    sleep(Duration::from_millis(100)).await;
    while seen.try_recv().is_ok() {}
    fence.send_replace(Some(Lapsing::new(1)));
    assert_eq!(
        next(&mut seen, "a reconcile under the fresh token").await,
        1
    );
    stop.send(()).ok();
    run.await.unwrap();
    configmaps.stop();
}
