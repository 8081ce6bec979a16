//! Framing a protobuf watch body: each event is a 4-byte big-endian length, then that many bytes
//! (`application/vnd.kubernetes.protobuf;stream=watch`, Kubernetes' `LengthDelimitedFramer`).
//!
//! The length is known before the bytes arrive, so the limit is checked there: a frame longer than
//! `max_frame` is an [`Error::FrameTooLarge`] as soon as its length is read, and its bytes are
//! dropped as they arrive (never held), after which framing goes on with the next frame.
//!
//! # Invariants
//!
//! * Outside a skip, `buf[0]` is the first byte of a length (or `buf` is empty), at stream offset
//!   `offset`.
//! * While `skipping > 0`, the next `skipping` bytes of the stream belong to a frame over the
//!   limit and are dropped on arrival, so memory stays below the limit plus one pushed chunk.
//!
//! ```
//! use informer::internals::frame::LengthFrames;
//! let mut frames = LengthFrames::with_max_frame(1 << 20);
//! frames.push(&[0, 0, 0, 3, b'a', b'b']);
//! assert!(frames.next_frame().unwrap().is_none()); // incomplete: wait for more bytes
//! frames.push(&[b'c', 0, 0, 0, 0]);
//! let frame = frames.next_frame().unwrap().unwrap();
//! assert_eq!((&frame.bytes[..], frame.offset), (&b"abc"[..], 4));
//! assert_eq!(&frames.next_frame().unwrap().unwrap().bytes[..], b""); // an empty frame
//! assert!(frames.finish().is_ok()); // clean end
//! ```

use bytes::{Buf, BytesMut};

use super::Frame;
use crate::error::{Error, Result};

/// The length of a frame's length.
const HEADER: usize = 4;

/// Cuts length-prefixed frames out of the bytes pushed into it; see the module docs.
#[derive(Debug)]
pub struct LengthFrames {
    buf: BytesMut,
    /// Stream offset of `buf[0]`.
    offset: u64,
    max_frame: usize,
    /// Bytes of an oversized frame still to drop.
    skipping: u64,
}

impl LengthFrames {
    /// A framer that refuses frames longer than `max_frame` bytes (the length excluded).
    pub fn with_max_frame(max_frame: usize) -> Self {
        LengthFrames {
            buf: BytesMut::new(),
            offset: 0,
            max_frame,
            skipping: 0,
        }
    }

    /// Appends received bytes (dropping those of an oversized frame).
    pub fn push(&mut self, mut bytes: &[u8]) {
        if self.skipping > 0 {
            let n = bytes
                .len()
                .min(usize::try_from(self.skipping).unwrap_or(usize::MAX));
            bytes = &bytes[n..];
            self.skipping -= n as u64;
            self.offset += n as u64;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held, waiting for the rest of their frame.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame (its bytes share the received buffer); `Ok(None)` until one is
    /// complete; [`Error::FrameTooLarge`] for a frame over the limit, after which the next call
    /// goes on after it.
    ///
    /// ```
    /// use informer::{Error, internals::frame::LengthFrames};
    /// let mut frames = LengthFrames::with_max_frame(2);
    /// frames.push(&[0, 0, 0, 3, b'a', b'b', b'c', 0, 0, 0, 1, b'd']);
    /// assert!(matches!(frames.next_frame(), Err(Error::FrameTooLarge { limit: 2 })));
    /// assert_eq!(&frames.next_frame().unwrap().unwrap().bytes[..], b"d"); // recovered
    /// ```
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        if self.skipping > 0 || self.buf.len() < HEADER {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > self.max_frame {
            let here = (self.buf.len() - HEADER).min(len);
            self.buf.advance(HEADER + here);
            self.offset += (HEADER + here) as u64;
            self.skipping = (len - here) as u64;
            return Err(Error::FrameTooLarge {
                limit: self.max_frame,
            });
        }
        if self.buf.len() - HEADER < len {
            return Ok(None);
        }
        self.buf.advance(HEADER);
        let bytes = self.buf.split_to(len).freeze();
        let offset = self.offset + HEADER as u64;
        self.offset = offset + len as u64;
        if self.buf.is_empty() {
            // Nothing buffered: let the receive buffer go with the frames handed out (as the JSON
            // framer does), so the next push allocates what it brings.
            self.buf = BytesMut::new();
        }
        Ok(Some(Frame { bytes, offset }))
    }

    /// Ends the stream: `Ok(())` if it ended between frames, [`Error::UnexpectedEof`] inside one
    /// (its bytes are dropped).
    ///
    /// ```
    /// use informer::{Error, internals::frame::LengthFrames};
    /// let mut frames = LengthFrames::with_max_frame(1 << 20);
    /// frames.push(&[0, 0, 0, 9, b'a']);
    /// assert!(frames.next_frame().unwrap().is_none());
    /// assert!(matches!(frames.finish(), Err(Error::UnexpectedEof { buffered: 5 })));
    /// ```
    pub fn finish(&mut self) -> Result<()> {
        let buffered = self.buf.len();
        let skipping = std::mem::take(&mut self.skipping);
        self.buf.clear();
        self.offset += buffered as u64;
        if buffered == 0 && skipping == 0 {
            return Ok(());
        }
        Err(Error::UnexpectedEof { buffered })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames `payloads` and pushes the stream in pieces of every size from 1 to its length: the
    /// same frames at the same offsets come out.
    #[test]
    fn frames_come_out_whole_wherever_the_stream_is_cut() {
        let payloads: [&[u8]; 4] = [b"first", b"", b"x", &[0u8; 300]];
        let mut stream = Vec::new();
        let mut expected = Vec::new();
        for p in payloads {
            stream.extend_from_slice(&(p.len() as u32).to_be_bytes());
            expected.push((p.to_vec(), stream.len() as u64));
            stream.extend_from_slice(p);
        }
        for piece in 1..=stream.len() {
            let mut frames = LengthFrames::with_max_frame(1 << 10);
            let mut got = Vec::new();
            for chunk in stream.chunks(piece) {
                frames.push(chunk);
                while let Some(f) = frames.next_frame().unwrap() {
                    got.push((f.bytes.to_vec(), f.offset));
                }
            }
            frames.finish().unwrap();
            assert_eq!(got, expected, "pieces of {piece}");
        }
    }

    #[test]
    fn an_oversized_frame_is_dropped_as_it_arrives_and_framing_goes_on() {
        let mut stream = Vec::new();
        stream.extend_from_slice(&1000u32.to_be_bytes());
        stream.extend_from_slice(&[7u8; 1000]);
        stream.extend_from_slice(&2u32.to_be_bytes());
        stream.extend_from_slice(b"ok");
        for piece in [1, 3, 10, 999, stream.len()] {
            let mut frames = LengthFrames::with_max_frame(100);
            let (mut errors, mut got, mut most) = (0, Vec::new(), 0);
            for chunk in stream.chunks(piece) {
                frames.push(chunk);
                most = most.max(frames.buffered());
                loop {
                    match frames.next_frame() {
                        Ok(Some(f)) => got.push((f.bytes.to_vec(), f.offset)),
                        Ok(None) => break,
                        Err(Error::FrameTooLarge { limit: 100 }) => errors += 1,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            frames.finish().unwrap();
            assert_eq!(errors, 1);
            assert_eq!(got, [(b"ok".to_vec(), 1008)]);
            assert!(most <= 100 + piece.max(HEADER), "held {most} bytes");
        }
    }

    #[test]
    fn an_end_inside_a_length_or_a_skip_is_an_unexpected_eof() {
        let mut frames = LengthFrames::with_max_frame(4);
        frames.push(&[0, 0]);
        assert!(matches!(
            frames.finish(),
            Err(Error::UnexpectedEof { buffered: 2 })
        ));
        frames.push(&[0, 0, 0, 9, 1]);
        assert!(frames.next_frame().is_err());
        assert!(matches!(
            frames.finish(),
            Err(Error::UnexpectedEof { buffered: 0 })
        ));
        assert!(frames.finish().is_ok());
    }
}
