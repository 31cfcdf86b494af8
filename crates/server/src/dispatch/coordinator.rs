//! The coordinator: a keyed command whose keys span shards (or are more than one message may
//! carry), run from the connection's task as a barrier.
//!
//! It takes intent locks on every key, shard by shard in ascending order (one lock context), runs
//! the command with its `on`/`scatter` calls becoming messages to the owning shards, and releases.
//! A read of a few keys first runs without locks, checked by its keys' versions, and runs again
//! the locked way only if a shard refused or a version moved ([`Batch::run_keys_as`]). A blocking
//! command that asks to park is parked on its keys' shards while its locks are still held, so no
//! write falls between its check and its parking.

use std::sync::Arc;

use bytes::Bytes;
use strata_node::table::Resolved;
use strata_node::{Flags, KeysCtx, KeysHandler, Park};
use strata_resp::ReplyBuf;
use strata_shard::{new_owner, now_us, with_shard, LockSet, Mode, Parked};

use super::pipeline::LOCKED_READS_AFTER_FAILURE;
use super::shard_cmd::for_each_lock;
use super::stats::{record, record_logged, reply_error};
use super::Batch;

impl Batch<'_> {
    /// Runs a keyed command whose keys span shards: intent locks on every key (shard by shard, in
    /// ascending order), the command with its parts sent to the owning shards, then release.
    pub(super) async fn run_keys(
        &mut self,
        cmd: &Resolved,
        args: &[Bytes],
        f: KeysHandler,
        out: &mut ReplyBuf,
    ) {
        if cmd.spec.flags.has(Flags::READONLY)
            && strata_node::services::tracking::tracks_reads(self.session)
        {
            self.remember_reads(cmd, args).await;
        }
        let owner = self.session.txn_owner.unwrap_or_else(new_owner);
        self.run_keys_as(cmd, args, f, out, owner, None).await;
    }

    /// CLIENT TRACKING for a read command whose keys span shards: its keys are remembered on their
    /// shards before it runs (a write between the read and a later remembering would be missed; one
    /// before the read only costs a spurious invalidation).
    async fn remember_reads(&self, cmd: &Resolved, args: &[Bytes]) {
        let shards = &self.state.shards;
        let mut per: Vec<Vec<Bytes>> = vec![Vec::new(); shards.len()];
        cmd.spec.for_each_key(args, |i, _| {
            per[shards.shard_of_key(&args[i])].push(args[i].clone())
        });
        let id = self.session.info.id;
        for (shard, keys) in per.into_iter().enumerate() {
            if !keys.is_empty() {
                shards
                    .call(shard, move |_| {
                        strata_shard::tracking::remember(id, keys.iter().map(|k| &k[..]))
                    })
                    .await;
            }
        }
    }

    /// [`run_keys`](Self::run_keys) for `owner`; with `parked`, a blocking command that asks to park
    /// is parked on its keys' shards while its locks are still held (so no write falls between its
    /// check and its parking), and what it parked on is returned.
    pub(super) async fn run_keys_as(
        &mut self,
        cmd: &Resolved,
        args: &[Bytes],
        f: KeysHandler,
        out: &mut ReplyBuf,
        owner: strata_shard::Owner,
        parked: Option<&Arc<Parked>>,
    ) -> Option<Park> {
        let start = now_us();
        let db = self.session.db;
        let set = &self.state.shards;
        let mut plan: Vec<(usize, LockSet)> = Vec::new();
        let mut nkeys = 0;
        for_each_lock(cmd.spec, args, db, |d, key, mode| {
            nkeys += 1;
            let shard = set.shard_of_key(key);
            let i = match plan.iter().position(|(s, _)| *s == shard) {
                Some(i) => i,
                None => {
                    plan.push((shard, LockSet::new()));
                    plan.len() - 1
                }
            };
            plan[i].1.add_key(d, key, mode);
        });
        let whole_db = if cmd.spec.writes_db.is_some_and(|f| f(args)) {
            Some(Mode::Exclusive)
        } else if cmd.spec.reads_db.is_some_and(|f| f(args)) {
            Some(Mode::Shared)
        } else {
            None
        };
        if let Some(mode) = whole_db {
            for shard in 0..set.len() {
                if !plan.iter().any(|(s, _)| *s == shard) {
                    plan.push((shard, LockSet::new()));
                }
            }
            for (_, locks) in plan.iter_mut() {
                locks.add_db(db as u32, mode);
            }
        }
        plan.sort_by_key(|(s, _)| *s);
        let lowest = plan.first().map(|(s, _)| *s);
        let databases = self.state.config.get_i64("databases").max(1) as usize;
        // A read of a few keys on several shards (MGET, EXISTS, SUNION…), outside a transaction:
        // first read each shard without locks, recording its keys' versions, one round trip in all
        // (see `strata_shard::multi::Optimistic::unlocked`); the ordinary way below if a shard
        // refuses (a lock of another command on its keys) or a version moved meanwhile.
        let skip = &self.session.locked_reads;
        let mut quiet = Vec::new();
        if parked.is_none()
            && whole_db.is_none()
            && plan.len() > 1
            && nkeys <= strata_node::keyed::SLICE
            && cmd.spec.flags.has(Flags::READONLY)
            && self.session.txn_owner.is_none()
            && (skip.get() == 0 || {
                // After a failed attempt, the next few reads take locks at once (see
                // `run_pending`).
                skip.set(skip.get() - 1);
                false
            })
        {
            // A lock still held here may belong to a command whose reply this client has seen,
            // its release waiting in this thread's inbox: run that first rather than abandon the
            // attempt over it (and pay for the read twice).
            if !with_shard(|s| s.locks.is_idle()) {
                strata_shard::set::run_inbox_now();
            }
            let mut opt = strata_shard::multi::Optimistic::unlocked(set);
            let failed = std::cell::Cell::new(false);
            let mark = out.buf.len();
            let mut cx = KeysCtx::tentative(
                &mut opt,
                plan.clone(),
                &failed,
                db,
                args,
                out,
                start / 1000,
                databases,
            );
            let result = strata_node::keyed::run_tentatively(f, &mut cx, &failed).await;
            drop(cx);
            // Where it read, it counted: a rerun counts nothing there, whether a version moved
            // or another shard refused.
            quiet = opt.shards_read();
            let unchanged = opt.release();
            with_shard(|s| {
                s.stats.unlocked_reads += 1;
                s.stats.unlocked_reads_rerun += u64::from(result.is_none() || !unchanged);
            });
            if let Some(result) = result.filter(|_| unchanged) {
                let error = reply_error(out, result).map(|at| &out.buf[at..]);
                record_logged(cmd, args, &self.session.info, start, error);
                return None;
            }
            skip.set(LOCKED_READS_AFTER_FAILURE);
            out.buf.truncate(mark);
        }
        let lock = set.lock_plan(owner, plan).await;
        let mut cx = KeysCtx::across(&lock, db, args, out, start / 1000, databases);
        cx.woken = parked.is_some_and(|p| p.was_woken());
        cx.quiet = quiet;
        let result = f(&mut cx).await;
        let mut park = cx.park.take();
        if strata_shard::propagate::on() && park.is_none() {
            // Numbered here, while its locks are held: one record for the whole command.
            let o = std::mem::take(&mut cx.prop);
            let (txn, pos) = (self.session.prop_txn, self.session.prop_pos);
            o.record_at(db as u32, txn, pos, args, lock.changed());
        }
        // A woken attempt may hold a reservation on its lowest shard (see `strata_shard::park`):
        // done with it now, whether it parks again or was served.
        let reserved = parked.filter(|p| p.was_woken()).and(lowest);
        match (&park, parked) {
            (Some(pk), Some(p)) => {
                if p.record(db, &pk.keys) {
                    for key in pk.keys.clone() {
                        let p = p.clone();
                        lock.run(set.shard_of_key(&key), move |s| s.park(db, &key, p))
                            .await;
                    }
                }
            }
            (Some(pk), None) => {
                pk.no_block.write(out);
                park = None;
            }
            (None, Some(p)) => p.finish(),
            (None, None) => {}
        }
        if let Some(lead) = reserved {
            lock.run(lead, move |s| s.unreserve(owner)).await;
        }
        lock.release();
        let error = reply_error(out, result).map(|at| &out.buf[at..]);
        if park.is_none() {
            record_logged(cmd, args, &self.session.info, start, error);
        } else {
            record(cmd, start, error);
        }
        park
    }
}
