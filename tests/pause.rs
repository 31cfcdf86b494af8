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
