//! [`InformerController`]: a [`WorkerPool`] fed by shared informers, reconciling from their store.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{Either, select};

use crate::fifo::DeletedObject;
use crate::informer::{EventHandler, Informer};
use crate::model::{ApiResource, ObjectMeta};
use crate::store::Store;
use crate::{Object, Resource};

use super::{Action, RunSummary, WorkQueue, WorkerPool};

/// Registers one handler on one informer when `run` starts.
type Source = Box<dyn FnOnce(&WorkQueue<String>) -> Registered + Send>;

/// A handler registered by `run`: a future that completes once it has synced, and how to remove
/// it.
struct Registered {
    synced: Pin<Box<dyn Future<Output = ()> + Send>>,
    remove: Box<dyn FnOnce() + Send + Sync>,
}

/// A controller for objects of type `T`: informers' events become keys in a [`WorkQueue`], and
/// `workers` tasks run an async `reconcile(key, store)` that reads `T` from the primary
/// informer's store.
///
/// This is client-go's sample-controller wiring (and kube-rs's `Controller::new(api).owns(..)`),
/// on this crate's own parts:
///
/// ```text
/// Informer<T>  --handler: own key------------\
/// Informer<U>  --handler: key_fn(obj)---------+--> WorkQueue<String> --> N workers:
/// Informer<V>  --handler: controlling owner--/                            reconcile(key, Arc<Store<T>>)
/// ```
///
/// * Handlers only reduce events to keys (`namespace/name`, or `name` for cluster-scoped
///   objects); events about an object whose key is still waiting add nothing, so a burst of
///   them costs one reconcile of the latest state.
/// * Workers start once every informer has synced and its handler has enqueued the initial list
///   (client-go's `WaitForCacheSync`), so a reconcile never sees a half-filled store.
/// * Reconcile reads the object from the primary informer's [`Store`] by key, never from the
///   apiserver; a key whose object is gone (deleted) reads as `None`.
/// * Outcomes, retries and shutdown are [`WorkerPool::run`]'s: `Done` forgets the key's
///   backoff, `RequeueAfter(d)` comes back after `d`, an error is retried with the queue's rate
///   limiter; on shutdown the workers drain (or are cancelled past the
///   [`shutdown_grace`](Self::shutdown_grace)) and the handlers are removed from the informers.
///
/// Build it with [`new`](Self::new) (the primary informer: each `T` event enqueues the object's
/// own key), add [`owns`](Self::owns) (objects whose controlling owner is a `T`) and
/// [`watches`](Self::watches) (any other key function), start the informers, then
/// [`run`](Self::run).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use informer_sim::Simulator;
/// use informer::workqueue::{Action, InformerController};
/// use informer::{Client, Config, ConfigMap, InformerFactory};
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let sim = Simulator::start().await?;
/// sim.create("configmaps", Some("default"), serde_json::json!({"metadata": {"name": "app"}}))?;
///
/// let factory = InformerFactory::new(Client::new(Config::new(sim.url().parse()?))?);
/// let controller = InformerController::new(&factory.informer::<ConfigMap>(None), 2);
/// factory.start();
///
/// let summary = controller
///     .run(
///         |key, configmaps| async move {
///             match configmaps.get_key(&key) {
///                 Some(cm) => println!("{key} is at version {}", cm.metadata.resource_version),
///                 None => println!("{key} was deleted"),
///             }
///             Ok::<_, std::convert::Infallible>(Action::Done)
///         },
///         tokio::time::sleep(Duration::from_millis(500)),
///     )
///     .await;
/// assert_eq!(summary.done, 1);
/// # Ok(()) }
/// ```
pub struct InformerController<T: Object> {
    store: Arc<Store<T>>,
    controller: WorkerPool<String>,
    sources: Vec<Source>,
}

impl<T: Object + Clone> InformerController<T> {
    /// A controller of `primary`'s objects with `workers` workers (at least one) and a queue
    /// with client-go's default rate limiter. Every add, update and delete of a `T` enqueues its
    /// key; reconcile reads from `primary`'s store.
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use informer::{Informer, Service, Api, workqueue::InformerController};
    /// let services = Informer::new(Api::<Service>::all(client), Default::default());
    /// let controller = InformerController::new(&services, 4);
    /// # }
    /// ```
    pub fn new(primary: &Informer<T>, workers: usize) -> Self {
        Self::with_queue(primary, WorkQueue::new(), workers)
    }

    /// Like [`new`](Self::new), with your own queue (another rate limiter, timing metrics off,
    /// or a queue other producers also feed).
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use std::time::Duration;
    /// use informer::{Api, Informer, Service};
    /// use informer::workqueue::{InformerController, ItemExponentialRateLimiter, WorkQueue};
    /// let services = Informer::new(Api::<Service>::all(client), Default::default());
    /// let queue = WorkQueue::with_rate_limiter(ItemExponentialRateLimiter::new(
    ///     Duration::from_millis(10),
    ///     Duration::from_secs(60),
    /// ));
    /// let controller = InformerController::with_queue(&services, queue, 4);
    /// # }
    /// ```
    pub fn with_queue(primary: &Informer<T>, queue: WorkQueue<String>, workers: usize) -> Self {
        let controller = InformerController {
            store: Arc::clone(primary.store()),
            controller: WorkerPool::new(queue, workers),
            sources: Vec::new(),
        };
        controller.watches(primary, |obj: &T| Some(obj.meta().key()))
    }

    /// Also enqueues keys computed from another informer's objects: `keys(obj)` for every add,
    /// for both the old and the new object of an update (so a key the object no longer maps to
    /// is reconciled too), and for the final state of a deleted object. Return `None`, one key
    /// or several (any `IntoIterator<Item = String>`). `run` also waits for this informer to
    /// sync.
    ///
    /// For example, Services reconciled from their EndpointSlices, found by label:
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use informer::{EndpointSlice, InformerFactory, Service, workqueue::InformerController};
    /// let factory = InformerFactory::new(client);
    /// let controller = InformerController::new(&factory.informer::<Service>(None), 2).watches(
    ///     &factory.informer::<EndpointSlice>(None),
    ///     |slice: &EndpointSlice| {
    ///         let service = slice.metadata.labels.get("kubernetes.io/service-name")?;
    ///         Some(format!("{}/{service}", slice.metadata.namespace))
    ///     },
    /// );
    /// # }
    /// ```
    pub fn watches<U, F, I>(mut self, informer: &Informer<U>, keys: F) -> Self
    where
        U: Object + Clone,
        F: Fn(&U) -> I + Send + Sync + 'static,
        I: IntoIterator<Item = String>,
    {
        let informer = informer.clone();
        self.sources
            .push(Box::new(move |queue: &WorkQueue<String>| {
                let id = informer.add_handler(Enqueue {
                    queue: queue.clone(),
                    keys,
                });
                let synced = informer.clone();
                Registered {
                    synced: Box::pin(async move { synced.handler_synced(id).await }),
                    remove: Box::new(move || {
                        informer.remove_handler(id);
                    }),
                }
            }));
        self
    }

    /// Also enqueues the key of the controlling owner of another informer's objects, when that
    /// owner is a `T` (its `ownerReferences` entry with `controller: true` has `T`'s kind and
    /// group), as sample-controller's `handleObject` does. The owner is looked up in the object's
    /// namespace (or none, for a cluster-scoped `T`).
    ///
    /// ```no_run
    /// # fn demo(client: informer::Client) {
    /// use informer::{EndpointSlice, InformerFactory, Service, workqueue::InformerController};
    /// let factory = InformerFactory::new(client);
    /// // A slice owned by Service default/web enqueues "default/web".
    /// let controller = InformerController::new(&factory.informer::<Service>(None), 2)
    ///     .owns(&factory.informer::<EndpointSlice>(None));
    /// # }
    /// ```
    pub fn owns<U: Object + Clone>(self, informer: &Informer<U>) -> Self
    where
        T: Resource,
    {
        let owner = T::api_resource();
        self.watches(informer, move |obj: &U| {
            controlling_owner_key(obj.meta(), &owner)
        })
    }

    /// Bounds the drain on shutdown; see [`WorkerPool::shutdown_grace`].
    ///
    /// ```no_run
    /// # fn demo(services: &informer::Informer<informer::Service>) {
    /// use std::time::Duration;
    /// use informer::workqueue::InformerController;
    /// let controller = InformerController::new(services, 2).shutdown_grace(Duration::from_secs(10));
    /// # }
    /// ```
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.controller = self.controller.shutdown_grace(grace);
        self
    }

    /// The queue the handlers feed and the workers drain (for its
    /// [`metrics`](WorkQueue::metrics), or to add keys yourself).
    ///
    /// ```no_run
    /// # fn demo(services: &informer::Informer<informer::Service>) {
    /// use informer::workqueue::InformerController;
    /// let controller = InformerController::new(services, 2);
    /// let queue = controller.queue().clone();
    /// // later, while it runs:
    /// println!("{} keys waiting", queue.metrics().depth);
    /// # }
    /// ```
    pub fn queue(&self) -> &WorkQueue<String> {
        self.controller.queue()
    }

    /// The primary informer's store, the one reconcile receives.
    ///
    /// ```no_run
    /// # fn demo(services: &informer::Informer<informer::Service>) {
    /// use informer::workqueue::InformerController;
    /// let controller = InformerController::new(services, 2);
    /// assert!(std::sync::Arc::ptr_eq(controller.store(), services.store()));
    /// # }
    /// ```
    pub fn store(&self) -> &Arc<Store<T>> {
        &self.store
    }

    /// Registers the handlers, waits until every informer has synced and its handler has
    /// enqueued the initial list, then runs the workers as [`WorkerPool::run`] does, each calling
    /// `reconcile(key, store)` with the primary informer's store. Returns once `shutdown` has
    /// completed and the workers have drained (or were cancelled after the
    /// [`shutdown_grace`](Self::shutdown_grace)); the handlers are then removed from the
    /// informers, whose caches go on (they are removed too if the `run` future is dropped).
    ///
    /// Start the informers (or their factory) before or while `run` waits: it does not start
    /// them. If `shutdown` completes before they sync, `run` returns without reconciling.
    ///
    /// ```no_run
    /// # async fn demo(services: informer::Informer<informer::Service>) {
    /// use informer::workqueue::{Action, InformerController};
    /// let summary = InformerController::new(&services, 2)
    ///     .run(
    ///         |key, services| async move {
    ///             let Some(service) = services.get_key(&key) else {
    ///                 return Ok(Action::Done); // deleted: clean up whatever it owned
    ///             };
    ///             if service.spec.cluster_ip.is_none() {
    ///                 return Err(format!("{key} has no cluster IP yet")); // retried with backoff
    ///             }
    ///             Ok(Action::Done)
    ///         },
    ///         tokio::time::sleep(std::time::Duration::from_secs(60)),
    ///     )
    ///     .await;
    /// println!("{summary:?}");
    /// # }
    /// ```
    pub async fn run<R, Fut, E, S>(self, reconcile: R, shutdown: S) -> RunSummary
    where
        R: Fn(String, Arc<Store<T>>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Send + 'static,
        S: Future<Output = ()>,
    {
        let mut shutdown = pin!(shutdown);
        let Some((store, controller, _handlers)) = self.sync(shutdown.as_mut()).await else {
            return RunSummary::default();
        };
        controller
            .run(move |key| reconcile(key, Arc::clone(&store)), shutdown)
            .await
    }

    /// Like [`run`](Self::run), with the workers under a fence (see
    /// [`WorkerPool::run_fenced`]): the informers sync and their handlers enqueue whatever the
    /// fence says, so a replica that starts leading starts warm; reconciles run only while the
    /// fence holds a token, get it as `reconcile(key, store, token)`, and are cancelled when it
    /// closes.
    ///
    /// With a [`LeaderElector`](crate::leaderelection::LeaderElector), this is a controller on
    /// many replicas of which one reconciles at a time:
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use informer::leaderelection::{LeaderElectionConfig, LeaderElector};
    /// use informer::workqueue::{Action, InformerController};
    /// use informer::{ConfigMap, InformerFactory};
    ///
    /// let elector = LeaderElector::new(client.clone(), "default", "my-controller", "pod-a",
    ///                                  LeaderElectionConfig::default())?;
    /// let fence = elector.fence();
    /// tokio::spawn(elector.run(std::future::pending()));
    ///
    /// let factory = InformerFactory::new(client);
    /// let controller = InformerController::new(&factory.informer::<ConfigMap>(None), 2);
    /// factory.start();
    /// controller
    ///     .run_fenced(
    ///         fence,
    ///         |key, configmaps, token| async move {
    ///             // Write `token` (holder and leaseTransitions) into what this changes.
    ///             println!("{key} as {token}: {:?}", configmaps.get_key(&key).is_some());
    ///             Ok::<_, std::convert::Infallible>(Action::Done)
    ///         },
    ///         std::future::pending(),
    ///     )
    ///     .await;
    /// # Ok(()) }
    /// ```
    pub async fn run_fenced<Tok, R, Fut, E, S>(
        self,
        fence: tokio::sync::watch::Receiver<Option<Tok>>,
        reconcile: R,
        shutdown: S,
    ) -> RunSummary
    where
        Tok: Clone + PartialEq + Send + Sync + 'static,
        R: Fn(String, Arc<Store<T>>, Tok) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: Send + 'static,
        S: Future<Output = ()>,
    {
        let mut shutdown = pin!(shutdown);
        let Some((store, controller, _handlers)) = self.sync(shutdown.as_mut()).await else {
            return RunSummary::default();
        };
        controller
            .run_fenced(
                fence,
                move |key, token| reconcile(key, Arc::clone(&store), token),
                shutdown,
            )
            .await
    }

    /// Registers the handlers and waits until every informer has synced and its handler has
    /// enqueued the initial list; `None` (queue shut down) if `shutdown` completes first. The
    /// handlers are removed when the returned [`Handlers`] is dropped.
    async fn sync<S: Future<Output = ()>>(
        self,
        mut shutdown: Pin<&mut S>,
    ) -> Option<(Arc<Store<T>>, WorkerPool<String>, Handlers)> {
        let InformerController {
            store,
            controller,
            sources,
        } = self;
        let queue = controller.queue().clone();
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
        Some((store, controller, handlers))
    }
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

/// The key of `meta`'s controlling owner if that owner is of kind `owner`.
fn controlling_owner_key(meta: &ObjectMeta, owner: &ApiResource) -> Option<String> {
    let reference = meta
        .owner_references
        .iter()
        .find(|r| r.controller == Some(true))?;
    let group = reference
        .api_version
        .rsplit_once('/')
        .map_or("", |(group, _)| group);
    if reference.kind != owner.kind || group != owner.group {
        return None;
    }
    Some(if owner.namespaced && !meta.namespace.is_empty() {
        format!("{}/{}", meta.namespace, reference.name)
    } else {
        reference.name.clone()
    })
}

/// The handler `watches` registers: every event's object goes through `keys`, every key into
/// the queue. Runs on the informer's handler thread; `add` never blocks.
struct Enqueue<F> {
    queue: WorkQueue<String>,
    keys: F,
}

impl<F> Enqueue<F> {
    fn enqueue<U, I>(&self, obj: &U)
    where
        F: Fn(&U) -> I,
        I: IntoIterator<Item = String>,
    {
        for key in (self.keys)(obj) {
            self.queue.add(key);
        }
    }
}

impl<U, F, I> EventHandler<U> for Enqueue<F>
where
    U: Object,
    F: Fn(&U) -> I + Send + Sync + 'static,
    I: IntoIterator<Item = String>,
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
    use crate::model::OwnerReference;

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
        let key = |meta: &ObjectMeta, owner: &ApiResource| controlling_owner_key(meta, owner);
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
