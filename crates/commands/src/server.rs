//! Server commands: INFO, CONFIG, COMMAND, DBSIZE, FLUSHDB, FLUSHALL, DEBUG, SHUTDOWN, TIME, ...

use futures_util::future::LocalBoxFuture;

use crate::ctx::ConnCtx;
use crate::error::CmdResult;
use crate::table::{CommandSpec, Flags, Handler, KeySpec};

/// The server family.
pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    name: "dbsize",
    arity: 1,
    flags: Flags::READONLY.or(Flags::FAST),
    keys: KeySpec::NONE,
    group: "server",
    summary: "Returns the number of keys in the database.",
    since: "1.0.0",
    complexity: "O(1)",
    acl: &["@keyspace"],
    tips: &["request_policy:all_shards", "response_policy:agg_sum"],
    handler: Handler::Async(dbsize),
    subcommands: &[],
}];

fn dbsize<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let db = cx.session.db;
        let sizes = cx.shards().call_all(move |s| s.dbs[db].len()).await;
        cx.out.int(sizes.iter().sum::<usize>() as i64);
        Ok(())
    })
}
