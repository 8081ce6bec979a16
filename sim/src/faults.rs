//! Fault injection: programmatic, and reproducible from a seed.
//!
//! Faults are read when a response or a watch stream *starts* (chunking, drop points, delay) or
//! act on open watches at once (410 injection, close-all, stall). Every random choice is drawn
//! from a generator seeded with `seed + n`, where `n` counts responses since the seed was set, so
//! the same seed and the same request sequence give the same bytes on the wire.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{broadcast, watch};

use super::store::Store;

/// A message to every open watch.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Control {
    /// Send an ERROR 410 event, then end the stream.
    Error410,
    /// Send an ERROR 429 event (the apiserver is overloaded), then end the stream.
    Error429,
    /// End the stream cleanly.
    CloseAll,
    /// Send one event that is not valid JSON (a raw newline inside a string), and go on.
    Corrupt,
}

#[derive(Clone, Copy, Debug, Default)]
pub(crate) enum Chunking {
    #[default]
    Off,
    Fixed(usize),
    Random(usize, usize),
}

/// An injected answer to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Injected {
    /// This code with a `Status` body and `Retry-After: 1`.
    Status(u16),
    /// This code with an HTML page.
    Html(u16),
    /// `200` with `{}`.
    EmptyObject,
    /// This code with the `Content-Length` of a `Status` body, only its first 40 bytes sent, then
    /// silence on the open connection.
    StalledBody(u16),
    /// `503` from a proxy: a plain-text body (envoy's) and `Retry-After: N`.
    PlainRetryAfter(u32),
    /// No answer: the connection is closed once the request is read.
    Reset,
}

/// When a watch connection is aborted.
#[derive(Clone, Copy, Debug)]
pub(crate) enum DropAfter {
    Bytes(u64),
    Events(u64),
    RandomBytes(u64, u64),
}

#[derive(Clone, Copy, Debug, Default)]
struct Config {
    chunking: Chunking,
    drop_after: Option<DropAfter>,
    event_delay: Option<Duration>,
    watch_list_disabled: bool,
    initial_events_end_withheld: bool,
    reads_forbidden: bool,
    seed: u64,
}

/// The faults in force for one response, fixed when it starts.
#[derive(Debug)]
pub(crate) struct Plan {
    pub chunking: Chunking,
    /// Abort after this many bytes / events.
    pub drop_bytes: Option<u64>,
    pub drop_events: Option<u64>,
    pub event_delay: Option<Duration>,
    pub rng: crate::rng::Rng,
}

impl Plan {
    /// Splits `b` per the chunking fault.
    pub fn split(&mut self, b: Bytes) -> Vec<Bytes> {
        let size = |rng: &mut crate::rng::Rng| match self.chunking {
            Chunking::Off => usize::MAX,
            Chunking::Fixed(n) => n.max(1),
            Chunking::Random(lo, hi) => {
                rng.between(lo.max(1) as u64, hi.max(lo.max(1)) as u64) as usize
            }
        };
        if matches!(self.chunking, Chunking::Off) {
            return vec![b];
        }
        let mut out = Vec::new();
        let mut b = b;
        while !b.is_empty() {
            let n = size(&mut self.rng).min(b.len());
            out.push(b.split_to(n));
        }
        out
    }
}

pub(crate) struct FaultState {
    config: Mutex<Config>,
    fail_next: Mutex<VecDeque<Injected>>,
    responses: AtomicU64,
    pub control: broadcast::Sender<Control>,
    pub stalled: watch::Sender<bool>,
    /// Watch streams currently open (maintained by the watch tasks).
    pub active_watches: AtomicU64,
    store: Arc<Store>,
    /// Resources (plurals) whose reads answer 403 ([`Faults::forbid_reads_of`]).
    forbidden_reads: Mutex<BTreeSet<String>>,
}

/// The fault-injection handle of a [`Simulator`](super::Simulator); cheap to clone.
///
/// ```no_run
/// # async fn f() {
/// let sim = informer_sim::Simulator::start().await.unwrap();
/// sim.faults().seed(42);
/// sim.faults().chunk_bodies_random(1, 64);   // every body cut into 1..=64-byte chunks
/// sim.faults().fail_next(2, 503);            // next two requests: 503 + Retry-After
/// sim.faults().inject_410();                 // ERROR 410 into every open watch
/// sim.faults().clear();
/// # }
/// ```
#[derive(Clone)]
pub struct Faults {
    pub(crate) state: Arc<FaultState>,
}

impl Faults {
    pub(crate) fn new(store: Arc<Store>) -> Faults {
        let (control, _) = broadcast::channel(64);
        Faults {
            state: Arc::new(FaultState {
                config: Mutex::new(Config::default()),
                fail_next: Mutex::new(VecDeque::new()),
                responses: AtomicU64::new(0),
                control,
                stalled: watch::Sender::new(false),
                active_watches: AtomicU64::new(0),
                store,
                forbidden_reads: Mutex::new(BTreeSet::new()),
            }),
        }
    }

    fn edit(&self, f: impl FnOnce(&mut Config)) {
        f(&mut self.state.config.lock().unwrap_or_else(|e| e.into_inner()));
    }

    /// Sets the seed of every random fault (and restarts the response counter).
    pub fn seed(&self, seed: u64) {
        self.edit(|c| c.seed = seed);
        // SeqCst: the response counter decides which response a fault hits; tests reset it and
        // then send requests, and SeqCst keeps that order obvious (a few requests per second).
        self.state.responses.store(0, Ordering::SeqCst);
    }

    /// Cuts every response body (lists, errors, watch streams) into chunks of `n` bytes; 0 turns it off.
    pub fn chunk_bodies(&self, n: usize) {
        self.edit(|c| {
            c.chunking = if n == 0 {
                Chunking::Off
            } else {
                Chunking::Fixed(n)
            }
        });
    }

    /// Cuts every response body into chunks of a random size in `min..=max` (seeded).
    pub fn chunk_bodies_random(&self, min: usize, max: usize) {
        self.edit(|c| c.chunking = Chunking::Random(min.max(1), max.max(min.max(1))));
    }

    /// Aborts every watch started from now on after `n` body bytes (mid-frame if it falls there).
    pub fn drop_watches_after_bytes(&self, n: u64) {
        self.edit(|c| c.drop_after = Some(DropAfter::Bytes(n)));
    }

    /// Aborts every watch started from now on right after its `n`-th event (bookmarks count).
    pub fn drop_watches_after_events(&self, n: u64) {
        self.edit(|c| c.drop_after = Some(DropAfter::Events(n)));
    }

    /// Aborts every watch started from now on after a random number of bytes in `min..=max` (seeded).
    pub fn drop_watches_after_random_bytes(&self, min: u64, max: u64) {
        self.edit(|c| c.drop_after = Some(DropAfter::RandomBytes(min, max.max(min))));
    }

    /// Delays each watch event of watches started from now on by `d` (no batching while set).
    pub fn delay_events(&self, d: Duration) {
        self.edit(|c| c.event_delay = if d.is_zero() { None } else { Some(d) });
    }

    /// Makes `sendInitialEvents=true` watches fail like a server without etcd
    /// RequestWatchProgress: 200, one ERROR 500 event, end (X2). Clients should fall back to
    /// LIST + WATCH. `false` restores watch-list support.
    pub fn disable_watch_list(&self, disabled: bool) {
        self.edit(|c| c.watch_list_disabled = disabled);
    }

    pub(crate) fn watch_list_disabled(&self) -> bool {
        self.state
            .config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .watch_list_disabled
    }

    /// While on, streaming lists (`sendInitialEvents=true` with bookmarks) started from now on
    /// never send their `k8s.io/initial-events-end` bookmark: the initial events come, then live
    /// events and periodic bookmarks, as from a server whose end bookmark is lost (client-go's
    /// WL9). The stream stays alive; clients must give it up and list. `false` restores it.
    ///
    /// ```no_run
    /// # async fn f() {
    /// let sim = informer_sim::Simulator::start().await.unwrap();
    /// sim.faults().withhold_initial_events_end(true);
    /// # }
    /// ```
    pub fn withhold_initial_events_end(&self, on: bool) {
        self.edit(|c| c.initial_events_end_withheld = on);
    }

    pub(crate) fn initial_events_end_withheld(&self) -> bool {
        self.state
            .config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .initial_events_end_withheld
    }

    /// While on, every read of a resource (get, list, watch) answers 403 Forbidden with the
    /// apiserver's RBAC message, as when the caller's role does not cover that resource; discovery
    /// documents stay readable, as they are for every authenticated user. Open watches go on.
    ///
    /// ```no_run
    /// # async fn f() {
    /// let sim = informer_sim::Simulator::start().await.unwrap();
    /// sim.faults().forbid_reads(true); // GET /api/v1/pods -> 403 "pods is forbidden: ..."
    /// # }
    /// ```
    pub fn forbid_reads(&self, on: bool) {
        self.edit(|c| c.reads_forbidden = on);
    }

    pub(crate) fn reads_forbidden(&self) -> bool {
        self.state
            .config
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reads_forbidden
    }

    /// Like [`forbid_reads`](Self::forbid_reads) for one resource only, named by its plural
    /// (`services`): while on, every get, list and watch of it answers 403 Forbidden with the
    /// apiserver's RBAC message (`services is forbidden: User "reader" cannot list resource
    /// "services" in API group "" in the namespace "ns"`), as for a role that covers the other
    /// resources but not this one. Open watches go on. `false` allows it again; [`clear`](Self::clear)
    /// allows every resource.
    ///
    /// ```no_run
    /// # async fn f() {
    /// let sim = informer_sim::Simulator::start().await.unwrap();
    /// sim.faults().forbid_reads_of("services", true); // endpointslices still readable
    /// # }
    /// ```
    pub fn forbid_reads_of(&self, plural: &str, on: bool) {
        let mut set = self
            .state
            .forbidden_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if on {
            set.insert(plural.to_owned());
        } else {
            set.remove(plural);
        }
    }

    /// Whether reads of `plural` answer 403 ([`forbid_reads`](Self::forbid_reads) or
    /// [`forbid_reads_of`](Self::forbid_reads_of)).
    pub(crate) fn reads_of_forbidden(&self, plural: &str) -> bool {
        self.reads_forbidden()
            || self
                .state
                .forbidden_reads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(plural)
    }

    /// Answers the next `k` requests with `code` (429, 500, 503, 504, ...), a Status body and `Retry-After: 1`.
    pub fn fail_next(&self, k: usize, code: u16) {
        let mut q = self
            .state
            .fail_next
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        q.extend(std::iter::repeat_n(Injected::Status(code), k));
    }

    /// Answers the next `k` requests with `code` and an HTML page instead of a `Status`, as a proxy
    /// or load balancer in front of the apiserver does.
    pub fn fail_next_html(&self, k: usize, code: u16) {
        let mut q = self
            .state
            .fail_next
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        q.extend(std::iter::repeat_n(Injected::Html(code), k));
    }

    /// Answers the next `k` requests with `200` and the body `{}`: neither a list nor a watch
    /// event (a broken proxy or an apiserver bug). Clients must not take it as an empty list.
    pub fn answer_next_with_empty_object(&self, k: usize) {
        let mut q = self
            .state
            .fail_next
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        q.extend(std::iter::repeat_n(Injected::EmptyObject, k));
    }

    /// Answers the next `k` requests with `code` whose body stalls: the head (with the
    /// `Content-Length` of a `Status`), 40 bytes of the `Status`, then silence on the open
    /// connection (aborted after two minutes). Clients must give the body up and retry.
    pub fn stall_next_error_bodies(&self, k: usize, code: u16) {
        let mut q = self
            .state
            .fail_next
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        q.extend(std::iter::repeat_n(Injected::StalledBody(code), k));
    }

    /// Answers the next `k` requests as a proxy (envoy) does when the apiserver behind it is
    /// down: `503`, a plain-text body and `Retry-After: retry_after` seconds.
    pub fn fail_next_plain_retry_after(&self, k: usize, retry_after: u32) {
        let mut q = self
            .state
            .fail_next
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        q.extend(std::iter::repeat_n(
            Injected::PlainRetryAfter(retry_after),
            k,
        ));
    }

    /// Closes the connection of each of the next `k` requests without answering it, as a load
    /// balancer or an apiserver going away does (the client reads no status line: a transport
    /// error, "connection closed before message completed").
    ///
    /// ```no_run
    /// # async fn demo() -> std::io::Result<()> {
    /// let sim = informer_sim::Simulator::start().await?;
    /// sim.faults().reset_next(3);
    /// # Ok(()) }
    /// ```
    pub fn reset_next(&self, k: usize) {
        let mut q = self
            .state
            .fail_next
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        q.extend(std::iter::repeat_n(Injected::Reset, k));
    }

    /// How many injected answers ([`reset_next`](Self::reset_next) and the like) are still to
    /// come: 0 once every one was served.
    ///
    /// ```
    /// # async fn demo() -> std::io::Result<()> {
    /// let sim = informer_sim::Simulator::start().await?;
    /// sim.faults().reset_next(2);
    /// assert_eq!(sim.faults().injected_pending(), 2);
    /// # Ok(()) }
    /// ```
    pub fn injected_pending(&self) -> usize {
        self.state
            .fail_next
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    /// Sends an ERROR 429 (`TooManyRequests`) event into every open watch, then ends them.
    pub fn inject_429(&self) {
        let _ = self.state.control.send(Control::Error429);
    }

    /// Sends an ERROR 410 (`Expired`) event into every open watch, then ends them.
    pub fn inject_410(&self) {
        let _ = self.state.control.send(Control::Error410);
    }

    /// Sends into every open watch one event that is not JSON (a raw newline inside a string,
    /// which RFC 8259 forbids) and keeps the stream going: the client must report it and recover
    /// without waiting for a closing quote.
    pub fn corrupt_watches(&self) {
        let _ = self.state.control.send(Control::Corrupt);
    }

    /// Ends every open watch cleanly (terminating chunk, no event), like a server shutdown.
    pub fn close_all_watches(&self) {
        let _ = self.state.control.send(Control::CloseAll);
    }

    /// Stalls every watch: no bytes at all until [`resume_watches`](Self::resume_watches).
    pub fn stall_watches(&self) {
        self.state.stalled.send_replace(true);
    }

    /// Ends a stall.
    pub fn resume_watches(&self) {
        self.state.stalled.send_replace(false);
    }

    /// Drops all history now: any older resourceVersion answers 410.
    pub fn compact_history(&self) {
        self.state.store.compact();
    }

    /// Removes every fault (pending `fail_next` answers included) and resumes stalled watches.
    pub fn clear(&self) {
        self.edit(|c| {
            let seed = c.seed;
            *c = Config {
                seed,
                ..Config::default()
            }
        });
        self.state
            .fail_next
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.state
            .forbidden_reads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.resume_watches();
    }

    /// The injected failure for this request, if one is pending.
    pub(crate) fn take_failure(&self) -> Option<Injected> {
        self.state
            .fail_next
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
    }

    /// The faults for one response.
    pub(crate) fn plan(&self) -> Plan {
        let c = *self.state.config.lock().unwrap_or_else(|e| e.into_inner());
        // SeqCst: see `seed`; fetch_add gives each response a unique number.
        let n = self.state.responses.fetch_add(1, Ordering::SeqCst);
        let mut rng = crate::rng::Rng::with_seed(c.seed.wrapping_add(n));
        let (mut drop_bytes, mut drop_events) = (None, None);
        match c.drop_after {
            Some(DropAfter::Bytes(b)) => drop_bytes = Some(b),
            Some(DropAfter::Events(e)) => drop_events = Some(e),
            Some(DropAfter::RandomBytes(lo, hi)) => drop_bytes = Some(rng.between(lo, hi)),
            None => {}
        }
        Plan {
            chunking: c.chunking,
            drop_bytes,
            drop_events,
            event_delay: c.event_delay,
            rng,
        }
    }
}
