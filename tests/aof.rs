//! The propagation stream as the AOF shows it: the same commands sent to redis-server and Strata,
//! both with `appendonly yes`, leave the same commands in their incremental AOF files (absolute
//! times in ms compared within a margin, as each server computes its own).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::harness::Server;

/// The commands of an AOF file (RESP arrays of bulk strings).
fn parse_aof(bytes: &[u8]) -> Vec<Vec<String>> {
    let mut cmds = Vec::new();
    let mut i = 0;
    let line = |i: &mut usize| -> String {
        let end = bytes[*i..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("CRLF")
            + *i;
        let s = String::from_utf8_lossy(&bytes[*i..end]).into_owned();
        *i = end + 2;
        s
    };
    while i < bytes.len() {
        let head = line(&mut i);
        let n: usize = head
            .strip_prefix('*')
            .expect("array")
            .parse()
            .expect("count");
        let mut argv = Vec::with_capacity(n);
        for _ in 0..n {
            let len: usize = line(&mut i)
                .strip_prefix('$')
                .expect("bulk")
                .parse()
                .expect("len");
            argv.push(String::from_utf8_lossy(&bytes[i..i + len]).into_owned());
            i += len + 2;
        }
        cmds.push(argv);
    }
    cmds
}

fn incr_file(dir: &Path) -> Vec<u8> {
    std::fs::read(dir.join("appendonlydir/appendonly.aof.1.incr.aof")).unwrap_or_default()
}

/// Unix ms (13 digits) → a marker, after checking both sides agree within 5 s.
fn same_commands(redis: &[Vec<String>], strata: &[Vec<String>]) {
    let norm = |c: &[Vec<String>]| -> Vec<Vec<String>> {
        c.iter()
            .map(|argv| {
                argv.iter()
                    .enumerate()
                    .map(|(i, a)| {
                        if i == 0 {
                            return a.to_ascii_uppercase();
                        }
                        match a.parse::<i64>() {
                            Ok(ms) if ms > 1_000_000_000_000 => "<ms>".to_string(),
                            _ => a.clone(),
                        }
                    })
                    .collect()
            })
            .collect()
    };
    assert_eq!(
        norm(redis),
        norm(strata),
        "redis:\n{redis:?}\nstrata:\n{strata:?}"
    );
    for (r, s) in redis.iter().zip(strata) {
        for (a, b) in r.iter().zip(s) {
            if let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) {
                if x > 1_000_000_000_000 {
                    assert!((x - y).abs() < 5000, "times {x} and {y} in {r:?} / {s:?}");
                }
            }
        }
    }
}

fn wait_for_len(dir: &Path, n: usize) -> Vec<Vec<String>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let cmds = parse_aof(&incr_file(dir));
        if cmds.len() >= n || Instant::now() > deadline {
            return cmds;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

const SCRIPT: &[&[&str]] = &[
    &["set", "a", "1"],
    &["set", "b", "2", "ex", "100"],
    &["set", "b2", "2", "px", "100000", "get"],
    &["set", "b3", "2", "pxat", "4102444800000"],
    &["get", "a"],
    &["setex", "c", "100", "v"],
    &["psetex", "d", "100000", "v"],
    &["expire", "a", "100"],
    &["pexpire", "b", "100000", "gt"],
    &["expireat", "a", "4102444800"],
    &["expire", "nokey", "100"],
    &["incrbyfloat", "f", "1.5"],
    &["hincrbyfloat", "h", "x", "2.5"],
    &["sadd", "s", "a"],
    &["spop", "s"],
    &["sadd", "s", "a", "b", "c"],
    &["spop", "s", "5"],
    &["select", "3"],
    &["set", "x", "y"],
    &["getex", "x", "ex", "100"],
    &["getex", "x", "persist"],
    &["getex", "x"],
    &["mset", "k1", "1", "k2", "2", "k3", "3", "k4", "4"],
    &["rename", "k1", "k5"],
    &["del", "nokey"],
    &["del", "k2", "k3", "k4"],
    &["lpush", "l", "a", "b", "c"],
    &["rpop", "l"],
    &["flushdb"],
    &["swapdb", "0", "3"],
    &["getdel", "a"],
    &["getdel", "a"],
    &["multi"],
    &["set", "t1", "1"],
    &["set", "t2", "2"],
    &["incr", "t3"],
    &["exec"],
    &["multi"],
    &["set", "t3", "3"],
    &["get", "t3"],
    &["exec"],
    &["multi"],
    &["get", "t3"],
    &["exec"],
    &["expire", "t1", "-1"],
    &["set", "e", "1", "px", "1"],
    &["flushall"],
];

#[test]
fn aof_content_matches_redis() {
    let args = ["--appendonly", "yes", "--appendfsync", "always"];
    let redis = Server::redis(&args);
    let strata = Server::strata(&[&args[..], &["--threads", "2"]].concat());
    for server in [&redis, &strata] {
        let mut c = server.conn();
        for cmd in SCRIPT {
            if cmd[0] == "flushall" {
                // The key set with a 1 ms TTL has expired: reading it deletes it (a DEL).
                std::thread::sleep(Duration::from_millis(5));
                c.call(&["get", "e"]);
            }
            c.call(cmd);
        }
    }
    let r = wait_for_len(redis.dir(), 1000);
    let s = wait_for_len(strata.dir(), r.len());
    same_commands(&r, &s);
    let manifest =
        std::fs::read_to_string(strata.dir().join("appendonlydir/appendonly.aof.manifest"))
            .expect("manifest");
    assert!(
        manifest.contains("file appendonly.aof.1.incr.aof seq 1 type i\n"),
        "{manifest}"
    );
    assert!(
        manifest.starts_with("file appendonly.aof.1.base."),
        "{manifest}"
    );
}
