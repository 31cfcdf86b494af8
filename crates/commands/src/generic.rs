//! Key-space commands that work on keys of any type: DEL, EXISTS, EXPIRE, RENAME, SCAN, ... (Redis's db.c
//! and expire.c).

use bytes::Bytes;
use futures_util::future::{join_all, LocalBoxFuture};
use strata_shard::{Db, Mode};

use crate::ctx::{ConnCtx, ShardCtx};
use crate::error::CmdResult;
use crate::table::{CommandSpec, Flags, Handler, KeySpec};

const fn cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: KeySpec,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        keys,
        group: "generic",
        summary,
        since,
        complexity,
        acl: &[],
        tips: &[],
        handler,
        subcommands: &[],
    }
}

/// The generic (keyspace) family.
pub static COMMANDS: &[CommandSpec] = &[cmd(
    "del",
    -2,
    Flags::WRITE,
    KeySpec::ALL,
    "Deletes one or more keys.",
    "1.0.0",
    "O(N) where N is the number of keys that will be removed.",
    Handler::Keys {
        shard: del,
        multi: del_multi,
    },
)];

/// Deletes `keys`, returning how many existed.
pub fn op_del(db: &mut Db, keys: &[Bytes], now: i64) -> i64 {
    keys.iter().filter(|k| db.remove(k, now).is_some()).count() as i64
}

fn del(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let n = op_del(&mut cx.shard.dbs[cx.db], &cx.args[1..], now);
    cx.out.int(n);
    Ok(())
}

fn del_multi<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (db, now) = (cx.session.db, cx.now);
        let set = cx.shards().clone();
        let keys = &cx.args[1..];
        let lock = set
            .lock_keys(db as u32, keys.iter().map(|k| (k.clone(), Mode::Exclusive)))
            .await;
        let parts = lock.shards().map(|shard| {
            let ks: Vec<Bytes> = keys
                .iter()
                .filter(|k| set.shard_of_key(k) == shard)
                .cloned()
                .collect();
            lock.run(shard, move |s| op_del(&mut s.dbs[db], &ks, now))
        });
        let n: i64 = join_all(parts).await.into_iter().sum();
        lock.release();
        cx.out.int(n);
        Ok(())
    })
}
