//! A small LZF-style compressor for list nodes (`list-compress-depth`), written for Strata.
//!
//! The format is LZF's: a control byte `000LLLLL` starts a run of `L + 1` literal bytes (1..=32);
//! a control byte `LLLOOOOO` (L ≥ 1) is a back-reference of length `L + 2`, with L = 7 meaning an
//! extra length byte follows, then one more offset byte: distance = `OOOOO << 8 | next` + 1 (up to
//! 8 KiB back). Matches are found through a table of the last position of each 3-byte hash, so
//! compression is one pass with no allocation beyond the output.
//!
//! [`decompress`] checks every length and offset against its buffers, so even a corrupt input only
//! yields `None`.

/// Longest back-reference: L = 7 plus an extra byte of 255, plus 2.
const MAX_MATCH: usize = 7 + 255 + 2;
/// Farthest back-reference.
const MAX_DISTANCE: usize = 1 << 13;
const HASH_BITS: u32 = 12;

fn hash3(b: &[u8]) -> usize {
    let v = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
    (v.wrapping_mul(2_654_435_761) >> (32 - HASH_BITS)) as usize
}

fn put_literals(out: &mut Vec<u8>, mut lit: &[u8]) {
    while !lit.is_empty() {
        let n = lit.len().min(32);
        out.push((n - 1) as u8);
        out.extend_from_slice(&lit[..n]);
        lit = &lit[n..];
    }
}

/// Compresses `input`; None if the result would be longer than `max_out` bytes.
pub fn compress(input: &[u8], max_out: usize) -> Option<Vec<u8>> {
    let n = input.len();
    let mut out = Vec::with_capacity(max_out.min(n + n / 32 + 1));
    // Position + 1 of the last occurrence of each hash (0: none).
    let mut table = vec![0u32; 1 << HASH_BITS];
    let (mut i, mut lit) = (0, 0);
    while i + 3 <= n {
        let h = hash3(&input[i..]);
        let cand = table[h] as usize;
        table[h] = (i + 1) as u32;
        if cand > 0 {
            let r = cand - 1;
            let dist = i - r;
            if dist <= MAX_DISTANCE && input[r..r + 3] == input[i..i + 3] {
                let max = MAX_MATCH.min(n - i);
                let mut len = 3;
                while len < max && input[r + len] == input[i + len] {
                    len += 1;
                }
                put_literals(&mut out, &input[lit..i]);
                let (l, off) = (len - 2, dist - 1);
                if l < 7 {
                    out.push((l << 5 | off >> 8) as u8);
                } else {
                    out.push((7 << 5 | off >> 8) as u8);
                    out.push((l - 7) as u8);
                }
                out.push(off as u8);
                if out.len() > max_out {
                    return None;
                }
                i += len;
                lit = i;
                continue;
            }
        }
        i += 1;
    }
    put_literals(&mut out, &input[lit..]);
    (out.len() <= max_out).then_some(out)
}

/// Decompresses what [`compress`] produced, expecting exactly `len` bytes; None if `input` is not
/// such a stream.
pub fn decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let mut i = 0;
    while i < input.len() {
        let ctrl = usize::from(input[i]);
        i += 1;
        if ctrl < 32 {
            let lit = input.get(i..i + ctrl + 1)?;
            if out.len() + lit.len() > len {
                return None;
            }
            out.extend_from_slice(lit);
            i += ctrl + 1;
            continue;
        }
        let mut l = ctrl >> 5;
        if l == 7 {
            l += usize::from(*input.get(i)?);
            i += 1;
        }
        let dist = ((ctrl & 0x1F) << 8 | usize::from(*input.get(i)?)) + 1;
        i += 1;
        let count = l + 2;
        let start = out.len().checked_sub(dist)?;
        if out.len() + count > len {
            return None;
        }
        // Byte by byte: the reference may overlap what it produces (runs).
        for k in 0..count {
            let b = out[start + k];
            out.push(b);
        }
    }
    (out.len() == len).then_some(out)
}

// No unsafe code in this module: Miri (scripts/test.sh) would only make its long loops slow.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    fn round_trip(data: &[u8]) -> Option<usize> {
        let c = compress(data, data.len() + data.len() / 32 + 1).expect("fits the bound");
        assert_eq!(decompress(&c, data.len()).as_deref(), Some(data));
        Some(c.len())
    }

    #[test]
    fn round_trips_and_shrinks_repetitive_data() {
        assert_eq!(round_trip(b""), Some(0));
        round_trip(b"a");
        round_trip(b"abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc");
        let runs = vec![b'x'; 10_000];
        assert!(round_trip(&runs).unwrap() < 200);
        let text: Vec<u8> = (0..1000)
            .flat_map(|i| format!("element-{:04}", i % 37).into_bytes())
            .collect();
        assert!(round_trip(&text).unwrap() < text.len() / 3);
        // Pseudo-random bytes do not compress but still round-trip.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let noise: Vec<u8> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        round_trip(&noise);
        assert!(compress(&noise, noise.len() - 8).is_none());
    }

    #[test]
    fn long_matches_and_far_offsets() {
        let mut data = Vec::new();
        for i in 0..3000u32 {
            data.extend_from_slice(&i.to_le_bytes());
        }
        let copy = data.clone();
        data.extend_from_slice(&copy[..5000]);
        round_trip(&data);
    }

    #[test]
    fn corrupt_input_is_rejected() {
        let c = compress(b"hello hello hello hello", 64).unwrap();
        assert_eq!(decompress(&c, 22), None);
        assert_eq!(decompress(&c, 24), None);
        assert_eq!(decompress(&[0xE0, 0xFF], 10), None);
        assert_eq!(decompress(&[0x05, b'a'], 6), None);
        assert_eq!(decompress(&[0x00, b'a', 0x20, 0x05], 4), None);
    }
}
