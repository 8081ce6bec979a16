//! Shared informers: one reflector per resource (and namespace and selectors), one store, any number
//! of handlers.
//!
//! ```text
//! Reflector --Delta--> DeltaFifo --> processor thread --> Store (+indexes)
//!  (tokio task)                             \--> per-handler queues --> handler threads
//! ```
//!
//! The processor pops coalesced deltas, applies them to the [`Store`] and queues a notification for
//! every handler; it never waits for a handler. Readers read the store directly, in nanoseconds,
//! never the apiserver.
//!
//! ```no_run
//! # async fn demo(client: informer::Client) {
//! use std::time::Duration;
//! use informer::{Api, Pod, informer::{HandlerFns, Informer}};
//! let pods = Informer::new(Api::<Pod>::all(client), Default::default());
//! pods.add_handler(HandlerFns::<Pod>::new().on_add(|pod, _| println!("{}", pod.metadata.name)));
//! pods.start();
//! assert!(pods.wait_for_sync(Duration::from_secs(30)).await);
//! let web = pods.store().get("default", "web-0");
//! # }
//! ```

mod dynamic;
mod factory;
mod handler;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

pub use factory::InformerFactory;
pub use handler::{EventHandler, HandlerFns, HandlerMetrics};
use handler::{Notification, ResyncFn, Slot};

use crate::Object;
use crate::client::Api;
use crate::fifo::{Delta, DeltaFifo, FifoConsumer, FifoMetrics};
use crate::reflector::{ErrorCallback, Health, Reflector, ReflectorOptions, Transform};
use crate::store::Store;

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
    /// Bumped when the informer syncs and when a handler finishes its initial list: what the
    /// sync waits ([`Informer::wait_for_sync`], [`Informer::wait_for_handler_sync`], the
    /// controllers and service discovery) wake on, instead of polling.
    progress: tokio::sync::watch::Sender<()>,
    reflector_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
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
    /// An informer over `api` (a resource in a namespace, or all). Nothing happens until
    /// [`start`](Self::start).
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

    fn build(
        api: Api<T>,
        options: ReflectorOptions,
        transform: Option<Transform<T>>,
    ) -> Informer<T> {
        let store = Arc::new(Store::new());
        let on_error = options.on_error.clone();
        if let Some(cb) = on_error.clone() {
            store.on_index_panic(Arc::new(move |index, key, message| {
                cb(&crate::Error::Panicked {
                    context: format!("index function {index:?}, on {key}"),
                    message: message.to_owned(),
                })
            }));
        }
        let (fifo, consumer) = DeltaFifo::new(store.clone());
        let mut reflector = Reflector::new(api, fifo.clone(), options);
        if let Some(t) = transform {
            reflector = reflector.with_transform(t);
        }
        let health = reflector.health_handle();
        Informer {
            shared: Arc::new(Shared {
                store,
                fifo,
                handlers: RwLock::new(Vec::new()),
                next_handler: AtomicU64::new(1),
                pending_start: Mutex::new(Some((reflector, consumer))),
                health,
                on_error,
                applied: AtomicU64::new(0),
                progress: tokio::sync::watch::Sender::new(()),
                reflector_task: Mutex::new(None),
            }),
        }
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

    /// Starts listing and watching on the given runtime.
    pub fn start_on(&self, runtime: &tokio::runtime::Handle) {
        let Some((reflector, consumer)) = self.shared.pending_start.lock().unwrap().take() else {
            return;
        };
        *self.shared.reflector_task.lock().unwrap() = Some(runtime.spawn(reflector.run()));
        let weak = Arc::downgrade(&self.shared);
        std::thread::Builder::new()
            .name("informer-processor".into())
            .spawn(move || process(weak, consumer))
            .expect("spawn the informer's processor thread");
    }

    /// Stops the reflector, the processor and every handler thread. The store keeps its content.
    pub fn stop(&self) {
        if let Some(task) = self.shared.reflector_task.lock().unwrap().take() {
            task.abort();
        }
        self.shared.fifo.close();
        for slot in self.shared.handlers.read().unwrap().iter() {
            slot.close();
        }
    }

    /// True once the first list has been applied to the store and handed to every handler that was
    /// registered before the list ended.
    pub fn has_synced(&self) -> bool {
        self.shared.fifo.has_synced()
    }

    /// Waits until [`has_synced`](Self::has_synced), at most `timeout`; returns whether it synced.
    /// The wait is woken by the processor the moment it applies the last object of the first
    /// list; nothing polls.
    ///
    /// ```no_run
    /// # async fn demo(pods: informer::Informer<informer::Pod>) {
    /// use std::time::Duration;
    /// pods.start();
    /// if !pods.wait_for_sync(Duration::from_secs(30)).await {
    ///     eprintln!("not synced after 30 s: {:?}", pods.health().last_error);
    /// }
    /// # }
    /// ```
    pub async fn wait_for_sync(&self, timeout: Duration) -> bool {
        tokio::time::timeout(timeout, self.synced()).await.is_ok()
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

    /// Completes once `condition` holds; it is looked at again each time `progress` is bumped.
    async fn until(&self, condition: impl Fn() -> bool) {
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
            self.shared.on_error.clone(),
            self.shared.progress.clone(),
        );
        {
            let mut handlers = self.shared.handlers.write().unwrap();
            // The processor is between two pops: the store is a consistent snapshot.
            slot.with_queue(|q| {
                for obj in self.shared.store.list() {
                    let key = obj.meta().key();
                    q.push(&key, Notification::Add { obj, initial: true });
                }
            });
            handlers.push(slot.clone());
        }
        let resync = resync.map(|period| {
            let weak = Arc::downgrade(&self.shared);
            let f: ResyncFn<T> = Box::new(move |slot: &Slot<T>| resync_into(&weak, slot));
            (period, f)
        });
        std::thread::Builder::new()
            .name(format!("informer-handler-{id}"))
            .spawn(move || slot.run(resync))
            .expect("spawn an informer handler thread");
        HandlerId(id)
    }

    /// Unregisters a handler; its thread ends after the call in progress, if any.
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

/// The processor thread: pop, apply to the store, notify handlers; until the fifo closes or the
/// informer is dropped.
fn process<T: Object>(shared: Weak<Shared<T>>, mut consumer: FifoConsumer<T>) {
    let mut synced = false;
    while let Some(popped) = consumer.pop() {
        let Some(shared) = shared.upgrade() else {
            return;
        };
        let initial = popped.in_initial_list();
        {
            let handlers = shared.handlers.read().unwrap();
            for delta in popped.deltas() {
                apply(&shared.store, &handlers, delta, initial);
                // Relaxed: a counter for metrics only.
                shared.applied.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Some(rv) = popped.caught_up_resource_version() {
            shared.store.set_last_applied_resource_version(rv);
        }
        // Dropping `popped` marks its deltas processed (has_synced counts them).
        drop(popped);
        // The fifo turns synced either when the last initial pop is dropped (just above) or while
        // draining the end of the first list, which the reflector always follows with a bookmark
        // that comes out as a pop: either way this is the first look after the change.
        if !synced && shared.fifo.has_synced() {
            synced = true;
            shared.progress.send_replace(());
        }
    }
}

/// Applies one delta to the store and queues the matching notification for every handler.
fn apply<T: Object>(store: &Store<T>, handlers: &[Arc<Slot<T>>], delta: &Delta<T>, initial: bool) {
    match delta {
        Delta::Added(obj) | Delta::Modified(obj) => {
            let key = obj.meta().key();
            let old = store.insert(obj.clone());
            for h in handlers {
                let n = match &old {
                    Some(old) => Notification::Update {
                        old: old.clone(),
                        new: obj.clone(),
                    },
                    None => Notification::Add {
                        obj: obj.clone(),
                        initial,
                    },
                };
                h.notify(&key, n);
            }
        }
        Delta::Deleted(d) => {
            let key = d.key();
            store.remove(&key);
            for h in handlers {
                h.notify(&key, Notification::Delete(d.clone()));
            }
        }
    }
}

/// Queues `on_update(obj, obj)` for every stored object without a waiting notification, with the
/// processor paused (so no change interleaves).
fn resync_into<T: Object>(shared: &Weak<Shared<T>>, slot: &Slot<T>) {
    let Some(shared) = shared.upgrade() else {
        return;
    };
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

impl<T: Object> Drop for Shared<T> {
    fn drop(&mut self) {
        if let Some(task) = self.reflector_task.lock().unwrap().take() {
            task.abort();
        }
        self.fifo.close();
        for slot in self.handlers.read().unwrap().iter() {
            slot.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::{Pin, pin};
    use std::task::{Context, Poll, Wake, Waker};
    use std::time::Instant;

    use super::*;
    // The simulator (a dev-dependency) links the library's normal build, not this test build: only
    // its URL and JSON cross over, never a type of this crate.
    use crate::{Client, Config, ConfigMap};
    use informer_sim::Simulator;

    /// What woke a future: the waking thread's name and when.
    type WakeLog = Arc<Mutex<Vec<(Option<String>, Instant)>>>;

    /// Forwards wake-ups to the task's waker, logging each.
    struct LoggingWaker {
        task: Waker,
        log: WakeLog,
    }

    impl Wake for LoggingWaker {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref()
        }
        fn wake_by_ref(self: &Arc<Self>) {
            let thread = std::thread::current().name().map(str::to_owned);
            self.log.lock().unwrap().push((thread, Instant::now()));
            self.task.wake_by_ref();
        }
    }

    /// Polls `inner` with a logging waker and counts the polls.
    struct Observed<F> {
        inner: Pin<Box<F>>,
        log: WakeLog,
        polls: usize,
    }

    impl<F: Future> Future for Observed<F> {
        type Output = (F::Output, Instant);
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            self.polls += 1;
            let waker = Waker::from(Arc::new(LoggingWaker {
                task: cx.waker().clone(),
                log: self.log.clone(),
            }));
            let mut cx = Context::from_waker(&waker);
            self.inner
                .as_mut()
                .poll(&mut cx)
                .map(|out| (out, Instant::now()))
        }
    }

    /// `wait_for_sync` is woken once, by the processor thread as it finishes the first list,
    /// and returns on the very next poll: no timer (a sleep-and-look loop, or the timeout) woke it.
    /// On a current-thread runtime the reflector cannot run before the first poll, so the wait
    /// starts before the sync.
    #[tokio::test]
    async fn wait_for_sync_is_woken_by_the_processor_when_it_syncs() {
        let sim = Simulator::start().await.unwrap();
        for i in 0..100 {
            let cm = serde_json::json!({"metadata": {"name": format!("c{i}"), "namespace": "a"}});
            sim.create("configmaps", Some("a"), cm).unwrap();
        }
        let client = Client::new(Config::new(sim.url().parse().unwrap())).unwrap();
        let inf: Informer<ConfigMap> = Informer::new(Api::all(client), Default::default());
        inf.start();
        let log = WakeLog::default();
        let wait = Observed {
            inner: Box::pin(inf.wait_for_sync(Duration::from_secs(3600))),
            log: log.clone(),
            polls: 0,
        };
        let mut wait = pin!(wait);
        let (synced, returned_at) = (&mut wait).await;
        assert!(synced);
        assert_eq!(inf.store().len(), 100);
        let log = log.lock().unwrap();
        let wakers: Vec<_> = log.iter().map(|(thread, _)| thread.as_deref()).collect();
        assert_eq!(wakers, [Some("informer-processor")]);
        assert_eq!(
            wait.polls, 2,
            "one poll before the sync, one after its wake-up"
        );
        // Reported, not asserted (a loaded machine may delay the test thread): the delay from the
        // processor's wake-up to the waiter's return.
        eprintln!("woken -> returned: {:?}", returned_at - log[0].1);
        inf.stop();
    }
}
