//! Informers over any resource, as [`JsonObject`]s (or, over an `Api<DynamicObject>`,
//! [`DynamicObject`]s) stamped with their `apiVersion` and `kind`.
//!
//! The stamping is part of the one informer builder (`Informer::build`): every informer of
//! `JsonObject`s or `DynamicObject`s gets it, whether built with [`Informer::dynamic`],
//! [`Informer::new`] over an `Api<JsonObject>` or `Api<DynamicObject>`, or by the
//! [`InformerFactory`](super::InformerFactory).

use std::any::Any;
use std::sync::Arc;

use super::Informer;
use crate::client::{Api, Client};
use crate::fifo::Transform;
use crate::model::{ApiResource, DynamicObject, JsonObject, Object};
use crate::reflector::ReflectorOptions;

impl Informer<JsonObject> {
    /// An informer over any resource (found with
    /// [`Client::resolve_resource`](crate::Client::resolve_resource), or described by hand), in
    /// `namespace` (every namespace when `None` or when the resource is cluster-scoped). Its
    /// objects carry `apiVersion` and `kind` even though the apiserver leaves them out of list
    /// items: an empty one is stamped from `resource`. The options' selectors apply.
    ///
    /// Objects are [`JsonObject`]s: every field kept, at about a typed object's memory; read
    /// fields with [`JsonObject::get`]. For a `serde_json::Map` per object, build
    /// `Informer::<DynamicObject>::new` over an `Api<DynamicObject>` (stamped alike), or convert
    /// one object with [`JsonObject::to_dynamic`].
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use std::time::Duration;
    /// use informer::Informer;
    /// let widgets = client.resolve_resource("widgets.example.com").await?;
    /// let inf = Informer::dynamic(client, &widgets, Some("default"), Default::default());
    /// inf.start();
    /// inf.wait_for_sync(Duration::from_secs(30)).await.unwrap();
    /// for w in inf.store().list() {
    ///     assert_eq!(w.types.kind, "Widget");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn dynamic(
        client: Client,
        resource: &ApiResource,
        namespace: Option<&str>,
        options: ReflectorOptions,
    ) -> Informer<JsonObject> {
        Informer::new(api_for(client, resource.clone(), namespace), options)
    }
}

/// The `Api` over `resource` in `namespace`: every namespace when `None` or when the resource is
/// cluster-scoped (a namespace means nothing to it).
pub(super) fn api_for<T: Object>(
    client: Client,
    resource: ApiResource,
    namespace: Option<&str>,
) -> Api<T> {
    match namespace {
        Some(ns) if resource.namespaced => Api::namespaced_with(client, ns, resource),
        _ => Api::all_with(client, resource),
    }
}

/// `transform` as the informer applies it: for `JsonObject`s and `DynamicObject`s, an empty
/// `apiVersion` or `kind` stamped from `resource` first, then `transform` (which therefore sees
/// them); for any other type, `transform` unchanged.
pub(super) fn with_stamping<T: Object>(
    resource: &ApiResource,
    mut transform: Option<Transform<T>>,
) -> Option<Transform<T>> {
    let any = &mut transform as &mut dyn Any;
    if let Some(dynamic) = any.downcast_mut::<Option<Transform<DynamicObject>>>() {
        *dynamic = Some(stamp(resource, dynamic.take()));
    } else if let Some(json) = any.downcast_mut::<Option<Transform<JsonObject>>>() {
        *json = Some(stamp_json(resource, json.take()));
    }
    transform
}

/// [`stamp`] for `JsonObject`s.
fn stamp_json(
    resource: &ApiResource,
    then: Option<Transform<JsonObject>>,
) -> Transform<JsonObject> {
    let (api_version, kind) = (resource.api_version(), resource.kind.to_string());
    Arc::new(move |mut o: JsonObject| {
        o.stamp_types(&api_version, &kind);
        match &then {
            Some(f) => f(o),
            None => o,
        }
    })
}

/// Stamps an empty `apiVersion` and `kind` from `resource`, then applies `then`, if any.
fn stamp(
    resource: &ApiResource,
    then: Option<Transform<DynamicObject>>,
) -> Transform<DynamicObject> {
    let (api_version, kind) = (resource.api_version(), resource.kind.to_string());
    Arc::new(move |mut o: DynamicObject| {
        if o.types.kind.is_empty() {
            o.types.kind.clone_from(&kind);
        }
        if o.types.api_version.is_empty() {
            o.types.api_version.clone_from(&api_version);
        }
        match &then {
            Some(f) => f(o),
            None => o,
        }
    })
}
