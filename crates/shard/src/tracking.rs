//! Client-side caching (CLIENT TRACKING): which clients to tell when a key changes.
//!
//! Two modes, as in Redis:
//! * **default**: after a read command, the keys it read are remembered in the owning shard's
//!   tracking table (key → client ids, Redis's `TrackingTable`, keyed by name only: a key read in
//!   one database is invalidated by a write to the same name in another). The first modification
//!   of the key sends each remembered client one invalidation and forgets the key.
//! * **BCAST**: nothing is remembered; every modified key matching one of a client's prefixes (or
//!   any key without prefixes) is sent to it. Keys modified during one shard turn travel in one
//!   message per prefix (Redis batches per event-loop turn).
//!
//! Clients with tracking on are registered process-wide ([`register`]) as a [`Tracker`], which
//! knows how to deliver (RESP3 push, or a pub/sub message to a redirect client) — this crate
//! knows nothing of connections. The write path consults this module only while at least one
//! client is registered ([`active`], one relaxed load), so tracking costs nothing otherwise.
//! A client turning tracking off stays in the tables, as in Redis: it is skipped at delivery (it is
//! no longer registered), and a later ON resumes with what it read before.
//!
//! NOLOOP needs the client that modified the key: the dispatcher brackets each command it runs on
//! a shard with [`begin_command`] / [`end_command`] (only while tracking is active).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use bytes::Bytes;

/// A client with tracking on, as the shards see it.
pub trait Tracker: Send + Sync {
    /// In BCAST mode: the prefixes, sorted (an empty prefix matches every key). None in default
    /// mode.
    fn bcast_prefixes(&self) -> Option<&[Bytes]>;
    /// NOLOOP: not told about its own modifications.
    fn noloop(&self) -> bool;
    /// Delivers one invalidation message: these keys, or None for "everything" (FLUSHDB/FLUSHALL).
    fn invalidate(&self, keys: Option<&[&[u8]]>);
}

static ACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Keys in every shard's default-mode table, and the most allowed (`tracking-table-max-keys`, 0: no
/// limit). Above it, shards evict remembered keys (sending their invalidations) until it holds.
static TOTAL_KEYS: AtomicUsize = AtomicUsize::new(0);
static MAX_KEYS: AtomicUsize = AtomicUsize::new(1_000_000);
/// (key, client) pairs in those tables, and distinct BCAST prefixes (INFO `tracking_total_items`,
/// `tracking_total_prefixes`).
static TOTAL_ITEMS: AtomicUsize = AtomicUsize::new(0);
static TOTAL_PREFIXES: AtomicUsize = AtomicUsize::new(0);
/// How many of them are in BCAST mode: only then are modified keys collected per turn.
static BCAST: AtomicUsize = AtomicUsize::new(0);
static TRACKERS: RwLock<BTreeMap<u64, Arc<dyn Tracker>>> = RwLock::new(BTreeMap::new());

/// Clients with tracking on, anywhere (INFO `tracking_clients`). The write path's only cost when 0.
#[inline]
pub fn active() -> usize {
    ACTIVE.load(Ordering::Relaxed)
}

/// Whether the write path must report modified keys: a client tracks, or keys read by clients
/// that have since left are still remembered (Redis forgets each at its next change, as here, so
/// the table empties and `tracking_total_keys` falls without anyone tracking).
#[inline]
pub fn remembering() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0 || TOTAL_KEYS.load(Ordering::Relaxed) != 0
}

/// Turns tracking on for client `id` (or replaces its settings).
pub fn register(id: u64, t: Arc<dyn Tracker>) {
    let mut map = TRACKERS.write().unwrap_or_else(|e| e.into_inner());
    map.insert(id, t);
    count(&map);
}

/// Turns tracking off for client `id` (CLIENT TRACKING OFF, RESET, disconnect).
pub fn unregister(id: u64) {
    let mut map = TRACKERS.write().unwrap_or_else(|e| e.into_inner());
    map.remove(&id);
    count(&map);
}

fn count(map: &BTreeMap<u64, Arc<dyn Tracker>>) {
    let bcast = map
        .values()
        .filter(|t| t.bcast_prefixes().is_some())
        .count();
    BCAST.store(bcast, Ordering::Relaxed);
    let prefixes: std::collections::BTreeSet<&Bytes> = map
        .values()
        .filter_map(|t| t.bcast_prefixes())
        .flatten()
        .collect();
    TOTAL_PREFIXES.store(prefixes.len(), Ordering::Relaxed);
    ACTIVE.store(map.len(), Ordering::Relaxed);
}

fn trackers() -> std::sync::RwLockReadGuard<'static, BTreeMap<u64, Arc<dyn Tracker>>> {
    TRACKERS.read().unwrap_or_else(|e| e.into_inner())
}

/// This shard's tracking state.
#[derive(Default)]
struct Local {
    /// Default mode: key → ids of the clients that read it since its last invalidation.
    table: HashMap<Box<[u8]>, Vec<u64>>,
    /// Client ids in `table`, all keys together (so a flush need not count them).
    items: usize,
    /// The client whose command is running on this shard (0: none known).
    current: u64,
    /// Keys modified during this shard turn and the client that modified each first (0: none),
    /// for BCAST clients (sent by [`flush`]).
    modified: HashMap<Box<[u8]>, u64>,
}

thread_local! {
    static LOCAL: RefCell<Local> = RefCell::new(Local::default());
}

/// Remembers that client `id` read `keys` (default mode).
pub fn remember<'a>(id: u64, keys: impl IntoIterator<Item = &'a [u8]>) {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        for key in keys {
            match l.table.get_mut(key) {
                Some(ids) => {
                    if !ids.contains(&id) {
                        ids.push(id);
                        l.items += 1;
                        TOTAL_ITEMS.fetch_add(1, Ordering::Relaxed);
                    }
                }
                None => {
                    l.table.insert(key.into(), vec![id]);
                    l.items += 1;
                    TOTAL_KEYS.fetch_add(1, Ordering::Relaxed);
                    TOTAL_ITEMS.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
}

/// Keys in this shard's tracking table.
pub fn tracked_keys() -> usize {
    LOCAL.with(|l| l.borrow().table.len())
}

/// INFO's `tracking_total_keys`, `tracking_total_items` and `tracking_total_prefixes`.
pub fn totals() -> (usize, usize, usize) {
    (
        TOTAL_KEYS.load(Ordering::Relaxed),
        TOTAL_ITEMS.load(Ordering::Relaxed),
        TOTAL_PREFIXES.load(Ordering::Relaxed),
    )
}

/// `tracking-table-max-keys` (0: no limit).
pub fn set_max_keys(max: usize) {
    MAX_KEYS.store(max, Ordering::Relaxed);
}

/// Whether a client tracks and the default-mode tables hold more keys than
/// `tracking-table-max-keys` allows: then every command first has the shards evict some
/// ([`enforce_limit`]), as Redis's `processCommand` calls `trackingLimitUsedSlots`. One load
/// while no client tracks.
#[inline]
pub fn over_limit() -> bool {
    if active() == 0 {
        return false;
    }
    let max = MAX_KEYS.load(Ordering::Relaxed);
    max != 0 && TOTAL_KEYS.load(Ordering::Relaxed) > max
}

/// Keys evicted per call of [`enforce_limit`] at most, so a lowered limit never stalls a shard:
/// the background tick calls it again while work remains (Redis's bounded `effort`).
const EVICT_PER_CALL: usize = 1000;

/// Evicts remembered keys of this shard while the process-wide table is above
/// `tracking-table-max-keys`, telling their readers as if the keys had changed (Redis's
/// trackingLimitUsedSlots). A call first claims its share of the excess (at most
/// [`EVICT_PER_CALL`] keys, at most this shard's), so shards evicting at once never evict more than
/// the excess. Returns true if this shard could evict more.
pub fn enforce_limit() -> bool {
    let max = MAX_KEYS.load(Ordering::Relaxed);
    if max == 0 || TOTAL_KEYS.load(Ordering::Relaxed) <= max {
        return false;
    }
    let local = LOCAL.with(|l| l.borrow().table.len()).min(EVICT_PER_CALL);
    // Claim this call's share of the excess in one step, then evict that many keys found in one
    // walk of the table (one walk per call, not one per key).
    let mut claimed = 0;
    let _ = TOTAL_KEYS.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
        claimed = t.saturating_sub(max).min(local);
        (claimed > 0).then(|| t - claimed)
    });
    if claimed == 0 {
        return false;
    }
    let evicted: Vec<(Box<[u8]>, Vec<u64>)> = LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let keys: Vec<Box<[u8]>> = l.table.keys().take(claimed).cloned().collect();
        let evicted: Vec<(Box<[u8]>, Vec<u64>)> = keys
            .into_iter()
            .filter_map(|k| l.table.remove(&k).map(|ids| (k, ids)))
            .collect();
        shrink_if_sparse(&mut l.table);
        l.items -= evicted.iter().map(|(_, ids)| ids.len()).sum::<usize>();
        evicted
    });
    for (key, ids) in evicted {
        invalidate_readers(&key, ids, 0);
    }
    claimed == EVICT_PER_CALL
}

fn invalidate_readers(key: &[u8], ids: Vec<u64>, current: u64) {
    TOTAL_ITEMS.fetch_sub(ids.len(), Ordering::Relaxed);
    let map = trackers();
    for id in ids {
        let Some(t) = map.get(&id) else { continue };
        if t.bcast_prefixes().is_some() || (id == current && t.noloop()) {
            continue;
        }
        t.invalidate(Some(&[key]));
    }
}

/// A command of client `id` starts running on this shard.
pub fn begin_command(id: u64) {
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        l.current = id;
    });
}

/// The command started by [`begin_command`] is done.
pub fn end_command() {
    LOCAL.with(|l| l.borrow_mut().current = 0);
}

/// End of a shard turn ([`crate::with_shard`]): BCAST clients get the keys modified during it,
/// one message per matching prefix, as Redis sends them once per event-loop turn. A NOLOOP client
/// is not told about keys it modified first.
#[inline]
pub fn flush() {
    // Runs after every `with_shard`: with nobody tracking, one load (the body below, inlined into
    // this check, made every call save and restore registers it never used).
    if active() != 0 {
        flush_modified();
    }
}

#[cold]
#[inline(never)]
fn flush_modified() {
    let mut modified = LOCAL.with(|l| std::mem::take(&mut l.borrow_mut().modified));
    if modified.is_empty() {
        return;
    }
    announce_modified(&modified);
    // Hand the emptied map back, so the next turn's keys reuse its allocation (unless one huge
    // turn grew it).
    modified.clear();
    shrink_if_sparse(&mut modified);
    LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        if l.modified.is_empty() {
            l.modified = modified;
        }
    });
}

fn announce_modified(modified: &HashMap<Box<[u8]>, u64>) {
    let map = trackers();
    for (&id, t) in map.iter() {
        let Some(prefixes) = t.bcast_prefixes() else {
            continue;
        };
        let skip_own = t.noloop();
        for p in prefixes {
            let mut keys: Vec<&[u8]> = modified
                .iter()
                .filter(|(k, by)| k.starts_with(p) && !(skip_own && **by == id))
                .map(|(k, _)| &k[..])
                .collect();
            // Redis keeps them in a radix tree: sorted.
            keys.sort_unstable();
            if !keys.is_empty() {
                t.invalidate(Some(&keys));
            }
        }
    }
}

/// See [`crate::memory::shrink_target`].
fn shrink_if_sparse<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>) {
    if let Some(to) = crate::memory::shrink_target(map.len(), map.capacity()) {
        map.shrink_to(to);
    }
}

/// The write path: `key` was modified (written, deleted, expired, TTL changed). Called only while
/// [`remembering`].
#[cold]
pub fn key_modified(key: &[u8]) {
    let (ids, current) = LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        let ids = l.table.remove(key);
        l.items -= ids.as_ref().map_or(0, Vec::len);
        if ids.is_some() {
            shrink_if_sparse(&mut l.table);
        }
        let current = l.current;
        // The first modifier of a key in a turn is the one NOLOOP filters by (as Redis records it).
        if BCAST.load(Ordering::Relaxed) != 0 && !l.modified.contains_key(key) {
            l.modified.insert(key.into(), current);
        }
        (ids, current)
    });
    if let Some(ids) = ids {
        TOTAL_KEYS.fetch_sub(1, Ordering::Relaxed);
        invalidate_readers(key, ids, current);
    }
}

/// FLUSHDB/FLUSHALL ran on this shard: its table is dropped. When `announce`, every tracking
/// client is sent a null invalidation (the caller makes sure that happens once per flush).
pub fn flushed(announce: bool) {
    let (dropped, items) = LOCAL.with(|l| {
        let mut l = l.borrow_mut();
        (std::mem::take(&mut l.table), std::mem::take(&mut l.items))
    });
    TOTAL_KEYS.fetch_sub(dropped.len(), Ordering::Relaxed);
    TOTAL_ITEMS.fetch_sub(items, Ordering::Relaxed);
    // Freeing a table of millions of keys would stall this thread: the freer thread drops it.
    if !dropped.is_empty() {
        crate::db::drop_in_background(dropped);
    }
    if announce && active() != 0 {
        for t in trackers().values() {
            t.invalidate(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Probe {
        prefixes: Option<Vec<Bytes>>,
        noloop: bool,
        got: Mutex<Vec<Option<Vec<Vec<u8>>>>>,
    }

    impl Tracker for Probe {
        fn bcast_prefixes(&self) -> Option<&[Bytes]> {
            self.prefixes.as_deref()
        }
        fn noloop(&self) -> bool {
            self.noloop
        }
        fn invalidate(&self, keys: Option<&[&[u8]]>) {
            let keys = keys.map(|ks| ks.iter().map(|k| k.to_vec()).collect());
            self.got.lock().unwrap().push(keys);
        }
    }

    fn probe(prefixes: Option<Vec<&str>>, noloop: bool) -> Arc<Probe> {
        Arc::new(Probe {
            prefixes: prefixes.map(|ps| {
                ps.into_iter()
                    .map(|p| Bytes::copy_from_slice(p.as_bytes()))
                    .collect()
            }),
            noloop,
            got: Mutex::new(Vec::new()),
        })
    }

    fn got(p: &Probe) -> Vec<Option<Vec<String>>> {
        std::mem::take(&mut *p.got.lock().unwrap())
            .into_iter()
            .map(|m| {
                m.map(|ks| {
                    ks.into_iter()
                        .map(|k| String::from_utf8(k).unwrap())
                        .collect()
                })
            })
            .collect()
    }

    // One test drives the process-wide registry, so its steps cannot race with another test.
    #[test]
    fn default_and_broadcast_invalidations() {
        let reader = probe(None, false);
        let looper = probe(None, true);
        let bcast = probe(Some(vec!["user:"]), false);
        register(9001, reader.clone());
        register(9002, looper.clone());
        register(9003, bcast.clone());

        // Default mode: one invalidation per remembered key, then forgotten.
        remember(9001, [&b"a"[..], b"b"]);
        remember(9002, [&b"a"[..]]);
        key_modified(b"a");
        key_modified(b"a");
        assert_eq!(got(&reader), vec![Some(vec!["a".to_string()])]);
        assert_eq!(got(&looper), vec![Some(vec!["a".to_string()])]);

        // NOLOOP: not told about its own writes; BCAST: one message per prefix per shard turn.
        remember(9002, [&b"b"[..]]);
        begin_command(9002);
        key_modified(b"b");
        key_modified(b"user:1");
        key_modified(b"user:2");
        key_modified(b"other");
        end_command();
        begin_command(9001);
        key_modified(b"user:0");
        end_command();
        flush();
        assert_eq!(got(&reader), vec![Some(vec!["b".to_string()])]);
        assert!(got(&looper).is_empty());
        assert_eq!(
            got(&bcast),
            vec![Some(vec![
                "user:0".to_string(),
                "user:1".to_string(),
                "user:2".to_string()
            ])]
        );

        // A flush drops the table (on the freer thread), takes its keys and items off the
        // process-wide totals, and announces a null invalidation to everyone.
        let keys_before = TOTAL_KEYS.load(Ordering::Relaxed);
        let items_before = TOTAL_ITEMS.load(Ordering::Relaxed);
        remember(9001, [&b"c"[..], b"e"]);
        remember(9002, [&b"c"[..]]);
        assert_eq!(TOTAL_KEYS.load(Ordering::Relaxed), keys_before + 2);
        assert_eq!(TOTAL_ITEMS.load(Ordering::Relaxed), items_before + 3);
        flushed(true);
        assert_eq!(TOTAL_KEYS.load(Ordering::Relaxed), 0);
        assert_eq!(TOTAL_ITEMS.load(Ordering::Relaxed), 0);
        key_modified(b"c");
        assert_eq!(got(&reader), vec![None]);
        assert_eq!(got(&looper), vec![None]);
        assert_eq!(got(&bcast), vec![None]);

        // Unregistered clients are skipped.
        remember(9001, [&b"d"[..]]);
        unregister(9001);
        key_modified(b"d");
        assert!(got(&reader).is_empty());
        unregister(9002);
        unregister(9003);
    }
}
