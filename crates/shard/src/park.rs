//! Commands that park: a blocking command (BLPOP, BZPOPMIN, BLMOVE…) that finds nothing to serve
//! waits on its keys, first blocked first served, without holding a thread.
//!
//! A parked command is one [`Parked`], shared by the task that waits and every shard owning one of
//! its keys. Each shard keeps, per key, the queue of commands parked on it (in its [`crate::Db`]),
//! in the order their connections took them up ([`Parked::arrived`]), and the keys written while
//! someone was parked on them (*ready* keys). After every command the
//! dispatcher calls [`Shard::serve_ready`](crate::Shard::serve_ready), which serves the first live
//! parked command of each ready key before the shard takes its next command, as Redis serves
//! blocked clients right after the command that made their key ready:
//!
//! * **Served on the shard.** When all the parked command's keys live on this shard and no lock of
//!   another command stands in the way, the shard runs it right there, in the same turn, through
//!   the [`Runner`] its dispatcher installed when it parked; the reply is kept in the `Parked` and
//!   its task only writes it ([`Parked::take_reply`]). What that command writes may make another
//!   key ready, served in the same pass (a chain of BLMOVEs completes before anyone else runs).
//!   If it finds nothing it stays parked. If a lock stands in the way the key stays ready and is
//!   tried again after the shard's next command (a lock is only released by one), so it is served
//!   right after the transaction or lock context that holds its keys.
//!   A blocking pop whose keys span shards is served the same way by the shard whose key became
//!   ready: its runner holds, per shard, the command over that shard's keys only (Redis serves a
//!   woken pop from the key that became ready). Its task takes the runner back
//!   ([`Parked::take_runner`]) while it attempts the command again itself.
//! * **Moved across shards by messages.** A BLMOVE or BRPOPLPUSH whose destination lives on another
//!   shard than its source cannot run in one shard's turn. Its runner *claims* it instead
//!   ([`Parked::claim`]): in the source shard's turn it takes the source key's lock for the
//!   command's owner and sends the destination shard a message at once (ahead of anything the
//!   pusher's reply can lead to). The destination shard takes the destination's lock (queueing for
//!   it when the source shard is the lower one, as the ascending lock order allows; only if it is
//!   free at once otherwise, else the claim is given back and the command woken) and checks its
//!   type; the source shard then pops and releases the source; the destination shard pushes and
//!   releases the destination, and the reply is handed over ([`Parked::deliver`]). Both keys are
//!   locked across the move, so nobody sees the element in neither list, and whatever the pusher
//!   sends next on either key queues behind the move.
//! * **Woken, with a reservation.** A command that needs keys of two shards at once (BLMOVE with
//!   source and destination on different shards), or one the shard cannot run
//!   (past the pass's budget, its client gone), is woken to run again from its task. When all its
//!   keys live on this shard the wake also takes an exclusive lock on the key for the command's
//!   owner (only if that can be granted at once): commands of other clients on that key then
//!   queue behind it; the woken command runs as that owner (re-entering the lock) and releases the
//!   reservation when done. A parked command whose keys span shards is woken with a reservation
//!   only by its lowest shard (the first lock of the ascending order every lock context follows);
//!   by another shard it is woken without one (reserving in the middle of that order could
//!   deadlock with a lock context), and if another client takes the element first, it parks
//!   again, nothing is lost.
//! * **Exactly once.** A parked command finishes once (served, timed out, or its client gone;
//!   a claimed move completes whatever happens to its client meanwhile, so the element lands in
//!   its destination and is the reply of a client still there):
//!   [`Parked::finish`] marks it, shards drop it from their queues lazily, and the waiting task
//!   withdraws it from every shard it parked on ([`Shard::unpark`](crate::Shard::unpark)). The
//!   command pops the element itself, in a shard turn, only while it is alive: the runner checks
//!   its client first, under the `Parked`'s mutex that [`Parked::close`] takes when the task ends
//!   its wait, so no element is ever taken for a dead client, and a reply served just before a
//!   deadline or CLIENT UNBLOCK is the one the client gets.
//! * **No lost wake-up.** The command checks its keys and parks in the same shard turn (or, across
//!   shards, while holding locks on all its keys), so no write can fall in between.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use futures_util::task::AtomicWaker;

use crate::locks::Owner;
use crate::Shard;

/// What running a parked command on its shard came to (see [`Runner`]).
pub enum Served {
    /// It was served (or failed): this is its reply. It has left every queue.
    Replied(Vec<u8>),
    /// It found nothing to serve and stays parked.
    Parked,
    /// A lock of another command stands in the way: try again later.
    Busy,
    /// Its client is gone: its task is woken and withdraws it, nothing is served.
    Gone,
    /// Claimed (see [`Parked::claim`]): the runner started serving it across shards by messages,
    /// which end in [`Parked::deliver`] or [`Parked::unclaim`]. Nothing more to do for this key now.
    Claimed,
}

/// Runs a parked command on the shard owning all its keys, in that shard's turn (see the module
/// docs). Installed by the dispatcher when the command parks; it runs as the command's owner.
pub type Runner = Box<dyn FnMut(&mut Shard, &Arc<Parked>) -> Served + Send>;

/// What [`Parked::serve_here`] did.
pub(crate) enum Here {
    /// Served: its reply is kept for its task, which must be woken.
    Served,
    /// Ran and parks again, or had finished already: nothing more to do for this key now.
    Parked,
    /// A lock stands in the way: keep the key ready.
    Busy,
    /// Cannot run here (no runner, client gone): wake its task.
    Wake,
    /// Claimed by its runner, served by messages between shards: nothing more to do here now.
    Claimed,
}

/// The runner and, once it served the command, the reply waiting for the task.
#[derive(Default)]
struct Inline {
    runner: Option<Runner>,
    reply: Option<Vec<u8>>,
}

/// One parked command; see the module docs.
pub struct Parked {
    owner: Owner,
    /// When its connection took the command up: a key's queue is kept in this order (see
    /// [`Parked::arrived`]).
    arrived: Instant,
    single_shard: bool,
    /// For a command whose keys span shards: the lowest of them, where a wake-up may reserve the
    /// key for it (`usize::MAX`: nowhere). See [`Parked::reserves_on`].
    lead: usize,
    done: AtomicBool,
    /// Being served across shards by messages (see [`Parked::claim`]).
    claimed: AtomicBool,
    woken: AtomicBool,
    /// Set once it has been woken by a write and runs again (see `was_woken`).
    retried: AtomicBool,
    waker: AtomicWaker,
    /// Where it is parked: database and keys, recorded once by [`Parked::record`].
    at: Mutex<Option<(usize, Vec<Bytes>)>>,
    /// Held while the shard runs the command, and by [`Parked::close`]: a command is never run
    /// after its task gave up on it (its connection, whose socket the runner peeks at, is alive).
    inline: Mutex<Inline>,
}

impl Parked {
    /// A parked command run as `owner`; `single_shard` when all its keys live on one shard.
    pub fn new(owner: Owner, single_shard: bool) -> Arc<Parked> {
        Parked::build(owner, single_shard, usize::MAX)
    }

    /// A parked command whose keys span shards, `lead` the lowest of them: a wake-up there
    /// reserves the key for it, as the first lock of its ascending order.
    pub fn spanning(owner: Owner, lead: usize) -> Arc<Parked> {
        Parked::build(owner, false, lead)
    }

    fn build(owner: Owner, single_shard: bool, lead: usize) -> Arc<Parked> {
        Arc::new(Parked {
            owner,
            arrived: Instant::now(),
            single_shard,
            lead,
            done: AtomicBool::new(false),
            claimed: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            retried: AtomicBool::new(false),
            waker: AtomicWaker::new(),
            at: Mutex::new(None),
            inline: Mutex::new(Inline::default()),
        })
    }

    fn inline(&self) -> std::sync::MutexGuard<'_, Inline> {
        self.inline.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Installs the runner the shard serves the command with (a single-shard command, when it
    /// first parks). Nothing if it finished already.
    pub fn set_runner(&self, runner: Runner) {
        let mut inline = self.inline();
        if !self.is_done() {
            inline.runner = Some(runner);
        }
    }

    /// Takes the runner back, so no shard runs the command until it is set again: a command whose
    /// keys span shards takes it while its task attempts it again (that attempt and a shard's
    /// runner must not both serve it). Once this returns, no shard is running it.
    pub fn take_runner(&self) -> Option<Runner> {
        self.inline().runner.take()
    }

    /// Runs the command on `shard` with its runner, keeping its reply if served.
    pub(crate) fn serve_here(self: &Arc<Self>, shard: &mut Shard) -> Here {
        let mut inline = self.inline();
        if self.is_done() || self.is_claimed() {
            return Here::Parked;
        }
        let Some(run) = inline.runner.as_mut() else {
            return Here::Wake;
        };
        match run(shard, self) {
            Served::Replied(reply) => {
                inline.runner = None;
                inline.reply = Some(reply);
                Here::Served
            }
            Served::Parked => Here::Parked,
            Served::Busy => Here::Busy,
            Served::Gone => Here::Wake,
            Served::Claimed => Here::Claimed,
        }
    }

    /// Marks the command as being served across shards by messages that its runner starts (a
    /// BLMOVE whose destination lives on another shard): no shard runs it meanwhile, and its task,
    /// whatever ends its wait, waits for the outcome instead (the element may already be on its
    /// way). Ends with [`deliver`](Self::deliver) or [`unclaim`](Self::unclaim).
    pub fn claim(&self) {
        self.claimed.store(true, Ordering::Release);
    }

    /// True while a claim is in progress.
    pub fn is_claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }

    /// Runs `f` (the task marking its client blocked) unless the command was served or claimed
    /// meanwhile, under the mutex a shard holds while it serves or claims it, so the mark cannot
    /// land after a shard already served it and cleared it. True if `f` ran.
    pub fn while_waiting(&self, f: impl FnOnce()) -> bool {
        let inline = self.inline();
        if self.is_done() || self.is_claimed() || inline.reply.is_some() {
            return false;
        }
        f();
        true
    }

    /// Ends a claim with the command's reply: it is finished, and its task is woken to write it.
    pub fn deliver(&self, reply: Vec<u8>) {
        {
            let mut inline = self.inline();
            inline.runner = None;
            inline.reply = Some(reply);
            self.finish();
            self.claimed.store(false, Ordering::Release);
        }
        self.wake();
    }

    /// Ends a claim without serving the command (it could not be served that way): it stays
    /// parked, and its task is woken to attempt it again itself.
    pub fn unclaim(&self) {
        self.claimed.store(false, Ordering::Release);
        self.wake();
    }

    /// The reply of the command if its shard served it.
    pub fn take_reply(&self) -> Option<Vec<u8>> {
        self.inline().reply.take()
    }

    /// Ends the wait from the task's side (deadline, CLIENT UNBLOCK, client gone, task dropped):
    /// marks the command finished so no shard runs it any more, and returns its reply if a shard
    /// served it first (that reply wins: the element was taken for this client).
    pub fn close(&self) -> Option<Vec<u8>> {
        let mut inline = self.inline();
        self.finish();
        inline.runner = None;
        inline.reply.take()
    }

    /// Records the database and keys the command parks on. True the first time: the caller then
    /// parks it on every key; later attempts that park again keep their place in the queues.
    pub fn record(&self, db: usize, keys: &[Bytes]) -> bool {
        let mut at = self.at.lock().unwrap_or_else(|e| e.into_inner());
        if at.is_some() {
            return false;
        }
        *at = Some((db, keys.to_vec()));
        true
    }

    /// Takes where it is parked (None if it never parked, or was withdrawn already): the caller
    /// withdraws it from those queues, so nobody else needs to.
    pub fn withdraw(&self) -> Option<(usize, Vec<Bytes>)> {
        self.at.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// The lock owner the command runs as (its reservations are held for it).
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// True if a wake-up on `shard` may reserve the key for the command: all its keys live there,
    /// or it is the lowest of its shards (the command then takes the rest in ascending order after
    /// it, as every lock context does, so the reservation cannot close a cycle).
    pub fn reserves_on(&self, shard: usize) -> bool {
        self.single_shard || self.lead == shard
    }

    /// When its connection took the command up (it is built then). Two clients served by different
    /// threads reach the key's shard by different paths (one of them by a message, a hop later), so
    /// a key's queue is ordered by this time rather than by when each reached the shard: first
    /// blocked, first served, as in Redis's single thread. The monotonic clock is one clock for
    /// every thread.
    pub fn arrived(&self) -> Instant {
        self.arrived
    }

    /// True when all the command's keys live on one shard (wake-ups then reserve the key).
    pub fn single_shard(&self) -> bool {
        self.single_shard
    }

    /// True once the command finished; shards skip it.
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Marks the command finished (served, timed out, client gone).
    pub fn finish(&self) {
        self.done.store(true, Ordering::Release);
    }

    /// Wakes the waiting task (from any thread).
    pub fn wake(&self) {
        self.woken.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Notes that the command runs again because one of its keys was written.
    pub fn set_retried(&self) {
        self.retried.store(true, Ordering::Release);
    }

    /// True once the command runs again after a wake-up: it then skips keys of another type.
    pub fn was_woken(&self) -> bool {
        self.retried.load(Ordering::Acquire)
    }

    /// Resolves at the next [`wake`](Self::wake) since the last time it resolved.
    pub fn woken(&self) -> Woken<'_> {
        Woken(self)
    }
}

/// See [`Parked::woken`].
pub struct Woken<'a>(&'a Parked);

impl Future for Woken<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.woken.swap(false, Ordering::AcqRel) {
            return Poll::Ready(());
        }
        self.0.waker.register(cx.waker());
        if self.0.woken.swap(false, Ordering::AcqRel) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    #[test]
    fn a_wake_before_the_wait_is_not_lost_and_is_consumed_once() {
        let p = Parked::new(1, true);
        assert!(p.woken().now_or_never().is_none());
        p.wake();
        assert!(p.woken().now_or_never().is_some());
        assert!(p.woken().now_or_never().is_none());
        assert!(!p.is_done());
        p.finish();
        assert!(p.is_done());
    }
}
