//! Classifying 64 bytes at a time: where the quotes, backslashes, brackets and newlines are, which
//! quotes are escaped, and which bytes are inside strings (the idea of simdjson's first stage, in Rust).
//!
//! Each byte class becomes a 64-bit mask (bit *i* for byte *i*). On x86-64 the masks come from SSE2
//! (16 byte compares and one `pmovmskb` per 16 bytes); elsewhere from plain comparisons the compiler
//! vectorizes, packed into bits by multiplication. Both give the same masks (tested on every byte
//! value), and both are several times faster than jumping from token to token with `memchr` on compact
//! JSON, where a quote comes every few bytes.
//!
//! The escaping rule, shared with the byte-at-a-time tail in the parent module so that every way of
//! cutting a stream gives the same frames: a byte is *escaped* when an odd-length run of backslashes
//! precedes it. An escaped quote does not open or close a string; brackets are counted outside strings
//! whether or not they are escaped (a backslash outside a string is invalid JSON anyway, and the
//! parser reports it).
//!
//! A raw newline inside a string (escaped or not) ends the value as malformed: JSON forbids raw
//! control characters in strings, and the apiserver ends every event with a newline, so a string
//! still open at the end of its line is one that will never close (see the parent module).

/// Packs 64 flags (each byte 0 or 1) into a mask, eight at a time: the multiplication moves the
/// flag of byte *k* of a word to bit 56 + *k*, where the shift picks the eight of them up.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
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
    pub newline: u64,
}

/// The masks of `block` for `"`, `\\`, `open`, `close` and `\n`.
#[inline(always)]
pub(super) fn masks(block: &[u8; 64], open: u8, close: u8) -> Masks {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SAFETY: `masks_sse2` only requires the SSE2 target feature, and the `cfg` above admits
        // this call only when SSE2 is enabled at compile time (it is part of the x86-64 baseline,
        // so every x86-64 build takes this path). The function has no other precondition: it reads
        // the block through safe slice indexing.
        unsafe { masks_sse2(block, open, close) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        masks_portable(block, open, close)
    }
}

/// SSE2: per 16 bytes, one load, five byte compares and five `pmovmskb`, which move the compare
/// results' top bits straight into a mask. Measured by `cargo bench --bench frames` (framing) at
/// about 1.5x the throughput of [`masks_portable`] on this crate's streams.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
#[inline]
fn masks_sse2(block: &[u8; 64], open: u8, close: u8) -> Masks {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set_epi64x, _mm_set1_epi8};

    let [quote_v, backslash_v, open_v, close_v, newline_v] =
        [b'"', b'\\', open, close, b'\n'].map(|c| _mm_set1_epi8(c as i8));
    let mut m = Masks::default();
    for (i, lane) in block.chunks_exact(16).enumerate() {
        // Two 8-byte halves: the compiler fuses them into one unaligned 16-byte load (`movdqu`)
        // without an `unsafe` pointer read.
        let lo = u64::from_le_bytes(lane[..8].try_into().expect("8 bytes"));
        let hi = u64::from_le_bytes(lane[8..].try_into().expect("8 bytes"));
        let v = _mm_set_epi64x(hi as i64, lo as i64);
        let bits = |c| u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, c)) as u16) << (i * 16);
        m.quote |= bits(quote_v);
        m.backslash |= bits(backslash_v);
        m.open |= bits(open_v);
        m.close |= bits(close_v);
        m.newline |= bits(newline_v);
    }
    m
}

/// Portable: byte comparisons into flag arrays, which the compiler turns into vector compares; only
/// the packing into bits is done by hand.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
#[inline]
fn masks_portable(block: &[u8; 64], open: u8, close: u8) -> Masks {
    let (mut quote, mut backslash) = ([0u8; 64], [0u8; 64]);
    let (mut opens, mut closes, mut newlines) = ([0u8; 64], [0u8; 64], [0u8; 64]);
    for (i, &b) in block.iter().enumerate() {
        quote[i] = u8::from(b == b'"');
        backslash[i] = u8::from(b == b'\\');
        opens[i] = u8::from(b == open);
        closes[i] = u8::from(b == close);
        newlines[i] = u8::from(b == b'\n');
    }
    Masks {
        quote: pack(&quote),
        backslash: pack(&backslash),
        open: pack(&opens),
        close: pack(&closes),
        newline: pack(&newlines),
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

/// The brackets of one block that are outside strings, as `(open, close)` masks, and the raw
/// newlines inside strings. Updates the carried escape and in-string state to the end of the block.
#[inline(always)]
fn brackets(
    block: &[u8; 64],
    open: u8,
    close: u8,
    escape: &mut bool,
    in_string: &mut bool,
) -> (u64, u64, u64) {
    let m = masks(block, open, close);
    let esc = if m.backslash == 0 && !*escape {
        0
    } else {
        escaped(m.backslash, escape)
    };
    let quotes = m.quote & !esc;
    let inside = prefix_xor(quotes) ^ if *in_string { u64::MAX } else { 0 };
    *in_string = inside >> 63 == 1;
    (m.open & !inside, m.close & !inside, m.newline & inside)
}

/// Where the block scan stopped inside a container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stop {
    /// The container closed; its end (exclusive).
    Closed(usize),
    /// A raw newline inside a string, at this index: the value is malformed and ends there.
    RawNewline(usize),
}

/// Scans the whole 64-byte blocks of `buf` from `i` for the end of a container whose `depth`
/// open brackets (of kind `open`/`close`) are pending, carrying the escape and in-string state.
/// Returns where the blocks stop (the caller scans the shorter tail byte by byte) and, if the
/// container closes within them or a string in it meets a raw newline first, where.
///
/// Counting brackets per block needs a population count, which x86-64's baseline lacks: the
/// software fallback took half of the scan's time. So the loop is compiled twice, once with the
/// `popcnt` instruction, chosen at run time (the detection is a cached load).
#[inline]
pub(super) fn scan_blocks(
    buf: &[u8],
    i: usize,
    open: u8,
    close: u8,
    depth: &mut u32,
    escape: &mut bool,
    in_string: &mut bool,
) -> (usize, Option<Stop>) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("popcnt") {
        // SAFETY: `scan_blocks_popcnt` only requires the `popcnt` target feature, which was just
        // detected on the running CPU; it has no other precondition (safe slice indexing only).
        return unsafe { scan_blocks_popcnt(buf, i, open, close, depth, escape, in_string) };
    }
    scan_blocks_with(buf, i, open, close, depth, escape, in_string)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn scan_blocks_popcnt(
    buf: &[u8],
    i: usize,
    open: u8,
    close: u8,
    depth: &mut u32,
    escape: &mut bool,
    in_string: &mut bool,
) -> (usize, Option<Stop>) {
    scan_blocks_with(buf, i, open, close, depth, escape, in_string)
}

#[inline(always)]
fn scan_blocks_with(
    buf: &[u8],
    mut i: usize,
    open: u8,
    close: u8,
    depth: &mut u32,
    escape: &mut bool,
    in_string: &mut bool,
) -> (usize, Option<Stop>) {
    while i + 64 <= buf.len() {
        let chunk: &[u8; 64] = buf[i..i + 64].try_into().expect("64 bytes");
        let (mut opens, mut closes, raw_newlines) = brackets(chunk, open, close, escape, in_string);
        if raw_newlines != 0 {
            // Only the brackets before the first raw newline count: the value either closes
            // before it or ends there, malformed.
            let first = raw_newlines.trailing_zeros();
            let before = (1u64 << first) - 1;
            (opens, closes) = (opens & before, closes & before);
            let mut brackets = opens | closes;
            while brackets != 0 {
                let bit = brackets.trailing_zeros();
                if opens >> bit & 1 == 1 {
                    *depth += 1;
                } else {
                    *depth -= 1;
                    if *depth == 0 {
                        return (i, Some(Stop::Closed(i + bit as usize + 1)));
                    }
                }
                brackets &= brackets - 1;
            }
            return (i, Some(Stop::RawNewline(i + first as usize)));
        }
        let (n_open, n_close) = (opens.count_ones(), closes.count_ones());
        if n_close < *depth {
            // The value cannot end in this block: just count.
            *depth = *depth + n_open - n_close;
        } else {
            // It may: follow the brackets in order.
            let mut brackets = opens | closes;
            while brackets != 0 {
                let bit = brackets.trailing_zeros();
                if opens >> bit & 1 == 1 {
                    *depth += 1;
                } else {
                    *depth -= 1;
                    if *depth == 0 {
                        return (i, Some(Stop::Closed(i + bit as usize + 1)));
                    }
                }
                brackets &= brackets - 1;
            }
        }
        i += 64;
    }
    (i, None)
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
            for (open, close) in [(b'{', b'}'), (b'[', b']')] {
                let m = masks(&block, open, close);
                assert_eq!(m.quote, naive(&block, b'"'));
                assert_eq!(m.backslash, naive(&block, b'\\'));
                assert_eq!(m.open, naive(&block, open));
                assert_eq!(m.close, naive(&block, close));
                assert_eq!(m.newline, naive(&block, b'\n'));
                assert_eq!(masks_portable(&block, open, close), m);
            }
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
