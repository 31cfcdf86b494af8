//! Routing: what a command is and where it runs, decided before anything of it runs.
//!
//! [`Batch::route`] resolves the command in the table (unknown command, arity), then checks, in
//! Redis's order, authentication, out of memory, `min-replicas-to-write` and subscribed mode: a
//! command refused here is a [`Route::Reject`], counted in `rejected_calls`, and never runs. A
//! command that passes is placed by its key specs ([`Placement`]): a key command whose keys live
//! on one shard becomes a [`ShardCmd`] for that shard's sub-batch; one Redis Cluster would split
//! by shard may become one per shard ([`Batch::split`], the parts' replies merged as [`Merge`]
//! says); anything else is a barrier of its kind (connection, server-wide, coordinator, blocking,
//! EXEC).
//!
//! Routing touches no key: besides the rejection counters, the only state it changes is the
//! client's last command (CLIENT LIST's `cmd`).

use std::sync::atomic::Ordering;

use bytes::Bytes;
use strata_commands::table;
use strata_node::keyed::SLICE;
use strata_node::services::connection::is_authenticated;
use strata_node::services::persist;
use strata_node::services::pubsub;
use strata_node::table::{AsyncHandler, CommandSpec, Resolved};
use strata_node::{CmdResult, ConnCtx, Flags, Handler, KeysHandler, Lookup};
use strata_shard::{notify, with_shard, ShardSet};

use super::shard_cmd::{Run, ShardCmd};
use super::Batch;

pub(super) type ConnHandler = fn(&mut ConnCtx<'_>) -> CmdResult;

/// How a command will run.
pub(super) enum Route {
    /// Rejected before running (unknown command, arity, NOAUTH, CROSSSLOT): the error text.
    Reject(String),
    Shard(usize, ShardCmd),
    Conn(Resolved, Vec<Bytes>, ConnHandler),
    Async(Resolved, Vec<Bytes>, AsyncHandler),
    /// A keyed command whose keys span shards (or are too many for one slice): the coordinator.
    Keys(Resolved, Vec<Bytes>, KeysHandler),
    /// A blocking command (BLPOP…): may park until its keys are written. The shard owning all its
    /// keys, or None when they span shards (a keyed command, run by the coordinator).
    Block(Resolved, Vec<Bytes>, Run, Option<usize>),
    /// EXEC: runs the queued transaction.
    Exec(Resolved),
    /// EXEC rejected before running (arity, NOAUTH, subscribed mode…): as in Redis, the error
    /// comes as EXECABORT and the transaction, if any, is discarded.
    AbortExec(Resolved, String),
    /// A keyed command whose keys span shards, run as one command per shard that join the
    /// pipeline's sub-batches (see [`Batch::split`]).
    Split(Vec<(usize, ShardCmd)>, Merge),
}

/// How the replies of a split command's parts make its reply, as Redis Cluster's response
/// policies say (COMMAND DOCS tips).
pub(super) enum Merge {
    /// `response_policy:agg_sum` (DEL, UNLINK, EXISTS, TOUCH): the integers added up.
    Sum,
    /// `response_policy:all_succeeded` (MSET): OK if every part said OK.
    AllOk,
    /// No response policy (MGET): the arrays' elements back in key order; the part each key went to.
    Concat(Vec<u32>),
}

/// Redis's reply to a command refused because used memory is over `maxmemory`.
pub(super) const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Redis's reply to a write refused by `min-replicas-to-write`.
pub(super) const NOREPLICAS_ERROR: &str = "NOREPLICAS Not enough good replicas to write.";

impl Batch<'_> {
    /// `pipelined`: the batch holds more than this command (see [`split`](Self::split)).
    pub(super) fn route(
        &self,
        args: Vec<Bytes>,
        local_shard: usize,
        oom: bool,
        pipelined: bool,
    ) -> Route {
        let cmd = match table().resolve(&args) {
            Lookup::Unknown(msg) => {
                with_shard(|s| s.stats.count_error(msg.as_bytes()));
                return Route::Reject(msg);
            }
            Lookup::BadArity(cmd, msg) => return reject(&cmd, msg),
            Lookup::Found(cmd) => cmd,
        };
        if !cmd.spec.flags.has(Flags::NO_AUTH) && !is_authenticated(self.session, self.state) {
            return reject(&cmd, "NOAUTH Authentication required.".into());
        }
        self.session.info.last_cmd.store(cmd.id, Ordering::Relaxed);
        // Over maxmemory with nothing left to evict (see `Batch::run`).
        if oom && self.rejects_on_oom(&cmd) {
            return reject(&cmd, OOM_ERROR.into());
        }
        // Loading, or writes refused after a failed background save: one load when neither.
        if persist::gate() != 0 && !self.session.replaying {
            if let Some(msg) = self.persist_refusal(&cmd) {
                return reject(&cmd, msg.into());
            }
        }
        // min-replicas-to-write (not inside EXEC: EXEC itself was checked).
        if strata_node::config::writes_need_replicas()
            && cmd.spec.flags.has(Flags::WRITE)
            && self.session.txn_owner.is_none()
        {
            return reject(&cmd, NOREPLICAS_ERROR.into());
        }
        if let Some(msg) = pubsub::subscribed_mode_error(&cmd, self.session) {
            return reject(&cmd, msg);
        }
        let set = &self.state.shards;
        let place = || Placement::of(set, cmd.spec, &args);
        // Inside EXEC a blocking command does not block: it answers as if it timed out.
        if cmd.spec.flags.has(Flags::BLOCKING) && self.session.txn_owner.is_none() {
            match cmd.spec.handler {
                Handler::Shard(handler) => {
                    return match place().shard {
                        Some(shard) => Route::Block(
                            cmd,
                            args,
                            Run::Shard(handler),
                            Some(shard.unwrap_or(local_shard)),
                        ),
                        None => reject(
                            &cmd,
                            "CROSSSLOT Keys in request don't hash to the same slot".into(),
                        ),
                    }
                }
                Handler::Keys(handler) => {
                    let shard = place().shard.map(|s| s.unwrap_or(local_shard));
                    return Route::Block(cmd, args, Run::Keys(handler), shard);
                }
                _ => {}
            }
        }
        match cmd.spec.handler {
            Handler::Shard(handler) => match place() {
                Placement {
                    shard: Some(shard),
                    key,
                    ..
                } => Route::Shard(
                    shard.unwrap_or(local_shard),
                    self.shard_cmd(args, cmd, Run::Shard(handler), key),
                ),
                _ => reject(
                    &cmd,
                    "CROSSSLOT Keys in request don't hash to the same slot".into(),
                ),
            },
            Handler::Keys(handler) => {
                let p = place();
                match p.shard.filter(|_| p.one_message(set, cmd.spec, &args)) {
                    Some(shard) => Route::Shard(
                        shard.unwrap_or(local_shard),
                        self.shard_cmd(args, cmd, Run::Keys(handler), p.key),
                    ),
                    None => match (pipelined || !cmd.spec.flags.has(Flags::READONLY))
                        .then(|| self.split(cmd, &args, handler))
                        .flatten()
                    {
                        Some(route) => route,
                        None => Route::Keys(cmd, args, handler),
                    },
                }
            }
            Handler::Conn(f) => Route::Conn(cmd, args, f),
            Handler::Async(f) => Route::Async(cmd, args, f),
            Handler::Container => {
                Route::Reject(format!("ERR unknown subcommand for '{}'", cmd.name))
            }
            Handler::Exec => Route::Exec(cmd),
        }
    }

    /// Why persistence refuses `cmd` now, if it does: -MISCONF for a write (or PING) after a failed
    /// background save with `stop-writes-on-bgsave-error` and save points, -LOADING for a command
    /// without the `loading` flag while the dataset loads (Redis's processCommand, in its order).
    #[cold]
    fn persist_refusal(&self, cmd: &Resolved) -> Option<&'static str> {
        let gate = persist::gate();
        if gate & persist::GATE_MISCONF != 0
            && (cmd.spec.flags.has(Flags::WRITE) || cmd.name == "ping")
            && persist::writes_refused(&self.state.config)
        {
            return Some(persist::MISCONF);
        }
        if gate & persist::GATE_LOADING != 0 && !cmd.spec.flags.has(Flags::LOADING) {
            return Some(persist::LOADING_ERROR);
        }
        None
    }

    /// Whether an OOM makes Redis refuse `cmd` (EXEC is decided by [`Batch::exec_holds`]):
    /// a `denyoom` command, or anything but EXEC, DISCARD, QUIT and RESET inside MULTI.
    #[cold]
    fn rejects_on_oom(&self, cmd: &Resolved) -> bool {
        if matches!(cmd.spec.handler, Handler::Exec) {
            return false;
        }
        cmd.spec.flags.has(Flags::DENYOOM)
            || (self.session.multi.is_some()
                && !matches!(cmd.name, "exec" | "discard" | "quit" | "reset"))
    }

    /// A command Redis Cluster would split by shard (`request_policy:multi_shard`: MGET, MSET, DEL,
    /// UNLINK, EXISTS, TOUCH), whose keys span shards: the same command over each shard's keys
    /// (with MSET's values), as a [`Route::Split`]. Its parts join the pipeline's sub-batches like
    /// any one-shard command, so a pipeline of MGETs costs one message per shard, not a coordinator
    /// run per command; a run of sub-batches spanning shards is one lock context (two-phase
    /// locking), so the command stays atomic. `route` asks in a pipeline, and for a lone write
    /// (one round trip, where the coordinator locks, then writes); a lone read runs optimistically
    /// in the coordinator, in one round trip and with less work. None (the coordinator runs it) inside a transaction,
    /// while their keyspace events are published (K or E, and g, $ or m in `notify-keyspace-events`),
    /// for a response policy other than sum, all-succeeded or concatenation (MSETNX's all-or-
    /// nothing), for more than [`SLICE`] keys, and for an argument list whose keys are not all its
    /// arguments (or all its odd ones, with a value after each: MSET); the coordinator then
    /// answers its errors too.
    fn split(&self, cmd: Resolved, args: &[Bytes], handler: KeysHandler) -> Option<Route> {
        let tips = cmd.spec.tips;
        // With their events published, the coordinator runs them: it publishes the shards' events
        // in argument order (see `KeysCtx::scatter`), where split parts would publish theirs shard
        // by shard. (These commands are DEL and UNLINK: 'g'; MSET: '$'; MGET, EXISTS and TOUCH:
        // 'm'. Not for 'x' alone: lazy expiry's events stay in shard order rather than make
        // every such command costlier under the common `Ex`.)
        if self.session.txn_owner.is_some()
            || !tips.contains(&"request_policy:multi_shard")
            // Propagated as one command (see `strata_shard::propagate`): not split per shard.
            || (strata_shard::propagate::on() && cmd.spec.flags.has(Flags::WRITE))
            || (notify::publishing()
                && notify::enabled(notify::GENERIC | notify::STRING | notify::KEY_MISS))
        {
            return None;
        }
        let mut merge = if tips.contains(&"response_policy:agg_sum") {
            Merge::Sum
        } else if tips.contains(&"response_policy:all_succeeded") {
            Merge::AllOk
        } else if tips.iter().any(|t| t.starts_with("response_policy:")) {
            return None;
        } else {
            Merge::Concat(Vec::with_capacity(args.len() - 1))
        };
        let n = args.len() - 1;
        let mut keys = Vec::with_capacity(n);
        cmd.spec.for_each_key(args, |i, _| keys.push(i));
        let unit = if keys.iter().copied().eq(1..=n) {
            1
        } else if n.is_multiple_of(2) && keys.iter().copied().eq((1..n).step_by(2)) {
            2
        } else {
            return None;
        };
        if keys.len() > SLICE {
            return None;
        }
        let set = &self.state.shards;
        let mut parts: Vec<(usize, Vec<Bytes>)> = Vec::new();
        for &k in &keys {
            let shard = set.shard_of_key(&args[k]);
            let at = match parts.iter().position(|(s, _)| *s == shard) {
                Some(at) => at,
                None => {
                    let mut part = Vec::with_capacity(1 + unit * keys.len());
                    part.push(args[0].clone());
                    parts.push((shard, part));
                    parts.len() - 1
                }
            };
            parts[at].1.extend_from_slice(&args[k..k + unit]);
            if let Merge::Concat(order) = &mut merge {
                order.push(at as u32);
            }
        }
        if parts.len() < 2 {
            return None;
        }
        let cmds = parts
            .into_iter()
            .enumerate()
            .map(|(i, (shard, part))| {
                let mut c = self.shard_cmd(part, cmd, Run::Keys(handler), 1);
                // Counted once (INFO commandstats), as the one command it is.
                c.counted = i == 0;
                (shard, c)
            })
            .collect();
        Some(Route::Split(cmds, merge))
    }

    /// `key`: the index of its first key argument (0: none).
    pub(super) fn shard_cmd(
        &self,
        args: Vec<Bytes>,
        cmd: Resolved,
        run: Run,
        key: usize,
    ) -> ShardCmd {
        ShardCmd {
            key,
            args,
            cmd,
            run,
            db: self.session.db,
            proto: self.session.proto,
            parked: None,
            info: None,
            client: self.session.info.id,
            track: cmd.spec.flags.has(Flags::READONLY)
                && strata_node::services::tracking::tracks_reads(self.session),
            seq: 0,
            counted: true,
            quiet: false,
            txn: self.session.prop_txn,
        }
    }
}

/// Rejects a known command before it runs, counting it in `rejected_calls` as Redis does.
fn reject(cmd: &Resolved, msg: String) -> Route {
    if matches!(cmd.spec.handler, Handler::Exec) {
        // Counted by `abort_exec`.
        return Route::AbortExec(*cmd, msg);
    }
    with_shard(|s| {
        s.stats.cmd_mut(cmd.id).rejected_calls += 1;
        s.stats.count_error(msg.as_bytes());
    });
    Route::Reject(msg)
}

/// Where a command's keys live.
pub(super) struct Placement {
    /// The shard owning all its keys (`Some(None)`: it has no key), None if they span shards.
    pub(super) shard: Option<Option<usize>>,
    /// Index of its first key argument (0: none).
    pub(super) key: usize,
    /// Number of key arguments.
    n: usize,
}

impl Placement {
    #[inline]
    pub(super) fn of(set: &ShardSet, spec: &CommandSpec, args: &[Bytes]) -> Placement {
        let mut shard = None;
        let mut same = true;
        let (mut key, mut n) = (0, 0);
        spec.for_each_key(args, |i, _| {
            let s = set.shard_of_key(&args[i]);
            if n == 0 {
                key = i;
            }
            n += 1;
            same &= *shard.get_or_insert(s) == s;
        });
        Placement {
            shard: same.then_some(shard),
            key,
            n,
        }
    }

    /// For a keyed command (`Handler::Keys`) whose keys live on one shard: whether it runs there as
    /// one message (not too many keys, and no keys named at run time that may live anywhere).
    #[inline]
    pub(super) fn one_message(&self, set: &ShardSet, spec: &CommandSpec, args: &[Bytes]) -> bool {
        self.n <= SLICE
            && (set.len() == 1
                || !(spec.reads_db.is_some_and(|f| f(args))
                    || spec.writes_db.is_some_and(|f| f(args))))
    }
}
