//! The sorted-set family, reply for reply against redis-server: every command with its options and
//! error replies, score formatting, encoding conversions at the listpack limits (also after CONFIG
//! SET), randomized operation sequences across the listpack → skiplist threshold, RESP3 reply
//! shapes, and the multi-key commands with keys on different shards.

use crate::harness::{key_on, shard_of, Diff, Reply};

/// Runs each command on both servers and compares the replies (HELLO's reply carries the client
/// id, so for it only the protocol is compared).
fn all(d: &mut Diff, cmds: &[&[&str]]) {
    for c in cmds {
        if c[0] == "HELLO" {
            resp3(d);
        } else {
            d.run(c);
        }
    }
}

/// Switches both connections to RESP3.
fn resp3(d: &mut Diff) {
    d.run_matching(&["HELLO", "3"], |r| {
        r.get("proto").and_then(Reply::as_int) == Some(3)
    });
}

#[test]
fn zadd_options_and_errors() {
    let mut d = Diff::new();
    all(
        &mut d,
        &[
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
            &["ZADD", "z", "NX", "10", "a", "4", "d"],
            &["ZADD", "z", "XX", "10", "a", "5", "e"],
            &["ZADD", "z", "XX", "CH", "11", "a", "5", "e"],
            &["ZADD", "z", "GT", "CH", "1", "a", "20", "b"],
            &["ZADD", "z", "LT", "CH", "100", "a", "0", "c"],
            &["ZADD", "z", "XX", "GT", "CH", "30", "a", "1", "zz"],
            &["ZADD", "z", "INCR", "5", "a"],
            &["ZADD", "z", "INCR", "NX", "5", "a"],
            &["ZADD", "z", "INCR", "XX", "5", "nosuch"],
            &["ZADD", "z", "INCR", "GT", "-5", "a"],
            &["ZADD", "z", "INCR", "LT", "-5", "a"],
            &["ZADD", "z", "CH", "INCR", "1", "newone"],
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            &["ZADD", "z", "NX", "XX", "1", "a"],
            &["ZADD", "z", "GT", "LT", "1", "a"],
            &["ZADD", "z", "GT", "NX", "1", "a"],
            &["ZADD", "z", "LT", "NX", "1", "a"],
            &["ZADD", "z", "INCR", "1", "a", "2", "b"],
            &["ZADD", "z", "1"],
            &["ZADD", "z", "1", "a", "2"],
            &["ZADD", "z", "NX"],
            &["ZADD", "z", "x", "a"],
            &["ZADD", "z", "1", "a", "nan", "b"],
            &["ZADD", "z", "1e400", "a"],
            &["ZADD", "z", "1e-400", "a"],
            &["ZADD", "z", " 1", "a"],
            &["ZADD", "z", "0x10", "a"],
            &["ZADD", "z", "", "a"],
            &["ZADD", "z", "NX", "XX", "x", "a"],
            &["ZADD", "z", "INCR", "x", "a"],
            &[
                "ZADD", "z", "+inf", "pinf", "-inf", "ninf", "1.5e3", "e3", "+2", "plus",
            ],
            &["ZADD", "z", "INCR", "-inf", "pinf"],
            &["ZINCRBY", "z", "-inf", "pinf"],
            &["ZINCRBY", "z", "+inf", "ninf"],
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            &["ZADD", "nokey", "XX", "1", "a"],
            &["EXISTS", "nokey"],
            &["ZADD", "nokey", "XX", "INCR", "1", "a"],
            &["ZADD", "z"],
            &["ZADD"],
            &["SET", "str", "v"],
            &["ZADD", "str", "1", "a"],
            &["ZADD", "str", "x", "a"],
            &["ZADD", "str", "NX", "XX", "1", "a"],
            &["ZINCRBY", "z", "1", "a"],
            &["ZINCRBY", "z", "x", "a"],
            &["ZINCRBY", "z", "nx", "a"],
            &["ZINCRBY", "new", "2.5", "m"],
            &["ZINCRBY", "str", "1", "a"],
            &["ZINCRBY", "z", "1"],
            &["TYPE", "z"],
        ],
    );
}

#[test]
fn score_formatting_edge_cases() {
    let mut d = Diff::new();
    for s in [
        "1e300",
        "-0",
        "0",
        "0.1",
        "0.30000000000000004",
        "1e17",
        "1e16",
        "123456789012345678",
        "-1.5",
        "3.0",
        "1e-5",
        "0.0001",
        "inf",
        "-inf",
        "+inf",
        "5e-324",
        "1.7976931348623157e308",
        "2.5E2",
        ".5",
        "5.",
        "-.5e1",
        "9007199254740993",
    ] {
        d.run(&["ZADD", "z", s, s]);
        d.run(&["ZSCORE", "z", s]);
    }
    d.run(&["ZINCRBY", "z", "0.1", "0.1"]);
    d.run(&["ZINCRBY", "z", "0.2", "0.1"]);
    d.run(&["ZADD", "z", "INCR", "0.2", "0.1"]);
    d.run(&["ZRANGE", "z", "0", "-1", "WITHSCORES"]);
    d.run(&["ZMSCORE", "z", "1e300", "nosuch", "-0", "inf"]);
    // The listpack stores `d2string` text, the skiplist `%.17g`: ZSCAN shows it.
    d.run(&["ZSCAN", "z", "0"]);
    d.run(&["CONFIG", "SET", "zset-max-listpack-entries", "0"]);
    d.run(&[
        "ZADD", "big", "1e17", "a", "-0", "b", "0.1", "c", "100", "d",
    ]);
    d.run(&["OBJECT", "ENCODING", "big"]);
    d.run_scan(&["ZSCAN", "big", "0"], 2);
    resp3(&mut d);
    d.run(&["ZSCORE", "z", "1e300"]);
    d.run(&["ZSCORE", "z", "-inf"]);
    d.run(&["ZRANGE", "z", "0", "3", "WITHSCORES"]);
    d.run(&["ZINCRBY", "z", "1", "0.1"]);
    d.run(&["ZMSCORE", "z", "0.1", "nosuch"]);
}

#[test]
fn single_key_reads_and_errors() {
    let mut d = Diff::new();
    d.run(&[
        "ZADD", "z", "1", "a", "2", "b", "2", "c", "3", "d", "5", "e",
    ]);
    d.run(&["SET", "str", "v"]);
    let cmds: &[&[&str]] = &[
        &["ZCARD", "z"],
        &["ZCARD", "nokey"],
        &["ZCARD", "str"],
        &["ZSCORE", "z", "c"],
        &["ZSCORE", "z", "x"],
        &["ZSCORE", "nokey", "x"],
        &["ZSCORE", "str", "x"],
        &["ZMSCORE", "z", "a", "x", "e"],
        &["ZMSCORE", "nokey", "a", "b"],
        &["ZMSCORE", "str", "a"],
        &["ZMSCORE", "z"],
        &["ZRANK", "z", "a"],
        &["ZRANK", "z", "e"],
        &["ZRANK", "z", "x"],
        &["ZRANK", "nokey", "x"],
        &["ZRANK", "str", "x"],
        &["ZREVRANK", "z", "a"],
        &["ZREVRANK", "z", "c"],
        &["ZREVRANK", "z", "x"],
        &["ZCOUNT", "z", "2", "3"],
        &["ZCOUNT", "z", "(2", "3"],
        &["ZCOUNT", "z", "(2", "(3"],
        &["ZCOUNT", "z", "-inf", "+inf"],
        &["ZCOUNT", "z", "3", "2"],
        &["ZCOUNT", "z", "(2", "2"],
        &["ZCOUNT", "z", "x", "2"],
        &["ZCOUNT", "z", "1", "nan"],
        &["ZCOUNT", "z", "((1", "2"],
        &["ZCOUNT", "z", "", "2"],
        &["ZCOUNT", "z", " 2", "3"],
        &["ZCOUNT", "z", "(", "10"],
        // Bounds are C strings in Redis: they end at a NUL byte.
        &["ZCOUNT", "z", "2\0x", "3"],
        &["ZCOUNT", "z", "(\0", "(3\0junk"],
        &["ZCOUNT", "z", "x\0", "3"],
        &["ZRANGEBYSCORE", "z", "\0", "+inf"],
        &["ZSCAN", "z", "\0x"],
        &["ZCOUNT", "z", "1e400", "inf"],
        &["ZCOUNT", "nokey", "1", "2"],
        &["ZCOUNT", "str", "1", "2"],
        &["ZCOUNT", "str", "x", "2"],
        &["ZRANGE", "z", "0", "-1"],
        &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
        &["ZRANGE", "z", "1", "2"],
        &["ZRANGE", "z", "-2", "-1"],
        &["ZRANGE", "z", "-100", "100"],
        &["ZRANGE", "z", "3", "1"],
        &["ZRANGE", "z", "5", "10"],
        &["ZRANGE", "z", "0", "-1", "REV"],
        &["ZRANGE", "z", "0", "1", "REV", "WITHSCORES"],
        &["ZRANGE", "z", "2", "5", "BYSCORE"],
        &["ZRANGE", "z", "(2", "5", "BYSCORE", "WITHSCORES"],
        &["ZRANGE", "z", "5", "2", "BYSCORE", "REV"],
        &["ZRANGE", "z", "5", "(2", "BYSCORE", "REV", "WITHSCORES"],
        &["ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "2"],
        &[
            "ZRANGE", "z", "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2",
        ],
        &["ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "-1"],
        &["ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "-1", "2"],
        &["ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "10", "2"],
        &["ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "0", "0"],
        &["ZRANGE", "z", "0", "-1", "LIMIT", "0", "1"],
        &["ZRANGE", "z", "-", "+", "BYLEX"],
        &["ZRANGE", "z", "-", "+", "BYLEX", "WITHSCORES"],
        &["ZRANGE", "z", "0", "-1", "BYLEX"],
        &["ZRANGE", "z", "0", "1", "BYSCORE", "BYLEX"],
        &["ZRANGE", "z", "0", "1", "REV", "REV"],
        &["ZRANGE", "z", "0", "1", "LIMIT", "0"],
        &["ZRANGE", "z", "0", "1", "FOO"],
        &["ZRANGE", "z", "a", "1"],
        &["ZRANGE", "z", "a", "1", "BYSCORE"],
        &["ZRANGE", "z", "0", "1", "BYSCORE", "LIMIT", "x", "1"],
        &["ZRANGE", "nokey", "0", "-1"],
        &["ZRANGE", "str", "0", "-1"],
        &["ZRANGE", "str", "x", "-1"],
        &["ZREVRANGE", "z", "0", "-1", "WITHSCORES"],
        &["ZREVRANGE", "z", "0", "1", "BYSCORE"],
        &["ZREVRANGE", "z", "1", "2", "REV"],
        &["ZRANGEBYSCORE", "z", "2", "3"],
        &[
            "ZRANGEBYSCORE",
            "z",
            "-inf",
            "inf",
            "WITHSCORES",
            "LIMIT",
            "1",
            "3",
        ],
        &["ZRANGEBYSCORE", "z", "-inf", "inf", "LIMIT", "1"],
        &["ZRANGEBYSCORE", "z", "-inf", "inf", "BYSCORE"],
        &["ZRANGEBYSCORE", "z", "-inf", "inf", "REV"],
        &["ZRANGEBYSCORE", "z", "x", "inf"],
        &["ZREVRANGEBYSCORE", "z", "+inf", "-inf"],
        &["ZREVRANGEBYSCORE", "z", "3", "(1", "WITHSCORES"],
        &["ZREVRANGEBYSCORE", "z", "+inf", "-inf", "LIMIT", "2", "2"],
        &["ZREVRANGEBYSCORE", "z", "1", "3"],
        &["ZRANGEBYLEX", "z", "-", "+"],
        &["ZRANGEBYLEX", "z", "-", "+", "WITHSCORES"],
        &["ZRANGEBYLEX", "z", "x", "+"],
        &["ZREVRANGEBYLEX", "z", "+", "-"],
        &["ZREVRANGEBYLEX", "z", "+", "-", "LIMIT", "1", "1"],
        &["ZLEXCOUNT", "z", "-", "+"],
        &["ZLEXCOUNT", "z", "x", "+"],
        &["ZLEXCOUNT", "z", "+", "-"],
        &["ZLEXCOUNT", "nokey", "-", "+"],
        &["ZLEXCOUNT", "str", "-", "+"],
        &["ZRANGE"],
        &["ZRANGE", "z", "0"],
    ];
    all(&mut d, cmds);
}

#[test]
fn lex_ranges_on_equal_scores() {
    let mut d = Diff::new();
    d.run(&[
        "ZADD", "l", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "f", "0", "g", "0", "",
        "0", "aa",
    ]);
    for (min, max) in [
        ("-", "+"),
        ("[b", "[e"),
        ("(b", "[e"),
        ("[b", "(e"),
        ("(b", "(e"),
        ("[a", "[a"),
        ("(a", "(a"),
        ("[e", "[b"),
        ("-", "[c"),
        ("(c", "+"),
        ("[", "(b"),
        ("+", "-"),
        ("-", "-"),
        ("+", "+"),
        ("[aa", "(b"),
    ] {
        d.run(&["ZRANGEBYLEX", "l", min, max]);
        d.run(&["ZRANGEBYLEX", "l", min, max, "LIMIT", "1", "2"]);
        d.run(&["ZREVRANGEBYLEX", "l", max, min]);
        d.run(&["ZREVRANGEBYLEX", "l", max, min, "LIMIT", "1", "2"]);
        d.run(&["ZRANGE", "l", min, max, "BYLEX"]);
        d.run(&["ZRANGE", "l", max, min, "BYLEX", "REV", "LIMIT", "0", "3"]);
        d.run(&["ZLEXCOUNT", "l", min, max]);
    }
    for (min, max) in [("a", "+"), ("-", "b"), ("[a", "x"), ("", "+")] {
        d.run(&["ZRANGEBYLEX", "l", min, max]);
        d.run(&["ZLEXCOUNT", "l", min, max]);
        d.run(&["ZREMRANGEBYLEX", "l", min, max]);
    }
    d.run(&["ZREMRANGEBYLEX", "l", "[b", "(d"]);
    d.run(&["ZRANGE", "l", "0", "-1"]);
    d.run(&["ZREMRANGEBYLEX", "l", "-", "+"]);
    d.run(&["EXISTS", "l"]);
}

#[test]
fn removals_pops_and_empty_deletion() {
    let mut d = Diff::new();
    d.run(&["SET", "str", "v"]);
    let fill: &[&str] = &[
        "ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
    ];
    all(
        &mut d,
        &[
            fill,
            &["ZREM", "z", "a", "x", "b", "a"],
            &["ZREM", "z", "x"],
            &["ZREM", "nokey", "x"],
            &["ZREM", "str", "x"],
            &["ZREM", "z", "c", "d", "e"],
            &["EXISTS", "z"],
            fill,
            &["ZREMRANGEBYRANK", "z", "1", "2"],
            &["ZREMRANGEBYRANK", "z", "-1", "-1"],
            &["ZREMRANGEBYRANK", "z", "5", "10"],
            &["ZREMRANGEBYRANK", "z", "x", "1"],
            &["ZREMRANGEBYRANK", "nokey", "0", "1"],
            &["ZREMRANGEBYRANK", "str", "0", "1"],
            &["ZREMRANGEBYRANK", "str", "x", "1"],
            &["ZRANGE", "z", "0", "-1"],
            &["ZREMRANGEBYRANK", "z", "0", "-1"],
            &["EXISTS", "z"],
            fill,
            &["ZREMRANGEBYSCORE", "z", "(1", "2"],
            &["ZREMRANGEBYSCORE", "z", "4", "2"],
            &["ZREMRANGEBYSCORE", "z", "x", "2"],
            &["ZREMRANGEBYSCORE", "nokey", "1", "2"],
            &["ZREMRANGEBYSCORE", "str", "1", "2"],
            &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"],
            &["EXISTS", "z"],
            fill,
            &["ZPOPMIN", "z"],
            &["ZPOPMAX", "z"],
            &["ZPOPMIN", "z", "2"],
            &["ZPOPMIN", "z", "0"],
            &["ZPOPMIN", "z", "-1"],
            &["ZPOPMIN", "z", "x"],
            &["ZPOPMIN", "z", "1", "2"],
            &["ZPOPMAX", "z", "10"],
            &["EXISTS", "z"],
            &["ZPOPMIN", "nokey"],
            &["ZPOPMIN", "nokey", "3"],
            &["ZPOPMAX", "str"],
            &["ZPOPMAX", "str", "0"],
            &["ZPOPMAX", "str", "-1"],
            fill,
            &["HELLO", "3"],
            &["ZPOPMIN", "z"],
            &["ZPOPMIN", "z", "2"],
            &["ZPOPMAX", "z", "1"],
            &["ZPOPMAX", "z", "0"],
            &["ZPOPMIN", "nokey", "2"],
            &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
            &["ZRANGEBYSCORE", "z", "-inf", "+inf", "WITHSCORES"],
            &["ZREVRANGE", "z", "0", "-1", "WITHSCORES"],
            &["ZSCORE", "z", "nosuch"],
            &["ZRANK", "z", "nosuch"],
        ],
    );
}

#[test]
fn zmpop_and_zrandmember() {
    let mut d = Diff::new();
    d.run(&["SET", "str", "v"]);
    all(
        &mut d,
        &[
            &["ZADD", "z1", "1", "a", "2", "b", "3", "c"],
            &["ZADD", "z2", "4", "d", "5", "e"],
            &["ZMPOP", "1", "z1", "MIN"],
            &["ZMPOP", "2", "nokey", "z1", "MAX", "COUNT", "10"],
            &["ZMPOP", "2", "z1", "z2", "min", "count", "1"],
            &["ZMPOP", "2", "nokey", "str", "MIN"],
            &["ZMPOP", "2", "str", "z2", "MIN"],
            &["ZMPOP", "1", "nokey", "MIN"],
            &["ZMPOP", "0", "z1", "MIN"],
            &["ZMPOP", "-1", "z1", "MIN"],
            &["ZMPOP", "x", "z1", "MIN"],
            &["ZMPOP", "3", "z1", "MIN"],
            &["ZMPOP", "1", "z1", "FOO"],
            &["ZMPOP", "1", "z1", "MIN", "COUNT"],
            &["ZMPOP", "1", "z1", "MIN", "COUNT", "0"],
            &["ZMPOP", "1", "z1", "MIN", "COUNT", "x"],
            &["ZMPOP", "1", "z1", "MIN", "COUNT", "1", "COUNT", "1"],
            &["ZMPOP", "1", "z1", "MIN", "FOO"],
            &["ZADD", "r", "1", "a", "2", "b", "3", "c"],
            &["ZRANDMEMBER", "nokey"],
            &["ZRANDMEMBER", "nokey", "5"],
            &["ZRANDMEMBER", "str"],
            &["ZRANDMEMBER", "str", "1"],
            &["ZRANDMEMBER", "r", "0"],
            &["ZRANDMEMBER", "r", "3"],
            &["ZRANDMEMBER", "r", "10", "WITHSCORES"],
            &["ZRANDMEMBER", "r", "x"],
            &["ZRANDMEMBER", "r", "1", "FOO"],
            &["ZRANDMEMBER", "r", "1", "WITHSCORES", "x"],
            &["ZRANDMEMBER", "r", "-9223372036854775808"],
            &["ZRANDMEMBER", "r", "9223372036854775807", "WITHSCORES"],
            &["ZRANDMEMBER", "r", "-4611686018427387904", "WITHSCORES"],
            &["HELLO", "3"],
            &["ZMPOP", "2", "nokey", "z2", "MAX"],
            &["ZMPOP", "1", "nokey", "MAX"],
            &["ZRANDMEMBER", "r", "10", "WITHSCORES"],
            &["ZRANDMEMBER", "nokey"],
        ],
    );
    // Random picks: check shape and membership only.
    let mut c = d.strata_server.conn();
    for args in [
        vec!["ZRANDMEMBER", "r"],
        vec!["ZRANDMEMBER", "r", "2"],
        vec!["ZRANDMEMBER", "r", "-7"],
        vec!["ZRANDMEMBER", "r", "-5", "WITHSCORES"],
    ] {
        let r = c.call_decoded(&args);
        let items: Vec<Vec<u8>> = match r.as_array() {
            Some(a) => a
                .iter()
                .flat_map(|x| match x.as_array() {
                    Some(p) => p
                        .iter()
                        .filter_map(|y| y.as_bytes().map(<[u8]>::to_vec))
                        .collect::<Vec<_>>(),
                    None => x
                        .as_bytes()
                        .map(<[u8]>::to_vec)
                        .into_iter()
                        .collect::<Vec<_>>(),
                })
                .collect(),
            None => vec![r.as_bytes().expect("a member").to_vec()],
        };
        for i in &items {
            assert!(
                [&b"a"[..], b"b", b"c", b"1", b"2", b"3"].contains(&&i[..]),
                "{args:?}: {:?}",
                String::from_utf8_lossy(i)
            );
        }
        let want = match args.get(2).map(|n| n.parse::<i64>().unwrap_or(0)) {
            None => 1,
            Some(n) if n >= 0 => n.min(3) as usize,
            Some(n) => n.unsigned_abs() as usize,
        };
        let per = if args.len() == 4 { 2 } else { 1 };
        assert_eq!(items.len(), want * per, "{args:?}");
        if args.get(2) == Some(&"2") {
            assert_ne!(items[0], items[1], "distinct members for a positive count");
        }
    }
}

#[test]
fn encoding_conversions_at_the_limits() {
    let mut d = Diff::new();
    for i in 0..128 {
        d.run(&["ZADD", "z", &i.to_string(), &format!("m{i}")]);
    }
    d.run(&["OBJECT", "ENCODING", "z"]);
    d.run(&["ZADD", "z", "1000", "m128"]);
    d.run(&["OBJECT", "ENCODING", "z"]);
    d.run(&["ZREMRANGEBYRANK", "z", "0", "100"]);
    d.run(&["OBJECT", "ENCODING", "z"]);
    let long = "x".repeat(65);
    d.run(&["ZADD", "v", "1", "a"]);
    d.run(&["ZADD", "v", "1", &"y".repeat(64)]);
    d.run(&["OBJECT", "ENCODING", "v"]);
    d.run(&["ZADD", "v", "1", &long]);
    d.run(&["OBJECT", "ENCODING", "v"]);
    d.run(&["ZADD", "w", "1", &long]);
    d.run(&["OBJECT", "ENCODING", "w"]);
    d.run(&["ZINCRBY", "i", "1", &long]);
    d.run(&["OBJECT", "ENCODING", "i"]);
    d.run(&["CONFIG", "SET", "zset-max-listpack-entries", "4"]);
    d.run(&["CONFIG", "SET", "zset-max-listpack-value", "8"]);
    d.run(&["ZADD", "s", "1", "a", "2", "b", "3", "c", "4", "d"]);
    d.run(&["OBJECT", "ENCODING", "s"]);
    d.run(&["ZADD", "s", "5", "e"]);
    d.run(&["OBJECT", "ENCODING", "s"]);
    d.run(&["ZADD", "t", "1", "123456789"]);
    d.run(&["OBJECT", "ENCODING", "t"]);
    // Store commands pick the result's encoding from its size.
    d.run(&[
        "ZADD", "u", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e",
    ]);
    d.run(&["ZUNIONSTORE", "dst", "1", "u"]);
    d.run(&["OBJECT", "ENCODING", "dst"]);
    d.run(&["ZRANGESTORE", "dst", "u", "0", "2"]);
    d.run(&["OBJECT", "ENCODING", "dst"]);
    d.run(&["ZRANGESTORE", "dst", "u", "0", "-1"]);
    d.run(&["OBJECT", "ENCODING", "dst"]);
    d.run(&["ZINTERSTORE", "dst", "1", "s"]);
    d.run(&["OBJECT", "ENCODING", "dst"]);
    d.run(&["ZDIFFSTORE", "dst", "2", "s", "u"]);
    d.run(&["EXISTS", "dst"]);
    d.run(&["CONFIG", "SET", "zset-max-ziplist-entries", "0"]);
    d.run(&["ZADD", "zero", "1", "a"]);
    d.run(&["OBJECT", "ENCODING", "zero"]);
    d.run(&["CONFIG", "SET", "zset-max-listpack-entries", "128"]);
    d.run(&["CONFIG", "SET", "zset-max-listpack-value", "64"]);
    d.run(&["ZADD", "after", "1", "a"]);
    d.run(&["OBJECT", "ENCODING", "after"]);
}

/// A small deterministic generator for the randomized tests.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn random_ops(d: &mut Diff, seed: u64, steps: usize, members: u64) {
    let mut r = Lcg(seed);
    const SCORES: [&str; 10] = [
        "0", "1", "-1", "2.5", "1e300", "-inf", "inf", "0.1", "3", "-0",
    ];
    const BOUNDS: [&str; 9] = ["-inf", "+inf", "0", "(0", "1", "(2.5", "3", "-1", "(1e300"];
    for _ in 0..steps {
        let m = format!("m{}", r.below(members));
        let m2 = format!("m{}", r.below(members));
        let s = SCORES[r.below(10) as usize].to_string();
        let s2 = (r.below(200) as f64 / 8.0 - 10.0).to_string();
        let b1 = BOUNDS[r.below(9) as usize];
        let b2 = BOUNDS[r.below(9) as usize];
        let i1 = (r.below(40) as i64 - 20).to_string();
        let i2 = (r.below(40) as i64 - 20).to_string();
        let cmd: Vec<&str> = match r.below(24) {
            0..=4 => vec!["ZADD", "k", &s, &m, &s2, &m2],
            5 => vec!["ZADD", "k", "GT", "CH", &s2, &m],
            6 => vec!["ZADD", "k", "LT", "INCR", &s2, &m],
            7 => vec!["ZADD", "k", "NX", &s, &m],
            8 => vec!["ZINCRBY", "k", &s2, &m],
            9 => vec!["ZREM", "k", &m, &m2],
            10 => vec!["ZRANGE", "k", &i1, &i2, "WITHSCORES"],
            11 => vec!["ZRANGE", "k", b1, b2, "BYSCORE", "LIMIT", "1", "5"],
            12 => vec!["ZREVRANGEBYSCORE", "k", b2, b1, "WITHSCORES"],
            13 => vec!["ZCOUNT", "k", b1, b2],
            14 => vec!["ZRANK", "k", &m],
            15 => vec!["ZREVRANK", "k", &m],
            16 => vec!["ZSCORE", "k", &m],
            17 => vec!["ZREMRANGEBYRANK", "k", &i1, &i2],
            18 => vec!["ZREMRANGEBYSCORE", "k", b1, b2],
            19 => vec!["ZPOPMIN", "k", "2"],
            20 => vec!["ZPOPMAX", "k"],
            21 => vec!["ZREVRANGE", "k", &i1, &i2],
            22 => vec!["OBJECT", "ENCODING", "k"],
            _ => vec!["ZCARD", "k"],
        };
        d.run(&cmd);
        // Lex commands on a set whose scores are all equal (the only case Redis defines).
        let lex_m = format!("[{m}");
        let lex_m2 = format!("({m2}");
        let lex: Vec<&str> = match r.below(6) {
            0 | 1 => vec!["ZADD", "lex", "0", &m],
            2 => vec!["ZRANGEBYLEX", "lex", &lex_m, &lex_m2],
            3 => vec!["ZLEXCOUNT", "lex", "-", &lex_m2],
            4 => vec!["ZREVRANGEBYLEX", "lex", "+", &lex_m, "LIMIT", "0", "3"],
            _ => vec!["ZREMRANGEBYLEX", "lex", &lex_m, &lex_m2],
        };
        d.run(&lex);
    }
    d.run(&["ZRANGE", "k", "0", "-1", "WITHSCORES"]);
    d.run(&["ZRANGE", "lex", "0", "-1"]);
}

#[test]
fn randomized_ops_across_the_threshold() {
    let mut d = Diff::new();
    random_ops(&mut d, 1, 3000, 180);
    d.run(&["CONFIG", "SET", "zset-max-listpack-entries", "16"]);
    d.run(&["DEL", "k", "lex"]);
    random_ops(&mut d, 2, 1500, 40);
}

/// inf × 0 is NaN: Redis takes the first set's product as 0, but a later set's NaN product goes
/// into the aggregate (SUM makes the total 0, MIN and MAX keep what they had), so ZINTER of a set
/// with itself, WEIGHTS 3 0, scores -inf as 0, not -inf.
#[test]
fn infinite_scores_times_zero_weights_match_redis() {
    let mut d = Diff::with_threads(4);
    let a = key_on(0, "za");
    let b = key_on(1, "zb");
    let (a, b) = (a.as_str(), b.as_str());
    all(
        &mut d,
        &[
            &["ZADD", a, "-inf", "n", "inf", "p", "2", "x"],
            &["ZADD", b, "inf", "n", "-inf", "p", "0", "x"],
        ],
    );
    for op in ["ZINTER", "ZUNION"] {
        for (x, y) in [(a, a), (a, b), (b, a)] {
            for w in [
                ["3", "0"],
                ["0", "3"],
                ["-2.5", "-0"],
                ["inf", "-inf"],
                ["0", "0"],
            ] {
                for agg in ["SUM", "MIN", "MAX"] {
                    let cmd = [op, "2", x, y, "WEIGHTS", w[0], w[1], "AGGREGATE", agg];
                    d.run(&[&cmd[..], &["WITHSCORES"]].concat());
                }
            }
        }
        d.run(&[op, "3", a, a, a, "WEIGHTS", "2", "1", "0", "WITHSCORES"]);
    }
    all(
        &mut d,
        &[
            &["ZINTERSTORE", "{za}d", "2", a, a, "WEIGHTS", "3", "0"],
            &["ZRANGE", "{za}d", "0", "-1", "WITHSCORES"],
            &["ZADD", "{za}d", "INCR", "+inf", "n"],
        ],
    );
}

#[test]
fn multi_key_commands_across_shards() {
    let mut d = Diff::with_threads(4);
    let a = key_on(0, "za");
    let b = key_on(1, "zb");
    let c = key_on(0, "zc");
    let dst = key_on(1, "dst");
    assert_ne!(shard_of(&a), shard_of(&b));
    let (a, b, c, dst) = (a.as_str(), b.as_str(), c.as_str(), dst.as_str());
    all(
        &mut d,
        &[
            &["ZADD", a, "1", "x", "2", "y", "3", "z", "inf", "p"],
            &["ZADD", b, "10", "y", "20", "z", "30", "w", "-inf", "p"],
            &["ZADD", c, "0.5", "z", "7", "v"],
            &["SET", "str", "v"],
        ],
    );
    for op in ["ZUNION", "ZINTER"] {
        all(
            &mut d,
            &[
                &[op, "2", a, b],
                &[op, "2", a, b, "WITHSCORES"],
                &[op, "3", a, b, c, "WITHSCORES"],
                &[op, "2", a, b, "WEIGHTS", "2", "0.5", "WITHSCORES"],
                &[op, "2", a, b, "WEIGHTS", "0", "0", "WITHSCORES"],
                &[op, "2", a, b, "AGGREGATE", "MIN", "WITHSCORES"],
                &[op, "2", a, b, "AGGREGATE", "max", "WITHSCORES"],
                &[
                    op,
                    "2",
                    a,
                    b,
                    "WEIGHTS",
                    "1",
                    "-1",
                    "AGGREGATE",
                    "SUM",
                    "WITHSCORES",
                ],
                &[op, "2", a, "nokey", "WITHSCORES"],
                &[op, "2", a, b, "WEIGHTS", "1"],
                &[op, "2", a, b, "WEIGHTS", "1", "x"],
                &[op, "2", a, b, "AGGREGATE", "FOO"],
                &[op, "2", a, b, "AGGREGATE"],
                &[op, "2", a, b, "FOO"],
                &[op, "0", a],
                &[op, "-1", a],
                &[op, "x", a],
                &[op, "3", a, b],
                &[op, "2", a, "str"],
                &[op, "2", "str", a, "FOO"],
            ],
        );
    }
    let store_cases: Vec<Vec<&str>> = vec![
        vec!["ZUNIONSTORE", dst, "2", a, b],
        vec![
            "ZUNIONSTORE",
            dst,
            "2",
            a,
            b,
            "WEIGHTS",
            "2",
            "3",
            "AGGREGATE",
            "MAX",
        ],
        vec!["ZINTERSTORE", dst, "3", a, b, c],
        vec!["ZINTERSTORE", dst, "2", a, b, "AGGREGATE", "MIN"],
        vec!["ZDIFFSTORE", dst, "2", a, b],
        vec!["ZDIFFSTORE", dst, "2", b, a],
        vec!["ZDIFFSTORE", dst, "1", "nokey"],
        vec!["ZINTERSTORE", dst, "2", a, "nokey"],
        vec!["ZUNIONSTORE", dst, "2", a, b, "WITHSCORES"],
        vec!["ZDIFFSTORE", dst, "2", a, b, "WEIGHTS", "1", "2"],
        vec!["ZUNIONSTORE", dst, "0", a],
        vec!["ZUNIONSTORE", dst, "2", a, "str"],
        vec!["ZUNIONSTORE", "str", "1", a],
        vec!["ZRANGESTORE", dst, a, "0", "1"],
        vec![
            "ZRANGESTORE",
            dst,
            a,
            "(1",
            "inf",
            "BYSCORE",
            "REV",
            "LIMIT",
            "0",
            "2",
        ],
        vec!["ZRANGESTORE", dst, a, "[a", "+", "BYLEX"],
        vec!["ZRANGESTORE", dst, a, "5", "10"],
        vec!["ZRANGESTORE", dst, "nokey", "0", "-1"],
        vec!["ZRANGESTORE", dst, "str", "0", "-1"],
        vec!["ZRANGESTORE", dst, a, "0", "-1", "WITHSCORES"],
        vec!["ZRANGESTORE", dst, a, "0", "-1", "LIMIT", "0", "1"],
    ];
    for c in &store_cases {
        d.run(c);
        d.run(&["ZRANGE", dst, "0", "-1", "WITHSCORES"]);
        d.run(&["TYPE", dst]);
    }
    all(
        &mut d,
        &[
            &["ZDIFF", "2", a, b],
            &["ZDIFF", "3", a, b, c, "WITHSCORES"],
            &["ZDIFF", "1", a, "WITHSCORES"],
            &["ZDIFF", "2", a, b, "AGGREGATE", "MIN"],
            &["ZDIFF", "2", "nokey", a],
            &["ZDIFF", "0", a],
            &["ZINTERCARD", "2", a, b],
            &["ZINTERCARD", "2", a, b, "LIMIT", "1"],
            &["ZINTERCARD", "2", a, b, "LIMIT", "0"],
            &["ZINTERCARD", "2", a, b, "LIMIT", "-1"],
            &["ZINTERCARD", "2", a, b, "LIMIT"],
            &["ZINTERCARD", "2", a, b, "LIMIT", "x"],
            &["ZINTERCARD", "2", a, b, "WITHSCORES"],
            &["ZINTERCARD", "0", a],
            &["ZINTERCARD", "3", a, b],
            &["ZINTERCARD", "x", a],
            &["ZINTERCARD", "2", a, "str"],
            &["ZMPOP", "3", "nokey", a, b, "MAX", "COUNT", "2"],
            &["ZMPOP", "2", b, a, "MIN"],
            &["HELLO", "3"],
            &["ZUNION", "2", a, b, "WITHSCORES"],
            &["ZINTER", "2", a, b, "WITHSCORES"],
            &["ZDIFF", "2", a, b, "WITHSCORES"],
            &["ZMPOP", "2", a, b, "MIN", "COUNT", "2"],
        ],
    );
}

#[test]
fn zscan_matches_redis() {
    let mut d = Diff::new();
    d.run(&["SET", "str", "v"]);
    d.run(&[
        "ZADD", "small", "1", "a", "2.5", "b", "1e17", "c", "-0", "foo",
    ]);
    all(
        &mut d,
        &[
            &["ZSCAN", "small", "0"],
            &["ZSCAN", "small", "0", "MATCH", "f*"],
            &["ZSCAN", "small", "0", "COUNT", "1"],
            &["ZSCAN", "small", "0", "COUNT", "0"],
            &["ZSCAN", "small", "0", "TYPE", "zset"],
            &["ZSCAN", "small", "x"],
            &["ZSCAN", "small", "0", "MATCH"],
            &["ZSCAN", "nokey", "0"],
            &["ZSCAN", "str", "0"],
            &["ZSCAN", "str", "x"],
            &["ZSCAN", "str", "0", "COUNT", "0"],
        ],
    );
    for i in 0..300 {
        d.run(&["ZADD", "big", &format!("{}.25", i % 17), &format!("m{i}")]);
    }
    d.run_scan(&["ZSCAN", "big", "0"], 2);
    d.run_scan(&["ZSCAN", "big", "0", "COUNT", "7"], 2);
    d.run_scan(&["ZSCAN", "big", "0", "MATCH", "m1*", "COUNT", "50"], 2);
}

#[test]
fn wrong_arity_replies() {
    let mut d = Diff::new();
    for c in [
        &["ZADD", "k", "1"][..],
        &["ZINCRBY", "k", "1"],
        &["ZREM", "k"],
        &["ZCARD"],
        &["ZCOUNT", "k", "1"],
        &["ZSCORE", "k"],
        &["ZMSCORE", "k"],
        &["ZRANK", "k"],
        &["ZRANGESTORE", "d", "k", "0"],
        &["ZPOPMIN"],
        &["ZMPOP", "1", "k"],
        &["ZRANDMEMBER"],
        &["ZUNION", "1"],
        &["ZUNIONSTORE", "d", "1"],
        &["ZINTERCARD", "1"],
        &["ZDIFFSTORE", "d", "1"],
        &["ZSCAN", "k"],
        &["ZREMRANGEBYLEX", "k", "-"],
    ] {
        d.run(c);
    }
}

#[test]
fn randomized_multi_key_ops_across_shards() {
    let mut d = Diff::with_threads(4);
    let keys: Vec<String> = (0..4)
        .flat_map(|s| {
            [
                key_on(s % 2, &format!("r{s}")),
                key_on(1 - s % 2, &format!("q{s}")),
            ]
        })
        .collect();
    let mut r = Lcg(7);
    for _ in 0..1500 {
        let k = |r: &mut Lcg| keys[r.below(keys.len() as u64) as usize].as_str();
        let (a, b, c) = (k(&mut r), k(&mut r), k(&mut r));
        let m = format!("m{}", r.below(60));
        let s = (r.below(16) as f64 / 4.0 - 1.0).to_string();
        let w = (r.below(5) as i64 - 2).to_string();
        let cmd: Vec<&str> = match r.below(12) {
            0..=3 => vec!["ZADD", a, &s, &m],
            4 => vec!["ZUNIONSTORE", a, "2", b, c, "WEIGHTS", "1", &w],
            5 => vec!["ZINTERSTORE", a, "2", b, c, "AGGREGATE", "MAX"],
            6 => vec!["ZDIFFSTORE", a, "2", b, c],
            7 => vec!["ZRANGESTORE", a, b, "1", "-2"],
            8 => vec!["ZMPOP", "2", a, b, "MAX", "COUNT", "2"],
            9 => vec!["ZUNION", "3", a, b, c, "WITHSCORES"],
            10 => vec!["ZINTERCARD", "2", a, b],
            _ => vec!["ZRANGE", a, "0", "-1", "WITHSCORES"],
        };
        d.run(&cmd);
    }
    for k in &keys {
        d.run(&["ZRANGE", k, "0", "-1", "WITHSCORES"]);
        d.run(&["OBJECT", "ENCODING", k]);
    }
}

/// Redis stores a listpack score with `d2string`, which writes integers only within half the long
/// long range, and ZSCAN returns that text; ZRANGESTORE of more than `zset-max-listpack-entries`
/// elements builds a skiplist from the start, which keeps the sign of a `-0` score.
#[test]
fn zscan_score_text_and_zrangestore_encoding_match_redis() {
    let mut d = Diff::new();
    d.run(&[
        "ZADD",
        "z",
        "5e18",
        "a",
        "4.6e18",
        "b",
        "-5e18",
        "c",
        "4611686018427387904",
        "d",
    ]);
    d.run(&["ZSCAN", "z", "0"]);
    let mut add = vec!["ZADD".to_string(), "src".into()];
    for i in 1..=129 {
        add.push(i.to_string());
        add.push(format!("m{i}"));
    }
    add.extend(["-0".to_string(), "zero".into()]);
    d.run(&add.iter().map(String::as_str).collect::<Vec<_>>());
    for (range, rev) in [("0 -1", false), ("0 -1", true), ("0 9", false)] {
        let mut cmd = vec!["ZRANGESTORE", "dst", "src"];
        cmd.extend(range.split(' '));
        if rev {
            cmd.push("REV");
        }
        d.run(&cmd);
        d.run(&["ZSCORE", "dst", "zero"]);
        d.run(&["OBJECT", "ENCODING", "dst"]);
    }
}
