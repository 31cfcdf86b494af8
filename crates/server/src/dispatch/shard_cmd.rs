//! A key command on the shard that owns its keys: [`ShardCmd`], what every sub-batch is made of.
//!
//! It knows which keys it locks and how ([`for_each_lock`], from the table's key specs), whether
//! the shard's lock table lets it run now, and how it runs there ([`ShardCmd::exec`]: the handler,
//! CLIENT TRACKING, the slow log and the counters, then the blocked clients its write made ready,
//! served before the shard takes its next command). A blocking command that finds nothing is
//! parked on its keys in that same shard turn (`settle_park`), so no write can fall between its
//! check and its parking, and gets a runner ([`serve_on`]) with which a shard serves it in the
//! turn of the write that makes one of its keys ready.
//!
//! Nothing here awaits: it all runs inside one turn of the shard's thread.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use strata_node::keyed::run_here;
use strata_node::services::latency;
use strata_node::services::slowlog;
use strata_node::table::{CommandSpec, Resolved};
use strata_node::{
    run_shard_handler, ClientInfo, CmdResult, Flags, KeyAccess, KeysCtx, KeysHandler, Park,
    ShardCtx,
};
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::propagate;
use strata_shard::versions::{Seen, Versions};
use strata_shard::{now_ms, now_us, LockSet, LockTable, Mode, Owner, Parked, Served, Shard};

use super::stats::{client_label, THREAD_STATE};

type ShardHandler = fn(&mut ShardCtx<'_>) -> CmdResult;

/// How a key command runs on its shard.
#[derive(Clone, Copy)]
pub(super) enum Run {
    Shard(ShardHandler),
    Keys(KeysHandler),
}

/// One key command on its way to (or running on) its shard.
#[derive(Clone)]
pub struct ShardCmd {
    pub(super) args: Vec<Bytes>,
    pub(super) cmd: Resolved,
    pub(super) run: Run,
    pub(super) db: usize,
    pub(super) proto: Protocol,
    /// Set for a blocking command run by [`Batch::run_blocking`](super::Batch::run_blocking): it
    /// may park (see `strata_shard::park`). Without it, a command that would park answers its
    /// timeout reply.
    pub(super) parked: Option<Arc<Parked>>,
    /// The client of a blocking command (set with `parked`): its shard, serving it, checks that
    /// the client is still there.
    pub(super) info: Option<Arc<ClientInfo>>,
    /// The client's id (CLIENT TRACKING NOLOOP needs who modified a key).
    pub(super) client: u64,
    /// Remember its keys for the client's CLIENT TRACKING (a read command of a tracking client).
    pub(super) track: bool,
    /// Index of its first key argument (0: it has none), for prefetching.
    pub(super) key: usize,
    /// Its position in the pipeline batch it came in (see [`Batch::flush`](super::Batch::flush)'s
    /// serving rule).
    pub(super) seq: u32,
    /// Counted as a call in INFO commandstats: false for the parts of a split command but its
    /// first (see [`Batch::split`](super::Batch::split)).
    pub(super) counted: bool,
    /// A read run again after its first run was discarded (see
    /// [`Batch::run_versioned`](super::Batch::run_versioned)): it counts nowhere (calls, time,
    /// keyspace hits and misses, key-miss events, slow log), as its first run counted.
    pub(super) quiet: bool,
    /// The transaction it belongs to in the propagation stream (0: none; see
    /// `strata_shard::propagate`).
    pub(super) txn: u64,
}

/// Replies of a sub-batch: one buffer, and where each command's reply ends in it.
#[derive(Default)]
pub struct ShardReplies {
    pub(super) buf: Vec<u8>,
    pub(super) ends: Vec<usize>,
    /// A blocking command that parked instead of replying (its reply is empty).
    pub(super) park: Option<Park>,
    /// The key versions its commands read, when they were recorded (see
    /// [`Batch::run_versioned`](super::Batch::run_versioned)).
    pub(super) seen: Option<Seen>,
    /// The replies outgrew the client's output budget and were dropped (see
    /// [`Progress`](super::sub_batch::Progress)).
    pub(super) overflow: bool,
}

/// Calls `f(db, key, mode)` for every key `args` touches in database `db`: its key arguments
/// (exclusive for write commands, shared otherwise), and the key MOVE or COPY … DB writes in
/// another database.
pub(super) fn for_each_lock(
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
    pub(super) fn add_locks(&self, set: &mut LockSet) {
        for_each_lock(self.cmd.spec, &self.args, self.db, |db, key, mode| {
            set.add_key(db, key, mode)
        });
    }

    /// True if it only reads, and only the keys it names: a pipeline of such commands may run
    /// without locks, checking the keys' versions instead (see
    /// [`Batch::run_versioned`](super::Batch::run_versioned)).
    pub(super) fn reads_named_keys_only(&self) -> bool {
        let spec = self.cmd.spec;
        spec.flags.has(Flags::READONLY)
            && !spec.flags.has(Flags::WRITE)
            && self.parked.is_none()
            && spec.other_db_key.is_none()
            && !spec.reads_db.is_some_and(|f| f(&self.args))
            && !spec.writes_db.is_some_and(|f| f(&self.args))
    }

    /// Records the versions of the keys it read (right after it ran, on its shard).
    pub(super) fn record_versions(&self, versions: &Versions, seen: &mut Seen) {
        for_each_lock(self.cmd.spec, &self.args, self.db, |db, key, _| {
            versions.record(db, key, seen)
        });
    }

    pub(super) fn lock_set(&self) -> LockSet {
        let mut set = LockSet::new();
        self.add_locks(&mut set);
        set
    }

    /// True if no lock held or requested by another command stands in the way (outside any lock
    /// context). One branch when the shard's lock table is idle, as it almost always is.
    pub(super) fn may_run(&self, locks: &LockTable, owner: Option<Owner>) -> bool {
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

    pub(super) fn first_key(&self) -> Option<&[u8]> {
        (self.key > 0).then(|| &self.args[self.key][..])
    }

    /// Runs the command on `shard`, appending its reply to `out` and counting it. Returns what a
    /// blocking command parked on instead of replying.
    pub(super) fn exec(&self, shard: &mut Shard, out: &mut ReplyBuf) -> Option<Park> {
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
        let (failed, park) = if self.quiet {
            shard.quietly(|shard| self.run_on(shard, out, now))
        } else {
            self.run_on(shard, out, now)
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

    /// The handler's run itself: whether it failed, and what it parked on. Inlined into
    /// [`ShardCmd::exec`], its one hot caller (a closure there was left out of line).
    #[inline(always)]
    fn run_on(&self, shard: &mut Shard, out: &mut ReplyBuf, now: i64) -> (bool, Option<Park>) {
        if propagate::on() {
            return self.run_propagated(shard, out, now);
        }
        self.run_handler(shard, out, now)
    }

    /// [`run_on`](Self::run_on) while the propagation stream is on: the command is recorded as
    /// Redis propagates it (verbatim if it changed the dataset, else as its handler asked).
    #[inline(never)]
    fn run_propagated(
        &self,
        shard: &mut Shard,
        out: &mut ReplyBuf,
        now: i64,
    ) -> (bool, Option<Park>) {
        let outer = propagate::take_current();
        let mark = shard.dirty_total();
        let r = self.run_handler(shard, out, now);
        let changed = shard.dirty_total() != mark;
        let o = propagate::take_current();
        if r.1.is_none() {
            o.record_at(self.db as u32, self.txn, self.seq, &self.args, changed);
        }
        propagate::install(outer);
        r
    }

    #[inline(always)]
    fn run_handler(&self, shard: &mut Shard, out: &mut ReplyBuf, now: i64) -> (bool, Option<Park>) {
        match self.run {
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
                propagate::install(std::mem::take(&mut cx.prop));
                match r {
                    Ok(()) => (false, park),
                    Err(e) => {
                        out.error(&e.message());
                        (true, None)
                    }
                }
            }
        }
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
pub(super) fn serve_on(
    mut cmds: Vec<(usize, ShardCmd)>,
    info: Arc<ClientInfo>,
) -> strata_shard::Runner {
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

#[cfg(test)]
mod tests {
    use super::*;
    use strata_commands::table;
    use strata_node::{Handler, Lookup};
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
            txn: 0,
        }
    }

    fn key(db: u32, k: &str) -> LockKey {
        LockKey::key(db, k.as_bytes())
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
