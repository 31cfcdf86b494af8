//! SLOWLOG: the commands whose execution took at least `slowlog-log-slower-than` microseconds,
//! newest first, at most `slowlog-max-len` of them, as Redis keeps them.
//!
//! One log for the process (Redis's is one per server, and a process runs one server), shared by
//! every thread behind a mutex that only a slow command or SLOWLOG itself takes: the check every
//! command pays is [`logs`], one relaxed load and a comparison. The duration is the command's
//! execution on the thread that ran it (a shard, or the connection's thread for connection and
//! server commands), not the time it spent travelling between threads or waiting for locks, as
//! Redis measures `call()`. A blocking command is logged once it is served (not when it parks),
//! EXEC is not logged but the commands it runs are, and credentials are logged as `(redacted)`
//! (AUTH, HELLO's AUTH, CONFIG SET of `requirepass`/`masterauth`), as in Redis.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use bytes::Bytes;
use strata_core::num::parse_i64;
use strata_resp::ReplyBuf;

use crate::ctx::ConnCtx;
use crate::error::{CmdError, CmdResult};
use crate::table::{CommandSpec, Flags, Handler};

/// At most this many arguments are kept per entry; the last kept one says how many were left out.
const MAX_ARGS: usize = 32;
/// Longer arguments are cut to this many bytes, followed by how many were left out.
const MAX_ARG_BYTES: usize = 128;

/// The id of the next entry: never reset, not even by SLOWLOG RESET (as in Redis).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);
/// Newest first.
static LOG: Mutex<VecDeque<Entry>> = Mutex::new(VecDeque::new());

struct Entry {
    id: u64,
    /// Unix seconds when it was logged.
    time: i64,
    usec: u64,
    args: Vec<Bytes>,
    addr: String,
    name: Bytes,
}

/// Whether a command that ran for `usec` microseconds goes to the log. One load and a branch.
#[inline]
pub fn logs(usec: u64) -> bool {
    let t = crate::settings::slowlog_slower_than();
    t >= 0 && usec >= t as u64
}

/// The arguments an entry keeps: at most [`MAX_ARGS`], each cut to [`MAX_ARG_BYTES`], with
/// credentials redacted (Redis's slowlogCreateEntry).
pub fn kept_args(spec: &CommandSpec, args: &[Bytes]) -> Vec<Bytes> {
    let kept = args.len().min(MAX_ARGS);
    let mut out = Vec::with_capacity(kept);
    for (i, a) in args.iter().take(kept).enumerate() {
        if kept < args.len() && i == kept - 1 {
            let more = args.len() - kept + 1;
            out.push(Bytes::from(format!("... ({more} more arguments)")));
        } else if crate::services::monitor::redacted(spec, args, i) {
            out.push(Bytes::from_static(b"(redacted)"));
        } else if a.len() > MAX_ARG_BYTES {
            let mut s = a[..MAX_ARG_BYTES].to_vec();
            s.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes());
            out.push(Bytes::from(s));
        } else {
            // A copy: the argument is a slice of the connection's read buffer, which an entry
            // kept for long must not hold on to (it would pin the whole buffer).
            out.push(Bytes::copy_from_slice(a));
        }
    }
    out
}

/// Logs a command of `spec` with `args` that ran for `usec` µs (already found slow by [`logs`]),
/// for the client at `addr` named `name`, at `now_ms`. Nothing for commands Redis keeps out
/// (EXEC), or while `slowlog-max-len` is 0.
#[cold]
pub fn push(spec: &CommandSpec, args: &[Bytes], usec: u64, addr: &str, name: Bytes, now_ms: i64) {
    let max = crate::settings::slowlog_max_len();
    if max == 0 || spec.flags.has(Flags::SKIP_SLOWLOG) {
        return;
    }
    let entry = Entry {
        id: 0,
        time: now_ms.div_euclid(1000),
        usec,
        args: kept_args(spec, args),
        addr: addr.to_string(),
        name,
    };
    let mut log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    // Numbered under the lock, so ids grow from the oldest entry to the newest.
    let entry = Entry {
        id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
        ..entry
    };
    log.push_front(entry);
    while log.len() as u64 > max {
        log.pop_back();
    }
}

fn count_error() -> CmdError {
    CmdError::msg("ERR count should be greater than or equal to -1")
}

/// SLOWLOG GET [count]: the newest `count` entries (10 by default, -1 for all).
fn slowlog_get(cx: &mut ConnCtx<'_>) -> CmdResult {
    if cx.args.len() > 3 {
        return Err(crate::reply::subcommand_syntax_error(cx.args));
    }
    let count = match cx.args.get(2) {
        None => 10,
        Some(a) => match parse_i64(a) {
            Some(n) if n >= -1 => n,
            _ => return Err(count_error()),
        },
    };
    let log = LOG.lock().unwrap_or_else(|e| e.into_inner());
    let n = if count == -1 {
        log.len()
    } else {
        log.len().min(count as usize)
    };
    write_entries(cx.out, log.iter().take(n));
    Ok(())
}

fn write_entries<'a>(out: &mut ReplyBuf, entries: impl ExactSizeIterator<Item = &'a Entry>) {
    out.array(entries.len());
    for e in entries {
        out.array(6);
        out.int(e.id as i64);
        out.int(e.time);
        out.int(e.usec.min(i64::MAX as u64) as i64);
        out.array(e.args.len());
        for a in &e.args {
            out.bulk(a);
        }
        out.bulk(e.addr.as_bytes());
        out.bulk(&e.name);
    }
}

/// SLOWLOG LEN.
fn slowlog_len(cx: &mut ConnCtx<'_>) -> CmdResult {
    let n = LOG.lock().unwrap_or_else(|e| e.into_inner()).len();
    cx.out.int(n as i64);
    Ok(())
}

/// SLOWLOG RESET: empties the log (ids keep counting).
fn slowlog_reset(cx: &mut ConnCtx<'_>) -> CmdResult {
    let old = std::mem::take(&mut *LOG.lock().unwrap_or_else(|e| e.into_inner()));
    drop(old);
    cx.out.ok();
    Ok(())
}

fn slowlog_help(cx: &mut ConnCtx<'_>) -> CmdResult {
    crate::reply::reply_help(
        cx.out,
        &cx.args[0],
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

const SUB_FLAGS: Flags = Flags::ADMIN.or(Flags::LOADING).or(Flags::STALE);

/// A subcommand of SLOWLOG or LATENCY (server group, no extra ACL categories).
#[allow(clippy::too_many_arguments)]
pub(crate) const fn sub(
    name: &'static str,
    arity: i32,
    flags: Flags,
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    tips: &'static [&'static str],
    handler: Handler,
) -> CommandSpec {
    crate::table::server_command(
        name,
        arity,
        flags,
        summary,
        since,
        complexity,
        &[],
        tips,
        handler,
    )
}

const GET_ARGS: &[crate::table::Arg] = &[crate::table::Arg::integer("count").optional()];

static SUBCOMMANDS: &[CommandSpec] = &[
    sub(
        "help",
        2,
        Flags::LOADING.or(Flags::STALE),
        "Show helpful text about the different subcommands",
        "6.2.0",
        "O(1)",
        &[],
        Handler::Conn(slowlog_help),
    ),
    sub(
        "len",
        2,
        SUB_FLAGS,
        "Get the slow log's length",
        "2.2.12",
        "O(1)",
        &[
            "request_policy:all_nodes",
            "response_policy:agg_sum",
            "nondeterministic_output",
        ],
        Handler::Conn(slowlog_len),
    ),
    sub(
        "get",
        -2,
        SUB_FLAGS,
        "Get the slow log's entries",
        "2.2.12",
        "O(N) where N is the number of entries returned",
        &["request_policy:all_nodes", "nondeterministic_output"],
        Handler::Conn(slowlog_get),
    )
    .with_args(GET_ARGS)
    .with_history(&[(
        "4.0.0",
        "Added client IP address, port and name to the reply.",
    )]),
    sub(
        "reset",
        2,
        SUB_FLAGS,
        "Clear all entries from the slow log",
        "2.2.12",
        "O(N) where N is the number of entries in the slowlog",
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
        Handler::Conn(slowlog_reset),
    ),
];

/// The SLOWLOG container.
pub static COMMANDS: &[CommandSpec] = &[CommandSpec {
    subcommands: SUBCOMMANDS,
    ..CommandSpec::new(
        "server",
        "slowlog",
        -2,
        Flags::NONE,
        &[],
        "A container for slow log commands",
        "2.2.12",
        "Depends on subcommand.",
        Handler::Container,
    )
}];
