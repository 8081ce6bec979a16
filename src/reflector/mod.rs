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
//!   Relist        --(streaming list opened)---->  InitialEvents
//!   Relist        --(paginated LIST done)------>  Watch
//!   Relist        --(list failed)-------------->  Backoff -> Relist  (410: at once, with "")
//!   InitialEvents --(initial-events-end)------->  Watching           (the same stream, WL5)
//!   InitialEvents --(cut before the end)------->  Relist             (at once once, then backs off)
//!   InitialEvents --(no end after 10 s)-------->  InitialEvents      (Late: reported, WL9)
//!   InitialEvents --(no end by the deadline)--->  Relist             (a paginated LIST this round)
//!   Watch         --(watch opened)------------->  Watching
//!   Watch         --(429, refused)------------->  Backoff -> Watch   (the version is still good)
//!   Watch         --(other failure)------------>  Backoff -> Relist
//!   Watching      --(clean end, cut)----------->  Watch              (from the last seen version)
//!   Watching      --(410, decode error)-------->  Backoff -> Relist
//!   any           --(the fifo's consumer gone)->  Stopped
//! ```
//!
//! * `Relist`: streaming list (`sendInitialEvents=true`), unless turned off in the options; a
//!   streaming list that fails (older servers reject it with `422 Invalid`) falls back to a
//!   paginated LIST for that relist only, and the next relist streams again (WL8). The list's
//!   resourceVersion follows client-go (R5): `"0"` the first time (the watch cache serves it), the last
//!   seen version afterwards (not older than it), and `""` (a consistent read) once that version is
//!   known to be gone.
//! * `InitialEvents`: the streaming list's initial events go to the fifo as relist pages, one event
//!   per step; its initial-events-end bookmark completes the list and the same stream goes on as
//!   `Watching` (WL5). A stream cut before that bookmark lists again (WL6). A stream that stays
//!   alive without that bookmark is reported after [`INITIAL_EVENTS_WARNING`] (10 s, WL9; the
//!   state's list turns `Late`) and given up at [`ReflectorOptions::initial_events_deadline`] for
//!   a paginated LIST (for this round only).
//! * `Watch`: a WATCH from the last seen version, with bookmarks and a random `timeoutSeconds`.
//! * `Watching`: events go to the fifo; the last seen version advances with every event, bookmarks
//!   included. A watch that sends nothing for its own `timeoutSeconds` + 30 s is hung (the server
//!   would have ended it by then): a failure, and watched again on a new connection. Over
//!   HTTP/1.1, which has no ping, a watch with bookmarks is also watched again after
//!   [`BOOKMARK_SILENCE`] (75 s) of silence, from the last seen version, without a relist; that
//!   one is routine, not a failure: a watch of a quiet resource gets no bookmark at all (the
//!   watch cache sends one only at a version newer than the watch's), so a healthy quiet watch
//!   is re-opened every 75 s (R24). Over HTTP/2 the connection's pings find a dead peer.
//! * `Backoff`: 0.8 s doubling to 30 s (the first failure waits too), each delay stretched by a
//!   random factor in [1, 2), reset after 2 minutes without a failure; a server's Retry-After is
//!   honoured when longer, up to the cap (30 s): a larger
//!   Retry-After is clamped to the cap. Every failure backs off; the only immediate retries are
//!   client-go's: one consistent relist when the list's version is gone (R9, WL7), one new streaming
//!   list when one is cut before its end (WL6), the LIST fallback of a refused streaming list, and a
//!   new watch when one ends cleanly (R18).
//!
//! A watch that cannot be opened for what client-go's REST client retries itself (a transport
//! error or a timeout, a 5xx with a `Retry-After`) is tried again from the same version after a
//! backoff, up to 10 times in a row (client-go's `maxRetries`), and only then relisted (R23):
//! the version is not in question, and a relist would cost the server a LIST for nothing.
//!
//! Where we differ from client-go, on purpose: a very short watch (under a second, no events) is
//! retried after a backoff *from the same version* instead of relisting, since the version is still
//! good (a 410 would say otherwise).
//!
//! # Failures and routine events
//!
//! What the reflector meets by design is not a failure: it is logged (debug or info), not told to
//! [`ReflectorOptions::on_error`], and leaves [`Health::consecutive_failures`] and
//! [`Health::last_error`] alone, as client-go's error handler never sees these:
//!
//! * a watch the server ends at its timeout, watched again (R18);
//! * a quiet watch re-opened after [`BOOKMARK_SILENCE`] (R24);
//! * a streaming list refused by the apiserver (`422 Invalid` or `400 BadRequest`: every relist
//!   against a server before 1.27), followed by a paginated LIST (WL1, logged at info);
//! * a watch that could not be opened for a transport error, a timeout or a 5xx with
//!   `Retry-After`, watched again from the same version (R23), up to the tenth in a row (a
//!   failure, followed by a relist): client-go's REST client retries these before its reflector
//!   sees an error;
//! * an expired watch (an `ERROR` event with 410), followed by a relist (R18), and a version found
//!   gone (410, or too large) by a list, followed at once by a consistent one (R9, WL7). A
//!   consistent list that fails so too is a failure.
//!
//! They stay visible in the counters: [`Health::lists`] counts every relist, [`Health::watches`]
//! every watch opened (both exported as metrics with the feature `metrics`).

mod backoff;
mod health;
mod list;
mod relist;
mod stream;
mod watching;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::Object;
use crate::client::{Api, ResponseBody};
use crate::error::Error;
use crate::fifo::{DeltaFifo, Transform, apply_transform};
use crate::watch::WatchStream;

pub(crate) use backoff::Backoff;
pub use backoff::BackoffOptions;
pub use health::{Health, ListSummary, Phase};
pub(crate) use relist::{CompletedList, RelistRequests};
use stream::InitialEvents;

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

/// The default [`ReflectorOptions::bookmark_silence`]: over HTTP/1.1, a watch with bookmarks that
/// has heard nothing for 75 s is watched again from its last version. Apiservers send a bookmark
/// to a watch whose resource changed about every 60 s (the watch cache's
/// `defaultBookmarkFrequency`), so a live stream is rarely that silent; a watch of a quiet
/// resource gets none, and is re-opened every 75 s, routinely (no failure, R24).
///
/// ```
/// use informer::reflector::{BOOKMARK_SILENCE, ReflectorOptions};
/// assert_eq!(BOOKMARK_SILENCE.as_secs(), 75);
/// assert_eq!(ReflectorOptions::default().bookmark_silence, BOOKMARK_SILENCE);
/// ```
pub const BOOKMARK_SILENCE: Duration = Duration::from_secs(75);

/// A streaming list that has not sent its initial-events-end bookmark this long after it opened
/// is reported (client-go's WL9 warns after 10 s), once; the reflector goes on waiting until
/// [`ReflectorOptions::initial_events_deadline`].
///
/// ```
/// assert_eq!(informer::reflector::INITIAL_EVENTS_WARNING.as_secs(), 10);
/// ```
pub const INITIAL_EVENTS_WARNING: Duration = Duration::from_secs(10);

/// The default [`ReflectorOptions::initial_events_deadline`]: a streaming list whose initial events
/// have not ended 60 s after it opened is given up for a paginated LIST. An apiserver streams
/// tens of thousands of objects in a few seconds; a stream still in its initial events after a
/// minute is stuck (a server that never sends the end bookmark), even if it trickles.
///
/// ```
/// use informer::reflector::{INITIAL_EVENTS_DEADLINE, ReflectorOptions};
/// assert_eq!(ReflectorOptions::default().initial_events_deadline, INITIAL_EVENTS_DEADLINE);
/// ```
pub const INITIAL_EVENTS_DEADLINE: Duration = Duration::from_secs(60);

/// How many times in a row a request that client-go's REST client would retry itself is tried
/// again before the reflector gives it up: a streaming list answered with a 5xx and a
/// `Retry-After` (then a paginated LIST, this round), a watch that could not be opened for a
/// transport error or a timeout, or for a 5xx with a `Retry-After` (then a relist). client-go's
/// REST client retries such requests up to `maxRetries` (10) times before its caller sees the
/// error (R23). A 429 and a refused connection are tried again without a limit (R19, WL7).
const MAX_REST_RETRIES: u32 = 10;

/// The default [`ReflectorOptions::max_list_pages`]: 10,000 pages, 5 million objects at the default
/// page size (the largest clusters hold a few hundred thousand of a kind).
///
/// ```
/// use informer::reflector::{MAX_LIST_PAGES, ReflectorOptions};
/// assert_eq!(ReflectorOptions::default().max_list_pages, MAX_LIST_PAGES);
/// ```
pub const MAX_LIST_PAGES: u32 = 10_000;

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
    /// The most pages one paginated LIST may take (default [`MAX_LIST_PAGES`], 10,000: five
    /// million objects at the default page size). A LIST still giving `continue` tokens past it,
    /// or giving a token it gave before, is a failure (reported, backed off, listed again): a
    /// server that pages for ever would otherwise hold the reflector, and grow its relist, for
    /// ever. Raise it along with a much smaller `page_size`.
    pub max_list_pages: u32,
    /// Ask for BOOKMARK events.
    pub bookmarks: bool,
    /// Watches ask for a random `timeoutSeconds` in `[min, 2 * min)` (client-go: 5 min).
    pub min_watch_timeout: Duration,
    /// A watch with no bytes for this long is watched again. `None` (the default) means the
    /// watch's own `timeoutSeconds` + 30 s: the server ends every watch at its timeout, so a
    /// stream still silent after that is hung (a proxy holding it open, a server that stopped
    /// serving it), a failure. A limit shorter than the watch's `timeoutSeconds` can be reached
    /// by a healthy quiet watch, so reaching it is routine (not a failure).
    /// Over HTTP/2, pings find a dead connection sooner (see `Config::http2_read_idle_timeout`);
    /// HTTP/1.1 has no ping, so this is what ends a silent watch there.
    pub idle_timeout: Option<Duration>,
    /// Over HTTP/1.1, a watch that asked for bookmarks and has heard nothing at all (no event, no
    /// bookmark) for this long is watched again from the last seen resourceVersion (no relist),
    /// on a new connection: a dead peer is found this way. Apiservers send a watch a bookmark
    /// about every minute (the watch cache's `defaultBookmarkFrequency`) once its resource has
    /// changed, so the default, [`BOOKMARK_SILENCE`] (75 s), leaves a quarter of a period of
    /// slack; a watch of a quiet resource gets none, so this re-watch is routine: logged at
    /// debug, not a failure (no [`on_error`](Self::on_error)). Not used over HTTP/2 (the
    /// connection's pings find a dead peer there), nor when [`idle_timeout`](Self::idle_timeout)
    /// is set, nor for watches without bookmarks.
    pub bookmark_silence: Duration,
    /// Try streaming lists first (falls back to LIST when the server refuses).
    pub streaming_list: bool,
    /// How long a streaming list may take to send its initial-events-end bookmark. Past
    /// [`INITIAL_EVENTS_WARNING`] (10 s, client-go's WL9) the reflector reports it (the error
    /// callback, [`Health::last_error`]) and goes on waiting; past this deadline it gives the
    /// stream up and lists with pages for this round (the next relist streams again). A stream
    /// that is alive (events or bookmarks trickling) but never ends its initial events would
    /// otherwise never sync. Default [`INITIAL_EVENTS_DEADLINE`] (60 s).
    pub initial_events_deadline: Duration,
    /// Delays between failed lists and watches.
    pub backoff: BackoffOptions,
    /// Drop every object's `managedFields` (server-side apply's bookkeeping) before it is
    /// stored: on a Pod as a cluster holds it, 1.8 KB of its 4.7 KB, and the largest single
    /// part of what the store keeps (`docs/measurements.md`). Few controllers read it; client-go
    /// users strip it with `SetTransform`. Applied before any transform of your own. Default
    /// `false`, as client-go keeps it.
    pub drop_managed_fields: bool,
    /// Told of every error (list, watch, decode, handler panic) until the fifo is closed (the
    /// informer stopped): none after that. Routine events (a quiet watch re-opened, ...) are not
    /// errors: the [module docs](self#failures-and-routine-events) list them.
    pub on_error: Option<ErrorCallback>,
}

impl Default for ReflectorOptions {
    fn default() -> Self {
        ReflectorOptions {
            label_selector: None,
            field_selector: None,
            page_size: 500,
            max_list_pages: MAX_LIST_PAGES,
            bookmarks: true,
            min_watch_timeout: Duration::from_secs(300),
            idle_timeout: None,
            bookmark_silence: BOOKMARK_SILENCE,
            streaming_list: true,
            initial_events_deadline: INITIAL_EVENTS_DEADLINE,
            backoff: BackoffOptions::default(),
            drop_managed_fields: false,
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
            .field("max_list_pages", &self.max_list_pages)
            .field("bookmarks", &self.bookmarks)
            .field("min_watch_timeout", &self.min_watch_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("bookmark_silence", &self.bookmark_silence)
            .field("streaming_list", &self.streaming_list)
            .field("initial_events_deadline", &self.initial_events_deadline)
            .field("backoff", &self.backoff)
            .field("drop_managed_fields", &self.drop_managed_fields)
            .finish_non_exhaustive()
    }
}

/// The finite state machine driving the reflector: [`Reflector::run`] starts in `Relist` and
/// calls [`Reflector::step`] with the state it is in until it is `Stopped`; the [module
/// docs](self) draw the transitions. What a step does besides (the list plan, the list's
/// resourceVersion, the immediate retry of a cut streaming list) lives in the reflector's fields.
enum State<T> {
    /// The cache is to be (re)built; the next step starts the list its [`ListPlan`] says: a
    /// streaming list (then `InitialEvents`), or a whole paginated LIST (then `Watch`).
    Relist,
    /// A streaming list is open and its initial events are coming; the next step reads one of
    /// them into the list, and the initial-events-end bookmark makes the same stream `Watching`.
    /// The list is `OnTime`, then `Late` once [`INITIAL_EVENTS_WARNING`] passed without that
    /// bookmark (reported once); at the initial phase's deadline it is given up (`Relist`).
    InitialEvents(Box<InitialEvents<T>>),
    /// The cache is current up to the last seen resourceVersion; the next step opens a watch
    /// from it (then `Watching`).
    Watch,
    /// A watch is open; the next step reads one event into the fifo. `opened` and `events`
    /// detect very short watches (and a watch silent for the reflector's `silence_limit` is dead).
    Watching {
        stream: WatchStream<T, ResponseBody>,
        opened: Instant,
        events: u64,
    },
    /// A failure is being waited out; the next step sleeps `delay`, then goes on with `next`
    /// (`Relist` or `Watch`).
    Backoff {
        delay: Duration,
        next: Box<State<T>>,
    },
    /// The fifo's consumer is gone; nothing more to do.
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
    /// How long the open watch may stay silent before it is watched again (see
    /// `set_silence_limit`).
    silence_limit: Duration,
    /// What the open watch's silence, at `silence_limit`, says of it (routine or a failure).
    silence: Silence,
    /// How the next relist lists: streaming, or a paginated LIST once or always (the options).
    list_plan: ListPlan,
    /// The resourceVersion the next list asks for (R5).
    list_version: ListVersion,
    /// Who answers this resource's lists, as far as the reflector can tell (R7).
    list_source: ListSource,
    /// How the open watch's events move `last_rv` (R14).
    event_versions: EventVersions,
    /// WL6's one immediate retry of a streaming list cut before its end.
    cut_retry: CutRetry,
    /// The open streaming list has handed objects to the fifo: if it is given up, the list that
    /// follows is a consistent read (see `initial_event`).
    stream_delivered: bool,
    /// Bumped after each failure is recorded in the health (the informer's progress signal, so
    /// that a wait on a condition of the health, such as discovery's on a refused list, is woken
    /// instead of polling).
    failure_signal: Option<tokio::sync::watch::Sender<()>>,
    /// 5xx answers with a `Retry-After` the streaming list of this relist has waited out in a
    /// row (see [`MAX_REST_RETRIES`]).
    retry_after_waits: u32,
    /// Watches that could not be opened for a reason client-go's REST client retries (a transport
    /// error, a timeout, a 5xx with a `Retry-After`), in a row (see [`MAX_REST_RETRIES`]).
    watch_open_retries: u32,
    /// Relists asked for from outside (see the `relist` module), if anyone can ask.
    relist_requests: Option<Arc<RelistRequests>>,
    /// The request generation and the time when the list in progress started.
    list_started: (u64, Instant),
}

/// How the next relist lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListPlan {
    /// A streaming list ([`ReflectorOptions::streaming_list`]).
    Streaming,
    /// The last streaming list failed (refused with 400 or 422 included): a paginated LIST for
    /// the next relist only, then streaming again (WL8).
    PagedOnce,
    /// Paginated LISTs only: streaming lists are off in the options.
    Paged,
}

/// The resourceVersion the next list (paginated or streaming) asks for (R5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListVersion {
    /// Not older than the last seen version (`"0"` before there is one, for a paginated list).
    LastSeen,
    /// The last seen version is known to be gone (expired, or too new for the server): a
    /// consistent read (`""`). A completed list goes back to `LastSeen`.
    Consistent,
}

/// Who answers this resource's lists, as far as the reflector can tell (R6, R7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListSource {
    /// The watch cache (assumed until shown otherwise): a list at an exact version asks no
    /// limit, so the watch cache serves it.
    WatchCache,
    /// An RV="0" list came back paginated: the watch cache is off, etcd answers, and every list
    /// asks for pages (an unpaginated list from etcd would be one huge body).
    Etcd,
}

/// What a watch silent for the reflector's `silence_limit` says of itself (R24).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Silence {
    /// The limit comes before the server's own end of the watch (its `timeoutSeconds`): a watch
    /// of a quiet resource is that silent in good health (the watch cache sends a bookmark only
    /// at a version newer than the watch's, X12), so watching again from the last seen version is
    /// routine: a debug log, no failure.
    MayBeQuiet,
    /// The limit is past the server's own end of the watch: the server should have ended it, so
    /// the stream is hung (a proxy holding it, a server that stopped serving it). A failure.
    Hung,
}

/// How the open watch's events move `last_rv` (R14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventVersions {
    /// Every event that carries a version moves it.
    InOrder,
    /// The watch started from `""` or `"0"`, so the server first sends synthetic ADDED events in
    /// no version order: `last_rv` stays put until the first event of another type (a bookmark
    /// included), and moves with every event from then on (`InOrder`).
    SyntheticAddsFirst,
}

/// WL6's one immediate retry of a streaming list cut before its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CutRetry {
    /// The next cut retries at once.
    Available,
    /// Used since the last completed list: the next cut backs off. A completed list makes it
    /// `Available` again.
    Used,
}

impl<T: Object + Clone> Reflector<T> {
    /// A reflector for `api` (its resource and namespace) feeding `fifo`.
    pub fn new(api: Api<T>, fifo: DeltaFifo<T>, options: ReflectorOptions) -> Reflector<T> {
        let seed = crate::rng::Rng::new().u64();
        let list_plan = if options.streaming_list {
            ListPlan::Streaming
        } else {
            ListPlan::Paged
        };
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
            silence: Silence::Hung,
            list_plan,
            list_version: ListVersion::LastSeen,
            list_source: ListSource::WatchCache,
            event_versions: EventVersions::InOrder,
            cut_retry: CutRetry::Available,
            stream_delivered: false,
            failure_signal: None,
            retry_after_waits: 0,
            watch_open_retries: 0,
            relist_requests: None,
            list_started: (0, Instant::now()),
        }
    }

    /// Relists when `requests` asks (see the `relist` module).
    pub(crate) fn with_relist_requests(mut self, requests: Arc<RelistRequests>) -> Self {
        self.relist_requests = Some(requests);
        self
    }

    /// True when a relist was asked for that no list started since.
    fn relist_pending(&self) -> bool {
        self.relist_requests
            .as_ref()
            .is_some_and(|r| r.latest() > self.list_started.0)
    }

    /// Bumps `signal` after every failure recorded in the health.
    pub(crate) fn with_failure_signal(mut self, signal: tokio::sync::watch::Sender<()>) -> Self {
        self.failure_signal = Some(signal);
        self
    }

    /// Applies `f` to every object once, before it is queued (after dropping its
    /// `managedFields` if [`ReflectorOptions::drop_managed_fields`] says so). Set it once.
    pub fn with_transform(mut self, f: Transform<T>) -> Self {
        self.transform = Some(f);
        self
    }

    /// The transform every object goes through: the options' and the caller's, composed. Set
    /// on the fifo when the reflector starts, before anything is decoded: watch events reach
    /// the fifo undecoded, and it applies the transform when it decodes them.
    fn install_transform(&mut self) {
        if self.options.drop_managed_fields {
            let then = self.transform.take();
            self.transform = Some(Arc::new(move |mut o: T| {
                crate::model::Metadata::drop_managed_fields(o.meta_mut());
                match &then {
                    Some(f) => f(o),
                    None => o,
                }
            }));
        }
        if let Some(f) = &self.transform {
            self.fifo.set_transform(f.clone());
        }
    }

    /// A handle on the reflector's health, updated as it runs.
    pub fn health_handle(&self) -> Arc<Mutex<Health>> {
        self.health.clone()
    }

    /// Runs until the fifo's consumer goes away (or the future is dropped). Logs go to a
    /// `reflector` span naming the resource and namespace.
    pub async fn run(mut self) {
        use tracing::Instrument as _;
        self.install_transform();
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
                let generation = self.relist_requests.as_ref().map_or(0, |r| r.latest());
                if generation > self.list_started.0 {
                    // Asked for from outside: the list must be as new as the server, which a
                    // list from the last seen version need not be (an exact read from etcd, or a
                    // lagging watch cache's).
                    self.list_version = ListVersion::Consistent;
                }
                self.list_started = (generation, Instant::now());
                // Boxed, like `open_watch`: a reflector spends its life watching, and its task
                // then holds only the watching state's locals, not the largest of every state's
                // (11.4 KB per reflector before, in a debug build).
                match self.list_plan {
                    ListPlan::Streaming => Box::pin(self.streaming_list()).await,
                    ListPlan::PagedOnce => {
                        self.list_plan = ListPlan::Streaming;
                        Box::pin(self.list()).await
                    }
                    ListPlan::Paged => Box::pin(self.list()).await,
                }
            }
            State::InitialEvents(list) => {
                // Not boxed, like `watching`: once per initial event.
                self.initial_event(list).await
            }
            // A relist asked for while the reflector was between watches comes first.
            State::Watch if self.relist_pending() => State::Relist,
            State::Watch => Box::pin(self.open_watch()).await,
            State::Watching {
                stream,
                opened,
                events,
            } => {
                // Not boxed: this runs once per watch event, and a box would be an allocation each.
                self.watching(stream, opened, events).await
            }
            State::Backoff { delay, next } => {
                self.set_phase(Phase::BackingOff);
                tokio::time::sleep(delay).await;
                *next
            }
            State::Stopped => State::Stopped,
        }
    }

    // ----- shared by the jobs (list, stream, watching) ----------------------------------------------

    /// A list (paginated or streaming) completed at `rv` with `objects`: the next list reads from
    /// the last seen version again, WL6's immediate retry is available again, and the health
    /// records the list (before the list can complete in the fifo, so whoever sees the sync reads
    /// this list's summary).
    fn listed(&mut self, rv: String, objects: u64) {
        self.list_version = ListVersion::LastSeen;
        self.cut_retry = CutRetry::Available;
        self.watch_open_retries = 0;
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
        drop(h);
        if let Some(requests) = &self.relist_requests {
            requests.completed(CompletedList {
                serves: self.list_started.0,
                started: self.list_started.1,
                resource_version: self.last_rv.clone(),
            });
        }
    }

    /// `timeoutSeconds` for the next watch: random in `[min, 2 * min)` (R4).
    fn watch_timeout(&mut self) -> u32 {
        let min = self.options.min_watch_timeout.as_secs_f64();
        (min + self.rng.f64() * min).max(1.0) as u32
    }

    /// Sets how long `stream`, a watch that asked for `timeout_seconds` (and for bookmarks if
    /// `bookmarks`), may stay silent before it is watched again, and what that silence means
    /// (R24): the option `idle_timeout` if set; else the watch's own timeout + 30 s, and over
    /// HTTP/1.1, for a watch with bookmarks, at most `bookmark_silence`. A limit shorter than
    /// the watch's timeout may be reached by a healthy quiet watch (routine); a longer one only
    /// by a hung stream (a failure).
    fn set_silence_limit(
        &mut self,
        stream: &WatchStream<T, ResponseBody>,
        timeout_seconds: u32,
        bookmarks: bool,
    ) {
        let server_ends_at = Duration::from_secs(u64::from(timeout_seconds));
        let limit = match self.options.idle_timeout {
            Some(idle) => idle,
            None if bookmarks && !stream.body().is_http2() => {
                (server_ends_at + Duration::from_secs(30)).min(self.options.bookmark_silence)
            }
            None => server_ends_at + Duration::from_secs(30),
        };
        self.silence_limit = limit;
        self.silence = if limit < server_ends_at {
            Silence::MayBeQuiet
        } else {
            Silence::Hung
        };
    }

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
            h.last_error_code = e.http_code();
        }
        if let Some(signal) = &self.failure_signal {
            // After the health is written: a waiter woken by it reads this failure.
            signal.send_replace(());
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

/// True when `e` says the version asked for is gone: expired (410), or newer than the server has
/// (`ResourceVersionTooLarge`, a lagging apiserver). Either way a consistent read (`""`) follows.
fn version_gone(e: &Error) -> bool {
    e.is_expired()
        || e.status()
            .is_some_and(|s| s.is_too_large_resource_version())
}

/// True for what client-go's REST client retries itself when it opens a watch (R23), before its
/// reflector sees an error: a transport error (a reset or closed connection, a probable EOF) or
/// a timeout, and a 5xx that carries a `Retry-After`.
fn rest_client_retries(e: &Error) -> bool {
    matches!(e, Error::Transport { .. } | Error::Timeout(_))
        || (e.retry_after_seconds().is_some() && matches!(e.http_code(), Some(500..=599)))
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
