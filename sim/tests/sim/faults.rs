//! Every fault of `Simulator::faults()`, observed from a raw loopback client.

use std::time::{Duration, Instant};

use crate::support::raw_client::{Conn, T, ev, get_json, pod};
use informer_sim::Simulator;
use serde_json::json;
use tokio::time::timeout;

const PODS: &str = "/api/v1/namespaces/default/pods";

async fn sim_with_pods(n: usize) -> Simulator {
    let sim = Simulator::start().await.unwrap();
    for i in 0..n {
        sim.create(
            "pods",
            Some("default"),
            pod(&format!("p{i}"), json!({"i": i.to_string()})),
        )
        .unwrap();
    }
    sim
}

#[tokio::test]
async fn fixed_chunking_cuts_lists_and_watches() {
    timeout(T * 3, async {
        let sim = sim_with_pods(3).await;
        sim.faults().chunk_bodies(7);
        let mut c = Conn::open(sim.addr(), "GET", PODS, &[], None).await;
        assert_eq!(c.header("transfer-encoding"), Some("chunked"));
        let l = c.json().await;
        assert_eq!(l["items"].as_array().unwrap().len(), 3);
        let (last, all) = c.chunk_sizes.split_last().unwrap();
        assert!(all.iter().all(|s| *s == 7), "{:?}", c.chunk_sizes);
        assert!(*last <= 7);
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&timeoutSeconds=1"),
            &[],
            None,
        )
        .await;
        let (bytes, clean) = w.drain().await;
        assert!(clean);
        assert_eq!(String::from_utf8(bytes).unwrap().lines().count(), 3);
        assert!(w.chunk_sizes.iter().all(|s| *s <= 7) && w.chunk_sizes.len() > 3);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn random_chunking_is_reproducible_from_the_seed() {
    timeout(T * 3, async {
        let sim = sim_with_pods(5).await;
        let mut runs = Vec::new();
        for seed in [7, 7, 8] {
            sim.faults().seed(seed);
            sim.faults().chunk_bodies_random(1, 40);
            let mut c = Conn::open(sim.addr(), "GET", PODS, &[], None).await;
            c.json().await;
            assert!(c.chunk_sizes.iter().all(|s| (1..=40).contains(s)));
            runs.push(c.chunk_sizes.clone());
        }
        assert_eq!(runs[0], runs[1], "same seed, same chunks");
        assert_ne!(runs[0], runs[2], "another seed, other chunks");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn drop_after_bytes_cuts_mid_frame() {
    timeout(T * 3, async {
        let sim = sim_with_pods(3).await;
        sim.faults().drop_watches_after_bytes(50);
        let mut w = Conn::open(sim.addr(), "GET", &format!("{PODS}?watch=1"), &[], None).await;
        assert_eq!(w.status, 200);
        let (bytes, clean) = w.drain().await;
        assert!(!clean, "the client must see an unclean end");
        assert_eq!(bytes.len(), 50);
        assert!(bytes.starts_with(b"{\"type\":\"ADDED\""));
        // Lists are not affected; a new watch after clear() is whole.
        sim.faults().clear();
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&timeoutSeconds=1"),
            &[],
            None,
        )
        .await;
        let (_, clean) = w.drain().await;
        assert!(clean);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn drop_after_events() {
    timeout(T * 3, async {
        let sim = sim_with_pods(5).await;
        sim.faults().drop_watches_after_events(2);
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&resourceVersion=1"),
            &[],
            None,
        )
        .await;
        let (bytes, clean) = w.drain().await;
        assert!(!clean);
        let text = String::from_utf8(bytes).unwrap();
        assert_eq!(text.lines().count(), 2, "{text}");
        assert!(text.ends_with('\n'));
        // The cut comes right after the n-th event, not when an (n+1)-th is due.
        sim.faults().drop_watches_after_events(5);
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&resourceVersion=1"),
            &[],
            None,
        )
        .await;
        let (bytes, clean) = w.drain().await;
        assert!(!clean);
        assert_eq!(String::from_utf8(bytes).unwrap().lines().count(), 5);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn random_drop_points_are_reproducible() {
    timeout(T * 3, async {
        let sim = sim_with_pods(5).await;
        let mut lens = Vec::new();
        for _ in 0..2 {
            sim.faults().seed(99);
            sim.faults().drop_watches_after_random_bytes(10, 500);
            let mut w = Conn::open(
                sim.addr(),
                "GET",
                &format!("{PODS}?watch=1&resourceVersion=1"),
                &[],
                None,
            )
            .await;
            let (bytes, clean) = w.drain().await;
            assert!(!clean);
            assert!((10..=500).contains(&bytes.len()));
            lens.push(bytes.len());
        }
        assert_eq!(lens[0], lens[1]);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn inject_410_into_open_watches() {
    timeout(T * 3, async {
        let sim = sim_with_pods(1).await;
        let rv = sim.resource_version();
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&resourceVersion={rv}"),
            &[],
            None,
        )
        .await;
        let mut w2 = Conn::open(sim.addr(), "GET", "/api/v1/endpoints?watch=1", &[], None).await;
        assert_eq!((w.status, w2.status), (200, 200));
        // The watches must be registered before the fault fires: an event proves it.
        sim.create("pods", Some("default"), pod("x", json!({})))
            .unwrap();
        assert_eq!(ev(&w.event().await.unwrap()).1, "x");
        sim.faults().inject_410();
        let e = w.event().await.unwrap();
        assert_eq!(e["type"], "ERROR");
        assert_eq!(e["object"]["code"], 410);
        assert_eq!(e["object"]["reason"], "Expired");
        assert!(
            e["object"]["message"]
                .as_str()
                .unwrap()
                .starts_with("too old resource version: ")
        );
        assert!(w.event().await.is_none(), "then a clean end");
        assert_eq!(w2.event().await.unwrap()["type"], "ERROR");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn close_all_watches_ends_cleanly() {
    timeout(T * 3, async {
        let sim = sim_with_pods(1).await;
        let mut w = Conn::open(sim.addr(), "GET", &format!("{PODS}?watch=1"), &[], None).await;
        assert_eq!(ev(&w.event().await.unwrap()).0, "ADDED");
        sim.faults().close_all_watches();
        assert!(w.event().await.is_none());
        assert!(w.ended);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn stall_and_resume() {
    timeout(T * 3, async {
        let sim = sim_with_pods(0).await;
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&resourceVersion=1&allowWatchBookmarks=true"),
            &[],
            None,
        )
        .await;
        sim.create("pods", Some("default"), pod("a", json!({})))
            .unwrap();
        assert_eq!(ev(&w.event().await.unwrap()).1, "a");
        sim.faults().stall_watches();
        sim.create("pods", Some("default"), pod("b", json!({})))
            .unwrap();
        assert!(
            w.event_within(Duration::from_millis(400)).await.is_err(),
            "no bytes while stalled"
        );
        sim.faults().resume_watches();
        assert_eq!(ev(&w.event().await.unwrap()).1, "b");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn fail_next_requests() {
    timeout(T * 3, async {
        let sim = sim_with_pods(1).await;
        for code in [503u16, 429, 500] {
            sim.faults().fail_next(2, code);
            for _ in 0..2 {
                let mut c = Conn::open(sim.addr(), "GET", PODS, &[], None).await;
                assert_eq!(c.status, code);
                assert_eq!(c.header("retry-after"), Some("1"));
                let st = c.json().await;
                assert_eq!(
                    (st["kind"].as_str(), st["code"].as_u64()),
                    (Some("Status"), Some(code as u64))
                );
            }
            let (s, _) = get_json(sim.addr(), PODS).await;
            assert_eq!(s, 200, "only the next k requests fail");
        }
        // Watches fail before streaming, with an ordinary non-200 response.
        sim.faults().fail_next(1, 429);
        let mut c = Conn::open(sim.addr(), "GET", &format!("{PODS}?watch=1"), &[], None).await;
        assert_eq!(c.status, 429);
        assert_eq!(c.json().await["reason"], "TooManyRequests");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn compact_history_makes_old_rvs_410() {
    timeout(T * 3, async {
        let sim = sim_with_pods(3).await;
        sim.faults().compact_history();
        let cur = sim.resource_version();
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&resourceVersion=2"),
            &[],
            None,
        )
        .await;
        let e = w.event().await.unwrap();
        assert_eq!(
            e["object"]["message"],
            format!("too old resource version: 2 ({cur})")
        );
        assert!(w.event().await.is_none());
        // The current RV is still fine.
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&resourceVersion={cur}&timeoutSeconds=1"),
            &[],
            None,
        )
        .await;
        assert!(w.event().await.is_none());
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn delay_each_event() {
    timeout(T * 3, async {
        let sim = sim_with_pods(3).await;
        let d = Duration::from_millis(150);
        sim.faults().delay_events(d);
        let t0 = Instant::now();
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&resourceVersion=1"),
            &[],
            None,
        )
        .await;
        for _ in 0..3 {
            assert_eq!(ev(&w.event().await.unwrap()).0, "ADDED");
        }
        assert!(t0.elapsed() >= d * 3, "each event waits at least the delay");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn slow_watcher_is_closed_cleanly_when_it_falls_behind() {
    timeout(T * 3, async {
        let sim = Simulator::builder().watch_buffer(16).start().await.unwrap();
        sim.faults().stall_watches();
        let mut w = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&resourceVersion=1"),
            &[],
            None,
        )
        .await;
        for i in 0..100 {
            sim.create("pods", Some("default"), pod(&format!("p{i}"), json!({})))
                .unwrap();
        }
        sim.faults().resume_watches();
        let (_, clean) = w.drain().await;
        assert!(
            clean,
            "a lagging watcher gets a clean end, like the apiserver's forced close"
        );
    })
    .await
    .unwrap();
}

async fn wait_for_watches(sim: &Simulator, n: u64) {
    let t0 = Instant::now();
    while sim.active_watches() != n {
        assert!(
            t0.elapsed() < T,
            "active_watches stuck at {} (want {n})",
            sim.active_watches()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn watch_tasks_end_when_clients_leave() {
    timeout(T * 3, async {
        let sim = sim_with_pods(1).await;
        let w1 = Conn::open(sim.addr(), "GET", &format!("{PODS}?watch=1"), &[], None).await;
        let w2 = Conn::open(
            sim.addr(),
            "GET",
            &format!("{PODS}?watch=1&resourceVersion=2"),
            &[],
            None,
        )
        .await;
        wait_for_watches(&sim, 2).await;
        drop(w1);
        wait_for_watches(&sim, 1).await; // no event needed to notice
        sim.faults().close_all_watches();
        wait_for_watches(&sim, 0).await;
        drop(w2);
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn watch_list_can_be_disabled() {
    timeout(T * 3, async {
        let sim = sim_with_pods(1).await;
        sim.faults().disable_watch_list(true);
        let q = format!("{PODS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
        let mut w = Conn::open(sim.addr(), "GET", &q, &[], None).await;
        assert_eq!(w.status, 200);
        let e = w.event().await.unwrap();
        assert_eq!(e["type"], "ERROR");
        assert_eq!(e["object"]["code"], 500);
        assert_eq!(e["object"]["reason"], "InternalError");
        assert!(e["object"]["message"].as_str().unwrap().contains("RequestWatchProgress is disabled"));
        assert!(w.event().await.is_none());
        // Ordinary watches still work; re-enabling restores watch-list.
        let mut w = Conn::open(sim.addr(), "GET", &format!("{PODS}?watch=1"), &[], None).await;
        assert_eq!(ev(&w.event().await.unwrap()).0, "ADDED");
        sim.faults().disable_watch_list(false);
        let mut w = Conn::open(sim.addr(), "GET", &q, &[], None).await;
        assert_eq!(ev(&w.event().await.unwrap()).0, "ADDED");
        assert_eq!(ev(&w.event().await.unwrap()).0, "BOOKMARK");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn the_initial_events_end_bookmark_can_be_withheld() {
    timeout(T * 3, async {
        let sim = Simulator::builder()
            .bookmark_interval(Duration::from_millis(100))
            .start()
            .await
            .unwrap();
        sim.create("pods", Some("default"), pod("p0", json!({})))
            .unwrap();
        sim.faults().withhold_initial_events_end(true);
        let q = format!("{PODS}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true");
        let end = |e: &serde_json::Value| {
            e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"
        };
        let mut w = Conn::open(sim.addr(), "GET", &q, &[], None).await;
        assert_eq!(ev(&w.event().await.unwrap()).0, "ADDED");
        // Periodic bookmarks, alive, but never the end of the initial events.
        for _ in 0..3 {
            let e = w.event().await.unwrap();
            assert_eq!(ev(&e).0, "BOOKMARK");
            assert!(!end(&e), "{e}");
        }
        sim.faults().withhold_initial_events_end(false);
        let mut w = Conn::open(sim.addr(), "GET", &q, &[], None).await;
        assert_eq!(ev(&w.event().await.unwrap()).0, "ADDED");
        assert!(end(&w.event().await.unwrap()));
    })
    .await
    .unwrap();
}
