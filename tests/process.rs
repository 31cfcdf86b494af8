//! The process's outer shell besides the log and the listeners: `oom-score-adj` (the Linux OOM
//! score written as Redis writes it), `supervised` (systemd's sd_notify datagrams, received here
//! on a socket the test binds), and SIGHUP (the log file opened again after a rotation). Where
//! Redis acts too, its behaviour is the reference.

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{free_port, Kind, Server, TempDir, TIMEOUT};

fn oom_score(pid: u32) -> i64 {
    std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj"))
        .expect("read oom_score_adj")
        .trim()
        .parse()
        .unwrap()
}

fn set_oom_score(pid: u32, v: i64) -> bool {
    std::fs::write(format!("/proc/{pid}/oom_score_adj"), format!("{v}\n")).is_ok()
}

#[test]
fn oom_score_adj_moves_the_processes_score_as_redis_does() {
    if !std::path::Path::new("/proc/self/oom_score_adj").exists() {
        return;
    }
    let mut seen = Vec::new();
    for kind in [Kind::Redis, Kind::Strata] {
        let s = Server::start(kind, &[]);
        let pid = s.pid();
        let mut c = s.conn();
        // Lowering a score needs privileges: start from one the test can raise from.
        let base = oom_score(pid) + 22;
        if !set_oom_score(pid, base) {
            return;
        }
        let mut scores = Vec::new();
        let mut replies = Vec::new();
        let mut run = |c: &mut crate::harness::Conn, args: &[&str]| replies.push(c.call(args));
        run(
            &mut c,
            &[
                "CONFIG",
                "SET",
                "oom-score-adj-values",
                "9 9 9",
                "oom-score-adj",
                "yes",
            ],
        );
        scores.push(oom_score(pid) - base);
        run(
            &mut c,
            &["CONFIG", "SET", "oom-score-adj-values", "15 20 30"],
        );
        scores.push(oom_score(pid) - base);
        run(&mut c, &["CONFIG", "SET", "oom-score-adj", "absolute"]);
        scores.push(oom_score(pid));
        run(&mut c, &["CONFIG", "SET", "oom-score-adj", "relative"]);
        run(&mut c, &["CONFIG", "GET", "oom-score-adj"]);
        scores.push(oom_score(pid) - base);
        run(
            &mut c,
            &["CONFIG", "SET", "oom-score-adj-values", "1 2 5000"],
        );
        run(
            &mut c,
            &["CONFIG", "SET", "oom-score-adj-values", "-2001 0 0"],
        );
        run(&mut c, &["CONFIG", "SET", "oom-score-adj", "no"]);
        scores.push(oom_score(pid) - base);
        // Off: CONFIG SET of the values leaves the score alone.
        set_oom_score(pid, base + 3);
        run(&mut c, &["CONFIG", "SET", "oom-score-adj-values", "7 7 7"]);
        scores.push(oom_score(pid) - base);
        run(&mut c, &["CONFIG", "GET", "oom-score-adj-values"]);
        assert_eq!(scores, [9, 15, 15, 15, 0, 3], "{}", kind.name());
        seen.push(replies);
    }
    assert_eq!(seen[0], seen[1]);

    // At start-up, from the configuration.
    let s = Server::strata(&[
        "--oom-score-adj",
        "absolute",
        "--oom-score-adj-values",
        "7 8 9",
    ]);
    assert_eq!(oom_score(s.pid()), 7);
}

/// The datagrams a server sends to `NOTIFY_SOCKET` from its start to its SHUTDOWN.
fn notifications(
    kind: Kind,
    dir: &TempDir,
    supervised: &str,
    socket_env: bool,
) -> (Vec<String>, String) {
    let path = dir
        .path()
        .join(format!("{}-{supervised}-{socket_env}.notify", kind.name()));
    let _ = std::fs::remove_file(&path);
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let port = free_port().to_string();
    let log = dir
        .path()
        .join(format!("{}-{supervised}-{socket_env}.log", kind.name()));
    let mut cmd = match kind {
        Kind::Strata => Command::new(env!("CARGO_BIN_EXE_strata")),
        Kind::Redis => {
            let mut c = Command::new("redis-server");
            c.args(["--save", ""]);
            c
        }
    };
    cmd.args(["--port", &port, "--supervised", supervised, "--logfile"])
        .arg(&log)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .env_remove("NOTIFY_SOCKET")
        .env_remove("UPSTART_JOB");
    if socket_env {
        cmd.env("NOTIFY_SOCKET", &path);
    }
    let mut child = cmd.spawn().expect("spawn");
    let mut got = Vec::new();
    let deadline = Instant::now() + TIMEOUT;
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("Ready to accept connections") {
            break text;
        }
        assert!(
            Instant::now() < deadline,
            "{}: not ready: {text}",
            kind.name()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut buf = [0u8; 512];
    while let Ok(n) = sock.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
        if got.last().is_some_and(|m| m == "READY=1\n") {
            break;
        }
    }
    let mut c = crate::harness::Conn::connect(port.parse().unwrap(), kind.name());
    c.send(&["SHUTDOWN", "NOSAVE"]);
    let deadline = Instant::now() + TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "{}: did not exit", kind.name());
        std::thread::sleep(Duration::from_millis(20));
    }
    while let Ok(n) = sock.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    (got, text)
}

#[test]
fn supervised_systemd_notifies_readiness_as_redis_does() {
    let dir = TempDir::new("supervised");
    let mut all = Vec::new();
    for kind in [Kind::Redis, Kind::Strata] {
        let who = kind.name();
        let (got, log) = notifications(kind, &dir, "systemd", true);
        // The loading status names the server; the rest is Redis's protocol word for word.
        assert_eq!(got.len(), 4, "{who}: {got:?}");
        assert!(
            got[0].starts_with("STATUS=") && got[0].ends_with(" is loading...\n"),
            "{who}: {got:?}"
        );
        all.push(got[1..].to_vec());
        assert!(log.contains("* Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."), "{who}: {log}");
        // auto finds systemd by the environment.
        let (got, _) = notifications(kind, &dir, "auto", true);
        assert_eq!(got.len(), 4, "{who} auto: {got:?}");
        // no: nothing sent.
        let (got, _) = notifications(kind, &dir, "no", true);
        assert!(got.is_empty(), "{who} no: {got:?}");
        // systemd without the socket: Redis's warning, and the server runs unsupervised.
        let (got, log) = notifications(kind, &dir, "systemd", false);
        assert!(got.is_empty(), "{who}: {got:?}");
        assert!(
            log.contains("# systemd supervision error: NOTIFY_SOCKET not found!"),
            "{who}: {log}"
        );
    }
    assert_eq!(all[0], all[1]);
    assert_eq!(
        all[1],
        [
            "STATUS=Ready to accept connections\n",
            "READY=1\n",
            "STOPPING=1\n"
        ]
    );
}

#[test]
fn sighup_reopens_the_log_file_after_a_rotation() {
    let dir = TempDir::new("sighup");
    let log = dir.path().join("strata.log");
    let s = Server::strata(&["--logfile", log.to_str().unwrap()]);
    let deadline = Instant::now() + TIMEOUT;
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("Ready to accept")
    {
        assert!(Instant::now() < deadline, "not ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    // logrotate's way: move the file away, then SIGHUP.
    let rotated = dir.path().join("strata.log.1");
    std::fs::rename(&log, &rotated).unwrap();
    s.signal("HUP");
    while !log.exists() {
        assert!(Instant::now() < deadline, "no new log file after SIGHUP");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The server is still up, and its lines go to the new file.
    let mut c = s.conn();
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
    c.call(&["CONFIG", "SET", "loglevel", "verbose"]);
    let _ = s.conn();
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("Accepted ")
    {
        assert!(Instant::now() < deadline, "nothing logged to the new file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let old = std::fs::read_to_string(&rotated).unwrap();
    assert!(
        old.contains("# Received SIGHUP, reopening logfile"),
        "{old}"
    );
    assert!(!old.contains("Accepted "), "{old}");
    let new = std::fs::read_to_string(&log).unwrap();
    assert!(new.contains("Log file reopened."), "{new}");
}

/// SIGTERM schedules a shutdown for the next cron tick, as Redis's does: with the cron paused,
/// SHUTDOWN ABORT calls it off and the server goes on; without one pending, ABORT is an error.
#[test]
fn shutdown_abort_calls_off_a_signals_shutdown_as_redis() {
    let mut seen = Vec::new();
    for kind in [Kind::Redis, Kind::Strata] {
        let who = kind.name();
        let mut s = Server::start(kind, &["--enable-debug-command", "yes"]);
        let mut c = s.conn();
        let mut got = vec![c.call(&["SHUTDOWN", "ABORT"])];
        got.push(c.call(&["DEBUG", "PAUSE-CRON", "1"]));
        s.signal("TERM");
        s.wait_for_log("scheduling shutdown...");
        got.push(c.call(&["SHUTDOWN", "ABORT"]));
        s.wait_for_log("Shutdown manually aborted.");
        got.push(c.call(&["DEBUG", "PAUSE-CRON", "0"]));
        got.push(c.call(&["PING"]));
        assert!(
            s.wait_exit(Duration::from_millis(300)).is_none(),
            "{who} exited"
        );
        got.push(c.call(&["SHUTDOWN", "ABORT"]));
        // Not called off: the cron carries it out.
        s.signal("TERM");
        let status = s.wait_exit(TIMEOUT).expect("exit after SIGTERM");
        assert!(status.success(), "{who}: {status}");
        seen.push(got);
    }
    assert_eq!(seen[0], seen[1]);
}

/// The process's command line as the kernel shows it, up to its first NUL.
fn cmdline(pid: u32) -> String {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The process title, from `proc-title-template` at start-up and at once on CONFIG SET, also
/// longer than the command line was, as Redis sets it (the suite's "Process title set as
/// expected").
#[test]
fn the_process_title_follows_proc_title_template_as_redis() {
    let dir = TempDir::new("proctitle");
    let mut seen = Vec::new();
    for kind in [Kind::Redis, Kind::Strata] {
        let who = kind.name();
        let sock = dir.path().join(format!("{who}.sock"));
        let s = Server::start(kind, &["--unixsocket", sock.to_str().unwrap()]);
        let pid = s.pid();
        let port = s.port();
        // The default template: the command as started, then the first bind address and port.
        let title = cmdline(pid);
        let words: Vec<&str> = title.split(' ').collect();
        assert_eq!(
            words[1..],
            [format!("127.0.0.1:{port}")],
            "{who}: {title:?}"
        );
        let mut c = s.conn();
        let mut got = vec![c.call(&[
            "CONFIG",
            "SET",
            "proc-title-template",
            "TEST {title} {listen-addr} {port} {tls-port} {unixsocket} {config-file} and then some more words",
        ])];
        let title = cmdline(pid);
        let words: Vec<String> = title.split(' ').map(str::to_string).collect();
        assert_eq!(words[0], "TEST", "{who}: {title:?}");
        assert!(
            words[1].ends_with(if kind == Kind::Redis {
                "redis-server"
            } else {
                "strata"
            }),
            "{who}: {title:?}"
        );
        assert_eq!(words[2], format!("127.0.0.1:{port}"), "{who}");
        assert_eq!(words[3], port.to_string(), "{who}");
        assert_eq!(words[4], "0", "{who}");
        assert_eq!(words[5], sock.to_str().unwrap(), "{who}");
        assert!(
            title.ends_with(" and then some more words"),
            "{who}: {title:?}"
        );
        got.push(c.call(&["CONFIG", "SET", "proc-title-template", "{invalid-var}"]));
        assert_eq!(
            cmdline(pid),
            title,
            "{who}: a refused template changed the title"
        );
        seen.push(got);
    }
    assert_eq!(seen[0], seen[1]);
}
