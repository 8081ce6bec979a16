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
//! - **EndpointSlices not served as v1** (servers before 1.21): when the v1 EndpointSlice
//!   informer's list answers 404 before it synced, the `discovery.k8s.io/v1beta1` informer takes
//!   its place for good (`slices_v1beta1`, set once): our handler leaves the v1 informer (stopped
//!   too when the cache owns the factory), the sync and the reads go to the v1beta1 one
//!   ([`Watch::slice_informer`]). Whoever sees the 404 first (a sync wait or `has_synced`) makes
//!   the switch; the others find it made.
//! - **Services refused**: when the Service informer's list is refused with 403 Forbidden before
//!   it synced (RBAC on EndpointSlices only), the sync stops waiting for it and `services_refused`
//!   keeps the server's message (set once, never cleared): the namespace is served from its
//!   endpoint objects alone, as with `watch_services: false`, until the Service informer syncs
//!   (it keeps backing off; RBAC may be granted later). The Service store is read only once that
//!   informer synced ([`Watch::services_synced`]).

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use tokio::sync::Notify;

use super::{DiscoveryOptions, EndpointSource, SERVICE_INDEX, SERVICE_NAME_LABEL};
use crate::informer::{HandlerFns, HandlerId, Informer, InformerFactory, InformerRequest};
use crate::model::{
    ApiResource, EndpointSlice, Endpoints, Object, ObjectMeta, PartialObjectMetadata, Pod,
    Resource, Service,
};

/// `discovery.k8s.io/v1beta1` EndpointSlices: what a server older than 1.21 serves (1.17 to
/// 1.20), read when it does not serve `v1` ([`EndpointSlice`] decodes both).
pub(crate) fn endpoint_slices_v1beta1() -> ApiResource {
    ApiResource::new(
        "discovery.k8s.io",
        "v1beta1",
        "EndpointSlice",
        "endpointslices",
        true,
    )
}

/// Builds, wires and starts the v1beta1 EndpointSlice informer of a [`Watch`].
type MakeInformer = Box<dyn Fn() -> (Informer<EndpointSlice>, HandlerId) + Send + Sync>;

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
    /// The `discovery.k8s.io/v1` EndpointSlice informer (with the EndpointSlices source).
    pub(crate) slices: Option<Informer<EndpointSlice>>,
    /// The `v1beta1` EndpointSlice informer and our handler on it, once `v1` proved not served
    /// (see the module docs).
    slices_v1beta1: OnceLock<(Informer<EndpointSlice>, HandlerId)>,
    /// Makes the `v1beta1` informer (set with the EndpointSlices source).
    make_v1beta1: Option<MakeInformer>,
    /// Stop the `v1` informer when it is not served (nobody else holds the factory).
    stop_unserved: bool,
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
    /// The server's message, once the Service informer's list was refused with 403 Forbidden
    /// before it synced: the sync stopped waiting for it (see the module docs).
    pub(crate) services_refused: OnceLock<String>,
}

impl Watch {
    /// The informers of one namespace (`None`: all) from `factory`, with `changes`' handlers
    /// registered and started on `runtime`; `created` orders it among the others.
    /// `owns_factory`: nobody else holds `factory` (an informer of a resource the server does
    /// not serve is then stopped).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new<C: Changes>(
        factory: &Arc<InformerFactory>,
        owns_factory: bool,
        o: &DiscoveryOptions,
        ns: Option<&str>,
        created: u64,
        changes: &Weak<C>,
        runtime: &tokio::runtime::Handle,
    ) -> Arc<Watch> {
        let slices = (o.source == EndpointSource::EndpointSlices).then(|| {
            let inf: Informer<EndpointSlice> = factory.informer(ns);
            index_by_service(&inf);
            inf
        });
        let make_v1beta1 = slices.is_some().then(|| {
            let (factory, ns, changes, runtime) = (
                factory.clone(),
                ns.map(str::to_owned),
                changes.clone(),
                runtime.clone(),
            );
            Box::new(move || {
                let inf = factory.informer_with(
                    InformerRequest::<EndpointSlice>::new(endpoint_slices_v1beta1())
                        .namespace(ns.as_deref()),
                );
                index_by_service(&inf);
                let id = wire_slices(&inf, &changes);
                inf.start_on(&runtime);
                (inf, id)
            }) as MakeInformer
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
            slices_v1beta1: OnceLock::new(),
            make_v1beta1,
            stop_unserved: owns_factory,
            endpoints,
            services,
            pods,
            handlers: OnceLock::new(),
            computing: AtomicBool::new(false),
            computed: AtomicBool::new(false),
            computed_notify: Notify::new(),
            services_refused: OnceLock::new(),
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
        let slices_synced = match self.slices_fallback() {
            Some((inf, id)) => inf.handler_has_synced(*id),
            None => handler_synced_now(&self.slices, ids[0]),
        };
        slices_synced
            && handler_synced_now(&self.endpoints, ids[1])
            && (handler_synced_now(&self.services, ids[2]) || self.services_given_up())
            && handler_synced_now(&self.pods, ids[3])
    }

    /// Completes once [`has_synced`](Self::has_synced) (each informer wakes its waiter; the
    /// Service informer also on each failure, to give it up on a 403).
    pub(crate) async fn synced(&self) {
        let ids = self.handlers.get().copied().unwrap_or_default();
        if let Some(v1) = &self.slices {
            // Synced, or not served (404): then the v1beta1 informer's sync is what counts.
            v1.until(|| {
                handler_synced_now(&self.slices, ids[0]) || self.slices_fallback().is_some()
            })
            .await;
            if let Some((inf, id)) = self.slices_fallback() {
                inf.handler_synced(*id).await;
            }
        }
        handler_synced(&self.endpoints, ids[1]).await;
        if let Some(inf) = &self.services {
            inf.until(|| handler_synced_now(&self.services, ids[2]) || self.services_given_up())
                .await;
        }
        handler_synced(&self.pods, ids[3]).await;
    }

    /// The EndpointSlice informer the reads go to: the `v1beta1` one once `v1` proved not
    /// served, else the `v1` one (`None` with the Endpoints source).
    pub(crate) fn slice_informer(&self) -> Option<&Informer<EndpointSlice>> {
        match self.slices_v1beta1.get() {
            Some((inf, _)) => Some(inf),
            None => self.slices.as_ref(),
        }
    }

    /// The `v1beta1` EndpointSlice informer and our handler on it, made now if the `v1` one's
    /// list was answered 404 before it synced (see the module docs); `None` while `v1` may be
    /// served, and after the namespace was forgotten.
    fn slices_fallback(&self) -> Option<&(Informer<EndpointSlice>, HandlerId)> {
        if let Some(made) = self.slices_v1beta1.get() {
            return Some(made);
        }
        let (v1, make) = (self.slices.as_ref()?, self.make_v1beta1.as_ref()?);
        // Relaxed: a forgotten namespace's flag; a switch racing its eviction at worst leaves a
        // v1beta1 informer that the eviction's `forget_namespace` of the factory stops (owned),
        // or a handler that finds the cache gone.
        if v1.has_synced()
            || v1.health().last_error_code != Some(404)
            || self.evicted.load(std::sync::atomic::Ordering::Relaxed)
        {
            return None;
        }
        Some(self.slices_v1beta1.get_or_init(|| {
            tracing::warn!(
                "the server does not serve discovery.k8s.io/v1 EndpointSlices (before 1.21): \
                 reading discovery.k8s.io/v1beta1"
            );
            let id = self.handlers.get().and_then(|ids| ids[0]);
            if let Some(id) = id {
                v1.remove_handler(id);
            }
            if self.stop_unserved {
                drop(v1.stop());
            }
            let (inf, id) = make();
            self.on_evict(&inf, id);
            (inf, id)
        }))
    }

    /// Whether the sync no longer waits for the Service informer: its list was refused with 403
    /// Forbidden before it synced (now, or earlier: giving up is for good, and records the
    /// server's message in `services_refused`).
    fn services_given_up(&self) -> bool {
        if self.services_refused.get().is_some() {
            return true;
        }
        let Some(inf) = &self.services else {
            return false;
        };
        let health = inf.health();
        if inf.has_synced() || health.last_error_code != Some(403) {
            return false;
        }
        let message = health.last_error.unwrap_or_default();
        if self.services_refused.set(message.clone()).is_ok() {
            tracing::warn!(
                error = %message,
                "listing Services is forbidden: discovery serves from the endpoint objects alone \
                 (as with watch_services: false) until it is allowed"
            );
        }
        true
    }

    /// Completes once our handler on the Service informer was handed its initial list (at once
    /// without a Service informer).
    pub(crate) async fn services_handler_synced(&self) {
        let ids = self.handlers.get().copied().unwrap_or_default();
        handler_synced(&self.services, ids[2]).await;
    }

    /// Whether the Service informer synced: only then is its store read (a refused one leaves
    /// discovery on the endpoint objects alone).
    pub(crate) fn services_synced(&self) -> bool {
        self.services.as_ref().is_some_and(|i| i.has_synced())
    }

    /// The server's message while Services are refused (403) and not synced: discovery serves
    /// this namespace from its endpoint objects alone.
    pub(crate) fn services_forbidden(&self) -> Option<&str> {
        if self.services_synced() {
            return None;
        }
        self.services_refused.get().map(String::as_str)
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
        let id = wire_slices(inf, changes);
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

/// Indexes an EndpointSlice store by Service ([`SERVICE_INDEX`]). Already there when the factory
/// is shared with another ServiceDiscovery: same function.
fn index_by_service(inf: &Informer<EndpointSlice>) {
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
}

/// Registers the handler that reports slice changes to `changes` on `inf`.
fn wire_slices<C: Changes>(inf: &Informer<EndpointSlice>, changes: &Weak<C>) -> HandlerId {
    let (a, u, d) = (changes.clone(), changes.clone(), changes.clone());
    inf.add_handler(
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
    )
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
