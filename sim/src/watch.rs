//! Watch streaming: turns a [`WatchStart`] into a chunked HTTP body.
//!
//! One task per watch reads the shared event broadcast. Events are pre-serialized once by the
//! store and the same `Bytes` go to every watcher; only selector transitions (X5) build a new
//! frame. The task batches whatever is already queued (up to 64 KiB) into one write, which is what
//! the apiserver's "flush only when the queue is empty" does (X9).
//!
//! Ends: `timeoutSeconds` deadline, close-all or shutdown → clean end (terminating chunk, no
//! event); a watcher that lags behind the broadcast buffer is closed cleanly too (the real server
//! closes unresponsive watchers); an injected 410 → one ERROR event then a clean end; a drop
//! fault → the body errors and hyper aborts the connection.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, mpsc, watch};
use tokio::time::Instant;

use super::body::{Chunk, SimBody};
use super::errors::ApiError;
use super::faults::{Control, Faults, Plan};
use super::protobuf::Form;
use super::resources::ResourceInfo;
use super::selector::Selectors;
use super::store::{Event, EventType, Obj, Store, WatchStart, frame, write_frame};

const BATCH: usize = 64 * 1024;

/// Parameters of one watch request.
pub(crate) struct WatchParams {
    /// The watched resource (index in the registry).
    pub resource: usize,
    pub ns: Option<String>,
    pub sel: Selectors,
    pub bookmarks: bool,
    pub bookmark_interval: Duration,
    pub timeout: Duration,
    /// sendInitialEvents with bookmarks: end the initial events with the annotated bookmark.
    pub initial_end_bookmark: bool,
    /// A streaming list whose end bookmark is withheld (the fault): its initial phase never
    /// ends, so it gets every bookmark, as a watch-list gets them until its end bookmark is out.
    pub initial_end_withheld: bool,
    /// The form the client asked for: frames go out in protobuf (`protobuf.rs`), or with each
    /// object reduced to its metadata, translated from the JSON ones.
    pub form: Form,
}

/// Appends one JSON frame to `buf`, in the watch's form.
fn push(form: Form, frame: &[u8], buf: &mut Vec<u8>) {
    let partial;
    let frame = if form.metadata {
        partial = super::protobuf::metadata_frame(frame);
        &partial[..]
    } else {
        frame
    };
    if form.protobuf {
        super::protobuf::push_watch_frame(frame, buf);
    } else {
        buf.extend_from_slice(frame);
    }
}

/// One frame, as [`push`] writes it.
fn encoded(form: Form, frame: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(frame.len() + 64);
    push(form, frame, &mut out);
    out
}

/// The ERROR event frame for `e`.
pub(crate) fn error_frame(e: &ApiError) -> Bytes {
    let mut out = b"{\"type\":\"ERROR\",\"object\":".to_vec();
    out.extend_from_slice(&e.to_body());
    out.extend_from_slice(b"}\n");
    Bytes::from(out)
}

fn bookmark(info: &ResourceInfo, rv: u64, initial_end: bool, form: Form, buf: &mut Vec<u8>) {
    let mut json = Vec::with_capacity(160);
    let out = &mut json;
    out.extend_from_slice(b"{\"type\":\"BOOKMARK\",\"object\":");
    out.extend_from_slice(&info.object_prefix);
    out.extend_from_slice(format!("\"metadata\":{{\"resourceVersion\":\"{rv}\"").as_bytes());
    if initial_end {
        out.extend_from_slice(b",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}");
    }
    out.extend_from_slice(b"}}}\n");
    push(form, &json, buf);
}

/// Applies namespace and selector filtering, including the X5 transitions.
fn convert(ev: &Event, info: &ResourceInfo, p: &WatchParams) -> Option<Bytes> {
    if ev.resource != p.resource {
        return None;
    }
    if p.ns.is_some() && ev.obj.namespace() != p.ns.as_deref() {
        return None;
    }
    if p.sel.is_empty() {
        return Some(ev.frame.clone());
    }
    let now = ev.obj.matches(&p.sel);
    match ev.ty {
        EventType::Added | EventType::Deleted => now.then(|| ev.frame.clone()),
        EventType::Modified => {
            let before = ev.prev.as_ref().is_some_and(|o| o.matches(&p.sel));
            match (before, now) {
                (true, true) => Some(ev.frame.clone()),
                (false, true) => Some(frame("ADDED", info, &ev.obj)),
                (true, false) => {
                    // DELETED with the previous content, stamped with this event's RV.
                    let mut v = ev.prev.as_ref()?.to_value(info);
                    v["metadata"]["resourceVersion"] = serde_json::Value::String(ev.rv.to_string());
                    Some(Obj::encode(EventType::Deleted, info, &v, ev.rv).1)
                }
                (false, false) => None,
            }
        }
    }
}

/// Writes to the body channel, applying the response's fault plan.
struct Sink {
    tx: mpsc::Sender<Chunk>,
    plan: Plan,
    bytes: u64,
    events: u64,
}

/// Why a sink stopped: the client went away, or a drop fault fired.
struct Stopped;

impl Sink {
    async fn send(&mut self, buf: Vec<u8>, events: u64) -> Result<(), Stopped> {
        if buf.is_empty() {
            return Ok(());
        }
        let mut b = Bytes::from(buf);
        let mut abort = false;
        if let Some(limit) = self.plan.drop_bytes
            && self.bytes + b.len() as u64 >= limit
        {
            b.truncate((limit - self.bytes.min(limit)) as usize);
            abort = true;
        }
        if let Some(limit) = self.plan.drop_events
            && self.events + events >= limit
        {
            abort = true;
            if self.events >= limit {
                b.clear();
            }
        }
        self.bytes += b.len() as u64;
        self.events += events;
        for piece in self.plan.split(b) {
            if !piece.is_empty() {
                self.tx.send(Ok(piece)).await.map_err(|_| Stopped)?;
            }
        }
        if abort {
            // Let hyper write what it has, then fail the body: the connection is cut.
            tokio::time::sleep(Duration::from_millis(50)).await;
            let _ = self
                .tx
                .send(Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    "injected watch drop",
                )))
                .await;
            return Err(Stopped);
        }
        Ok(())
    }
}

/// Starts streaming a watch; returns the body.
pub(crate) fn spawn(
    store: Arc<Store>,
    info: Arc<ResourceInfo>,
    start: Result<WatchStart, ApiError>,
    p: WatchParams,
    faults: &Faults,
    shutdown: watch::Receiver<bool>,
) -> SimBody {
    let (tx, rx) = mpsc::channel(16);
    let plan = faults.plan();
    let control = faults.state.control.subscribe();
    let stalled = faults.state.stalled.subscribe();
    let sink = Sink {
        tx,
        plan,
        bytes: 0,
        events: 0,
    };
    let state = faults.state.clone();
    // SeqCst: a gauge read by `Simulator::active_watches`; tests wait on it after a client
    // leaves, and SeqCst keeps that read simple to reason about (it is not on a hot path).
    state.active_watches.fetch_add(1, Ordering::SeqCst);
    tokio::spawn(async move {
        let _ = run(store, info, start, p, sink, control, stalled, shutdown).await;
        // SeqCst: see above.
        state.active_watches.fetch_sub(1, Ordering::SeqCst);
    });
    SimBody::Stream(rx)
}

#[allow(clippy::too_many_arguments)]
async fn run(
    store: Arc<Store>,
    info: Arc<ResourceInfo>,
    start: Result<WatchStart, ApiError>,
    p: WatchParams,
    mut sink: Sink,
    mut control: broadcast::Receiver<Control>,
    mut stalled: watch::Receiver<bool>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), Stopped> {
    // Hostile timeoutSeconds values cannot overflow the clock: cap at a year.
    let deadline = Instant::now() + p.timeout.min(Duration::from_secs(365 * 86400));
    let mut start = match start {
        Ok(s) => s,
        Err(e) => return sink.send(encoded(p.form, &error_frame(&e)), 1).await,
    };
    let one_by_one = sink.plan.event_delay.is_some() || sink.plan.drop_events.is_some();
    let mut buf = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    for o in &start.initial {
        if o.matches(&p.sel) {
            if p.form != Form::default() {
                push(p.form, &frame("ADDED", &info, o), &mut buf);
            } else {
                write_frame("ADDED", &info, o, &mut buf);
            }
            n += 1;
            if buf.len() >= BATCH || one_by_one {
                delay(&sink).await;
                sink.send(std::mem::take(&mut buf), std::mem::take(&mut n))
                    .await?;
            }
        }
    }
    let mut last_rv = start.start_rv;
    if p.initial_end_bookmark {
        bookmark(&info, last_rv, true, p.form, &mut buf);
        n += 1;
    }
    for ev in &start.replay {
        if let Some(f) = convert(ev, &info, &p) {
            push(p.form, &f, &mut buf);
            n += 1;
            if buf.len() >= BATCH || one_by_one {
                delay(&sink).await;
                sink.send(std::mem::take(&mut buf), std::mem::take(&mut n))
                    .await?;
            }
        }
    }
    sink.send(std::mem::take(&mut buf), std::mem::take(&mut n))
        .await?;
    let period = p
        .bookmark_interval
        .clamp(Duration::from_millis(10), Duration::from_secs(365 * 86400));
    let mut ticker = tokio::time::interval_at(Instant::now() + period, period);
    let pre_deadline = deadline
        .checked_sub(Duration::from_secs(2))
        .unwrap_or(deadline);
    let mut pre_deadline_pending = p.bookmarks && p.timeout >= Duration::from_secs(3);
    // The watch cache's rule (`cacheWatcher.process`: "only send events newer than
    // resourceVersion", bookmarks included): a bookmark goes out only at a version newer than the
    // one the watch started at, so a watch of a quiet resource hears nothing at all until it
    // changes. A watch-list whose initial phase has not ended gets them anyway (1.27+ sends those
    // "immediately and repeatedly" until its end bookmark is out).
    let (min_rv, endless_initial_phase) = (start.min_rv, p.initial_end_withheld);
    let bookmark_due = move |last_rv: u64| last_rv > min_rv || endless_initial_phase;
    loop {
        let is_stalled = *stalled.borrow();
        tokio::select! {
            biased;
            c = control.recv() => match c {
                Ok(Control::Error410) => {
                    let e = ApiError::watch_too_old(last_rv, store.current_rv());
                    return sink.send(encoded(p.form, &error_frame(&e)), 1).await;
                }
                Ok(Control::Error429) => {
                    let e = ApiError::injected(429);
                    return sink.send(encoded(p.form, &error_frame(&e)), 1).await;
                }
                Ok(Control::CloseAll) | Err(broadcast::error::RecvError::Closed) => return Ok(()),
                Ok(Control::Corrupt) => {
                    let line = b"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"raw\nnewline\"}}}\n";
                    sink.send(encoded(p.form, line), 1).await?;
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {}
            },
            _ = shutdown.changed() => return Ok(()),
            // The client went away: stop now rather than at the next event or the deadline.
            _ = sink.tx.closed() => return Ok(()),
            _ = tokio::time::sleep_until(deadline) => return Ok(()),
            _ = stalled.changed() => {}
            // The watch cache also sends one bookmark ~2 s before the deadline (X12; seen in
            // real-1.20-watch-endpoints-from-list-rv.http).
            _ = tokio::time::sleep_until(pre_deadline), if pre_deadline_pending && !is_stalled => {
                pre_deadline_pending = false;
                if bookmark_due(last_rv) {
                    bookmark(&info, last_rv, false, p.form, &mut buf);
                    sink.send(std::mem::take(&mut buf), 1).await?;
                }
            }
            _ = ticker.tick(), if p.bookmarks && !is_stalled => {
                if bookmark_due(last_rv) {
                    bookmark(&info, last_rv, false, p.form, &mut buf);
                    sink.send(std::mem::take(&mut buf), 1).await?;
                }
            }
            r = start.rx.recv(), if !is_stalled => {
                let ev = match r {
                    Ok(ev) => ev,
                    // Too far behind, or the store is gone: close cleanly, the client re-watches.
                    Err(_) => return Ok(()),
                };
                let mut next = Some(ev);
                while let Some(ev) = next.take() {
                    last_rv = last_rv.max(ev.rv);
                    if ev.rv > start.min_rv && let Some(f) = convert(&ev, &info, &p) {
                        push(p.form, &f, &mut buf);
                        n += 1;
                        if one_by_one {
                            break;
                        }
                    }
                    if buf.len() >= BATCH {
                        break;
                    }
                    match start.rx.try_recv() {
                        Ok(ev) => next = Some(ev),
                        Err(broadcast::error::TryRecvError::Empty) => {}
                        Err(_) => {
                            sink.send(std::mem::take(&mut buf), n).await?;
                            return Ok(());
                        }
                    }
                }
                if n > 0 {
                    delay(&sink).await;
                }
                sink.send(std::mem::take(&mut buf), std::mem::take(&mut n)).await?;
            }
        }
    }
}

async fn delay(sink: &Sink) {
    if let Some(d) = sink.plan.event_delay {
        tokio::time::sleep(d).await;
    }
}
