//! Arbitrary bytes as the body of a LIST answer, decoded the way the client decodes a page
//! (`ObjectList<T>`), for typed, dynamic and metadata-only objects, and as a `Status` (the body of
//! an error answer).
//!
//! Asserts: no panic; an accepted page re-encoded decodes to the same page (nothing the reflector
//! keeps is lost or changed by a round trip; pages with non-integer numbers are left out of that
//! check, see `has_fraction`); the list metadata's accessors work.
#![no_main]

use informer::model::PartialObjectMetadata;
use informer::{DynamicObject, EndpointSlice, Pod, Service, Status};
use informer::client::ObjectList;
use libfuzzer_sys::fuzz_target;
use serde::Serialize;
use serde::de::DeserializeOwned;

fn check<T: DeserializeOwned + Serialize>(data: &[u8]) {
    let Ok(page) = serde_json::from_slice::<ObjectList<T>>(data) else {
        return;
    };
    let _ = (
        &page.metadata.resource_version,
        &page.metadata.continue_token,
    );
    let first = serde_json::to_value(&page).expect("a decoded page serializes");
    if has_fraction(&first) {
        return;
    }
    let again: ObjectList<T> =
        serde_json::from_value(first.clone()).expect("a re-encoded page decodes");
    assert_eq!(serde_json::to_value(&again).unwrap(), first);
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
    check::<Pod>(data);
    check::<EndpointSlice>(data);
    check::<Service>(data);
    check::<DynamicObject>(data);
    check::<PartialObjectMetadata>(data);
    if let Ok(status) = serde_json::from_slice::<Status>(data) {
        let _ = (status.is_expired(), format!("{status:?}"));
    }
});
