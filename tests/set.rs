//! The set family, reply for reply against redis-server: SADD, SREM, SCARD, SISMEMBER, SMISMEMBER,
//! SMEMBERS, SRANDMEMBER, SPOP, SMOVE, SINTER, SINTERCARD, SINTERSTORE, SUNION, SUNIONSTORE, SDIFF,
//! SDIFFSTORE and SSCAN, with their options and error replies, in RESP2 and RESP3.
//!
//! Order: an intset iterates ascending in both servers, so replies drawn from intsets are compared
//! byte for byte; a hashtable's order is Redis's hash order, which Strata does not reproduce, so
//! those replies are compared as sorted multisets (`run_unordered`, `run_scan`). Random replies
//! (SPOP, SRANDMEMBER) are compared where Redis's answer is determined (the whole set, an empty
//! reply, errors) and otherwise checked for their bounds and distribution on Strata alone.

use std::collections::{BTreeMap, BTreeSet};

use crate::harness::{key_in, Conn, Diff, Pair, Reply};

fn hello3(d: &mut Pair) {
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
}

fn members(c: &mut Conn, key: &str) -> BTreeSet<Vec<u8>> {
    strs(&c.call_decoded(&["SMEMBERS", key]))
}

fn strs(r: &Reply) -> BTreeSet<Vec<u8>> {
    r.as_array()
        .expect("an aggregate reply")
        .iter()
        .map(|m| m.as_bytes().expect("a bulk member").to_vec())
        .collect()
}

#[test]
fn single_key_commands_and_errors_match_redis() {
    let mut d = Diff::new();
    for proto in ["2", "3"] {
        if proto == "3" {
            hello3(&mut d);
        }
        d.run(&["FLUSHALL"]);
        d.run(&["SADD", "s", "3", "1", "2", "1"]);
        d.run(&["SADD", "s", "2", "3"]);
        d.run(&["SADD", "h", "a", "b", "c", "7"]);
        d.run(&["SET", "str", "x"]);
        d.run(&["SMEMBERS", "s"]);
        d.run_unordered(&["SMEMBERS", "h"]);
        d.run(&["SMEMBERS", "nokey"]);
        d.run(&["SMEMBERS", "str"]);
        for key in ["s", "h", "nokey", "str"] {
            d.run(&["SCARD", key]);
            d.run(&["SISMEMBER", key, "1"]);
            d.run(&["SISMEMBER", key, "a"]);
            d.run(&["SMISMEMBER", key, "1", "a", "x", "7", "01"]);
            d.run(&["TYPE", key]);
        }
        d.run(&["SADD", "str", "a"]);
        d.run(&["SREM", "str", "a"]);
        d.run(&["SREM", "nokey", "a"]);
        d.run(&["SREM", "s", "9", "a", "01"]);
        d.run(&["SREM", "s", "1", "1", "9"]);
        d.run(&["SMEMBERS", "s"]);
        // An emptied set is deleted.
        d.run(&["SREM", "s", "2", "3", "4"]);
        d.run(&["EXISTS", "s"]);
        d.run(&["SADD", "e", "only"]);
        d.run(&["SPOP", "e"]);
        d.run(&["EXISTS", "e"]);
        d.run(&["SADD", "e", "1", "2", "3"]);
        d.run(&["SPOP", "e", "3"]);
        d.run(&["EXISTS", "e"]);
        d.run(&["SADD", "e", "1", "2", "x"]);
        d.run_unordered(&["SPOP", "e", "10"]);
        d.run(&["EXISTS", "e"]);
        // Arity and argument errors.
        d.run(&["SADD", "s"]);
        d.run(&["SREM", "s"]);
        d.run(&["SCARD"]);
        d.run(&["SISMEMBER", "s"]);
        d.run(&["SMISMEMBER", "s"]);
        d.run(&["SMEMBERS", "s", "t"]);
        // SPOP and SRANDMEMBER: counts, errors, missing and wrong-type keys.
        d.run(&["SADD", "s", "5", "6", "7"]);
        for cmd in ["SPOP", "SRANDMEMBER"] {
            for key in ["s", "nokey", "str"] {
                for count in [
                    "0",
                    "-1",
                    "abc",
                    "-9223372036854775808",
                    "9223372036854775807",
                    "3",
                ] {
                    // Skip the random answers (compared by the distribution test instead).
                    let random = match cmd {
                        "SPOP" => !matches!(count, "0" | "-1" | "abc"),
                        _ => count == "-1",
                    };
                    if key == "s" && random {
                        continue;
                    }
                    d.run(&[cmd, key, count]);
                }
                d.run(&[cmd, key, "1", "2"]);
            }
            d.run(&[cmd, "nokey"]);
            d.run(&[cmd, "str"]);
        }
        d.run(&["SRANDMEMBER", "s", "3"]);
        d.run(&["SRANDMEMBER", "s", "100"]);
        d.run_unordered(&["SRANDMEMBER", "h", "100"]);
        d.run(&["SMEMBERS", "s"]);
        d.run(&["SPOP", "s", "3"]);
        d.run(&["EXISTS", "s"]);
    }
}

#[test]
fn sscan_matches_redis() {
    let mut d = Diff::new();
    d.run(&["SADD", "ints", "5", "-3", "100", "7"]);
    let many: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    let mut cmd = vec!["SADD".to_string(), "big".into()];
    cmd.extend(many.iter().cloned());
    d.run(&cmd);
    d.run(&["SET", "str", "x"]);
    // An intset comes back whole, in order, with cursor 0, whatever the cursor.
    d.run(&["SSCAN", "ints", "0"]);
    d.run(&["SSCAN", "ints", "123"]);
    d.run(&["SSCAN", "ints", "0", "MATCH", "1*"]);
    d.run(&["SSCAN", "ints", "0", "COUNT", "1", "MATCH", "-*"]);
    d.run(&["SSCAN", "ints", "-1"]);
    d.run(&["SSCAN", "ints", ""]);
    d.run_scan(&["SSCAN", "big", "0"], 2);
    d.run_scan(&["SSCAN", "big", "0", "COUNT", "7"], 2);
    d.run_scan(&["SSCAN", "big", "0", "MATCH", "m1*", "COUNT", "50"], 2);
    d.run_scan(&["SSCAN", "big", "0", "MATCH", "*", "COUNT", "1000"], 2);
    for bad in [
        &["SSCAN", "ints", "x"][..],
        &["SSCAN", "nokey", "x"],
        &["SSCAN", "ints", "18446744073709551616"],
        &["SSCAN", "ints", "12abc"],
        &["SSCAN", "ints", "0", "COUNT", "0"],
        &["SSCAN", "ints", "0", "COUNT", "-1"],
        &["SSCAN", "ints", "0", "COUNT", "abc"],
        &["SSCAN", "ints", "0", "TYPE", "set"],
        &["SSCAN", "ints", "0", "MATCH"],
        &["SSCAN", "nokey", "0", "COUNT", "0"],
        &["SSCAN", "nokey", "7"],
        &["SSCAN", "str", "0"],
        &["SSCAN", "ints"],
    ] {
        d.run(bad);
    }
}

#[test]
fn sscan_returns_every_member_while_the_set_grows() {
    let mut d = Diff::new();
    let c = &mut d.strata;
    let mut cmd = vec!["SADD".to_string(), "g".into()];
    cmd.extend((0..500).map(|i| format!("orig{i}")));
    c.call(&cmd);
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut added = 0;
    loop {
        let r = c.call_decoded(&["SSCAN", "g", &cursor, "COUNT", "20"]);
        let parts = r.as_array().expect("a scan reply");
        cursor = String::from_utf8(parts[0].as_bytes().unwrap().to_vec()).unwrap();
        seen.extend(strs(&parts[1]));
        if added < 5000 {
            let mut more = vec!["SADD".to_string(), "g".into()];
            more.extend((added..added + 500).map(|i| format!("new{i}")));
            c.call(&more);
            added += 500;
        }
        if cursor == "0" {
            break;
        }
    }
    for i in 0..500 {
        assert!(
            seen.contains(format!("orig{i}").as_bytes()),
            "orig{i} was never returned"
        );
    }
}

#[test]
fn encodings_convert_at_the_thresholds() {
    let mut d = Diff::new();
    let ints: Vec<String> = (0..512).map(|i| (i * 7 - 1000).to_string()).collect();
    let mut cmd = vec!["SADD".to_string(), "s".into()];
    cmd.extend(ints.iter().cloned());
    d.run(&cmd);
    d.run(&["OBJECT", "ENCODING", "s"]);
    d.run(&["SMEMBERS", "s"]);
    d.run(&["SADD", "s", "-1000"]);
    d.run(&["OBJECT", "ENCODING", "s"]);
    d.run(&["SADD", "s", "999999"]);
    d.run(&["OBJECT", "ENCODING", "s"]);
    d.run_unordered(&["SMEMBERS", "s"]);
    // Removing never converts back.
    d.run(&["SREM", "s", "999999"]);
    d.run(&["OBJECT", "ENCODING", "s"]);
    // Non-canonical integers and wide values.
    d.run(&[
        "SADD",
        "w",
        "1",
        "-32769",
        "2147483648",
        "-9223372036854775808",
    ]);
    d.run(&["OBJECT", "ENCODING", "w"]);
    d.run(&["SMEMBERS", "w"]);
    d.run(&["SISMEMBER", "w", "2147483648"]);
    d.run(&["SISMEMBER", "w", "+1"]);
    d.run(&["SADD", "w", "01"]);
    d.run(&["OBJECT", "ENCODING", "w"]);
    d.run(&["SADD", "x", "abc"]);
    d.run(&["OBJECT", "ENCODING", "x"]);
    // CONFIG SET moves the threshold; the old alias name works too.
    d.run(&["CONFIG", "SET", "set-max-intset-entries", "4"]);
    d.run(&["SADD", "c", "1", "2", "3", "4"]);
    d.run(&["OBJECT", "ENCODING", "c"]);
    d.run(&["SADD", "c", "5"]);
    d.run(&["OBJECT", "ENCODING", "c"]);
    // Results built by *STORE follow the threshold too.
    d.run(&["SADD", "a", "1", "2", "3", "4", "5", "6"]);
    d.run(&["CONFIG", "SET", "set-max-intset-entries", "10"]);
    d.run(&["SINTERSTORE", "d", "a", "a"]);
    d.run(&["OBJECT", "ENCODING", "d"]);
    d.run(&["SMEMBERS", "d"]);
    d.run(&["CONFIG", "SET", "set-max-intset-entries", "3"]);
    d.run(&["SUNIONSTORE", "d", "a"]);
    d.run(&["OBJECT", "ENCODING", "d"]);
    d.run(&["SDIFFSTORE", "d", "a", "c"]);
    d.run(&["OBJECT", "ENCODING", "d"]);
    d.run(&["CONFIG", "SET", "set-max-intset-entries", "0"]);
    d.run(&["SADD", "z", "1"]);
    d.run(&["OBJECT", "ENCODING", "z"]);
    d.run(&["CONFIG", "SET", "set-max-intset-entries", "512"]);
}

/// The multi-key commands with their keys on four different shards, plus errors.
#[test]
fn multi_key_commands_across_shards() {
    let mut d = Diff::with_threads(4);
    let k: Vec<String> = (0..4).map(|q| key_in(q, "k")).collect();
    let (a, b, c, dst) = (k[0].as_str(), k[1].as_str(), k[2].as_str(), k[3].as_str());
    let str_key = key_in(2, "str");
    let s = str_key.as_str();
    for proto in ["2", "3"] {
        if proto == "3" {
            hello3(&mut d);
        }
        d.run(&["FLUSHALL"]);
        d.run(&["SADD", a, "1", "2", "3", "4", "5"]);
        d.run(&["SADD", b, "3", "4", "5", "6"]);
        d.run(&["SADD", c, "4", "5", "x", "y"]);
        d.run(&["SET", s, "v"]);
        // Intset results: ordered exactly.
        d.run(&["SINTER", a, b]);
        d.run(&["SUNION", a, b]);
        d.run(&["SDIFF", a, b]);
        d.run(&["SDIFF", b, a, "nokey"]);
        d.run(&["SINTER", a, a]);
        d.run(&["SDIFF", a, a]);
        d.run_unordered(&["SINTER", c, a, b]);
        d.run_unordered(&["SUNION", a, b, c, "nokey"]);
        d.run_unordered(&["SDIFF", c, a]);
        d.run(&["SINTER", a, "nokey"]);
        d.run(&["SUNION", "nokey"]);
        d.run(&["SDIFF", "nokey", a]);
        for cmd in ["SINTER", "SUNION", "SDIFF"] {
            d.run(&[cmd, a, s]);
            d.run(&[cmd, "nokey", s]);
            d.run(&[cmd, s, "nokey"]);
            d.run(&[cmd]);
        }
        d.run(&["SINTERCARD", "2", a, b]);
        d.run(&["SINTERCARD", "3", a, b, c]);
        d.run(&["SINTERCARD", "2", a, b, "LIMIT", "2"]);
        d.run(&["SINTERCARD", "2", a, b, "LIMIT", "0"]);
        d.run(&["SINTERCARD", "2", a, b, "limit", "1", "LIMIT", "100"]);
        d.run(&["SINTERCARD", "1", "nokey"]);
        d.run(&["SINTERCARD", "2", "nokey", s]);
        for bad in [
            &["SINTERCARD", "0", a][..],
            &["SINTERCARD", "-1", a],
            &["SINTERCARD", "x", a],
            &["SINTERCARD", "3", a, b],
            &["SINTERCARD", "1", a, "LIMIT"],
            &["SINTERCARD", "1", a, "LIMIT", "-1"],
            &["SINTERCARD", "1", a, "LIMIT", "x"],
            &["SINTERCARD", "1", a, "FOO", "1"],
            &["SINTERCARD", "1"],
        ] {
            d.run(bad);
        }
        // *STORE: replace whatever the destination holds; an empty result deletes it.
        d.run(&["SINTERSTORE", dst, a, b]);
        d.run(&["SMEMBERS", dst]);
        d.run(&["SET", dst, "string"]);
        d.run(&["SUNIONSTORE", dst, a, b]);
        d.run(&["SMEMBERS", dst]);
        d.run(&["TYPE", dst]);
        d.run(&["SDIFFSTORE", dst, a, b]);
        d.run(&["SMEMBERS", dst]);
        d.run(&["EXPIRE", dst, "100"]);
        d.run(&["SUNIONSTORE", dst, c]);
        d.run(&["TTL", dst]);
        d.run_unordered(&["SMEMBERS", dst]);
        d.run(&["SINTERSTORE", dst, a, "nokey"]);
        d.run(&["EXISTS", dst]);
        d.run(&["SADD", dst, "z"]);
        d.run(&["SDIFFSTORE", dst, a, a]);
        d.run(&["EXISTS", dst]);
        d.run(&["SADD", dst, "z"]);
        d.run(&["SUNIONSTORE", dst, "nokey"]);
        d.run(&["EXISTS", dst]);
        d.run(&["SADD", dst, "z"]);
        for cmd in ["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"] {
            d.run(&[cmd, dst, a, s]);
            d.run(&[cmd, dst, "nokey", s]);
            d.run(&[cmd, dst]);
            d.run(&["SMEMBERS", dst]);
        }
        // The store's source may be its destination.
        d.run(&["SUNIONSTORE", a, a, b]);
        d.run(&["SMEMBERS", a]);
        // SMOVE between shards.
        d.run(&["SMOVE", a, b, "1"]);
        d.run(&["SMOVE", a, b, "1"]);
        d.run(&["SMOVE", a, "nokey2", "2"]);
        d.run(&["SMEMBERS", "nokey2"]);
        d.run(&["SMOVE", a, c, "3"]);
        d.run_unordered(&["SMEMBERS", c]);
        d.run(&["SMOVE", "nokey", s, "1"]);
        d.run(&["SMOVE", a, s, "4"]);
        d.run(&["SMOVE", a, s, "404"]);
        d.run(&["SMOVE", s, a, "4"]);
        d.run(&["SMOVE", a, a, "4"]);
        d.run(&["SMOVE", a, a, "404"]);
        d.run(&["SMEMBERS", a]);
        d.run(&["SMOVE", a, b, "4"]);
        d.run(&["SMOVE", a, b, "5"]);
        d.run(&["SMOVE", a, b, "6"]);
        d.run(&["SMOVE", a, b, "x"]);
        d.run(&["EXISTS", a]);
        d.run(&["SMEMBERS", b]);
        d.run(&["SMOVE", a, b]);
    }
}

/// Sets far above the slice size, across shards: the coordinator reads them in slices.
#[test]
fn big_sets_across_shards() {
    let mut d = Diff::with_threads(4);
    let (a, b, c) = (key_in(0, "big"), key_in(1, "big"), key_in(3, "big"));
    let dst = key_in(2, "bigdst");
    let mut ca = vec!["SADD".to_string(), a.clone()];
    ca.extend((0..5000).map(|i| format!("e{i}")));
    let mut cb = vec!["SADD".to_string(), b.clone()];
    cb.extend((0..5000).filter(|i| i % 3 == 0).map(|i| format!("e{i}")));
    let mut cc = vec!["SADD".to_string(), c.clone()];
    cc.extend((2000..2600).map(|i| i.to_string()));
    d.run(&ca);
    d.run(&cb);
    d.run(&cc);
    d.run(&["OBJECT", "ENCODING", &c]);
    d.run_unordered(&["SINTER", &a, &b]);
    d.run(&["SINTERCARD", "2", &a, &b]);
    d.run(&["SINTERCARD", "2", &a, &b, "LIMIT", "1500"]);
    d.run(&["SINTERSTORE", &dst, &a, &b]);
    d.run(&["SCARD", &dst]);
    d.run(&["SUNIONSTORE", &dst, &a, &b, &c]);
    d.run(&["SCARD", &dst]);
    d.run_unordered(&["SDIFF", &a, &b]);
    d.run(&["SDIFFSTORE", &dst, &a, &b]);
    d.run(&["SCARD", &dst]);
    d.run_unordered(&["SMEMBERS", &dst]);
    d.run_unordered(&["SUNION", &c, &b]);
}

/// Random operation sequences over a few keys on different shards, diffed after every step.
#[test]
fn random_operations_match_redis() {
    let mut d = Diff::with_threads(4);
    let keys: Vec<String> = (0..4)
        .flat_map(|q| [key_in(q, "r"), key_in(q, "q")])
        .collect();
    let mut seed: u64 = 0x5EED_1234;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let member = |r: u64| -> String {
        match r % 4 {
            0 => format!("s{}", r % 17),
            _ => format!("{}", (r % 40) as i64 - 10),
        }
    };
    d.run(&["CONFIG", "SET", "set-max-intset-entries", "16"]);
    for step in 0..1500 {
        let k1 = keys[rand(keys.len() as u64) as usize].as_str();
        let k2 = keys[rand(keys.len() as u64) as usize].as_str();
        let k3 = keys[rand(keys.len() as u64) as usize].as_str();
        let (m1, m2) = (member(rand(1000)), member(rand(1000)));
        match rand(12) {
            0..=2 => {
                d.run(&["SADD", k1, &m1, &m2]);
            }
            3 => {
                d.run(&["SREM", k1, &m1, &m2]);
            }
            4 => {
                d.run(&["SMOVE", k1, k2, &m1]);
            }
            5 => {
                d.run(&["SINTERSTORE", k1, k2, k3]);
            }
            6 => {
                d.run(&["SUNIONSTORE", k1, k2, k3]);
            }
            7 => {
                d.run(&["SDIFFSTORE", k1, k2, k3]);
            }
            8 => {
                d.run(&["SMISMEMBER", k1, &m1, &m2]);
                d.run(&["SCARD", k1]);
            }
            9 => {
                d.run(&["SINTERCARD", "3", k1, k2, k3, "LIMIT", "3"]);
            }
            10 => {
                d.run_unordered(&["SUNION", k1, k2]);
                d.run_unordered(&["SDIFF", k1, k2]);
                d.run_unordered(&["SINTER", k1, k2]);
            }
            _ => {
                d.run(&["OBJECT", "ENCODING", k1]);
            }
        }
        if step % 50 == 0 {
            for k in &keys {
                d.run_unordered(&["SMEMBERS", k]);
            }
        }
    }
    for k in &keys {
        d.run_unordered(&["SMEMBERS", k]);
        d.run(&["OBJECT", "ENCODING", k]);
    }
}

/// SRANDMEMBER and SPOP pick members in Redis's cases and roughly uniformly (bounds, not timing).
#[test]
fn random_picks_are_members_and_roughly_uniform() {
    let mut d = Diff::new();
    let c = &mut d.strata;
    for (key, items) in [
        ("ints", (0..10).map(|i| i.to_string()).collect::<Vec<_>>()),
        ("strs", (0..10).map(|i| format!("m{i}")).collect()),
    ] {
        let mut cmd = vec!["SADD".to_string(), key.to_string()];
        cmd.extend(items.iter().cloned());
        c.call(&cmd);
        let all: BTreeSet<Vec<u8>> = items.iter().map(|s| s.as_bytes().to_vec()).collect();
        // Negative count: repeats, every member about 1/10 of the picks.
        let r = c.call_decoded(&["SRANDMEMBER", key, "-5000"]);
        let picks = r.as_array().unwrap();
        assert_eq!(picks.len(), 5000);
        let mut hist: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
        for p in picks {
            *hist.entry(p.as_bytes().unwrap().to_vec()).or_default() += 1;
        }
        assert_eq!(hist.keys().cloned().collect::<BTreeSet<_>>(), all);
        for (m, n) in &hist {
            assert!(
                (350..=650).contains(n),
                "{key}: {m:?} picked {n} times of 5000"
            );
        }
        // Positive counts: distinct members, in both strategies (close to the size, and small).
        for count in [1usize, 2, 4, 9] {
            let got = strs(&c.call_decoded(&["SRANDMEMBER", key, &count.to_string()]));
            assert_eq!(got.len(), count);
            assert!(got.is_subset(&all));
        }
        // Many single picks cover the set (a read: the set is unchanged).
        let mut seen = BTreeSet::new();
        for _ in 0..300 {
            seen.insert(
                c.call_decoded(&["SRANDMEMBER", key])
                    .as_bytes()
                    .unwrap()
                    .to_vec(),
            );
        }
        assert_eq!(seen, all);
        assert_eq!(members(c, key), all);
        // SPOP with a count in each strategy: distinct, removed, the rest stays.
        let mut left = all.clone();
        for count in ["1", "2", "6"] {
            let got = strs(&c.call_decoded(&["SPOP", key, count]));
            assert_eq!(got.len(), count.parse::<usize>().unwrap());
            assert!(got.is_subset(&left));
            left.retain(|m| !got.contains(m));
            assert_eq!(members(c, key), left);
        }
        let last = c.call_decoded(&["SPOP", key]);
        assert!(left.contains(last.as_bytes().unwrap()));
        assert_eq!(
            c.call_decoded(&["EXISTS", key]).as_int(),
            Some(0),
            "an emptied set is deleted"
        );
    }
    // SPOP's first pick over many fresh sets: every member comes up.
    let mut firsts = BTreeSet::new();
    for _ in 0..200 {
        c.call(&["SADD", "p", "a", "b", "c", "d"]);
        firsts.insert(c.call_decoded(&["SPOP", "p"]).as_bytes().unwrap().to_vec());
        c.call(&["DEL", "p"]);
    }
    assert_eq!(firsts.len(), 4);
}

/// SRANDMEMBER, ZRANDMEMBER and HRANDFIELD at the edges of the count's range: Redis's errors and
/// replies where Redis gives them; a repeated-picks count too large for any reply (Redis runs out
/// of memory building it) is refused, never allocated, and the server keeps serving.
#[test]
fn random_picks_with_huge_counts() {
    let mut d = Diff::new();
    d.run(&["SADD", "s", "1", "2", "3"]);
    d.run(&["SADD", "t", "a", "b", "c"]);
    d.run(&["ZADD", "z", "1", "a", "2", "b"]);
    d.run(&["HSET", "h", "a", "1", "b", "2"]);
    d.run(&["SET", "str", "x"]);
    for proto in [2, 3] {
        if proto == 3 {
            hello3(&mut d);
        }
        // (Never a huge negative count on an existing key here: Redis would try to answer it.)
        for count in [
            "-9223372036854775808",
            "9223372036854775807",
            "9223372036854775808",
            "4611686018427387904",
            "4611686018427387903",
            "0",
            "-0",
            "x",
        ] {
            for key in ["s", "t", "nokey", "str"] {
                d.run_unordered(&["SRANDMEMBER", key, count]);
            }
            for key in ["z", "nokey", "str"] {
                d.run(&["ZRANDMEMBER", key, count]);
                d.run(&["ZRANDMEMBER", key, count, "WITHSCORES"]);
            }
            for key in ["h", "nokey", "str"] {
                d.run(&["HRANDFIELD", key, count]);
                d.run(&["HRANDFIELD", key, count, "WITHVALUES"]);
            }
        }
        // Past ±2^62 with scores or values: out of range before any reply is built.
        for count in ["-4611686018427387904", "-9223372036854775807"] {
            for key in ["z", "nokey", "str"] {
                d.run(&["ZRANDMEMBER", key, count, "WITHSCORES"]);
            }
            for key in ["h", "nokey", "str"] {
                d.run(&["HRANDFIELD", key, count, "WITHVALUES"]);
            }
        }
        // Missing keys answer an empty array whatever the negative count.
        for count in ["-9223372036854775807", "-4611686018427387903"] {
            d.run(&["SRANDMEMBER", "nokey", count]);
            d.run(&["ZRANDMEMBER", "nokey", count, "WITHSCORES"]);
            d.run(&["HRANDFIELD", "nokey", count, "WITHVALUES"]);
        }
    }
    let mut c = d.strata_server.conn();
    let out_of_range = b"-ERR value is out of range\r\n".to_vec();
    for count in ["-9223372036854775807", "-4611686018427387903", "-16777217"] {
        for args in [
            vec!["SRANDMEMBER", "s", count],
            vec!["SRANDMEMBER", "t", count],
            vec!["ZRANDMEMBER", "z", count],
            vec!["ZRANDMEMBER", "z", count, "WITHSCORES"],
            vec!["HRANDFIELD", "h", count],
            vec!["HRANDFIELD", "h", count, "WITHVALUES"],
        ] {
            assert_eq!(c.call(&args), out_of_range, "{args:?}");
        }
    }
    // The largest allowed count is answered in full.
    let r = c.call_decoded(&["SRANDMEMBER", "s", "-100000"]);
    assert_eq!(r.as_array().map(<[Reply]>::len), Some(100_000));
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
}
