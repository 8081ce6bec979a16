//! The churn generator: controller-like invariants after every step, determinism from the seed,
//! and background running observed through a real watch.

use std::collections::{BTreeMap, BTreeSet};

use crate::support::raw_client::{Conn, T};
use informer_sim::Simulator;
use informer_sim::churn::{Action, Churn, ChurnConfig};
use serde_json::Value;
use tokio::time::timeout;

fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().unwrap().clone()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// Checks every invariant of the module docs against the simulator's current state.
fn check_invariants(sim: &Simulator, max_per_slice: usize) {
    let pods = items(&sim.list("pods", Some("default")).unwrap());
    let slices = items(&sim.list("endpointslices", Some("default")).unwrap());
    let eps = items(&sim.list("endpoints", Some("default")).unwrap());
    let svcs = items(&sim.list("services", Some("default")).unwrap());
    for svc in &svcs {
        let name = s(&svc["metadata"]["name"]);
        let svc_pods: BTreeMap<&str, &Value> = pods
            .iter()
            .filter(|p| s(&p["metadata"]["labels"]["app"]) == name)
            .map(|p| (s(&p["metadata"]["name"]), p))
            .collect();
        let ready = |p: &Value| {
            p["metadata"].get("deletionTimestamp").is_none()
                && p["status"]["conditions"][0]["status"] == "True"
        };
        // Endpoints: ready addresses are exactly the ready, non-terminating pods.
        let ep = eps
            .iter()
            .find(|e| s(&e["metadata"]["name"]) == name)
            .unwrap();
        let addrs: BTreeSet<&str> = ep["subsets"][0]["addresses"]
            .as_array()
            .map(|a| a.iter().map(|x| s(&x["targetRef"]["name"])).collect())
            .unwrap_or_default();
        let want: BTreeSet<&str> = svc_pods
            .iter()
            .filter(|(_, p)| ready(p))
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(addrs, want, "endpoints of {name}");
        // Slices: every pod exactly once, at most max per slice, labels and conditions right.
        let mut seen = BTreeMap::new();
        for sl in slices
            .iter()
            .filter(|sl| s(&sl["metadata"]["labels"]["kubernetes.io/service-name"]) == name)
        {
            assert_eq!(
                sl["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
                "endpointslice-controller.k8s.io"
            );
            assert_eq!(sl["addressType"], "IPv4");
            let eps = sl["endpoints"].as_array().unwrap();
            assert!(
                !eps.is_empty() && eps.len() <= max_per_slice,
                "slice size {}",
                eps.len()
            );
            for e in eps {
                let pod_name = s(&e["targetRef"]["name"]);
                *seen.entry(pod_name.to_string()).or_insert(0) += 1;
                let p = svc_pods
                    .get(pod_name)
                    .unwrap_or_else(|| panic!("slice endpoint {pod_name} has no pod"));
                assert_eq!(e["addresses"][0], p["status"]["podIP"]);
                assert_eq!(e["conditions"]["ready"], ready(p));
                assert_eq!(
                    e["conditions"]["terminating"],
                    p["metadata"].get("deletionTimestamp").is_some()
                );
                assert_eq!(e["nodeName"], p["spec"]["nodeName"]);
                assert!(s(&e["zone"]).starts_with("zone-"));
                assert!(s(&e["addresses"][0]).starts_with("10."));
            }
        }
        let pods_seen: BTreeSet<&str> = seen.keys().map(String::as_str).collect();
        assert_eq!(
            pods_seen,
            svc_pods.keys().copied().collect(),
            "slices of {name}"
        );
        assert!(
            seen.values().all(|c| *c == 1),
            "an endpoint in two slices after a step: {seen:?}"
        );
    }
}

fn cfg(seed: u64) -> ChurnConfig {
    ChurnConfig {
        services: 3,
        pods_per_service: 8,
        max_endpoints_per_slice: 3,
        seed,
        ..Default::default()
    }
}

#[tokio::test]
async fn invariants_hold_after_every_step() {
    timeout(T * 6, async {
        let sim = Simulator::start().await.unwrap();
        let mut churn = Churn::new(sim.api(), cfg(5)).unwrap();
        check_invariants(&sim, 3);
        let mut seen = BTreeSet::new();
        for _ in 0..300 {
            seen.insert(format!("{:?}", churn.step().unwrap()));
            check_invariants(&sim, 3);
        }
        for a in [
            Action::ScaleUp,
            Action::ScaleDown,
            Action::RollingUpdate,
            Action::ReadinessFlip,
            Action::Repack,
        ] {
            assert!(
                seen.contains(&format!("{a:?}")),
                "{a:?} never happened in 300 steps: {seen:?}"
            );
        }
    })
    .await
    .unwrap();
}

async fn run_and_fingerprint(seed: u64) -> (u64, Vec<String>) {
    let sim = Simulator::builder().seed(42).start().await.unwrap();
    let mut churn = Churn::new(sim.api(), cfg(seed)).unwrap();
    for _ in 0..100 {
        churn.step().unwrap();
    }
    let mut names = Vec::new();
    for r in ["pods", "endpointslices"] {
        for i in items(&sim.list(r, None).unwrap()) {
            names.push(format!(
                "{}:{}:{}",
                s(&i["metadata"]["name"]),
                s(&i["metadata"]["uid"]),
                i["status"]["podIP"]
            ));
        }
    }
    (sim.resource_version(), names)
}

#[tokio::test]
async fn same_seed_same_history() {
    timeout(T * 6, async {
        let a = run_and_fingerprint(9).await;
        let b = run_and_fingerprint(9).await;
        let c = run_and_fingerprint(10).await;
        assert_eq!(a, b);
        assert_ne!(a, c);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn background_churn_is_visible_to_watchers() {
    timeout(T * 6, async {
        let sim = Simulator::start().await.unwrap();
        let churn = Churn::new(sim.api(), cfg(3)).unwrap();
        let rv = sim.resource_version();
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("/apis/discovery.k8s.io/v1/endpointslices?watch=1&resourceVersion={rv}"),
            &[],
            None,
        )
        .await;
        let running = churn.run(500.0);
        let mut n = 0;
        let mut last = rv;
        while n < 20 {
            let e = w.event().await.unwrap();
            let erv: u64 = e["object"]["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(erv > last, "RVs increase along the stream");
            last = erv;
            assert_eq!(e["object"]["kind"], "EndpointSlice");
            n += 1;
        }
        let churn = running.stop().await.unwrap();
        assert!(churn.steps() > 0);
        check_invariants(&sim, 3);
    })
    .await
    .unwrap();
}
