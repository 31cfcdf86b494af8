//! Admission: whether the next command of a batch may run now, checked before it is routed and in
//! the order of Redis's processCommand.
//!
//! * The client's output limit ([`Batch::outgrown`]): past it the client is closed and nothing of
//!   the batch is sent.
//! * CLIENT PAUSE ([`Batch::paused`], [`Batch::wait_unpaused`]): a held command waits, and the
//!   client's end (a kill, or an event on its socket) ends the wait.
//! * `maxmemory-clients` ([`Batch::evicted`]): clients are evicted before keys.
//! * `maxmemory` ([`out_of_memory`]): eviction before every command, and whether the process stays
//!   over the limit, which routing then turns into OOM rejections.
//!
//! A check that ends the client leaves what already ran done and runs nothing after it, as Redis
//! stops reading a client it closes.

use std::sync::atomic::Ordering;

use bytes::Bytes;
use strata_commands::table;
use strata_node::table::CommandSpec;
use strata_node::{Flags, Handler, Lookup};
use strata_resp::ReplyBuf;
use strata_shard::{now_ms, with_shard, ShardSet};

use super::shard_cmd::ShardReplies;
use super::Batch;

impl Batch<'_> {
    /// Whether the replies so far outgrew the client's output limit (`limit`, see
    /// [`ClientInfo::output_budget`](strata_node::ClientInfo::output_budget)); if so the client
    /// is closed and nothing of this batch is sent, as Redis closes a client whose reply takes it
    /// past its hard limit and stops reading its commands. What already ran stays done; nothing
    /// after it runs.
    pub(super) fn outgrown(
        &mut self,
        limit: usize,
        local: &ReplyBuf,
        done: &[ShardReplies],
    ) -> bool {
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

    /// `maxmemory-clients` before a command: publishes the replies the batch holds so far as the
    /// client's and evicts clients if the total is over the limit. True if this client was
    /// evicted: it is closed, and nothing more of the batch runs or is sent (as `outgrown`).
    #[cold]
    pub(super) fn evicted(&mut self, local: &ReplyBuf, done: &[ShardReplies]) -> bool {
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

    /// CLIENT PAUSE: whether the command must wait now (every command under ALL; under WRITE those
    /// that write or may replicate, and EXEC of a transaction holding one), and if so whether it
    /// writes. A command Redis would reject (unknown, wrong arity) is not held: it fails at once.
    pub(super) fn paused(&self, args: &[Bytes]) -> Option<bool> {
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
    pub(super) async fn wait_unpaused(&mut self, write: bool) -> bool {
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
}

/// Redis's performEvictions before a command, over every shard: this thread's shard evicts its
/// share of the excess, then, if the process is still over the limit, every other shard evicts
/// its share while this task waits. True if the process stays over the limit with nothing left to
/// evict: commands that may grow memory are then refused.
#[cold]
pub(super) async fn out_of_memory(shards: &ShardSet) -> bool {
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
