//! End to end over loopback from the embedded simulator: time to sync N Pods, events/s into the
//! store, heap per stored object against the objects' JSON size, and the relist peak against the
//! steady store.
//!
//! Run: `cargo run --release --example informer_e2e -- [--objects 100000] [--events 100000]`
//!
//! With `--metadata`: a metadata-only informer (`Informer<PartialObjectMetadata>`, what service
//! discovery keeps of Pods) syncs the same Pods instead, and only its sync is measured. With
//! `--json`, the client asks for JSON only (`Config::protobuf = false`).
//!
//! Heap figures come from a counting global allocator (live bytes). The simulator lives in the same
//! process but on its own runtime, whose threads (and the example's calls into it) are not counted,
//! so the figures are the informer's alone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use informer::reflector::{BackoffOptions, ReflectorOptions};
use informer::{Api, Client, Config, Informer, Object, PartialObjectMetadata, Pod, Resource};
use informer_sim::Simulator;

/// Counts live heap bytes and the peak since the last reset.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread works for the simulator: its allocations are not the informer's.
    static SIMULATOR: Cell<bool> = const { Cell::new(false) };
}

fn counted() -> bool {
    !SIMULATOR.try_with(Cell::get).unwrap_or(true)
}

/// Runs `f` (a call into the simulator) without counting its allocations.
fn on_simulator<R>(f: impl FnOnce() -> R) -> R {
    SIMULATOR.with(|s| s.set(true));
    let r = f();
    SIMULATOR.with(|s| s.set(false));
    r
}

// SAFETY: defers every allocation to `System` unchanged; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if counted() {
            // Relaxed: statistics only.
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if counted() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !counted() {
        } else if new_size >= layout.size() {
            let live = LIVE.fetch_add(new_size - layout.size(), Ordering::Relaxed) + new_size
                - layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn main() {
    // The simulator gets its own runtime, whose threads are marked as not counted.
    let sim_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_start(|| SIMULATOR.with(|s| s.set(true)))
        .enable_all()
        .build()
        .unwrap();
    let sim = on_simulator(|| {
        sim_runtime.block_on(async {
            Simulator::builder()
                .watch_buffer(arg("--events", 100_000) + 1000)
                .history_max_events(arg("--events", 100_000) + arg("--objects", 100_000) + 1000)
                .start()
                .await
                .unwrap()
        })
    });
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(&sim));
    on_simulator(|| drop(sim));
}

/// Starts `informer`, waits for its sync and prints its time and the cache's heap; returns the
/// heap.
async fn sync<T: Object + Clone>(
    informer: &Informer<T>,
    objects: usize,
    json_bytes: usize,
) -> usize {
    let base = live();
    let started = Instant::now();
    informer.start();
    until("sync", Duration::from_secs(300), || informer.has_synced()).await;
    let sync = started.elapsed();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let steady = live().wrapping_sub(base);
    println!(
        "sync: {objects} objects in {:.2} s ({:.0} objects/s)",
        sync.as_secs_f64(),
        objects as f64 / sync.as_secs_f64()
    );
    println!(
        "heap: {:.1} MB for the cache = {} B per object = {:.2}x its JSON",
        steady as f64 / 1e6,
        steady / objects,
        steady as f64 / json_bytes as f64
    );
    steady
}

async fn run(sim: &Simulator) {
    let objects = arg("--objects", 100_000);
    let events = arg("--events", 100_000);
    let pod_json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fixtures/pod-managedfields.json"
        ))
        .unwrap(),
    )
    .unwrap();

    let mut json_bytes = 0usize;
    for i in 0..objects {
        let mut p = pod_json.clone();
        p["metadata"]["name"] = format!("web-{i:06}").into();
        p["metadata"]["namespace"] = format!("ns-{}", i % 20).into();
        for k in ["uid", "resourceVersion", "creationTimestamp"] {
            p["metadata"].as_object_mut().unwrap().remove(k);
        }
        let created = on_simulator(|| sim.create("pods", None, p).unwrap());
        json_bytes += on_simulator(|| serde_json::to_vec(&created).unwrap().len());
    }
    println!(
        "simulator: {objects} pods, {:.1} MB of JSON ({} B per object)",
        json_bytes as f64 / 1e6,
        json_bytes / objects
    );

    let mut config = Config::new(sim.url().parse().unwrap());
    config.protobuf = !std::env::args().any(|a| a == "--json");
    let client = Client::new(config).unwrap();
    let options = ReflectorOptions {
        backoff: BackoffOptions {
            initial: Duration::from_millis(10),
            ..Default::default()
        },
        ..Default::default()
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    if std::env::args().any(|a| a == "--metadata") {
        let api: Api<PartialObjectMetadata> = Api::all_with(client, Pod::api_resource());
        let informer = Informer::new(api, options);
        sync(&informer, objects, json_bytes).await;
        informer.stop();
        return;
    }
    let informer: Informer<Pod> = Informer::new(Api::all(client), options);
    let steady = sync(&informer, objects, json_bytes).await;

    // Events per second: build a backlog while the watch is stalled, then release it at once.
    sim.faults().stall_watches();
    for i in 0..events {
        let name = format!("web-{:06}", i % objects);
        let ns = format!("ns-{}", (i % objects) % 20);
        sim.patch(
            "pods",
            Some(&ns),
            &name,
            &serde_json::json!({"metadata": {"labels": {"rev": i.to_string()}}}),
        )
        .unwrap();
    }
    let target = sim.resource_version().to_string();
    let received_before = informer.health().events;
    let t0 = Instant::now();
    on_simulator(|| sim.faults().resume_watches());
    until("events applied", Duration::from_secs(300), || {
        informer.store().last_applied_resource_version() == target
    })
    .await;
    let took = t0.elapsed();
    let received = informer.health().events - received_before;
    let m = informer.metrics();
    println!(
        "watch: {received} events in {:.2} s = {:.0} events/s into the store ({} coalesced away)",
        took.as_secs_f64(),
        received as f64 / took.as_secs_f64(),
        m.fifo.coalesced
    );

    // The relist peak: expire the watch so the reflector lists again, and watch the heap. The
    // simulator's history is compacted first (that frees the simulator's copy of the events), so
    // what grows from here on is the relist's own working memory.
    on_simulator(|| sim.compact());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = live();
    PEAK.store(before, Ordering::Relaxed);
    let lists = informer.health().lists;
    on_simulator(|| sim.faults().inject_410());
    until("relist", Duration::from_secs(300), || {
        informer.health().lists > lists
    })
    .await;
    until("relist applied", Duration::from_secs(60), || {
        informer.metrics().fifo.depth == 0
    })
    .await;
    let peak = PEAK.load(Ordering::Relaxed);
    let extra = peak.wrapping_sub(before);
    eprintln!(
        "(live heap: before the relist {:.1} MB, peak {:.1} MB, after {:.1} MB; relist kind: {})",
        before as f64 / 1e6,
        peak as f64 / 1e6,
        live() as f64 / 1e6,
        if informer.health().watches > 0 {
            "streaming list or LIST"
        } else {
            "?"
        }
    );
    println!(
        "relist: {:.1} MB of working memory on top of a {:.1} MB cache = peak {:.2}x the steady cache",
        extra as f64 / 1e6,
        steady as f64 / 1e6,
        (steady + extra) as f64 / steady as f64
    );
    informer.stop();
}
