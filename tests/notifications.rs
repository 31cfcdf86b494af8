//! Keyspace and keyevent notifications (`notify-keyspace-events`) against redis-server: a
//! subscriber on `__key*__:*` on each server receives exactly the same messages, in the same
//! order, for a script of commands of every family (keys of multi-key commands on different
//! shards, `--threads 4`), under several flag sets; lazy and active expiry; and CONFIG's parsing,
//! canonical text and error.

use std::thread::sleep;
use std::time::Duration;

use crate::harness::{hash_slot, Conn, Diff, Pair};

/// A channel the pattern matches, published after each command: everything before it on the
/// subscriber is that command's events.
const SYNC: &str = "__keysync__:1";

/// `n` keys named `prefix:<i>` in different quarters of the slot space (different shards with
/// four threads).
fn spread(prefix: &str, n: usize) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for i in 0.. {
        let k = format!("{prefix}:{i}");
        let quarter = hash_slot(&k) / 4096;
        if keys.iter().all(|o| hash_slot(o) / 4096 != quarter) {
            keys.push(k);
            if keys.len() == n {
                break;
            }
        }
    }
    keys
}

/// Reads one server's messages up to the sync message.
fn until_sync(c: &mut Conn) -> Vec<String> {
    let mut got = Vec::new();
    loop {
        let frame = String::from_utf8_lossy(&c.read_reply()).into_owned();
        if frame.contains(SYNC) {
            return got;
        }
        got.push(frame);
    }
}

struct Watched {
    d: Diff,
    sub: Pair,
}

impl Watched {
    fn new(flags: &str) -> Watched {
        let mut d = Diff::with_threads(4);
        d.run(&["CONFIG", "SET", "notify-keyspace-events", flags]);
        let mut sub = d.new_conns();
        sub.run(&["PSUBSCRIBE", "__key*__:*"]);
        Watched { d, sub }
    }

    /// Runs `cmd` on both servers (same reply) and asserts both subscribers got the same events;
    /// returns them.
    fn run(&mut self, cmd: &[&str]) -> Vec<String> {
        if cmd[0] == "SPOP" {
            // Which members a set yields first is the server's own order.
            self.d.run_unordered(cmd);
        } else {
            self.d.run(cmd);
        }
        self.sync(cmd)
    }

    fn sync(&mut self, what: &[&str]) -> Vec<String> {
        self.d.run(&["PUBLISH", SYNC, "x"]);
        let expected = until_sync(&mut self.sub.redis);
        let actual = until_sync(&mut self.sub.strata);
        assert_eq!(
            actual, expected,
            "events of {what:?} differ (left strata, right redis)"
        );
        expected
    }
}

/// A script touching every family, with multi-key commands across shards.
fn script() -> Vec<Vec<String>> {
    let k = spread("k", 4);
    let (a, b, c, d) = (&k[0], &k[1], &k[2], &k[3]);
    let mut s: Vec<Vec<&str>> = vec![
        // strings
        vec!["SET", a, "v"],
        vec!["SET", a, "v2", "EX", "100"],
        vec!["SET", a, "v3", "KEEPTTL"],
        vec!["SET", a, "x", "NX"],
        vec!["SET", a, "x", "XX", "GET"],
        vec!["SETNX", b, "1"],
        vec!["SETNX", b, "2"],
        vec!["SETEX", b, "100", "v"],
        vec!["PSETEX", b, "100000", "v"],
        vec!["GETSET", b, "w"],
        vec!["APPEND", b, "tail"],
        vec!["APPEND", c, "fresh"],
        vec!["SETRANGE", c, "1", "ab"],
        vec!["SETRANGE", c, "0", ""],
        vec!["SETRANGE", d, "3", "xy"],
        vec!["SETRANGE", "nokey", "3", ""],
        vec!["INCR", "n"],
        vec!["INCRBY", "n", "5"],
        vec!["DECR", "n"],
        vec!["DECRBY", "n", "2"],
        vec!["INCRBY", a, "1"],
        vec!["INCRBYFLOAT", "f", "1.5"],
        vec!["MSET", "{m}a", "1", "{m}b", "2"],
        vec!["MSETNX", "{m}c", "1", "{m}d", "2"],
        vec!["MSETNX", "{m}c", "1", "{m}e", "2"],
        // Across shards, in the arguments' order (each shard writes its share).
        vec!["MSETNX", d, "1", b, "2", c, "3"],
        vec!["MSET", c, "1", a, "2", d, "3", b, "4"],
        vec!["UNLINK", b, "nokey", d],
        vec!["DEL", c, b, a, d],
        vec!["EXISTS", a, b, c, d],
        vec!["GETEX", a, "EX", "100"],
        vec!["GETEX", a, "PERSIST"],
        vec!["GETEX", a, "PERSIST"],
        vec!["GETEX", a],
        vec!["GETEX", a, "PXAT", "1"],
        vec!["GETDEL", b],
        vec!["GETDEL", b],
        vec!["DEL", c, "nokey"],
        vec!["UNLINK", d],
        vec!["DEL", "{m}a", "{m}b", "{m}c"],
        // generic
        vec!["SET", a, "1"],
        vec!["EXPIRE", a, "100"],
        vec!["PEXPIRE", a, "100000", "NX"],
        vec!["PERSIST", a],
        vec!["PERSIST", a],
        vec!["RENAME", a, b],
        vec!["SET", a, "2"],
        vec!["RENAME", b, a],
        vec!["RENAMENX", a, b],
        vec!["SET", c, "3"],
        vec!["RENAMENX", b, c],
        vec!["RENAME", c, c],
        vec!["COPY", b, d],
        vec!["COPY", b, d],
        vec!["COPY", b, d, "REPLACE"],
        vec!["COPY", b, d, "DB", "1"],
        vec!["MOVE", d, "1"],
        vec!["MOVE", b, "1"],
        vec!["EXPIREAT", c, "1"],
        vec!["EXPIRE", "nokey", "10"],
        vec!["FLUSHALL"],
        // lists
        vec!["LPUSH", a, "x", "y", "z"],
        vec!["RPUSH", a, "w"],
        vec!["LPUSHX", a, "v"],
        vec!["RPUSHX", b, "v"],
        vec!["LPOP", a],
        vec!["RPOP", a, "2"],
        vec!["LPOP", a, "0"],
        vec!["LINSERT", a, "BEFORE", "y", "q"],
        vec!["LINSERT", a, "AFTER", "nothere", "q"],
        vec!["LSET", a, "0", "r"],
        vec!["LREM", a, "0", "r"],
        vec!["LREM", a, "0", "nothere"],
        vec!["RPUSH", a, "1", "2", "3", "4"],
        vec!["LTRIM", a, "0", "2"],
        vec!["LMOVE", a, b, "LEFT", "RIGHT"],
        vec!["LMOVE", a, a, "LEFT", "RIGHT"],
        vec!["RPOPLPUSH", a, b],
        vec!["RPOPLPUSH", a, b],
        vec!["LMOVE", b, c, "RIGHT", "LEFT"],
        vec!["LMPOP", "2", "nokey", b, "LEFT", "COUNT", "10"],
        vec!["RPUSH", c, "1", "2"],
        vec!["BLPOP", c, "0"],
        vec!["BRPOP", c, "0"],
        vec!["RPUSH", c, "1", "2"],
        vec!["LTRIM", c, "5", "6"],
        vec!["RPUSH", c, "3", "1", "2"],
        vec!["SORT", c, "STORE", d],
        vec!["SORT", "nokey", "STORE", d],
        vec!["FLUSHALL"],
        // hashes
        vec!["HSET", a, "f1", "1", "f2", "2"],
        vec!["HSET", a, "f1", "1"],
        vec!["HSETNX", a, "f1", "x"],
        vec!["HSETNX", a, "f3", "3"],
        vec!["HMSET", a, "f4", "4"],
        vec!["HDEL", a, "f1"],
        vec!["HDEL", a, "nothere"],
        vec!["HINCRBY", a, "n", "2"],
        vec!["HINCRBYFLOAT", a, "fl", "1.5"],
        vec!["HDEL", a, "f2", "f3", "f4", "n", "fl"],
        vec!["HINCRBY", b, "n", "1"],
        vec!["FLUSHALL"],
        // sets
        vec!["SADD", a, "m1", "m2", "m3"],
        vec!["SADD", a, "m1"],
        vec!["SREM", a, "m1"],
        vec!["SREM", a, "nothere"],
        vec!["SADD", b, "m2", "x"],
        vec!["SINTERSTORE", c, a, b],
        vec!["SUNIONSTORE", d, a, b],
        vec!["SDIFFSTORE", c, a, a],
        vec!["SDIFFSTORE", c, a, a],
        vec!["SMOVE", a, b, "m2"],
        vec!["SMOVE", a, b, "m3"],
        vec!["SMOVE", a, b, "m3"],
        vec!["SMOVE", b, b, "x"],
        vec!["SPOP", b, "0"],
        vec!["SPOP", b, "10"],
        vec!["SADD", a, "only"],
        vec!["SPOP", a],
        vec!["FLUSHALL"],
        // sorted sets
        vec!["ZADD", a, "1", "m1", "2", "m2", "3", "m3", "4", "m4"],
        vec!["ZADD", a, "1", "m1"],
        vec!["ZADD", a, "INCR", "5", "m1"],
        vec!["ZADD", a, "INCR", "0", "m1"],
        vec!["ZINCRBY", a, "1", "m2"],
        vec!["ZADD", a, "XX", "CH", "3", "new"],
        vec!["ZADD", a, "NX", "7", "m5", "8", "m6"],
        vec!["ZREM", a, "m1"],
        vec!["ZREM", a, "nothere"],
        vec!["ZREMRANGEBYSCORE", a, "100", "200"],
        vec!["ZREMRANGEBYSCORE", a, "0", "3"],
        vec!["ZREMRANGEBYRANK", a, "0", "0"],
        vec!["ZADD", b, "0", "a", "0", "b", "0", "c"],
        vec!["ZREMRANGEBYLEX", b, "[a", "[a"],
        vec!["ZUNIONSTORE", c, "2", a, b],
        vec!["ZINTERSTORE", d, "2", a, b],
        vec!["ZDIFFSTORE", d, "2", a, b],
        vec!["ZRANGESTORE", d, c, "0", "1"],
        vec!["ZRANGESTORE", d, c, "5", "6"],
        vec!["ZPOPMIN", a],
        vec!["ZPOPMAX", a, "5"],
        vec!["ZPOPMIN", b, "0"],
        vec!["BZPOPMIN", b, "0"],
        vec!["BZPOPMAX", b, "0"],
        vec!["ZMPOP", "2", "nokey", c, "MIN", "COUNT", "10"],
        vec!["FLUSHALL"],
        // bitmaps, HyperLogLog, geo
        vec!["SETBIT", a, "7", "1"],
        vec!["SETBIT", a, "7", "1"],
        vec!["SETBIT", a, "100", "0"],
        vec!["BITFIELD", a, "SET", "u8", "0", "1"],
        vec!["BITFIELD", a, "SET", "u8", "0", "1"],
        vec!["BITFIELD", a, "GET", "u8", "0"],
        vec!["BITFIELD", b, "INCRBY", "u8", "0", "1"],
        vec!["BITOP", "OR", c, a, b],
        vec!["BITOP", "OR", c, "nokey"],
        vec!["PFADD", d, "x", "y"],
        vec!["PFADD", d, "x"],
        vec!["PFADD", "hll2", "z"],
        vec!["PFMERGE", d, "hll2"],
        vec!["PFMERGE", "hll3"],
        vec!["FLUSHALL"],
        vec!["GEOADD", a, "13.361389", "38.115556", "Palermo"],
        vec!["GEOADD", a, "15.087269", "37.502669", "Catania"],
        vec![
            "GEOSEARCHSTORE",
            b,
            a,
            "FROMLONLAT",
            "15",
            "37",
            "BYRADIUS",
            "200",
            "km",
            "ASC",
        ],
        vec![
            "GEOSEARCHSTORE",
            b,
            a,
            "FROMLONLAT",
            "0",
            "0",
            "BYRADIUS",
            "1",
            "km",
            "ASC",
        ],
        vec!["GEORADIUS", a, "15", "37", "200", "km", "STORE", c],
        vec!["FLUSHALL"],
    ];
    s.push(vec!["SELECT", "0"]);
    s.into_iter()
        .map(|c| c.into_iter().map(String::from).collect())
        .collect()
}

fn run_script(flags: &str) {
    let mut w = Watched::new(flags);
    for cmd in script() {
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
        w.run(&cmd);
    }
}

#[test]
fn every_family_emits_redis_events_in_order_with_all_classes() {
    run_script("KEA");
}

#[test]
fn new_key_events_and_narrow_flag_sets_match_redis() {
    for flags in [
        "KEAn", "Kl", "Eg", "Ex", "KEn", "K$", "Eh", "Ks", "Ez", "gE",
    ] {
        run_script(flags);
    }
}

#[test]
fn key_misses_match_redis() {
    let far = spread("far", 4);
    let mut w = Watched::new("KEm");
    for cmd in [
        &["GET", "nokey"][..],
        &["EXISTS", "nokey"],
        &["TYPE", "nokey"],
        &["STRLEN", "nokey"],
        &["HGET", "nokey", "f"],
        &["LRANGE", "nokey", "0", "-1"],
        &["SMEMBERS", "nokey"],
        &["ZSCORE", "nokey", "m"],
        &["TTL", "nokey"],
        &["SET", "k", "v"],
        &["GET", "k"],
        &["MGET", "{x}a", "{x}b"],
        // OBJECT counts the miss but raises no event; writes neither.
        &["OBJECT", "ENCODING", "nokey"],
        &["OBJECT", "IDLETIME", "nokey"],
        &["ZADD", "z1", "1", "m"],
        &["ZINCRBY", "z2", "1", "m"],
        &["LPUSH", "l1", "x"],
        // Set operations read their sources (the STORE forms too), and stop at the first source
        // of another type.
        &["SADD", "{x}s", "1"],
        &["SUNIONSTORE", "{x}d", "{x}s", "{x}m1", "{x}m2"],
        &["SDIFFSTORE", "{x}d", "{x}m1", "{x}s"],
        &["SINTERSTORE", "{x}d", "{x}s", "{x}m1"],
        // Sources on several shards: their misses in the arguments' order.
        &["SUNION", &far[3], &far[1], &far[0], &far[2]],
        &["PFCOUNT", &far[2], &far[0], &far[3]],
        &["SINTERCARD", "2", "{x}m1", "{x}s"],
        &["SET", "{x}str", "v"],
        &["SINTER", "{x}str", "{x}m1"],
        &["SUNION", "{x}s", "{x}str", "{x}m2"],
        &["SDIFFSTORE", "{x}d", "{x}m1", "{x}str", "{x}m2"],
        &["SMOVE", "{x}m1", "{x}s", "1"],
    ] {
        w.run(cmd);
    }
}

/// A multi-key read stops at its first key of a wrong type, as Redis's does, also when its keys
/// live on four shards that look theirs up at once: the keys after it raise no "keymiss" and
/// count no keyspace hit or miss, and the keys before it do.
#[test]
fn a_wrong_type_across_shards_stops_the_lookups_where_redis_does() {
    let far = spread("far", 4);
    let far: Vec<&str> = far.iter().map(String::as_str).collect();
    let mut w = Watched::new("KEm");
    let stats = |c: &mut Conn| {
        (
            c.info_u64("stats", "keyspace_hits"),
            c.info_u64("stats", "keyspace_misses"),
        )
    };
    // far[1] a string, far[3] a set (a sorted set's stand-in for ZUNION and the like, a wrong
    // type for PFCOUNT and BITOP), the others missing; the orders put each type first, in the
    // middle and last.
    w.run(&["SET", far[1], "v"]);
    w.run(&["SADD", far[3], "1"]);
    let orders = [
        [far[0], far[1], far[2], far[3]],
        [far[2], far[3], far[1], far[0]],
        [far[1], far[0], far[3], far[2]],
        [far[3], far[0], far[2], far[1]],
        // A key named twice: each lookup of it misses, up to the wrong type.
        [far[0], far[2], far[0], far[1]],
    ];
    for keys in orders {
        let mut cmds: Vec<Vec<&str>> = Vec::new();
        for name in ["SUNION", "SINTER", "SDIFF"] {
            cmds.push([&[name][..], &keys].concat());
        }
        cmds.push([&["SUNIONSTORE", "dst"][..], &keys].concat());
        cmds.push([&["SINTERCARD", "4"][..], &keys].concat());
        for name in ["ZUNION", "ZINTER", "ZDIFF"] {
            cmds.push([&[name, "4"][..], &keys].concat());
        }
        cmds.push([&["ZINTERSTORE", "dst", "4"][..], &keys].concat());
        cmds.push([&["ZINTERCARD", "4"][..], &keys].concat());
        cmds.push([&["PFCOUNT"][..], &keys].concat());
        cmds.push([&["PFMERGE", "dst"][..], &keys].concat());
        cmds.push([&["BITOP", "OR", "dst"][..], &keys].concat());
        for cmd in cmds {
            w.run(&cmd);
            // Both servers counted the same lookups so far (they started empty and ran the
            // same commands).
            w.d.both(stats);
        }
    }
}

#[test]
fn events_reach_subscribers_only_with_k_or_e() {
    let mut w = Watched::new("A");
    assert!(w.run(&["SET", "a", "1"]).is_empty());
    w.d.run(&["CONFIG", "SET", "notify-keyspace-events", "K$"]);
    assert_eq!(w.run(&["SET", "a", "1"]).len(), 1);
    w.d.run(&["CONFIG", "SET", "notify-keyspace-events", ""]);
    assert!(w.run(&["SET", "a", "1"]).is_empty());
}

#[test]
fn lazy_and_active_expiry_emit_expired() {
    let mut w = Watched::new("KEA");
    // Lazy: the key is past its deadline when it is next touched (or found by active expiry first;
    // either way exactly one "expired" pair, in the same order).
    w.run(&["SET", "lazy", "v", "PX", "1"]);
    sleep(Duration::from_millis(20));
    let got = w.run(&["GET", "lazy"]);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got[0].contains("expired"), "{got:?}");
    // SET over an expired key: "expired", then the write.
    w.run(&["SET", "over", "v", "PX", "1"]);
    sleep(Duration::from_millis(20));
    w.run(&["SET", "over", "w"]);
    // Active: nobody touches the key; both servers expire it in the background.
    w.run(&["SET", "active", "v", "PX", "50"]);
    sleep(Duration::from_millis(400));
    let got = w.sync(&["<active expiry>"]);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(got
        .iter()
        .all(|m| m.contains("expired") || m.contains("active")));
}

#[test]
fn resp3_subscriber_gets_the_same_pushes() {
    let mut w = Watched::new("KEA");
    w.sub.run(&["HELLO", "3"]);
    w.run(&["SET", "{x}a", "1"]);
    w.run(&["LPUSH", "{x}l", "1"]);
    w.run(&["DEL", "{x}a", "{x}l"]);
}

#[test]
fn config_parsing_canonical_text_and_errors_match_redis() {
    let mut d = Diff::new();
    for flags in [
        "KEA",
        "nK",
        "Eg$lshzxetdmn",
        "A",
        "",
        "gKE",
        "Kl",
        "AKEn",
        "m",
        "EKg$",
        "xeKE",
        "tdK",
    ] {
        d.run(&["CONFIG", "SET", "notify-keyspace-events", flags]);
        d.run(&["CONFIG", "GET", "notify-keyspace-events"]);
    }
    for bad in ["Kq", "a", "KE ", "K,E", "1"] {
        d.run(&["CONFIG", "SET", "notify-keyspace-events", bad]);
        d.run(&["CONFIG", "GET", "notify-keyspace-events"]);
    }
}
