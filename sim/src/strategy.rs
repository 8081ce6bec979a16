//! The apiserver's per-kind write strategies, as far as the simulator follows them: what a create
//! resets, what an update of the resource or of its `/status` subresource may change, and when
//! `metadata.generation` moves.
//!
//! Rules (the registries' `PrepareForCreate`/`PrepareForUpdate`):
//! - A kind with a status subresource ignores `.status` on its main resource: a create starts it
//!   afresh (custom resources and Deployments: none/empty; Pods `{"phase":"Pending","qosClass":..}`;
//!   Services `{"loadBalancer":{}}`; Namespaces `{"phase":"Active"}`; Nodes keep what was sent, as
//!   the node registry allows) and an update keeps the stored one.
//! - A write to `/status` changes only `.status`: a custom resource's metadata and everything
//!   else are the stored ones (`customResourceStatusStrategy`); a builtin's metadata may change
//!   (labels, annotations, finalizers), except a Pod's ownerReferences and a Deployment's labels,
//!   which its status strategy keeps.
//! - `generation`: custom resources start at 1 and move when anything but metadata (and status,
//!   with the subresource) changes; builtins that have a `spec` start at 1 and move when `spec`
//!   changes. Status writes never move it.

use serde_json::{Value, json};

use super::resources::ResourceInfo;

/// Which endpoint a write came through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Endpoint {
    /// A privileged writer (the programmatic API): the object is stored as given.
    #[default]
    Raw,
    /// The resource itself (`.../{name}`).
    Main,
    /// `.../{name}/status`.
    Status,
}

/// A Pod's QoS class from its containers' requests and limits (`qos.GetPodQOS`, for cpu and
/// memory).
fn pod_qos(pod: &Value) -> &'static str {
    let containers = ["containers", "initContainers"]
        .iter()
        .filter_map(|f| {
            pod.get("spec")
                .and_then(|s| s.get(*f))
                .and_then(Value::as_array)
        })
        .flatten();
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let res = c.get("resources");
        let requests = res
            .and_then(|r| r.get("requests"))
            .and_then(Value::as_object);
        let limits = res.and_then(|r| r.get("limits")).and_then(Value::as_object);
        for name in ["cpu", "memory"] {
            let req = requests.and_then(|r| r.get(name));
            let lim = limits.and_then(|l| l.get(name));
            if req.is_some() || lim.is_some() {
                any = true;
            }
            match (req, lim) {
                (_, None) => guaranteed = false,
                (Some(r), Some(l)) if r != l => guaranteed = false,
                _ => {}
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// What a create through the API does to `.status`.
pub(crate) fn prepare_create(info: &ResourceInfo, value: &mut Value) {
    if !info.status_subresource {
        return;
    }
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    if !info.builtin {
        obj.remove("status");
        return;
    }
    match (info.api.group.as_ref(), info.api.kind.as_ref()) {
        ("", "Pod") => {
            let qos = pod_qos(value);
            value["status"] = json!({"phase": "Pending", "qosClass": qos});
        }
        ("", "Service") => {
            obj.insert("status".into(), json!({"loadBalancer": {}}));
        }
        ("", "Namespace") => {
            obj.insert("status".into(), json!({"phase": "Active"}));
        }
        ("apps", "Deployment") => {
            obj.insert("status".into(), json!({}));
        }
        _ => {}
    }
}

fn copy_field(from: &Value, to: &mut Value, field: &str) {
    let Some(to) = to.as_object_mut() else {
        return;
    };
    match from.get(field) {
        Some(v) => to.insert(field.into(), v.clone()),
        None => to.remove(field),
    };
}

fn copy_meta_field(from: &Value, to: &mut Value, field: &str) {
    let old = from.get("metadata").and_then(|m| m.get(field)).cloned();
    if let Some(m) = to.get_mut("metadata").and_then(Value::as_object_mut) {
        match old {
            Some(v) => m.insert(field.into(), v),
            None => m.remove(field),
        };
    }
}

/// What an update through `endpoint` may change: `new` becomes what is stored (before the
/// store's own rules: identity fields, resourceVersion, generation).
pub(crate) fn prepare_update(
    info: &ResourceInfo,
    endpoint: Endpoint,
    old: &Value,
    new: &mut Value,
) {
    match endpoint {
        Endpoint::Raw => {}
        Endpoint::Main => {
            if info.status_subresource {
                copy_field(old, new, "status");
            }
        }
        Endpoint::Status => {
            if !info.builtin {
                // The stored object with the new status; only managedFields and the
                // resourceVersion (a precondition) come from the request.
                let mut out = old.clone();
                copy_field(new, &mut out, "status");
                copy_meta_field(new, &mut out, "managedFields");
                copy_meta_field(new, &mut out, "resourceVersion");
                *new = out;
                return;
            }
            let mut out = old.clone();
            copy_field(new, &mut out, "status");
            copy_field(new, &mut out, "metadata");
            match info.api.kind.as_ref() {
                "Pod" => copy_meta_field(old, &mut out, "ownerReferences"),
                "Deployment" => copy_meta_field(old, &mut out, "labels"),
                _ => {}
            }
            *new = out;
        }
    }
}

/// Whether `generation` starts at 1 on create.
pub(crate) fn has_generation(info: &ResourceInfo, value: &Value) -> bool {
    !info.builtin || value.get("spec").is_some()
}

/// Whether an update from `old` to `new` moves `generation`.
pub(crate) fn bumps_generation(info: &ResourceInfo, old: &Value, new: &Value) -> bool {
    if info.builtin {
        return old.get("spec") != new.get("spec");
    }
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("metadata");
            if info.status_subresource {
                m.remove("status");
            }
        }
        v
    };
    strip(old) != strip(new)
}
