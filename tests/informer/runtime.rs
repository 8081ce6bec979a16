//! How an informer runs: its processor as a task, handlers on the client's shared pool, `stop` that
//! can be awaited, and panics of user code (transform, error callback) caught and reported.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use crate::support::convergence::{client, cm, eventually, options, server_state, store_state};
use informer::reflector::ReflectorOptions;
use informer::{Api, Client, Config, ConfigMap, HandlerFns, Informer};
use informer_sim::Simulator;

/// Handlers of many informers built on one client run on the client's pool: at most
/// `handler_threads` distinct threads, all of the pool, and each handler sees its own
/// notifications in order (resourceVersions of one key never go back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_of_many_informers_share_the_client_s_pool_and_keep_their_order() {
    let sim = Simulator::start().await.unwrap();
    for ns in 0..20 {
        for i in 0..5 {
            sim.create(
                "configmaps",
                Some(&format!("n{ns}")),
                cm("", &format!("c{i}"), 0),
            )
            .unwrap();
        }
    }
    let mut config = Config::new(sim.url().parse().unwrap());
    config.handler_threads = Some(3);
    let client = Client::new(config).unwrap();
    let threads = Arc::new(Mutex::new(std::collections::BTreeSet::<String>::new()));
    let out_of_order = Arc::new(AtomicUsize::new(0));
    let mut informers = Vec::new();
    for ns in 0..20 {
        let inf: Informer<ConfigMap> = Informer::new(
            Api::namespaced(client.clone(), &format!("n{ns}")),
            options(),
        );
        for _ in 0..3 {
            let (t, o) = (threads.clone(), out_of_order.clone());
            let last = Arc::new(Mutex::new(std::collections::HashMap::<String, u64>::new()));
            let seen = move |cm: &Arc<ConfigMap>| {
                t.lock()
                    .unwrap()
                    .insert(std::thread::current().name().unwrap_or("").to_owned());
                let rv: u64 = cm.metadata.resource_version.parse().unwrap();
                let prev = last
                    .lock()
                    .unwrap()
                    .insert(cm.metadata.name.to_string(), rv);
                if prev.is_some_and(|p| p > rv) {
                    o.fetch_add(1, Ordering::Relaxed);
                }
            };
            let seen2 = seen.clone();
            inf.add_handler(
                HandlerFns::new()
                    .on_add(move |cm, _| seen(cm))
                    .on_update(move |_, cm| seen2(cm)),
            );
        }
        inf.start();
        informers.push(inf);
    }
    for inf in &informers {
        inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    }
    for round in 1..=5 {
        for ns in 0..20 {
            sim.patch(
                "configmaps",
                Some(&format!("n{ns}")),
                "c0",
                &serde_json::json!({"data": {"v": round.to_string()}}),
            )
            .unwrap();
        }
    }
    let delivered = |inf: &Informer<ConfigMap>| {
        inf.metrics()
            .handlers
            .iter()
            .all(|(_, h)| h.depth == 0 && h.delivered >= 5)
    };
    assert!(
        eventually(60, || informers.iter().all(|inf| inf
            .store()
            .get(inf.store().list()[0].metadata.namespace.as_str(), "c0")
            .is_some_and(|c| c.data.get("v") == Some("5"))
            && delivered(inf)))
        .await
    );
    let threads = threads.lock().unwrap().clone();
    assert!(threads.len() <= 3, "{threads:?}");
    assert!(
        threads.iter().all(|t| t.starts_with("informer-handlers-")),
        "{threads:?}"
    );
    assert_eq!(out_of_order.load(Ordering::Relaxed), 0);
    for inf in &informers {
        inf.stop().await;
    }
}

/// `stop().await` returns only once the handler call in progress has returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awaited_stop_waits_for_the_handler_call_in_progress() {
    let sim = Simulator::start().await.unwrap();
    sim.create("configmaps", Some("a"), cm("a", "c1", 0))
        .unwrap();
    let inf: Informer<ConfigMap> = Informer::new(Api::all(client(&sim)), options());
    let (entered_tx, entered_rx) = std::sync::mpsc::channel::<()>();
    let (gate_tx, gate_rx) = std::sync::mpsc::channel::<()>();
    let (entered_tx, gate_rx) = (Mutex::new(entered_tx), Mutex::new(gate_rx));
    let returned = Arc::new(AtomicBool::new(false));
    let r = returned.clone();
    inf.add_handler(HandlerFns::new().on_add(move |_: &Arc<ConfigMap>, _| {
        entered_tx.lock().unwrap().send(()).unwrap();
        gate_rx.lock().unwrap().recv().unwrap();
        r.store(true, Ordering::SeqCst);
    }));
    inf.start();
    tokio::task::spawn_blocking(move || entered_rx.recv().unwrap())
        .await
        .unwrap();
    let stopped = inf.stop();
    let r = returned.clone();
    let waiter = tokio::spawn(async move {
        stopped.await;
        r.load(Ordering::SeqCst)
    });
    gate_tx.send(()).unwrap();
    assert!(
        waiter.await.unwrap(),
        "stop completed while the handler was still in its call"
    );
}

/// A transform that panics is reported through the error callback like a handler panic; the
/// informer goes on, and converges once the object it cannot transform is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_transform_is_reported_and_the_informer_goes_on() {
    let sim = Simulator::start().await.unwrap();
    sim.create("configmaps", Some("a"), cm("a", "c1", 0))
        .unwrap();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let e = errors.clone();
    let inf: Informer<ConfigMap> = Informer::with_transform(
        Api::all(client(&sim)),
        ReflectorOptions {
            on_error: Some(Arc::new(move |err: &informer::Error| {
                e.lock().unwrap().push(err.to_string())
            })),
            ..options()
        },
        Arc::new(|c: ConfigMap| {
            assert!(c.metadata.name != "bad", "transform bug");
            c
        }),
    );
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    sim.create("configmaps", Some("a"), cm("a", "bad", 1))
        .unwrap();
    assert!(
        eventually(60, || errors
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.contains("transform") && e.contains("transform bug")))
        .await,
        "{:?}",
        errors.lock().unwrap()
    );
    sim.delete("configmaps", Some("a"), "bad").unwrap();
    sim.create("configmaps", Some("a"), cm("a", "c2", 2))
        .unwrap();
    assert!(eventually(60, || store_state(&inf) == server_state(&sim)).await);
    inf.stop().await;
}

/// An error callback that panics takes nothing down: the handler panic it is told of is still
/// counted, and the other handler still sees every object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_error_callback_is_caught() {
    let sim = Simulator::start().await.unwrap();
    let told = Arc::new(AtomicUsize::new(0));
    let t = told.clone();
    let inf: Informer<ConfigMap> = Informer::new(
        Api::all(client(&sim)),
        ReflectorOptions {
            on_error: Some(Arc::new(move |_: &informer::Error| {
                t.fetch_add(1, Ordering::SeqCst);
                panic!("error callback bug")
            })),
            ..options()
        },
    );
    inf.add_handler(
        HandlerFns::new()
            .on_add(|o: &Arc<ConfigMap>, _| assert!(o.metadata.name != "bad", "handler bug")),
    );
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    inf.add_handler(HandlerFns::new().on_add(move |_: &Arc<ConfigMap>, _| {
        s.fetch_add(1, Ordering::SeqCst);
    }));
    inf.start();
    inf.wait_for_sync(Duration::from_secs(60)).await.unwrap();
    sim.create("configmaps", Some("a"), cm("a", "bad", 1))
        .unwrap();
    sim.create("configmaps", Some("a"), cm("a", "c2", 2))
        .unwrap();
    assert!(eventually(60, || seen.load(Ordering::SeqCst) == 2).await);
    assert!(eventually(60, || told.load(Ordering::SeqCst) >= 1).await);
    assert!(
        eventually(60, || inf
            .metrics()
            .handlers
            .iter()
            .any(|(_, h)| h.panics == 1))
        .await
    );
    inf.stop().await;
}

/// What woke a future, and when.
type WakeLog = Arc<Mutex<Vec<std::time::Instant>>>;

/// Forwards wake-ups to the task's waker, logging each.
struct LoggingWaker {
    task: Waker,
    log: WakeLog,
}

impl Wake for LoggingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.log.lock().unwrap().push(std::time::Instant::now());
        self.task.wake_by_ref();
    }
}

/// Polls `inner` with a logging waker and counts the polls.
struct Observed<F> {
    inner: Pin<Box<F>>,
    log: WakeLog,
    polls: usize,
}

impl<F: Future> Future for Observed<F> {
    type Output = F::Output;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.polls += 1;
        let waker = Waker::from(Arc::new(LoggingWaker {
            task: cx.waker().clone(),
            log: self.log.clone(),
        }));
        let mut cx = Context::from_waker(&waker);
        self.inner.as_mut().poll(&mut cx)
    }
}

/// `wait_for_sync` is woken once, by the processor as it finishes the first list, and returns on
/// the very next poll: nothing polls, no timer wakes it. On a current-thread runtime the reflector
/// and the processor cannot run before the first poll, so the wait starts before the sync.
#[tokio::test]
async fn wait_for_sync_is_woken_once_when_the_informer_syncs() {
    let sim = Simulator::start().await.unwrap();
    for i in 0..100 {
        sim.create("configmaps", Some("a"), cm("a", &format!("c{i}"), 0))
            .unwrap();
    }
    let inf: Informer<ConfigMap> = Informer::new(Api::all(client(&sim)), Default::default());
    inf.start();
    let log = WakeLog::default();
    let wait = Observed {
        inner: Box::pin(inf.wait_for_sync(Duration::from_secs(3600))),
        log: log.clone(),
        polls: 0,
    };
    let mut wait = pin!(wait);
    (&mut wait).await.unwrap();
    assert_eq!(inf.store().len(), 100);
    assert_eq!(log.lock().unwrap().len(), 1, "woken once");
    assert_eq!(
        wait.polls, 2,
        "one poll before the sync, one after its wake-up"
    );
    inf.stop().await;
}

/// A handler that blocks for good holds one thread of the pool, not the pool: on a pool of one
/// thread, the other informer's handler still hears of every object, and the other informer's
/// `stop().await` does not wait for the blocked call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_blocked_for_good_holds_up_no_other_handler_even_on_a_pool_of_one() {
    let sim = Simulator::start().await.unwrap();
    sim.create("configmaps", Some("a"), cm("a", "c1", 0))
        .unwrap();
    sim.create("configmaps", Some("b"), cm("b", "c1", 0))
        .unwrap();
    let mut config = Config::new(sim.url().parse().unwrap());
    config.handler_threads = Some(1);
    let client = Client::new(config).unwrap();
    let stuck: Informer<ConfigMap> = Informer::new(Api::namespaced(client.clone(), "a"), options());
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let blocked = Mutex::new(blocked);
    stuck.add_handler(HandlerFns::new().on_add(move |_: &Arc<ConfigMap>, _| {
        let _ = blocked.lock().unwrap().recv();
    }));
    stuck.start();
    let other: Informer<ConfigMap> = Informer::new(Api::namespaced(client, "b"), options());
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let id = other.add_handler(HandlerFns::new().on_add(move |_: &Arc<ConfigMap>, _| {
        s.fetch_add(1, Ordering::SeqCst);
    }));
    other.start();
    assert!(
        other
            .wait_for_handler_sync(id, Duration::from_secs(60))
            .await
    );
    sim.create("configmaps", Some("b"), cm("b", "c2", 1))
        .unwrap();
    assert!(eventually(60, || seen.load(Ordering::SeqCst) == 2).await);
    other.stop().await;
    drop(release); // the stuck handler's call returns
    stuck.stop().await;
}
