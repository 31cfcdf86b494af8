//! Connection and server commands against redis-server: PING, ECHO, SELECT, HELLO, AUTH, QUIT, RESET,
//! CLIENT, COMMAND, CONFIG, INFO, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, TIME, LASTSAVE, SHUTDOWN and DEBUG.
//!
//! Deterministic replies (errors included) are compared byte for byte, in RESP2 and RESP3. Replies that
//! legitimately differ between servers (client ids, addresses, INFO values, clocks) are checked for shape:
//! the same fields, in the same order, with plausible values. A few tests are Strata-only: they pin down
//! where Strata deliberately differs from Redis (DEBUG SLEEP suspends only its own connection, SHUTDOWN
//! refuses to drop a save schedule, CLIENT SETINFO from Redis 7.2).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::harness::{encode_command, Conn, Diff, Reply, Server, TempDir};

/// `field:value` lines of an INFO reply, by section: `[(section, [(field, value)])]`.
fn info_sections(reply: &Reply) -> Vec<(String, Vec<(String, String)>)> {
    let text =
        String::from_utf8_lossy(reply.as_bytes().expect("INFO replies with text")).into_owned();
    let mut sections: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in text.split("\r\n").filter(|l| !l.is_empty()) {
        if let Some(title) = line.strip_prefix("# ") {
            sections.push((title.to_string(), Vec::new()));
        } else if let (Some((_, fields)), Some((k, v))) =
            (sections.last_mut(), line.split_once(':'))
        {
            fields.push((k.to_string(), v.to_string()));
        } else {
            panic!("INFO line outside a section or without ':': {line:?}");
        }
    }
    sections
}

fn info_field<'a>(sections: &'a [(String, Vec<(String, String)>)], name: &str) -> Option<&'a str> {
    sections
        .iter()
        .flat_map(|(_, fields)| fields)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// An integer field of one INFO section, as `c` reports it now.
fn info_int(c: &mut Conn, section: &str, name: &str) -> i64 {
    let info = info_sections(&c.call_decoded(&["INFO", section]));
    info_field(&info, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} has no integer {name}"))
}

/// The `name=value` fields of one CLIENT LIST/INFO line.
fn client_fields(line: &str) -> Vec<(String, String)> {
    line.trim_end_matches('\n')
        .split(' ')
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .unwrap_or_else(|| panic!("field without '=': {kv:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn client_line(reply: &Reply) -> String {
    let text = reply.as_bytes().expect("CLIENT INFO replies with text");
    let text = String::from_utf8_lossy(text).into_owned();
    // A RESP3 verbatim string carries its `txt:` format tag.
    text.strip_prefix("txt:")
        .map(str::to_string)
        .unwrap_or(text)
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> &'a str {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no field {name} in {fields:?}"))
}

fn pipeline(commands: &[&[&str]]) -> Vec<u8> {
    commands.iter().flat_map(|c| encode_command(c)).collect()
}

fn int_of(conn: &mut Conn, args: &[&str]) -> i64 {
    conn.call_decoded(args)
        .as_int()
        .unwrap_or_else(|| panic!("{}: {args:?} did not reply with an integer", conn.label()))
}

// ------------------------------------------------------------------------------------------------
// PING, ECHO, SELECT
// ------------------------------------------------------------------------------------------------

#[test]
fn ping_echo_and_select_match_redis() {
    let mut d = Diff::new();
    d.run_all(&[
        &["PING"][..],
        &["PING", "hello"],
        &["PING", "a", "b"],
        &["ECHO"],
        &["ECHO", "hi"],
        &["ECHO", ""],
        &["SELECT", "1"],
        &["SELECT", "15"],
        &["SELECT", "16"],
        &["SELECT", "-1"],
        &["SELECT", "abc"],
        &["SELECT", "99999999999"],
        &["SELECT"],
        &["SELECT", "0"],
    ]);
}

#[test]
fn select_switches_the_database_of_this_connection_only() {
    let mut d = Diff::new();
    d.run(&["SET", "k", "db0"]);
    d.run(&["SELECT", "3"]);
    d.run(&["GET", "k"]);
    d.run(&["SET", "k", "db3"]);
    d.run(&["GET", "k"]);
    let mut other = d.new_conns();
    other.run(&["GET", "k"]);
    d.run(&["SELECT", "0"]);
    d.run(&["GET", "k"]);
}

// ------------------------------------------------------------------------------------------------
// HELLO, AUTH, QUIT, RESET
// ------------------------------------------------------------------------------------------------

fn hello_is_well_formed(r: &Reply, proto: i64) -> bool {
    let text = |k: &str| r.get(k).and_then(Reply::as_bytes).map(<[u8]>::to_vec);
    text("server") == Some(b"redis".to_vec())
        && text("version") == Some(b"7.0.15".to_vec())
        && r.get("proto").and_then(Reply::as_int) == Some(proto)
        && r.get("id").and_then(Reply::as_int).is_some_and(|id| id > 0)
        && text("mode") == Some(b"standalone".to_vec())
        && text("role") == Some(b"master".to_vec())
        && r.get("modules")
            .and_then(Reply::as_array)
            .is_some_and(<[Reply]>::is_empty)
}

#[test]
fn hello_negotiates_the_protocol() {
    let mut d = Diff::new();
    d.run_matching(&["HELLO"], |r| {
        matches!(r, Reply::Array(_)) && hello_is_well_formed(r, 2)
    });
    d.run_all(&[
        &["HELLO", "1"][..],
        &["HELLO", "4"],
        &["HELLO", "abc"],
        &["HELLO", "3", "SETNAME", "a b"],
        &["HELLO", "2", "foo"],
        &["HELLO", "2", "AUTH", "default"],
        &["HELLO", "2", "AUTH", "someone", "x"],
        &["HELLO", "2", "AUTH", "default", "x", "SETNAME"],
    ]);
    // The default user has no password: any password authenticates it.
    d.run_matching(
        &["HELLO", "2", "AUTH", "default", "x", "SETNAME", "me"],
        |r| hello_is_well_formed(r, 2),
    );
    d.run(&["CLIENT", "GETNAME"]);
    // The handshake reply itself is already in RESP3.
    d.run_matching(&["HELLO", "3"], |r| {
        matches!(r, Reply::Map(_)) && hello_is_well_formed(r, 3)
    });
    d.run_all(&[
        &["CONFIG", "GET", "maxmemory"][..],
        &["GET", "missing"],
        &["CLIENT", "GETNAME"],
        &["HELLO", "5"],
    ]);
    d.run_matching(&["HELLO"], |r| {
        matches!(r, Reply::Map(_)) && hello_is_well_formed(r, 3)
    });
    d.run_matching(&["HELLO", "2"], |r| {
        matches!(r, Reply::Array(_)) && hello_is_well_formed(r, 2)
    });
    d.run(&["GET", "missing"]);
}

#[test]
fn auth_without_a_configured_password() {
    let mut d = Diff::new();
    d.run_all(&[
        &["AUTH", "x"][..],
        &["AUTH", "someone", "x"],
        &["AUTH", "default", "anything"],
        &["AUTH", "a", "b", "c"],
        &["AUTH"],
    ]);
}

#[test]
fn auth_and_noauth_with_requirepass() {
    let mut d = Diff::with_config(&["--requirepass", "pw"]);
    d.run_all(&[
        &["PING"][..],
        &["GET", "k"],
        &["CLIENT", "ID"],
        &["AUTH", "x"],
        &["HELLO", "3"],
        &["HELLO", "4"],
        &["HELLO", "2", "SETNAME", "x"],
        &["HELLO", "3", "AUTH", "default", "x"],
        &["HELLO", "2", "AUTH", "someone", "pw"],
        &["AUTH", "someone", "pw"],
        &["PING"],
    ]);
    d.run_matching(
        &["HELLO", "2", "AUTH", "default", "pw", "SETNAME", "bob"],
        |r| hello_is_well_formed(r, 2),
    );
    d.run_all(&[
        &["CLIENT", "GETNAME"][..],
        // A failed AUTH keeps the earlier success.
        &["AUTH", "wrong"],
        &["PING"],
        &["AUTH", "pw"],
        &["AUTH", "default", "pw"],
        // RESET logs out again.
        &["RESET"],
        &["PING"],
        &["AUTH", "pw"],
        // Clearing the password lets everyone in, also connections that never authenticated.
        &["CONFIG", "SET", "requirepass", ""],
        &["RESET"],
        &["PING"],
    ]);
    let mut fresh = d.new_conns();
    fresh.run(&["PING"]);
    d.run(&["CONFIG", "SET", "requirepass", "pw"]);
    // A connection that never authenticated may run commands as soon as the password is cleared.
    let mut waiting = d.new_conns();
    waiting.run(&["PING"]);
    d.run(&["CONFIG", "SET", "requirepass", ""]);
    waiting.run(&["PING"]);
    d.run(&["CONFIG", "SET", "requirepass", "pw"]);
    // Connections keep their authentication; new ones need the new password.
    fresh.run(&["PING"]);
    let mut newest = d.new_conns();
    newest.run(&["PING"]);
    newest.run(&["AUTH", "pw"]);
    newest.run(&["PING"]);
}

#[test]
fn quit_replies_ok_then_closes() {
    let mut d = Diff::new();
    d.run_raw(&pipeline(&[&["QUIT"], &["PING"]]));
    let mut more = d.new_conns();
    more.run_raw(&pipeline(&[
        &["PING"],
        &["QUIT", "extra", "args"],
        &["PING"],
    ]));
}

/// A client that sends its commands and closes its sending side before the server looks (the
/// bytes and the FIN arrive together, as from `printf ... | nc -N`) gets every reply, then the end
/// of the connection; one that closes outright is let go. Strata once read such input short,
/// took the socket for drained, and waited for an edge the end of input never raises: the
/// connection stayed open for ever.
#[test]
fn input_followed_by_its_end_is_answered_then_closed() {
    use std::io::{Read, Write};
    let input = [
        encode_command(&["SET", "k", "v"]),
        encode_command(&["GET", "k"]),
        encode_command(&["PING"]),
    ]
    .concat();
    for (i, server) in Server::redis_and_stratas().iter().enumerate() {
        let label = format!("{} #{i}", server.kind().name());
        for round in 0..20 {
            let mut c =
                std::net::TcpStream::connect(("127.0.0.1", server.port())).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            c.write_all(&input).expect("send");
            c.shutdown(std::net::Shutdown::Write).expect("half-close");
            let mut got = Vec::new();
            c.read_to_end(&mut got).unwrap_or_else(|e| {
                panic!(
                    "{} round {round}: no end of connection after {:?}: {e}",
                    label,
                    String::from_utf8_lossy(&got)
                )
            });
            assert_eq!(got, b"+OK\r\n$1\r\nv\r\n+PONG\r\n", "{}", label);
        }
        // Closed outright right after sending: the server lets each go.
        for _ in 0..20 {
            let mut c =
                std::net::TcpStream::connect(("127.0.0.1", server.port())).expect("connect");
            c.write_all(&input).expect("send");
        }
        let mut admin = server.conn();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info = admin.call_decoded(&["INFO", "clients"]);
            let text = String::from_utf8_lossy(info.as_bytes().expect("INFO text")).to_string();
            if text.contains("connected_clients:1\r\n") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{}: closed clients still connected: {text}",
                label
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn reset_restores_connection_defaults() {
    let mut d = Diff::new();
    d.run(&["SET", "k", "db0"]);
    d.run(&["SELECT", "2"]);
    d.run(&["CLIENT", "SETNAME", "named"]);
    d.run(&["CLIENT", "NO-EVICT", "on"]);
    d.run_matching(&["HELLO", "3"], |r| hello_is_well_formed(r, 3));
    d.run(&["RESET"]);
    // Back to RESP2 (a null is `$-1` again), database 0, no name.
    d.run(&["GET", "missing"]);
    d.run(&["GET", "k"]);
    d.run(&["CLIENT", "GETNAME"]);
    d.run_matching(&["CLIENT", "INFO"], |r| {
        let f = client_fields(&client_line(r));
        // NO-EVICT survives RESET in Redis 7.0.
        field(&f, "flags") == "e" && field(&f, "db") == "0" && field(&f, "resp") == "2"
    });
    d.run(&["RESET", "extra"]);
}

// ------------------------------------------------------------------------------------------------
// CLIENT
// ------------------------------------------------------------------------------------------------

#[test]
fn client_names_and_errors() {
    let mut d = Diff::new();
    d.run_all(&[
        &["CLIENT", "GETNAME"][..],
        &["CLIENT", "SETNAME", "my-conn"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME", "a b"],
        &["CLIENT", "SETNAME", "a\nb"],
        &["CLIENT", "SETNAME", "caf\u{e9}"],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME", ""],
        &["CLIENT", "GETNAME"],
        &["CLIENT", "SETNAME"],
        &["CLIENT", "SETNAME", "x", "y"],
        &["CLIENT"],
        &["CLIENT", "nosuch"],
        &["client", "GetName"],
        &["CLIENT", "ID", "extra"],
        &["CLIENT", "NO-EVICT", "maybe"],
        &["CLIENT", "NO-EVICT", "on"],
        &["CLIENT", "NO-EVICT", "OFF"],
        &["CLIENT", "NO-EVICT"],
        &["CLIENT", "REPLY", "maybe"],
        &["CLIENT", "INFO", "extra"],
    ]);
    d.run_matching(&["CLIENT", "ID"], |r| r.as_int().is_some_and(|id| id > 0));
}

#[test]
fn client_list_and_info_have_redis_fields() {
    let mut d = Diff::new();
    let (redis, strata) = d.run_matching(&["CLIENT", "INFO"], |r| client_line(r).ends_with('\n'));
    let (redis, strata) = (
        client_fields(&client_line(&redis)),
        client_fields(&client_line(&strata)),
    );
    let names = |f: &[(String, String)]| f.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
    // Redis 7.0's fields in Redis's order, then Redis 7.2's lib-name and lib-ver.
    let mut expected = names(&redis);
    expected.extend(["lib-name".to_string(), "lib-ver".to_string()]);
    assert_eq!(names(&strata), expected);
    for f in [&redis, &strata] {
        assert_eq!(field(f, "cmd"), "client|info");
        assert_eq!(field(f, "flags"), "N");
        assert_eq!(field(f, "user"), "default");
        assert_eq!(field(f, "argv-mem"), "10");
    }
    // The same for every client of CLIENT LIST, in both protocols.
    d.run(&["CLIENT", "SETNAME", "lister"]);
    d.run(&["SELECT", "5"]);
    let mut other = d.new_conns();
    other.run(&["CLIENT", "SETNAME", "other"]);
    other.run(&["PING"]);
    for proto in ["2", "3"] {
        d.run_matching(&["HELLO", proto], |r| {
            hello_is_well_formed(r, proto.parse().unwrap())
        });
        d.run_matching(&["CLIENT", "LIST"], |r| {
            let text = client_line(r);
            let lines: Vec<&str> = text.lines().collect();
            let me = lines
                .iter()
                .map(|l| client_fields(l))
                .find(|f| field(f, "name") == "lister");
            let them = lines
                .iter()
                .map(|l| client_fields(l))
                .find(|f| field(f, "name") == "other");
            matches!((me, them), (Some(me), Some(them))
                if field(&me, "db") == "5" && field(&me, "cmd") == "client|list"
                    && field(&them, "db") == "0" && field(&them, "cmd") == "ping"
                    && field(&them, "resp") == "2"
                    && field(&me, "resp") == proto)
        });
    }
}

#[test]
fn client_list_filters() {
    let mut d = Diff::new();
    let mut other = d.new_conns();
    other.run(&["CLIENT", "SETNAME", "other"]);
    d.run_all(&[
        &["CLIENT", "LIST", "TYPE", "nosuch"][..],
        &["CLIENT", "LIST", "TYPE", "master"],
        &["CLIENT", "LIST", "TYPE", "replica"],
        &["CLIENT", "LIST", "TYPE", "slave"],
        &["CLIENT", "LIST", "TYPE", "pubsub"],
        &["CLIENT", "LIST", "TYPE"],
        &["CLIENT", "LIST", "TYPE", "normal", "extra"],
        &["CLIENT", "LIST", "ID"],
        &["CLIENT", "LIST", "ID", "1", "abc"],
        &["CLIENT", "LIST", "ID", "999999"],
        &["CLIENT", "LIST", "nosuch"],
    ]);
    d.run_matching(&["CLIENT", "LIST", "TYPE", "NORMAL"], |r| {
        client_line(r).lines().count() == 2
    });
    // ID lists the clients asked for, in the order asked, skipping unknown ids.
    let ids = |conn: &mut Conn| int_of(conn, &["CLIENT", "ID"]).to_string();
    let (r_other, s_other) = (ids(&mut other.redis), ids(&mut other.strata));
    let (r_me, s_me) = (ids(&mut d.redis), ids(&mut d.strata));
    let names = |conn: &mut Conn, a: &str, b: &str| {
        let r = conn.call_decoded(&["CLIENT", "LIST", "ID", a, "424242", b, a]);
        client_line(&r)
            .lines()
            .map(|l| field(&client_fields(l), "name").to_string())
            .collect::<Vec<_>>()
    };
    let want = vec!["other".to_string(), String::new(), "other".to_string()];
    assert_eq!(names(&mut d.redis, &r_other, &r_me), want);
    assert_eq!(names(&mut d.strata, &s_other, &s_me), want);
}

#[test]
fn client_kill_by_filters_and_address() {
    let mut d = Diff::new();
    d.run_all(&[
        &["CLIENT", "KILL"][..],
        &["CLIENT", "KILL", "1.2.3.4:5"],
        &["CLIENT", "KILL", "ID", "999999"],
        &["CLIENT", "KILL", "ID", "abc"],
        &["CLIENT", "KILL", "ID", "0"],
        &["CLIENT", "KILL", "ID"],
        &["CLIENT", "KILL", "nosuch", "x"],
        &["CLIENT", "KILL", "SKIPME", "maybe"],
        &["CLIENT", "KILL", "ADDR", "1.1.1.1:1", "SKIPME", "no"],
        &["CLIENT", "KILL", "LADDR", "1.1.1.1:1"],
        &["CLIENT", "KILL", "TYPE", "nosuch"],
        &["CLIENT", "KILL", "TYPE", "pubsub"],
        &["CLIENT", "KILL", "TYPE", "master"],
        &["CLIENT", "KILL", "USER", "nobody"],
        &["CLIENT", "KILL", "MAXAGE", "1"],
        &["CLIENT", "KILL", "ID", "1", "TYPE"],
    ]);
    // By id (new form): replies how many were killed; the victim's connection closes.
    let mut victim = d.new_conns();
    let r_id = int_of(&mut victim.redis, &["CLIENT", "ID"]).to_string();
    let s_id = int_of(&mut victim.strata, &["CLIENT", "ID"]).to_string();
    assert_eq!(d.redis.call(&["CLIENT", "KILL", "ID", &r_id]), b":1\r\n");
    assert_eq!(d.strata.call(&["CLIENT", "KILL", "ID", &s_id]), b":1\r\n");
    assert!(victim.redis.is_closed() && victim.strata.is_closed());
    // Killed clients are gone from CLIENT LIST.
    d.run_matching(&["CLIENT", "LIST"], |r| client_line(r).lines().count() == 1);
    // By address (old form): OK, or an error when nobody is there any more.
    let mut victim = d.new_conns();
    let addr = |c: &mut Conn| {
        field(
            &client_fields(&client_line(&c.call_decoded(&["CLIENT", "INFO"]))),
            "addr",
        )
        .to_string()
    };
    let (r_addr, s_addr) = (addr(&mut victim.redis), addr(&mut victim.strata));
    assert_eq!(d.redis.call(&["CLIENT", "KILL", &r_addr]), b"+OK\r\n");
    assert_eq!(d.strata.call(&["CLIENT", "KILL", &s_addr]), b"+OK\r\n");
    assert!(victim.redis.is_closed() && victim.strata.is_closed());
    // TYPE normal spares the caller (SKIPME yes is the default)...
    let mut victim = d.new_conns();
    victim.run(&["PING"]);
    d.run(&["CLIENT", "KILL", "TYPE", "normal", "USER", "default"]);
    assert!(victim.redis.is_closed() && victim.strata.is_closed());
    // ...and with SKIPME no the caller is answered, then disconnected.
    let mut me = d.new_conns();
    let r_id = int_of(&mut me.redis, &["CLIENT", "ID"]).to_string();
    let s_id = int_of(&mut me.strata, &["CLIENT", "ID"]).to_string();
    assert_eq!(
        me.redis
            .call(&["CLIENT", "KILL", "ID", &r_id, "SKIPME", "no"]),
        b":1\r\n"
    );
    assert_eq!(
        me.strata
            .call(&["CLIENT", "KILL", "ID", &s_id, "SKIPME", "no"]),
        b":1\r\n"
    );
    assert!(me.redis.is_closed() && me.strata.is_closed());
}

#[test]
fn client_reply_off_on_and_skip() {
    let mut d = Diff::new();
    d.run_raw(&pipeline(&[
        &["CLIENT", "REPLY", "OFF"],
        &["SET", "k", "1"],
        &["PING"],
        &["CLIENT", "REPLY", "ON"],
        &["GET", "k"],
        &["CLIENT", "REPLY", "SKIP"],
        &["PING", "skipped"],
        &["PING", "answered"],
        &["CLIENT", "REPLY", "OFF"],
        &["CLIENT", "REPLY", "SKIP"],
        &["PING", "still off"],
        &["CLIENT", "REPLY", "ON"],
        &["CLIENT", "REPLY", "OFF"],
        &["RESET"],
        &["PING", "after reset"],
    ]));
}

#[test]
fn client_setinfo_is_shown_by_client_info() {
    // CLIENT SETINFO is Redis 7.2's; the 7.0 oracle does not have it.
    let server = Server::strata(&[]);
    let mut c = server.conn();
    assert_eq!(
        c.call(&["CLIENT", "SETINFO", "LIB-NAME", "redis-py"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.call(&["CLIENT", "SETINFO", "lib-ver", "5.0.1"]),
        b"+OK\r\n"
    );
    assert_eq!(
        c.call(&["CLIENT", "SETINFO", "lib-ver", "1 2"]),
        b"-ERR lib-ver cannot contain spaces, newlines or special characters.\r\n"
    );
    assert_eq!(
        c.call(&["CLIENT", "SETINFO", "lib-foo", "x"]),
        b"-ERR Unrecognized option 'lib-foo'\r\n"
    );
    assert_eq!(
        c.call(&["CLIENT", "SETINFO", "lib-name"]),
        b"-ERR wrong number of arguments for 'client|setinfo' command\r\n"
    );
    let f = client_fields(&client_line(&c.call_decoded(&["CLIENT", "INFO"])));
    assert_eq!(
        (field(&f, "lib-name"), field(&f, "lib-ver")),
        ("redis-py", "5.0.1")
    );
    assert_eq!(c.call(&["CLIENT", "SETINFO", "lib-ver", ""]), b"+OK\r\n");
    let f = client_fields(&client_line(&c.call_decoded(&["CLIENT", "INFO"])));
    assert_eq!(field(&f, "lib-ver"), "");
}

// ------------------------------------------------------------------------------------------------
// COMMAND
// ------------------------------------------------------------------------------------------------

/// Commands whose COMMAND INFO Strata answers exactly as Redis 7.0 does: every command with keys
/// (key specs included) and the connection and server commands.
const SAME_INFO: &[&str] = &[
    "blpop",
    "brpop",
    "blmove",
    "brpoplpush",
    "blmpop",
    "sort",
    "sort_ro",
    "hset",
    "hsetnx",
    "hmset",
    "hget",
    "hmget",
    "hgetall",
    "hdel",
    "hexists",
    "hlen",
    "hstrlen",
    "hkeys",
    "hvals",
    "hincrby",
    "hincrbyfloat",
    "hrandfield",
    "hscan",
    "lpush",
    "rpush",
    "lpushx",
    "rpushx",
    "lpop",
    "rpop",
    "llen",
    "lindex",
    "linsert",
    "lpos",
    "lrange",
    "lrem",
    "lset",
    "ltrim",
    "lmove",
    "rpoplpush",
    "lmpop",
    "get",
    "set",
    "setnx",
    "setex",
    "psetex",
    "getex",
    "getdel",
    "getset",
    "mget",
    "mset",
    "msetnx",
    "append",
    "strlen",
    "incr",
    "decr",
    "incrby",
    "decrby",
    "incrbyfloat",
    "getrange",
    "substr",
    "setrange",
    "lcs",
    "del",
    "unlink",
    "exists",
    "type",
    "touch",
    "rename",
    "renamenx",
    "copy",
    "move",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "persist",
    "object|encoding",
    "object|freq",
    "object|idletime",
    "object|refcount",
    "ping",
    "echo",
    "select",
    "hello",
    "auth",
    "quit",
    "reset",
    "dbsize",
    "info",
    "time",
    "lastsave",
    "flushdb",
    "flushall",
    "swapdb",
    "shutdown",
    "debug",
    "client|id",
    "client|getname",
    "client|setname",
    "client|kill",
    "client|list",
    "client|reply",
    "client|no-evict",
    "client|help",
    "client|info",
    "config|get",
    "config|set",
    "config|resetstat",
    "config|rewrite",
    "config|help",
    "command|count",
    "command|docs",
    "command|getkeys",
    "command|getkeysandflags",
    "command|info",
    "command|list",
    "command|help",
    "memory|usage",
    "memory|help",
    // sets
    "sadd",
    "srem",
    "scard",
    "sismember",
    "smismember",
    "smembers",
    "srandmember",
    "spop",
    "smove",
    "sinter",
    "sintercard",
    "sinterstore",
    "sunion",
    "sunionstore",
    "sdiff",
    "sdiffstore",
    "sscan",
    "zadd",
    "zincrby",
    "zrem",
    "zcard",
    "zcount",
    "zlexcount",
    "zscore",
    "zmscore",
    "zrank",
    "zrevrank",
    "zrange",
    "zrangestore",
    "zrevrange",
    "zrangebyscore",
    "zrevrangebyscore",
    "zrangebylex",
    "zrevrangebylex",
    "zremrangebyrank",
    "zremrangebyscore",
    "zremrangebylex",
    "zpopmin",
    "zpopmax",
    "zmpop",
    "zrandmember",
    "zunion",
    "zunionstore",
    "zinter",
    "zinterstore",
    "zintercard",
    "zdiff",
    "zdiffstore",
    "zscan",
    "multi",
    "exec",
    "discard",
    "watch",
    "unwatch",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
];

/// Commands whose COMMAND DOCS Strata answers exactly as Redis 7.0 does: every command with keys
/// (arguments, history and deprecation included) and the connection and server commands without
/// arguments.
const SAME_DOCS: &[&str] = &[
    "blpop",
    "brpop",
    "blmove",
    "brpoplpush",
    "blmpop",
    "sort",
    "sort_ro",
    "hset",
    "hsetnx",
    "hmset",
    "hget",
    "hmget",
    "hgetall",
    "hdel",
    "hexists",
    "hlen",
    "hstrlen",
    "hkeys",
    "hvals",
    "hincrby",
    "hincrbyfloat",
    "hrandfield",
    "hscan",
    "lpush",
    "rpush",
    "lpushx",
    "rpushx",
    "lpop",
    "rpop",
    "llen",
    "lindex",
    "linsert",
    "lpos",
    "lrange",
    "lrem",
    "lset",
    "ltrim",
    "lmove",
    "rpoplpush",
    "lmpop",
    "get",
    "set",
    "setnx",
    "setex",
    "psetex",
    "getex",
    "getdel",
    "getset",
    "mget",
    "mset",
    "msetnx",
    "append",
    "strlen",
    "incr",
    "decr",
    "incrby",
    "decrby",
    "incrbyfloat",
    "getrange",
    "substr",
    "setrange",
    "lcs",
    "del",
    "unlink",
    "exists",
    "type",
    "touch",
    "rename",
    "renamenx",
    "copy",
    "move",
    "expire",
    "pexpire",
    "expireat",
    "pexpireat",
    "ttl",
    "pttl",
    "expiretime",
    "pexpiretime",
    "persist",
    "object|encoding",
    "object|freq",
    "object|idletime",
    "object|refcount",
    "dbsize",
    "time",
    "lastsave",
    "quit",
    "reset",
    "client|id",
    "client|getname",
    "client|help",
    "client|info",
    "command|count",
    "command|help",
    "command|getkeys",
    "config|help",
    "config|resetstat",
    "config|rewrite",
    "memory|usage",
    "memory|help",
    // sets
    "sadd",
    "srem",
    "scard",
    "sismember",
    "smismember",
    "smembers",
    "srandmember",
    "spop",
    "smove",
    "sinter",
    "sintercard",
    "sinterstore",
    "sunion",
    "sunionstore",
    "sdiff",
    "sdiffstore",
    "sscan",
    "zadd",
    "zincrby",
    "zrem",
    "zcard",
    "zcount",
    "zlexcount",
    "zscore",
    "zmscore",
    "zrank",
    "zrevrank",
    "zrange",
    "zrangestore",
    "zrevrange",
    "zrangebyscore",
    "zrevrangebyscore",
    "zrangebylex",
    "zrevrangebylex",
    "zremrangebyrank",
    "zremrangebyscore",
    "zremrangebylex",
    "zpopmin",
    "zpopmax",
    "zmpop",
    "zrandmember",
    "zunion",
    "zunionstore",
    "zinter",
    "zinterstore",
    "zintercard",
    "zdiff",
    "zdiffstore",
    "zscan",
    "multi",
    "exec",
    "discard",
    "watch",
    "unwatch",
    "bzpopmin",
    "bzpopmax",
    "bzmpop",
];

#[test]
fn command_info_and_docs_match_redis() {
    let mut d = Diff::new();
    for proto in ["2", "3"] {
        d.run_matching(&["HELLO", proto], |r| {
            hello_is_well_formed(r, proto.parse().unwrap())
        });
        for name in SAME_INFO {
            d.run(&["COMMAND", "INFO", name]);
        }
        let mut all = vec!["COMMAND", "INFO", "nosuch"];
        all.extend(SAME_INFO);
        all.extend(["CLIENT|ID", "GET|foo", "client|nosuch"]);
        d.run(&all);
        for name in SAME_DOCS {
            d.run(&["COMMAND", "DOCS", name]);
        }
        d.run(&["COMMAND", "DOCS", "nosuch", "dbsize", "also-nosuch"]);
        d.run(&["COMMAND", "DOCS", "nosuch"]);
    }
}

#[test]
fn command_info_describes_containers_and_subcommands() {
    let mut d = Diff::new();
    // Containers list their subcommands (Redis's order is its hash order, so compare by name).
    for container in ["client", "config", "command", "slowlog"] {
        let (redis, strata) = d.run_matching(&["COMMAND", "INFO", container], |r| {
            r.as_array()
                .and_then(|a| a.first())
                .and_then(Reply::as_array)
                .is_some_and(|e| e.len() == 10)
        });
        let parts = |r: &Reply| -> (Vec<Reply>, HashSet<Vec<u8>>) {
            let entry = r.as_array().unwrap()[0].as_array().unwrap().to_vec();
            let subs = entry[9]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_array().unwrap()[0].as_bytes().unwrap().to_vec())
                .collect();
            (entry[..9].to_vec(), subs)
        };
        let ((redis_head, redis_subs), (strata_head, strata_subs)) =
            (parts(&redis), parts(&strata));
        assert_eq!(redis_head, strata_head, "COMMAND INFO {container}");
        assert!(
            strata_subs.is_subset(&redis_subs) || container == "client",
            "{container}: {strata_subs:?}"
        );
        if container != "client" {
            assert_eq!(redis_subs, strata_subs, "{container}");
        }
    }
}

#[test]
fn command_list_count_and_getkeys() {
    let mut d = Diff::new();
    d.run_all(&[
        &["COMMAND", "GETKEYS"][..],
        &["COMMAND", "GETKEYS", "get"],
        &["COMMAND", "GETKEYS", "nosuch", "a"],
        &["COMMAND", "GETKEYS", "get", "a", "b"],
        &["COMMAND", "GETKEYS", "ping", "x"],
        &["COMMAND", "GETKEYS", "get", "k"],
        &["COMMAND", "GETKEYS", "GET", "k"],
        &["COMMAND", "GETKEYS", "mget", "a", "b", "c"],
        &["COMMAND", "GETKEYS", "mset", "a", "1", "b", "2"],
        &["COMMAND", "GETKEYS", "client", "list"],
        &["COMMAND", "GETKEYS", "client", "nosuch"],
        &["COMMAND", "GETKEYS", "client|list"],
        &["COMMAND", "GETKEYS", "object", "encoding", "k"],
        &["COMMAND", "GETKEYS", "config", "get", "x"],
        &["COMMAND", "GETKEYSANDFLAGS", "get", "k"],
        &["COMMAND", "GETKEYSANDFLAGS", "mget", "a", "b"],
        &["COMMAND", "GETKEYSANDFLAGS", "ping", "x"],
        &["COMMAND", "GETKEYSANDFLAGS", "set", "k", "v"],
        &["COMMAND", "GETKEYSANDFLAGS", "set", "k", "v", "GET"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "set",
            "k",
            "v",
            "EX",
            "10",
            "get",
        ],
        &["COMMAND", "GETKEYSANDFLAGS", "mset", "a", "1", "b", "2"],
        &["COMMAND", "GETKEYSANDFLAGS", "mset", "a"],
        &["COMMAND", "GETKEYSANDFLAGS", "msetnx", "a", "1", "b", "2"],
        &["COMMAND", "GETKEYSANDFLAGS", "del", "a", "b", "c"],
        &["COMMAND", "GETKEYSANDFLAGS", "unlink", "a"],
        &["COMMAND", "GETKEYSANDFLAGS", "exists", "a", "b"],
        &["COMMAND", "GETKEYSANDFLAGS", "touch", "a", "b"],
        &["COMMAND", "GETKEYSANDFLAGS", "rename", "a", "b"],
        &["COMMAND", "GETKEYSANDFLAGS", "renamenx", "a", "b"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "copy",
            "a",
            "b",
            "DB",
            "1",
            "REPLACE",
        ],
        &["COMMAND", "GETKEYSANDFLAGS", "move", "a", "1"],
        &["COMMAND", "GETKEYSANDFLAGS", "lcs", "a", "b", "LEN"],
        &["COMMAND", "GETKEYSANDFLAGS", "getex", "k", "PERSIST"],
        &["COMMAND", "GETKEYSANDFLAGS", "getdel", "k"],
        &["COMMAND", "GETKEYSANDFLAGS", "getset", "k", "v"],
        &["COMMAND", "GETKEYSANDFLAGS", "setnx", "k", "v"],
        &["COMMAND", "GETKEYSANDFLAGS", "setex", "k", "1", "v"],
        &["COMMAND", "GETKEYSANDFLAGS", "append", "k", "v"],
        &["COMMAND", "GETKEYSANDFLAGS", "strlen", "k"],
        &["COMMAND", "GETKEYSANDFLAGS", "incrbyfloat", "k", "1.5"],
        &["COMMAND", "GETKEYSANDFLAGS", "setrange", "k", "0", "v"],
        &["COMMAND", "GETKEYSANDFLAGS", "expire", "k", "10", "NX"],
        &["COMMAND", "GETKEYSANDFLAGS", "ttl", "k"],
        &["COMMAND", "GETKEYSANDFLAGS", "type", "k"],
        &["COMMAND", "GETKEYSANDFLAGS", "persist", "k"],
        &["COMMAND", "GETKEYSANDFLAGS", "object", "encoding", "k"],
        &["COMMAND", "GETKEYSANDFLAGS", "object", "help"],
        &["COMMAND", "GETKEYSANDFLAGS", "object"],
        &["COMMAND", "GETKEYSANDFLAGS", "nosuch", "k"],
        &["COMMAND", "GETKEYSANDFLAGS", "get|x", "k"],
        // A range that resolves to nothing is an error (Redis has no getkeys_proc for these).
        &["COMMAND", "GETKEYS", "pfmerge", "dest"],
        &["COMMAND", "GETKEYSANDFLAGS", "pfmerge", "dest"],
        &["COMMAND", "GETKEYS", "pfmerge", "dest", "a", "b"],
        &["COMMAND", "GETKEYS", "bitop", "and", "dest"],
        &["COMMAND", "GETKEYSANDFLAGS", "get"],
        &["COMMAND", "GETKEYSANDFLAGS", "get", "a", "b"],
        &["COMMAND", "GETKEYSANDFLAGS", "del"],
        &["COMMAND", "GETKEYS", "rename", "a", "b"],
        &["COMMAND", "GETKEYS", "set", "k", "v", "GET"],
        &["COMMAND", "GETKEYS", "copy", "a", "b"],
        &["COMMAND", "GETKEYS", "dbsize"],
        // A count the key spec cannot read: Redis falls back to the command's getkeys_proc, which
        // reads it with atoi and reports keys without flags (a destination after the sources).
        &["COMMAND", "GETKEYSANDFLAGS", "zunionstore", "d", "1.5", "a"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "zdiffstore",
            "d",
            "2x",
            "a",
            "b",
        ],
        &["COMMAND", "GETKEYSANDFLAGS", "zinter", "1x", "a"],
        &["COMMAND", "GETKEYS", "zintercard", " 2", "a", "b"],
        &[
            "COMMAND",
            "GETKEYS",
            "sintercard",
            "1.9",
            "a",
            "b",
            "LIMIT",
            "1",
        ],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "lmpop",
            "1.5",
            "a",
            "b",
            "LEFT",
        ],
        &["COMMAND", "GETKEYS", "blmpop", "0", "1e1", "a", "LEFT"],
        &["COMMAND", "GETKEYS", "zmpop", "x", "a", "MIN"],
        &["COMMAND", "GETKEYS", "bzmpop", "0", "3z", "a", "MIN"],
        // The key spec takes the count as an int: 2^32 + 1 is 1, 2^31 is negative.
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "lmpop",
            "4294967297",
            "a",
            "LEFT",
        ],
        &["COMMAND", "GETKEYS", "lmpop", "2147483648", "a", "LEFT"],
        &["COMMAND", "GETKEYS", "lmpop", "-1", "a", "LEFT"],
        &[
            "COMMAND",
            "GETKEYSANDFLAGS",
            "zunionstore",
            "d",
            "2",
            "a",
            "b",
        ],
        &["ZUNIONSTORE", "d", "1.5", "a"],
        &["LMPOP", "4294967297", "a", "LEFT"],
        &["COMMAND", "LIST", "FILTERBY", "MODULE", "foo"],
        &["COMMAND", "LIST", "FILTERBY", "bogus", "x"],
        &["COMMAND", "LIST", "FILTERBY", "pattern"],
        &["COMMAND", "LIST", "FILTERBY", "aclcat", "nosuchcat"],
        &["COMMAND", "LIST", "foo"],
        &["COMMAND", "COUNT", "extra"],
        &["COMMAND", "nosuch"],
        &["COMMAND", "HELP"],
    ]);
    d.run_unordered(&["COMMAND", "LIST", "FILTERBY", "PATTERN", "config*"]);
    d.run_unordered(&["COMMAND", "LIST", "FILTERBY", "pattern", "COMMAND*"]);
    d.run_unordered(&["COMMAND", "LIST", "FILTERBY", "pattern", "?ing"]);
    // Strata's own command set: COUNT counts top-level commands, LIST also names subcommands, and
    // COMMAND describes each command once.
    let s = &mut d.strata;
    let count = int_of(s, &["COMMAND", "COUNT"]) as usize;
    let all = s.call_decoded(&["COMMAND"]);
    let entries = all.as_array().expect("COMMAND replies with an array");
    assert_eq!(entries.len(), count);
    let names: HashSet<Vec<u8>> = entries
        .iter()
        .map(|e| e.as_array().unwrap()[0].as_bytes().unwrap().to_vec())
        .collect();
    assert_eq!(names.len(), count);
    let list = s.call_decoded(&["COMMAND", "LIST"]);
    let listed: HashSet<Vec<u8>> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_bytes().unwrap().to_vec())
        .collect();
    assert!(names.is_subset(&listed) && listed.contains(&b"client|list"[..]));
    let connection = s.call_decoded(&["COMMAND", "LIST", "FILTERBY", "ACLCAT", "connection"]);
    let connection: HashSet<Vec<u8>> = connection
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_bytes().unwrap().to_vec())
        .collect();
    for name in ["ping", "hello", "client|list", "command", "command|info"] {
        assert!(
            connection.contains(name.as_bytes()),
            "{name} is @connection"
        );
    }
    assert!(!connection.contains(&b"client"[..]) && !connection.contains(&b"get"[..]));
    let docs = s.call_decoded(&["COMMAND", "DOCS"]);
    assert_eq!(docs.as_pairs().map(|p| p.len()), Some(count));
}

// ------------------------------------------------------------------------------------------------
// CONFIG
// ------------------------------------------------------------------------------------------------

#[test]
fn config_get_and_set_match_redis() {
    let mut d = Diff::new();
    for proto in ["2", "3"] {
        d.run_matching(&["HELLO", proto], |r| {
            hello_is_well_formed(r, proto.parse().unwrap())
        });
        for name in [
            "maxmemory",
            "MAXMEMORY",
            "maxmemory-policy",
            "timeout",
            "hz",
            "databases",
            "appendonly",
            "requirepass",
            "maxclients",
            "tcp-keepalive",
            "tcp-backlog",
            "loglevel",
            "logfile",
            "daemonize",
            "save",
            "bind",
            "dbfilename",
            "protected-mode",
            "proto-max-bulk-len",
            "client-query-buffer-limit",
            "lfu-log-factor",
            "lfu-decay-time",
            "enable-debug-command",
            "nosuch",
        ] {
            d.run(&["CONFIG", "GET", name]);
        }
        d.run(&["CONFIG", "GET", "maxmemory", "maxmemory", "MAXMEMORY"]);
        d.run_unordered(&[
            "CONFIG",
            "GET",
            "maxmemory-pol*",
            "lfu-*",
            "dbfile?ame",
            "timeout",
        ]);
        d.run(&["CONFIG", "GET", "no*such*"]);
        d.run(&["CONFIG", "GET"]);
    }
    d.run_all(&[
        &["CONFIG", "SET", "maxmemory-policy", "foo"][..],
        &["CONFIG", "SET", "nosuch", "bar"],
        &["CONFIG", "SET", "maxmemory", "1x"],
        &["CONFIG", "SET", "maxmemory", "-1"],
        &["CONFIG", "SET", "hz", "abc"],
        &["CONFIG", "SET", "hz", "-1"],
        &["CONFIG", "SET", "timeout", "-1"],
        &["CONFIG", "SET", "maxclients", "0"],
        &["CONFIG", "SET", "lazyfree-lazy-eviction", "maybe"],
        &["CONFIG", "SET", "loglevel", "FOO"],
        &["CONFIG", "SET", "databases", "3"],
        &["CONFIG", "SET", "daemonize", "no"],
        &["CONFIG", "SET", "maxmemory", "10mb", "maxmemory", "5"],
        &["CONFIG", "SET", "maxmemory", "10mb", "nosuch", "1"],
        &["CONFIG", "SET", "databases", "3", "nosuch", "1"],
        &[
            "CONFIG",
            "SET",
            "timeout",
            "3",
            "nosuch",
            "1",
            "databases",
            "3",
        ],
        &[
            "CONFIG", "SET", "timeout", "3", "timeout", "4", "nosuch", "1",
        ],
        &["CONFIG", "SET", "maxmemory"],
        &["CONFIG", "SET", "a", "b", "c"],
        &["CONFIG", "GET", "maxmemory"],
        &["CONFIG", "SET", "proto-max-bulk-len", "1GB"],
        &["CONFIG", "GET", "proto-max-bulk-len"],
        &[
            "CONFIG",
            "SET",
            "client-query-buffer-limit",
            "100mb",
            "maxmemory-policy",
            "ALLKEYS-LRU",
            "timeout",
            "30",
        ],
        &["CONFIG", "GET", "client-query-buffer-limit"],
        &["CONFIG", "GET", "maxmemory-policy"],
        &["CONFIG", "GET", "timeout"],
        &[
            "CONFIG",
            "SET",
            "client-query-buffer-limit",
            "1gb",
            "proto-max-bulk-len",
            "512mb",
            "maxmemory-policy",
            "noeviction",
            "timeout",
            "0",
        ],
        &["CONFIG", "SET", "lazyfree-lazy-eviction", "NO"],
        &["CONFIG", "GET", "lazyfree-lazy-eviction"],
        &["CONFIG", "SET", "save", ""],
        &["CONFIG", "GET", "save"],
        &["CONFIG", "SET", "maxmemory", "0kb"],
        &["CONFIG", "GET", "maxmemory"],
        // hz is clamped to 1..500.
        &["CONFIG", "SET", "hz", "100000"],
        &["CONFIG", "GET", "hz"],
        &["CONFIG", "SET", "hz", "0"],
        &["CONFIG", "GET", "hz"],
        &["CONFIG", "SET", "hz", "10"],
        &["CONFIG", "nosuch"],
        &["CONFIG"],
        &["CONFIG", "HELP"],
    ]);
}

#[test]
fn client_output_buffer_limit_round_trips_as_in_redis() {
    let mut d = Diff::new();
    d.run_all(&[
        &["CONFIG", "GET", "client-output-buffer-limit"][..],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 512kb 1",
        ],
        &["CONFIG", "GET", "client-output-buffer-limit"],
        // Later groups win; only the classes named change; units as Redis reads them.
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "replica 1k 1K 5 slave 2 3 4 Normal 1g 2GB 007",
        ],
        &["CONFIG", "GET", "client-output-buffer-limit"],
        &["CONFIG", "SET", "client-output-buffer-limit", ""],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 99999999999999999999 5B +5",
        ],
        &["CONFIG", "GET", "client-output-buffer-limit"],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 512kb",
        ],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1 1  ",
        ],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "master 1 1 1",
        ],
        &["CONFIG", "SET", "client-output-buffer-limit", "foo 1 1 1"],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1x 1 1",
        ],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal -1 1 1",
        ],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal mb 1 1",
        ],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1.5mb 1 1",
        ],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1 1 -1",
        ],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1 1 abc",
        ],
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1 1 9223372036854775807",
        ],
        &["CONFIG", "GET", "client-output-buffer-limit"],
        &["CONFIG", "GET", "client-output-*"],
    ]);
}

#[test]
fn config_set_applies_all_or_nothing() {
    let mut d = Diff::new();
    // The first pair is valid, the second is not: neither takes effect.
    d.run(&["CONFIG", "SET", "timeout", "25", "hz", "not-a-number"]);
    d.run(&["CONFIG", "GET", "timeout"]);
    d.run(&["CONFIG", "SET", "timeout", "25", "maxmemory-policy", "nope"]);
    d.run(&["CONFIG", "GET", "timeout"]);
    d.run(&["CONFIG", "SET", "timeout", "25", "databases", "2"]);
    d.run(&["CONFIG", "GET", "timeout"]);
}

#[test]
fn config_rewrite_without_and_with_a_config_file() {
    let mut d = Diff::new();
    d.run(&["CONFIG", "REWRITE"]);
    d.run(&["CONFIG", "RESETSTAT"]);
    d.run(&["CONFIG", "RESETSTAT", "extra"]);

    // Strata-only: REWRITE keeps the file's comments and writes the live values. The harness passes its
    // flags first, and a config file must come first, so this server is started here.
    let dir = crate::harness::TempDir::new("config-rewrite");
    let path = dir.path().join("strata.conf");
    std::fs::write(&path, "# my settings\ntimeout 0\nhz 10\n").unwrap();
    let port = crate::harness::free_port();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg(&path)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start strata");
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _child = Kill(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    let stream = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(e) => assert!(Instant::now() < deadline, "strata did not start: {e}"),
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stream);
    let mut c = Conn::connect(port, "strata");
    assert_eq!(
        c.call(&[
            "CONFIG",
            "SET",
            "timeout",
            "42",
            "proto-max-bulk-len",
            "2mb"
        ]),
        b"+OK\r\n"
    );
    assert_eq!(c.call(&["CONFIG", "REWRITE"]), b"+OK\r\n");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("# my settings\ntimeout 42\nhz 10\n"),
        "{text}"
    );
    assert!(text.contains("\nproto-max-bulk-len 2mb\n"), "{text}");
    let info = c.call_decoded(&["INFO", "server"]);
    assert_eq!(
        info_field(&info_sections(&info), "config_file"),
        path.to_str()
    );
}

// ------------------------------------------------------------------------------------------------
// INFO
// ------------------------------------------------------------------------------------------------

#[test]
fn info_sections_and_fields_match_redis() {
    let mut d = Diff::new();
    for args in [
        &["INFO"][..],
        &["INFO", "default"],
        &["INFO", "all"],
        &["INFO", "everything"],
        &["INFO", "SERVER"],
        &["INFO", "keyspace", "cpu"],
        &["INFO", "clients", "memory", "stats"],
        &["INFO", "modules"],
        &["INFO", "nosuch"],
    ] {
        let (redis, strata) = d.run_matching(args, |r| r.as_bytes().is_some());
        let (redis, strata) = (info_sections(&redis), info_sections(&strata));
        let titles = |s: &[(String, Vec<(String, String)>)]| {
            s.iter().map(|(t, _)| t.clone()).collect::<Vec<_>>()
        };
        // Strata's sections come in Redis's order, and Strata adds its own at the end.
        let mut expected: Vec<String> = titles(&redis);
        let strata_titles = titles(&strata);
        if strata_titles.last().map(String::as_str) == Some("Strata") {
            expected.push("Strata".into());
        }
        assert_eq!(strata_titles, expected, "INFO {args:?}");
        // Every field Strata reports in a Redis section is one Redis reports there too.
        for (title, fields) in &strata {
            let Some((_, redis_fields)) = redis.iter().find(|(t, _)| t == title) else {
                continue;
            };
            for (k, _) in fields {
                assert!(
                    redis_fields.iter().any(|(rk, _)| rk == k),
                    "{title} field {k} is not Redis's"
                );
            }
        }
    }
    let (_, strata) = d.run_matching(&["INFO", "everything"], |r| {
        let s = info_sections(r);
        [
            "redis_version",
            "redis_mode",
            "os",
            "arch_bits",
            "multiplexing_api",
            "process_id",
            "run_id",
            "tcp_port",
            "uptime_in_seconds",
            "uptime_in_days",
            "hz",
            "executable",
            "config_file",
            "io_threads_active",
            "connected_clients",
            "blocked_clients",
            "maxclients",
            "used_memory",
            "used_memory_human",
            "used_memory_rss",
            "used_memory_peak",
            "maxmemory",
            "maxmemory_policy",
            "mem_allocator",
            "total_connections_received",
            "total_commands_processed",
            "instantaneous_ops_per_sec",
            "total_net_input_bytes",
            "total_net_output_bytes",
            "rejected_connections",
            "expired_keys",
            "keyspace_hits",
            "keyspace_misses",
            "used_cpu_sys",
            "used_cpu_user",
            "role",
            "loading",
            "cluster_enabled",
        ]
        .iter()
        .all(|f| info_field(&s, f).is_some())
    });
    let s = info_sections(&strata);
    assert_eq!(info_field(&s, "redis_version"), Some("7.0.15"));
    assert_eq!(
        info_field(&s, "tcp_port"),
        Some(d.strata_server.port().to_string().as_str())
    );
    assert_eq!(
        info_field(&s, "process_id"),
        Some(d.strata_server.pid().to_string().as_str())
    );
    assert_eq!(info_field(&s, "threads"), Some("2"));
    assert!(
        info_field(&s, "used_memory")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert!(
        info_field(&s, "used_memory_rss")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    assert_eq!(info_field(&s, "run_id").map(str::len), Some(40));
    // RESP3 sends INFO as a verbatim string.
    d.run_matching(&["HELLO", "3"], |r| hello_is_well_formed(r, 3));
    d.run_matching(
        &["INFO", "server"],
        |r| matches!(r, Reply::Verbatim(t) if t.starts_with(b"txt:# Server\r\n")),
    );
    d.run(&["INFO", "nosuch"]);
}

#[test]
fn info_keyspace_and_commandstats_count_like_redis() {
    let mut d = Diff::new();
    // Keys on both shards and in two databases.
    for k in ["a", "b", "c", "d", "foo", "bar"] {
        d.run(&["SET", k, "v"]);
    }
    d.run(&["SET", "ttl", "v", "EX", "1000"]);
    d.run(&["SELECT", "9"]);
    d.run(&["SET", "x", "1"]);
    d.run(&["GET", "x"]);
    d.run(&["GET", "nope"]);
    d.run(&["SET", "x", "1", "NX", "XX"]);
    // Rejected before running: counted as rejected_calls, not calls.
    d.run(&["GET"]);
    d.run(&["GET", "a", "b"]);
    let (redis, strata) = d.run_matching(&["INFO", "keyspace"], |r| r.as_bytes().is_some());
    let keyspace = |r: &Reply| -> Vec<String> {
        info_sections(r)[0]
            .1
            .iter()
            .map(|(k, v)| format!("{k}:{}", v.rsplit_once(',').unwrap().0))
            .collect()
    };
    assert_eq!(keyspace(&redis), keyspace(&strata));
    assert_eq!(
        keyspace(&strata),
        ["db0:keys=7,expires=1", "db9:keys=1,expires=0"]
    );
    // Per-command calls and failures (times differ).
    let (redis, strata) = d.run_matching(&["INFO", "commandstats"], |r| r.as_bytes().is_some());
    let stat = |r: &Reply, cmd: &str| -> String {
        let s = info_sections(r);
        let v = info_field(&s, &format!("cmdstat_{cmd}"))
            .unwrap_or_else(|| panic!("no cmdstat_{cmd}"))
            .to_string();
        v.split(',')
            .filter(|kv| {
                kv.starts_with("calls=")
                    || kv.starts_with("failed_calls=")
                    || kv.starts_with("rejected_calls=")
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    for cmd in ["set", "get", "select"] {
        assert_eq!(stat(&redis, cmd), stat(&strata, cmd), "cmdstat_{cmd}");
    }
    assert_eq!(
        stat(&strata, "set"),
        "calls=9,rejected_calls=0,failed_calls=1"
    );
    assert_eq!(
        stat(&strata, "get"),
        "calls=2,rejected_calls=2,failed_calls=0"
    );
    // Hits and misses.
    let (redis, strata) = d.run_matching(&["INFO", "stats"], |r| r.as_bytes().is_some());
    for f in ["keyspace_hits", "keyspace_misses", "expired_keys"] {
        assert_eq!(
            info_field(&info_sections(&redis), f),
            info_field(&info_sections(&strata), f),
            "{f}"
        );
    }
    // CONFIG RESETSTAT zeroes the counters.
    d.run(&["CONFIG", "RESETSTAT"]);
    let (redis, strata) = d.run_matching(&["INFO", "stats"], |r| r.as_bytes().is_some());
    for f in ["keyspace_hits", "keyspace_misses", "expired_keys"] {
        assert_eq!(info_field(&info_sections(&redis), f), Some("0"), "{f}");
        assert_eq!(info_field(&info_sections(&strata), f), Some("0"), "{f}");
    }
    let s = d.strata.call_decoded(&["INFO", "commandstats"]);
    assert!(info_field(&info_sections(&s), "cmdstat_set").is_none());
}

#[test]
fn errorstats_count_error_replies_by_code_like_redis() {
    let mut d = Diff::new();
    d.run_all(&[
        &["CONFIG", "RESETSTAT"][..],
        &["INFO", "errorstats"],
        &["NOSUCHCOMMAND"],
        &["GET"],
        &["SET", "s", "v"],
        &["LPUSH", "s", "x"],
        &["INCR", "s"],
        &["MULTI"],
        &["SET", "a"],
        &["EXEC"],
        &["EXEC"],
        &["MULTI"],
        &["NOSUCH"],
        &["EXEC"],
        &["MULTI"],
        &["INCR", "s"],
        &["EXEC"],
        &["CONFIG", "SET", "nosuch", "1"],
        &["OBJECT", "nosuch"],
        &["ZADD", "s", "1", "m"],
        &["INFO", "errorstats"],
    ]);
    let total = |r: &Reply| -> Option<String> {
        let text = String::from_utf8_lossy(r.as_bytes()?).into_owned();
        text.lines()
            .find_map(|l| l.strip_prefix("total_error_replies:").map(str::to_string))
    };
    let (redis, strata) = d.run_matching(&["INFO", "stats"], |r| total(r).is_some());
    assert_eq!(total(&redis), total(&strata));
    assert_eq!(total(&redis).as_deref(), Some("13"));
    // Protocol errors count too (each closes its connection).
    for bad in [&b"*1\r\n$x\r\n"[..], b"*a\r\n"] {
        d.new_conns().run_raw(bad);
    }
    let (redis, strata) = d.run_matching(&["INFO", "stats"], |r| total(r).is_some());
    assert_eq!(total(&redis), total(&strata));
    assert_eq!(total(&redis).as_deref(), Some("15"));
    d.run_all(&[
        &["INFO", "errorstats"][..],
        &["CONFIG", "RESETSTAT"],
        &["INFO", "errorstats"],
    ]);
}

#[test]
fn info_clients_counts_connections() {
    let server = Server::strata(&["--threads", "2"]);
    let mut c = server.conn();
    let mut others: Vec<Conn> = (0..3).map(|_| server.conn()).collect();
    for o in &mut others {
        assert_eq!(o.call(&["PING"]), b"+PONG\r\n");
    }
    let count = |c: &mut Conn| {
        let s = c.call_decoded(&["INFO", "clients"]);
        info_field(&info_sections(&s), "connected_clients")
            .unwrap()
            .parse::<usize>()
            .unwrap()
    };
    assert_eq!(count(&mut c), 4);
    drop(others);
    let deadline = Instant::now() + Duration::from_secs(5);
    while count(&mut c) != 1 {
        assert!(
            Instant::now() < deadline,
            "closed connections are still counted"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A pipeline whose replies outgrow `client-output-buffer-limit normal` closes the client without
/// the server ever holding those replies: 300 GETs of a 1 MB value (300 MB of replies) in one
/// write, with a 4 MB hard limit, on one shard, across shards and inside MULTI/EXEC.
#[test]
fn a_pipeline_of_huge_replies_is_cut_off_by_the_normal_output_limit() {
    let value = "v".repeat(1 << 20);
    for server in [Server::redis(&[]), Server::strata(&["--threads", "4"])] {
        let name = server.kind().name();
        let mut admin = server.conn();
        let limit = [
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 4mb 0 0",
        ];
        assert_eq!(admin.call(&limit), b"+OK\r\n");
        let (a, b) = (
            crate::harness::key_on(0, "big"),
            crate::harness::key_on(1, "big"),
        );
        for k in [&a, &b] {
            assert_eq!(admin.call(&["SET", k, &value]), b"+OK\r\n");
        }
        let gets = |keys: &[&str]| -> Vec<u8> {
            (0..300)
                .flat_map(|i| encode_command(&["GET", keys[i % keys.len()]]))
                .collect()
        };
        let txn = [
            encode_command(&["MULTI"]),
            gets(&[&a, &b]),
            encode_command(&["EXEC"]),
        ]
        .concat();
        for (what, pipeline) in [
            ("one shard", gets(&[&a])),
            ("two shards", gets(&[&a, &b])),
            ("a transaction", txn),
        ] {
            let before = server.peak_rss_bytes();
            let mut c = server.conn();
            c.send_raw(&pipeline);
            assert!(
                c.is_closed_within(Duration::from_secs(10)),
                "{name}, {what}: the client is closed"
            );
            let grew = server.peak_rss_bytes().saturating_sub(before);
            assert!(
                grew < 100 << 20,
                "{name}, {what}: peak RSS grew by {} MB",
                grew >> 20
            );
            assert_eq!(admin.call(&["PING"]), b"+PONG\r\n", "{name}, {what}");
        }
    }
}

#[test]
fn info_strata_counts_the_messages_between_threads() {
    let server = Server::strata(&["--threads", "2"]);
    let mut c = server.conn();
    let hops = |c: &mut Conn| -> Vec<(u64, u64)> {
        let s = c.call_decoded(&["INFO", "strata"]);
        let sections = info_sections(&s);
        (0..2)
            .map(|i| {
                let line = info_field(&sections, &format!("shard{i}")).expect("shard line");
                let n = |name: &str| -> u64 {
                    line.split(',')
                        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or_else(|| panic!("no {name} in {line:?}"))
                };
                (n("batches"), n("wakeups"))
            })
            .collect()
    };
    let before = hops(&mut c);
    // A key on each shard: whichever thread serves this connection, one of them is remote.
    let (a, b) = (
        crate::harness::key_in(0, "h"),
        crate::harness::key_in(2, "h"),
    );
    for _ in 0..20 {
        assert_eq!(c.call(&["SET", &a, "1"]), b"+OK\r\n");
        assert_eq!(c.call(&["SET", &b, "1"]), b"+OK\r\n");
    }
    let after = hops(&mut c);
    let total = |h: &[(u64, u64)]| h.iter().map(|x| x.0).sum::<u64>();
    // Each remote SET is a request and a reply, each a batch of its own when nothing else is
    // in flight.
    assert!(
        total(&after) >= total(&before) + 40,
        "{before:?} -> {after:?}"
    );
    for (batches, wakeups) in after {
        assert!(wakeups <= batches);
    }
}

// ------------------------------------------------------------------------------------------------
// DBSIZE, FLUSHDB, FLUSHALL, SWAPDB
// ------------------------------------------------------------------------------------------------

#[test]
fn dbsize_flush_and_swapdb_match_redis() {
    let mut d = Diff::new();
    let fill = |d: &mut Diff, db: &str, keys: &[&str]| {
        d.run(&["SELECT", db]);
        for k in keys {
            d.run(&["SET", k, db]);
        }
    };
    fill(&mut d, "0", &["a", "b", "c", "d", "foo", "bar"]);
    fill(&mut d, "1", &["a", "b"]);
    fill(&mut d, "2", &["x"]);
    d.run_all(&[
        &["DBSIZE"][..],
        &["DBSIZE", "extra"],
        &["SELECT", "0"],
        &["DBSIZE"],
        &["SWAPDB", "0"],
        &["SWAPDB", "a", "1"],
        &["SWAPDB", "0", "b"],
        &["SWAPDB", "0", "16"],
        &["SWAPDB", "-1", "0"],
        &["SWAPDB", "99999999999", "0"],
        &["SWAPDB", "0", "99999999999"],
        &["SWAPDB", "0", "0"],
        &["SWAPDB", "0", "2"],
        // This connection stays on database 0, which now holds what database 2 held.
        &["DBSIZE"],
        &["GET", "x"],
        &["GET", "a"],
        &["SELECT", "2"],
        &["DBSIZE"],
        &["GET", "foo"],
        &["FLUSHDB", "nosuch"],
        &["FLUSHDB", "ASYNC", "extra"],
        &["FLUSHDB"],
        &["DBSIZE"],
        &["SELECT", "1"],
        &["DBSIZE"],
        &["FLUSHDB", "SYNC"],
        &["DBSIZE"],
        &["SELECT", "0"],
        &["DBSIZE"],
        &["FLUSHALL", "nosuch"],
        &["FLUSHALL", "async"],
        &["DBSIZE"],
        &["SET", "k", "v"],
        &["FLUSHALL"],
        &["DBSIZE"],
        &["FLUSHALL", "SYNC"],
    ]);
}

/// A multi-key write and FLUSHALL never interleave: a reader sees all of the keys or none.
#[test]
fn flushall_is_atomic_across_shards() {
    let server = Server::strata(&["--threads", "2"]);
    // "a"/"d" and "b"/"c" hash to different halves of the slot space, i.e. different shards.
    let keys = ["a", "b", "c", "d"];
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut w = server.conn();
            for i in 0..400 {
                let v = i.to_string();
                let reply = w.call(&["MSET", "a", &v, "b", &v, "c", &v, "d", &v]);
                assert_eq!(reply, b"+OK\r\n");
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        s.spawn(|| {
            let mut f = server.conn();
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                assert_eq!(f.call(&["FLUSHALL"]), b"+OK\r\n");
            }
        });
        let mut r = server.conn();
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let reply = r.call_decoded(&["MGET", keys[0], keys[1], keys[2], keys[3]]);
            let values = reply.as_array().expect("MGET replies with an array");
            let present = values.iter().filter(|v| !v.is_nil()).count();
            assert!(
                present == 0 || present == keys.len(),
                "MGET saw a half-flushed keyspace: {reply}"
            );
            if present > 0 {
                assert!(
                    values.windows(2).all(|w| w[0] == w[1]),
                    "MGET saw two writes: {reply}"
                );
            }
        }
    });
}

// ------------------------------------------------------------------------------------------------
// TIME, LASTSAVE, SHUTDOWN
// ------------------------------------------------------------------------------------------------

#[test]
fn time_and_lastsave() {
    let mut d = Diff::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    d.run_matching(&["TIME"], |r| {
        let parts: Vec<i64> = r
            .as_array()
            .map(|a| a.iter().filter_map(|p| std::str::from_utf8(p.as_bytes()?).ok()?.parse().ok()).collect())
            .unwrap_or_default();
        matches!(parts[..], [secs, usec] if (secs - now).abs() <= 5 && (0..1_000_000).contains(&usec))
    });
    d.run_matching(&["LASTSAVE"], |r| {
        r.as_int().is_some_and(|t| (t - now).abs() <= 60)
    });
    d.run(&["TIME", "extra"]);
    d.run(&["LASTSAVE", "extra"]);
}

#[test]
fn shutdown_options_and_exit() {
    let mut d = Diff::new();
    d.run_all(&[
        &["SHUTDOWN", "nosuch"][..],
        &["SHUTDOWN", "ABORT"],
        &["SHUTDOWN", "NOSAVE", "SAVE"],
        &["SHUTDOWN", "ABORT", "NOW"],
        &["SHUTDOWN", "ABORT", "NOSAVE"],
    ]);
    // SHUTDOWN NOSAVE: no reply, the connection closes and the process exits.
    d.run_raw(&pipeline(&[&["SHUTDOWN", "NOSAVE", "NOW"]]));
    let deadline = Instant::now() + Duration::from_secs(10);
    while d.strata_server.is_running() || d.redis_server.is_running() {
        assert!(
            Instant::now() < deadline,
            "the servers did not exit after SHUTDOWN"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn shutdown_save_that_fails_keeps_the_server_running() {
    // As Redis: a failed final save refuses the shutdown ("Check logs."), FORCE exits anyway.
    let gone = TempDir::new("shutdown-gone");
    let mut server = Server::strata(&["--enable-protected-configs", "yes"]);
    let mut c = server.conn();
    c.call(&["CONFIG", "SET", "dir", gone.path().to_str().unwrap()]);
    std::fs::remove_dir_all(gone.path()).unwrap();
    let reply = c.call_decoded(&["SHUTDOWN", "SAVE"]);
    assert_eq!(
        reply.error_text(),
        Some(&b"ERR Errors trying to SHUTDOWN. Check logs."[..]),
        "{reply}"
    );
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
    assert!(server
        .log_text()
        .contains("Error trying to save the DB, can't exit."));
    c.send(&["SHUTDOWN", "SAVE", "FORCE"]);
    assert!(c.is_closed_within(Duration::from_secs(5)));
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.is_running() {
        assert!(
            Instant::now() < deadline,
            "strata did not exit after SHUTDOWN FORCE"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ------------------------------------------------------------------------------------------------
// DEBUG
// ------------------------------------------------------------------------------------------------

#[test]
fn debug_is_refused_unless_enabled() {
    let mut d = Diff::new();
    d.run_all(&[
        &["DEBUG", "SLEEP", "0"][..],
        &["DEBUG", "HELP"],
        &["DEBUG"],
        &["CONFIG", "GET", "enable-debug-command"],
    ]);
    let mut local = Diff::with_config(&["--enable-debug-command", "local"]);
    local.run(&["DEBUG", "SLEEP", "0"]);
}

/// The fields of a DEBUG OBJECT reply that do not depend on addresses or clocks.
fn debug_object_fields(r: &Reply) -> String {
    match r {
        Reply::Simple(line) => String::from_utf8_lossy(line)
            .split(' ')
            .filter(|f| {
                ["refcount:", "encoding:", "serializedlength:"]
                    .iter()
                    .any(|p| f.starts_with(p))
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}

#[test]
fn debug_object_sleep_and_active_expire() {
    let mut d = Diff::with_config(&["--enable-debug-command", "yes"]);
    d.run_all(&[
        &["DEBUG"][..],
        &["DEBUG", "nosuch"],
        &["DEBUG", "JMAP", "x"],
        &["DEBUG", "OBJECT"],
        &["DEBUG", "OBJECT", "nokey"],
        &["DEBUG", "OBJECT", "a", "b"],
        &["DEBUG", "SET-ACTIVE-EXPIRE"],
        &["DEBUG", "SLEEP"],
        &["DEBUG", "SLEEP", "0"],
        &["DEBUG", "SLEEP", "0.01"],
        &["DEBUG", "SLEEP", "x"],
        &["DEBUG", "ERROR", "MYERR something went wrong"],
    ]);
    // A pseudo-random text over a small alphabet: compressible, but not trivially.
    let mut seed = 7u32;
    let mixed: String = (0..300)
        .map(|_| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            ['a', 'b', 'c'][(seed >> 16) as usize % 3]
        })
        .collect();
    let values = [
        "v".to_string(),
        "12".to_string(),
        "9999".to_string(),
        "10000".to_string(),
        "-1".to_string(),
        "007".to_string(),
        "-12345678901".to_string(),
        "1099511627776".to_string(),
        "x".repeat(44),
        "x".repeat(45),
        "a".repeat(100),
        "ab".repeat(30),
        "abcdefghijklmnopqrstu".to_string(),
        "hello world, hello world! hello world, hello world!".to_string(),
        mixed,
        "The quick brown fox jumps over the lazy dog. ".repeat(40),
    ];
    for v in &values {
        d.run(&["SET", "k", v]);
        let (redis, strata) =
            d.run_matching(&["DEBUG", "OBJECT", "k"], |r| matches!(r, Reply::Simple(_)));
        assert_eq!(
            debug_object_fields(&redis),
            debug_object_fields(&strata),
            "value {v:?}"
        );
    }
    // With active expiry off, an expired key stays until it is touched.
    d.run(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"]);
    d.run(&["SET", "gone", "v", "PX", "50"]);
    std::thread::sleep(Duration::from_millis(300));
    d.run(&["DBSIZE"]);
    d.run(&["GET", "gone"]);
    d.run(&["DBSIZE"]);
    // SCAN deletes the expired keys it passes whose names match its pattern, and only those.
    for k in ["a-gone", "b-gone", "a-live"] {
        d.run(&["SET", k, "v"]);
    }
    d.run(&["PEXPIRE", "a-gone", "50"]);
    d.run(&["PEXPIRE", "b-gone", "50"]);
    std::thread::sleep(Duration::from_millis(300));
    d.run(&["DBSIZE"]);
    d.run(&["SCAN", "0", "MATCH", "a*", "COUNT", "1000"]);
    d.run(&["DBSIZE"]);
    d.run(&["SCAN", "0", "COUNT", "1000", "TYPE", "hash"]);
    d.run(&["DBSIZE"]);
    d.run(&["DEL", "a-live"]);
    d.run(&["DEBUG", "SET-ACTIVE-EXPIRE", "1"]);
    d.run(&["SET", "gone", "v", "PX", "50"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while int_of(&mut d.strata, &["DBSIZE"]) != 1 {
        assert!(Instant::now() < deadline, "active expiry did not resume");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn debug_sleep_suspends_only_its_connection() {
    // Strata-only: Redis blocks the whole server during DEBUG SLEEP; Strata parks one connection.
    let server = Server::strata(&["--enable-debug-command", "yes"]);
    let mut sleeper = server.conn();
    let mut other = server.conn();
    let start = Instant::now();
    sleeper.send(&["DEBUG", "SLEEP", "0.5"]);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(other.call(&["PING"]), b"+PONG\r\n");
    assert!(
        start.elapsed() < Duration::from_millis(400),
        "PING waited for DEBUG SLEEP"
    );
    assert_eq!(sleeper.read_reply(), b"+OK\r\n");
    assert!(start.elapsed() >= Duration::from_millis(500));
}

// ------------------------------------------------------------------------------------------------
// Output buffers, the push path, idle timeout (Strata only: Redis's timing differs)
// ------------------------------------------------------------------------------------------------

/// The CLIENT LIST fields of client `id`, or None once it is gone.
fn listed_client(admin: &mut Conn, id: i64) -> Option<Vec<(String, String)>> {
    let list = client_line(&admin.call_decoded(&["CLIENT", "LIST"]));
    list.lines()
        .map(client_fields)
        .find(|f| field(f, "id") == id.to_string())
}

/// Polls (bounded: 200 rounds of 50 ms) until `done` holds.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("never happened: {what}");
}

const BIG: usize = 100 * 1024;

/// A server with a `BIG`-byte value under `bigkey`.
fn server_with_bigkey(args: &[&str]) -> (Server, Conn) {
    let s = Server::strata(args);
    let mut admin = s.conn();
    let value = vec![b'v'; BIG];
    assert_eq!(admin.call(&[&b"SET"[..], b"bigkey", &value]), b"+OK\r\n");
    (s, admin)
}

/// Sends `rounds` writes of 50 pipelined `GET bigkey`s and reads nothing.
fn pipeline_gets_without_reading(c: &mut Conn, rounds: usize) {
    let batch = encode_command(&["GET", "bigkey"]).repeat(50);
    for _ in 0..rounds {
        c.send_raw(&batch);
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_client_that_does_not_read_is_closed_at_the_hard_output_limit() {
    let (s, mut admin) = server_with_bigkey(&[]);
    assert_eq!(
        admin.call(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 1mb 512kb 1"
        ]),
        b"+OK\r\n"
    );
    let mut slow = s.conn();
    let id = int_of(&mut slow, &["CLIENT", "ID"]);
    // 20 * 50 replies of 100 KB: far more than socket buffers plus the 1 MB limit hold.
    pipeline_gets_without_reading(&mut slow, 20);
    eventually("the slow reader is disconnected", || {
        listed_client(&mut admin, id).is_none()
    });
    assert!(slow.is_closed_within(Duration::from_secs(10)));
    eventually("the limit is logged", || {
        s.log_tail()
            .contains("scheduled to be closed ASAP for overcoming of output buffer limits")
    });
    // Everyone else is served as before.
    assert_eq!(admin.call(&["PING"]), b"+PONG\r\n");
}

#[test]
fn a_client_that_does_not_read_is_closed_after_the_soft_limit_seconds() {
    let (s, mut admin) = server_with_bigkey(&[]);
    // No hard limit: only staying above 256 KB for over a second closes the client, even though
    // the server adds nothing more while it waits for the client to read.
    assert_eq!(
        admin.call(&[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "normal 0 256kb 1"
        ]),
        b"+OK\r\n"
    );
    let mut slow = s.conn();
    let id = int_of(&mut slow, &["CLIENT", "ID"]);
    pipeline_gets_without_reading(&mut slow, 20);
    eventually("the slow reader is disconnected", || {
        listed_client(&mut admin, id).is_none()
    });
    assert!(slow.is_closed_within(Duration::from_secs(10)));
}

#[test]
fn pending_output_is_listed_and_delivered_in_order() {
    // Default limits (none for normal clients): a client that reads late gets everything, in order,
    // and CLIENT LIST shows what it has not read yet.
    let (s, mut admin) = server_with_bigkey(&[]);
    let mut slow = s.conn();
    let id = int_of(&mut slow, &["CLIENT", "ID"]);
    let mut sent = Vec::new();
    for i in 0..100 {
        sent.extend(encode_command(&["GET", "bigkey"]));
        sent.extend(encode_command(&["ECHO", &i.to_string()]));
    }
    slow.send_raw(&sent);
    eventually("pending output shows in CLIENT LIST", || {
        let f = listed_client(&mut admin, id).expect("the client is connected");
        let omem: u64 = field(&f, "omem").parse().unwrap();
        let queued: u64 =
            field(&f, "obl").parse::<u64>().unwrap() + field(&f, "oll").parse::<u64>().unwrap();
        let tot: u64 = field(&f, "tot-mem").parse().unwrap();
        omem > 0 && queued > 0 && tot > omem && field(&f, "events") == "rw"
    });
    let info = info_sections(&admin.call_decoded(&["INFO", "clients"]));
    let recent: u64 = info_field(&info, "client_recent_max_output_buffer")
        .unwrap()
        .parse()
        .unwrap();
    assert!(recent > 0);
    for i in 0..100 {
        let value = slow.read_reply();
        assert_eq!(
            value.len(),
            BIG + format!("${BIG}\r\n\r\n").len(),
            "reply {i}"
        );
        assert_eq!(slow.read_reply(), encode_bulk(i.to_string().as_bytes()));
    }
    eventually("nothing is pending once read", || {
        let f = listed_client(&mut admin, id).expect("the client is connected");
        field(&f, "omem") == "0" && field(&f, "oll") == "0" && field(&f, "obl") == "0"
    });
}

fn encode_bulk(b: &[u8]) -> Vec<u8> {
    let mut v = format!("${}\r\n", b.len()).into_bytes();
    v.extend_from_slice(b);
    v.extend_from_slice(b"\r\n");
    v
}

#[test]
fn client_kill_reaches_a_client_stuck_writing() {
    let (s, mut admin) = server_with_bigkey(&[]);
    let mut slow = s.conn();
    let id = int_of(&mut slow, &["CLIENT", "ID"]);
    pipeline_gets_without_reading(&mut slow, 4);
    eventually("the client has output pending", || {
        listed_client(&mut admin, id).is_some_and(|f| field(&f, "omem") != "0")
    });
    assert_eq!(
        admin.call(&["CLIENT", "KILL", "ID", &id.to_string()]),
        b":1\r\n"
    );
    eventually("the killed client is gone", || {
        listed_client(&mut admin, id).is_none()
    });
    // Reading what was already on its way, the client then sees the connection end.
    let (_, closed) = slow.read_until_quiet(Duration::from_millis(500));
    assert!(closed || slow.is_closed_within(Duration::from_secs(10)));
    // Later clients (which may get the same descriptor number) are untouched.
    let mut next = s.conn();
    assert_eq!(next.call(&["PING"]), b"+PONG\r\n");
    assert_eq!(
        admin.call(&["CLIENT", "KILL", "ID", &id.to_string()]),
        b":0\r\n"
    );
    assert_eq!(next.call(&["PING"]), b"+PONG\r\n");
}

#[test]
fn idle_clients_are_closed_after_timeout_but_not_while_a_command_runs() {
    let s = Server::strata(&["--enable-debug-command", "yes"]);
    // Connected before the setting changes: the new timeout applies to it too.
    let mut idle = s.conn();
    assert_eq!(idle.call(&["PING"]), b"+PONG\r\n");
    let mut busy = s.conn();
    let mut admin = s.conn();
    assert_eq!(admin.call(&["CONFIG", "SET", "timeout", "1"]), b"+OK\r\n");
    busy.send(&["DEBUG", "SLEEP", "2.5"]);
    assert!(idle.is_closed_within(Duration::from_secs(10)));
    // The sleeping command outlives the timeout and is still answered.
    assert_eq!(busy.read_reply(), b"+OK\r\n");
    assert!(busy.is_closed_within(Duration::from_secs(10)));
    // timeout 0 (the default) never closes anyone.
    let mut admin = s.conn();
    assert_eq!(admin.call(&["CONFIG", "SET", "timeout", "0"]), b"+OK\r\n");
    let mut quiet = s.conn();
    assert_eq!(quiet.call(&["PING"]), b"+PONG\r\n");
    assert!(!quiet.is_closed_within(Duration::from_millis(2500)));
    assert_eq!(quiet.call(&["PING"]), b"+PONG\r\n");
}

/// DEBUG PROTOCOL answers each RESP type byte for byte as redis-server does, in RESP2 and RESP3:
/// attributes and push messages come with the real reply that follows them (compared as raw
/// bytes of the whole exchange), and the errors (unknown type, push in RESP2) are Redis's.
#[test]
fn debug_protocol_matches_redis() {
    let types = [
        "string", "integer", "double", "bignum", "null", "array", "set", "map", "attrib", "push",
        "verbatim", "true", "false", "TRUE", "bogus",
    ];
    let exchange = |server: &Server, proto: &str| {
        let mut c = server.conn();
        c.call(&["HELLO", proto]);
        let mut bytes = Vec::new();
        for t in types {
            c.send(&["DEBUG", "PROTOCOL", t]);
            c.send(&["PING", "after"]);
            // Everything up to the PING's reply: the type's frames (attribute or push included).
            let mut got = Vec::new();
            while !got.ends_with(b"after\r\n") && !got.ends_with(b"+after\r\n") {
                got.extend(c.read_reply());
            }
            bytes.extend(got);
        }
        bytes.extend(c.call(&["DEBUG", "PROTOCOL"]));
        bytes
    };
    let strata = Server::strata(&["--enable-debug-command", "yes", "--threads", "2"]);
    let redis = Server::redis(&["--enable-debug-command", "yes"]);
    for proto in ["2", "3"] {
        assert_eq!(
            String::from_utf8_lossy(&exchange(&strata, proto)),
            String::from_utf8_lossy(&exchange(&redis, proto)),
            "RESP{proto}"
        );
    }
}

/// How many changes each command counts (INFO `rdb_changes_since_last_save`, what `save` points
/// see) matches Redis: per element for the collection writes (SADD of three new members counts
/// three, LTRIM the elements it removed, BITFIELD its writes that changed a field), once for a
/// rename or move between two keys, once for SWAPDB (of a database with itself too), nothing for a
/// write that changes nothing (LTRIM keeping the whole list, though announced) or a failed
/// command, and nothing for a key that expired on the way.
#[test]
fn what_counts_as_a_change_matches_redis() {
    let mut d = Diff::new();
    d.run(&["RPUSH", "l", "a"]);
    d.run(&["ZADD", "z", "1", "m"]);
    let changes = |c: &mut Conn| info_int(c, "persistence", "rdb_changes_since_last_save");
    for cmd in [
        &["SWAPDB", "0", "0"][..],
        &["SWAPDB", "0", "1"],
        &["LREM", "l", "0", "nothere"],
        &["LINSERT", "l", "AFTER", "nothere", "x"],
        &["ZADD", "z", "1", "m"],
        &["ZINCRBY", "z", "0", "m"],
        &["LTRIM", "l", "x", "1"],
        &["LTRIM", "l", "0", "-1"],
        &["EXPIRE", "missing", "100"],
        &["SET", "k", "v"],
        &["SADD", "s", "a", "b", "c"],
        &["SADD", "s", "a", "d"],
        &["SREM", "s", "a", "b", "zz"],
        &["SPOP", "s", "5"],
        &["SADD", "s", "a"],
        &["SREM", "s", "a"],
        &["HSET", "h", "a", "1", "b", "2", "c", "3"],
        &["HSET", "h", "a", "1"],
        &["HMSET", "h", "e", "5", "f", "6"],
        &["HDEL", "h", "a", "b", "zz"],
        &["LPUSH", "l", "a", "b", "c", "d", "e"],
        &["RPUSHX", "l", "f", "g"],
        &["LPOP", "l", "2"],
        &["LTRIM", "l", "1", "-2"],
        &["LREM", "l", "0", "c"],
        &["LMOVE", "l", "l2", "LEFT", "RIGHT"],
        &["RPOPLPUSH", "l2", "l3"],
        &["LMPOP", "1", "l", "RIGHT", "COUNT", "10"],
        &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
        &["ZADD", "z", "CH", "5", "a", "6", "d"],
        &["ZINCRBY", "newz", "2", "m"],
        &["ZREM", "z", "a", "b"],
        &["ZPOPMIN", "z", "2"],
        &["ZREMRANGEBYSCORE", "z", "-inf", "+inf"],
        &["SET", "r", "1"],
        &["RENAME", "r", "r2"],
        &["RENAMENX", "r2", "r3"],
        &["MOVE", "r3", "2"],
        &["PFADD", "p", "a", "b", "c"],
        &["PFADD", "p", "a", "b", "c", "d"],
        &["RPUSH", "sl", "3", "1", "2"],
        &["SORT", "sl", "STORE", "sd"],
        &[
            "SORT", "sl", "BY", "nosort", "GET", "#", "GET", "nokey*", "STORE", "sd",
        ],
        &["SETBIT", "b", "3", "1"],
        &["SETBIT", "b", "3", "1"],
        &["SETBIT", "b", "100", "0"],
        &["BITFIELD", "bf", "SET", "u8", "0", "2"],
        &[
            "BITFIELD", "bf", "SET", "u8", "0", "2", "INCRBY", "u8", "0", "0",
        ],
        &[
            "BITFIELD", "bf", "SET", "u8", "0", "2", "SET", "u8", "8", "3", "INCRBY", "u8", "0",
            "1",
        ],
        &["GEOADD", "g", "1", "1", "a", "2", "2", "b"],
        &[
            "GEOSEARCHSTORE",
            "gs",
            "g",
            "FROMLONLAT",
            "1",
            "1",
            "BYRADIUS",
            "10000",
            "km",
        ],
        &["SET", "ex", "v", "PX", "1"],
        &["(sleep)"],
        &["DEL", "ex"],
        &["MSET", "m1", "1", "m2", "2", "m3", "3"],
        &["DEL", "m1", "m2", "nokey"],
        &["FLUSHALL"],
    ] {
        if cmd[0] == "(sleep)" {
            std::thread::sleep(std::time::Duration::from_millis(20));
            continue;
        }
        let before = (changes(&mut d.redis), changes(&mut d.strata));
        if cmd[0] == "SPOP" {
            d.run_unordered(cmd);
        } else {
            d.run(cmd);
        }
        let after = (changes(&mut d.redis), changes(&mut d.strata));
        assert_eq!(
            after.1 - before.1,
            after.0 - before.0,
            "{cmd:?}: redis counted {} changes, strata {}",
            after.0 - before.0,
            after.1 - before.1
        );
    }
}

/// A read of keys on several shards that follows another client's (MGET) at once counts each key
/// it looks up once: the optimistic attempt is not abandoned, and rerun, over the first read's
/// locks, released as its reply went out (an abandoned attempt had counted its misses twice).
#[test]
fn a_read_right_after_another_counts_each_lookup_once() {
    let server = Server::strata(&["--threads", "3"]);
    let mut reader = server.conn();
    // Several clients, so some live on another thread than the reader (the kernel spreads them).
    let mut clients: Vec<Conn> = (0..6).map(|_| server.conn()).collect();
    let misses = |c: &mut Conn| info_int(c, "stats", "keyspace_misses");
    let keys = ["a", "b", "c", "{t}a", "{t}b", "h", "l", "s", "z"];
    let mget: Vec<&str> = ["MGET"].into_iter().chain(keys).collect();
    let before = misses(&mut reader);
    let rounds = 600;
    for i in 0..rounds {
        reader.call(&mget);
        // PFCOUNT locks its keys exclusively, so MGET's shared locks stand in its way.
        let n = clients.len();
        clients[i % n].call(&["PFCOUNT", "c", "c", "h"]);
    }
    let rounds = rounds as i64;
    assert_eq!(
        misses(&mut reader) - before,
        rounds * (keys.len() as i64 + 3)
    );
}
