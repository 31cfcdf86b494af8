//! Redis's ziplist (`ziplist.c`, written by Redis up to 6.2; read for LIST_ZIPLIST,
//! LIST_QUICKLIST nodes, ZSET_ZIPLIST and HASH_ZIPLIST):
//!
//! ```text
//! zlbytes u32 LE | zltail u32 LE | zllen u16 LE (65535: unknown) | entry* | 0xFF
//! entry = prevlen (1 byte < 254, or 0xFE + u32 LE) | encoding | payload
//! ```
//!
//! Encodings: `00llllll` string of up to 63 bytes; `01llllll llllllll` up to 16383 (big-endian);
//! `10______` + u32 big-endian length; `0xC0`/`0xD0`/`0xE0`/`0xF0`/`0xFE` int16/int32/int64/
//! int24/int8 little-endian; `0xF1..=0xFD` an immediate 0..=12. Nothing is written in this form.
//!
//! [`parse`] checks what Redis's deep integrity check does: sizes, every prevlen, the tail offset,
//! the count and the terminator.

use crate::listpack::Elem;

const HEADER: usize = 10;
const END: u8 = 0xFF;

/// Every element of a ziplist, after checking its structure.
pub fn parse(buf: &[u8]) -> Result<Vec<Elem<'_>>, String> {
    if buf.len() < HEADER + 1 {
        return Err(format!("ziplist of {} bytes is too short", buf.len()));
    }
    let u32_at = |p: usize| u32::from_le_bytes([buf[p], buf[p + 1], buf[p + 2], buf[p + 3]]);
    let bytes = u32_at(0) as usize;
    let tail = u32_at(4) as usize;
    let declared = u16::from_le_bytes([buf[8], buf[9]]);
    if bytes != buf.len() {
        return Err(format!(
            "ziplist header says {bytes} bytes, the blob has {}",
            buf.len()
        ));
    }
    if buf[buf.len() - 1] != END {
        return Err("ziplist does not end with its terminator".into());
    }
    let get = |from: usize, n: usize| -> Result<&[u8], String> {
        from.checked_add(n)
            .filter(|&e| e < buf.len())
            .map(|e| &buf[from..e])
            .ok_or_else(|| format!("ziplist entry at {from} runs past the end"))
    };
    let mut out = Vec::new();
    let mut p = HEADER;
    let mut prev_size = 0usize;
    let mut last_start = HEADER;
    while buf[p] != END {
        let start = p;
        let (prevlen, pl) = if buf[p] < 254 {
            (usize::from(buf[p]), 1)
        } else {
            let x = get(p + 1, 4)?;
            (u32::from_le_bytes([x[0], x[1], x[2], x[3]]) as usize, 5)
        };
        if prevlen != prev_size {
            return Err(format!("ziplist entry at {start} has a wrong prevlen"));
        }
        p += pl;
        let e = get(p, 1)?[0];
        let (elem, size) = match e >> 6 {
            0 => {
                let n = usize::from(e & 0x3F);
                (Elem::Str(get(p + 1, n)?), 1 + n)
            }
            1 => {
                let n = (usize::from(e & 0x3F) << 8) | usize::from(get(p + 1, 1)?[0]);
                (Elem::Str(get(p + 2, n)?), 2 + n)
            }
            2 => {
                let x = get(p + 1, 4)?;
                let n = u32::from_be_bytes([x[0], x[1], x[2], x[3]]) as usize;
                (Elem::Str(get(p + 5, n)?), 5 + n)
            }
            _ => match e {
                0xC0 => {
                    let x = get(p + 1, 2)?;
                    (Elem::Int(i64::from(i16::from_le_bytes([x[0], x[1]]))), 3)
                }
                0xD0 => {
                    let x = get(p + 1, 4)?;
                    (
                        Elem::Int(i64::from(i32::from_le_bytes([x[0], x[1], x[2], x[3]]))),
                        5,
                    )
                }
                0xE0 => {
                    let x = get(p + 1, 8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(x);
                    (Elem::Int(i64::from_le_bytes(a)), 9)
                }
                0xF0 => {
                    let x = get(p + 1, 3)?;
                    (
                        Elem::Int(i64::from(i32::from_le_bytes([0, x[0], x[1], x[2]]) >> 8)),
                        4,
                    )
                }
                0xFE => (Elem::Int(i64::from(get(p + 1, 1)?[0] as i8)), 2),
                0xF1..=0xFD => (Elem::Int(i64::from(e & 0x0F) - 1), 1),
                _ => return Err(format!("invalid ziplist encoding byte {e:#04x} at {p}")),
            },
        };
        p += size;
        if p >= buf.len() {
            return Err(format!("ziplist entry at {start} runs past the end"));
        }
        prev_size = p - start;
        last_start = start;
        out.push(elem);
    }
    if p != buf.len() - 1 {
        return Err(format!("ziplist terminator at {p} before the end"));
    }
    if tail != last_start {
        return Err(format!("ziplist tail offset {tail} is not the last entry"));
    }
    if declared != 65535 && usize::from(declared) != out.len() {
        return Err(format!(
            "ziplist header counts {declared} entries, it holds {}",
            out.len()
        ));
    }
    Ok(out)
}

/// A ziplist of `elems` (tests only: Redis 7.0 writes none, but reads them from older files).
#[cfg(test)]
pub fn build(elems: &[Elem<'_>]) -> Vec<u8> {
    let mut buf = vec![0u8; HEADER];
    let mut prev = 0usize;
    let mut last = HEADER;
    for e in elems {
        let start = buf.len();
        last = start;
        if prev < 254 {
            buf.push(prev as u8);
        } else {
            buf.push(254);
            buf.extend_from_slice(&(prev as u32).to_le_bytes());
        }
        match *e {
            Elem::Int(v) if (0..=12).contains(&v) => buf.push(0xF1 + v as u8),
            Elem::Int(v) if i8::try_from(v).is_ok() => buf.extend_from_slice(&[0xFE, v as u8]),
            Elem::Int(v) if i16::try_from(v).is_ok() => {
                buf.push(0xC0);
                buf.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Elem::Int(v) if (-(1 << 23)..(1 << 23)).contains(&v) => {
                buf.push(0xF0);
                buf.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
            }
            Elem::Int(v) if i32::try_from(v).is_ok() => {
                buf.push(0xD0);
                buf.extend_from_slice(&(v as i32).to_le_bytes());
            }
            Elem::Int(v) => {
                buf.push(0xE0);
                buf.extend_from_slice(&v.to_le_bytes());
            }
            Elem::Str(s) if s.len() < 64 => {
                buf.push(s.len() as u8);
                buf.extend_from_slice(s);
            }
            Elem::Str(s) if s.len() < 16384 => {
                buf.push(0x40 | (s.len() >> 8) as u8);
                buf.push(s.len() as u8);
                buf.extend_from_slice(s);
            }
            Elem::Str(s) => {
                buf.push(0x80);
                buf.extend_from_slice(&(s.len() as u32).to_be_bytes());
                buf.extend_from_slice(s);
            }
        }
        prev = buf.len() - start;
    }
    buf.push(END);
    let n = buf.len() as u32;
    buf[0..4].copy_from_slice(&n.to_le_bytes());
    buf[4..8].copy_from_slice(&(last as u32).to_le_bytes());
    buf[8..10].copy_from_slice(&(elems.len().min(65535) as u16).to_le_bytes());
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_cuts() {
        let big = vec![b'z'; 300];
        let mid = vec![b'y'; 100];
        let elems = [
            Elem::Int(0),
            Elem::Int(12),
            Elem::Int(13),
            Elem::Int(-100),
            Elem::Int(1000),
            Elem::Int(100_000),
            Elem::Int(1 << 30),
            Elem::Int(1 << 40),
            Elem::Str(b""),
            Elem::Str(b"abc"),
            Elem::Str(&mid),
            Elem::Str(&big),
            Elem::Str(b"after a long one"),
        ];
        let zl = build(&elems);
        assert_eq!(parse(&zl).unwrap(), elems);
        for cut in 0..zl.len() {
            assert!(parse(&zl[..cut]).is_err());
        }
        let mut bad = zl.clone();
        bad[4] += 1;
        assert!(parse(&bad).is_err());
        let mut bad = zl;
        bad[8] = 3;
        assert!(parse(&bad).is_err());
    }
}
