//! Persistence: RDB snapshots (SAVE, BGSAVE, `save` points, the save at shutdown, DEBUG RELOAD),
//! loading the RDB file at start-up, and the state INFO persistence reports. See
//! docs/persistence.md.
//!
//! **A save** ([`start`]) locks every database of every shard (so no command is half run), starts
//! a snapshot on each shard at that one moment ([`strata_shard::snapshot`]), releases the locks and
//! hands the rest to a **writer thread**: it drives the shards' walks (posting them one slice at a
//! time, no more than [`PENDING_MAX`] bytes ahead of the file), writes the records grouped per
//! database (SELECTDB, RESIZEDB, then that database's keys from every shard) to
//! `dir`/temp-<id>.rdb, fsyncs it and renames it to `dbfilename`, as Redis's child does. There is
//! no child process: where Redis reports the child's pid, Strata reports the writer thread's id.
//!
//! **Loading** ([`load_file`]) reads the file item by item on the calling thread and sends the keys
//! to their shards in batches; expired keys are skipped, as a Redis master does. A corrupt or
//! truncated file is refused with the file name and the offset, and nothing of it is kept.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_channel::oneshot;
use futures_util::future::join_all;
use strata_core::Entry;
use strata_rdb::{Access, Item, WriteOptions};
use strata_shard::snapshot::{Encoder, Sink, STEP_KEYS};
use strata_shard::{now_ms, with_shard, Mode, Owner, ShardSet};

use crate::config::Config;
use crate::server_log;
use crate::state::ServerState;

/// What the request path checks before every command, in one load: [`GATE_LOADING`] while the
/// dataset loads, [`GATE_MISCONF`] while the last background save has failed.
static GATE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(0);
pub const GATE_LOADING: u8 = 1;
pub const GATE_MISCONF: u8 = 2;

/// See [`GATE`]: zero when persistence refuses nothing.
#[inline]
pub fn gate() -> u8 {
    GATE.load(Ordering::Relaxed)
}

fn set_gate(bit: u8, on: bool) {
    if on {
        GATE.fetch_or(bit, Ordering::SeqCst);
    } else {
        GATE.fetch_and(!bit, Ordering::SeqCst);
    }
}

/// Redis's reply to a command refused while the dataset loads.
pub const LOADING_ERROR: &str = "LOADING Redis is loading the dataset in memory";

/// Bytes of encoded records the shards may hold ahead of the writer (per shard).
pub const PENDING_MAX: usize = 2 << 20;

/// [`PENDING_MAX`] under `rdb-key-save-delay` (a writer made slow on purpose, as by a slow disk):
/// the walk stays close to it, so the keys written meanwhile are still unsaved and copied.
pub const PENDING_MAX_DELAYED: usize = 64 << 10;

/// The redis-ver aux field: the version whose format this is (redis-server 7.0 checks it).
pub const REDIS_VER: &str = "7.0.15";

/// Why a save could not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartError {
    /// A snapshot is already being written.
    InProgress,
}

/// What started a save: its log lines and whether it counts as a background save.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SAVE, DEBUG RELOAD, FLUSHALL, shutdown: the caller waits ("DB saved on disk").
    Foreground,
    /// BGSAVE or a save point ("Background saving started by ...").
    Background,
}

/// The persistence state INFO reports and the commands consult.
#[derive(Default)]
pub struct Status {
    /// Unix seconds of the last successful save (LASTSAVE); the start time before any.
    pub last_save: i64,
    /// The last background save succeeded (`rdb_last_bgsave_status`).
    pub last_bgsave_ok: bool,
    /// Seconds the last background save took (-1: none yet).
    pub last_bgsave_secs: i64,
    /// Saves started (`rdb_saves`), as Redis counts them.
    pub saves: u64,
    /// The shards' dirty counters summed at the start of the last successful save: changes since
    /// are `rdb_changes_since_last_save`.
    pub dirty_base: u64,
    /// The running save: when it started (unix ms), its kind, the dirty sum then, its sink.
    pub running: Option<Running>,
    /// BGSAVE SCHEDULE asked for a save while one ran.
    pub scheduled: bool,
    /// When the last save attempt ended (unix ms); a failed one is retried by the save points only
    /// 5 seconds later, as in Redis.
    pub last_try_ms: i64,
    pub last_try_ok: bool,
    /// The size of the last file written, bytes.
    pub last_size: u64,
    /// Copy-on-write records (keys the write path saved before changing them) of the last save.
    pub last_cow_bytes: u64,
}

pub struct Running {
    pub started_ms: i64,
    pub kind: Kind,
    pub dirty: u64,
    pub sink: Arc<Sink>,
    /// Keys written to the file so far, and in the dataset at the start
    /// (`current_save_keys_processed`, `current_save_keys_total`).
    pub keys_done: Arc<AtomicU64>,
    pub keys_total: u64,
    /// Stopped on purpose (FLUSHALL, shutdown), as Redis kills its child: not an error.
    pub killed: bool,
    /// Callers waiting for the end (SAVE, shutdown...).
    pub waiters: Vec<oneshot::Sender<Result<(), String>>>,
}

/// Loading at start-up (INFO loading_*).
#[derive(Default)]
pub struct Loading {
    pub active: AtomicBool,
    pub start_ms: AtomicU64,
    pub total_bytes: AtomicU64,
    pub loaded_bytes: AtomicU64,
    pub loaded_keys: AtomicU64,
    /// The last load's counts (`rdb_last_load_keys_loaded`, `rdb_last_load_keys_expired`).
    pub last_loaded: AtomicU64,
    pub last_expired: AtomicU64,
}

struct Persist {
    status: Mutex<Status>,
    loading: Loading,
}

static PERSIST: std::sync::LazyLock<Persist> = std::sync::LazyLock::new(|| Persist {
    status: Mutex::new(Status {
        last_bgsave_ok: true,
        last_bgsave_secs: -1,
        last_try_ok: true,
        ..Status::default()
    }),
    loading: Loading::default(),
});

/// The persistence state, locked.
pub fn status() -> MutexGuard<'static, Status> {
    PERSIST.status.lock().unwrap_or_else(|e| e.into_inner())
}

/// Loading's progress.
pub fn loading() -> &'static Loading {
    &PERSIST.loading
}

/// True while the dataset is being loaded: commands without the `loading` flag get -LOADING.
#[inline]
pub fn is_loading() -> bool {
    PERSIST.loading.active.load(Ordering::Relaxed)
}

/// Answers -LOADING from now until a load ends (set before the server listens when a file is
/// there to load).
pub fn mark_loading() {
    PERSIST.loading.active.store(true, Ordering::SeqCst);
    set_gate(GATE_LOADING, true);
}

/// Ends a load begun with [`mark_loading`] that did not go through [`load_file`] (the AOF's).
pub fn end_loading() {
    PERSIST.loading.active.store(false, Ordering::SeqCst);
    set_gate(GATE_LOADING, false);
}

/// Records the start time as the last save time (LASTSAVE before any save, as in Redis).
pub fn init(started_ms: i64) {
    status().last_save = started_ms / 1000;
}

/// The file a save writes and a start-up loads: `dir`/`dbfilename`.
pub fn rdb_path(config: &Config) -> PathBuf {
    let dir = config.get("dir").unwrap_or_default();
    let name = config.get("dbfilename").unwrap_or_default();
    if dir.is_empty() {
        PathBuf::from(name)
    } else {
        Path::new(&dir).join(name)
    }
}

/// The `save` points: (seconds, changes) pairs.
pub fn save_points(config: &Config) -> Vec<(i64, u64)> {
    let v = config.get("save").unwrap_or_default();
    let nums: Vec<i64> = v
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    nums.chunks_exact(2)
        .map(|p| (p[0], p[1].max(0) as u64))
        .collect()
}

/// Total of the shards' dirty counters.
pub async fn dirty_total(shards: &ShardSet) -> u64 {
    shards
        .call_all(|s| s.dbs().iter().map(|d| d.dirty()).sum::<u64>())
        .await
        .into_iter()
        .sum()
}

/// `rdb_changes_since_last_save` from a dirty total.
pub fn changes_since_save(dirty_total: u64) -> u64 {
    dirty_total.saturating_sub(status().dirty_base)
}

/// Whether writes are refused (-MISCONF): the last background save failed, `stop-writes-on-
/// bgsave-error` is on and save points exist, as Redis's writeCommandsDeniedByDiskError.
pub fn writes_refused(config: &Config) -> bool {
    let st = status();
    !st.last_bgsave_ok
        && config.get_bool("stop-writes-on-bgsave-error")
        && !config.get("save").unwrap_or_default().is_empty()
}

/// Redis's -MISCONF text.
pub const MISCONF: &str = "MISCONF Redis is configured to save RDB snapshots, but it's currently \
unable to persist to disk. Commands that may modify the data set are disabled, because this \
instance is configured to report errors during writes if RDB snapshotting fails \
(stop-writes-on-bgsave-error option). Please check the Redis logs for details about the RDB error.";

/// The record encoder for a save started now under `config`.
fn encoder(config: &Config) -> Encoder {
    let opts = WriteOptions {
        compress: config.get_bool("rdbcompression"),
        checksum: config.get_bool("rdbchecksum"),
    };
    let policy = config.get("maxmemory-policy").unwrap_or_default();
    let now = now_ms();
    let clock = strata_shard::lru_clock(now);
    let decay = config.get_i64("lfu-decay-time").max(0) as u32;
    let (lru, lfu) = (policy.contains("lru"), policy.contains("lfu"));
    Arc::new(move |out: &mut Vec<u8>, e: &Entry| {
        let access = if lru {
            Access::IdleSecs(strata_shard::db::lru_idle(clock, e.lru()) as u64)
        } else if lfu {
            Access::Freq(strata_shard::db::lfu_decayed(e.lru(), now, decay) as u8)
        } else {
            Access::None
        };
        strata_rdb::encode_key(out, e.key(), e.value(), e.expire(), access, opts);
    })
}

/// Starts a save of the whole dataset at this moment: locks every database, starts each shard's
/// snapshot, and hands the writing to a thread of its own. Returns a receiver that resolves with
/// the outcome once the file is in place.
pub async fn start(
    server: &Arc<ServerState>,
    owner: Owner,
    kind: Kind,
) -> Result<oneshot::Receiver<Result<(), String>>, StartError> {
    let (tx, rx) = oneshot::channel();
    let shards = server.shards.clone();
    let ndb = server.config.get_i64("databases").max(1) as usize;
    let sink = Sink::new(shards.len(), ndb);
    {
        let mut st = status();
        if st.running.is_some() {
            return Err(StartError::InProgress);
        }
        // Redis counts a background save when it starts (rdb_saves), killed or failed ones too;
        // of the others, only SAVE's ([`count_save`]).
        if kind == Kind::Background {
            st.saves += 1;
        }
        st.running = Some(Running {
            started_ms: now_ms(),
            kind,
            dirty: 0,
            sink: sink.clone(),
            keys_done: Arc::new(AtomicU64::new(0)),
            keys_total: 0,
            killed: false,
            waiters: vec![tx],
        });
    }
    let dbs: Vec<u32> = (0..ndb as u32).collect();
    let lock = shards.lock_dbs_as(owner, &dbs, Mode::Exclusive).await;
    let encode = encoder(&server.config);
    let parts = lock.shards().map(|shard| {
        let (sink, encode) = (sink.clone(), encode.clone());
        lock.run(shard, move |s| {
            s.snapshot_start(sink, encode);
            s.dbs().iter().map(|d| d.dirty()).sum::<u64>()
        })
    });
    let dirty: u64 = join_all(parts).await.into_iter().sum();
    lock.release();
    let keys_total: u64 = sink
        .lock()
        .shards
        .iter()
        .flat_map(|s| s.sizes.iter().map(|z| z.0))
        .sum();
    let keys_done = match status().running.as_mut() {
        Some(r) => {
            r.dirty = dirty;
            r.keys_total = keys_total;
            r.keys_done.clone()
        }
        None => Arc::new(AtomicU64::new(0)),
    };
    let job = WriteJob {
        sink,
        shards,
        ndb,
        path: rdb_path(&server.config),
        opts: WriteOptions {
            compress: server.config.get_bool("rdbcompression"),
            checksum: server.config.get_bool("rdbchecksum"),
        },
        key_delay_us: server.config.get_i64("rdb-key-save-delay"),
        keys_done,
        kind,
    };
    let spawned = std::thread::Builder::new()
        .name("strata-rdb-writer".into())
        .spawn(move || job.run());
    if let Err(e) = spawned {
        // No writer: the shards' snapshots must still end, so drive them here, cancelled.
        finish(Err(format!("can't start the RDB writer thread: {e}")), 0);
    }
    Ok(rx)
}

/// Runs a save and waits for it (SAVE, DEBUG RELOAD, FLUSHALL, shutdown). Logs "DB saved on disk"
/// on success.
pub async fn save(server: &Arc<ServerState>, owner: Owner) -> Result<(), String> {
    let rx = start(server, owner, Kind::Foreground)
        .await
        .map_err(|_| "Background save already in progress".to_string())?;
    rx.await
        .unwrap_or_else(|_| Err("the RDB writer stopped".into()))
}

/// Counts a SAVE command in `rdb_saves` (Redis counts SAVE and background saves, not the saves
/// FLUSHALL, DEBUG RELOAD or a shutdown make).
pub fn count_save() {
    status().saves += 1;
}

/// Cancels a running background save (FLUSHALL, as Redis kills its child): its file is not
/// written. Returns true if one was running.
pub fn cancel_background() -> bool {
    let mut st = status();
    match st.running.as_mut() {
        Some(r) if r.kind == Kind::Background => {
            r.killed = true;
            r.sink.cancel();
            true
        }
        _ => false,
    }
}

/// Waits (without blocking the thread) until no save runs.
pub async fn wait_idle() {
    while in_progress() {
        end_of_running().await;
    }
}

/// Resolves when the running save (if any) ends.
async fn end_of_running() {
    let rx = {
        let mut st = status();
        match st.running.as_mut() {
            Some(r) => {
                let (tx, rx) = oneshot::channel();
                r.waiters.push(tx);
                rx
            }
            None => return,
        }
    };
    let _ = rx.await;
}

static SHUTDOWN_PREPARED: AtomicBool = AtomicBool::new(false);

/// SHUTDOWN did the shutdown's work (its log line, the final save): the process's exit path
/// must not do it again.
pub fn shutdown_prepared() {
    SHUTDOWN_PREPARED.store(true, Ordering::SeqCst);
}

/// See [`shutdown_prepared`].
pub fn is_shutdown_prepared() -> bool {
    SHUTDOWN_PREPARED.load(Ordering::SeqCst)
}

/// True while a save is being written.
pub fn in_progress() -> bool {
    status().running.is_some()
}

/// The writer thread's work.
struct WriteJob {
    sink: Arc<Sink>,
    shards: ShardSet,
    ndb: usize,
    path: PathBuf,
    opts: WriteOptions,
    key_delay_us: i64,
    keys_done: Arc<AtomicU64>,
    kind: Kind,
}

/// The writer thread's id (what Strata reports where Redis reports its child's pid).
fn thread_id() -> i64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

impl WriteJob {
    fn run(self) {
        let tid = thread_id();
        if self.kind == Kind::Background {
            server_log!(Notice, "Background saving started by pid {tid}");
        }
        let started = Instant::now();
        let result = self.write(tid);
        if result.is_err() {
            self.sink.cancel();
        }
        // Whatever happened, every shard walks to the end so its marks are consistent.
        self.drive_to_end();
        let killed = status().running.as_ref().is_some_and(|r| r.killed);
        let result = match result {
            Ok(_) if killed => Err("cancelled".to_string()),
            Ok(size) => Ok(size),
            Err(e) => Err(e.to_string()),
        };
        let size = *result.as_ref().unwrap_or(&0);
        let result = result.map(|_| ());
        match (&result, self.kind) {
            (Ok(()), Kind::Background) => {
                server_log!(Notice, "DB saved on disk");
                server_log!(Notice, "Background saving terminated with success");
            }
            (Ok(()), Kind::Foreground) => server_log!(Notice, "DB saved on disk"),
            (Err(_), _) if killed => {
                server_log!(Warning, "Background saving terminated by signal 10")
            }
            (Err(e), Kind::Background) => {
                server_log!(Warning, "Write error saving DB on disk: {e}");
                server_log!(Warning, "Background saving error");
            }
            (Err(e), Kind::Foreground) => {
                server_log!(Warning, "Write error saving DB on disk: {e}")
            }
        }
        let _ = started;
        finish(result, size);
    }

    fn temp_path(&self) -> PathBuf {
        let dir = self.path.parent().unwrap_or(Path::new(""));
        dir.join(format!("temp-{}.rdb", thread_id()))
    }

    /// Writes the file; returns its size.
    fn write(&self, _tid: i64) -> io::Result<u64> {
        let tmp = self.temp_path();
        let file = File::create(&tmp).map_err(|e| {
            server_log!(
                Warning,
                "Failed opening the temp RDB file {} (in server root dir {}) for saving: {e}",
                tmp.display(),
                std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default()
            );
            e
        })?;
        let r = self.write_to(file, &tmp);
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }

    fn write_to(&self, file: File, tmp: &Path) -> io::Result<u64> {
        let mut w = strata_rdb::Writer::new(BufWriter::with_capacity(1 << 20, file), self.opts)?;
        w.aux("redis-ver", REDIS_VER.as_bytes())?;
        w.aux("redis-bits", b"64")?;
        w.aux("ctime", (now_ms() / 1000).to_string().as_bytes())?;
        w.aux(
            "used-mem",
            strata_shard::memory::used_memory().to_string().as_bytes(),
        )?;
        w.aux("aof-base", b"0")?;
        let sizes: Vec<(u64, u64)> = {
            let st = self.sink.lock();
            (0..self.ndb)
                .map(|db| {
                    st.shards
                        .iter()
                        .fold((0, 0), |(k, e), s| (k + s.sizes[db].0, e + s.sizes[db].1))
                })
                .collect()
        };
        for (db, &(keys, expires)) in sizes.iter().enumerate() {
            if keys > 0 {
                w.select_db(db as u32, keys, expires)?;
            }
            loop {
                if self.sink.is_cancelled() {
                    return Err(io::Error::other("cancelled"));
                }
                let (chunks, finished) = self.next_chunks(db);
                for (c, n) in &chunks {
                    w.records(c)?;
                    self.delay(*n)?;
                    self.keys_done.fetch_add(*n as u64, Ordering::Relaxed);
                }
                if finished && chunks.is_empty() {
                    break;
                }
            }
        }
        let mut out = w.finish()?;
        out.flush()?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        drop(file);
        std::fs::rename(tmp, &self.path).inspect_err(|e| {
            server_log!(
                Warning,
                "Error moving temp DB file {} on the final destination {} (in server root dir {}): {e}",
                tmp.display(),
                self.path.display(),
                std::env::current_dir()
                    .map(|d| d.display().to_string())
                    .unwrap_or_default()
            );
        })?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(size)
    }

    /// Keys per walk step: fewer under `rdb-key-save-delay`, so the walk stays close to a writer
    /// made slow on purpose.
    fn step_keys(&self) -> usize {
        if self.key_delay_us > 0 {
            128
        } else {
            STEP_KEYS
        }
    }

    /// rdb-key-save-delay: waits the delay once per key of `n`.
    fn delay(&self, n: usize) -> io::Result<()> {
        if self.key_delay_us <= 0 || n == 0 {
            return Ok(());
        }
        // One sleep per key, as Redis's child does (so the timer slack adds up the same way),
        // looking for a cancel between keys.
        let each = Duration::from_micros(self.key_delay_us as u64);
        for _ in 0..n {
            if self.sink.is_cancelled() {
                return Err(io::Error::other("cancelled"));
            }
            std::thread::sleep(each);
        }
        Ok(())
    }

    /// Posts walk steps where needed and takes the chunks of database `db` that are ready
    /// (waiting a little if none is). Returns them with whether every shard has walked `db`.
    fn next_chunks(&self, db: usize) -> (Vec<(Vec<u8>, usize)>, bool) {
        let limit = if self.key_delay_us > 0 {
            PENDING_MAX_DELAYED
        } else {
            PENDING_MAX
        };
        let mut st = self.sink.lock();
        loop {
            let now = Instant::now();
            let mut post = Vec::new();
            for (i, s) in st.shards.iter_mut().enumerate() {
                let ahead = if s.walked > db {
                    s.bytes
                } else {
                    s.chunks[db].iter().map(|c| c.0.len()).sum()
                };
                if !s.done && !s.busy && ahead < limit && s.not_before.is_none_or(|t| now >= t) {
                    s.busy = true;
                    post.push(i);
                }
            }
            let mut chunks = Vec::new();
            for s in st.shards.iter_mut() {
                while let Some(c) = s.chunks[db].pop_front() {
                    s.bytes -= c.0.len();
                    chunks.push(c);
                }
            }
            let finished = st.shards.iter().all(|s| s.walked > db || s.done);
            if !post.is_empty() {
                drop(st);
                let keys = self.step_keys();
                for i in post {
                    self.shards
                        .post(i, Box::new(move || with_shard(|s| s.snapshot_step(keys))));
                }
                if !chunks.is_empty() || finished {
                    return (chunks, finished);
                }
                st = self.sink.lock();
                continue;
            }
            if !chunks.is_empty() || finished || self.sink.is_cancelled() {
                return (chunks, finished);
            }
            // Until a shard reports, or the next may take a step.
            let next = st
                .shards
                .iter()
                .filter(|s| !s.done && !s.busy)
                .filter_map(|s| s.not_before)
                .min()
                .map_or(Duration::from_millis(100), |t| {
                    t.saturating_duration_since(Instant::now())
                        .clamp(Duration::from_micros(50), Duration::from_millis(100))
                });
            st = self.sink.wait(st, next);
        }
    }

    /// Walks every shard to the end (after the file is written, or cancelled).
    fn drive_to_end(&self) {
        let mut st = self.sink.lock();
        loop {
            if st.shards.iter().all(|s| s.done) {
                return;
            }
            let mut post = Vec::new();
            for (i, s) in st.shards.iter_mut().enumerate() {
                // Nothing more will be written: drop what is pending.
                for q in s.chunks.iter_mut() {
                    q.clear();
                }
                s.bytes = 0;
                if !s.done && !s.busy {
                    s.busy = true;
                    post.push(i);
                }
            }
            drop(st);
            for i in post {
                self.shards
                    .post(i, Box::new(|| with_shard(|s| s.snapshot_step(STEP_KEYS))));
            }
            st = self.sink.lock();
            if !st.shards.iter().all(|s| s.done) {
                st = self.sink.wait(st, Duration::from_millis(100));
            }
        }
    }
}

/// Records the end of the running save and tells its waiters.
fn finish(result: Result<(), String>, size: u64) {
    let mut st = status();
    let Some(run) = st.running.take() else {
        return;
    };
    let now = now_ms();
    st.last_try_ms = now;
    st.last_try_ok = result.is_ok();
    st.last_cow_bytes = run.sink.cow_bytes();
    if result.is_ok() {
        st.last_save = now / 1000;
        st.dirty_base = st.dirty_base.max(run.dirty);
        st.last_size = size;
    }
    if run.kind == Kind::Background {
        // A cancelled save (FLUSHALL) is not an error, as Redis's killed child is not.
        st.last_bgsave_ok = result.is_ok() || run.killed;
        st.last_bgsave_secs = (now - run.started_ms) / 1000;
    } else if result.is_ok() {
        st.last_bgsave_ok = true;
    }
    set_gate(GATE_MISCONF, !st.last_bgsave_ok);
    drop(st);
    for w in run.waiters {
        let _ = w.send(result.clone());
    }
}

/// Makes the changes counted so far the base of `rdb_changes_since_last_save` (after a load, or
/// a FLUSHALL that saved).
pub fn reset_dirty(total: u64) {
    status().dirty_base = total;
}

/// The server's cron for persistence (called every 100 ms on one shard thread): starts a
/// background save when a `save` point is reached or one was scheduled.
pub async fn cron(server: &Arc<ServerState>) {
    if is_loading() || server.shutting_down.load(Ordering::Relaxed) {
        return;
    }
    let points = save_points(&server.config);
    let (scheduled, last_save, last_try_ms, last_try_ok, running) = {
        let st = status();
        (
            st.scheduled,
            st.last_save,
            st.last_try_ms,
            st.last_try_ok,
            st.running.is_some(),
        )
    };
    if running || (points.is_empty() && !scheduled) {
        return;
    }
    let now = now_ms();
    let mut due = scheduled;
    if !due {
        let changes = changes_since_save(dirty_total(&server.shards).await);
        // After a failed attempt, wait 5 seconds before the next (Redis's
        // CONFIG_BGSAVE_RETRY_DELAY).
        let may_retry = last_try_ok || now - last_try_ms > 5000;
        for (secs, n) in points {
            if changes >= n && now / 1000 - last_save > secs && may_retry {
                server_log!(Notice, "{n} changes in {secs} seconds. Saving...");
                due = true;
                break;
            }
        }
    }
    if due {
        status().scheduled = false;
        let _ = start(server, strata_shard::new_owner(), Kind::Background).await;
    }
}

/// How a load went.
pub struct Loaded {
    pub keys: u64,
    pub expired: u64,
}

/// Why a load failed: the log lines Redis writes for it.
pub enum LoadError {
    /// No file: start empty.
    NotFound,
    /// The file could not be opened or read (Redis: "Fatal error loading the DB: ...").
    Open(io::Error),
    /// Bad content: the message, with the file and the offset.
    Bad(strata_rdb::Error),
}

/// Batches of keys in flight to the shards during a load, at most.
const LOAD_BATCHES_IN_FLIGHT: usize = 64;
/// Keys per batch sent to a shard.
const LOAD_BATCH: usize = 1024;

/// Loads `path` into the shards (empty, or emptied by the caller), on the calling thread, which
/// must not be a shard thread. Keys whose TTL has passed are skipped. On an error, whatever was
/// already loaded is flushed again: never a partial dataset.
pub fn load_file(server: &Arc<ServerState>, path: &Path) -> Result<Loaded, LoadError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            PERSIST.loading.active.store(false, Ordering::SeqCst);
            set_gate(GATE_LOADING, false);
            return Err(match e.kind() {
                io::ErrorKind::NotFound => LoadError::NotFound,
                _ => LoadError::Open(e),
            });
        }
    };
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let l = loading();
    l.start_ms.store(now_ms() as u64, Ordering::Relaxed);
    l.total_bytes.store(total, Ordering::Relaxed);
    l.loaded_bytes.store(0, Ordering::Relaxed);
    l.loaded_keys.store(0, Ordering::Relaxed);
    l.active.store(true, Ordering::SeqCst);
    set_gate(GATE_LOADING, true);
    let r = load_from(server, BufReader::with_capacity(1 << 20, file));
    set_gate(GATE_LOADING, false);
    l.active.store(false, Ordering::SeqCst);
    if r.is_err() {
        flush_all(server);
    }
    r
}

/// Empties every database of every shard (a failed load, DEBUG RELOAD), from a non-shard thread.
pub fn flush_all(server: &Arc<ServerState>) {
    let ndb = server.config.get_i64("databases").max(1) as usize;
    let (tx, rx) = std::sync::mpsc::channel();
    for i in 0..server.shards.len() {
        let tx = tx.clone();
        server.shards.post(
            i,
            Box::new(move || {
                with_shard(|s| {
                    let dbs: Vec<usize> = (0..ndb).collect();
                    drop(s.flush(&dbs));
                });
                let _ = tx.send(());
            }),
        );
    }
    drop(tx);
    while rx.recv().is_ok() {}
}

fn load_from<R: io::Read>(server: &Arc<ServerState>, input: R) -> Result<Loaded, LoadError> {
    let mut reader = strata_rdb::Reader::new(input).map_err(LoadError::Bad)?;
    let shards = &server.shards;
    let ndb = server.config.get_i64("databases").max(1) as u32;
    let delay = server.config.get_i64("key-load-delay");
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut batches: Vec<Vec<(u32, strata_rdb::LoadedKey)>> =
        (0..shards.len()).map(|_| Vec::new()).collect();
    let send = |shard: usize, batch: Vec<(u32, strata_rdb::LoadedKey)>| {
        while in_flight.load(Ordering::Acquire) >= LOAD_BATCHES_IN_FLIGHT {
            std::thread::sleep(Duration::from_micros(200));
        }
        in_flight.fetch_add(1, Ordering::AcqRel);
        let done = in_flight.clone();
        shards.post(
            shard,
            Box::new(move || {
                with_shard(|s| {
                    let now = now_ms();
                    for (db, k) in batch {
                        s.db_mut(db as usize).set(&k.key, k.value, k.expire_ms, now);
                    }
                });
                done.fetch_sub(1, Ordering::AcqRel);
            }),
        );
    };
    let (mut db, mut keys, mut expired) = (0u32, 0u64, 0u64);
    let now = now_ms();
    loop {
        let item = reader.next_item().map_err(LoadError::Bad)?;
        loading()
            .loaded_bytes
            .store(reader.offset(), Ordering::Relaxed);
        match item {
            None => break,
            Some(Item::SelectDb(n)) => {
                if n >= ndb {
                    return Err(LoadError::Bad(strata_rdb::Error {
                        offset: reader.offset(),
                        kind: strata_rdb::ErrorKind::Corrupt(format!(
                            "FATAL: Data file was created with a Redis server configured to \
                             handle more than {ndb} databases. Exiting"
                        )),
                    }));
                }
                db = n;
            }
            Some(Item::Aux { .. }) | Some(Item::ResizeDb { .. }) => {}
            Some(Item::Key(k)) => {
                if k.expire_ms.is_some_and(|at| at <= now) {
                    expired += 1;
                    continue;
                }
                keys += 1;
                loading().loaded_keys.store(keys, Ordering::Relaxed);
                if delay > 0 {
                    std::thread::sleep(Duration::from_micros(delay as u64));
                }
                let shard = shards.shard_of_key(&k.key);
                batches[shard].push((db, k));
                if batches[shard].len() >= LOAD_BATCH {
                    send(shard, std::mem::take(&mut batches[shard]));
                }
            }
        }
    }
    for (shard, b) in batches.into_iter().enumerate() {
        if !b.is_empty() {
            send(shard, b);
        }
    }
    while in_flight.load(Ordering::Acquire) > 0 {
        std::thread::sleep(Duration::from_micros(200));
    }
    loading().last_loaded.store(keys, Ordering::Relaxed);
    loading().last_expired.store(expired, Ordering::Relaxed);
    Ok(Loaded { keys, expired })
}

/// Loads the dataset at start-up, logging as Redis does. Returns false if the server must exit
/// (the file is unreadable or corrupt); a missing file is an empty dataset.
pub fn load_at_startup(server: &Arc<ServerState>) -> bool {
    let path = rdb_path(&server.config);
    let began = Instant::now();
    match load_file(server, &path) {
        Ok(l) => {
            server_log!(
                Notice,
                "Done loading RDB, keys loaded: {}, keys expired: {}.",
                l.keys,
                l.expired
            );
            server_log!(
                Notice,
                "DB loaded from disk: {:.3} seconds",
                began.elapsed().as_secs_f64()
            );
            true
        }
        Err(LoadError::NotFound) => true,
        Err(LoadError::Open(e)) => {
            server_log!(
                Warning,
                "Fatal error loading the DB: {}. Exiting.",
                describe_io(&e)
            );
            false
        }
        Err(LoadError::Bad(strata_rdb::Error {
            kind: strata_rdb::ErrorKind::Io(e),
            ..
        })) => {
            server_log!(
                Warning,
                "Fatal error loading the DB: {}. Exiting.",
                describe_io(&e)
            );
            false
        }
        Err(LoadError::Bad(e)) => {
            log_bad_file(&path, &e);
            false
        }
    }
}

fn describe_io(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::PermissionDenied => "Permission denied".into(),
        _ => e.to_string(),
    }
}

/// Redis's lines for a file it cannot load, naming the file and the offset.
pub fn log_bad_file(path: &Path, e: &strata_rdb::Error) {
    use strata_rdb::ErrorKind as K;
    match &e.kind {
        K::Truncated => server_log!(
            Warning,
            "Short read or OOM loading DB. Unrecoverable error, aborting now."
        ),
        K::Checksum { expected, computed } => {
            server_log!(
                Warning,
                "Wrong RDB checksum expected: ({expected:016x}) got ({computed:016x}). Aborting now."
            );
        }
        _ => {}
    }
    let reason = match &e.kind {
        K::Checksum { .. } => "RDB CRC error".to_string(),
        K::Truncated => "Unexpected EOF reading RDB file".to_string(),
        _ => e.to_string(),
    };
    server_log!(
        Warning,
        "Internal error in RDB reading offset {}, file {} -> {reason}",
        e.offset,
        path.display()
    );
    server_log!(
        Warning,
        "Terminating server after rdb file reading failure."
    );
}
