//! The keyed hash of the store's keys and the fifo's pending keys (crate-private; no imports from
//! the crate).
//!
//! [`hash_parts`] hashes a `(namespace, name)` key from its two parts, so the store looks one up
//! without joining them; [`KeyHasher`] as a `BuildHasher` hashes a joined key (`str`'s `Hash`) with
//! the same function, for std's maps. Each `KeyHasher::new()` draws a fresh secret seed.

use std::hash::BuildHasher;

/// A keyed hash for store keys and the fifo's pending keys: a folded 64x64->128-bit multiply per 8
/// bytes (the construction of foldhash and wyhash), seeded per store (and per fifo) from std's
/// random keys.
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
        // Under loom, one fixed seed: a model is run many times and must take the same steps
        // each time, so a key must land in the same shard in every run.
        #[cfg(informer_loom)]
        let r = std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default();
        #[cfg(not(informer_loom))]
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
