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

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures_channel::oneshot;
use strata_commands::table;
use strata_node::clients::UNBLOCK_ERROR;
use strata_node::keyed::{run_here, SLICE};
use strata_node::services::connection::is_authenticated;
use strata_node::services::latency;
use strata_node::services::monitor;
use strata_node::services::multi;
use strata_node::services::pubsub;
use strata_node::services::slowlog;
use strata_node::table::{AsyncHandler, CommandSpec, Resolved};
use strata_node::{
    run_shard_handler, ClientInfo, CmdResult, ConnCtx, Flags, Handler, KeyAccess, KeysCtx,
    KeysHandler, Lookup, Park, Queued, ReplyMode, ServerState, Session, ShardCtx,
};
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::versions::{Seen, Versions};
use strata_shard::{
    current_shard_id, new_owner, notify, now_ms, now_us, with_shard, Grant, LockId, LockSet,
    LockTable, Mode, Owner, Parked, Served, Shard, ShardSet,
};

type ShardHandler = fn(&mut ShardCtx<'_>) -> CmdResult;
type ConnHandler = fn(&mut ConnCtx<'_>) -> CmdResult;

/// How a key command runs on its shard.
#[derive(Clone, Copy)]
enum Run {
    Shard(ShardHandler),
    Keys(KeysHandler),
}

/// One key command on its way to (or running on) its shard.
#[derive(Clone)]
pub struct ShardCmd {
    args: Vec<Bytes>,
    cmd: Resolved,
    run: Run,
    db: usize,
    proto: Protocol,
    /// Set for a blocking command run by [`Batch::run_blocking`]: it may park (see
    /// `strata_shard::park`). Without it, a command that would park answers its timeout reply.
    parked: Option<Arc<Parked>>,
    /// The client of a blocking command (set with `parked`): its shard, serving it, checks that
    /// the client is still there.
    info: Option<Arc<ClientInfo>>,
    /// The client's id (CLIENT TRACKING NOLOOP needs who modified a key).
    client: u64,
    /// Remember its keys for the client's CLIENT TRACKING (a read command of a tracking client).
    track: bool,
    /// Index of its first key argument (0: it has none), for prefetching.
    key: usize,
    /// Its position in the pipeline batch it came in (see [`Batch::flush`]'s serving rule).
    seq: u32,
    /// Counted as a call in INFO commandstats: false for the parts of a split command but its
    /// first (see [`Batch::split`]).
    counted: bool,
    /// A read run again after its first run was discarded (see [`Batch::run_versioned`]): it
    /// counts nowhere (calls, time, keyspace hits and misses, key-miss events, slow log), as its
    /// first run counted.
    quiet: bool,
}

/// Replies of a sub-batch: one buffer, and where each command's reply ends in it.
#[derive(Default)]
pub struct ShardReplies {
    buf: Vec<u8>,
    ends: Vec<usize>,
    /// A blocking command that parked instead of replying (its reply is empty).
    park: Option<Park>,
    /// The key versions its commands read, when they were recorded (see [`Batch::run_versioned`]).
    seen: Option<Seen>,
    /// The replies outgrew the client's output budget and were dropped (see [`Progress`]).
    overflow: bool,
}

/// Calls `f(db, key, mode)` for every key `args` touches in database `db`: its key arguments
/// (exclusive for write commands, shared otherwise), and the key MOVE or COPY … DB writes in
/// another database.
fn for_each_lock(
    spec: &CommandSpec,
    args: &[Bytes],
    db: usize,
    mut f: impl FnMut(u32, &Bytes, Mode),
) {
    spec.for_each_key(args, |i, access| {
        let mode = match access {
            KeyAccess::Read => Mode::Shared,
            KeyAccess::Write => Mode::Exclusive,
        };
        f(db as u32, &args[i], mode)
    });
    let other = spec.other_db_key.and_then(|o| o(args));
    if let Some((other, i)) = other.filter(|(other, _)| *other != db) {
        if let Some(key) = args.get(i) {
            f(other as u32, key, Mode::Exclusive);
        }
    }
}

impl ShardCmd {
    fn add_locks(&self, set: &mut LockSet) {
        for_each_lock(self.cmd.spec, &self.args, self.db, |db, key, mode| {
            set.add_key(db, key, mode)
        });
    }

    /// True if it only reads, and only the keys it names: a pipeline of such commands may run
    /// without locks, checking the keys' versions instead (see [`Batch::run_versioned`]).
    fn reads_named_keys_only(&self) -> bool {
        let spec = self.cmd.spec;
        spec.flags.has(Flags::READONLY)
            && !spec.flags.has(Flags::WRITE)
            && self.parked.is_none()
            && spec.other_db_key.is_none()
            && !spec.reads_db.is_some_and(|f| f(&self.args))
            && !spec.writes_db.is_some_and(|f| f(&self.args))
    }

    /// Records the versions of the keys it read (right after it ran, on its shard).
    fn record_versions(&self, versions: &Versions, seen: &mut Seen) {
        for_each_lock(self.cmd.spec, &self.args, self.db, |db, key, _| {
            versions.record(db, key, seen)
        });
    }

    fn lock_set(&self) -> LockSet {
        let mut set = LockSet::new();
        self.add_locks(&mut set);
        set
    }

    /// True if no lock held or requested by another command stands in the way (outside any lock
    /// context). One branch when the shard's lock table is idle, as it almost always is.
    fn may_run(&self, locks: &LockTable, owner: Option<Owner>) -> bool {
        if locks.is_idle() {
            return true;
        }
        let mut free = true;
        for_each_lock(self.cmd.spec, &self.args, self.db, |db, key, mode| {
            free = free && locks.may_run(owner, db, key, mode)
        });
        free
    }

    /// [`may_run`](Self::may_run) for a parked command of `owner` served between the commands of
    /// `host`'s pipeline part (see `Shard::serve_between`).
    fn may_run_between(&self, locks: &LockTable, owner: Owner, host: Owner) -> bool {
        if locks.is_idle() {
            return true;
        }
        let mut free = true;
        for_each_lock(self.cmd.spec, &self.args, self.db, |db, key, mode| {
            free = free && locks.may_run_between(owner, host, db, key, mode)
        });
        free
    }

    fn first_key(&self) -> Option<&[u8]> {
        (self.key > 0).then(|| &self.args[self.key][..])
    }

    /// Runs the command on `shard`, appending its reply to `out` and counting it. Returns what a
    /// blocking command parked on instead of replying.
    fn exec(&self, shard: &mut Shard, out: &mut ReplyBuf) -> Option<Park> {
        if self.parked.as_ref().is_some_and(|p| p.is_done()) {
            // Its shard served it meanwhile (its task takes the reply from the `Parked`).
            return None;
        }
        out.proto = self.proto;
        let reply_at = out.buf.len();
        let start = now_us();
        let now = start / 1000;
        // A command run inside another (a parked command served after it) runs on its behalf:
        // the moves it claims are the outer command's client's to wait for.
        let outer = shard.running_client;
        if outer == 0 {
            shard.running_client = self.client;
        }
        let tracking = strata_shard::tracking::active() != 0;
        if tracking {
            strata_shard::tracking::begin_command(self.client);
        }
        let mut run = |shard: &mut Shard| match self.run {
            Run::Shard(handler) => {
                let mut cx = ShardCtx {
                    shard,
                    db: self.db,
                    args: &self.args,
                    out: &mut *out,
                    now,
                    park: None,
                };
                let failed = run_shard_handler(handler, &mut cx);
                (failed, cx.park.take())
            }
            Run::Keys(handler) => {
                let mut cx = KeysCtx::here(shard, self.db, &self.args, &mut *out, now);
                cx.woken = self.parked.as_ref().is_some_and(|p| p.was_woken());
                let r = run_here(handler, &mut cx);
                let park = cx.park.take();
                match r {
                    Ok(()) => (false, park),
                    Err(e) => {
                        out.error(&e.message());
                        (true, None)
                    }
                }
            }
        };
        let (failed, park) = if self.quiet {
            shard.quietly(run)
        } else {
            run(shard)
        };
        if tracking {
            strata_shard::tracking::end_command();
            if self.track {
                let args = &self.args;
                let mut keys: Vec<&[u8]> = Vec::new();
                self.cmd.spec.for_each_key(args, |i, _| keys.push(&args[i]));
                strata_shard::tracking::remember(self.client, keys);
            }
        }
        let park = self.settle_park(shard, park, out);
        // Its own time, without the blocked clients it serves next (as Redis times `call()`).
        let usec = (now_us() - start).max(0) as u64;
        if slowlog::logs(usec) && park.is_none() && !self.quiet {
            self.log_slow(usec);
        }
        // A parked command woken by this one runs before the next command on its key (Redis
        // serves blocked clients right after the command that made their key ready).
        shard.serve_ready();
        shard.running_client = outer;
        if self.quiet {
            return park;
        }
        let stats = &mut shard.stats;
        stats.commands += u64::from(self.counted);
        let st = stats.cmd_mut(self.cmd.id);
        st.calls += u64::from(self.counted);
        st.usec += usec;
        st.failed_calls += failed as u64;
        if failed {
            stats.count_error(&out.buf[reply_at.min(out.buf.len())..]);
        }
        if self.counted && park.is_none() {
            stats.record_latency(self.cmd.id, usec);
            latency::command_sample(self.cmd.spec, usec);
        }
        park
    }

    /// Logs the command in SLOWLOG (it ran for `usec`, long enough), with its client's address and
    /// name as they are now. A part of a split command is logged as the command it ran here.
    #[cold]
    fn log_slow(&self, usec: u64) {
        let (addr, name) = match &self.info {
            Some(info) => client_label(info),
            None => {
                // The map's lock is released before the client's name is read.
                let client = THREAD_STATE.with(|st| {
                    let st = st.get()?;
                    let clients = st.clients.lock().unwrap_or_else(|e| e.into_inner());
                    clients.get(&self.client).cloned()
                });
                client.map(|c| client_label(&c)).unwrap_or_default()
            }
        };
        slowlog::push(self.cmd.spec, &self.args, usec, &addr, name, now_ms());
    }

    /// After a command ran on `shard` (which owns all its keys): parks it if it asked to and may,
    /// answers its timeout reply if it may not, and withdraws it from its queues once served.
    fn settle_park(
        &self,
        shard: &mut Shard,
        park: Option<Park>,
        out: &mut ReplyBuf,
    ) -> Option<Park> {
        let Some(p) = &self.parked else {
            if let Some(park) = park {
                park.no_block.write(out);
            }
            return None;
        };
        match &park {
            Some(park) => {
                if p.record(self.db, &park.keys) {
                    for key in &park.keys {
                        shard.park(self.db, key, p.clone());
                    }
                    if let Some(info) = self.info.clone().filter(|_| p.single_shard()) {
                        p.set_runner(self.runner(info));
                    }
                }
            }
            None => {
                // Served (or failed): leave every queue now, so the next in line gets its turn in
                // this same shard turn. One whose keys span shards is withdrawn from all of them
                // by its task (its `Leave`); the queues here skip it meanwhile, as it is finished.
                p.finish();
                if !p.single_shard() {
                    shard.unreserve(p.owner());
                    return park;
                }
                if let Some((db, keys)) = p.withdraw() {
                    for key in &keys {
                        shard.unpark(db, key, p);
                    }
                }
            }
        }
        shard.unreserve(p.owner());
        park
    }

    /// How the shard serves this parked command in its own turn once a key it waits for is
    /// written (see `strata_shard::park`): unless its client is gone or another command's lock
    /// stands in the way, it runs as its owner and its reply is kept for its task.
    fn runner(&self, info: Arc<ClientInfo>) -> strata_shard::Runner {
        serve_on(vec![(usize::MAX, self.clone())], info)
    }
}

/// A [`strata_shard::Runner`] serving a parked command with the command of `cmds` that belongs to
/// the shard it runs on (`usize::MAX`: any shard; a command whose keys all live on one). A command
/// whose keys span shards gets one per shard, each over that shard's keys only (see
/// [`strata_node::table::CommandSpec::per_key`]); a shard without one wakes its task.
fn serve_on(mut cmds: Vec<(usize, ShardCmd)>, info: Arc<ClientInfo>) -> strata_shard::Runner {
    for (_, cmd) in &mut cmds {
        // The `Parked` holds the runner: the command gets it back as an argument, not a cycle.
        cmd.parked = None;
    }
    Box::new(move |shard: &mut Shard, p: &Arc<Parked>| {
        let id = shard.id;
        let Some((_, cmd)) = cmds.iter_mut().find(|(s, _)| *s == id || *s == usize::MAX) else {
            return Served::Gone;
        };
        let free = match shard.serving_between() {
            Some(host) => cmd.may_run_between(&shard.locks, p.owner(), host),
            None => cmd.may_run(&shard.locks, Some(p.owner())),
        };
        if !free {
            return Served::Busy;
        }
        if peer_gone(&info) {
            return Served::Gone;
        }
        p.set_retried();
        cmd.parked = Some(p.clone());
        let mut out = ReplyBuf::new(cmd.proto);
        // Room for a typical blocking reply, so writing it does not grow the buffer twice.
        out.buf = Vec::with_capacity(64);
        let park = cmd.exec(shard, &mut out);
        cmd.parked = None;
        if park.is_some() {
            return Served::Parked;
        }
        // No longer blocked from now on (INFO, CLIENT LIST, CLIENT UNBLOCK), as in Redis.
        info.unblockable.store(false, Ordering::Release);
        info.blocked.store(false, Ordering::Relaxed);
        Served::Replied(out.buf)
    })
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

/// How many reads across shards (read-only pipelines, lone multi-key reads) of a client take
/// locks at once after one that had to run again (see [`Batch::run_versioned`]).
const LOCKED_READS_AFTER_FAILURE: u32 = 16;

/// A sub-batch being run: replies so far and the next command.
struct Progress {
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
    /// [`Batch::run_versioned`]).
    seen: Option<Seen>,
}

impl Progress {
    fn new(budget: usize) -> Progress {
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
    fn recording(budget: usize, n: usize) -> Progress {
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
    /// pipeline's commands (see [`Shard::serve_between`] and [`Batch::flush`]).
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
    async fn finish_free(
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

/// Runs a sub-batch on this thread's shard as one part of a lock context: takes the locks of all its
/// keys for `owner` (waiting if needed), runs it, and keeps the locks unless `release`. A
/// `pipeline` part (not a transaction's) lets blocked clients be served between its commands that
/// come before that position of the pipeline (see [`Batch::flush`]).
async fn run_locked_here(
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

/// [`run_locked_here`] on another shard: one message there, one back. The commands come back
/// with the replies, to be dropped (their arguments freed) on the thread that allocated them.
async fn run_locked_on(
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

/// A sub-batch on another shard, outside any lock context: one message there, one back.
async fn run_free_on(
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
async fn run_free_on_as(
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

/// Where a command's keys live.
struct Placement {
    /// The shard owning all its keys (`Some(None)`: it has no key), None if they span shards.
    shard: Option<Option<usize>>,
    /// Index of its first key argument (0: none).
    key: usize,
    /// Number of key arguments.
    n: usize,
}

impl Placement {
    fn of(set: &ShardSet, spec: &CommandSpec, args: &[Bytes]) -> Placement {
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
    fn one_message(&self, set: &ShardSet, spec: &CommandSpec, args: &[Bytes]) -> bool {
        self.n <= SLICE
            && (set.len() == 1
                || !(spec.reads_db.is_some_and(|f| f(args))
                    || spec.writes_db.is_some_and(|f| f(args))))
    }
}

/// Writes the reply of a split command (see [`Merge`]) from its parts' replies, which are the
/// replies of the same command over fewer keys: an integer each (sum), OK each (all succeeded), or
/// an array of bulk strings and nulls each (concatenation). A part that answered anything else (an
/// error) is the reply, as the first failing shard's reply is in Redis Cluster's policies. Nothing
/// if a reply was dropped (the client passed its output limit and is being closed).
fn merge_replies(merge: &Merge, replies: &[&[u8]], out: &mut Vec<u8>) {
    if replies.iter().any(|r| r.is_empty()) {
        return;
    }
    let odd = |want: u8| replies.iter().find(|r| r[0] != want).copied();
    match merge {
        Merge::Sum => {
            if let Some(r) = odd(b':') {
                out.extend_from_slice(r);
                return;
            }
            let total: i64 = replies
                .iter()
                .map(|r| {
                    resp_line(&r[1..])
                        .and_then(strata_core::num::parse_i64)
                        .unwrap_or(0)
                })
                .sum();
            out.push(b':');
            out.extend_from_slice(total.to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Merge::AllOk => match replies.iter().find(|r| **r != b"+OK\r\n") {
            Some(r) => out.extend_from_slice(r),
            None => out.extend_from_slice(b"+OK\r\n"),
        },
        Merge::Concat(order) => {
            if let Some(r) = odd(b'*') {
                out.extend_from_slice(r);
                return;
            }
            // Each part's elements, in its keys' order.
            let mut rest: Vec<&[u8]> = replies
                .iter()
                .map(|r| resp_line(&r[1..]).map_or(&[][..], |l| &r[l.len() + 3..]))
                .collect();
            out.push(b'*');
            out.extend_from_slice(order.len().to_string().as_bytes());
            out.extend_from_slice(b"\r\n");
            for &p in order {
                let part = &mut rest[p as usize];
                let n = resp_element_len(part).min(part.len());
                out.extend_from_slice(&part[..n]);
                *part = &part[n..];
            }
        }
    }
}

/// The text of a RESP line (up to its CRLF).
fn resp_line(b: &[u8]) -> Option<&[u8]> {
    let end = b.windows(2).position(|w| w == b"\r\n")?;
    Some(&b[..end])
}

/// The length of the RESP element at the start of `b`: a bulk string (`$len`, or `$-1` null), or
/// a one-line element (RESP3 `_` null, integers, simple strings).
fn resp_element_len(b: &[u8]) -> usize {
    let Some(line) = resp_line(b) else {
        return b.len();
    };
    let head = line.len() + 2;
    match (b.first(), strata_core::num::parse_i64(&line[1..])) {
        (Some(b'$'), Some(len)) if len >= 0 => head + len as usize + 2,
        _ => head,
    }
}

/// Where one command's reply is.
enum Slot {
    /// Bytes `start..end` of the batch's local reply buffer.
    Local(usize, usize),
    /// Reply `index` of sub-batch `batch`.
    Remote { batch: usize, index: usize },
    /// EXEC run with the pipeline: its array header (bytes `start..end` of the local buffer), then
    /// the replies of its body, each a (batch, index) as in `Remote`.
    Txn(usize, usize, Vec<(usize, usize)>),
    /// A multi-key command split into one command per shard (see [`Split`]): the parts' replies,
    /// each a (batch, index) as in `Remote`, merged into one.
    Split(Vec<(usize, usize)>, Merge),
}

/// How the replies of a split command's parts make its reply, as Redis Cluster's response
/// policies say (COMMAND DOCS tips).
enum Merge {
    /// `response_policy:agg_sum` (DEL, UNLINK, EXISTS, TOUCH): the integers added up.
    Sum,
    /// `response_policy:all_succeeded` (MSET): OK if every part said OK.
    AllOk,
    /// No response policy (MGET): the arrays' elements back in key order; the part each key went to.
    Concat(Vec<u32>),
}

/// How a command will run.
enum Route {
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

/// The buffers a batch works in, handed back empty when it ends and kept per thread for the next
/// batch: a lone command would otherwise allocate and free its reply buffer and slot list on every
/// request, and one sent to another shard about ten buffers (the lists of sub-batches, of their
/// replies and of where each was taken, its command list, its reply buffers). Those of a batch
/// that sends nowhere are never taken, so a lone local command pays for two. Only small buffers
/// are kept, and only a few, so a huge pipeline's are freed as before. A sub-batch's reply buffers
/// are filled on the shard that runs it and come back with its replies: the thread that sent it
/// keeps them for its next one.
mod spare {
    use std::cell::RefCell;

    use super::{Pending, ShardCmd, ShardReplies, Slot};

    /// Buffers of each kind kept per thread: as many as batches a thread has in flight at once
    /// on a busy server (each of its connections waiting for another shard holds its own), within
    /// reason; with the size limits below, at most a few hundred KiB per thread.
    const KEEP: usize = 32;
    /// Reply buffers that grew past this are freed rather than kept.
    const MAX_BYTES: usize = 16 * 1024;
    /// Lists that grew past this many entries are freed rather than kept.
    const MAX_SLOTS: usize = 1024;

    type Slots = Vec<(Slot, bool)>;

    struct Pools {
        bufs: Vec<Vec<u8>>,
        slots: Vec<Slots>,
        pending: Vec<Vec<Pending>>,
        done: Vec<Vec<ShardReplies>>,
        starts: Vec<Vec<usize>>,
        replies: Vec<(Vec<u8>, Vec<usize>)>,
        cmds: Vec<Vec<ShardCmd>>,
    }

    thread_local! {
        static SPARE: RefCell<Pools> = const {
            RefCell::new(Pools {
                bufs: Vec::new(),
                slots: Vec::new(),
                pending: Vec::new(),
                done: Vec::new(),
                starts: Vec::new(),
                replies: Vec::new(),
                cmds: Vec::new(),
            })
        };
    }

    /// Keeps `v` (emptied) in `pool` unless it grew past `max` entries or the pool is full.
    #[inline]
    fn keep<T>(pool: &mut Vec<Vec<T>>, mut v: Vec<T>, max: usize, n: usize) {
        if v.capacity() <= max && pool.len() < n {
            v.clear();
            pool.push(v);
        }
    }

    /// An empty reply buffer and an empty slot list, with whatever capacity they kept.
    pub(super) fn take() -> (Vec<u8>, Slots) {
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            (
                s.bufs.pop().unwrap_or_default(),
                s.slots.pop().unwrap_or_default(),
            )
        })
    }

    /// Hands both back for the next batch (emptied here), unless they grew large.
    pub(super) fn give(buf: Vec<u8>, slots: Slots) {
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            keep(&mut s.bufs, buf, MAX_BYTES, KEEP);
            keep(&mut s.slots, slots, MAX_SLOTS, KEEP);
        });
    }

    /// An empty list of sub-batches, when a batch opens its first.
    pub(super) fn take_pending() -> Vec<Pending> {
        SPARE.with(|s| s.borrow_mut().pending.pop().unwrap_or_default())
    }

    /// An empty list of sub-batch replies, when a batch runs its first sub-batch.
    pub(super) fn take_done() -> Vec<ShardReplies> {
        SPARE.with(|s| s.borrow_mut().done.pop().unwrap_or_default())
    }

    /// An empty list of positions in sub-batch replies, when a batch assembles its first.
    pub(super) fn take_starts() -> Vec<usize> {
        SPARE.with(|s| s.borrow_mut().starts.pop().unwrap_or_default())
    }

    /// Hands back the lists a batch that ran sub-batches took, and its sub-batches' reply buffers
    /// (to the pool [`take_replies`] draws from).
    #[inline(never)]
    pub(super) fn give_lists(
        mut pending: Vec<Pending>,
        mut done: Vec<ShardReplies>,
        starts: Vec<usize>,
    ) {
        // What the lists hold (commands not run, what replies hold besides their buffers) is
        // dropped before the pools are borrowed.
        pending.clear();
        for r in done.iter_mut() {
            r.park = None;
            r.seen = None;
        }
        SPARE.with(|s| {
            let mut s = s.borrow_mut();
            for r in done.drain(..) {
                let (mut buf, mut ends) = (r.buf, r.ends);
                if buf.capacity() <= MAX_BYTES
                    && ends.capacity() <= MAX_SLOTS
                    && s.replies.len() < 2 * KEEP
                {
                    buf.clear();
                    ends.clear();
                    s.replies.push((buf, ends));
                }
            }
            keep(&mut s.pending, pending, MAX_SLOTS, KEEP);
            keep(&mut s.done, done, MAX_SLOTS, KEEP);
            keep(&mut s.starts, starts, MAX_SLOTS, KEEP);
        });
    }

    /// An empty reply buffer and list of reply ends for a sub-batch.
    pub(super) fn take_replies() -> (Vec<u8>, Vec<usize>) {
        SPARE.with(|s| s.borrow_mut().replies.pop().unwrap_or_default())
    }

    /// An empty command list with room for `room` commands.
    pub(super) fn take_cmds(room: usize) -> Vec<ShardCmd> {
        let mut v = SPARE.with(|s| s.borrow_mut().cmds.pop().unwrap_or_default());
        v.reserve(room);
        v
    }

    /// Hands a sub-batch's command list back (its commands dropped here).
    pub(super) fn give_cmds(mut v: Vec<ShardCmd>) {
        // Dropped before the pools are borrowed: a command holds `Arc`s (its client, a parked
        // wait) whose last drop runs their destructors.
        v.clear();
        SPARE.with(|s| keep(&mut s.borrow_mut().cmds, v, MAX_SLOTS, 2 * KEEP));
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn replies(bytes: usize) -> ShardReplies {
            ShardReplies {
                buf: vec![b'x'; bytes],
                ends: vec![bytes],
                park: None,
                seen: None,
                overflow: false,
            }
        }

        #[test]
        fn pools_keep_small_buffers_emptied_and_never_more_than_their_bound() {
            // A sub-batch's small reply buffer comes back empty with its room, for the next one.
            give_lists(Vec::new(), vec![replies(100)], Vec::new());
            let (buf, ends) = take_replies();
            assert!(buf.is_empty() && buf.capacity() >= 100);
            assert!(ends.is_empty() && ends.capacity() >= 1);
            assert_eq!(take_replies().0.capacity(), 0, "one was kept, one taken");

            // A huge reply's buffer is freed, not kept for the thread's lifetime.
            give_lists(Vec::new(), vec![replies(MAX_BYTES + 1)], Vec::new());
            assert_eq!(take_replies().0.capacity(), 0);

            // However many batches hand theirs back at once, a pool holds a bounded number.
            for _ in 0..10 * KEEP {
                give_lists(Vec::new(), vec![replies(64), replies(64)], Vec::new());
                give(vec![0; 64], Vec::new());
            }
            SPARE.with(|s| {
                let s = s.borrow();
                assert_eq!(s.replies.len(), 2 * KEEP);
                assert_eq!(s.bufs.len(), KEEP);
                assert!(s.done.len() <= KEEP && s.bufs.iter().all(|b| b.is_empty()));
            });
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
    pub conn: &'a strata_rt::net::TcpStream,
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

    /// Whether the replies so far outgrew the client's output limit (`limit`, see
    /// [`ClientInfo::output_budget`]); if so the client is closed and nothing of this batch is
    /// sent, as Redis closes a client whose reply takes it past its hard limit and stops reading
    /// its commands. What already ran stays done; nothing after it runs.
    /// `maxmemory-clients` before a command: publishes the replies the batch holds so far as the
    /// client's and evicts clients if the total is over the limit. True if this client was
    /// evicted: it is closed, and nothing more of the batch runs or is sent (as `outgrown`).
    #[cold]
    fn evicted(&mut self, local: &ReplyBuf, done: &[ShardReplies]) -> bool {
        if self.session.info.killed.load(Ordering::Relaxed) {
            // Evicted (or killed) by another client meanwhile: nothing more runs.
            self.out.buf.clear();
            return true;
        }
        let bytes = done
            .iter()
            .fold(local.buf.capacity() + self.out.buf.capacity(), |n, r| {
                n.saturating_add(r.buf.capacity())
            });
        let info = &self.session.info;
        info.reply_mem.store(bytes as u64, Ordering::Relaxed);
        let gone = strata_node::services::client_evict::settle(self.state, info);
        if gone {
            self.out.buf.clear();
        }
        gone
    }

    fn outgrown(&mut self, limit: usize, local: &ReplyBuf, done: &[ShardReplies]) -> bool {
        let bytes = local.buf.len() + self.out.buf.len();
        let over = done.iter().any(|r| r.overflow)
            || done
                .iter()
                .fold(bytes, |n, r| n.saturating_add(r.buf.len()))
                > limit;
        if over {
            self.session.info.close_over_output_limit();
            self.out.buf.clear();
        }
        over
    }

    /// Appends the replies of `slots`, in order, to `out` and empties `slots`. `starts` tracks how
    /// far each sub-batch's replies have been taken.
    /// When one reply buffer holds the whole batch's replies in order (a lone command, or a
    /// pipeline that ran in one sub-batch) and nothing is in `out` yet, it becomes `out` instead
    /// of being copied into it: a big value was copied twice on its way to the socket (a GET of
    /// 64 KB cost 1.84× Redis's instructions). The buffer given back in exchange is the empty
    /// `out`.
    fn hand_over(
        &mut self,
        slots: &mut Vec<(Slot, bool)>,
        local: &mut ReplyBuf,
        done: &mut [ShardReplies],
    ) {
        if !self.out.buf.is_empty() || slots.len() != 1 {
            return;
        }
        let buf = match &slots[0] {
            (Slot::Local(0, end), false) if *end == local.buf.len() => &mut local.buf,
            (Slot::Remote { batch: 0, index: 0 }, false)
                if done.len() == 1 && done[0].ends == [done[0].buf.len()] =>
            {
                &mut done[0].buf
            }
            _ => return,
        };
        std::mem::swap(&mut self.out.buf, buf);
        slots.clear();
    }

    fn assemble(
        &mut self,
        slots: &mut Vec<(Slot, bool)>,
        local: &ReplyBuf,
        done: &[ShardReplies],
        starts: &mut Vec<usize>,
    ) {
        if starts.capacity() == 0 && !done.is_empty() {
            *starts = spare::take_starts();
        }
        starts.resize(done.len(), 0);
        let mut remote = |batch: usize, index: usize| {
            let r = &done[batch];
            let (s, e) = (starts[batch], r.ends[index]);
            starts[batch] = e;
            &r.buf[s..e]
        };
        for (slot, suppress) in slots.drain(..) {
            let out = &mut self.out.buf;
            match slot {
                Slot::Local(s, e) if !suppress => out.extend_from_slice(&local.buf[s..e]),
                Slot::Local(..) => {}
                Slot::Remote { batch, index } => {
                    let bytes = remote(batch, index);
                    if !suppress {
                        out.extend_from_slice(bytes);
                    }
                }
                Slot::Txn(s, e, parts) => {
                    if !suppress {
                        out.extend_from_slice(&local.buf[s..e]);
                    }
                    for (batch, index) in parts {
                        let bytes = remote(batch, index);
                        if !suppress {
                            out.extend_from_slice(bytes);
                        }
                    }
                }
                Slot::Split(parts, merge) => {
                    let replies: Vec<&[u8]> =
                        parts.into_iter().map(|(b, i)| remote(b, i)).collect();
                    if !suppress {
                        merge_replies(&merge, &replies, out);
                    }
                }
            }
        }
    }

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
    async fn flush(&self, pending: &mut Vec<Pending>, done: &mut Vec<ShardReplies>) {
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

    /// This client's invalidations of keys evicted before its command (by maxmemory or the
    /// tracking table's limit) go before the command's reply, as Redis evicts before the command
    /// runs, not after the batch like those of its own writes.
    fn held_invalidations_first(&self, local: &mut ReplyBuf, slots: &mut Vec<(Slot, bool)>) {
        let Some(t) = self.session.tracking.as_ref() else {
            return;
        };
        let start = local.buf.len();
        for m in t.take_held() {
            local.buf.extend_from_slice(&m);
        }
        if local.buf.len() > start {
            slots.push((Slot::Local(start, local.buf.len()), false));
        }
    }

    /// CLIENT PAUSE: whether the command must wait now (every command under ALL; under WRITE those
    /// that write or may replicate, and EXEC of a transaction holding one), and if so whether it
    /// writes. A command Redis would reject (unknown, wrong arity) is not held: it fails at once.
    fn paused(&self, args: &[Bytes]) -> Option<bool> {
        let Lookup::Found(cmd) = table().resolve(args) else {
            return None;
        };
        let writes = |spec: &CommandSpec| {
            spec.flags.has(Flags::WRITE) || spec.flags.has(Flags::MAY_REPLICATE)
        };
        let write = if matches!(cmd.spec.handler, Handler::Exec) {
            self.session
                .multi
                .as_ref()
                .is_some_and(|q| q.iter().any(|q| writes(q.cmd.spec)))
        } else {
            writes(cmd.spec)
        };
        self.state.pause.applies(write, now_ms()).then_some(write)
    }

    /// Waits until a command that writes (`write`) or not may run (see [`Batch::paused`]). False
    /// if the client left meanwhile (killed, or an event on its socket said it closed or reset
    /// it): Redis frees a paused client at the read that finds its end, and its command never runs.
    async fn wait_unpaused(&mut self, write: bool) -> bool {
        use std::future::Future;
        use std::pin::pin;
        use std::task::Poll;
        let info = self.session.info.clone();
        let mut closed = pin!(self.conn.closed());
        while let Some((until, rx)) = self.state.pause.wait_for(write, now_ms()) {
            info.blocked.store(true, Ordering::Relaxed);
            let ms = (until - now_ms()).max(0) as u64;
            let mut sleep = pin!(strata_rt::sleep(std::time::Duration::from_millis(ms)));
            let mut rx = pin!(rx);
            let gone = std::future::poll_fn(|cx| {
                if info.killed.load(Ordering::Relaxed) || closed.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(true);
                }
                if rx.as_mut().poll(cx).is_ready() || sleep.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(false);
                }
                Poll::Pending
            })
            .await;
            info.blocked.store(false, Ordering::Relaxed);
            if gone {
                return false;
            }
        }
        true
    }

    /// Queues a command inside MULTI, or says why Redis would reject it (the transaction then
    /// aborts at EXEC).
    fn queue(&mut self, args: Vec<Bytes>, oom: bool) -> Result<(), String> {
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

    /// Whether a queued command has `flag` (EXEC is refused over maxmemory when one is `denyoom`,
    /// and by min-replicas-to-write when one writes; a transaction of reads runs).
    fn exec_holds(&self, flag: Flags) -> bool {
        self.session
            .multi
            .as_ref()
            .is_some_and(|q| q.iter().any(|q| q.cmd.spec.flags.has(flag)))
    }

    /// Discards the transaction EXEC was refused for with `why` (Redis's execCommandAbort).
    async fn abort_exec(&mut self, cmd: &Resolved, why: &str, out: &mut ReplyBuf) {
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

    /// EXEC: see [`strata_node::services::multi`]. Takes every lock the transaction needs as one owner
    /// (ascending shard order), checks the watches, runs the queued commands as one pipeline in
    /// that lock context, and replies with the array of their replies. (A transaction of one-shard
    /// key commands without WATCH does not come here: see [`Batch::take_direct_exec`].)
    async fn run_exec(&mut self, out: &mut ReplyBuf) {
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
        lock.release();
        out.proto = self.session.proto;
        out.array(n);
        out.buf.extend_from_slice(&replies.buf);
    }

    /// EXEC of a transaction of one-shard key commands without WATCH (see
    /// [`Batch::exec_placement`]): takes the queue and returns each command with its shard, to run
    /// with the pipeline's sub-batches in atomic mode — one message per shard for the whole run,
    /// each shard's part run whole (at once when no other command holds its keys, else after
    /// taking all of them), parts in ascending shard order holding their locks until the last has
    /// run — so no other client sees a state between two of its commands, and pipelined
    /// transactions travel together. None when EXEC runs on its own ([`Batch::run_exec`]): no
    /// MULTI, a queue to discard, or locks to take up front.
    fn take_direct_exec(&mut self) -> Option<Vec<(usize, ShardCmd)>> {
        if self.session.multi_failed {
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

    /// `pipelined`: the batch holds more than this command (see [`split`](Self::split)).
    fn route(&self, args: Vec<Bytes>, local_shard: usize, oom: bool, pipelined: bool) -> Route {
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
    fn shard_cmd(&self, args: Vec<Bytes>, cmd: Resolved, run: Run, key: usize) -> ShardCmd {
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
        }
    }

    fn run_conn(&mut self, cmd: &Resolved, args: &[Bytes], f: ConnHandler, out: &mut ReplyBuf) {
        let start = now_us();
        let mut cx = ConnCtx::new(self.session, self.state, args, &mut *out, start / 1000);
        let result = f(&mut cx);
        let at = reply_error(cx.out, result);
        let error = at.map(|at| &out.buf[at..]);
        record_logged(cmd, args, &self.session.info, start, error);
    }

    async fn run_async(
        &mut self,
        cmd: &Resolved,
        args: &[Bytes],
        f: AsyncHandler,
        out: &mut ReplyBuf,
    ) {
        let start = now_us();
        let mut cx = ConnCtx::new(self.session, self.state, args, &mut *out, start / 1000);
        let result = f(&mut cx).await;
        let at = reply_error(cx.out, result);
        let error = at.map(|at| &out.buf[at..]);
        record_logged(cmd, args, &self.session.info, start, error);
    }

    /// Runs a keyed command whose keys span shards: intent locks on every key (shard by shard, in
    /// ascending order), the command with its parts sent to the owning shards, then release.
    async fn run_keys(
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
    async fn run_keys_as(
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

    /// The runner of a parked command whose keys span shards and that serves each key on its own
    /// (see [`CommandSpec::per_key`]): on each shard of `shard_at` (the shard of each key argument,
    /// by index; `usize::MAX` for the others), the command over that shard's keys.
    fn per_shard_runner(
        &self,
        cmd: Resolved,
        args: &[Bytes],
        shard_at: &[usize],
        run: Run,
        per_key: strata_node::table::PerKey,
        info: &Arc<ClientInfo>,
    ) -> strata_shard::Runner {
        let mut shards: Vec<usize> = shard_at
            .iter()
            .copied()
            .filter(|&s| s != usize::MAX)
            .collect();
        shards.sort_unstable();
        shards.dedup();
        let cmds = shards
            .into_iter()
            .map(|s| {
                let own = per_key(args, &mut |i| shard_at[i] == s);
                let key = cmd.spec.first_key(&own).unwrap_or(0);
                let mut c = self.shard_cmd(own, cmd, run, key);
                c.info = Some(info.clone());
                (s, c)
            })
            .collect();
        serve_on(cmds, info.clone())
    }

    /// Runs a blocking command: attempts it; if it parks, waits until one of its keys is written
    /// (then attempts again, as the owner its wake-up reserved the key for), its deadline passes
    /// (timeout reply), or its client is gone (no reply; nothing is served to it). See
    /// `strata_shard::park`.
    async fn run_blocking(
        &mut self,
        cmd: Resolved,
        args: Vec<Bytes>,
        run: Run,
        shard: Option<usize>,
        out: &mut ReplyBuf,
    ) {
        let set = self.state.shards.clone();
        // Keys on several shards: the shard of each key argument (by index), hashed once.
        let mut shard_at: Vec<usize> = Vec::new();
        if shard.is_none() {
            shard_at = vec![usize::MAX; args.len()];
            cmd.spec
                .for_each_key(&args, |i, _| shard_at[i] = set.shard_of_key(&args[i]));
        }
        let parked = match shard {
            Some(_) => Parked::new(new_owner(), true),
            None => Parked::spanning(
                new_owner(),
                shard_at.iter().copied().min().unwrap_or(usize::MAX),
            ),
        };
        let _leave = Leave {
            set: &set,
            parked: parked.clone(),
        };
        let info = self.session.info.clone();
        let key = cmd.spec.first_key(&args).unwrap_or(0);
        // Keys on several shards: whichever shard's key becomes ready serves it there. (Set
        // before the first attempt: it can only run once that attempt parked the command, and
        // finds nothing while the attempt holds the keys.)
        let mut runner = None;
        if let (None, Some(per_key)) = (shard, cmd.spec.per_key) {
            parked.set_runner(self.per_shard_runner(cmd, &args, &shard_at, run, per_key, &info));
        }
        // A move between two shards: served by messages between them (see `crate::moving`).
        if let (None, Some((from, to))) = (shard, cmd.spec.moves.and_then(|f| f(&args))) {
            parked.set_runner(crate::moving::runner(crate::moving::Move {
                set: set.clone(),
                db: self.session.db,
                src: args[1].clone(),
                dst: args[2].clone(),
                from,
                to,
                src_shard: shard_at[1],
                dst_shard: shard_at[2],
                info: info.clone(),
                proto: self.session.proto,
                cmd_id: cmd.id,
            }));
        }
        let mut first = true;
        loop {
            // Nothing is served to a client that left while it waited. (The first attempt comes
            // right after its command was read, so only a kill is checked then, as in Redis.)
            let gone = if first {
                info.killed.load(Ordering::Relaxed)
            } else {
                // Its socket's end seen by an event (also behind unread input, as `wait_woken`
                // counts it), or already in the socket though no event said so yet.
                self.conn.is_closed() || peer_gone(&info)
            };
            if gone {
                // Nor does anything after it in its pipeline run (see `Woke::Gone`).
                self.session.close_after_reply = true;
                return;
            }
            first = false;
            let (reply, park) = match (shard, run) {
                (Some(shard), run) => {
                    let mut c = self.shard_cmd(args.clone(), cmd, run, key);
                    c.parked = Some(parked.clone());
                    c.info = Some(info.clone());
                    let owner = parked.owner();
                    let (_, r) = if Some(shard) == current_shard_id() {
                        let one = std::slice::from_ref(&c);
                        run_locked_here(&set, owner, one, true, None, usize::MAX).await
                    } else {
                        run_locked_on(&set, shard, owner, vec![c], true, None, usize::MAX).await
                    };
                    (r.buf, r.park)
                }
                (None, Run::Keys(f)) => {
                    let mut buf = ReplyBuf::new(self.session.proto);
                    let park = self
                        .run_keys_as(&cmd, &args, f, &mut buf, parked.owner(), Some(&parked))
                        .await;
                    (buf.buf, park)
                }
                (None, Run::Shard(_)) => {
                    unreachable!("single-shard commands are routed to a shard")
                }
            };
            // Its shard may have served it (on another thread) before this attempt's answer came.
            if let Some(served) = parked.take_reply() {
                out.buf.extend_from_slice(&served);
                return;
            }
            let Some(park) = park else {
                out.buf.extend_from_slice(&reply);
                return;
            };
            if let Some(r) = runner.take() {
                parked.set_runner(r);
            }
            // Blocked from now on, unless a shard served or claimed it already (which clears
            // these marks under the same mutex).
            parked.while_waiting(|| {
                info.blocked.store(true, Ordering::Relaxed);
                info.unblockable.store(true, Ordering::Release);
            });
            let woke = wait_woken(&parked, park.deadline, &info, self.conn).await;
            info.unblockable.store(false, Ordering::Release);
            info.blocked.store(false, Ordering::Relaxed);
            if matches!(woke, Woke::Gone) {
                // Redis frees a client at the read that finds its end: nothing after this command
                // in its pipeline runs (a move claimed for it still completes, below).
                self.session.close_after_reply = true;
            }
            // Served by its shard in the turn that made its key ready: the reply is there. Any
            // other end of the wait first stops the shard from serving it, unless it just did.
            let mut served = match woke {
                Woke::Written => parked.take_reply(),
                _ => parked.close(),
            };
            if served.is_none() && parked.is_claimed() {
                served = settle_claim(&parked).await;
            }
            if let Some(served) = served {
                out.buf.extend_from_slice(&served);
                return;
            }
            match woke {
                Woke::Written => {
                    parked.set_retried();
                    if shard.is_none() {
                        // Attempted again from here (its keys span shards): no shard may serve it
                        // meanwhile, or both could pop. One may have served it just before.
                        runner = parked.take_runner();
                        let mut served = parked.take_reply();
                        if served.is_none() && parked.is_claimed() {
                            served = settle_claim(&parked).await;
                        }
                        if let Some(served) = served {
                            out.buf.extend_from_slice(&served);
                            return;
                        }
                    }
                    continue;
                }
                Woke::Deadline => {
                    out.proto = self.session.proto;
                    park.timeout.write(out);
                    return;
                }
                Woke::Gone => return,
                Woke::Unblocked(how) => {
                    out.proto = self.session.proto;
                    // Redis 7.0 counts a command ended by CLIENT UNBLOCK as a failed call (its
                    // call was counted when it parked), also when it answers as on timeout; the
                    // UNBLOCKED error is an error reply too (INFO errorstats).
                    with_shard(|s| {
                        s.stats.cmd_mut(cmd.id).failed_calls += 1;
                        if how == UNBLOCK_ERROR {
                            s.stats.count_error(b"UNBLOCKED");
                        }
                    });
                    if how == UNBLOCK_ERROR {
                        out.error("UNBLOCKED client unblocked via CLIENT UNBLOCK");
                    } else {
                        park.timeout.write(out);
                    }
                    return;
                }
            }
        }
    }
}

/// Withdraws a parked command from every queue it is in, whatever way its wait ends.
struct Leave<'a> {
    set: &'a strata_shard::ShardSet,
    parked: Arc<Parked>,
}

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        // Waits for a shard running the command right now (a short, synchronous turn), so none
        // does once the task is gone.
        self.parked.close();
        let Some((db, keys)) = self.parked.withdraw() else {
            return;
        };
        let mut per: Vec<Vec<Bytes>> = vec![Vec::new(); self.set.len()];
        for key in keys {
            per[self.set.shard_of_key(&key)].push(key);
        }
        for (shard, keys) in per.into_iter().enumerate().filter(|(_, k)| !k.is_empty()) {
            let p = self.parked.clone();
            // Posted, not run inline: a drop may happen inside `with_shard`.
            self.set.post(
                shard,
                Box::new(move || {
                    with_shard(|s| {
                        for key in &keys {
                            s.unpark(db, key, &p);
                        }
                    })
                }),
            );
        }
    }
}

/// Waits until a claim on `parked` ends (see `crate::moving`): its reply, or None if the claim was
/// given back (the command is still parked, unless its wait ended meanwhile). Whatever ended the
/// wait, a claimed command waits for this: its element may already be on its way.
async fn settle_claim(parked: &Parked) -> Option<Vec<u8>> {
    while parked.is_claimed() {
        parked.woken().await;
    }
    parked.take_reply()
}

/// How a parked command's wait ended.
enum Woke {
    Written,
    Deadline,
    Gone,
    /// CLIENT UNBLOCK, with its reason (`UNBLOCK_TIMEOUT` or `UNBLOCK_ERROR`).
    Unblocked(u8),
}

/// Waits for a wake-up, CLIENT UNBLOCK, the client's end (a kill, or an event on its socket
/// saying it closed or reset it), or the deadline (unix ms), in that order of precedence.
async fn wait_woken(
    parked: &Parked,
    deadline: Option<i64>,
    info: &ClientInfo,
    conn: &strata_rt::net::TcpStream,
) -> Woke {
    use std::future::Future;
    use std::pin::pin;
    use std::task::Poll;
    let mut woken = pin!(parked.woken());
    let mut unblocked = pin!(info.unblocked());
    let mut closed = pin!(conn.closed());
    let mut timer = pin!(deadline.map(|at| {
        strata_rt::sleep(std::time::Duration::from_millis(
            (at - now_ms()).max(0) as u64
        ))
    }));
    std::future::poll_fn(|cx| {
        if woken.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Woke::Written);
        }
        if let Poll::Ready(how) = unblocked.as_mut().poll(cx) {
            return Poll::Ready(Woke::Unblocked(how));
        }
        // A kill also wakes this task (through `unblocked`'s waker) and shuts the socket down.
        if info.killed.load(Ordering::Relaxed) || closed.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Woke::Gone);
        }
        match timer.as_mut().as_pin_mut().map(|t| t.poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Woke::Deadline),
            _ => Poll::Pending,
        }
    })
    .await
}

/// True if the client was killed or closed its end of the connection (the connection's own
/// thread owns the descriptor, so peeking at it here is safe).
pub(crate) fn peer_gone(info: &ClientInfo) -> bool {
    if info.killed.load(Ordering::Relaxed) {
        return true;
    }
    let mut b = [0u8; 1];
    // SAFETY: a valid 1-byte buffer; the descriptor belongs to this connection, which is alive.
    let n = unsafe {
        libc::recv(
            info.fd,
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n == 0 {
        return true;
    }
    n < 0 && {
        let e = std::io::Error::last_os_error().raw_os_error();
        !matches!(e, Some(libc::EAGAIN) | Some(libc::EINTR))
    }
}

/// Redis's reply to a command refused because used memory is over `maxmemory`.
const OOM_ERROR: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Redis's reply to a write refused by `min-replicas-to-write`.
const NOREPLICAS_ERROR: &str = "NOREPLICAS Not enough good replicas to write.";

/// Redis's performEvictions before a command, over every shard: this thread's shard evicts its
/// share of the excess, then, if the process is still over the limit, every other shard evicts
/// its share while this task waits. True if the process stays over the limit with nothing left to
/// evict: commands that may grow memory are then refused.
#[cold]
async fn out_of_memory(shards: &ShardSet) -> bool {
    use strata_shard::evict::{perform, settle, Outcome};
    let (me, outcome) = with_shard(|s| (s.id, perform(s, now_ms())));
    let outcome = match outcome {
        Outcome::Running => {
            let calls = (0..shards.len())
                .filter(|&i| i != me)
                .map(|i| shards.call(i, |s| s.evict_share(now_ms())));
            futures_util::future::join_all(calls).await;
            settle()
        }
        o => o,
    };
    outcome == Outcome::Fail
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

/// Writes a handler's error, if it failed, as its reply; returns where that reply starts in
/// `out`, so the statistics read its code in place (no copy of the message).
fn reply_error(out: &mut ReplyBuf, result: CmdResult) -> Option<usize> {
    let e = result.err()?;
    let at = out.buf.len();
    out.error(&e.message());
    Some(at)
}

/// Counts a command run on the connection's thread in that thread's stats; returns how long it
/// ran (µs).
fn record(cmd: &Resolved, start: i64, error: Option<&[u8]>) -> u64 {
    let usec = (now_us() - start).max(0) as u64;
    with_shard(|s| {
        s.stats.commands += 1;
        let st = s.stats.cmd_mut(cmd.id);
        st.calls += 1;
        st.usec += usec;
        st.failed_calls += error.is_some() as u64;
        if let Some(e) = error {
            s.stats.count_error(e);
        }
        s.stats.record_latency(cmd.id, usec);
    });
    latency::command_sample(cmd.spec, usec);
    usec
}

/// [`record`], and the command's SLOWLOG entry if it ran long enough: a command run on the
/// connection's thread by `info`'s client.
fn record_logged(
    cmd: &Resolved,
    args: &[Bytes],
    info: &ClientInfo,
    start: i64,
    error: Option<&[u8]>,
) {
    let usec = record(cmd, start, error);
    if slowlog::logs(usec) {
        let (addr, name) = client_label(info);
        slowlog::push(cmd.spec, args, usec, &addr, name, now_ms());
    }
}

/// A client's address and name, as SLOWLOG shows them.
fn client_label(info: &ClientInfo) -> (String, Bytes) {
    let name = info.name.lock().unwrap_or_else(|e| e.into_inner()).clone();
    (info.addr.clone(), name.unwrap_or_default())
}

thread_local! {
    /// The server this shard thread serves, for what a shard-side command needs of it only rarely
    /// (a slow command's client address and name). Set once per shard thread at start-up.
    static THREAD_STATE: std::cell::OnceCell<Arc<ServerState>> = const { std::cell::OnceCell::new() };
}

/// Makes `state` reachable from this shard thread's commands (see [`THREAD_STATE`]).
pub(crate) fn set_thread_state(state: Arc<ServerState>) {
    THREAD_STATE.with(|st| {
        let _ = st.set(state);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_shard::{LockKey, LockMode};

    fn shard_cmd(words: &[&str], db: usize) -> ShardCmd {
        let args: Vec<Bytes> = words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect();
        let Lookup::Found(cmd) = table().resolve(&args) else {
            panic!("{words:?} does not resolve")
        };
        let run = match cmd.spec.handler {
            Handler::Shard(f) => Run::Shard(f),
            Handler::Keys(f) => Run::Keys(f),
            _ => panic!("{words:?} is not a key command"),
        };
        ShardCmd {
            args,
            cmd,
            run,
            db,
            proto: Protocol::Resp2,
            parked: None,
            info: None,
            client: 0,
            track: false,
            key: 0,
            seq: 0,
            counted: true,
            quiet: false,
        }
    }

    fn key(db: u32, k: &str) -> LockKey {
        LockKey::key(db, k.as_bytes())
    }

    #[test]
    fn a_part_serves_only_before_the_first_command_of_a_later_part() {
        // Parts run in shard order; their first commands came at these pipeline positions.
        assert_eq!(serve_limits(&[0, 4, 2]), vec![2, 2, u32::MAX]);
        assert_eq!(serve_limits(&[3, 0]), vec![0, u32::MAX]);
        assert_eq!(serve_limits(&[0, 1, 2]), vec![1, 2, u32::MAX]);
        assert_eq!(serve_limits(&[7]), vec![u32::MAX]);
        assert!(serve_limits(&[]).is_empty());
    }

    #[test]
    fn lock_sets_follow_key_positions_and_modes() {
        let set = shard_cmd(&["get", "k"], 2).lock_set();
        assert_eq!(set.len(), 2);
        assert_eq!(set.mode_of(&LockKey::Db(2)), Some(LockMode::IntentShared));
        assert_eq!(set.mode_of(&key(2, "k")), Some(LockMode::Shared));
        let set = shard_cmd(&["mset", "a", "1", "b", "2"], 0).lock_set();
        assert_eq!(set.mode_of(&key(0, "a")), Some(LockMode::Exclusive));
        assert_eq!(set.mode_of(&key(0, "b")), Some(LockMode::Exclusive));
        assert_eq!(
            set.mode_of(&LockKey::Db(0)),
            Some(LockMode::IntentExclusive)
        );
        assert_eq!(set.mode_of(&key(0, "1")), None);
    }

    #[test]
    fn move_and_copy_lock_the_destination_key_in_its_database() {
        let set = shard_cmd(&["move", "k", "3"], 0).lock_set();
        assert_eq!(set.mode_of(&key(0, "k")), Some(LockMode::Exclusive));
        assert_eq!(set.mode_of(&key(3, "k")), Some(LockMode::Exclusive));
        assert_eq!(
            set.mode_of(&LockKey::Db(3)),
            Some(LockMode::IntentExclusive)
        );
        let set = shard_cmd(&["copy", "a", "b", "DB", "5", "REPLACE"], 1).lock_set();
        assert_eq!(set.mode_of(&key(5, "b")), Some(LockMode::Exclusive));
        // Same database: nothing extra.
        assert_eq!(shard_cmd(&["copy", "a", "b"], 1).lock_set().len(), 3);
    }
}
