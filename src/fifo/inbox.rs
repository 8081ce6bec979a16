//! The concurrency core of the fifo: a multi-producer, single-consumer inbox of raw inputs, with a
//! wake-up protocol (an *event count*) that lets the consumer sleep, blocking or async, without any
//! lock on the producers' fast path.
//!
//! # Protocol
//! Producer `push`: (1) push onto the lock-free queue; (2) `epoch += 1`; (3) if `waiters` counts a
//! blocking waiter, take and release `lock`, then notify the condvar; if it counts an async one,
//! notify the async `Notify`.
//!
//! Consumer wait: (a) `waiters += unit` (1 for an async wait, [`BLOCKING_WAITER`] for a blocking
//! one) and `key = epoch`; (b) look at the queue again; (c) only if it is still empty, sleep until
//! `epoch != key`; (d) `waiters -= unit`.
//!
//! No lost wake-up: (2),(3) and (a) are `SeqCst`, so they sit in one total order. If the consumer's
//! read of `epoch` in (a) comes after the producer's (2), it synchronises with it, so (b) sees the
//! pushed item. Otherwise (a)'s increment of `waiters` precedes (2), so (3) reads the consumer's
//! unit and notifies its kind of wait. A blocking consumer checks `epoch` under `lock`, and the
//! producer passes through `lock` before notifying, so the notification cannot fall between the
//! consumer's check and its sleep. An async consumer registers with the `Notify` before it checks
//! `epoch`, and a `notify_one` that finds nobody registered leaves a permit: no lock needed.
//!
//! The fast path of `push` is a lock-free queue push, one `fetch_add` and one load. `lock` is taken
//! by a producer only while a blocking consumer is asleep, and the consumer holds it only to check
//! `epoch` and go to sleep (a few instructions), never while it processes anything. Waking an
//! async consumer (the informer's processor task) costs no lock and no system call: std's condvar
//! makes one on every notify, waiter or not, once per event when the consumer keeps up.
//!
//! # Room (back-pressure)
//! `queued` counts the weight of inputs pushed and not yet popped, and `queued_bytes` their bytes
//! (a producer adds both before pushing, the consumer subtracts both after popping). An async
//! producer that must not overfill the inbox calls `wait_for_room`: it creates a `room.notified()`
//! future, then reads `queued` and `queued_bytes`, and sleeps only if either is still at its
//! capacity; the consumer calls `room_made` (`notify_waiters`) after every drain. No
//! lost wake-up: a `Notified` future sees every `notify_waiters` made after its creation, and its
//! creation reads the notifier's state, which `notify_waiters` updates with release/acquire
//! atomics; so either the notification comes after the creation (and wakes the producer), or the
//! consumer's subtraction, which precedes its notification, happens-before the re-read.
//! A producer can overshoot the capacity by one input (and several producers by one each): the
//! bound is on waiting, not on a reservation.
//!
//! Under `--cfg informer_loom` the queue is a loom `Mutex<VecDeque>`, a linearizable stand-in for
//! crossbeam's `SegQueue` (which is linearizable too); loom then checks the protocol above and
//! everything built on it. The async waits (tokio's `Notify`) are built but not modelled: loom
//! does not see their synchronisation, and the models do not call them.

#[cfg(informer_loom)]
use loom::sync::{
    Condvar, Mutex,
    atomic::{AtomicUsize, Ordering::SeqCst},
};
#[cfg(not(informer_loom))]
use std::sync::{
    Condvar, Mutex,
    atomic::{AtomicUsize, Ordering::SeqCst},
};

#[cfg(informer_loom)]
type Queue<E> = Mutex<std::collections::VecDeque<E>>;
#[cfg(not(informer_loom))]
type Queue<E> = crossbeam_queue::SegQueue<E>;

/// See the module docs.
pub(crate) struct Inbox<E> {
    queue: Queue<E>,
    /// Incremented after every push; the consumer sleeps until it changes.
    epoch: AtomicUsize,
    /// The unit of the consumer's wait between "prepare to wait" and "done waiting": 0, or
    /// [`ASYNC_WAITER`] or [`BLOCKING_WAITER`] (one consumer, one wait at a time).
    waiters: AtomicUsize,
    lock: Mutex<()>,
    cond: Condvar,
    notify: tokio::sync::Notify,
    /// Weight of the inputs pushed and not yet popped (see "Room").
    queued: AtomicUsize,
    /// Bytes of the inputs pushed and not yet popped (see "Room").
    queued_bytes: AtomicUsize,
    /// Producers waiting for room (see "Room").
    room: tokio::sync::Notify,
}

impl<E> Inbox<E> {
    pub(crate) fn new() -> Self {
        Inbox {
            queue: Queue::default(),
            epoch: AtomicUsize::new(0),
            waiters: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cond: Condvar::new(),
            notify: tokio::sync::Notify::new(),
            queued: AtomicUsize::new(0),
            queued_bytes: AtomicUsize::new(0),
            room: tokio::sync::Notify::new(),
        }
    }

    /// Pushes an input of `weight` units and `bytes` bytes and wakes a sleeping consumer. Never
    /// blocks unless a blocking consumer is asleep, and then only for the consumer's
    /// few-instruction critical section.
    pub(crate) fn push(&self, input: E, weight: usize, bytes: usize) {
        // Relaxed: only `wait_for_room` reads them, as bounds that may be overshot (module docs).
        self.queued
            .fetch_add(weight, std::sync::atomic::Ordering::Relaxed);
        if bytes > 0 {
            self.queued_bytes
                .fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        }
        #[cfg(informer_loom)]
        self.queue.lock().unwrap().push_back(input);
        #[cfg(not(informer_loom))]
        self.queue.push(input);
        // SeqCst, step (2): must be in the single total order with the consumer's step (a); and as a
        // release it publishes the push to a consumer whose `epoch` load reads this value.
        self.epoch.fetch_add(1, SeqCst);
        // SeqCst, step (3): if this load came before the consumer's increment in the total order, then
        // so did our increment of `epoch`, and the consumer's (a) will see it (module docs).
        let waiters = self.waiters.load(SeqCst);
        if waiters >= BLOCKING_WAITER {
            // Passing through the lock orders us after a consumer that checked `epoch` and is about to
            // sleep: it is now asleep on `cond` (the wait released the lock) or has not checked yet.
            drop(self.lock.lock().unwrap_or_else(|e| e.into_inner()));
            self.cond.notify_all();
        }
        if !waiters.is_multiple_of(BLOCKING_WAITER) {
            self.notify.notify_one();
        }
    }

    /// Takes the oldest input, if any, and takes its `weight` (units, bytes) off the queued
    /// totals. Consumer only.
    pub(crate) fn try_pop(&self, weight: impl Fn(&E) -> (usize, usize)) -> Option<E> {
        #[cfg(informer_loom)]
        let input = self.queue.lock().unwrap().pop_front()?;
        #[cfg(not(informer_loom))]
        let input = self.queue.pop()?;
        let (units, bytes) = weight(&input);
        // Relaxed: see `push`; the wake-up of a waiting producer goes through `room_made`.
        self.queued
            .fetch_sub(units, std::sync::atomic::Ordering::Relaxed);
        if bytes > 0 {
            self.queued_bytes
                .fetch_sub(bytes, std::sync::atomic::Ordering::Relaxed);
        }
        Some(input)
    }

    /// Whether fewer than `capacity` units and fewer than `byte_capacity` bytes are queued.
    fn has_room(&self, capacity: usize, byte_capacity: usize) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        // Relaxed: bounds (module docs).
        self.queued.load(Relaxed) < capacity && self.queued_bytes.load(Relaxed) < byte_capacity
    }

    /// Waits until fewer than `capacity` units and fewer than `byte_capacity` bytes are queued,
    /// or `closed()` is true. Cancel-safe.
    pub(crate) async fn wait_for_room(
        &self,
        capacity: usize,
        byte_capacity: usize,
        closed: impl Fn() -> bool,
    ) {
        // Fast path: room.
        if self.has_room(capacity, byte_capacity) {
            return;
        }
        loop {
            let notified = self.room.notified();
            let mut notified = std::pin::pin!(notified);
            // Created before the check: see "Room" in the module docs. (Relaxed suffices: the
            // notifier's state orders the consumer's subtraction before this read, or wakes us.)
            notified.as_mut().enable();
            if self.has_room(capacity, byte_capacity) || closed() {
                return;
            }
            notified.await;
        }
    }

    /// Wakes producers waiting for room (after the consumer popped something, or went away).
    pub(crate) fn room_made(&self) {
        self.room.notify_waiters();
    }

    /// Whether the queue is empty right now (step (b) of the protocol). Consumer only.
    pub(crate) fn is_empty(&self) -> bool {
        #[cfg(informer_loom)]
        return self.queue.lock().unwrap().is_empty();
        #[cfg(not(informer_loom))]
        return self.queue.is_empty();
    }

    /// Weight of the inputs pushed and not yet popped (approximate while pushes and pops run).
    pub(crate) fn queued(&self) -> usize {
        // Relaxed: a bound that may be overshot (see "Room").
        self.queued.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes of the inputs pushed and not yet popped (approximate while pushes and pops run).
    pub(crate) fn queued_bytes(&self) -> usize {
        // Relaxed: a bound that may be overshot (see "Room").
        self.queued_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many pushes have completed (used for the approximate backlog in `len`).
    pub(crate) fn pushed(&self) -> usize {
        // Relaxed: a statistic; nothing is read on the strength of it.
        self.epoch.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Step (a) of a blocking wait: registers the consumer as a waiter. Check the queue again,
    /// then call [`BlockingWait::wait`] (or drop it if something arrived).
    pub(crate) fn prepare_wait(&self) -> BlockingWait<'_, E> {
        BlockingWait(self.register(BLOCKING_WAITER))
    }

    /// Step (a) of an async wait: as [`prepare_wait`](Self::prepare_wait), then await
    /// [`AsyncWait::wait`].
    pub(crate) fn prepare_async_wait(&self) -> AsyncWait<'_, E> {
        AsyncWait(self.register(ASYNC_WAITER))
    }

    fn register(&self, unit: usize) -> Registration<'_, E> {
        // SeqCst: step (a), see module docs.
        self.waiters.fetch_add(unit, SeqCst);
        // SeqCst: step (a); reading a producer's increment synchronises with it (module docs).
        let key = self.epoch.load(SeqCst);
        Registration {
            inbox: self,
            key,
            unit,
        }
    }
}

/// What an async wait adds to `waiters`.
const ASYNC_WAITER: usize = 1;
/// What a blocking wait adds to `waiters`: above any count of async waits (there is one consumer,
/// so at most one wait of either kind).
const BLOCKING_WAITER: usize = 1 << 16;

/// A waiter counted in `waiters` since the push count `key`; dropping it (also when an async wait
/// is cancelled) unregisters it.
struct Registration<'a, E> {
    inbox: &'a Inbox<E>,
    key: usize,
    /// [`ASYNC_WAITER`] or [`BLOCKING_WAITER`]: which wake-up producers owe it.
    unit: usize,
}

impl<E> Registration<'_, E> {
    /// Whether a push completed since the registration.
    fn pushed_since(&self) -> bool {
        // SeqCst: only needs to see a push whose producer passed through `lock` after us (ordered by
        // the lock) or one that happened before; SeqCst keeps the reasoning to one total order.
        self.inbox.epoch.load(SeqCst) != self.key
    }
}

impl<E> Drop for Registration<'_, E> {
    fn drop(&mut self) {
        // SeqCst, step (d): once producers no longer see our unit they skip our kind of wake-up;
        // we are done sleeping.
        self.inbox.waiters.fetch_sub(self.unit, SeqCst);
    }
}

/// A registered blocking waiter: producers wake it through the lock and the condition variable.
#[must_use = "dropping it unregisters the waiter"]
pub(crate) struct BlockingWait<'a, E>(Registration<'a, E>);

impl<E> BlockingWait<'_, E> {
    /// Step (c), blocking: sleeps until a push after the registration.
    pub(crate) fn wait(self) {
        let inbox = self.0.inbox;
        let mut guard = inbox.lock.lock().unwrap_or_else(|e| e.into_inner());
        while !self.0.pushed_since() {
            guard = inbox.cond.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A registered async waiter: producers wake it through the `Notify`.
#[must_use = "dropping it unregisters the waiter"]
pub(crate) struct AsyncWait<'a, E>(Registration<'a, E>);

impl<E> AsyncWait<'_, E> {
    /// Step (c), async: resolves after a push after the registration (or spuriously, so callers
    /// loop). Cancel-safe: dropping the future drops the registration.
    pub(crate) async fn wait(self) {
        let notified = self.0.inbox.notify.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the check below: a `notify_one` after it wakes us, and one before it
        // left a permit that makes the future ready at once.
        notified.as_mut().enable();
        if !self.0.pushed_since() {
            notified.await;
        }
    }
}
