//! `k8s-openapi` types as informer objects (feature `k8s-openapi`).
//!
//! Every `k8s-openapi` type with `metadata` is an [`Object`] and a [`Resource`], so it works in
//! [`Api`](crate::Api), [`Informer`](crate::Informer), the factory, the store, its indexes,
//! handlers, controllers and writes exactly as a lean kind of this crate does. So does a type of
//! your own with `k8s-openapi`'s `ObjectMeta` as its metadata: implement [`Object`] (with
//! `type Meta = ObjectMeta`) and [`Resource`] for it, as the [`Object`] docs show.
//!
//! The Kubernetes version is the application's choice, as with kube-rs: this crate enables no
//! version feature of `k8s-openapi`; a binary enables one (`k8s-openapi = { version = "0.29",
//! features = ["v1_33"] }`, or `latest`).
//!
//! The lean kinds decode faster and hold less (shared short strings, managedFields kept as text);
//! `k8s-openapi`'s carry every field of the API. Figures side by side: the README.
//!
//! ```
//! use informer::{Object, Resource};
//! use informer::model::Metadata;
//! use k8s_openapi::api::core::v1::Pod;
//!
//! let pod: Pod = serde_json::from_str(
//!     r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"prod","resourceVersion":"7"}}"#,
//! ).unwrap();
//! assert_eq!((pod.meta().key(), pod.meta().resource_version()), ("prod/web-0".to_string(), "7"));
//! assert_eq!(Pod::api_resource().collection_path(Some("prod")), "/api/v1/namespaces/prod/pods");
//! ```

use std::any::TypeId;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use super::{ApiResource, Metadata, Object, OwnerRef, Resource};

impl Metadata for ObjectMeta {
    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
    fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or_default()
    }
    fn uid(&self) -> &str {
        self.uid.as_deref().unwrap_or_default()
    }
    fn resource_version(&self) -> &str {
        self.resource_version.as_deref().unwrap_or_default()
    }
    fn generation(&self) -> Option<i64> {
        self.generation
    }
    fn is_being_deleted(&self) -> bool {
        self.deletion_timestamp.is_some()
    }
    fn label(&self, key: &str) -> Option<&str> {
        self.labels.as_ref()?.get(key).map(String::as_str)
    }
    fn finalizers(&self) -> &[String] {
        self.finalizers.as_deref().unwrap_or_default()
    }
    fn drop_managed_fields(&mut self) {
        self.managed_fields = None;
    }
    fn controller_owner(&self) -> Option<OwnerRef<'_>> {
        let r = self
            .owner_references
            .as_ref()?
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

impl<T> Object for T
where
    T: k8s_openapi::Metadata<Ty = ObjectMeta> + DeserializeOwned + Send + Sync + 'static,
{
    type Meta = ObjectMeta;
    fn meta(&self) -> &ObjectMeta {
        self.metadata()
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.metadata_mut()
    }
}

impl<T> Resource for T
where
    T: k8s_openapi::Metadata<Ty = ObjectMeta> + DeserializeOwned + Send + Sync + 'static,
{
    fn api_resource() -> ApiResource {
        let namespaced =
            TypeId::of::<T::Scope>() == TypeId::of::<k8s_openapi::NamespaceResourceScope>();
        ApiResource::from_static(
            T::GROUP,
            T::VERSION,
            T::KIND,
            T::URL_PATH_SEGMENT,
            namespaced,
        )
    }
}
