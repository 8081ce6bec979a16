//! The reflector's routine events (issue #46). What it meets by design is not a failure: a quiet
//! watch re-opened after its silence limit, a server without streaming lists refusing one, an
//! expired watch; none reaches the error callback or the failure count. And a streaming list
//! answered with a `Retry-After` waits it and streams again, as client-go's REST client does.
//! On the simulator and on scripted servers, over real loopback HTTP/1.1, on a paused tokio
//! clock.

use std::sync::Arc;
use std::time::Duration;

use crate::reflector::held_stream;
use crate::server::{
    Errors, Scripted, fast, keys, no_streaming_lists, not_streaming, run, without_streaming_lists,
};
use crate::support::raw_server::Reply;
use crate::support::scripted::{error_event, event, list, status, stream};
use informer::fifo::DeltaFifo;
use informer::reflector::{BOOKMARK_SILENCE, Reflector, ReflectorOptions};
use informer::store::Writer;
use informer::{Api, Client, Config, ConfigMap};
use informer_sim::Simulator;
use serde_json::json;
use tokio::time::Instant;

fn configmap(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "a"}})
}

// ----- item 1: a quiet watch over HTTP/1.1 ---------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn a_quiet_http1_watch_is_reopened_at_each_silence_limit_without_a_failure() {
    // A simulator over http:// (HTTP/1.1) that nothing writes to: the watch cache's rule gives
    // its watches no bookmark at all (X12), so the watch is silent for good.
    let sim = Simulator::start().await.unwrap();
    sim.create("configmaps", Some("a"), configmap("c1"))
        .unwrap();
    let errors = Errors::default();
    let options = ReflectorOptions {
        on_error: Some(errors.callback()),
        ..Default::default()
    };
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    let store = Arc::new(Writer::new());
    let (fifo, mut consumer) = DeltaFifo::new(store.clone());
    let reflector = Reflector::new(Api::<ConfigMap>::namespaced(client, "a"), fifo, options);
    let health = reflector.health_handle();
    let task = tokio::spawn(reflector.run());
    let mut drain = || {
        while let Some(p) = consumer.try_pop() {
            for d in p.deltas() {
                store.apply(d);
            }
        }
    };

    // Four silence limits and a bit (the watches ask for 300 s or more, so the server ends none).
    let quiet_until = Instant::now() + BOOKMARK_SILENCE * 4 + Duration::from_secs(10);
    while Instant::now() < quiet_until {
        drain();
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let h = health.lock().unwrap().clone();
    assert!(
        h.watches >= 5,
        "the streaming list's stream, then a new watch at each silence limit: {h:?}"
    );
    assert_eq!(
        h.lists, 1,
        "re-watched from the same version, no relist: {h:?}"
    );
    assert_eq!(h.consecutive_failures, 0, "{h:?}");
    assert_eq!(h.last_error, None);
    assert!(errors.all().is_empty(), "{:?}", errors.all());

    // The watch open now still delivers.
    sim.create("configmaps", Some("a"), configmap("c2"))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while store.get("a", "c2").is_none() {
        assert!(Instant::now() < deadline, "c2 never arrived");
        drain();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(store.len(), 2);
    assert!(errors.all().is_empty(), "{:?}", errors.all());
    assert_eq!(health.lock().unwrap().consecutive_failures, 0);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn a_watch_silent_past_its_own_timeout_is_still_a_failure() {
    // Watches ask for 10-20 s: a stream still silent 30 s after that was not ended by the
    // server, which a healthy one would have done. Hung, reported (R24).
    let server = Scripted::start(|i, _| match i {
        0 => no_streaming_lists(),
        1 => list("10", &["c1"]),
        _ => held_stream(&[]),
    })
    .await;
    let run = run(
        &server,
        ReflectorOptions {
            min_watch_timeout: Duration::from_secs(10),
            ..ReflectorOptions::default()
        },
        Duration::from_secs(120),
        |q| q.len() >= 4,
    )
    .await;
    let q = server.queries();
    assert!(q.len() >= 4, "{q:?}");
    assert_eq!(
        q[3], "allowWatchBookmarks=true&resourceVersion=10&watch=true",
        "{q:?}"
    );
    assert!(
        run.errors.all().iter().any(|e| e.contains("sent nothing")),
        "{:?}",
        run.errors.all()
    );
}

// ----- item 2: a server without streaming lists, an expired watch -----------------------------------

/// The bookmark that ends a streaming list's initial events, at `rv`.
fn initial_events_end(rv: u32) -> String {
    format!(
        r#"{{"type":"BOOKMARK","object":{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}","annotations":{{"k8s.io/initial-events-end":"true"}}}}}}}}"#
    )
}

#[tokio::test(start_paused = true)]
async fn refused_streaming_lists_and_an_expired_watch_are_not_failures() {
    // A 1.20-1.26 apiserver: every relist's streaming list is refused (422). The watch expires,
    // and so does the version the relist asks for: a consistent read follows.
    let server = Scripted::start(without_streaming_lists(|i, _| match i {
        0 => list("10", &["c1"]),
        1 => stream(&[event("MODIFIED", "c1", "11"), error_event(410, "Expired")]),
        2 => Reply::json(
            410,
            status(410, "Expired", "too old resource version: 11 (15)").as_bytes(),
        ),
        3 => list("20", &["c1", "c2"]),
        _ => held_stream(&[]),
    }))
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| {
        not_streaming(q).len() >= 5
    })
    .await;
    let q = not_streaming(&server.queries());
    assert_eq!(
        q[2], "resourceVersion=11",
        "relisted from the last version: {q:?}"
    );
    assert_eq!(q[3], "limit=500", "then a consistent read: {q:?}");
    assert_eq!(
        q[4], "allowWatchBookmarks=true&resourceVersion=20&watch=true",
        "{q:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1", "a/c2"]);
    assert!(run.errors.all().is_empty(), "{:?}", run.errors.all());
    assert_eq!(run.health.consecutive_failures, 0);
    assert_eq!(run.health.last_error, None);
    // Visible where routine events are counted: two lists, the relist included.
    assert_eq!(run.health.lists, 2);
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_whose_version_expired_streams_again_consistently_without_a_failure() {
    let server = Scripted::start(|i, _| match i {
        // A streaming list, then the same stream as a watch, which expires.
        0 => stream(&[
            event("ADDED", "c1", "10"),
            initial_events_end(10),
            event("MODIFIED", "c1", "11"),
            error_event(410, "Expired"),
        ]),
        // The relist's streaming list from the last version: gone too.
        1 => Reply::json(
            410,
            status(410, "Expired", "too old resource version: 11 (15)").as_bytes(),
        ),
        2 => stream(&[
            event("ADDED", "c1", "20"),
            event("ADDED", "c2", "20"),
            initial_events_end(20),
        ]),
        _ => held_stream(&[]),
    })
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| q.len() >= 4).await;
    let q = server.queries();
    assert!(q[1].contains("resourceVersion=11&"), "{q:?}");
    assert_eq!(
        q[2],
        "allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&watch=true",
        "a consistent streaming list (\"\"): {q:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1", "a/c2"]);
    assert!(run.errors.all().is_empty(), "{:?}", run.errors.all());
    assert_eq!(run.health.consecutive_failures, 0);
    assert_eq!(run.health.lists, 2);
}

// ----- item 3: Retry-After on a streaming list -------------------------------------------------------

/// A `503` with a `Status` body and `Retry-After: secs`.
fn unavailable(secs: u32) -> Reply {
    Reply::json(
        503,
        status(503, "ServiceUnavailable", "the server is busy").as_bytes(),
    )
    .with_header(&format!("Retry-After: {secs}"))
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_answered_503_with_retry_after_waits_it_and_streams_again() {
    let server = Scripted::start(|i, _| match i {
        0 | 1 => unavailable(7),
        2 => stream(&[event("ADDED", "c1", "10"), initial_events_end(10)]),
        _ => held_stream(&[]),
    })
    .await;
    // Client-go's backoff: the first steps (0.8 s, then 1.6 s, jittered up to x2) are shorter
    // than the 7 s asked, so the Retry-After is the wait.
    let run = run(
        &server,
        ReflectorOptions::default(),
        Duration::from_secs(60),
        |q| q.len() >= 3,
    )
    .await;
    let q = server.queries();
    assert!(q.len() >= 3, "{q:?}");
    assert!(
        q[..3].iter().all(|q| q.contains("sendInitialEvents=true")),
        "the same streaming list again, no LIST: {q:?}"
    );
    let stamps = server.stamps.lock().unwrap().clone();
    for w in stamps[..3].windows(2) {
        let waited = w[1] - w[0];
        assert!(
            waited >= Duration::from_secs(7) && waited < Duration::from_secs(8),
            "waited {waited:?}"
        );
    }
    assert_eq!(keys(&run.store), ["a/c1"]);
    // The 503s are failures, reported as a LIST's or a watch's would be.
    assert_eq!(run.errors.all().len(), 2, "{:?}", run.errors.all());
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_answered_503_with_retry_after_ten_times_falls_back_to_list() {
    let server = Scripted::start(|_, line| {
        if line.contains("sendInitialEvents=true") {
            unavailable(1)
        } else if line.contains("watch=true") {
            held_stream(&[])
        } else {
            list("10", &["c1"])
        }
    })
    .await;
    let run = run(&server, fast(), Duration::from_secs(60), |q| q.len() >= 12).await;
    let q = server.queries();
    assert!(q.len() >= 12, "{q:?}");
    assert!(
        q[..11].iter().all(|q| q.contains("sendInitialEvents=true")),
        "the first answer and 10 retries: {q:?}"
    );
    assert_eq!(q[11], "limit=500&resourceVersion=0", "then the LIST: {q:?}");
    assert_eq!(keys(&run.store), ["a/c1"]);
}
