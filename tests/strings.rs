//! The string family, reply for reply against redis-server: GET/SET and every SET option, SETNX, SETEX,
//! PSETEX, GETEX, GETDEL, GETSET, MGET/MSET/MSETNX (also with keys on different shards), APPEND, STRLEN,
//! the INCR family, INCRBYFLOAT, GETRANGE/SUBSTR, SETRANGE and LCS, with their error replies.
//!
//! Strata runs with two threads, so keys in the lower half of the slot space live on one shard and keys in
//! the upper half on the other; the cross-shard tests pick their keys accordingly (and check that they do).
//! TTLs are compared with a tolerance, everything else byte for byte.

use crate::harness::{
    encode_command, hash_slot, key_on, now_ms, pttl_near, shard_of, Diff, Reply, Server,
};

/// Keys on shard 0 and on shard 1 (asserted by `test_keys_span_both_shards`).
const LOW: [&str; 3] = ["b", "c", "bar"];
const HIGH: [&str; 3] = ["a", "d", "foo"];

/// Asserts both servers report the same OBJECT ENCODING for `key`.
fn same_encoding(d: &mut Diff, key: &str) {
    d.run(&["OBJECT", "ENCODING", key]);
}

#[test]
fn test_keys_span_both_shards() {
    assert_eq!(hash_slot("123456789"), 0x31C3, "CRC16/XMODEM check value");
    assert!(LOW.iter().all(|k| shard_of(k) == 0));
    assert!(HIGH.iter().all(|k| shard_of(k) == 1));
}

#[test]
fn get_and_set_values_and_encodings() {
    let mut d = Diff::new();
    d.run(&["GET", "k"]);
    let long = "x".repeat(45);
    let embstr = "y".repeat(44);
    let values: [&[u8]; 12] = [
        b"v",
        b"",
        b"12",
        b"-9223372036854775808",
        b"9223372036854775808",
        b"012",
        b"+1",
        b" 1",
        embstr.as_bytes(),
        long.as_bytes(),
        b"bin\x00ary\r\n",
        b"1.5",
    ];
    for v in values {
        d.run(&[&b"SET"[..], b"k", v]);
        d.run(&["GET", "k"]);
        d.run(&["STRLEN", "k"]);
        same_encoding(&mut d, "k");
    }
    d.run(&["SET", "k", "v"]);
    d.run(&["TYPE", "k"]);
    d.run(&["TTL", "k"]);
}

#[test]
fn set_nx_xx_get_combinations() {
    let mut d = Diff::new();
    d.run_all(&[
        &["SET", "k", "1", "XX"][..],
        &["GET", "k"],
        &["SET", "k", "1", "NX"],
        &["SET", "k", "2", "nx"],
        &["SET", "k", "3", "xx"],
        &["GET", "k"],
        &["SET", "k", "4", "GET"],
        &["SET", "k", "5", "NX", "GET"],
        &["SET", "k", "6", "XX", "GET"],
        &["GET", "k"],
        &["SET", "new", "v", "NX", "GET"],
        &["GET", "new"],
        &["SET", "none", "v", "XX", "GET"],
        &["EXISTS", "none"],
        &["SET", "none", "v", "GET"],
        &["SET", "k", "7", "NX", "NX"],
        &["SET", "k", "8", "GET", "GET"],
        &["SET", "k", "9", "xx", "xx", "get"],
        &["GET", "k"],
    ]);
}

#[test]
fn set_syntax_and_expire_errors() {
    let mut d = Diff::new();
    d.run(&["SET", "k", "v"]);
    for bad in [
        &["SET", "k", "v", "NX", "XX"][..],
        &["SET", "k", "v", "XX", "NX"],
        &["SET", "k", "v", "EX"],
        &["SET", "k", "v", "PX"],
        &["SET", "k", "v", "EX", "10", "PX", "10"],
        &["SET", "k", "v", "PX", "10", "EX", "10"],
        &["SET", "k", "v", "EX", "10", "EXAT", "10"],
        &["SET", "k", "v", "EXAT", "10", "PXAT", "10"],
        &["SET", "k", "v", "PXAT", "10", "PX", "10"],
        &["SET", "k", "v", "EX", "10", "KEEPTTL"],
        &["SET", "k", "v", "KEEPTTL", "PX", "10"],
        &["SET", "k", "v", "PERSIST"],
        &["SET", "k", "v", "FOO"],
        &["SET", "k", "v", "NXX"],
        &["SET", "k", "v", "10"],
        &["SET", "k", "v", "EX", "0"],
        &["SET", "k", "v", "EX", "-1"],
        &["SET", "k", "v", "PX", "0"],
        &["SET", "k", "v", "EXAT", "0"],
        &["SET", "k", "v", "PXAT", "-10"],
        &["SET", "k", "v", "EX", "9223372036854776"],
        &["SET", "k", "v", "EXAT", "9223372036854776"],
        &["SET", "k", "v", "PX", "9223372036854775807"],
        &["SET", "k", "v", "EX", "1.5"],
        &["SET", "k", "v", "EX", "abc"],
        &["SET", "k", "v", "PX", "99999999999999999999"],
        &["SET", "k"],
        &["SET"],
    ] {
        d.run(bad);
    }
    // Nothing above changed the key.
    d.run(&["GET", "k"]);
    d.run(&["TTL", "k"]);
    // An expiry given twice: the last one wins and the first is never validated.
    d.run(&["SET", "k", "v", "EX", "abc", "EX", "100"]);
    pttl_near(&mut d, "k", 100_000);
}

#[test]
fn set_expiry_options() {
    let mut d = Diff::new();
    d.run(&["SET", "k", "v", "EX", "100"]);
    pttl_near(&mut d, "k", 100_000);
    d.run(&["SET", "k", "v", "PX", "50000"]);
    pttl_near(&mut d, "k", 50_000);
    let exat = (now_ms() / 1000 + 200).to_string();
    d.run(&["SET", "k", "v", "EXAT", &exat]);
    pttl_near(&mut d, "k", 200_000);
    let pxat = (now_ms() + 300_000).to_string();
    d.run(&["SET", "k", "v", "PXAT", &pxat]);
    pttl_near(&mut d, "k", 300_000);
    d.run(&["SET", "k", "w", "KEEPTTL"]);
    pttl_near(&mut d, "k", 300_000);
    d.run(&["SET", "k", "x", "KEEPTTL", "GET"]);
    pttl_near(&mut d, "k", 300_000);
    d.run(&["SET", "k", "y"]);
    d.run(&["TTL", "k"]);
    d.run(&["SET", "k", "v", "NX", "EX", "10"]);
    d.run(&["TTL", "k"]);
    d.run(&["SET", "k", "v", "XX", "PX", "10000", "GET"]);
    pttl_near(&mut d, "k", 10_000);
    // Far-future deadlines are accepted.
    d.run(&["SET", "far", "v", "EXAT", "9223372036854775"]);
    d.run(&["EXISTS", "far"]);
    d.run(&["SET", "far", "v", "PXAT", "9223372036854775807"]);
    d.run(&["EXISTS", "far"]);
    // A deadline already past stores a key that is already gone.
    d.run(&["SET", "gone", "v", "PXAT", "1"]);
    d.run(&["GET", "gone"]);
    d.run(&["EXISTS", "gone"]);
    d.run(&["SET", "gone", "v", "EXAT", "1", "GET"]);
    d.run(&["GET", "gone"]);
}

#[test]
fn keys_expire_on_time() {
    let mut d = Diff::new();
    d.run(&["SET", "k", "v", "PX", "100"]);
    d.run(&["PSETEX", "p", "100", "v"]);
    std::thread::sleep(std::time::Duration::from_millis(250));
    d.run(&["GET", "k"]);
    d.run(&["GET", "p"]);
    d.run(&["SETNX", "k", "again"]);
    d.run(&["GET", "k"]);
}

#[test]
fn setnx_setex_psetex() {
    let mut d = Diff::new();
    d.run_all(&[
        &["SETNX", "k", "a"][..],
        &["SETNX", "k", "b"],
        &["GET", "k"],
        &["SETNX", "k"],
        &["SETNX", "k", "a", "b"],
        &["SETEX", "k", "100", "b"],
        &["GET", "k"],
    ]);
    pttl_near(&mut d, "k", 100_000);
    d.run(&["PSETEX", "k", "5000", "c"]);
    pttl_near(&mut d, "k", 5_000);
    d.run(&["GET", "k"]);
    same_encoding(&mut d, "k");
    d.run(&["SETEX", "n", "100", "12345"]);
    same_encoding(&mut d, "n");
    for bad in [
        &["SETEX", "k", "0", "v"][..],
        &["SETEX", "k", "-5", "v"],
        &["SETEX", "k", "x", "v"],
        &["SETEX", "k", "9223372036854776", "v"],
        &["PSETEX", "k", "0", "v"],
        &["PSETEX", "k", "-1", "v"],
        &["PSETEX", "k", "1.0", "v"],
        &["PSETEX", "k", "9223372036854775807", "v"],
        &["SETEX", "k", "10"],
        &["PSETEX", "k", "10", "v", "x"],
    ] {
        d.run(bad);
    }
    d.run(&["GET", "k"]);
}

#[test]
fn getex_options_and_errors() {
    let mut d = Diff::new();
    d.run(&["GETEX", "k"]);
    // A missing key answers nil before its options' values are looked at.
    d.run(&["GETEX", "k", "EX", "-1"]);
    d.run(&["GETEX", "k", "PX", "abc"]);
    d.run(&["SET", "k", "v"]);
    d.run(&["GETEX", "k"]);
    d.run(&["TTL", "k"]);
    d.run(&["GETEX", "k", "EX", "100"]);
    pttl_near(&mut d, "k", 100_000);
    d.run(&["GETEX", "k", "PX", "50000"]);
    pttl_near(&mut d, "k", 50_000);
    let exat = (now_ms() / 1000 + 200).to_string();
    d.run(&["GETEX", "k", "EXAT", &exat]);
    pttl_near(&mut d, "k", 200_000);
    let pxat = (now_ms() + 300_000).to_string();
    d.run(&["GETEX", "k", "pxat", &pxat]);
    pttl_near(&mut d, "k", 300_000);
    d.run(&["GETEX", "k"]);
    pttl_near(&mut d, "k", 300_000);
    d.run(&["GETEX", "k", "PERSIST"]);
    d.run(&["TTL", "k"]);
    d.run(&["GETEX", "k", "persist", "PERSIST"]);
    d.run(&["GETEX", "k", "EX", "abc", "EX", "100"]);
    pttl_near(&mut d, "k", 100_000);
    for bad in [
        &["GETEX", "k", "EX", "0"][..],
        &["GETEX", "k", "EX", "-1"],
        &["GETEX", "k", "PX", "0"],
        &["GETEX", "k", "EXAT", "0"],
        &["GETEX", "k", "EX", "9223372036854776"],
        &["GETEX", "k", "PX", "9223372036854775807"],
        &["GETEX", "k", "EX", "x"],
        &["GETEX", "k", "EX"],
        &["GETEX", "k", "EX", "10", "PERSIST"],
        &["GETEX", "k", "PERSIST", "EX", "10"],
        &["GETEX", "k", "EX", "10", "PX", "10"],
        &["GETEX", "k", "KEEPTTL"],
        &["GETEX", "k", "NX"],
        &["GETEX", "k", "XX"],
        &["GETEX", "k", "GET"],
        &["GETEX", "k", "FOO"],
        &["GETEX"],
    ] {
        d.run(bad);
    }
    pttl_near(&mut d, "k", 100_000);
    // An absolute deadline already past deletes the key after answering.
    d.run(&["GETEX", "k", "PXAT", "1"]);
    d.run(&["EXISTS", "k"]);
    d.run(&["SET", "k", "v"]);
    d.run(&["GETEX", "k", "EXAT", "1"]);
    d.run(&["EXISTS", "k"]);
}

#[test]
fn getdel_and_getset() {
    let mut d = Diff::new();
    d.run_all(&[
        &["GETDEL", "k"][..],
        &["SET", "k", "12"],
        &["GETDEL", "k"],
        &["EXISTS", "k"],
        &["GETDEL", "k"],
        &["GETDEL"],
        &["GETDEL", "k", "x"],
        &["GETSET", "k", "a"],
        &["GETSET", "k", "b"],
        &["GET", "k"],
        &["SET", "k", "v", "EX", "100"],
        &["GETSET", "k", "100"],
        &["TTL", "k"],
        &["GETSET", "k"],
    ]);
    same_encoding(&mut d, "k");
}

#[test]
fn mget_mset_msetnx_on_one_shard() {
    let mut d = Diff::new();
    d.run_all(&[
        &["MSET", "{t}a", "1", "{t}b", "2", "{t}a", "3"][..],
        &["MGET", "{t}a", "{t}b", "{t}c"],
        &["MSET", "{t}a", "1", "{t}b"],
        &["MSET", "{t}a"],
        &["MGET"],
        &["MSETNX", "{t}c", "1", "{t}a", "9"],
        &["MGET", "{t}a", "{t}c"],
        &["MSETNX", "{t}c", "1", "{t}d", "2"],
        &["MGET", "{t}c", "{t}d"],
        &["MSETNX", "{t}e", "1", "{t}f"],
        &["MSETNX", "{t}e"],
        &["SET", "{t}x", "v", "EX", "100"],
        &["MSET", "{t}x", "w"],
        &["TTL", "{t}x"],
    ]);
    same_encoding(&mut d, "{t}a");
}

#[test]
fn mget_mset_msetnx_across_shards() {
    let mut d = Diff::new();
    let (a, b, c, dd) = (HIGH[0], LOW[0], LOW[1], HIGH[1]);
    d.run(&["MSET", a, "1", b, "2", c, "3", dd, "4", a, "5"]);
    d.run(&["MGET", a, b, c, dd, "missing", HIGH[2], LOW[2]]);
    d.run(&["MSET", a, "1", b]);
    d.run(&["MSETNX", a, "1", b]);
    // One existing key on either shard stops the whole MSETNX.
    d.run(&["MSETNX", HIGH[2], "x", LOW[2], "y", a, "z"]);
    d.run(&["MSETNX", LOW[2], "x", HIGH[2], "y", b, "z"]);
    d.run(&["MGET", HIGH[2], LOW[2], a, b]);
    d.run(&["MSETNX", HIGH[2], "x", LOW[2], "y"]);
    d.run(&["MGET", HIGH[2], LOW[2]]);
    d.run(&["SET", a, "v", "EX", "100"]);
    d.run(&["MSET", a, "w", b, "u"]);
    d.run(&["TTL", a]);
    d.run(&["MGET", a, b]);
    for k in [a, b] {
        same_encoding(&mut d, k);
    }
    // Coordinators work on the selected database.
    d.run_all(&[
        &["SELECT", "3"][..],
        &["MSET", a, "db3", b, "db3"],
        &["MSETNX", HIGH[2], "db3", LOW[2], "db3"],
        &["MGET", a, b, HIGH[2], LOW[2]],
        &["LCS", a, b],
        &["SELECT", "0"],
        &["MGET", a, b, HIGH[2], LOW[2]],
    ]);
}

#[test]
fn append_and_strlen() {
    let mut d = Diff::new();
    d.run_all(&[
        &["STRLEN", "k"][..],
        &["APPEND", "k", "12"],
        &["STRLEN", "k"],
    ]);
    same_encoding(&mut d, "k");
    d.run(&["APPEND", "k", ""]);
    same_encoding(&mut d, "k");
    d.run_all(&[
        &["APPEND", "k", "34"][..],
        &["GET", "k"],
        &["STRLEN", "k"],
        &["SET", "n", "-100"],
        &["STRLEN", "n"],
        &["SET", "e", "hello", "EX", "100"],
        &["APPEND", "e", " world"],
        &["GET", "e"],
        &["APPEND", "e", "\x00\r\n"],
        &["STRLEN", "e"],
        &["APPEND"],
        &["APPEND", "k"],
        &["STRLEN"],
        &["STRLEN", "k", "x"],
    ]);
    pttl_near(&mut d, "e", 100_000);
    same_encoding(&mut d, "e");
    d.run(&["APPEND", "new", "hello"]);
    same_encoding(&mut d, "new");
    d.run(&["APPEND", "newint", "123"]);
    same_encoding(&mut d, "newint");
}

#[test]
fn incr_decr_family() {
    let mut d = Diff::new();
    d.run_all(&[
        &["INCR", "n"][..],
        &["INCRBY", "n", "10"],
        &["DECR", "n"],
        &["DECRBY", "n", "-5"],
        &["DECRBY", "n", "20"],
        &["GET", "n"],
    ]);
    same_encoding(&mut d, "n");
    d.run(&["SET", "t", "5", "EX", "100"]);
    d.run(&["INCR", "t"]);
    pttl_near(&mut d, "t", 100_000);
    d.run(&["APPEND", "r", "4"]);
    d.run(&["APPEND", "r", "1"]);
    d.run(&["INCR", "r"]);
    same_encoding(&mut d, "r");
    d.run_all(&[
        &["SET", "max", "9223372036854775807"][..],
        &["INCR", "max"],
        &["INCRBY", "max", "1"],
        &["DECRBY", "max", "-1"],
        &["DECRBY", "max", "9223372036854775807"],
        &["SET", "min", "-9223372036854775808"],
        &["DECR", "min"],
        &["INCRBY", "min", "-1"],
        &["DECRBY", "n", "-9223372036854775808"],
        &["INCRBY", "n", "-9223372036854775808"],
        &["INCRBY", "n", "x"],
        &["INCRBY", "n", "9223372036854775808"],
        &["INCRBY", "n", "1.5"],
        &["DECRBY", "n", ""],
        &["INCR"],
        &["INCR", "n", "1"],
        &["INCRBY", "n"],
        &["DECRBY", "n"],
        &["DECR", "n", "1"],
    ]);
    for bad in [
        "abc",
        " 1",
        "1 ",
        "01",
        "+1",
        "1.0",
        "",
        "99999999999999999999",
    ] {
        d.run(&["SET", "bad", bad]);
        d.run(&["INCR", "bad"]);
        d.run(&["DECRBY", "bad", "1"]);
    }
}

/// Redis adds in x87 `long double` and prints 17 decimals; strata adds in f64 (exactly for two integers)
/// and prints 15 significant digits. The two agree on the values below; they differ past 15 significant
/// digits (where Redis prints binary noise such as `1234567.12345678899998802`), beyond f64's range
/// (`1e400`) and for hexadecimal input, none of which is exercised here.
#[test]
fn incrbyfloat() {
    let mut d = Diff::new();
    d.run_all(&[
        &["INCRBYFLOAT", "f", "10.5"][..],
        &["INCRBYFLOAT", "f", "0.1"],
        &["INCRBYFLOAT", "f", "-10.6"],
        &["INCRBYFLOAT", "f", "5.0e3"],
        &["INCRBYFLOAT", "f", "-5000"],
        &["INCRBYFLOAT", "f", "1.1"],
        &["INCRBYFLOAT", "f", "2.2"],
        &["INCRBYFLOAT", "f", "-3.3"],
        &["INCRBYFLOAT", "f", "3.0e3"],
        &["INCRBYFLOAT", "f", "+1.5"],
        &["INCRBYFLOAT", "f", ".5"],
        &["INCRBYFLOAT", "f", "-0.25"],
        &["GET", "f"],
        &["SET", "i", "9223372036854775807"],
        &["INCRBYFLOAT", "i", "1"],
        &["SET", "j", "-9223372036854775808"],
        &["INCRBYFLOAT", "j", "-9223372036854775808"],
        &["SET", "k", "17"],
        &["INCRBYFLOAT", "k", "0"],
    ]);
    same_encoding(&mut d, "f");
    same_encoding(&mut d, "k");
    d.run(&["SET", "t", "1", "EX", "100"]);
    d.run(&["INCRBYFLOAT", "t", "1.5"]);
    pttl_near(&mut d, "t", 100_000);
    d.run_all(&[
        &["INCRBYFLOAT", "f", "x"][..],
        &["INCRBYFLOAT", "f", "nan"],
        &["INCRBYFLOAT", "f", ""],
        &["INCRBYFLOAT", "f", " 1"],
        &["INCRBYFLOAT", "f", "1 "],
        &["INCRBYFLOAT", "f", "1e"],
        &["INCRBYFLOAT", "f", "inf"],
        &["INCRBYFLOAT", "f", "-inf"],
        &["INCRBYFLOAT", "f"],
        &["SET", "bad", "1x"],
        &["INCRBYFLOAT", "bad", "1"],
        &["INCRBYFLOAT", "bad", "x"],
        &["GET", "f"],
    ]);
}

#[test]
fn getrange_and_substr() {
    let mut d = Diff::new();
    d.run(&["GETRANGE", "k", "0", "-1"]);
    d.run(&["GETRANGE", "k", "a", "-1"]);
    d.run(&["SET", "k", "This is a string"]);
    for (start, end) in [
        ("0", "3"),
        ("-3", "-1"),
        ("0", "-1"),
        ("10", "100"),
        ("5", "3"),
        ("-1", "-5"),
        ("-100", "2"),
        ("-100", "-100"),
        ("100", "200"),
        ("15", "15"),
        ("16", "16"),
        ("0", "0"),
        ("-9223372036854775808", "9223372036854775807"),
        ("9223372036854775807", "-9223372036854775808"),
    ] {
        d.run(&["GETRANGE", "k", start, end]);
        d.run(&["SUBSTR", "k", start, end]);
    }
    d.run(&["SET", "n", "-1234"]);
    d.run(&["SUBSTR", "n", "1", "2"]);
    d.run(&["GETRANGE", "n", "-2", "-1"]);
    d.run(&["SET", "e", ""]);
    d.run(&["GETRANGE", "e", "0", "-1"]);
    d.run(&["GETRANGE", "e", "-1", "0"]);
    d.run_all(&[
        &["GETRANGE", "k", "a", "1"][..],
        &["GETRANGE", "k", "1", "1.5"],
        &["GETRANGE", "k", "1"],
        &["SUBSTR", "k", "1", "2", "3"],
    ]);
}

#[test]
fn setrange() {
    let mut d = Diff::new();
    d.run(&["SETRANGE", "k", "5", ""]);
    d.run(&["EXISTS", "k"]);
    d.run(&["SETRANGE", "k", "2", "ab"]);
    d.run(&["GET", "k"]);
    same_encoding(&mut d, "k");
    d.run(&["SET", "h", "Hello World", "EX", "100"]);
    d.run(&["SETRANGE", "h", "6", "Redis"]);
    d.run(&["GET", "h"]);
    pttl_near(&mut d, "h", 100_000);
    d.run(&["SETRANGE", "h", "100", ""]);
    d.run(&["SETRANGE", "h", "13", "!"]);
    d.run(&["GET", "h"]);
    d.run(&["SET", "n", "123"]);
    d.run(&["SETRANGE", "n", "1", "9"]);
    d.run(&["GET", "n"]);
    same_encoding(&mut d, "n");
    d.run(&["SET", "m", "123"]);
    d.run(&["SETRANGE", "m", "0", ""]);
    same_encoding(&mut d, "m");
    d.run_all(&[
        &["SETRANGE", "k", "-1", "x"][..],
        &["SETRANGE", "k", "x", "x"],
        &["SETRANGE", "k", "1.5", "x"],
        &["SETRANGE", "k", "536870912", "x"],
        &["SETRANGE", "k", "536870911", "xy"],
        &["SETRANGE", "z", "9223372036854775807", "x"],
        &["SETRANGE", "z", "9223372036854775808", "x"],
        &["SETRANGE", "z", "-1", ""],
        &["EXISTS", "z"],
        &["SETRANGE", "k", "1"],
        &["SETRANGE", "k", "1", "x", "y"],
    ]);
}

#[test]
fn lcs_on_one_shard() {
    let mut d = Diff::new();
    d.run(&["MSET", "{x}a", "ohmytext", "{x}b", "mynewtext"]);
    for opts in [
        &[][..],
        &["LEN"],
        &["IDX"],
        &["idx", "WITHMATCHLEN"],
        &["IDX", "MINMATCHLEN", "4"],
        &["IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"],
        &["IDX", "MINMATCHLEN", "-3"],
        &["IDX", "MINMATCHLEN", "100"],
        &["LEN", "MINMATCHLEN", "2"],
        &["WITHMATCHLEN"],
        &["LEN", "IDX"],
        &["MINMATCHLEN"],
        &["MINMATCHLEN", "x"],
        &["FOO"],
        &["LEN", "LEN"],
    ] {
        let mut cmd = vec!["LCS", "{x}a", "{x}b"];
        cmd.extend_from_slice(opts);
        d.run(&cmd);
    }
    d.run(&["LCS", "{x}a", "{x}missing"]);
    d.run(&["LCS", "{x}missing", "{x}a", "IDX"]);
    d.run(&["LCS", "{x}a", "{x}a", "IDX", "WITHMATCHLEN"]);
    d.run(&["SET", "{x}n", "12345"]);
    d.run(&["SET", "{x}m", "a1b2c3d4e5"]);
    d.run(&["LCS", "{x}n", "{x}m", "IDX", "WITHMATCHLEN"]);
    d.run(&["LCS", "{x}n", "{x}m"]);
    d.run(&["SET", "{x}p", "abcabcabcabcxyzzyxabc"]);
    d.run(&["SET", "{x}q", "zzabcyxcbaabccbazyx"]);
    d.run(&["LCS", "{x}p", "{x}q", "IDX", "WITHMATCHLEN"]);
    d.run(&["LCS", "{x}q", "{x}p", "IDX", "WITHMATCHLEN"]);
    d.run(&["LCS", "{x}p", "{x}q"]);
    d.run(&["LCS", "{x}a"]);
    // The transient table is limited like Redis limits it.
    let big = "a".repeat(12_000);
    d.run(&["SET", "{x}big", &big]);
    d.run(&["LCS", "{x}big", "{x}big", "LEN"]);
}

#[test]
fn lcs_across_shards() {
    let mut d = Diff::new();
    let (a, b) = (HIGH[0], LOW[0]);
    d.run(&["MSET", a, "ohmytext", b, "mynewtext"]);
    d.run(&["LCS", a, b]);
    d.run(&["LCS", b, a, "LEN"]);
    d.run(&["LCS", a, b, "IDX", "MINMATCHLEN", "2", "WITHMATCHLEN"]);
    d.run(&["LCS", a, LOW[1]]);
    d.run(&["LCS", a, b, "BAD"]);
    d.run(&["LCS", a, b, "LEN", "IDX"]);
}

#[test]
fn lcs_idx_in_resp3_is_a_map() {
    let mut d = Diff::new();
    d.run_matching(&["HELLO", "3"], |r| {
        r.get("proto").and_then(Reply::as_int) == Some(3)
    });
    d.run(&["MSET", "{x}a", "ohmytext", "{x}b", "mynewtext"]);
    d.run(&["LCS", "{x}a", "{x}b", "IDX", "WITHMATCHLEN"]);
    d.run(&["GET", "{x}missing"]);
    d.run(&["SET", "{x}a", "v", "XX", "NX"]);
    d.run(&["SET", "{x}c", "v", "XX"]);
    d.run(&["MGET", "{x}a", "{x}missing"]);
    d.run(&["GETEX", "{x}missing"]);
}

/// The INFO stats counters string commands move, as (keyspace_hits, keyspace_misses, expired_keys).
fn key_counters(conn: &mut crate::harness::Conn) -> (String, String, String) {
    let info = conn.call_decoded(&["INFO", "stats"]);
    let text = String::from_utf8_lossy(info.as_bytes().unwrap_or_default()).into_owned();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or("absent")
            .to_string()
    };
    (
        field("keyspace_hits"),
        field("keyspace_misses"),
        field("expired_keys"),
    )
}

/// Reads count hits and misses, writes do not, exactly as in Redis (SET with GET reads; APPEND, INCR,
/// SETRANGE, SETNX and MSETNX only look keys up for writing).
#[test]
fn keyspace_hits_and_misses_match() {
    let mut d = Diff::new();
    let (a, b) = (HIGH[0], LOW[0]);
    d.run_all(&[
        &["GET", "k"][..],
        &["SET", "k", "v"],
        &["GET", "k"],
        &["SET", "k", "w", "GET"],
        &["SET", "k2", "w", "GET"],
        &["SET", "k", "x", "NX"],
        &["SETNX", "k", "y"],
        &["GETEX", "k", "PX", "100000"],
        &["GETEX", "missing"],
        &["GETSET", "k", "z"],
        &["GETDEL", "k2"],
        &["GETDEL", "k2"],
        &["MGET", "k", "k2", "k3"],
        &["MGET", a, b],
        &["MSET", a, "1", b, "2"],
        &["MGET", a, b, "k"],
        &["MSETNX", a, "1", b, "2"],
        &["APPEND", "k", "1"],
        &["APPEND", "k4", "1"],
        &["STRLEN", "k"],
        &["STRLEN", "k5"],
        &["INCR", "n"],
        &["INCRBYFLOAT", "n", "1.5"],
        &["GETRANGE", "k", "0", "1"],
        &["GETRANGE", "k6", "0", "1"],
        &["SETRANGE", "k", "0", "a"],
        &["LCS", "k", "k4"],
        &["LCS", a, b],
        &["SET", "short", "v", "PX", "1"],
    ]);
    std::thread::sleep(std::time::Duration::from_millis(50));
    d.run(&["GET", "short"]);
    let (hits, misses, expired) = d.both(key_counters);
    assert!(
        hits != "0" && misses != "0" && expired == "1",
        "counters not reported: hits {hits}, misses {misses}, expired {expired}"
    );
}

/// A pipeline mixing single-shard and cross-shard string commands answers in order, each command seeing
/// the effects of the ones before it.
#[test]
fn pipelined_single_and_cross_shard_commands_keep_order() {
    let mut d = Diff::new();
    let (a, b, c) = (HIGH[0], LOW[0], HIGH[1]);
    let commands: [&[&str]; 12] = [
        &["SET", a, "1"],
        &["MSET", a, "2", b, "3"],
        &["INCR", a],
        &["MGET", a, b, c],
        &["MSETNX", b, "x", c, "y"],
        &["MSETNX", c, "4", "{t}z", "5"],
        &["APPEND", b, "0"],
        &["MGET", a, b, c, "{t}z"],
        &["LCS", a, b],
        &["GETDEL", c],
        &["MGET", c, a],
        &["INCRBYFLOAT", b, "0.5"],
    ];
    let pipeline: Vec<u8> = commands.iter().flat_map(|c| encode_command(c)).collect();
    d.run_raw(&pipeline);
}

#[test]
fn arity_errors() {
    let mut d = Diff::new();
    for cmd in [
        &["GET"][..],
        &["GET", "a", "b"],
        &["SET", "a"],
        &["SETNX", "a"],
        &["SETEX", "a", "1"],
        &["PSETEX", "a", "1"],
        &["GETEX"],
        &["GETDEL"],
        &["GETSET", "a"],
        &["MGET"],
        &["MSET"],
        &["MSET", "a"],
        &["MSETNX", "a"],
        &["APPEND", "a"],
        &["STRLEN"],
        &["INCR"],
        &["DECR"],
        &["INCRBY", "a"],
        &["DECRBY", "a"],
        &["INCRBYFLOAT", "a"],
        &["GETRANGE", "a", "1"],
        &["SUBSTR", "a", "1"],
        &["SETRANGE", "a", "1"],
        &["LCS", "a"],
    ] {
        d.run(cmd);
    }
}

#[test]
fn wrong_type_errors() {
    let mut d = Diff::new();
    d.run(&["LPUSH", "l", "a"]);
    for cmd in [
        &["GET", "l"][..],
        &["SET", "l", "v", "GET"],
        &["GETEX", "l", "EX", "-1"],
        &["GETDEL", "l"],
        &["GETSET", "l", "v"],
        &["APPEND", "l", "v"],
        &["STRLEN", "l"],
        &["INCR", "l"],
        &["INCRBYFLOAT", "l", "1"],
        &["GETRANGE", "l", "0", "-1"],
        &["SETRANGE", "l", "0", "v"],
        &["SETRANGE", "l", "0", ""],
        &["LCS", "l", "l"],
        &["LCS", "l", "l", "BAD"],
        &["MGET", "l", "missing"],
        &["MSETNX", "l", "v"],
        &["TYPE", "l"],
    ] {
        d.run(cmd);
    }
    d.run(&["SET", "l", "v"]);
    d.run(&["GET", "l"]);
}

/// Two clients race MSETNX over the same two keys (one per shard, named in opposite orders): in every
/// round exactly one of them wins, and both keys hold the winner's values.
#[test]
fn msetnx_across_shards_is_atomic() {
    let server = Server::strata(&["--threads", "2"]);
    const ROUNDS: usize = 300;
    let outcomes: Vec<Vec<i64>> = std::thread::scope(|s| {
        let clients: Vec<_> = (0..2)
            .map(|c| {
                let server = &server;
                s.spawn(move || {
                    let mut conn = server.conn();
                    (0..ROUNDS)
                        .map(|i| {
                            let (lo, hi) =
                                (key_on(0, &format!("r{i}")), key_on(1, &format!("r{i}")));
                            let keys = if c == 0 { [lo, hi] } else { [hi, lo] };
                            let value = format!("client{c}");
                            let reply =
                                conn.call_decoded(&["MSETNX", &keys[0], &value, &keys[1], &value]);
                            reply.as_int().expect("MSETNX answers an integer")
                        })
                        .collect()
                })
            })
            .collect();
        clients
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let mut conn = server.conn();
    for (i, (first, second)) in outcomes[0].iter().zip(&outcomes[1]).enumerate() {
        assert_eq!(first + second, 1, "round {i}: replies {first} and {second}");
        let winner = if *first == 1 { "client0" } else { "client1" };
        let (lo, hi) = (key_on(0, &format!("r{i}")), key_on(1, &format!("r{i}")));
        let values = conn.call_decoded(&["MGET", &lo, &hi]);
        let want = Reply::Bulk(Some(winner.as_bytes().to_vec()));
        assert_eq!(
            values,
            Reply::Array(Some(vec![want.clone(), want])),
            "round {i}"
        );
    }
}

/// INCRBYFLOAT adds in Redis's `long double` and prints `%.17Lf` trimmed: results that f64 would
/// round differently (1/41 then -1/41 is "0"; 5000 + 1.5e-5 keeps its 21 digits), integers past
/// i64, inf increments and non-float values.
#[test]
fn incrbyfloat_is_long_double_arithmetic() {
    let mut d = Diff::new();
    for (key, by) in [
        ("a", "0.024390243902439025"),
        ("a", "-0.024390243902439025"),
        ("b", "5000"),
        ("b", "1.5e-5"),
        ("c", "0.1"),
        ("c", "0.2"),
        ("c", "-0.3"),
        ("d", "1e308"),
        ("d", "1e308"),
        ("e", "inf"),
        ("e", "nan"),
        ("e", "1e5000"),
        ("f", "3.0e3"),
        ("f", "-0.0000000000000000001"),
    ] {
        d.run(&["INCRBYFLOAT", key, by]);
        d.run(&["GET", key]);
    }
    d.run(&["SET", "i", "9223372036854775807"]);
    d.run(&["INCRBYFLOAT", "i", "1"]);
    d.run(&["SET", "s", "abc"]);
    d.run(&["INCRBYFLOAT", "s", "1"]);
}

/// MGET, MSET, DEL, UNLINK, EXISTS and TOUCH pipelined with keys on several shards: each is split
/// into one command per shard that joins the pipeline's sub-batches, and its reply is merged back
/// (elements in key order, integers added up, OK once). Reply for reply against redis-server, in
/// RESP2 and RESP3, with repeated and missing keys, a wrong type, an odd MSET (the arity error),
/// and the calls INFO commandstats counts (one per command, not per part).
#[test]
fn pipelined_multi_key_commands_across_shards_match_redis() {
    // One key in each quarter of the slot space: each on its own shard with four threads.
    let keys: Vec<String> = (0..4).map(|q| crate::harness::key_in(q, "pm")).collect();
    let k: Vec<&str> = keys.iter().map(String::as_str).collect();
    let script: Vec<Vec<&str>> = vec![
        vec!["CONFIG", "RESETSTAT"],
        vec!["MSET", k[0], "a", k[1], "b", k[2], "c", k[3], "d"],
        vec!["MGET", k[3], "nokey", k[2], k[1], k[0], k[3]],
        vec!["EXISTS", k[0], k[1], k[0], "nokey", k[3]],
        vec!["TOUCH", k[2], k[3], "nokey"],
        vec!["RPUSH", "pm:list", "x"],
        vec!["MGET", k[0], "pm:list", k[2]],
        vec!["MSET", k[0], "a2", k[1]],
        vec!["DEL", k[0], k[1], "nokey", k[0]],
        vec!["MGET", k[0], k[1], k[2], k[3]],
        vec!["UNLINK", k[2], k[3], "pm:list"],
        vec!["EXISTS", k[0], k[1], k[2], k[3]],
        vec!["MSET", k[1], "x", k[3], "y"],
        vec!["MGET", k[0], k[1], k[2], k[3]],
    ];
    let run = |s: &Server| -> Vec<String> {
        let mut c = s.conn();
        let mut seen = Vec::new();
        for hello in [None, Some("3")] {
            if let Some(v) = hello {
                c.call(&["HELLO", v]);
            }
            c.call(&["FLUSHALL"]);
            let mut raw = Vec::new();
            for cmd in &script {
                raw.extend(encode_command(cmd));
            }
            c.send_raw(&raw);
            for _ in &script {
                seen.push(String::from_utf8_lossy(&c.read_reply()).to_string());
            }
            let stats = c.call_decoded(&["INFO", "commandstats"]);
            let stats = String::from_utf8_lossy(stats.as_bytes().unwrap_or_default()).to_string();
            for name in ["mget", "mset", "del", "unlink", "exists", "touch"] {
                let calls = stats
                    .lines()
                    .find(|l| l.starts_with(&format!("cmdstat_{name}:")))
                    .and_then(|l| l.split(',').next())
                    .unwrap_or("none")
                    .to_string();
                seen.push(calls);
            }
        }
        seen
    };
    let strata = Server::strata(&["--threads", "4"]);
    let redis = Server::redis(&[]);
    assert_eq!(run(&strata), run(&redis));
}
