//! A hash (Redis's t_hash.c): field → value, in one of two encodings.
//!
//! Both store a field and its value as one *pair*: a header, then the field's bytes, then the
//! value's. The header is a single byte when both lengths are under 16 (most small-hash fields and
//! values), else a marker and two varints; a listpack spends four bytes per pair.
//!
//! * **listpack** (small): the pairs packed in one exactly sized buffer ([`PackBuf`], the hash's
//!   only allocation: a hash is one word, inline in its key's entry), in insertion order —
//!   Redis's listpack keeps that order and HGETALL/HSCAN answer in it, so Strata's replies match
//!   byte for byte. Lookups are linear, as in Redis; the thresholds keep the buffer small.
//! * **hashtable** (big): a [`hashbrown::HashTable`] of [`Cell`]s, each a pair in its own
//!   allocation behind a thin pointer: 8 bytes of slot + 1 control byte per bucket and one
//!   allocation per field, where Redis spends a dictEntry, a bucket and two sds. Hashed with
//!   foldhash under a per-process random seed, so clients cannot aim at one bucket. `Cell` is the
//!   module's only unsafe code (a `Box<[u8]>` whose length lives in its own header); the unit tests
//!   run under Miri.
//!
//! Invariants:
//! * A hash is a listpack while it has at most `hash-max-listpack-entries` fields and every field
//!   and value is at most `hash-max-listpack-value` bytes, as of the write that made it; a write that
//!   breaks either converts it (Redis 7.0 never converts back). Reads never restructure.
//! * Updating an existing field keeps its position (listpack order is first-insertion order).
//! * `heap_size` is O(1): the packed buffer's length, or the table's allocation plus a running
//!   count of pair bytes.
//! * The table shrinks when a delete leaves it under 1/8 full, so random probing (HRANDFIELD)
//!   finds an element in a few tries.
//!
//! HSCAN over the table walks bucket indexes in order; its cursor is the next bucket with the table's
//! *layout epoch* in the low 16 bits. Cells never move in hashbrown except when the table is
//! restructured (it grows or rehashes its tombstones in place when an insert finds it full, and
//! shrinks after deletes); each restructure bumps the epoch, and a cursor from another epoch restarts
//! the walk at bucket 0. So every field present for the whole scan is returned at least once, even if
//! the hash grows or shrinks meanwhile — Redis's guarantee (SSCAN does the same, see set.rs). Where
//! Redis does better: its reverse-binary cursor never restarts, so a scan of a hash that keeps
//! growing repeats fields (each doubling can restart it once, so the total work stays within a few
//! times the final size), and 2^16 restructures exactly between two calls would go unseen.

use std::hash::BuildHasher;
use std::ops::Range;
use std::ptr::NonNull;
use std::sync::OnceLock;

use hashbrown::HashTable;

use crate::limits::{HASH_MAX_LISTPACK_ENTRIES, HASH_MAX_LISTPACK_VALUE};
use crate::pack::{PackBuf, PackOr, Packed, Rep, MAX_PACK};

/// The packed buffer's header bytes (counted by `heap_size`).
const PACK_HEADER: usize = 8;

/// A hash: field → value; "listpack" while small, "hashtable" beyond.
///
/// One word (it lives inline in every hash key's entry): the listpack's own allocation, or the
/// boxed table.
#[derive(Clone)]
pub struct Hash {
    repr: PackOr<Pack, Table>,
}

impl Default for Hash {
    fn default() -> Self {
        Hash {
            repr: PackOr::pack(Pack(PackBuf::new())),
        }
    }
}

// ===== pairs: one header, then the field's and the value's bytes =====
//
// A pair is `header field value`. The header is one byte `flen << 4 | vlen` when both lengths are
// under 16 (except 15/15), else 0xFF followed by both lengths as LEB128 varints. Short pairs — most
// small-hash fields and values — so cost one byte of overhead where a listpack spends four.

const LONG_PAIR: u8 = 0xFF;

fn put_varint(buf: &mut Vec<u8>, mut v: usize) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Reads a varint through `byte(i)`, starting at index `at`: (value, next index). The bytes were
/// written by this module.
fn get_varint(byte: impl Fn(usize) -> u8, at: usize) -> (usize, usize) {
    let (mut v, mut shift, mut i) = (0usize, 0, at);
    loop {
        let b = byte(i);
        v |= usize::from(b & 0x7f) << shift;
        i += 1;
        if b < 0x80 {
            return (v, i);
        }
        shift += 7;
    }
}

fn is_short(flen: usize, vlen: usize) -> bool {
    flen < 16 && vlen < 16 && (flen, vlen) != (15, 15)
}

/// Bytes a pair takes.
fn pair_len(field: &[u8], value: &[u8]) -> usize {
    let (f, v) = (field.len(), value.len());
    let header = if is_short(f, v) {
        1
    } else {
        1 + varint_len(f) + varint_len(v)
    };
    header + f + v
}

fn put_pair(buf: &mut Vec<u8>, field: &[u8], value: &[u8]) {
    let (f, v) = (field.len(), value.len());
    if is_short(f, v) {
        buf.push((f << 4 | v) as u8);
    } else {
        buf.push(LONG_PAIR);
        put_varint(buf, f);
        put_varint(buf, v);
    }
    buf.extend_from_slice(field);
    buf.extend_from_slice(value);
}

/// Decodes the pair header at `at` through `byte(i)`: (header end, field length, value length).
fn pair_header(byte: impl Fn(usize) -> u8, at: usize) -> (usize, usize, usize) {
    let h = byte(at);
    if h != LONG_PAIR {
        return (at + 1, usize::from(h >> 4), usize::from(h & 0x0F));
    }
    let (f, i) = get_varint(&byte, at + 1);
    let (v, i) = get_varint(&byte, i);
    (i, f, v)
}

/// The pair starting at `buf[at..]`: (field range, value range); the pair ends where the value does.
fn pair_at(buf: &[u8], at: usize) -> (Range<usize>, Range<usize>) {
    let (h, f, v) = pair_header(|i| buf[i], at);
    (h..h + f, h + f..h + f + v)
}

// ===== the listpack encoding =====

/// Packed pairs in insertion order, in an exactly sized buffer (as a listpack reallocates on
/// every write), so a small hash carries no slack. The buffer's count is the number of pairs.
#[derive(Clone, PartialEq, Eq)]
#[repr(transparent)]
struct Pack(PackBuf);

// SAFETY: `Pack` is a transparent wrapper of a PackBuf.
unsafe impl Packed for Pack {
    fn into_buf(self) -> PackBuf {
        self.0
    }
}

/// Where a pair lies in a pack.
struct Slot {
    pair: Range<usize>,
    value: Range<usize>,
}

impl Pack {
    fn buf(&self) -> &[u8] {
        self.0.bytes()
    }

    fn len(&self) -> usize {
        self.0.count()
    }

    fn find(&self, field: &[u8]) -> Option<Slot> {
        let buf = self.buf();
        let mut at = 0;
        while at < buf.len() {
            let (f, v) = pair_at(buf, at);
            if &buf[f] == field {
                return Some(Slot {
                    pair: at..v.end,
                    value: v,
                });
            }
            at = v.end;
        }
        None
    }

    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.find(field).map(|s| &self.buf()[s.value])
    }

    /// Replaces the bytes in `range` by `with`, keeping the buffer exactly sized (a realloc, in
    /// place when the allocator can, as a listpack does).
    fn splice(&mut self, range: Range<usize>, with: &[u8]) {
        self.0.splice(range, with);
    }

    /// Sets `field` to `value`; true if the field is new (appended at the end).
    fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        let mut pair = Vec::with_capacity(pair_len(field, value));
        put_pair(&mut pair, field, value);
        match self.find(field) {
            Some(slot) => {
                self.splice(slot.pair, &pair);
                false
            }
            None => {
                self.0.push(&pair);
                self.0.set_count(self.len() + 1);
                true
            }
        }
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        match self.find(field) {
            Some(slot) => {
                self.splice(slot.pair, &[]);
                self.0.set_count(self.len() - 1);
                true
            }
            None => false,
        }
    }

    fn iter(&self) -> PackIter<'_> {
        PackIter {
            buf: self.buf(),
            at: 0,
        }
    }
}

struct PackIter<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Iterator for PackIter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.buf.len() {
            return None;
        }
        let (f, v) = pair_at(self.buf, self.at);
        self.at = v.end;
        Some((&self.buf[f], &self.buf[v]))
    }
}

// ===== the hashtable encoding =====

/// One table entry: a pair (see above) in its own allocation, behind a thin pointer so that a table
/// slot is 8 bytes. The allocation is a `Box<[u8]>` whose length the pair's header encodes.
struct Cell(NonNull<u8>);

// SAFETY: a Cell owns its bytes exclusively (like a Box<[u8]>) and never shares them mutably.
unsafe impl Send for Cell {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for Cell {}

impl Cell {
    fn new(field: &[u8], value: &[u8]) -> Cell {
        let mut v = Vec::with_capacity(pair_len(field, value));
        put_pair(&mut v, field, value);
        let raw = Box::into_raw(v.into_boxed_slice());
        Cell(NonNull::new(raw.cast::<u8>()).expect("a box is never null"))
    }

    /// Length of the allocation, read from the pair's header.
    fn total_len(&self) -> usize {
        // SAFETY: the allocation holds a complete pair written by `put_pair`, so every byte the
        // header decoder reads (the header only, stopping at its last varint byte) is in bounds.
        let (h, f, v) = pair_header(|i| unsafe { *self.0.as_ptr().add(i) }, 0);
        h + f + v
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the pointer came from a Box<[u8]> of exactly `total_len` bytes, owned by self.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr(), self.total_len()) }
    }

    fn parts(&self) -> (&[u8], &[u8]) {
        let b = self.bytes();
        let (f, v) = pair_at(b, 0);
        (&b[f], &b[v])
    }

    fn field(&self) -> &[u8] {
        self.parts().0
    }
}

impl Drop for Cell {
    fn drop(&mut self) {
        let len = self.total_len();
        // SAFETY: rebuilds the Box<[u8]> this cell was made from (same pointer, same length).
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.0.as_ptr(), len)) });
    }
}

impl Clone for Cell {
    fn clone(&self) -> Cell {
        let (f, v) = self.parts();
        Cell::new(f, v)
    }
}

/// The process-wide hasher: foldhash with a seed chosen at random once per process.
fn hash_of(field: &[u8]) -> u64 {
    static STATE: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
    STATE
        .get_or_init(foldhash::fast::RandomState::default)
        .hash_one(field)
}

fn rehash(c: &Cell) -> u64 {
    hash_of(c.field())
}

#[derive(Clone, Default)]
struct Table {
    table: HashTable<Cell>,
    /// Sum of the cells' lengths (for heap_size).
    bytes: usize,
    /// Layout epoch: bumped whenever cells may have moved between buckets (growth, hashbrown's
    /// in-place rehash of tombstones, shrinking); HSCAN cursors carry it (see the module docs).
    epoch: u32,
}

/// Tables at most this many buckets are never shrunk.
const MIN_SHRINK_BUCKETS: usize = 64;

impl Table {
    fn get(&self, field: &[u8]) -> Option<&[u8]> {
        self.table
            .find(hash_of(field), |c| c.field() == field)
            .map(|c| c.parts().1)
    }

    fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        let new = Cell::new(field, value);
        self.bytes += new.bytes().len();
        if self.table.len() == self.table.capacity() {
            // `entry` reserves room first: it grows or rehashes the table in place, cells move.
            self.epoch = self.epoch.wrapping_add(1);
        }
        match self
            .table
            .entry(hash_of(field), |c| c.field() == field, rehash)
        {
            hashbrown::hash_table::Entry::Occupied(mut o) => {
                let old = std::mem::replace(o.get_mut(), new);
                self.bytes -= old.bytes().len();
                false
            }
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert(new);
                true
            }
        }
    }

    fn remove(&mut self, field: &[u8]) -> bool {
        match self
            .table
            .find_entry(hash_of(field), |c| c.field() == field)
        {
            Ok(o) => {
                let (old, _) = o.remove();
                self.bytes -= old.bytes().len();
                let buckets = self.table.num_buckets();
                if buckets > MIN_SHRINK_BUCKETS && self.table.len() * 8 < buckets {
                    self.table.shrink_to(self.table.len() * 2, rehash);
                    self.epoch = self.epoch.wrapping_add(1);
                }
                true
            }
            Err(_) => false,
        }
    }

    /// A random entry: random buckets first (the table is at least 1/8 full, see `remove`), then,
    /// after many misses, the first entry from a random bucket onwards.
    fn random(&self, rand: &mut dyn FnMut() -> u64) -> Option<&Cell> {
        let buckets = self.table.num_buckets();
        if self.table.is_empty() || buckets == 0 {
            return None;
        }
        let mut at = 0;
        for _ in 0..64 {
            at = (rand() % buckets as u64) as usize;
            if let Some(c) = self.table.get_bucket(at) {
                return Some(c);
            }
        }
        (0..buckets)
            .map(|i| (at + i) % buckets)
            .find_map(|i| self.table.get_bucket(i))
    }
}

// ===== the hash =====

/// Iterates a hash's (field, value) pairs: insertion order for a listpack, table order otherwise.
pub struct Iter<'a>(IterRepr<'a>);

enum IterRepr<'a> {
    Pack(PackIter<'a>),
    Table(hashbrown::hash_table::Iter<'a, Cell>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            IterRepr::Pack(p) => p.next(),
            IterRepr::Table(t) => t.next().map(|c| c.parts()),
        }
    }
}

impl Hash {
    /// An empty hash (a listpack).
    pub fn new() -> Hash {
        Hash::default()
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        match self.repr.get() {
            Rep::Pack(p) => p.len(),
            Rep::Big(t) => t.table.len(),
        }
    }

    /// True when there are no fields (the key is then deleted by the write that emptied it).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self.repr.get() {
            Rep::Pack(_) => "listpack",
            Rep::Big(_) => "hashtable",
        }
    }

    /// True while the hash is a listpack.
    pub fn is_listpack(&self) -> bool {
        !self.repr.is_big()
    }

    /// The shape of the hashtable encoding's table (DEBUG HTSTATS-KEY); None for a listpack.
    pub fn table_stats(&self) -> Option<crate::TableStats> {
        match self.repr.get() {
            Rep::Pack(_) => None,
            Rep::Big(t) => Some(crate::TableStats::open_addressed(
                t.table.num_buckets(),
                t.table.len(),
            )),
        }
    }

    /// Bytes of the listpack encoding's buffer (DEBUG LISTPACK); None for a hashtable.
    pub fn packed_bytes(&self) -> Option<usize> {
        match self.repr.get() {
            Rep::Pack(p) => Some(p.0.len()),
            Rep::Big(_) => None,
        }
    }

    /// Heap bytes owned (approximate, O(1)).
    pub fn heap_size(&self) -> usize {
        match self.repr.get() {
            Rep::Pack(p) => p.0.len() + PACK_HEADER,
            Rep::Big(t) => t.table.allocation_size() + t.bytes,
        }
    }

    /// The value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<&[u8]> {
        match self.repr.get() {
            Rep::Pack(p) => p.get(field),
            Rep::Big(t) => t.get(field),
        }
    }

    /// True if `field` exists.
    pub fn contains(&self, field: &[u8]) -> bool {
        self.get(field).is_some()
    }

    /// Converts a listpack to a hashtable if a field or value of `longest` bytes would not fit one
    /// (HSET/HMSET check all their arguments before writing any, as Redis does).
    pub fn convert_for_len(&mut self, longest: usize) {
        if longest > HASH_MAX_LISTPACK_VALUE.count() {
            self.convert_to_table();
        }
    }

    /// Sets `field` to `value`; true if the field is new. Converts to a hashtable first when either is
    /// longer than `hash-max-listpack-value`, and after when the field count exceeds
    /// `hash-max-listpack-entries`.
    pub fn insert(&mut self, field: &[u8], value: &[u8]) -> bool {
        self.convert_for_len(field.len().max(value.len()));
        self.insert_loaded(field, value)
    }

    /// [`Hash::insert`] as Redis loads a packed hash (HASH_LISTPACK/HASH_ZIPLIST in an RDB file or
    /// a RESTORE payload): converted to a hashtable only when the field count passes
    /// `hash-max-listpack-entries` (or the listpack its safety size), never for a long field or
    /// value — the listpack keeps what it was written with.
    pub fn insert_loaded(&mut self, field: &[u8], value: &[u8]) -> bool {
        if let Rep::Pack(p) = self.repr.get() {
            // Redis's listpack safety size: a pack never grows past it.
            if p.0.len() + pair_len(field, value) > MAX_PACK {
                self.convert_to_table();
            }
        }
        let new = match self.repr.get_mut() {
            Rep::Pack(p) => p.insert(field, value),
            Rep::Big(t) => t.insert(field, value),
        };
        if self.is_listpack() && self.len() > HASH_MAX_LISTPACK_ENTRIES.count() {
            self.convert_to_table();
        }
        new
    }

    /// Removes `field`; true if it existed.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self.repr.get_mut() {
            Rep::Pack(p) => p.remove(field),
            Rep::Big(t) => t.remove(field),
        }
    }

    /// The (field, value) pairs: insertion order for a listpack, table order for a hashtable.
    pub fn iter(&self) -> Iter<'_> {
        Iter(match self.repr.get() {
            Rep::Pack(p) => IterRepr::Pack(p.iter()),
            Rep::Big(t) => IterRepr::Table(t.table.iter()),
        })
    }

    /// A random (field, value) pair, None if empty. `rand` supplies random 64-bit numbers.
    pub fn random(&self, rand: &mut dyn FnMut() -> u64) -> Option<(&[u8], &[u8])> {
        match self.repr.get() {
            Rep::Pack(p) if p.len() == 0 => None,
            Rep::Pack(p) => p.iter().nth((rand() % p.len() as u64) as usize),
            Rep::Big(t) => t.random(rand).map(|c| c.parts()),
        }
    }

    /// `count` distinct random pairs (at most `len`). A listpack, or a table asked for a third of
    /// its pairs or more, answers by selection sampling in one pass (in the hash's order, as Redis's
    /// lpRandomPairsUnique does), allocating nothing but the answer; fewer pairs from a table are
    /// drawn at random until distinct.
    pub fn random_distinct(
        &self,
        count: usize,
        rand: &mut dyn FnMut() -> u64,
    ) -> Vec<(&[u8], &[u8])> {
        let len = self.len();
        let count = count.min(len);
        let mut out = Vec::with_capacity(count);
        match self.repr.get() {
            Rep::Big(t) if count * 3 <= len => {
                let mut seen: HashTable<&Cell> = HashTable::with_capacity(count);
                while out.len() < count {
                    let Some(c) = t.random(rand) else { break };
                    let h = hash_of(c.field());
                    if let hashbrown::hash_table::Entry::Vacant(v) =
                        seen.entry(h, |x| std::ptr::eq(*x, c), |x| hash_of(x.field()))
                    {
                        v.insert(c);
                        out.push(c.parts());
                    }
                }
            }
            _ => {
                // Each pair is kept with probability needed / remaining.
                for (i, pair) in self.iter().enumerate() {
                    let needed = count - out.len();
                    if needed == 0 {
                        break;
                    }
                    if (rand() % (len - i) as u64) < needed as u64 {
                        out.push(pair);
                    }
                }
            }
        }
        out
    }

    /// Calls `f` with `count` random pairs, repeats allowed (HRANDFIELD with a negative count),
    /// until it returns false: a listpack is indexed once so that each pick is O(1), as for a
    /// table.
    pub fn random_repeated(
        &self,
        count: usize,
        rand: &mut dyn FnMut() -> u64,
        mut f: impl FnMut(&[u8], &[u8]) -> bool,
    ) {
        if self.is_empty() {
            return;
        }
        match self.repr.get() {
            Rep::Pack(p) => {
                let pairs: Vec<_> = p.iter().collect();
                for _ in 0..count {
                    let (k, v) = pairs[(rand() % pairs.len() as u64) as usize];
                    if !f(k, v) {
                        return;
                    }
                }
            }
            Rep::Big(t) => {
                for _ in 0..count {
                    if let Some(c) = t.random(rand) {
                        let (k, v) = c.parts();
                        if !f(k, v) {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// One HSCAN step from `cursor`: calls `f` for each pair visited and returns the next cursor
    /// (0 when done). A listpack answers whole in one call, as Redis does; a table visits buckets
    /// from `cursor` until `count` pairs or `10 × count` buckets were visited. See the module docs
    /// for the guarantee.
    pub fn scan<'a>(
        &'a self,
        cursor: u64,
        count: usize,
        mut f: impl FnMut(&'a [u8], &'a [u8]),
    ) -> u64 {
        match self.repr.get() {
            Rep::Pack(p) => {
                p.iter().for_each(|(k, v)| f(k, v));
                0
            }
            Rep::Big(t) => {
                let epoch = u64::from(t.epoch & 0xffff);
                let buckets = t.table.num_buckets();
                // A cursor from another layout restarts the walk (see the module docs).
                let mut at = if cursor & 0xffff == epoch {
                    usize::try_from(cursor >> 16).unwrap_or(usize::MAX)
                } else {
                    0
                };
                let (mut visited, mut steps) = (0, 0);
                let budget = count.max(1).saturating_mul(10);
                while at < buckets && visited < count.max(1) && steps < budget {
                    if let Some(c) = t.table.get_bucket(at) {
                        let (k, v) = c.parts();
                        f(k, v);
                        visited += 1;
                    }
                    at += 1;
                    steps += 1;
                }
                if at >= buckets {
                    0
                } else {
                    ((at as u64) << 16) | epoch
                }
            }
        }
    }

    /// Converts to the hashtable encoding (no-op if it is one).
    fn convert_to_table(&mut self) {
        if let Rep::Pack(p) = self.repr.get() {
            let mut t = Box::new(Table {
                table: HashTable::with_capacity(p.len()),
                bytes: 0,
                epoch: 0,
            });
            for (k, v) in p.iter() {
                t.insert(k, v);
            }
            self.repr = PackOr::big(t);
        }
    }
}

impl std::fmt::Debug for Hash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.encoding())?;
        f.debug_map()
            .entries(
                self.iter()
                    .map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v))),
            )
            .finish()
    }
}

/// Equal when they hold the same fields with the same values (whatever the encoding or order).
impl PartialEq for Hash {
    fn eq(&self, other: &Hash) -> bool {
        self.len() == other.len() && self.iter().all(|(k, v)| other.get(k) == Some(v))
    }
}

impl Eq for Hash {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashSet};

    fn rng(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn varints_round_trip() {
        for v in [0usize, 1, 127, 128, 300, 16383, 16384, usize::MAX >> 1] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v));
            assert_eq!(get_varint(|i| b[i], 0), (v, b.len()));
        }
    }

    #[test]
    fn pairs_round_trip_in_short_and_long_form() {
        let long = vec![b'x'; 300];
        for (f, v) in [
            (&b""[..], &b""[..]),
            (b"f", b"v"),
            (&long[..15], &long[..14]),
            (&long[..15], &long[..15]),
            (&long[..16], b""),
            (b"", &long[..16]),
            (&long[..], &long[..200]),
        ] {
            let mut b = Vec::new();
            put_pair(&mut b, f, v);
            assert_eq!(b.len(), pair_len(f, v));
            let short = f.len() < 16 && v.len() < 16 && (f.len(), v.len()) != (15, 15);
            assert_eq!(b.len() == 1 + f.len() + v.len(), short);
            let (fr, vr) = pair_at(&b, 0);
            assert_eq!((&b[fr], &b[vr.clone()]), (f, v));
            assert_eq!(vr.end, b.len());
            let c = Cell::new(f, v);
            assert_eq!(c.parts(), (f, v));
            assert_eq!(c.bytes(), &b[..]);
            let d = c.clone();
            drop(c);
            assert_eq!(d.parts(), (f, v));
        }
    }

    #[test]
    fn a_hash_is_one_word() {
        assert_eq!(std::mem::size_of::<Hash>(), 8);
        assert_eq!(std::mem::size_of::<Cell>(), 8);
    }

    #[test]
    fn small_table_operations() {
        // Small enough for Miri: a table with updates, deletes, clone, iteration and drop.
        let mut h = Hash::new();
        h.convert_to_table();
        for i in 0..40u8 {
            h.insert(&[i], &[i; 20]);
        }
        h.insert(&[3], b"short");
        assert!(h.remove(&[4]) && !h.remove(&[4]));
        let c = h.clone();
        assert_eq!(c, h);
        assert_eq!(c.get(&[3]), Some(&b"short"[..]));
        assert_eq!(c.iter().count(), 39);
        let mut r = rng(9);
        assert!(c.random(&mut r).is_some());
        assert_eq!(c.random_distinct(5, &mut r).len(), 5);
        let mut n = 0;
        let mut cursor = 0;
        loop {
            cursor = c.scan(cursor, 3, |_, _| n += 1);
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(n, 39);
    }

    #[test]
    fn listpack_keeps_insertion_order_and_updates_in_place() {
        let mut h = Hash::new();
        assert!(h.insert(b"b", b"1"));
        assert!(h.insert(b"a", b"2"));
        assert!(h.insert(b"c", b""));
        assert!(!h.insert(b"a", b"a much longer value than before"));
        assert_eq!(h.encoding(), "listpack");
        let pairs: Vec<_> = h.iter().collect();
        assert_eq!(
            pairs,
            vec![
                (&b"b"[..], &b"1"[..]),
                (b"a", b"a much longer value than before"),
                (b"c", b"")
            ]
        );
        assert!(h.remove(b"b"));
        assert!(!h.remove(b"b"));
        assert_eq!(h.get(b"a"), Some(&b"a much longer value than before"[..]));
        assert_eq!(h.get(b"c"), Some(&b""[..]));
        assert_eq!(h.len(), 2);
        assert!(h.remove(b"a") && h.remove(b"c") && h.is_empty());
    }

    #[test]
    fn converts_on_long_values_and_many_fields() {
        let mut h = Hash::new();
        h.insert(b"f", &[b'x'; 64]);
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"g", &[b'x'; 65]);
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"f"), Some(&[b'x'; 64][..]));

        let mut h = Hash::new();
        let max = HASH_MAX_LISTPACK_ENTRIES.count();
        for i in 0..max {
            h.insert(format!("f{i}").as_bytes(), b"v");
        }
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"f0", b"w");
        assert_eq!(h.encoding(), "listpack");
        h.insert(b"new", b"v");
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.len(), max + 1);
        assert_eq!(h.get(b"f0"), Some(&b"w"[..]));
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn table_matches_a_model_under_random_operations() {
        let mut h = Hash::new();
        let mut model = BTreeMap::new();
        let mut r = rng(7);
        for _ in 0..20_000 {
            let f = format!("f{}", r() % 2000).into_bytes();
            match r() % 3 {
                0 | 1 => {
                    let v = format!("v{}", r() % 1000).into_bytes();
                    assert_eq!(h.insert(&f, &v), model.insert(f, v).is_none());
                }
                _ => assert_eq!(h.remove(&f), model.remove(&f).is_some()),
            }
            assert_eq!(h.len(), model.len());
        }
        assert_eq!(h.encoding(), "hashtable");
        for (k, v) in &model {
            assert_eq!(h.get(k), Some(&v[..]));
        }
        let got: BTreeMap<Vec<u8>, Vec<u8>> =
            h.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(got, model);
        let cells: usize = model.iter().map(|(k, v)| pair_len(k, v)).sum();
        match h.repr.get() {
            Rep::Big(t) => assert_eq!(t.bytes, cells),
            Rep::Pack(_) => unreachable!(),
        }
        // Emptying a big table shrinks it.
        for k in model.keys() {
            h.remove(k);
        }
        assert!(h.heap_size() < 4096, "{}", h.heap_size());
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn scan_returns_every_field_once_without_restructuring() {
        let mut h = Hash::new();
        for i in 0..5000 {
            h.insert(format!("f{i}").as_bytes(), b"v");
        }
        // Deletes during the scan never move entries (the table stays above 1/8 full here).
        let mut seen = Vec::new();
        let mut cursor = 0;
        let mut round = 0;
        loop {
            cursor = h.scan(cursor, 7, |k, _| seen.push(k.to_vec()));
            round += 1;
            if round % 3 == 0 {
                h.remove(format!("f{}", 4000 + round).as_bytes());
            }
            if cursor == 0 {
                break;
            }
        }
        let unique: HashSet<_> = seen.iter().cloned().collect();
        assert_eq!(unique.len(), seen.len(), "no duplicates");
        for i in 0..4000 {
            assert!(unique.contains(format!("f{i}").as_bytes()), "f{i} missed");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn scan_returns_every_lasting_field_across_growth_and_shrinking() {
        // Fields f0..f999 stay for the whole scan; between calls the hash grows to 20,000 fields
        // (several doublings), then shrinks back below its starting size (shrinks of the table).
        let mut h = Hash::new();
        for i in 0..1000 {
            h.insert(format!("f{i}").as_bytes(), b"v");
        }
        let mut seen = HashSet::new();
        let (mut cursor, mut calls, mut extra) = (0, 0, 0);
        loop {
            cursor = h.scan(cursor, 5, |k, _| {
                seen.insert(k.to_vec());
            });
            calls += 1;
            if calls <= 40 {
                for _ in 0..500 {
                    h.insert(format!("g{extra}").as_bytes(), b"w");
                    extra += 1;
                }
            } else if extra > 0 {
                for _ in 0..2000.min(extra) {
                    extra -= 1;
                    h.remove(format!("g{extra}").as_bytes());
                }
            }
            if cursor == 0 {
                break;
            }
            assert!(calls < 1_000_000, "the scan finishes");
        }
        for i in 0..1000 {
            assert!(seen.contains(format!("f{i}").as_bytes()), "f{i} missed");
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn random_choices_are_members_and_distinct() {
        let mut r = rng(3);
        for n in [3usize, 200, 1000] {
            let mut h = Hash::new();
            for i in 0..n {
                h.insert(format!("f{i}").as_bytes(), format!("{i}").as_bytes());
            }
            for _ in 0..50 {
                let (k, v) = h.random(&mut r).expect("not empty");
                assert_eq!(h.get(k), Some(v));
            }
            for count in [1, n / 4, n / 2, n - 1] {
                let picked = h.random_distinct(count, &mut r);
                assert_eq!(picked.len(), count);
                let keys: HashSet<_> = picked.iter().map(|(k, _)| *k).collect();
                assert_eq!(keys.len(), count);
                assert!(picked.iter().all(|(k, v)| h.get(k) == Some(*v)));
            }
        }
        assert!(Hash::new().random(&mut r).is_none());
        for n in [3usize, 1000] {
            let mut h = Hash::new();
            for i in 0..n {
                h.insert(format!("f{i}").as_bytes(), b"v");
            }
            let mut seen = HashSet::new();
            let mut picks = 0;
            h.random_repeated(n * 30, &mut r, |k, v| {
                assert_eq!(h.get(k), Some(v));
                seen.insert(k.to_vec());
                picks += 1;
                true
            });
            assert_eq!(picks, n * 30);
            let mut stopped = 0;
            h.random_repeated(n * 30, &mut r, |_, _| {
                stopped += 1;
                stopped < 7
            });
            assert_eq!(stopped, 7, "picking stops when asked to");
            assert_eq!(seen.len(), n, "every field comes up with 30x oversampling");
        }
    }

    #[test]
    fn equality_ignores_encoding() {
        let mut a = Hash::new();
        let mut b = Hash::new();
        a.insert(b"x", b"1");
        b.insert(b"x", b"1");
        b.convert_to_table();
        assert_eq!(a, b);
        b.insert(b"y", b"2");
        assert_ne!(a, b);
    }

    #[test]
    fn table_stats_and_packed_bytes_follow_the_encoding() {
        let mut h = Hash::default();
        h.insert(b"f", b"v");
        assert!(h.table_stats().is_none());
        assert!(h.packed_bytes().is_some_and(|n| n >= 3));
        h.insert(&[b'x'; 1000], b"v");
        assert!(h.packed_bytes().is_none());
        let t = h.table_stats().expect("a hashtable now");
        assert_eq!((t.entries, t.max_chain), (2, 1));
    }
}
