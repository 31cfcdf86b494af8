//! Process lifecycle: start-up from a config file, graceful shutdown on SIGTERM and SIGINT, and
//! a slow command that does not stall other clients.

use std::time::{Duration, Instant};

use crate::harness::{Conn, Server, TempDir};

fn assert_graceful_exit(signal: &str) {
    let mut s = Server::strata(&["--threads", "2"]);
    let mut c = s.conn();
    assert_eq!(c.call(&["SET", "k", "v"]), b"+OK\r\n");
    s.signal(signal);
    let status = s
        .wait_exit(Duration::from_secs(10))
        .expect("strata exits after the signal");
    assert!(
        status.success(),
        "exit status after SIG{signal}: {status:?}\n{}",
        s.log_tail()
    );
    assert!(s.log_tail().contains("ready to exit"), "{}", s.log_tail());
}

#[test]
fn sigterm_shuts_down_gracefully() {
    assert_graceful_exit("TERM");
}

#[test]
fn sigint_shuts_down_gracefully() {
    assert_graceful_exit("INT");
}

/// Runs a second strata on `port` and returns its exit status and log; it must exit on its own. One
/// that is still running after a few seconds (it started) is killed and reported as started.
fn start_second(port: u16) -> (Option<std::process::ExitStatus>, String) {
    let dir = TempDir::new("second");
    let log = dir.path().join("second.log");
    let file = std::fs::File::create(&log).expect("log file");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--threads",
            "2",
        ])
        .arg("--dir")
        .arg(dir.path())
        .stdout(file.try_clone().expect("log handle"))
        .stderr(file)
        .spawn()
        .expect("spawn strata");
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn a_second_server_on_a_taken_port_refuses_to_start() {
    // Every shard thread binds with SO_REUSEPORT; a second Strata on the same port must not join
    // the group and take half of the connections. Redis's bind fails the same way.
    let first = Server::strata(&["--threads", "2"]);
    let (status, text) = start_second(first.port());
    assert!(
        status.is_some_and(|s| !s.success()),
        "second server started ({status:?}): {text}"
    );
    assert!(
        text.contains("Address already in use"),
        "second server's output: {text}"
    );
    // Every connection still reaches the first server.
    for _ in 0..8 {
        let mut c = first.conn();
        assert_eq!(c.call(&["CLIENT", "ID"]).first(), Some(&b':'));
        assert_eq!(c.call(&["DBSIZE"]), b":0\r\n");
    }
    let mut c = first.conn();
    assert!(c.call(&["SET", "only", "here"]).starts_with(b"+OK"));
    for _ in 0..8 {
        assert_eq!(first.conn().call(&["EXISTS", "only"]), b":1\r\n");
    }
    // A port Redis holds is refused too.
    let redis = Server::redis(&[]);
    let (status, text) = start_second(redis.port());
    assert!(
        status.is_some_and(|s| !s.success()),
        "started on redis's port ({status:?}): {text}"
    );
    assert!(text.contains("Address already in use"), "{text}");
}

#[test]
fn config_file_then_flags_like_redis_server() {
    let dir = TempDir::new("conf");
    let conf = dir.path().join("strata.conf");
    std::fs::write(
        &conf,
        "# a redis.conf\ndatabases 4\nrequirepass \"from-file\"\n",
    )
    .unwrap();
    let s = Server::strata(&[conf.to_str().unwrap(), "--requirepass", "from-flag"]);
    let mut c = s.conn();
    assert!(c.call(&["PING"]).starts_with(b"-NOAUTH"));
    assert!(c.call(&["AUTH", "from-file"]).starts_with(b"-WRONGPASS"));
    assert_eq!(c.call(&["AUTH", "from-flag"]), b"+OK\r\n");
    assert_eq!(c.call(&["SELECT", "3"]), b"+OK\r\n");
    assert_eq!(
        c.call(&["SELECT", "4"]),
        b"-ERR DB index is out of range\r\n"
    );
}

#[test]
fn a_slow_command_does_not_stall_other_clients() {
    // One EXISTS over a million keys, all on one shard through a hash tag, keeps that shard's
    // thread busy (parsing, routing and a million lookups) for far longer than a PING takes. Clients
    // served by the other thread must be answered meanwhile: some of a dozen connections land on
    // each of the two threads, and one of them must get PONG while the slow reply has not arrived.
    // Checked by the order of events, not by timing: every wait below is a poll, not a bound.
    const KEYS: usize = 1_000_000;
    let s = Server::strata(&["--threads", "2"]);
    let mut slow = s.conn();
    assert_eq!(slow.call(&["SET", "{busy}:k", "v"]), b"+OK\r\n");
    let mut others: Vec<Conn> = (0..12).map(|_| s.conn()).collect();
    for o in &mut others {
        assert_eq!(o.call(&["PING"]), b"+PONG\r\n");
        o.set_reply_timeout(Duration::from_millis(1));
    }
    let mut exists = vec!["EXISTS"];
    exists.extend(std::iter::repeat_n("{busy}:k", KEYS));
    // The write returns once the server has taken in all but the socket buffers' worth of it.
    slow.send(&exists);
    for o in &mut others {
        o.send(&["PING"]);
    }
    slow.set_reply_timeout(Duration::from_millis(1));
    let mut slow_reply = None;
    let mut pong_before_slow_reply = false;
    let mut answered = vec![false; others.len()];
    // A guard against a dead server, not a performance bound.
    let give_up = Instant::now() + Duration::from_secs(120);
    while answered.contains(&false) || slow_reply.is_none() {
        assert!(Instant::now() < give_up, "replies missing: {answered:?}");
        for (o, done) in others.iter_mut().zip(answered.iter_mut()) {
            if *done {
                continue;
            }
            if let Ok(reply) = o.try_read_reply() {
                assert_eq!(reply, b"+PONG\r\n");
                *done = true;
                // The slow reply is looked for only after this PONG was seen.
                if slow_reply.is_none() {
                    slow_reply = slow.try_read_reply().ok();
                    pong_before_slow_reply |= slow_reply.is_none();
                }
            }
        }
        if slow_reply.is_none() {
            slow_reply = slow.try_read_reply().ok();
        }
    }
    assert_eq!(slow_reply, Some(format!(":{KEYS}\r\n").into_bytes()));
    assert!(
        pong_before_slow_reply,
        "every PING waited for the slow EXISTS to finish"
    );
}
