//! Client eviction: `maxmemory-clients`, as Redis 7.0 has it.
//!
//! Every client's memory (its read buffer, output not yet written, MULTI queue, WATCHed keys,
//! subscriptions and tracking prefixes: [`ClientInfo::tot_mem`]) counts toward one total. When the
//! total reaches the limit, the largest clients are closed until it is below it again, except
//! those that set CLIENT NO-EVICT (their memory still counts, as in Redis). The limit is
//! `maxmemory-clients` bytes, or a percentage of `maxmemory`; at least 128 KiB, so that a bad
//! setting cannot lock every client out.
//!
//! **Keeping the total.** A client's size changes on its own thread (reads, batches) and on
//! others (pushes into its output). Each client records what it last added to the total
//! ([`ClientInfo`]'s `mem_published`); a refresh swaps in its current size with a compare-and-swap
//! and adds the difference, so the total stays the sum of what the live clients published whatever
//! thread refreshes, and a client gone (`GONE`) is never added back. Refreshes happen only while
//! a limit is set (one relaxed load otherwise): after each read and each batch on the client's
//! own thread, and whenever its output moves. Setting a limit refreshes every client first.
//!
//! **When clients are evicted.** After each read (a client sending one huge argument is caught
//! before its command runs) and after each batch (a client that just turned CLIENT NO-EVICT off
//! included), on every connection, as Redis checks before each command and after reading; and on
//! CONFIG SET of either limit. A check costs a load and a comparison while the total is under the
//! limit. Over it, the clients are listed,
//! refreshed and closed from the largest down (Redis walks buckets of powers of two, so its order
//! within a factor of two is arbitrary; this one is exact). A client closed this way counts in
//! INFO `evicted_clients`; it goes as a CLIENT KILL does, its connection's thread closing it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::clients::{client_line, count_evicted, enabled, limit, refresh, ClientInfo};
use crate::state::{ServerState, Session};

/// What one subscription or one tracking prefix is counted for: its table entries (the names
/// are not counted, as Redis counts only its structures' overhead there).
const ENTRY_OVERHEAD: u64 = 64;

/// Owner only, after a batch: publishes what `session` holds beyond its buffers into its
/// [`ClientInfo`] (CLIENT LIST `multi-mem`, `tot-mem`). O(what the batch added); a load or four
/// for a session that holds none of it and published none before (the common case).
#[inline]
pub fn publish_session(session: &mut Session) {
    if session.multi.is_none()
        && session.watched.is_empty()
        && session.tracking.is_none()
        && session.pubsub.total() == 0
        && !session.mem.published
    {
        return;
    }
    publish_held(session);
}

fn publish_held(session: &mut Session) {
    let c = &mut session.mem;
    let queue = session.multi.as_deref().unwrap_or_default();
    if queue.len() < c.queued {
        (c.queued, c.queued_bytes) = (0, 0);
    }
    for q in &queue[c.queued..] {
        c.queued_bytes += (std::mem::size_of_val(q)
            + q.args.len() * std::mem::size_of::<bytes::Bytes>()
            + q.args.iter().map(|a| a.len()).sum::<usize>()) as u64;
    }
    c.queued = queue.len();
    if session.watched.len() < c.watched {
        (c.watched, c.watched_bytes) = (0, 0);
    }
    for (_, key) in &session.watched[c.watched..] {
        c.watched_bytes += (std::mem::size_of::<(usize, bytes::Bytes)>() + key.len()) as u64;
    }
    c.watched = session.watched.len();
    let entries =
        session.pubsub.total() + session.tracking.as_ref().map_or(0, |t| t.prefixes.len());
    let info = &session.info;
    let (multi, aux) = (
        c.queued_bytes + c.watched_bytes,
        entries as u64 * ENTRY_OVERHEAD,
    );
    c.published = multi != 0 || aux != 0;
    info.multi_mem.store(multi, Ordering::Relaxed);
    info.aux_mem.store(aux, Ordering::Relaxed);
}

/// `info`'s size brought up to date, then [`check`]: what a connection does after it read and
/// after it ran a batch. False at once without a limit. True if `info` was evicted.
pub fn settle(server: &ServerState, info: &ClientInfo) -> bool {
    if !enabled() {
        return false;
    }
    refresh(info);
    check(server, Some(info))
}

/// Evicts clients if the total has reached the limit (see the module docs). True if `me` was
/// among them (its connection must not run anything more).
pub fn check(server: &ServerState, me: Option<&ClientInfo>) -> bool {
    let limit = limit();
    if limit == 0 || crate::clients::total() < limit as i64 {
        return false;
    }
    evict(server, limit, me)
}

#[cold]
fn evict(server: &ServerState, limit: u64, me: Option<&ClientInfo>) -> bool {
    let clients = server.client_list();
    let mut total = 0u64;
    let mut candidates: Vec<(u64, &Arc<ClientInfo>)> = Vec::new();
    for c in &clients {
        if c.killed.load(Ordering::Relaxed) {
            // On its way out: its thread takes it out of the total when it closes.
            continue;
        }
        refresh(c);
        let mem = c.tot_mem();
        total += mem;
        if !c.no_evict.load(Ordering::Relaxed) {
            candidates.push((mem, c));
        }
    }
    if total < limit {
        return false;
    }
    candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
    let mut evicted_me = false;
    for (mem, c) in candidates {
        if total < limit {
            break;
        }
        crate::server_log!(
            Verbose,
            "Evicting client: {}",
            client_line(c, strata_shard::now_ms(), 0)
        );
        // Until its connection has closed, its memory is not what key eviction should free.
        if c.mem_evicted
            .compare_exchange(0, mem.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            strata_shard::evict::clients_closing(mem.max(1) as i64);
        }
        c.kill();
        count_evicted();
        total -= mem;
        evicted_me |= me.is_some_and(|m| std::ptr::eq(m, &**c));
    }
    if total >= limit {
        crate::server_log!(
            Warning,
            "Over client maxmemory after evicting all evictable clients"
        );
    }
    evicted_me
}

/// After CONFIG SET of `maxmemory-clients` or `maxmemory`: a limit just set starts from every
/// client's current size, and takes effect at once.
pub fn configured(server: &ServerState, me: Option<&ClientInfo>) -> bool {
    if !enabled() {
        return false;
    }
    for c in server.client_list() {
        refresh(&c);
    }
    check(server, me)
}
