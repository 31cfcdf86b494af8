//! Multi-shard atomicity: take intent locks on every key, shard by shard, then run the parts.
//!
//! See [`crate::locks`] for why this cannot deadlock. A [`MultiLock`] is the coordinator's handle:
//! its parts run through [`MultiLock::run`] without any lock check (the locks are theirs), and the
//! locks are released with [`MultiLock::release`] (or, as a fallback, on drop).

use bytes::Bytes;
use futures_channel::oneshot;

use crate::locks::{key_lock_set, Grant, LockKey, Mode};
use crate::set::ShardSet;
use crate::shard::{current_shard_id, with_shard, Shard};

/// Locks held by one coordinator on one or more shards.
pub struct MultiLock {
    set: ShardSet,
    groups: Vec<(usize, Vec<(LockKey, Mode)>)>,
}

impl ShardSet {
    /// Groups `keys` of database `db` by owning shard, in ascending shard order.
    pub fn group_keys(
        &self,
        keys: impl IntoIterator<Item = (Bytes, Mode)>,
    ) -> Vec<(usize, Vec<(Bytes, Mode)>)> {
        let mut groups: Vec<(usize, Vec<(Bytes, Mode)>)> = Vec::new();
        for (k, m) in keys {
            let shard = self.shard_of_key(&k);
            match groups.iter_mut().find(|(s, _)| *s == shard) {
                Some((_, v)) => v.push((k, m)),
                None => groups.push((shard, vec![(k, m)])),
            }
        }
        groups.sort_by_key(|(s, _)| *s);
        groups
    }

    /// Locks `keys` of database `db` on their shards, waiting (without blocking any thread) for
    /// conflicting holders. Shards are visited in ascending order.
    pub async fn lock_keys(
        &self,
        db: u32,
        keys: impl IntoIterator<Item = (Bytes, Mode)>,
    ) -> MultiLock {
        let groups = self
            .group_keys(keys)
            .into_iter()
            .map(|(shard, keys)| (shard, key_lock_set(db, keys)))
            .collect();
        self.lock_groups(groups).await
    }

    /// Locks whole databases on every shard (FLUSHDB, FLUSHALL, SWAPDB).
    pub async fn lock_dbs(&self, dbs: &[u32]) -> MultiLock {
        let set: Vec<(LockKey, Mode)> = dbs
            .iter()
            .map(|&d| (LockKey::Db(d), Mode::Exclusive))
            .collect();
        let groups = (0..self.len()).map(|s| (s, set.clone())).collect();
        self.lock_groups(groups).await
    }

    async fn lock_groups(&self, groups: Vec<(usize, Vec<(LockKey, Mode)>)>) -> MultiLock {
        let lock = MultiLock {
            set: self.clone(),
            groups,
        };
        for (shard, keys) in &lock.groups {
            let keys = keys.clone();
            let wait = self
                .call(*shard, move |s: &mut Shard| {
                    let (tx, rx) = oneshot::channel::<()>();
                    match s.locks.acquire(
                        keys,
                        Box::new(move || {
                            let _ = tx.send(());
                        }),
                    ) {
                        Grant::Now => None,
                        Grant::Queued => Some(rx),
                    }
                })
                .await;
            if let Some(rx) = wait {
                // The sender lives in the lock table until granted; it is never dropped unfired.
                let _ = rx.await;
            }
        }
        lock
    }
}

impl MultiLock {
    /// The shards this lock spans, ascending.
    pub fn shards(&self) -> impl Iterator<Item = usize> + '_ {
        self.groups.iter().map(|(s, _)| *s)
    }

    /// Runs a part of the command on `shard` under the held locks.
    pub async fn run<R: Send + 'static>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut Shard) -> R + Send + 'static,
    ) -> R {
        self.set.call(shard, f).await
    }

    /// Runs `op` concurrently on every shard this lock spans, each with its share of `items` (those
    /// whose `key` it owns, in their original order). Returns, per shard, the indices in `items` of
    /// the items it got and `op`'s result. Each key's slot is computed once.
    pub async fn scatter<I, T>(
        &self,
        items: &[I],
        key: fn(&I) -> &Bytes,
        op: impl Fn(&mut Shard, &[I]) -> T + Clone + Send + 'static,
    ) -> Vec<(Vec<usize>, T)>
    where
        I: Clone + Send + 'static,
        T: Send + 'static,
    {
        let mut parts: Vec<(usize, Vec<usize>, Vec<I>)> =
            self.shards().map(|s| (s, Vec::new(), Vec::new())).collect();
        for (i, item) in items.iter().enumerate() {
            let owner = self.set.shard_of_key(key(item));
            if let Ok(p) = parts.binary_search_by_key(&owner, |(s, _, _)| *s) {
                parts[p].1.push(i);
                parts[p].2.push(item.clone());
            }
        }
        let runs = parts.into_iter().map(|(shard, idx, mine)| {
            let op = op.clone();
            let run = self.run(shard, move |s| op(s, &mine));
            async move { (idx, run.await) }
        });
        futures_util::future::join_all(runs).await
    }

    /// Releases every lock. The local shard's locks are released at once, remote ones by message.
    pub fn release(mut self) {
        self.release_all();
    }

    fn release_all(&mut self) {
        let local = current_shard_id();
        for (shard, keys) in std::mem::take(&mut self.groups) {
            if Some(shard) == local {
                with_shard(|s| s.locks.release(&keys));
            } else {
                self.set.post(
                    shard,
                    Box::new(move || with_shard(|s| s.locks.release(&keys))),
                );
            }
        }
    }
}

impl Drop for MultiLock {
    fn drop(&mut self) {
        // Normally empty (released explicitly); reached only if a coordinator was cancelled. Posting
        // (instead of releasing inline) keeps this safe even if dropped inside a `with_shard` call.
        for (shard, keys) in std::mem::take(&mut self.groups) {
            self.set.post(
                shard,
                Box::new(move || with_shard(|s| s.locks.release(&keys))),
            );
        }
    }
}
