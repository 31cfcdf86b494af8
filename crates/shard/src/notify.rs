//! Keyspace notifications (`notify-keyspace-events`), Redis's notify.c.
//!
//! A command (or lazy/active expiry in [`crate::Db`]) calls [`emit`] with the event's class, name,
//! key and database, at the point where Redis calls `notifyKeyspaceEvent`. With the setting empty
//! (the default) that is one relaxed load and a branch. Otherwise the event is appended to this
//! thread's buffer, and [`crate::with_shard`] hands the buffer to the thread's sink (installed by
//! the server: it publishes to `__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>` through
//! the pub/sub registry) right after the work it ran, before any of that work's replies leave. So
//! events reach subscribers in the order the commands of one shard produced them, and a client that
//! subscribes and then issues a command sees the command's events.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;

/// Event classes and the K/E switches, with Redis's bit values.
pub const KEYSPACE: u32 = 1 << 0;
pub const KEYEVENT: u32 = 1 << 1;
pub const GENERIC: u32 = 1 << 2;
pub const STRING: u32 = 1 << 3;
pub const LIST: u32 = 1 << 4;
pub const SET: u32 = 1 << 5;
pub const HASH: u32 = 1 << 6;
pub const ZSET: u32 = 1 << 7;
pub const EXPIRED: u32 = 1 << 8;
pub const EVICTED: u32 = 1 << 9;
pub const STREAM: u32 = 1 << 10;
pub const KEY_MISS: u32 = 1 << 11;
pub const MODULE: u32 = 1 << 13;
pub const NEW: u32 = 1 << 14;
/// What 'A' stands for (not m, not n, as in Redis).
pub const ALL: u32 =
    GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The live setting, as flags.
static FLAGS: AtomicU32 = AtomicU32::new(0);

/// The characters of `notify-keyspace-events` and their flags, in the order CONFIG GET lists them.
const CLASS_CHARS: &[(char, u32)] = &[
    ('g', GENERIC),
    ('$', STRING),
    ('l', LIST),
    ('s', SET),
    ('h', HASH),
    ('z', ZSET),
    ('x', EXPIRED),
    ('e', EVICTED),
    ('t', STREAM),
    ('d', MODULE),
    ('n', NEW),
];

/// Parses a `notify-keyspace-events` value (Redis's keyspaceEventsStringToFlags); None on an
/// unknown character.
pub fn parse_flags(s: &str) -> Option<u32> {
    let mut flags = 0;
    for c in s.chars() {
        flags |= match c {
            'A' => ALL,
            'K' => KEYSPACE,
            'E' => KEYEVENT,
            'm' => KEY_MISS,
            c => CLASS_CHARS.iter().find(|(ch, _)| *ch == c)?.1,
        };
    }
    Some(flags)
}

/// The canonical text of `flags` (Redis's keyspaceEventsFlagsToString): 'A' when every class of
/// 'A' is on (then 'n' is not listed), else the class characters; then K, E, m.
pub fn flags_to_string(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (c, f) in CLASS_CHARS {
            if flags & f != 0 {
                s.push(*c);
            }
        }
    }
    for (c, f) in [('K', KEYSPACE), ('E', KEYEVENT), ('m', KEY_MISS)] {
        if flags & f != 0 {
            s.push(c);
        }
    }
    s
}

/// Makes `flags` the live setting (CONFIG SET, start-up).
pub fn set_flags(flags: u32) {
    FLAGS.store(flags, Ordering::Relaxed);
}

/// The live setting.
#[inline]
pub fn flags() -> u32 {
    FLAGS.load(Ordering::Relaxed)
}

/// True if events of `class` are wanted (cheap: use it to skip building an event).
#[inline]
pub fn enabled(class: u32) -> bool {
    flags() & class != 0
}

/// One event waiting to be published.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The K/E switches in force when it was emitted.
    pub flags: u32,
    pub event: &'static str,
    pub key: Bytes,
    pub db: u32,
}

/// Where a thread's events go (the server's publisher).
pub type Sink = Box<dyn Fn(Vec<Note>)>;

thread_local! {
    static PENDING: RefCell<Vec<Note>> = const { RefCell::new(Vec::new()) };
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

/// Redis's notifyKeyspaceEvent: records `event` on `key` of database `db` if `class` is enabled.
#[inline]
pub fn emit(class: u32, event: &'static str, key: &[u8], db: u32) {
    let flags = flags();
    if flags & class != 0 && !(class == KEY_MISS && QUIET_MISSES.get()) {
        push(flags, event, key, db);
    }
}

thread_local! {
    /// Key misses raise no event on this thread while set (see [`quiet_misses`]).
    static QUIET_MISSES: Cell<bool> = const { Cell::new(false) };
}

/// While `on`, key misses on this thread raise no "keymiss" event: a read run again after its
/// first run was discarded (see `strata_server::dispatch`), whose misses were announced then.
pub fn quiet_misses(on: bool) {
    QUIET_MISSES.set(on);
}

#[cold]
fn push(flags: u32, event: &'static str, key: &[u8], db: u32) {
    if flags & (KEYSPACE | KEYEVENT) == 0 {
        return;
    }
    PENDING.with(|p| {
        p.borrow_mut().push(Note {
            flags,
            event,
            key: Bytes::copy_from_slice(key),
            db,
        })
    });
}

/// Installs this thread's sink (the server does, on each shard thread).
pub fn install_sink(sink: Sink) {
    SINK.with(|s| *s.borrow_mut() = Some(sink));
}

/// Publishes what this thread emitted since the last flush. Without a sink (unit tests) the events
/// stay buffered for [`take`].
#[inline]
pub fn flush() {
    if PENDING.with(|p| p.borrow().is_empty()) {
        return;
    }
    flush_pending();
}

#[cold]
fn flush_pending() {
    SINK.with(|s| {
        if let Some(sink) = s.borrow().as_ref() {
            sink(take());
        }
    });
}

/// True if events are published at all (K or E is on): worth keeping them in order.
#[inline]
pub fn publishing() -> bool {
    flags() & (KEYSPACE | KEYEVENT) != 0
}

/// How many events this thread holds, not yet published: a mark for [`take_since`].
fn pending() -> usize {
    PENDING.with(|p| p.borrow().len())
}

/// Takes the events this thread emitted since [`pending`] returned `mark`, to be published
/// elsewhere, in another order (see `strata_commands::keyed::KeysCtx::scatter`).
fn take_since(mark: usize) -> Vec<Note> {
    PENDING.with(|p| {
        let mut p = p.borrow_mut();
        let at = mark.min(p.len());
        p.split_off(at)
    })
}

/// Runs `f` and, if `collect`, takes the events it emitted on this thread (to be published
/// elsewhere with [`publish`]); without, they stay queued as usual and the list is empty.
pub fn collecting<R>(collect: bool, f: impl FnOnce() -> R) -> (R, Vec<Note>) {
    if !collect {
        return (f(), Vec::new());
    }
    let mark = pending();
    let r = f();
    (r, take_since(mark))
}

/// Publishes `notes` from this thread, after anything it holds.
pub fn publish(notes: Vec<Note>) {
    if notes.is_empty() {
        return;
    }
    PENDING.with(|p| p.borrow_mut().extend(notes));
    flush_pending();
}

/// Takes this thread's buffered events.
pub fn take() -> Vec<Note> {
    PENDING.with(|p| std::mem::take(&mut *p.borrow_mut()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_and_canonical_text_follow_redis() {
        let cases = [
            ("KEA", "AKE"),
            ("nK", "nK"),
            ("Eg$lshzxetdmn", "AEm"),
            ("A", "A"),
            ("", ""),
            ("gKE", "gKE"),
            ("Kl", "lK"),
        ];
        for (input, canonical) in cases {
            assert_eq!(flags_to_string(parse_flags(input).unwrap()), canonical);
        }
        assert_eq!(parse_flags("Kq"), None);
        assert_eq!(parse_flags("a"), None);
    }
}
