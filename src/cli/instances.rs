//! `kwatch instances SERVICE`: the endpoints of a service, every unique (address, port) once with
//! its conditions, computed from informer-backed EndpointSlices; with `-w`, a new snapshot each
//! time it changes.
//!
//! [`compute`] is the whole discovery rule, shared with the demo: slices belong to a service
//! through the `kubernetes.io/service-name` label; an endpoint that sits in two slices while the
//! controller moves it is reported once, ready if either copy is.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use informer::reflector::ReflectorOptions;
use informer::{Api, EndpointSlice, HandlerFns, Informer, Object, Service};
use serde::Serialize;

use super::args::{Format, Global, InstancesArgs};
use super::output::Out;
use super::{CliResult, connect};

/// The label that ties an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// What a snapshot says about its service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum State {
    /// The informers have not finished their first list.
    NotSynced,
    /// No such Service.
    ServiceAbsent,
    /// The Service exists and has no endpoints.
    NoEndpoints,
    /// The Service has endpoints (ready or not: see each instance).
    Ready,
}

/// One endpoint address and port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Instance {
    pub address: String,
    pub port: i32,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    pub zone: Option<String>,
    pub node: Option<String>,
    /// `namespace/name` of the Pod behind the endpoint.
    pub pod: Option<String>,
}

/// A service's endpoints at one moment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Snapshot {
    /// `namespace/name`.
    pub service: String,
    /// Bumped each time the state or the instances change.
    pub revision: u64,
    pub state: State,
    pub instances: Vec<Instance>,
}

/// The instances of one service from its slices, sorted by address and port. `port` keeps only
/// the slice port of that name; without it every port of every slice counts.
pub fn compute(slices: &[Arc<EndpointSlice>], port: Option<&str>) -> Vec<Instance> {
    // Keyed by the parsed address so that 10.0.0.9 sorts before 10.0.0.10.
    let mut unique: BTreeMap<(AddressKey, i32), Instance> = BTreeMap::new();
    for slice in slices {
        let ports: Vec<i32> = slice
            .ports
            .iter()
            .filter(|p| port.is_none_or(|want| p.name.as_deref() == Some(want)))
            .filter_map(|p| p.port)
            .collect();
        for endpoint in &slice.endpoints {
            let c = &endpoint.conditions;
            // The API's defaults: ready and serving unless said otherwise.
            let ready = c.ready.unwrap_or(true);
            let serving = c.serving.unwrap_or(ready);
            let terminating = c.terminating.unwrap_or(false);
            for address in &endpoint.addresses {
                for &p in &ports {
                    let instance = Instance {
                        address: address.clone(),
                        port: p,
                        ready,
                        serving,
                        terminating,
                        zone: endpoint.zone.clone(),
                        node: endpoint.node_name.clone(),
                        pod: endpoint
                            .target_ref
                            .as_ref()
                            .filter(|r| r.kind == "Pod" || r.kind.is_empty())
                            .map(|r| format!("{}/{}", r.namespace, r.name)),
                    };
                    unique
                        .entry((AddressKey::of(address), p))
                        .and_modify(|seen| {
                            seen.ready |= instance.ready;
                            seen.serving |= instance.serving;
                            seen.terminating &= instance.terminating;
                        })
                        .or_insert(instance);
                }
            }
        }
    }
    unique.into_values().collect()
}

/// Sorts IP addresses numerically (IPv4 first), anything else after them as text.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum AddressKey {
    Ip(std::net::IpAddr),
    Other(String),
}

impl AddressKey {
    fn of(address: &str) -> AddressKey {
        address
            .parse()
            .map(AddressKey::Ip)
            .unwrap_or_else(|_| AddressKey::Other(address.to_owned()))
    }
}

/// The state that goes with a service's presence and its instances.
pub fn state_of(synced: bool, service_present: bool, instances: &[Instance]) -> State {
    match (synced, service_present, instances.is_empty()) {
        (false, _, _) => State::NotSynced,
        (true, false, _) => State::ServiceAbsent,
        (true, true, true) => State::NoEndpoints,
        (true, true, false) => State::Ready,
    }
}

/// Informers for one service and its slices, and the snapshots they produce.
struct Watcher {
    key: String,
    services: Informer<Service>,
    slices: Informer<EndpointSlice>,
    port: Option<String>,
    last: Option<Snapshot>,
}

impl Watcher {
    /// The current snapshot, with a revision bumped if it differs from the last one.
    fn snapshot(&mut self) -> (Snapshot, bool) {
        let synced = self.services.has_synced() && self.slices.has_synced();
        let present = !self.services.store().is_empty();
        let slices = self.slices.store().list();
        let instances = if synced {
            compute(&slices, self.port.as_deref())
        } else {
            Vec::new()
        };
        let state = state_of(synced, present, &instances);
        if state == State::NotSynced {
            let snap = Snapshot {
                service: self.key.clone(),
                revision: 0,
                state,
                instances,
            };
            return (snap, false);
        }
        let (revision, changed) = match &self.last {
            Some(l) if l.state == state && l.instances == instances => (l.revision, false),
            Some(l) => (l.revision + 1, true),
            None => (1, true),
        };
        let snap = Snapshot {
            service: self.key.clone(),
            revision,
            state,
            instances,
        };
        self.last = Some(snap.clone());
        (snap, changed)
    }
}

pub async fn run(global: &Global, args: InstancesArgs) -> CliResult {
    let (client, namespace) = connect::connect(global).await?;
    connect::probe(&client).await?;
    let (namespace, name) = match args.service.split_once('/') {
        Some((ns, n)) => (ns.to_owned(), n.to_owned()),
        None => (
            namespace.unwrap_or_else(|| client.default_namespace().to_owned()),
            args.service.clone(),
        ),
    };
    let errors = connect::ErrorCollector::default();
    let service_options = ReflectorOptions {
        field_selector: Some(format!("metadata.name={name}")),
        on_error: Some(errors.callback()),
        ..connect::reflector_options()
    };
    let slice_options = ReflectorOptions {
        label_selector: Some(format!("{SERVICE_NAME_LABEL}={name}")),
        on_error: Some(errors.callback()),
        ..connect::reflector_options()
    };
    let services = Informer::new(
        Api::<Service>::namespaced(client.clone(), &namespace),
        service_options,
    );
    let slices = Informer::new(
        Api::<EndpointSlice>::namespaced(client, &namespace),
        slice_options,
    );
    let changed = Arc::new(tokio::sync::Notify::new());
    notify_on_change(&services, &changed);
    notify_on_change(&slices, &changed);
    services.start();
    slices.start();
    let mut watcher = Watcher {
        key: format!("{namespace}/{name}"),
        services,
        slices,
        port: args.port.clone(),
        last: None,
    };
    let deadline = tokio::time::Instant::now() + connect::SYNC_TIMEOUT;
    let mut out = Out::stdout();
    loop {
        let (snap, changed_now) = watcher.snapshot();
        if snap.state != State::NotSynced {
            if changed_now || !args.watch {
                print_snapshot(&mut out, &snap, args.output)?;
                out.flush()?;
            }
            if !args.watch {
                return Ok(());
            }
        } else if tokio::time::Instant::now() > deadline {
            return Err(errors.sync_failure(&format!("service {}", watcher.key)));
        }
        tokio::select! {
            _ = changed.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
    }
}

/// Wakes `notify` on every notification of `informer`.
fn notify_on_change<T: Object + Clone>(informer: &Informer<T>, notify: &Arc<tokio::sync::Notify>) {
    let (a, u, d) = (notify.clone(), notify.clone(), notify.clone());
    informer.add_handler(
        HandlerFns::new()
            .on_add(move |_: &Arc<T>, _| a.notify_one())
            .on_update(move |_, _| u.notify_one())
            .on_delete(move |_| d.notify_one()),
    );
}

fn print_snapshot(out: &mut Out, snap: &Snapshot, format: Format) -> CliResult {
    match format {
        Format::Jsonl => out.json_line(snap),
        _ => {
            out.line(&format!(
                "{}  revision {}  {:?}  {} instance(s)",
                snap.service,
                snap.revision,
                snap.state,
                snap.instances.len()
            ))?;
            if !snap.instances.is_empty() {
                let rows: Vec<Vec<String>> = snap
                    .instances
                    .iter()
                    .map(|i| {
                        vec![
                            i.address.clone(),
                            i.port.to_string(),
                            i.ready.to_string(),
                            i.serving.to_string(),
                            i.terminating.to_string(),
                            i.zone.clone().unwrap_or_default(),
                            i.node.clone().unwrap_or_default(),
                            i.pod.clone().unwrap_or_default(),
                        ]
                    })
                    .collect();
                out.table(
                    &[
                        "ADDRESS",
                        "PORT",
                        "READY",
                        "SERVING",
                        "TERMINATING",
                        "ZONE",
                        "NODE",
                        "POD",
                    ],
                    &rows,
                )?;
            }
            Ok(())
        }
    }
}

/// Keys of slices by service, for a store index: `namespace/service`.
pub fn service_index(slice: &EndpointSlice) -> Vec<String> {
    slice
        .metadata
        .labels
        .get(SERVICE_NAME_LABEL)
        .map(|s| vec![format!("{}/{s}", slice.meta().namespace)])
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use informer::{Endpoint, EndpointConditions, EndpointPort};

    fn slice(name: &str, endpoints: &[(&str, bool)]) -> Arc<EndpointSlice> {
        let mut s = EndpointSlice::default();
        s.metadata.name = name.into();
        s.ports = vec![EndpointPort {
            name: Some("http".into()),
            port: Some(8080),
            ..Default::default()
        }];
        s.endpoints = endpoints
            .iter()
            .map(|(ip, ready)| Endpoint {
                addresses: vec![ip.to_string()],
                conditions: EndpointConditions {
                    ready: Some(*ready),
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect();
        Arc::new(s)
    }

    #[test]
    fn an_endpoint_in_two_slices_counts_once() {
        let a = slice("a", &[("10.0.0.1", false), ("10.0.0.2", true)]);
        let b = slice("b", &[("10.0.0.1", true)]);
        let got = compute(&[a, b], None);
        assert_eq!(got.len(), 2);
        assert!(got[0].ready, "ready if either copy is");
        assert!(compute(&[slice("c", &[("1.1.1.1", true)])], Some("grpc")).is_empty());
    }

    #[test]
    fn states() {
        assert_eq!(state_of(false, true, &[]), State::NotSynced);
        assert_eq!(state_of(true, false, &[]), State::ServiceAbsent);
        assert_eq!(state_of(true, true, &[]), State::NoEndpoints);
    }
}
