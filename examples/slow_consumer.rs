//! Memory while a consumer falls behind: 1M raw watch events over 10k Pods pushed into the
//! [`DeltaFifo`] as fast as an async producer can, while the consumer first stalls, then spends
//! about 2 µs on each key it pops. Every 100k events it prints the process's resident memory, the
//! pending keys and the undrained inputs; at the end the peak and the decodes coalescing saved.
//!
//! The claim it measures: memory follows the keys (pending entries ≤ keys, undrained inputs ≤ the
//! inbox capacity), not the number of events. The producer makes each event as it pushes it, so
//! nothing but the fifo and the store can hold them.
//!
//! Run: `cargo run --release --example slow_consumer -- [--events 1000000] [--keys 10000]`
//! (resident memory is read from `/proc/self/status`, so Linux only prints it).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use informer::Pod;
use informer::fifo::{DeltaFifo, RawDelta};
use informer::internals::watch::{EventDecoder, RawEvent};
use informer::store::Writer;

fn main() {
    let (events, keys) = args();
    let store = Arc::new(Writer::<Pod>::new());
    let (fifo, mut consumer) = DeltaFifo::new(store.clone());
    let rss_start = proc_status_kib("VmRSS:");

    // Relaxed: a progress counter for the report, nothing is published through it.
    let pushed = Arc::new(AtomicU64::new(0));
    let producer = {
        let (fifo, pushed) = (fifo.clone(), pushed.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .expect("a current-thread runtime");
            rt.block_on(async {
                let mut dec = EventDecoder::<Pod>::new();
                for i in 0..events {
                    fifo.push(raw_event(&mut dec, i % keys, i + 1)).await;
                    pushed.store(i + 1, Ordering::Relaxed);
                }
            });
            fifo.close();
        })
    };

    // Stalled: the producer fills the inbox and waits there.
    std::thread::sleep(Duration::from_millis(200));
    println!(
        "stalled consumer: producer at {} of {events} events (inbox capacity {})",
        pushed.load(Ordering::Relaxed),
        fifo.capacity()
    );

    let started = Instant::now();
    let (mut max_depth, mut max_backlog, mut next_report) = (0, 0, 100_000u64);
    while let Some(p) = consumer.blocking_pop() {
        for d in p.deltas() {
            store.apply(d);
        }
        drop(p);
        spin(Duration::from_micros(2));
        let m = fifo.metrics();
        max_depth = max_depth.max(m.depth);
        max_backlog = max_backlog.max(m.backlog);
        let done = pushed.load(Ordering::Relaxed);
        if done >= next_report {
            println!(
                "{done:>8} events pushed: VmRSS {} KiB, pending keys {}, undrained inputs {}",
                show(proc_status_kib("VmRSS:")),
                m.depth,
                m.backlog
            );
            next_report += 100_000;
        }
    }
    producer.join().expect("the producer");
    let m = fifo.metrics();
    println!(
        "{events} events over {keys} keys in {:.2} s: at most {max_depth} keys pending and \
         {max_backlog} inputs undrained (capacity {}); {} decoded, {} decodes saved; \
         VmRSS {} KiB at start, peak (VmHWM) {} KiB; store holds {}",
        started.elapsed().as_secs_f64(),
        fifo.capacity(),
        m.decoded,
        m.decodes_saved,
        show(rss_start),
        show(proc_status_kib("VmHWM:")),
        store.len()
    );
}

/// A MODIFIED event for `bench/pod-{key}` at resourceVersion `rv`, as the apiserver writes it.
fn raw_event(dec: &mut EventDecoder<Pod>, key: u64, rv: u64) -> RawDelta {
    dec.push(format!(
        "{{\"type\":\"MODIFIED\",\"object\":{{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{{\"name\":\"pod-{key}\",\"namespace\":\"bench\",\"uid\":\"u{key}\",\"resourceVersion\":\"{rv}\",\"labels\":{{\"app\":\"web\"}}}},\"spec\":{{\"nodeName\":\"node-{key}\",\"containers\":[{{\"name\":\"c\",\"image\":\"nginx:1.25\"}}]}}}}}}\n"
    ).as_bytes());
    match dec.next_raw() {
        Ok(Some(RawEvent::Modified(o))) => RawDelta::Modified(o),
        other => panic!("the example's own event did not frame: {other:?}"),
    }
}

/// Spins for about `d`: a consumer with work of its own per key.
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A `/proc/self/status` field in KiB, where the system has one.
fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn show(kib: Option<u64>) -> String {
    kib.map_or_else(|| "?".to_owned(), |k| k.to_string())
}

fn args() -> (u64, u64) {
    let (mut events, mut keys) = (1_000_000, 10_000);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let value = it.next().and_then(|v| v.parse().ok());
        match (a.as_str(), value) {
            ("--events", Some(v)) => events = v,
            ("--keys", Some(v)) if v > 0 => keys = v,
            _ => {
                eprintln!("usage: slow_consumer [--events N] [--keys K]");
                std::process::exit(2);
            }
        }
    }
    (events, keys)
}
