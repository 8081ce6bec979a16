//! Discovery's endpoint change stream against the simulator over real HTTP: the ordering rules
//! (a replacement inserted before its predecessor is removed, in one slice write and across two;
//! with no ready endpoint the serving-and-terminating ones; a deleted Service removes every
//! endpoint), and the same stream as tower's `Discover`; the end of the stream (discovery dropped,
//! the port forgotten) removes every endpoint first, so a balancer is not left on stale ones.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::StreamExt;
use informer::discovery::{DiscoveryOptions, EndpointChange, EndpointStream, ServiceDiscovery};
use informer::{Client, Config};
use informer_sim::Simulator;
use serde_json::{Value, json};
use tower::Service;
use tower::ServiceExt;
use tower::balance::p2c::Balance;
use tower::discover::Change;
use tower::load::{CompleteOnResponse, PendingRequestsDiscover};

const NS: &str = "default";

fn client(sim: &Simulator) -> Client {
    Client::new(Config::new(sim.url().parse().unwrap())).unwrap()
}

fn service(name: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"selector": {"app": name}, "ports": [{"name": "grpc", "port": 50051}]}})
}

/// `(ip, ready, serving, terminating)` per endpoint.
fn slice(service: &str, endpoints: &[(&str, bool, bool, bool)]) -> Value {
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(ip, ready, serving, terminating)| json!({"addresses": [ip], "conditions": {"ready": ready, "serving": serving, "terminating": terminating}}))
        .collect();
    json!({
        "metadata": {"name": format!("{service}-abc"), "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "grpc", "port": 50051, "protocol": "TCP"}]
    })
}

fn write(sim: &Simulator, service: &str, endpoints: &[(&str, bool, bool, bool)]) {
    sim.replace(
        "endpointslices",
        Some(NS),
        &format!("{service}-abc"),
        slice(service, endpoints),
    )
    .unwrap();
}

const READY: (bool, bool, bool) = (true, true, false);
const TERMINATING: (bool, bool, bool) = (false, true, true);

fn ep(ip: &str, (r, s, t): (bool, bool, bool)) -> (&str, bool, bool, bool) {
    (ip, r, s, t)
}

/// The next `n` changes as `+ip` / `~ip` / `-ip`, failing after 5 s.
async fn next(changes: &mut EndpointStream, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..n {
        let c = tokio::time::timeout(Duration::from_secs(5), changes.next_change())
            .await
            .unwrap_or_else(|_| panic!("no change within 5 s after {out:?}"))
            .expect("stream ended");
        let kind = match c {
            EndpointChange::Insert(..) => '+',
            EndpointChange::Update(..) => '~',
            EndpointChange::Remove(..) => '-',
        };
        out.push(format!("{kind}{}", c.key().ip()));
    }
    out
}

async fn started(sim: &Simulator, service_name: &str) -> ServiceDiscovery {
    started_with(sim, service_name, DiscoveryOptions::default()).await
}

async fn started_with(
    sim: &Simulator,
    service_name: &str,
    options: DiscoveryOptions,
) -> ServiceDiscovery {
    sim.create("services", Some(NS), service(service_name))
        .unwrap();
    sim.create(
        "endpointslices",
        Some(NS),
        slice(
            service_name,
            &[ep("10.0.0.1", READY), ep("10.0.0.2", READY)],
        ),
    )
    .unwrap();
    let d = ServiceDiscovery::new(client(sim), options);
    assert!(d.wait_for_sync(NS, Duration::from_secs(10)).await);
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_is_inserted_before_its_predecessor_is_removed() {
    let sim = Simulator::start().await.unwrap();
    let d = started(&sim, "web").await;
    let mut changes = d.endpoint_changes(NS, "web", "grpc");
    assert_eq!(next(&mut changes, 2).await, ["+10.0.0.1", "+10.0.0.2"]);

    // One write replaces both (the new addresses sort on either side of the old): every insert
    // comes before every removal.
    write(&sim, "web", &[ep("10.0.0.0", READY), ep("10.0.0.3", READY)]);
    assert_eq!(
        next(&mut changes, 4).await,
        ["+10.0.0.0", "+10.0.0.3", "-10.0.0.1", "-10.0.0.2"]
    );
    // Deployment style, two writes: the new one turns ready, then the old one terminates.
    write(
        &sim,
        "web",
        &[
            ep("10.0.0.0", READY),
            ep("10.0.0.3", READY),
            ep("10.0.0.4", READY),
        ],
    );
    assert_eq!(next(&mut changes, 1).await, ["+10.0.0.4"]);
    write(
        &sim,
        "web",
        &[
            ep("10.0.0.0", TERMINATING),
            ep("10.0.0.3", READY),
            ep("10.0.0.4", READY),
        ],
    );
    assert_eq!(next(&mut changes, 1).await, ["-10.0.0.0"]);
    assert_eq!(changes.endpoints().len(), 2);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_ready_endpoint_the_serving_terminating_ones_are_used() {
    let sim = Simulator::start().await.unwrap();
    let d = started(&sim, "web").await;
    let mut changes = d.endpoint_changes(NS, "web", "grpc");
    assert_eq!(next(&mut changes, 2).await, ["+10.0.0.1", "+10.0.0.2"]);

    // Both terminate, one still serving: the serving one stays (its conditions changed: an
    // update), the other goes.
    write(
        &sim,
        "web",
        &[
            ep("10.0.0.1", TERMINATING),
            ep("10.0.0.2", (false, false, true)),
        ],
    );
    assert_eq!(next(&mut changes, 2).await, ["~10.0.0.1", "-10.0.0.2"]);
    // A ready one appears: inserted first, then the terminating one is removed.
    write(
        &sim,
        "web",
        &[ep("10.0.0.1", TERMINATING), ep("10.0.0.5", READY)],
    );
    assert_eq!(next(&mut changes, 2).await, ["+10.0.0.5", "-10.0.0.1"]);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_service_removes_every_endpoint() {
    let sim = Simulator::start().await.unwrap();
    let d = started(&sim, "web").await;
    let mut changes = d.endpoint_changes(NS, "web", "grpc");
    assert_eq!(next(&mut changes, 2).await, ["+10.0.0.1", "+10.0.0.2"]);
    // The slice is still there (garbage collection comes later): the Service's deletion alone
    // removes every endpoint.
    sim.delete("services", Some(NS), "web").unwrap();
    assert_eq!(next(&mut changes, 2).await, ["-10.0.0.1", "-10.0.0.2"]);
    assert!(changes.endpoints().is_empty());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn as_tower_discover_updates_are_left_out() {
    let sim = Simulator::start().await.unwrap();
    let d = started(&sim, "web").await;
    let mut discover = d
        .endpoint_changes(NS, "web", "grpc")
        .into_discover(|i| i.socket_addr().to_string());
    let mut next = async || {
        let c = tokio::time::timeout(Duration::from_secs(5), discover.next())
            .await
            .expect("a change within 5 s")
            .expect("not ended")
            .unwrap();
        match c {
            Change::Insert(k, s) => format!("+{k}={s}"),
            Change::Remove(k) => format!("-{k}"),
        }
    };
    assert_eq!(next().await, "+10.0.0.1:50051=10.0.0.1:50051");
    assert_eq!(next().await, "+10.0.0.2:50051=10.0.0.2:50051");
    // 10.0.0.1 falls back to serving-and-terminating (an update: not passed on), 10.0.0.2 goes.
    write(
        &sim,
        "web",
        &[
            ep("10.0.0.1", TERMINATING),
            ep("10.0.0.2", (false, false, true)),
        ],
    );
    assert_eq!(next().await, "-10.0.0.2:50051");
    write(&sim, "web", &[ep("10.0.0.3", READY)]);
    assert_eq!(next().await, "+10.0.0.3:50051=10.0.0.3:50051");
    assert_eq!(next().await, "-10.0.0.1:50051");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_discovery_removes_every_endpoint_before_the_stream_ends() {
    let sim = Simulator::start().await.unwrap();
    let d = started(&sim, "web").await;
    let mut changes = d.endpoint_changes(NS, "web", "grpc");
    assert_eq!(next(&mut changes, 2).await, ["+10.0.0.1", "+10.0.0.2"]);
    drop(d);
    // Nothing follows these endpoints any more: they are removed, then the stream ends.
    assert_eq!(next(&mut changes, 2).await, ["-10.0.0.1", "-10.0.0.2"]);
    assert!(changes.endpoints().is_empty());
    let end = tokio::time::timeout(Duration::from_secs(5), changes.next_change())
        .await
        .expect("the stream ends");
    assert_eq!(end, None);
    // And stays ended.
    assert_eq!(changes.next_change().await, None);
    sim.shutdown().await;
}

/// A service answering with its endpoint's address.
struct Echo(SocketAddr);

impl Service<()> for Echo {
    type Response = SocketAddr;
    type Error = Infallible;
    type Future = std::future::Ready<Result<SocketAddr, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: ()) -> Self::Future {
        std::future::ready(Ok(self.0))
    }
}

/// tower's p2c balancer ignores the end of its `Discover`: a stream that just ended would leave
/// it calling the last endpoints for ever. Forgotten past `max_tracked_services`, the port's
/// stream removes them first: the balancer is empty and no call goes to a stale endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forgotten_port_leaves_a_tower_balancer_empty_not_on_stale_endpoints() {
    let sim = Simulator::start().await.unwrap();
    let options = DiscoveryOptions {
        max_tracked_services: 1,
        ..DiscoveryOptions::default()
    };
    let d = started_with(&sim, "web", options).await;
    let discover = d
        .endpoint_changes(NS, "web", "grpc")
        .into_discover(|i| Echo(i.socket_addr()));
    let mut balance: Balance<_, ()> = Balance::new(PendingRequestsDiscover::new(
        discover,
        CompleteOnResponse::default(),
    ));
    let answer = tokio::time::timeout(Duration::from_secs(5), async {
        balance.ready().await.unwrap().call(()).await.unwrap()
    })
    .await
    .expect("a ready endpoint within 5 s");
    assert!(
        ["10.0.0.1:50051", "10.0.0.2:50051"].contains(&answer.to_string().as_str()),
        "{answer}"
    );
    assert_eq!(balance.len(), 2);

    // Another Service asked about: `web` is forgotten (its subscription ends), synchronously.
    let _ = d.instances(NS, "other", "grpc");
    let ready = std::future::poll_fn(|cx| Poll::Ready(balance.poll_ready(cx))).await;
    assert!(
        ready.is_pending(),
        "the balancer still offers an endpoint: {ready:?}"
    );
    assert_eq!(balance.len(), 0);
    sim.shutdown().await;
}
