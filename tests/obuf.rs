//! `client-output-buffer-limit` as Redis enforces it, side by side with redis-server: the soft limit
//! runs out even when the traffic that filled the buffer has stopped, a client closed at its hard
//! limit gives its memory back at once (INFO `used_memory` is exact), and a huge random pick
//! (HRANDFIELD, SRANDMEMBER, ZRANDMEMBER with a negative count) stops at the limit instead of
//! building its whole reply. Each is one of Redis 7.0.15's own `obuf-limits` tests, which its
//! suite only runs against a server it starts itself.

use std::time::{Duration, Instant};

use crate::harness::{Conn, Kind, Server};

fn set_limit(conn: &mut Conn, limit: &str) {
    assert_eq!(
        conn.call(&["CONFIG", "SET", "client-output-buffer-limit", limit]),
        b"+OK\r\n"
    );
}

/// The CLIENT LIST line of the client named `name`, if it is connected.
fn client_line(admin: &mut Conn, name: &str) -> Option<String> {
    let reply = admin.call_decoded(&["CLIENT", "LIST"]);
    let text = String::from_utf8_lossy(reply.as_bytes().expect("CLIENT LIST is a bulk string"))
        .into_owned();
    let needle = format!(" name={name} ");
    text.lines()
        .find(|l| l.contains(&needle))
        .map(str::to_owned)
}

fn field(line: &str, name: &str) -> u64 {
    line.split(' ')
        .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric {name} in {line}"))
}

/// A subscriber that stops reading is over the soft limit; the publishing stops; the soft limit's
/// time runs out with no more traffic and the subscriber is disconnected then — not before, not
/// never. (Strata's writer, waiting on the full socket, only re-checked the limit when output
/// moved, so a burst that stopped left the client connected for good.)
#[test]
fn the_soft_output_limit_runs_out_after_the_traffic_has_stopped() {
    for server in [Server::redis(&[]), Server::strata(&["--threads", "2"])] {
        let name = server.kind().name();
        let mut admin = server.conn();
        set_limit(&mut admin, "pubsub 0 100000 2");
        let mut sub = server.conn();
        assert_eq!(sub.call(&["CLIENT", "SETNAME", "slowsub"]), b"+OK\r\n");
        sub.send(&["SUBSCRIBE", "foo"]);
        sub.read_reply();
        // Publish until the subscriber's pending output is well past the soft limit (the socket
        // buffers between us take the first megabytes, and may still take a little once it is
        // past: that must not bring it back under), then stop.
        let message = "x".repeat(64 * 1024);
        let mut over_at = None;
        for _ in 0..2000 {
            assert_eq!(admin.call(&["PUBLISH", "foo", &message]), b":1\r\n");
            let line = client_line(&mut admin, "slowsub")
                .unwrap_or_else(|| panic!("{name}: cut off while under its soft limit's time"));
            if field(&line, "omem") > 500_000 {
                over_at = Some(Instant::now());
                break;
            }
        }
        let over_at = over_at.unwrap_or_else(|| panic!("{name}: the output never grew"));
        // No more traffic. Redis's test allows the limit's time plus 1.5 s.
        let deadline = over_at + Duration::from_millis(2000 + 3000);
        let gone = loop {
            if client_line(&mut admin, "slowsub").is_none() {
                break Some(over_at.elapsed());
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let after = gone.unwrap_or_else(|| {
            panic!("{name}: still connected well past the soft limit's 2 seconds")
        });
        assert!(
            after >= Duration::from_millis(1500),
            "{name}: disconnected after {after:?}, before the soft limit's 2 seconds ran out"
        );
        assert!(sub.is_closed_within(Duration::from_secs(5)), "{name}");
    }
}

/// A reply past the hard limit closes the client without sending any of it, and the memory it
/// took is given back at once: INFO `used_memory` is back within 10 KB of where it was (Redis's
/// own threshold). Strata counted allocations per thread and published them in 64 KiB steps, so
/// the reading was off by up to that much per thread.
#[test]
fn a_client_closed_at_its_hard_limit_gives_its_memory_back_at_once() {
    for server in [Server::redis(&[]), Server::strata(&["--threads", "2"])] {
        let name = server.kind().name();
        let mut r = server.conn();
        r.call(&["CONFIG", "SET", "latency-tracking", "no"]);
        set_limit(&mut r, "normal 100000 0 0");
        let item = "x".repeat(1000);
        for _ in 0..150 {
            r.call(&["LPUSH", "mylist", &item]);
        }
        let before = r.info_u64("memory", "used_memory");
        let mut big = server.conn();
        assert_eq!(big.call(&["CLIENT", "SETNAME", "mybiglist"]), b"+OK\r\n");
        big.send(&["LRANGE", "mylist", "0", "-1"]);
        assert!(
            big.is_closed_within(Duration::from_secs(10)),
            "{name}: the client is closed at its hard limit"
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while client_line(&mut r, "mybiglist").is_some() {
            assert!(Instant::now() < deadline, "{name}: still listed");
            std::thread::sleep(Duration::from_millis(10));
        }
        let after = r.info_u64("memory", "used_memory");
        assert!(
            after < before + 10_000,
            "{name}: used_memory {after} after the client was closed, {before} before"
        );
    }
}

/// HRANDFIELD, SRANDMEMBER and ZRANDMEMBER with a huge negative count, for a client with a hard
/// output limit: the reply is cut where it passes the limit and the client closed, as Redis
/// 7.0.15 does, and the server goes on serving (the pick stops there: it neither runs a billion
/// times nor holds the reply). Without a limit Strata refuses such a count (`ERR value is out of
/// range`) where Redis would try to build a reply of gigabytes.
#[test]
fn a_huge_random_pick_stops_at_the_output_limit() {
    let picks: [(&[&str], &[&str]); 3] = [
        (
            &["HSET", "myhash", "a", "b"],
            &["HRANDFIELD", "myhash", "-999999999"],
        ),
        (
            &["SADD", "myset", "a"],
            &["SRANDMEMBER", "myset", "-999999999"],
        ),
        (
            &["ZADD", "myzset", "1", "a"],
            &["ZRANDMEMBER", "myzset", "-999999999"],
        ),
    ];
    for server in [Server::redis(&[]), Server::strata(&["--threads", "2"])] {
        let name = server.kind().name();
        let mut admin = server.conn();
        set_limit(&mut admin, "normal 1000000 0 0");
        for (fill, pick) in picks {
            admin.call(fill);
            let mut c = server.conn();
            let started = Instant::now();
            c.send(pick);
            assert!(
                c.is_closed_within(Duration::from_secs(30)),
                "{name}: {pick:?} closes the client at its limit"
            );
            assert_eq!(admin.call(&["PING"]), b"+PONG\r\n", "{name}");
            if server.kind() == Kind::Strata {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "{name}: {pick:?} stopped at the limit"
                );
            }
        }
    }
    // No limit: refused rather than built (Redis would build it; not run against Redis here).
    let strata = Server::strata(&["--threads", "2"]);
    let mut c = strata.conn();
    for (fill, pick) in picks {
        c.call(fill);
        assert_eq!(c.call(pick), b"-ERR value is out of range\r\n");
    }
}

/// A client may send a whole pipeline before it reads a reply (redis-py does): 16 MB of GETs,
/// more than the socket buffers between client and server hold either way, whose replies (75 MB)
/// the client reads only once it has sent them all. Redis keeps reading and buffers the replies;
/// a server that stopped reading until its replies had left would leave both sides waiting for
/// ever (Strata did: the write below timed out).
#[test]
fn a_pipeline_larger_than_the_socket_buffers_is_read_before_its_replies_are() {
    use std::io::{Read, Write};
    const N: usize = 700_000;
    for server in [
        Server::redis(&[]),
        Server::strata(&["--threads", "1"]),
        Server::strata(&["--threads", "2"]),
    ] {
        let name = server.kind().name();
        let value = "v".repeat(100);
        assert_eq!(server.conn().call(&["SET", "k", &value]), b"+OK\r\n");
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port())).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let get = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n";
        let commands: Vec<u8> = get.iter().copied().cycle().take(get.len() * N).collect();
        stream
            .write_all(&commands)
            .unwrap_or_else(|e| panic!("{name}: the pipeline was not read: {e}"));
        let reply = format!("$100\r\n{value}\r\n");
        let mut replies = vec![0u8; reply.len() * N];
        stream
            .read_exact(&mut replies)
            .unwrap_or_else(|e| panic!("{name}: the replies did not all come: {e}"));
        assert!(
            replies.chunks(reply.len()).all(|r| r == reply.as_bytes()),
            "{name}: a reply differs"
        );
    }
}
