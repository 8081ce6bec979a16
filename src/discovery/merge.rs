//! The merge rules of the [module docs](super), as pure functions from objects to a snapshot's
//! content: slices (or an Endpoints object) in, sorted and selected instances out.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;

use smol_str::SmolStr;

use super::snapshot::{Instance, InstanceHints, InstanceMetadata, ServiceState, TopologyFilter};
use super::{DiscoveryOptions, IpFamilyPreference, MANAGED_BY_LABEL, OVER_CAPACITY_ANNOTATION};

/// A `v1beta1` endpoint's `topology` label for its zone (its `v1` field `zone`).
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// A `v1beta1` endpoint's `topology` label for its node (its `v1` field `nodeName`).
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
use crate::model::{
    EndpointAddress, EndpointPort, EndpointSlice, Endpoints, ForName, ObjectReference,
    PartialObjectMetadata, Service,
};

/// A slice with the local observation sequence of its latest add/update (0 when unknown).
pub(crate) struct ObservedSlice {
    pub slice: Arc<EndpointSlice>,
    pub seq: u64,
}

/// What the merge needs besides the endpoint objects.
pub(crate) struct MergeContext<'a> {
    pub options: &'a DiscoveryOptions,
    pub namespace: &'a str,
    pub port_name: &'a str,
    /// The Service, when known (for `appProtocol` when a slice has none).
    pub service: Option<&'a Service>,
    /// Pod metadata by Pod name, when joining is on.
    pub pod: &'a dyn Fn(&str, &str) -> Option<Arc<InstanceMetadata>>,
}

/// The computed content of a snapshot.
#[derive(Debug, PartialEq)]
pub(crate) struct Merged {
    pub state: ServiceState,
    pub instances: Vec<Instance>,
    pub terminating_fallback: bool,
    pub topology: TopologyFilter,
    pub truncated: bool,
}

/// An instance before selection, with what selection needs.
struct Candidate {
    instance: Instance,
    for_zones: Vec<SmolStr>,
    for_nodes: Vec<SmolStr>,
}

/// Rules 1–9 over a Service's slices.
pub(crate) fn from_slices(slices: &[ObservedSlice], ctx: &MergeContext<'_>) -> Merged {
    // key -> (seq, slice name, candidate); rule 5.
    let mut unique: HashMap<(IpAddr, u16), (u64, &str, Candidate)> = HashMap::new();
    for ObservedSlice { slice, seq } in slices {
        if !matches!(slice.address_type.as_str(), "IPv4" | "IPv6") {
            continue;
        }
        if let Some(want) = &ctx.options.managed_by {
            if slice.metadata.labels.get(MANAGED_BY_LABEL) != Some(want) {
                continue;
            }
        }
        let Some((number, app_protocol)) = selected_port(&slice.ports, ctx) else {
            continue;
        };
        for ep in &slice.endpoints {
            let Some(address) = ep.addresses.first().and_then(|a| a.parse::<IpAddr>().ok()) else {
                continue;
            };
            let conditions = &ep.conditions;
            let pod = pod_of(ep.target_ref.as_ref(), ctx.namespace);
            let metadata = pod_metadata(pod.as_deref(), ctx);
            let hints = ep.hints.as_ref();
            let for_zones = hints.map(|h| names(&h.for_zones)).unwrap_or_default();
            let for_nodes = hints.map(|h| names(&h.for_nodes)).unwrap_or_default();
            let candidate = Candidate {
                instance: Instance {
                    address,
                    port: number,
                    ready: conditions.ready.unwrap_or(true),
                    serving: conditions.serving.unwrap_or(true),
                    terminating: conditions.terminating.unwrap_or(false),
                    // v1beta1 (servers before 1.21) has them as topology labels instead.
                    zone: ep
                        .zone
                        .clone()
                        .or_else(|| ep.topology.get(ZONE_LABEL).map(SmolStr::from)),
                    node: ep
                        .node_name
                        .clone()
                        .or_else(|| ep.topology.get(HOSTNAME_LABEL).map(SmolStr::from)),
                    hostname: ep.hostname.clone(),
                    pod,
                    app_protocol: app_protocol.clone(),
                    hints: (!for_zones.is_empty() || !for_nodes.is_empty()).then(|| {
                        Box::new(InstanceHints {
                            for_zones: for_zones.clone(),
                            for_nodes: for_nodes.clone(),
                        })
                    }),
                    metadata,
                },
                for_zones,
                for_nodes,
            };
            let name = slice.metadata.name.as_str();
            match unique.get(&(address, number)) {
                Some((s, n, _))
                    if (*s, std::cmp::Reverse(*n)) >= (*seq, std::cmp::Reverse(name)) => {}
                _ => {
                    unique.insert((address, number), (*seq, name, candidate));
                }
            }
        }
    }
    let candidates = unique.into_values().map(|(_, _, c)| c).collect();
    select(candidates, ctx.options, false)
}

/// The port named `ctx.port_name` among `ports` (an EndpointSlice's or an Endpoints subset's): its
/// number, and its appProtocol or else the Service port's.
fn selected_port(ports: &[EndpointPort], ctx: &MergeContext<'_>) -> Option<(u16, Option<SmolStr>)> {
    let port = ports
        .iter()
        .find(|p| p.name.as_deref().unwrap_or("") == ctx.port_name)?;
    let number = port.port.and_then(|n| u16::try_from(n).ok())?;
    let app_protocol = port
        .app_protocol
        .clone()
        .or_else(|| service_app_protocol(ctx));
    Some((number, app_protocol))
}

/// The same rules over a v1 Endpoints object (no conditions beyond ready / not ready, no zones,
/// no hints).
pub(crate) fn from_endpoints(endpoints: &Endpoints, ctx: &MergeContext<'_>) -> Merged {
    let over_capacity = endpoints.metadata.annotations.get(OVER_CAPACITY_ANNOTATION);
    if let Some(value) = over_capacity {
        tracing::warn!(
            namespace = %ctx.namespace,
            endpoints = %endpoints.metadata.name,
            %value,
            "v1 Endpoints over capacity: the list is cut at 1000 addresses; use EndpointSlices"
        );
    }
    let mut unique: BTreeMap<(IpAddr, u16), Candidate> = BTreeMap::new();
    for subset in &endpoints.subsets {
        let Some((number, app_protocol)) = selected_port(&subset.ports, ctx) else {
            continue;
        };
        let all = subset
            .addresses
            .iter()
            .map(|a| (a, true))
            .chain(subset.not_ready_addresses.iter().map(|a| (a, false)));
        for (addr, ready) in all {
            let Some(c) = endpoints_candidate(addr, ready, number, &app_protocol, ctx) else {
                continue;
            };
            // A ready copy wins over a not-ready one; otherwise the first.
            let key = c.instance.key();
            match unique.get(&key) {
                Some(old) if old.instance.ready || !ready => {}
                _ => {
                    unique.insert(key, c);
                }
            }
        }
    }
    let truncated = over_capacity.is_some_and(|v| v == "truncated");
    select(unique.into_values().collect(), ctx.options, truncated)
}

fn endpoints_candidate(
    addr: &EndpointAddress,
    ready: bool,
    port: u16,
    app_protocol: &Option<SmolStr>,
    ctx: &MergeContext<'_>,
) -> Option<Candidate> {
    let address = addr.ip.parse::<IpAddr>().ok()?;
    let pod = pod_of(addr.target_ref.as_ref(), ctx.namespace);
    let metadata = pod_metadata(pod.as_deref(), ctx);
    Some(Candidate {
        instance: Instance {
            address,
            port,
            ready,
            serving: ready,
            terminating: false,
            zone: None,
            node: addr.node_name.clone(),
            hostname: addr.hostname.clone(),
            pod,
            app_protocol: app_protocol.clone(),
            hints: None,
            metadata,
        },
        for_zones: Vec::new(),
        for_nodes: Vec::new(),
    })
}

/// Rules 6–9: dual-stack, selection, topology, order.
fn select(mut candidates: Vec<Candidate>, options: &DiscoveryOptions, truncated: bool) -> Merged {
    drop_other_family(&mut candidates, options.ip_family);

    let (mut usable, rest): (Vec<Candidate>, Vec<Candidate>) =
        candidates.into_iter().partition(|c| c.instance.ready);
    let mut terminating_fallback = false;
    let mut not_usable = rest;
    if usable.is_empty() && options.serving_terminating_fallback {
        let (draining, others): (Vec<Candidate>, Vec<Candidate>) = not_usable
            .into_iter()
            .partition(|c| c.instance.serving && c.instance.terminating);
        terminating_fallback = !draining.is_empty();
        usable = draining;
        not_usable = others;
    }

    let mut topology = TopologyFilter::None;
    let here = &options.topology;
    if let Some(node) = &here.node {
        if keep_hinted(&mut usable, node, |c| &c.for_nodes) {
            topology = TopologyFilter::Node;
        }
    }
    if topology == TopologyFilter::None {
        if let Some(zone) = &here.zone {
            if keep_hinted(&mut usable, zone, |c| &c.for_zones) {
                topology = TopologyFilter::Zone;
            }
        }
    }

    let state = if usable.is_empty() {
        ServiceState::NoEndpoints
    } else {
        ServiceState::Ready
    };
    let mut instances: Vec<Instance> = usable.into_iter().map(|c| c.instance).collect();
    if options.include_not_ready {
        instances.extend(not_usable.into_iter().map(|c| c.instance));
    }
    instances.sort_by_key(Instance::key);
    Merged {
        state,
        instances,
        terminating_fallback,
        topology,
        truncated,
    }
}

/// Keeps the candidates whose hints name `here`, if every candidate has hints and some name it
/// (kube-proxy's rule: partial hints mean "do not filter"). Returns whether it filtered.
fn keep_hinted(
    candidates: &mut Vec<Candidate>,
    here: &str,
    hints: impl Fn(&Candidate) -> &Vec<SmolStr>,
) -> bool {
    if candidates.is_empty() || candidates.iter().any(|c| hints(c).is_empty()) {
        return false;
    }
    if !candidates
        .iter()
        .any(|c| hints(c).iter().any(|h| h == here))
    {
        return false;
    }
    candidates.retain(|c| hints(c).iter().any(|h| h == here));
    true
}

/// Rule 6: for a Pod with endpoints of both families, keep only the preferred family.
fn drop_other_family(candidates: &mut Vec<Candidate>, preference: IpFamilyPreference) {
    let mut families: HashMap<&str, (bool, bool)> = HashMap::new();
    for c in candidates.iter() {
        if let Some(pod) = &c.instance.pod {
            let f = families.entry(pod.as_str()).or_default();
            if c.instance.address.is_ipv4() {
                f.0 = true;
            } else {
                f.1 = true;
            }
        }
    }
    let dual: Vec<String> = families
        .into_iter()
        .filter(|(_, (v4, v6))| *v4 && *v6)
        .map(|(pod, _)| pod.to_owned())
        .collect();
    if dual.is_empty() {
        return;
    }
    let keep_v4 = preference == IpFamilyPreference::PreferIpv4;
    candidates.retain(|c| match &c.instance.pod {
        Some(pod) if dual.contains(pod) => c.instance.address.is_ipv4() == keep_v4,
        _ => true,
    });
}

fn names(v: &[ForName]) -> Vec<SmolStr> {
    v.iter().map(|n| n.name.clone()).collect()
}

/// `namespace/name` of a Pod `targetRef` (an empty kind is read as Pod, an empty namespace as the
/// slice's).
fn pod_of(target: Option<&ObjectReference>, namespace: &str) -> Option<String> {
    let t = target?;
    if !(t.kind.is_empty() || t.kind == "Pod") || t.name.is_empty() {
        return None;
    }
    let ns = if t.namespace.is_empty() {
        namespace
    } else {
        &t.namespace
    };
    Some(format!("{ns}/{}", t.name))
}

fn pod_metadata(pod: Option<&str>, ctx: &MergeContext<'_>) -> Option<Arc<InstanceMetadata>> {
    let (ns, name) = pod?.split_once('/')?;
    (ctx.pod)(ns, name)
}

fn service_app_protocol(ctx: &MergeContext<'_>) -> Option<SmolStr> {
    ctx.service?
        .spec
        .ports
        .iter()
        .find(|p| p.name.as_deref().unwrap_or("") == ctx.port_name)
        .and_then(|p| p.app_protocol.as_deref().map(SmolStr::new))
}

/// The metadata an instance carries for a Pod: labels, annotations (without kubectl's copy of the
/// whole object) and Dubbo's `io.dubbo/metadata` JSON object.
pub(crate) fn instance_metadata(pod: &PartialObjectMetadata) -> InstanceMetadata {
    let owned = |(k, v): (&str, &str)| (k.to_owned(), v.to_owned());
    let dubbo = pod
        .metadata
        .annotations
        .get(super::DUBBO_METADATA_ANNOTATION)
        .and_then(|raw| serde_json::from_str::<BTreeMap<String, serde_json::Value>>(raw).ok())
        .map(|m| {
            m.into_iter()
                .map(|(k, v)| match v {
                    serde_json::Value::String(s) => (k, s),
                    other => (k, other.to_string()),
                })
                .collect()
        });
    InstanceMetadata {
        labels: pod.metadata.labels.iter().map(owned).collect(),
        annotations: pod
            .metadata
            .annotations
            .iter()
            .filter(|(k, _)| *k != "kubectl.kubernetes.io/last-applied-configuration")
            .map(owned)
            .collect(),
        dubbo,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn slice(name: &str, v: serde_json::Value) -> Arc<EndpointSlice> {
        let mut s: EndpointSlice = serde_json::from_value(v).unwrap();
        s.metadata.name = name.into();
        Arc::new(s)
    }

    fn merge(slices: Vec<(Arc<EndpointSlice>, u64)>, options: &DiscoveryOptions) -> Merged {
        let observed: Vec<ObservedSlice> = slices
            .into_iter()
            .map(|(slice, seq)| ObservedSlice { slice, seq })
            .collect();
        let none = |_: &str, _: &str| None;
        let ctx = MergeContext {
            options,
            namespace: "ns",
            port_name: "http",
            service: None,
            pod: &none,
        };
        from_slices(&observed, &ctx)
    }

    fn ep(ip: &str, ready: Option<bool>, terminating: Option<bool>) -> serde_json::Value {
        json!({"addresses": [ip], "conditions": {"ready": ready, "serving": ready.map(|_| true), "terminating": terminating},
               "targetRef": {"kind": "Pod", "name": format!("p-{ip}")}})
    }

    fn v4(endpoints: Vec<serde_json::Value>, port: i32) -> serde_json::Value {
        json!({"addressType": "IPv4", "endpoints": endpoints, "ports": [{"name": "http", "port": port}]})
    }

    #[test]
    fn nil_conditions_are_ready_serving_not_terminating() {
        let s = slice(
            "a",
            v4(
                vec![json!({"addresses": ["10.0.0.1"], "conditions": {}})],
                80,
            ),
        );
        let m = merge(vec![(s, 1)], &DiscoveryOptions::default());
        assert_eq!(m.state, ServiceState::Ready);
        let i = &m.instances[0];
        assert!(i.ready && i.serving && !i.terminating);
    }

    #[test]
    fn duplicate_prefers_newest_observed_slice_then_smaller_name() {
        let old = slice("a", v4(vec![ep("10.0.0.1", Some(false), None)], 80));
        let new = slice("b", v4(vec![ep("10.0.0.1", Some(true), None)], 80));
        let o = DiscoveryOptions {
            include_not_ready: true,
            ..Default::default()
        };
        let m = merge(vec![(old.clone(), 1), (new.clone(), 2)], &o);
        assert_eq!(m.instances.len(), 1);
        assert!(m.instances[0].ready);
        let m = merge(vec![(new.clone(), 2), (old.clone(), 3)], &o);
        assert!(!m.instances[0].ready);
        // Tie: the smaller slice name ("a") wins, whatever the input order.
        let m1 = merge(vec![(old.clone(), 0), (new.clone(), 0)], &o);
        let m2 = merge(vec![(new, 0), (old, 0)], &o);
        assert_eq!(m1, m2);
        assert!(!m1.instances[0].ready);
    }

    #[test]
    fn port_is_resolved_per_slice_and_fqdn_is_skipped() {
        let a = slice("a", v4(vec![ep("10.0.0.2", None, None)], 8080));
        let b = slice("b", v4(vec![ep("10.0.0.1", None, None)], 9090));
        let other = slice(
            "c",
            json!({"addressType": "IPv4", "endpoints": [ep("10.0.0.3", None, None)], "ports": [{"name": "grpc", "port": 1}]}),
        );
        let fqdn = slice(
            "d",
            json!({"addressType": "FQDN", "endpoints": [{"addresses": ["x.example"]}], "ports": [{"name": "http", "port": 1}]}),
        );
        let m = merge(
            vec![(a, 1), (b, 2), (other, 3), (fqdn, 4)],
            &DiscoveryOptions::default(),
        );
        let got: Vec<String> = m
            .instances
            .iter()
            .map(|i| i.socket_addr().to_string())
            .collect();
        assert_eq!(got, ["10.0.0.1:9090", "10.0.0.2:8080"]);
    }

    #[test]
    fn terminating_fallback_only_without_ready() {
        let s = slice(
            "a",
            v4(
                vec![
                    ep("10.0.0.1", Some(false), Some(true)),
                    ep("10.0.0.2", Some(false), None),
                ],
                80,
            ),
        );
        let m = merge(vec![(s.clone(), 1)], &DiscoveryOptions::default());
        assert!(m.terminating_fallback);
        assert_eq!(m.state, ServiceState::Ready);
        assert_eq!(m.instances.len(), 1);
        let off = DiscoveryOptions {
            serving_terminating_fallback: false,
            ..Default::default()
        };
        let m = merge(vec![(s, 1)], &off);
        assert_eq!(m.state, ServiceState::NoEndpoints);
        assert!(m.instances.is_empty());
    }

    #[test]
    fn dual_stack_counts_a_pod_once() {
        let a = slice("a", v4(vec![ep("10.0.0.1", None, None)], 80));
        let b = slice(
            "b",
            json!({"addressType": "IPv6", "ports": [{"name": "http", "port": 80}],
                   "endpoints": [{"addresses": ["fd00::1"], "targetRef": {"kind": "Pod", "name": "p-10.0.0.1"}}]}),
        );
        let m = merge(
            vec![(a.clone(), 1), (b.clone(), 2)],
            &DiscoveryOptions::default(),
        );
        assert_eq!(m.instances.len(), 1);
        assert!(m.instances[0].address.is_ipv4());
        let v6 = DiscoveryOptions {
            ip_family: IpFamilyPreference::PreferIpv6,
            ..Default::default()
        };
        let m = merge(vec![(a, 1), (b, 2)], &v6);
        assert!(m.instances[0].address.is_ipv6());
    }

    #[test]
    fn topology_hints_filter_only_when_complete() {
        let hinted = |ip: &str, zone: &str, node: &str| json!({"addresses": [ip], "hints": {"forZones": [{"name": zone}], "forNodes": [{"name": node}]}});
        let s = slice(
            "a",
            v4(
                vec![
                    hinted("10.0.0.1", "z1", "n1"),
                    hinted("10.0.0.2", "z1", "n2"),
                    hinted("10.0.0.3", "z2", "n3"),
                ],
                80,
            ),
        );
        let mut o = DiscoveryOptions::default();
        o.topology.zone = Some("z1".into());
        let m = merge(vec![(s.clone(), 1)], &o);
        assert_eq!(m.topology, TopologyFilter::Zone);
        assert_eq!(m.instances.len(), 2);
        o.topology.node = Some("n2".into());
        let m = merge(vec![(s.clone(), 1)], &o);
        assert_eq!(m.topology, TopologyFilter::Node);
        assert_eq!(m.instances.len(), 1);
        // The instance carries its hints.
        let hints = m.instances[0].hints.as_deref().unwrap();
        assert_eq!(
            (&hints.for_zones[..], &hints.for_nodes[..]),
            (&["z1".into()][..], &["n2".into()][..])
        );
        // One endpoint without hints: no filtering.
        let partial = slice("b", v4(vec![json!({"addresses": ["10.0.0.9"]})], 80));
        let m = merge(vec![(s, 1), (partial, 2)], &o);
        assert_eq!(m.topology, TopologyFilter::None);
        assert_eq!(m.instances.len(), 4);
        assert!(m.instances.iter().any(|i| i.hints.is_none()));
    }

    #[test]
    fn endpoints_over_capacity_is_flagged() {
        let e: Endpoints = serde_json::from_value(json!({
            "metadata": {"name": "web", "annotations": {OVER_CAPACITY_ANNOTATION: "truncated"}},
            "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "notReadyAddresses": [{"ip": "10.0.0.2"}],
                         "ports": [{"name": "http", "port": 80}]}]
        }))
        .unwrap();
        let none = |_: &str, _: &str| None;
        let options = DiscoveryOptions::default();
        let ctx = MergeContext {
            options: &options,
            namespace: "ns",
            port_name: "http",
            service: None,
            pod: &none,
        };
        let m = from_endpoints(&e, &ctx);
        assert!(m.truncated);
        assert_eq!(m.instances.len(), 1);
    }

    #[test]
    fn dubbo_metadata_is_parsed() {
        let p: PartialObjectMetadata = serde_json::from_value(json!({
            "metadata": {"name": "p", "annotations": {"io.dubbo/metadata": "{\"dubbo.revision\":\"abc\",\"weight\":100}"}}
        }))
        .unwrap();
        let m = instance_metadata(&p);
        let d = m.dubbo.unwrap();
        assert_eq!(d["dubbo.revision"], "abc");
        assert_eq!(d["weight"], "100");
    }
}
