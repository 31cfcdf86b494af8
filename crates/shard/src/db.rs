//! One logical database (SELECT index) inside one shard.
//!
//! Expiry is lazy on access and active in the background. Unlike Redis's random sampling of the
//! `expires` dict, the active side keeps a min-heap of (deadline, key): every expired key is found in
//! O(log n) without scanning, and a cycle's work is bounded by its budget. Heap items are hints; an
//! item whose key is gone or whose deadline changed is skipped. The heap is compacted when stale items
//! outnumber live volatile keys, so repeated EXPIRE on one key cannot grow it without bound.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use bytes::Bytes;
use strata_core::{Dict, Entry, Value};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    now_us() / 1000
}

/// Microseconds since the Unix epoch (Redis's `ustime()`: also used to time commands).
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// Redis's 24-bit LRU clock (seconds) for a time in ms.
pub fn lru_clock(now: i64) -> u32 {
    ((now / 1000) as u32) & 0x00FF_FFFF
}

/// How entries' 24-bit access field is kept: Redis's LRU clock (seconds), or, under an LFU
/// `maxmemory-policy`, Redis's LFU pair: 16 bits of minutes (when last decremented) and an 8-bit
/// logarithmic access counter. Set by the server from `maxmemory-policy`, `lfu-log-factor` and
/// `lfu-decay-time`; entries keep their field when the mode changes, as in Redis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    #[default]
    Lru,
    Lfu {
        log_factor: u32,
        decay_time: u32,
    },
}

/// The counter a new key starts with under LFU (Redis's LFU_INIT_VAL), so it is not evicted at once.
pub const LFU_INIT_VAL: u32 = 5;

fn lfu_minutes(now: i64) -> u32 {
    ((now / 60_000) & 0xFFFF) as u32
}

/// The LFU counter of an access field after decay: one step per `decay_time` minutes since it was
/// last decremented (Redis's LFUDecrAndReturn).
pub fn lfu_decayed(field: u32, now: i64, decay_time: u32) -> u32 {
    let (ldt, counter) = (field >> 8, field & 0xFF);
    let now = lfu_minutes(now);
    let elapsed = if now >= ldt {
        now - ldt
    } else {
        65535 - ldt + now
    };
    let periods = elapsed.checked_div(decay_time).unwrap_or(0);
    counter.saturating_sub(periods)
}

impl Access {
    /// The field of a key created at `now`.
    pub fn fresh(self, now: i64) -> u32 {
        match self {
            Access::Lru => lru_clock(now),
            Access::Lfu { .. } => (lfu_minutes(now) << 8) | LFU_INIT_VAL,
        }
    }

    /// Records an access to `e` (Redis's updateLFU, or a new LRU clock). `rng` is the caller's
    /// xorshift state for the counter's probabilistic increment.
    fn touch(self, e: &mut Entry, now: i64, rng: &mut u64) {
        match self {
            Access::Lru => e.set_lru(lru_clock(now)),
            Access::Lfu {
                log_factor,
                decay_time,
            } => {
                let mut counter = lfu_decayed(e.lru(), now, decay_time);
                if counter < 255 {
                    if *rng == 0 {
                        *rng = 0x9E37_79B9_7F4A_7C15;
                    }
                    *rng ^= *rng << 13;
                    *rng ^= *rng >> 7;
                    *rng ^= *rng << 17;
                    let r = (*rng >> 11) as f64 / (1u64 << 53) as f64;
                    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
                    if r < 1.0 / (base * log_factor as f64 + 1.0) {
                        counter += 1;
                    }
                }
                e.set_lru((lfu_minutes(now) << 8) | counter);
            }
        }
    }
}

/// A database: its entries plus the expiry heap.
#[derive(Default)]
pub struct Db {
    dict: Dict,
    ttl_heap: BinaryHeap<Reverse<(i64, Box<[u8]>)>>,
    volatile: usize,
    /// Keys removed because their TTL passed (INFO stats `expired_keys`).
    pub expired_keys: u64,
    /// Read lookups that found / did not find the key (INFO stats `keyspace_hits/misses`).
    pub hits: u64,
    pub misses: u64,
    /// How accesses are recorded in each entry (LRU clock or LFU counter).
    pub access: Access,
    rng: u64,
}

impl Db {
    /// Number of keys (including expired keys not yet reclaimed, as in Redis).
    pub fn len(&self) -> usize {
        self.dict.len()
    }

    /// True when the database has no keys.
    pub fn is_empty(&self) -> bool {
        self.dict.is_empty()
    }

    /// Number of keys with a TTL.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }

    /// Approximate heap bytes of this database's table (not counting entries).
    pub fn overhead_bytes(&self) -> usize {
        self.dict.table_size() + self.ttl_heap.capacity() * std::mem::size_of::<(i64, Box<[u8]>)>()
    }

    fn expired(e: &Entry, now: i64) -> bool {
        e.expire().is_some_and(|at| at <= now)
    }

    /// Removes `key` if its TTL has passed. Returns true if it was removed.
    fn expire_if_needed(&mut self, key: &[u8], now: i64) -> bool {
        if self.dict.get(key).is_some_and(|e| Self::expired(e, now)) {
            self.remove_entry(key);
            self.expired_keys += 1;
            return true;
        }
        false
    }

    fn remove_entry(&mut self, key: &[u8]) -> Option<Entry> {
        let e = self.dict.remove(key)?;
        if e.expire().is_some() {
            self.volatile -= 1;
        }
        Some(e)
    }

    /// First prefetch stage for a lookup of `key` (see [`strata_core::Dict::prefetch_bucket`]).
    pub fn prefetch_bucket(&self, key: &[u8]) {
        self.dict.prefetch_bucket(key);
    }

    /// Second prefetch stage for a lookup of `key`.
    pub fn prefetch_entry(&self, key: &[u8]) {
        self.dict.prefetch_entry(key);
    }

    /// Looks a key up for reading: expires it if due, touches its LRU clock, counts a hit or miss.
    pub fn get(&mut self, key: &[u8], now: i64) -> Option<&mut Entry> {
        self.expire_if_needed(key, now);
        match self.dict.get_mut(key) {
            Some(e) => {
                self.hits += 1;
                self.access.touch(e, now, &mut self.rng);
                Some(e)
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Looks a key up for writing: expires it if due and touches its clock; no hit/miss accounting.
    pub fn get_mut(&mut self, key: &[u8], now: i64) -> Option<&mut Entry> {
        self.expire_if_needed(key, now);
        let e = self.dict.get_mut(key)?;
        self.access.touch(e, now, &mut self.rng);
        Some(e)
    }

    /// Looks a key up for reading without recording the access (EXISTS, TYPE, TTL, OBJECT): expires
    /// it if due and counts a hit or miss, as Redis's LOOKUP_NOTOUCH does.
    pub fn get_untouched(&mut self, key: &[u8], now: i64) -> Option<&Entry> {
        self.expire_if_needed(key, now);
        match self.dict.get(key) {
            Some(e) => {
                self.hits += 1;
                Some(e)
            }
            None => {
                self.misses += 1;
                None
            }
        }
    }

    /// Looks a key up without touching anything but expiry (OBJECT, TYPE-like introspection).
    pub fn peek(&mut self, key: &[u8], now: i64) -> Option<&Entry> {
        self.expire_if_needed(key, now);
        self.dict.get(key)
    }

    /// True if the key exists (and is not expired).
    pub fn contains(&mut self, key: &[u8], now: i64) -> bool {
        self.peek(key, now).is_some()
    }

    /// Stores `value` under `key` with `expire`, replacing any previous entry. Returns the old entry
    /// (None if there was none or it had expired). One table lookup.
    pub fn set(
        &mut self,
        key: &[u8],
        value: Value,
        expire: Option<i64>,
        now: i64,
    ) -> Option<Entry> {
        let entry = Entry::new(key, value, expire, self.access.fresh(now));
        self.insert_entry(entry, now)
    }

    /// Stores `value` keeping the key's current TTL (SET KEEPTTL, SETRANGE, APPEND, INCR...).
    pub fn set_keep_ttl(&mut self, key: &[u8], value: Value, now: i64) -> Option<Entry> {
        self.expire_if_needed(key, now);
        let expire = self.dict.get(key).and_then(Entry::expire);
        self.set(key, value, expire, now)
    }

    /// Inserts a prepared entry (SET, RENAME/MOVE/COPY destinations), replacing any previous one.
    /// Returns the replaced entry unless it had already expired (then it counts as expired).
    pub fn insert_entry(&mut self, entry: Entry, now: i64) -> Option<Entry> {
        // The deadline hint goes in after the entry, so a heap compaction it triggers keeps it.
        let deadline = entry
            .expire()
            .map(|at| (at, Box::<[u8]>::from(entry.key())));
        let old = self.dict.insert(entry);
        if let Some((at, key)) = deadline {
            self.volatile += 1;
            self.push_deadline(at, key);
        }
        let old = old?;
        if old.expire().is_some() {
            self.volatile -= 1;
        }
        if Self::expired(&old, now) {
            self.expired_keys += 1;
            return None;
        }
        Some(old)
    }

    /// Removes a key, returning its entry if it existed and was not expired.
    pub fn remove(&mut self, key: &[u8], now: i64) -> Option<Entry> {
        if self.expire_if_needed(key, now) {
            return None;
        }
        self.remove_entry(key)
    }

    /// Sets or clears the key's absolute expiry. Returns false if the key does not exist.
    pub fn set_expire(&mut self, key: &[u8], expire: Option<i64>, now: i64) -> bool {
        if self.expire_if_needed(key, now) {
            return false;
        }
        let Some(had) = self.dict.get(key).map(|e| e.expire().is_some()) else {
            return false;
        };
        self.dict.replace(key, |e| e.with_expire(expire));
        match (had, expire) {
            (false, Some(_)) => self.volatile += 1,
            (true, None) => self.volatile -= 1,
            _ => {}
        }
        if let Some(at) = expire {
            self.push_deadline(at, key.into());
        }
        true
    }

    /// Replaces the key's value keeping its TTL and clock; false if absent.
    pub fn replace_value(&mut self, key: &[u8], value: Value) -> bool {
        self.dict.replace(key, |e| e.with_value(value))
    }

    fn push_deadline(&mut self, at: i64, key: Box<[u8]>) {
        self.ttl_heap.push(Reverse((at, key)));
        if self.ttl_heap.len() > 2 * self.volatile + 1024 {
            let dict = &self.dict;
            let items = std::mem::take(&mut self.ttl_heap).into_vec();
            self.ttl_heap = items
                .into_iter()
                .filter(|Reverse((at, k))| dict.get(k).and_then(Entry::expire) == Some(*at))
                .collect();
        }
    }

    /// Reclaims up to `budget` expired keys. Returns (keys examined, keys expired).
    pub fn active_expire(&mut self, now: i64, budget: usize) -> (usize, usize) {
        let (mut seen, mut expired) = (0, 0);
        while seen < budget {
            match self.ttl_heap.peek() {
                Some(Reverse((at, _))) if *at <= now => {}
                _ => break,
            }
            let Some(Reverse((at, key))) = self.ttl_heap.pop() else {
                break;
            };
            seen += 1;
            if self.dict.get(&key).and_then(Entry::expire) == Some(at) {
                self.remove_entry(&key);
                self.expired_keys += 1;
                expired += 1;
            }
        }
        (seen, expired)
    }

    /// One SCAN step over this database's table (see [`Dict::scan`]); expired keys are skipped.
    pub fn scan(&self, cursor: u64, now: i64, mut f: impl FnMut(&Entry)) -> u64 {
        self.dict.scan(cursor, |e| {
            if !Self::expired(e, now) {
                f(e)
            }
        })
    }

    /// Every live entry (KEYS).
    pub fn iter(&self, now: i64) -> impl Iterator<Item = &Entry> {
        self.dict.iter().filter(move |e| !Self::expired(e, now))
    }

    /// A random live key, trying a bounded number of times to avoid expired ones.
    pub fn random_key(&mut self, now: i64, mut rand: impl FnMut() -> u64) -> Option<Bytes> {
        for _ in 0..100 {
            let (key, expired) = {
                let e = self.dict.random(&mut rand)?;
                (Bytes::copy_from_slice(e.key()), Self::expired(e, now))
            };
            if !expired {
                return Some(key);
            }
            self.expire_if_needed(&key, now);
        }
        None
    }

    /// Moves up to `buckets` buckets of an in-progress table resize (background work, so resizes
    /// finish on idle databases too). Returns true while a resize remains.
    pub fn rehash(&mut self, buckets: usize) -> bool {
        self.dict.rehash_for(buckets)
    }

    /// Removes every key.
    pub fn clear(&mut self) {
        self.dict.clear();
        self.ttl_heap = BinaryHeap::new();
        self.volatile = 0;
    }

    /// Sum of the entries' heap bytes (used by MEMORY-style introspection and tests).
    pub fn entries_heap_size(&self) -> usize {
        self.dict.iter().map(Entry::heap_size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_core::ValueRef;

    fn s(v: &str) -> Value {
        Value::Str(Bytes::copy_from_slice(v.as_bytes()))
    }

    #[test]
    fn lazy_and_active_expiry() {
        let mut db = Db::default();
        db.set(b"a", s("1"), Some(100), 0);
        db.set(b"b", s("2"), Some(200), 0);
        db.set(b"c", s("3"), None, 0);
        assert_eq!(db.volatile_len(), 2);
        assert!(db.get(b"a", 99).is_some());
        assert!(db.get(b"a", 100).is_none());
        assert_eq!((db.len(), db.expired_keys), (2, 1));
        assert_eq!(db.active_expire(250, 10), (2, 1)); // "a" was already gone: a stale hint
        assert_eq!((db.len(), db.volatile_len()), (1, 0));
    }

    #[test]
    fn ttl_changes_and_heap_stays_bounded() {
        let mut db = Db::default();
        db.set(b"k", Value::Int(1), None, 0);
        for i in 0..10_000 {
            assert!(db.set_expire(b"k", Some(1_000_000 + i), 0));
        }
        assert!(db.ttl_heap.len() <= 2 * db.volatile_len() + 1025);
        assert!(db.set_expire(b"k", None, 0));
        assert_eq!(db.volatile_len(), 0);
        assert_eq!(db.active_expire(i64::MAX, 100_000).1, 0);
        assert_eq!(db.get(b"k", 0).map(|e| e.value()), Some(ValueRef::Int(1)));
    }

    #[test]
    fn set_replaces_ttl_and_keep_ttl_keeps_it() {
        let mut db = Db::default();
        db.set(b"k", s("v"), Some(500), 0);
        db.set_keep_ttl(b"k", s("w"), 0);
        assert_eq!(db.peek(b"k", 0).and_then(Entry::expire), Some(500));
        db.set(b"k", s("x"), None, 0);
        assert_eq!(db.peek(b"k", 0).and_then(Entry::expire), None);
        assert_eq!(db.volatile_len(), 0);
    }
}
