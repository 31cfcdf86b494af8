//! Blocking list commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) on the park mechanism, run the
//! same way against redis-server and Strata: immediate answers, errors, timeouts, wake-ups by another
//! client (on another thread: `--threads 4`), first blocked first served, an element pushed in a
//! pipeline that also pops it going to the blocked client first, and nothing popped for a client
//! that disconnected while blocked.

use std::thread::sleep;
use std::time::Duration;

use crate::harness::{encode_command, hash_slot, key_in, wait_blocked, Diff, Reply, Server};

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
    both_with(&[], scenario)
}

/// [`both`], with the same extra settings (`--name value`) for both servers.
fn both_with(config: &[&str], scenario: impl Fn(&Server) -> Vec<Vec<u8>>) {
    let redis = Server::redis(config);
    let mut args = vec!["--threads", "4"];
    args.extend_from_slice(config);
    let strata = Server::strata(&args);
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
    let mut doomed = s.conn();
    doomed.send(&["BLPOP", &k, "0"]);
    wait_blocked(&mut admin, 1);
    // The socket closes while the command is parked (and its end reaches the server first).
    doomed.close_seen_by_server();
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

/// A blocked client that closes its connection is gone as soon as the server has its end, as in
/// Redis (which frees a client at the read that finds its end): no longer counted as blocked nor
/// listed, with no write to its keys needed — and the commands it pipelined behind the blocking
/// one never run (Strata ran them once the wait ended, before this test). Strata learns of the
/// end from the socket's event alone (nothing polls a waiting client), so a missed event would
/// leave the client blocked and fail the bounded wait.
#[test]
fn a_blocked_client_that_closes_is_gone_at_once_and_its_pipeline_never_runs() {
    both(|s| {
        let (k, marker) = (key_in(1, "closing"), key_in(2, "marker"));
        let mut admin = s.conn();
        let mut seen = Vec::new();
        // Alone, then with commands pipelined behind it (Redis's "bug 593" test does this).
        for behind in [0, 2] {
            let mut doomed = s.conn();
            let id = doomed
                .call_decoded(&["CLIENT", "ID"])
                .as_int()
                .expect("an id");
            let mut pipeline = encode_command(&["BRPOPLPUSH", &k, &format!("{{{k}}}:dst"), "0"]);
            for _ in 0..behind {
                pipeline.extend(encode_command(&["SET", &marker, "ran"]));
            }
            doomed.send_raw(&pipeline);
            wait_blocked(&mut admin, 1);
            doomed.close_seen_by_server();
            wait_blocked(&mut admin, 0);
            // Its connection ends right after its wait (bounded: 5 s).
            let listed = (0..500)
                .map(|i| {
                    if i > 0 {
                        sleep(Duration::from_millis(10));
                    }
                    admin.call(&["CLIENT", "LIST", "ID", &id.to_string()])
                })
                .find(|l| l.as_slice() == b"$0\r\n\r\n" || l.as_slice() == b"$0\r\n")
                .expect("the closed client is still listed");
            seen.push(listed);
            seen.push(admin.call(&["EXISTS", &marker]));
            seen.push(admin.call(&["LLEN", &k]));
        }
        seen
    });
}

/// Many blocked clients leaving at once, by a close, a reset or a half-close, on keys of several
/// shards, each with a write pipelined behind its pop: every one is gone (a half-closed client too,
/// as in Redis) and no write of theirs runs.
#[test]
fn blocked_clients_leaving_together_run_nothing_more() {
    both(|s| {
        let mut admin = s.conn();
        let keys: Vec<String> = (0..4).map(|i| key_in(i, "leaving")).collect();
        let mut doomed = Vec::new();
        for i in 0..24 {
            let mut c = s.conn();
            let mut raw = encode_command(&["BLPOP", &keys[i % 4], "0"]);
            raw.extend(encode_command(&[
                "SET",
                &format!("leaving:after:{i}"),
                "ran",
            ]));
            c.send_raw(&raw);
            doomed.push(c);
        }
        wait_blocked(&mut admin, 24);
        // The half-closed ones stay open for reading meanwhile.
        let mut half_closed = Vec::new();
        for (i, c) in doomed.into_iter().enumerate() {
            match i % 3 {
                0 => c.close_seen_by_server(),
                1 => c.reset(),
                _ => {
                    c.half_close();
                    half_closed.push(c);
                }
            }
        }
        wait_blocked(&mut admin, 0);
        // Pushes after they left find nobody to serve.
        for k in &keys {
            admin.call(&["RPUSH", k, "x"]);
        }
        let mut seen = vec![admin.call(&["KEYS", "leaving:after:*"])];
        for k in &keys {
            seen.push(admin.call(&["LLEN", k]));
        }
        // A half-closed client was let go without a reply (bounded: 5 s for the end).
        for mut c in half_closed {
            let closed = c.is_closed_within(Duration::from_secs(5));
            let (got, _) = c.read_until_quiet(Duration::from_millis(10));
            seen.push(format!("{} bytes, closed: {closed}", got.len()).into_bytes());
        }
        seen
    });
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
        admin.call(&["CONFIG", "RESETSTAT"]);
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
        // A command ended by CLIENT UNBLOCK counts as a failed call, also when it answers as on
        // timeout, and an UNBLOCKED error as an error reply, as Redis 7.0 counts them (INFO
        // errorstats, commandstats, stats).
        let mut stats = |section: &str| {
            let text = Reply::decode(&admin.call(&["INFO", section]));
            String::from_utf8_lossy(text.as_bytes().unwrap_or_default()).into_owned()
        };
        let (errors, commands, totals) =
            (stats("errorstats"), stats("commandstats"), stats("stats"));
        for line in errors.lines().filter(|l| l.starts_with("errorstat_")) {
            seen.push(line.as_bytes().to_vec());
        }
        // In name order (the servers list them in different orders).
        let mut calls: Vec<&str> = commands
            .lines()
            .filter(|l| {
                ["blpop", "bzpopmin", "blmove", "wait"]
                    .iter()
                    .any(|c| l.starts_with(&format!("cmdstat_{c}:")))
            })
            .collect();
        calls.sort_unstable();
        for line in calls {
            // Calls and failures, not the times.
            let (name, fields) = line.split_once(':').unwrap_or_default();
            let kept: Vec<&str> = fields
                .split(',')
                .filter(|f| !f.starts_with("usec"))
                .collect();
            seen.push(format!("{name}:{}", kept.join(",")).into_bytes());
        }
        for line in totals
            .lines()
            .filter(|l| l.starts_with("total_error_replies:"))
        {
            seen.push(line.trim().as_bytes().to_vec());
        }
        seen
    });
}

/// The `n` first keys `<tag>:<i>` in quarter `q` of the slot space: one shard with `--threads 4`,
/// without a hash tag.
fn keys_in(q: u16, tag: &str, n: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{tag}:{i}"))
        .filter(|k| hash_slot(k) / 4096 == q)
        .take(n)
        .collect()
}

/// Redis's "Circular BRPOPLPUSH": two clients each blocked moving one list to the other; one push
/// is served along the whole chain before anyone else's next command, so a third client sees the
/// element back in the first list. Repeated (the old wake-and-rerun raced with that command), with
/// keys sharing a shard by hash tag or by slot, on one thread and on four.
#[test]
fn a_chain_of_blocked_moves_completes_before_the_next_command_of_anyone() {
    for threads in ["1", "4"] {
        let s = Server::strata(&["--threads", threads]);
        let untagged = keys_in(1, "circ", 2);
        for (l1, l2) in [
            ("list1{t}".to_string(), "list2{t}".to_string()),
            (untagged[0].clone(), untagged[1].clone()),
        ] {
            let mut admin = s.conn();
            let mut observer = s.conn();
            let mut rd1 = s.conn();
            let mut rd2 = s.conn();
            for round in 0..25 {
                admin.call(&["DEL", &l1, &l2]);
                rd1.send(&["BRPOPLPUSH", &l1, &l2, "0"]);
                wait_blocked(&mut admin, 1);
                rd2.send(&["BRPOPLPUSH", &l2, &l1, "0"]);
                wait_blocked(&mut admin, 2);
                assert_eq!(admin.call_decoded(&["RPUSH", &l1, "foo"]).as_int(), Some(1));
                let seen = (
                    observer.call(&["LRANGE", &l1, "0", "-1"]),
                    observer.call(&["LRANGE", &l2, "0", "-1"]),
                );
                assert_eq!(
                    seen,
                    (b"*1\r\n$3\r\nfoo\r\n".to_vec(), b"*0\r\n".to_vec()),
                    "--threads {threads}, {l1} {l2}, round {round}"
                );
                assert_eq!(rd1.read_reply(), b"$3\r\nfoo\r\n");
                assert_eq!(rd2.read_reply(), b"$3\r\nfoo\r\n");
            }
        }
    }
}

/// BLMOVEs linked into a chain, a push at its head: each is served in turn in the same pass, and
/// the element ends at the tail before the pusher's next command, as in Redis.
#[test]
fn linked_blmoves_pass_an_element_down_the_chain_at_once() {
    both(|s| {
        let keys = keys_in(2, "chain", 4);
        let mut admin = s.conn();
        let mut movers: Vec<_> = (0..3).map(|_| s.conn()).collect();
        for (i, m) in movers.iter_mut().enumerate() {
            m.send(&["BLMOVE", &keys[i], &keys[i + 1], "RIGHT", "LEFT", "0"]);
            wait_blocked(&mut admin, i as i64 + 1);
        }
        let mut seen = vec![admin.call(&["RPUSH", &keys[0], "x"])];
        for k in &keys {
            seen.push(admin.call(&["LRANGE", k, "0", "-1"]));
        }
        for m in &mut movers {
            seen.push(m.read_reply());
        }
        seen
    });
}

/// One push of several elements serves several blocked clients, first blocked first, each taking
/// what its command takes; the one left without an element stays blocked.
#[test]
fn one_push_of_several_elements_serves_blocked_clients_in_fifo_order() {
    both(|s| {
        let k = key_in(3, "fifo");
        let mut admin = s.conn();
        let cmds: [&[&str]; 4] = [
            &["BLPOP", &k, "0"],
            &["BRPOP", &k, "0"],
            &["BLMPOP", "0", "1", &k, "LEFT", "COUNT", "2"],
            &["BLPOP", &k, "0"],
        ];
        let mut clients: Vec<_> = (0..cmds.len()).map(|_| s.conn()).collect();
        for (i, (c, cmd)) in clients.iter_mut().zip(cmds).enumerate() {
            c.send(cmd);
            wait_blocked(&mut admin, i as i64 + 1);
        }
        let mut seen = vec![admin.call(&["LPUSH", &k, "a", "b", "c", "d"])];
        seen.push(admin.call(&["LRANGE", &k, "0", "-1"]));
        for c in clients.iter_mut().take(3) {
            seen.push(c.read_reply());
        }
        wait_blocked(&mut admin, 1);
        seen.push(admin.call(&["RPUSH", &k, "f"]));
        seen.push(clients[3].read_reply());
        seen.push(admin.call(&["EXISTS", &k]));
        seen
    });
}

/// A blocked client is served after a transaction as a whole, never in the middle of it (with and
/// without WATCH, which runs EXEC another way), as Redis serves blocked clients after EXEC.
#[test]
fn a_blocked_client_is_served_after_exec_as_a_whole() {
    both(|s| {
        let k = key_in(0, "txn");
        let mut admin = s.conn();
        let mut blocked = s.conn();
        let mut seen = Vec::new();
        for watch in [false, true] {
            blocked.send(&["BLPOP", &k, "0"]);
            wait_blocked(&mut admin, 1);
            if watch {
                seen.push(admin.call(&["WATCH", "unrelated"]));
            }
            seen.push(admin.call(&["MULTI"]));
            seen.push(admin.call(&["LPUSH", &k, "a"]));
            seen.push(admin.call(&["LPUSH", &k, "b"]));
            seen.push(admin.call(&["DEL", &k]));
            seen.push(admin.call(&["RPUSH", &k, "c", "d"]));
            seen.push(admin.call(&["EXEC"]));
            seen.push(admin.call(&["LRANGE", &k, "0", "-1"]));
            seen.push(blocked.read_reply());
            seen.push(admin.call(&["DEL", &k]));
        }
        seen
    });
}

/// Clients killed or disconnected while blocked, ahead of live ones in the queue, while several
/// producers push: every element pushed is received by a live consumer or still in the list,
/// exactly once (nothing is popped for a client that is gone).
#[test]
fn blocked_clients_that_are_gone_lose_no_element_under_concurrent_producers() {
    use std::collections::BTreeMap;
    for threads in ["1", "4"] {
        let s = Server::strata(&["--threads", threads]);
        let k = key_in(2, "gone");
        let mut admin = s.conn();
        for round in 0..6 {
            // Victims block first: two killed, one that closes its socket.
            let mut victims: Vec<_> = (0..3).map(|_| s.conn()).collect();
            let ids: Vec<i64> = victims
                .iter_mut()
                .map(|v| v.call_decoded(&["CLIENT", "ID"]).as_int().expect("an id"))
                .collect();
            for (i, v) in victims.iter_mut().enumerate() {
                v.send(&["BLPOP", &k, "0"]);
                wait_blocked(&mut admin, i as i64 + 1);
            }
            for id in &ids[..2] {
                let killed = admin.call_decoded(&["CLIENT", "KILL", "ID", &id.to_string()]);
                assert_eq!(killed.as_int(), Some(1));
            }
            // Its end must have reached the server before the pushes: the point is what the
            // server does with a client it can see is gone (Redis too serves a client whose FIN
            // is still in flight, and its element is lost with it).
            victims.pop().expect("a victim").close_seen_by_server();
            let consumers: Vec<_> = (0..3)
                .map(|_| {
                    let mut conn = s.conn();
                    let k = k.clone();
                    std::thread::spawn(move || {
                        let mut got = Vec::new();
                        // Until the producers are done and the list stays empty for a while.
                        let mut idle = 0;
                        while idle < 3 {
                            let r = Reply::decode(&conn.call(&["BLPOP", &k, "0.2"]));
                            match r.as_array() {
                                Some(a) => {
                                    idle = 0;
                                    got.push(a[1].as_bytes().expect("an element").to_vec());
                                }
                                None => idle += 1,
                            }
                        }
                        got
                    })
                })
                .collect();
            let producers: Vec<_> = (0..2)
                .map(|p| {
                    let mut conn = s.conn();
                    let k = k.clone();
                    std::thread::spawn(move || {
                        for i in 0..150 {
                            conn.call(&["RPUSH", &k, &format!("{round}-{p}-{i}")]);
                        }
                    })
                })
                .collect();
            for p in producers {
                p.join().expect("producer");
            }
            let mut count: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
            for c in consumers {
                for e in c.join().expect("consumer") {
                    *count.entry(e).or_default() += 1;
                }
            }
            let rest = admin.call_decoded(&["LRANGE", &k, "0", "-1"]);
            for e in rest.as_array().expect("a list") {
                *count
                    .entry(e.as_bytes().expect("bytes").to_vec())
                    .or_default() += 1;
            }
            admin.call(&["DEL", &k]);
            let pushed: Vec<Vec<u8>> = (0..2)
                .flat_map(|p| (0..150).map(move |i| format!("{round}-{p}-{i}").into_bytes()))
                .collect();
            let lost: Vec<String> = pushed
                .iter()
                .filter(|e| !count.contains_key(*e))
                .map(|e| String::from_utf8_lossy(e).into_owned())
                .collect();
            let twice: Vec<String> = count
                .iter()
                .filter(|(_, n)| **n > 1)
                .map(|(e, _)| String::from_utf8_lossy(e).into_owned())
                .collect();
            assert!(
                lost.is_empty() && twice.is_empty() && count.len() == pushed.len(),
                "--threads {threads}, round {round}: lost {lost:?}, twice {twice:?}"
            );
            // The killed victims were answered nothing.
            for v in &mut victims {
                let (got, closed) = v.read_until_quiet(Duration::from_millis(500));
                assert!(got.is_empty() && closed, "a killed client got {got:?}");
            }
            wait_blocked(&mut admin, 0);
        }
    }
}

/// Clients blocked on one key by different types of wait: a write that gives the key a type serves
/// the first client whose wait that type answers, even behind clients it does not (Redis serves
/// every blocked client whose kind of wait matches, in blocking order); the others stay blocked.
#[test]
fn a_key_serves_the_first_client_waiting_for_its_type() {
    both(|s| {
        let k = key_in(2, "mixed");
        let dst = format!("{{{k}}}:dst");
        let mut admin = s.conn();
        let cmds: [&[&str]; 4] = [
            &["BLPOP", &k, "0"],
            &["BZPOPMIN", &k, "0"],
            &["BLMOVE", &k, &dst, "LEFT", "LEFT", "0"],
            &["BZPOPMAX", &k, "0"],
        ];
        let mut clients: Vec<_> = (0..cmds.len()).map(|_| s.conn()).collect();
        for (i, (c, cmd)) in clients.iter_mut().zip(cmds).enumerate() {
            c.send(cmd);
            wait_blocked(&mut admin, i as i64 + 1);
        }
        let mut seen = vec![admin.call(&["ZADD", &k, "1", "a", "2", "b", "3", "c"])];
        seen.push(clients[1].read_reply());
        seen.push(clients[3].read_reply());
        wait_blocked(&mut admin, 2);
        seen.push(admin.call(&["ZRANGE", &k, "0", "-1"]));
        seen.push(admin.call(&["DEL", &k]));
        seen.push(admin.call(&["RPUSH", &k, "x", "y"]));
        seen.push(clients[0].read_reply());
        seen.push(clients[2].read_reply());
        seen.push(admin.call(&["EXISTS", &k]));
        seen
    });
}

/// A blocking pop parked on keys of several shards is served by the shard whose key became ready,
/// at the write, as Redis serves it: before the pusher's reply, first blocked first served (over a
/// client parked on that key alone), and from that key only. So right after the push, another
/// client finds the element gone, a fresh LPOP gets nothing, and the later waiter stays blocked.
/// Each pop family, 20 rounds, compared with Redis.
#[test]
fn a_pop_parked_on_keys_of_several_shards_is_served_at_the_write() {
    both(|s| {
        let k: Vec<String> = (0..4).map(|q| key_in(q, "multi")).collect();
        let mut admin = s.conn();
        let mut observer = s.conn();
        let mut first = s.conn();
        let mut later = s.conn();
        let mut seen = Vec::new();
        let lists: [(&[&str], &str); 3] = [
            (&["BLPOP", &k[0], &k[1], &k[2], "0"], "RPUSH"),
            (&["BRPOP", &k[3], &k[2], "0"], "RPUSH"),
            (
                &[
                    "BLMPOP", "0", "3", &k[0], &k[2], &k[1], "RIGHT", "COUNT", "2",
                ],
                "RPUSH",
            ),
        ];
        let zsets: [(&[&str], &str); 3] = [
            (&["BZPOPMIN", &k[1], &k[2], "0"], "ZADD"),
            (&["BZPOPMAX", &k[3], &k[0], &k[2], "0"], "ZADD"),
            (
                &["BZMPOP", "0", "2", &k[2], &k[0], "MIN", "COUNT", "5"],
                "ZADD",
            ),
        ];
        for round in 0..20 {
            for (blocking, push) in lists.iter().chain(zsets.iter()) {
                admin.call(&["DEL", &k[0], &k[1], &k[2], &k[3]]);
                first.send(blocking);
                wait_blocked(&mut admin, 1);
                // The later waiter on the key that becomes ready: it must not get the element.
                let later_cmd: Vec<&str> = if *push == "ZADD" {
                    vec!["BZPOPMIN", &k[2], "0"]
                } else {
                    vec!["BLPOP", &k[2], "0"]
                };
                later.send(&later_cmd);
                wait_blocked(&mut admin, 2);
                let pushed = if *push == "ZADD" {
                    admin.call(&["ZADD", &k[2], "1", "one"])
                } else {
                    admin.call(&["RPUSH", &k[2], "one"])
                };
                let after = (
                    observer.call(&["EXISTS", &k[2]]),
                    observer.call(&["TYPE", &k[2]]),
                );
                let served = first.read_reply();
                if round == 0 {
                    seen.extend([pushed, after.0.clone(), after.1.clone(), served.clone()]);
                }
                assert_eq!(
                    after.0, b":0\r\n",
                    "{blocking:?} round {round}: element still there"
                );
                // Release the later waiter before the next round.
                if *push == "ZADD" {
                    admin.call(&["ZADD", &k[2], "2", "two"]);
                } else {
                    admin.call(&["RPUSH", &k[2], "two"]);
                }
                let second = later.read_reply();
                if round == 0 {
                    seen.push(second);
                }
            }
        }
        seen
    });
}

/// A BLMOVE whose source lives on a lower shard than its destination, woken by a push, gets the
/// element even when the pusher's pipeline pops the source right after the push: the wake-up
/// reserves the source for it (the first lock of its ascending order), as Redis serves it before
/// the pipeline's next command. 20 rounds, compared with Redis.
#[test]
fn a_blmove_across_shards_keeps_its_element_against_the_next_pop() {
    both(|s| {
        let (src, dst) = (key_in(0, "rsrc"), key_in(3, "rdst"));
        let mut admin = s.conn();
        let mut mover = s.conn();
        let mut pipe = s.conn();
        let mut seen = Vec::new();
        for round in 0..20 {
            admin.call(&["DEL", &src, &dst]);
            mover.send(&["BLMOVE", &src, &dst, "LEFT", "RIGHT", "0"]);
            wait_blocked(&mut admin, 1);
            let mut raw = crate::harness::encode_command(&["RPUSH", &src, "x"]);
            raw.extend(crate::harness::encode_command(&["LPOP", &src]));
            pipe.send_raw(&raw);
            let got = vec![
                pipe.read_reply(),
                pipe.read_reply(),
                mover.read_reply(),
                admin.call(&["LRANGE", &dst, "0", "-1"]),
            ];
            assert_eq!(
                got[1], b"$-1\r\n",
                "round {round}: the pipeline's LPOP took the element"
            );
            if round == 0 {
                seen = got;
            }
        }
        seen
    });
}

/// A BLMOVE or BRPOPLPUSH parked with source and destination on different shards is moved before
/// the pusher's next command, in both lock orders (source on the lower shard, and on the higher):
/// the LPOP pipelined behind the push finds nothing, the pusher's next read of the destination
/// finds the element, and so does another client right after. Fails on the code that ran such a
/// move from its task after the write (with the source on the higher shard, the LPOP took it).
#[test]
fn a_move_across_shards_is_done_before_the_pushers_reply() {
    both(|s| {
        let mut admin = s.conn();
        let mut mover = s.conn();
        let mut pusher = s.conn();
        let mut other = s.conn();
        let mut seen = Vec::new();
        for (low, high) in [(0, 3), (3, 0), (1, 2), (2, 1)] {
            let (src, dst) = (key_in(low, "msrc"), key_in(high, "mdst"));
            for round in 0..10 {
                admin.call(&["DEL", &src, &dst]);
                admin.call(&["RPUSH", &dst, "old"]);
                if round % 2 == 0 {
                    mover.send(&["BLMOVE", &src, &dst, "LEFT", "LEFT", "0"]);
                } else {
                    mover.send(&["BRPOPLPUSH", &src, &dst, "0"]);
                }
                wait_blocked(&mut admin, 1);
                let mut raw = crate::harness::encode_command(&["RPUSH", &src, "x"]);
                raw.extend(crate::harness::encode_command(&["LPOP", &src]));
                pusher.send_raw(&raw);
                let mut got = vec![
                    pusher.read_reply(),
                    pusher.read_reply(),
                    pusher.call(&["LRANGE", &dst, "0", "-1"]),
                    other.call(&["LRANGE", &dst, "0", "-1"]),
                    other.call(&["EXISTS", &src]),
                ];
                assert_eq!(
                    got[1], b"$-1\r\n",
                    "{low}->{high} round {round}: the pipeline's LPOP took the element"
                );
                assert_eq!(
                    got[2], b"*2\r\n$1\r\nx\r\n$3\r\nold\r\n",
                    "{low}->{high} round {round}: the pusher's next read missed the move"
                );
                got.push(mover.read_reply());
                if round < 2 {
                    seen.extend(got);
                }
            }
        }
        seen
    });
}

/// A chain of parked moves whose links cross shards (a→b→c→d, each list on another shard, in
/// several shard orders): one push at its head is passed down the whole chain before the pusher's
/// reply, as Redis serves the whole chain inside the push, so the pusher's next read of the tail —
/// and anyone's read after it — finds the element there and nowhere else. Fails on the code whose
/// pusher's reply waited only for the moves its own command claimed: the read of the tail could
/// overtake a later link's move.
#[test]
fn a_chain_of_moves_across_shards_completes_before_the_pushers_reply() {
    both(|s| {
        let mut admin = s.conn();
        let mut pusher = s.conn();
        let mut other = s.conn();
        let mut movers: Vec<_> = (0..3).map(|_| s.conn()).collect();
        let mut seen = Vec::new();
        for order in [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [2, 0, 3, 1]] {
            let keys: Vec<String> = order.iter().map(|&q| key_in(q, "xchain")).collect();
            for round in 0..15 {
                let mut args = vec!["DEL"];
                args.extend(keys.iter().map(String::as_str));
                admin.call(&args);
                for (i, m) in movers.iter_mut().enumerate() {
                    m.send(&["BLMOVE", &keys[i], &keys[i + 1], "RIGHT", "LEFT", "0"]);
                    wait_blocked(&mut admin, i as i64 + 1);
                }
                let mut got = vec![
                    pusher.call(&["RPUSH", &keys[0], "x"]),
                    pusher.call(&["LRANGE", &keys[3], "0", "-1"]),
                ];
                for k in &keys {
                    got.push(other.call(&["LLEN", k]));
                }
                for m in &mut movers {
                    got.push(m.read_reply());
                }
                assert_eq!(
                    got[1], b"*1\r\n$1\r\nx\r\n",
                    "{order:?} round {round}: the pusher's next read overtook the chain"
                );
                if round == 0 {
                    seen.extend(got);
                }
            }
        }
        seen
    });
}

/// A parked cross-shard move whose destination became another type fails with WRONGTYPE when its
/// source is pushed to, the source keeps the element, and the client blocked behind it gets it,
/// as in Redis.
#[test]
fn a_move_across_shards_into_a_key_of_another_type_fails_and_pops_nothing() {
    both(|s| {
        let mut admin = s.conn();
        let mut mover = s.conn();
        let mut popper = s.conn();
        let mut seen = Vec::new();
        for (low, high) in [(0, 3), (3, 0)] {
            let (src, dst) = (key_in(low, "wsrc"), key_in(high, "wdst"));
            admin.call(&["DEL", &src, &dst]);
            mover.send(&["BLMOVE", &src, &dst, "RIGHT", "LEFT", "0"]);
            wait_blocked(&mut admin, 1);
            popper.send(&["BLPOP", &src, "0"]);
            wait_blocked(&mut admin, 2);
            admin.call(&["SET", &dst, "a string"]);
            seen.push(admin.call(&["RPUSH", &src, "x", "y"]));
            seen.push(mover.read_reply());
            seen.push(popper.read_reply());
            seen.push(admin.call(&["LRANGE", &src, "0", "-1"]));
            seen.push(admin.call(&["GET", &dst]));
            seen.push(mover.call(&["PING"]));
        }
        seen
    });
}

/// A parked cross-shard move whose destination is held by a transaction when its source is pushed
/// to completes after that transaction, whichever shard is the lower: queued behind it when the
/// source's shard is lower, given back and run from its task when it is higher (it may not wait
/// for the destination while holding the source then). Redis, whose DEBUG SLEEP stops the whole
/// server, answers the same.
#[test]
fn a_move_across_shards_waits_for_a_transaction_holding_its_destination() {
    let run = |s: &Server| {
        let mut admin = s.conn();
        let mut mover = s.conn();
        let mut txn = s.conn();
        let mut pusher = s.conn();
        let mut seen = Vec::new();
        for (low, high) in [(3, 0), (0, 3)] {
            let (src, dst) = (key_in(low, "tsrc"), key_in(high, "tdst"));
            admin.call(&["DEL", &src, &dst]);
            mover.send(&["BLMOVE", &src, &dst, "LEFT", "LEFT", "0"]);
            wait_blocked(&mut admin, 1);
            for cmd in [
                &["MULTI"][..],
                &["RPUSH", &dst, "y"],
                &["DEBUG", "SLEEP", "0.3"],
                &["EXEC"],
            ] {
                txn.send(cmd);
            }
            // Let the transaction start (its lock on the destination is what is tested).
            sleep(Duration::from_millis(50));
            seen.push(pusher.call(&["RPUSH", &src, "x"]));
            seen.push(mover.read_reply());
            seen.extend((0..4).map(|_| txn.read_reply()));
            seen.push(admin.call(&["LRANGE", &dst, "0", "-1"]));
            seen.push(admin.call(&["EXISTS", &src]));
        }
        seen
    };
    both_with(&["--enable-debug-command", "yes"], run);
}

/// A pipeline whose commands span shards runs as a lock context; blocked clients are still served
/// between its commands, as Redis serves them after each command of a pipeline: the LPOP and LLEN
/// behind the RPUSH find the list already served, whether its part runs first (holding its locks
/// for the rest of the pipeline) or last. Fails on the code that served them only once the part
/// had run.
#[test]
fn blocked_clients_are_served_between_the_commands_of_a_pipeline_spanning_shards() {
    both(|s| {
        let mut admin = s.conn();
        let mut pusher = s.conn();
        let mut pop = s.conn();
        let mut zpop = s.conn();
        let mut mover = s.conn();
        let mut seen = Vec::new();
        for (low, high) in [(0, 3), (3, 0), (1, 2)] {
            let (list, zset, other) = (
                key_in(low, "plist"),
                key_in(low, "pzset"),
                key_in(high, "pother"),
            );
            let moved = key_in(low, "pmoved");
            admin.call(&["DEL", &list, &zset, &moved]);
            pop.send(&["BLPOP", &list, "0"]);
            zpop.send(&["BZPOPMIN", &zset, "0"]);
            mover.send(&["BLMOVE", &list, &moved, "RIGHT", "LEFT", "0"]);
            wait_blocked(&mut admin, 3);
            let mut raw = Vec::new();
            for cmd in [
                &["RPUSH", &list, "a", "b"][..],
                &["LPOP", &list],
                &["ZADD", &zset, "1", "m"],
                &["ZCARD", &zset],
                &["SET", &other, "v"],
                &["LLEN", &moved],
            ] {
                raw.extend(crate::harness::encode_command(cmd));
            }
            pusher.send_raw(&raw);
            seen.extend((0..6).map(|_| pusher.read_reply()));
            seen.push(pop.read_reply());
            seen.push(zpop.read_reply());
            seen.push(mover.read_reply());
            seen.push(admin.call(&["LRANGE", &moved, "0", "-1"]));
        }
        seen
    });
}

/// Clients blocked behind a cross-shard move on its source are served when the move pops, before
/// a command that queued for the source during the move (the pusher's pipelined LPOP), as Redis
/// serves them all right after the push.
#[test]
fn clients_blocked_behind_a_move_across_shards_keep_their_turn() {
    both(|s| {
        let mut admin = s.conn();
        let mut mover = s.conn();
        let mut first = s.conn();
        let mut second = s.conn();
        let mut pusher = s.conn();
        let mut seen = Vec::new();
        for (low, high) in [(0, 3), (3, 0), (1, 2)] {
            let (src, dst) = (key_in(low, "bsrc"), key_in(high, "bdst"));
            for round in 0..6 {
                admin.call(&["DEL", &src, &dst]);
                mover.send(&["BLMOVE", &src, &dst, "LEFT", "RIGHT", "0"]);
                wait_blocked(&mut admin, 1);
                first.send(&["BLPOP", &src, "0"]);
                wait_blocked(&mut admin, 2);
                second.send(&["BRPOP", &src, "0"]);
                wait_blocked(&mut admin, 3);
                let mut raw = crate::harness::encode_command(&["RPUSH", &src, "a", "b", "c"]);
                raw.extend(crate::harness::encode_command(&["LPOP", &src]));
                pusher.send_raw(&raw);
                let mut got = vec![pusher.read_reply(), pusher.read_reply()];
                assert_eq!(
                    got[1], b"$-1\r\n",
                    "{low}->{high} round {round}: the LPOP went before the blocked clients"
                );
                got.extend([
                    mover.read_reply(),
                    first.read_reply(),
                    second.read_reply(),
                    admin.call(&["LRANGE", &dst, "0", "-1"]),
                    admin.call(&["EXISTS", &src]),
                ]);
                if round == 0 {
                    seen.extend(got);
                }
            }
        }
        seen
    });
}

/// A client served inside a pipeline that spans shards never sees the pipeline out of order. The
/// pipeline is `SET flag 1` (shard 3), `RPUSH q x` (shard 0), `SET blocker 2` (shard 1); its parts
/// run in shard order, and the shard-1 part waits for a transaction. A client blocked on `q` is
/// therefore not served right after the RPUSH, which came after the SET of `flag`, not yet run.
/// Once it has `x`, it must find `flag` set, as in Redis. Fails on the first version of serving
/// between a pipeline's commands, which served it at once and let it read `flag` unset.
#[test]
fn a_client_served_inside_a_pipeline_never_sees_it_out_of_order() {
    let run = |s: &Server| {
        let mut admin = s.conn();
        let mut waiter = s.conn();
        let mut txn = s.conn();
        let mut pusher = s.conn();
        let (q, blocker, flag) = (key_in(0, "oq"), key_in(1, "oblock"), key_in(3, "oflag"));
        admin.call(&["DEL", &q, &blocker, &flag]);
        waiter.send(&["BLPOP", &q, "0"]);
        wait_blocked(&mut admin, 1);
        for cmd in [
            &["MULTI"][..],
            &["GET", &blocker],
            &["DEBUG", "SLEEP", "0.3"],
            &["EXEC"],
        ] {
            txn.send(cmd);
        }
        sleep(Duration::from_millis(50));
        let mut raw = crate::harness::encode_command(&["SET", &flag, "1"]);
        raw.extend(crate::harness::encode_command(&["RPUSH", &q, "x"]));
        raw.extend(crate::harness::encode_command(&["SET", &blocker, "2"]));
        pusher.send_raw(&raw);
        let mut seen = vec![waiter.read_reply(), waiter.call(&["GET", &flag])];
        seen.extend((0..3).map(|_| pusher.read_reply()));
        seen.extend((0..4).map(|_| txn.read_reply()));
        seen
    };
    both_with(&["--enable-debug-command", "yes"], run);
}
