//! Arbitrary JSON objects through [`JsonObject`], the dynamic informers' object.
//!
//! Asserts: no panic; an input that parses as a JSON object and decodes as a `JsonObject` is
//! written back (`to_json`, and through serde to a `Value`) as the same JSON value, member order
//! aside; decoding what it wrote gives the same object again; and the conversions to and from
//! `DynamicObject`, when the map can hold the object, give it back as the same value. Dropping a
//! top-level member removes exactly that member; paths reach any key, dots and backslashes
//! escaped.
#![no_main]

use informer::{DynamicObject, JsonObject};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|input: &[u8]| {
    let Ok(sent) = serde_json::from_slice::<Value>(input) else {
        return;
    };
    let Some(members) = sent.as_object() else {
        let _ = serde_json::from_slice::<JsonObject>(input);
        return;
    };
    let Ok(object) = serde_json::from_slice::<JsonObject>(input) else {
        return;
    };
    let text = object.to_json();
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), sent);
    assert_eq!(serde_json::to_value(&object).unwrap(), sent);
    let again = JsonObject::from_json(&text).unwrap();
    assert_eq!(again, object);
    assert_eq!(again.to_json(), text);
    if let Ok(dynamic) = object.to_dynamic() {
        let back = JsonObject::from_dynamic(&dynamic).unwrap();
        assert_eq!(
            serde_json::to_value(&back).unwrap(),
            serde_json::to_value(&dynamic).unwrap()
        );
        let _: Result<DynamicObject, _> = DynamicObject::try_from(&back);
    }
    // Paths read what the parsed value holds, any key written with its dots and backslashes
    // escaped.
    for (key, value) in members {
        if key != "metadata" {
            assert_eq!(object.get(&escaped(key)).as_ref(), Some(value), "{key}");
            assert_eq!(object.get_as::<Value>(&escaped(key)).unwrap().as_ref(), Some(value));
        }
    }
    if let Some(key) = members.keys().find(|k| *k != "metadata") {
        let mut edited = object.clone();
        assert!(edited.remove(&escaped(key)));
        let mut expected = members.clone();
        expected.remove(key);
        assert_eq!(serde_json::to_value(&edited).unwrap(), Value::Object(expected));
    }
});

/// A key as one segment of a `JsonObject` path.
fn escaped(key: &str) -> String {
    key.replace('\\', "\\\\").replace('.', "\\.")
}
