//! DEBUG DIGEST and DEBUG DIGEST-VALUE: SHA1-based fingerprints of values and of the dataset,
//! computed the way Redis's debug.c does, so the hex strings are the same as redis-server's for the
//! same data (the test suite compares a key's digest before and after COPY, MOVE, a reload…).
//!
//! Two ways of folding bytes into a 20-byte digest: `xor` (SHA1 of the bytes xored in: order does
//! not matter, for set members and hash/zset elements) and `mix` (xor, then the digest replaced by
//! its own SHA1: order matters, for list elements and the value's type). A missing key's digest is
//! twenty zero bytes.

use strata_core::entry::{Object, ValueRef};
use strata_core::num::format_g17;
use strata_core::set::Member;
use strata_core::Entry;

pub type Digest = [u8; 20];

fn sha1(bytes: &[u8]) -> Digest {
    sha1_smol::Sha1::from(bytes).digest().bytes()
}

/// Xors the SHA1 of `bytes` into `d` (Redis's xorDigest).
pub fn xor(d: &mut Digest, bytes: &[u8]) {
    for (a, b) in d.iter_mut().zip(sha1(bytes)) {
        *a ^= b;
    }
}

/// Xors `bytes` in, then replaces the digest by its SHA1 (Redis's mixDigest).
pub fn mix(d: &mut Digest, bytes: &[u8]) {
    xor(d, bytes);
    *d = sha1(&d[..]);
}

/// The digest of one key's value and expiry (Redis's xorObjectDigest over a zeroed digest).
pub fn value_digest(e: &Entry) -> Digest {
    let mut d = [0u8; 20];
    fold_value(&mut d, e);
    d
}

/// The digest of one key for DEBUG DIGEST: its name mixed in first, then its value.
pub fn key_digest(e: &Entry) -> Digest {
    let mut d = [0u8; 20];
    mix(&mut d, e.key());
    fold_value(&mut d, e);
    d
}

fn fold_value(d: &mut Digest, e: &Entry) {
    // Redis's type codes: string 0, list 1, set 2, zset 3, hash 4 (as a big-endian u32).
    let (kind, value) = (type_code(e.value()), e.value());
    mix(d, &kind.to_be_bytes());
    match value {
        ValueRef::Inline(s) => mix(d, s),
        ValueRef::Int(i) => mix(d, i.to_string().as_bytes()),
        ValueRef::Obj(Object::Str(s)) => mix(d, s),
        ValueRef::Obj(Object::List(l)) => {
            for elem in l.iter() {
                mix(d, &elem.to_vec());
            }
        }
        ValueRef::Obj(Object::Set(s)) => {
            for m in s.iter() {
                match m {
                    Member::Int(i) => xor(d, i.to_string().as_bytes()),
                    Member::Str(b) => xor(d, b),
                }
            }
        }
        ValueRef::Obj(Object::ZSet(z)) => z.for_each(|member, score| {
            let mut ele = [0u8; 20];
            mix(&mut ele, member);
            mix(&mut ele, format_g17(score).as_bytes());
            xor(d, &ele);
        }),
        ValueRef::Obj(Object::Hash(h)) => {
            for (field, value) in h.iter() {
                let mut ele = [0u8; 20];
                mix(&mut ele, field);
                mix(&mut ele, value);
                xor(d, &ele);
            }
        }
    }
    if e.expire().is_some() {
        xor(d, b"!!expire!!");
    }
}

fn type_code(v: ValueRef<'_>) -> u32 {
    match v {
        ValueRef::Inline(_) | ValueRef::Int(_) | ValueRef::Obj(Object::Str(_)) => 0,
        ValueRef::Obj(Object::List(_)) => 1,
        ValueRef::Obj(Object::Set(_)) => 2,
        ValueRef::Obj(Object::ZSet(_)) => 3,
        ValueRef::Obj(Object::Hash(_)) => 4,
    }
}

/// Combines per-database digests (each the [`xor`] of its keys' [`key_digest`]s, over every shard,
/// with whether the database has keys) into DEBUG DIGEST's value (Redis's computeDatasetDigest:
/// each non-empty database's index is mixed in before its keys are xored in).
pub fn dataset_digest(dbs: &[(bool, Digest)]) -> Digest {
    let mut d = [0u8; 20];
    for (i, (nonempty, keys)) in dbs.iter().enumerate() {
        if !nonempty {
            continue;
        }
        mix(&mut d, &(i as u32).to_be_bytes());
        for (a, b) in d.iter_mut().zip(keys) {
            *a ^= b;
        }
    }
    d
}

/// Lowercase hex, as Redis prints a digest.
pub fn hex(d: &Digest) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_depends_on_order_and_xor_does_not() {
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        mix(&mut a, b"x");
        mix(&mut a, b"y");
        mix(&mut b, b"y");
        mix(&mut b, b"x");
        assert_ne!(a, b);
        let (mut a, mut b) = ([0u8; 20], [0u8; 20]);
        xor(&mut a, b"x");
        xor(&mut a, b"y");
        xor(&mut b, b"y");
        xor(&mut b, b"x");
        assert_eq!(a, b);
        assert_eq!(hex(&[0u8; 20]), "0".repeat(40));
    }

    #[test]
    fn an_empty_dataset_digests_to_zeros() {
        assert_eq!(
            dataset_digest(&[(false, [7; 20]), (false, [0; 20])]),
            [0; 20]
        );
    }
}
