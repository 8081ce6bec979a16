//! [`Controller`]: kube-rs's `Controller` on this crate's parts: informers' events become
//! [`ObjectRef`]s in a [`WorkQueue`], and N workers run an async
//! `reconcile(Arc<K>, Arc<Ctx>) -> Result<Action, E>` on the object as the primary informer's
//! store holds it, with an error policy for the failures.
//!
//! ```text
//! Informer<K> --handler: own ref--------------\
//! Informer<U> --handler: controlling owner-----+--> WorkQueue<ObjectRef> --> N workers:
//! Informer<V> --handler: mapper(&V)-----------/       store.get(ref) -> Arc<K>
//!                                                     reconcile(Arc<K>, Arc<Ctx>) in a span
//!                                                       Ok(action) -> as WorkerPool
//!                                                       Err(e)     -> warn, error_policy(obj, &e, ctx)
//!                                                       panic      -> error, retry with backoff
//! ```
//!
//! # Invariants
//!
//! * **One reconcile per object at a time.** The queue never hands one [`ObjectRef`] to two
//!   workers; events arriving meanwhile are folded into one more reconcile after it.
//! * **The latest state.** The object is read from the primary informer's [`Store`] when its
//!   reconcile starts (not when the event came), as an `Arc<K>` that can be held across
//!   `.await`s.
//! * **No reconcile of what is gone.** A ref whose object is no longer in the store is not
//!   reconciled (counted as [`absent`](RunSummary::absent), logged at debug). Work a deletion
//!   needs is done through a finalizer, as in kube-rs: an object with
//!   `metadata.deletion_timestamp` set is still in the store and is reconciled like any other.
//! * **Errors are never silent.** Each `Err` is logged (`tracing` warn, in the reconcile's span)
//!   and goes to the error policy: by default ([`Backoff`]) the ref is retried with the queue's
//!   per-key exponential backoff; a policy set with [`error_policy`](Controller::error_policy)
//!   answers with an [`Action`].
//! * **A panic costs one ref a retry.** A panicking reconcile or error policy is caught, logged
//!   (`tracing` error, with the panic message), counted as [`panicked`](RunSummary::panicked) and
//!   its ref retried with backoff; the other refs, workers and the queue go on.
//! * **Workers start after the sync** of every informer and its handler's initial list
//!   (client-go's `WaitForCacheSync`), so a reconcile never sees a half-filled store.
//!
//! # One way per task
//!
//! Objects are reconciled through `Controller` only: it replaced the string-key
//! `InformerController` (`reconcile(key, store)`), whose reconciles had to look the object up
//! themselves, could not hold the store's `Ref` across an `.await`, and whose errors vanished.
//! Keys that are not Kubernetes objects go through the lower layer, [`WorkerPool`].
//!
//! # Tracing
//!
//! Every reconcile runs in an `info` span named `reconcile` with the fields `kind`,
//! `namespace`, `name` and `resource_version` of the object it reconciles; its outcome is an
//! event at debug, errors at warn, panics at error. Fields are formatted only if a subscriber
//! wants them: without one, a reconcile pays one relaxed atomic load per macro.

use crate::model::Metadata;
use std::fmt;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::future::{Either, select};
use tracing::Instrument as _;

use crate::fifo::DeletedObject;
use crate::informer::{EventHandler, Informer};
use crate::model::ApiResource;
use crate::store::{Ref, Store};
use crate::{Object, Resource};

use super::worker_pool::{CatchUnwind, Outcome};
use super::{Action, FenceToken, RunSummary, WorkQueue, WorkerPool};

/// A reference to one object: its namespace (empty for cluster-scoped kinds) and name. The key
/// a [`Controller`]'s queue holds, and what a [`watches`](Controller::watches) mapper returns.
///
/// Displays as the cache key, `namespace/name` (or `name`).
///
/// ```
/// use informer::workqueue::ObjectRef;
///
/// let web = ObjectRef::new("web").within("default");
/// assert_eq!(web.to_string(), "default/web");
/// assert_eq!(ObjectRef::from("default/web"), web); // from a cache key
/// assert_eq!(ObjectRef::new("node-1").to_string(), "node-1"); // cluster-scoped
/// ```
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ObjectRef {
    /// The object's namespace; empty for a cluster-scoped object.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

impl ObjectRef {
    /// A reference to the cluster-scoped object `name` (add a namespace with
    /// [`within`](Self::within)).
    ///
    /// ```
    /// # use informer::workqueue::ObjectRef;
    /// assert_eq!(ObjectRef::new("node-1").namespace, "");
    /// ```
    pub fn new(name: impl Into<String>) -> Self {
        ObjectRef {
            namespace: String::new(),
            name: name.into(),
        }
    }

    /// The same name in `namespace`.
    ///
    /// ```
    /// # use informer::workqueue::ObjectRef;
    /// assert_eq!(ObjectRef::new("web").within("default").namespace, "default");
    /// ```
    pub fn within(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// The reference to `object`.
    ///
    /// ```
    /// # use informer::{ConfigMap, workqueue::ObjectRef};
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.namespace = "default".into();
    /// cm.metadata.name = "app".into();
    /// assert_eq!(ObjectRef::from_obj(&cm), ObjectRef::new("app").within("default"));
    /// ```
    pub fn from_obj<U: Object>(object: &U) -> Self {
        let meta = object.meta();
        ObjectRef {
            namespace: meta.namespace().to_owned(),
            name: meta.name().to_owned(),
        }
    }
}

/// From a cache key: `namespace/name`, or `name` for a cluster-scoped object.
impl From<&str> for ObjectRef {
    fn from(key: &str) -> Self {
        match key.split_once('/') {
            Some((namespace, name)) => ObjectRef::new(name).within(namespace),
            None => ObjectRef::new(key),
        }
    }
}

/// From a cache key: `namespace/name`, or `name` for a cluster-scoped object.
impl From<String> for ObjectRef {
    fn from(key: String) -> Self {
        ObjectRef::from(key.as_str())
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// As its [`Display`](fmt::Display), `namespace/name`: the form log lines and test failures
/// are read in.
impl fmt::Debug for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// What a [`Controller`] does after a reconcile of an object of kind `K` failed with `E`.
///
/// Implemented by [`Backoff`] (the default: the queue's per-key exponential backoff) and by any
/// `Fn(Arc<K>, &E, Arc<Ctx>) -> Action`, kube-rs's `error_policy` shape; set one with
/// [`Controller::error_policy`]. You rarely implement it yourself.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use informer::ConfigMap;
/// use informer::workqueue::{Action, Backoff, ErrorPolicy};
///
/// let policy = |_cm: Arc<ConfigMap>, _error: &std::io::Error, _ctx: Arc<()>| {
///     Action::RequeueAfter(Duration::from_secs(5))
/// };
/// let error = std::io::Error::other("apiserver unavailable");
/// let cm = Arc::new(ConfigMap::default());
/// assert_eq!(
///     policy.on_error(cm.clone(), &error, Arc::new(())),
///     Some(Action::RequeueAfter(Duration::from_secs(5)))
/// );
/// assert_eq!(ErrorPolicy::<ConfigMap, std::io::Error, ()>::on_error(&Backoff, cm, &error, Arc::new(())), None);
/// ```
pub trait ErrorPolicy<K, E, Ctx>: Send + Sync + 'static {
    /// What to do with the failed object's ref: `Some(action)` as for a successful reconcile
    /// (`Done`: nothing until its next event; `RequeueAfter(d)`: again after `d`), `None`: again
    /// after the queue's rate limiter's delay ([`WorkQueue::add_rate_limited`]).
    fn on_error(&self, object: Arc<K>, error: &E, ctx: Arc<Ctx>) -> Option<Action>;
}

impl<K, E, Ctx, F> ErrorPolicy<K, E, Ctx> for F
where
    F: Fn(Arc<K>, &E, Arc<Ctx>) -> Action + Send + Sync + 'static,
{
    fn on_error(&self, object: Arc<K>, error: &E, ctx: Arc<Ctx>) -> Option<Action> {
        Some(self(object, error, ctx))
    }
}

/// The default [`ErrorPolicy`]: a failed object's ref is retried after the queue's rate
/// limiter's delay, per-key exponential backoff with [`WorkQueue::new`]'s
/// [`DefaultControllerRateLimiter`](super::DefaultControllerRateLimiter) (5 ms doubling to
/// 1000 s, reset by the ref's next success).
///
/// ```
/// use informer::workqueue::Backoff;
/// let _default = Backoff;
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Backoff;

impl<K, E, Ctx> ErrorPolicy<K, E, Ctx> for Backoff {
    fn on_error(&self, _object: Arc<K>, _error: &E, _ctx: Arc<Ctx>) -> Option<Action> {
        None
    }
}

/// Registers one handler on one informer when `run` starts.
type Source = Box<dyn FnOnce(&WorkQueue<ObjectRef>) -> Registered + Send>;

/// A handler registered by `run`: a future that completes once it has synced, how to remove
/// it, and how to bring its informer's store up to a list that started at a given moment or
/// later (a fenced run's catch-up when its fence opens).
struct Registered {
    synced: Pin<Box<dyn Future<Output = ()> + Send>>,
    remove: Box<dyn FnOnce() + Send + Sync>,
    listed_since: CatchUp,
}

/// See [`Registered::listed_since`].
type CatchUp = Arc<dyn Fn(Instant) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A controller for objects of kind `K`: reconciles each object, as the primary informer's
/// store holds it, whenever it or an object related to it changes. See the
/// [`workqueue`](crate::workqueue) documentation for its invariants.
///
/// Build it with [`new`](Self::new) (the primary informer: each `K` event enqueues the
/// object's own ref), add [`owns`](Self::owns) (objects whose controlling owner is a `K`),
/// [`watches`](Self::watches) (any other mapper) and optionally an
/// [`error_policy`](Self::error_policy), start the informers, then [`run`](Self::run).
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use informer_sim::Simulator;
/// use informer::workqueue::{Action, Controller};
/// use informer::{Client, Config, ConfigMap, InformerFactory};
///
/// struct Context { greeting: String }
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let sim = Simulator::start().await?;
/// sim.create("configmaps", Some("default"), serde_json::json!({"metadata": {"name": "app"}}))?;
///
/// let factory = InformerFactory::new(Client::new(Config::new(sim.url().parse()?))?);
/// let controller = Controller::new(&factory.informer::<ConfigMap>(None), 2);
/// factory.start();
///
/// let summary = controller
///     .run(
///         |cm: Arc<ConfigMap>, ctx: Arc<Context>| async move {
///             println!("{}, {} at version {}", ctx.greeting, cm.metadata.name,
///                      cm.metadata.resource_version);
///             Ok::<_, informer::Error>(Action::Done)
///         },
///         Arc::new(Context { greeting: "hello".into() }),
///         tokio::time::sleep(Duration::from_millis(500)),
///     )
///     .await;
/// assert_eq!(summary.done, 1);
/// # Ok(()) }
/// ```
pub struct Controller<K: Object, P = Backoff> {
    store: Arc<Store<K>>,
    pool: WorkerPool<ObjectRef>,
    sources: Vec<Source>,
    policy: P,
}

impl<K: Object + Clone> Controller<K> {
    /// A controller of `primary`'s objects with `workers` workers (at least one), a queue
    /// with client-go's default rate limiter and the default error policy ([`Backoff`]). Every
    /// add, update and delete of a `K` enqueues its ref; reconcile gets the object from
    /// `primary`'s store.
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use informer::{Informer, Service, Api, workqueue::Controller};
    /// let services = Informer::new(Api::<Service>::all(client), Default::default());
    /// let controller = Controller::new(&services, 4);
    /// # }
    /// ```
    pub fn new(primary: &Informer<K>, workers: usize) -> Self {
        Self::with_queue(primary, WorkQueue::new(), workers)
    }

    /// Like [`new`](Self::new), with your own queue (another rate limiter, which is also the
    /// default error policy's backoff; timing metrics off; or a queue other producers feed).
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use std::time::Duration;
    /// use informer::{Api, Informer, Service};
    /// use informer::workqueue::{Controller, ItemExponentialRateLimiter, WorkQueue};
    /// let services = Informer::new(Api::<Service>::all(client), Default::default());
    /// let queue = WorkQueue::with_rate_limiter(ItemExponentialRateLimiter::new(
    ///     Duration::from_millis(10),
    ///     Duration::from_secs(60),
    /// ));
    /// let controller = Controller::with_queue(&services, queue, 4);
    /// # }
    /// ```
    pub fn with_queue(primary: &Informer<K>, queue: WorkQueue<ObjectRef>, workers: usize) -> Self {
        // An unnamed queue is exported under the primary's lowercase kind (`deployment`), as
        // client-go's controllers name theirs.
        #[cfg(feature = "metrics")]
        if queue.name().is_none() {
            queue.set_name(primary.api_resource().kind.to_lowercase());
        }
        let controller = Controller {
            store: Arc::clone(primary.store()),
            pool: WorkerPool::new(queue, workers),
            sources: Vec::new(),
            policy: Backoff,
        };
        controller.watches(primary, |obj: &K| Some(ObjectRef::from_obj(obj)))
    }
}

impl<K: Object + Clone, P> Controller<K, P> {
    /// Also enqueues the refs `mapper` maps another informer's objects to: for every add, for
    /// both the old and the new object of an update (so a ref the object no longer maps to is
    /// reconciled too), and for the final state of a deleted object. Return `None`, one ref or
    /// several (any `IntoIterator` of [`ObjectRef`]s, or of `namespace/name` keys). `run` also
    /// waits for this informer to sync.
    ///
    /// For example, Services reconciled from their EndpointSlices, found by label:
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use informer::{EndpointSlice, InformerFactory, Service};
    /// use informer::workqueue::{Controller, ObjectRef};
    /// let factory = InformerFactory::new(client);
    /// let controller = Controller::new(&factory.informer::<Service>(None), 2).watches(
    ///     &factory.informer::<EndpointSlice>(None),
    ///     |slice: &EndpointSlice| {
    ///         let service = slice.metadata.labels.get("kubernetes.io/service-name")?;
    ///         Some(ObjectRef::new(service).within(slice.metadata.namespace.as_str()))
    ///     },
    /// );
    /// # }
    /// ```
    pub fn watches<U, F, I>(mut self, informer: &Informer<U>, mapper: F) -> Self
    where
        U: Object + Clone,
        F: Fn(&U) -> I + Send + Sync + 'static,
        I: IntoIterator,
        I::Item: Into<ObjectRef>,
    {
        let informer = informer.clone();
        self.sources
            .push(Box::new(move |queue: &WorkQueue<ObjectRef>| {
                let id = informer.add_handler(Enqueue {
                    queue: queue.clone(),
                    mapper,
                });
                let synced = informer.clone();
                let fresh = informer.clone();
                Registered {
                    synced: Box::pin(async move { synced.handler_synced(id).await }),
                    listed_since: Arc::new(move |since| {
                        let asked = fresh.relist_unless_listed_since(since);
                        let fresh = fresh.clone();
                        Box::pin(async move { fresh.wait_listed_since(since, asked).await })
                    }),
                    remove: Box::new(move || {
                        informer.remove_handler(id);
                    }),
                }
            }));
        self
    }

    /// Also enqueues the ref of the controlling owner of another informer's objects, when that
    /// owner is a `K` (its `ownerReferences` entry with `controller: true` has `K`'s kind and
    /// group), as sample-controller's `handleObject` does. The owner is looked up in the object's
    /// namespace (or none, for a cluster-scoped `K`).
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use informer::{EndpointSlice, InformerFactory, Service, workqueue::Controller};
    /// let factory = InformerFactory::new(client);
    /// // A slice owned by Service default/web enqueues default/web.
    /// let controller = Controller::new(&factory.informer::<Service>(None), 2)
    ///     .owns(&factory.informer::<EndpointSlice>(None));
    /// # }
    /// ```
    pub fn owns<U: Object + Clone>(self, informer: &Informer<U>) -> Self
    where
        K: Resource,
    {
        let owner = K::api_resource();
        self.watches(informer, move |obj: &U| {
            controlling_owner_ref(obj.meta(), &owner)
        })
    }

    /// Sets the error policy: what to do with an object whose reconcile returned `Err`
    /// (kube-rs's `error_policy`). Without one, the object's ref is retried with the queue's
    /// per-key exponential backoff ([`Backoff`]). The error is logged (warn) before the policy
    /// runs, whichever it is; a panicking policy is caught like a panicking reconcile.
    ///
    /// Annotate the closure's argument types (the error and context types are not known
    /// until [`run`](Self::run)), or pass a `fn`.
    ///
    /// ```no_run
    /// # fn demo(services: &informer::Informer<informer::Service>) {
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use informer::Service;
    /// use informer::workqueue::{Action, Controller};
    /// let controller = Controller::new(services, 2).error_policy(
    ///     |_service: Arc<Service>, _error: &informer::Error, _ctx: Arc<()>| {
    ///         Action::RequeueAfter(Duration::from_secs(5))
    ///     },
    /// );
    /// # }
    /// ```
    pub fn error_policy<E, Ctx, F>(self, policy: F) -> Controller<K, F>
    where
        F: Fn(Arc<K>, &E, Arc<Ctx>) -> Action + Send + Sync + 'static,
    {
        Controller {
            store: self.store,
            pool: self.pool,
            sources: self.sources,
            policy,
        }
    }

    /// Bounds the drain on shutdown; see [`WorkerPool::shutdown_grace`].
    ///
    /// ```no_run
    /// # fn demo(services: &informer::Informer<informer::Service>) {
    /// use std::time::Duration;
    /// use informer::workqueue::Controller;
    /// let controller = Controller::new(services, 2).shutdown_grace(Duration::from_secs(10));
    /// # }
    /// ```
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.pool = self.pool.shutdown_grace(grace);
        self
    }

    /// The queue the handlers feed and the workers drain (for its
    /// [`metrics`](WorkQueue::metrics), or to add refs yourself).
    ///
    /// ```no_run
    /// # fn demo(services: &informer::Informer<informer::Service>) {
    /// use informer::workqueue::Controller;
    /// let controller = Controller::new(services, 2);
    /// let queue = controller.queue().clone();
    /// // later, while it runs:
    /// println!("{} refs waiting", queue.metrics().depth);
    /// # }
    /// ```
    pub fn queue(&self) -> &WorkQueue<ObjectRef> {
        self.pool.queue()
    }

    /// The primary informer's store, the one the reconciled objects are read from.
    ///
    /// ```no_run
    /// # fn demo(services: &informer::Informer<informer::Service>) {
    /// use informer::workqueue::Controller;
    /// let controller = Controller::new(services, 2);
    /// assert!(std::sync::Arc::ptr_eq(controller.store(), services.store()));
    /// # }
    /// ```
    pub fn store(&self) -> &Arc<Store<K>> {
        &self.store
    }

    /// Registers the handlers, waits until every informer has synced and its handler has
    /// enqueued the initial list, then runs the workers: each takes a ref, reads its object
    /// from the primary store (not reconciled if absent) and calls `reconcile(object, ctx)`;
    /// `Ok(action)` is settled as in [`WorkerPool::run`], `Err` goes to the error policy. Returns
    /// once `shutdown` has completed and the workers have drained (or were cancelled after the
    /// [`shutdown_grace`](Self::shutdown_grace)); the handlers are then removed from the
    /// informers, whose caches go on (they are removed too if the `run` future is dropped).
    ///
    /// `E: Display` rather than kube-rs's `std::error::Error + Send + Sync + 'static`: the log
    /// line needs only its text, and the bound then also takes `String`,
    /// `Box<dyn Error + Send + Sync>` and `anyhow::Error`, none of which implement
    /// `std::error::Error`. Put the causes you want logged into its `Display`.
    ///
    /// Start the informers (or their factory) before or while `run` waits: it does not start
    /// them. If `shutdown` completes before they sync, `run` returns without reconciling.
    ///
    /// ```no_run
    /// # async fn demo(services: informer::Informer<informer::Service>) {
    /// use std::sync::Arc;
    /// use informer::Service;
    /// use informer::workqueue::{Action, Controller};
    /// let summary = Controller::new(&services, 2)
    ///     .run(
    ///         |service: Arc<Service>, _ctx: Arc<()>| async move {
    ///             if service.spec.cluster_ip.is_none() {
    ///                 // Logged, then retried with backoff.
    ///                 return Err(format!("{} has no cluster IP yet", service.metadata.name));
    ///             }
    ///             Ok(Action::Done)
    ///         },
    ///         Arc::new(()),
    ///         tokio::time::sleep(std::time::Duration::from_secs(60)),
    ///     )
    ///     .await;
    /// println!("{summary:?}");
    /// # }
    /// ```
    pub async fn run<Ctx, R, Fut, E, S>(
        self,
        reconcile: R,
        ctx: Arc<Ctx>,
        shutdown: S,
    ) -> RunSummary
    where
        Ctx: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
        P: ErrorPolicy<K, E, Ctx>,
        S: Future<Output = ()>,
    {
        let mut shutdown = pin!(shutdown);
        let Some((store, pool, policy, _handlers)) = self.sync(shutdown.as_mut()).await else {
            return RunSummary::default();
        };
        let (reconcile, policy) = (Arc::new(reconcile), Arc::new(policy));
        pool.run_outcomes(
            move |key| {
                let reconcile = Arc::clone(&reconcile);
                reconcile_one(
                    key,
                    Arc::clone(&store),
                    move |obj, ctx| reconcile(obj, ctx),
                    Arc::clone(&policy),
                    Arc::clone(&ctx),
                )
            },
            shutdown,
        )
        .await
    }

    /// Like [`run`](Self::run), with the workers under a fence (see
    /// [`WorkerPool::run_fenced`]): the informers sync and their handlers enqueue whatever the
    /// fence says, so a replica that starts leading starts warm; reconciles run only while the
    /// fence holds a token, get it as `reconcile(object, ctx, token)`, and are cancelled when it
    /// closes.
    ///
    /// An opening does not reach the workers before every informer of the controller (the
    /// primary, owned and watched ones) holds a list that started after the opening: after a
    /// partition longer than the lease, or when a follower whose watches hung or broke takes
    /// over, the store could be older than changes the new leadership must not miss (under
    /// sharding, objects moved to another shard meanwhile). Every informer relists
    /// ([`Informer::relist`]'s mechanism, a consistent read), so each opening costs one LIST per
    /// informer and waits for it; openings are as rare as changes of leadership.
    ///
    /// With a [`LeaderElector`](crate::leaderelection::LeaderElector), this is a controller on
    /// many replicas of which one reconciles at a time:
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use std::sync::Arc;
    /// use informer::leaderelection::{FencingToken, LeaderElectionConfig, LeaderElector};
    /// use informer::workqueue::{Action, Controller};
    /// use informer::{ConfigMap, InformerFactory};
    ///
    /// let elector = LeaderElector::new(client.clone(), "default", "my-controller", "pod-a",
    ///                                  LeaderElectionConfig::default())?;
    /// let fence = elector.fence();
    /// tokio::spawn(elector.run(std::future::pending()));
    ///
    /// let factory = InformerFactory::new(client);
    /// let controller = Controller::new(&factory.informer::<ConfigMap>(None), 2);
    /// factory.start();
    /// controller
    ///     .run_fenced(
    ///         fence,
    ///         |cm: Arc<ConfigMap>, _ctx: Arc<()>, token: FencingToken| async move {
    ///             // Write `token` (holder and leaseTransitions) into what this changes.
    ///             println!("{} as {token}", cm.metadata.name);
    ///             Ok::<_, informer::Error>(Action::Done)
    ///         },
    ///         Arc::new(()),
    ///         std::future::pending(),
    ///     )
    ///     .await;
    /// # Ok(()) }
    /// ```
    pub async fn run_fenced<Tok, Ctx, R, Fut, E, S>(
        self,
        fence: tokio::sync::watch::Receiver<Option<Tok>>,
        reconcile: R,
        ctx: Arc<Ctx>,
        shutdown: S,
    ) -> RunSummary
    where
        Tok: FenceToken,
        Ctx: Send + Sync + 'static,
        R: Fn(Arc<K>, Arc<Ctx>, Tok) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
        P: ErrorPolicy<K, E, Ctx>,
        S: Future<Output = ()>,
    {
        let mut shutdown = pin!(shutdown);
        let Some((store, pool, policy, handlers)) = self.sync(shutdown.as_mut()).await else {
            return RunSummary::default();
        };
        let catch_up: Vec<CatchUp> = handlers
            .0
            .iter()
            .map(|h| Arc::clone(&h.listed_since))
            .collect();
        let (gated, workers_fence) = tokio::sync::watch::channel(None);
        let gate = pin!(open_when_caught_up(fence, gated, catch_up));
        let (reconcile, policy) = (Arc::new(reconcile), Arc::new(policy));
        let run = pool.run_fenced_outcomes(
            workers_fence,
            move |key, token| {
                let reconcile = Arc::clone(&reconcile);
                reconcile_one(
                    key,
                    Arc::clone(&store),
                    move |obj, ctx| reconcile(obj, ctx, token),
                    Arc::clone(&policy),
                    Arc::clone(&ctx),
                )
            },
            shutdown,
        );
        // The gate ends when the elector's fence closes for good (its sender dropped, which
        // closes the workers' fence too); the run ends at shutdown.
        match select(pin!(run), gate).await {
            Either::Left((summary, _)) => summary,
            Either::Right(((), run)) => run.await,
        }
    }

    /// Registers the handlers and waits until every informer has synced and its handler has
    /// enqueued the initial list; `None` (queue shut down) if `shutdown` completes first. The
    /// handlers are removed when the returned [`Handlers`] is dropped.
    async fn sync<S: Future<Output = ()>>(
        self,
        mut shutdown: Pin<&mut S>,
    ) -> Option<(Arc<Store<K>>, WorkerPool<ObjectRef>, P, Handlers)> {
        let Controller {
            store,
            pool,
            sources,
            policy,
        } = self;
        let queue = pool.queue().clone();
        // Removed from the informers when `run` ends, or when its future is dropped.
        let mut handlers = Handlers(sources.into_iter().map(|add| add(&queue)).collect());

        // Each future is woken by its informer when it syncs or its handler finishes the initial
        // list; both only ever turn true, so waiting for them one after the other waits for all.
        let synced = async {
            for handler in &mut handlers.0 {
                handler.synced.as_mut().await;
            }
        };
        if let Either::Right(_) = select(pin!(synced), shutdown.as_mut()).await {
            queue.shut_down();
            return None;
        }
        Some((store, pool, policy, handlers))
    }
}

/// Forwards `fence` to the workers (`gated`), except that an opening is held back until every
/// informer of the controller holds a list that started after the opening: after a partition
/// longer than the lease, or a takeover by a replica whose watches hung or broke (a reflector in
/// backoff, say), the store could otherwise be older than the changes the new leadership must
/// not miss (a shard's objects moved to another shard meanwhile). A list that started before the
/// opening proves nothing of what came after it, whatever it was newer than: the seeded shard
/// runs found a shard whose watch broke after its first list reconcile an object the sharder
/// had moved, when its first opening accepted that list. A change of the fence during the
/// catch-up wins over it. Returns once `fence`'s sender is gone; dropping `gated` then closes
/// the workers' fence.
async fn open_when_caught_up<Tok: FenceToken>(
    mut fence: tokio::sync::watch::Receiver<Option<Tok>>,
    gated: tokio::sync::watch::Sender<Option<Tok>>,
    catch_up: Vec<CatchUp>,
) {
    loop {
        let value = fence.borrow_and_update().clone();
        match value {
            None => {
                gated.send_if_modified(|open| open.take().is_some());
            }
            // The same leadership, still holding. A token equal to the one the workers have
            // but lapsed is a new leadership its elector opened at once after closing (the
            // `None` between the two may not be seen): catch up and open it again.
            Some(token)
                if gated
                    .borrow()
                    .as_ref()
                    .is_some_and(|open| *open == token && open.holds()) => {}
            Some(token) => {
                // Another leadership: the old one's workers stop while this one catches up.
                gated.send_if_modified(|open| open.take().is_some());
                tracing::debug!("the fence opened: catching the informers up before work");
                let opened = Instant::now();
                let caught_up = async {
                    // One after the other: each completes once its list is in, so waiting for
                    // them in turn waits for all, and their relists run meanwhile.
                    let started: Vec<_> = catch_up.iter().map(|c| c(opened)).collect();
                    for done in started {
                        done.await;
                    }
                };
                // `select` polls its first future first: a change of the fence wins.
                match select(pin!(fence.changed()), pin!(caught_up)).await {
                    Either::Left((Ok(()), _)) => continue,
                    Either::Left((Err(_), _)) => return,
                    Either::Right(((), _)) => {}
                }
                if fence.borrow().as_ref() != Some(&token) {
                    continue; // it changed as the catch-up ended: look again
                }
                gated.send_replace(Some(token));
            }
        }
        if fence.changed().await.is_err() {
            return;
        }
    }
}

/// The short name of `K`'s type (`ConfigMap`, `DynamicObject`): the span's `kind`, a
/// `&'static str` with no allocation, and available for kinds that are not a [`Resource`].
fn kind_of<K>() -> &'static str {
    let path = std::any::type_name::<K>();
    let path = path.split('<').next().unwrap_or(path);
    path.rsplit("::").next().unwrap_or(path)
}

/// One worker's turn at `key`: read its object, reconcile it in a span, settle errors through
/// `policy`, catch panics. The store is read when the returned future is first polled.
async fn reconcile_one<K, Ctx, E, Fut, P>(
    key: ObjectRef,
    store: Arc<Store<K>>,
    reconcile: impl FnOnce(Arc<K>, Arc<Ctx>) -> Fut,
    policy: Arc<P>,
    ctx: Arc<Ctx>,
) -> Outcome
where
    K: Object,
    Fut: Future<Output = Result<Action, E>>,
    E: fmt::Display,
    P: ErrorPolicy<K, E, Ctx>,
{
    let kind = kind_of::<K>();
    // `Ref` is not `Send`: turned into an `Arc` at once, never held across an await.
    let Some(object) = store
        .get(&key.namespace, &key.name)
        .map(|found| Ref::to_arc(&found))
    else {
        tracing::debug!(
            kind,
            object = %key,
            "not in the store (deleted): not reconciled; finalizers are for cleanup"
        );
        return Outcome::Absent;
    };
    let meta = object.meta();
    let span = tracing::info_span!(
        "reconcile",
        kind,
        namespace = meta.namespace(),
        name = meta.name(),
        resource_version = meta.resource_version(),
    );
    async move {
        let called =
            CatchUnwind::new(async { reconcile(Arc::clone(&object), Arc::clone(&ctx)).await });
        let error = match called.await {
            Ok(Ok(action)) => {
                tracing::debug!(?action, "reconciled");
                return Outcome::Reconciled(action);
            }
            Ok(Err(error)) => error,
            Err(payload) => {
                tracing::error!(
                    object = %key,
                    panic = %crate::error::panic_message(&*payload),
                    "reconcile panicked; retrying with backoff"
                );
                return Outcome::Panicked;
            }
        };
        tracing::warn!(object = %key, error = %error, "reconcile failed");
        match catch_unwind(AssertUnwindSafe(|| policy.on_error(object, &error, ctx))) {
            Ok(next) => {
                tracing::debug!(?next, "error policy (None: retry with backoff)");
                Outcome::Failed(next)
            }
            Err(payload) => {
                tracing::error!(
                    object = %key,
                    panic = %crate::error::panic_message(&*payload),
                    "error policy panicked; retrying with backoff"
                );
                Outcome::Panicked
            }
        }
    }
    .instrument(span)
    .await
}

/// The handlers one `run` registered.
struct Handlers(Vec<Registered>);

impl Drop for Handlers {
    fn drop(&mut self) {
        for handler in std::mem::take(&mut self.0) {
            (handler.remove)();
        }
    }
}

/// The ref of `meta`'s controlling owner if that owner is of kind `owner`.
fn controlling_owner_ref(meta: &impl Metadata, owner: &ApiResource) -> Option<ObjectRef> {
    let reference = meta.controller_owner()?;
    let group = reference
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group);
    if reference.kind != owner.kind || group != owner.group {
        return None;
    }
    let owner_ref = ObjectRef::new(reference.name);
    Some(if owner.namespaced {
        owner_ref.within(meta.namespace())
    } else {
        owner_ref
    })
}

/// The handler `watches` registers: every event's object goes through `mapper`, every ref into
/// the queue. Runs on the informer's handler thread; `add` never blocks.
struct Enqueue<F> {
    queue: WorkQueue<ObjectRef>,
    mapper: F,
}

impl<F> Enqueue<F> {
    fn enqueue<U, I>(&self, obj: &U)
    where
        F: Fn(&U) -> I,
        I: IntoIterator,
        I::Item: Into<ObjectRef>,
    {
        for key in (self.mapper)(obj) {
            self.queue.add(key.into());
        }
    }
}

impl<U, F, I> EventHandler<U> for Enqueue<F>
where
    U: Object,
    F: Fn(&U) -> I + Send + Sync + 'static,
    I: IntoIterator,
    I::Item: Into<ObjectRef>,
{
    fn on_add(&self, obj: &Arc<U>, _in_initial_list: bool) {
        self.enqueue(&**obj);
    }

    fn on_update(&self, old: &Arc<U>, new: &Arc<U>) {
        self.enqueue(&**new);
        if !Arc::ptr_eq(old, new) {
            self.enqueue(&**old);
        }
    }

    fn on_delete(&self, obj: &DeletedObject<U>) {
        self.enqueue(&**obj.object());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ObjectMeta, OwnerReference};

    fn owned(namespace: &str, api_version: &str, kind: &str, controller: bool) -> ObjectMeta {
        ObjectMeta {
            namespace: namespace.into(),
            name: "child".into(),
            owner_references: vec![OwnerReference {
                api_version: api_version.into(),
                kind: kind.into(),
                name: "parent".into(),
                controller: Some(controller),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn owner_key_needs_a_controlling_reference_of_the_kind() {
        let service = crate::Service::api_resource();
        let deployment = ApiResource::new("apps", "v1", "Deployment", "deployments", true);
        let node = ApiResource::new("", "v1", "Node", "nodes", false);
        let key = |meta: &ObjectMeta, owner: &ApiResource| {
            controlling_owner_ref(meta, owner).map(|r| r.to_string())
        };
        assert_eq!(
            key(&owned("ns", "v1", "Service", true), &service).as_deref(),
            Some("ns/parent")
        );
        assert_eq!(key(&owned("ns", "v1", "Service", false), &service), None);
        assert_eq!(key(&owned("ns", "v1", "Pod", true), &service), None);
        assert_eq!(
            key(&owned("ns", "apps/v1", "Deployment", true), &deployment).as_deref(),
            Some("ns/parent")
        );
        assert_eq!(
            key(
                &owned("ns", "extensions/v1beta1", "Deployment", true),
                &deployment
            ),
            None
        );
        assert_eq!(
            key(&owned("ns", "v1", "Node", true), &node).as_deref(),
            Some("parent")
        );
        assert_eq!(key(&ObjectMeta::default(), &service), None);
    }
}
