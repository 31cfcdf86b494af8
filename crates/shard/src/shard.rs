//! A shard: the slice of the keyspace owned by one thread.
//!
//! The shard lives in a thread-local of its thread and is reached only through [`with_shard`] on that
//! thread; other threads send it closures through the [`crate::ShardSet`]. There is no lock around it:
//! exclusivity comes from ownership by one thread, and a `RefCell` borrow is never held across an
//! await point (every `with_shard` call is synchronous).

use std::cell::{Cell, RefCell};

use hashbrown::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strata_core::histogram::Histogram;

use crate::db::{Db, FreeWait};
use crate::locks::{LockId, LockTable, Mode, Owner};
use crate::park::{Here, Parked};
use crate::versions::Versions;

/// Keys examined per database per active-expiry tick.
pub const ACTIVE_EXPIRE_BUDGET: usize = 2000;
/// Buckets of an in-progress resize moved per database per background tick.
pub const REHASH_BUCKETS_PER_TICK: usize = 1000;
/// Expiry hints moved per database per background tick while a heap compaction runs.
pub const COMPACT_HINTS_PER_TICK: usize = 2000;
/// Units of lazy-free work (entries, buckets, hints) per background tick, over all databases.
pub const LAZYFREE_PER_TICK: usize = 10_000;
/// Parked commands run by one pass of [`Shard::serve_ready`]; past it, the rest are woken to run
/// from their tasks (a chain of blocked clients cannot hold the shard for long).
pub const SERVE_BUDGET: usize = 1024;
/// Microseconds a background tick may spend evicting while the process is over `maxmemory`.
pub const EVICT_PER_TICK_US: u64 = 1000;

/// One thread's slice of the keyspace: every database, its lock table, and counters.
///
/// The databases are private: every change to a key goes through [`Db`]'s write path (see
/// [`crate::db`]), reached with [`Shard::db_mut`] / [`Shard::dbs_mut`].
pub struct Shard {
    /// Index of this shard (= its thread) in the shard set.
    pub id: usize,
    /// Databases 0..N (the `databases` setting).
    pub(crate) dbs: Vec<Db>,
    /// Intent locks of multi-shard commands.
    pub locks: LockTable,
    /// Whether the background expiry cycle runs (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire: bool,
    /// Counters of the connections served by this thread.
    pub stats: ThreadStats,
    pub(crate) rng: u64,
    /// Eviction candidates kept between rounds (see [`crate::evict`]).
    pub(crate) pool: crate::evict::Pool,
    /// The database the random eviction policies visit next.
    pub(crate) evict_next_db: usize,
    /// Commands parked on this shard's keys (registrations, over all databases).
    parked: usize,
    /// Keys reserved for woken parked commands, by owner (see [`crate::park`]).
    reserved: HashMap<Owner, LockId>,
    /// [`crate::db::ready_mark`] when ready keys were last looked for.
    ready_seen: u64,
    /// Ready keys are not served now: a pass is running, or a transaction part or lock-context
    /// part is (see [`Shard::hold_serving`]).
    holding: bool,
    /// The owner of the pipeline part running now, if it lets ready keys be served between its
    /// commands (see [`Shard::serve_between`]).
    between: Option<Owner>,
    /// A key was kept ready during such a part: look at ready keys again once it has run.
    recheck_after_part: bool,
    /// The client whose command runs now (0: none), nested commands included: a parked command
    /// served inside it, or the next link of a chain of moves it started. A cross-shard move
    /// claimed meanwhile is that client's to wait for (see [`crate::chain`]).
    pub running_client: u64,
    /// A lock a cross-shard move holds on a key it just wrote, offered to the next move of a chain
    /// parked on that key while the move serves the waiters behind it (see `strata_server::moving`):
    /// that move takes it over instead of queueing for it. Cleared by the offering move.
    pub lock_handover: Option<LockHandover>,
    /// The running snapshot, if any (see [`crate::snapshot`]).
    pub(crate) snapshot: Option<crate::snapshot::ShardSnap>,
}

/// See [`Shard::lock_handover`].
pub struct LockHandover {
    pub id: LockId,
    /// Its holder until it is taken.
    pub from: Owner,
    pub db: usize,
    pub key: bytes::Bytes,
}

impl Shard {
    /// A shard with `databases` empty databases.
    pub fn new(id: usize, databases: usize) -> Shard {
        Shard {
            id,
            dbs: (0..databases).map(|i| Db::new(i as u32)).collect(),
            locks: LockTable::default(),
            active_expire: true,
            stats: ThreadStats::default(),
            rng: 0x9E37_79B9_7F4A_7C15 ^ ((id as u64 + 1) * 0x2545_F491_4F6C_DD1D),
            pool: crate::evict::Pool::default(),
            evict_next_db: 0,
            parked: 0,
            reserved: HashMap::new(),
            ready_seen: crate::db::ready_mark(),
            holding: false,
            between: None,
            recheck_after_part: false,
            running_client: 0,
            lock_handover: None,
            snapshot: None,
        }
    }

    /// Runs `f` without counting its keyspace hits and misses or raising key-miss events: for a
    /// read run again after its first run, whose lookups counted, was discarded.
    pub fn quietly<R>(&mut self, f: impl FnOnce(&mut Shard) -> R) -> R {
        crate::notify::quiet_misses(true);
        let r = self.uncounted(f);
        crate::notify::quiet_misses(false);
        r
    }

    /// Runs `f` without counting its keyspace hits and misses (its key-miss events are raised as
    /// usual): for a share of a multi-key read whose lookups the command counts itself, once it
    /// knows which of them Redis would have made.
    pub fn uncounted<R>(&mut self, f: impl FnOnce(&mut Shard) -> R) -> R {
        let lookups: Vec<(u64, u64)> = self.dbs.iter().map(Db::lookups).collect();
        let r = f(self);
        for (db, counts) in self.dbs.iter_mut().zip(lookups) {
            db.set_lookups(counts);
        }
        r
    }

    /// Has every key event of every database move `versions` (the shard set's for this shard).
    pub fn attach_versions(&mut self, versions: Arc<Versions>) {
        for db in &mut self.dbs {
            db.attach_versions(versions.clone());
        }
    }

    /// This shard's key versions (see [`crate::versions`]), which its databases move: reads
    /// across shards record them instead of taking locks. None with one shard.
    pub fn versions(&self) -> Option<&Versions> {
        self.dbs.first().and_then(Db::versions)
    }

    /// Changes counted over every database (Redis's `server.dirty`): a command that moved it
    /// changed the dataset and is propagated (see [`crate::propagate`]).
    pub fn dirty_total(&self) -> u64 {
        self.dbs.iter().map(Db::dirty).sum()
    }

    /// Number of databases.
    pub fn db_count(&self) -> usize {
        self.dbs.len()
    }

    /// Database `i`, for reading. Panics if `i` is out of range (callers validated the index).
    pub fn db(&self, i: usize) -> &Db {
        &self.dbs[i]
    }

    /// Database `i`, for commands. Panics if `i` is out of range (callers validated the index).
    pub fn db_mut(&mut self, i: usize) -> &mut Db {
        &mut self.dbs[i]
    }

    /// Every database, for reading (INFO).
    pub fn dbs(&self) -> &[Db] {
        &self.dbs
    }

    /// Every database, for commands that span two (MOVE, COPY ... DB).
    pub fn dbs_mut(&mut self) -> &mut [Db] {
        &mut self.dbs
    }

    /// Empties databases `dbs` at once (FLUSHDB, FLUSHALL); their memory is freed by the background
    /// tick. The returned wait resolves when it has been (FLUSH SYNC replies then).
    pub fn flush(&mut self, dbs: &[usize]) -> FreeWait {
        let mut wait = FreeWait::done();
        for &i in dbs {
            let db = &mut self.dbs[i];
            let ticket = db.clear();
            wait.join(db.when_freed(ticket));
        }
        // Client tracking: the table goes, and one shard tells every tracking client (Redis's
        // trackingInvalidateKeysOnFlush).
        // The table goes even while no client tracks: keys remembered before tracking was turned
        // off must not be invalidated after the flush.
        crate::tracking::flushed(current_shard_id().unwrap_or(0) == 0);
        wait
    }

    /// Exchanges the contents of databases `a` and `b` (SWAPDB); waiters stay with their index.
    /// `counted`: this shard counts the command's one change (one shard of the swap does).
    pub fn swap_dbs(&mut self, a: usize, b: usize, counted: bool) {
        if a == b {
            return;
        }
        let (lo, hi) = (a.min(b), a.max(b));
        let (head, tail) = self.dbs.split_at_mut(hi);
        head[lo].swap_contents(&mut tail[0], counted);
    }

    /// Parks `p` on `key` of database `db` (see [`crate::park`]).
    pub fn park(&mut self, db: usize, key: &[u8], p: Arc<Parked>) {
        if self.dbs[db].park(key, p) {
            self.parked += 1;
        }
    }

    /// Withdraws `p` from `key` of database `db`, and releases the key's reservation for it.
    pub fn unpark(&mut self, db: usize, key: &[u8], p: &Arc<Parked>) {
        if self.dbs[db].unpark(key, p) {
            self.parked -= 1;
        }
        self.unreserve(p.owner());
    }

    /// Lists `key` of database `db` as ready again, to be looked at by the next
    /// [`serve_ready`](Self::serve_ready): a claimed command left its element there (see
    /// [`crate::park`]), so the commands parked behind it get their turn.
    pub fn ready_again(&mut self, db: usize, key: &[u8]) {
        self.dbs[db].keep_ready(key.into());
        self.ready_seen = crate::db::ready_mark().wrapping_sub(1);
    }

    /// Releases the key reserved for `owner`'s woken command, if any.
    pub fn unreserve(&mut self, owner: Owner) {
        if self.reserved.is_empty() {
            return;
        }
        if let Some(id) = self.reserved.remove(&owner) {
            self.locks.release(id);
        }
    }

    /// Serves the parked commands waiting for keys written since the last call (see
    /// [`crate::park`]): the first live command parked on each ready key runs right here when it
    /// can, and what it writes is served in the same pass; otherwise it is woken, the key reserved
    /// for it when it can be. Called after every command; one branch when nothing is parked on
    /// this shard or no parked-on key was written since the last call.
    #[inline]
    pub fn serve_ready(&mut self) {
        if self.parked > 0 && self.ready_seen != crate::db::ready_mark() {
            self.serve_ready_slow();
        }
    }

    /// Holds (`true`) or resumes serving ready keys; returns the previous setting, to restore.
    /// A transaction part or lock-context part holds it while it runs: blocked clients are served
    /// after it as a whole, as Redis serves them after EXEC.
    pub fn hold_serving(&mut self, hold: bool) -> bool {
        std::mem::replace(&mut self.holding, hold)
    }

    /// While a part of `host`'s lock context that is a pipeline's (not a transaction's) runs:
    /// ready keys are served after each of its commands, and a parked command whose keys only
    /// `host` locks may run (`LockTable::may_run_between`), as Redis serves blocked clients
    /// between a pipeline's commands. Returns the previous setting, to restore.
    pub fn serve_between(&mut self, host: Option<Owner>) -> Option<Owner> {
        if host.is_none() && std::mem::take(&mut self.recheck_after_part) {
            self.ready_seen = crate::db::ready_mark().wrapping_sub(1);
        }
        std::mem::replace(&mut self.between, host)
    }

    /// The lock-context owner whose part runs now with serving between its commands, if any.
    pub fn serving_between(&self) -> Option<Owner> {
        self.between
    }

    #[cold]
    fn serve_ready_slow(&mut self) {
        if self.holding {
            return;
        }
        self.holding = true;
        let mut budget = SERVE_BUDGET;
        let mut busy: Vec<(usize, Box<[u8]>)> = Vec::new();
        loop {
            self.ready_seen = crate::db::ready_mark();
            for db in 0..self.dbs.len() {
                while self.dbs[db].has_ready() {
                    let mut dropped = 0;
                    let next = self.dbs[db].next_ready(&mut dropped);
                    self.parked -= dropped;
                    let Some((key, p)) = next else { break };
                    if budget > 0 {
                        budget -= 1;
                        match p.serve_here(self) {
                            Here::Served => {
                                p.wake();
                                continue;
                            }
                            // Its move completes by messages; what it pops makes the key ready
                            // again for the waiters behind it.
                            Here::Claimed => continue,
                            Here::Parked => {
                                // It could take nothing (the key holds another type, or nothing
                                // is left): a later waiter may (Redis serves every client whose
                                // kind of wait the key's type answers, in blocking order).
                                budget = self.serve_later_waiters(db, &key, p, budget, &mut busy);
                                continue;
                            }
                            Here::Busy => {
                                busy.push((db, key));
                                continue;
                            }
                            Here::Wake => {}
                        }
                    }
                    self.wake(db, &key, &p);
                }
            }
            // What the served commands wrote may have made more keys ready.
            if self.ready_seen == crate::db::ready_mark() {
                break;
            }
        }
        if !busy.is_empty() {
            for (db, key) in busy {
                self.dbs[db].keep_ready(key);
            }
            // Look again after the next command: a lock is only released by one. (Inside a
            // pipeline's part, once the part has run: its own locks stay held until then, so
            // looking after each of its commands would only repeat the pass.)
            if self.between.is_some() {
                self.recheck_after_part = true;
            } else {
                self.ready_seen = crate::db::ready_mark().wrapping_sub(1);
            }
        }
        self.holding = false;
    }

    /// Wakes `p`, parked on `key`, to run again from its task, reserving the key for it when all
    /// its keys live here or this is the lowest of its shards, and the lock can be granted at once.
    fn wake(&mut self, db: usize, key: &[u8], p: &Arc<Parked>) {
        let owner = p.owner();
        if p.reserves_on(self.id)
            && !self.reserved.contains_key(&owner)
            && self
                .locks
                .may_run(Some(owner), db as u32, key, Mode::Exclusive)
        {
            let (id, _) =
                self.locks
                    .acquire_key(owner, db as u32, key, Mode::Exclusive, Box::new(|| {}));
            self.reserved.insert(owner, id);
        }
        p.wake();
    }

    /// After the first waiter on `key` (`first`) could take nothing: offers the key to the
    /// waiters behind it in order until one is served (what it writes makes the key ready again
    /// for the rest), must wait for a lock, or must run from its task. Returns the budget left.
    fn serve_later_waiters(
        &mut self,
        db: usize,
        key: &[u8],
        first: Arc<Parked>,
        mut budget: usize,
        busy: &mut Vec<(usize, Box<[u8]>)>,
    ) -> usize {
        let later = self.dbs[db].waiters_after(key, &first, budget);
        for next in later {
            if self.dbs[db].peek(key, crate::db::now_ms()).is_none() {
                break;
            }
            budget -= 1;
            match next.serve_here(self) {
                Here::Served => {
                    next.wake();
                    break;
                }
                Here::Claimed => break,
                Here::Parked => {}
                Here::Busy => {
                    busy.push((db, key.into()));
                    break;
                }
                // Woken to run from its task, the key reserved for it when it can be: a waiter
                // after it then finds the key busy, so it does not lose its turn.
                Here::Wake => self.wake(db, key, &next),
            }
        }
        budget
    }

    /// Parked-command registrations on this shard.
    pub fn parked(&self) -> usize {
        self.parked
    }

    /// Keys whose memory is still queued for freeing (INFO `lazyfree_pending_objects`).
    pub fn lazyfree_pending(&self) -> usize {
        self.dbs.iter().map(Db::lazyfree_pending).sum()
    }

    /// A fast non-cryptographic random number (xorshift64*), for RANDOMKEY and sampling.
    pub fn rand(&mut self) -> u64 {
        xorshift64star(&mut self.rng)
    }

    /// One background tick over every database: active expiry (up to a budget), a slice of any
    /// expiry-hint compaction and table resize in progress, a slice of lazy freeing, and while
    /// the process is over `maxmemory`, this shard's share of eviction. Returns
    /// true if work remains, so the caller should run again soon.
    pub fn cron(&mut self, now: i64) -> bool {
        let mut more = false;
        let mut free_budget = LAZYFREE_PER_TICK;
        let expire = self.active_expire && !crate::db::expiry_held(now);
        for db in &mut self.dbs {
            if expire {
                more |= db.active_expire(now, ACTIVE_EXPIRE_BUDGET).0 >= ACTIVE_EXPIRE_BUDGET;
            }
            more |= db.compact_hints(COMPACT_HINTS_PER_TICK);
            more |= db.rehash(REHASH_BUCKETS_PER_TICK);
            free_budget = free_budget.saturating_sub(db.free_garbage(free_budget));
            more |= db.has_garbage();
        }
        more |= crate::tracking::enforce_limit();
        more |= self.evict_tick(now, EVICT_PER_TICK_US);
        more
    }
}

/// DEBUG PAUSE-CRON: while set, no shard runs its background tick ([`Shard::cron`]: active expiry,
/// rehashing, lazy freeing, eviction, the tracking table's limit), as Redis skips `serverCron`.
static CRON_PAUSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Pauses (true) or resumes every shard's background tick.
pub fn pause_cron(paused: bool) {
    CRON_PAUSED.store(paused, std::sync::atomic::Ordering::Relaxed);
}

/// Whether DEBUG PAUSE-CRON holds the background ticks.
pub fn cron_paused() -> bool {
    CRON_PAUSED.load(std::sync::atomic::Ordering::Relaxed)
}

/// xorshift64*: advances the state `x` and returns the next number (a zero state is reseeded).
pub(crate) fn xorshift64star(x: &mut u64) -> u64 {
    if *x == 0 {
        *x = 0x9E37_79B9_7F4A_7C15;
    }
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

thread_local! {
    static SHARD: RefCell<Option<Shard>> = const { RefCell::new(None) };
    static SHARD_ID: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Makes `shard` this thread's shard.
pub fn install(shard: Shard) {
    SHARD_ID.with(|id| id.set(shard.id));
    SHARD.with(|s| *s.borrow_mut() = Some(shard));
}

/// The id of this thread's shard, if it has one.
pub fn current_shard_id() -> Option<usize> {
    let id = SHARD_ID.with(Cell::get);
    (id != usize::MAX).then_some(id)
}

/// Runs `f` on this thread's shard.
///
/// Panics if the thread has no shard or if called re-entrantly; both are programming errors (the
/// dispatcher only calls it from shard threads and never nests it).
pub fn with_shard<R>(f: impl FnOnce(&mut Shard) -> R) -> R {
    let r = SHARD.with(|s| {
        let mut s = s.borrow_mut();
        let shard = s
            .as_mut()
            .expect("with_shard called on a thread without a shard");
        let r = f(shard);
        // Whatever ran may have written keys that parked commands wait for.
        shard.serve_ready();
        r
    });
    // Its keyspace events go out before any of its replies (the caller sends those).
    crate::notify::flush();
    crate::tracking::flush();
    r
}

/// Per-command counters (INFO commandstats), indexed by command-table id.
#[derive(Default, Clone, Copy, Debug)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

/// `latency-tracking`: whether commands record their duration in their histogram.
static LATENCY_TRACKING: AtomicBool = AtomicBool::new(true);

/// Applies `latency-tracking` (CONFIG SET, start-up).
pub fn set_latency_tracking(on: bool) {
    LATENCY_TRACKING.store(on, Ordering::Relaxed);
}

/// Counters kept by each thread for the connections it serves; INFO sums them over threads.
#[derive(Default)]
pub struct ThreadStats {
    pub commands: u64,
    pub connections_received: u64,
    pub rejected_connections: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub cmd: Vec<CmdStat>,
    /// Per command, its durations (INFO latencystats, LATENCY HISTOGRAM), indexed like `cmd`.
    pub latency: Vec<Histogram>,
    /// Error replies by code, the first word of the error (INFO errorstats), in first-seen order;
    /// at most [`MAX_ERROR_CODES`] codes.
    pub errors: Vec<(Box<[u8]>, u64)>,
    /// Error replies whose code found no room in `errors`.
    pub errors_untracked: u64,
    /// Reads across shards run without locks by this thread's connections (read-only pipelines,
    /// and lone read-only commands such as MGET), and those of them run again the locked way,
    /// their key-version check failed or a key locked by another command (INFO strata).
    pub unlocked_reads: u64,
    pub unlocked_reads_rerun: u64,
}

/// Distinct error codes a thread counts one by one (the server's own are a dozen).
pub const MAX_ERROR_CODES: usize = 128;

impl ThreadStats {
    /// Counts an error reply (INFO errorstats, `total_error_replies`): `reply` is its text, with
    /// or without the leading `-`; its code is the first word.
    #[cold]
    pub fn count_error(&mut self, reply: &[u8]) {
        let msg = reply.strip_prefix(b"-").unwrap_or(reply);
        let end = msg
            .iter()
            .position(|&b| b == b' ' || b == b'\r' || b == b'\n')
            .unwrap_or(msg.len());
        let code = &msg[..end];
        if let Some(e) = self.errors.iter_mut().find(|(c, _)| &c[..] == code) {
            e.1 += 1;
        } else if self.errors.len() < MAX_ERROR_CODES {
            self.errors.push((code.into(), 1));
        } else {
            self.errors_untracked += 1;
        }
    }

    /// Records that command `id` ran for `usec` µs in its histogram, while `latency-tracking` is
    /// on (Redis keeps nanoseconds: the µs times 1000).
    #[inline]
    pub fn record_latency(&mut self, id: usize, usec: u64) {
        if LATENCY_TRACKING.load(Ordering::Relaxed) {
            if self.latency.len() <= id {
                self.latency.resize_with(id + 1, Histogram::new);
            }
            self.latency[id].record(usec.saturating_mul(1000));
        }
    }

    /// The counters of command `id`, growing the table on first use.
    pub fn cmd_mut(&mut self, id: usize) -> &mut CmdStat {
        if self.cmd.len() <= id {
            self.cmd.resize(id + 1, CmdStat::default());
        }
        &mut self.cmd[id]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::locks::new_owner;
    use bytes::Bytes;
    use futures_util::FutureExt;
    use strata_core::Value;

    fn write(s: &mut Shard, key: &str) {
        let v = Value::Str(Bytes::from_static(b"v"));
        s.db_mut(0).set(key.as_bytes(), v, None, 1);
    }

    fn woken(p: &Parked) -> bool {
        p.woken().now_or_never().is_some()
    }

    #[test]
    fn a_write_wakes_the_first_parked_command_and_reserves_the_key_for_it() {
        let mut s = Shard::new(0, 1);
        let (a, b) = (
            Parked::new(new_owner(), true),
            Parked::new(new_owner(), true),
        );
        s.park(0, b"k", a.clone());
        s.park(0, b"k", b.clone());
        write(&mut s, "other");
        s.serve_ready();
        assert!(!woken(&a) && !woken(&b), "another key's write wakes nobody");
        write(&mut s, "k");
        s.serve_ready();
        assert!(woken(&a));
        assert!(!woken(&b), "first parked, first served");
        // The key is reserved for `a`: nobody else may take it, `a` may.
        assert!(!s.locks.may_run(None, 0, b"k", Mode::Shared));
        assert!(s.locks.may_run(Some(a.owner()), 0, b"k", Mode::Exclusive));
        // `a` was served and leaves: the reservation goes and `b` gets its turn.
        a.finish();
        s.unpark(0, b"k", &a);
        assert!(s.locks.is_idle());
        s.serve_ready();
        assert!(woken(&b));
        s.unpark(0, b"k", &b);
        assert_eq!((s.parked(), s.db(0).parked_keys()), (0, 0));
    }

    #[test]
    fn finished_commands_are_skipped_and_multi_shard_ones_reserve_nothing() {
        let mut s = Shard::new(0, 1);
        let gone = Parked::new(new_owner(), true);
        let multi = Parked::new(new_owner(), false);
        s.park(0, b"k", gone.clone());
        s.park(0, b"k", multi.clone());
        gone.finish();
        write(&mut s, "k");
        s.serve_ready();
        assert!(!woken(&gone));
        assert!(woken(&multi));
        assert!(s.locks.is_idle(), "no reservation across shards");
        assert_eq!(s.parked(), 1, "the finished one was dropped");
        s.unpark(0, b"k", &multi);
        assert_eq!((s.parked(), s.db(0).parked_keys()), (0, 0));
    }

    #[test]
    fn a_multi_shard_command_is_reserved_only_by_its_lowest_shard() {
        for (lead, reserved) in [(0, true), (1, false)] {
            let mut s = Shard::new(0, 1);
            let p = Parked::spanning(new_owner(), lead);
            s.park(0, b"k", p.clone());
            write(&mut s, "k");
            s.serve_ready();
            assert!(woken(&p));
            assert_eq!(!s.locks.is_idle(), reserved, "lead {lead}");
            s.unpark(0, b"k", &p);
            assert!(s.locks.is_idle(), "withdrawing releases the reservation");
        }
    }

    #[test]
    fn a_command_that_arrived_first_is_served_first_whichever_reached_the_shard_first() {
        let mut s = Shard::new(0, 1);
        // `early` was taken up by its connection first, but reaches the shard after `late` (as a
        // message from another thread does, a hop behind a local command).
        let early = Parked::new(new_owner(), true);
        std::thread::sleep(std::time::Duration::from_millis(1));
        let (late, later) = (
            Parked::new(new_owner(), true),
            Parked::new(new_owner(), true),
        );
        s.park(0, b"k", late.clone());
        s.park(0, b"k", early.clone());
        s.park(0, b"k", later.clone());
        // Parking again (after a vain wake-up) keeps its place.
        s.park(0, b"k", early.clone());
        s.park(0, b"k", late.clone());
        assert_eq!(s.parked(), 3);
        for p in [&early, &late, &later] {
            write(&mut s, "k");
            s.serve_ready();
            assert!(woken(p));
            for q in [&early, &late, &later] {
                assert!(
                    std::ptr::eq(q, p) || !woken(q),
                    "one at a time, in arrival order"
                );
            }
            p.finish();
            s.unpark(0, b"k", p);
        }
        assert_eq!((s.parked(), s.db(0).parked_keys()), (0, 0));
    }

    #[test]
    fn a_key_named_twice_is_one_registration() {
        let mut s = Shard::new(0, 1);
        let p = Parked::new(new_owner(), true);
        for k in [&b"a"[..], b"b", b"b", b"a"] {
            s.park(0, k, p.clone());
        }
        assert_eq!(s.parked(), 2);
        for k in [&b"a"[..], b"b", b"b", b"a"] {
            s.unpark(0, k, &p);
        }
        assert_eq!((s.parked(), s.db(0).parked_keys()), (0, 0));
    }

    #[test]
    fn swapdb_makes_every_parked_key_ready() {
        let mut s = Shard::new(0, 2);
        let p = Parked::new(new_owner(), true);
        s.park(0, b"k", p.clone());
        s.swap_dbs(0, 1, true);
        s.serve_ready();
        assert!(woken(&p));
    }

    /// A runner that takes `from` (deleting it) and writes `to`, if given; parks again when
    /// `from` is missing, and waits while another owner's lock is on it.
    fn mover(from: &'static str, to: Option<&'static str>) -> crate::park::Runner {
        Box::new(move |s: &mut Shard, p: &Arc<Parked>| {
            if !s
                .locks
                .may_run(Some(p.owner()), 0, from.as_bytes(), Mode::Exclusive)
            {
                return crate::park::Served::Busy;
            }
            if !s.db_mut(0).delete(from.as_bytes(), 1) {
                return crate::park::Served::Parked;
            }
            if let Some(to) = to {
                write(s, to);
            }
            p.finish();
            if let Some((db, keys)) = p.withdraw() {
                for k in &keys {
                    s.unpark(db, k, p);
                }
            }
            crate::park::Served::Replied(from.as_bytes().to_vec())
        })
    }

    fn parked_with(s: &mut Shard, key: &'static str, runner: crate::park::Runner) -> Arc<Parked> {
        let p = Parked::new(new_owner(), true);
        p.record(0, &[Bytes::from_static(key.as_bytes())]);
        s.park(0, key.as_bytes(), p.clone());
        p.set_runner(runner);
        p
    }

    #[test]
    fn a_write_serves_parked_commands_on_the_shard_and_their_chain_in_one_pass() {
        let mut s = Shard::new(0, 1);
        let a = parked_with(&mut s, "k1", mover("k1", Some("k2")));
        let b = parked_with(&mut s, "k2", mover("k2", Some("k3")));
        let c = parked_with(&mut s, "k3", mover("k3", None));
        write(&mut s, "k1");
        s.serve_ready();
        for (p, reply) in [(&a, "k1"), (&b, "k2"), (&c, "k3")] {
            assert!(woken(p));
            assert_eq!(p.take_reply().as_deref(), Some(reply.as_bytes()));
        }
        assert_eq!((s.parked(), s.db(0).parked_keys()), (0, 0));
        assert!(s.locks.is_idle(), "nothing reserved");
    }

    #[test]
    fn serving_waits_for_a_held_pass_and_for_locks_and_never_runs_a_closed_command() {
        let mut s = Shard::new(0, 1);
        let a = parked_with(&mut s, "k", mover("k", None));
        // Held (a transaction part runs): served once it is released.
        let held = s.hold_serving(true);
        write(&mut s, "k");
        s.serve_ready();
        assert!(a.take_reply().is_none());
        s.hold_serving(held);
        s.serve_ready();
        assert_eq!(a.take_reply().as_deref(), Some(&b"k"[..]));
        // Another owner's lock on the key: served after the command that releases it.
        let b = parked_with(&mut s, "k", mover("k", None));
        let (id, _) = s
            .locks
            .acquire_key(new_owner(), 0, b"k", Mode::Exclusive, Box::new(|| {}));
        write(&mut s, "k");
        s.serve_ready();
        assert!(b.take_reply().is_none() && !woken(&b));
        s.locks.release(id);
        s.serve_ready();
        assert_eq!(b.take_reply().as_deref(), Some(&b"k"[..]));
        // Closed by its task (deadline, client gone): never run.
        let c = parked_with(&mut s, "k", mover("k", None));
        assert!(c.close().is_none());
        write(&mut s, "k");
        s.serve_ready();
        assert!(c.take_reply().is_none());
        assert!(s.db_mut(0).contains(b"k", 1), "nothing taken for it");
    }
}
