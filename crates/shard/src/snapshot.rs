//! A point-in-time snapshot of a shard's databases, written while the shard keeps serving.
//!
//! **Start.** Whoever orchestrates a save (the persistence service) locks every database of every
//! shard, calls [`Shard::snapshot_start`] on each under those locks — so every shard starts at the
//! same logical moment, between two commands — and releases. Starting flips each database's
//! *parity*: every entry whose snapshot mark ([`strata_core::Entry::snap_mark`]) differs from the
//! parity is *unsaved*; an entry written afterwards is created with the parity's mark, so it is
//! never saved.
//!
//! **Walk.** The writer (a thread of its own) posts [`Shard::snapshot_step`] jobs to the shard. A
//! step walks a bounded number of keys of the current database with the table's SCAN cursor (which
//! visits every key present throughout), encodes each unsaved one (a key whose TTL has passed but
//! which is still stored is written too, as Redis does) with the snapshot's [`Encoder`], marks
//! it saved, and moves the bytes to the [`Sink`]. Between steps the shard serves its clients.
//!
//! **Copy-on-write, per key.** Before the write path changes or removes an unsaved key (`Db`'s
//! set/insert, modify, set_expire, unlink: delete, expiry, eviction), it encodes the key's old
//! state into the database's pending buffer and marks it ([`Db::snap_save`]). So the file holds
//! each key as it was at the start, whatever happens to it later, and the extra memory is what the
//! pending buffers and the sink hold. A FLUSHDB/FLUSHALL hands the flushed table to the snapshot,
//! which walks it before it is freed; a SWAPDB first saves what is left of both databases.
//!
//! **End.** Once every database was walked, the snapshot state goes; the marks now all equal the
//! parity, which is the state the next snapshot flips from. A cancelled snapshot ([`Sink::cancel`])
//! still walks to the end, without encoding, so the marks are consistent for the next one.
//!
//! While no snapshot runs, the write path pays one test of `Db::snap` (None) and the parity's mark
//! on each new entry.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use strata_core::{Drain, Entry};

/// Encodes one key's record (the persistence layer's RDB encoding) and appends it.
pub type Encoder = Arc<dyn Fn(&mut Vec<u8>, &Entry) + Send + Sync>;

/// Keys a step walks at most.
pub const STEP_KEYS: usize = 2048;
/// Bytes a step encodes at most before it ends (one key may overrun it).
pub const STEP_BYTES: usize = 1 << 20;

/// What the shards hand to the writer: per shard, per database, chunks of encoded records.
pub struct Sink {
    state: Mutex<SinkState>,
    ready: Condvar,
    cancelled: Arc<AtomicBool>,
    cow: Arc<AtomicU64>,
}

/// The writer's view of one shard's progress.
#[derive(Default)]
pub struct ShardOut {
    /// Encoded records not yet written, per database: (bytes, keys in them).
    pub chunks: Vec<VecDeque<(Vec<u8>, usize)>>,
    /// Bytes in `chunks`.
    pub bytes: usize,
    /// Databases below this index are completely walked (no more records will come for them).
    pub walked: usize,
    /// A step job is posted and has not reported yet.
    pub busy: bool,
    /// Per database at the start: (keys, keys with a TTL), for RESIZEDB.
    pub sizes: Vec<(u64, u64)>,
    /// Every database walked: the shard's snapshot is over.
    pub done: bool,
    /// The next step should not start before this: as long after the last one ended as that one
    /// took, so the shard spends at least half its time on its clients (a step posted the moment
    /// the last reported would otherwise run in the same turn of the shard's inbox, and the next,
    /// and so on: clients starved for the whole walk).
    pub not_before: Option<std::time::Instant>,
}

#[derive(Default)]
pub struct SinkState {
    pub shards: Vec<ShardOut>,
}

impl Sink {
    /// A sink for `shards` shards of `dbs` databases each.
    pub fn new(shards: usize, dbs: usize) -> Arc<Sink> {
        let shards = (0..shards)
            .map(|_| ShardOut {
                chunks: (0..dbs).map(|_| VecDeque::new()).collect(),
                sizes: vec![(0, 0); dbs],
                ..ShardOut::default()
            })
            .collect();
        Arc::new(Sink {
            state: Mutex::new(SinkState { shards }),
            ready: Condvar::new(),
            cancelled: Arc::new(AtomicBool::new(false)),
            cow: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The shared state, locked.
    pub fn lock(&self) -> MutexGuard<'_, SinkState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits (on the writer's thread) until a shard reports, at most `timeout`.
    pub fn wait<'a>(
        &self,
        guard: MutexGuard<'a, SinkState>,
        timeout: std::time::Duration,
    ) -> MutexGuard<'a, SinkState> {
        self.ready
            .wait_timeout(guard, timeout)
            .map(|(g, _)| g)
            .unwrap_or_else(|e| e.into_inner().0)
    }

    /// Stops encoding: the shards walk to the end without writing anything (FLUSHALL during a
    /// BGSAVE, a write error).
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        self.ready.notify_all();
    }

    /// Bytes the write path encoded so far (copy-on-write: keys saved before a change).
    pub fn cow_bytes(&self) -> u64 {
        self.cow.load(Ordering::Relaxed)
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    fn report(
        &self,
        shard: usize,
        chunks: Vec<(usize, (Vec<u8>, usize))>,
        walked: usize,
        done: bool,
        took: std::time::Duration,
    ) {
        let mut st = self.lock();
        let out = &mut st.shards[shard];
        out.not_before = Some(std::time::Instant::now() + took);
        if !self.is_cancelled() {
            for (db, c) in chunks {
                out.bytes += c.0.len();
                out.chunks[db].push_back(c);
            }
        }
        out.walked = walked;
        out.done = done;
        out.busy = false;
        drop(st);
        self.ready.notify_all();
    }
}

/// One database's part of a running snapshot (see the module docs).
pub(crate) struct DbSnap {
    pub encode: Encoder,
    pub cancelled: Arc<AtomicBool>,
    /// Records encoded and not yet handed to the sink, and how many keys they hold.
    pub buf: Vec<u8>,
    pub keys: usize,
    /// Bytes encoded by the write path (copy-on-write), every shard's ([`Sink::cow_bytes`]).
    pub cow: Arc<AtomicU64>,
    /// The walk's SCAN cursor over the live table.
    pub cursor: u64,
    /// The walk of this database is complete.
    pub walked: bool,
    /// Tables flushed during the snapshot, walked before they are freed (position in each).
    pub detached: Vec<(Drain, usize)>,
}

impl DbSnap {
    /// Encodes `e` if it is unsaved (its mark differs from `parity`). Keys whose TTL has passed
    /// but which are still stored are written too, as Redis writes them (a master skips them on
    /// load).
    #[inline]
    pub fn save(&mut self, parity: bool, e: &Entry) {
        if e.snap_mark() != parity && !self.cancelled.load(Ordering::Relaxed) {
            let before = self.buf.len();
            (self.encode)(&mut self.buf, e);
            self.keys += 1;
            self.cow
                .fetch_add((self.buf.len() - before) as u64, Ordering::Relaxed);
        }
    }
}

/// This shard's part of a running snapshot.
pub(crate) struct ShardSnap {
    pub sink: Arc<Sink>,
    /// The database being walked.
    pub db: usize,
}

impl crate::Shard {
    /// Starts a snapshot of every database of this shard at this moment (see the module docs).
    /// Returns false (and does nothing) if one is already running here. Records the databases'
    /// sizes in the sink for RESIZEDB.
    pub fn snapshot_start(&mut self, sink: Arc<Sink>, encode: Encoder) -> bool {
        if self.snapshot.is_some() {
            return false;
        }
        let sizes: Vec<(u64, u64)> = self
            .dbs
            .iter()
            .map(|d| (d.len() as u64, d.volatile_len() as u64))
            .collect();
        for db in &mut self.dbs {
            db.snap_begin(DbSnap {
                encode: encode.clone(),
                cancelled: sink.cancelled.clone(),
                buf: Vec::new(),
                keys: 0,
                cow: sink.cow.clone(),
                cursor: 0,
                walked: false,
                detached: Vec::new(),
            });
        }
        sink.lock().shards[self.id].sizes = sizes;
        self.snapshot = Some(ShardSnap { sink, db: 0 });
        true
    }

    /// True while a snapshot runs on this shard.
    pub fn snapshot_running(&self) -> bool {
        self.snapshot.is_some()
    }

    /// One slice of the snapshot's walk (a job the writer posts): up to `keys` keys (at most
    /// [`STEP_KEYS`]) or [`STEP_BYTES`] bytes, then every database's pending records go to the
    /// sink. Ends the snapshot on this shard once every database was walked.
    pub fn snapshot_step(&mut self, keys: usize) {
        let Some(snap) = self.snapshot.as_mut() else {
            return;
        };
        let began = std::time::Instant::now();
        let mut budget = keys.clamp(1, STEP_KEYS);
        while snap.db < self.dbs.len() && budget > 0 {
            let (done, used) = self.dbs[snap.db].snap_walk(budget, STEP_BYTES);
            budget = budget.saturating_sub(used.max(1));
            if !done {
                break;
            }
            snap.db += 1;
        }
        let walked = snap.db;
        let done = walked >= self.dbs.len();
        let chunks: Vec<(usize, (Vec<u8>, usize))> = self
            .dbs
            .iter_mut()
            .enumerate()
            .filter_map(|(i, d)| d.snap_take_buf().map(|b| (i, b)))
            .collect();
        let sink = snap.sink.clone();
        if done {
            for db in &mut self.dbs {
                db.snap_end();
            }
            self.snapshot = None;
        }
        sink.report(self.id, chunks, walked, done, began.elapsed());
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::Bytes;
    use strata_core::{Value, ValueRef};

    use super::*;
    use crate::Shard;

    /// Records as "db\0key\0value\n" (the test's encoder); the database comes from the sink.
    fn encoder() -> Encoder {
        Arc::new(|out: &mut Vec<u8>, e: &Entry| {
            let v = match e.value() {
                ValueRef::Inline(s) => s.to_vec(),
                ValueRef::Int(i) => i.to_string().into_bytes(),
                ValueRef::Obj(_) => b"obj".to_vec(),
            };
            out.extend_from_slice(e.key());
            out.push(0);
            out.extend_from_slice(&v);
            out.push(b'\n');
        })
    }

    fn set(s: &mut Shard, db: usize, k: &str, v: &str) {
        s.db_mut(db).set(
            k.as_bytes(),
            Value::Str(Bytes::from(v.to_string())),
            None,
            1,
        );
    }

    /// Steps the snapshot to its end, running `between(step)` after each step; returns what the
    /// sink got, per (db, key).
    fn run(
        s: &mut Shard,
        sink: &Arc<Sink>,
        mut between: impl FnMut(&mut Shard, usize),
    ) -> BTreeMap<(usize, String), String> {
        let mut step = 0;
        while s.snapshot_running() {
            s.snapshot_step(STEP_KEYS);
            between(s, step);
            step += 1;
        }
        let mut out = BTreeMap::new();
        let st = sink.lock();
        for (db, q) in st.shards[0].chunks.iter().enumerate() {
            for (c, _) in q {
                for rec in c.split(|&b| b == b'\n').filter(|r| !r.is_empty()) {
                    let mut p = rec.splitn(2, |&b| b == 0);
                    let k = String::from_utf8_lossy(p.next().unwrap()).into_owned();
                    let v = String::from_utf8_lossy(p.next().unwrap()).into_owned();
                    assert!(
                        out.insert((db, k.clone()), v).is_none(),
                        "{k} written twice"
                    );
                }
            }
        }
        out
    }

    #[test]
    fn every_write_during_the_walk_leaves_the_starting_state_in_the_snapshot() {
        let mut s = Shard::new(0, 3);
        let n = 10_000;
        for i in 0..n {
            set(&mut s, 0, &format!("k{i}"), "old");
        }
        set(&mut s, 1, "in1", "one");
        set(&mut s, 2, "in2", "two");
        s.db_mut(0)
            .set(b"dead", Value::Str(Bytes::from("x")), Some(5), 1);
        let sink = Sink::new(1, 3);
        assert!(s.snapshot_start(sink.clone(), encoder()));
        assert!(!s.snapshot_start(sink.clone(), encoder()), "one at a time");
        let got = run(&mut s, &sink, |s, step| {
            // Overwrite, delete, change in place, TTL, new keys, a swap and a flush mid-walk.
            let i = (step * 37) % n;
            set(s, 0, &format!("k{i}"), "new");
            s.db_mut(0)
                .delete(format!("k{}", (i + 1) % n).as_bytes(), 11);
            if let Some(mut e) = s
                .db_mut(0)
                .modify(format!("k{}", (i + 2) % n).as_bytes(), 11)
            {
                e.set_value(Value::Str(Bytes::from("changed")));
            }
            s.db_mut(0)
                .set_expire(format!("k{}", (i + 3) % n).as_bytes(), Some(999), 11);
            set(s, 0, &format!("fresh{step}"), "new");
            if step == 1 {
                s.swap_dbs(1, 2, true);
            }
            if step == 2 {
                drop(s.flush(&[0]));
            }
        });
        assert_eq!(got.len(), n + 3, "every key stored at the start, once");
        for i in 0..n {
            assert_eq!(got[&(0, format!("k{i}"))], "old", "k{i}");
        }
        assert_eq!(got[&(1, "in1".into())], "one");
        assert_eq!(got[&(2, "in2".into())], "two");
        assert!(sink.lock().shards[0].done);
        assert!(sink.cow_bytes() > 0);
        // The next snapshot sees the current state (the marks are consistent again).
        let sink = Sink::new(1, 3);
        assert!(s.snapshot_start(sink.clone(), encoder()));
        let got = run(&mut s, &sink, |_, _| {});
        assert_eq!(got.len(), s.dbs().iter().map(|d| d.len()).sum::<usize>());
        assert_eq!(got[&(1, "in2".into())], "two");
    }

    #[test]
    fn a_cancelled_snapshot_writes_nothing_and_the_next_one_is_whole() {
        let mut s = Shard::new(0, 1);
        for i in 0..5000 {
            set(&mut s, 0, &format!("k{i}"), "v");
        }
        let sink = Sink::new(1, 1);
        assert!(s.snapshot_start(sink.clone(), encoder()));
        s.snapshot_step(STEP_KEYS);
        sink.cancel();
        sink.lock().shards[0].chunks[0].clear();
        let got = run(&mut s, &sink, |s, step| set(s, 0, &format!("k{step}"), "w"));
        assert!(got.is_empty());
        let sink = Sink::new(1, 1);
        assert!(s.snapshot_start(sink.clone(), encoder()));
        assert_eq!(run(&mut s, &sink, |_, _| {}).len(), 5000);
    }
}

#[cfg(test)]
mod cow_tests {
    use bytes::Bytes;
    use strata_core::Value;

    use super::*;
    use crate::Shard;

    #[test]
    fn overwrite_delete_and_modify_before_the_walk_are_copied() {
        let mut s = Shard::new(0, 1);
        for k in ["a", "b", "c"] {
            s.db_mut(0)
                .set(k.as_bytes(), Value::Str(Bytes::from("old")), None, 1);
        }
        let sink = Sink::new(1, 1);
        let enc: Encoder = Arc::new(|out: &mut Vec<u8>, e: &Entry| out.extend_from_slice(e.key()));
        assert!(s.snapshot_start(sink.clone(), enc));
        s.db_mut(0)
            .set(b"a", Value::Str(Bytes::from("new")), None, 2);
        assert_eq!(sink.cow_bytes(), 1, "SET");
        s.db_mut(0).delete(b"b", 2);
        assert_eq!(sink.cow_bytes(), 2, "DEL");
        drop(s.db_mut(0).modify(b"c", 2));
        assert_eq!(sink.cow_bytes(), 3, "modify");
        s.db_mut(0)
            .set(b"a", Value::Str(Bytes::from("newer")), None, 2);
        assert_eq!(sink.cow_bytes(), 3, "saved once");
    }
}
