//! WATCH: optimistic locking for MULTI/EXEC.
//!
//! A client that WATCHes keys owns one [`Watch`], shared by every shard holding one of its watched
//! keys. Each database keeps, per watched key, the watches on it (`Db::watch`); the write path
//! marks them *touched* from its key events, the way Redis's `touchWatchedKey` does:
//!
//! * a key written, deleted or given a new TTL touches its watches;
//! * a key removed by expiry touches the watches that saw it alive when they were taken (a key
//!   already stale at WATCH time is as good as absent, and its removal changes nothing);
//! * FLUSHDB/FLUSHALL touch the watches of keys that existed, SWAPDB those of keys that exist on
//!   either side of the swap.
//!
//! EXEC then aborts if the watch was touched, or if a key alive at WATCH time has expired since
//! without anyone noticing (`Db::watched_key_expired`). The flag is an atomic because the shard
//! threads set it and the client's thread reads it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One client's watch; see the module docs.
#[derive(Debug, Default)]
pub struct Watch {
    touched: AtomicBool,
}

impl Watch {
    /// A fresh, untouched watch.
    pub fn new() -> Arc<Watch> {
        Arc::new(Watch::default())
    }

    /// Marks the watch touched (EXEC will abort).
    pub fn touch(&self) {
        self.touched.store(true, Ordering::Release);
    }

    /// True once a watched key changed.
    pub fn is_touched(&self) -> bool {
        self.touched.load(Ordering::Acquire)
    }
}

/// One watch on one key, as a database keeps it.
#[derive(Clone, Debug)]
pub(crate) struct Watcher {
    pub(crate) watch: Arc<Watch>,
    /// The key was expired (stale) when the watch was taken: its removal by expiry touches nothing.
    pub(crate) stale: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_starts_untouched_and_stays_touched() {
        let w = Watch::new();
        assert!(!w.is_touched());
        w.touch();
        assert!(w.is_touched());
        w.touch();
        assert!(w.is_touched());
    }
}
