//! Readiness: one edge-triggered epoll set per thread and what it last said about each descriptor.

use std::cell::{Cell, RefCell};
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::{Context, Waker};

/// The eventfd's token; a registered descriptor's is the address of its `IoState`, never 0.
const WAKE_TOKEN: u64 = 0;
const EVENTS: usize = 256;

/// What the last events and operations said about one registered descriptor, and who waits on it.
#[derive(Default)]
pub(crate) struct IoState {
    readable: Cell<bool>,
    /// The peer closed its side, or the socket failed: set for good, since no new edge will come.
    /// Reads then go to the kernel until it says 0 (or the error): a short read that ends at the
    /// end of input has not drained the socket, whose end is still to be read.
    read_closed: Cell<bool>,
    writable: Cell<bool>,
    reader: Cell<Option<Waker>>,
    writer: Cell<Option<Waker>>,
}

/// Which way an operation goes.
#[derive(Clone, Copy)]
pub(crate) enum Dir {
    Read,
    Write,
}

impl IoState {
    fn flag(&self, dir: Dir) -> &Cell<bool> {
        match dir {
            Dir::Read => &self.readable,
            Dir::Write => &self.writable,
        }
    }

    fn waiter(&self, dir: Dir) -> &Cell<Option<Waker>> {
        match dir {
            Dir::Read => &self.reader,
            Dir::Write => &self.writer,
        }
    }

    /// Whether the last word is that `dir` may proceed.
    pub(crate) fn ready(&self, dir: Dir) -> bool {
        self.flag(dir).get()
    }

    /// The descriptor has nothing more for `dir` until its next event; `cx`'s task waits for it.
    pub(crate) fn wait(&self, dir: Dir, cx: &mut Context<'_>) {
        self.flag(dir).set(false);
        self.register(dir, cx);
    }

    /// `cx`'s task is the one to wake at the next event for `dir`.
    pub(crate) fn register(&self, dir: Dir, cx: &mut Context<'_>) {
        let slot = self.waiter(dir);
        let w = match slot.take() {
            Some(w) if w.will_wake(cx.waker()) => w,
            _ => cx.waker().clone(),
        };
        slot.set(Some(w));
    }

    /// Whether an event said the peer closed its side, or the socket failed.
    pub(crate) fn read_closed(&self) -> bool {
        self.read_closed.get()
    }

    /// A read came back short: the socket is drained, and new bytes will raise a new edge —
    /// unless its input has ended, which raises none after the event that said so.
    pub(crate) fn drained(&self) {
        if !self.read_closed.get() {
            self.readable.set(false);
        }
    }

    fn event(&self, dir: Dir) {
        self.flag(dir).set(true);
        if let Some(w) = self.waiter(dir).take() {
            w.wake();
        }
    }
}

pub(crate) struct Reactor {
    epfd: RawFd,
    events: RefCell<Vec<libc::epoll_event>>,
}

impl Reactor {
    /// An epoll set with `eventfd` (the cross-thread wake-up) in it.
    pub(crate) fn new(eventfd: RawFd) -> io::Result<Reactor> {
        // SAFETY: plain system call; the descriptor is owned by the Reactor from here.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return Err(io::Error::last_os_error());
        }
        let reactor = Reactor {
            epfd,
            events: RefCell::new(Vec::with_capacity(EVENTS)),
        };
        reactor.ctl(
            libc::EPOLL_CTL_ADD,
            eventfd,
            (libc::EPOLLIN | libc::EPOLLET) as u32,
            WAKE_TOKEN,
        )?;
        Ok(reactor)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid event for the duration of the call.
        if unsafe { libc::epoll_ctl(self.epfd, op, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Watches `fd` for reading and writing. The set holds one reference to the state until
    /// [`Reactor::deregister`].
    pub(crate) fn register(&self, fd: RawFd) -> io::Result<Rc<IoState>> {
        let state = Rc::new(IoState::default());
        // Writable until a write says otherwise; readable once an event says so (registering a
        // descriptor with input already waiting raises one at once).
        state.writable.set(true);
        // The kernel hands the address back as an integer: its provenance is exposed here and
        // taken up again in `poll` (`with_exposed_provenance`).
        let token = Rc::into_raw(state.clone()).expose_provenance() as u64;
        let events = libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET;
        if let Err(e) = self.ctl(libc::EPOLL_CTL_ADD, fd, events as u32, token) {
            // SAFETY: the reference made by `into_raw` above, not handed to the kernel.
            drop(unsafe {
                Rc::from_raw(std::ptr::with_exposed_provenance::<IoState>(token as usize))
            });
            return Err(e);
        }
        Ok(state)
    }

    /// Stops watching `fd` (before it is closed) and drops the set's reference to its state.
    pub(crate) fn deregister(&self, fd: RawFd, state: &Rc<IoState>) {
        if self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0).is_ok() {
            // SAFETY: the reference `register` gave the set; the kernel will not return its
            // token again, and no event of this poll is dispatched after a task runs.
            drop(unsafe { Rc::from_raw(Rc::as_ptr(state)) });
        }
        // If removing failed the set may still name the state: it is kept (leaked) rather than
        // risk an event pointing at freed memory.
    }

    /// Waits up to `timeout_ms` (-1: no limit, 0: only look) and wakes the tasks waiting on what
    /// became ready.
    pub(crate) fn poll(&self, timeout_ms: i32) {
        let mut events = self.events.borrow_mut();
        // SAFETY: the buffer has room for EVENTS entries, which the kernel fills and counts.
        let n = unsafe {
            libc::epoll_wait(
                self.epfd,
                events.as_mut_ptr(),
                EVENTS as libc::c_int,
                timeout_ms,
            )
        };
        if n <= 0 {
            return;
        }
        // SAFETY: the kernel initialised the first n entries.
        unsafe { events.set_len(n as usize) };
        for ev in events.iter() {
            let token = ev.u64;
            if token == WAKE_TOKEN {
                // Edge-triggered: every write raises an event; the counter need not be read.
                continue;
            }
            // SAFETY: a token other than WAKE_TOKEN is a registered state's address, kept alive
            // by the set's reference until `deregister`, which only a task can call, and no task
            // runs while this loop does (waking only queues them).
            let state = unsafe { &*std::ptr::with_exposed_provenance::<IoState>(token as usize) };
            let flags = ev.events;
            let hangup = (libc::EPOLLHUP | libc::EPOLLERR) as u32;
            if flags & (libc::EPOLLRDHUP as u32 | hangup) != 0 {
                state.read_closed.set(true);
            }
            if flags & ((libc::EPOLLIN | libc::EPOLLRDHUP) as u32 | hangup) != 0 {
                state.event(Dir::Read);
            }
            if flags & (libc::EPOLLOUT as u32 | hangup) != 0 {
                state.event(Dir::Write);
            }
        }
        events.clear();
    }
}

impl Drop for Reactor {
    fn drop(&mut self) {
        // SAFETY: the descriptor is ours.
        unsafe { libc::close(self.epfd) };
    }
}
