//! Transactions (Redis's multi.c): MULTI, EXEC, DISCARD, WATCH and UNWATCH.
//!
//! * **Queueing.** After MULTI the dispatcher queues every command but EXEC, DISCARD, MULTI, WATCH,
//!   QUIT and RESET, answering `+QUEUED`; a command rejected while queueing (unknown, wrong arity,
//!   NOAUTH, not allowed in a transaction) is answered with its error and makes EXEC abort with
//!   EXECABORT, as in Redis. The queue lives in the [`Session`].
//! * **EXEC** is run by the dispatcher (`Handler::Exec`): it takes, as one lock owner, the locks of
//!   every key the queued commands touch (and whole databases for FLUSHDB, KEYS and the like), shard
//!   by shard in ascending order; checks the watches; runs the commands as a pipeline inside that
//!   lock context (each command re-enters the held locks; commands for one shard travel together);
//!   then releases. No other client can observe a state between two commands of the transaction.
//!   A transaction of one-shard key commands without WATCH skips the up-front locks: its body
//!   joins the pipeline's sub-batches, flushed in atomic mode (see docs/architecture.md).
//! * **WATCH** registers the client's [`Watch`] on each key's shard; the write path touches it
//!   (see `strata_shard::watch`). EXEC aborts with a null reply if it was touched, or if a key alive
//!   at WATCH time has expired since. EXEC, DISCARD, UNWATCH, RESET and closing the connection
//!   withdraw every watch.

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strata_shard::{ShardSet, Watch};

use crate::ctx::ConnCtx;
use crate::error::{CmdError, CmdResult};
use crate::state::Session;
use crate::table::{Arg, CommandSpec, Flags, Handler, KeyFlags, KeySpec};

const TXN: Flags = Flags::NOSCRIPT
    .or(Flags::LOADING)
    .or(Flags::STALE)
    .or(Flags::FAST)
    .or(Flags::ALLOW_BUSY);

#[allow(clippy::too_many_arguments)]
const fn cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: &'static [KeySpec],
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec::new(
        "transactions",
        name,
        arity,
        flags,
        keys,
        summary,
        since,
        complexity,
        handler,
    )
    .with_acl(&["@transaction"])
}

const K_WATCH: &[KeySpec] = &[KeySpec::range(1, -1, 1, KeyFlags::RO)];
const A_WATCH: &[Arg] = &[Arg::key("key", 0).multiple()];

/// The family's commands.
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("multi", 1, TXN, &[], "Mark the start of a transaction block", "1.2.0", "O(1)", Handler::Conn(multi)),
    cmd("exec", 1, Flags::NOSCRIPT.or(Flags::LOADING).or(Flags::STALE).or(Flags::SKIP_SLOWLOG), &[], "Execute all commands issued after MULTI", "1.2.0", "Depends on commands in the transaction", Handler::Exec),
    cmd("discard", 1, TXN, &[], "Discard all commands issued after MULTI", "2.0.0", "O(N), when N is the number of queued commands", Handler::Async(discard)),
    cmd("watch", -2, TXN, K_WATCH, "Watch the given keys to determine execution of the MULTI/EXEC block", "2.2.0", "O(1) for every key.", Handler::Async(watch))
        .with_args(A_WATCH),
    cmd("unwatch", 1, TXN, &[], "Forget about all watched keys", "2.2.0", "O(1)", Handler::Async(unwatch)),
];

/// Commands that run at once even inside MULTI (everything else is queued), by their name
/// (`args[0]`, any case).
pub fn runs_inside_multi(args: &[Bytes]) -> bool {
    args.first().is_some_and(|name| {
        ["exec", "discard", "multi", "watch", "quit", "reset"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n.as_bytes()))
    })
}

/// MULTI
fn multi(cx: &mut ConnCtx<'_>) -> CmdResult {
    if cx.session.multi.is_some() {
        return Err(CmdError::msg("ERR MULTI calls can not be nested"));
    }
    cx.session.multi = Some(Vec::with_capacity(8));
    cx.session.multi_failed = false;
    cx.session.info.multi.store(0, Ordering::Relaxed);
    cx.out.ok();
    Ok(())
}

/// DISCARD
fn discard<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        if cx.session.multi.is_none() {
            return Err(CmdError::msg("ERR DISCARD without MULTI"));
        }
        cx.session.multi = None;
        cx.session.multi_failed = false;
        cx.session.info.multi.store(-1, Ordering::Relaxed);
        unwatch_all(cx.session, &cx.server.shards).await;
        cx.out.ok();
        Ok(())
    })
}

/// WATCH key [key ...]
fn watch<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        if cx.session.multi.is_some() {
            return Err(CmdError::msg("ERR WATCH inside MULTI is not allowed"));
        }
        let set = cx.server.shards.clone();
        let w = cx.session.watch.get_or_insert_with(Watch::new).clone();
        let db = cx.session.db;
        let now = cx.now;
        // Keys not watched yet in this database, each once, grouped by shard: one message per
        // shard, and a hash set rather than a scan of the list per key (Redis's WATCH scans its
        // list for every key, quadratic in the keys watched).
        let mut seen: HashSet<&Bytes> = cx
            .session
            .watched
            .iter()
            .filter(|(d, _)| *d == db)
            .map(|(_, k)| k)
            .collect();
        let mut new = Vec::new();
        for key in &cx.args[1..] {
            if seen.insert(key) {
                // A copy: a WATCH may last, and a slice would pin the connection's read buffer.
                new.push((db, Bytes::copy_from_slice(key)));
            }
        }
        on_their_shards(&set, new.iter().cloned(), move |s, keys| {
            for (db, k) in keys {
                s.db_mut(db).watch(&k, &w, now);
            }
        })
        .await;
        cx.session.watched.extend(new);
        cx.out.ok();
        Ok(())
    })
}

/// UNWATCH
fn unwatch<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        unwatch_all(cx.session, &cx.server.shards).await;
        cx.out.ok();
        Ok(())
    })
}

/// Withdraws every watch of the session (one message per shard) and forgets them.
pub async fn unwatch_all(session: &mut Session, set: &ShardSet) {
    let Some(w) = session.watch.take() else {
        session.watched.clear();
        return;
    };
    let watched = std::mem::take(&mut session.watched);
    on_their_shards(set, watched, move |s, keys| {
        for (db, key) in keys {
            s.db_mut(db).unwatch(&key, &w);
        }
    })
    .await;
}

/// Runs `f` on the shard of each of the watched `keys` (database, key) with that shard's share,
/// all shards at once: one message per shard, whatever the number of keys.
async fn on_their_shards<R: Send + 'static>(
    set: &ShardSet,
    keys: impl IntoIterator<Item = (usize, Bytes)>,
    f: impl Fn(&mut strata_shard::Shard, Vec<(usize, Bytes)>) -> R + Clone + Send + 'static,
) -> Vec<R> {
    let mut by_shard: Vec<Vec<(usize, Bytes)>> = vec![Vec::new(); set.len()];
    for (db, key) in keys {
        by_shard[set.shard_of_key(&key)].push((db, key));
    }
    let calls = by_shard
        .into_iter()
        .enumerate()
        .filter(|(_, keys)| !keys.is_empty())
        .map(|(shard, keys)| {
            let f = f.clone();
            set.call(shard, move |s| f(s, keys))
        });
    futures_util::future::join_all(calls).await
}

/// True if EXEC must abort because of a watched key: the watch was touched, or a key alive when
/// watched has expired since (checked on its shard, without removing it; one message per shard).
pub async fn watch_broken(session: &Session, set: &ShardSet, now: i64) -> bool {
    let Some(w) = &session.watch else {
        return false;
    };
    if w.is_touched() {
        return true;
    }
    let w2 = w.clone();
    let expired = on_their_shards(set, session.watched.iter().cloned(), move |s, keys| {
        keys.iter()
            .any(|(db, k)| s.db_mut(*db).watched_key_expired(k, &w2, now))
    })
    .await;
    if expired.into_iter().any(|e| e) {
        return true;
    }
    w.is_touched()
}
