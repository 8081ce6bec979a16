//! Field ownership: `metadata.managedFields` and server-side apply, after the apiserver's
//! structured-merge-diff (SMD).
//!
//! A [`FieldSet`] is a tree keyed by FieldsV1 path elements: `f:<field>` (a map key), `k:<json>`
//! (an element of an associative list, by its key fields), `v:<json>` (an element of a set).
//! `member` says the node itself is in the set; FieldsV1 writes a member that has members below
//! it as `".": {}`.
//!
//! Invariants:
//! - Sets never contain the fields the apiserver strips (`apiVersion`, `kind`, `metadata`
//!   itself, and `metadata.{name, namespace, uid, resourceVersion, generation,
//!   creationTimestamp, selfLink, clusterName, managedFields}`).
//! - Maps are granular (each key a field). Lists are typed by [`list_type`]: associative lists
//!   are tracked per element (`k:`), sets per value (`v:`), every other list is atomic (one
//!   field), which is what a CRD without `x-kubernetes-list-type` gives and what builtin lists
//!   without a list type are.
//! - An entry's identity is (manager, operation, subresource, and apiVersion for `Update`), as
//!   the apiserver's manager identifier; entries are sorted as the apiserver sorts them (Apply
//!   before Update, then time, manager, apiVersion); an entry whose set is empty is dropped.
//!
//! Known differences from the apiserver, kept because being exact would need the Go types:
//! builtin struct fields that Go serializes even when empty (`spec` of a Pod, say) are "added" by
//! a create here and so get a `".": {}` the apiserver does not write.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::errors::ApiError;
use super::patch::{ListType, list_type};
use super::resources::ResourceInfo;

/// A set of field paths (see the module docs).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct FieldSet {
    /// The node itself is in the set.
    pub member: bool,
    /// The elements below, by FieldsV1 key.
    pub children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    /// No member at or below this node.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// The FieldsV1 JSON of this node's contents (`{".": {}, "f:x": {..}}`).
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), json!({}));
        }
        for (k, c) in &self.children {
            if !c.is_empty() {
                m.insert(k.clone(), c.to_fields_v1());
            }
        }
        Value::Object(m)
    }

    /// Parses FieldsV1 (the root's contents); `None` when it is not FieldsV1.
    pub fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let m = v.as_object()?;
        let mut set = FieldSet::default();
        for (k, c) in m {
            if k == "." {
                set.member = true;
                continue;
            }
            if !(k.starts_with("f:")
                || k.starts_with("k:")
                || k.starts_with("v:")
                || k.starts_with("i:"))
            {
                return None;
            }
            let mut child = FieldSet::from_fields_v1(c)?;
            if child.children.is_empty() {
                child.member = true;
            }
            set.children.insert(k.clone(), child);
        }
        Some(set)
    }

    /// Adds every member of `other`.
    pub fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (k, c) in &other.children {
            self.children.entry(k.clone()).or_default().union(c);
        }
    }

    /// Removes every member of `other`.
    pub fn subtract(&mut self, other: &FieldSet) {
        if other.member {
            self.member = false;
        }
        for (k, c) in &other.children {
            if let Some(mine) = self.children.get_mut(k) {
                mine.subtract(c);
            }
        }
        self.children.retain(|_, c| !c.is_empty());
    }

    /// True if `path` is a member.
    pub fn contains(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((k, rest)) => self.children.get(k).is_some_and(|c| c.contains(rest)),
        }
    }

    /// True if some member lies strictly below `path`.
    fn has_members_below(&self, path: &[String]) -> bool {
        match path.split_first() {
            None => self.children.values().any(|c| !c.is_empty()),
            Some((k, rest)) => self
                .children
                .get(k)
                .is_some_and(|c| c.has_members_below(rest)),
        }
    }

    /// Every member's path, parents before children.
    pub fn members(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        self.collect(&mut path, &mut out, false);
        out
    }

    /// Members with no member below them (scalars, atomic lists, empty maps).
    fn leaves(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        let mut path = Vec::new();
        self.collect(&mut path, &mut out, true);
        out
    }

    fn collect(&self, path: &mut Vec<String>, out: &mut Vec<Vec<String>>, leaves_only: bool) {
        let has_below = self.children.values().any(|c| !c.is_empty());
        if self.member && !(leaves_only && has_below) && !path.is_empty() {
            out.push(path.clone());
        }
        for (k, c) in &self.children {
            path.push(k.clone());
            c.collect(path, out, leaves_only);
            path.pop();
        }
    }

    fn insert(&mut self, path: &[String]) {
        match path.split_first() {
            None => self.member = true,
            Some((k, rest)) => self.children.entry(k.clone()).or_default().insert(rest),
        }
    }
}

/// A path as the apiserver prints it in conflicts: `.data.key`, `.spec.containers[name="c"].image`.
pub(crate) fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(k) = el.strip_prefix("k:") {
            let fields: Vec<String> = serde_json::from_str::<Map<String, Value>>(k)
                .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                .unwrap_or_default();
            out.push_str(&format!("[{}]", fields.join(",")));
        } else if let Some(v) = el.strip_prefix("v:") {
            out.push_str(&format!("[={v}]"));
        } else {
            out.push_str(el);
        }
    }
    out
}

/// The key of an associative list element (`k:` without the prefix), or `None` when it lacks a
/// key field. `protocol` defaults to `TCP`, as the apiserver defaults it before tracking.
fn element_key(e: &Value, keys: &[&str]) -> Option<String> {
    let mut m = Map::new();
    for k in keys {
        let v = match e.get(*k) {
            Some(v) => v.clone(),
            None if *k == "protocol" => json!("TCP"),
            None => return None,
        };
        m.insert((*k).to_string(), v);
    }
    serde_json::to_string(&Value::Object(m)).ok()
}

/// How the list at `names` is tracked, given its elements: an associative list whose element
/// lacks a key field, or a set holding objects, is tracked as atomic.
fn tracked_list_type(info: &ResourceInfo, names: &[&str], items: &[Value]) -> ListType {
    match list_type(info, names) {
        ListType::Map { apply_keys, .. }
            if items.iter().all(|e| element_key(e, apply_keys).is_some()) =>
        {
            list_type(info, names)
        }
        ListType::Set if items.iter().all(|e| !e.is_object() && !e.is_array()) => ListType::Set,
        _ => ListType::Atomic,
    }
}

fn set_of_value(info: &ResourceInfo, v: &Value, names: &mut Vec<String>) -> FieldSet {
    let mut set = FieldSet::default();
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                names.push(k.clone());
                let mut child = set_of_value(info, c, names);
                names.pop();
                child.member = true;
                set.children.insert(format!("f:{k}"), child);
            }
        }
        Value::Array(items) => {
            let ns: Vec<&str> = names.iter().map(String::as_str).collect();
            match tracked_list_type(info, &ns, items) {
                ListType::Atomic => {}
                ListType::Set => {
                    for e in items {
                        set.children.insert(
                            format!("v:{e}"),
                            FieldSet {
                                member: true,
                                children: BTreeMap::new(),
                            },
                        );
                    }
                }
                ListType::Map { apply_keys, .. } => {
                    for e in items {
                        if let Some(key) = element_key(e, apply_keys) {
                            let mut child = set_of_value(info, e, names);
                            child.member = true;
                            set.children.insert(format!("k:{key}"), child);
                        }
                    }
                }
            }
        }
        _ => {}
    }
    set
}

/// The metadata fields the apiserver never tracks.
const STRIPPED_METADATA: [&str; 9] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
    "clusterName",
    "managedFields",
];

/// Every field path of `obj` (the apiserver's `ToFieldSet`), without the stripped fields.
pub(crate) fn set_of(info: &ResourceInfo, obj: &Value) -> FieldSet {
    let mut set = set_of_value(info, obj, &mut Vec::new());
    set.children.remove("f:apiVersion");
    set.children.remove("f:kind");
    if let Some(meta) = set.children.get_mut("f:metadata") {
        meta.member = false;
        for f in STRIPPED_METADATA {
            meta.children.remove(&format!("f:{f}"));
        }
    }
    set.children.retain(|_, c| !c.is_empty());
    set
}

/// The value at a FieldsV1 path.
fn value_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    let Some((el, rest)) = path.split_first() else {
        return Some(v);
    };
    let next = if let Some(f) = el.strip_prefix("f:") {
        v.as_object()?.get(f)?
    } else if let Some(k) = el.strip_prefix("k:") {
        let key: Map<String, Value> = serde_json::from_str(k).ok()?;
        let keys: Vec<&str> = key.keys().map(String::as_str).collect();
        v.as_array()?
            .iter()
            .find(|e| element_key(e, &keys).as_deref() == Some(k))?
    } else if let Some(x) = el.strip_prefix("v:") {
        let want: Value = serde_json::from_str(x).ok()?;
        v.as_array()?.iter().find(|e| **e == want)?
    } else {
        return None;
    };
    value_at(next, rest)
}

/// Removes the value at a FieldsV1 path, if there is one.
fn remove_at(v: &mut Value, path: &[String]) {
    let Some((el, rest)) = path.split_first() else {
        return;
    };
    if rest.is_empty() {
        if let Some(f) = el.strip_prefix("f:") {
            if let Some(m) = v.as_object_mut() {
                m.remove(f);
            }
        } else if let Some(list) = v.as_array_mut() {
            let here = Value::Array(list.clone());
            if let Some(target) = value_at(&here, std::slice::from_ref(el)).cloned() {
                if let Some(i) = list.iter().position(|e| *e == target) {
                    list.remove(i);
                }
            }
        }
        return;
    }
    let next = if let Some(f) = el.strip_prefix("f:") {
        v.as_object_mut().and_then(|m| m.get_mut(f))
    } else {
        let here = v.clone();
        let target = value_at(&here, std::slice::from_ref(el)).cloned();
        match (v.as_array_mut(), target) {
            (Some(list), Some(t)) => list.iter_mut().find(|e| **e == t),
            _ => None,
        }
    };
    if let Some(next) = next {
        remove_at(next, rest);
    }
}

/// The paths of `new` that `old` lacks or holds another value at (leaves compared by value),
/// plus new parents; the apiserver's `Added ∪ Modified`.
fn changed(old: &FieldSet, old_obj: &Value, new: &FieldSet, new_obj: &Value) -> FieldSet {
    let mut out = FieldSet::default();
    for path in new.members() {
        let was = old.contains(&path);
        let leaf = !new.has_members_below(&path);
        let differs = leaf && value_at(old_obj, &path) != value_at(new_obj, &path);
        if !was || differs {
            out.insert(&path);
        }
    }
    out
}

/// One `managedFields` entry.
#[derive(Clone, Debug)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn same_identity(
        &self,
        manager: &str,
        operation: &str,
        api_version: &str,
        sub: Option<&str>,
    ) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == sub
            && (operation == "Apply" || self.api_version == api_version)
    }

    fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.fields.to_fields_v1());
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), json!(s));
        }
        Value::Object(m)
    }

    fn parse(v: &Value) -> Option<Entry> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Entry {
            manager: s("manager").unwrap_or_default(),
            operation: s("operation")?,
            api_version: s("apiVersion").unwrap_or_default(),
            time: s("time"),
            subresource: s("subresource").filter(|s| !s.is_empty()),
            fields: match v.get("fieldsV1") {
                Some(f) => FieldSet::from_fields_v1(f)?,
                None => FieldSet::default(),
            },
        })
    }
}

fn entries_of(obj: &Value) -> Vec<Entry> {
    obj.get("metadata")
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Entry::parse).collect())
        .unwrap_or_default()
}

fn store_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|p, q| {
        (
            p.operation.as_str(),
            p.time.as_deref().unwrap_or(""),
            p.manager.as_str(),
            p.api_version.as_str(),
        )
            .cmp(&(
                q.operation.as_str(),
                q.time.as_deref().unwrap_or(""),
                q.manager.as_str(),
                q.api_version.as_str(),
            ))
    });
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::to_value).collect()),
        );
    }
}

/// Records an `Update` by `manager` that turned `old` (`None`: a create) into `new`: the manager
/// owns what it added or changed, other managers lose those fields, and removed fields leave
/// every set. `new`'s `metadata.managedFields` is the list to update (the caller puts the old
/// list there when the request carried none).
pub(crate) fn record_update(
    info: &ResourceInfo,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    subresource: Option<&str>,
    now: &str,
) {
    let empty = json!({});
    let old = old.unwrap_or(&empty);
    let old_set = set_of(info, old);
    let new_set = set_of(info, new);
    let added = changed(&old_set, old, &new_set, new);
    let mut removed = old_set.clone();
    removed.subtract(&new_set);
    let api_version = info.api.api_version();
    let mut entries = entries_of(new);
    let mut found = false;
    for e in entries.iter_mut() {
        e.fields.subtract(&removed);
        if e.same_identity(manager, "Update", &api_version, subresource) {
            found = true;
            if !added.is_empty() {
                e.fields.union(&added);
                e.time = Some(now.to_string());
            }
        } else {
            e.fields.subtract(&added);
        }
    }
    if !found && !added.is_empty() {
        entries.push(Entry {
            manager: manager.to_string(),
            operation: "Update".into(),
            api_version,
            time: Some(now.to_string()),
            subresource: subresource.map(str::to_string),
            fields: added,
        });
    }
    store_entries(new, entries);
}

/// Merges an applied configuration into `live` (maps by key, associative lists by element key,
/// everything else replaced); `null` removes.
fn merge_applied(info: &ResourceInfo, live: &mut Value, applied: &Value, names: &mut Vec<String>) {
    match applied {
        Value::Object(a) => {
            if !live.is_object() {
                *live = Value::Object(Map::new());
            }
            let Some(l) = live.as_object_mut() else {
                return;
            };
            for (k, v) in a {
                if v.is_null() {
                    l.remove(k);
                    continue;
                }
                names.push(k.clone());
                merge_applied(info, l.entry(k.clone()).or_insert(Value::Null), v, names);
                names.pop();
            }
        }
        Value::Array(items) => {
            let ns: Vec<&str> = names.iter().map(String::as_str).collect();
            let ty = tracked_list_type(info, &ns, items);
            match (ty, live.as_array_mut()) {
                (ListType::Map { apply_keys, .. }, Some(list)) => {
                    for e in items {
                        let key = element_key(e, apply_keys);
                        match list.iter_mut().find(|x| element_key(x, apply_keys) == key) {
                            Some(x) => merge_applied(info, x, e, names),
                            None => {
                                let mut fresh = Value::Null;
                                merge_applied(info, &mut fresh, e, names);
                                list.push(fresh);
                            }
                        }
                    }
                }
                (ListType::Set, Some(list)) => {
                    for e in items {
                        if !list.contains(e) {
                            list.push(e.clone());
                        }
                    }
                }
                _ => *live = applied.clone(),
            }
        }
        other => *live = other.clone(),
    }
}

/// What a status or main-resource write may apply: on `/status` only `.status` (plus the
/// identifying fields), on the main resource of a kind with a status subresource all but
/// `.status`.
pub(crate) fn restrict_to(applied: &Value, status_only: bool) -> Value {
    let Some(m) = applied.as_object() else {
        return applied.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        let keep = match k.as_str() {
            "apiVersion" | "kind" => true,
            "metadata" if status_only => {
                let mut meta = Map::new();
                for f in ["name", "namespace", "resourceVersion"] {
                    if let Some(x) = v.get(f) {
                        meta.insert(f.into(), x.clone());
                    }
                }
                out.insert(k.clone(), Value::Object(meta));
                continue;
            }
            "status" => status_only,
            _ => !status_only,
        };
        if keep {
            out.insert(k.clone(), v.clone());
        }
    }
    Value::Object(out)
}

/// Server-side apply of `applied` by `manager` onto `live` (`None`: the object does not exist).
/// Returns the object to store, its `managedFields` updated. A changed field another manager owns
/// is a 409 Conflict unless `force`, which takes it over.
pub(crate) fn apply(
    info: &ResourceInfo,
    live: Option<&Value>,
    applied: &Value,
    manager: &str,
    subresource: Option<&str>,
    force: bool,
    now: &str,
) -> Result<Value, ApiError> {
    let Some(cfg) = applied.as_object() else {
        return Err(ApiError::bad_request(
            "error decoding YAML: the applied configuration is not an object",
        ));
    };
    if cfg
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .is_some_and(|f| !f.is_null())
    {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    let want_version = info.api.api_version();
    let version = cfg.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if version != want_version {
        return Err(ApiError::bad_request(format!(
            "Incorrect version specified in apply patch. Specified patch version: {version}, expected: {want_version}"
        )));
    }
    let kind = cfg.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != info.api.kind.as_ref() {
        let gv = if info.api.group.is_empty() {
            format!("/{}", info.api.version)
        } else {
            want_version.clone()
        };
        return Err(ApiError::bad_request(format!(
            "failed to create typed patch object: no corresponding type for {gv}, Kind={kind}"
        )));
    }
    let empty = json!({});
    let live_value = live.unwrap_or(&empty);
    let mut entries = entries_of(live_value);
    if live.is_some() && entries.is_empty() {
        // The object was never tracked: the apiserver gives its fields to "before-first-apply".
        let all = set_of(info, live_value);
        if !all.is_empty() {
            entries.push(Entry {
                manager: "before-first-apply".into(),
                operation: "Update".into(),
                api_version: want_version.clone(),
                time: Some(now.to_string()),
                subresource: None,
                fields: all,
            });
        }
    }
    let applied_set = set_of(info, applied);
    let mine = |e: &Entry| e.same_identity(manager, "Apply", &want_version, subresource);
    let previously = entries
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut others = FieldSet::default();
    for e in entries.iter().filter(|e| !mine(e)) {
        others.union(&e.fields);
    }
    let mut keep = others.clone();
    keep.union(&applied_set);
    let mut result = live_value.clone();
    // Fields this manager applied before, applies no longer, and nobody else owns, go.
    let mut dropped = previously.clone();
    dropped.subtract(&keep);
    let mut gone = dropped.members();
    gone.reverse(); // children before parents
    for path in gone {
        if !keep.has_members_below(&path) {
            remove_at(&mut result, &path);
        }
    }
    merge_applied(info, &mut result, applied, &mut Vec::new());
    // Conflicts: applied leaves whose value changes and that another manager owns.
    let mut conflicts: Vec<(usize, Vec<String>)> = Vec::new();
    for path in applied_set.leaves() {
        // A map applied empty (`data: {}`) is granular: its keys are fields of their own, and
        // the map is never one value that could conflict (the apiserver lets alpha apply
        // `data: {}` while beta owns `data.k`: the differential writes test).
        let granular_map = value_at(applied, &path).is_some_and(Value::is_object);
        if granular_map || value_at(live_value, &path) == value_at(&result, &path) {
            continue;
        }
        for (i, e) in entries.iter().enumerate() {
            if !mine(e) && e.fields.contains(&path) {
                conflicts.push((i, path.clone()));
            }
        }
    }
    if !conflicts.is_empty() {
        if !force {
            return Err(conflict_error(&entries, &conflicts));
        }
        for (i, path) in &conflicts {
            let mut lost = FieldSet::default();
            lost.insert(path);
            entries[*i].fields.subtract(&lost);
        }
    }
    // The time moves only when the manager's set does, so a repeated apply is a no-op.
    let time = entries
        .iter()
        .find(|e| mine(e) && e.fields == applied_set)
        .and_then(|e| e.time.clone())
        .unwrap_or_else(|| now.to_string());
    entries.retain(|e| !mine(e));
    entries.push(Entry {
        manager: manager.to_string(),
        operation: "Apply".into(),
        api_version: want_version,
        time: Some(time),
        subresource: subresource.map(str::to_string),
        fields: applied_set,
    });
    if !result.get("metadata").is_some_and(Value::is_object) {
        result["metadata"] = json!({});
    }
    store_entries(&mut result, entries);
    Ok(result)
}

/// The apiserver's 409 for apply conflicts (`NewApplyConflict`): one cause per field, type
/// `FieldManagerConflict`, and its message.
fn conflict_error(entries: &[Entry], conflicts: &[(usize, Vec<String>)]) -> ApiError {
    let who = |e: &Entry| {
        if e.operation == "Update" {
            format!("{:?} using {}", e.manager, e.api_version)
        } else {
            format!("{:?}", e.manager)
        }
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(i, p)| {
            json!({"reason": "FieldManagerConflict",
                   "message": format!("conflict with {}", who(&entries[*i])),
                   "field": display_path(p)})
        })
        .collect();
    let message = if let [(i, p)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            who(&entries[*i]),
            display_path(p)
        )
    } else {
        let mut by_manager: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (i, p) in conflicts {
            by_manager
                .entry(who(&entries[*i]))
                .or_default()
                .push(display_path(p));
        }
        let mut lines = Vec::new();
        for (m, paths) in by_manager {
            lines.push(format!("conflicts with {m}:"));
            lines.extend(paths.into_iter().map(|p| format!("- {p}")));
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            lines.join("\n")
        )
    };
    let mut e = ApiError::new(409, "Conflict", message);
    e.details = Some(json!({"causes": causes}));
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use informer::model::ApiResource;

    fn configmaps() -> ResourceInfo {
        ResourceInfo::new(
            ApiResource::from_static("", "v1", "ConfigMap", "configmaps", true),
            &[],
            true,
        )
    }

    #[test]
    fn fields_v1_round_trip() {
        let info = configmaps();
        let set = set_of(
            &info,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "b"}}, "data": {"size": "1"}}),
        );
        let v = set.to_fields_v1();
        assert_eq!(
            v,
            json!({"f:data": {".": {}, "f:size": {}}, "f:metadata": {"f:labels": {".": {}, "f:a": {}}}})
        );
        assert_eq!(FieldSet::from_fields_v1(&v).unwrap().to_fields_v1(), v);
    }

    #[test]
    fn apply_conflicts_and_force() {
        let info = configmaps();
        let mut live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"key": "a"}});
        let created = live.clone();
        record_update(&info, None, &mut live, "kubectl", None, "t");
        assert_eq!(
            live["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {".": {}, "f:key": {}}})
        );
        let _ = created;
        let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"key": "b"}});
        let e = apply(&info, Some(&live), &cfg, "op", None, false, "t").unwrap_err();
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"kubectl\" using v1: .data.key"
        );
        let forced = apply(&info, Some(&live), &cfg, "op", None, true, "t").unwrap();
        assert_eq!(forced["data"]["key"], "b");
        // Same value: shared, no conflict.
        let same = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"key": "a", "new": "n"}});
        let shared = apply(&info, Some(&live), &same, "op", None, false, "t").unwrap();
        assert_eq!(
            shared["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        // Dropping a field the applier alone owns removes it.
        let less = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"key": "a"}});
        let after = apply(&info, Some(&shared), &less, "op", None, false, "t").unwrap();
        assert_eq!(after["data"], json!({"key": "a"}));
    }
}
