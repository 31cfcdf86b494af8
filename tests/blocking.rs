//! Blocking list commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) on the park mechanism, run the
//! same way against redis-server and Strata: immediate answers, errors, timeouts, wake-ups by another
//! client (on another thread: `--threads 4`), first blocked first served, an element pushed in a
//! pipeline that also pops it going to the blocked client first, and nothing popped for a client
//! that disconnected while blocked.

use std::thread::sleep;
use std::time::Duration;

use crate::harness::{hash_slot, Conn, Diff, Reply, Server};

/// The first key `<tag>:<n>` in quarter `q` of the slot space (one shard each with 4 threads).
fn key_in(q: u16, tag: &str) -> String {
    (0..)
        .map(|n| format!("{tag}:{n}"))
        .find(|k| hash_slot(k) / 4096 == q)
        .expect("some key lands in every quarter")
}

/// Waits (bounded) until the server reports `n` blocked clients.
fn wait_blocked(c: &mut Conn, n: i64) {
    for _ in 0..500 {
        let info = c.call_decoded(&["INFO", "clients"]);
        let text = String::from_utf8_lossy(info.as_bytes().unwrap_or_default()).to_string();
        let blocked = text
            .lines()
            .find_map(|l| l.strip_prefix("blocked_clients:"))
            .and_then(|v| v.trim().parse::<i64>().ok());
        if blocked == Some(n) {
            return;
        }
        sleep(Duration::from_millis(10));
    }
    panic!("the server never reported {n} blocked clients");
}

#[test]
fn immediate_replies_errors_and_timeouts_match_redis() {
    let mut d = Diff::with_threads(4);
    let (a, b) = (key_in(0, "a"), key_in(3, "b"));
    d.run(&["RPUSH", &a, "1", "2", "3"]);
    d.run(&["BLPOP", "nokey", &a, "0"]);
    d.run(&["BRPOP", &a, "nokey", "0"]);
    d.run(&["BLMPOP", "0", "2", "nokey", &a, "LEFT", "COUNT", "5"]);
    d.run(&["RPUSH", &a, "x", "y"]);
    d.run(&["BLMOVE", &a, &b, "LEFT", "RIGHT", "0"]);
    d.run(&["BRPOPLPUSH", &a, &b, "0"]);
    d.run(&["LRANGE", &b, "0", "-1"]);
    d.run(&["BLMOVE", &b, &b, "LEFT", "RIGHT", "0"]);
    // Timeouts (short: the reply shapes, not the timing, are compared).
    d.run(&["BLPOP", "nokey", "0.05"]);
    // Milliseconds round up: these wait 1 ms, not forever.
    d.run(&["BLPOP", "nokey", "0.0001"]);
    d.run(&["BLPOP", "nokey", "1e-300"]);
    d.run(&["BLMOVE", "nokey", &b, "LEFT", "LEFT", "0.05"]);
    d.run(&["BRPOPLPUSH", "nokey", &b, "0.05"]);
    d.run(&["BLMPOP", "0.05", "1", "nokey", "RIGHT"]);
    // Errors.
    d.run(&["SET", "str", "v"]);
    for cmd in [
        &["BLPOP", "nokey", "abc"][..],
        &["BLPOP", "nokey", "-1"],
        &["BLPOP", "nokey", "nan"],
        &["BLPOP", "nokey", "inf"],
        &["BLPOP", "nokey", "-inf"],
        &["BLPOP", "nokey", "1e17"],
        &["BLPOP", "nokey", "9223372036854776"],
        &["BLPOP", "nokey", "-0.9"],
        &["BLPOP", "nokey", " 1"],
        &["BLPOP", "str", "0"],
        &["BLPOP", "nokey", "str", "0"],
        &["BLMOVE", "str", &b, "LEFT", "LEFT", "0"],
        &["BLMOVE", &b, "str", "LEFT", "LEFT", "0"],
        &["BLMOVE", &b, &a, "UP", "LEFT", "0"],
        &["BLMOVE", &b, &a, "LEFT", "LEFT", "x"],
        &["BLMPOP", "0", "0", &a, "LEFT"],
        &["BLMPOP", "0", "1", &a, "MIDDLE"],
        &["BLMPOP", "0", "1", &a, "LEFT", "COUNT", "0"],
        &["BLMPOP", "0", "3", &a, "LEFT"],
        &["BLMPOP", "x", "1", &a, "LEFT"],
        &["BLMPOP", "-1", "1", &a, "LEFT"],
        &["BLPOP", "k"],
    ] {
        d.run(cmd);
    }
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run(&["BLPOP", "nokey", "0.05"]);
    d.run(&["BLMOVE", "nokey", &b, "LEFT", "LEFT", "0.05"]);
    d.run(&["RPUSH", &a, "z"]);
    d.run(&["BLPOP", &a, "0"]);
}

/// Runs `scenario` against both servers and compares what it returns.
fn both(scenario: impl Fn(&Server) -> Vec<Vec<u8>>) {
    let redis = Server::redis(&[]);
    let strata = Server::strata(&["--threads", "4"]);
    assert_eq!(
        scenario(&strata)
            .iter()
            .map(|b| String::from_utf8_lossy(b).to_string())
            .collect::<Vec<_>>(),
        scenario(&redis)
            .iter()
            .map(|b| String::from_utf8_lossy(b).to_string())
            .collect::<Vec<_>>(),
    );
}

#[test]
fn a_push_from_another_client_wakes_the_first_blocked_client_first() {
    both(|s| {
        let k = key_in(2, "q");
        let mut admin = s.conn();
        let mut first = s.conn();
        let mut second = s.conn();
        first.send(&["BLPOP", "other", &k, "0"]);
        wait_blocked(&mut admin, 1);
        second.send(&["BRPOP", &k, "0"]);
        wait_blocked(&mut admin, 2);
        let mut seen = vec![admin.call(&["RPUSH", &k, "one"])];
        seen.push(first.read_reply());
        wait_blocked(&mut admin, 1);
        seen.push(admin.call(&["RPUSH", &k, "two", "three"]));
        seen.push(second.read_reply());
        seen.push(admin.call(&["LRANGE", &k, "0", "-1"]));
        seen
    });
}

#[test]
fn a_pipeline_that_pushes_then_pops_leaves_the_element_to_the_blocked_client() {
    both(|s| {
        let k = key_in(1, "p");
        let mut admin = s.conn();
        let mut blocked = s.conn();
        blocked.send(&["BLPOP", &k, "0"]);
        wait_blocked(&mut admin, 1);
        let mut pipe = s.conn();
        let mut raw = crate::harness::encode_command(&["RPUSH", &k, "x"]);
        raw.extend(crate::harness::encode_command(&["LPOP", &k]));
        pipe.send_raw(&raw);
        vec![pipe.read_reply(), pipe.read_reply(), blocked.read_reply()]
    });
}

#[test]
fn blmove_across_shards_waits_for_its_source_and_moves_atomically() {
    both(|s| {
        let (src, dst) = (key_in(0, "src"), key_in(3, "dst"));
        let mut admin = s.conn();
        let mut mover = s.conn();
        mover.send(&["BLMOVE", &src, &dst, "RIGHT", "LEFT", "0"]);
        wait_blocked(&mut admin, 1);
        let mut seen = vec![admin.call(&["LPUSH", &src, "a", "b"])];
        seen.push(mover.read_reply());
        seen.push(admin.call(&["LRANGE", &src, "0", "-1"]));
        seen.push(admin.call(&["LRANGE", &dst, "0", "-1"]));
        // BLMPOP parked on keys of two shards, woken by the second.
        let (k1, k2) = (key_in(1, "m"), key_in(2, "m"));
        mover.send(&["BLMPOP", "0", "2", &k1, &k2, "LEFT", "COUNT", "2"]);
        wait_blocked(&mut admin, 1);
        seen.push(admin.call(&["RPUSH", &k2, "1", "2", "3"]));
        seen.push(mover.read_reply());
        seen.push(admin.call(&["LLEN", &k2]));
        seen
    });
}

#[test]
fn nothing_is_popped_for_a_client_that_disconnected_while_blocked() {
    let s = Server::strata(&["--threads", "4"]);
    let k = key_in(3, "gone");
    let mut admin = s.conn();
    {
        let mut doomed = s.conn();
        doomed.send(&["BLPOP", &k, "0"]);
        wait_blocked(&mut admin, 1);
    } // dropped: the socket closes while the command is parked
    let mut live = s.conn();
    admin.call(&["RPUSH", &k, "kept"]);
    // The element stays in the list (a live client blocked later gets it).
    assert_eq!(
        admin.call_decoded(&["LLEN", &k]).as_int(),
        Some(1),
        "the element went to a closed connection"
    );
    live.send(&["BLPOP", &k, "0"]);
    let r = Reply::decode(&live.read_reply());
    assert_eq!(
        r.as_array().map(|a| a[1].as_bytes().map(<[u8]>::to_vec)),
        Some(Some(b"kept".to_vec()))
    );
    wait_blocked(&mut admin, 0);
}

#[test]
fn client_kill_withdraws_a_blocked_client() {
    let s = Server::strata(&["--threads", "2"]);
    let k = key_in(0, "killed");
    let mut admin = s.conn();
    let mut victim = s.conn();
    let id = victim
        .call_decoded(&["CLIENT", "ID"])
        .as_int()
        .expect("an id");
    victim.send(&["BLPOP", &k, "0"]);
    wait_blocked(&mut admin, 1);
    assert_eq!(
        admin
            .call_decoded(&["CLIENT", "KILL", "ID", &id.to_string()])
            .as_int(),
        Some(1)
    );
    wait_blocked(&mut admin, 0);
    admin.call(&["RPUSH", &k, "v"]);
    assert_eq!(admin.call_decoded(&["LLEN", &k]).as_int(), Some(1));
}

#[test]
fn blocking_sorted_set_pops_answer_fail_and_time_out_as_redis() {
    let mut d = Diff::with_threads(4);
    let (a, b) = (key_in(0, "za"), key_in(3, "zb"));
    d.run(&[
        "ZADD", &a, "1", "one", "2", "two", "3", "three", "-inf", "low",
    ]);
    d.run(&["BZPOPMIN", "nokey", &a, "0"]);
    d.run(&["BZPOPMAX", &a, "nokey", "0"]);
    d.run(&["BZMPOP", "0", "2", "nokey", &a, "MAX", "COUNT", "5"]);
    d.run(&["ZADD", &b, "1.5", "x", "2.5", "y"]);
    d.run(&["BZMPOP", "0", "2", &a, &b, "MIN"]);
    d.run(&["BZMPOP", "0", "1", &b, "min", "count", "1"]);
    d.run(&["EXISTS", &a, &b]);
    // Timeouts: the reply shapes, not the timing, are compared.
    d.run(&["BZPOPMIN", "nokey", "0.05"]);
    d.run(&["BZPOPMAX", "nokey", &a, "0.05"]);
    d.run(&["BZMPOP", "0.05", "1", "nokey", "MAX"]);
    d.run(&["SET", "str", "v"]);
    d.run(&["RPUSH", "list", "v"]);
    for cmd in [
        &["BZPOPMIN", "nokey", "abc"][..],
        &["BZPOPMIN", "nokey", "-1"],
        &["BZPOPMIN", "nokey", "inf"],
        &["BZPOPMIN", "str", "0"],
        &["BZPOPMAX", "nokey", "list", "0"],
        &["BZPOPMIN", "k"],
        &["BZMPOP", "0", "0", &a, "MIN"],
        &["BZMPOP", "0", "-1", &a, "MIN"],
        &["BZMPOP", "0", "1", &a, "MIDDLE"],
        &["BZMPOP", "0", "1", &a, "MIN", "COUNT", "0"],
        &["BZMPOP", "0", "1", &a, "MIN", "COUNT", "x"],
        &["BZMPOP", "0", "1", &a, "MIN", "COUNT", "1", "COUNT", "1"],
        &["BZMPOP", "0", "3", &a, "MIN"],
        &["BZMPOP", "x", "1", &a, "MIN"],
        &["BZMPOP", "-1", "1", &a, "MIN"],
        &["BZMPOP", "x", "1", &a, "MIDDLE"],
        &["BZMPOP", "0", "1", "str", "MIN"],
        &["BZMPOP", "0", "1"],
    ] {
        d.run(cmd);
    }
    d.run_matching(&["HELLO", "3"], |r| !r.is_error());
    d.run(&["ZADD", &a, "7", "seven", "8", "eight", "9", "nine"]);
    d.run(&["BZPOPMIN", &a, "0"]);
    d.run(&["BZMPOP", "0", "1", &a, "MAX", "COUNT", "10"]);
    d.run(&["BZPOPMAX", "nokey", "0.05"]);
    d.run(&["BZMPOP", "0.05", "1", "nokey", "MIN"]);
}

#[test]
fn a_zadd_from_another_thread_wakes_blocked_sorted_set_pops_in_order() {
    both(|s| {
        let (k1, k2) = (key_in(1, "zq"), key_in(2, "zq"));
        let mut admin = s.conn();
        let mut first = s.conn();
        let mut second = s.conn();
        let mut third = s.conn();
        first.send(&["BZPOPMIN", &k1, "0"]);
        wait_blocked(&mut admin, 1);
        second.send(&["BZPOPMAX", &k1, "0"]);
        wait_blocked(&mut admin, 2);
        // Keys on two shards; woken by the second.
        third.send(&["BZMPOP", "0", "2", &k1, &k2, "MAX", "COUNT", "2"]);
        wait_blocked(&mut admin, 3);
        let mut seen = vec![admin.call(&["ZADD", &k1, "1", "a", "2", "b", "3", "c"])];
        seen.push(first.read_reply());
        seen.push(second.read_reply());
        seen.push(third.read_reply());
        seen.push(admin.call(&["EXISTS", &k1]));
        seen.push(admin.call(&["ZADD", &k2, "5", "x"]));
        seen.push(admin.call(&["ZCARD", &k2]));
        seen
    });
}

#[test]
fn a_woken_client_skips_a_key_that_became_another_type_and_stays_blocked() {
    both(|s| {
        let (l, z) = (key_in(1, "wl"), key_in(2, "wz"));
        let mut admin = s.conn();
        let mut bl = s.conn();
        let mut bz = s.conn();
        bl.send(&["BLPOP", &l, "0"]);
        wait_blocked(&mut admin, 1);
        bz.send(&["BZPOPMIN", &z, "0"]);
        wait_blocked(&mut admin, 2);
        let mut seen = Vec::new();
        for (k, push) in [
            (&l, ["LPUSH", l.as_str(), "a", ""]),
            (&z, ["ZADD", z.as_str(), "1", "a"]),
        ] {
            let push: Vec<&str> = push.into_iter().filter(|a| !a.is_empty()).collect();
            seen.push(admin.call(&["MULTI"]));
            seen.push(admin.call(&push));
            seen.push(admin.call(&["DEL", k]));
            seen.push(admin.call(&["SET", k, "foo"]));
            seen.push(admin.call(&["EXEC"]));
        }
        wait_blocked(&mut admin, 2);
        seen.push(admin.call(&["DEL", &l, &z]));
        seen.push(admin.call(&["LPUSH", &l, "b"]));
        seen.push(bl.read_reply());
        seen.push(admin.call(&["ZADD", &z, "2", "b"]));
        seen.push(bz.read_reply());
        seen
    });
}

#[test]
fn client_unblock_ends_a_blocked_command_or_wait_as_redis_does() {
    both(|s| {
        let k = key_in(2, "ub");
        let mut admin = s.conn();
        let mut blocked = s.conn();
        let id = String::from_utf8_lossy(
            Reply::decode(&blocked.call(&["CLIENT", "ID"]))
                .as_bytes()
                .unwrap_or_default(),
        )
        .to_string();
        let id = if id.is_empty() {
            Reply::decode(&blocked.call(&["CLIENT", "ID"]))
                .as_int()
                .expect("an id")
                .to_string()
        } else {
            id
        };
        let mut seen = vec![admin.call(&["CLIENT", "UNBLOCK", &id])];
        for (cmd, how) in [
            (vec!["BLPOP", k.as_str(), "0"], None),
            (vec!["BZPOPMIN", k.as_str(), "0"], Some("TIMEOUT")),
            (
                vec!["BLMOVE", k.as_str(), "dst", "LEFT", "LEFT", "0"],
                Some("ERROR"),
            ),
            (vec!["WAIT", "1", "0"], Some("error")),
            (vec!["WAIT", "1", "0"], None),
        ] {
            blocked.send(&cmd);
            wait_blocked(&mut admin, 1);
            let mut unblock = vec!["CLIENT", "UNBLOCK", id.as_str()];
            unblock.extend(how);
            seen.push(admin.call(&unblock));
            seen.push(blocked.read_reply());
            wait_blocked(&mut admin, 0);
        }
        for bad in [
            &["CLIENT", "UNBLOCK", "x"][..],
            &["CLIENT", "UNBLOCK", &id, "sometimes"],
            &["CLIENT", "UNBLOCK", &id, "TIMEOUT", "x"],
            &["CLIENT", "UNBLOCK", "999999"],
            &["WAIT", "x", "0"],
            &["WAIT", "0", "x"],
            &["WAIT", "0", "-1"],
            &["WAIT", "0", "0"],
            &["WAIT", "-1", "0"],
            &["WAIT", "1", "10"],
        ] {
            seen.push(admin.call(bad));
        }
        seen
    });
}
