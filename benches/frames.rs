//! Watch-stream throughput: framing (MB/s) and typed decode (events/s) on 200k-event EndpointSlice
//! and Pod streams, beside the naive baseline measured in the same run: split on `\n` and
//! `serde_json::from_slice` into the same event type. `typed` and `metadata-only` are the
//! [`EventDecoder`] (what a watch uses); `typed-framed-then-decoded` the two steps it fuses;
//! `raw-as-the-reflector-reads` its `next_raw` (objects left as JSON, metadata read), which is what
//! the reflector does before the fifo coalesces.
//!
//! Run: `cargo bench --bench frames`

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use informer::internals::frame::FrameDecoder;
use informer::internals::watch::{EventDecoder, RawEvent, WatchEvent, decode_event};
use informer::{EndpointSlice, Object, ObjectMeta, PartialObjectMetadata, Pod};
use serde::Deserialize;

const EVENTS: usize = 200_000;
/// Bytes handed to the decoder at a time, as hyper hands over received data.
const CHUNK: usize = 16 * 1024;

/// A stream of `EVENTS` compact watch events built from a real object, with distinct names and
/// increasing resourceVersions (every 10th a MODIFIED, every 50th a DELETED).
fn stream(fixture: &str) -> Vec<u8> {
    let path = format!("{}/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(path).unwrap();
    let line = text.lines().next().unwrap();
    let mut object: serde_json::Value = serde_json::from_str(line).unwrap();
    if object.get("object").is_some() {
        object = object["object"].take();
    }
    let mut out = Vec::with_capacity(EVENTS * (line.len() + 64));
    for i in 0..EVENTS {
        object["metadata"]["name"] = format!("obj-{i:06}").into();
        object["metadata"]["resourceVersion"] = (1_000_000 + i).to_string().into();
        let ty = match i {
            i if i % 50 == 49 => "DELETED",
            i if i % 10 == 9 => "MODIFIED",
            _ => "ADDED",
        };
        // Written as the apiserver writes it: `type` first (a `json!` map would sort `object` first).
        out.extend_from_slice(format!("{{\"type\":\"{ty}\",\"object\":").as_bytes());
        serde_json::to_writer(&mut out, &object).unwrap();
        out.extend_from_slice(b"}\n");
    }
    out
}

/// The baseline's event type: the obvious envelope struct, decoded by serde_json in one pass.
#[derive(Deserialize)]
#[allow(dead_code)]
struct BaselineEvent<T> {
    #[serde(rename = "type")]
    ty: String,
    object: T,
}

fn frames_only(body: &[u8]) -> usize {
    let mut dec = FrameDecoder::new();
    let mut n = 0;
    for chunk in body.chunks(CHUNK) {
        dec.push(chunk);
        while let Some(f) = dec.next_frame().unwrap() {
            black_box(&f);
            n += 1;
        }
    }
    n
}

fn ours<T: Object>(body: &[u8]) -> usize {
    let mut dec = EventDecoder::<T>::new();
    let mut n = 0;
    for chunk in body.chunks(CHUNK) {
        dec.push(chunk);
        while let Some(e) = dec.next_event().unwrap() {
            black_box(&e);
            n += 1;
        }
    }
    n
}

/// What the reflector reads: events with their objects left as JSON, only the metadata read.
fn raw<T: Object>(body: &[u8]) -> usize {
    let mut dec = EventDecoder::<T>::new();
    let mut n = 0;
    for chunk in body.chunks(CHUNK) {
        dec.push(chunk);
        while let Some(e) = dec.next_raw().unwrap() {
            assert!(
                !matches!(e, RawEvent::Decoded(_)),
                "every event takes the raw path"
            );
            black_box(&e);
            n += 1;
        }
    }
    n
}

/// The two steps `ours` fuses, in sequence: frame, then decode each frame.
fn framed_then_decoded<T: Object>(body: &[u8]) -> usize {
    let mut dec = FrameDecoder::new();
    let mut n = 0;
    for chunk in body.chunks(CHUNK) {
        dec.push(chunk);
        while let Some(f) = dec.next_frame().unwrap() {
            let e: WatchEvent<T> = decode_event(&f).unwrap();
            black_box(&e);
            n += 1;
        }
    }
    n
}

fn baseline<T: serde::de::DeserializeOwned>(body: &[u8]) -> usize {
    let mut n = 0;
    for line in body.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let e: BaselineEvent<T> = serde_json::from_slice(line).unwrap();
        black_box(&e);
        n += 1;
    }
    n
}

/// Each event's `object.metadata` as compact JSON, cut out ahead of time: what any metadata-only
/// decoder built on serde must still parse.
fn metadata_of(body: &[u8]) -> Vec<Vec<u8>> {
    body.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            let v: serde_json::Value = serde_json::from_slice(l).unwrap();
            serde_json::to_vec(&v["object"]["metadata"]).unwrap()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let streams = [
        (
            "endpointslice",
            stream("wire/public-endpointslice-watch-added-tke-2023.jsonl"),
        ),
        ("pod", stream("pod-managedfields.json")),
    ];
    let mut summary = BTreeMap::new();
    for (name, body) in &streams {
        summary.insert(*name, body.len());
        let mut g = c.benchmark_group(format!("watch-{name}"));
        g.sample_size(10);
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function(BenchmarkId::new("framing", EVENTS), |b| {
            b.iter(|| assert_eq!(frames_only(body), EVENTS))
        });
        g.throughput(Throughput::Elements(EVENTS as u64));
        match *name {
            "endpointslice" => {
                g.bench_function(
                    BenchmarkId::new("baseline-split-newline-typed", EVENTS),
                    |b| b.iter(|| assert_eq!(baseline::<EndpointSlice>(body), EVENTS)),
                );
                g.bench_function(BenchmarkId::new("typed", EVENTS), |b| {
                    b.iter(|| assert_eq!(ours::<EndpointSlice>(body), EVENTS))
                });
                g.bench_function(BenchmarkId::new("typed-framed-then-decoded", EVENTS), |b| {
                    b.iter(|| assert_eq!(framed_then_decoded::<EndpointSlice>(body), EVENTS))
                });
            }
            _ => {
                g.bench_function(
                    BenchmarkId::new("baseline-split-newline-typed", EVENTS),
                    |b| b.iter(|| assert_eq!(baseline::<Pod>(body), EVENTS)),
                );
                g.bench_function(BenchmarkId::new("typed", EVENTS), |b| {
                    b.iter(|| assert_eq!(ours::<Pod>(body), EVENTS))
                });
                g.bench_function(BenchmarkId::new("typed-framed-then-decoded", EVENTS), |b| {
                    b.iter(|| assert_eq!(framed_then_decoded::<Pod>(body), EVENTS))
                });
            }
        }
        g.bench_function(BenchmarkId::new("metadata-only", EVENTS), |b| {
            b.iter(|| assert_eq!(ours::<PartialObjectMetadata>(body), EVENTS))
        });
        g.bench_function(
            BenchmarkId::new("raw-as-the-reflector-reads", EVENTS),
            |b| b.iter(|| assert_eq!(raw::<PartialObjectMetadata>(body), EVENTS)),
        );
        // The floor of a serde metadata-only decode: only the metadata, already cut out.
        let metadata = metadata_of(body);
        g.bench_function(
            BenchmarkId::new("metadata-floor-serde-objectmeta-only", EVENTS),
            |b| {
                b.iter(|| {
                    for m in &metadata {
                        black_box(serde_json::from_slice::<ObjectMeta>(m).unwrap());
                    }
                })
            },
        );
        g.finish();
    }
    for (name, len) in summary {
        eprintln!("stream {name}: {EVENTS} events, {len} bytes");
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
