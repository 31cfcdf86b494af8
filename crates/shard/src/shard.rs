//! A shard: the slice of the keyspace owned by one thread.
//!
//! The shard lives in a thread-local of its thread and is reached only through [`with_shard`] on that
//! thread; other threads send it closures through the [`crate::ShardSet`]. There is no lock around it:
//! exclusivity comes from ownership by one thread, and a `RefCell` borrow is never held across an
//! await point (every `with_shard` call is synchronous).

use std::cell::{Cell, RefCell};

use crate::db::Db;
use crate::locks::LockTable;

/// Keys examined per database per active-expiry tick.
pub const ACTIVE_EXPIRE_BUDGET: usize = 2000;
/// Buckets of an in-progress resize moved per database per background tick.
pub const REHASH_BUCKETS_PER_TICK: usize = 1000;

/// One thread's slice of the keyspace: every database, its lock table, and counters.
pub struct Shard {
    /// Index of this shard (= its thread) in the shard set.
    pub id: usize,
    /// Databases 0..N (the `databases` setting).
    pub dbs: Vec<Db>,
    /// Intent locks of multi-shard commands.
    pub locks: LockTable,
    /// Whether the background expiry cycle runs (DEBUG SET-ACTIVE-EXPIRE).
    pub active_expire: bool,
    /// Counters of the connections served by this thread.
    pub stats: ThreadStats,
    rng: u64,
}

impl Shard {
    /// A shard with `databases` empty databases.
    pub fn new(id: usize, databases: usize) -> Shard {
        Shard {
            id,
            dbs: (0..databases).map(|_| Db::default()).collect(),
            locks: LockTable::default(),
            active_expire: true,
            stats: ThreadStats::default(),
            rng: 0x9E37_79B9_7F4A_7C15 ^ ((id as u64 + 1) * 0x2545_F491_4F6C_DD1D),
        }
    }

    /// A fast non-cryptographic random number (xorshift64*), for RANDOMKEY and sampling.
    pub fn rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// One background tick over every database: active expiry (up to a budget) and a slice of any
    /// table resize in progress. Returns true if work remains (more expired keys are due or a resize
    /// is unfinished), so the caller should run again soon.
    pub fn cron(&mut self, now: i64) -> bool {
        let mut more = false;
        for db in &mut self.dbs {
            if self.active_expire {
                more |= db.active_expire(now, ACTIVE_EXPIRE_BUDGET).0 >= ACTIVE_EXPIRE_BUDGET;
            }
            more |= db.rehash(REHASH_BUCKETS_PER_TICK);
        }
        more
    }
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
    SHARD.with(|s| {
        f(s.borrow_mut()
            .as_mut()
            .expect("with_shard called on a thread without a shard"))
    })
}

/// Per-command counters (INFO commandstats), indexed by command-table id.
#[derive(Default, Clone, Copy, Debug)]
pub struct CmdStat {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

/// Counters kept by each thread for the connections it serves; INFO sums them over threads.
#[derive(Default, Debug)]
pub struct ThreadStats {
    pub commands: u64,
    pub connections_received: u64,
    pub rejected_connections: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub cmd: Vec<CmdStat>,
}

impl ThreadStats {
    /// The counters of command `id`, growing the table on first use.
    pub fn cmd_mut(&mut self, id: usize) -> &mut CmdStat {
        if self.cmd.len() <= id {
            self.cmd.resize(id + 1, CmdStat::default());
        }
        &mut self.cmd[id]
    }
}
