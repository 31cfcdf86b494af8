//! `maxmemory`: OOM rejection reply for reply against redis-server (denyoom commands, queueing
//! inside MULTI, EXEC of a transaction holding a denyoom command, EXEC of reads, DISCARD, CONFIG),
//! and black-box tests of eviction on Strata with keys on several shards (`--threads 4`): the
//! server stays near the limit under every policy, volatile policies evict only keys with a TTL,
//! LRU keeps recently used keys more often than idle ones, evictions are announced (`evicted`) and
//! break WATCH, and noeviction never evicts.

use std::thread::sleep;
use std::time::{Duration, Instant};

use crate::harness::{encode_command, Conn, Diff, Reply, Server};

const OOM: &[u8] = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n";

#[test]
fn oom_rejection_matches_redis() {
    let mut d = Diff::with_threads(4);
    let mut other = d.new_conns();
    for proto in ["2", "3"] {
        if proto == "3" {
            d.run_matching(&["HELLO", "3"], |r| !r.is_error());
        }
        d.run(&["CONFIG", "SET", "maxmemory", "0"]);
        d.run(&["FLUSHALL"]);
        d.run(&["SET", "a", "1"]);
        d.run(&["RPUSH", "l", "x"]);
        d.run(&["CONFIG", "SET", "maxmemory", "1"]);
        // denyoom commands are refused; reads, deletes and others run.
        assert_eq!(d.run(&["SET", "b", "2"]), OOM);
        d.run(&["LPUSH", "l", "y"]);
        d.run(&["APPEND", "a", "x"]);
        d.run(&["GET", "a"]);
        d.run(&["LRANGE", "l", "0", "-1"]);
        d.run(&["EXISTS", "b"]);
        d.run(&["EXPIRE", "a", "100"]);
        d.run(&["PERSIST", "a"]);
        d.run(&["PING"]);
        // Inside MULTI every command is refused while over the limit, and EXEC aborts.
        d.run(&["MULTI"]);
        d.run(&["SET", "b", "2"]);
        d.run(&["GET", "a"]);
        d.run(&["PING"]);
        d.run(&["EXEC"]);
        d.run(&["MULTI"]);
        d.run(&["GET", "a"]);
        d.run(&["DISCARD"]);
        d.run(&["EXEC"]);
        // Queued before the limit: a transaction of reads runs, one holding a denyoom command is
        // discarded.
        d.run(&["CONFIG", "SET", "maxmemory", "0"]);
        d.run(&["MULTI"]);
        d.run(&["GET", "a"]);
        d.run(&["LLEN", "l"]);
        other.run(&["CONFIG", "SET", "maxmemory", "1"]);
        d.run(&["EXEC"]);
        other.run(&["CONFIG", "SET", "maxmemory", "0"]);
        d.run(&["WATCH", "a"]);
        d.run(&["MULTI"]);
        d.run(&["GET", "a"]);
        d.run(&["SET", "c", "3"]);
        d.run(&["INCR", "a"]);
        other.run(&["CONFIG", "SET", "maxmemory", "1"]);
        let r = d.run(&["EXEC"]);
        assert!(r.starts_with(b"-EXECABORT Transaction discarded because of: OOM"));
        d.run(&["EXEC"]);
        d.run(&["GET", "c"]);
        // The watch went with the transaction.
        d.run(&["CONFIG", "SET", "maxmemory", "0"]);
        other.run(&["SET", "a", "changed"]);
        d.run(&["MULTI"]);
        d.run(&["GET", "a"]);
        d.run(&["EXEC"]);
        // A queueing error is counted as a rejected call.
        d.run(&["CONFIG", "SET", "maxmemory", "1"]);
        d.run(&["CONFIG", "RESETSTAT"]);
        d.run(&["SET", "z", "1"]);
        d.run(&["MULTI"]);
        d.run(&["SET", "z", "1"]);
        d.run(&["DISCARD"]);
        d.both(|c| {
            let info = info(c, "commandstats");
            field(&info, "cmdstat_set").map(|l| l.split(',').nth(3).unwrap_or("").to_string())
        });
        d.run(&["CONFIG", "SET", "maxmemory", "0"]);
    }
}

#[test]
fn maxmemory_settings_match_redis() {
    let mut d = Diff::with_threads(4);
    for name in [
        "maxmemory",
        "maxmemory-policy",
        "maxmemory-samples",
        "maxmemory-eviction-tenacity",
    ] {
        d.run(&["CONFIG", "GET", name]);
    }
    for (name, value) in [
        ("maxmemory", "10mb"),
        ("maxmemory", "1GB"),
        ("maxmemory", "123456"),
        ("maxmemory", "2k"),
        ("maxmemory-policy", "ALLKEYS-LRU"),
        ("maxmemory-policy", "volatile-ttl"),
        ("maxmemory-samples", "10"),
        ("maxmemory-samples", "64"),
        ("maxmemory-samples", "100"),
        ("maxmemory-eviction-tenacity", "0"),
        ("maxmemory-eviction-tenacity", "100"),
    ] {
        d.run(&["CONFIG", "SET", name, value]);
        d.run(&["CONFIG", "GET", name]);
    }
    for (name, value) in [
        ("maxmemory", "bla"),
        ("maxmemory", "-1"),
        ("maxmemory", "10xb"),
        ("maxmemory-policy", "lru"),
        ("maxmemory-samples", "0"),
        ("maxmemory-samples", "65"),
        ("maxmemory-samples", "x"),
        ("maxmemory-eviction-tenacity", "101"),
        ("maxmemory-eviction-tenacity", "-1"),
    ] {
        d.run(&["CONFIG", "SET", name, value]);
    }
    d.run(&[
        "CONFIG",
        "SET",
        "maxmemory",
        "0",
        "maxmemory-policy",
        "noeviction",
    ]);
}

#[test]
fn maxmemory_is_accepted_at_start_up_and_reported_by_info() {
    let s = Server::strata(&[
        "--threads",
        "2",
        "--maxmemory",
        "100mb",
        "--maxmemory-policy",
        "allkeys-lru",
    ]);
    let mut c = s.conn();
    let mem = info(&mut c, "memory");
    assert_eq!(field(&mem, "maxmemory"), Some("104857600"));
    assert_eq!(field(&mem, "maxmemory_human"), Some("100.00M"));
    assert_eq!(field(&mem, "maxmemory_policy"), Some("allkeys-lru"));
    // Under an LRU policy with a limit, small integers are not shared (OBJECT REFCOUNT).
    c.call(&["SET", "n", "5"]);
    assert_eq!(c.call(&["OBJECT", "REFCOUNT", "n"]), b":1\r\n");
}

// ----- Eviction (black box) -----

fn info(c: &mut Conn, section: &str) -> String {
    match c.call_decoded(&["INFO", section]) {
        Reply::Bulk(Some(b)) | Reply::Verbatim(b) => String::from_utf8_lossy(&b).into_owned(),
        other => panic!("INFO {section}: {other:?}"),
    }
}

fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

fn stat(c: &mut Conn, section: &str, name: &str) -> u64 {
    let info = info(c, section);
    field(&info, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
}

fn used(c: &mut Conn) -> u64 {
    stat(c, "memory", "used_memory")
}

/// Sends `commands` pipelined in slices of 100 and returns their replies.
fn pipeline(c: &mut Conn, commands: &[Vec<String>]) -> Vec<Vec<u8>> {
    let mut replies = Vec::with_capacity(commands.len());
    for slice in commands.chunks(100) {
        let mut bytes = Vec::new();
        for cmd in slice {
            bytes.extend(encode_command(cmd));
        }
        c.send_raw(&bytes);
        for _ in slice {
            replies.push(c.read_reply());
        }
    }
    replies
}

fn sets(prefix: &str, n: usize, size: usize, ttl: Option<u64>) -> Vec<Vec<String>> {
    (0..n)
        .map(|i| {
            let mut cmd = vec!["SET".to_string(), format!("{prefix}:{i}"), "v".repeat(size)];
            if let Some(t) = ttl {
                cmd.extend(["EX".to_string(), (t + i as u64).to_string()]);
            }
            cmd
        })
        .collect()
}

fn alive(c: &mut Conn, prefix: &str, n: usize) -> Vec<bool> {
    let cmds: Vec<Vec<String>> = (0..n)
        .map(|i| vec!["EXISTS".to_string(), format!("{prefix}:{i}")])
        .collect();
    pipeline(c, &cmds).iter().map(|r| r == b":1\r\n").collect()
}

/// Polls until used memory is within `slack` of the limit (eviction by the shards' ticks is
/// asynchronous); returns the last reading.
fn settles(c: &mut Conn, limit: u64, slack: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let u = used(c);
        if u <= limit + slack || Instant::now() > deadline {
            return u;
        }
        sleep(Duration::from_millis(50));
    }
}

const MB: u64 = 1024 * 1024;

/// No limit, an empty keyspace and `policy`: where each policy's run starts.
fn start_over(c: &mut Conn, policy: &str) {
    c.call(&["CONFIG", "SET", "maxmemory", "0"]);
    c.call(&["FLUSHALL", "SYNC"]);
    c.call(&["CONFIG", "SET", "maxmemory-policy", policy]);
}

#[test]
fn every_policy_keeps_memory_near_the_limit() {
    let s = Server::strata(&["--threads", "4"]);
    let mut c = s.conn();
    for policy in [
        "allkeys-lru",
        "allkeys-lfu",
        "allkeys-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        start_over(&mut c, policy);
        c.call(&["CONFIG", "RESETSTAT"]);
        let limit = used(&mut c) + 4 * MB;
        c.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        let n = 12_000;
        let replies = pipeline(&mut c, &sets("k", n, 1000, Some(10_000)));
        assert!(
            replies.iter().all(|r| r == b"+OK\r\n"),
            "{policy}: a write was refused while keys could be evicted"
        );
        let u = settles(&mut c, limit, MB);
        assert!(u <= limit + MB, "{policy}: used {u} with limit {limit}");
        // No limit, no eviction: the counts stay put while read.
        c.call(&["CONFIG", "SET", "maxmemory", "0"]);
        let evicted = stat(&mut c, "stats", "evicted_keys");
        let keys = alive(&mut c, "k", n).iter().filter(|a| **a).count() as u64;
        assert!(evicted > 0 && keys < n as u64, "{policy}: nothing evicted");
        assert_eq!(keys + evicted, n as u64, "{policy}: keys lost otherwise");
    }
}

#[test]
fn volatile_policies_evict_only_keys_with_a_ttl() {
    let s = Server::strata(&["--threads", "4"]);
    let mut c = s.conn();
    for policy in [
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        start_over(&mut c, policy);
        let base = used(&mut c);
        pipeline(&mut c, &sets("p", 2000, 1000, None));
        pipeline(&mut c, &sets("v", 4000, 1000, Some(1000)));
        // About half of the volatile keys must go.
        let limit = base + 4 * MB;
        c.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        c.call(&["SET", "trigger", "x"]);
        settles(&mut c, limit, MB / 2);
        assert!(
            alive(&mut c, "p", 2000).iter().all(|a| *a),
            "{policy}: a key without TTL was evicted"
        );
        let v = alive(&mut c, "v", 4000);
        let left = v.iter().filter(|a| **a).count();
        assert!(left < 4000, "{policy}: no volatile key evicted");
        if policy == "volatile-ttl" {
            // Sampled: the evicted keys are mostly those with the nearest deadline (lowest index).
            let mean = |alive: bool| {
                let idx: Vec<usize> = (0..4000).filter(|&i| v[i] == alive).collect();
                idx.iter().sum::<usize>() as f64 / idx.len().max(1) as f64
            };
            assert!(
                mean(false) + 500.0 < mean(true),
                "{policy}: {} vs {}",
                mean(false),
                mean(true)
            );
        }
        // Once no key with a TTL is left, writes are refused and the rest stays.
        c.call(&["CONFIG", "SET", "maxmemory", "1"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.call(&["SET", "more", "x"]) != OOM {
            assert!(Instant::now() < deadline, "{policy}: never refused");
            sleep(Duration::from_millis(20));
        }
        assert!(alive(&mut c, "v", 4000).iter().all(|a| !*a));
        assert!(alive(&mut c, "p", 2000).iter().all(|a| *a));
    }
}

#[test]
fn lru_keeps_recently_used_keys_more_often_than_idle_ones() {
    let s = Server::strata(&["--threads", "4"]);
    let mut c = s.conn();
    c.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let base = used(&mut c);
    pipeline(&mut c, &sets("cold", 3000, 1000, None));
    pipeline(&mut c, &sets("hot", 3000, 1000, None));
    // The LRU clock counts seconds: let the keys age, then use the hot ones.
    sleep(Duration::from_millis(2100));
    let gets: Vec<Vec<String>> = (0..3000)
        .map(|i| vec!["GET".to_string(), format!("hot:{i}")])
        .collect();
    pipeline(&mut c, &gets);
    let limit = base + 8 * MB;
    c.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    pipeline(&mut c, &sets("new", 4000, 1000, None));
    settles(&mut c, limit, MB);
    let share = |a: Vec<bool>| a.iter().filter(|x| **x).count() as f64 / a.len() as f64;
    let (hot, cold) = (
        share(alive(&mut c, "hot", 3000)),
        share(alive(&mut c, "cold", 3000)),
    );
    assert!(hot > cold + 0.2, "hot kept {hot:.2}, cold kept {cold:.2}");
}

#[test]
fn evictions_are_announced_and_break_watch() {
    let s = Server::strata(&["--threads", "4"]);
    let mut c = s.conn();
    let mut sub = s.conn();
    let mut w = s.conn();
    c.call(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    c.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    sub.call(&["SUBSCRIBE", "__keyevent@0__:evicted"]);
    pipeline(&mut c, &sets("k", 200, 100, None));
    w.call(&["WATCH", "k:0"]);
    c.call(&["CONFIG", "SET", "maxmemory", "1"]);
    // Every key goes (the shards' ticks finish what the first command leaves).
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.call(&["DBSIZE"]) != b":0\r\n" {
        c.call(&["SET", "k:0", "x"]);
        assert!(Instant::now() < deadline, "keys left");
        sleep(Duration::from_millis(20));
    }
    c.call(&["CONFIG", "SET", "maxmemory", "0"]);
    let evicted = stat(&mut c, "stats", "evicted_keys");
    assert!(evicted >= 200);
    let mut names = Vec::new();
    for _ in 0..evicted {
        match Reply::decode(&sub.read_reply()) {
            Reply::Array(Some(m)) | Reply::Push(m) => names.push(m[2].as_bytes().unwrap().to_vec()),
            other => panic!("unexpected {other:?}"),
        }
    }
    for i in 0..200 {
        assert!(
            names.contains(&format!("k:{i}").into_bytes()),
            "k:{i} not announced"
        );
    }
    w.call(&["MULTI"]);
    w.call(&["SET", "k:0", "y"]);
    assert_eq!(w.call(&["EXEC"]), b"*-1\r\n");
}

#[test]
fn noeviction_never_evicts() {
    let s = Server::strata(&["--threads", "4"]);
    let mut c = s.conn();
    pipeline(&mut c, &sets("k", 3000, 1000, Some(1000)));
    let limit = used(&mut c) / 2;
    c.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    for i in 0..50 {
        assert_eq!(c.call(&["SET", &format!("new:{i}"), "x"]), OOM);
    }
    sleep(Duration::from_millis(300));
    assert_eq!(c.call(&["DBSIZE"]), b":3000\r\n");
    assert_eq!(stat(&mut c, "stats", "evicted_keys"), 0);
    assert_eq!(c.call(&["GET", "k:0"]), encode_bulk(&"v".repeat(1000)));
    c.call(&["CONFIG", "SET", "maxmemory", "0"]);
    assert_eq!(c.call(&["SET", "new:0", "x"]), b"+OK\r\n");
}

fn encode_bulk(s: &str) -> Vec<u8> {
    format!("${}\r\n{s}\r\n", s.len()).into_bytes()
}

#[test]
fn invalidations_of_evicted_keys_precede_the_reply() {
    for threads in ["1", "4"] {
        let s = Server::strata(&["--threads", threads]);
        let mut c = s.conn();
        c.call(&["HELLO", "3"]);
        c.call(&["CLIENT", "TRACKING", "on"]);
        let limit = used(&mut c) + 100 * 1024;
        c.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        c.call(&["CONFIG", "SET", "maxmemory-policy", "volatile-random"]);
        c.call(&["SETEX", "volatile-key", "10000", "x"]);
        c.call(&["GET", "volatile-key"]);
        // 200 KB: over the limit, and not evictable (no TTL).
        c.call(&["SETBIT", "big", "1600000", "0"]);
        // Evicted before GETBIT runs: the invalidation comes first.
        c.send(&["GETBIT", "big", "0"]);
        assert_eq!(
            c.read_reply(),
            b">2\r\n$10\r\ninvalidate\r\n*1\r\n$12\r\nvolatile-key\r\n",
            "threads {threads}"
        );
        assert_eq!(c.read_reply(), b":0\r\n");
        // Nothing left to evict: a write is refused, a read is not.
        assert_eq!(c.call(&["SET", "x", "y"]), OOM);
        assert_eq!(c.call(&["GETBIT", "big", "0"]), b":0\r\n");
    }
}

#[test]
fn min_replicas_to_write_refuses_writes_as_redis_does() {
    let mut d = Diff::with_threads(4);
    let mut other = d.new_conns();
    d.run(&["SET", "xx", "1"]);
    d.run(&["CONFIG", "GET", "min-replicas-to-write"]);
    d.run(&["CONFIG", "GET", "min-slaves-max-lag"]);
    d.run(&["CONFIG", "SET", "min-replicas-to-write", "2"]);
    d.run(&["SET", "xx", "2"]);
    d.run(&["INCR", "xx"]);
    d.run(&["GET", "xx"]);
    // Queued writes are refused (the transaction aborts); reads are not.
    d.run(&["MULTI"]);
    d.run(&["GET", "xx"]);
    d.run(&["INCR", "xx"]);
    d.run(&["EXEC"]);
    d.run(&["MULTI"]);
    d.run(&["GET", "xx"]);
    d.run(&["EXEC"]);
    // The lag at 0 turns the check off.
    d.run(&["CONFIG", "SET", "min-replicas-max-lag", "0"]);
    d.run(&["INCR", "xx"]);
    d.run(&["CONFIG", "SET", "min-replicas-max-lag", "10"]);
    // State changed after queueing: EXEC of a write is discarded.
    d.run(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
    d.run(&["MULTI"]);
    d.run(&["INCR", "xx"]);
    other.run(&["CONFIG", "SET", "min-slaves-to-write", "1"]);
    d.run(&["EXEC"]);
    d.run(&["GET", "xx"]);
    d.run(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
    d.run(&["INCR", "xx"]);
}

/// Eviction takes what the excess needs, not more. Values over 64 KiB are freed by the
/// background tick after they are evicted; the commands right after must not count them as still
/// used and evict again (each command looks at the excess before it runs). One write just over
/// the limit, then a pipeline of reads: about one large key goes, not one per command.
#[test]
fn large_evicted_values_are_not_evicted_for_again() {
    for threads in ["1", "4"] {
        large_values_evicted_once(threads);
    }
}

fn large_values_evicted_once(threads: &str) {
    let s = Server::strata(&["--threads", threads]);
    let mut c = s.conn();
    start_over(&mut c, "allkeys-random");
    let n = 60;
    let size = 200 * 1024;
    pipeline(&mut c, &sets("big", n, size, None));
    let limit = used(&mut c) + 100 * 1024;
    c.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    c.call(&["CONFIG", "RESETSTAT"]);
    assert_eq!(c.call(&["SET", "one-more", &"v".repeat(size)]), b"+OK\r\n");
    let reads: Vec<Vec<String>> = (0..200).map(|_| vec!["PING".to_string()]).collect();
    pipeline(&mut c, &reads);
    let evicted = stat(&mut c, "stats", "evicted_keys");
    assert!(
        (1..=3).contains(&evicted),
        "--threads {threads}: {evicted} keys of {size} bytes evicted for an excess of about 100 KiB"
    );
}

/// A long pipeline of writes sent in one write: under noeviction the writes past the limit are
/// refused, and memory ends near the limit, not over it by the pipeline's size. (Each command is
/// checked before its batch runs; a batch is one read of at most the connection's buffer, 16 KiB
/// to 1 MiB, so the overshoot is bounded by that.)
#[test]
fn a_pipeline_of_writes_stops_at_the_limit() {
    for threads in ["1", "4"] {
        let s = Server::strata(&["--threads", threads]);
        let mut c = s.conn();
        start_over(&mut c, "noeviction");
        let limit = used(&mut c) + 2 * MB;
        c.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        // One write of 20 MB: the server reads it in large slices.
        let cmds = sets("p", 2000, 10 * 1024, None);
        let mut bytes = Vec::new();
        for cmd in &cmds {
            bytes.extend(encode_command(cmd));
        }
        let mut writer = c.try_clone_stream();
        let sender = std::thread::spawn(move || {
            use std::io::Write;
            writer.write_all(&bytes).expect("send the pipeline");
        });
        let replies: Vec<Vec<u8>> = cmds.iter().map(|_| c.read_reply()).collect();
        sender.join().expect("sender");
        let refused = replies.iter().filter(|r| r.starts_with(b"-OOM")).count();
        let u = used(&mut c);
        assert!(
            refused > 1000,
            "--threads {threads}: only {refused} of 2000 refused"
        );
        assert!(
            u <= limit + MB,
            "--threads {threads}: used {u} with limit {limit} after the pipeline"
        );
    }
}

/// Redis's "is the memory limit honoured" pattern with keys that expire: fill to 4 KB under a limit
/// 100 KB above the empty server, then write as many keys again. Eviction must make room for the
/// new keys, not empty the database: an evicted key's expiry hint is freed with it (under memory
/// pressure), so the memory it held is seen gone and the next command does not evict again. On
/// the previous build a stale hint stayed behind per evicted key, and Strata kept 5-20% of the keys
/// written where Redis keeps about half.
#[test]
fn eviction_of_keys_with_a_ttl_makes_room_without_emptying_the_database() {
    for server in Server::redis_and_stratas() {
        let name = server.kind().name();
        let mut c = server.conn();
        c.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
        let limit = used(&mut c) + 100 * 1024;
        c.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        let mut written = 0;
        while used(&mut c) + 4096 <= limit {
            c.call(&["SETEX", &format!("key:{written:08}"), "10000", "x"]);
            written += 1;
            assert!(written < 100_000, "{name}: the limit is never reached");
        }
        for i in 0..written {
            c.call(&["SETEX", &format!("more:{i:08}"), "10000", "x"]);
        }
        let kept = Reply::decode(&c.call(&["DBSIZE"]))
            .as_int()
            .expect("DBSIZE");
        let total = 2 * written as i64;
        assert!(
            kept * 10 >= total * 3,
            "{name}: {kept} of {total} keys kept"
        );
        // Redis's own test allows 4 KB over: the last command's allocations, made after its
        // eviction. (INFO reads used_memory before its own scratch allocations.)
        let after = used(&mut c);
        assert!(
            after <= limit + 4096,
            "{name}: used_memory {after} against a limit of {limit}"
        );
        c.call(&["CONFIG", "SET", "maxmemory", "0"]);
    }
}

#[test]
fn a_keyspace_table_does_not_grow_into_the_limit_by_evicting_keys() {
    // 4096 keys fill a table of 4096 buckets (one shard); the next new key would double it, 64 KB
    // more, past a limit 10 KB away. Redis (dictExpandAllowed) lets the table run fuller instead of
    // evicting keys to make room for an index; it grows anyway past a load of 1.618.
    for server in Server::redis_and_stratas() {
        let name = server.kind().name();
        let mut c = server.conn();
        // As Redis's test does: no per-command latency histograms appearing along the way.
        c.call(&["CONFIG", "SET", "latency-tracking", "no"]);
        c.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
        pipeline(&mut c, &sets("key", 4096, 1, None));
        let limit = used(&mut c) + 10 * 1024;
        c.call(&["CONFIG", "SET", "maxmemory", &limit.to_string()]);
        c.call(&["SET", "k1", "v1"]);
        c.call(&["SET", "k2", "v2"]);
        assert_eq!(c.call(&["DBSIZE"]), b":4098\r\n", "{name}");
        assert_eq!(stat(&mut c, "stats", "evicted_keys"), 0, "{name}");
        c.call(&["CONFIG", "SET", "maxmemory", "0"]);
    }
}
