//! Event handlers and their queues.
//!
//! Every handler has its own queue, drained on the client's handler pool by at most one thread at a
//! time, so a handler sees its notifications one at a time and in order, and a slow or panicking
//! handler delays only itself (one that blocks for good holds a pool thread, and the pool starts
//! another when jobs wait behind it: `src/thread_pool.rs`). The queue coalesces per key (informer-design §6): while a key waits, newer notifications
//! for it merge into the waiting one, so a handler that falls behind receives fewer, newer
//! notifications, and its queue holds at most two per key (a delete and a re-create, or an initial
//! add and what came after): its memory is O(keys), whatever the event rate.
//!
//! | waiting \ new | Add(y)            | Update(_, y)   | Delete(d) |
//! |---------------|-------------------|----------------|-----------|
//! | Add(x)        | Add(y)            | Add(y)         | nothing (the handler never heard of x) |
//! | Add(x), initial | Add(x), Update(x, y) | Add(x), Update(x, y) | Add(x), Delete(d) |
//! | Update(o, x)  | Update(o, y)      | Update(o, y)   | Delete(d) |
//! | Delete(d)     | Delete(d), Add(y) | Delete(d), Add(y) | Delete(d') |
//!
//! An initial add (an object of the list the handler starts from) is delivered as listed: what
//! comes for its key while it waits queues behind it, coalescing there. So a handler's first
//! notifications are exactly the list, then the changes since (as client-go delivers them), and
//! `kwatch --until-synced` prints the list and nothing newer. One case needs three notifications (an
//! initial add, a delete, a re-create): the re-created object then stands in for the listed one.

use crate::model::Metadata;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::panic_message;
use crate::fifo::DeletedObject;
use crate::keyed_queue::KeyedQueue;
use crate::reflector::{ErrorCallback, report};
use crate::thread_pool::ThreadPool;
use crate::{Error, Object};

/// Receives an informer's notifications. Every method has an empty default.
///
/// Handlers run on the client's handler threads ([`Config::handler_threads`](crate::Config)),
/// not on the runtime's workers, and inside the runtime the informer was started on: a handler
/// may `tokio::spawn` a task (to write to the apiserver, say) or send on a channel. It may
/// block, which holds up its own notifications only, never the store or other handlers; blocking
/// on the informer's runtime from a handler (`Handle::block_on`) can deadlock a `current_thread`
/// runtime, so hand such work to a task. After the runtime shuts down, tasks a handler spawns
/// never run.
///
/// ```
/// use std::sync::Arc;
/// use informer::{Pod, informer::EventHandler, fifo::DeletedObject};
/// struct Log;
/// impl EventHandler<Pod> for Log {
///     fn on_add(&self, pod: &Arc<Pod>, in_initial_list: bool) {
///         println!("add {} (initial: {in_initial_list})", pod.metadata.name);
///     }
///     fn on_delete(&self, pod: &DeletedObject<Pod>) {
///         println!("delete {}", pod.key());
///     }
/// }
/// ```
pub trait EventHandler<T>: Send + Sync + 'static {
    /// A new object; `in_initial_list` is true for objects of the first list (or, for a handler
    /// added later, for the objects the store held when it was added).
    fn on_add(&self, obj: &Arc<T>, in_initial_list: bool) {
        let _ = (obj, in_initial_list);
    }
    /// A changed object (or, on resync, an unchanged one: `old` and `new` then have the same
    /// resourceVersion).
    fn on_update(&self, old: &Arc<T>, new: &Arc<T>) {
        let _ = (old, new);
    }
    /// A deleted object: its final state, or a tombstone when a relist found it gone.
    fn on_delete(&self, obj: &DeletedObject<T>) {
        let _ = obj;
    }
}

/// A handler made of closures; unset ones do nothing.
///
/// ```
/// use informer::{Pod, informer::HandlerFns};
/// let h = HandlerFns::<Pod>::new().on_add(|pod, _| println!("{}", pod.metadata.name));
/// # let _ = h;
/// ```
#[allow(clippy::type_complexity)]
pub struct HandlerFns<T> {
    add: Option<Box<dyn Fn(&Arc<T>, bool) + Send + Sync>>,
    update: Option<Box<dyn Fn(&Arc<T>, &Arc<T>) + Send + Sync>>,
    delete: Option<Box<dyn Fn(&DeletedObject<T>) + Send + Sync>>,
}

impl<T> Default for HandlerFns<T> {
    fn default() -> Self {
        HandlerFns {
            add: None,
            update: None,
            delete: None,
        }
    }
}

impl<T> HandlerFns<T> {
    /// A handler that does nothing until closures are set.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the closure for [`EventHandler::on_add`].
    pub fn on_add(mut self, f: impl Fn(&Arc<T>, bool) + Send + Sync + 'static) -> Self {
        self.add = Some(Box::new(f));
        self
    }
    /// Sets the closure for [`EventHandler::on_update`].
    pub fn on_update(mut self, f: impl Fn(&Arc<T>, &Arc<T>) + Send + Sync + 'static) -> Self {
        self.update = Some(Box::new(f));
        self
    }
    /// Sets the closure for [`EventHandler::on_delete`].
    pub fn on_delete(mut self, f: impl Fn(&DeletedObject<T>) + Send + Sync + 'static) -> Self {
        self.delete = Some(Box::new(f));
        self
    }
}

impl<T: Send + Sync + 'static> EventHandler<T> for HandlerFns<T> {
    fn on_add(&self, obj: &Arc<T>, initial: bool) {
        if let Some(f) = &self.add {
            f(obj, initial)
        }
    }
    fn on_update(&self, old: &Arc<T>, new: &Arc<T>) {
        if let Some(f) = &self.update {
            f(old, new)
        }
    }
    fn on_delete(&self, obj: &DeletedObject<T>) {
        if let Some(f) = &self.delete {
            f(obj)
        }
    }
}

/// One notification waiting for a handler.
pub(crate) enum Notification<T> {
    Add { obj: Arc<T>, initial: bool },
    Update { old: Arc<T>, new: Arc<T> },
    Delete(DeletedObject<T>),
}

// By hand: a derive would ask `T: Clone`, and only `Arc`s are cloned.
impl<T> Clone for Notification<T> {
    fn clone(&self) -> Self {
        match self {
            Notification::Add { obj, initial } => Notification::Add {
                obj: obj.clone(),
                initial: *initial,
            },
            Notification::Update { old, new } => Notification::Update {
                old: old.clone(),
                new: new.clone(),
            },
            Notification::Delete(d) => Notification::Delete(d.clone()),
        }
    }
}

impl<T> Notification<T> {
    fn is_initial(&self) -> bool {
        matches!(self, Notification::Add { initial: true, .. })
    }
}

/// What merging a new notification into a waiting one gives.
enum Merged<T> {
    One(Notification<T>),
    /// Both stay, in order (a delete, then a re-create).
    Both(Notification<T>, Notification<T>),
    Nothing,
}

/// The coalescing table of the module docs.
fn merge<T>(waiting: Notification<T>, new: Notification<T>) -> Merged<T> {
    use Notification::*;
    match (waiting, new) {
        (Add { initial, .. }, Add { obj, .. } | Update { new: obj, .. }) => {
            Merged::One(Add { obj, initial })
        }
        (Add { .. }, Delete(_)) => Merged::Nothing,
        (Update { old, .. }, Add { obj: new, .. } | Update { new, .. }) => {
            Merged::One(Update { old, new })
        }
        (Update { .. }, Delete(d)) => Merged::One(Delete(d)),
        (Delete(d), Add { obj, initial }) => Merged::Both(Delete(d), Add { obj, initial }),
        (Delete(d), Update { new, .. }) => Merged::Both(
            Delete(d),
            Add {
                obj: new,
                initial: false,
            },
        ),
        (Delete(_), Delete(d)) => Merged::One(Delete(d)),
    }
}

/// The notifications waiting for one key: at most two (a delete, then a re-create).
enum Entry<T> {
    /// Everything queued for the key cancelled out (an add, then its delete): the key is removed
    /// from `waiting` at once, and this value never stays in the queue.
    Empty,
    One(Notification<T>),
    Two(Notification<T>, Notification<T>),
}

impl<T> Entry<T> {
    fn initial_count(&self) -> usize {
        match self {
            Entry::Empty => 0,
            Entry::One(a) => usize::from(a.is_initial()),
            Entry::Two(a, b) => usize::from(a.is_initial()) + usize::from(b.is_initial()),
        }
    }
}

/// A handler's queue: keys in the order they first became pending (a [`KeyedQueue`]), one entry
/// per key, merged by the table of the module docs. A key whose notifications cancel out leaves the
/// queue, so a stalled handler holds O(keys with something waiting), however many keys came and went.
pub(crate) struct Queue<T> {
    waiting: KeyedQueue<Entry<T>>,
    /// Initial notifications queued but not yet delivered.
    initial_outstanding: usize,
    /// Notifications merged into waiting ones.
    coalesced: u64,
    closed: bool,
    /// A job of this queue's slot is in the pool or running (see [`Slot`]).
    scheduled: bool,
    /// The job is inside a call of the handler.
    in_call: bool,
    /// Notifications pushed (coalesced ones included) while no job of the slot was scheduled;
    /// reset when one is (see [`Slot::notify`]).
    deferred: usize,
}

impl<T> Queue<T> {
    fn new() -> Self {
        Queue {
            waiting: KeyedQueue::new(),
            initial_outstanding: 0,
            coalesced: 0,
            closed: false,
            scheduled: false,
            in_call: false,
            deferred: 0,
        }
    }

    /// Whether the caller must submit the slot's job: something waits, the slot is open and no
    /// job is in the pool; if so the queue counts it as scheduled from now.
    fn schedule(&mut self) -> bool {
        let due = !self.scheduled && !self.closed && !self.waiting.is_empty();
        self.scheduled |= due;
        if self.scheduled {
            self.deferred = 0;
        }
        due
    }

    pub(crate) fn push(&mut self, key: &str, n: Notification<T>) {
        if self.closed {
            return; // nobody will deliver it
        }
        let Some(entry) = self.waiting.get_mut(key) else {
            self.initial_outstanding += usize::from(n.is_initial());
            self.waiting.push_back(Arc::from(key), Entry::One(n));
            return;
        };
        let before = entry.initial_count();
        let merged = match std::mem::replace(entry, Entry::Empty) {
            Entry::Empty => Entry::One(n),
            // An initial add is delivered as listed; what comes after waits behind it.
            Entry::One(Notification::Add { obj, initial: true }) => {
                let listed = Notification::Add {
                    obj: obj.clone(),
                    initial: true,
                };
                match n {
                    Notification::Add { obj: new, .. } | Notification::Update { new, .. } => {
                        Entry::Two(listed, Notification::Update { old: obj, new })
                    }
                    Notification::Delete(d) => Entry::Two(listed, Notification::Delete(d)),
                }
            }
            Entry::One(waiting) => {
                self.coalesced += 1;
                match merge(waiting, n) {
                    Merged::One(a) => Entry::One(a),
                    Merged::Both(a, b) => Entry::Two(a, b),
                    Merged::Nothing => Entry::Empty,
                }
            }
            Entry::Two(first, waiting) => {
                // `first` (a delete, or an initial add) stays first; the second absorbs the new
                // notification.
                self.coalesced += 1;
                match merge(waiting, n) {
                    Merged::One(a) => Entry::Two(first, a),
                    // (initial add, delete, re-create): three would be needed; the re-created
                    // object stands in for the listed one.
                    Merged::Both(_, Notification::Add { obj, .. }) if first.is_initial() => {
                        Entry::One(Notification::Add { obj, initial: true })
                    }
                    Merged::Both(_, b) => Entry::Two(first, b), // (add, delete, add): one delete is enough
                    Merged::Nothing => Entry::One(first),
                }
            }
        };
        self.initial_outstanding = self.initial_outstanding + merged.initial_count() - before;
        if matches!(merged, Entry::Empty) {
            // Nothing left to deliver: the key leaves the queue.
            self.waiting.remove(key);
        } else {
            *entry = merged;
        }
    }

    /// The oldest waiting notification.
    fn pop(&mut self) -> Option<Notification<T>> {
        loop {
            match self.waiting.pop_front()? {
                (_, Entry::One(a)) => return Some(a),
                (key, Entry::Two(a, b)) => {
                    // The re-create waits at the front, keeping its key's turn.
                    self.waiting.push_front(key, Entry::One(b));
                    return Some(a);
                }
                (_, Entry::Empty) => continue,
            }
        }
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        matches!(self.waiting.get(key), Some(Entry::One(_) | Entry::Two(..)))
    }

    /// Places in the queue's order, live or dead (for the bound's test).
    #[cfg(test)]
    fn order_len(&self) -> usize {
        self.waiting.places()
    }

    fn len(&self) -> usize {
        self.waiting.len()
    }
}

/// Counters of one handler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HandlerMetrics {
    /// Keys with notifications waiting.
    pub depth: usize,
    /// A notification is being delivered: taken off the queue, its call not returned yet. With
    /// `depth == 0` and this false, everything queued for the handler has been handled.
    pub in_call: bool,
    /// Notifications delivered.
    pub delivered: u64,
    /// Notifications merged into waiting ones.
    pub coalesced: u64,
    /// Calls that panicked (caught, logged and passed to the informer's error callback; the
    /// handler goes on with the next notification).
    pub panics: u64,
}

/// A registered handler: its mailbox (queue) and its counters.
///
/// The handler runs on the client's handler pool ([`ThreadPool`]). Invariant: at most one job of
/// this slot is in the pool or running (`Queue::scheduled`), and a scheduled job runs until the
/// queue is empty or the slot closed. Notifications may wait unscheduled only until the processor
/// flushes (its fifo has nothing ready) or [`BATCH`] of them wait ([`Slot::notify`]). So they are
/// delivered one at a time, in order, and a slow handler holds up only itself: a job delivers at
/// most [`BATCH`] notifications, then queues itself again behind the other handlers' jobs.
pub(crate) struct Slot<T> {
    pub(crate) id: u64,
    queue: Mutex<Queue<T>>,
    handler: Box<dyn EventHandler<T>>,
    pool: Arc<ThreadPool>,
    delivered: AtomicU64,
    panics: AtomicU64,
    /// Told of every caught panic.
    on_error: Option<ErrorCallback>,
    /// The informer's progress signal, bumped when the last initial notification is gone
    /// (delivered, or coalesced away), so that sync waits wake.
    progress: tokio::sync::watch::Sender<()>,
    /// Whether the informer has synced (set before it bumps `progress` itself).
    informer_synced: Arc<AtomicBool>,
    /// Woken when the slot's job leaves the pool (see [`Slot::idle`]).
    idle: tokio::sync::Notify,
    /// How often the handler resyncs (`None`: never).
    pub(crate) resync_period: Option<std::time::Duration>,
    /// The resync timer, once the informer started, if the handler has a period.
    resync: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The runtime the informer started on, entered while the handler runs, so that a handler
    /// may `tokio::spawn` (set at start; a handler that runs before has none).
    runtime: Arc<std::sync::OnceLock<tokio::runtime::Handle>>,
}

/// What a slot shares with its informer.
pub(crate) struct SlotContext {
    /// The client's handler threads.
    pub(crate) pool: Arc<ThreadPool>,
    /// Told of every caught panic.
    pub(crate) on_error: Option<ErrorCallback>,
    /// The informer's progress signal.
    pub(crate) progress: tokio::sync::watch::Sender<()>,
    /// Whether the informer has synced.
    pub(crate) informer_synced: Arc<AtomicBool>,
    /// The runtime the informer started on, once it has.
    pub(crate) runtime: Arc<std::sync::OnceLock<tokio::runtime::Handle>>,
}

/// Notifications a job delivers before it lets other handlers' jobs run.
const BATCH: usize = 64;

impl<T: Object> Slot<T> {
    pub(crate) fn new(
        id: u64,
        handler: Box<dyn EventHandler<T>>,
        resync_period: Option<std::time::Duration>,
        informer: SlotContext,
    ) -> Arc<Slot<T>> {
        let SlotContext {
            pool,
            on_error,
            progress,
            informer_synced,
            runtime,
        } = informer;
        Arc::new(Slot {
            id,
            queue: Mutex::new(Queue::new()),
            handler,
            pool,
            delivered: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            on_error,
            progress,
            informer_synced,
            idle: tokio::sync::Notify::new(),
            resync_period,
            resync: Mutex::new(None),
            runtime,
        })
    }

    /// Queues notifications (keyed) in order; never waits for the handler.
    ///
    /// The caller has more coming (the processor, while its fifo has more waiting): the slot's
    /// job is submitted only once [`BATCH`] notifications wait unscheduled, or at the next
    /// [`flush`](Self::flush). A handler that keeps up would otherwise cost a thread wake-up per
    /// notification, which on a busy machine is most of the work.
    pub(crate) fn notify<K: AsRef<str>>(
        self: &Arc<Self>,
        notifications: impl ExactSizeIterator<Item = (K, Notification<T>)>,
    ) {
        let count = notifications.len();
        if count == 0 {
            return;
        }
        let (initial_done, schedule) = {
            let mut q = self.queue.lock().unwrap();
            let before = q.initial_outstanding;
            for (key, n) in notifications {
                q.push(key.as_ref(), n);
            }
            if !q.scheduled {
                q.deferred += count;
            }
            let due = q.deferred >= BATCH && q.schedule();
            // A delete can cancel the last waiting initial add.
            (before > 0 && q.initial_outstanding == 0, due)
        };
        if schedule {
            self.submit();
        }
        self.signal(initial_done);
    }

    /// Submits the slot's job if notifications wait unscheduled (see [`notify`](Self::notify)).
    pub(crate) fn flush(self: &Arc<Self>) {
        self.with_queue(|_| ());
    }

    /// Runs `f` with the queue locked (to queue several notifications at once).
    pub(crate) fn with_queue<R>(self: &Arc<Self>, f: impl FnOnce(&mut Queue<T>) -> R) -> R {
        let (r, schedule) = {
            let mut q = self.queue.lock().unwrap();
            let r = f(&mut q);
            (r, q.schedule())
        };
        if schedule {
            self.submit();
        }
        r
    }

    fn submit(self: &Arc<Self>) {
        let slot = self.clone();
        self.pool.submit(move || slot.deliver_batch());
    }

    /// Stops delivering once the call in progress (if any) returns, drops what waits, and stops
    /// the resync timer. [`idle`](Self::idle) then completes once no call is in progress.
    pub(crate) fn close(&self) {
        {
            let mut q = self.queue.lock().unwrap();
            q.closed = true;
            q.waiting = KeyedQueue::new();
        }
        if let Some(timer) = self.resync.lock().unwrap().take() {
            timer.abort();
        }
    }

    /// Completes once the slot has no job in the pool and no call in progress (at once if none is
    /// scheduled: notifications waiting unscheduled do not count). After [`close`](Self::close),
    /// that is for good.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before the look: a `notify_waiters` after it is not missed.
            notified.as_mut().enable();
            {
                let q = self.queue.lock().unwrap();
                // Closed and between calls is idle for good, even with its job still queued
                // behind other handlers' (it will find nothing to deliver).
                if !q.scheduled || (q.closed && !q.in_call) {
                    return;
                }
            }
            notified.await;
        }
    }

    /// Sets the resync timer (aborted by [`close`](Self::close)).
    pub(crate) fn set_resync_timer(&self, timer: tokio::task::JoinHandle<()>) {
        let mut slot = self.resync.lock().unwrap();
        if self.queue.lock().unwrap().closed {
            timer.abort();
        } else if let Some(old) = slot.replace(timer) {
            old.abort();
        }
    }

    /// Synced: the informer handed out its whole first list (`informer_synced`), so every initial
    /// notification has been queued, and none is waiting or being delivered.
    pub(crate) fn has_synced(&self, informer_synced: bool) -> bool {
        informer_synced && self.queue.lock().unwrap().initial_outstanding == 0
    }

    pub(crate) fn metrics(&self) -> HandlerMetrics {
        let q = self.queue.lock().unwrap();
        HandlerMetrics {
            depth: q.len(),
            in_call: q.in_call,
            // Relaxed: a counter read for display; it publishes no other memory.
            delivered: self.delivered.load(Ordering::Relaxed),
            coalesced: q.coalesced,
            panics: self.panics.load(Ordering::Relaxed),
        }
    }

    /// The slot's job on the pool: delivers up to [`BATCH`] notifications in order, then queues
    /// itself again if more wait, or leaves the pool (`scheduled` false) when the queue is empty
    /// or the slot closed. One lock per notification: the lock that takes the next one also
    /// records the end of the call before it (`in_call`, and the initial count that
    /// `has_synced` reads, counted down only once the call returned).
    fn deliver_batch(self: Arc<Self>) {
        // Inside the informer's runtime: `tokio::spawn` and `Handle::current` work in handlers.
        let _runtime = self.runtime.get().map(tokio::runtime::Handle::enter);
        // Whether the call that just returned delivered an initial notification.
        let mut returned: Option<bool> = None;
        for turn in 0..=BATCH {
            let mut q = self.queue.lock().unwrap();
            let mut initial_done = false;
            if let Some(initial) = returned.take() {
                q.in_call = false;
                if initial {
                    q.initial_outstanding = q.initial_outstanding.saturating_sub(1);
                    initial_done = q.initial_outstanding == 0;
                }
            }
            // `close` empties the queue and `push` ignores a closed one: a closed slot pops
            // nothing.
            let next = if turn == BATCH && q.len() > 0 && !q.closed {
                // Turn over: behind the other handlers' jobs, still scheduled.
                drop(q);
                self.signal(initial_done);
                self.submit();
                return;
            } else if turn == BATCH {
                None
            } else {
                q.pop()
            };
            let Some(notification) = next else {
                q.scheduled = false;
                drop(q);
                self.idle.notify_waiters();
                self.signal(initial_done);
                return;
            };
            q.in_call = true;
            drop(q);
            self.signal(initial_done);
            returned = Some(notification.is_initial());
            self.deliver(notification);
        }
    }

    /// Wakes sync waits once the last initial notification has been handled, if the informer
    /// has synced: before that a handler that keeps up runs out of initial notifications after
    /// each one, and the waits would wake for nothing each time (they wake anyway when the
    /// informer syncs, and then see this handler's count under its lock).
    fn signal(&self, initial_done: bool) {
        // No wait is missed when this reads false: a wait that saw our count above zero took the
        // queue lock after the informer's bump, so before our count reached zero under that lock;
        // the informer's store precedes its bump, so this load, after our unlock, would see it.
        // That needs only the lock and the watch channel. Acquire/Release adds that a wait woken
        // by our bump sees the informer synced (its fifo turned synced before the store).
        if initial_done && self.informer_synced.load(Ordering::Acquire) {
            self.progress.send_replace(());
        }
    }

    /// One call of the handler, its panic caught and reported.
    fn deliver(&self, notification: Notification<T>) {
        let result = catch_unwind(AssertUnwindSafe(|| match &notification {
            Notification::Add { obj, initial } => self.handler.on_add(obj, *initial),
            Notification::Update { old, new } => self.handler.on_update(old, new),
            Notification::Delete(d) => self.handler.on_delete(d),
        }));
        // Relaxed: counters for metrics only; nothing is ordered by them.
        self.delivered.fetch_add(1, Ordering::Relaxed);
        if let Err(payload) = result {
            self.panics.fetch_add(1, Ordering::Relaxed);
            let (call, key) = match &notification {
                Notification::Add { obj, .. } => ("on_add", obj.meta().key()),
                Notification::Update { new, .. } => ("on_update", new.meta().key()),
                Notification::Delete(d) => ("on_delete", d.key()),
            };
            let e = Error::Panicked {
                context: format!("event handler {}, {call} of {key}", self.id),
                message: panic_message(&*payload),
            };
            tracing::error!(
                handler = self.id,
                error = %e,
                "an event handler panicked; it goes on with the next event"
            );
            report(self.on_error.as_ref(), &e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Pod;

    #[test]
    fn a_stalled_queue_forgets_keys_that_came_and_went() {
        // Churn of unique names while the handler delivers nothing: each key is added, then
        // deleted before delivery, which cancels out. The queue must not keep a trace of them.
        let mut q = Queue::<Pod>::new();
        q.push(
            "kept",
            Notification::Add {
                obj: Arc::new(Pod::default()),
                initial: false,
            },
        );
        for i in 0..100_000 {
            let key = format!("ns/churn-{i}");
            let obj = Arc::new(Pod::default());
            q.push(
                &key,
                Notification::Add {
                    obj: obj.clone(),
                    initial: false,
                },
            );
            q.push(&key, Notification::Delete(DeletedObject::Final(obj)));
        }
        assert_eq!(q.len(), 1);
        assert!(q.order_len() <= 130, "{} places in order", q.order_len());
        assert!(matches!(q.pop(), Some(Notification::Add { .. })));
        assert!(q.pop().is_none());
    }

    #[test]
    fn an_initial_add_is_delivered_as_listed_and_what_came_after_behind_it() {
        let pod = |rv: &str| {
            let mut p = Pod::default();
            p.metadata.resource_version = rv.into();
            Arc::new(p)
        };
        let rv = |n: &Notification<Pod>| match n {
            Notification::Add { obj, initial } => {
                format!("add {} {initial}", obj.metadata.resource_version)
            }
            Notification::Update { old, new } => format!(
                "update {} {}",
                old.metadata.resource_version, new.metadata.resource_version
            ),
            Notification::Delete(_) => "delete".to_owned(),
        };
        let mut q = Queue::<Pod>::new();
        q.push(
            "a",
            Notification::Add {
                obj: pod("1"),
                initial: true,
            },
        );
        q.push(
            "a",
            Notification::Update {
                old: pod("1"),
                new: pod("2"),
            },
        );
        q.push(
            "a",
            Notification::Update {
                old: pod("2"),
                new: pod("3"),
            },
        );
        q.push(
            "b",
            Notification::Add {
                obj: pod("1"),
                initial: true,
            },
        );
        q.push("b", Notification::Delete(DeletedObject::Final(pod("4"))));
        // (initial add, delete, re-create): the re-created object stands in for the listed one.
        q.push(
            "c",
            Notification::Add {
                obj: pod("1"),
                initial: true,
            },
        );
        q.push("c", Notification::Delete(DeletedObject::Final(pod("5"))));
        q.push(
            "c",
            Notification::Add {
                obj: pod("6"),
                initial: false,
            },
        );
        assert_eq!(q.initial_outstanding, 3);
        let got: Vec<String> = std::iter::from_fn(|| q.pop()).map(|n| rv(&n)).collect();
        assert_eq!(
            got,
            [
                "add 1 true",
                "update 1 3",
                "add 1 true",
                "delete",
                "add 6 true"
            ]
        );
    }

    #[test]
    fn a_key_pending_again_after_cancelling_out_keeps_one_place() {
        let mut q = Queue::<Pod>::new();
        let obj = Arc::new(Pod::default());
        let add = |o: &Arc<Pod>| Notification::Add {
            obj: o.clone(),
            initial: false,
        };
        q.push("a", add(&obj));
        q.push("b", add(&obj));
        q.push("a", Notification::Delete(DeletedObject::Final(obj.clone())));
        q.push("a", add(&obj)); // pending again: after "b" now
        let order: Vec<bool> = std::iter::from_fn(|| q.pop())
            .map(|n| matches!(n, Notification::Add { .. }))
            .collect();
        assert_eq!(order, [true, true]);
        assert!(q.pop().is_none());
    }
}
