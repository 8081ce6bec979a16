//! `JsonObject` (the dynamic informers' object since issue #35) against `DynamicObject` (the
//! `serde_json::Map` it replaced there) over every real capture: `kwatch -o jsonl`'s line for each
//! object (`{"type","key","resourceVersion","object"}`) is the same JSON value with either, and
//! the object equals, as parsed JSON, what the server sent. Objects come through both decode
//! paths: the envelope decoded at once, and the raw path the fifo decodes lazily.

use crate::support::raw_server::{capture, fixture};
use informer::internals::frame::FrameDecoder;
use informer::internals::watch::{EventDecoder, RawEvent, WatchEvent, decode_event};
use informer::{DynamicObject, JsonObject, Object};
use serde::Serialize;
use serde_json::Value;

const WATCH_CAPTURES: &[&str] = &[
    "wire/real-1.20-watch-endpoints-from-list-rv.http",
    "wire/real-1.20-watch-endpoints-replay-split-chunks.http",
    "wire/real-1.20-watch-endpoints-labelselector-no-rv.http",
    "wire/real-1.20-watch-endpoints-fieldselector-all-ns.http",
    "wire/real-1.20-watch-endpoints-rv0-initial-state.http",
    "wire/real-1.20-watch-endpoints-rv-too-old-410.http",
    "wire/real-1.20-watch-endpoints-rv-in-future-empty.http",
];

const EVENT_LINES: &[&str] = &[
    "wire/real-1.20-watch-events.jsonl",
    "wire/real-1.20-watch-events-labelselector.jsonl",
    "wire/public-endpoints-watch-gke-2015.jsonl",
    "wire/public-endpointslice-watch-added-tke-2023.jsonl",
];

const OBJECTS: &[&str] = &[
    "wire/real-1.20-endpoints.json",
    "wire/real-1.20-endpointslice-v1beta1.json",
    "wire/real-1.20-pod-managedfields-two-managers.json",
    "wire/real-1.20-service.json",
    "wire/public-service-tke-2023.json",
    "pod-managedfields.json",
    "endpointslice-100-endpoints.json",
];

const LISTS: &[&str] = &[
    "wire/real-1.20-list-endpoints-limit2-page1.http",
    "wire/real-1.20-list-endpoints-limit2-page2.http",
];

/// kwatch's `-o jsonl` line (kwatch/src/cli/watch.rs `EventLine`).
#[derive(Serialize)]
struct EventLine<'a, T> {
    #[serde(rename = "type")]
    type_: &'a str,
    key: String,
    #[serde(rename = "resourceVersion")]
    resource_version: &'a str,
    object: &'a T,
}

fn line<T: Object<Meta = informer::ObjectMeta> + Serialize>(type_: &str, o: &T) -> Value {
    let text = serde_json::to_string(&EventLine {
        type_,
        key: o.meta().key(),
        resource_version: &o.meta().resource_version,
        object: o,
    })
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Both representations of `server` (an object's JSON as sent) agree, and the new one is exact.
fn check(what: &str, type_: &str, server: &[u8]) -> usize {
    let sent: Value = serde_json::from_slice(server).unwrap();
    let old: DynamicObject = serde_json::from_slice(server).unwrap();
    let new: JsonObject = serde_json::from_slice(server).unwrap();
    assert_eq!(line(type_, &new), line(type_, &old), "{what}");
    assert_eq!(
        serde_json::from_str::<Value>(&new.to_json()).unwrap(),
        sent,
        "{what}: not what the server sent"
    );
    assert_eq!(new.meta(), &old.metadata, "{what}");
    assert_eq!(new.types, old.types, "{what}");
    1
}

fn event_type<T>(e: &WatchEvent<T>) -> &'static str {
    match e {
        WatchEvent::Added(_) => "ADDED",
        WatchEvent::Modified(_) => "MODIFIED",
        WatchEvent::Deleted(_) => "DELETED",
        WatchEvent::Bookmark(_) => "BOOKMARK",
        WatchEvent::Error(_) => "ERROR",
    }
}

fn streams() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = WATCH_CAPTURES
        .iter()
        .map(|n| (n.to_string(), capture(n).body))
        .collect();
    v.extend(EVENT_LINES.iter().map(|n| (n.to_string(), fixture(n))));
    v
}

#[test]
fn jsonl_lines_are_the_same_with_json_objects_as_with_dynamic_objects() {
    let mut objects = 0;
    for (name, body) in streams() {
        let mut frames = FrameDecoder::new();
        frames.push(&body);
        while let Some(f) = frames.next_frame().unwrap() {
            let envelope: Value = serde_json::from_slice(&f.bytes).unwrap();
            let event = decode_event::<JsonObject>(&f).unwrap();
            let type_ = event_type(&event);
            if matches!(type_, "ADDED" | "MODIFIED" | "DELETED") {
                let server = serde_json::to_vec(&envelope["object"]).unwrap();
                objects += check(&name, type_, &server);
                let (WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) =
                    &event
                else {
                    unreachable!()
                };
                assert_eq!(
                    line(type_, o),
                    line(
                        type_,
                        &serde_json::from_slice::<DynamicObject>(&server).unwrap()
                    )
                );
            }
        }
        // The fifo's path: the object kept raw, decoded later.
        let mut dec = EventDecoder::<JsonObject>::new();
        dec.push(&body);
        while let Ok(Some(raw)) = dec.next_raw() {
            if let RawEvent::Added(r) | RawEvent::Modified(r) | RawEvent::Deleted(r) = raw {
                let new: JsonObject = r.decode_object().unwrap();
                let sent: Value = serde_json::from_slice(r.bytes()).unwrap();
                assert_eq!(serde_json::to_value(&new).unwrap(), sent, "{name}");
            }
        }
    }
    for name in OBJECTS {
        objects += check(name, "ADDED", &fixture(name));
    }
    for name in LISTS {
        let list: Value = serde_json::from_slice(&capture(name).body).unwrap();
        for item in list["items"].as_array().unwrap() {
            objects += check(name, "ADDED", &serde_json::to_vec(item).unwrap());
        }
    }
    assert!(objects > 40, "{objects} objects compared");
}

/// Random JSON text for [`random_objects_round_trip`]: whitespace between tokens, escapes,
/// numbers written in several ways, repeated keys, and the keys `JsonObject` types.
struct Gen(fastrand::Rng);

impl Gen {
    fn ws(&mut self, out: &mut String) {
        for _ in 0..self.0.usize(0..3).saturating_sub(1) {
            out.push(*self.0.choice(&[' ', '\n', '\t', '\r']).unwrap());
        }
    }

    fn string(&mut self, out: &mut String) {
        out.push('"');
        for _ in 0..self.0.usize(0..6) {
            out.push_str(
                self.0
                    .choice([
                        "a",
                        "b",
                        "é",
                        "\\\"",
                        "\\\\",
                        "\\n",
                        "\\u00e9",
                        "\\u0041",
                        " ",
                        "\u{85}",
                        "\\ud83d\\ude00",
                        "/",
                        "\\/",
                    ])
                    .unwrap(),
            );
        }
        out.push('"');
    }

    fn number(&mut self, out: &mut String) {
        out.push_str(
            self.0
                .choice([
                    "0",
                    "-0",
                    "1",
                    "1.50",
                    "1e5",
                    "-2.5E-3",
                    "12345678901234567890",
                    "3.0",
                    "18446744073709551616",
                    "0.1",
                ])
                .unwrap(),
        );
    }

    fn value(&mut self, out: &mut String, depth: u32) {
        match self.0.u32(0..if depth > 3 { 5 } else { 7 }) {
            0 => out.push_str("null"),
            1 => out.push_str(if self.0.bool() { "true" } else { "false" }),
            2 => self.number(out),
            3 | 4 => self.string(out),
            5 => {
                out.push('[');
                for i in 0..self.0.usize(0..4) {
                    if i > 0 {
                        out.push(',');
                    }
                    self.ws(out);
                    self.value(out, depth + 1);
                    self.ws(out);
                }
                out.push(']');
            }
            _ => self.object(out, depth + 1, &["a", "b", "spec", "x.y", ""]),
        }
    }

    fn object(&mut self, out: &mut String, depth: u32, keys: &[&str]) {
        out.push('{');
        for i in 0..self.0.usize(0..5) {
            if i > 0 {
                out.push(',');
            }
            self.ws(out);
            let key = *self.0.choice(keys).unwrap();
            out.push_str(&serde_json::to_string(key).unwrap());
            self.ws(out);
            out.push(':');
            self.ws(out);
            match key {
                "metadata" => self.metadata(out),
                "labels" | "annotations" => self.labels(out),
                "name" | "namespace" | "uid" | "resourceVersion" => self.string(out),
                "apiVersion" | "kind" if self.0.bool() => self.string(out),
                _ => self.value(out, depth),
            }
            self.ws(out);
        }
        out.push('}');
    }

    fn labels(&mut self, out: &mut String) {
        out.push('{');
        let mut keys = vec!["app", "tier", "z", "a/b"];
        self.0.shuffle(&mut keys);
        for (i, k) in keys.iter().take(self.0.usize(0..4)).enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&format!("\"{k}\":"));
            self.string(out);
        }
        out.push('}');
    }

    fn metadata(&mut self, out: &mut String) {
        // Keys ObjectMeta names (each at most once: it refuses repeats) and one it does not.
        let mut keys = vec![
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "labels",
            "annotations",
            "managedFields",
            "zz",
        ];
        self.0.shuffle(&mut keys);
        out.push('{');
        for (i, k) in keys.iter().take(self.0.usize(0..6)).enumerate() {
            if i > 0 {
                out.push(',');
            }
            self.ws(out);
            out.push_str(&format!("\"{k}\":"));
            match *k {
                "labels" | "annotations" => self.labels(out),
                // Kept as text by the typed metadata: whitespace inside must go there too.
                "managedFields" => {
                    out.push('[');
                    self.ws(out);
                    self.object(out, 2, &["manager", "operation", "fieldsV1"]);
                    self.ws(out);
                    out.push(']');
                }
                "zz" => self.value(out, 3),
                _ => self.string(out),
            }
        }
        out.push('}');
    }
}

#[test]
fn random_objects_round_trip() {
    let mut decoded = 0;
    for seed in 0..3000 {
        let mut g = Gen(fastrand::Rng::with_seed(seed));
        let mut text = String::new();
        g.object(
            &mut text,
            0,
            &[
                "apiVersion",
                "kind",
                "metadata",
                "spec",
                "status",
                "a",
                "a",
                "x.y",
            ],
        );
        let sent: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(_) => continue,
        };
        let Ok(object) = JsonObject::from_json(&text) else {
            continue;
        };
        decoded += 1;
        round_trips(&text, &sent, &object);
    }
    assert!(decoded > 1000, "only {decoded} inputs decoded");
}

/// What the fuzz target `json_object` asserts of every object it decodes.
fn round_trips(text: &str, sent: &Value, object: &JsonObject) {
    let written = object.to_json();
    assert_eq!(
        serde_json::from_str::<Value>(&written).unwrap(),
        *sent,
        "{text}"
    );
    assert_eq!(serde_json::to_value(object).unwrap(), *sent, "{text}");
    let again = JsonObject::from_json(&written).unwrap();
    assert_eq!(again, *object, "{text}");
    assert_eq!(again.to_json(), written, "{text}");
    for (key, value) in sent.as_object().unwrap() {
        if !key.contains('.') && key != "metadata" {
            assert_eq!(object.get(key).as_ref(), Some(value), "{key} of {text}");
        }
    }
    if let Ok(dynamic) = object.to_dynamic() {
        let back = JsonObject::from_dynamic(&dynamic).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&dynamic).unwrap(),
            "{text}"
        );
    }
}

/// Inputs the fuzz target found, kept as they were found.
#[test]
fn fuzz_findings_round_trip() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/json_object");
    let mut found = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let sent: Value = serde_json::from_str(&text).unwrap();
        let object = JsonObject::from_json(&text).unwrap();
        round_trips(&text, &sent, &object);
        found += 1;
    }
    assert!(found > 0);
}
