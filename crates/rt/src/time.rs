//! Timers: a min-heap of deadlines per thread.

use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::executor::{try_with_core, with_core};

/// Cancelled timers are left in the heap until they come due, unless they outnumber the live ones
/// past this many: then the heap is rebuilt without them (a client that blocks with a long
/// timeout and is served at once leaves one behind per command).
const COMPACT_AFTER: usize = 1024;

#[derive(Default)]
struct TimerState {
    waker: Cell<Option<Waker>>,
    fired: Cell<bool>,
    cancelled: Cell<bool>,
}

struct Entry {
    at: Instant,
    seq: u64,
    state: Rc<TimerState>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    /// Reversed, so that the heap's top is the earliest deadline.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
pub(crate) struct Timers {
    heap: RefCell<BinaryHeap<Entry>>,
    cancelled: Cell<usize>,
    seq: Cell<u64>,
}

impl Timers {
    fn add(&self, at: Instant, state: Rc<TimerState>) {
        let seq = self.seq.get();
        self.seq.set(seq + 1);
        self.heap.borrow_mut().push(Entry { at, seq, state });
    }

    fn cancel(&self) {
        let cancelled = self.cancelled.get() + 1;
        self.cancelled.set(cancelled);
        let mut heap = self.heap.borrow_mut();
        if cancelled > COMPACT_AFTER && cancelled > heap.len() / 2 {
            heap.retain(|e| !e.state.cancelled.get());
            self.cancelled.set(0);
        }
    }

    /// How long `epoll_wait` may sleep: until the first live deadline (rounded up to the next
    /// millisecond, so it never wakes early), or -1 when there is none.
    pub(crate) fn timeout_ms(&self) -> i32 {
        let mut heap = self.heap.borrow_mut();
        while heap.peek().is_some_and(|e| e.state.cancelled.get()) {
            heap.pop();
            self.cancelled.set(self.cancelled.get().saturating_sub(1));
        }
        match heap.peek() {
            None => -1,
            Some(e) => {
                let left = e.at.saturating_duration_since(Instant::now());
                left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32
            }
        }
    }

    /// Wakes the sleepers whose deadline has passed.
    pub(crate) fn fire(&self) {
        if self.heap.borrow().is_empty() {
            return;
        }
        let now = Instant::now();
        loop {
            let due = {
                let mut heap = self.heap.borrow_mut();
                match heap.peek() {
                    Some(e) if e.at <= now => heap.pop(),
                    _ => None,
                }
            };
            let Some(e) = due else { break };
            if e.state.cancelled.get() {
                self.cancelled.set(self.cancelled.get().saturating_sub(1));
                continue;
            }
            e.state.fired.set(true);
            if let Some(w) = e.state.waker.take() {
                w.wake();
            }
        }
    }
}

/// Completes once `duration` has passed (see [`sleep`]).
pub struct Sleep {
    at: Option<Instant>,
    state: Option<Rc<TimerState>>,
}

/// A future that completes after `duration`, at the first turn of the loop after it (timers are
/// kept to the millisecond), and never sooner than the loop's next look at readiness: a sleep of
/// zero is how a long task lets the rest of the thread, sockets included, have a turn. A duration
/// too long to represent never completes.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now().checked_add(duration))
}

/// Like [`sleep`], until `at` (never, if `None`).
pub(crate) fn sleep_until(at: Option<Instant>) -> Sleep {
    Sleep { at, state: None }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if let Some(state) = &self.state {
            if state.fired.get() {
                return Poll::Ready(());
            }
            let w = match state.waker.take() {
                Some(w) if w.will_wake(cx.waker()) => w,
                _ => cx.waker().clone(),
            };
            state.waker.set(Some(w));
            return Poll::Pending;
        }
        let Some(at) = self.at else {
            return Poll::Pending;
        };
        // Registered even when already due: it then completes after the loop's next look at
        // readiness, so a zero-length sleep lets every other ready connection run first.
        let state = Rc::new(TimerState::default());
        state.waker.set(Some(cx.waker().clone()));
        with_core(|core| core.timers.add(at, state.clone()));
        self.state = Some(state);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            if !state.fired.get() {
                state.cancelled.set(true);
                state.waker.take();
                try_with_core(|core| core.timers.cancel());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{block_on, spawn};

    #[test]
    fn sleepers_wake_in_deadline_order_and_not_early() {
        let order = Rc::new(RefCell::new(Vec::new()));
        let o = order.clone();
        block_on(async move {
            let start = Instant::now();
            let mut hs = Vec::new();
            for ms in [30u64, 10, 20] {
                let o = o.clone();
                // All three count from `start`, however late each is made or first polled
                // (under Miri, whose clock advances as it interprets, milliseconds apart).
                let nap = sleep_until(start.checked_add(Duration::from_millis(ms)));
                hs.push(spawn(async move {
                    nap.await;
                    assert!(start.elapsed() >= Duration::from_millis(ms));
                    o.borrow_mut().push(ms);
                }));
            }
            for h in hs {
                h.await;
            }
        })
        .unwrap();
        assert_eq!(*order.borrow(), [10, 20, 30]);
    }

    #[test]
    fn a_zero_sleep_yields_to_the_other_ready_tasks() {
        let order = Rc::new(RefCell::new(Vec::new()));
        let o = order.clone();
        block_on(async move {
            let other = o.clone();
            spawn(async move { other.borrow_mut().push("other") });
            sleep(Duration::ZERO).await;
            o.borrow_mut().push("slept");
        })
        .unwrap();
        assert_eq!(*order.borrow(), ["other", "slept"]);
    }

    #[test]
    fn cancelled_timers_do_not_pile_up() {
        block_on(async {
            for _ in 0..10_000 {
                let mut s = sleep(Duration::from_secs(3600));
                // Registered by one poll, then dropped: as a blocking command served at once.
                let _ = crate::poll_once(&mut s);
            }
            with_core(|core| {
                assert!(core.timers.heap.borrow().len() <= 2 * COMPACT_AFTER + 2);
            });
            sleep(Duration::from_millis(1)).await;
        })
        .unwrap();
    }
}
