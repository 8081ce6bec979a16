//! What a write sends besides the object: the parameters of create/replace ([`PostParams`]),
//! patch ([`PatchParams`], [`Patch`]) and delete ([`DeleteParams`]), encoded as client-go
//! encodes them, and what a delete answers ([`DeleteOutcome`]).
//!
//! The nouns are kube-rs's (`PostParams`, `PatchParams`, `Patch::Apply`, `DeleteParams`), so code
//! moves between the two crates with few changes. Query keys are written sorted, as Go's
//! `url.Values.Encode` writes them; `DeleteOptions` go in the request body, as client-go sends
//! them (the apiserver reads the query only when the body is empty).

use crate::model::Metadata;
use bytes::Bytes;
use hyper::Method;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::params::Query;
use super::{
    Api, ListBody, ListParams, ObjectList, encode_path_segment, validate_name, with_query,
};
use crate::error::{Error, Result};
use crate::model::Scale;
use crate::watch::{decode_error, parse_json};
use crate::{Object, Status};

/// How the server treats fields it does not know in a write (`fieldValidation`, Kubernetes
/// 1.25 and later; older servers ignore the parameter and drop unknown fields, as `Ignore`).
///
/// ```
/// use informer::client::{FieldValidation, PostParams};
/// let p = PostParams { field_validation: Some(FieldValidation::Strict), ..Default::default() };
/// assert_eq!(p.to_query(), "fieldValidation=Strict");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldValidation {
    /// Drop unknown and duplicate fields silently (the default before 1.27).
    Ignore,
    /// Drop them and say so in a `Warning` response header (the default from 1.27).
    Warn,
    /// Refuse the write with a 400 naming them.
    Strict,
}

impl FieldValidation {
    fn as_str(self) -> &'static str {
        match self {
            FieldValidation::Ignore => "Ignore",
            FieldValidation::Warn => "Warn",
            FieldValidation::Strict => "Strict",
        }
    }
}

/// Parameters of a create or a replace (`POST`, `PUT`), and of status and scale replaces.
///
/// ```
/// use informer::client::PostParams;
/// let p = PostParams::default().dry_run().field_manager("widget-operator");
/// assert_eq!(p.to_query(), "dryRun=All&fieldManager=widget-operator");
/// assert_eq!(PostParams::default().to_query(), "");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PostParams {
    /// `dryRun=All`: every check and admission runs, the answer is what would be stored, and
    /// nothing is.
    pub dry_run: bool,
    /// `fieldManager`: the name the write's fields are recorded under in `managedFields`
    /// (else the server derives one from the User-Agent, `informer`).
    pub field_manager: Option<String>,
    /// `fieldValidation`: what the server does with unknown fields.
    pub field_validation: Option<FieldValidation>,
}

impl PostParams {
    /// Sets [`dry_run`](Self::dry_run).
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
    /// Sets [`field_manager`](Self::field_manager).
    pub fn field_manager(mut self, manager: &str) -> Self {
        self.field_manager = Some(manager.to_owned());
        self
    }
    /// Sets [`field_validation`](Self::field_validation).
    pub fn field_validation(mut self, validation: FieldValidation) -> Self {
        self.field_validation = Some(validation);
        self
    }

    /// The encoded query string (without `?`).
    pub fn to_query(&self) -> String {
        let mut q = Query::default();
        q.push("dryRun", self.dry_run.then_some("All"));
        q.push("fieldManager", self.field_manager.as_deref());
        q.push(
            "fieldValidation",
            self.field_validation.map(FieldValidation::as_str),
        );
        q.finish()
    }
}

/// Parameters of a patch (`PATCH`), of the object or of its status or scale.
///
/// A server-side apply needs a field manager ([`PatchParams::apply`]); `force` takes the
/// fields another manager owns instead of answering 409 Conflict, and is for apply only.
///
/// ```
/// use informer::client::PatchParams;
/// let p = PatchParams::apply("widget-operator").force();
/// assert_eq!(p.to_query(), "fieldManager=widget-operator&force=true");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PatchParams {
    /// `dryRun=All`: see [`PostParams::dry_run`].
    pub dry_run: bool,
    /// `fieldManager`: required for a server-side apply.
    pub field_manager: Option<String>,
    /// `force=true`: a server-side apply takes ownership of conflicting fields.
    pub force: bool,
    /// `fieldValidation`: what the server does with unknown fields.
    pub field_validation: Option<FieldValidation>,
}

impl PatchParams {
    /// Parameters for a server-side apply as `manager`.
    pub fn apply(manager: &str) -> Self {
        PatchParams {
            field_manager: Some(manager.to_owned()),
            ..Default::default()
        }
    }
    /// Sets [`force`](Self::force).
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }
    /// Sets [`dry_run`](Self::dry_run).
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
    /// Sets [`field_validation`](Self::field_validation).
    pub fn field_validation(mut self, validation: FieldValidation) -> Self {
        self.field_validation = Some(validation);
        self
    }

    /// The encoded query string (without `?`).
    pub fn to_query(&self) -> String {
        let mut q = Query::default();
        q.push("dryRun", self.dry_run.then_some("All"));
        q.push("fieldManager", self.field_manager.as_deref());
        q.push(
            "fieldValidation",
            self.field_validation.map(FieldValidation::as_str),
        );
        q.push("force", self.force.then_some("true"));
        q.finish()
    }
}

/// A patch, in one of the four types the apiserver accepts; `P` is anything that serializes to
/// the patch's JSON (a `serde_json::Value` from `json!`, a typed struct, a
/// [`DynamicObject`](crate::DynamicObject)).
///
/// ```
/// use informer::client::Patch;
/// use serde_json::json;
/// // Remove a label, whatever else the object holds.
/// let merge = Patch::Merge(json!({"metadata": {"labels": {"stale": null}}}));
/// assert_eq!(merge.content_type(), "application/merge-patch+json");
/// // Operations with a precondition of their own (`test`).
/// let ops = Patch::Json(json!([
///     {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
///     {"op": "replace", "path": "/spec/replicas", "value": 3},
/// ]));
/// assert_eq!(ops.content_type(), "application/json-patch+json");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Patch<P> {
    /// Server-side apply: `P` is the fields this manager wants to own (a partial object with
    /// `apiVersion` and `kind`, filled in from the resource when missing); fields it applied
    /// before and leaves out now are removed. Needs [`PatchParams::apply`].
    Apply(P),
    /// RFC 6902 JSON patch: `P` serializes to an array of operations.
    Json(P),
    /// RFC 7386 JSON merge patch: objects merge, `null` removes, lists are replaced whole.
    Merge(P),
    /// Kubernetes' strategic merge patch, for built-in kinds only: lists with a merge key
    /// (containers by name, ...) merge item by item. Custom resources answer 415.
    Strategic(P),
}

impl<P> Patch<P> {
    /// The request's `Content-Type`.
    pub fn content_type(&self) -> &'static str {
        match self {
            Patch::Apply(_) => "application/apply-patch+yaml",
            Patch::Json(_) => "application/json-patch+json",
            Patch::Merge(_) => "application/merge-patch+json",
            Patch::Strategic(_) => "application/strategic-merge-patch+json",
        }
    }

    fn body(&self) -> &P {
        match self {
            Patch::Apply(p) | Patch::Json(p) | Patch::Merge(p) | Patch::Strategic(p) => p,
        }
    }
}

impl<P: Serialize> Patch<P> {
    /// The body to send: the patch as JSON (JSON is YAML, so an apply is sent as JSON too), an
    /// apply's `apiVersion` and `kind` filled in from `api_version`/`kind` when it has none.
    pub(super) fn to_body(&self, api_version: &str, kind: &str) -> serde_json::Result<Vec<u8>> {
        match self {
            Patch::Apply(p) => serde_json::to_vec(&with_types(p, api_version, kind)?),
            _ => serde_json::to_vec(self.body()),
        }
    }
}

/// `object` as JSON with `apiVersion` and `kind` set when it has none (the typed kinds carry no
/// type fields; a create or replace infers them from the URL, an apply needs them).
pub(super) fn with_types<T: Serialize>(
    object: &T,
    api_version: &str,
    kind: &str,
) -> serde_json::Result<Value> {
    let mut value = serde_json::to_value(object)?;
    if let Value::Object(map) = &mut value {
        for (key, text) in [("apiVersion", api_version), ("kind", kind)] {
            let empty = map
                .get(key)
                .is_none_or(|v| v.is_null() || v.as_str() == Some(""));
            if empty {
                map.insert(key.to_owned(), Value::String(text.to_owned()));
            }
        }
    }
    Ok(value)
}

/// What happens to objects that name the deleted one as their owner (`propagationPolicy`).
///
/// The garbage collector of kube-controller-manager acts on it; a server without one (the
/// simulator, a bare apiserver) only records the choice (`Orphan` and `Foreground` add the
/// `orphan` and `foregroundDeletion` finalizers, which that collector then removes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropagationPolicy {
    /// Dependents stay, with the owner reference removed.
    Orphan,
    /// The object goes at once; the collector deletes dependents after (the default for most
    /// kinds).
    Background,
    /// The object stays, with `deletionTimestamp` set, until its blocking dependents are gone.
    Foreground,
}

impl PropagationPolicy {
    fn as_str(self) -> &'static str {
        match self {
            PropagationPolicy::Orphan => "Orphan",
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Foreground => "Foreground",
        }
    }
}

/// Conditions a delete must meet, else it answers 409 Conflict and deletes nothing.
///
/// ```
/// use informer::client::{DeleteParams, Preconditions};
/// let p = DeleteParams { preconditions: Some(Preconditions::uid("5a7c")), ..Default::default() };
/// assert_eq!(p.to_body(), r#"{"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":"5a7c"}}"#);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The object must have this uid (it is the same object, not one re-created with its name).
    pub uid: Option<String>,
    /// The object must be at this resourceVersion (nobody changed it since it was read).
    pub resource_version: Option<String>,
}

impl Preconditions {
    /// Only the object with this uid.
    pub fn uid(uid: &str) -> Self {
        Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }
    }
    /// Only the object at this resourceVersion.
    pub fn resource_version(rv: &str) -> Self {
        Preconditions {
            uid: None,
            resource_version: Some(rv.to_owned()),
        }
    }
}

/// Parameters of a delete (one object or a collection), sent as the request's `DeleteOptions`.
///
/// ```
/// use informer::client::{DeleteParams, PropagationPolicy};
/// let p = DeleteParams::default().grace_period(0).propagation(PropagationPolicy::Foreground);
/// assert_eq!(
///     p.to_body(),
///     r#"{"apiVersion":"v1","gracePeriodSeconds":0,"kind":"DeleteOptions","propagationPolicy":"Foreground"}"#
/// );
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeleteParams {
    /// `dryRun: ["All"]`: see [`PostParams::dry_run`].
    pub dry_run: bool,
    /// Seconds before the object is removed (pods: the kubelet's shutdown time); `0` at once.
    pub grace_period_seconds: Option<u32>,
    /// What happens to dependents.
    pub propagation_policy: Option<PropagationPolicy>,
    /// The object's uid and/or resourceVersion must still be these.
    pub preconditions: Option<Preconditions>,
}

impl DeleteParams {
    /// Sets [`dry_run`](Self::dry_run).
    pub fn dry_run(mut self) -> Self {
        self.dry_run = true;
        self
    }
    /// Sets [`grace_period_seconds`](Self::grace_period_seconds).
    pub fn grace_period(mut self, seconds: u32) -> Self {
        self.grace_period_seconds = Some(seconds);
        self
    }
    /// Sets [`propagation_policy`](Self::propagation_policy).
    pub fn propagation(mut self, policy: PropagationPolicy) -> Self {
        self.propagation_policy = Some(policy);
        self
    }
    /// Sets [`preconditions`](Self::preconditions).
    pub fn preconditions(mut self, preconditions: Preconditions) -> Self {
        self.preconditions = Some(preconditions);
        self
    }

    /// The `DeleteOptions` body, keys sorted.
    pub fn to_body(&self) -> String {
        let mut body = Map::new();
        body.insert("apiVersion".into(), json!("v1"));
        body.insert("kind".into(), json!("DeleteOptions"));
        if self.dry_run {
            body.insert("dryRun".into(), json!(["All"]));
        }
        if let Some(s) = self.grace_period_seconds {
            body.insert("gracePeriodSeconds".into(), json!(s));
        }
        if let Some(p) = self.propagation_policy {
            body.insert("propagationPolicy".into(), json!(p.as_str()));
        }
        if let Some(p) = &self.preconditions {
            let mut pre = Map::new();
            if let Some(rv) = &p.resource_version {
                pre.insert("resourceVersion".into(), json!(rv));
            }
            if let Some(uid) = &p.uid {
                pre.insert("uid".into(), json!(uid));
            }
            body.insert("preconditions".into(), Value::Object(pre));
        }
        Value::Object(body).to_string()
    }
}

/// What a delete answers: the object, or a `Status`.
///
/// The apiserver answers with the object when it is still there (finalizers hold it, or a
/// graceful or foreground deletion is under way: `metadata.deletionTimestamp` is set), and for
/// the kinds whose delete returns the object they removed (pods, namespaces, custom resources);
/// other kinds answer a `Success` `Status` once the object is gone.
///
/// ```
/// use informer::client::DeleteOutcome;
/// use informer::{ConfigMap, Status};
/// let gone: DeleteOutcome<ConfigMap> = DeleteOutcome::Status(Box::new(Status::default()));
/// assert!(gone.object().is_none());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum DeleteOutcome<T> {
    /// The object as the server answered it.
    Object(T),
    /// The server's `Status` (`"status": "Success"`).
    Status(Box<Status>),
}

impl<T> DeleteOutcome<T> {
    /// The object, if the server answered with one.
    pub fn object(&self) -> Option<&T> {
        match self {
            DeleteOutcome::Object(o) => Some(o),
            DeleteOutcome::Status(_) => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The writes of `Api`.

/// A `Status` body, told apart from an object by its `kind`.
fn is_status(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(default, borrow)]
        kind: std::borrow::Cow<'a, str>,
    }
    serde_json::from_slice::<Probe<'_>>(body).is_ok_and(|p| p.kind == "Status")
}

/// A delete's answer: a `Status`, or what `object` decodes.
fn delete_outcome<T>(
    bytes: &[u8],
    object: impl FnOnce(&[u8]) -> Result<T>,
) -> Result<DeleteOutcome<T>> {
    if is_status(bytes) {
        parse_json(bytes)
            .map(|s| DeleteOutcome::Status(Box::new(s)))
            .map_err(|e| decode_error(bytes, 0, &e))
    } else {
        object(bytes).map(DeleteOutcome::Object)
    }
}

fn json_body(value: &impl Serialize) -> Result<Bytes> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| Error::InvalidRequest(format!("the body does not serialize to JSON: {e}")))
}

/// Writes, on the object or collection an [`Api`] addresses.
///
/// Every write is sent once. The client sends a request again only when the server cannot have
/// acted on it: a 401 with a token provider (the request is sent again with a fresh token), so a
/// create never runs twice behind the caller's back. A write that failed on the way (a timeout,
/// a reset) may or may not have happened: read the object before writing again, or make the
/// write safe to repeat (a server-side apply, or a replace with its resourceVersion).
///
/// Names are checked as [`get`](Api::get) checks them, and a write to one object needs a
/// namespace when the resource is namespaced ([`Api::namespaced`]); both are refused before
/// anything is sent.
impl<K: Object> Api<K> {
    /// The path of one object, or of one of its subresources (`status`, `scale`).
    fn object_path(&self, name: &str, subresource: Option<&str>) -> Result<String> {
        validate_name(name).map_err(Error::InvalidName)?;
        if self.resource.namespaced && self.namespace.is_none() {
            return Err(Error::InvalidRequest(format!(
                "{} {name:?} is namespaced: write it through Api::namespaced, not Api::all",
                self.resource.kind
            )));
        }
        let mut path = format!(
            "{}/{}",
            self.request_collection_path()?,
            encode_path_segment(name)
        );
        if let Some(sub) = subresource {
            path.push('/');
            path.push_str(sub);
        }
        Ok(path)
    }

    /// POST `object` to the collection: the object as stored (uid, resourceVersion, defaults
    /// filled in). 409 [`AlreadyExists`](crate::model::StatusReason::AlreadyExists) when the name
    /// is taken; an empty name with `metadata.generateName` gets a generated one. `apiVersion`
    /// and `kind` are filled in when the value has none.
    ///
    /// A lean built-in kind (`ConfigMap`, `Pod`, ...) sends only the fields it names: create
    /// with it what it can describe, or use [`DynamicObject`](crate::DynamicObject).
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use informer::{Api, ConfigMap};
    /// use informer::client::PostParams;
    /// let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    /// let mut cm = ConfigMap::default();
    /// cm.metadata.name = "settings".into();
    /// cm.data.insert("mode".into(), "fast".into());
    /// let stored = cms.create(&PostParams::default(), &cm).await?;
    /// println!("created at resourceVersion {}", stored.metadata.resource_version);
    /// # Ok(()) }
    /// ```
    pub async fn create(&self, params: &PostParams, object: &K) -> Result<K>
    where
        K: Serialize,
    {
        let meta = object.meta();
        if self.resource.namespaced && self.namespace.is_none() {
            return Err(Error::InvalidRequest(format!(
                "{} is namespaced: create it through Api::namespaced, not Api::all",
                self.resource.kind
            )));
        }
        if !meta.name().is_empty() {
            validate_name(meta.name()).map_err(Error::InvalidName)?;
        }
        let path = self.request_collection_path()?;
        let (api_version, kind) = (self.resource.api_version(), &self.resource.kind);
        self.send_object(Method::POST, path, params, object, &api_version, kind)
            .await
    }

    /// PUT `object` as the whole new state of `name`. Its `metadata.resourceVersion` is the
    /// precondition: when someone changed the object since it was read, the answer is 409
    /// [`Conflict`](crate::model::StatusReason::Conflict) and nothing is written (an empty
    /// resourceVersion writes unconditionally, where the kind allows it).
    ///
    /// Fields the type of `K` does not carry are lost: replace with a type that keeps every field
    /// ([`DynamicObject`](crate::DynamicObject), or the whole object as read), never with a lean
    /// built-in kind read from the cache. To change a few fields, [`patch`](Self::patch).
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use informer::{Api, ApiResource, DynamicObject};
    /// use informer::client::PostParams;
    /// let widgets: Api<DynamicObject> = Api::namespaced_with(
    ///     client, "default", ApiResource::new("example.com", "v1", "Widget", "widgets", true));
    /// let mut w = widgets.get("w1").await?;
    /// w.data["spec"]["size"] = 5.into();
    /// match widgets.replace("w1", &PostParams::default(), &w).await {
    ///     Err(e) if e.is_conflict() => println!("changed meanwhile: read it again"),
    ///     other => { other?; }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn replace(&self, name: &str, params: &PostParams, object: &K) -> Result<K>
    where
        K: Serialize,
    {
        self.put(self.object_path(name, None)?, params, object)
            .await
    }

    /// PATCH `name` with `patch` ([`Patch::Apply`], [`Patch::Merge`], [`Patch::Json`],
    /// [`Patch::Strategic`]). A server-side apply creates the object when it does not exist, and
    /// answers 409 [`Conflict`](crate::model::StatusReason::Conflict) naming each field another
    /// manager owns (in [`Status::causes`]) unless [`PatchParams::force`] is set.
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use informer::{Api, ConfigMap};
    /// use informer::client::{Patch, PatchParams};
    /// use serde_json::json;
    /// let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    /// let applied = cms
    ///     .patch("settings", &PatchParams::apply("my-controller"), &Patch::Apply(json!({
    ///         "metadata": {"name": "settings"},
    ///         "data": {"mode": "fast"},
    ///     })))
    ///     .await?;
    /// assert_eq!(applied.data.get("mode"), Some("fast"));
    /// # Ok(()) }
    /// ```
    pub async fn patch<P: Serialize>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K> {
        self.patch_own(name, None, params, patch).await
    }

    /// DELETE `name`. The answer is the object while it is still there (finalizers hold it;
    /// `metadata.deletionTimestamp` is set) or for kinds whose delete returns it, else the
    /// server's `Status` ([`DeleteOutcome`]). 404 [`NotFound`](crate::model::StatusReason::NotFound)
    /// when it is already gone; 409 when a [precondition](DeleteParams::preconditions) fails.
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use informer::{Api, ConfigMap};
    /// use informer::client::{DeleteOutcome, DeleteParams};
    /// let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    /// match cms.delete("settings", &DeleteParams::default()).await {
    ///     Ok(DeleteOutcome::Object(cm)) => println!("finalizers: {:?}", cm.metadata.finalizers),
    ///     Ok(DeleteOutcome::Status(_)) => println!("gone"),
    ///     Err(e) if e.is_not_found() => println!("was gone already"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn delete(&self, name: &str, params: &DeleteParams) -> Result<DeleteOutcome<K>> {
        let path = self.object_path(name, None)?;
        let bytes = self.send_delete(&path, params).await?;
        delete_outcome(&bytes, |bytes| {
            parse_json(bytes).map_err(|e| decode_error(bytes, 0, &e))
        })
    }

    /// DELETE every object of the collection that `selectors` match (its label and field
    /// selectors; its paging fields are ignored by the server). The answer is the list of the
    /// objects deleted (as they were), or a `Status`.
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use informer::{Api, ConfigMap, ListParams};
    /// use informer::client::DeleteParams;
    /// let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    /// cms.delete_collection(&DeleteParams::default(), &ListParams::default().labels("tmp=true")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_collection(
        &self,
        params: &DeleteParams,
        selectors: &ListParams,
    ) -> Result<DeleteOutcome<ObjectList<K>>> {
        if self.resource.namespaced && self.namespace.is_none() {
            // The apiserver answers 405: there is no collection delete across namespaces.
            return Err(Error::InvalidRequest(format!(
                "{} is namespaced: delete a collection through Api::namespaced, one namespace \
                 at a time",
                self.resource.kind
            )));
        }
        let path = with_query(self.request_collection_path()?, &selectors.to_query());
        let bytes = self.send_delete(&path, params).await?;
        delete_outcome(&bytes, |bytes| {
            let body: ListBody<K> = parse_json(bytes).map_err(|e| decode_error(bytes, 0, &e))?;
            let kind_ok = self.is_list_kind(&body.kind);
            body.into_list(kind_ok, &self.resource, &path)
        })
    }

    /// GET `name` through its `status` subresource (the whole object, as the server answers it).
    pub async fn get_status(&self, name: &str) -> Result<K> {
        let path = self.object_path(name, Some("status"))?;
        self.client.request(Method::GET, &path, None).await
    }

    /// PUT `object`'s status through the `status` subresource: only `.status` changes (and on
    /// most kinds nothing else can), with `metadata.resourceVersion` as the precondition, as
    /// [`replace`](Self::replace). For resources with a status subresource, writes to the object
    /// itself leave `.status` as it was: this is the way to set it.
    pub async fn replace_status(&self, name: &str, params: &PostParams, object: &K) -> Result<K>
    where
        K: Serialize,
    {
        self.put(self.object_path(name, Some("status"))?, params, object)
            .await
    }

    /// PATCH `name`'s `status` subresource, in any of the four types; a server-side apply of the
    /// status owns the status fields it sets.
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use informer::{Api, ApiResource, DynamicObject};
    /// use informer::client::{Patch, PatchParams};
    /// use serde_json::json;
    /// let widgets: Api<DynamicObject> = Api::namespaced_with(
    ///     client, "default", ApiResource::new("example.com", "v1", "Widget", "widgets", true));
    /// widgets.patch_status("w1", &PatchParams::apply("widget-operator"), &Patch::Apply(json!({
    ///     "metadata": {"name": "w1"},
    ///     "status": {"ready": true},
    /// }))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn patch_status<P: Serialize>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K> {
        self.patch_own(name, Some("status"), params, patch).await
    }

    /// GET `name`'s `scale` subresource.
    pub async fn get_scale(&self, name: &str) -> Result<Scale> {
        let path = self.object_path(name, Some("scale"))?;
        self.client.request(Method::GET, &path, None).await
    }

    /// PUT `name`'s `scale` subresource: sets the desired replicas, with the Scale's
    /// resourceVersion (when it has one) as the precondition.
    pub async fn replace_scale(
        &self,
        name: &str,
        params: &PostParams,
        scale: &Scale,
    ) -> Result<Scale> {
        let path = self.object_path(name, Some("scale"))?;
        self.send_object(Method::PUT, path, params, scale, "autoscaling/v1", "Scale")
            .await
    }

    /// PATCH `name`'s `scale` subresource.
    ///
    /// ```no_run
    /// # async fn demo(client: informer::Client) -> informer::Result<()> {
    /// use informer::{Api, ApiResource, DynamicObject};
    /// use informer::client::{Patch, PatchParams};
    /// let deployments: Api<DynamicObject> = Api::namespaced_with(
    ///     client, "default", ApiResource::new("apps", "v1", "Deployment", "deployments", true));
    /// let scale = deployments
    ///     .patch_scale("web", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"replicas": 3}})))
    ///     .await?;
    /// assert_eq!(scale.spec.replicas, Some(3));
    /// # Ok(()) }
    /// ```
    pub async fn patch_scale<P: Serialize>(
        &self,
        name: &str,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<Scale> {
        let path = self.object_path(name, Some("scale"))?;
        self.send_patch(path, params, patch, "autoscaling/v1", "Scale")
            .await
    }

    /// PUT `object` (the object, or its status) at `path`.
    async fn put(&self, path: String, params: &PostParams, object: &K) -> Result<K>
    where
        K: Serialize,
    {
        let (api_version, kind) = (self.resource.api_version(), &self.resource.kind);
        self.send_object(Method::PUT, path, params, object, &api_version, kind)
            .await
    }

    /// PATCH `name` (or its `subresource`), whose answer is a `K`.
    async fn patch_own<P: Serialize>(
        &self,
        name: &str,
        subresource: Option<&str>,
        params: &PatchParams,
        patch: &Patch<P>,
    ) -> Result<K> {
        let path = self.object_path(name, subresource)?;
        let (api_version, kind) = (self.resource.api_version(), &self.resource.kind);
        self.send_patch(path, params, patch, &api_version, kind)
            .await
    }

    /// POST or PUT `object` at `path` with `params`, typed as `api_version`/`kind` when it
    /// says nothing of its type; the answer decoded as `R`.
    async fn send_object<B: Serialize, R: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: String,
        params: &PostParams,
        object: &B,
        api_version: &str,
        kind: &str,
    ) -> Result<R> {
        let body = with_types(object, api_version, kind)
            .map_err(|e| Error::InvalidRequest(format!("the {kind} does not serialize: {e}")))?;
        let path = with_query(path, &params.to_query());
        self.client
            .request(method, &path, Some((json_body(&body)?, JSON)))
            .await
    }

    /// PATCH `path` with `patch`, an apply typed as `api_version`/`kind` when it says nothing of
    /// its type; the answer decoded as `R`.
    async fn send_patch<P: Serialize, R: serde::de::DeserializeOwned>(
        &self,
        path: String,
        params: &PatchParams,
        patch: &Patch<P>,
        api_version: &str,
        kind: &str,
    ) -> Result<R> {
        let (body, content_type) = self.patch_body(params, patch, api_version, kind)?;
        let path = with_query(path, &params.to_query());
        self.client
            .request(Method::PATCH, &path, Some((body, content_type)))
            .await
    }

    /// The checked body of a patch, and its content type.
    fn patch_body<P: Serialize>(
        &self,
        params: &PatchParams,
        patch: &Patch<P>,
        api_version: &str,
        kind: &str,
    ) -> Result<(Bytes, &'static str)> {
        let apply = matches!(patch, Patch::Apply(_));
        if apply && params.field_manager.as_deref().is_none_or(str::is_empty) {
            return Err(Error::InvalidRequest(
                "a server-side apply needs a field manager: PatchParams::apply(\"name\")".into(),
            ));
        }
        if params.force && !apply {
            return Err(Error::InvalidRequest(
                "force is for server-side apply (Patch::Apply) only".into(),
            ));
        }
        let body = patch
            .to_body(api_version, kind)
            .map_err(|e| Error::InvalidRequest(format!("the patch does not serialize: {e}")))?;
        Ok((Bytes::from(body), patch.content_type()))
    }

    async fn send_delete(&self, path: &str, params: &DeleteParams) -> Result<Vec<u8>> {
        let body = Bytes::from(params.to_body());
        self.client
            .request_bytes(Method::DELETE, path, Some((body, JSON)))
            .await
    }
}

/// The content type of create, replace and delete bodies.
const JSON: &str = "application/json";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_body_gets_types_only_when_missing() {
        let p = Patch::Apply(json!({"metadata": {"name": "a"}}));
        let body: Value = serde_json::from_slice(&p.to_body("v1", "ConfigMap").unwrap()).unwrap();
        assert_eq!(body["apiVersion"], "v1");
        assert_eq!(body["kind"], "ConfigMap");
        let p = Patch::Apply(json!({"apiVersion": "example.com/v2", "kind": "Widget"}));
        let body: Value = serde_json::from_slice(&p.to_body("v1", "ConfigMap").unwrap()).unwrap();
        assert_eq!(body["apiVersion"], "example.com/v2");
        // Other patch types are sent as given.
        let p = Patch::Merge(json!({"data": {"a": null}}));
        assert_eq!(
            p.to_body("v1", "ConfigMap").unwrap(),
            br#"{"data":{"a":null}}"#
        );
    }

    #[test]
    fn delete_body_with_everything() {
        let p = DeleteParams::default()
            .dry_run()
            .grace_period(5)
            .propagation(PropagationPolicy::Orphan)
            .preconditions(Preconditions {
                uid: Some("u".into()),
                resource_version: Some("7".into()),
            });
        assert_eq!(
            p.to_body(),
            r#"{"apiVersion":"v1","dryRun":["All"],"gracePeriodSeconds":5,"kind":"DeleteOptions","preconditions":{"resourceVersion":"7","uid":"u"},"propagationPolicy":"Orphan"}"#
        );
    }
}
