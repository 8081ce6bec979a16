//! The reflector's request sequence against a scripted server (client-go's vectors T1-T3 adapted),
//! over real loopback HTTP.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::raw_server::{Body, RawServer, Reply};
use crate::support::scripted::{event, list, query, status, stream};
use informer::fifo::DeltaFifo;
use informer::reflector::{BackoffOptions, Reflector, ReflectorOptions};
use informer::store::Writer;
use informer::{Api, ConfigMap};

fn options() -> ReflectorOptions {
    ReflectorOptions {
        backoff: BackoffOptions {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(5),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Runs a reflector against `server` until `n` requests were seen; returns their queries.
async fn requests(server: &RawServer, n: usize) -> (Vec<String>, Arc<Writer<ConfigMap>>) {
    requests_with(server, n, options()).await
}

/// [`requests`] with a reflector built from `opts`.
async fn requests_with(
    server: &RawServer,
    n: usize,
    opts: ReflectorOptions,
) -> (Vec<String>, Arc<Writer<ConfigMap>>) {
    let store = Arc::new(Writer::new());
    let (fifo, mut consumer) = DeltaFifo::new(store.clone());
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "a");
    let task = tokio::spawn(Reflector::new(api, fifo, opts).run());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while server.request_lines().len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {:?}",
            server.request_lines()
        );
        while let Some(p) = consumer.try_pop() {
            for d in p.deltas() {
                store.apply(d);
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task.abort();
    while let Some(p) = consumer.try_pop() {
        for d in p.deltas() {
            store.apply(d);
        }
    }
    (
        server
            .request_lines()
            .iter()
            .take(n)
            .map(|l| query(l))
            .collect(),
        store,
    )
}

#[tokio::test]
async fn t1_streaming_list_refused_falls_back_to_list_then_watch() {
    let server = RawServer::start(|line| {
        if line.contains("sendInitialEvents=true") {
            Reply::json(
                422,
                status(
                    422,
                    "Invalid",
                    "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch",
                ),
            )
        } else if line.contains("watch=true") {
            stream(&[event("MODIFIED", "c1", "3")])
        } else {
            list("2", &["c1", "c2"])
        }
    })
    .await;
    let (q, store) = requests(&server, 4).await;
    assert_eq!(
        q[0],
        "allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true"
    );
    assert_eq!(q[1], "limit=500&resourceVersion=0");
    assert_eq!(
        q[2],
        "allowWatchBookmarks=true&resourceVersion=2&watch=true"
    );
    // The clean end of that watch: watch again from the newest version seen, no relist.
    assert_eq!(
        q[3],
        "allowWatchBookmarks=true&resourceVersion=3&watch=true"
    );
    assert_eq!(store.len(), 2);
}

#[tokio::test]
async fn t2_streaming_list_then_watch_on_the_same_connection() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let server = RawServer::start(move |_| {
        if c.fetch_add(1, Ordering::SeqCst) == 0 {
            stream(&[
                event("ADDED", "c1", "5"),
                event("ADDED", "c2", "6"),
                r#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}}}"#.into(),
                event("MODIFIED", "c1", "8"),
            ])
        } else {
            stream(&[])
        }
    })
    .await;
    let (q, store) = requests(&server, 2).await;
    assert!(q[0].contains("sendInitialEvents=true"));
    assert_eq!(
        q[1],
        "allowWatchBookmarks=true&resourceVersion=8&watch=true"
    );
    assert_eq!(store.get("a", "c1").unwrap().metadata.resource_version, "8");
}

#[tokio::test]
async fn expired_watch_relists_from_the_last_version_then_from_scratch() {
    // R5/R6/R9: after a 410 in the watch, LIST at the last version with no limit (the watch cache
    // serves it); if that is gone too, a consistent read ("" -> no resourceVersion) with a limit.
    let step = Arc::new(Mutex::new(0));
    let s = step.clone();
    // Every relist first tries a streaming list (WL8), which this server refuses.
    let server = RawServer::start(move |line| {
        if line.contains("sendInitialEvents=true") {
            return Reply::json(422, status(422, "Invalid", "no streaming lists"));
        }
        let mut step = s.lock().unwrap();
        *step += 1;
        match *step {
            1 => list("10", &["c1"]),
            2 => stream(&[
                event("MODIFIED", "c1", "11"),
                r#"{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 11 (20)","reason":"Expired","code":410}}"#.into(),
            ]),
            3 => Reply::json(410, status(410, "Expired", "The resourceVersion for the provided list is too old.")),
            _ if line.contains("watch=true") => stream(&[]),
            _ => list("30", &["c2"]),
        }
    })
    .await;
    let (q, store) = requests(&server, 8).await;
    // Without the streaming lists: stream, LIST, watch, stream, LIST, stream, LIST, watch.
    let q: Vec<String> = q
        .into_iter()
        .filter(|q| !q.contains("sendInitialEvents=true"))
        .collect();
    assert_eq!(q[0], "limit=500&resourceVersion=0");
    assert_eq!(
        q[2], "resourceVersion=11",
        "relist at the last version, no limit"
    );
    assert_eq!(q[3], "limit=500", "then a consistent read");
    assert_eq!(
        q[4],
        "allowWatchBookmarks=true&resourceVersion=30&watch=true"
    );
    assert!(
        store.get("a", "c1").is_none(),
        "c1 is gone from the fresh list"
    );
    assert!(store.get("a", "c2").is_some());
}

#[tokio::test]
async fn too_many_requests_retries_the_watch_without_relisting() {
    let step = Arc::new(Mutex::new(0));
    let s = step.clone();
    let server = RawServer::start(move |_| {
        let mut step = s.lock().unwrap();
        *step += 1;
        match *step {
            1 => Reply::json(422, status(422, "Invalid", "no streaming lists")),
            2 => list("10", &["c1"]),
            3 => Reply::json(429, status(429, "TooManyRequests", "slow down"))
                .with_header("Retry-After: 0"),
            _ => stream(&[event("MODIFIED", "c1", "12")]),
        }
    })
    .await;
    let (q, _) = requests(&server, 4).await;
    assert_eq!(
        q[2],
        "allowWatchBookmarks=true&resourceVersion=10&watch=true"
    );
    assert_eq!(q[3], q[2], "the same watch again, no LIST in between");
}

/// The reflector's requests when the watch after the list meets `closed` connections closed with
/// no answer, then a watch stream.
/// The first `n` requests' queries, and what reached `on_error`, when the watch after the first
/// list meets `closed` connections closed unanswered.
async fn watch_after_closed_connections(closed: usize, n: usize) -> (Vec<String>, Vec<String>) {
    let step = Arc::new(Mutex::new(0));
    let s = step.clone();
    let server = RawServer::start(move |_| {
        let mut step = s.lock().unwrap();
        *step += 1;
        match *step {
            1 => Reply::json(422, status(422, "Invalid", "no streaming lists")),
            2 => list("10", &["c1"]),
            k if k <= 2 + closed => Reply {
                head: Vec::new(),
                body: Body::Closed,
            },
            _ => stream(&[event("MODIFIED", "c1", "12")]),
        }
    })
    .await;
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    let mut opts = options();
    opts.on_error = Some(Arc::new(move |e: &informer::Error| {
        seen.lock().unwrap().push(e.to_string())
    }));
    let queries = requests_with(&server, n, opts).await.0;
    let errors = errors.lock().unwrap().clone();
    (queries, errors)
}

#[tokio::test]
async fn a_connection_closed_while_opening_the_watch_retries_the_watch_without_relisting() {
    // R23: client-go's REST client retries a watch that met a transport error (up to 10 times)
    // before its reflector sees it; the version is not in question, so no relist.
    let (q, errors) = watch_after_closed_connections(3, 6).await;
    let watch = "allowWatchBookmarks=true&resourceVersion=10&watch=true";
    assert_eq!(
        q[2..6],
        [watch; 4],
        "the same watch four times, no LIST in between: {q:?}"
    );
    // And, as client-go's error handler, `on_error` never hears of these retries (#46).
    assert_eq!(errors, Vec::<String>::new());
}

#[tokio::test]
async fn a_watch_that_cannot_be_opened_eleven_times_in_a_row_relists() {
    let (q, errors) = watch_after_closed_connections(11, 14).await;
    let watch = "allowWatchBookmarks=true&resourceVersion=10&watch=true";
    assert_eq!(q[2..13], [watch; 11], "{q:?}");
    let closed = errors.iter().filter(|e| e.contains("connection closed"));
    assert_eq!(
        closed.count(),
        1,
        "the eleventh failure is told: {errors:?}"
    );
    assert!(
        q[13].contains("sendInitialEvents=true"),
        "then a relist (streaming again, WL8): {q:?}"
    );
}

#[tokio::test]
async fn a_watch_event_that_does_not_decode_relists_and_the_store_converges() {
    // The watch's events reach the fifo as raw JSON and are decoded when popped: an object that is
    // valid JSON but not a ConfigMap (`data` must be a map) is found there. The store missed that
    // event, so the reflector relists (R22) and the store takes the server's state from the list.
    let step = Arc::new(Mutex::new(0));
    let s = step.clone();
    let server = RawServer::start(move |line| {
        let mut step = s.lock().unwrap();
        *step += 1;
        match *step {
            1 => Reply::json(422, status(422, "Invalid", "no streaming lists")),
            2 => list("10", &["c1"]),
            3 => stream(&[
                r#"{"type":"MODIFIED","object":{"metadata":{"name":"c1","namespace":"a","resourceVersion":"11"},"data":5}}"#.into(),
                event("ADDED", "c2", "12"),
            ]),
            _ if line.contains("watch=true") => stream(&[]),
            _ => list("13", &["c1", "c2"]),
        }
    })
    .await;
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    let mut opts = options();
    opts.on_error = Some(Arc::new(move |e: &informer::Error| {
        seen.lock().unwrap().push(e.to_string())
    }));
    let store = Arc::new(Writer::<ConfigMap>::new());
    let (fifo, mut consumer) = DeltaFifo::new(store.clone());
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "a");
    let task = tokio::spawn(Reflector::new(api, fifo, opts).run());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        while let Some(p) = consumer.try_pop() {
            for d in p.deltas() {
                store.apply(d);
            }
            if let Some(rv) = p.caught_up_resource_version() {
                store.set_last_applied_resource_version(rv);
            }
        }
        if store.last_applied_resource_version() == "13" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no relist: {:?}",
            server.request_lines()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    task.abort();
    let q: Vec<String> = server.request_lines().iter().map(|l| query(l)).collect();
    // The watch may end (and be resumed) before the consumer pops the bad event; then a relist.
    assert!(
        q[3..].iter().any(|r| r == "resourceVersion=12"),
        "relisted from the last version: {q:?}"
    );
    assert_eq!(
        store.get("a", "c1").unwrap().metadata.resource_version,
        "13"
    );
    assert_eq!(
        store.get("a", "c2").unwrap().metadata.resource_version,
        "13"
    );
    let errors = errors.lock().unwrap();
    assert!(
        errors.iter().any(|e| e.contains("invalid type")),
        "reported: {errors:?}"
    );
}
