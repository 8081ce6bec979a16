//! CustomResourceDefinitions (`apiextensions.k8s.io/v1`): what a CRD must hold to be accepted,
//! the status the apiserver's controllers give it, and the resources it serves.
//!
//! The real apiserver serves a new CRD a moment after the create (its naming and establishing
//! controllers set `NamesAccepted` and `Established`); the simulator does both inside the create,
//! so the created object already carries those conditions and its resources are served when the
//! create answers. Deleting a CRD deletes its custom resources (DELETED events) and then the CRD,
//! as the apiserver's cleanup finalizer does, without the intermediate terminating state.

use serde_json::{Value, json};

use informer::model::ApiResource;

use super::errors::ApiError;
use super::resources::{ResourceInfo, ScaleInfo};

/// The API group of CRDs.
pub(crate) const GROUP: &str = "apiextensions.k8s.io";

/// True for the `customresourcedefinitions` resource.
pub(crate) fn is_crd(info: &ResourceInfo) -> bool {
    info.api.group == GROUP && info.api.plural == "customresourcedefinitions"
}

fn invalid(name: &str, field: &str, reason: &str, detail: String) -> ApiError {
    let mut e = ApiError::new(
        422,
        "Invalid",
        format!("CustomResourceDefinition.{GROUP} \"{name}\" is invalid: {field}: {detail}"),
    );
    e.details = Some(
        json!({"name": name, "group": GROUP, "kind": "CustomResourceDefinition",
        "causes": [{"reason": reason, "message": detail, "field": field}]}),
    );
    e
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        match cur.get(*p) {
            Some(x) => cur = x,
            None => return "",
        }
    }
    cur.as_str().unwrap_or("")
}

/// Checks a CRD as the apiserver's validation does for the fields the simulator uses, fills the
/// defaults the apiserver fills (`singular`, `listKind`), and sets the status its controllers
/// set. `now` is the conditions' transition time.
pub(crate) fn prepare(value: &mut Value, now: &str) -> Result<(), ApiError> {
    let name = str_at(value, &["metadata", "name"]).to_string();
    let group = str_at(value, &["spec", "group"]).to_string();
    let plural = str_at(value, &["spec", "names", "plural"]).to_string();
    let kind = str_at(value, &["spec", "names", "kind"]).to_string();
    if group.is_empty() {
        return Err(invalid(
            &name,
            "spec.group",
            "FieldValueRequired",
            "Required value".into(),
        ));
    }
    if plural.is_empty() {
        return Err(invalid(
            &name,
            "spec.names.plural",
            "FieldValueRequired",
            "Required value".into(),
        ));
    }
    if kind.is_empty() {
        return Err(invalid(
            &name,
            "spec.names.kind",
            "FieldValueRequired",
            "Required value".into(),
        ));
    }
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            &name,
            "metadata.name",
            "FieldValueInvalid",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = str_at(value, &["spec", "scope"]).to_string();
    if scope != "Namespaced" && scope != "Cluster" {
        return Err(invalid(
            &name,
            "spec.scope",
            "FieldValueNotSupported",
            format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let versions = value["spec"]
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if versions.is_empty() {
        return Err(invalid(&name, "spec.versions", "FieldValueInvalid", "Invalid value: []apiextensions.CustomResourceDefinitionVersion(nil): must have exactly one version marked as storage version".into()));
    }
    let storage: Vec<&Value> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .collect();
    if storage.len() != 1 {
        return Err(invalid(
            &name,
            "spec.versions",
            "FieldValueInvalid",
            "Invalid value: must have exactly one version marked as storage version".into(),
        ));
    }
    let storage_version = str_at(storage[0], &["name"]).to_string();
    let names = &mut value["spec"]["names"];
    if str_at(names, &["singular"]).is_empty() {
        names["singular"] = json!(kind.to_ascii_lowercase());
    }
    if str_at(names, &["listKind"]).is_empty() {
        names["listKind"] = json!(format!("{kind}List"));
    }
    let accepted = names.clone();
    let mut stored = value
        .get("status")
        .and_then(|s| s.get("storedVersions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !stored.contains(&json!(storage_version)) {
        stored.push(json!(storage_version));
    }
    value["status"] = json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": now,
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
        ],
        "acceptedNames": accepted,
        "storedVersions": stored,
    });
    Ok(())
}

/// The resources a (prepared) CRD serves: one per served version.
pub(crate) fn served_resources(crd: &Value) -> Vec<ResourceInfo> {
    let group = str_at(crd, &["spec", "group"]);
    let plural = str_at(crd, &["spec", "names", "plural"]);
    let kind = str_at(crd, &["spec", "names", "kind"]);
    let namespaced = str_at(crd, &["spec", "scope"]) == "Namespaced";
    let short: Vec<&str> = crd["spec"]["names"]
        .get("shortNames")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let versions = crd["spec"]
        .get("versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .map(|v| {
            let api = ApiResource::new(group, str_at(v, &["name"]), kind, plural, namespaced);
            let mut info = ResourceInfo::new(api, &short, false);
            let sub = v
                .get("subresources")
                .or_else(|| crd["spec"].get("subresources"));
            if sub.and_then(|s| s.get("status")).is_some() {
                info = info.with_status();
            }
            if let Some(scale) = sub.and_then(|s| s.get("scale")) {
                info = info.with_scale(ScaleInfo {
                    spec_replicas_path: str_at(scale, &["specReplicasPath"]).to_string(),
                    status_replicas_path: str_at(scale, &["statusReplicasPath"]).to_string(),
                    label_selector_path: Some(str_at(scale, &["labelSelectorPath"]))
                        .filter(|p| !p.is_empty())
                        .map(str::to_string),
                });
            }
            info
        })
        .collect()
}
