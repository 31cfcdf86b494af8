//! What a handler sees: [`ShardCtx`] on the shard that owns the keys, [`ConnCtx`] on the
//! connection's thread, and the server-wide state both can reach.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::{now_ms, Db, Owner, Shard, ShardSet, Watch};

use crate::args::Args;
use crate::config::{ClientClass, Config, OutputLimits};
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
    /// Set by a blocking command that found nothing to serve, instead of a reply (see [`Park`]).
    pub park: Option<Park>,
}

/// What a blocking command (BLPOP, BZPOPMIN, BLMOVE…) asks for when it finds nothing to serve:
/// to wait until one of `keys` is written, then run again, or to answer `timeout` at `deadline`.
/// The handler writes no reply when it parks. See `strata_shard::park` for the guarantees (first
/// parked first served, no lost wake-up, nothing served to a client that is gone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Park {
    /// The keys to wait on, all in the command's database.
    pub keys: Vec<Bytes>,
    /// When to give up, unix ms; None waits forever.
    pub deadline: Option<i64>,
    /// The reply once the deadline passes.
    pub timeout: TimeoutReply,
    /// The reply when the command may not block at all (inside MULTI/EXEC): BLMOVE and
    /// BRPOPLPUSH then answer as LMOVE does, with a null bulk string.
    pub no_block: TimeoutReply,
}

/// A blocking command's reply on timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReply {
    /// A null array (`*-1`, RESP3 `_`): what Redis 7.0 answers for every timed-out list and
    /// sorted-set pop, BLMOVE included.
    NullArray,
    /// A null bulk string (`$-1`, RESP3 `_`).
    NullBulk,
}

impl TimeoutReply {
    /// Writes the reply.
    pub fn write(self, out: &mut ReplyBuf) {
        match self {
            TimeoutReply::NullArray => out.null_array(),
            TimeoutReply::NullBulk => out.null(),
        }
    }
}

impl<'a> ShardCtx<'a> {
    /// The selected database.
    pub fn db(&mut self) -> &mut Db {
        self.shard.db_mut(self.db)
    }

    /// Redis's notifyKeyspaceEvent for `key` of the selected database (see
    /// `strata_shard::notify`).
    #[inline]
    pub fn notify(&self, class: u32, event: &'static str, key: &[u8]) {
        strata_shard::notify::emit(class, event, key, self.db as u32);
    }

    /// A cursor over the arguments after the command name.
    pub fn args(&self) -> Args<'a> {
        Args::new(self.args, 1)
    }
}

/// CLIENT UNBLOCK … TIMEOUT (the default): the blocked command answers as if it timed out.
pub const UNBLOCK_TIMEOUT: u8 = 1;
/// CLIENT UNBLOCK … ERROR: the blocked command answers `-UNBLOCKED …`.
pub const UNBLOCK_ERROR: u8 = 2;

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

    /// The lock owner a command takes its locks as: the transaction's inside EXEC (re-entering
    /// what EXEC holds), else a fresh one.
    pub fn lock_owner(&self) -> Owner {
        self.session
            .txn_owner
            .unwrap_or_else(strata_shard::new_owner)
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
    /// Inside MULTI: the queued commands (see [`crate::multi`]).
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
    /// Channels, patterns and shard channels subscribed to (see `crate::pubsub`).
    pub pubsub: crate::pubsub::Subscriptions,
    /// CLIENT TRACKING: the client's settings while tracking is on (see `crate::tracking`).
    pub tracking: Option<Arc<crate::tracking::ClientTracking>>,
    /// CLIENT CACHING YES/NO applies to the next command (all of them inside MULTI).
    pub caching: bool,
    /// In MONITOR mode (see `crate::monitor`).
    pub monitor: bool,
    /// How many more reads across shards (read-only pipelines, lone multi-key reads) run the
    /// locked way, without trying key versions first: set after one had to run again (see
    /// `strata_server::dispatch`).
    pub locked_reads: Cell<u32>,
    /// What the MULTI queue and the WATCHed keys were counted for so far (`crate::client_evict`).
    pub mem: crate::client_evict::Counted,
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

/// The part of a client other threads may read (CLIENT LIST/INFO) or act on (CLIENT KILL, pushes).
/// Written by the owning connection's thread with relaxed atomics or uncontended mutexes, except
/// the outbox, which any thread may push to.
///
/// # The push path
/// Any thread can queue bytes for the client with [`ClientInfo::push`]; the owning connection
/// writes them in order with its own replies, and only the owner ever touches the socket. The
/// invariants:
/// * Output leaves in the order it entered the outbox, a chunk at a time: a chunk is written
///   completely before the next one starts, so messages never interleave.
/// * The connection writes a reply directly (without the outbox) only when nothing is pending
///   (`omem == 0`: nothing queued, nothing being written). A push racing with that direct write
///   lands in the outbox behind it; if the socket takes only part of the reply, the rest goes to
///   the *front* of the outbox — the writer runs on the owner's thread, so it cannot have started
///   on anything queued meanwhile.
/// * `client-output-buffer-limit` is checked on every byte added and while output is pending: at
///   the hard limit, or above the soft limit for longer than its seconds, the client is closed
///   (its pending output dropped, further pushes refused) and its owner woken to shut it down.
pub struct ClientInfo {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    /// Socket fd, for CLIENT LIST only: another thread must never act on it (the number may have
    /// been reused once the owner closed it); CLIENT KILL goes through [`ClientInfo::kill`].
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
    /// Bytes buffered, unanswered (qbuf), for CLIENT LIST.
    pub qbuf: AtomicU64,
    /// Room the read buffer has beyond `qbuf` (qbuf-free): 0 once an idle connection's buffer is
    /// freed.
    pub qbuf_free: AtomicU64,
    /// Output not yet written to the socket, in bytes (CLIENT LIST `omem`); mirrors the outbox so
    /// the connection's direct-write test is one load.
    pub omem: AtomicU64,
    /// Bytes of the chunk being written (`obl`) and chunks queued behind it (`oll`).
    pub obl: AtomicU64,
    pub oll: AtomicU64,
    /// Output has been at or over the soft limit since a time the outbox keeps (its clock is
    /// running); lets the owner's writer, waiting on a full socket, arm its re-check timer when a
    /// push starts the clock.
    soft_armed: AtomicBool,
    pub no_evict: AtomicBool,
    /// Closed or being closed (CLIENT KILL, an output limit, shutdown): no more output is accepted
    /// and the owner is shutting the connection down. Mirrors the outbox's flag for lock-free reads.
    pub killed: AtomicBool,
    /// Waiting in a blocking command (CLIENT LIST flag `b`, INFO `blocked_clients`); set by the
    /// blocking machinery.
    pub blocked: AtomicBool,
    /// Blocked in a way CLIENT UNBLOCK may end (a blocking command or WAIT; not a client paused by
    /// CLIENT PAUSE).
    pub unblockable: AtomicBool,
    /// CLIENT UNBLOCK's request for this client: 0 none, [`UNBLOCK_TIMEOUT`] or [`UNBLOCK_ERROR`].
    unblock: std::sync::atomic::AtomicU8,
    unblock_waker: AtomicWaker,
    /// Commands queued since MULTI, -1 outside a transaction (CLIENT LIST `multi`, flag `x`); set by
    /// the MULTI implementation.
    pub multi: AtomicI64,
    /// Channel, pattern and shard-channel subscriptions (CLIENT LIST `sub`/`psub`/`ssub`, flag `P`,
    /// CLIENT KILL TYPE pubsub, PING's reply shape); set by the pub/sub implementation.
    pub sub: AtomicU32,
    pub psub: AtomicU32,
    pub ssub: AtomicU32,
    /// CLIENT TRACKING state bits (`crate::tracking::FLAG_*`), for CLIENT LIST flags `t`, `R`, `B`.
    pub tracking: AtomicU8,
    /// In MONITOR mode (CLIENT LIST flag `O`).
    pub monitor: AtomicBool,
    /// QUIT answered or the connection ending: a tracking redirect to it is broken from now on, as
    /// in Redis, where the client is gone once its QUIT reply has been written.
    pub closing: AtomicBool,
    /// CLIENT TRACKING's REDIRECT client id (0: none), for CLIENT LIST `redir`.
    pub tracking_redir: AtomicU64,
    /// Bytes of the MULTI queue and the WATCHed keys (CLIENT LIST `multi-mem`), and of the
    /// subscriptions and tracking prefixes; the owner publishes them after each batch (see
    /// `crate::client_evict`).
    pub multi_mem: AtomicU64,
    pub aux_mem: AtomicU64,
    /// Bytes of a partly read request's arguments the parser holds outside the read buffer
    /// (CLIENT LIST `argv-mem` of a client in the middle of sending one).
    pub argv_mem: AtomicU64,
    /// The connection's reply buffers: those of the batch being run, or the room the buffer
    /// keeps between batches (CLIENT LIST `tot-mem`, as Redis counts its reply buffer).
    pub reply_mem: AtomicU64,
    /// What this client adds to the clients' total that `maxmemory-clients` limits
    /// (`crate::client_evict`); `u64::MAX` once the connection is gone.
    pub(crate) mem_published: AtomicU64,
    /// Its size when `maxmemory-clients` evicted it: memory on its way out until it closes.
    pub(crate) mem_evicted: AtomicU64,
    outbox: Mutex<Outbox>,
    /// The owning connection's writer: woken by pushes, kills and configuration changes.
    waker: AtomicWaker,
    /// Set by [`ClientInfo::wake`]: the writer has something to re-read even though no output or
    /// close is pending.
    nudged: AtomicBool,
    limits: Arc<OutputLimits>,
}

/// Output a connection has not written yet: pushed messages, and its own replies once the socket
/// stopped taking them at once.
#[derive(Default)]
struct Outbox {
    queue: VecDeque<Bytes>,
    /// Bytes not yet written: queued, plus the rest of the chunk being written.
    pending: u64,
    /// Bytes of the chunk being written that are not written yet.
    in_flight: u64,
    /// Bytes written through the outbox since the connection opened.
    written: u64,
    /// When `pending` reached the soft limit (unix ms); None while below it.
    soft_since: Option<i64>,
    closed: bool,
}

/// What the owner's writer gets from [`ClientInfo::take_output`].
#[derive(Debug, PartialEq, Eq)]
pub enum Output {
    /// The next chunk to write, in full, then report with [`ClientInfo::wrote`].
    Chunk(Bytes),
    /// Nothing to write.
    Idle,
    /// The client is closed: shut the connection down.
    Closed,
}

/// Small queued chunks are coalesced into one write up to this size.
const COALESCE: usize = 16 * 1024;

impl ClientInfo {
    /// A client's shared handle. `limits` is the live `client-output-buffer-limit`.
    pub fn new(
        id: u64,
        addr: String,
        laddr: String,
        fd: i32,
        now: i64,
        limits: Arc<OutputLimits>,
    ) -> ClientInfo {
        ClientInfo {
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
            qbuf_free: AtomicU64::new(0),
            omem: AtomicU64::new(0),
            obl: AtomicU64::new(0),
            oll: AtomicU64::new(0),
            soft_armed: AtomicBool::new(false),
            no_evict: AtomicBool::new(false),
            killed: AtomicBool::new(false),
            blocked: AtomicBool::new(false),
            unblockable: AtomicBool::new(false),
            unblock: std::sync::atomic::AtomicU8::new(0),
            unblock_waker: AtomicWaker::new(),
            multi: AtomicI64::new(-1),
            sub: AtomicU32::new(0),
            psub: AtomicU32::new(0),
            ssub: AtomicU32::new(0),
            tracking: AtomicU8::new(0),
            monitor: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            tracking_redir: AtomicU64::new(0),
            multi_mem: AtomicU64::new(0),
            argv_mem: AtomicU64::new(0),
            reply_mem: AtomicU64::new(0),
            aux_mem: AtomicU64::new(0),
            mem_published: AtomicU64::new(0),
            mem_evicted: AtomicU64::new(0),
            outbox: Mutex::new(Outbox::default()),
            waker: AtomicWaker::new(),
            nudged: AtomicBool::new(false),
            limits,
        }
    }

    /// The memory the client holds (CLIENT LIST `tot-mem` without the arguments of the command
    /// being run, which are part of the read buffer): its read buffer and a partly read request's
    /// arguments, the running batch's replies and output not yet written, MULTI queue, WATCHed keys, subscriptions, tracking
    /// prefixes and the handle itself. What `maxmemory-clients` weighs.
    pub fn tot_mem(&self) -> u64 {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        load(&self.qbuf)
            + load(&self.qbuf_free)
            + load(&self.argv_mem)
            + load(&self.reply_mem)
            + load(&self.omem)
            + load(&self.multi_mem)
            + load(&self.aux_mem)
            + std::mem::size_of::<ClientInfo>() as u64
    }

    /// Total subscriptions (channels, patterns and shard channels): non-zero means the client is in
    /// Redis's pub/sub mode.
    pub fn subscriptions(&self) -> u32 {
        self.sub.load(Ordering::Relaxed)
            + self.psub.load(Ordering::Relaxed)
            + self.ssub.load(Ordering::Relaxed)
    }

    /// The output-buffer class of the client: pubsub while it has subscriptions.
    pub fn output_class(&self) -> ClientClass {
        if self.subscriptions() > 0 {
            ClientClass::PubSub
        } else {
            ClientClass::Normal
        }
    }

    fn outbox(&self) -> std::sync::MutexGuard<'_, Outbox> {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// CLIENT UNBLOCK: ends this client's blocking command or WAIT with `how` ([`UNBLOCK_TIMEOUT`]
    /// or [`UNBLOCK_ERROR`]). False if it is not blocked in a way that can be ended.
    pub fn request_unblock(&self, how: u8) -> bool {
        if !self.unblockable.load(Ordering::Acquire) {
            return false;
        }
        self.unblock.store(how, Ordering::Release);
        self.unblock_waker.wake();
        true
    }

    /// Resolves with the CLIENT UNBLOCK request made for this client (consuming it).
    pub fn unblocked(&self) -> impl std::future::Future<Output = u8> + '_ {
        std::future::poll_fn(move |cx| {
            let how = self.unblock.swap(0, Ordering::AcqRel);
            if how != 0 {
                return std::task::Poll::Ready(how);
            }
            self.unblock_waker.register(cx.waker());
            match self.unblock.swap(0, Ordering::AcqRel) {
                0 => std::task::Poll::Pending,
                how => std::task::Poll::Ready(how),
            }
        })
    }

    /// Queues `bytes` (one complete RESP message) for the client, from any thread; the owning
    /// connection writes it after everything queued before. False if the client is closed or this
    /// message took it over its output-buffer limit (it is then closed).
    pub fn push(&self, bytes: Bytes) -> bool {
        self.push_at(bytes, now_ms())
    }

    /// [`ClientInfo::push`] with the caller's clock reading (unix ms), for a caller pushing to many
    /// clients at once (PUBLISH) that reads the clock once.
    pub fn push_at(&self, bytes: Bytes, now: i64) -> bool {
        self.enqueue(bytes, false, now).is_some()
    }

    /// Closes the client from any thread (CLIENT KILL, SHUTDOWN): drops its pending output, refuses
    /// further pushes and wakes its owner, which shuts the socket down.
    pub fn kill(&self) {
        let mut ob = self.outbox();
        self.close_locked(&mut ob);
        drop(ob);
        self.waker.wake();
        // A command of the client's that waits (a blocking pop) ends its wait too.
        self.unblock_waker.wake();
    }

    /// Wakes the owner's writer so it re-reads settings such as `timeout`.
    pub fn wake(&self) {
        self.nudged.store(true, Ordering::Release);
        self.waker.wake();
    }

    /// Owner only: whether [`ClientInfo::wake`] was called since the last time this was asked.
    pub fn take_nudge(&self) -> bool {
        self.nudged.swap(false, Ordering::Acquire)
    }

    /// Whether output is pending (queued or being written). Owner only: when false, the owner may
    /// write a reply straight to the socket.
    pub fn output_pending(&self) -> bool {
        self.omem.load(Ordering::Relaxed) != 0
    }

    /// Owner only: queues the part of its own reply the socket did not take, at the front when
    /// nothing was pending as the owner tried to write directly (see the type's docs), else at the
    /// back. Returns the [`ClientInfo::written`] count at which the reply has left, or None if the
    /// client is closed (possibly by this reply's size).
    pub fn queue_reply(&self, bytes: Bytes, front: bool, now: i64) -> Option<u64> {
        self.enqueue(bytes, front, now)
    }

    fn enqueue(&self, bytes: Bytes, front: bool, now: i64) -> Option<u64> {
        let mut ob = self.outbox();
        if ob.closed {
            return None;
        }
        let len = bytes.len() as u64;
        if len == 0 {
            return Some(ob.written + ob.pending);
        }
        // The reply goes before what was queued but never before a chunk being written; `front`
        // is only used when nothing was pending, so there is none.
        let mark = if front {
            ob.written + ob.in_flight + len
        } else {
            ob.written + ob.pending + len
        };
        if front {
            ob.queue.push_front(bytes);
        } else {
            ob.queue.push_back(bytes);
        }
        ob.pending += len;
        self.mirror(&ob);
        if self.over_limit(&mut ob, now) {
            self.close_for_limits(ob);
            return None;
        }
        drop(ob);
        self.waker.wake();
        Some(mark)
    }

    /// Owner only: the next chunk to write (small queued chunks coalesced), which stays counted as
    /// pending until [`ClientInfo::wrote`] reports it written.
    pub fn take_output(&self) -> Output {
        let mut ob = self.outbox();
        if ob.closed {
            return Output::Closed;
        }
        if ob.in_flight > 0 {
            // The caller still owes the rest of the previous chunk; nothing new.
            return Output::Idle;
        }
        let Some(first) = ob.queue.pop_front() else {
            return Output::Idle;
        };
        let chunk = if first.len() >= COALESCE || ob.queue.front().is_none() {
            first
        } else {
            let mut buf = Vec::with_capacity(COALESCE);
            buf.extend_from_slice(&first);
            while let Some(next) = ob.queue.front() {
                if buf.len() + next.len() > COALESCE {
                    break;
                }
                buf.extend_from_slice(next);
                ob.queue.pop_front();
            }
            Bytes::from(buf)
        };
        ob.in_flight = chunk.len() as u64;
        self.mirror(&ob);
        Output::Chunk(chunk)
    }

    /// Owner only: `n` more bytes of the chunk being written have left. Returns the total written,
    /// or None if the client is (now) closed: still over the soft limit for too long.
    pub fn wrote(&self, n: u64, now: i64) -> Option<u64> {
        let mut ob = self.outbox();
        if ob.closed {
            return None;
        }
        let n = n.min(ob.in_flight);
        ob.in_flight -= n;
        ob.pending -= n;
        ob.written += n;
        self.mirror(&ob);
        if self.over_limit(&mut ob, now) {
            self.close_for_limits(ob);
            return None;
        }
        Some(ob.written)
    }

    /// Bytes written through the outbox so far (compare with [`ClientInfo::queue_reply`]'s mark).
    pub fn written(&self) -> u64 {
        self.outbox().written
    }

    /// Owner only: re-checks the output limits at `now` (the soft limit's time may run out with
    /// nothing added), closing the client if it is over them. Returns when to check again (unix ms)
    /// while output stays above the soft limit.
    pub fn check_output_limits(&self, now: i64) -> Option<i64> {
        let mut ob = self.outbox();
        if ob.closed {
            return None;
        }
        if self.over_limit(&mut ob, now) {
            self.close_for_limits(ob);
            return None;
        }
        let secs = self.limits.get(self.output_class()).soft_seconds as i64;
        ob.soft_since
            .map(|t| t.saturating_add(secs.saturating_mul(1000)) + 1)
    }

    /// Reply bytes a batch may still produce before the client reaches its hard output limit (its
    /// class's hard limit less what it has not read yet); `usize::MAX` without a hard limit.
    pub fn output_budget(&self) -> usize {
        let hard = self.limits.get(self.output_class()).hard;
        if hard == 0 {
            return usize::MAX;
        }
        let pending = self.outbox().pending;
        usize::try_from(hard.saturating_sub(pending)).unwrap_or(usize::MAX)
    }

    /// Owner only: the replies of the batch being run outgrew [`ClientInfo::output_budget`]: the
    /// client is closed at once, as Redis closes it when a reply takes it past the hard limit, and
    /// none of those replies is sent.
    pub fn close_over_output_limit(&self) {
        let ob = self.outbox();
        if !ob.closed {
            self.close_for_limits(ob);
        }
    }

    /// Owner only: registers the writer's waker (pushes, kills and settings wake it).
    pub fn register_waker(&self, waker: &std::task::Waker) {
        self.waker.register(waker);
    }

    /// Owner only: the connection is ending; later pushes are refused.
    pub fn close(&self) {
        let mut ob = self.outbox();
        self.close_locked(&mut ob);
    }

    fn close_locked(&self, ob: &mut Outbox) {
        ob.closed = true;
        ob.queue = VecDeque::new();
        ob.pending = 0;
        ob.in_flight = 0;
        ob.soft_since = None;
        self.soft_armed.store(false, Ordering::Relaxed);
        self.mirror(ob);
        self.killed.store(true, Ordering::Relaxed);
    }

    fn close_for_limits(&self, mut ob: std::sync::MutexGuard<'_, Outbox>) {
        let line = crate::connection::client_line(self, now_ms(), 0, crate::table::process());
        self.close_locked(&mut ob);
        drop(ob);
        eprintln!(
            "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
        );
        self.waker.wake();
    }

    fn mirror(&self, ob: &Outbox) {
        self.omem.store(ob.pending, Ordering::Relaxed);
        self.obl.store(ob.in_flight, Ordering::Relaxed);
        self.oll.store(ob.queue.len() as u64, Ordering::Relaxed);
        // Pushes from other threads grow a subscriber's output: the clients' total follows.
        if crate::client_evict::enabled() {
            crate::client_evict::refresh(self);
        }
    }

    /// Redis's `checkClientOutputBufferLimits`: at or over the hard limit, or at or over the soft
    /// limit for longer than its seconds (the clock starts when the soft limit is first reached
    /// and stops whenever pending output drops below it).
    fn over_limit(&self, ob: &mut Outbox, now: i64) -> bool {
        let limit = self.limits.get(self.output_class());
        let used = ob.pending;
        let hard = limit.hard > 0 && used >= limit.hard;
        let soft = limit.soft > 0 && used >= limit.soft;
        self.soft_armed.store(soft, Ordering::Relaxed);
        if !soft {
            ob.soft_since = None;
            return hard;
        }
        let since = *ob.soft_since.get_or_insert(now);
        hard || now - since > (limit.soft_seconds as i64).saturating_mul(1000)
    }

    /// Owner only: output is over the soft limit and its clock is running (see
    /// [`ClientInfo::check_output_limits`] for when it runs out). One load.
    pub fn soft_limit_armed(&self) -> bool {
        self.soft_armed.load(Ordering::Relaxed)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn client(limits: &str) -> ClientInfo {
        let config = Config::default();
        config.set("client-output-buffer-limit", limits).unwrap();
        let limits = config.output_limits().clone();
        ClientInfo::new(7, "127.0.0.1:1".into(), "127.0.0.1:2".into(), -1, 0, limits)
    }

    fn chunk(info: &ClientInfo) -> Bytes {
        match info.take_output() {
            Output::Chunk(c) => c,
            other => panic!("expected a chunk, got {other:?}"),
        }
    }

    #[test]
    fn pushes_and_replies_leave_in_order_without_interleaving() {
        let info = client("normal 0 0 0");
        assert!(!info.output_pending());
        assert!(info.push(Bytes::from_static(b"+a\r\n")));
        assert!(info.push(Bytes::from_static(b"+b\r\n")));
        assert!(info.output_pending());
        assert_eq!(info.omem.load(Ordering::Relaxed), 8);
        assert_eq!(info.oll.load(Ordering::Relaxed), 2);
        // Small chunks are written together, in order.
        assert_eq!(chunk(&info), &b"+a\r\n+b\r\n"[..]);
        assert_eq!(info.obl.load(Ordering::Relaxed), 8);
        assert_eq!(info.wrote(8, 0), Some(8));
        assert_eq!(info.take_output(), Output::Idle);
        assert!(!info.output_pending());

        // A chunk being written is never overtaken: nothing more is handed out until it is done,
        // and a reply queued at the back waits behind what was pushed before it.
        let big = Bytes::from(vec![b'x'; COALESCE]);
        assert!(info.push(big.clone()));
        assert_eq!(chunk(&info), big);
        assert!(info.push(Bytes::from_static(b"+p\r\n")));
        let mark = info.queue_reply(Bytes::from_static(b"+r\r\n"), false, 0);
        assert_eq!(mark, Some(8 + COALESCE as u64 + 8));
        assert_eq!(
            info.take_output(),
            Output::Idle,
            "the big chunk is in flight"
        );
        info.wrote(100, 0);
        assert_eq!(info.take_output(), Output::Idle, "still in flight");
        info.wrote(COALESCE as u64 - 100, 0);
        assert_eq!(chunk(&info), &b"+p\r\n+r\r\n"[..]);
        assert_eq!(info.wrote(8, 0), mark);

        // When the owner found nothing pending and wrote part of a reply directly, the rest goes
        // before a push that raced in meanwhile.
        assert!(info.push(Bytes::from_static(b"+late\r\n")));
        let written = info.written();
        let mark = info.queue_reply(Bytes::from_static(b"ly\r\n"), true, 0);
        assert_eq!(mark, Some(written + 4));
        assert_eq!(chunk(&info), &b"ly\r\n+late\r\n"[..]);
    }

    #[test]
    fn hard_limit_closes_at_once_and_refuses_more() {
        let info = client("normal 100 0 0 pubsub 1000 0 0");
        assert!(info.push(Bytes::from(vec![b'a'; 60])));
        assert!(
            !info.push(Bytes::from(vec![b'b'; 40])),
            "100 reaches the limit"
        );
        assert!(info.killed.load(Ordering::Relaxed));
        assert_eq!(
            info.omem.load(Ordering::Relaxed),
            0,
            "pending output is dropped"
        );
        assert_eq!(info.take_output(), Output::Closed);
        assert!(!info.push(Bytes::from_static(b"+x\r\n")));
        assert_eq!(
            info.queue_reply(Bytes::from_static(b"+x\r\n"), false, 0),
            None
        );

        // A subscribed client is held to the pubsub class.
        let info = client("normal 100 0 0 pubsub 1000 0 0");
        info.sub.store(1, Ordering::Relaxed);
        assert!(info.push(Bytes::from(vec![b'a'; 500])));
        assert!(!info.killed.load(Ordering::Relaxed));
        assert!(!info.push(Bytes::from(vec![b'a'; 500])));
    }

    #[test]
    fn soft_limit_closes_only_when_exceeded_continuously() {
        let info = client("normal 0 50 1");
        assert!(info
            .queue_reply(Bytes::from(vec![b'a'; 60]), false, 1000)
            .is_some());
        // Over the soft limit since t=1000: tolerated for one second.
        assert_eq!(info.check_output_limits(1500), Some(2001));
        assert_eq!(info.check_output_limits(2000), Some(2001));
        assert!(!info.killed.load(Ordering::Relaxed));
        assert_eq!(info.check_output_limits(2001), None);
        assert!(info.killed.load(Ordering::Relaxed));

        // Dropping below the limit restarts the clock.
        let info = client("normal 0 50 1");
        info.queue_reply(Bytes::from(vec![b'a'; 60]), false, 0);
        let _ = chunk(&info);
        assert!(info.wrote(20, 900).is_some());
        assert_eq!(info.check_output_limits(950), None, "below the soft limit");
        info.queue_reply(Bytes::from(vec![b'b'; 20]), false, 1800);
        assert_eq!(info.check_output_limits(2500), Some(2801));
        assert!(!info.killed.load(Ordering::Relaxed));
        // A limit that is off never closes.
        let info = client("normal 0 0 0");
        info.queue_reply(Bytes::from(vec![b'a'; 1 << 20]), false, 0);
        assert_eq!(info.check_output_limits(i64::MAX / 2), None);
        assert!(!info.killed.load(Ordering::Relaxed));
    }

    #[test]
    fn kill_goes_through_the_handle_never_the_descriptor() {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        // The handle's fd number now belongs to another socket (the client closed and the number
        // was reused): killing the stale handle must leave that socket alone.
        let (mut a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
        let config = Config::default();
        let info = ClientInfo::new(
            1,
            String::new(),
            String::new(),
            a.as_raw_fd(),
            0,
            config.output_limits().clone(),
        );
        info.kill();
        assert!(info.killed.load(Ordering::Relaxed));
        assert_eq!(info.take_output(), Output::Closed);
        assert!(!info.push(Bytes::from_static(b"+x\r\n")));
        a.write_all(b"still open").unwrap();
        let mut buf = [0u8; 10];
        b.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"still open");
    }
}
