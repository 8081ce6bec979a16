//! Tests against the real kube-apiserver that disturb the whole server: etcd compaction and an
//! apiserver restart (etcd keeps running). They run one at a time, and cargo runs this binary after
//! `tests/real_apiserver`, so no other test sees the disturbance. Without `REAL_APISERVER_URL` each
//! test prints how to run it and passes.

#[path = "support/mod.rs"]
#[macro_use]
mod support;

use std::os::unix::process::CommandExt;
use std::time::Duration;

use hyper::Method;
use informer::client::VersionMatch;
use informer::client::WatchEvent;
use informer::{Api, Client, ConfigMap, Informer, ListParams, WatchParams};
use serde_json::json;
use support::real_apiserver::*;

/// One disruptive test at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn compaction_expires_continue_tokens_and_exact_lists_but_not_the_watch_cache() {
    let real =
        real_or_skip!("compaction_expires_continue_tokens_and_exact_lists_but_not_the_watch_cache");
    let _serial = SERIAL.lock().await;
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "compact").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        for i in 0..5 {
            post(
                &client,
                &cm_path(&ns, None),
                configmap(&format!("c{i}"), json!({}), json!({})),
            )
            .await;
        }
        let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
        let snapshot = first.metadata.resource_version.to_string();
        let token = first.metadata.continue_token.clone();
        let late = post(
            &client,
            &cm_path(&ns, None),
            configmap("late", json!({}), json!({})),
        )
        .await;
        compact_etcd(&real, rv_of(&late));

        // The stale continue token: HTTP 410, with a fresh token for an inconsistent continuation.
        let err = cms
            .list(&ListParams::default().limit(2).continue_token(&token))
            .await
            .unwrap_err();
        assert!(err.is_expired(), "{err}");
        assert_eq!(err.http_code(), Some(410));
        let status = err.status().unwrap();
        assert!(
            status
                .message
                .starts_with("The provided continue parameter is too old"),
            "{}",
            status.message
        );
        let fresh = status.metadata.continue_token.clone();
        assert!(!fresh.is_empty(), "1.20 offers a fresh continue token");
        let mut rest = Vec::new();
        let mut params = ListParams::default().limit(2).continue_token(&fresh);
        loop {
            let page = cms.list(&params).await.unwrap();
            rest.extend(page.items.iter().map(|c| c.metadata.name.clone()));
            if page.metadata.continue_token.is_empty() {
                break;
            }
            params = ListParams::default()
                .limit(2)
                .continue_token(&page.metadata.continue_token);
        }
        assert_eq!(
            rest,
            ["c2", "c3", "c4", "late"],
            "the inconsistent continuation shows the late write"
        );

        // An exact read below the compaction: HTTP 410 too.
        let err = cms
            .list(
                &ListParams::default()
                    .resource_version(&snapshot)
                    .version_match(VersionMatch::Exact),
            )
            .await
            .unwrap_err();
        assert!(err.is_expired(), "{err}");
        assert_eq!(
            err.status().unwrap().message,
            "The resourceVersion for the provided list is too old."
        );

        // The watch cache keeps its own history: a watch from before the compaction still replays.
        let mut stream = cms
            .watch(&WatchParams::default().resource_version(&snapshot))
            .await
            .unwrap();
        match tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
        {
            Some(Ok(WatchEvent::Added(o))) => assert_eq!(o.metadata.name, "late"),
            other => panic!("expected ADDED late, got {other:?}"),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_keeps_converging_across_a_compaction() {
    let real = real_or_skip!("informer_keeps_converging_across_a_compaction");
    let _serial = SERIAL.lock().await;
    bounded(60, async {
        let client = real.client();
        let ns = namespace(&client, "compact-inf").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        for i in 0..6 {
            post(
                &client,
                &cm_path(&ns, None),
                configmap(&format!("c{i}"), json!({}), json!({})),
            )
            .await;
        }
        let inf = Informer::new(cms.clone(), fast_options());
        inf.start();
        inf.wait_for_sync(Duration::from_secs(20)).await.unwrap();
        merge_patch(
            &client,
            &cm_path(&ns, Some("c0")),
            json!({"data": {"k": "1"}}),
        )
        .await;
        delete(&client, &cm_path(&ns, Some("c1"))).await;
        let now = cms
            .list(&ListParams::default())
            .await
            .unwrap()
            .metadata
            .resource_version;
        compact_etcd(&real, now.parse().unwrap());
        post(
            &client,
            &cm_path(&ns, None),
            configmap("after", json!({}), json!({})),
        )
        .await;
        merge_patch(
            &client,
            &cm_path(&ns, Some("c2")),
            json!({"data": {"k": "2"}}),
        )
        .await;
        let want = server_state(&cms).await;
        assert!(
            eventually(20, || store_state(&inf) == want).await,
            "store never matched the server"
        );
        // A second informer starting after the compaction lists and watches normally.
        let late = Informer::new(cms.clone(), fast_options());
        late.start();
        late.wait_for_sync(Duration::from_secs(20)).await.unwrap();
        assert_eq!(store_state(&late), want);
        println!("after compaction: {:?}", inf.health());
        inf.stop();
        late.stop();
    })
    .await;
}

/// The running kube-apiserver: its PID and command line (from the start script's PID file).
fn apiserver_process(real: &Real) -> (u32, Vec<String>) {
    let pid_file = format!("{}/kube-apiserver.pid", real.run_dir);
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let args = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    (pid, args)
}

/// Gone, or a zombie nobody reaped yet (it holds no port).
fn exited(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

async fn ready(client: &Client) -> bool {
    client.send(Method::GET, "/readyz", None).await.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn informer_recovers_across_an_apiserver_restart() {
    let real = real_or_skip!("informer_recovers_across_an_apiserver_restart");
    let _serial = SERIAL.lock().await;
    bounded(120, async {
        let client = real.client();
        let ns = namespace(&client, "restart").await;
        let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        for i in 0..4 {
            post(
                &client,
                &cm_path(&ns, None),
                configmap(&format!("c{i}"), json!({}), json!({})),
            )
            .await;
        }
        let inf = Informer::new(cms.clone(), fast_options());
        inf.start();
        inf.wait_for_sync(Duration::from_secs(20)).await.unwrap();
        let before = inf.health();

        // Stop only the apiserver (etcd keeps the data), then start it again with the same command
        // line; the start script has no switch for this.
        let (pid, args) = apiserver_process(&real);
        assert!(args[0].ends_with("kube-apiserver"), "{args:?}");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        assert!(
            eventually(30, || exited(pid)).await,
            "kube-apiserver {pid} did not exit"
        );
        assert!(
            eventually(10, || inf.health().consecutive_failures > 0).await,
            "the reflector noticed nothing"
        );

        let log = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(format!("{}/kube-apiserver.log", real.run_dir))
            .unwrap();
        // Deliberately not waited for: the server must outlive this test (`stop` ends it).
        #[allow(clippy::zombie_processes)]
        let child = std::process::Command::new(&args[0])
            .args(&args[1..])
            .stdin(std::process::Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap();
        // The stop script finds the new process through the PID file (it checks the command line).
        std::fs::write(
            format!("{}/kube-apiserver.pid", real.run_dir),
            format!("{}\n", child.id()),
        )
        .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !ready(&client).await {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the restarted apiserver never became ready"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        // Writes after the restart reach the informer.
        post(
            &client,
            &cm_path(&ns, None),
            configmap("after", json!({}), json!({})),
        )
        .await;
        merge_patch(
            &client,
            &cm_path(&ns, Some("c0")),
            json!({"data": {"k": "1"}}),
        )
        .await;
        delete(&client, &cm_path(&ns, Some("c1"))).await;
        let want = server_state(&cms).await;
        assert!(
            eventually(30, || store_state(&inf) == want).await,
            "store never matched the server"
        );
        assert!(eventually(10, || inf.health().consecutive_failures == 0).await);
        let after = inf.health();
        assert!(after.watches > before.watches, "{before:?} -> {after:?}");
        println!(
            "across the restart: lists {} -> {}, watches {} -> {}",
            before.lists, after.lists, before.watches, after.watches
        );
        inf.stop();
    })
    .await;
}
