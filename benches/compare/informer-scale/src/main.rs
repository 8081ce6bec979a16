//! `informer-scale --server URL --n N [--handlers H] [--per-ns 10]`
//!
//! One `informer::Client`, N `Informer<ConfigMap>` on `Api::namespaced(ns-i)` with H counting
//! handlers each, on `#[tokio::main]` (the multi-thread runtime, one worker per core). Only the
//! library's public API as a user would write it. Measures: the time until every handler has synced
//! (`wait_for_handler_sync`: its initial list delivered), then, for one new ConfigMap per namespace
//! POSTed from a thread of its own on its own connection, the time from the last response to the
//! last handler that saw its namespace's one; threads, CPU, VmRSS/VmHWM and sockets of this process
//! before, at sync and at the end. One JSON line on stdout (see `scale_probe::Report`).
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use informer::{Api, Client, Config, ConfigMap, HandlerFns, Informer};
use scale_probe::{Report, Timeline, EXTRA, PER_NS};

#[tokio::main]
async fn main() {
    let url = scale_probe::arg("--server").expect("--server URL");
    let n: usize = scale_probe::arg("--n").expect("--n N").parse().unwrap();
    let h: usize = scale_probe::arg("--handlers")
        .map(|v| v.parse().unwrap())
        .unwrap_or(1);
    let per_ns = scale_probe::arg("--per-ns")
        .map(|v| v.parse().unwrap())
        .unwrap_or(PER_NS);
    let base = scale_probe::snap();

    let clock = Arc::new(Timeline::start(n));
    let events = Arc::new(AtomicU64::new(0));
    let extra = Arc::new(AtomicU64::new(0));
    let client = Client::new(Config::new(url.parse().expect("--server URL"))).unwrap();
    let mut informers = Vec::with_capacity(n);
    for i in 0..n {
        let inf: Informer<ConfigMap> = Informer::new(
            Api::namespaced(client.clone(), &scale_probe::ns_name(i)),
            Default::default(),
        );
        let mut ids = Vec::with_capacity(h);
        for _ in 0..h {
            let (ev, ex, clock) = (events.clone(), extra.clone(), clock.clone());
            let (ev2, ev3) = (events.clone(), events.clone());
            ids.push(
                inf.add_handler(
                    HandlerFns::<ConfigMap>::new()
                        .on_add(move |cm, _| {
                            ev.fetch_add(1, Ordering::Relaxed);
                            if cm.metadata.name == EXTRA {
                                clock.saw_extra(&cm.metadata.namespace);
                                ex.fetch_add(1, Ordering::Relaxed);
                            }
                        })
                        .on_update(move |_, _| {
                            ev2.fetch_add(1, Ordering::Relaxed);
                        })
                        .on_delete(move |_| {
                            ev3.fetch_add(1, Ordering::Relaxed);
                        }),
                ),
            );
        }
        informers.push((inf, ids));
    }
    for (inf, _) in &informers {
        inf.start();
    }
    let setup_s = clock.now_s();
    // Each informer's sync time (all its handlers synced), awaited concurrently.
    let waits: Vec<_> = informers
        .iter()
        .map(|(inf, ids)| {
            let (inf, ids, clock) = (inf.clone(), ids.clone(), clock.clone());
            tokio::spawn(async move {
                for id in ids {
                    let synced = inf
                        .wait_for_handler_sync(id, Duration::from_secs(600))
                        .await;
                    assert!(synced, "a handler did not sync in 600 s");
                }
                clock.now_s()
            })
        })
        .collect();
    let mut per = Vec::with_capacity(n);
    for w in waits {
        per.push(w.await.unwrap());
    }
    // The last handler's sync, as seen by its waiter (kube-rs-scale reports its last InitDone).
    let sync_s = per.iter().cloned().fold(0.0, f64::max);
    let at_sync = scale_probe::snap();
    let initial = events.load(Ordering::Relaxed);
    assert_eq!(initial, (n * h * per_ns) as u64, "initial adds");

    let want = (n * h) as u64;
    let fan_out_start = clock.now_s();
    let poster = scale_probe::post_extra_in_background(&url, n);
    while extra.load(Ordering::Relaxed) < want {
        if clock.now_s() - fan_out_start > 600.0 {
            panic!("fan-out: {} of {want}", extra.load(Ordering::Relaxed));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let posted = poster.join().unwrap();
    let end = scale_probe::snap();
    let report = Report {
        client: "informer",
        n,
        handlers: h,
        setup_s,
        sync_s,
        post_start_s: clock.at_s(posted.sent[0]),
        last_post_s: clock.at_s(*posted.sent.last().unwrap()),
        post_end_s: clock.at_s(posted.done),
        last_seen_s: clock.last_seen_s(),
        worst_lag: clock.worst_lag_s(&posted.sent),
        median_lag_s: clock.median_lag_s(&posted.sent),
        objects: informers.iter().map(|(i, _)| i.store().len()).sum(),
        events: events.load(Ordering::Relaxed),
        errors: 0,
        sync_pct: scale_probe::percentiles_json(per),
        base,
        at_sync,
        end,
    };
    println!("{}", report.json());
    // Exit without stopping the informers: teardown is not what is measured.
    std::process::exit(0);
}
