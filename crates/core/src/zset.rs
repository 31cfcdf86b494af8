//! A sorted set (Redis's t_zset.c): "listpack" while small, "skiplist" beyond.
//!
//! Two representations, chosen as Redis 7.0 chooses them so that OBJECT ENCODING answers the same:
//!
//! * **Pack** ("listpack"): one byte buffer of entries ordered by (score, member). An entry is
//!   `varint(member_len << 1 | int_score)`, the member bytes, then the score: a zigzag varint when
//!   it is an integer of at most 2^53 in magnitude (-0 is stored as 0, as Redis's listpack does), else the 8 bytes of the f64. Small
//!   integer scores take one or two bytes, so a 100-member set is about as compact as Redis's
//!   listpack. Every operation is a linear walk, which is what Redis does too while the set holds at
//!   most `zset-max-listpack-entries` members of at most `zset-max-listpack-value` bytes.
//! * **Skip** ("skiplist"): a member → node hash table (`hashbrown::HashTable` of `u32` node
//!   indices, 4 bytes a slot) plus a skiplist with spans whose nodes live in a `Vec` arena and link
//!   by index (no `unsafe`, no per-link pointers). Spans give O(log N) rank and select, which every
//!   rank, score and lex range command reduces to. A skiplist rather than a counted B-tree because
//!   its insert and delete are short and local (no rebalancing, no node merges), and because a
//!   node's arena slot never changes while it is in the set: ZSCAN's cursor is the slot index, so a
//!   member present for a whole scan is returned, even if its score changes meanwhile (a re-scored
//!   node is unlinked and relinked in the same slot). When a set shrinks to 1/8 of its slots the
//!   arena is rebuilt; cursors carry a generation number, and a cursor from an older generation
//!   restarts the walk, so the guarantee holds (with duplicates, which SCAN allows).
//!
//! Invariants:
//! * no score is NaN; -0 and 0 compare equal (ties are ordered by member), as in Redis;
//! * Pack entries are strictly ordered by (score, member) and members are unique;
//! * in Skip, `table` holds exactly the linked nodes; slot 0 is the header; a free slot has no
//!   levels and is listed in `free`; `nodes[x].levels[i].span` counts the steps level `i` skips;
//! * `nodes[x].next0` always equals `nodes[x].levels[0].next` (0 for a free slot): forward walks
//!   (ranges, geo cell scans) then touch one cache line per node instead of two, as Redis's nodes
//!   with their levels inline do;
//! * conversion is Pack → Skip only, decided by the writer ([`ZSet::add`] and [`ZSet::needs_skip`]);
//!   reads never restructure;
//! * `heap` tracks the bytes owned, so [`ZSet::heap_size`] is O(1).

use std::cmp::Ordering;
use std::hash::BuildHasher;
use std::ops::Range;

use hashbrown::HashTable;

use crate::limits::{ZSET_MAX_LISTPACK_ENTRIES, ZSET_MAX_LISTPACK_VALUE};
use crate::pack::{PackBuf, PackOr, Packed, Rep, MAX_PACK};

/// The packed buffer's header bytes (counted by `heap_size`).
const PACK_HEADER: usize = 8;

/// Compares two (score, member) pairs in sorted-set order.
#[inline]
pub fn cmp_entry(a_score: f64, a_member: &[u8], b_score: f64, b_member: &[u8]) -> Ordering {
    if a_score < b_score {
        Ordering::Less
    } else if a_score > b_score {
        Ordering::Greater
    } else {
        a_member.cmp(b_member)
    }
}

/// A sorted set.
///
/// One word (it lives inline in every sorted-set key's entry): the listpack's own allocation, or
/// the boxed skiplist.
#[derive(Clone, Debug)]
pub struct ZSet {
    repr: PackOr<Pack, Skip>,
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet::new()
    }
}

impl PartialEq for ZSet {
    fn eq(&self, other: &Self) -> bool {
        if self.len() != other.len() {
            return false;
        }
        let mut a = Vec::with_capacity(self.len());
        self.range(0..self.len(), false, |m, s| {
            a.push((m.to_vec(), s.to_bits()))
        });
        let mut i = 0;
        let mut same = true;
        other.range(0..other.len(), false, |m, s| {
            same &= a
                .get(i)
                .is_some_and(|(am, as_)| am == m && *as_ == s.to_bits());
            i += 1;
        });
        same
    }
}

impl Eq for ZSet {}

impl ZSet {
    /// An empty set in the small encoding.
    pub fn new() -> ZSet {
        ZSet {
            repr: PackOr::pack(Pack::default()),
        }
    }

    /// An empty set in the skiplist encoding (Redis creates one when the limits say so up front).
    pub fn new_skiplist() -> ZSet {
        ZSet {
            repr: PackOr::big(Box::new(Skip::new())),
        }
    }

    /// An empty set in the encoding Redis picks for a set about to receive a first member of
    /// `first_member_len` bytes (ZADD on a missing key).
    pub fn for_first_member(first_member_len: usize) -> ZSet {
        if ZSET_MAX_LISTPACK_ENTRIES.count() == 0
            || first_member_len > ZSET_MAX_LISTPACK_VALUE.count()
        {
            ZSet::new_skiplist()
        } else {
            ZSet::new()
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self.repr.get() {
            Rep::Pack(p) => p.len(),
            Rep::Big(s) => s.len,
        }
    }

    /// True when there are no elements (the key is then deleted by the write that emptied it).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The encoding OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self.repr.get() {
            Rep::Pack(_) => "listpack",
            Rep::Big(_) => "skiplist",
        }
    }

    /// True in the small ("listpack") encoding.
    pub fn is_packed(&self) -> bool {
        !self.repr.is_big()
    }

    /// The shape of the skiplist encoding's member table (DEBUG HTSTATS-KEY); None for a listpack.
    pub fn table_stats(&self) -> Option<crate::TableStats> {
        match self.repr.get() {
            Rep::Pack(_) => None,
            Rep::Big(s) => Some(crate::TableStats::open_addressed(
                s.table.num_buckets(),
                s.table.len(),
            )),
        }
    }

    /// Bytes of the listpack encoding's buffer (DEBUG LISTPACK); None for a skiplist.
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
            Rep::Big(s) => std::mem::size_of::<Skip>() + s.heap,
        }
    }

    /// The score of `member`.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self.repr.get() {
            Rep::Pack(p) => p.find(member).map(|(_, _, s)| s),
            Rep::Big(s) => s.find(member).map(|x| s.nodes[x].score),
        }
    }

    /// Converts to the skiplist encoding (no-op if already there).
    pub fn convert_to_skiplist(&mut self) {
        if let Rep::Pack(p) = self.repr.get() {
            let mut s = Skip::new();
            for (m, sc) in p.iter() {
                s.insert(m, sc);
            }
            self.repr = PackOr::big(Box::new(s));
        }
    }

    /// True if adding a new member of `member_len` bytes must first convert the set to a skiplist
    /// (Redis checks the count and the member length before inserting into a listpack).
    pub fn needs_skip(&self, member_len: usize) -> bool {
        match self.repr.get() {
            Rep::Pack(p) => {
                p.len() + 1 > ZSET_MAX_LISTPACK_ENTRIES.count()
                    || member_len > ZSET_MAX_LISTPACK_VALUE.count()
                    // Redis's listpack safety size (an entry adds at most 20 bytes to the member).
                    || p.0.len() + member_len + 20 > MAX_PACK
            }
            Rep::Big(_) => false,
        }
    }

    /// Sets `member`'s score, adding it if absent (converting to a skiplist first when the limits
    /// require it). Returns the previous score. `score` must not be NaN.
    pub fn add(&mut self, member: &[u8], score: f64) -> Option<f64> {
        match self.score(member) {
            Some(old) => {
                self.rescore(member, old, score);
                Some(old)
            }
            None => {
                self.insert_new(member, score);
                None
            }
        }
    }

    /// Adds `member`, which the caller knows is absent, converting to a skiplist first when the
    /// limits require it. `score` must not be NaN.
    pub fn insert_new(&mut self, member: &[u8], score: f64) {
        debug_assert!(!score.is_nan());
        if self.needs_skip(member.len()) {
            self.convert_to_skiplist();
        }
        match self.repr.get_mut() {
            Rep::Pack(p) => p.insert(member, score),
            Rep::Big(s) => s.insert(member, score),
        }
    }

    /// [`ZSet::insert_new`] as Redis loads a packed sorted set (ZSET_LISTPACK/ZSET_ZIPLIST in an
    /// RDB file or a RESTORE payload): converted to a skiplist only past
    /// `zset-max-listpack-entries` (or the listpack's safety size), never for a long member.
    pub fn insert_new_loaded(&mut self, member: &[u8], score: f64) {
        debug_assert!(!score.is_nan());
        if let Rep::Pack(p) = self.repr.get() {
            if p.len() + 1 > ZSET_MAX_LISTPACK_ENTRIES.count()
                || p.0.len() + member.len() + 20 > MAX_PACK
            {
                self.convert_to_skiplist();
            }
        }
        match self.repr.get_mut() {
            Rep::Pack(p) => p.insert(member, score),
            Rep::Big(s) => s.insert(member, score),
        }
    }

    /// Changes the score of `member`, whose current score the caller knows is `old`.
    pub fn rescore(&mut self, member: &[u8], old: f64, score: f64) {
        debug_assert!(!score.is_nan());
        if old.to_bits() == score.to_bits() {
            return;
        }
        match self.repr.get_mut() {
            Rep::Pack(p) => {
                p.remove(member);
                p.insert(member, score);
            }
            Rep::Big(s) => s.rescore(member, score),
        }
    }

    /// Removes `member`; returns its score.
    pub fn remove(&mut self, member: &[u8]) -> Option<f64> {
        match self.repr.get_mut() {
            Rep::Pack(p) => p.remove(member),
            Rep::Big(s) => s.remove(member),
        }
    }

    /// The 0-based ascending rank of `member`, and its score.
    pub fn rank(&self, member: &[u8]) -> Option<(usize, f64)> {
        match self.repr.get() {
            Rep::Pack(p) => p
                .iter()
                .enumerate()
                .find(|(_, (m, _))| *m == member)
                .map(|(i, (_, s))| (i, s)),
            Rep::Big(s) => {
                let x = s.find(member)?;
                let score = s.nodes[x].score;
                Some((s.rank_of(score, member), score))
            }
        }
    }

    /// The element at 0-based ascending rank `rank`.
    pub fn get(&self, rank: usize) -> Option<(&[u8], f64)> {
        match self.repr.get() {
            Rep::Pack(p) => p.iter().nth(rank),
            Rep::Big(s) => {
                let x = s.select(rank)?;
                Some((&s.nodes[x].member, s.nodes[x].score))
            }
        }
    }

    /// The number of leading elements (in ascending order) for which `before` holds. `before` must
    /// be monotone over the order (true, then false): "score < min", "member <= max" and so on. This
    /// turns every score or lex bound into a rank in O(log N).
    pub fn count_while(&self, mut before: impl FnMut(&[u8], f64) -> bool) -> usize {
        match self.repr.get() {
            Rep::Pack(p) => p.iter().take_while(|(m, s)| before(m, *s)).count(),
            Rep::Big(s) => s.count_while(before),
        }
    }

    /// Calls `f` on the elements in ascending order from the first one for which `before` is false
    /// (`before` monotone, as for [`ZSet::count_while`]) until `f` returns false: a score range scan
    /// that finds its start in O(log N) and stops where the caller says.
    pub fn walk_from<'s>(
        &'s self,
        before: impl FnMut(&[u8], f64) -> bool,
        mut f: impl FnMut(&'s [u8], f64) -> bool,
    ) {
        match self.repr.get() {
            Rep::Pack(p) => {
                let mut before = before;
                for (m, s) in p.iter().skip_while(|(m, s)| before(m, *s)) {
                    if !f(m, s) {
                        return;
                    }
                }
            }
            Rep::Big(s) => {
                let mut x = s.first_after(before);
                while x != NIL {
                    let n = &s.nodes[x];
                    if !f(&n.member, n.score) {
                        return;
                    }
                    x = n.next0 as usize;
                }
            }
        }
    }

    /// Calls `f` on the elements whose ascending ranks are in `ranks` (clamped to the set), in
    /// ascending order, or descending when `rev`.
    pub fn range(&self, ranks: Range<usize>, rev: bool, mut f: impl FnMut(&[u8], f64)) {
        let end = ranks.end.min(self.len());
        if ranks.start >= end {
            return;
        }
        match self.repr.get() {
            Rep::Pack(p) => {
                if rev {
                    let items: Vec<(&[u8], f64)> =
                        p.iter().skip(ranks.start).take(end - ranks.start).collect();
                    for (m, s) in items.into_iter().rev() {
                        f(m, s);
                    }
                } else {
                    for (m, s) in p.iter().skip(ranks.start).take(end - ranks.start) {
                        f(m, s);
                    }
                }
            }
            Rep::Big(s) => {
                let Some(mut x) = s.select(if rev { end - 1 } else { ranks.start }) else {
                    return;
                };
                for _ in ranks.start..end {
                    if x == NIL {
                        break;
                    }
                    let n = &s.nodes[x];
                    f(&n.member, n.score);
                    x = if rev {
                        n.backward as usize
                    } else {
                        n.next0 as usize
                    };
                }
            }
        }
    }

    /// Removes the elements whose ascending ranks are in `ranks`; returns how many.
    pub fn remove_ranks(&mut self, ranks: Range<usize>) -> usize {
        let mut members = Vec::new();
        self.range(ranks, false, |m, _| members.push(m.to_vec()));
        for m in &members {
            self.remove(m);
        }
        members.len()
    }

    /// Calls `f` on every element in ascending order.
    pub fn for_each(&self, f: impl FnMut(&[u8], f64)) {
        self.range(0..self.len(), false, f)
    }

    /// One ZSCAN step from `cursor`: calls `f` on the elements of about `count` positions and
    /// returns the next cursor (0 when done). The small encoding returns everything at once, as
    /// Redis does. In the skiplist the cursor is an arena slot: a member present for the whole scan
    /// keeps its slot, so it is returned at least once.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], f64)) -> u64 {
        match self.repr.get() {
            Rep::Pack(p) => {
                for (m, s) in p.iter() {
                    f(m, s);
                }
                0
            }
            Rep::Big(s) => {
                // A cursor from before a compaction restarts the walk: members present
                // throughout are then returned (some twice, which SCAN allows).
                let gen = (cursor >> 32) as u32;
                let mut slot = if gen == s.gen {
                    ((cursor & 0xffff_ffff) as usize).max(1)
                } else {
                    1
                };
                let mut seen = 0;
                while slot < s.nodes.len() && seen < count.max(1) {
                    let n = &s.nodes[slot];
                    if !n.levels.is_empty() {
                        f(&n.member, n.score);
                        seen += 1;
                    }
                    slot += 1;
                }
                // Skip free slots so that a finished scan reports 0 at once.
                while slot < s.nodes.len() && s.nodes[slot].levels.is_empty() {
                    slot += 1;
                }
                if slot >= s.nodes.len() {
                    0
                } else {
                    u64::from(s.gen) << 32 | slot as u64
                }
            }
        }
    }
}

// ===== the small encoding =====

/// Integers up to 2^53 are exact in f64, so they round-trip through the varint form.
const MAX_EXACT: f64 = 9_007_199_254_740_992.0;

/// The entries in order, in an exactly sized buffer whose count is the number of entries.
#[derive(Clone, Debug, Default)]
#[repr(transparent)]
struct Pack(PackBuf);

// SAFETY: `Pack` is a transparent wrapper of a PackBuf.
unsafe impl Packed for Pack {
    fn into_buf(self) -> PackBuf {
        self.0
    }
}

fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

fn get_varint(buf: &[u8], pos: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&b) = buf.get(*pos) {
        *pos += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            break;
        }
        shift += 7;
    }
    v
}

/// The score as a small integer, when it is one exactly.
fn int_score(score: f64) -> Option<i64> {
    // -0 becomes 0 here, as in Redis's listpack (its `d2string` prints -0 as "0").
    let exact = score == score.trunc() && score.abs() <= MAX_EXACT;
    exact.then_some(score as i64)
}

fn encode_entry(buf: &mut Vec<u8>, member: &[u8], score: f64) {
    match int_score(score) {
        Some(i) => {
            put_varint(buf, (member.len() as u64) << 1 | 1);
            buf.extend_from_slice(member);
            put_varint(buf, ((i << 1) ^ (i >> 63)) as u64);
        }
        None => {
            put_varint(buf, (member.len() as u64) << 1);
            buf.extend_from_slice(member);
            buf.extend_from_slice(&score.to_le_bytes());
        }
    }
}

struct PackIter<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> PackIter<'a> {
    /// The next entry and the offset where it starts.
    fn next_at(&mut self) -> Option<(usize, &'a [u8], f64)> {
        if self.pos >= self.buf.len() {
            return None;
        }
        let start = self.pos;
        let head = get_varint(self.buf, &mut self.pos);
        let mlen = (head >> 1) as usize;
        let member = self.buf.get(self.pos..self.pos + mlen)?;
        self.pos += mlen;
        let score = if head & 1 == 1 {
            let z = get_varint(self.buf, &mut self.pos);
            ((z >> 1) as i64 ^ -((z & 1) as i64)) as f64
        } else {
            let bytes: [u8; 8] = self.buf.get(self.pos..self.pos + 8)?.try_into().ok()?;
            self.pos += 8;
            f64::from_le_bytes(bytes)
        };
        Some((start, member, score))
    }
}

impl<'a> Iterator for PackIter<'a> {
    type Item = (&'a [u8], f64);

    fn next(&mut self) -> Option<Self::Item> {
        self.next_at().map(|(_, m, s)| (m, s))
    }
}

impl Pack {
    fn len(&self) -> usize {
        self.0.count()
    }

    fn iter(&self) -> PackIter<'_> {
        PackIter {
            buf: self.0.bytes(),
            pos: 0,
        }
    }

    /// (start offset, end offset, score) of `member`.
    fn find(&self, member: &[u8]) -> Option<(usize, usize, f64)> {
        let mut it = self.iter();
        while let Some((start, m, s)) = it.next_at() {
            if m == member {
                return Some((start, it.pos, s));
            }
        }
        None
    }

    fn insert(&mut self, member: &[u8], score: f64) {
        let mut it = self.iter();
        let mut at = self.0.len();
        while let Some((start, m, s)) = it.next_at() {
            if cmp_entry(score, member, s, m) == Ordering::Less {
                at = start;
                break;
            }
        }
        let mut entry = Vec::with_capacity(member.len() + 12);
        encode_entry(&mut entry, member, score);
        self.0.splice(at..at, &entry);
        self.0.set_count(self.len() + 1);
    }

    fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let (start, end, score) = self.find(member)?;
        self.0.splice(start..end, &[]);
        self.0.set_count(self.len() - 1);
        Some(score)
    }
}

// ===== the skiplist encoding =====

/// The "no node" index (slot 0 is the header, which is never a successor or a predecessor).
const NIL: usize = 0;
/// Levels of the header; with p = 1/4 this covers 2^64 elements.
const MAX_LEVEL: usize = 32;
/// Arenas smaller than this are never compacted (the waste is bounded anyway).
const COMPACT_MIN_SLOTS: usize = 1024;

#[derive(Clone, Copy, Debug, Default)]
struct Level {
    next: u32,
    span: u32,
}

#[derive(Clone, Debug)]
struct Node {
    member: Box<[u8]>,
    score: f64,
    backward: u32,
    /// A copy of `levels[0].next`, kept beside the score for forward walks.
    next0: u32,
    /// Empty for a free slot.
    levels: Levels,
}

/// Levels kept inside the node: with p = 1/4 all but one node in 256 fit, so a search step reads
/// one node rather than a node and then its tower.
const INLINE_LEVELS: usize = 4;

/// A node's levels (dereferences to the slice of them): inline up to [`INLINE_LEVELS`], else boxed.
#[derive(Clone, Debug)]
enum Levels {
    Inline(u8, [Level; INLINE_LEVELS]),
    Boxed(Box<[Level]>),
}

impl Levels {
    fn new(n: usize) -> Levels {
        if n <= INLINE_LEVELS {
            Levels::Inline(n as u8, [Level::default(); INLINE_LEVELS])
        } else {
            Levels::Boxed(vec![Level::default(); n].into_boxed_slice())
        }
    }

    /// Bytes allocated outside the node.
    fn heap_bytes(&self) -> usize {
        match self {
            Levels::Inline(..) => 0,
            Levels::Boxed(b) => b.len() * LEVEL_BYTES,
        }
    }
}

impl Default for Levels {
    fn default() -> Levels {
        Levels::new(0)
    }
}

impl std::ops::Deref for Levels {
    type Target = [Level];

    fn deref(&self) -> &[Level] {
        match self {
            Levels::Inline(n, a) => &a[..usize::from(*n)],
            Levels::Boxed(b) => b,
        }
    }
}

impl std::ops::DerefMut for Levels {
    fn deref_mut(&mut self) -> &mut [Level] {
        match self {
            Levels::Inline(n, a) => &mut a[..usize::from(*n)],
            Levels::Boxed(b) => b,
        }
    }
}

#[derive(Clone, Debug)]
struct Skip {
    nodes: Vec<Node>,
    free: Vec<u32>,
    table: HashTable<u32>,
    hasher: foldhash::fast::FixedState,
    len: usize,
    level: usize,
    rng: u64,
    /// Bytes owned beyond `size_of::<Skip>()`.
    heap: usize,
    /// Bumped by every compaction (ZSCAN cursors carry it).
    gen: u32,
}

const NODE_BYTES: usize = std::mem::size_of::<Node>();
const LEVEL_BYTES: usize = std::mem::size_of::<Level>();

impl Skip {
    fn new() -> Skip {
        let head = Node {
            member: Box::default(),
            score: 0.0,
            backward: NIL as u32,
            next0: NIL as u32,
            levels: Levels::new(MAX_LEVEL),
        };
        Skip {
            nodes: vec![head],
            free: Vec::new(),
            table: HashTable::new(),
            hasher: foldhash::fast::FixedState::with_seed(0x5a5e7),
            len: 0,
            level: 1,
            rng: 0x9e37_79b9_7f4a_7c15,
            heap: NODE_BYTES + MAX_LEVEL * LEVEL_BYTES,
            gen: 0,
        }
    }

    fn hash(&self, member: &[u8]) -> u64 {
        self.hasher.hash_one(member)
    }

    fn find(&self, member: &[u8]) -> Option<usize> {
        let h = self.hash(member);
        self.table
            .find(h, |&i| &*self.nodes[i as usize].member == member)
            .map(|&i| i as usize)
    }

    /// Redis's level distribution: each further level with probability 1/4.
    fn random_level(&mut self) -> usize {
        // xorshift64*: cheap, and good enough for level choice.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let level = 1 + (r.trailing_zeros() / 2) as usize;
        level.min(MAX_LEVEL)
    }

    fn next(&self, x: usize, i: usize) -> usize {
        if i == 0 {
            self.nodes[x].next0 as usize
        } else {
            self.nodes[x].levels[i].next as usize
        }
    }

    fn before(&self, x: usize, score: f64, member: &[u8]) -> bool {
        let n = &self.nodes[x];
        cmp_entry(n.score, &n.member, score, member) == Ordering::Less
    }

    fn table_bytes(&self) -> usize {
        self.table.capacity() * (std::mem::size_of::<u32>() + 1)
    }

    fn insert(&mut self, member: &[u8], score: f64) {
        let lvl = self.random_level();
        let node = Node {
            member: member.into(),
            score,
            backward: NIL as u32,
            next0: NIL as u32,
            levels: Levels::new(lvl),
        };
        let table_before = self.table_bytes();
        let nodes_before = self.nodes.capacity() * NODE_BYTES;
        let x = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = node;
                slot as usize
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.link(x);
        let h = self.hash(member);
        let nodes = &self.nodes;
        let hasher = &self.hasher;
        self.table.insert_unique(h, x as u32, |&i| {
            hasher.hash_one(&*nodes[i as usize].member)
        });
        self.len += 1;
        self.heap += member.len() + self.nodes[x].levels.heap_bytes();
        self.heap = self.heap + self.table_bytes() + self.nodes.capacity() * NODE_BYTES
            - table_before
            - nodes_before;
    }

    /// Links the node in slot `x` (with its levels and score set) into the list.
    fn link(&mut self, x: usize) {
        let (score, lvl) = (self.nodes[x].score, self.nodes[x].levels.len());
        let member: &[u8] = &self.nodes[x].member;
        let mut update = [NIL; MAX_LEVEL];
        let mut rank = [0u32; MAX_LEVEL];
        let mut cur = NIL;
        for i in (0..self.level).rev() {
            rank[i] = if i == self.level - 1 { 0 } else { rank[i + 1] };
            loop {
                let nx = self.next(cur, i);
                if nx == NIL || !self.before(nx, score, member) {
                    break;
                }
                rank[i] += self.nodes[cur].levels[i].span;
                cur = nx;
            }
            update[i] = cur;
        }
        if lvl > self.level {
            for i in self.level..lvl {
                rank[i] = 0;
                update[i] = NIL;
                self.nodes[NIL].levels[i].span = self.len as u32;
            }
            self.level = lvl;
        }
        for i in 0..lvl {
            let u = update[i];
            let ul = self.nodes[u].levels[i];
            let steps = rank[0] - rank[i];
            self.nodes[x].levels[i] = Level {
                next: ul.next,
                span: ul.span - steps,
            };
            self.nodes[u].levels[i] = Level {
                next: x as u32,
                span: steps + 1,
            };
        }
        for (i, &u) in update.iter().enumerate().take(self.level).skip(lvl) {
            self.nodes[u].levels[i].span += 1;
        }
        self.nodes[x].next0 = self.nodes[x].levels[0].next;
        let u0 = update[0];
        self.nodes[u0].next0 = self.nodes[u0].levels[0].next;
        self.nodes[x].backward = u0 as u32;
        let nx = self.next(x, 0);
        if nx != NIL {
            self.nodes[nx].backward = x as u32;
        }
    }

    /// Unlinks the node in slot `x` from the list (its slot and hash entry stay).
    fn unlink(&mut self, x: usize) {
        let score = self.nodes[x].score;
        let member: &[u8] = &self.nodes[x].member;
        let mut update = [NIL; MAX_LEVEL];
        // The first node (ZPOPMIN) has the header before it on every level: no search.
        if self.nodes[NIL].next0 as usize != x {
            let mut cur = NIL;
            for i in (0..self.level).rev() {
                loop {
                    let nx = self.next(cur, i);
                    if nx == NIL || nx == x || !self.before(nx, score, member) {
                        break;
                    }
                    cur = nx;
                }
                update[i] = cur;
            }
        }
        for (i, &u) in update.iter().enumerate().take(self.level) {
            if self.next(u, i) == x {
                let xl = self.nodes[x].levels[i];
                let ul = &mut self.nodes[u].levels[i];
                ul.span = ul.span + xl.span - 1;
                ul.next = xl.next;
            } else {
                self.nodes[u].levels[i].span -= 1;
            }
        }
        let u0 = update[0];
        self.nodes[u0].next0 = self.nodes[u0].levels[0].next;
        let nx = self.next(x, 0);
        if nx != NIL {
            self.nodes[nx].backward = self.nodes[x].backward;
        }
        while self.level > 1 && self.next(NIL, self.level - 1) == NIL {
            self.level -= 1;
        }
    }

    fn rescore(&mut self, member: &[u8], score: f64) {
        let Some(x) = self.find(member) else { return };
        // Same position: change in place (Redis's zslUpdateScore fast path).
        let back = self.nodes[x].backward as usize;
        let nx = self.next(x, 0);
        let back_ok = back == NIL || self.before(back, score, member);
        let next_ok = nx == NIL || {
            let n = &self.nodes[nx];
            cmp_entry(score, member, n.score, &n.member) == Ordering::Less
        };
        if back_ok && next_ok {
            self.nodes[x].score = score;
            return;
        }
        self.unlink(x);
        for l in self.nodes[x].levels.iter_mut() {
            *l = Level::default();
        }
        self.nodes[x].next0 = NIL as u32;
        self.nodes[x].score = score;
        // `link` counts the linked nodes by `len`, which must not include `x` meanwhile.
        self.len -= 1;
        self.link(x);
        self.len += 1;
    }

    fn remove(&mut self, member: &[u8]) -> Option<f64> {
        let h = self.hash(member);
        let nodes = &self.nodes;
        let entry = self
            .table
            .find_entry(h, |&i| &*nodes[i as usize].member == member)
            .ok()?;
        let x = *entry.get() as usize;
        entry.remove();
        self.unlink(x);
        let n = std::mem::replace(
            &mut self.nodes[x],
            Node {
                member: Box::default(),
                score: 0.0,
                backward: NIL as u32,
                next0: NIL as u32,
                levels: Levels::default(),
            },
        );
        self.free.push(x as u32);
        self.len -= 1;
        self.heap -= n.member.len() + n.levels.heap_bytes();
        if self.nodes.len() > COMPACT_MIN_SLOTS && self.len * 8 < self.nodes.len() {
            self.compact();
        }
        Some(n.score)
    }

    /// Rebuilds the arena and the table at the current size once most slots are free (after a
    /// set shrank by 7/8), so a set that shrank does not keep its peak memory. Amortized O(1) per
    /// removal: at least 7/8 of the slots were freed since the last rebuild.
    fn compact(&mut self) {
        let mut fresh = Skip::new();
        fresh.rng = self.rng;
        fresh.gen = self.gen.wrapping_add(1);
        let mut x = self.next(NIL, 0);
        while x != NIL {
            let n = &self.nodes[x];
            fresh.insert(&n.member, n.score);
            x = n.levels[0].next as usize;
        }
        *self = fresh;
    }

    /// 0-based rank of the linked element (score, member).
    fn rank_of(&self, score: f64, member: &[u8]) -> usize {
        self.count_while(|m, s| cmp_entry(s, m, score, member) == Ordering::Less)
    }

    fn count_while(&self, mut before: impl FnMut(&[u8], f64) -> bool) -> usize {
        let mut cur = NIL;
        let mut traversed = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let nx = self.next(cur, i);
                if nx == NIL || !before(&self.nodes[nx].member, self.nodes[nx].score) {
                    break;
                }
                traversed += self.nodes[cur].levels[i].span as usize;
                cur = nx;
            }
        }
        traversed
    }

    /// The first node for which `before` is false (NIL if none).
    fn first_after(&self, mut before: impl FnMut(&[u8], f64) -> bool) -> usize {
        let mut cur = NIL;
        for i in (0..self.level).rev() {
            loop {
                let nx = self.next(cur, i);
                if nx == NIL || !before(&self.nodes[nx].member, self.nodes[nx].score) {
                    break;
                }
                cur = nx;
            }
        }
        self.next(cur, 0)
    }

    /// The node at 0-based rank `rank`.
    fn select(&self, rank: usize) -> Option<usize> {
        if rank >= self.len {
            return None;
        }
        if rank == 0 {
            // The first node (ZPOPMIN, ZRANGE 0 ..): no walk.
            return Some(self.nodes[NIL].next0 as usize);
        }
        let target = rank + 1;
        let mut cur = NIL;
        let mut traversed = 0usize;
        for i in (0..self.level).rev() {
            loop {
                let l = self.nodes[cur].levels[i];
                if l.next as usize == NIL || traversed + l.span as usize > target {
                    break;
                }
                traversed += l.span as usize;
                cur = l.next as usize;
            }
            if traversed == target {
                return Some(cur);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(z: &ZSet) -> Vec<(Vec<u8>, f64)> {
        let mut v = Vec::new();
        z.for_each(|m, s| v.push((m.to_vec(), s)));
        v
    }

    #[test]
    fn walk_from_scans_a_score_range_in_both_encodings() {
        for mut z in [ZSet::new(), ZSet::new_skiplist()] {
            for i in 0..200u32 {
                z.add(format!("m{i:03}").as_bytes(), f64::from(i / 2));
            }
            let mut seen = Vec::new();
            z.walk_from(
                |_, s| s < 10.0,
                |m, s| {
                    if s >= 12.0 {
                        return false;
                    }
                    seen.push(m.to_vec());
                    true
                },
            );
            let want: Vec<Vec<u8>> = (20..24).map(|i| format!("m{i:03}").into_bytes()).collect();
            assert_eq!(seen, want);
            let mut n = 0;
            z.walk_from(
                |_, s| s < 1e9,
                |_, _| {
                    n += 1;
                    true
                },
            );
            assert_eq!(n, 0);
        }
    }

    #[test]
    fn pack_round_trips_scores() {
        let mut z = ZSet::new();
        for (m, s) in [
            ("a", 1.0),
            ("b", -0.0),
            ("h", -0.5),
            ("c", 0.5),
            ("d", f64::INFINITY),
            ("e", -1e300),
            ("f", 9e15),
            ("g", -3.0),
        ] {
            assert_eq!(z.add(m.as_bytes(), s), None);
        }
        assert_eq!(z.encoding(), "listpack");
        let got = collect(&z);
        let names: Vec<&[u8]> = got.iter().map(|(m, _)| &m[..]).collect();
        assert_eq!(names, [b"e", b"g", b"h", b"b", b"c", b"a", b"f", b"d"]);
        assert!(z.score(b"b").unwrap().is_sign_positive());
        assert_eq!(z.score(b"f"), Some(9e15));
        assert_eq!(z.rank(b"c"), Some((4, 0.5)));
        assert_eq!(z.add(b"c", 10.0), Some(0.5));
        assert_eq!(z.rank(b"c"), Some((5, 10.0)));
        assert_eq!(z.remove(b"c"), Some(10.0));
        assert_eq!(z.len(), 7);
    }

    /// A reference model: sorted Vec of (score, member).
    fn check_against_model(ops: usize, convert: bool) {
        let mut z = ZSet::new();
        if convert {
            z.convert_to_skiplist();
        }
        let mut model: Vec<(f64, Vec<u8>)> = Vec::new();
        let mut rng = 12345u64;
        let mut rand = move |n: u64| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (rng >> 33) % n
        };
        for _ in 0..ops {
            let m = format!("m{}", rand(200)).into_bytes();
            let s = rand(50) as f64 - 25.0;
            match rand(3) {
                0 | 1 => {
                    let old = model.iter().position(|(_, x)| *x == m);
                    let prev = old.map(|i| model.remove(i).0);
                    model.push((s, m.clone()));
                    model.sort_by(|a, b| cmp_entry(a.0, &a.1, b.0, &b.1));
                    assert_eq!(z.add(&m, s), prev);
                }
                _ => {
                    let old = model.iter().position(|(_, x)| *x == m);
                    let prev = old.map(|i| model.remove(i).0);
                    assert_eq!(z.remove(&m), prev);
                }
            }
            assert_eq!(z.len(), model.len());
            if let Rep::Big(sk) = z.repr.get() {
                for n in &sk.nodes {
                    assert_eq!(n.next0, n.levels.first().map_or(0, |l| l.next));
                }
            }
        }
        let mut walked = Vec::new();
        z.walk_from(
            |_, s| s < -3.0,
            |m, s| {
                walked.push(m.to_vec());
                s < 7.0
            },
        );
        let from = model
            .iter()
            .position(|(s, _)| *s >= -3.0)
            .unwrap_or(model.len());
        let to = model
            .iter()
            .position(|(s, _)| *s >= 7.0)
            .map_or(model.len(), |i| i + 1);
        let want_walk: Vec<Vec<u8>> = model[from..to.max(from)]
            .iter()
            .map(|(_, m)| m.clone())
            .collect();
        assert_eq!(walked, want_walk);
        let got = collect(&z);
        let want: Vec<(Vec<u8>, f64)> = model.iter().map(|(s, m)| (m.clone(), *s)).collect();
        assert_eq!(got, want);
        for (i, (s, m)) in model.iter().enumerate() {
            assert_eq!(z.rank(m), Some((i, *s)));
            assert_eq!(z.get(i).map(|(m, _)| m.to_vec()), Some(m.clone()));
        }
        let below = model.iter().filter(|(s, _)| *s < 3.0).count();
        assert_eq!(z.count_while(|_, s| s < 3.0), below);
        let mut rev = Vec::new();
        z.range(2..model.len(), true, |m, _| rev.push(m.to_vec()));
        let want_rev: Vec<Vec<u8>> = model[2.min(model.len())..]
            .iter()
            .rev()
            .map(|(_, m)| m.clone())
            .collect();
        assert_eq!(rev, want_rev);
        // A full scan returns every member once.
        let mut seen = Vec::new();
        let mut cursor = 0;
        loop {
            cursor = z.scan(cursor, 7, |m, _| seen.push(m.to_vec()));
            if cursor == 0 {
                break;
            }
        }
        seen.sort();
        let mut all: Vec<Vec<u8>> = model.iter().map(|(_, m)| m.clone()).collect();
        all.sort();
        assert_eq!(seen, all);
    }

    #[test]
    fn skiplist_matches_a_sorted_model() {
        check_against_model(300, true);
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn skiplist_matches_a_sorted_model_long() {
        check_against_model(20_000, true);
        check_against_model(3_000, false);
    }

    #[test]
    #[cfg_attr(miri, ignore)]
    fn shrinking_compacts_and_scans_stay_complete() {
        let mut z = ZSet::new_skiplist();
        for i in 0..5000 {
            z.add(format!("m{i}").as_bytes(), f64::from(i % 97));
        }
        let big = z.heap_size();
        // Start a scan, then shrink the set under it.
        let mut seen = std::collections::BTreeSet::new();
        let mut cursor = z.scan(0, 10, |m, _| {
            seen.insert(m.to_vec());
        });
        for i in 0..4990 {
            if i % 500 != 0 {
                z.remove(format!("m{i}").as_bytes());
            }
        }
        assert!(z.heap_size() * 4 < big, "{} vs {big}", z.heap_size());
        while cursor != 0 {
            cursor = z.scan(cursor, 10, |m, _| {
                seen.insert(m.to_vec());
            });
        }
        let mut left = Vec::new();
        z.for_each(|m, _| left.push(m.to_vec()));
        assert_eq!(left.len(), z.len());
        for m in &left {
            assert!(seen.contains(m), "{:?} missed", String::from_utf8_lossy(m));
        }
        for (i, m) in left.iter().enumerate() {
            assert_eq!(z.rank(m).map(|r| r.0), Some(i));
        }
    }

    #[test]
    fn equality_ignores_encoding() {
        let mut a = ZSet::new();
        let mut b = ZSet::new_skiplist();
        for i in 0..10 {
            a.add(format!("{i}").as_bytes(), i as f64 / 3.0);
            b.add(format!("{i}").as_bytes(), i as f64 / 3.0);
        }
        assert_eq!(a, b);
        b.remove(b"3");
        assert_ne!(a, b);
        assert!(b.heap_size() > 0);
    }

    #[test]
    fn table_stats_and_packed_bytes_follow_the_encoding() {
        let mut z = ZSet::new();
        z.add(b"a", 1.0);
        assert!(z.table_stats().is_none());
        assert!(z.packed_bytes().is_some_and(|n| n > 1));
        let mut z = ZSet::new_skiplist();
        z.add(b"a", 1.0);
        z.add(b"b", 2.0);
        assert!(z.packed_bytes().is_none());
        let t = z.table_stats().expect("a skiplist's table");
        assert_eq!((t.entries, t.used_buckets), (2, 2));
    }
}
