//! What a server listens on: `unixsocket`/`unixsocketperm` (Unix-socket clients are served as TCP
//! ones are, shown as `<path>:0`, with Redis's log lines and the file removed at shutdown), `bind`
//! with several addresses and optional (`-`) ones, and `port 0`. Each behaviour is held against
//! redis-server's.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{encode_command, frame_len, free_port, Kind, Reply, Server, TempDir, TIMEOUT};

/// A raw RESP client over a Unix socket.
struct UnixConn {
    stream: UnixStream,
    pending: Vec<u8>,
}

impl UnixConn {
    fn connect(path: &Path) -> UnixConn {
        let stream = UnixStream::connect(path)
            .unwrap_or_else(|e| panic!("connect to {}: {e}", path.display()));
        stream.set_read_timeout(Some(TIMEOUT)).unwrap();
        UnixConn {
            stream,
            pending: Vec::new(),
        }
    }

    fn send(&mut self, args: &[&str]) {
        self.stream.write_all(&encode_command(args)).unwrap();
    }

    fn read_reply(&mut self) -> Vec<u8> {
        loop {
            if let Some(n) = frame_len(&self.pending).unwrap() {
                return self.pending.drain(..n).collect();
            }
            let mut buf = [0u8; 4096];
            let n = self.stream.read(&mut buf).expect("read a reply");
            assert!(n > 0, "connection closed before a reply");
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    fn call(&mut self, args: &[&str]) -> Vec<u8> {
        self.send(args);
        self.read_reply()
    }
}

/// `redis-cli` with `args`, stdout as text.
fn redis_cli(args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli (install redis-tools)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The value of `field` in a CLIENT LIST/INFO line.
fn field<'a>(line: &'a str, field: &str) -> &'a str {
    line.split(' ')
        .find_map(|kv| kv.strip_prefix(field)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {field} in {line:?}"))
}

/// The commands run the same way over the socket and over TCP: data of several types, a
/// transaction, a blocking pop served by another client, keys on every shard.
const SCRIPT: &[&[&str]] = &[
    &["FLUSHALL"],
    &["SET", "a", "1"],
    &["INCRBY", "a", "41"],
    &["GET", "a"],
    &["RPUSH", "l", "x", "y", "z"],
    &["LRANGE", "l", "0", "-1"],
    &["HSET", "h", "f", "v", "g", "w"],
    &["HGETALL", "h"],
    &["ZADD", "z", "1", "m", "2", "n"],
    &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
    &["MSET", "k1", "1", "k2", "2", "k3", "3", "{t}k4", "4"],
    &["MGET", "k1", "k2", "k3", "{t}k4", "nosuch"],
    &["MULTI"],
    &["INCR", "k1"],
    &["LPOP", "l"],
    &["EXEC"],
    &["DBSIZE"],
    &["GET"],
    &["NOSUCHCOMMAND"],
    &["PING", "over the socket"],
];

/// Starts `kind` with `--unixsocket <dir>/s.sock --unixsocketperm 700` besides its TCP port.
fn with_socket(kind: Kind, dir: &TempDir) -> (Server, PathBuf) {
    let path = dir.path().join(format!("{}.sock", kind.name()));
    let arg = path.to_str().unwrap();
    let server = Server::start(kind, &["--unixsocket", arg, "--unixsocketperm", "700"]);
    (server, path)
}

#[test]
fn a_unix_socket_client_gets_what_a_tcp_client_gets_as_from_redis() {
    let dir = TempDir::new("unixsocket");
    let mut replies: Vec<Vec<Vec<u8>>> = Vec::new();
    for kind in [Kind::Redis, Kind::Strata] {
        let (server, path) = with_socket(kind, &dir);
        let who = kind.name();
        // unixsocketperm: the file's mode.
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{who}");
        let log = server.wait_for_log("ready to accept connections at");
        assert!(
            log.contains(&format!(
                "The server is now ready to accept connections at {}",
                path.display()
            )),
            "{who}: {log}"
        );
        let mut unix = UnixConn::connect(&path);
        let mut over_unix = Vec::new();
        let mut over_tcp = Vec::new();
        let mut tcp = server.conn();
        for cmd in SCRIPT {
            over_unix.push(unix.call(cmd));
        }
        for cmd in SCRIPT {
            over_tcp.push(tcp.call(cmd));
        }
        assert_eq!(over_unix, over_tcp, "{who}: the socket and TCP differ");
        replies.push(over_unix);

        // A client over the socket waits in BLPOP; one over TCP serves it; and pub/sub crosses.
        unix.send(&["BLPOP", "queue", "5"]);
        let deadline = Instant::now() + TIMEOUT;
        while tcp.info_u64("clients", "blocked_clients") != 1 {
            assert!(Instant::now() < deadline, "{who}: BLPOP never blocked");
            std::thread::sleep(Duration::from_millis(10));
        }
        tcp.call(&["RPUSH", "queue", "job"]);
        assert_eq!(
            unix.read_reply(),
            b"*2\r\n$5\r\nqueue\r\n$3\r\njob\r\n",
            "{who}"
        );
        unix.call(&["SUBSCRIBE", "news"]);
        assert_eq!(tcp.call(&["PUBLISH", "news", "hi"]), b":1\r\n", "{who}");
        assert_eq!(
            unix.read_reply(),
            b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n",
            "{who}"
        );

        // CLIENT LIST names the socket on both ends, with flag U; CLIENT INFO the same.
        let mut other = UnixConn::connect(&path);
        let info = other.call(&["CLIENT", "INFO"]);
        let info = String::from_utf8(Reply::decode(&info).as_bytes().unwrap().to_vec()).unwrap();
        let socket_addr = format!("{}:0", path.display());
        assert_eq!(field(&info, "addr"), socket_addr, "{who}: {info}");
        assert_eq!(field(&info, "laddr"), socket_addr, "{who}: {info}");
        assert_eq!(field(&info, "flags"), "U", "{who}: {info}");
        let list = Reply::decode(&tcp.call(&["CLIENT", "LIST"]));
        let list = String::from_utf8(list.as_bytes().unwrap().to_vec()).unwrap();
        let tcp_line = list
            .lines()
            .find(|l| field(l, "cmd") == "client|list")
            .unwrap();
        assert!(field(tcp_line, "addr").starts_with("127.0.0.1:"), "{who}");
        assert!(!field(tcp_line, "flags").contains('U'), "{who}");
        // CLIENT KILL by that address closes the socket's clients.
        let killed = tcp.call(&["CLIENT", "KILL", "ADDR", &socket_addr]);
        assert_eq!(killed, b":2\r\n", "{who}");

        // redis-cli -s: the same answers as over TCP.
        let sock = path.to_str().unwrap();
        let port = server.port().to_string();
        for cmd in [
            &["GET", "a"][..],
            &["LRANGE", "l", "0", "-1"],
            &["HLEN", "h"],
        ] {
            let mut via_socket = vec!["-s", sock];
            via_socket.extend_from_slice(cmd);
            let mut via_tcp = vec!["-p", port.as_str()];
            via_tcp.extend_from_slice(cmd);
            let (a, b) = (redis_cli(&via_socket), redis_cli(&via_tcp));
            assert!(!a.is_empty(), "{who}: redis-cli -s answered nothing");
            assert_eq!(a, b, "{who}: redis-cli {cmd:?}");
        }

        // SHUTDOWN over the socket: the file is removed, as Redis logs it.
        let mut server = server;
        let mut last = UnixConn::connect(&path);
        last.send(&["SHUTDOWN", "NOSAVE"]);
        assert!(server.wait_exit(TIMEOUT).is_some(), "{who}: did not exit");
        assert!(!path.exists(), "{who}: socket file left behind");
        let log = server.log_text();
        assert!(
            log.contains("Removing the unix socket file."),
            "{who}: {log}"
        );
    }
    assert_eq!(
        replies[0], replies[1],
        "Strata's replies differ from Redis's"
    );
}

/// Spawns `kind` with exactly `args` (no port of the harness's), its output to `<dir>/<kind>.log`.
fn spawn_raw(kind: Kind, args: &[&str], dir: &Path) -> (Child, PathBuf) {
    let log = dir.join(format!("{}.log", kind.name()));
    let out = std::fs::File::create(&log).unwrap();
    let mut cmd = match kind {
        Kind::Strata => Command::new(env!("CARGO_BIN_EXE_strata")),
        Kind::Redis => {
            let mut c = Command::new("redis-server");
            c.args(["--save", "", "--appendonly", "no"]);
            c
        }
    };
    let child = cmd
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .expect("spawn server");
    (child, log)
}

/// Waits (bounded) for `child` to exit; kills it and fails if it does not.
fn exit_code(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("server did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The messages of a log (what follows the level mark), for comparing servers' lines.
fn messages(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.get(l.find(':')? + 28..).map(str::to_string))
        .collect()
}

#[test]
fn port_0_listens_on_the_socket_alone_and_nowhere_is_fatal() {
    let dir = TempDir::new("port0");
    for kind in [Kind::Redis, Kind::Strata] {
        let who = kind.name();
        let path = dir.path().join(format!("{who}.sock"));
        let (mut child, log) = spawn_raw(
            kind,
            &["--port", "0", "--unixsocket", path.to_str().unwrap()],
            dir.path(),
        );
        let deadline = Instant::now() + TIMEOUT;
        while !path.exists() {
            assert!(Instant::now() < deadline, "{who}: no socket file");
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut c = loop {
            match UnixStream::connect(&path) {
                Ok(_) => break UnixConn::connect(&path),
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("{who}: {e}"),
            }
        };
        assert_eq!(c.call(&["PING"]), b"+PONG\r\n", "{who}");
        assert_eq!(
            c.call(&["CONFIG", "GET", "port"]),
            b"*2\r\n$4\r\nport\r\n$1\r\n0\r\n",
            "{who}"
        );
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            text.contains("Running mode=standalone, port=0."),
            "{who}: {text}"
        );
        assert!(
            !text.contains("Ready to accept connections\n"),
            "{who}: {text}"
        );
        c.send(&["SHUTDOWN", "NOSAVE"]);
        assert_eq!(exit_code(&mut child), Some(0), "{who}");
        assert!(!path.exists(), "{who}: socket file left behind");

        // Neither TCP nor a socket: Redis's line, exit 1.
        let (mut child, log) = spawn_raw(kind, &["--port", "0"], dir.path());
        assert_eq!(exit_code(&mut child), Some(1), "{who}");
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            text.contains("# Configured to not listen anywhere, exiting."),
            "{who}: {text}"
        );
    }
}

/// `bind` with several addresses: an optional one (`-addr`) that is not on this host is skipped
/// with Redis's warning, a required one is fatal; a socket path that cannot be bound is fatal too.
#[test]
fn bind_skips_optional_addresses_and_fails_on_required_ones_as_redis() {
    let dir = TempDir::new("bind");
    // 198.51.100.77 (TEST-NET-2) is not an address of this host.
    let mut logs = Vec::new();
    let port = free_port().to_string();
    for kind in [Kind::Redis, Kind::Strata] {
        let who = kind.name();
        let s = Server::start(kind, &["--bind", "127.0.0.1 -198.51.100.77"]);
        let log = s.wait_for_log("Server initialized");
        let want = format!(
            "# Warning: Could not create server TCP listening socket 198.51.100.77:{}: bind: Cannot assign requested address",
            s.port()
        );
        assert!(log.contains(&want), "{who}: {log}");
        assert_eq!(s.conn().call(&["PING"]), b"+PONG\r\n", "{who}");

        let (mut child, log) = spawn_raw(
            kind,
            &["--port", &port, "--bind", "127.0.0.1 198.51.100.77"],
            dir.path(),
        );
        assert_eq!(exit_code(&mut child), Some(1), "{who}");
        let text = std::fs::read_to_string(&log).unwrap();
        let tail: Vec<String> = messages(&text)
            .into_iter()
            .filter(|m| m.contains("198.51.100.77") || m.contains("aborting"))
            .collect();
        logs.push(tail);

        let bad = dir.path().join("no/such/dir/s.sock");
        let (mut child, log) = spawn_raw(
            kind,
            &["--port", &port, "--unixsocket", bad.to_str().unwrap()],
            dir.path(),
        );
        assert_eq!(exit_code(&mut child), Some(1), "{who}");
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(
            text.contains("# Failed opening Unix socket: bind: No such file or directory"),
            "{who}: {text}"
        );
    }
    assert_eq!(logs[0], logs[1]);
    assert_eq!(logs[1].len(), 2, "{:?}", logs[1]);
}

/// CONFIG SET port and bind rebind at once, as Redis 7 does: the new port answers as soon as the
/// reply comes, a port or address that cannot be bound fails with Redis's error and leaves the
/// server where it was.
#[test]
fn config_set_port_and_bind_rebind_while_running_as_redis() {
    let blocker = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = blocker.local_addr().unwrap().port().to_string();
    let mut replies = Vec::new();
    for kind in [Kind::Redis, Kind::Strata] {
        let who = kind.name();
        let s = Server::start(kind, &[]);
        let mut c = s.conn();
        let new_port = free_port();
        let mut got = Vec::new();
        got.push(c.call(&["CONFIG", "SET", "port", &new_port.to_string()]));
        // The old port is closed, the new one answers at once.
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", s.port())).is_err(),
            "{who}"
        );
        let mut moved = crate::harness::Conn::connect(new_port, who);
        got.push(moved.call(&["PING"]));
        // A port in use: refused, and the server stays on its port.
        got.push(moved.call(&["CONFIG", "SET", "port", &taken]));
        assert_eq!(
            moved.call(&["CONFIG", "GET", "port"]),
            crate::harness::encode_command(&["port", &new_port.to_string()]),
            "{who}"
        );
        let mut again = crate::harness::Conn::connect(new_port, who);
        got.push(again.call(&["PING"]));
        // An address that cannot be bound: refused, bind unchanged.
        got.push(again.call(&["CONFIG", "SET", "bind", "999.999.999.999"]));
        got.push(again.call(&["CONFIG", "GET", "bind"]));
        // Optional addresses that are not here are skipped.
        got.push(again.call(&["CONFIG", "SET", "bind", "127.0.0.1 -198.51.100.77"]));
        got.push(crate::harness::Conn::connect(new_port, who).call(&["PING"]));
        got.push(again.call(&["CONFIG", "SET", "port", "99999"]));
        replies.push(got);
        // The connections made before a rebind stay.
        assert_eq!(c.call(&["PING"]), b"+PONG\r\n", "{who}");
        let log = s.log_text();
        assert!(
            log.contains("Could not create server TCP listening socket 999.999.999.999:"),
            "{who}: {log}"
        );
        c.send(&["SHUTDOWN", "NOSAVE"]);
    }
    drop(blocker);
    assert_eq!(replies[0], replies[1]);
}

/// The first non-loopback IPv4 address of this host, if any.
fn non_loopback_addr() -> Option<std::net::IpAddr> {
    // Routing a datagram socket toward any outside address picks the host's own address for it.
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    probe.connect("198.51.100.77:9").ok()?;
    let ip = probe.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// Redis's default `bind` (`* -::*`) and protected mode: with no password, a client from
/// another address than the loopback is told DENIED and disconnected, whatever `bind` says; a
/// password, or `protected-mode no`, lets it in.
#[test]
fn protected_mode_turns_away_outside_clients_without_a_password_as_redis() {
    let Some(ip) = non_loopback_addr() else {
        return;
    };
    let mut seen = Vec::new();
    for kind in [Kind::Redis, Kind::Strata] {
        let who = kind.name();
        // The harness binds 127.0.0.1; listen everywhere instead, as the default does.
        let s = Server::start(kind, &["--bind", "* -::*"]);
        let mut local = s.conn();
        let mut got = vec![local.call(&["CONFIG", "GET", "bind"])];
        let outside = |port: u16| {
            let stream = std::net::TcpStream::connect((ip, port)).unwrap();
            stream.set_read_timeout(Some(TIMEOUT)).unwrap();
            stream
        };
        // Told at once, before sending anything (sent input left unread would make the close a
        // reset, which may drop the text).
        let mut denied = outside(s.port());
        let mut text = Vec::new();
        denied.read_to_end(&mut text).unwrap();
        got.push(text);
        got.push(local.call(&["CONFIG", "SET", "requirepass", "secret"]));
        let mut allowed = outside(s.port());
        allowed.write_all(b"AUTH secret\r\nPING\r\n").unwrap();
        let mut buf = [0u8; 64];
        let mut text = Vec::new();
        while !text.ends_with(b"+PONG\r\n") {
            let n = allowed.read(&mut buf).unwrap();
            assert!(n > 0, "{who}: closed");
            text.extend_from_slice(&buf[..n]);
        }
        got.push(text);
        local.call(&["AUTH", "secret"]);
        got.push(local.call(&["CONFIG", "SET", "requirepass", "", "protected-mode", "no"]));
        let mut open = outside(s.port());
        open.write_all(b"PING\r\n").unwrap();
        let n = open.read(&mut buf).unwrap();
        got.push(buf[..n].to_vec());
        assert!(
            local.info_u64("stats", "rejected_connections") >= 1,
            "{who}"
        );
        seen.push(got);
    }
    assert_eq!(seen[0], seen[1]);
    assert!(seen[1][1].starts_with(b"-DENIED Redis is running in protected mode"));
}
