//! A pipeline's commands take effect in the order sent, as every other client sees them, even when
//! they go to different shards; and connection commands take their place in that order.
//!
//! The servers run with more shard threads than the machine has cores, so sub-batches of one pipeline
//! really do run on different threads at different times. Loops are bounded by iteration counts.

use std::thread;

use crate::harness::{encode_command, hash_slot, Conn, Reply, Server};

const THREADS: usize = 5;

/// The shard owning `key` with `THREADS` shards (contiguous slot ranges, as the server splits them).
fn shard_of(key: &str) -> usize {
    hash_slot(key) as usize * THREADS / 16384
}

/// Two keys that live on different shards, the first on a higher one than the second (so the later
/// write of a pipeline goes to the lower shard: the case a naive parallel dispatch gets wrong).
fn keys_on_two_shards() -> (String, String) {
    let keys: Vec<String> = (0..100).map(|i| format!("order:{i}")).collect();
    for a in &keys {
        for b in &keys {
            if shard_of(a) > shard_of(b) {
                return (a.clone(), b.clone());
            }
        }
    }
    panic!("no two keys on different shards")
}

fn int_of(reply: &[u8]) -> i64 {
    let r = Reply::decode(reply);
    if r.is_nil() {
        return -1;
    }
    std::str::from_utf8(r.as_bytes().expect("bulk reply"))
        .expect("utf-8")
        .parse()
        .expect("an integer value")
}

#[test]
fn test_pipelined_writes_become_visible_in_the_order_sent() {
    let server = Server::strata(&["--threads", &THREADS.to_string()]);
    let (first, second) = keys_on_two_shards();
    const ROUNDS: i64 = 3000;
    thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut c = server.conn();
            for i in 0..ROUNDS {
                // One write: SET first i, SET second i. `second` must never be seen ahead of `first`.
                let mut bytes = encode_command(&["SET", &first, &i.to_string()]);
                bytes.extend(encode_command(&["SET", &second, &i.to_string()]));
                c.send_raw(&bytes);
                assert_eq!(c.read_reply(), b"+OK\r\n");
                assert_eq!(c.read_reply(), b"+OK\r\n");
            }
        });
        let reader = s.spawn(|| {
            let mut c = server.conn();
            let mut seen = 0;
            for _ in 0..ROUNDS {
                // Read the later key first: whatever it shows, the earlier key must be at least that.
                let later = int_of(&c.call(&["GET", &second]));
                let earlier = int_of(&c.call(&["GET", &first]));
                assert!(
                    earlier >= later,
                    "saw `{second}` = {later} while `{first}` = {earlier}: a later pipelined write \
                     became visible before an earlier one"
                );
                seen = seen.max(later);
            }
            seen
        });
        writer.join().expect("writer");
        reader.join().expect("reader");
    });
}

#[test]
fn test_connection_commands_wait_for_earlier_pipelined_commands() {
    let server = Server::strata(&["--threads", &THREADS.to_string()]);
    let mut admin = server.conn();
    for round in 0..100 {
        let mut victim = server.conn();
        let id = int_of_reply(&victim.call(&["CLIENT", "ID"]));
        let key = format!("killed-after:{round}");
        // SET then CLIENT KILL in one write: once the victim is gone, the SET must have happened.
        let mut bytes = encode_command(&["SET", &key, "1"]);
        bytes.extend(encode_command(&["CLIENT", "KILL", "ID", &id.to_string()]));
        let mut killer = server.conn();
        killer.send_raw(&bytes);
        assert!(
            victim.is_closed_within(crate::harness::TIMEOUT),
            "victim not killed"
        );
        assert_eq!(
            admin.call(&["EXISTS", &key]),
            b":1\r\n",
            "CLIENT KILL took effect before the SET sent ahead of it (round {round})"
        );
        assert_eq!(killer.read_reply(), b"+OK\r\n");
        assert_eq!(killer.read_reply(), b":1\r\n");
    }
}

fn int_of_reply(reply: &[u8]) -> i64 {
    Reply::decode(reply).as_int().expect("integer reply")
}

#[test]
fn test_a_cross_shard_pipeline_waits_for_a_multi_key_command_holding_its_keys() {
    // MSET over keys on every shard interleaved with pipelines touching the same keys from another
    // clients: every reply arrives and nothing deadlocks.
    let server = Server::strata(&["--threads", &THREADS.to_string()]);
    let keys: Vec<String> = (0..10).map(|i| format!("mix:{i}")).collect();
    thread::scope(|s| {
        for w in 0..3 {
            let keys = &keys;
            let server = &server;
            s.spawn(move || {
                let mut c: Conn = server.conn();
                for i in 0..300 {
                    let v = format!("w{w}-{i}");
                    if w == 0 {
                        let mut args = vec!["MSET".to_string()];
                        for k in keys {
                            args.push(k.clone());
                            args.push(v.clone());
                        }
                        assert_eq!(c.call(&args), b"+OK\r\n");
                    } else {
                        let mut bytes = Vec::new();
                        for k in keys {
                            bytes.extend(encode_command(&["SET", k, &v]));
                        }
                        c.send_raw(&bytes);
                        for _ in keys {
                            assert_eq!(c.read_reply(), b"+OK\r\n");
                        }
                    }
                }
            });
        }
    });
    // Every writer finished, so no lock was left behind: a plain read of every key answers at once.
    let mut c = server.conn();
    for k in &keys {
        assert!(Reply::decode(&c.call(&["GET", k])).as_bytes().is_some());
    }
}

/// Keys on three different shards, in ascending shard order.
fn keys_on_three_shards(prefix: &str) -> [String; 3] {
    let mut by_shard: Vec<Option<String>> = vec![None; THREADS];
    for i in 0..1000 {
        let k = format!("{prefix}:{i}");
        by_shard[shard_of(&k)].get_or_insert(k);
    }
    let found: Vec<String> = by_shard.into_iter().flatten().collect();
    assert!(found.len() >= 3, "keys on three shards");
    [found[0].clone(), found[1].clone(), found[2].clone()]
}

/// An MGET reply's integers (-1 for a missing key).
fn ints_of(reply: &[u8]) -> Vec<i64> {
    Reply::decode(reply)
        .as_array()
        .expect("MGET's array")
        .iter()
        .map(|r| {
            r.as_bytes()
                .map_or(-1, |b| std::str::from_utf8(b).unwrap().parse().unwrap())
        })
        .collect()
}

#[test]
fn test_a_pipeline_that_only_reads_sees_one_moment() {
    // Reads of a pipeline run shard by shard without locks: what an earlier part read must still
    // hold when the last part runs, or the pipeline runs again the locked way.
    let server = Server::strata(&["--threads", &THREADS.to_string()]);
    // `data` on a lower shard than `flag`: the pipeline's second read runs before its first.
    let [data, flag, _] = keys_on_three_shards("seq");
    // A transaction writes `x` and `y` on two shards at once.
    let [y, _, x] = keys_on_three_shards("txn");
    const ROUNDS: i64 = 3000;
    let done = std::sync::atomic::AtomicBool::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            let mut c = server.conn();
            for i in 0..ROUNDS {
                // Data first, then the flag, each answered before the next is sent.
                assert_eq!(c.call(&["SET", &data, &i.to_string()]), b"+OK\r\n");
                assert_eq!(c.call(&["SET", &flag, &i.to_string()]), b"+OK\r\n");
            }
        });
        s.spawn(|| {
            let mut c = server.conn();
            for i in 0..ROUNDS {
                let mut bytes = encode_command(&["MULTI"]);
                bytes.extend(encode_command(&["SET", &x, &i.to_string()]));
                bytes.extend(encode_command(&["SET", &y, &i.to_string()]));
                bytes.extend(encode_command(&["EXEC"]));
                c.send_raw(&bytes);
                for _ in 0..4 {
                    c.read_reply();
                }
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        s.spawn(|| {
            let mut c = server.conn();
            let mut rounds = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) && rounds < 20 * ROUNDS {
                rounds += 1;
                let mut bytes = encode_command(&["GET", &flag]);
                bytes.extend(encode_command(&["GET", &data]));
                bytes.extend(encode_command(&["GET", &x]));
                bytes.extend(encode_command(&["MGET", &y, &x]));
                c.send_raw(&bytes);
                let flag_v = int_of(&c.read_reply());
                let data_v = int_of(&c.read_reply());
                let x_v = int_of(&c.read_reply());
                let pair = ints_of(&c.read_reply());
                assert!(
                    data_v >= flag_v,
                    "read `{flag}` = {flag_v} and then `{data}` = {data_v}, written before it"
                );
                assert!(
                    x_v == pair[0] && x_v == pair[1],
                    "saw a transaction half done: x = {x_v}, then y and x = {pair:?}"
                );
            }
        });
        // A lone multi-key read across shards is one moment too.
        s.spawn(|| {
            let mut c = server.conn();
            let mut rounds = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) && rounds < 20 * ROUNDS {
                rounds += 1;
                let seq = ints_of(&c.call(&["MGET", &flag, &data]));
                assert!(
                    seq[1] >= seq[0],
                    "MGET saw `{flag}` = {} and `{data}` = {}, written before it",
                    seq[0],
                    seq[1]
                );
                let pair = ints_of(&c.call(&["MGET", &y, &x]));
                assert_eq!(pair[0], pair[1], "MGET saw a transaction half done");
            }
        });
    });
}

/// A field of INFO's reply, as an integer.
fn info_field(c: &mut Conn, section: &str, field: &str) -> i64 {
    let info = Reply::decode(&c.call(&["INFO", section]));
    let text = String::from_utf8_lossy(info.as_bytes().expect("INFO's text")).into_owned();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map_or(0, |v| v.trim().parse().expect("an integer field"))
}

#[test]
fn test_a_read_pipeline_run_again_counts_once() {
    // A writer keeps changing a key that a pipeline's first part (and an MGET) reads, so the
    // version check of many of them fails and they run again with locks; some of its writes are
    // MSETs over two shards, whose locks make a shard refuse an MGET's read after another shard
    // has read. The calls, keyspace hits and misses and key-miss events of every read still count
    // once.
    let server = Server::strata(&["--threads", &THREADS.to_string()]);
    let [data, flag, other] = keys_on_three_shards("again");
    let missing = format!("{data}-missing");
    let mut admin = server.conn();
    assert_eq!(
        admin.call(&["CONFIG", "SET", "notify-keyspace-events", "Em"]),
        b"+OK\r\n"
    );
    assert_eq!(admin.call(&["MSET", &data, "0", &flag, "0"]), b"+OK\r\n");
    let mut sub = server.conn();
    sub.call(&["SUBSCRIBE", "__keyevent@0__:keymiss"]);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut pipelines = 0;
    thread::scope(|s| {
        s.spawn(|| {
            let mut c = server.conn();
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && i < 10_000_000 {
                i += 1;
                let mut bytes = Vec::new();
                for _ in 0..15 {
                    bytes.extend(encode_command(&["SET", &data, &i.to_string()]));
                }
                let i = i.to_string();
                bytes.extend(encode_command(&["MSET", &data, &i, &other, &i]));
                c.send_raw(&bytes);
                for _ in 0..16 {
                    c.read_reply();
                }
            }
        });
        let mut c = server.conn();
        // Until some checks failed (bounded: a machine where none does fails the test).
        for round in 0..100 {
            for _ in 0..200 {
                let mut bytes = encode_command(&["GET", &flag]);
                bytes.extend(encode_command(&["GET", &data]));
                bytes.extend(encode_command(&["GET", &missing]));
                c.send_raw(&bytes);
                for _ in 0..3 {
                    c.read_reply();
                }
                // The same reads as one command (its shards read at once, without locks).
                c.call(&["MGET", &flag, &data, &missing]);
                pipelines += 1;
            }
            if info_field(&mut c, "strata", "unlocked_reads_rerun") >= 5 || round == 99 {
                break;
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let reruns = info_field(&mut admin, "strata", "unlocked_reads_rerun");
    assert!(
        reruns > 0,
        "no version check failed in {pipelines} pipelines"
    );
    let info = Reply::decode(&admin.call(&["INFO", "commandstats"]));
    let text = String::from_utf8_lossy(info.as_bytes().expect("INFO's text")).into_owned();
    let calls = |cmd: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
            .and_then(|v| v.split(',').next())
            .map(|v| v.parse::<i64>().expect("calls"))
            .expect("commandstats")
    };
    assert_eq!(
        (calls("get"), calls("mget")),
        (3 * pipelines, pipelines),
        "GET and MGET calls ({reruns} reads ran again)"
    );
    let hits = info_field(&mut admin, "stats", "keyspace_hits");
    let misses = info_field(&mut admin, "stats", "keyspace_misses");
    assert_eq!(
        (hits, misses),
        (4 * pipelines, 2 * pipelines),
        "keyspace hits and misses ({reruns} reads ran again)"
    );
    let (events, _) = sub.read_until_quiet(std::time::Duration::from_millis(500));
    let keymiss = events
        .windows(b"keymiss".len())
        .filter(|w| w == b"keymiss")
        .count() as i64;
    assert_eq!(
        keymiss, misses,
        "key-miss events ({reruns} reads ran again)"
    );
}
