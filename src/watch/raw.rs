//! Raw watch events: the object kept as its JSON, with the four metadata fields the fifo coalesces
//! on (namespace, name, uid, resourceVersion) read by a small scanner of the object's bytes.

use crate::model::Metadata;
use std::fmt;

use bytes::Bytes;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::event::{EventType, WatchEvent, decode_error, parse_json};
use crate::Object;
use crate::error::{Error, Result, redacted_excerpt};
use crate::frame::Frame;

/// A byte range of a [`RawObject`]'s JSON (start, length): names are DNS labels and versions digits,
/// so they sit in the JSON unescaped and need no copy of their own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Span(u32, u32);

/// The object of an `ADDED`, `MODIFIED` or `DELETED` event, kept as its JSON until it is needed.
///
/// Only `metadata.namespace`, `name`, `uid` and `resourceVersion` are read when the event arrives
/// (what the fifo needs to coalesce events by key); the object is decoded into its type only if it
/// survives coalescing, with [`decode`](Self::decode). The JSON is a slice of the buffer the event
/// was received in (no copy), so keeping a `RawObject` keeps that buffer: the fifo copies each one
/// it takes in, and so should any other code that holds raw objects for long.
///
/// ```
/// use informer::{internals::watch::{EventDecoder, RawEvent}, Pod};
/// let mut dec = EventDecoder::<Pod>::new();
/// dec.push(b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"ns\",\"resourceVersion\":\"7\"}}}\n");
/// let Some(RawEvent::Modified(raw)) = dec.next_raw().unwrap() else { panic!() };
/// assert_eq!((raw.key().as_str(), raw.resource_version()), ("ns/a", "7"));
/// let pod: Pod = raw.decode().unwrap();
/// assert_eq!(pod.metadata.name, "a");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct RawObject {
    /// The object as received: its JSON, or its protobuf message (the bytes inside the
    /// `runtime.Unknown` envelope) when `protobuf`.
    bytes: Bytes,
    protobuf: bool,
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
            .field("bytes", &self.bytes.len())
            .field("protobuf", &self.protobuf)
            .finish()
    }
}

impl RawObject {
    /// Copies the bytes into an allocation of its own. An event's bytes share the buffer they were
    /// received in; the fifo copies what it keeps pending, so that a pending event holds its own
    /// length and not a receive buffer, and the copy lives with the thread that frees it.
    pub(crate) fn own_bytes(&mut self) {
        self.bytes = Bytes::copy_from_slice(&self.bytes);
    }

    fn span(&self, s: Span) -> &str {
        let (start, len) = (s.0 as usize, s.1 as usize);
        // Checked as UTF-8 when the span was made (`Reader::metadata`, `metadata_ranges`): never
        // fails.
        std::str::from_utf8(&self.bytes[start..start + len]).unwrap_or_default()
    }

    /// The object as received: its JSON, or its protobuf message if
    /// [`is_protobuf`](Self::is_protobuf).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether the object came in protobuf (a watch the server answered in protobuf).
    pub fn is_protobuf(&self) -> bool {
        self.protobuf
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
    /// use informer::{internals::watch::{EventDecoder, RawEvent}, Error, Pod};
    /// let mut dec = EventDecoder::<Pod>::new();
    /// dec.push(b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n");
    /// let Some(RawEvent::Added(raw)) = dec.next_raw().unwrap() else { panic!() };
    /// assert_eq!(raw.decode_object::<Pod>().unwrap().metadata.name, "a");
    /// ```
    pub fn decode_object<T: Object>(&self) -> Result<T> {
        let obj: T = if self.protobuf {
            self.decode_protobuf()?
        } else {
            self.decode()?
        };
        let meta = obj.meta();
        if meta.namespace() != self.namespace()
            || meta.name() != self.name()
            || meta.resource_version() != self.resource_version()
        {
            return Err(Error::Decode {
                offset: self.offset,
                excerpt: redacted_excerpt(&self.bytes, 0, 80),
                message: format!(
                    "the object decodes as {}/{} at resourceVersion {:?}, but its bytes were read as \
                     {}/{} at {:?} (is `metadata` repeated?)",
                    meta.namespace(),
                    meta.name(),
                    meta.resource_version(),
                    self.namespace(),
                    self.name(),
                    self.resource_version()
                ),
            });
        }
        Ok(obj)
    }

    /// Decodes the object's JSON into its type; [`Error::Decode`] names the stream offset of the
    /// problem. An object that came in protobuf is decoded by
    /// [`decode_object`](Self::decode_object) (here it is an [`Error::Decode`]).
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        if self.protobuf {
            return Err(self.protobuf_failure(
                "the object came in protobuf: decode_object reads it, not a JSON decode".into(),
            ));
        }
        parse_json(&self.bytes).map_err(|e| decode_error(&self.bytes, self.offset, &e))
    }

    /// Decodes the object's protobuf message with its kind's decoder.
    fn decode_protobuf<T: Object>(&self) -> Result<T> {
        let Some(decode) = T::protobuf_decoder() else {
            return Err(self.protobuf_failure(
                "the object came in protobuf, and its type has no protobuf decoder".into(),
            ));
        };
        decode(&self.bytes).map_err(|message| self.protobuf_failure(message))
    }

    fn protobuf_failure(&self, message: String) -> Error {
        Error::Decode {
            offset: self.offset,
            excerpt: redacted_excerpt(&self.bytes, 0, 80),
            message,
        }
    }
}

/// A watch event whose object, if it has one, is still JSON: see
/// [`EventDecoder::next_raw`](super::EventDecoder::next_raw).
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
    /// use informer::{internals::watch::{EventDecoder, WatchEvent}, Pod};
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

impl<T: Object> RawEvent<T> {
    /// `Err` ([`Error::Decode`]) if the event's object has a namespace or a name that cannot be
    /// part of a cache key (see [`check_key_parts`]).
    pub(crate) fn check_key(&self) -> Result<()> {
        match self {
            RawEvent::Added(o) | RawEvent::Modified(o) | RawEvent::Deleted(o) => {
                check_key_parts(o.namespace(), o.name(), o.offset)
            }
            RawEvent::Decoded(
                WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o),
            ) => check_key_parts(o.meta().namespace(), o.meta().name(), 0),
            RawEvent::Decoded(WatchEvent::Bookmark(_) | WatchEvent::Error(_)) => Ok(()),
        }
    }
}

/// `Err` ([`Error::Decode`], at stream offset `offset`) if `namespace` or `name` holds a `/`.
/// The cache key is `namespace/name`, read back by splitting at the first `/`: such an object
/// would be stored under a key that reads back as another object (deletes and relist tombstones
/// would then miss it, and two objects could share a key). The apiserver never serves such
/// names (a name is one path segment), so the object is treated as one that does not decode.
pub(crate) fn check_key_parts(namespace: &str, name: &str, offset: u64) -> Result<()> {
    if !namespace.contains('/') && !name.contains('/') {
        return Ok(());
    }
    let key = format!("{namespace}/{name}");
    Err(Error::Decode {
        offset,
        excerpt: crate::error::excerpt(key.as_bytes(), 0, 80),
        message: "an object whose namespace or name holds '/' cannot have a cache key".into(),
    })
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
pub(super) fn skim(ty: EventType, object: &[u8]) -> Option<[Span; 4]> {
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
pub(super) fn raw_event<T>(
    ty: EventType,
    json: Bytes,
    offset: u64,
    spans: [Span; 4],
) -> RawEvent<T> {
    let [namespace, name, uid, resource_version] = spans;
    let raw = RawObject {
        bytes: json,
        protobuf: false,
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

/// The raw event of an object that came in protobuf: its message (a slice of the receive
/// buffer, at stream offset `offset`) and the ranges of its metadata strings in it; `None` if a
/// range does not fit a span (a message over 4 GiB).
#[cfg(feature = "protobuf")]
pub(super) fn protobuf_raw_event<T>(
    ty: EventType,
    message: Bytes,
    offset: u64,
    ranges: [std::ops::Range<usize>; 4],
) -> Option<RawEvent<T>> {
    let span = |r: &std::ops::Range<usize>| {
        Some(Span(
            u32::try_from(r.start).ok()?,
            u32::try_from(r.len()).ok()?,
        ))
    };
    let spans = [
        span(&ranges[0])?,
        span(&ranges[1])?,
        span(&ranges[2])?,
        span(&ranges[3])?,
    ];
    let mut event = raw_event(ty, message, offset, spans);
    if let RawEvent::Added(raw) | RawEvent::Modified(raw) | RawEvent::Deleted(raw) = &mut event {
        raw.protobuf = true;
    }
    Some(event)
}

/// The apiserver's own envelope, byte for byte, at the start of `bytes`:
/// `{"type":"ADDED","object":{...}}` (or `MODIFIED`, `DELETED`), the object closed and followed
/// by the envelope's `}`. Its type and the object's span; the envelope ends one byte after the
/// object. `None` for anything else (other types, other field orders, whitespace, more fields,
/// an object not complete in `bytes`), which framing and serde then read.
pub(super) fn apiserver_envelope(bytes: &[u8]) -> Option<(EventType, std::ops::Range<usize>)> {
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
pub(super) fn skim_frame<T>(frame: &Frame) -> Option<RawEvent<T>> {
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
pub(super) fn starts_an_object(bytes: &[u8]) -> bool {
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

// ---------------------------------------------------------------------------------------------------
// The event decoder: framing and decoding in one pass where the stream allows it.

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::EventDecoder;

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
        let apart = second.bytes().as_ptr() as usize - first.bytes().as_ptr() as usize;
        assert_eq!(apart, a.len() + 1);
        let received = first.bytes().as_ptr();
        first.own_bytes();
        assert_ne!(first.bytes().as_ptr(), received);
        assert_eq!(
            first.bytes(),
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
