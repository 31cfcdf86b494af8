//! The generic (keyspace) family, reply for reply against redis-server: DEL, UNLINK, EXISTS, TYPE, TOUCH,
//! RENAME, RENAMENX, COPY, MOVE, KEYS, SCAN, RANDOMKEY, the EXPIRE and TTL families, PERSIST and OBJECT,
//! with every option and error reply.
//!
//! Strata runs with two threads, so keys in the lower half of the slot space live on one shard and keys in
//! the upper half on the other; the cross-shard tests pick their keys accordingly (and check that they do).
//! Relative TTLs are compared with a tolerance, KEYS and SCAN as sets, everything else byte for byte. The
//! SCAN-while-writing and active-expiry tests check strata's guarantees directly.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::harness::{hash_slot, key_on, now_ms, pttl_near, shard_of, Conn, Diff, Reply, Server};

#[test]
fn cross_shard_test_keys_are_on_different_shards() {
    assert_eq!(hash_slot("123456789"), 0x31C3);
    assert_eq!((shard_of("foo"), shard_of("bar")), (1, 0));
    assert_eq!(shard_of(&key_on(0, "x")), 0);
    assert_eq!(shard_of(&key_on(1, "x")), 1);
}

#[test]
fn del_unlink_exists_touch_and_type_across_shards() {
    let mut d = Diff::new();
    let (a, b) = (key_on(0, "k"), key_on(1, "k"));
    let (a, b) = (a.as_str(), b.as_str());
    d.run(&["EXISTS", a, b]);
    d.run(&["SET", a, "1"]);
    d.run(&["SET", b, "x"]);
    d.run(&["EXISTS", a, b, a, b, "nokey"]);
    d.run(&["EXISTS", a]);
    d.run(&["TOUCH", a, b, "nokey", b]);
    d.run(&["TYPE", a]);
    d.run(&["TYPE", b]);
    d.run(&["TYPE", "nokey"]);
    d.run(&["DEL", a, b, a, "nokey"]);
    d.run(&["EXISTS", a, b]);
    d.run(&["SET", a, "1"]);
    d.run(&["SET", b, "2"]);
    d.run(&["UNLINK", b, "nokey", a, b]);
    d.run(&["EXISTS", a, b]);
    d.run(&["DBSIZE"]);
    for bad in [
        &["DEL"][..],
        &["UNLINK"],
        &["EXISTS"],
        &["TOUCH"],
        &["TYPE"],
        &["TYPE", "a", "b"],
    ] {
        d.run(bad);
    }
}

#[test]
fn rename_and_renamenx_on_one_shard_and_across_shards() {
    let mut d = Diff::new();
    let (s0, s0b, s1) = (key_on(0, "src"), key_on(0, "dst"), key_on(1, "dst"));
    let (s0, s0b, s1) = (s0.as_str(), s0b.as_str(), s1.as_str());
    for (src, dst) in [(s0, s0b), (s0, s1)] {
        d.run(&["FLUSHALL"]);
        d.run(&["RENAME", src, dst]);
        d.run(&["RENAMENX", src, dst]);
        d.run(&["RENAME", src, src]);
        d.run(&["RENAMENX", src, src]);
        d.run(&["SET", src, "v1"]);
        d.run(&["RENAME", src, src]);
        d.run(&["RENAMENX", src, src]);
        d.run(&["GET", src]);
        d.run(&["PEXPIRE", src, "100000"]);
        d.run(&["RENAME", src, dst]);
        d.run(&["EXISTS", src]);
        d.run(&["GET", dst]);
        pttl_near(&mut d, dst, 100_000);
        // RENAMENX onto an existing key refuses and leaves both keys alone.
        d.run(&["SET", src, "v2"]);
        d.run(&["RENAMENX", src, dst]);
        d.run(&["GET", src]);
        d.run(&["GET", dst]);
        // RENAME overwrites, and the destination takes the source's (absent) TTL.
        d.run(&["RENAME", src, dst]);
        d.run(&["GET", dst]);
        d.run(&["TTL", dst]);
        d.run(&["EXISTS", src]);
        d.run(&["RENAMENX", dst, src]);
        d.run(&["GET", src]);
        d.run(&["EXISTS", dst]);
        d.run(&["DBSIZE"]);
    }
    d.run(&["RENAME", "a"]);
    d.run(&["RENAMENX", "a", "b", "c"]);
}

#[test]
fn copy_with_db_and_replace_on_one_shard_and_across_shards() {
    let mut d = Diff::new();
    let (s0, s0b, s1) = (key_on(0, "src"), key_on(0, "dst"), key_on(1, "dst"));
    let (s0, s0b, s1) = (s0.as_str(), s0b.as_str(), s1.as_str());
    for (src, dst) in [(s0, s0b), (s0, s1)] {
        d.run(&["FLUSHALL"]);
        d.run(&["COPY", src, dst]);
        d.run(&["SET", src, "hello"]);
        d.run(&["PEXPIRE", src, "100000"]);
        d.run(&["COPY", src, dst]);
        d.run(&["GET", dst]);
        pttl_near(&mut d, dst, 100_000);
        d.run(&["SET", src, "world"]);
        d.run(&["COPY", src, dst]);
        d.run(&["GET", dst]);
        d.run(&["COPY", src, dst, "REPLACE"]);
        d.run(&["GET", dst]);
        d.run(&["TTL", dst]);
        d.run(&["GET", src]);
        // Into other databases, also the same key name, also with the last DB winning.
        d.run(&["COPY", src, src, "DB", "1"]);
        d.run(&["COPY", src, dst, "db", "0", "replace", "DB", "2"]);
        d.run(&["COPY", src, dst, "DB", "2"]);
        d.run(&["SELECT", "1"]);
        d.run(&["GET", src]);
        d.run(&["SELECT", "2"]);
        d.run(&["GET", dst]);
        d.run(&["COPY", dst, src, "DB", "0", "REPLACE"]);
        d.run(&["SELECT", "0"]);
        d.run(&["GET", src]);
        d.run(&["SET", dst, "12345"]);
        d.run(&["COPY", dst, src, "REPLACE"]);
        d.run(&["GET", src]);
        d.run(&["OBJECT", "ENCODING", src]);
    }
    for bad in [
        &["COPY", "a", "a"][..],
        &["COPY", "a", "a", "DB", "0"],
        &["COPY", "a", "b", "DB", "16"],
        &["COPY", "a", "b", "DB", "-1"],
        &["COPY", "a", "b", "DB", "x"],
        &["COPY", "a", "b", "DB", "99999999999"],
        &["COPY", "a", "b", "DB"],
        &["COPY", "a", "b", "REPLACE", "foo"],
        &["COPY", "a", "b", "DB", "x", "foo"],
        &["COPY", "a"],
    ] {
        d.run(bad);
    }
}

#[test]
fn move_between_databases_with_errors() {
    let mut d = Diff::new();
    d.run(&["MOVE", "k", "1"]);
    d.run(&["SET", "k", "v"]);
    d.run(&["EXPIRE", "k", "100"]);
    d.run(&["MOVE", "k", "1"]);
    d.run(&["EXISTS", "k"]);
    d.run(&["SELECT", "1"]);
    d.run(&["GET", "k"]);
    pttl_near(&mut d, "k", 100_000);
    d.run(&["SELECT", "0"]);
    d.run(&["SET", "k", "w"]);
    d.run(&["MOVE", "k", "1"]);
    d.run(&["GET", "k"]);
    for bad in [
        &["MOVE", "k", "0"][..],
        &["MOVE", "nokey", "0"],
        &["MOVE", "k", "16"],
        &["MOVE", "k", "-1"],
        &["MOVE", "k", "x"],
        &["MOVE", "k", "4294967296"],
        &["MOVE", "k"],
        &["MOVE", "k", "1", "2"],
    ] {
        d.run(bad);
    }
}

#[test]
fn expire_family_options_and_errors() {
    let mut d = Diff::new();
    for cmd in ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"] {
        d.run(&[cmd, "nokey", "100"]);
        d.run(&[cmd, "nokey", "100", "foo"]);
        d.run(&[cmd, "nokey", "abc", "bar"]);
        d.run(&[cmd, "nokey", "abc"]);
        d.run(&[cmd, "nokey", "1.5"]);
        d.run(&[cmd, "nokey", "100", "nx", "xx"]);
        d.run(&[cmd, "nokey", "100", "NX", "GT"]);
        d.run(&[cmd, "nokey", "100", "lt", "nx"]);
        d.run(&[cmd, "nokey", "100", "GT", "lt"]);
        d.run(&[cmd, "nokey"]);
        for t in [
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775",
            "9223372036854776",
            "-9223372036854776",
        ] {
            d.run(&[cmd, "nokey", t]);
            d.run(&["SET", "k", "v"]);
            d.run(&[cmd, "k", t]);
            d.run(&["EXISTS", "k"]);
        }
    }
    d.run(&["SET", "k", "v"]);
    d.run_all(&[
        &["EXPIRE", "k", "100", "XX"][..],
        &["EXPIRE", "k", "100", "GT"],
        &["EXPIRE", "k", "100", "xx", "gt"],
        &["TTL", "k"],
        &["EXPIRE", "k", "100", "lt"],
        &["TTL", "k"],
        &["EXPIRE", "k", "50", "nx"],
        &["EXPIRE", "k", "200", "LT"],
        &["EXPIRE", "k", "200", "GT"],
        &["TTL", "k"],
        &["EXPIRE", "k", "150", "XX", "LT"],
        &["EXPIRE", "k", "150", "xx", "xx"],
        &["TTL", "k"],
        &["PERSIST", "k"],
        &["PERSIST", "k"],
        &["PERSIST", "nokey"],
        &["TTL", "k"],
        &["PTTL", "k"],
        &["EXPIRETIME", "k"],
        &["PEXPIRETIME", "k"],
        &["EXPIRE", "k", "10", "nx", "nx"],
        &["TTL", "k"],
        // Deadlines not in the future delete the key, once the conditions pass.
        &["EXPIRE", "k", "-1", "GT"],
        &["EXPIRE", "k", "-1", "LT"],
        &["EXISTS", "k"],
        &["SET", "k", "v"],
        &["EXPIRE", "k", "0"],
        &["EXISTS", "k"],
        &["SET", "k", "v"],
        &["PEXPIREAT", "k", "1"],
        &["EXISTS", "k"],
        &["SET", "k", "v"],
        &["EXPIREAT", "k", "-5"],
        &["EXISTS", "k"],
        &["TTL", "k"],
        &["PTTL", "k"],
        &["EXPIRETIME", "k"],
        &["PEXPIRETIME", "k"],
    ]);
    // Absolute deadlines read back exactly; relative ones within a tolerance.
    let at = now_ms() / 1000 + 1000;
    d.run(&["SET", "k", "v"]);
    d.run(&["EXPIREAT", "k", &at.to_string()]);
    d.run(&["EXPIRETIME", "k"]);
    d.run(&["PEXPIRETIME", "k"]);
    pttl_near(&mut d, "k", 1_000_000);
    let pat = now_ms() + 1_234_567;
    d.run(&["PEXPIREAT", "k", &pat.to_string()]);
    d.run(&["PEXPIRETIME", "k"]);
    d.run(&["EXPIRETIME", "k"]);
    d.run(&["PEXPIRE", "k", "5000"]);
    pttl_near(&mut d, "k", 5000);
    d.run_matching(&["TTL", "k"], |r| matches!(r.as_int(), Some(4 | 5)));
    d.run(&["PEXPIREAT", "k", "9223372036854775807"]);
    d.run(&["PEXPIRETIME", "k"]);
    d.run(&["EXPIRETIME", "k"]);
    d.run(&["EXPIREAT", "k", "9223372036854775"]);
    d.run(&["EXPIRETIME", "k"]);
    for bad in [
        &["TTL"][..],
        &["PTTL", "a", "b"],
        &["EXPIRETIME"],
        &["PEXPIRETIME"],
        &["PERSIST"],
    ] {
        d.run(bad);
    }
}

#[test]
fn expired_keys_are_gone_for_every_command() {
    let mut d = Diff::new();
    let (a, b) = (key_on(0, "e"), key_on(1, "e"));
    let (a, b) = (a.as_str(), b.as_str());
    for k in [a, b] {
        d.run(&["SET", k, "v", "PX", "50"]);
    }
    d.run(&["SET", "live", "v"]);
    std::thread::sleep(Duration::from_millis(120));
    d.run(&["EXISTS", a, b]);
    d.run(&["TYPE", a]);
    d.run(&["TTL", b]);
    d.run(&["RENAME", a, b]);
    d.run(&["COPY", b, a]);
    d.run(&["MOVE", b, "1"]);
    d.run(&["EXPIRE", a, "100"]);
    d.run(&["PERSIST", b]);
    d.run(&["OBJECT", "ENCODING", a]);
    d.run_unordered(&["KEYS", "*"]);
    d.run_scan(&["SCAN", "0"], 1);
    d.run(&["RANDOMKEY"]);
}

/// Keys spread over both shards, with names that exercise the glob syntax.
fn populate(d: &mut Diff) {
    for i in 0..150 {
        d.run(&["SET", &format!("user:{i}"), "v"]);
        d.run(&["SET", &format!("item:{i}"), &i.to_string()]);
    }
    for k in [
        "", "hello", "hallo", "hxllo", "h*llo", "h[llo", "a\\b", "UPPER",
    ] {
        d.run(&["SET", k, "v"]);
    }
}

#[test]
fn keys_and_scan_return_the_same_keys_as_redis() {
    let mut d = Diff::new();
    d.run(&["KEYS", "*"]);
    d.run_scan(&["SCAN", "0"], 1);
    populate(&mut d);
    for pattern in [
        "*",
        "user:*",
        "*:1?",
        "item:1[0-4]",
        "item:[^1]*",
        "h?llo",
        "h[ae]llo",
        "h\\*llo",
        "h[\\[]llo",
        "a\\\\b",
        "",
        "upper",
        "*U*",
        "nomatch*",
        "item:[9-7]",
        "[",
    ] {
        d.run_unordered(&["KEYS", pattern]);
        d.run_scan(&["SCAN", "0", "MATCH", pattern], 1);
        d.run_scan(&["SCAN", "0", "MATCH", pattern, "COUNT", "3"], 1);
    }
    for count in ["1", "7", "1000"] {
        d.run_scan(&["SCAN", "0", "COUNT", count], 1);
    }
    d.run_scan(&["SCAN", "0", "TYPE", "string"], 1);
    d.run_scan(
        &[
            "SCAN", "0", "type", "STRING", "match", "user:1*", "count", "5",
        ],
        1,
    );
    d.run_scan(&["SCAN", "0", "TYPE", "list"], 1);
    d.run_scan(&["SCAN", "0", "TYPE", "nosuchtype"], 1);
    // Options repeat; the last wins.
    d.run_scan(&["SCAN", "0", "MATCH", "user:*", "MATCH", "item:*"], 1);
    d.run(&["DBSIZE"]);
    // Other databases are separate.
    d.run(&["SELECT", "3"]);
    d.run(&["KEYS", "*"]);
    d.run_scan(&["SCAN", "0"], 1);
}

#[test]
fn scan_cursor_and_option_errors() {
    let mut d = Diff::new();
    d.run(&["SET", "k", "v"]);
    for bad in [
        &["SCAN", "x"][..],
        &["SCAN", "-"],
        &["SCAN", " 1"],
        &["SCAN", "1 "],
        &["SCAN", "0x10"],
        &["SCAN", "18446744073709551616"],
        // A cursor is a C string in Redis: it ends at a NUL byte.
        &["SCAN", "\0x"],
        &["SCAN", "0\0", "COUNT", "10"],
        &["SCAN", "x\0"],
        &["SCAN", "x", "COUNT", "0"],
        &["SCAN", "0", "COUNT", "0"],
        &["SCAN", "0", "COUNT", "-1"],
        &["SCAN", "0", "COUNT", "x"],
        &["SCAN", "0", "COUNT", "99999999999999999999"],
        &["SCAN", "0", "COUNT", "x", "FOO"],
        &["SCAN", "0", "MATCH"],
        &["SCAN", "0", "TYPE"],
        &["SCAN", "0", "FOO", "bar"],
        &["SCAN", "0", "MATCH", "*", "COUNT"],
        &["SCAN"],
        &["KEYS"],
        &["KEYS", "a", "b"],
        &["RANDOMKEY", "x"],
    ] {
        d.run(bad);
    }
    // Cursors Redis accepts: a sign, the empty string (0) and the whole unsigned range. With one key the
    // iteration ends at once on both servers whatever the cursor's digits say.
    d.run(&["SCAN", ""]);
    d.run(&["SCAN", "+0"]);
    d.run(&["SCAN", "0", "COUNT", "9223372036854775807"]);
    for cursor in ["-1", "18446744073709551615", "5"] {
        d.run_matching(&["SCAN", cursor], |r| {
            r.as_array().map(<[Reply]>::len) == Some(2)
        });
    }
}

/// Runs SCAN with COUNT 10 to completion on `conn`, calling `between` after every call.
fn scan_all(conn: &mut Conn, mut between: impl FnMut(usize)) -> BTreeSet<Vec<u8>> {
    let mut seen = BTreeSet::new();
    let mut cursor = b"0".to_vec();
    for round in 0..100_000 {
        let reply = conn.call_decoded(&[&b"SCAN"[..], &cursor, b"COUNT", b"10"]);
        let Some([next, Reply::Array(Some(keys))]) = reply.as_array() else {
            panic!("unexpected SCAN reply {reply}");
        };
        for k in keys {
            seen.insert(k.as_bytes().expect("SCAN returns bulk keys").to_vec());
        }
        cursor = next
            .as_bytes()
            .expect("SCAN cursor is a bulk string")
            .to_vec();
        if cursor == b"0" {
            return seen;
        }
        between(round);
    }
    panic!("SCAN did not finish");
}

#[test]
fn scan_while_writing_returns_every_key_present_throughout() {
    let strata = Server::strata(&["--threads", "2"]);
    let mut reader = strata.conn();
    let mut writer = strata.conn();
    let stable: Vec<String> = (0..2000).map(|i| format!("stable:{i}")).collect();
    for chunk in stable.chunks(100) {
        let mut cmd = vec!["MSET".to_string()];
        for k in chunk {
            cmd.push(k.clone());
            cmd.push("v".into());
        }
        assert_eq!(writer.call_decoded(&cmd), Reply::Simple(b"OK".to_vec()));
    }
    // Between SCAN calls, grow and shrink both shards' tables with churn keys.
    let seen = scan_all(&mut reader, |round| {
        let base = round * 50;
        for i in base..base + 50 {
            writer.call(&["SET", &format!("churn:{i}"), "x"]);
        }
        if round % 3 == 2 {
            for i in (base - 100)..base + 50 {
                writer.call(&["DEL", &format!("churn:{i}")]);
            }
        }
    });
    for k in &stable {
        assert!(seen.contains(k.as_bytes()), "SCAN missed {k}");
    }
    // A SCAN on a quiet server returns each key exactly once per full iteration round trip.
    let quiet = scan_all(&mut reader, |_| {});
    assert!(stable.iter().all(|k| quiet.contains(k.as_bytes())));
}

#[test]
fn randomkey_returns_existing_keys() {
    let mut d = Diff::new();
    d.run(&["RANDOMKEY"]);
    d.run(&["SET", "only", "v"]);
    d.run(&["RANDOMKEY"]);
    d.run(&["DEL", "only"]);
    d.run(&["RANDOMKEY"]);
    let keys: Vec<String> = (0..40).map(|i| format!("r:{i}")).collect();
    for k in &keys {
        d.run(&["SET", k, "v"]);
    }
    let mut seen_shards = BTreeSet::new();
    for _ in 0..200 {
        let r = d.strata.call_decoded(&["RANDOMKEY"]);
        let k = String::from_utf8(r.as_bytes().expect("a key").to_vec()).expect("utf-8 key");
        assert!(keys.contains(&k), "RANDOMKEY returned unknown key {k}");
        seen_shards.insert(shard_of(&k));
    }
    assert_eq!(
        seen_shards.len(),
        2,
        "RANDOMKEY never picked one of the shards"
    );
    // Only expired keys left: nil, as Redis answers.
    d.run(&["FLUSHALL"]);
    d.run(&["SET", "x", "v", "PX", "20"]);
    std::thread::sleep(Duration::from_millis(60));
    d.run(&["RANDOMKEY"]);
}

#[test]
fn active_expiry_removes_keys_without_access() {
    let mut d = Diff::new();
    for i in 0..200 {
        d.run(&["SET", &format!("t:{i}"), "v", "PX", "100"]);
    }
    d.run(&["SET", "keep", "v"]);
    d.run(&["DBSIZE"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n = d.strata.call_decoded(&["DBSIZE"]).as_int();
        if n == Some(1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "strata still has {n:?} keys 10 s after they expired"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    d.run(&["EXISTS", "keep"]);
}

#[test]
fn object_subcommands_match_redis() {
    let mut d = Diff::new();
    let long = "x".repeat(45);
    let values = [
        "0",
        "5",
        "9999",
        "10000",
        "-1",
        "12345678901234567890",
        "hello",
        "",
        long.as_str(),
        "01",
    ];
    for v in values {
        d.run(&["SET", "k", v]);
        d.run(&["OBJECT", "ENCODING", "k"]);
        d.run(&["OBJECT", "REFCOUNT", "k"]);
        d.run(&["OBJECT", "FREQ", "k"]);
    }
    d.run(&["APPEND", "k", "y"]);
    d.run(&["OBJECT", "ENCODING", "k"]);
    d.run(&["SET", "s", "not an integer"]);
    d.run_matching(&["OBJECT", "IDLETIME", "s"], |r| {
        matches!(r.as_int(), Some(0..=1))
    });
    for sub in ["ENCODING", "REFCOUNT", "FREQ", "IDLETIME"] {
        d.run(&["OBJECT", sub, "nokey"]);
        d.run(&["OBJECT", sub]);
        d.run(&["OBJECT", sub, "k", "extra"]);
    }
    d.run(&["OBJECT", "HELP"]);
    d.run(&["object", "help"]);
    d.run(&["OBJECT", "HELP", "extra"]);
    d.run(&["OBJECT"]);
    d.run(&["OBJECT", "NOSUCH"]);
    d.run(&["OBJECT", "NOSUCH", "k"]);
}

#[test]
fn memory_usage_options_and_errors_match_redis() {
    let mut d = Diff::new();
    let long = "x".repeat(100);
    d.run(&["SET", "int", "12345"]);
    d.run(&["SET", "embstr", "hello"]);
    d.run(&["SET", "raw", &long]);
    // The byte counts are each server's own; the reply shape and the errors are Redis's.
    let positive = |r: &Reply| r.as_int().is_some_and(|n| n > 0);
    for key in ["int", "embstr", "raw"] {
        d.run_matching(&["MEMORY", "USAGE", key], positive);
        d.run_matching(&["memory", "usage", key, "SAMPLES", "0"], positive);
        d.run_matching(
            &["MEMORY", "USAGE", key, "samples", "5", "SAMPLES", "1"],
            positive,
        );
        d.run_matching(
            &["MEMORY", "USAGE", key, "samples", "9223372036854775807"],
            positive,
        );
    }
    let (_, raw) = d.run_matching(&["MEMORY", "USAGE", "raw"], positive);
    assert!(
        raw.as_int().unwrap_or(0) > 100,
        "the value's bytes are counted: {raw}"
    );
    d.run(&["MEMORY", "USAGE", "nokey"]);
    d.run(&["MEMORY", "USAGE", "nokey", "SAMPLES", "10"]);
    for key in ["raw", "nokey"] {
        for opts in [
            &["SAMPLES"][..],
            &["SAMPLES", "-1"],
            &["SAMPLES", "x"],
            &["SAMPLES", "1.5"],
            &["SAMPLES", "99999999999999999999"],
            &["SAMPLES", ""],
            &["SAMPLES", "1", "SAMPLES"],
            &["SAMPLES", "-1", "SAMPLES", "x"],
            &["SAMPLES", "x", "SAMPLES", "-1"],
            &["SAMPLE", "1"],
            &["COUNT", "1"],
            &["1"],
            &["WITHVALUES"],
        ] {
            let mut cmd = vec!["MEMORY", "USAGE", key];
            cmd.extend_from_slice(opts);
            d.run(&cmd);
        }
    }
    d.run(&["MEMORY", "USAGE"]);
    d.run(&["MEMORY"]);
    d.run(&["MEMORY", "NOSUCH"]);
    d.run(&["MEMORY", "HELP", "extra"]);
    d.run_matching(&["MEMORY", "HELP"], |r| {
        r.as_array().is_some_and(|lines| lines.len() >= 6)
    });
    // MEMORY USAGE neither touches the key nor counts a lookup.
    d.run(&["CONFIG", "RESETSTAT"]);
    d.run(&["MEMORY", "USAGE", "nokey"]);
    d.run_matching(&["MEMORY", "USAGE", "raw"], positive);
    d.both(|c| {
        let info = c.call_decoded(&["INFO", "stats"]);
        let text = String::from_utf8_lossy(info.as_bytes().unwrap_or_default()).into_owned();
        text.lines()
            .filter(|l| l.starts_with("keyspace_"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    });
    let mut cmd = vec!["COMMAND", "INFO", "memory|usage"];
    d.both(|c| command_info_core(&c.call_decoded(&cmd)));
    cmd[1] = "DOCS";
    d.run(&cmd);
}

#[test]
fn object_under_lfu_and_maxmemory_policies() {
    let mut d = Diff::with_config(&["--maxmemory-policy", "allkeys-lfu"]);
    d.run(&["SET", "k", "hello"]);
    d.run(&["OBJECT", "FREQ", "k"]);
    d.run(&["GET", "k"]);
    d.run(&["OBJECT", "FREQ", "k"]);
    d.run(&["OBJECT", "IDLETIME", "k"]);
    d.run(&["OBJECT", "IDLETIME", "nokey"]);
    d.run(&["OBJECT", "FREQ", "nokey"]);
    d.run(&["SET", "n", "5"]);
    d.run(&["OBJECT", "REFCOUNT", "n"]);
    // Without a memory limit (Strata refuses maxmemory other than 0 until it enforces one) every
    // policy shares small integers; each case stores the value again, as sharing is decided then.
    d.run(&["SET", "n", "5"]);
    d.run(&["OBJECT", "REFCOUNT", "n"]);
    d.run(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    d.run(&["SET", "n", "5"]);
    d.run(&["OBJECT", "REFCOUNT", "n"]);
    d.run(&["OBJECT", "FREQ", "n"]);
    d.run(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"]);
    d.run(&["SET", "n", "6"]);
    d.run(&["OBJECT", "REFCOUNT", "n"]);
    d.run(&["OBJECT", "ENCODING", "n"]);
    // A shared integer reports the shared object's idle time: look at an unshared value.
    d.run(&["SET", "s", "six"]);
    d.run_matching(&["OBJECT", "IDLETIME", "s"], |r| {
        matches!(r.as_int(), Some(0..=1))
    });
}

/// OBJECT REFCOUNT follows what the value was written as, as Redis's objects do: a small integer
/// stored while sharing is allowed stays shared after the policy changes, one stored under an LRU
/// policy stays unshared after it, a COPY is an object of its own (and stays one through RENAME,
/// MOVE and TTL changes), and INCR or a new value decide again.
#[test]
fn object_refcount_follows_the_value_not_the_current_settings() {
    let mut d = Diff::new();
    // Names spread over shards, so RENAME, COPY and MOVE cross them at two threads.
    let keys = ["a", "b", "c", "d", "e", "f", "g", "h"];
    let refcounts = |d: &mut Diff| {
        for k in keys {
            d.run(&["OBJECT", "REFCOUNT", k]);
        }
    };
    d.run(&["SET", "a", "5"]);
    d.run(&["COPY", "a", "b"]);
    d.run(&["COPY", "a", "c", "DB", "1"]);
    d.run(&["SET", "d", "9999"]);
    d.run(&["COPY", "d", "e"]);
    d.run(&["RENAME", "e", "f"]);
    d.run(&["EXPIRE", "f", "100"]);
    d.run(&["COPY", "a", "g"]);
    d.run(&["MOVE", "g", "1"]);
    refcounts(&mut d);
    d.run(&["SELECT", "1"]);
    refcounts(&mut d);
    d.run(&["MOVE", "g", "0"]);
    d.run(&["SELECT", "0"]);
    d.run(&["PERSIST", "f"]);
    refcounts(&mut d);
    // A new value decides again: INCR and SET of a copy make it shared.
    d.run(&["INCR", "b"]);
    d.run(&["SET", "g", "7", "KEEPTTL"]);
    d.run(&["GETSET", "f", "3"]);
    refcounts(&mut d);
    // Under an LRU policy with a limit, what is written is unshared; what was written before
    // keeps its shared object.
    d.run(&["CONFIG", "SET", "maxmemory", "1gb"]);
    d.run(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    d.run(&["SET", "h", "1"]);
    d.run(&["INCR", "d"]);
    d.run(&["MSET", "e", "2", "c", "3"]);
    refcounts(&mut d);
    d.run(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    d.run(&["CONFIG", "SET", "maxmemory", "0"]);
    refcounts(&mut d);
    d.run(&["RENAME", "h", "a"]);
    d.run(&["INCRBY", "e", "10"]);
    d.run(&["APPEND", "c", "0"]);
    refcounts(&mut d);
    d.run(&["OBJECT", "ENCODING", "c"]);
}

#[test]
fn resp3_null_replies() {
    let mut d = Diff::new();
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run(&["OBJECT", "ENCODING", "nokey"]);
    d.run(&["RANDOMKEY"]);
    d.run(&["SCAN", "0"]);
    d.run(&["KEYS", "*"]);
    d.run(&["TYPE", "nokey"]);
    d.run(&["TTL", "nokey"]);
    d.run(&["OBJECT", "HELP"]);
}

/// COMMAND INFO fields the family's table controls: name, arity, flags, key positions, ACL categories
/// (as a set: their order is the table's concern) and tips. Key specs are not compared.
fn command_info_core(reply: &Reply) -> Vec<String> {
    fn set_of(r: &Reply) -> String {
        let mut v: Vec<String> = r
            .as_array()
            .unwrap_or_default()
            .iter()
            .map(|x| x.to_string())
            .collect();
        v.sort();
        v.join(" ")
    }
    let mut out = Vec::new();
    let Some(items) = reply.as_array() else {
        return vec![reply.to_string()];
    };
    for info in items {
        let Some(f) = info.as_array() else {
            out.push(info.to_string());
            continue;
        };
        let mut line: Vec<String> = f.iter().take(6).map(|x| x.to_string()).collect();
        line.push(f.get(6).map(set_of).unwrap_or_default());
        line.push(f.get(7).map(|x| x.to_string()).unwrap_or_default());
        if let Some(subs) = f.get(9) {
            // Redis lists subcommands in its dict's order: compare them sorted.
            let mut subs = command_info_core(&Reply::Array(Some(
                subs.as_array().unwrap_or_default().to_vec(),
            )));
            subs.sort();
            line.extend(subs);
        }
        out.push(line.join(" | "));
    }
    out
}

#[test]
fn command_info_matches_redis_for_the_family() {
    let mut d = Diff::new();
    let names = [
        "del",
        "unlink",
        "exists",
        "type",
        "touch",
        "rename",
        "renamenx",
        "copy",
        "move",
        "keys",
        "scan",
        "randomkey",
        "expire",
        "pexpire",
        "expireat",
        "pexpireat",
        "ttl",
        "pttl",
        "expiretime",
        "pexpiretime",
        "persist",
        "object",
    ];
    let mut cmd = vec!["COMMAND", "INFO"];
    cmd.extend(names);
    d.both(|c| command_info_core(&c.call_decoded(&cmd)));
}

/// Sets `n` keys `{prefix}{i}` with a `size`-byte value in pipelined batches.
fn fill(conn: &mut Conn, prefix: &str, n: usize, size: usize) {
    let value = "v".repeat(size);
    pipelined(
        conn,
        n,
        |i| vec!["SET".into(), format!("{prefix}{i}"), value.clone()],
        b"+OK\r\n",
    );
}

/// Sends `command(i)` for every `i` below `n`, pipelined 10,000 at a time, and asserts each reply
/// is `reply`.
fn pipelined(conn: &mut Conn, n: usize, command: impl Fn(usize) -> Vec<String>, reply: &[u8]) {
    for start in (0..n).step_by(10_000) {
        let end = (start + 10_000).min(n);
        let mut batch = Vec::new();
        for i in start..end {
            batch.extend(crate::harness::encode_command(&command(i)));
        }
        conn.send_raw(&batch);
        for _ in start..end {
            assert_eq!(conn.read_reply(), reply);
        }
    }
}

/// One numeric field of INFO.
fn info_u64(conn: &mut Conn, section: &str, name: &str) -> u64 {
    conn.info_u64(section, name)
}

/// Waits (bounded) until `used_memory` is back within `slack` bytes of `baseline`.
fn memory_returns_near(conn: &mut Conn, baseline: u64, slack: u64) -> u64 {
    let mut used = 0;
    for _ in 0..400 {
        used = info_u64(conn, "memory", "used_memory");
        if used <= baseline + slack && info_u64(conn, "memory", "lazyfree_pending_objects") == 0 {
            return used;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("used_memory stayed at {used} (baseline {baseline})");
}

#[test]
fn flushall_sync_and_async_empty_at_once_and_free_memory() {
    let strata = Server::strata(&["--threads", "2"]);
    let mut a = strata.conn();
    let mut b = strata.conn();
    let baseline = info_u64(&mut a, "memory", "used_memory");
    for mode in ["ASYNC", "SYNC", ""] {
        fill(&mut a, "key:", 200_000, 64);
        assert_eq!(b.call_decoded(&["DBSIZE"]), Reply::Integer(200_000));
        let loaded = info_u64(&mut b, "memory", "used_memory");
        assert!(loaded > baseline + 200_000 * 64, "{loaded} vs {baseline}");
        let flush: Vec<&str> = ["FLUSHALL", mode]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(a.call_decoded(&flush), Reply::Simple(b"OK".to_vec()));
        // Gone at once, for every client and on both shards.
        assert_eq!(b.call_decoded(&["DBSIZE"]), Reply::Integer(0));
        assert_eq!(
            b.call_decoded(&["EXISTS", "key:1", "key:2", "key:199999"]),
            Reply::Integer(0)
        );
        assert_eq!(b.call_decoded(&["KEYS", "*"]), Reply::Array(Some(vec![])));
        if mode != "ASYNC" {
            // SYNC (the default) replies only once the memory has been freed.
            assert_eq!(info_u64(&mut b, "memory", "lazyfree_pending_objects"), 0);
        }
        memory_returns_near(&mut b, baseline, 4 << 20);
        // The server still works normally after the flush.
        assert_eq!(
            b.call_decoded(&["SET", "key:1", "x"]),
            Reply::Simple(b"OK".to_vec())
        );
        assert_eq!(
            b.call_decoded(&["FLUSHDB", "ASYNC"]),
            Reply::Simple(b"OK".to_vec())
        );
    }
    assert!(matches!(
        a.call_decoded(&["FLUSHALL", "LAZY"]),
        Reply::Error(_)
    ));
    assert!(matches!(
        a.call_decoded(&["FLUSHDB", "SYNC", "ASYNC"]),
        Reply::Error(_)
    ));
}

#[test]
fn large_values_deleted_are_freed_and_counted() {
    let strata = Server::strata(&["--threads", "1"]);
    let mut c = strata.conn();
    let baseline = info_u64(&mut c, "memory", "used_memory");
    let big = "x".repeat(1 << 20);
    for i in 0..32 {
        assert_eq!(
            c.call_decoded(&["SET", &format!("big:{i}"), &big]),
            Reply::Simple(b"OK".to_vec())
        );
    }
    assert!(info_u64(&mut c, "memory", "used_memory") > baseline + (32 << 20));
    for i in 0..16 {
        assert_eq!(
            c.call_decoded(&["DEL", &format!("big:{i}")]),
            Reply::Integer(1)
        );
        assert_eq!(
            c.call_decoded(&["SET", &format!("big:{}", i + 16), "small"]),
            Reply::Simple(b"OK".to_vec())
        );
    }
    assert_eq!(c.call_decoded(&["DBSIZE"]), Reply::Integer(16));
    memory_returns_near(&mut c, baseline, 4 << 20);
}

/// Reads one RESP array of bulk strings from `stream`, calling `first_byte` as soon as the reply
/// starts to arrive.
fn read_keys_reply(stream: &mut std::net::TcpStream, first_byte: impl FnOnce()) -> Vec<Vec<u8>> {
    use std::io::{BufRead, BufReader, Read};
    let mut first = [0u8; 1];
    stream.read_exact(&mut first).expect("KEYS reply");
    first_byte();
    assert_eq!(first[0], b'*');
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    let mut read_line = |r: &mut BufReader<&mut std::net::TcpStream>| {
        line.clear();
        r.read_line(&mut line).expect("reply line");
        line.trim_end().to_string()
    };
    let n: usize = read_line(&mut r).parse().expect("array length");
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        let header = read_line(&mut r);
        let len: usize = header
            .strip_prefix('$')
            .and_then(|l| l.parse().ok())
            .expect("bulk header");
        let mut key = vec![0u8; len + 2];
        r.read_exact(&mut key).expect("bulk body");
        key.truncate(len);
        keys.push(key);
    }
    keys
}

#[test]
fn keys_over_200k_keys_is_exact_while_other_clients_are_served() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    // One thread: without slicing, the walk would stop that thread (and so every client) until done.
    let strata = Server::strata(&["--threads", "1"]);
    let mut loader = strata.conn();
    fill(&mut loader, "key:", 200_000, 8);
    let mut keys_conn =
        std::net::TcpStream::connect(("127.0.0.1", strata.port())).expect("connect");
    keys_conn
        .set_read_timeout(Some(Duration::from_secs(60)))
        .expect("timeout");
    let served = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let mut other = strata.conn();
    assert_eq!(
        other.call_decoded(&["SELECT", "1"]),
        Reply::Simple(b"OK".to_vec())
    );
    std::io::Write::write_all(&mut keys_conn, b"*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n")
        .expect("send KEYS");
    let reader = {
        let (served, done) = (served.clone(), done.clone());
        std::thread::spawn(move || {
            let mut before_reply = 0;
            let keys = read_keys_reply(&mut keys_conn, || {
                before_reply = served.load(Ordering::SeqCst);
                done.store(true, Ordering::SeqCst);
            });
            (keys, before_reply)
        })
    };
    // Another client's commands (in another database) keep being answered while KEYS walks.
    while !done.load(Ordering::SeqCst) {
        let n = served.load(Ordering::SeqCst) + 1;
        assert_eq!(
            other.call_decoded(&["INCR", "counter"]),
            Reply::Integer(n as i64)
        );
        served.store(n, Ordering::SeqCst);
    }
    let (keys, before_reply) = reader.join().expect("reader thread");
    assert!(
        before_reply >= 3,
        "only {before_reply} commands served during KEYS"
    );
    let set: BTreeSet<Vec<u8>> = keys.iter().cloned().collect();
    assert_eq!((keys.len(), set.len()), (200_000, 200_000));
    assert!((0..200_000).all(|i| set.contains(format!("key:{i}").as_bytes())));
}

/// DEBUG DIGEST and DIGEST-VALUE give redis-server's hex strings for the same data: every type and
/// encoding (listpack and hashtable hashes, intset/listpack/hashtable sets, listpack and skiplist
/// zsets, compressed quicklists), TTLs, several databases, keys spread over 4 threads.
#[test]
fn debug_digest_matches_redis() {
    let mut d = Diff::start(4, &["--enable-debug-command", "yes"]);
    d.run(&["DEBUG", "DIGEST"]);
    d.run(&["DEBUG", "DIGEST-VALUE"]);
    d.run(&["DEBUG", "DIGEST-VALUE", "missing"]);
    d.run(&["SET", "s", "hello"]);
    d.run(&["SET", "i", "-12345"]);
    d.run(&["SET", "ttl", "x", "EX", "1000"]);
    d.run(&["APPEND", "raw", &"r".repeat(100)]);
    d.run(&["RPUSH", "l", "a", "b", "3", "-7"]);
    d.run(&["SADD", "si", "1", "2", "-3"]);
    d.run(&["SADD", "sl", "a", "b", "c"]);
    d.run(&["ZADD", "zl", "1.5", "a", "2", "b", "0.1", "c", "-inf", "d"]);
    d.run(&["HSET", "hl", "f", "v", "g", "7"]);
    for i in 0..300 {
        let n = i.to_string();
        d.run(&["RPUSH", "big-l", &n, &format!("x{n}")]);
        d.run(&["SADD", "big-si", &n]);
        d.run(&["SADD", "big-s", &format!("m{n}")]);
        d.run(&[
            "ZADD",
            "big-z",
            &format!("{}.25", i * 7 % 11),
            &format!("m{n}"),
        ]);
        d.run(&["HSET", "big-h", &format!("f{n}"), &n]);
    }
    d.run(&["CONFIG", "SET", "list-compress-depth", "1"]);
    d.run(&["CONFIG", "SET", "list-max-listpack-size", "4"]);
    for i in 0..40 {
        d.run(&["RPUSH", "cl", &format!("element-{i}-{}", "z".repeat(40))]);
    }
    let digest_all = [
        "DEBUG",
        "DIGEST-VALUE",
        "s",
        "i",
        "ttl",
        "raw",
        "l",
        "si",
        "sl",
        "zl",
        "hl",
        "big-l",
        "big-si",
        "big-s",
        "big-z",
        "big-h",
        "cl",
        "missing",
    ];
    d.run(&["SELECT", "5"]);
    d.run(&["SET", "s", "hello"]);
    d.run(&digest_all);
    d.run(&["SELECT", "0"]);
    d.run(&digest_all);
    d.run(&["DEBUG", "DIGEST"]);
    d.run(&["DEBUG", "DIGEST", "extra"]);
    // COPY and MOVE keep a value's digest.
    d.run(&["COPY", "big-z", "copy-z"]);
    d.run(&["DEBUG", "DIGEST-VALUE", "big-z", "copy-z"]);
    d.run(&["MOVE", "big-h", "3"]);
    d.run(&["DEBUG", "DIGEST"]);
    // A key whose deadline has passed counts until it is removed, as in Redis (active expiry off,
    // so only a lookup removes it).
    d.run(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    d.run(&["SET", "past", "v", "PXAT", "4000000000"]);
    d.run(&["DEBUG", "DIGEST-VALUE", "past"]);
    d.run(&["DEBUG", "DIGEST"]);
    d.run(&["EXISTS", "past"]);
    d.run(&["DEBUG", "DIGEST-VALUE", "past"]);
    d.run(&["DEBUG", "DIGEST"]);
    d.run(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
}

/// One MSET and one DEL of 200k keys across four shards lock every key for the command; once the
/// keys are gone, so is the room the lock tables grew for them (it stayed allocated for good,
/// about 120 bytes a key: +23 MB here), and memory comes back near where it started.
#[test]
fn a_huge_multi_key_command_leaves_no_memory_behind() {
    let strata = Server::strata(&["--threads", "4"]);
    let mut c = strata.conn();
    let baseline = info_u64(&mut c, "memory", "used_memory");
    let keys: Vec<String> = (0..200_000).map(|i| format!("huge:{i}")).collect();
    let mut mset = vec!["MSET".to_string()];
    for k in &keys {
        mset.push(k.clone());
        mset.push("v".into());
    }
    assert_eq!(c.call_decoded(&mset), Reply::Simple(b"OK".to_vec()));
    let mut del = vec!["DEL".to_string()];
    del.extend(keys.iter().cloned());
    assert_eq!(c.call_decoded(&del), Reply::Integer(200_000));
    assert_eq!(c.call_decoded(&["DBSIZE"]), Reply::Integer(0));
    memory_returns_near(&mut c, baseline, 4 << 20);
}

/// A tracking client reads 200k keys, so each shard remembers them; they are then written (each
/// write invalidates and forgets its key) and deleted. The tracking tables give back their room
/// once mostly empty, as Redis's radix tree frees its nodes: 15 MB stayed allocated for good.
#[test]
fn keys_forgotten_by_client_tracking_leave_no_memory_behind() {
    let strata = Server::strata(&["--threads", "4"]);
    let mut w = strata.conn();
    let baseline = info_u64(&mut w, "memory", "used_memory");
    {
        let mut reader = strata.conn();
        assert_eq!(
            reader.call_decoded(&["CLIENT", "TRACKING", "ON"]),
            Reply::Simple(b"OK".to_vec())
        );
        let get = |i| vec!["GET".into(), format!("tk:{i}")];
        pipelined(&mut reader, 200_000, get, b"$-1\r\n");
        let stats = info_u64(&mut reader, "stats", "tracking_total_keys");
        assert_eq!(stats, 200_000);
    }
    fill(&mut w, "tk:", 200_000, 8);
    pipelined(
        &mut w,
        200_000,
        |i| vec!["DEL".into(), format!("tk:{i}")],
        b":1\r\n",
    );
    assert_eq!(info_u64(&mut w, "stats", "tracking_total_keys"), 0);
    memory_returns_near(&mut w, baseline, 4 << 20);
}

/// WATCH of 200k keys, then UNWATCH: the watched-key tables give back their room (about 15 MB
/// stayed allocated for good).
#[test]
fn watches_withdrawn_leave_no_memory_behind() {
    let strata = Server::strata(&["--threads", "2"]);
    let mut c = strata.conn();
    let baseline = info_u64(&mut c, "memory", "used_memory");
    for start in (0..200_000).step_by(10_000) {
        let mut watch = vec!["WATCH".to_string()];
        watch.extend((start..start + 10_000).map(|i| format!("w:{i}")));
        assert_eq!(c.call_decoded(&watch), Reply::Simple(b"OK".to_vec()));
    }
    assert_eq!(c.call_decoded(&["UNWATCH"]), Reply::Simple(b"OK".to_vec()));
    memory_returns_near(&mut c, baseline, 4 << 20);
}

#[test]
fn a_big_request_leaves_no_big_read_buffer_behind() {
    // The read buffer grows to take a 3 MiB value; once the request is done the connection goes
    // back to a small buffer, even though the requests after it keep arriving on it.
    let strata = Server::strata(&["--threads", "1"]);
    let mut c = strata.conn();
    let baseline = info_u64(&mut c, "memory", "used_memory");
    let big = "x".repeat(3 << 20);
    assert_eq!(
        c.call_decoded(&["SET", "big", &big]),
        Reply::Simple(b"OK".to_vec())
    );
    assert_eq!(c.call_decoded(&["DEL", "big"]), Reply::Integer(1));
    for _ in 0..10 {
        assert_eq!(c.call_decoded(&["PING"]), Reply::Simple(b"PONG".to_vec()));
    }
    memory_returns_near(&mut c, baseline, 1 << 20);
}

/// The read buffer of the client named `name`, as CLIENT LIST shows it: qbuf + qbuf-free (its size),
/// and the client's idle seconds.
fn read_buffer_of(admin: &mut Conn, name: &str) -> (u64, u64) {
    let list = admin.call_decoded(&["CLIENT", "LIST"]);
    let text = String::from_utf8_lossy(list.as_bytes().expect("CLIENT LIST's text")).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains(&format!(" name={name} ")))
        .expect("the client's line");
    let field = |f: &str| -> u64 {
        line.split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{f}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{f} in {line}"))
    };
    (field("qbuf") + field("qbuf-free"), field("idle"))
}

#[test]
fn read_buffers_shrink_after_a_big_request_and_are_freed_when_idle() {
    // As Redis's query buffer: a fresh client's is 16 KiB; one a big request grew shrinks back
    // once small requests follow; an idle client's (nothing buffered) is freed after 2 s, and the
    // client is served as before once it sends again. The same checks against both servers.
    let servers = [Server::redis(&[]), Server::strata(&["--threads", "2"])];
    std::thread::scope(|s| {
        for server in &servers {
            s.spawn(move || {
                let kind = server.kind().name();
                let mut c = server.conn();
                let mut admin = server.conn();
                c.call(&["CLIENT", "SETNAME", "watched"]);
                let (fresh, _) = read_buffer_of(&mut admin, "watched");
                assert!(
                    (16384..32768).contains(&fresh),
                    "{kind}: fresh buffer {fresh}"
                );

                c.call(&["SET", "x", &"A".repeat(400_000)]);
                let (grown, _) = read_buffer_of(&mut admin, "watched");
                assert!(grown > 32768, "{kind}: grown buffer {grown}");
                let start = Instant::now();
                let mut shrunk = grown;
                while shrunk >= grown && start.elapsed() < Duration::from_secs(5) {
                    c.call(&["SET", "x", "small"]);
                    shrunk = read_buffer_of(&mut admin, "watched").0;
                    std::thread::sleep(Duration::from_millis(10));
                }
                assert!(
                    shrunk > 0 && shrunk < grown,
                    "{kind}: {grown} became {shrunk}"
                );
                // Redis trims a shrinking buffer to its recent peak (one of these SETs, 31 bytes)
                // and frees an idle one only if over 4 KiB of it is free, so a buffer left at its
                // peak would stay; its next read makes room for 16 KiB again, as a client's would.
                c.call(&["SET", "x", "small"]);

                let start = Instant::now();
                let idle = loop {
                    let (size, idle) = read_buffer_of(&mut admin, "watched");
                    if size == 0 || start.elapsed() > Duration::from_secs(15) {
                        break (size, idle);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                };
                assert!(
                    idle.0 == 0 && idle.1 >= 2,
                    "{kind}: idle client's buffer {idle:?}"
                );
                assert_eq!(
                    c.call_decoded(&["GET", "x"]),
                    Reply::Bulk(Some(b"small".to_vec()))
                );
                let (again, _) = read_buffer_of(&mut admin, "watched");
                assert!(again > 0, "{kind}: buffer in use again {again}");
            });
        }
    });
}

#[test]
fn clients_do_not_keep_the_room_of_big_replies() {
    // Eight clients each read a 900 KB value: the room their replies took is given back once the
    // replies have gone, not kept for the next batch (Redis keeps at most 16 KiB per client), so
    // used_memory is back near where it was at once, and the clients are served as before.
    let strata = Server::strata(&["--threads", "2"]);
    let mut admin = strata.conn();
    let big = "x".repeat(900_000);
    admin.call(&["SET", "big", &big]);
    let mut clients: Vec<Conn> = (0..8).map(|_| strata.conn()).collect();
    // Measured once the admin and reader connections exist (and their buffers were allocated).
    for c in &mut clients {
        assert_eq!(c.call_decoded(&["PING"]), Reply::Simple(b"PONG".to_vec()));
    }
    let baseline = info_u64(&mut admin, "memory", "used_memory");
    for c in &mut clients {
        assert_eq!(
            c.call_decoded(&["GET", "big"]),
            Reply::Bulk(Some(big.clone().into_bytes()))
        );
    }
    let held = info_u64(&mut admin, "memory", "used_memory");
    assert!(held < baseline + (1 << 20), "{held} vs {baseline}");
    for c in &mut clients {
        assert_eq!(c.call_decoded(&["STRLEN", "big"]), Reply::Integer(900_000));
    }
}
