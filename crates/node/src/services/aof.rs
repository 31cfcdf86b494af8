//! The append-only file: Redis 7's multi-part layout, fed by the propagation stream.
//!
//! Layout (`dir`/`appenddirname`, as Redis 7.0): a manifest `<appendfilename>.manifest` naming a
//! base file (`<appendfilename>.<n>.base.aof`, or `.rdb`) and the incremental files
//! (`<appendfilename>.<n>.incr.aof`), one line each (`file <name> seq <n> type b|i`). The last
//! incremental file is the one written.
//!
//! **The writer** is one thread: it drains every shard's propagation buffer (see
//! `strata_shard::propagate`), puts the records in order, writes them as RESP commands and fsyncs
//! per `appendfsync`: `always` after every batch it writes (so the fsyncs of all threads are
//! grouped: one per batch, however many clients wait on it), `everysec` once a second, `no`
//! never. [`durable`] tells a connection when everything numbered before a mark is on disk:
//! with `always`, a reply waits for that before it leaves.

use std::fs::{File, OpenOptions};
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use strata_shard::propagate::{self, Stream};

use crate::config::Config;
use crate::server_log;

/// Every record numbered below it is written (and, per the policy, synced).
static DURABLE: AtomicU64 = AtomicU64::new(0);
/// Whether the writer runs.
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Connections waiting for a mark to be durable.
static WAITERS: Mutex<Vec<(u64, Waker)>> = Mutex::new(Vec::new());
/// Wakes the writer early (a waiter arrived).
static KICK: (Mutex<bool>, Condvar) = (Mutex::new(false), Condvar::new());
/// What DEBUG LOADAOF runs (on a thread of its own): empties the dataset and loads the AOF
/// again through the request path; false if the load failed. Set by the server, which owns the
/// loader (`strata_server::aof_load`).
static RELOADER: std::sync::OnceLock<fn(&std::sync::Arc<crate::state::ServerState>) -> bool> =
    std::sync::OnceLock::new();

/// Installs DEBUG LOADAOF's loader.
pub fn set_reloader(f: fn(&std::sync::Arc<crate::state::ServerState>) -> bool) {
    let _ = RELOADER.set(f);
}

/// DEBUG LOADAOF's loader, if the server installed one.
pub fn reloader() -> Option<fn(&std::sync::Arc<crate::state::ServerState>) -> bool> {
    RELOADER.get().copied()
}

/// DEBUG AOF-FLUSH-SLEEP: µs the writer sleeps before each write.
static FLUSH_SLEEP_US: AtomicU64 = AtomicU64::new(0);

/// Applies DEBUG AOF-FLUSH-SLEEP.
pub fn set_flush_sleep(usec: u64) {
    FLUSH_SLEEP_US.store(usec, Ordering::Relaxed);
}

/// Counters for INFO persistence.
static STATS: Mutex<AofStats> = Mutex::new(AofStats {
    current_size: 0,
    base_size: 0,
    last_write_ok: true,
    delayed_fsync: 0,
    last_error: String::new(),
});

/// What INFO persistence reports of the AOF.
#[derive(Clone, Debug)]
pub struct AofStats {
    pub current_size: u64,
    pub base_size: u64,
    pub last_write_ok: bool,
    pub delayed_fsync: u64,
    pub last_error: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether replies wait for their writes to be on disk (`appendonly yes` and `appendfsync
/// always`).
#[inline]
pub fn sync_replies() -> bool {
    RUNNING.load(Ordering::Relaxed) && crate::settings::aof_fsync() == 2
}

/// Whether the AOF is on.
pub fn enabled() -> bool {
    RUNNING.load(Ordering::Relaxed)
}

/// INFO persistence's AOF counters.
pub fn stats() -> AofStats {
    lock(&STATS).clone()
}

/// INFO persistence's AOF fields, in Redis 7.0's order (the size fields only while it is on).
pub fn info_fields() -> Vec<(&'static str, String)> {
    let on = enabled();
    let st = stats();
    let mut v: Vec<(&'static str, String)> = vec![
        ("aof_enabled", u8::from(on).to_string()),
        ("aof_rewrite_in_progress", "0".into()),
        ("aof_rewrite_scheduled", "0".into()),
        ("aof_last_rewrite_time_sec", "-1".into()),
        ("aof_current_rewrite_time_sec", "-1".into()),
        ("aof_last_bgrewrite_status", "ok".into()),
        ("aof_rewrites", "0".into()),
        ("aof_rewrites_consecutive_failures", "0".into()),
        (
            "aof_last_write_status",
            if st.last_write_ok { "ok" } else { "err" }.into(),
        ),
        ("aof_last_cow_size", "0".into()),
        ("module_fork_in_progress", "0".into()),
        ("module_fork_last_cow_size", "0".into()),
    ];
    if on {
        v.push(("aof_current_size", st.current_size.to_string()));
        v.push(("aof_base_size", st.base_size.to_string()));
        v.push(("aof_pending_rewrite", "0".into()));
        v.push(("aof_buffer_length", "0".into()));
        v.push(("aof_pending_bio_fsync", "0".into()));
        v.push(("aof_delayed_fsync", st.delayed_fsync.to_string()));
    }
    v
}

/// Resolves once every record numbered below `mark` (a [`propagate::current`] read after the
/// writes) is written and synced.
pub fn durable(mark: u64) -> Durable {
    Durable { mark }
}

/// See [`durable`].
pub struct Durable {
    mark: u64,
}

impl Future for Durable {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if DURABLE.load(Ordering::SeqCst) >= self.mark || !RUNNING.load(Ordering::SeqCst) {
            return Poll::Ready(());
        }
        lock(&WAITERS).push((self.mark, cx.waker().clone()));
        // Checked again under the registration: the writer publishes, then takes the list.
        if DURABLE.load(Ordering::SeqCst) >= self.mark {
            return Poll::Ready(());
        }
        kick();
        Poll::Pending
    }
}

fn kick() {
    let (m, cv) = &KICK;
    *lock(m) = true;
    cv.notify_one();
}

/// The files of one AOF directory, as its manifest lists them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    /// The base file and its sequence number.
    pub base: Option<(String, u64)>,
    /// Incremental files, oldest first, with their sequence numbers.
    pub incr: Vec<(String, u64)>,
    /// History files (type h) kept until deleted.
    pub history: Vec<(String, u64)>,
}

impl Manifest {
    /// Parses a manifest's text with Redis's rules and error texts (aofLoadManifestFromFile):
    /// `#` lines skipped, a blank line, a line of fewer than six words or an odd number of them, or
    /// one missing `file`, `seq` or `type` is "Invalid AOF manifest file format"; a second base,
    /// an incremental sequence number not above the last, an unknown type, a line over 1024
    /// bytes, an empty file each have their own message.
    pub fn parse(text: &[u8]) -> Result<Manifest, String> {
        const MAX_LINE: usize = 1024;
        let mut m = Manifest::default();
        if text.is_empty() {
            return Err("Found an empty AOF manifest".into());
        }
        let mut max_incr = 0u64;
        let mut rest = text;
        while !rest.is_empty() {
            let (line, next, complete) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], &rest[i + 1..], true),
                None => (rest, &rest[rest.len()..], false),
            };
            rest = next;
            if line.first() == Some(&b'#') {
                continue;
            }
            if !complete || line.len() >= MAX_LINE {
                return Err("The AOF manifest file contains too long line".into());
            }
            let trimmed = line.trim_ascii();
            let invalid = || "Invalid AOF manifest file format".to_string();
            if trimmed.is_empty() {
                return Err(invalid());
            }
            let words = crate::config::split_args(trimmed).ok_or_else(invalid)?;
            if words.len() < 6 || words.len() % 2 != 0 {
                return Err(invalid());
            }
            let (mut name, mut seq, mut kind) = (None, 0u64, None);
            for kv in words.chunks(2) {
                let key = String::from_utf8_lossy(&kv[0]).to_ascii_lowercase();
                match key.as_str() {
                    "file" => {
                        let n = String::from_utf8_lossy(&kv[1]).into_owned();
                        if n.contains('/') {
                            return Err("File can't be a path, just a filename".into());
                        }
                        name = Some(n);
                    }
                    "seq" => seq = crate::args::c_strtol(&kv[1]).max(0) as u64,
                    "type" => kind = kv[1].first().copied(),
                    _ => {}
                }
            }
            let (Some(name), true, Some(kind)) = (name, seq != 0, kind) else {
                return Err(invalid());
            };
            match kind {
                b'b' => {
                    if m.base.is_some() {
                        return Err("Found duplicate base file information".into());
                    }
                    m.base = Some((name, seq));
                }
                b'h' => m.history.push((name, seq)),
                b'i' => {
                    if seq <= max_incr {
                        return Err("Found a non-monotonic sequence number".into());
                    }
                    max_incr = seq;
                    m.incr.push((name, seq));
                }
                _ => return Err("Unknown AOF file type".into()),
            }
        }
        Ok(m)
    }

    /// The manifest's text, as Redis writes it.
    pub fn text(&self) -> String {
        let mut s = String::new();
        if let Some((name, seq)) = &self.base {
            s.push_str(&format!("file {} seq {seq} type b\n", quoted(name)));
        }
        for (name, seq) in &self.history {
            s.push_str(&format!("file {} seq {seq} type h\n", quoted(name)));
        }
        for (name, seq) in &self.incr {
            s.push_str(&format!("file {} seq {seq} type i\n", quoted(name)));
        }
        s
    }
}

/// A file name as Redis writes it in a manifest: as is, or quoted (sdscatrepr) when it holds a
/// space or a character that needs escaping.
fn quoted(name: &str) -> String {
    if !name
        .bytes()
        .any(|b| b == b' ' || b == b'"' || b == b'\\' || !(0x21..0x7f).contains(&b))
    {
        return name.to_string();
    }
    let mut q = String::from("\"");
    for b in name.bytes() {
        match b {
            b'\\' => q.push_str("\\\\"),
            b'"' => q.push_str("\\\""),
            b'\n' => q.push_str("\\n"),
            b'\r' => q.push_str("\\r"),
            b'\t' => q.push_str("\\t"),
            0x20..=0x7e => q.push(b as char),
            _ => q.push_str(&format!("\\x{b:02x}")),
        }
    }
    q.push('"');
    q
}

/// Where the AOF lives: `dir`/`appenddirname`, and the base name of its files.
pub fn paths(config: &Config) -> (PathBuf, String) {
    let dir = config.get("dir").unwrap_or_else(|| ".".into());
    let sub = config
        .get("appenddirname")
        .unwrap_or_else(|| "appendonlydir".into());
    let name = config
        .get("appendfilename")
        .unwrap_or_else(|| "appendonly.aof".into());
    (Path::new(&dir).join(sub), name)
}

/// An AOF of Redis before 7.0 (`dir`/`appendfilename`, no manifest) becomes the base of a
/// multi-part AOF, as Redis 7.0 upgrades it (aofUpgradePrepare): moved into the AOF directory and
/// named in a new manifest.
pub fn upgrade_old_file(config: &Config) -> Result<(), String> {
    let (dir, name) = paths(config);
    let old = dir.parent().unwrap_or(Path::new(".")).join(&name);
    if !old.is_file() || read_manifest(config)?.is_some() {
        return Ok(());
    }
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        )
    })?;
    std::fs::rename(&old, dir.join(&name))
        .map_err(|e| format!("Error trying to rename the old AOF file {name} into dir: {e}"))?;
    let m = Manifest {
        base: Some((name.clone(), 1)),
        ..Manifest::default()
    };
    write_manifest(&dir, &name, &m).map_err(|e| format!("Can't write the AOF manifest: {e}"))?;
    server_log!(
        Notice,
        "Successfully migrated an old-style AOF into the AOF directory"
    );
    Ok(())
}

/// Reads the directory's manifest, if there is one.
pub fn read_manifest(config: &Config) -> Result<Option<Manifest>, String> {
    let (dir, name) = paths(config);
    let path = dir.join(format!("{name}.manifest"));
    match std::fs::read(&path) {
        Ok(text) => Manifest::parse(&text).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "Fatal error: can't open the AOF manifest {} for reading: {e}",
            path.display()
        )),
    }
}

fn write_manifest(dir: &Path, name: &str, m: &Manifest) -> std::io::Result<()> {
    let tmp = dir.join(format!("temp-{name}.manifest"));
    let mut f = File::create(&tmp)?;
    f.write_all(m.text().as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(format!("{name}.manifest")))?;
    File::open(dir)?.sync_all()
}

/// Starts appending: opens (or creates, with an empty base) the directory's files and starts the
/// writer. From here on every write is propagated to it.
pub fn start(config: &Config) -> Result<(), String> {
    let (dir, name) = paths(config);
    std::fs::create_dir_all(&dir).map_err(|e| {
        format!(
            "Can't open or create append-only dir {}: {e}",
            dir.display()
        )
    })?;
    let mut m = read_manifest(config)?.unwrap_or_default();
    let mut changed = false;
    if m.base.is_none() && m.incr.is_empty() {
        // A new AOF of an empty dataset: an empty base file in AOF format.
        let base = format!("{name}.1.base.aof");
        File::create(dir.join(&base))
            .and_then(|f| f.sync_all())
            .map_err(|e| format!("Can't create the AOF base file {base}: {e}"))?;
        m.base = Some((base, 1));
        changed = true;
    }
    if m.incr.is_empty() {
        let seq = 1;
        m.incr.push((format!("{name}.{seq}.incr.aof"), seq));
        changed = true;
    }
    let incr = m.incr.last().map(|(n, _)| n.clone()).unwrap_or_default();
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(&incr))
        .map_err(|e| format!("Can't open the append-only file {incr}: {e}"))?;
    if changed {
        write_manifest(&dir, &name, &m)
            .map_err(|e| format!("Can't write the AOF manifest: {e}"))?;
    }
    {
        let mut st = lock(&STATS);
        st.base_size = m
            .base
            .as_ref()
            .and_then(|(b, _)| std::fs::metadata(dir.join(b)).ok())
            .map_or(0, |md| md.len());
        st.current_size = st.base_size + file.metadata().map_or(0, |md| md.len());
    }
    propagate::set_on(true);
    RUNNING.store(true, Ordering::SeqCst);
    std::thread::Builder::new()
        .name("strata-aof".into())
        .spawn(move || writer(file))
        .map_err(|e| format!("Can't start the AOF writer: {e}"))?;
    Ok(())
}

/// The writer thread: see the module docs.
fn writer(mut file: File) {
    let mut stream = Stream::new();
    let mut recs = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut last_sync = Instant::now();
    let mut unsynced = false;
    loop {
        {
            let (m, cv) = &KICK;
            let mut kicked = lock(m);
            if !*kicked {
                kicked = cv
                    .wait_timeout(kicked, Duration::from_millis(10))
                    .map(|(g, _)| g)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
            *kicked = false;
        }
        let upto = propagate::drain(&mut recs);
        stream.feed(recs.drain(..));
        stream.emit(upto, |argv: &[Bytes]| propagate::encode(argv, &mut buf));
        if !buf.is_empty() {
            let pause = FLUSH_SLEEP_US.load(Ordering::Relaxed);
            if pause > 0 {
                std::thread::sleep(Duration::from_micros(pause));
            }
            match file.write_all(&buf) {
                Ok(()) => {
                    let mut st = lock(&STATS);
                    st.current_size += buf.len() as u64;
                    st.last_write_ok = true;
                }
                Err(e) => {
                    server_log!(
                        Warning,
                        "Error writing to the AOF file: {e}. Exiting to avoid data loss."
                    );
                    let mut st = lock(&STATS);
                    st.last_write_ok = false;
                    st.last_error = e.to_string();
                    // Redis exits rather than acknowledge writes it could not log.
                    std::process::exit(1);
                }
            }
            buf.clear();
            unsynced = true;
        }
        let policy = crate::settings::aof_fsync();
        if unsynced
            && (policy == 2 || (policy == 1 && last_sync.elapsed() >= Duration::from_secs(1)))
        {
            if let Err(e) = file.sync_data() {
                server_log!(
                    Warning,
                    "Can't persist AOF for fsync error: {e}. Exiting..."
                );
                std::process::exit(1);
            }
            last_sync = Instant::now();
            unsynced = false;
        }
        // Everything below `upto` is written, but for a transaction still waiting for its end.
        let mark = stream.first_pending().map_or(upto, |s| s.min(upto));
        DURABLE.fetch_max(mark, Ordering::SeqCst);
        let ready: Vec<Waker> = {
            let mut w = lock(&WAITERS);
            let mut ready = Vec::new();
            w.retain(|(m, waker)| {
                if *m <= mark {
                    ready.push(waker.clone());
                    false
                } else {
                    true
                }
            });
            ready
        };
        ready.into_iter().for_each(Waker::wake);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trip() {
        let text = "file appendonly.aof.1.base.rdb seq 1 type b\nfile appendonly.aof.1.incr.aof seq 1 type i\n";
        let m = Manifest::parse(text.as_bytes()).unwrap();
        assert_eq!(m.base, Some(("appendonly.aof.1.base.rdb".into(), 1)));
        assert_eq!(m.incr, vec![("appendonly.aof.1.incr.aof".into(), 1)]);
        assert_eq!(m.text(), text);
        let err = |t: &str| Manifest::parse(t.as_bytes()).unwrap_err();
        assert_eq!(err("file x seq 1 type z\n"), "Unknown AOF file type");
        assert_eq!(err("file x seq\n"), "Invalid AOF manifest file format");
        assert_eq!(err("\n"), "Invalid AOF manifest file format");
        assert_eq!(err(""), "Found an empty AOF manifest");
        assert_eq!(
            err("file x seq 1 type b\nfile y seq 2 type b\n"),
            "Found duplicate base file information"
        );
        assert_eq!(
            err("file x seq 2 type i\nfile y seq 1 type i\n"),
            "Found a non-monotonic sequence number"
        );
        assert_eq!(
            err("file x seq 1 type i"),
            "The AOF manifest file contains too long line"
        );
        let spaced = Manifest {
            base: Some(("a b.aof".into(), 1)),
            incr: vec![("a b.1.incr.aof".into(), 1)],
            history: vec![],
        };
        assert_eq!(Manifest::parse(spaced.text().as_bytes()).unwrap(), spaced);
    }
}
