//! A parked BLMOVE or BRPOPLPUSH whose source and destination live on different shards, served at
//! the write that made its source ready, by messages between the two shards (see
//! `strata_shard::park`, "Moved across shards by messages").
//!
//! The move holds both keys' locks across it, as any multi-shard command does, in four steps:
//!
//! 1. **Claim** (source shard, in the turn of the write): the source holds a list and its lock is
//!    free for the command's owner: take the lock, claim the command, and send step 2 at once
//!    ([`ShardSet::post_now`]), so it reaches the destination shard ahead of anything the pusher
//!    sends after reading its reply.
//! 2. **Lock the destination** (destination shard): if the source shard is the lower one, the
//!    request may queue (that is the ascending order every lock context follows). Otherwise only a
//!    lock free at once is taken: waiting for it while holding the higher source could close a
//!    cycle with a lock context holding the destination and waiting for the source. If it is not
//!    free, the claim is given back: the source is released and the command woken, to run again from
//!    its task as before. Then the destination's type is checked.
//! 3. **Pop** (source shard): pop the element (nothing if the destination has another type: the
//!    command fails with WRONGTYPE and the source keeps the element, as in Redis), release the
//!    source and serve the source's next waiters.
//! 4. **Push** (destination shard): push, announce the source's pop, release the destination, and
//!    hand the reply to the command's task ([`Parked::deliver`]).
//!
//! Nobody can see the element in neither list (both keys are locked from step 1 to the release of
//! each), and whatever the pusher sends next on either key queues behind the move.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use futures_channel::oneshot;
use strata_commands::list::moving;
use strata_core::list::End;
use strata_node::ClientInfo;
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::chain::MoveTicket;
use strata_shard::{
    now_us, with_shard, Grant, LockHandover, LockId, Mode, Owner, Parked, Served, Shard, ShardSet,
};

use crate::dispatch::peer_gone;

/// One parked move whose keys live on two shards.
pub(crate) struct Move {
    pub set: ShardSet,
    pub db: usize,
    pub src: Bytes,
    pub dst: Bytes,
    pub from: End,
    pub to: End,
    pub src_shard: usize,
    pub dst_shard: usize,
    pub info: Arc<ClientInfo>,
    pub proto: Protocol,
    /// The command's index in the table, for its statistics.
    pub cmd_id: usize,
}

/// The runner of a parked cross-shard move: step 1, on its source shard (it parks on nothing else).
pub(crate) fn runner(m: Move) -> strata_shard::Runner {
    let m = Arc::new(m);
    Box::new(move |shard: &mut Shard, p: &Arc<Parked>| claim(&m, shard, p))
}

fn now_ms() -> i64 {
    now_us() / 1000
}

fn claim(m: &Arc<Move>, s: &mut Shard, p: &Arc<Parked>) -> Served {
    if s.id != m.src_shard {
        return Served::Gone;
    }
    let (db, owner) = (m.db as u32, p.owner());
    // The move that just wrote the source (the link before this one in a chain) offers its lock
    // on it: only its own lock may stand in the way then, and this move takes it over, so nothing
    // queued for the key meanwhile comes between the two links (Redis runs the chain at once).
    let handover = s
        .lock_handover
        .as_ref()
        .filter(|h| h.db == m.db && h.key == m.src)
        .map(|h| (h.id, h.from));
    let free = match handover {
        Some((_, from)) => s
            .locks
            .may_run_between(owner, from, db, &m.src, Mode::Exclusive),
        None => s.locks.may_run(Some(owner), db, &m.src, Mode::Exclusive),
    };
    if !free {
        return Served::Busy;
    }
    if peer_gone(&m.info) {
        return Served::Gone;
    }
    if !moving::source_ready(s.db_mut(m.db), &m.src, now_ms()) {
        return Served::Parked;
    }
    let src_lock = match handover {
        Some((id, _)) if s.locks.hand_over(id, owner) => {
            s.lock_handover = None;
            id
        }
        _ => {
            let (id, grant) =
                s.locks
                    .acquire_key(owner, db, &m.src, Mode::Exclusive, Box::new(|| {}));
            if grant != Grant::Now {
                // `may_run` said it was free; never leave a request queued for nobody.
                s.locks.cancel(id);
                return Served::Busy;
            }
            id
        }
    };
    p.set_retried();
    p.claim();
    // No longer blocked from now on (INFO, CLIENT LIST, CLIENT UNBLOCK), as in Redis.
    m.info.unblockable.store(false, Ordering::Release);
    m.info.blocked.store(false, Ordering::Relaxed);
    // The client whose command made the source ready waits for this move, and for any move this
    // one makes possible in turn (see `strata_shard::chain`).
    let ticket = MoveTicket::new(s.running_client);
    let (m2, p2) = (m.clone(), p.clone());
    m.set.post_now(
        m.dst_shard,
        Box::new(move || lock_destination(m2, p2, src_lock, ticket)),
    );
    Served::Claimed
}

/// Step 2, on the destination shard.
fn lock_destination(m: Arc<Move>, p: Arc<Parked>, src_lock: LockId, t: Option<MoveTicket>) {
    let (db, owner) = (m.db as u32, p.owner());
    let may_queue = m.src_shard < m.dst_shard;
    let (tx, rx) = oneshot::channel::<()>();
    let request = with_shard(|s| {
        if !may_queue && !s.locks.may_run(Some(owner), db, &m.dst, Mode::Exclusive) {
            return None;
        }
        let on_grant = Box::new(move || {
            let _ = tx.send(());
        });
        let (id, grant) = s
            .locks
            .acquire_key(owner, db, &m.dst, Mode::Exclusive, on_grant);
        if grant == Grant::Queued && !may_queue {
            s.locks.cancel(id);
            return None;
        }
        Some((id, grant))
    });
    match request {
        None => {
            // Give the claim back: release the source, and let the task run the command itself.
            let shard = m.src_shard;
            m.set.post_now(
                shard,
                Box::new(move || {
                    with_shard(|s| {
                        s.locks.release(src_lock);
                        on_behalf(s, &t, Shard::serve_ready);
                    });
                    p.unclaim();
                }),
            );
        }
        Some((id, Grant::Now)) => check_destination(m, p, src_lock, id, t),
        Some((id, Grant::Queued)) => {
            strata_rt::spawn(async move {
                // The sender sits in the lock table until the grant; nothing cancels this request.
                let _ = rx.await;
                check_destination(m, p, src_lock, id, t);
            });
        }
    }
}

/// Step 2, once the destination is locked: check its type and go on to step 3.
fn check_destination(
    m: Arc<Move>,
    p: Arc<Parked>,
    src_lock: LockId,
    dst_lock: LockId,
    t: Option<MoveTicket>,
) {
    let ok = with_shard(|s| moving::destination_ok(s.db_mut(m.db), &m.dst, now_ms()));
    let set = m.set.clone();
    set.post_now(
        m.src_shard,
        Box::new(move || pop_source(m, p, src_lock, dst_lock, ok, t)),
    );
}

/// Step 3, on the source shard.
fn pop_source(
    m: Arc<Move>,
    p: Arc<Parked>,
    src_lock: LockId,
    dst_lock: LockId,
    dst_ok: bool,
    t: Option<MoveTicket>,
) {
    let (client, owner) = (m.info.id, p.owner());
    let popped = with_shard(|s| {
        let popped = if dst_ok {
            tracked(client, || {
                moving::pop(s.db_mut(m.db), &m.src, m.from, now_ms())
            })
        } else {
            None
        };
        if !dst_ok {
            count(s, m.cmd_id, Some(b"WRONGTYPE"));
            // The element stays: the commands parked behind this one get their turn.
            s.ready_again(m.db, &m.src);
        }
        // What is left in the source goes to the waiters behind this one, before anything
        // that queued for the source meanwhile (see `serve_behind`).
        serve_behind(s, owner, src_lock, m.db, &m.src, &t);
        popped
    });
    let Some((v, emptied)) = popped.filter(|_| dst_ok) else {
        let shard = m.dst_shard;
        m.set.post_now(
            shard,
            Box::new(move || with_shard(|s| s.locks.release(dst_lock))),
        );
        if dst_ok {
            // The source emptied meanwhile (it expired): the command stays parked.
            p.unclaim();
        } else {
            let mut out = ReplyBuf::new(m.proto);
            out.error(&strata_node::CmdError::WrongType.message());
            p.deliver(out.buf);
        }
        return;
    };
    let set = m.set.clone();
    set.post_now(
        m.dst_shard,
        Box::new(move || push_destination(m, p, dst_lock, Bytes::from(v), emptied, t)),
    );
}

/// Step 4, on the destination shard.
fn push_destination(
    m: Arc<Move>,
    p: Arc<Parked>,
    dst_lock: LockId,
    v: Bytes,
    emptied: bool,
    t: Option<MoveTicket>,
) {
    let mut out = ReplyBuf::new(m.proto);
    with_shard(|s| {
        let now = now_ms();
        let pushed = tracked(m.info.id, || {
            let db = s.db_mut(m.db);
            moving::push(db, &m.src, &m.dst, v.clone(), m.from, m.to, emptied, now)
        });
        // The destination's type was checked under the lock held since, so this is the element.
        match pushed {
            Ok(_) => {
                if strata_shard::propagate::on() {
                    // Numbered while both keys are still locked: the move as its LMOVE.
                    let argv = vec![
                        Bytes::from_static(b"LMOVE"),
                        m.src.clone(),
                        m.dst.clone(),
                        strata_commands::list::end_name(m.from),
                        strata_commands::list::end_name(m.to),
                    ];
                    strata_shard::propagate::push(m.db as u32, 0, argv);
                }
                out.bulk(&v)
            }
            Err(e) => out.error(&e.message()),
        }
        count(s, m.cmd_id, None);
        // A waiter on the destination is served now, as after any push: the next link of a
        // chain, whose move (if it crosses shards too) the same client waits for.
        serve_behind(s, p.owner(), dst_lock, m.db, &m.dst, &t);
    });
    p.deliver(out.buf);
    // The move is done: its client may answer once the moves it made possible are too.
    drop(t);
}

/// Runs `f` as part of the command of the client that started the chain `t` belongs to, so the
/// moves `f` claims join it.
fn on_behalf<R>(s: &mut Shard, t: &Option<MoveTicket>, f: impl FnOnce(&mut Shard) -> R) -> R {
    let prev = s.running_client;
    s.running_client = t.as_ref().map_or(0, MoveTicket::client);
    let r = f(s);
    s.running_client = prev;
    r
}

/// Serves the commands parked on `key`, which this move (`owner`) wrote, then releases the move's
/// lock on it (`lock`). They are served while the move still holds the lock and as if between its
/// commands (`Shard::serve_between`): Redis serves them right after the move, so a command that
/// queued for the key meanwhile (the pusher's next one) must not get it first, which releasing
/// before serving would let happen. A cross-shard move parked on the key takes the lock over
/// instead (`Shard::lock_handover`); it is then not released here. Runs on behalf of the client
/// that started the chain (`t`), whose wait the moves claimed meanwhile join.
fn serve_behind(
    s: &mut Shard,
    owner: Owner,
    lock: LockId,
    db: usize,
    key: &Bytes,
    t: &Option<MoveTicket>,
) {
    let prev = s.serve_between(Some(owner));
    let prev_handover = s.lock_handover.replace(LockHandover {
        id: lock,
        from: owner,
        db,
        key: key.clone(),
    });
    on_behalf(s, t, Shard::serve_ready);
    let offered = std::mem::replace(&mut s.lock_handover, prev_handover);
    s.serve_between(prev);
    if offered.is_some() {
        s.locks.release(lock);
    }
}

/// Runs `f` as a command of `client` for CLIENT TRACKING (NOLOOP needs who modified a key).
fn tracked<R>(client: u64, f: impl FnOnce() -> R) -> R {
    let tracking = strata_shard::tracking::active() != 0;
    if tracking {
        strata_shard::tracking::begin_command(client);
    }
    let r = f();
    if tracking {
        strata_shard::tracking::end_command();
    }
    r
}

/// Counts the served command in the shard's statistics (INFO commandstats), and its `error`.
fn count(s: &mut Shard, cmd_id: usize, error: Option<&[u8]>) {
    s.stats.commands += 1;
    let st = s.stats.cmd_mut(cmd_id);
    st.calls += 1;
    st.failed_calls += error.is_some() as u64;
    if let Some(e) = error {
        s.stats.count_error(e);
    }
}
