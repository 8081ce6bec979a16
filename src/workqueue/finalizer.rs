//! [`finalizer`]: run a reconcile under a finalizer, so that an object's cleanup runs before the
//! apiserver removes it, even when it was deleted while no controller ran (kube-rs's
//! `kube::runtime::finalizer`, on this crate's [`Api`]).
//!
//! The life of an object under finalizer `name`, one reconcile at a time:
//!
//! ```text
//! not being deleted, no `name`     -> add `name` (a patch); Done: the patch's event reconciles again
//! not being deleted, has `name`    -> reconcile(Apply(object))
//! being deleted, has `name`        -> reconcile(Cleanup(object)); on Ok remove `name` (a patch)
//! being deleted, no `name`         -> nothing: the object is someone else's to finish
//! ```
//!
//! Invariant: `name` is removed only after a cleanup returned `Ok`, and added only to an object not
//! being deleted (the apiserver refuses new finalizers then). Both writes are JSON patches whose
//! `test` operation checks exactly what the decision rested on, as kube-rs's do: the add tests the
//! finalizer list as read (absent, or those entries) and appends; the removal tests that `name`
//! is still at the index it was read at and removes that entry. So another controller adding or
//! removing its own finalizer meanwhile makes the patch fail (422, the object unchanged) instead
//! of being overwritten, while writes to any other field (a status, a label) do not disturb it:
//! a cleanup that succeeded is not run again because the object changed elsewhere. A removal that
//! finds the object gone has nothing left to do.

use crate::model::Metadata;
use std::future::Future;
use std::sync::Arc;

use serde_json::{Value, json};

use super::Action;
use crate::client::{Api, Patch, PatchParams};
use crate::error::Error;
use crate::model::Object;

/// What [`finalizer`] asks the reconcile to do.
#[derive(Clone, Debug)]
pub enum FinalizerEvent<K> {
    /// The object is live (and holds the finalizer): make the world match it.
    Apply(Arc<K>),
    /// The object is being deleted: clean up what it made; on `Ok` the finalizer is removed and
    /// the apiserver finishes the deletion. Must be safe to run again (it runs until it succeeds,
    /// and again if the removal's patch fails).
    Cleanup(Arc<K>),
}

/// Why [`finalizer`] failed.
#[derive(Debug)]
pub enum FinalizerError<E> {
    /// The reconcile's [`Apply`](FinalizerEvent::Apply) failed.
    Apply(E),
    /// The reconcile's [`Cleanup`](FinalizerEvent::Cleanup) failed; the finalizer stays.
    Cleanup(E),
    /// Adding the finalizer failed (a 409 when the object changed meanwhile).
    AddFinalizer(Error),
    /// Removing the finalizer after a successful cleanup failed; the cleanup runs again.
    RemoveFinalizer(Error),
    /// The object has no name, or the finalizer name is empty.
    Unnamed,
}

impl<E: std::fmt::Display> std::fmt::Display for FinalizerError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FinalizerError::Apply(e) => write!(f, "reconcile failed: {e}"),
            FinalizerError::Cleanup(e) => write!(f, "cleanup failed: {e}"),
            FinalizerError::AddFinalizer(e) => write!(f, "adding the finalizer failed: {e}"),
            FinalizerError::RemoveFinalizer(e) => {
                write!(f, "removing the finalizer after cleanup failed: {e}")
            }
            FinalizerError::Unnamed => write!(f, "an object or finalizer without a name"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for FinalizerError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FinalizerError::Apply(e) | FinalizerError::Cleanup(e) => Some(e),
            FinalizerError::AddFinalizer(e) | FinalizerError::RemoveFinalizer(e) => Some(e),
            FinalizerError::Unnamed => None,
        }
    }
}

/// Runs `reconcile` for `object` under finalizer `name` (for example `example.com/cleanup`):
/// adds the finalizer to a live object first, hands a live object to `reconcile` as
/// [`FinalizerEvent::Apply`] and one being deleted as [`FinalizerEvent::Cleanup`], and removes
/// the finalizer once the cleanup succeeded:
///
/// ```text
/// not being deleted, no `name`     -> add `name` (a patch); Done: the patch's event reconciles again
/// not being deleted, has `name`    -> reconcile(Apply(object))
/// being deleted, has `name`        -> reconcile(Cleanup(object)); on Ok remove `name` (a patch)
/// being deleted, no `name`         -> nothing: the object is someone else's to finish
/// ```
///
/// Each patch tests what the decision rested on (the finalizer list as read; `name` at its index):
/// another controller's finalizer added or removed meanwhile fails it with 422
/// ([`FinalizerError::AddFinalizer`] or [`FinalizerError::RemoveFinalizer`]) instead of being
/// overwritten, and the newer version comes back through the informer. Writes to other fields
/// do not disturb it.
///
/// `api` is the object's resource; an all-namespaces `Api` is narrowed to the object's
/// namespace.
///
/// ```no_run
/// use std::sync::Arc;
/// use informer::{Api, ConfigMap};
/// use informer::workqueue::{Action, FinalizerError, FinalizerEvent, finalizer};
///
/// async fn reconcile(api: Api<ConfigMap>, cm: Arc<ConfigMap>)
///     -> Result<Action, FinalizerError<informer::Error>>
/// {
///     finalizer(&api, "example.com/cleanup", cm, |event| async move {
///         match event {
///             FinalizerEvent::Apply(cm) => { /* create what cm asks for */ let _ = cm; }
///             FinalizerEvent::Cleanup(cm) => { /* delete what cm made */ let _ = cm; }
///         }
///         Ok(Action::Done)
///     })
///     .await
/// }
/// ```
pub async fn finalizer<K, F, Fut, E>(
    api: &Api<K>,
    name: &str,
    object: Arc<K>,
    reconcile: F,
) -> Result<Action, FinalizerError<E>>
where
    K: Object,
    F: FnOnce(FinalizerEvent<K>) -> Fut,
    Fut: Future<Output = Result<Action, E>>,
{
    let meta = object.meta();
    if name.is_empty() || meta.name().is_empty() {
        return Err(FinalizerError::Unnamed);
    }
    let holds = meta.finalizers().iter().any(|f| f == name);
    let deleting = meta.is_being_deleted();
    let api = if api.resource().namespaced && api.namespace().is_none() {
        Api::namespaced_with(
            api.client().clone(),
            meta.namespace(),
            api.resource().clone(),
        )
    } else {
        api.clone()
    };
    match (deleting, holds) {
        (false, true) => reconcile(FinalizerEvent::Apply(object))
            .await
            .map_err(FinalizerError::Apply),
        (false, false) => {
            let patch = if meta.finalizers().is_empty() {
                // `null` matches an absent list (the apiserver's JSON patch, as kube-rs relies on).
                json!([
                    {"op": "test", "path": "/metadata/finalizers", "value": null},
                    {"op": "add", "path": "/metadata/finalizers", "value": [name]},
                ])
            } else {
                json!([
                    {"op": "test", "path": "/metadata/finalizers", "value": meta.finalizers()},
                    {"op": "add", "path": "/metadata/finalizers/-", "value": name},
                ])
            };
            patch_finalizers(&api, meta.name(), patch)
                .await
                .map_err(FinalizerError::AddFinalizer)?;
            // The patch's own watch event brings the object back with the finalizer.
            Ok(Action::Done)
        }
        (true, true) => {
            let index = meta.finalizers().iter().position(|f| f == name);
            let object_name = meta.name().to_owned();
            let action = reconcile(FinalizerEvent::Cleanup(object))
                .await
                .map_err(FinalizerError::Cleanup)?;
            let path = format!("/metadata/finalizers/{}", index.unwrap_or_default());
            let patch = json!([
                {"op": "test", "path": path, "value": name},
                {"op": "remove", "path": path},
            ]);
            match patch_finalizers(&api, &object_name, patch).await {
                // Removing the last finalizer of an object being deleted deletes it: gone is done.
                Err(e) if e.is_not_found() => Ok(action),
                result => result
                    .map(|()| action)
                    .map_err(FinalizerError::RemoveFinalizer),
            }
        }
        (true, false) => Ok(Action::Done),
    }
}

/// Sends a JSON patch of `metadata.finalizers`.
async fn patch_finalizers<K: Object>(api: &Api<K>, name: &str, patch: Value) -> Result<(), Error> {
    api.patch(name, &PatchParams::default(), &Patch::Json(patch))
        .await
        .map(drop)
}
