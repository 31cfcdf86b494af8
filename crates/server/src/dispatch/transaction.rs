//! MULTI/EXEC: queueing a transaction's commands, and running it.
//!
//! Inside MULTI each command is checked as Redis checks it when queued (known, arity, auth,
//! allowed in a transaction, memory, replicas) and queued, or the transaction is marked to abort
//! at EXEC. EXEC then runs it one of two ways:
//! * with the pipeline ([`Batch::take_direct_exec`]): a transaction of one-shard key commands
//!   without WATCH joins the pipeline's sub-batches, which are flushed in atomic mode;
//! * on its own ([`Batch::run_exec`]): every lock it needs is taken up front as one owner, the
//!   watches are checked, and the body runs as an inner batch in that lock context.
//!
//! Either way no other client sees a state between two of its commands.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use strata_commands::table;
use strata_node::services::connection::is_authenticated;
use strata_node::services::monitor;
use strata_node::services::multi;
use strata_node::table::Resolved;
use strata_node::{Flags, Handler, Lookup, Queued};
use strata_resp::ReplyBuf;
use strata_shard::{new_owner, now_ms, now_us, with_shard, LockSet, Mode};

use super::route::{Placement, NOREPLICAS_ERROR, OOM_ERROR};
use super::shard_cmd::{for_each_lock, Run, ShardCmd};
use super::Batch;

impl Batch<'_> {
    /// Queues a command inside MULTI, or says why Redis would reject it (the transaction then
    /// aborts at EXEC).
    pub(super) fn queue(&mut self, args: Vec<Bytes>, oom: bool) -> Result<(), String> {
        let cmd = match table().resolve(&args) {
            Lookup::Unknown(msg) => {
                with_shard(|s| s.stats.count_error(msg.as_bytes()));
                return Err(msg);
            }
            Lookup::BadArity(cmd, msg) => {
                with_shard(|s| {
                    s.stats.cmd_mut(cmd.id).rejected_calls += 1;
                    s.stats.count_error(msg.as_bytes());
                });
                return Err(msg);
            }
            Lookup::Found(cmd) => cmd,
        };
        let why =
            if !cmd.spec.flags.has(Flags::NO_AUTH) && !is_authenticated(self.session, self.state) {
                Some("NOAUTH Authentication required.")
            } else if cmd.spec.flags.has(Flags::NO_MULTI) {
                Some("ERR Command not allowed inside a transaction")
            } else {
                None
            };
        // Over maxmemory, nothing is queued: a queue may grow without bound (Redis's processCommand).
        let why = why.or(oom.then_some(OOM_ERROR)).or_else(|| {
            (strata_node::config::writes_need_replicas() && cmd.spec.flags.has(Flags::WRITE))
                .then_some(NOREPLICAS_ERROR)
        });
        if let Some(why) = why {
            with_shard(|s| {
                s.stats.cmd_mut(cmd.id).rejected_calls += 1;
                s.stats.count_error(why.as_bytes());
            });
            return Err(why.into());
        }
        if let Some(q) = self.session.multi.as_mut() {
            q.push(Queued { cmd, args });
            self.session
                .info
                .multi
                .store(q.len() as i64, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Whether a queued command has `flag` (EXEC is refused over maxmemory when one is `denyoom`,
    /// and by min-replicas-to-write when one writes; a transaction of reads runs).
    pub(super) fn exec_holds(&self, flag: Flags) -> bool {
        self.session
            .multi
            .as_ref()
            .is_some_and(|q| q.iter().any(|q| q.cmd.spec.flags.has(flag)))
    }

    /// Discards the transaction EXEC was refused for with `why` (Redis's execCommandAbort).
    pub(super) async fn abort_exec(&mut self, cmd: &Resolved, why: &str, out: &mut ReplyBuf) {
        with_shard(|s| {
            s.stats.cmd_mut(cmd.id).rejected_calls += 1;
            s.stats.count_error(b"EXECABORT");
        });
        self.session.multi = None;
        self.session.multi_failed = false;
        self.session.info.multi.store(-1, Ordering::Relaxed);
        multi::unwatch_all(self.session, &self.state.shards).await;
        out.error(&format!(
            "EXECABORT Transaction discarded because of: {why}"
        ));
    }

    /// EXEC of a transaction of one-shard key commands without WATCH (see
    /// [`Batch::exec_placement`]): takes the queue and returns each command with its shard, to run
    /// with the pipeline's sub-batches in atomic mode — one message per shard for the whole run,
    /// each shard's part run whole (at once when no other command holds its keys, else after
    /// taking all of them), parts in ascending shard order holding their locks until the last has
    /// run — so no other client sees a state between two of its commands, and pipelined
    /// transactions travel together. None when EXEC runs on its own ([`Batch::run_exec`]): no
    /// MULTI, a queue to discard, or locks to take up front.
    pub(super) fn take_direct_exec(&mut self) -> Option<Vec<(usize, ShardCmd)>> {
        // With the propagation stream on, a transaction is numbered as a whole under its locks,
        // which the way below takes up front (see `strata_shard::propagate`).
        if self.session.multi_failed || strata_shard::propagate::on() {
            return None;
        }
        let plan = self.exec_placement(self.session.multi.as_ref()?)?;
        let queued = self.session.multi.take()?;
        self.session.info.multi.store(-1, Ordering::Relaxed);
        let monitoring = monitor::active();
        let body = queued
            .into_iter()
            .zip(plan)
            .map(|(q, (shard, key))| {
                if monitoring {
                    if let Some(line) = monitor::describe(q.cmd.spec, &q.args) {
                        let session = &self.session;
                        monitor::feed(&line, session.db, &session.info, now_us());
                    }
                }
                let run = match q.cmd.spec.handler {
                    Handler::Keys(f) => Run::Keys(f),
                    Handler::Shard(f) => Run::Shard(f),
                    _ => unreachable!("exec_placement admits key commands only"),
                };
                (shard, self.shard_cmd(q.args, q.cmd, run, key))
            })
            .collect();
        Some(body)
    }

    /// Where EXEC can run each of `queued` without taking its locks up front: the shard owning
    /// all its keys, and its first key. None if it cannot: a WATCH to check, or a command that is
    /// not a key command of one shard in the current database (SELECT, anything database-wide, a
    /// connection command...). The body is then one message per shard, each part run whole, parts
    /// in two-phase locking, with nothing between parts.
    fn exec_placement(&self, queued: &[Queued]) -> Option<Vec<(usize, usize)>> {
        if self.session.watch.is_some() {
            return None;
        }
        let set = &self.state.shards;
        let authenticated = is_authenticated(self.session, self.state);
        let mut plan = Vec::with_capacity(queued.len());
        for q in queued {
            let (spec, args) = (q.cmd.spec, &q.args[..]);
            if !authenticated && !spec.flags.has(Flags::NO_AUTH) {
                return None;
            }
            let p = Placement::of(set, spec, args);
            let shard = p.shard.flatten()?;
            let one = match spec.handler {
                Handler::Shard(_) => true,
                Handler::Keys(_) => p.one_message(set, spec, args),
                _ => false,
            };
            if !one || spec.other_db_key.is_some_and(|o| o(args).is_some()) {
                return None;
            }
            plan.push((shard, p.key));
        }
        Some(plan)
    }

    /// EXEC: see [`strata_node::services::multi`]. Takes every lock the transaction needs as one owner
    /// (ascending shard order), checks the watches, runs the queued commands as one pipeline in
    /// that lock context, and replies with the array of their replies. (A transaction of one-shard
    /// key commands without WATCH does not come here: see [`Batch::take_direct_exec`].)
    pub(super) async fn run_exec(&mut self, out: &mut ReplyBuf) {
        let set = self.state.shards.clone();
        let Some(queued) = self.session.multi.take() else {
            out.error("ERR EXEC without MULTI");
            return;
        };
        self.session.info.multi.store(-1, Ordering::Relaxed);
        if std::mem::take(&mut self.session.multi_failed) {
            multi::unwatch_all(self.session, &set).await;
            out.error("EXECABORT Transaction discarded because of previous errors.");
            return;
        }
        let n = queued.len();
        let owner = new_owner();
        let lock = set.lock_plan(owner, self.txn_plan(&queued)).await;
        if multi::watch_broken(self.session, &set, now_ms()).await {
            lock.release();
            multi::unwatch_all(self.session, &set).await;
            out.null_array();
            return;
        }
        multi::unwatch_all(self.session, &set).await;
        let mut replies = ReplyBuf::new(self.session.proto);
        self.session.txn_owner = Some(owner);
        let txn = if strata_shard::propagate::on() {
            strata_shard::propagate::new_txn()
        } else {
            0
        };
        self.session.prop_txn = txn;
        {
            let mut inner = Batch {
                state: self.state,
                session: &mut *self.session,
                out: &mut replies,
                conn: self.conn,
            };
            let mut body = queued.into_iter().map(|q| q.args).collect();
            let run: futures_util::future::LocalBoxFuture<'_, ()> = Box::pin(inner.run(&mut body));
            run.await;
        }
        self.session.txn_owner = None;
        self.session.prop_txn = 0;
        if txn != 0 {
            // Every write of the body is numbered; its locks are still held.
            strata_shard::propagate::end_txn(txn);
        }
        lock.release();
        out.proto = self.session.proto;
        out.array(n);
        out.buf.extend_from_slice(&replies.buf);
    }

    /// The locks a transaction takes before it runs, per shard: every key of every queued command
    /// (in the database selected at that point of the transaction), and whole databases for the
    /// commands that read or write all of one.
    fn txn_plan(&self, queued: &[Queued]) -> Vec<(usize, LockSet)> {
        let set = &self.state.shards;
        let databases = self.state.config.get_i64("databases").max(1) as u32;
        let mut plan: Vec<(usize, LockSet)> = (0..set.len()).map(|s| (s, LockSet::new())).collect();
        let mut db = self.session.db;
        let parse_db = |a: Option<&Bytes>| {
            a.and_then(|a| strata_core::num::parse_i64(a))
                .filter(|&n| n >= 0 && n < databases as i64)
                .map(|n| n as u32)
        };
        for Queued { cmd, args } in queued {
            let mut all = |d: u32, mode: Mode| {
                for (_, locks) in plan.iter_mut() {
                    locks.add_db(d, mode);
                }
            };
            match cmd.name {
                "select" => {
                    if let Some(n) = parse_db(args.get(1)) {
                        db = n as usize;
                    }
                }
                "flushall" => (0..databases).for_each(|d| all(d, Mode::Exclusive)),
                "flushdb" => all(db as u32, Mode::Exclusive),
                "swapdb" => {
                    for d in [parse_db(args.get(1)), parse_db(args.get(2))]
                        .into_iter()
                        .flatten()
                    {
                        all(d, Mode::Exclusive);
                    }
                }
                "keys" | "scan" | "randomkey" | "dbsize" => all(db as u32, Mode::Shared),
                _ => {
                    if cmd.spec.writes_db.is_some_and(|f| f(args)) {
                        all(db as u32, Mode::Exclusive);
                    } else if cmd.spec.reads_db.is_some_and(|f| f(args)) {
                        all(db as u32, Mode::Shared);
                    }
                }
            }
            for_each_lock(cmd.spec, args, db, |d, key, mode| {
                plan[set.shard_of_key(key)].1.add_key(d, key, mode)
            });
        }
        // The watched keys too (shared): from the check of the watches to the end of the body,
        // nothing changes them — a blocked client that a write made ready and that would write one
        // (BRPOPLPUSH into a watched list) is served after the transaction, not between the check
        // and the body.
        if self.session.watch.is_some() {
            for (d, key) in &self.session.watched {
                plan[set.shard_of_key(key)]
                    .1
                    .add_key(*d as u32, key, Mode::Shared);
            }
        }
        plan.retain(|(_, locks)| !locks.is_empty());
        plan
    }
}
