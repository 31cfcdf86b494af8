//! Redis's zipmap (`zipmap.c`, the small-hash blob of Redis before 2.6; the HASH_ZIPMAP type):
//!
//! ```text
//! zmlen u8 (254: count unknown) | (len key len free value free-bytes)* | 0xFF
//! len = one byte < 254, or 254 + u32 LE
//! ```

/// A (field, value) pair borrowed from the blob.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

/// The (field, value) pairs of a zipmap, after checking its structure (an empty zipmap is invalid,
/// as in Redis's check).
pub fn parse(buf: &[u8]) -> Result<Vec<Pair<'_>>, String> {
    let err = |what: &str| Err(format!("zipmap {what}"));
    if buf.len() < 2 {
        return err("too short");
    }
    let declared = buf[0];
    let mut p = 1usize;
    // A length at p: (value, bytes), or None at the terminator.
    let len_at = |p: usize| -> Result<Option<(usize, usize)>, String> {
        match buf.get(p) {
            None => Err("zipmap runs past its end".into()),
            Some(255) => Ok(None),
            Some(254) => {
                let x = buf
                    .get(p + 1..p + 5)
                    .ok_or_else(|| "zipmap length runs past the end".to_string())?;
                Ok(Some((
                    u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize,
                    5,
                )))
            }
            Some(&b) => Ok(Some((usize::from(b), 1))),
        }
    };
    let take = |p: usize, n: usize| -> Result<&[u8], String> {
        p.checked_add(n)
            .and_then(|e| buf.get(p..e))
            .ok_or_else(|| "zipmap entry runs past the end".to_string())
    };
    let mut out = Vec::new();
    while let Some((klen, kl)) = len_at(p)? {
        p += kl;
        let key = take(p, klen)?;
        p += klen;
        let Some((vlen, vl)) = len_at(p)? else {
            return err("key without a value");
        };
        p += vl;
        let free = usize::from(*buf.get(p).ok_or("zipmap runs past its end")?);
        p += 1;
        let value = take(p, vlen)?;
        p += vlen;
        take(p, free)?;
        p += free;
        out.push((key, value));
    }
    if p != buf.len() - 1 {
        return err("terminator before the end");
    }
    if declared < 254 && usize::from(declared) != out.len() {
        return err("count does not match its entries");
    }
    if out.is_empty() {
        return err("is empty");
    }
    Ok(out)
}

#[cfg(test)]
pub fn build(pairs: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = vec![pairs.len().min(254) as u8];
    let put_len = |out: &mut Vec<u8>, n: usize| {
        if n < 254 {
            out.push(n as u8);
        } else {
            out.push(254);
            out.extend_from_slice(&(n as u32).to_le_bytes());
        }
    };
    for (k, v) in pairs {
        put_len(&mut out, k.len());
        out.extend_from_slice(k);
        put_len(&mut out, v.len());
        out.push(1);
        out.extend_from_slice(v);
        out.push(0);
    }
    out.push(255);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_cuts() {
        let long = vec![b'v'; 300];
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"a", b"1"), (b"field", &long), (b"", b"")];
        let zm = build(&pairs);
        assert_eq!(parse(&zm).unwrap(), pairs);
        for cut in 0..zm.len() {
            assert!(parse(&zm[..cut]).is_err());
        }
    }
}
