//! Dispatch: lookup → arity → auth → route → run → reply, for a whole pipelined batch at once.
//!
//! A batch is every complete command read from a socket in one go. Commands are walked in order and
//! routed:
//! * key commands are appended to the sub-batch of the shard owning their keys (a keyed command whose
//!   keys all live on one shard is a key command too: see `strata_node::keyed`);
//! * everything else is a **barrier**: the sub-batches collected so far run and complete first, then
//!   it runs — connection commands (SELECT, CLIENT KILL, SHUTDOWN…) on this thread, multi-shard keyed
//!   commands through the coordinator, server-wide commands (DBSIZE, KEYS, FLUSHALL…) as async work.
//!   Not barriers: MULTI (it only changes the session) and the EXEC of a transaction of one-shard
//!   key commands without WATCH, whose body joins the sub-batches (the run holding it is then
//!   flushed in atomic mode: each shard's part runs whole).
//!
//! **Ordering.** A pipeline's commands take effect in the order sent, as every other client sees it:
//! * a run of sub-batches that touches one shard needs nothing: the shard runs it in one go, in
//!   order, and nothing can happen in between;
//! * a run that touches several shards is executed as one two-phase-locking transaction: shard by
//!   shard in ascending order, each part takes intent locks on its keys (waiting if another command
//!   holds them), runs, and keeps its locks; the last part releases at once and the others are
//!   released after it. No part of a later command of the pipeline can be seen before an earlier
//!   one, because a client that could see the later part would have to read keys still locked by
//!   the earlier one. The locks cost a few hash-table operations per key, paid only by batches that
//!   span shards, and each part still travels as one message (see docs/architecture.md);
//! * a run that touches several shards and only reads takes no locks: its parts run in the same
//!   order, recording the versions of the keys they read, and the run is good if none of those
//!   moved by the time its last part has run, else it runs again the locked way
//!   ([`Batch::run_versioned`], `strata_shard::versions`).
//!
//! Before a sub-batch runs, the table buckets and then the entries of its keys are prefetched, so its
//! cache misses overlap. Replies are assembled in request order at the end.
//!
//! **The request path, file by file.** [`Batch::run`], below, walks a batch's commands in order;
//! for each:
//! 1. *admit* (`admit.rs`): may it run now — the client's output limit, CLIENT PAUSE,
//!    `maxmemory-clients`, `maxmemory` (eviction first), as Redis's processCommand checks them;
//! 2. *queue* (`transaction.rs`, `Batch::queue`): inside MULTI it is queued instead of run;
//! 3. *route* (`route.rs`): table lookup, arity, auth, memory, replicas, subscribed mode, and where
//!    its keys live — a `Route`;
//! 4. *run*, by route:
//!    * a key command of one shard becomes a [`ShardCmd`] (`shard_cmd.rs`: its locks, running it
//!      on its shard, parking it) appended to that shard's sub-batch (`Pending`, here); a lone
//!      one on this thread's shard runs in place;
//!    * a barrier first runs the sub-batches collected so far (`pipeline.rs`: one shard, a lock
//!      context, or reads checked by versions; each sub-batch by `sub_batch.rs`), then itself:
//!      connection and server-wide commands in `conn_thread.rs`, keyed commands across shards in
//!      `coordinator.rs`, blocking commands in `blocking.rs`, EXEC in `transaction.rs`;
//! 5. *reply* (`reply.rs`): once the batch has run, the replies in request order, from where each
//!    command's `Slot` (here) says it is.
//!
//! Beside the path, `stats.rs` counts what ran on this thread (commandstats, errorstats, latency,
//! slow log) and `spare.rs` keeps the batch's buffers per thread for the next batch.
//!
//! Every file adds its step to [`Batch`] and may use the batch's bookkeeping here (`Slot`,
//! `Pending`). Between themselves, the files depend one way, each only on files before it in
//! this list: `stats`, `shard_cmd`, `spare`, `admit`, `route`, `sub_batch`, `pipeline`,
//! `coordinator`, `conn_thread`, `blocking`, `transaction`, `reply`. (`shard_cmd` comes before
//! `route` though the path runs the other way: a [`ShardCmd`] is what routing produces.)

mod admit;
mod blocking;
mod conn_thread;
mod coordinator;
mod pipeline;
mod reply;
mod route;
mod shard_cmd;
mod spare;
mod stats;
mod sub_batch;
mod transaction;

use std::sync::Arc;

use bytes::Bytes;
use strata_commands::table;
use strata_node::services::monitor;
use strata_node::services::multi;
use strata_node::services::pubsub;
use strata_node::{Flags, Lookup, ReplyMode, ServerState, Session};
use strata_resp::ReplyBuf;
use strata_shard::{current_shard_id, now_ms, now_us, with_shard};

use admit::out_of_memory;
use route::{Merge, Route, NOREPLICAS_ERROR, OOM_ERROR};
use stats::record;
use sub_batch::Progress;

pub(crate) use shard_cmd::peer_gone;
pub use shard_cmd::{ShardCmd, ShardReplies};
pub(crate) use stats::set_thread_state;

/// Where one command's reply is.
enum Slot {
    /// Bytes `start..end` of the batch's local reply buffer.
    Local(usize, usize),
    /// Reply `index` of sub-batch `batch`.
    Remote { batch: usize, index: usize },
    /// EXEC run with the pipeline: its array header (bytes `start..end` of the local buffer), then
    /// the replies of its body, each a (batch, index) as in `Remote`.
    Txn(usize, usize, Vec<(usize, usize)>),
    /// A multi-key command split into one command per shard (see [`Route::Split`]): the parts'
    /// replies, each a (batch, index) as in `Remote`, merged into one.
    Split(Vec<(usize, usize)>, Merge),
}

/// A sub-batch being collected: the commands of the batch bound for one shard, in order.
struct Pending {
    shard: usize,
    cmds: Vec<ShardCmd>,
    /// Holds a transaction's body: the run it belongs to is flushed in atomic mode.
    whole: bool,
}

impl Pending {
    /// The index in `pending` of `shard`'s sub-batch, opened if needed.
    /// `room`: how many commands it may get (the rest of the batch, capped so a huge pipeline
    /// spread over many shards does not reserve its length on each).
    fn index(pending: &mut Vec<Pending>, shard: usize, room: usize) -> usize {
        match pending.iter().position(|p| p.shard == shard) {
            Some(b) => b,
            None => {
                if pending.capacity() == 0 {
                    *pending = spare::take_pending();
                }
                pending.push(Pending {
                    shard,
                    cmds: spare::take_cmds(room),
                    whole: false,
                });
                pending.len() - 1
            }
        }
    }
}

/// Executes pipelined batches for one connection.
pub struct Batch<'a> {
    pub state: &'a Arc<ServerState>,
    pub session: &'a mut Session,
    pub out: &'a mut ReplyBuf,
    /// The client's socket: while a command of the batch waits (a blocking pop), its end (an
    /// event saying the client closed or reset it) ends the wait at once, as Redis frees a client
    /// at the read that finds its end.
    pub conn: &'a strata_rt::net::Stream,
}

impl Batch<'_> {
    /// Runs `cmds` and appends their replies to `out` in request order. Commands after one that
    /// closes the connection (QUIT) are not run.
    /// `cmds` is left empty, its capacity kept for the caller's next batch.
    pub async fn run(&mut self, cmds: &mut Vec<Vec<Bytes>>) {
        let local_shard = current_shard_id().unwrap_or(0);
        // A lone command on this thread's shard runs in place; in a pipeline, commands for this
        // shard form a sub-batch like those for other shards.
        let single = cmds.len() == 1;
        let (buf, mut slots) = spare::take();
        let limit = self.session.info.output_budget();
        let mut local = ReplyBuf {
            buf,
            proto: self.session.proto,
            // Past this the batch has outgrown the limit whatever else it holds (see `outgrown`).
            room: (limit != usize::MAX).then_some(limit),
        };
        slots.reserve(cmds.len());
        // Taken from the spare ones once used (see `spare`).
        let mut pending: Vec<Pending> = Vec::new();
        let mut done: Vec<ShardReplies> = Vec::new();
        let mut starts: Vec<usize> = Vec::new();

        let monitoring = monitor::active();
        // The client's output limit (`limit`, above): past it, it is closed and nothing more runs
        // (see `Progress`).
        let mut cmds = cmds.drain(..);
        while let Some(args) = cmds.next() {
            if self.session.close_after_reply {
                break;
            }
            if limit != usize::MAX && self.outgrown(limit, &local, &done) {
                return;
            }
            if self.session.txn_owner.is_none() && self.state.pause.maybe_paused() {
                if let Some(write) = self.paused(&args) {
                    if !slots.is_empty() {
                        // Answer what came before first: the connection writes those replies,
                        // then runs the rest of the pipeline, starting with this command.
                        let mut rest = vec![args];
                        rest.extend(cmds);
                        self.session.deferred = Some(rest);
                        break;
                    }
                    if !self.wait_unpaused(write).await {
                        self.session.close_after_reply = true;
                        break;
                    }
                }
            }
            // maxmemory-clients before keys, as Redis's processCommand evicts clients first: the
            // batch's replies so far count as this client's.
            if strata_node::clients::enabled() && self.evicted(&local, &done) {
                return;
            }
            // maxmemory: eviction before every command, as Redis's processCommand does, and
            // whether it left the process out of memory. One load and a branch when no limit is
            // set. Inside EXEC the queued commands are not checked again (EXEC itself was).
            let mut oom = false;
            if strata_shard::evict::maxmemory() != 0 && self.session.txn_owner.is_none() {
                let before = strata_shard::evict::evictions();
                oom = out_of_memory(&self.state.shards).await;
                if strata_shard::evict::evictions() != before {
                    self.held_invalidations_first(&mut local, &mut slots);
                }
            }
            // tracking-table-max-keys: while the tables hold more keys, each shard evicts a
            // bounded number of them (telling their readers) before the command runs, as Redis's
            // processCommand does. One load while no client tracks.
            if strata_shard::tracking::over_limit() && self.session.txn_owner.is_none() {
                let shards = &self.state.shards;
                let calls = (0..shards.len()).map(|i| {
                    shards.call(i, |_| {
                        strata_shard::tracking::enforce_limit();
                    })
                });
                futures_util::future::join_all(calls).await;
                self.held_invalidations_first(&mut local, &mut slots);
            }
            let mode_before = self.session.reply_mode;
            local.proto = self.session.proto;
            let start = local.buf.len();
            if self.session.multi.is_some() && !multi::runs_inside_multi(&args) {
                match self.queue(args, oom) {
                    Ok(()) => local.simple("QUEUED"),
                    Err(msg) => {
                        self.session.multi_failed = true;
                        local.error(&msg);
                    }
                }
                slots.push((Slot::Local(start, local.buf.len()), false));
                continue;
            }
            // CLIENT CACHING's flag lasts until a command other than CLIENT (as in Redis).
            let caching_before = self.session.caching
                && !args
                    .first()
                    .is_some_and(|a| a.eq_ignore_ascii_case(b"client"));
            // MONITOR: described before it runs (its arguments move), shown once it has.
            let shown = if monitoring {
                match table().resolve(&args) {
                    Lookup::Found(cmd) => monitor::describe(cmd.spec, &args),
                    _ => None,
                }
            } else {
                None
            };
            let mut rejected = false;
            let slot = match self.route(args, local_shard, oom, !single) {
                Route::Reject(msg) => {
                    rejected = true;
                    // A rejected command aborts the transaction it was sent in (Redis's
                    // flagTransaction in rejectCommand).
                    if self.session.multi.is_some() {
                        self.session.multi_failed = true;
                    }
                    local.error(&msg);
                    Slot::Local(start, local.buf.len())
                }
                Route::Shard(shard, cmd) if shard == local_shard && single => {
                    let owner = self.session.txn_owner;
                    let ran = with_shard(|s| {
                        let free = cmd.may_run(&s.locks, owner);
                        if free {
                            cmd.exec(s, &mut local);
                        }
                        free
                    });
                    // (A command routed here never parks: blocking commands take Route::Block.)
                    if !ran {
                        let cmds = [cmd];
                        let r = Box::pin(Progress::new(usize::MAX).finish_free(
                            &self.state.shards,
                            &cmds,
                            owner,
                        ))
                        .await;
                        local.buf.extend_from_slice(&r.buf);
                    }
                    Slot::Local(start, local.buf.len())
                }
                Route::Shard(shard, mut cmd) => {
                    let batch = Pending::index(&mut pending, shard, (cmds.len() + 1).min(256));
                    cmd.seq = slots.len() as u32;
                    pending[batch].cmds.push(cmd);
                    Slot::Remote {
                        batch: done.len() + batch,
                        index: pending[batch].cmds.len() - 1,
                    }
                }
                Route::Conn(cmd, args, f) => {
                    // A barrier: what came before takes effect first (CLIENT KILL, SHUTDOWN...).
                    // MULTI only changes the session: the pipeline's sub-batches stay open, so
                    // pipelined transactions travel together (see `take_direct_exec`).
                    if cmd.name != "multi" {
                        self.flush(&mut pending, &mut done).await;
                    }
                    if pubsub::pushes_to_caller(cmd.spec, self.session) {
                        // It pushes to this client: the replies before it go first.
                        self.assemble(&mut slots, &local, &done, &mut starts);
                        let before = Bytes::from(self.out.take());
                        self.session.info.queue_reply(before, false, now_ms());
                    }
                    self.run_conn(&cmd, &args, f, &mut local);
                    Slot::Local(start, local.buf.len())
                }
                Route::Async(cmd, args, f) => {
                    self.flush(&mut pending, &mut done).await;
                    self.run_async(&cmd, &args, f, &mut local).await;
                    Slot::Local(start, local.buf.len())
                }
                Route::Keys(cmd, args, f) => {
                    self.flush(&mut pending, &mut done).await;
                    // Boxed, as the coordinator's other paths: see `flush`.
                    Box::pin(self.run_keys(&cmd, &args, f, &mut local)).await;
                    Slot::Local(start, local.buf.len())
                }
                Route::Split(parts, merge) => {
                    let mut refs = Vec::with_capacity(parts.len());
                    for (shard, mut c) in parts {
                        let b = Pending::index(&mut pending, shard, (cmds.len() + 1).min(256));
                        c.seq = slots.len() as u32;
                        pending[b].cmds.push(c);
                        refs.push((done.len() + b, pending[b].cmds.len() - 1));
                    }
                    Slot::Split(refs, merge)
                }
                Route::AbortExec(cmd, msg) => {
                    rejected = true;
                    self.flush(&mut pending, &mut done).await;
                    self.abort_exec(&cmd, msg.strip_prefix("ERR ").unwrap_or(&msg), &mut local)
                        .await;
                    Slot::Local(start, local.buf.len())
                }
                Route::Exec(cmd) if oom && self.exec_holds(Flags::DENYOOM) => {
                    self.flush(&mut pending, &mut done).await;
                    self.abort_exec(&cmd, OOM_ERROR, &mut local).await;
                    Slot::Local(start, local.buf.len())
                }
                Route::Exec(cmd)
                    if strata_node::config::writes_need_replicas()
                        && self.exec_holds(Flags::WRITE) =>
                {
                    self.flush(&mut pending, &mut done).await;
                    self.abort_exec(&cmd, NOREPLICAS_ERROR, &mut local).await;
                    Slot::Local(start, local.buf.len())
                }
                Route::Exec(cmd) => match self.take_direct_exec() {
                    // The body joins the pipeline's sub-batches (see `take_direct_exec`).
                    Some(body) => {
                        local.proto = self.session.proto;
                        local.array(body.len());
                        let mut parts = Vec::with_capacity(body.len());
                        for (shard, cmd) in body {
                            let b = Pending::index(&mut pending, shard, 1);
                            pending[b].whole = true;
                            pending[b].cmds.push(cmd);
                            parts.push((done.len() + b, pending[b].cmds.len() - 1));
                        }
                        // EXEC itself is counted (INFO commandstats) besides its commands.
                        record(&cmd, now_us(), None);
                        Slot::Txn(start, local.buf.len(), parts)
                    }
                    None => {
                        self.flush(&mut pending, &mut done).await;
                        let began = now_us();
                        Box::pin(self.run_exec(&mut local)).await;
                        // An aborted transaction (EXECABORT, a WATCHed key changed, EXEC without
                        // MULTI) counts as a failed EXEC, as in Redis.
                        let reply = &local.buf[start..];
                        record(&cmd, began, reply.starts_with(b"-").then_some(reply));
                        Slot::Local(start, local.buf.len())
                    }
                },
                Route::Block(cmd, args, run, shard) => {
                    // A barrier: like Redis, later commands wait while it is blocked.
                    self.flush(&mut pending, &mut done).await;
                    Box::pin(self.run_blocking(cmd, args, run, shard, &mut local)).await;
                    Slot::Local(start, local.buf.len())
                }
            };
            // CLIENT CACHING applies to the next command only (to all of a transaction's).
            if caching_before && self.session.multi.is_none() && self.session.txn_owner.is_none() {
                self.session.caching = false;
            }
            if let Some(line) = shown.filter(|_| !rejected) {
                monitor::feed(&line, self.session.db, &self.session.info, now_us());
            }
            let mode_after = self.session.reply_mode;
            // As in Redis, a reply is dropped when the mode in force once the command has run is
            // not ON: CLIENT REPLY ON and RESET are answered even when replies were off.
            let suppress = mode_after != ReplyMode::On;
            if mode_before == ReplyMode::Skip && mode_after == ReplyMode::Skip {
                self.session.reply_mode = ReplyMode::On;
            }
            slots.push((slot, suppress));
        }
        self.flush(&mut pending, &mut done).await;
        if limit != usize::MAX && self.outgrown(limit, &local, &done) {
            return;
        }
        self.hand_over(&mut slots, &mut local, &mut done);
        self.assemble(&mut slots, &local, &done, &mut starts);
        self.out.proto = self.session.proto;
        spare::give(local.buf, slots);
        if done.capacity() != 0 || pending.capacity() != 0 {
            spare::give_lists(pending, done, starts);
        }
    }
}
