//! `kwatch watch -o jsonl` against a scripted HTTP/1.1 server replaying a real kube-apiserver
//! 1.20 (issue #31): the LIST pages and the watch are the captured bytes
//! (`fixtures/wire/real-1.20-*`), and the first LIST meets one of the failures observed in front
//! of real servers: a proxy's HTML 500 page, envoy's plain-text 503 with `Retry-After`, a 500
//! whose body stalls after 40 bytes, a request that gets no answer at all, a 429 with a
//! `Retry-After` in its `Status`, a LIST body cut mid-way. In every case kwatch must converge to
//! the server's state (the same lines as with no fault), report the failure on stderr, keep
//! trying past 30 s, and wait before it asks again as the rules say (0.8 s at least, the
//! `Retry-After` when there is one, the stall and open deadlines).
//!
//! The cases run side by side (each its own server and kwatch), so the whole takes about as
//! long as the slowest (no answer: the 60 s open deadline). Timing is checked from below only
//! (a wait is never shorter than the rule), with a generous ceiling: a loaded machine is late,
//! never early.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::raw_server::{Body, RawServer, Reply, capture};
use serde_json::Value;
use tokio::process::Command;

/// The discovery document of `/api/v1` (not captured: written as 1.20 serves it, reduced to
/// the one resource).
const API_V1: &[u8] = br#"{"kind":"APIResourceList","groupVersion":"v1","resources":[{"name":"endpoints","singularName":"","namespaced":true,"kind":"Endpoints","verbs":["create","delete","deletecollection","get","list","patch","update","watch"],"shortNames":["ep"]}]}"#;

/// What a 1.20 server answers a streaming list (not captured: written from 1.20's ListOptions
/// validation, which forbids `resourceVersionMatch` on a watch).
const NO_STREAMING_LISTS: &[u8] = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch","reason":"Invalid","details":{"group":"meta.k8s.io","kind":"ListOptions","causes":[{"reason":"FieldValueForbidden","message":"Forbidden: resourceVersionMatch is forbidden for watch","field":"resourceVersionMatch"}]},"code":422}"#;

/// The first LIST's fault, and the least time kwatch must wait before the next LIST.
struct Case {
    name: &'static str,
    fault: fn() -> Reply,
    at_least: Duration,
    /// Most of the wait a loaded machine may add on top of the rule (backoff jitter included).
    slack: Duration,
    /// Words of the failure that must be on stderr.
    reported: &'static str,
}

fn nginx_500() -> Reply {
    Reply {
        head: vec![
            "HTTP/1.1 500 Internal Server Error".into(),
            "Server: nginx".into(),
            "Content-Type: text/html".into(),
        ],
        body: Body::Fixed(
            b"<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n<center><h1>500 Internal Server Error</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n".to_vec(),
        ),
    }
}

fn envoy_503() -> Reply {
    Reply {
        head: vec![
            "HTTP/1.1 503 Service Unavailable".into(),
            "content-type: text/plain".into(),
            "retry-after: 3".into(),
            "server: envoy".into(),
        ],
        body: Body::Fixed(
            b"upstream connect error or disconnect/reset before headers. reset reason: connection failure".to_vec(),
        ),
    }
}

fn stalled_500() -> Reply {
    let status = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcdserver: request timed out","reason":"InternalError","code":500}"#;
    Reply {
        head: vec![
            "HTTP/1.1 500 Internal Server Error".into(),
            "Content-Type: application/json".into(),
        ],
        body: Body::Stalled {
            announced: status.len(),
            sent: status[..40].to_vec(),
        },
    }
}

fn no_answer() -> Reply {
    Reply {
        head: Vec::new(),
        body: Body::Silence,
    }
}

fn too_many_requests() -> Reply {
    Reply::json(
        429,
        br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","details":{"retryAfterSeconds":2},"code":429}"#,
    )
    .with_header("Retry-After: 2")
}

fn cut_list() -> Reply {
    let page = capture("wire/real-1.20-list-endpoints-limit2-page1.http");
    Reply {
        head: page.head.clone(),
        body: Body::ChunksThenCut(vec![page.body[..page.body.len() / 2].to_vec()]),
    }
}

const CASES: &[Case] = &[
    Case {
        name: "a proxy's HTML 500 page",
        fault: nginx_500,
        at_least: Duration::from_millis(800),
        slack: Duration::from_secs(5),
        reported: "HTTP 500",
    },
    Case {
        name: "a plain-text 503 with Retry-After: 3",
        fault: envoy_503,
        at_least: Duration::from_secs(3),
        slack: Duration::from_secs(5),
        reported: "upstream connect error",
    },
    Case {
        name: "a 500 whose body stalls after 40 bytes",
        fault: stalled_500,
        at_least: Duration::from_secs(30),
        slack: Duration::from_secs(10),
        reported: "stopped arriving after 40 bytes",
    },
    Case {
        name: "no answer at all",
        fault: no_answer,
        at_least: Duration::from_secs(60),
        slack: Duration::from_secs(10),
        reported: "no response within 60s",
    },
    Case {
        name: "a 429 with Retry-After: 2",
        fault: too_many_requests,
        at_least: Duration::from_secs(2),
        slack: Duration::from_secs(5),
        reported: "429",
    },
    Case {
        name: "a LIST body cut mid-way",
        fault: cut_list,
        at_least: Duration::from_millis(800),
        slack: Duration::from_secs(5),
        reported: "reading response body",
    },
];

/// The scripted 1.20 server: discovery, a refused streaming list, the captured LIST pages (the
/// first page's first request meets `fault`), the captured watch, then empty watches.
async fn server(fault: fn() -> Reply) -> (RawServer, Arc<Mutex<Vec<(Instant, String)>>>) {
    let page1 = capture("wire/real-1.20-list-endpoints-limit2-page1.http");
    let page2 = capture("wire/real-1.20-list-endpoints-limit2-page2.http");
    let watch = capture("wire/real-1.20-watch-endpoints-from-list-rv.http");
    let empty_watch = capture("wire/real-1.20-watch-endpoints-rv-in-future-empty.http");
    let token1 = serde_json::from_slice::<Value>(&page1.body).unwrap()["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_owned();
    // The captured second page was not the last (it was listed with limit=2): the one edit to
    // the captures, its continue token and remaining count removed, ends the list there.
    let mut last: Value = serde_json::from_slice(&page2.body).unwrap();
    let meta = last["metadata"].as_object_mut().unwrap();
    meta.remove("continue");
    meta.remove("remainingItemCount");
    let last = Reply {
        head: page2.head.clone(),
        body: Body::Fixed(serde_json::to_vec(&last).unwrap()),
    };
    let seen: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let stamps = seen.clone();
    let server = RawServer::start(move |line| {
        let target = line.split(' ').nth(1).unwrap_or("").to_owned();
        let first_lists = {
            let mut s = stamps.lock().unwrap();
            s.push((Instant::now(), target.clone()));
            s.iter().filter(|(_, t)| is_first_page(t)).count()
        };
        if target == "/api/v1" {
            return Reply::json(200, API_V1);
        }
        if target.starts_with("/apis") {
            return Reply::json(
                200,
                br#"{"kind":"APIGroupList","apiVersion":"v1","groups":[]}"#,
            );
        }
        if target.contains("sendInitialEvents=true") {
            return Reply::json(422, NO_STREAMING_LISTS);
        }
        if target.contains("watch=") {
            let watches = stamps
                .lock()
                .unwrap()
                .iter()
                .filter(|(_, t)| t.contains("watch=") && !t.contains("sendInitialEvents"))
                .count();
            return if watches == 1 && target.contains("resourceVersion=79") {
                Reply::from_capture(&watch)
            } else {
                Reply::from_capture(&empty_watch)
            };
        }
        if target.contains(&format!("continue={token1}")) {
            return last.clone();
        }
        if first_lists == 1 {
            return fault();
        }
        Reply::from_capture(&page1)
    })
    .await;
    (server, seen)
}

fn is_first_page(target: &str) -> bool {
    target.contains("/endpoints") && !target.contains("watch=") && !target.contains("continue=")
}

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

async fn kwatch(args: &[&str], limit: Duration) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_kwatch"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kwatch");
    let Ok(out) = tokio::time::timeout(limit, child.wait_with_output()).await else {
        return Output {
            code: -2,
            stdout: String::new(),
            stderr: format!("did not finish within {limit:?}"),
        };
    };
    let out = out.unwrap();
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The store kwatch's lines describe (key -> resourceVersion), and its SYNCED line.
fn replay(stdout: &str) -> (BTreeMap<String, String>, Value) {
    let mut store = BTreeMap::new();
    let mut synced = Value::Null;
    for line in stdout.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let key = v["key"].as_str().unwrap_or_default().to_owned();
        let rv = v["resourceVersion"].as_str().unwrap_or_default().to_owned();
        match v["type"].as_str() {
            Some("ADDED" | "MODIFIED") => {
                store.insert(key, rv);
            }
            Some("DELETED") => {
                store.remove(&key);
            }
            Some("SYNCED") => synced = v,
            other => panic!("unexpected line type {other:?}: {line}"),
        }
    }
    (store, synced)
}

/// The state kwatch must reach: the captured list (svc-1..svc-4 at 79), then the captured watch
/// (svc-6 added, svc-1..3 modified, svc-4 deleted).
fn converged() -> BTreeMap<String, String> {
    [
        ("default/svc-1", "81"),
        ("default/svc-2", "82"),
        ("default/svc-3", "83"),
        ("default/svc-6", "80"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// Runs `kwatch watch` until its lines describe the converged state (then stops it), or `limit`.
async fn watch_until_converged(args: &[&str], limit: Duration) -> Output {
    use tokio::io::AsyncBufReadExt;
    let mut child = Command::new(env!("CARGO_BIN_EXE_kwatch"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kwatch");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = tokio::time::Instant::now() + limit;
    let mut stdout = String::new();
    let mut code = -2;
    // Until kwatch ends on its own, or the time is up.
    while let Ok(Ok(Some(line))) = tokio::time::timeout_at(deadline, lines.next_line()).await {
        stdout.push_str(&line);
        stdout.push('\n');
        let (store, synced) = replay(&stdout);
        if store == converged() && !synced.is_null() {
            code = 0;
            break;
        }
    }
    let _ = child.start_kill();
    let out = child.wait_with_output().await.unwrap();
    Output {
        code,
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// One case: kwatch converges, reports the failure, and waited as the rules say.
async fn check(case: &'static Case) -> Result<(), String> {
    let (server, seen) = server(case.fault).await;
    let out = watch_until_converged(
        &["--server", &server.url, "watch", "endpoints", "-o", "jsonl"],
        Duration::from_secs(150),
    )
    .await;
    let name = case.name;
    if out.code != 0 {
        return Err(format!(
            "{name}: did not converge in time: {}\n{}",
            out.stdout, out.stderr
        ));
    }
    let (store, synced) = replay(&out.stdout);
    let want = converged();
    if store != want || synced["objects"] != 4 || synced["resourceVersion"] != "79" {
        return Err(format!(
            "{name}: did not converge: {store:?}, {synced}\n{}",
            out.stdout
        ));
    }
    if !out
        .stderr
        .lines()
        .any(|l| l.contains(case.reported) && l.ends_with("(retrying)"))
    {
        return Err(format!(
            "{name}: the failure ({:?}) is not reported on stderr: {}",
            case.reported, out.stderr
        ));
    }
    let lists: Vec<Instant> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, t)| is_first_page(t))
        .map(|(at, _)| *at)
        .collect();
    if lists.len() < 2 {
        return Err(format!("{name}: the LIST was never retried"));
    }
    let waited = lists[1] - lists[0];
    if waited < case.at_least || waited > case.at_least * 2 + case.slack {
        return Err(format!(
            "{name}: asked again after {waited:?}; the rule is at least {:?}",
            case.at_least
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_converges_through_every_observed_failure_of_a_real_server() {
    let runs: Vec<_> = CASES.iter().map(|c| tokio::spawn(check(c))).collect();
    let mut failures = Vec::new();
    for r in runs {
        if let Err(e) = r.await.unwrap() {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_gives_up_only_at_the_users_sync_timeout() {
    // Discovery answers; every other request gets a proxy's 500 page.
    let always = RawServer::start(|line| {
        let target = line.split(' ').nth(1).unwrap_or("");
        if target == "/api/v1" {
            Reply::json(200, API_V1)
        } else if target.starts_with("/apis") {
            Reply::json(
                200,
                br#"{"kind":"APIGroupList","apiVersion":"v1","groups":[]}"#,
            )
        } else {
            nginx_500()
        }
    })
    .await;
    let started = Instant::now();
    let out = kwatch(
        &[
            "--server",
            &always.url,
            "watch",
            "endpoints",
            "-o",
            "jsonl",
            "--sync-timeout",
            "3s",
        ],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(started.elapsed() >= Duration::from_secs(3));
    let last = out.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains("watch endpoints: not synced after 3 s") && last.contains("HTTP 500"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.lines().any(|l| l.ends_with("(retrying)")),
        "failures are printed as they happen: {}",
        out.stderr
    );
}
