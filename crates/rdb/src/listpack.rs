//! Redis's listpack (`listpack.c`), the blob inside QUICKLIST_2 nodes and the HASH_LISTPACK /
//! ZSET_LISTPACK types:
//!
//! ```text
//! total-bytes u32 LE | num-elements u16 LE (65535: count unknown) | entry* | 0xFF
//! entry = encoding [payload] backlen
//! ```
//!
//! Encodings: `0xxxxxxx` 7-bit unsigned int; `10llllll` string of up to 63 bytes; `110xxxxx
//! xxxxxxxx` 13-bit signed int; `1110llll llllllll` string of up to 4095 bytes; `0xF0` + u32 LE
//! length: longer string; `0xF1`..`0xF4`: 16/24/32/64-bit signed int, little-endian. `backlen`
//! is the size of encoding + payload, 7 bits a byte, written so it reads right to left (the
//! rightmost byte holds the low bits; a set top bit means more bytes lie to its left).
//!
//! [`parse`] checks everything Redis's deep integrity check does (header size and count, every
//! entry's encoding inside the buffer, every backlen, the terminator) and never indexes out of
//! bounds.

use strata_core::num::parse_i64;

/// One listpack element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem<'a> {
    Str(&'a [u8]),
    Int(i64),
}

impl Elem<'_> {
    /// The element's bytes (integers in decimal).
    pub fn to_vec(self) -> Vec<u8> {
        match self {
            Elem::Str(s) => s.to_vec(),
            Elem::Int(i) => i.to_string().into_bytes(),
        }
    }
}

const HEADER: usize = 6;
const EOF: u8 = 0xFF;

/// Bytes `lpEncodeBacklen` uses for an entry of `l` bytes (Redis's exact thresholds).
fn backlen_size(l: usize) -> usize {
    if l <= 127 {
        1
    } else if l < 16383 {
        2
    } else if l < 2_097_151 {
        3
    } else if l < 268_435_455 {
        4
    } else {
        5
    }
}

fn put_backlen(out: &mut Vec<u8>, l: usize) {
    let n = backlen_size(l);
    // Byte i (from the left) holds bits 7*(n-1-i).., the leftmost without the continuation bit.
    for i in 0..n {
        let shift = 7 * (n - 1 - i);
        let mut b = ((l >> shift) & 127) as u8;
        if i > 0 {
            b |= 128;
        }
        out.push(b);
    }
}

/// Builds a listpack.
pub struct Builder {
    buf: Vec<u8>,
    count: usize,
}

impl Default for Builder {
    fn default() -> Self {
        Builder::new()
    }
}

impl Builder {
    pub fn new() -> Builder {
        Builder {
            buf: vec![0; HEADER],
            count: 0,
        }
    }

    /// Appends an integer in the smallest encoding.
    pub fn push_int(&mut self, v: i64) {
        let start = self.buf.len();
        let b = &mut self.buf;
        if (0..=127).contains(&v) {
            b.push(v as u8);
        } else if (-4096..=4095).contains(&v) {
            let u = (v as u16) & 0x1FFF;
            b.push(0xC0 | (u >> 8) as u8);
            b.push(u as u8);
        } else if i16::try_from(v).is_ok() {
            b.push(0xF1);
            b.extend_from_slice(&(v as i16).to_le_bytes());
        } else if (-(1 << 23)..(1 << 23)).contains(&v) {
            b.push(0xF2);
            b.extend_from_slice(&(v as i32).to_le_bytes()[..3]);
        } else if i32::try_from(v).is_ok() {
            b.push(0xF3);
            b.extend_from_slice(&(v as i32).to_le_bytes());
        } else {
            b.push(0xF4);
            b.extend_from_slice(&v.to_le_bytes());
        }
        let l = self.buf.len() - start;
        put_backlen(&mut self.buf, l);
        self.count += 1;
    }

    /// Appends a string, stored as an integer when it is a canonical one (as `lpAppend` does).
    pub fn push(&mut self, s: &[u8]) {
        if let Some(v) = parse_i64(s) {
            return self.push_int(v);
        }
        let start = self.buf.len();
        let b = &mut self.buf;
        let n = s.len();
        if n < 64 {
            b.push(0x80 | n as u8);
        } else if n < 4096 {
            b.push(0xE0 | (n >> 8) as u8);
            b.push(n as u8);
        } else {
            b.push(0xF0);
            b.extend_from_slice(&(n as u32).to_le_bytes());
        }
        b.extend_from_slice(s);
        let l = self.buf.len() - start;
        put_backlen(&mut self.buf, l);
        self.count += 1;
    }

    /// Appends an element.
    pub fn push_elem(&mut self, e: Elem<'_>) {
        match e {
            Elem::Str(s) => self.push(s),
            Elem::Int(i) => self.push_int(i),
        }
    }

    /// Elements so far.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The finished listpack.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.push(EOF);
        let total = self.buf.len() as u32;
        self.buf[0..4].copy_from_slice(&total.to_le_bytes());
        let count = self.count.min(65535) as u16;
        self.buf[4..6].copy_from_slice(&count.to_le_bytes());
        self.buf
    }
}

/// One entry at `p` (not the terminator): the element and the size of encoding + payload.
fn entry(buf: &[u8], p: usize) -> Result<(Elem<'_>, usize), String> {
    let get = |from: usize, n: usize| -> Result<&[u8], String> {
        buf.get(
            from..from
                .checked_add(n)
                .ok_or("listpack entry length overflows")?,
        )
        .ok_or_else(|| format!("listpack entry at {p} runs past the end"))
    };
    let b = buf[p];
    Ok(match b {
        0x00..=0x7F => (Elem::Int(i64::from(b)), 1),
        0x80..=0xBF => {
            let n = usize::from(b & 0x3F);
            (Elem::Str(get(p + 1, n)?), 1 + n)
        }
        0xC0..=0xDF => {
            let lo = get(p + 1, 1)?[0];
            let u = (u16::from(b & 0x1F) << 8) | u16::from(lo);
            let v = if u >= 1 << 12 {
                i64::from(u) - (1 << 13)
            } else {
                i64::from(u)
            };
            (Elem::Int(v), 2)
        }
        0xE0..=0xEF => {
            let lo = get(p + 1, 1)?[0];
            let n = (usize::from(b & 0x0F) << 8) | usize::from(lo);
            (Elem::Str(get(p + 2, n)?), 2 + n)
        }
        0xF0 => {
            let l = get(p + 1, 4)?;
            let n = u32::from_le_bytes([l[0], l[1], l[2], l[3]]) as usize;
            (Elem::Str(get(p + 5, n)?), 5 + n)
        }
        0xF1 => {
            let x = get(p + 1, 2)?;
            (Elem::Int(i64::from(i16::from_le_bytes([x[0], x[1]]))), 3)
        }
        0xF2 => {
            let x = get(p + 1, 3)?;
            let v = i32::from_le_bytes([0, x[0], x[1], x[2]]) >> 8;
            (Elem::Int(i64::from(v)), 4)
        }
        0xF3 => {
            let x = get(p + 1, 4)?;
            (
                Elem::Int(i64::from(i32::from_le_bytes([x[0], x[1], x[2], x[3]]))),
                5,
            )
        }
        0xF4 => {
            let x = get(p + 1, 8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(x);
            (Elem::Int(i64::from_le_bytes(a)), 9)
        }
        _ => return Err(format!("invalid listpack encoding byte {b:#04x} at {p}")),
    })
}

/// Decodes the backlen that ends just before `end` (exclusive), reading right to left.
fn read_backlen(buf: &[u8], end: usize, max_bytes: usize) -> Option<usize> {
    let mut v = 0usize;
    let mut shift = 0;
    let mut i = end;
    for _ in 0..max_bytes {
        i = i.checked_sub(1)?;
        let b = buf[i];
        v |= usize::from(b & 127) << shift;
        if b & 128 == 0 {
            return Some(v);
        }
        shift += 7;
    }
    None
}

/// Every element of a listpack, after checking its whole structure.
pub fn parse(buf: &[u8]) -> Result<Vec<Elem<'_>>, String> {
    if buf.len() < HEADER + 1 {
        return Err(format!("listpack of {} bytes is too short", buf.len()));
    }
    let total = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if total != buf.len() {
        return Err(format!(
            "listpack header says {total} bytes, the blob has {}",
            buf.len()
        ));
    }
    let declared = u16::from_le_bytes([buf[4], buf[5]]);
    if buf[buf.len() - 1] != EOF {
        return Err("listpack does not end with its terminator".into());
    }
    let mut out = Vec::new();
    let mut p = HEADER;
    loop {
        if p >= buf.len() {
            return Err("listpack runs past its end".into());
        }
        if buf[p] == EOF {
            if p != buf.len() - 1 {
                return Err(format!("listpack terminator at {p} before the end"));
            }
            break;
        }
        let (e, size) = entry(buf, p)?;
        let bl = backlen_size(size);
        let end = p + size + bl;
        if end > buf.len() - 1 {
            return Err(format!("listpack entry at {p} runs past the end"));
        }
        if read_backlen(buf, end, bl) != Some(size) {
            return Err(format!("listpack entry at {p} has a wrong backlen"));
        }
        out.push(e);
        p = end;
    }
    if declared != 65535 && usize::from(declared) != out.len() {
        return Err(format!(
            "listpack header counts {declared} elements, it holds {}",
            out.len()
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_encoding_round_trips() {
        let ints = [
            0i64,
            1,
            127,
            128,
            -1,
            -4096,
            4095,
            4096,
            -4097,
            32767,
            -32768,
            32768,
            (1 << 23) - 1,
            -(1 << 23),
            1 << 23,
            i32::MAX as i64,
            i32::MIN as i64,
            i32::MAX as i64 + 1,
            i64::MAX,
            i64::MIN,
        ];
        let strs: Vec<Vec<u8>> = [0usize, 1, 63, 64, 4095, 4096, 20000]
            .iter()
            .map(|&n| vec![b'x'; n])
            .collect();
        let mut b = Builder::new();
        for &i in &ints {
            b.push_int(i);
        }
        for s in &strs {
            b.push(s);
        }
        b.push(b"-0");
        b.push(b"007");
        b.push(b"12");
        let lp = b.finish();
        let got = parse(&lp).unwrap();
        let mut want: Vec<Elem<'_>> = ints.iter().map(|&i| Elem::Int(i)).collect();
        want.extend(strs.iter().map(|s| Elem::Str(s)));
        want.push(Elem::Str(b"-0"));
        want.push(Elem::Str(b"007"));
        want.push(Elem::Int(12));
        assert_eq!(got, want);
    }

    #[test]
    fn redis_bytes_for_small_entries() {
        // LPUSH-built listpack ["a", 1, "1000"] as Redis 7.0 lays it out.
        let mut b = Builder::new();
        b.push(b"a");
        b.push(b"1");
        b.push(b"1000");
        let lp = b.finish();
        assert_eq!(
            lp,
            [15, 0, 0, 0, 3, 0, 0x81, b'a', 2, 1, 1, 0xC3, 0xE8, 2, 0xFF]
        );
    }

    #[test]
    fn backlen_layout() {
        for l in [
            1usize,
            127,
            128,
            16382,
            16383,
            2_097_150,
            2_097_151,
            300_000_000,
        ] {
            let mut v = Vec::new();
            put_backlen(&mut v, l);
            assert_eq!(v.len(), backlen_size(l));
            assert_eq!(read_backlen(&v, v.len(), 5), Some(l), "{l}");
        }
    }

    #[test]
    fn structure_errors() {
        let mut b = Builder::new();
        b.push(b"hello");
        b.push_int(100000);
        let lp = b.finish();
        assert!(parse(&lp).is_ok());
        for cut in 0..lp.len() {
            assert!(parse(&lp[..cut]).is_err());
        }
        let mut bad = lp.clone();
        bad[4] = 3; // count
        assert!(parse(&bad).is_err());
        let mut bad = lp.clone();
        bad[6] = 0x85 + 10; // string longer than the buffer
        assert!(parse(&bad).is_err());
        let mut bad = lp.clone();
        bad[12] = 9; // backlen of "hello"
        assert!(parse(&bad).is_err());
        let mut bad = lp;
        bad[13] = 0xF7; // invalid encoding
        assert!(parse(&bad).is_err());
    }
}
