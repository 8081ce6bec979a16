//! The `metrics` feature against the simulator over real loopback HTTP: `gather()` counts the
//! client's requests by code, method and host, a named work queue's adds, and an informer's
//! figures, under client-go's names.
//!
//! The registry is process-wide: each check picks its series by a label no other test of this
//! binary uses (the simulator's own host and port, the queue's name), and the request counts
//! come from a client of a simulator nothing else talks to, so they are exact.

#![cfg(feature = "metrics")]

use std::sync::Arc;
use std::time::Duration;

use informer::workqueue::WorkQueue;
use informer::{Api, Client, Config, ConfigMap, HandlerFns, Informer, Object};
use informer_sim::Simulator;
use serde_json::json;

/// Upper bound of every wait: far above what any step needs, even on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(60);

fn client(sim: &Simulator) -> Client {
    Client::new(Config::new(sim.url().parse().unwrap())).unwrap()
}

/// `host:port` of the simulator: the `host` label of its requests.
fn host(sim: &Simulator) -> String {
    let url = sim.url();
    let authority = url.split_once("://").map_or(url, |(_, rest)| rest);
    authority.trim_end_matches('/').to_owned()
}

/// The value of the sample `name` whose labels include every one of `labels`, in `gather()`'s
/// text.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (sample_name, rest) = series.split_once('{').unwrap_or((series, "}"));
            let all = labels
                .iter()
                .all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
            (sample_name == name && all).then(|| value.parse().unwrap())
        })
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !check() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}:\n{}",
            informer::metrics::gather()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gather_counts_requests_by_code_method_and_host() {
    let sim = Simulator::start().await.unwrap();
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "present"}}),
    )
    .unwrap();
    let host = host(&sim);
    let api: Api<ConfigMap> = Api::namespaced(client(&sim), "default");
    for _ in 0..3 {
        api.get("present").await.unwrap();
    }
    assert!(api.get("absent").await.is_err());

    let text = informer::metrics::gather();
    let ok = [("code", "200"), ("method", "GET"), ("host", &host)];
    let not_found = [("code", "404"), ("method", "GET"), ("host", &host)];
    assert_eq!(
        sample(&text, "rest_client_requests_total", &ok),
        Some(3.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rest_client_requests_total", &not_found),
        Some(1.0),
        "{text}"
    );
    let get = [("verb", "GET"), ("host", &host)];
    let count = "rest_client_request_duration_seconds_count";
    assert_eq!(sample(&text, count, &get), Some(4.0), "{text}");
    let inf = [("verb", "GET"), ("host", &host), ("le", "+Inf")];
    let buckets = "rest_client_request_duration_seconds_bucket";
    assert_eq!(sample(&text, buckets, &inf), Some(4.0), "{text}");
    let first = [("verb", "GET"), ("host", &host), ("le", "0.005")];
    assert!(sample(&text, buckets, &first).is_some(), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gather_counts_an_informer_fed_work_queue_and_the_informer() {
    const INITIAL: usize = 5;
    let sim = Simulator::start().await.unwrap();
    for i in 0..INITIAL {
        sim.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": format!("c{i}")}}),
        )
        .unwrap();
    }
    let host = host(&sim);
    let informer = Informer::new(
        Api::<ConfigMap>::namespaced(client(&sim), "default"),
        Default::default(),
    );
    let queue: WorkQueue<String> = WorkQueue::new().with_name("metrics-test-configmaps");
    informer.add_handler(HandlerFns::new().on_add({
        let queue = queue.clone();
        move |cm: &Arc<ConfigMap>, _initial| queue.add(cm.meta().key())
    }));
    informer.start();
    informer.wait_for_sync(PATIENCE).await.unwrap();
    // After the sync, over the watch.
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "late"}}),
    )
    .unwrap();

    let name = [("name", "metrics-test-configmaps")];
    let adds = (INITIAL + 1) as f64;
    eventually("every add counted", || {
        sample(&informer::metrics::gather(), "workqueue_adds_total", &name) == Some(adds)
    })
    .await;
    // Nothing taken yet: all of them wait.
    let text = informer::metrics::gather();
    assert_eq!(
        sample(&text, "workqueue_depth", &name),
        Some(adds),
        "{text}"
    );

    // One key through a worker: its queue and work durations are observed.
    let key = queue.get().await.unwrap();
    queue.done(&key);
    let text = informer::metrics::gather();
    let count = |metric| sample(&text, metric, &name);
    assert_eq!(count("workqueue_queue_duration_seconds_count"), Some(1.0));
    assert_eq!(count("workqueue_work_duration_seconds_count"), Some(1.0));
    assert_eq!(count("workqueue_depth"), Some(adds - 1.0));
    assert_eq!(count("workqueue_retries_total"), Some(0.0));

    // The informer's request (one: a streaming list, which goes on as the watch) was counted,
    // and its figures are exported.
    let ok = [("code", "200"), ("method", "GET"), ("host", &host)];
    let requests = sample(&text, "rest_client_requests_total", &ok).unwrap_or(0.0);
    assert!(requests >= 1.0, "the informer's request:\n{text}");
    let configmaps = [
        ("name", "configmaps"),
        ("group", ""),
        ("version", "v1"),
        ("resource", "configmaps"),
    ];
    assert!(sample(&text, "informer_lists_total", &configmaps) >= Some(1.0));
    assert!(sample(&text, "informer_watches_total", &configmaps) >= Some(1.0));
    assert!(sample(&text, "informer_events_total", &configmaps) >= Some(1.0));
    assert!(sample(&text, "informer_store_resource_version", &configmaps) > Some(0.0));
    assert!(sample(&text, "informer_queued_items", &configmaps).is_some());
    assert!(
        sample(
            &text,
            "informer_processing_latency_seconds_count",
            &configmaps
        ) >= Some(1.0)
    );

    // A dropped queue's gauges go; its counters stay (client-go's do too).
    drop(queue);
    informer.stop().await;
    drop(informer);
    let text = informer::metrics::gather();
    assert_eq!(sample(&text, "workqueue_depth", &name), None, "{text}");
    assert_eq!(sample(&text, "workqueue_adds_total", &name), Some(adds));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_master_status_is_1_while_leading_and_0_after() {
    use informer::leaderelection::{LeaderElectionConfig, LeaderElector, LeadershipEvent};

    let sim = Simulator::start().await.unwrap();
    let mut elector = LeaderElector::new(
        client(&sim),
        "default",
        "metrics-test-lease",
        "a",
        LeaderElectionConfig::default(),
    )
    .unwrap();
    let mut events = elector.events();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(elector.run(async {
        let _ = released.await;
    }));
    let lease = [("name", "metrics-test-lease")];
    let status = || {
        sample(
            &informer::metrics::gather(),
            "leader_election_master_status",
            &lease,
        )
    };
    loop {
        match tokio::time::timeout(PATIENCE, events.recv()).await {
            Ok(Some(LeadershipEvent::StartedLeading(_))) => break,
            Ok(Some(_)) => {}
            other => panic!("no leadership: {other:?}"),
        }
    }
    assert_eq!(status(), Some(1.0));
    release.send(()).unwrap();
    tokio::time::timeout(PATIENCE, task).await.unwrap().unwrap();
    assert_eq!(status(), Some(0.0));
}

#[tokio::test]
async fn a_controllers_queue_is_named_after_its_kind_unless_named_already() {
    let sim = Simulator::start().await.unwrap();
    let configmaps = Informer::new(
        Api::<ConfigMap>::namespaced(client(&sim), "default"),
        Default::default(),
    );
    let controller = informer::workqueue::Controller::new(&configmaps, 1);
    assert_eq!(controller.queue().name().as_deref(), Some("configmap"));
    let named = WorkQueue::new().with_name("mine");
    let controller = informer::workqueue::Controller::with_queue(&configmaps, named, 1);
    assert_eq!(controller.queue().name().as_deref(), Some("mine"));
}
