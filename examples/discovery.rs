//! A discovery consumer: picks an instance per "request" from the current snapshot (zone-local
//! round robin) and reacts to changes from a subscription, against an embedded simulator whose
//! workload churns. Runs for a few seconds and exits by itself.
//!
//! `cargo run --example discovery`

use std::time::Duration;

use informer::discovery::{DiscoveryOptions, ServiceDiscovery, ServiceState};
use informer::{Client, Config};
use informer_sim::Simulator;
use informer_sim::churn::{Churn, ChurnConfig};

const NS: &str = "default";
const RUN_FOR: Duration = Duration::from_secs(4);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // An apiserver with 3 Services whose Pods scale, roll and flip readiness ~50 times a second.
    let sim = Simulator::start().await?;
    let churn = Churn::new(
        sim.api(),
        ChurnConfig {
            services: 3,
            pods_per_service: 6,
            max_endpoints_per_slice: 4,
            ..Default::default()
        },
    )?;
    let running = churn.run(50.0);

    let client = Client::new(Config::new(sim.url().parse()?))?;
    let discovery = ServiceDiscovery::new(client, DiscoveryOptions::default());

    // Before the cache is warm, one (shared, rate-limited) read from the apiserver.
    let first = discovery.instances_or_fetch(NS, "svc-0", "http").await?;
    println!(
        "cold start: {:?}, {} instances ({:?})",
        first.state,
        first.instances.len(),
        first.freshness
    );
    discovery.wait_for_sync(NS, Duration::from_secs(10)).await;

    // React to changes: log what was added and removed.
    let mut sub = discovery.subscribe(NS, "svc-0", "http");
    let watcher = tokio::spawn(async move {
        while let Some(change) = sub.changed().await {
            let s = &change.snapshot;
            println!(
                "rev {:>4} {:?}: {} usable{}  +{:?} -{:?}",
                s.revision,
                s.state,
                s.usable().count(),
                if s.terminating_fallback {
                    " (terminating fallback)"
                } else {
                    ""
                },
                change
                    .diff
                    .added
                    .iter()
                    .map(|i| i.socket_addr())
                    .collect::<Vec<_>>(),
                change
                    .diff
                    .removed
                    .iter()
                    .map(|i| i.socket_addr())
                    .collect::<Vec<_>>(),
            );
        }
    });

    // Pick instances: every 100 ms a "request" goes to the next usable instance, preferring zone-a.
    let deadline = tokio::time::Instant::now() + RUN_FOR;
    let mut next = 0usize;
    let mut picked = 0u32;
    while tokio::time::Instant::now() < deadline {
        let snapshot = discovery.instances(NS, "svc-0", "http"); // a map lookup, no request
        if snapshot.state == ServiceState::Ready {
            let local: Vec<_> = snapshot
                .usable()
                .filter(|i| i.zone.as_deref() == Some("zone-a"))
                .collect();
            let pool: Vec<_> = if local.is_empty() {
                snapshot.usable().collect()
            } else {
                local
            };
            let target = pool[next % pool.len()];
            next += 1;
            picked += 1;
            if picked.is_multiple_of(10) {
                println!(
                    "request {picked} -> {} ({}, zone {})",
                    target.socket_addr(),
                    target.pod.as_deref().unwrap_or("-"),
                    target.zone.as_deref().unwrap_or("-")
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    watcher.abort();
    running.stop().await?;
    println!("{:?}", discovery.metrics());
    sim.shutdown().await;
    Ok(())
}
