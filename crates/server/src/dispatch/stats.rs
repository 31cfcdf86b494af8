//! Counting what ran on the connection's thread: INFO commandstats and errorstats, latency samples
//! and the slow log (a sub-batch's commands count themselves on their shard, in
//! [`ShardCmd::exec`](super::ShardCmd::exec), and find their client's name for the slow log through
//! [`THREAD_STATE`]). A handler's error becomes its reply here too, and the statistics read its
//! code in place, so an error is never copied to be counted.

use std::sync::Arc;

use bytes::Bytes;
use strata_node::services::latency;
use strata_node::services::slowlog;
use strata_node::table::Resolved;
use strata_node::{ClientInfo, CmdResult, ServerState};
use strata_resp::ReplyBuf;
use strata_shard::{now_ms, now_us, with_shard};

/// Writes a handler's error, if it failed, as its reply; returns where that reply starts in
/// `out`, so the statistics read its code in place (no copy of the message).
pub(super) fn reply_error(out: &mut ReplyBuf, result: CmdResult) -> Option<usize> {
    let e = result.err()?;
    let at = out.buf.len();
    out.error(&e.message());
    Some(at)
}

/// Counts a command run on the connection's thread in that thread's stats; returns how long it
/// ran (µs).
pub(super) fn record(cmd: &Resolved, start: i64, error: Option<&[u8]>) -> u64 {
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
pub(super) fn record_logged(
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
pub(super) fn client_label(info: &ClientInfo) -> (String, Bytes) {
    let name = info.name.lock().unwrap_or_else(|e| e.into_inner()).clone();
    (info.addr.clone(), name.unwrap_or_default())
}

thread_local! {
    /// The server this shard thread serves, for what a shard-side command needs of it only rarely
    /// (a slow command's client address and name). Set once per shard thread at start-up.
    pub(super) static THREAD_STATE: std::cell::OnceCell<Arc<ServerState>> =
        const { std::cell::OnceCell::new() };
}

/// Makes `state` reachable from this shard thread's commands (see [`THREAD_STATE`]).
pub(crate) fn set_thread_state(state: Arc<ServerState>) {
    THREAD_STATE.with(|st| {
        let _ = st.set(state);
    });
}
