//! Pub/Sub (Redis's pubsub.c): SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, SSUBSCRIBE,
//! SUNSUBSCRIBE, SPUBLISH and the PUBSUB container.
//!
//! **The registry** ([`PubSub`], one per server, shared by every thread) maps each channel to the
//! clients subscribed to it, and each pattern to its clients. Channels are spread over
//! [`PARTS`] maps by a hash of the name, each behind its own mutex, so PUBLISH takes one
//! uncontended lock (the part of its channel) and no lock common to every publisher; patterns live
//! in one map behind a read-write lock that PUBLISH reads only while at least one pattern exists
//! (an atomic count says so). Shard channels (SSUBSCRIBE/SPUBLISH) have their own parted map; as
//! in Redis with cluster mode off, their slots are not checked.
//!
//! **Delivery.** PUBLISH runs on the publisher's connection thread and pushes the encoded message
//! (built once per protocol version, then shared) into every receiver's outbox
//! ([`ClientInfo::push`]) before it replies; each receiver's own thread writes it out. Hence:
//! * messages of one publisher reach each subscriber in publish order (the pushes of one PUBLISH
//!   are done before the next PUBLISH of that connection runs);
//! * the channel's part stays locked while the message is pushed to the channel's and then the
//!   matching patterns' subscribers, so PUBLISHes to one channel are delivered in one order to
//!   every subscriber, channel and pattern subscribers alike;
//! * a (un)subscription and its confirmation happen under the same lock, so a subscriber never
//!   gets a message of a channel before the confirmation of its subscription, nor after the
//!   confirmation of its unsubscription;
//! * PUBLISH counts every client it pushed to, a client subscribed to the channel and to a
//!   matching pattern (or to two matching patterns) once per subscription, as Redis does.
//!
//! A slow subscriber is cut off by `client-output-buffer-limit`'s pubsub class (enforced by the
//! push path) rather than growing memory without bound.
//!
//! **Per connection** ([`Subscriptions`], in the [`Session`]): the names the client subscribed to,
//! in subscription order (UNSUBSCRIBE without arguments goes through them in that order), and the
//! counts mirrored in [`ClientInfo`] for CLIENT LIST, PING and the output-buffer class. Dropping it
//! (the connection ends) or RESET removes every subscription from the registry.
//!
//! **Replies.** Subscription confirmations and messages are pushes: RESP3 `>` frames, RESP2 arrays.
//! They go through the outbox even when replies are off (CLIENT REPLY OFF/SKIP), as Redis 7.0 sends
//! them. Before a command that pushes to its own client runs, the dispatcher moves the replies of
//! the earlier commands of its pipeline into the outbox ([`pushes_to_caller`]), so replies and
//! pushes leave in command order. Inside EXEC they are written into EXEC's reply instead
//! ([`Sink::Inline`]), as Redis 7.0 does. In RESP2 a subscribed client may only run the commands
//! [`subscribed_mode_error`] allows.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use bytes::Bytes;
use foldhash::fast::RandomState;
use strata_core::glob::glob_match;
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::notify::{self, Note};

use crate::clients::ClientInfo;

// ===== the registry =====

/// How many independently locked maps the channels are spread over.
pub const PARTS: usize = 64;

/// What a client subscribes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A channel (SUBSCRIBE).
    Channel,
    /// A glob pattern over channel names (PSUBSCRIBE).
    Pattern,
    /// A shard channel (SSUBSCRIBE).
    Shard,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Channel, Kind::Pattern, Kind::Shard];

    fn index(self) -> usize {
        self as usize
    }

    /// The first element of a confirmation push.
    fn confirm_word(self, subscribe: bool) -> &'static [u8] {
        match (self, subscribe) {
            (Kind::Channel, true) => b"subscribe",
            (Kind::Channel, false) => b"unsubscribe",
            (Kind::Pattern, true) => b"psubscribe",
            (Kind::Pattern, false) => b"punsubscribe",
            (Kind::Shard, true) => b"ssubscribe",
            (Kind::Shard, false) => b"sunsubscribe",
        }
    }
}

/// The clients subscribed to one name: a list for fast delivery, and an index by client id so
/// a client leaves in O(1) however many others are subscribed.
#[derive(Default)]
struct Subscribers {
    clients: Vec<Arc<ClientInfo>>,
    at: HashMap<u64, usize, RandomState>,
}

impl Subscribers {
    /// Adds `client`; false if it was there already.
    fn insert(&mut self, client: &Arc<ClientInfo>) -> bool {
        if self.at.contains_key(&client.id) {
            return false;
        }
        self.at.insert(client.id, self.clients.len());
        self.clients.push(client.clone());
        true
    }

    /// Removes the client `id`; false if it was not there.
    fn remove(&mut self, id: u64) -> bool {
        let Some(i) = self.at.remove(&id) else {
            return false;
        };
        self.clients.swap_remove(i);
        if let Some(moved) = self.clients.get(i) {
            self.at.insert(moved.id, i);
        }
        true
    }

    fn len(&self) -> usize {
        self.clients.len()
    }

    fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }
}

type NameMap = HashMap<Bytes, Subscribers, RandomState>;

/// Channels (or shard channels) spread over [`PARTS`] locked maps by a hash of their name.
struct ChannelMap {
    parts: Box<[Mutex<NameMap>]>,
    /// Picks a name's part (randomly seeded, so clients cannot pile names into one part).
    hasher: RandomState,
    /// Names with at least one subscriber.
    count: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ChannelMap {
    fn new() -> ChannelMap {
        ChannelMap {
            parts: (0..PARTS).map(|_| Mutex::new(NameMap::default())).collect(),
            hasher: RandomState::default(),
            count: AtomicUsize::new(0),
        }
    }

    fn part(&self, name: &[u8]) -> MutexGuard<'_, NameMap> {
        let h = self.hasher.hash_one(name) as usize;
        lock(&self.parts[h % PARTS])
    }
}

/// A message encoded for each protocol version, built on first need and shared by every receiver.
struct Encoded<'a> {
    parts: [&'a [u8]; 4],
    len: usize,
    frames: [Option<Bytes>; 2],
}

impl<'a> Encoded<'a> {
    fn new(parts: &[&'a [u8]]) -> Encoded<'a> {
        let mut all: [&[u8]; 4] = [b""; 4];
        all[..parts.len()].copy_from_slice(parts);
        Encoded {
            parts: all,
            len: parts.len(),
            frames: [None, None],
        }
    }

    fn for_client(&mut self, c: &ClientInfo) -> Bytes {
        let proto = if c.resp.load(Ordering::Relaxed) == 3 {
            Protocol::Resp3
        } else {
            Protocol::Resp2
        };
        let parts = &self.parts[..self.len];
        self.frames[(proto == Protocol::Resp3) as usize]
            .get_or_insert_with(|| {
                let size: usize = parts.iter().map(|p| p.len() + 16).sum();
                let mut out = ReplyBuf::new(proto);
                out.buf.reserve(size + 8);
                out.push(parts.len());
                for p in parts {
                    out.bulk(p);
                }
                Bytes::from(out.buf)
            })
            .clone()
    }
}

/// Every subscription of the server: see the module docs.
pub struct PubSub {
    channels: ChannelMap,
    shard_channels: ChannelMap,
    patterns: RwLock<NameMap>,
    /// Patterns with at least one subscriber; PUBLISH skips the pattern map while it is 0.
    pattern_count: AtomicUsize,
}

impl Default for PubSub {
    fn default() -> PubSub {
        PubSub::new()
    }
}

impl PubSub {
    pub fn new() -> PubSub {
        PubSub {
            channels: ChannelMap::new(),
            shard_channels: ChannelMap::new(),
            patterns: RwLock::new(NameMap::default()),
            pattern_count: AtomicUsize::new(0),
        }
    }

    fn channel_map(&self, kind: Kind) -> &ChannelMap {
        match kind {
            Kind::Shard => &self.shard_channels,
            _ => &self.channels,
        }
    }

    /// Runs `f` on the map holding `name` of `kind`, under its lock; `f` gets the count of names of
    /// the map to keep up to date.
    fn with_map<R>(
        &self,
        kind: Kind,
        name: &[u8],
        f: impl FnOnce(&mut NameMap, &AtomicUsize) -> R,
    ) -> R {
        match kind {
            Kind::Pattern => {
                let mut map = self.patterns.write().unwrap_or_else(|e| e.into_inner());
                f(&mut map, &self.pattern_count)
            }
            _ => {
                let m = self.channel_map(kind);
                f(&mut m.part(name), &m.count)
            }
        }
    }

    /// Subscribes `client` to `name` and, under the same lock, pushes `confirm` to it (so no
    /// message of `name` can reach the client before the confirmation). False if the client was
    /// subscribed already.
    pub fn subscribe(
        &self,
        kind: Kind,
        name: &Bytes,
        client: &Arc<ClientInfo>,
        confirm: Option<Bytes>,
    ) -> bool {
        self.with_map(kind, name, |map, count| {
            let subs = map.entry(name.clone()).or_insert_with(|| {
                count.fetch_add(1, Ordering::SeqCst);
                Subscribers::default()
            });
            let added = subs.insert(client);
            if let Some(bytes) = confirm {
                client.push(bytes);
            }
            added
        })
    }

    /// Unsubscribes the client `client` from `name` and, under the same lock, pushes `confirm` to
    /// it (no message of `name` follows the confirmation). False if it was not subscribed.
    pub fn unsubscribe(
        &self,
        kind: Kind,
        name: &[u8],
        client: &ClientInfo,
        confirm: Option<Bytes>,
    ) -> bool {
        self.with_map(kind, name, |map, count| {
            let removed = match map.get_mut(name) {
                Some(subs) => {
                    let removed = subs.remove(client.id);
                    if subs.is_empty() {
                        map.remove(name);
                        count.fetch_sub(1, Ordering::SeqCst);
                    }
                    removed
                }
                None => false,
            };
            if let Some(bytes) = confirm {
                client.push(bytes);
            }
            removed
        })
    }

    /// PUBLISH (or, for [`Kind::Shard`], SPUBLISH): pushes `message` to every subscriber of
    /// `channel` and, for a channel, to the subscribers of every matching pattern. Returns the
    /// number of pushes (receivers, a client counted once per matching subscription). `now` (unix
    /// ms) is the command's clock reading, used for the receivers' output-limit timing. With
    /// `inline` = (client id, buffer), what that client receives is appended to the buffer instead
    /// of pushed (a subscriber publishing inside EXEC: Redis puts the message in EXEC's reply).
    pub fn publish(
        &self,
        kind: Kind,
        channel: &[u8],
        message: &[u8],
        now: i64,
        mut inline: Option<(u64, &mut Vec<u8>)>,
    ) -> usize {
        let mut deliver = |c: &ClientInfo, frame: Bytes| match inline.as_mut() {
            Some((id, buf)) if *id == c.id => buf.extend_from_slice(&frame),
            _ => {
                c.push_at(frame, now);
            }
        };
        let map = self.channel_map(kind);
        let part = map.part(channel);
        let mut receivers = 0;
        if let Some(subs) = part.get(channel) {
            let word: &[u8] = if kind == Kind::Shard {
                b"smessage"
            } else {
                b"message"
            };
            let mut frame = Encoded::new(&[word, channel, message]);
            for c in &subs.clients {
                deliver(c, frame.for_client(c));
            }
            receivers += subs.len();
        }
        if kind == Kind::Channel && self.pattern_count.load(Ordering::SeqCst) > 0 {
            let patterns = self.patterns.read().unwrap_or_else(|e| e.into_inner());
            for (pattern, subs) in patterns.iter() {
                if !glob_match(pattern, channel, false) {
                    continue;
                }
                let mut frame = Encoded::new(&[b"pmessage", pattern, channel, message]);
                for c in &subs.clients {
                    deliver(c, frame.for_client(c));
                }
                receivers += subs.len();
            }
        }
        drop(part);
        receivers
    }

    /// Publishes keyspace events (see `strata_shard::notify`), as Redis's notifyKeyspaceEvent:
    /// to `__keyspace@<db>__:<key>` with the event as message if K was on, then to
    /// `__keyevent@<db>__:<event>` with the key as message if E was on.
    pub fn publish_notes(&self, notes: Vec<Note>) {
        let now = strata_shard::now_ms();
        let mut channel = Vec::new();
        for n in notes {
            if n.flags & notify::KEYSPACE != 0 {
                channel.clear();
                channel.extend_from_slice(format!("__keyspace@{}__:", n.db).as_bytes());
                channel.extend_from_slice(&n.key);
                self.publish(Kind::Channel, &channel, n.event.as_bytes(), now, None);
            }
            if n.flags & notify::KEYEVENT != 0 {
                channel.clear();
                channel.extend_from_slice(format!("__keyevent@{}__:{}", n.db, n.event).as_bytes());
                self.publish(Kind::Channel, &channel, &n.key, now, None);
            }
        }
    }

    /// The channels (or shard channels) with subscribers, those matching `pattern` if given.
    pub fn channels(&self, kind: Kind, pattern: Option<&[u8]>) -> Vec<Bytes> {
        let mut names = Vec::new();
        for part in self.channel_map(kind).parts.iter() {
            let part = lock(part);
            names.extend(
                part.keys()
                    .filter(|n| pattern.is_none_or(|p| glob_match(p, n, false)))
                    .cloned(),
            );
        }
        names
    }

    /// Subscribers of the channel (or shard channel) `name`, patterns not counted.
    pub fn numsub(&self, kind: Kind, name: &[u8]) -> usize {
        self.channel_map(kind)
            .part(name)
            .get(name)
            .map_or(0, Subscribers::len)
    }

    /// Number of names of `kind` with at least one subscriber (PUBSUB NUMPAT, INFO's
    /// `pubsub_channels`, `pubsub_patterns`, `pubsubshard_channels`).
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Pattern => self.pattern_count.load(Ordering::SeqCst),
            _ => self.channel_map(kind).count.load(Ordering::SeqCst),
        }
    }
}

// ===== per connection =====

/// Names in the order they were added, with O(log n) removal.
#[derive(Default)]
struct Names {
    next: u64,
    order: BTreeMap<u64, Bytes>,
    seq: HashMap<Bytes, u64, RandomState>,
}

impl Names {
    fn insert(&mut self, name: &Bytes) -> bool {
        if self.seq.contains_key(name) {
            return false;
        }
        self.seq.insert(name.clone(), self.next);
        self.order.insert(self.next, name.clone());
        self.next += 1;
        true
    }

    fn remove(&mut self, name: &[u8]) -> bool {
        match self.seq.remove(name) {
            Some(s) => {
                self.order.remove(&s);
                true
            }
            None => false,
        }
    }

    fn len(&self) -> usize {
        self.seq.len()
    }

    fn all(&self) -> Vec<Bytes> {
        self.order.values().cloned().collect()
    }
}

/// A connection's subscriptions: see the module docs. Empty (and allocation-free) until the first
/// subscription; dropping it unsubscribes everything.
#[derive(Default)]
pub struct Subscriptions {
    state: Option<Box<Subscribed>>,
}

struct Subscribed {
    registry: Arc<PubSub>,
    client: Arc<ClientInfo>,
    names: [Names; 3],
}

impl Subscribed {
    /// The count a confirmation of `kind` shows: channels and patterns together, shard channels
    /// apart (Redis's `clientSubscriptionsCount` / `clientShardSubscriptionsCount`).
    fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.names[Kind::Shard.index()].len(),
            _ => self.names[Kind::Channel.index()].len() + self.names[Kind::Pattern.index()].len(),
        }
    }

    /// Mirrors the counts into the client's shared info (CLIENT LIST, PING, output class).
    fn mirror(&self) {
        let c = &self.client;
        c.sub.store(self.names[0].len() as u32, Ordering::Relaxed);
        c.psub.store(self.names[1].len() as u32, Ordering::Relaxed);
        c.ssub.store(self.names[2].len() as u32, Ordering::Relaxed);
    }
}

impl Drop for Subscribed {
    fn drop(&mut self) {
        for kind in Kind::ALL {
            for name in self.names[kind.index()].order.values() {
                self.registry.unsubscribe(kind, name, &self.client, None);
            }
        }
        for n in &mut self.names {
            *n = Names::default();
        }
        self.mirror();
    }
}

/// A confirmation push: `[word, name or null, count]`.
fn confirmation(
    proto: Protocol,
    kind: Kind,
    subscribe: bool,
    name: Option<&[u8]>,
    count: usize,
) -> Bytes {
    let mut out = ReplyBuf::new(proto);
    out.push(3);
    out.bulk(kind.confirm_word(subscribe));
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count as i64);
    Bytes::from(out.buf)
}

impl Subscriptions {
    /// Total subscriptions of every kind.
    pub fn total(&self) -> usize {
        self.state
            .as_ref()
            .map_or(0, |s| s.names.iter().map(Names::len).sum())
    }

    /// Drops every subscription without confirmations (RESET).
    pub fn clear(&mut self) {
        self.state = None;
    }

    fn state(&mut self, registry: &Arc<PubSub>, client: &Arc<ClientInfo>) -> &mut Subscribed {
        self.state.get_or_insert_with(|| {
            Box::new(Subscribed {
                registry: registry.clone(),
                client: client.clone(),
                names: Default::default(),
            })
        })
    }

    /// (P|S)SUBSCRIBE: subscribes to each name, confirming each through `sink`.
    pub(crate) fn subscribe(
        &mut self,
        registry: &Arc<PubSub>,
        client: &Arc<ClientInfo>,
        proto: Protocol,
        kind: Kind,
        names: &[Bytes],
        mut sink: Sink<'_>,
    ) {
        let s = self.state(registry, client);
        for name in names {
            // A copy: the argument is a slice of the connection's read buffer, which a long-lived
            // subscription must not keep alive.
            let name = Bytes::copy_from_slice(name);
            let added = s.names[kind.index()].insert(&name);
            s.mirror();
            let confirm = confirmation(proto, kind, true, Some(&name), s.count(kind));
            if added {
                registry.subscribe(kind, &name, client, sink.for_registry(confirm));
            } else {
                sink.send(client, confirm);
            }
        }
    }

    /// (P|S)UNSUBSCRIBE: unsubscribes from each name (from all of `kind` when `names` is empty),
    /// confirming each through `sink`; with nothing to unsubscribe from, once with a null name.
    pub(crate) fn unsubscribe(
        &mut self,
        client: &ClientInfo,
        proto: Protocol,
        kind: Kind,
        names: &[Bytes],
        mut sink: Sink<'_>,
    ) {
        let Some(s) = self.state.as_deref_mut() else {
            // Subscribed to nothing: each name, or a null one, is confirmed with a count of 0.
            if names.is_empty() {
                sink.send(client, confirmation(proto, kind, false, None, 0));
            }
            for name in names {
                sink.send(client, confirmation(proto, kind, false, Some(name), 0));
            }
            return;
        };
        let all;
        let names = if names.is_empty() {
            all = s.names[kind.index()].all();
            if all.is_empty() {
                sink.send(
                    client,
                    confirmation(proto, kind, false, None, s.count(kind)),
                );
                return;
            }
            &all[..]
        } else {
            names
        };
        for name in names {
            let removed = s.names[kind.index()].remove(name);
            s.mirror();
            let confirm = confirmation(proto, kind, false, Some(name), s.count(kind));
            if removed {
                s.registry
                    .unsubscribe(kind, name, client, sink.for_registry(confirm));
            } else {
                sink.send(client, confirm);
            }
        }
        if s.names.iter().all(|n| n.len() == 0) {
            self.state = None;
        }
    }
}

/// Where a command's pushes to its own client go.
pub enum Sink<'a> {
    /// Through the client's outbox (the normal case): confirmations are queued under the
    /// registry's lock, ordered with the messages of the channel.
    Push,
    /// Into the reply being built: inside EXEC, where Redis 7.0 writes them into EXEC's reply.
    Inline(&'a mut Vec<u8>),
}

impl Sink<'_> {
    fn send(&mut self, client: &ClientInfo, bytes: Bytes) {
        match self {
            Sink::Push => {
                client.push(bytes);
            }
            Sink::Inline(buf) => buf.extend_from_slice(&bytes),
        }
    }

    /// The confirmation the registry should push under its lock, or None once written inline.
    fn for_registry(&mut self, bytes: Bytes) -> Option<Bytes> {
        match self {
            Sink::Push => Some(bytes),
            Sink::Inline(buf) => {
                buf.extend_from_slice(&bytes);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::Output;
    use crate::config::Config;

    fn client(id: u64) -> Arc<ClientInfo> {
        let limits = Config::default().output_limits().clone();
        Arc::new(ClientInfo::new(
            id,
            String::new(),
            String::new(),
            -1,
            0,
            limits,
        ))
    }

    /// Everything pushed to `c` so far, as written.
    fn drain(c: &ClientInfo) -> String {
        let mut out = Vec::new();
        while let Output::Chunk(chunk) = c.take_output() {
            out.extend_from_slice(&chunk);
            c.wrote(chunk.len() as u64, 0);
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn names(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn publish_counts_every_matching_subscription_and_delivers_once_each() {
        let reg = Arc::new(PubSub::new());
        let (a, b) = (client(1), client(2));
        // HELLO 3 records the protocol in the shared info, which publishers read.
        b.resp.store(3, Ordering::Relaxed);
        let (mut sa, mut sb) = (Subscriptions::default(), Subscriptions::default());
        sa.subscribe(
            &reg,
            &a,
            Protocol::Resp2,
            Kind::Channel,
            &names(&["news"]),
            Sink::Push,
        );
        sa.subscribe(
            &reg,
            &a,
            Protocol::Resp2,
            Kind::Pattern,
            &names(&["n*", "*s", "x*"]),
            Sink::Push,
        );
        sb.subscribe(
            &reg,
            &b,
            Protocol::Resp3,
            Kind::Channel,
            &names(&["news", "news"]),
            Sink::Push,
        );
        drain(&a);
        drain(&b);
        assert_eq!(reg.publish(Kind::Channel, b"news", b"hi", 0, None), 4);
        // The channel message first, then one per matching pattern (in the table's order).
        let got = drain(&a);
        let message = "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n";
        assert!(got.starts_with(message), "{got:?}");
        let rest = &got[message.len()..];
        let n_star = "*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n";
        let star_s = "*4\r\n$8\r\npmessage\r\n$2\r\n*s\r\n$4\r\nnews\r\n$2\r\nhi\r\n";
        assert!(rest == format!("{n_star}{star_s}") || rest == format!("{star_s}{n_star}"));
        // A RESP3 subscriber gets a push frame, once however often it subscribed.
        assert_eq!(
            drain(&b),
            ">3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n"
        );
        // Shard channels are apart and ignore patterns.
        assert_eq!(reg.publish(Kind::Shard, b"news", b"hi", 0, None), 0);
        assert_eq!(reg.publish(Kind::Channel, b"other", b"x", 0, None), 0);
        assert_eq!(reg.count(Kind::Channel), 1);
        assert_eq!(reg.count(Kind::Pattern), 3);
        assert_eq!(reg.numsub(Kind::Channel, b"news"), 2);
        assert_eq!(reg.numsub(Kind::Shard, b"news"), 0);
        assert_eq!(reg.channels(Kind::Channel, Some(b"n?ws")), names(&["news"]));
        assert!(reg.channels(Kind::Channel, Some(b"x*")).is_empty());
    }

    #[test]
    fn confirmations_carry_running_counts_and_a_null_name_when_nothing_is_held() {
        let reg = Arc::new(PubSub::new());
        let c = client(1);
        let mut s = Subscriptions::default();
        s.unsubscribe(&c, Protocol::Resp2, Kind::Channel, &[], Sink::Push);
        s.unsubscribe(
            &c,
            Protocol::Resp3,
            Kind::Pattern,
            &names(&["p"]),
            Sink::Push,
        );
        assert_eq!(
            drain(&c),
            "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n>3\r\n$12\r\npunsubscribe\r\n$1\r\np\r\n:0\r\n"
        );
        s.subscribe(
            &reg,
            &c,
            Protocol::Resp2,
            Kind::Channel,
            &names(&["a", "b"]),
            Sink::Push,
        );
        s.subscribe(
            &reg,
            &c,
            Protocol::Resp2,
            Kind::Pattern,
            &names(&["p"]),
            Sink::Push,
        );
        s.subscribe(
            &reg,
            &c,
            Protocol::Resp2,
            Kind::Shard,
            &names(&["s"]),
            Sink::Push,
        );
        assert_eq!(
            drain(&c),
            "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n\
             *3\r\n$10\r\npsubscribe\r\n$1\r\np\r\n:3\r\n*3\r\n$10\r\nssubscribe\r\n$1\r\ns\r\n:1\r\n"
        );
        assert_eq!(
            (
                c.sub.load(Ordering::Relaxed),
                c.psub.load(Ordering::Relaxed),
                c.ssub.load(Ordering::Relaxed)
            ),
            (2, 1, 1)
        );
        // Without names: every name of that kind, in subscription order.
        s.unsubscribe(&c, Protocol::Resp2, Kind::Channel, &[], Sink::Push);
        assert_eq!(
            drain(&c),
            "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:2\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:1\r\n"
        );
        assert_eq!(s.total(), 2);
        assert_eq!(reg.count(Kind::Channel), 0);
    }

    #[test]
    fn dropping_or_clearing_subscriptions_leaves_the_registry_empty() {
        let reg = Arc::new(PubSub::new());
        let clients: Vec<_> = (0..50).map(client).collect();
        let mut subs: Vec<Subscriptions> = (0..50).map(|_| Subscriptions::default()).collect();
        for (i, (c, s)) in clients.iter().zip(subs.iter_mut()).enumerate() {
            s.subscribe(
                &reg,
                c,
                Protocol::Resp2,
                Kind::Channel,
                &names(&["all", &format!("c{}", i % 7)]),
                Sink::Push,
            );
            s.subscribe(
                &reg,
                c,
                Protocol::Resp2,
                Kind::Pattern,
                &names(&["*", &format!("p{i}")]),
                Sink::Push,
            );
            s.subscribe(
                &reg,
                c,
                Protocol::Resp2,
                Kind::Shard,
                &names(&["sh"]),
                Sink::Push,
            );
        }
        assert_eq!(reg.publish(Kind::Channel, b"all", b"m", 0, None), 100);
        assert_eq!(reg.count(Kind::Channel), 8);
        assert_eq!(reg.count(Kind::Pattern), 51);
        // Every other client leaves, out of order (the index stays consistent).
        for i in (0..50).rev().step_by(2) {
            subs[i].clear();
            assert_eq!(clients[i].subscriptions(), 0);
        }
        assert_eq!(reg.publish(Kind::Channel, b"all", b"m", 0, None), 50);
        assert_eq!(reg.publish(Kind::Shard, b"sh", b"m", 0, None), 25);
        drop(subs);
        assert_eq!(reg.publish(Kind::Channel, b"all", b"m", 0, None), 0);
        for kind in Kind::ALL {
            assert_eq!(reg.count(kind), 0);
        }
        assert!(reg.channels(Kind::Channel, None).is_empty());
        assert!(reg.patterns.read().unwrap().is_empty());
    }

    #[test]
    fn publishers_on_many_threads_reach_each_subscriber_in_their_own_order() {
        let reg = Arc::new(PubSub::new());
        let subscribers: Vec<_> = (0..4).map(client).collect();
        let mut subs: Vec<Subscriptions> = (0..4).map(|_| Subscriptions::default()).collect();
        for (i, (c, s)) in subscribers.iter().zip(subs.iter_mut()).enumerate() {
            let kind = if i % 2 == 0 {
                Kind::Channel
            } else {
                Kind::Pattern
            };
            let name = if i % 2 == 0 { "ch" } else { "c?" };
            s.subscribe(&reg, c, Protocol::Resp2, kind, &names(&[name]), Sink::Push);
            drain(c);
        }
        std::thread::scope(|scope| {
            for p in 0..4 {
                let reg = &reg;
                scope.spawn(move || {
                    for seq in 0..500 {
                        let n = reg.publish(
                            Kind::Channel,
                            b"ch",
                            format!("{p}:{seq}").as_bytes(),
                            0,
                            None,
                        );
                        assert_eq!(n, 4);
                    }
                });
            }
        });
        for c in &subscribers {
            let text = drain(c);
            let mut next = [0usize; 4];
            for payload in text
                .split("\r\n")
                .filter(|l| l.contains(':') && !l.starts_with(['*', '$']))
            {
                let (p, seq) = payload.split_once(':').unwrap();
                let p: usize = p.parse().unwrap();
                assert_eq!(seq.parse::<usize>().unwrap(), next[p]);
                next[p] += 1;
            }
            assert_eq!(next, [500; 4]);
        }
    }
}
