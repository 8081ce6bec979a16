//! Store keys, looked up by borrowed `(namespace, name)` without allocating.
//!
//! The hash of a key is computed **once** per lookup with the store's keyed [`KeyHasher`], picks the
//! shard, and is handed to the shard's `hashbrown::HashTable` as is (its `find` takes a precomputed
//! hash and an equality closure, so no owned or joined key is ever built for a lookup). The owned
//! [`StoreKey`] holds a key of up to 37 bytes inline, so a lookup reads one cache line for the
//! key; a table that grows hashes its keys again from their parts.

use std::hash::BuildHasher;
use std::sync::Arc;

/// A keyed hash for store keys: a folded 64x64->128-bit multiply per 8 bytes (the construction of
/// foldhash and wyhash), seeded per store from std's random keys.
///
/// Why not std's SipHash: it costs about as much as the rest of a lookup put together on a ~30-byte
/// key. Why keyed: names are chosen by cluster users; with a secret per-store seed a collision set
/// cannot be precomputed, and the worst an attacker gets is slower lookups in one shard. Not a PRF:
/// do not use it where an attacker can observe hash values.
#[derive(Clone, Copy)]
pub(crate) struct KeyHasher {
    seed: u64,
    mul: u64,
}

impl KeyHasher {
    pub(crate) fn new() -> KeyHasher {
        let r = std::hash::RandomState::new();
        // `| 1` keeps the multiplier odd, so multiplying never loses the low bit's information.
        KeyHasher {
            seed: r.hash_one(0x5eed_u64),
            mul: r.hash_one(0x0dd_u64) ^ 0x9e37_79b9_7f4a_7c15 | 1,
        }
    }

    #[inline]
    fn bytes(&self, mut h: u64, bytes: &[u8]) -> u64 {
        let len = bytes.len();
        let le64 = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let le32 = |i: usize| {
            u64::from(u32::from_le_bytes(
                bytes[i..i + 4].try_into().expect("4 bytes"),
            ))
        };
        // Whole words, then the tail read as one overlapping word (no variable-length copy): the
        // last 8 bytes, or for short inputs the first and last 4, or the first, middle and last byte.
        let tail = if len >= 8 {
            let mut i = 0;
            while i + 8 < len {
                h = folded_mul(h ^ le64(i), self.mul);
                i += 8;
            }
            le64(len - 8)
        } else if len >= 4 {
            le32(0) | (le32(len - 4) << 32)
        } else if len > 0 {
            u64::from(bytes[0]) | u64::from(bytes[len / 2]) << 8 | u64::from(bytes[len - 1]) << 16
        } else {
            0
        };
        // The length goes in with the tail, so inputs whose reads overlap differently still differ.
        folded_mul(h ^ tail, self.mul ^ (len as u64).rotate_left(32))
    }
}

/// The same hash for std's maps of strings (the fifo's pending keys): `str`'s `Hash` writes the
/// bytes and then a `0xff`, each folded in with [`KeyHasher::bytes`].
impl BuildHasher for KeyHasher {
    type Hasher = KeyHasherState;

    fn build_hasher(&self) -> KeyHasherState {
        KeyHasherState {
            hasher: *self,
            h: self.seed,
        }
    }
}

/// The running state of a [`KeyHasher`] hash.
pub(crate) struct KeyHasherState {
    hasher: KeyHasher,
    h: u64,
}

impl std::hash::Hasher for KeyHasherState {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        self.h = self.hasher.bytes(self.h, bytes);
    }

    #[inline]
    fn finish(&self) -> u64 {
        folded_mul(self.h, 0x2d35_8dcc_aa6c_78a5)
    }
}

#[inline]
fn folded_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Hashes `namespace` and `name`; the namespace's length is mixed in, so `("a", "bc")` and
/// `("ab", "c")` hash differently.
#[inline]
pub(crate) fn hash_parts(state: &KeyHasher, namespace: &str, name: &str) -> u64 {
    let h = state.bytes(state.seed, namespace.as_bytes());
    folded_mul(state.bytes(h, name.as_bytes()), 0x2d35_8dcc_aa6c_78a5)
}

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
    fn hash_separates_the_parts() {
        let s = KeyHasher::new();
        assert_ne!(hash_parts(&s, "a", "bc"), hash_parts(&s, "ab", "c"));
        assert_ne!(hash_parts(&s, "", "a"), hash_parts(&s, "", "a\0"));
        // Every length takes a different tail path; all prefixes of a string hash apart.
        let text = "abcdefghijklmnopqrstuvwxyz0123456789";
        let prefixes: std::collections::HashSet<u64> = (0..=text.len())
            .map(|n| hash_parts(&s, "ns", &text[..n]))
            .collect();
        assert_eq!(prefixes.len(), text.len() + 1);
        assert_ne!(
            hash_parts(&s, "ns", "pod-abcdefgh1"),
            hash_parts(&s, "ns", "pod-abcdefgh2")
        );
        assert_ne!(
            hash_parts(&s, "ns", "a"),
            hash_parts(&KeyHasher::new(), "ns", "a")
        );
        // Low bits (bucket index) and bits 32.. (shard) both vary over similar names.
        let hs: std::collections::HashSet<u64> = (0..256)
            .map(|i| hash_parts(&s, "ns", &format!("pod-{i}")) & 0xff)
            .collect();
        assert!(hs.len() > 120, "{}", hs.len());
        let shards: std::collections::HashSet<u64> = (0..256)
            .map(|i| (hash_parts(&s, "ns", &format!("pod-{i}")) >> 32) & 63)
            .collect();
        assert!(shards.len() > 50, "{}", shards.len());
    }

    #[test]
    fn split_follows_strings_cut() {
        assert_eq!(split_key("a"), ("", "a"));
        assert_eq!(split_key("ns/a"), ("ns", "a"));
        assert_eq!(split_key("ns/a/b"), ("ns", "a/b"));
    }
}
