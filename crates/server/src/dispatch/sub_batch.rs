//! Running one sub-batch (the key commands of a batch bound for one shard) on its shard: in place
//! when it is this thread's, else as one message there and one back.
//!
//! Two ways, as the pipeline asks ([`super::pipeline`]):
//! * *free*, outside any lock context ([`Progress::finish_free`], [`run_free_on`]): the commands
//!   run in order while no lock of another command stands on their keys; one that meets such a
//!   lock waits for it (this task parks, never the thread) and the commands behind it wait with
//!   it;
//! * *locked*, as one part of a lock context ([`run_locked_here`], [`run_locked_on`]): the part
//!   takes the locks of all its keys for the context's owner, waiting if needed, runs all its
//!   commands, and keeps the locks unless it is told to release them.
//!
//! A sub-batch's replies go to one buffer ([`Progress`]), which stops keeping them once they pass
//! the client's output budget. Commands sent to another shard come back with their replies, to be
//! freed on the thread that allocated them.

use futures_channel::oneshot;
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::versions::Seen;
use strata_shard::{
    current_shard_id, new_owner, with_shard, Grant, LockId, LockSet, Owner, Shard, ShardSet,
};

use super::shard_cmd::{ShardCmd, ShardReplies};
use super::spare;
use strata_node::Park;

/// A sub-batch being run: replies so far and the next command.
pub(super) struct Progress {
    out: Vec<u8>,
    ends: Vec<usize>,
    next: usize,
    park: Option<Park>,
    /// Reply bytes the client may still be sent (its `client-output-buffer-limit` hard limit, less
    /// what it has not read yet; `usize::MAX` without one). Past it the client is closed, as
    /// Redis closes it: the commands still run (a transaction's body is never cut), but their
    /// replies are dropped instead of kept, so a pipeline of huge replies cannot grow memory.
    budget: usize,
    overflow: bool,
    /// Recording the versions of the keys read (a part of a read-only pipeline, see
    /// [`Batch::run_versioned`](super::Batch::run_versioned)).
    seen: Option<Seen>,
}

impl Progress {
    pub(super) fn new(budget: usize) -> Progress {
        let (out, ends) = spare::take_replies();
        Progress {
            out,
            ends,
            next: 0,
            park: None,
            budget,
            overflow: false,
            seen: None,
        }
    }

    /// A [`Progress`] that records the versions of the keys its `n` commands read.
    pub(super) fn recording(budget: usize, n: usize) -> Progress {
        Progress {
            // A key each, most of the time: no growing on the way.
            seen: Some(Seen {
                keys: Vec::with_capacity(n),
                ..Seen::default()
            }),
            ..Progress::new(budget)
        }
    }

    /// Runs `cmd` on `s`, its reply going to `out`.
    #[inline]
    fn exec(&mut self, s: &mut Shard, cmd: &ShardCmd, out: &mut ReplyBuf) {
        self.park = cmd.exec(s, out);
        self.end_reply(&mut out.buf);
        if self.seen.is_some() {
            self.record(s, cmd);
        }
    }

    /// Records the versions of the keys `cmd` read (see [`Progress::seen`]).
    #[inline(never)]
    fn record(&mut self, s: &Shard, cmd: &ShardCmd) {
        if let (Some(seen), Some(v)) = (&mut self.seen, s.versions()) {
            cmd.record_versions(v, seen);
        }
    }

    /// How long the sub-batch's reply buffer may grow before the client is closed (see
    /// [`ReplyBuf::room`]).
    fn room(&self) -> Option<usize> {
        match (self.overflow, self.budget) {
            (true, _) => Some(0),
            (false, usize::MAX) => None,
            (false, b) => Some(b),
        }
    }

    /// Records where the reply just written to `out` ends, dropping every reply once they add up
    /// to more than the budget.
    fn end_reply(&mut self, out: &mut Vec<u8>) {
        if self.overflow || out.len() > self.budget {
            if !self.overflow {
                self.overflow = true;
                self.ends.iter_mut().for_each(|e| *e = 0);
            }
            out.clear();
        }
        self.ends.push(out.len());
    }

    /// Runs commands on `s` from `next` on while nothing locked (by another owner than `owner`)
    /// stands in their way. True if all ran.
    fn run_free(&mut self, s: &mut Shard, cmds: &[ShardCmd], owner: Option<Owner>) -> bool {
        if self.next == 0 {
            prefetch(s, cmds);
            self.reserve(cmds.len());
            if let (Some(seen), Some(v)) = (&mut self.seen, s.versions()) {
                seen.epoch = v.epoch();
            }
        }
        let mut out = ReplyBuf::new(Protocol::Resp2);
        out.buf = std::mem::take(&mut self.out);
        out.room = self.room();
        while let Some(cmd) = cmds.get(self.next) {
            if !cmd.may_run(&s.locks, owner) {
                break;
            }
            self.exec(s, cmd, &mut out);
            self.next += 1;
        }
        self.out = out.buf;
        self.next == cmds.len()
    }

    /// Room for `n` replies of a typical size, so a sub-batch's buffers grow at most rarely.
    fn reserve(&mut self, n: usize) {
        self.ends.reserve(n);
        self.out.reserve(n * 16);
    }

    /// Runs all of `cmds` on `s` (their locks are held by the caller's lock context). Blocked
    /// clients whose keys they write are served after all of them (see [`Shard::hold_serving`]),
    /// or, with `between` (a pipeline's part, run by that owner, and a position in the pipeline),
    /// after each command that comes before that position, as Redis serves them between a
    /// pipeline's commands (see [`Shard::serve_between`] and
    /// [`Batch::flush`](super::Batch::flush)).
    fn run_all(&mut self, s: &mut Shard, cmds: &[ShardCmd], between: Option<(Owner, u32)>) {
        let prev = s.serve_between(between.map(|(owner, _)| owner));
        let held = s.hold_serving(between.is_none());
        let until = between.map_or(0, |(_, until)| until);
        prefetch(s, cmds);
        self.reserve(cmds.len());
        let mut out = ReplyBuf::new(Protocol::Resp2);
        out.buf = std::mem::take(&mut self.out);
        out.room = self.room();
        for cmd in cmds {
            if cmd.seq >= until && s.serving_between().is_some() {
                // A command of a later part comes before this one in the pipeline: from here on,
                // serve after the part, as for a transaction's.
                s.serve_between(None);
                s.hold_serving(true);
            }
            self.park = cmd.exec(s, &mut out);
            self.end_reply(&mut out.buf);
        }
        self.next = cmds.len();
        self.out = out.buf;
        s.hold_serving(held);
        s.serve_between(prev);
    }

    /// Runs the rest of `cmds` on this thread's shard outside any lock context: a command whose keys
    /// another command holds waits for them (this task parks, the thread does not), and the commands
    /// behind it wait with it.
    /// Inside a transaction (`owner`), its own locks stand in nobody's way.
    pub(super) async fn finish_free(
        mut self,
        set: &ShardSet,
        cmds: &[ShardCmd],
        owner: Option<Owner>,
    ) -> ShardReplies {
        while !with_shard(|s| self.run_free(s, cmds, owner)) {
            let cmd = &cmds[self.next];
            let id = acquire_here(set, owner.unwrap_or_else(new_owner), cmd.lock_set()).await;
            with_shard(|s| {
                let mut out = ReplyBuf::new(Protocol::Resp2);
                out.buf = std::mem::take(&mut self.out);
                out.room = self.room();
                self.exec(s, cmd, &mut out);
                self.out = out.buf;
                s.locks.release(id);
            });
            self.next += 1;
        }
        self.done()
    }

    fn done(self) -> ShardReplies {
        ShardReplies {
            buf: self.out,
            ends: self.ends,
            park: self.park,
            overflow: self.overflow,
            seen: self.seen,
        }
    }
}

/// Prefetches the table buckets, then the entries, of the commands' first keys, so a sub-batch pays
/// its cache misses in parallel rather than one after another.
fn prefetch(s: &mut Shard, cmds: &[ShardCmd]) {
    if cmds.len() < 2 {
        return;
    }
    for c in cmds {
        if let Some(k) = c.first_key() {
            s.db(c.db).prefetch_bucket(k);
        }
    }
    for c in cmds {
        if let Some(k) = c.first_key() {
            s.db(c.db).prefetch_entry(k);
        }
    }
}

/// Withdraws a lock request if the task waiting for it is dropped before taking it over.
struct Waiting<'a> {
    set: &'a ShardSet,
    id: Option<LockId>,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let (Some(id), Some(me)) = (self.id, current_shard_id()) {
            // Posted, not run inline: a drop may happen inside `with_shard`.
            self.set
                .post(me, Box::new(move || with_shard(|s| s.locks.cancel(id))));
        }
    }
}

/// Takes `set` for `owner` on this thread's shard, parking this task until it is granted.
async fn acquire_here(shards: &ShardSet, owner: Owner, set: LockSet) -> LockId {
    let (tx, rx) = oneshot::channel::<()>();
    let (id, grant) = with_shard(|s| {
        s.locks.acquire(
            owner,
            set,
            Box::new(move || {
                let _ = tx.send(());
            }),
        )
    });
    if grant == Grant::Queued {
        let mut waiting = Waiting {
            set: shards,
            id: Some(id),
        };
        // The sender sits in the lock table until the grant or a cancel; it is never dropped unfired.
        let _ = rx.await;
        waiting.id = None;
    }
    id
}

/// The lock set of every command of a sub-batch.
fn batch_lock_set(cmds: &[ShardCmd]) -> LockSet {
    // Most commands lock one key; the items' list takes the databases too, in the same room.
    let mut set = LockSet::with_capacity(cmds.len());
    for c in cmds {
        c.add_locks(&mut set);
    }
    set
}

/// Runs a sub-batch on this thread's shard as one part of a lock context: takes the locks of all its
/// keys for `owner` (waiting if needed), runs it, and keeps the locks unless `release`. A
/// `pipeline` part (not a transaction's) lets blocked clients be served between its commands that
/// come before that position of the pipeline (see [`Batch::flush`](super::Batch::flush)).
pub(super) async fn run_locked_here(
    set: &ShardSet,
    owner: Owner,
    cmds: &[ShardCmd],
    release: bool,
    pipeline: Option<u32>,
    budget: usize,
) -> (LockId, ShardReplies) {
    if release {
        if let Some(r) = with_shard(|s| run_if_free(s, cmds, owner, budget)) {
            return (0, r);
        }
    }
    let id = acquire_here(set, owner, batch_lock_set(cmds)).await;
    let between = pipeline.map(|until| (owner, until));
    (
        id,
        with_shard(|s| run_part(s, cmds, id, release, between, budget)),
    )
}

/// [`run_locked_here`] on another shard: one message there, one back. The commands come back
/// with the replies, to be dropped (their arguments freed) on the thread that allocated them.
pub(super) async fn run_locked_on(
    set: &ShardSet,
    shard: usize,
    owner: Owner,
    cmds: Vec<ShardCmd>,
    release: bool,
    pipeline: Option<u32>,
    budget: usize,
) -> (LockId, ShardReplies) {
    let between = pipeline.map(|until| (owner, until));
    let (tx, rx) = oneshot::channel();
    let origin = current_shard_id();
    let shards = set.clone();
    set.post(
        shard,
        Box::new(move || {
            if release {
                if let Some(r) = with_shard(|s| run_if_free(s, &cmds, owner, budget)) {
                    shards.reply(origin, tx, (0, r, cmds));
                    return;
                }
            }
            let lock_set = batch_lock_set(&cmds);
            let (gtx, grx) = oneshot::channel::<()>();
            let ran = with_shard(|s| {
                let (id, grant) = s.locks.acquire(
                    owner,
                    lock_set,
                    Box::new(move || {
                        let _ = gtx.send(());
                    }),
                );
                if grant == Grant::Queued {
                    return Err(id);
                }
                Ok((id, run_part(s, &cmds, id, release, between, budget)))
            });
            match ran {
                Ok((id, replies)) => shards.reply(origin, tx, (id, replies, cmds)),
                Err(id) => {
                    strata_rt::spawn(async move {
                        let _ = grx.await;
                        let replies =
                            with_shard(|s| run_part(s, &cmds, id, release, between, budget));
                        shards.reply(origin, tx, (id, replies, cmds));
                    });
                }
            }
        }),
    );
    let (id, replies, cmds) = rx
        .await
        .expect("shard thread exited with a sub-batch pending");
    spare::give_cmds(cmds);
    (id, replies)
}

/// Runs all of `cmds` at once if, for `owner`, no other command holds or awaits any of their keys
/// (then taking and releasing their locks would change nothing: `owner`'s request would be granted
/// at once); None if one does. `owner` may hold locks here: a woken parked command's reservation.
fn run_if_free(
    s: &mut Shard,
    cmds: &[ShardCmd],
    owner: Owner,
    budget: usize,
) -> Option<ShardReplies> {
    if !s.locks.is_idle() && !cmds.iter().all(|c| c.may_run(&s.locks, Some(owner))) {
        return None;
    }
    let mut p = Progress::new(budget);
    p.run_all(s, cmds, None);
    Some(p.done())
}

/// Runs a part of a lock context whose locks (`id`) are held: all of `cmds`, then the release of
/// `id` if `release`.
fn run_part(
    s: &mut Shard,
    cmds: &[ShardCmd],
    id: LockId,
    release: bool,
    between: Option<(Owner, u32)>,
    budget: usize,
) -> ShardReplies {
    let mut p = Progress::new(budget);
    p.run_all(s, cmds, between);
    if release {
        s.locks.release(id);
    }
    p.done()
}

/// A sub-batch on another shard, outside any lock context: one message there, one back.
pub(super) async fn run_free_on(
    set: &ShardSet,
    shard: usize,
    cmds: Vec<ShardCmd>,
    owner: Option<Owner>,
    budget: usize,
) -> ShardReplies {
    let (replies, cmds) = run_free_on_as(set, shard, cmds, owner, Progress::new(budget)).await;
    spare::give_cmds(cmds);
    replies
}

/// [`run_free_on`] starting from `p` (which may record versions), giving the commands back.
pub(super) async fn run_free_on_as(
    set: &ShardSet,
    shard: usize,
    cmds: Vec<ShardCmd>,
    owner: Option<Owner>,
    mut p: Progress,
) -> (ShardReplies, Vec<ShardCmd>) {
    let (tx, rx) = oneshot::channel();
    let origin = current_shard_id();
    let shards = set.clone();
    set.post(
        shard,
        Box::new(move || {
            if with_shard(|s| p.run_free(s, &cmds, owner)) {
                shards.reply(origin, tx, (p.done(), cmds));
            } else {
                // A key is locked by another command: become a task that waits for it.
                strata_rt::spawn(async move {
                    let replies = p.finish_free(&shards, &cmds, owner).await;
                    shards.reply(origin, tx, (replies, cmds));
                });
            }
        }),
    );
    rx.await
        .expect("shard thread exited with a sub-batch pending")
}
