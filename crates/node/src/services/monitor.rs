//! MONITOR: every command run by any client, on any thread, pushed to the monitoring clients as
//! Redis formats it: `+<unix secs>.<micros> [<db> <addr>] "arg" "arg"...` with Redis's escaping
//! (sdscatrepr). Admin and skip-monitor commands are not shown; AUTH's arguments and HELLO's AUTH
//! credentials are shown as `(redacted)`.
//!
//! Monitors are registered process-wide; the dispatcher reads [`active`] (one relaxed load) once
//! per batch and formats nothing while it is zero.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;

use crate::clients::ClientInfo;
use crate::ctx::ConnCtx;
use crate::error::{CmdError, CmdResult};
use crate::table::{CommandSpec, Flags};

static COUNT: AtomicUsize = AtomicUsize::new(0);
static MONITORS: RwLock<Vec<Arc<ClientInfo>>> = RwLock::new(Vec::new());

/// True while some client monitors.
#[inline]
pub fn active() -> bool {
    COUNT.load(Ordering::Relaxed) != 0
}

fn add(info: Arc<ClientInfo>) {
    info.monitor.store(true, Ordering::Relaxed);
    let mut m = MONITORS.write().unwrap_or_else(|e| e.into_inner());
    m.push(info);
    COUNT.store(m.len(), Ordering::Relaxed);
}

/// Leaves monitor mode (RESET, disconnect). Nothing if the client was not monitoring.
pub fn remove(id: u64) {
    if !active() {
        return;
    }
    let mut m = MONITORS.write().unwrap_or_else(|e| e.into_inner());
    m.retain(|c| {
        if c.id == id {
            c.monitor.store(false, Ordering::Relaxed);
        }
        c.id != id
    });
    COUNT.store(m.len(), Ordering::Relaxed);
}

/// Appends `arg` quoted as Redis's sdscatrepr does (also the log's quoting of client input).
pub fn repr(out: &mut Vec<u8>, arg: &[u8]) {
    out.push(b'"');
    for &b in arg {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            7 => out.extend_from_slice(b"\\a"),
            8 => out.extend_from_slice(b"\\b"),
            0x20..=0x7e => out.push(b),
            _ => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// Which arguments MONITOR and SLOWLOG show as `(redacted)`: all of AUTH's; HELLO's AUTH username
/// and password; the value of CONFIG SET for a setting that holds a password (an admin command,
/// so only SLOWLOG shows it).
pub(crate) fn redacted(spec: &CommandSpec, args: &[Bytes], i: usize) -> bool {
    match spec.name {
        "auth" => i >= 1,
        "hello" => (2..args.len())
            .filter(|&j| args[j].eq_ignore_ascii_case(b"auth"))
            .any(|j| i == j + 1 || i == j + 2),
        "set" if args[0].eq_ignore_ascii_case(b"config") => {
            const SECRETS: [&[u8]; 4] = [
                b"requirepass",
                b"masterauth",
                b"tls-key-file-pass",
                b"tls-client-key-file-pass",
            ];
            i >= 3 && i % 2 == 1 && SECRETS.iter().any(|s| args[i - 1].eq_ignore_ascii_case(s))
        }
        _ => false,
    }
}

/// The arguments part of a monitor line for a command about to run, or None when the command is
/// not shown (admin and skip-monitor commands). Called only while [`active`].
pub fn describe(spec: &CommandSpec, args: &[Bytes]) -> Option<Vec<u8>> {
    if spec.flags.has(Flags::ADMIN) || spec.flags.has(Flags::SKIP_MONITOR) {
        return None;
    }
    let mut out = Vec::new();
    for (i, a) in args.iter().enumerate() {
        out.push(b' ');
        if redacted(spec, args, i) {
            repr(&mut out, b"(redacted)");
        } else {
            repr(&mut out, a);
        }
    }
    Some(out)
}

/// Sends one line to every monitor: `described` from [`describe`], run by client `by` in
/// database `db` at `now_us` (unix microseconds).
pub fn feed(described: &[u8], db: usize, by: &ClientInfo, now_us: i64) {
    let mut line = format!(
        "+{}.{:06} [{} {}]",
        now_us / 1_000_000,
        now_us % 1_000_000,
        db,
        by.addr
    )
    .into_bytes();
    line.extend_from_slice(described);
    line.extend_from_slice(b"\r\n");
    let line = Bytes::from(line);
    for m in MONITORS.read().unwrap_or_else(|e| e.into_inner()).iter() {
        m.push(line.clone());
    }
}

/// MONITOR → OK, then every command as a push; nothing if already monitoring; refused inside a
/// transaction.
pub fn monitor(cx: &mut ConnCtx<'_>) -> CmdResult {
    if cx.session.txn_owner.is_some() {
        return Err(CmdError::Msg(
            "ERR MONITOR isn't allowed for DENY BLOCKING client".into(),
        ));
    }
    if cx.session.monitor {
        return Ok(());
    }
    cx.session.monitor = true;
    add(cx.session.info.clone());
    cx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_escaped_as_redis_does() {
        let mut out = Vec::new();
        repr(&mut out, b"a \"q\" \\ \n\r\t\x07\x08\x00\xff~");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#""a \"q\" \\ \n\r\t\a\b\x00\xff~""#
        );
    }
}
