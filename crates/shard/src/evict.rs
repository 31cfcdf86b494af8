//! Eviction under `maxmemory`: the settings, the per-shard choice of victims (Redis's approximated
//! LRU / LFU / TTL and random policies), and the process-wide "over the limit" state.
//!
//! **Who evicts what, and when.** Used memory is process-wide ([`crate::memory::used_memory`]), but
//! the keys belong to shards, and no lock guards a shard's data. So every shard evicts only its own
//! keys, on its own thread:
//! * before a command (as Redis's processCommand calls performEvictions), the thread about to route
//!   it calls [`perform`] on its own shard, which evicts the shard's share of the excess (the
//!   excess divided by the number of shards) within `maxmemory-eviction-tenacity`'s time limit;
//!   if the process is still over, every other shard is asked to evict its share
//!   ([`Shard::evict_share`]) and the command waits for their answers (its task does; the threads
//!   go on), then [`settle`] decides whether it may run;
//! * while an eviction is running ([`RUNNING`]: evicting before a command did not bring the
//!   process under the limit, or CONFIG SET lowered it), every shard's background tick
//!   ([`Shard::cron`](crate::Shard::cron)) evicts its share, bounded per tick so no thread stalls,
//!   as Redis's evictionTimeProc does.
//!
//! The victim is chosen as Redis does, but among the shard's keys: for the LRU, LFU and TTL
//! policies each round samples `maxmemory-samples` keys from every database of the shard into a
//! 16-entry pool kept across rounds, and evicts the best candidate of the pool; the random policies
//! take a random key, visiting the databases in turn. Keys are spread over shards by a hash, so each
//! shard's keys are a uniform sample of the keyspace and the shard's best candidate is as good a
//! guess as one drawn from Redis's global pool: Redis's pool is itself built from a few random
//! samples, not from an ordering of all keys.
//!
//! A key held by the lock table (a multi-shard command or transaction in flight, a woken blocking
//! command's reservation) is never evicted. A command is rejected with `-OOM` only when eviction
//! cannot help: the policy is `noeviction`, or no shard (as each last published, see
//! [`publish_candidates`]) has a key the policy may evict.

use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

use bytes::Bytes;
use strata_core::Entry;

use crate::db::{lfu_decayed, lru_clock, now_us, Access};
use crate::locks::Mode;
use crate::shard::{Shard, EVICT_PER_TICK_US};

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Policy {
    NoEviction = 0,
    AllkeysLru,
    AllkeysLfu,
    AllkeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

const POLICIES: [(Policy, &str); 8] = [
    (Policy::NoEviction, "noeviction"),
    (Policy::AllkeysLru, "allkeys-lru"),
    (Policy::AllkeysLfu, "allkeys-lfu"),
    (Policy::AllkeysRandom, "allkeys-random"),
    (Policy::VolatileLru, "volatile-lru"),
    (Policy::VolatileLfu, "volatile-lfu"),
    (Policy::VolatileRandom, "volatile-random"),
    (Policy::VolatileTtl, "volatile-ttl"),
];

impl Policy {
    /// The policy called `name` (its redis.conf name, any case).
    pub fn parse(name: &str) -> Option<Policy> {
        POLICIES
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(p, _)| *p)
    }

    /// The redis.conf name.
    pub fn name(self) -> &'static str {
        POLICIES[self as usize].1
    }

    fn from_u8(v: u8) -> Policy {
        POLICIES.get(v as usize).map_or(Policy::NoEviction, |p| p.0)
    }

    /// True for the `allkeys-*` policies (any key may go), false for `volatile-*` (keys with a
    /// TTL only) and `noeviction`.
    pub fn all_keys(self) -> bool {
        matches!(
            self,
            Policy::AllkeysLru | Policy::AllkeysLfu | Policy::AllkeysRandom
        )
    }

    /// True for the policies that choose through the sampled pool (not the random ones).
    fn pooled(self) -> bool {
        !matches!(
            self,
            Policy::NoEviction | Policy::AllkeysRandom | Policy::VolatileRandom
        )
    }
}

// ===== Settings (process-wide, as Redis's server.maxmemory*) =====

static MAXMEMORY: AtomicU64 = AtomicU64::new(0);
static POLICY: AtomicU8 = AtomicU8::new(Policy::NoEviction as u8);
static SAMPLES: AtomicUsize = AtomicUsize::new(5);
static TENACITY: AtomicU32 = AtomicU32::new(10);
static SHARDS: AtomicUsize = AtomicUsize::new(1);

/// The limit in bytes; 0: none. The one load the command path pays when no limit is set.
#[inline]
pub fn maxmemory() -> u64 {
    MAXMEMORY.load(Ordering::Relaxed)
}

/// Sets `maxmemory` (CONFIG SET, start-up).
pub fn set_maxmemory(bytes: u64) {
    MAXMEMORY.store(bytes, Ordering::Relaxed);
}

/// The policy in force.
pub fn policy() -> Policy {
    Policy::from_u8(POLICY.load(Ordering::Relaxed))
}

/// Sets `maxmemory-policy`.
pub fn set_policy(p: Policy) {
    POLICY.store(p as u8, Ordering::Relaxed);
}

/// Most keys sampled per database per round, whatever `maxmemory-samples` says (Redis allows up
/// to 2^31, which would make one round take seconds).
pub const MAX_SAMPLES: usize = 1024;

/// Sets `maxmemory-samples` (keys sampled per database per round).
pub fn set_samples(n: usize) {
    SAMPLES.store(n.clamp(1, MAX_SAMPLES), Ordering::Relaxed);
}

/// Expiry hints a shard may move (counting each taken out and each kept), freeing stale ones,
/// before it evicts (see [`Shard::evict_share`]).
const RECLAIM_HINTS: usize = 4096;

/// Sets `maxmemory-eviction-tenacity` (0..100).
pub fn set_tenacity(t: u32) {
    TENACITY.store(t.min(100), Ordering::Relaxed);
}

/// Tells eviction how many shards share the excess (set once at start-up).
pub fn set_shards(n: usize) {
    SHARDS.store(n.max(1), Ordering::Relaxed);
}

/// Bytes used beyond `maxmemory` (0 when under it or when no limit is set). Values already taken
/// out of the dataset and queued for the background freeing do not count, nor clients evicted by
/// `maxmemory-clients` whose connections are closing: they are on their way out, and counting
/// them would make every command until they are freed evict again (keys, for clients' memory).
pub fn excess() -> usize {
    match maxmemory() {
        0 => 0,
        max => crate::memory::used_memory()
            .saturating_sub(crate::db::lazyfree_pending_bytes())
            .saturating_sub(CLIENTS_CLOSING.load(Ordering::Relaxed).max(0) as usize)
            .saturating_sub(max.min(usize::MAX as u64) as usize),
    }
}

/// Memory of clients evicted and not closed yet (see [`excess`]).
static CLIENTS_CLOSING: AtomicI64 = AtomicI64::new(0);

/// Adds (an evicted client) or takes back (its connection closed) `bytes` of client memory on
/// its way out.
pub fn clients_closing(bytes: i64) {
    CLIENTS_CLOSING.fetch_add(bytes, Ordering::Relaxed);
}

/// Whether `bytes` more may be allocated without going over `maxmemory` (always, without a
/// limit): asked before a keyspace table doubles (Redis's `overMaxmemoryAfterAlloc`), so that an
/// index's growth does not evict data.
pub fn room_for(bytes: usize) -> bool {
    match maxmemory() {
        0 => true,
        max => {
            crate::memory::used_memory()
                .saturating_sub(crate::db::lazyfree_pending_bytes())
                .saturating_sub(CLIENTS_CLOSING.load(Ordering::Relaxed).max(0) as usize)
                .saturating_add(bytes)
                <= max.min(usize::MAX as u64) as usize
        }
    }
}

/// How long one call of [`perform`] may evict, from `maxmemory-eviction-tenacity` (Redis's
/// curve: 50 µs per step up to 10, then 15% more per step, no limit at 100).
pub fn time_limit_us(tenacity: u32) -> u64 {
    match tenacity {
        0..=10 => 50 * tenacity as u64,
        11..=99 => (500.0 * 1.15f64.powi(tenacity as i32 - 10)) as u64,
        _ => u64::MAX,
    }
}

/// Keys evicted since start, over all shards (tells a caller whether an eviction happened).
static EVICTIONS: AtomicU64 = AtomicU64::new(0);

/// Keys evicted since start, over all shards.
pub fn evictions() -> u64 {
    EVICTIONS.load(Ordering::Relaxed)
}

// ===== Over-the-limit time (INFO total/current_eviction_exceeded_time) =====

/// Microsecond time the process went over the limit (0: it is not).
static EXCEEDED_SINCE: AtomicI64 = AtomicI64::new(0);
/// Microseconds spent over the limit in finished spells.
static EXCEEDED_TOTAL: AtomicU64 = AtomicU64::new(0);

/// Records whether eviction found the process over the limit at `now` (µs).
fn note_exceeded(over: bool, now: i64) {
    if over {
        let _ =
            EXCEEDED_SINCE.compare_exchange(0, now.max(1), Ordering::Relaxed, Ordering::Relaxed);
    } else if EXCEEDED_SINCE.load(Ordering::Relaxed) != 0 {
        let since = EXCEEDED_SINCE.swap(0, Ordering::Relaxed);
        if since != 0 {
            EXCEEDED_TOTAL.fetch_add((now - since).max(0) as u64, Ordering::Relaxed);
        }
    }
}

/// (total, current) milliseconds over the limit, as INFO reports them: the total includes the
/// current spell.
pub fn exceeded_ms(now: i64) -> (u64, u64) {
    let since = EXCEEDED_SINCE.load(Ordering::Relaxed);
    let current = if since == 0 {
        0
    } else {
        (now - since).max(0) as u64
    };
    (
        (EXCEEDED_TOTAL.load(Ordering::Relaxed) + current) / 1000,
        current / 1000,
    )
}

/// Zeroes the over-the-limit times (CONFIG RESETSTAT).
pub fn reset_stats() {
    EXCEEDED_TOTAL.store(0, Ordering::Relaxed);
    EXCEEDED_SINCE.store(0, Ordering::Relaxed);
}

// ===== Which shards have something to evict =====

const MAX_SHARDS: usize = 1024;
/// Per shard, how many keys the policy may evict, as the shard last counted them (its tick, its
/// own eviction, and CONFIG SET). Read by a shard that has nothing left to decide between `-OOM`
/// and letting the command run while the others evict.
static CANDIDATES: [AtomicUsize; MAX_SHARDS] = [const { AtomicUsize::new(0) }; MAX_SHARDS];

/// Publishes how many keys `shard` may evict under the current policy.
pub fn publish_candidates(shard: &Shard) {
    let p = policy();
    let n = if p == Policy::NoEviction {
        0
    } else {
        shard
            .dbs
            .iter()
            .map(|d| {
                if p.all_keys() {
                    d.len()
                } else {
                    d.volatile_len()
                }
            })
            .sum()
    };
    CANDIDATES[shard.id % MAX_SHARDS].store(n, Ordering::Relaxed);
}

/// After CONFIG SET (and at start-up): forgets the pooled candidates, whose scores belong to the
/// policy they were sampled under, and publishes the shard's count for the current policy.
/// A lower limit takes effect at once: the shard evicts a first slice of its share here.
pub fn settings_changed(shard: &mut Shard) {
    shard.pool.clear();
    publish_candidates(shard);
    if excess() > 0 {
        RUNNING.store(true, Ordering::Relaxed);
    }
    shard.evict_tick(crate::db::now_ms(), EVICT_PER_TICK_US);
}

fn any_candidates() -> bool {
    let n = SHARDS.load(Ordering::Relaxed).min(MAX_SHARDS);
    CANDIDATES[..n]
        .iter()
        .any(|c| c.load(Ordering::Relaxed) > 0)
}

// ===== The pool =====

/// Candidates kept per shard between rounds (Redis's EVPOOL_SIZE).
pub const POOL_SIZE: usize = 16;

/// A shard's best eviction candidates so far, by score (higher: evict sooner), ascending.
#[derive(Default)]
pub struct Pool {
    entries: Vec<(u64, u32, Bytes)>,
}

impl Pool {
    /// Offers a candidate: kept if the pool has room or it beats the worst one (which then goes).
    /// A key already pooled has its score updated.
    pub fn offer(&mut self, score: u64, db: u32, key: &[u8]) {
        // Most samples lose to a full pool's worst: one comparison, before any key is compared.
        // (A pooled key whose new score loses keeps its old one; it is checked when popped.)
        if self.entries.len() == POOL_SIZE && self.entries[0].0 >= score {
            return;
        }
        if let Some(i) = self
            .entries
            .iter()
            .position(|(_, d, k)| *d == db && k[..] == *key)
        {
            self.entries.remove(i);
        } else if self.entries.len() == POOL_SIZE {
            self.entries.remove(0);
        }
        let at = self.entries.partition_point(|(s, _, _)| *s < score);
        self.entries
            .insert(at, (score, db, Bytes::copy_from_slice(key)));
    }

    /// Takes the best candidate out.
    pub fn pop_best(&mut self) -> Option<(u32, Bytes)> {
        self.entries.pop().map(|(_, db, key)| (db, key))
    }

    /// Forgets every candidate (the settings changed: scores of another policy). Candidates of a
    /// flushed or swapped database need no clearing: a pooled key is looked up when popped.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// How good a victim `e` is under `policy` (higher: evict sooner): idle milliseconds for LRU,
/// 255 minus the decayed counter for LFU, and for TTL the earlier the deadline the higher.
fn score(policy: Policy, access: Access, e: &Entry, now: i64) -> u64 {
    match policy {
        Policy::AllkeysLfu | Policy::VolatileLfu => {
            let decay = match access {
                Access::Lfu { decay_time, .. } => decay_time,
                Access::Lru => 1,
            };
            255 - lfu_decayed(e.lru(), now, decay).min(255) as u64
        }
        Policy::VolatileTtl => u64::MAX - e.expire().unwrap_or(i64::MAX).max(0) as u64,
        _ => crate::db::lru_idle(lru_clock(now), e.lru()) as u64 * 1000,
    }
}

// ===== Evicting =====

/// What one eviction run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evicted {
    /// Keys evicted.
    pub keys: usize,
    /// Bytes their entries held (freed now, or queued for the background tick).
    pub bytes: usize,
    /// The shard has no key the policy may evict (other than locked ones).
    pub exhausted: bool,
}

/// Candidate picks that may fail (key locked or gone, or sampling found nothing live) in one run
/// before it gives up for now.
const MAX_MISSES: usize = 64;

/// Sampling rounds one pick may take before it counts as a miss.
const PICK_ROUNDS: usize = 16;

/// What [`Shard::pick`] found.
enum Pick {
    Victim(u32, Bytes),
    /// No database has a key the policy may evict.
    Exhausted,
    /// Keys the policy may evict exist, but this pick found none it could take.
    Missed,
}

impl Shard {
    /// Evicts keys of this shard under the current policy until their entries add up to `bytes`,
    /// the shard has nothing left to evict, or `limit_us` microseconds have passed (checked every
    /// 16 keys, as Redis does).
    pub fn evict(&mut self, bytes: usize, now: i64, limit_us: u64) -> Evicted {
        let policy = policy();
        let mut done = Evicted::default();
        if policy == Policy::NoEviction {
            done.exhausted = true;
            return done;
        }
        let start = now_us();
        let mut misses = 0;
        while done.bytes < bytes {
            let (db, key) = match self.pick(policy, now) {
                Pick::Victim(db, key) => (db, key),
                Pick::Exhausted => {
                    done.exhausted = true;
                    break;
                }
                Pick::Missed => {
                    misses += 1;
                    if misses >= MAX_MISSES {
                        break;
                    }
                    continue;
                }
            };
            let free = self
                .locks
                .may_run(None, db, &key, Mode::Exclusive)
                .then(|| self.dbs[db as usize].evict(&key))
                .flatten();
            match free {
                Some(n) => {
                    done.bytes += n;
                    done.keys += 1;
                    if done.keys % 16 == 0 && (now_us() - start).max(0) as u64 > limit_us {
                        break;
                    }
                }
                None => {
                    misses += 1;
                    if misses >= MAX_MISSES {
                        break;
                    }
                }
            }
        }
        if done.keys > 0 {
            EVICTIONS.fetch_add(done.keys as u64, Ordering::Relaxed);
        }
        if done.keys > 0 || done.exhausted {
            publish_candidates(self);
        }
        done
    }

    /// The next victim, or why there is none.
    fn pick(&mut self, policy: Policy, now: i64) -> Pick {
        let volatile = !policy.all_keys();
        let has = |d: &crate::Db| {
            if volatile {
                d.volatile_len() > 0
            } else {
                !d.is_empty()
            }
        };
        if !policy.pooled() {
            // Random: one key of the next database that has any, visiting them in turn.
            let n = self.dbs.len();
            for _ in 0..n {
                self.evict_next_db = (self.evict_next_db + 1) % n;
                let i = self.evict_next_db;
                if !has(&self.dbs[i]) {
                    continue;
                }
                let mut rng = self.rng;
                let mut key = None;
                self.dbs[i].sample(
                    volatile,
                    1,
                    || crate::shard::xorshift64star(&mut rng),
                    |e| key = Some(Bytes::copy_from_slice(e.key())),
                );
                self.rng = rng;
                if let Some(key) = key {
                    return Pick::Victim(i as u32, key);
                }
            }
            return if self.dbs.iter().any(has) {
                Pick::Missed
            } else {
                Pick::Exhausted
            };
        }
        let samples = SAMPLES.load(Ordering::Relaxed);
        for _ in 0..PICK_ROUNDS {
            if !self.dbs.iter().any(has) {
                self.pool.clear();
                return Pick::Exhausted;
            }
            let mut rng = self.rng;
            for (i, db) in self.dbs.iter().enumerate() {
                if !has(db) {
                    continue;
                }
                let access = db.access();
                let pool = &mut self.pool;
                db.sample(
                    volatile,
                    samples,
                    || crate::shard::xorshift64star(&mut rng),
                    |e| {
                        if !(volatile && e.expire().is_none()) {
                            pool.offer(score(policy, access, e, now), i as u32, e.key());
                        }
                    },
                );
            }
            self.rng = rng;
            // Best first; a candidate gone since it was pooled (or no longer volatile) is a ghost.
            while let Some((db, key)) = self.pool.pop_best() {
                let live = self.dbs[db as usize]
                    .entry_raw(&key)
                    .is_some_and(|e| !volatile || e.expire().is_some());
                if live {
                    return Pick::Victim(db, key);
                }
            }
        }
        // Keys the policy may evict exist but sampling found none live (stale expiry hints while
        // a compaction runs): a miss, not "nothing to evict".
        Pick::Missed
    }

    /// The tick's part (Redis's evictionTimeProc): while an eviction is running (see
    /// [`RUNNING`]), evicts this shard's share of the excess, for at most `limit_us`. Returns true
    /// if it evicted and the process is still over (the tick should come back soon).
    pub fn evict_tick(&mut self, now: i64, limit_us: u64) -> bool {
        if maxmemory() == 0 {
            return false;
        }
        publish_candidates(self);
        if !RUNNING.load(Ordering::Relaxed) {
            return false;
        }
        let excess = excess();
        if excess == 0 || !any_candidates() {
            RUNNING.store(false, Ordering::Relaxed);
        }
        let paused = crate::db::expiry_held(now);
        let more = if excess == 0 || paused || policy() == Policy::NoEviction {
            false
        } else {
            let done = self.evict(share(excess), now, limit_us);
            done.keys > 0 && self::excess() > 0
        };
        note_exceeded(self::excess() > 0, now_us());
        publish_candidates(self);
        more
    }
}

/// Redis's performEvictions result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Under the limit, or eviction made up the excess (or may not run now: clients are paused).
    Ok,
    /// Still over, but evicting goes on (the time limit passed, or other shards have keys).
    Running,
    /// Over the limit and nothing can be evicted: commands that may grow memory are refused.
    Fail,
}

/// Before a command (Redis's performEvictions, first half): if the process is over `maxmemory`,
/// evicts this shard's share of the excess (all of it with one shard) within the tenacity time
/// limit. [`Outcome::Running`] means the other shards must evict their shares too
/// ([`Shard::evict_share`]) before [`settle`] decides. Call only when a limit is set.
pub fn perform(shard: &mut Shard, now: i64) -> Outcome {
    if excess() == 0 {
        note_exceeded(false, now_us());
        return Outcome::Ok;
    }
    if crate::db::expiry_held(now) {
        // Clients are paused: nothing is evicted, and the spell over the limit goes on.
        return Outcome::Ok;
    }
    if policy() == Policy::NoEviction {
        note_exceeded(true, now_us());
        return Outcome::Fail;
    }
    shard.evict_share(now);
    if SHARDS.load(Ordering::Relaxed) == 1 || excess() == 0 {
        return settle();
    }
    Outcome::Running
}

/// After every shard evicted its share: whether the process is under the limit, still over it
/// with keys left to evict (the command runs, as after Redis's time limit), or over it with
/// nothing any shard may evict (commands that may grow memory are refused).
pub fn settle() -> Outcome {
    let outcome = if excess() == 0 {
        Outcome::Ok
    } else if policy() == Policy::NoEviction || !any_candidates() {
        Outcome::Fail
    } else {
        Outcome::Running
    };
    note_exceeded(outcome != Outcome::Ok, now_us());
    if outcome == Outcome::Running {
        RUNNING.store(true, Ordering::Relaxed);
    }
    outcome
}

impl Shard {
    /// Evicts this shard's share of the current excess (another shard's [`perform`] asks), after
    /// freeing the stale expiry hints that no key accounts for (see [`crate::Db::reclaim_hints`]).
    pub fn evict_share(&mut self, now: i64) {
        if excess() > 0 {
            let mut budget = RECLAIM_HINTS;
            for db in &mut self.dbs {
                if budget == 0 {
                    break;
                }
                budget = budget.saturating_sub(db.reclaim_hints(budget));
            }
        }
        let excess = excess();
        if excess > 0 && !crate::db::expiry_held(now) {
            let limit = time_limit_us(TENACITY.load(Ordering::Relaxed));
            self.evict(share(excess), now, limit);
        }
        publish_candidates(self);
    }
}

/// An eviction is running: a command found the process over the limit and the shards' evictions
/// did not bring it back under (their time limit passed, or memory grew meanwhile), or CONFIG SET
/// lowered the limit. The shards' ticks then go on evicting until the process is under the limit
/// or nothing is left to evict, as Redis's evictionTimeProc does; otherwise, as in Redis, memory
/// over the limit is only dealt with before the next command.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// One shard's part of `excess` bytes.
fn share(excess: usize) -> usize {
    match SHARDS.load(Ordering::Relaxed) {
        1 => excess,
        n => excess / n + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use strata_core::Value;

    fn put(s: &mut Shard, key: &str, ttl: Option<i64>) {
        let v = Value::Str(Bytes::from(vec![b'x'; 100]));
        s.db_mut(0).set(key.as_bytes(), v, ttl, 1_000);
    }

    // The settings are process-wide: the tests that change them run as one.
    #[test]
    fn eviction_follows_the_policy() {
        set_shards(1);
        // volatile-*: only keys with a TTL go.
        set_policy(Policy::VolatileRandom);
        let mut s = Shard::new(0, 2);
        for i in 0..50 {
            put(&mut s, &format!("p{i}"), None);
        }
        for i in 0..10 {
            put(&mut s, &format!("v{i}"), Some(1_000_000_000));
        }
        let done = s.evict(usize::MAX, 1_000, u64::MAX);
        assert_eq!(done.keys, 10);
        assert!(done.exhausted);
        assert_eq!((s.db(0).len(), s.db(0).volatile_len()), (50, 0));
        assert_eq!(s.db(0).stats().evicted_keys, 10);

        // volatile-ttl: the nearest deadline first.
        set_policy(Policy::VolatileTtl);
        for i in 0..40 {
            put(&mut s, &format!("t{i}"), Some(10_000 + i));
        }
        for _ in 0..5 {
            assert_eq!(s.evict(1, 1_000, u64::MAX).keys, 1);
        }
        let gone: Vec<i64> = (0..40)
            .filter(|i| s.db(0).entry_raw(format!("t{i}").as_bytes()).is_none())
            .collect();
        // Sampled, not exact: the victims come from the early deadlines.
        assert!(gone.iter().sum::<i64>() < 5 * 20, "{gone:?}");

        // allkeys-lru: idle keys before recently used ones.
        set_policy(Policy::AllkeysLru);
        let mut s = Shard::new(0, 1);
        for i in 0..200 {
            put(&mut s, &format!("k{i}"), None);
        }
        // k0..k99 are touched 100 s later.
        for i in 0..100 {
            s.db_mut(0).get(format!("k{i}").as_bytes(), 101_000);
        }
        for _ in 0..50 {
            assert_eq!(s.evict(1, 101_000, u64::MAX).keys, 1);
        }
        let hot_gone = (0..100)
            .filter(|i| s.db(0).entry_raw(format!("k{i}").as_bytes()).is_none())
            .count();
        assert!(hot_gone < 10, "{hot_gone} recently used keys evicted");

        // A locked key stays.
        set_policy(Policy::AllkeysRandom);
        let mut s = Shard::new(0, 1);
        put(&mut s, "locked", None);
        put(&mut s, "free", None);
        let mut set = crate::LockSet::new();
        set.add_key(0, b"locked", Mode::Shared);
        let (id, _) = s.locks.acquire(crate::new_owner(), set, Box::new(|| {}));
        let done = s.evict(usize::MAX, 1_000, u64::MAX);
        assert_eq!(done.keys, 1);
        assert!(s.db(0).entry_raw(b"locked").is_some());
        s.locks.release(id);

        // noeviction evicts nothing.
        set_policy(Policy::NoEviction);
        let done = s.evict(usize::MAX, 1_000, u64::MAX);
        assert_eq!((done.keys, done.exhausted), (0, true));
        assert!(s.db(0).entry_raw(b"locked").is_some());
    }

    #[test]
    fn the_pool_keeps_the_best_candidates() {
        let mut p = Pool::default();
        for i in 0..40u64 {
            p.offer(i, 0, format!("k{i}").as_bytes());
        }
        assert_eq!(p.len(), POOL_SIZE);
        p.offer(5, 0, b"low");
        assert_eq!(p.len(), POOL_SIZE);
        p.offer(100, 0, b"k30");
        assert_eq!(p.len(), POOL_SIZE, "a pooled key is updated, not added");
        assert_eq!(p.pop_best(), Some((0, Bytes::from_static(b"k30"))));
        assert_eq!(p.pop_best(), Some((0, Bytes::from_static(b"k39"))));
    }

    #[test]
    fn tenacity_maps_to_redis_time_limits() {
        assert_eq!(time_limit_us(0), 0);
        assert_eq!(time_limit_us(10), 500);
        assert_eq!(time_limit_us(11), 575);
        assert_eq!(time_limit_us(100), u64::MAX);
        assert!(time_limit_us(99) > 100_000_000);
    }

    #[test]
    fn policies_round_trip_their_names() {
        for (p, name) in POLICIES {
            assert_eq!(Policy::parse(name), Some(p));
            assert_eq!(p.name(), name);
            assert_eq!(Policy::from_u8(p as u8), p);
        }
        assert_eq!(Policy::parse("ALLKEYS-LRU"), Some(Policy::AllkeysLru));
        assert_eq!(Policy::parse("lru"), None);
    }
}
