//! Typed structs for the kinds this crate itself uses: Pod, Service, Endpoints, EndpointSlice,
//! ConfigMap, Namespace, Node.
//!
//! They carry the fields an informer, a discovery client or a controller reads. Fields the structs do
//! not name are skipped while decoding (never an error); use [`DynamicObject`](crate::DynamicObject)
//! when every field must survive a round trip.

use super::StringMap;

use serde::{Deserialize, Serialize};

use super::meta::{exact_vec, null_as_default};
use super::{ApiResource, Object, ObjectMeta, Resource};

/// Implements [`Object`] and [`Resource`] for a typed kind with a `metadata` field.
macro_rules! kind {
    ($ty:ident, $group:literal, $version:literal, $plural:literal, $namespaced:literal) => {
        impl Object for $ty {
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
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
///         "status":{"phase":"Running","podIP":"10.0.0.7"}}"#,
/// ).unwrap();
/// assert_eq!(p.status.pod_ip.as_deref(), Some("10.0.0.7"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: PodSpec,
    #[serde(default)]
    pub status: PodStatus,
}
kind!(Pod, "", "v1", "pods", true);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdomain: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    #[serde(default, deserialize_with = "exact_vec")]
    pub containers: Vec<Container>,
    #[serde(
        default,
        skip_serializing_if = "Labels::is_empty",
        deserialize_with = "null_as_default"
    )]
    pub node_selector: Labels,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub ports: Vec<ContainerPort>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub container_port: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "podIP")]
    pub pod_ip: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        rename = "podIPs",
        deserialize_with = "exact_vec"
    )]
    pub pod_ips: Vec<PodIp>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PodIp {
    #[serde(default)]
    pub ip: String,
}

/// A status condition (`type`, `status`, reason, message).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(default, rename = "type")]
    pub type_: String,
    /// `"True"`, `"False"` or `"Unknown"`.
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
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
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: ServiceSpec,
}
kind!(Service, "", "v1", "services", true);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub ports: Vec<ServicePort>,
    /// `None` for a selector-less Service (endpoints managed by hand).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<Labels>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "clusterIP")]
    pub cluster_ip: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        rename = "clusterIPs",
        deserialize_with = "exact_vec"
    )]
    pub cluster_ips: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "type")]
    pub type_: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_name: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    pub port: i32,
    /// A port number or a named container port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<serde_json::Value>,
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
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub subsets: Vec<EndpointSubset>,
}
kind!(Endpoints, "", "v1", "endpoints", true);

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointSubset {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub addresses: Vec<EndpointAddress>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub not_ready_addresses: Vec<EndpointAddress>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub ports: Vec<EndpointPort>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointAddress {
    #[serde(default)]
    pub ip: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<ObjectReference>,
}

/// A reference to another object (`targetRef`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
}

/// A port of an Endpoints subset or an EndpointSlice.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPort {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
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
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `IPv4`, `IPv6` or `FQDN`.
    #[serde(default)]
    pub address_type: String,
    #[serde(default, deserialize_with = "exact_vec")]
    pub endpoints: Vec<Endpoint>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
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
    #[serde(default, deserialize_with = "exact_vec")]
    pub addresses: Vec<String>,
    #[serde(default)]
    pub conditions: EndpointConditions,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<ObjectReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<bool>,
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
    pub for_zones: Vec<ForName>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub for_nodes: Vec<ForName>,
}

/// `{"name": ...}`, an entry of `hints.forZones` / `hints.forNodes`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForName {
    #[serde(default)]
    pub name: String,
}

// ---------------------------------------------------------------------------------------------------
// ConfigMap, Namespace, Node

/// A ConfigMap (`v1`, namespaced).
///
/// ```
/// let c: informer::ConfigMap = serde_json::from_str(r#"{"metadata":{"name":"c"},"data":{"k":"v"}}"#).unwrap();
/// assert_eq!(c.data["k"], "v");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(
        default,
        skip_serializing_if = "Labels::is_empty",
        deserialize_with = "null_as_default"
    )]
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
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: NamespaceStatus,
}
kind!(Namespace, "", "v1", "namespaces", false);

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceStatus {
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
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: NodeSpec,
    #[serde(default)]
    pub status: NodeStatus,
}
kind!(Node, "", "v1", "nodes", false);

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSpec {
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "podCIDR")]
    pub pod_cidr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<bool>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeStatus {
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub addresses: Vec<NodeAddress>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeAddress {
    #[serde(default, rename = "type")]
    pub type_: String,
    #[serde(default)]
    pub address: String,
}
