//! Dispatch: lookup → arity → auth → route → run → reply, for a whole pipelined batch at once.
//!
//! A batch is every complete command read from a socket in one go. Commands are walked in order:
//! * connection commands (SELECT, HELLO, CLIENT ...) run at once on this thread;
//! * key commands are appended to their shard's sub-batch; another shard's sub-batch travels as one
//!   message and comes back as one buffer of replies, this thread's own runs in place, with no hop,
//!   while the others are away (a lone command on this thread's shard simply runs at once);
//! * a sub-batch prefetches its keys' buckets and entries before running, so its cache misses
//!   overlap;
//! * multi-shard and server-wide commands (MSET across shards, DBSIZE, KEYS, ...) are barriers: the
//!   sub-batches in flight are completed first, then the coordinator runs.
//!
//! Replies are assembled in request order at the end. Commands on the same key always go to the same
//! shard in request order, so a client sees its own writes; across shards, commands of one pipeline
//! may execute concurrently (as with pipeline squashing in Dragonfly), which no single-key read can
//! observe and which multi-key commands exclude with their intent locks.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures_channel::oneshot;
use strata_commands::connection::is_authenticated;
use strata_commands::table::Resolved;
use strata_commands::{
    run_shard_handler, table, ConnCtx, Flags, Handler, Lookup, ReplyMode, ServerState, Session,
    ShardCtx,
};
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::{
    current_shard_id, key_lock_set, now_us, with_shard, Grant, LockKey, Mode, Shard,
};

/// One key command on its way to (or running on) its shard.
pub struct ShardCmd {
    args: Vec<Bytes>,
    cmd: Resolved,
    handler: fn(&mut ShardCtx<'_>) -> strata_commands::CmdResult,
    db: usize,
    proto: Protocol,
}

/// Replies of a sub-batch: one buffer, and where each command's reply ends in it.
#[derive(Default)]
pub struct ShardReplies {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl ShardCmd {
    fn lock_set(&self) -> Vec<(LockKey, Mode)> {
        let mode = if self.cmd.spec.flags.has(Flags::WRITE) {
            Mode::Exclusive
        } else {
            Mode::Shared
        };
        let mut keys = Vec::new();
        self.cmd
            .spec
            .for_each_key(&self.args, |i, _| keys.push((self.args[i].clone(), mode)));
        let mut set = key_lock_set(self.db as u32, keys);
        // MOVE and COPY ... DB also write a key in another database: lock it there too.
        let other = self.cmd.spec.other_db_key.and_then(|f| f(&self.args));
        if let Some((db, i)) = other.filter(|(db, _)| *db != self.db) {
            if let Some(key) = self.args.get(i) {
                set.extend(key_lock_set(db as u32, [(key.clone(), Mode::Exclusive)]));
            }
        }
        set
    }

    fn first_key(&self) -> Option<&[u8]> {
        self.cmd
            .spec
            .first_key(&self.args)
            .map(|i| &self.args[i][..])
    }

    /// Runs the command on `shard`, appending its reply to `out` and counting it.
    fn exec(&self, shard: &mut Shard, out: &mut ReplyBuf) {
        out.proto = self.proto;
        let start = now_us();
        let mut cx = ShardCtx {
            shard,
            db: self.db,
            args: &self.args,
            out,
            now: start / 1000,
        };
        let failed = run_shard_handler(self.handler, &mut cx);
        let usec = (now_us() - start).max(0) as u64;
        let stats = &mut shard.stats;
        stats.commands += 1;
        let st = stats.cmd_mut(self.cmd.id);
        st.calls += 1;
        st.usec += usec;
        st.failed_calls += failed as u64;
    }
}

/// Runs a sub-batch on `shard` at once, if no key locks are held there (the common case); None
/// otherwise, so the caller can fall back to [`run_on_local_shard`], which waits for locks.
///
/// Before running, the table buckets and then the entries of every command's first key are
/// prefetched, so a batch pays its cache misses in parallel rather than one after another.
fn run_now(s: &mut Shard, cmds: &[ShardCmd]) -> Option<ShardReplies> {
    if !s.locks.is_idle() {
        return None;
    }
    if cmds.len() > 1 {
        for c in cmds {
            if let Some(k) = c.first_key() {
                s.dbs[c.db].prefetch_bucket(k);
            }
        }
        for c in cmds {
            if let Some(k) = c.first_key() {
                s.dbs[c.db].prefetch_entry(k);
            }
        }
    }
    let mut out = ReplyBuf::new(Protocol::Resp2);
    let mut ends = Vec::with_capacity(cmds.len());
    for cmd in cmds {
        cmd.exec(s, &mut out);
        ends.push(out.buf.len());
    }
    Some(ShardReplies { buf: out.buf, ends })
}

/// Runs a sub-batch on this thread's shard, in order. A command whose keys are locked by a
/// multi-shard command waits (this task is parked, the thread is not) and the rest wait behind it.
pub async fn run_on_local_shard(cmds: Vec<ShardCmd>) -> ShardReplies {
    let mut replies = ShardReplies::default();
    let mut out = ReplyBuf::new(Protocol::Resp2);
    let mut i = 0;
    while i < cmds.len() {
        let blocked = with_shard(|s| {
            while i < cmds.len() {
                let cmd = &cmds[i];
                if !s.locks.is_idle() {
                    let set = cmd.lock_set();
                    if !s.locks.all_free(&set) {
                        let (tx, rx) = oneshot::channel::<()>();
                        let granted_now = s.locks.acquire(
                            set.clone(),
                            Box::new(move || {
                                let _ = tx.send(());
                            }),
                        ) == Grant::Now;
                        return Some((set, granted_now, rx));
                    }
                }
                cmd.exec(s, &mut out);
                replies.ends.push(out.buf.len());
                i += 1;
            }
            None
        });
        let Some((set, granted_now, rx)) = blocked else {
            break;
        };
        if !granted_now {
            // The sender sits in the lock table until the grant; it is never dropped unfired.
            let _ = rx.await;
        }
        with_shard(|s| {
            cmds[i].exec(s, &mut out);
            s.locks.release(&set);
        });
        replies.ends.push(out.buf.len());
        i += 1;
    }
    replies.buf = out.buf;
    replies
}

/// Where one command's reply is.
enum Slot {
    /// Bytes `start..end` of the batch's local reply buffer.
    Local(usize, usize),
    /// Reply `index` of sub-batch `batch`.
    Remote { batch: usize, index: usize },
}

/// How a command will run.
enum Route {
    /// Rejected before running (unknown command, arity, NOAUTH, CROSSSLOT): the error text.
    Reject(String),
    Shard(usize, ShardCmd),
    Conn(
        Resolved,
        Vec<Bytes>,
        fn(&mut ConnCtx<'_>) -> strata_commands::CmdResult,
    ),
    Async(Resolved, Vec<Bytes>, strata_commands::table::AsyncHandler),
}

struct Pending {
    shard: usize,
    cmds: Vec<ShardCmd>,
}

/// Executes pipelined batches for one connection.
pub struct Batch<'a> {
    pub state: &'a Arc<ServerState>,
    pub session: &'a mut Session,
    pub out: &'a mut ReplyBuf,
}

impl Batch<'_> {
    /// Runs `cmds` and appends their replies to `out` in request order. Commands after one that
    /// closes the connection (QUIT) are not run.
    pub async fn run(&mut self, cmds: Vec<Vec<Bytes>>) {
        let local_shard = current_shard_id().unwrap_or(0);
        // A lone command on this thread's shard runs in place; in a pipeline, commands for this
        // shard form a sub-batch like those for other shards and run while the others are away.
        let single = cmds.len() == 1;
        let mut local = ReplyBuf::new(self.session.proto);
        let mut slots: Vec<(Slot, bool)> = Vec::with_capacity(cmds.len());
        let mut pending: Vec<Pending> = Vec::new();
        let mut done: Vec<ShardReplies> = Vec::new();

        for args in cmds {
            if self.session.close_after_reply {
                break;
            }
            let mode_before = self.session.reply_mode;
            local.proto = self.session.proto;
            let start = local.buf.len();
            let slot = match self.route(args, local_shard) {
                Route::Reject(msg) => {
                    local.error(&msg);
                    Slot::Local(start, local.buf.len())
                }
                Route::Shard(shard, cmd) if shard == local_shard && single => {
                    let ran = with_shard(|s| {
                        if s.locks.is_idle() || s.locks.all_free(&cmd.lock_set()) {
                            cmd.exec(s, &mut local);
                            true
                        } else {
                            false
                        }
                    });
                    if !ran {
                        let r = run_on_local_shard(vec![cmd]).await;
                        local.buf.extend_from_slice(&r.buf);
                    }
                    Slot::Local(start, local.buf.len())
                }
                Route::Shard(shard, cmd) => {
                    let batch = match pending.iter().position(|p| p.shard == shard) {
                        Some(b) => b,
                        None => {
                            pending.push(Pending {
                                shard,
                                cmds: Vec::new(),
                            });
                            pending.len() - 1
                        }
                    };
                    pending[batch].cmds.push(cmd);
                    Slot::Remote {
                        batch: done.len() + batch,
                        index: pending[batch].cmds.len() - 1,
                    }
                }
                Route::Conn(cmd, args, f) => {
                    self.run_conn(&cmd, &args, f, &mut local);
                    Slot::Local(start, local.buf.len())
                }
                Route::Async(cmd, args, f) => {
                    // A barrier: what came before completes first.
                    self.flush(&mut pending, &mut done).await;
                    self.run_async(&cmd, &args, f, &mut local).await;
                    Slot::Local(start, local.buf.len())
                }
            };
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

        let mut starts = vec![0usize; done.len()];
        for (slot, suppress) in slots {
            let bytes = match slot {
                Slot::Local(s, e) => &local.buf[s..e],
                Slot::Remote { batch, index } => {
                    let r = &done[batch];
                    let (s, e) = (starts[batch], r.ends[index]);
                    starts[batch] = e;
                    &r.buf[s..e]
                }
            };
            if !suppress {
                self.out.buf.extend_from_slice(bytes);
            }
        }
        self.out.proto = self.session.proto;
    }

    /// Runs every pending sub-batch and waits for all replies, kept in `pending` order: remote
    /// sub-batches are posted first, then this thread's own runs in place while they are away.
    async fn flush(&self, pending: &mut Vec<Pending>, done: &mut Vec<ShardReplies>) {
        if pending.is_empty() {
            return;
        }
        let set = &self.state.shards;
        let local_shard = current_shard_id();
        let mut local = None;
        let mut remote = Vec::with_capacity(pending.len());
        for (i, p) in pending.drain(..).enumerate() {
            if Some(p.shard) == local_shard {
                local = Some((i, p.cmds));
                continue;
            }
            let (tx, rx) = oneshot::channel();
            let cmds = p.cmds;
            set.post(
                p.shard,
                Box::new(move || match with_shard(|s| run_now(s, &cmds)) {
                    Some(replies) => {
                        let _ = tx.send(replies);
                    }
                    None => {
                        // Keys are locked by a multi-shard command: become a task that waits.
                        monoio::spawn(async move {
                            let _ = tx.send(run_on_local_shard(cmds).await);
                        });
                    }
                }),
            );
            remote.push((i, rx));
        }
        let base = done.len();
        let total = remote.len() + usize::from(local.is_some());
        let mut results: Vec<Option<ShardReplies>> = (0..total).map(|_| None).collect();
        if let Some((i, cmds)) = local {
            let replies = match with_shard(|s| run_now(s, &cmds)) {
                Some(r) => r,
                None => run_on_local_shard(cmds).await,
            };
            results[i] = Some(replies);
        }
        for (i, rx) in remote {
            results[i] = Some(
                rx.await
                    .expect("shard thread exited with a sub-batch pending"),
            );
        }
        done.extend(
            results
                .into_iter()
                .map(|r| r.expect("every sub-batch answered")),
        );
        debug_assert_eq!(done.len(), base + total);
    }

    fn route(&self, args: Vec<Bytes>, local_shard: usize) -> Route {
        let cmd = match table().resolve(&args) {
            Lookup::Unknown(msg) => return Route::Reject(msg),
            Lookup::BadArity(cmd, msg) => return reject(&cmd, msg),
            Lookup::Found(cmd) => cmd,
        };
        if !cmd.spec.flags.has(Flags::NO_AUTH) && !is_authenticated(self.session, self.state) {
            return reject(&cmd, "NOAUTH Authentication required.".into());
        }
        self.session.info.last_cmd.store(cmd.id, Ordering::Relaxed);
        let set = &self.state.shards;
        let single_shard = || {
            let (mut first, mut same) = (None, true);
            cmd.spec.for_each_key(&args, |i, _| {
                let s = set.shard_of_key(&args[i]);
                same &= *first.get_or_insert(s) == s;
            });
            same.then_some(first.unwrap_or(local_shard))
        };
        match cmd.spec.handler {
            Handler::Shard(handler) => match single_shard() {
                Some(shard) => Route::Shard(shard, self.shard_cmd(args, cmd, handler)),
                None => reject(
                    &cmd,
                    "CROSSSLOT Keys in request don't hash to the same slot".into(),
                ),
            },
            Handler::Keys {
                shard: handler,
                multi,
            } => match single_shard() {
                Some(shard) => Route::Shard(shard, self.shard_cmd(args, cmd, handler)),
                None => Route::Async(cmd, args, multi),
            },
            Handler::Conn(f) => Route::Conn(cmd, args, f),
            Handler::Async(f) => Route::Async(cmd, args, f),
            Handler::Container => {
                Route::Reject(format!("ERR unknown subcommand for '{}'", cmd.name))
            }
        }
    }

    fn shard_cmd(
        &self,
        args: Vec<Bytes>,
        cmd: Resolved,
        handler: fn(&mut ShardCtx<'_>) -> strata_commands::CmdResult,
    ) -> ShardCmd {
        ShardCmd {
            args,
            cmd,
            handler,
            db: self.session.db,
            proto: self.session.proto,
        }
    }

    fn run_conn(
        &mut self,
        cmd: &Resolved,
        args: &[Bytes],
        f: fn(&mut ConnCtx<'_>) -> strata_commands::CmdResult,
        out: &mut ReplyBuf,
    ) {
        let start = now_us();
        let mut cx = ConnCtx {
            session: self.session,
            server: self.state,
            args,
            out,
            now: start / 1000,
        };
        let failed = match f(&mut cx) {
            Ok(()) => false,
            Err(e) => {
                cx.out.error(&e.message());
                true
            }
        };
        record(cmd, start, failed);
    }

    async fn run_async(
        &mut self,
        cmd: &Resolved,
        args: &[Bytes],
        f: strata_commands::table::AsyncHandler,
        out: &mut ReplyBuf,
    ) {
        let start = now_us();
        let mut cx = ConnCtx {
            session: self.session,
            server: self.state,
            args,
            out,
            now: start / 1000,
        };
        let failed = match f(&mut cx).await {
            Ok(()) => false,
            Err(e) => {
                cx.out.error(&e.message());
                true
            }
        };
        record(cmd, start, failed);
    }
}

/// Rejects a known command before it runs, counting it in `rejected_calls` as Redis does.
fn reject(cmd: &Resolved, msg: String) -> Route {
    with_shard(|s| s.stats.cmd_mut(cmd.id).rejected_calls += 1);
    Route::Reject(msg)
}

/// Counts a command run on the connection's thread in that thread's stats.
fn record(cmd: &Resolved, start: i64, failed: bool) {
    let usec = (now_us() - start).max(0) as u64;
    with_shard(|s| {
        s.stats.commands += 1;
        let st = s.stats.cmd_mut(cmd.id);
        st.calls += 1;
        st.usec += usec;
        st.failed_calls += failed as u64;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard_cmd(words: &[&str], db: usize) -> ShardCmd {
        let args: Vec<Bytes> = words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect();
        let Lookup::Found(cmd) = table().resolve(&args) else {
            panic!("{words:?} does not resolve")
        };
        let handler = match cmd.spec.handler {
            Handler::Shard(f) | Handler::Keys { shard: f, .. } => f,
            _ => panic!("{words:?} is not a key command"),
        };
        ShardCmd {
            args,
            cmd,
            handler,
            db,
            proto: Protocol::Resp2,
        }
    }

    fn key(db: u32, k: &str) -> LockKey {
        LockKey::Key(db, Bytes::copy_from_slice(k.as_bytes()))
    }

    #[test]
    fn lock_sets_follow_key_positions_and_modes() {
        let set = shard_cmd(&["get", "k"], 2).lock_set();
        assert_eq!(
            set,
            vec![(LockKey::Db(2), Mode::Shared), (key(2, "k"), Mode::Shared)]
        );
        let set = shard_cmd(&["mset", "a", "1", "b", "2"], 0).lock_set();
        assert!(
            set.contains(&(key(0, "a"), Mode::Exclusive))
                && set.contains(&(key(0, "b"), Mode::Exclusive))
        );
        assert!(!set.contains(&(key(0, "1"), Mode::Exclusive)));
    }

    #[test]
    fn move_and_copy_lock_the_destination_key_in_its_database() {
        let set = shard_cmd(&["move", "k", "3"], 0).lock_set();
        assert!(set.contains(&(key(0, "k"), Mode::Exclusive)));
        assert!(set.contains(&(key(3, "k"), Mode::Exclusive)));
        assert!(set.contains(&(LockKey::Db(3), Mode::Shared)));
        let set = shard_cmd(&["copy", "a", "b", "DB", "5", "REPLACE"], 1).lock_set();
        assert!(set.contains(&(key(5, "b"), Mode::Exclusive)));
        // Same database: nothing extra.
        assert_eq!(shard_cmd(&["copy", "a", "b"], 1).lock_set().len(), 3);
    }
}
