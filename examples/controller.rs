//! A controller on the embedded simulator: each Service is reconciled from its EndpointSlices,
//! which a churning workload keeps rewriting (scaling, rolling updates, readiness flips, slice
//! repacking). Runs for a bounded time, prints a summary and exits by itself.
//!
//! Run: `cargo run --release --example controller -- [--seconds 5]`
//!
//! The wiring is kube-rs's `Controller` (client-go's sample-controller): the Service informer
//! enqueues each Service's ref, the EndpointSlice informer the ref of each slice's controlling
//! owner (its Service); four workers reconcile a Service, read from the Service informer's
//! store, with a context holding the slice store, whose index gives its slices; nothing is read
//! from the apiserver. A reconcile
//! * fails when an address is in two of the service's slices at once, which the churn does
//!   briefly while it moves an endpoint between slices: the error is logged (set
//!   `RUST_LOG`-style filtering in your own subscriber; this example installs none) and the
//!   default error policy retries it with the queue's per-key backoff;
//! * asks to be requeued after 500 ms while some endpoint is not ready (a stand-in for polling
//!   something outside the cluster);
//! * is done otherwise. A deleted Service is not reconciled (counted as absent): cleanup is what
//!   finalizers are for.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use informer::workqueue::{Action, Controller, ObjectRef};
use informer::{Client, Config, EndpointSlice, InformerFactory, Service, Store};
use informer_sim::Simulator;
use informer_sim::churn::{Churn, ChurnConfig};

/// The slice index: `namespace/service` from the `kubernetes.io/service-name` label.
const BY_SERVICE: &str = "by-service";
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
const WORKERS: usize = 4;
const CHURN_PER_SECOND: f64 = 100.0;

fn seconds() -> Result<u64, String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(5),
        [flag, n] if flag == "--seconds" => n
            .parse()
            .map_err(|_| format!("--seconds takes a whole number, not {n:?}")),
        _ => Err("usage: controller [--seconds N]".into()),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds = seconds()?;
    let churn_config = ChurnConfig {
        services: 8,
        pods_per_service: 10,
        max_endpoints_per_slice: 4,
        ..Default::default()
    };
    let sim = Simulator::start().await?;
    let churn = Churn::new(sim.api(), churn_config.clone())?;
    let running = churn.run(CHURN_PER_SECOND);
    println!(
        "controller: simulator at {}, {} services x {} pods, churn {CHURN_PER_SECOND} steps/s, \
         {WORKERS} workers, {seconds} s",
        sim.url(),
        churn_config.services,
        churn_config.pods_per_service
    );

    let factory = InformerFactory::new(Client::new(Config::new(sim.url().parse()?))?);
    let services = factory.informer::<Service>(None);
    let slices = factory.informer::<EndpointSlice>(None);
    slices.store().add_index(
        BY_SERVICE,
        Arc::new(|slice: &EndpointSlice| {
            let namespace = &slice.metadata.namespace;
            slice
                .metadata
                .labels
                .get(SERVICE_NAME_LABEL)
                .map(|service| format!("{namespace}/{service}"))
                .into_iter()
                .collect()
        }),
    )?;
    let controller = Controller::new(&services, WORKERS).owns(&slices);
    let queue = controller.queue().clone();
    factory.start();

    /// What every reconcile shares: the slices' store (its index finds a Service's slices).
    struct Context {
        slices: Arc<Store<EndpointSlice>>,
    }
    async fn reconcile(service: Arc<Service>, ctx: Arc<Context>) -> Result<Action, String> {
        let key = ObjectRef::from_obj(&*service).to_string();
        let slices = ctx
            .slices
            .by_index(BY_SERVICE, &key)
            .map_err(|e| e.to_string())?;
        let mut addresses = HashSet::new();
        let mut not_ready = 0;
        for endpoint in slices.iter().flat_map(|slice| &slice.endpoints) {
            for address in &endpoint.addresses {
                if !addresses.insert(address) {
                    return Err(format!("{key}: {address} is in two slices"));
                }
            }
            if endpoint.conditions.ready == Some(false) {
                not_ready += 1;
            }
        }
        Ok(if not_ready > 0 {
            Action::RequeueAfter(Duration::from_millis(500))
        } else {
            Action::Done
        })
    }
    let ctx = Arc::new(Context {
        slices: Arc::clone(slices.store()),
    });

    // One progress line a second, from the queue's metrics.
    let progress = {
        let queue = queue.clone();
        tokio::spawn(async move {
            let start = Instant::now();
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            tick.tick().await;
            loop {
                tick.tick().await;
                let m = queue.metrics();
                println!(
                    "[{:>3.0}s] adds={} depth={} in_flight={} delayed={} retries={} work={}",
                    start.elapsed().as_secs_f64(),
                    m.adds,
                    m.depth,
                    m.in_flight,
                    m.delayed,
                    m.retries,
                    m.work_duration.count
                );
            }
        })
    };

    let start = Instant::now();
    let summary = controller
        .run(
            reconcile,
            ctx,
            tokio::time::sleep(Duration::from_secs(seconds)),
        )
        .await;
    let ran = start.elapsed();
    progress.abort();
    let churn = running.stop().await?;
    let m = queue.metrics();

    println!("summary");
    println!(
        "  ran               {:.1} s, {} churn steps, {} slices and {} services in the stores",
        ran.as_secs_f64(),
        churn.steps(),
        slices.store().len(),
        services.store().len()
    );
    println!(
        "  reconciles        {} ({} done, {} requeued after 500 ms, {} errors retried with backoff, \
         {} panics); {} deleted Services not reconciled",
        summary.done + summary.requeued_after + summary.failed + summary.panicked,
        summary.done,
        summary.requeued_after,
        summary.failed,
        summary.panicked,
        summary.absent
    );
    println!(
        "  queue             {} adds, {} retries, depth {} and {} in flight at the end",
        m.adds, m.retries, m.depth, m.in_flight
    );
    println!(
        "  queue latency     mean {:?}, max {:?}",
        m.queue_latency.mean(),
        m.queue_latency.max
    );
    println!(
        "  work duration     mean {:?}, max {:?}",
        m.work_duration.mean(),
        m.work_duration.max
    );
    sim.shutdown().await;
    Ok(())
}
