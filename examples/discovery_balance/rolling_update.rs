//! A Deployment-like rolling update under load, balanced by tower's p2c over discovery's endpoint
//! change stream; shared by the example `discovery_balance` and its test
//! (tests/informer/discovery_balance.rs), which runs a shorter [`Plan`].
//!
//! # The scenario
//! - The embedded simulator holds a Service `web` (port `http`) and one EndpointSlice whose
//!   endpoints are HTTP servers on loopback addresses 127.0.0.2, 127.0.0.3, ... (one port for all,
//!   as the Pods of a Deployment share their target port). Each server answers `GET /` with its
//!   own address.
//! - A client calls at a steady rate through `Balance<PendingRequestsDiscover<TowerDiscover>>`.
//! - Each server is replaced in turn, as a Deployment with `maxSurge: 1, maxUnavailable: 0` does:
//!   the new Pod's endpoint appears not ready, turns ready; then the old one turns terminating
//!   (`ready: false, serving: true, terminating: true`); the old server keeps serving for the
//!   grace period, then its endpoint goes and it stops. The grace period runs while the next
//!   server is replaced. [`Plan::rounds`] rolling updates run back to back.
//!
//! # What is measured
//! - `calls`, `failed`: every call started, and those that got no answer from a server (an error,
//!   or no endpoint within 5 s).
//! - `calls_after_update_to_old`: calls started after the balancer saw an old endpoint's removal
//!   that were still answered by that old server (each answer names its server).
//! - `calls_to_old_in_propagation`: calls started between the terminating write and the moment
//!   the balancer saw it, answered by the old server (allowed: it still serves; reported so the
//!   window is visible).
//! - `change_to_balancer`: per EndpointSlice write that changes the usable set (a new endpoint
//!   turning ready, an old one turning terminating), from just before the simulator's write call
//!   (which applies it to its store and queues the watch events) to the moment the balancer pulls
//!   the matching change from its `Discover` (inside its `poll_ready`, on the next call).

use std::collections::HashMap;
use std::error::Error;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_core::Stream;
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use informer::discovery::{DiscoveryOptions, ServiceDiscovery};
use informer::{Client, Config};
use informer_sim::Simulator;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tower::balance::p2c::Balance;
use tower::discover::Change;
use tower::load::{CompleteOnResponse, PendingRequestsDiscover};
use tower::{BoxError, Service, ServiceExt};

const NS: &str = "default";
const SERVICE: &str = "web";
const SLICE: &str = "web-7d4f9";
/// A call that finds no ready endpoint for this long counts as failed.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// The shape and pace of the run.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Servers (replicas) behind the Service.
    pub servers: usize,
    /// Rolling updates run back to back; each replaces every server.
    pub rounds: usize,
    /// The servers' port; 0: one free port, found at start, shared by every address.
    pub port: u16,
    /// The client starts `calls_per_tick` calls every `tick`.
    pub tick: Duration,
    /// Calls started per tick.
    pub calls_per_tick: usize,
    /// From a new endpoint's creation (not ready) to its readiness.
    pub ready_delay: Duration,
    /// From a new endpoint's readiness to the old one's termination.
    pub settle: Duration,
    /// How long a terminating server keeps serving before its endpoint goes and it stops.
    pub grace: Duration,
    /// Calls before the first and after the last update.
    pub warm: Duration,
}

/// What the run measured (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The port the servers listened on.
    pub port: u16,
    pub calls: u64,
    pub failed: u64,
    pub calls_after_update_to_old: u64,
    pub calls_to_old_in_propagation: u64,
    /// Per usable-set change, EndpointSlice write to balancer, sorted.
    pub change_to_balancer: Vec<Duration>,
    /// Usable-set changes the balancer never saw.
    pub changes_missed: usize,
    /// Answers per server address.
    pub answers: HashMap<SocketAddr, u64>,
}

impl Report {
    /// The `p`-th percentile (nearest rank) of `change_to_balancer` in milliseconds, as JSON
    /// (`null` with no sample).
    pub fn change_ms(&self, p: f64) -> String {
        let v = &self.change_to_balancer;
        if v.is_empty() {
            return "null".to_owned();
        }
        let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
        format!("{:.2}", v[rank.min(v.len()) - 1].as_secs_f64() * 1e3)
    }

    /// The JSON line, keys in the order.
    pub fn json_line(&self) -> String {
        format!(
            "{{\"calls\":{},\"failed\":{},\"calls_after_update_to_old\":{},\"change_to_balancer_ms_p50\":{},\"change_to_balancer_ms_p99\":{}}}",
            self.calls,
            self.failed,
            self.calls_after_update_to_old,
            self.change_ms(50.0),
            self.change_ms(99.0),
        )
    }
}

/// One endpoint of the slice, as the EndpointSlice controller writes it.
#[derive(Clone, Debug)]
struct SliceEndpoint {
    ip: Ipv4Addr,
    ready: bool,
    serving: bool,
    terminating: bool,
}

/// The slice's endpoints and the write times of the changes the balancer must see.
struct Slice {
    endpoints: Vec<SliceEndpoint>,
    port: u16,
    /// `(insert?, endpoint)` -> just before the write that makes the change.
    written: HashMap<(bool, SocketAddr), Instant>,
}

impl Slice {
    fn to_value(&self) -> Value {
        let endpoints: Vec<Value> = self
            .endpoints
            .iter()
            .map(|e| {
                json!({
                    "addresses": [e.ip.to_string()],
                    "conditions": {"ready": e.ready, "serving": e.serving, "terminating": e.terminating},
                    "targetRef": {"kind": "Pod", "namespace": NS, "name": format!("web-{}", e.ip.octets()[3])},
                })
            })
            .collect();
        json!({
            "metadata": {"name": SLICE, "labels": {"kubernetes.io/service-name": SERVICE}},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "http", "port": self.port, "protocol": "TCP"}],
        })
    }
}

/// The slice shared by the update steps (the grace periods run in tasks of their own).
#[derive(Clone)]
struct Writer {
    sim: Arc<Simulator>,
    slice: Arc<Mutex<Slice>>,
}

impl Writer {
    /// Applies `edit` to the slice and writes it; `expect` names the change the balancer must see
    /// (`(insert?, endpoint)`), timed from just before the write.
    fn write(&self, expect: Option<(bool, Ipv4Addr)>, edit: impl FnOnce(&mut Vec<SliceEndpoint>)) {
        let mut slice = self.slice.lock().unwrap();
        edit(&mut slice.endpoints);
        let value = slice.to_value();
        let at = Instant::now();
        if let Some((insert, ip)) = expect {
            let key = SocketAddr::new(IpAddr::V4(ip), slice.port);
            slice.written.insert((insert, key), at);
        }
        self.sim
            .replace("endpointslices", Some(NS), SLICE, value)
            .expect("slice write");
    }

    fn set(&self, ip: Ipv4Addr, expect: Option<bool>, f: impl FnOnce(&mut SliceEndpoint)) {
        self.write(expect.map(|insert| (insert, ip)), |eps| {
            f(eps
                .iter_mut()
                .find(|e| e.ip == ip)
                .expect("endpoint in slice"))
        });
    }
}

/// A server answering `GET /` with its own address; stops (gracefully: open requests finish)
/// when `stop` turns true.
async fn serve(listener: TcpListener, mut stop: watch::Receiver<bool>) {
    let me = listener.local_addr().expect("bound").to_string();
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stopped(&mut stop) => return,
        };
        let Ok((tcp, _)) = accepted else { continue };
        let me = me.clone();
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |_req| {
                let body = Full::new(Bytes::from(me.clone()));
                async move { Ok::<_, std::convert::Infallible>(hyper::Response::new(body)) }
            });
            let conn =
                hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(tcp), svc);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stopped(&mut stop) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
}

/// Waits until `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // `wait_for`'s guard is not `Send`: drop it here, not across an await of the caller.
    let _ = stop.wait_for(|s| *s).await;
}

/// Binds `ips` on one port: `port`, or (0) one free port found by trying a few.
async fn bind_all(ips: &[Ipv4Addr], port: u16) -> Result<(u16, Vec<TcpListener>), Box<dyn Error>> {
    let mut last_err = None;
    for _ in 0..20 {
        let first = match TcpListener::bind((ips[0], port)).await {
            Ok(l) => l,
            Err(e) => {
                last_err = Some(e);
                continue;
            }
        };
        let chosen = first.local_addr()?.port();
        let mut listeners = vec![first];
        for ip in &ips[1..] {
            match TcpListener::bind((*ip, chosen)).await {
                Ok(l) => listeners.push(l),
                Err(e) => {
                    last_err = Some(e);
                    break;
                }
            }
        }
        if listeners.len() == ips.len() {
            return Ok((chosen, listeners));
        }
        if port != 0 {
            break;
        }
    }
    let e = last_err.expect("a failure");
    Err(format!(
        "binding {} loopback addresses from {} on port {port}: {e}",
        ips.len(),
        ips[0]
    )
    .into())
}

/// One endpoint as a tower service: `GET http://addr/` on a shared pooled HTTP/1 client; the
/// response is the address of the server that answered.
#[derive(Clone)]
struct HttpEndpoint {
    addr: SocketAddr,
    client: HttpClient<HttpConnector, Empty<Bytes>>,
}

impl Service<()> for HttpEndpoint {
    type Response = SocketAddr;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<SocketAddr, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: ()) -> Self::Future {
        let (client, addr) = (self.client.clone(), self.addr);
        Box::pin(async move {
            let uri: hyper::Uri = format!("http://{addr}/").parse()?;
            let response = client.get(uri).await?;
            if !response.status().is_success() {
                return Err(format!("{addr}: {}", response.status()).into());
            }
            let body = response.into_body().collect().await?.to_bytes();
            Ok(std::str::from_utf8(&body)?.parse()?)
        })
    }
}

/// A `Discover` that notes when the balancer pulled each change (it pulls inside `poll_ready`).
struct Seen<D> {
    inner: D,
    at: Arc<Mutex<HashMap<(bool, SocketAddr), Instant>>>,
}

impl<D, S, E> Stream for Seen<D>
where
    D: Stream<Item = Result<Change<SocketAddr, S>, E>> + Unpin,
{
    type Item = D::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<D::Item>> {
        let this = self.get_mut();
        let item = Pin::new(&mut this.inner).poll_next(cx);
        if let Poll::Ready(Some(Ok(change))) = &item {
            let key = match change {
                Change::Insert(k, _) => (true, *k),
                Change::Remove(k) => (false, *k),
            };
            this.at
                .lock()
                .unwrap()
                .entry(key)
                .or_insert_with(Instant::now);
        }
        item
    }
}

/// One finished call: when it started and which server answered (`None`: it failed).
type CallRecord = (Instant, Option<SocketAddr>);

/// Runs the scenario (see the module docs).
pub async fn run(plan: Plan) -> Result<Report, Box<dyn Error>> {
    // An address per Pod that ever runs: 127.0.0.2, 127.0.0.3, ...
    let total = plan.servers * (plan.rounds + 1);
    let last = u8::try_from(total + 1).map_err(|_| "at most 254 Pods")?;
    let ips: Vec<Ipv4Addr> = (2..=last).map(|i| Ipv4Addr::new(127, 0, 0, i)).collect();
    let (port, listeners) = bind_all(&ips, plan.port).await?;
    let mut stops = HashMap::new();
    for (ip, listener) in ips.iter().zip(listeners) {
        let (tx, rx) = watch::channel(false);
        tokio::spawn(serve(listener, rx));
        stops.insert(*ip, tx);
    }

    let sim = Arc::new(Simulator::start().await?);
    sim.create(
        "services",
        Some(NS),
        json!({"metadata": {"name": SERVICE}, "spec": {"selector": {"app": SERVICE},
            "ports": [{"name": "http", "port": 80, "targetPort": port}]}}),
    )?;
    let live: Vec<SliceEndpoint> = ips[..plan.servers]
        .iter()
        .map(|ip| SliceEndpoint {
            ip: *ip,
            ready: true,
            serving: true,
            terminating: false,
        })
        .collect();
    let slice = Slice {
        endpoints: live,
        port,
        written: HashMap::new(),
    };
    sim.create("endpointslices", Some(NS), slice.to_value())?;
    let writer = Writer {
        sim: sim.clone(),
        slice: Arc::new(Mutex::new(slice)),
    };

    // The client: discovery's change stream -> tower Discover -> pending-requests load -> p2c.
    let discovery = ServiceDiscovery::new(
        Client::new(Config::new(sim.url().parse()?))?,
        DiscoveryOptions::default(),
    );
    if !discovery.wait_for_sync(NS, Duration::from_secs(10)).await {
        return Err("discovery did not sync in 10 s".into());
    }
    let http = HttpClient::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let discover = Seen {
        inner: discovery
            .endpoint_changes(NS, SERVICE, "http")
            .into_discover(move |i| HttpEndpoint {
                addr: i.socket_addr(),
                client: http.clone(),
            }),
        at: seen.clone(),
    };
    let mut balance: Balance<_, ()> = Balance::new(PendingRequestsDiscover::new(
        discover,
        CompleteOnResponse::default(),
    ));

    let running = Arc::new(AtomicBool::new(true));
    let (record_tx, mut records) = mpsc::unbounded_channel::<CallRecord>();
    let client = {
        let running = running.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(plan.tick);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while running.load(Ordering::Relaxed) {
                tick.tick().await;
                for _ in 0..plan.calls_per_tick {
                    let started = Instant::now();
                    let ready = tokio::time::timeout(READY_TIMEOUT, balance.ready()).await;
                    let call = match ready {
                        Ok(Ok(svc)) => svc.call(()),
                        _ => {
                            let _ = record_tx.send((started, None));
                            continue;
                        }
                    };
                    let record_tx = record_tx.clone();
                    tokio::spawn(async move {
                        let _ = record_tx.send((started, call.await.ok()));
                    });
                }
            }
        })
    };

    // The rolling updates.
    tokio::time::sleep(plan.warm).await;
    let mut current: Vec<Ipv4Addr> = ips[..plan.servers].to_vec();
    let mut fresh = ips[plan.servers..].iter().copied();
    let mut terminated: Vec<Ipv4Addr> = Vec::new();
    let mut graces = Vec::new();
    for _ in 0..plan.rounds {
        for slot in current.iter_mut() {
            let (old, new) = (*slot, fresh.next().expect("an address per new Pod"));
            writer.write(None, |eps| {
                eps.push(SliceEndpoint {
                    ip: new,
                    ready: false,
                    serving: false,
                    terminating: false,
                })
            });
            tokio::time::sleep(plan.ready_delay).await;
            writer.set(new, Some(true), |e| (e.ready, e.serving) = (true, true));
            tokio::time::sleep(plan.settle).await;
            writer.set(old, Some(false), |e| {
                (e.ready, e.serving, e.terminating) = (false, true, true)
            });
            terminated.push(old);
            *slot = new;
            let (writer, stop, grace) = (writer.clone(), stops[&old].clone(), plan.grace);
            graces.push(tokio::spawn(async move {
                tokio::time::sleep(grace).await;
                writer.write(None, |eps| eps.retain(|e| e.ip != old));
                stop.send_replace(true);
            }));
        }
    }
    for g in graces {
        g.await?;
    }
    tokio::time::sleep(plan.warm).await;
    running.store(false, Ordering::Relaxed);
    client.await?;
    // Every call task holds a sender; the channel closes when the last call finished.
    let mut calls = Vec::new();
    while let Some(r) = records.recv().await {
        calls.push(r);
    }
    for stop in stops.values() {
        stop.send_replace(true);
    }

    let mut report = Report {
        port,
        calls: calls.len() as u64,
        ..Default::default()
    };
    let seen = seen.lock().unwrap().clone();
    let written = writer.slice.lock().unwrap().written.clone();
    for (key, at) in &written {
        match seen.get(key) {
            Some(s) => report
                .change_to_balancer
                .push(s.saturating_duration_since(*at)),
            None => report.changes_missed += 1,
        }
    }
    report.change_to_balancer.sort();
    let removed_at = |ip: Ipv4Addr| seen.get(&(false, SocketAddr::new(IpAddr::V4(ip), port)));
    let written_at = |ip: Ipv4Addr| written.get(&(false, SocketAddr::new(IpAddr::V4(ip), port)));
    for (started, answered) in &calls {
        let Some(server) = answered else {
            report.failed += 1;
            continue;
        };
        *report.answers.entry(*server).or_default() += 1;
        let IpAddr::V4(ip) = server.ip() else {
            continue;
        };
        if !terminated.contains(&ip) {
            continue;
        }
        match (written_at(ip), removed_at(ip)) {
            (_, Some(seen)) if started >= seen => report.calls_after_update_to_old += 1,
            (Some(write), _) if started >= write => report.calls_to_old_in_propagation += 1,
            _ => {}
        }
    }
    if let Ok(sim) = Arc::try_unwrap(sim) {
        sim.shutdown().await;
    }
    Ok(report)
}
