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

fn no_streaming_lists() -> Reply {
    Reply::json(422, status(422, "Invalid", "no streaming lists").as_bytes())
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
struct Errors(Arc<Mutex<Vec<String>>>);

impl Errors {
    fn callback(&self) -> ErrorCallback {
        let seen = self.0.clone();
        Arc::new(move |e: &Error| seen.lock().unwrap().push(e.to_string()))
    }
    fn all(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A scripted server whose route sees the request's index (0-based) and line, and which stamps
/// each request with the tokio clock (virtual time under a paused clock).
struct Scripted {
    server: RawServer,
    stamps: Arc<Mutex<Vec<Instant>>>,
}

impl Scripted {
    async fn start(route: impl Fn(usize, &str) -> Reply + Send + Sync + 'static) -> Scripted {
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

    fn queries(&self) -> Vec<String> {
        self.server
            .request_lines()
            .iter()
            .map(|l| query(l))
            .collect()
    }
}

/// A reflector feeding a store, with every delta kept in order.
struct Run {
    store: Arc<Writer<ConfigMap>>,
    deltas: Vec<(String, String)>,
    errors: Errors,
    health: Health,
}

/// Runs a reflector against `server` until `until(queries)` holds (or `limit` of tokio time went
/// by); applies its deltas to a store as it goes.
async fn run(
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

fn fast() -> ReflectorOptions {
    ReflectorOptions {
        backoff: BackoffOptions {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(5),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn keys(store: &Writer<ConfigMap>) -> Vec<String> {
    let mut k = store.keys();
    k.sort();
    k
}

// ----- item 2: Retry-After is clamped to the backoff cap -------------------------------------------

#[tokio::test(start_paused = true)]
async fn retry_after_beyond_the_backoff_cap_is_clamped_to_it() {
    let server = Scripted::start(|i, _| match i {
        0 => no_streaming_lists(),
        1 => Reply::json(503, status(503, "ServiceUnavailable", "busy").as_bytes())
            .with_header("Retry-After: 4294967295"),
        2 => list("10", &["c1"]),
        _ => stream(&[]),
    })
    .await;
    // Default backoff: 0.8 s doubling, cap 30 s, jitter up to x2.
    let run = run(
        &server,
        ReflectorOptions::default(),
        Duration::from_secs(3600),
        |q| q.len() >= 3,
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
    let server = Scripted::start(move |i, _| match i {
        0 => no_streaming_lists(),
        1 => list("10", &["c1", "c2"]),
        // The watch expires: relist.
        2 => stream(&[error_event(410, "Expired")]),
        // The relists (streaming lists are refused for good) get bogus 200s, then a real list.
        3..=6 => Reply::json(200, bogus[i - 3].as_bytes()),
        7 => list("20", &["c1", "c3"]),
        _ => stream(&[]),
    })
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| q.len() >= 9).await;
    let q = server.queries();
    assert!(q.len() >= 9, "{q:?}");
    for (i, query) in q.iter().enumerate().take(8).skip(3) {
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
    let server = Scripted::start(|i, _| match i {
        0 => no_streaming_lists(),
        1 => Reply::json(200, list_body("10", &["c1"], "token").as_bytes()),
        2 => list("10", &["c2"]),
        3 => stream(&[event("MODIFIED", "c1", "11"), error_event(410, "Expired")]),
        4 => list("12", &["c1", "c2"]),
        _ => stream(&[]),
    })
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| q.len() >= 6).await;
    let q = server.queries();
    assert_eq!(q[1], "limit=500&resourceVersion=0");
    assert_eq!(q[2], "continue=token&limit=500");
    assert_eq!(q[4], "limit=500&resourceVersion=11", "{q:?}");
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
    let (times, queries, errors) = five_minutes_of(|i, _| {
        if i == 0 {
            no_streaming_lists()
        } else {
            Reply::json(
                200,
                b"{\"kind\":\"ConfigMapList\",\"items\":[{\"metadata\":",
            )
        }
    })
    .await;
    assert_backed_off("undecodable LIST", &times[1..], &queries[1..], 1);
    assert!(
        errors[1..].iter().all(|e| e.contains("cannot decode")),
        "{errors:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_fails_every_time_backs_off() {
    // LIST fine, every watch garbled: relist, after a backoff each time.
    let (times, queries, errors) = five_minutes_of(|i, line| {
        if i == 0 {
            no_streaming_lists()
        } else if line.contains("watch=true") {
            stream(&["{\"type\":\"ADDED\",\"object\":[1,2]}".to_owned()])
        } else {
            list("10", &["c1"])
        }
    })
    .await;
    assert_backed_off("garbled watch", &times[1..], &queries[1..], 2);
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
    let server = Scripted::start(move |i, _| match i {
        0 => no_streaming_lists(),
        1 => list("10", &["c1"]),
        2 => stream(&[
            event("MODIFIED", "c1", "11"),
            raw_newline.clone(),
            event("ADDED", "c2", "12"),
        ]),
        3 => list("12", &["c1", "c2"]),
        4 => stream(&[
            unterminated.clone(),
            event("MODIFIED", "c2", "15"),
            event("MODIFIED", "c2", "16"),
        ]),
        5 => list("16", &["c1", "c2"]),
        _ => stream(&[]),
    })
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| q.len() >= 7).await;
    let q = server.queries();
    assert!(
        !q[3].contains("watch=true") && !q[5].contains("watch=true"),
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
