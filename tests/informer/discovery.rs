//! Discovery against the simulator over real HTTP: slice moves and duplicates, slice and Service
//! deletion, relists in the middle of churn, change-only notifications, pull-after-notify, the
//! single-flight cache-miss path, Endpoints mode with a truncated list, Pod metadata, and the
//! last-known-good file, and the bounds on tracked Services, ports and namespaces.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use informer::discovery::{
    DiscoveryOptions, EndpointSource, Freshness, ServiceDiscovery, ServiceState, Snapshot,
};
use informer::reflector::{BackoffOptions, ReflectorOptions};
use informer::{Client, Config, InformerFactory};
use informer_sim::Simulator;
use informer_sim::churn::{Churn, ChurnConfig};
use serde_json::{Value, json};

const NS: &str = "default";

fn reflector() -> ReflectorOptions {
    ReflectorOptions {
        min_watch_timeout: Duration::from_secs(5),
        idle_timeout: Some(Duration::from_secs(3)),
        backoff: BackoffOptions {
            initial: Duration::from_millis(5),
            max: Duration::from_millis(100),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn options() -> DiscoveryOptions {
    DiscoveryOptions {
        reflector: reflector(),
        ..Default::default()
    }
}

fn client(sim: &Simulator) -> Client {
    Client::new(Config::new(sim.url().parse().unwrap())).unwrap()
}

fn service(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}})
}

fn slice(service: &str, name: &str, ips: &[&str]) -> Value {
    let endpoints: Vec<Value> = ips
        .iter()
        .map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "namespace": NS, "name": format!("pod-{ip}")}}))
        .collect();
    json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
    })
}

fn addrs(s: &Snapshot) -> Vec<String> {
    s.instances
        .iter()
        .map(|i| i.socket_addr().to_string())
        .collect()
}

async fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while tokio::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    f()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slices_are_merged_moves_and_deletions_followed() {
    let sim = Simulator::start().await.unwrap();
    sim.create("services", Some(NS), service("web")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice("web", "web-a", &["10.0.0.1", "10.0.0.2"]),
    )
    .unwrap();
    // The same endpoint in two slices counts once.
    sim.create(
        "endpointslices",
        Some(NS),
        slice("web", "web-b", &["10.0.0.2", "10.0.0.3"]),
    )
    .unwrap();
    // Another Service's slice is not mixed in.
    sim.create(
        "endpointslices",
        Some(NS),
        slice("other", "other-a", &["10.9.9.9"]),
    )
    .unwrap();

    let d = ServiceDiscovery::new(client(&sim), options());
    assert!(d.wait_for_sync(NS, Duration::from_secs(10)).await);
    let s = d.instances(NS, "web", "http");
    assert_eq!(s.state, ServiceState::Ready);
    assert_eq!(
        addrs(&s),
        ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"]
    );
    assert_eq!(s.freshness, Freshness::Live);
    // Synced: the cache-miss path answers from the cache, without a request.
    let fetched = d.instances_or_fetch(NS, "web", "http").await.unwrap();
    assert!(Arc::ptr_eq(&fetched, &s));
    assert_eq!(d.metrics().apiserver_reads, 0);
    assert_eq!(s.instances[0].pod.as_deref(), Some("default/pod-10.0.0.1"));

    // Rolling move of 10.0.0.1 from web-a to web-b: add first, then remove (as the controller).
    let mut sub = d.subscribe(NS, "web", "http");
    let first = sub.changed().await.unwrap();
    assert_eq!(first.snapshot.revision, s.revision);
    sim.replace(
        "endpointslices",
        Some(NS),
        "web-b",
        slice("web", "web-b", &["10.0.0.1", "10.0.0.2", "10.0.0.3"]),
    )
    .unwrap();
    sim.replace(
        "endpointslices",
        Some(NS),
        "web-a",
        slice("web", "web-a", &["10.0.0.2"]),
    )
    .unwrap();
    // Both writes leave the union unchanged: no notification.
    let quiet = tokio::time::timeout(Duration::from_millis(300), sub.changed()).await;
    assert!(quiet.is_err(), "no change, yet notified: {quiet:?}");
    assert!(d.metrics().recomputes >= 2);

    // Delete a slice: its endpoints that are nowhere else go.
    sim.delete("endpointslices", Some(NS), "web-b").unwrap();
    let c = tokio::time::timeout(Duration::from_secs(5), sub.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(addrs(&c.snapshot), ["10.0.0.2:8080"]);
    assert_eq!(c.diff.removed.len(), 2);
    assert!(c.snapshot.revision > first.snapshot.revision);
    assert!(d.instances(NS, "web", "http").revision >= c.snapshot.revision);

    // Delete every slice: the Service still exists, so NoEndpoints.
    sim.delete("endpointslices", Some(NS), "web-a").unwrap();
    let c = tokio::time::timeout(Duration::from_secs(5), sub.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.snapshot.state, ServiceState::NoEndpoints);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_deleted_and_recreated() {
    let sim = Simulator::start().await.unwrap();
    sim.create("services", Some(NS), service("web")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice("web", "web-a", &["10.0.0.1"]),
    )
    .unwrap();
    let d = ServiceDiscovery::new(client(&sim), options());
    assert!(d.wait_for_sync(NS, Duration::from_secs(10)).await);
    assert_eq!(
        d.instances(NS, "missing", "http").state,
        ServiceState::ServiceAbsent
    );
    let mut sub = d.subscribe(NS, "web", "http");
    let r0 = sub.changed().await.unwrap().snapshot.revision;

    sim.delete("services", Some(NS), "web").unwrap();
    let c = tokio::time::timeout(Duration::from_secs(5), sub.changed())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(c.snapshot.state, ServiceState::ServiceAbsent);
    assert!(c.snapshot.instances.is_empty());
    sim.delete("endpointslices", Some(NS), "web-a").unwrap();

    sim.create("services", Some(NS), service("web")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice("web", "web-z", &["10.0.0.7"]),
    )
    .unwrap();
    assert!(
        eventually(5, || {
            let s = d.instances(NS, "web", "http");
            s.state == ServiceState::Ready && addrs(&s) == ["10.0.0.7:8080"]
        })
        .await
    );
    assert!(d.instances(NS, "web", "http").revision > c.snapshot.revision);
    assert!(c.snapshot.revision > r0);
    sim.shutdown().await;
}

/// A relist (410 and compaction) in the middle of churn: a subscriber never sees an empty
/// snapshot while the Service has endpoints, revisions only grow, a pull after a notification is
/// never older, and at the end the snapshot matches the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relist_during_churn_never_flaps_to_empty() {
    let sim = Simulator::start().await.unwrap();
    let churn = Churn::new(
        sim.api(),
        ChurnConfig {
            services: 3,
            pods_per_service: 10,
            max_endpoints_per_slice: 4,
            seed: 7,
            ..Default::default()
        },
    )
    .unwrap();
    let d = ServiceDiscovery::new(client(&sim), options());
    assert!(d.wait_for_sync(NS, Duration::from_secs(10)).await);
    let mut sub = d.subscribe(NS, "svc-0", "http");
    let seen = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let watcher = {
        let d = d.clone();
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut last = 0u64;
            while let Some(c) = sub.changed().await {
                let s = &c.snapshot;
                assert_eq!(s.state, ServiceState::Ready, "flap: {s:?}");
                assert!(s.usable().next().is_some(), "empty snapshot: {s:?}");
                assert!(s.revision > last || last == 0, "revision went back");
                last = s.revision;
                assert!(d.instances(NS, "svc-0", "http").revision >= s.revision);
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        })
    };
    let running = churn.run(300.0);
    for round in 0..6 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if round % 2 == 0 {
            sim.faults().inject_410();
        } else {
            sim.compact();
            sim.faults().close_all_watches();
        }
    }
    tokio::time::sleep(Duration::from_millis(250)).await;
    let _churn = running.stop().await.unwrap();

    // Converges to the server's ready endpoints.
    let expected = || -> BTreeSet<String> {
        let list = sim.list("endpointslices", Some(NS)).unwrap();
        let mut out = BTreeSet::new();
        for s in list["items"].as_array().unwrap() {
            if s["metadata"]["labels"]["kubernetes.io/service-name"] != "svc-0" {
                continue;
            }
            let port = s["ports"][0]["port"].as_i64().unwrap();
            for e in s["endpoints"].as_array().into_iter().flatten() {
                if e["conditions"]["ready"].as_bool().unwrap_or(true) {
                    out.insert(format!("{}:{port}", e["addresses"][0].as_str().unwrap()));
                }
            }
        }
        out
    };
    let converged = eventually(10, || {
        let got: BTreeSet<String> = d
            .instances(NS, "svc-0", "http")
            .usable()
            .filter(|i| i.ready)
            .map(|i| i.socket_addr().to_string())
            .collect();
        got == expected()
    })
    .await;
    assert!(converged, "did not converge to the server's endpoints");
    assert!(!watcher.is_finished(), "the subscriber's assertions failed");
    watcher.abort();
    let seen = seen.load(std::sync::atomic::Ordering::Relaxed);
    assert!(seen > 5, "only {seen} notifications under churn");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_miss_is_single_flight() {
    let sim = Simulator::start().await.unwrap();
    sim.create("services", Some(NS), service("web")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice("web", "web-a", &["10.0.0.1", "10.0.0.2"]),
    )
    .unwrap();
    // The informers talk to a dead address and never sync; the cache-miss reads use the
    // simulator.
    let dead = Client::new(Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let factory = Arc::new(InformerFactory::with_options(dead, reflector()));
    let d = ServiceDiscovery::with_factory(
        client(&sim),
        factory,
        DiscoveryOptions {
            fetch_min_interval: Duration::from_secs(30),
            ..Default::default()
        },
    );
    assert_eq!(
        d.instances(NS, "web", "http").state,
        ServiceState::NotSynced
    );
    let callers: Vec<_> = (0..1000)
        .map(|_| {
            let d = d.clone();
            tokio::spawn(async move { d.instances_or_fetch(NS, "web", "http").await })
        })
        .collect();
    let mut at = BTreeSet::new();
    for c in callers {
        let s = c.await.unwrap().unwrap();
        assert_eq!(s.state, ServiceState::Ready);
        assert_eq!(s.instances.len(), 2);
        match s.freshness {
            Freshness::Fetched { at: t } => at.insert(t),
            other => panic!("expected a fetched snapshot, got {other:?}"),
        };
    }
    // One read answered everyone.
    assert_eq!(at.len(), 1);
    let m = d.metrics();
    assert_eq!(m.apiserver_reads, 1, "{m:?}");
    assert_eq!(m.fetches_shared, 999);

    // A Service that does not exist: one LIST (empty) and one GET of the Service.
    let s = d.instances_or_fetch(NS, "nope", "http").await.unwrap();
    assert_eq!(s.state, ServiceState::ServiceAbsent);
    assert_eq!(d.metrics().apiserver_reads, 3);

    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_mode_warns_on_truncated_list() {
    let sim = Simulator::start().await.unwrap();
    sim.create("services", Some(NS), service("big")).unwrap();
    let addresses: Vec<Value> = (1..=5)
        .map(|i| json!({"ip": format!("10.1.0.{i}")}))
        .collect();
    sim.create(
        "endpoints",
        Some(NS),
        json!({
            "metadata": {"name": "big", "annotations": {"endpoints.kubernetes.io/over-capacity": "truncated"}},
            "subsets": [{"addresses": addresses, "notReadyAddresses": [{"ip": "10.1.1.1"}],
                         "ports": [{"name": "http", "port": 8080}]}]
        }),
    )
    .unwrap();
    let d = ServiceDiscovery::new(
        client(&sim),
        DiscoveryOptions {
            source: EndpointSource::Endpoints,
            ..options()
        },
    );
    assert!(d.wait_for_sync(NS, Duration::from_secs(10)).await);
    let s = d.instances(NS, "big", "http");
    assert_eq!(s.state, ServiceState::Ready);
    assert!(s.truncated);
    assert_eq!(s.instances.len(), 5);

    // The annotation goes away once the list fits again.
    sim.patch(
        "endpoints",
        Some(NS),
        "big",
        &json!({"metadata": {"annotations": {"endpoints.kubernetes.io/over-capacity": null}}}),
    )
    .unwrap();
    assert!(eventually(5, || !d.instances(NS, "big", "http").truncated).await);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_metadata_joins_even_when_the_pod_arrives_late() {
    let sim = Simulator::start().await.unwrap();
    sim.create("services", Some(NS), service("dubbo")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice("dubbo", "dubbo-a", &["10.2.0.1"]),
    )
    .unwrap();
    let d = ServiceDiscovery::new(
        client(&sim),
        DiscoveryOptions {
            pod_metadata: true,
            ..options()
        },
    );
    assert!(d.wait_for_sync(NS, Duration::from_secs(10)).await);
    let s = d.instances(NS, "dubbo", "http");
    // Kept without metadata (Dubbo would drop it).
    assert_eq!(s.instances.len(), 1);
    assert!(s.instances[0].metadata.is_none());
    sim.create(
        "pods",
        Some(NS),
        json!({"metadata": {"name": "pod-10.2.0.1", "labels": {"version": "v2"},
               "annotations": {"io.dubbo/metadata": "{\"dubbo.metadata.revision\":\"r1\"}"}}}),
    )
    .unwrap();
    assert!(
        eventually(5, || {
            let s = d.instances(NS, "dubbo", "http");
            s.instances[0].metadata.as_ref().is_some_and(|m| {
                m.labels["version"] == "v2"
                    && m.dubbo.as_ref().unwrap()["dubbo.metadata.revision"] == "r1"
            })
        })
        .await
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_known_good_serves_a_cold_start_marked_stale() {
    let sim = Simulator::start().await.unwrap();
    sim.create("services", Some(NS), service("web")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice("web", "web-a", &["10.0.0.1"]),
    )
    .unwrap();
    let path = std::env::temp_dir().join(format!("discovery-lkg-{}.json", std::process::id()));
    let with_file = |o: DiscoveryOptions| DiscoveryOptions {
        last_known_good: Some(path.clone()),
        ..o
    };
    let d = ServiceDiscovery::new(client(&sim), with_file(options()));
    assert!(d.wait_for_sync(NS, Duration::from_secs(10)).await);
    assert_eq!(d.instances(NS, "web", "http").state, ServiceState::Ready);
    d.persist_now().unwrap();
    sim.shutdown().await;

    // The apiserver is gone: a new process starts from the file.
    let dead = Client::new(Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
    let cold = ServiceDiscovery::new(dead, with_file(options()));
    let s = cold.instances(NS, "web", "http");
    assert_eq!(s.state, ServiceState::Ready);
    assert_eq!(addrs(&s), ["10.0.0.1:8080"]);
    assert!(matches!(s.freshness, Freshness::Stale { .. }));
    assert!(s.freshness.age().is_some());
    // The fallback read fails; the stale snapshot stands in.
    let s = cold.instances_or_fetch(NS, "web", "http").await.unwrap();
    assert!(matches!(s.freshness, Freshness::Stale { .. }));
    assert!(
        cold.instances_or_fetch(NS, "unknown", "http")
            .await
            .is_err()
    );
    let _ = std::fs::remove_file(&path);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_of_the_last_known_good_file_is_retried() {
    let sim = Simulator::start().await.unwrap();
    sim.create("services", Some(NS), service("web")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice("web", "web-a", &["10.0.0.1"]),
    )
    .unwrap();
    // The file's folder does not exist yet: every write fails until it does.
    let dir = std::env::temp_dir().join(format!("discovery-lkg-retry-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("lkg.json");
    let d = ServiceDiscovery::new(
        client(&sim),
        DiscoveryOptions {
            last_known_good: Some(path.clone()),
            persist_interval: Duration::from_millis(50),
            ..options()
        },
    );
    assert!(d.wait_for_sync(NS, Duration::from_secs(10)).await);
    assert_eq!(d.instances(NS, "web", "http").state, ServiceState::Ready);
    assert!(d.persist_now().is_err());
    // Several periods of failed writes.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!path.exists());
    // The folder appears; nothing changes in the cluster: the write is retried all the same.
    std::fs::create_dir_all(&dir).unwrap();
    assert!(
        eventually(10, || path.exists()).await,
        "the failed write was never retried"
    );
    let _ = std::fs::remove_dir_all(&dir);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracked_services_and_ports_are_bounded_and_subscribed_ones_survive() {
    let sim = Simulator::start().await.unwrap();
    sim.create("services", Some(NS), service("keep")).unwrap();
    let d = ServiceDiscovery::new(
        client(&sim),
        DiscoveryOptions {
            max_tracked_services: 3,
            max_ports_per_service: 2,
            ..options()
        },
    );
    assert!(d.wait_for_sync(NS, Duration::from_secs(30)).await);
    let mut sub = d.subscribe(NS, "keep", "http");
    let first = sub.changed().await.unwrap();
    assert!(first.snapshot.instances.is_empty());

    // Callers may name any Service and port: the tracked state stays within the bounds.
    for i in 0..50 {
        let _ = d.instances(NS, &format!("svc-{i}"), "http");
        assert!(d.metrics().tracked_ports <= 3, "{:?}", d.metrics());
    }
    for i in 0..20 {
        let _ = d.instances(NS, "svc-49", &format!("port-{i}"));
        assert!(d.metrics().tracked_ports <= 3 + 1, "{:?}", d.metrics());
    }
    // An evicted Service answers again when asked (a new cell, computed from the informers).
    sim.create("services", Some(NS), service("svc-0")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice("svc-0", "svc-0-a", &["10.0.1.1"]),
    )
    .unwrap();
    let mut again = d.subscribe(NS, "svc-0", "http");
    loop {
        let change = tokio::time::timeout(Duration::from_secs(30), again.changed())
            .await
            .expect("svc-0 is computed again")
            .unwrap();
        if change.snapshot.instances.len() == 1 {
            break;
        }
    }
    // The subscribed Service was never forgotten: its subscription still sees changes.
    sim.create(
        "endpointslices",
        Some(NS),
        slice("keep", "keep-a", &["10.0.2.1"]),
    )
    .unwrap();
    let change = tokio::time::timeout(Duration::from_secs(30), sub.changed())
        .await
        .expect("the subscription is alive")
        .unwrap();
    assert_eq!(addrs(&change.snapshot), ["10.0.2.1:8080"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watched_namespaces_are_bounded_and_a_subscribed_one_survives() {
    let sim = Simulator::start().await.unwrap();
    sim.create("services", Some(NS), service("keep")).unwrap();
    let d = ServiceDiscovery::new(
        client(&sim),
        DiscoveryOptions {
            max_watched_namespaces: 2,
            ..options()
        },
    );
    assert!(d.wait_for_sync(NS, Duration::from_secs(30)).await);
    let mut sub = d.subscribe(NS, "keep", "http");
    let first = sub.changed().await.unwrap();
    assert!(first.snapshot.instances.is_empty());

    // Callers may name any namespace: the namespaces watched stay within the bound, and the
    // Services asked about in a forgotten namespace are forgotten with it.
    for i in 0..10 {
        let _ = d.instances(&format!("ns-{i}"), "web", "http");
        let m = d.metrics();
        assert!(m.watched_namespaces <= 2, "{m:?}");
        assert!(m.tracked_ports <= 2, "{m:?}");
    }

    // The namespace with a subscriber was never forgotten: its subscription still sees changes.
    sim.create(
        "endpointslices",
        Some(NS),
        slice("keep", "keep-a", &["10.0.2.1"]),
    )
    .unwrap();
    let change = tokio::time::timeout(Duration::from_secs(30), sub.changed())
        .await
        .expect("the subscription is alive")
        .unwrap();
    assert_eq!(addrs(&change.snapshot), ["10.0.2.1:8080"]);

    // A forgotten namespace answers again when asked: new informers, a new computation.
    sim.create("services", Some("ns-0"), service("web"))
        .unwrap();
    sim.create(
        "endpointslices",
        Some("ns-0"),
        slice("web", "web-a", &["10.0.1.1"]),
    )
    .unwrap();
    assert!(d.wait_for_sync("ns-0", Duration::from_secs(30)).await);
    let s = d.instances("ns-0", "web", "http");
    assert_eq!(addrs(&s), ["10.0.1.1:8080"], "{s:?}");
    assert!(d.metrics().watched_namespaces <= 2, "{:?}", d.metrics());
}

/// RBAC on EndpointSlices only (issue #46): listing Services answers 403. Discovery must not wait
/// for them for ever: it syncs, serves from the slices alone (as with `watch_services: false`),
/// and says so in its metrics with the server's message. Once Services are allowed, it computes
/// every Service again with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_services_forbidden_discovery_serves_from_the_slices_alone_and_says_so() {
    let sim = Simulator::start().await.unwrap();
    sim.faults().forbid_reads_of("services", true);
    sim.create("services", Some(NS), service("web")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice("web", "web-a", &["10.0.0.1"]),
    )
    .unwrap();
    // A Service without slices, and slices without a Service: only Services tell them apart.
    sim.create("services", Some(NS), service("lonely")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice("ghost", "ghost-a", &["10.0.9.9"]),
    )
    .unwrap();

    let d = ServiceDiscovery::new(client(&sim), options());
    assert!(
        d.wait_for_sync(NS, Duration::from_secs(10)).await,
        "not synced: {:?}",
        d.metrics()
    );
    assert!(d.has_synced(NS));
    let s = d.instances(NS, "web", "http");
    assert_eq!(s.state, ServiceState::Ready);
    assert_eq!(addrs(&s), ["10.0.0.1:8080"]);
    // As with `watch_services: false`.
    assert_eq!(
        d.instances(NS, "lonely", "http").state,
        ServiceState::ServiceAbsent
    );
    assert_eq!(d.instances(NS, "ghost", "http").state, ServiceState::Ready);
    let m = d.metrics();
    let message = m.services_forbidden.get(NS).expect("degraded namespace");
    assert!(
        message.contains(
            "services is forbidden: User \"reader\" cannot list resource \"services\" in API group \"\" in the namespace \"default\""
        ) || message.contains(
            "services is forbidden: User \"reader\" cannot watch resource \"services\" in API group \"\" in the namespace \"default\""
        ),
        "{message}"
    );
    assert_eq!(m.services_forbidden.len(), 1, "{m:?}");

    // Allowed again: the Service informer (still retrying) syncs, and every Service is computed
    // with it, those that exist and those that do not.
    let mut lonely = d.subscribe(NS, "lonely", "http");
    let mut ghost = d.subscribe(NS, "ghost", "http");
    lonely.changed().await.unwrap();
    ghost.changed().await.unwrap();
    sim.faults().forbid_reads_of("services", false);
    let next = async |sub: &mut informer::discovery::Subscription| {
        tokio::time::timeout(Duration::from_secs(10), sub.changed())
            .await
            .expect("recomputed once Services are allowed")
            .unwrap()
            .snapshot
    };
    assert_eq!(next(&mut lonely).await.state, ServiceState::NoEndpoints);
    assert_eq!(next(&mut ghost).await.state, ServiceState::ServiceAbsent);
    assert!(
        d.metrics().services_forbidden.is_empty(),
        "{:?}",
        d.metrics()
    );
    sim.shutdown().await;
}

/// A server before 1.21 serves EndpointSlices as `discovery.k8s.io/v1beta1` only (issue #46): the
/// default source must not 404 for ever. Discovery falls back to v1beta1, its endpoints'
/// `topology` labels giving the zone and node, and the cache-miss path reads v1beta1 too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoint_slices_served_only_as_v1beta1_are_read_from_v1beta1() {
    let sim = Simulator::builder()
        .endpoint_slices_v1beta1(true)
        .start()
        .await
        .unwrap();
    sim.create("services", Some(NS), service("web")).unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        json!({
            "metadata": {"name": "web-a", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true},
                 "topology": {"kubernetes.io/hostname": "node-1", "topology.kubernetes.io/zone": "zone-a"}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": true}}
            ],
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
        }),
    )
    .unwrap();

    // Before the informers synced, the cache-miss path reads v1beta1 (v1 answers 404).
    let d = ServiceDiscovery::new(client(&sim), options());
    let fetched = d.instances_or_fetch(NS, "web", "http").await.unwrap();
    assert_eq!(addrs(&fetched), ["10.0.0.1:8080", "10.0.0.2:8080"]);

    assert!(
        d.wait_for_sync(NS, Duration::from_secs(10)).await,
        "not synced"
    );
    let s = d.instances(NS, "web", "http");
    assert_eq!(s.state, ServiceState::Ready);
    assert_eq!(s.freshness, Freshness::Live);
    assert_eq!(addrs(&s), ["10.0.0.1:8080", "10.0.0.2:8080"]);
    assert_eq!(s.instances[0].zone.as_deref(), Some("zone-a"));
    assert_eq!(s.instances[0].node.as_deref(), Some("node-1"));
    assert_eq!(s.instances[1].zone, None);

    // And follows it.
    let mut sub = d.subscribe(NS, "web", "http");
    sub.changed().await.unwrap();
    sim.delete("endpointslices", Some(NS), "web-a").unwrap();
    let change = tokio::time::timeout(Duration::from_secs(10), sub.changed())
        .await
        .expect("the deletion is seen")
        .unwrap();
    assert_eq!(change.snapshot.state, ServiceState::NoEndpoints);
    sim.shutdown().await;
}
