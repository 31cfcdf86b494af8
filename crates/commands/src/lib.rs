//! The command table and the command families.
//!
//! Each family module lists its commands in one `COMMANDS` table (name, arity, flags, key positions,
//! docs, handler) followed by the handlers; the work on data lives in `op_*` functions that take a
//! [`strata_shard::Db`] and return typed results. Adding a command means touching its family module
//! (and its tests) only: [`table`] collects every family listed in [`FAMILIES`].

pub mod args;
pub mod client_evict;
pub mod config;
pub mod ctx;
pub mod digest;
pub mod docs;
pub mod error;
pub mod keyed;
pub mod keyspec;
pub use strata_shard::memory;
pub mod monitor;
pub mod table;
pub mod testing;
pub mod tracking;

pub mod bitmap;
pub mod connection;
pub mod generic;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod latency;
pub mod list;
pub mod multi;
pub mod pubsub;
pub mod server;
pub mod set;
pub mod slowlog;
pub mod sort;
pub mod string;
pub mod zset;

use std::sync::OnceLock;

pub use args::Args;
pub use ctx::{
    ClientInfo, ConnCtx, Park, Queued, ReplyMode, ServerState, Session, ShardCtx, TimeoutReply,
};
pub use error::{CmdError, CmdResult};
pub use keyed::{KeysCtx, KeysHandler};
pub use table::{
    CommandSpec, Flags, Handler, KeyAccess, KeyFlags, KeySpec, Lookup, Parts, Resolved, Table,
};

/// Every command family, in the order COMMAND lists them.
pub const FAMILIES: &[&[CommandSpec]] = &[
    connection::COMMANDS,
    server::COMMANDS,
    string::COMMANDS,
    generic::COMMANDS,
    sort::COMMANDS,
    hash::COMMANDS,
    list::COMMANDS,
    set::COMMANDS,
    zset::COMMANDS,
    multi::COMMANDS,
    bitmap::COMMANDS,
    hll::COMMANDS,
    geo::COMMANDS,
    pubsub::COMMANDS,
    slowlog::COMMANDS,
    latency::COMMANDS,
];

/// The validated command table (built once, on first use).
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table::new(FAMILIES))
}

/// Runs a shard-side handler and writes its error, if any, in Redis's words. Returns whether it failed.
pub fn run_shard_handler(f: fn(&mut ShardCtx<'_>) -> CmdResult, cx: &mut ShardCtx<'_>) -> bool {
    match f(cx) {
        Ok(()) => false,
        Err(e) => {
            cx.out.error(&e.message());
            true
        }
    }
}
