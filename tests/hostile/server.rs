//! The reflector against servers that misbehave (issue #15), over real loopback HTTP: every test
//! plays a fault with a scripted server, then checks that the store converges to the server's
//! state and that the failure was reported.
//!
//! The tests that measure delays run on a paused tokio clock: the server stamps each request with
//! the (virtual) time it arrived, so backoff is measured, never slept through.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::raw_server::{Body, RawServer, Reply};
use crate::support::scripted::{error_event, event, list, list_body, query, status, stream};
use informer::fifo::Delta;
use informer::fifo::DeltaFifo;
use informer::reflector::{
    BackoffOptions, ErrorCallback, Health, ListSummary, Reflector, ReflectorOptions,
};
use informer::store::Writer;
use informer::{Api, ConfigMap, Error};
use tokio::time::Instant;

pub(super) fn no_streaming_lists() -> Reply {
    Reply::json(422, status(422, "Invalid", "no streaming lists").as_bytes())
}

/// The route of an apiserver without streaming lists: every streaming list gets a 422 (and the
/// reflector a paginated LIST for that relist, WL8), every other request goes to `route` with its
/// index among those.
pub(super) fn without_streaming_lists(
    route: impl Fn(usize, &str) -> Reply + Send + Sync + 'static,
) -> impl Fn(usize, &str) -> Reply + Send + Sync + 'static {
    let n = AtomicUsize::new(0);
    move |_, line| {
        if line.contains("sendInitialEvents=true") {
            no_streaming_lists()
        } else {
            // SeqCst: a lone counter.
            route(n.fetch_add(1, Ordering::SeqCst), line)
        }
    }
}

/// The queries of the requests that were not streaming lists, in order.
pub(super) fn not_streaming(queries: &[String]) -> Vec<String> {
    queries
        .iter()
        .filter(|q| !q.contains("sendInitialEvents=true"))
        .cloned()
        .collect()
}

fn html(code: u16) -> Reply {
    Reply {
        head: vec![
            format!("HTTP/1.1 {code} Bad Gateway"),
            "Content-Type: text/html".into(),
        ],
        body: Body::Fixed(b"<html><body><h1>502 Bad Gateway</h1></body></html>".to_vec()),
    }
}

/// Every failure the reflector reported, as messages.
#[derive(Clone, Default)]
pub(super) struct Errors(Arc<Mutex<Vec<String>>>);

impl Errors {
    pub(super) fn callback(&self) -> ErrorCallback {
        let seen = self.0.clone();
        Arc::new(move |e: &Error| seen.lock().unwrap().push(e.to_string()))
    }
    pub(super) fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A scripted server whose route sees the request's index (0-based) and line, and which stamps
/// each request with the tokio clock (virtual time under a paused clock).
pub(super) struct Scripted {
    pub(super) server: RawServer,
    pub(super) stamps: Arc<Mutex<Vec<Instant>>>,
}

impl Scripted {
    pub(super) async fn start(
        route: impl Fn(usize, &str) -> Reply + Send + Sync + 'static,
    ) -> Scripted {
        let stamps = Arc::new(Mutex::new(Vec::new()));
        let s = stamps.clone();
        let n = AtomicUsize::new(0);
        let server = RawServer::start(move |line| {
            s.lock().unwrap().push(Instant::now());
            // SeqCst: one counter, no other memory to order; the strongest is simplest to read.
            route(n.fetch_add(1, Ordering::SeqCst), line)
        })
        .await;
        Scripted { server, stamps }
    }

    pub(super) fn queries(&self) -> Vec<String> {
        self.server
            .request_lines()
            .iter()
            .map(|l| query(l))
            .collect()
    }
}

/// A reflector feeding a store, with every delta kept in order.
pub(super) struct Run {
    pub(super) store: Arc<Writer<ConfigMap>>,
    pub(super) deltas: Vec<(String, String)>,
    pub(super) errors: Errors,
    pub(super) health: Health,
}

/// Runs a reflector against `server` until `until(queries)` holds (or `limit` of tokio time went
/// by); applies its deltas to a store as it goes.
pub(super) async fn run(
    server: &Scripted,
    options: ReflectorOptions,
    limit: Duration,
    until: impl Fn(&[String]) -> bool,
) -> Run {
    let errors = Errors::default();
    let options = ReflectorOptions {
        on_error: Some(errors.callback()),
        ..options
    };
    let store = Arc::new(Writer::new());
    let (fifo, mut consumer) = DeltaFifo::new(store.clone());
    let api: Api<ConfigMap> = Api::namespaced(server.server.client(), "a");
    let reflector = Reflector::new(api, fifo, options);
    let health = reflector.health_handle();
    let task = tokio::spawn(reflector.run());
    let mut deltas = Vec::new();
    let mut drain = |deltas: &mut Vec<(String, String)>| {
        while let Some(p) = consumer.try_pop() {
            for d in p.deltas() {
                let kind = match d {
                    Delta::Added(_) => "added",
                    Delta::Modified(_) => "modified",
                    Delta::Deleted(_) => "deleted",
                };
                deltas.push((kind.to_owned(), d.key()));
                store.apply(d);
            }
        }
    };
    let deadline = Instant::now() + limit;
    while !until(&server.queries()) && Instant::now() < deadline {
        drain(&mut deltas);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task.abort();
    let _ = task.await;
    drain(&mut deltas);
    let health = health.lock().unwrap().clone();
    Run {
        store,
        deltas,
        errors,
        health,
    }
}

pub(super) fn fast() -> ReflectorOptions {
    ReflectorOptions {
        backoff: BackoffOptions {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(5),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub(super) fn keys(store: &Writer<ConfigMap>) -> Vec<String> {
    let mut k = store.keys();
    k.sort();
    k
}

// ----- item 2: Retry-After is clamped to the backoff cap -------------------------------------------

#[tokio::test(start_paused = true)]
async fn retry_after_beyond_the_backoff_cap_is_clamped_to_it() {
    // Each relist: a refused streaming list, then the LIST.
    let server = Scripted::start(without_streaming_lists(|i, _| match i {
        0 => Reply::json(503, status(503, "ServiceUnavailable", "busy").as_bytes())
            .with_header("Retry-After: 4294967295"),
        1 => list("10", &["c1"]),
        _ => stream(&[]),
    }))
    .await;
    // Default backoff: 0.8 s doubling, cap 30 s, jitter up to x2.
    let run = run(
        &server,
        ReflectorOptions::default(),
        Duration::from_secs(3600),
        |q| q.len() >= 5,
    )
    .await;
    let stamps = server.stamps.lock().unwrap().clone();
    assert!(
        stamps.len() >= 3,
        "the LIST was never retried: {:?}",
        server.queries()
    );
    let waited = stamps[2] - stamps[1];
    assert!(
        waited >= Duration::from_secs(30) && waited < Duration::from_secs(61),
        "Retry-After: 4294967295 is clamped to the 30 s cap (plus jitter), waited {waited:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1"]);
    assert!(
        run.errors.all().iter().any(|e| e.contains("503")),
        "{:?}",
        run.errors.all()
    );
}

/// Envoy's 503 when its upstream is down: plain text, with a `Retry-After`.
fn envoy_503(retry_after: &str) -> Reply {
    Reply {
        head: vec![
            "HTTP/1.1 503 Service Unavailable".into(),
            "Content-Type: text/plain".into(),
            format!("Retry-After: {retry_after}"),
        ],
        body: Body::Fixed(
            b"upstream connect error or disconnect/reset before headers. reset reason: connection failure"
                .to_vec(),
        ),
    }
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_whatever_the_body() {
    for (retry_after, at_least, below) in [("3", 3, 4), ("4294967295", 30, 61)] {
        // Requests: a refused streaming list, the 503, after the wait a streaming list again
        // (refused: the fallback holds for one relist), the LIST, the watch.
        let server = Scripted::start(without_streaming_lists(move |i, _| match i {
            0 => envoy_503(retry_after),
            1 => list("10", &["c1"]),
            _ => stream(&[]),
        }))
        .await;
        // Default backoff: 0.8 s to 1.6 s for the first failure, cap 30 s.
        let run = run(
            &server,
            ReflectorOptions::default(),
            Duration::from_secs(3600),
            |q| q.len() >= 5,
        )
        .await;
        let stamps = server.stamps.lock().unwrap().clone();
        assert!(stamps.len() >= 5, "{:?}", server.queries());
        let waited = stamps[2] - stamps[1];
        assert!(
            waited >= Duration::from_secs(at_least) && waited < Duration::from_secs(below),
            "a plain-text 503 with Retry-After: {retry_after}: waited {waited:?} {:?} {:?}",
            server.queries(),
            run.errors.all()
        );
        assert_eq!(keys(&run.store), ["a/c1"]);
        assert!(
            run.errors
                .all()
                .iter()
                .any(|e| e.contains("upstream connect error")),
            "{:?}",
            run.errors.all()
        );
    }
}

// ----- issue #31: bodies that stop arriving ----------------------------------------------------------

/// A `500` head with its `Content-Length`, the first 40 bytes of its `Status`, then silence.
fn stalled_500() -> Reply {
    let body = status(500, "InternalError", "etcdserver: request timed out");
    Reply {
        head: vec![
            "HTTP/1.1 500 Internal Server Error".into(),
            "Content-Type: application/json".into(),
        ],
        body: Body::Stalled {
            announced: body.len(),
            sent: body.as_bytes()[..40].to_vec(),
        },
    }
}

#[tokio::test(start_paused = true)]
async fn an_error_whose_body_stalls_is_retried() {
    let server = Scripted::start(|i, _| match i {
        // The streaming list's error (read while opening a watch), then its LIST fallback's.
        0 | 1 => stalled_500(),
        2 => no_streaming_lists(),
        3 => list("10", &["c1"]),
        _ => stream(&[]),
    })
    .await;
    let run = run(
        &server,
        ReflectorOptions::default(),
        Duration::from_secs(3600),
        |q| q.len() >= 5,
    )
    .await;
    let stamps = server.stamps.lock().unwrap().clone();
    assert!(
        stamps.len() >= 5,
        "hung on a stalled error body: {:?}",
        server.queries()
    );
    // Each stalled body is given up after Config::body_stall_timeout (30 s), then the LIST
    // backs off (0.8 s to 1.6 s).
    let took = stamps[2] - stamps[0];
    assert!(
        took >= Duration::from_secs(60) && took < Duration::from_secs(63),
        "{took:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1"]);
    let errors = run.errors.all();
    assert!(
        errors[..2]
            .iter()
            .all(|e| e.contains("HTTP 500") && e.contains("stopped arriving after 40 bytes")),
        "{errors:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_list_body_that_stops_arriving_is_a_timeout_and_is_retried() {
    let body = list_body("10", &["c1", "c2"], "");
    // Requests: a refused streaming list, the stalled LIST, after the stall and the backoff a
    // streaming list again (refused), the LIST, the watch.
    let server = Scripted::start(without_streaming_lists(move |i, _| match i {
        0 => Reply {
            head: vec![
                "HTTP/1.1 200 OK".into(),
                "Content-Type: application/json".into(),
            ],
            body: Body::Stalled {
                announced: body.len(),
                sent: body.as_bytes()[..body.len() / 2].to_vec(),
            },
        },
        1 => list("11", &["c1", "c2"]),
        _ => stream(&[]),
    }))
    .await;
    let run = run(
        &server,
        ReflectorOptions::default(),
        Duration::from_secs(3600),
        |q| q.len() >= 5,
    )
    .await;
    let stamps = server.stamps.lock().unwrap().clone();
    assert!(
        stamps.len() >= 5,
        "hung on a stalled LIST body: {:?}",
        server.queries()
    );
    let took = stamps[2] - stamps[1];
    assert!(
        took >= Duration::from_secs(30) && took < Duration::from_secs(32),
        "{took:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1", "a/c2"]);
    let errors = run.errors.all();
    assert!(
        errors
            .iter()
            .any(|e| e.starts_with("timed out") && e.contains("stopped arriving")),
        "{errors:?}"
    );
}

#[tokio::test]
async fn an_announced_content_length_is_not_reserved_before_its_bytes_arrive() {
    // 512 MiB announced (under the 1 GiB default limit), 100 bytes sent, then silence.
    const ANNOUNCED: usize = 512 << 20;
    let server = Scripted::start(|_, _| Reply {
        head: vec![
            "HTTP/1.1 200 OK".into(),
            "Content-Type: application/json".into(),
        ],
        body: Body::Stalled {
            announced: ANNOUNCED,
            sent: vec![b' '; 100],
        },
    })
    .await;
    let mut config = informer::Config::new(server.server.url.parse().unwrap());
    config.body_stall_timeout = Duration::from_millis(200);
    let api: Api<ConfigMap> = Api::namespaced(informer::Client::new(config).unwrap(), "a");
    let e = api.list(&Default::default()).await.unwrap_err();
    assert!(matches!(e, Error::Timeout(_)), "{e}");
    // Other tests of this binary allocate meanwhile, but nothing near this size.
    let largest = crate::LARGEST_ALLOCATION.load(Ordering::Relaxed);
    assert!(
        largest < 64 << 20,
        "a {largest}-byte allocation for a body of which 100 bytes came"
    );
}

// ----- item 4: a 200 LIST that is not a list -------------------------------------------------------

#[tokio::test]
async fn a_200_list_that_is_not_a_list_is_an_error_and_the_cache_keeps_what_it_had() {
    let bogus = [
        "{}".to_owned(),
        status(200, "", "a Status in a 200"),
        r#"{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"20"},"items":[]}"#
            .to_owned(),
        r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"20"}}"#
            .to_owned(),
    ];
    let server = Scripted::start(without_streaming_lists(move |i, _| match i {
        0 => list("10", &["c1", "c2"]),
        // The watch expires: relist.
        1 => stream(&[error_event(410, "Expired")]),
        // The relists (each after a refused streaming list) get bogus 200s, then a real list.
        2..=5 => Reply::json(200, bogus[i - 2].as_bytes()),
        6 => list("20", &["c1", "c3"]),
        _ => stream(&[]),
    }))
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| {
        not_streaming(q).len() >= 8
    })
    .await;
    let q = not_streaming(&server.queries());
    assert!(q.len() >= 8, "{q:?}");
    for (i, query) in q.iter().enumerate().take(7).skip(2) {
        assert!(
            !query.contains("watch=true"),
            "request {i} should be a relist after a bogus list, got {query}"
        );
    }
    assert_eq!(keys(&run.store), ["a/c1", "a/c3"]);
    // The bogus lists never emptied the cache: c1 was never deleted.
    assert!(
        !run.deltas
            .iter()
            .any(|(k, key)| k == "deleted" && key == "a/c1"),
        "{:?}",
        run.deltas
    );
    let errors = run.errors.all();
    let protocol: Vec<&String> = errors
        .iter()
        .filter(|e| e.contains("not a ConfigMapList"))
        .collect();
    assert_eq!(protocol.len(), 4, "{errors:?}");
    assert!(protocol[1].contains("a Status"), "{protocol:?}");
    assert!(protocol[2].contains("SecretList"), "{protocol:?}");
    assert!(protocol[3].contains("without items"), "{protocol:?}");
}

#[tokio::test]
async fn a_list_body_over_the_limit_is_a_clear_error() {
    let big = list_body("5", &["c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"], "");
    let len = big.len();
    let b = big.clone();
    let server = Scripted::start(move |i, _| {
        if i % 2 == 0 {
            Reply::json(200, b.as_bytes())
        } else {
            // The same body, chunked: no Content-Length to refuse it on.
            Reply {
                head: vec!["HTTP/1.1 200 OK".into()],
                body: Body::Chunks(b.as_bytes().chunks(16).map(<[u8]>::to_vec).collect()),
            }
        }
    })
    .await;
    let mut config = informer::Config::new(server.server.url.parse().unwrap());
    config.max_response_bytes = len - 1;
    let api: Api<ConfigMap> = Api::namespaced(informer::Client::new(config).unwrap(), "a");
    for _ in 0..2 {
        let e = api.list(&Default::default()).await.unwrap_err();
        assert!(
            matches!(e, Error::ResponseTooLarge { limit } if limit == len - 1),
            "{e}"
        );
        assert!(e.to_string().contains("max_response_bytes"), "{e}");
    }
    let mut config = informer::Config::new(server.server.url.parse().unwrap());
    config.max_response_bytes = len;
    let api: Api<ConfigMap> = Api::namespaced(informer::Client::new(config).unwrap(), "a");
    for _ in 0..2 {
        assert_eq!(api.list(&Default::default()).await.unwrap().items.len(), 8);
    }
}

// ----- item 6: 429 in the stream, paginated_result --------------------------------------------------

#[tokio::test]
async fn an_in_stream_429_watches_again_from_the_same_version_without_relisting() {
    let server = Scripted::start(|i, _| match i {
        0 => no_streaming_lists(),
        1 => list("10", &["c1"]),
        2 => stream(&[
            event("MODIFIED", "c1", "11"),
            error_event(429, "TooManyRequests"),
        ]),
        3 => stream(&[event("ADDED", "c2", "12")]),
        _ => stream(&[]),
    })
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| q.len() >= 5).await;
    let q = server.queries();
    assert_eq!(
        q[3], "allowWatchBookmarks=true&resourceVersion=11&watch=true",
        "the same version again, no LIST: {q:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1", "a/c2"]);
    assert!(
        run.errors.all().iter().any(|e| e.contains("429")),
        "{:?}",
        run.errors.all()
    );
}

#[tokio::test]
async fn once_a_list_came_back_paginated_relists_keep_paginating() {
    // R6b/R7: the RV="0" list was paginated (the watch cache is off): a relist at the last version
    // keeps the limit.
    let server = Scripted::start(without_streaming_lists(|i, _| match i {
        0 => Reply::json(200, list_body("10", &["c1"], "token").as_bytes()),
        1 => list("10", &["c2"]),
        2 => stream(&[event("MODIFIED", "c1", "11"), error_event(410, "Expired")]),
        3 => list("12", &["c1", "c2"]),
        _ => stream(&[]),
    }))
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| {
        not_streaming(q).len() >= 5
    })
    .await;
    let q = not_streaming(&server.queries());
    assert_eq!(q[0], "limit=500&resourceVersion=0");
    assert_eq!(q[1], "continue=token&limit=500");
    assert_eq!(q[3], "limit=500&resourceVersion=11", "{q:?}");
    assert_eq!(keys(&run.store), ["a/c1", "a/c2"]);
}

// ----- item 7: R14 --------------------------------------------------------------------------------

#[tokio::test]
async fn synthetic_added_events_of_a_watch_from_an_empty_version_do_not_advance_it() {
    let server = Scripted::start(|i, _| match i {
        0 => no_streaming_lists(),
        // A list without a resourceVersion: the watch starts from "" and the server first sends
        // the current state as ADDED events in no version order.
        1 => Reply::json(
            200,
            br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[]}"#,
        ),
        2 => stream(&[event("ADDED", "c1", "5"), event("ADDED", "c2", "3")]),
        3 => stream(&[
            event("ADDED", "c1", "5"),
            event("ADDED", "c2", "3"),
            event("MODIFIED", "c2", "7"),
            event("ADDED", "c3", "8"),
        ]),
        _ => stream(&[]),
    })
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| q.len() >= 5).await;
    let q = server.queries();
    assert_eq!(q[2], "allowWatchBookmarks=true&watch=true");
    assert_eq!(
        q[3], "allowWatchBookmarks=true&watch=true",
        "still from \"\": only synthetic ADDED events came ({q:?})"
    );
    assert_eq!(
        q[4],
        "allowWatchBookmarks=true&resourceVersion=8&watch=true"
    );
    assert_eq!(keys(&run.store), ["a/c1", "a/c2", "a/c3"]);
}

// ----- item 8: every failure path backs off ----------------------------------------------------------

/// Runs the reflector with client-go's backoff for 5 virtual minutes against `route`; returns the
/// request times and the reported errors.
async fn five_minutes_of(
    route: impl Fn(usize, &str) -> Reply + Send + Sync + 'static,
) -> (Vec<Duration>, Vec<String>, Vec<String>) {
    let server = Scripted::start(route).await;
    let start = Instant::now();
    let run = run(
        &server,
        ReflectorOptions::default(),
        Duration::from_secs(300),
        |_| false,
    )
    .await;
    let times = server
        .stamps
        .lock()
        .unwrap()
        .iter()
        .map(|t| *t - start)
        .collect();
    (times, server.queries(), run.errors.all())
}

/// Client-go's backoff (0.8 s doubling, jitter x[1,2), cap 30 s) allows at most 15 failed rounds
/// in 300 s and at least 9; each round may take two requests (a refused streaming list, then its
/// LIST fallback).
fn assert_backed_off(what: &str, times: &[Duration], queries: &[String], per_round: usize) {
    let n = times.len();
    assert!(
        n <= 15 * per_round + 2 && n >= 9,
        "{what}: {n} requests in 5 minutes: {queries:?}"
    );
    // No two rounds less than 0.8 s apart.
    let rounds: Vec<Duration> = times.iter().step_by(per_round).copied().collect();
    for w in rounds.windows(2).skip(1) {
        assert!(
            w[1] - w[0] >= Duration::from_millis(800),
            "{what}: retried after {:?}: {times:?} {queries:?}",
            w[1] - w[0]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_html_5xx_on_every_request_backs_off() {
    let (times, queries, errors) = five_minutes_of(|_, _| html(502)).await;
    // Each round: a streaming list (502: fall back to LIST for this round), then the LIST.
    assert_backed_off("HTML 502", &times, &queries, 2);
    assert!(errors.iter().all(|e| e.contains("HTTP 502")), "{errors:?}");
}

#[tokio::test(start_paused = true)]
async fn an_undecodable_list_backs_off() {
    // Each round: a refused streaming list, then the LIST.
    let (times, queries, errors) = five_minutes_of(without_streaming_lists(|_, _| {
        Reply::json(
            200,
            b"{\"kind\":\"ConfigMapList\",\"items\":[{\"metadata\":",
        )
    }))
    .await;
    assert_backed_off("undecodable LIST", &times, &queries, 2);
    // Only the LISTs failed: the refused streaming lists are routine (WL1).
    assert!(
        !errors.is_empty() && errors.iter().all(|e| e.contains("cannot decode")),
        "{errors:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_fails_every_time_backs_off() {
    // LIST fine, every watch garbled: relist, after a backoff each time.
    // Each round: a refused streaming list, the LIST, the watch.
    let (times, queries, errors) = five_minutes_of(without_streaming_lists(|_, line| {
        if line.contains("watch=true") {
            stream(&["{\"type\":\"ADDED\",\"object\":[1,2]}".to_owned()])
        } else {
            list("10", &["c1"])
        }
    }))
    .await;
    assert_backed_off("garbled watch", &times, &queries, 3);
    assert!(
        errors.iter().any(|e| e.contains("cannot decode")),
        "{errors:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_cut_every_time_is_retried_at_once_only_once() {
    let (times, queries, errors) = five_minutes_of(|_, _| Reply {
        head: vec!["HTTP/1.1 200 OK".into()],
        body: Body::ChunksThenCut(vec![
            format!("{}\n", event("ADDED", "c1", "5")).into_bytes(),
        ]),
    })
    .await;
    // WL6: the first cut is retried at once; every later one backs off.
    assert!(
        times[1] - times[0] < Duration::from_millis(800),
        "{times:?}"
    );
    assert_backed_off("cut streaming list", &times[1..], &queries[1..], 1);
    assert!(!errors.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_closed_before_its_bookmark_every_time_backs_off() {
    let (times, queries, errors) =
        five_minutes_of(|_, _| stream(&[event("ADDED", "c1", "5")])).await;
    assert_backed_off(
        "streaming list without bookmark",
        &times[1..],
        &queries[1..],
        1,
    );
    assert!(
        errors.iter().any(|e| e.contains("initial-events-end")),
        "{errors:?}"
    );
}

// ----- item 3: a string with a raw newline, or one that never closes ------------------------------

#[tokio::test]
async fn a_broken_string_is_a_decode_error_of_its_event_and_the_reflector_relists() {
    let raw_newline = r#"{"type":"ADDED","object":{"metadata":{"name":"x"#.to_owned()
        + "\n"
        + r#"y","namespace":"a","resourceVersion":"12"}}}"#;
    let unterminated =
        r#"{"type":"ADDED","object":{"metadata":{"name":"x,"namespace":"a","resourceVersion":"14"}}}"#
            .to_owned();
    let server = Scripted::start(without_streaming_lists(move |i, _| match i {
        0 => list("10", &["c1"]),
        1 => stream(&[
            event("MODIFIED", "c1", "11"),
            raw_newline.clone(),
            event("ADDED", "c2", "12"),
        ]),
        2 => list("12", &["c1", "c2"]),
        3 => stream(&[
            unterminated.clone(),
            event("MODIFIED", "c2", "15"),
            event("MODIFIED", "c2", "16"),
        ]),
        4 => list("16", &["c1", "c2"]),
        _ => stream(&[]),
    }))
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| {
        not_streaming(q).len() >= 6
    })
    .await;
    let q = not_streaming(&server.queries());
    assert!(
        !q[2].contains("watch=true") && !q[4].contains("watch=true"),
        "relists after the broken events: {q:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1", "a/c2"]);
    assert_eq!(
        run.store.get("a", "c2").unwrap().metadata.resource_version,
        "16"
    );
    let broken: Vec<String> = run
        .errors
        .all()
        .into_iter()
        .filter(|e| e.contains("raw newline"))
        .collect();
    assert_eq!(broken.len(), 2, "{:?}", run.errors.all());
}

// ----- item 5: the initial list's version and count ------------------------------------------------

#[tokio::test]
async fn health_reports_the_initial_lists_version_and_count() {
    let bookmark = r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"9","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
    let server = Scripted::start(move |i, _| match i {
        // A streaming list whose initial events include a change and a deletion (WL3), then two
        // live events on the same stream.
        0 => stream(&[
            event("ADDED", "c1", "5"),
            event("ADDED", "c2", "6"),
            event("MODIFIED", "c1", "7"),
            event("DELETED", "c2", "8"),
            event("ADDED", "c3", "8"),
            bookmark.to_owned(),
            event("ADDED", "c4", "10"),
            event("MODIFIED", "c1", "11"),
        ]),
        _ => stream(&[]),
    })
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| q.len() >= 2).await;
    assert_eq!(keys(&run.store), ["a/c1", "a/c3", "a/c4"]);
    let want = ListSummary {
        resource_version: "9".into(),
        objects: 2,
    };
    assert_eq!(run.health.initial_list, Some(want.clone()));
    assert_eq!(run.health.last_list, Some(want));
    assert_eq!(
        run.health.resource_version, "11",
        "the store moved past the list"
    );
}

// ----- issue #31 item 9: what a decode error and a Status message carry into logs ----------------

#[tokio::test]
async fn decode_errors_redact_values_and_status_messages_lose_control_characters() {
    // A ConfigMap holding a secret, with a field of the wrong type just after it: the excerpt
    // around the error would show the secret.
    let leaky = r#"{"type":"ADDED","object":{"metadata":{"name":"c2","namespace":"a","resourceVersion":"12"},"data":{"password":"hunter2-s3cr3t","count":5}}}"#;
    let ansi = r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"\u001b[2J\u001b[31mowned\u001b[0m\r\nfake: line","reason":"TooManyRequests","code":429}}"#;
    let watches = AtomicUsize::new(0);
    let server = Scripted::start(move |i, line| {
        if i == 0 {
            no_streaming_lists()
        } else if line.contains("watch=true") {
            // SeqCst: one counter, no other memory to order.
            match watches.fetch_add(1, Ordering::SeqCst) {
                0 => stream(&[leaky.to_owned()]),
                1 => stream(&[ansi.to_owned()]),
                _ => stream(&[]),
            }
        } else {
            list("10", &["c1"])
        }
    })
    .await;
    // Until the ANSI watch was served (the fourth query with `watch=true`, the streaming list's
    // included) and the undecodable event made the reflector list again (a second LIST): the decode
    // happens when the test drains the fifo, so only that relist shows the error was reported.
    let run = run(&server, fast(), Duration::from_secs(20), |q| {
        q.iter().filter(|l| l.contains("watch=true")).count() >= 4
            && q.iter().filter(|l| !l.contains("watch=true")).count() >= 2
    })
    .await;
    let errors = run.errors.all();
    let decode = errors
        .iter()
        .find(|e| e.contains("cannot decode") && e.contains("password"))
        .unwrap_or_else(|| panic!("{errors:?} {:?}", server.queries()));
    assert!(!decode.contains("hunter2"), "{decode}");
    assert!(
        decode.contains(r#"\"password\":\"…\""#) && decode.contains(r#"\"count\":5"#),
        "keys and structure are kept: {decode}"
    );
    let status = errors
        .iter()
        .find(|e| e.contains("owned"))
        .unwrap_or_else(|| panic!("{errors:?}"));
    assert!(
        !status.chars().any(char::is_control),
        "no control characters from the server: {status:?}"
    );
    assert!(
        status.contains("[31mowned") && status.contains("fake: line"),
        "{status:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1"]);
}

// ----- issue #31 item 10: user info in the server URL ---------------------------------------------

#[tokio::test]
async fn user_info_in_the_server_url_is_stripped_and_used_only_as_basic_credentials() {
    let server = Scripted::start(|_, _| list("10", &["c1"])).await;
    let with_user = server
        .server
        .url
        .replacen("http://", "http://al%40ice:p%3Ass@", 1);
    let port = server.server.url.rsplit(':').next().unwrap().to_owned();
    let list_once = |config: informer::Config| async move {
        let client = informer::Client::new(config).unwrap();
        assert!(
            !client.config().cluster_url.to_string().contains("ice"),
            "{}",
            client.config().cluster_url
        );
        let api: Api<ConfigMap> = Api::namespaced(client, "a");
        api.list(&Default::default()).await.unwrap();
    };
    // No other credential: the user info becomes basic credentials, as Go's net/http does.
    list_once(informer::Config::new(with_user.parse().unwrap())).await;
    // A token is set: the user info is dropped.
    let mut config = informer::Config::new(with_user.parse().unwrap());
    config.auth = informer::config::Auth::Bearer(informer::config::Secret::new("t0ken"));
    list_once(config).await;
    let requests = server.server.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        let head = r.to_ascii_lowercase();
        assert!(
            !head.contains("al%40ice") && !head.contains("p%3ass") && !head.contains("ice:"),
            "{r}"
        );
        assert!(head.contains(&format!("host: 127.0.0.1:{port}\r\n")), "{r}");
    }
    // base64("al@ice:p:ss")
    assert!(
        requests[0].contains("authorization: Basic YWxAaWNlOnA6c3M=\r\n")
            || requests[0].contains("Authorization: Basic YWxAaWNlOnA6c3M=\r\n"),
        "{}",
        requests[0]
    );
    assert!(
        requests[1]
            .to_ascii_lowercase()
            .contains("authorization: bearer t0ken\r\n"),
        "{}",
        requests[1]
    );
}

// ----- issue #31: the simulator's faults for the convergence scenarios -----------------------------

#[tokio::test]
async fn the_simulators_stalled_error_body_and_plain_retry_after_reach_the_client_as_such() {
    let sim = informer_sim::Simulator::start().await.unwrap();
    let mut config = informer::Config::new(sim.url().parse().unwrap());
    config.body_stall_timeout = Duration::from_millis(300);
    let api: Api<ConfigMap> = Api::namespaced(informer::Client::new(config).unwrap(), "a");
    sim.faults().stall_next_error_bodies(1, 503);
    let started = Instant::now();
    let e = api.list(&Default::default()).await.unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(e.http_code(), Some(503), "{e}");
    assert!(
        e.is_retryable() && e.to_string().contains("stopped arriving after 40 bytes"),
        "{e}"
    );
    sim.faults().fail_next_plain_retry_after(1, 3);
    let e = api.list(&Default::default()).await.unwrap_err();
    assert_eq!(
        (e.http_code(), e.retry_after_seconds()),
        (Some(503), Some(3)),
        "{e}"
    );
    assert!(e.to_string().contains("upstream connect error"), "{e}");
    assert!(api.list(&Default::default()).await.is_ok());
    sim.shutdown().await;
}
