//! Objects whose schema the crate does not know: [`DynamicObject`] keeps every field;
//! [`PartialObjectMetadata`] keeps only `metadata` (for metadata-only informers).

use serde::{Deserialize, Serialize};

use super::{Object, ObjectMeta, TypeMeta};

/// Any object of any resource (CRDs included), with every field kept.
///
/// `metadata` is typed; everything else (`spec`, `status`, `data`, ...) stays in [`DynamicObject::data`].
///
/// ```
/// use informer::DynamicObject;
/// let o: DynamicObject = serde_json::from_str(
///     r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":3}}"#,
/// ).unwrap();
/// assert_eq!(o.data["spec"]["size"], 3);
/// assert_eq!(serde_json::to_value(&o).unwrap()["spec"]["size"], 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DynamicObject {
    /// `apiVersion` and `kind`.
    #[serde(flatten)]
    pub types: TypeMeta,
    /// The object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// All other top-level fields.
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

impl Object for DynamicObject {
    type Meta = ObjectMeta;
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// An object reduced to its `apiVersion`, `kind` and `metadata`: the rest of the JSON is skipped
/// without being built, which makes decoding several times cheaper than a full object.
///
/// An `Api` or informer of this type asks the apiserver to leave the rest out too (see
/// [`Object::metadata_only`]): the objects then arrive as `kind: PartialObjectMetadata`,
/// `apiVersion: meta.k8s.io/v1`, in protobuf where the server and [`Config::protobuf`](crate::Config::protobuf)
/// allow it, whatever the resource (custom resources included).
///
/// ```
/// use informer::{Object, PartialObjectMetadata};
/// let o: PartialObjectMetadata = serde_json::from_str(
///     r#"{"kind":"Pod","metadata":{"name":"a","resourceVersion":"7"},"spec":{"containers":[]}}"#,
/// ).unwrap();
/// assert_eq!(o.meta().resource_version, "7");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartialObjectMetadata {
    /// `apiVersion`: `meta.k8s.io/v1` as the apiserver sends the metadata form; the resource's
    /// own (`v1`), or empty in a list item, from a server that sent whole objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `kind`: `PartialObjectMetadata` in the metadata form; the resource's own (`Pod`), or empty
    /// in a list item, from a server that sent whole objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
}

impl Object for PartialObjectMetadata {
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
    fn metadata_only() -> bool {
        true
    }
}
