//! Informers over any resource, as [`DynamicObject`]s stamped with their `apiVersion` and `kind`.

use std::sync::Arc;

use super::Informer;
use crate::client::{Api, Client};
use crate::model::{ApiResource, DynamicObject};
use crate::reflector::ReflectorOptions;

impl Informer<DynamicObject> {
    /// An informer over any resource (found with
    /// [`Client::resolve_resource`](crate::Client::resolve_resource), or described by hand), in
    /// `namespace` (every namespace when `None` or when the resource is cluster-scoped). Its
    /// objects carry `apiVersion` and `kind` even though the apiserver leaves them out of list
    /// items: an empty one is stamped from `resource`.
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
        let api = match namespace {
            Some(ns) if resource.namespaced => {
                Api::<DynamicObject>::namespaced_with(client, ns, resource.clone())
            }
            _ => Api::<DynamicObject>::all_with(client, resource.clone()),
        };
        let (api_version, kind) = (resource.api_version(), resource.kind.to_string());
        Informer::with_transform(
            api,
            options,
            Arc::new(move |mut o: DynamicObject| {
                if o.types.kind.is_empty() {
                    o.types.kind.clone_from(&kind);
                }
                if o.types.api_version.is_empty() {
                    o.types.api_version.clone_from(&api_version);
                }
                o
            }),
        )
    }
}
