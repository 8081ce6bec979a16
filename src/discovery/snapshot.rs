//! What discovery hands out: versioned, immutable, deterministically ordered snapshots of one
//! Service port, and the diff between two of them.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

/// What is known about a Service.
///
/// ```
/// use informer::discovery::ServiceState;
/// assert_ne!(ServiceState::NotSynced, ServiceState::NoEndpoints);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ServiceState {
    /// The caches have not finished their first list: nothing can be said yet.
    NotSynced,
    /// The Service does not exist (or, without a Service informer, no EndpointSlice / Endpoints
    /// object names it: the controllers keep one, possibly empty, for every Service).
    ServiceAbsent,
    /// The Service exists but has no usable endpoint on this port (instances may still list
    /// not-ready endpoints when [`include_not_ready`](super::DiscoveryOptions::include_not_ready)
    /// is set).
    NoEndpoints,
    /// At least one usable instance: ready, or serving-and-terminating under the fallback.
    Ready,
}

/// How fresh a snapshot is.
///
/// ```
/// use informer::discovery::Freshness;
/// assert!(Freshness::Live.age().is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Freshness {
    /// Computed from the informer caches, which follow the apiserver.
    Live,
    /// Read directly from the apiserver at `at` because the caches were not synced yet.
    Fetched {
        /// When it was read.
        at: SystemTime,
    },
    /// Loaded from the last-known-good file; it was saved at `saved_at` and may be out of date.
    Stale {
        /// When the file was written.
        saved_at: SystemTime,
    },
}

impl Freshness {
    /// How long ago the data was read (`None` for live data).
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use informer::discovery::Freshness;
    /// let f = Freshness::Stale { saved_at: SystemTime::now() - Duration::from_secs(60) };
    /// assert!(f.age().unwrap() >= Duration::from_secs(60));
    /// ```
    pub fn age(&self) -> Option<Duration> {
        match self {
            Freshness::Live => None,
            Freshness::Fetched { at } => Some(at.elapsed().unwrap_or_default()),
            Freshness::Stale { saved_at } => Some(saved_at.elapsed().unwrap_or_default()),
        }
    }
}

/// Which topology filter produced the instance list.
///
/// ```
/// use informer::discovery::TopologyFilter;
/// assert_eq!(TopologyFilter::default(), TopologyFilter::None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TopologyFilter {
    /// Every usable endpoint (no preference configured, or the hints did not allow filtering).
    #[default]
    None,
    /// Only endpoints whose `hints.forNodes` names this node.
    Node,
    /// Only endpoints whose `hints.forZones` names this zone.
    Zone,
}

/// An endpoint's topology hints: the zones and nodes it should serve.
///
/// ```
/// use informer::discovery::InstanceHints;
/// let h = InstanceHints { for_zones: vec!["zone-a".into()], for_nodes: vec![] };
/// assert_eq!(h.for_zones[0], "zone-a");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceHints {
    /// `hints.forZones[*].name`.
    #[serde(default)]
    pub for_zones: Vec<SmolStr>,
    /// `hints.forNodes[*].name`.
    #[serde(default)]
    pub for_nodes: Vec<SmolStr>,
}

/// Pod metadata joined onto an instance (metadata-only Pod informer).
///
/// ```
/// use informer::discovery::InstanceMetadata;
/// let m = InstanceMetadata::default();
/// assert!(m.dubbo.is_none());
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceMetadata {
    /// The Pod's labels.
    pub labels: BTreeMap<String, String>,
    /// The Pod's annotations (without `kubectl.kubernetes.io/last-applied-configuration`).
    pub annotations: BTreeMap<String, String>,
    /// The JSON object of Dubbo's `io.dubbo/metadata` annotation, if present and valid; non-string
    /// values are kept as their JSON text.
    pub dubbo: Option<BTreeMap<String, String>>,
}

/// One endpoint address and port of a Service port.
///
/// Two instances are the same endpoint when [`key`](Self::key) is equal; [`PartialEq`] compares
/// every field (a readiness flip is a change).
///
/// ```
/// use informer::discovery::Instance;
/// let i = Instance::new("10.0.0.1".parse().unwrap(), 8080);
/// assert!(i.ready && i.serving && !i.terminating);
/// assert_eq!(i.socket_addr().to_string(), "10.0.0.1:8080");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// The endpoint's IP address.
    pub address: IpAddr,
    /// The target port of this endpoint (from its slice's port of the requested name).
    pub port: u16,
    /// `conditions.ready` (`None` read as true).
    pub ready: bool,
    /// `conditions.serving` (`None` read as true).
    pub serving: bool,
    /// `conditions.terminating` (`None` read as false).
    pub terminating: bool,
    /// The endpoint's zone (`zone`), when known.
    pub zone: Option<SmolStr>,
    /// The node the endpoint runs on (`nodeName`), when known.
    pub node: Option<SmolStr>,
    /// The endpoint's `hostname`, when set.
    pub hostname: Option<SmolStr>,
    /// The target Pod as `namespace/name`, when `targetRef` is a Pod.
    pub pod: Option<String>,
    /// The port's `appProtocol` (from the slice, else the Service port).
    pub app_protocol: Option<SmolStr>,
    /// The endpoint's topology hints (`hints`), when it has any. Discovery already filters by
    /// them ([`TopologyPreference`](super::TopologyPreference)); they are here for clients that
    /// route by zone themselves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<Box<InstanceHints>>,
    /// Pod labels and annotations, when [`pod_metadata`](super::DiscoveryOptions::pod_metadata)
    /// is on and the Pod is cached.
    #[serde(default, with = "shared_metadata")]
    pub metadata: Option<Arc<InstanceMetadata>>,
}

/// Serde for `Option<Arc<InstanceMetadata>>` without serde's `rc` feature.
mod shared_metadata {
    use std::sync::Arc;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::InstanceMetadata;

    pub fn serialize<S: Serializer>(
        v: &Option<Arc<InstanceMetadata>>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        v.as_deref().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Arc<InstanceMetadata>>, D::Error> {
        Ok(Option::<InstanceMetadata>::deserialize(d)?.map(Arc::new))
    }
}

impl Instance {
    /// A ready, serving, non-terminating instance with nothing else known (for tests and docs).
    ///
    /// ```
    /// let i = informer::discovery::Instance::new("::1".parse().unwrap(), 443);
    /// assert_eq!(i.socket_addr().to_string(), "[::1]:443");
    /// ```
    pub fn new(address: IpAddr, port: u16) -> Instance {
        Instance {
            address,
            port,
            ready: true,
            serving: true,
            terminating: false,
            zone: None,
            node: None,
            hostname: None,
            pod: None,
            app_protocol: None,
            hints: None,
            metadata: None,
        }
    }

    /// Address and port, to connect to.
    ///
    /// ```
    /// let i = informer::discovery::Instance::new("10.1.2.3".parse().unwrap(), 80);
    /// assert_eq!(i.socket_addr().port(), 80);
    /// ```
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.port)
    }

    /// The identity of the endpoint, `(address, port)`: the sort and diff key.
    ///
    /// ```
    /// let i = informer::discovery::Instance::new("10.1.2.3".parse().unwrap(), 80);
    /// assert_eq!(i.key(), ("10.1.2.3".parse().unwrap(), 80));
    /// ```
    pub fn key(&self) -> (IpAddr, u16) {
        (self.address, self.port)
    }
}

/// An immutable view of one Service port at one revision. Handed out as `Arc<Snapshot>`: the same
/// allocation serves [`ServiceDiscovery::instances`](super::ServiceDiscovery::instances) and every subscriber.
///
/// ```
/// use informer::discovery::{Snapshot, ServiceState};
/// let s = Snapshot::not_synced("prod", "web", "http");
/// assert_eq!(s.state, ServiceState::NotSynced);
/// assert!(s.instances.is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub service: String,
    /// The Service port name this snapshot is for (`""` for the single unnamed port).
    pub port_name: String,
    /// Increases (per Service, across its ports) every time the content changes; `0` for a
    /// snapshot that never came from the caches (not synced yet, or fetched).
    pub revision: u64,
    /// Whether the Service exists, has endpoints, and the caches are synced.
    pub state: ServiceState,
    /// Sorted by `(address, port)`: IPv4 before IPv6, numerically.
    pub instances: Vec<Instance>,
    /// True when no endpoint was ready and the serving-and-terminating ones are listed instead.
    pub terminating_fallback: bool,
    /// Which topology hint filter was applied.
    pub topology: TopologyFilter,
    /// True when the source was a v1 Endpoints object marked
    /// `endpoints.kubernetes.io/over-capacity: truncated` (the list misses endpoints).
    pub truncated: bool,
    /// Where this snapshot comes from (live caches, a direct read, or the last-known-good file).
    pub freshness: Freshness,
}

impl Snapshot {
    /// The empty snapshot of a port nothing is known about yet.
    ///
    /// ```
    /// let s = informer::discovery::Snapshot::not_synced("ns", "svc", "");
    /// assert_eq!(s.revision, 0);
    /// ```
    pub fn not_synced(namespace: &str, service: &str, port_name: &str) -> Snapshot {
        Snapshot {
            namespace: namespace.to_owned(),
            service: service.to_owned(),
            port_name: port_name.to_owned(),
            revision: 0,
            state: ServiceState::NotSynced,
            instances: Vec::new(),
            terminating_fallback: false,
            topology: TopologyFilter::None,
            truncated: false,
            freshness: Freshness::Live,
        }
    }

    /// Instances a client should send traffic to: the ready ones, or under the fallback the
    /// serving-and-terminating ones (never not-ready ones listed by `include_not_ready`).
    ///
    /// ```
    /// let s = informer::discovery::Snapshot::not_synced("ns", "svc", "");
    /// assert_eq!(s.usable().count(), 0);
    /// ```
    pub fn usable(&self) -> impl Iterator<Item = &Instance> {
        let fallback = self.terminating_fallback;
        self.instances
            .iter()
            .filter(move |i| i.ready || (fallback && i.serving && i.terminating))
    }

    /// Whether the content (everything but revision and freshness) equals `other`'s.
    ///
    /// ```
    /// let a = informer::discovery::Snapshot::not_synced("ns", "svc", "");
    /// let mut b = a.clone();
    /// b.revision = 7;
    /// assert!(a.same_content(&b));
    /// ```
    pub fn same_content(&self, other: &Snapshot) -> bool {
        self.state == other.state
            && self.instances == other.instances
            && self.terminating_fallback == other.terminating_fallback
            && self.topology == other.topology
            && self.truncated == other.truncated
    }
}

/// The difference between two snapshots, by instance [`key`](Instance::key).
///
/// ```
/// use informer::discovery::{Instance, Snapshot, diff};
/// let old = Snapshot::not_synced("ns", "svc", "");
/// let mut new = old.clone();
/// new.instances.push(Instance::new("10.0.0.1".parse().unwrap(), 80));
/// let d = diff(&old, &new);
/// assert_eq!(d.added.len(), 1);
/// assert!(d.removed.is_empty() && d.updated.is_empty());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceDiff {
    /// Instances whose key is new.
    pub added: Vec<Instance>,
    /// Instances whose key is gone (as they were).
    pub removed: Vec<Instance>,
    /// Instances whose key stayed but whose fields changed (new values).
    pub updated: Vec<Instance>,
}

impl InstanceDiff {
    /// True when nothing was added, removed or updated.
    ///
    /// ```
    /// assert!(informer::discovery::InstanceDiff::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.updated.is_empty()
    }
}

/// Diffs two snapshots' sorted instance lists in one merge pass.
///
/// ```
/// use informer::discovery::{Snapshot, diff};
/// let s = Snapshot::not_synced("ns", "svc", "");
/// assert!(diff(&s, &s).is_empty());
/// ```
pub fn diff(old: &Snapshot, new: &Snapshot) -> InstanceDiff {
    let mut d = InstanceDiff::default();
    let (a, b) = (&old.instances, &new.instances);
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) if x.key() == y.key() => {
                if x != y {
                    d.updated.push(y.clone());
                }
                i += 1;
                j += 1;
            }
            (Some(x), Some(y)) if x.key() < y.key() => {
                d.removed.push(x.clone());
                i += 1;
            }
            (Some(_), Some(y)) => {
                d.added.push(y.clone());
                j += 1;
            }
            (Some(x), None) => {
                d.removed.push(x.clone());
                i += 1;
            }
            (None, Some(y)) => {
                d.added.push(y.clone());
                j += 1;
            }
            (None, None) => unreachable!("loop condition"),
        }
    }
    d
}
