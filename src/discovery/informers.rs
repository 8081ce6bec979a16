//! The informers of one namespace (or of the whole cluster) that discovery reads, and the handlers
//! it registers on them.
//!
//! A [`Watch`] holds the EndpointSlice (or Endpoints) informer, and optionally the Service and the
//! metadata-only Pod informer, of one namespace. Its handlers only report what changed to a
//! [`Changes`] (the cache, which recomputes the Services concerned); they hold it weakly, so a
//! dropped cache leaves handlers that do nothing until the namespace's informers stop.
//!
//! Invariants:
//! - `handlers` is set once, right after the handlers are registered and before anyone can wait for
//!   the sync: sync means every informer synced *and* our handler on it was handed its whole
//!   initial list.
//! - `computing` and `computed` go from false to true once (the first full computation of the
//!   namespace); `evicted` likewise, when the namespace is forgotten. The orderings are argued at
//!   each field.
//! - `on_evict` collects one removal per registered handler; eviction runs them all, so a
//!   forgotten namespace's informers (shared with others through the factory) keep no handler of
//!   ours.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use tokio::sync::Notify;

use super::{DiscoveryOptions, EndpointSource, SERVICE_INDEX, SERVICE_NAME_LABEL};
use crate::informer::{HandlerFns, HandlerId, Informer, InformerFactory, InformerRequest};
use crate::model::{
    EndpointSlice, Endpoints, Object, ObjectMeta, PartialObjectMetadata, Pod, Resource, Service,
};

/// What the handlers of a [`Watch`] report to: the objects that changed, for the Services they
/// belong to to be recomputed.
pub(crate) trait Changes: Send + Sync + 'static {
    /// An EndpointSlice was added or updated (`present`), or deleted.
    fn slice_changed(&self, slice: &EndpointSlice, present: bool);
    /// The Service, or its Endpoints object, changed.
    fn service_changed(&self, namespace: &str, service: &str);
    /// The labels or annotations of the Pod `namespace/name` changed (or it came or went).
    fn pod_changed(&self, pod_key: String);
}

/// The informers of one namespace (or of the cluster) and their sync progress.
pub(crate) struct Watch {
    /// Creation order among watches: eviction forgets the oldest first.
    pub(crate) created: u64,
    /// Set when the namespace was forgotten (past `max_watched_namespaces`): its first
    /// computation never comes.
    pub(crate) evicted: AtomicBool,
    /// Wakes the first-computation task when `evicted` is set.
    pub(crate) evicted_notify: Notify,
    /// Removes this cache's handlers from the informers (run on eviction).
    pub(crate) unregister: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    pub(crate) slices: Option<Informer<EndpointSlice>>,
    pub(crate) endpoints: Option<Informer<Endpoints>>,
    pub(crate) services: Option<Informer<Service>>,
    pub(crate) pods: Option<Informer<PartialObjectMetadata>>,
    /// Our handler on each informer (slices, endpoints, services, pods), set by `wire`.
    pub(crate) handlers: OnceLock<[Option<HandlerId>; 4]>,
    /// Set once every informer synced, just before the first full computation: from then on
    /// handlers recompute.
    ///
    /// Ordering (`SeqCst` at every use): a handler writes its store, then loads this flag; the
    /// computation stores the flag, then reads the stores. Either the handler sees the flag (and
    /// recomputes) or the computation sees the handler's write; no event falls between. The
    /// stores' own locks already give that (a handler's unlock and the computation's lock are
    /// ordered one way or the other), so Release/Acquire would do; `SeqCst` makes the argument
    /// hold without leaning on the locks, and costs nothing here (once per namespace, and one
    /// load per event).
    pub(crate) computing: AtomicBool,
    /// Set after the first full computation. `SeqCst`, like `computing`: a waiter loads it after
    /// registering with `computed_notify`, the computation stores it before notifying; Release/
    /// Acquire would do, `SeqCst` keeps the pairing obvious (not on a hot path).
    pub(crate) computed: AtomicBool,
    pub(crate) computed_notify: Notify,
}

impl Watch {
    /// The informers of one namespace (`None`: all) from `factory`, with `changes`' handlers
    /// registered and started on `runtime`; `created` orders it among the others.
    pub(crate) fn new<C: Changes>(
        factory: &InformerFactory,
        o: &DiscoveryOptions,
        ns: Option<&str>,
        created: u64,
        changes: &Weak<C>,
        runtime: &tokio::runtime::Handle,
    ) -> Arc<Watch> {
        let slices = (o.source == EndpointSource::EndpointSlices).then(|| {
            let inf: Informer<EndpointSlice> = factory.informer(ns);
            // Already there when the factory is shared with another ServiceDiscovery: same function.
            let _ = inf.store().add_index(
                SERVICE_INDEX,
                Arc::new(|s: &EndpointSlice| {
                    s.metadata
                        .labels
                        .get(SERVICE_NAME_LABEL)
                        .map(|svc| vec![format!("{}/{svc}", s.metadata.namespace)])
                        .unwrap_or_default()
                }),
            );
            inf
        });
        let endpoints =
            (o.source == EndpointSource::Endpoints).then(|| factory.informer::<Endpoints>(ns));
        let services = o.watch_services.then(|| factory.informer::<Service>(ns));
        let pods = o.pod_metadata.then(|| {
            factory.informer_with(
                InformerRequest::<PartialObjectMetadata>::new(Pod::api_resource()).namespace(ns),
            )
        });
        let watch = Arc::new(Watch {
            created,
            evicted: AtomicBool::new(false),
            evicted_notify: Notify::new(),
            unregister: Mutex::new(Vec::new()),
            slices,
            endpoints,
            services,
            pods,
            handlers: OnceLock::new(),
            computing: AtomicBool::new(false),
            computed: AtomicBool::new(false),
            computed_notify: Notify::new(),
        });
        let handlers = wire(&watch, changes, runtime);
        let _ = watch.handlers.set(handlers);
        watch
    }

    /// Removes handler `id` from `inf` when this namespace is evicted.
    fn on_evict<T: Object + Clone>(&self, inf: &Informer<T>, id: HandlerId) {
        let inf = inf.clone();
        self.unregister
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::new(move || {
                inf.remove_handler(id);
            }));
    }

    /// Every informer synced and our handler on it has been handed its whole initial list. Not
    /// just the informers: the first computation reads the stores, and a handler still holding an
    /// initial add could see it cancelled by a delete (the queue drops an add never delivered)
    /// and never recompute the Service.
    pub(crate) fn has_synced(&self) -> bool {
        let ids = self.handlers.get().copied().unwrap_or_default();
        handler_synced_now(&self.slices, ids[0])
            && handler_synced_now(&self.endpoints, ids[1])
            && handler_synced_now(&self.services, ids[2])
            && handler_synced_now(&self.pods, ids[3])
    }

    /// Completes once [`has_synced`](Self::has_synced) (each informer wakes its waiter).
    pub(crate) async fn synced(&self) {
        let ids = self.handlers.get().copied().unwrap_or_default();
        handler_synced(&self.slices, ids[0]).await;
        handler_synced(&self.endpoints, ids[1]).await;
        handler_synced(&self.services, ids[2]).await;
        handler_synced(&self.pods, ids[3]).await;
    }
}

/// Registers the handlers that recompute Services and starts the informers; returns the
/// handlers' ids (slices, endpoints, services, pods).
fn wire<C: Changes>(
    w: &Watch,
    changes: &Weak<C>,
    rt: &tokio::runtime::Handle,
) -> [Option<HandlerId>; 4] {
    let mut ids = [None; 4];
    if let Some(inf) = &w.slices {
        let (a, u, d) = (changes.clone(), changes.clone(), changes.clone());
        let id = inf.add_handler(
            HandlerFns::new()
                .on_add(move |s: &Arc<EndpointSlice>, _| {
                    if let Some(c) = a.upgrade() {
                        c.slice_changed(s, true);
                    }
                })
                .on_update(move |old: &Arc<EndpointSlice>, new: &Arc<EndpointSlice>| {
                    if let Some(c) = u.upgrade() {
                        if service_of(old) != service_of(new) {
                            c.slice_changed(old, false);
                        }
                        c.slice_changed(new, true);
                    }
                })
                .on_delete(move |s| {
                    if let Some(c) = d.upgrade() {
                        c.slice_changed(s.object(), false);
                    }
                }),
        );
        ids[0] = Some(id);
        w.on_evict(inf, id);
        inf.start_on(rt);
    }
    if let Some(inf) = &w.endpoints {
        let id = notify_on_change(
            inf,
            changes,
            |_, _| false,
            |c, m| c.service_changed(&m.namespace, &m.name),
        );
        ids[1] = Some(id);
        w.on_evict(inf, id);
        inf.start_on(rt);
    }
    if let Some(inf) = &w.services {
        // Only the ports of a Service enter its instances.
        let id = notify_on_change(
            inf,
            changes,
            |old: &Service, new| old.spec.ports == new.spec.ports,
            |c, m| c.service_changed(&m.namespace, &m.name),
        );
        ids[2] = Some(id);
        w.on_evict(inf, id);
        inf.start_on(rt);
    }
    if let Some(inf) = &w.pods {
        // Only the labels and annotations of a Pod enter its instances' metadata.
        let id = notify_on_change(
            inf,
            changes,
            |old: &PartialObjectMetadata, new| {
                old.metadata.labels == new.metadata.labels
                    && old.metadata.annotations == new.metadata.annotations
            },
            |c, m| c.pod_changed(m.key()),
        );
        ids[3] = Some(id);
        w.on_evict(inf, id);
        inf.start_on(rt);
    }
    ids
}

fn handler_synced_now<T: Object + Clone>(inf: &Option<Informer<T>>, id: Option<HandlerId>) -> bool {
    match (inf, id) {
        (Some(inf), Some(id)) => inf.handler_has_synced(id),
        (Some(inf), None) => inf.has_synced(),
        (None, _) => true,
    }
}

async fn handler_synced<T: Object + Clone>(inf: &Option<Informer<T>>, id: Option<HandlerId>) {
    match (inf, id) {
        (Some(inf), Some(id)) => inf.handler_synced(id).await,
        (Some(inf), None) => inf.synced().await,
        (None, _) => {}
    }
}

/// Registers a handler on `inf` that calls `changed(changes, metadata)` for every add and delete,
/// and for every update unless `unchanged(old, new)`: the Services, Endpoints and Pods handlers
/// differ only in those two functions.
fn notify_on_change<T: Object<Meta = ObjectMeta> + Clone, C: Changes>(
    inf: &Informer<T>,
    me: &Weak<C>,
    unchanged: fn(&T, &T) -> bool,
    changed: fn(&C, &ObjectMeta),
) -> HandlerId {
    let me = me.clone();
    let call = Arc::new(move |m: &ObjectMeta| {
        if let Some(c) = me.upgrade() {
            changed(&c, m);
        }
    });
    let (on_add, on_update, on_delete) = (call.clone(), call.clone(), call);
    inf.add_handler(
        HandlerFns::new()
            .on_add(move |o: &Arc<T>, _| on_add(o.meta()))
            .on_update(move |old: &Arc<T>, new: &Arc<T>| {
                if !unchanged(old, new) {
                    on_update(new.meta());
                }
            })
            .on_delete(move |d| on_delete(d.object().meta())),
    )
}

/// The Service a slice belongs to (its `kubernetes.io/service-name` label).
fn service_of(slice: &EndpointSlice) -> Option<&str> {
    slice.metadata.labels.get(SERVICE_NAME_LABEL)
}
