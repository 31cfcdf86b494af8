//! The chained hash table that holds a database's entries.
//!
//! Chaining (rather than open addressing) is chosen for two reasons: the chain link lives inside the
//! entry's own allocation, so the table costs one pointer per bucket (8 bytes per key at full load
//! instead of ~19 for an open-addressed table at its worst load factor), and every key has exactly one
//! home bucket, `hash & mask`, which is what makes Redis's reverse-binary SCAN cursor sound: a key
//! present for the whole scan is returned at least once even if the table grows or shrinks meanwhile.
//!
//! Resizing is incremental, as in Redis: a resize allocates the new table and then moves one bucket
//! per write operation (and more from [`Dict::rehash_for`], which the shard calls when idle), so no
//! single command pays for moving a million entries. While rehashing, lookups consult both tables.
//!
//! Invariants: each table's length is 0 or a power of two; `len` counts the entries reachable from
//! both tables; while rehashing, buckets of table 0 below `rehash_idx` are empty and every new entry
//! goes to table 1; the table grows when `len` would exceed its bucket count (load factor 1; up to
//! 1.618 while [`Dict::insert_bounded`]'s caller refuses the memory) and shrinks when fewer than
//! 1/8 of the buckets would be used.

use std::hash::BuildHasher;

use crate::entry::Entry;

const MIN_BUCKETS: usize = 4;

/// The load (entries per bucket, in thousandths) past which the table grows even when
/// [`Dict::insert_bounded`]'s check refuses: Redis's HASHTABLE_MAX_LOAD_FACTOR, 1.618.
pub const FORCE_GROW_LOAD_PERMILLE: usize = 1618;

/// A cache prefetch hint; no effect on the program's results, and a no-op off x86_64.
#[inline(always)]
fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching never faults and has no architectural effect, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
/// Empty buckets one rehash step may skip before giving up (bounds the work of a step).
const EMPTY_VISITS: usize = 10;

/// Chain lengths [`TableStats::chains`] tells apart; longer chains count in its last slot (Redis's
/// DICT_STATS_VECTLEN).
pub const CHAIN_STATS_LEN: usize = 50;

/// The shape of one bucket array (DEBUG HTSTATS): what Redis's dictGetStats reports of a table.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TableStats {
    /// Buckets in the array.
    pub buckets: usize,
    /// Entries stored in the array.
    pub entries: usize,
    /// Buckets holding at least one entry.
    pub used_buckets: usize,
    /// The longest chain.
    pub max_chain: usize,
    /// `chains[n]`: buckets whose chain holds `n` entries; the last slot also counts the longer ones.
    pub chains: Vec<usize>,
}

impl TableStats {
    /// The shape of an open-addressed table of `buckets` slots holding `entries` (hashbrown's, as
    /// the hashtable encodings of sets, hashes and sorted sets use): a slot holds at most one
    /// entry, so every "chain" is 0 or 1 long.
    pub fn open_addressed(buckets: usize, entries: usize) -> TableStats {
        TableStats {
            buckets,
            entries,
            used_buckets: entries,
            max_chain: usize::from(entries > 0),
            chains: vec![buckets - entries, entries],
        }
    }
}

/// A hash table of [`Entry`] keyed by the entry's key bytes.
pub struct Dict {
    tables: [Vec<Option<Entry>>; 2],
    /// Next bucket of `tables[0]` to move, while a resize is in progress.
    rehash_idx: Option<usize>,
    len: usize,
    hasher: foldhash::quality::RandomState,
}

impl Default for Dict {
    fn default() -> Self {
        Self::new()
    }
}

fn empty_table(size: usize) -> Vec<Option<Entry>> {
    (0..size).map(|_| None).collect()
}

impl Dict {
    /// An empty table; allocates nothing until the first insert.
    pub fn new() -> Self {
        Dict {
            tables: [Vec::new(), Vec::new()],
            rehash_idx: None,
            len: 0,
            hasher: foldhash::quality::RandomState::default(),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True while a resize is in progress.
    pub fn is_rehashing(&self) -> bool {
        self.rehash_idx.is_some()
    }

    /// Bytes used by the bucket arrays.
    pub fn table_size(&self) -> usize {
        (self.tables[0].capacity() + self.tables[1].capacity())
            * std::mem::size_of::<Option<Entry>>()
    }

    fn hash(&self, key: &[u8]) -> u64 {
        self.hasher.hash_one(key)
    }

    /// Where `key`'s entry is: (table, bucket, position in the bucket's chain). Read-only, so it can
    /// serve both [`Dict::get`] and the mutable paths, which then walk to that position with
    /// [`Dict::link_at`]: every pointer written through is thereby derived from `&mut self`.
    fn locate(&self, key: &[u8]) -> Option<(usize, usize, usize)> {
        if self.len == 0 {
            return None;
        }
        let hash = self.hash(key) as usize;
        let tables = if self.rehash_idx.is_some() { 2 } else { 1 };
        for (ti, t) in self.tables[..tables].iter().enumerate() {
            if t.is_empty() {
                continue;
            }
            let b = hash & (t.len() - 1);
            let mut link = &t[b];
            let mut depth = 0;
            while let Some(e) = link {
                if e.key() == key {
                    return Some((ti, b, depth));
                }
                link = e.next();
                depth += 1;
            }
        }
        None
    }

    /// The link (bucket slot or predecessor's `next`) at a position found by [`Dict::locate`]. The
    /// second walk follows pointers already in cache and compares no keys.
    fn link_at(&mut self, (table, bucket, depth): (usize, usize, usize)) -> &mut Option<Entry> {
        let mut link = &mut self.tables[table][bucket];
        for _ in 0..depth {
            link = link
                .as_mut()
                .expect("locate counted this many entries")
                .next_mut();
        }
        link
    }

    /// The link that holds `key`'s entry (always `Some(entry)` when returned).
    fn link_mut(&mut self, key: &[u8]) -> Option<&mut Option<Entry>> {
        let at = self.locate(key)?;
        Some(self.link_at(at))
    }

    /// Hints the CPU to load the bucket(s) `key` hashes to. Lookups of a pipelined batch issue this
    /// for every key first, then [`Dict::prefetch_entry`], so the two cache misses of each lookup
    /// (bucket, then entry) overlap across the batch instead of being paid one after another.
    pub fn prefetch_bucket(&self, key: &[u8]) {
        if self.len == 0 {
            return;
        }
        let hash = self.hash(key) as usize;
        let tables = if self.rehash_idx.is_some() { 2 } else { 1 };
        for t in &self.tables[..tables] {
            if !t.is_empty() {
                prefetch(&t[hash & (t.len() - 1)] as *const Option<Entry> as *const u8);
            }
        }
    }

    /// Hints the CPU to load the first entry of `key`'s bucket (second prefetch stage).
    pub fn prefetch_entry(&self, key: &[u8]) {
        if self.len == 0 {
            return;
        }
        let hash = self.hash(key) as usize;
        let t = &self.tables[if self.rehash_idx.is_some() { 1 } else { 0 }];
        if let Some(Some(e)) = t.get(hash & (t.len().max(1) - 1)) {
            prefetch(e.0.as_ptr());
        }
    }

    /// The entry for `key`.
    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        let (table, bucket, depth) = self.locate(key)?;
        let mut e = self.tables[table][bucket].as_ref();
        for _ in 0..depth {
            e = e?.next().as_ref();
        }
        e
    }

    /// The entry for `key`, mutably (for in-place changes; use [`Dict::replace`] to reallocate).
    pub fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.link_mut(key)?.as_mut()
    }

    /// Inserts `entry`, returning the entry it replaced (same key), if any.
    pub fn insert(&mut self, entry: Entry) -> Option<Entry> {
        self.insert_bounded(entry, |_| true)
    }

    /// [`Dict::insert`], asking `may_grow` before the table grows while its load is at most
    /// [`FORCE_GROW_LOAD_PERMILLE`]: given the bytes the new table would take, it answers whether they may
    /// be allocated. Refused, the entry goes in without a resize (chains get longer). Redis's
    /// `dictExpandAllowed` rule: near `maxmemory`, doubling a big table (64 MB for 8M keys) would
    /// evict that much data to make room for an index, so the table grows only once the load makes
    /// lookups slow.
    pub fn insert_bounded(
        &mut self,
        mut entry: Entry,
        may_grow: impl FnOnce(usize) -> bool,
    ) -> Option<Entry> {
        self.rehash_step();
        if let Some(link) = self.link_mut(entry.key()) {
            // Swap the entry in place, keeping the chain behind it.
            let mut old = link.take().expect("link holds an entry");
            *entry.next_mut() = old.next_mut().take();
            *link = Some(entry);
            return Some(old);
        }
        if self.rehash_idx.is_none() && self.len >= self.tables[0].len() {
            let size = (self.len + 1).next_power_of_two().max(MIN_BUCKETS);
            let forced = self.len * 1000 > self.tables[0].len() * FORCE_GROW_LOAD_PERMILLE;
            if self.tables[0].is_empty()
                || forced
                || may_grow(size * std::mem::size_of::<Option<Entry>>())
            {
                self.start_resize(size);
            }
        }
        let hash = self.hash(entry.key()) as usize;
        let t = &mut self.tables[if self.rehash_idx.is_some() { 1 } else { 0 }];
        let b = hash & (t.len() - 1);
        *entry.next_mut() = t[b].take();
        t[b] = Some(entry);
        self.len += 1;
        None
    }

    /// Removes and returns the entry for `key`.
    pub fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        self.rehash_step();
        let link = self.link_mut(key)?;
        // Splice the successor into the link.
        let mut e = link.take().expect("link holds an entry");
        *link = e.next_mut().take();
        *e.next_mut() = None;
        self.len -= 1;
        let size = self.tables[0].len();
        if self.rehash_idx.is_none() && size > MIN_BUCKETS && self.len * 8 < size {
            self.start_resize(self.len.next_power_of_two().max(MIN_BUCKETS));
        }
        Some(e)
    }

    /// Replaces `key`'s entry with `f(entry)`, which must keep the same key. Returns false if absent.
    pub fn replace(&mut self, key: &[u8], f: impl FnOnce(Entry) -> Entry) -> bool {
        let Some(link) = self.link_mut(key) else {
            return false;
        };
        // The chain tail is detached while `f` runs, then restored.
        let mut e = link.take().expect("link holds an entry");
        let tail = e.next_mut().take();
        let mut new = f(e);
        debug_assert_eq!(new.key(), key);
        *new.next_mut() = tail;
        *link = Some(new);
        true
    }

    /// Takes every entry out in O(1), leaving the table empty, as a [`Drain`] that frees them in
    /// bounded slices (FLUSHDB/FLUSHALL hand it to the shard's lazy-free queue).
    pub fn take_all(&mut self) -> Drain {
        let len = self.len;
        let tables = std::mem::take(&mut self.tables);
        self.rehash_idx = None;
        self.len = 0;
        Drain { tables, len }
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.tables = [Vec::new(), Vec::new()];
        self.rehash_idx = None;
        self.len = 0;
    }

    fn start_resize(&mut self, size: usize) {
        if self.tables[0].is_empty() {
            self.tables[0] = empty_table(size);
            return;
        }
        self.tables[1] = empty_table(size);
        self.rehash_idx = Some(0);
    }

    /// Moves one bucket (skipping at most a few empty ones) from the old table to the new one.
    fn rehash_step(&mut self) {
        let Some(mut idx) = self.rehash_idx else {
            return;
        };
        let mut empty = 0;
        while idx < self.tables[0].len() && self.tables[0][idx].is_none() {
            idx += 1;
            empty += 1;
            if empty == EMPTY_VISITS {
                self.rehash_idx = Some(idx);
                return;
            }
        }
        if idx < self.tables[0].len() {
            let mut head = self.tables[0][idx].take();
            let mask = self.tables[1].len() - 1;
            while let Some(mut e) = head {
                head = e.next_mut().take();
                let b = self.hasher.hash_one(e.key()) as usize & mask;
                *e.next_mut() = self.tables[1][b].take();
                self.tables[1][b] = Some(e);
            }
            idx += 1;
        }
        if idx >= self.tables[0].len() {
            self.tables[0] = std::mem::take(&mut self.tables[1]);
            self.rehash_idx = None;
        } else {
            self.rehash_idx = Some(idx);
        }
    }

    /// Rehashes for up to `steps` buckets; returns true if a resize is still in progress. The shard
    /// calls this from its background loop so idle databases finish resizing without traffic.
    pub fn rehash_for(&mut self, steps: usize) -> bool {
        for _ in 0..steps {
            if self.rehash_idx.is_none() {
                break;
            }
            self.rehash_step();
        }
        let size = self.tables[0].len();
        if self.rehash_idx.is_none() && size > MIN_BUCKETS && self.len * 8 < size {
            // Deletions stopped mid-shrink: keep shrinking from the background, as Redis's cron does.
            self.start_resize(self.len.next_power_of_two().max(MIN_BUCKETS));
        }
        self.rehash_idx.is_some()
    }

    fn visit_bucket<'a>(table: &'a [Option<Entry>], idx: usize, f: &mut impl FnMut(&'a Entry)) {
        let mut link = &table[idx];
        while let Some(e) = link {
            f(e);
            link = e.next();
        }
    }

    /// Calls `f` on every entry of the bucket(s) at `cursor` and returns the next cursor (0 = done).
    ///
    /// Redis's reverse-binary cursor: the high bits of the cursor are incremented, so buckets that
    /// split or merge on a resize are visited consistently and no key present throughout is missed.
    /// While rehashing, the cursor walks the smaller table and, for each of its buckets, every bucket
    /// of the larger table that it expands to.
    pub fn scan(&self, cursor: u64, mut f: impl FnMut(&Entry)) -> u64 {
        let mut v = cursor;
        if self.rehash_idx.is_none() {
            let t = &self.tables[0];
            if t.is_empty() {
                return 0;
            }
            let m0 = (t.len() - 1) as u64;
            Self::visit_bucket(t, (v & m0) as usize, &mut f);
            v |= !m0;
            return v.reverse_bits().wrapping_add(1).reverse_bits();
        }
        let (small, large) = if self.tables[0].len() <= self.tables[1].len() {
            (&self.tables[0], &self.tables[1])
        } else {
            (&self.tables[1], &self.tables[0])
        };
        let (m0, m1) = ((small.len() - 1) as u64, (large.len() - 1) as u64);
        Self::visit_bucket(small, (v & m0) as usize, &mut f);
        loop {
            Self::visit_bucket(large, (v & m1) as usize, &mut f);
            // Increment the bits not covered by the smaller mask, reverse-binary.
            v |= !m1;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
            if v & (m0 ^ m1) == 0 {
                // The last increment carried into the smaller table's bits: `v` is the next cursor.
                return v;
            }
        }
    }

    fn visit_bucket_mut(table: &mut [Option<Entry>], idx: usize, f: &mut impl FnMut(&mut Entry)) {
        let mut link = &mut table[idx];
        while let Some(e) = link {
            f(e);
            link = e.next_mut();
        }
    }

    /// [`Dict::scan`] with each entry lent mutably (a snapshot's walk marks what it wrote). `f`
    /// must not change the key (the entry stays in its bucket).
    pub fn scan_mut(&mut self, cursor: u64, mut f: impl FnMut(&mut Entry)) -> u64 {
        let mut v = cursor;
        if self.rehash_idx.is_none() {
            let t = &mut self.tables[0];
            if t.is_empty() {
                return 0;
            }
            let m0 = (t.len() - 1) as u64;
            Self::visit_bucket_mut(t, (v & m0) as usize, &mut f);
            v |= !m0;
            return v.reverse_bits().wrapping_add(1).reverse_bits();
        }
        let [t0, t1] = &mut self.tables;
        let (small, large) = if t0.len() <= t1.len() {
            (t0, t1)
        } else {
            (t1, t0)
        };
        let (m0, m1) = ((small.len() - 1) as u64, (large.len() - 1) as u64);
        Self::visit_bucket_mut(small, (v & m0) as usize, &mut f);
        loop {
            Self::visit_bucket_mut(large, (v & m1) as usize, &mut f);
            v |= !m1;
            v = v.reverse_bits().wrapping_add(1).reverse_bits();
            if v & (m0 ^ m1) == 0 {
                return v;
            }
        }
    }

    /// A pseudo-random entry chosen with the caller's random numbers `rand()`.
    pub fn random(&self, mut rand: impl FnMut() -> u64) -> Option<&Entry> {
        if self.len == 0 {
            return None;
        }
        // Candidate buckets: the unmoved part of table 0 plus all of table 1 while rehashing.
        let start0 = self.rehash_idx.unwrap_or(0);
        let n0 = self.tables[0].len() - start0.min(self.tables[0].len());
        let n1 = if self.rehash_idx.is_some() {
            self.tables[1].len()
        } else {
            0
        };
        let total = (n0 + n1) as u64;
        let bucket = |i: usize| {
            if i < n0 {
                &self.tables[0][start0 + i]
            } else {
                &self.tables[1][i - n0]
            }
        };
        // Tables are at least 1/8 full, so a non-empty bucket is found quickly; cap the tries and
        // fall back to a linear walk from a random start so the loop is bounded.
        let start = (rand() % total) as usize;
        let head = (0..64)
            .map(|_| bucket((rand() % total) as usize))
            .find(|b| b.is_some())
            .or_else(|| {
                (0..total as usize)
                    .map(|i| bucket((start + i) % total as usize))
                    .find(|b| b.is_some())
            })?;
        let mut chain = Vec::new();
        let mut link = head;
        while let Some(e) = link {
            chain.push(e);
            link = e.next();
        }
        Some(chain[(rand() % chain.len() as u64) as usize])
    }

    /// The shape of table 0 and, while a resize is in progress, of table 1 (the target): bucket
    /// counts and chain lengths, walking every bucket (O(buckets + entries), for DEBUG HTSTATS).
    pub fn table_stats(&self) -> Vec<TableStats> {
        let tables = if self.rehash_idx.is_some() { 2 } else { 1 };
        self.tables[..tables]
            .iter()
            .map(|t| {
                let mut s = TableStats {
                    buckets: t.len(),
                    chains: vec![0; CHAIN_STATS_LEN],
                    ..TableStats::default()
                };
                for head in t {
                    let mut n = 0;
                    let mut link = head.as_ref();
                    while let Some(e) = link {
                        n += 1;
                        link = e.next().as_ref();
                    }
                    s.entries += n;
                    s.used_buckets += usize::from(n > 0);
                    s.max_chain = s.max_chain.max(n);
                    s.chains[n.min(CHAIN_STATS_LEN - 1)] += 1;
                }
                s
            })
            .collect()
    }

    /// Iterates over every entry (used by KEYS and snapshots).
    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.tables.iter().flatten().flat_map(|head| {
            let mut link = head.as_ref();
            std::iter::from_fn(move || {
                let e = link?;
                link = e.next().as_ref();
                Some(e)
            })
        })
    }
}

/// The entries of a table taken out whole ([`Dict::take_all`]), freed a slice at a time.
///
/// Invariant: `len` counts the entries still reachable from `tables`. Buckets are popped from the end
/// of each bucket array, so the array shrinks as it is freed and dropping the remainder never walks it.
pub struct Drain {
    tables: [Vec<Option<Entry>>; 2],
    len: usize,
}

impl Drain {
    /// Entries not yet freed.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when everything has been freed, bucket arrays included.
    pub fn is_empty(&self) -> bool {
        self.tables.iter().all(Vec::is_empty)
    }

    /// Calls `f` on the entries of up to `buckets` buckets from position `at` (start with 0) and
    /// returns the next position, None once every bucket was visited. The table is no longer
    /// changed once taken out, so a position stays valid (a snapshot reads a flushed table this
    /// way before it is freed).
    pub fn visit(&self, at: usize, buckets: usize, mut f: impl FnMut(&Entry)) -> Option<usize> {
        let n0 = self.tables[0].len();
        let total = n0 + self.tables[1].len();
        let end = at.saturating_add(buckets).min(total);
        for i in at..end {
            let head = if i < n0 {
                &self.tables[0][i]
            } else {
                &self.tables[1][i - n0]
            };
            let mut link = head.as_ref();
            while let Some(e) = link {
                f(e);
                link = e.next().as_ref();
            }
        }
        (end < total).then_some(end)
    }

    /// Frees entries and buckets until `budget` units of work are spent (one per bucket visited and
    /// one per entry freed; a bucket's chain is freed whole). Returns the entries freed.
    pub fn free(&mut self, budget: usize) -> usize {
        let (mut work, mut freed) = (0, 0);
        for t in &mut self.tables {
            while work < budget {
                let Some(head) = t.pop() else {
                    break;
                };
                let mut chain = 0;
                let mut link = head.as_ref();
                while let Some(e) = link {
                    chain += 1;
                    link = e.next().as_ref();
                }
                // Entry's Drop unlinks and frees the rest of the chain iteratively.
                drop(head);
                work += 1 + chain;
                freed += chain;
            }
            if t.is_empty() {
                *t = Vec::new();
            }
        }
        self.len -= freed;
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::{Value, ValueRef};
    use std::collections::HashSet;

    /// Miri interprets every step, so the tests that churn thousands of keys use fewer under it;
    /// what they check (resizes, rehashing mid-scan) still happens at the smaller sizes.
    const SCALE: i64 = if cfg!(miri) { 10 } else { 1 };

    fn e(k: &str, v: i64) -> Entry {
        Entry::new(k.as_bytes(), Value::Int(v), None, 0)
    }

    #[test]
    fn take_all_empties_at_once_and_drains_in_bounded_slices() {
        let mut d = Dict::new();
        for i in 0..10_000 {
            d.insert(e(&format!("k{i}"), i));
        }
        d.rehash_for(3); // leave a resize half done: both tables hold entries
        let mut g = d.take_all();
        assert!(d.is_empty() && d.get(b"k1").is_none());
        d.insert(e("k1", 1));
        assert_eq!((d.len(), g.len()), (1, 10_000));
        let mut total = 0;
        while !g.is_empty() {
            let n = g.free(100);
            assert!(n <= 100);
            total += n;
        }
        assert_eq!(total, 10_000);
        assert_eq!(g.free(100), 0);
    }

    #[test]
    fn a_refused_growth_waits_until_the_load_passes_the_force_limit() {
        let mut d = Dict::new();
        for i in 0..64 {
            d.insert(e(&format!("k{i}"), i));
        }
        d.rehash_for(1000);
        assert_eq!(d.tables[0].len(), 64);
        let mut asked = Vec::new();
        for i in 64..104 {
            d.insert_bounded(e(&format!("k{i}"), i), |bytes| {
                asked.push(bytes);
                false
            });
        }
        // Refused at every insert from 64 entries on (128 buckets, 8 bytes each), up to a load of
        // 1.618 (104 entries in 64 buckets): still one table of 64 buckets, all keys reachable.
        assert_eq!(asked, vec![128 * 8; 40]);
        assert_eq!(d.tables[0].len(), 64);
        assert!(!d.is_rehashing());
        assert_eq!(d.len(), 104);
        // Past 1.618 the table grows without asking.
        d.insert_bounded(e("k104", 0), |_| panic!("asked past the force limit"));
        assert!(d.is_rehashing());
        assert_eq!(d.tables[1].len(), 128);
        for i in 0..105 {
            assert!(d.get(format!("k{i}").as_bytes()).is_some());
        }
        // Allowed, a table at load 1 grows as before.
        let mut d = Dict::new();
        for i in 0..8 {
            d.insert(e(&format!("k{i}"), i));
        }
        d.rehash_for(1000);
        d.insert_bounded(e("k8", 8), |bytes| bytes == 16 * 8);
        assert!(d.is_rehashing());
    }

    #[test]
    fn insert_get_replace_remove() {
        let mut d = Dict::new();
        let n = 1000 / SCALE;
        for i in 0..n {
            assert!(d.insert(e(&format!("k{i}"), i)).is_none());
        }
        assert_eq!(d.len(), n as usize);
        let old = d.insert(e("k5", 55)).expect("replaced");
        assert_eq!(old.value(), ValueRef::Int(5));
        assert_eq!(d.get(b"k5").map(|e| e.value()), Some(ValueRef::Int(55)));
        assert!(d.replace(b"k7", |old| old.with_expire(Some(9))));
        assert_eq!(d.get(b"k7").and_then(|e| e.expire()), Some(9));
        for i in 0..n {
            assert!(d.remove(format!("k{i}").as_bytes()).is_some());
        }
        assert!(d.is_empty() && d.get(b"k1").is_none());
        while d.rehash_for(100) {}
        assert!(d.table_size() <= 64 * 8);
    }

    #[test]
    fn scan_sees_every_stable_key_across_resizes() {
        let (stable, churn) = (500 / SCALE, 200 / SCALE);
        let mut d = Dict::new();
        for i in 0..stable {
            d.insert(e(&format!("stable{i}"), i));
        }
        let mut seen = HashSet::new();
        let mut cursor = 0;
        let mut step = 0;
        loop {
            cursor = d.scan(cursor, |e| {
                seen.insert(e.key().to_vec());
            });
            // Grow and shrink the table while scanning.
            step += 1;
            if step % 3 == 0 {
                for j in 0..churn {
                    d.insert(e(&format!("tmp{step}-{j}"), j));
                }
            } else if step % 3 == 1 {
                for j in 0..churn {
                    d.remove(format!("tmp{}-{j}", step - 1).as_bytes());
                }
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..stable {
            assert!(
                seen.contains(format!("stable{i}").as_bytes()),
                "missed stable{i}"
            );
        }
    }

    #[test]
    fn incremental_rehash_keeps_every_key_reachable() {
        let mut d = Dict::new();
        let mut saw_rehash = false;
        let n = 5000 / SCALE;
        for i in 0..n {
            d.insert(e(&format!("k{i}"), i));
            saw_rehash |= d.is_rehashing();
            // Every key inserted so far stays reachable mid-resize.
            if i % (997 / SCALE) == 0 {
                for j in 0..=i {
                    assert!(
                        d.get(format!("k{j}").as_bytes()).is_some(),
                        "lost k{j} at {i}"
                    );
                }
                assert_eq!(d.iter().count(), i as usize + 1);
            }
        }
        assert!(saw_rehash);
        // Scan during a resize (both directions) sees everything.
        for shrink in [false, true] {
            if shrink {
                for i in 100..n {
                    d.remove(format!("k{i}").as_bytes());
                }
            }
            let n = if shrink { 100 } else { n as usize };
            let mut seen = HashSet::new();
            let mut cursor = 0;
            loop {
                cursor = d.scan(cursor, |e| {
                    seen.insert(e.key().to_vec());
                });
                if cursor == 0 {
                    break;
                }
            }
            assert_eq!(seen.len(), n);
        }
        while d.rehash_for(1) {}
        assert!(!d.is_rehashing() && d.len() == 100);
    }

    #[test]
    fn random_and_iter() {
        let mut d = Dict::new();
        assert!(d.random(|| 1).is_none());
        for i in 0..10 {
            d.insert(e(&format!("k{i}"), i));
        }
        let mut x = 88172645463325252u64;
        let mut rng = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        assert!(d.random(&mut rng).is_some());
        assert_eq!(d.iter().count(), 10);
    }

    #[test]
    fn table_stats_count_every_entry_and_chain_and_show_a_resize_target() {
        let d = Dict::new();
        assert_eq!(
            d.table_stats(),
            vec![TableStats {
                chains: vec![0; CHAIN_STATS_LEN],
                ..TableStats::default()
            }]
        );
        let mut d = Dict::new();
        for i in 0..1000 {
            d.insert(e(&format!("k{i}"), i));
        }
        d.rehash_for(usize::MAX);
        let stats = d.table_stats();
        assert_eq!(stats.len(), 1);
        let t = &stats[0];
        assert_eq!((t.buckets, t.entries), (1024, 1000));
        assert_eq!(t.chains.iter().sum::<usize>(), t.buckets);
        assert_eq!(t.buckets - t.chains[0], t.used_buckets);
        let weighted: usize = t.chains.iter().enumerate().map(|(n, c)| n * c).sum();
        assert_eq!(weighted, 1000);
        assert!(t.max_chain >= 1 && t.chains[t.max_chain] > 0);
        // Growing past the bucket count starts a resize: both tables are reported, entries split.
        for i in 1000..1100 {
            d.insert(e(&format!("k{i}"), i));
        }
        assert!(d.is_rehashing());
        let stats = d.table_stats();
        assert_eq!(stats.len(), 2);
        assert_eq!(stats[1].buckets, 2048);
        assert_eq!(stats[0].entries + stats[1].entries, 1100);
    }

    #[test]
    fn open_addressed_stats_put_one_entry_per_used_slot() {
        let t = TableStats::open_addressed(8, 3);
        assert_eq!((t.used_buckets, t.max_chain, t.chains), (3, 1, vec![5, 3]));
        assert_eq!(TableStats::open_addressed(4, 0).max_chain, 0);
    }
}
