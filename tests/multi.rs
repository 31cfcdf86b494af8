//! Transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH, reply for reply against redis-server
//! (queueing errors and EXECABORT, runtime errors inside EXEC, WATCH touched by another client on
//! another thread, by expiry, FLUSHALL and SWAPDB, blocking commands inside MULTI), plus
//! concurrency tests on Strata with more threads than cores: a cross-shard transaction is never
//! seen half done, and a WATCH-based counter loses no increment.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::sleep;
use std::time::Duration;

use crate::harness::{key_in, Diff, Reply, Server};

#[test]
fn queueing_exec_discard_and_errors_match_redis() {
    let mut d = Diff::with_threads(4);
    let (a, b, c) = (key_in(0, "a"), key_in(2, "b"), key_in(3, "c"));
    for proto in ["2", "3"] {
        if proto == "3" {
            d.run_matching(&["HELLO", "3"], |r| !r.is_error());
        }
        d.run(&["FLUSHALL"]);
        // A transaction over three shards, with a runtime error in the middle (not an abort).
        d.run(&["MULTI"]);
        d.run(&["SET", &a, "1"]);
        d.run(&["INCR", &a]);
        d.run(&["LPUSH", &b, "x", "y"]);
        d.run(&["INCR", &b]);
        d.run(&["MSET", &a, "10", &c, "20"]);
        d.run(&["MGET", &a, &b, &c]);
        d.run(&["ZADD", &c, "1", "m"]);
        d.run(&["EXEC"]);
        d.run(&["MGET", &a, &c]);
        // Errors while queueing abort the whole transaction.
        d.run(&["MULTI"]);
        d.run(&["SET", &a, "changed"]);
        d.run(&["SET", &a]);
        d.run(&["NOSUCHCOMMAND", "x"]);
        d.run(&["CLIENT", "NOSUCH"]);
        d.run(&["EXEC"]);
        d.run(&["GET", &a]);
        // Nested MULTI and WATCH inside MULTI are errors that do not abort.
        d.run(&["MULTI"]);
        d.run(&["MULTI"]);
        d.run(&["WATCH", &a]);
        d.run(&["SET", &a, "2"]);
        d.run(&["EXEC"]);
        d.run(&["MULTI"]);
        d.run(&["EXEC"]);
        d.run(&["EXEC"]);
        d.run(&["DISCARD"]);
        d.run(&["MULTI"]);
        d.run(&["SET", &a, "discarded"]);
        d.run(&["DISCARD"]);
        d.run(&["GET", &a]);
        // SELECT inside the transaction applies to the commands after it.
        d.run(&["MULTI"]);
        d.run(&["SELECT", "3"]);
        d.run(&["SET", &a, "in3"]);
        d.run(&["SELECT", "0"]);
        d.run(&["GET", &a]);
        d.run(&["EXEC"]);
        d.run(&["SELECT", "3"]);
        d.run(&["GET", &a]);
        d.run(&["SELECT", "0"]);
        // Database-wide commands inside a transaction.
        d.run(&["MULTI"]);
        d.run(&["SET", &b, "v"]);
        d.run(&["DBSIZE"]);
        d.run(&["FLUSHDB"]);
        d.run(&["DBSIZE"]);
        d.run(&["SET", &c, "after"]);
        d.run(&["SWAPDB", "0", "3"]);
        d.run(&["GET", &a]);
        d.run(&["SWAPDB", "0", "3"]);
        d.run(&["EXEC"]);
        d.run(&["MGET", &a, &b, &c]);
        // Blocking commands inside MULTI answer at once, as if they timed out.
        d.run(&["MULTI"]);
        d.run(&["BLPOP", "empty", "0"]);
        d.run(&["BRPOPLPUSH", "empty", &b, "0"]);
        d.run(&["BLMOVE", "empty", &b, "LEFT", "LEFT", "0"]);
        d.run(&["BZPOPMIN", "emptyz", "0"]);
        d.run(&["BLMPOP", "0", "1", "empty", "LEFT"]);
        d.run(&["RPUSH", "full", "e"]);
        d.run(&["BLPOP", "full", "0"]);
        d.run(&["EXEC"]);
        // EXEC itself rejected (wrong arity) answers EXECABORT and ends the transaction, in
        // MULTI or not: the next commands run.
        d.run(&["MULTI"]);
        d.run(&["SET", &a, "queued"]);
        d.run(&["EXEC", "extra"]);
        d.run(&["SET", &a, "ran"]);
        d.run(&["GET", &a]);
        d.run(&["EXEC", "extra"]);
        // RESET leaves MULTI.
        d.run(&["MULTI"]);
        d.run(&["SET", &a, "x"]);
        d.run_matching(&["RESET"], |r| !r.is_error());
        d.run(&["EXEC"]);
        d.run(&["GET", &a]);
        if proto == "3" {
            d.run_matching(&["HELLO", "3"], |r| !r.is_error());
        }
    }
}

#[test]
fn watch_aborts_exec_exactly_when_redis_does() {
    let mut d = Diff::with_threads(4);
    let mut other = d.new_conns();
    let (a, b) = (key_in(1, "w"), key_in(3, "w"));
    d.run(&["SET", &a, "1"]);
    // Not modified: EXEC runs.
    d.run(&["WATCH", &a, &b]);
    d.run(&["MULTI"]);
    d.run(&["INCR", &a]);
    d.run(&["EXEC"]);
    // Modified by another client (whose connection may live on another thread): EXEC aborts.
    d.run(&["WATCH", &a, &b]);
    other.run(&["SET", &b, "x"]);
    d.run(&["MULTI"]);
    d.run(&["INCR", &a]);
    d.run(&["EXEC"]);
    d.run(&["GET", &a]);
    // After EXEC nothing is watched any more.
    other.run(&["SET", &b, "y"]);
    d.run(&["MULTI"]);
    d.run(&["INCR", &a]);
    d.run(&["EXEC"]);
    // Modified by the client itself before MULTI.
    d.run(&["WATCH", &a]);
    d.run(&["SET", &a, "5"]);
    d.run(&["MULTI"]);
    d.run(&["GET", &a]);
    d.run(&["EXEC"]);
    // UNWATCH and DISCARD forget the watch.
    d.run(&["WATCH", &a]);
    d.run(&["UNWATCH"]);
    other.run(&["SET", &a, "6"]);
    d.run(&["MULTI"]);
    d.run(&["GET", &a]);
    d.run(&["EXEC"]);
    d.run(&["WATCH", &a]);
    other.run(&["SET", &a, "7"]);
    d.run(&["MULTI"]);
    d.run(&["DISCARD"]);
    d.run(&["MULTI"]);
    d.run(&["GET", &a]);
    d.run(&["EXEC"]);
    // EXPIRE touches; a key that does not exist and stays absent does not.
    d.run(&["WATCH", &a, "never"]);
    other.run(&["EXPIRE", &a, "100"]);
    d.run(&["MULTI"]);
    d.run(&["PING"]);
    d.run(&["EXEC"]);
    d.run(&["WATCH", "never"]);
    other.run(&["DEL", "never"]);
    d.run(&["MULTI"]);
    d.run(&["PING"]);
    d.run(&["EXEC"]);
    // The database a key was watched in is remembered.
    d.run(&["WATCH", &a]);
    other.run(&["SELECT", "1"]);
    other.run(&["SET", &a, "other-db"]);
    d.run(&["MULTI"]);
    d.run(&["PING"]);
    d.run(&["EXEC"]);
    other.run(&["SELECT", "0"]);
    // FLUSHALL touches watched keys that exist, not those that do not.
    d.run(&["WATCH", &a]);
    other.run(&["FLUSHALL"]);
    d.run(&["MULTI"]);
    d.run(&["PING"]);
    d.run(&["EXEC"]);
    d.run(&["WATCH", "absent"]);
    other.run(&["FLUSHALL"]);
    d.run(&["MULTI"]);
    d.run(&["PING"]);
    d.run(&["EXEC"]);
    // SWAPDB touches a watched key that exists on either side.
    other.run(&["SELECT", "1"]);
    other.run(&["SET", &b, "in1"]);
    other.run(&["SELECT", "0"]);
    d.run(&["WATCH", &b]);
    other.run(&["SWAPDB", "0", "1"]);
    d.run(&["MULTI"]);
    d.run(&["PING"]);
    d.run(&["EXEC"]);
    // A watched key that expires (without anyone touching it) aborts EXEC.
    d.run(&["SET", &a, "v", "PX", "20"]);
    d.run(&["WATCH", &a]);
    sleep(Duration::from_millis(60));
    d.run(&["MULTI"]);
    d.run(&["PING"]);
    d.run(&["EXEC"]);
    d.run(&["WATCH"]);
}

/// A write command that changes nothing (the pivot, element or index not found, the same score
/// again, an increment of 0, a refused NX/XX/GT/LT) does not touch the key, as in Redis: a WATCH
/// on it stays intact, and a key that does change still breaks it.
#[test]
fn writes_that_change_nothing_leave_a_watch_intact() {
    let mut d = Diff::with_threads(3);
    let mut other = d.new_conns();
    other.run(&["RPUSH", "l", "a", "b"]);
    other.run(&["ZADD", "z", "1", "m"]);
    other.run(&["SADD", "s", "m"]);
    other.run(&["HSET", "h", "f", "v"]);
    let no_ops: &[&[&str]] = &[
        &["LINSERT", "l", "AFTER", "nothere", "x"],
        &["LREM", "l", "0", "nothere"],
        &["LSET", "l", "5", "x"],
        &["ZADD", "z", "1", "m"],
        &["ZINCRBY", "z", "0", "m"],
        &["ZADD", "z", "XX", "2", "other"],
        &["ZADD", "z", "GT", "0", "m"],
        &["ZADD", "z", "NX", "5", "m"],
        &["ZREM", "z", "other"],
        &["ZREMRANGEBYSCORE", "z", "5", "6"],
        &["SADD", "s", "m"],
        &["SREM", "s", "other"],
        &["HDEL", "h", "other"],
        &["HSETNX", "h", "f", "w"],
        &["SETRANGE", "l2", "0", ""],
    ];
    for cmd in no_ops {
        d.run(&["WATCH", "l", "z", "s", "h"]);
        other.run(cmd);
        d.run(&["MULTI"]);
        d.run(&["PING"]);
        d.run(&["EXEC"]);
    }
    // (LTRIM that keeps everything still touches the key in Redis.)
    for cmd in [
        &["LINSERT", "l", "AFTER", "a", "x"][..],
        &["ZINCRBY", "z", "1", "m"],
        &["LSET", "l", "0", "y"],
        &["LTRIM", "l", "0", "-1"],
    ] {
        d.run(&["WATCH", "l", "z"]);
        other.run(cmd);
        d.run(&["MULTI"]);
        d.run(&["PING"]);
        d.run(&["EXEC"]);
    }
}

/// Reads a whole decoded reply as integers (nil → -1).
fn ints(r: &Reply) -> Vec<i64> {
    r.as_array()
        .expect("an array")
        .iter()
        .map(|x| {
            if x.is_nil() {
                -1
            } else {
                x.as_int()
                    .or_else(|| {
                        x.as_bytes()
                            .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
                    })
                    .expect("a number")
            }
        })
        .collect()
}

#[test]
fn a_cross_shard_transaction_is_never_seen_half_done() {
    let s = Server::strata(&["--threads", "5"]);
    let keys: Vec<String> = (0..4).map(|q| key_in(q, "t")).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (port, keys, stop) = (s.port(), keys.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut c = crate::harness::Conn::connect(port, "writer");
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) && n < 2000 {
                c.call(&["MULTI"]);
                for k in &keys {
                    c.call(&["INCR", k]);
                }
                let r = c.call_decoded(&["EXEC"]);
                assert_eq!(r.as_array().map(<[Reply]>::len), Some(keys.len()));
                n += 1;
            }
        })
    };
    let mut reader = s.conn();
    let mut multi_reader = s.conn();
    for _ in 0..500 {
        let mut mget = vec!["MGET"];
        mget.extend(keys.iter().map(String::as_str));
        let seen = ints(&reader.call_decoded(&mget));
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "torn MGET: {seen:?}");
        multi_reader.call(&["MULTI"]);
        for k in &keys {
            multi_reader.call(&["GET", k]);
        }
        let r = multi_reader.call_decoded(&["EXEC"]);
        let seen = ints(&r);
        assert!(
            seen.windows(2).all(|w| w[0] == w[1]),
            "torn EXEC read: {seen:?}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
}

#[test]
fn a_watch_based_counter_loses_no_increment() {
    let s = Server::strata(&["--threads", "5"]);
    let counter = key_in(2, "counter");
    let clients = 4;
    let per_client = 60;
    let workers: Vec<_> = (0..clients)
        .map(|i| {
            let (port, counter) = (s.port(), counter.clone());
            std::thread::spawn(move || {
                let mut c = crate::harness::Conn::connect(port, &format!("w{i}"));
                let mut done = 0;
                let mut attempts = 0;
                while done < per_client {
                    attempts += 1;
                    assert!(attempts < 100_000, "no progress");
                    c.call(&["WATCH", &counter]);
                    let v = c
                        .call_decoded(&["GET", &counter])
                        .as_bytes()
                        .map(|b| String::from_utf8_lossy(b).parse::<i64>().expect("a number"))
                        .unwrap_or(0);
                    c.call(&["MULTI"]);
                    c.call(&["SET", &counter, &(v + 1).to_string()]);
                    if !c.call_decoded(&["EXEC"]).is_nil() {
                        done += 1;
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let total = s
        .conn()
        .call_decoded(&["GET", &counter])
        .as_bytes()
        .map(|b| String::from_utf8_lossy(b).parse::<i64>().expect("a number"));
    assert_eq!(total, Some(clients * per_client));
}

/// INFO commandstats counts EXEC itself besides the commands it ran (an aborted or misplaced EXEC
/// as failed), as Redis does.
#[test]
fn exec_is_counted_in_commandstats() {
    let mut d = Diff::with_threads(4);
    d.run(&["CONFIG", "RESETSTAT"]);
    for cmd in [
        &["MULTI"][..],
        &["SET", "foo{t}", "bar"],
        &["GEOADD", "g{t}", "0", "0", "m"],
        &["EXPIRE", "g{t}", "0"],
        &["EXEC"],
        &["MULTI"],
        &["SET", "a"],
        &["EXEC"],
        &["EXEC"],
        &["MULTI"],
        &["INCR", "foo{t}"],
        &["EXEC"],
    ] {
        d.run(cmd);
    }
    let stats = |c: &mut crate::harness::Conn| -> Vec<String> {
        let info = String::from_utf8_lossy(&c.call(&["INFO", "commandstats"])).into_owned();
        let mut lines: Vec<String> = info
            .lines()
            .filter(|l| l.starts_with("cmdstat_") && !l.contains("config|"))
            .map(|l| {
                // Drop the timings: keep the name and the three counters.
                let (name, rest) = l.split_once(':').unwrap();
                let counters: Vec<&str> = rest.split(',').filter(|f| f.contains("calls")).collect();
                format!("{name}:{}", counters.join(","))
            })
            .collect();
        lines.sort();
        lines
    };
    assert_eq!(stats(&mut d.strata), stats(&mut d.redis));
}
