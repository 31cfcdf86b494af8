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

/// The reply buffer a connection keeps between batches, as Redis 7.0 sizes its per-client reply
/// buffer (`clientsCronResizeOutputBuffer`): it starts at 16 KiB, and the clients' cron shrinks
/// it to the recent peak when that peak uses less than half of it (not below 1 KiB), or doubles
/// it (up to 16 KiB) when the peak filled it; the peak is forgotten every
/// [`reply_peak_reset_ms`]. DEBUG REPLYBUFFER sets both knobs.
pub mod reply_buffer {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// Redis's `PROTO_REPLY_MIN_BYTES` and `PROTO_REPLY_CHUNK_BYTES`.
    pub const MIN: usize = 1024;
    pub const MAX: usize = 16 * 1024;
    /// Redis's `REPLY_BUFFER_DEFAULT_PEAK_RESET_TIME` (ms).
    pub const DEFAULT_PEAK_RESET_MS: i64 = 5000;

    static PEAK_RESET_MS: AtomicI64 = AtomicI64::new(DEFAULT_PEAK_RESET_MS);
    static RESIZING: AtomicBool = AtomicBool::new(true);
    static SHRINKS: AtomicU64 = AtomicU64::new(0);
    static EXPANDS: AtomicU64 = AtomicU64::new(0);

    /// DEBUG REPLYBUFFER PEAK-RESET-TIME: ms between peak resets; negative: never.
    pub fn set_peak_reset_ms(ms: i64) {
        PEAK_RESET_MS.store(ms, Ordering::Relaxed);
    }

    pub fn peak_reset_ms() -> i64 {
        PEAK_RESET_MS.load(Ordering::Relaxed)
    }

    /// DEBUG REPLYBUFFER RESIZING 0|1.
    pub fn set_resizing(on: bool) {
        RESIZING.store(on, Ordering::Relaxed);
    }

    pub fn resizing() -> bool {
        RESIZING.load(Ordering::Relaxed)
    }

    /// Counts a resize (INFO `reply_buffer_shrinks` / `reply_buffer_expands`).
    pub fn count(shrink: bool) {
        if shrink { &SHRINKS } else { &EXPANDS }.fetch_add(1, Ordering::Relaxed);
    }

    /// (shrinks, expands) since start or CONFIG RESETSTAT.
    pub fn counts() -> (u64, u64) {
        (
            SHRINKS.load(Ordering::Relaxed),
            EXPANDS.load(Ordering::Relaxed),
        )
    }

    /// CONFIG RESETSTAT.
    pub fn reset_counts() {
        SHRINKS.store(0, Ordering::Relaxed);
        EXPANDS.store(0, Ordering::Relaxed);
    }

    /// One cron visit of a client whose buffer keeps `size` bytes and whose peak is `peak`: the
    /// new size, if it changes (Redis's rule; the caller counts and applies it).
    pub fn resize(size: usize, peak: usize) -> Option<usize> {
        if !resizing() {
            return None;
        }
        if size / 2 >= MIN && peak < size / 2 {
            Some((peak + 1).max(MIN))
        } else if size * 2 < MAX * 2 && peak == size {
            Some((size * 2).min(MAX))
        } else {
            None
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn sizes_move_as_redis_moves_them() {
            assert_eq!(resize(MAX, MAX), None);
            assert_eq!(resize(MAX, 10), Some(MIN));
            assert_eq!(resize(MAX, 5000), Some(5001));
            assert_eq!(resize(MIN, 0), None);
            assert_eq!(resize(MIN, MIN), Some(2 * MIN));
            assert_eq!(resize(8 * MIN, 8 * MIN), Some(MAX));
            assert_eq!(resize(MAX, 9000), None);
        }
    }
}
