//! Wall-clock time for the hot path.
//!
//! Every command reads the clock twice: its time (expiry, the LRU clock) and, when it ends, its
//! duration for INFO commandstats and the slow log. Reading the system clock costs about 30 ns on
//! these machines (`clock_gettime` through the vDSO), which was 8–9% of the server's CPU time in a
//! pipelined LPUSH. Where the CPU has an invariant time-stamp counter (x86-64 with `constant_tsc`
//! and `nonstop_tsc`: it ticks at a fixed rate in every power state) and the kernel keeps time with
//! it (so it found the counters of all CPUs in step), each
//! thread keeps an anchor — a TSC reading and the system time read with it — and extrapolates from
//! it with one `rdtsc` and a multiply. The anchor is re-read from the system clock once it is a
//! millisecond old, so the time never strays further from the system clock than the TSC's rate
//! error over a millisecond (nanoseconds), and a step of the system clock (NTP, an operator) is
//! seen within a millisecond. Without an invariant TSC (or under Miri) every call reads the system
//! clock. The TSC's rate is measured once per process (2 ms): [`init`] does it at start-up.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// How old an anchor may get before the system clock is read again (µs).
const ANCHOR_US: u64 = 1000;

/// Microseconds since the Unix epoch from the system clock.
pub fn system_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// TSC ticks → µs as `ticks * mul >> 32`, and the anchor's lifetime in ticks.
#[derive(Clone, Copy)]
struct Scale {
    mul: u64,
    max_ticks: u64,
}

/// Calibrates the clock now: measures the TSC's rate (a 2 ms sleep when the TSC is usable).
///
/// Call once at start-up, before the shard threads serve commands. Otherwise the first
/// [`now_us`] in the process calibrates, sleeping 2 ms inside a command while every other thread
/// that reads the clock meanwhile blocks on it. Calling it again does nothing.
pub fn init() {
    scale();
}

/// The TSC's rate, measured once per process against the monotonic clock (about 2 ms), or None
/// when the TSC cannot be used.
fn scale() -> Option<Scale> {
    static SCALE: OnceLock<Option<Scale>> = OnceLock::new();
    *SCALE.get_or_init(|| {
        if !tsc::invariant() || !kernel_trusts_tsc() {
            return None;
        }
        let (t0, c0) = bracketed();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let (t1, c1) = bracketed();
        let nanos = t1.duration_since(t0).as_nanos() as u64;
        let ticks = c1.wrapping_sub(c0);
        // A clock that ran backwards or below 10 MHz is not one to extrapolate with.
        if nanos == 0 || ticks < nanos / 100 {
            return None;
        }
        let ticks_per_us = ticks as f64 * 1000.0 / nanos as f64;
        let mul = ((1u64 << 32) as f64 / ticks_per_us) as u64;
        let max_ticks = (ticks_per_us * ANCHOR_US as f64) as u64;
        // The product `ticks * mul` must not overflow for ticks up to `max_ticks`.
        (mul > 0 && max_ticks.checked_mul(mul).is_some()).then_some(Scale { mul, max_ticks })
    })
}

/// Whether the kernel keeps time with the TSC (Linux: the current clocksource is `tsc`), which it
/// does only once it found the counters of all CPUs in step. Elsewhere the CPUID flag decides.
fn kernel_trusts_tsc() -> bool {
    match std::fs::read_to_string(
        "/sys/devices/system/clocksource/clocksource0/current_clocksource",
    ) {
        Ok(source) => source.trim() == "tsc",
        Err(_) => true,
    }
}

/// A monotonic-clock reading and the TSC at the same moment: the TSC read just before and just
/// after, retried (a few times at most) until the two are close, so that a preemption between
/// the reads does not skew the calibration.
fn bracketed() -> (Instant, u64) {
    let mut best = (Instant::now(), tsc::read(), u64::MAX);
    for _ in 0..16 {
        let before = tsc::read();
        let now = Instant::now();
        let after = tsc::read();
        let gap = after.wrapping_sub(before);
        if gap < best.2 {
            best = (now, before + gap / 2, gap);
        }
        if gap < 2000 {
            break;
        }
    }
    (best.0, best.1)
}

thread_local! {
    /// (TSC reading, system µs read with it); None until the first anchored read on this thread.
    static ANCHOR: Cell<Option<(u64, i64)>> = const { Cell::new(None) };
    /// The last time returned on this thread.
    static LAST: Cell<i64> = const { Cell::new(0) };
}

/// What a new anchor's time may fall behind the last time returned before it is taken as a real
/// step of the system clock rather than the extrapolation's rate error (µs).
const STEP_US: i64 = 1000;

/// Microseconds since the Unix epoch (Redis's `ustime()`).
#[inline]
pub fn now_us() -> i64 {
    let Some(s) = scale() else {
        return system_us();
    };
    let t = tsc::read();
    let now = ANCHOR.with(|a| {
        if let Some(now) = extrapolate(a.get(), t, s) {
            now
        } else {
            // Pair the system time with the TSC read just before and just after it: a thread
            // preempted in between would otherwise anchor a late time to an early count and run
            // ahead for a whole anchor period. Such a reading is returned but not anchored.
            let w = system_us();
            let t1 = tsc::read();
            let gap = t1.wrapping_sub(t);
            if gap < s.max_ticks / 200 {
                a.set(Some((t + gap / 2, w)));
            }
            w
        }
    });
    // Never backwards on a thread by the rate error (a few µs at a new anchor); a real step of the
    // system clock backwards is followed.
    LAST.with(|l| {
        let last = l.get();
        let now = if now < last && last - now < STEP_US {
            last
        } else {
            now
        };
        l.set(now);
        now
    })
}

/// The time at TSC reading `t` extrapolated from `anchor`, or None when it must be read from the
/// system clock: no anchor yet on this thread, or one too old (or ahead of `t`).
#[inline(always)]
fn extrapolate(anchor: Option<(u64, i64)>, t: u64, s: Scale) -> Option<i64> {
    let (t0, w0) = anchor?;
    // Wraps to a huge value when the thread moved to a core whose counter is a hair behind.
    let dt = t.wrapping_sub(t0);
    (dt < s.max_ticks).then(|| w0 + ((dt * s.mul) >> 32) as i64)
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod tsc {
    /// Whether the TSC is invariant (CPUID 0x8000_0007, EDX bit 8).
    pub fn invariant() -> bool {
        // The extended leaf is read only when the CPU reports it.
        use std::arch::x86_64::__cpuid;
        __cpuid(0x8000_0000).eax >= 0x8000_0007 && __cpuid(0x8000_0007).edx & (1 << 8) != 0
    }

    #[inline]
    pub fn read() -> u64 {
        // SAFETY: RDTSC is available on every x86-64 CPU and has no preconditions.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
mod tsc {
    pub fn invariant() -> bool {
        false
    }

    pub fn read() -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_system_clock() {
        for _ in 0..200 {
            let before = system_us();
            let t = now_us();
            let after = system_us();
            // Extrapolation may lag or lead the system clock by a few µs of rate error.
            assert!(t >= before - 50 && t <= after + 50, "{before} {t} {after}");
            std::thread::sleep(std::time::Duration::from_micros(150));
        }
    }

    #[test]
    fn an_unanchored_thread_reads_the_system_clock() {
        // 1 tick per µs, anchors live 1000 ticks.
        let s = Scale {
            mul: 1 << 32,
            max_ticks: 1000,
        };
        // No anchor yet: even a TSC reading just after reset (where the old `u64::MAX` sentinel
        // wrapped to a small `dt` and gave a time near 1970) goes to the system clock.
        for t in [0, 1, 5, 999, 1000, u64::MAX] {
            assert_eq!(extrapolate(None, t, s), None, "t = {t}");
        }
        let anchor = Some((100, 1_700_000_000_000_000));
        assert_eq!(extrapolate(anchor, 150, s), Some(1_700_000_000_000_050));
        assert_eq!(extrapolate(anchor, 1100, s), None, "too old");
        assert_eq!(
            extrapolate(anchor, 99, s),
            None,
            "counter behind the anchor"
        );
    }

    #[test]
    fn init_calibrates_once_and_the_clock_then_runs() {
        init();
        init();
        let before = system_us();
        let t = now_us();
        assert!(t >= before - 50, "{before} {t}");
    }

    #[test]
    fn does_not_run_backwards_beyond_rounding() {
        let mut last = now_us();
        let start = Instant::now();
        while start.elapsed().as_millis() < 20 {
            let t = now_us();
            assert!(t >= last, "{last} then {t}");
            last = t;
        }
    }
}
