//! Pub/Sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, PUBLISH, SSUBSCRIBE, SUNSUBSCRIBE,
//! SPUBLISH and PUBSUB, against redis-server (confirmations, messages, errors, RESP2's subscribed
//! mode, RESP3 pushes, pipelines, introspection, CLIENT and INFO fields), plus black-box checks of
//! what only a multi-threaded server can get wrong: subscribers on other threads receive every
//! message in publish order per publisher, PUBLISH counts receivers exactly, a subscription takes
//! effect exactly between its confirmations, a slow subscriber is cut off by the pubsub output
//! limit, and a client that goes away leaves nothing behind.

use std::collections::HashMap;
use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::harness::{encode_command, hash_slot, Conn, Diff, Pair, Reply, Server};

/// Reads `n` frames from each server's connection and asserts they are the same, in any order
/// when `sorted` (pattern messages of one PUBLISH follow each server's pattern-table order).
fn same_pushes(p: &mut Pair, n: usize, sorted: bool) {
    let read = |c: &mut Conn| -> Vec<String> {
        let mut v: Vec<String> = (0..n)
            .map(|_| String::from_utf8_lossy(&c.read_reply()).into_owned())
            .collect();
        if sorted {
            v.sort();
        }
        v
    };
    let expected = read(&mut p.redis);
    let actual = read(&mut p.strata);
    assert_eq!(actual, expected, "pushes differ (left strata, right redis)");
}

/// Sends `commands` as one pipeline to both servers and compares everything they answer.
fn raw(p: &mut Pair, commands: &[&[&str]]) {
    let mut bytes = Vec::new();
    for c in commands {
        bytes.extend(encode_command(c));
    }
    p.run_raw(&bytes);
}

/// Two channel names in different slots (and, with several threads, on different shards).
fn far_apart() -> (String, String) {
    let a = "sch:0".to_string();
    let b = (1..)
        .map(|n| format!("sch:{n}"))
        .find(|k| hash_slot(k) / 8192 != hash_slot(&a) / 8192)
        .expect("a name in the other half");
    (a, b)
}

#[test]
fn resp2_confirmations_messages_and_subscribed_mode_match_redis() {
    let mut d = Diff::with_threads(4);
    let mut publisher = d.new_conns();
    let (s1, s2) = far_apart();
    raw(&mut d, &[&["SUBSCRIBE", "a", "b", "a"]]);
    raw(&mut d, &[&["PING"], &["PING", "hi"], &["PING", "a", "b"]]);
    // Only (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING, QUIT and RESET run in RESP2's subscribed mode;
    // unknown commands and arity errors are reported first.
    raw(
        &mut d,
        &[
            &["GET", "x"],
            &["CLIENT", "INFO"],
            &["PUBLISH", "a", "m"],
            &["PUBSUB", "NUMPAT"],
            &["NOSUCHCOMMAND"],
            &["GET"],
            &["HELLO", "3"],
            &["SELECT", "1"],
            // A rejected EXEC answers EXECABORT, MULTI or not.
            &["MULTI"],
            &["EXEC"],
        ],
    );
    raw(&mut d, &[&["PSUBSCRIBE", "a*", "[ab]"]]);
    raw(&mut d, &[&["SSUBSCRIBE", &s1, &s2, &s1]]);
    publisher.run(&["PUBLISH", "a", "hello"]);
    same_pushes(&mut d, 3, true);
    publisher.run(&["PUBLISH", "b", "world"]);
    same_pushes(&mut d, 2, true);
    publisher.run(&["PUBLISH", "zzz", "nobody"]);
    publisher.run(&["SPUBLISH", &s2, "sharded"]);
    same_pushes(&mut d, 1, false);
    publisher.run(&["SPUBLISH", "a", "not a shard subscriber"]);
    publisher.run(&["PUBLISH", &s1, "not a channel subscriber"]);
    raw(
        &mut d,
        &[&["UNSUBSCRIBE", "a", "never"], &["PUNSUBSCRIBE", "[ab]"]],
    );
    publisher.run(&["PUBLISH", "a", "pattern only"]);
    same_pushes(&mut d, 1, false);
    raw(
        &mut d,
        &[&["SUNSUBSCRIBE", &s1], &["PUNSUBSCRIBE"], &["UNSUBSCRIBE"]],
    );
    raw(&mut d, &[&["PING"], &["SUNSUBSCRIBE"]]);
    // Out of subscribed mode: nothing left, each unsubscribe still answers once, with a null name.
    raw(
        &mut d,
        &[
            &["UNSUBSCRIBE"],
            &["PUNSUBSCRIBE"],
            &["SUNSUBSCRIBE"],
            &["UNSUBSCRIBE", "x", "y"],
            &["PING"],
            &["GET", "x"],
        ],
    );
    publisher.run(&["PUBLISH", "a", "gone"]);
    raw(
        &mut d,
        &[
            &["SUBSCRIBE"],
            &["PSUBSCRIBE"],
            &["SSUBSCRIBE"],
            &["PUBLISH", "a"],
            &["SPUBLISH", "a", "b", "c"],
        ],
    );
    // QUIT is allowed while subscribed, and answers before closing.
    raw(&mut d, &[&["SUBSCRIBE", "q"], &["QUIT"]]);
}

#[test]
fn resp3_pushes_and_normal_commands_while_subscribed_match_redis() {
    let mut d = Diff::with_threads(4);
    let mut publisher = d.new_conns();
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    raw(
        &mut d,
        &[
            &["SET", "k", "v"],
            &["SUBSCRIBE", "news"],
            &["GET", "k"],
            &["PING"],
            &["PING", "x"],
        ],
    );
    publisher.run(&["PUBLISH", "news", "one"]);
    same_pushes(&mut d, 1, false);
    // A subscriber publishing to itself gets the message before PUBLISH's reply, and replies of
    // earlier commands of the same pipeline before both.
    raw(
        &mut d,
        &[
            &["GET", "k"],
            &["PUBLISH", "news", "self"],
            &["PSUBSCRIBE", "n*"],
            &["PUBLISH", "news", "twice"],
            &["SSUBSCRIBE", "sh"],
            &["SPUBLISH", "sh", "shard"],
            &["PUBSUB", "NUMSUB", "news"],
        ],
    );
    raw(
        &mut d,
        &[
            &["UNSUBSCRIBE"],
            &["PUNSUBSCRIBE"],
            &["SUNSUBSCRIBE"],
            &["UNSUBSCRIBE"],
        ],
    );
    // Back to RESP2 while subscribed: the subscribed-mode rule applies again.
    raw(&mut d, &[&["SUBSCRIBE", "c"]]);
    d.run_matching(&["HELLO", "2"], |r| !r.is_error());
    raw(
        &mut d,
        &[&["GET", "k"], &["PING"], &["UNSUBSCRIBE"], &["GET", "k"]],
    );
}

#[test]
fn pipelines_replies_and_pushes_leave_in_command_order() {
    let mut d = Diff::with_threads(4);
    raw(
        &mut d,
        &[
            &["SET", "a", "1"],
            &["INCR", "a"],
            &["SUBSCRIBE", "c1"],
            &["PING"],
            &["UNSUBSCRIBE", "c1"],
            &["GET", "a"],
            &["SUBSCRIBE", "c2"],
            &["RESET"],
            &["GET", "a"],
        ],
    );
    // Confirmations are pushes: CLIENT REPLY OFF or SKIP does not silence them.
    raw(
        &mut d,
        &[
            &["CLIENT", "REPLY", "OFF"],
            &["SUBSCRIBE", "c3"],
            &["UNSUBSCRIBE", "c3"],
            &["GET", "a"],
            &["CLIENT", "REPLY", "ON"],
            &["CLIENT", "REPLY", "SKIP"],
            &["PSUBSCRIBE", "p*"],
            &["PING"],
            &["PUNSUBSCRIBE"],
        ],
    );
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    raw(
        &mut d,
        &[
            &["PSUBSCRIBE", "p*"],
            &["CLIENT", "REPLY", "OFF"],
            &["PUBLISH", "pp", "to myself"],
            &["CLIENT", "REPLY", "ON"],
            &["PUNSUBSCRIBE"],
        ],
    );
}

#[test]
fn reset_leaves_subscribed_mode_and_unsubscribes_everything() {
    let mut d = Diff::with_threads(4);
    let mut other = d.new_conns();
    raw(
        &mut d,
        &[
            &["SUBSCRIBE", "a"],
            &["PSUBSCRIBE", "b*"],
            &["SSUBSCRIBE", "c"],
        ],
    );
    other.run(&["PUBSUB", "NUMSUB", "a"]);
    other.run(&["PUBSUB", "NUMPAT"]);
    raw(&mut d, &[&["RESET"], &["GET", "x"], &["PING"]]);
    other.run(&["PUBSUB", "NUMSUB", "a"]);
    other.run(&["PUBSUB", "SHARDNUMSUB", "c"]);
    other.run(&["PUBSUB", "NUMPAT"]);
    other.run(&["PUBLISH", "a", "m"]);
    other.run(&["PUBLISH", "bb", "m"]);
    other.run(&["SPUBLISH", "c", "m"]);
    d.run(&["GET", "x"]);
}

#[test]
fn introspection_client_fields_and_info_match_redis() {
    let mut d = Diff::with_threads(4);
    let mut subs: Vec<Pair> = (0..4).map(|_| d.new_conns()).collect();
    raw(&mut subs[0], &[&["SUBSCRIBE", "news", "sport", "a.b"]]);
    raw(
        &mut subs[1],
        &[&["SUBSCRIBE", "news"], &["PSUBSCRIBE", "n*", "s*"]],
    );
    raw(
        &mut subs[2],
        &[&["PSUBSCRIBE", "n*"], &["SSUBSCRIBE", "s1", "s2"]],
    );
    raw(&mut subs[3], &[&["SSUBSCRIBE", "s1"]]);
    d.run_unordered(&["PUBSUB", "CHANNELS"]);
    d.run_unordered(&["PUBSUB", "CHANNELS", "*"]);
    d.run_unordered(&["PUBSUB", "CHANNELS", "n*"]);
    d.run_unordered(&["PUBSUB", "CHANNELS", "a?b"]);
    d.run_unordered(&["PUBSUB", "CHANNELS", "[ns]*"]);
    d.run_unordered(&["PUBSUB", "SHARDCHANNELS"]);
    d.run_unordered(&["PUBSUB", "SHARDCHANNELS", "*2"]);
    for cmd in [
        &["PUBSUB", "NUMSUB"][..],
        &["PUBSUB", "NUMSUB", "news", "sport", "nothing", "n*"],
        &["PUBSUB", "SHARDNUMSUB", "s1", "s2", "s3"],
        &["PUBSUB", "SHARDNUMSUB"],
        &["PUBSUB", "NUMPAT"],
        &["PUBSUB", "HELP"],
        &["pubsub", "help"],
        &["PUBSUB", "CHANNELS", "a", "b"],
        &["PUBSUB", "SHARDCHANNELS", "a", "b"],
        &["PUBSUB", "NUMPAT", "x"],
        &["PUBSUB", "HELP", "x"],
        &["PUBSUB", "NOSUCH"],
        &["PUBSUB"],
        &["PUBLISH", "news", "hello"],
        &["PUBLISH", "sport", "hello"],
        &["PUBLISH", "s1", "hello"],
        &["SPUBLISH", "s1", "hello"],
        &["SPUBLISH", "news", "hello"],
        &["COMMAND", "GETKEYS", "SPUBLISH", "ch", "m"],
        &["COMMAND", "GETKEYS", "PUBLISH", "ch", "m"],
    ] {
        d.run(cmd);
    }
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run(&["PUBSUB", "NUMSUB", "news", "x"]);
    d.run_unordered(&["PUBSUB", "CHANNELS"]);

    // CLIENT LIST's subscription fields and flag, and INFO's counts.
    let fields = |c: &mut Conn| -> Vec<String> {
        let list = c.call_decoded(&["CLIENT", "LIST"]);
        let text = String::from_utf8_lossy(list.as_bytes().unwrap_or_default()).into_owned();
        let mut lines: Vec<String> = text
            .lines()
            .map(|l| {
                l.split(' ')
                    .filter(|f| {
                        ["flags=", "sub=", "psub=", "ssub="]
                            .iter()
                            .any(|p| f.starts_with(p))
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect();
        lines.sort();
        let info = c.call_decoded(&["INFO", "stats"]);
        let info = String::from_utf8_lossy(info.as_bytes().unwrap_or_default()).into_owned();
        lines.extend(
            info.lines()
                .filter(|l| l.starts_with("pubsub"))
                .map(str::to_string),
        );
        lines
    };
    d.both(fields);
    raw(&mut subs[1], &[&["PUNSUBSCRIBE", "s*"], &["UNSUBSCRIBE"]]);
    raw(&mut subs[3], &[&["SUNSUBSCRIBE"]]);
    d.both(fields);
    d.run(&["PUBSUB", "NUMPAT"]);
    d.run(&["PUBSUB", "NUMSUB", "news"]);
}

/// A tiny deterministic generator (xorshift), so a failing sequence can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

#[test]
fn randomized_subscription_sequences_match_redis() {
    const CHANNELS: &[&str] = &["c0", "c1", "c2", "news", "x1", ""];
    const PATTERNS: &[&str] = &["c*", "c[0-1]", "x?", "*1", "n\\ews", "[^c]*", "*"];
    let mut d = Diff::with_threads(4);
    let mut publisher = d.new_conns();
    let mut rng = Rng(0x5EED_9A1B);
    for round in 0..4 {
        if round % 2 == 1 {
            d.run_matching(&["HELLO", "3"], |r| !r.is_error());
        } else {
            d.run_matching(&["HELLO", "2"], |r| !r.is_error());
        }
        // What the subscriber holds, to know how many frames each command produces.
        let mut held: [Vec<String>; 3] = Default::default();
        for _ in 0..150 {
            let kind = rng.below(3);
            let pool = if kind == 1 { PATTERNS } else { CHANNELS };
            match rng.below(6) {
                0 | 1 => {
                    let n = 1 + rng.below(3);
                    let names: Vec<&str> = (0..n).map(|_| rng.pick(pool)).collect();
                    let verb = ["SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"][kind];
                    let mut cmd = vec![verb];
                    cmd.extend(&names);
                    d.redis.send(&cmd);
                    d.strata.send(&cmd);
                    same_pushes(&mut d, n, false);
                    for name in names {
                        if !held[kind].iter().any(|h| h == name) {
                            held[kind].push(name.to_string());
                        }
                    }
                }
                2 => {
                    let verb = ["UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"][kind];
                    // Without arguments only when the order cannot matter (Redis's follows its
                    // hash table).
                    let names: Vec<&str> = if held[kind].len() <= 1 && rng.below(2) == 0 {
                        Vec::new()
                    } else {
                        (0..1 + rng.below(2)).map(|_| rng.pick(pool)).collect()
                    };
                    let mut cmd = vec![verb];
                    cmd.extend(&names);
                    d.redis.send(&cmd);
                    d.strata.send(&cmd);
                    same_pushes(&mut d, names.len().max(1), false);
                    if names.is_empty() {
                        held[kind].clear();
                    } else {
                        held[kind].retain(|h| !names.contains(&h.as_str()));
                    }
                }
                3 | 4 => {
                    let channel = rng.pick(CHANNELS);
                    let verb = if rng.below(4) == 0 {
                        "SPUBLISH"
                    } else {
                        "PUBLISH"
                    };
                    let message = format!("m{}", rng.below(1000));
                    let n = publisher.run(&[verb, channel, &message]);
                    let n = Reply::decode(&n).as_int().expect("a count") as usize;
                    same_pushes(&mut d, n, true);
                }
                _ => {
                    let subscribed = held.iter().any(|h| !h.is_empty());
                    let cmd: &[&str] = match rng.below(3) {
                        0 => &["PING"],
                        1 => &["PING", "hey"],
                        _ if subscribed && round % 2 == 0 => &["ECHO", "not allowed"],
                        _ => &["PUBSUB", "NUMPAT"],
                    };
                    d.run(cmd);
                }
            }
        }
        raw(&mut d, &[&["RESET"]]);
    }
}

// ----- black-box: threads, ordering, counts, limits, lifetimes -----

/// A subscriber connection and what it expects: the message kinds it should get for each
/// publish (a channel subscription, a pattern one, or both).
struct Subscriber {
    conn: Conn,
    channel: bool,
    pattern: bool,
}

/// Reads one push and returns its elements as strings.
fn push_parts(c: &mut Conn) -> Vec<String> {
    let r = Reply::decode(&c.read_reply());
    let items = match &r {
        Reply::Push(v) => v.clone(),
        Reply::Array(Some(v)) => v.clone(),
        other => panic!("expected a push, got {other}"),
    };
    items
        .iter()
        .map(|i| match (i.as_bytes(), i.as_int()) {
            (Some(b), _) => String::from_utf8_lossy(b).into_owned(),
            (None, Some(n)) => n.to_string(),
            _ => String::new(),
        })
        .collect()
}

#[test]
fn every_message_reaches_every_thread_in_publish_order_with_exact_counts() {
    // More threads than this machine has cores, subscribers spread over all of them.
    let server = Server::strata(&["--threads", "4"]);
    const PUBLISHERS: usize = 4;
    const MESSAGES: usize = 1500;
    let mut subscribers = Vec::new();
    for i in 0..12 {
        let mut conn = server.conn();
        if i % 2 == 1 {
            conn.call(&["HELLO", "3"]);
        }
        let (channel, pattern) = match i % 3 {
            0 => (true, false),
            1 => (false, true),
            _ => (true, true),
        };
        if channel {
            conn.send(&["SUBSCRIBE", "feed"]);
            assert_eq!(push_parts(&mut conn)[0], "subscribe");
        }
        if pattern {
            conn.send(&["PSUBSCRIBE", "fe?d"]);
            assert_eq!(push_parts(&mut conn)[0], "psubscribe");
        }
        subscribers.push(Subscriber {
            conn,
            channel,
            pattern,
        });
    }
    let receivers: usize = subscribers
        .iter()
        .map(|s| s.channel as usize + s.pattern as usize)
        .sum();

    std::thread::scope(|scope| {
        let readers: Vec<_> = subscribers
            .into_iter()
            .map(|mut s| {
                scope.spawn(move || {
                    let per_kind = s.channel as usize + s.pattern as usize;
                    // Next expected sequence number per (publisher, kind).
                    let mut next: HashMap<(String, String), usize> = HashMap::new();
                    for _ in 0..PUBLISHERS * MESSAGES * per_kind {
                        let parts = push_parts(&mut s.conn);
                        let (kind, payload) = match parts[0].as_str() {
                            "message" if s.channel => ("message", &parts[2]),
                            "pmessage" if s.pattern => ("pmessage", &parts[3]),
                            _ => panic!("unexpected push {parts:?}"),
                        };
                        let (publisher, seq) = payload.split_once(':').expect("p:n");
                        let seq: usize = seq.parse().expect("a number");
                        let want = next
                            .entry((publisher.to_string(), kind.to_string()))
                            .or_insert(0);
                        assert_eq!(seq, *want, "{kind} from {publisher} out of order");
                        *want += 1;
                    }
                    assert!(next.values().all(|&n| n == MESSAGES));
                })
            })
            .collect();
        let publishers: Vec<_> = (0..PUBLISHERS)
            .map(|p| {
                let mut conn = server.conn();
                scope.spawn(move || {
                    // Pipelined in runs of 50, each reply checked.
                    for start in (0..MESSAGES).step_by(50) {
                        let mut bytes = Vec::new();
                        for seq in start..(start + 50).min(MESSAGES) {
                            bytes.extend(encode_command(&[
                                "PUBLISH",
                                "feed",
                                &format!("p{p}:{seq}"),
                            ]));
                        }
                        conn.send_raw(&bytes);
                        for _ in start..(start + 50).min(MESSAGES) {
                            let n = Reply::decode(&conn.read_reply()).as_int();
                            assert_eq!(n, Some(receivers as i64), "PUBLISH's receiver count");
                        }
                    }
                })
            })
            .collect();
        for h in publishers.into_iter().chain(readers) {
            h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
    });
}

#[test]
fn a_subscription_takes_effect_exactly_between_its_confirmations() {
    let server = Server::strata(&["--threads", "4"]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let publishers: Vec<_> = (0..3)
            .map(|p| {
                let mut conn = server.conn();
                let stop = &stop;
                scope.spawn(move || {
                    let mut seq = 0;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        conn.call(&["PUBLISH", "live", &format!("p{p}:{seq}")]);
                        conn.call(&["SPUBLISH", "slive", &format!("p{p}:{seq}")]);
                        seq += 1;
                    }
                })
            })
            .collect();
        // Subscribers join and leave while messages flow: after a confirmation every message of
        // each publisher arrives (a contiguous run of sequence numbers), and none after leaving.
        for round in 0..30 {
            let mut c = server.conn();
            let (sub, unsub, word) = match round % 3 {
                0 => ("SUBSCRIBE", "UNSUBSCRIBE", "live"),
                1 => ("PSUBSCRIBE", "PUNSUBSCRIBE", "l?ve"),
                _ => ("SSUBSCRIBE", "SUNSUBSCRIBE", "slive"),
            };
            c.send(&[sub, word]);
            assert_eq!(push_parts(&mut c)[0], sub.to_ascii_lowercase());
            sleep(Duration::from_millis(20));
            c.send(&[unsub, word]);
            let mut last: HashMap<String, usize> = HashMap::new();
            loop {
                let parts = push_parts(&mut c);
                if parts[0] == unsub.to_ascii_lowercase() {
                    assert_eq!(parts[1], word);
                    break;
                }
                let payload = parts.last().expect("a payload");
                let (p, seq) = payload.split_once(':').expect("p:n");
                let seq: usize = seq.parse().expect("a number");
                if let Some(prev) = last.insert(p.to_string(), seq) {
                    assert_eq!(seq, prev + 1, "a gap or reordering in {p}'s messages");
                }
            }
            // Nothing follows the unsubscribe confirmation.
            c.send(&["PING"]);
            assert_eq!(c.read_reply(), b"+PONG\r\n");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for h in publishers {
            h.join().unwrap_or_else(|e| std::panic::resume_unwind(e));
        }
    });
}

/// Polls `cmd` until its reply is `want` (bounded).
fn wait_for(c: &mut Conn, cmd: &[&str], want: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = c.call(cmd);
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{cmd:?} still answers {}",
            String::from_utf8_lossy(&got)
        );
        sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_slow_subscriber_is_cut_off_by_the_pubsub_output_limit() {
    for server in [Server::redis(&[]), Server::strata(&["--threads", "4"])] {
        let mut admin = server.conn();
        admin.call(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 1mb 0 0",
        ]);
        let mut slow = server.conn();
        slow.send(&["SUBSCRIBE", "flood"]);
        assert_eq!(push_parts(&mut slow)[0], "subscribe");
        let mut fast = server.conn();
        fast.send(&["SUBSCRIBE", "flood"]);
        assert_eq!(push_parts(&mut fast)[0], "subscribe");
        // The reading subscriber tells when it has each message, and the next is published only
        // then: its backlog stays at one message while the other's grows.
        let (got_tx, got_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            while push_parts(&mut fast)[2] != "end" {
                let _ = got_tx.send(());
            }
        });
        // 40 MB: far more than the socket buffers between the server and a client that never reads.
        let message = "x".repeat(64 * 1024);
        for _ in 0..640 {
            admin.call(&["PUBLISH", "flood", &message]);
            got_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the reading subscriber gets every message");
        }
        wait_for(
            &mut admin,
            &["PUBSUB", "NUMSUB", "flood"],
            b"*2\r\n$5\r\nflood\r\n:1\r\n",
        );
        assert_eq!(admin.call(&["PUBLISH", "flood", "end"]), b":1\r\n");
        reader
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        let (_, closed) = slow.read_until_quiet(Duration::from_millis(500));
        assert!(
            closed,
            "{}: the slow subscriber is disconnected",
            server.kind().name()
        );
    }
}

#[test]
fn a_client_that_goes_away_leaves_no_subscription_behind() {
    let server = Server::strata(&["--threads", "4"]);
    let mut admin = server.conn();
    let (s1, s2) = far_apart();
    let mut conns = Vec::new();
    for i in 0..16 {
        let mut c = server.conn();
        let ch = format!("ch{}", i % 4);
        c.send(&["SUBSCRIBE", &ch, "common"]);
        c.send(&["PSUBSCRIBE", &format!("p{i}*"), "common*"]);
        c.send(&["SSUBSCRIBE", &s1, &s2]);
        for _ in 0..6 {
            c.read_reply();
        }
        conns.push(c);
    }
    assert_eq!(admin.call(&["PUBLISH", "common", "x"]), b":32\r\n");
    assert_eq!(admin.call(&["SPUBLISH", &s2, "x"]), b":16\r\n");
    // Half close their sockets, half are killed.
    let killed = conns.split_off(8);
    drop(conns);
    admin.call(&["CLIENT", "KILL", "TYPE", "pubsub"]);
    drop(killed);
    wait_for(&mut admin, &["PUBSUB", "NUMPAT"], b":0\r\n");
    wait_for(&mut admin, &["PUBSUB", "CHANNELS"], b"*0\r\n");
    wait_for(&mut admin, &["PUBSUB", "SHARDCHANNELS"], b"*0\r\n");
    assert_eq!(admin.call(&["PUBLISH", "common", "x"]), b":0\r\n");
    assert_eq!(admin.call(&["SPUBLISH", &s1, "x"]), b":0\r\n");
    let info = admin.call_decoded(&["INFO", "stats"]);
    let info = String::from_utf8_lossy(info.as_bytes().unwrap_or_default()).into_owned();
    for field in [
        "pubsub_channels:0",
        "pubsub_patterns:0",
        "pubsubshard_channels:0",
    ] {
        assert!(info.contains(field), "INFO stats lacks {field}");
    }
}

#[test]
fn the_idle_timeout_spares_subscribed_clients() {
    let mut d = Diff::with_config(&["--timeout", "1"]);
    let mut idle = d.new_conns();
    raw(&mut d, &[&["SUBSCRIBE", "quiet"]]);
    sleep(Duration::from_millis(2600));
    let mut publisher = d.new_conns();
    publisher.run(&["PUBLISH", "quiet", "still there"]);
    same_pushes(&mut d, 1, false);
    assert!(idle.redis.is_closed() && idle.strata.is_closed());
}

#[test]
fn command_info_and_docs_match_redis() {
    const NAMES: &[&str] = &[
        "subscribe",
        "unsubscribe",
        "psubscribe",
        "punsubscribe",
        "publish",
        "ssubscribe",
        "sunsubscribe",
        "spublish",
        "pubsub|channels",
        "pubsub|numsub",
        "pubsub|numpat",
        "pubsub|shardchannels",
        "pubsub|shardnumsub",
        "pubsub|help",
    ];
    let mut d = Diff::new();
    for proto in ["2", "3"] {
        d.run_matching(&["HELLO", proto], |r| !r.is_error());
        for name in NAMES {
            d.run(&["COMMAND", "INFO", name]);
            d.run(&["COMMAND", "DOCS", name]);
        }
        // The container: the same head, and the same subcommands (listed in hash order).
        let (redis, strata) = d.run_matching(&["COMMAND", "INFO", "pubsub"], |r| {
            r.as_array().is_some_and(|a| a.len() == 1)
        });
        let parts = |r: &Reply| -> (Vec<Reply>, Vec<Vec<u8>>) {
            let entry = r.as_array().unwrap()[0].as_array().unwrap().to_vec();
            let mut subs: Vec<Vec<u8>> = entry[9]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_array().unwrap()[0].as_bytes().unwrap().to_vec())
                .collect();
            subs.sort();
            (entry[..9].to_vec(), subs)
        };
        assert_eq!(parts(&strata), parts(&redis), "COMMAND INFO pubsub");
    }
}

#[test]
fn inside_exec_confirmations_and_own_messages_are_part_of_exec_reply() {
    let mut d = Diff::with_threads(4);
    raw(
        &mut d,
        &[
            &["MULTI"],
            &["SUBSCRIBE", "a", "b"],
            &["PING"],
            &["GET", "k"],
            &["EXEC"],
            &["PING"],
            &["GET", "k"],
        ],
    );
    raw(&mut d, &[&["UNSUBSCRIBE", "a"], &["UNSUBSCRIBE", "b"]]);
    raw(
        &mut d,
        &[
            &["MULTI"],
            &["UNSUBSCRIBE"],
            &["PSUBSCRIBE", "p"],
            &["SSUBSCRIBE", "s"],
            &["EXEC"],
        ],
    );
    raw(&mut d, &[&["PUNSUBSCRIBE"], &["SET", "k", "v"]]);
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    raw(
        &mut d,
        &[
            &["SUBSCRIBE", "x"],
            &["MULTI"],
            &["PUBLISH", "x", "to myself"],
            &["GET", "k"],
            &["EXEC"],
            &["PUBLISH", "x", "outside"],
            &["UNSUBSCRIBE"],
        ],
    );
}

#[test]
fn client_pause_write_holds_publish_but_not_introspection() {
    for server in [Server::redis(&[]), Server::strata(&["--threads", "4"])] {
        let name = server.kind().name();
        let mut admin = server.conn();
        let mut c = server.conn();
        assert_eq!(
            admin.call(&["CLIENT", "PAUSE", "1000", "WRITE"]),
            b"+OK\r\n"
        );
        let t = Instant::now();
        c.call(&["PUBSUB", "NUMSUB", "x"]);
        assert!(
            t.elapsed() < Duration::from_millis(700),
            "{name}: NUMSUB was held"
        );
        for cmd in [["PUBLISH", "x", "m"], ["SPUBLISH", "x", "m"]] {
            let t = Instant::now();
            assert_eq!(c.call(&cmd), b":0\r\n");
            if cmd[0] == "PUBLISH" {
                assert!(
                    t.elapsed() >= Duration::from_millis(500),
                    "{name}: PUBLISH ran paused"
                );
            }
        }
    }
}
