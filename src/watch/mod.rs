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
//! * `ERROR` carries a [`Status`](crate::Status); code 410 means the watch's resourceVersion is
//!   gone.
//!
//! ```
//! use informer::{internals::watch::{decode_event, WatchEvent}, internals::frame::Frame, Pod};
//! let frame = Frame {
//!     bytes: r#"{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"a","resourceVersion":"5"}}}"#.into(),
//!     offset: 0,
//! };
//! match decode_event::<Pod>(&frame).unwrap() {
//!     WatchEvent::Added(pod) => assert_eq!(pod.metadata.resource_version, "5"),
//!     other => panic!("{other:?}"),
//! }
//! ```
//!
//! The files, each one job: `event.rs` (typed events and their envelope), `raw.rs` (events whose
//! object stays JSON until the fifo needs it), `decoder.rs` (framing and decoding in one pass),
//! `stream.rs` (a response body as a stream of events), `protobuf.rs` (the events of a protobuf
//! stream, feature `protobuf`).

mod decoder;
mod event;
#[cfg(feature = "protobuf")]
mod protobuf;
mod raw;
mod stream;

pub use decoder::EventDecoder;
pub use event::{Bookmark, INITIAL_EVENTS_END_ANNOTATION, WatchEvent, decode_event};
pub use raw::{RawEvent, RawObject};
pub use stream::WatchStream;

pub(crate) use event::{decode_error, parse_json};
pub(crate) use raw::check_key_parts;
