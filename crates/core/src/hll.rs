//! HyperLogLog in Redis's exact byte layout (hyperloglog.c), so that a value made by Redis works
//! here and the reverse, and GET returns the bytes Redis would.
//!
//! A HyperLogLog is a plain string value:
//!
//! ```text
//! "HYLL" | encoding (0 dense, 1 sparse) | 3 unused bytes | cached cardinality, 8 bytes LE
//! registers: dense  = 16384 registers of 6 bits, LSB first (12288 bytes)
//!            sparse = run-length opcodes: ZERO 00xxxxxx (1..64 zero registers),
//!                     XZERO 01xxxxxx yyyyyyyy (1..16384 zero registers),
//!                     VAL 1vvvvvxx (1..4 registers of value 1..32)
//! ```
//!
//! The top bit of the cached cardinality marks the cache invalid. Elements are hashed with
//! MurmurHash64A (seed 0xadc83b19): the low 14 bits pick the register, the position of the first
//! set bit above them (1..=51) is the candidate value. A sparse HLL is promoted to dense when a
//! value above 32 must be stored or when it would grow beyond `hll-sparse-max-bytes`. The estimate
//! is Ertl's improved estimator over the register histogram, as Redis 7 computes it.
//!
//! The sparse update, the promotion and the corrupted-input paths follow Redis step by step, so
//! that even a damaged value gives the same bytes and errors as Redis.

/// Header size.
pub const HDR: usize = 16;
/// log2 of the number of registers.
pub const P: u32 = 14;
/// Hash bits above the register index.
pub const Q: u32 = 64 - P;
/// Number of registers.
pub const REGISTERS: usize = 1 << P;
/// Size of a dense value: header plus 16384 six-bit registers.
pub const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
/// Encoding byte of a dense value.
pub const DENSE: u8 = 0;
/// Encoding byte of a sparse value.
pub const SPARSE: u8 = 1;

const REGISTER_MAX: u8 = 63;
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;

/// The value is not a well-formed HyperLogLog (Redis: "Corrupted HLL object detected").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// MurmurHash2, 64-bit version, reading 8-byte blocks little-endian (Redis's endian-neutral
/// variant).
pub fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut blocks = key.chunks_exact(8);
    for b in &mut blocks {
        let mut k = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register an element maps to and the value it offers (1..=51).
pub fn pat_len(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// A new, empty HyperLogLog: sparse, one XZERO covering every register, cache valid at 0.
pub fn new_sparse() -> Vec<u8> {
    let mut v = Vec::with_capacity(HDR + 2);
    v.extend_from_slice(b"HYLL");
    v.extend_from_slice(&[SPARSE, 0, 0, 0]);
    v.extend_from_slice(&[0; 8]);
    let mut left = REGISTERS;
    while left > 0 {
        let n = left.min(SPARSE_XZERO_MAX_LEN);
        push_xzero(&mut v, n);
        left -= n;
    }
    v
}

/// True when `v` passes Redis's HLL checks (magic, known encoding, exact dense size); sparse
/// opcodes are only checked when they are read.
pub fn is_hll(v: &[u8]) -> bool {
    v.len() >= HDR
        && &v[..4] == b"HYLL"
        && v[4] <= SPARSE
        && (v[4] != DENSE || v.len() == DENSE_SIZE)
}

/// The encoding byte (call only on a value that passed [`is_hll`]).
pub fn encoding(v: &[u8]) -> u8 {
    v[4]
}

/// The cached cardinality, if valid.
pub fn cached(v: &[u8]) -> Option<u64> {
    (v[15] & 0x80 == 0).then(|| u64::from_le_bytes(v[8..16].try_into().expect("8 bytes")))
}

/// Stores `card` as the cached cardinality.
pub fn set_cached(v: &mut [u8], card: u64) {
    v[8..16].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cached cardinality invalid.
pub fn invalidate(v: &mut [u8]) {
    v[15] |= 0x80;
}

// ===== dense registers =====

/// Register `i` of dense register bytes `r`.
pub fn dense_get(r: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = u16::from(r[byte]);
    let b1 = u16::from(r.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & u16::from(REGISTER_MAX)) as u8
}

/// Sets register `i` of dense register bytes `r` to `val` (≤ 63).
pub fn dense_set(r: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = u16::from(val);
    let m = u16::from(REGISTER_MAX);
    r[byte] = ((u16::from(r[byte]) & !(m << fb)) | (v << fb)) as u8;
    if let Some(b1) = r.get_mut(byte + 1) {
        *b1 = ((u16::from(*b1) & !(m >> (8 - fb))) | (v >> (8 - fb))) as u8;
    }
}

/// The 16 registers packed in 12 bytes, unpacked.
fn dense_group(c: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    for q in 0..4 {
        let (a, b, d) = (c[q * 3], c[q * 3 + 1], c[q * 3 + 2]);
        out[q * 4] = a & 63;
        out[q * 4 + 1] = ((a >> 6) | (b << 2)) & 63;
        out[q * 4 + 2] = ((b >> 4) | (d << 4)) & 63;
        out[q * 4 + 3] = d >> 2;
    }
    out
}

/// Every register of a value that passed [`is_hll`], as one byte each; Err if sparse and corrupt.
pub fn registers(v: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut max = vec![0u8; REGISTERS];
    merge_into(&mut max, v)?;
    Ok(max)
}

/// `max[i] = max(max[i], register i of v)` (PFCOUNT of several keys, PFMERGE). A sparse value
/// whose runs go past the last register, or stop short of it, is corrupt (Redis with the fix for
/// CVE-2025-32023, as the Debian 7.0.15 build behaves).
pub fn merge_into(max: &mut [u8], v: &[u8]) -> Result<(), Corrupt> {
    let r = &v[HDR..];
    if encoding(v) == DENSE {
        for (g, c) in r.chunks_exact(12).enumerate() {
            for (k, val) in dense_group(c).into_iter().enumerate() {
                let m = &mut max[g * 16 + k];
                if val > *m {
                    *m = val;
                }
            }
        }
        return Ok(());
    }
    let mut i = 0usize;
    let mut p = 0usize;
    while p < r.len() {
        let op = r[p];
        if op & 0xc0 == 0 {
            let run = usize::from(op & 0x3f) + 1;
            if i + run > REGISTERS {
                return Err(Corrupt);
            }
            i += run;
            p += 1;
        } else if op & 0x80 == 0 {
            let run = xzero_len(op, r.get(p + 1).copied().unwrap_or(0));
            if i + run > REGISTERS {
                return Err(Corrupt);
            }
            i += run;
            p += 2;
        } else {
            let (val, run) = val_of(op);
            if i + run > REGISTERS {
                return Err(Corrupt);
            }
            for m in &mut max[i..i + run] {
                if val > *m {
                    *m = val;
                }
            }
            i += run;
            p += 1;
        }
    }
    if i == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

// ===== sparse opcodes =====

fn xzero_len(op: u8, next: u8) -> usize {
    ((usize::from(op & 0x3f) << 8) | usize::from(next)) + 1
}

fn val_of(op: u8) -> (u8, usize) {
    (((op >> 2) & 0x1f) + 1, usize::from(op & 3) + 1)
}

fn val_op(val: u8, len: usize) -> u8 {
    ((val - 1) << 2) | (len as u8 - 1) | 0x80
}

fn push_xzero(v: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    v.push((l >> 8) as u8 | 0x40);
    v.push((l & 0xff) as u8);
}

fn push_zeros(v: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        push_xzero(v, len);
    } else {
        v.push(len as u8 - 1);
    }
}

/// A sparse value converted to dense (the cached cardinality is kept); Err if corrupt. A dense
/// value is returned as is.
pub fn to_dense(v: &[u8]) -> Result<Vec<u8>, Corrupt> {
    if encoding(v) == DENSE {
        return Ok(v.to_vec());
    }
    let mut d = vec![0u8; DENSE_SIZE];
    d[..HDR].copy_from_slice(&v[..HDR]);
    d[4] = DENSE;
    let regs = registers(v)?;
    let r = &mut d[HDR..];
    for (i, &val) in regs.iter().enumerate() {
        if val != 0 {
            dense_set(r, i, val);
        }
    }
    Ok(d)
}

/// Sets register `index` to `count` if that raises it. Ok(true) if the value changed; may promote
/// the value to dense (always a change). Err if the sparse representation is corrupt.
pub fn set(v: &mut Vec<u8>, index: usize, count: u8, sparse_max: usize) -> Result<bool, Corrupt> {
    if encoding(v) == DENSE {
        let r = &mut v[HDR..];
        return Ok(if count > dense_get(r, index) {
            dense_set(r, index, count);
            true
        } else {
            false
        });
    }
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: find the opcode covering `index`.
    let end = v.len();
    let mut p = HDR;
    let mut first = 0usize;
    let mut prev = None;
    let mut span = 0usize;
    while p < end {
        let op = v[p];
        let oplen;
        if op & 0xc0 == 0 {
            span = usize::from(op & 0x3f) + 1;
            oplen = 1;
        } else if op & 0x80 != 0 {
            span = val_of(op).1;
            oplen = 1;
        } else {
            span = xzero_len(op, v.get(p + 1).copied().unwrap_or(0));
            oplen = 2;
        }
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p >= end {
        return Err(Corrupt);
    }
    let op = v[p];
    let (is_zero, is_xzero) = (op & 0xc0 == 0, op & 0xc0 == 0x40);
    let runlen = if is_zero {
        usize::from(op & 0x3f) + 1
    } else if is_xzero {
        xzero_len(op, v.get(p + 1).copied().unwrap_or(0))
    } else {
        val_of(op).1
    };
    // Step 2: the trivial in-place cases.
    let mut done = false;
    if !is_zero && !is_xzero {
        let (old, _) = val_of(op);
        if old >= count {
            return Ok(false);
        }
        if runlen == 1 {
            v[p] = val_op(count, 1);
            done = true;
        }
    }
    if !done && is_zero && runlen == 1 {
        v[p] = val_op(count, 1);
        done = true;
    }
    if !done {
        // Step 3: split the opcode into up to three.
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        if is_zero || is_xzero {
            if index != first {
                push_zeros(&mut seq, index - first);
            }
            seq.push(val_op(count, 1));
            if index != last {
                push_zeros(&mut seq, last - index);
            }
        } else {
            let (cur, _) = val_of(op);
            if index != first {
                seq.push(val_op(cur, index - first));
            }
            seq.push(val_op(count, 1));
            if index != last {
                seq.push(val_op(cur, last - index));
            }
        }
        let oldlen = if is_xzero { 2 } else { 1 };
        let new_len = end + seq.len() - oldlen;
        if seq.len() > oldlen && new_len > sparse_max {
            return promote(v, index, count);
        }
        // An XZERO cut short by the end of the value reads its second byte as 0 (Redis reads
        // the string's terminator); splice over that virtual byte and cut back to length.
        let padded = p + oldlen > end;
        if padded {
            v.push(0);
        }
        v.splice(p..p + oldlen, seq);
        v.truncate(new_len);
    }
    // Step 4: merge adjacent VAL opcodes of equal value, scanning up to 5 opcodes from `prev`.
    let mut p = prev.unwrap_or(HDR);
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        let op = v[p];
        if op & 0xc0 == 0x40 {
            p += 2;
            continue;
        } else if op & 0xc0 == 0 {
            p += 1;
            continue;
        }
        if p + 1 < v.len() && v[p + 1] & 0x80 != 0 {
            let (v1, l1) = val_of(op);
            let (v2, l2) = val_of(v[p + 1]);
            if v1 == v2 && l1 + l2 <= SPARSE_VAL_MAX_LEN {
                v[p + 1] = val_op(v1, l1 + l2);
                v.remove(p);
                continue;
            }
        }
        p += 1;
    }
    invalidate(v);
    Ok(true)
}

fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    *v = to_dense(v)?;
    dense_set(&mut v[HDR..], index, count);
    Ok(true)
}

/// Adds `ele`; Ok(true) if a register changed.
pub fn add(v: &mut Vec<u8>, ele: &[u8], sparse_max: usize) -> Result<bool, Corrupt> {
    let (index, count) = pat_len(ele);
    set(v, index, count, sparse_max)
}

// ===== estimation =====

/// The register histogram of a value that passed [`is_hll`]; Err for a sparse value that does not
/// cover exactly 16384 registers.
pub fn histogram(v: &[u8]) -> Result<[u64; 64], Corrupt> {
    let mut h = [0u64; 64];
    let r = &v[HDR..];
    if encoding(v) == DENSE {
        for c in r.chunks_exact(12) {
            for val in dense_group(c) {
                h[usize::from(val)] += 1;
            }
        }
        return Ok(h);
    }
    let mut idx = 0u64;
    let mut p = 0;
    while p < r.len() {
        let op = r[p];
        if op & 0xc0 == 0 {
            let run = u64::from(op & 0x3f) + 1;
            idx += run;
            h[0] += run;
            p += 1;
        } else if op & 0x80 == 0 {
            let run = xzero_len(op, r.get(p + 1).copied().unwrap_or(0)) as u64;
            idx += run;
            h[0] += run;
            p += 2;
        } else {
            let (val, run) = val_of(op);
            idx += run as u64;
            h[usize::from(val)] += run as u64;
            p += 1;
        }
    }
    if idx == REGISTERS as u64 {
        Ok(h)
    } else {
        Err(Corrupt)
    }
}

/// The histogram of one-byte-per-register values (the merged registers of several HLLs).
pub fn raw_histogram(regs: &[u8]) -> [u64; 64] {
    let mut h = [0u64; 64];
    for &r in regs {
        h[usize::from(r & 63)] += 1;
    }
    h
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        // powf, not a multiplication: the same libm call as Redis, so the same rounding.
        z -= (1.0 - x).powf(2.0) * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate from a register histogram (Ertl's improved estimator, as Redis 7).
pub fn estimate(h: &[u64; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    c_llround(ALPHA_INF * m * m / z)
}

/// `(uint64_t)(double)llroundl(x)` as Redis computes it on x86-64: an estimate beyond the range of
/// a long long (an HLL with every register above 50 gives infinity) becomes LLONG_MIN, whose bits
/// are then returned.
fn c_llround(x: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let r = x.round();
    let ll = if r.is_finite() && (-TWO_63..TWO_63).contains(&r) {
        r as i64
    } else {
        i64::MIN
    };
    let e = ll as f64;
    if e < 0.0 {
        (e as i64) as u64
    } else {
        e as u64
    }
}

/// The estimate of a value that passed [`is_hll`], ignoring its cache.
pub fn count(v: &[u8]) -> Result<u64, Corrupt> {
    Ok(estimate(&histogram(v)?))
}

/// The sparse opcodes in PFDEBUG DECODE's words ("z:N", "Z:N", "v:VAL,LEN", space-separated).
pub fn decode_sparse(v: &[u8]) -> String {
    let r = &v[HDR..];
    let mut out = Vec::new();
    let mut p = 0;
    while p < r.len() {
        let op = r[p];
        if op & 0xc0 == 0 {
            out.push(format!("z:{}", (op & 0x3f) + 1));
            p += 1;
        } else if op & 0x80 == 0 {
            out.push(format!(
                "Z:{}",
                xzero_len(op, r.get(p + 1).copied().unwrap_or(0))
            ));
            p += 2;
        } else {
            let (val, run) = val_of(op);
            out.push(format!("v:{val},{run}"));
            p += 1;
        }
    }
    out.join(" ")
}

/// PFSELFTEST: checks the dense register accessors against a plain array, then that sparse and
/// dense HLLs fed the same elements agree and stay within the expected error up to 10^7
/// elements. Err carries Redis's failure text.
pub fn self_test(sparse_max: usize, mut rand: impl FnMut() -> u32) -> Result<(), String> {
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..4].copy_from_slice(b"HYLL");
    let mut bytes = vec![0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            let r = (rand() & u32::from(REGISTER_MAX)) as u8;
            *b = r;
            dense_set(&mut dense[HDR..], i, r);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let val = dense_get(&dense[HDR..], i);
            if val != b {
                return Err(format!(
                    "TESTFAILED Register {i} should be {b} but is {val}"
                ));
            }
        }
    }
    dense[HDR..].fill(0);
    let mut sparse = new_sparse();
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let mut checkpoint: u64 = 1;
    let seed = u64::from(rand()) | (u64::from(rand()) << 32);
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_ne_bytes();
        let _ = add(&mut dense, &ele, sparse_max);
        let _ = add(&mut sparse, &ele, sparse_max);
        if j != checkpoint {
            continue;
        }
        if j < (sparse_max / 2) as u64 && encoding(&sparse) != SPARSE {
            return Err("TESTFAILED sparse encoding not used".into());
        }
        let card = count(&dense).unwrap_or(0);
        if card != count(&sparse).unwrap_or(0) {
            return Err("TESTFAILED dense/sparse disagree".into());
        }
        let abserr = checkpoint.abs_diff(card);
        let maxerr = if j == 10 {
            1
        } else {
            (relerr * 6.0 * checkpoint as f64).ceil() as u64
        };
        if abserr > maxerr {
            return Err(format!(
                "TESTFAILED Too big error. card:{checkpoint} abserr:{abserr}"
            ));
        }
        checkpoint *= 10;
    }
    Ok(())
}

// No unsafe code in this module: Miri (scripts/test.sh) would only make its long loops slow.
#[cfg(all(test, not(miri)))]
mod tests {
    use super::*;

    #[test]
    fn elements_land_where_redis_puts_them() {
        // Redis 7.0.15: PFADD x a → PFDEBUG DECODE x = "Z:12711 v:2,1 Z:3672".
        assert_eq!(pat_len(b"a"), (12711, 2));
        let mut v = new_sparse();
        for e in ["hello", "foobar", "12345678"] {
            assert_eq!(add(&mut v, e.as_bytes(), 3000), Ok(true));
        }
        assert_eq!(
            decode_sparse(&v),
            "Z:1910 v:4,1 Z:7305 v:1,1 Z:1362 v:3,1 Z:5804"
        );
        assert_eq!(count(&v), Ok(3));
        assert_eq!(cached(&v), None);
    }

    #[test]
    fn empty_sparse_layout() {
        let v = new_sparse();
        assert_eq!(v, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert!(is_hll(&v));
        assert_eq!(count(&v), Ok(0));
        assert_eq!(decode_sparse(&v), "Z:16384");
    }

    #[test]
    fn sparse_and_dense_agree_and_promote() {
        let mut s = new_sparse();
        let mut d = to_dense(&s).unwrap();
        for i in 0..5000u32 {
            let e = i.to_string();
            let a = add(&mut s, e.as_bytes(), 3000).unwrap();
            let b = add(&mut d, e.as_bytes(), 3000).unwrap();
            assert_eq!(a, b || encoding(&s) == DENSE && a);
            assert!(s.len() <= 3000 || encoding(&s) == DENSE);
            if i % 97 == 0 {
                assert_eq!(registers(&s).unwrap(), registers(&d).unwrap());
                assert_eq!(count(&s).unwrap(), count(&d).unwrap());
            }
        }
        assert_eq!(encoding(&s), DENSE);
        let n = count(&s).unwrap();
        assert!((4800..5200).contains(&n), "{n}");
    }

    #[test]
    fn corrupt_sparse_is_detected() {
        let mut v = new_sparse();
        v.truncate(HDR + 1);
        assert_eq!(count(&v), Err(Corrupt));
        let mut v = new_sparse();
        v.extend_from_slice(&[0x80, 0x80]);
        assert_eq!(count(&v), Err(Corrupt));
        assert_eq!(to_dense(&v), Err(Corrupt));
        let mut v = new_sparse();
        v.truncate(HDR);
        assert_eq!(set(&mut v, 5, 3, 3000), Err(Corrupt));
    }

    #[test]
    fn dense_registers_round_trip() {
        let mut r = vec![0u8; DENSE_SIZE - HDR];
        for i in 0..REGISTERS {
            dense_set(&mut r, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&r, i), (i % 64) as u8);
        }
        let mut h = [0u64; 64];
        for c in r.chunks_exact(12) {
            for v in dense_group(c) {
                h[v as usize] += 1;
            }
        }
        assert!(h.iter().all(|&n| n == 256));
    }
}
