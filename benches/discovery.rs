//! Discovery: `instances()` on a synced cache (criterion mean, then per-call p50/p99 from batches
//! of 64 calls timed with `Instant`, over 200 tracked Service ports), and end to end, from a slice
//! write on the simulator to the subscriber's notification over loopback HTTP (p50/p99).
//!
//! `cargo bench --bench discovery -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use informer::discovery::{DiscoveryOptions, ServiceDiscovery, ServiceState};
use informer::reflector::ReflectorOptions;
use informer::{Client, Config};
use informer_sim::Simulator;
use informer_sim::churn::{Churn, ChurnConfig};
use serde_json::json;

const NS: &str = "default";
const SERVICES: usize = 200;
const BATCH: usize = 64;

/// A simulator with `SERVICES` churn-made Services and a discovery synced on all of them.
fn setup(rt: &tokio::runtime::Runtime) -> (Simulator, ServiceDiscovery) {
    rt.block_on(async {
        let sim = Simulator::start().await.unwrap();
        Churn::new(
            sim.api(),
            ChurnConfig {
                services: SERVICES,
                pods_per_service: 10,
                ..Default::default()
            },
        )
        .unwrap();
        let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
        let d = ServiceDiscovery::new(
            client,
            DiscoveryOptions {
                reflector: ReflectorOptions::default(),
                ..Default::default()
            },
        );
        assert!(d.wait_for_sync(NS, Duration::from_secs(30)).await);
        for i in 0..SERVICES {
            assert_eq!(
                d.instances(NS, &format!("svc-{i}"), "http").state,
                ServiceState::Ready
            );
        }
        (sim, d)
    })
}

fn names() -> Vec<String> {
    (0..SERVICES)
        .map(|i| format!("svc-{}", (i * 7) % SERVICES))
        .collect()
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (sim, d) = setup(&rt);
    let names = names();
    let mut i = 0;
    c.bench_function("discovery/instances (synced, 200 services)", |b| {
        b.iter(|| {
            i = (i + 1) % names.len();
            black_box(d.instances(NS, &names[i], "http"))
        })
    });
    drop(d);
    rt.block_on(sim.shutdown());
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn instances_report(rt: &tokio::runtime::Runtime) {
    let (sim, d) = setup(rt);
    let names = names();
    let mut per_call = Vec::with_capacity(20_000);
    for round in 0..20_000 {
        let start = Instant::now();
        for k in 0..BATCH {
            black_box(d.instances(NS, &names[(round + k) % names.len()], "http"));
        }
        per_call.push(start.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    per_call.sort_by(f64::total_cmp);
    println!(
        "discovery instances(): p50 {:.1} ns, p99 {:.1} ns per call (batches of {BATCH})",
        percentile(&per_call, 0.5),
        percentile(&per_call, 0.99)
    );
    drop(d);
    rt.block_on(sim.shutdown());
}

fn notify_report(rt: &tokio::runtime::Runtime) {
    rt.block_on(async {
        let sim = Simulator::start().await.unwrap();
        sim.create(
            "services",
            Some(NS),
            json!({"metadata": {"name": "web"}, "spec": {"ports": [{"name": "http", "port": 80}]}}),
        )
        .unwrap();
        let slice = |n: usize| {
            let endpoints: Vec<_> = (0..=n % 4)
                .map(|i| json!({"addresses": [format!("10.0.0.{}", i + 1)]}))
                .collect();
            json!({"metadata": {"name": "web-a", "labels": {"kubernetes.io/service-name": "web"}},
                   "addressType": "IPv4", "endpoints": endpoints, "ports": [{"name": "http", "port": 8080}]})
        };
        sim.create("endpointslices", Some(NS), slice(0)).unwrap();
        let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
        let d = ServiceDiscovery::new(client, DiscoveryOptions::default());
        assert!(d.wait_for_sync(NS, Duration::from_secs(30)).await);
        let mut sub = d.subscribe(NS, "web", "http");
        sub.changed().await.unwrap();
        let mut lat = Vec::new();
        for n in 1..=500 {
            let start = Instant::now();
            sim.replace("endpointslices", Some(NS), "web-a", slice(n))
                .unwrap();
            tokio::time::timeout(Duration::from_secs(5), sub.changed())
                .await
                .expect("notified")
                .unwrap();
            lat.push(start.elapsed().as_secs_f64() * 1e6);
        }
        lat.sort_by(f64::total_cmp);
        println!(
            "discovery slice write -> subscriber notified: p50 {:.0} us, p99 {:.0} us ({} changes, loopback HTTP)",
            percentile(&lat, 0.5),
            percentile(&lat, 0.99),
            lat.len()
        );
        drop(d);
        sim.shutdown().await;
    });
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // Skip the custom reports when cargo test runs benches in test mode.
    if !std::env::args().any(|a| a == "--test" || a == "--list") {
        let rt = tokio::runtime::Runtime::new().unwrap();
        instances_report(&rt);
        notify_report(&rt);
    }
}
