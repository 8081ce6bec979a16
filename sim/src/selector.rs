//! Label and field selectors, parsed from the `labelSelector` / `fieldSelector` query parameters.
//!
//! Label grammar (as `k8s.io/apimachinery/pkg/labels`): comma-separated requirements, each one of
//! `key`, `!key`, `key=v`, `key==v`, `key!=v`, `key in (a,b)`, `key notin (a,b)`. Field selectors
//! support `metadata.name` and `metadata.namespace` with `=`, `==`, `!=`. Parsing never panics; any
//! malformed input is an `Err(message)` that the server turns into a 400 BadRequest.

use std::collections::BTreeMap;

use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
enum Op {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    NotExists,
}

#[derive(Clone, Debug, PartialEq)]
struct Requirement {
    key: String,
    op: Op,
}

/// A parsed label selector; the empty selector matches everything.
///
/// ```
/// use informer_sim::JsonLabelSelector;
/// let s = JsonLabelSelector::parse("app in (web,api),tier!=db,!legacy").unwrap();
/// assert!(s.matches(&serde_json::json!({"metadata":{"labels":{"app":"web","tier":"fe"}}})));
/// assert!(!s.matches(&serde_json::json!({"metadata":{"labels":{"app":"web","legacy":""}}})));
/// assert!(JsonLabelSelector::parse("app in (web").is_err());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JsonLabelSelector {
    reqs: Vec<Requirement>,
}

fn valid_token(s: &str) -> bool {
    s.len() <= 317
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn check_key(k: &str) -> Result<(), String> {
    if k.is_empty() || !valid_token(k) {
        return Err(format!(
            "unable to parse requirement: invalid label key \"{k}\""
        ));
    }
    Ok(())
}

fn check_value(v: &str) -> Result<(), String> {
    if !valid_token(v) || v.contains('/') {
        return Err(format!(
            "unable to parse requirement: invalid label value: \"{v}\""
        ));
    }
    Ok(())
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err(format!(
                "unable to parse selector {s:?}: unbalanced parentheses"
            ));
        }
    }
    if depth != 0 {
        return Err(format!(
            "unable to parse selector {s:?}: unbalanced parentheses"
        ));
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn parse_set(rest: &str) -> Result<Vec<String>, String> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            // The apiserver's wording (1.20): the literal found where `(` was expected.
            let lit = rest.split([' ', ',', ')']).next().unwrap_or("");
            format!("unable to parse requirement: found '{lit}' expected: '('")
        })?;
    let mut vals = Vec::new();
    for v in inner.split(',') {
        let v = v.trim();
        check_value(v)?;
        vals.push(v.to_string());
    }
    Ok(vals)
}

impl JsonLabelSelector {
    /// Parses a label selector string; `""` selects everything.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(JsonLabelSelector { reqs });
        }
        for part in split_top(s)? {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!("unable to parse selector {s:?}: empty requirement"));
            }
            reqs.push(Self::parse_req(part)?);
        }
        Ok(JsonLabelSelector { reqs })
    }

    fn parse_req(part: &str) -> Result<Requirement, String> {
        if let Some(k) = part.strip_prefix('!') {
            let k = k.trim();
            check_key(k)?;
            return Ok(Requirement {
                key: k.into(),
                op: Op::NotExists,
            });
        }
        for (tok, neg) in [("!=", true), ("==", false), ("=", false)] {
            if let Some((k, v)) = part.split_once(tok) {
                let (k, v) = (k.trim(), v.trim());
                check_key(k)?;
                check_value(v)?;
                let op = if neg {
                    Op::NotEq(v.into())
                } else {
                    Op::Eq(v.into())
                };
                return Ok(Requirement { key: k.into(), op });
            }
        }
        let mut words = part.splitn(2, char::is_whitespace);
        let key = words.next().unwrap_or_default().trim();
        let rest = words.next().unwrap_or_default().trim_start();
        check_key(key)?;
        if rest.is_empty() {
            return Ok(Requirement {
                key: key.into(),
                op: Op::Exists,
            });
        }
        if let Some(r) = rest.strip_prefix("notin") {
            return Ok(Requirement {
                key: key.into(),
                op: Op::NotIn(parse_set(r)?),
            });
        }
        if let Some(r) = rest.strip_prefix("in") {
            return Ok(Requirement {
                key: key.into(),
                op: Op::In(parse_set(r)?),
            });
        }
        Err(format!(
            "unable to parse requirement: found '{rest}', expected: in, notin, =, ==, !=, gt, lt"
        ))
    }

    /// True if `obj.metadata.labels` satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        if self.reqs.is_empty() {
            return true;
        }
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        self.matches_by(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }

    /// True if `labels` satisfy every requirement.
    pub(crate) fn matches_labels(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_by(|k| labels.get(k).map(String::as_str))
    }

    fn matches_by<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.reqs.iter().all(|r| match &r.op {
            Op::Eq(v) => get(&r.key) == Some(v.as_str()),
            Op::NotEq(v) => get(&r.key) != Some(v.as_str()),
            Op::In(vs) => get(&r.key).is_some_and(|x| vs.iter().any(|v| v == x)),
            Op::NotIn(vs) => get(&r.key).is_none_or(|x| vs.iter().all(|v| v != x)),
            Op::Exists => get(&r.key).is_some(),
            Op::NotExists => get(&r.key).is_none(),
        })
    }

    /// True for the selector that matches everything.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
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
