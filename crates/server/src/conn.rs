//! One client connection: read → parse a batch → dispatch → write, until the client goes away.
//!
//! The connection lives on the thread that accepted it and never moves. Memory per connection is
//! bounded: the query buffer by `client-query-buffer-limit` (the connection is closed beyond it, as
//! Redis does), a request's arguments by the parser's limits, and replies by what one batch produces.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::BytesMut;
use monoio::buf::IoBufMut;
use monoio::io::{AsyncReadRent, AsyncWriteRentExt};
use monoio::net::TcpStream;
use strata_commands::connection::is_authenticated;
use strata_commands::{ServerState, Session};
use strata_resp::{ParseLimits, Protocol, ReplyBuf, RequestParser};
use strata_shard::{now_ms, with_shard};

use crate::dispatch::Batch;

const READ_CHUNK: usize = 16 * 1024;
/// Buffers grown past this by one large request or reply are released once drained.
const KEEP_CAPACITY: usize = 1024 * 1024;

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

/// Writes as much of `buf` as the socket takes without waiting; returns the bytes written (0 when
/// the buffer is full or on any error, which the event-loop write that follows then reports).
///
/// With io_uring this saves a ring round trip per reply: the send completes inline and the next
/// receive can be armed at once.
fn send_now(fd: std::os::fd::RawFd, buf: &[u8]) -> usize {
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

/// Serves one client until it disconnects, is killed, or sends something fatal.
pub async fn serve(mut stream: TcpStream, peer: SocketAddr, state: Arc<ServerState>) {
    let _ = stream.set_nodelay(true);
    let laddr = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let fd = stream.as_raw_fd();
    let info = state.register_client(peer.to_string(), laddr, fd, now_ms());
    let needs_auth = state
        .config
        .get("requirepass")
        .is_some_and(|p| !p.is_empty());
    let mut session = Session::new(info.clone(), !needs_auth);
    let mut limits = Limits::load(&state);
    let mut parser = RequestParser::new(limits.parse);
    let mut rbuf = BytesMut::with_capacity(READ_CHUNK);
    let mut out = ReplyBuf::new(Protocol::Resp2);
    // Bytes received since the last complete request: what an unfinished request is holding.
    let mut unfinished = 0usize;
    with_shard(|s| s.stats.connections_received += 1);

    while !info.killed.load(Ordering::Relaxed) {
        if rbuf.is_empty() && rbuf.capacity() > KEEP_CAPACITY {
            rbuf = BytesMut::with_capacity(READ_CHUNK);
        }
        // Grow toward a large announced argument by doubling, so memory follows the bytes that
        // actually arrive (amortised O(n) copying) rather than the length a client claims.
        let want = parser
            .bytes_needed_hint()
            .min(rbuf.capacity())
            .max(READ_CHUNK);
        rbuf.reserve(want);
        let len = rbuf.len();
        let cap = rbuf.capacity();
        let (res, slice) = stream.read(rbuf.slice_mut(len..cap)).await;
        rbuf = slice.into_inner();
        let n = match res {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if info.killed.load(Ordering::Relaxed) {
            break;
        }
        if state.config.epoch() != limits.epoch {
            limits = Limits::load(&state);
            parser.set_limits(limits.parse);
        }

        let mut cmds = Vec::new();
        let mut fatal = None;
        loop {
            match parser.next(&mut rbuf, !is_authenticated(&session, &state)) {
                Ok(Some(args)) => cmds.push(args),
                Ok(None) => break,
                Err(e) => {
                    fatal = Some(e);
                    break;
                }
            }
        }
        unfinished = if cmds.is_empty() {
            unfinished + n
        } else {
            rbuf.len()
        };
        if unfinished > limits.query_buffer {
            eprintln!(
                "Closing client that reached max query buffer length (id={})",
                info.id
            );
            break;
        }
        info.qbuf.store(rbuf.len() as u64, Ordering::Relaxed);

        if !cmds.is_empty() {
            Batch {
                state: &state,
                session: &mut session,
                out: &mut out,
            }
            .run(cmds)
            .await;
        }
        if let Some(e) = fatal {
            out.error(&e.0);
            session.close_after_reply = true;
        }
        if !out.is_empty() {
            let written = out.buf.len() as u64;
            // Most replies fit the socket buffer: send them straight away, and hand only what is
            // left (if the buffer is full) to the event loop.
            let sent = send_now(fd, &out.buf);
            if sent < out.buf.len() {
                out.buf.drain(..sent);
                let (res, buf) = stream.write_all(out.take()).await;
                out.buf = buf;
                if res.is_err() {
                    break;
                }
            }
            out.buf.clear();
            if out.buf.capacity() > KEEP_CAPACITY {
                out.buf = Vec::new();
            }
            with_shard(|s| {
                s.stats.net_input_bytes += n as u64;
                s.stats.net_output_bytes += written;
            });
        } else {
            with_shard(|s| s.stats.net_input_bytes += n as u64);
        }
        info.last_active_ms.store(now_ms(), Ordering::Relaxed);
        if session.close_after_reply {
            break;
        }
    }
    state.unregister_client(info.id);
}
