//! The set of shards and the messages between their threads.
//!
//! Every shard thread owns a [`Mailbox`]: a queue of jobs (closures) that any thread may append to.
//! Cross-thread traffic is batched in both directions, as Seastar's per-core-pair queues are:
//!
//! * **Sending.** On a shard thread, [`ShardSet::post`] does not touch the destination at all: the job
//!   goes into this thread's outgoing buffer for that destination. The first post of an event-loop
//!   turn wakes this thread's [`Flusher`] task (a local wake-up, no syscall), which runs after the
//!   tasks already scheduled in that turn and moves each non-empty buffer into its destination's
//!   mailbox in one append. So everything a thread sends to another during one turn, from every
//!   connection it serves, travels as one message.
//! * **Waking.** A destination is woken only when its inbox task is *armed*: it found its mailbox
//!   empty twice in a row, a scheduler round apart, and went to sleep. A busy thread re-checks its
//!   mailbox every round instead (one yield), so traffic to a busy thread costs no wake-up at all.
//! * **Replies.** [`ShardSet::call`] sends its result back as a job posted to the caller's thread, so
//!   replies are batched the same way and the waiting task is woken by a local, not a cross-thread,
//!   wake-up.
//! * **Bounded work.** The inbox runs at most [`INBOX_BUDGET`] jobs per scheduler round, then yields,
//!   so a flood of messages cannot starve the connections the thread serves.
//!
//! Closures are `Send`; results are `Send`; nothing else crosses threads. Jobs from one thread to
//! another run in the order they were posted (one FIFO buffer per pair, appended in order).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use futures_channel::oneshot;
use futures_util::task::AtomicWaker;
use strata_core::slot::{key_slot, SLOTS};

use crate::shard::{current_shard_id, with_shard, Shard};
use crate::versions::Versions;

/// A unit of work sent to a shard thread.
pub type Job = Box<dyn FnOnce() + Send>;

/// Jobs a shard's inbox runs per scheduler round before yielding to the thread's other tasks.
pub const INBOX_BUDGET: usize = 512;

/// One shard thread's incoming queue.
struct Mailbox {
    jobs: Mutex<Vec<Job>>,
    /// Set by the inbox task just before it sleeps; a sender that clears it wakes the task.
    armed: AtomicBool,
    waker: AtomicWaker,
    /// Batches appended and wake-ups sent (INFO, and the hop benchmark).
    batches: AtomicU64,
    wakeups: AtomicU64,
}

impl Mailbox {
    fn new() -> Mailbox {
        Mailbox {
            jobs: Mutex::new(Vec::new()),
            armed: AtomicBool::new(false),
            waker: AtomicWaker::new(),
            batches: AtomicU64::new(0),
            wakeups: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Job>> {
        // A job never panics while the queue is locked (only appends and swaps happen under it).
        self.jobs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends a batch and wakes the inbox task if it sleeps.
    fn deliver(&self, batch: &mut Vec<Job>) {
        {
            let mut q = self.lock();
            if q.is_empty() {
                std::mem::swap(&mut *q, batch);
            } else {
                q.append(batch);
            }
        }
        self.batches.fetch_add(1, Ordering::Relaxed);
        // SeqCst pairs with the inbox's store-then-recheck: either it sees these jobs or we see it armed.
        if self.armed.load(Ordering::SeqCst) && self.armed.swap(false, Ordering::SeqCst) {
            self.wakeups.fetch_add(1, Ordering::Relaxed);
            self.waker.wake();
        }
    }
}

/// The receiving end of a shard thread's mailbox; [`Inbox::run`] is that thread's inbox task.
pub struct Inbox {
    set: ShardSet,
    id: usize,
}

/// Handles to every shard; cheap to clone and shared by all threads.
#[derive(Clone)]
pub struct ShardSet {
    inner: Arc<Inner>,
}

struct Inner {
    mailboxes: Vec<Mailbox>,
    slot_owner: Box<[u16]>,
    /// Each shard's key versions (see [`crate::versions`]); empty with one shard.
    versions: Vec<Arc<Versions>>,
}

/// Per-thread outgoing buffers, one per destination, and the flusher's wake-up.
struct Outgoing {
    set: ShardSet,
    bufs: Vec<Vec<Job>>,
    flusher: Option<Waker>,
}

thread_local! {
    static OUTGOING: RefCell<Option<Outgoing>> = const { RefCell::new(None) };
    /// True while a flush is scheduled for this turn (the flusher was woken and has not run yet).
    static FLUSH_SCHEDULED: Cell<bool> = const { Cell::new(false) };
}

impl ShardSet {
    /// Creates `n` mailboxes; slots are split into `n` contiguous ranges, as a Redis Cluster would.
    pub fn new(n: usize) -> (ShardSet, Vec<Inbox>) {
        assert!((1..=1024).contains(&n), "shard count must be 1..=1024");
        let slot_owner = (0..SLOTS).map(|slot| (slot * n / SLOTS) as u16).collect();
        let set = ShardSet {
            inner: Arc::new(Inner {
                mailboxes: (0..n).map(|_| Mailbox::new()).collect(),
                slot_owner,
                versions: if n > 1 {
                    (0..n).map(|_| Arc::new(Versions::default())).collect()
                } else {
                    Vec::new()
                },
            }),
        };
        let inboxes = (0..n)
            .map(|id| Inbox {
                set: set.clone(),
                id,
            })
            .collect();
        (set, inboxes)
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.inner.mailboxes.len()
    }

    /// `shard`'s key versions (see [`crate::versions`]); None with one shard.
    pub fn versions(&self, shard: usize) -> Option<&Arc<Versions>> {
        self.inner.versions.get(shard)
    }

    /// Always false: a set has at least one shard.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The shard owning hash slot `slot`.
    pub fn shard_of_slot(&self, slot: u16) -> usize {
        self.inner.slot_owner[slot as usize] as usize
    }

    /// The shard owning `key`.
    pub fn shard_of_key(&self, key: &[u8]) -> usize {
        if self.len() == 1 {
            return 0;
        }
        self.shard_of_slot(key_slot(key))
    }

    /// Sends `job` to run on `shard`'s thread (fire and forget). On a shard thread with a running
    /// [`Flusher`] the job is buffered and leaves with the rest of this turn's traffic to `shard`;
    /// elsewhere (start-up, tests) it is delivered at once.
    pub fn post(&self, shard: usize, job: Job) {
        let job = OUTGOING.with(|o| {
            let mut o = o.borrow_mut();
            match o.as_mut() {
                Some(out) if Arc::ptr_eq(&out.set.inner, &self.inner) => {
                    // The flusher takes the buffers out only while it delivers, which runs no
                    // job and so posts nothing.
                    out.bufs
                        .get_mut(shard)
                        .expect("nothing posts while this thread's messages are delivered")
                        .push(job);
                    if !FLUSH_SCHEDULED.get() {
                        FLUSH_SCHEDULED.set(true);
                        if let Some(w) = &out.flusher {
                            w.wake_by_ref();
                        }
                    }
                    None
                }
                _ => Some(job),
            }
        });
        if let Some(job) = job {
            self.inner.mailboxes[shard].deliver(&mut vec![job]);
        }
    }

    /// [`post`](Self::post), delivered now instead of at the end of the turn, behind whatever this
    /// thread already posted to `shard`: for a message that must reach `shard` before anything a
    /// later reply of this turn can lead to (a client reading a reply, then sending to `shard`,
    /// finds the message already in `shard`'s mailbox, which runs in order). Costs an append and
    /// perhaps a wake-up of its own, so it is for rare paths (see `crate::park`).
    pub fn post_now(&self, shard: usize, job: Job) {
        let mut batch = OUTGOING.with(|o| match o.borrow_mut().as_mut() {
            Some(out) if Arc::ptr_eq(&out.set.inner, &self.inner) => {
                std::mem::take(&mut out.bufs[shard])
            }
            _ => Vec::new(),
        });
        batch.push(job);
        self.inner.mailboxes[shard].deliver(&mut batch);
    }

    /// Runs `f` on `shard` and returns its result: inline if `shard` is this thread's own.
    pub async fn call<R: Send + 'static>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut Shard) -> R + Send + 'static,
    ) -> R {
        let origin = current_shard_id();
        if origin == Some(shard) {
            return with_shard(f);
        }
        let (tx, rx) = oneshot::channel();
        let set = self.clone();
        self.post(
            shard,
            Box::new(move || {
                let r = with_shard(f);
                set.reply(origin, tx, r);
            }),
        );
        rx.await
            .expect("shard thread exited while a call was pending")
    }

    /// Sends `value` through `tx` on the `origin` thread (batched with that thread's other replies),
    /// or directly when the caller was not a shard thread.
    pub fn reply<R: Send + 'static>(
        &self,
        origin: Option<usize>,
        tx: oneshot::Sender<R>,
        value: R,
    ) {
        match origin {
            Some(o) if current_shard_id() != Some(o) => self.post(
                o,
                Box::new(move || {
                    let _ = tx.send(value);
                }),
            ),
            _ => {
                let _ = tx.send(value);
            }
        }
    }

    /// Runs `f` on every shard concurrently and returns the results in shard order.
    pub async fn call_all<R: Send + 'static>(
        &self,
        f: impl Fn(&mut Shard) -> R + Send + Sync + Clone + 'static,
    ) -> Vec<R> {
        let calls = (0..self.len()).map(|i| self.call(i, f.clone()));
        futures_util::future::join_all(calls).await
    }

    /// Message batches delivered to, and wake-ups sent to, each shard since start (for INFO and the
    /// hop benchmark).
    pub fn hop_counters(&self) -> Vec<(u64, u64)> {
        self.inner
            .mailboxes
            .iter()
            .map(|m| {
                (
                    m.batches.load(Ordering::Relaxed),
                    m.wakeups.load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// Installs this thread's outgoing buffers and returns the task that flushes them once per
    /// event-loop turn. Spawn it on the shard thread before posting anything.
    pub fn flusher(&self) -> Flusher {
        OUTGOING.with(|o| {
            *o.borrow_mut() = Some(Outgoing {
                set: self.clone(),
                bufs: (0..self.len()).map(|_| Vec::new()).collect(),
                flusher: None,
            })
        });
        FLUSH_SCHEDULED.set(false);
        Flusher { _private: () }
    }
}

/// The most room (in messages) an outgoing buffer keeps from one turn to the next.
const KEEP_JOBS: usize = 1024;

/// Moves this thread's buffered messages to their mailboxes; see the module docs.
pub struct Flusher {
    _private: (),
}

impl Future for Flusher {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Take the buffers out so delivering never runs while the thread-local is borrowed.
        // Nothing posts meanwhile (delivering runs no job), and they go back afterwards, empty
        // with their room (a delivered batch leaves the mailbox's spare vector in its place), so
        // a turn's first message to a shard allocates nothing.
        let (set, mut bufs) = OUTGOING.with(|o| {
            let mut o = o.borrow_mut();
            let out = o.as_mut().expect("flusher without outgoing buffers");
            if out
                .flusher
                .as_ref()
                .is_none_or(|w| !w.will_wake(cx.waker()))
            {
                out.flusher = Some(cx.waker().clone());
            }
            (out.set.clone(), std::mem::take(&mut out.bufs))
        });
        FLUSH_SCHEDULED.set(false);
        for (dst, buf) in bufs.iter_mut().enumerate() {
            if !buf.is_empty() {
                set.inner.mailboxes[dst].deliver(buf);
            }
            if buf.capacity() > KEEP_JOBS {
                // A burst's room is not kept for good.
                *buf = Vec::new();
            }
        }
        OUTGOING.with(|o| {
            if let Some(out) = o.borrow_mut().as_mut() {
                out.bufs = bufs;
            }
        });
        Poll::Pending
    }
}

impl Inbox {
    /// The shard this inbox belongs to.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Runs jobs as they arrive, forever: at most [`INBOX_BUDGET`] per scheduler round.
    pub async fn run(self) {
        let mailbox = &self.set.inner.mailboxes[self.id];
        INBOX.with(|i| *i.borrow_mut() = Some((self.set.clone(), self.id)));
        loop {
            if PENDING.with(|p| p.borrow().is_empty()) {
                take_mail(mailbox);
            }
            if PENDING.with(|p| p.borrow().is_empty()) {
                // Idle this round: look once more next round (free while the thread is busy), and
                // only then arm the waker and sleep.
                round_end().await;
                if mailbox.lock().is_empty() {
                    Sleep { mailbox }.await;
                }
                continue;
            }
            for _ in 0..INBOX_BUDGET {
                // (Not borrowed while the job runs: a job may call `run_inbox_now`.)
                match PENDING.with(|p| p.borrow_mut().pop_front()) {
                    Some(job) => job(),
                    None => break,
                }
            }
            round_end().await;
        }
    }
}

thread_local! {
    /// Jobs this thread's inbox took from its mailbox and has not run yet, in arrival order.
    static PENDING: RefCell<std::collections::VecDeque<Job>> = RefCell::default();
    /// The vector swapped into the mailbox when its jobs are taken out, so neither side allocates
    /// a new one every round.
    static SPARE: RefCell<Vec<Job>> = RefCell::default();
    /// The set and shard whose mailbox this thread's inbox serves (None before it starts).
    static INBOX: RefCell<Option<(ShardSet, usize)>> = const { RefCell::new(None) };
}

/// Moves what `mailbox` holds behind this thread's pending jobs.
fn take_mail(mailbox: &Mailbox) {
    SPARE.with(|spare| {
        let mut spare = spare.borrow_mut();
        std::mem::swap(&mut *mailbox.lock(), &mut *spare);
        if !spare.is_empty() {
            PENDING.with(|p| p.borrow_mut().extend(spare.drain(..)));
        }
    });
}

/// Runs, now and in order, every job this thread's inbox has received and not run yet. A client's
/// command read from a socket is never causally before such a job (no other thread can have reacted
/// to bytes this thread has not read), so running them first only keeps what a client observed: a
/// lock released by a command whose reply the client already saw is released before the client's
/// next command looks at it. Not called from inside a job of a bounded inbox round; on a thread
/// without an inbox, does nothing.
pub fn run_inbox_now() {
    let Some((set, id)) = INBOX.with(|i| i.borrow().clone()) else {
        return;
    };
    take_mail(&set.inner.mailboxes[id]);
    while let Some(job) = PENDING.with(|p| p.borrow_mut().pop_front()) {
        job();
    }
}

/// The thread's round: the tasks that were ready when a task called [`round_end`].
///
/// A task cannot simply yield to the thread's other ready tasks: the runtime puts a task that wakes
/// itself while it runs at the *front* of its queue and runs it again at once. Instead a task leaves
/// its waker here and wakes the thread's [`rounds`] task, which the runtime queues behind the tasks
/// already ready; when that runs, it wakes every task waiting here, each in turn queued behind
/// whatever became ready since. Used where a task must let the others run: the inbox between
/// budgets of jobs, and connections before they send their replies (so a round's replies go out
/// back to back, see the server's `conn`).
#[derive(Default)]
struct Round {
    waiting: Vec<Waker>,
    /// The round task's waker while it sleeps (`None` while it is queued to run).
    task: Option<Waker>,
    /// A round task runs on this thread.
    started: bool,
}

thread_local! {
    static ROUND: RefCell<Round> = RefCell::default();
}

/// Waits until the tasks that were ready on this thread when it was called have run once. On a
/// thread without a [`rounds`] task there is no round to wait for: it returns at once.
pub async fn round_end() {
    let mut queued = false;
    std::future::poll_fn(|cx| {
        if queued {
            return Poll::Ready(());
        }
        ROUND.with(|r| {
            let mut r = r.borrow_mut();
            if !r.started {
                return Poll::Ready(());
            }
            queued = true;
            r.waiting.push(cx.waker().clone());
            if let Some(w) = r.task.take() {
                w.wake();
            }
            Poll::Pending
        })
    })
    .await
}

/// The thread's round task: wakes the tasks waiting in [`round_end`] (see [`Round`]). Spawn one on
/// each shard thread, for the life of its runtime.
pub async fn rounds() {
    loop {
        std::future::poll_fn(|cx| {
            ROUND.with(|r| {
                let mut r = r.borrow_mut();
                r.started = true;
                if r.waiting.is_empty() {
                    r.task = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                for w in r.waiting.drain(..) {
                    w.wake();
                }
                Poll::Ready(())
            })
        })
        .await;
    }
}

/// Sleeps until a sender delivers to an empty mailbox.
struct Sleep<'a> {
    mailbox: &'a Mailbox,
}

impl Future for Sleep<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let m = self.mailbox;
        m.waker.register(cx.waker());
        m.armed.store(true, Ordering::SeqCst);
        if !m.lock().is_empty() {
            m.armed.store(false, Ordering::SeqCst);
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_split_into_contiguous_ranges() {
        let (set, inboxes) = ShardSet::new(4);
        assert_eq!(inboxes.len(), 4);
        assert_eq!(set.shard_of_slot(0), 0);
        assert_eq!(set.shard_of_slot(4095), 0);
        assert_eq!(set.shard_of_slot(4096), 1);
        assert_eq!(set.shard_of_slot(16383), 3);
    }

    #[test]
    fn delivery_outside_shard_threads_is_immediate_and_ordered() {
        let (set, _inboxes) = ShardSet::new(2);
        let seen = Arc::new(Mutex::new(Vec::new()));
        for i in 0..10 {
            let seen = seen.clone();
            set.post(1, Box::new(move || seen.lock().unwrap().push(i)));
        }
        let jobs = std::mem::take(&mut *set.inner.mailboxes[1].lock());
        assert_eq!(jobs.len(), 10);
        for j in jobs {
            j();
        }
        assert_eq!(*seen.lock().unwrap(), (0..10).collect::<Vec<_>>());
        assert_eq!(set.hop_counters()[1].0, 10);
    }

    /// A flood of messages does not starve the thread's other tasks: the inbox lets them run after
    /// every [`INBOX_BUDGET`] jobs. (A task that wakes itself is rerun at once by the runtime, so a
    /// plain yield there let the inbox run the whole flood first.)
    #[test]
    fn a_flood_of_messages_lets_the_threads_other_tasks_run_between_budgets() {
        const JOBS: usize = 10 * INBOX_BUDGET;
        let (set, mut inboxes) = ShardSet::new(1);
        let inbox = inboxes.remove(0);
        let ran = Arc::new(AtomicU64::new(0));
        let mut flood: Vec<Job> = (0..JOBS)
            .map(|_| {
                let ran = ran.clone();
                Box::new(move || {
                    ran.fetch_add(1, Ordering::Relaxed);
                }) as Job
            })
            .collect();
        set.inner.mailboxes[0].deliver(&mut flood);
        // What the jobs had done each time another task of the thread got a turn.
        let seen = std::thread::spawn(move || {
            strata_rt::block_on(async move {
                strata_rt::spawn(rounds());
                strata_rt::spawn(inbox.run());
                // Let both start (the round task must have run once for `round_end` to wait).
                let (tx, rx) = oneshot::channel::<()>();
                strata_rt::spawn(async move { tx.send(()) });
                let _ = rx.await;
                let mut seen = Vec::new();
                while ran.load(Ordering::Relaxed) < JOBS as u64 && seen.len() < 10 * JOBS {
                    round_end().await;
                    seen.push(ran.load(Ordering::Relaxed));
                }
                seen
            })
            .expect("runtime")
        })
        .join()
        .expect("runtime thread");
        let during: Vec<u64> = seen
            .iter()
            .copied()
            .filter(|&n| n > 0 && n < JOBS as u64)
            .collect();
        assert!(
            during.len() >= JOBS / INBOX_BUDGET - 2,
            "other tasks ran {} times during the flood: {seen:?}",
            during.len()
        );
        assert!(
            during
                .windows(2)
                .all(|w| w[1] - w[0] <= INBOX_BUDGET as u64),
            "more than a budget of jobs between two turns: {during:?}"
        );
    }
}
