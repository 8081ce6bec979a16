//! What a resource is: its group/version/kind/plural/scope ([`ApiResource`]), and the two traits the
//! rest of the crate is generic over ([`Object`], anything with `metadata`, read through [`Metadata`];
//! [`Resource`], a typed kind that knows its [`ApiResource`] statically).

use std::borrow::Cow;

use serde::de::DeserializeOwned;

use super::ObjectMeta;

/// Where a resource lives in the API: group, version, kind, plural and scope.
///
/// Typed kinds get theirs from [`Resource::api_resource`]; CRDs and other dynamic resources build one.
///
/// ```
/// use informer::ApiResource;
/// let crd = ApiResource::new("example.com", "v1", "Widget", "widgets", true);
/// assert_eq!(crd.api_version(), "example.com/v1");
/// assert_eq!(crd.collection_path(Some("prod")), "/apis/example.com/v1/namespaces/prod/widgets");
/// let pods = informer::Pod::api_resource();
/// assert_eq!(pods.collection_path(None), "/api/v1/pods");
/// # use informer::Resource;
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ApiResource {
    /// API group; empty for the core group.
    pub group: Cow<'static, str>,
    /// The API version, e.g. `v1`.
    pub version: Cow<'static, str>,
    /// The kind, e.g. `Pod`.
    pub kind: Cow<'static, str>,
    /// The lowercase plural used in URLs (`pods`, `endpointslices`).
    pub plural: Cow<'static, str>,
    /// Namespaced (`true`) or cluster-scoped.
    pub namespaced: bool,
}

impl ApiResource {
    /// A resource description from runtime strings (for CRDs and dynamic clients).
    pub fn new(
        group: impl Into<String>,
        version: impl Into<String>,
        kind: impl Into<String>,
        plural: impl Into<String>,
        namespaced: bool,
    ) -> Self {
        ApiResource {
            group: Cow::Owned(group.into()),
            version: Cow::Owned(version.into()),
            kind: Cow::Owned(kind.into()),
            plural: Cow::Owned(plural.into()),
            namespaced,
        }
    }

    /// A resource description from static strings, usable in `const` contexts.
    pub const fn from_static(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
        namespaced: bool,
    ) -> Self {
        ApiResource {
            group: Cow::Borrowed(group),
            version: Cow::Borrowed(version),
            kind: Cow::Borrowed(kind),
            plural: Cow::Borrowed(plural),
            namespaced,
        }
    }

    /// `apiVersion` as written in objects: `v1` for core, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `/api/v1` for the core group, `/apis/{group}/{version}` otherwise.
    pub fn group_version_path(&self) -> String {
        if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        }
    }

    /// The collection URL path; `namespace: None` (or a cluster-scoped resource) lists across all
    /// namespaces.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => {
                format!(
                    "{}/namespaces/{}/{}",
                    self.group_version_path(),
                    ns,
                    self.plural
                )
            }
            _ => format!("{}/{}", self.group_version_path(), self.plural),
        }
    }

    /// The URL path of one object.
    pub fn object_path(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}/{}", self.collection_path(namespace), name)
    }
}

/// Anything with Kubernetes object metadata that the informer can decode and store.
///
/// Implemented by every typed kind of this crate, by [`DynamicObject`](crate::DynamicObject), by
/// [`PartialObjectMetadata`](crate::PartialObjectMetadata) and, with the feature `k8s-openapi`, by
/// every `k8s-openapi` type that has metadata. `Meta` is the metadata struct: this crate's
/// [`ObjectMeta`], or `k8s-openapi`'s; both read through [`Metadata`].
///
/// ```
/// use informer::{Object, Pod};
/// let pod: Pod = serde_json::from_str(r#"{"metadata":{"name":"a","namespace":"b"}}"#).unwrap();
/// assert_eq!(pod.meta().key(), "b/a");
/// ```
///
/// A kind of your own (a custom resource) implements it and [`Resource`], and then works everywhere
/// a built-in kind does: `Api`, `Informer`, the store, controllers, writes.
///
/// ```
/// use informer::{ApiResource, Object, ObjectMeta, Resource};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Debug, Default, Serialize, Deserialize)]
/// struct Widget {
///     #[serde(default)]
///     metadata: ObjectMeta,
///     #[serde(default)]
///     spec: WidgetSpec,
/// }
/// #[derive(Clone, Debug, Default, Serialize, Deserialize)]
/// struct WidgetSpec {
///     size: i64,
/// }
///
/// impl Object for Widget {
///     type Meta = ObjectMeta;
///     fn meta(&self) -> &ObjectMeta {
///         &self.metadata
///     }
///     fn meta_mut(&mut self) -> &mut ObjectMeta {
///         &mut self.metadata
///     }
/// }
/// impl Resource for Widget {
///     fn api_resource() -> ApiResource {
///         ApiResource::from_static("example.com", "v1", "Widget", "widgets", true)
///     }
/// }
///
/// let w: Widget = serde_json::from_str(r#"{"metadata":{"name":"a"},"spec":{"size":3}}"#).unwrap();
/// assert_eq!((w.meta().name.as_str(), w.spec.size), ("a", 3));
/// ```
///
/// The same struct with `k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta` as its
/// `metadata` and `Meta` works the same way (feature `k8s-openapi`).
pub trait Object: DeserializeOwned + Send + Sync + 'static {
    /// The metadata struct.
    type Meta: Metadata;
    /// The object's metadata.
    fn meta(&self) -> &Self::Meta;
    /// The object's metadata, mutably (used by transform hooks, e.g. to drop managedFields).
    fn meta_mut(&mut self) -> &mut Self::Meta;

    /// How the kind decodes from the apiserver's protobuf, if it does: `Some` for the built-in
    /// kinds of this crate (with the feature `protobuf`), `None` (the default) for every other
    /// type. `Api` and informers of a kind with a decoder ask for protobuf (unless
    /// [`Config::protobuf`](crate::Config::protobuf) is off) and read JSON whenever the server
    /// answers it; kinds without one are asked for in JSON. Custom resources are served in JSON
    /// only, so a kind of your own keeps the default.
    ///
    /// ```
    /// use informer::{DynamicObject, Object, Pod};
    /// assert_eq!(Pod::protobuf_decoder().is_some(), cfg!(feature = "protobuf"));
    /// assert!(DynamicObject::protobuf_decoder().is_none());
    /// ```
    fn protobuf_decoder() -> Option<ProtobufDecoder<Self>>
    where
        Self: Sized,
    {
        None
    }

    /// Whether reads ask the apiserver to send only each object's metadata: `true` for
    /// [`PartialObjectMetadata`](crate::PartialObjectMetadata), `false` (the default) for every
    /// other type. Such an `Api` or informer asks for `as=PartialObjectMetadata` (and
    /// `as=PartialObjectMetadataList` for a LIST) of `meta.k8s.io/v1`, in protobuf first, as
    /// client-go's metadata client does, so the server leaves `spec` and `status` out of every
    /// object; a server that ignores that and sends whole objects is read too.
    ///
    /// ```
    /// use informer::{Object, PartialObjectMetadata, Pod};
    /// assert!(PartialObjectMetadata::metadata_only() && !Pod::metadata_only());
    /// ```
    fn metadata_only() -> bool
    where
        Self: Sized,
    {
        false
    }
}

/// A kind this crate decodes from protobuf (its decoder is in `protobuf.rs`, which imports the
/// kinds; the kinds name only this trait).
#[cfg(feature = "protobuf")]
pub(crate) trait FromProtobuf: Sized {
    /// Decodes the kind's message (see [`Object::protobuf_decoder`]).
    fn from_protobuf(message: &[u8]) -> Result<Self, String>;
}

/// A decoder of a kind's protobuf message (the bytes inside the `runtime.Unknown` envelope) into
/// the kind; `Err` says what does not decode (see [`Object::protobuf_decoder`]).
pub type ProtobufDecoder<T> = fn(&[u8]) -> Result<T, String>;

/// What the informer reads from an object's metadata, whichever struct holds it: this crate's
/// [`ObjectMeta`] or, with the feature `k8s-openapi`, `k8s-openapi`'s (absent fields read as
/// empty).
///
/// Generic code reads metadata through these methods; code that knows its kind reads the fields.
///
/// ```
/// use informer::model::Metadata;
/// let m: informer::ObjectMeta = serde_json::from_str(
///     r#"{"name":"web","namespace":"prod","labels":{"app":"web"},"finalizers":["x/y"]}"#,
/// ).unwrap();
/// assert_eq!((Metadata::name(&m), m.key().as_str()), ("web", "prod/web"));
/// assert_eq!((m.label("app"), m.finalizers()), (Some("web"), &["x/y".to_string()][..]));
/// ```
pub trait Metadata {
    /// `name`.
    fn name(&self) -> &str;
    /// `namespace`; empty for cluster-scoped objects.
    fn namespace(&self) -> &str;
    /// `uid`.
    fn uid(&self) -> &str;
    /// `resourceVersion`.
    fn resource_version(&self) -> &str;
    /// `generation`.
    fn generation(&self) -> Option<i64>;
    /// Whether `deletionTimestamp` is set (the object waits for its finalizers).
    fn is_being_deleted(&self) -> bool;
    /// The value of one label.
    fn label(&self, key: &str) -> Option<&str>;
    /// `finalizers`.
    fn finalizers(&self) -> &[String];
    /// The owner reference with `controller: true`, if any.
    fn controller_owner(&self) -> Option<OwnerRef<'_>>;
    /// Forgets `managedFields` ([`ReflectorOptions::drop_managed_fields`]); metadata that keeps
    /// none has nothing to do (the default).
    ///
    /// [`ReflectorOptions::drop_managed_fields`]: crate::reflector::ReflectorOptions::drop_managed_fields
    fn drop_managed_fields(&mut self) {}

    /// The cache key: `namespace/name`, or `name` for cluster-scoped objects (client-go's
    /// `MetaNamespaceKeyFunc`).
    fn key(&self) -> String {
        let (namespace, name) = (self.namespace(), self.name());
        if namespace.is_empty() {
            name.to_owned()
        } else {
            let mut k = String::with_capacity(namespace.len() + 1 + name.len());
            k.push_str(namespace);
            k.push('/');
            k.push_str(name);
            k
        }
    }
}

/// An owner reference, borrowed from whichever metadata struct holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerRef<'a> {
    /// The owner's `apiVersion`.
    pub api_version: &'a str,
    /// The owner's `kind`.
    pub kind: &'a str,
    /// The owner's name (in the object's namespace).
    pub name: &'a str,
    /// The owner's uid.
    pub uid: &'a str,
}

impl Metadata for ObjectMeta {
    fn name(&self) -> &str {
        &self.name
    }
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn uid(&self) -> &str {
        &self.uid
    }
    fn resource_version(&self) -> &str {
        &self.resource_version
    }
    fn generation(&self) -> Option<i64> {
        self.generation
    }
    fn is_being_deleted(&self) -> bool {
        self.deletion_timestamp.is_some()
    }
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key)
    }
    fn finalizers(&self) -> &[String] {
        &self.finalizers
    }
    fn drop_managed_fields(&mut self) {
        self.managed_fields = None;
    }
    fn controller_owner(&self) -> Option<OwnerRef<'_>> {
        let r = self
            .owner_references
            .iter()
            .find(|r| r.controller == Some(true))?;
        Some(OwnerRef {
            api_version: &r.api_version,
            kind: &r.kind,
            name: &r.name,
            uid: &r.uid,
        })
    }
}

/// A typed kind that knows where it lives in the API.
///
/// ```
/// use informer::{Resource, EndpointSlice};
/// let r = EndpointSlice::api_resource();
/// assert_eq!((r.group.as_ref(), r.plural.as_ref()), ("discovery.k8s.io", "endpointslices"));
/// ```
pub trait Resource: Object {
    /// The kind's group, version, kind, plural and scope.
    fn api_resource() -> ApiResource;
}
