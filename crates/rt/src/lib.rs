//! Strata's event loop: one per shard thread, sharing nothing with the others but the path by which
//! they wake it.
//!
//! * **Tasks** ([`spawn`]): futures owned by the thread that spawned them, run in the order they
//!   were woken (a FIFO queue: a task woken while others are ready runs after them, which
//!   `strata_shard::round_end` relies on). A task woken from another thread is handed over through
//!   the thread's injection queue and an eventfd write, skipped while the thread is awake.
//! * **Readiness** ([`net`]): one epoll set per thread, edge-triggered. A socket is known readable
//!   from an event until a read shows it drained: one that failed with `EAGAIN`, or — the reason
//!   this crate exists — one that returned less than the room it was offered. A stream socket read
//!   short has nothing left, and the next bytes to arrive raise a new edge, so the connection can
//!   wait at once instead of asking the kernel again. monoio's epoll driver, which Strata used
//!   before, cleared readiness only on `EAGAIN`: one failed `recv` per request at pipeline 1
//!   (docs/architecture.md, "Event loop").
//! * **Timers** ([`sleep`]): a min-heap of deadlines; the thread sleeps in `epoll_wait` until the
//!   first one.
//!
//! Everything here is single-threaded but the wake-up path ([`executor`]'s `Shared`).

mod executor;
pub mod net;
mod reactor;
mod time;

pub use executor::{block_on, spawn, JoinHandle};
pub use time::{sleep, Sleep};

/// Polls `f` once with a waker that does nothing (tests: what a future does before any event).
#[cfg(test)]
fn poll_once<F: std::future::Future + Unpin>(f: &mut F) -> std::task::Poll<F::Output> {
    let waker = std::task::Waker::noop();
    std::pin::Pin::new(f).poll(&mut std::task::Context::from_waker(waker))
}
