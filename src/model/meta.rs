//! Object metadata shared by every Kubernetes object (`metadata`, `apiVersion`, `kind`).
//!
//! Field names follow the apiserver's JSON (camelCase on the wire, snake_case in Rust). Every field is
//! optional on the wire and defaults to empty here, so a partial object (a BOOKMARK, a Table row, an
//! object from a newer server) always decodes. Unknown fields are ignored.

use super::StringMap;

use serde::{Deserialize, Serialize};
use smol_str::SmolStr;

/// `apiVersion` and `kind`, as carried by every top-level object.
///
/// ```
/// let t: informer::model::TypeMeta = serde_json::from_str(r#"{"apiVersion":"v1","kind":"Pod"}"#).unwrap();
/// assert_eq!(t.kind, "Pod");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TypeMeta {
    /// `group/version`, or just `version` for the core group (`"v1"`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The kind, e.g. `"Pod"`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
}

/// The `metadata` of an object (`ObjectMeta` in the Kubernetes API).
///
/// Timestamps are kept as the RFC 3339 strings the apiserver sends: the informer never does
/// arithmetic on them, and keeping them as strings avoids a date-time dependency.
///
/// ```
/// use informer::ObjectMeta;
/// let m: ObjectMeta = serde_json::from_str(
///     r#"{"name":"web","namespace":"default","resourceVersion":"42","labels":{"app":"web"}}"#,
/// ).unwrap();
/// assert_eq!(m.resource_version, "42");
/// assert_eq!(&m.labels["app"], "web");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// The object's name, unique in its namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The prefix the server generates a name from when `name` is empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub generate_name: String,
    /// Empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Deprecated by Kubernetes; empty on current servers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub self_link: String,
    /// The object's unique id over its lifetime (a re-created object gets a new one).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Opaque version string; compare for equality only, unless both sides parse as integers.
    #[serde(default, skip_serializing_if = "SmolStr::is_empty")]
    pub resource_version: SmolStr,
    /// The generation of the desired state (`spec`), bumped by the server on change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// When the object was created (RFC 3339; see [`crate::model::time`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creation_timestamp: Option<SmolStr>,
    /// When deletion was requested (RFC 3339); set while finalizers run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_timestamp: Option<SmolStr>,
    /// The grace period of a requested deletion, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_grace_period_seconds: Option<i64>,
    #[serde(
        default,
        skip_serializing_if = "StringMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    /// Labels, matched by label selectors.
    pub labels: StringMap,
    #[serde(
        default,
        skip_serializing_if = "StringMap::is_empty",
        deserialize_with = "null_as_default"
    )]
    /// Annotations: free-form metadata.
    pub annotations: StringMap,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// The objects this one belongs to.
    pub owner_references: Vec<OwnerReference>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "exact_vec"
    )]
    /// Finalizers that must finish before the object is removed.
    pub finalizers: Vec<String>,
    /// Server-side-apply bookkeeping, kept as raw JSON text: parsed into a tree it would take about
    /// four times the object's own size. Parse it with [`RawJson::parse`] when needed, or drop it in
    /// an informer's transform hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_fields: Option<RawJson>,
}

impl ObjectMeta {
    /// The cache key of the object: `namespace/name`, or `name` for cluster-scoped objects
    /// (client-go's `MetaNamespaceKeyFunc`).
    ///
    /// ```
    /// let mut m = informer::ObjectMeta::default();
    /// m.name = "web".into();
    /// assert_eq!(m.key(), "web");
    /// m.namespace = "prod".into();
    /// assert_eq!(m.key(), "prod/web");
    /// ```
    pub fn key(&self) -> String {
        if self.namespace.is_empty() {
            self.name.clone()
        } else {
            let mut k = String::with_capacity(self.namespace.len() + 1 + self.name.len());
            k.push_str(&self.namespace);
            k.push('/');
            k.push_str(&self.name);
            k
        }
    }
}

/// A JSON value kept as its text, exactly as received: it costs its length in memory and is parsed
/// only on demand.
///
/// ```
/// let m: informer::ObjectMeta =
///     serde_json::from_str(r#"{"managedFields":[{"manager":"kubelet","operation":"Update"}]}"#).unwrap();
/// let raw = m.managed_fields.unwrap();
/// assert_eq!(raw.get(), r#"[{"manager":"kubelet","operation":"Update"}]"#);
/// let entries: Vec<serde_json::Value> = raw.parse().unwrap();
/// assert_eq!(entries[0]["manager"], "kubelet");
/// ```
///
/// `managedFields` that came in protobuf are kept as their protobuf bytes, and written as the JSON
/// the apiserver would have sent on the first [`get`](Self::get) (or `parse`, comparison,
/// serialization): most informers never read them, and writing them as JSON for every decoded
/// object was most of a Pod's protobuf decode (docs/measurements.md). Their structure is checked
/// when the object is decoded; their `fieldsV1` text, which the apiserver sends as JSON bytes, is
/// checked as JSON by [`parse`](Self::parse) and by serialization, which fail on text that is not.
#[derive(Clone)]
pub struct RawJson(Text);

#[derive(Clone)]
enum Text {
    /// JSON, checked as one value by the decoder that read it.
    Json(Box<serde_json::value::RawValue>),
    /// Written as JSON on first read (boxed: most objects carry `Json` or nothing, and an
    /// `ObjectMeta` holds an `Option<RawJson>`).
    #[cfg(feature = "protobuf")]
    Deferred(Box<Deferred>),
}

/// A value kept in another encoding, and the function that writes it as JSON.
#[cfg(feature = "protobuf")]
#[derive(Clone)]
struct Deferred {
    source: Box<[u8]>,
    write: fn(&[u8]) -> String,
    json: std::sync::OnceLock<Box<str>>,
}

impl RawJson {
    /// A value kept as `source` until first read, then written as JSON by `write` (which must not
    /// fail: the caller checked `source`).
    #[cfg(feature = "protobuf")]
    pub(crate) fn deferred(source: Box<[u8]>, write: fn(&[u8]) -> String) -> RawJson {
        RawJson(Text::Deferred(Box::new(Deferred {
            source,
            write,
            json: std::sync::OnceLock::new(),
        })))
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        match &self.0 {
            Text::Json(raw) => raw.get(),
            #[cfg(feature = "protobuf")]
            Text::Deferred(d) => d.json.get_or_init(|| (d.write)(&d.source).into()),
        }
    }

    /// Parses the text into any type.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> serde_json::Result<T> {
        serde_json::from_str(self.get())
    }
}

impl Serialize for RawJson {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Text::Json(raw) => raw.serialize(serializer),
            #[cfg(feature = "protobuf")]
            Text::Deferred(_) => {
                let raw: &serde_json::value::RawValue = serde_json::from_str(self.get())
                    .map_err(|e| serde::ser::Error::custom(format!("not JSON: {e}")))?;
                raw.serialize(serializer)
            }
        }
    }
}

impl<'de> Deserialize<'de> for RawJson {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<serde_json::value::RawValue>::deserialize(deserializer)
            .map(|raw| RawJson(Text::Json(raw)))
    }
}

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl std::fmt::Debug for RawJson {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.get())
    }
}

/// A reference to an owning object (`metadata.ownerReferences[]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    /// The owner's `apiVersion`.
    #[serde(default)]
    pub api_version: String,
    /// The owner's `kind`.
    #[serde(default)]
    pub kind: String,
    /// The owner's name (in this object's namespace).
    #[serde(default)]
    pub name: String,
    /// The owner's uid.
    #[serde(default)]
    pub uid: String,
    /// True for the managing controller (at most one owner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<bool>,
    /// Whether the owner's foreground deletion waits for this object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_owner_deletion: Option<bool>,
}

/// The `metadata` of a list response: the snapshot's resourceVersion and the pagination state.
///
/// ```
/// let m: informer::model::ListMeta =
///     serde_json::from_str(r#"{"resourceVersion":"79","continue":"abc","remainingItemCount":3}"#).unwrap();
/// assert_eq!(m.continue_token, "abc");
/// assert_eq!(m.remaining_item_count, Some(3));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    /// The version of the list (watch from here).
    #[serde(default, skip_serializing_if = "SmolStr::is_empty")]
    pub resource_version: SmolStr,
    /// Token for the next page; empty on the last page.
    #[serde(default, rename = "continue", skip_serializing_if = "String::is_empty")]
    pub continue_token: String,
    /// Objects left after this page (an estimate), when the server says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_item_count: Option<i64>,
}

/// Deserializes `null` as the type's default (Go serializes nil maps and slices as `null`).
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Deserializes a list (`null` as empty) into a `Vec` without spare capacity. Decoding grows a
/// `Vec` by doubling (JSON does not say how long an array is), so five conditions would keep room
/// for eight; objects live in the store for a long time, and this trims a few hundred bytes from
/// each (measured: about 1.5 KB per Pod).
pub(crate) fn exact_vec<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    let mut v = Option::<Vec<T>>::deserialize(d)?.unwrap_or_default();
    v.shrink_to_fit();
    Ok(v)
}
