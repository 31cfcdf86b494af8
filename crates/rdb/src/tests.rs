//! Round trips of every encoding, Redis's error cases, truncation and a seeded mutation fuzz.

use bytes::Bytes;
use strata_core::{Hash, List, Object, Set, Value, ValueRef, ZSet};

use super::*;

fn as_ref(v: &Value) -> ValueRef<'_> {
    match v {
        Value::Str(b) => ValueRef::Inline(b),
        Value::Int(i) => ValueRef::Int(*i),
        Value::Obj(o) => ValueRef::Obj(o),
    }
}

fn encoding(v: &Value) -> &'static str {
    match v {
        Value::Str(_) => "string",
        Value::Int(_) => "int",
        Value::Obj(o) => o.encoding(),
    }
}

fn list(elems: &[Vec<u8>]) -> Value {
    let mut l = List::new();
    for e in elems {
        l.push_back(e);
    }
    Value::Obj(Object::List(Box::new(l)))
}

fn set(members: &[Vec<u8>]) -> Value {
    let mut s = Set::new();
    for m in members {
        s.insert(m);
    }
    Value::Obj(Object::Set(s))
}

fn zset(members: &[(Vec<u8>, f64)]) -> Value {
    let mut z = ZSet::new();
    for (m, s) in members {
        z.add(m, *s);
    }
    Value::Obj(Object::ZSet(z))
}

fn hash(pairs: &[(Vec<u8>, Vec<u8>)]) -> Value {
    let mut h = Hash::new();
    for (f, v) in pairs {
        h.insert(f, v);
    }
    Value::Obj(Object::Hash(h))
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn numbered(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| format!("{prefix}{i}").into_bytes())
        .collect()
}

/// One value of every encoding Strata has (under the default limits).
fn samples() -> Vec<(&'static str, Value)> {
    let noise: Vec<u8> = (0..3000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    vec![
        ("empty string", Value::Str(Bytes::new())),
        ("short string", Value::Str(Bytes::from_static(b"hello"))),
        ("int 5", Value::Int(5)),
        ("int -300", Value::Int(-300)),
        ("int 100000", Value::Int(100_000)),
        ("int i64::MAX", Value::Int(i64::MAX)),
        ("int i64::MIN", Value::Int(i64::MIN)),
        ("compressible", Value::Str(Bytes::from(vec![b'a'; 5000]))),
        ("incompressible", Value::Str(Bytes::from(noise.clone()))),
        (
            "raw",
            Value::Obj(Object::Str(Box::new(b"appended text".to_vec()))),
        ),
        ("binary", Value::Str(Bytes::from_static(b"\x00\xff\r\n"))),
        (
            "list small",
            list(&[b("a"), b("1"), b("-5000"), b("99999999999"), b("")]),
        ),
        ("list big", list(&numbered("element-", 3000))),
        (
            "list long elems",
            list(&[vec![b'x'; 10_000], b("y"), noise.clone()]),
        ),
        (
            "intset",
            set(&[b("1"), b("-2"), b("70000"), b("5000000000")]),
        ),
        ("set hashtable", set(&[b("a"), b("b"), b("1")])),
        ("set big intset", set(&numbered("", 600))),
        (
            "zset listpack",
            zset(&[
                (b("a"), 1.0),
                (b("b"), 0.5),
                (b("c"), f64::INFINITY),
                (b("d"), f64::NEG_INFINITY),
                (b("e"), -0.0),
                (b("f"), 1e300),
                (b("g"), -3.25),
                (b("h"), 12345678901.0),
            ]),
        ),
        (
            "zset skiplist",
            zset(
                &numbered("m", 300)
                    .into_iter()
                    .enumerate()
                    .map(|(i, m)| (m, i as f64 / 3.0))
                    .collect::<Vec<_>>(),
            ),
        ),
        ("zset long member", zset(&[(vec![b'q'; 100], 2.0)])),
        (
            "hash listpack",
            hash(&[(b("f"), b("v")), (b("n"), b("12")), (b("e"), b(""))]),
        ),
        (
            "hash hashtable",
            hash(
                &numbered("field", 700)
                    .into_iter()
                    .zip(numbered("value", 700))
                    .collect::<Vec<_>>(),
            ),
        ),
        ("hash long value", hash(&[(b("f"), vec![b'v'; 200])])),
    ]
}

#[test]
fn samples_have_the_encodings_they_claim() {
    let enc: Vec<&str> = samples().iter().map(|(_, v)| encoding(v)).collect();
    for e in [
        "int",
        "quicklist",
        "intset",
        "hashtable",
        "listpack",
        "skiplist",
        "raw",
    ] {
        assert!(enc.contains(&e), "{e} missing from {enc:?}");
    }
}

#[test]
fn dump_restore_round_trips_every_encoding() {
    for (name, v) in samples() {
        let payload = dump(as_ref(&v));
        let back = restore(&payload, false).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(back, norm(v.clone()), "{name}");
        let want = match encoding(&v) {
            "raw" => "string",
            e => e,
        };
        assert_eq!(encoding(&back), want, "{name}");
    }
}

fn write_file(keys: &[(Vec<u8>, Value, Option<i64>, Access)], opts: WriteOptions) -> Vec<u8> {
    let mut w = Writer::new(Vec::new(), opts).unwrap();
    w.aux("redis-ver", b"7.0.15").unwrap();
    w.aux("redis-bits", b"64").unwrap();
    w.aux("ctime", b"1700000000").unwrap();
    w.select_db(0, keys.len() as u64, 1).unwrap();
    for (i, (k, v, e, a)) in keys.iter().enumerate() {
        if i % 2 == 0 {
            w.key(k, as_ref(v), *e, *a).unwrap();
        } else {
            let mut rec = Vec::new();
            encode_key(&mut rec, k, as_ref(v), *e, *a, opts);
            w.records(&rec).unwrap();
        }
    }
    w.select_db(3, 1, 0).unwrap();
    w.key(b"in-db-3", ValueRef::Int(7), None, Access::None)
        .unwrap();
    let n = w.written();
    let out = w.finish().unwrap();
    assert_eq!(out.len() as u64, n + 9);
    out
}

fn read_all(file: &[u8]) -> Result<Vec<Item>, Error> {
    let mut r = Reader::new(file)?;
    let mut items = Vec::new();
    while let Some(i) = r.next_item()? {
        items.push(i);
    }
    assert_eq!(r.offset(), file.len() as u64);
    assert!(r.next_item()?.is_none());
    Ok(items)
}

fn sample_keys() -> Vec<(Vec<u8>, Value, Option<i64>, Access)> {
    samples()
        .into_iter()
        .enumerate()
        .map(|(i, (name, v))| {
            let expire = (i % 3 == 0).then_some(1_900_000_000_000 + i as i64);
            let access = match i % 4 {
                0 => Access::None,
                1 => Access::IdleSecs(i as u64 * 1000),
                2 => Access::Freq(i as u8),
                _ => Access::IdleSecs(0),
            };
            (name.as_bytes().to_vec(), v, expire, access)
        })
        .collect()
}

#[test]
fn file_round_trips_with_every_option() {
    let keys = sample_keys();
    for opts in [
        WriteOptions::default(),
        WriteOptions {
            compress: false,
            checksum: true,
        },
        WriteOptions {
            compress: true,
            checksum: false,
        },
    ] {
        let file = write_file(&keys, opts);
        assert_eq!(&file[..9], b"REDIS0010");
        if !opts.checksum {
            assert_eq!(&file[file.len() - 8..], &[0; 8]);
        }
        let items = read_all(&file).unwrap();
        assert!(
            matches!(&items[0], Item::Aux { key, value } if &key[..] == b"redis-ver" && &value[..] == b"7.0.15")
        );
        assert!(matches!(&items[2], Item::Aux { value, .. } if &value[..] == b"1700000000"));
        assert!(matches!(items[3], Item::SelectDb(0)));
        assert!(
            matches!(items[4], Item::ResizeDb { keys: k, expires: 1 } if k == keys.len() as u64)
        );
        let loaded: Vec<&LoadedKey> = items
            .iter()
            .filter_map(|i| match i {
                Item::Key(k) => Some(k),
                _ => None,
            })
            .collect();
        assert_eq!(loaded.len(), keys.len() + 1);
        for ((k, v, e, a), l) in keys.iter().zip(&loaded) {
            assert_eq!(&l.key[..], &k[..]);
            assert_eq!(l.value, norm(v.clone()), "{}", String::from_utf8_lossy(k));
            assert_eq!(l.expire_ms, *e);
            assert_eq!(l.access, *a);
        }
        assert_eq!(loaded.last().unwrap().value, Value::Int(7));
    }
}

#[test]
fn compression_only_when_it_pays() {
    let mut out = Vec::new();
    encode::put_string(&mut out, &[b'a'; 20], true);
    assert_eq!(out[0], 20, "20 bytes are never compressed");
    out.clear();
    encode::put_string(&mut out, &[b'a'; 21], true);
    assert_eq!(out[0], 0xC3);
    out.clear();
    encode::put_string(&mut out, &[b'a'; 21], false);
    assert_eq!(out[0], 21);
    // Integer encodings for short canonical integers only.
    for (s, first) in [
        (&b"12"[..], 0xC0u8),
        (b"-129", 0xC1),
        (b"2147483647", 0xC2),
        (b"2147483648", 10),
        (b"012", 3),
    ] {
        out.clear();
        encode::put_string(&mut out, s, true);
        assert_eq!(out[0], first, "{}", String::from_utf8_lossy(s));
    }
}

#[test]
fn lengths_of_every_width() {
    for n in [
        0u64,
        63,
        64,
        16383,
        16384,
        u32::MAX as u64,
        u32::MAX as u64 + 1,
        u64::MAX,
    ] {
        let mut out = Vec::new();
        encode::put_len(&mut out, n);
        let mut src = decode::Src::new(&out[..]);
        assert_eq!(src.len().unwrap(), n);
        assert_eq!(src.offset, out.len() as u64);
    }
}

/// A DUMP payload of a hand-built value body.
fn payload(t: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![t];
    p.extend_from_slice(body);
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64::crc64(0, &p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

fn blob(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode::put_len(&mut out, bytes.len() as u64);
    out.extend_from_slice(bytes);
    out
}

fn strings(items: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    encode::put_len(&mut out, items.len() as u64);
    for i in items {
        encode::put_string(&mut out, i, false);
    }
    out
}

/// A HASH body: the pair count, then field, value...
fn pairs(items: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    encode::put_len(&mut out, items.len() as u64 / 2);
    for i in items {
        encode::put_string(&mut out, i, false);
    }
    out
}

/// What a value reads back as: a raw string (modified in place) is a plain string once loaded.
fn norm(v: Value) -> Value {
    match v {
        Value::Obj(Object::Str(s)) => Value::Str(Bytes::from(*s)),
        v => v,
    }
}

#[test]
fn restore_errors_as_redis() {
    let good = dump(ValueRef::Inline(b"hello"));
    assert_eq!(
        restore(&good, false).unwrap(),
        Value::Str(Bytes::from_static(b"hello"))
    );
    // Checksum.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    assert_eq!(restore(&bad, false), Err(RestoreError::VersionOrChecksum));
    assert!(restore(&bad, true).is_ok(), "skip-checksum accepts it");
    // Version from the future.
    let mut v11 = vec![0u8, 5];
    v11.extend_from_slice(b"hello");
    v11.extend_from_slice(&11u16.to_le_bytes());
    let crc = crc64::crc64(0, &v11);
    v11.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(restore(&v11, false), Err(RestoreError::VersionOrChecksum));
    assert_eq!(restore(&v11, true), Err(RestoreError::VersionOrChecksum));
    // Older versions are fine.
    let mut v9 = good[..good.len() - 10].to_vec();
    v9.extend_from_slice(&9u16.to_le_bytes());
    let crc = crc64::crc64(0, &v9);
    v9.extend_from_slice(&crc.to_le_bytes());
    assert!(restore(&v9, false).is_ok());
    // Too short, garbage.
    for p in [
        &b""[..],
        b"123456789",
        b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00",
    ] {
        assert_eq!(restore(p, false), Err(RestoreError::VersionOrChecksum));
    }
    // Bad data with a right checksum: unknown type, opcode, truncated value.
    for p in [
        payload(8, b"\x01a"),
        payload(0xFE, b"\x00"),
        payload(0, b"\x3Fabc"),
    ] {
        assert_eq!(restore(&p, false), Err(RestoreError::BadData));
    }
    // A stream or a module value: unsupported, so bad data for RESTORE.
    assert_eq!(
        restore(&payload(15, b"\x00"), false),
        Err(RestoreError::BadData)
    );
    assert_eq!(RestoreError::BadData.message(), "ERR Bad data format");
}

#[test]
fn collections_that_are_corrupt() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty set", payload(2, &strings(&[]))),
        ("empty list", payload(1, &strings(&[]))),
        ("empty hash", payload(4, &strings(&[]))),
        ("empty zset", payload(5, &strings(&[]))),
        ("dup set", payload(2, &strings(&[b"a", b"b", b"a"]))),
        ("dup intset-able set", payload(2, &strings(&[b"1", b"1"]))),
        ("dup hash", payload(4, &pairs(&[b"f", b"1", b"f", b"2"]))),
        ("empty intset", payload(11, &blob(&intset::build(&[])))),
        (
            "empty listpack hash",
            payload(16, &blob(&listpack::Builder::new().finish())),
        ),
        ("odd listpack hash", {
            let mut lp = listpack::Builder::new();
            lp.push(b"f");
            payload(16, &blob(&lp.finish()))
        }),
        ("dup listpack hash", {
            let mut lp = listpack::Builder::new();
            for e in [&b"f"[..], b"1", b"f", b"2"] {
                lp.push(e);
            }
            payload(16, &blob(&lp.finish()))
        }),
        ("dup listpack zset", {
            let mut lp = listpack::Builder::new();
            for e in [&b"m"[..], b"1", b"m", b"2"] {
                lp.push(e);
            }
            payload(17, &blob(&lp.finish()))
        }),
        ("nan listpack zset", {
            let mut lp = listpack::Builder::new();
            lp.push(b"m");
            lp.push(b"nan");
            payload(17, &blob(&lp.finish()))
        }),
        ("nan zset2", {
            let mut body = vec![1];
            encode::put_string(&mut body, b"m", false);
            body.extend_from_slice(&f64::NAN.to_le_bytes());
            payload(5, &body)
        }),
        ("nan old zset", {
            let mut body = vec![1];
            encode::put_string(&mut body, b"m", false);
            body.push(253);
            payload(3, &body)
        }),
        ("empty quicklist", payload(18, &[0])),
        ("empty zipmap", payload(9, &blob(&[0, 0xFF]))),
        ("quicklist node of 0 bytes", payload(18, &[1, 1, 0])),
        ("quicklist of an empty node", {
            let mut body = vec![1, 2];
            body.extend_from_slice(&blob(&listpack::Builder::new().finish()));
            payload(18, &body)
        }),
        ("quicklist bad container", {
            let mut body = vec![1, 3];
            body.extend_from_slice(&blob(b"x"));
            payload(18, &body)
        }),
        ("lzf lie", payload(0, &[0xC3, 2, 0x80, 0, 0, 0x10, 0, 0, 1])),
        (
            "huge length",
            payload(0, &[0x81, 0, 0, 1, 0, 0, 0, 0, 0, b'x']),
        ),
        (
            "huge set count",
            payload(2, &[0x81, 0, 0, 0x10, 0, 0, 0, 0, 0, 1, b'x']),
        ),
    ];
    for (name, p) in cases {
        assert_eq!(restore(&p, false), Err(RestoreError::BadData), "{name}");
    }
}

#[test]
fn older_encodings_are_read() {
    use listpack::Elem;
    let big = vec![b'z'; 100];
    // LIST_ZIPLIST, LIST_QUICKLIST of ziplists (one empty node skipped).
    let zl = ziplist::build(&[Elem::Str(b"a"), Elem::Int(5), Elem::Str(&big)]);
    let want = list(&[b("a"), b("5"), big.clone()]);
    assert_eq!(restore(&payload(10, &blob(&zl)), false).unwrap(), want);
    let mut body = vec![2];
    body.extend_from_slice(&blob(&ziplist::build(&[])));
    body.extend_from_slice(&blob(&zl));
    assert_eq!(restore(&payload(14, &body), false).unwrap(), want);
    // Old linked list, old zset with text scores.
    assert_eq!(
        restore(&payload(1, &strings(&[b"a", b"5", &big])), false).unwrap(),
        want
    );
    let mut body = vec![3];
    for (m, s) in [(&b"x"[..], &b"1.5"[..]), (b"y", b"-2")] {
        encode::put_string(&mut body, m, false);
        body.push(s.len() as u8);
        body.extend_from_slice(s);
    }
    encode::put_string(&mut body, b"z", false);
    body.push(254);
    assert_eq!(
        restore(&payload(3, &body), false).unwrap(),
        zset(&[(b("x"), 1.5), (b("y"), -2.0), (b("z"), f64::INFINITY)])
    );
    // ZSET_ZIPLIST, HASH_ZIPLIST, HASH_ZIPMAP.
    let zl = ziplist::build(&[
        Elem::Str(b"m"),
        Elem::Str(b"0.25"),
        Elem::Str(b"n"),
        Elem::Int(3),
    ]);
    assert_eq!(
        restore(&payload(12, &blob(&zl)), false).unwrap(),
        zset(&[(b("m"), 0.25), (b("n"), 3.0)])
    );
    let zl = ziplist::build(&[
        Elem::Str(b"f"),
        Elem::Int(1),
        Elem::Str(b"g"),
        Elem::Str(b"v"),
    ]);
    let h = restore(&payload(13, &blob(&zl)), false).unwrap();
    assert_eq!(h, hash(&[(b("f"), b("1")), (b("g"), b("v"))]));
    assert_eq!(encoding(&h), "listpack");
    let zm = zipmap::build(&[(b"f", b"1"), (b"g", &big)]);
    let h = restore(&payload(9, &blob(&zm)), false).unwrap();
    assert_eq!(h, hash(&[(b("f"), b("1")), (b("g"), big.clone())]));
    assert_eq!(encoding(&h), "hashtable", "a value over 64 bytes converts");
    // QUICKLIST_2 with a PLAIN node.
    let mut body = vec![2, 1];
    body.extend_from_slice(&blob(&big));
    body.push(2);
    let mut lp = listpack::Builder::new();
    lp.push(b"tail");
    body.extend_from_slice(&blob(&lp.finish()));
    assert_eq!(
        restore(&payload(18, &body), false).unwrap(),
        list(&[big.clone(), b("tail")])
    );
}

#[test]
fn encodings_convert_by_the_limits_on_load() {
    // A packed hash or zset converts by its count only (a long value stays packed, as in Redis);
    // a HASH of small fields becomes a listpack, one with a long value a hashtable.
    let mut lp = listpack::Builder::new();
    lp.push(b"f");
    lp.push(&[b'v'; 100]);
    let h = restore(&payload(16, &blob(&lp.finish())), false).unwrap();
    assert_eq!(encoding(&h), "listpack");
    let mut lp = listpack::Builder::new();
    lp.push(&[b'm'; 100]);
    lp.push(b"1");
    let z = restore(&payload(17, &blob(&lp.finish())), false).unwrap();
    assert_eq!(encoding(&z), "listpack");
    let h = restore(&payload(4, &pairs(&[b"f", &[b'v'; 100]])), false).unwrap();
    assert_eq!(encoding(&h), "hashtable");
    let mut lp = listpack::Builder::new();
    for i in 0..600 {
        lp.push(format!("f{i}").as_bytes());
        lp.push(b"v");
    }
    let h = restore(&payload(16, &blob(&lp.finish())), false).unwrap();
    assert_eq!(encoding(&h), "hashtable");
    let h = restore(&payload(4, &pairs(&[b"f", b"v"])), false).unwrap();
    assert_eq!(encoding(&h), "listpack");
    // An intset over set-max-intset-entries (512) becomes a hashtable.
    let vals: Vec<i64> = (0..600).collect();
    let s = restore(&payload(11, &blob(&intset::build(&vals))), false).unwrap();
    assert_eq!(encoding(&s), "hashtable");
    // A listpack zset over zset-max-listpack-entries (128) becomes a skiplist; a small ZSET_2 a
    // listpack.
    let mut lp = listpack::Builder::new();
    for i in 0..200 {
        lp.push(format!("m{i}").as_bytes());
        lp.push_int(i);
    }
    let z = restore(&payload(17, &blob(&lp.finish())), false).unwrap();
    assert_eq!(encoding(&z), "skiplist");
    let mut body = vec![1];
    encode::put_string(&mut body, b"m", false);
    body.extend_from_slice(&1.5f64.to_le_bytes());
    assert_eq!(
        encoding(&restore(&payload(5, &body), false).unwrap()),
        "listpack"
    );
}

#[test]
fn file_errors() {
    let file = write_file(&sample_keys(), WriteOptions::default());
    // Every truncation fails cleanly.
    for cut in 0..file.len() {
        assert!(read_all(&file[..cut]).is_err(), "cut at {cut}");
    }
    // Checksum mismatch names both values; a zeroed footer is accepted.
    let mut bad = file.clone();
    let n = bad.len();
    bad[n - 3] ^= 0x40;
    match read_all(&bad) {
        Err(Error {
            kind: ErrorKind::Checksum { .. },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    let mut r = Reader::new(&bad[..]).unwrap();
    r.set_skip_checksum(true);
    while r.next_item().unwrap().is_some() {}
    let mut zero = file.clone();
    zero[n - 8..].fill(0);
    assert!(read_all(&zero).is_ok());
    // Header problems.
    for (h, _) in [
        (&b"REDIS0011"[..], ()),
        (b"REDIS0000", ()),
        (b"RADIS0010", ()),
        (b"REDIS", ()),
    ] {
        match Reader::new(h) {
            Err(Error {
                kind: ErrorKind::BadHeader(_),
                ..
            }) => {}
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
    // Old version 4 without a footer, and the old EXPIRETIME opcode in seconds.
    let mut old = b"REDIS0004".to_vec();
    old.extend_from_slice(&[OP_SELECTDB, 0, OP_EXPIRETIME]);
    old.extend_from_slice(&1_900_000_000i32.to_le_bytes());
    old.extend_from_slice(&[0, 1, b'k', 1, b'v', OP_EOF]);
    let items = read_all(&old).unwrap();
    match &items[1] {
        Item::Key(k) => assert_eq!(k.expire_ms, Some(1_900_000_000_000)),
        other => panic!("{other:?}"),
    }
    // Empty keys in a file are skipped (as Redis skips them), the rest still loads.
    let mut skip = b"REDIS0010".to_vec();
    skip.extend_from_slice(&[2, 1, b'e', 0, 0, 1, b'k', 1, b'v', OP_EOF]);
    let crc = crc64::crc64(0, &skip);
    skip.extend_from_slice(&crc.to_le_bytes());
    let items = read_all(&skip).unwrap();
    assert_eq!(items.len(), 1);
    let mut r = Reader::new(&skip[..]).unwrap();
    assert!(matches!(r.next_item().unwrap(), Some(Item::Key(_))));
    assert_eq!(r.take_skipped_empty(), vec![Bytes::from_static(b"e")]);
    assert!(r.take_skipped_empty().is_empty());
    // Streams, modules and functions are reported as unsupported.
    for body in [
        &[15u8, 1, b'k', 0][..],
        &[7, 1, b'k'],
        &[OP_FUNCTION2],
        &[OP_MODULE_AUX],
    ] {
        let mut f = b"REDIS0010".to_vec();
        f.extend_from_slice(body);
        match read_all(&f) {
            Err(Error {
                kind: ErrorKind::Unsupported(_),
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }
    // A 2^40 length in a short file fails without reserving it.
    let mut huge = b"REDIS0010".to_vec();
    huge.extend_from_slice(&[0, 0x81, 0, 0, 1, 0, 0, 0, 0, 0, b'x']);
    match read_all(&huge) {
        Err(Error {
            kind: ErrorKind::Truncated,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

/// xorshift64*: a seeded, reproducible stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut m = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        if m.is_empty() {
            break;
        }
        match rng.below(5) {
            0 => {
                let i = rng.below(m.len());
                m[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(m.len());
                m[i] = rng.next() as u8;
            }
            2 => m.truncate(rng.below(m.len())),
            3 => {
                let i = rng.below(m.len());
                m.insert(i, rng.next() as u8);
            }
            _ => {
                let i = rng.below(m.len());
                m.remove(i);
            }
        }
    }
    m
}

#[test]
fn mutated_payloads_never_panic() {
    let payloads: Vec<Vec<u8>> = samples()
        .iter()
        .filter(|(_, v)| !matches!(v, Value::Obj(Object::List(l)) if l.len() > 100))
        .map(|(_, v)| dump(as_ref(v)))
        .collect();
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut accepted = 0;
    for i in 0..4000 {
        let p = &payloads[i % payloads.len()];
        let m = mutate(&mut rng, p);
        // Checksums skipped so the mutation reaches the decoder.
        if let Ok(v) = restore(&m, true) {
            accepted += 1;
            // Whatever was accepted is a value that dumps and restores again.
            assert_eq!(restore(&dump(as_ref(&v)), false).unwrap(), v);
        }
    }
    assert!(accepted > 0);
}

#[test]
fn mutated_files_never_panic() {
    let keys: Vec<_> = sample_keys()
        .into_iter()
        .filter(|(_, v, _, _)| !matches!(v, Value::Obj(Object::List(l)) if l.len() > 100))
        .filter(|(_, v, _, _)| !matches!(v, Value::Obj(o) if o.elements() > 300))
        .collect();
    let file = write_file(
        &keys,
        WriteOptions {
            compress: true,
            checksum: false,
        },
    );
    let mut rng = Rng(0xF11E_0000_0000_0007);
    for _ in 0..1500 {
        let m = mutate(&mut rng, &file);
        if let Ok(mut r) = Reader::new(&m[..]) {
            while let Ok(Some(_)) = r.next_item() {}
        }
    }
}
