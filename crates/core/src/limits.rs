//! Encoding thresholds of the collection types (redis.conf's `*-max-listpack-*`, `set-max-intset-entries`,
//! `list-max-listpack-size`, `list-compress-depth`).
//!
//! They are process-wide, like Redis's `server.*` fields: CONFIG SET stores them here, and a shard
//! reads them when a write decides whether a collection changes encoding. Relaxed atomics: a write
//! that races a CONFIG SET sees the old or the new threshold, either of which Redis could also see.

use std::sync::atomic::{AtomicI64, Ordering};

/// One threshold.
pub struct Limit {
    name: &'static str,
    value: AtomicI64,
}

impl Limit {
    const fn new(name: &'static str, default: i64) -> Limit {
        Limit {
            name,
            value: AtomicI64::new(default),
        }
    }

    /// The current value.
    #[inline]
    pub fn get(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }

    /// The current value as a count (negative values read as 0).
    #[inline]
    pub fn count(&self) -> usize {
        self.get().max(0) as usize
    }

    /// Sets the value (CONFIG SET, start-up).
    pub fn set(&self, v: i64) {
        self.value.store(v, Ordering::Relaxed)
    }

    /// The redis.conf name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// `hash-max-listpack-entries`: a hash with more fields is a hashtable. 512 is redis-server's
/// built-in default (the sample redis.conf sets 128); Strata, like redis-server, starts without one.
pub static HASH_MAX_LISTPACK_ENTRIES: Limit = Limit::new("hash-max-listpack-entries", 512);
/// `hash-max-listpack-value`: a hash with a longer field or value is a hashtable.
pub static HASH_MAX_LISTPACK_VALUE: Limit = Limit::new("hash-max-listpack-value", 64);
/// `set-max-intset-entries`: an all-integer set with more members is a hashtable.
pub static SET_MAX_INTSET_ENTRIES: Limit = Limit::new("set-max-intset-entries", 512);
/// `zset-max-listpack-entries`: a sorted set with more members is a skiplist.
pub static ZSET_MAX_LISTPACK_ENTRIES: Limit = Limit::new("zset-max-listpack-entries", 128);
/// `zset-max-listpack-value`: a sorted set with a longer member is a skiplist.
pub static ZSET_MAX_LISTPACK_VALUE: Limit = Limit::new("zset-max-listpack-value", 64);
/// `list-max-listpack-size`: entries per list node when positive, or a node size class when
/// negative (-1 = 4 KiB … -5 = 64 KiB), as in Redis.
pub static LIST_MAX_LISTPACK_SIZE: Limit = Limit::new("list-max-listpack-size", -2);
/// `list-compress-depth`: list nodes at each end left uncompressed (0 = none compressed).
pub static LIST_COMPRESS_DEPTH: Limit = Limit::new("list-compress-depth", 0);
/// `hll-sparse-max-bytes`: a sparse HyperLogLog that would grow beyond this many bytes (header
/// included) becomes dense.
pub static HLL_SPARSE_MAX_BYTES: Limit = Limit::new("hll-sparse-max-bytes", 3000);

/// Every threshold.
pub static ALL: [&Limit; 8] = [
    &HASH_MAX_LISTPACK_ENTRIES,
    &HASH_MAX_LISTPACK_VALUE,
    &SET_MAX_INTSET_ENTRIES,
    &ZSET_MAX_LISTPACK_ENTRIES,
    &ZSET_MAX_LISTPACK_VALUE,
    &LIST_MAX_LISTPACK_SIZE,
    &LIST_COMPRESS_DEPTH,
    &HLL_SPARSE_MAX_BYTES,
];

/// The threshold called `name` (its redis.conf name), if any.
pub fn by_name(name: &str) -> Option<&'static Limit> {
    ALL.iter()
        .copied()
        .find(|l| l.name.eq_ignore_ascii_case(name))
}
