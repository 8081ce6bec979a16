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

use bytes::Bytes;
use http_body_util::BodyExt;
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
    Added(T),
    Modified(T),
    /// The object's last state, stamped with the deletion's resourceVersion (or, for an object that
    /// left the watch's selector, its previous state stamped with the change's resourceVersion).
    Deleted(T),
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
    pub resource_version: String,
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
    let mut de = serde_json::Deserializer::from_slice(&frame.bytes);
    let event = Envelope::<T>::deserialize(&mut de)
        .and_then(|e| de.end().map(|()| e))
        .map_err(|e| decode_error(&frame.bytes, frame.offset, &e))?;
    Ok(event.0)
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
// The stream.

/// A watch response body turned into typed events.
///
/// `next().await` returns `None` at a clean end of the body (the server's `timeoutSeconds`, or the
/// server closing the watch between events): the caller re-watches from the last resourceVersion.
/// An end in the middle of a frame is [`Error::UnexpectedEof`], a broken connection
/// [`Error::Transport`]; both also mean "re-watch". A frame that does not decode is [`Error::Decode`]
/// (the stream can go on, but the cache may have missed an event: relist). An `ERROR` event is
/// returned as [`WatchEvent::Error`].
pub struct WatchStream<T, B = hyper::body::Incoming> {
    body: B,
    frames: FrameDecoder,
    ended: bool,
    _t: PhantomData<fn() -> T>,
}

impl<T, B> fmt::Debug for WatchStream<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchStream")
            .field("buffered", &self.frames.buffered())
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
            frames: FrameDecoder::with_max_frame(max_frame),
            ended: false,
            _t: PhantomData,
        }
    }

    /// The next event; `None` once the body ended cleanly.
    pub async fn next(&mut self) -> Option<Result<WatchEvent<T>>> {
        self.next_frame()
            .await
            .map(|f| f.and_then(|f| decode_event(&f)))
    }

    /// The next raw frame, undecoded (for callers that decode themselves).
    pub async fn next_frame(&mut self) -> Option<Result<Frame>> {
        loop {
            match self.frames.next_frame() {
                Ok(Some(frame)) => return Some(Ok(frame)),
                Ok(None) => {}
                Err(e) => return Some(Err(e)),
            }
            if self.ended {
                return None;
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.frames.push(&data);
                    }
                }
                Some(Err(e)) => {
                    self.ended = true;
                    return Some(Err(Error::transport("watch stream broke", e)));
                }
                None => {
                    self.ended = true;
                    return self.frames.finish().transpose();
                }
            }
        }
    }
}
