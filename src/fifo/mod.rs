//! The DeltaFifo: a per-key coalescing queue between the reflector (producers) and the one consumer
//! that applies deltas to the [`Store`](crate::store::Store) and notifies handlers.
//!
//! # Semantics (docs/informer-design.md §4)
//! At most one pending delta per key (two for a delete followed by a re-create with a new uid),
//! coalesced by this table (P pending, E incoming):
//!
//! | P \ E       | Added(y)                                  | Modified(y) | Deleted(y) |
//! |-------------|-------------------------------------------|-------------|------------|
//! | none        | Added(y)                                  | Modified(y) | Deleted(y) |
//! | Added(x)    | Added(y)                                  | Added(y)    | nothing, if the key did not exist before `Added(x)`; else Deleted(y) |
//! | Modified(x) | Modified(y)                               | Modified(y) | Deleted(y) |
//! | Deleted(x)  | Deleted(x), Added(y) if uid differs; else Modified(y) | Modified(y) | Deleted(newer) |
//!
//! - An event whose resourceVersion equals the pending one's (or, with nothing pending, the stored
//!   object's) is dropped; so is one older than the pending one when both parse as integers. Empty
//!   resourceVersions are never equal. Relist tombstones are never dropped as stale.
//! - Keys leave in the order they first became pending; later events do not move them.
//! - A relist ([`DeltaFifo::begin_relist`], [`DeltaFifo::relist_page`]..., [`DeltaFifo::end_relist`])
//!   yields nothing for unchanged objects (same key and resourceVersion as stored) nor for objects
//!   older than the stored or pending ones (both versions integers: a listed object never moves a
//!   key backwards), Modified/Added for changed ones and `Deleted(Tombstone)` for keys stored or
//!   pending but not listed. A listed object
//!   that is unchanged is swapped for the store's `Arc` by the producer, so a relist holds no second
//!   copy of stored objects, even while the consumer lags.
//! - [`DeltaFifo::has_synced`] turns true once every delta of the first complete list has been popped
//!   **and processed** (its [`Popped`] guard dropped).
//! - **First sync:** nothing pushed after the first list's end is drained until that list is out
//!   (synced), so the first list's keys are handed out exactly as listed: an event right behind the
//!   list never coalesces into them, and comes after the sync as its own delta (client-go's
//!   handlers, too, see each listed object before the events behind it). Those inputs wait in the
//!   inbox, where the capacity bounds them.
//! - [`Popped::caught_up_resource_version`] says when the store, once the popped deltas are applied,
//!   is exactly the server's state at a resourceVersion (nothing else pending, no relist running);
//!   [`DeltaFifo::bookmark`] advances it, with a delta-less pop if nothing is pending.
//!
//! # Raw events: decode only what survives
//! [`DeltaFifo::push`] takes a watch event whose object is still JSON ([`RawDelta`]) as well as a
//! decoded one ([`Delta`]). A raw event holds its object as JSON ([`RawObject`]: the bytes
//! plus the key, uid and resourceVersion read from its metadata). It is coalesced like any other
//! event and decoded into `T` (and transformed) only when its key is handed out, so an event that a
//! newer one replaces is never decoded ([`FifoMetrics::decodes_saved`]). An object that is not JSON
//! or not a valid `T` is dropped from the pop, counted in [`FifoMetrics::decode_errors`] and
//! reported to the producer ([`DeltaFifo::take_decode_error`]), which must relist: until a relist
//! ends, pops report no caught-up resourceVersion.
//!
//! The consumer copies each raw object's JSON as it drains it (`RawObject::own_bytes`). The
//! reader hands over slices of its receive buffers, which the inbox's capacity keeps short-lived;
//! a pending object that waits long holds an exact-size copy instead, allocated (and later freed)
//! by the consumer's thread, so all pending JSON lives in one thread's allocator arena.
//!
//! # Listed objects decoded by the producer
//! A streaming list's objects come raw ([`DeltaFifo::relist_page`] of `RawObject`s), and the
//! consumer alone would decode them all while the producer, which only frames them, waits for room. So the producer
//! decodes every other listed object it hands over (counted across pages), and all of them while
//! the consumer has [`DeltaFifo::capacity`] or more objects to go through. A decoded object takes
//! the consumer a store insert, a raw one a decode as well, so the two threads share the list's
//! work from its first page, without a handshake. A list names each key once, so these decodes are
//! hardly ever wasted on an object coalesced away. One that does not decode goes on raw, and the
//! consumer reports it. The producer's task yields to its runtime after every 64 KiB of JSON it
//! decodes, so it never holds a worker for long.
//!
//! The producer decodes at most 8 MiB of each list's JSON (the budget restarts with each relist);
//! past it the consumer decodes everything. What the producer decodes is allocated on its thread,
//! and glibc's malloc gives each thread an arena of its own: when the consumer later replaces
//! those objects, their memory goes back to the producer's arena, where the consumer's allocations
//! never find it, so without a bound a large list would cost its size twice.
//!
//! # Back-pressure
//! [`DeltaFifo::push`] and [`DeltaFifo::relist_page`] wait while the inbox holds
//! [`DeltaFifo::capacity`] or more undrained objects, or 16 MiB or more of their JSON (the bytes they were received as), so a consumer that falls behind slows the
//! watch reader and the unread stream waits in the socket, not in memory. The byte bound is what
//! holds for large objects: 1024 events of 16 MiB frames are 16 GiB. A streaming list's page goes
//! to the fifo at 4 MiB of JSON, whatever its page size, so the one input by which a push can
//! overshoot these bounds stays small too. Everything the consumer drains
//! is coalesced into at most one entry per key, so memory is O(keys) + capacity whatever the ratio
//! of producer to consumer speed. The synchronous pushes ([`DeltaFifo::push`] and the relist calls)
//! never wait, for callers that are not async; they count against the capacity all the same.
//!
//! # Concurrency
//! Producers ([`DeltaFifo`], `Clone`, any thread) push raw inputs into a lock-free MPSC inbox and,
//! the bounded async pushes aside, never wait for the consumer (see `inbox.rs` for the wake-up
//! protocol and its orderings; `relist_page` also reads the store, see there). The single
//! [`FifoConsumer`] (not `Clone`) owns the coalescing state outright, so coalescing takes no lock
//! at all. It drains the inbox whenever nothing is pending and otherwise every 32 pops, always
//! between two pops, so the store it compares against reflects every delta it handed out before
//! (the previous [`Popped`] must be dropped before the next pop; the borrow checker enforces it).
//!
//! # Bounds
//! - The coalesced state is O(distinct keys).
//! - Inputs not yet drained: at most the capacity (default 1024 objects) and 16 MiB of JSON for
//!   the async pushes, plus one input (see Back-pressure); [`FifoMetrics::backlog`] and
//!   [`FifoMetrics::backlog_bytes`] expose them.
//! - A drain takes at most 4096 inputs when nothing is pending, so a fast producer cannot keep the
//!   consumer draining for ever. While keys are pending it takes at most sixteen inputs per pop
//!   since the last drain and at most 512 KiB of raw JSON, so pops go on under a flood while a
//!   lagging consumer still merges many events per key it hands out.
//! - Undecoded JSON held by pending keys: 16 MiB ([`FifoMetrics::pending_raw_bytes`]); at or past
//!   it the consumer takes no more input until pops bring it under.
//! - The producer decodes at most 8 MiB of a list's JSON (see above).
//!
//! These numbers are private tuning constants, not API; how they were chosen, with the
//! measurements, is in `docs/fifo-tuning.md`.

mod delta;
mod inbox;
mod pending;

use std::sync::Arc;

#[cfg(informer_loom)]
use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
#[cfg(not(informer_loom))]
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::error::Error;
use crate::model::Object;
use crate::watch::RawObject;
pub use delta::{DeletedObject, Delta, KnownObjects, RawDelta};
use inbox::Inbox;
use pending::{Change, Held, Pending};

/// A function applied to every object once, when it is decoded and before it is handed out (e.g.
/// drop managedFields): the fifo applies it to the objects it decodes, the reflector to those it
/// decodes itself ([`Reflector::with_transform`](crate::reflector::Reflector::with_transform), or an
/// informer's [`Informer::with_transform`](crate::Informer::with_transform)).
///
/// ```
/// use std::sync::Arc;
/// use informer::fifo::Transform;
/// use informer::ConfigMap;
/// let drop_data: Transform<ConfigMap> = Arc::new(|mut cm: ConfigMap| {
///     cm.data = Default::default();
///     cm
/// });
/// # let _ = drop_data;
/// ```
pub type Transform<T> = Arc<dyn Fn(T) -> T + Send + Sync>;

/// Most raw inputs the consumer drains before handing out a key, so a fast producer cannot keep the
/// consumer draining forever.
pub(crate) const DRAIN_BATCH: usize = 4096;

/// While keys are pending, the consumer drains the inbox once every this many pops (and whenever
/// nothing is pending). Draining before every pop would wake a producer that waits for room once
/// per pop, a futex wake and a context switch each time; every 32 pops it wakes once for a batch,
/// and coalescing loses nothing (drained inputs meet the pending entries all the same).
const POPS_PER_DRAIN: u32 = 32;

/// While keys are pending, a drain takes at most this many inputs (sixteen per pop since the last
/// drain) and stops once it has taken in [`DRAIN_BYTES_WHILE_PENDING`] of raw JSON. Intake then
/// runs at most sixteen times ahead of output, so pops still go on under a flood (and the first
/// list's keys go out before anything behind it comes in: "First sync"), while a consumer that
/// lags takes in many events per key it hands out, each merged into its key's pending entry
/// rather than decoded. The byte bound keeps large objects at about four per pop. Why sixteen:
/// `docs/fifo-tuning.md`.
const DRAIN_WHILE_PENDING: usize = 16 * POPS_PER_DRAIN as usize;

/// The raw JSON a drain takes in while keys are pending (see [`DRAIN_WHILE_PENDING`]): about half
/// the L2 cache of a typical core. A measured setting, not a derived one (`docs/fifo-tuning.md`):
/// it keeps ~4.7 KB Pods at about four inputs per pop and ~1.1 KB Endpoints at about fifteen.
const DRAIN_BYTES_WHILE_PENDING: usize = 512 << 10;

/// The budget of undecoded JSON bytes that pending keys may hold (16 MiB): past it the consumer
/// takes no more input until pops bring it under, so a consumer that lags behind a stream of
/// large objects (say 5 KB Pods) holds a few thousand of them raw, not one per key. Below it,
/// a lagging consumer coalesces events of the same key before decoding them.
pub(crate) const PENDING_RAW_BYTES: usize = 16 << 20;

/// JSON bytes the producer decodes between two yields to its runtime (see "Listed objects decoded
/// by the producer"): about a third of a millisecond of decoding, so a page of large objects does
/// not hold a runtime worker for milliseconds.
const PRODUCER_DECODE_SLICE: usize = 64 << 10;

/// The JSON bytes of one list that the producer decodes at most (see "Listed objects decoded by
/// the producer"): what it decodes is allocated from its own thread's memory, where the consumer,
/// which later replaces those objects, cannot reuse it. 8 MiB covers half of a 10k-Endpoints list
/// (10 MB of JSON), whose sync the shared decode speeds up most. It restarts with each relist.
/// How it was chosen: `docs/fifo-tuning.md`.
pub(crate) const PRODUCER_DECODE_BUDGET: usize = 8 << 20;

/// The default [`DeltaFifo::capacity`]: undrained objects at which the async pushes wait.
pub(crate) const DEFAULT_CAPACITY: usize = 1024;

/// The JSON bytes of undrained inputs at which the async pushes wait, beside the capacity's
/// count (see "Back-pressure"): 1024 events of 16 MiB frames would otherwise be 16 GiB. 16 MiB
/// is 1024 events of 16 KiB: events of ordinary objects (1-5 KB) meet the count first, so their
/// throughput is as before.
pub(crate) const INBOX_BYTES: usize = 16 << 20;

/// A streaming list's page of raw objects goes to the fifo once it holds this much JSON, even
/// if it is short of the page size: the async pushes can overshoot the inbox's bounds by one
/// input, and a page of 500 large objects would be hundreds of megabytes. Pages of ordinary
/// objects (500 of 5 KB: 2.5 MB) stay whole.
pub(crate) const PAGE_BYTES: usize = 4 << 20;

/// Raw producer input, in push order.
enum Input<T> {
    Event(Change<T>),
    BeginRelist,
    /// Listed objects, and the JSON bytes they were received as (raw or decoded by the producer
    /// since; 0 for objects given decoded).
    Page(Vec<Held<T>>, usize),
    EndRelist,
    Bookmark(String),
    Close,
}

impl<T: Object> Input<T> {
    /// What the input counts against the capacity: its objects (at least 1), and against the
    /// byte capacity: the JSON bytes of its objects as received (see "Back-pressure").
    fn weight(&self) -> (usize, usize) {
        match self {
            Input::Page(items, bytes) => (items.len().max(1), *bytes),
            Input::Event(change) => (1, change.held().raw_bytes()),
            _ => (1, 0),
        }
    }
}

/// A watch event as [`DeltaFifo::push`] takes it: a decoded [`Delta`], or a [`RawDelta`] whose
/// object is still JSON (decoded only if it survives coalescing). Made by `.into()`, which `push`
/// calls.
///
/// ```
/// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, EventInput}};
/// let _event: EventInput<Pod> = Delta::Added(Arc::new(Pod::default())).into();
/// ```
pub struct EventInput<T>(Change<T>);

impl<T> From<Delta<T>> for EventInput<T> {
    fn from(delta: Delta<T>) -> Self {
        EventInput(delta.into())
    }
}

impl<T> From<RawDelta> for EventInput<T> {
    fn from(delta: RawDelta) -> Self {
        EventInput(match delta {
            RawDelta::Added(r) => Change::Added(Held::Raw(r)),
            RawDelta::Modified(r) => Change::Modified(Held::Raw(r)),
            RawDelta::Deleted(r) => Change::Deleted(Held::Raw(r)),
        })
    }
}

/// A page of listed objects as [`DeltaFifo::relist_page`] takes it: decoded (`Vec<Arc<T>>`) or
/// still JSON (`Vec<RawObject>`). Made by `.into()`, which `relist_page` calls.
///
/// ```
/// # use std::sync::Arc; use informer::{Pod, fifo::ListedPage};
/// let _page: ListedPage<Pod> = vec![Arc::new(Pod::default())].into();
/// ```
pub struct ListedPage<T>(PageItems<T>);

enum PageItems<T> {
    Decoded(Vec<Arc<T>>),
    Raw(Vec<RawObject>),
}

impl<T> From<Vec<Arc<T>>> for ListedPage<T> {
    fn from(items: Vec<Arc<T>>) -> Self {
        ListedPage(PageItems::Decoded(items))
    }
}

impl<T> From<Vec<RawObject>> for ListedPage<T> {
    fn from(items: Vec<RawObject>) -> Self {
        ListedPage(PageItems::Raw(items))
    }
}

/// A raw page on its way into an `Input::Page`: the objects not looked at yet, those held,
/// the page's JSON bytes as received, and a key buffer reused across objects.
struct RawPage<T> {
    items: std::vec::IntoIter<RawObject>,
    held: Vec<Held<T>>,
    bytes: usize,
    key: String,
}

impl<T> RawPage<T> {
    fn new(items: Vec<RawObject>) -> Self {
        RawPage {
            bytes: items.iter().map(|raw| raw.json().len()).sum(),
            held: Vec::with_capacity(items.len()),
            items: items.into_iter(),
            key: String::new(),
        }
    }

    fn into_input(self) -> Input<T> {
        Input::Page(self.held, self.bytes)
    }
}

/// A snapshot of the fifo's counters.
///
/// ```
/// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
/// let (fifo, _consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
/// assert_eq!(fifo.metrics().received, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FifoMetrics {
    /// Events and listed objects the consumer has taken in.
    pub received: u64,
    /// Watch events among `received` (listed objects aside): what came after a list, counted
    /// without reference to when anybody observed the sync.
    pub events: u64,
    /// Inputs merged into an already pending delta.
    pub coalesced: u64,
    /// Inputs dropped as duplicates or stale (including unchanged relisted objects).
    pub dropped_stale: u64,
    /// Keys pending, as of the consumer's last drain, plus the one handed out while its
    /// [`Popped`] is alive (applied and notified, not yet dropped): 0 means everything taken in
    /// has been processed.
    pub depth: usize,
    /// Raw inputs pushed but not yet drained by the consumer (approximate while pushes run).
    pub backlog: usize,
    /// JSON bytes of the objects in those inputs (raw or decoded by the producer; objects given
    /// decoded count 0): the async pushes wait at 16 MiB (see the module docs' "Back-pressure").
    pub backlog_bytes: usize,
    /// Watch events taken in as raw JSON ([`RawDelta`]s).
    pub raw_received: u64,
    /// Raw events decoded into `T` because they were handed out.
    pub decoded: u64,
    /// Raw events never decoded: replaced by newer events or dropped as stale (pending ones aside).
    pub decodes_saved: u64,
    /// Raw events that were not a valid `T` (each one also reported to the producer).
    pub decode_errors: u64,
    /// JSON bytes of the undecoded objects pending keys hold, as of the consumer's last drain or
    /// pop; the consumer takes no more input while it is at its budget (16 MiB, see the module
    /// docs' "Bounds") or more.
    pub pending_raw_bytes: usize,
}

struct Shared<T> {
    inbox: Inbox<Input<T>>,
    known: Arc<dyn KnownObjects<T>>,
    capacity: usize,
    /// Applied to raw objects once decoded (the producer applies it to what it decodes itself).
    transform: std::sync::OnceLock<Transform<T>>,
    /// A raw object failed to decode; `decode_error` holds the first such error not yet taken.
    decode_failed: AtomicBool,
    decode_error: std::sync::Mutex<Option<Error>>,
    /// Wakes a producer waiting in `decode_failed` (a permit is kept if none waits).
    decode_notify: tokio::sync::Notify,
    closed: AtomicBool,
    synced: AtomicBool,
    /// Wakes `wait_synced` callers when `synced` turns true or the consumer goes away.
    synced_notify: tokio::sync::Notify,
    drained: AtomicUsize,
    received: AtomicU64,
    events: AtomicU64,
    coalesced: AtomicU64,
    dropped_stale: AtomicU64,
    raw_received: AtomicU64,
    decoded: AtomicU64,
    decode_errors: AtomicU64,
    depth: AtomicUsize,
    pending_raw_bytes: AtomicUsize,
    /// Listed objects the producers have handed over raw or decoded: every other one is decoded
    /// by the producer (see "Listed objects decoded by the producer"), counted across pages so
    /// that short pages split the same way.
    listed: AtomicUsize,
    /// JSON bytes of listed objects the producers decoded since the running relist began (see
    /// [`PRODUCER_DECODE_BUDGET`]).
    producer_decoded: AtomicUsize,
}

impl<T: Object> Shared<T> {
    /// A raw object decoded and transformed, as the fifo hands it out (by either side).
    fn decode(&self, raw: &RawObject) -> Result<Arc<T>, Error> {
        let obj: T = raw.decode_object()?;
        Ok(Arc::new(match self.transform.get() {
            Some(f) => apply_transform(f, obj)?,
            None => obj,
        }))
    }
}

/// `obj` through `transform`. A panic of the transform is caught and returned as
/// [`Error::Panicked`]: the object is then treated as one that does not decode (dropped, reported,
/// and the reflector relists), never as a dead processor or reflector.
pub(crate) fn apply_transform<T>(transform: &Transform<T>, obj: T) -> Result<T, Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| transform(obj))).map_err(|payload| {
        Error::Panicked {
            context: "the informer's transform".to_owned(),
            message: crate::error::panic_message(&*payload),
        }
    })
}

/// The producer handle: cheap to clone, usable from any thread, never blocks on the consumer.
///
/// ```
/// use std::sync::Arc;
/// use informer::{Pod, fifo::{Delta, DeltaFifo}, store::Store};
/// let store = Arc::new(Store::<Pod>::new());
/// let (fifo, mut consumer) = DeltaFifo::new(store.clone());
/// let mut p = Pod::default();
/// (p.metadata.name, p.metadata.resource_version) = ("a".into(), "1".into());
/// fifo.push_now(Delta::Added(Arc::new(p.clone())));
/// p.metadata.resource_version = "2".into();
/// fifo.push_now(Delta::Modified(Arc::new(p)));
/// let popped = consumer.blocking_pop().unwrap();
/// assert!(matches!(popped.deltas()[..], [Delta::Added(ref o)] if o.metadata.resource_version == "2"));
/// ```
pub struct DeltaFifo<T> {
    shared: Arc<Shared<T>>,
}

impl<T> Clone for DeltaFifo<T> {
    fn clone(&self) -> Self {
        DeltaFifo {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Object> DeltaFifo<T> {
    /// A fifo comparing against `known` (normally the store the consumer applies deltas to), and its
    /// one consumer; the async pushes wait at 1024 undrained objects
    /// ([`with_capacity`](Self::with_capacity) sets another bound).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (fifo, consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// assert!(fifo.is_empty());
    /// assert_eq!(fifo.capacity(), 1024);
    /// # drop(consumer);
    /// ```
    pub fn new(known: Arc<dyn KnownObjects<T>>) -> (DeltaFifo<T>, FifoConsumer<T>) {
        Self::with_capacity(known, DEFAULT_CAPACITY)
    }

    /// Like [`new`](Self::new), with the number of undrained objects at which the async pushes
    /// wait (at least 1).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (fifo, _consumer) = DeltaFifo::with_capacity(Arc::new(Store::<Pod>::new()), 64);
    /// assert_eq!(fifo.capacity(), 64);
    /// ```
    pub fn with_capacity(
        known: Arc<dyn KnownObjects<T>>,
        capacity: usize,
    ) -> (DeltaFifo<T>, FifoConsumer<T>) {
        let shared = Arc::new(Shared {
            inbox: Inbox::new(),
            known,
            capacity: capacity.max(1),
            transform: std::sync::OnceLock::new(),
            decode_failed: AtomicBool::new(false),
            decode_error: std::sync::Mutex::new(None),
            decode_notify: tokio::sync::Notify::new(),
            closed: AtomicBool::new(false),
            synced: AtomicBool::new(false),
            synced_notify: tokio::sync::Notify::new(),
            drained: AtomicUsize::new(0),
            received: AtomicU64::new(0),
            events: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
            dropped_stale: AtomicU64::new(0),
            raw_received: AtomicU64::new(0),
            decoded: AtomicU64::new(0),
            decode_errors: AtomicU64::new(0),
            pending_raw_bytes: AtomicUsize::new(0),
            depth: AtomicUsize::new(0),
            listed: AtomicUsize::new(0),
            producer_decoded: AtomicUsize::new(0),
        });
        let consumer = FifoConsumer {
            shared: shared.clone(),
            pending: Pending::new(),
            closed: false,
            newest_rv: String::new(),
            bookmark_unreported: false,
            pops_since_drain: 0,
            decode_failed_since_relist: false,
            held: None,
            handed_out: false,
        };
        (DeltaFifo { shared }, consumer)
    }

    /// The number of undrained objects at which [`push`](Self::push) and
    /// [`relist_page`](Self::relist_page) wait for the consumer.
    pub fn capacity(&self) -> usize {
        self.shared.capacity
    }

    /// Whether [`close`](Self::close) was called: the consumer takes nothing pushed after it.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (fifo, _consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// fifo.close();
    /// assert!(fifo.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        // Relaxed: see `send`.
        self.shared.closed.load(Ordering::Relaxed)
    }

    fn send(&self, input: Input<T>) -> bool {
        // Relaxed: `closed` only gates new input; an input racing with `close` may or may not be
        // delivered either way, and nothing else is read on the strength of this flag.
        if self.shared.closed.load(Ordering::Relaxed) {
            return false;
        }
        let (weight, bytes) = input.weight();
        self.shared.inbox.push(input, weight, bytes);
        true
    }

    /// Waits while the inbox holds `capacity` or more objects, or [`INBOX_BYTES`] or more of their
    /// JSON (or until the fifo closes).
    async fn room(&self) {
        let closed = || self.shared.closed.load(Ordering::Relaxed);
        self.shared
            .inbox
            .wait_for_room(self.shared.capacity, INBOX_BYTES, closed)
            .await;
    }

    /// Sets the transform applied to objects decoded from raw events (the producer applies it to
    /// the objects it decodes itself). Only the first call takes effect.
    pub(crate) fn set_transform(&self, transform: Transform<T>) {
        let _ = self.shared.transform.set(transform);
    }

    /// Resolves when a raw object failed to decode (possibly before this call: the notice is kept
    /// until someone waits); then [`take_decode_error`](Self::take_decode_error) has the error,
    /// unless it was taken already. For a producer that must relist without waiting for its next
    /// event.
    pub async fn decode_failed(&self) {
        self.shared.decode_notify.notified().await
    }

    /// Whether the producer may decode `len` more bytes of this relist's JSON (counted either way).
    fn within_decode_budget(&self, len: usize) -> bool {
        // Relaxed: a budget for sharing work, not a synchronisation point.
        self.shared
            .producer_decoded
            .fetch_add(len, Ordering::Relaxed)
            < PRODUCER_DECODE_BUDGET
    }

    /// Counts a listed object that is not unchanged; true for every other one.
    fn take_odd_listed(&self) -> bool {
        // Relaxed: a count for sharing work, not a synchronisation point; with several producers
        // the split is merely less even.
        self.shared.listed.fetch_add(1, Ordering::Relaxed) % 2 == 1
    }

    /// Whether the consumer has `capacity` or more objects to go through: pending keys as of its
    /// last pop, and inputs it has not drained yet.
    fn consumer_behind(&self) -> bool {
        // Relaxed: a hint for sharing work; a stale value only moves one decode to the other side.
        let s = &self.shared;
        s.depth.load(Ordering::Relaxed) + s.inbox.queued() >= s.capacity
    }

    /// A listed object decoded (and transformed) by the producer, or `None` if it does not decode:
    /// then it goes to the consumer raw, which decodes it again and reports the error as for any
    /// other raw object.
    fn decode_listed(&self, raw: &RawObject) -> Option<Arc<T>> {
        self.shared.decode(raw).ok()
    }

    /// The first error met decoding a raw object since the last call, if any: the store missed that
    /// event, so the producer must relist.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (fifo, _consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// assert!(fifo.take_decode_error().is_none());
    /// ```
    pub fn take_decode_error(&self) -> Option<Error> {
        // Relaxed: a hint that avoids the lock on every event; the error itself is passed under
        // the mutex, and a flag seen late only delays the relist to the next event.
        if !self.shared.decode_failed.load(Ordering::Relaxed) {
            return None;
        }
        self.shared.decode_failed.store(false, Ordering::Relaxed);
        self.shared
            .decode_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// Queues a watch event, waiting while the fifo is full (see "Back-pressure" in the module
    /// docs). The event is a decoded [`Delta`] or a [`RawDelta`] whose object is still JSON, which
    /// is decoded only if it survives coalescing. Returns `false` (and drops the event) if the fifo
    /// is closed. Cancel-safe: dropping the future before it resolves queues nothing.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, DeltaFifo, RawDelta}, store::Store};
    /// # use informer::watch::{EventDecoder, RawEvent};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// let mut dec = EventDecoder::<Pod>::new();
    /// for rv in ["1", "2"] {
    ///     dec.push(format!(r#"{{"type":"MODIFIED","object":{{"metadata":{{"name":"a","resourceVersion":"{rv}"}}}}}}"#).as_bytes());
    ///     dec.push(b"\n");
    ///     let Some(RawEvent::Modified(raw)) = dec.next_raw().unwrap() else { panic!() };
    ///     assert!(fifo.push(RawDelta::Modified(raw)).await);
    /// }
    /// let popped = consumer.try_pop().unwrap();
    /// assert_eq!(popped.deltas()[0].resource_version(), "2");
    /// drop(popped);
    /// assert_eq!(fifo.metrics().decodes_saved, 1); // "1" was never decoded
    /// assert!(fifo.push(Delta::Added(Arc::new(Pod::default()))).await); // decoded already
    /// fifo.close();
    /// assert!(!fifo.push(Delta::Added(Arc::new(Pod::default()))).await);
    /// # });
    /// ```
    pub async fn push(&self, event: impl Into<EventInput<T>>) -> bool {
        let EventInput(change) = event.into();
        self.room().await;
        self.send(Input::Event(change))
    }

    /// [`push`](Self::push) without waiting: the event is queued at once however full the fifo
    /// is (the capacity bounds only producers that wait). For producers outside an async
    /// runtime, and for tests.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, DeltaFifo}, store::Store};
    /// let (fifo, _c) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// assert!(fifo.push_now(Delta::Added(Arc::new(Pod::default()))));
    /// fifo.close();
    /// assert!(!fifo.push_now(Delta::Added(Arc::new(Pod::default()))));
    /// ```
    pub fn push_now(&self, event: impl Into<EventInput<T>>) -> bool {
        let EventInput(change) = event.into();
        self.send(Input::Event(change))
    }

    /// Starts a relist (client-go's `Replace`, applied page by page).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// fifo.begin_relist();
    /// fifo.relist_page_now(vec![Arc::new(Pod::default())]);
    /// fifo.end_relist();
    /// assert!(!fifo.has_synced());
    /// drop(consumer.blocking_pop().unwrap()); // processed
    /// assert!(fifo.has_synced());
    /// ```
    pub fn begin_relist(&self) -> bool {
        self.shared.producer_decoded.store(0, Ordering::Relaxed);
        self.send(Input::BeginRelist)
    }

    /// One page of the running relist, waiting while the fifo is full (see "Back-pressure" in the
    /// module docs): decoded objects (`Vec<Arc<T>>`) or raw ones (`Vec<RawObject>`, a streaming
    /// list's initial events). Returns `false` if the fifo is closed.
    ///
    /// An object whose key and resourceVersion equal the stored one's is swapped for the store's
    /// value here, so the page's copy is freed at once (and a raw one is never decoded). This is
    /// the one producer path that reads the store: a shard read lock per object, which a
    /// consumer's store write holds for one map operation; watch events never touch it. Of the
    /// other raw objects, every other one is decoded here, and all of them while the consumer is
    /// behind ("Listed objects decoded by the producer" in the module docs), the rest when handed
    /// out.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// # use informer::watch::{EventDecoder, RawEvent};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// let mut dec = EventDecoder::<Pod>::new();
    /// dec.push(b"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"3\"}}}\n");
    /// let Some(RawEvent::Added(raw)) = dec.next_raw().unwrap() else { panic!() };
    /// fifo.begin_relist();
    /// assert!(fifo.relist_page(vec![raw]).await);
    /// assert!(fifo.relist_page(vec![Arc::new(Pod::default())]).await);
    /// fifo.end_relist();
    /// assert_eq!(consumer.try_pop().unwrap().deltas()[0].object().metadata.name, "a");
    /// # });
    /// ```
    pub async fn relist_page(&self, page: impl Into<ListedPage<T>>) -> bool {
        let input = match page.into().0 {
            PageItems::Decoded(items) => self.decoded_page(items),
            PageItems::Raw(items) => {
                let mut page = RawPage::new(items);
                // Yields between slices of the JSON decoded here (see "Listed objects decoded
                // by the producer").
                while self.hold_listed_slice(&mut page) {
                    tokio::task::yield_now().await;
                }
                page.into_input()
            }
        };
        self.room().await;
        self.send(input)
    }

    /// [`relist_page`](Self::relist_page) without waiting: the page is queued at once however
    /// full the fifo is. For producers outside an async runtime, and for tests.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (fifo, _c) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// assert!(fifo.begin_relist());
    /// assert!(fifo.relist_page_now(vec![Arc::new(Pod::default())]));
    /// ```
    pub fn relist_page_now(&self, page: impl Into<ListedPage<T>>) -> bool {
        let input = match page.into().0 {
            PageItems::Decoded(items) => self.decoded_page(items),
            PageItems::Raw(items) => {
                let mut page = RawPage::new(items);
                while self.hold_listed_slice(&mut page) {}
                page.into_input()
            }
        };
        self.send(input)
    }

    /// A page of decoded listed objects, unchanged ones swapped for the store's values.
    fn decoded_page(&self, items: Vec<Arc<T>>) -> Input<T> {
        let held = items
            .into_iter()
            .map(|item| {
                let rv = &item.meta().resource_version;
                match self.shared.known.get_by_key(&item.meta().key()) {
                    Some(stored) if !rv.is_empty() && stored.meta().resource_version == *rv => {
                        Held::Decoded(stored)
                    }
                    _ => Held::Decoded(item),
                }
            })
            .collect();
        Input::Page(held, 0)
    }

    /// Moves `page`'s raw objects into its held ones until [`PRODUCER_DECODE_SLICE`] bytes of
    /// JSON were decoded here (true: more to do) or none is left (false). Each object becomes
    /// the store's value if unchanged, else decoded here or left raw (see
    /// [`relist_page`](Self::relist_page)).
    fn hold_listed_slice(&self, page: &mut RawPage<T>) -> bool {
        let mut decoded_bytes = 0;
        for raw in page.items.by_ref() {
            raw.write_key(&mut page.key);
            let held = match self.shared.known.get_by_key(&page.key) {
                Some(stored)
                    if !raw.resource_version().is_empty()
                        && stored.meta().resource_version == raw.resource_version() =>
                {
                    Held::Decoded(stored)
                }
                // Every other object, or all while the consumer lags: see "Listed objects
                // decoded by the producer".
                _ if (self.take_odd_listed() || self.consumer_behind())
                    && self.within_decode_budget(raw.json().len()) =>
                {
                    decoded_bytes += raw.json().len();
                    match self.decode_listed(&raw) {
                        Some(obj) => Held::Decoded(obj),
                        None => Held::Raw(raw),
                    }
                }
                _ => Held::Raw(raw),
            };
            page.held.push(held);
            if decoded_bytes >= PRODUCER_DECODE_SLICE {
                return true;
            }
        }
        false
    }

    /// Ends the running relist: keys stored or pending but not listed are deleted with a tombstone.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// fifo.begin_relist();
    /// fifo.end_relist();
    /// assert!(consumer.try_pop().is_none()); // drains: an empty first list syncs at once
    /// assert!(fifo.has_synced());
    /// ```
    pub fn end_relist(&self) -> bool {
        self.send(Input::EndRelist)
    }

    /// Reports that the watch reached resourceVersion `rv` (a BOOKMARK, or the list's version after
    /// [`end_relist`](Self::end_relist)). Once nothing is pending the consumer reports it through
    /// [`Popped::caught_up_resource_version`], if need be with a pop that carries no deltas.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// fifo.bookmark("42");
    /// let p = consumer.try_pop().unwrap();
    /// assert!(p.deltas().is_empty());
    /// assert_eq!(p.caught_up_resource_version(), Some("42"));
    /// ```
    pub fn bookmark(&self, rv: &str) -> bool {
        self.send(Input::Bookmark(rv.to_string()))
    }

    /// Closes the fifo: later pushes are refused; what was pushed before is still popped, then `pop`
    /// returns `None`. Dropping the [`FifoConsumer`] also refuses further pushes.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// fifo.close();
    /// assert!(consumer.blocking_pop().is_none());
    /// ```
    pub fn close(&self) {
        // Relaxed: see `send`. The wake-up is carried by the `Close` input itself.
        if !self.shared.closed.swap(true, Ordering::Relaxed) {
            self.shared.inbox.push(Input::Close, 1, 0);
            // Producers waiting for room must see `closed` now.
            self.shared.inbox.room_made();
        }
    }

    /// Whether every delta of the first complete list has been popped and processed.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (fifo, _c) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// assert!(!fifo.has_synced());
    /// ```
    pub fn has_synced(&self) -> bool {
        // Acquire: pairs with the consumer's Release store, so a caller that sees `true` also sees
        // every store write the consumer made while processing the first list.
        self.shared.synced.load(Ordering::Acquire)
    }

    /// Waits until [`has_synced`](Self::has_synced) is true (returns `true`) or the consumer is
    /// gone (returns `false`). Cancel-safe.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// fifo.begin_relist();
    /// fifo.end_relist();
    /// assert!(consumer.try_pop().is_none()); // an empty first list syncs at once
    /// assert!(fifo.wait_synced().await);
    /// drop(consumer);
    /// # });
    /// ```
    pub async fn wait_synced(&self) -> bool {
        loop {
            // Created before the checks, so a notification between them is not lost.
            let notified = self.shared.synced_notify.notified();
            if self.has_synced() {
                return true;
            }
            // Relaxed: `closed` is set before the consumer's drop notifies, and the notification
            // (a release/acquire pair inside `Notify`) orders it before this re-check.
            if self.shared.closed.load(Ordering::Relaxed) {
                return false;
            }
            notified.await;
        }
    }

    /// Keys pending plus raw inputs not yet drained (an upper bound while pushes run; exact when
    /// quiescent and drained).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, DeltaFifo}, store::Store};
    /// let (fifo, _c) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// fifo.push_now(Delta::Added(Arc::new(Pod::default())));
    /// assert_eq!(fifo.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        let m = self.metrics();
        m.depth + m.backlog
    }

    /// Whether nothing is pending or undrained.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// assert!(DeltaFifo::new(Arc::new(Store::<Pod>::new())).0.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The counters.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// assert_eq!(DeltaFifo::new(Arc::new(Store::<Pod>::new())).0.metrics().depth, 0);
    /// ```
    pub fn metrics(&self) -> FifoMetrics {
        let s = &self.shared;
        // Relaxed throughout: statistics, each written by the consumer alone.
        FifoMetrics {
            received: s.received.load(Ordering::Relaxed),
            events: s.events.load(Ordering::Relaxed),
            coalesced: s.coalesced.load(Ordering::Relaxed),
            dropped_stale: s.dropped_stale.load(Ordering::Relaxed),
            depth: s.depth.load(Ordering::Relaxed),
            backlog: s
                .inbox
                .pushed()
                .saturating_sub(s.drained.load(Ordering::Relaxed)),
            backlog_bytes: s.inbox.queued_bytes(),
            raw_received: s.raw_received.load(Ordering::Relaxed),
            decoded: s.decoded.load(Ordering::Relaxed),
            // Each raw event is decoded, still pending (at most two per pending key), failed, or
            // saved: exact once nothing is pending.
            decodes_saved: s.raw_received.load(Ordering::Relaxed).saturating_sub(
                s.decoded.load(Ordering::Relaxed)
                    + s.decode_errors.load(Ordering::Relaxed)
                    + 2 * s.depth.load(Ordering::Relaxed) as u64,
            ),
            decode_errors: s.decode_errors.load(Ordering::Relaxed),
            pending_raw_bytes: s.pending_raw_bytes.load(Ordering::Relaxed),
        }
    }
}

/// The single consumer. Pops coalesced deltas in order; see the module docs.
pub struct FifoConsumer<T> {
    shared: Arc<Shared<T>>,
    pending: Pending<T>,
    /// The `Close` marker has been drained.
    closed: bool,
    /// resourceVersion of the newest event or bookmark drained.
    newest_rv: String,
    /// A bookmark was drained and not yet reported by a pop.
    bookmark_unreported: bool,
    /// Pops since the last drain (see [`POPS_PER_DRAIN`]).
    pops_since_drain: u32,
    /// A raw object failed to decode since the last relist ended: the store may have missed an
    /// event, so no pop reports a caught-up resourceVersion.
    decode_failed_since_relist: bool,
    /// An input taken from the inbox and held back until the first list is out (see "First sync").
    held: Option<Input<T>>,
    /// A `Popped` is alive: counted in the published depth until it is dropped.
    handed_out: bool,
}

/// A popped key: its one or two deltas, in order. Dropping it marks it processed (for
/// [`DeltaFifo::has_synced`]); apply it to the store and notify handlers first.
///
/// A pop with no deltas (and an empty key) only reports that the store is caught up with a
/// bookmark: see [`caught_up_resource_version`](Self::caught_up_resource_version).
///
/// ```
/// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, DeltaFifo}, store::Writer};
/// let store = Arc::new(Writer::<Pod>::new());
/// let (fifo, mut consumer) = DeltaFifo::new(store.clone());
/// fifo.push_now(Delta::Added(Arc::new(Pod::default())));
/// let popped = consumer.blocking_pop().unwrap();
/// for d in popped.deltas() {
///     let _old = store.apply(d);
/// }
/// assert!(!popped.in_initial_list());
/// ```
pub struct Popped<'a, T: Object> {
    consumer: &'a mut FifoConsumer<T>,
    key: Arc<str>,
    deltas: PoppedDeltas<T>,
    initial: bool,
    caught_up: Option<String>,
}

/// The deltas of a pop, inline (a pop allocates nothing).
enum PoppedDeltas<T> {
    None,
    One([Delta<T>; 1]),
    Two([Delta<T>; 2]),
}

impl<T: Object> Popped<'_, T> {
    /// The cache key.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, DeltaFifo}, store::Store};
    /// # let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// # let mut p = Pod::default(); p.metadata.name = "a".into();
    /// fifo.push_now(Delta::Added(Arc::new(p)));
    /// assert_eq!(consumer.blocking_pop().unwrap().key(), "a");
    /// ```
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The deltas, oldest first: one, or `[Deleted(x), Added(y)]` for a re-create.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, DeltaFifo}, store::Store};
    /// # let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// fifo.push_now(Delta::Added(Arc::new(Pod::default())));
    /// assert_eq!(consumer.blocking_pop().unwrap().deltas().len(), 1);
    /// ```
    pub fn deltas(&self) -> &[Delta<T>] {
        match &self.deltas {
            PoppedDeltas::None => &[],
            PoppedDeltas::One(d) => d,
            PoppedDeltas::Two(d) => d,
        }
    }

    /// Whether this key is part of the first complete list (handlers' `on_add(obj, true)`).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// # let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// fifo.begin_relist();
    /// fifo.relist_page_now(vec![Arc::new(Pod::default())]);
    /// assert!(consumer.blocking_pop().unwrap().in_initial_list());
    /// ```
    pub fn in_initial_list(&self) -> bool {
        self.initial
    }

    /// `Some(rv)` when nothing else was pending: once these deltas are applied, the store is exactly
    /// the server's state at `rv` (the newest event or bookmark taken in; docs/informer-design.md
    /// §5, for `Store::set_last_applied_resource_version`).
    /// `None` while a relist is running or other keys are pending.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, DeltaFifo}, store::Store};
    /// # let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// let mut p = Pod::default();
    /// (p.metadata.name, p.metadata.resource_version) = ("a".into(), "7".into());
    /// fifo.push_now(Delta::Added(Arc::new(p)));
    /// assert_eq!(consumer.blocking_pop().unwrap().caught_up_resource_version(), Some("7"));
    /// ```
    pub fn caught_up_resource_version(&self) -> Option<&str> {
        self.caught_up.as_deref()
    }
}

impl<T: Object> Drop for Popped<'_, T> {
    fn drop(&mut self) {
        self.consumer.handed_out = false;
        if self.initial {
            let p = &mut self.consumer.pending;
            p.initial_outstanding -= 1;
            self.consumer.publish();
        } else {
            // Relaxed: a statistic, single writer (see `publish`).
            let depth = self.consumer.pending.len();
            self.consumer.shared.depth.store(depth, Ordering::Relaxed);
        }
    }
}

impl<T> Drop for FifoConsumer<T> {
    fn drop(&mut self) {
        // Nobody will drain the inbox any more: refuse further input so it cannot grow. Relaxed: see
        // `DeltaFifo::send`.
        self.shared.closed.store(true, Ordering::Relaxed);
        // A producer waiting for room would wait for ever: wake it to see `closed`.
        self.shared.inbox.room_made();
        self.shared.synced_notify.notify_waiters();
    }
}

impl<T: Object> FifoConsumer<T> {
    /// Drains raw inputs into the coalescing state (up to [`DRAIN_BATCH`] when nothing is pending,
    /// else up to `DRAIN_WHILE_PENDING` inputs or `DRAIN_BYTES_WHILE_PENDING` of JSON, and never
    /// past [`PENDING_RAW_BYTES`]); returns how many.
    fn drain(&mut self) -> usize {
        let known = &*self.shared.known;
        let mut n = 0;
        let mut took_held = false;
        let (limit, byte_limit) = if self.pending.len() == 0 {
            (DRAIN_BATCH, usize::MAX)
        } else {
            (DRAIN_WHILE_PENDING, DRAIN_BYTES_WHILE_PENDING)
        };
        let mut bytes = 0;
        // Past the budget of undecoded bytes held pending, what the producer sends stays in the
        // inbox (and the async producer waits): see "Back-pressure".
        while n < limit && bytes < byte_limit && self.pending.raw_bytes() < PENDING_RAW_BYTES {
            let input = match self.held.take() {
                Some(input) => {
                    took_held = true;
                    input
                }
                None => match self.shared.inbox.try_pop(Input::weight) {
                    Some(input) => {
                        n += 1;
                        input
                    }
                    None => break,
                },
            };
            // First sync: the first list goes out before anything behind it comes in; a bookmark
            // right behind it (the list's resourceVersion) only names the state it reaches.
            if self.pending.first_list_done
                && !self.pending.synced()
                && self.pending.len() > 0
                && !matches!(input, Input::Bookmark(_))
            {
                self.held = Some(input);
                break;
            }
            match input {
                Input::Event(mut d) => {
                    bytes += d.held().raw_bytes();
                    d.held_mut().own_bytes();
                    if !d.is_tombstone() && !d.resource_version().is_empty() {
                        self.newest_rv.clear();
                        self.newest_rv.push_str(d.resource_version());
                    }
                    self.pending.event(d, known)
                }
                Input::Bookmark(rv) => {
                    self.newest_rv = rv;
                    self.bookmark_unreported = true;
                }
                Input::BeginRelist => self.pending.begin_relist(),
                Input::Page(items, _) => {
                    for mut obj in items {
                        bytes += obj.raw_bytes();
                        obj.own_bytes();
                        self.pending.listed(obj, known);
                    }
                }
                Input::EndRelist => {
                    self.pending.end_relist(known);
                    // The relist put every key the failed decode may have missed right.
                    self.decode_failed_since_relist = false;
                }
                // Everything pushed before `close` was pushed before this marker: drained already.
                Input::Close => self.closed = true,
            }
        }
        if n > 0 {
            // Relaxed: statistic (see `FifoMetrics::backlog`), single writer.
            let drained = self.shared.drained.load(Ordering::Relaxed);
            self.shared.drained.store(drained + n, Ordering::Relaxed);
            self.shared.inbox.room_made();
        }
        if n > 0 || took_held {
            self.publish();
        }
        n
    }

    /// Publishes counters and, once reached, the synced state.
    fn publish(&self) {
        let (s, p) = (&self.shared, &self.pending);
        // Relaxed: statistics, single writer (this consumer).
        s.received.store(p.counters.received, Ordering::Relaxed);
        s.events.store(p.counters.events, Ordering::Relaxed);
        s.coalesced.store(p.counters.coalesced, Ordering::Relaxed);
        s.dropped_stale
            .store(p.counters.dropped_stale, Ordering::Relaxed);
        s.raw_received
            .store(p.counters.raw_received, Ordering::Relaxed);
        s.depth
            .store(p.len() + usize::from(self.handed_out), Ordering::Relaxed);
        s.pending_raw_bytes.store(p.raw_bytes(), Ordering::Relaxed);
        // Release: everything this consumer did before (store writes while processing the first
        // list) happens-before a `has_synced` Acquire load that reads `true`. Relaxed load: this
        // consumer is the only writer.
        if p.synced() && !s.synced.load(Ordering::Relaxed) {
            s.synced.store(true, Ordering::Release);
            s.synced_notify.notify_waiters();
        }
    }

    /// Whether a pop would hand something out without waiting, once what has arrived is taken
    /// in. Exact: an input that arrived is not enough, as many make nothing to pop (the start of
    /// a relist, a page of unchanged objects, a stale event, an add and its delete).
    pub(crate) fn ready_now(&mut self) -> bool {
        self.drain_if_due();
        self.ready()
    }

    /// Whether `take` has something to hand out: a pending key, or an unreported bookmark.
    fn ready(&self) -> bool {
        self.pending.len() > 0 || (self.bookmark_unreported && !self.pending.relist_running())
    }

    fn take(&mut self) -> Option<Popped<'_, T>> {
        self.pops_since_drain += 1;
        let (key, deltas, initial) = match self.pending.pop_front() {
            Some((key, entry)) => {
                let first = self.resolve(entry.first);
                let second = entry.second.and_then(|c| self.resolve(*c));
                let deltas = match (first, second) {
                    (Some(a), Some(b)) => PoppedDeltas::Two([a, b]),
                    (Some(d), None) | (None, Some(d)) => PoppedDeltas::One([d]),
                    (None, None) => PoppedDeltas::None,
                };
                (key, deltas, entry.initial)
            }
            None if self.ready() => (Arc::from(""), PoppedDeltas::None, false),
            None => return None,
        };
        let settled = self.pending.len() == 0 && !self.pending.relist_running();
        if settled {
            // Reported now, or (after a decode failure) not to be reported at all.
            self.bookmark_unreported = false;
        }
        let caught_up = settled && !self.decode_failed_since_relist && !self.newest_rv.is_empty();
        let caught_up = caught_up.then(|| self.newest_rv.clone());
        self.handed_out = true;
        self.publish();
        Some(Popped {
            consumer: self,
            key,
            deltas,
            initial,
            caught_up,
        })
    }

    /// The delta handed out for `change`, decoding (and transforming) a raw object; `None` if it is
    /// not a valid `T`, which is counted and reported to the producer.
    ///
    /// A relist tombstone whose last known state (a pending watch event's object) does not decode
    /// is a deletion all the same: it goes out with the stored object as its last known state, or
    /// not at all if nothing is stored under its key (then there is nothing to delete). Either way
    /// the failure is counted, not reported: the key is gone from the server, so a relist would
    /// not bring it back.
    fn resolve(&mut self, change: Change<T>) -> Option<Delta<T>> {
        let shared = &self.shared;
        let mut decode = |raw: RawObject| {
            let obj = shared.decode(&raw)?;
            // Relaxed: a counter, single writer.
            shared.decoded.fetch_add(1, Ordering::Relaxed);
            Ok::<_, Error>(obj)
        };
        let tombstone_key = change.tombstone_key().map(str::to_owned);
        let e = match change.into_delta(&mut decode) {
            Ok(d) => return Some(d),
            Err(e) => e,
        };
        if let Some(key) = tombstone_key {
            tracing::debug!(error = %e, key, "a deleted key's last known state does not decode; deleting it with the stored one");
            // Relaxed: a counter, single writer.
            shared.decode_errors.fetch_add(1, Ordering::Relaxed);
            let last_known = shared.known.get_by_key(&key)?;
            return Some(Delta::Deleted(DeletedObject::Tombstone { key, last_known }));
        }
        tracing::warn!(error = %e, "a watch event's object does not decode; the store missed it until the next relist");
        self.decode_failed_since_relist = true;
        shared.decode_errors.fetch_add(1, Ordering::Relaxed);
        let mut slot = shared
            .decode_error
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        slot.get_or_insert(e);
        // Relaxed: see `take_decode_error`; the error was stored under the mutex first.
        shared.decode_failed.store(true, Ordering::Relaxed);
        shared.decode_notify.notify_one();
        None
    }

    /// Drains the inbox if nothing is pending or [`POPS_PER_DRAIN`] pops went by since the last
    /// drain.
    fn drain_if_due(&mut self) {
        if self.pending.len() == 0 || self.pops_since_drain >= POPS_PER_DRAIN {
            self.pops_since_drain = 0;
            self.drain();
        }
    }

    /// Pops the oldest pending key without waiting (draining what has arrived first when nothing
    /// is pending, and at least every few pops otherwise).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::DeltaFifo, store::Store};
    /// let (_fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// assert!(consumer.try_pop().is_none());
    /// ```
    pub fn try_pop(&mut self) -> Option<Popped<'_, T>> {
        self.drain_if_due();
        self.take()
    }

    /// Like [`pop`](Self::pop), blocking the thread while nothing is pending (for a consumer on a
    /// thread of its own; tokio's channels name theirs alike: `recv`, `try_recv`, `blocking_recv`).
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, DeltaFifo}, store::Store};
    /// let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// let producer = std::thread::spawn(move || {
    ///     fifo.push_now(Delta::Added(Arc::new(Pod::default())));
    ///     fifo.close();
    /// });
    /// let mut n = 0;
    /// while let Some(_p) = consumer.blocking_pop() { n += 1; }
    /// assert_eq!(n, 1);
    /// producer.join().unwrap();
    /// ```
    pub fn blocking_pop(&mut self) -> Option<Popped<'_, T>> {
        loop {
            self.drain_if_due();
            if self.ready() {
                return self.take();
            }
            if self.closed {
                return None;
            }
            let ticket = self.shared.inbox.prepare_wait();
            // Step (b) of the inbox protocol: look again after registering.
            if !self.shared.inbox.is_empty() {
                continue;
            }
            ticket.wait();
        }
    }

    /// Pops the oldest pending key, waiting while nothing is pending. `None` once the fifo is
    /// closed and everything pushed before was popped. Cancel-safe: dropping the future loses
    /// nothing. [`try_pop`](Self::try_pop) never waits; [`blocking_pop`](Self::blocking_pop)
    /// blocks the thread instead.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, DeltaFifo}, store::Store};
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Store::<Pod>::new()));
    /// tokio::spawn(async move { fifo.push(Delta::Added(Arc::new(Pod::default()))).await; });
    /// assert!(consumer.pop().await.is_some());
    /// # });
    /// ```
    pub async fn pop(&mut self) -> Option<Popped<'_, T>> {
        loop {
            self.drain_if_due();
            if self.ready() {
                return self.take();
            }
            if self.closed {
                return None;
            }
            let ticket = self.shared.inbox.prepare_wait();
            if !self.shared.inbox.is_empty() {
                continue;
            }
            ticket.wait_async().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ConfigMap;

    /// Nothing stored.
    struct Empty;
    impl KnownObjects<ConfigMap> for Empty {
        fn get_by_key(&self, _: &str) -> Option<Arc<ConfigMap>> {
            None
        }
        fn for_each_key(&self, _: &mut dyn FnMut(&str)) {}
    }

    fn config_map(name: &str, rv: &str) -> Arc<ConfigMap> {
        let mut cm = ConfigMap::default();
        cm.metadata.name = name.into();
        cm.metadata.resource_version = rv.into();
        Arc::new(cm)
    }

    /// The informer flushes its handlers' mailboxes when the next pop would wait: inputs that
    /// arrived but make nothing to pop must not count as "more coming".
    #[test]
    fn ready_now_is_false_for_inputs_that_make_nothing_to_pop() {
        let (fifo, mut consumer) = DeltaFifo::new(Arc::new(Empty));
        assert!(!consumer.ready_now());
        // The start of a relist, then an add and its delete: all arrived, nothing to pop.
        assert!(fifo.begin_relist());
        assert!(fifo.push_now(Delta::Added(config_map("a", "1"))));
        assert!(fifo.push_now(Delta::Deleted(DeletedObject::Final(config_map("a", "2")))));
        assert!(!consumer.ready_now());
        assert!(consumer.try_pop().is_none());
        // An event that stays: ready.
        assert!(fifo.push_now(Delta::Added(config_map("b", "3"))));
        assert!(consumer.ready_now());
        assert!(consumer.try_pop().is_some());
    }
}
