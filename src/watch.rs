//! Typed watch events, decoded from the frames of a watch response.
//!
//! A frame is `{"type":T,"object":{...}}` with `T` one of `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`,
//! `ERROR` (X10). The object is decoded straight from the frame's bytes into its final type: the
//! envelope is read with a streaming visitor, so `type` (which the apiserver writes first) selects the
//! object's decoder before the object is parsed. Only when `object` comes first is it held as a raw
//! slice of the frame (no copy) until `type` is known.
//!
//! * `ADDED`/`MODIFIED`/`DELETED` carry a `T`.
//! * `BOOKMARK` objects are read for `metadata.resourceVersion` and `metadata.annotations` only; the rest
//!   is a zero-valued object of the watched type (`"spec":{"containers":null}`) and is skipped.
//! * `ERROR` carries a [`Status`]; code 410 means the watch's resourceVersion is gone.
//!
//! ```
//! use informer::{watch::{decode_event, WatchEvent}, frame::Frame, Pod};
//! let frame = Frame {
//!     bytes: r#"{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"5"}}}"#.into(),
//!     offset: 0,
//! };
//! match decode_event::<Pod>(&frame).unwrap() {
//!     WatchEvent::Added(pod) => assert_eq!(pod.metadata.resource_version, "5"),
//!     other => panic!("{other:?}"),
//! }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::Body;
use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::error::{Error, Result, excerpt};
use crate::frame::{Frame, FrameDecoder};
use crate::model::meta::null_as_default;
use crate::{Object, Status};

/// The annotation on the BOOKMARK that ends the initial events of a streaming list.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// One event of a watch.
///
/// ```
/// use informer::watch::WatchEvent;
/// let e: WatchEvent<informer::Pod> = WatchEvent::Bookmark(Default::default());
/// assert_eq!(e.resource_version(), Some(""));
/// ```
// Not boxed: objects are the common case and move once from the decoder to the reflector; a box
// would cost an allocation per event to shrink the rare BOOKMARK/ERROR case.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum WatchEvent<T> {
    /// An object was added.
    Added(T),
    /// An object changed.
    Modified(T),
    /// The object's last state, stamped with the deletion's resourceVersion (or, for an object that
    /// left the watch's selector, its previous state stamped with the change's resourceVersion).
    Deleted(T),
    /// The watch reached a resourceVersion (no object changed).
    Bookmark(Bookmark),
    /// The server ended the watch with a `Status`, e.g. 410 Expired.
    Error(Status),
}

impl<T: Object> WatchEvent<T> {
    /// The resourceVersion the event brings the watch to (`None` for `ERROR`).
    pub fn resource_version(&self) -> Option<&str> {
        match self {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                Some(&o.meta().resource_version)
            }
            WatchEvent::Bookmark(b) => Some(&b.resource_version),
            WatchEvent::Error(_) => None,
        }
    }
}

/// The useful part of a BOOKMARK event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bookmark {
    /// The resourceVersion reached.
    pub resource_version: String,
    /// The bookmark's annotations (e.g. `k8s.io/initial-events-end`).
    pub annotations: BTreeMap<String, String>,
}

impl Bookmark {
    /// True for the bookmark that ends the initial events of a streaming list (the annotation must be
    /// exactly `"true"`).
    ///
    /// ```
    /// let mut b = informer::watch::Bookmark::default();
    /// b.annotations.insert("k8s.io/initial-events-end".into(), "true".into());
    /// assert!(b.is_initial_events_end());
    /// ```
    pub fn is_initial_events_end(&self) -> bool {
        self.annotations
            .get(INITIAL_EVENTS_END_ANNOTATION)
            .is_some_and(|v| v == "true")
    }
}

/// Decodes one frame into a typed event.
pub fn decode_event<T: Object>(frame: &Frame) -> Result<WatchEvent<T>> {
    if let Some(e) = not_an_object(&frame.bytes, frame.offset) {
        return Err(e);
    }
    let mut de = serde_json::Deserializer::from_slice(&frame.bytes);
    let event = Envelope::<T>::deserialize(&mut de)
        .and_then(|e| de.end().map(|()| e))
        .map_err(|e| decode_error(&frame.bytes, frame.offset, &e))?;
    Ok(event.0)
}

/// [`Error::Decode`] for a value that is not a JSON object, so cannot be an event (junk a proxy or a
/// broken stream left between events), told without serde, whose error for it costs more than the
/// value; `None` for an object.
fn not_an_object(bytes: &[u8], base: u64) -> Option<Error> {
    let at = bytes.iter().position(|b| !b.is_ascii_whitespace())?;
    let found = match bytes[at] {
        b'{' => return None,
        b'[' => "an array",
        b'"' => "a string",
        b't' | b'f' => "a boolean",
        b'n' => "null",
        b'-' | b'0'..=b'9' => "a number",
        _ => "a value that is not JSON",
    };
    Some(Error::Decode {
        offset: base + at as u64,
        excerpt: excerpt(bytes, at, 80),
        message: format!("expected a watch event {{\"type\":...,\"object\":...}}, found {found}"),
    })
}

/// `serde_json::from_slice`, faster: one UTF-8 check of the whole input, then a parse that trusts it.
/// `from_slice` checks every string on its own, which measured ~16% of an Endpoints decode. Invalid
/// UTF-8 goes to `from_slice` after all, for its error, which says where.
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(bytes) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(bytes),
    }
}

/// Builds [`Error::Decode`] for a serde_json error in `bytes`, which start at stream offset `base`.
pub(crate) fn decode_error(bytes: &[u8], base: u64, e: &serde_json::Error) -> Error {
    let at = byte_index(bytes, e.line(), e.column());
    Error::Decode {
        offset: base + at as u64,
        excerpt: excerpt(bytes, at.saturating_sub(40), 80),
        message: e.to_string(),
    }
}

/// serde_json reports 1-based line and column; turn them back into a byte index.
fn byte_index(bytes: &[u8], line: usize, column: usize) -> usize {
    let mut start = 0;
    for _ in 1..line {
        match memchr::memchr(b'\n', &bytes[start..]) {
            Some(i) => start += i + 1,
            None => break,
        }
    }
    (start + column.saturating_sub(1)).min(bytes.len())
}

// ---------------------------------------------------------------------------------------------------
// The envelope: {"type": ..., "object": ...} in either order.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
enum EventType {
    #[serde(rename = "ADDED")]
    Added,
    #[serde(rename = "MODIFIED")]
    Modified,
    #[serde(rename = "DELETED")]
    Deleted,
    #[serde(rename = "BOOKMARK")]
    Bookmark,
    #[serde(rename = "ERROR")]
    Error,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Field {
    Type,
    Object,
    #[serde(other)]
    Other,
}

struct Envelope<T>(WatchEvent<T>);

impl<'de, T: Object> Deserialize<'de> for Envelope<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor(PhantomData))
    }
}

struct EnvelopeVisitor<T>(PhantomData<T>);

impl<'de, T: Object> Visitor<'de> for EnvelopeVisitor<T> {
    type Value = Envelope<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a watch event {\"type\":...,\"object\":...}")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut ty: Option<EventType> = None;
        let mut event: Option<WatchEvent<T>> = None;
        // `object` before `type`: keep the raw bytes (borrowed from the frame) until the type is known.
        let mut raw: Option<&'de serde_json::value::RawValue> = None;
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Type => {
                    if ty.is_some() {
                        return Err(de::Error::duplicate_field("type"));
                    }
                    ty = Some(map.next_value()?);
                }
                Field::Object => {
                    if event.is_some() || raw.is_some() {
                        return Err(de::Error::duplicate_field("object"));
                    }
                    match ty {
                        Some(t) => event = Some(map.next_value_seed(ObjectSeed::<T>::new(t))?),
                        None => raw = Some(map.next_value()?),
                    }
                }
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let ty = ty.ok_or_else(|| de::Error::missing_field("type"))?;
        if let Some(raw) = raw {
            let mut de = serde_json::Deserializer::from_str(raw.get());
            event = Some(
                ObjectSeed::<T>::new(ty)
                    .deserialize(&mut de)
                    .map_err(de::Error::custom)?,
            );
        }
        event
            .map(Envelope)
            .ok_or_else(|| de::Error::missing_field("object"))
    }
}

/// Decodes `object` according to the event type.
struct ObjectSeed<T> {
    ty: EventType,
    _t: PhantomData<T>,
}

impl<T> ObjectSeed<T> {
    fn new(ty: EventType) -> Self {
        ObjectSeed {
            ty,
            _t: PhantomData,
        }
    }
}

impl<'de, T: DeserializeOwned> DeserializeSeed<'de> for ObjectSeed<T> {
    type Value = WatchEvent<T>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        Ok(match self.ty {
            EventType::Added => WatchEvent::Added(T::deserialize(d)?),
            EventType::Modified => WatchEvent::Modified(T::deserialize(d)?),
            EventType::Deleted => WatchEvent::Deleted(T::deserialize(d)?),
            EventType::Bookmark => {
                let o = BookmarkObject::deserialize(d)?;
                WatchEvent::Bookmark(Bookmark {
                    resource_version: o.metadata.resource_version,
                    annotations: o.metadata.annotations,
                })
            }
            EventType::Error => WatchEvent::Error(Status::deserialize(d)?),
        })
    }
}

/// A bookmark's object: everything but these two metadata fields is skipped unparsed.
#[derive(Deserialize)]
struct BookmarkObject {
    #[serde(default)]
    metadata: BookmarkMeta,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct BookmarkMeta {
    #[serde(default)]
    resource_version: String,
    #[serde(default, deserialize_with = "null_as_default")]
    annotations: BTreeMap<String, String>,
}

// ---------------------------------------------------------------------------------------------------
// Raw events: the object kept as JSON, with the few metadata fields the fifo coalesces on.

/// A byte range of a [`RawObject`]'s JSON (start, length): names are DNS labels and versions digits,
/// so they sit in the JSON unescaped and need no copy of their own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Span(u32, u32);

/// The object of an `ADDED`, `MODIFIED` or `DELETED` event, kept as its JSON until it is needed.
///
/// Only `metadata.namespace`, `name`, `uid` and `resourceVersion` are read when the event arrives
/// (what the fifo needs to coalesce events by key); the object is decoded into its type only if it
/// survives coalescing, with [`decode`](Self::decode). The JSON is a slice of the buffer the event
/// was received in (no copy), so keeping a `RawObject` keeps that buffer: the fifo copies each one
/// it takes in, and so should any other code that holds raw objects for long.
///
/// ```
/// use informer::{watch::{EventDecoder, RawEvent}, Pod};
/// let mut dec = EventDecoder::<Pod>::new();
/// dec.push(b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"7\"}}}\n");
/// let Some(RawEvent::Modified(raw)) = dec.next_raw().unwrap() else { panic!() };
/// assert_eq!((raw.key().as_str(), raw.resource_version()), ("ns/a", "7"));
/// let pod: Pod = raw.decode().unwrap();
/// assert_eq!(pod.metadata.name, "a");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RawObject {
    json: Bytes,
    /// Stream offset of the object's first byte (for decode errors).
    offset: u64,
    namespace: Span,
    name: Span,
    uid: Span,
    resource_version: Span,
}

impl fmt::Debug for RawObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawObject")
            .field("key", &self.key())
            .field("resource_version", &self.resource_version())
            .field("bytes", &self.json.len())
            .finish()
    }
}

impl RawObject {
    /// Copies the JSON into an allocation of its own. An event's bytes share the buffer they were
    /// received in; the fifo copies what it keeps pending, so that a pending event holds its own
    /// length and not a receive buffer, and the copy lives with the thread that frees it.
    pub(crate) fn own_bytes(&mut self) {
        self.json = Bytes::copy_from_slice(&self.json);
    }

    fn span(&self, s: Span) -> &str {
        let (start, len) = (s.0 as usize, s.1 as usize);
        // Checked as UTF-8 when the span was made (`Reader::metadata`): never fails.
        std::str::from_utf8(&self.json[start..start + len]).unwrap_or_default()
    }

    /// The object's JSON, as received.
    pub fn json(&self) -> &[u8] {
        &self.json
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.span(self.name)
    }

    /// `metadata.namespace` (empty for cluster-scoped objects).
    pub fn namespace(&self) -> &str {
        self.span(self.namespace)
    }

    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.span(self.uid)
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> &str {
        self.span(self.resource_version)
    }

    /// The cache key, `namespace/name` (or `name`).
    pub fn key(&self) -> String {
        let mut key = String::new();
        self.write_key(&mut key);
        key
    }

    /// Writes the cache key into `buf` (cleared first).
    pub(crate) fn write_key(&self, buf: &mut String) {
        buf.clear();
        let ns = self.namespace();
        if !ns.is_empty() {
            buf.push_str(ns);
            buf.push('/');
        }
        buf.push_str(self.name());
    }

    /// Decodes the object into a [`Object`] and checks that its metadata says what was read from
    /// its JSON when it arrived (namespace, name, resourceVersion), which the fifo coalesced on: a
    /// JSON object that repeats `metadata`, for a type whose decode takes the last one, would
    /// otherwise be stored under another key. A mismatch is an [`Error::Decode`].
    ///
    /// ```
    /// use informer::{watch::{EventDecoder, RawEvent}, Error, Pod};
    /// let mut dec = EventDecoder::<Pod>::new();
    /// dec.push(b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n");
    /// let Some(RawEvent::Added(raw)) = dec.next_raw().unwrap() else { panic!() };
    /// assert_eq!(raw.decode_object::<Pod>().unwrap().metadata.name, "a");
    /// ```
    pub fn decode_object<T: Object>(&self) -> Result<T> {
        let obj: T = self.decode()?;
        let meta = obj.meta();
        if meta.namespace != self.namespace()
            || meta.name != self.name()
            || meta.resource_version != self.resource_version()
        {
            return Err(Error::Decode {
                offset: self.offset,
                excerpt: excerpt(&self.json, 0, 80),
                message: format!(
                    "the object decodes as {}/{} at resourceVersion {:?}, but its JSON was read as \
                     {}/{} at {:?} (is `metadata` repeated?)",
                    meta.namespace,
                    meta.name,
                    meta.resource_version,
                    self.namespace(),
                    self.name(),
                    self.resource_version()
                ),
            });
        }
        Ok(obj)
    }

    /// Decodes the object into its type; [`Error::Decode`] names the stream offset of the problem.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        parse_json(&self.json).map_err(|e| decode_error(&self.json, self.offset, &e))
    }
}

/// A watch event whose object, if it has one, is still JSON: see [`EventDecoder::next_raw`].
#[derive(Clone, Debug, PartialEq)]
pub enum RawEvent<T> {
    /// An object was added.
    Added(RawObject),
    /// An object changed.
    Modified(RawObject),
    /// An object was deleted (its last state).
    Deleted(RawObject),
    /// Any other event, decoded at once: `BOOKMARK`, `ERROR`, or an object event whose metadata
    /// could not be read without decoding it (escaped names, a value out of place).
    Decoded(WatchEvent<T>),
}

impl<T: Object> RawEvent<T> {
    /// The event with its object decoded as the fifo decodes it
    /// ([`RawObject::decode_object`]).
    ///
    /// ```
    /// use informer::{watch::{EventDecoder, WatchEvent}, Pod};
    /// let mut dec = EventDecoder::<Pod>::new();
    /// dec.push(b"{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n");
    /// let event = dec.next_raw().unwrap().unwrap().decode().unwrap();
    /// assert!(matches!(event, WatchEvent::Deleted(pod) if pod.metadata.name == "a"));
    /// ```
    pub fn decode(self) -> Result<WatchEvent<T>> {
        Ok(match self {
            RawEvent::Added(raw) => WatchEvent::Added(raw.decode_object()?),
            RawEvent::Modified(raw) => WatchEvent::Modified(raw.decode_object()?),
            RawEvent::Deleted(raw) => WatchEvent::Deleted(raw.decode_object()?),
            RawEvent::Decoded(event) => event,
        })
    }
}

/// `{"type":...,"object":...}` with the object left unparsed (but validated), in either order.
#[derive(Deserialize)]
struct RawEnvelope<'a> {
    #[serde(rename = "type")]
    ty: EventType,
    #[serde(borrow)]
    object: &'a serde_json::value::RawValue,
}

/// Reads `metadata.namespace`, `name`, `uid` and `resourceVersion` of an object as spans of its
/// JSON, by the bytes, without a parser: the object's end is known (framing found it), so the values
/// it steps over need only be delimited, as framing delimits them, not parsed. It reads the object's
/// top-level keys up to `metadata`, then `metadata`'s keys, and stops there. `None` where it cannot
/// be sure (an escaped key or wanted value, a control character in one, a key, `:` or `,` out of
/// place): the caller then decodes the event fully, which gives the event or the error. What it
/// steps over is only delimited, and checked when the object is decoded; so is that the object's
/// own metadata agrees with what was read here ([`RawObject::decode_object`]: a repeated
/// `metadata` key, say).
fn metadata_spans(object: &[u8]) -> Option<[Span; 4]> {
    let mut r = Reader { b: object, i: 0 };
    r.expect(b'{')?;
    if r.close_or_first(b'}')? {
        return Some([Span::default(); 4]);
    }
    loop {
        let key = r.key()?;
        if key == b"metadata" {
            return r.metadata();
        }
        r.skip_value()?;
        if r.close_or_next(b'}')? {
            // No metadata: the fifo sees an empty key; the decode tells whether that is an error.
            return Some([Span::default(); 4]);
        }
    }
}

/// A cursor over an object's JSON for [`metadata_spans`].
struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl Reader<'_> {
    fn whitespace(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    /// Skips whitespace, then expects `c`.
    fn expect(&mut self, c: u8) -> Option<()> {
        self.whitespace();
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    /// After an opening bracket: `true` if the container is empty (its `close` taken).
    fn close_or_first(&mut self, close: u8) -> Option<bool> {
        self.whitespace();
        if *self.b.get(self.i)? == close {
            self.i += 1;
            return Some(true);
        }
        Some(false)
    }

    /// After a member: `true` at the container's `close`, `false` after a `,`.
    fn close_or_next(&mut self, close: u8) -> Option<bool> {
        self.whitespace();
        let c = *self.b.get(self.i)?;
        self.i += 1;
        match c {
            b',' => Some(false),
            c if c == close => Some(true),
            _ => None,
        }
    }

    /// A string with no escape and no control character: its span (quotes excluded).
    fn plain_string(&mut self) -> Option<(usize, usize)> {
        self.expect(b'"')?;
        let start = self.i;
        let len = memchr::memchr2(b'"', b'\\', &self.b[start..])?;
        let text = &self.b[start..start + len];
        if self.b[start + len] != b'"' || text.iter().any(|&c| c < 0x20) {
            return None;
        }
        self.i = start + len + 1;
        Some((start, len))
    }

    /// A member's key and its `:`.
    fn key(&mut self) -> Option<&[u8]> {
        let (start, len) = self.plain_string()?;
        self.expect(b':')?;
        Some(&self.b[start..start + len])
    }

    /// Steps over a value: a string to its closing quote, an object or array to its closing
    /// bracket (by framing's rules), anything else to the next delimiter.
    fn skip_value(&mut self) -> Option<()> {
        self.whitespace();
        let rest = &self.b[self.i..];
        let len = match *rest.first()? {
            b'"' => {
                let mut j = 1;
                loop {
                    j += memchr::memchr2(b'"', b'\\', rest.get(j..)?)?;
                    if rest[j] == b'"' {
                        break j + 1;
                    }
                    j += 2;
                }
            }
            b'{' => crate::frame::container_end(rest, b'{', b'}')?,
            b'[' => crate::frame::container_end(rest, b'[', b']')?,
            _ => rest
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .filter(|&n| n > 0)?,
        };
        self.i += len;
        Some(())
    }

    /// `metadata`'s value: the four spans, the last of each key if one repeats.
    fn metadata(&mut self) -> Option<[Span; 4]> {
        let mut spans = [Span::default(); 4];
        self.expect(b'{')?;
        if self.close_or_first(b'}')? {
            return Some(spans);
        }
        loop {
            let slot = match self.key()? {
                b"namespace" => Some(0),
                b"name" => Some(1),
                b"uid" => Some(2),
                b"resourceVersion" => Some(3),
                _ => None,
            };
            match slot {
                Some(slot) => {
                    let (start, len) = self.plain_string()?;
                    std::str::from_utf8(&self.b[start..start + len]).ok()?;
                    spans[slot] = Span(u32::try_from(start).ok()?, u32::try_from(len).ok()?);
                }
                None => self.skip_value()?,
            }
            if self.close_or_next(b'}')? {
                return Some(spans);
            }
        }
    }
}

/// The metadata spans of an `ADDED`/`MODIFIED`/`DELETED` event's object (its JSON `object`).
/// `None` when this fast path does not apply: another event type, an object that is not a JSON
/// object, metadata that does not parse, escaped metadata strings. The caller then decodes the
/// event fully, which gives the event or the error `decode_event` gives.
fn skim(ty: EventType, object: &[u8]) -> Option<[Span; 4]> {
    if !matches!(
        ty,
        EventType::Added | EventType::Modified | EventType::Deleted
    ) {
        return None;
    }
    metadata_spans(object)
}

/// The raw event of a [`skim`]med object: `json` (at stream offset `offset`) is a slice of the
/// receive buffer, not a copy; the fifo copies what it keeps pending (`RawObject::own_bytes`).
fn raw_event<T>(ty: EventType, json: Bytes, offset: u64, spans: [Span; 4]) -> RawEvent<T> {
    let [namespace, name, uid, resource_version] = spans;
    let raw = RawObject {
        json,
        offset,
        namespace,
        name,
        uid,
        resource_version,
    };
    match ty {
        EventType::Added => RawEvent::Added(raw),
        EventType::Modified => RawEvent::Modified(raw),
        _ => RawEvent::Deleted(raw),
    }
}

/// The apiserver's own envelope, byte for byte, at the start of `bytes`:
/// `{"type":"ADDED","object":{...}}` (or `MODIFIED`, `DELETED`), the object closed and followed
/// by the envelope's `}`. Its type and the object's span; the envelope ends one byte after the
/// object. `None` for anything else (other types, other field orders, whitespace, more fields,
/// an object not complete in `bytes`), which framing and serde then read.
fn apiserver_envelope(bytes: &[u8]) -> Option<(EventType, std::ops::Range<usize>)> {
    let rest = bytes.strip_prefix(br#"{"type":""#)?;
    let (ty, rest) = if let Some(r) = rest.strip_prefix(br#"MODIFIED","object":"#) {
        (EventType::Modified, r)
    } else if let Some(r) = rest.strip_prefix(br#"ADDED","object":"#) {
        (EventType::Added, r)
    } else {
        (
            EventType::Deleted,
            rest.strip_prefix(br#"DELETED","object":"#)?,
        )
    };
    let start = bytes.len() - rest.len();
    let end = start + crate::frame::container_end(rest, b'{', b'}')?;
    (bytes.get(end) == Some(&b'}')).then_some((ty, start..end))
}

/// [`skim`] of a framed value: the apiserver's envelope is split by its bytes (the object is
/// framed, not parsed: only its metadata is, and the rest when the object is decoded), any other
/// envelope by serde (which validates the object as JSON).
fn skim_frame<T>(frame: &Frame) -> Option<RawEvent<T>> {
    let bytes = &frame.bytes[..];
    let (ty, object) = match apiserver_envelope(bytes) {
        Some((ty, object)) if object.end + 1 == bytes.len() => (ty, object),
        _ => {
            if !starts_an_object(bytes) {
                return None;
            }
            let env = serde_json::from_slice::<RawEnvelope>(bytes).ok()?;
            let object = env.object.get().as_bytes();
            let at = object.as_ptr() as usize - bytes.as_ptr() as usize;
            (env.ty, at..at + object.len())
        }
    };
    let spans = skim(ty, &bytes[object.clone()])?;
    let offset = frame.offset + object.start as u64;
    Some(raw_event(ty, frame.bytes.slice(object), offset, spans))
}

/// Whether `bytes` holds a JSON object, leading whitespace aside.
fn starts_an_object(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

// ---------------------------------------------------------------------------------------------------
// The event decoder: framing and decoding in one pass where the stream allows it.

/// Turns received bytes into typed events: a [`FrameDecoder`] and [`decode_event`] in one, and
/// faster than the two in sequence.
///
/// Framing first and parsing second reads every byte twice. The apiserver ends each event with a
/// newline, and compact JSON has no raw newline inside a value, so a value that starts before the
/// last newline received is almost certainly complete: such a value is parsed straight from the
/// buffer, and the parser's own end of the value is the frame boundary. Everything else (the value
/// cut by the end of the received bytes, a pretty-printed or malformed value) falls back to framing
/// first. The fallback is exact, not approximate: a parse that succeeds consumed a complete, valid
/// JSON value, which is where the framer would have cut it; a parse that fails is discarded and the
/// value is framed and decoded again, so incomplete values wait for more bytes and errors carry the
/// same offsets as [`decode_event`]'s. Each value is tried at most once, so a value cut into many
/// pushes is never parsed over and over.
///
/// ```
/// use informer::{watch::{EventDecoder, WatchEvent}, Pod};
///
/// let mut dec = EventDecoder::<Pod>::new();
/// dec.push(br#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}}
/// {"type":"DELETED","object":{"metadata":{"na"#);
/// match dec.next_event().unwrap() {
///     Some(WatchEvent::Added(pod)) => assert_eq!(pod.metadata.name, "a"),
///     other => panic!("{other:?}"),
/// }
/// assert!(dec.next_event().unwrap().is_none()); // incomplete: wait for more bytes
/// dec.push(br#"me":"a","resourceVersion":"6"}}}"#);
/// assert!(matches!(dec.next_event().unwrap(), Some(WatchEvent::Deleted(_))));
/// assert!(dec.finish().unwrap().is_none()); // clean end of stream
/// ```
pub struct EventDecoder<T> {
    frames: FrameDecoder,
    /// Stream offset just past the last newline pushed: values starting before it are parsed
    /// directly.
    newline_end: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for EventDecoder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventDecoder")
            .field("frames", &self.frames)
            .finish()
    }
}

impl<T: Object> Default for EventDecoder<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Object> EventDecoder<T> {
    /// A decoder with the default frame limit ([`DEFAULT_MAX_FRAME_BYTES`](crate::frame::DEFAULT_MAX_FRAME_BYTES)).
    ///
    /// ```
    /// let dec = informer::watch::EventDecoder::<informer::Pod>::new();
    /// assert_eq!(dec.buffered(), 0);
    /// ```
    pub fn new() -> Self {
        Self::with_max_frame(crate::frame::DEFAULT_MAX_FRAME_BYTES)
    }

    /// A decoder whose events may be at most `max_frame` bytes of JSON each.
    ///
    /// ```
    /// use informer::{watch::EventDecoder, Error, Pod};
    /// let mut dec = EventDecoder::<Pod>::with_max_frame(16);
    /// dec.push(b"{\"type\":\"ADDED\",\"object\":{}}\n");
    /// assert!(matches!(dec.next_event(), Err(Error::FrameTooLarge { limit: 16 })));
    /// ```
    pub fn with_max_frame(max_frame: usize) -> Self {
        EventDecoder {
            frames: FrameDecoder::with_max_frame(max_frame),
            newline_end: 0,
            _t: PhantomData,
        }
    }

    /// Appends received bytes. Call [`next_event`](Self::next_event) until it returns `Ok(None)`
    /// before pushing again, so that memory stays bounded.
    pub fn push(&mut self, bytes: &[u8]) {
        if let Some(i) = memchr::memrchr(b'\n', bytes) {
            self.newline_end = self.frames.stream_end() + i as u64 + 1;
        }
        self.frames.push(bytes);
    }

    /// Bytes held for the events being received.
    pub fn buffered(&self) -> usize {
        self.frames.buffered()
    }

    /// The next event, `Ok(None)` if more bytes are needed, or an error for this event (the decoder
    /// then goes on with the next one): [`Error::Decode`] for a value that is not a watch event of
    /// `T`, [`Error::FrameTooLarge`] for one over the limit.
    pub fn next_event(&mut self) -> Result<Option<WatchEvent<T>>> {
        if let Some((bytes, offset)) = self.frames.unscanned_value()
            && offset < self.newline_end
            && bytes.first() == Some(&b'{')
        {
            let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<Envelope<T>>();
            if let Some(Ok(Envelope(event))) = values.next() {
                let len = values.byte_offset();
                self.frames.skip_parsed(len)?;
                return Ok(Some(event));
            }
            // Incomplete or invalid: frame it, then decode it (again) for the event or the error.
        }
        match self.frames.next_frame()? {
            Some(frame) => decode_event(&frame).map(Some),
            None => Ok(None),
        }
    }

    /// The next event with its object left as JSON ([`RawEvent`]): the envelope and the object's
    /// metadata are read, but the rest of the object is parsed only when the caller decodes it
    /// ([`RawObject::decode`]). Events the fast path does not take come decoded, and errors are
    /// those of [`next_event`](Self::next_event), at the same offsets; an object whose metadata
    /// reads but whose rest is not valid JSON, or not a valid `T`, is found only when it is
    /// decoded (an event that a newer one for its key replaces is never parsed in full), at the
    /// same offset, except that a parse running out of input (`"\u"}`: a closed string to
    /// framing, an escape missing its digits to the parser) ends at the object, not the event.
    pub fn next_raw(&mut self) -> Result<Option<RawEvent<T>>> {
        // The apiserver's envelope, complete before the last newline received, is split where it
        // lies: one scan finds the object's end (faster than a parse), and the skim reads just
        // the metadata. The end is where framing would put it (the envelope around the object
        // holds no bracket or escape), so `take_parsed` keeps the offsets and the size limit.
        if let Some((bytes, offset)) = self.frames.unscanned_value()
            && offset < self.newline_end
            && let Some((ty, object)) = apiserver_envelope(bytes)
            && let Some(spans) = skim(ty, &bytes[object.clone()])
        {
            let value = self.frames.take_parsed(object.end + 1)?;
            let json = value.slice(object.start..object.end);
            return Ok(Some(raw_event(
                ty,
                json,
                offset + object.start as u64,
                spans,
            )));
        }
        match self.frames.next_frame()? {
            Some(frame) => match skim_frame(&frame) {
                Some(event) => Ok(Some(event)),
                None => decode_event(&frame).map(|e| Some(RawEvent::Decoded(e))),
            },
            None => Ok(None),
        }
    }

    /// The next value framed but not decoded (for callers that decode themselves).
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        self.frames.next_frame()
    }

    /// Ends the stream: `Ok(None)` for a clean end, [`Error::UnexpectedEof`] for an end inside an
    /// event, or the last event if the stream ended right after a value that needed no delimiter.
    pub fn finish(&mut self) -> Result<Option<WatchEvent<T>>> {
        match self.frames.finish()? {
            Some(frame) => decode_event(&frame).map(Some),
            None => Ok(None),
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The stream.

/// A watch response body turned into typed events.
///
/// `next().await` returns `None` at a clean end of the body (the server's `timeoutSeconds`, or the
/// server closing the watch between events): the caller re-watches from the last resourceVersion.
/// An end in the middle of a frame is [`Error::UnexpectedEof`], a broken connection
/// [`Error::Transport`]; both also mean "re-watch". A frame that does not decode is [`Error::Decode`]
/// (the stream can go on, but the cache may have missed an event: relist). An `ERROR` event is
/// returned as [`WatchEvent::Error`].
///
/// `B` is any HTTP body of [`Bytes`]; [`Api::watch`](crate::client::Api::watch) gives a
/// `WatchStream<T, ResponseBody>` (the client's [`ResponseBody`](crate::client::ResponseBody)).
pub struct WatchStream<T, B> {
    body: B,
    events: EventDecoder<T>,
    ended: bool,
    _t: PhantomData<fn() -> T>,
}

impl<T, B> fmt::Debug for WatchStream<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchStream")
            .field("buffered", &self.events.frames.buffered())
            .field("ended", &self.ended)
            .finish()
    }
}

impl<T, B> WatchStream<T, B>
where
    T: Object,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// Wraps a response body; `max_frame` bounds one event's size.
    pub fn new(body: B, max_frame: usize) -> Self {
        WatchStream {
            body,
            events: EventDecoder::with_max_frame(max_frame),
            ended: false,
            _t: PhantomData,
        }
    }

    /// The next event; `None` once the body ended cleanly.
    pub async fn next(&mut self) -> Option<Result<WatchEvent<T>>> {
        self.pull(EventDecoder::next_event, EventDecoder::finish)
            .await
    }

    /// The next event with its object left as JSON (see [`EventDecoder::next_raw`]); `None` once
    /// the body ended cleanly.
    pub async fn next_raw(&mut self) -> Option<Result<RawEvent<T>>> {
        self.pull(EventDecoder::next_raw, |d| {
            d.finish().map(|e| e.map(RawEvent::Decoded))
        })
        .await
    }

    /// The next raw frame, undecoded (for callers that decode themselves).
    pub async fn next_frame(&mut self) -> Option<Result<Frame>> {
        self.pull(EventDecoder::next_frame, |d| d.frames.finish())
            .await
    }

    /// Takes the next item out of the decoder with `take`, receiving more of the body while there
    /// is none; at the end of the body, `finish` gives the last item or the error of an end
    /// mid-value.
    async fn pull<X>(
        &mut self,
        take: fn(&mut EventDecoder<T>) -> Result<Option<X>>,
        finish: fn(&mut EventDecoder<T>) -> Result<Option<X>>,
    ) -> Option<Result<X>> {
        std::future::poll_fn(|cx| self.poll_pull(cx, take, finish)).await
    }

    /// [`pull`](Self::pull) as a poll function (for [`Stream`](futures_core::Stream)): `Pending`
    /// only while the body has no data ready. `None` once the body has ended and everything was
    /// returned; a broken connection is an error, and ends the body.
    fn poll_pull<X>(
        &mut self,
        cx: &mut Context<'_>,
        take: fn(&mut EventDecoder<T>) -> Result<Option<X>>,
        finish: fn(&mut EventDecoder<T>) -> Result<Option<X>>,
    ) -> Poll<Option<Result<X>>> {
        loop {
            if let Some(item) = take(&mut self.events).transpose() {
                return Poll::Ready(Some(item));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            match std::task::ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.events.push(&data);
                    }
                }
                Some(Err(e)) => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(Error::transport("watch stream broke", e))));
                }
                None => {
                    self.ended = true;
                    return Poll::Ready(finish(&mut self.events).transpose());
                }
            }
        }
    }
}

/// The typed events as a [`Stream`](futures_core::Stream), for stream combinators (the items of
/// [`WatchStream::next`]). Cancel-safe: an event is taken out of the decoder only when returned.
///
/// ```
/// use std::future::poll_fn;
/// use std::pin::Pin;
/// use futures_core::Stream;
/// use informer::watch::{WatchEvent, WatchStream};
/// use informer::ConfigMap;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let body = http_body_util::Full::new(bytes::Bytes::from_static(
///     b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n\
///       {\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"}}}\n",
/// ));
/// let mut events = WatchStream::<ConfigMap, _>::new(body, 1 << 20);
/// // A tiny `StreamExt::next`: any Stream combinator works the same way.
/// let mut names = Vec::new();
/// while let Some(event) = poll_fn(|cx| Pin::new(&mut events).poll_next(cx)).await {
///     if let WatchEvent::Deleted(cm) = event.unwrap() {
///         names.push(cm.metadata.name);
///     }
/// }
/// assert_eq!(names, ["a"]);
/// # });
/// ```
impl<T, B> futures_core::Stream for WatchStream<T, B>
where
    T: Object,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Item = Result<WatchEvent<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // `WatchStream` is `Unpin` (`B: Unpin`, `T` only in `PhantomData<fn() -> T>`).
        self.get_mut()
            .poll_pull(cx, EventDecoder::next_event, EventDecoder::finish)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The four metadata values `metadata_spans` finds, as text.
    fn read(object: &str) -> Option<[String; 4]> {
        let spans = metadata_spans(object.as_bytes())?;
        Some(
            spans.map(|Span(start, len)| object[start as usize..(start + len) as usize].to_owned()),
        )
    }

    #[test]
    fn raw_objects_share_the_receive_buffer_until_given_bytes_of_their_own() {
        let a = r#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"1"}}}"#;
        let b = r#"{"type":"ADDED","object":{"metadata":{"name":"b","resourceVersion":"2"}}}"#;
        let mut dec = EventDecoder::<crate::Pod>::new();
        dec.push(format!("{a}\n{b}\n").as_bytes());
        let mut next = || match dec.next_raw().unwrap() {
            Some(RawEvent::Added(raw)) => raw,
            _ => panic!("no raw event"),
        };
        let (mut first, second) = (next(), next());
        // Both objects lie where they were received, one line apart: no copy each.
        let apart = second.json().as_ptr() as usize - first.json().as_ptr() as usize;
        assert_eq!(apart, a.len() + 1);
        let received = first.json().as_ptr();
        first.own_bytes();
        assert_ne!(first.json().as_ptr(), received);
        assert_eq!(
            first.json(),
            br#"{"metadata":{"name":"a","resourceVersion":"1"}}"#
        );
        assert_eq!((first.key().as_str(), first.resource_version()), ("a", "1"));
    }

    #[test]
    fn metadata_is_read_by_its_bytes_over_any_value_before_or_inside_it() {
        let object = r#"{"kind":"Pod","apiVersion":"v1","spec":{"a":[{"}":"\"{"}],"n":-1.5e3,"t":true},"metadata" : {"labels":{"x":"}"},"managedFields":[{"f":{"k":"]"}}],"name":"web-0","namespace":"prod","generation":7,"uid":"u-1","resourceVersion":"42","deletionTimestamp":null},"status":{}}"#;
        assert_eq!(read(object).unwrap(), ["prod", "web-0", "u-1", "42"]);
        // Whitespace between tokens, the last of a repeated key.
        let object = "{ \"metadata\" :\n { \"name\" : \"a\" , \"name\":\"b\" } }";
        assert_eq!(read(object).unwrap(), ["", "b", "", ""]);
        // No metadata, or an empty one: empty spans (the decode decides).
        assert_eq!(read(r#"{"kind":"X"}"#).unwrap(), ["", "", "", ""]);
        assert_eq!(read(r#"{"metadata":{}}"#).unwrap(), ["", "", "", ""]);
        assert_eq!(read("{}").unwrap(), ["", "", "", ""]);
    }

    #[test]
    fn what_it_cannot_be_sure_of_goes_to_the_full_decode() {
        for object in [
            r#"{"metadata":{"name":"a\u0062"}}"#,
            r#"{"metadata":{"n\u0061me":"a"}}"#,
            "{\"metadata\":{\"name\":\"a\tb\"}}",
            r#"{"metadata":{"name":1}}"#,
            r#"{"metadata":{"name":"a" "uid":"b"}}"#,
            r#"{"metadata":{"name":"a",}}"#,
            r#"{"metadata":[]}"#,
            r#"{"kind" "X","metadata":{}}"#,
            r#"{"kind":,"metadata":{}}"#,
            r#"{"metadata":{"name":"a""#,
            "[]",
        ] {
            assert_eq!(read(object), None, "{object}");
        }
    }
}
