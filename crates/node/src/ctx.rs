//! What a handler sees: [`ShardCtx`] on the shard that owns the keys, [`ConnCtx`] on the
//! connection's thread.

use std::sync::Arc;

use bytes::Bytes;
use strata_resp::ReplyBuf;
use strata_shard::{Db, Owner, Shard, ShardSet};

use crate::args::Args;
use crate::config::Config;
use crate::state::{ServerState, Session};

/// Context of a command running on the shard that owns its keys.
pub struct ShardCtx<'a> {
    pub shard: &'a mut Shard,
    /// Selected database index.
    pub db: usize,
    /// The whole command line; `args[0]` is the command name.
    pub args: &'a [Bytes],
    pub out: &'a mut ReplyBuf,
    /// Command time in unix ms (one clock reading per command, as Redis does).
    pub now: i64,
    /// Set by a blocking command that found nothing to serve, instead of a reply (see [`Park`]).
    pub park: Option<Park>,
}

/// What a blocking command (BLPOP, BZPOPMIN, BLMOVE…) asks for when it finds nothing to serve:
/// to wait until one of `keys` is written, then run again, or to answer `timeout` at `deadline`.
/// The handler writes no reply when it parks. See `strata_shard::park` for the guarantees (first
/// parked first served, no lost wake-up, nothing served to a client that is gone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Park {
    /// The keys to wait on, all in the command's database.
    pub keys: Vec<Bytes>,
    /// When to give up, unix ms; None waits forever.
    pub deadline: Option<i64>,
    /// The reply once the deadline passes.
    pub timeout: TimeoutReply,
    /// The reply when the command may not block at all (inside MULTI/EXEC): BLMOVE and
    /// BRPOPLPUSH then answer as LMOVE does, with a null bulk string.
    pub no_block: TimeoutReply,
}

/// A blocking command's reply on timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReply {
    /// A null array (`*-1`, RESP3 `_`): what Redis 7.0 answers for every timed-out list and
    /// sorted-set pop, BLMOVE included.
    NullArray,
    /// A null bulk string (`$-1`, RESP3 `_`).
    NullBulk,
}

impl TimeoutReply {
    /// Writes the reply.
    pub fn write(self, out: &mut ReplyBuf) {
        match self {
            TimeoutReply::NullArray => out.null_array(),
            TimeoutReply::NullBulk => out.null(),
        }
    }
}

impl<'a> ShardCtx<'a> {
    /// The selected database.
    pub fn db(&mut self) -> &mut Db {
        self.shard.db_mut(self.db)
    }

    /// Redis's notifyKeyspaceEvent for `key` of the selected database (see
    /// `strata_shard::notify`).
    #[inline]
    pub fn notify(&self, class: u32, event: &'static str, key: &[u8]) {
        strata_shard::notify::emit(class, event, key, self.db as u32);
    }

    /// A cursor over the arguments after the command name.
    pub fn args(&self) -> Args<'a> {
        Args::new(self.args, 1)
    }

    /// Propagates `argv` instead of the command line if the command changed the dataset (see
    /// `strata_shard::propagate`). Costs one load while nothing consumes the stream.
    pub fn propagate_as(&self, argv: impl FnOnce() -> Vec<Bytes>) {
        if strata_shard::propagate::on() {
            let argv = argv();
            strata_shard::propagate::with_current(|o| o.rewrite(argv));
        }
    }

    /// Propagates `argv` (after what was emitted already) instead of the command line, whatever
    /// the command changed; with an empty list, propagates nothing for it.
    pub fn propagate_emit(&self, argv: impl FnOnce() -> Vec<Vec<Bytes>>) {
        if strata_shard::propagate::on() {
            let list = argv();
            strata_shard::propagate::with_current(|o| {
                o.suppress();
                list.into_iter().for_each(|a| o.emit(a));
            });
        }
    }
}

/// Context of a command running on the connection's thread.
///
/// The session and the server-wide state are this crate's: its services reach them whole, a
/// data-type family only through the accessors below (the selected database, the shards, the lock
/// owner, the configuration, a sleep), so a family cannot reach into the client registry, pub/sub
/// or another connection's state.
pub struct ConnCtx<'a> {
    pub(crate) session: &'a mut Session,
    pub(crate) server: &'a Arc<ServerState>,
    pub args: &'a [Bytes],
    pub out: &'a mut ReplyBuf,
    pub now: i64,
    /// How its propagated form differs from its command line (see `strata_shard::propagate`).
    pub prop: strata_shard::propagate::Override,
}

impl<'a> ConnCtx<'a> {
    /// The context of a command line `args` of the client whose `session` it is, answering into
    /// `out`, at command time `now` (unix ms).
    pub fn new(
        session: &'a mut Session,
        server: &'a Arc<ServerState>,
        args: &'a [Bytes],
        out: &'a mut ReplyBuf,
        now: i64,
    ) -> ConnCtx<'a> {
        ConnCtx {
            session,
            server,
            args,
            out,
            now,
            prop: Default::default(),
        }
    }

    /// The selected database.
    pub fn db(&self) -> usize {
        self.session.db
    }

    /// The transaction this command belongs to in the propagation stream (0: none), and its
    /// place in it.
    pub fn prop_txn(&self) -> (u64, u32) {
        (self.session.prop_txn, self.session.prop_pos)
    }

    /// The server's configuration (read-only to a family).
    pub fn config(&self) -> &Config {
        &self.server.config
    }

    /// What suspends the calling task, not its thread, for a while (the event loop's timer): a
    /// long walk yields with it.
    pub fn sleeper(
        &self,
    ) -> fn(std::time::Duration) -> futures_util::future::LocalBoxFuture<'static, ()> {
        self.server.sleep
    }

    /// A cursor over the arguments after the command name (`start` = 2 for subcommands).
    pub fn args_from(&self, start: usize) -> Args<'a> {
        Args::new(self.args, start)
    }

    /// The shard set.
    pub fn shards(&self) -> &ShardSet {
        &self.server.shards
    }

    /// The lock owner a command takes its locks as: the transaction's inside EXEC (re-entering
    /// what EXEC holds), else a fresh one.
    pub fn lock_owner(&self) -> Owner {
        self.session
            .txn_owner
            .unwrap_or_else(strata_shard::new_owner)
    }
}
