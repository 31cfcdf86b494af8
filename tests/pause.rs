//! CLIENT PAUSE and UNPAUSE against redis-server: errors, WRITE pausing only writes (and EXEC of a
//! transaction that writes), ALL pausing everything, earlier commands of a pipeline running before a
//! paused one, and paused clients counted as blocked and released by UNPAUSE or the timeout.

use std::time::{Duration, Instant};

use crate::harness::{encode_command, wait_blocked, Conn, Server};

/// Runs `scenario` against both servers and compares what it returns.
fn both(scenario: impl Fn(&Server) -> Vec<Vec<u8>>) {
    let redis = Server::redis(&[]);
    let strata = Server::strata(&["--threads", "4"]);
    let show = |v: Vec<Vec<u8>>| {
        v.iter()
            .map(|b| String::from_utf8_lossy(b).to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(show(scenario(&strata)), show(scenario(&redis)));
}

#[test]
fn pause_write_holds_writes_and_lets_reads_through() {
    both(|s| {
        let mut admin = s.conn();
        let mut c = s.conn();
        let mut seen = Vec::new();
        for bad in [
            &["CLIENT", "PAUSE", "x"][..],
            &["CLIENT", "PAUSE", "-1"],
            &["CLIENT", "PAUSE", "10", "sometimes"],
            &["CLIENT", "PAUSE", "10", "WRITE", "x"],
            &["CLIENT", "UNPAUSE", "x"],
        ] {
            seen.push(admin.call(bad));
        }
        seen.push(admin.call(&["SET", "k", "before"]));
        seen.push(admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"]));
        // Reads, and transactions that only read, run.
        seen.push(c.call(&["GET", "k"]));
        seen.push(c.call(&["MULTI"]));
        seen.push(c.call(&["GET", "k"]));
        seen.push(c.call(&["EXEC"]));
        // A syntax error is answered at once.
        seen.push(c.call(&["SET", "k"]));
        // A pipeline: the read before the write runs, the write waits.
        let mut raw = encode_command(&["GET", "k"]);
        raw.extend(encode_command(&["SET", "k", "during"]));
        c.send_raw(&raw);
        seen.push(c.read_reply());
        wait_blocked(&mut admin, 1);
        seen.push(admin.call(&["GET", "k"]));
        seen.push(admin.call(&["CLIENT", "UNPAUSE"]));
        seen.push(c.read_reply());
        seen.push(admin.call(&["GET", "k"]));
        seen
    });
}

/// A paused client that closes its connection is gone as soon as the server has its end, as in
/// Redis (which frees it at the read that finds its end): no longer counted as blocked while the
/// pause lasts, and the writes it sent never run, neither the held one nor those pipelined behind.
/// Strata learns of the end from the socket's event (before, it kept the client until the pause
/// ended, then ran its writes).
#[test]
fn a_paused_client_that_closes_is_gone_and_its_writes_never_run() {
    both(|s| {
        let mut admin = s.conn();
        let mut seen = vec![admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"])];
        let mut c = s.conn();
        let id = c.call(&["CLIENT", "ID"]);
        let id = String::from_utf8_lossy(&id[1..id.len() - 2]).into_owned();
        let mut raw = encode_command(&["SET", "paused:a", "1"]);
        raw.extend(encode_command(&["SET", "paused:b", "1"]));
        c.send_raw(&raw);
        wait_blocked(&mut admin, 1);
        c.close_seen_by_server();
        // Bounded (5 s), well inside the pause.
        wait_blocked(&mut admin, 0);
        seen.push(admin.call(&["CLIENT", "UNPAUSE"]));
        // Once the client is no longer listed, whatever of its writes would run has run.
        let listed = (0..500)
            .map(|i| {
                if i > 0 {
                    std::thread::sleep(Duration::from_millis(10));
                }
                admin.call(&["CLIENT", "LIST", "ID", &id])
            })
            .find(|l| l.as_slice() == b"$0\r\n\r\n")
            .expect("the closed client is still listed");
        seen.push(listed);
        seen.push(admin.call(&["EXISTS", "paused:a", "paused:b"]));
        seen
    });
}

#[test]
fn pause_all_holds_every_command_until_its_timeout() {
    let s = Server::strata(&["--threads", "2"]);
    let mut admin = s.conn();
    let mut c = s.conn();
    assert_eq!(admin.call(&["CLIENT", "PAUSE", "300", "ALL"]), b"+OK\r\n");
    let start = Instant::now();
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
    assert!(
        start.elapsed() >= Duration::from_millis(200),
        "PING was not paused"
    );
}

#[test]
fn a_transaction_that_writes_waits_for_the_pause_as_a_whole() {
    both(|s| {
        let mut admin = s.conn();
        let mut c = s.conn();
        let mut seen = vec![c.call(&["MULTI"]), c.call(&["SET", "t", "1"])];
        seen.push(admin.call(&["CLIENT", "PAUSE", "100000", "WRITE"]));
        c.send(&["EXEC"]);
        wait_blocked(&mut admin, 1);
        seen.push(admin.call(&["GET", "t"]));
        seen.push(admin.call(&["CLIENT", "UNPAUSE"]));
        seen.push(c.read_reply());
        seen.push(admin.call(&["GET", "t"]));
        seen
    });
}

fn expired_keys(c: &mut Conn) -> Vec<u8> {
    let info = c.call_decoded(&["INFO", "stats"]);
    String::from_utf8_lossy(info.as_bytes().unwrap_or_default())
        .lines()
        .find(|l| l.starts_with("expired_keys:"))
        .unwrap_or_default()
        .as_bytes()
        .to_vec()
}

#[test]
fn expiry_is_held_while_clients_are_paused() {
    both(|s| {
        let mut c = s.conn();
        let mut out = vec![expired_keys(&mut c)];
        for k in ["e1", "e2{e1}", "e3"] {
            out.push(c.call(&["SET", k, "v", "PX", "20"]));
        }
        out.push(c.call(&["CLIENT", "PAUSE", "60000", "WRITE"]));
        std::thread::sleep(Duration::from_millis(250));
        // Due keys read as absent, but neither reads nor the background remove them.
        for k in ["e1", "e2{e1}", "e3"] {
            out.push(c.call(&["GET", k]));
            out.push(c.call(&["EXISTS", k]));
            out.push(c.call(&["TTL", k]));
        }
        out.push(c.call(&["DBSIZE"]));
        out.push(expired_keys(&mut c));
        out.push(c.call(&["CLIENT", "UNPAUSE"]));
        for k in ["e1", "e2{e1}", "e3"] {
            out.push(c.call(&["GET", k]));
        }
        out.push(c.call(&["DBSIZE"]));
        out.push(expired_keys(&mut c));
        out
    });
}

#[test]
fn pfcount_is_held_by_pause_write_as_may_replicate() {
    both(|s| {
        let mut c = s.conn();
        let mut out = vec![c.call(&["PFADD", "h", "a"])];
        out.push(c.call(&["CLIENT", "PAUSE", "60000", "WRITE"]));
        let mut p = s.conn();
        p.send(&["PFCOUNT", "h"]);
        wait_blocked(&mut c, 1);
        out.push(c.call(&["CLIENT", "UNPAUSE"]));
        out.push(p.read_reply());
        out
    });
}
