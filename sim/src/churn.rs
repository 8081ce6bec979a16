//! A seeded workload generator: `S` services with about `N` pods each, driven through scale-ups,
//! scale-downs, rolling updates, readiness flips and slice repacking, with Pods, Services,
//! Endpoints and EndpointSlices (`discovery.k8s.io/v1`) maintained the way the Kubernetes
//! controllers do.
//!
//! Invariants after every [`Churn::step`]:
//! - each Service `svc-i` selects `app=svc-i`; its Endpoints lists ready, non-terminating pods in
//!   `addresses` and the others in `notReadyAddresses`;
//! - its EndpointSlices (labels `kubernetes.io/service-name` and
//!   `endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io`) hold every pod of
//!   the service exactly once, at most [`ChurnConfig::max_endpoints_per_slice`] per slice, with
//!   `ready`/`serving`/`terminating` conditions, `nodeName`, `zone` and a Pod `targetRef`;
//! - like the controller, a slice write that adds endpoints happens before the write that removes
//!   them elsewhere, so an endpoint moving between slices is briefly in both.
//!
//! All choices come from a generator seeded with `seed`: the same config gives the same
//! sequence of writes (names, IPs, order), so tests can `step()` deterministically.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use informer_sim::{Simulator, churn::{Churn, ChurnConfig}};
//! let sim = Simulator::start().await?;
//! let mut churn = Churn::new(sim.api(), ChurnConfig { services: 3, pods_per_service: 5, ..Default::default() })?;
//! churn.step()?;                                                    // one deterministic action
//! let running = churn.run(200.0);                                   // ~200 actions/s in the background
//! tokio::time::sleep(std::time::Duration::from_secs(1)).await;
//! let churn = running.stop().await?;                                // back to stepping
//! # let _ = churn; Ok(()) }
//! ```

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use std::sync::Arc;

use super::store::{Obj, Store};
use super::{ApiError, SimHandle};

const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

/// Shape of the generated workload.
#[derive(Clone, Debug)]
pub struct ChurnConfig {
    /// Number of services.
    pub services: usize,
    /// Initial pods per service (scaling moves around this).
    pub pods_per_service: usize,
    /// Namespace of every object.
    pub namespace: String,
    /// Nodes (`node-0`..) the pods are spread over.
    pub nodes: usize,
    /// Zones, assigned to nodes round-robin.
    pub zones: Vec<String>,
    /// At most this many endpoints per EndpointSlice (the controller's default is 100).
    pub max_endpoints_per_slice: usize,
    /// Seed of every random choice.
    pub seed: u64,
}

impl Default for ChurnConfig {
    fn default() -> Self {
        ChurnConfig {
            services: 10,
            pods_per_service: 10,
            namespace: "default".into(),
            nodes: 5,
            zones: vec!["zone-a".into(), "zone-b".into(), "zone-c".into()],
            max_endpoints_per_slice: 100,
            seed: 1,
        }
    }
}

#[derive(Clone, Debug)]
struct PodState {
    name: String,
    uid: String,
    ip: String,
    node: usize,
    hash: String,
    ready: bool,
    terminating: bool,
    /// `metadata.deletionTimestamp` once terminating.
    deleted_at: Option<String>,
}

#[derive(Clone, Debug)]
struct SliceState {
    name: String,
    /// Pod names, in slice order.
    pods: Vec<String>,
}

#[derive(Clone, Debug)]
struct SvcState {
    name: String,
    uid: String,
    hash: String,
    image_gen: u32,
    pods: Vec<PodState>,
    slices: Vec<SliceState>,
}

/// What one step did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Pods added to a service.
    ScaleUp,
    /// Pods removed from a service (terminating first, then deleted).
    ScaleDown,
    /// One pod of a new template replaced one of the old.
    RollingUpdate,
    /// A pod's readiness changed.
    ReadinessFlip,
    /// Endpoints moved between slices to free an underfull one.
    Repack,
}

/// Writes straight to the store (same semantics and events as [`SimHandle`], without resolving names
/// or cloning results on every call).
struct Writer {
    store: Arc<Store>,
    ns: String,
    pods: usize,
    services: usize,
    endpoints: usize,
    slices: usize,
}

impl Writer {
    fn create(&self, idx: usize, v: Value) -> Result<Arc<Obj>, ApiError> {
        self.store.create(idx, Some(&self.ns), v)
    }

    fn replace(&self, idx: usize, name: &str, v: Value) -> Result<(), ApiError> {
        self.store.replace(idx, Some(&self.ns), name, v).map(|_| ())
    }

    fn delete(&self, idx: usize, name: &str) -> Result<(), ApiError> {
        self.store
            .delete(idx, Some(&self.ns), name, None)
            .map(|_| ())
    }
}

fn uid_of(o: &Obj) -> String {
    o.uid.clone()
}

/// The generator. See the [module docs](self).
pub struct Churn {
    api: SimHandle,
    w: Writer,
    cfg: ChurnConfig,
    rng: crate::rng::Rng,
    svcs: Vec<SvcState>,
    next_ip: u32,
    steps: u64,
}

fn rand_suffix(rng: &mut crate::rng::Rng, n: usize) -> String {
    (0..n)
        .map(|_| b"bcdfghjklmnpqrstvwxz2456789"[rng.index(27)] as char)
        .collect()
}

impl Churn {
    /// Creates the initial Services, Pods, Endpoints and EndpointSlices.
    pub fn new(api: SimHandle, cfg: ChurnConfig) -> Result<Churn, ApiError> {
        let rng = crate::rng::Rng::with_seed(cfg.seed);
        let store = api.store.clone();
        let w = Writer {
            pods: store.resolve("pods")?,
            services: store.resolve("services")?,
            endpoints: store.resolve("endpoints")?,
            slices: store.resolve("endpointslices.discovery.k8s.io")?,
            store,
            ns: cfg.namespace.clone(),
        };
        let mut c = Churn {
            api,
            w,
            cfg,
            rng,
            svcs: Vec::new(),
            next_ip: 0,
            steps: 0,
        };
        for i in 0..c.cfg.services {
            let name = format!("svc-{i}");
            let svc = c.w.create(
                c.w.services,
                json!({
                    "metadata": {"name": name, "labels": {"app": name}},
                    "spec": {
                        "selector": {"app": name},
                        "clusterIP": format!("10.96.{}.{}", i / 250, 1 + i % 250),
                        "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}]
                    }
                }),
            )?;
            let hash = rand_suffix(&mut c.rng, 10);
            let uid = uid_of(&svc);
            c.w.create(
                c.w.endpoints,
                json!({"metadata": {"name": name, "labels": {"app": name}}}),
            )?;
            c.svcs.push(SvcState {
                name,
                uid,
                hash,
                image_gen: 1,
                pods: Vec::new(),
                slices: Vec::new(),
            });
            for _ in 0..c.cfg.pods_per_service {
                c.add_pod(i, true)?;
            }
            c.reconcile(i)?;
        }
        Ok(c)
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The API handle the generator writes through.
    pub fn api(&self) -> &SimHandle {
        &self.api
    }

    /// Performs one random action on one random service and reconciles its Endpoints and slices.
    pub fn step(&mut self) -> Result<Action, ApiError> {
        self.steps += 1;
        if self.svcs.is_empty() {
            return Ok(Action::ReadinessFlip);
        }
        let s = self.rng.index(self.svcs.len());
        let n = self.svcs[s].pods.len();
        let target = self.cfg.pods_per_service.max(1);
        let roll = self.rng.below(100);
        let action = match roll {
            _ if n == 0 => Action::ScaleUp,
            0..=19 if n < target * 2 => Action::ScaleUp,
            20..=39 if n > target / 2 => Action::ScaleDown,
            40..=64 => Action::RollingUpdate,
            65..=89 => Action::ReadinessFlip,
            90..=99 if self.svcs[s].slices.len() > 1 => Action::Repack,
            _ => Action::ReadinessFlip,
        };
        match action {
            Action::ScaleUp => {
                let k = 1 + self.rng.index((target / 4).max(1));
                for _ in 0..k {
                    self.add_pod(s, false)?;
                }
                self.reconcile(s)?;
                // The new pods become ready.
                let pending: Vec<usize> = (0..self.svcs[s].pods.len())
                    .filter(|i| {
                        let p = &self.svcs[s].pods[*i];
                        !p.ready && !p.terminating
                    })
                    .collect();
                for i in pending {
                    self.set_ready(s, i, true)?;
                }
                self.reconcile(s)?;
            }
            Action::ScaleDown => {
                let k = 1 + self.rng.index((n / 4).max(1));
                self.terminate_pods(s, k)?;
            }
            Action::RollingUpdate => {
                let svc = &mut self.svcs[s];
                if svc.pods.iter().all(|p| p.hash == svc.hash) {
                    svc.hash = rand_suffix(&mut self.rng, 10);
                    svc.image_gen += 1;
                }
                self.add_pod(s, false)?;
                self.reconcile(s)?;
                let svc = &self.svcs[s];
                if let Some(i) = svc.pods.iter().position(|p| !p.ready && !p.terminating) {
                    self.set_ready(s, i, true)?;
                }
                self.reconcile(s)?;
                let svc = &self.svcs[s];
                if let Some(old) = svc
                    .pods
                    .iter()
                    .position(|p| p.hash != svc.hash && !p.terminating)
                {
                    self.terminate_at(s, old)?;
                }
            }
            Action::ReadinessFlip => {
                let live: Vec<usize> = (0..n)
                    .filter(|i| !self.svcs[s].pods[*i].terminating)
                    .collect();
                if !live.is_empty() {
                    let i = live[self.rng.index(live.len())];
                    let ready = !self.svcs[s].pods[i].ready;
                    self.set_ready(s, i, ready)?;
                    self.reconcile(s)?;
                }
            }
            Action::Repack => self.repack(s)?,
        }
        Ok(action)
    }

    /// Runs [`step`](Self::step) about `per_second` times a second in a background task.
    pub fn run(self, per_second: f64) -> Running {
        let (stop_tx, mut stop_rx) = oneshot::channel();
        let period = Duration::from_secs_f64(1.0 / per_second.max(0.001));
        let task = tokio::spawn(async move {
            let mut me = self;
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = &mut stop_rx => return Ok(me),
                    _ = tick.tick() => { me.step()?; }
                }
            }
        });
        Running {
            stop: Some(stop_tx),
            task,
        }
    }

    fn node_zone(&self, node: usize) -> (String, String) {
        let zones = &self.cfg.zones;
        let zone = if zones.is_empty() {
            "zone-a".to_string()
        } else {
            zones[node % zones.len()].clone()
        };
        (format!("node-{node}"), zone)
    }

    fn alloc_ip(&mut self) -> String {
        let n = self.next_ip;
        self.next_ip += 1;
        format!(
            "10.{}.{}.{}",
            1 + (n >> 16) % 254,
            (n >> 8) & 255,
            1 + (n & 255) % 254
        )
    }

    fn pod_json(&self, s: usize, p: &PodState) -> Value {
        let svc = &self.svcs[s];
        let (node, _) = self.node_zone(p.node);
        let ready = if p.ready { "True" } else { "False" };
        let mut v = json!({
            "metadata": {
                "name": p.name,
                "labels": {"app": svc.name, "pod-template-hash": p.hash},
            },
            "spec": {
                "nodeName": node,
                "containers": [{"name": "app", "image": format!("registry.example/{}:v{}", svc.name, svc.image_gen),
                                "ports": [{"containerPort": 8080, "protocol": "TCP"}]}]
            },
            "status": {
                "phase": "Running",
                "hostIP": format!("192.168.0.{}", 10 + p.node % 240),
                "podIP": p.ip,
                "podIPs": [{"ip": p.ip}],
                "conditions": [{"type": "Ready", "status": ready}, {"type": "ContainersReady", "status": ready}]
            }
        });
        if let Some(t) = &p.deleted_at {
            v["metadata"]["deletionTimestamp"] = json!(t);
            v["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        }
        v
    }

    fn add_pod(&mut self, s: usize, ready: bool) -> Result<(), ApiError> {
        let name = format!(
            "{}-{}-{}",
            self.svcs[s].name,
            self.svcs[s].hash,
            rand_suffix(&mut self.rng, 5)
        );
        let ip = self.alloc_ip();
        let node = self.rng.index(self.cfg.nodes.max(1));
        let mut p = PodState {
            name,
            uid: String::new(),
            ip,
            node,
            hash: self.svcs[s].hash.clone(),
            ready,
            terminating: false,
            deleted_at: None,
        };
        let created = self.w.create(self.w.pods, self.pod_json(s, &p))?;
        p.uid = uid_of(&created);
        self.svcs[s].pods.push(p);
        Ok(())
    }

    /// Sets pod `i` of service `s` ready or not and writes it (a status update).
    fn set_ready(&mut self, s: usize, i: usize, ready: bool) -> Result<(), ApiError> {
        self.svcs[s].pods[i].ready = ready;
        let p = self.svcs[s].pods[i].clone();
        let v = self.pod_json(s, &p);
        self.w.replace(self.w.pods, &p.name, v)
    }

    fn terminate_pods(&mut self, s: usize, k: usize) -> Result<(), ApiError> {
        for _ in 0..k {
            let live: Vec<usize> = (0..self.svcs[s].pods.len())
                .filter(|i| !self.svcs[s].pods[*i].terminating)
                .collect();
            if live.is_empty() {
                break;
            }
            let i = live[self.rng.index(live.len())];
            self.terminate_at(s, i)?;
        }
        Ok(())
    }

    /// Graceful deletion of pod `i`: terminating (not ready), reconcile, then deleted, reconcile.
    fn terminate_at(&mut self, s: usize, i: usize) -> Result<(), ApiError> {
        let p = &mut self.svcs[s].pods[i];
        p.terminating = true;
        p.ready = false;
        p.deleted_at = Some(super::store::now_rfc3339());
        let p = p.clone();
        self.w.replace(self.w.pods, &p.name, self.pod_json(s, &p))?;
        self.reconcile(s)?;
        self.w.delete(self.w.pods, &p.name)?;
        self.svcs[s].pods.retain(|q| q.name != p.name);
        self.reconcile(s)
    }

    fn endpoint_json(&self, p: &PodState) -> Value {
        let (node, zone) = self.node_zone(p.node);
        json!({
            "addresses": [p.ip],
            "conditions": {"ready": p.ready && !p.terminating, "serving": p.ready || p.terminating, "terminating": p.terminating},
            "nodeName": node,
            "zone": zone,
            "targetRef": {"kind": "Pod", "namespace": self.cfg.namespace, "name": p.name, "uid": p.uid}
        })
    }

    fn slice_json(&self, s: usize, slice: &SliceState) -> Value {
        let svc = &self.svcs[s];
        let endpoints: Vec<Value> = slice
            .pods
            .iter()
            .filter_map(|n| svc.pods.iter().find(|p| p.name == *n))
            .map(|p| self.endpoint_json(p))
            .collect();
        let mut v = json!({
            "metadata": {
                "labels": {"kubernetes.io/service-name": svc.name, "endpointslice.kubernetes.io/managed-by": MANAGED_BY},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Service", "name": svc.name, "uid": svc.uid,
                                     "controller": true, "blockOwnerDeletion": true}]
            },
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
        });
        if slice.name.is_empty() {
            v["metadata"]["generateName"] = json!(format!("{}-", svc.name));
        } else {
            v["metadata"]["name"] = json!(slice.name);
        }
        v
    }

    /// Brings the Endpoints object and the slices of service `s` in line with its pods.
    fn reconcile(&mut self, s: usize) -> Result<(), ApiError> {
        let ns = self.cfg.namespace.clone();
        let max = self.cfg.max_endpoints_per_slice.max(1);
        // Endpoints (the legacy object).
        let svc = &self.svcs[s];
        let mut ready: Vec<&PodState> = svc
            .pods
            .iter()
            .filter(|p| p.ready && !p.terminating)
            .collect();
        let mut not_ready: Vec<&PodState> = svc
            .pods
            .iter()
            .filter(|p| !p.ready || p.terminating)
            .collect();
        ready.sort_by(|a, b| a.ip.cmp(&b.ip));
        not_ready.sort_by(|a, b| a.ip.cmp(&b.ip));
        let addr = |p: &PodState| {
            json!({"ip": p.ip, "nodeName": self.node_zone(p.node).0,
                   "targetRef": {"kind": "Pod", "namespace": ns, "name": p.name, "uid": p.uid}})
        };
        let mut subset = serde_json::Map::new();
        if !ready.is_empty() {
            subset.insert("addresses".into(), ready.iter().map(|p| addr(p)).collect());
        }
        if !not_ready.is_empty() {
            subset.insert(
                "notReadyAddresses".into(),
                not_ready.iter().map(|p| addr(p)).collect(),
            );
        }
        let subsets = if subset.is_empty() {
            json!([])
        } else {
            subset.insert(
                "ports".into(),
                json!([{"name": "http", "port": 8080, "protocol": "TCP"}]),
            );
            json!([subset])
        };
        let ep = json!({"metadata": {"name": svc.name, "labels": {"app": svc.name}}, "subsets": subsets});
        let name = svc.name.clone();
        self.w.replace(self.w.endpoints, &name, ep)?;

        // Slices: drop gone pods, place new ones where there is room, else in a new slice.
        let live: Vec<String> = self.svcs[s].pods.iter().map(|p| p.name.clone()).collect();
        let mut slices = std::mem::take(&mut self.svcs[s].slices);
        for sl in &mut slices {
            sl.pods.retain(|n| live.contains(n));
        }
        for n in &live {
            if slices.iter().any(|sl| sl.pods.contains(n)) {
                continue;
            }
            match slices.iter_mut().find(|sl| sl.pods.len() < max) {
                Some(sl) => sl.pods.push(n.clone()),
                None => slices.push(SliceState {
                    name: String::new(),
                    pods: vec![n.clone()],
                }),
            }
        }
        self.svcs[s].slices = slices.clone();
        self.write_slices(s, &slices)
    }

    /// Writes slices: creates and updates of non-empty slices first, deletions of empty ones last.
    fn write_slices(&mut self, s: usize, slices: &[SliceState]) -> Result<(), ApiError> {
        let mut kept = Vec::new();
        for sl in slices.iter().filter(|sl| !sl.pods.is_empty()) {
            let v = self.slice_json(s, sl);
            let name = if sl.name.is_empty() {
                let created = self.w.create(self.w.slices, v)?;
                created.name.clone()
            } else {
                self.w.replace(self.w.slices, &sl.name, v)?;
                sl.name.clone()
            };
            kept.push(SliceState {
                name,
                pods: sl.pods.clone(),
            });
        }
        for sl in slices
            .iter()
            .filter(|sl| sl.pods.is_empty() && !sl.name.is_empty())
        {
            self.w.delete(self.w.slices, &sl.name)?;
        }
        self.svcs[s].slices = kept;
        Ok(())
    }

    /// Moves the endpoints of the smallest slice into the others (if they fit), the way the
    /// controller consolidates: the receiving slices are written first, then the emptied slice
    /// is deleted.
    fn repack(&mut self, s: usize) -> Result<(), ApiError> {
        let max = self.cfg.max_endpoints_per_slice.max(1);
        let mut slices = self.svcs[s].slices.clone();
        if slices.len() < 2 {
            return Ok(());
        }
        let (src, _) = slices
            .iter()
            .enumerate()
            .min_by_key(|(_, sl)| sl.pods.len())
            .unwrap_or((0, &slices[0]));
        let room: usize = slices
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != src)
            .map(|(_, sl)| max - sl.pods.len().min(max))
            .sum();
        if room < slices[src].pods.len() {
            return Ok(());
        }
        let moving = std::mem::take(&mut slices[src].pods);
        for n in moving {
            if let Some(sl) = slices
                .iter_mut()
                .enumerate()
                .find(|(i, sl)| *i != src && sl.pods.len() < max)
                .map(|(_, sl)| sl)
            {
                sl.pods.push(n);
            }
        }
        self.write_slices(s, &slices)
    }
}

/// A [`Churn`] running in the background; see [`Churn::run`].
pub struct Running {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<Churn, ApiError>>,
}

impl Running {
    /// Stops after the current step and hands the generator back.
    pub async fn stop(mut self) -> Result<Churn, ApiError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match (&mut self.task).await {
            Ok(r) => r,
            Err(e) => Err(ApiError::new(
                500,
                "InternalError",
                format!("churn task failed: {e}"),
            )),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}
