//! Bit-level operations on byte strings: the algorithms behind SETBIT/GETBIT, BITCOUNT, BITPOS,
//! BITOP and BITFIELD (Redis's bitops.c), independent of the keyspace.
//!
//! Bit numbering is Redis's: bit 0 is the most significant bit of byte 0, so bit `n` lives in byte
//! `n / 8` at mask `0x80 >> (n % 8)`. Bytes beyond the end of a string read as zero.
//!
//! The bulk paths (counting, searching, combining) work a 64-bit word at a time: `count_ones` on
//! whole words for BITCOUNT, whole-word skips for BITPOS, and word-wide AND/OR/XOR/NOT for BITOP,
//! with a byte loop only for the unaligned head and tail.

/// Number of set bits in `bytes`.
pub fn popcount(bytes: &[u8]) -> u64 {
    let mut chunks = bytes.chunks_exact(32);
    let mut n = 0u64;
    for c in &mut chunks {
        let w = |i: usize| u64::from_ne_bytes(c[i..i + 8].try_into().expect("8 bytes"));
        n += u64::from(w(0).count_ones())
            + u64::from(w(8).count_ones())
            + u64::from(w(16).count_ones())
            + u64::from(w(24).count_ones());
    }
    let mut words = chunks.remainder().chunks_exact(8);
    for c in &mut words {
        n += u64::from(u64::from_ne_bytes(c.try_into().expect("8 bytes")).count_ones());
    }
    for &b in words.remainder() {
        n += u64::from(b.count_ones());
    }
    n
}

/// Number of set bits among bits `first..=last` of `s` (bit positions; both within the string).
pub fn count_bits(s: &[u8], first: u64, last: u64) -> u64 {
    if first > last {
        return 0;
    }
    let (b0, b1) = ((first / 8) as usize, (last / 8) as usize);
    let mut n = popcount(&s[b0..=b1]);
    // Take off the bits of the edge bytes that lie outside the range.
    let head = !(0xFFu8 >> (first % 8));
    let tail = (0xFFu16 >> (last % 8 + 1)) as u8;
    n -= u64::from((s[b0] & head).count_ones());
    n -= u64::from((s[b1] & tail).count_ones());
    n
}

/// The value of bit `n` of `s` (0 beyond the end).
pub fn get_bit(s: &[u8], n: u64) -> bool {
    let byte = n / 8;
    match usize::try_from(byte).ok().and_then(|b| s.get(b)) {
        Some(v) => v & (0x80 >> (n % 8)) != 0,
        None => false,
    }
}

/// Sets bit `n` of `s` (which must be long enough) to `on`; returns the previous value.
pub fn set_bit(s: &mut [u8], n: u64, on: bool) -> bool {
    let byte = &mut s[(n / 8) as usize];
    let mask = 0x80u8 >> (n % 8);
    let old = *byte & mask != 0;
    if on {
        *byte |= mask;
    } else {
        *byte &= !mask;
    }
    old
}

/// The position of the first bit equal to `bit` among bits `first..=last` of `s` (both within
/// the string), or None.
pub fn find_bit(s: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    if first > last {
        return None;
    }
    // A byte with no bit of interest reads as 0 after this transform.
    let want = |b: u8| if bit { b } else { !b };
    let (b0, b1) = ((first / 8) as usize, (last / 8) as usize);
    let head = 0xFFu8 >> (first % 8);
    let tail = !((0xFFu16 >> (last % 8 + 1)) as u8);
    let first_byte = |i: usize, v: u8| -> Option<u64> {
        let mut m = want(v);
        if i == b0 {
            m &= head;
        }
        if i == b1 {
            m &= tail;
        }
        (m != 0).then(|| i as u64 * 8 + u64::from(m.leading_zeros()))
    };
    if let Some(p) = first_byte(b0, s[b0]) {
        return Some(p);
    }
    if b0 == b1 {
        return None;
    }
    // Whole bytes between the edges, skipping uninteresting 64-bit words.
    let mut i = b0 + 1;
    while i < b1 {
        if i % 8 == 0 && i + 8 <= b1 {
            let w = u64::from_be_bytes(s[i..i + 8].try_into().expect("8 bytes"));
            let w = if bit { w } else { !w };
            if w == 0 {
                i += 8;
                continue;
            }
            return Some(i as u64 * 8 + u64::from(w.leading_zeros()));
        }
        let m = want(s[i]);
        if m != 0 {
            return Some(i as u64 * 8 + u64::from(m.leading_zeros()));
        }
        i += 1;
    }
    first_byte(b1, s[b1])
}

/// A BITOP operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

/// The result of BITOP `op` over `srcs` (missing bytes of shorter strings read as zero): as long as
/// the longest source. NOT takes exactly one source.
pub fn bitop(op: BitOp, srcs: &[&[u8]]) -> Vec<u8> {
    let Some((first, rest)) = srcs.split_first() else {
        return Vec::new();
    };
    let maxlen = srcs.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut acc = Vec::with_capacity(maxlen);
    acc.extend_from_slice(first);
    if op == BitOp::Not {
        not(&mut acc);
    }
    for src in rest {
        fold(op, &mut acc, src);
    }
    acc
}

/// Folds one more source into a BITOP AND/OR/XOR result, in place: `acc` becomes `acc op src`,
/// as long as the longer of the two (the missing bytes of the shorter read as zero). The operations
/// are associative and commutative and zero-padding is the same everywhere, so partial results
/// (one per shard) fold together into the result of the whole command.
pub fn fold(op: BitOp, acc: &mut Vec<u8>, src: &[u8]) {
    if src.len() > acc.len() {
        acc.resize(src.len(), 0);
    }
    let (head, tail) = acc.split_at_mut(src.len());
    match op {
        BitOp::And => {
            apply(head, src, |a, b| a & b);
            tail.fill(0);
        }
        BitOp::Or => apply(head, src, |a, b| a | b),
        BitOp::Xor => apply(head, src, |a, b| a ^ b),
        BitOp::Not => unreachable!("BITOP NOT has one source: use not()"),
    }
}

/// BITOP NOT, in place.
pub fn not(v: &mut [u8]) {
    apply(v, &[], |a, _| !a);
}

/// `dst[i] = f(dst[i], src[i])`, a 64-bit word at a time (`src` empty: `f(dst[i], 0)`; otherwise
/// as long as `dst`). Written as zipped fixed-size chunks so the compiler vectorizes it: a BITOP
/// over 512 MB runs at memory speed.
fn apply(dst: &mut [u8], src: &[u8], f: impl Fn(u64, u64) -> u64) {
    assert!(
        src.is_empty() || src.len() == dst.len(),
        "apply: unequal lengths"
    );
    let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().expect("8 bytes"));
    let mut d = dst.chunks_exact_mut(8);
    if src.is_empty() {
        for dw in &mut d {
            dw.copy_from_slice(&f(word(dw), 0).to_ne_bytes());
        }
        for b in d.into_remainder() {
            *b = f(u64::from(*b), 0) as u8;
        }
        return;
    }
    let mut s = src.chunks_exact(8);
    for (dw, sw) in (&mut d).zip(&mut s) {
        dw.copy_from_slice(&f(word(dw), word(sw)).to_ne_bytes());
    }
    for (b, &x) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *b = f(u64::from(*b), u64::from(x)) as u8;
    }
}

/// The `bits`-wide (1..=64) unsigned field at bit `offset` of `s`, most significant bit first;
/// bits beyond the end read as zero.
pub fn get_unsigned(s: &[u8], offset: u64, bits: u32) -> u64 {
    let mut v = 0u64;
    for j in 0..u64::from(bits) {
        v = (v << 1) | u64::from(get_bit(s, offset + j));
    }
    v
}

/// The `bits`-wide two's-complement field at bit `offset` of `s`.
pub fn get_signed(s: &[u8], offset: u64, bits: u32) -> i64 {
    let v = get_unsigned(s, offset, bits);
    if bits < 64 && v & (1 << (bits - 1)) != 0 {
        (v | (u64::MAX << bits)) as i64
    } else {
        v as i64
    }
}

/// Writes the low `bits` bits of `value` at bit `offset` of `s` (which must be long enough).
pub fn set_field(s: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..u64::from(bits) {
        let on = value & (1u64 << (u64::from(bits) - 1 - j)) != 0;
        set_bit(s, offset + j, on);
    }
}

/// What BITFIELD does when a SET or INCRBY leaves the field's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overflow {
    Wrap,
    Sat,
    Fail,
}

/// Checks `value + incr` against an unsigned `bits`-wide field. Returns 0 if it fits, else 1
/// (too big) or -1 (below zero) with the value WRAP or SAT would store (None for FAIL).
pub fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> (i32, Option<u64>) {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let maxincr = max.wrapping_sub(value) as i64;
    let minincr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX.checked_shl(bits).unwrap_or(0));
    if value > max || (incr > 0 && incr > maxincr) {
        let limit = match ow {
            Overflow::Wrap => Some(wrap()),
            Overflow::Sat => Some(max),
            Overflow::Fail => None,
        };
        (1, limit)
    } else if incr < 0 && incr < minincr {
        let limit = match ow {
            Overflow::Wrap => Some(wrap()),
            Overflow::Sat => Some(0),
            Overflow::Fail => None,
        };
        (-1, limit)
    } else {
        (0, None)
    }
}

/// Checks `value + incr` against a signed `bits`-wide field, as [`unsigned_overflow`].
pub fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> (i32, Option<i64>) {
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    let maxincr = (max as u64).wrapping_sub(value as u64) as i64;
    let minincr = min.wrapping_sub(value);
    let wrap = || {
        let mut c = (value as u64).wrapping_add(incr as u64);
        if bits < 64 {
            let mask = u64::MAX << bits;
            if c & (1u64 << (bits - 1)) != 0 {
                c |= mask;
            } else {
                c &= !mask;
            }
        }
        c as i64
    };
    if value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr) {
        let limit = match ow {
            Overflow::Wrap => Some(wrap()),
            Overflow::Sat => Some(max),
            Overflow::Fail => None,
        };
        (1, limit)
    } else if value < min
        || (bits != 64 && incr < minincr)
        || (value < 0 && incr < 0 && incr < minincr)
    {
        let limit = match ow {
            Overflow::Wrap => Some(wrap()),
            Overflow::Sat => Some(min),
            Overflow::Fail => None,
        };
        (-1, limit)
    } else {
        (0, None)
    }
}

// No unsafe code in this module: Miri (scripts/test.sh) would only make its long loops slow.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    fn naive_count(s: &[u8], first: u64, last: u64) -> u64 {
        (first..=last).filter(|&i| get_bit(s, i)).count() as u64
    }

    fn naive_find(s: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
        (first..=last).find(|&i| get_bit(s, i) == bit)
    }

    fn rand_bytes(seed: &mut u64, n: usize, density: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                match (*seed >> 33) % 4 {
                    0 => 0,
                    1 if density > 0 => 0xFF,
                    _ => (*seed >> 40) as u8,
                }
            })
            .collect()
    }

    #[test]
    fn counting_and_searching_match_a_bit_by_bit_scan() {
        let mut seed = 7;
        for n in [1usize, 3, 8, 9, 31, 64, 100] {
            let s = rand_bytes(&mut seed, n, 1);
            let bits = n as u64 * 8;
            assert_eq!(popcount(&s), naive_count(&s, 0, bits - 1));
            for first in (0..bits).step_by(3) {
                for last in (first..bits).step_by(5) {
                    assert_eq!(count_bits(&s, first, last), naive_count(&s, first, last));
                    for bit in [false, true] {
                        assert_eq!(
                            find_bit(&s, bit, first, last),
                            naive_find(&s, bit, first, last),
                            "{n} {first} {last} {bit}"
                        );
                    }
                }
            }
        }
        let zeros = vec![0u8; 40];
        assert_eq!(find_bit(&zeros, true, 0, 319), None);
        assert_eq!(find_bit(&zeros, false, 5, 319), Some(5));
        let ones = vec![0xFFu8; 40];
        assert_eq!(find_bit(&ones, false, 0, 319), None);
    }

    #[test]
    fn bitop_pads_shorter_sources_with_zeros() {
        let a: &[u8] = b"\xff\x0f\xf0abcdefghij";
        let b: &[u8] = b"\x0f";
        assert_eq!(bitop(BitOp::And, &[a, b])[..3], [0x0f, 0, 0]);
        assert_eq!(bitop(BitOp::And, &[a, b]).len(), a.len());
        assert_eq!(bitop(BitOp::Or, &[b, a]), {
            let mut v = a.to_vec();
            v[0] |= 0x0f;
            v
        });
        assert_eq!(bitop(BitOp::Xor, &[a, a]), vec![0; a.len()]);
        assert_eq!(
            bitop(BitOp::Not, &[a]),
            a.iter().map(|x| !x).collect::<Vec<_>>()
        );
    }

    #[test]
    fn partial_results_fold_into_the_whole() {
        // Sources of every length around the 8-byte word, split into parts as shards would be.
        let srcs: Vec<Vec<u8>> = (0..7u8)
            .map(|i| {
                (0..(i as usize * 5 + 1))
                    .map(|j| (j as u8).wrapping_mul(37) ^ i)
                    .collect()
            })
            .collect();
        let all: Vec<&[u8]> = srcs.iter().map(|s| s.as_slice()).collect();
        for op in [BitOp::And, BitOp::Or, BitOp::Xor] {
            let whole = bitop(op, &all);
            for split in 1..all.len() {
                let mut acc = bitop(op, &all[split..]);
                fold(op, &mut acc, &bitop(op, &all[..split]));
                assert_eq!(acc, whole, "{op:?} split at {split}");
            }
            let maxlen = all.iter().map(|s| s.len()).max().unwrap();
            assert_eq!(whole.len(), maxlen);
            for (i, &b) in whole.iter().enumerate() {
                let bytes = all.iter().map(|s| s.get(i).copied().unwrap_or(0));
                let want = match op {
                    BitOp::And => bytes.fold(0xff, |a, x| a & x),
                    BitOp::Or => bytes.fold(0, |a, x| a | x),
                    _ => bytes.fold(0, |a, x| a ^ x),
                };
                assert_eq!(b, want, "{op:?} byte {i}");
            }
        }
    }

    #[test]
    fn fields_round_trip() {
        let mut s = vec![0u8; 16];
        set_field(&mut s, 3, 13, 0x1abc);
        assert_eq!(get_unsigned(&s, 3, 13), 0x1abc);
        assert_eq!(get_signed(&s, 3, 13), 0x1abc - 0x2000);
        set_field(&mut s, 60, 64, u64::MAX - 5);
        assert_eq!(get_signed(&s, 60, 64), -6);
        assert_eq!(get_unsigned(&s, 200, 8), 0);
    }

    #[test]
    fn overflow_rules() {
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Wrap), (1, Some(4)));
        assert_eq!(unsigned_overflow(250, 10, 8, Overflow::Sat), (1, Some(255)));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Sat), (-1, Some(0)));
        assert_eq!(unsigned_overflow(5, -10, 8, Overflow::Fail), (-1, None));
        assert_eq!(signed_overflow(120, 10, 8, Overflow::Wrap), (1, Some(-126)));
        assert_eq!(
            signed_overflow(-120, -10, 8, Overflow::Sat),
            (-1, Some(-128))
        );
        assert_eq!(
            signed_overflow(i64::MAX, 1, 64, Overflow::Wrap),
            (1, Some(i64::MIN))
        );
        assert_eq!(signed_overflow(3, 5, 4, Overflow::Fail), (1, None));
        assert_eq!(signed_overflow(3, 4, 8, Overflow::Fail), (0, None));
    }
}
