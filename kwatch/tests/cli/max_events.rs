//! `kwatch watch -o jsonl|none --max-events N --stats` on a burst of watch events that lands right
//! behind the initial list, the same stream many times: every run must exit by itself, count
//! exactly N watch events, and print every key's final state (issue #35: the count once lost the
//! events that arrived between the end of the list and the moment the printer saw the sync, and
//! the command then waited for ever).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use informer_sim::Simulator;
use serde_json::{Value, json};
use tokio::process::Command;
use tokio::time::timeout;

/// Objects of the initial list.
const OBJECTS: usize = 1500;
/// Watch events of each run, all sent at once behind the initial list.
const EVENTS: usize = 3000;
/// Runs of the same stream.
const RUNS: usize = 20;
/// One run's limit: a run that has not exited by then lost count.
const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_events_counts_every_event_behind_the_sync_run_after_run() {
    let sim = Simulator::start().await.unwrap();
    for i in 0..OBJECTS {
        sim.create(
            "configmaps",
            Some("default"),
            json!({"metadata": {"name": format!("cm-{i}")}, "data": {"v": "0"}}),
        )
        .unwrap();
    }
    for run in 0..RUNS {
        // Stalled: the streaming list's initial events still go out (they precede the stall's
        // check), everything after them waits; the burst is written once the watch is open, so
        // every write is a watch event of this run, and all of them arrive at once on resume.
        sim.faults().stall_watches();
        // Every other run prints nothing (`-o none`: no handler, the informer alone).
        let format = if run % 2 == 0 { "jsonl" } else { "none" };
        let child = Command::new(env!("CARGO_BIN_EXE_kwatch"))
            .args([
                "--server",
                sim.url(),
                "-n",
                "default",
                "watch",
                "configmaps",
            ])
            .args(["-o", format, "--max-events", &EVENTS.to_string(), "--stats"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        timeout(LIMIT, async {
            while sim.active_watches() == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await
        .expect("kwatch opens its watch");
        for e in 0..EVENTS {
            let name = format!("cm-{}", (e * 7 + run) % OBJECTS);
            sim.patch(
                "configmaps",
                Some("default"),
                &name,
                &json!({"data": {"v": format!("{run}-{e}")}}),
            )
            .unwrap();
        }
        sim.faults().resume_watches();

        let out = timeout(LIMIT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("run {run}: kwatch did not exit after --max-events"))
            .unwrap();
        assert!(out.status.success(), "run {run}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stats: Value = serde_json::from_str(stderr.trim())
            .unwrap_or_else(|e| panic!("run {run}: {e}: {stderr}"));
        assert_eq!(stats["watch_events"], EVENTS as u64, "run {run}: {stats}");
        assert_eq!(stats["objects"], OBJECTS as u64, "run {run}: {stats}");

        if format == "none" {
            assert!(out.stdout.is_empty(), "run {run}");
        } else {
            assert_final_states(&sim, &out.stdout, run);
        }
        // The next run's watch must be the only one open.
        timeout(LIMIT, async {
            while sim.active_watches() != 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
        .await
        .expect("the watch of the run before ends");
    }
}

/// Every key's last line carries the server's final resourceVersion.
fn assert_final_states(sim: &Simulator, stdout: &[u8], run: usize) {
    let mut last: HashMap<String, String> = HashMap::new();
    for line in String::from_utf8_lossy(stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        if v["type"] != "SYNCED" {
            last.insert(
                v["key"].as_str().unwrap().to_string(),
                v["resourceVersion"].as_str().unwrap().to_string(),
            );
        }
    }
    let list = sim.list("configmaps", Some("default")).unwrap();
    let server: HashMap<String, String> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let m = &o["metadata"];
            (
                format!("default/{}", m["name"].as_str().unwrap()),
                m["resourceVersion"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(last, server, "run {run}: final states differ");
}
