//! Store keys, looked up by borrowed `(namespace, name)` without allocating.
//!
//! The hash of a key is computed **once** per lookup with the store's keyed
//! [`KeyHasher`](crate::key_hash::KeyHasher), picks the
//! shard, and is handed to the shard's `hashbrown::HashTable` as is (its `find` takes a precomputed
//! hash and an equality closure, so no owned or joined key is ever built for a lookup). The owned
//! [`StoreKey`] holds a key of up to 37 bytes inline, so a lookup reads one cache line for the
//! key; a table that grows hashes its keys again from their parts.

use std::sync::Arc;

/// Splits a cache key into `(namespace, name)` like client-go's `SplitMetaNamespaceKey` with
/// `strings.Cut`: no `/` means cluster-scoped; any further `/` stays in the name.
pub(crate) fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').unwrap_or(("", key))
}

/// Longest key kept inside the table entry: `kube-system/coredns-5d78c9869d-abcde` (36 bytes) fits.
const INLINE: usize = 37;

/// An owned key: the full `namespace/name` (or `name`) and where the name starts.
///
/// A key of up to [`INLINE`] bytes sits inside the table entry, so a lookup compares it without
/// reading another cache line; a longer one is an `Arc<str>`, shared with the index buckets.
/// Measured on 10k Endpoints keys, a key in its own allocation cost a lookup more than the rest
/// of it put together; on 20k Pods (34-byte keys), a lookup that skips that read took ~140 ns at
/// the median instead of ~175. The hash is not kept: a table recomputes it from the parts when
/// it grows, and the table's tag byte already filters the compares.
///
/// Keys compare, and sort in the index buckets, by their bytes (as `str`s do).
#[derive(Clone)]
pub(crate) enum StoreKey {
    Inline {
        len: u8,
        name_start: u8,
        bytes: [u8; INLINE],
    },
    Shared {
        name_start: usize,
        full: Arc<str>,
    },
}

impl StoreKey {
    pub(crate) fn new(namespace: &str, name: &str) -> StoreKey {
        let name_start = if namespace.is_empty() {
            0
        } else {
            namespace.len() + 1
        };
        let len = name_start + name.len();
        if len <= INLINE {
            let mut bytes = [0; INLINE];
            if name_start > 0 {
                bytes[..namespace.len()].copy_from_slice(namespace.as_bytes());
                bytes[namespace.len()] = b'/';
            }
            bytes[name_start..len].copy_from_slice(name.as_bytes());
            // Both fit in a u8: they are at most INLINE.
            StoreKey::Inline {
                len: len as u8,
                name_start: name_start as u8,
                bytes,
            }
        } else {
            let full = if name_start == 0 {
                Arc::from(name)
            } else {
                Arc::from(format!("{namespace}/{name}"))
            };
            StoreKey::Shared { name_start, full }
        }
    }

    /// The `namespace/name` (or `name`) form, as bytes.
    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            StoreKey::Inline { len, bytes, .. } => &bytes[..usize::from(*len)],
            StoreKey::Shared { full, .. } => full.as_bytes(),
        }
    }

    fn name_start(&self) -> usize {
        match self {
            StoreKey::Inline { name_start, .. } => usize::from(*name_start),
            StoreKey::Shared { name_start, .. } => *name_start,
        }
    }

    /// The `namespace/name` (or `name`) form.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            StoreKey::Inline { .. } => {
                std::str::from_utf8(self.bytes()).expect("a key is built from two strs")
            }
            StoreKey::Shared { full, .. } => full,
        }
    }

    /// The namespace part (empty for cluster-scoped objects).
    pub(crate) fn namespace(&self) -> &str {
        &self.as_str()[..self.name_start().saturating_sub(1)]
    }

    /// The name part.
    pub(crate) fn name(&self) -> &str {
        &self.as_str()[self.name_start()..]
    }

    /// Whether this is the key `(namespace, name)`.
    #[inline]
    pub(crate) fn is(&self, namespace: &str, name: &str) -> bool {
        // Bytes, not `str` slices: no char-boundary checks on the lookup path.
        let (full, name_start) = (self.bytes(), self.name_start());
        full.len() == name_start + name.len()
            && &full[name_start..] == name.as_bytes()
            && &full[..name_start.saturating_sub(1)] == namespace.as_bytes()
    }
}

impl PartialEq for StoreKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for StoreKey {}

impl PartialOrd for StoreKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for StoreKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.bytes().cmp(other.bytes())
    }
}

impl std::fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_parts() {
        for (ns, name, full) in [
            ("ns", "a", "ns/a"),
            ("", "node1", "node1"),
            ("kube-system", "coredns-5d78c9869d-abcdefghijklmnopqrst", ""),
            ("", &"n".repeat(INLINE + 1), ""),
            ("ns", &"n".repeat(INLINE - 3), ""),
            ("ns", &"n".repeat(INLINE - 2), ""),
        ] {
            let k = StoreKey::new(ns, name);
            let full = if full.is_empty() && ns.is_empty() {
                name.to_string()
            } else if full.is_empty() {
                format!("{ns}/{name}")
            } else {
                full.to_string()
            };
            assert_eq!((k.namespace(), k.name(), k.as_str()), (ns, name, &*full));
            assert_eq!(matches!(k, StoreKey::Inline { .. }), full.len() <= INLINE);
            assert!(k.is(ns, name));
            assert!(!k.is("n", "sa") && !k.is(ns, "b"));
            // A namespaced key is not the cluster-scoped name "ns/name".
            assert_eq!(k.is("", &full), ns.is_empty());
            assert_eq!(k, k.clone());
        }
        assert!(StoreKey::new("a", "b") < StoreKey::new("a", "c"));
        assert!(
            StoreKey::new("a", "z")
                < StoreKey::new("a", &"c".repeat(INLINE)).max(StoreKey::new("b", "a"))
        );
        assert_eq!(std::mem::size_of::<StoreKey>(), 40);
    }

    #[test]
    fn split_follows_strings_cut() {
        assert_eq!(split_key("a"), ("", "a"));
        assert_eq!(split_key("ns/a"), ("ns", "a"));
        assert_eq!(split_key("ns/a/b"), ("ns", "a/b"));
    }
}
