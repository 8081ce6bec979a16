//! Store keys that can be looked up by borrowed `(namespace, name)` without allocating.
//!
//! std's `HashMap::get` needs a `Q` with `K: Borrow<Q>` whose `Hash`/`Eq` agree with `K`'s. A
//! `(&str, &str)` pair cannot be borrowed out of an owned key, so we borrow both as a trait object,
//! `dyn KeyView`, whose `Hash` and `Eq` look only at (hash, namespace, name).
//!
//! The hash of a key is computed **once**, with the store's keyed SipHash (`RandomState`, so names
//! chosen by cluster users cannot force collisions), and stored in the key. The maps then use
//! [`PassThroughHasher`], which hands that precomputed value to hashbrown unchanged, so a lookup
//! hashes its strings exactly once even though it also picks a shard.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

/// Hashes `namespace` and `name` with `state`. `0xff` never occurs in UTF-8, so it separates the two
/// parts unambiguously (`("a", "bc")` and `("ab", "c")` hash differently).
pub(crate) fn hash_parts(state: &impl BuildHasher, namespace: &str, name: &str) -> u64 {
    let mut h = state.build_hasher();
    h.write(namespace.as_bytes());
    h.write_u8(0xff);
    h.write(name.as_bytes());
    h.finish()
}

/// Splits a cache key into `(namespace, name)` like client-go's `SplitMetaNamespaceKey` with
/// `strings.Cut`: no `/` means cluster-scoped; any further `/` stays in the name.
pub(crate) fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

/// What a lookup compares: the precomputed hash and the two parts of the key.
pub(crate) trait KeyView {
    fn hash_value(&self) -> u64;
    fn namespace(&self) -> &str;
    fn name(&self) -> &str;
}

impl Hash for dyn KeyView + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash_value());
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.hash_value() == other.hash_value()
            && self.name() == other.name()
            && self.namespace() == other.namespace()
    }
}

impl Eq for dyn KeyView + '_ {}

/// A borrowed key, built on the stack for a lookup.
pub(crate) struct Lookup<'a> {
    pub(crate) namespace: &'a str,
    pub(crate) name: &'a str,
    pub(crate) hash: u64,
}

impl KeyView for Lookup<'_> {
    fn hash_value(&self) -> u64 {
        self.hash
    }
    fn namespace(&self) -> &str {
        self.namespace
    }
    fn name(&self) -> &str {
        self.name
    }
}

/// An owned key: the full `namespace/name` string (shared with the index buckets), where the name
/// starts, and the precomputed hash.
#[derive(Clone, Debug)]
pub(crate) struct StoreKey {
    full: Arc<str>,
    name_start: usize,
    hash: u64,
}

impl StoreKey {
    pub(crate) fn new(namespace: &str, name: &str, hash: u64) -> StoreKey {
        if namespace.is_empty() {
            StoreKey {
                full: name.into(),
                name_start: 0,
                hash,
            }
        } else {
            let full: Arc<str> = format!("{namespace}/{name}").into();
            StoreKey {
                full,
                name_start: namespace.len() + 1,
                hash,
            }
        }
    }

    /// The `namespace/name` (or `name`) form.
    pub(crate) fn full(&self) -> &Arc<str> {
        &self.full
    }
}

impl KeyView for StoreKey {
    fn hash_value(&self) -> u64 {
        self.hash
    }
    fn namespace(&self) -> &str {
        &self.full[..self.name_start.saturating_sub(1)]
    }
    fn name(&self) -> &str {
        &self.full[self.name_start..]
    }
}

impl Hash for StoreKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Must agree with `dyn KeyView`'s `Hash`, as `Borrow` requires.
        state.write_u64(self.hash);
    }
}

impl PartialEq for StoreKey {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.full == other.full
    }
}

impl Eq for StoreKey {}

impl<'a> Borrow<dyn KeyView + 'a> for StoreKey {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

/// A hasher that passes a precomputed `u64` through. Only `write_u64` is ever called on it by the
/// `Hash` impls above; `write` folds bytes in as a fallback so it stays a valid `Hasher`.
#[derive(Default)]
pub(crate) struct PassThroughHasher(u64);

impl Hasher for PassThroughHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ u64::from(b)).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// `BuildHasher` for [`PassThroughHasher`].
pub(crate) type PassThrough = std::hash::BuildHasherDefault<PassThroughHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::hash::RandomState;

    #[test]
    fn borrowed_lookup_finds_owned_key() {
        let s = RandomState::new();
        let mut m: HashMap<StoreKey, u32, PassThrough> = HashMap::default();
        m.insert(StoreKey::new("ns", "a", hash_parts(&s, "ns", "a")), 1);
        m.insert(StoreKey::new("", "node1", hash_parts(&s, "", "node1")), 2);
        let q = Lookup {
            namespace: "ns",
            name: "a",
            hash: hash_parts(&s, "ns", "a"),
        };
        assert_eq!(m.get(&q as &dyn KeyView), Some(&1));
        let q = Lookup {
            namespace: "",
            name: "node1",
            hash: hash_parts(&s, "", "node1"),
        };
        assert_eq!(m.get(&q as &dyn KeyView), Some(&2));
        let q = Lookup {
            namespace: "n",
            name: "sa",
            hash: hash_parts(&s, "n", "sa"),
        };
        assert_eq!(m.get(&q as &dyn KeyView), None);
    }

    #[test]
    fn split_follows_strings_cut() {
        assert_eq!(split_key("a"), ("", "a"));
        assert_eq!(split_key("ns/a"), ("ns", "a"));
        assert_eq!(split_key("ns/a/b"), ("ns", "a/b"));
    }
}
