//! The bitmap family, reply for reply against redis-server: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP,
//! BITFIELD and BITFIELD_RO — every option and error, seeded random sequences over random offsets
//! (the strings themselves are compared with GET after each step), OBJECT ENCODING after writes,
//! RESP2 and RESP3, and BITOP over keys on four different shards.

use crate::harness::{key_in, Diff, Pair};

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

    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

fn errors_and_edges(d: &mut Pair) {
    d.run(&["FLUSHALL"]);
    d.run(&["SET", "s", "foobar"]);
    d.run(&["SET", "n", "1234"]);
    d.run(&["SET", "e", ""]);
    d.run(&["RPUSH", "l", "a"]);
    // SETBIT / GETBIT
    for off in ["-1", "x", "4294967296", "4294967295", "1.5", "", " 1", "01"] {
        d.run(&["SETBIT", "k", off, "1"]);
        d.run(&["GETBIT", "k", off]);
    }
    for v in ["2", "-1", "x", "", "1.0", "01"] {
        d.run(&["SETBIT", "k", "3", v]);
    }
    d.run(&["SETBIT", "l", "1", "1"]);
    d.run(&["SETBIT", "l", "-1", "1"]);
    d.run(&["GETBIT", "l", "1"]);
    d.run(&["GETBIT", "nokey", "1"]);
    d.run(&["GETBIT", "n", "2"]);
    d.run(&["OBJECT", "ENCODING", "n"]);
    d.run(&["SETBIT", "n", "2", "1"]);
    d.run(&["OBJECT", "ENCODING", "n"]);
    d.run(&["GET", "n"]);
    d.run(&["SETBIT", "s", "100", "0"]);
    d.run(&["GET", "s"]);
    d.run(&["OBJECT", "ENCODING", "s"]);
    // BITCOUNT
    d.run(&["SET", "s", "foobar"]);
    for args in [
        &["BITCOUNT", "s"][..],
        &["BITCOUNT", "s", "1"],
        &["BITCOUNT", "s", "1", "1"],
        &["BITCOUNT", "s", "1", "1", "bit"],
        &["BITCOUNT", "s", "1", "1", "BYTE"],
        &["BITCOUNT", "s", "1", "1", "bits"],
        // An empty negative range answers 0 before the unit is checked.
        &["BITCOUNT", "s", "-1", "-5", "bits"],
        &["BITCOUNT", "s", "-2147483648", "-9223372036854775808", "x"],
        &["BITCOUNT", "s", "-5", "-1", "bits"],
        &["BITCOUNT", "s", "1", "1", "bit", "x"],
        &["BITCOUNT", "s", "x", "1"],
        &["BITCOUNT", "s", "1", "x"],
        &["BITCOUNT", "s", "-1", "-2"],
        &["BITCOUNT", "s", "-2", "-1"],
        &["BITCOUNT", "s", "-100", "100"],
        &["BITCOUNT", "s", "5", "30", "BIT"],
        &["BITCOUNT", "s", "-5", "-1", "bit"],
        &["BITCOUNT", "s", "0", "-1", "bit"],
        &["BITCOUNT", "nokey", "x"],
        &["BITCOUNT", "nokey", "1", "2", "x"],
        &["BITCOUNT", "l"],
        &["BITCOUNT", "l", "x"],
        &["BITCOUNT", "n"],
        &["BITCOUNT", "n", "1", "2"],
        &["BITCOUNT", "e"],
        &["BITCOUNT", "e", "0", "-1"],
        &["BITCOUNT", "e", "0", "-1", "bit"],
    ] {
        d.run(args);
    }
    // BITPOS
    d.run(&["SET", "p", "\u{0}\u{ff}\u{f0}"]);
    d.run(&["SETBIT", "ones", "23", "1"]);
    d.run(&["BITOP", "NOT", "ones", "ones"]);
    d.run(&["SETBIT", "ones", "23", "1"]);
    for args in [
        &["BITPOS", "p", "1"][..],
        &["BITPOS", "p", "0"],
        &["BITPOS", "p", "2"],
        &["BITPOS", "p", "x"],
        &["BITPOS", "p", "-1"],
        &["BITPOS", "p", "1", "1"],
        &["BITPOS", "p", "1", "2", "-1"],
        &["BITPOS", "p", "0", "1", "-1"],
        &["BITPOS", "p", "0", "1", "-1", "byte"],
        &["BITPOS", "p", "0", "9", "-1", "bit"],
        &["BITPOS", "p", "0", "8", "15", "bit"],
        &["BITPOS", "p", "1", "17", "17", "bit"],
        &["BITPOS", "p", "1", "x"],
        &["BITPOS", "p", "1", "1", "x"],
        &["BITPOS", "p", "1", "1", "2", "x"],
        &["BITPOS", "p", "1", "1", "2", "bit", "x"],
        &["BITPOS", "p", "1", "x", "2", "bits"],
        &["BITPOS", "p", "1", "1", "x", "bits"],
        &["BITPOS", "ones", "0"],
        &["BITPOS", "ones", "0", "1"],
        &["BITPOS", "ones", "0", "1", "-1"],
        &["BITPOS", "ones", "0", "0", "-1", "bit"],
        &["BITPOS", "ones", "0", "0", "20", "bit"],
        &["BITPOS", "ones", "1", "-3", "-1", "bit"],
        &["BITPOS", "nokey", "0"],
        &["BITPOS", "nokey", "1"],
        &["BITPOS", "nokey", "1", "x", "y", "z", "w"],
        &["BITPOS", "nokey", "2"],
        &["BITPOS", "l", "1"],
        &["BITPOS", "l", "1", "x"],
        &["BITPOS", "e", "0"],
        &["BITPOS", "e", "1"],
        &["BITPOS", "e", "0", "0"],
        &["BITPOS", "n", "1"],
        &["BITPOS", "p", "1", "2", "1"],
        &["BITPOS", "p", "0", "-1", "-2"],
    ] {
        d.run(args);
    }
    // BITOP
    for args in [
        &["BITOP", "AND", "d", "s", "p"][..],
        &["GET", "d"],
        &["BITOP", "or", "d", "s", "p", "nokey"],
        &["GET", "d"],
        &["BITOP", "Xor", "d", "s", "n"],
        &["GET", "d"],
        &["OBJECT", "ENCODING", "d"],
        &["BITOP", "NOT", "d", "s"],
        &["GET", "d"],
        &["BITOP", "NOT", "d", "s", "p"],
        &["BITOP", "NOT", "d"],
        &["BITOP", "NAND", "d", "s"],
        &["BITOP", "AND", "d", "s", "l"],
        &["BITOP", "AND", "d", "l"],
        &["BITOP", "AND", "l", "s"],
        &["TYPE", "l"],
        &["BITOP", "AND", "d", "nokey", "nokey2"],
        &["EXISTS", "d"],
        &["BITOP", "AND", "d", "e"],
        &["EXISTS", "d"],
        &["SET", "d", "x", "EX", "100"],
        &["BITOP", "OR", "d", "s"],
        &["TTL", "d"],
        &["BITOP", "AND", "d", "s", "e"],
        &["GET", "d"],
        &["BITOP", "and"],
        &["BITOP", "and", "d"],
    ] {
        d.run(args);
    }
    // BITFIELD / BITFIELD_RO
    d.run(&["DEL", "f"]);
    for args in [
        &["BITFIELD", "f"][..],
        &["EXISTS", "f"],
        &["BITFIELD", "f", "GET", "u8", "0"],
        &["EXISTS", "f"],
        &[
            "BITFIELD", "f", "SET", "i8", "0", "-100", "GET", "u8", "0", "GET", "i8", "0",
        ],
        &[
            "BITFIELD", "f", "INCRBY", "u2", "100", "1", "OVERFLOW", "SAT", "INCRBY", "u2", "102",
            "7",
        ],
        &[
            "BITFIELD", "f", "OVERFLOW", "FAIL", "INCRBY", "u2", "102", "7", "INCRBY", "i3", "0",
            "-20",
        ],
        &[
            "BITFIELD", "f", "OVERFLOW", "WRAP", "INCRBY", "i5", "3", "100", "SET", "u7", "#3",
            "300",
        ],
        &[
            "BITFIELD", "f", "OVERFLOW", "SAT", "SET", "i4", "#2", "-300", "SET", "u4", "#2", "-1",
        ],
        &[
            "BITFIELD",
            "f",
            "SET",
            "i64",
            "#1",
            "-9223372036854775808",
            "INCRBY",
            "i64",
            "#1",
            "-1",
        ],
        &[
            "BITFIELD",
            "f",
            "OVERFLOW",
            "SAT",
            "INCRBY",
            "i64",
            "#1",
            "-1",
            "INCRBY",
            "u63",
            "0",
            "9223372036854775807",
        ],
        &[
            "BITFIELD", "f", "GET", "i64", "#1", "GET", "u63", "1", "GET", "i1", "0", "GET", "u1",
            "3",
        ],
        &["GET", "f"],
        &["OBJECT", "ENCODING", "f"],
        &["BITFIELD", "f", "GET", "u64", "0"],
        &["BITFIELD", "f", "GET", "i65", "0"],
        &["BITFIELD", "f", "GET", "i0", "0"],
        &["BITFIELD", "f", "GET", "x8", "0"],
        &["BITFIELD", "f", "GET", "u", "0"],
        &["BITFIELD", "f", "GET", "u8", "-1"],
        &["BITFIELD", "f", "GET", "u8", "#-1"],
        &["BITFIELD", "f", "GET", "u8", "#x"],
        &["BITFIELD", "f", "GET", "u8", "4294967296"],
        &["BITFIELD", "f", "GET", "u8", "#536870912"],
        &["BITFIELD", "f", "GET", "u8", "#536870911"],
        &["BITFIELD", "f", "GET", "u8", "#2305843009213693952"],
        &["BITFIELD", "f", "SET", "u8", "0", "x"],
        &["BITFIELD", "f", "SET", "u8", "0"],
        &["BITFIELD", "f", "GET", "u8"],
        &["BITFIELD", "f", "INCRBY", "u8", "0"],
        &["BITFIELD", "f", "OVERFLOW"],
        &["BITFIELD", "f", "OVERFLOW", "x", "GET", "u8", "0"],
        &["BITFIELD", "f", "FOO", "u8", "0"],
        &["BITFIELD", "f", "GET", "u8", "0", "SET", "u8", "0"],
        &["BITFIELD", "l", "GET", "u8", "0"],
        &["BITFIELD", "l", "SET", "u8", "0", "1"],
        &["BITFIELD", "l", "GET", "u8", "x"],
        &["BITFIELD", "n", "GET", "u8", "0", "GET", "i16", "#1"],
        &["BITFIELD", "n", "INCRBY", "u8", "0", "1"],
        &["GET", "n"],
        &["BITFIELD_RO", "f", "GET", "u8", "0", "GET", "i4", "#3"],
        &["BITFIELD_RO", "f"],
        &["BITFIELD_RO", "f", "SET", "u8", "0", "1"],
        &["BITFIELD_RO", "f", "INCRBY", "u8", "0", "1"],
        &["BITFIELD_RO", "f", "OVERFLOW", "SAT", "GET", "u8", "0"],
        &["BITFIELD_RO", "f", "SET", "u8", "0", "x"],
        &["BITFIELD_RO", "nokey", "GET", "u8", "0"],
        &["BITFIELD_RO", "l", "GET", "u8", "0"],
        &["BITFIELD", "big", "SET", "u8", "#262143", "1"],
        &["STRLEN", "big"],
        &["BITFIELD", "big", "SET", "u1", "16777215", "1"],
        &["STRLEN", "big"],
        &["BITCOUNT", "big"],
        &["BITPOS", "big", "1"],
        &["BITPOS", "big", "1", "-1"],
        &["DEL", "big"],
    ] {
        d.run(args);
    }
}

#[test]
fn errors_and_edge_cases_match_redis() {
    let mut d = Diff::new();
    errors_and_edges(&mut d);
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    errors_and_edges(&mut d);
}

#[test]
fn random_bit_operations_match_redis() {
    let mut d = Diff::new();
    let mut rng = Rng(0x5EED_B175);
    let keys = ["a", "b", "c", "d"];
    let types = [
        "u1", "u3", "u8", "u13", "u32", "u63", "i1", "i5", "i8", "i17", "i32", "i64",
    ];
    for step in 0..3000 {
        let key = rng.pick(&keys);
        // Mostly small offsets so the strings overlap, sometimes far ones so they grow.
        let off = match rng.below(10) {
            0 => rng.below(1 << 20),
            1..=3 => rng.below(4096),
            _ => rng.below(300),
        };
        let off_s = off.to_string();
        match rng.below(12) {
            0..=3 => {
                let v = rng.below(2).to_string();
                d.run(&["SETBIT", key, &off_s, &v]);
            }
            4 => {
                d.run(&["GETBIT", key, &off_s]);
            }
            5 => {
                let (s, e) = (rng.int(-60, 60).to_string(), rng.int(-60, 60).to_string());
                let unit = rng.pick(&["", "BYTE", "BIT", "bit"]);
                let mut args = vec!["BITCOUNT", key, &s, &e];
                if !unit.is_empty() {
                    args.push(unit);
                }
                d.run(&args);
                d.run(&["BITCOUNT", key]);
            }
            6 => {
                let bit = rng.below(2).to_string();
                let (s, e) = (rng.int(-80, 80).to_string(), rng.int(-80, 80).to_string());
                let unit = rng.pick(&["BYTE", "BIT"]);
                let n = rng.below(4) as usize;
                let all = ["BITPOS", key, &bit, &s, &e, unit];
                d.run(&all[..3 + n]);
            }
            7 => {
                let op = rng.pick(&["AND", "OR", "XOR", "NOT"]);
                let dest = rng.pick(&keys);
                let n = if op == "NOT" {
                    1
                } else {
                    1 + rng.below(3) as usize
                };
                let mut args = vec!["BITOP", op, dest];
                for _ in 0..n {
                    args.push(rng.pick(&keys));
                }
                d.run(&args);
            }
            8..=10 => {
                let mut args: Vec<String> = vec!["BITFIELD".into(), key.into()];
                for _ in 0..1 + rng.below(4) {
                    if rng.below(4) == 0 {
                        args.push("OVERFLOW".into());
                        args.push(rng.pick(&["WRAP", "SAT", "FAIL"]).into());
                    }
                    let ty = rng.pick(&types);
                    let off = if rng.below(3) == 0 {
                        format!("#{}", rng.below(40))
                    } else {
                        rng.below(400).to_string()
                    };
                    match rng.below(3) {
                        0 => args.extend(["GET".into(), ty.into(), off]),
                        1 => {
                            let v = (rng.next() as i64 >> rng.below(64)).to_string();
                            args.extend(["SET".into(), ty.into(), off, v]);
                        }
                        _ => {
                            let v = (rng.next() as i64 >> (rng.below(8) * 8)).to_string();
                            let v = if rng.below(2) == 0 {
                                v
                            } else {
                                rng.int(-300, 300).to_string()
                            };
                            args.extend(["INCRBY".into(), ty.into(), off, v]);
                        }
                    }
                }
                d.run(&args);
            }
            _ => {
                d.run(&["OBJECT", "ENCODING", key]);
                d.run(&["STRLEN", key]);
            }
        }
        if step % 25 == 0 {
            for k in keys {
                d.run(&["GET", k]);
            }
        }
    }
    for k in keys {
        d.run(&["GET", k]);
        d.run(&["BITCOUNT", k]);
    }
}

#[test]
fn bitop_is_atomic_across_shards() {
    let mut d = Diff::with_threads(4);
    let keys: Vec<String> = (0..4).map(|q| key_in(q, "bm")).collect();
    let mut rng = Rng(0xB170_5EED);
    for (i, k) in keys.iter().enumerate() {
        for _ in 0..40 {
            let off = rng.below(2000 * (i as u64 + 1)).to_string();
            d.run(&["SETBIT", k, &off, "1"]);
        }
        d.run(&["SET", &format!("{k}:plain"), "some text to combine"]);
    }
    for op in ["AND", "OR", "XOR"] {
        for dest in &keys {
            let mut args = vec!["BITOP", op, dest.as_str()];
            args.extend(keys.iter().map(String::as_str));
            d.run(&args);
            d.run(&["GET", dest]);
        }
    }
    d.run(&["BITOP", "NOT", &keys[0], &keys[3]]);
    d.run(&["GET", &keys[0]]);
    // The destination's shard holds none of the sources (it must not take part in the fold).
    d.run(&["BITOP", "AND", &keys[0], &keys[1], &keys[2]]);
    d.run(&["GET", &keys[0]]);
    d.run(&["BITOP", "OR", &keys[3], &keys[1], &keys[2], "missing:2"]);
    d.run(&["GET", &keys[3]]);
    d.run(&["RPUSH", &keys[2], "x"]);
    d.run(&["BITOP", "AND", &keys[1], &keys[0], &keys[2], &keys[3]]);
    d.run(&["BITOP", "OR", &keys[2], &keys[0], &keys[1]]);
    d.run(&["TYPE", &keys[2]]);
    d.run(&["BITOP", "AND", &keys[3], "missing:1", &key_in(1, "missing")]);
    d.run(&["EXISTS", &keys[3]]);
    for k in &keys {
        d.run(&["BITCOUNT", k]);
        d.run(&["BITPOS", k, "1"]);
    }
}
