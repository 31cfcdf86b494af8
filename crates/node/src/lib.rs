//! The server-wide layer: the context every command runs in, and the state and services of the
//! server as a whole. Four concerns, each importing only those listed before it
//! (`scripts/check-layers.sh` checks it; docs/architecture.md shows the layers):
//!
//! 1. **Base** — errors in Redis's words ([`error`]), the typed argument cursor and the argument
//!    grammar several families share ([`args`]), the value views every family shares ([`value`]),
//!    shared replies ([`reply`]), key specs ([`keyspec`]), command names by id ([`names`]), the
//!    settings read on hot paths ([`settings`]), Redis's log with its crash reports ([`log`]) and
//!    the process's OOM score ([`oom`]) and title ([`proctitle`]).
//! 2. **Registries** — process-wide state with no command in it: the configuration store
//!    ([`config`], applied to the shards by [`access`]), the client registry's entries
//!    ([`clients`]: output queue, limits, CLIENT LIST line, client memory), the pub/sub registry
//!    ([`pubsub`]) and a client's side of client-side caching ([`tracking`]).
//! 3. **Command context** — what a command is and what it runs with: the command table
//!    ([`table`]), the contexts a handler runs in ([`ctx`]: [`ShardCtx`], [`ConnCtx`]; [`keyed`]:
//!    [`KeysCtx`]) and the state they carry ([`state`]: [`ServerState`], [`Session`]). A handler
//!    type names its context, the context carries the session, the session queues commands: these
//!    four files refer to each other, and to nothing above them.
//! 4. **Services** — the server's own commands and the work behind them ([`services`]): CONFIG,
//!    INFO, COMMAND, DEBUG; CLIENT and the connection commands; pub/sub and tracking commands; the
//!    slow log, the latency monitor, MONITOR, client eviction, transactions, WAIT. Services import
//!    each other only downward (no circle).
//!
//! The rule across crates: this crate never imports a data-type family (`strata-commands` depends
//! on it, not the other way round; Cargo enforces it). A family is written against the base and
//! the command context only, and reads server-wide settings through [`ConnCtx`]'s accessors.

pub mod args;
pub mod error;
pub mod keyspec;
pub mod log;
pub mod names;
pub mod oom;
pub mod proctitle;
pub mod reply;
pub mod settings;
pub mod value;

pub mod access;
pub mod clients;
pub mod config;
pub mod pubsub;
pub mod tracking;

pub mod ctx;
pub mod keyed;
pub mod state;
pub mod table;

pub mod services;

pub use strata_shard::memory;

pub use args::Args;
pub use clients::ClientInfo;
pub use ctx::{ConnCtx, Park, ShardCtx, TimeoutReply};
pub use error::{CmdError, CmdResult};
pub use keyed::{KeysCtx, KeysHandler};
pub use state::{Queued, ReplyMode, ServerState, Session};
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
