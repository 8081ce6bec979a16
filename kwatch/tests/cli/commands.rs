//! `kwatch` as a subprocess against the simulator: every subcommand, both output formats, exit
//! codes 0/1/2, the SYNCED line and `--max-events`, the no-configuration error, TLS and tokens
//! through `kwatch sim`, and a short `kwatch demo` that must end with `divergences: 0`.
//! Every child is killed if it outlives its time limit.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use informer::ApiResource;
use informer_sim::Simulator;
use informer_sim::churn::{Churn, ChurnConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::timeout;

const LIMIT: Duration = Duration::from_secs(60);

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }
    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
    fn json_lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kwatch"));
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    c
}

/// Runs kwatch to completion (killed after `LIMIT`).
async fn run_cmd(mut c: Command) -> Run {
    let child = c.spawn().expect("spawn kwatch");
    let out = timeout(LIMIT, child.wait_with_output())
        .await
        .expect("kwatch did not finish in time")
        .unwrap();
    Run {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

async fn kwatch(args: &[&str]) -> Run {
    run_cmd(command(args)).await
}

async fn sim_with_configmaps(n: usize) -> Simulator {
    let sim = Simulator::start().await.unwrap();
    for i in 0..n {
        sim.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": format!("cm-{i}"), "labels": {"app": "x"}}, "data": {"i": i.to_string()}}),
        )
        .unwrap();
    }
    sim
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kwatch-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_jsonl_prints_synced_then_exactly_max_events() {
    let sim = sim_with_configmaps(3).await;
    let mut child: Child = command(&[
        "--server",
        sim.url(),
        "watch",
        "configmaps",
        "-o",
        "jsonl",
        "--max-events",
        "3",
        "--stats",
    ])
    .spawn()
    .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut before_sync = Vec::new();
    let synced = timeout(LIMIT, async {
        loop {
            let line = stdout.next_line().await.unwrap().expect("SYNCED line");
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["type"] == "SYNCED" {
                assert!(line.starts_with(r#"{"type":"SYNCED""#), "{line}");
                return v;
            }
            before_sync.push(v);
        }
    })
    .await
    .unwrap();
    assert_eq!(synced["objects"], 3);
    assert!(!synced["resourceVersion"].as_str().unwrap().is_empty());
    let mut keys: Vec<&str> = before_sync
        .iter()
        .map(|v| {
            assert_eq!(v["type"], "ADDED");
            assert_eq!(v["object"]["kind"], "ConfigMap");
            assert_eq!(
                v["object"]["metadata"]["resourceVersion"],
                v["resourceVersion"]
            );
            v["key"].as_str().unwrap()
        })
        .collect();
    keys.sort();
    assert_eq!(keys, ["default/cm-0", "default/cm-1", "default/cm-2"]);

    // Three watch events, spaced so that none coalesces with another.
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "cm-new"}}),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    sim.patch(
        "configmaps",
        Some("default"),
        "cm-0",
        &json!({"data": {"i": "changed"}}),
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    sim.delete("configmaps", Some("default"), "cm-1").unwrap();

    let mut rest = Vec::new();
    timeout(LIMIT, async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            rest.push(serde_json::from_str::<Value>(&line).unwrap());
        }
    })
    .await
    .expect("kwatch exits after --max-events");
    let status = timeout(LIMIT, child.wait()).await.unwrap().unwrap();
    assert!(status.success());
    let types: Vec<(&str, &str)> = rest
        .iter()
        .map(|v| (v["type"].as_str().unwrap(), v["key"].as_str().unwrap()))
        .collect();
    assert_eq!(
        types,
        [
            ("ADDED", "default/cm-new"),
            ("MODIFIED", "default/cm-0"),
            ("DELETED", "default/cm-1")
        ]
    );
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .await
        .unwrap();
    let stats: Value =
        serde_json::from_str(stderr.trim()).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    // The issue's keys, in its order, and no others.
    let keys = [
        "sync_seconds",
        "watch_events",
        "watch_seconds",
        "events_per_sec",
        "notifications",
        "objects",
        "peak_rss_kib",
    ];
    assert_eq!(stats.as_object().unwrap().len(), keys.len(), "{stderr}");
    let at: Vec<usize> = keys
        .iter()
        .map(|k| stderr.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{stderr}");
    assert_eq!(stats["watch_events"], 3);
    assert_eq!(stats["notifications"], 6);
    assert_eq!(stats["objects"], 3);
    for field in [
        "sync_seconds",
        "watch_seconds",
        "events_per_sec",
        "peak_rss_kib",
    ] {
        assert!(
            stats[field].as_f64().is_some_and(|x| x > 0.0),
            "{field}: {stats}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_until_synced_table_and_selectors() {
    let sim = sim_with_configmaps(2).await;
    sim.create(
        "configmaps",
        Some("other"),
        json!({"metadata": {"name": "elsewhere"}}),
    )
    .unwrap();
    let r = kwatch(&["watch", "cm", "--server", sim.url(), "--until-synced"]).await;
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let lines = r.lines();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[..2].iter().all(|l| l.starts_with("ADDED")),
        "{lines:?}"
    );
    assert!(lines[2].starts_with("SYNCED    2 objects"), "{lines:?}");

    let r = kwatch(&[
        "watch",
        "configmaps",
        "-A",
        "--server",
        sim.url(),
        "--until-synced",
        "-o",
        "jsonl",
    ])
    .await;
    assert_eq!(r.json_lines().last().unwrap()["objects"], 3);
    let r = kwatch(&[
        "watch",
        "configmaps",
        "-A",
        "--server",
        sim.url(),
        "--until-synced",
        "-o",
        "jsonl",
        "--field-selector",
        "metadata.namespace=other",
    ])
    .await;
    assert_eq!(r.json_lines().len(), 2, "{}", r.stdout);
    let r = kwatch(&[
        "watch",
        "configmaps",
        "-n",
        "default",
        "--server",
        sim.url(),
        "--until-synced",
        "-o",
        "none",
        "-l",
        "app=nope",
    ])
    .await;
    assert_eq!((r.code(), r.stdout.as_str()), (0, ""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_table_json_jsonl_and_one_name() {
    let sim = sim_with_configmaps(2).await;
    let r = kwatch(&["--server", sim.url(), "get", "configmaps"]).await;
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let lines = r.lines();
    assert!(
        lines[0].starts_with("NAME") && lines[0].ends_with("AGE"),
        "{lines:?}"
    );
    assert!(lines[1].starts_with("cm-0 "), "{lines:?}");

    let r = kwatch(&["--server", sim.url(), "get", "configmaps", "-A"]).await;
    assert!(r.lines()[0].starts_with("NAMESPACE   NAME"), "{}", r.stdout);

    let r = kwatch(&["--server", sim.url(), "get", "configmaps", "-o", "json"]).await;
    let list: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);

    let r = kwatch(&["--server", sim.url(), "get", "configmaps", "-o", "jsonl"]).await;
    assert_eq!(r.json_lines()[1]["metadata"]["name"], "cm-1");

    let r = kwatch(&[
        "--server",
        sim.url(),
        "get",
        "configmaps",
        "cm-1",
        "-o",
        "json",
    ])
    .await;
    let one: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        (one["kind"].as_str(), one["data"]["i"].as_str()),
        (Some("ConfigMap"), Some("1"))
    );

    let r = kwatch(&["--server", sim.url(), "get", "configmaps", "missing"]).await;
    assert_eq!(r.code(), 1);
    assert!(
        r.stderr.contains(r#"configmaps "missing" not found"#),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resources_by_group_version_resource_and_by_name() {
    let sim = Simulator::start().await.unwrap();
    sim.register_resource(
        ApiResource::new("example.com", "v1", "Widget", "widgets", true),
        &["wg"],
    );
    sim.create(
        "widgets.example.com",
        Some("default"),
        json!({"metadata": {"name": "w1"}, "spec": {"size": 3}}),
    )
    .unwrap();
    for resource in [
        "example.com/v1/widgets",
        "widgets",
        "wg",
        "Widget",
        "widgets.example.com",
    ] {
        let r = kwatch(&["--server", sim.url(), "get", resource, "-o", "jsonl"]).await;
        assert_eq!(r.code(), 0, "{resource}: {}", r.stderr);
        let items = r.json_lines();
        assert_eq!(items.len(), 1, "{resource}");
        assert_eq!(items[0]["spec"]["size"], 3);
        assert_eq!(items[0]["apiVersion"], "example.com/v1");
    }
    let r = kwatch(&["--server", sim.url(), "get", "example.com/v2/widgets"]).await;
    assert_eq!(r.code(), 1);
    // `watch` keeps retrying what retrying can fix, but not a resource the server lacks.
    for command in ["get", "watch"] {
        let r = kwatch(&["--server", sim.url(), command, "gadgets"]).await;
        assert_eq!(r.code(), 1, "{command}: {}", r.stderr);
        assert!(
            r.stderr
                .contains("doesn't have a resource type \"gadgets\""),
            "{command}: {}",
            r.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_snapshot_and_watch() {
    let sim = Simulator::start().await.unwrap();
    let mut churn = Churn::new(
        sim.api(),
        ChurnConfig {
            services: 2,
            pods_per_service: 4,
            ..Default::default()
        },
    )
    .unwrap();
    for _ in 0..20 {
        churn.step().unwrap();
    }
    let r = kwatch(&["--server", sim.url(), "instances", "svc-0", "-o", "jsonl"]).await;
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let snaps = r.json_lines();
    assert_eq!(snaps.len(), 1);
    let s = &snaps[0];
    assert_eq!(
        (s["service"].as_str(), s["state"].as_str()),
        (Some("default/svc-0"), Some("Ready"))
    );
    assert!(s["revision"].as_u64().unwrap() >= 1);
    let instances = s["instances"].as_array().unwrap();
    assert!(!instances.is_empty());
    let mut seen = std::collections::HashSet::new();
    for i in instances {
        assert!(
            seen.insert((i["address"].to_string(), i["port"].to_string())),
            "duplicate {i}"
        );
        assert_eq!(i["port"], 8080);
        for f in ["ready", "serving", "terminating"] {
            assert!(i[f].is_boolean(), "{i}");
        }
        assert!(i["pod"].as_str().unwrap().starts_with("default/svc-0-"));
        assert!(i["zone"].is_string() && i["node"].is_string());
    }

    let r = kwatch(&[
        "--server",
        sim.url(),
        "instances",
        "default/absent",
        "-o",
        "jsonl",
    ])
    .await;
    assert_eq!(r.json_lines()[0]["state"], "ServiceAbsent");
    let r = kwatch(&["--server", sim.url(), "instances", "svc-1"]).await;
    assert!(
        r.lines()[0].starts_with("default/svc-1  revision"),
        "{}",
        r.stdout
    );
    assert!(r.lines()[1].starts_with("ADDRESS"), "{}", r.stdout);

    // -w: one snapshot now, another after a change.
    let mut child = command(&[
        "--server",
        sim.url(),
        "instances",
        "svc-0",
        "-w",
        "-o",
        "jsonl",
    ])
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut next = async || -> Value {
        let line = timeout(LIMIT, lines.next_line()).await.unwrap().unwrap();
        serde_json::from_str(&line.expect("a snapshot line")).unwrap()
    };
    let first = next().await;
    // One write to one of svc-0's slices (an endpoint's readiness flips) is one new revision:
    // discovery publishes it alone, so the subscription cannot skip over it.
    let slices = sim
        .list("endpointslices.discovery.k8s.io", Some("default"))
        .unwrap();
    let slice = slices["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| {
            s["metadata"]["labels"]["kubernetes.io/service-name"] == "svc-0"
                && s["endpoints"].as_array().is_some_and(|e| !e.is_empty())
        })
        .expect("a slice of svc-0 with endpoints");
    let mut endpoints = slice["endpoints"].clone();
    let ready = endpoints[0]["conditions"]["ready"]
        .as_bool()
        .unwrap_or(true);
    endpoints[0]["conditions"]["ready"] = json!(!ready);
    sim.patch(
        "endpointslices.discovery.k8s.io",
        Some("default"),
        slice["metadata"]["name"].as_str().unwrap(),
        &json!({"endpoints": endpoints}),
    )
    .unwrap();
    let second = next().await;
    assert_eq!(
        second["revision"].as_u64().unwrap(),
        first["revision"].as_u64().unwrap() + 1
    );
    assert_ne!(first["instances"], second["instances"]);
    // Under churn, newer revisions keep coming (a slow reader may skip some: latest wins).
    let running = churn.run(50.0);
    let third = next().await;
    running.stop().await.unwrap();
    assert!(third["revision"].as_u64().unwrap() > second["revision"].as_u64().unwrap());
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["watch"],
        &["frobnicate"],
        &["get", "pods", "--until-synced"],
        &["watch", "pods", "-o", "yaml"],
        &["demo", "--duration", "soon"],
        &["get", "pods", "--no-such-option"],
    ] {
        let r = kwatch(args).await;
        assert_eq!(r.code(), 2, "{args:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with("kwatch: error: "), "{}", r.stderr);
    }
    let r = kwatch(&["--help"]).await;
    assert_eq!(r.code(), 0);
    assert!(r.stdout.contains("kwatch demo"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_configuration_is_one_clear_error() {
    let home = temp_dir("home");
    let kube = temp_dir("kube");
    let mut c = command(&["get", "pods"]);
    c.env("HOME", &home)
        .env("KUBECONFIG", kube.join("config"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT");
    let r = run_cmd(c).await;
    assert_eq!(r.code(), 1, "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("kwatch demo"), "{}", r.stderr);
    assert!(r.stderr.contains("in-cluster"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&kube.join("config").display().to_string()),
        "{}",
        r.stderr
    );

    // A server that is not there is a runtime error too, reported at once.
    let r = kwatch(&["--server", "http://127.0.0.1:1", "get", "pods"]).await;
    assert_eq!(r.code(), 1);
    let r = kwatch(&["--server", "http://127.0.0.1:1", "instances", "web"]).await;
    assert_eq!(r.code(), 1);
}

/// Starts `kwatch sim ARGS` and returns it with the lines it printed before serving.
async fn kwatch_sim(args: &[&str]) -> (Child, Vec<String>) {
    let mut all = vec!["sim"];
    all.extend_from_slice(args);
    let mut child = command(&all).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut header = Vec::new();
    let first = timeout(LIMIT, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.starts_with("listening on http"), "{first}");
    header.push(first);
    // The kubeconfig line, and the CA with --tls.
    let more = if args.contains(&"--tls") { 2 } else { 1 };
    for _ in 0..more {
        header.push(
            timeout(LIMIT, lines.next_line())
                .await
                .unwrap()
                .unwrap()
                .unwrap(),
        );
    }
    (child, header)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_subcommand_serves_plain_and_tls_with_token() {
    let (mut plain, header) = kwatch_sim(&["--churn"]).await;
    let url = header[0].strip_prefix("listening on ").unwrap().to_owned();
    let r = kwatch(&["--server", &url, "get", "services"]).await;
    assert_eq!(r.code(), 0, "{}", r.stderr);
    assert!(r.stdout.contains("svc-0"), "{}", r.stdout);
    plain.kill().await.unwrap();

    let (mut tls, header) = kwatch_sim(&["--tls", "--token", "s3cret"]).await;
    let url = header[0].strip_prefix("listening on ").unwrap().to_owned();
    assert!(url.starts_with("https://"));
    let ca = header[2]
        .strip_prefix("certificate-authority ")
        .unwrap()
        .to_owned();
    let ok = kwatch(&[
        "--server",
        &url,
        "--token",
        "s3cret",
        "--certificate-authority",
        &ca,
        "get",
        "pods",
    ])
    .await;
    assert_eq!(ok.code(), 0, "{}", ok.stderr);
    let insecure = kwatch(&[
        "--server",
        &url,
        "--token",
        "s3cret",
        "--insecure-skip-tls-verify",
        "get",
        "pods",
    ])
    .await;
    assert_eq!(insecure.code(), 0, "{}", insecure.stderr);
    let no_token = kwatch(&[
        "--server",
        &url,
        "--certificate-authority",
        &ca,
        "get",
        "pods",
    ])
    .await;
    assert_eq!(no_token.code(), 1);
    let no_ca = kwatch(&["--server", &url, "--token", "s3cret", "get", "pods"]).await;
    assert_eq!(no_ca.code(), 1);
    // The kubeconfig it wrote carries the URL, the CA and the token.
    let kubeconfig = header[1].strip_prefix("kubeconfig ").unwrap().to_owned();
    let from_file = kwatch(&["--kubeconfig", &kubeconfig, "get", "pods"]).await;
    assert_eq!(from_file.code(), 0, "{}", from_file.stderr);
    // --insecure-skip-tls-verify overrides the kubeconfig's CA (kubectl's rule); together with
    // --certificate-authority it is refused, as client-go refuses the pair.
    let overridden = kwatch(&[
        "--kubeconfig",
        &kubeconfig,
        "--insecure-skip-tls-verify",
        "get",
        "pods",
    ])
    .await;
    assert_eq!(overridden.code(), 0, "{}", overridden.stderr);
    let both = kwatch(&[
        "--server",
        &url,
        "--token",
        "s3cret",
        "--certificate-authority",
        &ca,
        "--insecure-skip-tls-verify",
        "get",
        "pods",
    ])
    .await;
    assert_eq!(both.code(), 1, "{}", both.stderr);
    assert!(
        both.stderr
            .contains("insecure-skip-tls-verify together with a certificate authority"),
        "{}",
        both.stderr
    );
    let mut c = command(&["--context", "sim", "get", "pods"]);
    c.env("KUBECONFIG", &kubeconfig);
    assert_eq!(run_cmd(c).await.code(), 0);
    tls.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_ends_by_itself_with_zero_divergences() {
    let r = kwatch(&["demo", "--duration", "5", "--services", "4", "--pods", "5"]).await;
    assert_eq!(r.code(), 0, "{}\n{}", r.stdout, r.stderr);
    let lines = r.lines();
    assert!(
        lines.iter().any(|l| l.starts_with("[  1s] services=4")),
        "{}",
        r.stdout
    );
    assert!(
        lines.iter().any(|l| l.contains("faults survived   2")),
        "{}",
        r.stdout
    );
    assert_eq!(lines.last(), Some(&"divergences: 0"), "{}", r.stdout);
}

/// A Service with the given ports (`(name, port, targetPort)`) and one EndpointSlice per entry of
/// `slices`: `(slice name, ports (name, number), endpoints (address, ready))`.
#[allow(clippy::type_complexity)]
fn service_with_slices(
    sim: &Simulator,
    name: &str,
    ports: &[(Option<&str>, u16, u16)],
    slices: &[(&str, &[(Option<&str>, u16)], &[(&str, bool)])],
) {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, port, target)| {
            let mut p = json!({"port": port, "targetPort": target, "protocol": "TCP"});
            if let Some(n) = n {
                p["name"] = json!(n);
            }
            p
        })
        .collect();
    sim.create(
        "services",
        Some("default"),
        json!({"metadata": {"name": name}, "spec": {"ports": ports}}),
    )
    .unwrap();
    for (slice, slice_ports, endpoints) in slices {
        let slice_ports: Vec<Value> = slice_ports
            .iter()
            .map(|(n, port)| {
                let mut p = json!({"port": port, "protocol": "TCP"});
                if let Some(n) = n {
                    p["name"] = json!(n);
                }
                p
            })
            .collect();
        let endpoints: Vec<Value> = endpoints
            .iter()
            .enumerate()
            .map(|(i, (address, ready))| {
                json!({
                    "addresses": [address],
                    "conditions": {"ready": ready, "serving": ready, "terminating": false},
                    "nodeName": format!("node-{i}"),
                    "zone": "zone-a",
                    "targetRef": {"kind": "Pod", "namespace": "default", "name": format!("{name}-pod-{address}")},
                })
            })
            .collect();
        sim.create(
            "endpointslices.discovery.k8s.io",
            Some("default"),
            json!({
                "metadata": {"name": slice, "labels": {"kubernetes.io/service-name": name}},
                "addressType": "IPv4",
                "ports": slice_ports,
                "endpoints": endpoints,
            }),
        )
        .unwrap();
    }
}

/// (address, port, ready) of each instance of a `kwatch instances -o jsonl` line.
fn endpoints_of(line: &Value) -> Vec<(String, u64, bool)> {
    line["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["address"].as_str().unwrap().to_owned(),
                i["port"].as_u64().unwrap(),
                i["ready"].as_bool().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_serves_from_the_slices_when_services_are_forbidden() {
    let sim = Simulator::start().await.unwrap();
    service_with_slices(
        &sim,
        "single",
        &[(None, 80, 8080)],
        &[("single-a", &[(None, 8080)], &[("10.0.0.1", true)])],
    );
    sim.faults().forbid_reads_of("services", true);
    let r = kwatch(&["--server", sim.url(), "instances", "single", "-o", "jsonl"]).await;
    assert_eq!(r.code(), 0, "{}", r.stderr);
    let lines = r.json_lines();
    assert_eq!(lines.len(), 1, "{}", r.stdout);
    assert!(lines[0].to_string().contains("10.0.0.1"), "{}", lines[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_without_port_one_port_or_every_port_once() {
    let sim = Simulator::start().await.unwrap();
    // One unnamed port.
    service_with_slices(
        &sim,
        "single",
        &[(None, 80, 8080)],
        &[(
            "single-a",
            &[(None, 8080)],
            &[("10.0.0.2", false), ("10.0.0.1", true)],
        )],
    );
    // Two named ports; 10.0.1.1 sits in two slices (moving between them): listed once per port.
    service_with_slices(
        &sim,
        "multi",
        &[(Some("http"), 80, 8080), (Some("admin"), 9090, 9090)],
        &[
            (
                "multi-a",
                &[(Some("http"), 8080), (Some("admin"), 9090)],
                &[("10.0.1.1", true), ("10.0.1.2", false)],
            ),
            (
                "multi-b",
                &[(Some("http"), 8080), (Some("admin"), 9090)],
                &[("10.0.1.1", true)],
            ),
        ],
    );
    let jsonl = |args: &'static [&'static str]| {
        let url = sim.url().to_owned();
        async move {
            let mut all = vec!["--server", url.as_str(), "instances", "-o", "jsonl"];
            all.extend_from_slice(args);
            let r = kwatch(&all).await;
            assert_eq!(r.code(), 0, "{args:?}: {}", r.stderr);
            let lines = r.json_lines();
            assert_eq!(lines.len(), 1, "{args:?}: {}", r.stdout);
            lines[0].clone()
        }
    };

    let single = jsonl(&["single"]).await;
    assert_eq!(single["state"], "Ready");
    assert_eq!(
        endpoints_of(&single),
        [
            ("10.0.0.1".into(), 8080, true),
            ("10.0.0.2".into(), 8080, false)
        ]
    );
    assert_eq!(single["instances"][0]["pod"], "default/single-pod-10.0.0.1");

    let multi = jsonl(&["multi"]).await;
    assert_eq!(multi["state"], "Ready");
    assert_eq!(
        endpoints_of(&multi),
        [
            ("10.0.1.1".into(), 8080, true),
            ("10.0.1.1".into(), 9090, true),
            ("10.0.1.2".into(), 8080, false),
            ("10.0.1.2".into(), 9090, false),
        ]
    );
    let admin = jsonl(&["multi", "--port", "admin"]).await;
    assert_eq!(
        endpoints_of(&admin),
        [
            ("10.0.1.1".into(), 9090, true),
            ("10.0.1.2".into(), 9090, false)
        ]
    );
    let nope = jsonl(&["default/multi", "--port", "nope"]).await;
    assert_eq!(nope["state"], "NoEndpoints");
    assert_eq!(nope["instances"], json!([]));
    let absent = jsonl(&["absent", "--port", "http"]).await;
    assert_eq!(absent["state"], "ServiceAbsent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_prints_what_the_library_discovery_computes() {
    use informer::discovery::{DiscoveryOptions, ServiceDiscovery};
    use informer::{Client, Config};

    let sim = Simulator::start().await.unwrap();
    let mut churn = Churn::new(
        sim.api(),
        ChurnConfig {
            services: 2,
            pods_per_service: 6,
            ..Default::default()
        },
    )
    .unwrap();
    for _ in 0..40 {
        churn.step().unwrap();
    }
    let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
    let discovery = ServiceDiscovery::new(
        client,
        DiscoveryOptions {
            include_not_ready: true,
            ..Default::default()
        },
    );
    assert!(discovery.wait_for_sync("default", LIMIT).await);
    for service in ["svc-0", "svc-1"] {
        let snapshot = discovery.instances("default", service, "http");
        let r = kwatch(&["--server", sim.url(), "instances", service, "-o", "jsonl"]).await;
        assert_eq!(r.code(), 0, "{}", r.stderr);
        let line = &r.json_lines()[0];
        assert_eq!(line["state"], json!(snapshot.state), "{service}");
        let want: Vec<Value> = snapshot
            .instances
            .iter()
            .map(|i| {
                json!({
                    "address": i.address.to_string(), "port": i.port, "ready": i.ready,
                    "serving": i.serving, "terminating": i.terminating, "zone": i.zone,
                    "node": i.node, "pod": i.pod,
                })
            })
            .collect();
        assert_eq!(line["instances"], json!(want), "{service}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_for_kwatch_and_each_subcommand() {
    let r = kwatch(&["--help"]).await;
    assert_eq!(r.code(), 0);
    for sub in ["demo", "sim", "watch", "get", "instances"] {
        assert!(
            r.stdout.lines().any(|l| l.trim_start().starts_with(sub)),
            "{sub} not listed: {}",
            r.stdout
        );
    }
    for (args, usage, option) in [
        (
            &["watch", "--help"][..],
            "Usage: kwatch watch",
            "--max-events",
        ),
        (&["demo", "--help"], "Usage: kwatch demo", "--duration"),
        (&["sim", "-h"], "Usage: kwatch sim", "--listen"),
        (&["get", "pods", "--help"], "Usage: kwatch get", "jsonl"),
        (
            &["--help", "instances"],
            "Usage: kwatch instances",
            "--port",
        ),
        (
            &["help", "instances"],
            "Usage: kwatch instances",
            "-w, --watch",
        ),
        (
            &["-n", "x", "instances", "--help"],
            "Usage: kwatch instances",
            "--port",
        ),
    ] {
        let r = kwatch(args).await;
        assert_eq!(r.code(), 0, "{args:?}: {}", r.stderr);
        assert!(r.stdout.contains(usage), "{args:?}: {}", r.stdout);
        assert!(r.stdout.contains(option), "{args:?}: {}", r.stdout);
        assert!(r.stdout.contains("kwatch --help"), "{args:?}: {}", r.stdout);
        assert!(r.stderr.is_empty(), "{args:?}: {}", r.stderr);
    }
    let r = kwatch(&["frobnicate", "--help"]).await;
    assert_eq!(r.code(), 2, "{}", r.stderr);

    // A usage error is one line pointing at the right help.
    for (args, hint) in [
        (&["watch"][..], "kwatch watch --help"),
        (&["watch", "pods", "-o", "yaml"], "kwatch watch --help"),
        (&["get", "pods", "--until-synced"], "kwatch get --help"),
        (&["get", "pods", "--no-such-option"], "kwatch get --help"),
        (&["instances"], "kwatch instances --help"),
        (&["demo", "--duration", "soon"], "kwatch demo --help"),
        (&["frobnicate"], "kwatch --help"),
        (&[], "kwatch --help"),
    ] {
        let r = kwatch(args).await;
        assert_eq!(r.code(), 2, "{args:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(hint), "{args:?}: {}", r.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_ctrl_c_ends_with_the_summary() {
    // Without a terminal and without --duration the demo would run 10 s: interrupt it first.
    let mut child = command(&["demo", "--services", "3", "--pods", "4"])
        .spawn()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    timeout(LIMIT, async {
        loop {
            let line = lines.next_line().await.unwrap().expect("a periodic line");
            if line.starts_with("[  1s]") {
                return;
            }
        }
    })
    .await
    .unwrap();
    let kill = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut rest = Vec::new();
    timeout(LIMIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            rest.push(line);
        }
    })
    .await
    .expect("the demo ends after Ctrl-C");
    let status = timeout(LIMIT, child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{rest:?}");
    assert!(
        rest.iter().any(|l| l == "summary (interrupted)"),
        "{rest:?}"
    );
    assert_eq!(
        rest.last().map(String::as_str),
        Some("divergences: 0"),
        "{rest:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_range_numbers_are_usage_errors_not_panics() {
    for args in [
        &["demo", "--duration", "1e20"][..],
        &["demo", "--duration", "1e308m"],
        &["demo", "--duration", "-5"],
        &["demo", "--duration", "inf"],
        &["demo", "--rate", "inf"],
        &["demo", "--rate", "NaN"],
        &["demo", "--rate", "-1"],
        &["demo", "--rate", "0"],
        &["demo", "--services", "-1"],
        &["demo", "--services", "0"],
        &["demo", "--pods", "1e20"],
        &["demo", "--pods", "99999999999"],
        &["watch", "pods", "--max-events", "-1"],
        &["sim", "--listen", "127.0.0.1:99999"],
    ] {
        let r = kwatch(args).await;
        assert_eq!(r.code(), 2, "{args:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.starts_with("kwatch: error: "), "{}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    }
}

/// The one stderr line of a kwatch that stopped on an authentication or authorization failure.
fn only_error_line(r: &Run) -> &str {
    assert_eq!(r.code(), 1, "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    r.stderr.trim_end()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthorized_before_sync_exits_1_with_kubectls_words() {
    let sim = Simulator::builder().token("right").start().await.unwrap();
    for sub in [
        &["get", "configmaps"][..],
        &["watch", "configmaps"],
        &["instances", "web"],
    ] {
        let mut args = vec!["--server", sim.url(), "--token", "wrong"];
        args.extend_from_slice(sub);
        let r = kwatch(&args).await;
        assert_eq!(
            only_error_line(&r),
            "kwatch: error: You must be logged in to the server (Unauthorized)",
            "{sub:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_list_before_sync_exits_1_with_the_servers_message() {
    // Discovery answers (as it does for every authenticated user); listing is forbidden, so the
    // failure comes from the informer, not from resolving the resource name.
    let sim = sim_with_configmaps(1).await;
    sim.faults().forbid_reads(true);
    for sub in [
        &["get", "configmaps"][..],
        &["watch", "configmaps", "-o", "jsonl"],
    ] {
        let mut args = vec!["--server", sim.url()];
        args.extend_from_slice(sub);
        let r = kwatch(&args).await;
        // Not the "not synced after 30 s" of other failures: a 403 ends the command at once. The
        // verb is the informer's request's (`watch` for a streaming list, else `list`).
        let line = only_error_line(&r);
        assert!(
            line.starts_with(
                "kwatch: error: Error from server (Forbidden): configmaps is forbidden: User \
                 \"reader\" cannot "
            ) && line.ends_with(
                " resource \"configmaps\" in API group \"\" in the namespace \"default\""
            ),
            "{sub:?}: {line}"
        );
        assert_eq!(r.stdout, "", "{sub:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_failures_after_sync_are_printed_and_retried() {
    let sim = sim_with_configmaps(1).await;
    let mut child: Child = command(&["--server", sim.url(), "watch", "configmaps", "-o", "jsonl"])
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut next_json = async || -> Value {
        let line = timeout(LIMIT, stdout.next_line())
            .await
            .expect("a line on stdout")
            .unwrap()
            .expect("kwatch still running");
        serde_json::from_str(&line).unwrap()
    };
    assert_eq!(next_json().await["type"], "ADDED");
    assert_eq!(next_json().await["type"], "SYNCED");

    // Roles change: every read is forbidden. The watch ends; each re-watch is refused and printed.
    sim.faults().forbid_reads(true);
    sim.faults().close_all_watches();
    // The reflector may re-watch or relist: the verb is either.
    let forbidden = |line: &str| {
        line.starts_with(
            "kwatch: error: Error from server (Forbidden): configmaps is forbidden: User \"reader\" \
             cannot ",
        ) && line.ends_with(
            " resource \"configmaps\" in API group \"\" in the namespace \"default\" (retrying)",
        )
    };
    for _ in 0..2 {
        let line = timeout(LIMIT, stderr.next_line())
            .await
            .expect("a line on stderr")
            .unwrap()
            .expect("kwatch still running");
        assert!(forbidden(&line), "{line}");
    }
    // Then the token is refused twice, then all is well again: kwatch is still there and resumes.
    sim.faults().fail_next(2, 401);
    sim.faults().forbid_reads(false);
    let mut unauthorized = 0;
    while unauthorized < 2 {
        let line = timeout(LIMIT, stderr.next_line())
            .await
            .expect("a line on stderr")
            .unwrap()
            .expect("kwatch still running");
        if !forbidden(&line) {
            assert_eq!(
                line,
                "kwatch: error: You must be logged in to the server (Unauthorized) (retrying)"
            );
            unauthorized += 1;
        }
    }
    sim.create(
        "configmaps",
        Some("default"),
        json!({"metadata": {"name": "after"}}),
    )
    .unwrap();
    let added = next_json().await;
    assert_eq!(added["type"], "ADDED");
    assert_eq!(added["key"], "default/after");
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_text_reaches_the_terminal_escaped() {
    // Object names cannot hold control characters, but label values printed in JSON, and any text
    // a hostile server sends, can: a custom resource's field carries them here.
    let sim = Simulator::start().await.unwrap();
    sim.register_resource(
        ApiResource::new("example.com", "v1", "Widget", "widgets", true),
        &[],
    );
    let nasty = "\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}31m\u{7f}\u{202e}";
    sim.create(
        "widgets.example.com",
        Some("default"),
        json!({"metadata": {"name": "w1"}, "spec": {"note": nasty}}),
    )
    .unwrap();
    for format in ["json", "jsonl"] {
        let r = kwatch(&["--server", sim.url(), "get", "widgets", "-o", format]).await;
        assert_eq!(r.code(), 0, "{}", r.stderr);
        assert!(
            !r.stdout
                .chars()
                .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "{format}: {:?}",
            r.stdout
        );
        let v: Value = if format == "json" {
            serde_json::from_str(&r.stdout).unwrap()
        } else {
            serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap()
        };
        let item = if format == "json" { &v["items"][0] } else { &v };
        assert_eq!(item["spec"]["note"], nasty, "the JSON value is unchanged");
    }
    // A server's error message, as a hostile server could word it, on the one stderr line.
    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
        "message": nasty, "reason": "BadRequest", "code": 400});
    let body = serde_json::to_vec(&status).unwrap();
    let server = crate::support::raw_server::RawServer::start(move |_| {
        crate::support::raw_server::Reply::json(400, &body)
    })
    .await;
    let r = kwatch(&["--server", &server.url, "get", "pods"]).await;
    assert_eq!(r.code(), 1, "{}", r.stderr);
    assert!(
        !r.stderr
            .trim_end()
            .chars()
            .any(|c| c.is_control() || c == '\u{202e}'),
        "{:?}",
        r.stderr
    );
    // The library shows the Status message's control characters as spaces (issue #31); kwatch
    // escapes what is left (the bidi override).
    assert!(
        r.stderr.contains(r" ]0;owned  [2J 31m \u{202e}"),
        "{}",
        r.stderr
    );
}
