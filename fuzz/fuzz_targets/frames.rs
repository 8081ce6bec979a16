//! Arbitrary bytes, cut at arbitrary points, through the frame decoder and the event decoder.
//!
//! Asserts: no panic; the frames (and decode results) of the chunked feed equal those of the one-shot
//! feed, and so do the values cut at a raw newline inside a string; the decoder never holds more
//! than the limit plus one chunk; the `EventDecoder` (which parses newline-terminated values in
//! place) yields exactly what framing then decoding yields (events, and errors by kind and
//! offset), for the one-shot and the chunked feed; and so does its raw path (what the reflector
//! reads: objects left as JSON, split from the apiserver's envelope by their bytes), once each raw
//! object is decoded as the fifo decodes it (`decode_object`, which also checks that the key and
//! resourceVersion read from the bytes are the decoded object's).
#![no_main]

use informer::internals::frame::FrameDecoder;
use informer::internals::watch::{EventDecoder, RawEvent, WatchEvent, decode_event};
use informer::{DynamicObject, Error, Pod};
use libfuzzer_sys::fuzz_target;

/// A small limit so the over-limit path is reached often.
const LIMIT: usize = 512;

#[derive(Debug, PartialEq)]
enum Out {
    Frame(Vec<u8>, u64),
    TooLarge,
    /// A value cut at a raw newline inside a string (at this offset).
    Broken(u64),
    Eof(usize),
}

/// An error by kind and position. Comparing messages would cost more than the decoding: random
/// input frames into many small values that are not events, and each error's message would be
/// formatted only to be compared (the `watch_event` target checks the messages themselves).
#[derive(Debug, PartialEq)]
enum ErrorAt {
    Decode(u64),
    /// The parser ran out of input inside a value that framing saw closed (`"\u"}` is a closed
    /// string to framing, an escape missing its digits to the parser): reported at the end of what
    /// was parsed, the event for `next_event`, the object for the raw path, one byte apart.
    DecodeAtEnd,
    TooLarge,
    Eof(usize),
}

fn error_at(e: Error) -> ErrorAt {
    match e {
        Error::Decode { message, .. } if message.starts_with("EOF while parsing") => {
            ErrorAt::DecodeAtEnd
        }
        Error::Decode { offset, .. } => ErrorAt::Decode(offset),
        Error::FrameTooLarge { .. } => ErrorAt::TooLarge,
        Error::UnexpectedEof { buffered } => ErrorAt::Eof(buffered),
        e => panic!("unexpected error {e}"),
    }
}

/// Events of `data` cut at `cuts`, errors by kind and position.
type Events = Vec<Result<WatchEvent<Pod>, ErrorAt>>;

/// Framing, then decoding each frame.
fn framed_then_decoded(data: &[u8]) -> Events {
    let mut dec = FrameDecoder::with_max_frame(LIMIT);
    dec.push(data);
    let mut out = Vec::new();
    loop {
        match dec.next_frame() {
            Ok(Some(f)) => out.push(decode_event::<Pod>(&f).map_err(error_at)),
            Ok(None) => break,
            Err(e) => out.push(Err(error_at(e))),
        }
    }
    match dec.finish() {
        Ok(Some(f)) => out.push(decode_event::<Pod>(&f).map_err(error_at)),
        Ok(None) => {}
        Err(e) => out.push(Err(error_at(e))),
    }
    out
}

/// The event decoder fed `data` cut at `cuts`, each event taken with `next`.
fn event_decoder(
    data: &[u8],
    cuts: &[usize],
    next: fn(&mut EventDecoder<Pod>) -> Result<Option<WatchEvent<Pod>>, Error>,
) -> Events {
    let mut dec = EventDecoder::<Pod>::with_max_frame(LIMIT);
    let mut out = Vec::new();
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&data.len())) {
        let chunk = &data[start..end];
        start = end;
        dec.push(chunk);
        loop {
            match next(&mut dec) {
                Ok(Some(e)) => out.push(Ok(e)),
                Ok(None) => break,
                Err(e) => out.push(Err(error_at(e))),
            }
        }
        assert!(dec.buffered() <= LIMIT + chunk.len());
    }
    match dec.finish() {
        Ok(Some(e)) => out.push(Ok(e)),
        Ok(None) => {}
        Err(e) => out.push(Err(error_at(e))),
    }
    out
}

/// The raw path, each raw object decoded as the fifo decodes it (`decode_object`, which also
/// checks that the key and resourceVersion read from the bytes are the decoded object's).
fn next_raw_decoded(dec: &mut EventDecoder<Pod>) -> Result<Option<WatchEvent<Pod>>, Error> {
    dec.next_raw()?.map(RawEvent::decode).transpose()
}

/// Frames `data` cut at `cuts`; with `decode`, also decodes each frame typed and dynamic (done
/// for one feed only: the frames of both feeds are compared).
fn run(data: &[u8], cuts: &[usize], decode: bool) -> Vec<Out> {
    let mut dec = FrameDecoder::with_max_frame(LIMIT);
    let mut out = Vec::new();
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&data.len())) {
        let chunk = &data[start..end];
        start = end;
        dec.push(chunk);
        loop {
            match dec.next_frame() {
                Ok(Some(f)) => {
                    assert!(f.bytes.len() <= LIMIT);
                    // Any frame must decode or fail cleanly, typed or dynamic.
                    if decode {
                        let typed = decode_event::<Pod>(&f);
                        let dynamic = decode_event::<DynamicObject>(&f);
                        if let (Ok(WatchEvent::Added(a)), Ok(WatchEvent::Added(b))) =
                            (&typed, &dynamic)
                        {
                            assert_eq!(a.metadata.name, b.metadata.name);
                        }
                    }
                    out.push(Out::Frame(f.bytes.to_vec(), f.offset));
                }
                Ok(None) => break,
                Err(Error::FrameTooLarge { .. }) => out.push(Out::TooLarge),
                Err(Error::Decode { offset, .. }) => out.push(Out::Broken(offset)),
                Err(e) => panic!("unexpected error {e}"),
            }
        }
        assert!(dec.buffered() <= LIMIT + chunk.len());
    }
    match dec.finish() {
        Ok(Some(f)) => out.push(Out::Frame(f.bytes.to_vec(), f.offset)),
        Ok(None) => {}
        Err(Error::UnexpectedEof { buffered }) => out.push(Out::Eof(buffered)),
        Err(e) => panic!("unexpected error {e}"),
    }
    out
}

fuzz_target!(|input: &[u8]| {
    // The first bytes choose the cut points; the rest is the stream.
    if input.len() < 2 {
        return;
    }
    let ncuts = (input[0] % 8) as usize;
    let (head, data) = input[1..].split_at(ncuts.min(input.len() - 1));
    let mut cuts: Vec<usize> = head.iter().map(|&b| (b as usize * data.len()) / 255).collect();
    cuts.sort_unstable();
    let one_shot = run(data, &[], true);
    let chunked = run(data, &cuts, false);
    // Over-limit detection may happen at a different chunk, but what is delivered must agree.
    let frames = |v: &[Out]| -> Vec<(Vec<u8>, u64)> {
        v.iter()
            .filter_map(|o| match o {
                Out::Frame(b, off) => Some((b.clone(), *off)),
                _ => None,
            })
            .collect()
    };
    assert_eq!(frames(&one_shot), frames(&chunked));
    assert_eq!(
        one_shot.iter().filter(|o| matches!(o, Out::TooLarge)).count(),
        chunked.iter().filter(|o| matches!(o, Out::TooLarge)).count()
    );
    // A string that meets a raw newline ends its value at the same place however the stream is cut.
    let broken = |v: &[Out]| -> Vec<u64> {
        v.iter()
            .filter_map(|o| match o {
                Out::Broken(at) => Some(*at),
                _ => None,
            })
            .collect()
    };
    assert_eq!(broken(&one_shot), broken(&chunked));
    // The fused decoder: the same events and errors, whole or cut.
    let reference = framed_then_decoded(data);
    assert_eq!(event_decoder(data, &[], EventDecoder::next_event), reference);
    assert_eq!(event_decoder(data, &cuts, EventDecoder::next_event), reference);
    assert_eq!(event_decoder(data, &[], next_raw_decoded), reference);
    assert_eq!(event_decoder(data, &cuts, next_raw_decoded), reference);
});
