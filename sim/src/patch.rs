//! The PATCH body types the apiserver accepts, applied to an object's JSON: RFC 7386 merge patch
//! (`application/merge-patch+json`), RFC 6902 JSON patch (`application/json-patch+json`) and the
//! strategic merge patch of builtin kinds (`application/strategic-merge-patch+json`).
//!
//! Invariants:
//! - Every function takes hostile input: a malformed patch is an `ApiError` (a 4xx, or the 500 the
//!   apiserver itself answers), never a panic; recursion depth is bounded by the body limit and by
//!   [`MAX_DEPTH`].
//! - The strategic merge rules ([`list_type`]) are the `patchStrategy`/`patchMergeKey` tags of the
//!   builtin kinds the simulator serves; a list field not in the table has no strategy and is
//!   replaced, as the apiserver replaces such lists. The same table gives server-side apply its
//!   associative lists (`listType=map`, `listMapKey`), see `apply.rs`.

use serde_json::{Map, Value};

use super::errors::ApiError;
use super::resources::ResourceInfo;

/// Deepest nesting a patch may have (Go's JSON decoder refuses 10,000; we stop far earlier).
const MAX_DEPTH: usize = 256;

/// Largest number of operations in one JSON patch (the apiserver's `maxJSONPatchOperations`).
const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// RFC 7386 JSON merge patch.
pub(crate) fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Some(t) = target.as_object_mut() {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

/// The apiserver's answer to a JSON patch that does not apply: 422 with the generic message and
/// no causes (`NewGenericServerResponse(422, ...)`; the 1.20 server drops the patch library's
/// error, checked by the real-apiserver suite's refusals test). `why` is kept for the
/// simulator's own tests.
fn json_patch_failed(why: String) -> ApiError {
    let _ = why;
    ApiError::new(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )
}

/// Splits an RFC 6901 JSON pointer into unescaped tokens.
fn pointer_tokens(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("invalid JSON pointer: {path:?}"));
    };
    Ok(rest
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect())
}

fn get_at<'a>(doc: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m.get(t)?,
            Value::Array(a) => a.get(parse_index(t)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn get_at_mut<'a>(doc: &'a mut Value, tokens: &[String]) -> Option<&'a mut Value> {
    let mut cur = doc;
    for t in tokens {
        cur = match cur {
            Value::Object(m) => m.get_mut(t)?,
            Value::Array(a) => {
                let i = parse_index(t)?;
                a.get_mut(i)?
            }
            _ => return None,
        };
    }
    Some(cur)
}

/// An array index token: digits only, no leading zero (RFC 6901).
fn parse_index(t: &str) -> Option<usize> {
    if t.is_empty() || (t.len() > 1 && t.starts_with('0')) || !t.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    t.parse().ok()
}

fn add_at(
    doc: &mut Value,
    tokens: &[String],
    value: Value,
    op: &str,
    path: &str,
) -> Result<(), String> {
    let missing =
        || format!("{op} operation does not apply: doc is missing path: {path:?}: missing value");
    let Some((last, parent)) = tokens.split_last() else {
        *doc = value;
        return Ok(());
    };
    match get_at_mut(doc, parent).ok_or_else(missing)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            match parse_index(last) {
                Some(i) if i <= a.len() => {
                    a.insert(i, value);
                    Ok(())
                }
                _ => Err(format!(
                    "{op} operation does not apply: doc is missing path: {path:?}: invalid index referenced"
                )),
            }
        }
        _ => Err(missing()),
    }
}

fn remove_at(doc: &mut Value, tokens: &[String], op: &str, path: &str) -> Result<Value, String> {
    let missing =
        || format!("{op} operation does not apply: doc is missing path: {path:?}: missing value");
    let Some((last, parent)) = tokens.split_last() else {
        return Err(missing());
    };
    match get_at_mut(doc, parent).ok_or_else(missing)? {
        Value::Object(m) => m.remove(last).ok_or_else(missing),
        Value::Array(a) => match parse_index(last) {
            Some(i) if i < a.len() => Ok(a.remove(i)),
            _ => Err(missing()),
        },
        _ => Err(missing()),
    }
}

/// RFC 6902 JSON patch: `add`, `remove`, `replace`, `move`, `copy`, `test`. A malformed patch
/// document is 400 (as `jsonpatch.DecodePatch` failing); an operation that does not apply is the
/// apiserver's 422.
pub(crate) fn json_patch(doc: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let Some(ops) = patch.as_array() else {
        return Err(ApiError::bad_request(
            "json: cannot unmarshal object into Go value of type jsonpatch.Patch",
        ));
    };
    if ops.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!(
                "Request entity too large: The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                ops.len()
            ),
        ));
    }
    for op in ops {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("");
        let path = op.get("path").and_then(Value::as_str);
        let Some(path) = path else {
            return Err(json_patch_failed(format!("{kind} operation: missing path")));
        };
        let tokens = pointer_tokens(path).map_err(json_patch_failed)?;
        let value = || {
            op.get("value")
                .cloned()
                .ok_or_else(|| json_patch_failed(format!("{kind} operation: missing value")))
        };
        let from = || -> Result<(String, Vec<String>), ApiError> {
            let f = op
                .get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| json_patch_failed(format!("{kind} operation: missing from")))?;
            Ok((f.to_string(), pointer_tokens(f).map_err(json_patch_failed)?))
        };
        match kind {
            "add" => add_at(doc, &tokens, value()?, "add", path).map_err(json_patch_failed)?,
            "remove" => {
                remove_at(doc, &tokens, "remove", path).map_err(json_patch_failed)?;
            }
            "replace" => {
                let v = value()?;
                match get_at_mut(doc, &tokens) {
                    Some(slot) => *slot = v,
                    None => {
                        return Err(json_patch_failed(format!(
                            "replace operation does not apply: doc is missing key: {path}: missing value"
                        )));
                    }
                }
            }
            "move" => {
                let (f, ftok) = from()?;
                if tokens.starts_with(&ftok) && tokens.len() > ftok.len() {
                    return Err(json_patch_failed(format!(
                        "move operation does not apply: from {f:?} is a prefix of path {path:?}"
                    )));
                }
                let v = remove_at(doc, &ftok, "move", &f).map_err(json_patch_failed)?;
                add_at(doc, &tokens, v, "move", path).map_err(json_patch_failed)?;
            }
            "copy" => {
                let (f, ftok) = from()?;
                let v = get_at(doc, &ftok).cloned().ok_or_else(|| {
                    json_patch_failed(format!(
                        "copy operation does not apply: doc is missing from path: {f:?}: missing value"
                    ))
                })?;
                add_at(doc, &tokens, v, "copy", path).map_err(json_patch_failed)?;
            }
            "test" => {
                let want = value()?;
                // `null` also matches an absent member, as the apiserver's JSON patch library
                // does (kube-rs's finalizer relies on it; checked against 1.20).
                let matches = match get_at(doc, &tokens) {
                    Some(have) => *have == want,
                    None => want.is_null(),
                };
                if !matches {
                    return Err(json_patch_failed(format!(
                        "testing value {path} failed: test failed"
                    )));
                }
            }
            other => {
                return Err(json_patch_failed(format!("Unexpected kind: {other}")));
            }
        }
    }
    Ok(())
}

/// How a list field of a builtin kind merges (strategic merge patch) and how server-side apply
/// tracks it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListType {
    /// No strategy: the list is one value, replaced whole.
    Atomic,
    /// `patchStrategy:merge` on a list of scalars (`listType=set`): a union.
    Set,
    /// `patchStrategy:merge` on a list of objects: elements matched by `patch_key` (strategic
    /// merge) or by all of `apply_keys` (server-side apply's `listMapKey`s).
    Map {
        patch_key: &'static str,
        apply_keys: &'static [&'static str],
    },
}

const fn by(patch_key: &'static str, apply_keys: &'static [&'static str]) -> ListType {
    ListType::Map {
        patch_key,
        apply_keys,
    }
}

/// The list type of the field at `path` (field names from the object's root, list elements
/// skipped) of `info`'s kind. ObjectMeta's lists are typed for every kind, custom resources
/// included; a custom resource's own lists are atomic, as a CRD schema without
/// `x-kubernetes-list-type` makes them.
pub(crate) fn list_type(info: &ResourceInfo, path: &[&str]) -> ListType {
    match path {
        ["metadata", "finalizers"] => return ListType::Set,
        ["metadata", "ownerReferences"] => return by("uid", &["uid"]),
        _ => {}
    }
    if !info.builtin {
        return ListType::Atomic;
    }
    let kind = info.api.kind.as_ref();
    // Where the PodSpec is in this kind.
    let pod_spec: &[&str] = match kind {
        "Pod" => &["spec"],
        "Deployment" => &["spec", "template", "spec"],
        _ => &[],
    };
    if !pod_spec.is_empty() && path.starts_with(pod_spec) {
        let rest = &path[pod_spec.len()..];
        match rest {
            ["containers" | "initContainers" | "ephemeralContainers"] => {
                return by("name", &["name"]);
            }
            [
                "containers" | "initContainers" | "ephemeralContainers",
                "ports",
            ] => {
                return by("containerPort", &["containerPort", "protocol"]);
            }
            [
                "containers" | "initContainers" | "ephemeralContainers",
                "env",
            ] => {
                return by("name", &["name"]);
            }
            [
                "containers" | "initContainers" | "ephemeralContainers",
                "volumeMounts",
            ] => {
                return by("mountPath", &["mountPath"]);
            }
            [
                "containers" | "initContainers" | "ephemeralContainers",
                "volumeDevices",
            ] => {
                return by("devicePath", &["devicePath"]);
            }
            ["volumes" | "imagePullSecrets"] => return by("name", &["name"]),
            ["hostAliases"] => return by("ip", &["ip"]),
            _ => return ListType::Atomic,
        }
    }
    match (kind, path) {
        ("Pod", ["status", "conditions"]) => by("type", &["type"]),
        ("Pod", ["status", "podIPs"]) => by("ip", &["ip"]),
        ("Node", ["status", "conditions"]) => by("type", &["type"]),
        ("Node", ["status", "addresses"]) => by("type", &["type"]),
        ("Deployment", ["status", "conditions"]) => by("type", &["type"]),
        ("Namespace", ["status", "conditions"]) => by("type", &["type"]),
        ("Service", ["spec", "ports"]) => by("port", &["port", "protocol"]),
        _ => ListType::Atomic,
    }
}

/// Strategic merge patch of a builtin kind (the apiserver's `strategicpatch.StrategicMergePatch`
/// with the kind's struct tags from [`list_type`]): maps merge, `null` deletes, lists with a
/// merge key merge element by element, sets merge as unions, other lists are replaced.
/// Directives: `$patch: replace|delete|merge` (maps and list elements), `$retainKeys`,
/// `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>`.
pub(crate) fn strategic_merge(
    info: &ResourceInfo,
    target: &mut Value,
    patch: &Value,
) -> Result<(), ApiError> {
    if !patch.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was in an unknown format",
        ));
    }
    let mut path = Vec::new();
    smp_map(info, target, patch, &mut path, 0)
}

fn smp_bad(msg: impl Into<String>) -> ApiError {
    ApiError::bad_request(msg)
}

fn smp_map(
    info: &ResourceInfo,
    target: &mut Value,
    patch: &Value,
    path: &mut Vec<String>,
    depth: usize,
) -> Result<(), ApiError> {
    if depth > MAX_DEPTH {
        return Err(smp_bad("strategic merge patch nested too deeply"));
    }
    let Some(p) = patch.as_object() else {
        *target = patch.clone();
        return Ok(());
    };
    match p.get("$patch").map(|v| v.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => {
            let mut m = p.clone();
            m.remove("$patch");
            *target = Value::Object(m);
            return Ok(());
        }
        Some(Some("delete")) => {
            *target = Value::Null; // the caller removes the key
            return Ok(());
        }
        Some(_) => {
            return Err(smp_bad(format!(
                "Unknown patch type: {}",
                p.get("$patch").map(Value::to_string).unwrap_or_default()
            )));
        }
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Some(t) = target.as_object_mut() else {
        return Ok(());
    };
    let retain = match p.get("$retainKeys") {
        None => None,
        Some(Value::Array(keys)) => Some(
            keys.iter()
                .map(|k| k.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| smp_bad("invalid patch: $retainKeys must be a list of strings"))?,
        ),
        Some(_) => {
            return Err(smp_bad(
                "invalid patch: $retainKeys must be a list of strings",
            ));
        }
    };
    let mut orders = Vec::new();
    for (k, v) in p {
        if k == "$patch" || k == "$retainKeys" {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            let Some(remove) = v.as_array() else {
                return Err(smp_bad(format!(
                    "invalid patch: $deleteFromPrimitiveList/{field} must be a list"
                )));
            };
            if let Some(Value::Array(list)) = t.get_mut(field) {
                list.retain(|e| !remove.contains(e));
            }
            continue;
        }
        if let Some(field) = k.strip_prefix("$setElementOrder/") {
            orders.push((field.to_string(), v.clone()));
            continue;
        }
        if k.starts_with('$') {
            return Err(smp_bad(format!(
                "unknown directive in strategic merge patch: {k}"
            )));
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        path.push(k.clone());
        let result = match v {
            Value::Object(_) => {
                let slot = t.entry(k.clone()).or_insert(Value::Null);
                smp_map(info, slot, v, path, depth + 1).map(|()| slot.is_null())
            }
            Value::Array(items) => {
                let slot = t.entry(k.clone()).or_insert(Value::Array(Vec::new()));
                smp_list(info, slot, items, path, depth + 1).map(|()| false)
            }
            scalar => {
                t.insert(k.clone(), scalar.clone());
                Ok(false)
            }
        };
        path.pop();
        if result? {
            t.remove(k); // `$patch: delete` on a map
        }
    }
    for (field, order) in orders {
        path.push(field.clone());
        let ty = list_type(info, &path.iter().map(String::as_str).collect::<Vec<_>>());
        path.pop();
        if let (Some(Value::Array(list)), Some(order)) = (t.get_mut(&field), order.as_array()) {
            reorder(list, order, ty);
        }
    }
    if let Some(keep) = retain {
        let patch_keys: Vec<&String> = p.keys().filter(|k| !k.starts_with('$')).collect();
        if let Some(k) = patch_keys.iter().find(|k| !keep.contains(k)) {
            return Err(ApiError::new(
                422,
                "Invalid",
                format!("The patch has a field {k:?} that is not in $retainKeys"),
            ));
        }
        t.retain(|k, _| keep.contains(k));
    }
    Ok(())
}

/// `$setElementOrder`: the elements it names come first, in its order; the others keep theirs.
fn reorder(list: &mut Vec<Value>, order: &[Value], ty: ListType) {
    let matches = |e: &Value, o: &Value| match ty {
        ListType::Map { patch_key, .. } => {
            e.get(patch_key).is_some() && e.get(patch_key) == o.get(patch_key)
        }
        _ => e == o,
    };
    let mut ordered = Vec::with_capacity(list.len());
    for o in order {
        if let Some(i) = list.iter().position(|e| matches(e, o)) {
            ordered.push(list.remove(i));
        }
    }
    ordered.append(list);
    *list = ordered;
}

fn smp_list(
    info: &ResourceInfo,
    target: &mut Value,
    items: &[Value],
    path: &mut Vec<String>,
    depth: usize,
) -> Result<(), ApiError> {
    let dotted = path.join(".");
    let ty = {
        let names: Vec<&str> = path.iter().map(String::as_str).collect();
        list_type(info, &names)
    };
    // `[{"$patch": "replace"}, ...]` replaces the list with the other elements.
    let replace = items
        .iter()
        .any(|e| e.get("$patch").and_then(Value::as_str) == Some("replace"));
    if replace || ty == ListType::Atomic || !target.is_array() {
        let kept: Vec<Value> = items
            .iter()
            .filter(|e| e.get("$patch").is_none())
            .cloned()
            .collect();
        *target = Value::Array(kept);
        return Ok(());
    }
    let Some(list) = target.as_array_mut() else {
        return Ok(());
    };
    match ty {
        ListType::Atomic => {}
        ListType::Set => {
            for e in items {
                if e.is_object() || e.is_array() {
                    return Err(smp_bad(format!(
                        "invalid patch: the list {} holds scalars",
                        dotted
                    )));
                }
                if !list.contains(e) {
                    list.push(e.clone());
                }
            }
        }
        ListType::Map { patch_key, .. } => {
            for e in items {
                let Some(obj) = e.as_object() else {
                    return Err(smp_bad(format!(
                        "invalid patch: the list {} holds objects",
                        dotted
                    )));
                };
                let Some(key) = obj.get(patch_key) else {
                    return Err(ApiError::new(
                        500,
                        "InternalError",
                        format!("map: {e} does not contain declared merge key: {patch_key}"),
                    ));
                };
                let pos = list.iter().position(|x| x.get(patch_key) == Some(key));
                let delete = obj.get("$patch").and_then(Value::as_str) == Some("delete");
                match (pos, delete) {
                    (Some(i), true) => {
                        list.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => smp_map(info, &mut list[i], e, path, depth + 1)?,
                    (None, false) => {
                        let mut fresh = Value::Object(Map::new());
                        smp_map(info, &mut fresh, e, path, depth + 1)?;
                        list.push(fresh);
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use informer::model::ApiResource;
    use serde_json::json;

    fn pods() -> ResourceInfo {
        ResourceInfo::new(
            ApiResource::from_static("", "v1", "Pod", "pods", true),
            &[],
            true,
        )
    }

    #[test]
    fn merge_patch_rfc7386() {
        let mut t = json!({"a":"b","c":{"d":"e","f":"g"}});
        merge_patch(&mut t, &json!({"a":"z","c":{"f":null}}));
        assert_eq!(t, json!({"a":"z","c":{"d":"e"}}));
    }

    #[test]
    fn json_patch_ops() {
        let mut d = json!({"a": {"b": [1, 2]}, "c": "x"});
        json_patch(
            &mut d,
            &json!([
                {"op": "add", "path": "/a/b/-", "value": 3},
                {"op": "add", "path": "/a/b/0", "value": 0},
                {"op": "replace", "path": "/c", "value": "y"},
                {"op": "copy", "from": "/c", "path": "/d"},
                {"op": "move", "from": "/d", "path": "/e"},
                {"op": "remove", "path": "/a/b/1"},
                {"op": "test", "path": "/e", "value": "y"}
            ]),
        )
        .unwrap();
        assert_eq!(d, json!({"a": {"b": [0, 2, 3]}, "c": "y", "e": "y"}));
        let e =
            json_patch(&mut d, &json!([{"op": "test", "path": "/c", "value": "z"}])).unwrap_err();
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert!(json_patch(&mut d, &json!([{"op": "remove", "path": "/nope"}])).is_err());
        // `null` matches an absent member, not a present one.
        json_patch(
            &mut d,
            &json!([{"op": "test", "path": "/nope", "value": null}]),
        )
        .unwrap();
        assert!(
            json_patch(
                &mut d,
                &json!([{"op": "test", "path": "/c", "value": null}])
            )
            .is_err()
        );
        assert!(json_patch(&mut d, &json!({"op": "remove"})).is_err());
        assert!(
            json_patch(
                &mut d,
                &json!([{"op": "add", "path": "/a/b/99", "value": 1}])
            )
            .is_err()
        );
    }

    #[test]
    fn strategic_merge_by_key_and_directives() {
        let info = pods();
        let mut pod = json!({"metadata": {"finalizers": ["a"]},
            "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "A", "value": "1"}]},
                                    {"name": "d", "image": "y"}],
                     "tolerations": [{"key": "k"}]}});
        strategic_merge(
            &info,
            &mut pod,
            &json!({
            "metadata": {"finalizers": ["b"]},
            "spec": {"containers": [{"name": "c", "env": [{"name": "B", "value": "2"}]},
                                    {"name": "d", "$patch": "delete"},
                                    {"name": "e", "image": "z"}],
                     "tolerations": [{"key": "j"}]}}),
        )
        .unwrap();
        assert_eq!(
            pod,
            json!({"metadata": {"finalizers": ["a", "b"]},
            "spec": {"containers": [{"name": "c", "image": "x", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                                    {"name": "e", "image": "z"}],
                     "tolerations": [{"key": "j"}]}})
        );
        strategic_merge(
            &info,
            &mut pod,
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
        )
        .unwrap();
        assert_eq!(pod["metadata"]["finalizers"], json!(["b"]));
        let e = strategic_merge(
            &info,
            &mut pod,
            &json!({"spec": {"containers": [{"image": "q"}]}}),
        )
        .unwrap_err();
        assert_eq!(e.code, 500);
    }
}
