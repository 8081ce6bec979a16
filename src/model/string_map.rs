//! [`StringMap`]: labels, annotations, selectors and ConfigMap data, held compactly.
//!
//! These maps are small (a handful of entries) and there is one or two in every cached object, so
//! their layout decides much of a cache's size and of the time it takes to decode one. A
//! `BTreeMap<String, String>` allocates a 544-byte node for even one entry, plus one allocation per
//! key and per value; a `StringMap` is one exact-size allocation whatever its length: where each
//! key and value ends, then the keys and values one after another in key order. Four labels of
//! Endpoints take about 110 bytes this way, against about 500 as a sorted vector of `String` pairs
//! and 800 as a `BTreeMap`. Lookups are a binary search over a few entries. The API follows
//! `BTreeMap`'s (key order, `get`, `insert`, `iter`, ...), with `&str` where it gives `&String`.
//!
//! # Layout
//! `data` is empty for an empty map; otherwise it is `w n e_0 e_1 ... e_2n-1 text`:
//! - `text` is every key followed by its value, entries in strictly increasing key order (sorted,
//!   no key twice);
//! - `e_2i` is where key `i` ends in `text`, `e_2i+1` where its value ends (so entry `i` starts at
//!   `e_2i-1`, or 0); each at a `char` boundary of `text`, none smaller than the one before, the
//!   last `text.len()`;
//! - `n` is the number of entries; `n` and every `e` are written as `w` base-128 digits, least
//!   significant first, one byte per digit, and `w` (one byte) is the fewest digits that hold the
//!   largest of them. Every byte before `text` is thus ASCII: `data` is a `str` and `text` starts
//!   at a `char` boundary, so entries are sliced out without a UTF-8 check. Four labels of 95
//!   bytes take 10 bytes of header; two `u32` per entry would take 32, in an allocation of their
//!   own. The layout is a function of the entries, so equal maps have equal `data`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{DeserializeSeed, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A map from string to string in key order, stored in one exact-size allocation.
///
/// ```
/// use informer::StringMap;
/// let mut labels = StringMap::from([("app", "web"), ("tier", "front")]);
/// assert_eq!(labels.get("app"), Some("web"));
/// assert_eq!(labels.insert("app".into(), "api".into()).as_deref(), Some("web"));
/// assert_eq!(labels.keys().collect::<Vec<_>>(), ["app", "tier"]);
/// let back: StringMap = serde_json::from_str(r#"{"b":"2","a":"1"}"#).unwrap();
/// assert_eq!(serde_json::to_string(&back).unwrap(), r#"{"a":"1","b":"2"}"#);
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct StringMap {
    /// The header and the text (see the layout in the module docs).
    data: Box<str>,
}

impl StringMap {
    /// An empty map (no allocation).
    ///
    /// ```
    /// assert!(informer::StringMap::new().is_empty());
    /// ```
    pub fn new() -> StringMap {
        StringMap::default()
    }

    /// Entry `i` (`i < len`): its key and its value.
    fn entry(&self, i: usize) -> (&str, &str) {
        let header = self.data.as_bytes();
        let w = usize::from(header[0]);
        let e = |j: usize| number(header, 1 + w + j * w, w);
        let text = &self.data[1 + w + 2 * self.len() * w..];
        let start = if i == 0 { 0 } else { e(2 * i - 1) };
        let (key_end, value_end) = (e(2 * i), e(2 * i + 1));
        (&text[start..key_end], &text[key_end..value_end])
    }

    fn find(&self, key: &str) -> Result<usize, usize> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.entry(mid).0.cmp(key) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    /// The value of `key`.
    ///
    /// ```
    /// let m = informer::StringMap::from([("a", "1")]);
    /// assert_eq!(m.get("a"), Some("1"));
    /// assert!(m.get("b").is_none());
    /// ```
    pub fn get(&self, key: &str) -> Option<&str> {
        self.find(key).ok().map(|i| self.entry(i).1)
    }

    /// Whether `key` is present.
    ///
    /// ```
    /// assert!(informer::StringMap::from([("a", "1")]).contains_key("a"));
    /// ```
    pub fn contains_key(&self, key: &str) -> bool {
        self.find(key).is_ok()
    }

    /// Sets `key` to `value`; returns the previous value. Rewrites the map (it is a few entries).
    ///
    /// ```
    /// let mut m = informer::StringMap::new();
    /// assert_eq!(m.insert("a".into(), "1".into()), None);
    /// assert_eq!(m.insert("a".into(), "2".into()).as_deref(), Some("1"));
    /// ```
    pub fn insert(&mut self, key: String, value: String) -> Option<String> {
        let mut entries: Vec<(&str, &str)> = self.iter().collect();
        let old = match self.find(&key) {
            Ok(i) => Some(
                std::mem::replace(&mut entries[i], (&key, &value))
                    .1
                    .to_string(),
            ),
            Err(i) => {
                entries.insert(i, (&key, &value));
                None
            }
        };
        let map = StringMap::from_sorted(entries);
        *self = map;
        old
    }

    /// Removes `key`; returns its value.
    ///
    /// ```
    /// let mut m = informer::StringMap::from([("a", "1")]);
    /// assert_eq!(m.remove("a").as_deref(), Some("1"));
    /// assert!(m.is_empty());
    /// ```
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let i = self.find(key).ok()?;
        let mut entries: Vec<(&str, &str)> = self.iter().collect();
        let (_, value) = entries.remove(i);
        let value = value.to_string();
        *self = StringMap::from_sorted(entries);
        Some(value)
    }

    /// Number of entries.
    ///
    /// ```
    /// assert_eq!(informer::StringMap::from([("a", "1")]).len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        match self.data.as_bytes() {
            [] => 0,
            header => number(header, 1, usize::from(header[0])),
        }
    }

    /// Whether the map is empty.
    ///
    /// ```
    /// assert!(informer::StringMap::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Removes every entry.
    ///
    /// ```
    /// let mut m = informer::StringMap::from([("a", "1")]);
    /// m.clear();
    /// assert!(m.is_empty());
    /// ```
    pub fn clear(&mut self) {
        *self = StringMap::default();
    }

    /// The entries in key order.
    ///
    /// ```
    /// let m = informer::StringMap::from([("b", "2"), ("a", "1")]);
    /// assert_eq!(m.iter().collect::<Vec<_>>(), [("a", "1"), ("b", "2")]);
    /// ```
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            map: self,
            front: 0,
            back: self.len(),
        }
    }

    /// The keys in order.
    ///
    /// ```
    /// let m = informer::StringMap::from([("b", "2"), ("a", "1")]);
    /// assert_eq!(m.keys().collect::<Vec<_>>(), ["a", "b"]);
    /// ```
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.iter().map(|(k, _)| k)
    }

    /// The values in key order.
    ///
    /// ```
    /// let m = informer::StringMap::from([("b", "2"), ("a", "1")]);
    /// assert_eq!(m.values().collect::<Vec<_>>(), ["1", "2"]);
    /// ```
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &str> + ExactSizeIterator {
        self.iter().map(|(_, v)| v)
    }

    /// Builds the map from entries already in strictly increasing key order.
    fn from_sorted<K: AsRef<str>, V: AsRef<str>>(entries: Vec<(K, V)>) -> StringMap {
        let len: usize = entries
            .iter()
            .map(|(k, v)| k.as_ref().len() + v.as_ref().len())
            .sum();
        let mut text = String::with_capacity(len);
        let mut ends = Vec::with_capacity(2 * entries.len());
        for (k, v) in &entries {
            text.push_str(k.as_ref());
            ends.push(offset(text.len()));
            text.push_str(v.as_ref());
            ends.push(offset(text.len()));
        }
        StringMap::pack(&text, &ends)
    }

    /// The map of `text` and `ends` (`ends[2 * i]`: where key `i` ends in `text`, `ends[2 * i + 1]`:
    /// where its value ends), which must already meet the invariants of the layout.
    fn pack(text: &str, ends: &[u32]) -> StringMap {
        if ends.is_empty() {
            return StringMap::default();
        }
        let n = ends.len() / 2;
        let mut w = 1;
        while n.max(text.len()) >> (7 * w) != 0 {
            w += 1;
        }
        let mut data = String::with_capacity(1 + w * (1 + ends.len()) + text.len());
        data.push(char::from(w as u8));
        let mut put = |mut v: usize| {
            for _ in 0..w {
                data.push(char::from((v & 0x7f) as u8));
                v >>= 7;
            }
        };
        put(n);
        for &e in ends {
            put(e as usize);
        }
        data.push_str(text);
        StringMap {
            data: data.into_boxed_str(),
        }
    }

    /// Builds the map from entries in any order; a later entry wins over an earlier one with the
    /// same key (as with repeated `insert`).
    pub(crate) fn from_entries<K: AsRef<str>, V: AsRef<str>>(
        mut entries: Vec<(K, V)>,
    ) -> StringMap {
        // Stable, so among equal keys the last one given is last; keep that one.
        entries.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let mut unique: Vec<(K, V)> = Vec::with_capacity(entries.len());
        for e in entries {
            match unique.last_mut() {
                Some(last) if last.0.as_ref() == e.0.as_ref() => *last = e,
                _ => unique.push(e),
            }
        }
        StringMap::from_sorted(unique)
    }
}

/// The `w`-digit number at `at` in a map's header (see the layout).
fn number(header: &[u8], at: usize, w: usize) -> usize {
    header[at..at + w]
        .iter()
        .rev()
        .fold(0, |v, &digit| v << 7 | usize::from(digit))
}

/// Entry `i` of a text and its ends, as [`StringMap::pack`] takes them.
fn entry<'a>(text: &'a str, ends: &[u32], i: usize) -> (&'a str, &'a str) {
    let start = if i == 0 { 0 } else { ends[2 * i - 1] as usize };
    let key_end = ends[2 * i] as usize;
    let value_end = ends[2 * i + 1] as usize;
    (&text[start..key_end], &text[key_end..value_end])
}

/// An offset into a map's text. Maps come from JSON frames, which are bounded far below 4 GiB;
/// a map built in code past that is a bug worth a panic.
fn offset(n: usize) -> u32 {
    u32::try_from(n).expect("a StringMap holds less than 4 GiB")
}

impl PartialOrd for StringMap {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for StringMap {
    /// Entry by entry, as a `BTreeMap`'s.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.iter().cmp(other.iter())
    }
}

/// Iterator over a [`StringMap`]'s entries in key order.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    map: &'a StringMap,
    front: usize,
    back: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, &'a str);
    fn next(&mut self) -> Option<Self::Item> {
        (self.front < self.back).then(|| {
            self.front += 1;
            self.map.entry(self.front - 1)
        })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            self.map.entry(self.back)
        })
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a StringMap {
    type Item = (&'a str, &'a str);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl IntoIterator for StringMap {
    type Item = (String, String);
    type IntoIter = std::vec::IntoIter<(String, String)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect::<Vec<_>>()
            .into_iter()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for StringMap {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> StringMap {
        StringMap::from_entries(
            iter.into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect::<Vec<(String, String)>>(),
        )
    }
}

impl<K: Into<String>, V: Into<String>> Extend<(K, V)> for StringMap {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        let mut entries: Vec<(String, String)> = std::mem::take(self).into_iter().collect();
        entries.extend(iter.into_iter().map(|(k, v)| (k.into(), v.into())));
        *self = StringMap::from_entries(entries);
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
        StringMap::from_sorted(map.into_iter().collect())
    }
}

impl From<StringMap> for BTreeMap<String, String> {
    fn from(map: StringMap) -> BTreeMap<String, String> {
        map.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

impl std::ops::Index<&str> for StringMap {
    type Output = str;
    /// Panics if `key` is absent, like `BTreeMap`'s.
    fn index(&self, key: &str) -> &str {
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

/// Appends a JSON string to the text being built, without a `String` of its own.
struct AppendStr<'a>(&'a mut String);

impl<'de> DeserializeSeed<'de> for AppendStr<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for AppendStr<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<(), E> {
        self.0.push_str(s);
        Ok(())
    }
}

thread_local! {
    /// The text and ends of the map being decoded, reused so that a decode allocates the map's
    /// one exact-size box and nothing else. Taken out while in use (a nested decode gets fresh
    /// ones), and put back only up to `SCRATCH_KEPT` bytes, so one large map (a ConfigMap's data)
    /// does not stay allocated on the thread.
    static SCRATCH: std::cell::Cell<(String, Vec<u32>)> = const { std::cell::Cell::new((String::new(), Vec::new())) };
}

/// The largest scratch text a thread keeps between decodes.
const SCRATCH_KEPT: usize = 64 << 10;

impl<'de> Deserialize<'de> for StringMap {
    /// A JSON object of strings; `null` reads as empty (Go writes nil maps as `null`). Go writes
    /// its maps in key order, so that case is read straight into place; others are sorted after.
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
                // `try_with`: a decode while the thread's locals are being destroyed gets
                // fresh buffers.
                let (mut text, mut ends) = SCRATCH.try_with(|s| s.take()).unwrap_or_default();
                text.clear();
                ends.clear();
                let read = read_entries(&mut map, &mut text, &mut ends);
                let result = read.map(|sorted| {
                    if sorted {
                        StringMap::pack(&text, &ends)
                    } else {
                        let n = ends.len() / 2;
                        StringMap::from_entries((0..n).map(|i| entry(&text, &ends, i)).collect())
                    }
                });
                if text.capacity() <= SCRATCH_KEPT {
                    let _ = SCRATCH.try_with(|s| s.set((text, ends)));
                }
                result
            }
        }
        d.deserialize_option(MapVisitor)
    }
}

/// Reads a JSON object's entries into `text`/`ends`; returns whether the keys came in strictly
/// increasing order (else the caller sorts them and keeps the last of equal keys).
fn read_entries<'de, A: MapAccess<'de>>(
    map: &mut A,
    text: &mut String,
    ends: &mut Vec<u32>,
) -> Result<bool, A::Error> {
    let mut sorted = true;
    let too_long = || serde::de::Error::custom("a map of strings of 4 GiB or more");
    while map.next_key_seed(AppendStr(text))?.is_some() {
        let key_end = text.len();
        if let Some(&prev_value_end) = ends.last() {
            let (prev_key, _) = entry(text, ends, ends.len() / 2 - 1);
            sorted &= prev_key < &text[prev_value_end as usize..key_end];
        }
        ends.push(u32::try_from(key_end).map_err(|_| too_long())?);
        map.next_value_seed(AppendStr(text))?;
        ends.push(u32::try_from(text.len()).map_err(|_| too_long())?);
    }
    Ok(sorted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_unique_and_the_last_duplicate_wins() {
        let m: StringMap = serde_json::from_str(r#"{"b":"1","a":"2","b":"3"}"#).unwrap();
        assert_eq!(m.iter().collect::<Vec<_>>(), [("a", "2"), ("b", "3")]);
        assert_eq!(&*m.data, "\x01\x02\x01\x02\x03\x04a2b3");
        let n: StringMap = serde_json::from_str("null").unwrap();
        assert!(n.is_empty());
        assert!(serde_json::from_str::<StringMap>(r#"{"a":1}"#).is_err());
    }

    #[test]
    fn escapes_decode_and_maps_compare_entry_by_entry() {
        let m: StringMap = serde_json::from_str(r#"{"a\"b":"\u00e9","c":""}"#).unwrap();
        assert_eq!(m.iter().collect::<Vec<_>>(), [("a\"b", "é"), ("c", "")]);
        assert_eq!(serde_json::to_string(&m).unwrap(), r#"{"a\"b":"é","c":""}"#);
        let empty: StringMap = serde_json::from_str("{}").unwrap();
        assert_eq!(empty.data.len(), 0);
        // Entry by entry, as BTreeMap compares: ("a", "bc") < ("ab", "c") although "abc" == "abc".
        let (x, y) = (
            StringMap::from([("a", "bc")]),
            StringMap::from([("ab", "c")]),
        );
        assert!(x < y);
        assert_ne!(x, y);
        assert_eq!(
            x.cmp(&y),
            BTreeMap::from(x.clone()).cmp(&BTreeMap::from(y.clone()))
        );
    }

    #[test]
    fn a_failed_decode_leaves_nothing_for_the_next() {
        assert!(serde_json::from_str::<StringMap>(r#"{"a":"1","b":2}"#).is_err());
        assert!(serde_json::from_str::<StringMap>(r#"{"z":"1","y":"#).is_err());
        let m: StringMap = serde_json::from_str(r#"{"c":"3"}"#).unwrap();
        assert_eq!(m.iter().collect::<Vec<_>>(), [("c", "3")]);
        let big = format!(r#"{{"k":"{}"}}"#, "v".repeat(SCRATCH_KEPT * 2));
        let m: StringMap = serde_json::from_str(&big).unwrap();
        assert_eq!(m.get("k").map(str::len), Some(SCRATCH_KEPT * 2));
        SCRATCH.with(|s| {
            let (text, ends) = s.take();
            assert!(
                text.capacity() <= SCRATCH_KEPT,
                "a large map's scratch is not kept"
            );
            s.set((text, ends));
        });
    }

    #[test]
    fn wide_texts_and_many_entries_get_wider_headers() {
        for (entries, w) in [(1, 1), (3, 2), (40, 2), (400, 3)] {
            let value = "é".repeat(20);
            let m: StringMap = (0..entries)
                .map(|i| (format!("k{i:04}"), value.clone()))
                .collect();
            assert_eq!((usize::from(m.data.as_bytes()[0]), m.len()), (w, entries));
            assert!(
                m.iter()
                    .enumerate()
                    .all(|(i, (k, v))| k == format!("k{i:04}") && v == value)
            );
            assert_eq!(m.get(&format!("k{:04}", entries - 1)), Some(&*value));
        }
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
        assert!(m.iter().eq(b.iter().map(|(k, v)| (k.as_str(), v.as_str()))));
        assert_eq!(BTreeMap::from(m.clone()), b);
        assert_eq!(StringMap::from(b), m);
    }
}
