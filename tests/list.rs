//! The list family, reply for reply against redis-server: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP
//! (with COUNT, in RESP2 and RESP3), LLEN, LINDEX, LINSERT, LPOS, LRANGE, LREM, LSET, LTRIM, LMOVE,
//! RPOPLPUSH and LMPOP, with every option and error reply, WRONGTYPE, the deletion of emptied
//! lists, randomized operation sequences under small `list-max-listpack-size` values (so lists span
//! many nodes), and the multi-key commands with keys on different shards.

use crate::harness::{key_on, pttl_near, Conn, Diff};

fn hello(d: &mut Diff, proto: &str) {
    d.run_matching(&["HELLO", proto], |r| r.get("proto").is_some());
}

#[test]
fn push_and_pop_with_counts_in_both_protocols() {
    let mut d = Diff::new();
    for proto in ["2", "3"] {
        hello(&mut d, proto);
        d.run(&["DEL", "l"]);
        d.run(&["LPOP", "l"]);
        d.run(&["RPOP", "l"]);
        d.run(&["LPOP", "l", "0"]);
        d.run(&["LPOP", "l", "2"]);
        d.run(&["RPOP", "l", "2"]);
        d.run(&["LPUSHX", "l", "a"]);
        d.run(&["RPUSHX", "l", "a", "b"]);
        d.run(&["EXISTS", "l"]);
        d.run(&["LPUSH", "l", "a", "b", "c"]);
        d.run(&["RPUSH", "l", "1", "-2", "300", "x"]);
        d.run(&["LPUSHX", "l", "p", "q"]);
        d.run(&["RPUSHX", "l", "r"]);
        d.run(&["LRANGE", "l", "0", "-1"]);
        d.run(&["LPOP", "l"]);
        d.run(&["RPOP", "l"]);
        d.run(&["LPOP", "l", "0"]);
        d.run(&["LPOP", "l", "1"]);
        d.run(&["RPOP", "l", "3"]);
        d.run(&["LPOP", "l", "100"]);
        d.run(&["EXISTS", "l"]);
        d.run(&["RPUSH", "l", "only"]);
        d.run(&["RPOP", "l"]);
        d.run(&["EXISTS", "l"]);
        d.run(&["RPUSH", "l", "a"]);
        d.run(&["RPOP", "l", "9223372036854775807"]);
        for bad in ["-1", "x", "1.5", "", "9223372036854775808"] {
            d.run(&["LPOP", "l", bad]);
            d.run(&["RPOP", "nokey", bad]);
        }
        d.run(&["LPOP", "l", "1", "2"]);
        d.run(&["RPOP", "l", "1", "2"]);
        d.run(&["LPUSH", "l"]);
        d.run(&["RPUSHX", "l"]);
    }
}

#[test]
fn llen_lindex_and_lrange_over_every_index() {
    let mut d = Diff::new();
    d.run(&["LLEN", "l"]);
    d.run(&["LINDEX", "l", "0"]);
    d.run(&["LINDEX", "l", "x"]);
    d.run(&["LRANGE", "l", "0", "-1"]);
    d.run(&["LRANGE", "l", "x", "1"]);
    d.run(&[
        "RPUSH",
        "l",
        "a",
        "1",
        "b",
        "-5",
        "9999999999",
        "c",
        "",
        "d",
        "e",
    ]);
    d.run(&["LLEN", "l"]);
    for i in -12..12 {
        d.run(&["LINDEX", "l", &i.to_string()]);
    }
    for i in ["9223372036854775807", "-9223372036854775808", "x", "1.0"] {
        d.run(&["LINDEX", "l", i]);
    }
    let edges = [
        "-100", "-10", "-9", "-3", "-1", "0", "1", "4", "8", "9", "100",
    ];
    for a in edges {
        for b in edges {
            d.run(&["LRANGE", "l", a, b]);
        }
    }
    for (a, b) in [
        ("-9223372036854775808", "9223372036854775807"),
        ("9223372036854775807", "-9223372036854775808"),
        ("0", "x"),
        ("y", "0"),
    ] {
        d.run(&["LRANGE", "l", a, b]);
        d.run(&["LRANGE", "nokey", a, b]);
    }
    d.run(&["LINDEX", "l"]);
    d.run(&["LRANGE", "l", "0"]);
    d.run(&["LLEN", "l", "x"]);
    d.run(&["OBJECT", "ENCODING", "l"]);
}

#[test]
fn lpos_options_and_errors() {
    let mut d = Diff::new();
    d.run(&["LPOS", "l", "a"]);
    d.run(&["LPOS", "l", "a", "COUNT", "0"]);
    d.run(&["LPOS", "l", "a", "RANK", "0"]);
    d.run(&[
        "RPUSH", "l", "a", "b", "c", "1", "a", "b", "01", "1", "a", "c",
    ]);
    for elem in ["a", "b", "c", "1", "01", "z"] {
        d.run(&["LPOS", "l", elem]);
        for rank in ["1", "2", "3", "-1", "-2", "-4", "-9223372036854775808"] {
            d.run(&["LPOS", "l", elem, "RANK", rank]);
            for count in ["0", "1", "2", "5"] {
                d.run(&["LPOS", "l", elem, "RANK", rank, "COUNT", count]);
                for maxlen in ["0", "1", "3", "100"] {
                    d.run(&[
                        "LPOS", "l", elem, "RANK", rank, "COUNT", count, "MAXLEN", maxlen,
                    ]);
                }
            }
        }
        d.run(&["LPOS", "l", elem, "MAXLEN", "2"]);
        d.run(&["LPOS", "l", elem, "count", "0", "rank", "1", "maxlen", "0"]);
    }
    for bad in [
        &["LPOS", "l", "a", "RANK", "0"][..],
        &["LPOS", "l", "a", "RANK", "x"],
        &["LPOS", "l", "a", "COUNT", "-1"],
        &["LPOS", "l", "a", "COUNT", "x"],
        &["LPOS", "l", "a", "MAXLEN", "-1"],
        &["LPOS", "l", "a", "MAXLEN", "x"],
        &["LPOS", "l", "a", "RANK"],
        &["LPOS", "l", "a", "COUNT"],
        &["LPOS", "l", "a", "FOO", "1"],
        &["LPOS", "l", "a", "RANK", "1", "COUNT"],
        &["LPOS", "nokey", "a", "RANK", "0"],
        &["LPOS", "nokey", "a", "COUNT", "-1"],
        &["LPOS", "l"],
    ] {
        d.run(bad);
    }
    hello(&mut d, "3");
    d.run(&["LPOS", "nokey", "a"]);
    d.run(&["LPOS", "nokey", "a", "COUNT", "1"]);
    d.run(&["LPOS", "l", "z"]);
}

#[test]
fn linsert_lset_lrem_ltrim_and_emptied_lists() {
    let mut d = Diff::new();
    // LINSERT
    d.run(&["LINSERT", "l", "BEFORE", "a", "x"]);
    d.run(&["LINSERT", "l", "MIDDLE", "a", "x"]);
    d.run(&["EXISTS", "l"]);
    d.run(&["RPUSH", "l", "a", "b", "1", "c"]);
    d.run(&["LINSERT", "l", "BEFORE", "a", "x"]);
    d.run(&["LINSERT", "l", "after", "c", "y"]);
    d.run(&["LINSERT", "l", "AFTER", "1", "2"]);
    d.run(&["LINSERT", "l", "before", "01", "z"]);
    d.run(&["LINSERT", "l", "BEFORE", "zz", "z"]);
    d.run(&["LINSERT", "l", "MIDDLE", "zz", "z"]);
    d.run(&["LRANGE", "l", "0", "-1"]);
    d.run(&["LINSERT", "l", "BEFORE", "a"]);
    // LSET
    d.run(&["LSET", "nokey", "0", "v"]);
    d.run(&["LSET", "nokey", "x", "v"]);
    for i in ["0", "-1", "3", "-8", "7", "8", "-9", "100"] {
        d.run(&["LSET", "l", i, &format!("set{i}")]);
    }
    d.run(&["LSET", "l", "x", "v"]);
    d.run(&["LSET", "l", "2", "12345"]);
    d.run(&["LSET", "l", "4", &"long".repeat(100)]);
    d.run(&["LRANGE", "l", "0", "-1"]);
    // LREM
    d.run(&["DEL", "r"]);
    d.run(&["LREM", "r", "0", "a"]);
    d.run(&["RPUSH", "r", "a", "b", "a", "1", "a", "b", "1", "a"]);
    d.run(&["LREM", "r", "x", "a"]);
    d.run(&["LREM", "r", "1", "a"]);
    d.run(&["LREM", "r", "-2", "a"]);
    d.run(&["LRANGE", "r", "0", "-1"]);
    d.run(&["LREM", "r", "0", "1"]);
    d.run(&["LREM", "r", "0", "01"]);
    d.run(&["LREM", "r", "-9223372036854775808", "b"]);
    d.run(&["LREM", "r", "9223372036854775807", "a"]);
    d.run(&["EXISTS", "r"]);
    // LTRIM
    for (a, b) in [
        ("0", "-1"),
        ("1", "-2"),
        ("-3", "-1"),
        ("2", "1"),
        ("100", "200"),
        ("-100", "100"),
        ("0", "0"),
    ] {
        d.run(&["DEL", "t"]);
        d.run(&["RPUSH", "t", "a", "b", "c", "d", "e", "f"]);
        d.run(&["LTRIM", "t", a, b]);
        d.run(&["LRANGE", "t", "0", "-1"]);
        d.run(&["EXISTS", "t"]);
    }
    d.run(&["LTRIM", "nokey", "0", "1"]);
    d.run(&["LTRIM", "t", "x", "1"]);
    d.run(&["LTRIM", "t", "0", "y"]);
    d.run(&["LTRIM", "t", "0"]);
}

#[test]
fn wrongtype_for_every_command() {
    let mut d = Diff::new();
    d.run(&["SET", "s", "x"]);
    d.run(&["RPUSH", "l", "a"]);
    for cmd in [
        &["LPUSH", "s", "a"][..],
        &["RPUSH", "s", "a"],
        &["LPUSHX", "s", "a"],
        &["RPUSHX", "s", "a"],
        &["LPOP", "s"],
        &["RPOP", "s"],
        &["LPOP", "s", "0"],
        &["LPOP", "s", "2"],
        &["LPOP", "s", "x"],
        &["LLEN", "s"],
        &["LINDEX", "s", "0"],
        &["LINDEX", "s", "x"],
        &["LINSERT", "s", "BEFORE", "a", "b"],
        &["LINSERT", "s", "MIDDLE", "a", "b"],
        &["LPOS", "s", "a"],
        &["LPOS", "s", "a", "RANK", "0"],
        &["LRANGE", "s", "0", "-1"],
        &["LRANGE", "s", "x", "-1"],
        &["LREM", "s", "0", "a"],
        &["LREM", "s", "x", "a"],
        &["LSET", "s", "0", "a"],
        &["LSET", "s", "x", "a"],
        &["LTRIM", "s", "0", "1"],
        &["LTRIM", "s", "x", "1"],
        &["LMOVE", "s", "l", "LEFT", "LEFT"],
        &["LMOVE", "l", "s", "LEFT", "LEFT"],
        &["LMOVE", "nokey", "s", "LEFT", "LEFT"],
        &["LMOVE", "s", "s", "LEFT", "RIGHT"],
        &["RPOPLPUSH", "s", "l"],
        &["RPOPLPUSH", "l", "s"],
        &["LMPOP", "1", "s", "LEFT"],
        &["LMPOP", "2", "nokey", "s", "LEFT"],
        &["LMPOP", "2", "l", "s", "LEFT"],
    ] {
        d.run(cmd);
    }
    d.run(&["LRANGE", "l", "0", "-1"]);
    d.run(&["GET", "s"]);
}

#[test]
fn lmove_rpoplpush_and_lmpop_on_one_shard() {
    let mut d = Diff::new();
    let (a, b) = ("{t}a", "{t}b");
    d.run(&["LMOVE", a, b, "LEFT", "RIGHT"]);
    d.run(&["RPOPLPUSH", a, b]);
    d.run(&["RPUSH", a, "1", "2", "3"]);
    for (from, to) in [
        ("LEFT", "LEFT"),
        ("LEFT", "RIGHT"),
        ("RIGHT", "LEFT"),
        ("right", "right"),
    ] {
        d.run(&["LMOVE", a, b, from, to]);
        d.run(&["LRANGE", b, "0", "-1"]);
    }
    d.run(&["LMOVE", a, b, "UP", "LEFT"]);
    d.run(&["LMOVE", a, b, "LEFT", "DOWN"]);
    d.run(&["LMOVE", "{t}none", b, "UP", "LEFT"]);
    d.run(&["RPOPLPUSH", b, a]);
    d.run(&["LRANGE", a, "0", "-1"]);
    d.run(&["EXISTS", a, b]);
    d.run(&["LMPOP", "2", a, b, "LEFT"]);
    d.run(&["LMPOP", "2", "{t}none", b, "RIGHT", "COUNT", "10"]);
    d.run(&["LMPOP", "2", a, b, "LEFT"]);
    d.run(&["EXISTS", a, b]);
}

#[test]
fn lmove_onto_itself_rotates_and_keeps_the_ttl() {
    let mut d = Diff::new();
    d.run(&["RPUSH", "r", "a", "b", "c"]);
    d.run(&["LMOVE", "r", "r", "LEFT", "RIGHT"]);
    d.run(&["LRANGE", "r", "0", "-1"]);
    d.run(&["LMOVE", "r", "r", "RIGHT", "LEFT"]);
    d.run(&["RPOPLPUSH", "r", "r"]);
    d.run(&["LMOVE", "r", "r", "LEFT", "LEFT"]);
    d.run(&["LRANGE", "r", "0", "-1"]);
    d.run(&["DEL", "r"]);
    d.run(&["RPUSH", "r", "only"]);
    d.run(&["PEXPIRE", "r", "100000"]);
    d.run(&["LMOVE", "r", "r", "RIGHT", "LEFT"]);
    d.run(&["LRANGE", "r", "0", "-1"]);
    pttl_near(&mut d, "r", 100_000);
    d.run(&["LMOVE", "nokey", "nokey", "LEFT", "LEFT"]);
}

#[test]
fn lmpop_parsing_and_replies_in_both_protocols() {
    let mut d = Diff::new();
    for proto in ["2", "3"] {
        hello(&mut d, proto);
        d.run(&["DEL", "a", "b"]);
        d.run(&["LMPOP", "1", "a", "LEFT"]);
        d.run(&["RPUSH", "b", "1", "2", "3", "4"]);
        d.run(&["LMPOP", "2", "a", "b", "LEFT"]);
        d.run(&["LMPOP", "2", "a", "b", "right", "count", "2"]);
        d.run(&["LMPOP", "2", "a", "b", "LEFT", "COUNT", "100"]);
        d.run(&["EXISTS", "b"]);
        d.run(&["RPUSH", "a", "x"]);
        for bad in [
            &["LMPOP", "0", "a", "LEFT"][..],
            &["LMPOP", "-1", "a", "LEFT"],
            &["LMPOP", "x", "a", "LEFT"],
            &["LMPOP", "2", "a", "LEFT"],
            &["LMPOP", "100", "a", "LEFT"],
            &["LMPOP", "9223372036854775807", "a", "LEFT"],
            &["LMPOP", "1", "a", "MIDDLE"],
            &["LMPOP", "1", "a", "LEFT", "COUNT", "0"],
            &["LMPOP", "1", "a", "LEFT", "COUNT", "-1"],
            &["LMPOP", "1", "a", "LEFT", "COUNT", "x"],
            &["LMPOP", "1", "a", "LEFT", "COUNT"],
            &["LMPOP", "1", "a", "LEFT", "COUNT", "1", "COUNT", "2"],
            &["LMPOP", "1", "a", "LEFT", "FOO"],
            &["LMPOP", "1", "a"],
        ] {
            d.run(bad);
        }
        d.run(&["LRANGE", "a", "0", "-1"]);
    }
}

#[test]
fn multi_key_commands_across_shards() {
    let mut d = Diff::with_threads(4);
    let (a, b, c) = (key_on(0, "src"), key_on(1, "dst"), key_on(1, "third"));
    let (a, b, c) = (a.as_str(), b.as_str(), c.as_str());
    d.run(&["RPUSH", a, "1", "2", "3", "4", "5"]);
    d.run(&["LMOVE", a, b, "LEFT", "RIGHT"]);
    d.run(&["LMOVE", a, b, "RIGHT", "LEFT"]);
    d.run(&["RPOPLPUSH", a, b]);
    d.run(&["LRANGE", a, "0", "-1"]);
    d.run(&["LRANGE", b, "0", "-1"]);
    d.run(&["SET", c, "str"]);
    d.run(&["LMOVE", a, c, "LEFT", "LEFT"]);
    d.run(&["LMOVE", c, a, "LEFT", "LEFT"]);
    d.run(&["LRANGE", a, "0", "-1"]);
    d.run(&["LMPOP", "3", "nokey", a, b, "LEFT", "COUNT", "5"]);
    d.run(&["EXISTS", a]);
    d.run(&["LMPOP", "3", "nokey", a, b, "RIGHT", "COUNT", "2"]);
    d.run(&["LMPOP", "3", "nokey", c, b, "RIGHT"]);
    d.run(&["LMPOP", "3", "nokey", b, c, "RIGHT", "COUNT", "9"]);
    d.run(&["EXISTS", a, b]);
    d.run(&["LMPOP", "2", a, b, "LEFT"]);
    d.run(&["RPOPLPUSH", a, b]);
    // Moving the last element deletes the source and creates the destination.
    d.run(&["RPUSH", a, "last"]);
    d.run(&["PEXPIRE", a, "100000"]);
    d.run(&["RPOPLPUSH", a, b]);
    d.run(&["EXISTS", a, b]);
    d.run(&["TTL", b]);
    d.run(&["LRANGE", b, "0", "-1"]);
}

/// A small deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Random operation sequences over a few keys (on both shards), diffed reply for reply, under
/// listpack sizes that make even short lists span many nodes.
#[test]
fn random_operations_match_redis() {
    let mut d = Diff::new();
    let keys = ["x", "y", "foo", "bar"];
    let values: Vec<String> = ["a", "b", "c", "1", "-1", "127", "128", "70000", "01", ""]
        .iter()
        .map(|s| s.to_string())
        .chain(["m".repeat(70), "n".repeat(5000)])
        .collect();
    for (round, size) in ["3", "1", "-1", "-2", "7"].iter().enumerate() {
        d.run(&["CONFIG", "SET", "list-max-listpack-size", size]);
        d.run(&["FLUSHALL"]);
        let mut rng = Rng(0x2545_F491_4F6C_DD1D + round as u64);
        for _ in 0..1500 {
            let k = keys[rng.below(2)];
            let k2 = keys[rng.below(keys.len())];
            let v = values[rng.below(values.len())].as_str();
            let i = (rng.below(30) as i64 - 15).to_string();
            let j = (rng.below(30) as i64 - 15).to_string();
            let n = rng.below(4).to_string();
            let end = ["LEFT", "RIGHT"][rng.below(2)];
            let end2 = ["LEFT", "RIGHT"][rng.below(2)];
            let cmd: Vec<&str> = match rng.below(16) {
                0 | 1 => vec!["LPUSH", k, v, v],
                2 | 3 => vec!["RPUSH", k, v],
                4 => vec!["LPOP", k],
                5 => vec!["RPOP", k, &n],
                6 => vec!["LINDEX", k, &i],
                7 => vec!["LRANGE", k, &i, &j],
                8 => vec!["LSET", k, &i, v],
                9 => vec!["LINSERT", k, ["BEFORE", "AFTER"][rng.below(2)], v, v],
                10 => vec!["LREM", k, &i, v],
                11 if rng.below(4) == 0 => vec!["LTRIM", k, &i, &j],
                12 => vec![
                    "LPOS",
                    k,
                    v,
                    "RANK",
                    if i == "0" { "1" } else { &i },
                    "COUNT",
                    &n,
                ],
                13 if k == k2 || ["x", "y"].contains(&k2) => vec!["LMOVE", k, k2, end, end2],
                14 => vec!["LMPOP", "2", k, k2, end, "COUNT", "2"],
                _ => vec!["LLEN", k],
            };
            d.run(&cmd);
        }
        for k in keys {
            d.run(&["LRANGE", k, "0", "-1"]);
        }
    }
}

/// Lists used as queues and deques at the default node size (8 KiB), where a node keeps room before
/// its entries as well as after them: LPUSH + RPOP, RPUSH + LPOP, pushes alternating between the
/// ends, counted pops, and edits inside nodes that have room at their head, over lists of
/// thousands of elements (several nodes), checked element by element against redis-server.
#[test]
fn queues_and_deques_at_both_ends_match_redis() {
    let mut d = Diff::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for pattern in 0..4 {
        d.run(&["DEL", "q"]);
        for step in 0..2500 {
            let v = format!("job-{pattern}-{step:05}-{}", "x".repeat(rng.below(24)));
            let cmd: Vec<String> = match (pattern, step % 5) {
                // Grow to ~1,500 elements first, then hold the length steady.
                (0, _) if step < 1500 || step % 2 == 0 => vec!["LPUSH".into(), "q".into(), v],
                (0, _) => vec!["RPOP".into(), "q".into()],
                (1, _) if step < 1500 || step % 2 == 0 => vec!["RPUSH".into(), "q".into(), v],
                (1, _) => vec!["LPOP".into(), "q".into()],
                (2, _) if step % 2 == 0 => vec!["LPUSH".into(), "q".into(), v.clone(), v],
                (2, _) => vec!["RPUSH".into(), "q".into(), v],
                (_, 0) => vec!["LPOP".into(), "q".into(), rng.below(6).to_string()],
                (_, 1) => vec!["RPOP".into(), "q".into(), rng.below(3).to_string()],
                (_, 2) => vec!["LPUSH".into(), "q".into(), v.clone(), v.clone(), v],
                _ => vec!["LPUSH".into(), "q".into(), v],
            };
            d.run(&cmd);
            if step % 97 == 0 {
                let i = (rng.below(3000) as i64 - 1500).to_string();
                d.run(&["LINDEX", "q", &i]);
                d.run(&["LSET", "q", &i, "edited"]);
                d.run(&["LINSERT", "q", "BEFORE", "edited", "inserted"]);
                d.run(&["LLEN", "q"]);
            }
            if step % 499 == 0 {
                d.run(&["LRANGE", "q", "0", "-1"]);
            }
        }
        d.run(&["LREM", "q", "0", "inserted"]);
        d.run(&["LTRIM", "q", "10", "-10"]);
        d.run(&["LRANGE", "q", "0", "-1"]);
    }
}

#[test]
fn long_lists_and_big_elements() {
    let mut d = Diff::new();
    let mut args: Vec<String> = vec!["RPUSH".into(), "big".into()];
    args.extend((0..3000).map(|i| format!("element-{i:04}")));
    d.run(&args);
    let big = "z".repeat(100_000);
    d.run(&["LPUSH", "big", &big]);
    d.run(&["RPUSH", "big", &big]);
    d.run(&["LLEN", "big"]);
    for i in [
        "0", "1", "1500", "2999", "3000", "3001", "-1", "-2", "-1600",
    ] {
        d.run(&["LINDEX", "big", i]);
    }
    d.run(&["LRANGE", "big", "1490", "1510"]);
    d.run(&["LRANGE", "big", "-5", "-1"]);
    d.run(&["LSET", "big", "1500", &big]);
    d.run(&["LINSERT", "big", "AFTER", "element-2000", &big]);
    d.run(&["LPOS", "big", &big, "COUNT", "0"]);
    d.run(&["LREM", "big", "2", &big]);
    d.run(&["LPOS", "big", &big, "RANK", "-1"]);
    d.run(&["LTRIM", "big", "100", "-100"]);
    d.run(&["LLEN", "big"]);
    d.run(&["LRANGE", "big", "0", "3"]);
    d.run(&["LPOP", "big", "1000"]);
    d.run(&["RPOP", "big", "10"]);
    d.run(&["LLEN", "big"]);
    d.run(&["OBJECT", "ENCODING", "big"]);
}

/// DEBUG QUICKLIST-PACKED-THRESHOLD gives elements from that size on a node of their own ("plain"
/// nodes); every command must read and write them as any other element.
#[test]
fn plain_nodes_for_large_elements() {
    let mut d = Diff::with_config(&["--enable-debug-command", "yes"]);
    for bad in ["x", "5gb", "4gb", "-1"] {
        d.run(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", bad]);
    }
    let big = "d".repeat(50);
    for threshold in ["1b", "5b", "4095mb"] {
        d.run(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", threshold]);
        d.run(&["DEL", "l", "m"]);
        d.run(&["RPUSH", "l", "aa", "bb", "cc", "dd", "ee", "9"]);
        d.run(&["LSET", "l", "2", &big]);
        d.run(&["LSET", "l", "0", "xxxxxxxxxxx"]);
        d.run(&["LINSERT", "l", "BEFORE", "9", "8"]);
        d.run(&["LINSERT", "l", "AFTER", &big, &big]);
        d.run(&["LPUSH", "l", &big, "z"]);
        d.run(&["LRANGE", "l", "0", "-1"]);
        d.run(&["LPOS", "l", &big, "COUNT", "0"]);
        d.run(&["LSET", "l", "3", "small"]);
        d.run(&["LREM", "l", "-1", &big]);
        d.run(&["LMOVE", "l", "m", "RIGHT", "LEFT"]);
        d.run(&["LMOVE", "l", "m", "LEFT", "RIGHT"]);
        d.run(&["LTRIM", "l", "1", "-1"]);
        d.run(&["LRANGE", "l", "0", "-1"]);
        d.run(&["LRANGE", "m", "0", "-1"]);
        d.run(&["LPOP", "l", "10"]);
    }
    d.run(&["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"]);
}

/// Random moves between lists on different shards (4 threads), in RESP3, diffed reply for reply:
/// LMOVE, RPOPLPUSH and LMPOP stay atomic and keep every element exactly once.
#[test]
fn random_moves_across_shards_match_redis() {
    let mut d = Diff::with_threads(4);
    hello(&mut d, "3");
    d.run(&["CONFIG", "SET", "list-max-listpack-size", "2"]);
    let keys: Vec<String> = vec![
        key_on(0, "a"),
        key_on(1, "b"),
        key_on(0, "c"),
        key_on(1, "d"),
    ];
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for i in 0..40 {
        let k = &keys[i % keys.len()];
        d.run(&["RPUSH", k, &format!("v{i}"), &i.to_string()]);
    }
    for _ in 0..1500 {
        let a = keys[rng.below(keys.len())].as_str();
        let b = keys[rng.below(keys.len())].as_str();
        let c = keys[rng.below(keys.len())].as_str();
        let from = ["LEFT", "RIGHT"][rng.below(2)];
        let to = ["LEFT", "RIGHT"][rng.below(2)];
        let n = (1 + rng.below(3)).to_string();
        let cmd: Vec<&str> = match rng.below(5) {
            0 | 1 => vec!["LMOVE", a, b, from, to],
            2 => vec!["RPOPLPUSH", a, b],
            3 => vec!["LMPOP", "3", a, b, c, from, "COUNT", &n],
            _ => vec!["RPUSH", a, from, to],
        };
        d.run(&cmd);
    }
    for k in &keys {
        d.run(&["LRANGE", k, "0", "-1"]);
    }
}

/// `list-compress-depth` 1 and 2: lists long enough to have compressed inner nodes answer every
/// command exactly as Redis's do (reads and writes in the middle, at the ends, across nodes).
#[test]
fn compressed_lists_match_redis() {
    let mut d = Diff::new();
    let values: Vec<String> = (0..40)
        .map(|i| format!("element-{}", i % 7))
        .chain(["17".into(), "-3".into(), "x".repeat(300)])
        .collect();
    for (round, (depth, size)) in [("1", "-1"), ("2", "5"), ("1", "-2"), ("2", "-1")]
        .into_iter()
        .enumerate()
    {
        d.run(&["FLUSHALL"]);
        d.run(&["CONFIG", "SET", "list-compress-depth", depth]);
        d.run(&["CONFIG", "SET", "list-max-listpack-size", size]);
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 + round as u64);
        for k in ["x", "y"] {
            let mut args = vec!["RPUSH".to_string(), k.to_string()];
            args.extend((0..2000).map(|i| values[i % values.len()].clone()));
            d.run(&args);
        }
        for _ in 0..1500 {
            let k = ["x", "y"][rng.below(2)];
            let v = values[rng.below(values.len())].as_str();
            let i = (rng.below(4000) as i64 - 2000).to_string();
            let j = (rng.below(4000) as i64 - 2000).to_string();
            let n = rng.below(4).to_string();
            let cmd: Vec<&str> = match rng.below(14) {
                0 => vec!["LPUSH", k, v],
                1 => vec!["RPUSH", k, v, v],
                2 => vec!["LPOP", k, &n],
                3 => vec!["RPOP", k],
                4 | 5 => vec!["LINDEX", k, &i],
                6 => vec!["LRANGE", k, &i, &j],
                7 => vec!["LSET", k, &i, v],
                8 => vec!["LINSERT", k, ["BEFORE", "AFTER"][rng.below(2)], v, v],
                9 if rng.below(5) == 0 => vec!["LREM", k, &n, v],
                10 => vec!["LPOS", k, v, "RANK", "-2", "COUNT", &n],
                11 if rng.below(20) == 0 => vec!["LTRIM", k, &i, "-1"],
                12 => vec!["LMOVE", k, ["x", "y"][rng.below(2)], "LEFT", "RIGHT"],
                _ => vec!["LLEN", k],
            };
            d.run(&cmd);
        }
        for k in ["x", "y"] {
            d.run(&["LRANGE", k, "0", "-1"]);
            d.run(&["OBJECT", "ENCODING", k]);
        }
    }
    d.run(&["CONFIG", "SET", "list-max-listpack-size", "-2"]);
    // Compressible data takes less memory when compressed (Strata's MEMORY USAGE of a list counts
    // its node buffers); a list keeps the depth it was created with.
    let c = &mut d.strata;
    let usage = |c: &mut Conn, depth: &str, key: &str| {
        c.call(&["CONFIG", "SET", "list-compress-depth", depth]);
        let mut args = vec!["RPUSH".to_string(), key.to_string()];
        args.extend((0..20_000).map(|i| format!("element-{}", i % 100)));
        c.call(&args);
        c.call_decoded(&["MEMORY", "USAGE", key])
            .as_int()
            .expect("an integer")
    };
    let raw = usage(c, "0", "raw");
    let zipped = usage(c, "1", "zipped");
    assert!(zipped * 2 < raw, "compressed {zipped} vs raw {raw}");
    c.call(&["CONFIG", "SET", "list-compress-depth", "0"]);
    c.call(&["RPUSH", "zipped", "more"]);
    assert!(
        c.call_decoded(&["MEMORY", "USAGE", "zipped"])
            .as_int()
            .unwrap()
            * 2
            < raw,
        "the list kept its depth"
    );
    assert_eq!(
        c.call_decoded(&["LINDEX", "zipped", "10001"]).as_bytes(),
        Some(&b"element-1"[..])
    );
}
