//! Classifying 64 bytes at a time: where the quotes, backslashes and brackets are, which quotes are
//! escaped, and which bytes are inside strings (the idea of simdjson's first stage, in portable Rust).
//!
//! Each byte class becomes a 64-bit mask (bit *i* for byte *i*), computed with comparisons the
//! compiler vectorizes: no `unsafe`, no target features, and several times faster than jumping from
//! token to token with `memchr` on compact JSON, where a quote comes every few bytes.
//!
//! The escaping rule, shared with the byte-at-a-time tail in the parent module so that every way of
//! cutting a stream gives the same frames: a byte is *escaped* when an odd-length run of backslashes
//! precedes it. An escaped quote does not open or close a string; brackets are counted outside strings
//! whether or not they are escaped (a backslash outside a string is invalid JSON anyway, and the
//! parser reports it).

/// Packs 64 flags (each byte 0 or 1) into a mask, eight at a time: the multiplication moves the
/// flag of byte *k* of a word to bit 56 + *k*, where the shift picks the eight of them up.
#[inline(always)]
fn pack(flags: &[u8; 64]) -> u64 {
    let mut mask = 0u64;
    for (i, word) in flags.chunks_exact(8).enumerate() {
        let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
        mask |= (w.wrapping_mul(0x0102_0408_1020_4080) >> 56) << (i * 8);
    }
    mask
}

/// The masks of one block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Masks {
    pub quote: u64,
    pub backslash: u64,
    pub open: u64,
    pub close: u64,
}

/// The masks of `block` for `"`, `\\`, `open` and `close`.
///
/// Written as plain byte comparisons into flag arrays, which the compiler turns into vector
/// compares (16 bytes per instruction with the baseline SSE2 of x86-64); only the packing into bits
/// is done by hand.
#[inline]
pub(super) fn masks(block: &[u8; 64], open: u8, close: u8) -> Masks {
    let (mut quote, mut backslash) = ([0u8; 64], [0u8; 64]);
    let (mut opens, mut closes) = ([0u8; 64], [0u8; 64]);
    for (i, &b) in block.iter().enumerate() {
        quote[i] = u8::from(b == b'"');
        backslash[i] = u8::from(b == b'\\');
        opens[i] = u8::from(b == open);
        closes[i] = u8::from(b == close);
    }
    Masks {
        quote: pack(&quote),
        backslash: pack(&backslash),
        open: pack(&opens),
        close: pack(&closes),
    }
}

/// The bytes escaped by a preceding odd run of backslashes. `carry` says on entry whether byte 0 is
/// escaped (the previous block ended in an odd run), and on exit whether the next block's byte 0 is.
#[inline]
pub(super) fn escaped(backslash: u64, carry: &mut bool) -> u64 {
    let mut escaped = 0u64;
    let mut rest = backslash;
    if std::mem::take(carry) {
        escaped |= 1;
        rest &= !1; // an escaped backslash escapes nothing
    }
    // Backslashes are rare (managedFields keys, escaped quotes in strings): walk their runs.
    while rest != 0 {
        let start = rest.trailing_zeros();
        let run = (!(rest >> start)).trailing_zeros(); // consecutive backslashes from `start`
        let end = start + run;
        if run % 2 == 1 {
            if end < 64 {
                escaped |= 1 << end;
            } else {
                *carry = true;
            }
        }
        rest &= !((((1u128 << run) - 1) << start) as u64);
    }
    escaped
}

/// Bit *i* is the XOR of bits `0..=i`: turns quote positions into "inside a string" runs.
#[inline(always)]
pub(super) fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// The brackets of one block that are outside strings, as `(open, close)` masks. Updates the
/// carried escape and in-string state to the end of the block.
#[inline]
pub(super) fn brackets(
    block: &[u8; 64],
    open: u8,
    close: u8,
    escape: &mut bool,
    in_string: &mut bool,
) -> (u64, u64) {
    let m = masks(block, open, close);
    let esc = if m.backslash == 0 && !*escape {
        0
    } else {
        escaped(m.backslash, escape)
    };
    let quotes = m.quote & !esc;
    let inside = prefix_xor(quotes) ^ if *in_string { u64::MAX } else { 0 };
    *in_string = inside >> 63 == 1;
    (m.open & !inside, m.close & !inside)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(block: &[u8; 64], c: u8) -> u64 {
        block
            .iter()
            .enumerate()
            .fold(0, |m, (i, &b)| if b == c { m | 1 << i } else { m })
    }

    #[test]
    fn masks_match_a_byte_loop_for_every_byte_value() {
        let mut block = [0u8; 64];
        for start in 0..=255u8 {
            for (i, b) in block.iter_mut().enumerate() {
                *b = start.wrapping_add((i * 37) as u8);
            }
            let m = masks(&block, b'{', b'}');
            assert_eq!(m.quote, naive(&block, b'"'));
            assert_eq!(m.backslash, naive(&block, b'\\'));
            assert_eq!(m.open, naive(&block, b'{'));
            assert_eq!(m.close, naive(&block, b'}'));
        }
    }

    #[test]
    fn escapes_follow_odd_runs_and_carry_across_blocks() {
        // `\"` escapes, `\\"` does not, `\\\"` does.
        let mut block = [b' '; 64];
        block[..13].copy_from_slice(br#"\"a\\"b\\\"c\"#);
        let mut carry = false;
        let esc = escaped(naive(&block, b'\\'), &mut carry);
        assert_eq!(esc, 1 << 1 | 1 << 10 | 1 << 13);
        assert!(!carry);
        block[63] = b'\\';
        block[62] = b' ';
        let esc = escaped(naive(&block, b'\\'), &mut carry);
        assert!(
            carry,
            "an odd run at the end escapes the next block's first byte"
        );
        assert_eq!(esc & 1 << 63, 0);
        let esc = escaped(u64::MAX, &mut carry);
        assert_eq!(esc, 1, "the carried escape consumes the first backslash");
        assert!(carry, "63 more backslashes: an odd run");
    }

    #[test]
    fn prefix_xor_marks_string_interiors() {
        // quotes at 1, 4 and 7: inside from 1 to 3, and from 7 on (the string is still open)
        assert_eq!(prefix_xor(0b1001_0010), u64::MAX << 7 | 0b1110);
    }
}
