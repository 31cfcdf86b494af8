//! The hash family, reply for reply against redis-server: HSET, HSETNX, HMSET, HGET, HMGET, HGETALL,
//! HDEL, HEXISTS, HLEN, HSTRLEN, HKEYS, HVALS, HINCRBY, HINCRBYFLOAT, HRANDFIELD and HSCAN, their
//! errors, RESP3 shapes, the listpack → hashtable conversions (also after CONFIG SET), and seeded
//! random operation sequences.
//!
//! A listpack hash keeps insertion order in both servers, so its replies compare byte for byte; a
//! hashtable's order is implementation-specific, so those replies compare as multisets, and HSCAN
//! compares the set of elements returned by a complete scan.

use std::collections::{BTreeSet, HashMap};

use crate::harness::{Conn, Diff, Pair, Reply};

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn encoding(c: &mut Conn, key: &str) -> Vec<u8> {
    c.call(&["OBJECT", "ENCODING", key])
}

/// Runs a command whose reply order is the hash's: exactly while redis's copy is a listpack,
/// as a multiset otherwise.
fn run_in_hash_order(d: &mut Pair, key: &str, args: &[&str]) {
    if encoding(&mut d.redis, key) == b"$8\r\nlistpack\r\n" {
        d.run(args);
    } else {
        d.run_unordered(args);
    }
}

#[test]
fn hset_hmset_hsetnx_and_reads() {
    let mut d = Diff::new();
    d.run_all(&[
        &["HSET", "h", "a", "1"][..],
        &["HSET", "h", "b", "2", "c", "3", "a", "10"],
        &["HSET", "h", "a", "11", "a", "12"],
        &["HGET", "h", "a"],
        &["HGET", "h", "nosuch"],
        &["HGET", "nokey", "a"],
        &["HMSET", "h", "d", "4", "e", ""],
        &["HSETNX", "h", "a", "x"],
        &["HSETNX", "h", "f", "6"],
        &["HSETNX", "new", "f", "6"],
        &["HGETALL", "h"],
        &["HGETALL", "new"],
        &["HGETALL", "nokey"],
        &["HKEYS", "h"],
        &["HVALS", "h"],
        &["HKEYS", "nokey"],
        &["HVALS", "nokey"],
        &["HLEN", "h"],
        &["HLEN", "nokey"],
        &["HSTRLEN", "h", "a"],
        &["HSTRLEN", "h", "e"],
        &["HSTRLEN", "h", "nosuch"],
        &["HSTRLEN", "nokey", "a"],
        &["HEXISTS", "h", "a"],
        &["HEXISTS", "h", "nosuch"],
        &["HEXISTS", "nokey", "a"],
        &["HMGET", "h", "a", "nosuch", "e", "a"],
        &["HMGET", "nokey", "a", "b"],
        &["TYPE", "h"],
        &["OBJECT", "ENCODING", "h"],
    ]);
    d.run(&[&b"HSET"[..], b"bin", b"f\x00\r\n", b"v\x00\xff"]);
    d.run(&[&b"HGET"[..], b"bin", b"f\x00\r\n"]);
    d.run(&["HGETALL", "bin"]);
}

#[test]
fn arity_and_wrong_type_errors() {
    let mut d = Diff::new();
    d.run_all(&[
        &["HSET", "h"][..],
        &["HSET", "h", "a"],
        &["HSET", "h", "a", "1", "b"],
        &["HMSET", "h", "a"],
        &["HMSET", "h", "a", "1", "b"],
        &["HSETNX", "h", "a"],
        &["HGET", "h"],
        &["HMGET", "h"],
        &["HDEL", "h"],
        &["HINCRBY", "h", "a"],
        &["HRANDFIELD"],
        &["HSCAN", "h"],
        &["EXISTS", "h"],
        &["SET", "s", "x"],
        &["HSET", "s", "a", "1"],
        &["HSET", "s", "a", "1", "b"],
        &["HMSET", "s", "a", "1"],
        &["HSETNX", "s", "a", "1"],
        &["HGET", "s", "a"],
        &["HMGET", "s", "a"],
        &["HGETALL", "s"],
        &["HDEL", "s", "a"],
        &["HEXISTS", "s", "a"],
        &["HLEN", "s"],
        &["HSTRLEN", "s", "a"],
        &["HKEYS", "s"],
        &["HVALS", "s"],
        &["HINCRBY", "s", "a", "1"],
        &["HINCRBY", "s", "a", "x"],
        &["HINCRBYFLOAT", "s", "a", "1"],
        &["HINCRBYFLOAT", "s", "a", "x"],
        &["HRANDFIELD", "s"],
        &["HRANDFIELD", "s", "1"],
        &["HRANDFIELD", "s", "x"],
        &["HSCAN", "s", "0"],
        &["HSCAN", "s", "x"],
        &["GET", "s"],
    ]);
    // A hash is the wrong type for string commands.
    d.run(&["HSET", "h", "a", "1"]);
    d.run(&["GET", "h"]);
    d.run(&["INCR", "h"]);
}

#[test]
fn only_reads_count_keyspace_hits_and_misses() {
    let mut d = Diff::new();
    d.run(&["CONFIG", "RESETSTAT"]);
    d.run_all(&[
        &["HSET", "h", "a", "1"][..],
        &["HSETNX", "h", "a", "2"],
        &["HSETNX", "n1", "a", "2"],
        &["HDEL", "h", "zz"],
        &["HDEL", "nokey", "zz"],
        &["HINCRBY", "h", "n", "1"],
        &["HINCRBYFLOAT", "h", "f", "1.5"],
        &["HMSET", "h", "b", "2"],
        &["HGET", "h", "a"],
        &["HGET", "nokey", "a"],
        &["HLEN", "h"],
        &["HSCAN", "h", "0"],
        &["HEXISTS", "nokey", "a"],
    ]);
    d.run_same_kind(&["HRANDFIELD", "h"]);
    for field in ["keyspace_hits", "keyspace_misses"] {
        d.both(|c| {
            let info = c.call(&["INFO", "stats"]);
            let text = String::from_utf8_lossy(&info).to_string();
            text.lines()
                .find(|l| l.starts_with(field))
                .map(str::to_string)
        });
    }
}

#[test]
fn hdel_of_the_last_field_deletes_the_key() {
    let mut d = Diff::new();
    d.run_all(&[
        &["HSET", "h", "a", "1", "b", "2"][..],
        &["HDEL", "h", "nosuch"],
        &["HDEL", "h", "a", "a", "nosuch"],
        &["HLEN", "h"],
        &["HDEL", "h", "b"],
        &["EXISTS", "h"],
        &["TYPE", "h"],
        &["HDEL", "h", "b"],
        &["HDEL", "nokey", "b"],
    ]);
    // The same for a hashtable, with a TTL that goes with the key.
    for i in 0..600 {
        d.run(&["HSET", "big", &format!("f{i}"), "v"]);
    }
    d.run(&["EXPIRE", "big", "1000"]);
    d.run(&["OBJECT", "ENCODING", "big"]);
    let fields: Vec<String> = (0..600).map(|i| format!("f{i}")).collect();
    let mut args = vec!["HDEL", "big"];
    args.extend(fields[..599].iter().map(String::as_str));
    d.run(&args);
    d.run(&["OBJECT", "ENCODING", "big"]);
    d.run(&["TTL", "big"]);
    d.run(&["HDEL", "big", "f599"]);
    d.run(&["EXISTS", "big"]);
    d.run(&["TTL", "big"]);
    d.run(&["HSET", "big", "x", "1"]);
    d.run(&["TTL", "big"]);
    d.run(&["OBJECT", "ENCODING", "big"]);
}

#[test]
fn hincrby_and_hincrbyfloat_results_and_errors() {
    let mut d = Diff::new();
    d.run_all(&[
        &["HINCRBY", "h", "n", "5"][..],
        &["HINCRBY", "h", "n", "-7"],
        &["HINCRBY", "h", "n", "x"],
        &["HINCRBY", "h", "n", "1.5"],
        &["HINCRBY", "h", "n", "9223372036854775808"],
        &["HINCRBY", "nokey", "n", "x"],
        &[
            "HSET",
            "h",
            "max",
            "9223372036854775807",
            "min",
            "-9223372036854775808",
        ],
        &["HINCRBY", "h", "max", "1"],
        &["HINCRBY", "h", "max", "0"],
        &["HINCRBY", "h", "min", "-1"],
        &["HINCRBY", "h", "min", "9223372036854775807"],
        &[
            "HSET", "h", "s", "abc", "sp", " 1", "lead", "01", "f", "1.5", "e", "1e3",
        ],
        &["HINCRBY", "h", "s", "1"],
        &["HINCRBY", "h", "sp", "1"],
        &["HINCRBY", "h", "lead", "1"],
        &["HINCRBY", "h", "f", "1"],
        &["HINCRBY", "h", "e", "1"],
        &["HINCRBYFLOAT", "h", "f", "1.25"],
        &["HINCRBYFLOAT", "h", "e", "1"],
        &["HINCRBYFLOAT", "h", "s", "1"],
        &["HINCRBYFLOAT", "h", "sp", "1"],
        &["HINCRBYFLOAT", "h", "lead", "1"],
        &["HINCRBYFLOAT", "h", "x", "0.1"],
        &["HINCRBYFLOAT", "h", "x", "0.2"],
        &["HINCRBYFLOAT", "h", "x", "-0.3"],
        &["HINCRBYFLOAT", "h", "x", "5.0e3"],
        &["HINCRBYFLOAT", "h", "x", "2.5"],
        &["HINCRBYFLOAT", "h", "x", "abc"],
        &["HINCRBYFLOAT", "h", "x", ""],
        &["HINCRBYFLOAT", "h", "x", "inf"],
        &["HINCRBYFLOAT", "h", "x", "-inf"],
        &["HINCRBYFLOAT", "h", "x", "nan"],
        &["HINCRBYFLOAT", "h", "n", "1"],
        &["HINCRBYFLOAT", "h", "max", "1"],
        &["HINCRBYFLOAT", "h", "int", "10"],
        &["HINCRBYFLOAT", "h", "int", "-10"],
        &["HINCRBYFLOAT", "h", "big", "1e17"],
        &["HINCRBYFLOAT", "h", "big", "1"],
        &["HINCRBYFLOAT", "nokey", "a", "nan"],
        &["HINCRBYFLOAT", "nokey", "a", "x"],
        &["EXISTS", "nokey"],
        &["HGETALL", "h"],
    ]);
    // Redis adds in long double (a 64-bit mantissa) and prints with %.17Lf: beyond f64's range
    // and precision, digit for digit.
    d.run_all(&[
        &["HINCRBYFLOAT", "ld", "x", "5000"][..],
        &["HINCRBYFLOAT", "ld", "x", "1.5e-5"],
        &["HINCRBYFLOAT", "ld", "big", "1e308"],
        &["HINCRBYFLOAT", "ld", "big", "1e308"],
        &["HINCRBYFLOAT", "ld", "huge", "1e4000"],
        &["HINCRBYFLOAT", "ld", "huge", "1e4000"],
        &["HINCRBYFLOAT", "ld", "max", "1.18e4932"],
        &["HINCRBYFLOAT", "ld", "max", "1.18e4932"],
        &["HGET", "ld", "max"],
        &["HINCRBYFLOAT", "ld", "tiny", "1e-4950"],
        &["HINCRBYFLOAT", "ld", "tiny", "4e-4951"],
        &["HINCRBYFLOAT", "ld", "tiny", "1e-4960"],
        &["HINCRBYFLOAT", "ld", "tiny", "1.19e4932"],
        &["HINCRBYFLOAT", "ld", "hex", "0x10"],
        &["HINCRBYFLOAT", "ld", "hex", "0x1.8p1"],
        &["HINCRBYFLOAT", "ld", "hex", "0x"],
        &["HINCRBYFLOAT", "ld", "dot", ".5"],
        &["HINCRBYFLOAT", "ld", "dot", "5."],
        &["HINCRBYFLOAT", "ld", "dot", "."],
        &["HINCRBYFLOAT", "ld", "neg", "-0"],
        &["HINCRBYFLOAT", "ld", "neg", "-0.0"],
        &["HINCRBYFLOAT", "ld", "neg", "-1e-30"],
        &["HINCRBYFLOAT", "ld", "neg", "1e-30"],
    ]);
}

#[test]
fn hincrbyfloat_matches_long_double_arithmetic_on_random_operands() {
    let mut d = Diff::new();
    let mut rng = Rng(0xDEAD_BEEF_1234_5678);
    for i in 0..1500 {
        let field = format!("f{}", i % 40);
        let mantissa = rng.next() % 10u64.pow(1 + (rng.next() % 18) as u32);
        let scale = rng.below(40) as i32 - 20;
        let by = match rng.below(4) {
            0 => format!("{mantissa}e{scale}"),
            1 => format!("-{mantissa}.{}", rng.below(1000)),
            2 => format!("0.{:0width$}", mantissa, width = rng.below(25) as usize),
            _ => format!("{}", mantissa as f64 / 7.0),
        };
        d.run(&["HINCRBYFLOAT", "r", &field, &by]);
    }
    d.run(&["HGETALL", "r"]);
}

#[test]
fn encodings_follow_the_thresholds_and_config_set() {
    let mut d = Diff::new();
    // Entries: 512 (redis-server's built-in default) stays a listpack, the 513th field converts.
    for i in 0..512 {
        d.run(&["HSET", "many", &format!("f{i}"), "v"]);
    }
    d.run(&["OBJECT", "ENCODING", "many"]);
    d.run(&["HSET", "many", "f0", "updated"]);
    d.run(&["OBJECT", "ENCODING", "many"]);
    d.run(&["HSET", "many", "f512", "v"]);
    d.run(&["OBJECT", "ENCODING", "many"]);
    // Deleting back under the threshold never converts back.
    d.run(&["HDEL", "many", "f512", "f511"]);
    d.run(&["OBJECT", "ENCODING", "many"]);

    // Values: 64 bytes fit, 65 do not; fields too; any argument of HSET counts.
    let (v64, v65) = ("x".repeat(64), "x".repeat(65));
    for (key, field, value) in [
        ("v1", "f", v64.as_str()),
        ("v2", "f", v65.as_str()),
        ("v3", v64.as_str(), "v"),
        ("v4", v65.as_str(), "v"),
    ] {
        d.run(&["HSET", key, field, value]);
        d.run(&["OBJECT", "ENCODING", key]);
    }
    d.run(&["HSET", "v5", "a", "1", "b", &v65, "c", "3"]);
    d.run(&["OBJECT", "ENCODING", "v5"]);
    // HSETNX of an existing field does not convert; of a new one it does.
    d.run(&["HSET", "nx", "a", "1"]);
    d.run(&["HSETNX", "nx", "a", &v65]);
    d.run(&["OBJECT", "ENCODING", "nx"]);
    d.run(&["HSETNX", "nx", "b", &v65]);
    d.run(&["OBJECT", "ENCODING", "nx"]);
    // HINCRBY / HINCRBYFLOAT with a long field name, and a long float result.
    d.run(&["HINCRBY", "inc", &v65, "1"]);
    d.run(&["OBJECT", "ENCODING", "inc"]);
    d.run(&["HINCRBYFLOAT", "incf", "f", "1.5"]);
    d.run(&["OBJECT", "ENCODING", "incf"]);

    // After CONFIG SET (and through the old ziplist names).
    d.run(&["CONFIG", "SET", "hash-max-listpack-entries", "3"]);
    d.run(&["CONFIG", "SET", "hash-max-ziplist-value", "4"]);
    d.run(&["HSET", "c1", "a", "1", "b", "2", "c", "3"]);
    d.run(&["OBJECT", "ENCODING", "c1"]);
    d.run(&["HSET", "c1", "d", "4"]);
    d.run(&["OBJECT", "ENCODING", "c1"]);
    d.run(&["HSET", "c2", "a", "12345"]);
    d.run(&["OBJECT", "ENCODING", "c2"]);
    d.run(&["HSET", "c3", "a", "1234"]);
    d.run(&["HINCRBY", "c3", "a", "1"]);
    d.run(&["OBJECT", "ENCODING", "c3"]);
    d.run(&["HINCRBY", "c3", "a", "98765"]);
    d.run(&["OBJECT", "ENCODING", "c3"]);
    d.run(&["HINCRBYFLOAT", "c4", "a", "1.25"]);
    d.run(&["OBJECT", "ENCODING", "c4"]);
    // An existing listpack is only converted by its next write.
    d.run(&["OBJECT", "ENCODING", "v1"]);
    d.run(&["HGET", "v1", "f"]);
    d.run(&["OBJECT", "ENCODING", "v1"]);
    d.run(&["HSET", "v1", "g", "1"]);
    d.run(&["OBJECT", "ENCODING", "v1"]);
    d.run(&["CONFIG", "SET", "hash-max-listpack-entries", "0"]);
    d.run(&["HSET", "zero", "a", "1"]);
    d.run(&["OBJECT", "ENCODING", "zero"]);
}

#[test]
fn hrandfield_errors_shapes_and_whole_hash_answers() {
    let mut d = Diff::new();
    d.run_all(&[
        &["HRANDFIELD", "nokey"][..],
        &["HRANDFIELD", "nokey", "5"],
        &["HRANDFIELD", "nokey", "-5", "WITHVALUES"],
        &["HRANDFIELD", "nokey", "x"],
        &["HRANDFIELD", "nokey", "1", "foo"],
        &["HSET", "h", "a", "1", "b", "2", "c", "3"],
        &["HRANDFIELD", "h", "x"],
        &["HRANDFIELD", "h", "1.5"],
        &["HRANDFIELD", "h", "1", "withvalue"],
        &["HRANDFIELD", "h", "1", "withvalues", "x"],
        &["HRANDFIELD", "h", "-9223372036854775808"],
        &["HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES"],
        &["HRANDFIELD", "h", "4611686018427387904", "WITHVALUES"],
        &["HRANDFIELD", "h", "0"],
        &["HRANDFIELD", "h", "0", "WITHVALUES"],
        // A count at least the size answers the whole hash in its order.
        &["HRANDFIELD", "h", "3"],
        &["HRANDFIELD", "h", "100", "withvalues"],
        &["HRANDFIELD", "h", "9223372036854775807"],
    ]);
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run_all(&[
        &["HRANDFIELD", "nokey"][..],
        &["HRANDFIELD", "nokey", "3"],
        &["HRANDFIELD", "h", "3", "WITHVALUES"],
        &["HRANDFIELD", "h", "0", "WITHVALUES"],
        &["HGETALL", "h"],
        &["HGETALL", "nokey"],
        &["HMGET", "h", "a", "zz"],
        &["HGET", "h", "zz"],
        &["HSCAN", "h", "0"],
    ]);
    // Random answers: same shape on both servers, members of the hash, distinct when asked.
    for key_size in [3usize, 40, 600] {
        let key = format!("r{key_size}");
        let mut args = vec!["HSET".to_string(), key.clone()];
        for i in 0..key_size {
            args.push(format!("f{i}"));
            args.push(format!("v{i}"));
        }
        d.run(&args);
        for resp in [2, 3] {
            for (count, withvalues) in [
                (1i64, false),
                (2, true),
                (-10, false),
                (-7, true),
                (-1, true),
            ] {
                let mut args = vec!["HRANDFIELD".to_string(), key.clone(), count.to_string()];
                if withvalues {
                    args.push("WITHVALUES".into());
                }
                d.both(|c| {
                    c.call(&["HELLO", &resp.to_string()]);
                    let reply = Reply::decode(&c.call(&args));
                    let items = reply.as_array().expect("an array").to_vec();
                    let pairs: Vec<(Vec<u8>, Option<Vec<u8>>)> = match (withvalues, resp) {
                        (false, _) => items
                            .iter()
                            .map(|i| (i.as_bytes().expect("bulk").to_vec(), None))
                            .collect(),
                        (true, 2) => items
                            .chunks(2)
                            .map(|p| {
                                (
                                    p[0].as_bytes().expect("bulk").to_vec(),
                                    Some(p[1].as_bytes().expect("bulk").to_vec()),
                                )
                            })
                            .collect(),
                        (true, _) => items
                            .iter()
                            .map(|p| {
                                let p = p.as_array().expect("a pair");
                                assert_eq!(p.len(), 2);
                                (
                                    p[0].as_bytes().expect("bulk").to_vec(),
                                    Some(p[1].as_bytes().expect("bulk").to_vec()),
                                )
                            })
                            .collect(),
                    };
                    for (f, v) in &pairs {
                        let i: usize = std::str::from_utf8(&f[1..]).unwrap().parse().unwrap();
                        assert!(i < key_size);
                        if let Some(v) = v {
                            assert_eq!(v, format!("v{i}").as_bytes());
                        }
                    }
                    let distinct: BTreeSet<_> = pairs.iter().map(|p| p.0.clone()).collect();
                    if count > 0 {
                        assert_eq!(distinct.len(), pairs.len(), "distinct fields");
                    }
                    (pairs.len(), count > 0 && distinct.len() == pairs.len())
                });
            }
        }
        d.both(|c| {
            c.call(&["HELLO", "2"]);
            let r = Reply::decode(&c.call(&["HRANDFIELD", &key]));
            r.as_bytes().is_some_and(|f| f.starts_with(b"f"))
        });
    }
}

#[test]
fn hrandfield_covers_every_field_over_many_calls() {
    let mut d = Diff::new();
    for size in [5usize, 700] {
        let key = format!("h{size}");
        for i in 0..size {
            d.run(&["HSET", &key, &format!("f{i}"), "v"]);
        }
        let reply =
            Reply::decode(
                &d.strata
                    .call(&["HRANDFIELD", &key, &format!("-{}", size * 40)]),
            );
        let seen: BTreeSet<Vec<u8>> = reply
            .as_array()
            .expect("an array")
            .iter()
            .map(|r| r.as_bytes().expect("bulk").to_vec())
            .collect();
        assert_eq!(
            seen.len(),
            size,
            "every field comes up with 40x oversampling"
        );
    }
}

#[test]
fn hscan_small_large_and_errors() {
    let mut d = Diff::new();
    d.run_all(&[
        &["HSCAN", "nokey", "0"][..],
        &["HSCAN", "nokey", "x"],
        &["HSCAN", "nokey", "0", "COUNT", "0"],
        &["HSET", "h", "a1", "1", "b1", "2", "a2", "3"],
        &["HSCAN", "h", "0"],
        &["HSCAN", "h", "0", "COUNT", "1"],
        &["HSCAN", "h", "7"],
        &["HSCAN", "h", "0", "MATCH", "a*"],
        &["HSCAN", "h", "0", "match", "*", "count", "2"],
        &["HSCAN", "h", "0", "MATCH", "zz*"],
        &["HSCAN", "h", "x"],
        &["HSCAN", "h", "-1"],
        &["HSCAN", "h", "18446744073709551616"],
        &["HSCAN", "h", "0", "COUNT", "0"],
        &["HSCAN", "h", "0", "COUNT", "-1"],
        &["HSCAN", "h", "0", "COUNT", "x"],
        &["HSCAN", "h", "0", "COUNT"],
        &["HSCAN", "h", "0", "MATCH"],
        &["HSCAN", "h", "0", "TYPE", "string"],
        &["HSCAN", "h", "0", "NOVALUES"],
        &["HSCAN", "h", "0", "COUNT", "x", "MATCH"],
    ]);
    for i in 0..1000 {
        d.run(&["HSET", "big", &format!("field:{i}"), &i.to_string()]);
    }
    d.run_scan(&["HSCAN", "big", "0"], 2);
    d.run_scan(&["HSCAN", "big", "0", "COUNT", "1"], 2);
    d.run_scan(
        &["HSCAN", "big", "0", "COUNT", "100", "MATCH", "field:1*"],
        2,
    );
    d.run_scan(&["HSCAN", "big", "0", "MATCH", "nothing*"], 2);
    d.run(&["HSCAN", "big", "0", "COUNT", "0"]);
}

/// Scans `key` to the end with `count`, calling `between` after every call; returns the fields.
fn scan_fields(
    c: &mut Conn,
    key: &str,
    count: usize,
    mut between: impl FnMut(&mut Conn, usize),
) -> Vec<Vec<u8>> {
    let mut cursor = b"0".to_vec();
    let mut fields = Vec::new();
    for round in 0.. {
        let reply = Reply::decode(&c.call(&[
            &b"HSCAN"[..],
            key.as_bytes(),
            &cursor,
            b"COUNT",
            count.to_string().as_bytes(),
        ]));
        let parts = reply.as_array().expect("[cursor, items]");
        cursor = parts[0].as_bytes().expect("cursor").to_vec();
        let items = parts[1].as_array().expect("items");
        fields.extend(
            items
                .chunks(2)
                .map(|p| p[0].as_bytes().expect("bulk").to_vec()),
        );
        if cursor == b"0" {
            break;
        }
        between(c, round);
    }
    fields
}

#[test]
fn hscan_returns_every_field_present_throughout_a_large_scan() {
    let mut d = Diff::new();
    const N: usize = 20_000;
    // Load in pipelined batches on both servers.
    for chunk in (0..N).collect::<Vec<_>>().chunks(1000) {
        let mut args = vec!["HSET".to_string(), "big".to_string()];
        for i in chunk {
            args.push(format!("f{i}"));
            args.push("v".into());
        }
        d.run(&args);
    }
    d.both(|c| {
        // Delete some fields while scanning (never the ones below N/2): those must all be returned,
        // and with no restructuring in between, each exactly once.
        let fields = scan_fields(c, "big", 50, |c, round| {
            if round % 2 == 0 {
                c.call(&["HDEL", "big", &format!("f{}", N / 2 + round)]);
            }
        });
        let unique: BTreeSet<_> = fields.iter().cloned().collect();
        for i in 0..N / 2 {
            assert!(
                unique.contains(format!("f{i}").as_bytes()),
                "f{i} was not returned"
            );
        }
        unique.len() > N / 2
    });
    let fields = scan_fields(&mut d.strata, "big", 10, |_, _| {});
    let unique: BTreeSet<_> = fields.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        fields.len(),
        "strata returns no duplicates without restructuring"
    );
}

#[test]
fn hscan_returns_every_lasting_field_while_the_hash_grows_and_shrinks() {
    let mut d = Diff::new();
    let mut args = vec!["HSET".to_string(), "g".to_string()];
    for i in 0..1000 {
        args.push(format!("keep{i}"));
        args.push("v".into());
    }
    d.run(&args);
    // Between HSCAN calls: 40 × 500 new fields (the table doubles several times), then they are
    // deleted again 2000 at a time (it shrinks). Fields kept throughout must all come back.
    d.both(|c| {
        let mut added = 0usize;
        let fields = scan_fields(c, "g", 10, |c, round| {
            if round < 40 {
                let mut more = vec!["HSET".to_string(), "g".to_string()];
                for i in added..added + 500 {
                    more.push(format!("tmp{i}"));
                    more.push("w".into());
                }
                c.call(&more);
                added += 500;
            } else if added > 0 {
                let mut del = vec!["HDEL".to_string(), "g".to_string()];
                let from = added.saturating_sub(2000);
                del.extend((from..added).map(|i| format!("tmp{i}")));
                c.call(&del);
                added = from;
            }
        });
        let unique: BTreeSet<_> = fields.into_iter().collect();
        (0..1000).all(|i| unique.contains(format!("keep{i}").as_bytes()))
    });
    d.run(&["HLEN", "g"]);
}

/// One random command over a small field space, so that fields repeat and hashes shrink, grow,
/// empty and convert.
fn random_command(rng: &mut Rng, keys: &[&str]) -> Vec<String> {
    let key = keys[rng.below(keys.len() as u64) as usize].to_string();
    let field = |rng: &mut Rng| format!("f{}", rng.below(24));
    let value = |rng: &mut Rng| match rng.below(7) {
        6 if rng.below(8) == 0 => "y".repeat(60 + rng.below(10) as usize),
        0 => rng.below(1000).to_string(),
        1 => format!("-{}", rng.below(100)),
        2 => "x".repeat(rng.below(12) as usize),
        3 => format!("{}.{}", rng.below(100), rng.below(100)),
        _ => format!("val{}", rng.below(50)),
    };
    let s = |x: &str| x.to_string();
    match rng.below(16) {
        0..=2 => {
            let mut c = vec![s("HSET"), key];
            for _ in 0..1 + rng.below(4) {
                c.push(field(rng));
                c.push(value(rng));
            }
            c
        }
        3 => vec![s("HMSET"), key, field(rng), value(rng)],
        4 => vec![s("HSETNX"), key, field(rng), value(rng)],
        5 | 6 => {
            let mut c = vec![s("HDEL"), key];
            for _ in 0..1 + rng.below(3) {
                c.push(field(rng));
            }
            c
        }
        7 => vec![s("HGET"), key, field(rng)],
        8 => vec![s("HMGET"), key, field(rng), field(rng)],
        9 => vec![
            s("HINCRBY"),
            key,
            field(rng),
            (rng.below(200) as i64 - 100).to_string(),
        ],
        10 => vec![
            s("HINCRBYFLOAT"),
            key,
            field(rng),
            format!("{}.5", rng.below(10)),
        ],
        11 => vec![s("HEXISTS"), key, field(rng)],
        12 => vec![s("HSTRLEN"), key, field(rng)],
        13 => vec![s("HLEN"), key],
        14 => vec![s("EXISTS"), key],
        _ => vec![s("HGETALL"), key],
    }
}

#[test]
fn random_operation_sequences_match_redis() {
    let keys = ["h1", "h2", "s"];
    for (seed, entries, value) in [
        (1u64, "128", "64"),
        (2, "8", "6"),
        (3, "4", "8"),
        (4, "16", "5"),
    ] {
        let mut d = Diff::new();
        d.run(&["CONFIG", "SET", "hash-max-listpack-entries", entries]);
        d.run(&["CONFIG", "SET", "hash-max-listpack-value", value]);
        d.run(&["SET", "s", "string"]);
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
        let mut encodings: HashMap<String, BTreeSet<Vec<u8>>> = HashMap::new();
        for step in 0..1500 {
            let cmd = random_command(&mut rng, &keys);
            let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
            if args[0] == "HGETALL" {
                run_in_hash_order(&mut d, args[1], &args);
            } else {
                d.run(&args);
            }
            if step % 10 == 0 {
                for k in ["h1", "h2"] {
                    let e = d.run(&["OBJECT", "ENCODING", k]);
                    encodings.entry(k.into()).or_default().insert(e);
                    run_in_hash_order(&mut d, k, &["HKEYS", k]);
                    run_in_hash_order(&mut d, k, &["HVALS", k]);
                }
            }
        }
        if seed > 1 {
            // Small thresholds: the sequences went through both encodings.
            let seen: BTreeSet<Vec<u8>> = encodings.values().flatten().cloned().collect();
            assert!(
                seen.contains(&b"$9\r\nhashtable\r\n"[..]),
                "seed {seed}: {seen:?}"
            );
            assert!(
                seen.contains(&b"$8\r\nlistpack\r\n"[..]),
                "seed {seed}: {seen:?}"
            );
        }
    }
}
