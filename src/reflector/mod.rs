//! The Reflector: keeps a [`DeltaFifo`] fed with the apiserver's state of one resource.
//!
//! It LISTs (page by page, or as a streaming list), then WATCHes from the list's resourceVersion,
//! and keeps doing so for ever: a watch that ends cleanly is resumed from the last resourceVersion
//! seen, an expired one (410) leads to a relist, and failures back off with jitter. It never gives
//! up on its own; every failure is reported through [`ReflectorOptions::on_error`] and the
//! [`Health`] snapshot.
//!
//! # The life cycle
//!
//! One `State` enum (private), one transition per step (`Reflector::step`):
//!
//! ```text
//!            +-----------------------------------------------+
//!            v                                               |
//!   Relist --(streaming list synced)--> Watching --(clean end / cut)--> Watch
//!     |  ^                                 |  ^                           |
//!     |  +--(410, decode error)-- Backoff <-+  +------(watch opened)-------+
//!     |                              ^                                    |
//!     +--(LIST done)--> Watch -------+--(429, refused: same RV)-----------+
//! ```
//!
//! * `Relist`: streaming list (`sendInitialEvents=true`) where the server supports it (the first
//!   `422 Invalid` turns it off for good: older servers reject it), else a paginated LIST. The list's
//!   resourceVersion follows client-go (R5): `"0"` the first time (the watch cache serves it), the last
//!   seen version afterwards (not older than it), and `""` (a consistent read) once that version is
//!   known to be gone.
//! * `Watch`: a WATCH from the last seen version, with bookmarks and a random `timeoutSeconds`.
//! * `Watching`: events go to the fifo; the last seen version advances with every event, bookmarks
//!   included. A watch that sends nothing for its own `timeoutSeconds` + 30 s is treated as dead
//!   (the server would have ended it by then), and watched again on a new connection.
//! * `Backoff`: 0.8 s doubling to 30 s, each delay stretched by a random factor in [1, 2), reset after
//!   2 minutes; a server's Retry-After is honoured when longer, up to the cap (30 s): a larger
//!   Retry-After is clamped to the cap. Every failure backs off; the only immediate retries are
//!   client-go's: one consistent relist when the list's version is gone (R9, WL7), one new streaming
//!   list when one is cut before its end (WL6), the LIST fallback of a refused streaming list, and a
//!   new watch when one ends cleanly (R18).
//!
//! Where we differ from client-go, on purpose: a very short watch (under a second, no events) is
//! retried after a backoff *from the same version* instead of relisting, since the version is still
//! good (a 410 would say otherwise); and the streaming-list fallback is remembered.

use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::future::{Either, select};

use crate::Object;
use crate::client::{Api, ListParams, ResponseBody, VersionMatch, WatchParams};
use crate::error::Error;
use crate::fifo::{DeletedObject, Delta, DeltaFifo, RawDelta, Transform, apply_transform};
use crate::watch::{RawEvent, RawObject, WatchEvent, WatchStream};

/// Called with every failure the reflector meets (it keeps going after each).
pub type ErrorCallback = Arc<dyn Fn(&Error) + Send + Sync>;

/// Tells the error callback of `e`, catching a panic of the callback itself (logged; the caller
/// goes on).
pub(crate) fn report(on_error: Option<&ErrorCallback>, e: &Error) {
    let Some(cb) = on_error else {
        return;
    };
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(e))) {
        tracing::error!(
            error = %e,
            panic = %crate::error::panic_message(&*payload),
            "the error callback panicked while it was told of this error"
        );
    }
}

/// How a reflector lists and watches. The defaults are client-go's.
///
/// ```
/// let o = informer::reflector::ReflectorOptions::default();
/// assert_eq!(o.page_size, 500);
/// assert!(o.bookmarks);
/// ```
#[derive(Clone)]
pub struct ReflectorOptions {
    /// Only objects whose labels match (`labelSelector`).
    pub label_selector: Option<String>,
    /// Only objects whose fields match (`fieldSelector`).
    pub field_selector: Option<String>,
    /// LIST page size (client-go: 500).
    pub page_size: u32,
    /// Ask for BOOKMARK events.
    pub bookmarks: bool,
    /// Watches ask for a random `timeoutSeconds` in `[min, 2 * min)` (client-go: 5 min).
    pub min_watch_timeout: Duration,
    /// A watch with no bytes for this long is dead. `None` (the default) means the watch's own
    /// `timeoutSeconds` + 30 s: the server ends every watch at its timeout, so a stream still
    /// silent after that is hung (a proxy holding it open, a server that stopped serving it).
    /// Over HTTP/2, pings find a dead connection sooner (see `Config::http2_read_idle_timeout`);
    /// HTTP/1.1 has no ping, so this is what ends a silent watch there.
    pub idle_timeout: Option<Duration>,
    /// Try streaming lists first (falls back to LIST when the server refuses).
    pub streaming_list: bool,
    /// Delays between failed lists and watches.
    pub backoff: BackoffOptions,
    /// Told of every error (list, watch, decode, handler panic) until the fifo is closed (the
    /// informer stopped): none after that.
    pub on_error: Option<ErrorCallback>,
}

impl Default for ReflectorOptions {
    fn default() -> Self {
        ReflectorOptions {
            label_selector: None,
            field_selector: None,
            page_size: 500,
            bookmarks: true,
            min_watch_timeout: Duration::from_secs(300),
            idle_timeout: None,
            streaming_list: true,
            backoff: BackoffOptions::default(),
            on_error: None,
        }
    }
}

impl std::fmt::Debug for ReflectorOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReflectorOptions")
            .field("label_selector", &self.label_selector)
            .field("field_selector", &self.field_selector)
            .field("page_size", &self.page_size)
            .field("bookmarks", &self.bookmarks)
            .field("min_watch_timeout", &self.min_watch_timeout)
            .field("streaming_list", &self.streaming_list)
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

/// The reflector's backoff (client-go R2/R3).
#[derive(Clone, Debug)]
pub struct BackoffOptions {
    /// The first delay.
    pub initial: Duration,
    /// The longest step (before jitter). A server's Retry-After longer than this is clamped to it.
    pub max: Duration,
    /// Each delay is `d * (1 + jitter * rand[0,1))`.
    pub jitter: f64,
    /// The backoff starts over when this long has passed since it last did.
    pub reset_after: Duration,
}

impl Default for BackoffOptions {
    fn default() -> Self {
        BackoffOptions {
            initial: Duration::from_millis(800),
            max: Duration::from_secs(30),
            jitter: 1.0,
            reset_after: Duration::from_secs(120),
        }
    }
}

/// Jittered exponential backoff with a periodic reset (the reflector's; tuned through
/// [`BackoffOptions`]).
#[derive(Debug)]
pub(crate) struct Backoff {
    options: BackoffOptions,
    current: Duration,
    last_reset: Instant,
    rng: crate::rng::Rng,
}

impl Backoff {
    /// A backoff with its own random generator, seeded for reproducible tests.
    pub(crate) fn new(options: BackoffOptions, seed: u64) -> Backoff {
        Backoff {
            current: options.initial,
            options,
            last_reset: Instant::now(),
            rng: crate::rng::Rng::with_seed(seed),
        }
    }

    /// The next delay.
    pub(crate) fn next_delay(&mut self) -> Duration {
        if self.last_reset.elapsed() > self.options.reset_after {
            self.current = self.options.initial;
            self.last_reset = Instant::now();
        }
        let d = self.current;
        self.current = (d * 2).min(self.options.max);
        d.mul_f64(1.0 + self.options.jitter * self.rng.f64())
    }
}

/// What the reflector is doing, for health checks and dashboards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Listing (or streaming the initial list).
    Listing,
    /// A watch is open.
    Watching,
    /// Waiting after a failure.
    BackingOff,
    /// Stopped (shut down, or the consumer went away).
    Stopped,
}

/// What one complete list (streaming or paginated) returned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListSummary {
    /// The list's resourceVersion (the streaming list's end bookmark's). Later events move the
    /// store past it; this stays the version the list was a snapshot at.
    pub resource_version: String,
    /// Objects in the complete list: after a paginated list that fell back to a full list (an
    /// expired `continue` token), the full list's count, not the sum of both attempts.
    pub objects: u64,
}

/// A snapshot of the reflector's health and counters.
#[derive(Clone, Debug)]
pub struct Health {
    /// What the reflector is doing now.
    pub phase: Phase,
    /// The newest resourceVersion seen (list, event or bookmark).
    pub resource_version: String,
    /// Failures since the last successful list or watch event.
    pub consecutive_failures: u32,
    /// The last failure, as a message.
    pub last_error: Option<String>,
    /// When the last watch event (bookmarks included) arrived.
    pub last_event: Option<Instant>,
    /// Completed lists (streaming or paginated), the first one included.
    pub lists: u64,
    /// The first complete list: what a tool reports as "synced" (kwatch's `SYNCED` line).
    pub initial_list: Option<ListSummary>,
    /// The most recent complete list.
    pub last_list: Option<ListSummary>,
    /// Watches opened.
    pub watches: u64,
    /// Watch events received (bookmarks included).
    pub events: u64,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            phase: Phase::Listing,
            resource_version: String::new(),
            consecutive_failures: 0,
            last_error: None,
            last_event: None,
            lists: 0,
            initial_list: None,
            last_list: None,
            watches: 0,
            events: 0,
        }
    }
}

/// The reflector's life cycle; see the [module docs](self).
enum State<T> {
    /// (Re)build the cache: streaming list, or paginated LIST.
    Relist,
    /// Open a watch from the last seen resourceVersion.
    Watch,
    /// A watch is open; `opened` and `events` detect very short watches (and a watch silent for
    /// the reflector's `silence_limit` is dead).
    Watching {
        stream: WatchStream<T, ResponseBody>,
        opened: Instant,
        events: u64,
    },
    /// Wait, then go on with `next` (`Relist` or `Watch`).
    Backoff {
        delay: Duration,
        next: Box<State<T>>,
    },
    /// The consumer is gone; nothing more to do.
    Stopped,
}

/// What a watch event leads to.
// Not boxed: a `Handled` is a return value that lives for one step; boxing the state would cost an
// allocation per watch event (`Continue`) to shrink the rare `Then`.
#[allow(clippy::large_enum_variant)]
enum Handled<T> {
    /// Keep reading the watch.
    Continue,
    /// The watch is over; go on with this state.
    Then(State<T>),
}

/// Lists and watches one resource into a [`DeltaFifo`]. See the [module docs](self).
pub struct Reflector<T> {
    api: Api<T>,
    fifo: DeltaFifo<T>,
    options: ReflectorOptions,
    transform: Option<Transform<T>>,
    health: Arc<Mutex<Health>>,
    backoff: Backoff,
    rng: crate::rng::Rng,
    /// The resourceVersion to resume from (client-go's `lastSyncResourceVersion`).
    last_rv: String,
    /// How long the open watch may stay silent before it is dead (see `silence_limit_of`).
    silence_limit: Duration,
    /// `last_rv` is known to be gone: the next list is a consistent read.
    rv_unavailable: bool,
    /// An RV="0" list came back paginated: the watch cache is off, keep paginating.
    paginated_result: bool,
    /// The server refused streaming lists; don't ask again.
    streaming_unsupported: bool,
    /// The last streaming list failed: use LIST for the next relist only (WL8).
    list_fallback_once: bool,
    /// R14: the open watch started from `""` or `"0"`, so the server first sends synthetic ADDED
    /// events in no version order; `last_rv` stays put until the first other event.
    holding_rv_for_synthetic_adds: bool,
    /// WL6's one immediate retry of a streaming list cut before its end was used; the next cut
    /// backs off. Cleared by a completed list.
    streaming_retried_at_once: bool,
}

impl<T: Object + Clone> Reflector<T> {
    /// A reflector for `api` (its resource and namespace) feeding `fifo`.
    pub fn new(api: Api<T>, fifo: DeltaFifo<T>, options: ReflectorOptions) -> Reflector<T> {
        let seed = crate::rng::Rng::new().u64();
        Reflector {
            backoff: Backoff::new(options.backoff.clone(), seed),
            rng: crate::rng::Rng::with_seed(seed ^ 0x9e37_79b9_7f4a_7c15),
            api,
            fifo,
            options,
            transform: None,
            health: Arc::new(Mutex::new(Health::default())),
            last_rv: String::new(),
            silence_limit: Duration::MAX,
            rv_unavailable: false,
            paginated_result: false,
            streaming_unsupported: false,
            list_fallback_once: false,
            holding_rv_for_synthetic_adds: false,
            streaming_retried_at_once: false,
        }
    }

    /// Applies `f` to every object once, before it is queued.
    pub fn with_transform(mut self, f: Transform<T>) -> Self {
        // Watch events reach the fifo undecoded: it applies the transform when it decodes them.
        self.fifo.set_transform(f.clone());
        self.transform = Some(f);
        self
    }

    /// A handle on the reflector's health, updated as it runs.
    pub fn health_handle(&self) -> Arc<Mutex<Health>> {
        self.health.clone()
    }

    /// Runs until the fifo's consumer goes away (or the future is dropped). Logs go to a
    /// `reflector` span naming the resource and namespace.
    pub async fn run(mut self) {
        use tracing::Instrument as _;
        let span = tracing::info_span!(
            "reflector",
            resource = %self.api.resource().plural,
            namespace = self.api.namespace().unwrap_or("*"),
        );
        async move {
            let mut state = State::Relist;
            loop {
                state = self.step(state).await;
                if matches!(state, State::Stopped) {
                    tracing::debug!("the fifo's consumer is gone; stopping");
                    self.health.lock().unwrap().phase = Phase::Stopped;
                    return;
                }
            }
        }
        .instrument(span)
        .await
    }

    /// One transition of the life cycle.
    async fn step(&mut self, state: State<T>) -> State<T> {
        match state {
            State::Relist => {
                self.set_phase(Phase::Listing);
                if self.options.streaming_list
                    && !self.streaming_unsupported
                    && !self.list_fallback_once
                {
                    // Boxed, like `list` and `open_watch`: a reflector spends its life watching,
                    // and its task then holds only the watching state's locals, not the largest
                    // of every state's (11.4 KB per reflector before, in a debug build).
                    Box::pin(self.streaming_list()).await
                } else {
                    self.list_fallback_once = false;
                    Box::pin(self.list()).await
                }
            }
            State::Watch => Box::pin(self.open_watch()).await,
            State::Watching {
                mut stream,
                opened,
                events,
            } => {
                let idle = self.silence_limit;
                // The fifo decodes events later, when their key is handed out: a failure there
                // means the store missed an event, and the relist must not wait for the next one.
                // `select` polls its first future first: a decode failure wins over an event
                // that is ready at the same time.
                let next = {
                    let decode_failed = pin!(self.fifo.decode_failed());
                    let event = pin!(tokio::time::timeout(idle, stream.next_raw()));
                    match select(decode_failed, event).await {
                        Either::Left(((), _)) => None,
                        Either::Right((next, _)) => Some(next),
                    }
                };
                let Some(next) = next else {
                    return match self.fifo.take_decode_error() {
                        Some(e) => {
                            self.fail(&e);
                            self.backoff_then(State::Relist, &e)
                        }
                        None => State::Watching {
                            stream,
                            opened,
                            events,
                        },
                    };
                };
                match next {
                    Err(_) => {
                        self.fail(&Error::Timeout(format!(
                            "watch sent nothing for {idle:?}; treating it as dead"
                        )));
                        State::Watch
                    }
                    Ok(Some(Ok(event))) => match self.handle_raw_event(event).await {
                        Handled::Continue => State::Watching {
                            stream,
                            opened,
                            events: events + 1,
                        },
                        Handled::Then(next) => next,
                    },
                    Ok(Some(Err(e))) => self.watch_failed(e, opened, events),
                    Ok(None) => self.watch_ended(opened, events),
                }
            }
            State::Backoff { delay, next } => {
                self.set_phase(Phase::BackingOff);
                tokio::time::sleep(delay).await;
                *next
            }
            State::Stopped => State::Stopped,
        }
    }

    // ----- LIST ------------------------------------------------------------------------------------

    /// The list's resourceVersion (R5).
    fn relist_version(&self) -> &str {
        if self.rv_unavailable {
            ""
        } else if self.last_rv.is_empty() {
            "0"
        } else {
            &self.last_rv
        }
    }

    /// A paginated LIST into the fifo (R5-R11).
    async fn list(&mut self) -> State<T> {
        let rv = self.relist_version().to_owned();
        tracing::debug!(resource_version = %rv, "listing");
        // R6: with an RV other than "" or "0", a limit would make the read exact (X1): no limit,
        // so the watch cache serves it. With "0" the watch cache ignores the limit anyway. But once
        // an RV="0" list came back paginated (R7: the watch cache is off for this resource, etcd
        // answers), every list keeps paginating: an unpaginated list from etcd would be one huge
        // body.
        let limit = match rv.as_str() {
            "" | "0" => Some(self.options.page_size),
            _ if self.paginated_result => Some(self.options.page_size),
            _ => None,
        };
        let mut params = ListParams {
            label_selector: self.options.label_selector.clone(),
            field_selector: self.options.field_selector.clone(),
            limit,
            resource_version: Some(rv.clone()),
            ..Default::default()
        };
        if !self.fifo.begin_relist() {
            return State::Stopped;
        }
        let mut list_rv = None;
        let mut listed_objects = 0u64;
        let mut full_list_retried = false;
        loop {
            match self.api.list(&params).await {
                Ok(page) => {
                    if list_rv.is_none() {
                        list_rv = Some(page.metadata.resource_version.clone());
                        if rv == "0" && !page.metadata.continue_token.is_empty() {
                            self.paginated_result = true;
                        }
                    }
                    listed_objects += page.items.len() as u64;
                    let items = match page
                        .items
                        .into_iter()
                        .map(|o| self.transformed(o).map(Arc::new))
                        .collect()
                    {
                        Ok(items) => items,
                        Err(e) => return self.list_failed(e),
                    };
                    if !self.fifo.relist_page_async(items).await {
                        return State::Stopped;
                    }
                    if page.metadata.continue_token.is_empty() {
                        break;
                    }
                    params.continue_token = Some(page.metadata.continue_token);
                    params.resource_version = None;
                    params.version_match = None;
                }
                Err(e)
                    if e.is_expired() && params.continue_token.is_some() && !full_list_retried =>
                {
                    // R8: a later page's token expired: one unpaginated list at the original RV.
                    tracing::debug!(error = %e, "continue token expired; listing without pagination");
                    full_list_retried = true;
                    list_rv = None;
                    listed_objects = 0;
                    params.continue_token = None;
                    params.limit = None;
                    params.resource_version = Some(rv.clone());
                    if !self.fifo.begin_relist() {
                        return State::Stopped;
                    }
                }
                Err(e) => return self.list_failed(e),
            }
        }
        let list_rv = list_rv.unwrap_or_default();
        tracing::info!(resource_version = %list_rv, "listed");
        // Recorded before the list can complete in the fifo: whoever sees the sync (kwatch's
        // SYNCED line) reads this list's summary from the health, never the one before.
        self.listed(list_rv.to_string(), listed_objects);
        if !self.fifo.end_relist() || !self.fifo.bookmark(&list_rv) {
            return State::Stopped;
        }
        State::Watch
    }

    /// R9: an expired or too-new version makes the next list a consistent read, at once; anything
    /// else backs off and relists.
    fn list_failed(&mut self, e: Error) -> State<T> {
        self.fail(&e);
        let too_large = e
            .status()
            .is_some_and(|s| s.is_too_large_resource_version());
        if (e.is_expired() || too_large) && !self.rv_unavailable {
            self.rv_unavailable = true;
            return State::Relist;
        }
        self.backoff_then(State::Relist, &e)
    }

    fn listed(&mut self, rv: String, objects: u64) {
        self.rv_unavailable = false;
        self.streaming_retried_at_once = false;
        let summary = ListSummary {
            resource_version: rv.clone(),
            objects,
        };
        self.last_rv = rv;
        let mut h = self.health.lock().unwrap();
        h.lists += 1;
        if h.initial_list.is_none() {
            h.initial_list = Some(summary.clone());
        }
        h.last_list = Some(summary);
        h.resource_version = self.last_rv.clone();
        h.consecutive_failures = 0;
    }

    /// A streaming list (WL1-WL9): initial ADDED events are relist pages, the bookmark annotated
    /// `k8s.io/initial-events-end` ends the list, and the same stream goes on as a normal watch.
    async fn streaming_list(&mut self) -> State<T> {
        let timeout_seconds = self.watch_timeout();
        let rv = if self.rv_unavailable {
            String::new()
        } else {
            self.last_rv.clone()
        };
        let params = WatchParams {
            label_selector: self.options.label_selector.clone(),
            field_selector: self.options.field_selector.clone(),
            resource_version: Some(rv),
            version_match: Some(VersionMatch::NotOlderThan),
            send_initial_events: Some(true),
            allow_bookmarks: true,
            timeout_seconds: Some(timeout_seconds),
        };
        let mut stream = match self.api.watch(&params).await {
            Ok(s) => s,
            Err(e) => return self.streaming_failed(e),
        };
        self.health.lock().unwrap().watches += 1;
        if !self.fifo.begin_relist() {
            return State::Stopped;
        }
        let opened = Instant::now();
        // The initial events go to the fifo in pages, raw (decoded there), or decoded here when
        // the fast path did not take them; one of the two pages is empty at any time, so the
        // order is kept.
        let mut raw_page: Vec<RawObject> = Vec::new();
        let mut page: Vec<Arc<T>> = Vec::new();
        let page_size = self.options.page_size.max(1) as usize;
        let mut events = 0u64;
        // Objects the list holds so far: one per ADDED; a MODIFIED during the initial events
        // changes one already listed, a DELETED removes one (WL3). Counted, not collected.
        let mut listed_objects = 0u64;
        self.silence_limit = self.silence_limit_of(timeout_seconds);
        let idle = self.silence_limit;
        loop {
            let next = match tokio::time::timeout(idle, stream.next_raw()).await {
                Ok(n) => n,
                Err(_) => Some(Err(Error::Timeout(format!(
                    "streaming list sent nothing for {idle:?}"
                )))),
            };
            match next {
                Some(Ok(event)) => {
                    events += 1;
                    self.touch_event();
                    let added = matches!(
                        event,
                        RawEvent::Added(_) | RawEvent::Decoded(WatchEvent::Added(_))
                    );
                    listed_objects += u64::from(added);
                    let flushed = match event {
                        RawEvent::Added(o) | RawEvent::Modified(o) => {
                            let mut ok = self.flush_pages(&mut Vec::new(), &mut page).await;
                            raw_page.push(o);
                            if raw_page.len() >= page_size {
                                ok &= self.flush_pages(&mut raw_page, &mut page).await;
                            }
                            ok
                        }
                        RawEvent::Decoded(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                            let mut ok = self.flush_pages(&mut raw_page, &mut Vec::new()).await;
                            match self.transformed(o) {
                                Ok(o) => page.push(Arc::new(o)),
                                Err(e) => return self.streaming_failed(e),
                            }
                            if page.len() >= page_size {
                                ok &= self.flush_pages(&mut raw_page, &mut page).await;
                            }
                            ok
                        }
                        // Keep the order: what was listed before the delete goes first.
                        RawEvent::Deleted(o) => {
                            listed_objects = listed_objects.saturating_sub(1);
                            self.flush_pages(&mut raw_page, &mut page).await
                                && self.fifo.push_raw(RawDelta::Deleted(o)).await
                        }
                        RawEvent::Decoded(WatchEvent::Deleted(o)) => {
                            listed_objects = listed_objects.saturating_sub(1);
                            let o = match self.transformed(o) {
                                Ok(o) => Arc::new(o),
                                Err(e) => return self.streaming_failed(e),
                            };
                            self.flush_pages(&mut raw_page, &mut page).await
                                && self.fifo.push(Delta::Deleted(DeletedObject::Final(o)))
                        }
                        RawEvent::Decoded(WatchEvent::Bookmark(b)) if b.is_initial_events_end() => {
                            if !self.flush_pages(&mut raw_page, &mut page).await {
                                return State::Stopped;
                            }
                            // Before the list can complete in the fifo (see `list`).
                            self.listed(b.resource_version.clone(), listed_objects);
                            if !self.fifo.end_relist() || !self.fifo.bookmark(&b.resource_version) {
                                return State::Stopped;
                            }
                            // The first sync: the events that follow wait in the socket until the
                            // consumer has processed the list, as they would before a LIST's watch
                            // opens. Reading them now would only take CPU from the list's decode
                            // (measured: sync 3x slower under a flood on 2 cores).
                            if !self.fifo.has_synced() && !self.fifo.wait_synced().await {
                                return State::Stopped;
                            }
                            // WL5: the same stream goes on as a normal watch whose events all
                            // carry versions in order (client-go's propagateRVFromStart).
                            self.holding_rv_for_synthetic_adds = false;
                            self.set_phase(Phase::Watching);
                            return State::Watching {
                                stream,
                                opened,
                                events,
                            };
                        }
                        RawEvent::Decoded(WatchEvent::Bookmark(_)) => true,
                        RawEvent::Decoded(WatchEvent::Error(status)) => {
                            return self.streaming_failed(Error::from_status(status));
                        }
                    };
                    if !flushed {
                        return State::Stopped;
                    }
                }
                Some(Err(e)) => {
                    // A cut stream before the bookmark: try again at once (WL6), once; unless
                    // nothing at all came, or the stream was garbled, or the one immediate retry
                    // was used already: a server that always cuts must not be hammered.
                    self.fail(&e);
                    if matches!(e, Error::Decode { .. } | Error::FrameTooLarge { .. })
                        || events == 0
                        || self.streaming_retried_at_once
                    {
                        return self.backoff_then(State::Relist, &e);
                    }
                    self.streaming_retried_at_once = true;
                    return State::Relist;
                }
                None => {
                    if events == 0 && opened.elapsed() < Duration::from_secs(1) {
                        // WL6 + R17: a very short empty stream; the server probably does not
                        // stream lists the way we asked. Fall back to LIST for this round.
                        let e = Error::EndedTooSoon(
                            "streaming list ended at once with no events".into(),
                        );
                        self.fail(&e);
                        self.list_fallback_once = true;
                        return State::Relist;
                    }
                    // WL6: closed before the bookmark; a new streaming list at once, once.
                    let e = Error::Protocol(
                        "the streaming list ended before its initial-events-end bookmark".into(),
                    );
                    self.fail(&e);
                    if self.streaming_retried_at_once {
                        return self.backoff_then(State::Relist, &e);
                    }
                    self.streaming_retried_at_once = true;
                    return State::Relist;
                }
            }
        }
    }

    /// WL7: 429 and refused connections retry after a backoff; an expired version retries at once
    /// with a consistent read; `Invalid`/`BadRequest` (servers without streaming lists) fall back to
    /// LIST, for good; anything else falls back to LIST for this round.
    fn streaming_failed(&mut self, e: Error) -> State<T> {
        self.fail(&e);
        if e.is_expired()
            || e.status()
                .is_some_and(|s| s.is_too_large_resource_version())
        {
            if self.rv_unavailable {
                return self.backoff_then(State::Relist, &e);
            }
            self.rv_unavailable = true;
            return State::Relist;
        }
        if is_refused(&e) || e.http_code() == Some(429) {
            return self.backoff_then(State::Relist, &e);
        }
        if matches!(e.http_code(), Some(400 | 422)) {
            tracing::info!("the server does not support streaming lists; using LIST from now on");
            self.streaming_unsupported = true;
        }
        self.list_fallback_once = true;
        State::Relist
    }

    /// Hands the streaming list's pending page (raw or decoded, at most one is non-empty) to the
    /// fifo, waiting while it is full. `false` if the fifo is closed.
    async fn flush_pages(&self, raw: &mut Vec<RawObject>, decoded: &mut Vec<Arc<T>>) -> bool {
        if !raw.is_empty() && !self.fifo.relist_raw_page(std::mem::take(raw)).await {
            return false;
        }
        decoded.is_empty() || self.fifo.relist_page_async(std::mem::take(decoded)).await
    }

    // ----- WATCH -----------------------------------------------------------------------------------

    /// `timeoutSeconds` for the next watch: random in `[min, 2 * min)` (R4).
    fn watch_timeout(&mut self) -> u32 {
        let min = self.options.min_watch_timeout.as_secs_f64();
        (min + self.rng.f64() * min).max(1.0) as u32
    }

    /// How long a watch that asked for `timeout_seconds` may stay silent before it is dead.
    fn silence_limit_of(&self, timeout_seconds: u32) -> Duration {
        self.options
            .idle_timeout
            .unwrap_or(Duration::from_secs(u64::from(timeout_seconds) + 30))
    }

    /// Opens a watch from the last seen version (R13, R19).
    async fn open_watch(&mut self) -> State<T> {
        tracing::debug!(resource_version = %self.last_rv, "watching");
        let timeout_seconds = self.watch_timeout();
        let params = WatchParams {
            label_selector: self.options.label_selector.clone(),
            field_selector: self.options.field_selector.clone(),
            resource_version: Some(self.last_rv.clone()),
            allow_bookmarks: self.options.bookmarks,
            timeout_seconds: Some(timeout_seconds),
            ..Default::default()
        };
        match self.api.watch(&params).await {
            Ok(stream) => {
                self.silence_limit = self.silence_limit_of(timeout_seconds);
                self.holding_rv_for_synthetic_adds = matches!(self.last_rv.as_str(), "" | "0");
                self.set_phase(Phase::Watching);
                self.health.lock().unwrap().watches += 1;
                State::Watching {
                    stream,
                    opened: Instant::now(),
                    events: 0,
                }
            }
            Err(e) => {
                self.fail(&e);
                if is_refused(&e) || e.http_code() == Some(429) {
                    // R19: the version is still good; try the watch again after a while.
                    self.backoff_then(State::Watch, &e)
                } else {
                    self.backoff_then(State::Relist, &e)
                }
            }
        }
    }

    /// Queues one watch event. Object events go to the fifo as raw JSON, decoded there only if they
    /// survive coalescing; the push waits while the fifo is full, so a slow consumer slows the
    /// reading of the watch (back-pressure) instead of growing memory. A raw object that the fifo
    /// could not decode means the store missed an event: the `Watching` step relists (R22).
    async fn handle_raw_event(&mut self, event: RawEvent<T>) -> Handled<T> {
        let delta = match event {
            RawEvent::Added(o) => RawDelta::Added(o),
            RawEvent::Modified(o) => RawDelta::Modified(o),
            RawEvent::Deleted(o) => RawDelta::Deleted(o),
            RawEvent::Decoded(event) => return self.handle_event(event),
        };
        // R14, as in `handle_event`: synthetic ADDED events (of a watch from "" or "0") come in
        // no version order; the version advances from the first event of another type on.
        if self.holding_rv_for_synthetic_adds && !matches!(delta, RawDelta::Added(_)) {
            self.holding_rv_for_synthetic_adds = false;
        }
        let rv = delta.object().resource_version();
        if !rv.is_empty() && !self.holding_rv_for_synthetic_adds {
            self.last_rv.clear();
            self.last_rv.push_str(rv);
        }
        if !self.fifo.push_raw(delta).await {
            return Handled::Then(State::Stopped);
        }
        self.event_taken();
        Handled::Continue
    }

    /// Records a watch event in the health snapshot: one lock, and the version copied into a
    /// buffer that is reused.
    fn event_taken(&self) {
        let mut h = self.health.lock().unwrap();
        h.events += 1;
        h.last_event = Some(Instant::now());
        h.resource_version.clone_from(&self.last_rv);
        h.consecutive_failures = 0;
    }

    /// Queues one decoded event (R15, R16). Per event: one health lock, and the version copied into
    /// buffers that are reused (no allocation beyond the object's own `Arc`).
    fn handle_event(&mut self, event: WatchEvent<T>) -> Handled<T> {
        let event = match event {
            WatchEvent::Added(o) => self.transformed(o).map(WatchEvent::Added),
            WatchEvent::Modified(o) => self.transformed(o).map(WatchEvent::Modified),
            WatchEvent::Deleted(o) => self.transformed(o).map(WatchEvent::Deleted),
            other => Ok(other),
        };
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                // The transform panicked: the store would miss this object; relist, as for an
                // object that does not decode.
                self.fail(&e);
                return Handled::Then(self.backoff_then(State::Relist, &e));
            }
        };
        let delta = match event {
            WatchEvent::Added(o) => Some(Delta::Added(Arc::new(o))),
            WatchEvent::Modified(o) => Some(Delta::Modified(Arc::new(o))),
            WatchEvent::Deleted(o) => Some(Delta::Deleted(DeletedObject::Final(Arc::new(o)))),
            WatchEvent::Bookmark(b) => {
                self.holding_rv_for_synthetic_adds = false;
                if !b.resource_version.is_empty() {
                    self.last_rv = b.resource_version;
                    // Events carry their version to the fifo in their object; a bookmark's comes
                    // alone.
                    if !self.fifo.bookmark(&self.last_rv) {
                        return Handled::Then(State::Stopped);
                    }
                }
                None
            }
            WatchEvent::Error(status) => {
                self.touch_event();
                let e = Error::from_status(status);
                self.fail(&e);
                // R18: 429 (the server is busy; the version is still good) watches again from the
                // same version after a backoff, without relisting. An expired watch relists (from
                // the last version, which a LIST may still serve) after one backoff step; so does
                // any other in-stream error.
                let next = if e.http_code() == Some(429) {
                    State::Watch
                } else {
                    State::Relist
                };
                return Handled::Then(self.backoff_then(next, &e));
            }
        };
        if let Some(d) = delta {
            // R14: synthetic ADDED events (of a watch from "" or "0") come in no version order;
            // the version advances from the first event of another type on.
            if self.holding_rv_for_synthetic_adds && !matches!(d, Delta::Added(_)) {
                self.holding_rv_for_synthetic_adds = false;
            }
            let rv = d.resource_version();
            if !rv.is_empty() && !self.holding_rv_for_synthetic_adds {
                self.last_rv.clear();
                self.last_rv.push_str(rv);
            }
            if !self.fifo.push(d) {
                return Handled::Then(State::Stopped);
            }
        }
        self.event_taken();
        Handled::Continue
    }

    /// The body ended cleanly (R17, R18): watch again from the last version, at once, unless the
    /// watch was very short and empty, which would spin.
    fn watch_ended(&mut self, opened: Instant, events: u64) -> State<T> {
        if events == 0 && opened.elapsed() < Duration::from_secs(1) {
            let e = Error::EndedTooSoon(
                "very short watch: ended in under a second with no events".into(),
            );
            self.fail(&e);
            return self.backoff_then(State::Watch, &e);
        }
        State::Watch
    }

    /// The stream broke (R22): a cut connection re-watches from the last version; an undecodable or
    /// oversized event means the cache may have missed something, so relist.
    fn watch_failed(&mut self, e: Error, opened: Instant, events: u64) -> State<T> {
        self.fail(&e);
        match e {
            Error::Decode { .. } | Error::FrameTooLarge { .. } => {
                self.backoff_then(State::Relist, &e)
            }
            _ => self.watch_ended(opened, events),
        }
    }

    // ----- helpers ---------------------------------------------------------------------------------

    /// `o` through the transform, if any; a panic of the transform is an error.
    fn transformed(&self, o: T) -> Result<T, Error> {
        match &self.transform {
            Some(f) => apply_transform(f, o),
            None => Ok(o),
        }
    }

    fn set_phase(&self, phase: Phase) {
        self.health.lock().unwrap().phase = phase;
    }

    fn touch_event(&self) {
        let mut h = self.health.lock().unwrap();
        h.events += 1;
        h.last_event = Some(Instant::now());
    }

    /// Reports a failure to the callback, the health snapshot and the log; nothing once the fifo
    /// is closed (the informer was stopped): what a reflector meets while it winds down, such as
    /// its connection torn down with the runtime, is not a failure of the watch.
    fn fail(&self, e: &Error) {
        if self.fifo.is_closed() {
            return;
        }
        tracing::warn!(resource = %self.api.resource().plural, error = %e, "reflector");
        {
            let mut h = self.health.lock().unwrap();
            h.consecutive_failures += 1;
            h.last_error = Some(e.to_string());
        }
        report(self.options.on_error.as_ref(), e);
    }

    /// Waits a backoff step (or the server's Retry-After, if longer), then goes on with `next`.
    ///
    /// The Retry-After is clamped to the backoff cap ([`BackoffOptions::max`]): a server (or a
    /// proxy) asking for `Retry-After: 4294967295` must not park the reflector for a century.
    fn backoff_then(&mut self, next: State<T>, e: &Error) -> State<T> {
        let mut delay = self.backoff.next_delay();
        if let Some(secs) = e.retry_after_seconds() {
            let asked = Duration::from_secs(secs.into());
            delay = delay.max(asked.min(self.options.backoff.max));
        }
        tracing::debug!(?delay, "backing off");
        State::Backoff {
            delay,
            next: Box::new(next),
        }
    }
}

/// True for "connection refused": the server is not there (yet); its state is not in question.
fn is_refused(e: &Error) -> bool {
    let Error::Transport { source, .. } = e else {
        return false;
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            if io.kind() == std::io::ErrorKind::ConnectionRefused {
                return true;
            }
        }
        cause = c.source();
    }
    false
}

#[cfg(test)]
mod backoff_tests {
    use super::{Backoff, BackoffOptions};

    #[test]
    fn doubles_up_to_the_maximum() {
        let mut b = Backoff::new(
            BackoffOptions {
                jitter: 0.0,
                ..Default::default()
            },
            1,
        );
        let delays: Vec<f64> = (0..8).map(|_| b.next_delay().as_secs_f64()).collect();
        assert_eq!(delays, [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]);
    }
}
