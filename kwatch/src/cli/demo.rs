//! `kwatch demo`: what the library does, in seconds, with no cluster.
//!
//! It starts the embedded simulator with a churning workload (rolling updates, scaling, readiness
//! flips), mirrors its Services, EndpointSlices and Pods with three shared informers, runs the
//! library's [`ServiceDiscovery`] on those same informers (the services' instances, states and revisions
//! shown are its snapshots, read exactly as `kwatch instances` reads them), times discovery
//! lookups on a reader thread, injects a fault every two seconds (dropped watches, 410s, 429s,
//! history compaction, 503s), and shows all of it about once a second: a live view on a terminal,
//! one plain line per second otherwise. At the end (Ctrl-C, or `--duration`, 10 s by
//! default when stdout is not a terminal) it stops the churn, lets the informers converge and
//! compares every store with the simulator's state: the summary ends with `divergences: N`, and
//! the exit status is 1 unless N is 0.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use informer::discovery::{DiscoveryMetrics, DiscoveryOptions, ServiceDiscovery, WatchScope};
use informer::informer::{InformerFactory, InformerMetrics};
use informer::model::Metadata;
use informer::reflector::{BackoffOptions, ReflectorOptions};
use informer::{Client, Config, EndpointSlice, Informer, Object, Pod, Service};
use informer_sim::Simulator;
use informer_sim::churn::{Churn, ChurnConfig};

use super::args::DemoArgs;
use super::instances;
use super::latency::{Histogram, human};
use super::output::{Out, table_lines};
use super::{CliError, CliResult};

/// How long the demo runs when stdout is not a terminal and `--duration` is not given.
const DEFAULT_NON_TTY_DURATION: Duration = Duration::from_secs(10);
/// A fault every this often.
const FAULT_PERIOD: Duration = Duration::from_secs(2);
/// How long the informers get to converge once the churn stops.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(20);
const NAMESPACE: &str = "default";

/// The faults the demo injects, in turn.
const FAULTS: &[&str] = &[
    "watch drop",
    "410 Gone in the watch",
    "429 throttling",
    "history compaction",
    "503 unavailable",
];

fn inject(sim: &Simulator, which: usize) -> &'static str {
    let f = sim.faults();
    match which % FAULTS.len() {
        0 => f.close_all_watches(),
        1 => f.inject_410(),
        2 => {
            f.fail_next(3, 429);
            f.close_all_watches();
        }
        3 => {
            f.compact_history();
            f.close_all_watches();
        }
        _ => {
            f.fail_next(2, 503);
            f.close_all_watches();
        }
    }
    FAULTS[which % FAULTS.len()]
}

/// The three informers that mirror the simulator, and discovery on them.
struct Mirror {
    services: Informer<Service>,
    slices: Informer<EndpointSlice>,
    pods: Informer<Pod>,
    /// Cluster-wide, on the same factory: its Service and EndpointSlice informers are the two
    /// above, so the demo watches each resource once.
    discovery: ServiceDiscovery,
}

impl Mirror {
    fn start(client: Client) -> Mirror {
        let options = ReflectorOptions {
            // Recover within a second from the demo's faults.
            backoff: BackoffOptions {
                initial: Duration::from_millis(50),
                max: Duration::from_secs(1),
                ..Default::default()
            },
            idle_timeout: Some(Duration::from_secs(5)),
            min_watch_timeout: Duration::from_secs(60),
            ..Default::default()
        };
        let factory = Arc::new(InformerFactory::with_options(client.clone(), options));
        let services = factory.informer::<Service>(None);
        let slices = factory.informer::<EndpointSlice>(None);
        let pods = factory.informer::<Pod>(None);
        let discovery = ServiceDiscovery::with_factory(
            client,
            factory.clone(),
            DiscoveryOptions {
                scope: WatchScope::ClusterWide,
                ..instances::discovery_options()
            },
        );
        // ServiceDiscovery's handlers go on the informers before they list.
        discovery.has_synced(NAMESPACE);
        factory.start();
        Mirror {
            services,
            slices,
            pods,
            discovery,
        }
    }

    /// Every Service's view, as `kwatch instances` shows it, sorted (svc-2 before svc-10).
    fn views(&self) -> Vec<instances::View> {
        let mut services: Vec<Arc<Service>> = self.services.store().list();
        services.sort_by_key(|s| {
            let m = s.meta();
            (m.namespace.clone(), m.name.len(), m.name.clone())
        });
        services
            .iter()
            .map(|s| {
                let m = s.meta();
                let ports = instances::port_names(Some(s), None);
                instances::lookup(&self.discovery, &m.namespace, &m.name, &ports)
            })
            .collect()
    }

    /// Waits (woken by the informers, no polling) until every informer and discovery synced, at
    /// most `timeout`; returns whether they did.
    async fn wait_for_sync(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let left = || deadline.saturating_duration_since(Instant::now());
        self.services.wait_for_sync(left()).await.is_ok()
            && self.slices.wait_for_sync(left()).await.is_ok()
            && self.pods.wait_for_sync(left()).await.is_ok()
            && self.discovery.wait_for_sync(NAMESPACE, left()).await
    }

    fn metrics(&self) -> [InformerMetrics; 3] {
        [
            self.services.metrics(),
            self.slices.metrics(),
            self.pods.metrics(),
        ]
    }

    /// No handler has a notification waiting.
    fn handlers_idle(&self) -> bool {
        self.metrics()
            .iter()
            .all(|m| m.handlers.iter().all(|(_, h)| h.depth == 0))
    }

    fn stop(&self) {
        self.services.stop();
        self.slices.stop();
        self.pods.stop();
    }
}

/// Sums over the three informers.
#[derive(Clone, Copy, Default)]
struct Totals {
    events: u64,
    coalesced: u64,
    lists: u64,
    objects: usize,
}

fn totals(m: &[InformerMetrics]) -> Totals {
    m.iter().fold(Totals::default(), |t, m| Totals {
        events: t.events + m.reflector.events,
        coalesced: t.coalesced + m.fifo.coalesced,
        lists: t.lists + m.reflector.lists,
        objects: t.objects + m.objects,
    })
}

/// Lookup latencies, filled by a reader thread.
#[derive(Default)]
struct Lookups {
    store_get: Histogram,
    instances: Histogram,
}

/// Reads the caches in a loop, the way a proxy or a load balancer would on each request: one
/// `Store::get` of a Service and one `ServiceDiscovery::instances` of its port.
fn spawn_reader(
    mirror: &Mirror,
    stop: Arc<AtomicBool>,
    into: Arc<Mutex<Lookups>>,
) -> std::thread::JoinHandle<()> {
    let service_store = mirror.services.store().clone();
    let discovery = mirror.discovery.clone();
    // The Services and ports of the workload as synced (the churn changes Pods and slices only).
    let targets: Vec<(String, String, String)> = service_store
        .list()
        .iter()
        .flat_map(|s| {
            let m = s.meta();
            instances::port_names(Some(s), None)
                .into_iter()
                .map(|p| (m.namespace.clone(), m.name.clone(), p))
                .collect::<Vec<_>>()
        })
        .collect();
    std::thread::Builder::new()
        .name("demo-reader".into())
        .spawn(move || {
            if targets.is_empty() {
                return;
            }
            let mut i = 0;
            // Relaxed: a stop flag; the reader publishes nothing through it (the join orders the rest).
            while !stop.load(Ordering::Relaxed) {
                let mut batch = Lookups::default();
                for _ in 0..2000 {
                    let (namespace, name, port) = &targets[i % targets.len()];
                    i += 1;
                    let t = Instant::now();
                    std::hint::black_box(service_store.get(namespace, name));
                    batch.store_get.record(t.elapsed());
                    let t = Instant::now();
                    std::hint::black_box(discovery.instances(namespace, name, port));
                    batch.instances.record(t.elapsed());
                }
                {
                    let mut total = into.lock().unwrap();
                    total.store_get.merge(&batch.store_get);
                    total.instances.merge(&batch.instances);
                }
                // Leave the cores to the simulator and the informers.
                std::thread::sleep(Duration::from_millis(2));
            }
        })
        .expect("spawn the demo's reader thread")
}

/// One row per service (name, ready/total instances, revision, state), from discovery.
fn service_rows(mirror: &Mirror) -> (Vec<Vec<String>>, usize, usize) {
    let (mut ready_all, mut total_all) = (0, 0);
    let rows = mirror
        .views()
        .into_iter()
        .map(|v| {
            let ready = v.ready();
            ready_all += ready;
            total_all += v.instances.len();
            vec![
                v.service,
                format!("{ready}/{}", v.instances.len()),
                v.revision.to_string(),
                format!("{:?}", v.state),
            ]
        })
        .collect();
    (rows, ready_all, total_all)
}

/// What the view shows each second.
struct Tick<'a> {
    elapsed: Duration,
    duration: Option<Duration>,
    events_per_sec: f64,
    now: Totals,
    relists: u64,
    faults: usize,
    last_fault: Option<&'a str>,
    lookups: &'a Lookups,
    discovery: DiscoveryMetrics,
}

fn render_terminal(url: &str, mirror: &Mirror, tick: &Tick) -> String {
    let (rows, ready, total) = service_rows(mirror);
    let mut s = String::from("\x1b[H\x1b[2J");
    let limit = match tick.duration {
        Some(d) => format!(" / {:.0}s", d.as_secs_f64()),
        None => String::new(),
    };
    s.push_str(&format!(
        "kwatch demo: informers mirroring a simulated cluster at {url}   t={:.0}s{limit}   (Ctrl-C: stop and summarize)\n\n",
        tick.elapsed.as_secs_f64()
    ));
    let shown = rows.len().min(16);
    for line in table_lines(
        &["SERVICE", "READY/TOTAL", "REVISION", "STATE"],
        &rows[..shown],
    ) {
        s.push_str(&line);
        s.push('\n');
    }
    if rows.len() > shown {
        s.push_str(&format!("... and {} more\n", rows.len() - shown));
    }
    s.push_str(&format!(
        "\nready instances   {ready}/{total}\n\
         events/s          {:.0}   (watch events received by 3 reflectors; {} in all)\n\
         objects in store  {}   (services {}, endpointslices {}, pods {})\n\
         coalesced         {}   (events merged in the fifo before reaching the store)\n\
         lookups           {}   store get p50 {} p99 {} | instances p50 {} p99 {}\n\
         discovery         {} snapshots published, {} apiserver reads (every lookup served from the caches)\n\
         relists           {}   faults survived {}{}\n",
        tick.events_per_sec,
        tick.now.events,
        tick.now.objects,
        mirror.services.store().len(),
        mirror.slices.store().len(),
        mirror.pods.store().len(),
        tick.now.coalesced,
        tick.lookups.store_get.count(),
        human(tick.lookups.store_get.quantile(0.5)),
        human(tick.lookups.store_get.quantile(0.99)),
        human(tick.lookups.instances.quantile(0.5)),
        human(tick.lookups.instances.quantile(0.99)),
        tick.discovery.published,
        tick.discovery.apiserver_reads,
        tick.relists,
        tick.faults,
        match tick.last_fault {
            Some(f) => format!(" (last: {f})"),
            None => String::new(),
        },
    ));
    s
}

fn render_line(mirror: &Mirror, tick: &Tick) -> String {
    let (rows, ready, total) = service_rows(mirror);
    format!(
        "[{:>3.0}s] services={} ready={ready}/{total} events/s={:.0} objects={} coalesced={} \
         lookup p50={} p99={} instances p50={} p99={} relists={} faults={}",
        tick.elapsed.as_secs_f64(),
        rows.len(),
        tick.events_per_sec,
        tick.now.objects,
        tick.now.coalesced,
        human(tick.lookups.store_get.quantile(0.5)),
        human(tick.lookups.store_get.quantile(0.99)),
        human(tick.lookups.instances.quantile(0.5)),
        human(tick.lookups.instances.quantile(0.99)),
        tick.relists,
        tick.faults,
    )
}

/// key -> resourceVersion of a resource in the simulator.
fn sim_state(sim: &Simulator, resource: &str) -> CliResult<BTreeMap<String, String>> {
    let list = sim
        .list(resource, None)
        .map_err(|e| CliError::Runtime(format!("simulator list {resource}: {e:?}")))?;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    Ok(items
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            let (ns, name) = (
                m["namespace"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap_or(""),
            );
            let key = if ns.is_empty() {
                name.to_owned()
            } else {
                format!("{ns}/{name}")
            };
            (key, m["resourceVersion"].as_str().unwrap_or("").to_owned())
        })
        .collect())
}

fn store_state<T: Object + Clone>(informer: &Informer<T>) -> BTreeMap<String, String> {
    informer
        .store()
        .list()
        .iter()
        .map(|o| (o.meta().key(), o.meta().resource_version().to_owned()))
        .collect()
}

/// Keys missing on one side, extra on the other, or at another resourceVersion.
fn diff(want: &BTreeMap<String, String>, have: &BTreeMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (k, rv) in want {
        match have.get(k) {
            None => out.push(format!("{k}: missing from the store")),
            Some(h) if h != rv => out.push(format!("{k}: store at {h}, server at {rv}")),
            Some(_) => {}
        }
    }
    out.extend(
        have.keys()
            .filter(|k| !want.contains_key(*k))
            .map(|k| format!("{k}: in the store, deleted on the server")),
    );
    out
}

fn divergences(sim: &Simulator, mirror: &Mirror) -> CliResult<Vec<String>> {
    let mut out = diff(&sim_state(sim, "services")?, &store_state(&mirror.services));
    out.extend(diff(
        &sim_state(sim, "endpointslices.discovery.k8s.io")?,
        &store_state(&mirror.slices),
    ));
    out.extend(diff(&sim_state(sim, "pods")?, &store_state(&mirror.pods)));
    Ok(out)
}

pub async fn run(args: DemoArgs) -> CliResult {
    let tty = std::io::stdout().is_terminal();
    let duration = args.duration.or((!tty).then_some(DEFAULT_NON_TTY_DURATION));
    let sim = Simulator::builder()
        .bookmark_interval(Duration::from_secs(1))
        .seed(1)
        .start()
        .await?;
    let churn = Churn::new(
        sim.api(),
        ChurnConfig {
            services: args.services,
            pods_per_service: args.pods,
            namespace: NAMESPACE.into(),
            ..Default::default()
        },
    )
    .map_err(|e| CliError::Runtime(format!("creating the workload: {e:?}")))?;
    let client = Client::new(Config::new(
        sim.url().parse().expect("the simulator's URL is valid"),
    ))?;
    let mut out = Out::stdout();
    out.line(&format!(
        "kwatch demo: simulator at {}, {} services x {} pods, churn {} steps/s, a fault every {} s",
        sim.url(),
        args.services,
        args.pods,
        args.rate,
        FAULT_PERIOD.as_secs()
    ))?;
    out.flush()?;

    let started = Instant::now();
    let mirror = Mirror::start(client);
    if !mirror.wait_for_sync(super::connect::SYNC_TIMEOUT).await {
        return Err(CliError::Runtime(
            "the demo's informers did not sync".into(),
        ));
    }
    let sync_time = started.elapsed();
    if !tty {
        out.line(&format!(
            "synced {} objects in {}",
            totals(&mirror.metrics()).objects,
            human(sync_time)
        ))?;
        out.flush()?;
    }

    let rv_before = sim.resource_version();
    let running = churn.run(args.rate);
    let stop_reader = Arc::new(AtomicBool::new(false));
    let lookups = Arc::new(Mutex::new(Lookups::default()));
    let reader = spawn_reader(&mirror, stop_reader.clone(), lookups.clone());

    let initial = totals(&mirror.metrics());
    let run_started = Instant::now();
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    let mut last = (Instant::now(), initial);
    let mut next_fault = Instant::now() + FAULT_PERIOD;
    let (mut faults, mut last_fault) = (0usize, None);
    let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
    let interrupted = loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = &mut ctrl_c => break true,
        }
        if Instant::now() >= next_fault {
            last_fault = Some(inject(&sim, faults));
            faults += 1;
            next_fault += FAULT_PERIOD;
        }
        let now = totals(&mirror.metrics());
        let dt = last.0.elapsed().as_secs_f64().max(1e-3);
        let lookups_now = lookups.lock().unwrap();
        let tick = Tick {
            elapsed: run_started.elapsed(),
            duration,
            events_per_sec: (now.events - last.1.events) as f64 / dt,
            now,
            relists: now.lists.saturating_sub(initial.lists),
            faults,
            last_fault,
            lookups: &lookups_now,
            discovery: mirror.discovery.metrics(),
        };
        let text = if tty {
            render_terminal(sim.url(), &mirror, &tick)
        } else {
            render_line(&mirror, &tick)
        };
        drop(lookups_now);
        // Our own screen drawing (cursor home, clear); server text in it is escaped by the table.
        out.raw_line(&text)?;
        out.flush()?;
        last = (Instant::now(), now);
        if duration.is_some_and(|d| run_started.elapsed() + Duration::from_millis(50) >= d) {
            break false;
        }
    };
    let run_time = run_started.elapsed();

    // Stop the churn and the faults, then let the informers catch up.
    let churn = running
        .stop()
        .await
        .map_err(|e| CliError::Runtime(format!("the workload failed: {e:?}")))?;
    sim.faults().clear();
    // Relaxed: a stop flag; `join` below orders everything the reader did.
    stop_reader.store(true, Ordering::Relaxed);
    let _ = reader.join();
    let writes = sim.resource_version() - rv_before;
    let stopped = Instant::now();
    let mut diverging = divergences(&sim, &mirror)?;
    // Converged: the stores equal the simulator, and discovery's handlers have taken in every
    // notification (so the summary's instances are the final ones).
    while (!diverging.is_empty() || !mirror.handlers_idle()) && stopped.elapsed() < CONVERGE_TIMEOUT
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
        diverging = divergences(&sim, &mirror)?;
    }
    let converged_in = stopped.elapsed();
    let end = totals(&mirror.metrics());
    mirror.stop();

    let lookups = lookups.lock().unwrap();
    let events = end.events - initial.events;
    let (_, ready, total) = service_rows(&mirror);
    let discovery = mirror.discovery.metrics();
    let summary = [
        format!("summary{}", if interrupted { " (interrupted)" } else { "" }),
        format!(
            "  ran               {:.1} s: {} churn steps, {writes} writes to the simulator",
            run_time.as_secs_f64(),
            churn.steps()
        ),
        format!("  initial sync      {}", human(sync_time)),
        format!(
            "  watch events      {events} received ({:.0}/s), {} coalesced in the fifo",
            events as f64 / run_time.as_secs_f64().max(1e-3),
            end.coalesced - initial.coalesced
        ),
        format!(
            "  objects           {} in the stores; {ready}/{total} instances ready",
            end.objects
        ),
        format!(
            "  lookups           {}: store get p50 {} p99 {}; instances p50 {} p99 {}",
            lookups.store_get.count(),
            human(lookups.store_get.quantile(0.5)),
            human(lookups.store_get.quantile(0.99)),
            human(lookups.instances.quantile(0.5)),
            human(lookups.instances.quantile(0.99)),
        ),
        format!(
            "  discovery         {} snapshots published, {} apiserver reads",
            discovery.published, discovery.apiserver_reads
        ),
        format!(
            "  faults survived   {faults} ({}), {} relists",
            FAULTS[..faults.min(FAULTS.len())].join(", "),
            end.lists.saturating_sub(initial.lists)
        ),
        format!(
            "  converged         {} after the churn stopped",
            human(converged_in)
        ),
        format!("divergences: {}", diverging.len()),
    ];
    for line in summary {
        out.line(&line)?;
    }
    out.flush()?;
    if diverging.is_empty() {
        Ok(())
    } else {
        for d in diverging.iter().take(10) {
            eprintln!("  {d}");
        }
        Err(CliError::Runtime(format!(
            "{} objects differ between the informers and the simulator",
            diverging.len()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_reports_every_kind_of_divergence() {
        let want: BTreeMap<String, String> = [("a", "1"), ("b", "2"), ("c", "3")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let mut have = want.clone();
        assert!(diff(&want, &have).is_empty());
        have.remove("a");
        have.insert("b".into(), "1".into());
        have.insert("d".into(), "4".into());
        assert_eq!(diff(&want, &have).len(), 3);
    }
}
