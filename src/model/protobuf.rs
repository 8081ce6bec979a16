//! The apiserver's protobuf (`application/vnd.kubernetes.protobuf`, feature `protobuf`): the
//! envelope every object travels in, and decoders from the Kubernetes messages straight into the
//! typed kinds of this crate (no JSON in between).
//!
//! # The wire
//!
//! A protobuf body (a GET, a LIST, one watch event's object) is the 4 bytes `k8s\0`, then a
//! `runtime.Unknown` message: the object's `apiVersion` and `kind` (field 1), the object's own
//! message (field 2), and a content encoding and type that are empty in practice (fields 3 and 4).
//! A watch stream is a sequence of frames, each a 4-byte big-endian length and a `WatchEvent`
//! message: its type (field 1, `"ADDED"` ...) and a `RawExtension` (field 2) whose bytes are such
//! a body (see [`crate::frame::LengthFrames`] and `watch`). The real 1.20 captures in
//! `fixtures/real-1.20-*-protobuf.http` show both.
//!
//! # What is decoded
//!
//! Each kind's message is mirrored here with only the fields its struct keeps (`Pod`'s mirror
//! names 11 of the Kubernetes Pod's ~70 fields); prost skips every other field by its wire type
//! without reading it, which is most of why this is fast. The field numbers are those of
//! `k8s.io/api`'s `generated.proto` (stable across versions by protobuf's rules).
//!
//! The result equals what the JSON of the same object decodes to (tests compare the two on the
//! real apiserver's answers). Where Go writes a field to JSON only when it is set but always to
//! protobuf (a plain `string` or `int64` with `omitempty`: `PodStatus.phase`, `generation`), an
//! empty or zero value reads as absent, as its JSON does; fields that are pointers in Go keep
//! whether they were sent. Timestamps become the RFC 3339 text the JSON carries (whole seconds,
//! UTC); `managedFields` the JSON array the apiserver writes for them; `ConfigMap.binaryData` its
//! base64.
//!
//! ```
//! use informer::{Endpoints, Object};
//! // An Endpoints' message as kube-apiserver 1.20 sent it (the first item of a real LIST).
//! let message = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/real-1.20-endpoints-pb-1.pb"))?;
//! let decode = Endpoints::protobuf_decoder().expect("a built-in kind");
//! let endpoints = decode(&message)?;
//! assert_eq!((endpoints.metadata.name.as_str(), endpoints.metadata.namespace.as_str()), ("pb-1", "default"));
//! assert_eq!(endpoints.subsets[0].addresses[0].ip, "10.1.0.1");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::time::{Duration, SystemTime};

use bytes::{Buf, Bytes};
use prost::Message;
use smol_str::SmolStr;

use super::meta::RawJson;
use super::resource::FromProtobuf;
use super::{
    ConfigMap, EndpointSlice, Endpoints, ListMeta, Namespace, Node, ObjectMeta, Pod, Service,
    Status, StringMap, kinds,
};

/// The first bytes of every protobuf body.
pub(crate) const MAGIC: &[u8; 4] = b"k8s\0";
/// The media type of a protobuf body (a GET or a LIST).
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";
/// The media type of a protobuf watch stream.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// A decode failure: what was wrong, in words (the caller adds where).
pub(crate) type Failure = String;

// ---------------------------------------------------------------------------------------------------
// The envelope

/// `runtime.TypeMeta`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct TypeMeta {
    #[prost(string, optional, tag = "1")]
    pub api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    pub kind: Option<String>,
}

/// `runtime.Unknown`, the envelope after `k8s\0`; `raw` is a slice of the received bytes.
#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "bytes", optional, tag = "2")]
    raw: Option<Bytes>,
    #[prost(string, optional, tag = "3")]
    content_encoding: Option<String>,
    #[prost(string, optional, tag = "4")]
    content_type: Option<String>,
}

/// An object out of its envelope.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The object's `kind` (empty if the envelope named none).
    pub kind: String,
    /// The object's message, a slice of the bytes the envelope was in.
    pub object: Bytes,
}

/// Opens a protobuf body: checks the magic and reads the `runtime.Unknown` after it.
pub(crate) fn open(body: Bytes) -> Result<Opened, Failure> {
    if !body.starts_with(MAGIC) {
        return Err("a protobuf body that does not start with k8s\\0".into());
    }
    let unknown = Unknown::decode(body.slice(MAGIC.len()..))
        .map_err(|e| format!("the protobuf envelope (runtime.Unknown) does not decode: {e}"))?;
    if let Some(encoding) = unknown.content_encoding.filter(|e| !e.is_empty()) {
        return Err(format!(
            "the protobuf envelope has a content encoding ({encoding:?}) this client does not read"
        ));
    }
    if let Some(ty) = unknown.content_type.filter(|t| !t.is_empty()) {
        return Err(format!(
            "the protobuf envelope holds {ty:?}, not a protobuf message"
        ));
    }
    Ok(Opened {
        kind: unknown.type_meta.and_then(|t| t.kind).unwrap_or_default(),
        object: unknown.raw.unwrap_or_default(),
    })
}

/// `metav1.WatchEvent`: the event's type and its object's body (`k8s\0` and an envelope).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct WatchEvent {
    #[prost(string, optional, tag = "1")]
    pub r#type: Option<String>,
    #[prost(message, optional, tag = "2")]
    pub object: Option<RawExtension>,
}

/// `runtime.RawExtension`.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct RawExtension {
    #[prost(bytes = "bytes", optional, tag = "1")]
    pub raw: Option<Bytes>,
}

// ---------------------------------------------------------------------------------------------------
// Reading fields by hand: metadata spans, list items

/// One field of a message: its number and, for a length-delimited field, its bytes' range in the
/// message (other wire types are stepped over).
struct Field {
    number: u32,
    delimited: Option<std::ops::Range<usize>>,
}

/// The fields of `message` in order, stepping over each by its wire type; `Err` where the
/// message is not well formed.
fn fields(message: &[u8]) -> impl Iterator<Item = Result<Field, Failure>> + '_ {
    use prost::encoding::{DecodeContext, WireType, decode_key, decode_varint, skip_field};
    let mut buf = message;
    std::iter::from_fn(move || {
        if buf.is_empty() {
            return None;
        }
        let field = (|| {
            let broken = |e: prost::DecodeError| format!("a protobuf message does not decode: {e}");
            let (number, wire_type) = decode_key(&mut buf).map_err(broken)?;
            if wire_type == WireType::LengthDelimited {
                let len = decode_varint(&mut buf).map_err(broken)?;
                if len > buf.len() as u64 {
                    return Err(format!(
                        "a protobuf field of {len} bytes where {} remain",
                        buf.len()
                    ));
                }
                let start = message.len() - buf.len();
                buf.advance(len as usize);
                return Ok(Field {
                    number,
                    delimited: Some(start..start + len as usize),
                });
            }
            skip_field(wire_type, number, &mut buf, DecodeContext::default()).map_err(broken)?;
            Ok(Field {
                number,
                delimited: None,
            })
        })();
        if field.is_err() {
            buf = &[];
        }
        Some(field)
    })
}

/// `metadata.namespace`, `name`, `uid` and `resourceVersion` of an object's message, as ranges of
/// its bytes (strings are stored unescaped in protobuf, so each value is where it lies), in that
/// order; the last of each where a message repeats it, as a decoder merges them. Every kind's
/// `metadata` is its field 1. The ranges are checked as UTF-8.
pub(crate) fn metadata_ranges(object: &[u8]) -> Result<[std::ops::Range<usize>; 4], Failure> {
    let mut ranges: [std::ops::Range<usize>; 4] = Default::default();
    for field in fields(object) {
        let Field {
            number: 1,
            delimited: Some(meta),
        } = field?
        else {
            continue;
        };
        for field in fields(&object[meta.clone()]) {
            let field = field?;
            let slot = match field.number {
                3 => 0,
                1 => 1,
                5 => 2,
                6 => 3,
                _ => continue,
            };
            let Some(value) = field.delimited else {
                return Err("a metadata string field that is not length-delimited".into());
            };
            let value = meta.start + value.start..meta.start + value.end;
            std::str::from_utf8(&object[value.clone()])
                .map_err(|_| "a metadata string that is not UTF-8".to_owned())?;
            ranges[slot] = value;
        }
    }
    Ok(ranges)
}

/// A list's message (`{Kind}List`): its `metadata` (field 1) and its items' messages (field 2,
/// slices of `list`), each decoded with `decode`.
pub(crate) fn list<T>(
    list: &Bytes,
    decode: fn(&[u8]) -> Result<T, Failure>,
) -> Result<(ListMeta, Vec<T>), Failure> {
    let mut meta = ListMeta::default();
    let mut items = Vec::new();
    for field in fields(list) {
        match field? {
            Field {
                number: 1,
                delimited: Some(range),
            } => {
                let m = ListMetaMessage::decode(&list[range])
                    .map_err(|e| format!("the list's metadata does not decode: {e}"))?;
                meta = ListMeta {
                    resource_version: m.resource_version.map(SmolStr::from).unwrap_or_default(),
                    continue_token: m.r#continue.unwrap_or_default(),
                    remaining_item_count: m.remaining_item_count,
                };
            }
            Field {
                number: 2,
                delimited: Some(range),
            } => {
                items.push(decode(&list[range]).map_err(|e| format!("item {}: {e}", items.len()))?)
            }
            Field {
                number: 1 | 2,
                delimited: None,
            } => return Err("a list field that is not length-delimited".into()),
            _ => {}
        }
    }
    Ok((meta, items))
}

/// The `resourceVersion` and annotations of an object's metadata (a BOOKMARK's object).
pub(crate) fn bookmark(object: &[u8]) -> Result<(String, StringMap), Failure> {
    let meta = ObjectMetaOnly::decode(object)
        .map_err(|e| format!("the bookmark's object does not decode: {e}"))?
        .metadata
        .unwrap_or_default();
    Ok((
        meta.resource_version.unwrap_or_default(),
        map(meta.annotations),
    ))
}

/// A `Status` (an `ERROR` event's object, or the body of a failed request).
pub(crate) fn status(object: &[u8]) -> Result<Status, Failure> {
    let s =
        StatusMessage::decode(object).map_err(|e| format!("the Status does not decode: {e}"))?;
    let meta = s.metadata.unwrap_or_default();
    Ok(Status {
        status: s.status.unwrap_or_default(),
        message: s.message.unwrap_or_default(),
        reason: s.reason.unwrap_or_default(),
        details: s.details.map(|d| super::StatusDetails {
            name: d.name.unwrap_or_default(),
            group: d.group.unwrap_or_default(),
            kind: d.kind.unwrap_or_default(),
            uid: d.uid.unwrap_or_default(),
            causes: d
                .causes
                .into_iter()
                .map(|c| super::StatusCause {
                    reason: c.reason.unwrap_or_default(),
                    message: c.message.unwrap_or_default(),
                    field: c.field.unwrap_or_default(),
                })
                .collect(),
            retry_after_seconds: d.retry_after_seconds.and_then(|s| u32::try_from(s).ok()),
        }),
        code: s.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(0),
        metadata: ListMeta {
            resource_version: meta.resource_version.map(SmolStr::from).unwrap_or_default(),
            continue_token: meta.r#continue.unwrap_or_default(),
            remaining_item_count: meta.remaining_item_count,
        },
    })
}

// ---------------------------------------------------------------------------------------------------
// The decoders of the typed kinds

/// Decodes `bytes` as message `M`, then converts it.
fn decode_with<M: Message + Default, T>(
    bytes: &[u8],
    convert: fn(M) -> Result<T, Failure>,
) -> Result<T, Failure> {
    convert(M::decode(bytes).map_err(|e| format!("the object does not decode: {e}"))?)
}

/// The decoder of [`Pod`]'s message.
impl FromProtobuf for Pod {
    fn from_protobuf(bytes: &[u8]) -> Result<Pod, Failure> {
        decode_with(bytes, |p: PodMessage| {
            let spec = p.spec.unwrap_or_default();
            let status = p.status.unwrap_or_default();
            Ok(Pod {
                metadata: object_meta(p.metadata)?,
                spec: kinds::PodSpec {
                    node_name: non_empty(spec.node_name),
                    hostname: non_empty(spec.hostname),
                    subdomain: non_empty(spec.subdomain),
                    service_account_name: non_empty(spec.service_account_name),
                    containers: exact(spec.containers, |c| kinds::Container {
                        name: c.name.unwrap_or_default(),
                        image: non_empty(c.image),
                        ports: exact(c.ports, |p| kinds::ContainerPort {
                            name: non_empty(p.name),
                            container_port: p.container_port.unwrap_or_default(),
                            protocol: non_empty(p.protocol),
                        }),
                    }),
                    node_selector: map(spec.node_selector),
                },
                status: kinds::PodStatus {
                    phase: non_empty(status.phase),
                    host_ip: non_empty(status.host_ip),
                    pod_ip: non_empty(status.pod_ip),
                    pod_ips: exact(status.pod_ips, |ip| kinds::PodIp {
                        ip: ip.ip.unwrap_or_default(),
                    }),
                    conditions: exact(status.conditions, condition),
                },
            })
        })
    }
}

/// The decoder of [`Service`]'s message.
impl FromProtobuf for Service {
    fn from_protobuf(bytes: &[u8]) -> Result<Service, Failure> {
        decode_with(bytes, |s: ServiceMessage| {
            let spec = s.spec.unwrap_or_default();
            Ok(Service {
                metadata: object_meta(s.metadata)?,
                spec: kinds::ServiceSpec {
                    ports: exact(spec.ports, |p| kinds::ServicePort {
                        name: non_empty(p.name),
                        protocol: non_empty(p.protocol),
                        port: p.port.unwrap_or_default(),
                        // Not a pointer in Go: JSON always has it (0 when unset).
                        target_port: Some(match p.target_port.unwrap_or_default() {
                            IntOrString {
                                r#type: Some(1),
                                str_val,
                                ..
                            } => serde_json::Value::String(str_val.unwrap_or_default()),
                            IntOrString { int_val, .. } => int_val.unwrap_or_default().into(),
                        }),
                        app_protocol: p.app_protocol,
                    }),
                    // JSON has the selector whenever the map is not empty.
                    selector: (!spec.selector.is_empty()).then(|| map(spec.selector)),
                    cluster_ip: non_empty(spec.cluster_ip),
                    cluster_ips: spec.cluster_ips,
                    type_: non_empty(spec.r#type),
                    external_name: non_empty(spec.external_name),
                },
            })
        })
    }
}

/// The decoder of [`Endpoints`]' message.
impl FromProtobuf for Endpoints {
    fn from_protobuf(bytes: &[u8]) -> Result<Endpoints, Failure> {
        decode_with(bytes, |e: EndpointsMessage| {
            let address = |a: EndpointAddressMessage| kinds::EndpointAddress {
                ip: a.ip.map(SmolStr::from).unwrap_or_default(),
                hostname: non_empty(a.hostname).map(SmolStr::from),
                node_name: a.node_name.map(SmolStr::from),
                target_ref: a.target_ref.map(object_reference),
            };
            Ok(Endpoints {
                metadata: object_meta(e.metadata)?,
                subsets: exact(e.subsets, |s| kinds::EndpointSubset {
                    addresses: exact(s.addresses, address),
                    not_ready_addresses: exact(s.not_ready_addresses, address),
                    ports: exact(s.ports, |p| kinds::EndpointPort {
                        name: non_empty(p.name).map(SmolStr::from),
                        // Not a pointer in core/v1: JSON always has it.
                        port: Some(p.port.unwrap_or_default()),
                        protocol: non_empty(p.protocol).map(SmolStr::from),
                        app_protocol: p.app_protocol.map(SmolStr::from),
                    }),
                }),
            })
        })
    }
}

/// The decoder of [`EndpointSlice`]'s message (`discovery.k8s.io/v1`; its field numbers differ
/// from v1beta1's, which is read as JSON).
impl FromProtobuf for EndpointSlice {
    fn from_protobuf(bytes: &[u8]) -> Result<EndpointSlice, Failure> {
        decode_with(bytes, |s: EndpointSliceMessage| {
            Ok(EndpointSlice {
                metadata: object_meta(s.metadata)?,
                address_type: s.address_type.map(SmolStr::from).unwrap_or_default(),
                endpoints: exact(s.endpoints, |e| {
                    let conditions = e.conditions.unwrap_or_default();
                    kinds::Endpoint {
                        addresses: exact(e.addresses, SmolStr::from),
                        conditions: kinds::EndpointConditions {
                            ready: conditions.ready,
                            serving: conditions.serving,
                            terminating: conditions.terminating,
                        },
                        hostname: e.hostname.map(SmolStr::from),
                        target_ref: e.target_ref.map(object_reference),
                        node_name: e.node_name.map(SmolStr::from),
                        zone: e.zone.map(SmolStr::from),
                        hints: e.hints.map(|h| kinds::EndpointHints {
                            for_zones: exact(h.for_zones, for_name),
                            for_nodes: exact(h.for_nodes, for_name),
                        }),
                        // v1's `deprecatedTopology` (field 5): the struct's `topology` is v1beta1's
                        // JSON member, which v1 does not have.
                        topology: StringMap::new(),
                    }
                }),
                ports: exact(s.ports, |p| kinds::EndpointPort {
                    name: p.name.map(SmolStr::from),
                    port: p.port,
                    protocol: p.protocol.map(SmolStr::from),
                    app_protocol: p.app_protocol.map(SmolStr::from),
                }),
            })
        })
    }
}

/// The decoder of [`ConfigMap`]'s message.
impl FromProtobuf for ConfigMap {
    fn from_protobuf(bytes: &[u8]) -> Result<ConfigMap, Failure> {
        use base64::Engine as _;
        decode_with(bytes, |c: ConfigMapMessage| {
            Ok(ConfigMap {
                metadata: object_meta(c.metadata)?,
                data: map(c.data),
                // JSON carries the bytes in base64.
                binary_data: c
                    .binary_data
                    .into_iter()
                    .map(|e| {
                        let value = base64::engine::general_purpose::STANDARD
                            .encode(e.value.unwrap_or_default());
                        (e.key.unwrap_or_default(), value)
                    })
                    .collect(),
            })
        })
    }
}

/// The decoder of [`Namespace`]'s message.
impl FromProtobuf for Namespace {
    fn from_protobuf(bytes: &[u8]) -> Result<Namespace, Failure> {
        decode_with(bytes, |n: NamespaceMessage| {
            Ok(Namespace {
                metadata: object_meta(n.metadata)?,
                status: kinds::NamespaceStatus {
                    phase: non_empty(n.status.unwrap_or_default().phase),
                },
            })
        })
    }
}

/// The decoder of [`Node`]'s message.
impl FromProtobuf for Node {
    fn from_protobuf(bytes: &[u8]) -> Result<Node, Failure> {
        decode_with(bytes, |n: NodeMessage| {
            let spec = n.spec.unwrap_or_default();
            let status = n.status.unwrap_or_default();
            Ok(Node {
                metadata: object_meta(n.metadata)?,
                spec: kinds::NodeSpec {
                    pod_cidr: non_empty(spec.pod_cidr),
                    // A plain `bool` with `omitempty` in Go: JSON leaves `false` out.
                    unschedulable: spec.unschedulable.filter(|u| *u),
                },
                status: kinds::NodeStatus {
                    addresses: exact(status.addresses, |a| kinds::NodeAddress {
                        type_: a.r#type.unwrap_or_default(),
                        address: a.address.unwrap_or_default(),
                    }),
                    conditions: exact(status.conditions, condition),
                },
            })
        })
    }
}

/// `Some` for a non-empty string: a Go `string` with `omitempty`, which JSON leaves out when empty
/// and protobuf always sends.
fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// The converted items in a vector of exactly their number (as the JSON path's `exact_vec`).
fn exact<A, B>(items: Vec<A>, convert: impl FnMut(A) -> B) -> Vec<B> {
    let mut out = Vec::with_capacity(items.len());
    out.extend(items.into_iter().map(convert));
    out
}

/// A map's entries (sorted and deduplicated by `StringMap`; Go sends them sorted).
fn map(entries: Vec<MapEntry>) -> StringMap {
    entries
        .into_iter()
        .map(|e| (e.key.unwrap_or_default(), e.value.unwrap_or_default()))
        .collect()
}

fn condition(c: ConditionMessage) -> kinds::Condition {
    kinds::Condition {
        type_: c.r#type.unwrap_or_default(),
        status: c.status.unwrap_or_default(),
        reason: non_empty(c.reason),
        message: non_empty(c.message),
    }
}

fn object_reference(r: ObjectReferenceMessage) -> kinds::ObjectReference {
    kinds::ObjectReference {
        kind: r.kind.map(SmolStr::from).unwrap_or_default(),
        namespace: r.namespace.map(SmolStr::from).unwrap_or_default(),
        name: r.name.map(SmolStr::from).unwrap_or_default(),
        uid: r.uid.unwrap_or_default(),
    }
}

fn for_name(f: ForNameMessage) -> kinds::ForName {
    kinds::ForName {
        name: f.name.map(SmolStr::from).unwrap_or_default(),
    }
}

/// A `metav1.Time` as its JSON text; `None` for Go's zero time (sent as an empty message, written
/// to JSON as `null`).
fn timestamp(t: Option<Time>) -> Option<SmolStr> {
    let t = t?;
    let seconds = t.seconds.filter(|s| *s != 0)?;
    let at = if seconds >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(seconds as u64))?
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(Duration::from_secs(seconds.unsigned_abs()))?
    };
    Some(super::time::format_rfc3339(at).into())
}

fn object_meta(m: Option<ObjectMetaMessage>) -> Result<ObjectMeta, Failure> {
    let m = m.unwrap_or_default();
    Ok(ObjectMeta {
        name: m.name.unwrap_or_default(),
        generate_name: m.generate_name.unwrap_or_default(),
        namespace: m.namespace.unwrap_or_default(),
        self_link: m.self_link.unwrap_or_default(),
        uid: m.uid.unwrap_or_default(),
        resource_version: m.resource_version.map(SmolStr::from).unwrap_or_default(),
        generation: m.generation.filter(|g| *g != 0),
        creation_timestamp: timestamp(m.creation_timestamp),
        deletion_timestamp: timestamp(m.deletion_timestamp),
        deletion_grace_period_seconds: m.deletion_grace_period_seconds,
        labels: map(m.labels),
        annotations: map(m.annotations),
        owner_references: exact(m.owner_references, |r| super::OwnerReference {
            api_version: r.api_version.unwrap_or_default(),
            kind: r.kind.unwrap_or_default(),
            name: r.name.unwrap_or_default(),
            uid: r.uid.unwrap_or_default(),
            controller: r.controller,
            block_owner_deletion: r.block_owner_deletion,
        }),
        finalizers: m.finalizers,
        managed_fields: managed_fields(m.managed_fields)?,
    })
}

/// `managedFields` as the JSON array the apiserver writes for them (members in Go's field order,
/// empty ones left out), so that both wires give equal metadata.
fn managed_fields(entries: Vec<ManagedFieldsEntry>) -> Result<Option<RawJson>, Failure> {
    use serde::Serialize;
    if entries.is_empty() {
        return Ok(None);
    }
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Entry<'a> {
        #[serde(skip_serializing_if = "str::is_empty")]
        manager: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        operation: &'a str,
        #[serde(skip_serializing_if = "str::is_empty")]
        api_version: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        time: Option<SmolStr>,
        #[serde(skip_serializing_if = "str::is_empty")]
        fields_type: &'a str,
        #[serde(rename = "fieldsV1", skip_serializing_if = "Option::is_none")]
        fields_v1: Option<&'a serde_json::value::RawValue>,
        #[serde(skip_serializing_if = "str::is_empty")]
        subresource: &'a str,
    }
    let mut json = Vec::new();
    let mut raws = Vec::with_capacity(entries.len());
    for e in &entries {
        let raw = match e.fields_v1.as_ref().and_then(|f| f.raw.as_deref()) {
            Some(raw) => Some(
                serde_json::from_slice::<&serde_json::value::RawValue>(raw)
                    .map_err(|e| format!("a managedFields entry's fieldsV1 is not JSON: {e}"))?,
            ),
            None => None,
        };
        raws.push(raw);
    }
    let list: Vec<Entry<'_>> = entries
        .iter()
        .zip(raws)
        .map(|(e, raw)| Entry {
            manager: e.manager.as_deref().unwrap_or_default(),
            operation: e.operation.as_deref().unwrap_or_default(),
            api_version: e.api_version.as_deref().unwrap_or_default(),
            time: timestamp(e.time.clone()),
            fields_type: e.fields_type.as_deref().unwrap_or_default(),
            fields_v1: raw,
            subresource: e.subresource.as_deref().unwrap_or_default(),
        })
        .collect();
    serde_json::to_writer(&mut json, &list).map_err(|e| e.to_string())?;
    let text = String::from_utf8(json).map_err(|e| e.to_string())?;
    let raw = serde_json::value::RawValue::from_string(text).map_err(|e| e.to_string())?;
    Ok(Some(RawJson::from_raw(raw)))
}

// ---------------------------------------------------------------------------------------------------
// The mirrors: the fields each kind keeps, by the numbers of k8s.io/api's generated.proto.

/// A `map<string, string>` (or `map<string, bytes>`) entry: a map is a repeated message of these.
#[derive(Clone, PartialEq, Message)]
struct MapEntry {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct BytesMapEntry {
    #[prost(string, optional, tag = "1")]
    key: Option<String>,
    #[prost(bytes = "vec", optional, tag = "2")]
    value: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct Time {
    #[prost(int64, optional, tag = "1")]
    seconds: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    nanos: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct ListMetaMessage {
    #[prost(string, optional, tag = "2")]
    resource_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    r#continue: Option<String>,
    #[prost(int64, optional, tag = "4")]
    remaining_item_count: Option<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct ObjectMetaMessage {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "4")]
    self_link: Option<String>,
    #[prost(string, optional, tag = "5")]
    uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
    #[prost(int64, optional, tag = "7")]
    generation: Option<i64>,
    #[prost(message, optional, tag = "8")]
    creation_timestamp: Option<Time>,
    #[prost(message, optional, tag = "9")]
    deletion_timestamp: Option<Time>,
    #[prost(int64, optional, tag = "10")]
    deletion_grace_period_seconds: Option<i64>,
    #[prost(message, repeated, tag = "11")]
    labels: Vec<MapEntry>,
    #[prost(message, repeated, tag = "12")]
    annotations: Vec<MapEntry>,
    #[prost(message, repeated, tag = "13")]
    owner_references: Vec<OwnerReferenceMessage>,
    #[prost(string, repeated, tag = "14")]
    finalizers: Vec<String>,
    #[prost(message, repeated, tag = "17")]
    managed_fields: Vec<ManagedFieldsEntry>,
}

/// Any kind's message read for its metadata alone.
#[derive(Clone, PartialEq, Message)]
struct ObjectMetaOnly {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct OwnerReferenceMessage {
    #[prost(string, optional, tag = "5")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
    #[prost(string, optional, tag = "4")]
    uid: Option<String>,
    #[prost(bool, optional, tag = "6")]
    controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    block_owner_deletion: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct ManagedFieldsEntry {
    #[prost(string, optional, tag = "1")]
    manager: Option<String>,
    #[prost(string, optional, tag = "2")]
    operation: Option<String>,
    #[prost(string, optional, tag = "3")]
    api_version: Option<String>,
    #[prost(message, optional, tag = "4")]
    time: Option<Time>,
    #[prost(string, optional, tag = "6")]
    fields_type: Option<String>,
    #[prost(message, optional, tag = "7")]
    fields_v1: Option<FieldsV1>,
    #[prost(string, optional, tag = "8")]
    subresource: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct FieldsV1 {
    #[prost(bytes = "vec", optional, tag = "1")]
    raw: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, Message)]
struct StatusMessage {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ListMetaMessage>,
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(string, optional, tag = "3")]
    message: Option<String>,
    #[prost(string, optional, tag = "4")]
    reason: Option<String>,
    #[prost(message, optional, tag = "5")]
    details: Option<StatusDetailsMessage>,
    #[prost(int32, optional, tag = "6")]
    code: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct StatusDetailsMessage {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    group: Option<String>,
    #[prost(string, optional, tag = "3")]
    kind: Option<String>,
    #[prost(string, optional, tag = "6")]
    uid: Option<String>,
    #[prost(message, repeated, tag = "4")]
    causes: Vec<StatusCauseMessage>,
    #[prost(int32, optional, tag = "5")]
    retry_after_seconds: Option<i32>,
}

#[derive(Clone, PartialEq, Message)]
struct StatusCauseMessage {
    #[prost(string, optional, tag = "1")]
    reason: Option<String>,
    #[prost(string, optional, tag = "2")]
    message: Option<String>,
    #[prost(string, optional, tag = "3")]
    field: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct PodMessage {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaMessage>,
    #[prost(message, optional, tag = "2")]
    spec: Option<PodSpecMessage>,
    #[prost(message, optional, tag = "3")]
    status: Option<PodStatusMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct PodSpecMessage {
    #[prost(message, repeated, tag = "2")]
    containers: Vec<ContainerMessage>,
    #[prost(message, repeated, tag = "7")]
    node_selector: Vec<MapEntry>,
    #[prost(string, optional, tag = "8")]
    service_account_name: Option<String>,
    #[prost(string, optional, tag = "10")]
    node_name: Option<String>,
    #[prost(string, optional, tag = "16")]
    hostname: Option<String>,
    #[prost(string, optional, tag = "17")]
    subdomain: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ContainerMessage {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    image: Option<String>,
    #[prost(message, repeated, tag = "6")]
    ports: Vec<ContainerPortMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct ContainerPortMessage {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(int32, optional, tag = "3")]
    container_port: Option<i32>,
    #[prost(string, optional, tag = "4")]
    protocol: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct PodStatusMessage {
    #[prost(string, optional, tag = "1")]
    phase: Option<String>,
    #[prost(message, repeated, tag = "2")]
    conditions: Vec<ConditionMessage>,
    #[prost(string, optional, tag = "5")]
    host_ip: Option<String>,
    #[prost(string, optional, tag = "6")]
    pod_ip: Option<String>,
    #[prost(message, repeated, tag = "12")]
    pod_ips: Vec<PodIpMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct PodIpMessage {
    #[prost(string, optional, tag = "1")]
    ip: Option<String>,
}

/// `PodCondition` and `NodeCondition` alike (the fields kept have the same numbers).
#[derive(Clone, PartialEq, Message)]
struct ConditionMessage {
    #[prost(string, optional, tag = "1")]
    r#type: Option<String>,
    #[prost(string, optional, tag = "2")]
    status: Option<String>,
    #[prost(string, optional, tag = "5")]
    reason: Option<String>,
    #[prost(string, optional, tag = "6")]
    message: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ServiceMessage {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaMessage>,
    #[prost(message, optional, tag = "2")]
    spec: Option<ServiceSpecMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct ServiceSpecMessage {
    #[prost(message, repeated, tag = "1")]
    ports: Vec<ServicePortMessage>,
    #[prost(message, repeated, tag = "2")]
    selector: Vec<MapEntry>,
    #[prost(string, optional, tag = "3")]
    cluster_ip: Option<String>,
    #[prost(string, optional, tag = "4")]
    r#type: Option<String>,
    #[prost(string, optional, tag = "10")]
    external_name: Option<String>,
    #[prost(string, repeated, tag = "18")]
    cluster_ips: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ServicePortMessage {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    protocol: Option<String>,
    #[prost(int32, optional, tag = "3")]
    port: Option<i32>,
    #[prost(message, optional, tag = "4")]
    target_port: Option<IntOrString>,
    #[prost(string, optional, tag = "6")]
    app_protocol: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct IntOrString {
    #[prost(int64, optional, tag = "1")]
    r#type: Option<i64>,
    #[prost(int32, optional, tag = "2")]
    int_val: Option<i32>,
    #[prost(string, optional, tag = "3")]
    str_val: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct EndpointsMessage {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaMessage>,
    #[prost(message, repeated, tag = "2")]
    subsets: Vec<EndpointSubsetMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct EndpointSubsetMessage {
    #[prost(message, repeated, tag = "1")]
    addresses: Vec<EndpointAddressMessage>,
    #[prost(message, repeated, tag = "2")]
    not_ready_addresses: Vec<EndpointAddressMessage>,
    #[prost(message, repeated, tag = "3")]
    ports: Vec<EndpointPortMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct EndpointAddressMessage {
    #[prost(string, optional, tag = "1")]
    ip: Option<String>,
    #[prost(message, optional, tag = "2")]
    target_ref: Option<ObjectReferenceMessage>,
    #[prost(string, optional, tag = "3")]
    hostname: Option<String>,
    #[prost(string, optional, tag = "4")]
    node_name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ObjectReferenceMessage {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
    #[prost(string, optional, tag = "4")]
    uid: Option<String>,
}

/// core/v1's `EndpointPort` and discovery/v1's alike (same numbers, different Go types).
#[derive(Clone, PartialEq, Message)]
struct EndpointPortMessage {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(int32, optional, tag = "2")]
    port: Option<i32>,
    #[prost(string, optional, tag = "3")]
    protocol: Option<String>,
    #[prost(string, optional, tag = "4")]
    app_protocol: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct EndpointSliceMessage {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaMessage>,
    #[prost(message, repeated, tag = "2")]
    endpoints: Vec<EndpointMessage>,
    #[prost(message, repeated, tag = "3")]
    ports: Vec<SlicePortMessage>,
    #[prost(string, optional, tag = "4")]
    address_type: Option<String>,
}

/// discovery/v1's `EndpointPort`: name 1, protocol 2, port 3, appProtocol 4.
#[derive(Clone, PartialEq, Message)]
struct SlicePortMessage {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    protocol: Option<String>,
    #[prost(int32, optional, tag = "3")]
    port: Option<i32>,
    #[prost(string, optional, tag = "4")]
    app_protocol: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct EndpointMessage {
    #[prost(string, repeated, tag = "1")]
    addresses: Vec<String>,
    #[prost(message, optional, tag = "2")]
    conditions: Option<EndpointConditionsMessage>,
    #[prost(string, optional, tag = "3")]
    hostname: Option<String>,
    #[prost(message, optional, tag = "4")]
    target_ref: Option<ObjectReferenceMessage>,
    #[prost(string, optional, tag = "6")]
    node_name: Option<String>,
    #[prost(string, optional, tag = "7")]
    zone: Option<String>,
    #[prost(message, optional, tag = "8")]
    hints: Option<EndpointHintsMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct EndpointConditionsMessage {
    #[prost(bool, optional, tag = "1")]
    ready: Option<bool>,
    #[prost(bool, optional, tag = "2")]
    serving: Option<bool>,
    #[prost(bool, optional, tag = "3")]
    terminating: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct EndpointHintsMessage {
    #[prost(message, repeated, tag = "1")]
    for_zones: Vec<ForNameMessage>,
    #[prost(message, repeated, tag = "2")]
    for_nodes: Vec<ForNameMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct ForNameMessage {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ConfigMapMessage {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaMessage>,
    #[prost(message, repeated, tag = "2")]
    data: Vec<MapEntry>,
    #[prost(message, repeated, tag = "3")]
    binary_data: Vec<BytesMapEntry>,
}

#[derive(Clone, PartialEq, Message)]
struct NamespaceMessage {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaMessage>,
    #[prost(message, optional, tag = "3")]
    status: Option<PhaseMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct PhaseMessage {
    #[prost(string, optional, tag = "1")]
    phase: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeMessage {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMetaMessage>,
    #[prost(message, optional, tag = "2")]
    spec: Option<NodeSpecMessage>,
    #[prost(message, optional, tag = "3")]
    status: Option<NodeStatusMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeSpecMessage {
    #[prost(string, optional, tag = "1")]
    pod_cidr: Option<String>,
    #[prost(bool, optional, tag = "4")]
    unschedulable: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeStatusMessage {
    #[prost(message, repeated, tag = "4")]
    conditions: Vec<ConditionMessage>,
    #[prost(message, repeated, tag = "5")]
    addresses: Vec<NodeAddressMessage>,
}

#[derive(Clone, PartialEq, Message)]
struct NodeAddressMessage {
    #[prost(string, optional, tag = "1")]
    r#type: Option<String>,
    #[prost(string, optional, tag = "2")]
    address: Option<String>,
}
