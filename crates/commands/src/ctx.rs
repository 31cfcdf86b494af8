//! What a handler sees: [`ShardCtx`] on the shard that owns the keys, [`ConnCtx`] on the
//! connection's thread, and the server-wide state both can reach.

use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::{Db, Shard, ShardSet};

use crate::args::Args;
use crate::config::Config;
use crate::table::Table;

/// Context of a command running on the shard that owns its keys.
pub struct ShardCtx<'a> {
    pub shard: &'a mut Shard,
    /// Selected database index.
    pub db: usize,
    /// The whole command line; `args[0]` is the command name.
    pub args: &'a [Bytes],
    pub out: &'a mut ReplyBuf,
    /// Command time in unix ms (one clock reading per command, as Redis does).
    pub now: i64,
}

impl<'a> ShardCtx<'a> {
    /// The selected database.
    pub fn db(&mut self) -> &mut Db {
        self.shard.db_mut(self.db)
    }

    /// A cursor over the arguments after the command name.
    pub fn args(&self) -> Args<'a> {
        Args::new(self.args, 1)
    }
}

/// Context of a command running on the connection's thread.
pub struct ConnCtx<'a> {
    pub session: &'a mut Session,
    pub server: &'a Arc<ServerState>,
    pub args: &'a [Bytes],
    pub out: &'a mut ReplyBuf,
    pub now: i64,
}

impl<'a> ConnCtx<'a> {
    /// A cursor over the arguments after the command name (`start` = 2 for subcommands).
    pub fn args_from(&self, start: usize) -> Args<'a> {
        Args::new(self.args, start)
    }

    /// The shard set.
    pub fn shards(&self) -> &ShardSet {
        &self.server.shards
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
        }
    }

    /// Selects database `db` (the caller validated the index).
    pub fn select(&mut self, db: usize) {
        self.db = db;
        self.info.db.store(db as u32, Ordering::Relaxed);
    }
}

/// The part of a client other threads may read (CLIENT LIST/INFO) or act on (CLIENT KILL).
/// Written only by the owning connection's thread, with relaxed atomics or uncontended mutexes.
pub struct ClientInfo {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    /// Socket fd, so CLIENT KILL / SHUTDOWN can `shutdown(2)` it from another thread.
    pub fd: i32,
    /// Creation time, unix ms.
    pub created_ms: i64,
    pub name: Mutex<Option<Bytes>>,
    pub lib_name: Mutex<Option<Bytes>>,
    pub lib_ver: Mutex<Option<Bytes>>,
    pub db: AtomicU32,
    pub resp: AtomicU8,
    /// Id of the last command run (index into the table), usize::MAX if none.
    pub last_cmd: AtomicUsize,
    /// Time of the last interaction, unix ms.
    pub last_active_ms: AtomicI64,
    /// Bytes buffered, unanswered (qbuf) and pending output (omem), for CLIENT LIST.
    pub qbuf: AtomicU64,
    pub omem: AtomicU64,
    pub no_evict: AtomicBool,
    pub killed: AtomicBool,
    /// Waiting in a blocking command (CLIENT LIST flag `b`, INFO `blocked_clients`); set by the
    /// blocking machinery.
    pub blocked: AtomicBool,
    /// Commands queued since MULTI, -1 outside a transaction (CLIENT LIST `multi`, flag `x`); set by
    /// the MULTI implementation.
    pub multi: AtomicI64,
    /// Channel, pattern and shard-channel subscriptions (CLIENT LIST `sub`/`psub`/`ssub`, flag `P`,
    /// CLIENT KILL TYPE pubsub, PING's reply shape); set by the pub/sub implementation.
    pub sub: AtomicU32,
    pub psub: AtomicU32,
    pub ssub: AtomicU32,
}

impl ClientInfo {
    /// Total subscriptions (channels, patterns and shard channels): non-zero means the client is in
    /// Redis's pub/sub mode.
    pub fn subscriptions(&self) -> u32 {
        self.sub.load(Ordering::Relaxed)
            + self.psub.load(Ordering::Relaxed)
            + self.ssub.load(Ordering::Relaxed)
    }

    /// Marks the client killed and shuts its socket down so its thread notices at once.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
        // shutdown(2) wakes the owner's pending read at once. If the fd was already closed (and
        // reused) the owner is gone anyway; `killed` is what the owner checks.
        // SAFETY: shutdown(2) has no memory-safety preconditions.
        unsafe {
            libc::shutdown(self.fd, libc::SHUT_RDWR);
        }
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
    /// The event-loop driver in use ("io_uring" or "epoll"), for INFO.
    pub io_engine: &'static str,
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
        let info = Arc::new(ClientInfo {
            id,
            addr,
            laddr,
            fd,
            created_ms: now,
            name: Mutex::new(None),
            lib_name: Mutex::new(None),
            lib_ver: Mutex::new(None),
            db: AtomicU32::new(0),
            resp: AtomicU8::new(2),
            last_cmd: AtomicUsize::new(usize::MAX),
            last_active_ms: AtomicI64::new(now),
            qbuf: AtomicU64::new(0),
            omem: AtomicU64::new(0),
            no_evict: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            blocked: AtomicBool::new(false),
            multi: AtomicI64::new(-1),
            sub: AtomicU32::new(0),
            psub: AtomicU32::new(0),
            ssub: AtomicU32::new(0),
        });
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

    /// Asks every thread to stop (SHUTDOWN, SIGTERM).
    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        for c in self.client_list() {
            c.kill();
        }
    }
}
