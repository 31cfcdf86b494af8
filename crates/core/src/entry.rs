//! One key and its value in a single heap allocation.
//!
//! The keyspace is dominated by small keys with small values (Redis spends ~120 bytes on a 14-byte key
//! with a 32-byte value). An [`Entry`] is one thin pointer to one allocation that holds everything:
//!
//! ```text
//! off 0   next: Option<Entry>      chain link, owned by the Dict
//! off 8   meta: u32                bits 0..24 LRU clock / LFU counter, bits 24..32 flags (kind,
//!                                  TTL, unshared)
//! off 12  [expire: i64]            only when FLAG_TTL (unix ms, unaligned)
//!         varint key_len
//!         [varint val_len]         only for KIND_INLINE
//!         key bytes
//!         value: inline bytes | i64 (KIND_INT) | Object (KIND_OBJECT, 16 bytes at the next
//!                multiple of 8)
//! ```
//!
//! A collection's [`Object`] is two words — a tag and the collection's one-word representation —
//! stored in the entry itself, so a small hash, set or sorted set is its entry plus one packed
//! allocation (a 14-byte key's entry is 48 bytes: 12 + 1 + 14, padding, 16).
//!
//! Invariants: the allocation size is always recomputable from the header (so it is never stored);
//! an Entry exclusively owns its `Object` and its chain successor.
//!
//! Strings written whole (SET and friends) live inline whatever their length: one allocation per
//! key. Redis's encoding names still come out right: an inline string of at most [`EMBSTR_MAX`]
//! bytes is what Redis calls "embstr", a longer one what it calls "raw"; strings modified in place
//! (APPEND, SETRANGE) become a growable `Object::Str`, which Redis also reports as "raw".

use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

use bytes::Bytes;

/// Redis's OBJ_ENCODING_EMBSTR_SIZE_LIMIT: longer strings are reported as "raw".
pub const EMBSTR_MAX: usize = 44;

const KIND_INLINE: u8 = 0;
const KIND_INT: u8 = 1;
const KIND_OBJECT: u8 = 2;
const KIND_MASK: u8 = 0b11;
const FLAG_TTL: u8 = 0b100;
/// An int-encoded value Redis would hold in an object of its own rather than one of its shared
/// integers (see [`Entry::is_unshared`]).
const FLAG_UNSHARED: u8 = 0b1000;
/// The snapshot mark: a key whose mark equals its database's snapshot parity has been written by
/// the running snapshot, or did not exist when it started (see `strata_shard::snapshot`).
const FLAG_SNAP: u8 = 0b1_0000;
/// The flags a rebuilt entry (new expiry, new value in place) keeps from the old one.
const FLAGS_KEPT: u8 = FLAG_UNSHARED | FLAG_SNAP;
const HEADER: usize = 12;
const LRU_MASK: u32 = 0x00FF_FFFF;

/// A value richer than a string written whole: a collection, or a string modified in place. Two
/// words, stored inline in its entry; every variant is one pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    /// A string with Redis's "raw" encoding: modified in place (APPEND, SETRANGE), so growable.
    Str(Box<Vec<u8>>),
    Hash(crate::Hash),
    List(Box<crate::List>),
    Set(crate::Set),
    ZSet(crate::ZSet),
}

/// Bytes an object takes in its entry.
const OBJECT_SIZE: usize = std::mem::size_of::<Object>();
const _: () = assert!(OBJECT_SIZE == 16 && std::mem::align_of::<Object>() == 8);

impl Object {
    /// The name TYPE (and SCAN ... TYPE) gives the value.
    pub fn type_name(&self) -> &'static str {
        match self {
            Object::Str(_) => "string",
            Object::Hash(_) => "hash",
            Object::List(_) => "list",
            Object::Set(_) => "set",
            Object::ZSet(_) => "zset",
        }
    }

    /// The encoding OBJECT ENCODING reports, in Redis's words.
    pub fn encoding(&self) -> &'static str {
        match self {
            Object::Str(_) => "raw",
            Object::Hash(h) => h.encoding(),
            Object::List(l) => l.encoding(),
            Object::Set(s) => s.encoding(),
            Object::ZSet(z) => z.encoding(),
        }
    }

    /// Heap bytes the object owns beyond its two words in the entry (approximate for
    /// collections, O(1)).
    pub fn heap_size(&self) -> usize {
        match self {
            Object::Str(s) => std::mem::size_of::<Vec<u8>>() + s.capacity(),
            Object::Hash(h) => h.heap_size(),
            Object::List(l) => std::mem::size_of::<crate::List>() + l.heap_size(),
            Object::Set(s) => s.heap_size(),
            Object::ZSet(z) => z.heap_size(),
        }
    }

    /// Elements in a collection (1 for a string): what freeing it costs, as Redis's lazy-free
    /// "effort" counts it.
    pub fn elements(&self) -> usize {
        match self {
            Object::Str(_) => 1,
            Object::Hash(h) => h.len(),
            Object::List(l) => l.len(),
            Object::Set(s) => s.len(),
            Object::ZSet(z) => z.len(),
        }
    }
}

/// An owned value, as it is stored or moved between shards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string, stored inline in the entry.
    Str(Bytes),
    /// A string holding a canonical 64-bit integer (Redis's "int" encoding).
    Int(i64),
    /// Anything else.
    Obj(Object),
}

/// A borrowed view of an entry's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// An inline string ("embstr" up to [`EMBSTR_MAX`] bytes, "raw" beyond).
    Inline(&'a [u8]),
    /// An integer-encoded string.
    Int(i64),
    /// A heap object.
    Obj(&'a Object),
}

/// A key with its value, expiry and access clock, in one allocation. See the module docs.
#[repr(transparent)]
pub struct Entry(pub(crate) NonNull<u8>);

// SAFETY: an Entry exclusively owns its allocation and everything reachable from it.
unsafe impl Send for Entry {}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Writes a LEB128 varint at `p`, returning the bytes written.
///
/// # Safety
/// `p` must be valid for `varint_len(v)` bytes of writes.
unsafe fn put_varint(p: *mut u8, mut v: usize) -> usize {
    let mut i = 0;
    loop {
        let byte = (v & 0x7F) as u8;
        v >>= 7;
        if v == 0 {
            *p.add(i) = byte;
            return i + 1;
        }
        *p.add(i) = byte | 0x80;
        i += 1;
    }
}

/// Reads a LEB128 varint written by [`put_varint`].
///
/// # Safety
/// `p` must point at a varint written by `put_varint`.
unsafe fn get_varint(p: *const u8) -> (usize, usize) {
    let mut v = 0usize;
    let mut shift = 0;
    let mut i = 0;
    loop {
        let byte = *p.add(i);
        v |= ((byte & 0x7F) as usize) << shift;
        i += 1;
        if byte & 0x80 == 0 {
            return (v, i);
        }
        shift += 7;
    }
}

/// Decoded header: where the key and value live and how big the allocation is.
/// Where an object's field starts for a key ending at `key_end`: the next multiple of 8, so the
/// field can be borrowed as an `Object` (the allocation is 8-aligned).
fn object_offset(key_end: usize) -> usize {
    (key_end + 7) & !7
}

struct Parts {
    kind: u8,
    key_off: usize,
    key_len: usize,
    val_off: usize,
    val_len: usize,
}

impl Parts {
    fn alloc_size(&self) -> usize {
        self.val_off + self.val_len
    }
}

impl Entry {
    /// Builds an entry.
    pub fn new(key: &[u8], value: Value, expire: Option<i64>, lru: u32) -> Entry {
        match value {
            Value::Str(s) => Self::build(key, KIND_INLINE, &s, expire, lru),
            Value::Int(i) => Self::build(key, KIND_INT, &i.to_ne_bytes(), expire, lru),
            Value::Obj(o) => Self::new_object(key, o, expire, lru),
        }
    }

    fn new_object(key: &[u8], obj: Object, expire: Option<i64>, lru: u32) -> Entry {
        let e = Self::build(key, KIND_OBJECT, &[], expire, lru);
        // SAFETY: `build` sized the allocation with an 8-aligned, object-sized value field
        // (`Parts`); the object is moved in, and the entry owns it from here.
        unsafe {
            let v = e.0.as_ptr().add(e.parts().val_off);
            (v as *mut Object).write(obj);
        }
        e
    }

    /// Allocates and writes the header and key; the value field gets `val` (inline and int kinds)
    /// or is left for the caller to fill (KIND_OBJECT: `val` is empty and the field is sized and
    /// aligned for an [`Object`]).
    fn build(key: &[u8], kind: u8, val: &[u8], expire: Option<i64>, lru: u32) -> Entry {
        let ttl_len = if expire.is_some() { 8 } else { 0 };
        let vlen_len = if kind == KIND_INLINE {
            varint_len(val.len())
        } else {
            0
        };
        let key_end = HEADER + ttl_len + varint_len(key.len()) + vlen_len + key.len();
        let size = if kind == KIND_OBJECT {
            object_offset(key_end) + OBJECT_SIZE
        } else {
            key_end + val.len()
        };
        let layout = Layout::from_size_align(size, 8).expect("entry size overflows a Layout");
        // SAFETY: size > 0; every byte written below lies within `size`, as computed above.
        unsafe {
            let p = alloc(layout);
            if p.is_null() {
                handle_alloc_error(layout);
            }
            (p as *mut Option<Entry>).write(None);
            let flags = kind | if expire.is_some() { FLAG_TTL } else { 0 };
            (p.add(8) as *mut u32).write((lru & LRU_MASK) | ((flags as u32) << 24));
            let mut off = HEADER;
            if let Some(at) = expire {
                (p.add(off) as *mut i64).write_unaligned(at);
                off += 8;
            }
            off += put_varint(p.add(off), key.len());
            if kind == KIND_INLINE {
                off += put_varint(p.add(off), val.len());
            }
            std::ptr::copy_nonoverlapping(key.as_ptr(), p.add(off), key.len());
            off += key.len();
            std::ptr::copy_nonoverlapping(val.as_ptr(), p.add(off), val.len());
            Entry(NonNull::new_unchecked(p))
        }
    }

    fn meta(&self) -> u32 {
        // SAFETY: every entry has a 12-byte header.
        unsafe { (self.0.as_ptr().add(8) as *const u32).read() }
    }

    fn flags(&self) -> u8 {
        (self.meta() >> 24) as u8
    }

    fn parts(&self) -> Parts {
        let flags = self.flags();
        let kind = flags & KIND_MASK;
        let p = self.0.as_ptr();
        let mut off = HEADER + if flags & FLAG_TTL != 0 { 8 } else { 0 };
        // SAFETY: the header layout was written by `build`.
        unsafe {
            let (key_len, n) = get_varint(p.add(off));
            off += n;
            let val_len = match kind {
                KIND_INLINE => {
                    let (v, n) = get_varint(p.add(off));
                    off += n;
                    v
                }
                KIND_INT => 8,
                _ => OBJECT_SIZE,
            };
            let val_off = if kind == KIND_OBJECT {
                object_offset(off + key_len)
            } else {
                off + key_len
            };
            Parts {
                kind,
                key_off: off,
                key_len,
                val_off,
                val_len,
            }
        }
    }

    /// The key bytes.
    pub fn key(&self) -> &[u8] {
        let parts = self.parts();
        // SAFETY: key bytes lie within the allocation, which lives as long as &self.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr().add(parts.key_off), parts.key_len) }
    }

    /// The value.
    pub fn value(&self) -> ValueRef<'_> {
        let parts = self.parts();
        // SAFETY: value bytes lie within the allocation; KIND_OBJECT holds a live, aligned Object.
        unsafe {
            let v = self.0.as_ptr().add(parts.val_off);
            match parts.kind {
                KIND_INLINE => ValueRef::Inline(std::slice::from_raw_parts(v, parts.val_len)),
                KIND_INT => ValueRef::Int((v as *const i64).read_unaligned()),
                _ => ValueRef::Obj(&*(v as *const Object)),
            }
        }
    }

    /// The heap object, mutably, if the value is one.
    pub fn object_mut(&mut self) -> Option<&mut Object> {
        let parts = self.parts();
        if parts.kind != KIND_OBJECT {
            return None;
        }
        // SAFETY: KIND_OBJECT holds a live, aligned Object, owned by self.
        unsafe { Some(&mut *(self.0.as_ptr().add(parts.val_off) as *mut Object)) }
    }

    /// Overwrites an int-encoded value in place; returns false (doing nothing) for other kinds.
    pub fn set_int(&mut self, i: i64) -> bool {
        let parts = self.parts();
        if parts.kind != KIND_INT {
            return false;
        }
        // SAFETY: KIND_INT stores 8 value bytes at val_off.
        unsafe { (self.0.as_ptr().add(parts.val_off) as *mut i64).write_unaligned(i) };
        true
    }

    /// True if the value was marked as an object of its own ([`Entry::set_unshared`]): what OBJECT
    /// REFCOUNT tells apart for small integers, which Redis otherwise shares between keys.
    pub fn is_unshared(&self) -> bool {
        self.flags() & FLAG_UNSHARED != 0
    }

    /// Marks the value as an object of its own (`on`) or not. Kept when the entry is rebuilt for
    /// another expiry; a new value starts unmarked.
    pub fn set_unshared(&mut self, on: bool) {
        let bit = (FLAG_UNSHARED as u32) << 24;
        let meta = if on {
            self.meta() | bit
        } else {
            self.meta() & !bit
        };
        // SAFETY: every entry has a 12-byte header.
        unsafe { (self.0.as_ptr().add(8) as *mut u32).write(meta) }
    }

    /// The snapshot mark (see [`FLAG_SNAP`]). Kept when the entry is rebuilt for another expiry or
    /// value in place.
    #[inline]
    pub fn snap_mark(&self) -> bool {
        self.flags() & FLAG_SNAP != 0
    }

    /// Sets the snapshot mark.
    #[inline]
    pub fn set_snap_mark(&mut self, on: bool) {
        let bit = (FLAG_SNAP as u32) << 24;
        let meta = (self.meta() & !bit) | if on { bit } else { 0 };
        // SAFETY: every entry has a 12-byte header.
        unsafe { (self.0.as_ptr().add(8) as *mut u32).write(meta) }
    }

    /// Copies the flags a rebuilt entry keeps (the unshared and snapshot marks) from `flags`.
    fn keep_flags(&mut self, flags: u8) {
        let kept = ((flags & FLAGS_KEPT) as u32) << 24;
        let meta = (self.meta() & !((FLAGS_KEPT as u32) << 24)) | kept;
        // SAFETY: every entry has a 12-byte header.
        unsafe { (self.0.as_ptr().add(8) as *mut u32).write(meta) }
    }

    /// Absolute expiry in unix milliseconds, if the key is volatile.
    pub fn expire(&self) -> Option<i64> {
        if self.flags() & FLAG_TTL == 0 {
            return None;
        }
        // SAFETY: FLAG_TTL means 8 expiry bytes follow the header.
        Some(unsafe { (self.0.as_ptr().add(HEADER) as *const i64).read_unaligned() })
    }

    /// The 24-bit LRU clock or LFU counter.
    pub fn lru(&self) -> u32 {
        self.meta() & LRU_MASK
    }

    /// Sets the 24-bit LRU clock or LFU counter.
    pub fn set_lru(&mut self, lru: u32) {
        let meta = (self.meta() & !LRU_MASK) | (lru & LRU_MASK);
        // SAFETY: every entry has a 12-byte header.
        unsafe { (self.0.as_ptr().add(8) as *mut u32).write(meta) }
    }

    /// Returns the same key and value with another expiry (reallocating only if presence changes).
    pub fn with_expire(self, expire: Option<i64>) -> Entry {
        match (self.expire().is_some(), expire) {
            (true, Some(at)) => {
                // SAFETY: FLAG_TTL means 8 expiry bytes follow the header.
                unsafe { (self.0.as_ptr().add(HEADER) as *mut i64).write_unaligned(at) };
                self
            }
            (false, None) => self,
            _ => {
                let (lru, flags) = (self.lru(), self.flags());
                let key = self.key().to_vec();
                let mut e = Entry::new(&key, self.into_value(), expire, lru);
                e.keep_flags(flags);
                e
            }
        }
    }

    /// Returns an entry with the same key, expiry, clock and snapshot mark holding `value`.
    pub fn with_value(self, value: Value) -> Entry {
        let mut e = Entry::new(self.key(), value, self.expire(), self.lru());
        e.keep_flags(self.flags() & FLAG_SNAP);
        drop(self);
        e
    }

    /// Replaces the value where the entry stands (same key, expiry, clock, snapshot mark and chain
    /// position: a new allocation swapped into `self`). Returns the old entry, detached from the
    /// chain, so the caller decides when it is freed.
    pub fn replace_value(&mut self, value: Value) -> Entry {
        let mut new = Entry::new(self.key(), value, self.expire(), self.lru());
        new.keep_flags(self.flags() & FLAG_SNAP);
        *new.next_mut() = self.next_mut().take();
        std::mem::replace(self, new)
    }

    /// Consumes the entry, returning its value without copying heap objects.
    pub fn into_value(mut self) -> Value {
        let v = match self.value() {
            ValueRef::Inline(s) => Value::Str(Bytes::copy_from_slice(s)),
            ValueRef::Int(i) => Value::Int(i),
            ValueRef::Obj(_) => {
                let parts = self.parts();
                drop(self.next_mut().take());
                // SAFETY: KIND_OBJECT holds a live Object: it is moved out, and the allocation
                // freed without running Drop (which would drop the object again).
                unsafe {
                    let p = self.0.as_ptr();
                    let obj = (p.add(parts.val_off) as *const Object).read();
                    std::mem::forget(self);
                    dealloc(p, Layout::from_size_align_unchecked(parts.alloc_size(), 8));
                    return Value::Obj(obj);
                }
            }
        };
        drop(self);
        v
    }

    /// An owned copy of the value (for COPY, GET of a shared value across shards, ...).
    pub fn clone_value(&self) -> Value {
        match self.value() {
            ValueRef::Inline(s) => Value::Str(Bytes::copy_from_slice(s)),
            ValueRef::Int(i) => Value::Int(i),
            ValueRef::Obj(o) => Value::Obj(o.clone()),
        }
    }

    /// Bytes this entry occupies on the heap, including its object (approximate for objects).
    pub fn heap_size(&self) -> usize {
        let parts = self.parts();
        let own = parts.alloc_size();
        match self.value() {
            ValueRef::Obj(o) => own + o.heap_size(),
            _ => own,
        }
    }

    /// The chain link (owned by the Dict).
    pub(crate) fn next(&self) -> &Option<Entry> {
        // SAFETY: offset 0 holds an Option<Entry>, initialised by `build`.
        unsafe { &*(self.0.as_ptr() as *const Option<Entry>) }
    }

    pub(crate) fn next_mut(&mut self) -> &mut Option<Entry> {
        // SAFETY: as in `next`, and we hold &mut self.
        unsafe { &mut *(self.0.as_ptr() as *mut Option<Entry>) }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        // Unlink the chain iteratively so a long chain cannot overflow the stack.
        let mut next = self.next_mut().take();
        while let Some(mut e) = next {
            next = e.next_mut().take();
        }
        let parts = self.parts();
        // SAFETY: we own the allocation; KIND_OBJECT holds a live Object.
        unsafe {
            let p = self.0.as_ptr();
            if parts.kind == KIND_OBJECT {
                std::ptr::drop_in_place(p.add(parts.val_off) as *mut Object);
            }
            dealloc(p, Layout::from_size_align_unchecked(parts.alloc_size(), 8));
        }
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value", &self.value())
            .field("expire", &self.expire())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_roundtrip_and_size() {
        let e = Entry::new(
            b"key:0000000001",
            Value::Str(Bytes::from(vec![b'x'; 32])),
            None,
            7,
        );
        assert_eq!(e.key(), b"key:0000000001");
        assert_eq!(e.value(), ValueRef::Inline(&[b'x'; 32]));
        assert_eq!(e.expire(), None);
        assert_eq!(e.lru(), 7);
        // 12 header + 2 varints + 14 + 32: fits a 64-byte allocator class.
        assert_eq!(e.heap_size(), 60);
    }

    #[test]
    fn long_strings_stay_inline_and_objects_round_trip() {
        let long = Bytes::from(vec![b'y'; 300]);
        let e = Entry::new(b"k", Value::Str(long.clone()), Some(5), 0);
        assert_eq!(e.value(), ValueRef::Inline(&long));
        assert_eq!(
            (e.expire(), e.heap_size()),
            (Some(5), 12 + 8 + 1 + 2 + 1 + 300)
        );
        assert_eq!(e.into_value(), Value::Str(long.clone()));
        let raw = Value::Obj(Object::Str(Box::new(long.to_vec())));
        let e = Entry::new(b"k", raw.clone(), None, 0);
        assert_eq!(
            e.value(),
            ValueRef::Obj(&Object::Str(Box::new(long.to_vec())))
        );
        assert_eq!(e.into_value(), raw);
    }

    #[test]
    fn expire_changes_preserve_value() {
        let e = Entry::new(b"k", Value::Int(-42), None, 3);
        let e = e.with_expire(Some(1_000));
        assert_eq!(
            (e.value(), e.expire(), e.lru()),
            (ValueRef::Int(-42), Some(1_000), 3)
        );
        let e = e.with_expire(Some(2_000));
        assert_eq!(e.expire(), Some(2_000));
        let mut e = e.with_expire(None);
        assert_eq!((e.value(), e.expire()), (ValueRef::Int(-42), None));
        assert!(e.set_int(9));
        assert_eq!(e.value(), ValueRef::Int(9));
    }

    #[test]
    fn the_unshared_mark_survives_expiry_changes_not_a_new_value() {
        let mut e = Entry::new(b"k", Value::Int(5), None, 3);
        assert!(!e.is_unshared());
        e.set_unshared(true);
        assert!(e.is_unshared());
        assert_eq!(
            (e.value(), e.lru(), e.expire()),
            (ValueRef::Int(5), 3, None)
        );
        // Gaining and losing a TTL rebuilds the entry: the mark goes along.
        let e = e.with_expire(Some(1_000));
        assert!(e.is_unshared());
        assert_eq!(
            (e.value(), e.expire(), e.lru()),
            (ValueRef::Int(5), Some(1_000), 3)
        );
        let mut e = e.with_expire(None);
        assert!(e.is_unshared());
        // A new value starts unmarked; the mark can be cleared.
        let mut fresh = Entry::new(b"k", Value::Int(5), None, 0);
        let _old = fresh.replace_value(Value::Int(6));
        assert!(!fresh.is_unshared());
        e.set_unshared(false);
        assert!(!e.is_unshared());
        assert_eq!(e.value(), ValueRef::Int(5));
    }

    #[test]
    fn replace_value_keeps_key_ttl_clock_and_link() {
        let mut e = Entry::new(b"k", Value::Int(1), Some(77), 9);
        *e.next_mut() = Some(Entry::new(b"tail", Value::Int(2), None, 0));
        let old = e.replace_value(Value::Str(Bytes::from_static(b"new")));
        assert_eq!(
            (old.value(), old.next().is_none()),
            (ValueRef::Int(1), true)
        );
        assert_eq!(
            (e.key(), e.value(), e.expire(), e.lru()),
            (&b"k"[..], ValueRef::Inline(b"new"), Some(77), 9)
        );
        assert_eq!(e.next().as_ref().map(Entry::key), Some(&b"tail"[..]));
    }

    #[test]
    fn large_keys_use_multibyte_varints() {
        let key = vec![b'k'; 70_000];
        let val = Bytes::from(vec![b'v'; 40]);
        let mut e = Entry::new(&key, Value::Str(val.clone()), Some(-1), LRU_MASK + 5);
        assert_eq!(e.key(), &key[..]);
        assert_eq!(e.value(), ValueRef::Inline(&val));
        assert_eq!(e.lru(), 4);
        e.set_lru(11);
        assert_eq!((e.lru(), e.expire()), (11, Some(-1)));
        assert!(e.object_mut().is_none());
    }

    #[test]
    fn objects_live_aligned_in_the_entry() {
        use crate::Hash;
        for (key_len, ttl) in [
            (0, None),
            (1, Some(9)),
            (14, None),
            (15, Some(-3)),
            (200, None),
        ] {
            let key = vec![b'k'; key_len];
            let mut h = Hash::new();
            h.insert(b"f", b"v");
            let mut e = Entry::new(&key, Value::Obj(Object::Hash(h.clone())), ttl, 1);
            let ValueRef::Obj(o) = e.value() else {
                panic!("an object")
            };
            assert_eq!((o as *const Object as usize) % 8, 0);
            assert_eq!((e.key(), e.expire()), (&key[..], ttl));
            let Some(Object::Hash(m)) = e.object_mut() else {
                panic!("a hash")
            };
            m.insert(b"g", b"w");
            let e = e.with_expire(Some(5));
            let Value::Obj(Object::Hash(back)) = e.into_value() else {
                panic!("a hash")
            };
            h.insert(b"g", b"w");
            assert_eq!(back, h);
        }
        // A 14-byte key's hash entry: 12 + 1 + 14 = 27, padded to 32, + 16.
        let e = Entry::new(
            b"hash:000000000",
            Value::Obj(Object::Hash(Hash::new())),
            None,
            0,
        );
        assert_eq!(e.parts().alloc_size(), 48);
    }
}
