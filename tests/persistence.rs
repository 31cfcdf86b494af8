//! RDB persistence: SAVE/BGSAVE and restart, the point-in-time snapshot under concurrent writes,
//! files moving both ways between redis-server and Strata, corrupt and truncated files, save
//! points, SHUTDOWN SAVE/NOSAVE, DEBUG RELOAD and -LOADING.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Conn, Kind, Reply, Server, TempDir};

fn s(r: &Reply) -> String {
    String::from_utf8_lossy(r.as_bytes().unwrap_or(b"<nil>")).into_owned()
}

fn call(c: &mut Conn, args: &[&str]) -> Reply {
    c.call_decoded(args)
}

/// Every key of every database: (db, key) → "type encoding ttl-kind value…", values in a canonical
/// order (sets and hashes sorted). TTLs are compared as present/absent plus the whole seconds left
/// rounded to tens (both sides load within seconds of each other).
fn dataset(c: &mut Conn) -> BTreeMap<(u32, String), String> {
    let mut out = BTreeMap::new();
    for db in 0..16u32 {
        call(c, &["select", &db.to_string()]);
        let mut cursor = "0".to_string();
        loop {
            let r = call(c, &["scan", &cursor, "count", "1000"]);
            let parts = r.as_array().expect("scan reply");
            cursor = s(&parts[0]);
            for k in parts[1].as_array().expect("scan keys") {
                let key = s(k);
                let t = s(&call(c, &["type", &key]));
                let enc = s(&call(c, &["object", "encoding", &key]));
                let ttl = call(c, &["pttl", &key]).as_int().expect("pttl");
                let ttl = if ttl < 0 {
                    "persist".to_string()
                } else {
                    format!("ttl~{}", (ttl / 1000 + 5) / 10)
                };
                let value = match t.as_str() {
                    "string" => s(&call(c, &["get", &key])),
                    "list" => join(&call(c, &["lrange", &key, "0", "-1"]), false),
                    "set" => join(&call(c, &["smembers", &key]), true),
                    "zset" => join(&call(c, &["zrange", &key, "0", "-1", "withscores"]), false),
                    "hash" => {
                        let r = call(c, &["hgetall", &key]);
                        let mut pairs: Vec<String> = r
                            .as_array()
                            .expect("hgetall")
                            .chunks(2)
                            .map(|p| format!("{}={}", s(&p[0]), s(&p[1])))
                            .collect();
                        pairs.sort();
                        pairs.join(",")
                    }
                    other => panic!("unexpected type {other} for {key}"),
                };
                out.insert((db, key), format!("{t} {enc} {ttl} {value}"));
            }
            if cursor == "0" {
                break;
            }
        }
    }
    call(c, &["select", "0"]);
    out
}

fn join(r: &Reply, sort: bool) -> String {
    let mut v: Vec<String> = r.as_array().expect("array").iter().map(s).collect();
    if sort {
        v.sort();
    }
    v.join(",")
}

/// A dataset with every type in each of the encodings Redis 7.0 gives it, TTLs, and a second
/// database.
fn fill_every_type(c: &mut Conn) {
    let ok = |r: Reply| assert!(!r.is_error(), "{r:?}");
    ok(call(c, &["set", "int", "12345"]));
    ok(call(c, &["set", "neg", "-9000000000"]));
    ok(call(c, &["set", "embstr", "hello world"]));
    ok(call(c, &["set", "raw", &"r".repeat(300)]));
    ok(call(c, &["set", "compressible", &"a".repeat(2000)]));
    ok(call(c, &["set", "volatile", "v", "ex", "5000"]));
    ok(call(c, &["append", "appended", "abc"]));
    ok(call(c, &["rpush", "list_small", "1", "2", "three", "-4"]));
    let big: Vec<String> = (0..3000).map(|i| format!("element-{i}")).collect();
    let mut args = vec!["rpush".to_string(), "list_big".into()];
    args.extend(big.iter().cloned());
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(call(c, &a));
    ok(call(c, &["sadd", "set_int", "1", "2", "3", "100000", "-5"]));
    ok(call(c, &["sadd", "set_str", "a", "b", "c"]));
    let mut args = vec!["sadd".to_string(), "set_bigint".into()];
    args.extend((0..600).map(|i| i.to_string()));
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(call(c, &a));
    ok(call(
        c,
        &["zadd", "zset_small", "1", "a", "2.5", "b", "-3", "c"],
    ));
    let mut args = vec!["zadd".to_string(), "zset_big".into()];
    for i in 0..200 {
        args.push(format!("{}.25", i));
        args.push(format!("member-{i}"));
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(call(c, &a));
    ok(call(c, &["hset", "hash_small", "f1", "v1", "f2", "2"]));
    let mut args = vec!["hset".to_string(), "hash_big".into()];
    for i in 0..300 {
        args.push(format!("field-{i}"));
        args.push(format!("value-{i}"));
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(call(c, &a));
    ok(call(c, &["hset", "hash_volatile", "f", "v"]));
    ok(call(c, &["expire", "hash_volatile", "3000"]));
    ok(call(c, &["select", "5"]));
    ok(call(c, &["set", "in_db5", "five"]));
    ok(call(c, &["lpush", "list_db5", "x"]));
    ok(call(c, &["select", "0"]));
}

/// Waits (bounded) until `f` holds.
fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_bgsave_done(c: &mut Conn) {
    wait_until("the background save to end", || {
        c.info_u64("persistence", "rdb_bgsave_in_progress") == 0
    });
}

/// Waits (bounded) until the server has loaded its dataset (it answers -LOADING meanwhile).
fn loaded(server: &Server) -> Conn {
    let mut c = server.conn();
    wait_until("the dataset to load", || {
        !call(&mut c, &["info", "persistence"])
            .as_bytes()
            .is_some_and(|t| String::from_utf8_lossy(t).contains("loading:1"))
    });
    c
}

fn dir_arg(d: &Path) -> String {
    d.to_str().expect("utf-8 path").to_string()
}

#[test]
fn save_then_restart_keeps_every_type_and_ttl() {
    let data = TempDir::new("persist-save");
    let dir = dir_arg(data.path());
    let before = {
        let a = Server::strata(&["--dir", &dir, "--threads", "2"]);
        let mut c = a.conn();
        fill_every_type(&mut c);
        let before = dataset(&mut c);
        assert_eq!(s(&call(&mut c, &["save"])), "OK");
        let last = call(&mut c, &["lastsave"]).as_int().unwrap();
        assert!(last > 1_700_000_000, "{last}");
        assert_eq!(c.info_u64("persistence", "rdb_changes_since_last_save"), 0);
        assert_eq!(c.info_u64("persistence", "rdb_saves"), 1);
        a.wait_for_log("DB saved on disk");
        before
    };
    assert!(before.len() > 15);
    // One thread this time: keys go to their (new) shards.
    let b = Server::strata(&["--dir", &dir, "--threads", "1"]);
    let mut c = loaded(&b);
    assert_eq!(dataset(&mut c), before);
    b.wait_for_log("DB loaded from disk");
    let status = Command::new("redis-check-rdb")
        .arg(data.path().join("dump.rdb"))
        .output()
        .expect("redis-check-rdb runs");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
}

/// BGSAVE while another client overwrites, deletes and adds keys: the file holds exactly the
/// dataset of the moment BGSAVE started.
#[test]
fn bgsave_under_concurrent_writes_is_point_in_time() {
    let data = TempDir::new("persist-pit");
    let dir = dir_arg(data.path());
    let n = 20_000;
    let value0 = "0".repeat(1000);
    {
        // A slow writer (rdb-key-save-delay) and 20 MB of values (more than the shards may
        // buffer ahead), so most keys are still unsaved when the writes come.
        let a = Server::strata(&["--dir", &dir, "--threads", "2"]);
        let mut c = a.conn();
        for chunk in (0..n).collect::<Vec<_>>().chunks(500) {
            let mut args = vec!["mset".to_string()];
            for i in chunk {
                args.push(format!("k:{i}"));
                args.push(value0.clone());
            }
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            assert!(!call(&mut c, &a).is_error());
        }
        call(&mut c, &["hset", "h", "f", "0"]);
        call(&mut c, &["rpush", "l", "0"]);
        call(&mut c, &["set", "gone", "soon"]);
        call(&mut c, &["select", "2"]);
        call(&mut c, &["set", "flushed", "yes"]);
        call(&mut c, &["select", "0"]);
        call(&mut c, &["config", "set", "rdb-key-save-delay", "30"]);
        assert_eq!(s(&call(&mut c, &["bgsave"])), "Background saving started");
        let mut w = a.conn();
        // Writes of every kind while the file is written: overwrite, in-place change, delete,
        // TTL, new keys, a flushed database.
        for round in 1..=3 {
            for i in (0..n).step_by(7) {
                w.send(&["set", &format!("k:{i}"), &format!("round-{round}")]);
            }
            for i in (0..n).step_by(7) {
                let _ = w.read_reply();
                let _ = i;
            }
            call(&mut w, &["hset", "h", "f", &round.to_string()]);
            call(&mut w, &["rpush", "l", &round.to_string()]);
            call(&mut w, &["set", &format!("new:{round}"), "x"]);
            call(&mut w, &["expire", "k:1", "1000"]);
            call(&mut w, &["del", "gone", "k:2"]);
        }
        call(&mut w, &["select", "2"]);
        call(&mut w, &["flushdb"]);
        assert_eq!(
            c.info_u64("persistence", "rdb_bgsave_in_progress"),
            1,
            "the writes must overlap the save"
        );
        assert!(
            call(&mut c, &["bgsave"]).is_error(),
            "a second BGSAVE is refused"
        );
        wait_bgsave_done(&mut c);
        assert!(a
            .log_text()
            .contains("Background saving terminated with success"));
        // Some keys were saved by the write path before it changed them.
        assert!(c.info_u64("persistence", "rdb_last_cow_size") > 0);
    }
    let b = Server::strata(&["--dir", &dir, "--threads", "2"]);
    let mut c = loaded(&b);
    assert_eq!(call(&mut c, &["dbsize"]).as_int(), Some(n as i64 + 3));
    for i in (0..n).step_by(997).chain([1, 2, 7, 14]) {
        assert_eq!(
            s(&call(&mut c, &["get", &format!("k:{i}")])),
            value0,
            "k:{i}"
        );
    }
    // Every key: none holds a later round.
    let mut cursor = "0".to_string();
    let mut seen = 0;
    loop {
        let r = call(&mut c, &["scan", &cursor, "count", "1000"]);
        let parts = r.as_array().unwrap();
        cursor = s(&parts[0]);
        for k in parts[1].as_array().unwrap() {
            let key = s(k);
            if key.starts_with("k:") {
                let v = call(&mut c, &["strlen", &key]).as_int();
                assert_eq!(v, Some(1000), "{key} was saved after the start");
                seen += 1;
            }
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen, n);
    assert_eq!(call(&mut c, &["ttl", "k:1"]).as_int(), Some(-1));
    assert_eq!(s(&call(&mut c, &["hget", "h", "f"])), "0");
    assert_eq!(join(&call(&mut c, &["lrange", "l", "0", "-1"]), false), "0");
    assert_eq!(s(&call(&mut c, &["get", "gone"])), "soon");
    assert!(call(&mut c, &["get", "new:1"]).is_nil());
    call(&mut c, &["select", "2"]);
    assert_eq!(s(&call(&mut c, &["get", "flushed"])), "yes");
}

fn copy_dump(from: &Path, to: &Path) {
    std::fs::copy(from.join("dump.rdb"), to.join("dump.rdb")).expect("copy dump.rdb");
}

/// A dump redis-server wrote loads into Strata with every key, type, encoding and TTL equal; the
/// dump Strata then writes loads into redis-server the same.
#[test]
fn dumps_move_between_redis_and_strata() {
    let redis_dir = TempDir::new("persist-from-redis");
    let strata_dir = TempDir::new("persist-strata");
    let back_dir = TempDir::new("persist-to-redis");
    let expected = {
        let r = Server::redis(&["--dir", &dir_arg(redis_dir.path())]);
        let mut c = r.conn();
        fill_every_type(&mut c);
        let d = dataset(&mut c);
        assert_eq!(s(&call(&mut c, &["save"])), "OK");
        d
    };
    copy_dump(redis_dir.path(), strata_dir.path());
    {
        let st = Server::strata(&["--dir", &dir_arg(strata_dir.path())]);
        let mut c = loaded(&st);
        assert_eq!(dataset(&mut c), expected, "redis-server's dump in Strata");
        assert_eq!(s(&call(&mut c, &["save"])), "OK");
    }
    copy_dump(strata_dir.path(), back_dir.path());
    let r = Server::redis(&["--dir", &dir_arg(back_dir.path())]);
    let mut c = loaded(&r);
    assert_eq!(dataset(&mut c), expected, "Strata's dump in redis-server");
}

/// Runs strata on `dir` expecting it to refuse to start: returns its exit code and output.
fn start_refused(dir: &Path) -> (i32, String) {
    let port = crate::harness::free_port().to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--dir",
            &dir_arg(dir),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strata");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut child = out;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let o = child.wait_with_output().expect("output");
            let text = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            return (status.code().unwrap_or(-1), text);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("strata started on a bad RDB file");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn corrupt_and_truncated_files_are_refused() {
    let data = TempDir::new("persist-bad");
    {
        let a = Server::strata(&["--dir", &dir_arg(data.path())]);
        let mut c = a.conn();
        fill_every_type(&mut c);
        assert_eq!(s(&call(&mut c, &["save"])), "OK");
    }
    let path = data.path().join("dump.rdb");
    let good = std::fs::read(&path).unwrap();
    // The checksum.
    let mut bad = good.clone();
    let n = bad.len();
    bad[n - 3] ^= 0xff;
    std::fs::write(&path, &bad).unwrap();
    let (code, log) = start_refused(data.path());
    assert_ne!(code, 0);
    assert!(log.contains("Wrong RDB checksum"), "{log}");
    assert!(log.contains("RDB CRC error"), "{log}");
    assert!(log.contains(&path.display().to_string()), "{log}");
    // Cut short at several places.
    for cut in [10, good.len() / 3, good.len() / 2, good.len() - 9] {
        std::fs::write(&path, &good[..cut]).unwrap();
        let (code, log) = start_refused(data.path());
        assert_ne!(code, 0, "cut at {cut}");
        assert!(
            log.contains("Internal error in RDB reading offset"),
            "cut at {cut}: {log}"
        );
        assert!(!log.contains("panicked"), "{log}");
    }
    // A byte flipped inside a value (the checksum is not checked first): refused or, if the
    // damage is still valid RDB, the checksum catches it; never a panic, never a start.
    for at in [20, good.len() / 2, good.len() - 20] {
        let mut bad = good.clone();
        bad[at] ^= 0x5a;
        std::fs::write(&path, &bad).unwrap();
        let (code, log) = start_refused(data.path());
        assert_ne!(code, 0);
        assert!(!log.contains("panicked"), "{log}");
    }
    // Unreadable: Redis's "Fatal error loading".
    std::fs::write(&path, &good).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let (code, log) = start_refused(data.path());
    assert_ne!(code, 0);
    assert!(log.contains("Fatal error loading the DB"), "{log}");
}

#[test]
fn save_points_trigger_a_background_save() {
    let a = Server::strata(&["--save", "1 2"]);
    let mut c = a.conn();
    call(&mut c, &["set", "a", "1"]);
    // One change is not enough.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(c.info_u64("persistence", "rdb_saves"), 0);
    call(&mut c, &["set", "b", "2"]);
    wait_until("a save point to save", || {
        c.info_u64("persistence", "rdb_saves") == 1
    });
    assert!(a.log_text().contains("2 changes in 1 seconds. Saving..."));
    a.wait_for_log("Background saving terminated with success");
    assert!(a.dir().join("dump.rdb").exists());
    assert_eq!(c.info_u64("persistence", "rdb_changes_since_last_save"), 0);
    // BGSAVE SCHEDULE with nothing running starts one; LASTSAVE moves.
    assert_eq!(
        s(&call(&mut c, &["bgsave", "schedule"])),
        "Background saving started"
    );
    wait_bgsave_done(&mut c);
    assert!(call(&mut c, &["bgsave", "now"]).is_error());
}

#[test]
fn shutdown_save_and_nosave() {
    // save "" (the default): SHUTDOWN SAVE writes the file, plain SHUTDOWN does not.
    let data = TempDir::new("persist-shutdown");
    let dir = dir_arg(data.path());
    let file = data.path().join("dump.rdb");
    {
        let mut a = Server::strata(&["--dir", &dir]);
        let mut c = a.conn();
        call(&mut c, &["set", "k", "v"]);
        c.send(&["shutdown"]);
        assert!(a.wait_exit(Duration::from_secs(10)).is_some());
        assert!(!file.exists());
    }
    {
        let mut a = Server::strata(&["--dir", &dir]);
        let mut c = a.conn();
        call(&mut c, &["set", "k", "v"]);
        c.send(&["shutdown", "save"]);
        assert!(a.wait_exit(Duration::from_secs(10)).is_some());
        assert!(file.exists());
        assert!(a
            .log_text()
            .contains("Saving the final RDB snapshot before exiting."));
    }
    // With save points: NOSAVE skips the save, SIGTERM saves.
    {
        let mut a = Server::strata(&["--dir", &dir, "--save", "3600 1"]);
        let mut c = loaded(&a);
        assert_eq!(s(&call(&mut c, &["get", "k"])), "v");
        call(&mut c, &["set", "k", "v2"]);
        c.send(&["shutdown", "nosave"]);
        assert!(a.wait_exit(Duration::from_secs(10)).is_some());
    }
    {
        let mut a = Server::strata(&["--dir", &dir, "--save", "3600 1"]);
        let mut c = loaded(&a);
        assert_eq!(s(&call(&mut c, &["get", "k"])), "v", "NOSAVE did not save");
        call(&mut c, &["set", "k", "v3"]);
        a.signal("TERM");
        assert!(a.wait_exit(Duration::from_secs(10)).is_some());
        let log = a.log_text();
        assert!(
            log.contains("Saving the final RDB snapshot before exiting."),
            "{log}"
        );
        assert!(log.contains("DB saved on disk"), "{log}");
    }
    let a = Server::strata(&["--dir", &dir]);
    let mut c = loaded(&a);
    assert_eq!(s(&call(&mut c, &["get", "k"])), "v3");
}

#[test]
fn debug_reload_keeps_everything() {
    for kind in [Kind::Redis, Kind::Strata] {
        let a = match kind {
            Kind::Redis => Server::redis(&["--enable-debug-command", "yes"]),
            Kind::Strata => Server::strata(&["--enable-debug-command", "yes"]),
        };
        let mut c = a.conn();
        fill_every_type(&mut c);
        let before = dataset(&mut c);
        assert_eq!(s(&call(&mut c, &["debug", "reload"])), "OK", "{kind:?}");
        assert_eq!(dataset(&mut c), before, "{kind:?}");
        assert_eq!(c.info_u64("persistence", "rdb_changes_since_last_save"), 0);
        // NOSAVE loads the file as it is: the key written since is gone.
        call(&mut c, &["set", "after", "1"]);
        assert_eq!(s(&call(&mut c, &["debug", "reload", "nosave"])), "OK");
        assert!(call(&mut c, &["get", "after"]).is_nil(), "{kind:?}");
        let e = call(&mut c, &["debug", "reload", "bogus"]);
        assert_eq!(
            e.error_text()
                .map(|t| String::from_utf8_lossy(t).into_owned()),
            Some("ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.".into())
        );
    }
}

#[test]
fn bgsave_replies_and_lastsave_match_redis() {
    for kind in [Kind::Redis, Kind::Strata] {
        let a = Server::start(kind, &["--rdb-key-save-delay", "2000"]);
        let mut c = a.conn();
        for i in 0..200 {
            call(&mut c, &["set", &format!("k{i}"), "v"]);
        }
        let before = call(&mut c, &["lastsave"]).as_int().unwrap();
        assert_eq!(
            s(&call(&mut c, &["bgsave"])),
            "Background saving started",
            "{kind:?}"
        );
        assert_eq!(c.info_u64("persistence", "rdb_bgsave_in_progress"), 1);
        let again = call(&mut c, &["bgsave"]);
        assert_eq!(
            again.error_text(),
            Some(&b"ERR Background save already in progress"[..]),
            "{kind:?}"
        );
        // SCHEDULE waits only for another kind of child (an AOF rewrite), not for an RDB save.
        assert_eq!(
            call(&mut c, &["bgsave", "schedule"]).error_text(),
            Some(&b"ERR Background save already in progress"[..]),
            "{kind:?}"
        );
        assert!(call(&mut c, &["save"]).is_error(), "{kind:?}");
        call(&mut c, &["config", "set", "rdb-key-save-delay", "0"]);
        wait_until("the save", || {
            c.info_u64("persistence", "rdb_bgsave_in_progress") == 0
                && c.info_u64("persistence", "rdb_saves") >= 1
        });
        assert!(call(&mut c, &["lastsave"]).as_int().unwrap() >= before);
        assert_eq!(
            s(&call(&mut c, &["info", "persistence"]))
                .lines()
                .find(|l| l.starts_with("rdb_last_bgsave_status"))
                .map(str::to_string),
            Some("rdb_last_bgsave_status:ok".to_string())
        );
    }
}

/// A failed background save with save points refuses writes with -MISCONF, as Redis.
#[test]
fn failed_bgsave_refuses_writes_with_misconf() {
    for kind in [Kind::Redis, Kind::Strata] {
        let gone = TempDir::new("persist-gone");
        let a = Server::start(
            kind,
            &["--save", "3600 1", "--enable-protected-configs", "yes"],
        );
        let mut c = a.conn();
        call(&mut c, &["set", "k", "v"]);
        // A directory removed under the server: the save cannot create its file.
        assert!(!call(&mut c, &["config", "set", "dir", &dir_arg(gone.path())]).is_error());
        std::fs::remove_dir_all(gone.path()).unwrap();
        assert_eq!(s(&call(&mut c, &["bgsave"])), "Background saving started");
        wait_bgsave_done(&mut c);
        let status = s(&call(&mut c, &["info", "persistence"]));
        assert!(
            status.contains("rdb_last_bgsave_status:err"),
            "{kind:?} {status}"
        );
        let e = call(&mut c, &["set", "k", "v2"]);
        assert!(
            e.error_text()
                .is_some_and(|t| t == persist_misconf().as_bytes()),
            "{kind:?} {e:?}"
        );
        assert!(call(&mut c, &["ping"]).is_error(), "{kind:?}");
        assert!(call(&mut c, &["get", "k"]).as_bytes().is_some());
        call(
            &mut c,
            &["config", "set", "stop-writes-on-bgsave-error", "no"],
        );
        assert!(!call(&mut c, &["set", "k", "v3"]).is_error());
        call(&mut c, &["config", "set", "dir", &dir_arg(a.dir())]);
    }
}

fn persist_misconf() -> &'static str {
    "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to \
     disk. Commands that may modify the data set are disabled, because this instance is \
     configured to report errors during writes if RDB snapshotting fails \
     (stop-writes-on-bgsave-error option). Please check the Redis logs for details about the \
     RDB error."
}

/// While a big file loads, commands get -LOADING and INFO reports the progress.
#[test]
fn loading_answers_loading_until_ready() {
    let data = TempDir::new("persist-loading");
    let dir = dir_arg(data.path());
    {
        let a = Server::strata(&["--dir", &dir, "--enable-debug-command", "yes"]);
        let mut c = a.conn();
        assert_eq!(s(&call(&mut c, &["debug", "populate", "20000"])), "OK");
        assert_eq!(s(&call(&mut c, &["save"])), "OK");
    }
    // 20000 keys at 100 µs each: two seconds of loading.
    let a = Server::strata(&["--dir", &dir, "--key-load-delay", "100"]);
    let mut c = a.conn();
    let e = call(&mut c, &["get", "key:1"]);
    assert_eq!(
        e.error_text(),
        Some(&b"LOADING Redis is loading the dataset in memory"[..])
    );
    let info = s(&call(&mut c, &["info", "persistence"]));
    assert!(info.contains("loading:1"), "{info}");
    assert!(info.contains("loading_total_bytes:"), "{info}");
    wait_until("the load to end", || {
        !call(&mut c, &["get", "key:1"]).is_error()
    });
    assert_eq!(s(&call(&mut c, &["get", "key:1"])), "value:1");
    assert_eq!(call(&mut c, &["dbsize"]).as_int(), Some(20000));
    assert!(s(&call(&mut c, &["info", "persistence"])).contains("loading:0"));
}

/// FLUSHALL stops a background save (not an error) and, with save points, saves the empty
/// dataset, as Redis does.
#[test]
fn flushall_stops_bgsave_and_saves_with_save_points() {
    for kind in [Kind::Redis, Kind::Strata] {
        let a = Server::start(kind, &["--rdb-key-save-delay", "1000"]);
        let mut c = a.conn();
        for i in 0..2000 {
            c.send(&["set", &format!("k{i}"), "v"]);
        }
        for _ in 0..2000 {
            let _ = c.read_reply();
        }
        assert_eq!(s(&call(&mut c, &["bgsave"])), "Background saving started");
        assert_eq!(c.info_u64("persistence", "rdb_bgsave_in_progress"), 1);
        assert_eq!(s(&call(&mut c, &["flushall"])), "OK");
        wait_bgsave_done(&mut c);
        let info = s(&call(&mut c, &["info", "persistence"]));
        assert!(
            info.contains("rdb_last_bgsave_status:ok"),
            "{kind:?} {info}"
        );
        assert_eq!(c.info_u64("persistence", "rdb_saves"), 1, "{kind:?}");
        // With save points FLUSHALL saves.
        call(&mut c, &["config", "set", "rdb-key-save-delay", "0"]);
        call(&mut c, &["config", "set", "save", "3600 1"]);
        call(&mut c, &["set", "x", "1"]);
        let before = call(&mut c, &["lastsave"]).as_int().unwrap();
        assert_eq!(s(&call(&mut c, &["flushall"])), "OK");
        // That save is not counted in rdb_saves (Redis counts SAVE and background saves).
        assert_eq!(c.info_u64("persistence", "rdb_saves"), 1, "{kind:?}");
        assert!(call(&mut c, &["lastsave"]).as_int().unwrap() >= before);
        assert!(a.dir().join("dump.rdb").exists(), "{kind:?}");
        assert_eq!(
            c.info_u64("persistence", "rdb_changes_since_last_save"),
            0,
            "{kind:?}"
        );
    }
}

/// BGSAVE inside a transaction is scheduled, as in Redis, and runs after it.
#[test]
fn bgsave_in_exec_is_scheduled() {
    for kind in [Kind::Redis, Kind::Strata] {
        let a = Server::start(kind, &[]);
        let mut c = a.conn();
        call(&mut c, &["set", "k", "v"]);
        call(&mut c, &["multi"]);
        call(&mut c, &["bgsave"]);
        let r = call(&mut c, &["exec"]);
        assert_eq!(
            r.as_array().map(|a| s(&a[0])),
            Some("Background saving scheduled".to_string()),
            "{kind:?}"
        );
        wait_until("the scheduled save", || {
            c.info_u64("persistence", "rdb_changes_since_last_save") == 0
                && c.info_u64("persistence", "rdb_bgsave_in_progress") == 0
        });
        assert!(a.dir().join("dump.rdb").exists(), "{kind:?}");
    }
}
