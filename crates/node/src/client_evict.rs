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

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use crate::ctx::{ClientInfo, ServerState, Session};

/// `maxmemory-clients` as set: bytes (positive), a percentage of `maxmemory` (negative), 0: off.
static SETTING: AtomicI64 = AtomicI64::new(0);
/// Sum of what every live client published (bytes).
static TOTAL: AtomicI64 = AtomicI64::new(0);
/// Clients evicted since start (INFO `evicted_clients`).
static EVICTED: AtomicU64 = AtomicU64::new(0);
/// A client that is gone publishes nothing more.
const GONE: u64 = u64::MAX;
/// The smallest limit honoured (Redis's floor).
const FLOOR: u64 = 128 * 1024;
/// What one subscription or one tracking prefix is counted for: its table entries (the names
/// are not counted, as Redis counts only its structures' overhead there).
const ENTRY_OVERHEAD: u64 = 64;

/// Whether a `maxmemory-clients` is set: the one load the hot paths pay.
#[inline]
pub fn enabled() -> bool {
    SETTING.load(Ordering::Relaxed) != 0
}

/// Parses a `maxmemory-clients` value: a memory size, or `N%` with N at most 100. Returns the
/// setting's stored form (bytes, or minus the percentage) or Redis's reason.
pub fn parse(value: &str) -> Result<i64, String> {
    if let Some(p) = value.strip_suffix('%') {
        let p: i64 = p
            .parse()
            .ok()
            .filter(|p| *p >= 0)
            .ok_or("argument must be a memory or percent value")?;
        if p > 100 {
            return Err("percentage argument must be less or equal to 100".into());
        }
        return Ok(-p);
    }
    if value.is_empty() {
        return Ok(0);
    }
    crate::config::parse_memory(value)
        .ok_or_else(|| "argument must be a memory or percent value".into())
}

/// The canonical text of a stored setting (CONFIG GET): bytes, or `N%`.
pub fn format(setting: i64) -> String {
    if setting < 0 {
        format!("{}%", -setting)
    } else {
        setting.to_string()
    }
}

/// Applies a validated `maxmemory-clients` value.
pub fn set(value: &str) {
    SETTING.store(parse(value).unwrap_or(0), Ordering::Relaxed);
}

/// The limit in bytes now (0: none): a percentage needs `maxmemory`.
pub fn limit() -> u64 {
    let setting = SETTING.load(Ordering::Relaxed);
    let bytes = match setting {
        0 => return 0,
        s if s > 0 => s as u64,
        p => match strata_shard::evict::maxmemory() {
            0 => return 0,
            max => (max as u128 * (-p) as u128 / 100).min(u64::MAX as u128) as u64,
        },
    };
    bytes.max(FLOOR)
}

/// Clients evicted since start.
pub fn evicted() -> u64 {
    EVICTED.load(Ordering::Relaxed)
}

/// Zeroes `evicted_clients` (CONFIG RESETSTAT).
pub fn reset_stats() {
    EVICTED.store(0, Ordering::Relaxed);
}

/// Brings the total up to date with `info`'s current size (see the module docs).
pub fn refresh(info: &ClientInfo) {
    let now = info.tot_mem();
    let mut old = info.mem_published.load(Ordering::Relaxed);
    loop {
        if old == GONE || old == now {
            return;
        }
        match info.mem_published.compare_exchange_weak(
            old,
            now,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => break,
            Err(seen) => old = seen,
        }
    }
    TOTAL.fetch_add(now as i64 - old as i64, Ordering::Relaxed);
}

/// Takes a closed client out of the total for good.
pub fn forget(info: &ClientInfo) {
    let old = info.mem_published.swap(GONE, Ordering::Relaxed);
    if old != GONE {
        TOTAL.fetch_sub(old as i64, Ordering::Relaxed);
    }
    let evicted = info.mem_evicted.swap(0, Ordering::Relaxed);
    if evicted != 0 {
        strata_shard::evict::clients_closing(-(evicted as i64));
    }
}

/// What a session holds beyond its buffers, counted as its commands add it: the MULTI queue and
/// WATCHed keys (so far counted: entries and bytes, extended by the entries added since; a
/// shorter list was emptied and is counted again), subscriptions and tracking prefixes.
#[derive(Default)]
pub struct Counted {
    queued: usize,
    queued_bytes: u64,
    watched: usize,
    watched_bytes: u64,
    /// Something non-zero was published: the next batch must publish (zeros, if need be).
    published: bool,
}

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
    if limit == 0 || TOTAL.load(Ordering::Relaxed) < limit as i64 {
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
        eprintln!(
            "Evicting client: {}",
            crate::connection::client_line(c, strata_shard::now_ms(), 0, server.table)
        );
        // Until its connection has closed, its memory is not what key eviction should free.
        if c.mem_evicted
            .compare_exchange(0, mem.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
        {
            strata_shard::evict::clients_closing(mem.max(1) as i64);
        }
        c.kill();
        EVICTED.fetch_add(1, Ordering::Relaxed);
        total -= mem;
        evicted_me |= me.is_some_and(|m| std::ptr::eq(m, &**c));
    }
    if total >= limit {
        eprintln!("Over client maxmemory after evicting all evictable clients");
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_as_redis_accepts_them() {
        assert_eq!(parse("10%"), Ok(-10));
        assert_eq!(parse("0%"), Ok(0));
        assert_eq!(parse("100%"), Ok(-100));
        assert_eq!(
            parse("101%"),
            Err("percentage argument must be less or equal to 100".into())
        );
        assert_eq!(parse("1mb"), Ok(1 << 20));
        assert_eq!(parse(""), Ok(0));
        for bad in ["-1", "abc", "-5%", "x%"] {
            assert_eq!(
                parse(bad),
                Err("argument must be a memory or percent value".into()),
                "{bad}"
            );
        }
        assert_eq!(format(-7), "7%");
        assert_eq!(format(1 << 20), "1048576");
    }
}
