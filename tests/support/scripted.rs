//! Reply builders for scripted list/watch servers ([`RawServer`](super::raw_server::RawServer)):
//! ConfigMaps in namespace `a`, lists, watch streams of one event per line, `Status` bodies, and the
//! query of a request line.

use super::raw_server::{Body, Reply};

/// A `Status` body (`kind: Status`, `status: Failure`).
pub fn status(code: u16, reason: &str, message: &str) -> String {
    format!(
        r#"{{"kind":"Status","apiVersion":"v1","metadata":{{}},"status":"Failure","message":"{message}","reason":"{reason}","code":{code}}}"#
    )
}

/// A ConfigMapList body at `rv` with these names (each object at `rv`) and `continue` token.
pub fn list_body(rv: &str, names: &[&str], token: &str) -> String {
    let items: Vec<String> = names
        .iter()
        .map(|n| {
            format!(r#"{{"metadata":{{"name":"{n}","namespace":"a","resourceVersion":"{rv}"}}}}"#)
        })
        .collect();
    format!(
        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}","continue":"{token}"}},"items":[{}]}}"#,
        items.join(",")
    )
}

/// A `200` ConfigMapList at `rv`, with no `continue` token.
pub fn list(rv: &str, names: &[&str]) -> Reply {
    Reply::json(200, list_body(rv, names, "").as_bytes())
}

/// A `200` watch stream: one chunk per event, each followed by a newline.
pub fn stream(events: &[String]) -> Reply {
    Reply {
        head: vec![
            "HTTP/1.1 200 OK".into(),
            "Content-Type: application/json".into(),
        ],
        body: Body::Chunks(
            events
                .iter()
                .map(|e| format!("{e}\n").into_bytes())
                .collect(),
        ),
    }
}

/// A watch event of type `ty` on ConfigMap `a/name` at `rv`.
pub fn event(ty: &str, name: &str, rv: &str) -> String {
    format!(
        r#"{{"type":"{ty}","object":{{"metadata":{{"name":"{name}","namespace":"a","resourceVersion":"{rv}"}}}}}}"#
    )
}

/// An in-stream `ERROR` event carrying a `Status` with this code and reason.
pub fn error_event(code: u16, reason: &str) -> String {
    format!(
        r#"{{"type":"ERROR","object":{}}}"#,
        status(code, reason, "in-stream error")
    )
}

/// The query of a request line, as sorted `key=value` pairs, without the random timeouts.
pub fn query(line: &str) -> String {
    let target = line.split(' ').nth(1).unwrap_or("");
    let q = target.split_once('?').map(|(_, q)| q).unwrap_or("");
    q.split('&')
        .filter(|kv| !kv.starts_with("timeoutSeconds="))
        .collect::<Vec<_>>()
        .join("&")
}
