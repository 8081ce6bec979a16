//! Typed structs for the kinds this crate itself uses: Pod, Service, Endpoints, EndpointSlice,
//! ConfigMap, Namespace, Node.
//!
//! They carry the fields an informer, a discovery client or a controller reads, and are the fast
//! path: they decode faster and hold less than a type with every field (figures in the README).
//! Fields the structs do not name are skipped while decoding (never an error). What each leaves
//! out, in short: `Pod` keeps containers' names, images and ports, the node, phase, IPs and
//! conditions (no volumes, resources, probes, env, tolerations, affinity, container statuses);
//! `Service` keeps ports, selector, cluster IPs, type and external name (no session affinity,
//! traffic policies, load-balancer status); `Node` keeps the pod CIDR, schedulability, addresses
//! and conditions (no capacity, taints, node info); `ConfigMap` leaves out `immutable`,
//! `Namespace` its `spec`; `Endpoints` and `EndpointSlice` keep what service discovery reads
//! (addresses, conditions, ports, topology, target references). For every field of any
//! kind, use `k8s-openapi`'s types (feature `k8s-openapi`) or
//! [`DynamicObject`](crate::DynamicObject); never `replace` with a lean kind read from a cache,
//! as it would write back only the fields it names.
//!
//! Short strings that every endpoint repeats (addresses, node names, zones, port names, protocols,
//! reference kinds and names) are [`SmolStr`]s: up to 23 bytes inline, without an allocation. A `SmolStr` reads
//! as a `&str` (`Deref`, `as_str`, `==` with `str` and `String`) and is built with `.into()`.

use super::StringMap;

use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

use super::meta::{exact_vec, null_as_default};
use super::{ApiResource, Object, ObjectMeta, Resource};

/// Implements [`Object`] and [`Resource`] for a typed kind with a `metadata` field.
macro_rules! kind {
    ($ty:ident, $group:literal, $version:literal, $plural:literal, $namespaced:literal) => {
        impl Object for $ty {
            type Meta = ObjectMeta;
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
            #[cfg(feature = "protobuf")]
            fn protobuf_decoder() -> Option<super::ProtobufDecoder<Self>> {
                Some(<Self as super::resource::FromProtobuf>::from_protobuf)
            }
        }
        impl Resource for $ty {
            fn api_resource() -> ApiResource {
                ApiResource::from_static($group, $version, stringify!($ty), $plural, $namespaced)
            }
        }
    };
}

type Labels = StringMap;

// ---------------------------------------------------------------------------------------------------
// Pod

/// A Pod (`v1`, namespaced).
///
/// ```
/// let p: informer::Pod = serde_json::from_str(
///     r#"{"metadata":{"name":"web-0"},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"nginx"}]},
///         "status":{"phase":"Running","hostIP":"192.0.2.1","podIP":"10.0.0.7"}}"#,
/// ).unwrap();
/// assert_eq!(p.status.pod_ip.as_deref(), Some("10.0.0.7"));
/// assert_eq!(p.status.host_ip.as_deref(), Some("192.0.2.1"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pod {
    /// `metadata` of the Kubernetes API's `Pod`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` of the Kubernetes API's `Pod`.
    #[serde(default)]
    pub spec: PodSpec,
    /// `status` of the Kubernetes API's `Pod`.
    #[serde(default)]
    pub status: PodStatus,
}
kind!(Pod, "", "v1", "pods", true);

/// The Kubernetes API's `PodSpec`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// `nodeName` of the Kubernetes API's `PodSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// `hostname` of the Kubernetes API's `PodSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// `subdomain` of the Kubernetes API's `PodSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    /// `serviceAccountName` of the Kubernetes API's `PodSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// `containers` of the Kubernetes API's `PodSpec`.
    #[serde(default, deserialize_with = "exact_vec")]
    pub containers: Vec<Container>,
    #[serde(
        default,
        skip_serializing_if = "Labels::is_empty",
        deserialize_with = "null_as_default"
    )]
    /// `nodeSelector` of the Kubernetes API's `PodSpec`.
    pub node_selector: Labels,
}

/// The Kubernetes API's `Container`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// `name` of the Kubernetes API's `Container`.
    #[serde(default)]
    pub name: String,
    /// `image` of the Kubernetes API's `Container`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `ports` of the Kubernetes API's `Container`.
    pub ports: Vec<ContainerPort>,
}

/// The Kubernetes API's `ContainerPort`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    /// `name` of the Kubernetes API's `ContainerPort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `containerPort` of the Kubernetes API's `ContainerPort`.
    pub container_port: i32,
    /// `protocol` of the Kubernetes API's `ContainerPort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

/// The Kubernetes API's `PodStatus`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    /// `phase` of the Kubernetes API's `PodStatus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// `hostIP` of the Kubernetes API's `PodStatus`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "hostIP")]
    pub host_ip: Option<String>,
    /// `podIP` of the Kubernetes API's `PodStatus`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "podIP")]
    pub pod_ip: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        rename = "podIPs",
        deserialize_with = "exact_vec"
    )]
    /// `podIps` of the Kubernetes API's `PodStatus`.
    pub pod_ips: Vec<PodIp>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `conditions` of the Kubernetes API's `PodStatus`.
    pub conditions: Vec<Condition>,
}

/// The Kubernetes API's `PodIp`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodIp {
    /// `ip` of the Kubernetes API's `PodIp`.
    #[serde(default)]
    pub ip: String,
}

/// A status condition (`type`, `status`, reason, message).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// `type` of the Kubernetes API's `Condition`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `"True"`, `"False"` or `"Unknown"`.
    #[serde(default)]
    pub status: String,
    /// `reason` of the Kubernetes API's `Condition`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `message` of the Kubernetes API's `Condition`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

// ---------------------------------------------------------------------------------------------------
// Service

/// A Service (`v1`, namespaced).
///
/// ```
/// let s: informer::Service = serde_json::from_str(
///     r#"{"metadata":{"name":"web"},"spec":{"ports":[{"name":"http","port":80,"targetPort":8080}]}}"#,
/// ).unwrap();
/// assert_eq!(s.spec.ports[0].port, 80);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Service {
    /// `metadata` of the Kubernetes API's `Service`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` of the Kubernetes API's `Service`.
    #[serde(default)]
    pub spec: ServiceSpec,
}
kind!(Service, "", "v1", "services", true);

/// The Kubernetes API's `ServiceSpec`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `ports` of the Kubernetes API's `ServiceSpec`.
    pub ports: Vec<ServicePort>,
    /// `None` for a selector-less Service (endpoints managed by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Labels>,
    /// `clusterIP` of the Kubernetes API's `ServiceSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        rename = "clusterIPs",
        deserialize_with = "exact_vec"
    )]
    /// `clusterIps` of the Kubernetes API's `ServiceSpec`.
    pub cluster_ips: Vec<String>,
    /// `type` of the Kubernetes API's `ServiceSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "type")]
    pub type_: Option<String>,
    /// `externalName` of the Kubernetes API's `ServiceSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_name: Option<String>,
}

/// The Kubernetes API's `ServicePort`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// `name` of the Kubernetes API's `ServicePort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `protocol` of the Kubernetes API's `ServicePort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// `port` of the Kubernetes API's `ServicePort`.
    pub port: i32,
    /// A port number or a named container port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<serde_json::Value>,
    /// `appProtocol` of the Kubernetes API's `ServicePort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
}

// ---------------------------------------------------------------------------------------------------
// Endpoints

/// The legacy Endpoints object (`v1`, namespaced).
///
/// ```
/// let e: informer::Endpoints = serde_json::from_str(
///     r#"{"metadata":{"name":"web"},"subsets":[{"addresses":[{"ip":"10.0.0.1"}],"ports":[{"port":8080}]}]}"#,
/// ).unwrap();
/// assert_eq!(e.subsets[0].addresses[0].ip, "10.0.0.1");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Endpoints {
    /// `metadata` of the Kubernetes API's `Endpoints`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `subsets` of the Kubernetes API's `Endpoints`.
    pub subsets: Vec<EndpointSubset>,
}
kind!(Endpoints, "", "v1", "endpoints", true);

/// The Kubernetes API's `EndpointSubset`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSubset {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `addresses` of the Kubernetes API's `EndpointSubset`.
    pub addresses: Vec<EndpointAddress>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `notReadyAddresses` of the Kubernetes API's `EndpointSubset`.
    pub not_ready_addresses: Vec<EndpointAddress>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `ports` of the Kubernetes API's `EndpointSubset`.
    pub ports: Vec<EndpointPort>,
}

/// The Kubernetes API's `EndpointAddress`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointAddress {
    /// `ip` of the Kubernetes API's `EndpointAddress`.
    #[serde(default)]
    pub ip: SmolStr,
    /// `hostname` of the Kubernetes API's `EndpointAddress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<SmolStr>,
    /// `nodeName` of the Kubernetes API's `EndpointAddress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<SmolStr>,
    /// `targetRef` of the Kubernetes API's `EndpointAddress`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<ObjectReference>,
}

/// A reference to another object (`targetRef`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// `kind` of the Kubernetes API's `ObjectReference`.
    #[serde(default, skip_serializing_if = "SmolStr::is_empty")]
    pub kind: SmolStr,
    /// `namespace` of the Kubernetes API's `ObjectReference`.
    #[serde(default, skip_serializing_if = "SmolStr::is_empty")]
    pub namespace: SmolStr,
    /// `name` of the Kubernetes API's `ObjectReference`.
    #[serde(default, skip_serializing_if = "SmolStr::is_empty")]
    pub name: SmolStr,
    /// `uid` of the Kubernetes API's `ObjectReference`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// A port of an Endpoints subset or an EndpointSlice.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPort {
    /// `name` of the Kubernetes API's `EndpointPort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<SmolStr>,
    /// `port` of the Kubernetes API's `EndpointPort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    /// `protocol` of the Kubernetes API's `EndpointPort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<SmolStr>,
    /// `appProtocol` of the Kubernetes API's `EndpointPort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<SmolStr>,
}

// ---------------------------------------------------------------------------------------------------
// EndpointSlice

/// An EndpointSlice (`discovery.k8s.io/v1`, namespaced). Also decodes `v1beta1` objects, whose
/// `topology` map is kept in [`Endpoint::topology`].
///
/// ```
/// let s: informer::EndpointSlice = serde_json::from_str(
///     r#"{"metadata":{"name":"web-abc","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4",
///         "endpoints":[{"addresses":["10.0.0.1"],"conditions":{"ready":true},"zone":"a"}],
///         "ports":[{"name":"http","port":8080}]}"#,
/// ).unwrap();
/// assert_eq!(s.endpoints[0].conditions.ready, Some(true));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSlice {
    /// `metadata` of the Kubernetes API's `EndpointSlice`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `IPv4`, `IPv6` or `FQDN`.
    #[serde(default)]
    pub address_type: SmolStr,
    /// `endpoints` of the Kubernetes API's `EndpointSlice`.
    #[serde(default, deserialize_with = "exact_vec")]
    pub endpoints: Vec<Endpoint>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `ports` of the Kubernetes API's `EndpointSlice`.
    pub ports: Vec<EndpointPort>,
}
kind!(
    EndpointSlice,
    "discovery.k8s.io",
    "v1",
    "endpointslices",
    true
);

/// One endpoint of an EndpointSlice.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// `addresses` of the Kubernetes API's `Endpoint`.
    #[serde(default, deserialize_with = "exact_vec")]
    pub addresses: Vec<SmolStr>,
    /// `conditions` of the Kubernetes API's `Endpoint`.
    #[serde(default)]
    pub conditions: EndpointConditions,
    /// `hostname` of the Kubernetes API's `Endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<SmolStr>,
    /// `targetRef` of the Kubernetes API's `Endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<ObjectReference>,
    /// `nodeName` of the Kubernetes API's `Endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<SmolStr>,
    /// `zone` of the Kubernetes API's `Endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<SmolStr>,
    /// `hints` of the Kubernetes API's `Endpoint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hints: Option<EndpointHints>,
    /// `v1beta1` only: topology labels (`kubernetes.io/hostname`, `topology.kubernetes.io/zone`).
    #[serde(
        default,
        skip_serializing_if = "Labels::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub topology: Labels,
}

/// Endpoint conditions; `None` means "unknown", which consumers read as ready/serving and not
/// terminating.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointConditions {
    /// `ready` of the Kubernetes API's `EndpointConditions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// `serving` of the Kubernetes API's `EndpointConditions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<bool>,
    /// `terminating` of the Kubernetes API's `EndpointConditions`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminating: Option<bool>,
}

/// Topology-aware routing hints.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointHints {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `forZones` of the Kubernetes API's `EndpointHints`.
    pub for_zones: Vec<ForName>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `forNodes` of the Kubernetes API's `EndpointHints`.
    pub for_nodes: Vec<ForName>,
}

/// `{"name": ...}`, an entry of `hints.forZones` / `hints.forNodes`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForName {
    /// `name` of the Kubernetes API's `ForName`.
    #[serde(default)]
    pub name: SmolStr,
}

// ---------------------------------------------------------------------------------------------------
// ConfigMap, Namespace, Node

/// A ConfigMap (`v1`, namespaced).
///
/// ```
/// let c: informer::ConfigMap = serde_json::from_str(r#"{"metadata":{"name":"c"},"data":{"k":"v"}}"#).unwrap();
/// assert_eq!(&c.data["k"], "v");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    /// `metadata` of the Kubernetes API's `ConfigMap`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(
        default,
        skip_serializing_if = "Labels::is_empty",
        deserialize_with = "null_as_default"
    )]
    /// `data` of the Kubernetes API's `ConfigMap`.
    pub data: StringMap,
    /// Base64 values, kept as sent.
    #[serde(
        default,
        skip_serializing_if = "Labels::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub binary_data: StringMap,
}
kind!(ConfigMap, "", "v1", "configmaps", true);

/// A Namespace (`v1`, cluster-scoped).
///
/// ```
/// use informer::Resource;
/// assert!(!informer::Namespace::api_resource().namespaced);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Namespace {
    /// `metadata` of the Kubernetes API's `Namespace`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `status` of the Kubernetes API's `Namespace`.
    #[serde(default)]
    pub status: NamespaceStatus,
}
kind!(Namespace, "", "v1", "namespaces", false);

/// The Kubernetes API's `NamespaceStatus`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceStatus {
    /// `phase` of the Kubernetes API's `NamespaceStatus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

/// A Node (`v1`, cluster-scoped).
///
/// ```
/// let n: informer::Node = serde_json::from_str(
///     r#"{"metadata":{"name":"n1"},"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.5"}]}}"#,
/// ).unwrap();
/// assert_eq!(n.status.addresses[0].address, "10.0.0.5");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// `metadata` of the Kubernetes API's `Node`.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `spec` of the Kubernetes API's `Node`.
    #[serde(default)]
    pub spec: NodeSpec,
    /// `status` of the Kubernetes API's `Node`.
    #[serde(default)]
    pub status: NodeStatus,
}
kind!(Node, "", "v1", "nodes", false);

/// The Kubernetes API's `NodeSpec`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    /// `podCIDR` of the Kubernetes API's `NodeSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "podCIDR")]
    pub pod_cidr: Option<String>,
    /// `unschedulable` of the Kubernetes API's `NodeSpec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<bool>,
}

/// The Kubernetes API's `NodeStatus`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `addresses` of the Kubernetes API's `NodeStatus`.
    pub addresses: Vec<NodeAddress>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// `conditions` of the Kubernetes API's `NodeStatus`.
    pub conditions: Vec<Condition>,
}

/// The Kubernetes API's `NodeAddress`: the fields this crate reads (others are skipped).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddress {
    /// `type` of the Kubernetes API's `NodeAddress`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `address` of the Kubernetes API's `NodeAddress`.
    #[serde(default)]
    pub address: String,
}

// ---------------------------------------------------------------------------------------------------
// Scale

/// The `autoscaling/v1` `Scale` of a scalable resource (a Deployment, a StatefulSet, a custom
/// resource with a scale subresource): its desired and current replica counts, read and written
/// through [`Api::get_scale`](crate::Api::get_scale) and its siblings, never listed or watched.
///
/// ```
/// let s: informer::model::Scale = serde_json::from_str(
///     r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"web"},
///         "spec":{"replicas":3},"status":{"replicas":2,"selector":"app=web"}}"#,
/// ).unwrap();
/// assert_eq!((s.spec.replicas, s.status.replicas), (Some(3), 2));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Scale {
    /// The scaled object's metadata (name, namespace, uid, resourceVersion).
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The desired state.
    #[serde(default)]
    pub spec: ScaleSpec,
    /// The observed state.
    #[serde(default)]
    pub status: ScaleStatus,
}

impl Object for Scale {
    type Meta = ObjectMeta;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// `Scale.spec`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleSpec {
    /// The desired number of replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

/// `Scale.status`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScaleStatus {
    /// The number of replicas observed.
    #[serde(default)]
    pub replicas: i32,
    /// The label selector of the replicas, in its string form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}
