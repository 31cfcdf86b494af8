//! Values to RDB bytes, as Redis 7.0's `rdbSaveObject` writes them for each encoding.

use strata_core::list::Elem as ListElem;
use strata_core::num::{format_d2string, parse_i64};
use strata_core::set::Member;
use strata_core::{Hash, List, Object, Set, ValueRef, ZSet};

use crate::listpack;
use crate::types::*;
use crate::{Access, WriteOptions};

/// A length in the 6/14/32/64-bit form.
pub fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(LEN_32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(LEN_64);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// `rdbEncodeInteger`: the integer encodings of a string (8/16/32-bit), if `v` fits one.
fn put_encoded_int(out: &mut Vec<u8>, v: i64) -> bool {
    if let Ok(b) = i8::try_from(v) {
        out.extend_from_slice(&[ENC_MARK | ENC_INT8, b as u8]);
    } else if let Ok(h) = i16::try_from(v) {
        out.push(ENC_MARK | ENC_INT16);
        out.extend_from_slice(&h.to_le_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(ENC_MARK | ENC_INT32);
        out.extend_from_slice(&w.to_le_bytes());
    } else {
        return false;
    }
    true
}

/// `rdbSaveRawString`: an integer encoding for short canonical integers, LZF for strings over 20
/// bytes when it saves at least 4 bytes (and `compress`), else length + bytes.
pub fn put_string(out: &mut Vec<u8>, s: &[u8], compress: bool) {
    if s.len() <= 11 {
        if let Some(v) = parse_i64(s) {
            if put_encoded_int(out, v) {
                return;
            }
        }
    }
    if compress && s.len() > 20 {
        if let Some(c) = strata_core::lzf::compress(s, s.len() - 4) {
            if !c.is_empty() {
                out.push(ENC_MARK | ENC_LZF);
                put_len(out, c.len() as u64);
                put_len(out, s.len() as u64);
                out.extend_from_slice(&c);
                return;
            }
        }
    }
    put_len(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// `rdbSaveLongLongAsStringObject`: an int-encoded string.
pub fn put_int_string(out: &mut Vec<u8>, v: i64) {
    if !put_encoded_int(out, v) {
        let s = v.to_string();
        put_len(out, s.len() as u64);
        out.extend_from_slice(s.as_bytes());
    }
}

/// The type byte of a value as it will be written.
pub fn type_of(v: ValueRef<'_>) -> u8 {
    match v {
        ValueRef::Inline(_) | ValueRef::Int(_) | ValueRef::Obj(Object::Str(_)) => TYPE_STRING,
        ValueRef::Obj(Object::List(_)) => TYPE_LIST_QUICKLIST_2,
        ValueRef::Obj(Object::Set(s)) if s.encoding() == "intset" => TYPE_SET_INTSET,
        ValueRef::Obj(Object::Set(_)) => TYPE_SET,
        ValueRef::Obj(Object::ZSet(z)) if z.is_packed() => TYPE_ZSET_LISTPACK,
        ValueRef::Obj(Object::ZSet(_)) => TYPE_ZSET_2,
        ValueRef::Obj(Object::Hash(h)) if h.is_listpack() => TYPE_HASH_LISTPACK,
        ValueRef::Obj(Object::Hash(_)) => TYPE_HASH,
    }
}

/// The value's encoding, without the type byte.
pub fn put_value(out: &mut Vec<u8>, v: ValueRef<'_>, compress: bool) {
    match v {
        ValueRef::Inline(s) => put_string(out, s, compress),
        ValueRef::Int(i) => put_int_string(out, i),
        ValueRef::Obj(Object::Str(s)) => put_string(out, s, compress),
        ValueRef::Obj(Object::List(l)) => put_list(out, l, compress),
        ValueRef::Obj(Object::Set(s)) => put_set(out, s, compress),
        ValueRef::Obj(Object::ZSet(z)) => put_zset(out, z, compress),
        ValueRef::Obj(Object::Hash(h)) => put_hash(out, h, compress),
    }
}

fn push_list_elem(b: &mut listpack::Builder, e: &ListElem<'_>) {
    match e {
        ListElem::Bytes(s) => b.push(s),
        ListElem::Shared(s) => b.push(s),
        ListElem::Int(i) => b.push_int(*i),
    }
}

/// QUICKLIST_2: the node count, then per node its container (1 plain, 2 packed) and its blob (the
/// element itself, or a listpack of the node's elements). Nodes follow the list's own layout.
fn put_list(out: &mut Vec<u8>, l: &List, compress: bool) {
    let nodes: Vec<_> = l.node_layout().collect();
    put_len(out, nodes.len() as u64);
    let mut it = l.iter();
    for n in nodes {
        if n.plain {
            put_len(out, QUICKLIST_NODE_PLAIN);
            let e = it.next().map(|e| e.to_vec()).unwrap_or_default();
            put_string(out, &e, compress);
        } else {
            put_len(out, QUICKLIST_NODE_PACKED);
            let mut b = listpack::Builder::new();
            for e in it.by_ref().take(n.count) {
                push_list_elem(&mut b, &e);
            }
            put_string(out, &b.finish(), compress);
        }
    }
}

fn put_set(out: &mut Vec<u8>, s: &Set, compress: bool) {
    if s.encoding() == "intset" {
        let vals: Vec<i64> = s
            .iter()
            .map(|m| match m {
                Member::Int(i) => i,
                // An intset holds only integers; a member read as bytes is still one.
                Member::Str(b) => parse_i64(b).unwrap_or_default(),
            })
            .collect();
        put_string(out, &crate::intset::build(&vals), compress);
    } else {
        put_len(out, s.len() as u64);
        for m in s.iter() {
            match m {
                Member::Int(i) => put_string(out, i.to_string().as_bytes(), compress),
                Member::Str(b) => put_string(out, b, compress),
            }
        }
    }
}

fn put_zset(out: &mut Vec<u8>, z: &ZSet, compress: bool) {
    if z.is_packed() {
        let mut b = listpack::Builder::new();
        z.for_each(|m, s| {
            b.push(m);
            b.push(format_d2string(s).as_bytes());
        });
        put_string(out, &b.finish(), compress);
    } else {
        // From the greatest to the smallest, as Redis writes them (its loader inserts at the head).
        put_len(out, z.len() as u64);
        z.range(0..z.len(), true, |m, s| {
            put_string(out, m, compress);
            out.extend_from_slice(&s.to_le_bytes());
        });
    }
}

fn put_hash(out: &mut Vec<u8>, h: &Hash, compress: bool) {
    if h.is_listpack() {
        let mut b = listpack::Builder::new();
        for (f, v) in h.iter() {
            b.push(f);
            b.push(v);
        }
        put_string(out, &b.finish(), compress);
    } else {
        put_len(out, h.len() as u64);
        for (f, v) in h.iter() {
            put_string(out, f, compress);
            put_string(out, v, compress);
        }
    }
}

/// One key's record; see [`crate::encode_key`].
pub fn key_record(
    out: &mut Vec<u8>,
    key: &[u8],
    value: ValueRef<'_>,
    expire_ms: Option<i64>,
    access: Access,
    opts: WriteOptions,
) {
    if let Some(ms) = expire_ms {
        out.push(OP_EXPIRETIME_MS);
        out.extend_from_slice(&ms.to_le_bytes());
    }
    match access {
        Access::None => {}
        Access::IdleSecs(s) => {
            out.push(OP_IDLE);
            put_len(out, s);
        }
        Access::Freq(f) => out.extend_from_slice(&[OP_FREQ, f]),
    }
    out.push(type_of(value));
    put_string(out, key, opts.compress);
    put_value(out, value, opts.compress);
}
