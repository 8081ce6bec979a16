//! The producer's side of the fifo: [`DeltaFifo`], which the reflector feeds with watch events,
//! relists and bookmarks, and the input types its methods take.

use crate::model::Metadata;
use std::sync::Arc;

#[cfg(informer_loom)]
use loom::sync::atomic::Ordering;
#[cfg(not(informer_loom))]
use std::sync::atomic::Ordering;

use super::consumer::FifoConsumer;
use super::delta::{Delta, KnownObjects, RawDelta};
use super::pending::{Change, Held};
use super::{FifoMetrics, Input, Shared, Transform};
use crate::error::Error;
use crate::model::Object;
use crate::watch::RawObject;

/// JSON bytes the producer decodes between two yields to its runtime (see "Listed objects decoded
/// by the producer"): about a third of a millisecond of decoding, so a page of large objects does
/// not hold a runtime worker for milliseconds.
const PRODUCER_DECODE_SLICE: usize = 64 << 10;

/// The JSON bytes of one list that the producer decodes at most (see "Listed objects decoded by
/// the producer"): what it decodes is allocated from its own thread's memory, where the consumer,
/// which later replaces those objects, cannot reuse it. 8 MiB covers half of a 10k-Endpoints list
/// (10 MB of JSON), whose sync the shared decode speeds up most. It restarts with each relist.
/// How it was chosen: `docs/fifo-tuning.md`.
const PRODUCER_DECODE_BUDGET: usize = 8 << 20;

/// The default [`DeltaFifo::capacity`]: undrained objects at which the async pushes wait.
const DEFAULT_CAPACITY: usize = 1024;

/// The JSON bytes of undrained inputs at which the async pushes wait, beside the capacity's
/// count (see "Back-pressure"): 1024 events of 16 MiB frames would otherwise be 16 GiB. 16 MiB
/// is 1024 events of 16 KiB: events of ordinary objects (1-5 KB) meet the count first, so their
/// throughput is as before.
const INBOX_BYTES: usize = 16 << 20;

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
            bytes: items.iter().map(|raw| raw.bytes().len()).sum(),
            held: Vec::with_capacity(items.len()),
            items: items.into_iter(),
            key: String::new(),
        }
    }

    fn into_input(self) -> Input<T> {
        Input::Page(self.held, self.bytes)
    }
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
        let shared = Arc::new(Shared::new(known, capacity));
        let consumer = FifoConsumer::new(shared.clone());
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
    /// unless it was taken already (or the wake was the informer's, asking for a relist). For a producer that must relist without waiting for its next
    /// event.
    pub async fn decode_failed(&self) {
        self.shared.decode_notify.notified().await
    }

    /// Wakes the producer waiting in [`decode_failed`](Self::decode_failed) (or the next one to
    /// wait) with no decode error to take: the informer asks its reflector to look at a relist
    /// request this way, so that a watch waits on one notification per event.
    pub(crate) fn interrupt_producer(&self) {
        self.shared.decode_notify.notify_one();
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
    /// # use informer::internals::watch::{EventDecoder, RawEvent};
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
    /// # use informer::internals::watch::{EventDecoder, RawEvent};
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
                let rv = &item.meta().resource_version();
                match self.shared.known.get_by_key(&item.meta().key()) {
                    Some(stored) if !rv.is_empty() && stored.meta().resource_version() == *rv => {
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
                        && stored.meta().resource_version() == raw.resource_version() =>
                {
                    Held::Decoded(stored)
                }
                // Every other object, or all while the consumer lags: see "Listed objects
                // decoded by the producer".
                _ if (self.take_odd_listed() || self.consumer_behind())
                    && self.within_decode_budget(raw.bytes().len()) =>
                {
                    decoded_bytes += raw.bytes().len();
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
    /// [`Popped::caught_up_resource_version`](super::Popped::caught_up_resource_version), if need
    /// be with a pop that carries no deltas.
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
