//! `kube-rs-scale --server URL --n N [--per-ns 10] [--linger S]`
//!
//! One `kube::Client` (kube 5.0, plain http, no kubeconfig), N
//! `reflector(writer, watcher(Api::<ConfigMap>::namespaced(client, ns-i), Config::default()))`
//! streams, each spawned as a task on `#[tokio::main]` (the multi-thread runtime) and counting
//! events: the way kube-rs's own examples run many reflectors. Measures what `informer-scale`
//! measures at the same points: the time until every stream has yielded `InitDone` (its initial
//! list is in its store and every `InitApply` was counted), then, for one new ConfigMap per
//! namespace POSTed from a thread of its own, the time from the last response to the last stream
//! that saw its namespace's one; threads, CPU, VmRSS/VmHWM and sockets. One JSON line on stdout.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::{reflector, watcher};
use kube::{Api, Client, ResourceExt};
use scale_probe::{Report, Timeline, EXTRA, PER_NS};

#[tokio::main]
async fn main() {
    let url = scale_probe::arg("--server").expect("--server URL");
    let n: usize = scale_probe::arg("--n").expect("--n N").parse().unwrap();
    let per_ns = scale_probe::arg("--per-ns")
        .map(|v| v.parse().unwrap())
        .unwrap_or(PER_NS);
    let base = scale_probe::snap();

    let clock = Arc::new(Timeline::start(n));
    let events = Arc::new(AtomicU64::new(0));
    let synced = Arc::new(AtomicU64::new(0));
    let extra = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let per = Arc::new(Mutex::new(Vec::<f64>::with_capacity(n)));
    let client = Client::try_from(kube::Config::new(url.parse().expect("--server URL"))).unwrap();
    let mut readers = Vec::with_capacity(n);
    for i in 0..n {
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), &scale_probe::ns_name(i));
        let (reader, writer) = reflector::store::<ConfigMap>();
        readers.push(reader);
        let (ev, sy, ex, er) = (
            events.clone(),
            synced.clone(),
            extra.clone(),
            errors.clone(),
        );
        let (per, clock) = (per.clone(), clock.clone());
        tokio::spawn(async move {
            let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()));
            let mut stream = std::pin::pin!(stream);
            let mut done = false;
            while let Some(e) = stream.next().await {
                match e {
                    Ok(watcher::Event::Init) => {}
                    Ok(watcher::Event::InitApply(_)) => {
                        ev.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(watcher::Event::InitDone) => {
                        if !done {
                            done = true;
                            per.lock().unwrap().push(clock.now_s());
                            sy.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(watcher::Event::Apply(o)) => {
                        ev.fetch_add(1, Ordering::Relaxed);
                        if o.name_any() == EXTRA {
                            clock.saw_extra(&o.namespace().unwrap_or_default());
                            ex.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Ok(watcher::Event::Delete(_)) => {
                        ev.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(err) => {
                        if er.fetch_add(1, Ordering::Relaxed) < 5 {
                            eprintln!("kube-rs-scale: watcher error: {err}");
                        }
                    }
                }
            }
        });
    }
    let setup_s = clock.now_s();
    while synced.load(Ordering::Relaxed) < n as u64 {
        if clock.now_s() > 600.0 {
            panic!("sync: {} of {n}", synced.load(Ordering::Relaxed));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The last InitDone, not this poll's wake-up (informer-scale's waits report likewise).
    let per = std::mem::take(&mut *per.lock().unwrap());
    let sync_s = per.iter().cloned().fold(0.0, f64::max);
    let at_sync = scale_probe::snap();
    let initial = events.load(Ordering::Relaxed);
    assert_eq!(initial, (n * per_ns) as u64, "initial objects");

    let fan_out_start = clock.now_s();
    let poster = scale_probe::post_extra_in_background(&url, n);
    while extra.load(Ordering::Relaxed) < n as u64 {
        if clock.now_s() - fan_out_start > 600.0 {
            panic!("fan-out: {} of {n}", extra.load(Ordering::Relaxed));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let posted = poster.join().unwrap();
    let end = scale_probe::snap();
    let report = Report {
        client: "kube-rs",
        n,
        handlers: 1,
        setup_s,
        sync_s,
        post_start_s: clock.at_s(posted.sent[0]),
        last_post_s: clock.at_s(*posted.sent.last().unwrap()),
        post_end_s: clock.at_s(posted.done),
        last_seen_s: clock.last_seen_s(),
        worst_lag: clock.worst_lag_s(&posted.sent),
        median_lag_s: clock.median_lag_s(&posted.sent),
        objects: readers.iter().map(|r| r.state().len()).sum(),
        events: events.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        sync_pct: scale_probe::percentiles_json(per),
        base,
        at_sync,
        end,
    };
    println!("{}", report.json());
    // --linger S: wait S seconds, then count sockets again (do the extra connections idle out?).
    if let Some(secs) = scale_probe::arg("--linger").map(|v| v.parse::<u64>().unwrap()) {
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let (fds, est) = scale_probe::sockets();
        eprintln!("kube-rs-scale: after {secs} s more: {fds} socket fds, {est} TCP established");
    }
    std::process::exit(0);
}
