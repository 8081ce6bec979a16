//! [`WatchStream`]: a watch response body as a stream of typed events, with the bounds that keep a
//! hostile body from holding the caller (frame size, stall).

use std::fmt;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::Body;

use super::decoder::EventDecoder;
use super::event::WatchEvent;
use super::raw::RawEvent;
use crate::Object;
use crate::error::{Error, Result};
use crate::frame::Frame;

/// A watch response body turned into typed events.
///
/// `next().await` returns `None` at a clean end of the body (the server's `timeoutSeconds`, or the
/// server closing the watch between events): the caller re-watches from the last resourceVersion.
/// An end in the middle of a frame is [`Error::UnexpectedEof`], a broken connection
/// [`Error::Transport`]; both also mean "re-watch". A frame that does not decode is [`Error::Decode`]
/// (the stream can go on, but the cache may have missed an event: relist). An `ERROR` event is
/// returned as [`WatchEvent::Error`].
///
/// `B` is any HTTP body of [`Bytes`]; [`Api::watch`](crate::client::Api::watch) gives a
/// `WatchStream<T, ResponseBody>` (the client's [`ResponseBody`](crate::client::ResponseBody)).
pub struct WatchStream<T, B> {
    body: B,
    events: EventDecoder<T>,
    ended: bool,
    _t: PhantomData<fn() -> T>,
}

impl<T, B> fmt::Debug for WatchStream<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchStream")
            .field("events", &self.events)
            .field("ended", &self.ended)
            .finish()
    }
}

impl<T, B> WatchStream<T, B>
where
    T: Object,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// Wraps a response body; `max_frame` bounds one event's size.
    pub fn new(body: B, max_frame: usize) -> Self {
        WatchStream {
            body,
            events: EventDecoder::with_max_frame(max_frame),
            ended: false,
            _t: PhantomData,
        }
    }

    /// Wraps a protobuf watch body (`application/vnd.kubernetes.protobuf;stream=watch`); see
    /// [`EventDecoder::protobuf`].
    #[cfg(feature = "protobuf")]
    pub fn protobuf(body: B, max_frame: usize) -> Self {
        WatchStream {
            body,
            events: EventDecoder::protobuf(max_frame),
            ended: false,
            _t: PhantomData,
        }
    }

    /// The response body the events are read from (to ask, say, which HTTP version carries it).
    ///
    /// ```
    /// # use informer::{ConfigMap, internals::watch::WatchStream};
    /// let stream: WatchStream<ConfigMap, _> =
    ///     WatchStream::new(http_body_util::Full::new(bytes::Bytes::new()), 1 << 20);
    /// let _body: &http_body_util::Full<bytes::Bytes> = stream.body();
    /// ```
    pub fn body(&self) -> &B {
        &self.body
    }

    /// The next event; `None` once the body ended cleanly.
    pub async fn next(&mut self) -> Option<Result<WatchEvent<T>>> {
        self.pull(EventDecoder::next_event, EventDecoder::finish)
            .await
    }

    /// The next event with its object left as JSON (see [`EventDecoder::next_raw`]); `None` once
    /// the body ended cleanly.
    pub async fn next_raw(&mut self) -> Option<Result<RawEvent<T>>> {
        self.pull(EventDecoder::next_raw, |d| {
            d.finish().map(|e| e.map(RawEvent::Decoded))
        })
        .await
    }

    /// The next raw frame, undecoded (for callers that decode themselves): a JSON value, or on a
    /// protobuf stream (what `Api::watch` of a built-in kind gets, unless
    /// [`Config::protobuf`](crate::Config::protobuf) is off) a `WatchEvent` message.
    pub async fn next_frame(&mut self) -> Option<Result<Frame>> {
        self.pull(EventDecoder::next_frame, EventDecoder::finish_frame)
            .await
    }

    /// Takes the next item out of the decoder with `take`, receiving more of the body while there
    /// is none; at the end of the body, `finish` gives the last item or the error of an end
    /// mid-value.
    async fn pull<X>(
        &mut self,
        take: fn(&mut EventDecoder<T>) -> Result<Option<X>>,
        finish: fn(&mut EventDecoder<T>) -> Result<Option<X>>,
    ) -> Option<Result<X>> {
        std::future::poll_fn(|cx| self.poll_pull(cx, take, finish)).await
    }

    /// [`pull`](Self::pull) as a poll function (for [`Stream`](futures_core::Stream)): `Pending`
    /// only while the body has no data ready. `None` once the body has ended and everything was
    /// returned; a broken connection is an error, and ends the body.
    fn poll_pull<X>(
        &mut self,
        cx: &mut Context<'_>,
        take: fn(&mut EventDecoder<T>) -> Result<Option<X>>,
        finish: fn(&mut EventDecoder<T>) -> Result<Option<X>>,
    ) -> Poll<Option<Result<X>>> {
        loop {
            if let Some(item) = take(&mut self.events).transpose() {
                return Poll::Ready(Some(item));
            }
            if self.ended {
                return Poll::Ready(None);
            }
            match std::task::ready!(Pin::new(&mut self.body).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.events.push(&data);
                    }
                }
                Some(Err(e)) => {
                    self.ended = true;
                    return Poll::Ready(Some(Err(Error::transport("watch stream broke", e))));
                }
                None => {
                    self.ended = true;
                    return Poll::Ready(finish(&mut self.events).transpose());
                }
            }
        }
    }
}

/// The typed events as a [`Stream`](futures_core::Stream), for stream combinators (the items of
/// [`WatchStream::next`]). Cancel-safe: an event is taken out of the decoder only when returned.
///
/// ```
/// use std::future::poll_fn;
/// use std::pin::Pin;
/// use futures_core::Stream;
/// use informer::client::{WatchEvent, WatchStream};
/// use informer::ConfigMap;
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let body = http_body_util::Full::new(bytes::Bytes::from_static(
///     b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"1\"}}}\n\
///       {\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"2\"}}}\n",
/// ));
/// let mut events = WatchStream::<ConfigMap, _>::new(body, 1 << 20);
/// // A tiny `StreamExt::next`: any Stream combinator works the same way.
/// let mut names = Vec::new();
/// while let Some(event) = poll_fn(|cx| Pin::new(&mut events).poll_next(cx)).await {
///     if let WatchEvent::Deleted(cm) = event.unwrap() {
///         names.push(cm.metadata.name);
///     }
/// }
/// assert_eq!(names, ["a"]);
/// # });
/// ```
impl<T, B> futures_core::Stream for WatchStream<T, B>
where
    T: Object,
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Item = Result<WatchEvent<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // `WatchStream` is `Unpin` (`B: Unpin`, `T` only in `PhantomData<fn() -> T>`).
        self.get_mut()
            .poll_pull(cx, EventDecoder::next_event, EventDecoder::finish)
    }
}
