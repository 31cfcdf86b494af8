//! Replication, as far as it exists: WAIT. A master without replicas answers WAIT with 0 replicas
//! acknowledged. This module is where the replication orchestration (REPLICAOF, SYNC/PSYNC, the
//! replication backlog and the replica's offsets) lands, beside the persistence orchestration;
//! both drive the shards through the server-wide state, never through a data-type family.

use futures_util::future::LocalBoxFuture;

use crate::ctx::ConnCtx;
use crate::error::{CmdError, CmdResult};
use crate::table::{Arg, CommandSpec, Flags, Handler};

const WAIT_ARGS: &[Arg] = &[Arg::integer("numreplicas"), Arg::integer("timeout")];

/// The replication commands. Summaries, flags and tips are Redis 7.0's.
pub static COMMANDS: &[CommandSpec] = &[CommandSpec::new(
    "generic",
    "wait",
    3,
    Flags::NOSCRIPT,
    &[],
    "Wait for the synchronous replication of all the write commands sent in the context of the current connection",
    "3.0.0",
    "O(1)",
    Handler::Async(wait),
)
.with_args(WAIT_ARGS)
.with_tips(&["request_policy:all_shards", "response_policy:agg_min"])
.with_acl(&["@connection"])];

/// WAIT numreplicas timeout → the number of replicas that acknowledged the client's writes: 0, as
/// a master without replicas answers (until replication exists). Asking for none answers at once;
/// otherwise it waits `timeout` ms (0: until CLIENT UNBLOCK or the client leaves), as Redis does
/// when too few replicas acknowledge; inside MULTI it never waits.
fn wait<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let wanted = strata_core::num::parse_i64(&cx.args[1]).ok_or(CmdError::NotInteger)?;
        let ms = crate::args::parse_timeout_ms(&cx.args[2])?;
        if wanted > 0 && cx.session.txn_owner.is_none() {
            let info = cx.session.info.clone();
            info.blocked
                .store(true, std::sync::atomic::Ordering::Relaxed);
            info.unblockable
                .store(true, std::sync::atomic::Ordering::Release);
            let until = async {
                if ms > 0 {
                    (cx.server.sleep)(std::time::Duration::from_millis(ms as u64)).await;
                } else {
                    std::future::pending::<()>().await;
                }
            };
            let how = match futures_util::future::select(
                std::pin::pin!(until),
                std::pin::pin!(info.unblocked()),
            )
            .await
            {
                futures_util::future::Either::Right((how, _)) => how,
                futures_util::future::Either::Left(_) => 0,
            };
            info.unblockable
                .store(false, std::sync::atomic::Ordering::Release);
            info.blocked
                .store(false, std::sync::atomic::Ordering::Relaxed);
            if how == crate::clients::UNBLOCK_ERROR {
                return Err(CmdError::msg(
                    "UNBLOCKED client unblocked via CLIENT UNBLOCK",
                ));
            }
            if how == crate::clients::UNBLOCK_TIMEOUT {
                // Redis 7.0 counts a command ended by CLIENT UNBLOCK as a failed call even when
                // it answers as on timeout (no error reply).
                if let crate::table::Lookup::Found(me) = crate::table::process().resolve(cx.args) {
                    strata_shard::with_shard(|s| s.stats.cmd_mut(me.id).failed_calls += 1);
                }
            }
        }
        cx.out.int(0);
        Ok(())
    })
}
