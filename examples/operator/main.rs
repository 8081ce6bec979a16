//! An operator: Widgets (`widgets.example.com/v1`, a CRD it can install) become ConfigMaps.
//!
//! For each Widget `W` it server-side-applies (field manager `widget-operator`) a ConfigMap
//! `W-config` in W's namespace whose data is `spec.data` plus `size` as a string, labelled
//! `app.kubernetes.io/managed-by=widget-operator`, with a controller ownerReference to `W`; then
//! W's status (`configMap`, `observedGeneration`, `ready`). An edit of the ConfigMap by anyone
//! else comes back as an event through the owner reference and is reverted. The finalizer
//! `example.com/cleanup` keeps a deleted Widget until its ConfigMap is deleted, even when no
//! replica ran at the time (the next one cleans up). Replicas elect a leader on a Lease; only the
//! leader reconciles (the controller runs fenced), the others keep warm caches.
//!
//! ```text
//! Informer<Widget> ----------------------------\
//! Informer<ConfigMap> (managed-by label) -------+--> Controller (fenced by the Lease) --> reconcile
//!   (an event maps to its controlling Widget) -/        finalizer: Apply  -> apply ConfigMap, status
//!                                                                  Cleanup -> delete ConfigMap
//! ```
//!
//! Try it against the simulator, in three terminals (`kwatch sim` writes a kubeconfig named after
//! its port):
//!
//! ```text
//! cargo run --release -p kwatch -- sim --listen 127.0.0.1:8080
//! cargo run --release --example operator -- --kubeconfig /tmp/kwatch-sim-8080.kubeconfig \
//!     --install-crd --identity a --metrics-addr 127.0.0.1:9090
//! cargo run --release --example operator -- --kubeconfig /tmp/kwatch-sim-8080.kubeconfig \
//!     --install-crd --identity b --metrics-addr 127.0.0.1:9091
//! ```
//!
//! then create a Widget (`kubectl --kubeconfig /tmp/kwatch-sim-8080.kubeconfig apply -f -` of
//! `{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"},
//! "spec": {"size": 3, "data": {"colour": "blue"}}}`), look at `w-config` and the Widget's
//! status, edit or delete either, stop the leader. Against a cluster, leave out `--kubeconfig`
//! (kubectl's kubeconfig, else the in-cluster configuration).
//!
//! Flags: `--kubeconfig PATH`, `--namespace NS` (else all), `--install-crd`,
//! `--lease-namespace NS` (else the kubeconfig's namespace), `--lease-name NAME`
//! (`widget-operator`), `--identity ID` (else hostname-pid), `--metrics-addr HOST:PORT`
//! (Prometheus text at `/metrics`), and client-go's leader election timings
//! `--lease-duration-seconds 15 --renew-deadline-seconds 10 --retry-period-seconds 2`.
//! SIGTERM (or Ctrl-C) stops the workers, releases the Lease and exits.

mod metrics;
mod reconcile;
mod widget;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use informer::config::KubeconfigOptions;
use informer::informer::InformerRequest;
use informer::leaderelection::{LeaderElectionConfig, LeaderElector, LeadershipEvent};
use informer::workqueue::{Action, Controller};
use informer::{Client, Config, ConfigMap, InformerFactory, Resource};
use tokio::sync::watch;

use reconcile::{Context, MANAGED_BY};
use widget::Widget;

const USAGE: &str = "usage: operator [--kubeconfig PATH] [--namespace NS] [--install-crd] \
    [--lease-namespace NS] [--lease-name NAME] [--identity ID] [--metrics-addr HOST:PORT] \
    [--lease-duration-seconds S] [--renew-deadline-seconds S] [--retry-period-seconds S]";

struct Args {
    kubeconfig: Option<PathBuf>,
    namespace: Option<String>,
    install_crd: bool,
    lease_namespace: Option<String>,
    lease_name: String,
    identity: String,
    metrics_addr: Option<SocketAddr>,
    election: LeaderElectionConfig,
}

fn args() -> Result<Args, String> {
    let mut args = Args {
        kubeconfig: None,
        namespace: None,
        install_crd: false,
        lease_namespace: None,
        lease_name: "widget-operator".into(),
        identity: format!(
            "{}-{}",
            std::env::var("HOSTNAME").unwrap_or_else(|_| "widget-operator".into()),
            std::process::id()
        ),
        metrics_addr: None,
        election: LeaderElectionConfig::default(),
    };
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        if flag == "--install-crd" {
            args.install_crd = true;
            continue;
        }
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        let value = words
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        let seconds = || {
            value
                .parse()
                .map(Duration::from_secs)
                .map_err(|_| format!("{flag} takes whole seconds, not {value:?}"))
        };
        match flag.as_str() {
            "--kubeconfig" => args.kubeconfig = Some(value.into()),
            "--namespace" => args.namespace = Some(value),
            "--lease-namespace" => args.lease_namespace = Some(value),
            "--lease-name" => args.lease_name = value,
            "--identity" => args.identity = value,
            "--metrics-addr" => {
                let addr = value
                    .parse()
                    .map_err(|e| format!("--metrics-addr {value:?}: {e}"))?;
                args.metrics_addr = Some(addr);
            }
            "--lease-duration-seconds" => args.election.lease_duration = seconds()?,
            "--renew-deadline-seconds" => args.election.renew_deadline = seconds()?,
            "--retry-period-seconds" => args.election.retry_period = seconds()?,
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    Ok(args)
}

/// Completes on SIGTERM or Ctrl-C (SIGINT).
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => drop(tokio::signal::ctrl_c().await),
        }
    }
    #[cfg(not(unix))]
    drop(tokio::signal::ctrl_c().await);
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = args()?;
    // SIGTERM (or Ctrl-C) flips `stopping`, from now on: whatever this replica is doing then
    // (installing the CRD, waiting for its caches, reconciling) ends in order.
    let (stop, stopping) = watch::channel(false);
    tokio::spawn(async move {
        terminated().await;
        stop.send_replace(true);
    });

    let config = match &args.kubeconfig {
        Some(path) => {
            Config::from_kubeconfig(&KubeconfigOptions {
                path: Some(path.clone()),
                ..Default::default()
            })
            .await?
        }
        None => Config::infer().await?,
    };
    let client = Client::new(config)?;
    let namespace = args.namespace.as_deref();

    if args.install_crd {
        tokio::select! {
            installed = widget::install(&client, Duration::from_secs(60)) => installed?,
            _ = flipped(stopping.clone()) => return Ok(()),
        }
    }

    // Leader election: the fence is `Some(token)` while this replica leads.
    let lease_namespace = args
        .lease_namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let mut elector = LeaderElector::new(
        client.clone(),
        &lease_namespace,
        &args.lease_name,
        &args.identity,
        args.election,
    )?;
    let fence = elector.fence();
    let mut events = elector.events();
    let identity = args.identity.clone();
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            match event {
                LeadershipEvent::StartedLeading(token) => {
                    eprintln!("operator {identity}: leading ({token})")
                }
                LeadershipEvent::StoppedLeading => {
                    eprintln!("operator {identity}: stopped leading")
                }
                LeadershipEvent::NewLeader { holder, .. } => {
                    eprintln!("operator {identity}: the leader is {holder:?}")
                }
            }
        }
    });

    if let Some(addr) = args.metrics_addr {
        let bound = metrics::serve(addr).await?;
        eprintln!(
            "operator {}: metrics at http://{bound}/metrics",
            args.identity
        );
    }

    // Campaign (a failed start above held nothing); stopped after the workers, below.
    let (stop_election, election_stopped) = watch::channel(false);
    let election = tokio::spawn(elector.run(flipped(election_stopped)));

    // Widgets, and the ConfigMaps this operator made (an event on one reconciles its Widget).
    let factory = InformerFactory::new(client.clone());
    let widgets = factory.informer::<Widget>(namespace);
    let selector = format!("{}={}", MANAGED_BY.0, MANAGED_BY.1);
    let configmaps = factory.informer_with(
        InformerRequest::<ConfigMap>::new(ConfigMap::api_resource())
            .namespace(namespace)
            .label_selector(&selector),
    );
    let controller = Controller::new(&widgets, 2)
        .owns(&configmaps)
        .shutdown_grace(Duration::from_secs(3))
        .error_policy(
            |widget: Arc<Widget>, error: &reconcile::ReconcileError, _ctx: Arc<Context>| {
                eprintln!(
                    "operator: {}/{}: {error}; retrying",
                    widget.metadata.namespace, widget.metadata.name
                );
                Action::RequeueAfter(Duration::from_secs(2))
            },
        );
    factory.start();
    eprintln!(
        "operator {}: watching Widgets in {}; lease {lease_namespace}/{}",
        args.identity,
        namespace.unwrap_or("all namespaces"),
        args.lease_name
    );

    let ctx = Arc::new(Context {
        client: client.clone(),
        widgets: widgets.clone(),
    });
    let summary = controller
        .run_fenced(fence, reconcile::reconcile, ctx, flipped(stopping))
        .await;
    eprintln!("operator {}: stopping after {summary:?}", args.identity);

    // The workers have stopped: now give the Lease up, so another replica leads at once.
    stop_election.send_replace(true);
    if tokio::time::timeout(Duration::from_secs(5), election)
        .await
        .is_err()
    {
        eprintln!(
            "operator {}: the Lease was not released in 5 s",
            args.identity
        );
    }
    Ok(())
}

/// Completes when `flag` turns true (or its sender is dropped).
async fn flipped(mut flag: watch::Receiver<bool>) {
    let _ = flag.wait_for(|stop| *stop).await;
}
