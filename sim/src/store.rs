//! The object store: current objects, the global resourceVersion, and the bounded event history.
//!
//! Invariants (all maintained under one mutex):
//! - `rv` is the single global revision, like an etcd revision: every successful write (create,
//!   a replace/patch that changes content, delete) increments it by exactly one and records one
//!   [`Event`] with that RV. No-op updates change nothing and record nothing, as on the real server.
//! - `history` holds, in RV order, every event with `rv > compacted`. So the state at any
//!   `x >= compacted` can be rebuilt by undoing the events after `x`; older RVs answer 410.
//! - Objects are keyed like etcd keys (`namespace/name`, or `name` when cluster-scoped) in a
//!   `BTreeMap`, so lists come out in etcd order and continue tokens are plain start keys.
//! - Each write serializes the object exactly once, as its event's wire frame
//!   (`{"type":..,"object":..}\n`); the version's bytes ([`Obj::rest`]) are a slice of that frame,
//!   and watch fan-out shares the same `Bytes` instead of re-encoding.
//! - Only the current version of an object keeps a `serde_json::Value` ([`Entry`]); history keeps
//!   bytes plus name/namespace/uid/labels, so retained history costs about one JSON copy per event.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use informer::model::ApiResource;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, watch};

use super::errors::ApiError;
use super::resources::{Registry, ResourceInfo};
use super::selector::Selectors;
use super::strategy::{self, Endpoint};
use super::{apply, crd, leases, patch};

/// How a write is made: through which endpoint, as which field manager, for real or not.
/// The default is the programmatic API's: a privileged writer whose objects are stored as given
/// (no status rules, no managedFields bookkeeping).
#[derive(Clone, Debug, Default)]
pub(crate) struct WriteCtx {
    /// The resource, its `/status`, or the programmatic API.
    pub endpoint: Endpoint,
    /// `dryRun=All`: every check runs, nothing is stored, no resourceVersion moves.
    pub dry_run: bool,
    /// The field manager an `Update` is recorded for (`None`: no bookkeeping).
    pub manager: Option<String>,
    /// A server-side apply: the apply already wrote `managedFields`.
    pub apply: bool,
}

impl WriteCtx {
    /// The `subresource` of managedFields entries this write records.
    fn subresource(&self) -> Option<&'static str> {
        (self.endpoint == Endpoint::Status).then_some("status")
    }
}

/// DeleteOptions, as far as the simulator reads them.
#[derive(Clone, Debug, Default)]
pub(crate) struct DeleteOpts {
    /// `preconditions` (`uid`, `resourceVersion`).
    pub preconditions: Option<Value>,
    /// `propagationPolicy` (validated by the caller): `Orphan` and `Foreground` add their
    /// finalizers; no garbage collector ever removes them.
    pub propagation: Option<String>,
    /// `gracePeriodSeconds`.
    pub grace_period: Option<i64>,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The programmatic API's delete: gone at once, whatever finalizers or grace period.
    pub immediate: bool,
}

/// The PATCH body types besides apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json` (builtin kinds).
    Strategic,
    /// `application/json-patch+json`.
    Json,
}

/// `conditions` without their transition times, to see whether a CRD's conditions changed.
fn strip_times(conditions: &Value) -> Value {
    let mut c = conditions.clone();
    if let Some(list) = c.as_array_mut() {
        for cond in list {
            if let Some(m) = cond.as_object_mut() {
                m.remove("lastTransitionTime");
            }
        }
    }
    c
}

/// One version of an object, as history and watchers need it: its serialization and the few
/// fields selectors look at. The full `Value` lives only with the current version (see
/// [`Entry`]), so history costs about one copy of the JSON per event.
#[derive(Debug)]
pub(crate) struct Obj {
    /// Every member except `kind`/`apiVersion`, serialized compactly, without braces. A slice of
    /// the event frame that introduced this version (no second copy).
    pub rest: Bytes,
    /// `metadata.resourceVersion` as a number.
    pub rv: u64,
    pub name: String,
    pub namespace: Option<String>,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
}

impl Obj {
    /// True if the object passes both selectors.
    pub(crate) fn matches(&self, sel: &Selectors) -> bool {
        sel.label.matches_labels(&self.labels)
            && sel.field.matches_meta(&self.name, self.namespace())
    }

    /// Serializes `value` once, as the frame of a `ty` event; the object's bytes are a slice of it.
    pub(crate) fn encode(
        ty: EventType,
        info: &ResourceInfo,
        value: &Value,
        rv: u64,
    ) -> (Arc<Obj>, Bytes) {
        let mut out = Vec::with_capacity(1024);
        out.extend_from_slice(b"{\"type\":\"");
        out.extend_from_slice(ty.as_str().as_bytes());
        out.extend_from_slice(b"\",\"object\":");
        out.extend_from_slice(&info.object_prefix);
        let start = out.len();
        if let Some(map) = value.as_object() {
            let mut first = true;
            for (k, v) in map {
                if k == "kind" || k == "apiVersion" {
                    continue;
                }
                if !first {
                    out.push(b',');
                }
                first = false;
                let _ = serde_json::to_writer(&mut out, k);
                out.push(b':');
                let _ = serde_json::to_writer(&mut out, v);
            }
        }
        let end = out.len();
        if start == end {
            out.pop(); // no members: drop the prefix's trailing comma
        }
        out.extend_from_slice(b"}}\n");
        let frame = Bytes::from(out);
        let rest = if start == end {
            Bytes::new()
        } else {
            frame.slice(start..end)
        };
        let meta = value.get("metadata");
        let s = |f: &str| meta.and_then(|m| m.get(f)).and_then(Value::as_str);
        let labels = meta
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|l| {
                l.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                    .collect()
            })
            .unwrap_or_default();
        let obj = Obj {
            rest,
            rv,
            name: s("name").unwrap_or("").to_string(),
            namespace: s("namespace").map(str::to_string),
            uid: s("uid").unwrap_or("").to_string(),
            labels,
        };
        (Arc::new(obj), frame)
    }

    /// `{"kind":..,"apiVersion":..,<rest>}`.
    pub fn write_full(&self, info: &ResourceInfo, out: &mut Vec<u8>) {
        out.extend_from_slice(&info.object_prefix);
        if self.rest.is_empty() {
            out.pop(); // the prefix's trailing comma
        }
        out.extend_from_slice(&self.rest);
        out.push(b'}');
    }

    /// The full object as bytes.
    pub fn full(&self, info: &ResourceInfo) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.rest.len() + 64);
        self.write_full(info, &mut out);
        out
    }

    /// The full object parsed back into a `Value` (for the programmatic API and rare paths).
    pub fn to_value(&self, info: &ResourceInfo) -> Value {
        serde_json::from_slice(&self.full(info)).unwrap_or_default()
    }

    /// `{<rest>}`: the object as a typed list item (no kind/apiVersion).
    pub fn write_bare(&self, out: &mut Vec<u8>) {
        out.push(b'{');
        out.extend_from_slice(&self.rest);
        out.push(b'}');
    }

    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }
}

/// The current version of an object: the shared [`Obj`] plus the `Value` updates start from.
#[derive(Debug)]
pub(crate) struct Entry {
    pub obj: Arc<Obj>,
    pub value: Value,
}

/// The type of a stored event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One write, as recorded in history and broadcast to watchers.
#[derive(Debug)]
pub(crate) struct Event {
    pub rv: u64,
    pub resource: usize,
    pub ty: EventType,
    /// New state (for DELETED: the last state stamped with the deletion RV).
    pub obj: Arc<Obj>,
    /// Previous state (MODIFIED, DELETED).
    pub prev: Option<Arc<Obj>>,
    /// The wire frame, `{"type":"..","object":{..}}\n`.
    pub frame: Bytes,
    pub at: Instant,
}

/// Builds a watch frame for `obj`.
pub(crate) fn frame(ty: &str, info: &ResourceInfo, obj: &Obj) -> Bytes {
    let mut out = Vec::with_capacity(obj.rest.len() + 64);
    write_frame(ty, info, obj, &mut out);
    Bytes::from(out)
}

/// Appends a watch frame for `obj` to `out`.
pub(crate) fn write_frame(ty: &str, info: &ResourceInfo, obj: &Obj, out: &mut Vec<u8>) {
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(ty.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    obj.write_full(info, out);
    out.extend_from_slice(b"}\n");
}

/// History bounds.
#[derive(Clone, Copy, Debug)]
pub struct HistoryLimits {
    /// Keep at most this many events.
    pub max_events: usize,
    /// Drop events older than this (checked on each write).
    pub max_age: Option<Duration>,
}

/// Where a list reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListAt {
    Latest,
    Exact(u64),
}

/// One page of a list.
pub(crate) struct Page {
    pub rv: u64,
    pub items: Vec<Arc<Obj>>,
    /// Start key (relative to the list prefix, `\0`-terminated) of the next page.
    pub next_start: Option<String>,
    pub remaining: Option<u64>,
}

/// How a watch starts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum WatchFrom {
    /// Events with RV > x.
    Rv(u64),
    /// Current state (synthetic ADDED if `initial`), then events after it.
    Current { initial: bool },
}

/// What a new watch gets.
pub(crate) struct WatchStart {
    pub rx: broadcast::Receiver<Arc<Event>>,
    pub initial: Vec<Arc<Obj>>,
    pub replay: Vec<Arc<Event>>,
    /// Events with RV <= this are not delivered.
    pub min_rv: u64,
    /// Store RV when the watch started.
    pub start_rv: u64,
}

struct Inner {
    rv: u64,
    compacted: u64,
    /// Per resource (by index): the resourceVersion its watch cache started at. Like the 1.20
    /// apiserver's cacher, whose `listResourceVersion` is the RV of the list it was built from,
    /// a watch from an older version answers 410 even though the store still holds the history:
    /// built-in resources start with the store, custom ones when they are registered (a CRD's
    /// cacher is created when it is first served). See [`Store::start_watch`].
    watch_floor: Vec<u64>,
    registry: Registry,
    objects: Vec<BTreeMap<String, Entry>>,
    history: VecDeque<Arc<Event>>,
    limits: HistoryLimits,
    rng: crate::rng::Rng,
}

/// The store shared by the HTTP server and the programmatic API.
pub(crate) struct Store {
    inner: Mutex<Inner>,
    events: broadcast::Sender<Arc<Event>>,
    rv_tx: watch::Sender<u64>,
}

/// What a PUT writes over the stored object: `value`, once a Lease's is checked to carry the
/// resourceVersion it replaces (kube-apiserver requires one for Leases).
fn replaced(value: Value, info: &ResourceInfo, name: &str) -> Result<Value, ApiError> {
    let rv = meta_str(&value, "resourceVersion").unwrap_or("");
    if leases::is_lease(info) && rv.is_empty() {
        return Err(leases::resource_version_required(name));
    }
    Ok(value)
}

fn key(ns: Option<&str>, name: &str) -> String {
    match ns {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// RFC 3339 UTC, second precision (`2026-11-30T01:02:59Z`), from the system clock.
pub(crate) fn now_rfc3339() -> String {
    informer::model::time::format_rfc3339(SystemTime::now())
}

fn uuid(rng: &mut crate::rng::Rng) -> String {
    let a = rng.u128();
    let h = format!("{a:032x}");
    format!(
        "{}-{}-4{}-{}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        ["8", "9", "a", "b"][rng.index(4)],
        &h[17..20],
        &h[20..32]
    )
}

fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name.as_bytes()[name.len() - 1].is_ascii_alphanumeric()
}

/// Builtin kinds are Go structs: fields tagged `omitempty` that hold an empty map or slice (or
/// `null`) are not stored, so the apiserver never returns them (a ConfigMap created with `"data": {}`
/// comes back without `data`; found by the differential test against 1.20). Only the fields known to
/// be `omitempty` are dropped: ObjectMeta's maps and lists, and ConfigMap/Secret payload maps. Custom
/// resources are stored as sent.
fn omit_empty(info: &ResourceInfo, value: &mut Value) {
    fn empty(v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Object(m) => m.is_empty(),
            Value::Array(a) => a.is_empty(),
            _ => false,
        }
    }
    if !info.builtin {
        return;
    }
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(m)) = obj.get_mut("metadata") {
        m.retain(|k, v| {
            !(matches!(
                k.as_str(),
                "labels" | "annotations" | "finalizers" | "ownerReferences" | "managedFields"
            ) && empty(v))
        });
    }
    let payload: &[&str] = match (info.api.group.as_ref(), info.api.kind.as_ref()) {
        ("", "ConfigMap") => &["data", "binaryData"],
        ("", "Secret") => &["data", "stringData"],
        _ => &[],
    };
    obj.retain(|k, v| !(payload.contains(&k.as_str()) && empty(v)));
}

fn meta_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = json!({});
    }
    v["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

fn meta_str<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
}

/// One page of `map` (objects under `prefix`, from `full_start`), with the continue key and
/// `remainingItemCount` (omitted with selectors, as the apiserver does).
fn paginate<'a, V>(
    map: &'a BTreeMap<String, V>,
    obj: impl Fn(&'a V) -> &'a Arc<Obj>,
    prefix: &str,
    full_start: &String,
    sel: &Selectors,
    limit: Option<usize>,
    rv: u64,
) -> Page {
    let mut iter = map
        .range::<String, _>((Bound::Included(full_start), Bound::Unbounded))
        .take_while(|(k, _)| k.starts_with(prefix));
    let mut items = Vec::new();
    let mut last_key = None;
    let limit = limit.unwrap_or(usize::MAX);
    for (k, v) in iter.by_ref() {
        let o = obj(v);
        if o.matches(sel) {
            items.push(o.clone());
            if items.len() == limit {
                last_key = Some(k);
                break;
            }
        }
    }
    let (mut next_start, mut remaining) = (None, None);
    if let Some(last) = last_key {
        let rest = iter.count() as u64;
        if rest > 0 {
            next_start = Some(format!("{}\0", &last[prefix.len()..]));
            if sel.is_empty() {
                remaining = Some(rest);
            }
        }
    }
    Page {
        rv,
        items,
        next_start,
        remaining,
    }
}

impl Store {
    pub fn new(
        limits: HistoryLimits,
        initial_rv: u64,
        broadcast_capacity: usize,
        seed: Option<u64>,
    ) -> Store {
        let registry = Registry::builtin();
        let objects = registry.list().iter().map(|_| BTreeMap::new()).collect();
        let watch_floor = vec![initial_rv; registry.list().len()];
        let (events, _) = broadcast::channel(broadcast_capacity.max(16));
        let rv_tx = watch::Sender::new(initial_rv);
        Store {
            inner: Mutex::new(Inner {
                rv: initial_rv,
                compacted: initial_rv,
                watch_floor,
                registry,
                objects,
                history: VecDeque::new(),
                limits,
                rng: seed.map(crate::rng::Rng::with_seed).unwrap_or_default(),
            }),
            events,
            rv_tx,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that matters
        // more than serving, so recover from poisoning.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Serves EndpointSlices as `discovery.k8s.io/v1beta1` instead of `v1` (see
    /// `SimulatorBuilder::endpoint_slices_v1beta1`).
    pub fn serve_endpoint_slices_v1beta1_only(&self) {
        let mut g = self.lock();
        if let Some(v1) = g
            .registry
            .find_path("discovery.k8s.io", "v1", "endpointslices")
        {
            g.registry.withdraw(v1);
        }
        let beta = ApiResource::from_static(
            "discovery.k8s.io",
            "v1beta1",
            "EndpointSlice",
            "endpointslices",
            true,
        );
        Self::register_locked(&mut g, ResourceInfo::new(beta, &[], true));
    }

    pub fn register(&self, info: ResourceInfo) -> usize {
        Self::register_locked(&mut self.lock(), info)
    }

    fn register_locked(g: &mut Inner, info: ResourceInfo) -> usize {
        let i = g.registry.add(info);
        if g.objects.len() <= i {
            g.objects.push(BTreeMap::new());
        }
        // A (re-)registered resource gets a new watch cache, built from a list at the current RV.
        let rv = g.rv;
        if g.watch_floor.len() <= i {
            g.watch_floor.push(rv);
        } else {
            g.watch_floor[i] = rv;
        }
        i
    }

    pub fn info(&self, idx: usize) -> Arc<ResourceInfo> {
        self.lock().registry.list()[idx].clone()
    }

    pub fn with_registry<T>(&self, f: impl FnOnce(&Registry) -> T) -> T {
        f(&self.lock().registry)
    }

    pub fn resolve(&self, name: &str) -> Result<usize, ApiError> {
        self.lock().registry.find_name(name).ok_or_else(|| {
            ApiError::new(
                404,
                "NotFound",
                format!("the server doesn't have a resource type \"{name}\""),
            )
        })
    }

    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    pub fn compacted_rv(&self) -> u64 {
        self.lock().compacted
    }

    /// Waits until the store RV reaches `rv`, up to `timeout`; returns the RV reached.
    pub async fn wait_for_rv(&self, rv: u64, timeout: Duration) -> u64 {
        let mut rx = self.rv_tx.subscribe();
        let _ = tokio::time::timeout(timeout, rx.wait_for(|cur| *cur >= rv)).await;
        *rx.borrow()
    }

    /// Drops all history: every RV older than the current one now answers 410.
    pub fn compact(&self) {
        let mut g = self.lock();
        g.history.clear();
        g.compacted = g.rv;
    }

    fn scope(info: &ResourceInfo, ns: Option<&str>) -> Option<String> {
        info.api
            .namespaced
            .then(|| ns.unwrap_or("default").to_string())
    }

    /// Records a write: bumps nothing (the caller already did), appends history, broadcasts.
    fn record(
        &self,
        g: &mut Inner,
        idx: usize,
        ty: EventType,
        (obj, frame): (Arc<Obj>, Bytes),
        prev: Option<Arc<Obj>>,
    ) {
        let ev = Arc::new(Event {
            rv: g.rv,
            resource: idx,
            ty,
            frame,
            obj,
            prev,
            at: Instant::now(),
        });
        g.history.push_back(ev.clone());
        let now = Instant::now();
        while let Some(front) = g.history.front() {
            let too_many = g.history.len() > g.limits.max_events;
            let too_old = g
                .limits
                .max_age
                .is_some_and(|a| now.duration_since(front.at) > a);
            if !(too_many || too_old) {
                break;
            }
            g.compacted = front.rv;
            g.history.pop_front();
        }
        let _ = self.events.send(ev);
        self.rv_tx.send_replace(g.rv);
    }
    /// Creates an object as a privileged writer (the programmatic API): stored as given.
    pub fn create(&self, idx: usize, ns: Option<&str>, value: Value) -> Result<Arc<Obj>, ApiError> {
        self.create_with(idx, ns, value, &WriteCtx::default())
    }

    /// Creates an object through `ctx` (POST).
    pub fn create_with(
        &self,
        idx: usize,
        ns: Option<&str>,
        value: Value,
        ctx: &WriteCtx,
    ) -> Result<Arc<Obj>, ApiError> {
        let mut g = self.lock();
        self.create_locked(&mut g, idx, ns, value, ctx)
    }

    fn create_locked(
        &self,
        g: &mut Inner,
        idx: usize,
        ns: Option<&str>,
        mut value: Value,
        ctx: &WriteCtx,
    ) -> Result<Arc<Obj>, ApiError> {
        let info = g.registry.list()[idx].clone();
        if !value.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was in an unknown format",
            ));
        }
        let body_ns = meta_str(&value, "namespace").map(str::to_string);
        let ns = match (info.api.namespaced, ns, body_ns.as_deref()) {
            (false, _, _) => None,
            (true, Some(a), Some(b)) if !b.is_empty() && a != b => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            (true, Some(a), _) => Some(a.to_string()),
            (true, None, Some(b)) if !b.is_empty() => Some(b.to_string()),
            (true, None, _) => Some("default".to_string()),
        };
        let mut name = meta_str(&value, "name").unwrap_or("").to_string();
        if name.is_empty() {
            let Some(gen_name) = meta_str(&value, "generateName").filter(|s| !s.is_empty()) else {
                return Err(ApiError::invalid(
                    &info.api.kind,
                    "",
                    "metadata.name",
                    "FieldValueRequired",
                    "Required value: name or generateName is required",
                ));
            };
            let gen_name = gen_name.to_string();
            loop {
                let suffix: String = (0..5)
                    .map(|_| b"bcdfghjklmnpqrstvwxz2456789"[g.rng.index(27)] as char)
                    .collect();
                name = format!("{gen_name}{suffix}");
                if !g.objects[idx].contains_key(&key(ns.as_deref(), &name)) {
                    break;
                }
            }
        }
        if !is_valid_name(&name) {
            // The apiserver's DNS-1123 subdomain message, verbatim (differential test, 1.20).
            return Err(ApiError::invalid(
                &info.api.kind,
                &name,
                "metadata.name",
                "FieldValueInvalid",
                format!(
                    "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                ),
            ));
        }
        let k = key(ns.as_deref(), &name);
        if g.objects[idx].contains_key(&k) {
            return Err(
                ApiError::already_exists(&info.api.plural, &name).with_group(&info.api.group)
            );
        }
        let now = now_rfc3339();
        if ctx.endpoint != Endpoint::Raw {
            strategy::prepare_create(&info, &mut value);
        }
        let crd = crd::is_crd(&info);
        if crd {
            meta_mut(&mut value).insert("name".into(), json!(name));
            crd::prepare(&mut value, &now)?;
        }
        let uid = uuid(&mut g.rng);
        let has_generation = if leases::is_lease(&info) {
            false
        } else if ctx.endpoint == Endpoint::Raw && !crd {
            value.get("spec").is_some()
        } else {
            strategy::has_generation(&info, &value)
        };
        if leases::is_lease(&info) {
            leases::validate_times(&value)?;
        }
        omit_empty(&info, &mut value);
        value["kind"] = json!(info.api.kind);
        value["apiVersion"] = json!(info.api.api_version());
        let m = meta_mut(&mut value);
        m.insert("name".into(), json!(name));
        match &ns {
            Some(ns) => m.insert("namespace".into(), json!(ns)),
            None => m.remove("namespace"),
        };
        m.insert("uid".into(), json!(uid));
        m.insert("creationTimestamp".into(), json!(now));
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        if has_generation {
            m.insert("generation".into(), json!(1));
        } else {
            m.remove("generation");
        }
        if let Some(manager) = ctx.manager.as_deref().filter(|_| !ctx.apply) {
            apply::record_update(&info, None, &mut value, manager, ctx.subresource(), &now);
        }
        if ctx.dry_run {
            // As the apiserver's dry-run storage answers: everything but a resourceVersion.
            meta_mut(&mut value).remove("resourceVersion");
            let (obj, _) = Obj::encode(EventType::Added, &info, &value, 0);
            return Ok(obj);
        }
        g.rv += 1;
        let rv = g.rv;
        meta_mut(&mut value).insert("resourceVersion".into(), json!(rv.to_string()));
        let (obj, frame) = Obj::encode(EventType::Added, &info, &value, rv);
        let served = crd.then(|| value.clone());
        g.objects[idx].insert(
            k,
            Entry {
                obj: obj.clone(),
                value,
            },
        );
        self.record(g, idx, EventType::Added, (obj.clone(), frame), None);
        if let Some(crd_value) = served {
            self.serve_crd(g, &crd_value);
        }
        Ok(obj)
    }

    pub fn get(&self, idx: usize, ns: Option<&str>, name: &str) -> Result<Arc<Obj>, ApiError> {
        let g = self.lock();
        let info = &g.registry.list()[idx];
        let k = key(Self::scope(info, ns).as_deref(), name);
        g.objects[idx]
            .get(&k)
            .map(|e| e.obj.clone())
            .ok_or_else(|| ApiError::not_found(&info.api.plural, name).with_group(&info.api.group))
    }

    /// The current `Value` of an object (for the programmatic API).
    pub fn get_value(&self, idx: usize, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let g = self.lock();
        let info = &g.registry.list()[idx];
        let k = key(Self::scope(info, ns).as_deref(), name);
        g.objects[idx]
            .get(&k)
            .map(|e| e.value.clone())
            .ok_or_else(|| ApiError::not_found(&info.api.plural, name).with_group(&info.api.group))
    }

    /// The current `Value`s of `idx` in `ns` (all namespaces if `None`), in key order, and the RV.
    pub fn list_values(&self, idx: usize, ns: Option<&str>) -> (u64, Vec<Value>) {
        let g = self.lock();
        let values = g.objects[idx]
            .values()
            .filter(|e| ns.is_none() || e.obj.namespace() == ns)
            .map(|e| e.value.clone())
            .collect();
        (g.rv, values)
    }
    /// Replaces `name` with `value` (PUT) as a privileged writer. A non-empty
    /// `metadata.resourceVersion` must match.
    pub fn replace(
        &self,
        idx: usize,
        ns: Option<&str>,
        name: &str,
        value: Value,
    ) -> Result<Arc<Obj>, ApiError> {
        self.replace_with(idx, ns, name, value, &WriteCtx::default())
    }

    /// A PUT through `ctx`: replaces `name` with `value`, or, for the kinds the apiserver lets
    /// an update create (Leases and Endpoints: their strategies' `AllowCreateOnUpdate`), creates
    /// it when it is missing, whatever resourceVersion the body carries (checked against 1.20: a
    /// stale resourceVersion on a deleted Lease answers 201, unless the body names the deleted
    /// object's uid: 409). `true` when it created.
    pub fn put_with(
        &self,
        idx: usize,
        ns: Option<&str>,
        name: &str,
        mut value: Value,
        ctx: &WriteCtx,
    ) -> Result<(Arc<Obj>, bool), ApiError> {
        // One lock for the check and the write: a DELETE in between must not turn a create
        // into a 404.
        let mut g = self.lock();
        let info = g.registry.list()[idx].clone();
        let missing = !g.objects[idx].contains_key(&key(Self::scope(&info, ns).as_deref(), name));
        let creates = leases::is_lease(&info)
            || (info.api.group.is_empty() && info.api.plural == "endpoints");
        if missing && creates && value.is_object() {
            // The body names the uid of an object that is gone: the storage's uid precondition
            // fails (what an elector renewing a deleted Lease meets).
            if let Some(uid) = meta_str(&value, "uid").filter(|u| !u.is_empty()) {
                let (plural, group) = (&info.api.plural, &info.api.group);
                return Err(ApiError::uid_precondition_failed(plural, group, name, uid));
            }
            match meta_str(&value, "name") {
                Some(n) if !n.is_empty() && n != name => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
                _ => {}
            }
            if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
                meta.insert("name".into(), Value::String(name.to_string()));
            } else {
                value["metadata"] = json!({ "name": name });
            }
            return self
                .create_locked(&mut g, idx, ns, value, ctx)
                .map(|obj| (obj, true));
        }
        self.update_locked(&mut g, idx, ns, name, ctx, |_, info| {
            replaced(value, info, name)
        })
        .map(|obj| (obj, false))
    }

    /// Replaces `name` with `value` through `ctx` (PUT).
    pub fn replace_with(
        &self,
        idx: usize,
        ns: Option<&str>,
        name: &str,
        value: Value,
        ctx: &WriteCtx,
    ) -> Result<Arc<Obj>, ApiError> {
        self.update(idx, ns, name, ctx, |_, info| replaced(value, info, name))
    }

    /// Applies an RFC 7386 merge patch to `name` (PATCH) as a privileged writer.
    pub fn patch(
        &self,
        idx: usize,
        ns: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<Arc<Obj>, ApiError> {
        self.patch_with(idx, ns, name, PatchKind::Merge, patch, &WriteCtx::default())
    }

    /// Applies a patch of `kind` to `name` through `ctx` (PATCH). Only a resourceVersion the
    /// patch itself writes is a precondition.
    pub fn patch_with(
        &self,
        idx: usize,
        ns: Option<&str>,
        name: &str,
        kind: PatchKind,
        patch: &Value,
        ctx: &WriteCtx,
    ) -> Result<Arc<Obj>, ApiError> {
        if kind != PatchKind::Json && !patch.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was in an unknown format",
            ));
        }
        self.update(idx, ns, name, ctx, |old, info| {
            let mut v = old.clone();
            match kind {
                PatchKind::Merge => {
                    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("resourceVersion");
                    }
                    patch::merge_patch(&mut v, patch);
                }
                PatchKind::Strategic => {
                    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("resourceVersion");
                    }
                    patch::strategic_merge(info, &mut v, patch)?;
                }
                PatchKind::Json => patch::json_patch(&mut v, patch)?,
            }
            Ok(v)
        })
    }

    /// Server-side apply of `config` by `ctx.manager` to `name`; creates the object when it does
    /// not exist (the bool says so). `force` takes conflicting fields over.
    pub fn apply(
        &self,
        idx: usize,
        ns: Option<&str>,
        name: &str,
        config: &Value,
        ctx: &WriteCtx,
        force: bool,
    ) -> Result<(Arc<Obj>, bool), ApiError> {
        let mut g = self.lock();
        let info = g.registry.list()[idx].clone();
        let manager = ctx.manager.clone().unwrap_or_default();
        let ctx = WriteCtx {
            apply: true,
            ..ctx.clone()
        };
        let config = if info.status_subresource && ctx.endpoint != Endpoint::Raw {
            apply::restrict_to(config, ctx.endpoint == Endpoint::Status)
        } else {
            config.clone()
        };
        let now = now_rfc3339();
        let scoped = Self::scope(&info, ns);
        let exists = g.objects[idx].contains_key(&key(scoped.as_deref(), name));
        if exists {
            let obj = self.update_locked(&mut g, idx, ns, name, &ctx, |old, info| {
                apply::apply(
                    info,
                    Some(old),
                    &config,
                    &manager,
                    ctx.subresource(),
                    force,
                    &now,
                )
            })?;
            return Ok((obj, false));
        }
        if ctx.endpoint == Endpoint::Status {
            return Err(ApiError::not_found(&info.api.plural, name).with_group(&info.api.group));
        }
        let mut value = apply::apply(&info, None, &config, &manager, None, force, &now)?;
        match meta_str(&value, "name") {
            Some(n) if n == name => {}
            Some(n) if !n.is_empty() => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {
                meta_mut(&mut value).insert("name".into(), json!(name));
            }
        }
        let obj = self.create_locked(&mut g, idx, scoped.as_deref(), value, &ctx)?;
        Ok((obj, true))
    }

    /// Updates `name` to what `make` returns from the stored value (PUT, PATCH, scale writes).
    pub fn update(
        &self,
        idx: usize,
        ns: Option<&str>,
        name: &str,
        ctx: &WriteCtx,
        make: impl FnOnce(&Value, &ResourceInfo) -> Result<Value, ApiError>,
    ) -> Result<Arc<Obj>, ApiError> {
        let mut g = self.lock();
        self.update_locked(&mut g, idx, ns, name, ctx, make)
    }

    fn update_locked(
        &self,
        g: &mut Inner,
        idx: usize,
        ns: Option<&str>,
        name: &str,
        ctx: &WriteCtx,
        make: impl FnOnce(&Value, &ResourceInfo) -> Result<Value, ApiError>,
    ) -> Result<Arc<Obj>, ApiError> {
        let info = g.registry.list()[idx].clone();
        let ns = Self::scope(&info, ns);
        let k = key(ns.as_deref(), name);
        let Some(old) = g.objects[idx].get(&k) else {
            return Err(ApiError::not_found(&info.api.plural, name).with_group(&info.api.group));
        };
        let old_value = old.value.clone();
        let old_obj = old.obj.clone();
        let mut value = make(&old_value, &info)?;
        if !value.is_object() {
            return Err(ApiError::bad_request(
                "the body of the request was in an unknown format",
            ));
        }
        if leases::is_lease(&info) {
            leases::validate_times(&value)?;
        }
        match meta_str(&value, "name") {
            Some(n) if !n.is_empty() && n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            _ => {}
        }
        if let (Some(body_ns), Some(ns)) = (meta_str(&value, "namespace"), ns.as_deref())
            && !body_ns.is_empty()
            && body_ns != ns
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        match meta_str(&value, "resourceVersion") {
            Some(rv) if !rv.is_empty() && rv != old_obj.rv.to_string() => {
                return Err(ApiError::conflict(&info.api.plural, name).with_group(&info.api.group));
            }
            _ => {}
        }
        let api = ctx.endpoint != Endpoint::Raw;
        let now = now_rfc3339();
        strategy::prepare_update(&info, ctx.endpoint, &old_value, &mut value);
        let crd = crd::is_crd(&info);
        if crd {
            crd::prepare(&mut value, &now)?;
            // The controllers' conditions keep their first transition time.
            if value
                .get("status")
                .and_then(|s| s.get("conditions"))
                .map(strip_times)
                == old_value
                    .get("status")
                    .and_then(|s| s.get("conditions"))
                    .map(strip_times)
            {
                value["status"]["conditions"] = old_value["status"]["conditions"].clone();
            }
        }
        omit_empty(&info, &mut value);
        value["kind"] = json!(info.api.kind);
        value["apiVersion"] = json!(info.api.api_version());
        let old_meta = old_value.get("metadata").cloned().unwrap_or_default();
        let m = meta_mut(&mut value);
        m.insert("name".into(), json!(name));
        match &ns {
            Some(ns) => m.insert("namespace".into(), json!(ns)),
            None => m.remove("namespace"),
        };
        let mut kept = vec!["uid", "creationTimestamp", "generation", "resourceVersion"];
        if api {
            kept.extend(["deletionTimestamp", "deletionGracePeriodSeconds"]);
            if !m.contains_key("managedFields") {
                kept.push("managedFields");
            }
        }
        for f in kept {
            match old_meta.get(f) {
                Some(v) => m.insert(f.into(), v.clone()),
                None => m.remove(f),
            };
        }
        let finalizers = |v: &Value| -> Vec<Value> {
            v.get("metadata")
                .and_then(|m| m.get("finalizers"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let being_deleted = old_meta
            .get("deletionTimestamp")
            .is_some_and(|t| !t.is_null());
        if api && being_deleted {
            let old_f = finalizers(&old_value);
            let extra: Vec<String> = finalizers(&value)
                .iter()
                .filter(|f| !old_f.contains(f))
                .filter_map(|f| f.as_str().map(|s| format!("{s:?}")))
                .collect();
            if !extra.is_empty() {
                return Err(ApiError::invalid(
                    &info.api.kind,
                    name,
                    "metadata.finalizers",
                    "FieldValueForbidden",
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                        extra.join(", ")
                    ),
                )
                .with_group(&info.api.group));
            }
        }
        if let Some(manager) = ctx.manager.as_deref().filter(|_| !ctx.apply) {
            apply::record_update(
                &info,
                Some(&old_value),
                &mut value,
                manager,
                ctx.subresource(),
                &now,
            );
        }
        if value == old_value {
            return Ok(old_obj); // no-op update: no new RV, no event
        }
        let bump = if api || crd || !info.builtin {
            ctx.endpoint != Endpoint::Status
                && strategy::bumps_generation(&info, &old_value, &value)
        } else {
            value.get("spec") != old_value.get("spec")
        };
        let m = meta_mut(&mut value);
        if bump && let Some(gen_) = m.get("generation").and_then(Value::as_i64) {
            m.insert("generation".into(), json!(gen_ + 1));
        }
        // Removing the last finalizer of an object being deleted deletes it.
        let finalized =
            being_deleted && !finalizers(&old_value).is_empty() && finalizers(&value).is_empty();
        if ctx.dry_run {
            let (obj, _) = Obj::encode(EventType::Modified, &info, &value, old_obj.rv);
            return Ok(obj);
        }
        g.rv += 1;
        let rv = g.rv;
        meta_mut(&mut value).insert("resourceVersion".into(), json!(rv.to_string()));
        if finalized {
            g.objects[idx].remove(&k);
            let (obj, frame) = Obj::encode(EventType::Deleted, &info, &value, rv);
            self.record(
                g,
                idx,
                EventType::Deleted,
                (obj.clone(), frame),
                Some(old_obj),
            );
            if crd {
                self.withdraw_crd(g, &value);
            }
            return Ok(obj);
        }
        let (obj, frame) = Obj::encode(EventType::Modified, &info, &value, rv);
        let served = crd.then(|| value.clone());
        g.objects[idx].insert(
            k,
            Entry {
                obj: obj.clone(),
                value,
            },
        );
        self.record(
            g,
            idx,
            EventType::Modified,
            (obj.clone(), frame),
            Some(old_obj),
        );
        if let Some(crd_value) = served {
            self.serve_crd(g, &crd_value);
        }
        Ok(obj)
    }

    /// Deletes `name` as a privileged writer; returns the last state stamped with the deletion
    /// RV. `preconditions` are DeleteOptions.preconditions (`uid`, `resourceVersion`).
    pub fn delete(
        &self,
        idx: usize,
        ns: Option<&str>,
        name: &str,
        preconditions: Option<&Value>,
    ) -> Result<Arc<Obj>, ApiError> {
        let opts = DeleteOpts {
            preconditions: preconditions.cloned(),
            immediate: true,
            ..DeleteOpts::default()
        };
        self.delete_with(idx, ns, name, &opts).map(|(o, _)| o)
    }

    /// Deletes `name` with DeleteOptions. Returns the object and whether it is gone: an object
    /// with finalizers (after the propagation policy's) is only marked (`deletionTimestamp`), as
    /// is a Pod bound to a node with a grace period (no kubelet ever confirms it).
    pub fn delete_with(
        &self,
        idx: usize,
        ns: Option<&str>,
        name: &str,
        opts: &DeleteOpts,
    ) -> Result<(Arc<Obj>, bool), ApiError> {
        let mut g = self.lock();
        let info = g.registry.list()[idx].clone();
        let k = key(Self::scope(&info, ns).as_deref(), name);
        let Some(old) = g.objects[idx].get(&k) else {
            return Err(ApiError::not_found(&info.api.plural, name).with_group(&info.api.group));
        };
        if let Some(p) = &opts.preconditions {
            // The apiserver's messages (`Preconditions.Check` in the storage layer), which name
            // the kind, not the resource.
            let uid = meta_str(&old.value, "uid").unwrap_or("");
            let rv = old.obj.rv.to_string();
            let failed = |what: &str, wanted: &str, had: &str, why: &str| {
                ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on {} {name:?}: the {what} in the precondition ({wanted}) does not match the {what} in record ({had}). {why}",
                        info.api.kind
                    ),
                )
            };
            if let Some(u) = p.get("uid").and_then(Value::as_str).filter(|u| *u != uid) {
                return Err(failed(
                    "UID",
                    u,
                    uid,
                    "The object might have been deleted and then recreated",
                ));
            }
            if let Some(r) = p
                .get("resourceVersion")
                .and_then(Value::as_str)
                .filter(|r| *r != rv)
            {
                return Err(failed(
                    "ResourceVersion",
                    r,
                    &rv,
                    "The object might have been modified",
                ));
            }
        }
        let mut value = old.value.clone();
        let old_obj = old.obj.clone();
        let being_deleted = meta_str(&value, "deletionTimestamp").is_some();
        let mut finalizers: Vec<Value> = value
            .get("metadata")
            .and_then(|m| m.get("finalizers"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let gc_finalizer = match opts.propagation.as_deref() {
            Some("Orphan") => Some("orphan"),
            Some("Foreground") => Some("foregroundDeletion"),
            _ => None,
        };
        if let Some(f) = gc_finalizer
            && !being_deleted
            && !finalizers.contains(&json!(f))
        {
            finalizers.push(json!(f));
        }
        // A Pod on a node waits for its kubelet for the grace period; unscheduled or finished
        // Pods, and a grace period of 0, go at once.
        let pod_grace = if info.builtin && info.api.kind == "Pod" && info.api.group.is_empty() {
            let bound = value["spec"]
                .get("nodeName")
                .and_then(Value::as_str)
                .is_some_and(|n| !n.is_empty());
            let phase = value["status"]
                .get("phase")
                .and_then(Value::as_str)
                .unwrap_or("");
            let grace = opts.grace_period.unwrap_or_else(|| {
                value["spec"]
                    .get("terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(30)
            });
            (bound && phase != "Succeeded" && phase != "Failed" && grace > 0).then_some(grace)
        } else {
            None
        };
        let pending =
            !opts.immediate && (!finalizers.is_empty() || (pod_grace.is_some() && !being_deleted));
        if pending {
            let m = meta_mut(&mut value);
            if !being_deleted {
                let grace = pod_grace.unwrap_or(0);
                let at = SystemTime::now() + Duration::from_secs(grace.max(0) as u64);
                m.insert(
                    "deletionTimestamp".into(),
                    json!(informer::model::time::format_rfc3339(at)),
                );
                m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                m.insert("finalizers".into(), Value::Array(finalizers));
            }
            if value == old.value || opts.dry_run {
                let (obj, _) = Obj::encode(EventType::Modified, &info, &value, old_obj.rv);
                return Ok((if value == old.value { old_obj } else { obj }, false));
            }
            g.rv += 1;
            let rv = g.rv;
            meta_mut(&mut value).insert("resourceVersion".into(), json!(rv.to_string()));
            let (obj, frame) = Obj::encode(EventType::Modified, &info, &value, rv);
            g.objects[idx].insert(
                k,
                Entry {
                    obj: obj.clone(),
                    value,
                },
            );
            self.record(
                &mut g,
                idx,
                EventType::Modified,
                (obj.clone(), frame),
                Some(old_obj),
            );
            return Ok((obj, false));
        }
        if opts.dry_run {
            return Ok((old_obj, true));
        }
        let Some(old) = g.objects[idx].remove(&k) else {
            return Err(ApiError::not_found(&info.api.plural, name).with_group(&info.api.group));
        };
        if crd::is_crd(&info) {
            self.withdraw_crd(&mut g, &old.value);
        }
        g.rv += 1;
        let rv = g.rv;
        let mut value = old.value;
        meta_mut(&mut value).insert("resourceVersion".into(), json!(rv.to_string()));
        let (obj, frame) = Obj::encode(EventType::Deleted, &info, &value, rv);
        self.record(
            &mut g,
            idx,
            EventType::Deleted,
            (obj.clone(), frame),
            Some(old.obj),
        );
        Ok((obj, true))
    }

    /// Serves the resources of a created or updated CRD (a resource already served as the CRD
    /// says keeps its watch cache) and stops serving the versions it no longer serves.
    fn serve_crd(&self, g: &mut Inner, crd_value: &Value) {
        let wanted = crd::served_resources(crd_value);
        let group = crd_value["spec"]["group"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let plural = crd_value["spec"]["names"]["plural"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let current: Vec<usize> = (0..g.registry.list().len())
            .filter(|&i| {
                let r = &g.registry.list()[i];
                !r.builtin
                    && r.api.group == group
                    && r.api.plural == plural
                    && g.registry
                        .find_path(&r.api.group, &r.api.version, &r.api.plural)
                        == Some(i)
            })
            .collect();
        for i in current {
            let version = g.registry.list()[i].api.version.to_string();
            if !wanted.iter().any(|w| w.api.version == version) {
                self.drop_resource(g, i);
            }
        }
        for info in wanted {
            let same = g
                .registry
                .find_path(&info.api.group, &info.api.version, &info.api.plural)
                .map(|i| g.registry.list()[i].clone())
                .is_some_and(|r| {
                    r.api == info.api
                        && r.status_subresource == info.status_subresource
                        && r.scale == info.scale
                        && r.short_names == info.short_names
                });
            if !same {
                Self::register_locked(g, info);
            }
        }
    }

    /// Stops serving a deleted CRD's resources; their objects go (DELETED events), as the
    /// apiserver's cleanup finalizer deletes them.
    fn withdraw_crd(&self, g: &mut Inner, crd_value: &Value) {
        let group = crd_value["spec"]["group"].as_str().unwrap_or("");
        let plural = crd_value["spec"]["names"]["plural"].as_str().unwrap_or("");
        let served: Vec<usize> = (0..g.registry.list().len())
            .filter(|&i| {
                let r = &g.registry.list()[i];
                !r.builtin && r.api.group == group && r.api.plural == plural
            })
            .collect();
        for i in served {
            self.drop_resource(g, i);
        }
    }

    /// Deletes every object of resource `idx` (one DELETED event each) and stops serving it.
    fn drop_resource(&self, g: &mut Inner, idx: usize) {
        let info = g.registry.list()[idx].clone();
        let objects = std::mem::take(&mut g.objects[idx]);
        for (_, e) in objects {
            g.rv += 1;
            let rv = g.rv;
            let mut value = e.value;
            meta_mut(&mut value).insert("resourceVersion".into(), json!(rv.to_string()));
            let (obj, frame) = Obj::encode(EventType::Deleted, &info, &value, rv);
            self.record(g, idx, EventType::Deleted, (obj, frame), Some(e.obj));
        }
        g.registry.withdraw(idx);
    }

    /// One page of `idx` in `ns` (None = all namespaces), from `start` (relative key, inclusive).
    pub fn list(
        &self,
        idx: usize,
        ns: Option<&str>,
        sel: &Selectors,
        at: ListAt,
        limit: Option<usize>,
        start: Option<&str>,
    ) -> Result<Page, ApiError> {
        let g = self.lock();
        let info = g.registry.list()[idx].clone();
        let prefix = match (info.api.namespaced, ns) {
            (true, Some(ns)) => format!("{ns}/"),
            _ => String::new(),
        };
        let full_start = format!("{prefix}{}", start.unwrap_or(""));
        let page = match at {
            ListAt::Exact(x) if x < g.compacted => return Err(ApiError::list_too_old()),
            ListAt::Exact(x) if x < g.rv => {
                let rebuilt = Self::state_at(&g, idx, x);
                paginate(&rebuilt, |o| o, &prefix, &full_start, sel, limit, x)
            }
            _ => paginate(
                &g.objects[idx],
                |e| &e.obj,
                &prefix,
                &full_start,
                sel,
                limit,
                g.rv,
            ),
        };
        Ok(page)
    }

    /// The objects of `idx` as they were at `x` (requires `x >= compacted`).
    fn state_at(g: &Inner, idx: usize, x: u64) -> BTreeMap<String, Arc<Obj>> {
        let mut map: BTreeMap<String, Arc<Obj>> = g.objects[idx]
            .iter()
            .map(|(k, e)| (k.clone(), e.obj.clone()))
            .collect();
        for ev in g.history.iter().rev().take_while(|e| e.rv > x) {
            if ev.resource != idx {
                continue;
            }
            let k = key(ev.obj.namespace(), &ev.obj.name);
            match (&ev.ty, &ev.prev) {
                (EventType::Added, _) => {
                    map.remove(&k);
                }
                (_, Some(prev)) => {
                    map.insert(k, prev.clone());
                }
                (_, None) => {}
            }
        }
        map
    }

    pub fn start_watch(
        &self,
        idx: usize,
        ns: Option<&str>,
        from: WatchFrom,
    ) -> Result<WatchStart, ApiError> {
        let g = self.lock();
        let rx = self.events.subscribe();
        let in_ns = |o: &Obj| ns.is_none() || o.namespace() == ns;
        match from {
            WatchFrom::Rv(x) => {
                // The 1.20 watch cache (`watchCache.GetAllEventsSinceThreadUnsafe`) refuses
                // `x < oldest - 1`, where `oldest - 1` is the RV of the cacher's list while no event
                // has left its window, else the RV before the first event still in the window.
                // Here the window is the store's history (`compacted`) and the list is the
                // resource's registration (`watch_floor`); the message names the bound.
                let oldest = g.compacted.max(g.watch_floor[idx]);
                if x < oldest {
                    return Err(ApiError::watch_too_old(x, oldest));
                }
                let replay = g
                    .history
                    .iter()
                    .filter(|e| e.rv > x && e.resource == idx && in_ns(&e.obj))
                    .cloned()
                    .collect();
                Ok(WatchStart {
                    rx,
                    initial: Vec::new(),
                    replay,
                    min_rv: x.max(g.rv),
                    start_rv: g.rv,
                })
            }
            WatchFrom::Current { initial } => {
                let initial = if initial {
                    // Keys are `namespace/name`: a namespaced watch reads its namespace's range,
                    // as a LIST does, not every object of the resource (1,000 namespaced watches
                    // over 11,000 objects scanned 11 million entries under the store's lock).
                    let objects = &g.objects[idx];
                    match ns {
                        Some(ns) => {
                            let prefix = format!("{ns}/");
                            objects
                                .range::<String, _>((Bound::Included(&prefix), Bound::Unbounded))
                                .take_while(|(k, _)| k.starts_with(&prefix))
                                .filter(|(_, e)| in_ns(&e.obj))
                                .map(|(_, e)| e.obj.clone())
                                .collect()
                        }
                        None => objects.values().map(|e| e.obj.clone()).collect(),
                    }
                } else {
                    Vec::new()
                };
                Ok(WatchStart {
                    rx,
                    initial,
                    replay: Vec::new(),
                    min_rv: g.rv,
                    start_rv: g.rv,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_shape() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 20, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T');
    }

    #[test]
    fn uuid_shape() {
        let u = uuid(&mut crate::rng::Rng::with_seed(1));
        assert_eq!(u.len(), 36);
        assert_eq!(u.as_bytes()[14], b'4');
    }
}
