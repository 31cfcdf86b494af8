//! The server-wide state every thread shares ([`ServerState`]: shards, configuration, the client
//! registry, pub/sub, CLIENT PAUSE) and the per-connection state a connection owns ([`Session`]).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use strata_resp::Protocol;
use strata_shard::{Owner, ShardSet, Watch};

use crate::clients::ClientInfo;
use crate::config::Config;
use crate::table::Table;

/// CLIENT PAUSE state: until when, and whether everything (ALL) or only writes are paused.
#[derive(Default)]
pub struct Pause {
    state: Mutex<PauseState>,
    /// The pause's end (unix ms), readable without the lock: 0 when never paused or unpaused, so
    /// the per-command check is one load when no pause was ever set.
    until: AtomicI64,
}

#[derive(Default)]
struct PauseState {
    /// Unix ms; 0 = not paused.
    until: i64,
    all: bool,
    /// Paused clients waiting for the end of the pause.
    waiters: Vec<futures_channel::oneshot::Sender<()>>,
}

impl Pause {
    /// CLIENT PAUSE: pauses until `until` (a later end or a stronger mode wins over the current).
    pub fn pause(&self, until: i64, all: bool, now: i64) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.until <= now {
            st.until = until;
            st.all = all;
        } else {
            st.until = st.until.max(until);
            st.all |= all;
        }
        self.until.store(st.until, Ordering::Release);
        strata_shard::db::hold_expiry(st.until);
    }

    /// True if a pause may be in force (cheap; [`Pause::wait_for`] decides).
    pub fn maybe_paused(&self) -> bool {
        self.until.load(Ordering::Acquire) != 0
    }

    /// CLIENT UNPAUSE: ends the pause and releases every paused client.
    pub fn unpause(&self) {
        let waiters = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            st.until = 0;
            st.all = false;
            self.until.store(0, Ordering::Release);
            strata_shard::db::hold_expiry(0);
            std::mem::take(&mut st.waiters)
        };
        for w in waiters {
            let _ = w.send(());
        }
    }

    /// True if a command that writes (`write`) or not must wait now.
    pub fn applies(&self, write: bool, now: i64) -> bool {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.until > now && (st.all || write)
    }

    /// If a command that writes (`write`) or not must wait now: the end of the pause (unix ms) and
    /// a receiver resolved by CLIENT UNPAUSE. None when it may run.
    pub fn wait_for(
        &self,
        write: bool,
        now: i64,
    ) -> Option<(i64, futures_channel::oneshot::Receiver<()>)> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.until <= now || !(st.all || write) {
            return None;
        }
        let (tx, rx) = futures_channel::oneshot::channel();
        st.waiters.retain(|w| !w.is_canceled());
        st.waiters.push(tx);
        Some((st.until, rx))
    }
}

/// CLIENT REPLY mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply of the next command only.
    Skip,
}

/// A command queued inside MULTI, resolved once when it was queued.
pub struct Queued {
    pub cmd: crate::table::Resolved,
    pub args: Vec<Bytes>,
}

/// Per-connection state, owned by the connection.
pub struct Session {
    pub info: Arc<ClientInfo>,
    /// Selected database.
    pub db: usize,
    pub proto: Protocol,
    pub authenticated: bool,
    pub reply_mode: ReplyMode,
    /// Close the connection once pending replies are written (QUIT, fatal errors).
    pub close_after_reply: bool,
    /// Inside MULTI: the queued commands (see [`crate::services::multi`]).
    pub multi: Option<Vec<Queued>>,
    /// A command was rejected while queueing: EXEC answers EXECABORT.
    pub multi_failed: bool,
    /// The client's WATCH state, and the keys it watches: (database, key).
    pub watch: Option<Arc<Watch>>,
    pub watched: Vec<(usize, Bytes)>,
    /// Commands of a pipeline held back by CLIENT PAUSE: the connection writes the replies of the
    /// commands before them, then runs these.
    pub deferred: Option<Vec<Vec<Bytes>>>,
    /// While EXEC runs: the transaction's lock owner. Commands of the transaction take their locks
    /// as this owner, re-entering what EXEC holds.
    pub txn_owner: Option<Owner>,
    /// While EXEC runs with the propagation stream on: the transaction's id in the stream (see
    /// `strata_shard::propagate`), so its writes are wrapped in MULTI/EXEC; 0 otherwise.
    pub prop_txn: u64,
    /// The place in that transaction of the command running now.
    pub prop_pos: u32,
    /// The AOF loader's client: it runs while everyone else is answered -LOADING.
    pub replaying: bool,
    /// Channels, patterns and shard channels subscribed to (see `crate::pubsub`).
    pub pubsub: crate::pubsub::Subscriptions,
    /// CLIENT TRACKING: the client's settings while tracking is on (see `crate::tracking`).
    pub tracking: Option<Arc<crate::tracking::ClientTracking>>,
    /// CLIENT CACHING YES/NO applies to the next command (all of them inside MULTI).
    pub caching: bool,
    /// In MONITOR mode (see `crate::services::monitor`).
    pub monitor: bool,
    /// How many more reads across shards (read-only pipelines, lone multi-key reads) run the
    /// locked way, without trying key versions first: set after one had to run again (see
    /// `strata_server::dispatch`).
    pub locked_reads: Cell<u32>,
    /// What the MULTI queue and the WATCHed keys were counted for so far (`crate::services::client_evict`).
    pub mem: Counted,
}

impl Session {
    /// A fresh session for a connection described by `info`.
    pub fn new(info: Arc<ClientInfo>, authenticated: bool) -> Session {
        Session {
            info,
            db: 0,
            proto: Protocol::Resp2,
            authenticated,
            reply_mode: ReplyMode::On,
            close_after_reply: false,
            multi: None,
            multi_failed: false,
            watch: None,
            watched: Vec::new(),
            txn_owner: None,
            prop_txn: 0,
            prop_pos: 0,
            replaying: false,
            deferred: None,
            pubsub: Default::default(),
            tracking: None,
            caching: false,
            monitor: false,
            locked_reads: Cell::new(0),
            mem: Default::default(),
        }
    }

    /// Selects database `db` (the caller validated the index).
    pub fn select(&mut self, db: usize) {
        self.db = db;
        self.info.db.store(db as u32, Ordering::Relaxed);
    }
}

/// Counters that are not per thread.
#[derive(Default)]
pub struct ServerStats {
    pub connected_clients: AtomicU64,
}

/// Server-wide state shared by every thread.
pub struct ServerState {
    pub shards: ShardSet,
    pub config: Config,
    pub table: &'static Table,
    pub clients: Mutex<std::collections::BTreeMap<u64, Arc<ClientInfo>>>,
    pub next_client_id: AtomicU64,
    pub stats: ServerStats,
    /// Every pub/sub subscription, reached from any thread (see `crate::pubsub`).
    pub pubsub: Arc<crate::pubsub::PubSub>,
    /// Process start, unix ms.
    pub started_ms: i64,
    /// 40 hex chars, new at every start (INFO run_id).
    pub run_id: String,
    /// Set by SHUTDOWN or a signal; every thread's loops watch it.
    pub shutting_down: AtomicBool,
    /// Exit code requested by SHUTDOWN.
    pub exit_code: AtomicI64,
    /// Suspends the calling task (not its thread) for a while: DEBUG SLEEP. Provided by the server
    /// crate, which owns the event loop's timer.
    pub sleep: fn(std::time::Duration) -> futures_util::future::LocalBoxFuture<'static, ()>,
    /// The event-loop driver in use ("epoll"), for INFO.
    pub io_engine: &'static str,
    /// CLIENT PAUSE.
    pub pause: Pause,
}

impl ServerState {
    /// Registers a connection and returns its shared info.
    pub fn register_client(
        &self,
        addr: String,
        laddr: String,
        fd: i32,
        now: i64,
    ) -> Arc<ClientInfo> {
        let id = self.next_client_id.fetch_add(1, Ordering::Relaxed);
        let limits = self.config.output_limits().clone();
        let info = Arc::new(ClientInfo::new(id, addr, laddr, fd, now, limits));
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, info.clone());
        self.stats.connected_clients.fetch_add(1, Ordering::Relaxed);
        info
    }

    /// Forgets a closed connection.
    pub fn unregister_client(&self, id: u64) {
        if self
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .is_some()
        {
            self.stats.connected_clients.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Snapshot of every connected client.
    pub fn client_list(&self) -> Vec<Arc<ClientInfo>> {
        self.clients
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Wakes every connection's writer, so settings it acts on (`timeout`) take effect at once.
    pub fn wake_clients(&self) {
        for c in self.client_list() {
            c.wake();
        }
    }

    /// Asks every thread to stop (SHUTDOWN, SIGTERM).
    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        for c in self.client_list() {
            c.kill();
        }
    }
}

/// What a session holds beyond its buffers, counted as its commands add it: the MULTI queue and
/// WATCHed keys (so far counted: entries and bytes, extended by the entries added since; a
/// shorter list was emptied and is counted again), subscriptions and tracking prefixes.
#[derive(Default)]
pub struct Counted {
    pub(crate) queued: usize,
    pub(crate) queued_bytes: u64,
    pub(crate) watched: usize,
    pub(crate) watched_bytes: u64,
    /// Something non-zero was published: the next batch must publish (zeros, if need be).
    pub(crate) published: bool,
}
