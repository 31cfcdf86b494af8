//! DUMP/RESTORE and RDB files against redis-server.
//!
//! * Payloads both ways: every type and encoding DUMPed by redis-server RESTOREs into Strata with
//!   the same content (DEBUG DIGEST-VALUE, byte for byte) and encoding, and Strata's DUMP of the
//!   same keys RESTOREs into redis-server with the content it had there.
//! * RESTORE's options and every error reply, compared with Redis's.
//! * Files: one redis-server SAVEd is read completely by `strata_rdb::Reader` with the values,
//!   expiries and encodings Redis has; one `strata_rdb::Writer` wrote passes `redis-check-rdb` and
//!   loads in redis-server with the same values.

use std::path::Path;
use std::process::Command;

use strata_core::{Object, Value};
use strata_rdb::{Access, Item, Reader, WriteOptions, Writer};

use crate::harness::{now_ms, pttl_near, Conn, Diff, Reply, Server};

const DEBUG: &[&str] = &["--enable-debug-command", "yes"];

fn s(v: &str) -> Vec<u8> {
    v.as_bytes().to_vec()
}

/// Commands building one key of every type and encoding (keys named `type:what`).
fn populate_commands() -> Vec<Vec<Vec<u8>>> {
    let mut c: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut cmd = |words: &[&[u8]]| c.push(words.iter().map(|w| w.to_vec()).collect());
    // Elements of at least 1000 bytes go into PLAIN quicklist nodes.
    cmd(&[b"DEBUG", b"QUICKLIST-PACKED-THRESHOLD", b"1000"]);
    cmd(&[b"SET", b"str:int", b"12345"]);
    cmd(&[b"SET", b"str:bigint", b"9223372036854775807"]);
    cmd(&[b"SET", b"str:neg", b"-70000"]);
    cmd(&[b"SET", b"str:lead0", b"0123"]);
    cmd(&[b"SET", b"str:short", b"hello"]);
    cmd(&[b"SET", b"str:empty", b""]);
    let long = "abcdefgh".repeat(300);
    cmd(&[b"SET", b"str:compressible", long.as_bytes()]);
    let noise: Vec<u8> = (0..700u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    cmd(&[b"SET", b"str:binary", &noise]);
    cmd(&[b"SET", b"str:raw", b"x"]);
    cmd(&[b"APPEND", b"str:raw", b"yz"]);
    cmd(&[
        b"RPUSH",
        b"list:small",
        b"a",
        b"b",
        b"1",
        b"-300",
        b"70000",
        b"",
    ]);
    let mut big = vec![b"RPUSH".to_vec(), b"list:big".to_vec()];
    big.extend((0..2000).map(|i| format!("element-{i}").into_bytes()));
    c.push(big);
    let huge = vec![b'P'; 9000];
    let mut cmd = |words: &[&[u8]]| c.push(words.iter().map(|w| w.to_vec()).collect());
    cmd(&[b"RPUSH", b"list:plain", b"head", &huge, b"tail", &noise]);
    cmd(&[
        b"SADD",
        b"set:intset",
        b"1",
        b"2",
        b"3",
        b"-5",
        b"100000",
        b"5000000000",
    ]);
    cmd(&[b"SADD", b"set:strings", b"a", b"b", b"c", b"1"]);
    let mut c2: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut wide = vec![b"SADD".to_vec(), b"set:bigints".to_vec()];
    wide.extend((0..600).map(|i| format!("{i}").into_bytes()));
    c2.push(wide);
    let mut z = vec![b"ZADD".to_vec(), b"zset:skiplist".to_vec()];
    for i in 0..200 {
        z.push(format!("{}", i as f64 / 7.0 - 10.0).into_bytes());
        z.push(format!("member-{i}").into_bytes());
    }
    c2.push(z);
    let mut h = vec![b"HSET".to_vec(), b"hash:hashtable".to_vec()];
    for i in 0..600 {
        h.push(format!("field-{i}").into_bytes());
        h.push(format!("value-{i}").into_bytes());
    }
    c2.push(h);
    c.extend(c2);
    let long_member = vec![b'm'; 100];
    let mut cmd = |words: &[&[u8]]| c.push(words.iter().map(|w| w.to_vec()).collect());
    cmd(&[
        b"ZADD",
        b"zset:listpack",
        b"1",
        b"a",
        b"0.5",
        b"b",
        b"inf",
        b"c",
        b"-inf",
        b"d",
        b"3.25",
        b"e",
        b"-0",
        b"f",
        b"1e300",
        b"g",
        b"12345678901",
        b"h",
        b"-2.5e-7",
        b"i",
    ]);
    cmd(&[b"ZADD", b"zset:long", b"2", &long_member]);
    cmd(&[
        b"HSET",
        b"hash:listpack",
        b"f",
        b"v",
        b"n",
        b"12",
        b"e",
        b"",
    ]);
    cmd(&[b"HSET", b"hash:long", b"f", &[b'v'; 100]]);
    c
}

/// The keys [`populate_commands`] creates.
fn populated_keys() -> Vec<String> {
    let mut keys: Vec<String> = populate_commands()
        .iter()
        .filter(|c| c[0] != b"DEBUG" && c[0] != b"APPEND")
        .map(|c| String::from_utf8(c[1].clone()).unwrap())
        .collect();
    keys.dedup();
    keys
}

fn populate_both(d: &mut Diff) {
    for c in populate_commands() {
        d.run(&c);
    }
}

#[test]
fn redis_dumps_restore_into_strata_with_the_same_content_and_encoding() {
    let mut d = Diff::with_config(DEBUG);
    populate_both(&mut d);
    // Compressed quicklist nodes (LZF blobs inside QUICKLIST_2) too.
    d.run(&["CONFIG", "SET", "list-compress-depth", "1"]);
    let mut push = vec!["RPUSH".to_string(), "list:compressed".to_string()];
    push.extend((0..3000).map(|i| format!("compressible-element-{:04}", i % 50)));
    d.run(&push);
    let mut keys = populated_keys();
    keys.push("list:compressed".into());
    for k in &keys {
        let payload = Reply::decode(&d.redis.call(&["DUMP", k]));
        let payload = payload.as_bytes().expect("redis dumps the key").to_vec();
        let copy = format!("{k}:copy");
        d.run(&[b"RESTORE", copy.as_bytes(), b"0", &payload]);
        d.run(&["DEBUG", "DIGEST-VALUE", copy.as_str()]);
        d.run(&["DEBUG", "DIGEST-VALUE", k.as_str()]);
        d.run(&["OBJECT", "ENCODING", copy.as_str()]);
        d.run(&["TYPE", copy.as_str()]);
    }
    d.run(&["LRANGE", "list:plain:copy", "0", "-1"]);
    d.run(&["ZRANGE", "zset:listpack:copy", "0", "-1", "WITHSCORES"]);
}

#[test]
fn strata_dumps_restore_into_redis_with_the_same_content() {
    let mut d = Diff::with_config(DEBUG);
    populate_both(&mut d);
    for k in populated_keys() {
        let payload = Reply::decode(&d.strata.call(&["DUMP", &k]));
        let payload = payload.as_bytes().expect("strata dumps the key").to_vec();
        let back = format!("{k}:back");
        d.run(&[b"RESTORE", back.as_bytes(), b"0", &payload]);
        // In Redis: the restored copy has the original's content and encoding.
        let orig = d.redis.call(&["DEBUG", "DIGEST-VALUE", &k]);
        let copy = d.redis.call(&["DEBUG", "DIGEST-VALUE", &back]);
        assert_eq!(orig, copy, "{k}: strata's DUMP restored into redis differs");
        // (A string APPENDed to is "raw" until it is reloaded, in Redis too.)
        let enc = d.redis.call(&["OBJECT", "ENCODING", &k]);
        if k != "str:raw" {
            assert_eq!(enc, d.redis.call(&["OBJECT", "ENCODING", &back]), "{k}");
        }
        d.run(&["DEBUG", "DIGEST-VALUE", back.as_str()]);
        d.run(&["OBJECT", "ENCODING", back.as_str()]);
    }
    d.run(&["DUMP", "missing"]);
}

/// A payload around `body` with the footer Redis would write (version `version`, right CRC).
fn payload(body: &[u8], version: u16) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&version.to_le_bytes());
    let crc = strata_rdb::crc64::crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

#[test]
fn restore_errors_and_options_match_redis() {
    let mut d = Diff::with_config(DEBUG);
    d.run(&["SET", "src", "some value"]);
    d.run(&["RPUSH", "lst", "a", "b"]);
    let good = Reply::decode(&d.redis.call(&["DUMP", "src"]))
        .as_bytes()
        .unwrap()
        .to_vec();
    let r = |d: &mut Diff, args: &[&[u8]]| {
        d.run(args);
    };
    // Arity, syntax and values, in Redis's order of checks.
    r(&mut d, &[b"RESTORE", b"k", b"0"]);
    r(&mut d, &[b"DUMP"]);
    r(&mut d, &[b"DUMP", b"a", b"b"]);
    for opts in [
        &[&b"BOGUS"[..]][..],
        &[b"IDLETIME"],
        &[b"FREQ"],
        &[b"IDLETIME", b"-1"],
        &[b"IDLETIME", b"x"],
        &[b"FREQ", b"256"],
        &[b"FREQ", b"-1"],
        &[b"FREQ", b"1.5"],
        &[b"IDLETIME", b"1", b"FREQ", b"1"],
        &[b"FREQ", b"1", b"IDLETIME", b"1"],
        &[b"REPLACE", b"REPLACE", b"ABSTTL", b"bogus"],
    ] {
        let mut args: Vec<&[u8]> = vec![b"RESTORE", b"k", b"0", &good];
        args.extend_from_slice(opts);
        r(&mut d, &args);
    }
    // Options before the key, the key before the TTL, the TTL before the payload.
    r(&mut d, &[b"RESTORE", b"src", b"0", b"garbage", b"bogus"]);
    r(&mut d, &[b"RESTORE", b"src", b"0", b"garbage"]);
    r(&mut d, &[b"RESTORE", b"k", b"-1", b"garbage"]);
    r(&mut d, &[b"RESTORE", b"k", b"abc", b"garbage"]);
    r(&mut d, &[b"RESTORE", b"k", b"0", b"garbage"]);
    r(&mut d, &[b"RESTORE", b"k", b"0", b""]);
    // Checksum and version.
    let mut flipped = good.clone();
    let n = flipped.len();
    flipped[n - 1] ^= 0x55;
    r(&mut d, &[b"RESTORE", b"k", b"0", &flipped]);
    let v11 = payload(&good[..good.len() - 10], 11);
    r(&mut d, &[b"RESTORE", b"k", b"0", &v11]);
    let v9 = payload(&good[..good.len() - 10], 9);
    r(&mut d, &[b"RESTORE", b"k9", b"0", &v9]);
    r(&mut d, &[b"GET", b"k9"]);
    r(&mut d, &[b"DEBUG", b"SET-SKIP-CHECKSUM-VALIDATION", b"1"]);
    r(&mut d, &[b"RESTORE", b"kskip", b"0", &flipped]);
    r(&mut d, &[b"RESTORE", b"k", b"0", &v11]);
    r(&mut d, &[b"DEBUG", b"SET-SKIP-CHECKSUM-VALIDATION", b"0"]);
    r(&mut d, &[b"RESTORE", b"kskip2", b"0", &flipped]);
    r(&mut d, &[b"GET", b"kskip"]);
    // Bad data behind a right checksum. Strata always checks payloads deeply, which Redis does
    // under sanitize-dump-payload yes (without it, Redis accepts a small hash with a repeated
    // field and builds a broken value).
    r(
        &mut d,
        &[b"CONFIG", b"SET", b"sanitize-dump-payload", b"yes"],
    );
    for body in [
        &[8u8, 1, b'x'][..],                         // not an object type
        &[0xFE, 0],                                  // an opcode
        &[0, 0x3F, b'a', b'b'], // a string cut short (reads into the footer, then fails)
        &[2, 0],                // an empty set
        &[1, 0],                // an empty list
        &[4, 0],                // an empty hash
        &[2, 2, 1, b'a', 1, b'a'], // a set with a repeated member
        &[4, 2, 1, b'f', 1, b'1', 1, b'f', 1, b'2'], // a hash with a repeated field
        &[0, 0xC3, 2, 0x80, 0, 0, 0x10, 0, 0, 1], // LZF that lies about its length
        &[0, 0x81, 0, 0, 1, 0, 0, 0, 0, 0, b'x'], // a 2^40-byte string
    ] {
        r(&mut d, &[b"RESTORE", b"bad", b"0", &payload(body, 10)]);
    }
    r(&mut d, &[b"EXISTS", b"bad"]);
    // BUSYKEY, REPLACE, TTLs.
    r(&mut d, &[b"RESTORE", b"lst", b"0", &good]);
    r(&mut d, &[b"RESTORE", b"lst", b"0", &good, b"REPLACE"]);
    r(&mut d, &[b"GET", b"lst"]);
    r(&mut d, &[b"RESTORE", b"t", b"0", &good]);
    r(&mut d, &[b"PTTL", b"t"]);
    r(&mut d, &[b"RESTORE", b"t2", b"50000", &good]);
    pttl_near(&mut d, "t2", 50000);
    let at = (now_ms() + 100_000).to_string();
    r(
        &mut d,
        &[b"RESTORE", b"t3", at.as_bytes(), &good, b"ABSTTL"],
    );
    r(&mut d, &[b"PEXPIRETIME", b"t3"]);
    // An ABSTTL in the past creates nothing, and with REPLACE removes the old key.
    r(&mut d, &[b"RESTORE", b"past", b"1", &good, b"ABSTTL"]);
    r(&mut d, &[b"EXISTS", b"past"]);
    r(
        &mut d,
        &[b"RESTORE", b"t3", b"1", &good, b"ABSTTL", b"REPLACE"],
    );
    r(&mut d, &[b"EXISTS", b"t3"]);
    r(&mut d, &[b"RESTORE", b"t3", b"1", &good, b"ABSTTL"]);
    // IDLETIME under an LRU clock, FREQ under an LFU policy (ignored otherwise).
    r(
        &mut d,
        &[b"RESTORE", b"idle", b"0", &good, b"IDLETIME", b"1000"],
    );
    d.run_matching(
        &["OBJECT", "IDLETIME", "idle"],
        |r| matches!(r.as_int(), Some(t) if (1000..1003).contains(&t)),
    );
    r(&mut d, &[b"RESTORE", b"fq", b"0", &good, b"FREQ", b"100"]);
    r(
        &mut d,
        &[b"CONFIG", b"SET", b"maxmemory-policy", b"allkeys-lfu"],
    );
    r(&mut d, &[b"RESTORE", b"fq2", b"0", &good, b"FREQ", b"100"]);
    r(&mut d, &[b"OBJECT", b"FREQ", b"fq2"]);
    r(
        &mut d,
        &[b"RESTORE", b"fq3", b"0", &good, b"IDLETIME", b"100"],
    );
    r(&mut d, &[b"OBJECT", b"FREQ", b"fq3"]);
    r(&mut d, &[b"DBSIZE"]);
}

#[test]
fn restore_emits_its_keyspace_event() {
    let mut d = Diff::new();
    d.run(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    d.run(&["SET", "src", "v"]);
    let good = Reply::decode(&d.redis.call(&["DUMP", "src"]))
        .as_bytes()
        .unwrap()
        .to_vec();
    let mut sub = d.new_conns();
    sub.run(&["PSUBSCRIBE", "__key*__:*"]);
    d.run(&[b"RESTORE", &b"k"[..], b"0", &good]);
    // restore, as a keyspace and a keyevent message ("new" is not in KEA).
    for _ in 0..2 {
        let (a, b) = (sub.redis.read_reply(), sub.strata.read_reply());
        assert_eq!(a, b);
    }
    d.run(&[b"RESTORE", &b"k"[..], b"1", &good, b"ABSTTL", b"REPLACE"]);
    for _ in 0..2 {
        let (a, b) = (sub.redis.read_reply(), sub.strata.read_reply());
        assert_eq!(a, b);
    }
}

// ----- files -----

/// A value in a comparable form: strings, list order, set/hash as sorted, zset in order.
#[derive(Debug, PartialEq)]
enum Canon {
    Str(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    ZSet(Vec<(Vec<u8>, f64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
}

fn canon_of(v: &Value) -> Canon {
    match v {
        Value::Str(b) => Canon::Str(b.to_vec()),
        Value::Int(i) => Canon::Str(i.to_string().into_bytes()),
        Value::Obj(Object::Str(b)) => Canon::Str(b.to_vec()),
        Value::Obj(Object::List(l)) => Canon::List(l.iter().map(|e| e.to_vec()).collect()),
        Value::Obj(Object::Set(s)) => {
            let mut m: Vec<Vec<u8>> = s.iter().map(|m| m.to_boxed().to_vec()).collect();
            m.sort();
            Canon::Set(m)
        }
        Value::Obj(Object::ZSet(z)) => {
            let mut out = Vec::new();
            z.for_each(|m, s| out.push((m.to_vec(), s)));
            Canon::ZSet(out)
        }
        Value::Obj(Object::Hash(h)) => {
            let mut p: Vec<_> = h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            p.sort();
            Canon::Hash(p)
        }
    }
}

fn encoding_of(v: &Value) -> &'static str {
    match v {
        Value::Int(_) => "int",
        Value::Str(b) if b.len() <= 44 => "embstr",
        Value::Str(_) => "raw",
        Value::Obj(o) => o.encoding(),
    }
}

fn bulks(r: &Reply) -> Vec<Vec<u8>> {
    r.as_array()
        .expect("an array")
        .iter()
        .map(|e| e.as_bytes().expect("a bulk").to_vec())
        .collect()
}

fn canon_from_redis(c: &mut Conn, key: &[u8]) -> Canon {
    let t = text(c.call(&[&b"TYPE"[..], key]));
    match t.as_str() {
        "string" => Canon::Str(
            Reply::decode(&c.call(&[&b"GET"[..], key]))
                .as_bytes()
                .unwrap()
                .to_vec(),
        ),
        "list" => Canon::List(bulks(&Reply::decode(&c.call(&[
            &b"LRANGE"[..],
            key,
            b"0",
            b"-1",
        ])))),
        "set" => {
            let mut m = bulks(&Reply::decode(&c.call(&[&b"SMEMBERS"[..], key])));
            m.sort();
            Canon::Set(m)
        }
        "zset" => {
            let flat = bulks(&Reply::decode(&c.call(&[
                &b"ZRANGE"[..],
                key,
                b"0",
                b"-1",
                b"WITHSCORES",
            ])));
            Canon::ZSet(
                flat.chunks(2)
                    .map(|p| {
                        let s = String::from_utf8_lossy(&p[1]).parse::<f64>().unwrap();
                        (p[0].clone(), s)
                    })
                    .collect(),
            )
        }
        "hash" => {
            let flat = bulks(&Reply::decode(&c.call(&[&b"HGETALL"[..], key])));
            let mut p: Vec<_> = flat
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            p.sort();
            Canon::Hash(p)
        }
        other => panic!("unexpected type {other}"),
    }
}

fn text(r: Vec<u8>) -> String {
    match Reply::decode(&r) {
        Reply::Bulk(Some(b)) => String::from_utf8_lossy(&b).into_owned(),
        Reply::Simple(s) => String::from_utf8_lossy(&s).into_owned(),
        other => format!("{other:?}"),
    }
}

/// A key read from a file: database, name, value, expiry.
type FileKey = (u32, Vec<u8>, Value, Option<i64>);
/// An AUX field.
type AuxField = (Vec<u8>, Vec<u8>);

/// Every key of an RDB file, with the aux fields.
fn read_file(path: &Path) -> (Vec<FileKey>, Vec<AuxField>) {
    let bytes = std::fs::read(path).unwrap();
    let mut r = Reader::new(&bytes[..]).unwrap();
    let (mut keys, mut aux, mut db) = (Vec::new(), Vec::new(), 0);
    while let Some(item) = r.next_item().unwrap_or_else(|e| panic!("{e}")) {
        match item {
            Item::Aux { key, value } => aux.push((key.to_vec(), value.to_vec())),
            Item::SelectDb(n) => db = n,
            Item::ResizeDb { .. } => {}
            Item::Key(k) => keys.push((db, k.key.to_vec(), k.value, k.expire_ms)),
        }
    }
    assert_eq!(r.offset(), bytes.len() as u64, "the whole file is read");
    (keys, aux)
}

#[test]
fn a_file_redis_saved_is_read_completely() {
    let redis = Server::redis(DEBUG);
    let mut c = redis.conn();
    for cmd in populate_commands() {
        let r = c.call(&cmd);
        assert!(!Reply::decode(&r).is_error(), "{r:?}");
    }
    c.call(&["DEBUG", "POPULATE", "1000", "pop", "20"]);
    c.call(&["PEXPIREAT", "str:short", "4000000000000"]);
    c.call(&["EXPIRE", "hash:listpack", "100000"]);
    c.call(&["SELECT", "3"]);
    c.call(&["SET", "in-db-3", "x"]);
    c.call(&["SELECT", "0"]);
    assert_eq!(text(c.call(&["SAVE"])), "OK");
    let (keys, aux) = read_file(&redis.dir().join("dump.rdb"));
    let aux_names: Vec<&[u8]> = aux.iter().map(|(k, _)| &k[..]).collect();
    for name in [
        &b"redis-ver"[..],
        b"redis-bits",
        b"ctime",
        b"used-mem",
        b"aof-base",
    ] {
        assert!(aux_names.contains(&name), "aux {name:?} in {aux_names:?}");
    }
    let db0 = Reply::decode(&c.call(&["DBSIZE"])).as_int().unwrap();
    assert_eq!(keys.iter().filter(|k| k.0 == 0).count() as i64, db0);
    for (db, key, value, expire) in &keys {
        if *db == 3 {
            assert_eq!(
                (&key[..], canon_of(value)),
                (&b"in-db-3"[..], Canon::Str(s("x")))
            );
            continue;
        }
        assert_eq!(canon_of(value), canon_from_redis(&mut c, key), "{key:?}");
        // (A string APPENDed to is "raw" until it is reloaded, in Redis too.)
        let enc = text(c.call(&[&b"OBJECT"[..], b"ENCODING", key]));
        if key != b"str:raw" {
            assert_eq!(
                encoding_of(value),
                enc,
                "encoding of {}",
                String::from_utf8_lossy(key)
            );
        }
        let at = Reply::decode(&c.call(&[&b"PEXPIRETIME"[..], key]))
            .as_int()
            .unwrap();
        assert_eq!(expire.unwrap_or(-1), at, "{key:?}");
    }
}

#[test]
fn a_file_strata_wrote_passes_redis_check_rdb_and_loads_in_redis() {
    // Values of every encoding, read back from a file redis-server saved (so each is the core value
    // Strata builds), then written by Writer.
    let source = Server::redis(DEBUG);
    let mut c = source.conn();
    for cmd in populate_commands() {
        c.call(&cmd);
    }
    c.call(&["PEXPIREAT", "str:short", "4000000000000"]);
    c.call(&["SAVE"]);
    let (keys, _) = read_file(&source.dir().join("dump.rdb"));
    let dir = crate::harness::TempDir::new("rdb-writer");
    for (opts, name) in [
        (WriteOptions::default(), "strata.rdb"),
        (
            WriteOptions {
                compress: false,
                checksum: false,
            },
            "plain.rdb",
        ),
    ] {
        let path = dir.path().join(name);
        let file = std::fs::File::create(&path).unwrap();
        let mut w = Writer::new(std::io::BufWriter::new(file), opts).unwrap();
        w.aux("redis-ver", b"7.0.15").unwrap();
        w.aux("redis-bits", b"64").unwrap();
        w.aux("ctime", now_ms().to_string().as_bytes()).unwrap();
        w.aux("used-mem", b"1000000").unwrap();
        w.aux("aof-base", b"0").unwrap();
        let expires = keys.iter().filter(|k| k.3.is_some()).count() as u64;
        w.select_db(0, keys.len() as u64, expires).unwrap();
        for (i, (_, key, value, expire)) in keys.iter().enumerate() {
            let v = match value {
                Value::Str(b) => strata_core::ValueRef::Inline(b),
                Value::Int(i) => strata_core::ValueRef::Int(*i),
                Value::Obj(o) => strata_core::ValueRef::Obj(o),
            };
            let access = if i % 2 == 0 {
                Access::IdleSecs(10)
            } else {
                Access::None
            };
            w.key(key, v, *expire, access).unwrap();
        }
        let mut inner = w.finish().unwrap();
        std::io::Write::flush(&mut inner).unwrap();
        drop(inner);

        let check = Command::new("redis-check-rdb").arg(&path).output().unwrap();
        let out = String::from_utf8_lossy(&check.stdout).into_owned();
        assert!(check.status.success(), "redis-check-rdb: {out}");
        assert!(out.contains("RDB looks OK"), "{out}");

        let loaded = Server::redis(&["--dir", dir.path().to_str().unwrap(), "--dbfilename", name]);
        let mut l = loaded.conn();
        let n = Reply::decode(&l.call(&["DBSIZE"])).as_int().unwrap();
        assert_eq!(n as usize, keys.len());
        for (_, key, value, expire) in &keys {
            assert_eq!(canon_of(value), canon_from_redis(&mut l, key), "{key:?}");
            let theirs = text(c.call(&[&b"OBJECT"[..], b"ENCODING", key]));
            let ours = text(l.call(&[&b"OBJECT"[..], b"ENCODING", key]));
            if key != b"str:raw" {
                assert_eq!(theirs, ours, "encoding of {}", String::from_utf8_lossy(key));
            }
            let at = Reply::decode(&l.call(&[&b"PEXPIRETIME"[..], key]))
                .as_int()
                .unwrap();
            assert_eq!(expire.unwrap_or(-1), at);
        }
    }
}
