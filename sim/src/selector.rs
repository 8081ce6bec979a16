//! Label and field selectors, parsed from the `labelSelector` / `fieldSelector` query parameters.
//!
//! Label selectors are parsed by the library (`informer::store::LabelSelector`, the grammar of
//! `k8s.io/apimachinery/pkg/labels`), so both sides of the wire read them alike. Field selectors
//! support `metadata.name` and `metadata.namespace` with `=`, `==`, `!=`. Parsing never panics; any
//! malformed input is an `Err(message)` that the server turns into a 400 BadRequest.

use std::collections::BTreeMap;

use informer::store::LabelSelector;
use serde_json::Value;

/// A parsed label selector; the empty selector matches everything. The grammar and its checks are
/// the library's ([`informer::store::LabelSelector`]): one parser for both sides of the wire.
///
/// ```
/// use informer_sim::JsonLabelSelector;
/// let s = JsonLabelSelector::parse("app in (web,api),tier!=db,!legacy").unwrap();
/// assert!(s.matches(&serde_json::json!({"metadata":{"labels":{"app":"web","tier":"fe"}}})));
/// assert!(!s.matches(&serde_json::json!({"metadata":{"labels":{"app":"web","legacy":""}}})));
/// assert!(JsonLabelSelector::parse("app in (web").is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsonLabelSelector(LabelSelector);

impl JsonLabelSelector {
    /// Parses a label selector string; `""` selects everything. The error is the message of the
    /// apiserver's 400.
    pub fn parse(s: &str) -> Result<Self, String> {
        s.parse()
            .map(JsonLabelSelector)
            .map_err(|e| e.apiserver_message())
    }

    /// True if `obj.metadata.labels` satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        if self.is_empty() {
            return true;
        }
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        self.0
            .matches_with(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }

    /// True if `labels` satisfy every requirement.
    pub(crate) fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.matches_with(|k| labels.get(k).map(String::as_str))
    }

    /// True for the selector that matches everything.
    pub fn is_empty(&self) -> bool {
        self.0.requirements.is_empty()
    }
}

/// A parsed field selector over `metadata.name` / `metadata.namespace`.
///
/// ```
/// use informer_sim::FieldSelector;
/// let s = FieldSelector::parse("metadata.name=web,metadata.namespace!=kube-system").unwrap();
/// assert!(s.matches(&serde_json::json!({"metadata":{"name":"web","namespace":"default"}})));
/// assert!(FieldSelector::parse("spec.nodeName=n1").is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses a field selector; `""` selects everything.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector { reqs });
        }
        for part in s.split(',') {
            let part = part.trim();
            let (field, neg, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, false, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let field = field.trim();
            if field != "metadata.name" && field != "metadata.namespace" {
                return Err(format!("field label not supported: {field}"));
            }
            reqs.push((field.to_string(), neg, value.trim().to_string()));
        }
        Ok(FieldSelector { reqs })
    }

    /// True if the object's name/namespace satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let get = |p: &str| obj.pointer(p).and_then(Value::as_str);
        self.matches_meta(
            get("/metadata/name").unwrap_or(""),
            get("/metadata/namespace"),
        )
    }

    /// True if `name` and `namespace` satisfy every requirement.
    pub(crate) fn matches_meta(&self, name: &str, namespace: Option<&str>) -> bool {
        self.reqs.iter().all(|(field, neg, value)| {
            let actual = if field == "metadata.name" {
                name
            } else {
                namespace.unwrap_or("")
            };
            (actual == value) != *neg
        })
    }

    /// True for the selector that matches everything.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }
}

/// Both selectors of a request.
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    /// The `labelSelector`.
    pub label: JsonLabelSelector,
    /// The `fieldSelector`.
    pub field: FieldSelector,
}

impl Selectors {
    /// True when neither selector restricts anything.
    pub fn is_empty(&self) -> bool {
        self.label.is_empty() && self.field.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_ops() {
        let o = json!({"metadata":{"labels":{"a":"1","b":"2"}}});
        for (s, want) in [
            ("a=1", true),
            ("a==1", true),
            ("a!=1", false),
            ("c!=1", true),
            ("a in (1,3)", true),
            ("a notin (1,3)", false),
            ("c notin (1)", true),
            ("a", true),
            ("!a", false),
            ("!c", true),
            ("a=1,b=2", true),
            ("a=1, b=3", false),
            ("", true),
        ] {
            assert_eq!(
                JsonLabelSelector::parse(s).unwrap().matches(&o),
                want,
                "{s}"
            );
        }
        for bad in [
            "a in 1",
            "=x",
            "a b c",
            "a in (1",
            "a=(",
            ",",
            "a=1,,b=2",
            "a in ((1))",
        ] {
            assert!(JsonLabelSelector::parse(bad).is_err(), "{bad}");
        }
    }
}
