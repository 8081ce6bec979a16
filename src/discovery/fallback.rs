//! The cache-miss path: before the informers synced, read a Service's endpoint objects from the
//! apiserver, single-flight per Service and rate-limited.
//!
//! Per Service there is at most one request in flight; callers arriving meanwhile wait for its
//! result. A result (success or failure) is reused for
//! [`fetch_min_interval`](super::DiscoveryOptions::fetch_min_interval), and a semaphore bounds the
//! requests in flight over all Services. A thousand callers on a cold cache therefore make one
//! request, not a thousand (Dubbo's `getInstances` fallback without the thundering herd).
//!
//! It sits on top of the cache: it reads a Service port's cell ([`Cache::cell`]) and computes a
//! snapshot of its own from what it fetched ([`compute`]); the cache knows nothing of it. Its
//! state ([`Fetches`]: the single-flight slots, the semaphore, its counters) belongs to the
//! `ServiceDiscovery`.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use tokio::sync::{Semaphore, watch};

use super::cache::{Cache, ServiceKey};
use super::compute::{Source, compute, snapshot};
use super::merge::{MergeContext, ObservedSlice};
use super::{EndpointSource, Freshness, SERVICE_NAME_LABEL, ServiceState, Snapshot};
use crate::client::{Api, ListParams};
use crate::model::{EndpointSlice, Endpoints, Service};

/// The cache-miss read failed (and no stale snapshot could stand in). Shared by every caller that
/// waited on the same request.
///
/// ```
/// let e = informer::discovery::FetchError::new(informer::Error::Timeout("list".into()));
/// assert!(e.to_string().contains("list"));
/// ```
#[derive(Clone, Debug)]
pub struct FetchError(pub Arc<crate::Error>);

impl FetchError {
    /// Wraps a client error.
    ///
    /// ```
    /// let e = informer::discovery::FetchError::new(informer::Error::Config("x".into()));
    /// # let _ = e;
    /// ```
    pub fn new(e: crate::Error) -> FetchError {
        FetchError(Arc::new(e))
    }
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "discovery fallback read: {}", self.0)
    }
}

impl std::error::Error for FetchError {}

/// What one read brought back.
struct Fetched {
    at: SystemTime,
    source: Source,
    /// `Some(exists)` when the read established whether the Service exists.
    service: Option<Option<Service>>,
}

type FetchResult = Result<Arc<Fetched>, FetchError>;

#[derive(Default)]
struct FetchSlot {
    last: Option<(Instant, FetchResult)>,
    in_flight: Option<watch::Receiver<Option<FetchResult>>>,
}

/// Single-flight state of every Service, and the counters of the cache-miss path.
pub(crate) struct Fetches {
    slots: Mutex<HashMap<ServiceKey, FetchSlot>>,
    limit: Semaphore,
    /// HTTP requests made.
    apiserver_reads: AtomicU64,
    /// Calls answered without a request of their own.
    fetches_shared: AtomicU64,
}

impl Fetches {
    pub(crate) fn new(max_in_flight: usize) -> Fetches {
        Fetches {
            slots: Mutex::new(HashMap::new()),
            limit: Semaphore::new(max_in_flight.max(1)),
            apiserver_reads: AtomicU64::new(0),
            fetches_shared: AtomicU64::new(0),
        }
    }

    /// `(apiserver_reads, fetches_shared)`.
    pub(crate) fn counts(&self) -> (u64, u64) {
        // Relaxed: counters read for display; they publish no other memory.
        (
            self.apiserver_reads.load(Ordering::Relaxed),
            self.fetches_shared.load(Ordering::Relaxed),
        )
    }
}

enum Role {
    Done(FetchResult),
    Wait(watch::Receiver<Option<FetchResult>>),
    Lead(watch::Sender<Option<FetchResult>>),
}

/// The snapshot of a Service port: the cell's if it is live, else one computed from a read of the
/// apiserver (shared, rate-limited), else a stale one if the read failed and there is one.
pub(crate) async fn instances_or_fetch(
    cache: &Cache,
    fetches: &Fetches,
    namespace: &str,
    service: &str,
    port: &str,
) -> Result<Arc<Snapshot>, FetchError> {
    let cell = cache.cell(namespace, service, port);
    let current = cell.current();
    if is_live(&current) {
        return Ok(current);
    }
    let key: ServiceKey = (namespace.to_owned(), service.to_owned());
    let fetched = loop {
        let role = {
            let mut slots = fetches.slots.lock().unwrap_or_else(PoisonError::into_inner);
            let slot = slots.entry(key.clone()).or_default();
            match (&slot.last, &slot.in_flight) {
                (Some((t, r)), _) if t.elapsed() < cache.options.fetch_min_interval => {
                    Role::Done(r.clone())
                }
                (_, Some(rx)) => Role::Wait(rx.clone()),
                _ => {
                    let (tx, rx) = watch::channel(None);
                    slot.in_flight = Some(rx);
                    Role::Lead(tx)
                }
            }
        };
        match role {
            Role::Done(r) => {
                // Relaxed: a counter read for display; it publishes no other memory.
                fetches.fetches_shared.fetch_add(1, Ordering::Relaxed);
                break r;
            }
            Role::Wait(mut rx) => {
                // Relaxed: a counter read for display; it publishes no other memory.
                fetches.fetches_shared.fetch_add(1, Ordering::Relaxed);
                let waited = rx.wait_for(|r| r.is_some()).await.map(|r| r.clone());
                match waited {
                    Ok(r) => break r.expect("waited for Some"),
                    Err(_) => {
                        // The leader was cancelled: clear its slot and try again.
                        let mut slots =
                            fetches.slots.lock().unwrap_or_else(PoisonError::into_inner);
                        if let Some(slot) = slots.get_mut(&key) {
                            if slot.in_flight.as_ref().is_some_and(|r| r.same_channel(&rx)) {
                                slot.in_flight = None;
                            }
                        }
                    }
                }
            }
            Role::Lead(tx) => {
                let r = {
                    let _permit = fetches.limit.acquire().await.expect("never closed");
                    fetch(cache, &fetches.apiserver_reads, namespace, service).await
                };
                let mut slots = fetches.slots.lock().unwrap_or_else(PoisonError::into_inner);
                let slot = slots.entry(key.clone()).or_default();
                slot.last = Some((Instant::now(), r.clone()));
                slot.in_flight = None;
                tx.send_replace(Some(r.clone()));
                break r;
            }
        }
    };
    // The informers may have synced meanwhile.
    let current = cell.current();
    if is_live(&current) {
        return Ok(current);
    }
    match fetched {
        Ok(f) => {
            let ctx = MergeContext {
                options: &cache.options,
                namespace,
                port_name: port,
                service: f.service.as_ref().and_then(|s| s.as_ref()),
                pod: &|_: &str, _: &str| None,
            };
            let merged = compute(&f.source, f.service.as_ref().map(|s| s.is_some()), &ctx);
            Ok(Arc::new(snapshot(
                namespace,
                service,
                port,
                0,
                merged,
                Freshness::Fetched { at: f.at },
            )))
        }
        Err(_) if matches!(current.freshness, Freshness::Stale { .. }) => Ok(current),
        Err(e) => Err(e),
    }
}

fn is_live(s: &Snapshot) -> bool {
    s.freshness == Freshness::Live && s.state != ServiceState::NotSynced
}

/// One read: the Service's slices (or Endpoints object); the Service itself only when watching
/// Services and no slice says it exists.
async fn fetch(cache: &Cache, reads: &AtomicU64, namespace: &str, service: &str) -> FetchResult {
    let client = cache.client.clone();
    let at = SystemTime::now();
    let source = match cache.options.source {
        EndpointSource::EndpointSlices => {
            let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
            let params = ListParams::default().labels(&format!("{SERVICE_NAME_LABEL}={service}"));
            // Relaxed: a counter read for display; it publishes no other memory.
            reads.fetch_add(1, Ordering::Relaxed);
            let list = match api.list(&params).await {
                // Not served as v1 (servers before 1.21): v1beta1, as the informers do.
                Err(e) if e.http_code() == Some(404) => {
                    // Relaxed: a counter read for display; it publishes no other memory.
                    reads.fetch_add(1, Ordering::Relaxed);
                    let beta = super::informers::endpoint_slices_v1beta1();
                    Api::<EndpointSlice>::namespaced_with(client.clone(), namespace, beta)
                        .list(&params)
                        .await
                }
                list => list,
            }
            .map_err(FetchError::new)?;
            Source::Slices(
                list.items
                    .into_iter()
                    .map(|s| ObservedSlice {
                        slice: Arc::new(s),
                        seq: 0,
                    })
                    .collect(),
            )
        }
        EndpointSource::Endpoints => {
            let api: Api<Endpoints> = Api::namespaced(client.clone(), namespace);
            // Relaxed: a counter read for display; it publishes no other memory.
            reads.fetch_add(1, Ordering::Relaxed);
            Source::Endpoints(not_found_as_none(api.get(service).await)?.map(Arc::new))
        }
    };
    let has_objects = match &source {
        Source::Slices(s) => !s.is_empty(),
        Source::Endpoints(e) => e.is_some(),
    };
    let service = if cache.options.watch_services && !has_objects {
        let api: Api<Service> = Api::namespaced(client, namespace);
        // Relaxed: a counter read for display; it publishes no other memory.
        reads.fetch_add(1, Ordering::Relaxed);
        match api.get(service).await {
            // Refused (RBAC on EndpointSlices only): unknown, as with `watch_services: false`,
            // like the informers' degraded mode (`DiscoveryMetrics::services_forbidden`).
            Err(e) if e.http_code() == Some(403) => None,
            read => Some(not_found_as_none(read)?),
        }
    } else {
        None
    };
    Ok(Arc::new(Fetched {
        at,
        source,
        service,
    }))
}

fn not_found_as_none<T>(r: crate::Result<T>) -> Result<Option<T>, FetchError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(crate::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(e) => Err(FetchError::new(e)),
    }
}
