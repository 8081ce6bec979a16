//! The simulator's wire protocol, checked over real loopback HTTP with a raw client: status
//! codes, headers, bodies, and the order and resourceVersions of watch events (docs/client-go.md
//! §2, X1–X17).

use std::time::Duration;

use crate::support::raw_client::{Conn, T, ev, get_json, pod, send_json};
use informer_sim::Simulator;
use serde_json::{Value, json};
use tokio::time::timeout;

const EP: &str = "/api/v1/namespaces/default/endpoints";

fn endpoints(name: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"app": name, "tier": "web"}},
           "subsets": [{"addresses": [{"ip": "10.1.0.1"}], "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]})
}

async fn sim_with_endpoints(n: usize) -> Simulator {
    let sim = Simulator::start().await.unwrap();
    for i in 1..=n {
        sim.create("endpoints", Some("default"), endpoints(&format!("svc-{i}")))
            .unwrap();
    }
    sim
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn list_shape_and_consistent_pagination() {
    timeout(T * 3, async {
        let sim = sim_with_endpoints(5).await;
        let addr = sim.addr();
        let rv = sim.resource_version().to_string();
        let mut c = Conn::open(addr, "GET", &format!("{EP}?limit=2"), &[], None).await;
        assert_eq!(c.status, 200);
        assert_eq!(c.header("content-type"), Some("application/json"));
        assert!(c.header("content-length").is_some(), "lists are not chunked");
        let body = c.body().await;
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(
            text.starts_with(&format!("{{\"kind\":\"EndpointsList\",\"apiVersion\":\"v1\",\"metadata\":{{\"resourceVersion\":\"{rv}\",\"continue\":\"")),
            "{text}"
        );
        let page1: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(page1["metadata"]["remainingItemCount"], 3);
        assert_eq!(names(&page1), ["svc-1", "svc-2"]);
        assert!(page1["items"][0].get("kind").is_none(), "typed list items carry no kind");
        assert!(page1["items"][0].get("apiVersion").is_none());
        // A write between pages does not show up: the token pins the snapshot RV.
        sim.delete("endpoints", Some("default"), "svc-3").unwrap();
        let tok = page1["metadata"]["continue"].as_str().unwrap();
        let (s, page2) = get_json(addr, &format!("{EP}?limit=2&continue={tok}")).await;
        assert_eq!(s, 200);
        assert_eq!(page2["metadata"]["resourceVersion"], rv.as_str());
        assert_eq!(names(&page2), ["svc-3", "svc-4"]);
        assert_eq!(page2["metadata"]["remainingItemCount"], 1);
        let tok = page2["metadata"]["continue"].as_str().unwrap();
        let (_, page3) = get_json(addr, &format!("{EP}?limit=2&continue={tok}")).await;
        assert_eq!(names(&page3), ["svc-5"]);
        assert!(page3["metadata"].get("continue").is_none());
        assert!(page3["metadata"].get("remainingItemCount").is_none());
        // Empty list still has items: [].
        let (_, empty) = get_json(addr, "/api/v1/namespaces/other/endpoints").await;
        assert_eq!(empty["items"], json!([]));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn continue_token_expires_with_history() {
    timeout(T * 3, async {
        let sim = sim_with_endpoints(3).await;
        let addr = sim.addr();
        let (_, page1) = get_json(addr, &format!("{EP}?limit=1")).await;
        let tok = page1["metadata"]["continue"].as_str().unwrap().to_string();
        sim.create("endpoints", Some("default"), endpoints("svc-9"))
            .unwrap();
        sim.faults().compact_history();
        let mut c = Conn::open(
            addr,
            "GET",
            &format!("{EP}?limit=1&continue={tok}"),
            &[],
            None,
        )
        .await;
        assert_eq!(c.status, 410);
        let st = c.json().await;
        assert_eq!(st["reason"], "Expired");
        assert_eq!(st["code"], 410);
        assert!(
            st["message"]
                .as_str()
                .unwrap()
                .starts_with("The provided continue parameter is too old")
        );
        // The fresh token is an inconsistent continuation ("rv":-1) from the same key.
        let fresh = st["metadata"]["continue"].as_str().unwrap();
        assert_eq!(
            fresh,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0Ijoic3ZjLTFcdTAwMDAifQ"
        );
        let (s, rest) = get_json(addr, &format!("{EP}?continue={fresh}")).await;
        assert_eq!(s, 200);
        assert_eq!(names(&rest), ["svc-2", "svc-3", "svc-9"]);
        // Garbage tokens are a 400, not a panic.
        let (s, st) = get_json(addr, &format!("{EP}?limit=1&continue=%%%")).await;
        assert_eq!((s, st["reason"].as_str()), (400, Some("BadRequest")));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn list_resource_version_semantics() {
    timeout(T * 3, async {
        let sim = Simulator::builder().rv_wait(Duration::from_millis(200)).start().await.unwrap();
        let addr = sim.addr();
        for i in 1..=3 {
            sim.create("endpoints", Some("default"), endpoints(&format!("svc-{i}"))).unwrap();
        }
        let old_rv = sim.resource_version();
        sim.delete("endpoints", Some("default"), "svc-1").unwrap();
        sim.create("endpoints", Some("default"), endpoints("svc-4")).unwrap();
        let cur = sim.resource_version();

        // RV=0: any freshness, limit ignored.
        let (_, l) = get_json(addr, &format!("{EP}?resourceVersion=0&limit=1")).await;
        assert_eq!(names(&l), ["svc-2", "svc-3", "svc-4"]);
        assert!(l["metadata"].get("continue").is_none());
        // RV unset: latest, limit honored.
        let (_, l) = get_json(addr, &format!("{EP}?limit=1")).await;
        assert_eq!(names(&l), ["svc-2"]);
        assert_eq!(l["metadata"]["resourceVersion"], cur.to_string());
        // Exact: the state at old_rv, rebuilt from history.
        let (s, l) = get_json(addr, &format!("{EP}?resourceVersion={old_rv}&resourceVersionMatch=Exact")).await;
        assert_eq!(s, 200);
        assert_eq!(names(&l), ["svc-1", "svc-2", "svc-3"]);
        assert_eq!(l["metadata"]["resourceVersion"], old_rv.to_string());
        // Legacy exact: limit set and RV not in {"", "0"}.
        let (_, l) = get_json(addr, &format!("{EP}?resourceVersion={old_rv}&limit=10")).await;
        assert_eq!(names(&l), ["svc-1", "svc-2", "svc-3"]);
        // NotOlderThan / no limit: latest.
        let (_, l) = get_json(addr, &format!("{EP}?resourceVersion={old_rv}")).await;
        assert_eq!(names(&l), ["svc-2", "svc-3", "svc-4"]);
        // Too large: 504 after the wait.
        let mut c = Conn::open(addr, "GET", &format!("{EP}?resourceVersion={}&resourceVersionMatch=NotOlderThan", cur + 100), &[], None).await;
        assert_eq!(c.status, 504);
        let st = c.json().await;
        assert_eq!(st["reason"], "Timeout");
        assert_eq!(st["message"], format!("Timeout: Too large resource version: {}, current: {cur}", cur + 100));
        assert_eq!(st["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
        // A write that arrives during the wait satisfies it.
        let want = cur + 1;
        let waiter = tokio::spawn(async move {
            get_json(addr, &format!("{EP}?resourceVersion={want}&resourceVersionMatch=NotOlderThan")).await
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        sim.create("endpoints", Some("default"), endpoints("svc-5")).unwrap();
        let (s, _) = waiter.await.unwrap();
        assert!(s == 200 || s == 504, "{s}"); // 504 only if the machine stalled past the wait
        // Compacted exact read.
        sim.compact();
        let mut c = Conn::open(addr, "GET", &format!("{EP}?resourceVersion={old_rv}&resourceVersionMatch=Exact&limit=1"), &[], None).await;
        assert_eq!(c.status, 410);
        let body = String::from_utf8(c.body().await).unwrap();
        assert_eq!(body, r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"The resourceVersion for the provided list is too old.","reason":"Expired","code":410}"#);
        // Validation.
        for bad in ["resourceVersionMatch=Exact", "resourceVersion=0&resourceVersionMatch=Exact", "resourceVersion=1&resourceVersionMatch=Bogus", "sendInitialEvents=true"] {
            let (s, st) = get_json(addr, &format!("{EP}?{bad}")).await;
            assert_eq!((s, st["reason"].as_str()), (422, Some("Invalid")), "{bad}");
        }
        for bad in ["resourceVersion=abc", "limit=x", "timeoutSeconds=-", "watch=maybe"] {
            let (s, _) = get_json(addr, &format!("{EP}?{bad}")).await;
            assert_eq!(s, 400, "{bad}");
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn list_selectors() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        sim.create(
            "pods",
            Some("a"),
            pod("p1", json!({"app": "web", "tier": "fe"})),
        )
        .unwrap();
        sim.create("pods", Some("a"), pod("p2", json!({"app": "api"})))
            .unwrap();
        sim.create("pods", Some("b"), pod("p3", json!({"app": "web"})))
            .unwrap();
        let q = |s: &str| format!("/api/v1/pods?labelSelector={s}");
        for (sel, want) in [
            ("app%3Dweb", vec!["p1", "p3"]),
            ("app%21%3Dweb", vec!["p2"]),
            ("app+in+%28api%2Cweb%29", vec!["p1", "p2", "p3"]),
            ("app+notin+%28web%29", vec!["p2"]),
            ("tier", vec!["p1"]),
            ("%21tier", vec!["p2", "p3"]),
        ] {
            let (s, l) = get_json(addr, &q(sel)).await;
            assert_eq!(s, 200);
            assert_eq!(names(&l), want, "{sel}");
        }
        let (_, l) = get_json(addr, "/api/v1/pods?fieldSelector=metadata.namespace%3Db").await;
        assert_eq!(names(&l), ["p3"]);
        let (_, l) = get_json(addr, "/api/v1/pods?fieldSelector=metadata.name%21%3Dp1").await;
        assert_eq!(names(&l), ["p2", "p3"]);
        // A selector with a limit: no remainingItemCount.
        let (_, l) = get_json(addr, "/api/v1/pods?labelSelector=app%3Dweb&limit=1").await;
        assert_eq!(names(&l), ["p1"]);
        assert!(l["metadata"].get("continue").is_some());
        assert!(l["metadata"].get("remainingItemCount").is_none());
        for bad in [
            "labelSelector=app+in+%28web",
            "labelSelector=%3D%3D",
            "fieldSelector=spec.nodeName%3Dx",
        ] {
            let (s, st) = get_json(addr, &format!("/api/v1/pods?{bad}")).await;
            assert_eq!(
                (s, st["reason"].as_str()),
                (400, Some("BadRequest")),
                "{bad}"
            );
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn watch_resumes_from_resource_version() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        sim.create("pods", Some("default"), pod("a", json!({})))
            .unwrap();
        sim.create("pods", Some("default"), pod("b", json!({})))
            .unwrap();
        let r = sim.resource_version();
        sim.patch(
            "pods",
            Some("default"),
            "a",
            &json!({"metadata": {"labels": {"x": "1"}}}),
        )
        .unwrap();
        sim.delete("pods", Some("default"), "b").unwrap();
        let mut w = Conn::open(
            addr,
            "GET",
            &format!(
                "/api/v1/namespaces/default/pods?watch=1&resourceVersion={r}&timeoutSeconds=30"
            ),
            &[],
            None,
        )
        .await;
        assert_eq!(w.status, 200);
        assert_eq!(w.header("content-type"), Some("application/json"));
        assert_eq!(w.header("transfer-encoding"), Some("chunked"));
        let e1 = w.event().await.unwrap();
        assert_eq!(
            ev(&e1),
            ("MODIFIED".into(), "a".into(), (r + 1).to_string())
        );
        assert_eq!(e1["object"]["kind"], "Pod");
        assert_eq!(e1["object"]["apiVersion"], "v1");
        let e2 = w.event().await.unwrap();
        assert_eq!(
            ev(&e2),
            ("DELETED".into(), "b".into(), (r + 2).to_string()),
            "DELETED carries the deletion RV"
        );
        // Live events follow, in order; other namespaces are not seen.
        sim.create("pods", Some("other"), pod("c", json!({})))
            .unwrap();
        // Other resources are not seen either.
        sim.create("endpoints", Some("default"), endpoints("e"))
            .unwrap();
        sim.create("pods", Some("default"), pod("d", json!({})))
            .unwrap();
        let e3 = w.event().await.unwrap();
        assert_eq!(ev(&e3), ("ADDED".into(), "d".into(), (r + 5).to_string()));
        // An all-namespaces watch sees both.
        let mut all = Conn::open(
            addr,
            "GET",
            &format!("/api/v1/pods?watch=true&resourceVersion={}", r + 2),
            &[],
            None,
        )
        .await;
        assert_eq!(ev(&all.event().await.unwrap()).1, "c");
        assert_eq!(ev(&all.event().await.unwrap()).1, "d");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn watch_frames_are_compact_json_lines() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            "/api/v1/namespaces/default/pods?watch=1&resourceVersion=1&timeoutSeconds=1",
            &[],
            None,
        )
        .await;
        sim.create("pods", Some("default"), pod("a", json!({})))
            .unwrap();
        let (bytes, clean) = w.drain().await;
        assert!(
            clean,
            "timeoutSeconds ends the body with the terminating chunk"
        );
        let text = String::from_utf8(bytes).unwrap();
        assert!(
            text.starts_with(
                r#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"#
            ),
            "{text}"
        );
        assert!(text.ends_with("}}\n"));
        assert_eq!(text.matches('\n').count(), 1);
        assert!(
            !text.contains(": ") && !text.contains("\n "),
            "compact JSON"
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn watch_response_head_matches_the_apiserver() {
    timeout(T * 3, async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let sim = Simulator::start().await.unwrap();
        let mut s = tokio::net::TcpStream::connect(sim.addr()).await.unwrap();
        s.write_all(b"GET /api/v1/pods?watch=1&timeoutSeconds=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while !out.ends_with(b"0\r\n\r\n") {
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0);
            out.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8(out).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let mut lines: Vec<&str> = head.split("\r\n").collect();
        lines.retain(|l| !l.starts_with("Date: "));
        assert_eq!(
            lines,
            [
                "HTTP/1.1 200 OK",
                "Cache-Control: no-cache, private",
                "Content-Type: application/json",
                "Transfer-Encoding: chunked"
            ]
        );
        assert_eq!(body, "0\r\n\r\n", "no events, then the terminating chunk");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn watch_without_rv_sends_synthetic_added() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        sim.create("pods", Some("default"), pod("a", json!({})))
            .unwrap();
        sim.create("pods", Some("default"), pod("b", json!({})))
            .unwrap();
        for q in ["watch=true", "watch=true&resourceVersion=0"] {
            let mut w = Conn::open(
                addr,
                "GET",
                &format!("/api/v1/namespaces/default/pods?{q}"),
                &[],
                None,
            )
            .await;
            let mut got: Vec<_> =
                vec![ev(&w.event().await.unwrap()), ev(&w.event().await.unwrap())];
            got.sort();
            assert_eq!(got[0], ("ADDED".into(), "a".into(), "2".into()), "{q}");
            assert_eq!(got[1], ("ADDED".into(), "b".into(), "3".into()), "{q}");
            // No end marker: nothing more until a live event.
            assert!(w.event_within(Duration::from_millis(200)).await.is_err());
        }
        let mut w = Conn::open(
            addr,
            "GET",
            "/api/v1/namespaces/default/pods?watch=true",
            &[],
            None,
        )
        .await;
        w.event().await.unwrap();
        w.event().await.unwrap();
        sim.delete("pods", Some("default"), "a").unwrap();
        assert_eq!(
            ev(&w.event().await.unwrap()),
            ("DELETED".into(), "a".into(), "4".into())
        );
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn watch_send_initial_events_ends_with_annotated_bookmark() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        sim.create("pods", Some("default"), pod("a", json!({}))).unwrap();
        sim.create("pods", Some("default"), pod("b", json!({}))).unwrap();
        let rv = sim.resource_version();
        let mut w = Conn::open(addr, "GET", "/api/v1/pods?allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=30&watch=true", &[], None).await;
        assert_eq!(w.status, 200);
        assert_eq!(ev(&w.event().await.unwrap()).0, "ADDED");
        assert_eq!(ev(&w.event().await.unwrap()).0, "ADDED");
        let bm = w.event().await.unwrap();
        assert_eq!(
            bm,
            json!({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion": rv.to_string(),"annotations":{"k8s.io/initial-events-end":"true"}}}})
        );
        sim.create("pods", Some("default"), pod("c", json!({}))).unwrap();
        assert_eq!(ev(&w.event().await.unwrap()), ("ADDED".into(), "c".into(), (rv + 1).to_string()));
        // sendInitialEvents needs resourceVersionMatch=NotOlderThan.
        let (s, st) = get_json(addr, "/api/v1/pods?watch=true&sendInitialEvents=true").await;
        assert_eq!((s, st["reason"].as_str()), (422, Some("Invalid")));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn periodic_bookmarks_only_at_a_version_newer_than_the_watchs() {
    timeout(T * 3, async {
        let sim = Simulator::builder().bookmark_interval(Duration::from_millis(100)).start().await.unwrap();
        sim.create("pods", Some("default"), pod("a", json!({}))).unwrap();
        let rv = sim.resource_version();
        let mut w = Conn::open(sim.addr(), "GET", &format!("/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}"), &[], None).await;
        // The watch cache sends a bookmark only at a version newer than the watch's: a watch of a
        // quiet resource hears nothing at all (five periods here).
        assert!(w.event_within(Duration::from_millis(500)).await.is_err(), "a bookmark on a quiet watch");
        sim.create("pods", Some("default"), pod("b", json!({}))).unwrap();
        assert_eq!(ev(&w.event().await.unwrap()), ("ADDED".into(), "b".into(), (rv + 1).to_string()));
        let bm = w.event().await.unwrap();
        assert_eq!(bm, json!({"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion": (rv + 1).to_string()}}}));
        // Without allowWatchBookmarks: none, even at a newer version.
        let mut w = Conn::open(sim.addr(), "GET", &format!("/api/v1/pods?watch=1&resourceVersion={rv}"), &[], None).await;
        assert_eq!(ev(&w.event().await.unwrap()).0, "ADDED");
        assert!(w.event_within(Duration::from_millis(500)).await.is_err());
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn bookmark_two_seconds_before_the_deadline() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap(); // periodic bookmarks every 60 s: not in play
        sim.create("pods", Some("default"), pod("a", json!({}))).unwrap();
        let rv = sim.resource_version();
        let url = |rv: u64| format!("/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=3");
        let mut w = Conn::open(sim.addr(), "GET", &url(rv), &[], None).await;
        sim.create("pods", Some("default"), pod("b", json!({}))).unwrap();
        assert_eq!(ev(&w.event().await.unwrap()).0, "ADDED");
        let bm = w.event().await.unwrap();
        assert_eq!(ev(&bm), ("BOOKMARK".into(), "".into(), (rv + 1).to_string()));
        assert!(w.event().await.is_none(), "then the clean end at the deadline");
        // A quiet watch (nothing newer than its version): no bookmark, only the clean end.
        let mut w = Conn::open(sim.addr(), "GET", &url(rv + 1), &[], None).await;
        assert!(w.event().await.is_none(), "a bookmark on a quiet watch");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn selector_transitions_in_watch() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        sim.create("endpoints", Some("default"), endpoints("svc-1")).unwrap();
        let rv = sim.resource_version();
        let mut w = Conn::open(sim.addr(), "GET", &format!("{EP}?watch=true&labelSelector=tier%3Dweb&resourceVersion={rv}"), &[], None).await;
        sim.patch("endpoints", Some("default"), "svc-1", &json!({"metadata": {"labels": {"tier": "db"}}})).unwrap();
        let e = w.event().await.unwrap();
        assert_eq!(ev(&e), ("DELETED".into(), "svc-1".into(), (rv + 1).to_string()));
        assert_eq!(e["object"]["metadata"]["labels"]["tier"], "web", "DELETED carries the previous content");
        sim.patch("endpoints", Some("default"), "svc-1", &json!({"metadata": {"labels": {"tier": "other"}}})).unwrap();
        sim.patch("endpoints", Some("default"), "svc-1", &json!({"metadata": {"labels": {"tier": "web"}}})).unwrap();
        let e = w.event().await.unwrap();
        assert_eq!(ev(&e), ("ADDED".into(), "svc-1".into(), (rv + 3).to_string()));
        let mut f = Conn::open(sim.addr(), "GET", &format!("/api/v1/endpoints?watch=true&fieldSelector=metadata.name%3Dsvc-2&resourceVersion={}", rv + 3), &[], None).await;
        sim.create("endpoints", Some("default"), endpoints("svc-3")).unwrap();
        sim.create("endpoints", Some("default"), endpoints("svc-2")).unwrap();
        assert_eq!(ev(&f.event().await.unwrap()), ("ADDED".into(), "svc-2".into(), (rv + 5).to_string()));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn watch_too_old_is_an_error_event_in_a_200_stream() {
    timeout(T * 3, async {
        let sim = Simulator::builder().history_max_events(2).start().await.unwrap();
        for i in 0..5 {
            sim.create("endpoints", Some("default"), endpoints(&format!("svc-{i}"))).unwrap();
        }
        // RVs 2..=6 written; history keeps 5 and 6, so the oldest usable RV is 4.
        let mut w = Conn::open(sim.addr(), "GET", &format!("{EP}?watch=true&resourceVersion=1"), &[], None).await;
        assert_eq!(w.status, 200);
        let (bytes, clean) = w.drain().await;
        assert!(clean);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 1 (4)\",\"reason\":\"Expired\",\"code\":410}}\n"
        );
        let mut w = Conn::open(sim.addr(), "GET", &format!("{EP}?watch=true&resourceVersion=4&timeoutSeconds=1"), &[], None).await;
        assert_eq!(ev(&w.event().await.unwrap()).2, "5");
        assert_eq!(ev(&w.event().await.unwrap()).2, "6");
        assert!(w.event().await.is_none());
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn watch_rv_in_the_future_waits_for_it() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{EP}?watch=true&resourceVersion=3&timeoutSeconds=5"),
            &[],
            None,
        )
        .await;
        assert_eq!(w.status, 200);
        for i in 0..4 {
            sim.create("endpoints", Some("default"), endpoints(&format!("svc-{i}")))
                .unwrap();
        }
        // RVs 2 and 3 are at or before the requested RV: only 4 and 5 arrive.
        assert_eq!(ev(&w.event().await.unwrap()).2, "4");
        assert_eq!(ev(&w.event().await.unwrap()).2, "5");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn writes_over_http() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        let json_ct = "application/json";
        let (s, created) = send_json(addr, "POST", EP, json_ct, &endpoints("svc-5")).await;
        assert_eq!(s, 201);
        let meta = &created["metadata"];
        assert_eq!(meta["namespace"], "default");
        assert_eq!(meta["resourceVersion"], "2");
        assert_eq!(meta["uid"].as_str().unwrap().len(), 36);
        assert_eq!(meta["creationTimestamp"].as_str().unwrap().len(), 20);
        assert_eq!(created["kind"], "Endpoints");
        // Duplicate create.
        let mut c = Conn::open(addr, "POST", EP, &[("Content-Type", json_ct)], Some(&serde_json::to_vec(&endpoints("svc-5")).unwrap())).await;
        assert_eq!(c.status, 409);
        assert_eq!(
            String::from_utf8(c.body().await).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"endpoints \"svc-5\" already exists","reason":"AlreadyExists","details":{"name":"svc-5","kind":"endpoints"},"code":409}"#
        );
        // PUT with a stale RV.
        let mut stale = created.clone();
        stale["metadata"]["resourceVersion"] = json!("1");
        let (s, st) = send_json(addr, "PUT", &format!("{EP}/svc-5"), json_ct, &stale).await;
        assert_eq!((s, st["reason"].as_str()), (409, Some("Conflict")));
        assert_eq!(st["message"], "Operation cannot be fulfilled on endpoints \"svc-5\": the object has been modified; please apply your changes to the latest version and try again");
        // PUT with the current RV.
        let mut upd = created.clone();
        upd["metadata"]["labels"]["tier"] = json!("db");
        let (s, put) = send_json(addr, "PUT", &format!("{EP}/svc-5"), json_ct, &upd).await;
        assert_eq!((s, put["metadata"]["resourceVersion"].as_str()), (200, Some("3")));
        assert_eq!(put["metadata"]["uid"], created["metadata"]["uid"]);
        // A no-op PUT keeps the RV.
        let (_, same) = send_json(addr, "PUT", &format!("{EP}/svc-5"), json_ct, &put).await;
        assert_eq!(same["metadata"]["resourceVersion"], "3");
        // Merge patch (both content types).
        for ct in ["application/merge-patch+json", "application/strategic-merge-patch+json"] {
            let (s, p) = send_json(addr, "PATCH", &format!("{EP}/svc-5"), ct, &json!({"metadata": {"labels": {"ct": ct.len().to_string()}}})).await;
            assert_eq!(s, 200, "{ct}");
            assert_eq!(p["metadata"]["labels"]["tier"], "db");
        }
        let (s, _) = send_json(addr, "PATCH", &format!("{EP}/svc-5"), "text/plain", &json!([])).await;
        assert_eq!(s, 415);
        // GET missing: byte-exact 404.
        let mut c = Conn::open(addr, "GET", &format!("{EP}/nope"), &[], None).await;
        assert_eq!(c.status, 404);
        assert_eq!(
            String::from_utf8(c.body().await).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"endpoints \"nope\" not found","reason":"NotFound","details":{"name":"nope","kind":"endpoints"},"code":404}"#
        );
        // DELETE of Endpoints answers a Success Status; of a Pod, the object.
        let (s, st) = send_json(addr, "DELETE", &format!("{EP}/svc-5"), json_ct, &json!({})).await;
        assert_eq!(s, 200);
        assert_eq!(st, json!({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":{"name":"svc-5","kind":"endpoints","uid":created["metadata"]["uid"]}}));
        let (s, _) = send_json(addr, "DELETE", &format!("{EP}/svc-5"), json_ct, &json!({})).await;
        assert_eq!(s, 404);
        let (_, p) = send_json(addr, "POST", "/api/v1/namespaces/default/pods", json_ct, &json!({"metadata": {"generateName": "web-"}, "spec": {"containers": []}})).await;
        let name = p["metadata"]["name"].as_str().unwrap().to_string();
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert_eq!(p["metadata"]["generation"], 1);
        let (_, p2) = send_json(addr, "PATCH", &format!("/api/v1/namespaces/default/pods/{name}"), "application/merge-patch+json", &json!({"spec": {"nodeName": "n1"}})).await;
        assert_eq!(p2["metadata"]["generation"], 2, "spec change bumps generation");
        let (s, d) = send_json(addr, "DELETE", &format!("/api/v1/namespaces/default/pods/{name}"), json_ct, &json!({})).await;
        assert_eq!((s, d["kind"].as_str()), (200, Some("Pod")));
        // Namespace mismatch, bad JSON, missing name.
        let (s, _) = send_json(addr, "POST", EP, json_ct, &json!({"metadata": {"name": "x", "namespace": "kube-system"}})).await;
        assert_eq!(s, 400);
        let mut c = Conn::open(addr, "POST", EP, &[("Content-Type", json_ct)], Some(b"{not json")).await;
        assert_eq!(c.status, 400);
        c.body().await;
        let (s, st) = send_json(addr, "POST", EP, json_ct, &json!({"metadata": {}})).await;
        assert_eq!((s, st["reason"].as_str()), (422, Some("Invalid")));
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn discovery_documents() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        let (s, v) = get_json(addr, "/version").await;
        assert_eq!(s, 200);
        assert_eq!(v["gitVersion"], "v1.30.0-informer-sim");
        let (_, v) = get_json(addr, "/api").await;
        assert_eq!(
            (v["kind"].as_str(), v["versions"][0].as_str()),
            (Some("APIVersions"), Some("v1"))
        );
        let (_, v) = get_json(addr, "/apis").await;
        assert_eq!(v["kind"], "APIGroupList");
        assert!(
            v["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == "discovery.k8s.io")
        );
        let (_, v) = get_json(addr, "/api/v1").await;
        assert_eq!(v["kind"], "APIResourceList");
        let res = v["resources"].as_array().unwrap();
        let pods = res.iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        assert_eq!(pods["namespaced"], true);
        assert!(pods["verbs"].as_array().unwrap().contains(&json!("watch")));
        let ns = res.iter().find(|r| r["name"] == "namespaces").unwrap();
        assert_eq!(ns["namespaced"], false);
        let (s, v) = get_json(addr, "/apis/discovery.k8s.io/v1").await;
        assert_eq!(s, 200);
        assert_eq!(v["resources"][0]["kind"], "EndpointSlice");
        for p in [
            "/openapi/v2",
            "/openapi/v3/apis/nope/v1",
            "/apis/nope/v1",
            "/api/v1/nopes",
            "/",
        ] {
            let (s, st) = get_json(addr, p).await;
            assert_eq!((s, st["kind"].as_str()), (404, Some("Status")), "{p}");
        }
        // OpenAPI v3 declares only that PATCH takes fieldValidation (what kubectl checks).
        let (s, root) = get_json(addr, "/openapi/v3").await;
        assert_eq!(s, 200);
        assert_eq!(
            root["paths"]["api/v1"]["serverRelativeURL"],
            "/openapi/v3/api/v1?hash=0"
        );
        let (s, doc) = get_json(addr, "/openapi/v3/api/v1").await;
        assert_eq!(s, 200);
        let pods = &doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["patch"];
        assert_eq!(pods["x-kubernetes-group-version-kind"]["kind"], "Pod");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn custom_resources_and_cluster_scope() {
    timeout(T * 3, async {
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        sim.register_resource(
            informer::ApiResource::new("example.com", "v1", "Widget", "widgets", true),
            &["wg"],
        );
        let base = "/apis/example.com/v1/namespaces/default/widgets";
        let (s, _) = send_json(
            addr,
            "POST",
            base,
            "application/json",
            &json!({"metadata": {"name": "w1"}, "spec": {"size": 1}}),
        )
        .await;
        assert_eq!(s, 201);
        let (_, l) = get_json(addr, base).await;
        assert_eq!(l["kind"], "WidgetList");
        assert_eq!(
            l["items"][0]["kind"], "Widget",
            "custom resource items carry kind"
        );
        assert_eq!(l["items"][0]["apiVersion"], "example.com/v1");
        let (_, d) = get_json(addr, "/apis/example.com/v1").await;
        assert_eq!(d["resources"][0]["shortNames"], json!(["wg"]));
        assert_eq!(
            sim.get("wg", Some("default"), "w1").unwrap()["spec"]["size"],
            1
        );
        // Cluster-scoped: nodes.
        let (s, n) = send_json(
            addr,
            "POST",
            "/api/v1/nodes",
            "application/json",
            &json!({"metadata": {"name": "n1", "namespace": "ignored"}}),
        )
        .await;
        assert_eq!(s, 201);
        assert!(n["metadata"].get("namespace").is_none());
        let (s, _) = get_json(addr, "/api/v1/nodes/n1").await;
        assert_eq!(s, 200);
        let (s, _) = get_json(addr, "/api/v1/namespaces/default/nodes").await;
        assert_eq!(s, 404);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn hostile_input_never_kills_the_server() {
    timeout(T * 3, async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let sim = Simulator::start().await.unwrap();
        let addr = sim.addr();
        for garbage in [
            &b"\x00\x01\x02\r\n\r\n"[..],
            b"GET / HTTP/9.9\r\n\r\n",
            b"GET /api/v1/pods?limit=%ZZ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ] {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.write_all(garbage).await.unwrap();
            let mut out = Vec::new();
            let _ = timeout(T, s.read_to_end(&mut out)).await;
        }
        for p in [
            "/api/v1/namespaces",
            "/api/v1/namespaces/x/pods/y/z/w",
            "/apis/a/b/c/d/e/f",
            "/api/v1/pods?labelSelector=%28%28%28",
            "/api/v1/pods?fieldSelector=%3D",
            "/api/v1/pods?watch=1&timeoutSeconds=18446744073709551615&limit=-5&resourceVersion=18446744073709551615",
        ] {
            let c = Conn::open(addr, "GET", p, &[], None).await;
            assert!(c.status < 500, "{p}: {}", c.status);
        }
        let (s, _) = get_json(addr, "/version").await;
        assert_eq!(s, 200);
    })
    .await
    .unwrap();
}
