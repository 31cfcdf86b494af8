//! MONITOR against redis-server: the line format (timestamp masked, client address normalised),
//! Redis's escaping, databases, redaction of AUTH and HELLO credentials, MULTI/EXEC order,
//! commands that are not shown (admin, rejected), MONITOR refused inside EXEC, and RESET leaving
//! monitor mode; plus commands from clients on other threads (`--threads 4`).

use crate::harness::{Conn, Diff};

/// Reads `n` monitor lines from a connection, with the time and the client address masked.
fn lines(c: &mut Conn, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let raw = String::from_utf8_lossy(&c.read_reply()).into_owned();
            let (stamp, rest) = raw.split_once(' ').expect("a timestamp");
            assert!(stamp.starts_with('+') && stamp.len() > 8, "{raw:?}");
            let (db, rest) = rest.split_once(' ').expect("a database");
            let (_addr, args) = rest.split_once("] ").expect("an address");
            format!("{db} {args}")
        })
        .collect()
}

#[test]
fn monitor_lines_match_redis() {
    let d = Diff::with_threads(4);
    let mut m = d.new_conns();
    m.run(&["MONITOR"]);
    let mut clients: Vec<_> = (0..3).map(|_| d.new_conns()).collect();
    // Each command with the number of monitor lines it lets through (a transaction's show up at
    // EXEC: MULTI, the queued commands, EXEC; admin and rejected commands never).
    let script: &[(&[&str], usize)] = &[
        (&["SET", "k\n\"x\\", "v\x01\x7f\u{e9}"], 1),
        (&["SELECT", "2"], 1),
        (&["GET", "a b"], 1),
        (&["AUTH", "x"], 1),
        (&["AUTH", "x", "y"], 1),
        (&["HELLO", "2", "AUTH", "u", "p"], 1),
        (&["SELECT", "0"], 1),
        (&["MULTI"], 0),
        (&["SET", "foo", "bar"], 0),
        (&["INCR", "n"], 0),
        (&["EXEC"], 4),
        (&["NOSUCHCOMMAND"], 0),
        (&["GET"], 0),
        (&["CLIENT", "LIST"], 0),
        (&["CONFIG", "GET", "maxmemory"], 0),
        (&["MGET", "a", "b", "c", "d"], 1),
        (&["client", "id"], 1),
    ];
    for (i, (args, shown)) in script.iter().enumerate() {
        // Spread over three clients (threads); lines are read as we go, so the order is defined.
        let c = &mut clients[i % 3];
        let c = if args[0] == "MULTI"
            || args[0] == "EXEC"
            || args[1..].starts_with(&["foo"])
            || args[0] == "INCR"
        {
            &mut clients[0]
        } else {
            c
        };
        let r = c.redis.call(args);
        let s = c.strata.call(args);
        if !["client", "CLIENT", "HELLO", "AUTH"].contains(&args[0]) {
            assert_eq!(
                String::from_utf8_lossy(&s),
                String::from_utf8_lossy(&r),
                "{args:?}"
            );
        }
        assert_eq!(
            lines(&mut m.strata, *shown),
            lines(&mut m.redis, *shown),
            "{args:?}"
        );
    }
    // Inside EXEC MONITOR is refused; a second MONITOR answers nothing; RESET leaves the mode.
    let c = &mut clients[0];
    for args in [&["MULTI"][..], &["MONITOR"], &["EXEC"]] {
        let r = c.redis.call(args);
        let s = c.strata.call(args);
        assert_eq!(String::from_utf8_lossy(&s), String::from_utf8_lossy(&r));
    }
    assert_eq!(lines(&mut m.strata, 2), lines(&mut m.redis, 2));
    m.run(&["RESET"]);
    c.redis.call(&["PING"]);
    c.strata.call(&["PING"]);
    m.run(&["PING"]);
}
