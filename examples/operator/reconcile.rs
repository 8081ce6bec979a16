//! One reconcile of one Widget: make its ConfigMap and status match its spec, or, when it is
//! being deleted, delete its ConfigMap so that the finalizer can go.
//!
//! Every write is idempotent (a server-side apply of the whole desired state, a delete that
//! takes NotFound as done), so a reconcile can run any number of times, on any replica.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use informer::client::{DeleteParams, Patch, PatchParams};
use informer::leaderelection::FencingToken;
use informer::workqueue::{Action, FinalizerError, FinalizerEvent, finalizer};
use informer::{Api, Client, ConfigMap, Error, Informer};
use serde_json::{Value, json};

use crate::widget::{API_VERSION, KIND, Widget, WidgetStatus};

/// The field manager of every write: `managedFields` say `Apply` by it.
pub const MANAGER: &str = "widget-operator";
/// Held on each Widget until its ConfigMap is gone.
pub const FINALIZER: &str = "example.com/cleanup";
/// On every ConfigMap the operator makes (and the ConfigMap informer's label selector).
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", MANAGER);

/// Why a reconcile failed (the controller's error policy logs it and retries).
pub type ReconcileError = FinalizerError<Error>;

/// What every reconcile shares.
pub struct Context {
    pub client: Client,
    /// The informer the controller reads Widgets from, to wait for our own writes to reach it.
    pub widgets: Informer<Widget>,
}

/// The name of `widget`'s ConfigMap.
pub fn config_map_name(widget: &Widget) -> String {
    format!("{}-config", widget.metadata.name)
}

/// The ConfigMap's data: `spec.data` plus `size` as a string.
fn desired_data(widget: &Widget) -> BTreeMap<String, String> {
    let mut data = widget.spec.data.clone();
    data.insert("size".into(), widget.spec.size.to_string());
    data
}

/// The reconcile the controller runs, under the fence: `token` says this replica leads.
pub async fn reconcile(
    widget: Arc<Widget>,
    ctx: Arc<Context>,
    token: FencingToken,
) -> Result<Action, ReconcileError> {
    let widgets: Api<Widget> = Api::namespaced(ctx.client.clone(), &widget.metadata.namespace);
    finalizer(&widgets, FINALIZER, widget, |event| async {
        match event {
            FinalizerEvent::Apply(widget) => apply(&widgets, &widget, &ctx, &token).await,
            FinalizerEvent::Cleanup(widget) => cleanup(&widget, &ctx, &token).await,
        }
    })
    .await
}

/// The Widget is live: apply its ConfigMap, take back what others changed in it, then its status.
async fn apply(
    widgets: &Api<Widget>,
    widget: &Widget,
    ctx: &Context,
    token: &FencingToken,
) -> Result<Action, Error> {
    let meta = &widget.metadata;
    let name = config_map_name(widget);
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &meta.namespace);
    let data = desired_data(widget);
    // The whole ConfigMap this manager owns; `force` takes back fields another manager changed.
    let desired = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": meta.namespace,
            "labels": {(MANAGED_BY.0): MANAGED_BY.1},
            "ownerReferences": [{
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": meta.name,
                "uid": meta.uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "data": data,
    });
    let apply = PatchParams::apply(MANAGER).force();
    let applied = configmaps
        .patch(&name, &apply, &Patch::Apply(&desired))
        .await?;

    // Keys another manager added are theirs under server-side apply, so the apply keeps them:
    // remove them explicitly (a merge patch, at the version just applied).
    let foreign: Vec<String> = applied
        .data
        .keys()
        .filter(|key| !data.contains_key(*key))
        .map(str::to_owned)
        .collect();
    if !foreign.is_empty() {
        let removals: serde_json::Map<String, Value> = foreign
            .iter()
            .map(|key| (key.clone(), Value::Null))
            .collect();
        let patch = json!({
            "metadata": {"resourceVersion": applied.metadata.resource_version},
            "data": removals,
        });
        let params = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..Default::default()
        };
        configmaps
            .patch(&name, &params, &Patch::Merge(&patch))
            .await?;
        eprintln!(
            "operator[{token}]: {}/{name}: removed foreign keys {foreign:?}",
            meta.namespace
        );
    }

    let status = WidgetStatus {
        config_map: name.clone(),
        observed_generation: meta.generation.unwrap_or_default(),
        ready: true,
    };
    if widget.status.as_ref() != Some(&status) {
        let patch = json!({
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": meta.name, "namespace": meta.namespace},
            "status": status,
        });
        let written = widgets
            .patch_status(&meta.name, &apply, &Patch::Apply(&patch))
            .await?;
        // Read our own write: the next reconcile of this Widget (the ConfigMap's event has
        // queued one already) then finds this status in the store instead of writing it again.
        let version = &written.metadata.resource_version;
        ctx.widgets
            .wait_for_version(
                &meta.namespace,
                &meta.name,
                version,
                Duration::from_secs(10),
            )
            .await?;
        eprintln!(
            "operator[{token}]: {}/{}: generation {} reconciled into {name}",
            meta.namespace, meta.name, status.observed_generation
        );
    }
    Ok(Action::Done)
}

/// The Widget is being deleted: delete its ConfigMap (nothing else would: the garbage collector
/// may not run); the finalizer is removed after this returns `Ok`.
async fn cleanup(widget: &Widget, ctx: &Context, token: &FencingToken) -> Result<Action, Error> {
    let meta = &widget.metadata;
    let name = config_map_name(widget);
    let configmaps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &meta.namespace);
    match configmaps.delete(&name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => return Err(e),
    }
    eprintln!(
        "operator[{token}]: {}/{}: deleted, {name} cleaned up",
        meta.namespace, meta.name
    );
    Ok(Action::Done)
}
