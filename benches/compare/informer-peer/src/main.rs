//! informer-peer: this repository's library (typed Informer) measured against wire-server, with the
//! same definitions as kube-rs-peer and client-go-peer:
//!   sync_seconds  from start until wait_for_sync returns (the initial list is in the store);
//!   watch_seconds from then until the store reflects the last of M watch events (the last
//!                 event's key holds its resourceVersion), i.e. every event was taken in and
//!                 whatever survived coalescing was applied;
//! then Store::get over every key in shuffled order, batches of 64, ~2M lookups.
//! `--mode dynamic`: the same stream through a dynamic informer (`Informer::dynamic`, objects as
//! `JsonObject`s, what CRD informers and kwatch use); the line's client is `informer-dyn`.
//! `--mode k8s-openapi`: the same stream into `k8s-openapi` 0.29's types (every field of the API,
//! as kube-rs decodes them), through the typed Informer; the line's client is `informer-k8s`.
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use informer::model::Metadata;
use informer::{Api, Client, Config, Endpoints, EndpointSlice, Informer, JsonObject, Object, Pod, Resource};

const LOOKUP_BATCH: usize = 64;
const LOOKUP_TARGET: usize = 2_000_000;

fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn shuffle<T>(v: &mut [T]) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..v.len()).rev() {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        v.swap(i, (r % (i as u64 + 1)) as usize);
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn run<T: Object + informer::Resource + Clone>(api: Api<T>, client_name: &str, events: u64, last_key: (String, String), last_rv: String) -> String {
    measure(Informer::new(api, Default::default()), client_name, events, last_key, last_rv).await
}

async fn measure<T: Object + Clone>(inf: Informer<T>, client_name: &str, events: u64, last_key: (String, String), last_rv: String) -> String {
    let t0 = Instant::now();
    inf.start();
    inf.wait_for_sync(Duration::from_secs(120)).await.expect("no sync in 120 s");
    let synced = Instant::now();
    let store: Arc<informer::Store<T>> = inf.store().clone();
    let objects = store.len();
    let rss_sync = proc_status_kib("VmRSS:");
    let deadline = synced + Duration::from_secs(280);
    loop {
        if let Some(o) = store.get(&last_key.0, &last_key.1) {
            if o.meta().resource_version() == last_rv {
                break;
            }
        }
        if Instant::now() > deadline {
            eprintln!("informer-peer: last event never reached the store; metrics {:?}", inf.metrics().fifo);
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let done = Instant::now();
    let m = inf.metrics();
    inf.stop();
    let rss_after = proc_status_kib("VmRSS:");

    let mut keys: Vec<(String, String)> = store
        .list()
        .iter()
        .map(|o| (o.meta().namespace().to_owned(), o.meta().name().to_owned()))
        .collect();
    shuffle(&mut keys);
    let passes = if keys.is_empty() { 0 } else { (LOOKUP_TARGET / keys.len()).clamp(1, 50) };
    let mut samples = Vec::new();
    let mut hits = 0usize;
    for _ in 0..passes {
        for batch in keys.chunks(LOOKUP_BATCH) {
            let t = Instant::now();
            for (ns, name) in batch {
                hits += black_box(store.get(black_box(ns), black_box(name))).is_some() as usize;
            }
            samples.push(t.elapsed().as_nanos() as f64 / batch.len() as f64);
        }
    }
    assert_eq!(hits, passes * keys.len(), "Store::get missed");
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let sync_s = (synced - t0).as_secs_f64();
    let watch_s = (done - synced).as_secs_f64();
    eprintln!(
        "informer-peer: {objects} objects at sync; fifo received {} coalesced {} dropped_stale {} decodes_saved {}; applied {}; VmRSS {rss_sync} KiB at sync, {rss_after} KiB after",
        m.fifo.received, m.fifo.coalesced, m.fifo.dropped_stale, m.fifo.decodes_saved, m.applied
    );
    format!(
        r#"{{"client":"{client_name}","objects":{objects},"events":{events},"sync_seconds":{sync_s:.6},"watch_seconds":{watch_s:.6},"watch_events_per_sec":{:.0},"lookup_ns_p50":{:.1},"lookup_ns_p99":{:.1},"peak_rss_kib":{}}}"#,
        events as f64 / watch_s,
        pct(&samples, 0.5),
        pct(&samples, 0.99),
        proc_status_kib("VmHWM:")
    )
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (mut server, mut kind, mut events, mut ns, mut dump, mut mode) =
        (String::new(), "endpoints".to_string(), 0u64, "default".to_string(), String::new(), "typed".to_string());
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_default();
        match a.as_str() {
            "--server" => server = v,
            "--kind" => kind = v,
            "--events" => events = v.parse().expect("--events N"),
            "--namespace" => ns = v,
            // the watch body written by `wire-server --dump-watch`: its last line names the last key and RV
            "--watch-dump" => dump = v,
            "--mode" => mode = v,
            _ => panic!("usage: informer-peer --server URL --kind K --events M --watch-dump FILE [--mode typed|json|dynamic|k8s-openapi]"),
        }
    }
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(300));
        eprintln!("informer-peer: not finished after 300 s");
        std::process::exit(3);
    });
    // Only the last line is needed: read the file's tail, not the whole watch body (the kit's
    // copy of this peer read all of it, 220 MB on the default stream, and kept it for the whole
    // run, which its peak RSS then counted as the library's).
    let v: serde_json_lite::Last = {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = std::fs::File::open(&dump).expect("open --watch-dump");
        let len = f.metadata().expect("stat --watch-dump").len();
        f.seek(SeekFrom::Start(len.saturating_sub(1 << 20))).expect("seek --watch-dump");
        let mut tail = Vec::new();
        f.read_to_end(&mut tail).expect("read --watch-dump");
        let last = tail.trim_ascii_end().rsplit(|b| *b == b'\n').next().unwrap();
        serde_json_lite::parse(last)
    };
    // `--mode json`: the typed informer kept on the JSON wire (`Config::protobuf = false`); every
    // other mode asks for protobuf where the kind reads it (the library's default).
    let mut config = Config::new(server.parse().unwrap());
    config.protobuf = mode != "json";
    let client = Client::new(config).unwrap();
    let key = (v.namespace, v.name);
    if mode == "dynamic" {
        let resource = match kind.as_str() {
            "endpoints" => Endpoints::api_resource(),
            "endpointslices" => EndpointSlice::api_resource(),
            "pods" => Pod::api_resource(),
            k => panic!("unknown kind {k}"),
        };
        let inf: Informer<JsonObject> = Informer::dynamic(client, &resource, Some(&ns), Default::default());
        println!("{}", measure(inf, "informer-dyn", events, key, v.rv).await);
        return;
    }
    if mode == "k8s-openapi" {
        use k8s_openapi::api::{core::v1 as core, discovery::v1 as discovery};
        let c = "informer-k8s";
        let out = match kind.as_str() {
            "endpoints" => run(Api::<core::Endpoints>::namespaced(client, &ns), c, events, key, v.rv).await,
            "endpointslices" => run(Api::<discovery::EndpointSlice>::namespaced(client, &ns), c, events, key, v.rv).await,
            "pods" => run(Api::<core::Pod>::namespaced(client, &ns), c, events, key, v.rv).await,
            k => panic!("unknown kind {k}"),
        };
        println!("{out}");
        return;
    }
    let c = if mode == "json" { "informer-json" } else { "informer" };
    let out = match kind.as_str() {
        "endpoints" => run(Api::<Endpoints>::namespaced(client, &ns), c, events, key, v.rv).await,
        "endpointslices" => run(Api::<EndpointSlice>::namespaced(client, &ns), c, events, key, v.rv).await,
        "pods" => run(Api::<Pod>::namespaced(client, &ns), c, events, key, v.rv).await,
        k => panic!("unknown kind {k}"),
    };
    println!("{out}");
}

/// Just enough to read name, namespace and resourceVersion out of the last event line.
mod serde_json_lite {
    pub struct Last {
        pub name: String,
        pub namespace: String,
        pub rv: String,
    }
    fn field(s: &str, key: &str) -> String {
        let pat = format!("\"{key}\":\"");
        let i = s.find(&pat).unwrap_or_else(|| panic!("no {key} in the last event")) + pat.len();
        s[i..i + s[i..].find('"').unwrap()].to_string()
    }
    pub fn parse(line: &[u8]) -> Last {
        let s = std::str::from_utf8(line).unwrap();
        let meta = &s[s.find("\"metadata\":").unwrap()..];
        Last { name: field(meta, "name"), namespace: field(meta, "namespace"), rv: field(meta, "resourceVersion") }
    }
}
