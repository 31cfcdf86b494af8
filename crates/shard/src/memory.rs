//! `used_memory`: bytes currently allocated by the process, as INFO reports it.
//!
//! The binary's global allocator calls [`track`] with the block size of every allocation and free.
//! Each thread counts in a slot of its own (a cache line no other thread writes, so accounting
//! costs no shared cache-line traffic per allocation, and a plain load and store rather than a
//! locked add); [`used_memory`] adds the slots up, so it is exact, as Redis's is: a client closed
//! for its output limit gives its bytes back in the next INFO, and maxmemory sees every byte. A
//! slot keeps its thread's balance after the thread ends (blocks it allocated may be freed by
//! others). Threads beyond [`SLOTS`] share one atomic counter.

use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// Threads with a slot of their own; later ones share [`SHARED`].
const SLOTS: usize = 128;

/// One thread's balance, alone on its cache lines (128 bytes: the adjacent-line prefetcher pairs
/// lines).
#[repr(align(128))]
struct Slot(AtomicIsize);

static SLOT: [Slot; SLOTS] = [const { Slot(AtomicIsize::new(0)) }; SLOTS];
/// Slots handed out so far (may run past [`SLOTS`]).
static TAKEN: AtomicUsize = AtomicUsize::new(0);
/// The balance of threads without a slot of their own.
static SHARED: AtomicIsize = AtomicIsize::new(0);
/// No slot chosen yet.
const UNSET: usize = usize::MAX;

thread_local! {
    /// This thread's slot index ([`SLOTS`] or above: none, count in [`SHARED`]). Constant-
    /// initialized and without a destructor, so it is readable until the thread is gone.
    static MINE: Cell<usize> = const { Cell::new(UNSET) };
}

fn my_slot() -> usize {
    MINE.try_with(|m| {
        let i = m.get();
        if i != UNSET {
            return i;
        }
        let i = TAKEN.fetch_add(1, Ordering::Relaxed).min(SLOTS);
        m.set(i);
        i
    })
    .unwrap_or(SLOTS)
}

/// Records `delta` bytes allocated (positive) or freed (negative). Must not allocate.
#[inline]
pub fn track(delta: isize) {
    let i = my_slot();
    match SLOT.get(i) {
        // Only this thread writes its slot: a load and a store, no read-modify-write needed.
        Some(slot) => slot
            .0
            .store(slot.0.load(Ordering::Relaxed) + delta, Ordering::Relaxed),
        None => {
            SHARED.fetch_add(delta, Ordering::Relaxed);
        }
    }
}

/// Bytes allocated by the process (0 if no allocator reports to [`track`]).
pub fn used_memory() -> usize {
    let taken = TAKEN.load(Ordering::Relaxed).min(SLOTS);
    let sum = SLOT[..taken]
        .iter()
        .fold(SHARED.load(Ordering::Relaxed), |n, s| {
            n.wrapping_add(s.0.load(Ordering::Relaxed))
        });
    sum.max(0) as usize
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes count in the next reading whichever thread allocated or freed them, also for threads
    /// beyond the slots. (Nothing else in this crate's tests calls `track`: the counting
    /// allocator is the binary's.)
    #[test]
    fn every_threads_bytes_count_at_once_wherever_they_are_freed() {
        let base = used_memory();
        track(1000);
        assert_eq!(used_memory(), base + 1000);
        // Freed by another thread: that thread's slot goes below zero, the sum stays exact.
        std::thread::spawn(|| track(-400)).join().unwrap();
        assert_eq!(used_memory(), base + 600);
        // More threads than slots: the later ones share a counter, and every slot keeps its
        // balance after its thread has ended.
        let threads: Vec<_> = (0..SLOTS + 20)
            .map(|_| std::thread::spawn(|| track(3)))
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert!(TAKEN.load(Ordering::Relaxed) > SLOTS);
        assert_eq!(used_memory(), base + 600 + 3 * (SLOTS + 20));
        track(-(600 + 3 * (SLOTS as isize + 20)));
        assert_eq!(used_memory(), base);
    }
}
