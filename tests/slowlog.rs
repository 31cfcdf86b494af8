//! SLOWLOG against redis-server: the subcommands and their errors byte for byte, and what a slow
//! command leaves in the log (arguments trimmed and redacted as Redis does, client names, EXEC left
//! out, a blocked command logged once served, the length limit). Ids, timestamps, durations and
//! client addresses differ between servers: they are checked for shape, the rest compared.

use crate::harness::{same_doc_subcommands, wait_blocked, Diff, Reply};

/// The comparable part of each entry of a SLOWLOG GET reply (arguments and client name), after
/// checking the rest: six fields, ids falling by one from the newest, a current timestamp, a
/// duration, an `ip:port` address.
fn entries(reply: &Reply) -> Vec<(Vec<Vec<u8>>, Vec<u8>)> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let list = reply.as_array().expect("SLOWLOG GET is an array");
    let mut last_id = None;
    list.iter()
        .map(|e| {
            let e = e.as_array().expect("an entry is an array");
            assert_eq!(e.len(), 6, "{reply}");
            let id = e[0].as_int().expect("id");
            if let Some(newer) = last_id {
                assert_eq!(id, newer - 1, "ids fall by one: {reply}");
            }
            last_id = Some(id);
            let time = e[1].as_int().expect("timestamp");
            assert!((now - 60..=now + 60).contains(&time), "{reply}");
            assert!(e[2].as_int().expect("duration") >= 0);
            let addr = e[4].as_bytes().expect("address");
            assert!(addr.starts_with(b"127.0.0.1:"), "{reply}");
            let args = e[3]
                .as_array()
                .expect("arguments")
                .iter()
                .map(|a| a.as_bytes().expect("argument").to_vec())
                .collect();
            (args, e[5].as_bytes().expect("name").to_vec())
        })
        .collect()
}

/// SLOWLOG GET -1 on both servers, compared as [`entries`] does.
fn same_log(d: &mut Diff) -> Vec<(Vec<Vec<u8>>, Vec<u8>)> {
    let (redis, strata) = d.run_matching(&["SLOWLOG", "GET", "-1"], |r| r.as_array().is_some());
    let (redis, strata) = (entries(&redis), entries(&strata));
    assert_eq!(redis, strata);
    redis
}

fn words(ws: &[&str]) -> Vec<Vec<u8>> {
    ws.iter().map(|w| w.as_bytes().to_vec()).collect()
}

#[test]
fn subcommands_settings_and_errors_match_redis() {
    let mut d = Diff::new();
    d.run_all(&[
        &["SLOWLOG", "HELP"][..],
        &["slowlog", "help"],
        &["SLOWLOG"],
        &["SLOWLOG", "foo"],
        &["SLOWLOG", "LEN", "1"],
        &["SLOWLOG", "RESET", "x"],
        &["SLOWLOG", "GET", "-2"],
        &["SLOWLOG", "GET", "x"],
        &["SLOWLOG", "GET", "1.5"],
        &["SLOWLOG", "GET", "1", "2"],
        &["CONFIG", "GET", "slowlog-max-len"],
        &["CONFIG", "GET", "slowlog-log-slower-than"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "-2"],
        &["CONFIG", "SET", "slowlog-log-slower-than", "abc"],
        &["CONFIG", "SET", "slowlog-max-len", "-1"],
        &[
            "CONFIG",
            "SET",
            "slowlog-max-len",
            "5",
            "slowlog-log-slower-than",
            "-1",
        ],
        &["CONFIG", "GET", "slowlog-max-len"],
        &["CONFIG", "GET", "slowlog-log-slower-than"],
        &["SLOWLOG", "RESET"],
        &["PING"],
        &["SLOWLOG", "LEN"],
        &["SLOWLOG", "GET"],
    ]);
    let subcommands = same_doc_subcommands(&mut d, "slowlog");
    assert_eq!(subcommands.len(), 4);
    for sub in [
        "slowlog|get",
        "slowlog|len",
        "slowlog|reset",
        "slowlog|help",
    ] {
        d.run(&["COMMAND", "INFO", sub]);
    }
}

#[test]
fn slow_commands_are_logged_as_redis_logs_them() {
    let mut d = Diff::new();
    d.run_all(&[
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"][..],
        &["SLOWLOG", "RESET"],
    ]);
    // SLOWLOG RESET itself is logged, after it ran.
    assert_eq!(same_log(&mut d), [(words(&["SLOWLOG", "RESET"]), vec![])]);

    d.run(&["SLOWLOG", "RESET"]);
    let mut many = vec!["SADD".to_string(), "set".into()];
    many.extend((3..=33).map(|i| i.to_string()));
    let long = "A".repeat(129);
    let exact = "B".repeat(128);
    d.run(&many);
    d.run(&["SADD", "set", "foo", &long, &exact]);
    d.run(&["CLIENT", "SETNAME", "worker"]);
    d.run(&["AUTH", "nobody", "secret"]);
    // (HELLO's reply carries the client id, which differs.)
    d.run_matching(&["HELLO", "2", "AUTH", "default", "secret"], |r| {
        r.as_array().is_some()
    });
    d.run(&["CONFIG", "SET", "requirepass", "", "slowlog-max-len", "128"]);
    // EXEC is left out; the commands it ran are in.
    d.run_all(&[
        &["MULTI"][..],
        &["SET", "k", "v"],
        &["INCR", "n"],
        &["EXEC"],
    ]);
    // A command that fails is logged too; one refused before it runs is not.
    d.run(&["INCR", "k"]);
    d.run(&["GET"]);
    d.run(&["NOSUCHCOMMAND"]);
    let log = same_log(&mut d);
    let args: Vec<_> = log.iter().map(|(a, _)| a.clone()).collect();
    let mut trimmed = words(&many[..31].iter().map(String::as_str).collect::<Vec<_>>());
    trimmed.push(b"... (2 more arguments)".to_vec());
    assert_eq!(
        args[args.len() - 1],
        words(&["SLOWLOG", "RESET"]),
        "the oldest entry"
    );
    assert_eq!(args[args.len() - 2], trimmed);
    assert_eq!(
        args[args.len() - 3],
        [
            b"SADD".to_vec(),
            b"set".to_vec(),
            b"foo".to_vec(),
            format!("{}... (1 more bytes)", "A".repeat(128)).into_bytes(),
            exact.into_bytes(),
        ]
    );
    assert!(args.contains(&words(&["AUTH", "(redacted)", "(redacted)"])));
    assert!(args.contains(&words(&["HELLO", "2", "AUTH", "(redacted)", "(redacted)"])));
    assert!(args.contains(&words(&[
        "CONFIG",
        "SET",
        "requirepass",
        "(redacted)",
        "slowlog-max-len",
        "128"
    ])));
    assert!(!args.iter().any(|a| a[0].eq_ignore_ascii_case(b"exec")));
    assert_eq!(args[0], words(&["INCR", "k"]), "the newest entry");
    assert_eq!(log[0].1, b"worker", "the client's name at the time");

    // The length limit drops the oldest entries once the next one comes.
    d.run(&["CONFIG", "SET", "slowlog-max-len", "3"]);
    d.run(&["PING"]);
    d.run(&["SLOWLOG", "LEN"]);
    assert_eq!(same_log(&mut d).len(), 3);
    // -1 turns logging off, and max-len 0 too.
    d.run_all(&[
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"][..],
        &["SLOWLOG", "RESET"],
        &["PING"],
        &["SLOWLOG", "LEN"],
        &[
            "CONFIG",
            "SET",
            "slowlog-log-slower-than",
            "0",
            "slowlog-max-len",
            "0",
        ],
        &["PING"],
        &["SLOWLOG", "LEN"],
    ]);
}

#[test]
fn a_blocked_command_is_logged_once_served_on_any_thread() {
    let mut d = Diff::with_threads(4);
    d.run_all(&[
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"][..],
        &["DEL", "l"],
    ]);
    let mut blocked = d.new_conns();
    blocked.redis.send(&["BLPOP", "l", "0"]);
    blocked.strata.send(&["BLPOP", "l", "0"]);
    wait_blocked(&mut d.redis, 1);
    wait_blocked(&mut d.strata, 1);
    d.run(&["SLOWLOG", "RESET"]);
    d.run(&["LPUSH", "l", "a"]);
    assert_eq!(blocked.redis.read_reply(), blocked.strata.read_reply());
    // Served after the push that woke it: the newest entry, once.
    let log = same_log(&mut d);
    let args: Vec<_> = log.into_iter().map(|(a, _)| a).collect();
    assert_eq!(
        args,
        [
            words(&["BLPOP", "l", "0"]),
            words(&["LPUSH", "l", "a"]),
            words(&["SLOWLOG", "RESET"]),
        ]
    );
}

/// What a server keeps from a command for long — a slow log entry's arguments, a connection's
/// CLIENT SETINFO, a tracking prefix, a WATCHed key — is a copy: an argument is a slice of the
/// connection's read buffer, and keeping the slice would keep the whole buffer (16 KiB or more)
/// alive, 128 log entries pinning 2 MiB. Measured as INFO `used_memory` growth, against Redis.
#[test]
fn what_a_server_keeps_from_a_command_does_not_pin_its_read_buffer() {
    use std::time::Duration;

    use crate::harness::{Conn, Server};

    fn used(c: &mut Conn) -> i64 {
        c.info_u64("memory", "used_memory") as i64
    }

    for server in [Server::redis(&[]), Server::strata(&["--threads", "2"])] {
        let name = server.kind().name();
        let mut admin = server.conn();
        admin.call(&["CONFIG", "SET", "slowlog-max-len", "128"]);
        admin.call(&["SLOWLOG", "RESET"]);
        let base = used(&mut admin);
        // 200 commands logged, one per read: the log keeps 128.
        admin.call(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
        let mut c = server.conn();
        for i in 0..200 {
            c.call(&["SET", &format!("k{i}"), "v"]);
        }
        admin.call(&["CONFIG", "SET", "slowlog-log-slower-than", "10000"]);
        drop(c);
        // 40 connections that set their library name, track a prefix and watch a key, then idle
        // past the 2 s after which both servers free an idle client's query buffer.
        let mut conns = Vec::new();
        for i in 0..40 {
            let mut c = server.conn();
            let lib = format!("lib{i}");
            c.call(&["CLIENT", "SETINFO", "LIB-NAME", &lib]);
            let prefix = format!("p{i}:");
            c.call(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", &prefix]);
            c.call(&["WATCH", &format!("w{i}")]);
            conns.push(c);
        }
        std::thread::sleep(Duration::from_millis(3500));
        let growth = used(&mut admin) - base;
        eprintln!("{name}: used_memory grew by {growth} bytes");
        // Redis: ~0.9 MB (its clients keep a 16 KiB reply buffer each). Pinned buffers would add
        // 2 MiB for the log and 16 KiB or more per connection.
        assert!(
            growth < 1_500_000,
            "{name}: used_memory grew by {growth} bytes"
        );
        drop(conns);
    }
}
