//! kwatch's `SYNCED` line and `get -o json` against a scripted server over real HTTP (issue #15,
//! item 5): they report the initial list's resourceVersion and object count, not the store's newer
//! state, also when a `continue` token expires mid-list and the reflector lists again in full; and
//! `--until-synced` prints exactly the initial list and `SYNCED`.

use std::process::Stdio;
use std::time::Duration;

use crate::support::raw_server::{Body, RawServer, Reply};
use serde_json::Value;
use tokio::process::Command;

fn item(name: &str, rv: &str) -> String {
    format!(r#"{{"metadata":{{"name":"{name}","namespace":"default","resourceVersion":"{rv}"}}}}"#)
}

fn list(rv: &str, items: &[String], token: &str) -> Reply {
    Reply::json(
        200,
        format!(
            r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}","continue":"{token}"}},"items":[{}]}}"#,
            items.join(",")
        )
        .as_bytes(),
    )
}

/// A server whose first LIST page's continue token has expired by the time the second page is
/// asked for; the full list then has one more object. Its watches change two objects at once.
async fn server() -> RawServer {
    RawServer::start(|line| {
        let target = line.split(' ').nth(1).unwrap_or("");
        if target == "/api/v1" {
            return Reply::json(
                200,
                br#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[{"name":"configmaps","singularName":"configmap","namespaced":true,"kind":"ConfigMap","verbs":["list","watch"],"shortNames":["cm"]}]}"#,
            );
        }
        if target.starts_with("/apis") {
            return Reply::json(200, br#"{"kind":"APIGroupList","apiVersion":"v1","groups":[]}"#);
        }
        if target.contains("sendInitialEvents=true") {
            return Reply::json(
                422,
                br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422}"#,
            );
        }
        if target.contains("watch=true") {
            let events = [
                format!(r#"{{"type":"MODIFIED","object":{}}}"#, item("c1", "12")),
                format!(r#"{{"type":"ADDED","object":{}}}"#, item("c4", "13")),
            ];
            return Reply {
                head: vec!["HTTP/1.1 200 OK".into()],
                body: Body::Chunks(events.iter().map(|e| format!("{e}\n").into_bytes()).collect()),
            };
        }
        if target.contains("continue=") {
            return Reply::json(
                410,
                br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","message":"The provided continue parameter is too old","code":410}"#,
            );
        }
        if target.contains("limit=") {
            return list("10", &[item("c1", "5"), item("c2", "6")], "token");
        }
        list("10", &[item("c1", "5"), item("c2", "6"), item("c3", "9")], "")
    })
    .await
}

async fn kwatch(args: &[&str]) -> (i32, String, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_kwatch"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn kwatch");
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .expect("kwatch did not finish in time")
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synced_reports_the_complete_initial_list_after_an_expired_continue_token() {
    let server = server().await;
    let (code, stdout, stderr) = kwatch(&[
        "--server",
        &server.url,
        "watch",
        "configmaps",
        "-o",
        "jsonl",
        "--until-synced",
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let last = lines.last().expect("a SYNCED line");
    assert_eq!(last["type"], "SYNCED", "nothing after SYNCED: {stdout}");
    assert_eq!(
        last["resourceVersion"], "10",
        "the list's version: {stdout}"
    );
    assert_eq!(last["objects"], 3, "the full list's count: {stdout}");
    let before: Vec<&Value> = lines[..lines.len() - 1].iter().collect();
    assert!(
        before
            .iter()
            .all(|l| l["type"] == "ADDED" && l["resourceVersion"] != "12"),
        "only the initial list before SYNCED: {stdout}"
    );
    let mut names: Vec<&str> = before.iter().map(|l| l["key"].as_str().unwrap()).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(
        names,
        ["default/c1", "default/c2", "default/c3"],
        "{stdout}"
    );
    // The expired token was reported, then the full list was made.
    let lines = server.request_lines();
    assert!(
        lines.iter().any(|l| l.contains("continue=token")),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_json_reports_the_lists_resource_version() {
    let server = server().await;
    let (code, stdout, stderr) =
        kwatch(&["--server", &server.url, "get", "configmaps", "-o", "json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let list: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(list["metadata"]["resourceVersion"], "10", "{stdout}");
}
