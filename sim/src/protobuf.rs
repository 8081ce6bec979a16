//! The Kubernetes protobuf wire format, served as kube-apiserver serves it to a client whose
//! `Accept` puts `application/vnd.kubernetes.protobuf` first (every typed client-go clientset,
//! and the informer crate's typed `Api`s of built-in kinds).
//!
//! The simulator keeps objects as JSON; a protobuf answer is that JSON translated:
//!
//! - a body (a GET's object, a LIST) is the magic `k8s\0` and a `runtime.Unknown`
//!   `{typeMeta {apiVersion, kind}, raw: the object's message, contentEncoding "", contentType ""}`;
//! - a watch is a sequence of frames, each a 4-byte big-endian length and a `meta.v1.WatchEvent`
//!   `{type, object: RawExtension {raw: k8s\0 + Unknown}}`; an ERROR event's object is a `Status`.
//!
//! Field numbers are those of k8s.io/api and k8s.io/apimachinery's `generated.proto`. As Go's
//! generated code does, plain (non-pointer) fields are written even when empty (`name`,
//! `generation`, a zero `creationTimestamp` as an empty message), pointer, slice and map fields
//! only when set; map entries in key order. Only the kinds listed in [`serves`] are translated
//! (ConfigMaps: what the convergence scenarios and most tests watch); every other resource
//! answers JSON whatever the client asks, as a real apiserver does for CRDs, and a client must
//! read whichever it gets. HTTP error bodies stay JSON (a client reads them by `Content-Type`).
//!
//! A watch frame that is not JSON (the `corrupt_watches` fault) goes out as a frame of those
//! bytes, which no client can read as a `WatchEvent`: the protobuf form of that fault.
//!
//! The metadata-only form (`as=PartialObjectMetadata`, what client-go's metadata client and the
//! informer crate's `PartialObjectMetadata` views ask for) is served for every resource, in JSON
//! or protobuf: each object becomes `{kind: PartialObjectMetadata, apiVersion: meta.k8s.io/v1,
//! metadata}` (a `meta.v1.PartialObjectMetadata`, metadata 1), a LIST a
//! `PartialObjectMetadataList`, as kube-apiserver 1.20 answers them (checked with curl against
//! it: both encodings, and a watch in its protobuf stream form); an ERROR's `Status` stays.

use base64::Engine;
use prost::encoding::{WireType, encode_key, encode_varint};
use serde_json::Value;

use super::resources::ResourceInfo;

/// What every protobuf object body starts with.
const MAGIC: &[u8; 4] = b"k8s\0";
/// The `Content-Type` of a protobuf body.
pub(crate) const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The `Content-Type` of a protobuf watch.
pub(crate) const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// Whether the resource is one this module translates.
pub(crate) fn serves(info: &ResourceInfo) -> bool {
    let api = &info.api;
    info.builtin && api.group.is_empty() && api.version == "v1" && api.kind == "ConfigMap"
}

/// What a read's `Accept` asks for: protobuf or JSON, whole objects or their metadata only.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Form {
    pub protobuf: bool,
    /// `as=PartialObjectMetadata` (`...List` for a LIST) of `meta.k8s.io/v1`: each object reduced
    /// to `{kind: PartialObjectMetadata, apiVersion: meta.k8s.io/v1, metadata}`, as client-go's
    /// metadata client asks; any resource has this form, in either encoding.
    pub metadata: bool,
}

/// The form `accept` asks for first: its media ranges in order, those with `q=0` left out; a
/// range naming protobuf counts if `protobuf` (the simulator answers it) and `serves` (the
/// resource is translated) or it asks for the metadata form, and it has no parameter but `q`,
/// `stream`, `charset`, `as`, `g` and `v`; a range with `as=` counts only for the metadata form
/// this read answers (`PartialObjectMetadataList` for a LIST, `PartialObjectMetadata` for a GET or
/// a WATCH, of `meta.k8s.io/v1`: a `Table` is not written). The first range that counts and names protobuf or what
/// JSON satisfies (`application/json`, `application/*`, `*/*`) decides; none: whole objects in
/// JSON. Clients send their preference in order (client-go's `application/vnd.kubernetes.protobuf,
/// application/json`), without weights.
///
/// ```text
/// "application/vnd.kubernetes.protobuf, application/json"  -> protobuf
/// "application/json, application/vnd.kubernetes.protobuf"  -> JSON
/// "application/vnd.kubernetes.protobuf;q=0, */*"           -> JSON
/// "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1" (a LIST) -> JSON, metadata
/// ```
pub(crate) fn negotiate(accept: &str, protobuf: bool, serves: bool, list: bool) -> Form {
    let wanted = if list {
        "PartialObjectMetadataList"
    } else {
        "PartialObjectMetadata"
    };
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let (mut refused, mut counts, mut as_kind, mut group, mut version) =
            (false, true, None, "", "");
        for p in parts {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            match k.as_str() {
                "q" if v.parse::<f32>().map_or(true, |q| q <= 0.0) => refused = true,
                "q" | "charset" => {}
                "stream" if v == "watch" => {}
                "as" => as_kind = Some(v),
                "g" => group = v,
                "v" => version = v,
                // Another protobuf form is not written.
                _ => counts = false,
            }
        }
        if refused {
            continue;
        }
        let metadata = match as_kind {
            None => false,
            Some(kind) if kind == wanted && group == "meta.k8s.io" && version == "v1" => true,
            Some(_) => continue,
        };
        match media.as_str() {
            "application/vnd.kubernetes.protobuf" if counts && protobuf && (serves || metadata) => {
                return Form {
                    protobuf: true,
                    metadata,
                };
            }
            "application/json" | "application/*" | "*/*" => {
                return Form {
                    protobuf: false,
                    metadata,
                };
            }
            _ => {}
        }
    }
    Form::default()
}

/// An object's `metadata`, as raw JSON, read without building the rest of the object.
#[derive(serde::Deserialize)]
struct MetadataOnly<'a> {
    #[serde(default, borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow)]
    metadata: Option<&'a serde_json::value::RawValue>,
}

/// `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":..}`.
fn write_partial(metadata: Option<&serde_json::value::RawValue>, out: &mut Vec<u8>) {
    out.extend_from_slice(
        br#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":"#,
    );
    out.extend_from_slice(metadata.map_or("null", |m| m.get()).as_bytes());
    out.push(b'}');
}

/// The JSON of an object (its JSON bytes) reduced to its metadata (`as=PartialObjectMetadata`).
pub(crate) fn partial_json(object: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(object.len().min(4096));
    let meta = serde_json::from_slice::<MetadataOnly>(object).ok();
    write_partial(meta.and_then(|m| m.metadata), &mut out);
    out
}

/// A JSON watch frame with its object reduced to its metadata; an ERROR's `Status` and a frame
/// that is not JSON stay as they are.
pub(crate) fn metadata_frame(json_frame: &[u8]) -> Vec<u8> {
    #[derive(serde::Deserialize)]
    struct Event<'a> {
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
        #[serde(borrow)]
        object: &'a serde_json::value::RawValue,
    }
    let Ok(event) = serde_json::from_slice::<Event>(json_frame) else {
        return json_frame.to_vec();
    };
    let Ok(object) = serde_json::from_str::<MetadataOnly>(event.object.get()) else {
        return json_frame.to_vec();
    };
    if object.kind.as_deref() == Some("Status") {
        return json_frame.to_vec();
    }
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"{\"type\":");
    let _ = serde_json::to_writer(&mut out, &*event.kind);
    out.extend_from_slice(b",\"object\":");
    write_partial(object.metadata, &mut out);
    out.extend_from_slice(b"}\n");
    out
}

/// A protobuf message being written: fields appended in order.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn bytes(&mut self, tag: u32, bytes: &[u8]) {
        encode_key(tag, WireType::LengthDelimited, &mut self.0);
        encode_varint(bytes.len() as u64, &mut self.0);
        self.0.extend_from_slice(bytes);
    }

    fn string(&mut self, tag: u32, s: &str) {
        self.bytes(tag, s.as_bytes());
    }

    /// An int64, int32 or bool (a negative number as its 64-bit two's complement, as protobuf's
    /// `int32`/`int64` are written).
    fn varint(&mut self, tag: u32, v: i64) {
        encode_key(tag, WireType::Varint, &mut self.0);
        encode_varint(v as u64, &mut self.0);
    }

    fn message(&mut self, tag: u32, m: Message) {
        self.bytes(tag, &m.0);
    }

    /// A `map<string, string>` (or `bytes` values, through `value`), entries in key order.
    fn map(&mut self, tag: u32, v: &Value, value: impl Fn(&Value) -> Vec<u8>) {
        let Some(map) = v.as_object() else { return };
        let mut keys: Vec<&String> = map.keys().collect();
        keys.sort();
        for k in keys {
            let mut entry = Message::default();
            entry.string(1, k);
            entry.bytes(2, &value(&map[k]));
            self.message(tag, entry);
        }
    }
}

/// `v[key]` as a string; `""` if absent or not a string.
fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A string map's value as bytes.
fn string_value(v: &Value) -> Vec<u8> {
    v.as_str().unwrap_or("").as_bytes().to_vec()
}

/// A `meta.v1.Time` (`{seconds, nanos}`) of an RFC 3339 string; the empty message for the zero
/// time (absent, null or unreadable), as Go writes it.
fn time(v: Option<&Value>) -> Message {
    let mut m = Message::default();
    let since_epoch = v
        .and_then(Value::as_str)
        .and_then(informer::model::time::parse_rfc3339)
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    if let Some(d) = since_epoch {
        m.varint(1, d.as_secs() as i64);
        if d.subsec_nanos() != 0 {
            m.varint(2, i64::from(d.subsec_nanos()));
        }
    }
    m
}

/// `meta.v1.ObjectMeta`.
fn object_meta(v: &Value) -> Message {
    let mut m = Message::default();
    m.string(1, text(v, "name"));
    m.string(2, text(v, "generateName"));
    m.string(3, text(v, "namespace"));
    m.string(4, text(v, "selfLink"));
    m.string(5, text(v, "uid"));
    m.string(6, text(v, "resourceVersion"));
    m.varint(7, v.get("generation").and_then(Value::as_i64).unwrap_or(0));
    m.message(8, time(v.get("creationTimestamp")));
    if v.get("deletionTimestamp").is_some_and(|t| !t.is_null()) {
        m.message(9, time(v.get("deletionTimestamp")));
    }
    if let Some(s) = v.get("deletionGracePeriodSeconds").and_then(Value::as_i64) {
        m.varint(10, s);
    }
    if let Some(labels) = v.get("labels") {
        m.map(11, labels, string_value);
    }
    if let Some(annotations) = v.get("annotations") {
        m.map(12, annotations, string_value);
    }
    for r in v
        .get("ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut o = Message::default();
        o.string(1, text(r, "kind"));
        o.string(3, text(r, "name"));
        o.string(4, text(r, "uid"));
        o.string(5, text(r, "apiVersion"));
        if let Some(c) = r.get("controller").and_then(Value::as_bool) {
            o.varint(6, i64::from(c));
        }
        if let Some(b) = r.get("blockOwnerDeletion").and_then(Value::as_bool) {
            o.varint(7, i64::from(b));
        }
        m.message(13, o);
    }
    for f in v
        .get("finalizers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.string(14, f.as_str().unwrap_or(""));
    }
    for e in v
        .get("managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut entry = Message::default();
        entry.string(1, text(e, "manager"));
        entry.string(2, text(e, "operation"));
        entry.string(3, text(e, "apiVersion"));
        if e.get("time").is_some_and(|t| !t.is_null()) {
            entry.message(4, time(e.get("time")));
        }
        entry.string(6, text(e, "fieldsType"));
        if let Some(fields) = e.get("fieldsV1") {
            let mut raw = Message::default();
            raw.bytes(1, &serde_json::to_vec(fields).unwrap_or_default());
            entry.message(7, raw);
        }
        entry.string(8, text(e, "subresource"));
        m.message(17, entry);
    }
    m
}

/// `core.v1.ConfigMap`. `binaryData` values are base64 in JSON, bytes here.
fn config_map(v: &Value) -> Message {
    let mut m = Message::default();
    m.message(1, object_meta(v.get("metadata").unwrap_or(&Value::Null)));
    if let Some(data) = v.get("data") {
        m.map(2, data, string_value);
    }
    if let Some(binary) = v.get("binaryData") {
        m.map(3, binary, |b| {
            base64::engine::general_purpose::STANDARD
                .decode(b.as_str().unwrap_or(""))
                .unwrap_or_default()
        });
    }
    if let Some(i) = v.get("immutable").and_then(Value::as_bool) {
        m.varint(4, i64::from(i));
    }
    m
}

/// `meta.v1.Status`.
fn status(v: &Value) -> Message {
    let mut m = Message::default();
    m.message(1, list_meta("", None, None));
    m.string(2, text(v, "status"));
    m.string(3, text(v, "message"));
    m.string(4, text(v, "reason"));
    if let Some(d) = v.get("details") {
        let mut details = Message::default();
        details.string(1, text(d, "name"));
        details.string(2, text(d, "group"));
        details.string(3, text(d, "kind"));
        for c in d
            .get("causes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let mut cause = Message::default();
            cause.string(1, text(c, "reason"));
            cause.string(2, text(c, "message"));
            cause.string(3, text(c, "field"));
            details.message(4, cause);
        }
        details.varint(
            5,
            d.get("retryAfterSeconds")
                .and_then(Value::as_i64)
                .unwrap_or(0),
        );
        details.string(6, text(d, "uid"));
        m.message(5, details);
    }
    m.varint(6, v.get("code").and_then(Value::as_i64).unwrap_or(0));
    m
}

/// `meta.v1.ListMeta`.
fn list_meta(rv: &str, continue_token: Option<&str>, remaining: Option<i64>) -> Message {
    let mut m = Message::default();
    m.string(1, "");
    m.string(2, rv);
    m.string(3, continue_token.unwrap_or(""));
    if let Some(r) = remaining {
        m.varint(4, r);
    }
    m
}

/// The object's message: a `Status` or a `PartialObjectMetadata` by its kind, else the
/// resource's kind.
fn object(v: &Value) -> Message {
    match text(v, "kind") {
        "Status" => status(v),
        "PartialObjectMetadata" => partial_message(v),
        _ => config_map(v),
    }
}

/// `meta.v1.PartialObjectMetadata`: metadata 1.
fn partial_message(v: &Value) -> Message {
    let mut m = Message::default();
    m.message(1, object_meta(v.get("metadata").unwrap_or(&Value::Null)));
    m
}

/// The same, from the object's JSON bytes: only its `metadata` is parsed.
fn partial_message_of(object: &[u8]) -> Message {
    let metadata: Value = serde_json::from_slice::<MetadataOnly>(object)
        .ok()
        .and_then(|o| o.metadata)
        .and_then(|m| serde_json::from_str(m.get()).ok())
        .unwrap_or(Value::Null);
    let mut m = Message::default();
    m.message(1, object_meta(&metadata));
    m
}

/// `k8s\0` + `runtime.Unknown` around `raw`.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = Message::default();
    type_meta.string(1, api_version);
    type_meta.string(2, kind);
    let mut unknown = Message::default();
    unknown.message(1, type_meta);
    unknown.bytes(2, raw);
    unknown.string(3, "");
    unknown.string(4, "");
    let mut out = Vec::with_capacity(MAGIC.len() + unknown.0.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&unknown.0);
    out
}

/// A full object (with `kind` and `apiVersion`) as a protobuf body.
pub(crate) fn object_body(v: &Value) -> Vec<u8> {
    envelope(text(v, "apiVersion"), text(v, "kind"), &object(v).0)
}

/// An object's `PartialObjectMetadata` (from its JSON bytes) as a protobuf body.
pub(crate) fn partial_body(object: &[u8]) -> Vec<u8> {
    envelope(
        "meta.k8s.io/v1",
        "PartialObjectMetadata",
        &partial_message_of(object).0,
    )
}

/// A LIST body: `items` are the JSON of the objects of `info`'s kind (without `kind` and
/// `apiVersion`); with `metadata`, a `PartialObjectMetadataList` of their metadata.
pub(crate) fn list_body(
    info: &ResourceInfo,
    metadata: bool,
    rv: &str,
    continue_token: Option<&str>,
    remaining: Option<i64>,
    items: impl Iterator<Item = Vec<u8>>,
) -> Vec<u8> {
    let mut list = Message::default();
    list.message(1, list_meta(rv, continue_token, remaining));
    for item in items {
        let message = if metadata {
            partial_message_of(&item)
        } else {
            config_map(&serde_json::from_slice(&item).unwrap_or_default())
        };
        list.message(2, message);
    }
    if metadata {
        return envelope("meta.k8s.io/v1", "PartialObjectMetadataList", &list.0);
    }
    let kind = format!("{}List", info.api.kind);
    envelope(&info.api.api_version(), &kind, &list.0)
}

/// Appends the protobuf frame of one JSON watch frame (`{"type":..,"object":{..}}`). A frame
/// that is not JSON goes out as it is, in a frame of its own length: unreadable, as it was.
pub(crate) fn push_watch_frame(json_frame: &[u8], out: &mut Vec<u8>) {
    let event = match serde_json::from_slice::<Value>(json_frame) {
        Ok(event) => {
            let obj = event.get("object").unwrap_or(&Value::Null);
            let mut raw = Message::default();
            raw.bytes(1, &object_body(obj));
            let mut event_message = Message::default();
            event_message.string(1, text(&event, "type"));
            event_message.message(2, raw);
            event_message.0
        }
        Err(_) => json_frame.to_vec(),
    };
    out.extend_from_slice(&(event.len() as u32).to_be_bytes());
    out.extend_from_slice(&event);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `negotiate` with protobuf on.
    fn negotiate_t(accept: &str, serves: bool, list: bool) -> Form {
        negotiate(accept, true, serves, list)
    }

    #[test]
    fn accept_headers_are_read_in_order() {
        let pb = |accept| negotiate_t(accept, true, false).protobuf;
        assert!(pb("application/vnd.kubernetes.protobuf, application/json"));
        assert!(pb(
            "application/vnd.kubernetes.protobuf;stream=watch, application/json"
        ));
        assert!(!pb("application/json, application/vnd.kubernetes.protobuf"));
        assert!(!pb("application/vnd.kubernetes.protobuf;q=0, */*"));
        assert!(!pb(
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1, application/json"
        ));
        assert!(!pb(""));
        // JSON with a charset still counts; protobuf turned off skips protobuf ranges.
        assert!(!pb(
            "application/json;charset=utf-8, application/vnd.kubernetes.protobuf"
        ));
        let meta_first = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json";
        assert_eq!(negotiate(meta_first, false, true, false), Form::default());
        assert!(!pb("text/html"));
        // A kind that is not translated answers JSON, unless only its metadata is asked for.
        assert_eq!(
            negotiate_t(
                "application/vnd.kubernetes.protobuf, application/json",
                false,
                false
            ),
            Form::default()
        );
        let meta = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, \
                    application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1, application/json";
        let both = Form {
            protobuf: true,
            metadata: true,
        };
        assert_eq!(negotiate_t(meta, false, true), both);
        // The list form on a GET or WATCH does not count: the plain JSON range decides.
        assert_eq!(negotiate_t(meta, false, false), Form::default());
        assert_eq!(
            negotiate_t(
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                true,
                false
            ),
            Form {
                protobuf: false,
                metadata: true
            }
        );
        // Another group or version of the form (v1beta1's field numbers differ) is not written.
        assert_eq!(
            negotiate_t(
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1, application/json",
                true,
                false
            ),
            Form::default()
        );
    }

    #[test]
    fn a_metadata_frame_keeps_only_metadata_and_errors_as_they_are() {
        let frame = metadata_frame(
            br#"{"type":"ADDED","object":{"kind":"Pod","apiVersion":"v1","metadata":{"name":"a"},"spec":{"x":1}}}"#,
        );
        let event: Value = serde_json::from_slice(&frame).unwrap();
        assert_eq!(
            event["object"],
            serde_json::json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}})
        );
        let error = br#"{"type":"ERROR","object":{"kind":"Status","code":410}}"#;
        assert_eq!(metadata_frame(error), error.to_vec());
    }

    #[test]
    fn a_frame_is_its_length_then_a_watch_event() {
        let mut out = Vec::new();
        push_watch_frame(
            br#"{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}}"#,
            &mut out,
        );
        let len = u32::from_be_bytes(out[..4].try_into().unwrap()) as usize;
        assert_eq!(len, out.len() - 4);
        // WatchEvent.type = "ADDED" (field 1, length-delimited).
        assert_eq!(&out[4..11], b"\x0a\x05ADDED");
        assert!(out.windows(4).any(|w| w == MAGIC));
    }
}
