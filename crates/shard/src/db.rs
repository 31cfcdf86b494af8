//! One logical database (SELECT index) inside one shard, and the one write path into it.
//!
//! **One write path.** Every change to a key goes through a method of [`Db`] (`set`, `insert_entry`,
//! `remove`, `delete`, `set_expire`, `clear`, `swap_contents`, lazy and active expiry) or through the
//! [`EntryMut`] guard handed out by [`Db::modify`] for in-place changes. Reads get `&Entry` only.
//! Each change emits one [`KeyEvent`] (database, key, [`EventKind`]) into the database's hooks, which
//! today (1) count `dirty` changes, (2) wake the [`KeyWait`]ers of that key (blocked clients, commands
//! that park), and (3) append to an opt-in journal (tests now, AOF/replication later). WATCH,
//! keyspace notifications, client tracking and eviction accounting hook in the same place. When no
//! one waits and the journal is off, an event costs one counter increment and one `is_empty()` test.
//!
//! **Expiry** is lazy on access and active in the background. The active side keeps a min-heap of
//! (deadline, key) hints: every due key is found in O(log n) without scanning, and a cycle's work is
//! bounded by its budget. Hints are never removed when a key is deleted or its TTL changes; a hint is
//! live only while its key still has exactly that deadline. So that stale hints cannot accumulate
//! (repeated EXPIRE of one key, volatile keys overwritten), the heap is compacted *incrementally*:
//! once it holds more than `2 × volatile + 1024` hints, it becomes the `old` heap, and every later
//! push (and every background tick) moves a few of its hints into a fresh heap, dropping stale ones.
//! A write therefore touches at most `1 + 2 × COMPACT_STEP` hints; the compaction finishes long
//! before the fresh heap can reach the threshold again, so the hints stay O(volatile keys). Active
//! expiry pops from whichever heap has the earlier deadline.
//!
//! **Lazy free.** Nothing that may be large is freed inside a command: FLUSHDB/FLUSHALL swap the
//! table (and the hints) out in O(1), and a deleted, overwritten or expired value is queued too when
//! it owns more than [`LAZYFREE_THRESHOLD`] bytes or its *free effort* exceeds
//! [`LAZYFREE_EFFORT_THRESHOLD`] (Redis's LAZYFREE_THRESHOLD of 64 in lazyfree.c: the effort is 1 for
//! a string or a packed collection — listpack, intset: one allocation — and the element count for
//! the others; see [`free_effort`]). The shard's background tick frees the queue a bounded slice at a
//! time ([`Db::free_garbage`], counting each value's effort as work); [`Db::when_freed`] lets FLUSH
//! SYNC wait for it without blocking the thread.
//!
//! **Huge values go to the freer thread.** One value with millions of elements (a 10M-field hash)
//! cannot be dropped in a slice: `Object` exposes no way to drop part of itself, and the types'
//! representations are not this module's business. So when the tick reaches a value whose effort
//! exceeds [`BACKGROUND_FREE_EFFORT`], it hands the value to one process-wide thread (started on first
//! use, fed by a channel; values are `Send`) that drops it, as Redis's bio lazyfree thread does. The
//! allocator takes frees from any thread (memory accounting is per thread, summed). Until that thread
//! has dropped them, such values count in [`background_free_pending`], not in
//! [`Db::lazyfree_pending`]. Entries inside a flushed table are freed by the table's own slices.
//!
//! Invariant: everything removed from the table is either dropped at once (small), owned by the
//! queue, or owned by the freer thread until freed; nothing is leaked.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_channel::oneshot;
use hashbrown::HashMap;
use strata_core::{Dict, Drain, Entry, Object, Value, ValueRef};

use crate::notify;
use crate::park::Parked;
use crate::snapshot::DbSnap;
use crate::versions::Versions;
use crate::watch::{Watch, Watcher};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    now_us() / 1000
}

/// Microseconds since the Unix epoch (Redis's `ustime()`: also used to time commands). See
/// [`crate::clock`] for how it stays cheap.
#[inline]
pub fn now_us() -> i64 {
    crate::clock::now_us()
}

/// Redis's 24-bit LRU clock (seconds) for a time in ms.
pub fn lru_clock(now: i64) -> u32 {
    ((now / 1000) as u32) & 0x00FF_FFFF
}

/// Seconds since an access recorded at LRU clock `lru`, the clock being `clock_now` now (the
/// 24-bit clock wraps, as in Redis's estimateObjectIdleTime).
pub fn lru_idle(clock_now: u32, lru: u32) -> u32 {
    if clock_now >= lru {
        clock_now - lru
    } else {
        clock_now + (0x00FF_FFFF - lru)
    }
}

/// How entries' 24-bit access field is kept: Redis's LRU clock (seconds), or, under an LFU
/// `maxmemory-policy`, Redis's LFU pair: 16 bits of minutes (when last decremented) and an 8-bit
/// logarithmic access counter. Set by the server from `maxmemory-policy`, `lfu-log-factor` and
/// `lfu-decay-time`; entries keep their field when the mode changes, as in Redis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Access {
    #[default]
    Lru,
    Lfu {
        log_factor: u32,
        decay_time: u32,
    },
}

/// The counter a new key starts with under LFU (Redis's LFU_INIT_VAL), so it is not evicted at once.
pub const LFU_INIT_VAL: u32 = 5;

fn lfu_minutes(now: i64) -> u32 {
    ((now / 60_000) & 0xFFFF) as u32
}

/// The LFU counter of an access field after decay: one step per `decay_time` minutes since it was
/// last decremented (Redis's LFUDecrAndReturn).
pub fn lfu_decayed(field: u32, now: i64, decay_time: u32) -> u32 {
    let (ldt, counter) = (field >> 8, field & 0xFF);
    let now = lfu_minutes(now);
    let elapsed = if now >= ldt {
        now - ldt
    } else {
        65535 - ldt + now
    };
    let periods = elapsed.checked_div(decay_time).unwrap_or(0);
    counter.saturating_sub(periods)
}

impl Access {
    /// The field of a key created at `now`.
    pub fn fresh(self, now: i64) -> u32 {
        match self {
            Access::Lru => lru_clock(now),
            Access::Lfu { .. } => (lfu_minutes(now) << 8) | LFU_INIT_VAL,
        }
    }

    /// Records an access to `e` (Redis's updateLFU, or a new LRU clock). `rng` is the caller's
    /// xorshift state for the counter's probabilistic increment.
    fn touch(self, e: &mut Entry, now: i64, rng: &mut u64) {
        match self {
            Access::Lru => e.set_lru(lru_clock(now)),
            Access::Lfu {
                log_factor,
                decay_time,
            } => {
                let mut counter = lfu_decayed(e.lru(), now, decay_time);
                if counter < 255 {
                    if *rng == 0 {
                        *rng = 0x9E37_79B9_7F4A_7C15;
                    }
                    *rng ^= *rng << 13;
                    *rng ^= *rng >> 7;
                    *rng ^= *rng << 17;
                    let r = (*rng >> 11) as f64 / (1u64 << 53) as f64;
                    let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
                    if r < 1.0 / (base * log_factor as f64 + 1.0) {
                        counter += 1;
                    }
                }
                e.set_lru((lfu_minutes(now) << 8) | counter);
            }
        }
    }
}

// ===== Events =====

/// What happened to a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// Created, overwritten, or changed in place.
    Written,
    /// Removed by a command (DEL, GETDEL, the source of RENAME or MOVE...).
    Deleted,
    /// Removed because its TTL passed, lazily on access or by the active cycle.
    Expired,
    /// Removed by eviction under `maxmemory` (see [`crate::evict`]).
    Evicted,
    /// Its TTL was set, changed or removed; the value is unchanged.
    TtlChanged,
    /// The whole database was emptied (FLUSHDB, FLUSHALL); the event's key is empty.
    Flushed,
    /// The database's contents were exchanged with another's (SWAPDB); the event's key is empty.
    Swapped,
}

/// One modification: which database, which key (empty for database-wide kinds), what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    pub db: u32,
    pub key: Bytes,
    pub kind: EventKind,
}

/// The next event on one key ([`Db::wait_key`]). Resolves with its kind; a database-wide event
/// (flush, swap) wakes every waiter of the database. If the database itself is dropped (shutdown),
/// it resolves with `Flushed`. Dropping it withdraws the wait (the sender is pruned later).
pub struct KeyWait(oneshot::Receiver<EventKind>);

impl Future for KeyWait {
    type Output = EventKind;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<EventKind> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(EventKind::Flushed))
    }
}

/// Waiters are pruned of dropped [`KeyWait`]s at most this often (in keys), and then whenever the map
/// has doubled since the last sweep, so it stays within twice the keys that have live waiters.
const WAITERS_PRUNE_MIN: usize = 64;

/// Where a database's events go. Stays with the database *index* across SWAPDB (clients wait on
/// "key k in db n", whatever table currently backs n).
struct Hooks {
    index: u32,
    /// Modifications since start (INFO `rdb_changes_since_last_save` until persistence exists).
    dirty: u64,
    waiters: HashMap<Box<[u8]>, Vec<oneshot::Sender<EventKind>>>,
    /// Sweep dropped waiters when the map grows past this many keys.
    prune_at: usize,
    /// Opt-in event journal; `None` (no allocation) unless [`Db::record_events`] turned it on.
    journal: Option<Vec<KeyEvent>>,
    lazy: LazyFree,
    /// Commands parked on keys of this database (see [`crate::park`]), in arrival order.
    parked: HashMap<Box<[u8]>, ParkQueue>,
    /// Parked-on keys written since they were last served, in the order they became ready.
    ready: VecDeque<Box<[u8]>>,
    /// WATCHed keys and the watches on them (see [`crate::watch`]).
    watched: HashMap<Box<[u8]>, Vec<Watcher>>,
    /// The shard's key versions, bumped by every key event (see [`crate::versions`]); None with
    /// one shard, where nothing reads them.
    versions: Option<Arc<Versions>>,
}

thread_local! {
    /// Bumped each time a parked-on key of a database of this thread becomes ready, so the shard
    /// looks for ready keys only when there may be some (see [`crate::Shard::serve_ready`]).
    static READY: Cell<u64> = const { Cell::new(0) };
}

fn mark_ready() {
    READY.with(|r| r.set(r.get().wrapping_add(1)));
}

/// The count [`mark_ready`] bumps (only its changes mean anything).
pub(crate) fn ready_mark() -> u64 {
    READY.with(Cell::get)
}

/// The commands parked on one key.
#[derive(Default)]
struct ParkQueue {
    queue: VecDeque<Arc<Parked>>,
    /// Listed in `ready`.
    ready: bool,
}

impl Hooks {
    fn new(index: u32) -> Hooks {
        Hooks {
            index,
            dirty: 0,
            waiters: HashMap::new(),
            prune_at: WAITERS_PRUNE_MIN,
            journal: None,
            lazy: LazyFree::default(),
            parked: HashMap::new(),
            ready: VecDeque::new(),
            watched: HashMap::new(),
            versions: None,
        }
    }

    /// True when an event needs its key (someone waits, or the journal is on).
    #[inline]
    fn listening(&self) -> bool {
        !self.waiters.is_empty()
            || self.journal.is_some()
            || !self.parked.is_empty()
            || !self.watched.is_empty()
            || crate::tracking::remembering()
    }

    /// Emits `kind` for `key`: the whole cost when nobody listens is the counter and two tests.
    #[inline]
    fn emit(&mut self, kind: EventKind, key: &[u8]) {
        self.count(kind);
        self.emit_uncounted(kind, key);
    }

    /// Counts an event of `kind` as a change, unless the key expired or was evicted: nothing a
    /// command did, so no change in Redis's count.
    #[inline]
    fn count(&mut self, kind: EventKind) {
        if !matches!(kind, EventKind::Expired | EventKind::Evicted) {
            self.dirty += 1;
        }
    }

    /// [`emit`](Self::emit) without counting a change.
    #[inline]
    fn emit_uncounted(&mut self, kind: EventKind, key: &[u8]) {
        self.bump(key);
        if self.listening() {
            self.notify(kind, key);
        }
    }

    #[cold]
    fn notify(&mut self, kind: EventKind, key: &[u8]) {
        if let Some(list) = self.watched.get(key) {
            for w in list {
                if kind != EventKind::Expired || !w.stale {
                    w.watch.touch();
                }
            }
        }
        if kind == EventKind::Written {
            if let Some(q) = self.parked.get_mut(key).filter(|q| !q.ready) {
                q.ready = true;
                self.ready.push_back(key.into());
                mark_ready();
            }
        }
        if !self.waiters.is_empty() {
            if let Some(list) = self.waiters.remove(key) {
                for tx in list {
                    let _ = tx.send(kind);
                }
            }
        }
        if crate::tracking::remembering() {
            crate::tracking::key_modified(key);
        }
        if let Some(j) = &mut self.journal {
            j.push(KeyEvent {
                db: self.index,
                key: Bytes::copy_from_slice(key),
                kind,
            });
        }
    }

    /// Moves `key`'s version (see [`crate::versions`]).
    #[inline]
    fn bump(&self, key: &[u8]) {
        if let Some(v) = &self.versions {
            v.bump(self.index, key);
        }
    }

    /// A database-wide event: wakes every waiter; `changes` is added to `dirty`.
    fn emit_all(&mut self, kind: EventKind, changes: u64) {
        self.dirty += changes;
        if let Some(v) = &self.versions {
            v.bump_all();
        }
        if kind == EventKind::Swapped {
            // The database holds other values now: every parked-on key may have become servable.
            for (key, q) in self.parked.iter_mut().filter(|(_, q)| !q.ready) {
                q.ready = true;
                self.ready.push_back(key.clone());
                mark_ready();
            }
        }
        for (_, list) in self.waiters.drain() {
            for tx in list {
                let _ = tx.send(kind);
            }
        }
        self.prune_at = WAITERS_PRUNE_MIN;
        if let Some(j) = &mut self.journal {
            j.push(KeyEvent {
                db: self.index,
                key: Bytes::new(),
                kind,
            });
        }
    }

    fn wait(&mut self, key: &[u8]) -> KeyWait {
        let (tx, rx) = oneshot::channel();
        match self.waiters.get_mut(key) {
            Some(list) => {
                list.retain(|t| !t.is_canceled());
                list.push(tx);
            }
            None => {
                self.waiters.insert(key.into(), vec![tx]);
            }
        }
        if self.waiters.len() > self.prune_at {
            self.waiters.retain(|_, list| {
                list.retain(|t| !t.is_canceled());
                !list.is_empty()
            });
            self.prune_at = (2 * self.waiters.len()).max(WAITERS_PRUNE_MIN);
        }
        KeyWait(rx)
    }

    /// Drops a removed entry now, or queues it when freeing it could take long.
    #[inline]
    fn discard(&mut self, e: Entry) {
        if e.heap_size() > LAZYFREE_THRESHOLD || entry_effort(&e) > LAZYFREE_EFFORT_THRESHOLD {
            self.lazy.push(Garbage::Entry(e));
        }
    }
}

// ===== Lazy free =====

/// While clients are paused (CLIENT PAUSE), keys past their TTL are not removed, lazily or
/// actively: they read as absent but stay, so that a paused server's dataset does not change (as
/// Redis does, for a failover's sake). Unix ms the hold lasts until; 0: no hold.
static EXPIRY_HELD_UNTIL: AtomicI64 = AtomicI64::new(0);

/// Holds expiry until `until` (unix ms; 0 ends the hold).
pub fn hold_expiry(until: i64) {
    EXPIRY_HELD_UNTIL.store(until, Ordering::Relaxed);
}

/// True while expiry is held (see [`hold_expiry`]).
#[inline]
pub fn expiry_held(now: i64) -> bool {
    let until = EXPIRY_HELD_UNTIL.load(Ordering::Relaxed);
    until != 0 && now < until
}

/// Values larger than this (bytes on the heap) are freed by the background tick, not inline.
pub const LAZYFREE_THRESHOLD: usize = 64 * 1024;

/// Values whose [`free_effort`] exceeds this are freed by the background tick, not inline (Redis's
/// LAZYFREE_THRESHOLD).
pub const LAZYFREE_EFFORT_THRESHOLD: usize = 64;

/// Queued values whose [`free_effort`] exceeds this are dropped by the freer thread, not on the tick:
/// dropping this many elements takes well under a millisecond, so a tick stays short.
pub const BACKGROUND_FREE_EFFORT: usize = 8192;

/// What freeing `o` costs, in Redis's terms (lazyfreeGetFreeEffort): 1 for a string or a packed
/// encoding (listpack, intset: a single allocation), otherwise one per element. Redis counts a
/// quicklist's nodes rather than its elements; counting elements errs towards freeing lazily.
pub fn free_effort(o: &Object) -> usize {
    match o {
        Object::Str(_) => 1,
        _ => match o.encoding() {
            "listpack" | "intset" => 1,
            _ => o.elements().max(1),
        },
    }
}

fn entry_effort(e: &Entry) -> usize {
    match e.value() {
        ValueRef::Obj(o) => free_effort(o),
        _ => 1,
    }
}

/// The process's freer thread: drops the values handed to it, in order.
mod freer {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::{channel, Sender};
    use std::sync::OnceLock;

    use strata_core::Entry;

    pub(super) enum Job {
        Drop(Entry),
        /// Anything else too large to drop on a shard thread (a flushed tracking table).
        DropAny(Box<dyn Send>),
        /// Answered once every value sent before it has been dropped.
        Sync(Sender<()>),
    }

    /// Values handed over and not dropped yet.
    pub(super) static PENDING: AtomicUsize = AtomicUsize::new(0);
    /// Values the thread has dropped since start.
    pub(super) static FREED: AtomicUsize = AtomicUsize::new(0);
    /// `None` if the thread could not be started: values are then dropped by their sender.
    static FREER: OnceLock<Option<Sender<Job>>> = OnceLock::new();

    fn sender() -> Option<&'static Sender<Job>> {
        FREER
            .get_or_init(|| {
                let (tx, rx) = channel::<Job>();
                std::thread::Builder::new()
                    .name("lazyfree".into())
                    .spawn(move || {
                        for job in rx {
                            match job {
                                Job::Drop(e) => {
                                    drop(e);
                                    PENDING.fetch_sub(1, Ordering::Relaxed);
                                    FREED.fetch_add(1, Ordering::Relaxed);
                                }
                                Job::DropAny(v) => drop(v),
                                Job::Sync(done) => {
                                    let _ = done.send(());
                                }
                            }
                        }
                    })
                    .ok()
                    .map(|_| tx)
            })
            .as_ref()
    }

    /// Hands `e` to the freer thread (drops it here if there is none).
    pub(super) fn drop_later(e: Entry) {
        let Some(tx) = sender() else {
            return drop(e);
        };
        PENDING.fetch_add(1, Ordering::Relaxed);
        if let Err(std::sync::mpsc::SendError(Job::Drop(e))) = tx.send(Job::Drop(e)) {
            PENDING.fetch_sub(1, Ordering::Relaxed);
            drop(e);
        }
    }

    /// Hands `v` to the freer thread (drops it here if there is none).
    pub(super) fn drop_any_later(v: Box<dyn Send>) {
        match sender() {
            Some(tx) => {
                if let Err(std::sync::mpsc::SendError(job)) = tx.send(Job::DropAny(v)) {
                    drop(job);
                }
            }
            None => drop(v),
        }
    }

    /// Blocks until everything handed over before the call has been dropped.
    pub(super) fn sync() {
        let Some(tx) = sender() else { return };
        let (done, wait) = channel();
        if tx.send(Job::Sync(done)).is_ok() {
            let _ = wait.recv();
        }
    }
}

/// Drops `v` on the freer thread: for structures other than values that may be too large to free
/// inside a command.
pub fn drop_in_background<T: Send + 'static>(v: T) {
    freer::drop_any_later(Box::new(v));
}

/// Values handed to the freer thread and not dropped yet (part of INFO `lazyfree_pending_objects`).
pub fn background_free_pending() -> usize {
    freer::PENDING.load(std::sync::atomic::Ordering::Relaxed)
}

/// Values the freer thread has dropped since start.
pub fn background_freed() -> usize {
    freer::FREED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Blocks the calling thread until every value handed to the freer thread so far has been dropped
/// (tests, and shutdown paths that must account for all memory). Never call it on a shard thread
/// while serving: it waits for arbitrary amounts of freeing.
pub fn wait_background_frees() {
    freer::sync()
}

/// Most expiry hints one volatile sample walks when its random probes found no live one.
const SAMPLE_WALK_MAX: usize = 4096;

/// A flushed table with at most this many keys is freed inline (not worth a queue item).
const FLUSH_INLINE_MAX: usize = 64;

/// Something removed from the database and not yet freed.
enum Garbage {
    /// Held only to be dropped.
    Entry(#[allow(dead_code)] Entry),
    Table(Drain),
    /// A flushed database's expiry hints.
    Hints(Vec<Reverse<(i64, Box<[u8]>)>>),
}

/// A database's queue of garbage. Items are numbered from 1 in queue order: `queued` is the number of
/// the last one pushed, `freed` of the last one completely freed.
struct LazyFree {
    queue: VecDeque<Garbage>,
    /// Keys (entries) still owned by the queue (INFO `lazyfree_pending_objects`).
    pending: usize,
    queued: u64,
    freed: u64,
    waiters: Vec<(u64, oneshot::Sender<()>)>,
    /// Entries with a greater effort go to the freer thread ([`BACKGROUND_FREE_EFFORT`]; tests lower it).
    background_above: usize,
}

impl Default for LazyFree {
    fn default() -> LazyFree {
        LazyFree {
            queue: VecDeque::new(),
            pending: 0,
            queued: 0,
            freed: 0,
            waiters: Vec::new(),
            background_above: BACKGROUND_FREE_EFFORT,
        }
    }
}

/// Bytes of values queued for freeing on every shard, not freed yet (see [`lazyfree_pending_bytes`]).
static LAZY_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Bytes held by values already taken out of a database and queued for the background freeing
/// (eviction does not count them as used: they are on their way out). Tables of a flushed
/// database are not counted; nothing is left to evict in them.
pub fn lazyfree_pending_bytes() -> usize {
    LAZY_BYTES.load(Ordering::Relaxed)
}

impl LazyFree {
    fn push(&mut self, g: Garbage) -> u64 {
        if let Garbage::Entry(e) = &g {
            LAZY_BYTES.fetch_add(e.heap_size(), Ordering::Relaxed);
        }
        self.pending += match &g {
            Garbage::Entry(_) => 1,
            Garbage::Table(d) => d.len(),
            Garbage::Hints(_) => 0,
        };
        self.queue.push_back(g);
        self.queued += 1;
        self.queued
    }

    /// Frees up to about `budget` units of work (an entry's free effort, a bucket, an entry of a
    /// table or a hint each; an entry handed to the freer thread costs 1). One entry may overrun the
    /// budget by at most [`BACKGROUND_FREE_EFFORT`]. Returns the work done.
    fn free(&mut self, budget: usize) -> usize {
        let mut work = 0;
        while work < budget {
            let Some(front) = self.queue.front_mut() else {
                break;
            };
            let done = match front {
                Garbage::Entry(e) => {
                    let effort = entry_effort(e);
                    LAZY_BYTES.fetch_sub(e.heap_size(), Ordering::Relaxed);
                    if let Some(Garbage::Entry(e)) = self.queue.pop_front() {
                        if effort > self.background_above {
                            freer::drop_later(e);
                            work += 1;
                        } else {
                            drop(e);
                            work += effort;
                        }
                    }
                    self.pending -= 1;
                    self.freed += 1;
                    continue;
                }
                Garbage::Table(d) => {
                    let n = d.free(budget - work);
                    self.pending -= n;
                    // A table not finished used up the budget (buckets count too).
                    work = if d.is_empty() { work + n + 1 } else { budget };
                    d.is_empty()
                }
                Garbage::Hints(h) => {
                    let n = h.len().min(budget - work);
                    h.truncate(h.len() - n);
                    work += n + 1;
                    h.is_empty()
                }
            };
            if done {
                self.queue.pop_front();
                self.freed += 1;
            }
        }
        let mut i = 0;
        while i < self.waiters.len() {
            let (ticket, tx) = &self.waiters[i];
            if *ticket <= self.freed {
                let _ = self.waiters.swap_remove(i).1.send(());
            } else if tx.is_canceled() {
                self.waiters.swap_remove(i);
            } else {
                i += 1;
            }
        }
        work
    }
}

impl Drop for LazyFree {
    /// A database dropped with values still queued (tests, a shard that stops) frees them here:
    /// they no longer count as pending.
    fn drop(&mut self) {
        for g in &self.queue {
            if let Garbage::Entry(e) = g {
                LAZY_BYTES.fetch_sub(e.heap_size(), Ordering::Relaxed);
            }
        }
    }
}

/// Resolves once the garbage a flush queued has been freed ([`crate::Shard::flush`]).
pub struct FreeWait(Vec<oneshot::Receiver<()>>);

impl FreeWait {
    /// A wait that is already over.
    pub fn done() -> FreeWait {
        FreeWait(Vec::new())
    }

    /// Adds another wait to this one.
    pub fn join(&mut self, other: FreeWait) {
        self.0.extend(other.0);
    }
}

impl Future for FreeWait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Receivers resolve (as cancelled) when the queue drops their sender: freed, or shut down.
        self.0.retain_mut(|rx| Pin::new(rx).poll(cx).is_pending());
        if self.0.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

// ===== Expiry hints =====

/// Stale hints moved out of the `old` heap per push while a compaction is running.
pub const COMPACT_STEP: usize = 4;

type Hint = Reverse<(i64, Box<[u8]>)>;

/// The expiry hints: a heap, plus the previous heap while it is being compacted into the new one.
#[derive(Default)]
struct Deadlines {
    heap: BinaryHeap<Hint>,
    old: BinaryHeap<Hint>,
    /// Hints pushed or popped since creation (how tests bound the work of one write).
    touched: u64,
}

fn live(dict: &Dict, key: &[u8], at: i64) -> bool {
    dict.get(key).and_then(Entry::expire) == Some(at)
}

impl Deadlines {
    fn len(&self) -> usize {
        self.heap.len() + self.old.len()
    }

    /// Adds a hint, does one compaction step, and starts a compaction if stale hints dominate.
    fn push(&mut self, at: i64, key: Box<[u8]>, dict: &Dict, volatile: usize) {
        self.heap.push(Reverse((at, key)));
        self.touched += 1;
        self.maintain(dict, volatile);
    }

    /// After a hint was added, or a key with a TTL went other than through its hint (deleted,
    /// overwritten, evicted, PERSIST): one compaction step, and a compaction started if stale
    /// hints dominate, so that sampling volatile keys through the hints keeps finding live ones.
    fn maintain(&mut self, dict: &Dict, volatile: usize) {
        self.compact(dict, COMPACT_STEP);
        if self.old.is_empty() && self.heap.len() > 2 * volatile + 1024 {
            self.old = std::mem::take(&mut self.heap);
        }
    }

    /// Under memory pressure (the process is over `maxmemory`): starts a compaction as soon as the
    /// stale hints (of keys deleted, evicted or given another TTL) are more than a sixteenth of the
    /// live ones plus 16, rather than when they outnumber twice the live ones plus 1024, and moves
    /// up to `n` hints of it. Stale hints are memory no key accounts for: left in place, every
    /// eviction would leave the process that much over the limit and the next command would evict
    /// again (Redis deletes a key's expiry with the key). Each compaction frees at least a
    /// seventeenth of what it moves, so its cost stays proportional to what it frees. True while a
    /// compaction is unfinished.
    fn reclaim(&mut self, dict: &Dict, volatile: usize, n: usize) -> bool {
        if self.old.is_empty() && self.heap.len() > volatile + volatile / 16 + 16 {
            self.old = std::mem::take(&mut self.heap);
        }
        self.compact(dict, n)
    }

    /// Moves up to `n` hints from the old heap, keeping the live ones. True while some remain.
    fn compact(&mut self, dict: &Dict, n: usize) -> bool {
        for _ in 0..n {
            let Some(Reverse((at, key))) = self.old.pop() else {
                break;
            };
            self.touched += 1;
            if live(dict, &key, at) {
                self.heap.push(Reverse((at, key)));
                self.touched += 1;
            }
        }
        if self.old.is_empty() && self.old.capacity() > 0 {
            self.old = BinaryHeap::new();
        }
        !self.old.is_empty()
    }

    /// The earliest hint if it is due at `now`.
    fn pop_due(&mut self, now: i64) -> Option<(i64, Box<[u8]>)> {
        let first = |h: &BinaryHeap<Hint>| h.peek().map(|Reverse((at, _))| *at);
        let h = match (first(&self.heap), first(&self.old)) {
            (Some(a), Some(b)) if b < a => &mut self.old,
            (None, Some(_)) => &mut self.old,
            _ => &mut self.heap,
        };
        if first(h)? > now {
            return None;
        }
        self.touched += 1;
        h.pop().map(|Reverse(hint)| hint)
    }

    /// Takes every hint out (flush), leaving no allocation behind.
    fn take(&mut self) -> Vec<Hint> {
        let mut all = std::mem::take(&mut self.heap).into_vec();
        let old = std::mem::take(&mut self.old).into_vec();
        if all.is_empty() {
            all = old;
        } else if !old.is_empty() {
            all.extend(old);
        }
        all
    }

    fn capacity_bytes(&self) -> usize {
        (self.heap.capacity() + self.old.capacity()) * std::mem::size_of::<Hint>()
    }
}

// ===== The database =====

/// Keyspace statistics of one database (INFO stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbStats {
    /// Keys removed because their TTL passed (`expired_keys`).
    pub expired_keys: u64,
    /// Keys removed by eviction under `maxmemory` (`evicted_keys`).
    pub evicted_keys: u64,
    /// Read lookups that found / did not find the key (`keyspace_hits/misses`).
    pub hits: u64,
    pub misses: u64,
}

/// A database: its entries, the expiry hints, and the hooks its modifications go through.
pub struct Db {
    dict: Dict,
    ttl: Deadlines,
    volatile: usize,
    stats: DbStats,
    access: Access,
    /// Whether small integers written now are Redis's shared objects (see [`Db::set_share_ints`]).
    share_ints: bool,
    rng: u64,
    hooks: Hooks,
    /// The running snapshot's state for this database (see [`crate::snapshot`]); None (the
    /// write path's one test) while none runs.
    snap: Option<Box<DbSnap>>,
    /// The snapshot parity: an entry whose mark equals it is saved (or new since the start).
    snap_parity: bool,
}

impl Default for Db {
    fn default() -> Self {
        Db::new(0)
    }
}

/// A key being modified in place ([`Db::modify`]). Reading goes through `Deref<Target = Entry>`;
/// each mutator records that something changed, and dropping the guard then emits one `Written`
/// event for the key (none if nothing changed).
pub struct EntryMut<'a> {
    entry: &'a mut Entry,
    hooks: &'a mut Hooks,
    /// The database's [`Db::set_share_ints`], for integers stored through the guard.
    share_ints: bool,
    changed: bool,
    /// Signalled as modified without counting a change (see [`EntryMut::mark_touched`]).
    touched: bool,
}

impl Deref for EntryMut<'_> {
    type Target = Entry;

    fn deref(&self) -> &Entry {
        self.entry
    }
}

impl EntryMut<'_> {
    /// The heap object, mutably, if the value is one. Counts as a change.
    pub fn object_mut(&mut self) -> Option<&mut Object> {
        let o = self.entry.object_mut();
        self.changed |= o.is_some();
        o
    }

    /// Overwrites an int-encoded value in place; false (changing nothing) for other encodings.
    pub fn set_int(&mut self, i: i64) -> bool {
        let done = self.entry.set_int(i);
        if done {
            // Redis's INCR points the key at a shared integer when it may, else keeps its own.
            self.entry.set_unshared(!self.share_ints);
        }
        self.changed |= done;
        done
    }

    /// Stores the same logical value in another encoding (a string made "raw" so it can be changed
    /// in place, as Redis's dbUnshareStringValue does). Not a change: no event is emitted for it.
    pub fn reencode(&mut self, value: Value) {
        let old = self.entry.replace_value(value);
        self.hooks.discard(old);
    }

    /// Marks the entry as changed (after an in-place change through a reencoded object that the
    /// caller made with [`EntryMut::object_mut_quiet`]).
    pub fn mark_changed(&mut self) {
        self.changed = true;
    }

    /// Signals the key as modified (WATCH, tracking, waiters) without counting a change in `dirty`:
    /// LTRIM that removes nothing, which Redis announces and signals but counts as no change.
    pub fn mark_touched(&mut self) {
        self.touched = true;
    }

    /// The heap object, mutably, without counting as a change: for code that may find nothing to
    /// change and then calls [`EntryMut::mark_changed`] only if it did.
    pub fn object_mut_quiet(&mut self) -> Option<&mut Object> {
        self.entry.object_mut()
    }

    /// Replaces the value, keeping the key's TTL and access clock.
    pub fn set_value(&mut self, value: Value) {
        let old = self.entry.replace_value(value);
        // A new value starts unmarked: shared, if it is a small integer.
        if !self.share_ints {
            self.entry.set_unshared(true);
        }
        self.hooks.discard(old);
        self.changed = true;
    }
}

impl Drop for EntryMut<'_> {
    fn drop(&mut self) {
        if self.changed {
            self.hooks.emit(EventKind::Written, self.entry.key());
        } else if self.touched {
            self.hooks
                .emit_uncounted(EventKind::Written, self.entry.key());
        }
    }
}

impl Db {
    /// An empty database with SELECT index `index` (the `db` of its events).
    pub fn new(index: u32) -> Db {
        Db {
            dict: Dict::new(),
            ttl: Deadlines::default(),
            volatile: 0,
            stats: DbStats::default(),
            access: Access::default(),
            share_ints: true,
            rng: 0,
            hooks: Hooks::new(index),
            snap: None,
            snap_parity: false,
        }
    }

    /// Has every key event of this database move the shard's key versions (see
    /// [`crate::versions`]).
    pub(crate) fn attach_versions(&mut self, versions: Arc<Versions>) {
        self.hooks.versions = Some(versions);
    }

    /// The shard's key versions this database moves, if attached.
    pub(crate) fn versions(&self) -> Option<&Versions> {
        self.hooks.versions.as_deref()
    }

    /// The SELECT index of this database.
    pub fn index(&self) -> u32 {
        self.hooks.index
    }

    /// Redis's notifyKeyspaceEvent for `key` of this database (see [`crate::notify`]): one load
    /// and a branch unless `class` is enabled.
    #[inline]
    pub fn notify(&self, class: u32, event: &'static str, key: &[u8]) {
        notify::emit(class, event, key, self.hooks.index);
    }

    /// Number of keys (including expired keys not yet reclaimed, as in Redis).
    pub fn len(&self) -> usize {
        self.dict.len()
    }

    /// True when the database has no keys.
    pub fn is_empty(&self) -> bool {
        self.dict.is_empty()
    }

    /// Number of keys with a TTL.
    pub fn volatile_len(&self) -> usize {
        self.volatile
    }

    /// Modifications so far (every event counts one; a flush counts the keys it removed).
    pub fn dirty(&self) -> u64 {
        self.hooks.dirty
    }

    /// Counts one modification that changed no key (SWAPDB of a database with itself, which
    /// Redis counts as a change).
    pub fn count_change(&mut self) {
        self.hooks.dirty += 1;
    }

    /// Makes the changes counted since `mark` (a [`Db::dirty`] read before the command wrote)
    /// exactly `n`. Every event counts one change, and most commands raise as many events as Redis
    /// counts changes; those that differ say what Redis counts: per element for SADD, LPUSH, HSET,
    /// ZADD and their kin (three members added, three changes), once for a move whose two keys
    /// both raise events (RENAME, MOVE, LMOVE). What the count feeds is `save` points and INFO's
    /// `rdb_changes_since_last_save`.
    pub fn count_changes_since(&mut self, mark: u64, n: u64) {
        self.hooks.dirty = mark + n;
    }

    /// Keyspace statistics.
    pub fn stats(&self) -> DbStats {
        self.stats
    }

    /// Zeroes the statistics (CONFIG RESETSTAT).
    pub fn reset_stats(&mut self) {
        self.stats = DbStats::default();
    }

    /// How accesses are recorded in each entry.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Sets how accesses are recorded (from `maxmemory-policy` and the LFU settings).
    pub fn set_access(&mut self, access: Access) {
        self.access = access;
    }

    /// Whether integers written from now on count as Redis's shared objects (OBJECT REFCOUNT
    /// 2147483647 for 0..9999): Redis shares them unless `maxmemory` is set with an LRU or LFU
    /// policy, which needs a clock per value. Values already stored keep what they were written
    /// as, as Redis's objects do.
    pub fn set_share_ints(&mut self, share: bool) {
        self.share_ints = share;
    }

    /// Whether integers written now are Redis's shared objects (see [`Db::set_share_ints`]).
    pub fn share_ints(&self) -> bool {
        self.share_ints
    }

    /// Approximate heap bytes of this database's table and hints (not counting entries).
    pub fn overhead_bytes(&self) -> usize {
        self.dict.table_size() + self.ttl.capacity_bytes()
    }

    /// Bytes of the bucket arrays: changes whenever a resize starts or ends (KEYS uses it to know
    /// that a cursor walk may have returned a key twice).
    pub fn table_bytes(&self) -> usize {
        self.dict.table_size()
    }

    /// The shape of the key table (DEBUG HTSTATS): table 0, and the resize target while resizing.
    pub fn table_stats(&self) -> Vec<strata_core::TableStats> {
        self.dict.table_stats()
    }

    /// Expiry hints held for active expiry, stale ones included (DEBUG HTSTATS).
    pub fn expiry_hints(&self) -> usize {
        self.ttl.len()
    }

    fn expired(e: &Entry, now: i64) -> bool {
        e.expire().is_some_and(|at| at <= now)
    }

    /// Takes `key`'s entry out of the table, keeping the TTL count right. No event.
    fn unlink(&mut self, key: &[u8]) -> Option<Entry> {
        let e = self.dict.remove(key)?;
        if let Some(s) = &mut self.snap {
            s.save(self.snap_parity, &e);
        }
        if e.expire().is_some() {
            self.lost_ttl();
        }
        Some(e)
    }

    /// A key lost its TTL other than through its hint (deleted, overwritten, evicted, PERSIST):
    /// one fewer volatile key, and one compaction step (a compaction started if stale hints now
    /// dominate), so stale hints stay O(volatile keys) and sampling them stays cheap.
    fn lost_ttl(&mut self) {
        self.volatile -= 1;
        self.ttl.maintain(&self.dict, self.volatile);
    }

    /// Removes `key` if its TTL has passed (an `Expired` event). Returns true if it was due: the
    /// caller treats it as absent, even while [`hold_expiry`] keeps it in the table.
    fn expire_if_needed(&mut self, key: &[u8], now: i64) -> bool {
        // No key has a TTL (the usual case): skip the lookup.
        if self.volatile == 0 || !self.dict.get(key).is_some_and(|e| Self::expired(e, now)) {
            return false;
        }
        if expiry_held(now) {
            return true;
        }
        if let Some(e) = self.unlink(key) {
            self.stats.expired_keys += 1;
            self.hooks.emit(EventKind::Expired, key);
            notify::emit(notify::EXPIRED, "expired", key, self.hooks.index);
            self.hooks.discard(e);
        }
        true
    }

    /// First prefetch stage for a lookup of `key` (see [`strata_core::Dict::prefetch_bucket`]).
    pub fn prefetch_bucket(&self, key: &[u8]) {
        self.dict.prefetch_bucket(key);
    }

    /// Second prefetch stage for a lookup of `key`.
    pub fn prefetch_entry(&self, key: &[u8]) {
        self.dict.prefetch_entry(key);
    }

    /// Keyspace hits and misses counted so far (see [`Db::set_lookups`]).
    pub(crate) fn lookups(&self) -> (u64, u64) {
        (self.stats.hits, self.stats.misses)
    }

    /// Counts `hits` keyspace hits and `misses` misses made elsewhere: the lookups of a multi-key
    /// read's shares, counted by the command once it knows which of them Redis would have made
    /// (see [`crate::Shard::uncounted`]).
    pub fn add_lookups(&mut self, hits: u64, misses: u64) {
        self.stats.hits += hits;
        self.stats.misses += misses;
    }

    /// Puts the hit and miss counts back to what [`Db::lookups`] said: a read that is run again
    /// after its first run was discarded counts once (see [`crate::Shard::quietly`]).
    pub(crate) fn set_lookups(&mut self, (hits, misses): (u64, u64)) {
        self.stats.hits = hits;
        self.stats.misses = misses;
    }

    /// Looks a key up for reading: expires it if due, touches its LRU clock, counts a hit or miss.
    pub fn get(&mut self, key: &[u8], now: i64) -> Option<&Entry> {
        let due = self.expire_if_needed(key, now);
        match self.dict.get_mut(key).filter(|_| !due) {
            Some(e) => {
                self.stats.hits += 1;
                self.access.touch(e, now, &mut self.rng);
                Some(e)
            }
            None => {
                self.stats.misses += 1;
                // Redis raises "keymiss" where it counts a keyspace miss.
                notify::emit(notify::KEY_MISS, "keymiss", key, self.hooks.index);
                None
            }
        }
    }

    /// Looks a key up for reading without recording the access (EXISTS, TYPE, TTL): expires it if
    /// due, counts a hit or miss and raises "keymiss" on a miss, as Redis's LOOKUP_NOTOUCH does.
    pub fn get_untouched(&mut self, key: &[u8], now: i64) -> Option<&Entry> {
        self.get_untouched_as(key, now, true)
    }

    /// [`get_untouched`](Self::get_untouched) without the "keymiss" event (Redis's
    /// LOOKUP_NOTOUCH|LOOKUP_NONOTIFY: OBJECT).
    pub fn get_unnotified(&mut self, key: &[u8], now: i64) -> Option<&Entry> {
        self.get_untouched_as(key, now, false)
    }

    fn get_untouched_as(&mut self, key: &[u8], now: i64, notify_miss: bool) -> Option<&Entry> {
        let due = self.expire_if_needed(key, now);
        match self.dict.get(key).filter(|_| !due) {
            Some(e) => {
                self.stats.hits += 1;
                Some(e)
            }
            None => {
                self.stats.misses += 1;
                if notify_miss {
                    notify::emit(notify::KEY_MISS, "keymiss", key, self.hooks.index);
                }
                None
            }
        }
    }

    /// Looks a key up without touching anything but expiry (OBJECT, TYPE-like introspection).
    pub fn peek(&mut self, key: &[u8], now: i64) -> Option<&Entry> {
        let due = self.expire_if_needed(key, now);
        self.dict.get(key).filter(|_| !due)
    }

    /// True if the key exists (and is not expired).
    pub fn contains(&mut self, key: &[u8], now: i64) -> bool {
        self.peek(key, now).is_some()
    }

    /// Looks a key up for an in-place change: expires it if due and touches its clock (no hit/miss
    /// accounting, as Redis's lookupKeyWrite). The guard emits `Written` if it changes anything.
    pub fn modify(&mut self, key: &[u8], now: i64) -> Option<EntryMut<'_>> {
        if self.expire_if_needed(key, now) {
            return None;
        }
        let entry = self.dict.get_mut(key)?;
        if let Some(s) = &mut self.snap {
            s.save(self.snap_parity, entry);
            entry.set_snap_mark(self.snap_parity);
        }
        self.access.touch(entry, now, &mut self.rng);
        Some(EntryMut {
            entry,
            hooks: &mut self.hooks,
            share_ints: self.share_ints,
            changed: false,
            touched: false,
        })
    }

    /// Stores `value` under `key` with `expire`, replacing any previous entry (one table lookup).
    /// Returns true if a live key was replaced.
    pub fn set(&mut self, key: &[u8], value: Value, expire: Option<i64>, now: i64) -> bool {
        let mut entry = Entry::new(key, value, expire, self.access.fresh(now));
        // A new entry starts unmarked (shared, if a small integer): only the rarer case stores.
        if !self.share_ints {
            entry.set_unshared(true);
        }
        self.insert_entry(entry, now)
    }

    /// [`Db::set`] for a duplicated value (COPY): Redis's copy of an integer is an object of its
    /// own, never one of the shared integers.
    pub fn set_copy(&mut self, key: &[u8], value: Value, expire: Option<i64>, now: i64) -> bool {
        let mut entry = Entry::new(key, value, expire, self.access.fresh(now));
        entry.set_unshared(true);
        self.insert_entry(entry, now)
    }

    /// Stores `value` keeping the key's current TTL (SET KEEPTTL). Returns true if the key existed.
    pub fn set_keep_ttl(&mut self, key: &[u8], value: Value, now: i64) -> bool {
        let mut value = Some(value);
        let existed = match self.modify(key, now) {
            Some(mut e) => {
                e.set_value(value.take().expect("value not yet used"));
                true
            }
            None => false,
        };
        if let Some(value) = value {
            self.set(key, value, None, now);
        }
        existed
    }

    /// Inserts a prepared entry (SET, RENAME/MOVE/COPY destinations), replacing any previous one.
    /// Returns true if a live key was replaced (a replaced expired key counts as expired).
    pub fn insert_entry(&mut self, mut entry: Entry, now: i64) -> bool {
        // A key written now is not part of a running snapshot, nor of one started later until
        // that one flips the parity.
        entry.set_snap_mark(self.snap_parity);
        // Its events carry the key only if someone listens; its version moves either way.
        if let Some(v) = &self.hooks.versions {
            v.bump(self.hooks.index, entry.key());
        }
        let key = self
            .hooks
            .listening()
            .then(|| Bytes::copy_from_slice(entry.key()));
        let deadline = entry
            .expire()
            .map(|at| (at, Box::<[u8]>::from(entry.key())));
        let index = self.hooks.index;
        if notify::enabled(notify::EXPIRED | notify::NEW) {
            // Redis's lookupKeyWrite expires a due key first, then dbAdd announces the new one.
            let old_dead = self.dict.get(entry.key()).map(|e| Self::expired(e, now));
            if old_dead == Some(true) {
                notify::emit(notify::EXPIRED, "expired", entry.key(), index);
            }
            if old_dead != Some(false) {
                notify::emit(notify::NEW, "new", entry.key(), index);
            }
        }
        let old = self.dict.insert_bounded(entry, crate::evict::room_for);
        // The hint goes in after the entry, so a compaction step it triggers sees the key live.
        if let Some((at, hint)) = deadline {
            self.volatile += 1;
            self.ttl.push(at, hint, &self.dict, self.volatile);
        }
        let mut replaced = false;
        if let Some(old) = old {
            if let Some(s) = &mut self.snap {
                s.save(self.snap_parity, &old);
            }
            if old.expire().is_some() {
                self.lost_ttl();
            }
            if Self::expired(&old, now) {
                self.stats.expired_keys += 1;
                self.emit_opt(EventKind::Expired, key.as_deref());
            } else {
                replaced = true;
            }
            self.hooks.discard(old);
        }
        self.emit_opt(EventKind::Written, key.as_deref());
        replaced
    }

    /// Emits an event whose key was copied only if someone listens.
    #[inline]
    fn emit_opt(&mut self, kind: EventKind, key: Option<&[u8]>) {
        match key {
            Some(k) => self.hooks.emit(kind, k),
            None => self.hooks.count(kind),
        }
    }

    /// Removes a key and hands its entry to the caller (GETDEL's value, RENAME/MOVE's source);
    /// None if it did not exist or had expired. Use [`Db::delete`] when the value is not needed.
    pub fn remove(&mut self, key: &[u8], now: i64) -> Option<Entry> {
        if self.expire_if_needed(key, now) {
            return None;
        }
        let e = self.unlink(key)?;
        self.hooks.emit(EventKind::Deleted, key);
        Some(e)
    }

    /// Deletes a key (DEL, UNLINK); a large value is freed by the background tick. Returns whether
    /// a live key was deleted.
    pub fn delete(&mut self, key: &[u8], now: i64) -> bool {
        match self.remove(key, now) {
            Some(e) => {
                self.hooks.discard(e);
                true
            }
            None => false,
        }
    }

    /// Sets or clears the key's absolute expiry. Returns false if the key does not exist.
    pub fn set_expire(&mut self, key: &[u8], expire: Option<i64>, now: i64) -> bool {
        if self.expire_if_needed(key, now) {
            return false;
        }
        let Some(had) = self.dict.get(key).map(|e| e.expire().is_some()) else {
            return false;
        };
        if let Some(s) = &mut self.snap {
            if let Some(e) = self.dict.get_mut(key) {
                s.save(self.snap_parity, e);
                e.set_snap_mark(self.snap_parity);
            }
        }
        self.dict.replace(key, |e| e.with_expire(expire));
        match (had, expire) {
            (false, Some(_)) => self.volatile += 1,
            (true, None) => self.lost_ttl(),
            _ => {}
        }
        if let Some(at) = expire {
            self.ttl.push(at, key.into(), &self.dict, self.volatile);
        }
        self.hooks.emit(EventKind::TtlChanged, key);
        true
    }

    /// Reclaims up to `budget` due hints' keys. Returns (hints examined, keys expired).
    pub fn active_expire(&mut self, now: i64, budget: usize) -> (usize, usize) {
        let (mut seen, mut expired) = (0, 0);
        while seen < budget {
            let Some((at, key)) = self.ttl.pop_due(now) else {
                break;
            };
            seen += 1;
            if !live(&self.dict, &key, at) {
                continue;
            }
            if let Some(e) = self.unlink(&key) {
                self.stats.expired_keys += 1;
                self.hooks.emit(EventKind::Expired, &key);
                notify::emit(notify::EXPIRED, "expired", &key, self.hooks.index);
                self.hooks.discard(e);
                expired += 1;
            }
        }
        (seen, expired)
    }

    /// Samples up to `n` keys for eviction (the candidates of one round of Redis's
    /// evictionPoolPopulate): random keys of the whole table, or, with `volatile`, random keys with
    /// a TTL, found through the expiry hints (stale hints are skipped, a bounded number of times).
    /// Calls `f` with each sampled entry. A key may be sampled twice, as with Redis's sampling.
    pub fn sample(
        &self,
        volatile: bool,
        n: usize,
        mut rand: impl FnMut() -> u64,
        mut f: impl FnMut(&Entry),
    ) {
        if !volatile {
            for _ in 0..n {
                match self.dict.random(&mut rand) {
                    Some(e) => f(e),
                    None => return,
                }
            }
            return;
        }
        if self.volatile == 0 {
            return;
        }
        let (heap, old) = (self.ttl.heap.as_slice(), self.ttl.old.as_slice());
        let hints = heap.len() + old.len();
        let hint = |i: usize| {
            let Reverse((at, key)) = if i < heap.len() {
                &heap[i]
            } else {
                &old[i - heap.len()]
            };
            self.dict.get(key).filter(|e| e.expire() == Some(*at))
        };
        let mut found = 0;
        // Outside a compaction, hints are at most 2x the volatile keys plus a constant, so a few
        // tries per sample find live ones; the bound keeps stale hints from costing more.
        for _ in 0..n * 4 {
            if found == n || hints == 0 {
                break;
            }
            if let Some(e) = hint((rand() % hints as u64) as usize) {
                found += 1;
                f(e);
            }
        }
        if found == 0 && hints > 0 {
            // Few live hints among many stale ones: the first live one from a random start,
            // within a bounded walk (a compaction in progress may still hold many stale hints;
            // finding none is a miss for the caller, and the compaction goes on meanwhile).
            let start = (rand() % hints as u64) as usize;
            let walk = hints.min(SAMPLE_WALK_MAX);
            if let Some(e) = (0..walk).find_map(|i| hint((start + i) % hints)) {
                f(e);
            }
        }
    }

    /// Evicts `key` under `maxmemory` (Redis's eviction in performEvictions): an `Evicted` event
    /// (WATCH, client tracking, waiters), the `evicted` keyspace notification, `evicted_keys`,
    /// and the value freed here or queued for the background tick when large. Returns the bytes
    /// the entry held, or None if the key is gone.
    pub fn evict(&mut self, key: &[u8]) -> Option<usize> {
        let e = self.unlink(key)?;
        let size = e.heap_size();
        self.stats.evicted_keys += 1;
        self.hooks.emit(EventKind::Evicted, key);
        notify::emit(notify::EVICTED, "evicted", key, self.hooks.index);
        self.hooks.discard(e);
        Some(size)
    }

    /// The entry under `key` as it is, expired or not, without any side effect (eviction's look
    /// at a pool candidate).
    pub fn entry_raw(&self, key: &[u8]) -> Option<&Entry> {
        self.dict.get(key)
    }

    /// Moves up to `n` hints of a running heap compaction (background work, so it also finishes
    /// without writes). Returns true while the compaction is unfinished.
    pub fn compact_hints(&mut self, n: usize) -> bool {
        self.ttl.compact(&self.dict, n)
    }

    /// Frees stale expiry hints for a process over `maxmemory` (see `Deadlines::reclaim`), moving
    /// up to `n` hints. Returns the work done: each hint taken out of the old heap counts once,
    /// and once more if kept.
    pub fn reclaim_hints(&mut self, n: usize) -> usize {
        let before = self.ttl.touched;
        self.ttl.reclaim(&self.dict, self.volatile, n);
        (self.ttl.touched - before) as usize
    }

    /// Number of expiry hints held (live and stale).
    pub fn hints_len(&self) -> usize {
        self.ttl.len()
    }

    /// One SCAN step over this database's table (see [`Dict::scan`]); expired keys are skipped.
    pub fn scan(&self, cursor: u64, now: i64, mut f: impl FnMut(&Entry)) -> u64 {
        self.dict.scan(cursor, |e| {
            if !Self::expired(e, now) {
                f(e)
            }
        })
    }

    /// One SCAN step over this database's table that also passes the expired entries, flagged
    /// (`f(entry, expired)`), for a caller that reclaims them as Redis's SCAN does.
    pub fn scan_with_expired(&self, cursor: u64, now: i64, mut f: impl FnMut(&Entry, bool)) -> u64 {
        self.dict.scan(cursor, |e| f(e, Self::expired(e, now)))
    }

    /// Deletes `key` if its time has passed, with its `expired` event (lazy expiry, as a read
    /// does); true if it had expired.
    pub fn reclaim_if_expired(&mut self, key: &[u8], now: i64) -> bool {
        self.expire_if_needed(key, now)
    }

    /// Every live entry (tests, and snapshots later).
    pub fn iter(&self, now: i64) -> impl Iterator<Item = &Entry> {
        self.dict.iter().filter(move |e| !Self::expired(e, now))
    }

    /// The entry as stored, even if its time has passed and it awaits expiry (DEBUG DIGEST-VALUE,
    /// which Redis computes over logically expired keys too). Expires nothing.
    pub fn stored(&self, key: &[u8]) -> Option<&Entry> {
        self.dict.get(key)
    }

    /// Every stored entry, logically expired ones included (DEBUG DIGEST).
    pub fn iter_stored(&self) -> impl Iterator<Item = &Entry> {
        self.dict.iter()
    }

    /// A random live key, trying a bounded number of times to avoid expired ones.
    pub fn random_key(&mut self, now: i64, mut rand: impl FnMut() -> u64) -> Option<Bytes> {
        for _ in 0..100 {
            let (key, expired) = {
                let e = self.dict.random(&mut rand)?;
                (Bytes::copy_from_slice(e.key()), Self::expired(e, now))
            };
            if !expired {
                return Some(key);
            }
            self.expire_if_needed(&key, now);
        }
        None
    }

    /// Moves up to `buckets` buckets of an in-progress table resize (background work, so resizes
    /// finish on idle databases too). Returns true while a resize remains.
    pub fn rehash(&mut self, buckets: usize) -> bool {
        self.dict.rehash_for(buckets)
    }

    /// Removes every key in O(1) (FLUSHDB, FLUSHALL): the table and the hints go to the lazy-free
    /// queue unless small. Emits `Flushed`, waking every waiter. Returns a ticket for
    /// [`Db::when_freed`] (0: nothing was queued).
    pub fn clear(&mut self) -> u64 {
        self.touch_watched_live(None, now_ms());
        let keys = self.dict.len();
        let table = self.dict.take_all();
        let hints = self.ttl.take();
        self.volatile = 0;
        self.hooks.emit_all(EventKind::Flushed, keys as u64);
        // A running snapshot not done with this database walks the flushed table before it goes.
        let table = match &mut self.snap {
            Some(s) if !s.walked && !table.is_empty() => {
                s.detached.push((table, 0));
                None
            }
            _ => Some(table),
        };
        if keys <= FLUSH_INLINE_MAX && hints.len() <= FLUSH_INLINE_MAX {
            return 0;
        }
        if let Some(table) = table {
            self.hooks.lazy.push(Garbage::Table(table));
        }
        self.hooks.lazy.push(Garbage::Hints(hints))
    }

    /// Exchanges this database's keys with `other`'s (SWAPDB). Hooks (waiters, journal, dirty,
    /// lazy-free queue) stay with the index; both databases emit `Swapped`. `counted`: this swap
    /// counts as the command's one change (Redis counts one per SWAPDB, not one per database or
    /// shard), on this database's counter.
    pub fn swap_contents(&mut self, other: &mut Db, counted: bool) {
        let now = now_ms();
        self.touch_watched_live(Some(&other.dict), now);
        other.touch_watched_live(Some(&self.dict), now);
        // A running snapshot saves what is left of both first: its records belong to the index.
        self.snap_save_rest();
        other.snap_save_rest();
        std::mem::swap(&mut self.dict, &mut other.dict);
        std::mem::swap(&mut self.ttl, &mut other.ttl);
        std::mem::swap(&mut self.volatile, &mut other.volatile);
        self.hooks.emit_all(EventKind::Swapped, u64::from(counted));
        other.hooks.emit_all(EventKind::Swapped, 0);
    }

    /// Before a flush (`other` None) or a swap with `other`: touches the watches of watched keys
    /// alive on either side. A key alive on neither side is no logical change; after a swap it is
    /// stale if `other` holds it expired, so EXEC does not count its expiry (as Redis 7.0).
    fn touch_watched_live(&mut self, other: Option<&Dict>, now: i64) {
        if self.hooks.watched.is_empty() {
            return;
        }
        let alive = |d: &Dict, k: &[u8]| d.get(k).is_some_and(|e| !Self::expired(e, now));
        for (key, list) in self.hooks.watched.iter_mut() {
            if alive(&self.dict, key) || other.is_some_and(|o| alive(o, key)) {
                for w in list.iter() {
                    w.watch.touch();
                }
            } else if let Some(o) = other {
                let stale = o.get(key).is_some();
                for w in list.iter_mut() {
                    w.stale = stale;
                }
            }
        }
    }

    // ----- Snapshots (see crate::snapshot) -----

    /// Starts this database's part of a snapshot: flips the parity, so every entry is unsaved.
    pub(crate) fn snap_begin(&mut self, snap: DbSnap) {
        self.snap_parity = !self.snap_parity;
        self.snap = Some(Box::new(snap));
    }

    /// Walks up to `keys` keys (or until `bytes` are pending), saving the unsaved ones. Returns
    /// (this database is completely walked, keys visited).
    pub(crate) fn snap_walk(&mut self, keys: usize, bytes: usize) -> (bool, usize) {
        let parity = self.snap_parity;
        let Some(s) = self.snap.as_mut() else {
            return (true, 0);
        };
        if s.walked {
            return (true, 0);
        }
        let mut seen = 0;
        let cancelled = s.cancelled.load(Ordering::Relaxed);
        // Flushed tables first, then the live one.
        while let Some((table, at)) = s.detached.last_mut() {
            let next = if cancelled {
                None
            } else {
                let start = *at;
                let (encode, buf, n) = (&s.encode, &mut s.buf, &mut s.keys);
                table.visit(start, keys.max(1), |e| {
                    seen += 1;
                    if e.snap_mark() != parity {
                        encode(buf, e);
                        *n += 1;
                    }
                })
            };
            match next {
                Some(p) => {
                    *at = p;
                    return (false, seen);
                }
                None => {
                    let (table, _) = s.detached.pop().expect("just looked at it");
                    self.hooks.lazy.push(Garbage::Table(table));
                }
            }
        }
        loop {
            let s = self.snap.as_mut().expect("checked above");
            let encode = &s.encode;
            let (buf, n) = (&mut s.buf, &mut s.keys);
            s.cursor = self.dict.scan_mut(s.cursor, |e| {
                seen += 1;
                if e.snap_mark() != parity {
                    if !cancelled {
                        encode(buf, e);
                        *n += 1;
                    }
                    e.set_snap_mark(parity);
                }
            });
            if s.cursor == 0 {
                s.walked = true;
                return (true, seen);
            }
            if seen >= keys || s.buf.len() >= bytes {
                return (false, seen);
            }
        }
    }

    /// Saves every key of this database the running snapshot has not saved yet (before SWAPDB).
    fn snap_save_rest(&mut self) {
        while self.snap.is_some() && !self.snap_walk(usize::MAX, usize::MAX).0 {}
    }

    /// The records pending for the sink, if any.
    pub(crate) fn snap_take_buf(&mut self) -> Option<(Vec<u8>, usize)> {
        let s = self.snap.as_mut()?;
        (!s.buf.is_empty()).then(|| (std::mem::take(&mut s.buf), std::mem::take(&mut s.keys)))
    }

    /// Ends this database's part of the snapshot (its walk is complete, or it was cancelled).
    pub(crate) fn snap_end(&mut self) {
        if let Some(s) = self.snap.take() {
            for (table, _) in s.detached {
                self.hooks.lazy.push(Garbage::Table(table));
            }
        }
    }

    /// WATCHes `key` for `watch`, noting whether the key is stale (present but expired) now: see
    /// [`Db::watched_key_expired`].
    pub fn watch(&mut self, key: &[u8], watch: &Arc<Watch>, now: i64) {
        let stale = self.dict.get(key).is_some_and(|e| Self::expired(e, now));
        let list = self.hooks.watched.entry(key.into()).or_default();
        if !list.iter().any(|w| Arc::ptr_eq(&w.watch, watch)) {
            list.push(Watcher {
                watch: watch.clone(),
                stale,
            });
        }
    }

    /// Withdraws `watch` from `key` (UNWATCH, EXEC, DISCARD, a closed connection).
    pub fn unwatch(&mut self, key: &[u8], watch: &Arc<Watch>) {
        if let Some(list) = self.hooks.watched.get_mut(key) {
            list.retain(|w| !Arc::ptr_eq(&w.watch, watch));
            if list.is_empty() {
                self.hooks.watched.remove(key);
                let w = &mut self.hooks.watched;
                if let Some(to) = crate::memory::shrink_target(w.len(), w.capacity()) {
                    w.shrink_to(to);
                }
            }
        }
    }

    /// True if `key`, watched by `watch` while not stale, has expired since (still present, TTL
    /// passed): EXEC aborts then, as Redis 7.0 does, even though nothing removed it yet.
    pub fn watched_key_expired(&self, key: &[u8], watch: &Arc<Watch>, now: i64) -> bool {
        let watched_stale = self
            .hooks
            .watched
            .get(key)
            .and_then(|l| l.iter().find(|w| Arc::ptr_eq(&w.watch, watch)))
            .is_none_or(|w| w.stale);
        !watched_stale && self.dict.get(key).is_some_and(|e| Self::expired(e, now))
    }

    /// Number of watched keys (INFO `watching_clients`-style introspection and tests).
    pub fn watched_keys(&self) -> usize {
        self.hooks.watched.len()
    }

    /// A wait for everything queued up to `ticket` to be freed (done at once if it already is).
    pub fn when_freed(&mut self, ticket: u64) -> FreeWait {
        let lazy = &mut self.hooks.lazy;
        if ticket <= lazy.freed {
            return FreeWait::done();
        }
        let (tx, rx) = oneshot::channel();
        lazy.waiters.push((ticket, tx));
        FreeWait(vec![rx])
    }

    /// Frees queued garbage for up to `budget` units of work; returns the work done.
    pub fn free_garbage(&mut self, budget: usize) -> usize {
        if self.hooks.lazy.queue.is_empty() {
            return 0;
        }
        self.hooks.lazy.free(budget)
    }

    /// True while garbage waits to be freed.
    pub fn has_garbage(&self) -> bool {
        !self.hooks.lazy.queue.is_empty()
    }

    /// Keys whose memory the lazy-free queue still owns.
    pub fn lazyfree_pending(&self) -> usize {
        self.hooks.lazy.pending
    }

    /// Sum of the entries' heap bytes (used by MEMORY-style introspection and tests).
    pub fn entries_heap_size(&self) -> usize {
        self.dict.iter().map(Entry::heap_size).sum()
    }

    /// Parks `p` on `key` behind the commands already parked there that arrived before it (see
    /// [`Parked::arrived`]; one that arrived later, by a slower path, is passed). False if it is
    /// parked there already (a key named twice, as in `BLPOP k k 0`, or a command parking again
    /// after a vain wake-up: it keeps its place).
    pub(crate) fn park(&mut self, key: &[u8], p: Arc<Parked>) -> bool {
        let q = match self.hooks.parked.get_mut(key) {
            Some(q) => q,
            None => self.hooks.parked.entry(key.into()).or_default(),
        };
        let arrived = p.arrived();
        // Nearly always at the back: the walk stops at the first command that arrived earlier.
        let mut at = q.queue.len();
        for x in q.queue.iter().rev() {
            if Arc::ptr_eq(x, &p) {
                return false;
            }
            if x.arrived() < arrived {
                break;
            }
            at -= 1;
        }
        // Ties keep parking order.
        while at < q.queue.len() && q.queue[at].arrived() == arrived {
            at += 1;
        }
        q.queue.insert(at, p);
        true
    }

    /// Withdraws `p` from `key`'s queue; true if it was there.
    pub(crate) fn unpark(&mut self, key: &[u8], p: &Arc<Parked>) -> bool {
        let Some(q) = self.hooks.parked.get_mut(key) else {
            return false;
        };
        let before = q.queue.len();
        q.queue.retain(|x| !Arc::ptr_eq(x, p));
        let removed = q.queue.len() < before;
        if q.queue.is_empty() && !q.ready {
            self.hooks.parked.remove(key);
        } else if removed && !q.ready {
            // The one that left may have been served or woken in vain: give the next its turn.
            q.ready = true;
            self.hooks.ready.push_back(key.into());
            mark_ready();
        }
        removed
    }

    /// True if a parked-on key was written since [`next_ready`](Self::next_ready) last ran dry.
    #[inline]
    pub(crate) fn has_ready(&self) -> bool {
        !self.hooks.ready.is_empty()
    }

    /// The next ready key and the first live command parked on it (finished ones are dropped on
    /// the way, and counted in `dropped`); None when no key is ready.
    pub(crate) fn next_ready(&mut self, dropped: &mut usize) -> Option<(Box<[u8]>, Arc<Parked>)> {
        while let Some(key) = self.hooks.ready.pop_front() {
            let Some(q) = self.hooks.parked.get_mut(&key) else {
                continue;
            };
            q.ready = false;
            while q.queue.front().is_some_and(|p| p.is_done()) {
                q.queue.pop_front();
                *dropped += 1;
            }
            match q.queue.front() {
                Some(p) => {
                    let p = p.clone();
                    return Some((key, p));
                }
                None => {
                    self.hooks.parked.remove(&key);
                }
            }
        }
        None
    }

    /// Up to `limit` live commands parked on `key` after `after`, in parking order (one walk of
    /// the queue, however many are then tried).
    pub(crate) fn waiters_after(
        &self,
        key: &[u8],
        after: &Arc<Parked>,
        limit: usize,
    ) -> Vec<Arc<Parked>> {
        let Some(q) = self.hooks.parked.get(key) else {
            return Vec::new();
        };
        q.queue
            .iter()
            .skip_while(|p| !Arc::ptr_eq(p, after))
            .skip(1)
            .filter(|p| !p.is_done())
            .take(limit)
            .cloned()
            .collect()
    }

    /// Lists `key` as ready again (its first parked command could not be served yet).
    pub(crate) fn keep_ready(&mut self, key: Box<[u8]>) {
        if let Some(q) = self.hooks.parked.get_mut(&key).filter(|q| !q.ready) {
            q.ready = true;
            self.hooks.ready.push_back(key);
        }
    }

    /// Keys with commands parked on them.
    pub fn parked_keys(&self) -> usize {
        self.hooks.parked.len()
    }

    /// Waits for the next event on `key` in this database (see [`KeyWait`]).
    pub fn wait_key(&mut self, key: &[u8]) -> KeyWait {
        self.hooks.wait(key)
    }

    /// Keys with at least one registered waiter (dropped waiters included until pruned).
    pub fn waited_keys(&self) -> usize {
        self.hooks.waiters.len()
    }

    /// Turns the event journal on or off (off drops what was recorded).
    pub fn record_events(&mut self, on: bool) {
        match (on, self.hooks.journal.is_some()) {
            (true, false) => self.hooks.journal = Some(Vec::new()),
            (false, true) => self.hooks.journal = None,
            _ => {}
        }
    }

    /// The events recorded since the last call (empty when the journal is off).
    pub fn drain_events(&mut self) -> Vec<KeyEvent> {
        self.hooks
            .journal
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;
    use strata_core::ValueRef;
    use EventKind::*;

    fn s(v: &str) -> Value {
        Value::Str(Bytes::copy_from_slice(v.as_bytes()))
    }

    fn ev(key: &str, kind: EventKind) -> KeyEvent {
        KeyEvent {
            db: 3,
            key: Bytes::copy_from_slice(key.as_bytes()),
            kind,
        }
    }

    fn recording() -> Db {
        let mut db = Db::new(3);
        db.record_events(true);
        db
    }

    /// Polls a future once without a runtime.
    fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
        Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn lazy_and_active_expiry() {
        let mut db = Db::default();
        db.set(b"a", s("1"), Some(100), 0);
        db.set(b"b", s("2"), Some(200), 0);
        db.set(b"c", s("3"), None, 0);
        assert_eq!(db.volatile_len(), 2);
        assert!(db.get(b"a", 99).is_some());
        assert!(db.get(b"a", 100).is_none());
        assert_eq!((db.len(), db.stats().expired_keys), (2, 1));
        assert_eq!(db.active_expire(250, 10), (2, 1)); // "a" was already gone: a stale hint
        assert_eq!((db.len(), db.volatile_len()), (1, 0));
    }

    #[test]
    fn set_replaces_ttl_and_keep_ttl_keeps_it() {
        let mut db = Db::default();
        db.set(b"k", s("v"), Some(500), 0);
        assert!(db.set_keep_ttl(b"k", s("w"), 0));
        assert_eq!(db.peek(b"k", 0).and_then(Entry::expire), Some(500));
        db.set(b"k", s("x"), None, 0);
        assert_eq!(db.peek(b"k", 0).and_then(Entry::expire), None);
        assert_eq!(db.volatile_len(), 0);
        assert!(!db.set_keep_ttl(b"new", s("y"), 0));
        assert_eq!(
            db.peek(b"new", 0).map(Entry::value),
            Some(ValueRef::Inline(b"y"))
        );
    }

    #[test]
    fn every_operation_emits_its_event_kind() {
        let mut db = recording();
        assert!(!db.set(b"k", s("1"), None, 0));
        assert!(db.set(b"k", s("2"), None, 0));
        assert_eq!(db.drain_events(), [ev("k", Written), ev("k", Written)]);

        // In place through the guard: one event per guard, and none if nothing changed.
        db.set(b"n", Value::Int(1), None, 0);
        db.drain_events();
        {
            let mut e = db.modify(b"n", 0).expect("exists");
            assert!(e.set_int(2) && e.set_int(3));
        }
        drop(db.modify(b"n", 0));
        {
            let mut e = db.modify(b"n", 0).expect("exists");
            assert!(!e.set_int(4) || e.value() == ValueRef::Int(4));
        }
        assert_eq!(db.drain_events(), [ev("n", Written), ev("n", Written)]);
        db.modify(b"n", 0).expect("exists").set_value(s("str"));
        assert!(db.modify(b"n", 0).expect("exists").object_mut().is_none());
        assert_eq!(db.drain_events(), [ev("n", Written)]);
        assert!(db.modify(b"missing", 0).is_none());

        // TTL set, changed, removed; a deadline on a missing key changes nothing.
        assert!(db.set_expire(b"k", Some(100), 0));
        assert!(db.set_expire(b"k", Some(200), 0));
        assert!(db.set_expire(b"k", None, 0));
        assert!(!db.set_expire(b"nope", Some(1), 0));
        assert_eq!(db.drain_events(), vec![ev("k", TtlChanged); 3]);

        // Deletion, with and without the value.
        assert!(db.delete(b"k", 0));
        assert!(!db.delete(b"k", 0));
        assert!(db.remove(b"n", 0).is_some());
        assert_eq!(db.drain_events(), [ev("k", Deleted), ev("n", Deleted)]);

        // Lazy expiry on read and on write lookups; active expiry; overwriting an expired key.
        for k in ["a", "b", "c", "d"] {
            db.set(k.as_bytes(), s("v"), Some(10), 0);
        }
        db.drain_events();
        assert!(db.get(b"a", 10).is_none());
        assert!(db.modify(b"b", 10).is_none());
        db.set(b"c", s("w"), None, 10);
        assert_eq!(db.active_expire(10, 100).1, 1);
        assert_eq!(
            db.drain_events(),
            [
                ev("a", Expired),
                ev("b", Expired),
                ev("c", Expired),
                ev("c", Written),
                ev("d", Expired)
            ]
        );

        // Flush and swap are database-wide.
        db.clear();
        let mut other = Db::new(4);
        db.swap_contents(&mut other, true);
        assert_eq!(db.drain_events(), [ev("", Flushed), ev("", Swapped)]);
        // 20 key events, of which the 4 expiries count no change; 1 key flushed, 1 swap.
        assert_eq!(db.dirty(), 18);
    }

    #[test]
    fn journal_is_off_by_default_and_dirty_counts_anyway() {
        let mut db = Db::default();
        db.set(b"k", s("1"), None, 0);
        db.delete(b"k", 0);
        assert!(db.drain_events().is_empty());
        assert_eq!(db.dirty(), 2);
        assert!(db.hooks.journal.is_none());
        db.record_events(true);
        db.set(b"k", s("1"), None, 0);
        db.record_events(false);
        db.set(b"k", s("2"), None, 0);
        assert!(db.drain_events().is_empty());
    }

    #[test]
    fn waiters_are_woken_once_with_the_kind() {
        let mut db = Db::default();
        let mut w1 = db.wait_key(b"k");
        let mut w2 = db.wait_key(b"k");
        let mut other = db.wait_key(b"other");
        assert!(poll_once(&mut w1).is_pending());
        db.set(b"k", s("1"), None, 0);
        assert_eq!(poll_once(&mut w1), Poll::Ready(Written));
        assert_eq!(poll_once(&mut w2), Poll::Ready(Written));
        assert!(poll_once(&mut other).is_pending());
        assert_eq!(db.waited_keys(), 1);
        // Woken once: a later event finds no waiter for "k".
        db.set(b"k", s("2"), None, 0);
        assert_eq!(db.waited_keys(), 1);

        let mut ttl = db.wait_key(b"k");
        db.set_expire(b"k", Some(5), 0);
        assert_eq!(poll_once(&mut ttl), Poll::Ready(TtlChanged));
        let mut exp = db.wait_key(b"k");
        assert!(db.get(b"k", 5).is_none());
        assert_eq!(poll_once(&mut exp), Poll::Ready(Expired));

        // A flush wakes every waiter of the database.
        db.clear();
        assert_eq!(poll_once(&mut other), Poll::Ready(Flushed));
        assert_eq!(db.waited_keys(), 0);
        let mut sw = db.wait_key(b"x");
        db.swap_contents(&mut Db::new(1), true);
        assert_eq!(poll_once(&mut sw), Poll::Ready(Swapped));
    }

    #[test]
    fn dropped_waiters_are_pruned() {
        let mut db = Db::default();
        // Repeated waits on one key, each dropped: the key's list never grows.
        for _ in 0..1000 {
            drop(db.wait_key(b"k"));
        }
        assert_eq!(db.hooks.waiters.get(&b"k"[..]).map(Vec::len), Some(1));
        // Waits on distinct keys, each dropped: the map stays bounded.
        for i in 0..100_000u32 {
            drop(db.wait_key(&i.to_be_bytes()));
        }
        assert!(db.waited_keys() <= WAITERS_PRUNE_MIN + 1);
        // Live waiters survive a sweep.
        let mut live: Vec<KeyWait> = (0..200u32).map(|i| db.wait_key(&i.to_le_bytes())).collect();
        for i in 0..1000u32 {
            drop(db.wait_key(&(i + 1_000_000).to_be_bytes()));
        }
        assert!(db.waited_keys() <= 2 * 200 + 2);
        db.set(&7u32.to_le_bytes(), s("v"), None, 0);
        assert_eq!(poll_once(&mut live[7]), Poll::Ready(Written));
        assert!(poll_once(&mut live[8]).is_pending());
    }

    #[test]
    fn one_write_touches_a_bounded_number_of_hints() {
        // 1M distinct volatile keys, then each overwritten with a new deadline: every overwrite
        // leaves a stale hint behind, so compactions must run, but never inside one write.
        let mut db = Db::default();
        let n = 1_000_000u32;
        let mut worst = 0;
        let mut most_hints = 0;
        for round in 0..2i64 {
            for i in 0..n {
                let before = db.ttl.touched;
                db.set(&i.to_le_bytes(), Value::Int(1), Some(1_000 + round), 0);
                worst = worst.max(db.ttl.touched - before);
                most_hints = most_hints.max(db.hints_len());
            }
        }
        assert_eq!(db.volatile_len(), n as usize);
        assert!(worst <= 1 + 2 * COMPACT_STEP as u64, "{worst}");
        assert!(
            most_hints <= 2 * n as usize + 1025 + n as usize / 2,
            "{most_hints}"
        );
        // Every key still expires: the compaction kept the live hints.
        assert_eq!(db.active_expire(1_001, usize::MAX).1, n as usize);
        assert!(db.is_empty());
    }

    #[test]
    fn reclaiming_under_memory_pressure_frees_the_hints_of_keys_gone_and_keeps_the_live_ones() {
        // 600 volatile keys, 500 of them deleted: their hints stay (fewer than the 1024 stale
        // hints that start a compaction otherwise) until the process is over `maxmemory`.
        let mut db = Db::default();
        for i in 0..600u32 {
            db.set(&i.to_le_bytes(), Value::Int(1), Some(1_000 + i as i64), 0);
        }
        for i in 0..500u32 {
            assert!(db.delete(&i.to_le_bytes(), 0));
        }
        assert_eq!((db.volatile_len(), db.hints_len()), (100, 600));
        assert_eq!(
            db.reclaim_hints(4096),
            600 + 100,
            "600 taken out, 100 kept, in one call"
        );
        assert_eq!((db.volatile_len(), db.hints_len()), (100, 100));
        // Few stale hints: nothing starts (the cost stays proportional to what is freed).
        for i in 500..510u32 {
            assert!(db.delete(&i.to_le_bytes(), 0));
        }
        assert_eq!(db.reclaim_hints(4096), 0);
        assert_eq!(db.hints_len(), 100);
        // The live ones still expire.
        assert_eq!(db.active_expire(2_000, usize::MAX).1, 90);
    }

    #[test]
    fn repeated_expire_of_one_key_keeps_hints_bounded() {
        let mut db = Db::default();
        db.set(b"k", Value::Int(1), None, 0);
        let mut worst = 0;
        for i in 0..100_000 {
            let before = db.ttl.touched;
            assert!(db.set_expire(b"k", Some(1_000_000 + i), 0));
            worst = worst.max(db.ttl.touched - before);
            assert!(db.hints_len() <= 2 * db.volatile_len() + 1025 + 1025);
        }
        assert!(worst <= 1 + 2 * COMPACT_STEP as u64);
        assert!(db.set_expire(b"k", None, 0));
        assert_eq!(db.volatile_len(), 0);
        assert_eq!(db.active_expire(i64::MAX, 1_000_000).1, 0);
        assert_eq!(db.get(b"k", 0).map(|e| e.value()), Some(ValueRef::Int(1)));
        while db.compact_hints(100) {}
    }

    #[test]
    fn active_expiry_sees_hints_still_in_the_old_heap() {
        let mut db = Db::default();
        db.set(b"soon", Value::Int(1), Some(10), 0);
        db.set(b"k", Value::Int(1), None, 0);
        // Enough stale hints to start a compaction, leaving "soon" in the old heap.
        let mut i = 0;
        while db.ttl.old.is_empty() {
            db.set_expire(b"k", Some(1_000_000 + i), 0);
            i += 1;
        }
        assert!(db.ttl.heap.is_empty());
        assert_eq!(db.active_expire(10, 100).1, 1);
        assert!(db.peek(b"soon", 10).is_none());
    }

    #[test]
    fn flush_is_o1_and_garbage_is_freed_in_slices() {
        let mut db = Db::default();
        for i in 0..10_000u32 {
            db.set(&i.to_le_bytes(), Value::Int(1), Some(1_000), 0);
        }
        let ticket = db.clear();
        assert!(ticket > 0);
        assert!(db.is_empty() && db.get(&5u32.to_le_bytes(), 0).is_none());
        assert_eq!((db.volatile_len(), db.hints_len()), (0, 0));
        assert_eq!(db.lazyfree_pending(), 10_000);
        let mut wait = db.when_freed(ticket);
        let mut slices = 0;
        while db.has_garbage() {
            assert!(poll_once(&mut wait).is_pending());
            assert!(db.free_garbage(500) <= 500 + 1);
            slices += 1;
        }
        assert!(slices >= 20);
        assert_eq!(db.lazyfree_pending(), 0);
        assert_eq!(poll_once(&mut wait), Poll::Ready(()));
        assert_eq!(poll_once(&mut db.when_freed(ticket)), Poll::Ready(()));
        // A small database is freed inline.
        db.set(b"k", s("v"), None, 0);
        assert_eq!(db.clear(), 0);
        assert!(!db.has_garbage());
    }

    #[test]
    fn large_values_go_to_the_lazy_free_queue() {
        let mut db = Db::default();
        let big = || Value::Str(Bytes::from(vec![b'x'; LAZYFREE_THRESHOLD + 1]));
        db.set(b"a", big(), None, 0);
        db.set(b"b", big(), None, 0);
        db.set(b"c", big(), Some(5), 0);
        db.set(b"small", s("v"), None, 0);
        assert!(db.delete(b"a", 0)); // DEL
        db.set(b"b", s("v"), None, 0); // overwrite
        db.active_expire(5, 10); // expiry
        assert!(db.delete(b"small", 0));
        assert_eq!(db.lazyfree_pending(), 3);
        db.set(b"d", big(), None, 0);
        db.modify(b"d", 0).expect("exists").set_value(s("v")); // in place
        assert_eq!(db.lazyfree_pending(), 4);
        assert_eq!(db.free_garbage(2), 2);
        assert_eq!(db.lazyfree_pending(), 2);
        db.free_garbage(100);
        assert!(!db.has_garbage());
    }

    #[test]
    fn huge_values_are_dropped_by_the_freer_thread() {
        let mut db = Db::default();
        // No collection type can be built here yet, so make every queued value count as huge.
        db.hooks.lazy.background_above = 0;
        let big = || Value::Str(Bytes::from(vec![b'x'; LAZYFREE_THRESHOLD + 1]));
        let freed_before = background_freed();
        db.set(b"a", big(), None, 0);
        db.set(b"b", big(), None, 0);
        db.set(b"small", s("v"), None, 0);
        assert!(db.delete(b"a", 0) && db.delete(b"b", 0) && db.delete(b"small", 0));
        assert_eq!(db.lazyfree_pending(), 2);
        let ticket = db.clear();
        // A hand-over costs one unit of work, however large the value.
        assert_eq!(db.free_garbage(1), 1);
        assert_eq!(db.lazyfree_pending(), 1);
        db.free_garbage(100);
        assert!(!db.has_garbage());
        assert_eq!(poll_once(&mut db.when_freed(ticket)), Poll::Ready(()));
        wait_background_frees();
        assert!(background_freed() >= freed_before + 2);
        // Nothing else in this crate's tests hands values over.
        assert_eq!(background_free_pending(), 0);
    }

    #[test]
    fn free_effort_counts_strings_as_one() {
        let big = Object::Str(Box::new(vec![b'x'; LAZYFREE_THRESHOLD + 1]));
        assert_eq!(free_effort(&big), 1);
        let mut db = Db::default();
        // A big string is queued for its bytes and freed on the tick for one unit of work.
        db.set(b"k", Value::Obj(big), None, 0);
        assert!(db.delete(b"k", 0));
        assert_eq!(db.lazyfree_pending(), 1);
        assert_eq!(db.free_garbage(10), 1);
    }

    #[test]
    fn swap_keeps_waiters_and_hooks_with_the_index() {
        let (mut a, mut b) = (Db::new(0), Db::new(1));
        a.set(b"x", s("a"), Some(100), 0);
        b.record_events(true);
        a.swap_contents(&mut b, true);
        assert_eq!((a.len(), b.len(), b.volatile_len()), (0, 1, 1));
        assert_eq!(b.index(), 1);
        b.set(b"y", s("b"), None, 0);
        let kinds: Vec<_> = b
            .drain_events()
            .into_iter()
            .map(|e| (e.db, e.kind))
            .collect();
        assert_eq!(kinds, [(1, Swapped), (1, Written)]);
        assert_eq!(b.active_expire(100, 10).1, 1);
    }

    #[test]
    fn table_stats_and_expiry_hints_describe_the_keyspace() {
        let mut db = Db::new(0);
        assert_eq!(db.table_stats()[0].entries, 0);
        db.set(b"a", s("1"), None, 0);
        db.set(b"b", s("2"), Some(1_000_000), 0);
        let t = &db.table_stats()[0];
        assert_eq!((t.entries, t.buckets), (2, 4));
        assert_eq!(db.expiry_hints(), 1);
    }
}
