//! What a crash report says about the server after its stack trace, as Redis's bug report
//! (`printCrashReport` in debug.c): `------ INFO OUTPUT ------` (INFO all), `------ CLIENT LIST
//! OUTPUT ------` and `------ CURRENT CLIENT INFO ------` (the client whose command was running on
//! the crashing thread, and that command's arguments when known).
//!
//! The report is made on the crashing thread, maybe in a signal handler, so it asks no other
//! thread for anything: INFO's per-shard counters (commands, keys, hits...) read 0 there, and a
//! line says so; the rest is what the process holds itself. Locks are only tried (a crash while
//! holding the client registry must not hang the report). The log module runs this under an alarm.
//!
//! The running client is recorded per thread: a connection sets it for the batch it runs
//! ([`set_current_client`], two thread-local stores per batch), and a command that crashes on
//! purpose (DEBUG SEGFAULT, DEBUG PANIC) also records its arguments ([`set_current_args`]).

use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock, Weak};

use bytes::Bytes;

use super::info::{info_sections, process_info, render_info, InfoData};
use crate::clients::{client_line, ClientInfo};
use crate::state::ServerState;

static STATE: OnceLock<Weak<ServerState>> = OnceLock::new();

thread_local! {
    /// The client whose batch this thread is running (valid while it runs; null otherwise).
    static CURRENT: Cell<*const ClientInfo> = const { Cell::new(std::ptr::null()) };
    /// The arguments of the command that is crashing on purpose.
    static ARGS: RefCell<Vec<Bytes>> = const { RefCell::new(Vec::new()) };
}

/// Makes crash reports carry the server's INFO and clients. Called once the server state exists.
pub fn install(state: &Arc<ServerState>) {
    let _ = STATE.set(Arc::downgrade(state));
    crate::log::set_crash_extras(report);
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
    let _ = ARGS.try_with(|a| {
        if let Ok(mut a) = a.try_borrow_mut() {
            *a = args.to_vec();
        }
    });
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

/// The sections, as text to append to the report.
fn report() -> String {
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
    out.push_str(
        "# (made by the crashing thread, which asks no other: per-shard counters read 0)\r\n",
    );
    out.push_str(&render_info(&sections, &d));
    out.push_str("\n------ CLIENT LIST OUTPUT ------\n");
    for c in &clients {
        out.push_str(&client_line(c, now, 0));
        out.push('\n');
    }
    out.push_str("\n------ CURRENT CLIENT INFO ------\n");
    let current = CURRENT.try_with(Cell::get).unwrap_or(std::ptr::null());
    // SAFETY: a non-null pointer was set by the connection running its batch on this thread,
    // which keeps the client alive until it clears it; the crash interrupted that batch.
    if let Some(c) = unsafe { current.as_ref() } {
        out.push_str(&client_line(c, now, 0));
        out.push('\n');
        let _ = ARGS.try_with(|a| {
            if let Ok(a) = a.try_borrow() {
                for (i, arg) in a.iter().enumerate() {
                    let _ = writeln!(out, "argv[{i}]: '{}'", repr(arg));
                }
            }
        });
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
