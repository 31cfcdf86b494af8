//! Tasks, the run queue, and the loop that alternates between them, readiness and timers.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use crate::reactor::Reactor;
use crate::time::Timers;

type BoxFuture = Pin<Box<dyn Future<Output = ()>>>;

/// Tasks run per turn before the loop looks at readiness again without waiting, so that a thread
/// whose tasks keep each other busy still reads its sockets.
const TURN_BUDGET: usize = 512;

/// A spawned future and its scheduling state.
struct Task {
    /// Read, polled and dropped only on the thread that spawned the task (see the `Send` impl).
    future: UnsafeCell<Option<BoxFuture>>,
    /// Queued to run, or finished: a wake then does nothing.
    scheduled: AtomicBool,
    /// Its place in the owner's registry (owner thread only).
    slot: Cell<usize>,
    shared: Arc<Shared>,
}

// SAFETY: `future` and `slot` are touched only on the thread that spawned the task: `Core` polls
// and drops futures, and a task reaches a `Core` only through that thread's own run queue (a wake
// on another thread goes through `Shared::inject`, which the owner drains). Other threads only
// clone and drop the `Arc` and call `wake`, which touches the atomics and `shared`. While a
// future is alive the owner's registry holds a reference, so the last reference — and the drop of
// the future — is never on another thread.
unsafe impl Send for Task {}
unsafe impl Sync for Task {}

/// What other threads may touch: the injection queue and the wake-up.
pub(crate) struct Shared {
    injected: Mutex<Vec<Arc<Task>>>,
    /// Set after a push to `injected`, so the owner looks only when there is something.
    pending: AtomicBool,
    /// False only while the owner is about to sleep or sleeping in `epoll_wait`.
    awake: AtomicBool,
    /// Written to wake the owner's `epoll_wait`; registered in its epoll set.
    eventfd: libc::c_int,
}

impl Shared {
    fn inject(&self, task: Arc<Task>) {
        self.injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(task);
        self.pending.store(true, Ordering::Release);
        self.unpark();
    }

    /// Wakes the owner if it sleeps or is about to (it checks `pending` after clearing `awake`).
    fn unpark(&self) {
        if !self.awake.swap(true, Ordering::AcqRel) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: `eventfd` is open while `self` lives; the buffer is 8 readable bytes. The
            // counter only overflows after 2^64 - 1 unread wake-ups: then read it back to zero.
            unsafe {
                if libc::write(self.eventfd, one.as_ptr().cast(), 8) < 0 {
                    let mut sink = [0u8; 8];
                    libc::read(self.eventfd, sink.as_mut_ptr().cast(), 8);
                    libc::write(self.eventfd, one.as_ptr().cast(), 8);
                }
            }
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours and nothing uses it once the last reference is gone.
        unsafe { libc::close(self.eventfd) };
    }
}

/// One thread's runtime.
pub(crate) struct Core {
    queue: RefCell<VecDeque<Arc<Task>>>,
    /// Every live task, so that those never finished are dropped here when the loop ends.
    tasks: RefCell<Vec<Option<Arc<Task>>>>,
    free: RefCell<Vec<usize>>,
    shared: Arc<Shared>,
    pub(crate) reactor: Reactor,
    pub(crate) timers: Timers,
}

thread_local! {
    static CORE: Cell<*const Core> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` with this thread's runtime. Panics outside [`block_on`] (a programming error).
pub(crate) fn with_core<R>(f: impl FnOnce(&Core) -> R) -> R {
    let core = CORE.with(|c| c.get());
    assert!(!core.is_null(), "strata-rt used outside block_on");
    // SAFETY: `block_on` points CORE at its `Core` for as long as it runs and clears it after.
    f(unsafe { &*core })
}

/// Like [`with_core`], but `None` outside a runtime (for destructors, which may run after it).
pub(crate) fn try_with_core<R>(f: impl FnOnce(&Core) -> R) -> Option<R> {
    let core = CORE.with(|c| c.get());
    // SAFETY: as in `with_core`.
    (!core.is_null()).then(|| f(unsafe { &*core }))
}

static VTABLE: RawWakerVTable = RawWakerVTable::new(clone_raw, wake_raw, wake_by_ref_raw, drop_raw);

// SAFETY (the four below): `p` comes from `Arc::<Task>::into_raw` or `Arc::as_ptr` of a task the
// caller keeps alive, and each owned waker holds one strong count.
unsafe fn clone_raw(p: *const ()) -> RawWaker {
    Arc::increment_strong_count(p.cast::<Task>());
    RawWaker::new(p, &VTABLE)
}

unsafe fn wake_raw(p: *const ()) {
    schedule(Arc::from_raw(p.cast::<Task>()));
}

unsafe fn wake_by_ref_raw(p: *const ()) {
    let task = ManuallyDrop::new(Arc::from_raw(p.cast::<Task>()));
    if !task.scheduled.load(Ordering::Acquire) {
        schedule(Arc::clone(&task));
    }
}

unsafe fn drop_raw(p: *const ()) {
    drop(Arc::from_raw(p.cast::<Task>()));
}

/// Queues `task` to run, on its own thread's queue if this is that thread.
fn schedule(task: Arc<Task>) {
    if task.scheduled.swap(true, Ordering::AcqRel) {
        return;
    }
    let core = CORE.with(|c| c.get());
    // SAFETY: as in `with_core`.
    match unsafe { core.as_ref() } {
        Some(core) if Arc::ptr_eq(&core.shared, &task.shared) => {
            core.queue.borrow_mut().push_back(task)
        }
        _ => {
            let shared = task.shared.clone();
            shared.inject(task);
        }
    }
}

impl Core {
    fn new() -> io::Result<Core> {
        // SAFETY: plain system calls; the descriptors are owned by the values built from them.
        let eventfd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if eventfd < 0 {
            return Err(io::Error::last_os_error());
        }
        let shared = Arc::new(Shared {
            injected: Mutex::new(Vec::new()),
            pending: AtomicBool::new(false),
            awake: AtomicBool::new(true),
            eventfd,
        });
        let reactor = Reactor::new(eventfd)?;
        Ok(Core {
            queue: RefCell::new(VecDeque::with_capacity(256)),
            tasks: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            shared,
            reactor,
            timers: Timers::default(),
        })
    }

    fn spawn(&self, future: BoxFuture) {
        let task = Arc::new(Task {
            future: UnsafeCell::new(Some(future)),
            scheduled: AtomicBool::new(true),
            slot: Cell::new(0),
            shared: self.shared.clone(),
        });
        let mut tasks = self.tasks.borrow_mut();
        let slot = match self.free.borrow_mut().pop() {
            Some(slot) => {
                tasks[slot] = Some(task.clone());
                slot
            }
            None => {
                tasks.push(Some(task.clone()));
                tasks.len() - 1
            }
        };
        task.slot.set(slot);
        self.queue.borrow_mut().push_back(task);
    }

    fn run(&self, task: &Arc<Task>) {
        task.scheduled.store(false, Ordering::Release);
        // SAFETY: this task came from this thread's queue, so it is this thread's (see `Task`);
        // nothing else touches its future while it is polled (`run` is not re-entered).
        let slot = unsafe { &mut *task.future.get() };
        let Some(future) = slot.as_mut() else {
            task.scheduled.store(true, Ordering::Release);
            return;
        };
        // A waker borrowed from `task`, which outlives the poll: no reference count per poll.
        let waker = ManuallyDrop::new(unsafe {
            Waker::from_raw(RawWaker::new(Arc::as_ptr(task).cast(), &VTABLE))
        });
        let mut cx = Context::from_waker(&waker);
        if future.as_mut().poll(&mut cx).is_ready() {
            let done = slot.take();
            task.scheduled.store(true, Ordering::Release);
            let at = task.slot.get();
            self.tasks.borrow_mut()[at] = None;
            self.free.borrow_mut().push(at);
            // Dropped last, with no borrow held: its destructors may spawn or wake tasks.
            drop(done);
        }
    }

    /// Moves tasks woken by other threads into the run queue.
    fn take_injected(&self) {
        if self.shared.pending.swap(false, Ordering::AcqRel) {
            let injected = std::mem::take(
                &mut *self
                    .shared
                    .injected
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()),
            );
            self.queue.borrow_mut().extend(injected);
        }
    }

    /// Runs up to a turn's budget of ready tasks; true if some are left.
    fn turn(&self) -> bool {
        self.take_injected();
        for _ in 0..TURN_BUDGET {
            let next = self.queue.borrow_mut().pop_front();
            match next {
                Some(task) => self.run(&task),
                None => return false,
            }
        }
        !self.queue.borrow().is_empty()
    }

    /// Waits for readiness, a wake-up from another thread or the next timer — or only looks, when
    /// `busy` or something is ready already — then wakes what is due.
    fn park(&self, busy: bool) {
        if busy {
            self.reactor.poll(0);
        } else {
            let timeout = self.timers.timeout_ms();
            self.shared.awake.swap(false, Ordering::SeqCst);
            let idle =
                !self.shared.pending.load(Ordering::SeqCst) && self.queue.borrow().is_empty();
            self.reactor.poll(if idle { timeout } else { 0 });
            self.shared.awake.store(true, Ordering::SeqCst);
        }
        self.timers.fire();
    }

    /// Drops every task never finished (the loop has ended), on this thread.
    fn shutdown(&self) {
        for _ in 0..64 {
            let live: Vec<Arc<Task>> = self.tasks.borrow_mut().drain(..).flatten().collect();
            self.free.borrow_mut().clear();
            if live.is_empty() {
                break;
            }
            for task in live {
                task.scheduled.store(true, Ordering::Release);
                // SAFETY: this thread's task (it was in this thread's registry).
                drop(unsafe { (*task.future.get()).take() });
            }
        }
        self.queue.borrow_mut().clear();
        self.shared
            .injected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

/// Runs `future` to completion on this thread, with the tasks it spawns; returns its output. It
/// runs as a task like the others (in the same FIFO order). The tasks still running when it
/// completes are dropped. Fails if the event loop cannot be set up.
pub fn block_on<F: Future>(future: F) -> io::Result<F::Output> {
    let core = Core::new()?;
    struct Installed;
    impl Drop for Installed {
        fn drop(&mut self) {
            CORE.with(|c| c.set(std::ptr::null()));
        }
    }
    let previous = CORE.with(|c| c.replace(&core));
    assert!(previous.is_null(), "strata-rt: block_on inside block_on");
    let _installed = Installed;
    let out = Rc::new(JoinSlot {
        value: Cell::new(None),
        waiter: Cell::new(None),
    });
    let main: Pin<Box<dyn Future<Output = ()> + '_>> = Box::pin(Spawned {
        future,
        out: out.clone(),
    });
    // SAFETY: only the lifetime is changed. The task owns everything it uses but what `F`
    // borrows, which outlives this call; and the task is dropped before this call returns (when
    // it completes, or by `shutdown`, or with `core` if a task panics).
    let main: BoxFuture = unsafe { std::mem::transmute(main) };
    core.spawn(main);
    let output = loop {
        let busy = core.turn();
        if let Some(v) = out.value.take() {
            break v;
        }
        core.park(busy);
    };
    core.shutdown();
    Ok(output)
}

/// Runs `future` as a task of this thread (which must be inside [`block_on`]). The handle yields
/// its output; dropping the handle lets the task run on, detached.
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let out = Rc::new(JoinSlot {
        value: Cell::new(None),
        waiter: Cell::new(None),
    });
    let task = Spawned {
        future,
        out: out.clone(),
    };
    with_core(|core| core.spawn(Box::pin(task)));
    JoinHandle { out }
}

/// A spawned future and where its output goes. A struct rather than an `async` block that awaits
/// the future: such a block keeps the future twice in its state (as captured and as awaited), and
/// a connection's task is 2.5 KB.
struct Spawned<F: Future> {
    future: F,
    out: Rc<JoinSlot<F::Output>>,
}

impl<F: Future> Future for Spawned<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // SAFETY: `future` is structurally pinned: never moved out of `self`, which is pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        match future.poll(cx) {
            Poll::Ready(value) => {
                this.out.value.set(Some(value));
                if let Some(w) = this.out.waiter.take() {
                    w.wake();
                }
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

struct JoinSlot<T> {
    value: Cell<Option<T>>,
    waiter: Cell<Option<Waker>>,
}

/// A spawned task's output, once it has finished.
pub struct JoinHandle<T> {
    out: Rc<JoinSlot<T>>,
}

impl<T> Future for JoinHandle<T> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match self.out.value.take() {
            Some(v) => Poll::Ready(v),
            None => {
                self.out.waiter.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[test]
    fn tasks_run_in_the_order_they_were_woken() {
        let order = Rc::new(RefCell::new(Vec::new()));
        let seen = order.clone();
        block_on(async move {
            let mut handles = Vec::new();
            for i in 0..5 {
                let o = seen.clone();
                handles.push(spawn(async move {
                    o.borrow_mut().push(i);
                    i * 10
                }));
            }
            let mut outs = Vec::new();
            for h in handles {
                outs.push(h.await);
            }
            assert_eq!(outs, [0, 10, 20, 30, 40]);
        })
        .unwrap();
        assert_eq!(*order.borrow(), [0, 1, 2, 3, 4]);
    }

    /// Bytes allocated on this thread, for the size test below.
    struct Counting;
    thread_local! {
        static ALLOCATED: Cell<usize> = const { Cell::new(0) };
    }
    // SAFETY: forwards to the system allocator; the counter is a const-initialised thread-local,
    // which does not allocate.
    unsafe impl std::alloc::GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
            let _ = ALLOCATED.try_with(|a| a.set(a.get() + layout.size()));
            std::alloc::System.alloc(layout)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
            std::alloc::System.dealloc(ptr, layout)
        }
    }
    #[global_allocator]
    static COUNTING: Counting = Counting;

    #[test]
    fn a_spawned_future_is_stored_once() {
        block_on(async {
            let big = [7u8; 4096];
            let before = ALLOCATED.with(|a| a.get());
            let handle = spawn(async move {
                crate::sleep(Duration::ZERO).await;
                big.iter().map(|&b| b as usize).sum::<usize>()
            });
            let spent = ALLOCATED.with(|a| a.get()) - before;
            // The future (4 KiB of state) once, plus the task's header and the output's slot;
            // an `async` wrapper awaiting it would hold it twice.
            assert!(spent < 4096 + 512, "spawn allocated {spent} bytes");
            assert_eq!(handle.await, 7 * 4096);
        })
        .unwrap();
    }

    #[test]
    fn a_task_woken_from_another_thread_runs_on_its_own() {
        let ran_on = Arc::new(Mutex::new(None));
        let r = ran_on.clone();
        block_on(async move {
            let (tx, rx) = std::sync::mpsc::channel::<Waker>();
            let flag = Arc::new(AtomicBool::new(false));
            let f = flag.clone();
            let waiter = spawn(std::future::poll_fn(move |cx| {
                if f.load(Ordering::SeqCst) {
                    *r.lock().unwrap() = Some(std::thread::current().id());
                    Poll::Ready(())
                } else {
                    let _ = tx.send(cx.waker().clone());
                    Poll::Pending
                }
            }));
            let f = flag.clone();
            std::thread::spawn(move || {
                let w = rx.recv().unwrap();
                std::thread::sleep(Duration::from_millis(20));
                f.store(true, Ordering::SeqCst);
                w.wake();
            });
            waiter.await;
        })
        .unwrap();
        assert_eq!(*ran_on.lock().unwrap(), Some(std::thread::current().id()));
    }

    #[test]
    fn unfinished_tasks_are_dropped_when_the_loop_ends() {
        struct Counted(Arc<AtomicUsize>);
        impl Drop for Counted {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicUsize::new(0));
        let d = dropped.clone();
        block_on(async move {
            for _ in 0..3 {
                let c = Counted(d.clone());
                spawn(async move {
                    let _c = c;
                    std::future::pending::<()>().await;
                });
            }
            crate::sleep(Duration::from_millis(1)).await;
        })
        .unwrap();
        assert_eq!(dropped.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_task_that_keeps_waking_itself_does_not_starve_timers() {
        block_on(async {
            let stop = Rc::new(Cell::new(false));
            let s = stop.clone();
            spawn(std::future::poll_fn(move |cx| {
                if s.get() {
                    return Poll::Ready(());
                }
                cx.waker().wake_by_ref();
                Poll::Pending
            }));
            crate::sleep(Duration::from_millis(5)).await;
            stop.set(true);
        })
        .unwrap();
    }
}
