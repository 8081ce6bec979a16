//! The crate's one error type.
//!
//! Variants are grouped by what a caller does about them: retry the connection ([`Error::Transport`],
//! [`Error::Timeout`], [`Error::EndedTooSoon`], [`Error::UnexpectedEof`]), relist ([`Error::Expired`], [`Error::Decode`]), fix
//! the configuration ([`Error::Tls`], [`Error::Config`]), or read the server's answer ([`Error::Api`],
//! [`Error::Http`]). Messages are written for a person reading a log, and never contain secrets.

use std::fmt;

use crate::Status;
use crate::model::StatusReason;

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong between the apiserver and the cache.
///
/// ```
/// use informer::{Error, Status};
/// let e = Error::from_status(Status { code: 410, reason: "Expired".into(), ..Default::default() });
/// assert!(e.is_expired());
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// Connecting, sending or receiving failed below HTTP (refused, reset, DNS, proxy).
    Transport {
        /// What the client was doing.
        context: String,
        /// The underlying error.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The TLS handshake failed or the TLS configuration is unusable (bad CA, unknown issuer, wrong
    /// server name, bad client key).
    Tls(String),
    /// The apiserver answered with a `Status` (any non-2xx except 410, or an in-stream `ERROR` event).
    Api(Box<Status>),
    /// 410 Gone / reason `Expired`: the requested resourceVersion or continue token is no longer
    /// available. The remedy is a fresh list.
    Expired(Box<Status>),
    /// A non-2xx answer whose body is not a `Status` (an HTML page from a proxy, plain text).
    Http {
        /// The HTTP status code.
        code: u16,
        /// The start of the body, printable characters only.
        excerpt: String,
        /// The response's `Retry-After` header in seconds, if it had one: honoured whatever the
        /// body (an envoy 503 says "upstream connect error" in plain text).
        retry_after_seconds: Option<u32>,
    },
    /// A frame or body that is not the JSON we expected.
    Decode {
        /// Byte offset of the error from the start of the response body.
        offset: u64,
        /// The bytes around the error, printable characters only.
        excerpt: String,
        /// What the decoder expected.
        message: String,
    },
    /// One watch frame exceeded the decoder's limit. The decoder skips that value and goes on.
    FrameTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// A response body (a list, an error page) exceeded the client's limit.
    ResponseTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The body ended in the middle of a frame (connection cut, server crashed).
    UnexpectedEof {
        /// Bytes of the incomplete frame that were received.
        buffered: usize,
    },
    /// A request or a read did not finish in time: no answer to a request, or a watch that sent
    /// nothing for longer than its idle limit.
    Timeout(String),
    /// A watch or streaming list ended cleanly but at once: under a second, with no event
    /// (client-go's "very short watch", docs/semantics.md R17). Retrying at once would spin, so the
    /// reflector backs off first.
    EndedTooSoon(String),
    /// The server answered well-formed JSON that breaks the list/watch protocol: a `200` LIST
    /// whose body is not a list of the requested kind (`{}`, a `Status`, another kind, no
    /// `items`), or a streaming list that ended before its `initial-events-end` bookmark. The
    /// cache keeps what it had; the reflector backs off and lists again.
    Protocol(String),
    /// The configuration is incomplete or invalid.
    Config(String),
    /// A namespace or object name that the apiserver would refuse, or that could reach another
    /// path than the one meant (`../secrets`, `a/b`, `%2e%2e`); the request was not sent.
    InvalidName(String),
    /// A request the client refuses to send because the apiserver could only refuse it: a
    /// server-side apply without a field manager, `force` on a patch that is not an apply, a
    /// write addressed to one object through an all-namespaces [`Api`](crate::Api) of a
    /// namespaced resource. Nothing was sent.
    InvalidRequest(String),
    /// No resource type the server serves answers to that name, or the one that does cannot be
    /// listed and watched ([`Client::resolve_resource`](crate::Client::resolve_resource)).
    UnknownResource(String),
    /// A user callback (an event handler or an index function) panicked. The panic was caught and
    /// counted; the informer goes on.
    Panicked {
        /// Which callback, on which object (`event handler 2, on_update of ns/name`).
        context: String,
        /// The panic's message.
        message: String,
    },
}

impl Error {
    /// Builds the error for a `Status` returned by the server: [`Error::Expired`] for 410 or reason
    /// `Expired`/`Gone`, [`Error::Api`] otherwise.
    pub fn from_status(mut status: Status) -> Error {
        // The message reaches logs, error callbacks and terminals: no control characters or
        // ANSI escapes from the server.
        if let std::borrow::Cow::Owned(clean) = printable(&status.message) {
            status.message = clean;
        }
        if status.is_expired() {
            Error::Expired(Box::new(status))
        } else {
            Error::Api(Box::new(status))
        }
    }

    pub(crate) fn transport(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Error {
        Error::Transport {
            context: context.into(),
            source: source.into(),
        }
    }

    /// True when the resourceVersion (or continue token) asked for is gone: relist.
    pub fn is_expired(&self) -> bool {
        matches!(self, Error::Expired(_))
    }

    /// The server's `Status`, if it sent one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            Error::Api(s) | Error::Expired(s) => Some(s),
            _ => None,
        }
    }

    /// What the server's answer means, when it answered with a `Status` (or a bare HTTP error
    /// code): [`StatusReason::Conflict`] for a stale resourceVersion, [`StatusReason::Invalid`]
    /// with its [`causes`](Status::causes), ... `None` for failures that never reached the
    /// server or got no answer (transport, timeout, decode).
    ///
    /// ```
    /// use informer::{Error, Status};
    /// use informer::model::StatusReason;
    /// let e = Error::from_status(Status { code: 409, reason: "AlreadyExists".into(), ..Default::default() });
    /// assert_eq!(e.reason(), Some(StatusReason::AlreadyExists));
    /// assert!(e.is_already_exists() && !e.is_conflict());
    /// ```
    pub fn reason(&self) -> Option<StatusReason> {
        match self {
            Error::Api(s) | Error::Expired(s) => Some(s.reason()),
            Error::Http { code, .. } => Some(
                Status {
                    code: *code,
                    ..Default::default()
                }
                .reason(),
            ),
            _ => None,
        }
    }

    /// True for 404 NotFound: the object (or its resource type) does not exist.
    pub fn is_not_found(&self) -> bool {
        self.reason() == Some(StatusReason::NotFound)
    }

    /// True for a 409 Conflict: a stale resourceVersion or uid precondition, or a server-side
    /// apply that conflicts with another field manager. Read again and retry the write.
    pub fn is_conflict(&self) -> bool {
        self.reason() == Some(StatusReason::Conflict)
    }

    /// True for a 409 AlreadyExists: a create whose name is taken.
    pub fn is_already_exists(&self) -> bool {
        self.reason() == Some(StatusReason::AlreadyExists)
    }

    /// The HTTP status code the server answered with, if any.
    pub fn http_code(&self) -> Option<u16> {
        match self {
            Error::Api(s) | Error::Expired(s) if s.code != 0 => Some(s.code),
            Error::Expired(_) => Some(410),
            Error::Http { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// True when the same request may succeed if sent again later, after a backoff: the connection
    /// failed ([`Error::Transport`]), nothing came in time ([`Error::Timeout`]), a stream ended too
    /// soon ([`Error::EndedTooSoon`]) or mid-frame ([`Error::UnexpectedEof`]), or the server answered
    /// 429, 500, 502, 503 or 504 (with or without a `Retry-After`; see
    /// [`retry_after_seconds`](Self::retry_after_seconds) for how long it asked to wait).
    ///
    /// ```
    /// use informer::{Error, Status};
    /// let busy = Error::from_status(Status { code: 429, ..Default::default() });
    /// assert!(busy.is_retryable());
    /// let denied = Error::from_status(Status { code: 403, ..Default::default() });
    /// assert!(!denied.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Transport { .. }
            | Error::Timeout(_)
            | Error::EndedTooSoon(_)
            | Error::UnexpectedEof { .. } => true,
            _ => matches!(self.http_code(), Some(429 | 500 | 502 | 503 | 504)),
        }
    }

    /// Seconds the server asked us to wait (`Retry-After` / `details.retryAfterSeconds`), whatever
    /// the body of the answer was.
    ///
    /// ```
    /// let e = informer::Error::Http { code: 503, excerpt: "upstream connect error".into(), retry_after_seconds: Some(3) };
    /// assert_eq!(e.retry_after_seconds(), Some(3));
    /// ```
    pub fn retry_after_seconds(&self) -> Option<u32> {
        match self {
            Error::Http {
                retry_after_seconds,
                ..
            } => *retry_after_seconds,
            _ => self.status().and_then(Status::retry_after_seconds),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Transport { context, source } => {
                write!(f, "{context}: {source}")?;
                // hyper-util wraps the interesting cause (refused, reset, TLS) one or two levels deep.
                let mut cause = source.source();
                while let Some(c) = cause {
                    write!(f, ": {c}")?;
                    cause = c.source();
                }
                Ok(())
            }
            Error::Tls(m) => write!(f, "TLS error: {m}"),
            Error::Api(s) | Error::Expired(s) => {
                write!(f, "apiserver answered {}", s.code)?;
                if !s.reason.is_empty() {
                    write!(f, " {}", s.reason)?;
                }
                if !s.message.is_empty() {
                    write!(f, ": {}", s.message)?;
                }
                Ok(())
            }
            Error::Http { code, excerpt, .. } => {
                write!(
                    f,
                    "HTTP {code} with a body that is not a Kubernetes Status: {excerpt:?}"
                )
            }
            Error::Decode {
                offset,
                excerpt,
                message,
            } => write!(
                f,
                "cannot decode response at byte {offset}: {message} (near {excerpt:?})"
            ),
            Error::FrameTooLarge { limit } => {
                write!(
                    f,
                    "watch frame larger than the limit of {limit} bytes; skipped"
                )
            }
            Error::ResponseTooLarge { limit } => {
                write!(
                    f,
                    "response body larger than the limit of {limit} bytes \
                     (Config::max_response_bytes; a smaller LIST page size also helps)"
                )
            }
            Error::UnexpectedEof { buffered } => write!(
                f,
                "stream ended in the middle of a frame ({buffered} bytes of it received)"
            ),
            Error::Timeout(m) => write!(f, "timed out: {m}"),
            Error::EndedTooSoon(m) => write!(f, "ended too soon: {m}"),
            Error::Protocol(m) => write!(f, "unexpected answer from the server: {m}"),
            Error::Panicked { context, message } => {
                write!(f, "{context} panicked (caught; going on): {message}")
            }
            Error::Config(m) => write!(f, "configuration error: {m}"),
            Error::InvalidName(m) => write!(f, "invalid name: {m}"),
            Error::InvalidRequest(m) => write!(f, "invalid request (not sent): {m}"),
            Error::UnknownResource(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Transport { source, .. } => Some(source.as_ref()),
            _ => None,
        }
    }
}

/// At most `max` bytes of `bytes` starting at `from`, as text a person can read in a log line:
/// invalid UTF-8 replaced, control characters shown as spaces.
pub(crate) fn excerpt(bytes: &[u8], from: usize, max: usize) -> String {
    let from = from.min(bytes.len());
    let end = (from + max).min(bytes.len());
    let part = &bytes[from..end];
    let mut s = if part.is_ascii() {
        // The common case (JSON, HTML error pages), byte by byte: no UTF-8 decoding.
        let printable: Vec<u8> = part
            .iter()
            .map(|&b| if b.is_ascii_control() { b' ' } else { b })
            .collect();
        String::from_utf8(printable).unwrap_or_default()
    } else {
        String::from_utf8_lossy(part)
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    };
    if end < bytes.len() {
        s.push('…');
    }
    s
}

/// Like [`excerpt`], for bytes that may be an object's JSON (a Secret's `data`, a token in an
/// annotation): every string *value* is shown as `"…"`, keys, numbers and punctuation are kept,
/// so the excerpt still shows where in the structure the problem is without carrying what the
/// object holds into logs and error callbacks. A string is a key when a `:` follows it; one
/// that does not end within `bytes` counts as a value. The whole of `bytes` is scanned (only on
/// an error), so a window that starts inside a string knows it.
pub(crate) fn redacted_excerpt(bytes: &[u8], from: usize, max: usize) -> String {
    let from = from.min(bytes.len());
    let end = (from + max).min(bytes.len());
    // The contents (between the quotes) of the string values, in order.
    let mut values: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'"' {
            i += 1;
            continue;
        }
        let start = i + 1;
        let mut j = start;
        while j < bytes.len() && bytes[j] != b'"' {
            j += if bytes[j] == b'\\' { 2 } else { 1 };
        }
        let close = j.min(bytes.len());
        let next = bytes[(close + 1).min(bytes.len())..]
            .iter()
            .find(|b| !b.is_ascii_whitespace());
        if next != Some(&b':') || close >= bytes.len() {
            values.push((start, close));
        }
        i = close + 1;
    }
    let mut shown = Vec::with_capacity(end - from);
    let mut k = from;
    let mut v = values.iter().peekable();
    while k < end {
        while v.next_if(|(_, e)| *e <= k).is_some() {}
        match v.peek() {
            Some(&&(s, e)) if s <= k && k < e => {
                shown.extend_from_slice("…".as_bytes());
                k = e;
            }
            _ => {
                shown.push(bytes[k]);
                k += 1;
            }
        }
    }
    let mut text = excerpt(&shown, 0, shown.len());
    if end < bytes.len() {
        text.push('…');
    }
    text
}

/// `text` as a log line may show it: control characters (ANSI escapes' ESC included) shown as
/// spaces, as [`excerpt`] shows them. For messages that come from the server (`Status.message`).
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.chars().any(char::is_control) {
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect::<String>()
            .into()
    } else {
        text.into()
    }
}

/// The message of a caught panic (`panic!("...")` payloads are `&str` or `String`).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(a panic without a message)".to_owned()
    }
}
