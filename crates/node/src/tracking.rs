//! Client-side caching: CLIENT TRACKING, CACHING, GETREDIR, TRACKINGINFO, and how invalidations
//! reach a client.
//!
//! The shards decide *who* is told (`strata_shard::tracking`); a [`ClientTracking`] is the client's
//! side of it: its mode, and delivery as Redis's sendTrackingMessage does it —
//! * without REDIRECT: a RESP3 push `invalidate [keys]` on the client's own connection (a RESP2
//!   client without redirect gets nothing: RESP2 has no pushes);
//! * with REDIRECT: to the other client, as a push if it speaks RESP3, else as a pub/sub message on
//!   `__redis__:invalidate` if it is subscribed to anything; if it is gone, the tracking client is
//!   marked broken (flag `R`) and, in RESP3, told `tracking-redir-broken <id>`.
//!
//! An invalidation for the client's own connection that arrives while that connection is running a
//! batch is held until the batch's replies are queued ([`ClientTracking::hold`] /
//! [`ClientTracking::release`]): Redis sends a client's self-invalidations after the reply of the
//! command that caused them, so a reply and a push never swap places.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use strata_resp::{Protocol, ReplyBuf};

use crate::clients::ClientInfo;

pub use crate::clients::{FLAG_BCAST, FLAG_BROKEN, FLAG_ON};

/// Tracking mode options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
}

/// One client's tracking settings and delivery (see the module docs).
pub struct ClientTracking {
    info: Arc<ClientInfo>,
    /// REDIRECT target: its id (0: none) and handle.
    pub(crate) redirect: u64,
    target: Option<Arc<ClientInfo>>,
    pub opts: Options,
    /// BCAST prefixes (the empty prefix when none was given).
    pub prefixes: Vec<Bytes>,
    held: Mutex<Held>,
}

#[derive(Default)]
struct Held {
    executing: bool,
    msgs: Vec<Bytes>,
}

impl ClientTracking {
    /// The settings of a client (`info`) that turned tracking on, with REDIRECT to client
    /// `redirect` (0: none; `target` its handle while it is connected) and BCAST `prefixes`.
    pub fn new(
        info: Arc<ClientInfo>,
        redirect: u64,
        target: Option<Arc<ClientInfo>>,
        opts: Options,
        prefixes: Vec<Bytes>,
    ) -> ClientTracking {
        ClientTracking {
            info,
            redirect,
            target,
            opts,
            prefixes,
            // Created while the connection runs a batch: held until its replies are queued.
            held: Mutex::new(Held {
                executing: true,
                msgs: Vec::new(),
            }),
        }
    }

    /// While the client's connection runs a batch, its own invalidations wait.
    pub fn hold(&self) {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .executing = true;
    }

    /// The batch's replies are queued: send what was held.
    pub fn release(&self) {
        let mut h = self.held.lock().unwrap_or_else(|e| e.into_inner());
        h.executing = false;
        for m in h.msgs.drain(..) {
            self.info.push(m);
        }
    }

    /// Takes the invalidations held so far, for the caller to place in the reply stream (those
    /// of evictions run before a command go before its reply, as in Redis).
    pub fn take_held(&self) -> Vec<Bytes> {
        std::mem::take(&mut self.held.lock().unwrap_or_else(|e| e.into_inner()).msgs)
    }

    fn send_self(&self, msg: Bytes) {
        let mut h = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if h.executing {
            h.msgs.push(msg);
        } else {
            drop(h);
            self.info.push(msg);
        }
    }
}

/// The value part of an invalidation: an array of keys, or the null of `proto`.
fn encode_value(out: &mut ReplyBuf, keys: Option<&[&[u8]]>) {
    match keys {
        Some(keys) => {
            out.array(keys.len());
            for k in keys {
                out.bulk(k);
            }
        }
        None => out.null(),
    }
}

fn proto_of(info: &ClientInfo) -> Protocol {
    if info.resp.load(Ordering::Relaxed) >= 3 {
        Protocol::Resp3
    } else {
        Protocol::Resp2
    }
}

impl strata_shard::tracking::Tracker for ClientTracking {
    fn bcast_prefixes(&self) -> Option<&[Bytes]> {
        self.opts.bcast.then_some(&self.prefixes[..])
    }

    fn noloop(&self) -> bool {
        self.opts.noloop
    }

    fn invalidate(&self, keys: Option<&[&[u8]]>) {
        let own = proto_of(&self.info);
        let Some(target) = self.redirect_target() else {
            if self.redirect != 0 {
                self.info.tracking.fetch_or(FLAG_BROKEN, Ordering::Relaxed);
                if own == Protocol::Resp3 {
                    let mut out = ReplyBuf::new(own);
                    out.push(2);
                    out.bulk(b"tracking-redir-broken");
                    out.int(self.redirect as i64);
                    self.send_self(Bytes::from(out.take()));
                }
                return;
            }
            if own == Protocol::Resp3 {
                let mut out = ReplyBuf::new(own);
                out.push(2);
                out.bulk(b"invalidate");
                encode_value(&mut out, keys);
                self.send_self(Bytes::from(out.take()));
            }
            return;
        };
        // The null of a flush is the tracking client's own protocol's, as in Redis.
        let mut out = ReplyBuf::new(proto_of(target));
        if out.proto == Protocol::Resp3 {
            out.push(2);
            out.bulk(b"invalidate");
        } else if target.subscriptions() > 0 {
            out.array(3);
            out.bulk(b"message");
            out.bulk(b"__redis__:invalidate");
        } else {
            return;
        }
        match keys {
            Some(_) => encode_value(&mut out, keys),
            None => {
                out.proto = own;
                out.null();
            }
        }
        target.push(Bytes::from(out.take()));
    }
}

impl ClientTracking {
    fn redirect_target(&self) -> Option<&Arc<ClientInfo>> {
        self.target
            .as_ref()
            .filter(|t| !t.killed.load(Ordering::Relaxed) && !t.closing.load(Ordering::Relaxed))
    }
}
