//! The buffers a batch works in, handed back empty when it ends and kept per thread for the next
//! batch: a lone command would otherwise allocate and free its reply buffer and slot list on every
//! request, and one sent to another shard about ten buffers (the lists of sub-batches, of their
//! replies and of where each was taken, its command list, its reply buffers). Those of a batch
//! that sends nowhere are never taken, so a lone local command pays for two. Only small buffers
//! are kept, and only a few, so a huge pipeline's are freed as before. A sub-batch's reply buffers
//! are filled on the shard that runs it and come back with its replies: the thread that sent it
//! keeps them for its next one.
//!
//! A pool names what it holds, so this file uses the batch's bookkeeping types ([`Pending`],
//! [`Slot`], in `mod.rs`) while the steps that use those take their buffers from here.

use std::cell::RefCell;

use super::shard_cmd::{ShardCmd, ShardReplies};
use super::{Pending, Slot};

/// Buffers of each kind kept per thread: as many as batches a thread has in flight at once
/// on a busy server (each of its connections waiting for another shard holds its own), within
/// reason; with the size limits below, at most a few hundred KiB per thread.
const KEEP: usize = 32;
/// Reply buffers that grew past this are freed rather than kept.
const MAX_BYTES: usize = 16 * 1024;
/// Lists that grew past this many entries are freed rather than kept.
const MAX_SLOTS: usize = 1024;

type Slots = Vec<(Slot, bool)>;

struct Pools {
    bufs: Vec<Vec<u8>>,
    slots: Vec<Slots>,
    pending: Vec<Vec<Pending>>,
    done: Vec<Vec<ShardReplies>>,
    starts: Vec<Vec<usize>>,
    replies: Vec<(Vec<u8>, Vec<usize>)>,
    cmds: Vec<Vec<ShardCmd>>,
}

thread_local! {
    static SPARE: RefCell<Pools> = const {
        RefCell::new(Pools {
            bufs: Vec::new(),
            slots: Vec::new(),
            pending: Vec::new(),
            done: Vec::new(),
            starts: Vec::new(),
            replies: Vec::new(),
            cmds: Vec::new(),
        })
    };
}

/// Keeps `v` (emptied) in `pool` unless it grew past `max` entries or the pool is full.
#[inline]
fn keep<T>(pool: &mut Vec<Vec<T>>, mut v: Vec<T>, max: usize, n: usize) {
    if v.capacity() <= max && pool.len() < n {
        v.clear();
        pool.push(v);
    }
}

/// An empty reply buffer and an empty slot list, with whatever capacity they kept.
pub(super) fn take() -> (Vec<u8>, Slots) {
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        (
            s.bufs.pop().unwrap_or_default(),
            s.slots.pop().unwrap_or_default(),
        )
    })
}

/// Hands both back for the next batch (emptied here), unless they grew large.
pub(super) fn give(buf: Vec<u8>, slots: Slots) {
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        keep(&mut s.bufs, buf, MAX_BYTES, KEEP);
        keep(&mut s.slots, slots, MAX_SLOTS, KEEP);
    });
}

/// An empty list of sub-batches, when a batch opens its first.
pub(super) fn take_pending() -> Vec<Pending> {
    SPARE.with(|s| s.borrow_mut().pending.pop().unwrap_or_default())
}

/// An empty list of sub-batch replies, when a batch runs its first sub-batch.
pub(super) fn take_done() -> Vec<ShardReplies> {
    SPARE.with(|s| s.borrow_mut().done.pop().unwrap_or_default())
}

/// An empty list of positions in sub-batch replies, when a batch assembles its first.
pub(super) fn take_starts() -> Vec<usize> {
    SPARE.with(|s| s.borrow_mut().starts.pop().unwrap_or_default())
}

/// Hands back the lists a batch that ran sub-batches took, and its sub-batches' reply buffers
/// (to the pool [`take_replies`] draws from).
#[inline(never)]
pub(super) fn give_lists(
    mut pending: Vec<Pending>,
    mut done: Vec<ShardReplies>,
    starts: Vec<usize>,
) {
    // What the lists hold (commands not run, what replies hold besides their buffers) is
    // dropped before the pools are borrowed.
    pending.clear();
    for r in done.iter_mut() {
        r.park = None;
        r.seen = None;
    }
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        for r in done.drain(..) {
            let (mut buf, mut ends) = (r.buf, r.ends);
            if buf.capacity() <= MAX_BYTES
                && ends.capacity() <= MAX_SLOTS
                && s.replies.len() < 2 * KEEP
            {
                buf.clear();
                ends.clear();
                s.replies.push((buf, ends));
            }
        }
        keep(&mut s.pending, pending, MAX_SLOTS, KEEP);
        keep(&mut s.done, done, MAX_SLOTS, KEEP);
        keep(&mut s.starts, starts, MAX_SLOTS, KEEP);
    });
}

/// An empty reply buffer and list of reply ends for a sub-batch.
pub(super) fn take_replies() -> (Vec<u8>, Vec<usize>) {
    SPARE.with(|s| s.borrow_mut().replies.pop().unwrap_or_default())
}

/// An empty command list with room for `room` commands.
pub(super) fn take_cmds(room: usize) -> Vec<ShardCmd> {
    let mut v = SPARE.with(|s| s.borrow_mut().cmds.pop().unwrap_or_default());
    v.reserve(room);
    v
}

/// Hands a sub-batch's command list back (its commands dropped here).
pub(super) fn give_cmds(mut v: Vec<ShardCmd>) {
    // Dropped before the pools are borrowed: a command holds `Arc`s (its client, a parked
    // wait) whose last drop runs their destructors.
    v.clear();
    SPARE.with(|s| keep(&mut s.borrow_mut().cmds, v, MAX_SLOTS, 2 * KEEP));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replies(bytes: usize) -> ShardReplies {
        ShardReplies {
            buf: vec![b'x'; bytes],
            ends: vec![bytes],
            park: None,
            seen: None,
            overflow: false,
        }
    }

    #[test]
    fn pools_keep_small_buffers_emptied_and_never_more_than_their_bound() {
        // A sub-batch's small reply buffer comes back empty with its room, for the next one.
        give_lists(Vec::new(), vec![replies(100)], Vec::new());
        let (buf, ends) = take_replies();
        assert!(buf.is_empty() && buf.capacity() >= 100);
        assert!(ends.is_empty() && ends.capacity() >= 1);
        assert_eq!(take_replies().0.capacity(), 0, "one was kept, one taken");

        // A huge reply's buffer is freed, not kept for the thread's lifetime.
        give_lists(Vec::new(), vec![replies(MAX_BYTES + 1)], Vec::new());
        assert_eq!(take_replies().0.capacity(), 0);

        // However many batches hand theirs back at once, a pool holds a bounded number.
        for _ in 0..10 * KEEP {
            give_lists(Vec::new(), vec![replies(64), replies(64)], Vec::new());
            give(vec![0; 64], Vec::new());
        }
        SPARE.with(|s| {
            let s = s.borrow();
            assert_eq!(s.replies.len(), 2 * KEEP);
            assert_eq!(s.bufs.len(), KEEP);
            assert!(s.done.len() <= KEEP && s.bufs.iter().all(|b| b.is_empty()));
        });
    }
}
