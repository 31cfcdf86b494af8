//! Shards: one thread's slice of the keyspace, and how threads talk to each other.
//!
//! * [`chain`]: cross-shard moves in flight per client, so a push answers after its whole chain.
//! * [`clock`]: the wall clock, cheap enough to read twice per command.
//! * [`db`]: one database: the one write path, its key events, lazy and active expiry, lazy free.
//! * [`locks`]: the lock table: key and intention locks with owners, for multi-shard commands and
//!   transactions.
//! * [`multi`]: acquiring locks across shards, cancel-safely.
//! * [`park`]: commands that wait on keys (blocking commands), first parked first served.
//! * [`propagate`]: the propagation stream (every write as Redis propagates it: AOF, replication).
//! * [`shard`]: the per-thread shard and its accessor.
//! * [`snapshot`]: a point-in-time snapshot of the shard written while it serves (copy-on-write
//!   per key).
//! * [`set`]: routing (key → slot → shard) and cross-thread calls.
//! * [`tracking`]: client-side caching: who to tell when a key changes.
//! * [`versions`]: key versions, so a read-only pipeline across shards needs no locks.
//! * [`watch`]: WATCH's touched flags, set from the write path's events.

pub mod chain;
pub mod clock;
pub mod db;
pub mod evict;
pub mod locks;
pub mod memory;
pub mod multi;
pub mod notify;
pub mod park;
pub mod propagate;
pub mod set;
pub mod shard;
pub mod snapshot;
pub mod tracking;
pub mod versions;
pub mod watch;

pub use db::{
    lru_clock, now_ms, now_us, Db, DbStats, EntryMut, EventKind, FreeWait, KeyEvent, KeyWait,
    LAZYFREE_THRESHOLD,
};
pub use locks::{new_owner, Grant, LockId, LockKey, LockMode, LockSet, LockTable, Mode, Owner};
pub use multi::MultiLock;
pub use park::{Parked, Runner, Served};
pub use set::{round_end, rounds, Inbox, Job, ShardSet};
pub use shard::{
    cron_paused, current_shard_id, install, pause_cron, set_latency_tracking, with_shard, CmdStat,
    LockHandover, Shard, ThreadStats,
};
pub use watch::Watch;
