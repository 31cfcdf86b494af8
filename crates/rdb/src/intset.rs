//! Redis's intset (`intset.c`), the blob of the SET_INTSET type:
//! `encoding u32 LE (2, 4 or 8) | length u32 LE | values`, little-endian, strictly ascending.

/// The intset holding `values` (ascending, distinct) in the narrowest width that fits them all.
pub fn build(values: &[i64]) -> Vec<u8> {
    let fits = |lo: i64, hi: i64| values.iter().all(|v| (lo..=hi).contains(v));
    let width: usize = if fits(i16::MIN.into(), i16::MAX.into()) {
        2
    } else if fits(i32::MIN.into(), i32::MAX.into()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + values.len() * width);
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(values.len() as u32).to_le_bytes());
    for &v in values {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    out
}

/// The values of an intset, after checking its size, width and strict order (Redis's deep check;
/// an empty intset is invalid too).
pub fn parse(buf: &[u8]) -> Result<Vec<i64>, String> {
    if buf.len() < 8 {
        return Err(format!("intset of {} bytes is too short", buf.len()));
    }
    let width = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    let len = u32::from_le_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
    if !matches!(width, 2 | 4 | 8) {
        return Err(format!("intset with width {width}"));
    }
    if len.checked_mul(width).and_then(|n| n.checked_add(8)) != Some(buf.len()) {
        return Err(format!(
            "intset of {len} {width}-byte values in {} bytes",
            buf.len()
        ));
    }
    if len == 0 {
        return Err("empty intset".into());
    }
    let mut out = Vec::with_capacity(len);
    for c in buf[8..].chunks_exact(width) {
        let v = match width {
            2 => i64::from(i16::from_le_bytes([c[0], c[1]])),
            4 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            _ => i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        };
        if out.last().is_some_and(|&l| l >= v) {
            return Err("intset values out of order or repeated".into());
        }
        out.push(v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_and_errors() {
        for vals in [
            vec![-5i64, 0, 7],
            vec![1, 40000],
            vec![-(1 << 40), 3],
            vec![i64::MIN, i64::MAX],
        ] {
            assert_eq!(parse(&build(&vals)).unwrap(), vals);
        }
        assert_eq!(build(&[1, 2])[0], 2);
        assert_eq!(build(&[1, 70000])[0], 4);
        assert!(parse(&build(&[])).is_err());
        let mut dup = build(&[1, 2]);
        dup[10] = 1;
        assert!(parse(&dup).is_err());
        let mut w = build(&[1, 2]);
        w[0] = 3;
        assert!(parse(&w).is_err());
        let ok = build(&[1, 2, 3]);
        for cut in 0..ok.len() {
            assert!(parse(&ok[..cut]).is_err());
        }
    }
}
