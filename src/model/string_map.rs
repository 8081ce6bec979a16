//! [`StringMap`]: labels, annotations, selectors and ConfigMap data, held compactly.
//!
//! These maps are small (a handful of entries) and there is one or two in every cached object, so
//! their layout decides much of a cache's size. A `BTreeMap<String, String>` allocates a 544-byte
//! node for even one entry; a `StringMap` is one exact-size sorted vector: 48 bytes per entry. On
//! 10,000 Endpoints with two small maps each that is about 10 MB less; lookups are a binary search
//! over a few entries. The API follows `BTreeMap`'s (key order, `get`, `insert`, `iter`, ...).
//!
//! Invariant: `entries` is sorted by key, with no key twice.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A map from string to string in key order, stored as one sorted vector.
///
/// ```
/// use informer::StringMap;
/// let mut labels = StringMap::from([("app", "web"), ("tier", "front")]);
/// assert_eq!(labels.get("app").map(String::as_str), Some("web"));
/// assert_eq!(labels.insert("app".into(), "api".into()).as_deref(), Some("web"));
/// assert_eq!(labels.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["app", "tier"]);
/// let back: StringMap = serde_json::from_str(r#"{"b":"2","a":"1"}"#).unwrap();
/// assert_eq!(serde_json::to_string(&back).unwrap(), r#"{"a":"1","b":"2"}"#);
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StringMap {
    entries: Vec<(String, String)>,
}

impl StringMap {
    /// An empty map (no allocation).
    ///
    /// ```
    /// assert!(informer::StringMap::new().is_empty());
    /// ```
    pub const fn new() -> StringMap {
        StringMap {
            entries: Vec::new(),
        }
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        self.entries.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    /// The value of `key`.
    ///
    /// ```
    /// let m = informer::StringMap::from([("a", "1")]);
    /// assert_eq!(m.get("a").unwrap(), "1");
    /// assert!(m.get("b").is_none());
    /// ```
    pub fn get(&self, key: &str) -> Option<&String> {
        self.find(key).ok().map(|i| &self.entries[i].1)
    }

    /// Whether `key` is present.
    ///
    /// ```
    /// assert!(informer::StringMap::from([("a", "1")]).contains_key("a"));
    /// ```
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; returns the previous value.
    ///
    /// ```
    /// let mut m = informer::StringMap::new();
    /// assert_eq!(m.insert("a".into(), "1".into()), None);
    /// assert_eq!(m.insert("a".into(), "2".into()).as_deref(), Some("1"));
    /// ```
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, value)),
            Err(i) => {
                self.entries.insert(i, (key, value));
                None
            }
        }
    }

    /// Removes `key`; returns its value.
    ///
    /// ```
    /// let mut m = informer::StringMap::from([("a", "1")]);
    /// assert_eq!(m.remove("a").as_deref(), Some("1"));
    /// assert!(m.is_empty());
    /// ```
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.find(key).ok().map(|i| self.entries.remove(i).1)
    }

    /// Number of entries.
    ///
    /// ```
    /// assert_eq!(informer::StringMap::from([("a", "1")]).len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map is empty.
    ///
    /// ```
    /// assert!(informer::StringMap::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Removes every entry.
    ///
    /// ```
    /// let mut m = informer::StringMap::from([("a", "1")]);
    /// m.clear();
    /// assert!(m.is_empty());
    /// ```
    pub fn clear(&mut self) {
        self.entries = Vec::new();
    }

    /// The entries in key order.
    ///
    /// ```
    /// let m = informer::StringMap::from([("b", "2"), ("a", "1")]);
    /// let v: Vec<_> = m.iter().collect();
    /// assert_eq!(v[0], (&"a".to_string(), &"1".to_string()));
    /// ```
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.entries.iter())
    }

    /// The keys in order.
    ///
    /// ```
    /// let m = informer::StringMap::from([("b", "2"), ("a", "1")]);
    /// assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b"]);
    /// ```
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.entries.iter().map(|(k, _)| k)
    }

    /// The values in key order.
    ///
    /// ```
    /// let m = informer::StringMap::from([("b", "2"), ("a", "1")]);
    /// assert_eq!(m.values().collect::<Vec<_>>(), ["1", "2"]);
    /// ```
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.entries.iter().map(|(_, v)| v)
    }

    /// Builds the map from entries in any order; a later entry wins over an earlier one with the
    /// same key (as with repeated `insert`), and no capacity is left over.
    fn from_entries(mut entries: Vec<(String, String)>) -> StringMap {
        // Stable, so among equal keys the last one given is last; keep that one.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, String)> = Vec::with_capacity(entries.len());
        for e in entries {
            match out.last_mut() {
                Some(last) if last.0 == e.0 => *last = e,
                _ => out.push(e),
            }
        }
        out.shrink_to_fit();
        StringMap { entries: out }
    }
}

/// Iterator over a [`StringMap`]'s entries in key order.
#[derive(Clone, Debug)]
pub struct Iter<'a>(std::slice::Iter<'a, (String, String)>);

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a String, &'a String);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(k, v)| (k, v))
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|(k, v)| (k, v))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a StringMap {
    type Item = (&'a String, &'a String);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for StringMap {
    type Item = (String, String);
    type IntoIter = std::vec::IntoIter<(String, String)>;
    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for StringMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> StringMap {
        StringMap::from_entries(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl<K: Into<String>, V: Into<String>> Extend<(K, V)> for StringMap {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k.into(), v.into());
        }
    }
}

impl<K: Into<String>, V: Into<String>, const N: usize> From<[(K, V); N]> for StringMap {
    fn from(entries: [(K, V); N]) -> StringMap {
        entries.into_iter().collect()
    }
}

impl From<BTreeMap<String, String>> for StringMap {
    fn from(map: BTreeMap<String, String>) -> StringMap {
        // Already in key order with unique keys.
        StringMap {
            entries: map.into_iter().collect(),
        }
    }
}

impl From<StringMap> for BTreeMap<String, String> {
    fn from(map: StringMap) -> BTreeMap<String, String> {
        map.entries.into_iter().collect()
    }
}

impl std::ops::Index<&str> for StringMap {
    type Output = String;
    /// Panics if `key` is absent, like `BTreeMap`'s.
    fn index(&self, key: &str) -> &String {
        self.get(key).expect("no entry found for key")
    }
}

impl fmt::Debug for StringMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Serialize for StringMap {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for StringMap {
    /// A JSON object of strings; `null` reads as empty (Go writes nil maps as `null`).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<StringMap, D::Error> {
        struct MapVisitor;
        impl<'de> Visitor<'de> for MapVisitor {
            type Value = StringMap;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of strings")
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<StringMap, E> {
                Ok(StringMap::new())
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<StringMap, E> {
                Ok(StringMap::new())
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<StringMap, D::Error> {
                d.deserialize_map(MapVisitor)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<StringMap, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
                while let Some(entry) = map.next_entry::<String, String>()? {
                    entries.push(entry);
                }
                Ok(StringMap::from_entries(entries))
            }
        }
        d.deserialize_option(MapVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_unique_and_the_last_duplicate_wins() {
        let m: StringMap = serde_json::from_str(r#"{"b":"1","a":"2","b":"3"}"#).unwrap();
        assert_eq!(
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
            [("a", "2"), ("b", "3")]
        );
        assert_eq!(m.entries.capacity(), 2);
        let n: StringMap = serde_json::from_str("null").unwrap();
        assert!(n.is_empty());
        assert!(serde_json::from_str::<StringMap>(r#"{"a":1}"#).is_err());
    }

    #[test]
    fn behaves_like_a_btreemap() {
        let mut m = StringMap::new();
        let mut b = BTreeMap::new();
        for (i, k) in ["m", "c", "x", "c", "a", "m", "z"].iter().enumerate() {
            assert_eq!(
                m.insert(k.to_string(), i.to_string()),
                b.insert(k.to_string(), i.to_string())
            );
        }
        assert_eq!(m.remove("x"), b.remove("x"));
        assert_eq!(m.remove("nope"), b.remove("nope"));
        assert!(m.iter().eq(b.iter()));
        assert_eq!(BTreeMap::from(m.clone()), b);
        assert_eq!(StringMap::from(b), m);
    }
}
