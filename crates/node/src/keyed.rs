//! The one coordinator behind every multi-key command.
//!
//! A keyed command (MGET, MSET, DEL, RENAME, COPY, LCS, and later SINTERSTORE, SMOVE, SORT … STORE)
//! is written once, as an async function over a [`KeysCtx`]. It reaches its keys only through
//! [`KeysCtx::on`] (run a closure on the shard owning one key) and [`KeysCtx::scatter`] (run a closure
//! on every shard with that shard's share of some items). Where the work happens is the context's
//! business, not the command's:
//!
//! * **Here**: every key lives on one shard and the command runs inside that shard's sub-batch, like
//!   any single-key command. `on` and `scatter` call their closure at once on the shard, no lock is
//!   taken (the shard is single-threaded, so the command is atomic), and the command's future
//!   completes on its first poll ([`run_here`]).
//! * **Across**: the keys live on several shards (or there are so many that the work must be cut in
//!   slices). The dispatcher first takes intent locks on every key — shard by shard, in ascending
//!   order — then runs the command on the connection's thread; `on` and `scatter` become messages
//!   to the owning shards, and the locks are released when the command returns. Strict two-phase
//!   locking makes the command atomic: no other client sees a state between two of its parts.
//!
//! Long commands: in Across mode `scatter` cuts its items into slices of [`SLICE`] and runs them one
//! after another, each a separate message, while the locks stay held. A shard therefore never spends
//! more than one slice on one command before serving its other clients, and the command stays atomic.

use std::cell::Cell;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::LocalBoxFuture;
use strata_resp::ReplyBuf;
use strata_shard::multi::Optimistic;
use strata_shard::notify::{self, Note};
use strata_shard::{LockSet, MultiLock, Shard};

use crate::args::Args;
use crate::error::CmdResult;

/// Items per message when a command's work is cut into slices (Across mode).
pub const SLICE: usize = 1024;

/// A keyed command: one async function, whatever shards its keys live on.
pub type KeysHandler = for<'a, 'b> fn(&'a mut KeysCtx<'b>) -> LocalBoxFuture<'a, CmdResult>;

enum Place<'a> {
    Here(&'a mut Shard),
    Across(&'a MultiLock),
    Tentative(Tentative<'a>),
}

/// A read-only command run optimistically across shards (see [`Optimistic`]): each shard's keys
/// (`plan`, taken out once attempted) are checked for other commands' locks, and their versions
/// recorded, in the message of the command's first read there ([`Optimistic::unlocked`]; locked
/// at once instead with a locking [`Optimistic`]). A shard that refuses sets `failed`, and the
/// command never resumes: the dispatcher drops it and runs it again the ordinary way.
struct Tentative<'a> {
    lock: &'a mut Optimistic,
    plan: Vec<(usize, Option<LockSet>)>,
    failed: &'a Cell<bool>,
}

impl Tentative<'_> {
    /// The locks still to take on `shard`, if not attempted yet.
    fn take(&mut self, shard: usize) -> Option<LockSet> {
        if self.lock.holds(shard) {
            return None;
        }
        match self.plan.iter_mut().find(|(s, _)| *s == shard) {
            Some((_, locks)) => locks.take(),
            // A shard the plan does not name (no key of the command lives there): nothing to lock.
            None => Some(LockSet::new()),
        }
    }
}

/// Never completes: a command abandoned by a refusing shard is dropped by the dispatcher.
async fn abandoned<R>(failed: &Cell<bool>) -> R {
    failed.set(true);
    std::future::pending().await
}

/// What a keyed command sees; see the module docs.
pub struct KeysCtx<'a> {
    /// Selected database index.
    pub db: usize,
    /// The whole command line; `args[0]` is the command name.
    pub args: &'a [Bytes],
    pub out: &'a mut ReplyBuf,
    /// Command time in unix ms.
    pub now: i64,
    /// Number of databases (the `databases` setting).
    pub databases: usize,
    /// Set by a blocking command that found nothing to serve, instead of a reply (see
    /// [`crate::ctx::Park`]).
    pub park: Option<crate::ctx::Park>,
    /// A parked blocking command running again after a write to one of its keys: like Redis, it
    /// serves only from keys of its type and skips (stays blocked on) the others, instead of
    /// failing with WRONGTYPE as its first attempt does.
    pub woken: bool,
    /// Run again after a first run was discarded (a read across shards whose key versions moved,
    /// or which a shard refused): the shards that first run read, on which this run's reads
    /// count no keyspace hits or misses and raise no key-miss events, as the first run's did
    /// there (see [`Shard::quietly`]). Empty for a first run.
    pub quiet: Vec<usize>,
    /// How its propagated form differs from its command line (see `strata_shard::propagate`):
    /// set through [`KeysCtx::propagate_as`] and [`KeysCtx::propagate_emit`].
    pub prop: strata_shard::propagate::Override,
    place: Place<'a>,
}

impl<'a> KeysCtx<'a> {
    /// A context for a command whose keys all live on `shard`, running inside its sub-batch.
    pub fn here(
        shard: &'a mut Shard,
        db: usize,
        args: &'a [Bytes],
        out: &'a mut ReplyBuf,
        now: i64,
    ) -> KeysCtx<'a> {
        let databases = shard.db_count();
        KeysCtx::placed(Place::Here(shard), db, args, out, now, databases)
    }

    /// A context for a command whose keys are locked by `lock` on several shards.
    pub fn across(
        lock: &'a MultiLock,
        db: usize,
        args: &'a [Bytes],
        out: &'a mut ReplyBuf,
        now: i64,
        databases: usize,
    ) -> KeysCtx<'a> {
        KeysCtx::placed(Place::Across(lock), db, args, out, now, databases)
    }

    fn placed(
        place: Place<'a>,
        db: usize,
        args: &'a [Bytes],
        out: &'a mut ReplyBuf,
        now: i64,
        databases: usize,
    ) -> KeysCtx<'a> {
        KeysCtx {
            db,
            args,
            out,
            now,
            databases,
            park: None,
            woken: false,
            quiet: Vec::new(),
            prop: Default::default(),
            place,
        }
    }

    /// A context for a read-only command whose keys, on several shards (`plan`: each shard's
    /// locks), are checked (or locked) optimistically by `lock` as it reads them. `failed` is set
    /// if a shard refuses; the command's future then never completes (see [`run_tentatively`]).
    #[allow(clippy::too_many_arguments)]
    pub fn tentative(
        lock: &'a mut Optimistic,
        plan: Vec<(usize, LockSet)>,
        failed: &'a Cell<bool>,
        db: usize,
        args: &'a [Bytes],
        out: &'a mut ReplyBuf,
        now: i64,
        databases: usize,
    ) -> KeysCtx<'a> {
        let plan = plan.into_iter().map(|(s, l)| (s, Some(l))).collect();
        let place = Place::Tentative(Tentative { lock, plan, failed });
        KeysCtx::placed(place, db, args, out, now, databases)
    }

    /// Propagates `argv` instead of the command line if the command changed the dataset (see
    /// `strata_shard::propagate`). Costs one load while nothing consumes the stream.
    pub fn propagate_as(&mut self, argv: impl FnOnce() -> Vec<Bytes>) {
        if strata_shard::propagate::on() {
            self.prop.rewrite(argv());
        }
    }

    /// Propagates `argv` (after what was emitted already) instead of the command line, whatever
    /// the command changed; with an empty list, propagates nothing for it.
    pub fn propagate_emit(&mut self, argv: impl FnOnce() -> Vec<Vec<Bytes>>) {
        if strata_shard::propagate::on() {
            self.prop.suppress();
            argv().into_iter().for_each(|a| self.prop.emit(a));
        }
    }

    /// A cursor over the arguments after the command name.
    pub fn args(&self) -> Args<'a> {
        Args::new(self.args, 1)
    }

    /// True when every key lives on the shard the command runs on (no message is sent).
    pub fn is_here(&self) -> bool {
        matches!(self.place, Place::Here(_))
    }

    /// Runs `f` on the shard that owns `key`.
    pub async fn on<R: Send + 'static>(
        &mut self,
        key: &[u8],
        f: impl FnOnce(&mut Shard) -> R + Send + 'static,
    ) -> R {
        match &mut self.place {
            Place::Here(shard) => f(shard),
            Place::Across(lock) => {
                let shard = lock.shard_set().shard_of_key(key);
                if self.quiet.contains(&shard) {
                    lock.run(shard, move |s| s.quietly(f)).await
                } else {
                    lock.run(shard, f).await
                }
            }
            Place::Tentative(t) => {
                let shard = t.lock.shard_set().shard_of_key(key);
                let Some(locks) = t.take(shard) else {
                    return t.lock.run(shard, f).await;
                };
                let r = t.lock.attempt(shard, locks, f).await;
                t.lock.settle();
                match r {
                    Some(r) => r,
                    None => abandoned(t.failed).await,
                }
            }
        }
    }

    /// Runs `op` on every shard owning some of `items`, each call with that shard's share (in the
    /// items' order). Returns, per call, the indices in `items` it got and its result. Here: one call
    /// with everything. Across: concurrent calls per shard, in slices of at most [`SLICE`] items.
    pub async fn scatter<I, T>(
        &mut self,
        items: &[I],
        key: fn(&I) -> &Bytes,
        op: impl Fn(&mut Shard, &[I]) -> T + Clone + Send + 'static,
    ) -> Vec<(Vec<usize>, T)>
    where
        I: Clone + Send + 'static,
        T: Send + 'static,
    {
        if let Place::Here(shard) = &mut self.place {
            return vec![((0..items.len()).collect(), op(shard, items))];
        }
        let gathered = self.gather(items, key, op).await;
        self.settle(items, key, gathered, usize::MAX).await
    }

    /// [`KeysCtx::scatter`] for a multi-key read that, as Redis's do, looks its keys up in argument
    /// order and stops at the first one of a wrong type (SINTER, SUNION, SDIFF, ZUNION, ZINTER,
    /// ZDIFF, PFCOUNT, PFMERGE, BITOP): `op` returns with its result what it [`Looked`] up of its
    /// share. Across shards the shares are looked up at once, so a share may look up keys that
    /// come after the first failing one; Redis never looks those up, so they count no keyspace hit
    /// or miss and their "keymiss" events are dropped. (Their access clocks are still touched, and
    /// an expired one is still removed, as the active expiry could have done at that moment.)
    pub async fn scatter_reads<I, T>(
        &mut self,
        items: &[I],
        key: fn(&I) -> &Bytes,
        op: impl Fn(&mut Shard, &[I]) -> (T, Looked) + Clone + Send + 'static,
    ) -> Vec<(Vec<usize>, T)>
    where
        I: Clone + Send + 'static,
        T: Send + 'static,
    {
        if let Place::Here(shard) = &mut self.place {
            // One shard looks its keys up in order and stops where Redis stops.
            return vec![((0..items.len()).collect(), op(shard, items).0)];
        }
        // Shards whose lookups counted in a discarded first run (they run quietly now).
        let quiet = self.quiet.clone();
        let gathered = self
            .gather(items, key, move |s: &mut Shard, part: &[I]| {
                let (r, looked) = s.uncounted(|s| op(s, part));
                (r, looked, s.id)
            })
            .await;
        // The first failing key in argument order; a refused attempt counts all it looked up, as
        // its rerun is quiet on the shards that read.
        let cut = if gathered.refused {
            usize::MAX
        } else {
            gathered
                .shares
                .iter()
                .filter(|(_, ((_, looked, _), _))| looked.failed)
                .filter_map(|(idx, ((_, looked, _), _))| {
                    idx.get(looked.found.len().checked_sub(1)?)
                })
                .copied()
                .min()
                .unwrap_or(usize::MAX)
        };
        let (mut hits, mut misses) = (0, 0);
        for (idx, ((_, looked, shard), _)) in &gathered.shares {
            if quiet.contains(shard) {
                continue;
            }
            for (&i, &found) in idx.iter().zip(&looked.found) {
                if i <= cut {
                    *(if found { &mut hits } else { &mut misses }) += 1;
                }
            }
        }
        if hits + misses > 0 {
            // Counted on this thread's shard: INFO sums every shard's counts.
            let db = self.db;
            strata_shard::with_shard(|s| s.db_mut(db).add_lookups(hits, misses));
        }
        self.settle(items, key, gathered, cut)
            .await
            .into_iter()
            .map(|(idx, (r, _, _))| (idx, r))
            .collect()
    }

    /// Runs `op` on every shard owning some of `items` (Across or Tentative), collecting each
    /// share's events to publish in the items' order.
    async fn gather<I, T>(
        &mut self,
        items: &[I],
        key: fn(&I) -> &Bytes,
        op: impl Fn(&mut Shard, &[I]) -> T + Clone + Send + 'static,
    ) -> Gathered<T>
    where
        I: Clone + Send + 'static,
        T: Send + 'static,
    {
        // Keyspace events in the order of the items, as Redis emits them one key after another:
        // each shard hands back the events of its share, and they are published from here,
        // merged, before the command's locks go (so no later event on these keys can come first).
        let ordered = notify::publishing();
        match &mut self.place {
            Place::Here(_) => unreachable!("Here runs its scatter in place"),
            Place::Across(lock) => {
                // (Empty but for a rerun: cloning it, per slice, allocates nothing.)
                let quiet = self.quiet.clone();
                let op = move |s: &mut Shard, items: &[I]| {
                    notify::collecting(ordered, || {
                        if quiet.contains(&s.id) {
                            s.quietly(|s| op(s, items))
                        } else {
                            op(s, items)
                        }
                    })
                };
                let mut shares = Vec::new();
                for (n, slice) in items.chunks(SLICE).enumerate() {
                    let base = n * SLICE;
                    for (idx, done) in lock.scatter(slice, key, op.clone()).await {
                        shares.push((idx.into_iter().map(|i| i + base).collect(), done));
                    }
                }
                Gathered {
                    shares,
                    refused: false,
                }
            }
            Place::Tentative(t) => {
                // Eligible commands have at most `SLICE` keys: one message per shard.
                let set = t.lock.shard_set().clone();
                let mut per: Vec<(usize, Vec<usize>, Vec<I>)> = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let shard = set.shard_of_key(key(item));
                    match per.iter_mut().find(|(s, _, _)| *s == shard) {
                        Some((_, idx, mine)) => {
                            idx.push(i);
                            mine.push(item.clone());
                        }
                        None => per.push((shard, vec![i], vec![item.clone()])),
                    }
                }
                // The shares run at once: their events (key misses) in the items' order, as
                // Across does, also when a shard refused (the shares that read counted them, and
                // a rerun is quiet there).
                let mut runs = Vec::with_capacity(per.len());
                for (shard, idx, mine) in per {
                    let op = op.clone();
                    let run = move |s: &mut Shard| notify::collecting(ordered, || op(s, &mine));
                    let fut: LocalBoxFuture<'static, Option<(T, Vec<Note>)>> = match t.take(shard) {
                        Some(locks) => Box::pin(t.lock.attempt(shard, locks, run)),
                        None => {
                            let set = set.clone();
                            Box::pin(async move { Some(set.call(shard, run).await) })
                        }
                    };
                    runs.push(async move { (idx, fut.await) });
                }
                let done = futures_util::future::join_all(runs).await;
                t.lock.settle();
                let mut shares: Vec<Share<T>> = Vec::with_capacity(done.len());
                let mut refused = false;
                for (idx, r) in done {
                    match r {
                        Some(r) => shares.push((idx, r)),
                        None => refused = true,
                    }
                }
                Gathered { shares, refused }
            }
        }
    }

    /// Publishes the shares' events in the items' order (but the "keymiss" events of items after
    /// `cut`, which Redis never looks up), then hands back their results, or abandons the command
    /// if a shard refused it.
    async fn settle<I, T>(
        &mut self,
        items: &[I],
        key: fn(&I) -> &Bytes,
        mut gathered: Gathered<T>,
        cut: usize,
    ) -> Vec<(Vec<usize>, T)> {
        let notes = in_item_order(items, key, &mut gathered.shares, cut);
        notify::publish(notes);
        if gathered.refused {
            if let Place::Tentative(t) = &mut self.place {
                return abandoned(t.failed).await;
            }
        }
        gathered
            .shares
            .into_iter()
            .map(|(idx, (r, _))| (idx, r))
            .collect()
    }
}

/// What one share of a multi-key read looked up (see [`KeysCtx::scatter_reads`]): whether each
/// key it looked up existed, in its share's order, and whether it stopped at a key of a wrong
/// type (then the last one looked up).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Looked {
    pub found: Vec<bool>,
    pub failed: bool,
}

impl Looked {
    /// Reads it off per-key results that stop at the first error ([`until_error`]): `Ok(None)` is
    /// a missing key.
    pub fn of<V, E>(results: &[Result<Option<V>, E>]) -> Looked {
        Looked {
            found: results.iter().map(|r| !matches!(r, Ok(None))).collect(),
            failed: results.last().is_some_and(Result::is_err),
        }
    }

    /// `results` with what they say was looked up: a share's answer to
    /// [`KeysCtx::scatter_reads`].
    pub fn with<V, E>(results: Vec<Result<Option<V>, E>>) -> (Vec<Result<Option<V>, E>>, Looked) {
        let looked = Looked::of(&results);
        (results, looked)
    }
}

/// `f` applied to each of `keys` in order, up to and including the first error: a multi-key
/// read stops at its first key of a wrong type, as Redis's do, and looks up none after it.
pub fn until_error<K, T, E>(
    keys: &[K],
    mut f: impl FnMut(&K) -> Result<T, E>,
) -> Vec<Result<T, E>> {
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        let r = f(k);
        let failed = r.is_err();
        out.push(r);
        if failed {
            break;
        }
    }
    out
}

/// What the shares of a scattered command brought back: per share, the indices of its items, its
/// result and its events; `refused` if a shard refused a tentative command (the shares that ran
/// are still there, their events to be published).
struct Gathered<T> {
    shares: Vec<Share<T>>,
    refused: bool,
}

/// One shard's share of a scattered command: the indices of its items, its result and the events
/// it emitted.
type Share<T> = (Vec<usize>, (T, Vec<Note>));

/// The events the shares of a scattered command emitted (`done`: per share, the indices of its
/// items and its events, which it emitted in its items' order), merged in the order of `items`:
/// each event goes with the first item at or after the last one matched in its share that has its
/// key (an item may emit several, its "keymiss" last), and events of equal position keep their
/// share's order. "keymiss" events of items after `cut` are left out (see [`KeysCtx::scatter_reads`]; a lone
/// share stops at its own first failing key, so it has none).
fn in_item_order<I, T>(
    items: &[I],
    key: fn(&I) -> &Bytes,
    done: &mut [Share<T>],
    cut: usize,
) -> Vec<Note> {
    if done.len() < 2 {
        return done
            .iter_mut()
            .flat_map(|(_, (_, notes))| std::mem::take(notes))
            .collect();
    }
    let mut placed: Vec<(usize, Note)> = Vec::new();
    for (idx, (_, notes)) in done.iter_mut() {
        let mut at = 0;
        for note in std::mem::take(notes) {
            let found = (at..idx.len()).find(|&j| key(&items[idx[j]])[..] == note.key[..]);
            // An event on no item of its share (none today) goes after them all. A "keymiss" is
            // the last event of its item's lookup (after an "expired"), so the next event on the
            // same key belongs to a later item (SUNION s x s).
            let pos = found.map_or(usize::MAX, |j| {
                at = if note.event == "keymiss" { j + 1 } else { j };
                idx[j]
            });
            if pos > cut && pos != usize::MAX && note.event == "keymiss" {
                continue;
            }
            placed.push((pos, note));
        }
    }
    placed.sort_by_key(|&(pos, _)| pos);
    placed.into_iter().map(|(_, note)| note).collect()
}

/// Runs a read-only keyed command with a [`KeysCtx::tentative`] context: its result, or None if
/// a shard refused its locks (then the command was dropped, and what it wrote to `cx.out` must be
/// discarded by the caller).
pub async fn run_tentatively(
    handler: KeysHandler,
    cx: &mut KeysCtx<'_>,
    failed: &Cell<bool>,
) -> Option<CmdResult> {
    let mut fut = handler(cx);
    std::future::poll_fn(|c| match fut.as_mut().poll(c) {
        Poll::Ready(r) => Poll::Ready(Some(r)),
        Poll::Pending if failed.get() => Poll::Ready(None),
        Poll::Pending => Poll::Pending,
    })
    .await
}

/// Runs a keyed command in Here mode to completion. Its future completes on the first poll, since
/// in Here mode `on` and `scatter` never wait; anything else would be a bug in the command.
pub fn run_here(handler: KeysHandler, cx: &mut KeysCtx<'_>) -> CmdResult {
    let mut fut = handler(cx);
    let mut poll_cx = Context::from_waker(futures_util::task::noop_waker_ref());
    match fut.as_mut().poll(&mut poll_cx) {
        Poll::Ready(r) => r,
        Poll::Pending => panic!("a keyed command waited on something other than its own shard"),
    }
}

/// Merges per-call, per-item results from [`KeysCtx::scatter`] back into item order.
pub fn in_order<T>(n: usize, parts: Vec<(Vec<usize>, Vec<T>)>) -> Vec<T> {
    let mut slots: Vec<Option<T>> = std::iter::repeat_with(|| None).take(n).collect();
    for (idx, values) in parts {
        for (i, v) in idx.into_iter().zip(values) {
            slots[i] = Some(v);
        }
    }
    slots.into_iter().flatten().collect()
}
