//! Shared by `tests/informer/lifecycle.rs` and `examples/convergence.rs`: a handler that checks the
//! notification sequence, and one seeded fault scenario against the simulator.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use informer::reflector::{BackoffOptions, ReflectorOptions};
use informer::{Api, Client, Config, ConfigMap, DeletedObject, EventHandler, Informer, Object};
use informer_sim::Simulator;
use serde_json::json;

/// Test timings: fast backoff, short watches, quick dead-watch detection.
pub fn options() -> ReflectorOptions {
    ReflectorOptions {
        min_watch_timeout: Duration::from_secs(5),
        idle_timeout: Some(Duration::from_secs(3)),
        backoff: BackoffOptions {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(100),
            ..Default::default()
        },
        page_size: 7,
        // A streaming list without its end bookmark (a fault below) is given up after 2 s.
        initial_events_deadline: Duration::from_secs(2),
        ..Default::default()
    }
}

/// A client with the test timings: a body that stalls is given up after 300 ms.
pub fn client(sim: &Simulator) -> Client {
    let mut config = Config::new(sim.url().parse().unwrap());
    config.body_stall_timeout = Duration::from_millis(300);
    Client::new(config).unwrap()
}

pub fn cm(ns: &str, name: &str, v: u64) -> serde_json::Value {
    json!({"metadata": {"name": name, "namespace": ns, "labels": {"v": v.to_string()}}, "data": {"v": v.to_string()}})
}

/// key -> resourceVersion of the simulator's configmaps.
pub fn server_state(sim: &Simulator) -> BTreeMap<String, String> {
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

pub fn store_state(inf: &Informer<ConfigMap>) -> BTreeMap<String, String> {
    inf.store()
        .list()
        .iter()
        .map(|o| (o.meta().key(), o.meta().resource_version.to_string()))
        .collect()
}

/// Polls `f` until it holds, at most `secs`.
pub async fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
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
pub struct Mirror {
    pub objects: Mutex<BTreeMap<String, String>>,
    pub violations: Mutex<Vec<String>>,
    pub initial: AtomicUsize,
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
            .insert(key.clone(), obj.meta().resource_version.to_string())
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
        objects.insert(key, new.meta().resource_version.to_string());
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

/// Forwards to a shared handler (so the test keeps a reference).
pub struct ForwardTo<H>(pub Arc<H>);
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

/// One seeded scenario: random writes interleaved with random faults; at quiescence the store and
/// every handler's mirror equal the server.
pub async fn scenario(sim: &Simulator, seed: u64) -> Result<(), String> {
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
        match rng.u8(..36) {
            30 => sim.faults().inject_429(),
            31 => sim
                .faults()
                .answer_next_with_empty_object(1 + rng.usize(..2)),
            32 => sim
                .faults()
                .fail_next_html(1 + rng.usize(..2), [500, 502][rng.usize(..2)]),
            33 => sim.faults().corrupt_watches(),
            // Both last until the faults are cleared at the end of the scenario.
            34 => sim.faults().forbid_reads(true),
            35 => sim.faults().stall_watches(),
            0 => sim.faults().drop_watches_after_random_bytes(1, 400),
            1 => sim.faults().inject_410(),
            2 => sim
                .faults()
                .fail_next(1 + rng.usize(..3), [429, 500, 503][rng.usize(..3)]),
            3 => sim.faults().close_all_watches(),
            4 => sim.compact(),
            5 => sim.faults().chunk_bodies_random(1, 64),
            6 => sim.faults().drop_watches_after_events(1 + rng.u64(..3)),
            7 => sim
                .faults()
                .stall_next_error_bodies(1 + rng.usize(..2), [500, 503][rng.usize(..2)]),
            // Clamped to the backoff cap (100 ms here).
            8 => sim
                .faults()
                .fail_next_plain_retry_after(1 + rng.usize(..2), 3),
            // Lasts until the faults are cleared: streaming lists never end their initial events.
            9 => sim.faults().withhold_initial_events_end(true),
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
    let converged = eventually(60, || {
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
