//! Label selectors in the apiserver's string form (`app=web,tier!=db,env in (a,b),!canary`).
//!
//! Semantics follow `k8s.io/apimachinery/pkg/labels`: requirements are ANDed; `!=` and `notin` also
//! match objects that do not carry the label; the empty selector matches everything. Parsing is as
//! strict as the apiserver's (an empty requirement, a nested list, a key or value with characters a
//! label cannot hold are errors), so a selector this crate accepts is one the apiserver accepts;
//! the simulator parses with this same code.

use crate::model::StringMap;
use std::fmt;

/// One requirement of a [`LabelSelector`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (matches when the label is absent too).
    NotEquals(String, String),
    /// `key in (v1,v2)`.
    In(String, Vec<String>),
    /// `key notin (v1,v2)` (matches when the label is absent too).
    NotIn(String, Vec<String>),
    /// `key`: the label exists.
    Exists(String),
    /// `!key`: the label does not exist.
    DoesNotExist(String),
}

impl Requirement {
    /// Whether `labels` satisfy this requirement.
    ///
    /// ```
    /// use informer::store::Requirement;
    /// let labels = [("app".to_string(), "web".to_string())].into();
    /// assert!(Requirement::Exists("app".into()).matches(&labels));
    /// assert!(Requirement::NotEquals("tier".into(), "db".into()).matches(&labels));
    /// ```
    pub fn matches(&self, labels: &StringMap) -> bool {
        self.matches_with(|k| labels.get(k))
    }

    /// Whether the labels `label` looks up satisfy this requirement (for labels held in another
    /// shape than a [`StringMap`]).
    ///
    /// ```
    /// use informer::store::Requirement;
    /// let req = Requirement::In("app".into(), vec!["web".into(), "api".into()]);
    /// assert!(req.matches_with(|k| (k == "app").then_some("api")));
    /// ```
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        match self {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Requirement::NotIn(k, vs) => label(k).is_none_or(|v| !vs.iter().any(|x| x == v)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::DoesNotExist(k) => label(k).is_none(),
        }
    }
}

/// A parsed label selector: the AND of its [`Requirement`]s.
///
/// ```
/// use informer::store::LabelSelector;
/// let sel: LabelSelector = "app=web, env in (prod,staging),!canary".parse().unwrap();
/// let labels = [("app", "web"), ("env", "prod")]
///     .map(|(k, v)| (k.to_string(), v.to_string()))
///     .into();
/// assert!(sel.matches(&labels));
/// assert!(LabelSelector::everything().matches(&Default::default()));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// The requirements, all of which must hold.
    pub requirements: Vec<Requirement>,
}

/// Why a selector string did not parse.
///
/// ```
/// assert!("app in (a".parse::<informer::store::LabelSelector>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorParseError {
    /// The requirement that failed.
    pub requirement: String,
    /// What was wrong with it.
    pub reason: &'static str,
}

/// The reason of a set requirement (`in`, `notin`) without its `(...)`.
const MISSING_VALUE_LIST: &str = "expected a parenthesised value list";

impl SelectorParseError {
    /// The message a kube-apiserver (1.20) gives in its 400 for this selector: its exact words for
    /// a set requirement without its value list (what the simulator is checked against), this
    /// error's reason otherwise.
    ///
    /// ```
    /// let e = "app in".parse::<informer::store::LabelSelector>().unwrap_err();
    /// assert_eq!(e.apiserver_message(), "unable to parse requirement: found '' expected: '('");
    /// ```
    pub fn apiserver_message(&self) -> String {
        if self.reason == MISSING_VALUE_LIST {
            // The literal found where `(` was expected (after the key and `in`/`notin`).
            let after_op: Vec<&str> = self.requirement.split_whitespace().skip(2).collect();
            let after_op = after_op.join(" ");
            let lit = after_op.split([' ', ',', ')']).next().unwrap_or("");
            return format!("unable to parse requirement: found '{lit}' expected: '('");
        }
        format!(
            "unable to parse requirement: {}: {:?}",
            self.reason, self.requirement
        )
    }
}

impl fmt::Display for SelectorParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid label selector requirement {:?}: {}",
            self.requirement, self.reason
        )
    }
}

impl std::error::Error for SelectorParseError {}

impl LabelSelector {
    /// The selector that matches every object.
    ///
    /// ```
    /// assert!(informer::store::LabelSelector::everything().requirements.is_empty());
    /// ```
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// Whether `labels` satisfy every requirement.
    ///
    /// ```
    /// let sel: informer::store::LabelSelector = "tier notin (db)".parse().unwrap();
    /// assert!(sel.matches(&Default::default()));
    /// ```
    pub fn matches(&self, labels: &StringMap) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether the labels `label` looks up satisfy every requirement (see
    /// [`Requirement::matches_with`]).
    ///
    /// ```
    /// let sel: informer::store::LabelSelector = "app=web,!canary".parse().unwrap();
    /// assert!(sel.matches_with(|k| (k == "app").then_some("web")));
    /// ```
    pub fn matches_with<'a>(&self, label: impl Fn(&str) -> Option<&'a str> + Copy) -> bool {
        self.requirements.iter().all(|r| r.matches_with(label))
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut requirements = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        for part in split_top_level(s)? {
            let part = part.trim();
            if part.is_empty() {
                return Err(err(s, "empty requirement"));
            }
            requirements.push(parse_requirement(part)?);
        }
        Ok(LabelSelector { requirements })
    }
}

/// Splits at commas outside parentheses.
fn split_top_level(s: &str) -> Result<Vec<&str>, SelectorParseError> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' if depth == 0 => depth = 1,
            '(' => return Err(err(s, "nested '('")),
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| err(s, "unbalanced ')'"))?
            }
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(err(s, "unbalanced '('"));
    }
    parts.push(&s[start..]);
    Ok(parts)
}

fn err(requirement: &str, reason: &'static str) -> SelectorParseError {
    SelectorParseError {
        requirement: requirement.to_string(),
        reason,
    }
}

/// The characters of label keys and values (apimachinery's qualified names: alphanumerics, `-`, `_`,
/// `.`, and in keys one `/` after a DNS prefix), within a key's longest length (253 + 1 + 63).
fn valid_token(s: &str) -> bool {
    s.len() <= 317
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn key_ok(k: &str) -> bool {
    !k.is_empty() && valid_token(k)
}

fn value_ok(v: &str) -> bool {
    valid_token(v) && !v.contains('/')
}

fn parse_requirement(r: &str) -> Result<Requirement, SelectorParseError> {
    if let Some(k) = r.strip_prefix('!') {
        let k = k.trim();
        return if key_ok(k) {
            Ok(Requirement::DoesNotExist(k.into()))
        } else {
            Err(err(r, "invalid label key"))
        };
    }
    for (op, neg) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = r.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            if !key_ok(k) {
                return Err(err(r, "invalid label key"));
            }
            if !value_ok(v) {
                return Err(err(r, "invalid label value"));
            }
            return Ok(if neg {
                Requirement::NotEquals(k.into(), v.into())
            } else {
                Requirement::Equals(k.into(), v.into())
            });
        }
    }
    let mut words = r.splitn(2, char::is_whitespace);
    let key = words.next().unwrap_or_default();
    let rest = words.next().unwrap_or_default().trim_start();
    if !key_ok(key) {
        return Err(err(r, "invalid label key"));
    }
    if rest.is_empty() {
        return Ok(Requirement::Exists(key.into()));
    }
    let (neg, list) = if let Some(l) = rest.strip_prefix("notin") {
        (true, l)
    } else if let Some(l) = rest.strip_prefix("in") {
        (false, l)
    } else {
        return Err(err(r, "expected '=', '!=', 'in' or 'notin'"));
    };
    let list = list.trim();
    let inner = list
        .strip_prefix('(')
        .and_then(|l| l.strip_suffix(')'))
        .ok_or_else(|| err(r, MISSING_VALUE_LIST))?;
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    if !values.iter().all(|v| value_ok(v)) {
        return Err(err(r, "invalid label value"));
    }
    Ok(if neg {
        Requirement::NotIn(key.into(), values)
    } else {
        Requirement::In(key.into(), values)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> StringMap {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_every_operator() {
        let sel: LabelSelector = "a=1,b==2,c!=3,d in (x, y),e notin (z),f,!g"
            .parse()
            .unwrap();
        use Requirement::*;
        assert_eq!(
            sel.requirements,
            vec![
                Equals("a".into(), "1".into()),
                Equals("b".into(), "2".into()),
                NotEquals("c".into(), "3".into()),
                In("d".into(), vec!["x".into(), "y".into()]),
                NotIn("e".into(), vec!["z".into()]),
                Exists("f".into()),
                DoesNotExist("g".into()),
            ]
        );
    }

    #[test]
    fn matching_semantics() {
        let sel: LabelSelector = "app=web,tier!=db,env in (prod),!canary".parse().unwrap();
        assert!(sel.matches(&labels(&[("app", "web"), ("env", "prod")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("env", "prod"), ("canary", "")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("env", "dev")])));
        assert!(!sel.matches(&labels(&[("app", "web"), ("env", "prod"), ("tier", "db")])));
        assert!("".parse::<LabelSelector>().unwrap().matches(&labels(&[])));
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "a in (x",
            "a)",
            "a b",
            "=x",
            "a in x",
            "a=b c",
            ",",
            "a=1,,b=2",
            "a=1,",
            "a in ((1))",
            "a=(",
            "a=x/y",
            "a b=c",
        ] {
            assert!(bad.parse::<LabelSelector>().is_err(), "{bad}");
        }
    }
}
