//! One Service across the ports shown: the snapshots of several Service ports read as one view.

use std::sync::Arc;

use super::{Instance, ServiceDiscovery, ServiceState, Snapshot};
use crate::model::Service;

/// A Service's endpoints over one or more of its ports, at one revision: what `kwatch instances`
/// prints.
///
/// ```
/// use std::sync::Arc;
/// use informer::discovery::{ServiceState, ServiceView, Snapshot};
/// let view = ServiceView::of("default/web".into(), &[]);
/// assert_eq!(view.state, ServiceState::NotSynced);
/// assert_eq!(view.ready(), 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceView {
    /// `namespace/name`.
    pub service: String,
    /// The newest of the ports' snapshot revisions (discovery numbers the revisions of a Service
    /// across its ports).
    pub revision: u64,
    /// The most telling state of the ports' (see [`of`](Self::of)).
    pub state: ServiceState,
    /// Every endpoint once, in the snapshots' order.
    pub instances: Vec<Instance>,
}

impl ServiceView {
    /// The view of one Service from the snapshots of the ports shown.
    ///
    /// With one port this is that snapshot. With several, the state is the most telling one
    /// (`NotSynced` if any port is, or if there is no snapshot, else `Ready` if any is, else
    /// `ServiceAbsent` or `NoEndpoints`) and the instances are the snapshots' lists side by side,
    /// in their order, an `(address, port)` that two Service ports share (same target port) shown
    /// once.
    pub fn of(service: String, snapshots: &[Arc<Snapshot>]) -> ServiceView {
        let revision = snapshots.iter().map(|s| s.revision).max().unwrap_or(0);
        let has = |state| snapshots.iter().any(|s| s.state == state);
        let state = if snapshots.is_empty() || has(ServiceState::NotSynced) {
            ServiceState::NotSynced
        } else if has(ServiceState::Ready) {
            ServiceState::Ready
        } else if has(ServiceState::ServiceAbsent) {
            ServiceState::ServiceAbsent
        } else {
            ServiceState::NoEndpoints
        };
        let mut instances: Vec<&Instance> =
            snapshots.iter().flat_map(|s| s.instances.iter()).collect();
        if snapshots.len() > 1 {
            // Each list is sorted by key already; this only interleaves them and drops repeats.
            instances.sort_by_key(|i| i.key());
            instances.dedup_by_key(|i| i.key());
        }
        ServiceView {
            service,
            revision,
            state,
            instances: instances.into_iter().cloned().collect(),
        }
    }

    /// How many instances are ready.
    pub fn ready(&self) -> usize {
        self.instances.iter().filter(|i| i.ready).count()
    }
}

/// The Service port names to show: `requested` if given; else every port of the Service (one for
/// a single-port Service, `""` if it is unnamed); `[""]` when the Service is not known.
///
/// ```
/// use informer::discovery::port_names;
/// assert_eq!(port_names(None, None), [""]);
/// assert_eq!(port_names(None, Some("http")), ["http"]);
/// ```
pub fn port_names(service: Option<&Service>, requested: Option<&str>) -> Vec<String> {
    if let Some(name) = requested {
        return vec![name.to_owned()];
    }
    let mut names: Vec<String> = service
        .map(|s| {
            s.spec
                .ports
                .iter()
                .map(|p| p.name.clone().unwrap_or_default())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.dedup();
    if names.is_empty() {
        names.push(String::new());
    }
    names
}

impl ServiceDiscovery {
    /// The Service `namespace/name` over the given ports (see [`port_names`]), from the current
    /// snapshots.
    ///
    /// ```no_run
    /// # fn demo(d: informer::discovery::ServiceDiscovery) {
    /// let view = d.service_view("default", "web", &["http".into(), "grpc".into()]);
    /// println!("{}: {} of {} ready", view.service, view.ready(), view.instances.len());
    /// # }
    /// ```
    pub fn service_view(&self, namespace: &str, name: &str, ports: &[String]) -> ServiceView {
        let snapshots: Vec<Arc<Snapshot>> = ports
            .iter()
            .map(|p| self.instances(namespace, name, p))
            .collect();
        ServiceView::of(format!("{namespace}/{name}"), &snapshots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::Freshness;
    use crate::model::{ServicePort, ServiceSpec};

    fn service(ports: &[Option<&str>]) -> Service {
        Service {
            spec: ServiceSpec {
                ports: ports
                    .iter()
                    .map(|n| ServicePort {
                        name: n.map(str::to_owned),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn snapshot(
        port: &str,
        revision: u64,
        state: ServiceState,
        addrs: &[(&str, u16)],
    ) -> Arc<Snapshot> {
        let mut s = Snapshot::not_synced("ns", "svc", port);
        s.revision = revision;
        s.state = state;
        s.freshness = Freshness::Live;
        s.instances = addrs
            .iter()
            .map(|(a, p)| Instance::new(a.parse().unwrap(), *p))
            .collect();
        Arc::new(s)
    }

    #[test]
    fn which_ports_are_shown() {
        let one_unnamed = service(&[None]);
        let one_named = service(&[Some("grpc")]);
        let two = service(&[Some("http"), Some("admin")]);
        assert_eq!(port_names(Some(&one_unnamed), None), [""]);
        assert_eq!(port_names(Some(&one_named), None), ["grpc"]);
        assert_eq!(port_names(Some(&two), None), ["admin", "http"]);
        assert_eq!(port_names(Some(&two), Some("http")), ["http"]);
        assert_eq!(port_names(None, None), [""]);
        assert_eq!(port_names(None, Some("http")), ["http"]);
    }

    #[test]
    fn one_port_is_the_library_snapshot_as_is() {
        let s = snapshot(
            "http",
            4,
            ServiceState::Ready,
            &[("10.0.0.9", 80), ("10.0.0.10", 80)],
        );
        let v = ServiceView::of("ns/svc".into(), std::slice::from_ref(&s));
        assert_eq!((v.revision, v.state), (4, ServiceState::Ready));
        assert_eq!(v.instances, s.instances);
    }

    #[test]
    fn several_ports_each_endpoint_once_per_target_port() {
        let http = snapshot(
            "http",
            3,
            ServiceState::Ready,
            &[("10.0.0.1", 8080), ("10.0.0.2", 8080)],
        );
        // A second Service port on the same target port, and one on another.
        let alt = snapshot("alt", 5, ServiceState::Ready, &[("10.0.0.1", 8080)]);
        let admin = snapshot("admin", 2, ServiceState::NoEndpoints, &[("10.0.0.1", 9090)]);
        let v = ServiceView::of("ns/svc".into(), &[admin, alt, http]);
        assert_eq!((v.revision, v.state), (5, ServiceState::Ready));
        let keys: Vec<(String, u16)> = v
            .instances
            .iter()
            .map(|i| (i.address.to_string(), i.port))
            .collect();
        assert_eq!(
            keys,
            [
                ("10.0.0.1".into(), 8080),
                ("10.0.0.1".into(), 9090),
                ("10.0.0.2".into(), 8080)
            ]
        );
        let absent = snapshot("", 0, ServiceState::NotSynced, &[]);
        let ready = snapshot("http", 1, ServiceState::Ready, &[]);
        assert_eq!(
            ServiceView::of("ns/svc".into(), &[absent, ready]).state,
            ServiceState::NotSynced
        );
    }
}
