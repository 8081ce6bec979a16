//! A Service port's snapshot computed from its endpoint objects: whichever way they were read
//! (the informers' stores, or one cache-miss read of the apiserver), [`compute`] applies the merge
//! rules ([`merge`](super::merge)) and [`snapshot`] stamps the result. Pure functions: no locks, no
//! I/O.

use std::sync::Arc;

use super::merge::{self, MergeContext, Merged, ObservedSlice};
use super::snapshot::{Freshness, ServiceState, Snapshot};
use crate::model::{Endpoints, ObjectReference};

/// The endpoint objects of one Service.
pub(crate) enum Source {
    Slices(Vec<ObservedSlice>),
    Endpoints(Option<Arc<Endpoints>>),
}

impl Source {
    /// `namespace/name` of every Pod an endpoint targets.
    pub(crate) fn target_pods(&self, ns: &str) -> Vec<String> {
        let refs: Vec<&ObjectReference> = match self {
            Source::Slices(slices) => slices
                .iter()
                .flat_map(|s| s.slice.endpoints.iter())
                .filter_map(|e| e.target_ref.as_ref())
                .collect(),
            Source::Endpoints(e) => e
                .iter()
                .flat_map(|e| e.subsets.iter())
                .flat_map(|s| s.addresses.iter().chain(s.not_ready_addresses.iter()))
                .filter_map(|a| a.target_ref.as_ref())
                .collect(),
        };
        refs.into_iter()
            .filter(|r| (r.kind.is_empty() || r.kind == "Pod") && !r.name.is_empty())
            .map(|r| {
                let pns = if r.namespace.is_empty() {
                    ns
                } else {
                    &r.namespace
                };
                format!("{pns}/{}", r.name)
            })
            .collect()
    }
}

/// The snapshot content for one port. `service_exists` is `None` when Services are not watched:
/// then a Service without any slice (or Endpoints object) counts as absent, since the controllers
/// keep one for every Service.
pub(crate) fn compute(
    source: &Source,
    service_exists: Option<bool>,
    ctx: &MergeContext<'_>,
) -> Merged {
    let absent = match (service_exists, source) {
        (Some(exists), _) => !exists,
        (None, Source::Slices(s)) => s.is_empty(),
        (None, Source::Endpoints(e)) => e.is_none(),
    };
    if absent {
        return Merged {
            state: ServiceState::ServiceAbsent,
            instances: Vec::new(),
            terminating_fallback: false,
            topology: Default::default(),
            truncated: false,
        };
    }
    match source {
        Source::Slices(slices) => merge::from_slices(slices, ctx),
        Source::Endpoints(Some(e)) => merge::from_endpoints(e, ctx),
        Source::Endpoints(None) => merge::from_slices(&[], ctx),
    }
}

/// The snapshot of a Service port from its computed content.
pub(crate) fn snapshot(
    ns: &str,
    service: &str,
    port: &str,
    revision: u64,
    m: Merged,
    freshness: Freshness,
) -> Snapshot {
    Snapshot {
        namespace: ns.to_owned(),
        service: service.to_owned(),
        port_name: port.to_owned(),
        revision,
        state: m.state,
        instances: m.instances,
        terminating_fallback: m.terminating_fallback,
        topology: m.topology,
        truncated: m.truncated,
        freshness,
    }
}
