//! One client connection, served by two tasks on the thread that accepted it (it never moves):
//!
//! * the **reader** reads → parses a batch → dispatches → replies (once the thread's other ready
//!   connections have run theirs, see `strata_shard::round_end`), until the client goes away;
//! * the **writer** drains the client's outbox ([`ClientInfo`]'s push path): messages other threads
//!   pushed, and the part of a reply the socket did not take at once. It also closes the client when
//!   told to (CLIENT KILL, SHUTDOWN, an output-buffer limit, the idle `timeout`).
//!
//! Only these two tasks touch the socket, and only the writer shuts it down (which ends a pending
//! read). Output order: the reader writes a reply straight to the socket only when the outbox is
//! empty and nothing is being written; otherwise the reply joins the outbox, behind what is there,
//! and the reader waits until it has been written before reading more — so a client that does not
//! read holds at most one batch of its own replies, as before, plus whatever is pushed to it,
//! bounded by `client-output-buffer-limit`.
//!
//! Memory per connection is bounded: the query buffer by `client-query-buffer-limit` (the
//! connection is closed beyond it, as Redis does; shrunk after a big request and freed while the
//! client idles, see [`sweep_idle_inputs`]), a request's arguments by the parser's limits,
//! replies by what one batch produces (and, with a hard `client-output-buffer-limit`, by that limit
//! while the batch runs: see `dispatch::sub_batch::Progress`), and pushed output by the same setting.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::os::fd::{AsRawFd, RawFd};
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::future::{select, Either};
use strata_node::args::eq_ci;
use strata_node::clients::{client_line, Output};
use strata_node::server_log;
use strata_node::services::connection::is_authenticated;
use strata_node::services::server::crash;
use strata_node::services::{client_evict, monitor};
use strata_node::{ClientInfo, ServerState, Session};
use strata_resp::{ParseLimits, Protocol, ReplyBuf, RequestParser};
use strata_rt::net::Stream;
use strata_shard::{now_ms, round_end, with_shard};

use crate::dispatch::Batch;

const READ_CHUNK: usize = 16 * 1024;
/// Buffers grown past this by one large request or reply are released once drained.
const KEEP_CAPACITY: usize = 1024 * 1024;
/// A read buffer larger than this (Redis's `PROTO_RESIZE_THRESHOLD`) shrinks to its recent peak
/// when that peak uses less than half of it, weighed at most every [`RESIZE_EVERY_MS`].
const RESIZE_THRESHOLD: usize = 32 * 1024;
const RESIZE_EVERY_MS: i64 = 100;
/// An empty read buffer is freed once its client has been idle this long (Redis: over 2 s).
const IDLE_INPUT_MS: i64 = 2000;
/// The batch's command list (24 bytes a command) is released after a pipeline of more commands
/// than this, so an idle connection keeps at most 3 KiB of it.
const KEEP_COMMANDS: usize = 128;

struct Limits {
    epoch: u64,
    parse: ParseLimits,
    query_buffer: usize,
}

impl Limits {
    fn load(state: &ServerState) -> Limits {
        let cfg = &state.config;
        let epoch = cfg.epoch();
        let parse = ParseLimits {
            max_bulk_len: cfg.get_i64("proto-max-bulk-len").max(1) as usize,
            ..ParseLimits::default()
        };
        Limits {
            epoch,
            parse,
            query_buffer: cfg.get_i64("client-query-buffer-limit").max(1) as usize,
        }
    }
}

/// What the reader and the writer of one connection share (both run on its thread).
#[derive(Default)]
struct Local {
    /// The reader has finished: the writer stops, dropping whatever is still pushed.
    reader_done: Cell<bool>,
    /// The writer has finished (the client is closed): the reader stops.
    writer_done: Cell<bool>,
    /// The reader is running a batch: the client is not idle, whatever its last read.
    busy: Cell<bool>,
    /// The reader, waiting for its reply to be written.
    reader: Cell<Option<Waker>>,
    /// The reader waits for input with an empty buffer it may give up (see
    /// [`sweep_idle_inputs`]): since this time of last activity (unix ms), 0 when not.
    input_idle_since: Cell<i64>,
    /// The sweep asks the reader to free its read buffer.
    free_input: Cell<bool>,
    /// The reader, waiting for input with an empty buffer; `input_waker_given` while it is there
    /// (or was taken by the sweep, until the reader has freed its buffer).
    input_waker: Cell<Option<Waker>>,
    input_waker_given: Cell<bool>,
    /// The client, for the cron's visit (its reply buffer's size and peak live there).
    client: std::cell::OnceCell<Arc<ClientInfo>>,
    /// When the reply buffer's peak was last forgotten (unix ms).
    peak_reset_at: Cell<i64>,
}

thread_local! {
    /// This thread's connections, for [`sweep_idle_inputs`] (dead entries dropped as it meets
    /// them), and where the last sweep stopped.
    static CONNECTIONS: std::cell::RefCell<(Vec<std::rc::Weak<Local>>, usize)> =
        const { std::cell::RefCell::new((Vec::new(), 0)) };
}

/// Frees the read buffers of this thread's clients idle for over [`IDLE_INPUT_MS`] with nothing
/// buffered, as Redis's client cron frees an idle client's query buffer (16 KiB each: a pool of
/// idle connections costs almost nothing). Called on every cron tick (`hz` times a second); like
/// Redis's, each tick visits a tenth of the clients (at least 64), so each is seen about once a
/// second at the default `hz` and a tick's work is bounded.
pub fn sweep_idle_inputs(now: i64) {
    CONNECTIONS.with(|c| {
        let (conns, cursor) = &mut *c.borrow_mut();
        let mut visits = conns.len().div_ceil(10).max(64).min(conns.len());
        while visits > 0 && !conns.is_empty() {
            visits -= 1;
            if *cursor >= conns.len() {
                *cursor = 0;
            }
            let Some(local) = conns[*cursor].upgrade() else {
                conns.swap_remove(*cursor);
                continue;
            };
            *cursor += 1;
            if let Some(info) = local.client.get() {
                resize_reply_buffer(info, &local, now);
            }
            let since = local.input_idle_since.get();
            if since > 0 && now - since > IDLE_INPUT_MS && !local.free_input.get() {
                local.free_input.set(true);
                if let Some(w) = local.input_waker.take() {
                    w.wake();
                }
            }
        }
    });
}

/// The cron's look at a client's reply buffer, as Redis's `clientsCronResizeOutputBuffer`: the
/// size kept between batches shrinks to the recent peak or doubles toward 16 KiB
/// (`settings::reply_buffer::resize`), then the peak is forgotten if it is older than
/// `peak-reset-time`. The buffer itself follows at the end of the next batch (an idle one's is
/// freed anyway, see [`IDLE_INPUT_MS`]).
fn resize_reply_buffer(info: &ClientInfo, local: &Local, now: i64) {
    use strata_node::settings::reply_buffer as rb;
    let size = info.rbs.load(Ordering::Relaxed) as usize;
    let peak = info.rbp.load(Ordering::Relaxed) as usize;
    if let Some(new) = rb::resize(size, peak) {
        rb::count(new < size);
        info.rbs.store(new as u64, Ordering::Relaxed);
    }
    let reset = rb::peak_reset_ms();
    if reset >= 0 && now - local.peak_reset_at.get() >= reset && !local.busy.get() {
        // What the buffer holds between batches: nothing.
        info.rbp.store(0, Ordering::Relaxed);
        local.peak_reset_at.set(now);
    }
}

impl Local {
    fn wake_reader(&self) {
        if let Some(w) = self.reader.take() {
            w.wake();
        }
    }
}

/// Writes as much of `buf` as the socket takes without waiting; returns the bytes written (0 when
/// the buffer is full or on any error, which the event-loop write that follows then reports).
///
/// A reply that fits in the socket's buffer (nearly all) goes out in this one call, without
/// consulting the event loop.
fn send_now(fd: RawFd, buf: &[u8]) -> usize {
    let mut sent = 0;
    while sent < buf.len() {
        // SAFETY: `buf[sent..]` is valid for reads of its length; MSG_DONTWAIT makes this one call
        // non-blocking whatever the socket's mode; MSG_NOSIGNAL avoids SIGPIPE on a closed peer.
        let n = unsafe {
            libc::send(
                fd,
                buf[sent..].as_ptr().cast(),
                buf.len() - sent,
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n <= 0 {
            break;
        }
        sent += n as usize;
    }
    sent
}

/// Redis's `anetKeepAlive`: probes after `interval` idle seconds, then every interval/3, and the
/// peer is dropped after 3 unanswered probes. 0 leaves keepalive off.
fn set_keepalive(fd: RawFd, interval: i64) {
    if interval <= 0 {
        return;
    }
    let interval = interval.min(i32::MAX as i64) as libc::c_int;
    let opts = [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1),
        (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, interval),
        (
            libc::IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            (interval / 3).max(1),
        ),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3),
    ];
    for (level, name, value) in opts {
        // SAFETY: `value` is a live c_int and its size is passed; failure only leaves the option off.
        unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            );
        }
    }
}

/// Names the client whose batch runs for a crash report's CURRENT CLIENT INFO, until dropped
/// (then no client is named: another connection's batch may have run meanwhile and named its own).
struct RunningClient;

impl RunningClient {
    fn set(info: &ClientInfo) -> RunningClient {
        crash::set_current_client(Some(info));
        RunningClient
    }
}

impl Drop for RunningClient {
    fn drop(&mut self) {
        crash::set_current_client(None);
    }
}

/// Who a connection is with, as CLIENT LIST shows it.
pub struct Peer {
    /// The client's address (`ip:port`; `<unixsocket>:0` over the Unix socket).
    pub addr: String,
    /// The address it connected to.
    pub laddr: String,
    /// Over the Unix socket (CLIENT LIST flag `U`).
    pub unix: bool,
}

/// Serves one client until it disconnects, is killed, or sends something fatal. TCP and Unix
/// socket clients are served alike.
pub async fn serve(stream: Stream, peer: Peer, state: Arc<ServerState>) {
    let fd = stream.as_raw_fd();
    if !peer.unix {
        set_keepalive(fd, state.config.get_i64("tcp-keepalive"));
    }
    let info = state.register_client(peer.addr, peer.laddr, fd, now_ms());
    if peer.unix {
        info.unix_socket.store(true, Ordering::Relaxed);
    }
    // Shared by the two tasks: the reader reads, the writer writes and shuts the socket down.
    let stream = Rc::new(stream);
    let local = Rc::new(Local {
        peak_reset_at: Cell::new(now_ms()),
        ..Local::default()
    });
    let _ = local.client.set(info.clone());
    CONNECTIONS.with(|c| c.borrow_mut().0.push(Rc::downgrade(&local)));
    let writer = strata_rt::spawn(write_loop(
        stream.clone(),
        fd,
        info.clone(),
        state.clone(),
        local.clone(),
    ));
    read_loop(&stream, fd, &info, &state, &local).await;
    info.closing.store(true, Ordering::Relaxed);
    local.reader_done.set(true);
    info.wake();
    writer.await;
    info.close();
    strata_node::clients::forget(&info);
    state.unregister_client(info.id);
}

/// Whether a command may authenticate the connection (AUTH, HELLO ... AUTH): while
/// unauthenticated, a batch ends after one, so that what follows is parsed with the new state's
/// limits.
fn may_authenticate(args: &[Bytes]) -> bool {
    match args.first() {
        Some(name) if eq_ci(name, "auth") => true,
        Some(name) if eq_ci(name, "hello") => args.iter().skip(2).any(|a| eq_ci(a, "auth")),
        _ => false,
    }
}

async fn read_loop(
    stream: &Stream,
    fd: RawFd,
    info: &Arc<ClientInfo>,
    state: &Arc<ServerState>,
    local: &Local,
) {
    let needs_auth = state
        .config
        .get("requirepass")
        .is_some_and(|p| !p.is_empty());
    let mut session = Session::new(info.clone(), !needs_auth);
    let mut limits = Limits::load(state);
    let mut parser = RequestParser::new(limits.parse);
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = ReplyBuf::new(Protocol::Resp2);
    // One batch's commands; reused, so that a lone command does not allocate the list each time.
    let mut cmds: Vec<Vec<Bytes>> = Vec::new();
    // Bytes received since the last complete request: what an unfinished request is holding.
    let mut unfinished = 0usize;
    with_shard(|s| s.stats.connections_received += 1);

    // The size of the read buffer's allocation, as far as seen since it was last replaced. Its
    // `capacity()` cannot say once the requests at its front are split off: that counts only the
    // room left after them, while the whole allocation stays alive behind the buffer.
    let mut size = 0usize;
    // The most it held at once since `weighed` (unix ms), when its size was last weighed
    // against that peak.
    let mut peak = 0usize;
    let mut weighed = now_ms();

    'conn: while !info.killed.load(Ordering::Relaxed) {
        if size > RESIZE_THRESHOLD && rbuf.len() < READ_CHUNK {
            // Drained (but for a partial request, moved over): a big request's buffer is not
            // kept for the small ones that follow it — past KEEP_CAPACITY at once, else as Redis
            // does, once the recent peak uses less than half of it.
            let keep = if size > KEEP_CAPACITY {
                Some(READ_CHUNK)
            } else {
                let now = now_ms();
                (now - weighed >= RESIZE_EVERY_MS)
                    .then(|| {
                        weighed = now;
                        std::mem::replace(&mut peak, rbuf.len()).max(rbuf.len())
                    })
                    .filter(|&recent| recent < size / 2)
                    .map(|recent| recent.max(READ_CHUNK))
            };
            if let Some(keep) = keep {
                let mut fresh = BytesMut::with_capacity(keep);
                fresh.extend_from_slice(&rbuf);
                rbuf = fresh;
                size = 0;
            }
        }
        // Grow toward a large announced argument by doubling, so memory follows the bytes that
        // actually arrive (amortised O(n) copying) rather than the length a client claims; once
        // the rest of it would take less than a doubling, to its size plus one read's room for
        // what follows it (Redis sizes a big argument's buffer exactly): a 300 KB value is held
        // in 316 KB, not 512 (or 1024, had the read after it doubled the buffer again).
        let missing = parser.bytes_needed_hint();
        let want = missing.min(rbuf.capacity()).max(READ_CHUNK);
        if rbuf.capacity() - rbuf.len() < want {
            if missing > READ_CHUNK && missing <= rbuf.capacity() {
                let mut exact = BytesMut::with_capacity(rbuf.len() + missing + READ_CHUNK);
                exact.extend_from_slice(&rbuf);
                rbuf = exact;
            } else {
                rbuf.reserve(want);
            }
        }
        let len = rbuf.len();
        let cap = rbuf.capacity();
        size = size.max(cap);
        // The allocation's room, as at the end of a batch (the view's capacity leaves out what
        // was split off its front, which stays allocated).
        info.qbuf_free.store((size - len) as u64, Ordering::Relaxed);
        let read = {
            let mut read = pin!(stream.read(rbuf.spare_capacity_mut()));
            if len == 0 {
                // Idle for long, the buffer is freed (see `sweep_idle_inputs`): a waiting read
                // takes nothing from the socket until it completes, so it can be dropped with it.
                let since = info.last_active_ms.load(Ordering::Relaxed).max(1);
                local.input_idle_since.set(since);
                let read = poll_fn(|cx| {
                    if let Poll::Ready(r) = read.as_mut().poll(cx) {
                        Poll::Ready(Some(r))
                    } else if local.free_input.get() {
                        Poll::Ready(None)
                    } else {
                        // The task's waker stays the same: given once, until the sweep used it.
                        if !local.input_waker_given.replace(true) {
                            local.input_waker.set(Some(cx.waker().clone()));
                        }
                        Poll::Pending
                    }
                })
                .await;
                local.input_idle_since.set(0);
                if local.free_input.replace(false) {
                    // The sweep took the waker (and, if input came first, asked in vain).
                    local.input_waker_given.set(false);
                }
                read
            } else {
                Some(read.await)
            }
        };
        let Some(res) = read else {
            // The pending read, dropped, took nothing from the socket; its buffer went with it.
            // A new one is allocated once the client sends again. (Nothing is pending in `out`:
            // a batch's replies are sent, or handed to the outbox, before the next read.)
            rbuf = BytesMut::new();
            // The reply buffer too: empty between batches, it may have kept some room (up to
            // the client's `rbs`).
            out.buf = Vec::new();
            (size, peak) = (0, 0);
            info.qbuf_free.store(0, Ordering::Relaxed);
            info.reply_mem.store(0, Ordering::Relaxed);
            stream.readable().await;
            continue;
        };
        let n = match res {
            Ok(0) => {
                // The client closed its side: what it was sent still goes out before the
                // connection ends (it may be reading still, after a half-close).
                flushed(
                    info,
                    local,
                    info.written() + info.omem.load(Ordering::Relaxed),
                )
                .await;
                break;
            }
            Err(_) => break,
            Ok(n) => {
                // SAFETY: the read initialised `n` bytes of the spare room, which starts at `len`.
                unsafe { rbuf.set_len(len + n) };
                n
            }
        };
        peak = peak.max(rbuf.len());
        info.qbuf_free
            .store(size.saturating_sub(rbuf.len()) as u64, Ordering::Relaxed);
        if info.killed.load(Ordering::Relaxed) {
            break;
        }
        info.last_active_ms.store(now_ms(), Ordering::Relaxed);
        with_shard(|s| s.stats.net_input_bytes += n as u64);
        if state.config.epoch() != limits.epoch {
            limits = Limits::load(state);
            parser.set_limits(limits.parse);
        }

        // Normally one batch per read. While unauthenticated, a batch ends after a command that
        // may authenticate, so the rest of the read is parsed with the limits of the new state.
        let mut parsed_any = false;
        let mut open = true;
        while open {
            // What CLIENT LIST shows as qbuf while this batch runs: the buffered input including
            // the commands being executed, as Redis's query buffer is trimmed only afterwards.
            let buffered = rbuf.len();
            let mut fatal = None;
            let unauthenticated = !is_authenticated(&session, state);
            let mut more = false;
            loop {
                match parser.next(&mut rbuf, unauthenticated) {
                    Ok(Some(args)) => {
                        let boundary = unauthenticated && may_authenticate(&args);
                        cmds.push(args);
                        if boundary {
                            more = true;
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        fatal = Some(e);
                        break;
                    }
                }
            }
            parsed_any |= !cmds.is_empty();
            unfinished = if parsed_any {
                rbuf.len()
            } else {
                unfinished + n
            };
            if unfinished > limits.query_buffer {
                if strata_node::log::enabled(strata_node::log::Level::Warning) {
                    let mut head = Vec::new();
                    monitor::repr(&mut head, &rbuf[..rbuf.len().min(64)]);
                    server_log!(
                        Warning,
                        "Closing client that reached max query buffer length: {} (qbuf initial bytes: {})",
                        client_line(info, now_ms(), 0),
                        String::from_utf8_lossy(&head)
                    );
                }
                break 'conn;
            }
            info.qbuf.store(buffered as u64, Ordering::Relaxed);
            info.argv_mem
                .store(parser.held_bytes() as u64, Ordering::Relaxed);
            // maxmemory-clients: a client whose input alone takes the clients past the limit
            // (one huge argument, or a request of many never finished) is evicted before any of
            // it runs.
            if client_evict::settle(state, info) {
                break 'conn;
            }

            if !cmds.is_empty() {
                local.busy.set(true);
                if let Some(t) = &session.tracking {
                    t.hold();
                }
                let _running = RunningClient::set(info);
                Batch {
                    state,
                    session: &mut session,
                    out: &mut out,
                    conn: stream,
                }
                .run(&mut cmds)
                .await;
                local.busy.set(false);
                if cmds.capacity() > KEEP_COMMANDS {
                    // A long pipeline's list is not kept while the connection idles.
                    cmds = Vec::new();
                }
            }
            // A pipeline held back by CLIENT PAUSE: answer what ran, then run the rest.
            while let Some(mut rest) = session.deferred.take() {
                if !reply(&mut out, fd, info, local, false).await {
                    break 'conn;
                }
                local.busy.set(true);
                let _running = RunningClient::set(info);
                Batch {
                    state,
                    session: &mut session,
                    out: &mut out,
                    conn: stream,
                }
                .run(&mut rest)
                .await;
                local.busy.set(false);
            }
            // What the batch left the client holding (its replies, MULTI queue, WATCHes,
            // subscriptions), counted before the replies wait for the end of the round, and
            // maxmemory-clients after it, as Redis updates a client's memory after each command.
            client_evict::publish_session(&mut session);
            if strata_node::clients::enabled() {
                info.reply_mem
                    .store(out.buf.capacity() as u64, Ordering::Relaxed);
            }
            if client_evict::settle(state, info) {
                break 'conn;
            }
            if let Some(e) = fatal {
                with_shard(|s| s.stats.count_error(e.0.as_bytes()));
                out.error(&e.0);
                session.close_after_reply = true;
            }
            if session.close_after_reply {
                // Gone for tracking as soon as the reply can be seen (QUIT's +OK).
                info.closing.store(true, Ordering::Relaxed);
                strata_node::services::tracking::disable(&mut session);
            }
            info.qbuf.store(rbuf.len() as u64, Ordering::Relaxed);
            // The room left is the allocation's, as Redis's `sdsavail`: the commands just split
            // off the front are reclaimed by the next read (until then the buffer's view
            // excludes them, and CLIENT LIST would show a buffer that shrank by a request).
            info.qbuf_free
                .store(size.saturating_sub(rbuf.len()) as u64, Ordering::Relaxed);
            // Replies wait for the end of the thread's round of ready connections, then go out
            // back to back, as Redis writes every reply of an event-loop iteration before it
            // sleeps: a client pipelining on many connections is woken once for a burst of replies
            // rather than once per batch (which made most of the kernel time of a pipelined
            // benchmark), and no connection is served twice while others wait.
            // Not for a client that others push to (subscriber, monitor): a message pushed while
            // the reply waits would overtake it (a message before its SUBSCRIBE's confirmation).
            // A tracking client's own invalidations are held until its reply is queued anyway.
            if !out.is_empty() && session.pubsub.total() == 0 && !session.monitor {
                round_end().await;
            }
            // A connection about to close (QUIT) waits for its last reply to leave; any other
            // goes on reading while the writer drains what the socket did not take.
            let replied = reply(&mut out, fd, info, local, session.close_after_reply).await;
            // Invalidations of this client's own writes follow the replies (see tracking).
            if let Some(t) = &session.tracking {
                t.release();
            }
            if !replied {
                break 'conn;
            }
            // The replies are the socket's or the outbox's now: the reply buffer keeps its room.
            info.reply_mem
                .store(out.buf.capacity() as u64, Ordering::Relaxed);
            if strata_node::clients::enabled() {
                strata_node::clients::refresh(info);
            }
            info.last_active_ms.store(now_ms(), Ordering::Relaxed);
            if session.close_after_reply {
                break 'conn;
            }
            open = more;
        }
    }
    // Withdraw the client's WATCHes from the shards (MULTI state dies with the session).
    strata_node::services::multi::unwatch_all(&mut session, &state.shards).await;
    strata_node::services::tracking::disable(&mut session);
    if session.monitor {
        strata_node::services::monitor::remove(info.id);
    }
}

/// Sends the batch's replies in `out`: straight to the socket when nothing is pending (the common
/// case, one `send`), else through the outbox, which the writer drains; with `wait`, returns only
/// once they have been written. False if the client is closed.
///
/// Without `wait` the reader goes on reading, as Redis does: a client may send a pipeline larger
/// than the socket buffers before it reads a reply (redis-py sends a whole pipeline, then reads),
/// and a reader that waited for its replies to leave would never read the rest of it, while the
/// client, blocked sending it, never reads: both would wait for ever. What a client does not read
/// is bounded as in Redis, by `client-output-buffer-limit` and `maxmemory-clients`.
async fn reply(
    out: &mut ReplyBuf,
    fd: RawFd,
    info: &ClientInfo,
    local: &Local,
    wait: bool,
) -> bool {
    if info.killed.load(Ordering::Relaxed) {
        return false;
    }
    if out.is_empty() {
        return true;
    }
    let len = out.buf.len();
    // The reply buffer's peak: what this round's replies filled of it.
    let kept = info.rbs.load(Ordering::Relaxed) as usize;
    if len.min(kept) as u64 > info.rbp.load(Ordering::Relaxed) {
        info.rbp.store(len.min(kept) as u64, Ordering::Relaxed);
    }
    let direct = !info.output_pending();
    let sent = if direct { send_now(fd, &out.buf) } else { 0 };
    with_shard(|s| s.stats.net_output_bytes += sent as u64);
    if sent == len {
        out.buf.clear();
        if out.buf.capacity() > kept {
            out.buf = Vec::new();
        }
        return true;
    }
    let rest = Bytes::from(out.take()).slice(sent..);
    let Some(mark) = info.queue_reply(rest, direct, now_ms()) else {
        return false;
    };
    !wait || flushed(info, local, mark).await
}

/// Waits until the output up to `mark` (a [`ClientInfo::written`] count) has been written, or the
/// client is closed, or the writer stopped; false in the last two cases.
async fn flushed(info: &ClientInfo, local: &Local, mark: u64) -> bool {
    poll_fn(|cx| {
        if local.writer_done.get() || info.killed.load(Ordering::Relaxed) || info.written() >= mark
        {
            Poll::Ready(())
        } else {
            local.reader.set(Some(cx.waker().clone()));
            Poll::Pending
        }
    })
    .await;
    !local.writer_done.get() && !info.killed.load(Ordering::Relaxed)
}

/// Waits until the client is closed or the reader has finished, or (with `on_output`) output is
/// queued or the writer was nudged (settings changed), or `deadline` (unix ms) has passed, or —
/// without a deadline — a push took the output over the soft limit, whose time the caller must
/// then watch (traffic may stop right after: the limit must still run out).
async fn wait_event(info: &ClientInfo, local: &Local, on_output: bool, deadline: Option<i64>) {
    let signal = poll_fn(|cx| {
        info.register_waker(cx.waker());
        if local.reader_done.get()
            || info.killed.load(Ordering::Relaxed)
            || (on_output && (info.output_pending() || info.take_nudge()))
            || (deadline.is_none() && info.soft_limit_armed())
        {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    });
    match deadline {
        None => signal.await,
        Some(at) => {
            let wait = Duration::from_millis((at - now_ms()).max(0) as u64);
            select(pin!(signal), strata_rt::sleep(wait)).await;
        }
    }
}

/// The `timeout` setting in ms (0: none), re-read when the configuration changes.
struct IdleTimeout {
    epoch: u64,
    ms: i64,
}

impl IdleTimeout {
    fn get(&mut self, state: &ServerState) -> i64 {
        let epoch = state.config.epoch();
        if epoch != self.epoch {
            self.epoch = epoch;
            self.ms = state.config.get_i64("timeout").saturating_mul(1000);
        }
        self.ms
    }
}

/// When the client should be checked for idleness next, or None when it never times out; closes
/// it (returning None) if it has been idle too long. Blocked and subscribed clients, and a client
/// whose batch is running, are exempt, as in Redis.
fn idle_check(info: &ClientInfo, local: &Local, timeout_ms: i64, now: i64) -> Option<i64> {
    if timeout_ms <= 0 {
        return None;
    }
    let due = info.last_active_ms.load(Ordering::Relaxed) + timeout_ms + 1;
    if due > now {
        return Some(due);
    }
    let exempt =
        local.busy.get() || info.blocked.load(Ordering::Relaxed) || info.subscriptions() > 0;
    if exempt {
        return Some(now + timeout_ms);
    }
    info.kill();
    None
}

/// The writer: drains the outbox in order, one chunk at a time, until the client is closed or the
/// reader finishes; then shuts the socket down (ending the reader's pending read).
async fn write_loop(
    wr: Rc<Stream>,
    fd: RawFd,
    info: Arc<ClientInfo>,
    state: Arc<ServerState>,
    local: Rc<Local>,
) {
    let mut timeout = IdleTimeout {
        epoch: u64::MAX,
        ms: 0,
    };
    'outer: while !local.reader_done.get() {
        let chunk = match info.take_output() {
            Output::Closed => break,
            Output::Chunk(c) => c,
            Output::Idle => {
                let due = idle_check(&info, &local, timeout.get(&state), now_ms());
                if info.killed.load(Ordering::Relaxed) {
                    break;
                }
                wait_event(&info, &local, true, due).await;
                continue;
            }
        };
        let sent = send_now(fd, &chunk);
        if info.wrote(sent as u64, now_ms()).is_none() {
            break;
        }
        if sent < chunk.len() {
            let rest = chunk.slice(sent..);
            let rest_len = rest.len() as u64;
            let mut write = pin!(wr.write_all(&rest));
            loop {
                // Keep checking the soft limit while the client does not read: it may run out
                // with nothing added.
                let recheck = info.check_output_limits(now_ms());
                if info.killed.load(Ordering::Relaxed) || local.reader_done.get() {
                    break 'outer;
                }
                let stop = pin!(wait_event(&info, &local, false, recheck));
                match select(write.as_mut(), stop).await {
                    Either::Left((Ok(()), _)) => break,
                    Either::Left((Err(_), _)) => break 'outer,
                    Either::Right(_) => continue,
                }
            }
            if info.wrote(rest_len, now_ms()).is_none() {
                break;
            }
        }
        with_shard(|s| s.stats.net_output_bytes += chunk.len() as u64);
        info.last_active_ms.store(now_ms(), Ordering::Relaxed);
        local.wake_reader();
    }
    // Only the owner acts on its socket: this ends the reader's pending read (and any write still
    // in flight) at once; the descriptor is closed when both halves are dropped.
    // SAFETY: `fd` is this connection's socket, kept open by `wr` until this function returns.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
    local.writer_done.set(true);
    local.wake_reader();
}
