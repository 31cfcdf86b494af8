//! `used_memory`: bytes currently allocated by the process, as INFO reports it.
//!
//! The binary's global allocator calls [`track`] with the block size of every allocation and free.
//! Each thread accumulates locally and publishes to one shared counter in 64 KiB steps, so accounting
//! costs no shared cache-line traffic per allocation; the reading is exact to 64 KiB per thread.

use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

static USED: AtomicIsize = AtomicIsize::new(0);
const PUBLISH_STEP: isize = 64 * 1024;

thread_local! {
    static LOCAL: Cell<isize> = const { Cell::new(0) };
}

/// Records `delta` bytes allocated (positive) or freed (negative). Must not allocate.
#[inline]
pub fn track(delta: isize) {
    let published = LOCAL.try_with(|c| {
        let v = c.get() + delta;
        if v.abs() >= PUBLISH_STEP {
            USED.fetch_add(v, Ordering::Relaxed);
            c.set(0);
        } else {
            c.set(v);
        }
    });
    if published.is_err() {
        // Thread-local storage is being torn down: publish directly.
        USED.fetch_add(delta, Ordering::Relaxed);
    }
}

/// Publishes this thread's unpublished bytes now (after an eviction, whose effect the next look
/// at [`used_memory`] must see).
pub fn publish_local() {
    let _ = LOCAL.try_with(|c| {
        let v = c.replace(0);
        if v != 0 {
            USED.fetch_add(v, Ordering::Relaxed);
        }
    });
}

/// Bytes allocated by the process (0 if no allocator reports to [`track`]).
pub fn used_memory() -> usize {
    USED.load(Ordering::Relaxed).max(0) as usize
}

/// How the binary's allocator returns free memory to the OS (set once at start-up).
static RELEASE: std::sync::OnceLock<fn()> = std::sync::OnceLock::new();

/// Registers the allocator's "give back what you can" call (mimalloc's `mi_collect`).
pub fn set_release(f: fn()) {
    let _ = RELEASE.set(f);
}

/// Asks the allocator to free this thread's empty pages and return memory freed a while ago to
/// the OS. Shard threads call it from their background tick about once a second, as jemalloc's
/// background threads purge for Redis: an allocator that purges only while it is being called
/// would otherwise keep the memory of a finished bulk load (query buffers, argument vectors) in
/// RSS for as long as the thread stays idle.
pub fn release_free_memory() {
    if let Some(f) = RELEASE.get() {
        f();
    }
}

/// For a hash table of `len` entries in room for `capacity` that client input grew and then
/// emptied (keys forgotten by CLIENT TRACKING, WATCHes withdrawn): the capacity to shrink it to
/// once mostly empty, so one burst does not keep its room for good, as Redis's radix trees and
/// dicts give theirs back. A shrink leaves it at most half full, so the next needs three quarters
/// of its entries gone: rehashing stays O(1) per removal, amortized. None below 1024 slots.
pub fn shrink_target(len: usize, capacity: usize) -> Option<usize> {
    (capacity > 1024 && len * 8 < capacity).then_some(len * 2)
}
