//! DBSIZE, FLUSHDB, FLUSHALL, SWAPDB: whole-database commands, under the database locks of every
//! shard so a multi-key command never sees one shard flushed and another not.

use super::*;

pub(super) fn dbsize<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let db = cx.session.db;
        let sizes = cx.shards().call_all(move |s| s.db_mut(db).len()).await;
        cx.out.int(sizes.iter().sum::<usize>() as i64);
        Ok(())
    })
}

/// FLUSHDB/FLUSHALL's optional ASYNC|SYNC: true for SYNC, which is also the default (Redis's
/// `lazyfree-lazy-user-flush no`).
pub(super) fn parse_flush_mode(args: &[Bytes]) -> Result<bool, CmdError> {
    match args {
        [_] => Ok(true),
        [_, mode] if eq_ci(mode, "sync") => Ok(true),
        [_, mode] if eq_ci(mode, "async") => Ok(false),
        _ => Err(CmdError::Syntax),
    }
}

/// Empties databases `dbs` on every shard, under database locks so that no multi-key command
/// runs half before and half after. Each shard swaps its tables out in O(1); their memory is freed
/// by each shard's background tick in slices. With `sync`, this returns once that is done (the
/// wait blocks no thread); otherwise at once.
pub(super) async fn flush(cx: &ConnCtx<'_>, dbs: Vec<u32>, sync: bool) {
    let set = cx.shards().clone();
    let lock = set
        .lock_dbs_as(cx.lock_owner(), &dbs, strata_shard::Mode::Exclusive)
        .await;
    let parts = lock.shards().map(|shard| {
        let dbs: Vec<usize> = dbs.iter().map(|&d| d as usize).collect();
        lock.run(shard, move |s| s.flush(&dbs))
    });
    let freed = join_all(parts).await;
    lock.release();
    if sync {
        join_all(freed).await;
    }
}

/// FLUSHDB [ASYNC|SYNC] → OK.
pub(super) fn flushdb<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let sync = parse_flush_mode(cx.args)?;
        flush(cx, vec![cx.session.db as u32], sync).await;
        cx.out.ok();
        Ok(())
    })
}

/// FLUSHALL [ASYNC|SYNC] → OK.
pub(super) fn flushall<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let sync = parse_flush_mode(cx.args)?;
        let n = cx.server.config.get_i64("databases") as u32;
        flush(cx, (0..n).collect(), sync).await;
        // As Redis: a background save in progress is stopped, and with save points the (now
        // empty) dataset is saved at once (no change left counted).
        if persist::cancel_background() {
            persist::wait_idle().await;
        }
        if !persist::save_points(&cx.server.config).is_empty() {
            persist::wait_idle().await;
            let _ = persist::save(cx.server, cx.lock_owner()).await;
            persist::reset_dirty(persist::dirty_total(cx.shards()).await);
        }
        cx.out.ok();
        Ok(())
    })
}

/// SWAPDB index1 index2 → OK: the two databases trade contents on every shard at once.
pub(super) fn swapdb<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let index = |arg: &Bytes, msg: &'static str| {
            strata_core::num::parse_i64(arg)
                .filter(|v| i32::try_from(*v).is_ok())
                .ok_or(CmdError::msg(msg))
        };
        let a = index(&cx.args[1], "ERR invalid first DB index")?;
        let b = index(&cx.args[2], "ERR invalid second DB index")?;
        let n = cx.server.config.get_i64("databases");
        if a < 0 || a >= n || b < 0 || b >= n {
            return Err(CmdError::DbIndexOutOfRange);
        }
        if a != b {
            let (a, b) = (a as u32, b as u32);
            let set = cx.shards().clone();
            let lock = set
                .lock_dbs_as(cx.lock_owner(), &[a, b], strata_shard::Mode::Exclusive)
                .await;
            let parts = lock.shards().map(|shard| {
                lock.run(shard, move |s| {
                    s.swap_dbs(a as usize, b as usize, shard == 0)
                })
            });
            join_all(parts).await;
            lock.release();
        } else {
            // Nothing moves, but Redis counts the command as a change (a `save` point sees it).
            let db = a as usize;
            cx.shards()
                .call(0, move |s| s.db_mut(db).count_change())
                .await;
        }
        cx.out.ok();
        Ok(())
    })
}
