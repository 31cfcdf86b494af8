//! Settings read on hot paths, kept as atomics: the configuration store writes them (start-up,
//! CONFIG SET) and the services that act on them read them with one relaxed load per command.
//! Keeping them here, below both, lets the configuration apply a setting without importing the
//! service that uses it.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// `slowlog-log-slower-than` (µs; negative: off).
static SLOWLOG_SLOWER_THAN: AtomicI64 = AtomicI64::new(10_000);
/// `slowlog-max-len`.
static SLOWLOG_MAX_LEN: AtomicU64 = AtomicU64::new(128);
/// `latency-monitor-threshold` (ms; 0: off).
static LATENCY_THRESHOLD_MS: AtomicU64 = AtomicU64::new(0);
/// `maxmemory-clients` as set: bytes (positive), a percentage of `maxmemory` (negative), 0: off.
static MAXMEMORY_CLIENTS: AtomicI64 = AtomicI64::new(0);

/// Applies `slowlog-log-slower-than`.
pub fn set_slowlog_slower_than(usec: i64) {
    SLOWLOG_SLOWER_THAN.store(usec, Ordering::Relaxed);
}

/// `slowlog-log-slower-than` (µs; negative: off).
#[inline]
pub fn slowlog_slower_than() -> i64 {
    SLOWLOG_SLOWER_THAN.load(Ordering::Relaxed)
}

/// Applies `slowlog-max-len`.
pub fn set_slowlog_max_len(len: u64) {
    SLOWLOG_MAX_LEN.store(len, Ordering::Relaxed);
}

/// `slowlog-max-len`.
pub fn slowlog_max_len() -> u64 {
    SLOWLOG_MAX_LEN.load(Ordering::Relaxed)
}

/// Applies `latency-monitor-threshold`.
pub fn set_latency_threshold(ms: u64) {
    LATENCY_THRESHOLD_MS.store(ms, Ordering::Relaxed);
}

/// `latency-monitor-threshold` (ms; 0: off).
#[inline]
pub fn latency_threshold() -> u64 {
    LATENCY_THRESHOLD_MS.load(Ordering::Relaxed)
}

/// Applies `maxmemory-clients` in its stored form (bytes, or minus a percentage; 0: off).
pub fn set_maxmemory_clients(setting: i64) {
    MAXMEMORY_CLIENTS.store(setting, Ordering::Relaxed);
}

/// `maxmemory-clients` in its stored form (bytes, or minus a percentage; 0: off).
#[inline]
pub fn maxmemory_clients() -> i64 {
    MAXMEMORY_CLIENTS.load(Ordering::Relaxed)
}

/// DEBUG SET-DISABLE-DENY-SCRIPTS: when set, commands flagged `noscript` may run from scripts
/// (Redis's `script_disable_deny_script`, a testing aid). Read by scripting once it exists.
static DISABLE_DENY_SCRIPTS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Applies DEBUG SET-DISABLE-DENY-SCRIPTS.
pub fn set_disable_deny_scripts(on: bool) {
    DISABLE_DENY_SCRIPTS.store(on, Ordering::Relaxed);
}

/// Whether scripts may run `noscript` commands (DEBUG SET-DISABLE-DENY-SCRIPTS).
pub fn disable_deny_scripts() -> bool {
    DISABLE_DENY_SCRIPTS.load(Ordering::Relaxed)
}
