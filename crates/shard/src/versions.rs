//! Key versions: how a pipeline that only reads keeps its order across shards without locks.
//!
//! A pipeline whose commands go to several shards runs its parts one shard after another, so a
//! later command of the pipeline may run before an earlier one. For writes, two-phase locking hides
//! that (see `strata_server::dispatch`). A pipeline that only reads needs less: its reads must look
//! as if they had happened at one moment. So its parts run without locks, each recording, in the
//! shard's own turn, the *version* of every key it read; once the last part has run, the connection's
//! thread checks, from its own thread, that none of those versions moved. If none did, every key the
//! earlier parts read still held the value they saw while the last part ran: the pipeline's reads
//! are exactly those of a run at that moment, in the order sent. If one moved, the pipeline runs
//! again the locked way. No lock table entry, no release message, and the check costs a load per key.
//!
//! A version is a counter per *stripe* — the keys whose hash (with their database) falls in the same
//! one of [`STRIPES`] slots share it — that the shard's write path bumps for every key event (a
//! write, a delete, an expiry, an eviction, a TTL change: [`crate::db`]'s `Hooks`), and an *epoch*
//! bumped by database-wide changes (FLUSHDB, FLUSHALL, SWAPDB). Two keys sharing a stripe only make
//! a check fail that could have passed. Only the owning thread writes a shard's counters; any thread
//! reads them. Why the check sees every write that matters: a write that could make the reads
//! inconsistent is one the last part (or a command it waited for) came to see, through messages and
//! replies that order it before the last part's read; the bump is made in the same command as the
//! write, so it is ordered before the check too (release stores, acquire loads).

use std::sync::atomic::{AtomicU32, Ordering};

/// Stripes per shard: 16 KiB of counters.
pub const STRIPES: usize = 4096;

/// One shard's versions (see the module docs). Shared by its databases and the shard set.
pub struct Versions {
    stripes: Box<[AtomicU32]>,
    epoch: AtomicU32,
}

impl Default for Versions {
    fn default() -> Self {
        Versions {
            stripes: (0..STRIPES).map(|_| AtomicU32::new(0)).collect(),
            epoch: AtomicU32::new(0),
        }
    }
}

/// What a part of a read-only pipeline saw on its shard: the epoch when it started, and the stripe
/// and version of every key it read (right after the command that read it).
#[derive(Default)]
pub struct Seen {
    pub epoch: u32,
    pub keys: Vec<(u16, u32)>,
}

impl Versions {
    /// The stripe of `key` of database `db`.
    #[inline]
    fn stripe(db: u32, key: &[u8]) -> usize {
        Self::stripe_of(db, crate::locks::fingerprint(key))
    }

    /// The stripe of the key of database `db` whose lock fingerprint is `fp`.
    #[inline]
    fn stripe_of(db: u32, fp: u64) -> usize {
        (crate::locks::key_hash(db, fp) >> (64 - STRIPES.trailing_zeros())) as usize
    }

    /// A key event for `key` of `db` (on the owning thread only).
    #[inline]
    pub(crate) fn bump(&self, db: u32, key: &[u8]) {
        let s = &self.stripes[Self::stripe(db, key)];
        s.store(s.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release);
    }

    /// A database-wide change (on the owning thread only).
    pub(crate) fn bump_all(&self) {
        let e = &self.epoch;
        e.store(e.load(Ordering::Relaxed).wrapping_add(1), Ordering::Release);
    }

    /// The current epoch (on the owning thread: at the start of a part).
    pub fn epoch(&self) -> u32 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Records the version of `key` of `db` into `seen` (on the owning thread, right after the
    /// command that read it).
    #[inline]
    pub fn record(&self, db: u32, key: &[u8], seen: &mut Seen) {
        self.record_fingerprint(db, crate::locks::fingerprint(key), seen);
    }

    /// [`record`](Self::record) for the key of `db` whose lock fingerprint is `fp`.
    pub(crate) fn record_fingerprint(&self, db: u32, fp: u64, seen: &mut Seen) {
        let i = Self::stripe_of(db, fp);
        seen.keys
            .push((i as u16, self.stripes[i].load(Ordering::Acquire)));
    }

    /// True if nothing that `seen` recorded has changed since (from any thread).
    pub fn unchanged(&self, seen: &Seen) -> bool {
        self.epoch.load(Ordering::Acquire) == seen.epoch
            && seen
                .keys
                .iter()
                .all(|&(i, v)| self.stripes[i as usize].load(Ordering::Acquire) == v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_a_recorded_key_or_any_flush_is_seen_and_others_are_not() {
        let v = Versions::default();
        let mut seen = Seen {
            epoch: v.epoch(),
            ..Seen::default()
        };
        v.record(0, b"a", &mut seen);
        v.record(0, b"b", &mut seen);
        assert!(v.unchanged(&seen));
        // Another database's key of the same name, and other keys, are other stripes (almost
        // always: pick ones that are).
        let other = (0..100u32)
            .map(|i| format!("k{i}"))
            .find(|k| {
                let s = Versions::stripe(0, k.as_bytes());
                s != Versions::stripe(0, b"a") && s != Versions::stripe(0, b"b")
            })
            .expect("a key of another stripe");
        v.bump(0, other.as_bytes());
        assert!(v.unchanged(&seen));
        v.bump(0, b"b");
        assert!(!v.unchanged(&seen));

        let mut seen = Seen {
            epoch: v.epoch(),
            ..Seen::default()
        };
        v.record(0, b"a", &mut seen);
        v.bump_all();
        assert!(!v.unchanged(&seen));
    }

    #[test]
    fn stripes_spread_keys_and_databases() {
        let mut used = std::collections::HashSet::new();
        for i in 0..1000u32 {
            used.insert(Versions::stripe(i % 16, format!("key:{i}").as_bytes()));
        }
        assert!(used.len() > 800, "{} stripes for 1000 keys", used.len());
        assert_ne!(Versions::stripe(0, b"x"), Versions::stripe(1, b"x"));
    }
}
