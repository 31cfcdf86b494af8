//! Multi-key commands are atomic across shards: a reader never sees a write half applied.
//!
//! The keys below hash to eight different slots (no hashtags), so with several threads they live on
//! different shards. Writers replace all of them in one command; readers read all of them in one command
//! and must see a single write. Loops are bounded by iteration count, not time. These tests go through the
//! `redis` crate, so a real client library drives the server too.

use std::thread;

use crate::harness::{hash_slot, Server};

const KEYS: [&str; 8] = [
    "atom:1", "atom:2", "atom:3", "atom:4", "atom:5", "atom:6", "atom:7", "atom:8",
];
const WRITERS: usize = 2;
const READERS: usize = 2;
const ITERATIONS: usize = 2000;

#[test]
fn test_keys_are_on_distinct_slots() {
    // The CRC16/XMODEM check value is 0x31C3, below 16384, so it is also the slot.
    assert_eq!(hash_slot("123456789"), 0x31C3);
    let mut slots: Vec<u16> = KEYS.iter().map(|k| hash_slot(k)).collect();
    slots.sort_unstable();
    slots.dedup();
    assert_eq!(slots.len(), KEYS.len(), "two test keys share a hash slot");
}

fn connect(server: &Server) -> redis::Connection {
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/", server.port())).expect("client URL");
    let conn = client
        .get_connection()
        .expect("connect with the redis crate");
    conn.set_read_timeout(Some(crate::harness::TIMEOUT))
        .expect("set read timeout");
    conn
}

/// Runs `writer(connection, writer_index, iteration)` on `writers` threads and `reader(connection)` on
/// READERS threads, ITERATIONS times each, all concurrently; panics in any thread fail the test.
fn race(
    server: &Server,
    writers: usize,
    writer: impl Fn(&mut redis::Connection, usize, usize) + Sync,
    reader: impl Fn(&mut redis::Connection) + Sync,
) {
    thread::scope(|s| {
        let mut handles = Vec::new();
        for w in 0..writers {
            let mut conn = connect(server);
            let writer = &writer;
            handles.push(s.spawn(move || (0..ITERATIONS).for_each(|i| writer(&mut conn, w, i))));
        }
        for _ in 0..READERS {
            let mut conn = connect(server);
            let reader = &reader;
            handles.push(s.spawn(move || (0..ITERATIONS).for_each(|_| reader(&mut conn))));
        }
        for handle in handles {
            if let Err(panic) = handle.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

fn mset_mget_never_mixed(threads: &str) {
    let server = Server::strata(&["--threads", threads]);
    race(
        &server,
        WRITERS,
        |conn, w, i| {
            let value = format!("w{w}-i{i}");
            let mut cmd = redis::cmd("MSET");
            for key in KEYS {
                cmd.arg(key).arg(&value);
            }
            cmd.query::<()>(conn).expect("MSET");
        },
        |conn| {
            let values: Vec<Option<String>> =
                redis::cmd("MGET").arg(&KEYS[..]).query(conn).expect("MGET");
            assert_eq!(values.len(), KEYS.len(), "MGET returned {values:?}");
            assert!(
                values.iter().all(|v| *v == values[0]),
                "MGET saw a half-applied MSET: {values:?}"
            );
        },
    );
}

#[test]
fn mset_mget_never_mixed_threads_2() {
    mset_mget_never_mixed("2");
}

#[test]
fn mset_mget_never_mixed_threads_5() {
    mset_mget_never_mixed("5");
}

fn del_mset_all_or_nothing(threads: &str) {
    let server = Server::strata(&["--threads", threads]);
    race(
        &server,
        WRITERS,
        |conn, w, i| {
            if (w + i) % 2 == 0 {
                redis::cmd("DEL")
                    .arg(&KEYS[..])
                    .query::<i64>(conn)
                    .expect("DEL");
            } else {
                let mut cmd = redis::cmd("MSET");
                for key in KEYS {
                    cmd.arg(key).arg(i);
                }
                cmd.query::<()>(conn).expect("MSET");
            }
        },
        |conn| {
            let count: i64 = redis::cmd("EXISTS")
                .arg(&KEYS[..])
                .query(conn)
                .expect("EXISTS");
            assert!(
                count == 0 || count == KEYS.len() as i64,
                "EXISTS saw {count} of {} keys",
                KEYS.len()
            );
        },
    );
}

#[test]
fn del_mset_exists_all_or_nothing_threads_2() {
    del_mset_all_or_nothing("2");
}

#[test]
fn del_mset_exists_all_or_nothing_threads_5() {
    del_mset_all_or_nothing("5");
}

#[test]
fn mset_values_survive_cross_shard_round_trip() {
    let server = Server::strata(&["--threads", "5"]);
    let mut conn = connect(&server);
    let mut cmd = redis::cmd("MSET");
    for (i, key) in KEYS.iter().enumerate() {
        cmd.arg(key).arg(format!("value-{i}"));
    }
    cmd.query::<()>(&mut conn).expect("MSET");
    let values: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&KEYS[..])
        .arg("atom:missing")
        .query(&mut conn)
        .expect("MGET");
    let mut expected: Vec<Option<String>> = (0..KEYS.len())
        .map(|i| Some(format!("value-{i}")))
        .collect();
    expected.push(None);
    assert_eq!(values, expected);
    let deleted: i64 = redis::cmd("DEL")
        .arg(&KEYS[..])
        .query(&mut conn)
        .expect("DEL");
    assert_eq!(deleted, KEYS.len() as i64);
}

fn rename_chain_keeps_exactly_one_key(threads: &str) {
    let server = Server::strata(&["--threads", threads]);
    let mut setup = connect(&server);
    redis::cmd("SET")
        .arg(KEYS[0])
        .arg("token")
        .query::<()>(&mut setup)
        .expect("SET");
    // One writer moves the only key around the ring; RENAME across shards must never show zero or two keys.
    race(
        &server,
        1,
        |conn, _, i| {
            let from = KEYS[i % KEYS.len()];
            let to = KEYS[(i + 1) % KEYS.len()];
            redis::cmd("RENAME")
                .arg(from)
                .arg(to)
                .query::<()>(conn)
                .expect("RENAME");
        },
        |conn| {
            let count: i64 = redis::cmd("EXISTS")
                .arg(&KEYS[..])
                .query(conn)
                .expect("EXISTS");
            assert_eq!(
                count, 1,
                "EXISTS saw {count} keys while one key was being renamed around"
            );
        },
    );
    let last = KEYS[ITERATIONS % KEYS.len()];
    let value: Option<String> = redis::cmd("GET").arg(last).query(&mut setup).expect("GET");
    assert_eq!(value.as_deref(), Some("token"));
}

#[test]
fn rename_chain_keeps_exactly_one_key_threads_2() {
    rename_chain_keeps_exactly_one_key("2");
}

#[test]
fn rename_chain_keeps_exactly_one_key_threads_5() {
    rename_chain_keeps_exactly_one_key("5");
}

/// The same race with the commands pipelined, three to a write: pipelined MSET, MGET, DEL and
/// EXISTS are split into one command per shard that join the pipeline's sub-batches (instead of
/// running the coordinator one command at a time), and must stay just as atomic. Readers check
/// that each MGET saw one writer's MSET whole (or nothing, after a DEL), and that EXISTS agrees.
fn pipelined_multi_key_commands_stay_atomic(threads: &str) {
    let server = Server::strata(&["--threads", threads]);
    race(
        &server,
        WRITERS,
        |conn, w, i| {
            let value = format!("w{w}-i{i}");
            let mut pipe = redis::pipe();
            let mset = pipe.cmd("MSET");
            for key in KEYS {
                mset.arg(key).arg(&value);
            }
            if i % 5 == 4 {
                pipe.cmd("DEL").arg(&KEYS[..]);
            }
            pipe.cmd("EXISTS").arg(&KEYS[..]);
            pipe.query::<()>(conn).expect("pipelined writes");
        },
        |conn| {
            let (values, exists, again): (Vec<Option<String>>, i64, Vec<Option<String>>) =
                redis::pipe()
                    .cmd("MGET")
                    .arg(&KEYS[..])
                    .cmd("EXISTS")
                    .arg(&KEYS[..])
                    .cmd("MGET")
                    .arg(&KEYS[..])
                    .query(conn)
                    .expect("pipelined reads");
            for v in [&values, &again] {
                assert_eq!(v.len(), KEYS.len(), "MGET returned {v:?}");
                assert!(
                    v.iter().all(|x| *x == v[0]),
                    "a pipelined MGET saw a half-applied write: {v:?}"
                );
            }
            assert!(
                exists == 0 || exists == KEYS.len() as i64,
                "EXISTS counted {exists} of a write applied whole or not at all"
            );
        },
    );
}

#[test]
fn pipelined_multi_key_commands_stay_atomic_threads_2() {
    pipelined_multi_key_commands_stay_atomic("2");
}

#[test]
fn pipelined_multi_key_commands_stay_atomic_threads_5() {
    pipelined_multi_key_commands_stay_atomic("5");
}

/// Huge commands lock whole databases instead of each key (over 4096 keys on a shard) and run in
/// slices of 1024 keys: a reader of a few of their keys, on every shard, still never sees one half
/// applied, and a huge read never sees a huge write half applied. At 2 threads each shard's part
/// (10,000 keys) takes database locks; at 5 (4,000 each) it takes key locks: both paths.
fn huge_mset_never_mixed(threads: &str) {
    const N: usize = 20_000;
    const ROUNDS: usize = 12;
    let server = Server::strata(&["--threads", threads]);
    let keys: Vec<String> = (0..N).map(|i| format!("huge:{i}")).collect();
    // A few keys spread over the whole command (so over every shard and many slices).
    let probe: Vec<&str> = keys.iter().step_by(N / 16).map(String::as_str).collect();
    thread::scope(|s| {
        let mut writer = connect(&server);
        let keys = &keys;
        let w = s.spawn(move || {
            for round in 0..ROUNDS {
                let mut cmd = redis::cmd("MSET");
                for key in keys {
                    cmd.arg(key).arg(round);
                }
                cmd.query::<()>(&mut writer).expect("huge MSET");
            }
        });
        let mut small = connect(&server);
        let probe = &probe;
        let r = s.spawn(move || {
            for _ in 0..400 {
                let values: Vec<Option<String>> = redis::cmd("MGET")
                    .arg(&probe[..])
                    .query(&mut small)
                    .expect("MGET");
                assert!(
                    values.iter().all(|v| *v == values[0]),
                    "MGET saw a half-applied huge MSET: {values:?}"
                );
            }
        });
        let mut big = connect(&server);
        for _ in 0..6 {
            let values: Vec<Option<String>> = redis::cmd("MGET")
                .arg(&keys[..])
                .query(&mut big)
                .expect("huge MGET");
            assert_eq!(values.len(), N);
            assert!(
                values.iter().all(|v| *v == values[0]),
                "a huge MGET saw a half-applied huge MSET"
            );
        }
        for h in [w, r] {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

#[test]
fn huge_mset_never_mixed_threads_2() {
    huge_mset_never_mixed("2");
}

#[test]
fn huge_mset_never_mixed_threads_5() {
    huge_mset_never_mixed("5");
}
