//! The response body type: a whole buffer, a fixed list of chunks (for the chunking fault), or a
//! stream fed by a task through a bounded channel (watch streams).
//!
//! A streamed body ends cleanly when the sender is dropped (hyper writes the terminating chunk)
//! and aborts the connection when the sender sends an `Err` (the client sees an unexpected EOF or
//! a reset, never a clean end).

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// Items a streaming body yields.
pub(crate) type Chunk = Result<Bytes, io::Error>;

/// A hyper response body.
pub(crate) enum SimBody {
    Full(Option<Bytes>),
    Chunks(VecDeque<Bytes>),
    Stream(mpsc::Receiver<Chunk>),
    /// A body that stalls: `announced` bytes promised (`Content-Length`), the `first` ones sent,
    /// then nothing until `until` fires, when the connection is aborted (so a client that never
    /// gives up does not hold the server's task for ever).
    Stalled {
        first: Option<Bytes>,
        announced: u64,
        until: Pin<Box<tokio::time::Sleep>>,
    },
}

impl SimBody {
    pub fn full(b: impl Into<Bytes>) -> Self {
        SimBody::Full(Some(b.into()))
    }

    pub fn empty() -> Self {
        SimBody::Full(None)
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            SimBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            SimBody::Chunks(q) => Poll::Ready(q.pop_front().map(|b| Ok(Frame::data(b)))),
            SimBody::Stream(rx) => rx.poll_recv(cx).map(|o| o.map(|r| r.map(Frame::data))),
            SimBody::Stalled { first, until, .. } => match first.take() {
                Some(b) => Poll::Ready(Some(Ok(Frame::data(b)))),
                None => until.as_mut().poll(cx).map(|()| {
                    Some(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "stalled body: the client never gave up",
                    )))
                }),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            SimBody::Full(b) => b.is_none(),
            SimBody::Chunks(q) => q.is_empty(),
            SimBody::Stream(_) | SimBody::Stalled { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            SimBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            SimBody::Full(None) => SizeHint::with_exact(0),
            SimBody::Stalled { announced, .. } => SizeHint::with_exact(*announced),
            _ => SizeHint::default(),
        }
    }
}
