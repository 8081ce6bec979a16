//! Arbitrary bytes as a protobuf watch stream (4-byte lengths, `WatchEvent` messages, `k8s\0` and
//! the `runtime.Unknown` envelope, each kind's message), and as one object's message for each
//! typed kind's decoder. The first byte picks the size of the pieces the stream is pushed in.
//!
//! Asserts: no panic, no hang; every failure is a typed error (`Decode` with an offset inside
//! the stream and a printable excerpt, `FrameTooLarge`, `UnexpectedEof`); an object event's key
//! and resourceVersion, read from its bytes on arrival, are those its decode gives.
#![no_main]

use informer::internals::watch::{EventDecoder, RawEvent};
use informer::model::Metadata;
use informer::{
    ConfigMap, EndpointSlice, Endpoints, Error, Namespace, Node, Object, Pod, Service,
};
use libfuzzer_sys::fuzz_target;

/// The limit on one frame: small, so that the fuzzer reaches it.
const MAX_FRAME: usize = 4096;

fn stream<T: Object + std::fmt::Debug>(data: &[u8], piece: usize) {
    let mut events = EventDecoder::<T>::protobuf(MAX_FRAME);
    let mut check = |events: &mut EventDecoder<T>| loop {
        match events.next_raw() {
            Ok(Some(RawEvent::Added(raw) | RawEvent::Modified(raw) | RawEvent::Deleted(raw))) => {
                assert!(raw.is_protobuf());
                match raw.decode_object::<T>() {
                    Ok(object) => {
                        assert_eq!(object.meta().key(), raw.key());
                        assert_eq!(object.meta().resource_version(), raw.resource_version());
                    }
                    Err(e) => typed(&e, data.len()),
                }
            }
            Ok(Some(RawEvent::Decoded(event))) => {
                let _ = format!("{event:?}");
            }
            Ok(None) => return,
            Err(e) => typed(&e, data.len()),
        }
    };
    for chunk in data.chunks(piece.max(1)) {
        events.push(chunk);
        check(&mut events);
    }
    if let Err(e) = events.finish() {
        typed(&e, data.len());
    }
}

fn typed(e: &Error, len: usize) {
    match e {
        Error::Decode {
            offset,
            excerpt,
            message,
        } => {
            assert!(*offset <= len as u64, "offset {offset} past {len}");
            assert!(!excerpt.chars().any(char::is_control), "{excerpt:?}");
            assert!(!message.is_empty());
        }
        Error::FrameTooLarge { limit } => assert_eq!(*limit, MAX_FRAME),
        Error::UnexpectedEof { .. } => {}
        other => panic!("an untyped failure: {other}"),
    }
}

fn message<T: Object + std::fmt::Debug>(data: &[u8]) {
    let decode = T::protobuf_decoder().expect("a built-in kind");
    if let Ok(object) = decode(data) {
        let _ = format!("{object:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&piece, data)) = data.split_first() else {
        return;
    };
    let piece = usize::from(piece);
    stream::<Endpoints>(data, piece);
    stream::<Pod>(data, piece);
    stream::<EndpointSlice>(data, piece);
    message::<Endpoints>(data);
    message::<Pod>(data);
    message::<EndpointSlice>(data);
    message::<Service>(data);
    message::<ConfigMap>(data);
    message::<Namespace>(data);
    message::<Node>(data);
});
