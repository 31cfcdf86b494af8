//! The propagation stream: every write as Redis 7.0 propagates it, for the AOF (and replication).
//!
//! **The rule** (Redis's `call()`): a command is propagated verbatim when it changed the dataset —
//! the shard's change count (`Db::dirty`) moved while it ran — and not at all otherwise. A handler
//! overrides that through its context with an [`Override`]: [`Override::rewrite`] replaces the
//! command line (still only if it changed something: SET … EX → SET … PXAT, EXPIRE → PEXPIREAT),
//! [`Override::emit`] propagates these commands instead, whatever the count says (SPOP → SREM, a
//! served BLPOP → LPOP). The write path adds what no command asked for: a key deleted by lazy or
//! active expiry, or by eviction, is a DEL of its own ([`deleted`]).
//!
//! **Ordering.** Each record takes a number from one process-wide counter ([`push`]) while the
//! command still owns its keys: on its shard's thread, inside the turn that runs it, or — for a
//! command whose keys span shards — on the coordinator's thread while its locks are held. So two
//! commands touching a key are numbered in the order they took effect, and a cross-shard command is
//! one record. Records go to their thread's own buffer (a mutex nobody else takes but the drain);
//! [`drain`] collects every thread's and says below which number the stream is complete, and a
//! [`Stream`] puts them back in order, wraps a transaction's writes in MULTI/EXEC (none for a single
//! write, as Redis 7.0), and inserts SELECT where the database changes.
//!
//! **Cost when off**: one relaxed load per command ([`on`]).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

static ON: AtomicBool = AtomicBool::new(false);
/// The next record's number.
static SEQ: AtomicU64 = AtomicU64::new(1);
/// The next transaction's id (0: none).
static TXN: AtomicU64 = AtomicU64::new(1);
/// Every thread's buffer.
static BUFFERS: Mutex<Vec<Arc<Mutex<Vec<Rec>>>>> = Mutex::new(Vec::new());

thread_local! {
    static MINE: Arc<Mutex<Vec<Rec>>> = {
        let b: Arc<Mutex<Vec<Rec>>> = Arc::default();
        lock(&BUFFERS).push(b.clone());
        b
    };
    /// The override of the command running on this thread (a shard command runs in one go).
    static CURRENT: RefCell<Override> = RefCell::new(Override::default());
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the stream is on (someone consumes it: the AOF).
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Turns the stream on or off.
pub fn set_on(on: bool) {
    ON.store(on, Ordering::SeqCst);
}

/// One record of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub seq: u64,
    pub db: u32,
    /// The transaction it belongs to (0: none).
    pub txn: u64,
    /// Its command's place in its transaction (0 outside one): a transaction's shard parts run in
    /// shard order, its writes are propagated in command order, as Redis runs them.
    pub pos: u32,
    /// The command line; empty for the end of transaction `txn`.
    pub argv: Vec<Bytes>,
}

/// Appends a command to the stream, numbered now.
pub fn push(db: u32, txn: u64, argv: Vec<Bytes>) {
    push_at(db, txn, 0, argv)
}

/// [`push`] for the command at `pos` in transaction `txn`.
pub fn push_at(db: u32, txn: u64, pos: u32, argv: Vec<Bytes>) {
    MINE.with(|b| {
        let mut b = lock(b);
        let seq = SEQ.fetch_add(1, Ordering::SeqCst);
        b.push(Rec {
            seq,
            db,
            txn,
            pos,
            argv,
        });
    })
}

/// A new transaction id, for the records of one EXEC.
pub fn new_txn() -> u64 {
    TXN.fetch_add(1, Ordering::Relaxed)
}

/// Marks the end of transaction `txn`: every record of it is numbered already (called before the
/// transaction's locks are released).
pub fn end_txn(txn: u64) {
    push_at(0, txn, u32::MAX, Vec::new())
}

/// A key removed by expiry or eviction: a DEL of its own (Redis's propagateDeletion; UNLINK when
/// the matching lazyfree setting is on).
pub fn deleted(db: u32, key: &[u8], lazy: bool) {
    let cmd: &'static [u8] = if lazy { b"UNLINK" } else { b"DEL" };
    push(
        db,
        0,
        vec![Bytes::from_static(cmd), Bytes::copy_from_slice(key)],
    );
}

/// The current number: every record numbered below it is in some thread's buffer or drained.
pub fn current() -> u64 {
    SEQ.load(Ordering::SeqCst)
}

/// Moves every thread's records into `out`. Returns the number below which the stream is complete:
/// a record numbered lower is in `out` now or was drained before (a number is taken under its
/// buffer's lock, and the counter is read before any buffer is).
pub fn drain(out: &mut Vec<Rec>) -> u64 {
    let upto = SEQ.load(Ordering::SeqCst);
    let buffers: Vec<_> = lock(&BUFFERS).clone();
    for b in buffers {
        out.append(&mut lock(&b));
    }
    upto
}

/// How a command's propagated form differs from its command line.
#[derive(Default, Debug, Clone, PartialEq, Eq)]
pub struct Override {
    rewritten: Option<Vec<Bytes>>,
    emitted: Option<Vec<Vec<Bytes>>>,
}

impl Override {
    /// Propagates `argv` instead of the command line, if the command changed the dataset (Redis's
    /// rewriteClientCommandVector).
    pub fn rewrite(&mut self, argv: Vec<Bytes>) {
        self.rewritten = Some(argv);
    }

    /// Propagates `argv` (after what was emitted already) instead of the command line, whether or
    /// not anything was counted as changed (Redis's alsoPropagate with the command's own
    /// propagation prevented).
    pub fn emit(&mut self, argv: Vec<Bytes>) {
        self.emitted.get_or_insert_with(Vec::new).push(argv);
    }

    /// Propagates nothing for this command (Redis's preventCommandPropagation).
    pub fn suppress(&mut self) {
        self.emitted.get_or_insert_with(Vec::new);
    }

    /// True if nothing was asked.
    pub fn is_empty(&self) -> bool {
        self.rewritten.is_none() && self.emitted.is_none()
    }

    /// Records the command `args` that ran in database `db` (transaction `txn`), per the rule: its
    /// emitted commands, else its (rewritten) line if it `changed` the dataset.
    pub fn record(self, db: u32, txn: u64, args: &[Bytes], changed: bool) {
        self.record_at(db, txn, 0, args, changed)
    }

    /// [`record`](Self::record) for the command at `pos` in transaction `txn`.
    pub fn record_at(self, db: u32, txn: u64, pos: u32, args: &[Bytes], changed: bool) {
        match self.emitted {
            Some(list) => list
                .into_iter()
                .for_each(|argv| push_at(db, txn, pos, argv)),
            None if changed => push_at(
                db,
                txn,
                pos,
                self.rewritten.unwrap_or_else(|| args.to_vec()),
            ),
            None => {}
        }
    }
}

/// The running command's override (on a shard's thread, inside its turn): see [`Override`].
pub fn with_current<R>(f: impl FnOnce(&mut Override) -> R) -> R {
    CURRENT.with(|c| f(&mut c.borrow_mut()))
}

/// Takes the running command's override (after it ran), leaving none.
pub fn take_current() -> Override {
    CURRENT.with(|c| std::mem::take(&mut *c.borrow_mut()))
}

/// Adds `o` to the running command's override (a keyed command's, run on its shard).
pub fn install(o: Override) {
    if o.is_empty() {
        return;
    }
    with_current(|c| {
        if let Some(r) = o.rewritten {
            c.rewritten = Some(r);
        }
        if let Some(e) = o.emitted {
            c.emitted.get_or_insert_with(Vec::new).extend(e);
        }
    })
}

/// Puts drained records back in order: see the module docs.
#[derive(Default)]
pub struct Stream {
    pending: Vec<Rec>,
    ended: HashSet<u64>,
    groups: HashMap<u64, Vec<Rec>>,
    /// The database the consumer's stream has selected (None: none yet).
    pub db: Option<u32>,
}

impl Stream {
    /// A stream whose consumer has selected no database yet.
    pub fn new() -> Stream {
        Stream::default()
    }

    /// Adds drained records.
    pub fn feed(&mut self, recs: impl IntoIterator<Item = Rec>) {
        self.pending.extend(recs);
    }

    /// The number of the first record still held (None: none is).
    pub fn first_pending(&self) -> Option<u64> {
        self.pending.iter().map(|r| r.seq).min()
    }

    /// Whether records wait (a transaction not yet ended, or records above the last drain's mark).
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Emits, in order, every command numbered below `upto` that can go now (a transaction's
    /// records wait for its end and go together at the place of its last one): `out(argv)` for each,
    /// SELECT, MULTI and EXEC included.
    pub fn emit(&mut self, upto: u64, mut out: impl FnMut(&[Bytes])) {
        self.pending.sort_unstable_by_key(|r| r.seq);
        let ready = self.pending.partition_point(|r| r.seq < upto);
        for r in &self.pending[..ready] {
            if r.argv.is_empty() {
                self.ended.insert(r.txn);
            }
        }
        // Stop at the first record of a transaction not yet ended, and before any ended one whose
        // last record lies beyond the stop.
        let mut last: HashMap<u64, usize> = HashMap::new();
        let mut first: HashMap<u64, usize> = HashMap::new();
        for (i, r) in self.pending[..ready].iter().enumerate() {
            if r.txn != 0 && !r.argv.is_empty() {
                last.insert(r.txn, i);
                first.entry(r.txn).or_insert(i);
            }
        }
        let mut stop = self.pending[..ready]
            .iter()
            .position(|r| r.txn != 0 && !self.ended.contains(&r.txn))
            .unwrap_or(ready);
        loop {
            let cut = first
                .iter()
                .filter(|(t, &f)| f < stop && last[*t] >= stop)
                .map(|(_, &f)| f)
                .min();
            match cut {
                Some(f) => stop = f,
                None => break,
            }
        }
        let rest = self.pending.split_off(stop);
        let now = std::mem::replace(&mut self.pending, rest);
        for (i, r) in now.into_iter().enumerate() {
            if r.argv.is_empty() {
                // An end whose transaction propagated nothing, or whose records went already.
                if !first.contains_key(&r.txn) {
                    self.ended.remove(&r.txn);
                }
                continue;
            }
            if r.txn == 0 {
                self.select(r.db, &mut out);
                out(&r.argv);
                continue;
            }
            let txn = r.txn;
            self.groups.entry(txn).or_default().push(r);
            if last.get(&txn) == Some(&i) {
                let mut group = self.groups.remove(&txn).unwrap_or_default();
                group.sort_by_key(|r| (r.pos, r.seq));
                self.ended.remove(&txn);
                let wrap = group.len() > 1;
                if wrap {
                    self.select(group[0].db, &mut out);
                    out(&[Bytes::from_static(b"MULTI")]);
                }
                for r in &group {
                    self.select(r.db, &mut out);
                    out(&r.argv);
                }
                if wrap {
                    out(&[Bytes::from_static(b"EXEC")]);
                }
            }
        }
    }

    fn select(&mut self, db: u32, out: &mut impl FnMut(&[Bytes])) {
        if self.db != Some(db) {
            self.db = Some(db);
            out(&[
                Bytes::from_static(b"SELECT"),
                Bytes::from(db.to_string().into_bytes()),
            ]);
        }
    }
}

/// Appends `argv` to `out` as a RESP array of bulk strings (the AOF's and the replication
/// stream's form).
pub fn encode(argv: &[Bytes], out: &mut Vec<u8>) {
    out.push(b'*');
    out.extend_from_slice(argv.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n");
    for a in argv {
        out.push(b'$');
        out.extend_from_slice(a.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64, db: u32, txn: u64, words: &[&str]) -> Rec {
        Rec {
            seq,
            db,
            txn,
            pos: 0,
            argv: words
                .iter()
                .map(|w| Bytes::copy_from_slice(w.as_bytes()))
                .collect(),
        }
    }

    fn lines(s: &mut Stream, upto: u64) -> Vec<String> {
        let mut v = Vec::new();
        s.emit(upto, |argv| {
            v.push(
                argv.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" "),
            )
        });
        v
    }

    #[test]
    fn orders_by_number_and_selects() {
        let mut s = Stream::new();
        s.feed([
            rec(3, 1, 0, &["set", "b", "2"]),
            rec(1, 0, 0, &["set", "a", "1"]),
        ]);
        assert_eq!(
            lines(&mut s, 10),
            ["SELECT 0", "set a 1", "SELECT 1", "set b 2"]
        );
        s.feed([rec(11, 1, 0, &["del", "b"])]);
        assert_eq!(lines(&mut s, 12), ["del b"]);
    }

    #[test]
    fn keeps_what_is_not_complete() {
        let mut s = Stream::new();
        s.feed([rec(5, 0, 0, &["x"])]);
        assert!(lines(&mut s, 5).is_empty());
        assert_eq!(lines(&mut s, 6), ["SELECT 0", "x"]);
    }

    #[test]
    fn wraps_a_transaction_at_its_last_record() {
        let mut s = Stream::new();
        s.feed([
            rec(1, 0, 7, &["set", "a", "1"]),
            rec(2, 0, 0, &["del", "k"]),
            rec(3, 0, 7, &["set", "k", "2"]),
        ]);
        // Not ended: nothing from the transaction's first record on.
        assert!(lines(&mut s, 4).is_empty());
        s.feed([rec(4, 0, 7, &[]), rec(5, 0, 0, &["incr", "a"])]);
        assert_eq!(
            lines(&mut s, 6),
            ["SELECT 0", "del k", "MULTI", "set a 1", "set k 2", "EXEC", "incr a"]
        );
        assert!(!s.has_pending());
    }

    #[test]
    fn a_transaction_of_one_write_is_not_wrapped() {
        let mut s = Stream::new();
        s.feed([
            rec(1, 2, 9, &["set", "a", "1"]),
            rec(2, 0, 9, &[]),
            rec(3, 0, 10, &[]),
        ]);
        assert_eq!(lines(&mut s, 4), ["SELECT 2", "set a 1"]);
        assert!(!s.has_pending());
    }

    #[test]
    fn override_rules() {
        let args = [Bytes::from_static(b"set"), Bytes::from_static(b"k")];
        let mut o = Override::default();
        o.rewrite(vec![Bytes::from_static(b"SET")]);
        assert!(!o.is_empty());
        let mut o2 = Override::default();
        o2.suppress();
        // `record` pushes into this thread's buffer; check through a drain.
        let mut out = Vec::new();
        drain(&mut out);
        out.clear();
        o.clone().record(0, 0, &args, false);
        o.record(0, 0, &args, true);
        o2.record(0, 0, &args, true);
        Override::default().record(0, 0, &args, true);
        drain(&mut out);
        let mine: Vec<Vec<Bytes>> = out.into_iter().map(|r| r.argv).collect();
        assert!(mine.contains(&vec![Bytes::from_static(b"SET")]));
        assert!(mine.contains(&args.to_vec()));
    }
}
