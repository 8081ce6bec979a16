//! What a resource is: its group/version/kind/plural/scope ([`ApiResource`]), and the two traits the
//! rest of the crate is generic over ([`Object`], anything with `metadata`; [`Resource`], a typed kind
//! that knows its [`ApiResource`] statically).

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
/// Implemented by every typed kind, by [`DynamicObject`](crate::DynamicObject) and by
/// [`PartialObjectMetadata`](crate::PartialObjectMetadata).
///
/// ```
/// use informer::{Object, Pod};
/// let pod: Pod = serde_json::from_str(r#"{"metadata":{"name":"a","namespace":"b"}}"#).unwrap();
/// assert_eq!(pod.meta().key(), "b/a");
/// ```
pub trait Object: DeserializeOwned + Send + Sync + 'static {
    /// The object's metadata.
    fn meta(&self) -> &ObjectMeta;
    /// The object's metadata, mutably (used by transform hooks, e.g. to drop managedFields).
    fn meta_mut(&mut self) -> &mut ObjectMeta;
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
