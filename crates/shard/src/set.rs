//! The set of shards and the messages between their threads.
//!
//! Every shard thread owns an inbox of closures. `call` runs a closure on the shard that owns some
//! keys: inline when that shard is the caller's own (no hop, no allocation beyond the closure), or as
//! a message whose result comes back through a oneshot channel. Closures are `Send`; results are `Send`;
//! nothing else crosses threads.

use std::sync::Arc;

use futures_channel::{mpsc, oneshot};
use futures_util::StreamExt;
use strata_core::slot::{key_slot, SLOTS};

use crate::shard::{current_shard_id, with_shard, Shard};

/// A unit of work sent to a shard thread.
pub type Job = Box<dyn FnOnce() + Send>;

/// The receiving end of a shard thread's inbox.
pub struct Inbox(mpsc::UnboundedReceiver<Job>);

/// Handles to every shard; cheap to clone and shared by all threads.
#[derive(Clone)]
pub struct ShardSet {
    inner: Arc<Inner>,
}

struct Inner {
    senders: Vec<mpsc::UnboundedSender<Job>>,
    slot_owner: Box<[u16]>,
}

impl ShardSet {
    /// Creates `n` inboxes; slots are split into `n` contiguous ranges, as a Redis Cluster would.
    pub fn new(n: usize) -> (ShardSet, Vec<Inbox>) {
        assert!((1..=1024).contains(&n), "shard count must be 1..=1024");
        let (senders, inboxes) = (0..n)
            .map(|_| mpsc::unbounded())
            .map(|(s, r)| (s, Inbox(r)))
            .unzip();
        let slot_owner = (0..SLOTS).map(|slot| (slot * n / SLOTS) as u16).collect();
        (
            ShardSet {
                inner: Arc::new(Inner {
                    senders,
                    slot_owner,
                }),
            },
            inboxes,
        )
    }

    /// Number of shards.
    pub fn len(&self) -> usize {
        self.inner.senders.len()
    }

    /// Always false: a set has at least one shard.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The shard owning hash slot `slot`.
    pub fn shard_of_slot(&self, slot: u16) -> usize {
        self.inner.slot_owner[slot as usize] as usize
    }

    /// The shard owning `key`.
    pub fn shard_of_key(&self, key: &[u8]) -> usize {
        self.shard_of_slot(key_slot(key))
    }

    /// Sends `job` to run on `shard`'s thread (fire and forget).
    pub fn post(&self, shard: usize, job: Job) {
        // A send fails only when the shard thread has exited, i.e. during process shutdown.
        let _ = self.inner.senders[shard].unbounded_send(job);
    }

    /// Runs `f` on `shard` and returns its result: inline if `shard` is this thread's own.
    pub async fn call<R: Send + 'static>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut Shard) -> R + Send + 'static,
    ) -> R {
        if current_shard_id() == Some(shard) {
            return with_shard(f);
        }
        let (tx, rx) = oneshot::channel();
        self.post(
            shard,
            Box::new(move || {
                let _ = tx.send(with_shard(f));
            }),
        );
        rx.await
            .expect("shard thread exited while a call was pending")
    }

    /// Runs `f` on every shard concurrently and returns the results in shard order.
    pub async fn call_all<R: Send + 'static>(
        &self,
        f: impl Fn(&mut Shard) -> R + Send + Sync + Clone + 'static,
    ) -> Vec<R> {
        let calls = (0..self.len()).map(|i| self.call(i, f.clone()));
        futures_util::future::join_all(calls).await
    }
}

impl Inbox {
    /// Runs jobs as they arrive, until every sender is gone.
    pub async fn run(mut self) {
        while let Some(job) = self.0.next().await {
            job();
        }
    }
}
