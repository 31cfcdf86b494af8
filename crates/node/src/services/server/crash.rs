//! What a crash report says about the server after its stack trace, as Redis's bug report
//! (`printCrashReport` in debug.c): `------ INFO OUTPUT ------` (INFO all), `------ CLIENT LIST
//! OUTPUT ------` and `------ CURRENT CLIENT INFO ------` (the client whose command was running on
//! the crashing thread, and that command's arguments when known).
//!
//! The crashing thread, maybe in a signal handler, only notes which client it was running
//! ([`capture`]); the log's reporter thread makes the sections ([`report`]) in an ordinary
//! context. It asks no shard thread for anything (one may be the one that crashed): INFO's
//! per-shard counters (commands, keys, hits...) read 0 there, and a line says so; the rest is what
//! the process holds itself. The client registry's lock is only tried (the crash may have
//! stopped a thread holding it).
//!
//! The running client is recorded per thread: a connection sets it for the batch it runs
//! ([`set_current_client`], two thread-local stores per batch), and a command that crashes on
//! purpose (DEBUG SEGFAULT, DEBUG PANIC) also records its arguments ([`set_current_args`]).

use std::cell::Cell;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use bytes::Bytes;

use super::info::{info_sections, process_info, render_info, InfoData};
use crate::clients::{client_line, ClientInfo};
use crate::state::ServerState;

static STATE: OnceLock<Weak<ServerState>> = OnceLock::new();

thread_local! {
    /// The client whose batch this thread is running (valid while it runs; null otherwise).
    static CURRENT: Cell<*const ClientInfo> = const { Cell::new(std::ptr::null()) };
}

/// The command that is crashing on purpose: its client's id and its arguments.
static ARGS: Mutex<Option<(u64, Vec<Bytes>)>> = Mutex::new(None);

/// Makes crash reports carry the server's INFO and clients. Called once the server state exists.
pub fn install(state: &Arc<ServerState>) {
    let _ = STATE.set(Arc::downgrade(state));
    crate::log::set_crash_extras(crate::log::CrashExtras { capture, report });
}

/// The client whose commands this thread runs from now on (`None` once its batch is done). The
/// caller keeps the client alive until it clears it.
#[inline]
pub fn set_current_client(client: Option<&ClientInfo>) {
    CURRENT.with(|c| c.set(client.map_or(std::ptr::null(), |c| c as *const ClientInfo)));
}

/// The arguments of the command about to crash the process (DEBUG SEGFAULT, DEBUG PANIC).
pub fn set_current_args(client: &ClientInfo, args: &[Bytes]) {
    set_current_client(Some(client));
    *ARGS.lock().unwrap_or_else(|e| e.into_inner()) = Some((client.id, args.to_vec()));
}

/// On the crashing thread: the id of the client whose batch it runs (0: none). Reads a
/// thread-local and the client's id, nothing more.
fn capture() -> usize {
    let current = CURRENT.try_with(Cell::get).unwrap_or(std::ptr::null());
    // SAFETY: a non-null pointer was set by the connection running its batch on this thread,
    // which keeps the client alive until it clears it; the crash interrupted that batch.
    unsafe { current.as_ref() }.map_or(0, |c| c.id as usize)
}

/// Redis's argv line: `argv[i]: '"text"'`, the argument quoted as Redis's sdscatrepr quotes it.
fn repr(arg: &[u8]) -> String {
    let mut s = String::from("\"");
    for &b in arg {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x07 => s.push_str("\\a"),
            0x08 => s.push_str("\\b"),
            0x20..=0x7e => s.push(b as char),
            _ => {
                let _ = write!(s, "\\x{b:02x}");
            }
        }
    }
    s.push('"');
    s
}

/// The sections, as text to append to the report; `current` is [`capture`]'s client id.
fn report(current: usize) -> String {
    let mut out = String::new();
    let Some(state) = STATE.get().and_then(Weak::upgrade) else {
        return out;
    };
    let now = strata_shard::now_ms();
    let clients: Vec<Arc<ClientInfo>> = match state.clients.try_lock() {
        Ok(c) => c.values().cloned().collect(),
        Err(_) => Vec::new(),
    };
    let mut d = InfoData {
        threads: state.shards.len(),
        ..InfoData::default()
    };
    process_info(&state, &clients, now, &mut d);
    let sections = info_sections(&[Bytes::from_static(b"all")]);
    out.push_str("\n------ INFO OUTPUT ------\n");
    out.push_str("# (per-shard counters are not gathered in a crash report: they read 0)\r\n");
    out.push_str(&render_info(&sections, &d));
    out.push_str("\n------ CLIENT LIST OUTPUT ------\n");
    for c in &clients {
        out.push_str(&client_line(c, now, 0));
        out.push('\n');
    }
    out.push_str("\n------ CURRENT CLIENT INFO ------\n");
    if let Some(c) = clients
        .iter()
        .find(|c| c.id as usize == current && current != 0)
    {
        out.push_str(&client_line(c, now, 0));
        out.push('\n');
        if let Ok(args) = ARGS.try_lock() {
            if let Some((_, args)) = args.as_ref().filter(|(id, _)| *id == c.id) {
                for (i, arg) in args.iter().enumerate() {
                    let _ = writeln!(out, "argv[{i}]: '{}'", repr(arg));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_as_redis_quotes_them() {
        assert_eq!(repr(b"debug"), "\"debug\"");
        assert_eq!(repr(b"a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\x01\"");
    }
}
