//! Leader election and a shard of a sharding ring against the real apiserver (issue #32):
//! two electors and a killed leader, the Lease's fields as client-go writes them, a shard's Lease
//! as the sharder reads it, and the sharder's labels and drains seen by a shard's informer.
//! Short durations (LeaseDuration 3 s, RenewDeadline 2 s, RetryPeriod 0.5 s) keep them quick.

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use informer::leaderelection::{LeaderElectionConfig, LeaderElector, parse_micro_time};
use informer::reflector::ReflectorOptions;
use informer::sharding::{Assignment, LABEL_CONTROLLER_RING, Shard, drain_label, shard_label};
use informer::{ConfigMap, InformerFactory};
use serde_json::{Value, json};

use crate::support::real_apiserver::*;

fn quick() -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
    }
}

fn lease_path(ns: &str, name: &str) -> String {
    format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}")
}

fn micro(v: &Value, field: &str) -> SystemTime {
    let text = v["spec"][field].as_str().unwrap();
    // client-go's MicroTime: six fractional digits, UTC.
    assert!(text.len() == 27 && text.ends_with('Z'), "{field}: {text}");
    parse_micro_time(text).unwrap()
}

#[tokio::test]
async fn two_electors_the_leader_killed_the_other_takes_over_with_client_gos_fields() {
    let real =
        real_or_skip!("two_electors_the_leader_killed_the_other_takes_over_with_client_gos_fields");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "lease").await;
        let start = |id: &str| {
            let elector = LeaderElector::new(real.client(), &ns, "leader", id, quick()).unwrap();
            let fence = elector.fence();
            (tokio::spawn(elector.run(std::future::pending())), fence)
        };
        let (a, a_fence) = start("a");
        assert!(
            eventually(5, || a_fence.borrow().is_some()).await,
            "a leads"
        );
        let (b, b_fence) = start("b");
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(b_fence.borrow().is_none());

        let first = get(&client, &lease_path(&ns, "leader")).await;
        assert_eq!(first["spec"]["holderIdentity"], "a");
        assert_eq!(first["spec"]["leaseDurationSeconds"], 3);
        assert_eq!(first["spec"]["leaseTransitions"], 0);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let renewed = get(&client, &lease_path(&ns, "leader")).await;
        assert_eq!(renewed["spec"]["acquireTime"], first["spec"]["acquireTime"]);
        assert!(micro(&renewed, "renewTime") > micro(&first, "renewTime"));

        a.abort();
        let killed = std::time::Instant::now();
        assert!(
            eventually(10, || b_fence.borrow().is_some()).await,
            "b takes over"
        );
        let took = killed.elapsed();
        assert!(
            took <= Duration::from_millis(3500 + 500),
            "takeover after {took:?}"
        );
        let taken = get(&client, &lease_path(&ns, "leader")).await;
        assert_eq!(taken["spec"]["holderIdentity"], "b");
        assert_eq!(taken["spec"]["leaseTransitions"], 1);
        assert!(micro(&taken, "acquireTime") > micro(&first, "acquireTime"));
        b.abort();
    })
    .await;
}

#[tokio::test]
async fn a_shards_lease_reads_ready_while_renewed_and_expired_after_its_duration() {
    let real =
        real_or_skip!("a_shards_lease_reads_ready_while_renewed_and_expired_after_its_duration");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "shard-lease").await;
        let shard = Shard::new(real.client(), &ns, "ring", "shard-0", quick()).unwrap();
        let fence = shard.fence();
        let task = tokio::spawn(shard.run(std::future::pending()));
        assert!(eventually(5, || fence.borrow().is_some()).await);

        // The sharder's reading (pkg/sharding/leases): held by its own name, all three times
        // set, ready while renewTime + leaseDurationSeconds is ahead of now.
        let expiry = |lease: &Value| {
            let seconds = lease["spec"]["leaseDurationSeconds"].as_u64().unwrap();
            micro(lease, "renewTime") + Duration::from_secs(seconds)
        };
        for _ in 0..4 {
            let lease = get(&client, &lease_path(&ns, "shard-0")).await;
            assert_eq!(lease["spec"]["holderIdentity"], "shard-0");
            assert_eq!(lease["metadata"]["labels"][LABEL_CONTROLLER_RING], "ring");
            micro(&lease, "acquireTime");
            assert!(expiry(&lease) > SystemTime::now(), "ready: {lease}");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        task.abort(); // a crash: no release
        tokio::time::sleep(Duration::from_millis(3500)).await;
        let lease = get(&client, &lease_path(&ns, "shard-0")).await;
        assert_eq!(lease["spec"]["holderIdentity"], "shard-0");
        assert!(expiry(&lease) < SystemTime::now(), "expired: {lease}");
    })
    .await;
}

#[tokio::test]
async fn a_shards_informer_sees_exactly_its_objects_and_hands_a_drained_one_back() {
    let real =
        real_or_skip!("a_shards_informer_sees_exactly_its_objects_and_hands_a_drained_one_back");
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "shard-objects").await;
        // The sharder's part: label objects for two shards, one for none.
        for (name, shard) in [
            ("a", "shard-0"),
            ("b", "shard-1"),
            ("c", "shard-0"),
            ("d", ""),
        ] {
            let labels = if shard.is_empty() {
                json!({})
            } else {
                json!({shard_label("ring"): shard})
            };
            post(
                &client,
                &cm_path(&ns, None),
                configmap(name, labels, json!({})),
            )
            .await;
        }
        let shard = Shard::new(real.client(), &ns, "ring", "shard-0", quick()).unwrap();
        let assigner = shard.assigner();
        let factory = InformerFactory::with_options(
            real.client(),
            ReflectorOptions {
                label_selector: Some(shard.label_selector()),
                ..fast_options()
            },
        );
        let informer = factory.informer::<ConfigMap>(Some(&ns));
        factory.start();
        let keys = || -> BTreeSet<String> { informer.store().keys().into_iter().collect() };
        let ours: BTreeSet<String> = [format!("{ns}/a"), format!("{ns}/c")].into();
        assert!(eventually(10, || keys() == ours).await, "{:?}", keys());

        // The sharder asks for c back: the shard sees the drain, acknowledges with a patch
        // carrying the resourceVersion, and c leaves its informer.
        merge_patch(
            &client,
            &cm_path(&ns, Some("c")),
            json!({"metadata": {"labels": {drain_label("ring"): "true"}}}),
        )
        .await;
        assert!(
            eventually(10, || informer
                .store()
                .get_key(&format!("{ns}/c"))
                .is_some_and(|cm| {
                    assigner.assignment(&cm.metadata) == Assignment::Drain
                }))
            .await
        );
        let c = ConfigMap::clone(&informer.store().get_key(&format!("{ns}/c")).unwrap());
        assigner.acknowledge_drain(&client, &c).await.unwrap();
        let after = get(&client, &cm_path(&ns, Some("c"))).await;
        assert!(
            after["metadata"]["labels"]
                .get(shard_label("ring"))
                .is_none(),
            "{after}"
        );
        assert!(
            after["metadata"]["labels"]
                .get(drain_label("ring"))
                .is_none(),
            "{after}"
        );
        let only_a: BTreeSet<String> = [format!("{ns}/a")].into();
        assert!(eventually(10, || keys() == only_a).await, "{:?}", keys());

        // A stale acknowledgement (the object changed since) is a conflict, not an overwrite.
        merge_patch(
            &client,
            &cm_path(&ns, Some("a")),
            json!({"metadata": {"labels": {drain_label("ring"): "true"}}}),
        )
        .await;
        let stale = get(&client, &cm_path(&ns, Some("a"))).await;
        let stale: ConfigMap = serde_json::from_value(stale).unwrap();
        merge_patch(
            &client,
            &cm_path(&ns, Some("a")),
            json!({"data": {"k": "v"}}),
        )
        .await;
        let err = assigner
            .acknowledge_drain(&client, &stale)
            .await
            .unwrap_err();
        assert_eq!(err.http_code(), Some(409), "{err}");
        drop(shard);
    })
    .await;
}

/// The answers the simulator gives an elector, compared with the real apiserver's: a PUT
/// without resourceVersion, one with a stale resourceVersion, one on a deleted Lease (which
/// creates it, unless it names the deleted Lease's uid), a renewTime that is not a MicroTime, and a Lease's metadata (no generation).
#[tokio::test]
async fn the_simulator_answers_lease_writes_as_the_real_apiserver_does() {
    use hyper::Method;
    use informer::Client;
    let real = real_or_skip!("the_simulator_answers_lease_writes_as_the_real_apiserver_does");
    bounded(60, async {
        let sim = informer_sim::Simulator::start().await.unwrap();
        let real_client = real.client();
        let real_ns = namespace(&real_client, "lease-diff").await;
        let sim_client = Client::new(informer::Config::new(sim.url().parse().unwrap())).unwrap();
        let mut answers = Vec::new();
        for (client, ns) in [(&real_client, real_ns.as_str()), (&sim_client, "default")] {
            let collection = format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases");
            let lease = |spec: Value| {
                json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "diff"}, "spec": spec})
            };
            let body = |v: &Value| Some((bytes::Bytes::from(v.to_string()), "application/json"));
            let outcome = |r: informer::Result<Value>| match r {
                Ok(v) => (200, String::new(), v["metadata"].get("generation").cloned()),
                Err(e) => {
                    let status = e.status().cloned().unwrap_or_default();
                    (status.code, status.reason, Some(json!(status.message)))
                }
            };
            let spec = json!({"holderIdentity": "a", "leaseDurationSeconds": 15,
                              "renewTime": "2026-12-04T21:00:00.123456Z"});
            let created = client
                .request::<Value>(Method::POST, &collection, body(&lease(spec.clone())))
                .await
                .unwrap();
            let item = format!("{collection}/diff");
            let mut row = vec![outcome(Ok(created.clone()))];
            row.push(outcome(
                client
                    .request(Method::PUT, &item, body(&lease(spec.clone())))
                    .await,
            ));
            let mut stale = lease(spec.clone());
            stale["metadata"]["resourceVersion"] = json!("1");
            row.push(outcome(
                client.request(Method::PUT, &item, body(&stale)).await,
            ));
            // A PUT with a stale resourceVersion on a deleted Lease creates it (Leases allow
            // create on update).
            client
                .request::<Value>(Method::DELETE, &item, None)
                .await
                .unwrap();
            row.push(outcome(
                client.request(Method::PUT, &item, body(&stale)).await,
            ));
            // Unless the body names the deleted Lease's uid, as an elector's renewal does: the
            // uid precondition fails (the code and reason only: the message holds the uid).
            client
                .request::<Value>(Method::DELETE, &item, None)
                .await
                .unwrap();
            let (code, reason, _) = outcome(
                client
                    .request(
                        Method::PUT,
                        &item,
                        Some((bytes::Bytes::from(created.to_string()), "application/json")),
                    )
                    .await,
            );
            row.push((code, reason, None));
            let mut bad = lease(json!({"renewTime": "2026-12-04T21:00:00Z"}));
            bad["metadata"]["name"] = json!("bad");
            let bad = client
                .request::<Value>(Method::POST, &collection, body(&bad))
                .await;
            // Only the code and reason: Go's decoder error text is not reproduced word for word.
            let (code, reason, _) = outcome(bad);
            row.push((code, reason, None));
            answers.push(row);
        }
        assert_eq!(answers[0], answers[1]);
        assert_eq!(answers[0][1].0, 422);
        assert_eq!(answers[0][2].0, 409);
        assert_eq!(answers[0][3].0, 200, "created: {:?}", answers[0][3]);
        assert_eq!(answers[0][4].0, 409);
        assert_eq!(answers[0][5].0, 400);
        sim.shutdown().await;
    })
    .await;
}
