//! Watch events of a protobuf stream (feature `protobuf`): a frame (`frame::LengthFrames`) holds
//! a `WatchEvent` message, its type and its object's body (`k8s\0`, the `runtime.Unknown`
//! envelope, the object's message; see `model::protobuf`).
//!
//! As on the JSON path, an object event is only skimmed when it arrives: the envelope is opened
//! (no copy: the object's message stays a slice of the receive buffer) and the four metadata
//! strings the fifo coalesces on are located; the object is decoded into its type if it survives
//! coalescing. `BOOKMARK` and `ERROR` are decoded at once.

use bytes::Bytes;

use super::event::{Bookmark, EventType, WatchEvent};
use super::raw::{RawEvent, protobuf_raw_event};
use crate::Object;
use crate::error::{Error, Result, redacted_excerpt};
use crate::frame::Frame;
use crate::model::protobuf as pb;

/// The raw event of one frame of a protobuf watch stream; [`Error::Decode`] at the frame's offset
/// for a frame that is not a well-formed event of a known type.
pub(super) fn event<T: Object>(frame: &Frame) -> Result<RawEvent<T>> {
    let fail = |message: String| Error::Decode {
        offset: frame.offset,
        excerpt: redacted_excerpt(&frame.bytes, 0, 80),
        message,
    };
    let (ty, body) = pb::watch_event(&frame.bytes)
        .map_err(|e| fail(format!("a protobuf watch event that does not decode: {e}")))?;
    let ty = match ty {
        b"ADDED" => EventType::Added,
        b"MODIFIED" => EventType::Modified,
        b"DELETED" => EventType::Deleted,
        b"BOOKMARK" => EventType::Bookmark,
        b"ERROR" => EventType::Error,
        other => {
            let other = String::from_utf8_lossy(other);
            return Err(fail(format!("a watch event of unknown type {other:?}")));
        }
    };
    let opened = pb::open(body).map_err(&fail)?;
    match ty {
        EventType::Added | EventType::Modified | EventType::Deleted => {
            if T::protobuf_decoder().is_none() {
                return Err(fail(
                    "the server sent protobuf for a type that has no protobuf decoder".into(),
                ));
            }
            let ranges = pb::metadata_ranges(&opened.object).map_err(&fail)?;
            let offset = frame.offset + position(&frame.bytes, &opened.object);
            protobuf_raw_event(ty, opened.object, offset, ranges)
                .ok_or_else(|| fail("an object too large to index".into()))
        }
        EventType::Bookmark => {
            let (resource_version, annotations) = pb::bookmark(&opened.object).map_err(&fail)?;
            Ok(RawEvent::Decoded(WatchEvent::Bookmark(Bookmark {
                resource_version,
                annotations: annotations.into(),
            })))
        }
        EventType::Error => {
            if opened.kind() != "Status" {
                return Err(fail(format!(
                    "an ERROR event whose object is a {:?}, not a Status",
                    opened.kind()
                )));
            }
            let status = pb::status(&opened.object).map_err(&fail)?;
            Ok(RawEvent::Decoded(WatchEvent::Error(status)))
        }
    }
}

/// Where `part` (a slice of `whole`, or empty) starts in `whole`.
fn position(whole: &Bytes, part: &Bytes) -> u64 {
    let (start, at) = (whole.as_ptr() as usize, part.as_ptr() as usize);
    if part.is_empty() || at < start || at > start + whole.len() {
        return 0;
    }
    (at - start) as u64
}
