//! Framing a watch response body into JSON values.
//!
//! The apiserver writes one compact JSON object per event, followed by `\n`, into a chunked (HTTP/1.1)
//! or DATA-framed (HTTP/2) body. Neither the newline nor the HTTP chunking is a frame boundary a client
//! may rely on: chunks cut values anywhere (mid-token, as real 1.20 servers do every 2 KiB), several
//! values can share a chunk, and other encoders pretty-print over many lines. client-go frames by JSON
//! value (`json.Decoder`), and so do we.
//!
//! [`FrameDecoder`] is the byte-level state machine. The caller [`push`](FrameDecoder::push)es bytes as
//! they arrive and calls [`next_frame`](FrameDecoder::next_frame) until it returns `Ok(None)`, which
//! means *incomplete*, not an error: more bytes are needed. At the end of the body the caller calls
//! [`finish`](FrameDecoder::finish), which tells a clean end (nothing but whitespace left) from an end in
//! the middle of a value ([`Error::UnexpectedEof`]).
//!
//! # How a value is delimited
//!
//! Only a few bytes matter for finding where a value ends; the scanner classifies 64 bytes at a time
//! into bit masks of them (the `block` module) and follows only those:
//!
//! * between values, whitespace is skipped and the first byte decides the kind of value;
//! * in an object (array), only `{` and `}` (`[` and `]`) and `"` count outside strings: the value ends
//!   when the depth of its own bracket returns to zero. Brackets of the other kind cannot unbalance a
//!   well-formed value, and a malformed one still ends somewhere and then fails to parse, which is the
//!   parser's job to report;
//! * in a string, only `"` and `\` count (`\` makes the next byte inert), and a raw newline: JSON
//!   forbids raw control characters in strings and the apiserver ends every event with a newline,
//!   so a string still open at the end of its line will never close. The value ends there, as a
//!   decode error ([`Error::Decode`]) of that value alone, and framing goes on after the newline:
//!   the lines behind it are not swallowed while the framer waits for a closing quote. (Other raw
//!   control characters do not affect framing; the parser rejects the value that holds them.)
//! * a scalar (number, `true`, `null`, or garbage such as an HTML page) ends at whitespace or at a
//!   structural byte.
//!
//! # Invariants
//!
//! * `buf[..scanned]` has been scanned and `state` describes the position `scanned`; bytes are never
//!   scanned twice.
//! * Outside discard mode, `buf[0]` is the first byte of the current value (or `buf` is empty).
//! * In discard mode the bytes of the oversized value are dropped as soon as they are scanned, so memory
//!   stays below the limit plus one pushed chunk.
//!
//! # Example
//!
//! ```
//! use informer::internals::frame::FrameDecoder;
//!
//! let mut dec = FrameDecoder::new();
//! dec.push(b"{\"type\":\"ADDED\"}\n{\"ty");
//! assert_eq!(&dec.next_frame().unwrap().unwrap().bytes[..], b"{\"type\":\"ADDED\"}");
//! assert!(dec.next_frame().unwrap().is_none()); // incomplete: wait for more bytes
//! dec.push(b"pe\":\"DELETED\"}\n");
//! assert_eq!(&dec.next_frame().unwrap().unwrap().bytes[..], b"{\"type\":\"DELETED\"}");
//! assert!(dec.finish().unwrap().is_none()); // clean end of stream
//! ```

mod block;
mod length_prefixed;

pub use length_prefixed::LengthFrames;

use bytes::{Buf, Bytes, BytesMut};

use crate::error::{Error, Result, redacted_excerpt};

/// The default limit on one frame: 16 MiB, as client-go's streaming decoder (X14).
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 << 20;

/// One complete JSON value cut out of the stream, sharing the received buffer (no copy).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The value's bytes, without surrounding whitespace.
    pub bytes: Bytes,
    /// Offset of the first byte from the start of the stream (for error messages).
    pub offset: u64,
}

/// What kind of value is being scanned; decided by its first byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `{...}` or `[...]`: `open`/`close` are the bracket bytes that count.
    Container { open: u8, close: u8 },
    /// A top-level `"..."`.
    String,
    /// A number, literal or garbage: ends at whitespace or a structural byte.
    Scalar,
}

/// The scanner's position in the grammar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Between values: skipping whitespace.
    Between,
    /// Inside a value.
    Value {
        kind: Kind,
        /// Open brackets of the container's kind (0 for strings and scalars).
        depth: u32,
        /// Inside a string literal (at any depth).
        in_string: bool,
        /// The previous byte was a `\` inside a string, so the next byte is inert.
        escaped: bool,
    },
}

/// Incremental JSON-value framer for watch streams. See the [module docs](self).
#[derive(Debug)]
pub struct FrameDecoder {
    buf: BytesMut,
    scanned: usize,
    state: State,
    max_frame: usize,
    /// Stream offset of `buf[0]`.
    offset: u64,
    /// Dropping the rest of a value that exceeded `max_frame`.
    discarding: bool,
    /// Set by `scan`: the value met a raw newline inside a string at this index of `buf`, and ends
    /// there, malformed.
    raw_newline: Option<usize>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// A decoder with the default 16 MiB frame limit.
    pub fn new() -> Self {
        Self::with_max_frame(DEFAULT_MAX_FRAME_BYTES)
    }

    /// A decoder with a given frame limit in bytes.
    ///
    /// ```
    /// use informer::{Error, internals::frame::FrameDecoder};
    /// let mut dec = FrameDecoder::with_max_frame(8);
    /// dec.push(b"{\"a\":\"0123456789\"} {}");
    /// assert!(matches!(dec.next_frame(), Err(Error::FrameTooLarge { limit: 8 })));
    /// assert_eq!(&dec.next_frame().unwrap().unwrap().bytes[..], b"{}"); // recovered
    /// ```
    pub fn with_max_frame(max_frame: usize) -> Self {
        FrameDecoder {
            buf: BytesMut::new(),
            scanned: 0,
            state: State::Between,
            max_frame: max_frame.max(1),
            offset: 0,
            discarding: false,
            raw_newline: None,
        }
    }

    /// Appends received bytes. Call [`next_frame`](Self::next_frame) until it returns `Ok(None)`
    /// before pushing again, so that memory stays bounded.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held for the value being received.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete value, `Ok(None)` if more bytes are needed, or an error for a value over the
    /// limit or a value whose string meets a raw newline (the decoder then skips that value and
    /// carries on).
    ///
    /// ```
    /// use informer::{Error, internals::frame::FrameDecoder};
    /// let mut dec = FrameDecoder::new();
    /// dec.push(b"{\"name\":\"never closes}\n{\"ok\":1}\n");
    /// assert!(matches!(dec.next_frame(), Err(Error::Decode { offset: 22, .. })));
    /// assert_eq!(&dec.next_frame().unwrap().unwrap().bytes[..], b"{\"ok\":1}");
    /// ```
    pub fn next_frame(&mut self) -> Result<Option<Frame>> {
        loop {
            if self.state == State::Between {
                if !self.skip_whitespace() {
                    return Ok(None);
                }
                self.state = State::Value {
                    kind: kind_of(self.buf[0]),
                    depth: 0,
                    in_string: false,
                    escaped: false,
                };
                // The first byte is consumed by `start_value`'s bookkeeping below.
                self.start_value();
            }
            let end = self.scan();
            if let Some(at) = self.raw_newline.take() {
                // The value ends at the newline, malformed; framing resumes after it. One over the
                // limit is reported as such, however it ends (as when it arrives in pieces).
                let error = if at > self.max_frame {
                    Error::FrameTooLarge {
                        limit: self.max_frame,
                    }
                } else {
                    Error::Decode {
                        offset: self.offset + at as u64,
                        excerpt: redacted_excerpt(&self.buf[..at], at.saturating_sub(60), 60),
                        message: "a string holds a raw newline (or never closes before the end of \
                                  its line); the value is dropped"
                            .into(),
                    }
                };
                self.consume(at + 1);
                self.state = State::Between;
                if std::mem::take(&mut self.discarding) {
                    // The oversized value was reported already.
                    continue;
                }
                return Err(error);
            }
            let frame_len = end.unwrap_or(self.scanned);
            if self.discarding {
                // Drop what was scanned of the oversized value; nothing of it is kept.
                self.consume(frame_len);
                match end {
                    Some(_) => {
                        self.discarding = false;
                        self.state = State::Between;
                        continue;
                    }
                    None => return Ok(None),
                }
            }
            if frame_len > self.max_frame {
                self.discarding = true;
                if end.is_some() {
                    self.consume(frame_len);
                    self.discarding = false;
                    self.state = State::Between;
                } else {
                    self.consume(frame_len);
                }
                return Err(Error::FrameTooLarge {
                    limit: self.max_frame,
                });
            }
            return Ok(match end {
                Some(end) => {
                    let offset = self.offset;
                    let bytes = self.buf.split_to(end).freeze();
                    self.offset += end as u64;
                    self.scanned = 0;
                    self.state = State::Between;
                    Some(Frame { bytes, offset })
                }
                None => None,
            });
        }
    }

    /// The buffered bytes from the start of the next value on, and the value's stream offset, when
    /// the decoder is between values (none of the value scanned yet); `None` inside a value or with
    /// nothing but whitespace buffered.
    ///
    /// For a caller that parses a value before it is framed (see
    /// [`EventDecoder`](crate::watch::EventDecoder)): after a parse that consumed `n` bytes it calls
    /// [`skip_parsed`](Self::skip_parsed)`(n)`; after a failed one it calls
    /// [`next_frame`](Self::next_frame), which frames the value as usual.
    pub(crate) fn unscanned_value(&mut self) -> Option<(&[u8], u64)> {
        if self.state != State::Between || self.discarding || !self.skip_whitespace() {
            return None;
        }
        Some((&self.buf[..], self.offset))
    }

    /// Drops the `n` bytes of a value parsed from [`unscanned_value`](Self::unscanned_value), with
    /// the same limit as a framed value: over it, the value is dropped and the error is
    /// [`Error::FrameTooLarge`].
    pub(crate) fn skip_parsed(&mut self, n: usize) -> Result<()> {
        debug_assert!(self.state == State::Between && n <= self.buf.len());
        self.consume(n);
        if n > self.max_frame {
            return Err(Error::FrameTooLarge {
                limit: self.max_frame,
            });
        }
        Ok(())
    }

    /// Like [`skip_parsed`](Self::skip_parsed), but hands out the value's bytes: they share the
    /// receive buffer (no copy), so whoever keeps them long should copy them.
    pub(crate) fn take_parsed(&mut self, n: usize) -> Result<Bytes> {
        debug_assert!(self.state == State::Between && n <= self.buf.len());
        let bytes = self.buf.split_to(n).freeze();
        self.offset += n as u64;
        self.scanned = self.scanned.saturating_sub(n);
        if n > self.max_frame {
            return Err(Error::FrameTooLarge {
                limit: self.max_frame,
            });
        }
        Ok(bytes)
    }

    /// The stream offset just past the last byte pushed.
    pub(crate) fn stream_end(&self) -> u64 {
        self.offset + self.buf.len() as u64
    }

    /// Ends the stream. `Ok(None)` is a clean end; a scalar still open at the end of the stream is
    /// complete and returned; anything else open is [`Error::UnexpectedEof`].
    ///
    /// ```
    /// use informer::{Error, internals::frame::FrameDecoder};
    /// let mut dec = FrameDecoder::new();
    /// dec.push(b"{\"type\":\"ADD");
    /// assert!(dec.next_frame().unwrap().is_none());
    /// assert!(matches!(dec.finish(), Err(Error::UnexpectedEof { buffered: 12 })));
    /// ```
    pub fn finish(&mut self) -> Result<Option<Frame>> {
        if self.state == State::Between && !self.skip_whitespace() {
            return Ok(None);
        }
        if let State::Value {
            kind: Kind::Scalar, ..
        } = self.state
        {
            if !self.discarding {
                let _ = self.scan(); // a scalar cannot end before the end of the buffer here
                let offset = self.offset;
                let len = self.buf.len();
                let bytes = self.buf.split_to(len).freeze();
                self.offset += len as u64;
                self.scanned = 0;
                self.state = State::Between;
                return Ok(Some(Frame { bytes, offset }));
            }
        }
        let buffered = self.buf.len();
        self.consume(buffered);
        self.state = State::Between;
        self.discarding = false;
        Err(Error::UnexpectedEof { buffered })
    }

    /// Drops leading whitespace; true if a value starts at `buf[0]`.
    fn skip_whitespace(&mut self) -> bool {
        let n = self
            .buf
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
            .unwrap_or(self.buf.len());
        self.consume(n);
        if self.buf.is_empty() {
            // Between values with nothing buffered: let the receive buffer go, so an idle watch
            // holds none (a thousand idle watches held 8 MiB of them). The next push allocates
            // what it brings; a buffer still shared with frames handed out could not be reused
            // anyway.
            self.buf = BytesMut::new();
            return false;
        }
        true
    }

    /// Accounts for the first byte of a new value.
    fn start_value(&mut self) {
        if let State::Value {
            kind,
            depth,
            in_string,
            ..
        } = &mut self.state
        {
            match kind {
                Kind::Container { .. } => *depth = 1,
                Kind::String => *in_string = true,
                Kind::Scalar => {}
            }
        }
        self.scanned = 1;
    }

    /// Drops `n` bytes from the front of the buffer.
    fn consume(&mut self, n: usize) {
        self.buf.advance(n);
        self.offset += n as u64;
        self.scanned = self.scanned.saturating_sub(n);
    }

    /// Scans from `scanned` on; returns the end (exclusive) of the value if it is complete.
    fn scan(&mut self) -> Option<usize> {
        let State::Value { kind, .. } = self.state else {
            unreachable!("scan is only called inside a value");
        };
        match kind {
            Kind::Container { open, close } => self.scan_container(open, close, self.scanned),
            Kind::String => self.scan_string(),
            Kind::Scalar => {
                let from = self.scanned;
                match self.buf[from..].iter().position(|&b| ends_scalar(b)) {
                    Some(j) => self.done(from + j),
                    None => {
                        self.scanned = self.buf.len();
                        None
                    }
                }
            }
        }
    }

    /// Scans a top-level string: only `"`, `\` and a raw newline matter.
    fn scan_string(&mut self) -> Option<usize> {
        let State::Value { escaped, .. } = &mut self.state else {
            unreachable!("scan is only called inside a value");
        };
        let buf = &self.buf[..];
        let mut i = self.scanned;
        if *escaped && i < buf.len() {
            // The byte after a backslash that ended the previous push.
            *escaped = false;
            if buf[i] == b'\n' {
                self.raw_newline = Some(i);
                return self.done(i + 1);
            }
            i += 1;
        }
        while i < buf.len() {
            match memchr::memchr3(b'"', b'\\', b'\n', &buf[i..]) {
                None => break,
                Some(j) if buf[i + j] == b'\n' => {
                    self.raw_newline = Some(i + j);
                    return self.done(i + j + 1);
                }
                Some(j) if buf[i + j] == b'\\' => {
                    let next = i + j + 1;
                    if next == buf.len() {
                        *escaped = true;
                    } else if buf[next] == b'\n' {
                        // Escaped or not: a raw newline never belongs in a string (as above, and
                        // as in `scan_container`).
                        self.raw_newline = Some(next);
                        return self.done(next + 1);
                    }
                    i = next + 1;
                }
                Some(j) => return self.done(i + j + 1),
            }
        }
        self.scanned = buf.len();
        None
    }

    /// Scans a container from `i`: 64-byte blocks while there are that many, then byte by byte,
    /// with the same escaping rule (see [`block`]) so that where a push ends never matters.
    fn scan_container(&mut self, open: u8, close: u8, i: usize) -> Option<usize> {
        let State::Value {
            depth,
            in_string,
            escaped,
            ..
        } = &mut self.state
        else {
            unreachable!("scan is only called inside a value");
        };
        let buf = &self.buf[..];
        let (next, stop) = block::scan_blocks(buf, i, open, close, depth, escaped, in_string);
        let stop = stop.or_else(|| scan_tail(buf, next, open, close, depth, escaped, in_string));
        match stop {
            Some(block::Stop::Closed(end)) => self.done(end),
            Some(block::Stop::RawNewline(at)) => {
                self.raw_newline = Some(at);
                self.done(at + 1)
            }
            None => {
                self.scanned = self.buf.len();
                None
            }
        }
    }

    fn done(&mut self, end: usize) -> Option<usize> {
        self.scanned = end;
        Some(end)
    }
}

/// Scans `buf` from `i` byte by byte (the tail shorter than a block), with the rules of
/// [`block::scan_blocks`], so that where a push ends never changes the frames.
fn scan_tail(
    buf: &[u8],
    mut i: usize,
    open: u8,
    close: u8,
    depth: &mut u32,
    escaped: &mut bool,
    in_string: &mut bool,
) -> Option<block::Stop> {
    while i < buf.len() {
        let b = buf[i];
        i += 1;
        if b == b'\n' && *in_string {
            // Escaped or not: a raw newline never belongs in a string.
            return Some(block::Stop::RawNewline(i - 1));
        }
        if std::mem::take(escaped) {
            // An escaped quote or backslash is inert; brackets still count outside strings.
            if b != open && b != close || *in_string {
                continue;
            }
        } else if b == b'\\' {
            *escaped = true;
            continue;
        } else if b == b'"' {
            *in_string = !*in_string;
            continue;
        }
        if *in_string {
            continue;
        }
        if b == open {
            *depth += 1;
        } else if b == close {
            *depth -= 1;
            if *depth == 0 {
                return Some(block::Stop::Closed(i));
            }
        }
    }
    None
}

/// The end (exclusive) of the JSON object or array that `bytes` starts with (`open` is `{` or `[`,
/// `close` its pair), by the framing rules (the module docs: strings, escapes, bracket depth), or
/// `None` if it does not start with `open`, does not close within `bytes`, or one of its strings
/// meets a raw newline first. Like framing, this finds where a value ends; it does not check that
/// the value is valid JSON.
pub(crate) fn container_end(bytes: &[u8], open: u8, close: u8) -> Option<usize> {
    if bytes.first() != Some(&open) {
        return None;
    }
    let (mut depth, mut escaped, mut in_string) = (1, false, false);
    let (next, stop) = block::scan_blocks(
        bytes,
        1,
        open,
        close,
        &mut depth,
        &mut escaped,
        &mut in_string,
    );
    let stop = stop.or_else(|| {
        scan_tail(
            bytes,
            next,
            open,
            close,
            &mut depth,
            &mut escaped,
            &mut in_string,
        )
    });
    match stop {
        Some(block::Stop::Closed(end)) => Some(end),
        _ => None,
    }
}

fn kind_of(first: u8) -> Kind {
    match first {
        b'{' => Kind::Container {
            open: b'{',
            close: b'}',
        },
        b'[' => Kind::Container {
            open: b'[',
            close: b']',
        },
        b'"' => Kind::String,
        _ => Kind::Scalar,
    }
}

fn ends_scalar(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t' | b'\n' | b'\r' | b'{' | b'}' | b'[' | b']' | b',' | b':' | b'"'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(chunks: &[&[u8]]) -> Vec<Vec<u8>> {
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

    #[test]
    fn client_go_json_frame_reader_vector() {
        // TestJSONFrameReader: values are delimited by value, not by line.
        let got = frames(&[b"{\"test\":true}\n1\n[\"a\"]"]);
        assert_eq!(got, vec![&b"{\"test\":true}"[..], b"1", b"[\"a\"]"]);
    }

    #[test]
    fn strings_hide_brackets_and_escaped_quotes() {
        let s = br#"{"a":"}{\"}\\","b":["]"]} {"c":"\\"}"#;
        for cut in 0..s.len() {
            let got = frames(&[&s[..cut], &s[cut..]]);
            assert_eq!(
                got,
                vec![&br#"{"a":"}{\"}\\","b":["]"]}"#[..], br#"{"c":"\\"}"#],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn scalars_and_top_level_strings() {
        assert_eq!(
            frames(&[b" 12 \"x\\\"y\"null", b"  true"]),
            vec![&b"12"[..], b"\"x\\\"y\"", b"null", b"true"]
        );
    }

    #[test]
    fn offsets_count_from_stream_start() {
        let mut dec = FrameDecoder::new();
        dec.push(b"  {}\r\n {\"a\":1}");
        assert_eq!(dec.next_frame().unwrap().unwrap().offset, 2);
        assert_eq!(dec.next_frame().unwrap().unwrap().offset, 7);
    }

    #[test]
    fn oversized_frame_is_skipped_with_bounded_memory() {
        let mut dec = FrameDecoder::with_max_frame(100);
        dec.push(b"{\"big\":\"");
        let mut saw_error = false;
        for _ in 0..1000 {
            dec.push(&[b'x'; 64]);
            match dec.next_frame() {
                Err(Error::FrameTooLarge { limit: 100 }) => saw_error = true,
                Ok(None) => {}
                other => panic!("unexpected {other:?}"),
            }
            assert!(dec.buffered() <= 164, "buffered {}", dec.buffered());
        }
        assert!(saw_error);
        dec.push(b"\"}\n{\"ok\":1}\n");
        assert_eq!(&dec.next_frame().unwrap().unwrap().bytes[..], b"{\"ok\":1}");
        assert!(dec.finish().unwrap().is_none());
    }

    #[test]
    fn eof_inside_string_after_backslash() {
        let mut dec = FrameDecoder::new();
        dec.push(b"{\"a\":\"\\");
        assert!(dec.next_frame().unwrap().is_none());
        dec.push(b"\"\"}");
        assert_eq!(
            &dec.next_frame().unwrap().unwrap().bytes[..],
            b"{\"a\":\"\\\"\"}"
        );
    }

    /// Frames and errors, in order (`Err` as its message's first word).
    fn frames_and_errors(chunks: &[&[u8]]) -> Vec<String> {
        let mut dec = FrameDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            dec.push(c);
            loop {
                match dec.next_frame() {
                    Ok(Some(f)) => out.push(String::from_utf8_lossy(&f.bytes).into_owned()),
                    Ok(None) => break,
                    Err(Error::Decode { offset, .. }) => out.push(format!("error at {offset}")),
                    Err(e) => panic!("{e}"),
                }
            }
        }
        assert!(dec.finish().unwrap().is_none());
        out
    }

    #[test]
    fn a_raw_newline_in_a_string_ends_that_value_as_an_error() {
        // Every cut, in the block scanner (long lines) and the byte tail (short ones).
        let pad = "p".repeat(100);
        for (broken, rest) in [
            // A raw newline inside a string, then valid lines.
            (
                format!("{{\"a\":\"{pad}\nb\"}}\n"),
                vec!["b".to_owned(), "error at 110".to_owned()],
            ),
            // A string that never closes, then valid lines.
            (format!("{{\"a\":\"{pad}}}\n"), vec![]),
            ("{\"a\":[\"x\\\n".to_owned(), vec![]),
            ("\"top-level\n".to_owned(), vec![]),
            // A backslash before the raw newline (found by the `frames` fuzz target: the
            // top-level string scanner skipped it unless a push ended at the backslash).
            ("\"top-level\\\n".to_owned(), vec![]),
        ] {
            let valid = format!("{{\"ok\":1,\"s\":\"{pad}\"}}\n{{\"ok\":2}}\n");
            let input = format!("{broken}{valid}");
            let first_newline = broken.find('\n').unwrap();
            let mut want = vec![format!("error at {first_newline}")];
            want.extend(rest);
            want.push(format!("{{\"ok\":1,\"s\":\"{pad}\"}}"));
            want.push("{\"ok\":2}".to_owned());
            let input = input.as_bytes();
            for cut in 0..input.len() {
                assert_eq!(
                    frames_and_errors(&[&input[..cut], &input[cut..]]),
                    want,
                    "{broken:?} cut at {cut}"
                );
            }
        }
    }

    #[test]
    fn pretty_printed_values_keep_their_newlines_outside_strings() {
        assert_eq!(
            frames(&[b"{\n  \"a\": \"x\",\n  \"b\": [\n1\n]\n}\n"]),
            vec![&b"{\n  \"a\": \"x\",\n  \"b\": [\n1\n]\n}"[..]]
        );
    }

    /// A byte-at-a-time framer with the documented rules, to check the block scanner against.
    fn reference(input: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < input.len() {
            if input[i].is_ascii_whitespace() {
                i += 1;
                continue;
            }
            let start = i;
            let (open, close) = match input[i] {
                b'{' => (b'{', b'}'),
                b'[' => (b'[', b']'),
                _ => return out, // the random inputs below only start containers
            };
            let (mut depth, mut in_string, mut escaped) = (1u32, false, false);
            i += 1;
            let mut end = None;
            let mut broken = false;
            while i < input.len() {
                let b = input[i];
                i += 1;
                if b == b'\n' && in_string {
                    // A raw newline in a string ends the value as an error; framing resumes
                    // after it.
                    broken = true;
                    break;
                }
                if std::mem::take(&mut escaped) {
                    if (b != open && b != close) || in_string {
                        continue;
                    }
                } else if b == b'\\' {
                    escaped = true;
                    continue;
                } else if b == b'"' {
                    in_string = !in_string;
                    continue;
                }
                if in_string {
                    continue;
                }
                if b == open {
                    depth += 1;
                } else if b == close {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
            }
            match end {
                _ if broken => out.push(b"error".to_vec()),
                Some(e) => out.push(input[start..e].to_vec()),
                None => return out,
            }
        }
        out
    }

    #[test]
    fn block_scanner_matches_the_byte_rules_on_random_input() {
        let alphabet = b"{}[]\"\\\\ax \n";
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..3000 {
            let len = (next() % 400) as usize;
            let mut input = vec![b'{'];
            input.extend((0..len).map(|_| alphabet[(next() % alphabet.len() as u64) as usize]));
            input.extend_from_slice(b"\"}}}}}}}}]]]]}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}}");
            let want = reference(&input);
            let cut = (next() % (input.len() as u64 + 1)) as usize;
            let mut dec = FrameDecoder::new();
            let mut got = Vec::new();
            for part in [&input[..cut], &input[cut..]] {
                dec.push(part);
                loop {
                    match dec.next_frame() {
                        Ok(Some(f)) => got.push(f.bytes.to_vec()),
                        Ok(None) => break,
                        Err(Error::Decode { .. }) => got.push(b"error".to_vec()),
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            // After the last container the reference stops; so do we.
            got.truncate(want.len());
            assert_eq!(
                got,
                want,
                "input {:?} cut {cut}",
                String::from_utf8_lossy(&input)
            );
        }
    }
}
