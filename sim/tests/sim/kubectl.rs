//! The real kubectl as a client of the simulator: discovery, get/create/delete, and a watch
//! (`get -w`) while the test mutates objects. kubectl must be installed (CI installs it); if it
//! is missing these tests fail with a clear message rather than silently passing.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use informer_sim::Simulator;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::process::Command;
use tokio::time::timeout;

const T: Duration = Duration::from_secs(60);

fn kubectl_path() -> PathBuf {
    let path = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(&path).is_file()))
        .unwrap_or(false)
        || std::path::Path::new(&path).is_file();
    assert!(
        found,
        "kubectl not found (looked for {path:?} on PATH): install kubectl or set KUBECTL=/path/to/kubectl; \
         these tests need the real client"
    );
    PathBuf::from(path)
}

/// A scratch directory for kubeconfig, cache and manifests.
fn scratch() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "sim-kubectl-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("kubeconfig"), "").unwrap();
    d
}

fn base_cmd(sim: &Simulator, dir: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = Command::new(kubectl_path());
    c.arg(format!("--server={}", sim.url()))
        .arg(format!("--kubeconfig={}", dir.join("kubeconfig").display()))
        .arg(format!("--cache-dir={}", dir.join("cache").display()))
        .arg("--request-timeout=30s")
        .args(extra)
        .env("HOME", dir)
        .env("KUBECONFIG", dir.join("kubeconfig"))
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

/// Runs kubectl to completion; returns (success, stdout, stderr).
async fn kubectl(sim: &Simulator, dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = timeout(T, base_cmd(sim, dir, &[]).args(args).output())
        .await
        .expect("kubectl timed out")
        .expect("kubectl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn endpoints(name: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"app": name}},
           "subsets": [{"addresses": [{"ip": "10.1.0.1"}], "ports": [{"port": 80, "protocol": "TCP"}]}]})
}

#[tokio::test]
async fn kubectl_get_all_namespaces_json_matches_state() {
    let sim = Simulator::start().await.unwrap();
    let dir = scratch();
    sim.create("endpoints", Some("default"), endpoints("svc-1"))
        .unwrap();
    sim.create("endpoints", Some("kube-system"), endpoints("kube-dns"))
        .unwrap();
    sim.create("endpoints", Some("default"), endpoints("svc-2"))
        .unwrap();
    let (ok, out, err) = kubectl(&sim, &dir, &["get", "endpoints", "-A", "-o", "json"]).await;
    assert!(ok, "kubectl failed: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let got: Vec<(String, String, String)> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let m = &i["metadata"];
            (
                m["namespace"].as_str().unwrap().into(),
                m["name"].as_str().unwrap().into(),
                m["resourceVersion"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want: Vec<(String, String, String)> = sim.list("endpoints", None).unwrap()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let m = &i["metadata"];
            (
                m["namespace"].as_str().unwrap().into(),
                m["name"].as_str().unwrap().into(),
                m["resourceVersion"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(got.len(), 3);
    // Short names resolve through discovery.
    let (ok, out, err) = kubectl(
        &sim,
        &dir,
        &["get", "ep", "svc-1", "-n", "default", "-o", "json"],
    )
    .await;
    assert!(ok, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["kind"], "Endpoints");
    assert_eq!(
        v["metadata"]["uid"],
        sim.get("ep", Some("default"), "svc-1").unwrap()["metadata"]["uid"]
    );
    // A missing object: kubectl reports the server's NotFound.
    let (ok, _, err) = kubectl(&sim, &dir, &["get", "ep", "nope", "-n", "default"]).await;
    assert!(!ok);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
}

#[tokio::test]
async fn kubectl_create_and_delete() {
    let sim = Simulator::start().await.unwrap();
    let dir = scratch();
    let manifest = dir.join("cm.json");
    std::fs::write(
        &manifest,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "default"}, "data": {"k": "v"}}))
        .unwrap(),
    )
    .unwrap();
    let (ok, out, err) = kubectl(&sim, &dir, &["create", "-f", manifest.to_str().unwrap()]).await;
    assert!(ok, "create failed: {err}");
    assert!(out.contains("configmap/settings created"), "{out}");
    assert_eq!(
        sim.get("configmaps", Some("default"), "settings").unwrap()["data"]["k"],
        "v"
    );
    // Creating it again: AlreadyExists from the server.
    let (ok, _, err) = kubectl(&sim, &dir, &["create", "-f", manifest.to_str().unwrap()]).await;
    assert!(!ok);
    assert!(
        err.contains("AlreadyExists") || err.contains("already exists"),
        "{err}"
    );
    let (ok, out, err) = kubectl(
        &sim,
        &dir,
        &["delete", "configmap", "settings", "-n", "default"],
    )
    .await;
    assert!(ok, "delete failed: {err}");
    assert!(out.contains("\"settings\" deleted"), "{out}");
    assert_eq!(
        sim.get("configmaps", Some("default"), "settings")
            .unwrap_err()
            .code,
        404
    );
    // Pods: delete returns the object, kubectl waits for the deletion through a watch.
    sim.create(
        "pods",
        Some("default"),
        json!({"metadata": {"name": "web"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
    )
    .unwrap();
    let (ok, out, err) = kubectl(&sim, &dir, &["delete", "pod", "web"]).await;
    assert!(ok, "delete pod failed: {err}");
    assert!(out.contains("pod \"web\" deleted"), "{out}");
}

/// Reads JSON values from a child's stdout as they arrive.
struct JsonReader {
    out: tokio::process::ChildStdout,
    buf: Vec<u8>,
}

impl JsonReader {
    async fn next(&mut self) -> Value {
        loop {
            let mut it = serde_json::Deserializer::from_slice(&self.buf).into_iter::<Value>();
            match it.next() {
                Some(Ok(v)) => {
                    let used = it.byte_offset();
                    self.buf.drain(..used);
                    return v;
                }
                Some(Err(e)) if !e.is_eof() => panic!("kubectl printed non-JSON: {e}"),
                _ => {}
            }
            let mut chunk = [0u8; 8192];
            let n = timeout(T, self.out.read(&mut chunk))
                .await
                .expect("timed out waiting for kubectl output")
                .unwrap();
            assert!(
                n > 0,
                "kubectl exited early; output so far: {}",
                String::from_utf8_lossy(&self.buf)
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

fn ev(v: &Value) -> (String, String, String) {
    (
        v["type"].as_str().unwrap_or("").into(),
        v["object"]["metadata"]["name"]
            .as_str()
            .unwrap_or("")
            .into(),
        v["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("")
            .into(),
    )
}

async fn watch_roundtrip(sim: &Simulator, extra: &[&str]) {
    let dir = scratch();
    sim.create("pods", Some("default"), json!({"metadata": {"name": "a"}}))
        .unwrap();
    let mut child = base_cmd(sim, &dir, extra)
        .args([
            "get",
            "pods",
            "-n",
            "default",
            "-w",
            "-o",
            "json",
            "--output-watch-events",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kubectl");
    let mut r = JsonReader {
        out: child.stdout.take().unwrap(),
        buf: Vec::new(),
    };
    let first = r.next().await;
    assert_eq!(ev(&first), ("ADDED".into(), "a".into(), "2".into()));
    // kubectl is now watching from the list RV; mutate and expect every event in order.
    let b = sim
        .create("pods", Some("default"), json!({"metadata": {"name": "b"}}))
        .unwrap();
    sim.patch(
        "pods",
        Some("default"),
        "a",
        &json!({"metadata": {"labels": {"x": "y"}}}),
    )
    .unwrap();
    sim.delete("pods", Some("default"), "b").unwrap();
    let want = [
        (
            "ADDED",
            "b",
            b["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string(),
        ),
        ("MODIFIED", "a", "4".to_string()),
        ("DELETED", "b", "5".to_string()),
    ];
    for (ty, name, rv) in want {
        let e = r.next().await;
        assert_eq!(ev(&e), (ty.to_string(), name.to_string(), rv), "{e}");
    }
    child.kill().await.unwrap();
}

#[tokio::test]
async fn kubectl_watch_sees_every_event() {
    timeout(T * 2, async {
        let sim = Simulator::start().await.unwrap();
        watch_roundtrip(&sim, &[]).await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn kubectl_over_tls_with_token() {
    timeout(T * 2, async {
        let sim = Simulator::builder()
            .tls(true)
            .token("tok")
            .start()
            .await
            .unwrap();
        let dir = scratch();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, sim.ca_pem().unwrap()).unwrap();
        let ca_arg = format!("--certificate-authority={}", ca.display());
        // Without the token: Unauthorized.
        let (ok, _, err) = kubectl(&sim, &dir, &[&ca_arg, "--token=wrong", "get", "pods"]).await;
        assert!(!ok);
        assert!(
            err.contains("Unauthorized") || err.contains("provide credentials"),
            "{err}"
        );
        watch_roundtrip(&sim, &[&ca_arg, "--token=tok"]).await;
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn kubectl_with_generated_kubeconfig() {
    timeout(T * 2, async {
        let sim = Simulator::builder()
            .tls(true)
            .token("tok")
            .start()
            .await
            .unwrap();
        sim.create("pods", Some("default"), json!({"metadata": {"name": "a"}}))
            .unwrap();
        let dir = scratch();
        let kc = dir.join("sim.kubeconfig");
        std::fs::write(&kc, sim.kubeconfig()).unwrap();
        let out = timeout(
            T,
            Command::new(kubectl_path())
                .arg(format!("--kubeconfig={}", kc.display()))
                .arg(format!("--cache-dir={}", dir.join("cache").display()))
                .args(["get", "pods", "-o", "json"])
                .env("HOME", &dir)
                .stdin(Stdio::null())
                .output(),
        )
        .await
        .unwrap()
        .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["items"][0]["metadata"]["name"], "a");
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn kubectl_apply_label_and_api_resources() {
    let sim = Simulator::start().await.unwrap();
    let dir = scratch();
    let manifest = dir.join("cm.yaml");
    let write = |v: &str| {
        std::fs::write(
            &manifest,
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  namespace: default\ndata:\n  a: \"{v}\"\n"
            ),
        )
        .unwrap()
    };
    let m = manifest.to_str().unwrap();
    write("1");
    let (ok, out, err) = kubectl(&sim, &dir, &["apply", "-f", m]).await;
    assert!(
        ok && out.contains("configmap/applied created"),
        "{out}{err}"
    );
    write("2");
    let (ok, out, err) = kubectl(&sim, &dir, &["apply", "-f", m]).await;
    assert!(
        ok && out.contains("configmap/applied configured"),
        "{out}{err}"
    );
    let (ok, _, err) = kubectl(&sim, &dir, &["label", "cm", "applied", "x=y"]).await;
    assert!(ok, "{err}");
    let cm = sim.get("configmaps", Some("default"), "applied").unwrap();
    assert_eq!(cm["data"]["a"], "2");
    assert_eq!(cm["metadata"]["labels"]["x"], "y");
    let (ok, out, err) = kubectl(&sim, &dir, &["api-resources"]).await;
    assert!(ok, "{err}");
    assert!(
        out.lines().any(|l| l.starts_with("endpointslices")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("pods") && l.contains(" po ")),
        "{out}"
    );
}
