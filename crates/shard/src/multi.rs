//! Multi-shard atomicity: take locks on every key, shard by shard, then run the parts.
//!
//! See [`crate::locks`] for the lock rules and why they cannot deadlock. A [`MultiLock`] is the
//! coordinator's handle: its parts run through [`MultiLock::run`] without any lock check (the locks
//! are theirs), and the locks are released with [`MultiLock::release`].
//!
//! Cancel safety: a `MultiLock` knows, at every await point of its acquisition, exactly which
//! requests it has made: the granted ones, the one queued on the current shard, and a request sent
//! to a remote shard whose id is not known yet (the [`Handoff`]). Dropping it, at any point, posts a
//! [`LockTable::cancel`](crate::LockTable::cancel) for each known request (withdrawn if still queued,
//! released if granted, even if the grant fired after the drop) and marks an in-flight request
//! abandoned, so the shard never makes it, or cancels it if it was made. Once the posted jobs have run,
//! every lock table is as if the `MultiLock` had never existed.

use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use futures_channel::oneshot;

use crate::locks::{new_owner, Grant, LockId, LockSet, Mode, Owner};
use crate::set::ShardSet;
use crate::shard::{current_shard_id, with_shard, Shard};
use crate::versions::Seen;

/// Locks held by one owner on one or more shards.
pub struct MultiLock {
    set: ShardSet,
    owner: Owner,
    /// Requests made, by shard ascending. All granted once acquisition has finished; during it, the
    /// last one may still be queued.
    ids: Vec<(usize, LockId)>,
    /// A request posted to a remote shard whose id has not come back yet.
    inflight: Option<(usize, Arc<Mutex<Handoff>>)>,
    /// Set by a part that changed its shard's dataset, while the propagation stream is on (see
    /// [`crate::propagate`]; None when off).
    changed: Option<Arc<std::sync::atomic::AtomicBool>>,
}

/// What happened to a request posted to another shard; shared by that shard's job and the
/// coordinator, so exactly one of them decides its fate.
enum Handoff {
    /// Posted, not yet made.
    Sent,
    /// The coordinator is gone: the shard must not make the request.
    Abandoned,
    /// Made: its id, and the grant signal if it was queued.
    Made(LockId, Option<oneshot::Receiver<()>>),
}

fn state_of(h: &Mutex<Handoff>) -> MutexGuard<'_, Handoff> {
    // No code panics while holding it; recover the state rather than propagate a poison.
    h.lock().unwrap_or_else(|e| e.into_inner())
}

/// A grant callback that wakes `tx`.
fn signal(tx: oneshot::Sender<()>) -> Box<dyn FnOnce()> {
    Box::new(move || {
        // The receiver is gone only if the coordinator was dropped; its cancel releases the grant.
        let _ = tx.send(());
    })
}

impl ShardSet {
    /// Groups `keys` by owning shard, in ascending shard order.
    pub fn group_keys(
        &self,
        keys: impl IntoIterator<Item = (Bytes, Mode)>,
    ) -> Vec<(usize, Vec<(Bytes, Mode)>)> {
        let mut per: Vec<Vec<(Bytes, Mode)>> = vec![Vec::new(); self.len()];
        for (k, m) in keys {
            per[self.shard_of_key(&k)].push((k, m));
        }
        per.into_iter()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .collect()
    }

    /// Releases granted lock requests `ids` (shard, id): this thread's shard's at once, the others
    /// by message. Must not be called inside [`with_shard`].
    pub fn release_locks(&self, ids: impl IntoIterator<Item = (usize, LockId)>) {
        let local = current_shard_id();
        for (shard, id) in ids {
            if Some(shard) == local {
                with_shard(|s| s.locks.release(id));
            } else {
                self.post(shard, Box::new(move || with_shard(|s| s.locks.release(id))));
            }
        }
    }

    /// Locks `keys` of database `db` on their shards for a fresh owner, waiting (without blocking
    /// any thread) for conflicting holders. Shards are visited in ascending order.
    pub async fn lock_keys(
        &self,
        db: u32,
        keys: impl IntoIterator<Item = (Bytes, Mode)>,
    ) -> MultiLock {
        self.lock_keys_as(new_owner(), db, keys).await
    }

    /// [`lock_keys`](Self::lock_keys) for `owner` (a transaction's lock context).
    pub async fn lock_keys_as(
        &self,
        owner: Owner,
        db: u32,
        keys: impl IntoIterator<Item = (Bytes, Mode)>,
    ) -> MultiLock {
        let mut per: Vec<LockSet> = (0..self.len()).map(|_| LockSet::new()).collect();
        for (k, m) in keys {
            per[self.shard_of_key(&k)].add_key(db, &k, m);
        }
        let plan = per
            .into_iter()
            .enumerate()
            .filter(|(_, s)| !s.is_empty())
            .collect();
        self.lock_plan(owner, plan).await
    }

    /// Locks whole databases exclusively on every shard for a fresh owner (FLUSHDB, FLUSHALL,
    /// SWAPDB).
    pub async fn lock_dbs(&self, dbs: &[u32]) -> MultiLock {
        self.lock_dbs_as(new_owner(), dbs, Mode::Exclusive).await
    }

    /// Locks whole databases in `mode` on every shard for `owner` (`Shared` reads every key, as
    /// KEYS does, while reads of single keys go on).
    pub async fn lock_dbs_as(&self, owner: Owner, dbs: &[u32], mode: Mode) -> MultiLock {
        let mut set = LockSet::new();
        for &db in dbs {
            set.add_db(db, mode);
        }
        let plan = (0..self.len()).map(|s| (s, set.clone())).collect();
        self.lock_plan(owner, plan).await
    }

    /// Takes each shard's lock set for `owner`, in ascending shard order (the plan is sorted and
    /// sets for the same shard merged first), each shard only once the previous one granted.
    pub async fn lock_plan(&self, owner: Owner, mut plan: Vec<(usize, LockSet)>) -> MultiLock {
        plan.sort_by_key(|(s, _)| *s);
        let mut merged: Vec<(usize, LockSet)> = Vec::with_capacity(plan.len());
        for (shard, set) in plan {
            match merged.last_mut() {
                Some((last, acc)) if *last == shard => acc.extend(set),
                _ => merged.push((shard, set)),
            }
        }
        for (_, set) in &mut merged {
            set.coarsen_if_huge();
        }
        let mut lock = MultiLock {
            set: self.clone(),
            owner,
            ids: Vec::with_capacity(merged.len()),
            inflight: None,
            changed: crate::propagate::on().then(Arc::default),
        };
        // More than two shards: first ask them all at once to grant what they can grant at once
        // (requests that never wait may be made in any order, see [`Optimistic`]). If all do, the
        // locks are held after one round trip instead of one per shard; if one refuses, what was
        // granted is given back and the shards are asked again in order, waiting. (With two, the
        // first is usually this thread's own, asked inline: nothing to gain.)
        if merged.len() > 2 {
            let mut opt = Optimistic::new(self, owner);
            let tries: Vec<_> = merged
                .iter()
                .map(|(shard, set)| opt.attempt(*shard, set.clone(), |_| ()))
                .collect();
            let granted = futures_util::future::join_all(tries).await;
            opt.settle();
            if granted.iter().all(Option::is_some) {
                lock.ids = std::mem::take(&mut opt.held);
                lock.ids.sort_unstable_by_key(|&(s, _)| s);
                return lock;
            }
            opt.release();
        }
        for (shard, set) in merged {
            let wait = if current_shard_id() == Some(shard) {
                let (tx, rx) = oneshot::channel();
                let (id, grant) = with_shard(|s| s.locks.acquire(owner, set, signal(tx)));
                lock.ids.push((shard, id));
                (grant == Grant::Queued).then_some(rx)
            } else {
                let handoff = Arc::new(Mutex::new(Handoff::Sent));
                let (done_tx, done_rx) = oneshot::channel::<()>();
                let h = handoff.clone();
                self.post(
                    shard,
                    Box::new(move || {
                        let mut h = state_of(&h);
                        if matches!(*h, Handoff::Abandoned) {
                            return;
                        }
                        let (tx, rx) = oneshot::channel();
                        let (id, grant) = with_shard(|s| s.locks.acquire(owner, set, signal(tx)));
                        *h = Handoff::Made(id, (grant == Grant::Queued).then_some(rx));
                        drop(h);
                        let _ = done_tx.send(());
                    }),
                );
                lock.inflight = Some((shard, handoff));
                // Dropped unsent only if the shard thread is gone (process shutdown); the state
                // check below then fails loudly, as `ShardSet::call` does.
                let _ = done_rx.await;
                let (_, handoff) = lock.inflight.take().expect("set just above");
                let state = std::mem::replace(&mut *state_of(&handoff), Handoff::Abandoned);
                let Handoff::Made(id, rx) = state else {
                    panic!("shard thread exited while a lock request was pending");
                };
                lock.ids.push((shard, id));
                rx
            };
            if let Some(rx) = wait {
                // The sender sits in the lock table until the grant; only a cancel (ours, so not
                // while we wait) or a shard thread's exit drops it unfired.
                let _ = rx.await;
            }
        }
        lock
    }
}

impl MultiLock {
    /// The shard set these locks live in.
    pub fn shard_set(&self) -> &ShardSet {
        &self.set
    }

    /// The lock context these locks belong to.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// The shards this lock spans, ascending.
    pub fn shards(&self) -> impl Iterator<Item = usize> + '_ {
        self.ids.iter().map(|(s, _)| *s)
    }

    /// Runs a part of the command on `shard` under the held locks.
    pub async fn run<R: Send + 'static>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut Shard) -> R + Send + 'static,
    ) -> R {
        match &self.changed {
            None => self.set.call(shard, f).await,
            Some(changed) => {
                let changed = changed.clone();
                self.set
                    .call(shard, move |s| {
                        let mark = s.dirty_total();
                        let r = f(s);
                        if s.dirty_total() != mark {
                            changed.store(true, std::sync::atomic::Ordering::Relaxed);
                        }
                        r
                    })
                    .await
            }
        }
    }

    /// Whether a part run so far changed its shard's dataset (always false while the propagation
    /// stream was off when the locks were taken).
    pub fn changed(&self) -> bool {
        self.changed
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Runs `op` concurrently on every shard this lock spans that owns some of `items`, each with its
    /// share (those whose `key` it owns, in their original order); a shard with none gets no message.
    /// Returns, per such shard, the indices in `items` of the items it got and `op`'s result. Each
    /// key's slot is computed once.
    pub async fn scatter<I, T>(
        &self,
        items: &[I],
        key: fn(&I) -> &Bytes,
        op: impl Fn(&mut Shard, &[I]) -> T + Clone + Send + 'static,
    ) -> Vec<(Vec<usize>, T)>
    where
        I: Clone + Send + 'static,
        T: Send + 'static,
    {
        let mut parts: Vec<(usize, Vec<usize>, Vec<I>)> =
            self.shards().map(|s| (s, Vec::new(), Vec::new())).collect();
        for (i, item) in items.iter().enumerate() {
            let owner = self.set.shard_of_key(key(item));
            if let Ok(p) = parts.binary_search_by_key(&owner, |(s, _, _)| *s) {
                parts[p].1.push(i);
                parts[p].2.push(item.clone());
            }
        }
        parts.retain(|(_, idx, _)| !idx.is_empty());
        let runs = parts.into_iter().map(|(shard, idx, mine)| {
            let op = op.clone();
            let run = self.run(shard, move |s| op(s, &mine));
            async move { (idx, run.await) }
        });
        futures_util::future::join_all(runs).await
    }

    /// Releases every lock: the local shard's at once, remote ones by message. Must not be called
    /// inside [`with_shard`].
    pub fn release(mut self) {
        self.set.release_locks(std::mem::take(&mut self.ids));
    }
}

impl Drop for MultiLock {
    fn drop(&mut self) {
        // Reached with requests left only if the coordinator was dropped (cancelled). Posting, even
        // to this thread's shard, keeps this safe when dropped inside a `with_shard` call.
        if let Some((shard, handoff)) = self.inflight.take() {
            if let Handoff::Made(id, _) =
                std::mem::replace(&mut *state_of(&handoff), Handoff::Abandoned)
            {
                self.ids.push((shard, id));
            }
        }
        for (shard, id) in std::mem::take(&mut self.ids) {
            self.set
                .post(shard, Box::new(move || with_shard(|s| s.locks.cancel(id))));
        }
    }
}

/// Locks taken shard by shard as a read-only command first touches each shard, in the same message
/// as its first read there, and only if they can be granted at once (`LockTable::try_acquire`):
/// a multi-key read across shards in one round trip instead of one per shard to lock and one to
/// read. It never waits for a lock, so it may lock shards in any order without risk of deadlock;
/// when a shard refuses, the command is abandoned (it wrote nothing, and what it read is thrown
/// away), its locks released, and it runs again the ordinary way ([`ShardSet::lock_plan`]). Strict
/// two-phase locking all the same: every lock is held until [`Optimistic::release`].
///
/// Cancel-safe like [`MultiLock`]: a request in flight when it is dropped is abandoned (the shard
/// does not make it) or, if already made, released.
pub struct Optimistic {
    set: ShardSet,
    owner: Owner,
    /// Granted requests.
    held: Vec<(usize, LockId)>,
    /// Requests sent and not settled yet.
    inflight: Vec<Arc<Mutex<Attempt>>>,
    /// Reads without locks (see [`Optimistic::unlocked`]): what each shard's attempt saw.
    unlocked: Option<Vec<(usize, Seen)>>,
}

/// The fate of one attempt, decided under its mutex by the shard or by a drop.
enum Attempt {
    Sent,
    Abandoned,
    /// Granted on that shard.
    Made(usize, LockId),
    /// Read without locks on that shard, which saw these versions.
    Read(usize, Seen),
    Refused,
}

impl Optimistic {
    /// Nothing locked yet, for a fresh `owner`.
    pub fn new(set: &ShardSet, owner: Owner) -> Optimistic {
        Optimistic {
            set: set.clone(),
            owner,
            held: Vec::new(),
            inflight: Vec::new(),
            unlocked: None,
        }
    }

    /// For a read-only command: its attempts take no locks. Each runs only if no lock of another
    /// command stands on its keys (so it never reads a transaction's half-done state) and records
    /// the versions of those keys (see [`crate::versions`]); [`release`](Self::release) then says
    /// whether none of them moved, that is whether the reads are those of one moment. Needs more
    /// than one shard (a set with one has no versions: its attempts are refused).
    pub fn unlocked(set: &ShardSet) -> Optimistic {
        let mut opt = Optimistic::new(set, new_owner());
        opt.unlocked = Some(Vec::new());
        opt
    }

    /// The shard set.
    pub fn shard_set(&self) -> &ShardSet {
        &self.set
    }

    /// Whether this owner's locks on `shard` are held.
    pub fn holds(&self, shard: usize) -> bool {
        self.held.iter().any(|&(s, _)| s == shard)
    }

    /// Starts an attempt on `shard`: take `locks` if they can be granted at once and, if so, run
    /// `f` there under them. The returned future gives `f`'s result, or None if the shard refused;
    /// [`settle`](Self::settle) must be called once it (and any others started alongside) is done.
    pub fn attempt<R: Send + 'static>(
        &mut self,
        shard: usize,
        locks: LockSet,
        f: impl FnOnce(&mut Shard) -> R + Send + 'static,
    ) -> impl std::future::Future<Output = Option<R>> + 'static {
        let state = Arc::new(Mutex::new(Attempt::Sent));
        self.inflight.push(state.clone());
        let owner = self.owner;
        let set = self.set.clone();
        let unlocked = self.unlocked.is_some();
        async move {
            set.call(shard, move |s| {
                let mut st = state_of_attempt(&state);
                if matches!(*st, Attempt::Abandoned) {
                    return None;
                }
                if unlocked {
                    let Some(epoch) = s.versions().map(|v| v.epoch()) else {
                        *st = Attempt::Refused;
                        return None;
                    };
                    if !s.locks.may_run_set(None, &locks) {
                        *st = Attempt::Refused;
                        return None;
                    }
                    *st = Attempt::Read(shard, Seen::default());
                    drop(st);
                    let r = f(s);
                    let mut seen = Seen {
                        epoch,
                        keys: Vec::new(),
                    };
                    if let Some(v) = s.versions() {
                        for (db, fp) in locks.key_items() {
                            v.record_fingerprint(db, fp, &mut seen);
                        }
                    }
                    // Abandoned meanwhile: nothing was held, nothing to give back.
                    if let Attempt::Read(_, kept) = &mut *state_of_attempt(&state) {
                        *kept = seen;
                    }
                    return Some(r);
                }
                match s.locks.try_acquire(owner, locks) {
                    Some(id) => {
                        *st = Attempt::Made(shard, id);
                        drop(st);
                        Some(f(s))
                    }
                    None => {
                        *st = Attempt::Refused;
                        None
                    }
                }
            })
            .await
        }
    }

    /// Records the outcome of every attempt started so far (all of them must be done).
    pub fn settle(&mut self) {
        for state in std::mem::take(&mut self.inflight) {
            match std::mem::replace(&mut *state_of_attempt(&state), Attempt::Abandoned) {
                Attempt::Made(shard, id) => self.held.push((shard, id)),
                Attempt::Read(shard, seen) => {
                    if let Some(read) = &mut self.unlocked {
                        read.push((shard, seen));
                    }
                }
                _ => {}
            }
        }
    }

    /// The shards on which an [`unlocked`](Self::unlocked) read's attempts have run so far (each
    /// settled attempt that was not refused): where its reads counted keyspace hits and misses.
    pub fn shards_read(&self) -> Vec<usize> {
        self.unlocked
            .iter()
            .flatten()
            .map(|&(shard, _)| shard)
            .collect()
    }

    /// Runs `f` on `shard`, whose locks this owner holds.
    pub async fn run<R: Send + 'static>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut Shard) -> R + Send + 'static,
    ) -> R {
        self.set.call(shard, f).await
    }

    /// Releases every lock: the local shard's at once, remote ones by message. Must not be called
    /// inside [`with_shard`]. For an [`unlocked`](Self::unlocked) read: true if none of the
    /// versions its attempts saw has moved (its reads are those of this moment); always true
    /// otherwise.
    pub fn release(mut self) -> bool {
        self.settle();
        self.set.release_locks(std::mem::take(&mut self.held));
        self.unlocked.take().is_none_or(|read| {
            read.iter()
                .all(|(shard, seen)| self.set.versions(*shard).is_some_and(|v| v.unchanged(seen)))
        })
    }
}

impl Drop for Optimistic {
    fn drop(&mut self) {
        // Requests in flight are abandoned, or released below if made. Posting, even to this
        // thread's shard, keeps this safe when dropped inside `with_shard`.
        self.settle();
        for (shard, id) in self.held.drain(..) {
            self.set
                .post(shard, Box::new(move || with_shard(|s| s.locks.cancel(id))));
        }
    }
}

fn state_of_attempt(a: &Mutex<Attempt>) -> MutexGuard<'_, Attempt> {
    a.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    //! Real shard threads (more than this machine's cores), many coordinators per thread, each
    //! acquisition dropped at a random await point or carried through.

    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::task::{Context, Poll};
    use std::time::Duration;

    use super::*;
    use crate::shard::install;

    /// Polls the inner future at most `polls` times, then drops it. With `wake`, the drop comes
    /// right after the last poll; without, on the next real wake-up (say, a grant that fired).
    struct Limit<F: Future> {
        fut: Option<Pin<Box<F>>>,
        polls: usize,
        wake: bool,
    }

    impl<F: Future> Future for Limit<F> {
        type Output = Option<F::Output>;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            if self.polls == 0 {
                self.fut = None;
                return Poll::Ready(None);
            }
            self.polls -= 1;
            let Some(fut) = self.fut.as_mut() else {
                return Poll::Ready(None);
            };
            match fut.as_mut().poll(cx) {
                Poll::Ready(v) => Poll::Ready(Some(v)),
                Poll::Pending => {
                    if self.polls == 0 && self.wake {
                        cx.waker().wake_by_ref();
                    }
                    Poll::Pending
                }
            }
        }
    }

    async fn yield_now() {
        let mut yielded = false;
        std::future::poll_fn(|cx| {
            if yielded {
                Poll::Ready(())
            } else {
                yielded = true;
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
        .await
    }

    thread_local! {
        /// Per shard thread: what the granted locks claim, to check they exclude each other.
        /// "k:<key>": -1 written, n > 0 read by n; "ix"/"is": key writers/readers; "dbx"/"dbs".
        static MARKS: RefCell<HashMap<String, i64>> = RefCell::new(HashMap::new());
    }

    #[derive(Clone, Debug)]
    enum Want {
        Keys(Vec<(Bytes, Mode)>),
        Db(Mode),
    }

    fn mark(want: &Want, shard: usize, set: &ShardSet, on: bool) {
        MARKS.with(|m| {
            let mut m = m.borrow_mut();
            let mut get = |k: &str| *m.entry(k.to_string()).or_default();
            let (dbx, dbs, ix, is) = (get("dbx"), get("dbs"), get("ix"), get("is"));
            let d = if on { 1 } else { -1 };
            match want {
                Want::Db(Mode::Exclusive) => {
                    if on {
                        assert_eq!(
                            (dbx, dbs, ix, is),
                            (0, 0, 0, 0),
                            "db X granted over holders"
                        );
                    }
                    m.insert("dbx".into(), dbx + d);
                }
                Want::Db(Mode::Shared) => {
                    if on {
                        assert_eq!((dbx, ix), (0, 0), "db S granted over writers");
                    }
                    m.insert("dbs".into(), dbs + d);
                }
                Want::Keys(keys) => {
                    for (k, mode) in keys.iter().filter(|(k, _)| set.shard_of_key(k) == shard) {
                        let name = format!("k:{}", String::from_utf8_lossy(k));
                        let cur = *m.entry(name.clone()).or_default();
                        let (next, counter) = match mode {
                            Mode::Exclusive => {
                                if on {
                                    assert_eq!((cur, dbx, dbs), (0, 0, 0), "{name} X conflict");
                                }
                                (if on { -1 } else { 0 }, "ix")
                            }
                            Mode::Shared => {
                                if on {
                                    assert!(cur >= 0 && dbx == 0, "{name} S conflict");
                                }
                                (cur + d, "is")
                            }
                        };
                        m.insert(name, next);
                        *m.entry(counter.into()).or_default() += d;
                    }
                }
            }
        })
    }

    async fn worker(
        set: ShardSet,
        seed: u64,
        iterations: usize,
        completed: &AtomicUsize,
        progress: &AtomicUsize,
    ) {
        let mut rng = seed | 1;
        let mut next = move |n: u64| {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng % n
        };
        for _ in 0..iterations {
            progress.fetch_add(1, Ordering::Relaxed);
            let want = match next(10) {
                0 => Want::Db(Mode::Exclusive),
                1 => Want::Db(Mode::Shared),
                _ => {
                    let n = 1 + next(4);
                    let keys = (0..n)
                        .map(|_| {
                            let k = Bytes::from(format!("k{}", next(12)));
                            let m = if next(2) == 0 {
                                Mode::Shared
                            } else {
                                Mode::Exclusive
                            };
                            (k, m)
                        })
                        .collect::<Vec<_>>();
                    // The same key asked twice keeps its strongest mode, as LockSet does.
                    let mut strongest: Vec<(Bytes, Mode)> = Vec::new();
                    for (k, m) in keys {
                        match strongest.iter_mut().find(|(x, _)| *x == k) {
                            Some((_, old)) if m == Mode::Exclusive => *old = m,
                            Some(_) => {}
                            None => strongest.push((k, m)),
                        }
                    }
                    Want::Keys(strongest)
                }
            };
            let fut = {
                let (set, want) = (set.clone(), want.clone());
                async move {
                    match want {
                        Want::Keys(keys) => set.lock_keys(0, keys).await,
                        Want::Db(mode) => set.lock_dbs_as(new_owner(), &[0], mode).await,
                    }
                }
            };
            // Half the acquisitions are dropped after 1..=6 polls; the rest run to completion.
            let polls = if next(2) == 0 {
                1 + next(6) as usize
            } else {
                usize::MAX
            };
            let limited = Limit {
                fut: Some(Box::pin(fut)),
                polls,
                wake: next(2) == 0,
            };
            let Some(lock) = limited.await else {
                continue;
            };
            completed.fetch_add(1, Ordering::Relaxed);
            let shards: Vec<usize> = lock.shards().collect();
            for &s in &shards {
                let (w, st) = (want.clone(), set.clone());
                lock.run(s, move |_| mark(&w, s, &st, true)).await;
            }
            for _ in 0..next(3) {
                yield_now().await;
            }
            for &s in &shards {
                let (w, st) = (want.clone(), set.clone());
                lock.run(s, move |_| mark(&w, s, &st, false)).await;
            }
            lock.release();
        }
    }

    /// Each shard's lock state, read by a job queued behind everything posted so far.
    async fn table_states(set: &ShardSet) -> Vec<(bool, usize, usize)> {
        let mut out = Vec::new();
        for shard in 0..set.len() {
            let (tx, rx) = oneshot::channel();
            set.post(
                shard,
                Box::new(move || {
                    let st =
                        with_shard(|s| (s.locks.is_idle(), s.locks.granted(), s.locks.queued()));
                    let _ = tx.send(st);
                }),
            );
            out.push(rx.await.expect("shard thread alive"));
        }
        out
    }

    #[test]
    fn dropped_acquisitions_leave_every_table_idle() {
        const SHARDS: usize = 5;
        const WORKERS: usize = 3;
        const ITERATIONS: usize = 400;
        let (set, inboxes) = ShardSet::new(SHARDS);
        let finished = Arc::new(AtomicUsize::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let completed = Arc::new(AtomicUsize::new(0));
        let progress = Arc::new(AtomicUsize::new(0));
        let states = Arc::new(Mutex::new(Vec::new()));
        let threads: Vec<_> = inboxes
            .into_iter()
            .enumerate()
            .map(|(id, inbox)| {
                let (set, finished, done) = (set.clone(), finished.clone(), done.clone());
                let (completed, states) = (completed.clone(), states.clone());
                let progress = progress.clone();
                std::thread::spawn(move || {
                    strata_rt::block_on(async move {
                        install(Shard::new(id, 1));
                        strata_rt::spawn(crate::rounds());
                        strata_rt::spawn(inbox.run());
                        let workers = (0..WORKERS).map(|w| {
                            let (set, completed) = (set.clone(), completed.clone());
                            let progress = progress.clone();
                            let seed = 0x9E37_79B9_7F4A_7C15u64
                                .wrapping_mul((id * WORKERS + w + 1) as u64);
                            strata_rt::spawn(async move {
                                worker(set, seed, ITERATIONS, &completed, &progress).await
                            })
                        });
                        futures_util::future::join_all(workers).await;
                        finished.fetch_add(1, Ordering::SeqCst);
                        // Keep serving this shard's inbox until every thread is done and checked.
                        if id == 0 {
                            while finished.load(Ordering::SeqCst) < SHARDS {
                                strata_rt::sleep(Duration::from_millis(1)).await;
                            }
                            *states.lock().expect("states") = table_states(&set).await;
                            done.store(true, Ordering::SeqCst);
                        }
                        while !done.load(Ordering::SeqCst) {
                            strata_rt::sleep(Duration::from_millis(1)).await;
                        }
                    })
                    .expect("runtime");
                })
            })
            .collect();
        // Liveness: leaked locks or a deadlock show as iterations that stop advancing. The bound
        // is generous (no iteration takes anywhere near it) and only turns a hang into a failure.
        let (mut seen, mut still) = (usize::MAX, 0);
        while !done.load(Ordering::SeqCst) && threads.iter().all(|t| !t.is_finished()) {
            std::thread::sleep(Duration::from_millis(100));
            let now = progress.load(Ordering::Relaxed);
            still = if now == seen { still + 1 } else { 0 };
            seen = now;
            assert!(
                still < 600,
                "no progress for a minute: locks leaked or deadlocked"
            );
        }
        for t in threads {
            t.join().expect("shard thread panicked");
        }
        let states = states.lock().expect("states").clone();
        assert_eq!(states, vec![(true, 0, 0); SHARDS]);
        // Both paths were exercised: some acquisitions completed, some were dropped.
        let completed = completed.load(Ordering::Relaxed);
        assert!(completed > 0 && completed < SHARDS * WORKERS * ITERATIONS);
    }
}
