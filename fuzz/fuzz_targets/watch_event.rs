//! Arbitrary bytes as one watch frame, decoded as the typed and dynamic events the reflector reads
//! (`{"type":..,"object":..}`, including `ERROR` with a `Status` and `BOOKMARK`).
//!
//! Asserts: no panic; a rejected frame is an `Error::Decode` whose offset lies within the frame
//! and whose message and excerpt are printable; an accepted event's accessors work and, re-encoded,
//! it decodes to the same event (unless it holds non-integer numbers, see `has_fraction`).
#![no_main]

use bytes::Bytes;
use informer::internals::frame::Frame;
use informer::model::PartialObjectMetadata;
use informer::internals::watch::{WatchEvent, decode_event};
use informer::{DynamicObject, EndpointSlice, Error, Object, Pod, Service};
use libfuzzer_sys::fuzz_target;
use serde::Serialize;

fn check<T: Object + Serialize + std::fmt::Debug>(frame: &Frame) {
    match decode_event::<T>(frame) {
        Ok(event) => {
            let _ = event.resource_version();
            let _ = format!("{event:?}");
            // Re-encoded, the event decodes to itself.
            if let Some((kind, object)) = parts(&event).filter(|(_, o)| !has_fraction(o)) {
                let again =
                    serde_json::to_vec(&serde_json::json!({"type": kind, "object": object}))
                        .expect("a decoded object serializes");
                let frame = Frame {
                    bytes: Bytes::from(again),
                    offset: 0,
                };
                let back = decode_event::<T>(&frame).expect("a re-encoded event decodes");
                assert_eq!(parts(&back).map(|p| p.1), Some(object));
            }
        }
        Err(Error::Decode {
            offset,
            excerpt,
            message,
        }) => {
            assert!(offset <= frame.offset + frame.bytes.len() as u64);
            assert!(!excerpt.chars().any(char::is_control), "{excerpt:?}");
            assert!(!message.is_empty());
        }
        Err(other) => {
            // An in-stream ERROR event is reported as the Status it carries.
            let _ = other.to_string();
        }
    }
}

fn parts<T: Serialize>(event: &WatchEvent<T>) -> Option<(&'static str, serde_json::Value)> {
    let (kind, object) = match event {
        WatchEvent::Added(o) => ("ADDED", o),
        WatchEvent::Modified(o) => ("MODIFIED", o),
        WatchEvent::Deleted(o) => ("DELETED", o),
        _ => return None,
    };
    Some((kind, serde_json::to_value(object).ok()?))
}

/// Whether `v` holds a number that is not an integer: serde_json (without its `float_roundtrip`
/// feature) may read such a number 1 ULP off, so a re-encoded value can differ in its last digit.
fn has_fraction(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::Number(n) => n.is_f64(),
        serde_json::Value::Array(a) => a.iter().any(has_fraction),
        serde_json::Value::Object(m) => m.values().any(has_fraction),
        _ => false,
    }
}

fuzz_target!(|data: &[u8]| {
    let frame = Frame {
        bytes: Bytes::copy_from_slice(data),
        offset: 7,
    };
    check::<Pod>(&frame);
    check::<EndpointSlice>(&frame);
    check::<Service>(&frame);
    check::<DynamicObject>(&frame);
    check::<PartialObjectMetadata>(&frame);
});
