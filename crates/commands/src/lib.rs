//! The data-type command families and the process's command table.
//!
//! Each family module lists its commands in one `COMMANDS` table (name, arity, flags, key positions,
//! docs, handler) followed by the handlers; the work on data lives in `op_*` functions that take a
//! [`strata_shard::Db`] and return typed results. A family is written against the command context
//! of `strata-node` (its contexts, argument cursor, errors and shared value views) and the shard
//! layer only: never against another family's module, nor server-wide state (the one exception,
//! GEO, is a sorted-set family: it stores through `zset`'s value functions, as Redis's geo.c does
//! through t_zset.c). `scripts/check-layers.sh` checks these rules in CI.
//!
//! Adding a command means touching its family module (and its tests) only: [`table`] collects every
//! family listed in [`FAMILIES`], with the server-wide commands of `strata-node`.

pub mod docs;
pub mod testing;

pub mod bitmap;
pub mod generic;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod list;
pub mod set;
pub mod sort;
pub mod string;
pub mod zset;

#[cfg(test)]
mod table_tests;

use std::sync::OnceLock;

use strata_node::services::{connection, latency, multi, pubsub, replication, server, slowlog};
use strata_node::table::Table;
use strata_node::CommandSpec;

/// Every command family, in the order COMMAND lists them.
pub const FAMILIES: &[&[CommandSpec]] = &[
    connection::COMMANDS,
    server::COMMANDS,
    string::COMMANDS,
    generic::COMMANDS,
    replication::COMMANDS,
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

/// The validated command table (built once, on first use), installed as the process's table
/// (`strata_node::table::process`) so the server-wide services name commands by it.
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    if let Some(t) = TABLE.get() {
        return t;
    }
    let t = TABLE.get_or_init(|| Table::new(FAMILIES));
    strata_node::table::set_process(t);
    t
}
