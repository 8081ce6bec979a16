//! `kwatch instances SERVICE`: what the library's discovery ([`informer::discovery`]) says about a
//! Service, every unique endpoint once with its conditions; with `-w`, a new line each time its
//! [`Subscription`] reports a change.
//!
//! kwatch does not merge slices itself: every instance, condition, state and revision printed here
//! is the library's [`Snapshot`](informer::discovery::Snapshot), read with [`ServiceDiscovery::instances`] and followed with
//! [`ServiceDiscovery::subscribe`]. ServiceDiscovery runs with
//! [`include_not_ready`](informer::discovery::DiscoveryOptions::include_not_ready) on, so endpoints
//! that are not ready are listed too (flagged `ready: false`); the state is the library's: `Ready`
//! when at least one instance is usable.
//!
//! Which Service ports: `--port NAME` picks one (`--port ""` the unnamed one). Without it, the
//! Service's own ports decide (the library's [`port_names`]): a single-port Service shows that port (named or
//! not), a multi-port Service shows every port, each endpoint once per target port number. A
//! Service that does not exist (yet) is looked up on its unnamed port, which says `ServiceAbsent`.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

pub use informer::discovery::port_names;
use informer::discovery::{
    DiscoveryOptions, Instance, ServiceDiscovery, ServiceState, ServiceView, Subscription,
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
    pub zone: Option<informer::model::SmolStr>,
    pub node: Option<informer::model::SmolStr>,
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

/// A Service's endpoints at one revision (the library's [`ServiceView`]), as printed (the
/// `-o jsonl` line).
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

impl From<ServiceView> for View {
    fn from(v: ServiceView) -> View {
        View {
            instances: v.instances.iter().map(Row::from).collect(),
            service: v.service,
            revision: v.revision,
            state: v.state,
        }
    }
}

impl View {
    pub fn ready(&self) -> usize {
        self.instances.iter().filter(|i| i.ready).count()
    }
}

/// The library's [`ServiceView`] of `namespace/name` over `ports`, as printed.
pub fn lookup(discovery: &ServiceDiscovery, namespace: &str, name: &str, ports: &[String]) -> View {
    discovery.service_view(namespace, name, ports).into()
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
    // Discovery does without Services when they are forbidden (it serves from the slices and
    // says so in its metrics): their 403 does not end the command.
    let errors = connect::ErrorCollector::default().tolerating_forbidden("services");
    // One factory for discovery and for the Service informer read here: discovery's own Service
    // informer of the namespace, not a second watch.
    let factory = Arc::new(InformerFactory::with_options(
        client.clone(),
        ReflectorOptions {
            on_error: Some(errors.callback()),
            ..connect::reflector_options()
        },
    ));
    let discovery = ServiceDiscovery::with_factory(client, factory.clone(), discovery_options());
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
        let view = View::from(ServiceView::of(format!("{namespace}/{name}"), &snapshots));
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
                i.zone.as_deref().unwrap_or_default().to_string(),
                i.node.as_deref().unwrap_or_default().to_string(),
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
    use informer::discovery::{Freshness, Snapshot};

    #[test]
    fn the_jsonl_shape() {
        let mut s = Snapshot::not_synced("ns", "svc", "");
        s.revision = 7;
        s.state = ServiceState::Ready;
        s.freshness = Freshness::Live;
        s.instances = vec![Instance::new("10.0.0.1".parse().unwrap(), 8080)];
        let v = View::from(ServiceView::of("ns/svc".into(), &[Arc::new(s)]));
        assert_eq!(
            serde_json::to_string(&v).unwrap(),
            r#"{"service":"ns/svc","revision":7,"state":"Ready","instances":[{"address":"10.0.0.1","port":8080,"ready":true,"serving":true,"terminating":false,"zone":null,"node":null,"pod":null}]}"#
        );
    }
}
