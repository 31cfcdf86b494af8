//! RDB bytes to values: the input wrapper (offset, running CRC64, bounded reads) and
//! `rdbLoadObject` for every type Redis 7.0 reads.
//!
//! Nothing is reserved ahead of the input: a string's bytes are read through `Read::take`, so a
//! huge length on a short input fails with `Truncated` after reading what is there; collection
//! counts only bound loops that read elements one by one.

use std::io::{self, Read};

use bytes::Bytes;
use strata_core::num::{parse_f64, parse_i64};
use strata_core::{Hash, List, Object, Set, Value, ZSet};

use crate::listpack::Elem;
use crate::types::*;
use crate::{intset, listpack, ziplist, zipmap, Error, ErrorKind};

/// The input: bytes consumed, and the CRC64 of them while `crc_on`.
pub struct Src<R> {
    pub inner: R,
    pub offset: u64,
    pub crc: u64,
}

/// What reading one value gave.
pub enum Loaded {
    Value(Value),
    /// A valid but empty collection: a file skips the key (as Redis does), RESTORE refuses it.
    Empty,
}

impl<R: Read> Src<R> {
    pub fn new(inner: R) -> Src<R> {
        Src {
            inner,
            offset: 0,
            crc: 0,
        }
    }

    pub fn err(&self, kind: ErrorKind) -> Error {
        Error {
            offset: self.offset,
            kind,
        }
    }

    pub fn corrupt(&self, what: impl Into<String>) -> Error {
        self.err(ErrorKind::Corrupt(what.into()))
    }

    /// Exactly `buf.len()` bytes.
    pub fn fill(&mut self, buf: &mut [u8]) -> Result<(), Error> {
        let mut done = 0;
        while done < buf.len() {
            match self.inner.read(&mut buf[done..]) {
                Ok(0) => {
                    self.account(&buf[..done]);
                    return Err(self.err(ErrorKind::Truncated));
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.account(&buf[..done]);
                    return Err(self.err(ErrorKind::Io(e)));
                }
            }
        }
        self.account(buf);
        Ok(())
    }

    fn account(&mut self, b: &[u8]) {
        self.crc = crate::crc64::crc64(self.crc, b);
        self.offset += b.len() as u64;
    }

    pub fn byte(&mut self) -> Result<u8, Error> {
        let mut b = [0u8; 1];
        self.fill(&mut b)?;
        Ok(b[0])
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut b = [0u8; N];
        self.fill(&mut b)?;
        Ok(b)
    }

    /// `n` bytes, growing the buffer only as bytes arrive.
    pub fn bytes(&mut self, n: u64) -> Result<Vec<u8>, Error> {
        let mut v = Vec::with_capacity(n.min(1 << 16) as usize);
        let got = (&mut self.inner).take(n).read_to_end(&mut v);
        self.account(&v);
        match got {
            Err(e) => Err(self.err(ErrorKind::Io(e))),
            Ok(_) if (v.len() as u64) < n => Err(self.err(ErrorKind::Truncated)),
            Ok(_) => Ok(v),
        }
    }

    /// A length and whether it is an encoding marker (`11xxxxxx`) rather than a length.
    fn len_or_enc(&mut self) -> Result<(u64, bool), Error> {
        let b = self.byte()?;
        Ok(match b >> 6 {
            0 => (u64::from(b & 0x3F), false),
            1 => (u64::from(b & 0x3F) << 8 | u64::from(self.byte()?), false),
            2 => match b {
                LEN_32 => (u64::from(u32::from_be_bytes(self.array()?)), false),
                LEN_64 => (u64::from_be_bytes(self.array()?), false),
                _ => return Err(self.corrupt(format!("unknown length encoding {b:#04x}"))),
            },
            _ => (u64::from(b & 0x3F), true),
        })
    }

    /// A plain length.
    pub fn len(&mut self) -> Result<u64, Error> {
        match self.len_or_enc()? {
            (n, false) => Ok(n),
            (e, true) => Err(self.corrupt(format!("string encoding {e} where a length belongs"))),
        }
    }

    /// A length that must fit a usize (counts of collections).
    fn count(&mut self) -> Result<u64, Error> {
        self.len()
    }

    /// A string in any of its encodings, as bytes (integers in decimal).
    pub fn string(&mut self) -> Result<Vec<u8>, Error> {
        match self.string_or_int()? {
            Str::Bytes(b) => Ok(b),
            Str::Int(i) => Ok(i.to_string().into_bytes()),
        }
    }

    fn string_or_int(&mut self) -> Result<Str, Error> {
        let (n, enc) = self.len_or_enc()?;
        if !enc {
            return Ok(Str::Bytes(self.bytes(n)?));
        }
        Ok(match n as u8 {
            ENC_INT8 => Str::Int(i64::from(self.byte()? as i8)),
            ENC_INT16 => Str::Int(i64::from(i16::from_le_bytes(self.array()?))),
            ENC_INT32 => Str::Int(i64::from(i32::from_le_bytes(self.array()?))),
            ENC_LZF => {
                let clen = self.len()?;
                let len = self.len()?;
                // An LZF back-reference of 3 bytes yields at most 264: no honest stream
                // expands more than 88 times. Checked before anything is reserved.
                if len > clen.saturating_mul(88) || len > usize::MAX as u64 {
                    return Err(self.corrupt(format!(
                        "LZF string of {clen} bytes claims {len} uncompressed"
                    )));
                }
                let c = self.bytes(clen)?;
                match strata_core::lzf::decompress(&c, len as usize) {
                    Some(v) => Str::Bytes(v),
                    None => return Err(self.corrupt("invalid LZF-compressed string")),
                }
            }
            e => return Err(self.corrupt(format!("unknown string encoding {e}"))),
        })
    }

    /// A score of the old ZSET type: a length byte then ASCII (253 NaN, 254 +inf, 255 -inf).
    fn ascii_double(&mut self) -> Result<f64, Error> {
        let n = self.byte()?;
        Ok(match n {
            253 => f64::NAN,
            254 => f64::INFINITY,
            255 => f64::NEG_INFINITY,
            _ => {
                let b = self.bytes(u64::from(n))?;
                parse_strtod(&b).ok_or_else(|| self.corrupt("unparsable zset score"))?
            }
        })
    }
}

enum Str {
    Bytes(Vec<u8>),
    Int(i64),
}

/// A score written as text (listpack/ziplist score strings, the old ZSET type): what `strtod`
/// accepts, NaN included (the caller refuses NaN).
fn parse_strtod(b: &[u8]) -> Option<f64> {
    if let Some(v) = parse_f64(b) {
        return Some(v);
    }
    let t = std::str::from_utf8(b).ok()?;
    let body = t.trim_start_matches(['+', '-']);
    if body.eq_ignore_ascii_case("nan") {
        return Some(f64::NAN);
    }
    t.parse::<f64>().ok()
}

/// A string value as Redis's `tryObjectEncoding` leaves it: int-encoded when canonical.
pub fn string_value(b: Vec<u8>) -> Value {
    match parse_i64(&b) {
        Some(i) => Value::Int(i),
        None => Value::Str(Bytes::from(b)),
    }
}

fn elem_bytes(e: Elem<'_>) -> Vec<u8> {
    e.to_vec()
}

fn elem_score(e: Elem<'_>) -> Option<f64> {
    let s = match e {
        Elem::Int(i) => i as f64,
        Elem::Str(s) => parse_strtod(s)?,
    };
    (!s.is_nan()).then_some(s)
}

/// Builds a hash from pairs, converting by the current limits as Redis does on load: a packed
/// hash (`by_count`: listpack, ziplist) only when it has too many fields, a zipmap also when a
/// field or value is too long. A repeated field is corrupt.
fn hash_from_pairs<I>(src: &Src<impl Read>, pairs: I, by_count: bool) -> Result<Loaded, Error>
where
    I: IntoIterator<Item = (Vec<u8>, Vec<u8>)>,
{
    let mut h = Hash::new();
    for (f, v) in pairs {
        let new = if by_count {
            h.insert_loaded(&f, &v)
        } else {
            h.insert(&f, &v)
        };
        if !new {
            return Err(src.corrupt("Duplicate hash fields detected"));
        }
    }
    Ok(if h.is_empty() {
        Loaded::Empty
    } else {
        Value::Obj(Object::Hash(h)).into()
    })
}

fn zset_add(
    src: &Src<impl Read>,
    z: &mut ZSet,
    m: &[u8],
    score: f64,
    by_count: bool,
) -> Result<(), Error> {
    if score.is_nan() {
        return Err(src.corrupt("Zset with NAN score detected"));
    }
    if z.score(m).is_some() {
        return Err(src.corrupt("Duplicate zset fields detected"));
    }
    if by_count {
        z.insert_new_loaded(m, score);
    } else {
        z.insert_new(m, score);
    }
    Ok(())
}

/// Pairs of a packed zset (member, score, member, score...).
fn zset_from_packed(src: &Src<impl Read>, elems: &[Elem<'_>]) -> Result<Loaded, Error> {
    if !elems.len().is_multiple_of(2) {
        return Err(src.corrupt("packed zset with an odd number of entries"));
    }
    let mut z = ZSet::for_first_member(0);
    if elems.len() / 2 > strata_core::limits::ZSET_MAX_LISTPACK_ENTRIES.count() {
        z = ZSet::new_skiplist();
    }
    for p in elems.chunks_exact(2) {
        let m = elem_bytes(p[0]);
        let s = elem_score(p[1]).ok_or_else(|| src.corrupt("invalid zset score"))?;
        zset_add(src, &mut z, &m, s, true)?;
    }
    Ok(if z.is_empty() {
        Loaded::Empty
    } else {
        Value::Obj(Object::ZSet(z)).into()
    })
}

fn hash_from_packed(src: &Src<impl Read>, elems: &[Elem<'_>]) -> Result<Loaded, Error> {
    if !elems.len().is_multiple_of(2) {
        return Err(src.corrupt("packed hash with an odd number of entries"));
    }
    hash_from_pairs(
        src,
        elems
            .chunks_exact(2)
            .map(|p| (elem_bytes(p[0]), elem_bytes(p[1]))),
        true,
    )
}

fn list_value(l: List) -> Loaded {
    if l.is_empty() {
        Loaded::Empty
    } else {
        Value::Obj(Object::List(Box::new(l))).into()
    }
}

fn push_elems(l: &mut List, elems: &[Elem<'_>]) {
    for e in elems {
        match e {
            Elem::Str(s) => l.push_back(s),
            Elem::Int(i) => l.push_back(i.to_string().as_bytes()),
        }
    }
}

/// A structure error of a packed hash or zset (odd count, repeated member, bad score) as the
/// integrity check of its blob failing, which is how Redis reports it.
fn relabel(e: Error, what: &str) -> Error {
    match e.kind {
        ErrorKind::Corrupt(m) if !m.contains("integrity check failed") => Error {
            offset: e.offset,
            kind: ErrorKind::Corrupt(format!("{what} integrity check failed: {m}")),
        },
        kind => Error {
            offset: e.offset,
            kind,
        },
    }
}

impl From<Value> for Loaded {
    fn from(v: Value) -> Loaded {
        Loaded::Value(v)
    }
}

/// One value of type `t` (`rdbLoadObject`).
pub fn value<R: Read>(src: &mut Src<R>, t: u8) -> Result<Loaded, Error> {
    // Structure errors found inside a blob name the offset after the blob, and say what Redis's
    // log line says ("Hash listpack integrity check failed").
    let blob_err = |src: &Src<R>, what: &str, e: String| {
        src.corrupt(format!("{what} integrity check failed: {e}"))
    };
    match t {
        TYPE_STRING => Ok(match src.string_or_int()? {
            Str::Int(i) => Value::Int(i).into(),
            Str::Bytes(b) => string_value(b).into(),
        }),
        TYPE_LIST => {
            let n = src.count()?;
            let mut l = List::new();
            for _ in 0..n {
                let e = src.string()?;
                l.push_back(&e);
            }
            Ok(list_value(l))
        }
        TYPE_SET => {
            let n = src.count()?;
            let mut s = Set::new();
            for _ in 0..n {
                let m = src.string()?;
                if !s.insert(&m) {
                    return Err(src.corrupt("Duplicate set members detected"));
                }
            }
            Ok(if s.is_empty() {
                Loaded::Empty
            } else {
                Value::Obj(Object::Set(s)).into()
            })
        }
        TYPE_ZSET | TYPE_ZSET_2 => {
            let n = src.count()?;
            let mut z = if n > strata_core::limits::ZSET_MAX_LISTPACK_ENTRIES.count() as u64 {
                ZSet::new_skiplist()
            } else {
                ZSet::new()
            };
            for _ in 0..n {
                let m = src.string()?;
                let s = if t == TYPE_ZSET {
                    src.ascii_double()?
                } else {
                    f64::from_le_bytes(src.array()?)
                };
                zset_add(src, &mut z, &m, s, false)?;
            }
            Ok(if z.is_empty() {
                Loaded::Empty
            } else {
                Value::Obj(Object::ZSet(z)).into()
            })
        }
        TYPE_HASH => {
            let n = src.count()?;
            let mut h = Hash::new();
            for _ in 0..n {
                let f = src.string()?;
                let v = src.string()?;
                if !h.insert(&f, &v) {
                    return Err(src.corrupt("Duplicate hash fields detected"));
                }
            }
            Ok(if h.is_empty() {
                Loaded::Empty
            } else {
                Value::Obj(Object::Hash(h)).into()
            })
        }
        TYPE_LIST_QUICKLIST | TYPE_LIST_QUICKLIST_2 => {
            let nodes = src.count()?;
            let mut l = List::new();
            for _ in 0..nodes {
                let container = if t == TYPE_LIST_QUICKLIST_2 {
                    src.len()?
                } else {
                    QUICKLIST_NODE_PACKED
                };
                let blob = src.string()?;
                if blob.is_empty() {
                    return Err(src.corrupt("empty quicklist node"));
                }
                match container {
                    QUICKLIST_NODE_PLAIN => l.push_back(&blob),
                    QUICKLIST_NODE_PACKED => {
                        let elems = if t == TYPE_LIST_QUICKLIST_2 {
                            listpack::parse(&blob).map_err(|e| blob_err(src, "Listpack", e))?
                        } else {
                            ziplist::parse(&blob).map_err(|e| blob_err(src, "Ziplist", e))?
                        };
                        // Empty nodes are skipped, as Redis does; an empty list fails below.
                        push_elems(&mut l, &elems);
                    }
                    c => return Err(src.corrupt(format!("unknown quicklist container {c}"))),
                }
            }
            Ok(list_value(l))
        }
        TYPE_LIST_ZIPLIST => {
            let blob = src.string()?;
            let elems = ziplist::parse(&blob).map_err(|e| blob_err(src, "List ziplist", e))?;
            let mut l = List::new();
            push_elems(&mut l, &elems);
            Ok(list_value(l))
        }
        TYPE_SET_INTSET => {
            let blob = src.string()?;
            let vals = intset::parse(&blob).map_err(|e| blob_err(src, "Intset", e))?;
            let mut s = Set::new();
            for v in vals {
                s.insert_member(strata_core::set::Member::Int(v));
            }
            Ok(Value::Obj(Object::Set(s)).into())
        }
        TYPE_ZSET_ZIPLIST | TYPE_ZSET_LISTPACK => {
            let blob = src.string()?;
            let elems = if t == TYPE_ZSET_LISTPACK {
                listpack::parse(&blob).map_err(|e| blob_err(src, "Zset listpack", e))?
            } else {
                ziplist::parse(&blob).map_err(|e| blob_err(src, "Zset ziplist", e))?
            };
            let what = if t == TYPE_ZSET_LISTPACK {
                "Zset listpack"
            } else {
                "Zset ziplist"
            };
            zset_from_packed(src, &elems).map_err(|e| relabel(e, what))
        }
        TYPE_HASH_ZIPLIST | TYPE_HASH_LISTPACK => {
            let blob = src.string()?;
            let elems = if t == TYPE_HASH_LISTPACK {
                listpack::parse(&blob).map_err(|e| blob_err(src, "Hash listpack", e))?
            } else {
                ziplist::parse(&blob).map_err(|e| blob_err(src, "Hash ziplist", e))?
            };
            let what = if t == TYPE_HASH_LISTPACK {
                "Hash listpack"
            } else {
                "Hash ziplist"
            };
            hash_from_packed(src, &elems).map_err(|e| relabel(e, what))
        }
        TYPE_HASH_ZIPMAP => {
            let blob = src.string()?;
            let pairs = zipmap::parse(&blob).map_err(|e| blob_err(src, "Zipmap", e))?;
            hash_from_pairs(
                src,
                pairs.into_iter().map(|(f, v)| (f.to_vec(), v.to_vec())),
                false,
            )
        }
        TYPE_STREAM_LISTPACKS | TYPE_STREAM_LISTPACKS_2 | 20 | 21 => {
            Err(src.err(ErrorKind::Unsupported(format!(
                "stream value (RDB type {t}): streams are not stored yet"
            ))))
        }
        TYPE_MODULE_PRE_GA | TYPE_MODULE_2 => Err(src.err(ErrorKind::Unsupported(format!(
            "module value (RDB type {t}): modules are not supported"
        )))),
        _ => Err(src.corrupt(format!("unknown value type {t}"))),
    }
}
