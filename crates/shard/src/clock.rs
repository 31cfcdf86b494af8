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
//! clock.

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
    /// (TSC reading, system µs read with it); `u64::MAX` until the first read on this thread.
    static ANCHOR: Cell<(u64, i64)> = const { Cell::new((u64::MAX, 0)) };
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
        let (t0, w0) = a.get();
        // Wraps to a huge value when the thread moved to a core whose counter is a hair behind.
        let dt = t.wrapping_sub(t0);
        if dt < s.max_ticks {
            w0 + ((dt * s.mul) >> 32) as i64
        } else {
            // Pair the system time with the TSC read just before and just after it: a thread
            // preempted in between would otherwise anchor a late time to an early count and run
            // ahead for a whole anchor period. Such a reading is returned but not anchored.
            let w = system_us();
            let t1 = tsc::read();
            let gap = t1.wrapping_sub(t);
            if gap < s.max_ticks / 200 {
                a.set((t + gap / 2, w));
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
