//! The reflector against servers that hold a stream open without ending it (issue #31, the
//! reflector's half): a watch gone silent over HTTP/1.1, a streaming list whose end bookmark never
//! comes, and the lists that follow such failures. Scripted servers over real loopback HTTP/1.1,
//! on a paused tokio clock, so the limits (75 s, 10 s, the initial phase's deadline) pass in
//! virtual time.

use std::sync::Arc;
use std::time::Duration;

use crate::server::{Scripted, fast, keys, no_streaming_lists, run};
use crate::support::raw_server::{Body, Reply};
use crate::support::scripted::{event, list};
use informer::reflector::{BOOKMARK_SILENCE, ReflectorOptions};

/// A `200` watch stream that sends `events` (each after its delay), then stays open and silent.
pub(super) fn held_stream(events: &[(Duration, String)]) -> Reply {
    Reply {
        head: vec![
            "HTTP/1.1 200 OK".into(),
            "Content-Type: application/json".into(),
        ],
        body: Body::Paced(
            events
                .iter()
                .map(|(d, e)| (*d, format!("{e}\n").into_bytes()))
                .collect(),
        ),
    }
}

// ----- a watch with bookmarks silent for 75 s over HTTP/1.1 ---------------------------------------

#[tokio::test(start_paused = true)]
async fn a_watch_with_bookmarks_silent_for_75_s_over_http1_is_watched_again_from_its_version() {
    let server = Scripted::start(|i, _| match i {
        0 => no_streaming_lists(),
        1 => list("10", &["c1"]),
        // One event, then nothing at all (no bookmark) on an open connection.
        2 => held_stream(&[(Duration::ZERO, event("MODIFIED", "c1", "11"))]),
        _ => held_stream(&[]),
    })
    .await;
    let run = run(
        &server,
        ReflectorOptions {
            min_watch_timeout: Duration::from_secs(300),
            ..fast()
        },
        Duration::from_secs(200),
        |q| q.len() >= 4,
    )
    .await;
    let q = server.queries();
    assert!(q.len() >= 4, "no new watch within 200 s: {q:?}");
    assert_eq!(
        q[3], "allowWatchBookmarks=true&resourceVersion=11&watch=true",
        "watched again from the last version, no relist: {q:?}"
    );
    let stamps = server.stamps.lock().unwrap().clone();
    let silent = stamps[3] - stamps[2];
    assert!(
        silent >= BOOKMARK_SILENCE && silent < BOOKMARK_SILENCE + Duration::from_secs(2),
        "re-watched after {silent:?} of silence"
    );
    assert_eq!(keys(&run.store), ["a/c1"]);
    // Routine (R24): a quiet resource's watch gets no bookmark; its re-watch is no failure.
    assert!(run.errors.all().is_empty(), "{:?}", run.errors.all());
    assert_eq!(run.health.consecutive_failures, 0);
}

#[tokio::test(start_paused = true)]
async fn a_watch_without_bookmarks_keeps_the_longer_silence_limit() {
    let server = Scripted::start(|i, _| match i {
        0 => no_streaming_lists(),
        1 => list("10", &["c1"]),
        _ => held_stream(&[]),
    })
    .await;
    let _run = run(
        &server,
        ReflectorOptions {
            bookmarks: false,
            min_watch_timeout: Duration::from_secs(300),
            ..fast()
        },
        Duration::from_secs(200),
        |q| q.len() >= 4,
    )
    .await;
    // The server was not asked for bookmarks: its silence says nothing until its timeout + 30 s.
    assert_eq!(server.queries().len(), 3, "{:?}", server.queries());
}

// ----- WL9: a streaming list whose end bookmark never comes ----------------------------------------

/// A bookmark at `rv` that is not the initial-events-end one.
fn bookmark(rv: u32) -> String {
    format!(
        r#"{{"type":"BOOKMARK","object":{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}}}}}}"#
    )
}

/// A streaming list that sends `c1`, then a bookmark every 5 s for ever, and never its
/// initial-events-end bookmark: alive, trickling, never synced.
fn endless_initial_events() -> Reply {
    let mut events = vec![(Duration::ZERO, event("ADDED", "c1", "5"))];
    events.extend((6..40).map(|rv| (Duration::from_secs(5), bookmark(rv))));
    held_stream(&events)
}

#[tokio::test(start_paused = true)]
async fn a_streaming_list_without_its_end_bookmark_is_reported_then_given_up_for_a_paged_list() {
    let server = Scripted::start(|i, _| match i {
        0 => endless_initial_events(),
        1 => list("20", &["c1", "c2"]),
        _ => held_stream(&[]),
    })
    .await;
    let run = run(
        &server,
        ReflectorOptions::default(),
        Duration::from_secs(120),
        |q| q.len() >= 3,
    )
    .await;
    let q = server.queries();
    assert!(q.len() >= 3, "{q:?}");
    assert!(q[0].contains("sendInitialEvents=true"), "{q:?}");
    assert!(
        !q[1].contains("watch=true") && q[1].contains("limit=500"),
        "a paginated LIST after the deadline: {q:?}"
    );
    let stamps = server.stamps.lock().unwrap().clone();
    let waited = stamps[1] - stamps[0];
    assert!(
        waited >= Duration::from_secs(60) && waited < Duration::from_secs(61),
        "given up after {waited:?}"
    );
    let errors = run.errors.all();
    let warnings = errors.iter().filter(|e| e.contains("after 10s")).count();
    assert_eq!(warnings, 1, "WL9 warns once: {errors:?}");
    assert!(
        errors.iter().any(|e| e.contains("within 60s")),
        "{errors:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1", "a/c2"]);
    assert_eq!(
        run.health
            .initial_list
            .as_ref()
            .map(|l| l.resource_version.as_str()),
        Some("20")
    );
}

#[tokio::test(start_paused = true)]
async fn the_streaming_lists_warning_reaches_the_health_while_it_still_waits() {
    let server = Scripted::start(|i, _| match i {
        0 => endless_initial_events(),
        _ => held_stream(&[]),
    })
    .await;
    // Stopped at 30 s, after the warning and before the deadline.
    let run = run(
        &server,
        ReflectorOptions::default(),
        Duration::from_secs(30),
        |_| false,
    )
    .await;
    assert_eq!(server.queries().len(), 1, "{:?}", server.queries());
    let last = run.health.last_error.unwrap_or_default();
    assert!(
        last.contains("initial-events-end") && last.contains("after 10s"),
        "{last}"
    );
    assert!(run.health.initial_list.is_none());
}

// ----- WL8: a refused streaming list falls back for one relist only --------------------------------

#[tokio::test]
async fn a_refused_streaming_list_falls_back_to_list_for_that_relist_only() {
    let watches = std::sync::atomic::AtomicUsize::new(0);
    let server = Scripted::start(move |_, line| {
        if line.contains("sendInitialEvents=true") {
            // An apiserver (one of several, say) without streaming lists.
            no_streaming_lists()
        } else if line.contains("watch=true") {
            // SeqCst: a lone test counter.
            match watches.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => crate::support::scripted::stream(&[crate::support::scripted::error_event(
                    410, "Expired",
                )]),
                _ => held_stream(&[]),
            }
        } else {
            list("10", &["c1"])
        }
    })
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| q.len() >= 6).await;
    let q = server.queries();
    assert!(q.len() >= 6, "{q:?}");
    let kinds: Vec<&str> = q[..6]
        .iter()
        .map(|q| {
            if q.contains("sendInitialEvents=true") {
                "stream"
            } else if q.contains("watch=true") {
                "watch"
            } else {
                "list"
            }
        })
        .collect();
    assert_eq!(
        kinds,
        ["stream", "list", "watch", "stream", "list", "watch"],
        "the relist after the 410 tries a streaming list again: {q:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1"]);
}

// ----- item 7: a listed object never moves a key backwards -----------------------------------------

#[tokio::test]
async fn a_list_after_a_partly_delivered_streaming_list_is_a_consistent_read() {
    let server = Scripted::start(|i, line| match i {
        // c1 and c2 at 20 reach the fifo (pages of one object), then the stream fails.
        0 => crate::support::scripted::stream(&[
            event("ADDED", "c1", "20"),
            event("ADDED", "c2", "20"),
            crate::support::scripted::error_event(500, "InternalError"),
        ]),
        // A LIST at "0" would be served by a watch cache that is behind: older objects.
        _ if !line.contains("watch=true") && line.contains("resourceVersion=0") => {
            list("10", &["c1", "c2"])
        }
        _ if !line.contains("watch=true") => list("20", &["c1", "c2"]),
        _ => held_stream(&[]),
    })
    .await;
    let run = run(
        &server,
        ReflectorOptions {
            page_size: 1,
            ..fast()
        },
        Duration::from_secs(20),
        |q| q.len() >= 3,
    )
    .await;
    let q = server.queries();
    assert!(q[0].contains("sendInitialEvents=true"), "{q:?}");
    assert_eq!(q[1], "limit=1", "a consistent read, not at \"0\": {q:?}");
    for name in ["c1", "c2"] {
        assert_eq!(
            run.store.get("a", name).unwrap().metadata.resource_version,
            "20"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_listed_object_older_than_the_stored_one_is_ignored() {
    let server = Scripted::start(crate::server::without_streaming_lists(|i, _| match i {
        0 => list("20", &["c1"]),
        // The watch expires: relist.
        1 => crate::support::scripted::stream(&[crate::support::scripted::error_event(
            410, "Expired",
        )]),
        // An apiserver behind the one that served the first list answers the relist.
        2 => list("10", &["c1"]),
        _ => held_stream(&[]),
    }))
    .await;
    let run = run(
        &server,
        ReflectorOptions::default(),
        Duration::from_secs(60),
        |q| q.len() >= 6,
    )
    .await;
    let q = server.queries();
    assert!(q.len() >= 6, "{q:?}");
    assert_eq!(q[4], "resourceVersion=20", "the relist: {q:?}");
    assert_eq!(
        run.store.get("a", "c1").unwrap().metadata.resource_version,
        "20",
        "c1 at 20 stays: {:?}",
        run.deltas
    );
    assert_eq!(run.deltas, [("added".to_owned(), "a/c1".to_owned())]);
}

// ----- item 4: a LIST that pages for ever ----------------------------------------------------------

/// Runs a reflector without streaming lists against `route` for up to 5 virtual minutes or 200
/// requests; returns the queries and the errors.
async fn paging(
    route: impl Fn(usize, &str) -> Reply + Send + Sync + 'static,
    max_list_pages: u32,
) -> (Vec<String>, Vec<String>) {
    let server = Scripted::start(route).await;
    let run = run(
        &server,
        ReflectorOptions {
            streaming_list: false,
            max_list_pages,
            ..ReflectorOptions::default()
        },
        Duration::from_secs(300),
        |q| q.len() >= 200,
    )
    .await;
    (server.queries(), run.errors.all())
}

#[tokio::test(start_paused = true)]
async fn a_list_that_repeats_its_continue_token_is_an_error_that_backs_off() {
    let (q, errors) = paging(
        |_, _| {
            Reply::json(
                200,
                crate::support::scripted::list_body("10", &["c1"], "again").as_bytes(),
            )
        },
        10_000,
    )
    .await;
    // Each round: the first page, the page of the token, which gives the token again; client-go's
    // backoff allows at most 15 rounds in 5 minutes.
    assert!(q.len() <= 30, "paged for ever: {} requests", q.len());
    assert_eq!(q[0], "limit=500&resourceVersion=0");
    assert_eq!(q[1], "continue=again&limit=500");
    assert_eq!(q[2], "limit=500&resourceVersion=0", "{q:?}");
    assert!(
        errors.iter().all(|e| e.contains("gave before")),
        "{errors:?}"
    );
    // Client-go's backoff: at most 15 rounds in 5 minutes.
    assert!(errors.len() <= 15 && errors.len() >= 5, "{errors:?}");
}

#[tokio::test(start_paused = true)]
async fn a_list_that_never_stops_paging_is_bounded() {
    let n = std::sync::atomic::AtomicUsize::new(0);
    let (q, errors) = paging(
        move |_, _| {
            // SeqCst: a lone counter. A new token every time, and never an end.
            let token = n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Reply::json(
                200,
                crate::support::scripted::list_body("10", &[], &format!("t{token}")).as_bytes(),
            )
        },
        5,
    )
    .await;
    // At most 15 rounds of 5 pages in 5 minutes.
    assert!(q.len() <= 75, "paged for ever: {} requests", q.len());
    assert_eq!(
        q[5], "limit=500&resourceVersion=0",
        "5 pages, then a new list: {q:?}"
    );
    assert!(
        errors.iter().all(|e| e.contains("max_list_pages")),
        "{errors:?}"
    );
}

// ----- item 5: a namespace or name holding '/' -----------------------------------------------------

/// A watch event on ConfigMap `namespace/name` at `rv`.
fn event_in(ty: &str, namespace: &str, name: &str, rv: &str) -> String {
    format!(
        r#"{{"type":"{ty}","object":{{"metadata":{{"name":"{name}","namespace":"{namespace}","resourceVersion":"{rv}"}}}}}}"#
    )
}

#[tokio::test]
async fn an_object_whose_name_or_namespace_holds_a_slash_never_enters_the_cache() {
    // "a/b" in namespace "a" and "b" in namespace "a/a" both make the key "a/a/b", which reads
    // back as namespace "a", name "a/b".
    let bad_list = r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"12"},"items":[{"metadata":{"name":"c1","namespace":"a","resourceVersion":"10"}},{"metadata":{"name":"x/y","namespace":"a","resourceVersion":"11"}}]}"#;
    let server = Scripted::start(crate::server::without_streaming_lists(
        move |i, _| match i {
            0 => list("10", &["c1"]),
            1 => crate::support::scripted::stream(&[
                event_in("ADDED", "a", "a/b", "11"),
                event("ADDED", "c2", "12"),
            ]),
            2 => Reply::json(200, bad_list.as_bytes()),
            3 => list("12", &["c1", "c2"]),
            4 => crate::support::scripted::stream(&[event_in("ADDED", "a/a", "b", "13")]),
            5 => list("13", &["c1", "c2"]),
            _ => held_stream(&[]),
        },
    ))
    .await;
    let run = run(&server, fast(), Duration::from_secs(20), |q| {
        q.iter()
            .filter(|q| !q.contains("sendInitialEvents"))
            .count()
            >= 7
    })
    .await;
    let q: Vec<String> = server
        .queries()
        .into_iter()
        .filter(|q| !q.contains("sendInitialEvents"))
        .collect();
    assert!(q.len() >= 7, "{q:?}");
    assert!(
        !q[2].contains("watch=true")
            && !q[3].contains("watch=true")
            && !q[5].contains("watch=true"),
        "each bad object fails its event or page, and the reflector relists: {q:?}"
    );
    assert_eq!(keys(&run.store), ["a/c1", "a/c2"]);
    assert!(
        run.deltas
            .iter()
            .all(|(_, key)| key == "a/c1" || key == "a/c2"),
        "{:?}",
        run.deltas
    );
    let slashes = run
        .errors
        .all()
        .into_iter()
        .filter(|e| e.contains("holds '/'"))
        .count();
    assert_eq!(slashes, 3, "{:?}", run.errors.all());
}

// ----- item 6: a relist delete whose last known state does not decode -----------------------------

#[tokio::test]
async fn a_relist_deletes_a_key_whose_pending_event_does_not_decode() {
    use informer::fifo::{Delta, DeltaFifo};
    use informer::reflector::Reflector;
    use informer::store::Writer;
    use informer::{Api, ConfigMap};

    // c1's MODIFIED event has metadata that reads, and data that is no ConfigMap's.
    let undecodable = r#"{"type":"MODIFIED","object":{"metadata":{"name":"c1","namespace":"a","resourceVersion":"11"},"data":5}}"#;
    let server = Scripted::start(crate::server::without_streaming_lists(
        move |i, _| match i {
            0 => list("10", &["c1"]),
            1 => crate::support::scripted::stream(&[
                undecodable.to_owned(),
                crate::support::scripted::error_event(410, "Expired"),
            ]),
            // c1 was deleted meanwhile.
            2 => list("12", &[]),
            _ => held_stream(&[]),
        },
    ))
    .await;
    let store = Arc::new(Writer::new());
    let (fifo, mut consumer) = DeltaFifo::new(store.clone());
    let api: Api<ConfigMap> = Api::namespaced(server.server.client(), "a");
    let task = tokio::spawn(Reflector::new(api, fifo, fast()).run());
    let mut deltas = Vec::new();
    // Pops and applies one key; false if nothing was pending.
    let mut pop_one = |deltas: &mut Vec<(String, String)>| {
        let Some(p) = consumer.try_pop() else {
            return false;
        };
        for d in p.deltas() {
            let kind = match d {
                Delta::Added(_) => "added",
                Delta::Modified(_) => "modified",
                Delta::Deleted(_) => "deleted",
            };
            deltas.push((kind.to_owned(), d.key()));
            store.apply(d);
        }
        true
    };
    let not_streaming = |q: &[String]| {
        q.iter()
            .filter(|q| !q.contains("sendInitialEvents"))
            .count()
    };
    // The first list reaches the store; then the consumer waits while the event (pending, raw)
    // and the relist that deletes c1 arrive.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while store.get("a", "c1").is_none() {
        assert!(tokio::time::Instant::now() < deadline);
        if !pop_one(&mut deltas) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    while not_streaming(&server.queries()) < 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            server.queries()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    while pop_one(&mut deltas) {}
    task.abort();
    assert!(
        store.get("a", "c1").is_none(),
        "the relist's delete of c1 was dropped: {deltas:?}"
    );
    assert_eq!(
        deltas,
        [
            ("added".to_owned(), "a/c1".to_owned()),
            ("deleted".to_owned(), "a/c1".to_owned())
        ]
    );
}

// ----- item 2: the inbox weighs large objects by their bytes ---------------------------------------

#[tokio::test]
async fn a_streaming_list_of_large_objects_waits_at_the_fifos_byte_budget() {
    use informer::fifo::DeltaFifo;
    use informer::reflector::Reflector;
    use informer::store::Writer;
    use informer::{Api, ConfigMap};

    // 1,200 ConfigMaps of 64 KiB each (75 MiB): under the fifo's count (1,024 objects) for the
    // most part, far over its byte budget (16 MiB).
    let value = "x".repeat(64 << 10);
    let events: Vec<String> = (0..1200)
        .map(|i| {
            format!(
                r#"{{"type":"ADDED","object":{{"metadata":{{"name":"c{i}","namespace":"a","resourceVersion":"{}"}},"data":{{"k":"{value}"}}}}}}"#,
                i + 10
            )
        })
        .collect();
    let server = Scripted::start(move |i, _| match i {
        0 => crate::support::scripted::stream(&events),
        _ => held_stream(&[]),
    })
    .await;
    let store = Arc::new(Writer::<ConfigMap>::new());
    // A consumer that never pops.
    let (fifo, _consumer) = DeltaFifo::new(store.clone());
    let api: Api<ConfigMap> = Api::namespaced(server.server.client(), "a");
    let task = tokio::spawn(Reflector::new(api, fifo.clone(), fast()).run());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while fifo.metrics().backlog_bytes < 16 << 20 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            fifo.metrics()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // At the budget the reader waits: the rest of the stream stays in the socket. (Without the
    // byte budget the reader would go on to a thousand objects, 64 MiB, in far less than this.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    let m = fifo.metrics();
    task.abort();
    assert!(
        m.backlog_bytes <= (16 << 20) + (4 << 20) + (64 << 10) + 1024,
        "at most the budget and one page of 4 MiB: {m:?}"
    );
}
