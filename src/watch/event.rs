//! Typed watch events: the envelope `{"type":T,"object":{...}}` read with a streaming visitor, so
//! the object is decoded straight into its type once `type` is known (see the module docs of
//! [`crate::watch`]).

use crate::model::Metadata;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use crate::error::{Error, Result, redacted_excerpt};
use crate::frame::Frame;
use crate::model::meta::null_as_default;
use crate::{Object, Status};

/// The annotation on the BOOKMARK that ends the initial events of a streaming list.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// One event of a watch.
///
/// ```
/// use informer::client::WatchEvent;
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
                Some(o.meta().resource_version())
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
    /// let mut b = informer::client::Bookmark::default();
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
pub(super) fn not_an_object(bytes: &[u8], base: u64) -> Option<Error> {
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
        excerpt: redacted_excerpt(bytes, at, 80),
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
        excerpt: redacted_excerpt(bytes, at.saturating_sub(40), 80),
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
pub(super) enum EventType {
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

pub(super) struct Envelope<T>(pub(super) WatchEvent<T>);

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
