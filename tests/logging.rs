//! Redis's log: the line format, `loglevel`, `logfile`, the start-up banner with ` PID: <pid>`
//! (what Redis's own test suite waits for), "Failed listening on port", the shutdown lines,
//! `pidfile`, `daemonize yes`, and the crash report a fatal signal writes. Where redis-server is
//! at hand its log is held to the same checks.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{free_port, Conn, Kind, Server, TempDir, TIMEOUT};

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Whether `line` has Redis's shape: `pid:role dd Mon yyyy hh:mm:ss.mmm <level> message`, role one
/// of `CMSX`, level one of `.-*#`.
fn is_log_line(line: &str) -> bool {
    let Some((pid, rest)) = line.split_once(':') else {
        return false;
    };
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    // R=role d=digit U=upper l=lower L=level mark
    let shape = b"R dd Ull dddd dd:dd:dd.ddd L ";
    let b = rest.as_bytes();
    if b.len() <= shape.len() {
        return false;
    }
    let fits = shape.iter().zip(b).all(|(&s, &x)| match s {
        b'R' => b"CMSX".contains(&x),
        b'd' => x.is_ascii_digit(),
        b'U' => x.is_ascii_uppercase(),
        b'l' => x.is_ascii_lowercase(),
        b'L' => b".-*#".contains(&x),
        _ => x == s,
    });
    fits && MONTHS.contains(&&rest[5..8])
}

/// The message of every log line at level mark `mark`.
fn messages(log: &str, mark: char) -> Vec<&str> {
    log.lines()
        .filter(|l| is_log_line(l))
        .filter_map(|l| {
            let rest = l.split_once(':')?.1;
            (rest.as_bytes()[27] == mark as u8).then(|| &rest[29..])
        })
        .collect()
}

fn assert_every_line_is_a_log_line(who: &str, log: &str) {
    for line in log.lines().filter(|l| !l.is_empty()) {
        assert!(
            is_log_line(line),
            "{who}: not a log line: {line:?}\nlog:\n{log}"
        );
    }
}

#[test]
fn log_lines_have_redis_shape_and_start_up_names_the_pid() {
    assert!(is_log_line(
        "11296:M 25 May 2020 17:37:14.652 # Server initialized"
    ));
    assert!(!is_log_line("Strata ready to accept connections"));
    for s in [
        Server::redis(&["--loglevel", "verbose"]),
        Server::strata(&["--loglevel", "verbose", "--threads", "2"]),
    ] {
        let who = s.kind().name();
        let log = s.wait_for_log("Ready to accept connections");
        assert_every_line_is_a_log_line(who, &log);
        let pid = s.pid();
        let warnings = messages(&log, '#');
        assert!(warnings.contains(&"Server initialized"), "{who}: {log}");
        assert!(
            warnings
                .iter()
                .any(|m| m.contains(&format!("pid={pid}, just started"))),
            "{who}: {log}"
        );
        assert!(
            messages(&log, '*').contains(&"Ready to accept connections"),
            "{who}: {log}"
        );
        let running = format!("Running mode=standalone, port={}.", s.port());
        assert!(
            messages(&log, '*').contains(&running.as_str()),
            "{who}: {log}"
        );
        // The first lines come before the server is up: role C, then M, as Redis's do.
        let first = log.lines().next().unwrap_or_default();
        assert!(first.starts_with(&format!("{pid}:C ")), "{who}: {log}");
        assert!(
            log.contains(&format!("{pid}:M ")),
            "{who}: no server line: {log}"
        );
        if s.kind() == Kind::Strata {
            // Redis's suite waits for " PID: <pid>"; Redis prints it only in its logo.
            assert!(log.contains(&format!(" PID: {pid}")), "{log}");
            assert!(log.contains("Strata is starting"), "{log}");
        }
    }
}

#[test]
fn always_show_logo_logs_the_logo_with_the_pid() {
    for s in [
        Server::redis(&["--always-show-logo", "yes"]),
        Server::strata(&["--always-show-logo", "yes"]),
    ] {
        let log = s.wait_for_log("Ready to accept connections");
        let who = s.kind().name();
        assert!(
            log.contains(&format!(" PID: {}\n", s.pid())),
            "{who}: {log}"
        );
        assert!(
            log.contains(&format!(" Port: {}\n", s.port())),
            "{who}: {log}"
        );
        assert!(log.contains("Running in standalone mode"), "{who}: {log}");
        assert!(log.contains("Redis 7.0.15"), "{who}: {log}");
        assert!(!log.contains("Running mode="), "{who}: {log}");
    }
}

#[test]
fn loglevel_filters_lines_and_follows_config_set() {
    let s = Server::strata(&["--loglevel", "warning"]);
    let mut c = s.conn();
    assert_eq!(c.call(&["PING"]), b"+PONG\r\n");
    let log = s.wait_for_log("Server initialized");
    assert!(
        messages(&log, '*').is_empty(),
        "notice lines at warning: {log}"
    );
    assert!(!log.contains("Ready to accept"), "{log}");
    // Debug and verbose lines appear once the level allows them: a connection is logged.
    assert_eq!(
        c.call(&["CONFIG", "SET", "loglevel", "verbose"]),
        b"+OK\r\n"
    );
    assert_eq!(s.conn().call(&["PING"]), b"+PONG\r\n");
    let log = s.wait_for_log("Accepted 127.0.0.1:");
    assert!(
        messages(&log, '-')
            .iter()
            .any(|m| m.starts_with("Accepted 127.0.0.1:")),
        "{log}"
    );
    assert!(c
        .call(&["CONFIG", "SET", "loglevel", "loud"])
        .starts_with(b"-ERR CONFIG SET failed (possibly related to argument 'loglevel')"));
}

#[test]
fn logfile_is_appended_to_and_stdout_stays_quiet() {
    let dir = TempDir::new("logfile");
    let file = dir.path().join("strata.log");
    std::fs::write(&file, "a line from before\n").unwrap();
    let s = Server::strata(&["--logfile", file.to_str().unwrap()]);
    let deadline = Instant::now() + TIMEOUT;
    let text = loop {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        if text.contains("Ready to accept connections") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(text.starts_with("a line from before\n"), "{text}");
    assert!(text.contains(&format!(" PID: {}", s.pid())), "{text}");
    assert_every_line_is_a_log_line("strata", text.split_once('\n').unwrap().1);
    assert_eq!(s.log_text(), "", "stdout/stderr with a logfile");
    let mut c = s.conn();
    let shown = c.call(&["CONFIG", "GET", "logfile"]);
    assert!(shown.ends_with(format!("{}\r\n", file.display()).as_bytes()));
    assert!(c
        .call(&["CONFIG", "SET", "logfile", "/tmp/other.log"])
        .starts_with(b"-ERR CONFIG SET failed (possibly related to argument 'logfile') - can't set immutable config"));
}

/// Starts `bin` (strata or redis-server) on a port something else holds; returns its exit status
/// and output.
fn start_on_taken_port(kind: Kind, port: u16, dir: &Path) -> (std::process::ExitStatus, String) {
    let log = dir.join(format!("{}.log", kind.name()));
    let file = std::fs::File::create(&log).unwrap();
    let bin = match kind {
        Kind::Strata => env!("CARGO_BIN_EXE_strata"),
        Kind::Redis => "redis-server",
    };
    let mut child = Command::new(bin)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--dir"])
        .arg(dir)
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "{} started on a taken port: {}",
                kind.name(),
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn a_taken_port_logs_failed_listening_and_exits_1() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let dir = TempDir::new("taken");
    for kind in [Kind::Redis, Kind::Strata] {
        let (status, log) = start_on_taken_port(kind, port, dir.path());
        assert_eq!(status.code(), Some(1), "{}: {log}", kind.name());
        let warnings = messages(&log, '#');
        let failed = format!("Failed listening on port {port} (TCP), aborting.");
        assert!(
            warnings.contains(&failed.as_str()),
            "{}: {log}",
            kind.name()
        );
        assert!(
            warnings.iter().any(|m| m
                .starts_with("Warning: Could not create server TCP listening socket")
                && m.ends_with("bind: Address already in use")),
            "{}: {log}",
            kind.name()
        );
        // The suite's start-up loop looks for the PID first: a server that did not start must
        // not print it.
        assert!(!log.contains(" PID: "), "{}: {log}", kind.name());
    }
}

#[test]
fn pidfile_is_written_at_start_and_removed_at_shutdown() {
    let dir = TempDir::new("pidfile");
    let pidfile = dir.path().join("server.pid");
    let path = pidfile.to_str().unwrap();
    // One after the other: both write the same path.
    for kind in [Kind::Redis, Kind::Strata] {
        let mut s = Server::start(kind, &["--pidfile", path]);
        let who = s.kind().name();
        let written = std::fs::read_to_string(&pidfile).unwrap_or_default();
        assert_eq!(written.trim(), s.pid().to_string(), "{who}");
        s.conn()
            .send_raw(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n");
        let status = s.wait_exit(TIMEOUT).expect("exits after SHUTDOWN");
        assert!(status.success(), "{who}: {status:?}");
        assert!(!pidfile.exists(), "{who} left its pidfile");
        let log = s.log_text();
        let warnings = messages(&log, '#');
        assert!(
            warnings.contains(&"User requested shutdown..."),
            "{who}: {log}"
        );
        assert!(
            warnings
                .iter()
                .any(|m| m.ends_with("is now ready to exit, bye bye...")),
            "{who}: {log}"
        );
        assert!(
            messages(&log, '*').contains(&"Removing the pid file."),
            "{who}: {log}"
        );
    }
}

#[test]
fn fatal_signals_write_a_crash_report_and_kill_the_process() {
    for (name, number) in [("SEGV", 11), ("ABRT", 6), ("BUS", 7)] {
        let mut s = Server::strata(&["--threads", "2"]);
        s.wait_for_log("Ready to accept connections");
        s.signal(name);
        let status = s.wait_exit(TIMEOUT).expect("exits after a fatal signal");
        assert_eq!(status.signal(), Some(number), "SIG{name}: {status:?}");
        let log = s.log_text();
        let start = log
            .find("=== REDIS BUG REPORT START: Cut & paste starting from here ===")
            .unwrap_or_else(|| panic!("no report for SIG{name}: {log}"));
        let report = &log[start..];
        let crashed = format!("crashed by signal: {number}, si_code: 0");
        let order = [
            crashed.as_str(),
            "Killed by PID: ",
            "------ STACK TRACE ------",
            "Backtrace:",
            "------ INFO OUTPUT ------",
            "------ CLIENT LIST OUTPUT ------",
            "------ CURRENT CLIENT INFO ------",
            "=== REDIS BUG REPORT END. Make sure to include from START to END. ===",
        ];
        let mut at = 0;
        for needle in order {
            let found = report[at..].find(needle).unwrap_or_else(|| {
                panic!("SIG{name}: {needle:?} missing or out of order: {report}")
            });
            at += found + needle.len();
        }
        assert!(
            messages(report, '#').iter().any(|m| m.contains(&crashed)),
            "{report}"
        );
    }
}

#[test]
fn crash_log_enabled_no_writes_no_report() {
    let mut s = Server::strata(&["--crash-log-enabled", "no"]);
    s.wait_for_log("Ready to accept connections");
    s.signal("SEGV");
    let status = s.wait_exit(TIMEOUT).expect("exits after SIGSEGV");
    assert_eq!(status.signal(), Some(11));
    assert!(!s.log_text().contains("BUG REPORT"), "{}", s.log_text());
}

/// Kills the daemon a test started if the test ends early.
struct Daemon(Option<u32>);

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

#[test]
fn daemonize_detaches_logs_to_the_file_and_writes_the_pidfile() {
    let dir = TempDir::new("daemon");
    let port = free_port();
    let pidfile = dir.path().join("d.pid");
    let logfile = dir.path().join("d.log");
    let status = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--daemonize", "yes", "--pidfile"])
        .arg(&pidfile)
        .arg("--logfile")
        .arg(&logfile)
        .arg("--dir")
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run strata --daemonize yes");
    // The process we started returns at once; the daemon goes on.
    assert!(status.success(), "{status:?}");
    let mut daemon = Daemon(None);
    let deadline = Instant::now() + TIMEOUT;
    let pid: u32 = loop {
        let text = std::fs::read_to_string(&pidfile).unwrap_or_default();
        if let Ok(pid) = text.trim().parse() {
            break pid;
        }
        assert!(Instant::now() < deadline, "no pidfile");
        std::thread::sleep(Duration::from_millis(20));
    };
    daemon.0 = Some(pid);
    let log = loop {
        let log = std::fs::read_to_string(&logfile).unwrap_or_default();
        if log.contains("Ready to accept connections") {
            break log;
        }
        assert!(Instant::now() < deadline, "daemon not ready: {log}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(log.contains(&format!(" PID: {pid}")), "{log}");
    assert!(log.contains(&format!("{pid}:M ")), "{log}");
    // A session of its own, no terminal: setsid made it a session leader's child (double fork).
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    assert_eq!(fields[4], "0", "tty_nr of the daemon: {stat}");
    assert_ne!(
        fields[3],
        pid.to_string(),
        "a daemon is not a session leader"
    );
    let mut c = Conn::connect(port, "strata daemon");
    assert!(c
        .call(&["CONFIG", "GET", "daemonize"])
        .ends_with(b"yes\r\n"));
    c.send_raw(b"*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n");
    let deadline = Instant::now() + TIMEOUT;
    while pidfile.exists()
        || !std::fs::read_to_string(&logfile)
            .unwrap_or_default()
            .contains("ready to exit, bye bye")
    {
        assert!(Instant::now() < deadline, "the daemon did not shut down");
        std::thread::sleep(Duration::from_millis(20));
    }
    daemon.0 = None;
}

#[test]
fn syslog_settings_validate_and_start() {
    let s = Server::strata(&[
        "--syslog-enabled",
        "yes",
        "--syslog-ident",
        "strata-test",
        "--syslog-facility",
        "local7",
    ]);
    let mut c = s.conn();
    assert_eq!(
        c.call(&["CONFIG", "GET", "syslog-facility"]),
        b"*2\r\n$15\r\nsyslog-facility\r\n$6\r\nlocal7\r\n"
    );
    // The file log goes on beside syslog.
    s.wait_for_log("Ready to accept connections");
}
