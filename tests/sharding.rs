//! Three replicas of one `Controller` in one process, each a shard of a
//! timebertt/kubernetes-controller-sharding ring (issue #32), on the simulator. The test plays the
//! sharder: it labels objects for shards, asks for drains and relabels the objects of a stopped
//! shard. Real time, not a paused clock: informers hand events to handler threads, which a paused
//! clock does not wait for; every wait polls for its condition instead.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use informer::leaderelection::LeaderElectionConfig;
use informer::reflector::ReflectorOptions;
use informer::sharding::{
    Assignment, LABEL_CONTROLLER_RING, LABEL_STATE, Shard, drain_label, shard_label,
};
use informer::workqueue::{Action, Controller, ObjectRef};
use informer::{Client, Config, ConfigMap, InformerFactory};
use informer_sim::Simulator;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};

const NS: &str = "default";
const RING: &str = "ring";

/// (shard, key) for every reconcile of an object labelled for that shard.
type Reconciled = Arc<Mutex<Vec<(String, String)>>>;

fn client(sim: &Simulator) -> Client {
    Client::new(Config::new(sim.url().parse().unwrap())).unwrap()
}

/// Starts shard `name`: its Lease, and a controller on the ConfigMaps labelled for it.
fn replica(sim: &Simulator, name: &str, log: &Reconciled) -> (JoinHandle<()>, oneshot::Sender<()>) {
    let client = client(sim);
    let shard = Shard::new(
        client.clone(),
        NS,
        RING,
        name,
        LeaderElectionConfig::default(),
    )
    .unwrap();
    let factory = InformerFactory::with_options(
        client.clone(),
        ReflectorOptions {
            label_selector: Some(shard.label_selector()),
            ..Default::default()
        },
    );
    let controller = Controller::new(&factory.informer::<ConfigMap>(Some(NS)), 2);
    factory.start();
    let (fence, assigner) = (shard.fence(), shard.assigner());
    let (stop, stopped) = oneshot::channel::<()>();
    let (name, log) = (name.to_string(), log.clone());
    let task = tokio::spawn(async move {
        let (stop_lease, lease_stopped) = oneshot::channel::<()>();
        let lease = tokio::spawn(shard.run(async {
            let _ = lease_stopped.await;
        }));
        controller
            .run_fenced(
                fence,
                move |cm: Arc<ConfigMap>, client: Arc<Client>, _token| {
                    let (assigner, name, log) = (assigner.clone(), name.clone(), log.clone());
                    async move {
                        let key = ObjectRef::from_obj(&*cm).to_string();
                        match assigner.assignment(&cm.metadata) {
                            Assignment::Drain => assigner.acknowledge_drain(&client, &*cm).await?,
                            Assignment::Elsewhere => {}
                            Assignment::Ours => log.lock().unwrap().push((name, key)),
                        }
                        Ok::<_, informer::Error>(Action::Done)
                    }
                },
                Arc::new(client),
                async {
                    let _ = stopped.await;
                },
            )
            .await;
        // The workers have stopped: now the Lease may go.
        let _ = stop_lease.send(());
        lease.await.unwrap();
    });
    (task, stop)
}

fn label(sim: &Simulator, name: &str, labels: Value) {
    sim.patch(
        "configmaps",
        Some(NS),
        name,
        &json!({"metadata": {"labels": labels}}),
    )
    .unwrap();
}

/// Polls `done` every 20 ms until it holds; fails after `limit`.
async fn eventually(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        sleep(Duration::from_millis(20)).await;
    }
}

/// Which shards reconciled each key.
fn owners(log: &Reconciled) -> BTreeMap<String, BTreeSet<String>> {
    let mut owners: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (shard, key) in log.lock().unwrap().iter() {
        owners.entry(key.clone()).or_default().insert(shard.clone());
    }
    owners
}

#[tokio::test]
async fn three_shards_each_reconcile_exactly_their_objects_drain_and_take_over_a_stopped_ones() {
    let sim = Simulator::start().await.unwrap();
    let shards = ["shard-0", "shard-1", "shard-2"];
    for i in 0..30 {
        sim.create(
            "configmaps",
            Some(NS),
            json!({"metadata": {"name": format!("cm-{i}"),
                                "labels": {shard_label(RING): shards[i % 3]}}}),
        )
        .unwrap();
    }
    // One object no shard owns yet.
    sim.create(
        "configmaps",
        Some(NS),
        json!({"metadata": {"name": "unassigned"}}),
    )
    .unwrap();
    let log: Reconciled = Arc::default();
    let mut replicas: Vec<_> = shards.iter().map(|s| replica(&sim, s, &log)).collect();
    eventually(Duration::from_secs(20), "30 objects reconciled", || {
        owners(&log).len() >= 30
    })
    .await;
    sleep(Duration::from_millis(500)).await; // room for a wrong shard to show up

    // Every object reconciled, each by exactly the shard it is labelled for.
    let seen = owners(&log);
    assert_eq!(seen.len(), 30, "{seen:?}");
    for i in 0..30 {
        let key = format!("{NS}/cm-{i}");
        let expected = BTreeSet::from([shards[i % 3].to_string()]);
        assert_eq!(seen[&key], expected, "{key}");
    }

    // The shard Leases, as the sharder reads them: named after and held by the shard, in the
    // ring, all times set; a label the sharder writes survives renewals.
    for s in shards {
        sim.patch(
            "leases",
            Some(NS),
            s,
            &json!({"metadata": {"labels": {LABEL_STATE: "ready"}}}),
        )
        .unwrap();
    }
    sleep(Duration::from_millis(2500)).await; // one renewal (RetryPeriod 2 s)
    for s in shards {
        let lease = sim.get("leases", Some(NS), s).unwrap();
        assert_eq!(lease["spec"]["holderIdentity"], s);
        assert_eq!(lease["metadata"]["labels"][LABEL_CONTROLLER_RING], RING);
        assert_eq!(lease["metadata"]["labels"][LABEL_STATE], "ready");
        assert_eq!(lease["spec"]["leaseDurationSeconds"], 15);
        assert!(lease["spec"]["acquireTime"].is_string() && lease["spec"]["renewTime"].is_string());
    }

    // A drain: shard-0 lets cm-0 go (both labels removed with its resourceVersion), without
    // reconciling it; relabelled, shard-1 takes it.
    let before = log.lock().unwrap().len();
    label(&sim, "cm-0", json!({drain_label(RING): "true"}));
    let start = Instant::now();
    loop {
        let cm = sim.get("configmaps", Some(NS), "cm-0").unwrap();
        let labels = &cm["metadata"]["labels"];
        if labels.get(shard_label(RING)).is_none() && labels.get(drain_label(RING)).is_none() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not drained: {cm}"
        );
        sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        log.lock().unwrap().len(),
        before,
        "a drained object is not reconciled"
    );
    label(&sim, "cm-0", json!({shard_label(RING): "shard-1"}));
    eventually(Duration::from_secs(10), "cm-0 reconciled again", || {
        log.lock().unwrap().len() > before
    })
    .await;
    sleep(Duration::from_millis(300)).await;
    assert_eq!(
        log.lock().unwrap()[before..],
        [("shard-1".to_string(), format!("{NS}/cm-0"))]
    );

    // shard-2 stops: its workers first, then it releases its Lease. The sharder moves its
    // objects to the others; they reconcile them.
    let (task, stop) = replicas.pop().unwrap();
    stop.send(()).unwrap();
    task.await.unwrap();
    let lease = sim.get("leases", Some(NS), "shard-2").unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "", "released");
    let before = log.lock().unwrap().len();
    for i in (2..30).step_by(3) {
        label(
            &sim,
            &format!("cm-{i}"),
            json!({shard_label(RING): shards[i % 2]}),
        );
    }
    eventually(Duration::from_secs(10), "moved objects reconciled", || {
        log.lock().unwrap().len() >= before + 10
    })
    .await;
    sleep(Duration::from_millis(300)).await;
    let moved: BTreeSet<(String, String)> = log.lock().unwrap()[before..].iter().cloned().collect();
    let expected: BTreeSet<(String, String)> = (2..30)
        .step_by(3)
        .map(|i| (shards[i % 2].to_string(), format!("{NS}/cm-{i}")))
        .collect();
    assert_eq!(moved, expected);
    for (task, stop) in replicas {
        stop.send(()).unwrap();
        task.await.unwrap();
    }
}
