//! The propagation stream as the AOF shows it: the same commands sent to redis-server and Strata,
//! both with `appendonly yes`, leave the same commands in their incremental AOF files (absolute
//! times in ms compared within a margin, as each server computes its own).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::harness::{Conn, Server, TempDir};

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
    &["rpush", "bl", "a", "b", "c", "d", "e", "f"],
    &["blpop", "bl", "0"],
    &["brpop", "nokey", "bl", "0"],
    &["blmove", "bl", "bl2", "LEFT", "RIGHT", "0"],
    &["brpoplpush", "bl", "bl2", "0"],
    &["zadd", "bz", "1", "a", "2", "b", "3", "c", "4", "d"],
    &["bzpopmin", "bz", "0"],
    &["bzpopmax", "bz", "0"],
    &["blmpop", "0", "1", "bl", "left", "count", "5"],
    &["bzmpop", "0", "1", "bz", "min", "count", "1"],
    &["lmpop", "1", "bl2", "right"],
    &["zmpop", "1", "bz", "max"],
    &["flushall"],
];

/// Blocked clients served by a later push: BLPOP as LPOP, BLMOVE as LMOVE (its keys on one shard
/// or two), BZPOPMIN as ZPOPMIN, BLMPOP as LPOP with the count popped.
const SERVED: &[(&[&str], &[&str])] = &[
    (&["blpop", "w1", "5"], &["rpush", "w1", "x", "y"]),
    (
        &["blmove", "w2", "w3", "RIGHT", "LEFT", "5"],
        &["rpush", "w2", "x", "y"],
    ),
    (
        &["blmove", "{w4}a", "{w4}b", "LEFT", "LEFT", "5"],
        &["rpush", "{w4}a", "x"],
    ),
    (
        &["bzpopmin", "w5", "5"],
        &["zadd", "w5", "1", "x", "2", "y"],
    ),
    (
        &["blmpop", "5", "1", "w6", "left", "count", "5"],
        &["rpush", "w6", "x", "y"],
    ),
];

fn serve_blocked(server: &Server) {
    let mut c = server.conn();
    for (block, push) in SERVED {
        let mut w = server.conn();
        w.send(block);
        let deadline = Instant::now() + Duration::from_secs(5);
        while c.info_u64("clients", "blocked_clients") == 0 {
            assert!(Instant::now() < deadline, "{block:?} did not block");
            std::thread::sleep(Duration::from_millis(10));
        }
        c.call(push);
        let r = w.read_reply();
        assert!(!r.starts_with(b"*-1"), "{block:?} was not served");
    }
}

#[test]
fn aof_content_matches_redis() {
    let args = [
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--enable-debug-command",
        "yes",
    ];
    let redis = Server::redis(&args);
    let strata = Server::strata(&[&args[..], &["--threads", "2"]].concat());
    for server in [&redis, &strata] {
        let mut c = server.conn();
        // Only the read of the expired key deletes it, at the same place on both sides.
        c.call(&["debug", "set-active-expire", "0"]);
        for cmd in SCRIPT {
            if cmd[0] == "flushall" {
                // The key set with a 1 ms TTL has expired: reading it deletes it (a DEL).
                std::thread::sleep(Duration::from_millis(5));
                c.call(&["get", "e"]);
            }
            c.call(cmd);
        }
        // RESTORE: a relative TTL made absolute (ABSTTL), one already past a DEL.
        c.call(&["set", "r1", "v"]);
        let dump = c.call(&["dump", "r1"]);
        let at = dump.iter().position(|&b| b == b'\n').expect("bulk header") + 1;
        let payload = dump[at..dump.len() - 2].to_vec();
        let restore = |c: &mut Conn, head: &[&str], tail: &[&str]| {
            let mut argv: Vec<Vec<u8>> = head.iter().map(|a| a.as_bytes().to_vec()).collect();
            argv.push(payload.clone());
            argv.extend(tail.iter().map(|a| a.as_bytes().to_vec()));
            let r = c.call(&argv);
            assert_eq!(text(&r), "+OK\r\n");
        };
        restore(&mut c, &["restore", "r2", "100000"], &[]);
        restore(&mut c, &["restore", "r3", "4102444800000"], &["absttl"]);
        restore(&mut c, &["restore", "r2", "1"], &["absttl", "replace"]);
        restore(&mut c, &["restore", "r4", "0"], &[]);
        serve_blocked(server);
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

fn dir_arg(d: &Path) -> String {
    d.to_str().expect("utf-8 path").to_string()
}

fn text(r: &[u8]) -> String {
    String::from_utf8_lossy(r).into_owned()
}

/// Waits (bounded) until the server answers something other than -LOADING.
fn loaded(server: &Server) -> Conn {
    let mut c = server.conn();
    let deadline = Instant::now() + Duration::from_secs(20);
    while text(&c.call(&["ping"])).starts_with("-LOADING") {
        assert!(Instant::now() < deadline, "still loading");
        std::thread::sleep(Duration::from_millis(20));
    }
    c
}

fn digest(c: &mut Conn) -> String {
    text(&c.call(&["debug", "digest"]))
}

/// A dataset of every type, absolute TTLs (so both sides compute the same), two databases, a
/// transaction, and commands whose propagated form differs from their command line.
fn fill(c: &mut Conn) {
    let cmds: &[&[&str]] = &[
        &["set", "s", "v"],
        &["set", "ttl", "v", "pxat", "4102444800000"],
        &["incrbyfloat", "f", "1.25"],
        &["rpush", "l", "a", "b", "c"],
        &["lpop", "l"],
        &["sadd", "set", "1", "2", "3", "x"],
        &["srem", "set", "2"],
        &["zadd", "z", "1", "a", "2.5", "b"],
        &["hset", "h", "f", "v", "g", "w"],
        &["hincrbyfloat", "h", "n", "0.5"],
        &["expireat", "h", "4102444800"],
        &["multi"],
        &["incr", "t1"],
        &["incr", "t2"],
        &["exec"],
        &["select", "7"],
        &["set", "in7", "x"],
        &["mset", "a", "1", "b", "2", "c", "3"],
        &["del", "b"],
        &["rename", "c", "cc"],
        &["select", "0"],
        &["setex", "gone", "100", "x"],
        &["expire", "gone", "-1"],
    ];
    for cmd in cmds {
        let r = c.call(cmd);
        assert!(!r.starts_with(b"-"), "{cmd:?}: {}", text(&r));
    }
}

/// Acknowledged writes survive kill -9 with `appendfsync always`, at one thread and two, and the
/// dataset after a restart is the one before it (DEBUG DIGEST, as Redis computes it).
#[test]
fn restart_replays_the_aof() {
    let data = TempDir::new("aof-restart");
    let dir = dir_arg(data.path());
    let base = [
        "--dir",
        &dir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ];
    let debug = ["--enable-debug-command", "yes"];
    let expected = {
        let a = Server::strata(&[&base[..], &debug, &["--threads", "2"]].concat());
        let mut c = a.conn();
        fill(&mut c);
        let d = digest(&mut c);
        // DEBUG LOADAOF empties the dataset and loads the files back: the same dataset.
        assert_eq!(text(&c.call(&["debug", "loadaof"])), "+OK\r\n");
        assert_eq!(digest(&mut c), d);
        assert!(a
            .log_text()
            .contains("Append Only File loaded by DEBUG LOADAOF"));
        a.signal("KILL");
        d
    };
    let b = Server::strata(&[&base[..], &debug, &["--threads", "1"]].concat());
    let mut c = loaded(&b);
    assert_eq!(digest(&mut c), expected);
    assert!(b.log_text().contains("DB loaded from append only file"));
    // Appending goes on after the load: one more write, then again.
    assert_eq!(text(&c.call(&["set", "after", "1"])), "+OK\r\n");
    let expected = digest(&mut c);
    b.signal("KILL");
    drop(b);
    let b = Server::strata(&[&base[..], &debug, &["--threads", "2"]].concat());
    let mut c = loaded(&b);
    assert_eq!(digest(&mut c), expected);
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
    }
}

/// A Redis 7 AOF directory (RDB base, incremental file) loads into Strata with the same dataset;
/// Strata's directory, written on, loads back into redis-server.
#[test]
fn aof_dirs_move_between_redis_and_strata() {
    let (rd, sd, back) = (
        TempDir::new("aof-redis"),
        TempDir::new("aof-strata"),
        TempDir::new("aof-back"),
    );
    let args = |d: &TempDir| {
        vec![
            "--dir".to_string(),
            dir_arg(d.path()),
            "--appendonly".into(),
            "yes".into(),
            "--appendfsync".into(),
            "always".into(),
            "--enable-debug-command".into(),
            "yes".into(),
        ]
    };
    let from_redis = {
        let r = Server::redis(&refs(&args(&rd)));
        let mut c = r.conn();
        fill(&mut c);
        digest(&mut c)
    };
    copy_dir(
        &rd.path().join("appendonlydir"),
        &sd.path().join("appendonlydir"),
    );
    let from_strata = {
        let st = Server::strata(&refs(
            &[args(&sd), vec!["--threads".into(), "2".into()]].concat(),
        ));
        let mut c = loaded(&st);
        assert_eq!(digest(&mut c), from_redis, "Redis's AOF in Strata");
        for cmd in [
            &["set", "more", "1"][..],
            &["hset", "h", "x", "y"],
            &["del", "s"],
        ] {
            c.call(cmd);
        }
        digest(&mut c)
    };
    copy_dir(
        &sd.path().join("appendonlydir"),
        &back.path().join("appendonlydir"),
    );
    let r = Server::redis(&refs(&args(&back)));
    let mut c = loaded(&r);
    assert_eq!(digest(&mut c), from_strata, "Strata's AOF in redis-server");
}

/// Starts strata on `dir` with `args`; returns its exit code and output if it exits within 10 s,
/// None (after stopping it) if it serves.
fn start_exits(dir: &Path, args: &[&str]) -> Option<(i32, String)> {
    let port = crate::harness::free_port().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--dir",
            &dir_arg(dir),
        ])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strata");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            let o = child.wait_with_output().expect("output");
            let t = text(&o.stdout) + &text(&o.stderr);
            return Some((status.code().unwrap_or(-1), t));
        }
        if std::net::TcpStream::connect(format!("127.0.0.1:{port}")).is_ok() {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("strata neither served nor exited");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A truncated last command is cut off with Redis's warnings (aof-load-truncated yes) or refused
/// (no); a file that is no AOF is refused naming the file and the offset; never a panic.
#[test]
fn truncated_and_corrupt_aof_files() {
    let data = TempDir::new("aof-bad");
    let dir = dir_arg(data.path());
    {
        let a = Server::strata(&[
            "--dir",
            &dir,
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ]);
        let mut c = a.conn();
        c.call(&["set", "a", "1"]);
        c.call(&["set", "b", "2"]);
    }
    let incr = data.path().join("appendonlydir/appendonly.aof.1.incr.aof");
    let whole = std::fs::read(&incr).expect("incr file");
    // Cut in the middle of the last command.
    std::fs::write(&incr, &whole[..whole.len() - 3]).expect("write");
    let (code, out) = start_exits(
        data.path(),
        &["--appendonly", "yes", "--aof-load-truncated", "no"],
    )
    .expect("refuses a truncated file");
    assert_eq!(code, 1);
    assert!(
        out.contains(
            "Unexpected end of file reading the append only file appendonly.aof.1.incr.aof"
        ),
        "{out}"
    );
    {
        let a = Server::strata(&["--dir", &dir, "--appendonly", "yes"]);
        let mut c = loaded(&a);
        assert_eq!(text(&c.call(&["get", "a"])), "$1\r\n1\r\n");
        assert_eq!(text(&c.call(&["exists", "b"])), ":0\r\n");
        let log = a.log_text();
        assert!(
            log.contains(
                "!!! Warning: short read while loading the AOF file appendonly.aof.1.incr.aof!!!"
            ),
            "{log}"
        );
        assert!(
            log.contains(
                "AOF appendonly.aof.1.incr.aof loaded anyway because aof-load-truncated is enabled"
            ),
            "{log}"
        );
    }
    // Garbage where a command should start.
    let mut bad = std::fs::read(&incr).expect("incr file");
    let at = bad.len();
    bad.extend_from_slice(b"garbage\r\n");
    std::fs::write(&incr, &bad).expect("write");
    let (code, out) =
        start_exits(data.path(), &["--appendonly", "yes"]).expect("refuses a bad file");
    assert_eq!(code, 1);
    assert!(
        out.contains("Bad file format reading the append only file appendonly.aof.1.incr.aof"),
        "{out}"
    );
    assert!(out.contains(&format!("at offset {at}")), "{out}");
    // Random damage: loads or refuses, never crashes.
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..6 {
        let mut f = bad[..at].to_vec();
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let i = rng as usize % f.len();
        f[i] ^= (rng >> 40) as u8 | 1;
        std::fs::write(&incr, &f).expect("write");
        if let Some((code, out)) = start_exits(data.path(), &["--appendonly", "yes"]) {
            assert_eq!(code, 1, "{out}");
            assert!(
                !out.contains("panicked") && !out.contains("BUG REPORT"),
                "{out}"
            );
        }
    }
}

/// kill -9 while clients write with appendfsync always: after each restart every acknowledged
/// INCR is there, and no transaction is half applied.
#[test]
fn kill_nine_loses_no_acknowledged_write() {
    let data = TempDir::new("aof-kill");
    let dir = dir_arg(data.path());
    let args = [
        "--dir",
        &dir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--threads",
        "2",
    ];
    let mut acked = [0i64; 4];
    for round in 0..4 {
        let server = Server::strata(&args);
        let mut c = loaded(&server);
        for (i, a) in acked.iter().enumerate() {
            let got = text(&c.call(&["get", &format!("counter:{i}")]));
            let got: i64 = got.lines().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
            assert!(
                got >= *a,
                "round {round}: counter {i} is {got}, {a} was acknowledged"
            );
            let x = text(&c.call(&["get", &format!("{{t{i}}}x")]));
            let y = text(&c.call(&["get", &format!("t{i}y")]));
            assert_eq!(x, y, "round {round}: a transaction half applied");
        }
        let stop = Arc::new(AtomicBool::new(false));
        let seen: Arc<Vec<AtomicI64>> = Arc::new((0..4).map(|_| AtomicI64::new(0)).collect());
        let port = server.port();
        let writers: Vec<_> = (0..4)
            .map(|i| {
                let stop = stop.clone();
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let mut c = Conn::connect(port, "writer");
                    c.set_reply_timeout(Duration::from_secs(2));
                    let mut last = 0i64;
                    while !stop.load(Ordering::Relaxed) {
                        c.send(&["incr", &format!("counter:{i}")]);
                        match c.try_read_reply() {
                            Ok(r) => {
                                let t = text(&r);
                                match t.strip_prefix(':').and_then(|v| v.trim().parse().ok()) {
                                    Some(v) => {
                                        last = v;
                                        seen[i].store(v, Ordering::SeqCst);
                                    }
                                    None => break,
                                }
                            }
                            Err(_) => break,
                        }
                        let (x, y) = (format!("{{t{i}}}x"), format!("t{i}y"));
                        c.send_raw(
                            format!(
                                "*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n${}\r\n{x}\r\n*2\r\n$4\r\nINCR\r\n${}\r\n{y}\r\n*1\r\n$4\r\nEXEC\r\n",
                                x.len(),
                                y.len()
                            )
                            .as_bytes(),
                        );
                        for _ in 0..4 {
                            if c.try_read_reply().is_err() {
                                return last;
                            }
                        }
                    }
                    last
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        server.signal("KILL");
        stop.store(true, Ordering::Relaxed);
        for w in writers {
            // A writer may panic on the dead socket; what it saw acknowledged is in `seen`.
            let _ = w.join();
        }
        for (i, a) in acked.iter_mut().enumerate() {
            *a = (*a).max(seen[i].load(Ordering::SeqCst));
        }
        drop(server);
    }
    assert!(acked.iter().all(|&a| a > 0), "{acked:?}");
}
