//! The example operator (`examples/operator`) as processes, and the scenario that checks what it
//! promises, for any server: the simulator (tests/operator.rs) and the real apiserver
//! (tests/real_apiserver/operator.rs).
//!
//! The binary is the one cargo built for this profile (`target/<profile>/examples/operator`):
//! `cargo test` builds examples; `cargo test --test operator` alone does not, so build it first
//! (`cargo build --example operator`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hyper::Method;
use informer::Client;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::real_apiserver::{delete, merge_patch, post};

/// How long state may take to appear (a generous bound: the machine may be loaded).
const SETTLE: u64 = 60;
/// How soon after the leader's SIGKILL the survivor must reconcile (the bound).
const TAKEOVER: Duration = Duration::from_secs(25);
const MANAGER: &str = "widget-operator";
const LEASE: &str = "widget-operator";

/// The example binary next to this test's (`target/<profile>/deps/..` -> `examples/operator`).
pub fn operator_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps");
    let bin = profile_dir
        .join("examples")
        .join(format!("operator{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo build --example operator` (`cargo test` builds it)",
        bin.display()
    );
    bin
}

/// Where the replicas connect and what they watch.
pub struct Setup {
    pub kubeconfig: PathBuf,
    pub namespace: String,
    /// Replicas' stderr goes to `<dir>/<identity>.log`.
    pub dir: PathBuf,
    /// Short leader election timings (6 s, 4 s, 1 s) instead of client-go's (15 s, 10 s, 2 s):
    /// a quicker takeover.
    pub short_lease: bool,
}

/// One operator process; killed when dropped, its log printed if the test is failing.
pub struct Replica {
    pub identity: String,
    child: Child,
    log: PathBuf,
}

impl Replica {
    fn start(setup: &Setup, identity: &str, install_crd: bool) -> Replica {
        let log = setup.dir.join(format!("{identity}.log"));
        let stderr = std::fs::File::create(&log).unwrap();
        let mut command = Command::new(operator_binary());
        command
            .arg("--kubeconfig")
            .arg(&setup.kubeconfig)
            .args(["--namespace", &setup.namespace])
            .args(["--lease-namespace", &setup.namespace, "--lease-name", LEASE])
            .args(["--identity", identity, "--metrics-addr", "127.0.0.1:0"]);
        if setup.short_lease {
            // Valid by client-go's rules (6 > 4 > 1.2 × 1).
            command
                .args(["--lease-duration-seconds", "6"])
                .args(["--renew-deadline-seconds", "4"])
                .args(["--retry-period-seconds", "1"]);
        }
        if install_crd {
            command.arg("--install-crd");
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("the operator starts");
        Replica {
            identity: identity.to_owned(),
            child,
            log,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// The `/metrics` address it logged.
    async fn metrics_addr(&self) -> String {
        let log = until(
            &format!("{} serves /metrics", self.identity),
            SETTLE,
            || {
                let log = self.log();
                async move { log.contains("/metrics").then_some(log) }
            },
        )
        .await;
        let line = log
            .lines()
            .find(|l| l.contains("metrics at http://"))
            .unwrap();
        let start = line.find("http://").unwrap() + "http://".len();
        line[start..].trim_end_matches("/metrics").to_owned()
    }

    /// SIGKILL: no release, a crash as far as the others can tell.
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then waits for the exit; returns how long it took.
    async fn terminate(&mut self) -> Duration {
        let sent = Instant::now();
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        while self.alive() {
            assert!(
                sent.elapsed() < Duration::from_secs(30),
                "{} still runs 30 s after SIGTERM",
                self.identity
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sent.elapsed()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("----- {} -----\n{}", self.identity, self.log());
        }
    }
}

/// Polls `f` until it returns `Some`, for at most `secs`; panics naming `what` after that.
pub async fn until<T, F, Fut>(what: &str, secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(value) = f().await {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}: not within {secs} s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// GET `path`: `None` on 404, panics on other errors.
async fn read(client: &Client, path: &str) -> Option<Value> {
    match client.request::<Value>(Method::GET, path, None).await {
        Ok(value) => Some(value),
        Err(e) if e.is_not_found() => None,
        Err(e) => panic!("GET {path}: {e}"),
    }
}

/// GET `/metrics` at `addr`: the status line, the Content-Type and the body.
async fn scrape(addr: &str) -> (String, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response.lines().next().unwrap_or_default().to_owned();
    let content_type = response
        .lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-type")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, content_type, body)
}

/// True when `object`'s managedFields have an `Apply` entry by the operator.
fn applied_by_operator(object: &Value) -> bool {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|entry| entry["manager"] == MANAGER && entry["operation"] == "Apply")
}

/// The whole of item 8, on `client`'s server, with replicas reading `setup.kubeconfig`.
pub async fn scenario(client: &Client, setup: &Setup) {
    let ns = setup.namespace.as_str();
    let widget_path = |name: &str| format!("/apis/example.com/v1/namespaces/{ns}/widgets/{name}");
    let widgets_path = format!("/apis/example.com/v1/namespaces/{ns}/widgets");
    let cm_path = |name: &str| format!("/api/v1/namespaces/{ns}/configmaps/{name}");
    let lease_path = format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{LEASE}");
    let crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com";

    // Two replicas start together, both installing the CRD: both survive the race.
    let mut a = Replica::start(setup, "replica-a", true);
    let mut b = Replica::start(setup, "replica-b", true);
    until("the CRD is Established", SETTLE, || async {
        let crd = read(client, crd_path).await?;
        let conditions = crd["status"]["conditions"].as_array()?.clone();
        conditions
            .iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
            .then_some(())
    })
    .await;
    let leader = until("a replica leads", SETTLE, || async {
        let lease = read(client, &lease_path).await?;
        let holder = lease["spec"]["holderIdentity"].as_str()?.to_owned();
        (!holder.is_empty()).then_some(holder)
    })
    .await;
    for replica in [&mut a, &mut b] {
        assert!(
            replica.alive(),
            "{} exited after the CRD race:\n{}",
            replica.identity,
            replica.log()
        );
    }
    // At most one created it (none when it existed before); the other took 409 AlreadyExists.
    let created = [&a, &b]
        .iter()
        .filter(|r| r.log().contains("created CRD"))
        .count();
    assert!(created <= 1, "both replicas created the CRD");
    println!("the CRD race: {created} of 2 replicas created it, the rest found it (409)");

    // /metrics answers on both, in Prometheus' text format.
    for replica in [&a, &b] {
        let addr = replica.metrics_addr().await;
        let (status, content_type, _) = scrape(&addr).await;
        assert!(status.contains(" 200 "), "{}: {status}", replica.identity);
        assert_eq!(
            content_type, "text/plain; version=0.0.4",
            "{}",
            replica.identity
        );
    }

    // A Widget: its ConfigMap and status, by server-side apply.
    post(
        client,
        &widgets_path,
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
               "spec": {"size": 3, "data": {"colour": "blue"}}}),
    )
    .await;
    let cm = until("w1-config is applied", SETTLE, || async {
        read(client, &cm_path("w1-config")).await
    })
    .await;
    let w1 = read(client, &widget_path("w1")).await.unwrap();
    assert_eq!(cm["data"], json!({"colour": "blue", "size": "3"}));
    assert_eq!(
        cm["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        MANAGER
    );
    let owners = cm["metadata"]["ownerReferences"].as_array().unwrap();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(owners[0]["kind"], "Widget");
    assert_eq!(owners[0]["apiVersion"], "example.com/v1");
    assert_eq!(owners[0]["name"], "w1");
    assert_eq!(owners[0]["uid"], w1["metadata"]["uid"]);
    assert_eq!(owners[0]["controller"], true);
    assert!(
        applied_by_operator(&cm),
        "{:#}",
        cm["metadata"]["managedFields"]
    );
    let w1 = until("w1's status is applied", SETTLE, || async {
        let w = read(client, &widget_path("w1")).await?;
        (w["status"]["ready"] == true).then_some(w)
    })
    .await;
    assert_eq!(w1["status"]["configMap"], "w1-config");
    assert_eq!(
        w1["status"]["observedGeneration"],
        w1["metadata"]["generation"]
    );
    assert!(
        applied_by_operator(&w1),
        "{:#}",
        w1["metadata"]["managedFields"]
    );
    assert_eq!(w1["metadata"]["finalizers"], json!(["example.com/cleanup"]));

    // A spec change: the ConfigMap and observedGeneration follow.
    let changed = merge_patch(
        client,
        &widget_path("w1"),
        json!({"spec": {"size": 5, "data": {"shape": "round"}}}),
    )
    .await;
    let generation = changed["metadata"]["generation"].as_i64().unwrap();
    assert!(generation > w1["metadata"]["generation"].as_i64().unwrap());
    until("w1-config follows the spec", SETTLE, || async {
        let cm = read(client, &cm_path("w1-config")).await?;
        (cm["data"] == json!({"colour": "blue", "shape": "round", "size": "5"})).then_some(())
    })
    .await;
    until("observedGeneration follows", SETTLE, || async {
        let w = read(client, &widget_path("w1")).await?;
        (w["status"]["observedGeneration"] == generation).then_some(())
    })
    .await;

    // Someone else edits the ConfigMap (a changed value, an added key): reverted.
    merge_patch(
        client,
        &format!("{}?fieldManager=intruder", cm_path("w1-config")),
        json!({"data": {"size": "999", "intruder": "x"}}),
    )
    .await;
    until("the foreign edit is reverted", SETTLE, || async {
        let cm = read(client, &cm_path("w1-config")).await?;
        (cm["data"] == json!({"colour": "blue", "shape": "round", "size": "5"})).then_some(())
    })
    .await;

    // Delete: the finalizer holds the Widget until its ConfigMap is gone.
    delete(client, &widget_path("w1")).await;
    until("w1 and w1-config are gone", SETTLE, || async {
        let cm = read(client, &cm_path("w1-config")).await;
        let w = read(client, &widget_path("w1")).await;
        (cm.is_none() && w.is_none()).then_some(())
    })
    .await;

    // Both expose client-go's metric names; the election gauge says which one leads.
    for replica in [&a, &b] {
        let (_, _, body) = scrape(&replica.metrics_addr().await).await;
        for name in [
            "rest_client_requests_total",
            "rest_client_request_duration_seconds_bucket",
            "workqueue_depth",
            "workqueue_adds_total",
            "workqueue_queue_duration_seconds_bucket",
            "workqueue_work_duration_seconds_bucket",
            "workqueue_retries_total",
            "workqueue_unfinished_work_seconds",
            "workqueue_longest_running_processor_seconds",
            "leader_election_master_status",
        ] {
            assert!(
                body.contains(name),
                "{}'s /metrics lacks {name}:\n{body}",
                replica.identity
            );
        }
        let leads = u8::from(replica.identity == leader);
        assert!(
            body.lines()
                .any(|l| l.starts_with("leader_election_master_status{")
                    && l.ends_with(&format!(" {leads}"))),
            "{} (leader: {leader}) reports the wrong election status:\n{body}",
            replica.identity
        );
    }

    // The leader dies (SIGKILL, no release): the survivor reconciles within 25 s.
    let (dead, survivor) = if leader == a.identity {
        (&mut a, &mut b)
    } else {
        assert_eq!(leader, b.identity);
        (&mut b, &mut a)
    };
    dead.kill();
    let killed = Instant::now();
    post(
        client,
        &widgets_path,
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w2"},
               "spec": {"size": 1, "data": {}}}),
    )
    .await;
    until("the survivor reconciles w2", SETTLE, || async {
        let w = read(client, &widget_path("w2")).await?;
        let cm = read(client, &cm_path("w2-config")).await?;
        (w["status"]["ready"] == true && cm["data"] == json!({"size": "1"})).then_some(())
    })
    .await;
    let takeover = killed.elapsed();
    println!(
        "{} reconciled {takeover:?} after the leader's SIGKILL",
        survivor.identity
    );
    assert!(
        takeover < TAKEOVER,
        "{} reconciled {takeover:?} after the leader's SIGKILL",
        survivor.identity
    );
    let lease = read(client, &lease_path).await.unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], survivor.identity.as_str());

    // SIGTERM: the survivor exits within a few seconds and releases the Lease.
    let stopped_in = survivor.terminate().await;
    println!("{} stopped {stopped_in:?} after SIGTERM", survivor.identity);
    assert!(
        stopped_in < Duration::from_secs(10),
        "{} took {stopped_in:?} to stop",
        survivor.identity
    );
    let lease = read(client, &lease_path).await.unwrap();
    assert_eq!(
        lease["spec"]["holderIdentity"].as_str().unwrap_or_default(),
        "",
        "the Lease is released: {lease:#}"
    );

    // A Widget deleted while no replica runs is cleaned up by the next one.
    delete(client, &widget_path("w2")).await;
    let w2 = read(client, &widget_path("w2")).await.unwrap();
    assert!(
        w2["metadata"]["deletionTimestamp"].is_string(),
        "the finalizer holds w2: {w2:#}"
    );
    let mut c = Replica::start(setup, "replica-c", false);
    until("replica-c cleans w2 up", SETTLE, || async {
        let cm = read(client, &cm_path("w2-config")).await;
        let w = read(client, &widget_path("w2")).await;
        (cm.is_none() && w.is_none()).then_some(())
    })
    .await;
    let stopped_in = c.terminate().await;
    assert!(
        stopped_in < Duration::from_secs(10),
        "replica-c took {stopped_in:?}"
    );
    let lease = read(client, &lease_path).await.unwrap();
    assert_eq!(
        lease["spec"]["holderIdentity"].as_str().unwrap_or_default(),
        ""
    );
}
