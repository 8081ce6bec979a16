//! Watch streaming throughput to raw loopback clients. The small versions run in the normal
//! suite (correctness: every event, in order); the measured versions are `#[ignore]`d and print
//! figures:
//!
//! ```text
//! cargo test --release --test sim throughput -- --ignored --nocapture
//! ```

use std::time::Instant;

use informer_sim::Simulator;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const T: std::time::Duration = std::time::Duration::from_secs(120);

/// Opens a watch and counts newline-terminated frames (chunk framing included in the bytes, so
/// this only counts; frames never contain a raw newline). Returns (frames, bytes).
async fn count_frames(addr: std::net::SocketAddr, path: String, want: u64) -> (u64, u64) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let (mut frames, mut bytes) = (0u64, 0u64);
    // Header lines end in \r\n; body frames end in }\n. Count only `}\n`.
    let mut prev = 0u8;
    while frames < want {
        let n = s.read(&mut buf).await.unwrap();
        assert!(n > 0, "stream ended after {frames} frames");
        bytes += n as u64;
        for &b in &buf[..n] {
            if b == b'\n' && prev == b'}' {
                frames += 1;
            }
            prev = b;
        }
    }
    (frames, bytes)
}

fn fill(sim: &Simulator, n: usize) {
    for i in 0..n {
        sim.create(
            "pods",
            Some("default"),
            json!({"metadata": {"name": format!("p-{i}"), "labels": {"app": "bench"}},
                   "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "nginx:1.25"}]},
                   "status": {"phase": "Running", "podIP": "10.0.0.1"}}),
        )
        .unwrap();
    }
}

async fn replay(n: usize, print: bool) {
    let sim = Simulator::builder()
        .history_max_events(n + 16)
        .start()
        .await
        .unwrap();
    let t0 = Instant::now();
    fill(&sim, n);
    let write_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let (frames, bytes) = count_frames(
        sim.addr(),
        "/api/v1/pods?watch=1&resourceVersion=1".into(),
        n as u64,
    )
    .await;
    let s = t1.elapsed().as_secs_f64();
    assert_eq!(frames, n as u64);
    let t2 = Instant::now();
    let (initial, _) = count_frames(sim.addr(), "/api/v1/pods?watch=1".into(), n as u64).await;
    let initial_s = t2.elapsed().as_secs_f64();
    assert_eq!(initial, n as u64);
    let t3 = Instant::now();
    let list_bytes = {
        let mut st = TcpStream::connect(sim.addr()).await.unwrap();
        st.write_all(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        st.read_to_end(&mut out).await.unwrap();
        out.len()
    };
    let list_s = t3.elapsed().as_secs_f64();
    if print {
        println!(
            "synthetic ADDED (watch without RV) for {n} objects: {initial_s:.3}s = {:.0} events/s; LIST of {n} objects ({:.1} MB): {list_s:.3}s",
            n as f64 / initial_s,
            list_bytes as f64 / 1e6
        );
        println!(
            "writes: {n} creates in {write_s:.3}s = {:.0}/s; replay to 1 raw client: {frames} events, {:.1} MB in {s:.3}s = {:.0} events/s, {:.0} MB/s",
            n as f64 / write_s,
            bytes as f64 / 1e6,
            frames as f64 / s,
            bytes as f64 / 1e6 / s
        );
    }
}

async fn fanout(n: usize, watchers: usize, print: bool) {
    let sim = Simulator::builder()
        .watch_buffer(n + 16)
        .start()
        .await
        .unwrap();
    let rv = sim.resource_version();
    let mut tasks = Vec::new();
    for _ in 0..watchers {
        let path = format!("/api/v1/pods?watch=1&resourceVersion={rv}");
        tasks.push(tokio::spawn(count_frames(sim.addr(), path, n as u64)));
    }
    // Let the watches register (an event each proves it would be cleaner; a short pause is
    // enough because the watch replays from `rv` anyway: nothing can be missed).
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let t0 = Instant::now();
    let api = sim.api();
    let writer = tokio::task::spawn_blocking(move || {
        for i in 0..n {
            api.create(
                "pods",
                Some("default"),
                json!({"metadata": {"name": format!("p-{i}")}, "spec": {"containers": []}}),
            )
            .unwrap();
        }
    });
    writer.await.unwrap();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap().0;
    }
    let s = t0.elapsed().as_secs_f64();
    assert_eq!(total, (n * watchers) as u64);
    if print {
        println!(
            "live fan-out: {n} writes to {watchers} raw watchers = {total} deliveries in {s:.3}s = {:.0} deliveries/s",
            total as f64 / s
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_delivers_every_event_in_order() {
    timeout(T, replay(5_000, false)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_delivers_every_event_to_every_watcher() {
    timeout(T, fanout(5_000, 4, false)).await.unwrap();
}

fn churn_rate() {
    use informer_sim::churn::{Churn, ChurnConfig};
    let rt = tokio::runtime::Handle::current();
    let sim = rt.block_on(Simulator::start()).unwrap();
    let t0 = Instant::now();
    let mut churn = Churn::new(
        sim.api(),
        ChurnConfig {
            services: 100,
            pods_per_service: 20,
            ..Default::default()
        },
    )
    .unwrap();
    let setup = t0.elapsed().as_secs_f64();
    let rv0 = sim.resource_version();
    let t1 = Instant::now();
    for _ in 0..5_000 {
        churn.step().unwrap();
    }
    let s = t1.elapsed().as_secs_f64();
    let writes = sim.resource_version() - rv0;
    println!(
        "churn: setup of 100 services x 20 pods in {setup:.3}s; 5000 steps in {s:.3}s = {:.0} steps/s, {writes} writes = {:.0} writes/s",
        5000.0 / s,
        writes as f64 / s
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; run with --release --ignored --nocapture"]
async fn measure_throughput() {
    timeout(T * 5, async {
        tokio::task::spawn_blocking(churn_rate).await.unwrap();
        replay(200_000, true).await;
        fanout(200_000, 4, true).await;
    })
    .await
    .unwrap();
}
