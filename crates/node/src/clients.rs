//! The client registry's entries: what other threads may read of a client (CLIENT LIST/INFO) or
//! do to it (CLIENT KILL, pushes), its output queue and limits, its CLIENT LIST line, and the
//! memory every client counts toward `maxmemory-clients` (the accounting; the eviction it drives
//! is `services::client_evict`).

use std::collections::VecDeque;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::task::AtomicWaker;
use strata_shard::now_ms;

use crate::config::{ClientClass, OutputLimits};

/// `ClientInfo::tracking` bits, for CLIENT LIST/INFO flags.
pub const FLAG_ON: u8 = 1;
pub const FLAG_BROKEN: u8 = 2;
pub const FLAG_BCAST: u8 = 4;

/// CLIENT UNBLOCK … TIMEOUT (the default): the blocked command answers as if it timed out.
pub const UNBLOCK_TIMEOUT: u8 = 1;
/// CLIENT UNBLOCK … ERROR: the blocked command answers `-UNBLOCKED …`.
pub const UNBLOCK_ERROR: u8 = 2;

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
    /// The reply buffer kept between batches and its recent peak (CLIENT LIST `rbs`, `rbp`), as
    /// the connection sizes it (`crate::settings::reply_buffer`).
    pub rbs: AtomicU64,
    pub rbp: AtomicU64,
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
    /// Connected over the Unix socket (CLIENT LIST flag `U`); set by the connection at start.
    pub unix_socket: AtomicBool,
    /// QUIT answered or the connection ending: a tracking redirect to it is broken from now on, as
    /// in Redis, where the client is gone once its QUIT reply has been written.
    pub closing: AtomicBool,
    /// CLIENT TRACKING's REDIRECT client id (0: none), for CLIENT LIST `redir`.
    pub tracking_redir: AtomicU64,
    /// Bytes of the MULTI queue and the WATCHed keys (CLIENT LIST `multi-mem`), and of the
    /// subscriptions and tracking prefixes; the owner publishes them after each batch (see
    /// `crate::services::client_evict`).
    pub multi_mem: AtomicU64,
    pub aux_mem: AtomicU64,
    /// Bytes of a partly read request's arguments the parser holds outside the read buffer
    /// (CLIENT LIST `argv-mem` of a client in the middle of sending one).
    pub argv_mem: AtomicU64,
    /// The connection's reply buffers: those of the batch being run, or the room the buffer
    /// keeps between batches (CLIENT LIST `tot-mem`, as Redis counts its reply buffer).
    pub reply_mem: AtomicU64,
    /// What this client adds to the clients' total that `maxmemory-clients` limits
    /// (`crate::services::client_evict`); `u64::MAX` once the connection is gone.
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
            rbs: AtomicU64::new(crate::settings::reply_buffer::MAX as u64),
            rbp: AtomicU64::new(crate::settings::reply_buffer::MAX as u64),
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
            unix_socket: AtomicBool::new(false),
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
        let line = client_line(self, now_ms(), 0);
        self.close_locked(&mut ob);
        drop(ob);
        crate::server_log!(
            Warning,
            "Client {line} scheduled to be closed ASAP for overcoming of output buffer limits."
        );
        self.waker.wake();
    }

    fn mirror(&self, ob: &Outbox) {
        self.omem.store(ob.pending, Ordering::Relaxed);
        self.obl.store(ob.in_flight, Ordering::Relaxed);
        self.oll.store(ob.queue.len() as u64, Ordering::Relaxed);
        // Pushes from other threads grow a subscriber's output: the clients' total follows.
        if enabled() {
            refresh(self);
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
    /// Whether the client is on this host, as Redis's `connIsLocal` decides: over the Unix
    /// socket, or from a loopback address (127.0.0.0/8, ::1). What `local` means for
    /// `enable-debug-command` and `enable-protected-configs`.
    pub fn is_local(&self) -> bool {
        self.unix_socket.load(Ordering::Relaxed)
            || self.addr.starts_with("127.")
            || self.addr.starts_with("[::1]:")
    }

    pub fn soft_limit_armed(&self) -> bool {
        self.soft_armed.load(Ordering::Relaxed)
    }
}

/// One CLIENT LIST line (without its newline): Redis 7.0's fields in Redis's order, then 7.2's
/// `lib-name` and `lib-ver`. Output not yet written to the socket is `omem` bytes: `obl` of the
/// chunk being written and `oll` chunks queued behind it; the read buffer holds `qbuf` bytes and
/// has `qbuf-free` more room; `multi-mem` is the MULTI queue and WATCHed keys; `tot-mem` all of it
/// with subscriptions and tracking prefixes ([`ClientInfo::tot_mem`]); `rbs` is the reply buffer
/// the connection keeps between batches and `rbp` its recent peak.
pub fn client_line(c: &ClientInfo, now: i64, argv_mem: usize) -> String {
    let text = |m: &std::sync::Mutex<Option<Bytes>>| {
        m.lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    };
    let load = |a: &std::sync::atomic::AtomicU32| a.load(Ordering::Relaxed);
    let multi = c.multi.load(Ordering::Relaxed);
    let mut flags = String::new();
    if c.monitor.load(Ordering::Relaxed) {
        flags.push('O');
    }
    if c.subscriptions() > 0 {
        flags.push('P');
    }
    if multi >= 0 {
        flags.push('x');
    }
    if c.blocked.load(Ordering::Relaxed) {
        flags.push('b');
    }
    let tracking = c.tracking.load(Ordering::Relaxed);
    for (bit, f) in [(FLAG_ON, 't'), (FLAG_BROKEN, 'R'), (FLAG_BCAST, 'B')] {
        if tracking & bit != 0 {
            flags.push(f);
        }
    }
    if c.killed.load(Ordering::Relaxed) {
        flags.push('A');
    }
    if c.unix_socket.load(Ordering::Relaxed) {
        flags.push('U');
    }
    if c.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let qbuf = c.qbuf.load(Ordering::Relaxed);
    let qbuf_free = c.qbuf_free.load(Ordering::Relaxed);
    let omem = c.omem.load(Ordering::Relaxed);
    let obl = c.obl.load(Ordering::Relaxed);
    let oll = c.oll.load(Ordering::Relaxed);
    let cmd = crate::names::name(c.last_cmd.load(Ordering::Relaxed)).unwrap_or("NULL");
    // `tot_mem` counts a partly read request; the command running (CLIENT LIST itself, for the
    // caller) is added to both.
    let tot_mem = c.tot_mem() as usize + argv_mem;
    let argv_mem = argv_mem + c.argv_mem.load(Ordering::Relaxed) as usize;
    let multi_mem = c.multi_mem.load(Ordering::Relaxed);
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={flags} db={} sub={} psub={} \
         ssub={} multi={multi} qbuf={qbuf} qbuf-free={qbuf_free} argv-mem={argv_mem} multi-mem={multi_mem} rbs={} \
         rbp={} obl={obl} oll={oll} omem={omem} tot-mem={tot_mem} events={} cmd={cmd} user=default \
         redir={} resp={} lib-name={} lib-ver={}",
        c.id,
        c.addr,
        c.laddr,
        c.fd,
        text(&c.name),
        (now - c.created_ms).max(0) / 1000,
        (now - c.last_active_ms.load(Ordering::Relaxed)).max(0) / 1000,
        c.db.load(Ordering::Relaxed),
        load(&c.sub),
        load(&c.psub),
        load(&c.ssub),
        c.rbs.load(Ordering::Relaxed),
        c.rbp.load(Ordering::Relaxed),
        if omem > 0 { "rw" } else { "r" },
        if tracking & FLAG_ON != 0 {
            c.tracking_redir.load(Ordering::Relaxed) as i64
        } else {
            -1
        },
        c.resp.load(Ordering::Relaxed),
        text(&c.lib_name),
        text(&c.lib_ver),
    )
}

// ===== client memory (maxmemory-clients) =====

/// Sum of what every live client published (bytes).
static TOTAL: AtomicI64 = AtomicI64::new(0);
/// Clients evicted since start (INFO `evicted_clients`).
static EVICTED: AtomicU64 = AtomicU64::new(0);
/// A client that is gone publishes nothing more.
const GONE: u64 = u64::MAX;
/// The smallest limit honoured (Redis's floor).
const FLOOR: u64 = 128 * 1024;

/// Whether a `maxmemory-clients` is set: the one load the hot paths pay.
#[inline]
pub fn enabled() -> bool {
    crate::settings::maxmemory_clients() != 0
}

/// The limit in bytes now (0: none): a percentage needs `maxmemory`.
pub fn limit() -> u64 {
    let setting = crate::settings::maxmemory_clients();
    let bytes = match setting {
        0 => return 0,
        s if s > 0 => s as u64,
        p => match strata_shard::evict::maxmemory() {
            0 => return 0,
            max => (max as u128 * (-p) as u128 / 100).min(u64::MAX as u128) as u64,
        },
    };
    bytes.max(FLOOR)
}

/// Clients evicted since start.
pub fn evicted() -> u64 {
    EVICTED.load(Ordering::Relaxed)
}

/// Zeroes `evicted_clients` (CONFIG RESETSTAT).
pub fn reset_stats() {
    EVICTED.store(0, Ordering::Relaxed);
}

/// Brings the total up to date with `info`'s current size (see the module docs).
pub fn refresh(info: &ClientInfo) {
    let now = info.tot_mem();
    let mut old = info.mem_published.load(Ordering::Relaxed);
    loop {
        if old == GONE || old == now {
            return;
        }
        match info.mem_published.compare_exchange_weak(
            old,
            now,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => break,
            Err(seen) => old = seen,
        }
    }
    TOTAL.fetch_add(now as i64 - old as i64, Ordering::Relaxed);
}

/// Takes a closed client out of the total for good.
pub fn forget(info: &ClientInfo) {
    let old = info.mem_published.swap(GONE, Ordering::Relaxed);
    if old != GONE {
        TOTAL.fetch_sub(old as i64, Ordering::Relaxed);
    }
    let evicted = info.mem_evicted.swap(0, Ordering::Relaxed);
    if evicted != 0 {
        strata_shard::evict::clients_closing(-(evicted as i64));
    }
}

/// The sum of what every live client published (bytes).
pub fn total() -> i64 {
    TOTAL.load(Ordering::Relaxed)
}

/// Counts a client evicted (INFO `evicted_clients`).
pub fn count_evicted() {
    EVICTED.fetch_add(1, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

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
