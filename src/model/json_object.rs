//! [`JsonObject`]: an object of any resource kept as its own compact JSON, with `apiVersion`,
//! `kind` and `metadata` typed beside it. What dynamic informers (CRDs, `kwatch` on any
//! resource) cache: it keeps every field the server sent, at about the memory of a typed object.
//!
//! # Layout and invariants
//!
//! - `types`: `apiVersion` and `kind` when the server sent them as non-empty strings (what the
//!   informer stamps when it did not); any other value of those keys stays a raw member.
//! - `metadata`: typed, parsed once. Its text is kept as well only when the typed metadata would
//!   not write it back the same (fields `ObjectMeta` does not name, `"labels":{}`, keys out of
//!   the apiserver's order): an apiserver's metadata costs its typed form alone.
//! - `fields`: every other top-level member, in the order received, each value its compact JSON
//!   text ([`RawValue`], validated while decoding): one allocation per member, no tree.
//!
//! Serializing writes `apiVersion`, `kind`, `metadata`, then the members as they are: the result
//! parses to the same JSON value as what was decoded (member order aside, which JSON does not
//! give a meaning to), numbers and escapes included. A JSON serializer (serde_json) copies the
//! members' text; [`JsonObject::write_json`] does just that.
//!
//! Decoding needs serde_json's deserializer (`from_str`, `from_slice`: what the informer uses);
//! [`JsonObject::from_value`] takes a parsed `serde_json::Value`.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::{DynamicObject, Object, ObjectMeta, TypeMeta};

/// Any object of any resource, kept as its compact JSON text with `apiVersion`, `kind` and
/// `metadata` typed: every field survives (equal as parsed JSON to what the server sent), at
/// about the memory of a typed object. Fields are read by path on demand ([`get`](Self::get)),
/// or through a typed view ([`view`](Self::view)); for editing beyond dropping fields, convert
/// to a [`DynamicObject`] ([`to_dynamic`](Self::to_dynamic)).
///
/// ```
/// use informer::{JsonObject, Object};
/// let o: JsonObject = serde_json::from_str(
///     r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"3"},
///         "spec":{"size":3,"ratio":1.50,"tags":["a","b"]}}"#,
/// ).unwrap();
/// assert_eq!(o.meta().name, "w");
/// assert_eq!(o.types.kind, "Widget");
/// assert_eq!(o.get("spec.size"), Some(serde_json::json!(3)));
/// assert_eq!(o.get("spec.tags.1"), Some(serde_json::json!("b")));
/// // The members are written back as they came, `1.50` included.
/// assert!(o.to_json().contains(r#""spec":{"size":3,"ratio":1.50,"tags":["a","b"]}"#));
/// ```
#[derive(Clone, Default)]
pub struct JsonObject {
    /// `apiVersion` and `kind` (stamped by dynamic informers when the server leaves them out, as
    /// it does in list items).
    pub types: TypeMeta,
    metadata: ObjectMeta,
    metadata_text: MetadataText,
    fields: Box<[(Box<str>, Box<RawValue>)]>,
}

/// Where `metadata` is written from.
#[derive(Clone, Default)]
enum MetadataText {
    /// The object had no `metadata` (and nobody asked for it mutably): nothing is written.
    #[default]
    Absent,
    /// The typed metadata writes it back exactly (or it was edited through `meta_mut`).
    Typed,
    /// Its compact text, which the typed form would not reproduce.
    Raw(Box<RawValue>),
}

impl PartialEq for MetadataText {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (MetadataText::Absent, MetadataText::Absent) => true,
            (MetadataText::Typed, MetadataText::Typed) => true,
            (MetadataText::Raw(a), MetadataText::Raw(b)) => a.get() == b.get(),
            _ => false,
        }
    }
}

impl PartialEq for JsonObject {
    /// Equal types, metadata and members (the same text, in the same order).
    fn eq(&self, other: &Self) -> bool {
        self.types == other.types
            && self.metadata == other.metadata
            && self.metadata_text == other.metadata_text
            && self.fields.len() == other.fields.len()
            && self
                .fields
                .iter()
                .zip(other.fields.iter())
                .all(|((k, v), (l, w))| k == l && v.get() == w.get())
    }
}

impl fmt::Debug for JsonObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

impl Object for JsonObject {
    type Meta = ObjectMeta;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    /// The typed metadata, which from then on is what the object writes as its `metadata`
    /// (fields `ObjectMeta` does not name are dropped, if the server sent any).
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.metadata_text = MetadataText::Typed;
        &mut self.metadata
    }
}

impl JsonObject {
    /// Parses an object from its JSON text (any whitespace; kept compact).
    ///
    /// ```
    /// let o = informer::JsonObject::from_json(r#"{ "metadata": {"name": "a"}, "data": { "k": "v" } }"#).unwrap();
    /// assert_eq!(o.to_json(), r#"{"metadata":{"name":"a"},"data":{"k":"v"}}"#);
    /// ```
    pub fn from_json(text: &str) -> serde_json::Result<JsonObject> {
        serde_json::from_str(text)
    }

    /// Builds an object from a parsed JSON value (through its text).
    ///
    /// ```
    /// let o = informer::JsonObject::from_value(&serde_json::json!({"kind": "Pod", "spec": {}})).unwrap();
    /// assert_eq!(o.types.kind, "Pod");
    /// ```
    pub fn from_value(value: &Value) -> serde_json::Result<JsonObject> {
        serde_json::from_str(&serde_json::to_string(value)?)
    }

    /// The object's compact JSON.
    ///
    /// ```
    /// let o = informer::JsonObject::from_json(r#"{"kind":"Pod","status":{"phase":"Running"}}"#).unwrap();
    /// assert_eq!(o.to_json(), r#"{"kind":"Pod","status":{"phase":"Running"}}"#);
    /// ```
    pub fn to_json(&self) -> String {
        let mut out = Vec::with_capacity(self.json_len_hint());
        self.write_json(&mut out);
        // serde_json writes UTF-8.
        String::from_utf8(out).unwrap_or_default()
    }

    /// Appends the object's compact JSON to `out`: the members' text is copied, no tree is built.
    ///
    /// ```
    /// let o = informer::JsonObject::from_json(r#"{"spec":{"n":1}}"#).unwrap();
    /// let mut line = b"object: ".to_vec();
    /// o.write_json(&mut line);
    /// assert_eq!(line, br#"object: {"spec":{"n":1}}"#);
    /// ```
    pub fn write_json(&self, out: &mut Vec<u8>) {
        // Writing to a Vec fails only on a serializer error, and every part here serializes.
        let _ = serde_json::to_writer(out, self);
    }

    fn json_len_hint(&self) -> usize {
        64 + self
            .fields
            .iter()
            .map(|(k, v)| k.len() + v.get().len() + 4)
            .sum::<usize>()
    }

    /// The top-level members other than `apiVersion`, `kind` and `metadata`, as received.
    ///
    /// ```
    /// let o = informer::JsonObject::from_json(r#"{"kind":"ConfigMap","data":{"a":"1"}}"#).unwrap();
    /// let keys: Vec<&str> = o.fields().map(|(k, _)| k).collect();
    /// assert_eq!(keys, ["data"]);
    /// ```
    pub fn fields(&self) -> impl Iterator<Item = (&str, &RawValue)> {
        self.fields.iter().map(|(k, v)| (&**k, &**v))
    }

    /// The text of one top-level member (the last one of that name, as a JSON parser would
    /// keep), without parsing it.
    ///
    /// ```
    /// let o = informer::JsonObject::from_json(r#"{"spec":{"replicas":2}}"#).unwrap();
    /// assert_eq!(o.field("spec").unwrap().get(), r#"{"replicas":2}"#);
    /// ```
    pub fn field(&self, key: &str) -> Option<&RawValue> {
        self.fields
            .iter()
            .rev()
            .find(|(k, _)| &**k == key)
            .map(|(_, v)| &**v)
    }

    /// The value at a dot-separated path (`"spec.replicas"`, `"spec.containers.0.image"`,
    /// `"metadata.labels"`): only the member the path starts in is parsed. `None` if there is
    /// nothing there. A dot inside a key is written `\.` (as kubectl's JSONPath does), a
    /// backslash `\\`: `"metadata.labels.app\.kubernetes\.io/name"`.
    ///
    /// ```
    /// let o = informer::JsonObject::from_json(
    ///     r#"{"metadata":{"name":"a","labels":{"app":"web","app.kubernetes.io/name":"shop"}},
    ///         "spec":{"containers":[{"image":"nginx"}]}}"#,
    /// ).unwrap();
    /// assert_eq!(o.get("spec.containers.0.image"), Some(serde_json::json!("nginx")));
    /// assert_eq!(o.get("metadata.labels.app"), Some(serde_json::json!("web")));
    /// assert_eq!(o.get(r"metadata.labels.app\.kubernetes\.io/name"), Some(serde_json::json!("shop")));
    /// assert_eq!(o.get("spec.missing"), None);
    /// ```
    pub fn get(&self, path: &str) -> Option<Value> {
        let mut segments = path_segments(path).into_iter();
        let first = segments.next()?;
        let mut value = self.top_level(&first)?;
        for segment in segments {
            value = match value {
                Value::Object(mut map) => map.remove(segment.as_str())?,
                Value::Array(mut items) => {
                    let i: usize = segment.parse().ok()?;
                    if i >= items.len() {
                        return None;
                    }
                    items.swap_remove(i)
                }
                _ => return None,
            };
        }
        Some(value)
    }

    /// The value at `path` (as [`get`](Self::get)) deserialized into `T`: `Ok(None)` if there is
    /// nothing there.
    ///
    /// ```
    /// let o = informer::JsonObject::from_json(r#"{"spec":{"replicas":2}}"#).unwrap();
    /// assert_eq!(o.get_as::<u32>("spec.replicas").unwrap(), Some(2));
    /// ```
    pub fn get_as<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
    ) -> serde_json::Result<Option<T>> {
        if !path.contains(['.', '\\']) {
            if let Some(raw) = self.field(path) {
                return serde_json::from_str(raw.get()).map(Some);
            }
        }
        self.get(path).map(serde_json::from_value).transpose()
    }

    fn top_level(&self, key: &str) -> Option<Value> {
        match key {
            "apiVersion" if !self.types.api_version.is_empty() => {
                return Some(Value::String(self.types.api_version.clone()));
            }
            "kind" if !self.types.kind.is_empty() => {
                return Some(Value::String(self.types.kind.clone()));
            }
            "metadata" => {
                return match &self.metadata_text {
                    MetadataText::Absent => None,
                    MetadataText::Typed => serde_json::to_value(&self.metadata).ok(),
                    MetadataText::Raw(raw) => serde_json::from_str(raw.get()).ok(),
                };
            }
            _ => {}
        }
        serde_json::from_str(self.field(key)?.get()).ok()
    }

    /// The whole object deserialized into a typed view (a struct naming the fields you read).
    ///
    /// ```
    /// #[derive(serde::Deserialize)]
    /// struct Widget { spec: Spec }
    /// #[derive(serde::Deserialize)]
    /// struct Spec { size: u32 }
    /// let o = informer::JsonObject::from_json(r#"{"kind":"Widget","spec":{"size":3}}"#).unwrap();
    /// assert_eq!(o.view::<Widget>().unwrap().spec.size, 3);
    /// ```
    pub fn view<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(&self.to_json())
    }

    /// Drops the value at a dot-separated path, written as for [`get`](Self::get) (a top-level
    /// member, or inside one: that member is then parsed and written again); returns whether
    /// there was one. For an informer's
    /// transform. `metadata` is edited through [`Object::meta_mut`] instead.
    ///
    /// ```
    /// let mut o = informer::JsonObject::from_json(
    ///     r#"{"spec":{"a":1,"b":2},"status":{"phase":"Running"}}"#,
    /// ).unwrap();
    /// assert!(o.remove("status"));
    /// assert!(o.remove("spec.b"));
    /// assert!(!o.remove("spec.missing"));
    /// assert_eq!(o.to_json(), r#"{"spec":{"a":1}}"#);
    /// ```
    pub fn remove(&mut self, path: &str) -> bool {
        let segments = path_segments(path);
        let (first, rest) = segments.split_first().expect("never empty");
        let first = first.as_str();
        if first == "metadata" {
            return false;
        }
        if rest.is_empty() {
            let before = self.fields.len();
            self.retain_fields(|k| k != first);
            let removed = self.fields.len() != before;
            match first {
                "apiVersion" if !self.types.api_version.is_empty() => {
                    self.types.api_version.clear();
                    return true;
                }
                "kind" if !self.types.kind.is_empty() => {
                    self.types.kind.clear();
                    return true;
                }
                _ => {}
            }
            return removed;
        }
        let Some(index) = self.fields.iter().rposition(|(k, _)| &**k == first) else {
            return false;
        };
        let Ok(mut value) = serde_json::from_str::<Value>(self.fields[index].1.get()) else {
            return false;
        };
        if !remove_path(&mut value, rest) {
            return false;
        }
        match serde_json::value::to_raw_value(&value) {
            Ok(raw) => {
                self.fields[index].1 = raw;
                true
            }
            Err(_) => false,
        }
    }

    fn retain_fields(&mut self, keep: impl Fn(&str) -> bool) {
        if self.fields.iter().all(|(k, _)| keep(k)) {
            return;
        }
        let fields = std::mem::take(&mut self.fields).into_vec();
        self.fields = fields.into_iter().filter(|(k, _)| keep(k)).collect();
    }

    /// Sets an empty `apiVersion` and `kind` (what the apiserver leaves out of list items), as
    /// dynamic informers do before their transform.
    ///
    /// ```
    /// let mut o = informer::JsonObject::from_json(r#"{"metadata":{"name":"w"}}"#).unwrap();
    /// o.stamp_types("example.com/v1", "Widget");
    /// assert_eq!(o.to_json(), r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}"#);
    /// ```
    pub fn stamp_types(&mut self, api_version: &str, kind: &str) {
        let (stamp_version, stamp_kind) = (
            self.types.api_version.is_empty(),
            self.types.kind.is_empty(),
        );
        if stamp_version {
            self.types.api_version = api_version.to_owned();
        }
        if stamp_kind {
            self.types.kind = kind.to_owned();
        }
        // A raw `apiVersion` or `kind` (null, "", a number) is replaced by the stamp.
        self.retain_fields(|k| {
            !((stamp_version && k == "apiVersion") || (stamp_kind && k == "kind"))
        });
    }

    /// The object as a [`DynamicObject`] (a `serde_json::Map` of the fields), for editing.
    /// Fails only for a member `DynamicObject` cannot hold (an `apiVersion` or `kind` that is not
    /// a string).
    ///
    /// ```
    /// let o = informer::JsonObject::from_json(r#"{"kind":"Widget","spec":{"size":3}}"#).unwrap();
    /// let mut d = o.to_dynamic().unwrap();
    /// d.data["spec"]["size"] = 4.into();
    /// let back = informer::JsonObject::from_dynamic(&d).unwrap();
    /// assert_eq!(back.get("spec.size"), Some(serde_json::json!(4)));
    /// ```
    pub fn to_dynamic(&self) -> serde_json::Result<DynamicObject> {
        serde_json::from_str(&self.to_json())
    }

    /// A [`DynamicObject`] as a `JsonObject` (see [`to_dynamic`](Self::to_dynamic)).
    pub fn from_dynamic(object: &DynamicObject) -> serde_json::Result<JsonObject> {
        serde_json::from_str(&serde_json::to_string(object)?)
    }
}

impl TryFrom<&JsonObject> for DynamicObject {
    type Error = serde_json::Error;
    fn try_from(o: &JsonObject) -> serde_json::Result<DynamicObject> {
        o.to_dynamic()
    }
}

impl TryFrom<&DynamicObject> for JsonObject {
    type Error = serde_json::Error;
    fn try_from(o: &DynamicObject) -> serde_json::Result<JsonObject> {
        JsonObject::from_dynamic(o)
    }
}

/// Removes `path` (dot-separated) from `value`; whether something was there.
fn remove_path(value: &mut Value, path: &[String]) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    match value {
        Value::Object(map) if rest.is_empty() => map.remove(first.as_str()).is_some(),
        Value::Object(map) => map
            .get_mut(first.as_str())
            .is_some_and(|v| remove_path(v, rest)),
        Value::Array(items) => {
            let Ok(i) = first.parse::<usize>() else {
                return false;
            };
            if rest.is_empty() {
                let there = i < items.len();
                if there {
                    items.remove(i);
                }
                there
            } else {
                items.get_mut(i).is_some_and(|v| remove_path(v, rest))
            }
        }
        _ => false,
    }
}

impl Serialize for JsonObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if !self.types.api_version.is_empty() {
            map.serialize_entry("apiVersion", &self.types.api_version)?;
        }
        if !self.types.kind.is_empty() {
            map.serialize_entry("kind", &self.types.kind)?;
        }
        match &self.metadata_text {
            MetadataText::Absent => {}
            MetadataText::Typed => map.serialize_entry("metadata", &self.metadata)?,
            MetadataText::Raw(raw) => map.serialize_entry("metadata", raw)?,
        }
        for (k, v) in self.fields.iter() {
            map.serialize_entry(&**k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for JsonObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<JsonObject, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = JsonObject;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonObject, A::Error> {
        use serde::de::Error as _;
        let mut types = TypeMeta::default();
        let mut metadata: Option<Box<RawValue>> = None;
        let mut fields: Vec<(Box<str>, Box<RawValue>)> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            let value: Box<RawValue> = map.next_value()?;
            match key.as_str() {
                // A repeated key: the last one counts, as for any JSON parser that keeps one.
                "metadata" => metadata = Some(value),
                "apiVersion" | "kind" => {
                    let slot = if key == "kind" {
                        &mut types.kind
                    } else {
                        &mut types.api_version
                    };
                    fields.retain(|(k, _)| **k != *key);
                    match non_empty_string(&value) {
                        Some(s) => *slot = s,
                        None => {
                            slot.clear();
                            fields.push((key.into_boxed_str(), compact_raw(value)));
                        }
                    }
                }
                _ => fields.push((key.into_boxed_str(), compact_raw(value))),
            }
        }
        let (metadata, metadata_text) = match metadata {
            None => (ObjectMeta::default(), MetadataText::Absent),
            Some(raw) => {
                // Compact first: the typed metadata keeps some members as text (`managedFields`),
                // and that text must be what the object writes, or an object read back from its
                // own output would differ from it.
                let raw = compact_raw(raw);
                let meta: ObjectMeta = serde_json::from_str(raw.get()).map_err(A::Error::custom)?;
                let typed = serde_json::to_string(&meta).map_err(A::Error::custom)?;
                let text = if typed == raw.get() {
                    MetadataText::Typed
                } else {
                    MetadataText::Raw(raw)
                };
                (meta, text)
            }
        };
        Ok(JsonObject {
            types,
            metadata,
            metadata_text,
            fields: fields.into_boxed_slice(),
        })
    }
}

/// The string a raw value holds, if it is a non-empty JSON string.
fn non_empty_string(raw: &RawValue) -> Option<String> {
    if !raw.get().starts_with('"') {
        return None;
    }
    serde_json::from_str::<String>(raw.get())
        .ok()
        .filter(|s| !s.is_empty())
}

/// `raw` without whitespace between tokens (its own box when it had none).
fn compact_raw(raw: Box<RawValue>) -> Box<RawValue> {
    match compact(raw.get()) {
        Cow::Borrowed(_) => raw,
        // The same tokens: still valid JSON.
        Cow::Owned(text) => RawValue::from_string(text).unwrap_or(raw),
    }
}

/// `text` (valid JSON) without the whitespace between its tokens; borrowed when it has none.
fn compact(text: &str) -> Cow<'_, str> {
    let b = text.as_bytes();
    // No whitespace byte at all (the apiserver's output, mostly): two vectorized searches.
    if memchr::memchr3(b' ', b'\n', b'\t', b).is_none() && memchr::memchr(b'\r', b).is_none() {
        return Cow::Borrowed(text);
    }
    let Some(first) = whitespace_outside_strings(b, 0) else {
        return Cow::Borrowed(text);
    };
    let mut out = Vec::with_capacity(b.len());
    out.extend_from_slice(&b[..first]);
    let (mut in_string, mut escaped) = (false, false);
    for &c in &b[first..] {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_string = false;
            }
        } else if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            in_string = c == b'"';
            out.push(c);
        }
    }
    // Only ASCII whitespace outside strings was removed: still UTF-8.
    Cow::Owned(String::from_utf8(out).unwrap_or_else(|_| text.to_owned()))
}

/// The index of the first whitespace byte outside a string, scanning from `from` (outside a
/// string).
fn whitespace_outside_strings(b: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' => return Some(i),
            b'"' => {
                // Skip to the closing quote: past escapes, to the next unescaped `"`.
                i += 1;
                loop {
                    let at = i + memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
                    if b[at] == b'\\' {
                        i = at + 2;
                    } else {
                        i = at + 1;
                        break;
                    }
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// The keys of a [`JsonObject::get`] path: split at dots, `\.` a dot within a key and `\\` a
/// backslash (any other escaped character stands for itself).
fn path_segments(path: &str) -> Vec<String> {
    let mut segments = vec![String::new()];
    let mut chars = path.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(escaped) = chars.next() {
                    segments.last_mut().expect("never empty").push(escaped);
                }
            }
            '.' => segments.push(String::new()),
            c => segments.last_mut().expect("never empty").push(c),
        }
    }
    segments
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(s: &str) -> Value {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn round_trips_as_parsed_json() {
        for text in [
            r#"{}"#,
            r#"{"metadata":{}}"#,
            r#"{"kind":"","apiVersion":null,"metadata":{"name":"a","labels":{}}}"#,
            r#"{"kind":"A","kind":"","x":1}"#,
            r#"{"kind":"","kind":"B"}"#,
            r#"{"a":1,"a":2,"b":[1.0, 1e300, -0, 12345678901234567890123]}"#,
            r#"{ "s" : "with \" quote and \\ and\ttab \u00e9 é" , "n" : { } }"#,
            r#"{"metadata":{"labels":{"b":"1","a":"2"},"zz":3,"name":"x"}}"#,
            r#"{"metadata":{"name":"x","namespace":"y","managedFields":[ {"a" : 1} ]}}"#,
        ] {
            let o: JsonObject = serde_json::from_str(text).unwrap();
            assert_eq!(parsed(&o.to_json()), parsed(text), "{text}");
            assert_eq!(serde_json::to_value(&o).unwrap(), parsed(text), "{text}");
        }
    }

    #[test]
    fn apiserver_metadata_is_kept_typed_only() {
        let o = JsonObject::from_json(
            r#"{"metadata":{"name":"a","namespace":"b","uid":"u","resourceVersion":"1","creationTimestamp":"2020-01-01T00:00:00Z","labels":{"a":"1","b":"2"}}}"#,
        )
        .unwrap();
        assert!(matches!(o.metadata_text, MetadataText::Typed));
    }

    #[test]
    fn compact_keeps_strings() {
        assert_eq!(
            compact(r#"{ "a b" : [ 1 , "\" x" ] }"#),
            r#"{"a b":[1,"\" x"]}"#
        );
        assert!(matches!(compact(r#"{"a":"b c"}"#), Cow::Borrowed(_)));
    }

    /// Found by the `json_object` fuzz target: a key with backslashes, read and removed through
    /// an escaped path (`get` unescaped it while `remove` and `get_as` did not).
    #[test]
    fn paths_escape_dots_and_backslashes_alike() {
        let o = JsonObject::from_json(
            r#"{"stat\\\\us":"Failure","a.b":{"c\\d":1,"e":[2,3]},"x":{"y":4}}"#,
        )
        .unwrap();
        assert_eq!(o.get(r"stat\\\\us"), Some(parsed(r#""Failure""#)));
        assert_eq!(
            o.get_as::<String>(r"stat\\\\us").unwrap().as_deref(),
            Some("Failure")
        );
        assert_eq!(o.get(r"stat\\us"), None);
        assert_eq!(o.get_as::<String>(r"stat\\us").unwrap(), None);
        assert_eq!(o.get(r"a\.b.c\\d"), Some(parsed("1")));
        assert_eq!(o.get_as::<u32>(r"a\.b.e.1").unwrap(), Some(3));
        let mut edited = o.clone();
        assert!(!edited.remove(r"stat\\us"));
        assert!(edited.remove(r"stat\\\\us"));
        assert!(edited.remove(r"a\.b.c\\d"));
        assert!(edited.remove(r"a\.b.e.0"));
        assert!(!edited.remove(r"a\.b.e.1"));
        assert!(edited.remove("x.y"));
        assert_eq!(edited.to_json(), r#"{"a.b":{"e":[3]},"x":{}}"#);
    }

    /// What the server sends keeps a single copy of its metadata: the typed `ObjectMeta`, which
    /// writes back the very text (the second, raw copy is for metadata it would not reproduce,
    /// such as members it does not name). Checked on real kube-apiserver 1.20 objects and on a
    /// custom resource as the apiserver writes one, managedFields, owners and finalizers
    /// included. (#46: dynamic custom resources were thought to keep a second copy.)
    #[test]
    fn objects_as_servers_send_them_keep_one_copy_of_their_metadata() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/wire/");
        let mut texts: Vec<String> = [
            "real-1.20-pod-managedfields-two-managers.json",
            "real-1.20-service.json",
            "real-1.20-endpoints.json",
            "real-1.20-endpointslice-v1beta1.json",
            "public-service-tke-2023.json",
        ]
        .iter()
        .map(|f| std::fs::read_to_string(format!("{root}{f}")).unwrap())
        .collect();
        texts.push(
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"default","uid":"6f1c","resourceVersion":"812","generation":2,"creationTimestamp":"2026-12-07T08:00:00Z","labels":{"app.kubernetes.io/name":"w"},"annotations":{"a":"b"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"c","uid":"1a2b","controller":true,"blockOwnerDeletion":true}],"finalizers":["example.com/cleanup"],"managedFields":[{"manager":"op","operation":"Apply","apiVersion":"example.com/v1","time":"2026-12-07T08:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:size":{}}}}]},"spec":{"size":3}}"#
                .to_string(),
        );
        for text in &texts {
            let o: JsonObject = serde_json::from_str(text).unwrap();
            assert!(
                matches!(o.metadata_text, MetadataText::Typed),
                "a second copy of {}",
                o.meta().name
            );
            assert_eq!(parsed(&o.to_json()), parsed(text));
        }
        // Metadata the typed form would not reproduce keeps its text, and so survives.
        let odd = r#"{"metadata":{"name":"a","futureField":{"x":1}}}"#;
        let o: JsonObject = serde_json::from_str(odd).unwrap();
        assert!(matches!(o.metadata_text, MetadataText::Raw(_)));
        assert_eq!(parsed(&o.to_json()), parsed(odd));
    }
}
