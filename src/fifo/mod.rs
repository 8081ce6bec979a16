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
//! - **Atomic relists:** what is pending when a relist after the first sends its first page goes
//!   out first; from that page to the relist's end nothing is handed out, then everything
//!   pending (its changes and tombstones, and what came in behind it) goes in one pop
//!   ([`Popped::is_relist`]), for the store to apply at once
//!   ([`Writer::apply_all`](crate::store::Writer::apply_all)): no reader sees half of the old
//!   state and half of the new (docs/informer-design.md §4). Its listed objects are decoded as
//!   they are drained, so the objects it holds are not kept as JSON too, and the budget of
//!   undecoded bytes does not stop its intake. The first list goes out key by key. A relist
//!   that fails and starts again stays held (the store keeps the newest state the watch
//!   brought); one held when the fifo closes goes out as it stands.
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
//!   it the consumer takes no more input until pops bring it under (except while a relist is
//!   held, whose objects are decoded as they come).
//! - A held relist: O(keys it changes), decoded, until it ends.
//! - The producer decodes at most 8 MiB of a list's JSON (see above).
//!
//! These numbers are private tuning constants, not API; how they were chosen, with the
//! measurements, is in `docs/fifo-tuning.md`.

mod consumer;
mod delta;
mod inbox;
mod pending;
mod producer;

use std::sync::Arc;

#[cfg(informer_loom)]
use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
#[cfg(not(informer_loom))]
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

use crate::error::Error;
use crate::model::Object;
use crate::watch::RawObject;
pub use consumer::{FifoConsumer, Popped};
pub use delta::{DeletedObject, Delta, KnownObjects, RawDelta};
use inbox::Inbox;
use pending::{Change, Held};
pub use producer::{DeltaFifo, EventInput, ListedPage};

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
    /// [`PRODUCER_DECODE_BUDGET`](producer::PRODUCER_DECODE_BUDGET)).
    producer_decoded: AtomicUsize,
}

impl<T> Shared<T> {
    /// The state of a new fifo comparing against `known`, its async pushes waiting at `capacity`
    /// undrained objects (at least 1).
    fn new(known: Arc<dyn KnownObjects<T>>, capacity: usize) -> Self {
        Shared {
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
        }
    }
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
