//! [`EventDecoder`]: frames and decodes (typed or raw) in one pass over the bytes pushed into it.

use std::fmt;
use std::marker::PhantomData;

use super::event::{Envelope, WatchEvent, decode_event};
use super::raw::{RawEvent, apiserver_envelope, raw_event, skim, skim_frame};
use crate::Object;
use crate::error::Result;
use crate::frame::{Frame, FrameDecoder};

/// Turns received bytes into typed events: a [`FrameDecoder`] and [`decode_event`] in one, and
/// faster than the two in sequence.
///
/// Framing first and parsing second reads every byte twice. The apiserver ends each event with a
/// newline, and compact JSON has no raw newline inside a value, so a value that starts before the
/// last newline received is almost certainly complete: such a value is parsed straight from the
/// buffer, and the parser's own end of the value is the frame boundary. Everything else (the value
/// cut by the end of the received bytes, a pretty-printed or malformed value) falls back to framing
/// first. The fallback is exact, not approximate: a parse that succeeds consumed a complete, valid
/// JSON value, which is where the framer would have cut it; a parse that fails is discarded and the
/// value is framed and decoded again, so incomplete values wait for more bytes and errors carry the
/// same offsets as [`decode_event`]'s. Each value is tried at most once, so a value cut into many
/// pushes is never parsed over and over.
///
/// ```
/// use informer::{internals::watch::{EventDecoder, WatchEvent}, Pod};
///
/// let mut dec = EventDecoder::<Pod>::new();
/// dec.push(br#"{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}}
/// {"type":"DELETED","object":{"metadata":{"na"#);
/// match dec.next_event().unwrap() {
///     Some(WatchEvent::Added(pod)) => assert_eq!(pod.metadata.name, "a"),
///     other => panic!("{other:?}"),
/// }
/// assert!(dec.next_event().unwrap().is_none()); // incomplete: wait for more bytes
/// dec.push(br#"me":"a","resourceVersion":"6"}}}"#);
/// assert!(matches!(dec.next_event().unwrap(), Some(WatchEvent::Deleted(_))));
/// assert!(dec.finish().unwrap().is_none()); // clean end of stream
/// ```
///
/// A decoder made by [`protobuf`](Self::protobuf) reads a protobuf watch stream instead
/// (length-prefixed frames; feature `protobuf`), with the same methods and the same kind of
/// errors.
pub struct EventDecoder<T> {
    /// The JSON framer (idle on a protobuf stream).
    frames: FrameDecoder,
    /// A protobuf stream's framer; `None` on a JSON stream (boxed: a JSON stream pays one word).
    #[cfg(feature = "protobuf")]
    protobuf: Option<Box<crate::frame::LengthFrames>>,
    /// Stream offset just past the last newline pushed: values starting before it are parsed
    /// directly.
    newline_end: u64,
    _t: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for EventDecoder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("EventDecoder");
        #[cfg(feature = "protobuf")]
        if let Some(frames) = &self.protobuf {
            return d.field("protobuf", frames).finish();
        }
        d.field("frames", &self.frames).finish()
    }
}

impl<T: Object> Default for EventDecoder<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Object> EventDecoder<T> {
    /// A decoder with the default frame limit ([`DEFAULT_MAX_FRAME_BYTES`](crate::frame::DEFAULT_MAX_FRAME_BYTES)).
    ///
    /// ```
    /// let dec = informer::internals::watch::EventDecoder::<informer::Pod>::new();
    /// assert_eq!(dec.buffered(), 0);
    /// ```
    pub fn new() -> Self {
        Self::with_max_frame(crate::frame::DEFAULT_MAX_FRAME_BYTES)
    }

    /// A decoder whose events may be at most `max_frame` bytes of JSON each.
    ///
    /// ```
    /// use informer::{internals::watch::EventDecoder, Error, Pod};
    /// let mut dec = EventDecoder::<Pod>::with_max_frame(16);
    /// dec.push(b"{\"type\":\"ADDED\",\"object\":{}}\n");
    /// assert!(matches!(dec.next_event(), Err(Error::FrameTooLarge { limit: 16 })));
    /// ```
    pub fn with_max_frame(max_frame: usize) -> Self {
        EventDecoder {
            frames: FrameDecoder::with_max_frame(max_frame),
            #[cfg(feature = "protobuf")]
            protobuf: None,
            newline_end: 0,
            _t: PhantomData,
        }
    }

    /// A decoder of a protobuf watch stream (`application/vnd.kubernetes.protobuf;stream=watch`)
    /// that refuses events over `max_frame` bytes. Object events come raw
    /// ([`RawObject::is_protobuf`](super::RawObject::is_protobuf)) and decode with the kind's
    /// [`protobuf_decoder`](crate::Object::protobuf_decoder).
    ///
    /// ```
    /// use informer::{internals::watch::EventDecoder, Endpoints};
    /// // The first event of a real kube-apiserver 1.20 protobuf watch.
    /// let capture = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/wire/real-1.20-watch-endpoints-protobuf.http"))?;
    /// let body = &capture[capture.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4..];
    /// let first_chunk = &body[5..5 + 0x78f]; // after the chunk size line "78f\r\n"
    /// let mut dec = EventDecoder::<Endpoints>::protobuf(1 << 20);
    /// dec.push(first_chunk);
    /// let event = dec.next_raw()?.unwrap();
    /// let informer::internals::watch::RawEvent::Added(raw) = event else { panic!() };
    /// assert_eq!((raw.key().as_str(), raw.is_protobuf()), ("default/pb-2", true));
    /// assert_eq!(raw.decode_object::<Endpoints>()?.subsets[0].addresses[0].ip, "10.1.0.2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "protobuf")]
    pub fn protobuf(max_frame: usize) -> Self {
        EventDecoder {
            protobuf: Some(Box::new(crate::frame::LengthFrames::with_max_frame(
                max_frame,
            ))),
            ..Self::with_max_frame(max_frame)
        }
    }

    /// Appends received bytes. Call [`next_event`](Self::next_event) until it returns `Ok(None)`
    /// before pushing again, so that memory stays bounded.
    pub fn push(&mut self, bytes: &[u8]) {
        #[cfg(feature = "protobuf")]
        if let Some(frames) = &mut self.protobuf {
            return frames.push(bytes);
        }
        if let Some(i) = memchr::memrchr(b'\n', bytes) {
            self.newline_end = self.frames.stream_end() + i as u64 + 1;
        }
        self.frames.push(bytes);
    }

    /// Bytes held for the events being received.
    pub fn buffered(&self) -> usize {
        #[cfg(feature = "protobuf")]
        if let Some(frames) = &self.protobuf {
            return frames.buffered();
        }
        self.frames.buffered()
    }

    /// The next event, `Ok(None)` if more bytes are needed, or an error for this event (the decoder
    /// then goes on with the next one): [`Error::Decode`](crate::Error::Decode) for a value that is
    /// not a watch event of `T`, [`Error::FrameTooLarge`](crate::Error::FrameTooLarge) for one
    /// over the limit.
    pub fn next_event(&mut self) -> Result<Option<WatchEvent<T>>> {
        #[cfg(feature = "protobuf")]
        if self.protobuf.is_some() {
            return self.next_raw()?.map(RawEvent::decode).transpose();
        }
        if let Some((bytes, offset)) = self.frames.unscanned_value()
            && offset < self.newline_end
            && bytes.first() == Some(&b'{')
        {
            let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<Envelope<T>>();
            if let Some(Ok(Envelope(event))) = values.next() {
                let len = values.byte_offset();
                self.frames.skip_parsed(len)?;
                return Ok(Some(event));
            }
            // Incomplete or invalid: frame it, then decode it (again) for the event or the error.
        }
        match self.frames.next_frame()? {
            Some(frame) => decode_event(&frame).map(Some),
            None => Ok(None),
        }
    }

    /// The next event with its object left as JSON ([`RawEvent`]): the envelope and the object's
    /// metadata are read, but the rest of the object is parsed only when the caller decodes it
    /// ([`RawObject::decode`](super::RawObject::decode)). Events the fast path does not take come
    /// decoded, and errors are those of [`next_event`](Self::next_event), at the same offsets; an
    /// object whose metadata reads but whose rest is not valid JSON, or not a valid `T`, is found
    /// only when it is decoded (an event that a newer one for its key replaces is never parsed in
    /// full), at the same offset, except that a parse running out of input (`"\u"}`: a closed
    /// string to framing, an escape missing its digits to the parser) ends at the object, not the
    /// event.
    pub fn next_raw(&mut self) -> Result<Option<RawEvent<T>>> {
        #[cfg(feature = "protobuf")]
        if let Some(frames) = &mut self.protobuf {
            return match frames.next_frame()? {
                Some(frame) => super::protobuf::event(&frame).map(Some),
                None => Ok(None),
            };
        }
        // The apiserver's envelope, complete before the last newline received, is split where it
        // lies: one scan finds the object's end (faster than a parse), and the skim reads just
        // the metadata. The end is where framing would put it (the envelope around the object
        // holds no bracket or escape), so `take_parsed` keeps the offsets and the size limit.
        if let Some((bytes, offset)) = self.frames.unscanned_value()
            && offset < self.newline_end
            && let Some((ty, object)) = apiserver_envelope(bytes)
            && let Some(spans) = skim(ty, &bytes[object.clone()])
        {
            let value = self.frames.take_parsed(object.end + 1)?;
            let json = value.slice(object.start..object.end);
            return Ok(Some(raw_event(
                ty,
                json,
                offset + object.start as u64,
                spans,
            )));
        }
        match self.frames.next_frame()? {
            Some(frame) => match skim_frame(&frame) {
                Some(event) => Ok(Some(event)),
                None => decode_event(&frame).map(|e| Some(RawEvent::Decoded(e))),
            },
            None => Ok(None),
        }
    }

    /// The next value framed but not decoded (for callers that decode themselves): a JSON value,
    /// or on a protobuf stream a `WatchEvent` message.
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        #[cfg(feature = "protobuf")]
        if let Some(frames) = &mut self.protobuf {
            return frames.next_frame();
        }
        self.frames.next_frame()
    }

    /// Ends the stream for a caller of [`next_frame`](Self::next_frame): `Ok(None)` for a clean
    /// end, [`Error::UnexpectedEof`](crate::Error::UnexpectedEof) inside a frame, or a last JSON
    /// value that needed no delimiter.
    pub fn finish_frame(&mut self) -> Result<Option<Frame>> {
        #[cfg(feature = "protobuf")]
        if let Some(frames) = &mut self.protobuf {
            return frames.finish().map(|()| None);
        }
        self.frames.finish()
    }

    /// Ends the stream: `Ok(None)` for a clean end,
    /// [`Error::UnexpectedEof`](crate::Error::UnexpectedEof) for an end inside an event, or the
    /// last event if the stream ended right after a value that needed no delimiter.
    pub fn finish(&mut self) -> Result<Option<WatchEvent<T>>> {
        #[cfg(feature = "protobuf")]
        if let Some(frames) = &mut self.protobuf {
            return frames.finish().map(|()| None);
        }
        match self.frames.finish()? {
            Some(frame) => decode_event(&frame).map(Some),
            None => Ok(None),
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The stream.
