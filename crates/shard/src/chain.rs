//! Cross-shard moves in flight, per client whose command started them.
//!
//! Redis serves a whole chain of blocked moves (BLMOVE a→b, BLMOVE b→c, …) inside the push that
//! started it, so the pusher's reply, and everything anyone does after it, finds the element at the
//! end of the chain. A move whose keys live on two shards completes by messages after the pusher's
//! turn (`strata_server::moving`), and a move it makes possible is claimed by the next shard in
//! turn, later still. So each move carries a [`MoveTicket`] of the client whose command started
//! the chain: taken when the move is claimed (in that command's turn, or in the turn of the move
//! before it in the chain, before that one's ticket is given up), given up when it ends, however it
//! ends. The pusher's connection waits until its client has no ticket left
//! ([`moves_settled`]) before it answers or runs anything more, which is then after the whole
//! chain, transitively.
//!
//! The cost when no move is in flight, which is always outside of cross-shard chains, is one
//! relaxed load per batch ([`IN_FLIGHT`]).

use std::collections::HashMap;
use std::future::poll_fn;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;

use futures_util::task::AtomicWaker;

/// Tickets alive anywhere.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// Per client with tickets alive: how many, and its connection's task waiting for none.
static BY_CLIENT: Mutex<Option<HashMap<u64, Arc<Waiting>>>> = Mutex::new(None);

#[derive(Default)]
struct Waiting {
    /// Tickets alive; only changed under [`BY_CLIENT`]'s lock.
    tickets: AtomicUsize,
    waker: AtomicWaker,
}

fn clients() -> MutexGuard<'static, Option<HashMap<u64, Arc<Waiting>>>> {
    BY_CLIENT.lock().unwrap_or_else(|e| e.into_inner())
}

/// One cross-shard move of a chain started by client `client`'s command: alive until the move
/// ends (dropped with the move's last step, or with its message if a shard exits first).
pub struct MoveTicket {
    client: u64,
    waiting: Arc<Waiting>,
}

impl MoveTicket {
    /// A ticket for a move started by `client`'s command; None for no client (0: a move started
    /// outside any client's command, which nobody waits for).
    pub fn new(client: u64) -> Option<MoveTicket> {
        if client == 0 {
            return None;
        }
        let mut map = clients();
        let waiting = map
            .get_or_insert_with(HashMap::new)
            .entry(client)
            .or_default()
            .clone();
        waiting.tickets.fetch_add(1, Ordering::Relaxed);
        IN_FLIGHT.fetch_add(1, Ordering::Release);
        Some(MoveTicket { client, waiting })
    }

    /// The client whose command started the chain.
    pub fn client(&self) -> u64 {
        self.client
    }
}

impl Drop for MoveTicket {
    fn drop(&mut self) {
        let last = {
            let mut map = clients();
            let last = self.waiting.tickets.fetch_sub(1, Ordering::Relaxed) == 1;
            if last {
                if let Some(map) = map.as_mut() {
                    map.remove(&self.client);
                }
            }
            IN_FLIGHT.fetch_sub(1, Ordering::Release);
            last
        };
        if last {
            self.waiting.waker.wake();
        }
    }
}

/// Completes once client `client` has no move in flight: every chain its commands started so far
/// has been passed down to its end.
pub async fn moves_settled(client: u64) {
    if IN_FLIGHT.load(Ordering::Acquire) == 0 {
        return;
    }
    poll_fn(|cx| {
        let map = clients();
        match map.as_ref().and_then(|m| m.get(&client)) {
            None => Poll::Ready(()),
            Some(w) => {
                // Registered under the lock the last ticket's drop takes before it wakes.
                w.waker.register(cx.waker());
                Poll::Pending
            }
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::Context;

    fn ready(client: u64) -> bool {
        let mut fut = std::pin::pin!(moves_settled(client));
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        fut.as_mut().poll(&mut cx).is_ready()
    }

    #[test]
    fn a_client_is_settled_once_its_last_ticket_is_gone() {
        assert!(MoveTicket::new(0).is_none());
        assert!(ready(41));
        let a = MoveTicket::new(41).unwrap();
        let b = MoveTicket::new(41).unwrap();
        let other = MoveTicket::new(42).unwrap();
        assert!(!ready(41));
        drop(a);
        assert!(!ready(41), "one ticket left");
        drop(b);
        assert!(ready(41));
        assert!(!ready(42), "another client's ticket is its own");
        drop(other);
        assert!(ready(42));
    }
}
