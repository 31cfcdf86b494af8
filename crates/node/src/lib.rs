//! The server-wide layer: the context every command runs in, and the state and services of the
//! server as a whole.
//!
//! Two parts, one crate:
//!
//! * **The command context** — what a command family is written against: the declarative command
//!   table's types ([`table`], [`keyspec`]), the typed argument cursor ([`args`]), errors in Redis's
//!   words ([`error`]), the contexts a handler runs in ([`ctx`]: [`ShardCtx`] on the shard owning
//!   the keys, [`KeysCtx`] for keys anywhere, [`ConnCtx`] on the connection's thread) and the value
//!   views every family shares ([`value`]).
//! * **Server-wide state and its services** — config and CONFIG ([`config`], [`access`]), the
//!   client registry and CLIENT ([`ctx::ClientInfo`], [`connection`], [`client_evict`]), INFO,
//!   COMMAND, DEBUG and the other server commands ([`server`], [`digest`]), the slow log
//!   ([`slowlog`]), the latency monitor ([`latency`]), MONITOR ([`monitor`]), pub/sub
//!   ([`pubsub`]), the keyspace-event and tracking front ends ([`tracking`]), and transactions
//!   ([`multi`]).
//!
//! The rule: this crate never imports a data-type family (`strata-commands` depends on it, not the
//! other way round; Cargo enforces it). Families reach server-wide state only through the narrow
//! accessors of [`ConnCtx`]; `scripts/check-layers.sh` checks the `use` lines.

pub mod args;
pub mod error;
pub mod keyed;
pub mod keyspec;
pub mod table;
pub mod value;

pub mod access;
pub mod client_evict;
pub mod config;
pub mod connection;
pub mod ctx;
pub mod digest;
pub mod latency;
pub mod monitor;
pub mod multi;
pub mod pubsub;
pub mod replication;
pub mod server;
pub mod slowlog;
pub mod tracking;

pub use strata_shard::memory;

pub use args::Args;
pub use ctx::{
    ClientInfo, ConnCtx, Park, Queued, ReplyMode, ServerState, Session, ShardCtx, TimeoutReply,
};
pub use error::{CmdError, CmdResult};
pub use keyed::{KeysCtx, KeysHandler};
pub use table::{
    CommandSpec, Flags, Handler, KeyAccess, KeyFlags, KeySpec, Lookup, Parts, Resolved, Table,
};

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
