//! `kwatch instances SERVICE`: what the library's discovery ([`informer::discovery`]) says about a
//! Service, every unique endpoint once with its conditions; with `-w`, a new line each time its
//! [`Subscription`] reports a change.
//!
//! kwatch does not merge slices itself: every instance, condition, state and revision printed here
//! is the library's [`Snapshot`], read with [`Discovery::instances`] and followed with
//! [`Discovery::subscribe`]. Discovery runs with
//! [`include_not_ready`](informer::discovery::DiscoveryOptions::include_not_ready) on, so endpoints
//! that are not ready are listed too (flagged `ready: false`); the state is the library's: `Ready`
//! when at least one instance is usable.
//!
//! Which Service ports: `--port NAME` picks one (`--port ""` the unnamed one). Without it, the
//! Service's own ports decide ([`port_names`]): a single-port Service shows that port (named or
//! not), a multi-port Service shows every port, each endpoint once per target port number. A
//! Service that does not exist (yet) is looked up on its unnamed port, which says `ServiceAbsent`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use informer::discovery::{
    Discovery, DiscoveryOptions, Instance, ServiceState, Snapshot, Subscription,
};
use informer::informer::InformerFactory;
use informer::reflector::ReflectorOptions;
use informer::{HandlerFns, Service};
use serde::Serialize;
use tokio::sync::Notify;

use super::args::{Format, Global, InstancesArgs};
use super::output::Out;
use super::{CliResult, connect};

/// The options kwatch gives discovery (here and in the demo): everything the library's defaults
/// say, plus not-ready endpoints, since kwatch shows every endpoint with its conditions.
pub fn discovery_options() -> DiscoveryOptions {
    DiscoveryOptions {
        include_not_ready: true,
        ..Default::default()
    }
}

/// One endpoint as kwatch prints it: the library's [`Instance`], trimmed to the issue's fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    pub address: IpAddr,
    pub port: u16,
    pub ready: bool,
    pub serving: bool,
    pub terminating: bool,
    pub zone: Option<String>,
    pub node: Option<String>,
    /// `namespace/name` of the Pod behind the endpoint.
    pub pod: Option<String>,
}

impl From<&Instance> for Row {
    fn from(i: &Instance) -> Row {
        Row {
            address: i.address,
            port: i.port,
            ready: i.ready,
            serving: i.serving,
            terminating: i.terminating,
            zone: i.zone.clone(),
            node: i.node.clone(),
            pod: i.pod.clone(),
        }
    }
}

/// A Service's endpoints at one revision, as printed (the `-o jsonl` line).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct View {
    /// `namespace/name`.
    pub service: String,
    /// The library's revision: the newest of the shown ports' snapshots (discovery numbers the
    /// revisions of a Service across its ports).
    pub revision: u64,
    pub state: ServiceState,
    pub instances: Vec<Row>,
}

impl View {
    /// The view of one Service from the library's snapshots of the ports shown (at least one).
    ///
    /// With one port this is that snapshot. With several, the state is the most telling one
    /// (`NotSynced` if any port is, else `Ready` if any is, else `ServiceAbsent` or
    /// `NoEndpoints`) and the instances are the snapshots' lists side by side, in the library's
    /// order, an `(address, port)` that two Service ports share (same target port) shown once.
    pub fn of(service: String, snapshots: &[Arc<Snapshot>]) -> View {
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
        View {
            service,
            revision,
            state,
            instances: instances.into_iter().map(Row::from).collect(),
        }
    }

    pub fn ready(&self) -> usize {
        self.instances.iter().filter(|i| i.ready).count()
    }
}

/// The Service port names to show: `requested` if given; else every port of the Service (one for
/// a single-port Service, `""` if it is unnamed); `""` when the Service is not known.
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

/// The current view of a Service from discovery (reads only the caches).
pub fn lookup(discovery: &Discovery, namespace: &str, name: &str, ports: &[String]) -> View {
    let snapshots: Vec<Arc<Snapshot>> = ports
        .iter()
        .map(|p| discovery.instances(namespace, name, p))
        .collect();
    View::of(format!("{namespace}/{name}"), &snapshots)
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
    // One factory for discovery and for the Service informer read here: discovery's own Service
    // informer of the namespace, not a second watch.
    let factory = Arc::new(InformerFactory::with_options(
        client.clone(),
        ReflectorOptions {
            on_error: Some(errors.callback()),
            ..connect::reflector_options()
        },
    ));
    let discovery = Discovery::with_factory(client, factory.clone(), discovery_options());
    let what = format!("service {namespace}/{name}");
    errors
        .wait_for_sync(
            discovery.wait_for_sync(&namespace, connect::SYNC_TIMEOUT),
            &what,
        )
        .await?;
    let services = factory.informer::<Service>(Some(&namespace));
    let ports_now = || {
        let service = services.store().get(&namespace, &name);
        port_names(service.as_deref(), args.port.as_deref())
    };
    let mut out = Out::stdout();
    if !args.watch {
        let view = lookup(&discovery, &namespace, &name, &ports_now());
        print_view(&mut out, &view, args.output)?;
        return out.flush();
    }

    // -w: one subscription per shown port, each waking the printer on the library's changes;
    // changes of the Service itself (its ports) wake it too.
    let wake = Arc::new(Notify::new());
    {
        let (a, u, d) = (wake.clone(), wake.clone(), wake.clone());
        let (n1, n2, n3) = (name.clone(), name.clone(), name.clone());
        services.add_handler(
            HandlerFns::new()
                .on_add(move |s: &Arc<Service>, _| {
                    if s.metadata.name == n1 {
                        a.notify_one();
                    }
                })
                .on_update(move |_, s: &Arc<Service>| {
                    if s.metadata.name == n2 {
                        u.notify_one();
                    }
                })
                .on_delete(move |s| {
                    if s.object().metadata.name == n3 {
                        d.notify_one();
                    }
                }),
        );
    }
    let mut followers: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
    let mut last: Option<View> = None;
    let mut ctrl_c = std::pin::pin!(tokio::signal::ctrl_c());
    loop {
        let ports = ports_now();
        followers.retain(|port, task| {
            let keep = ports.contains(port);
            if !keep {
                task.abort();
            }
            keep
        });
        let mut snapshots = Vec::with_capacity(ports.len());
        for port in &ports {
            followers.entry(port.clone()).or_insert_with(|| {
                follow(discovery.subscribe(&namespace, &name, port), wake.clone())
            });
            snapshots.push(discovery.instances(&namespace, &name, port));
        }
        let view = View::of(format!("{namespace}/{name}"), &snapshots);
        if last.as_ref() != Some(&view) {
            print_view(&mut out, &view, args.output)?;
            out.flush()?;
            last = Some(view);
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = &mut ctrl_c => return Ok(()),
        }
    }
}

/// Wakes `wake` on every change the subscription reports (the first report, the current
/// snapshot, too).
fn follow(mut subscription: Subscription, wake: Arc<Notify>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while subscription.changed().await.is_some() {
            wake.notify_one();
        }
    })
}

fn print_view(out: &mut Out, view: &View, format: Format) -> CliResult {
    if format == Format::Jsonl {
        return out.json_line(view);
    }
    out.line(&format!(
        "{}  revision {}  {:?}  {} instance(s)",
        view.service,
        view.revision,
        view.state,
        view.instances.len()
    ))?;
    if view.instances.is_empty() {
        return Ok(());
    }
    let rows: Vec<Vec<String>> = view
        .instances
        .iter()
        .map(|i| {
            vec![
                i.address.to_string(),
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
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use informer::discovery::Freshness;
    use informer::{ServicePort, ServiceSpec};

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
        let v = View::of("ns/svc".into(), std::slice::from_ref(&s));
        assert_eq!((v.revision, v.state), (4, ServiceState::Ready));
        let got: Vec<Row> = s.instances.iter().map(Row::from).collect();
        assert_eq!(v.instances, got);
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
        let v = View::of("ns/svc".into(), &[admin, alt, http]);
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
            View::of("ns/svc".into(), &[absent, ready]).state,
            ServiceState::NotSynced
        );
    }

    #[test]
    fn the_jsonl_shape() {
        let s = snapshot("", 7, ServiceState::Ready, &[("10.0.0.1", 8080)]);
        let v = View::of("ns/svc".into(), &[s]);
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"service":"ns/svc","revision":7,"state":"Ready","instances":[{"address":"10.0.0.1","port":8080,"ready":true,"serving":true,"terminating":false,"zone":null,"node":null,"pod":null}]}"#
        );
    }
}
