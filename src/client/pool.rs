//! The connection pool: the connections of one [`Client`](super::Client) to its apiserver, kept the
//! way Go's transport (and so client-go) keeps them.
//!
//! * HTTP/2 (negotiated by ALPN): requests share connections as streams, at most as many per
//!   connection as the server's `SETTINGS_MAX_CONCURRENT_STREAMS` allows (read from the
//!   connection as the server updates it). When every connection is full, another one is opened:
//!   a long-lived watch never waits in a queue behind other watches that will not end for minutes.
//!   Each connection is pinged after [`Config::http2_read_idle_timeout`](crate::Config) of silence
//!   and closed when the ping is not answered in time, failing every stream on it.
//! * HTTP/1.1: one request per connection at a time; a connection goes back to the pool only after
//!   its response body was read to the end, and is closed otherwise (a watch that was dropped,
//!   a body that failed).
//! * A request that was cancelled before its response headers came (the client's open timeout)
//!   closes its HTTP/1.1 connection, or retires its HTTP/2 connection: no new stream goes to a
//!   connection that may be dead; the streams already on it go on until they end.
//! * A pooled connection found closed when a request is written to it (the server closed it while
//!   it was idle) is dropped, and the request goes once more on a new connection.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::client::conn::{http1, http2};
use hyper::header::{HOST, HeaderValue};
use hyper::{Request, Response, Uri, Version};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::Connection as _;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tower_service::Service;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ReqBody = Full<Bytes>;

/// How the pool keeps its connections.
#[derive(Clone, Debug)]
pub(crate) struct PoolSettings {
    /// An unused connection is closed after this long.
    pub idle_timeout: Duration,
    /// At most this many unused HTTP/1.1 connections are kept.
    pub max_idle_http1: usize,
    pub http2_read_idle_timeout: Option<Duration>,
    pub http2_ping_timeout: Duration,
}

/// What the pool holds right now (see [`Client::pool_stats`](super::Client::pool_stats)).
///
/// ```
/// let client = informer::Client::new(informer::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
/// let stats = client.pool_stats();
/// assert_eq!(stats.connections_opened, 0);
/// assert!(stats.http2.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolStats {
    /// Connections opened since the client was made (TCP, TLS and protocol handshake done).
    pub connections_opened: u64,
    /// The HTTP/2 connections in the pool, in the order new streams fill them.
    pub http2: Vec<Http2ConnectionStats>,
    /// Unused HTTP/1.1 connections waiting to be reused.
    pub idle_http1: usize,
}

/// One HTTP/2 connection of the pool.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Http2ConnectionStats {
    /// Our streams open on it: requests sent whose response body is still held.
    pub active_streams: usize,
    /// The server's `SETTINGS_MAX_CONCURRENT_STREAMS` (100, the RFC 9113 floor, until the
    /// server's SETTINGS arrive or if it never states one).
    pub max_concurrent_streams: usize,
    /// Takes no new streams (a request on it timed out); closed when its streams end.
    pub retired: bool,
}

/// The pool; cheap to share behind the client's `Arc`.
pub(crate) struct Pool {
    shared: Arc<Shared>,
}

struct Shared {
    connector: HttpsConnector<super::proxy::Connector>,
    /// `scheme://authority` of the apiserver: what the connector dials.
    target: Uri,
    /// The `Host` header of HTTP/1.1 requests.
    host: HeaderValue,
    settings: PoolSettings,
    state: Mutex<State>,
    /// Held while a connection is opened when the server speaks (or may speak) HTTP/2, so that
    /// requests started together share the new connection instead of each opening its own.
    connecting: tokio::sync::Mutex<()>,
    opened: AtomicU64,
}

#[derive(Default)]
struct State {
    protocol: Protocol,
    /// Unused HTTP/1.1 connections, the most recently used last.
    idle_http1: Vec<IdleHttp1>,
    http2: Vec<Arc<Http2Conn>>,
}

/// What the last connection negotiated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Protocol {
    #[default]
    Unknown,
    Http1,
    Http2,
}

/// An HTTP/1.1 connection: its request sender and the task driving it (aborted, so the socket is
/// closed, when the connection is dropped).
struct Http1Conn {
    send: http1::SendRequest<ReqBody>,
    task: AbortHandle,
}

impl Drop for Http1Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct IdleHttp1 {
    conn: Http1Conn,
    since: Instant,
}

struct Http2Conn {
    send: http2::SendRequest<ReqBody>,
    task: AbortHandle,
    /// Our streams in flight on this connection. Only a count: it guards no other memory, so
    /// every access is `Relaxed`; increments happen under the pool's state lock (check and
    /// increment are one step there), decrements anywhere (they only make the check conservative).
    active: AtomicUsize,
    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS, stored by the connection's task after each
    /// poll. An independent value read as a hint: `Relaxed`.
    max_streams: Arc<AtomicUsize>,
    /// No new streams. A one-way flag read as a hint under the state lock: `Relaxed`.
    retired: AtomicBool,
    /// When the last stream ended (for the idle timeout).
    idle_since: Mutex<Instant>,
}

impl Http2Conn {
    fn has_room(&self) -> bool {
        // Relaxed (here and below): `active`, `max_streams` and `retired` are lone values, read and
        // changed under `state`'s lock when a stream is reserved; a stale value costs one decision.
        !self.retired.load(Ordering::Relaxed)
            && !self.task.is_finished()
            && !self.send.is_closed()
            && self.active.load(Ordering::Relaxed) < self.max_streams.load(Ordering::Relaxed)
    }
}

impl Drop for Http2Conn {
    fn drop(&mut self) {
        // The pool and every stream let go of it.
        self.task.abort();
    }
}

impl Pool {
    pub(crate) fn new(
        connector: HttpsConnector<super::proxy::Connector>,
        target: Uri,
        settings: PoolSettings,
    ) -> Result<Pool, String> {
        let shown = crate::config::redact_url(&target.to_string());
        let authority = target
            .authority()
            .ok_or_else(|| format!("cluster URL {shown} has no host"))?;
        // Userinfo is never sent to the server (and never printed).
        let host_port = authority
            .as_str()
            .rsplit_once('@')
            .map_or(authority.as_str(), |(_, h)| h);
        let host = HeaderValue::from_str(host_port)
            .map_err(|e| format!("cluster URL {shown}: bad host: {e}"))?;
        let target = Uri::builder()
            .scheme(target.scheme_str().unwrap_or("https"))
            .authority(host_port)
            .path_and_query("/")
            .build()
            .map_err(|e| format!("cluster URL {shown}: {e}"))?;
        Ok(Pool {
            shared: Arc::new(Shared {
                connector,
                target,
                host,
                settings,
                state: Mutex::new(State::default()),
                connecting: tokio::sync::Mutex::new(()),
                opened: AtomicU64::new(0),
            }),
        })
    }

    /// No new request on any connection open now: idle HTTP/1.1 connections are closed, HTTP/2
    /// ones retired (their streams in flight finish). The next request opens a connection.
    pub(crate) fn retire_all(&self) {
        let mut state = self.shared.state.lock().unwrap();
        state.idle_http1.clear();
        for conn in &state.http2 {
            // Relaxed: a one-way flag read as a hint under the state lock (see `Http2Conn`).
            conn.retired.store(true, Ordering::Relaxed);
        }
    }

    /// What the pool holds right now.
    pub(crate) fn stats(&self) -> PoolStats {
        let state = self.shared.state.lock().unwrap();
        PoolStats {
            // A counter read for display: `Relaxed`.
            connections_opened: self.shared.opened.load(Ordering::Relaxed),
            http2: state
                .http2
                .iter()
                .map(|c| Http2ConnectionStats {
                    // Relaxed: a counter read for display; it publishes no other memory.
                    active_streams: c.active.load(Ordering::Relaxed),
                    max_concurrent_streams: c.max_streams.load(Ordering::Relaxed),
                    retired: c.retired.load(Ordering::Relaxed),
                })
                .collect(),
            idle_http1: state.idle_http1.len(),
        }
    }

    /// Sends `req` (an absolute URI on the pool's server) on a pooled or a new connection and
    /// returns the response once its headers arrived. Dropping the future before then gives up
    /// the connection (see the module docs).
    pub(crate) async fn send(
        &self,
        req: Request<ReqBody>,
    ) -> Result<Response<ResponseBody>, BoxError> {
        let mut req = req;
        if let Some(lease) = self.reuse() {
            match lease.send(req).await {
                Ok(resp) => return Ok(resp),
                // The pooled connection was closed before the request was written: once more,
                // on a connection opened for it.
                Err(Sent::No(r, e)) => {
                    tracing::debug!(error = %e, "pooled connection closed; opening another");
                    req = *r;
                }
                Err(Sent::Failed(e)) => return Err(e),
            }
        }
        let lease = self.connect().await?;
        match lease.send(req).await {
            Ok(resp) => Ok(resp),
            Err(Sent::No(_, e) | Sent::Failed(e)) => Err(e),
        }
    }

    /// A stream on an HTTP/2 connection with room, or an idle HTTP/1.1 connection.
    fn reuse(&self) -> Option<Lease> {
        let mut state = self.shared.state.lock().unwrap();
        let now = Instant::now();
        let idle_timeout = self.shared.settings.idle_timeout;
        state.http2.retain(|c| {
            // Relaxed: lone values, under `state`'s lock (see `has_room`).
            let unused = c.active.load(Ordering::Relaxed) == 0;
            !c.send.is_closed()
                && !c.task.is_finished()
                && !(unused
                    && (c.retired.load(Ordering::Relaxed)
                        || now.duration_since(*c.idle_since.lock().unwrap()) > idle_timeout))
        });
        if let Some(lease) = self.reserve_http2(&state) {
            return Some(lease);
        }
        while let Some(idle) = state.idle_http1.pop() {
            if idle.conn.send.is_closed() || now.duration_since(idle.since) > idle_timeout {
                continue;
            }
            if idle.conn.send.is_ready() {
                return Some(Lease::http1(idle.conn, Arc::downgrade(&self.shared)));
            }
            // Not ready although its last response was read: the connection is being closed
            // (or is in a state we cannot use); drop it.
        }
        None
    }

    fn reserve_http2(&self, state: &State) -> Option<Lease> {
        let conn = state.http2.iter().find(|c| c.has_room())?;
        // Relaxed: under `state`'s lock, which orders it against `has_room`'s reads.
        conn.active.fetch_add(1, Ordering::Relaxed);
        Some(Lease::http2(conn.clone()))
    }

    /// Opens a connection (or, for HTTP/2, takes a stream on one that another request opened
    /// meanwhile).
    async fn connect(&self) -> Result<Lease, BoxError> {
        let shared = &self.shared;
        let maybe_http2 = shared.state.lock().unwrap().protocol != Protocol::Http1;
        let _connecting = if maybe_http2 {
            let guard = shared.connecting.lock().await;
            if let Some(lease) = self.reserve_http2(&shared.state.lock().unwrap()) {
                return Ok(lease);
            }
            Some(guard)
        } else {
            None
        };
        let mut connector = shared.connector.clone();
        poll_fn(|cx| connector.poll_ready(cx)).await?;
        let io = connector.call(shared.target.clone()).await?;
        let http2 = io.connected().is_negotiated_h2();
        if http2 {
            let mut builder = http2::Builder::new(TokioExecutor::new());
            builder
                .timer(TokioTimer::new())
                .keep_alive_interval(shared.settings.http2_read_idle_timeout)
                .keep_alive_timeout(shared.settings.http2_ping_timeout)
                .keep_alive_while_idle(true);
            let (send, conn) = builder.handshake(io).await?;
            let max_streams = Arc::new(AtomicUsize::new(conn.current_max_send_streams()));
            let seen = max_streams.clone();
            let task = tokio::spawn(async move {
                let mut conn = std::pin::pin!(conn);
                let result = poll_fn(|cx| {
                    let poll = conn.as_mut().poll(cx);
                    // See `Http2Conn::max_streams`.
                    // Relaxed: a lone value, read by `has_room`; no other memory goes with it.
                    seen.store(conn.current_max_send_streams(), Ordering::Relaxed);
                    poll
                })
                .await;
                if let Err(e) = result {
                    tracing::debug!(error = %e, "HTTP/2 connection closed");
                }
            })
            .abort_handle();
            let conn = Arc::new(Http2Conn {
                send,
                task,
                active: AtomicUsize::new(1),
                max_streams,
                retired: AtomicBool::new(false),
                idle_since: Mutex::new(Instant::now()),
            });
            // A counter for stats: `Relaxed`.
            shared.opened.fetch_add(1, Ordering::Relaxed);
            let mut state = shared.state.lock().unwrap();
            state.protocol = Protocol::Http2;
            state.http2.push(conn.clone());
            Ok(Lease::http2(conn))
        } else {
            let (send, conn) = http1::Builder::new().handshake(io).await?;
            let task = tokio::spawn(async move {
                if let Err(e) = conn.await {
                    tracing::debug!(error = %e, "HTTP/1.1 connection closed");
                }
            })
            .abort_handle();
            // A counter for stats: `Relaxed`.
            shared.opened.fetch_add(1, Ordering::Relaxed);
            shared.state.lock().unwrap().protocol = Protocol::Http1;
            Ok(Lease::http1(
                Http1Conn { send, task },
                Arc::downgrade(shared),
            ))
        }
    }
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("target", &self.shared.target)
            .field("stats", &self.stats())
            .finish()
    }
}

/// Why a request got no response.
enum Sent {
    /// It was never written: the connection was closed. The request comes back.
    No(Box<Request<ReqBody>>, BoxError),
    /// It failed after it was written.
    Failed(BoxError),
}

/// The use of one connection (HTTP/1.1) or one stream slot (HTTP/2) by one request, from before
/// it is sent until its response body is dropped.
struct Lease {
    kind: LeaseKind,
    outcome: Outcome,
}

enum LeaseKind {
    Http1 {
        conn: Option<Http1Conn>,
        pool: Weak<Shared>,
    },
    Http2(Arc<Http2Conn>),
}

/// How far the request got; decides what happens to the connection when the lease ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Waiting for the response headers. Ending here means the request was cancelled (timed out):
    /// the connection may be dead.
    Opening,
    /// The response (or the request) failed, or its body was dropped before its end.
    Failed,
    /// The response body was read to its end: an HTTP/1.1 connection can be reused.
    Complete,
}

impl Lease {
    fn http1(conn: Http1Conn, pool: Weak<Shared>) -> Lease {
        Lease {
            kind: LeaseKind::Http1 {
                conn: Some(conn),
                pool,
            },
            outcome: Outcome::Opening,
        }
    }

    fn http2(conn: Arc<Http2Conn>) -> Lease {
        Lease {
            kind: LeaseKind::Http2(conn),
            outcome: Outcome::Opening,
        }
    }

    async fn send(mut self, mut req: Request<ReqBody>) -> Result<Response<ResponseBody>, Sent> {
        let result = match &mut self.kind {
            LeaseKind::Http1 { conn, pool } => {
                if let Some(shared) = pool.upgrade() {
                    req.headers_mut().insert(HOST, shared.host.clone());
                }
                let origin_form = req
                    .uri()
                    .path_and_query()
                    .map_or("/", |p| p.as_str())
                    .parse::<Uri>();
                match origin_form {
                    Ok(uri) => *req.uri_mut() = uri,
                    Err(e) => {
                        self.outcome = Outcome::Failed;
                        return Err(Sent::Failed(e.into()));
                    }
                }
                let conn = conn
                    .as_mut()
                    .expect("an HTTP/1.1 lease holds its connection");
                conn.send.try_send_request(req).await
            }
            LeaseKind::Http2(conn) => {
                *req.version_mut() = Version::HTTP_2;
                conn.send.clone().try_send_request(req).await
            }
        };
        match result {
            Ok(resp) => Ok(resp.map(|inner| ResponseBody {
                inner,
                lease: Some(self),
            })),
            Err(mut e) => {
                self.outcome = Outcome::Failed;
                match e.take_message() {
                    Some(req) => Err(Sent::No(Box::new(req), e.into_error().into())),
                    None => Err(Sent::Failed(e.into_error().into())),
                }
            }
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        match &mut self.kind {
            LeaseKind::Http1 { conn, pool } => {
                let (Some(conn), Outcome::Complete, Some(shared)) =
                    (conn.take(), self.outcome, pool.upgrade())
                else {
                    // Dropping the connection aborts its task and closes the socket.
                    return;
                };
                let mut state = shared.state.lock().unwrap();
                state.idle_http1.push(IdleHttp1 {
                    conn,
                    since: Instant::now(),
                });
                let excess = state
                    .idle_http1
                    .len()
                    .saturating_sub(shared.settings.max_idle_http1);
                state.idle_http1.drain(..excess);
            }
            LeaseKind::Http2(conn) => {
                if self.outcome == Outcome::Opening {
                    tracing::debug!(
                        "request cancelled before its response; retiring its HTTP/2 connection"
                    );
                    // Relaxed: a lone flag; a stream reserved meanwhile only meets the same dead connection.
                    conn.retired.store(true, Ordering::Relaxed);
                }
                *conn.idle_since.lock().unwrap() = Instant::now();
                // Relaxed: a lone count; `has_room` reads it under `state`'s lock, stale by one at most.
                conn.active.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// A response body as it arrives from the server. Holds its connection (HTTP/1.1) or its stream
/// slot (HTTP/2) until it is dropped; an HTTP/1.1 connection is reused only if the body was read
/// to its end.
pub struct ResponseBody {
    inner: Incoming,
    lease: Option<Lease>,
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody").finish_non_exhaustive()
    }
}

impl HttpBody for ResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let poll = Pin::new(&mut self.inner).poll_frame(cx);
        let outcome = match &poll {
            Poll::Ready(None) => Some(Outcome::Complete),
            Poll::Ready(Some(Err(_))) => Some(Outcome::Failed),
            _ => None,
        };
        if let (Some(outcome), Some(lease)) = (outcome, self.lease.as_mut()) {
            lease.outcome = outcome;
            if let (Outcome::Failed, LeaseKind::Http2(conn)) = (outcome, &lease.kind) {
                // Most stream errors are the connection's (a failed ping, a GOAWAY, a reset
                // socket), seen by the stream before the connection's task has wound down:
                // no new stream may go there meanwhile.
                // Relaxed: a lone flag (see above).
                conn.retired.store(true, Ordering::Relaxed);
            }
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl ResponseBody {
    /// Whether the body comes over an HTTP/2 stream (else HTTP/1.1). Over HTTP/2 the connection's
    /// pings find a dead peer ([`Config::http2_read_idle_timeout`](crate::Config)); HTTP/1.1 has
    /// no ping, so a reader of a long-lived body must bound its silence itself.
    ///
    /// ```no_run
    /// # async fn demo(api: informer::Api<informer::Pod>) -> informer::Result<()> {
    /// let stream = api.watch(&informer::WatchParams::default()).await?;
    /// println!("over HTTP/2: {}", stream.body().is_http2());
    /// # Ok(()) }
    /// ```
    pub fn is_http2(&self) -> bool {
        matches!(
            self.lease.as_ref().map(|l| &l.kind),
            Some(LeaseKind::Http2(_))
        )
    }
}

impl Drop for ResponseBody {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.as_mut() {
            if lease.outcome == Outcome::Opening {
                // The headers came; the body was dropped before its end.
                lease.outcome = Outcome::Failed;
            }
        }
    }
}
