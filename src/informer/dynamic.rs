//! Informers over any resource, as [`DynamicObject`]s stamped with their `apiVersion` and `kind`.
//!
//! The stamping is part of the one informer builder (`Informer::build`): every informer of
//! `DynamicObject`s gets it, whether built with [`Informer::dynamic`], [`Informer::new`] over an
//! `Api<DynamicObject>`, or by the [`InformerFactory`](super::InformerFactory).

use std::any::Any;
use std::sync::Arc;

use super::Informer;
use crate::client::{Api, Client};
use crate::fifo::Transform;
use crate::model::{ApiResource, DynamicObject, Object};
use crate::reflector::ReflectorOptions;

impl Informer<DynamicObject> {
    /// An informer over any resource (found with
    /// [`Client::resolve_resource`](crate::Client::resolve_resource), or described by hand), in
    /// `namespace` (every namespace when `None` or when the resource is cluster-scoped). Its
    /// objects carry `apiVersion` and `kind` even though the apiserver leaves them out of list
    /// items: an empty one is stamped from `resource`. The options' selectors apply.
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use std::time::Duration;
    /// use informer::Informer;
    /// let widgets = client.resolve_resource("widgets.example.com").await?;
    /// let inf = Informer::dynamic(client, &widgets, Some("default"), Default::default());
    /// inf.start();
    /// assert!(inf.wait_for_sync(Duration::from_secs(30)).await);
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
    ) -> Informer<DynamicObject> {
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

/// `transform` as the informer applies it: for `DynamicObject`s, an empty `apiVersion` or `kind`
/// stamped from `resource` first, then `transform` (which therefore sees them); for any other
/// type, `transform` unchanged.
pub(super) fn with_stamping<T: Object>(
    resource: &ApiResource,
    mut transform: Option<Transform<T>>,
) -> Option<Transform<T>> {
    if let Some(dynamic) =
        (&mut transform as &mut dyn Any).downcast_mut::<Option<Transform<DynamicObject>>>()
    {
        *dynamic = Some(stamp(resource, dynamic.take()));
    }
    transform
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
