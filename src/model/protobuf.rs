//! The apiserver's protobuf (`application/vnd.kubernetes.protobuf`, feature `protobuf`): the
//! envelope every object travels in, and decoders from the Kubernetes messages straight into the
//! typed kinds of this crate (no JSON in between).
//!
//! # The wire
//!
//! A protobuf body (a GET, a LIST, one watch event's object) is the 4 bytes `k8s\0`, then a
//! `runtime.Unknown` message: the object's `apiVersion` and `kind` (field 1), the object's own
//! message (field 2), and a content encoding and type that are empty in practice (fields 3 and 4).
//! A watch stream is a sequence of frames, each a 4-byte big-endian length and a `WatchEvent`
//! message: its type (field 1, `"ADDED"` ...) and a `RawExtension` (field 2) whose bytes are such
//! a body (see [`crate::frame::LengthFrames`] and `watch`). The real 1.20 captures in
//! `fixtures/real-1.20-*-protobuf.http` show both.
//!
//! # What is decoded
//!
//! Each kind's message is read field by field straight into its struct, the way serde reads the
//! JSON: a `Fields` cursor over the message's bytes (prost's wire primitives: keys, varints,
//! skipping), a `match` on the field numbers the struct keeps (`Pod` reads 11 of the Kubernetes
//! Pod's ~70 fields), every other field stepped over by its wire type without being read. Strings
//! are read where they lie and become `SmolStr`s (inline up to 23 bytes) or `String`s, with no
//! intermediate message structs: a decode allocates what the JSON decode allocates, no more. The
//! field numbers are those of `k8s.io/api`'s `generated.proto` (stable across versions by
//! protobuf's rules). A repeated scalar keeps its last value, as protobuf decoders do; a repeated
//! embedded message (which the apiserver never sends) merges its scalars and lists, its maps not.
//!
//! Strings are read as Go's JSON encoder writes them: invalid UTF-8 (which Go's protobuf does not
//! check, so a protobuf client can store it in an annotation) becomes U+FFFD, as in the JSON;
//! only the four metadata strings the fifo keys on must be valid, as the apiserver checks them.
//!
//! The result equals what the JSON of the same object decodes to (tests compare the two on the
//! real apiserver's answers). Where Go writes a field to JSON only when it is set but always to
//! protobuf (a plain `string` or `int64` with `omitempty`: `PodStatus.phase`, `generation`), an
//! empty or zero value reads as absent, as its JSON does; fields that are pointers in Go keep
//! whether they were sent. Timestamps become the RFC 3339 text the JSON carries (whole seconds,
//! UTC); `managedFields` the JSON array the apiserver writes for them (kept as their protobuf
//! until first read: see [`RawJson`]); `ConfigMap.binaryData` its base64.
//!
//! ```
//! use informer::{Endpoints, Object};
//! // An Endpoints' message as kube-apiserver 1.20 sent it (the first item of a real LIST).
//! let message = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/real-1.20-endpoints-pb-1.pb"))?;
//! let decode = Endpoints::protobuf_decoder().expect("a built-in kind");
//! let endpoints = decode(&message)?;
//! assert_eq!((endpoints.metadata.name.as_str(), endpoints.metadata.namespace.as_str()), ("pb-1", "default"));
//! assert_eq!(endpoints.subsets[0].addresses[0].ip, "10.1.0.1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use bytes::Bytes;
use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};
use smol_str::SmolStr;

use super::meta::RawJson;
use super::resource::FromProtobuf;
use super::{
    ConfigMap, EndpointSlice, Endpoints, ListMeta, Namespace, Node, ObjectMeta, OwnerReference,
    PartialObjectMetadata, Pod, Service, Status, StatusCause, StatusDetails, StringMap, kinds,
};

/// The first bytes of every protobuf body.
pub(crate) const MAGIC: &[u8; 4] = b"k8s\0";
/// The media type of a protobuf body (a GET or a LIST).
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch stream.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// A decode failure: what was wrong, in words (the caller adds where).
pub(crate) type Failure = String;

// ---------------------------------------------------------------------------------------------------
// Reading a message

/// A field's value as the wire gives it: a varint, or length-delimited bytes (a string, bytes, an
/// embedded message or a packed list). Fixed-width values (no field read here has one) are
/// stepped over.
#[derive(Clone, Copy)]
enum Value<'a> {
    Varint(u64),
    Delimited(&'a [u8]),
    Skipped,
}

/// The fields of a message, in order: `(number, value)`, or `Err` where the message is not well
/// formed (after which the cursor ends).
struct Fields<'a> {
    buf: &'a [u8],
}

fn fields(message: &[u8]) -> Fields<'_> {
    Fields { buf: message }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u32, Value<'a>), Failure>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() {
            return None;
        }
        let field = self.field();
        if field.is_err() {
            self.buf = &[];
        }
        Some(field)
    }
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Result<(u32, Value<'a>), Failure> {
        let broken = |e: prost::DecodeError| format!("a protobuf message does not decode: {e}");
        let (number, wire_type) = decode_key(&mut self.buf).map_err(broken)?;
        let value = match wire_type {
            WireType::Varint => Value::Varint(decode_varint(&mut self.buf).map_err(broken)?),
            WireType::LengthDelimited => {
                let len = decode_varint(&mut self.buf).map_err(broken)?;
                if len > self.buf.len() as u64 {
                    return Err(format!(
                        "a protobuf field of {len} bytes where {} remain",
                        self.buf.len()
                    ));
                }
                let (value, rest) = self.buf.split_at(len as usize);
                self.buf = rest;
                Value::Delimited(value)
            }
            other => {
                skip_field(other, number, &mut self.buf, DecodeContext::default())
                    .map_err(broken)?;
                Value::Skipped
            }
        };
        Ok((number, value))
    }
}

impl<'a> Value<'a> {
    /// Length-delimited bytes (a message, bytes); `Err` for another wire type.
    fn bytes(self) -> Result<&'a [u8], Failure> {
        match self {
            Value::Delimited(b) => Ok(b),
            _ => Err("a length-delimited field of another wire type".into()),
        }
    }

    fn str(self) -> Result<&'a str, Failure> {
        std::str::from_utf8(self.bytes()?).map_err(|_| "a string that is not UTF-8".to_owned())
    }

    /// The text, invalid UTF-8 replaced by U+FFFD (see the module docs).
    fn text(self) -> Result<std::borrow::Cow<'a, str>, Failure> {
        Ok(String::from_utf8_lossy(self.bytes()?))
    }

    fn string(self) -> Result<String, Failure> {
        self.text().map(std::borrow::Cow::into_owned)
    }

    fn smol(self) -> Result<SmolStr, Failure> {
        self.text().map(SmolStr::new)
    }

    fn varint(self) -> Result<u64, Failure> {
        match self {
            Value::Varint(v) => Ok(v),
            _ => Err("a varint field of another wire type".into()),
        }
    }

    /// `int64` (and `int32`, sign-extended on the wire).
    fn i64(self) -> Result<i64, Failure> {
        self.varint().map(|v| v as i64)
    }

    fn i32(self) -> Result<i32, Failure> {
        self.varint().map(|v| v as i64 as i32)
    }

    fn bool(self) -> Result<bool, Failure> {
        self.varint().map(|v| v != 0)
    }
}

/// Decodes each occurrence of an embedded message with `read`, into one value (occurrences merge).
fn message<T: Default>(
    slot: &mut Option<T>,
    value: Value<'_>,
    read: fn(&[u8], &mut T) -> Result<(), Failure>,
) -> Result<(), Failure> {
    read(value.bytes()?, slot.get_or_insert_with(T::default))
}

/// Decodes one element of a repeated message field and appends it.
fn push<T: Default>(
    list: &mut Vec<T>,
    value: Value<'_>,
    read: fn(&[u8], &mut T) -> Result<(), Failure>,
) -> Result<(), Failure> {
    let mut item = T::default();
    read(value.bytes()?, &mut item)?;
    list.push(item);
    Ok(())
}

/// One entry of a `map<string, string>` (a repeated message `{1: key, 2: value}`).
fn map_entry<'a>(entries: &mut Vec<(Text<'a>, Text<'a>)>, value: Value<'a>) -> Result<(), Failure> {
    let (mut key, mut val) = (Text::Borrowed(""), Text::Borrowed(""));
    for field in fields(value.bytes()?) {
        match field? {
            (1, v) => key = v.text()?,
            (2, v) => val = v.text()?,
            _ => {}
        }
    }
    entries.push((key, val));
    Ok(())
}

/// A string of a message, borrowed unless it needed U+FFFD.
type Text<'a> = std::borrow::Cow<'a, str>;

/// A map's entries (sorted and deduplicated, the last value of a key kept; Go sends them sorted).
fn string_map(entries: Vec<(Text<'_>, Text<'_>)>) -> StringMap {
    if entries.is_empty() {
        return StringMap::new();
    }
    StringMap::from_entries(entries)
}

/// `Some` for a non-empty string: a Go `string` with `omitempty`, which JSON leaves out when empty
/// and protobuf always sends.
fn non_empty<T: AsRef<str>>(s: Option<T>) -> Option<T> {
    s.filter(|s| !s.as_ref().is_empty())
}

/// A vector of exactly its length (as the JSON path's `exact_vec`).
fn exact<T>(mut v: Vec<T>) -> Vec<T> {
    v.shrink_to_fit();
    v
}

// ---------------------------------------------------------------------------------------------------
// The envelope, lists, watch events, bookmarks, Status

/// An object out of its envelope.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The object's `kind` (empty if the envelope named none), a slice of the body: no
    /// allocation per watch event.
    kind: Bytes,
    /// The object's message, a slice of the bytes the envelope was in.
    pub object: Bytes,
}

impl Opened {
    /// The object's `kind`; empty if the envelope named none or not in UTF-8.
    pub(crate) fn kind(&self) -> &str {
        std::str::from_utf8(&self.kind).unwrap_or_default()
    }
}

/// Opens a protobuf body: checks the magic and reads the `runtime.Unknown` after it (field 1 its
/// `TypeMeta`, 2 the object's message, 3 a content encoding, 4 a content type).
pub(crate) fn open(body: Bytes) -> Result<Opened, Failure> {
    let Some(envelope) = body.strip_prefix(MAGIC) else {
        return Err("a protobuf body that does not start with k8s\\0".into());
    };
    let mut opened = Opened {
        kind: Bytes::new(),
        object: Bytes::new(),
    };
    for field in fields(envelope) {
        match field.map_err(|e| format!("the protobuf envelope (runtime.Unknown): {e}"))? {
            (1, v) => {
                for field in fields(v.bytes()?) {
                    if let (2, kind) = field? {
                        opened.kind = body.slice_ref(kind.bytes()?);
                    }
                }
            }
            (2, v) => opened.object = body.slice_ref(v.bytes()?),
            (3, v) if !v.str()?.is_empty() => {
                return Err(format!(
                    "the protobuf envelope has a content encoding ({:?}) this client does not read",
                    v.str()?
                ));
            }
            (4, v) if !v.str()?.is_empty() => {
                return Err(format!(
                    "the protobuf envelope holds {:?}, not a protobuf message",
                    v.str()?
                ));
            }
            _ => {}
        }
    }
    Ok(opened)
}

/// A `metav1.WatchEvent`'s type (field 1) and its object's body (field 2, a `RawExtension` whose
/// field 1 is `k8s\0` and an envelope), both slices of `frame` (no allocation per event).
pub(crate) fn watch_event(frame: &Bytes) -> Result<(&[u8], Bytes), Failure> {
    let (mut ty, mut body): (&[u8], Bytes) = (&[], Bytes::new());
    for field in fields(frame) {
        match field? {
            (1, v) => ty = v.bytes()?,
            (2, v) => {
                for field in fields(v.bytes()?) {
                    if let (1, raw) = field? {
                        body = frame.slice_ref(raw.bytes()?);
                    }
                }
            }
            _ => {}
        }
    }
    Ok((ty, body))
}

/// `metadata.namespace`, `name`, `uid` and `resourceVersion` of an object's message, as ranges of
/// its bytes (strings are stored unescaped in protobuf, so each value is where it lies), in that
/// order; the last of each where a message repeats it, as a decoder merges them. Every kind's
/// `metadata` is its field 1. The ranges are checked as UTF-8.
pub(crate) fn metadata_ranges(object: &[u8]) -> Result<[std::ops::Range<usize>; 4], Failure> {
    let mut ranges: [std::ops::Range<usize>; 4] = Default::default();
    let start = object.as_ptr() as usize;
    for field in fields(object) {
        let (1, meta) = field? else {
            continue;
        };
        for field in fields(meta.bytes()?) {
            let (number, value) = field?;
            let slot = match number {
                3 => 0,
                1 => 1,
                5 => 2,
                6 => 3,
                _ => continue,
            };
            let text = value.str()?;
            let at = text.as_ptr() as usize - start;
            ranges[slot] = at..at + text.len();
        }
    }
    Ok(ranges)
}

/// A list's message (`{Kind}List`): its `metadata` (field 1) and its items (field 2, slices of
/// `list`), each decoded with `decode`.
pub(crate) fn list<T>(
    list: &Bytes,
    decode: super::ProtobufDecoder<T>,
) -> Result<(ListMeta, Vec<T>), Failure> {
    let mut meta = ListMeta::default();
    let mut items = Vec::new();
    for field in fields(list) {
        match field? {
            (1, v) => list_meta(v.bytes()?, &mut meta)?,
            (2, v) => {
                items.push(decode(v.bytes()?).map_err(|e| format!("item {}: {e}", items.len()))?)
            }
            _ => {}
        }
    }
    Ok((meta, items))
}

fn list_meta(b: &[u8], m: &mut ListMeta) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (2, v) => m.resource_version = v.smol()?,
            (3, v) => m.continue_token = v.string()?,
            (4, v) => m.remaining_item_count = Some(v.i64()?),
            _ => {}
        }
    }
    Ok(())
}

/// The `resourceVersion` and annotations of an object's metadata (a BOOKMARK's object).
pub(crate) fn bookmark(object: &[u8]) -> Result<(String, StringMap), Failure> {
    let mut meta = ObjectMeta::default();
    for field in fields(object) {
        if let (1, v) = field? {
            object_meta(v.bytes()?, &mut meta)?;
        }
    }
    Ok((meta.resource_version.to_string(), meta.annotations))
}

/// A `Status` (an `ERROR` event's object, or the body of a failed request).
pub(crate) fn status(object: &[u8]) -> Result<Status, Failure> {
    let mut s = Status::default();
    for field in fields(object) {
        match field? {
            (1, v) => list_meta(v.bytes()?, &mut s.metadata)?,
            (2, v) => s.status = v.string()?,
            (3, v) => s.message = v.string()?,
            (4, v) => s.reason = v.string()?,
            (5, v) => message(&mut s.details, v, status_details)?,
            (6, v) => s.code = u16::try_from(v.i32()?).unwrap_or(0),
            _ => {}
        }
    }
    Ok(s)
}

fn status_details(b: &[u8], d: &mut StatusDetails) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (1, v) => d.name = v.string()?,
            (2, v) => d.group = v.string()?,
            (3, v) => d.kind = v.string()?,
            (6, v) => d.uid = v.string()?,
            (4, v) => push(&mut d.causes, v, status_cause)?,
            // A plain int32 with omitempty in Go: JSON leaves 0 out (and 0 is no wait).
            (5, v) => d.retry_after_seconds = u32::try_from(v.i32()?).ok().filter(|s| *s != 0),
            _ => {}
        }
    }
    Ok(())
}

fn status_cause(b: &[u8], c: &mut StatusCause) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (1, v) => c.reason = v.string()?,
            (2, v) => c.message = v.string()?,
            (3, v) => c.field = v.string()?,
            _ => {}
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Metadata

/// `ObjectMeta`: name 1, generateName 2, namespace 3, selfLink 4, uid 5, resourceVersion 6,
/// generation 7, creationTimestamp 8, deletionTimestamp 9, deletionGracePeriodSeconds 10, labels
/// 11, annotations 12, ownerReferences 13, finalizers 14, managedFields 17.
fn object_meta(b: &[u8], m: &mut ObjectMeta) -> Result<(), Failure> {
    let (mut labels, mut annotations) = (Vec::new(), Vec::new());
    // Where each `managedFields` entry lies in `b` (its key and length included), to keep them
    // as they came (see `managed_fields`).
    let mut managed = Vec::new();
    let mut cursor = fields(b);
    loop {
        let start = b.len() - cursor.buf.len();
        let Some(field) = cursor.next() else { break };
        match field? {
            (1, v) => m.name = v.string()?,
            (2, v) => m.generate_name = v.string()?,
            (3, v) => m.namespace = v.string()?,
            (4, v) => m.self_link = v.string()?,
            (5, v) => m.uid = v.string()?,
            (6, v) => m.resource_version = v.smol()?,
            // A plain int64 with omitempty in Go: JSON leaves 0 out.
            (7, v) => m.generation = Some(v.i64()?).filter(|g| *g != 0),
            (8, v) => m.creation_timestamp = timestamp(v.bytes()?)?,
            (9, v) => m.deletion_timestamp = timestamp(v.bytes()?)?,
            (10, v) => m.deletion_grace_period_seconds = Some(v.i64()?),
            (11, v) => map_entry(&mut labels, v)?,
            (12, v) => map_entry(&mut annotations, v)?,
            (13, v) => push(&mut m.owner_references, v, owner_reference)?,
            (14, v) => m.finalizers.push(v.string()?),
            (17, v) => {
                managed_entry(v.bytes()?)?;
                managed.push(start..b.len() - cursor.buf.len());
            }
            _ => {}
        }
    }
    if !labels.is_empty() {
        m.labels = string_map(labels);
    }
    if !annotations.is_empty() {
        m.annotations = string_map(annotations);
    }
    m.owner_references.shrink_to_fit();
    m.finalizers.shrink_to_fit();
    if !managed.is_empty() {
        m.managed_fields = Some(managed_fields(b, &managed));
    }
    Ok(())
}

fn owner_reference(b: &[u8], r: &mut OwnerReference) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (5, v) => r.api_version = v.string()?,
            (1, v) => r.kind = v.string()?,
            (3, v) => r.name = v.string()?,
            (4, v) => r.uid = v.string()?,
            (6, v) => r.controller = Some(v.bool()?),
            (7, v) => r.block_owner_deletion = Some(v.bool()?),
            _ => {}
        }
    }
    Ok(())
}

/// A `metav1.Time` (seconds 1, nanos 2) as its JSON text; `None` for Go's zero time (sent as an
/// empty message, written to JSON as `null`; the epoch itself is `{1: 0}`).
fn timestamp(b: &[u8]) -> Result<Option<SmolStr>, Failure> {
    if b.is_empty() {
        return Ok(None);
    }
    let mut seconds = 0i64;
    for field in fields(b) {
        if let (1, v) = field? {
            seconds = v.i64()?;
        }
    }
    Ok(Some(super::time::rfc3339_of_seconds(seconds)))
}

/// `managedFields`, kept as the protobuf of their entries (`ranges` of `meta`, each a field 17
/// with its key and length: one copy, exact size) and written as JSON on first read
/// ([`RawJson`]'s docs): writing 1-2 KB of JSON text for every decoded Pod, and checking it, was
/// most of a Pod's decode. The entries were checked by [`managed_entry`], so writing cannot fail.
fn managed_fields(meta: &[u8], ranges: &[std::ops::Range<usize>]) -> RawJson {
    let mut source = Vec::with_capacity(ranges.iter().map(|r| r.len()).sum());
    for r in ranges {
        source.extend_from_slice(&meta[r.clone()]);
    }
    RawJson::deferred(source.into_boxed_slice(), managed_fields_json)
}

/// One `managedFields` entry (a `ManagedFieldsEntry`): manager 1, operation 2, apiVersion 3, time
/// 4, fieldsType 6, fieldsV1 7 (whose raw JSON is its field 1), subresource 8. Where the entry is
/// not well formed, `Err`: the object's decode fails here, so that writing it later cannot.
struct ManagedEntry<'a> {
    /// manager, operation, apiVersion, fieldsType, subresource.
    strings: [Text<'a>; 5],
    time: Option<SmolStr>,
    fields_v1: Option<&'a [u8]>,
}

fn managed_entry(entry: &[u8]) -> Result<ManagedEntry<'_>, Failure> {
    let mut e = ManagedEntry {
        strings: Default::default(),
        time: None,
        fields_v1: None,
    };
    for field in fields(entry) {
        match field? {
            (n @ 1..=3, v) => e.strings[n as usize - 1] = v.text()?,
            (4, v) => e.time = timestamp(v.bytes()?)?,
            (6, v) => e.strings[3] = v.text()?,
            (7, v) => {
                for field in fields(v.bytes()?) {
                    if let (1, raw) = field? {
                        e.fields_v1 = Some(raw.bytes()?);
                    }
                }
            }
            (8, v) => e.strings[4] = v.text()?,
            _ => {}
        }
    }
    Ok(e)
}

/// The JSON array the apiserver writes for `managedFields` entries (the field-17 fields of
/// `source`, checked by [`managed_entry`] when decoded): each entry's members in Go's field order,
/// empty ones left out, so both wires give equal metadata. The `fieldsV1` bytes go in as they
/// came (the apiserver sends JSON there; `RawJson::parse` and serialization check it), invalid
/// UTF-8 anywhere becomes U+FFFD. One difference is left: Go's encoder escapes `<`, `>`, `&`,
/// U+2028 and U+2029 (as `\u003c` ...), this writer does not, so an entry holding them reads the
/// same but is not the same text.
fn managed_fields_json(source: &[u8]) -> String {
    let mut json = Vec::with_capacity(source.len() + 64);
    json.push(b'[');
    for field in fields(source) {
        // Checked when decoded: every field is an entry that reads.
        let Ok((17, value)) = field else { continue };
        let Ok(entry) = value.bytes().and_then(managed_entry) else {
            continue;
        };
        if json.len() > 1 {
            json.push(b',');
        }
        json.push(b'{');
        let member = |json: &mut Vec<u8>, name: &str| {
            if json.last() != Some(&b'{') {
                json.push(b',');
            }
            json.push(b'"');
            json.extend_from_slice(name.as_bytes());
            json.extend_from_slice(b"\":");
        };
        // A `str` always writes as JSON: writing to a `Vec` cannot fail.
        let string = |json: &mut Vec<u8>, s: &str| {
            let _ = serde_json::to_writer(&mut *json, s);
        };
        let [manager, operation, api_version, fields_type, subresource] = &entry.strings;
        for (name, value) in [
            ("manager", manager),
            ("operation", operation),
            ("apiVersion", api_version),
        ] {
            if !value.is_empty() {
                member(&mut json, name);
                string(&mut json, value);
            }
        }
        if let Some(time) = &entry.time {
            member(&mut json, "time");
            string(&mut json, time);
        }
        if !fields_type.is_empty() {
            member(&mut json, "fieldsType");
            string(&mut json, fields_type);
        }
        if let Some(raw) = entry.fields_v1.filter(|r| !r.is_empty()) {
            member(&mut json, "fieldsV1");
            json.extend_from_slice(raw);
        }
        if !subresource.is_empty() {
            member(&mut json, "subresource");
            string(&mut json, subresource);
        }
        json.push(b'}');
    }
    json.push(b']');
    match String::from_utf8(json) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

// ---------------------------------------------------------------------------------------------------
// The kinds: each reads its message's fields into its struct (numbers of k8s.io/api's
// generated.proto), then applies JSON's conventions where Go writes a field to JSON only when set.

/// Decodes a kind's message with `read` (field 1 of every kind is its `ObjectMeta`).
fn decode<T: Default>(
    bytes: &[u8],
    read: fn(u32, Value<'_>, &mut T) -> Result<(), Failure>,
) -> Result<T, Failure> {
    let mut object = T::default();
    for field in fields(bytes) {
        let (number, value) = field?;
        read(number, value, &mut object)?;
    }
    Ok(object)
}

impl FromProtobuf for PartialObjectMetadata {
    /// `meta.v1.PartialObjectMetadata`: metadata 1. A view asks for protobuf only in the metadata
    /// form, so its `apiVersion` and `kind` are that form's, as its JSON items carry them (a
    /// protobuf list item has none of its own).
    fn from_protobuf(bytes: &[u8]) -> Result<PartialObjectMetadata, Failure> {
        let mut object = decode(
            bytes,
            |number, v, o: &mut PartialObjectMetadata| match number {
                1 => object_meta(v.bytes()?, &mut o.metadata),
                _ => Ok(()),
            },
        )?;
        object.api_version = "meta.k8s.io/v1".to_owned();
        object.kind = "PartialObjectMetadata".to_owned();
        Ok(object)
    }
}

impl FromProtobuf for Pod {
    /// `Pod`: metadata 1, spec 2, status 3.
    fn from_protobuf(bytes: &[u8]) -> Result<Pod, Failure> {
        decode(bytes, |number, v, pod: &mut Pod| match number {
            1 => object_meta(v.bytes()?, &mut pod.metadata),
            2 => pod_spec(v.bytes()?, &mut pod.spec),
            3 => pod_status(v.bytes()?, &mut pod.status),
            _ => Ok(()),
        })
    }
}

/// `PodSpec`: containers 2, nodeSelector 7, serviceAccountName 8, nodeName 10, hostname 16,
/// subdomain 17.
fn pod_spec(b: &[u8], s: &mut kinds::PodSpec) -> Result<(), Failure> {
    let mut node_selector = Vec::new();
    for field in fields(b) {
        match field? {
            (2, v) => push(&mut s.containers, v, container)?,
            (7, v) => map_entry(&mut node_selector, v)?,
            (8, v) => s.service_account_name = non_empty(Some(v.string()?)),
            (10, v) => s.node_name = non_empty(Some(v.string()?)),
            (16, v) => s.hostname = non_empty(Some(v.string()?)),
            (17, v) => s.subdomain = non_empty(Some(v.string()?)),
            _ => {}
        }
    }
    s.containers.shrink_to_fit();
    if !node_selector.is_empty() {
        s.node_selector = string_map(node_selector);
    }
    Ok(())
}

/// `Container`: name 1, image 2, ports 6 (`ContainerPort`: name 1, containerPort 3, protocol 4).
fn container(b: &[u8], c: &mut kinds::Container) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (1, v) => c.name = v.string()?,
            (2, v) => c.image = non_empty(Some(v.string()?)),
            (6, v) => push(&mut c.ports, v, |b, p: &mut kinds::ContainerPort| {
                for field in fields(b) {
                    match field? {
                        (1, v) => p.name = non_empty(Some(v.string()?)),
                        (3, v) => p.container_port = v.i32()?,
                        (4, v) => p.protocol = non_empty(Some(v.string()?)),
                        _ => {}
                    }
                }
                Ok(())
            })?,
            _ => {}
        }
    }
    c.ports.shrink_to_fit();
    Ok(())
}

/// `PodStatus`: phase 1, conditions 2, hostIP 5, podIP 6, podIPs 12 (`PodIP`: ip 1).
fn pod_status(b: &[u8], s: &mut kinds::PodStatus) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (1, v) => s.phase = non_empty(Some(v.string()?)),
            (2, v) => push(&mut s.conditions, v, condition)?,
            (5, v) => s.host_ip = non_empty(Some(v.string()?)),
            (6, v) => s.pod_ip = non_empty(Some(v.string()?)),
            (12, v) => push(&mut s.pod_ips, v, |b, ip: &mut kinds::PodIp| {
                for field in fields(b) {
                    if let (1, v) = field? {
                        ip.ip = v.string()?;
                    }
                }
                Ok(())
            })?,
            _ => {}
        }
    }
    s.conditions.shrink_to_fit();
    s.pod_ips.shrink_to_fit();
    Ok(())
}

/// `PodCondition` and `NodeCondition` alike: type 1, status 2, reason 5, message 6.
fn condition(b: &[u8], c: &mut kinds::Condition) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (1, v) => c.type_ = v.string()?,
            (2, v) => c.status = v.string()?,
            (5, v) => c.reason = non_empty(Some(v.string()?)),
            (6, v) => c.message = non_empty(Some(v.string()?)),
            _ => {}
        }
    }
    Ok(())
}

impl FromProtobuf for Service {
    /// `Service`: metadata 1, spec 2.
    fn from_protobuf(bytes: &[u8]) -> Result<Service, Failure> {
        decode(bytes, |number, v, svc: &mut Service| match number {
            1 => object_meta(v.bytes()?, &mut svc.metadata),
            2 => service_spec(v.bytes()?, &mut svc.spec),
            _ => Ok(()),
        })
    }
}

/// `ServiceSpec`: ports 1, selector 2, clusterIP 3, type 4, externalName 10, clusterIPs 18.
fn service_spec(b: &[u8], s: &mut kinds::ServiceSpec) -> Result<(), Failure> {
    let mut selector = Vec::new();
    for field in fields(b) {
        match field? {
            (1, v) => push(&mut s.ports, v, service_port)?,
            (2, v) => map_entry(&mut selector, v)?,
            (3, v) => s.cluster_ip = non_empty(Some(v.string()?)),
            (4, v) => s.type_ = non_empty(Some(v.string()?)),
            (10, v) => s.external_name = non_empty(Some(v.string()?)),
            (18, v) => s.cluster_ips.push(v.string()?),
            _ => {}
        }
    }
    s.ports.shrink_to_fit();
    s.cluster_ips.shrink_to_fit();
    // JSON has the selector whenever the map is not empty.
    if !selector.is_empty() {
        s.selector = Some(string_map(selector));
    }
    Ok(())
}

/// `ServicePort`: name 1, protocol 2, port 3, targetPort 4 (`IntOrString`: type 1, intVal 2,
/// strVal 3), appProtocol 6.
fn service_port(b: &[u8], p: &mut kinds::ServicePort) -> Result<(), Failure> {
    // Not a pointer in Go: JSON always has it (0 when unset).
    let (mut is_string, mut int, mut string) = (false, 0i32, String::new());
    for field in fields(b) {
        match field? {
            (1, v) => p.name = non_empty(Some(v.string()?)),
            (2, v) => p.protocol = non_empty(Some(v.string()?)),
            (3, v) => p.port = v.i32()?,
            (4, v) => {
                for field in fields(v.bytes()?) {
                    match field? {
                        (1, v) => is_string = v.i64()? == 1,
                        (2, v) => int = v.i32()?,
                        (3, v) => string = v.string()?,
                        _ => {}
                    }
                }
            }
            (6, v) => p.app_protocol = Some(v.string()?),
            _ => {}
        }
    }
    p.target_port = Some(if is_string {
        serde_json::Value::String(string)
    } else {
        int.into()
    });
    Ok(())
}

impl FromProtobuf for Endpoints {
    /// `Endpoints`: metadata 1, subsets 2.
    fn from_protobuf(bytes: &[u8]) -> Result<Endpoints, Failure> {
        let mut endpoints = decode(bytes, |number, v, e: &mut Endpoints| match number {
            1 => object_meta(v.bytes()?, &mut e.metadata),
            2 => push(&mut e.subsets, v, endpoint_subset),
            _ => Ok(()),
        })?;
        endpoints.subsets.shrink_to_fit();
        Ok(endpoints)
    }
}

/// `EndpointSubset`: addresses 1, notReadyAddresses 2, ports 3.
fn endpoint_subset(b: &[u8], s: &mut kinds::EndpointSubset) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (1, v) => push(&mut s.addresses, v, endpoint_address)?,
            (2, v) => push(&mut s.not_ready_addresses, v, endpoint_address)?,
            (3, v) => push(&mut s.ports, v, endpoints_port)?,
            _ => {}
        }
    }
    s.addresses = exact(std::mem::take(&mut s.addresses));
    s.not_ready_addresses = exact(std::mem::take(&mut s.not_ready_addresses));
    s.ports = exact(std::mem::take(&mut s.ports));
    Ok(())
}

/// `EndpointAddress`: ip 1, targetRef 2, hostname 3, nodeName 4.
fn endpoint_address(b: &[u8], a: &mut kinds::EndpointAddress) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (1, v) => a.ip = v.smol()?,
            (2, v) => message(&mut a.target_ref, v, object_reference)?,
            (3, v) => a.hostname = non_empty(Some(v.smol()?)),
            (4, v) => a.node_name = Some(v.smol()?),
            _ => {}
        }
    }
    Ok(())
}

/// `ObjectReference`: kind 1, namespace 2, name 3, uid 4.
fn object_reference(b: &[u8], r: &mut kinds::ObjectReference) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (1, v) => r.kind = v.smol()?,
            (2, v) => r.namespace = v.smol()?,
            (3, v) => r.name = v.smol()?,
            (4, v) => r.uid = v.string()?,
            _ => {}
        }
    }
    Ok(())
}

/// core/v1 `EndpointPort`: name 1, port 2, protocol 3, appProtocol 4 (port and the plain
/// strings are not pointers in core/v1: JSON always has the port).
fn endpoints_port(b: &[u8], p: &mut kinds::EndpointPort) -> Result<(), Failure> {
    p.port = Some(0);
    for field in fields(b) {
        match field? {
            (1, v) => p.name = non_empty(Some(v.smol()?)),
            (2, v) => p.port = Some(v.i32()?),
            (3, v) => p.protocol = non_empty(Some(v.smol()?)),
            (4, v) => p.app_protocol = Some(v.smol()?),
            _ => {}
        }
    }
    Ok(())
}

impl FromProtobuf for EndpointSlice {
    /// discovery/v1 `EndpointSlice`: metadata 1, endpoints 2, ports 3, addressType 4 (v1beta1's
    /// numbers differ; it is read as JSON).
    fn from_protobuf(bytes: &[u8]) -> Result<EndpointSlice, Failure> {
        let mut slice = decode(bytes, |number, v, s: &mut EndpointSlice| match number {
            1 => object_meta(v.bytes()?, &mut s.metadata),
            2 => push(&mut s.endpoints, v, endpoint),
            3 => push(&mut s.ports, v, slice_port),
            4 => v.smol().map(|t| s.address_type = t),
            _ => Ok(()),
        })?;
        slice.endpoints.shrink_to_fit();
        slice.ports.shrink_to_fit();
        Ok(slice)
    }
}

/// discovery/v1 `Endpoint`: addresses 1, conditions 2 (ready 1, serving 2, terminating 3),
/// hostname 3, targetRef 4, nodeName 6, zone 7, hints 8 (forZones 1, forNodes 2, each `{name:
/// 1}`). Field 5, v1's `deprecatedTopology`, is not read: the struct's `topology` is v1beta1's
/// JSON member, which v1's JSON does not have either.
fn endpoint(b: &[u8], e: &mut kinds::Endpoint) -> Result<(), Failure> {
    fn for_name(b: &[u8], f: &mut kinds::ForName) -> Result<(), Failure> {
        for field in fields(b) {
            if let (1, v) = field? {
                f.name = v.smol()?;
            }
        }
        Ok(())
    }
    for field in fields(b) {
        match field? {
            (1, v) => e.addresses.push(v.smol()?),
            (2, v) => {
                for field in fields(v.bytes()?) {
                    match field? {
                        (1, v) => e.conditions.ready = Some(v.bool()?),
                        (2, v) => e.conditions.serving = Some(v.bool()?),
                        (3, v) => e.conditions.terminating = Some(v.bool()?),
                        _ => {}
                    }
                }
            }
            (3, v) => e.hostname = Some(v.smol()?),
            (4, v) => message(&mut e.target_ref, v, object_reference)?,
            (6, v) => e.node_name = Some(v.smol()?),
            (7, v) => e.zone = Some(v.smol()?),
            (8, v) => message(&mut e.hints, v, |b, h: &mut kinds::EndpointHints| {
                for field in fields(b) {
                    match field? {
                        (1, v) => push(&mut h.for_zones, v, for_name)?,
                        (2, v) => push(&mut h.for_nodes, v, for_name)?,
                        _ => {}
                    }
                }
                Ok(())
            })?,
            _ => {}
        }
    }
    e.addresses.shrink_to_fit();
    Ok(())
}

/// discovery/v1 `EndpointPort`: name 1, protocol 2, port 3, appProtocol 4 (all pointers).
fn slice_port(b: &[u8], p: &mut kinds::EndpointPort) -> Result<(), Failure> {
    for field in fields(b) {
        match field? {
            (1, v) => p.name = Some(v.smol()?),
            (2, v) => p.protocol = Some(v.smol()?),
            (3, v) => p.port = Some(v.i32()?),
            (4, v) => p.app_protocol = Some(v.smol()?),
            _ => {}
        }
    }
    Ok(())
}

impl FromProtobuf for ConfigMap {
    /// `ConfigMap`: metadata 1, data 2, binaryData 3 (`map<string, bytes>`, base64 in JSON).
    fn from_protobuf(bytes: &[u8]) -> Result<ConfigMap, Failure> {
        use base64::Engine as _;
        let mut config_map = ConfigMap::default();
        let (mut data, mut binary) = (Vec::new(), Vec::new());
        for field in fields(bytes) {
            match field? {
                (1, v) => object_meta(v.bytes()?, &mut config_map.metadata)?,
                (2, v) => map_entry(&mut data, v)?,
                (3, v) => {
                    let (mut key, mut value) = ("", &[][..]);
                    for field in fields(v.bytes()?) {
                        match field? {
                            (1, v) => key = v.str()?,
                            (2, v) => value = v.bytes()?,
                            _ => {}
                        }
                    }
                    let value = base64::engine::general_purpose::STANDARD.encode(value);
                    binary.push((key, value));
                }
                _ => {}
            }
        }
        config_map.data = string_map(data);
        if !binary.is_empty() {
            config_map.binary_data = StringMap::from_entries(binary);
        }
        Ok(config_map)
    }
}

impl FromProtobuf for Namespace {
    /// `Namespace`: metadata 1, status 3 (phase 1).
    fn from_protobuf(bytes: &[u8]) -> Result<Namespace, Failure> {
        decode(bytes, |number, v, ns: &mut Namespace| match number {
            1 => object_meta(v.bytes()?, &mut ns.metadata),
            3 => {
                for field in fields(v.bytes()?) {
                    if let (1, v) = field? {
                        ns.status.phase = non_empty(Some(v.string()?));
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        })
    }
}

impl FromProtobuf for Node {
    /// `Node`: metadata 1, spec 2 (podCIDR 1, unschedulable 4), status 3 (conditions 4,
    /// addresses 5: type 1, address 2).
    fn from_protobuf(bytes: &[u8]) -> Result<Node, Failure> {
        let mut node = decode(bytes, |number, v, node: &mut Node| match number {
            1 => object_meta(v.bytes()?, &mut node.metadata),
            2 => {
                for field in fields(v.bytes()?) {
                    match field? {
                        (1, v) => node.spec.pod_cidr = non_empty(Some(v.string()?)),
                        // A plain bool with omitempty in Go: JSON leaves false out.
                        (4, v) => node.spec.unschedulable = Some(v.bool()?).filter(|u| *u),
                        _ => {}
                    }
                }
                Ok(())
            }
            3 => {
                for field in fields(v.bytes()?) {
                    match field? {
                        (4, v) => push(&mut node.status.conditions, v, condition)?,
                        (5, v) => push(
                            &mut node.status.addresses,
                            v,
                            |b, a: &mut kinds::NodeAddress| {
                                for field in fields(b) {
                                    match field? {
                                        (1, v) => a.type_ = v.string()?,
                                        (2, v) => a.address = v.string()?,
                                        _ => {}
                                    }
                                }
                                Ok(())
                            },
                        )?,
                        _ => {}
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        })?;
        node.status.conditions.shrink_to_fit();
        node.status.addresses.shrink_to_fit();
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::encoding::{encode_key, encode_varint};

    /// A message of length-delimited fields.
    fn message(fields: &[(u32, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (number, bytes) in fields {
            encode_key(*number, WireType::LengthDelimited, &mut out);
            encode_varint(bytes.len() as u64, &mut out);
            out.extend_from_slice(bytes);
        }
        out
    }

    /// A message of one varint field.
    fn varint(number: u32, value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        encode_key(number, WireType::Varint, &mut out);
        encode_varint(value, &mut out);
        out
    }

    #[test]
    fn a_status_with_details_but_no_retry_after_asks_for_no_wait() {
        let cause = message(&[(1, b"FieldValueInvalid")]);
        let details = [message(&[(1, b"x"), (4, &cause)]), varint(5, 0)].concat();
        let status = [message(&[(2, b"Failure"), (5, &details)]), varint(6, 500)].concat();
        let status = super::status(&status).unwrap();
        assert_eq!((status.code, status.retry_after_seconds()), (500, None));
        assert_eq!(status.causes()[0].reason, "FieldValueInvalid");
        let details = [message(&[(1, b"x")]), varint(5, 7)].concat();
        let status = super::status(&message(&[(5, &details)])).unwrap();
        assert_eq!(status.retry_after_seconds(), Some(7));
    }

    #[test]
    fn invalid_utf8_outside_the_key_reads_as_go_writes_it_to_json() {
        let annotation = message(&[(1, b"note"), (2, b"a\xffb")]);
        let meta = message(&[(1, b"cm"), (3, b"ns"), (12, &annotation)]);
        let cm = ConfigMap::from_protobuf(&message(&[(1, &meta)])).unwrap();
        assert_eq!(cm.metadata.annotations.get("note"), Some("a\u{fffd}b"));
        // The metadata strings the fifo keys on must be valid.
        let meta = message(&[(1, b"c\xffm")]);
        assert!(metadata_ranges(&message(&[(1, &meta)])).is_err());
    }

    #[test]
    fn the_zero_time_is_absent_and_the_epoch_is_a_time() {
        assert_eq!(timestamp(&[]).unwrap(), None);
        assert_eq!(
            timestamp(&varint(1, 0)).unwrap().as_deref(),
            Some("1970-01-01T00:00:00Z")
        );
        let meta = message(&[(1, b"p"), (8, &varint(1, 1_709_210_096)), (9, &[])]);
        let pod = Pod::from_protobuf(&message(&[(1, &meta)])).unwrap();
        assert_eq!(
            pod.metadata.creation_timestamp.as_deref(),
            Some("2024-02-29T12:34:56Z")
        );
        assert_eq!(pod.metadata.deletion_timestamp, None);
    }

    #[test]
    fn managed_fields_are_written_as_json_when_first_read() {
        let time = varint(1, 1_709_210_096);
        let fields_v1 = message(&[(1, br#"{"f:data":{}}"#)]);
        let entry = message(&[
            (1, b"kubectl"),
            (2, b"Update"),
            (3, b"v1"),
            (4, &time),
            (6, b"FieldsV1"),
            (7, &fields_v1),
        ]);
        // Another field between two entries: both are kept, in order.
        let meta = message(&[
            (1, b"cm"),
            (17, &entry),
            (3, b"ns"),
            (17, &message(&[(1, b"x\"y")])),
        ]);
        let cm = ConfigMap::from_protobuf(&message(&[(1, &meta)])).unwrap();
        let managed = cm.metadata.managed_fields.unwrap();
        let json = r#"[{"manager":"kubectl","operation":"Update","apiVersion":"v1","time":"2024-02-29T12:34:56Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}},{"manager":"x\"y"}]"#;
        assert_eq!(managed.get(), json);
        assert_eq!(
            managed.parse::<serde_json::Value>().unwrap()[1]["manager"],
            "x\"y"
        );
        assert_eq!(serde_json::to_string(&managed).unwrap(), json);
        // Equal to the same text read from JSON.
        assert_eq!(managed, serde_json::from_str(json).unwrap());
    }

    #[test]
    fn a_managed_fields_entry_that_does_not_decode_fails_the_object() {
        // A `time` that is a string where a message belongs; an entry cut short.
        for entry in [message(&[(4, b"\xff")]), vec![0x0a, 0x05, b'a']] {
            let meta = message(&[(1, b"cm"), (17, &entry)]);
            assert!(ConfigMap::from_protobuf(&message(&[(1, &meta)])).is_err());
        }
    }

    #[test]
    fn fields_v1_that_is_not_json_is_kept_and_fails_where_it_is_read_as_json() {
        let entry = message(&[(1, b"m"), (7, &message(&[(1, b"{not json")]))]);
        let meta = message(&[(1, b"cm"), (17, &entry)]);
        let cm = ConfigMap::from_protobuf(&message(&[(1, &meta)])).unwrap();
        let managed = cm.metadata.managed_fields.clone().unwrap();
        assert_eq!(managed.get(), r#"[{"manager":"m","fieldsV1":{not json}]"#);
        assert!(managed.parse::<serde_json::Value>().is_err());
        assert!(serde_json::to_string(&cm.metadata).is_err());
    }

    #[test]
    fn many_empty_managed_fields_entries_cost_what_they_bring() {
        let entries: Vec<u8> = (0..100_000).flat_map(|_| message(&[(17, b"")])).collect();
        let meta = [message(&[(1, b"p")]), entries].concat();
        let pod = Pod::from_protobuf(&message(&[(1, &meta)])).unwrap();
        let json = pod.metadata.managed_fields.unwrap();
        // `{}` and a comma an entry: no more than the message's 3 bytes an entry.
        assert_eq!(json.get().len(), 3 * 100_000 - 1 + 2);
    }
}
