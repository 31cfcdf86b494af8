//! A set (Redis's t_set.c): "intset" while small and all-integer, "hashtable" otherwise.
//!
//! Two representations, as in Redis 7.0:
//! * **intset**: the members as sorted, packed little-endian integers of one width (2, 4 or 8
//!   bytes, the smallest that holds every member; widened when a member needs more, never
//!   narrowed). Stored as one [`PackBuf`]: a width byte, then the values; the empty intset is the
//!   empty buffer (width 2). Five small integers take 11 bytes plus the buffer's 8-byte header.
//! * **hashtable**: a `hashbrown::HashTable<Box<[u8]>>` hashed with foldhash (one per-process random
//!   seed), boxed so that a `Set` is one word whichever representation it holds (it lives inline
//!   in its key's entry).
//!
//! Invariants:
//! * An intset holds only members whose text is a canonical integer (Redis's `string2ll`), and at
//!   most `set-max-intset-entries` of them; the first write breaking either converts it to a
//!   hashtable, for good (Redis never converts back). Reads never restructure a set.
//! * [`Set::heap_size`] is O(1): the intset's box length, or the table's allocation plus a running
//!   sum of its member lengths.
//! * A hashtable shrinks when a removal leaves it under 10% full (Redis's HASHTABLE_MIN_FILL), so
//!   random picks by bucket stay cheap; each bucket holds at most one member, so picking a random
//!   occupied bucket picks a uniformly random member.
//!
//! SSCAN over a hashtable walks buckets in index order; its cursor is the next bucket index with the
//! table's *layout epoch* in the low 16 bits. The epoch changes whenever the table may have moved
//! members (growth, hashbrown's in-place rehash of tombstones, shrinking); a cursor from another
//! epoch restarts the walk at bucket 0. So every member present for the whole scan is returned at
//! least once (some possibly more than once), exactly Redis's guarantee; the cost of a layout
//! change is a restart rather than Redis's reverse-binary trick, which open addressing cannot use.
//! The limits, where Redis does better: a scan restarts once per layout change, so under growth it
//! finishes only once the set stops growing faster than the scan advances (Redis's cursor always
//! finishes); and 2^16 layout changes exactly between two calls would go unseen.

use std::hash::BuildHasher;
use std::sync::OnceLock;

use hashbrown::HashTable;

use crate::limits::SET_MAX_INTSET_ENTRIES;
use crate::pack::{PackBuf, PackOr, Packed, Rep, MAX_PACK};

/// The packed buffer's header bytes (counted by `heap_size`).
const PACK_HEADER: usize = 8;
use crate::num::parse_i64;

/// A member as stored: an integer of an intset, or the bytes of a hashtable member.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Member<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Member<'_> {
    /// The member's bytes (integers in decimal).
    pub fn to_boxed(&self) -> Box<[u8]> {
        match self {
            Member::Int(i) => i.to_string().into_bytes().into_boxed_slice(),
            Member::Str(s) => Box::from(*s),
        }
    }

    /// True if the member's text matches the glob `pattern`.
    pub fn matches(&self, pattern: &[u8]) -> bool {
        match self {
            Member::Int(i) => crate::glob::glob_match(pattern, i.to_string().as_bytes(), false),
            Member::Str(s) => crate::glob::glob_match(pattern, s, false),
        }
    }
}

/// A set (Redis's t_set.c): "intset" while small and all-integer, "hashtable" otherwise.
///
/// One word (it lives inline in every set key's entry): the intset's own allocation, or the boxed
/// table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    repr: PackOr<IntSet, Table>,
}

impl Default for Set {
    fn default() -> Self {
        Set::new()
    }
}

impl Set {
    /// An empty set (an intset until a write says otherwise, as Redis's `createIntsetObject`).
    pub fn new() -> Set {
        Set {
            repr: PackOr::pack(IntSet::default()),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self.repr.get() {
            Rep::Pack(i) => i.len(),
            Rep::Big(t) => t.map.len(),
        }
    }

    /// True when there are no elements (the key is then deleted by the write that emptied it).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self.repr.get() {
            Rep::Pack(_) => "intset",
            Rep::Big(_) => "hashtable",
        }
    }

    /// The shape of the hashtable encoding's table (DEBUG HTSTATS-KEY); None for an intset.
    pub fn table_stats(&self) -> Option<crate::TableStats> {
        match self.repr.get() {
            Rep::Pack(_) => None,
            Rep::Big(t) => Some(crate::TableStats::open_addressed(
                t.map.num_buckets(),
                t.map.len(),
            )),
        }
    }

    /// Heap bytes owned (approximate, O(1)).
    pub fn heap_size(&self) -> usize {
        match self.repr.get() {
            Rep::Pack(i) => i.0.len() + PACK_HEADER,
            Rep::Big(t) => {
                std::mem::size_of::<Table>()
                    + t.map.allocation_size()
                    + t.bytes
                    + t.map.len() * BOX_OVERHEAD
            }
        }
    }

    /// Adds `m`; false if it was already a member. Converts an intset to a hashtable when `m` is
    /// not an integer or the intset would exceed `set-max-intset-entries`.
    pub fn insert(&mut self, m: &[u8]) -> bool {
        match self.repr.get_mut() {
            Rep::Pack(ints) => match parse_i64(m) {
                Some(v) => {
                    if !ints.insert(v) {
                        return false;
                    }
                    if ints.len() > SET_MAX_INTSET_ENTRIES.count() || ints.near_max() {
                        self.convert();
                    }
                    true
                }
                None => {
                    self.convert();
                    self.insert(m)
                }
            },
            Rep::Big(t) => t.insert(m),
        }
    }

    /// Adds a member read from another set (no re-parsing for integers).
    pub fn insert_member(&mut self, m: Member<'_>) -> bool {
        match (m, self.repr.get_mut()) {
            (Member::Int(v), Rep::Pack(ints)) => {
                if !ints.insert(v) {
                    return false;
                }
                if ints.len() > SET_MAX_INTSET_ENTRIES.count() || ints.near_max() {
                    self.convert();
                }
                true
            }
            (Member::Int(v), Rep::Big(t)) => t.insert(v.to_string().as_bytes()),
            (Member::Str(s), _) => self.insert(s),
        }
    }

    /// Removes `m`; false if it was not a member.
    pub fn remove(&mut self, m: &[u8]) -> bool {
        match self.repr.get_mut() {
            Rep::Pack(ints) => parse_i64(m).is_some_and(|v| ints.remove(v)),
            Rep::Big(t) => t.remove(m),
        }
    }

    /// True if `m` is a member.
    pub fn contains(&self, m: &[u8]) -> bool {
        match self.repr.get() {
            Rep::Pack(ints) => parse_i64(m).is_some_and(|v| ints.search(v).is_ok()),
            Rep::Big(t) => t.find(m).is_some(),
        }
    }

    /// True if `m` (read from another set) is a member.
    pub fn contains_member(&self, m: Member<'_>) -> bool {
        match (m, self.repr.get()) {
            (Member::Int(v), Rep::Pack(ints)) => ints.search(v).is_ok(),
            (Member::Int(v), Rep::Big(t)) => t.find(v.to_string().as_bytes()).is_some(),
            (Member::Str(s), _) => self.contains(s),
        }
    }

    /// Calls `f` on every member's bytes (ZUNION/ZINTER/ZDIFF and SORT read sets through this).
    pub fn for_each_member(&self, mut f: impl FnMut(&[u8])) {
        for m in self.iter() {
            match m {
                Member::Int(i) => f(i.to_string().as_bytes()),
                Member::Str(s) => f(s),
            }
        }
    }

    /// The members: ascending for an intset, table order for a hashtable.
    pub fn iter(&self) -> Iter<'_> {
        match self.repr.get() {
            Rep::Pack(ints) => Iter::Ints(ints, 0),
            Rep::Big(t) => Iter::Table(t.map.iter()),
        }
    }

    /// A uniformly random member (None if the set is empty). `rand` gives random 64-bit numbers.
    pub fn random(&self, rand: &mut impl FnMut() -> u64) -> Option<Member<'_>> {
        match self.repr.get() {
            Rep::Pack(ints) => {
                let n = ints.len();
                (n > 0).then(|| Member::Int(ints.get((rand() % n as u64) as usize)))
            }
            Rep::Big(t) => t
                .random_bucket(rand)
                .and_then(|b| t.map.get_bucket(b))
                .map(|m| Member::Str(m)),
        }
    }

    /// Removes and returns a uniformly random member (None if the set is empty).
    pub fn pop_random(&mut self, rand: &mut impl FnMut() -> u64) -> Option<Box<[u8]>> {
        match self.repr.get_mut() {
            Rep::Pack(ints) => {
                let n = ints.len();
                if n == 0 {
                    return None;
                }
                let v = ints.get((rand() % n as u64) as usize);
                ints.remove(v);
                Some(v.to_string().into_bytes().into_boxed_slice())
            }
            Rep::Big(t) => {
                let b = t.random_bucket(rand)?;
                let m = t.map.get_bucket_entry(b).ok()?.remove().0;
                t.bytes -= m.len();
                t.maybe_shrink();
                Some(m)
            }
        }
    }

    /// One step of SSCAN: calls `f` for the members of about `count` buckets from `cursor` on and
    /// returns the next cursor (0 when the walk is complete). An intset is returned whole, with
    /// cursor 0, as Redis does for its compact encodings. See the module docs for the guarantee.
    pub fn scan<'s>(&'s self, cursor: u64, count: usize, mut f: impl FnMut(Member<'s>)) -> u64 {
        match self.repr.get() {
            Rep::Pack(_) => {
                self.iter().for_each(f);
                0
            }
            Rep::Big(t) => {
                let epoch = u64::from(t.epoch & 0xffff);
                let start = if cursor & 0xffff == epoch {
                    (cursor >> 16) as usize
                } else {
                    0
                };
                let buckets = t.map.num_buckets();
                let (mut pos, mut found) = (start, 0);
                // Like Redis, stop after `count` members or 10 × `count` buckets, whichever first.
                let max_visits = count.saturating_mul(10).max(1);
                while pos < buckets && found < count && pos - start < max_visits {
                    if let Some(m) = t.map.get_bucket(pos) {
                        f(Member::Str(m));
                        found += 1;
                    }
                    pos += 1;
                }
                if pos >= buckets {
                    0
                } else {
                    ((pos as u64) << 16) | epoch
                }
            }
        }
    }

    /// Up to `max` members from position `pos` on (a stable position while the set is not
    /// modified), and the position after them, or None at the end. Multi-key commands read big
    /// sets in such slices so that no message occupies a shard for long.
    pub fn slice(&self, pos: usize, max: usize) -> (Vec<Box<[u8]>>, Option<usize>) {
        let mut out = Vec::new();
        match self.repr.get() {
            Rep::Pack(ints) => {
                let end = pos.saturating_add(max).min(ints.len());
                for i in pos.min(end)..end {
                    out.push(Member::Int(ints.get(i)).to_boxed());
                }
                (out, (end < ints.len()).then_some(end))
            }
            Rep::Big(t) => {
                let buckets = t.map.num_buckets();
                let mut p = pos;
                while p < buckets && out.len() < max {
                    if let Some(m) = t.map.get_bucket(p) {
                        out.push(m.clone());
                    }
                    p += 1;
                }
                (out, (p < buckets).then_some(p))
            }
        }
    }

    fn convert(&mut self) {
        if let Rep::Pack(ints) = self.repr.get() {
            let mut t = Table::with_capacity(ints.len() + 1);
            for i in 0..ints.len() {
                t.insert(ints.get(i).to_string().as_bytes());
            }
            self.repr = PackOr::big(Box::new(t));
        }
    }
}

/// Allocator bookkeeping per boxed member, plus the box's pointer and length in its bucket.
const BOX_OVERHEAD: usize = 16;

/// Iterator over a set's members (see [`Set::iter`]).
pub enum Iter<'a> {
    Ints(&'a IntSet, usize),
    Table(hashbrown::hash_table::Iter<'a, Box<[u8]>>),
}

impl<'a> Iterator for Iter<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Member<'a>> {
        match self {
            Iter::Ints(ints, i) => {
                if *i < ints.len() {
                    *i += 1;
                    Some(Member::Int(ints.get(*i - 1)))
                } else {
                    None
                }
            }
            Iter::Table(it) => it.next().map(|m| Member::Str(m)),
        }
    }
}

// ===== intset =====

/// Sorted packed integers: `bytes[0]` is the width (2, 4 or 8), then the values little-endian.
/// Empty is the empty buffer. The buffer's count is unused (the width gives the length).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[repr(transparent)]
pub struct IntSet(PackBuf);

// SAFETY: `IntSet` is a transparent wrapper of a PackBuf.
unsafe impl Packed for IntSet {
    fn into_buf(self) -> PackBuf {
        self.0
    }
}

/// The smallest width that holds `v`.
fn width_of(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

impl IntSet {
    fn width(&self) -> usize {
        self.0.bytes().first().map_or(2, |w| *w as usize)
    }

    fn len(&self) -> usize {
        self.0.len().saturating_sub(1) / self.width()
    }

    /// True when one more member, widened to 8 bytes, could pass the packed buffer's safety
    /// size: the set then converts to a hashtable, as Redis 7.2 bounds its intsets.
    fn near_max(&self) -> bool {
        (self.len() + 2) * 8 + 1 > MAX_PACK
    }

    fn get(&self, i: usize) -> i64 {
        let w = self.width();
        let at = 1 + i * w;
        let b = &self.0.bytes()[at..at + w];
        match w {
            2 => i64::from(i16::from_le_bytes([b[0], b[1]])),
            4 => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            _ => i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        }
    }

    fn search(&self, v: i64) -> Result<usize, usize> {
        let n = self.len();
        if width_of(v) > self.width() {
            // Out of range for the current width: it would go first or last.
            return Err(if v < 0 { 0 } else { n });
        }
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.get(mid).cmp(&v) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Ok(mid),
            }
        }
        Err(lo)
    }

    fn insert(&mut self, v: i64) -> bool {
        let at = match self.search(v) {
            Ok(_) => return false,
            Err(at) => at,
        };
        let w = self.width().max(width_of(v));
        if w == self.width() && !self.0.is_empty() {
            // Same width: splice the new value's bytes in.
            let split = 1 + at * w;
            self.0.splice(split..split, &v.to_le_bytes()[..w]);
            return true;
        }
        // First member, or a wider one: re-encode every value at the new width.
        let n = self.len();
        let mut out = Vec::with_capacity(1 + (n + 1) * w);
        out.push(w as u8);
        for i in 0..n {
            if i == at {
                out.extend_from_slice(&v.to_le_bytes()[..w]);
            }
            out.extend_from_slice(&self.get(i).to_le_bytes()[..w]);
        }
        if at == n {
            out.extend_from_slice(&v.to_le_bytes()[..w]);
        }
        self.0 = PackBuf::from_slice(&out, 0);
        true
    }

    fn remove(&mut self, v: i64) -> bool {
        let Ok(at) = self.search(v) else {
            return false;
        };
        let w = self.width();
        if self.len() == 1 {
            self.0 = PackBuf::new();
            return true;
        }
        self.0.splice(1 + at * w..1 + (at + 1) * w, &[]);
        true
    }
}

// ===== hashtable =====

fn hasher() -> &'static foldhash::fast::RandomState {
    static STATE: OnceLock<foldhash::fast::RandomState> = OnceLock::new();
    STATE.get_or_init(foldhash::fast::RandomState::default)
}

fn hash(m: &[u8]) -> u64 {
    hasher().hash_one(m)
}

/// The hashtable representation.
#[derive(Debug, Clone, Default)]
struct Table {
    map: HashTable<Box<[u8]>>,
    /// Sum of the members' lengths.
    bytes: usize,
    /// Layout epoch: bumped whenever members may have moved between buckets (see the module docs).
    epoch: u32,
}

impl PartialEq for Table {
    fn eq(&self, other: &Self) -> bool {
        self.map.len() == other.map.len() && self.map.iter().all(|m| other.find(m).is_some())
    }
}

impl Eq for Table {}

impl Table {
    fn with_capacity(n: usize) -> Table {
        Table {
            map: HashTable::with_capacity(n),
            bytes: 0,
            epoch: 0,
        }
    }

    fn find(&self, m: &[u8]) -> Option<&[u8]> {
        self.map.find(hash(m), |x| **x == *m).map(|b| &**b)
    }

    fn insert(&mut self, m: &[u8]) -> bool {
        let h = hash(m);
        if self.map.find(h, |x| **x == *m).is_some() {
            return false;
        }
        if self.map.len() == self.map.capacity() {
            // The insert below grows or rehashes the table in place: members move.
            self.epoch = self.epoch.wrapping_add(1);
        }
        self.map.insert_unique(h, Box::from(m), |x| hash(x));
        self.bytes += m.len();
        true
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        match self.map.find_entry(hash(m), |x| **x == *m) {
            Ok(e) => {
                self.bytes -= e.remove().0.len();
                self.maybe_shrink();
                true
            }
            Err(_) => false,
        }
    }

    /// Shrinks a table under 10% full to about twice its size in members.
    fn maybe_shrink(&mut self) {
        let buckets = self.map.num_buckets();
        if buckets > 64 && self.map.len() * 10 < buckets {
            self.epoch = self.epoch.wrapping_add(1);
            self.map.shrink_to(self.map.len() * 2, |x| hash(x));
        }
    }

    /// A random occupied bucket (None if empty).
    fn random_bucket(&self, rand: &mut impl FnMut() -> u64) -> Option<usize> {
        if self.map.is_empty() {
            return None;
        }
        let n = self.map.num_buckets() as u64;
        loop {
            let b = (rand() % n) as usize;
            if self.map.get_bucket(b).is_some() {
                return Some(b);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
    }

    fn members(s: &Set) -> Vec<Vec<u8>> {
        s.iter().map(|m| m.to_boxed().into_vec()).collect()
    }

    #[test]
    fn set_is_one_word() {
        assert_eq!(std::mem::size_of::<Set>(), 8);
    }

    #[test]
    fn intset_keeps_order_and_widens() {
        let mut s = Set::new();
        for v in ["5", "-3", "100000", "7", "-9223372036854775808", "5"] {
            s.insert(v.as_bytes());
        }
        assert_eq!(s.encoding(), "intset");
        assert_eq!(s.len(), 5);
        let got: Vec<Member> = s.iter().collect();
        assert_eq!(got, [i64::MIN, -3, 5, 7, 100000].map(Member::Int).to_vec());
        assert!(s.contains(b"100000") && !s.contains(b"100001") && !s.contains(b"07"));
        assert!(s.remove(b"-9223372036854775808") && !s.remove(b"x"));
        assert_eq!(s.len(), 4);
        // Width never narrows, as in Redis.
        assert_eq!(s.heap_size(), PACK_HEADER + 1 + 4 * 8);
    }

    #[test]
    fn five_small_integers_take_eleven_bytes_and_a_header() {
        let mut s = Set::new();
        for v in 1..=5 {
            s.insert(v.to_string().as_bytes());
        }
        assert_eq!(s.heap_size(), PACK_HEADER + 11);
    }

    #[test]
    fn converts_on_non_integer_and_on_size() {
        let mut s = Set::new();
        s.insert(b"1");
        s.insert(b"01");
        assert_eq!(s.encoding(), "hashtable");
        assert!(s.contains(b"1") && s.contains(b"01"));
        let mut s = Set::new();
        let max = SET_MAX_INTSET_ENTRIES.count();
        for v in 0..max {
            s.insert(v.to_string().as_bytes());
        }
        assert_eq!(s.encoding(), "intset");
        s.insert(b"-1");
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(s.len(), max + 1);
        assert!(s.contains_member(Member::Int(3)));
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn table_random_pop_and_shrink() {
        let mut s = Set::new();
        for v in 0..2000 {
            s.insert(format!("m{v}").as_bytes());
        }
        let mut r = rng(1);
        let mut seen = std::collections::HashSet::new();
        while let Some(m) = s.pop_random(&mut r) {
            assert!(seen.insert(m));
        }
        assert_eq!(seen.len(), 2000);
        assert!(s.is_empty());
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn scan_returns_every_member_despite_growth() {
        let mut s = Set::new();
        for v in 0..100 {
            s.insert(format!("a{v}").as_bytes());
        }
        let mut got = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut extra = 0;
        loop {
            cursor = s.scan(cursor, 10, |m| {
                got.insert(m.to_boxed());
            });
            // Grow the table (through several doublings) during the first part of the scan.
            if extra < 3000 {
                for _ in 0..300 {
                    s.insert(format!("b{extra}").as_bytes());
                    extra += 1;
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for v in 0..100 {
            assert!(got.contains(format!("a{v}").as_bytes()), "a{v} missed");
        }
    }

    #[test]
    fn slices_cover_the_set() {
        let mut s = Set::new();
        for v in 0..50 {
            s.insert(format!("x{v}").as_bytes());
        }
        let mut all = Vec::new();
        let mut pos = Some(0);
        while let Some(p) = pos {
            let (part, next) = s.slice(p, 7);
            assert!(part.len() <= 7);
            all.extend(part);
            pos = next;
        }
        all.sort();
        let mut want: Vec<Box<[u8]>> = members(&s).into_iter().map(Vec::into_boxed_slice).collect();
        want.sort();
        assert_eq!(all, want);
    }

    #[test]
    fn table_stats_describe_only_the_hashtable_encoding() {
        let mut s = Set::new();
        s.insert(b"1");
        assert!(s.table_stats().is_none());
        s.insert(b"a");
        let t = s.table_stats().expect("a hashtable now");
        assert_eq!((t.entries, t.used_buckets), (2, 2));
        assert!(t.buckets >= 2 && t.buckets.is_power_of_two());
        assert_eq!(t.chains, vec![t.buckets - 2, 2]);
    }
}
