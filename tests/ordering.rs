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
