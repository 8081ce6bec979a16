//! The frame decoder and event decoder on real apiserver bytes, cut in every possible way.

use crate::support::raw_server::{capture, fixture};
use informer::internals::frame::FrameDecoder;
use informer::internals::watch::{EventDecoder, RawEvent, WatchEvent, decode_event};
use informer::{DynamicObject, EndpointSlice, Endpoints, Error, Pod};

const WATCH_CAPTURES: &[&str] = &[
    "wire/real-1.20-watch-endpoints-from-list-rv.http",
    "wire/real-1.20-watch-endpoints-replay-split-chunks.http",
    "wire/real-1.20-watch-endpoints-labelselector-no-rv.http",
    "wire/real-1.20-watch-endpoints-fieldselector-all-ns.http",
    "wire/real-1.20-watch-endpoints-rv0-initial-state.http",
    "wire/real-1.20-watch-endpoints-rv-too-old-410.http",
    "wire/real-1.20-watch-endpoints-rv-in-future-empty.http",
];

const EVENT_LINES: &[&str] = &[
    "wire/real-1.20-watch-events.jsonl",
    "wire/real-1.20-watch-events-labelselector.jsonl",
    "wire/public-endpoints-watch-gke-2015.jsonl",
    "wire/public-endpointslice-watch-added-tke-2023.jsonl",
];

/// Frames of `chunks` pushed one after another; panics on any error.
fn frames_of(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut dec = FrameDecoder::new();
    let mut out = Vec::new();
    for c in chunks {
        dec.push(c);
        while let Some(f) = dec.next_frame().unwrap() {
            out.push(f.bytes.to_vec());
        }
    }
    if let Some(f) = dec.finish().unwrap() {
        out.push(f.bytes.to_vec());
    }
    out
}

fn all_streams() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = WATCH_CAPTURES
        .iter()
        .map(|n| (n.to_string(), capture(n).body))
        .collect();
    v.extend(EVENT_LINES.iter().map(|n| (n.to_string(), fixture(n))));
    v
}

#[test]
fn every_cut_of_every_capture_gives_the_same_frames() {
    for (name, body) in all_streams() {
        let whole = frames_of(&[&body]);
        let lines = body
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .count();
        assert_eq!(
            whole.len(),
            lines,
            "{name}: one frame per line in compact output"
        );
        for cut in 0..=body.len() {
            assert_eq!(
                frames_of(&[&body[..cut], &body[cut..]]),
                whole,
                "{name} cut at {cut}"
            );
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(frames_of(&bytes), whole, "{name} in 1-byte chunks");
    }
}

#[test]
fn the_servers_own_chunking_gives_the_same_frames() {
    // The replay capture has 2 KiB chunks that cut JSON mid-token, several events per chunk.
    for name in WATCH_CAPTURES {
        let c = capture(name);
        let chunks: Vec<&[u8]> = c.chunks.iter().map(Vec::as_slice).collect();
        assert_eq!(frames_of(&chunks), frames_of(&[&c.body]), "{name}");
    }
}

#[test]
fn separators_do_not_matter() {
    let body = fixture("wire/real-1.20-watch-events.jsonl");
    let reference = frames_of(&[&body]);
    let lines: Vec<&[u8]> = body
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    for sep in [&b""[..], b"\r\n", b" ", b"\n\n\t ", b"\r\n\r\n"] {
        let mut joined = b"  \r\n\t".to_vec(); // leading whitespace
        for l in &lines {
            joined.extend_from_slice(l);
            joined.extend_from_slice(sep);
        }
        assert_eq!(frames_of(&[&joined]), reference, "separator {sep:?}");
        // every cut of the no-newline variant too
        for cut in (0..joined.len()).step_by(7) {
            assert_eq!(frames_of(&[&joined[..cut], &joined[cut..]]), reference);
        }
    }
}

#[test]
fn pretty_printed_status_is_one_frame() {
    let pretty = b"{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \"message\": \"too old resource version: 1 (90)\",\n  \"reason\": \"Expired\",\n  \"code\": 410\n}\n";
    let mut event = b"{\"type\":\"ERROR\",\n\"object\": ".to_vec();
    event.extend_from_slice(pretty);
    event.extend_from_slice(b"}\n");
    let frames = frames_of(&[&event]);
    assert_eq!(frames.len(), 1);
    let f = informer::internals::frame::Frame {
        bytes: frames[0].clone().into(),
        offset: 0,
    };
    match decode_event::<Endpoints>(&f).unwrap() {
        WatchEvent::Error(s) => {
            assert!(s.is_expired());
            assert_eq!(s.message, "too old resource version: 1 (90)");
        }
        other => panic!("{other:?}"),
    }
}

fn decode_all<T: informer::Object>(body: &[u8]) -> Vec<WatchEvent<T>> {
    let mut dec = FrameDecoder::new();
    dec.push(body);
    let mut out = Vec::new();
    while let Some(f) = dec.next_frame().unwrap() {
        out.push(decode_event::<T>(&f).unwrap_or_else(|e| panic!("{e}")));
    }
    out
}

#[test]
fn real_events_decode_typed_dynamic_and_metadata_only() {
    let endpoints = decode_all::<Endpoints>(&capture(WATCH_CAPTURES[0]).body);
    let kinds: Vec<&str> = endpoints
        .iter()
        .map(|e| match e {
            WatchEvent::Added(_) => "ADDED",
            WatchEvent::Modified(_) => "MODIFIED",
            WatchEvent::Deleted(_) => "DELETED",
            WatchEvent::Bookmark(_) => "BOOKMARK",
            WatchEvent::Error(_) => "ERROR",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED", "BOOKMARK"
        ]
    );
    let rvs: Vec<&str> = endpoints
        .iter()
        .filter_map(|e| e.resource_version())
        .collect();
    assert_eq!(
        rvs,
        ["80", "81", "82", "83", "84", "84"],
        "DELETED carries the deletion RV"
    );

    // The same bytes as dynamic objects keep every field.
    let dynamic = decode_all::<DynamicObject>(&capture(WATCH_CAPTURES[0]).body);
    match &dynamic[0] {
        WatchEvent::Added(o) => {
            assert!(o.data.contains_key("subsets"));
            assert!(o.metadata.managed_fields.is_some());
        }
        other => panic!("{other:?}"),
    }
    let meta_only = decode_all::<informer::PartialObjectMetadata>(&capture(WATCH_CAPTURES[0]).body);
    assert_eq!(meta_only.len(), 6);

    // Pods, including the bookmark with a zero-valued spec ("containers":null).
    let pods: Vec<WatchEvent<Pod>> = fixture("wire/real-1.20-watch-events.jsonl")
        .split(|&b| b == b'\n')
        .filter(|l| l.windows(11).any(|w| w == b"\"kind\":\"Pod"))
        .flat_map(decode_all::<Pod>)
        .collect();
    assert!(pods.iter().any(|e| matches!(e, WatchEvent::Bookmark(_))));
    assert!(pods.iter().any(|e| matches!(e, WatchEvent::Deleted(_))));

    // The v1 EndpointSlice from a public cluster.
    let slices = decode_all::<EndpointSlice>(&fixture(
        "wire/public-endpointslice-watch-added-tke-2023.jsonl",
    ));
    match &slices[0] {
        WatchEvent::Added(s) => {
            assert_eq!(s.endpoints[0].zone.as_deref(), Some("540001"));
            assert_eq!(s.endpoints[0].conditions.serving, Some(true));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_expired_error_event_and_the_etcd2_error_without_code() {
    let events = decode_all::<Endpoints>(
        &capture("wire/real-1.20-watch-endpoints-rv-too-old-410.http").body,
    );
    match &events[..] {
        [WatchEvent::Error(s)] => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
            assert!(s.is_expired());
        }
        other => panic!("{other:?}"),
    }
    let old = decode_all::<Endpoints>(&fixture("wire/public-endpoints-watch-gke-2015.jsonl"));
    match old.last().unwrap() {
        WatchEvent::Error(s) => {
            assert_eq!(s.code, 0);
            assert!(s.message.contains("outdated"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn object_before_type_decodes_the_same() {
    let f = informer::internals::frame::Frame {
        bytes: r#"{"object":{"metadata":{"name":"a","resourceVersion":"9"}},"type":"MODIFIED","extra":[1,{"x":2}]}"#.into(),
        offset: 0,
    };
    match decode_event::<Pod>(&f).unwrap() {
        WatchEvent::Modified(p) => assert_eq!(p.metadata.resource_version, "9"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bad_frames_give_typed_errors_with_offsets_and_the_stream_goes_on() {
    let body = b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n<html>502</html>\n{\"type\":\"NOPE\",\"object\":{}}\n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":1}}}\n[1]\n{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n";
    let mut dec = FrameDecoder::new();
    dec.push(body);
    let mut results = Vec::new();
    while let Some(f) = dec.next_frame().unwrap() {
        results.push(decode_event::<Pod>(&f));
    }
    assert!(dec.finish().unwrap().is_none());
    assert!(matches!(results[0], Ok(WatchEvent::Added(_))));
    match &results[1] {
        Err(Error::Decode {
            offset, excerpt, ..
        }) => {
            assert_eq!(*offset, 52, "offset of the garbage in the stream");
            assert!(excerpt.contains("html"), "{excerpt}");
        }
        other => panic!("{other:?}"),
    }
    let msg = results[2].as_ref().unwrap_err().to_string();
    assert!(
        msg.contains("unknown variant") && msg.contains("NOPE"),
        "{msg}"
    );
    assert!(
        matches!(results[3], Err(Error::Decode { .. })),
        "wrong field type"
    );
    match &results[4] {
        Err(Error::Decode {
            offset, message, ..
        }) => {
            let at = body.windows(4).position(|w| w == b"\n[1]").unwrap() as u64 + 1;
            assert_eq!(*offset, at, "offset of the array in the stream");
            assert!(message.contains("found an array"), "{message}");
        }
        other => panic!("not an object: {other:?}"),
    }
    assert!(matches!(
        results.last().unwrap(),
        Ok(WatchEvent::Deleted(_))
    ));
}

#[test]
fn truncated_stream_is_unexpected_eof_at_every_cut() {
    let body = capture(WATCH_CAPTURES[0]).body;
    // Where each complete frame ends: a cut there (plus any whitespace) is a clean end.
    let mut dec = FrameDecoder::new();
    dec.push(&body);
    let mut ends = vec![0];
    while let Some(f) = dec.next_frame().unwrap() {
        ends.push(f.offset as usize + f.bytes.len());
    }
    for cut in 0..body.len() {
        let mut dec = FrameDecoder::new();
        dec.push(&body[..cut]);
        while dec.next_frame().unwrap().is_some() {}
        let trimmed = body[..cut]
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        let at_boundary = ends.contains(&trimmed);
        match dec.finish() {
            Ok(None) => assert!(at_boundary, "clean end claimed at {cut}"),
            Err(Error::UnexpectedEof { buffered }) => {
                assert!(!at_boundary && buffered > 0, "cut {cut}")
            }
            other => panic!("cut {cut}: {other:?}"),
        }
    }
}

#[test]
fn frame_over_the_limit_is_skipped_and_memory_stays_bounded() {
    // a 17 MiB event, then a normal one (client-go T10)
    let mut big =
        b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"big\"},\"data\":{\"k\":\""
            .to_vec();
    big.extend(std::iter::repeat_n(b'x', 17 << 20));
    big.extend_from_slice(
        b"\"}}}\n{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"next\"}}}\n",
    );
    let mut dec = FrameDecoder::new();
    let mut errors = 0;
    let mut events = Vec::new();
    let mut peak = 0;
    for chunk in big.chunks(64 * 1024) {
        dec.push(chunk);
        loop {
            match dec.next_frame() {
                Ok(Some(f)) => events.push(decode_event::<DynamicObject>(&f).unwrap()),
                Ok(None) => break,
                Err(Error::FrameTooLarge { limit }) => {
                    assert_eq!(limit, 16 << 20);
                    errors += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        peak = peak.max(dec.buffered());
    }
    assert_eq!(errors, 1);
    assert!(peak <= (16 << 20) + 64 * 1024, "peak buffered {peak}");
    match &events[..] {
        [WatchEvent::Deleted(o)] => assert_eq!(o.metadata.name, "next"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn large_realistic_objects_decode() {
    let slice: EndpointSlice =
        serde_json::from_slice(&fixture("endpointslice-100-endpoints.json")).unwrap();
    assert_eq!(slice.endpoints.len(), 100);
    let pod: Pod = serde_json::from_slice(&fixture("pod-managedfields.json")).unwrap();
    let entries: Vec<serde_json::Value> = pod.metadata.managed_fields.unwrap().parse().unwrap();
    assert_eq!(entries.len(), 2);
}

/// How a test takes the next event out of an [`EventDecoder`].
type Next<T> = fn(&mut EventDecoder<T>) -> Result<Option<WatchEvent<T>>, Error>;

/// Everything an [`EventDecoder`] yields for `chunks` pushed in turn, each event taken with
/// `next`, errors as `show` renders them.
fn events_with<T: informer::Object>(
    chunks: &[&[u8]],
    limit: usize,
    next: Next<T>,
    show: fn(&Error) -> String,
) -> Vec<Result<WatchEvent<T>, String>> {
    let mut dec = EventDecoder::<T>::with_max_frame(limit);
    let mut out = Vec::new();
    for c in chunks {
        dec.push(c);
        loop {
            match next(&mut dec) {
                Ok(Some(e)) => out.push(Ok(e)),
                Ok(None) => break,
                Err(e) => out.push(Err(show(&e))),
            }
        }
    }
    match dec.finish() {
        Ok(Some(e)) => out.push(Ok(e)),
        Ok(None) => {}
        Err(e) => out.push(Err(show(&e))),
    }
    out
}

/// [`events_with`] `next_event`, errors as their messages.
fn events_of<T: informer::Object>(
    chunks: &[&[u8]],
    limit: usize,
) -> Vec<Result<WatchEvent<T>, String>> {
    events_with(chunks, limit, EventDecoder::next_event, Error::to_string)
}

/// The same through the two steps the event decoder fuses: frame, then decode each frame;
/// errors as `show` renders them.
fn framed_then_decoded_with<T: informer::Object>(
    body: &[u8],
    limit: usize,
    show: fn(&Error) -> String,
) -> Vec<Result<WatchEvent<T>, String>> {
    let mut dec = FrameDecoder::with_max_frame(limit);
    dec.push(body);
    let mut out = Vec::new();
    loop {
        match dec.next_frame() {
            Ok(Some(f)) => out.push(decode_event::<T>(&f).map_err(|e| show(&e))),
            Ok(None) => break,
            Err(e) => out.push(Err(show(&e))),
        }
    }
    match dec.finish() {
        Ok(Some(f)) => out.push(decode_event::<T>(&f).map_err(|e| show(&e))),
        Ok(None) => {}
        Err(e) => out.push(Err(show(&e))),
    }
    out
}

/// [`framed_then_decoded_with`] errors as their messages.
fn framed_then_decoded<T: informer::Object>(
    body: &[u8],
    limit: usize,
) -> Vec<Result<WatchEvent<T>, String>> {
    framed_then_decoded_with(body, limit, Error::to_string)
}

#[test]
fn the_event_decoder_equals_framing_then_decoding_at_every_cut() {
    for (name, body) in all_streams() {
        let reference = framed_then_decoded::<DynamicObject>(&body, 1 << 20);
        assert!(reference.iter().all(Result::is_ok), "{name}");
        for cut in 0..=body.len() {
            assert_eq!(
                events_of::<DynamicObject>(&[&body[..cut], &body[cut..]], 1 << 20),
                reference,
                "{name} cut at {cut}"
            );
        }
        let bytes: Vec<&[u8]> = body.chunks(1).collect();
        assert_eq!(
            events_of(&bytes, 1 << 20),
            reference,
            "{name} in 1-byte chunks"
        );
    }
}

#[test]
fn the_event_decoder_reports_the_same_errors_at_the_same_offsets() {
    // Garbage, a wrong type, an unknown event type, a pretty-printed event (newlines inside the
    // value), an event over the limit, a bare scalar, and an event cut by the end of the stream.
    let body = b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"}}}\n<html>502</html>\n{\"type\":\"NOPE\",\"object\":{}}\n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":1}}}\n{\n \"type\": \"MODIFIED\",\n \"object\": {\"metadata\": {\"name\": \"p\"}}\n}\n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"way-too-long-for-the-limit-of-this-test\"}}}\n[1]\n7\n{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n{\"type\":\"ADDED\",\"obj";
    let reference = framed_then_decoded::<Pod>(body, 80);
    let errors = reference.iter().filter(|r| r.is_err()).count();
    assert_eq!(errors, 7, "{reference:#?}");
    assert!(matches!(reference[4], Ok(WatchEvent::Modified(_))));
    for cut in 0..=body.len() {
        assert_eq!(
            events_of::<Pod>(&[&body[..cut], &body[cut..]], 80),
            reference,
            "cut at {cut}"
        );
    }
}

/// A decode error as its kind and stream offset (messages differ: serde counts columns from the
/// start of what it parses, the event or the object), any other error as its message. The parser
/// running out of input inside a value that framing saw closed (`"\u"}`: a closed string to
/// framing, an escape missing its digits to the parser) is reported at the end of what was parsed,
/// the event or the object, one byte apart: such errors compare by kind alone.
fn at(e: &Error) -> String {
    match e {
        Error::Decode { message, .. } if message.starts_with("EOF while parsing") => {
            "decode error: input ends inside a value".into()
        }
        Error::Decode { offset, .. } => format!("decode error at {offset}"),
        e => e.to_string(),
    }
}

/// What the reflector sees: [`EventDecoder::next_raw`], each raw object then decoded as the fifo
/// decodes it ([`RawEvent::decode`]).
fn next_raw_decoded<T: informer::Object>(
    dec: &mut EventDecoder<T>,
) -> Result<Option<WatchEvent<T>>, Error> {
    dec.next_raw()?.map(RawEvent::decode).transpose()
}

#[test]
fn the_raw_path_equals_framing_then_decoding_at_every_cut() {
    // Real streams; then the apiserver's envelope around objects malformed after their metadata
    // (found when decoded, at the same offset), an envelope with a field after the object (split
    // by serde, not by its bytes), a brace inside a string, and error cases as in the test above.
    let mut bodies: Vec<(String, Vec<u8>, usize)> = all_streams()
        .into_iter()
        .map(|(name, body)| (name, body, 1 << 20))
        .collect();
    bodies.push((
        "malformed after metadata, more fields, errors".into(),
        b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"},\"data\":{\"x\":tru}}}\n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"b\"}},\"extra\":{}}\n{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"c\"},\"data\":{\"y\":\"}\\\"\"}}}\n<html>502</html>\n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":1}}}\n{\n \"type\": \"MODIFIED\",\n \"object\": {\"metadata\": {\"name\": \"p\"}}\n}\n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"way-too-long-for-the-limit-of-this-test\"},\"data\":{}}}\n{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"d\"}}}\n{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"e\"},\"t\":\"\\u\"}}\n{\"type\":\"ADDED\",\"obj".to_vec(),
        90,
    ));
    for (name, body, limit) in bodies {
        let reference = framed_then_decoded_with::<DynamicObject>(&body, limit, at);
        for cut in 0..=body.len() {
            assert_eq!(
                events_with::<DynamicObject>(
                    &[&body[..cut], &body[cut..]],
                    limit,
                    next_raw_decoded,
                    at
                ),
                reference,
                "{name} cut at {cut}"
            );
        }
    }
}

#[test]
fn an_object_malformed_after_its_metadata_is_found_when_decoded() {
    // The raw path reads the envelope by its bytes and the metadata by a parse; the rest of the
    // object is parsed only when decoded, so a newer event for the key can save that parse.
    let line = b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"},\"data\":{\"x\":tru}}}\n";
    let mut dec = EventDecoder::<DynamicObject>::new();
    dec.push(line);
    let Some(RawEvent::Modified(raw)) = dec.next_raw().unwrap() else {
        panic!("the raw path takes the apiserver's envelope");
    };
    assert_eq!((raw.name(), raw.resource_version()), ("a", "2"));
    let e = raw.decode::<DynamicObject>().unwrap_err();
    let tru = line.windows(3).position(|w| w == b"tru").unwrap() as u64;
    assert!(
        matches!(e, Error::Decode { offset, .. } if (tru..tru + 5).contains(&offset)),
        "{e:?}"
    );
}

/// A type whose decode takes the last of a repeated key (as `serde_json::Value` does), unlike the
/// crate's derived types, which reject a repeated field.
#[derive(Debug)]
struct LastWins(informer::ObjectMeta);

impl<'de> serde::Deserialize<'de> for LastWins {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        serde_json::from_value(v["metadata"].clone())
            .map(LastWins)
            .map_err(serde::de::Error::custom)
    }
}

impl informer::Object for LastWins {
    type Meta = informer::ObjectMeta;
    fn meta(&self) -> &informer::ObjectMeta {
        &self.0
    }
    fn meta_mut(&mut self) -> &mut informer::ObjectMeta {
        &mut self.0
    }
}

#[test]
fn an_object_that_decodes_to_another_key_than_was_read_is_a_decode_error() {
    // The raw path reads the first `metadata`; a type that keeps the last would be stored under
    // a key the fifo never coalesced on.
    let line = b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"},\"metadata\":{\"name\":\"b\",\"resourceVersion\":\"1\"}}}\n";
    let mut dec = EventDecoder::<LastWins>::new();
    dec.push(line);
    let Some(RawEvent::Added(raw)) = dec.next_raw().unwrap() else {
        panic!("the raw path takes the apiserver's envelope");
    };
    assert_eq!(raw.name(), "a");
    assert_eq!(raw.decode::<LastWins>().unwrap().0.name, "b");
    let e = raw.decode_object::<LastWins>().unwrap_err();
    assert!(
        matches!(&e, Error::Decode { message, .. } if message.contains("repeated")),
        "{e:?}"
    );
    // The crate's own types reject the repeated field outright.
    assert!(raw.decode_object::<Pod>().is_err());
}
