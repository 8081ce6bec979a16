//! The consumer's side of the fifo: [`FifoConsumer`], which drains the producers' inputs into the
//! per-key coalescing state and pops keys in order, and the [`Popped`] key it hands out.

use std::sync::Arc;

#[cfg(informer_loom)]
use loom::sync::atomic::Ordering;
#[cfg(not(informer_loom))]
use std::sync::atomic::Ordering;

use super::delta::{DeletedObject, Delta};
use super::pending::{Change, Held, Pending};
use super::{Input, Shared};
use crate::error::Error;
use crate::model::Object;
use crate::watch::RawObject;

/// Most raw inputs the consumer drains before handing out a key, so a fast producer cannot keep the
/// consumer draining forever.
const DRAIN_BATCH: usize = 4096;

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
const PENDING_RAW_BYTES: usize = 16 << 20;

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
    /// A relist after the first is being taken in (its first page has come): nothing is handed
    /// out until it ends, so that its changes reach the store at once ("Atomic relists").
    relist_held: bool,
    /// That relist has ended: the next pop hands out every pending key at once.
    relist_out: bool,
}

/// A popped key: its one or two deltas, in order. Dropping it marks it processed (for
/// [`DeltaFifo::has_synced`](super::DeltaFifo::has_synced)); apply it to the store and notify
/// handlers first.
///
/// A pop with no deltas (and an empty key) only reports that the store is caught up with a
/// bookmark: see [`caught_up_resource_version`](Self::caught_up_resource_version). The changes
/// of a relist after the first come out as one pop of every key ([`is_relist`](Self::is_relist)),
/// to be applied to the store at once.
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

/// The deltas of a pop, inline (a pop of one key allocates nothing).
enum PoppedDeltas<T> {
    None,
    One([Delta<T>; 1]),
    Two([Delta<T>; 2]),
    /// Every change of a relist after the first, key after key.
    Relist(Vec<Delta<T>>),
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
            PoppedDeltas::Relist(d) => d,
        }
    }

    /// Whether this pop holds every change of a relist after the first (its key is empty): apply
    /// them to the store at once ([`Writer::apply_all`](crate::store::Writer::apply_all)), so that
    /// no reader sees part of the old state beside part of the new, then notify.
    ///
    /// ```
    /// # use std::sync::Arc; use informer::{Pod, fifo::{Delta, DeltaFifo}, store::Writer};
    /// # fn pod(name: &str, rv: &str) -> Arc<Pod> { let mut p = Pod::default(); (p.metadata.name, p.metadata.resource_version) = (name.into(), rv.into()); Arc::new(p) }
    /// let store = Arc::new(Writer::<Pod>::new());
    /// let (fifo, mut consumer) = DeltaFifo::new(store.clone());
    /// for (page, rv) in [(vec![pod("a", "1")], "1"), (vec![pod("b", "2")], "2")] {
    ///     fifo.begin_relist();
    ///     fifo.relist_page_now(page);
    ///     fifo.end_relist();
    ///     fifo.bookmark(rv);
    ///     while let Some(popped) = consumer.try_pop() {
    ///         if popped.is_relist() {
    ///             store.apply_all(popped.deltas());
    ///         } else {
    ///             popped.deltas().iter().for_each(|d| drop(store.apply(d)));
    ///         }
    ///     }
    /// }
    /// assert_eq!(store.keys(), ["b"]); // "a" went with "b" came, in one step
    /// ```
    pub fn is_relist(&self) -> bool {
        matches!(self.deltas, PoppedDeltas::Relist(_))
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
    /// The one consumer of the fifo whose state is `shared`.
    pub(super) fn new(shared: Arc<Shared<T>>) -> Self {
        FifoConsumer {
            shared,
            pending: Pending::new(),
            closed: false,
            newest_rv: String::new(),
            bookmark_unreported: false,
            pops_since_drain: 0,
            decode_failed_since_relist: false,
            held: None,
            handed_out: false,
            relist_held: false,
            relist_out: false,
        }
    }
}

impl<T: Object> FifoConsumer<T> {
    /// Drains raw inputs into the coalescing state (up to [`DRAIN_BATCH`] when nothing is pending
    /// or a relist is held, else up to `DRAIN_WHILE_PENDING` inputs or `DRAIN_BYTES_WHILE_PENDING`
    /// of JSON, and never past [`PENDING_RAW_BYTES`] unless a relist is held); returns how many.
    fn drain(&mut self) -> usize {
        let known = &*self.shared.known;
        let mut n = 0;
        let mut took_held = false;
        let (limit, byte_limit) = if self.pending.len() == 0 || self.relist_held {
            (DRAIN_BATCH, usize::MAX)
        } else {
            (DRAIN_WHILE_PENDING, DRAIN_BYTES_WHILE_PENDING)
        };
        let mut bytes = 0;
        // Past the budget of undecoded bytes held pending, what the producer sends stays in the
        // inbox (and the async producer waits): see "Back-pressure". Not while a relist is held:
        // only its end lets pops go on, and its objects are decoded as they come (below).
        while n < limit
            && bytes < byte_limit
            && (self.relist_held || self.pending.raw_bytes() < PENDING_RAW_BYTES)
        {
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
            // Atomic relists: what was pending before a later relist's first page goes out
            // before the relist is held, so a relist that keeps failing holds back its own
            // changes only, and the store stays at the newest state the watch brought.
            if self.pending.first_list_done
                && !self.relist_held
                && self.pending.len() > 0
                && matches!(input, Input::Page(..))
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
                Input::BeginRelist => self.pending.begin_relist(known),
                Input::Page(items, _) => {
                    // A relist after the first holds every pop from its first page to its end.
                    self.relist_held |= self.pending.first_list_done;
                    for mut obj in items {
                        bytes += obj.raw_bytes();
                        // Held until the relist ends anyway: decoded now, so that what the
                        // relist holds is objects, not their JSON as well (unchanged ones come
                        // as the store's, from the producer). One that does not decode stays
                        // raw and is reported when it is handed out.
                        if self.relist_held && self.decode_listed(&mut obj) {
                            // Taken in raw all the same (`listed` counts those still raw).
                            self.pending.counters.raw_received += 1;
                        }
                        obj.own_bytes();
                        self.pending.listed(obj, known);
                    }
                }
                Input::EndRelist => {
                    let after_first = self.pending.first_list_done;
                    self.pending.end_relist(known);
                    // The relist put every key the failed decode may have missed right.
                    self.decode_failed_since_relist = false;
                    // Its changes (and whatever was pending) go out in one pop.
                    self.relist_out |= after_first;
                    self.relist_held = false;
                }
                // Everything pushed before `close` was pushed before this marker: drained already.
                // A relist held then goes out as it stands: its objects are the server's, and
                // everything pushed before `close` is popped before `None`.
                Input::Close => {
                    self.closed = true;
                    self.relist_out |= std::mem::take(&mut self.relist_held);
                }
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

    /// Whether `take` has something to hand out: a pending key, or an unreported bookmark; nothing
    /// while a relist is held.
    fn ready(&self) -> bool {
        !self.relist_held
            && (self.pending.len() > 0
                || (self.bookmark_unreported && !self.pending.relist_running()))
    }

    /// A listed object of a held relist, decoded if it is raw (see `drain`); whether it was.
    fn decode_listed(&self, obj: &mut Held<T>) -> bool {
        let Held::Raw(raw) = obj else { return false };
        let Ok(decoded) = self.shared.decode(raw) else {
            return false;
        };
        // Relaxed: a counter, single writer.
        self.shared.decoded.fetch_add(1, Ordering::Relaxed);
        *obj = Held::Decoded(decoded);
        true
    }

    /// Every pending key's deltas, key after key, for the pop that ends a held relist.
    fn take_all(&mut self) -> PoppedDeltas<T> {
        let mut deltas = Vec::with_capacity(self.pending.len());
        while let Some((_, entry)) = self.pending.pop_front() {
            // The first list is out before a relist is taken in ("First sync").
            debug_assert!(!entry.initial);
            deltas.extend(self.resolve(entry.first));
            deltas.extend(entry.second.and_then(|c| self.resolve(*c)));
        }
        PoppedDeltas::Relist(deltas)
    }

    fn take(&mut self) -> Option<Popped<'_, T>> {
        if self.relist_held {
            return None;
        }
        self.pops_since_drain += 1;
        let (key, deltas, initial) =
            if std::mem::take(&mut self.relist_out) && self.pending.len() > 0 {
                (Arc::from(""), self.take_all(), false)
            } else {
                match self.pending.pop_front() {
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
                }
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
        if self.pending.len() == 0 || self.pops_since_drain >= POPS_PER_DRAIN || self.relist_held {
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
            let waiter = self.shared.inbox.prepare_wait();
            // Step (b) of the inbox protocol: look again after registering.
            if !self.shared.inbox.is_empty() {
                continue;
            }
            waiter.wait();
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
            if self.relist_held {
                // Taking in a held relist hands nothing out, so no pop spends the task's budget:
                // spend it here, so that a long relist still lets the runtime run others.
                tokio::task::consume_budget().await;
            }
            if self.closed {
                return None;
            }
            let waiter = self.shared.inbox.prepare_async_wait();
            if !self.shared.inbox.is_empty() {
                continue;
            }
            waiter.wait().await;
        }
    }
}
