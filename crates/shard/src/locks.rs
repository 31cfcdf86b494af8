//! Per-key intent locks: how multi-shard commands stay atomic without locking data.
//!
//! A command that spans shards (MSET, RENAME, FLUSHALL, ...) first takes intent locks on every key it
//! touches, shard by shard in ascending shard order, and only then runs its per-shard parts; each
//! shard's locks are released after that shard's part has run. Single-shard commands never hold a lock
//! across a suspension point: they run at once when their keys are free and queue otherwise.
//!
//! Invariants:
//! * A request enqueues on all of its keys of one shard in one step (the shard is single-threaded), so
//!   any two requests are ordered the same way on every key they share: no cycle within a shard.
//! * Across shards a coordinator asks shard i+1 only after shard i granted, so waits-for edges always
//!   point to higher shards: no cycle across shards (ordered resource acquisition).
//! * Queues are FIFO per key; a request is granted when it heads the queue of every key it wants and
//!   its mode is compatible with the current holders (shared with shared).
//! * Every key request on database `d` also takes `LockKey::Db(d)` shared, so a database-wide
//!   exclusive lock (FLUSHDB, FLUSHALL, SWAPDB) waits for, and excludes, every key lock in that database.

use std::collections::VecDeque;

use bytes::Bytes;
use hashbrown::HashMap;
use slab::Slab;

/// What a lock protects.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockKey {
    /// A whole database.
    Db(u32),
    /// One key of one database.
    Key(u32, Bytes),
}

/// Lock mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Shared,
    Exclusive,
}

#[derive(Default)]
struct KeyState {
    shared: u32,
    exclusive: bool,
    queue: VecDeque<usize>,
}

impl KeyState {
    fn compatible(&self, mode: Mode) -> bool {
        match mode {
            Mode::Shared => !self.exclusive,
            Mode::Exclusive => !self.exclusive && self.shared == 0,
        }
    }

    fn hold(&mut self, mode: Mode) {
        match mode {
            Mode::Shared => self.shared += 1,
            Mode::Exclusive => self.exclusive = true,
        }
    }

    fn idle(&self) -> bool {
        self.shared == 0 && !self.exclusive && self.queue.is_empty()
    }
}

struct Request {
    keys: Vec<(LockKey, Mode)>,
    on_grant: Box<dyn FnOnce()>,
}

/// The outcome of [`LockTable::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grant {
    /// Held from now on.
    Now,
    /// Queued; the grant callback fires later.
    Queued,
}

/// The lock table of one shard.
#[derive(Default)]
pub struct LockTable {
    keys: HashMap<LockKey, KeyState>,
    requests: Slab<Request>,
}

/// The lock set a key request takes: the keys plus their databases, shared. Sorted and de-duplicated
/// (a key named twice takes the strongest mode once).
pub fn key_lock_set(
    db: u32,
    keys: impl IntoIterator<Item = (Bytes, Mode)>,
) -> Vec<(LockKey, Mode)> {
    let mut set: Vec<(LockKey, Mode)> = vec![(LockKey::Db(db), Mode::Shared)];
    for (k, m) in keys {
        let k = LockKey::Key(db, k);
        match set.iter_mut().find(|(x, _)| *x == k) {
            Some((_, mode)) => {
                if m == Mode::Exclusive {
                    *mode = Mode::Exclusive
                }
            }
            None => set.push((k, m)),
        }
    }
    set
}

impl LockTable {
    /// True when nothing is locked or queued: the fast path for every single-shard command.
    pub fn is_idle(&self) -> bool {
        self.keys.is_empty()
    }

    /// True when none of `keys` is held or queued for (so a command on them may run at once).
    pub fn all_free(&self, keys: &[(LockKey, Mode)]) -> bool {
        keys.iter().all(|(k, m)| {
            self.keys
                .get(k)
                .is_none_or(|s| s.queue.is_empty() && s.compatible(*m))
        })
    }

    /// Requests `keys`. If they can be granted now they are held, [`Grant::Now`] is returned and
    /// `on_grant` is dropped; otherwise the request queues ([`Grant::Queued`]) and `on_grant` runs
    /// when it is granted.
    pub fn acquire(&mut self, keys: Vec<(LockKey, Mode)>, on_grant: Box<dyn FnOnce()>) -> Grant {
        if self.all_free(&keys) {
            for (k, m) in keys {
                self.keys.entry(k).or_default().hold(m);
            }
            return Grant::Now;
        }
        let keyset: Vec<LockKey> = keys.iter().map(|(k, _)| k.clone()).collect();
        let id = self.requests.insert(Request { keys, on_grant });
        for k in keyset {
            self.keys.entry(k).or_default().queue.push_back(id);
        }
        Grant::Queued
    }

    /// Releases locks taken by [`LockTable::acquire`] (granted at once or later) and grants waiters.
    pub fn release(&mut self, keys: &[(LockKey, Mode)]) {
        let mut work = Vec::new();
        for (k, m) in keys {
            if let Some(s) = self.keys.get_mut(k) {
                match m {
                    Mode::Shared => s.shared = s.shared.saturating_sub(1),
                    Mode::Exclusive => s.exclusive = false,
                }
                if s.idle() {
                    self.keys.remove(k);
                } else {
                    work.push(k.clone());
                }
            }
        }
        let mut granted = Vec::new();
        while let Some(k) = work.pop() {
            let Some(&id) = self.keys.get(&k).and_then(|s| s.queue.front()) else {
                continue;
            };
            let grantable = self.requests[id].keys.iter().all(|(key, mode)| {
                self.keys
                    .get(key)
                    .is_some_and(|s| s.queue.front() == Some(&id) && s.compatible(*mode))
            });
            if !grantable {
                continue;
            }
            let req = self.requests.remove(id);
            for (key, mode) in &req.keys {
                if let Some(s) = self.keys.get_mut(key) {
                    s.queue.pop_front();
                    s.hold(*mode);
                }
                work.push(key.clone());
            }
            granted.push(req.on_grant);
        }
        for f in granted {
            f();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    fn key(k: &str) -> Bytes {
        Bytes::copy_from_slice(k.as_bytes())
    }

    #[test]
    fn exclusive_waits_then_is_granted_in_fifo_order() {
        let mut t = LockTable::default();
        let log = Rc::new(RefCell::new(Vec::new()));
        let a = key_lock_set(0, [(key("a"), Mode::Exclusive)]);
        assert!(t.acquire(a.clone(), Box::new(|| {})) == Grant::Now);
        for i in 0..3 {
            let log = log.clone();
            assert!(
                t.acquire(a.clone(), Box::new(move || log.borrow_mut().push(i))) == Grant::Queued
            );
        }
        assert!(!t.all_free(&a));
        for i in 0..3 {
            t.release(&a);
            assert_eq!(*log.borrow(), (0..=i).collect::<Vec<_>>());
        }
        t.release(&a);
        assert!(t.is_idle());
    }

    #[test]
    fn shared_holders_coexist_and_db_lock_excludes_keys() {
        let mut t = LockTable::default();
        let r = key_lock_set(0, [(key("a"), Mode::Shared)]);
        assert!(t.acquire(r.clone(), Box::new(|| {})) == Grant::Now);
        assert!(t.acquire(r.clone(), Box::new(|| {})) == Grant::Now);
        let flush = vec![(LockKey::Db(0), Mode::Exclusive)];
        let granted = Rc::new(RefCell::new(false));
        let g = granted.clone();
        assert!(
            t.acquire(flush.clone(), Box::new(move || *g.borrow_mut() = true)) == Grant::Queued
        );
        // A later key request queues behind the flush.
        assert!(!t.all_free(&key_lock_set(0, [(key("b"), Mode::Shared)])));
        t.release(&r);
        assert!(!*granted.borrow());
        t.release(&r);
        assert!(*granted.borrow());
        t.release(&flush);
        assert!(t.is_idle());
        // Other databases are unaffected.
        assert!(t.all_free(&key_lock_set(1, [(key("a"), Mode::Exclusive)])));
    }

    #[test]
    fn duplicate_keys_take_strongest_mode_once() {
        let set = key_lock_set(3, [(key("a"), Mode::Shared), (key("a"), Mode::Exclusive)]);
        assert_eq!(set.len(), 2);
        assert_eq!(set[1], (LockKey::Key(3, key("a")), Mode::Exclusive));
    }
}
