//! The HyperLogLog family against redis-server: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST.
//!
//! HLLs are strings in Redis's byte layout, so besides comparing replies the tests compare the bytes
//! (GET) after every write, move values made by one server into the other (SET of GET's bytes)
//! and keep working on them, feed both servers damaged values, walk the sparse → dense promotion
//! under several `hll-sparse-max-bytes` settings, check the estimator's answers up to 10^5
//! elements, and run the multi-key commands over keys on four shards.

use crate::harness::{encode_command, key_in, Conn, Diff, Pair, Server};

fn get(c: &mut Conn, key: &str) -> Vec<u8> {
    c.call_decoded(&["GET", key])
        .as_bytes()
        .expect("a string value")
        .to_vec()
}

fn set_both(d: &mut Pair, key: &str, value: &[u8]) {
    let args: [&[u8]; 3] = [b"SET", key.as_bytes(), value];
    d.run(&args);
}

/// PFADD of `n` elements `<tag>-<i>` from `from`, in commands of up to 500 elements.
fn add_range(d: &mut Pair, key: &str, tag: &str, from: usize, n: usize) {
    let mut i = from;
    while i < from + n {
        let end = (i + 500).min(from + n);
        let mut args = vec!["PFADD".to_string(), key.to_string()];
        args.extend((i..end).map(|j| format!("{tag}-{j}")));
        d.run(&args);
        i = end;
    }
}

fn header(encoding: u8, card: [u8; 8]) -> Vec<u8> {
    let mut v = b"HYLL".to_vec();
    v.extend_from_slice(&[encoding, 0, 0, 0]);
    v.extend_from_slice(&card);
    v
}

const INVALID_CACHE: [u8; 8] = [0, 0, 0, 0, 0, 0, 0, 0x80];

#[test]
fn commands_and_bytes_match_redis() {
    let mut d = Diff::new();
    for proto in ["2", "3"] {
        if proto == "3" {
            d.run_matching(&["HELLO", "3"], |r| !r.is_error());
        }
        d.run(&["FLUSHALL"]);
        d.run(&["PFADD", "h"]);
        d.run(&["GET", "h"]);
        d.run(&["OBJECT", "ENCODING", "h"]);
        d.run(&["PFADD", "h"]);
        d.run(&["PFADD", "h", "a", "b", "c", "a"]);
        d.run(&["GET", "h"]);
        d.run(&["PFCOUNT", "h"]);
        d.run(&["GET", "h"]);
        d.run(&["PFADD", "h", "a"]);
        d.run(&["PFCOUNT", "h"]);
        d.run(&["PFADD", "g", "c", "d", "e"]);
        d.run(&["PFCOUNT", "h", "g"]);
        d.run(&["PFCOUNT", "h", "g", "nokey"]);
        d.run(&["PFCOUNT", "nokey"]);
        d.run(&["PFCOUNT", "nokey", "nokey2"]);
        d.run(&["GET", "g"]);
        d.run(&["PFMERGE", "m", "h", "g"]);
        d.run(&["GET", "m"]);
        d.run(&["PFMERGE", "m"]);
        d.run(&["PFMERGE", "m2"]);
        d.run(&["GET", "m2"]);
        d.run(&["PFMERGE", "h", "g", "nokey"]);
        d.run(&["GET", "h"]);
        d.run(&["PFDEBUG", "DECODE", "h"]);
        d.run(&["PFDEBUG", "ENCODING", "h"]);
        d.run(&["PFDEBUG", "GETREG", "g"]);
        d.run(&["PFDEBUG", "ENCODING", "g"]);
        d.run(&["GET", "g"]);
        d.run(&["PFDEBUG", "TODENSE", "g"]);
        d.run(&["PFDEBUG", "TODENSE", "h"]);
        d.run(&["PFDEBUG", "TODENSE", "h"]);
        d.run(&["GET", "h"]);
        d.run(&["PFDEBUG", "DECODE", "h"]);
        d.run(&["PFDEBUG", "FOO", "h"]);
        d.run(&["PFDEBUG", "GETREG", "nokey"]);
        d.run(&["PFDEBUG", "GETREG"]);
        d.run(&["PFDEBUG", "GETREG", "h", "x"]);
        d.run(&["PFMERGE", "m", "h"]);
        d.run(&["PFDEBUG", "ENCODING", "m"]);
        d.run(&["GET", "m"]);
        d.run(&["PFCOUNT", "m", "h", "g"]);
        // Wrong types: plain strings, integers, other types.
        d.run(&["SET", "str", "hello"]);
        d.run(&["SET", "int", "123"]);
        d.run(&["SET", "hyll", "HYLL"]);
        d.run(&["RPUSH", "list", "a"]);
        for k in ["str", "int", "hyll", "list"] {
            d.run(&["PFADD", k, "a"]);
            d.run(&["PFCOUNT", k]);
            d.run(&["PFCOUNT", "h", k]);
            d.run(&["PFMERGE", k, "h"]);
            d.run(&["PFMERGE", "m", k]);
            d.run(&["PFDEBUG", "GETREG", k]);
        }
        d.run(&["PFADD"]);
        d.run(&["PFCOUNT"]);
        d.run(&["PFMERGE"]);
        d.run(&["PFSELFTEST", "x"]);
        // A TTL survives PFADD and PFMERGE.
        d.run(&["PFADD", "t", "x"]);
        d.run(&["EXPIRE", "t", "100"]);
        d.run(&["PFADD", "t", "y"]);
        d.run(&["PFMERGE", "t", "h"]);
        d.run(&["TTL", "t"]);
        d.run(&["CONFIG", "GET", "hll-sparse-max-bytes"]);
        d.run(&["CONFIG", "SET", "hll-sparse-max-bytes", "x"]);
        d.run(&["CONFIG", "SET", "hll-sparse-max-bytes", "-1"]);
    }
    d.run(&["PFSELFTEST"]);
    // Inside a transaction too.
    d.run(&["MULTI"]);
    d.run(&["PFSELFTEST"]);
    d.run(&["EXEC"]);
}

/// PFSELFTEST's work (a few hundred milliseconds each) runs off the connection's thread: with one
/// thread, a client's PING is answered while another client's five self-tests are still running.
#[test]
fn pfselftest_does_not_hold_up_other_clients() {
    let server = Server::strata(&["--threads", "1"]);
    let mut busy = server.conn();
    let mut other = server.conn();
    busy.send_raw(&encode_command(&["PFSELFTEST"]).repeat(5));
    // A head start, so the server has read the pipeline before the PING.
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(other.call(&["PING"]), b"+PONG\r\n");
    let (early, _) = busy.read_until_quiet(std::time::Duration::from_millis(0));
    assert!(
        early.is_empty(),
        "the self-tests finished before the other client's PING was answered"
    );
    for _ in 0..5 {
        assert_eq!(busy.read_reply(), b"+OK\r\n");
    }
}

#[test]
fn values_move_between_redis_and_strata() {
    let mut d = Diff::new();
    // Made by Redis, used by Strata.
    for (n, key) in [(3, "small"), (300, "medium"), (5000, "large")] {
        let mut args = vec!["PFADD".to_string(), key.to_string()];
        args.extend((0..n).map(|i| format!("r{i}")));
        d.redis.call(&args);
        if n == 300 {
            d.redis.call(&["PFCOUNT", key]);
        }
        let bytes = get(&mut d.redis, key);
        d.strata.call(&[b"SET".as_slice(), key.as_bytes(), &bytes]);
        d.run(&["GET", key]);
        d.run(&["PFCOUNT", key]);
        d.run(&["PFDEBUG", "ENCODING", key]);
        d.run(&["PFADD", key, "x", "y", "z", "r1"]);
        d.run(&["GET", key]);
        d.run(&["PFCOUNT", key]);
        d.run(&["GET", key]);
    }
    d.run(&["PFMERGE", "all", "small", "medium", "large"]);
    d.run(&["GET", "all"]);
    d.run(&["PFCOUNT", "small", "medium", "large"]);
    // Made by Strata, used by Redis.
    for (n, key) in [(5, "s2"), (700, "m2"), (9000, "l2")] {
        let mut args = vec!["PFADD".to_string(), key.to_string()];
        args.extend((0..n).map(|i| format!("s{i}")));
        d.strata.call(&args);
        let bytes = get(&mut d.strata, key);
        d.redis.call(&[b"SET".as_slice(), key.as_bytes(), &bytes]);
        d.run(&["GET", key]);
        d.run(&["PFCOUNT", key]);
        d.run(&["PFADD", key, "q", "r1"]);
        d.run(&["PFMERGE", key, "all"]);
        d.run(&["GET", key]);
        d.run(&["PFCOUNT", key, "all"]);
    }
}

#[test]
fn damaged_values_get_redis_errors() {
    let mut d = Diff::new();
    let mut cases: Vec<Vec<u8>> = Vec::new();
    let mut v = header(1, INVALID_CACHE);
    cases.push(v.clone()); // sparse with no opcodes
    v.extend_from_slice(&[0x7f, 0xfe]); // XZERO:16383, one register short
    cases.push(v.clone());
    v.push(0x80); // VAL 1,1 completes it
    cases.push(v.clone());
    v.push(0x80); // one register too many
    cases.push(v.clone());
    let mut v = header(1, INVALID_CACHE);
    v.push(0x7f); // an XZERO cut in half
    cases.push(v);
    let mut v = header(1, INVALID_CACHE);
    v.extend_from_slice(&[0x3f; 300]); // 300 ZERO:64 runs: far past the end
    cases.push(v);
    let mut v = header(1, INVALID_CACHE);
    v.extend_from_slice(&[0x7f, 0xff, 0x7f, 0xff]); // two full XZEROs
    cases.push(v);
    let mut v = header(1, [57, 48, 0, 0, 0, 0, 0, 0]); // valid cache, says 12345
    v.extend_from_slice(&[0x7f, 0xff]);
    cases.push(v);
    let mut v = header(0, INVALID_CACHE);
    v.resize(16 + 12288, 0xff); // dense, every register 63
    cases.push(v.clone());
    v.pop(); // dense, one byte short
    cases.push(v);
    let mut v = header(2, INVALID_CACHE); // unknown encoding
    v.extend_from_slice(&[0x7f, 0xff]);
    cases.push(v);
    cases.push(b"HYLL\x01\0\0".to_vec()); // shorter than a header
    let mut v = header(1, INVALID_CACHE);
    v[3] = b'X'; // bad magic
    v.extend_from_slice(&[0x7f, 0xff]);
    cases.push(v);
    let mut v = header(1, INVALID_CACHE);
    v.extend_from_slice(&[0x40, 0x00, 0xfc, 0x7f, 0xfc]); // XZERO:1 VAL:32,1 XZERO:16382 + junk
    cases.push(v);
    d.run(&["PFADD", "ok", "a", "b"]);
    for (i, bytes) in cases.iter().enumerate() {
        let key = format!("bad{i}");
        set_both(&mut d, &key, bytes);
        d.run(&["PFCOUNT", &key]);
        d.run(&["GET", &key]);
        d.run(&["PFCOUNT", "ok", &key]);
        d.run(&["PFMERGE", "dst", "ok", &key]);
        d.run(&["GET", "dst"]);
        d.run(&["PFDEBUG", "DECODE", &key]);
        d.run(&["PFDEBUG", "ENCODING", &key]);
        d.run(&["PFADD", &key, "a", "b", "c", "d"]);
        d.run(&["GET", &key]);
        d.run(&["PFDEBUG", "TODENSE", &key]);
        d.run(&["GET", &key]);
        set_both(&mut d, &key, bytes);
        d.run(&["PFMERGE", &key, "ok"]);
        d.run(&["GET", &key]);
        set_both(&mut d, &key, bytes);
        d.run(&["PFDEBUG", "GETREG", &key]);
        d.run(&["GET", &key]);
    }
}

#[test]
fn sparse_promotion_and_estimates_match_redis() {
    let mut d = Diff::new();
    for limit in ["3000", "200", "0", "12000"] {
        d.run(&["CONFIG", "SET", "hll-sparse-max-bytes", limit]);
        let key = format!("p{limit}");
        for step in 0..40 {
            add_range(&mut d, &key, &key, step * 60, 60);
            d.run(&["PFDEBUG", "ENCODING", &key]);
            d.run(&["GET", &key]);
            d.run(&["PFCOUNT", &key]);
        }
    }
    d.run(&["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]);
    // The estimator over the whole range, with one and several keys.
    let mut from = 0;
    for target in [10, 100, 1000, 5000, 20000, 60000, 100000] {
        add_range(&mut d, "big", "e", from, target - from);
        add_range(&mut d, "other", "o", from / 2, (target - from) / 2);
        from = target;
        d.run(&["PFCOUNT", "big"]);
        d.run(&["PFCOUNT", "big", "other"]);
        d.run(&["PFCOUNT", "other", "p3000", "p200"]);
    }
    d.run(&["GET", "big"]);
    d.run(&["PFMERGE", "p200", "big", "other"]);
    d.run(&["GET", "p200"]);
    d.run(&["PFCOUNT", "p200"]);
}

#[test]
fn multi_key_commands_across_shards_match_redis() {
    let mut d = Diff::with_threads(4);
    let keys: Vec<String> = (0..4).map(|q| key_in(q, "hll")).collect();
    for (i, k) in keys.iter().enumerate() {
        add_range(&mut d, k, "x", i * 700, 1000 + i * 2000);
    }
    let mut all = vec!["PFCOUNT".to_string()];
    all.extend(keys.iter().cloned());
    d.run(&all);
    for dest in &keys {
        let mut args = vec!["PFMERGE".to_string(), dest.clone()];
        args.extend(keys.iter().rev().cloned());
        d.run(&args);
        d.run(&["GET", dest]);
    }
    // PFMERGE with a destination only: the command must still run on the destination's shard.
    for q in 0..4 {
        let alone = key_in(q, "alone");
        d.run(&["PFMERGE", &alone]);
        d.run(&["EXISTS", &alone]);
        d.run(&["GET", &alone]);
    }
    let fresh = key_in(2, "fresh");
    d.run(&["PFMERGE", &fresh, &keys[0], &keys[3]]);
    d.run(&["GET", &fresh]);
    // The first bad key in argument order decides the error, whatever shard it is on.
    let list = key_in(1, "list");
    let plain = key_in(3, "plain");
    let damaged = key_in(0, "damaged");
    d.run(&["RPUSH", &list, "a"]);
    d.run(&["SET", &plain, "not an hll"]);
    let mut bad = header(1, INVALID_CACHE);
    bad.extend_from_slice(&[0x7f, 0xfe]);
    set_both(&mut d, &damaged, &bad);
    for order in [
        [&keys[0], &plain, &list, &damaged],
        [&keys[1], &list, &plain, &damaged],
        [&keys[2], &damaged, &list, &plain],
        [&damaged, &keys[3], &plain, &list],
    ] {
        let mut args = vec!["PFCOUNT"];
        args.extend(order.iter().map(|k| k.as_str()));
        d.run(&args);
        let mut args = vec!["PFMERGE", keys[0].as_str()];
        args.extend(order.iter().map(|k| k.as_str()));
        d.run(&args);
    }
    d.run(&["GET", &keys[0]]);
}

#[test]
fn random_sequences_match_redis_on_four_shards() {
    let mut d = Diff::with_threads(4);
    let keys: Vec<String> = (0..4)
        .flat_map(|q| [key_in(q, "ra"), key_in(q, "rb")])
        .collect();
    let mut seed: u64 = 0x4C4C_5EED;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    d.run(&["CONFIG", "SET", "hll-sparse-max-bytes", "600"]);
    for step in 0..600 {
        let key = keys[next(keys.len() as u64) as usize].clone();
        match next(10) {
            0..=5 => {
                let mut args = vec!["PFADD".to_string(), key.clone()];
                let n = 1 + next(40);
                args.extend((0..n).map(|_| format!("el{}", next(20000))));
                d.run(&args);
            }
            6 => {
                d.run(&["PFCOUNT", &key]);
            }
            7 => {
                let mut args = vec!["PFCOUNT".to_string()];
                args.extend(
                    (0..1 + next(5)).map(|_| keys[next(keys.len() as u64) as usize].clone()),
                );
                d.run(&args);
            }
            8 => {
                let mut args = vec!["PFMERGE".to_string(), key.clone()];
                args.extend((0..next(4)).map(|_| keys[next(keys.len() as u64) as usize].clone()));
                d.run(&args);
            }
            _ => {
                d.run(&["PFDEBUG", "ENCODING", &key]);
            }
        }
        if step % 20 == 0 {
            for k in &keys {
                d.run(&["GET", k]);
            }
        }
    }
    for k in &keys {
        d.run(&["GET", k]);
        d.run(&["PFCOUNT", k]);
    }
}
