//! Shared informers: one reflector per resource (and namespace and selectors), one store, any number
//! of handlers.
//!
//! ```text
//! Reflector --Delta--> DeltaFifo --> processor --> Store (+indexes)
//! (tokio task)                      (tokio task)  \--> per-handler mailboxes --> the client's handler pool
//! ```
//!
//! The processor pops coalesced deltas, applies them to the [`Store`] and queues a notification for
//! every handler; it never waits for a handler. A relist after the first reaches the store in one
//! step ([`Popped::is_relist`](crate::fifo::Popped::is_relist)): no reader sees part of the old
//! state beside part of the new, and handlers hear of its changes once the store holds all of
//! them (client-go 1.36's atomic relists). Handlers run on the client's handler pool
//! ([`Config::handler_threads`](crate::Config::handler_threads) threads shared by every informer
//! built on the client), one notification at a time each, in order. So a process with N informers
//! and H handlers each runs the runtime's workers plus the pool's threads, whatever N and H.
//! Readers read the store directly, in nanoseconds, never the apiserver.
//!
//! ```no_run
//! # async fn demo(client: informer::Client) {
//! use std::time::Duration;
//! use informer::{Api, Pod, informer::{HandlerFns, Informer}};
//! let pods = Informer::new(Api::<Pod>::all(client), Default::default());
//! pods.add_handler(HandlerFns::<Pod>::new().on_add(|pod, _| println!("{}", pod.metadata.name)));
//! pods.start();
//! pods.wait_for_sync(Duration::from_secs(30)).await.unwrap();
//! let web = pods.store().get("default", "web-0");
//! # }
//! ```
//!
//! # Which way to build one
//!
//! * **[`Informer::new`]`(api, options)`**: one informer of your own, for any [`Object`] (a lean
//!   kind, a `k8s-openapi` type, your own kind, [`JsonObject`](crate::JsonObject)), scoped by the [`Api`] (all
//!   namespaces or one) and the options (selectors, page size, ...). This is the way.
//! * **[`InformerFactory`]**: the same informers, shared. Ask it where several parts of a program
//!   want the same resource (a controller's owned kinds, discovery): `factory.informer::<T>(ns)`
//!   hands everyone one informer per kind and namespace; `informer_with` when selectors differ
//!   (one per distinct request); `dynamic(&resource, ns)` for a resource known at run time.
//! * [`Informer::dynamic`]`(client, &resource, ns, options)` is `Informer::new` on an
//!   `Api<JsonObject>` for `resource`, spelled shorter: not another kind of informer.
//!
//! Objects of a resource known only at run time come in two types, each for its use:
//! [`JsonObject`](crate::JsonObject) is what informers cache (each top-level member kept as its compact JSON text,
//! metadata typed: less memory, cheap to compare); [`DynamicObject`](crate::DynamicObject) is a
//! `serde_json::Map` to read and edit field by field, and to write.

mod dynamic;
mod factory;
mod handler;
mod versions;

use crate::model::Metadata;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

pub use factory::{InformerFactory, InformerRequest};
pub use handler::{EventHandler, HandlerFns, HandlerMetrics};
use handler::{Notification, Slot, SlotContext};

use crate::Object;
use crate::client::Api;
use crate::fifo::{Delta, DeltaFifo, FifoConsumer, FifoMetrics, Transform};
use crate::reflector::{ErrorCallback, Health, Reflector, ReflectorOptions};
use crate::store::Store;
use crate::thread_pool::ThreadPool;

/// Identifies a registered handler, for [`Informer::remove_handler`] and
/// [`Informer::handler_has_synced`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HandlerId(u64);

/// A snapshot of an informer's counters.
#[derive(Clone, Debug)]
pub struct InformerMetrics {
    /// The reflector's view: lists, watches, events received, last error.
    pub reflector: Health,
    /// The fifo's view: received, coalesced away, dropped as stale, depth.
    pub fifo: FifoMetrics,
    /// Deltas applied to the store.
    pub applied: u64,
    /// Objects in the store.
    pub objects: usize,
    /// The version the store is known to match (see [`Store::last_applied_resource_version`]).
    pub last_applied_resource_version: String,
    /// How long ago the last watch event arrived.
    pub last_event_age: Option<Duration>,
    /// Per handler, in registration order.
    pub handlers: Vec<(HandlerId, HandlerMetrics)>,
    /// Index-function calls that panicked (caught; see [`Store::index_panics`]).
    pub index_panics: u64,
}

/// Why [`Informer::wait_for_sync`] gave up: the time waited and what the reflector reported.
///
/// ```
/// use std::time::Duration;
/// use informer::informer::NotSynced;
/// use informer::reflector::Phase;
/// let e = NotSynced {
///     waited: Duration::from_secs(10),
///     phase: Phase::BackingOff,
///     consecutive_failures: 3,
///     last_error: Some("apiserver answered 403 Forbidden: pods is forbidden".into()),
/// };
/// assert_eq!(
///     e.to_string(),
///     "not synced after 10s (backing off after 3 failures; the last: apiserver answered 403 \
///      Forbidden: pods is forbidden)"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotSynced {
    /// How long the wait lasted.
    pub waited: Duration,
    /// What the reflector was doing when the wait ended.
    pub phase: crate::reflector::Phase,
    /// Failures since the last successful list or watch event.
    pub consecutive_failures: u32,
    /// The last failure, as the reflector reported it; `None` when nothing failed (the list is
    /// still arriving, or the informer was never started).
    pub last_error: Option<String>,
}

impl NotSynced {
    fn from_health(waited: Duration, health: Health) -> NotSynced {
        NotSynced {
            waited,
            phase: health.phase,
            consecutive_failures: health.consecutive_failures,
            last_error: health.last_error,
        }
    }
}

impl std::fmt::Display for NotSynced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::reflector::Phase;
        write!(f, "not synced after {:?} (", self.waited)?;
        let doing = match self.phase {
            Phase::Listing => "listing",
            Phase::Watching => "watching",
            Phase::BackingOff => "backing off",
            Phase::Stopped => "stopped",
        };
        match (&self.last_error, self.consecutive_failures) {
            (Some(e), n) if n > 0 => {
                let failures = if n == 1 { "failure" } else { "failures" };
                write!(f, "{doing} after {n} {failures}; the last: {e})")
            }
            (Some(e), _) => write!(f, "{doing}; the last failure: {e})"),
            (None, _) if self.phase == Phase::Listing => {
                write!(
                    f,
                    "listing; nothing failed: the list is still arriving, or the informer was not started)"
                )
            }
            (None, _) => write!(f, "{doing}; nothing failed)"),
        }
    }
}

impl std::error::Error for NotSynced {}

struct Shared<T: Object> {
    store: Arc<Store<T>>,
    fifo: DeltaFifo<T>,
    /// Handlers, read-locked by the processor while it applies one pop and notifies, write-locked to
    /// register: a new handler's initial snapshot is therefore exactly the store between two pops.
    handlers: RwLock<Vec<Arc<Slot<T>>>>,
    next_handler: AtomicU64,
    /// Parts that `start` moves out.
    pending_start: Mutex<Option<(Reflector<T>, FifoConsumer<T>)>>,
    health: Arc<Mutex<Health>>,
    /// The options' error callback, also told of handler panics.
    on_error: Option<ErrorCallback>,
    applied: AtomicU64,
    /// Readers waiting for a version ([`Informer::wait_for_version`]), and their wake-up after
    /// each applied pop (see `versions.rs` for the fences that pair the two).
    version_waiters: std::sync::atomic::AtomicUsize,
    pop_applied: tokio::sync::Notify,
    /// Relists asked for by [`Informer::relist`] and fenced controllers.
    relists: Arc<crate::reflector::RelistRequests>,
    /// Bumped when the informer syncs, when a handler finishes its initial list, and when the
    /// reflector records a failure in its health: what the sync waits
    /// ([`Informer::wait_for_sync`], [`Informer::wait_for_handler_sync`], the controllers and
    /// service discovery, which also stops waiting for a list refused with 403) wake on, instead
    /// of polling.
    progress: tokio::sync::watch::Sender<()>,
    /// Set (before `progress` is bumped) once the informer has synced: until then a handler that
    /// runs out of initial notifications leaves the waits to the informer's own bump, which
    /// comes later (see `Slot::signal`).
    synced: Arc<AtomicBool>,
    /// The client's handler pool, which every handler's mailbox runs on.
    pool: Arc<ThreadPool>,
    /// The runtime `start` ran on: resync timers of handlers added later start there, and
    /// handlers run inside it (shared with every handler's slot).
    runtime: Arc<OnceLock<tokio::runtime::Handle>>,
    tasks: Mutex<Tasks>,
    /// Set by `stop` under the handlers' write lock: a handler registered after it is closed at
    /// once, so nothing escapes what `stop` returns.
    stopped: std::sync::atomic::AtomicBool,
    /// The resource, for the metrics' labels and a controller's queue name.
    #[cfg(feature = "metrics")]
    resource: crate::model::ApiResource,
    /// The processing latency series.
    #[cfg(feature = "metrics")]
    recorder: crate::metrics::InformerRecorder,
}

/// The informer's tasks, once started; taken by `stop`.
#[derive(Default)]
struct Tasks {
    reflector: Option<tokio::task::JoinHandle<()>>,
    processor: Option<tokio::task::JoinHandle<()>>,
}

/// A shared informer for objects of type `T`. Cheap to clone; all clones share one cache.
pub struct Informer<T: Object> {
    shared: Arc<Shared<T>>,
}

impl<T: Object> Clone for Informer<T> {
    fn clone(&self) -> Self {
        Informer {
            shared: self.shared.clone(),
        }
    }
}

impl<T: Object + Clone> Informer<T> {
    /// An informer over `api` (a resource in a namespace, or all), with the options' selectors.
    /// Nothing happens until [`start`](Self::start). Over an `Api<JsonObject>` or `Api<DynamicObject>` its objects are
    /// stamped with `apiVersion` and `kind`, as with [`dynamic`](Self::dynamic).
    pub fn new(api: Api<T>, options: ReflectorOptions) -> Informer<T> {
        Self::build(api, options, None)
    }

    /// Like [`new`](Self::new), with a transform applied to every object once, before it is stored
    /// (e.g. drop `managedFields` to save memory).
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use std::sync::Arc;
    /// use informer::{Api, Pod, informer::Informer};
    /// let pods = Informer::with_transform(Api::<Pod>::all(client), Default::default(), Arc::new(|mut p: Pod| {
    ///     p.metadata.managed_fields = None;
    ///     p
    /// }));
    /// # }
    /// ```
    pub fn with_transform(
        api: Api<T>,
        options: ReflectorOptions,
        transform: Transform<T>,
    ) -> Informer<T> {
        Self::build(api, options, Some(transform))
    }

    /// The one way an informer is built ([`new`](Self::new), [`with_transform`](Self::with_transform),
    /// [`dynamic`](Self::dynamic) and the [`InformerFactory`] all come here): the options'
    /// selectors go to the reflector, `transform` is applied to every object before it is stored,
    /// and `JsonObject`s and `DynamicObject`s are stamped with their `apiVersion` and `kind` before `transform`.
    fn build(
        api: Api<T>,
        options: ReflectorOptions,
        transform: Option<Transform<T>>,
    ) -> Informer<T> {
        let store = Arc::new(Store::new());
        let on_error = options.on_error.clone();
        if let Some(cb) = on_error.clone() {
            store.on_index_panic(Arc::new(move |index, key, message| {
                crate::reflector::report(
                    Some(&cb),
                    &crate::Error::Panicked {
                        context: format!("index function {index:?}, on {key}"),
                        message: message.to_owned(),
                    },
                )
            }));
        }
        let pool = api.client().handler_pool().clone();
        #[cfg(feature = "metrics")]
        let resource = api.resource().clone();
        let transform = dynamic::with_stamping(api.resource(), transform);
        let (fifo, consumer) = DeltaFifo::new(store.clone());
        let progress = tokio::sync::watch::Sender::new(());
        let relists = Arc::new(crate::reflector::RelistRequests::default());
        let mut reflector = Reflector::new(api, fifo.clone(), options)
            .with_failure_signal(progress.clone())
            .with_relist_requests(relists.clone());
        if let Some(t) = transform {
            reflector = reflector.with_transform(t);
        }
        let health = reflector.health_handle();
        let informer = Informer {
            shared: Arc::new(Shared {
                store,
                fifo,
                handlers: RwLock::new(Vec::new()),
                next_handler: AtomicU64::new(1),
                pending_start: Mutex::new(Some((reflector, consumer))),
                health,
                on_error,
                applied: AtomicU64::new(0),
                version_waiters: std::sync::atomic::AtomicUsize::new(0),
                pop_applied: tokio::sync::Notify::new(),
                relists,
                progress,
                synced: Arc::new(AtomicBool::new(false)),
                pool,
                runtime: Arc::new(OnceLock::new()),
                tasks: Mutex::new(Tasks::default()),
                stopped: std::sync::atomic::AtomicBool::new(false),
                #[cfg(feature = "metrics")]
                recorder: crate::metrics::InformerRecorder::new(&metrics_labels(&resource)),
                #[cfg(feature = "metrics")]
                resource,
            }),
        };
        #[cfg(feature = "metrics")]
        {
            // Weakly: the informer's series go when it goes.
            let source: Weak<Shared<T>> = Arc::downgrade(&informer.shared);
            crate::metrics::register_informer(source);
        }
        informer
    }

    /// The resource the informer lists and watches.
    #[cfg(feature = "metrics")]
    pub(crate) fn api_resource(&self) -> &crate::model::ApiResource {
        &self.shared.resource
    }

    /// The local cache. Read it as often as you like: it never touches the apiserver.
    pub fn store(&self) -> &Arc<Store<T>> {
        &self.shared.store
    }

    /// Starts listing and watching, on the current tokio runtime. Calling it again does nothing.
    ///
    /// # Panics
    /// Outside a tokio runtime; use [`start_on`](Self::start_on) from sync code.
    pub fn start(&self) {
        self.start_on(&tokio::runtime::Handle::current());
    }

    /// Starts listing and watching on the given runtime: the reflector and the processor are tasks
    /// of it, and the handlers' resync timers too.
    pub fn start_on(&self, runtime: &tokio::runtime::Handle) {
        let Some((reflector, consumer)) = self.shared.pending_start.lock().unwrap().take() else {
            return;
        };
        let _ = self.shared.runtime.set(runtime.clone());
        let weak = Arc::downgrade(&self.shared);
        {
            let mut tasks = self.shared.tasks.lock().unwrap();
            tasks.reflector = Some(runtime.spawn(reflector.run()));
            tasks.processor = Some(runtime.spawn(process(weak, consumer)));
        }
        for slot in self.shared.handlers.read().unwrap().iter() {
            start_resync_timer(&self.shared, runtime, slot);
        }
    }

    /// Stops the reflector, the processor and every handler (each finishes the call in progress,
    /// if any; what waits for it is dropped). The store keeps its content.
    ///
    /// The returned value can be awaited: it completes once no task of the informer is left and
    /// no handler call is in progress. Dropping it changes nothing: the informer stops either way.
    ///
    /// ```no_run
    /// # async fn demo(pods: informer::Informer<informer::Pod>) {
    /// pods.stop().await;
    /// // No handler of `pods` runs from here on.
    /// # }
    /// ```
    pub fn stop(&self) -> Stopped {
        self.shared.shut_down()
    }

    /// True once the first list has been applied to the store and handed to every handler that was
    /// registered before the list ended.
    pub fn has_synced(&self) -> bool {
        self.shared.fifo.has_synced()
    }

    /// Waits until [`has_synced`](Self::has_synced), at most `timeout`. The wait is woken by the
    /// processor the moment it applies the last object of the first list; nothing polls. When
    /// `timeout` passes first, the error says why: what the reflector was doing and the last
    /// failure, with the server's message (a 403 of RBAC, an unknown resource, a timeout).
    ///
    /// ```no_run
    /// # async fn demo(pods: informer::Informer<informer::Pod>) -> Result<(), informer::informer::NotSynced> {
    /// use std::time::Duration;
    /// pods.start();
    /// pods.wait_for_sync(Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn wait_for_sync(&self, timeout: Duration) -> Result<(), NotSynced> {
        match tokio::time::timeout(timeout, self.synced()).await {
            Ok(()) => Ok(()),
            Err(_) => Err(NotSynced::from_health(timeout, self.health())),
        }
    }

    /// Completes once [`has_synced`](Self::has_synced) (never, if the informer never syncs).
    pub(crate) async fn synced(&self) {
        self.until(|| self.has_synced()).await
    }

    /// Waits until [`handler_has_synced`](Self::handler_has_synced), at most `timeout`; returns
    /// whether it did (false at once for an unknown or removed handler... after `timeout`).
    ///
    /// ```no_run
    /// # async fn demo(pods: informer::Informer<informer::Pod>) {
    /// use std::time::Duration;
    /// use informer::HandlerFns;
    /// let id = pods.add_handler(HandlerFns::new().on_add(|pod: &std::sync::Arc<informer::Pod>, _| {
    ///     println!("{}", pod.metadata.name)
    /// }));
    /// pods.start();
    /// assert!(pods.wait_for_handler_sync(id, Duration::from_secs(30)).await);
    /// # }
    /// ```
    pub async fn wait_for_handler_sync(&self, id: HandlerId, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.handler_synced(id))
            .await
            .is_ok()
    }

    /// Completes once [`handler_has_synced`](Self::handler_has_synced).
    pub(crate) async fn handler_synced(&self, id: HandlerId) {
        self.until(|| self.handler_has_synced(id)).await
    }

    /// Completes once `condition` holds; it is looked at again each time `progress` is bumped
    /// (a sync, a handler's initial list handed over, a failure recorded in the health).
    pub(crate) async fn until(&self, condition: impl Fn() -> bool) {
        // Subscribed before the first look: a bump after it is seen by `changed`.
        let mut progress = self.shared.progress.subscribe();
        while !condition() {
            // The sender lives in `shared`, which `self` keeps alive: `changed` cannot fail.
            let _ = progress.changed().await;
        }
    }

    /// Registers a handler. Registered after start, it first receives `on_add(obj, true)` for every
    /// stored object, with nothing else interleaved, then live notifications.
    pub fn add_handler(&self, handler: impl EventHandler<T>) -> HandlerId {
        self.register(Box::new(handler), None)
    }

    /// Registers a handler that also receives `on_update(obj, obj)` for every stored object every
    /// `period` (client-go's resync), except for objects with a notification already waiting. A
    /// period of zero means never.
    pub fn add_handler_with_resync(
        &self,
        handler: impl EventHandler<T>,
        period: Duration,
    ) -> HandlerId {
        self.register(Box::new(handler), Some(period))
    }

    fn register(&self, handler: Box<dyn EventHandler<T>>, resync: Option<Duration>) -> HandlerId {
        // Relaxed: only a unique id is needed; fetch_add gives one whatever the ordering.
        let id = self.shared.next_handler.fetch_add(1, Ordering::Relaxed);
        let slot = Slot::new(
            id,
            handler,
            resync.and_then(resync_period),
            SlotContext {
                pool: self.shared.pool.clone(),
                on_error: self.shared.on_error.clone(),
                progress: self.shared.progress.clone(),
                informer_synced: self.shared.synced.clone(),
                runtime: self.shared.runtime.clone(),
            },
        );
        {
            let mut handlers = self.shared.handlers.write().unwrap();
            // Relaxed: see `stop`.
            if self.shared.stopped.load(Ordering::Relaxed) {
                slot.close();
                return HandlerId(id);
            }
            // The processor is between two pops: the store is a consistent snapshot.
            slot.with_queue(|q| {
                for obj in self.shared.store.list() {
                    let key = obj.meta().key();
                    q.push(&key, Notification::Add { obj, initial: true });
                }
            });
            handlers.push(slot.clone());
        }
        if let Some(runtime) = self.shared.runtime.get() {
            start_resync_timer(&self.shared, runtime, &slot);
        }
        HandlerId(id)
    }

    /// Unregisters a handler: nothing is delivered to it after the call in progress, if any.
    pub fn remove_handler(&self, id: HandlerId) -> bool {
        let mut handlers = self.shared.handlers.write().unwrap();
        let Some(i) = handlers.iter().position(|s| s.id == id.0) else {
            return false;
        };
        handlers.remove(i).close();
        true
    }

    /// True once the handler has returned from every `on_add` of its initial list.
    pub fn handler_has_synced(&self, id: HandlerId) -> bool {
        let synced = self.has_synced();
        self.shared
            .handlers
            .read()
            .unwrap()
            .iter()
            .find(|s| s.id == id.0)
            .is_some_and(|s| s.has_synced(synced))
    }

    /// The reflector's health (phase, last error, counters).
    pub fn health(&self) -> Health {
        self.shared.health.lock().unwrap().clone()
    }

    /// A snapshot of every counter.
    pub fn metrics(&self) -> InformerMetrics {
        let reflector = self.health();
        let last_event_age = reflector.last_event.map(|t| t.elapsed());
        InformerMetrics {
            reflector,
            fifo: self.shared.fifo.metrics(),
            // Relaxed: a counter read for display; it publishes no other memory.
            applied: self.shared.applied.load(Ordering::Relaxed),
            objects: self.shared.store.len(),
            last_applied_resource_version: self.shared.store.last_applied_resource_version(),
            last_event_age,
            index_panics: self.shared.store.index_panics(),
            handlers: self
                .shared
                .handlers
                .read()
                .unwrap()
                .iter()
                .map(|s| (HandlerId(s.id), s.metrics()))
                .collect(),
        }
    }
}

/// The processor task: pop, apply to the store, notify handlers; until the fifo closes or the
/// informer is dropped.
async fn process<T: Object>(shared: Weak<Shared<T>>, mut consumer: FifoConsumer<T>) {
    let mut synced = false;
    // The notifications of one pop, queued to each handler at once (reused across pops).
    let mut notifications: Vec<(String, Notification<T>)> = Vec::new();
    // Submits the handlers' jobs for what they were given and have not been scheduled for.
    let flush = |shared: &Weak<Shared<T>>| {
        if let Some(shared) = shared.upgrade() {
            for h in shared.handlers.read().unwrap().iter() {
                h.flush();
            }
        }
    };
    loop {
        if !consumer.ready_now() {
            // The next pop would wait: the handlers get what they were given now.
            flush(&shared);
        }
        let Some(popped) = consumer.pop().await else {
            flush(&shared);
            return;
        };
        let Some(shared) = shared.upgrade() else {
            return;
        };
        #[cfg(feature = "metrics")]
        let started = std::time::Instant::now();
        let initial = popped.in_initial_list();
        {
            let handlers = shared.handlers.read().unwrap();
            let notify = !handlers.is_empty();
            if popped.is_relist() {
                // The store goes from before the relist to after it in one step, then handlers
                // hear of each change (client-go's atomic Replace).
                let olds = shared.store.apply_all(popped.deltas());
                for (delta, old) in popped.deltas().iter().zip(olds) {
                    notifications.extend(notify.then(|| notification(delta, old, initial)));
                }
            } else {
                for delta in popped.deltas() {
                    let old = shared.store.apply(delta);
                    notifications.extend(notify.then(|| notification(delta, old, initial)));
                }
            }
            // Relaxed: a counter for metrics only.
            shared
                .applied
                .fetch_add(popped.deltas().len() as u64, Ordering::Relaxed);
            // Submitted to the pool at the next iteration's flush, or once enough wait
            // (`Slot::notify`). Every handler but the last gets copies; the last, the originals.
            if let Some((last, others)) = handlers.split_last() {
                for h in others {
                    h.notify(notifications.iter().map(|(k, n)| (k.as_str(), n.clone())));
                }
                last.notify(notifications.drain(..));
            }
        }
        if popped.is_relist() {
            // A relist's notifications are one per changed object: give the memory back.
            notifications.shrink_to(64);
        }
        if let Some(rv) = popped.caught_up_resource_version() {
            shared.store.set_last_applied_resource_version(rv);
        }
        // SeqCst: pairs with the fence of a version waiter (versions.rs): either this load sees
        // it, or it sees what was just applied. Relaxed load: the fence orders it.
        std::sync::atomic::fence(Ordering::SeqCst);
        if shared.version_waiters.load(Ordering::Relaxed) > 0 {
            shared.pop_applied.notify_waiters();
        }
        // Dropping `popped` marks its deltas processed (has_synced counts them).
        drop(popped);
        #[cfg(feature = "metrics")]
        shared.recorder.processed(started.elapsed());
        // The fifo turns synced either when the last initial pop is dropped (just above) or while
        // draining the end of the first list, which the reflector always follows with a bookmark
        // that comes out as a pop: either way this is the first look after the change.
        if !synced && shared.fifo.has_synced() {
            synced = true;
            // Release: a handler that reads it set (Acquire) and then bumps `progress` wakes a
            // waiter that will see the informer synced.
            shared.synced.store(true, Ordering::Release);
            shared.progress.send_replace(());
        }
        drop(shared);
        // A pop that finds its deltas waiting completes without yielding: count it against the
        // task's budget so that a busy fifo still lets the runtime run the reflector and others.
        tokio::task::consume_budget().await;
    }
}

/// The notification handlers get for `delta`, which replaced `old` in the store, with its key.
fn notification<T: Object>(
    delta: &Delta<T>,
    old: Option<Arc<T>>,
    initial: bool,
) -> (String, Notification<T>) {
    match delta {
        Delta::Added(obj) | Delta::Modified(obj) => {
            let notification = match old {
                Some(old) => Notification::Update {
                    old,
                    new: obj.clone(),
                },
                None => Notification::Add {
                    obj: obj.clone(),
                    initial,
                },
            };
            (obj.meta().key(), notification)
        }
        Delta::Deleted(d) => (d.key(), Notification::Delete(d.clone())),
    }
}

/// The shortest resync period: a shorter non-zero one is raised to it (client-go's
/// `minimumResyncPeriod`, S6), so a resync never runs back to back. Zero means never.
const MIN_RESYNC_PERIOD: Duration = Duration::from_secs(1);

/// The period a handler resyncs with: `None` for never (zero), at least [`MIN_RESYNC_PERIOD`].
fn resync_period(period: Duration) -> Option<Duration> {
    if period.is_zero() {
        return None;
    }
    if period < MIN_RESYNC_PERIOD {
        tracing::warn!(
            ?period,
            "a resync period under 1 s is raised to 1 s (client-go's minimum)"
        );
    }
    Some(period.max(MIN_RESYNC_PERIOD))
}

/// Starts `slot`'s resync timer on `runtime`, if it has a period.
fn start_resync_timer<T: Object>(
    shared: &Arc<Shared<T>>,
    runtime: &tokio::runtime::Handle,
    slot: &Arc<Slot<T>>,
) {
    let Some(period) = slot.resync_period else {
        return;
    };
    let (shared, weak_slot) = (Arc::downgrade(shared), Arc::downgrade(slot));
    slot.set_resync_timer(runtime.spawn(async move {
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        // A tick missed while the runtime was busy is not made up: one resync, then every period.
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let (Some(shared), Some(slot)) = (shared.upgrade(), weak_slot.upgrade()) else {
                return;
            };
            // O(store) under the handlers' write lock: off the runtime's workers.
            let _ = tokio::task::spawn_blocking(move || resync_into(&shared, &slot)).await;
        }
    }));
}

/// Queues `on_update(obj, obj)` for every stored object without a waiting notification, with the
/// processor paused (so no change interleaves).
fn resync_into<T: Object>(shared: &Shared<T>, slot: &Arc<Slot<T>>) {
    let _paused = shared.handlers.write().unwrap();
    slot.with_queue(|q| {
        for obj in shared.store.list() {
            let key = obj.meta().key();
            if !q.contains(&key) {
                q.push(
                    &key,
                    Notification::Update {
                        old: obj.clone(),
                        new: obj,
                    },
                );
            }
        }
    });
}

/// What [`Informer::stop`] returns: awaiting it waits until the informer's tasks are gone and no
/// handler call is in progress.
pub struct Stopped(Pin<Box<dyn Future<Output = ()> + Send>>);

impl std::fmt::Debug for Stopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stopped")
    }
}

impl IntoFuture for Stopped {
    type Output = ();
    type IntoFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        self.0
    }
}

impl<T: Object> Shared<T> {
    /// Aborts the tasks, closes the fifo and every handler (and keeps handlers registered from now
    /// on closed); the returned value waits for the tasks and the handler calls in progress.
    fn shut_down(&self) -> Stopped {
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap());
        let tasks: Vec<_> = [tasks.reflector, tasks.processor]
            .into_iter()
            .flatten()
            .collect();
        for task in &tasks {
            task.abort();
        }
        self.fifo.close();
        let slots = {
            // The write lock, though nothing in the list changes: it excludes `register`, which
            // reads `stopped` under it, so no handler is added between the flag and the closes.
            #[allow(clippy::readonly_write_lock)]
            let handlers = self.handlers.write().unwrap();
            // Relaxed: read and written under the handlers' lock, which orders it.
            self.stopped.store(true, Ordering::Relaxed);
            for slot in handlers.iter() {
                slot.close();
            }
            handlers.clone()
        };
        Stopped(Box::pin(async move {
            for task in tasks {
                // Aborted above: a cancelled (or, if it panicked, failed) join is its end.
                let _ = task.await;
            }
            for slot in slots {
                slot.idle().await;
            }
        }))
    }
}

/// An informer's metrics labels: name (the resource's plural), group, version, resource.
#[cfg(feature = "metrics")]
fn metrics_labels(resource: &crate::model::ApiResource) -> crate::metrics::InformerLabels {
    [
        resource.plural.to_string(),
        resource.group.to_string(),
        resource.version.to_string(),
        resource.plural.to_string(),
    ]
}

#[cfg(feature = "metrics")]
impl<T: Object> crate::metrics::InformerSource for Shared<T> {
    fn figures(&self) -> crate::metrics::InformerFigures {
        let (events, lists, watches) = {
            let health = self.health.lock().unwrap_or_else(|p| p.into_inner());
            (health.events, health.lists, health.watches)
        };
        crate::metrics::InformerFigures {
            labels: metrics_labels(&self.resource),
            queued_items: self.fifo.metrics().depth,
            resource_version: self.store.last_applied_resource_version(),
            events,
            lists,
            watches,
        }
    }
}

impl<T: Object> Drop for Shared<T> {
    fn drop(&mut self) {
        // Nobody can await it: the tasks and handlers stop on their own.
        drop(self.shut_down());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resync_period_under_a_second_is_raised_to_one_and_zero_means_never() {
        assert_eq!(resync_period(Duration::ZERO), None);
        assert_eq!(
            resync_period(Duration::from_millis(1)),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            resync_period(Duration::from_secs(30)),
            Some(Duration::from_secs(30))
        );
    }
}
