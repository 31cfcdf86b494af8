//! Running the sub-batches a batch has collected, at a barrier or at its end, so that the
//! pipeline's commands take effect in the order sent as every other client sees them (the rules
//! are in [`super`]'s "Ordering"):
//! * one sub-batch runs in one go on its shard, with no lock;
//! * several run as one lock context: parts in ascending shard order, each keeping its locks until
//!   the last has run (two-phase locking); blocked clients are served between a part's commands
//!   only where the pipeline's order allows it ([`serve_limits`]);
//! * several that only read run without locks, checked by their keys' versions, and run again the
//!   locked way, quietly, if one moved ([`Batch::run_versioned`]);
//! * a transaction's body runs in atomic mode: each shard's part whole.
//!
//! Then a push that started a chain of moves across shards waits for the whole chain
//! ([`Batch::flush`]), so it answers as Redis serves the chain inside the push.

use strata_shard::{current_shard_id, new_owner, with_shard, LockId, ShardSet};

use super::shard_cmd::{ShardCmd, ShardReplies};
use super::spare;
use super::sub_batch::{run_free_on, run_free_on_as, run_locked_here, run_locked_on, Progress};
use super::{Batch, Pending};

/// How many reads across shards (read-only pipelines, lone multi-key reads) of a client take
/// locks at once after one that had to run again (see [`Batch::run_versioned`]).
pub(super) const LOCKED_READS_AFTER_FAILURE: u32 = 16;

impl Batch<'_> {
    /// Runs every pending sub-batch and waits for all replies, kept in `pending` order. One shard:
    /// its sub-batch runs in one go. Several: one lock context, parts in ascending shard order (see
    /// the module docs).
    ///
    /// When the run holds a transaction's body (EXEC without locks taken up front), it is flushed
    /// in *atomic* mode: each shard's part runs all at once or waits whole for its keys, so nothing
    /// interleaves with it.
    ///
    /// Each sub-batch may produce the replies the client's output limit still allows, less those
    /// the batch already has (see [`Progress`]); [`Batch::run`] closes a client that outgrew it.
    pub(super) async fn flush(&self, pending: &mut Vec<Pending>, done: &mut Vec<ShardReplies>) {
        if !pending.is_empty() {
            self.run_pending(pending, done).await;
        }
        // A push that started a chain of moves across shards answers, and lets anything after it
        // run, once the whole chain has moved, as Redis serves the chain inside the push (see
        // `strata_shard::chain`). One load when no move is in flight. Not while a transaction
        // holds its locks: no move can be claimed on a key it holds, so none is this client's.
        if self.session.txn_owner.is_none() {
            strata_shard::chain::moves_settled(self.session.info.id).await;
        }
    }

    /// [`flush`](Self::flush)'s sub-batches.
    ///
    /// Only the commonest path, one sub-batch on another shard, is awaited inline; every other is
    /// boxed where it is awaited. This future is part of each connection's task for its whole
    /// life, idle or not (see "Connection memory" in docs/architecture.md), and mimalloc serves
    /// blocks up to 1 KiB from its fastest path, so the boxes stay small.
    async fn run_pending(&self, pending: &mut Vec<Pending>, done: &mut Vec<ShardReplies>) {
        if pending.is_empty() {
            return;
        }
        if done.capacity() == 0 {
            *done = spare::take_done();
        }
        let budget = self
            .session
            .info
            .output_budget()
            .saturating_sub(done.iter().map(|r| r.buf.len()).sum());
        if pending.len() == 1 && !pending[0].whole {
            let p = pending.pop().expect("one sub-batch");
            let set = &self.state.shards;
            let txn = self.session.txn_owner;
            let replies = if Some(p.shard) == current_shard_id() {
                let r = Box::pin(Progress::new(budget).finish_free(set, &p.cmds, txn)).await;
                spare::give_cmds(p.cmds);
                r
            } else {
                run_free_on(set, p.shard, p.cmds, txn, budget).await
            };
            done.push(replies);
            return;
        }
        Box::pin(self.run_parts(pending, done, budget)).await;
    }

    /// [`run_pending`](Self::run_pending) for a transaction's body, or several sub-batches.
    async fn run_parts(
        &self,
        pending: &mut Vec<Pending>,
        done: &mut Vec<ShardReplies>,
        budget: usize,
    ) {
        let atomic = pending.iter().any(|p| p.whole);
        let set = &self.state.shards;
        let me = current_shard_id();
        let txn = self.session.txn_owner;
        if pending.len() == 1 {
            // One sub-batch here is a transaction's body (`run_pending` ran any other).
            let p = pending.pop().expect("one sub-batch");
            done.push(self.run_whole(p, budget).await);
            return;
        }
        if !atomic
            && txn.is_none()
            && pending
                .iter()
                .all(|p| p.cmds.iter().all(ShardCmd::reads_named_keys_only))
        {
            // After a failed check, the next few such pipelines take locks at once: a client
            // reading keys that are written all the time would otherwise run most of them twice.
            let skip = &self.session.locked_reads;
            if skip.get() > 0 {
                skip.set(skip.get() - 1);
            } else if let Some(replies) = Box::pin(self.run_versioned(pending, budget)).await {
                done.extend(replies);
                return;
            } else {
                skip.set(LOCKED_READS_AFTER_FAILURE);
            }
        }
        let owner = txn.unwrap_or_else(new_owner);
        // A pipeline's parts (not a transaction's body, nor a transaction holding its locks) let
        // blocked clients be served between their commands, as Redis does, but only after a
        // command that every earlier command of the pipeline has run before: parts run in shard
        // order, so a command of a later part may come first in the pipeline, and a client served
        // after a command that follows it could act on that command's effect before the earlier
        // command has run (the order the pipeline guarantees).
        let pipeline = !atomic && txn.is_none();
        let mut parts: Vec<Option<Pending>> = pending.drain(..).map(Some).collect();
        let mut order: Vec<usize> = (0..parts.len()).collect();
        order.sort_by_key(|&i| parts[i].as_ref().map_or(0, |p| p.shard));
        let mut results: Vec<Option<ShardReplies>> = (0..parts.len()).map(|_| None).collect();
        let mut held = Held {
            set,
            ids: Vec::with_capacity(parts.len()),
        };
        let firsts: Vec<u32> = order
            .iter()
            .map(|&i| {
                parts[i]
                    .as_ref()
                    .and_then(|p| p.cmds.first())
                    .map_or(u32::MAX, |c| c.seq)
            })
            .collect();
        let later_first = serve_limits(&firsts);
        for (k, &i) in order.iter().enumerate() {
            let Some(p) = parts[i].take() else { continue };
            let serve_until = pipeline.then_some(later_first[k]);
            // The last part runs like a lone sub-batch: each command waits until no other command
            // holds its keys, runs, and keeps nothing. That is the same as acquiring its locks
            // after every earlier part's and releasing them at once, which two-phase locking
            // allows (it only forbids acquiring after a release), without touching the lock table
            // when its keys are free.
            if k + 1 == order.len() {
                results[i] = Some(if atomic {
                    self.run_whole(p, budget).await
                } else if Some(p.shard) == me {
                    Progress::new(budget).finish_free(set, &p.cmds, txn).await
                } else {
                    run_free_on(set, p.shard, p.cmds, txn, budget).await
                });
                break;
            }
            let (id, replies) = if Some(p.shard) == me {
                run_locked_here(set, owner, &p.cmds, false, serve_until, budget).await
            } else {
                run_locked_on(set, p.shard, owner, p.cmds, false, serve_until, budget).await
            };
            held.ids.push((p.shard, id));
            results[i] = Some(replies);
        }
        held.release();
        done.extend(results.into_iter().flatten());
    }

    /// Runs the parts of a pipeline that only reads (every command
    /// [`reads_named_keys_only`](ShardCmd::reads_named_keys_only)) without locks: one after
    /// another as [`run_pending`](Self::run_pending) runs them, each but the last recording the
    /// versions of the keys it read; then checks, from this thread, that none of those moved
    /// (see `strata_shard::versions`). If none did, the replies are those of the whole pipeline
    /// run at the moment its last part ran, in the order sent, and they are returned in
    /// `pending`'s order. If one did, `pending` is left as it was, its commands marked
    /// [`quiet`](ShardCmd::quiet), to run again the locked way: what they count (calls, keyspace
    /// hits and misses, key-miss events) counts once.
    async fn run_versioned(
        &self,
        pending: &mut Vec<Pending>,
        budget: usize,
    ) -> Option<Vec<ShardReplies>> {
        let set = &self.state.shards;
        let me = current_shard_id();
        let mut order: Vec<usize> = (0..pending.len()).collect();
        order.sort_by_key(|&i| pending[i].shard);
        let mut results: Vec<Option<ShardReplies>> = (0..pending.len()).map(|_| None).collect();
        for (k, &i) in order.iter().enumerate() {
            let last = k + 1 == order.len();
            let p = if last {
                Progress::new(budget)
            } else {
                Progress::recording(budget, pending[i].cmds.len())
            };
            let shard = pending[i].shard;
            results[i] = Some(if Some(shard) == me {
                p.finish_free(set, &pending[i].cmds, None).await
            } else {
                let cmds = std::mem::take(&mut pending[i].cmds);
                let (replies, cmds) = run_free_on_as(set, shard, cmds, None, p).await;
                pending[i].cmds = cmds;
                replies
            });
        }
        let unchanged = order.iter().all(|&i| {
            let shard = pending[i].shard;
            match (
                &results[i].as_ref().and_then(|r| r.seen.as_ref()),
                set.versions(shard),
            ) {
                (Some(seen), Some(v)) => v.unchanged(seen),
                // The last part recorded nothing: it is the moment the others are checked at.
                (None, _) => true,
                (Some(_), None) => false,
            }
        });
        with_shard(|s| {
            s.stats.unlocked_reads += 1;
            s.stats.unlocked_reads_rerun += u64::from(!unchanged);
        });
        if !unchanged {
            for c in pending.iter_mut().flat_map(|p| p.cmds.iter_mut()) {
                c.quiet = true;
            }
            return None;
        }
        pending.clear();
        Some(results.into_iter().flatten().collect())
    }

    /// Runs a sub-batch of a transaction's body on its shard all at once: at once if no other
    /// command holds its keys, else once it holds all of them (then it releases them).
    async fn run_whole(&self, p: Pending, budget: usize) -> ShardReplies {
        let set = &self.state.shards;
        let owner = new_owner();
        if Some(p.shard) == current_shard_id() {
            run_locked_here(set, owner, &p.cmds, true, None, budget)
                .await
                .1
        } else {
            run_locked_on(set, p.shard, owner, p.cmds, true, None, budget)
                .await
                .1
        }
    }
}

/// For the parts of a multi-shard pipeline in the order they run, given the pipeline position of
/// each part's first command: the first pipeline position among the parts that run after each one.
/// A part may serve blocked clients after its commands that come before that position (see
/// [`Batch::flush`]).
fn serve_limits(firsts: &[u32]) -> Vec<u32> {
    let mut limits = vec![u32::MAX; firsts.len()];
    for k in (0..firsts.len().saturating_sub(1)).rev() {
        limits[k] = limits[k + 1].min(firsts[k + 1]);
    }
    limits
}

/// Locks kept by the parts of a multi-shard run until its last part has run; released (or, if the
/// run is dropped half-way, cancelled) on drop.
struct Held<'a> {
    set: &'a ShardSet,
    ids: Vec<(usize, LockId)>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        for (shard, id) in self.ids.drain(..) {
            self.set
                .post(shard, Box::new(move || with_shard(|s| s.locks.cancel(id))));
        }
    }
}

impl Held<'_> {
    fn release(mut self) {
        self.set.release_locks(std::mem::take(&mut self.ids));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_part_serves_only_before_the_first_command_of_a_later_part() {
        // Parts run in shard order; their first commands came at these pipeline positions.
        assert_eq!(serve_limits(&[0, 4, 2]), vec![2, 2, u32::MAX]);
        assert_eq!(serve_limits(&[3, 0]), vec![0, u32::MAX]);
        assert_eq!(serve_limits(&[0, 1, 2]), vec![1, 2, u32::MAX]);
        assert_eq!(serve_limits(&[7]), vec![u32::MAX]);
        assert!(serve_limits(&[]).is_empty());
    }
}
