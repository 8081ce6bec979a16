//! The informer against the simulator over real HTTP: sync, live changes, handlers (late, slow,
//! panicking, removed), relists, and a seeded fault-convergence run of 200+ scenarios.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use informer::reflector::{BackoffOptions, ReflectorOptions};
use informer::sim::Simulator;
use informer::{
    Api, Client, Config, ConfigMap, DeletedObject, EventHandler, HandlerFns, Informer, Object,
};
use serde_json::json;

/// Test timings: fast backoff, short watches, quick dead-watch detection.
fn options() -> ReflectorOptions {
    ReflectorOptions {
        min_watch_timeout: Duration::from_secs(5),
        idle_timeout: Some(Duration::from_secs(3)),
        backoff: BackoffOptions {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(100),
            ..Default::default()
        },
        page_size: 7,
        ..Default::default()
    }
}

fn client(sim: &Simulator) -> Client {
    Client::new(Config::new(sim.url().parse().unwrap())).unwrap()
}

fn cm(ns: &str, name: &str, v: u64) -> serde_json::Value {
    json!({"metadata": {"name": name, "namespace": ns, "labels": {"v": v.to_string()}}, "data": {"v": v.to_string()}})
}

/// key -> resourceVersion of the simulator's configmaps.
fn server_state(sim: &Simulator) -> BTreeMap<String, String> {
    let list = sim.list("configmaps", None).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            (
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap()
                ),
                m["resourceVersion"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn store_state(inf: &Informer<ConfigMap>) -> BTreeMap<String, String> {
    inf.store()
        .list()
        .iter()
        .map(|o| (o.meta().key(), o.meta().resource_version.clone()))
        .collect()
}

/// Polls `f` until it holds, at most `secs`.
async fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f()
}

/// A handler that checks the notification sequence is valid and mirrors what it was told.
#[derive(Default)]
struct Mirror {
    objects: Mutex<BTreeMap<String, String>>,
    violations: Mutex<Vec<String>>,
    initial: AtomicUsize,
}

impl EventHandler<ConfigMap> for Mirror {
    fn on_add(&self, obj: &Arc<ConfigMap>, initial: bool) {
        if initial {
            self.initial.fetch_add(1, Ordering::Relaxed);
        }
        let key = obj.meta().key();
        if let Some(old) = self
            .objects
            .lock()
            .unwrap()
            .insert(key.clone(), obj.meta().resource_version.clone())
        {
            self.violations
                .lock()
                .unwrap()
                .push(format!("add of {key} already held at {old}"));
        }
    }
    fn on_update(&self, old: &Arc<ConfigMap>, new: &Arc<ConfigMap>) {
        let key = new.meta().key();
        let mut objects = self.objects.lock().unwrap();
        match objects.get(&key) {
            None => self
                .violations
                .lock()
                .unwrap()
                .push(format!("update of unknown {key}")),
            Some(rv) if *rv != old.meta().resource_version => {
                self.violations.lock().unwrap().push(format!(
                    "update of {key}: old rv {} but told {rv}",
                    old.meta().resource_version
                ))
            }
            _ => {}
        }
        objects.insert(key, new.meta().resource_version.clone());
    }
    fn on_delete(&self, obj: &DeletedObject<ConfigMap>) {
        let key = obj.key();
        if self.objects.lock().unwrap().remove(&key).is_none() {
            self.violations
                .lock()
                .unwrap()
                .push(format!("delete of unknown {key}"));
        }
    }
}

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
    assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
    assert_eq!(store_state(&inf), server_state(&sim));
    assert!(eventually(5, || inf.handler_has_synced(h)).await);
    assert_eq!(mirror.initial.load(Ordering::Relaxed), 20);

    sim.patch("configmaps", Some("a"), "c0", &json!({"data": {"v": "1"}}))
        .unwrap();
    sim.delete("configmaps", Some("b"), "c1").unwrap();
    sim.create("configmaps", Some("a"), cm("a", "new", 0))
        .unwrap();
    assert!(eventually(10, || store_state(&inf) == server_state(&sim)).await);
    assert!(eventually(5, || *mirror.objects.lock().unwrap() == server_state(&sim)).await);
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

/// Forwards to a shared handler (so the test keeps a reference).
struct ForwardTo<H>(Arc<H>);
impl<H: EventHandler<ConfigMap>> EventHandler<ConfigMap> for ForwardTo<H> {
    fn on_add(&self, o: &Arc<ConfigMap>, i: bool) {
        self.0.on_add(o, i)
    }
    fn on_update(&self, a: &Arc<ConfigMap>, b: &Arc<ConfigMap>) {
        self.0.on_update(a, b)
    }
    fn on_delete(&self, o: &DeletedObject<ConfigMap>) {
        self.0.on_delete(o)
    }
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
    assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
    let late = Arc::new(Mirror::default());
    let id = inf.add_handler(ForwardTo(late.clone()));
    assert!(eventually(5, || inf.handler_has_synced(id)).await);
    assert_eq!(late.initial.load(Ordering::Relaxed), 50);
    sim.delete("configmaps", Some("a"), "c3").unwrap();
    assert!(eventually(10, || *late.objects.lock().unwrap() == server_state(&sim)).await);
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
    assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
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
    assert!(eventually(10, || store_state(&inf) == server_state(&sim)).await);
    assert!(eventually(10, || *fast.objects.lock().unwrap() == server_state(&sim)).await);
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
        eventually(10, || inf
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
    assert!(inf.wait_for_sync(Duration::from_secs(10)).await);
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
    assert!(eventually(10, || store_state(&inf) == server_state(&sim)).await);
    assert!(inf.health().lists > lists, "a relist happened");
    assert!(eventually(5, || *mirror.objects.lock().unwrap() == server_state(&sim)).await);
    assert!(
        mirror.violations.lock().unwrap().is_empty(),
        "{:?}",
        mirror.violations.lock().unwrap()
    );
    inf.stop();
}

/// One seeded scenario: random writes interleaved with random faults; at quiescence the store and
/// every handler's mirror equal the server.
async fn scenario(sim: &Simulator, seed: u64) -> Result<(), String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let ns = format!("s{seed}");
    let inf: Informer<ConfigMap> = Informer::new(
        Api::namespaced(client(sim), &ns),
        ReflectorOptions {
            streaming_list: rng.bool(),
            ..options()
        },
    );
    let mirror = Arc::new(Mirror::default());
    inf.add_handler(ForwardTo(mirror.clone()));
    let objects = 3 + rng.usize(..6);
    for i in 0..objects {
        sim.create("configmaps", Some(&ns), cm(&ns, &format!("c{i}"), 0))
            .unwrap();
    }
    inf.start();
    let late = Arc::new(Mirror::default());
    let late_at = rng.usize(..20);
    for step in 0..20 {
        if step == late_at {
            inf.add_handler(ForwardTo(late.clone()));
        }
        let name = format!("c{}", rng.usize(..objects + 2));
        match rng.u8(..10) {
            0..=4 => {
                let _ = sim.patch(
                    "configmaps",
                    Some(&ns),
                    &name,
                    &json!({"data": {"v": rng.u32(..).to_string()}}),
                );
            }
            5 | 6 => {
                let _ = sim.delete("configmaps", Some(&ns), &name);
            }
            _ => {
                let _ = sim.create("configmaps", Some(&ns), cm(&ns, &name, rng.u64(..)));
            }
        }
        match rng.u8(..30) {
            0 => sim.faults().drop_watches_after_random_bytes(1, 400),
            1 => sim.faults().inject_410(),
            2 => sim
                .faults()
                .fail_next(1 + rng.usize(..3), [429, 500, 503][rng.usize(..3)]),
            3 => sim.faults().close_all_watches(),
            4 => sim.compact(),
            5 => sim.faults().chunk_bodies_random(1, 64),
            6 => sim.faults().drop_watches_after_events(1 + rng.u64(..3)),
            _ => {}
        }
        if rng.u8(..4) == 0 {
            tokio::time::sleep(Duration::from_millis(rng.u64(..15))).await;
        }
    }
    sim.faults().clear();
    let want = || {
        server_state(sim)
            .into_iter()
            .filter(|(k, _)| k.starts_with(&format!("{ns}/")))
            .collect::<BTreeMap<_, _>>()
    };
    let converged = eventually(20, || {
        let w = want();
        store_state(&inf) == w
            && *mirror.objects.lock().unwrap() == w
            && *late.objects.lock().unwrap() == w
    })
    .await;
    inf.stop();
    let mut problems: Vec<String> = mirror.violations.lock().unwrap().clone();
    problems.extend(
        late.violations
            .lock()
            .unwrap()
            .iter()
            .map(|v| format!("late: {v}")),
    );
    if !converged {
        problems.push(format!(
            "no convergence: store {:?} server {:?} mirror {:?}",
            store_state(&inf),
            want(),
            mirror.objects.lock().unwrap()
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("seed {seed}: {problems:?}"))
    }
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
