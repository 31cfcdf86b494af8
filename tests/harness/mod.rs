//! Black-box test harness: starts real servers and talks raw RESP to them.
//!
//! Every test owns its servers. [`Server`] starts `strata` (the binary under test) or `redis-server` (the
//! compatibility oracle) on a free port with a private temporary directory, waits until it answers, and kills
//! it on drop — also when the test panics. [`Conn`] is a deliberately dumb TCP client: it writes exactly the
//! bytes it is given and hands back the raw bytes of one reply, so tests can check framing, not just values.
//! [`Diff`] pairs one redis-server with one strata and asserts that both answer byte-for-byte the same.
//!
//! Everything here waits with a bound (10 s per reply, 10 s per start-up) so a broken server fails the test
//! instead of hanging it.

#![allow(dead_code)] // Each test module uses a different subset of the harness.

use std::collections::HashSet;
use std::fmt;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use std::time::{SystemTime, UNIX_EPOCH};

/// How long a reply (or a server start-up) may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Threads strata gets in a [`Diff`] unless the test asks otherwise: more than one, so cross-thread paths run.
pub const DEFAULT_THREADS: usize = 2;

// ---------------------------------------------------------------------------------------------------------
// Ports and temporary directories
// ---------------------------------------------------------------------------------------------------------

/// A TCP port on 127.0.0.1 that was free a moment ago.
///
/// The OS picks it (bind to port 0); ports already handed out by this process are skipped so two tests
/// running in parallel never race for the same one. A start-up that still loses a race is retried by
/// [`Server`].
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener
            .local_addr()
            .expect("local_addr of a bound socket")
            .port();
        drop(listener);
        let mut handed_out = HANDED_OUT.lock().unwrap_or_else(|e| e.into_inner());
        if handed_out.get_or_insert_with(HashSet::new).insert(port) {
            return port;
        }
    }
}

/// A directory under the system temp dir, removed (with its contents) on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("strata-test-{}-{label}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TempDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

// ---------------------------------------------------------------------------------------------------------
// Servers
// ---------------------------------------------------------------------------------------------------------

/// Which implementation a [`Server`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Strata,
    Redis,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Strata => "strata",
            Kind::Redis => "redis",
        }
    }
}

/// A running server process on 127.0.0.1, killed (and its directory removed) on drop.
pub struct Server {
    kind: Kind,
    port: u16,
    child: Child,
    log: PathBuf,
    // Dropped after the child is dead: the server's working directory and log live here.
    dir: TempDir,
}

impl Server {
    /// redis-server, Strata with one thread and Strata with two: a behaviour that must not depend
    /// on the thread count, next to Redis's.
    pub fn redis_and_stratas() -> [Server; 3] {
        [
            Server::redis(&[]),
            Server::strata(&["--threads", "1"]),
            Server::strata(&["--threads", "2"]),
        ]
    }

    /// Starts the strata binary built by cargo for this test target:
    /// `strata --port P --bind 127.0.0.1 --dir <private temp dir> <extra_args...>`.
    pub fn strata(extra_args: &[&str]) -> Server {
        Server::start(Kind::Strata, extra_args)
    }

    /// Starts `redis-server --port P --bind 127.0.0.1 --save "" --appendonly no --daemonize no --dir <temp>`
    /// plus `extra_args` (redis.conf settings as `--name value`).
    pub fn redis(extra_args: &[&str]) -> Server {
        Server::start(Kind::Redis, extra_args)
    }

    /// Starts a server of `kind`. A start-up that fails because another process took the port between
    /// [`free_port`] and the server's bind is retried on a new port.
    pub fn start(kind: Kind, extra_args: &[&str]) -> Server {
        const ATTEMPTS: usize = 3;
        let mut last_failure = String::new();
        for _ in 0..ATTEMPTS {
            match Server::try_start(kind, extra_args) {
                Ok(server) => return server,
                Err(failure) => last_failure = failure,
            }
        }
        panic!(
            "{} did not start ({ATTEMPTS} attempts); last attempt:\n{last_failure}",
            kind.name()
        );
    }

    fn try_start(kind: Kind, extra_args: &[&str]) -> Result<Server, String> {
        let port = free_port();
        let dir = TempDir::new(kind.name());
        let log = dir.path().join("server.log");
        let log_file =
            fs::File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
        let log_err = log_file
            .try_clone()
            .map_err(|e| format!("clone log handle: {e}"))?;
        let port_arg = port.to_string();
        let dir_arg = dir
            .path()
            .to_str()
            .expect("temp dir path is UTF-8")
            .to_string();

        // A config file, like redis-server's, must come first; flags follow.
        let (config_file, extra_args) = match extra_args.split_first() {
            Some((first, rest)) if !first.starts_with("--") => (Some(*first), rest),
            _ => (None, extra_args),
        };
        let mut cmd = match kind {
            Kind::Strata => {
                let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
                cmd.args(config_file);
                cmd.args([
                    "--port",
                    &port_arg,
                    "--bind",
                    "127.0.0.1",
                    "--dir",
                    &dir_arg,
                ]);
                cmd
            }
            Kind::Redis => {
                let mut cmd = Command::new("redis-server");
                cmd.args(config_file);
                cmd.args([
                    "--port",
                    &port_arg,
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ]);
                cmd.args(["--daemonize", "no", "--dir", &dir_arg]);
                cmd
            }
        };
        cmd.args(extra_args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::from(log_file))
            .stderr(Stdio::from(log_err));
        let child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) if e.kind() == io::ErrorKind::NotFound && kind == Kind::Redis => panic!(
                "redis-server is not on PATH: install redis-server and redis-tools \
                 (scripts/test.sh does it: apt-get install -y redis-server redis-tools)"
            ),
            Err(e) => panic!("cannot spawn {}: {e}", kind.name()),
        };
        let mut server = Server {
            kind,
            port,
            child,
            log,
            dir,
        };
        server.wait_ready().map(|()| server)
    }

    /// Waits until the server answers a PING with any reply (an error such as NOAUTH counts: it is up).
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + TIMEOUT;
        let mut last_error = String::from("no attempt made");
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "{} exited during start-up with {status}; log tail:\n{}",
                    self.kind.name(),
                    self.log_tail()
                ));
            }
            match self.ping_once() {
                // A reply can come from another server that won the port race; only ours being alive counts.
                Ok(()) if matches!(self.child.try_wait(), Ok(None)) => return Ok(()),
                Ok(()) => continue,
                Err(e) => last_error = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!(
            "{} did not answer PING on port {} within {TIMEOUT:?} (last error: {last_error}); log tail:\n{}",
            self.kind.name(),
            self.port,
            self.log_tail()
        ))
    }

    fn ping_once(&self) -> io::Result<()> {
        let addr = ("127.0.0.1", self.port);
        let stream = TcpStream::connect(addr)?;
        let mut conn = Conn::from_stream(stream, format!("{} startup probe", self.kind.name()))?;
        conn.set_reply_timeout(Duration::from_secs(1));
        conn.send_raw(b"*1\r\n$4\r\nPING\r\n");
        conn.try_read_reply()
            .map(|_| ())
            .map_err(|e| io::Error::other(e.to_string()))
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's private working directory (passed as `--dir`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Opens a new raw connection.
    pub fn conn(&self) -> Conn {
        Conn::connect(self.port, self.kind.name())
    }

    /// Whether the process is still running (false once it has exited, e.g. after a crash).
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends a signal (e.g. "TERM", "INT") to the server process with kill(1).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill(1)");
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits (bounded) for the process to exit and returns its exit status.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last 40 lines of the server's stdout/stderr.
    pub fn log_tail(&self) -> String {
        let text = fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(40)..];
        if tail.is_empty() {
            "    (log is empty)".to_string()
        } else {
            tail.iter().map(|l| format!("    {l}\n")).collect()
        }
    }

    /// Everything the server wrote to stdout and stderr so far.
    pub fn log_text(&self) -> String {
        fs::read(&self.log)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Waits (bounded by [`TIMEOUT`]) until the server's stdout/stderr holds `needle`; returns
    /// the text read last, or panics with the log tail.
    pub fn wait_for_log(&self, needle: &str) -> String {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let text = self.log_text();
            if text.contains(needle) {
                return text;
            }
            if Instant::now() >= deadline {
                panic!(
                    "{} never logged {needle:?}; log tail:\n{}",
                    self.kind.name(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The resident set size of the server process in bytes (VmRSS from /proc).
    pub fn rss_bytes(&self) -> u64 {
        self.status_bytes("VmRSS:")
    }

    /// The most the server process was ever resident, in bytes (VmHWM from /proc).
    pub fn peak_rss_bytes(&self) -> u64 {
        self.status_bytes("VmHWM:")
    }

    fn status_bytes(&self, field: &str) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("read /proc/<pid>/status");
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("{field} line in /proc/<pid>/status"));
        let kib: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("unparsable status line {line:?}"));
        kib * 1024
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---------------------------------------------------------------------------------------------------------
// Raw connection
// ---------------------------------------------------------------------------------------------------------

/// Why a reply could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The server closed the connection; holds the bytes of an incomplete reply, if any.
    Closed(Vec<u8>),
    /// Nothing complete arrived within the timeout; holds the bytes received so far.
    Timeout(Vec<u8>),
    /// The bytes received are not valid RESP.
    Malformed(Vec<u8>, String),
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Closed(partial) if partial.is_empty() => {
                write!(f, "connection closed by the server")
            }
            ReadError::Closed(partial) => {
                write!(
                    f,
                    "connection closed by the server mid-reply; got {}",
                    escape(partial)
                )
            }
            ReadError::Timeout(partial) => {
                write!(
                    f,
                    "no complete reply within {TIMEOUT:?}; got {}",
                    escape(partial)
                )
            }
            ReadError::Malformed(bytes, why) => {
                write!(f, "malformed reply ({why}): {}", escape(bytes))
            }
            ReadError::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

/// A raw RESP client over TCP. Writes exactly what it is given; reads one whole reply at a time.
pub struct Conn {
    stream: TcpStream,
    /// Bytes received but not yet returned as a reply.
    pending: Vec<u8>,
    /// Set once a read returned end-of-stream.
    eof: bool,
    /// Names the peer in panic messages ("redis", "strata").
    label: String,
    /// How long [`Conn::read_reply`] waits for one reply.
    reply_timeout: Duration,
}

impl Conn {
    /// Connects to 127.0.0.1:`port`; `label` names the peer in panic messages.
    pub fn connect(port: u16, label: &str) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port))
            .unwrap_or_else(|e| panic!("connect to {label} on 127.0.0.1:{port}: {e}"));
        Conn::from_stream(stream, label.to_string())
            .unwrap_or_else(|e| panic!("configure socket to {label}: {e}"))
    }

    fn from_stream(stream: TcpStream, label: String) -> io::Result<Conn> {
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            pending: Vec::new(),
            eof: false,
            label,
            reply_timeout: TIMEOUT,
        })
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// Changes how long [`Conn::read_reply`] waits for one reply (default [`TIMEOUT`]).
    pub fn set_reply_timeout(&mut self, timeout: Duration) {
        self.reply_timeout = timeout;
    }

    /// Sends one command as a RESP multibulk array.
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        let frame = encode_command(args);
        self.send_raw(&frame);
    }

    /// Sends bytes exactly as given. A write to a connection the server already closed is not an error here:
    /// tests observe that through [`Conn::is_closed`] or the next read.
    pub fn send_raw(&mut self, bytes: &[u8]) {
        if let Err(e) = self.stream.write_all(bytes) {
            match e.kind() {
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => {}
                _ => panic!("write to {}: {e}", self.label),
            }
        }
    }

    /// A second handle on the socket, to write from another thread while this one reads (a
    /// pipeline larger than the socket buffers).
    pub fn try_clone_stream(&self) -> TcpStream {
        self.stream
            .try_clone()
            .expect("clone the test connection's socket")
    }

    /// Sends bytes in pieces of `chunk` bytes with a flush-and-pause between them, so the server sees many
    /// partial reads.
    pub fn send_in_chunks(&mut self, bytes: &[u8], chunk: usize) {
        for piece in bytes.chunks(chunk.max(1)) {
            self.send_raw(piece);
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Sends a command and returns the raw bytes of its reply.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        self.send(args);
        self.read_reply()
    }

    /// Sends a command and returns its decoded reply.
    pub fn call_decoded<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        Reply::decode(&self.call(args))
    }

    /// The numeric field `name` of INFO `section`; panics if there is none.
    pub fn info_u64(&mut self, section: &str, name: &str) -> u64 {
        let reply = self.call_decoded(&["INFO", section]);
        let text =
            String::from_utf8_lossy(reply.as_bytes().expect("INFO is a bulk string")).into_owned();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("INFO has no numeric {name}"))
    }

    /// Returns the raw bytes of exactly one complete reply (RESP2 or RESP3, nested aggregates included);
    /// panics with the partial bytes if none arrives within [`TIMEOUT`] or the connection closes.
    pub fn read_reply(&mut self) -> Vec<u8> {
        self.try_read_reply()
            .unwrap_or_else(|e| panic!("reading a reply from {}: {e}", self.label))
    }

    /// Like [`Conn::read_reply`] but returns the failure instead of panicking.
    pub fn try_read_reply(&mut self) -> Result<Vec<u8>, ReadError> {
        let deadline = Instant::now() + self.reply_timeout;
        loop {
            match frame_len(&self.pending) {
                Ok(Some(len)) => {
                    let rest = self.pending.split_off(len);
                    return Ok(std::mem::replace(&mut self.pending, rest));
                }
                Ok(None) => {}
                Err(why) => return Err(ReadError::Malformed(self.pending.clone(), why)),
            }
            if self.eof {
                return Err(ReadError::Closed(self.pending.clone()));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ReadError::Timeout(self.pending.clone()));
            }
            match self.fill(deadline - now) {
                Ok(_) => {}
                Err(e) if is_timeout(&e) => return Err(ReadError::Timeout(self.pending.clone())),
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
    }

    /// Resets the connection (SO_LINGER 0: an RST instead of a FIN).
    pub fn reset(self) {
        let _ = socket2::SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
    }

    /// Shuts down the sending side only (the client may still read).
    pub fn half_close(&self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
    }

    /// Closes the connection and waits (bounded, 5 s) until the server's kernel has the end of it:
    /// the server's socket has left ESTABLISHED (or is gone), read from /proc/net/tcp. Loopback
    /// delivers a FIN from a queue that a loaded machine may serve late, after packets sent later
    /// from another CPU; a test whose point is what the server does with a client it can see is
    /// gone waits for this before its next step.
    pub fn close_seen_by_server(self) {
        let here = self
            .stream
            .local_addr()
            .expect("local_addr of a connected socket");
        let server = self
            .stream
            .peer_addr()
            .expect("peer_addr of a connected socket");
        drop(self);
        let (ours, theirs) = (
            format!(":{:04X}", server.port()),
            format!(":{:04X}", here.port()),
        );
        for _ in 0..500 {
            let established = ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
                std::fs::read_to_string(f)
                    .unwrap_or_default()
                    .lines()
                    .any(|l| {
                        let cols: Vec<&str> = l.split_whitespace().collect();
                        // sl, local address, remote address, state (01: ESTABLISHED).
                        cols.len() > 3
                            && cols[1].ends_with(&ours)
                            && cols[2].ends_with(&theirs)
                            && cols[3] == "01"
                    })
            });
            if !established {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "the server's socket to port {} never saw the client's FIN",
            here.port()
        );
    }

    /// Reads whatever arrives until the server closes the connection or nothing arrives for `quiet`.
    /// Returns the bytes (including any already buffered) and whether the connection was closed.
    pub fn read_until_quiet(&mut self, quiet: Duration) -> (Vec<u8>, bool) {
        let hard_deadline = Instant::now() + TIMEOUT;
        while !self.eof && Instant::now() < hard_deadline {
            match self.fill(quiet) {
                Ok(_) => {}
                Err(e) if is_timeout(&e) => break,
                Err(_) => self.eof = true,
            }
        }
        (std::mem::take(&mut self.pending), self.eof)
    }

    /// Whether the server has closed the connection: waits up to `wait` for end-of-stream. Data that arrives
    /// meanwhile is kept for the next read.
    pub fn is_closed_within(&mut self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        loop {
            if self.eof {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            match self.fill(deadline - now) {
                Ok(_) => {}
                Err(e) if is_timeout(&e) => return false,
                Err(_) => {
                    self.eof = true;
                    return true;
                }
            }
        }
    }

    /// Whether the server has closed the connection, waiting up to 1 s for it to do so.
    pub fn is_closed(&mut self) -> bool {
        self.is_closed_within(Duration::from_secs(1))
    }

    /// Closes our writing half (the server sees end-of-stream), keeping the reading half open.
    pub fn shutdown_write(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
    }

    /// One read with the given timeout; appends to `pending`, sets `eof` on end-of-stream.
    fn fill(&mut self, timeout: Duration) -> io::Result<usize> {
        self.stream
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        let mut chunk = [0u8; 64 * 1024];
        let result = loop {
            match self.stream.read(&mut chunk) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        self.stream.set_read_timeout(Some(self.reply_timeout))?;
        let n = match result {
            Ok(n) => n,
            // A reset is how a server that closed with unread input looks: treat it as end-of-stream.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => 0,
            Err(e) => return Err(e),
        };
        if n == 0 {
            self.eof = true;
        }
        self.pending.extend_from_slice(&chunk[..n]);
        Ok(n)
    }
}

fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Encodes a command as a RESP multibulk array of bulk strings.
pub fn encode_command<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        let arg = arg.as_ref();
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

// ---------------------------------------------------------------------------------------------------------
// RESP reply framing and decoding
// ---------------------------------------------------------------------------------------------------------

/// Length of the first complete reply in `buf`: `Ok(None)` if more bytes are needed, `Err` if `buf` does
/// not start with valid RESP2/RESP3.
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, String> {
    parse_frame(buf, 0).map(|found| found.map(|(_, end)| end))
}

/// Parses one reply starting at `pos`; returns it and the position just past it.
fn parse_frame(buf: &[u8], pos: usize) -> Result<Option<(Reply, usize)>, String> {
    let Some(line_end) = find_crlf(buf, pos) else {
        return Ok(None);
    };
    let Some(&tag) = buf.get(pos) else {
        return Ok(None);
    };
    let line = &buf[pos + 1..line_end];
    let after = line_end + 2;
    let text = || line.to_vec();
    let number = || -> Result<i64, String> {
        std::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse::<i64>().ok())
            .ok_or_else(|| {
                format!(
                    "bad length/integer {:?} after '{}'",
                    escape(line),
                    tag as char
                )
            })
    };
    let simple = |reply: Reply| Ok(Some((reply, after)));
    match tag {
        b'+' => simple(Reply::Simple(text())),
        b'-' => simple(Reply::Error(text())),
        b':' => simple(Reply::Integer(number()?)),
        b'_' if line.is_empty() => simple(Reply::Null),
        b',' => simple(Reply::Double(text())),
        b'(' => simple(Reply::BigNumber(text())),
        b'#' => match line {
            b"t" => simple(Reply::Boolean(true)),
            b"f" => simple(Reply::Boolean(false)),
            _ => Err(format!("bad boolean {}", escape(line))),
        },
        b'$' | b'!' | b'=' => {
            let len = number()?;
            if len < 0 {
                return match (tag, len) {
                    (b'$', -1) => simple(Reply::Bulk(None)),
                    _ => Err(format!("bad blob length {len}")),
                };
            }
            let len = len as usize;
            if buf.len() < after + len + 2 {
                return Ok(None);
            }
            if &buf[after + len..after + len + 2] != b"\r\n" {
                return Err(format!("blob of length {len} not followed by CRLF"));
            }
            let data = buf[after..after + len].to_vec();
            let reply = match tag {
                b'$' => Reply::Bulk(Some(data)),
                b'!' => Reply::BlobError(data),
                _ => Reply::Verbatim(data),
            };
            Ok(Some((reply, after + len + 2)))
        }
        b'*' | b'~' | b'>' | b'%' | b'|' => {
            let count = number()?;
            if count < 0 {
                return match (tag, count) {
                    (b'*', -1) => simple(Reply::Array(None)),
                    _ => Err(format!("bad aggregate length {count}")),
                };
            }
            let items = if matches!(tag, b'%' | b'|') {
                count * 2
            } else {
                count
            };
            let mut elements = Vec::new();
            let mut at = after;
            for _ in 0..items {
                match parse_frame(buf, at)? {
                    Some((element, next)) => {
                        elements.push(element);
                        at = next;
                    }
                    None => return Ok(None),
                }
            }
            let pairs = |elements: Vec<Reply>| {
                let mut pairs = Vec::new();
                let mut it = elements.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                pairs
            };
            match tag {
                b'*' => Ok(Some((Reply::Array(Some(elements)), at))),
                b'~' => Ok(Some((Reply::Set(elements), at))),
                b'>' => Ok(Some((Reply::Push(elements), at))),
                b'%' => Ok(Some((Reply::Map(pairs(elements)), at))),
                _ => {
                    // An attribute map decorates the reply that follows it; both form one reply.
                    match parse_frame(buf, at)? {
                        Some((value, end)) => Ok(Some((
                            Reply::Attribute {
                                attributes: pairs(elements),
                                value: Box::new(value),
                            },
                            end,
                        ))),
                        None => Ok(None),
                    }
                }
            }
        }
        _ => Err(format!("unknown reply type byte {:?}", tag as char)),
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?
        .windows(2)
        .position(|w| w == b"\r\n")
        .map(|i| from + i)
}

/// A decoded RESP2/RESP3 reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// `+text`
    Simple(Vec<u8>),
    /// `-ERR text`
    Error(Vec<u8>),
    /// `:n`
    Integer(i64),
    /// `$n` / `$-1` (None)
    Bulk(Option<Vec<u8>>),
    /// `*n` / `*-1` (None)
    Array(Option<Vec<Reply>>),
    /// RESP3 `_`
    Null,
    /// RESP3 `,` — kept as text so `inf`, `nan` and formatting differences stay visible.
    Double(Vec<u8>),
    /// RESP3 `#t` / `#f`
    Boolean(bool),
    /// RESP3 `!n` blob error
    BlobError(Vec<u8>),
    /// RESP3 `=n` verbatim string, including its `txt:` prefix
    Verbatim(Vec<u8>),
    /// RESP3 `(` big number, as text
    BigNumber(Vec<u8>),
    /// RESP3 `%n`
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `~n`
    Set(Vec<Reply>),
    /// RESP3 `>n` out-of-band push
    Push(Vec<Reply>),
    /// RESP3 `|n` attributes and the reply they decorate
    Attribute {
        attributes: Vec<(Reply, Reply)>,
        value: Box<Reply>,
    },
}

impl Reply {
    /// Decodes exactly one reply; panics (with the escaped bytes) if `bytes` is not one complete reply.
    pub fn decode(bytes: &[u8]) -> Reply {
        match parse_frame(bytes, 0) {
            Ok(Some((reply, end))) if end == bytes.len() => reply,
            Ok(Some((_, end))) => panic!(
                "{} trailing bytes after one reply in {}",
                bytes.len() - end,
                escape(bytes)
            ),
            Ok(None) => panic!("incomplete reply {}", escape(bytes)),
            Err(why) => panic!("malformed reply ({why}): {}", escape(bytes)),
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_) | Reply::BlobError(_))
    }

    /// The error text (`ERR ...`) if this is an error reply.
    pub fn error_text(&self) -> Option<&[u8]> {
        match self {
            Reply::Error(text) | Reply::BlobError(text) => Some(text),
            _ => None,
        }
    }

    /// The payload of a simple string, bulk string, verbatim string or double.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Simple(b) | Reply::Bulk(Some(b)) | Reply::Verbatim(b) | Reply::Double(b) => {
                Some(b)
            }
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Integer(n) => Some(*n),
            _ => None,
        }
    }

    /// Elements of an array, set or push reply.
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(Some(items)) | Reply::Set(items) | Reply::Push(items) => Some(items),
            _ => None,
        }
    }

    /// Key/value pairs of a RESP3 map, or of a RESP2 flat array with an even number of elements.
    pub fn as_pairs(&self) -> Option<Vec<(&Reply, &Reply)>> {
        match self {
            Reply::Map(pairs) => Some(pairs.iter().map(|(k, v)| (k, v)).collect()),
            Reply::Array(Some(items)) if items.len() % 2 == 0 => {
                Some(items.chunks(2).map(|kv| (&kv[0], &kv[1])).collect())
            }
            _ => None,
        }
    }

    /// The value for `key` in a map-like reply (see [`Reply::as_pairs`]).
    pub fn get(&self, key: &str) -> Option<&Reply> {
        self.as_pairs()?
            .into_iter()
            .find(|(k, _)| k.as_bytes() == Some(key.as_bytes()))
            .map(|(_, v)| v)
    }

    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Null | Reply::Bulk(None) | Reply::Array(None))
    }
}

impl fmt::Display for Reply {
    /// One line, redis-cli flavoured: `"text"`, `(error) ERR x`, `(integer) 1`, `(nil)`, `[a, b]`, `{k: v}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list(
            f: &mut fmt::Formatter<'_>,
            open: &str,
            items: &[Reply],
            close: &str,
        ) -> fmt::Result {
            write!(f, "{open}")?;
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    write!(f, ", ")?;
                }
                write!(f, "{item}")?;
            }
            write!(f, "{close}")
        }
        fn map(f: &mut fmt::Formatter<'_>, open: &str, pairs: &[(Reply, Reply)]) -> fmt::Result {
            write!(f, "{open}")?;
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    write!(f, ", ")?;
                }
                write!(f, "{k}: {v}")?;
            }
            write!(f, "}}")
        }
        match self {
            Reply::Simple(s) => write!(f, "+{}", escape_text(s)),
            Reply::Error(s) => write!(f, "(error) {}", escape_text(s)),
            Reply::Integer(n) => write!(f, "(integer) {n}"),
            Reply::Bulk(Some(b)) => write!(f, "\"{}\"", escape_text(b)),
            Reply::Bulk(None) => write!(f, "(nil bulk)"),
            Reply::Array(None) => write!(f, "(nil array)"),
            Reply::Array(Some(items)) => list(f, "[", items, "]"),
            Reply::Null => write!(f, "(null)"),
            Reply::Double(d) => write!(f, "(double) {}", escape_text(d)),
            Reply::Boolean(b) => write!(f, "(boolean) {b}"),
            Reply::BlobError(s) => write!(f, "(blob error) {}", escape_text(s)),
            Reply::Verbatim(s) => write!(f, "(verbatim) \"{}\"", escape_text(s)),
            Reply::BigNumber(n) => write!(f, "(big number) {}", escape_text(n)),
            Reply::Map(pairs) => map(f, "{", pairs),
            Reply::Set(items) => list(f, "(set) {", items, "}"),
            Reply::Push(items) => list(f, "(push) [", items, "]"),
            Reply::Attribute { attributes, value } => {
                map(f, "(attributes) {", attributes)?;
                write!(f, " {value}")
            }
        }
    }
}

/// Escapes bytes for a one-line message, keeping printable ASCII: `\r`, `\n`, `\t`, `\\`, `\"`, `\xNN`.
/// Long inputs are cut with a note of the full length.
pub fn escape_text(bytes: &[u8]) -> String {
    const LIMIT: usize = 600;
    let mut out = String::new();
    for &b in bytes.iter().take(LIMIT) {
        match b {
            b'\r' => out.push_str("\\r"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if bytes.len() > LIMIT {
        out.push_str(&format!("... ({} bytes in all)", bytes.len()));
    }
    out
}

/// [`escape_text`] in double quotes.
pub fn escape(bytes: &[u8]) -> String {
    format!("\"{}\"", escape_text(bytes))
}

/// A raw reply as escaped bytes plus its decoded form when it decodes.
pub fn describe(bytes: &[u8]) -> String {
    match parse_frame(bytes, 0) {
        Ok(Some((reply, end))) if end == bytes.len() => format!("{}  =  {reply}", escape(bytes)),
        _ => escape(bytes),
    }
}

fn describe_command<A: AsRef<[u8]>>(args: &[A]) -> String {
    args.iter()
        .map(|a| escape_text(a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------------------------
// Differential testing
// ---------------------------------------------------------------------------------------------------------

/// One connection to redis-server and one to strata; every method sends the same input to both and compares.
pub struct Pair {
    pub redis: Conn,
    pub strata: Conn,
}

/// How long [`Pair::run_raw`] waits for redis to stay silent before deciding it has said all it will.
const QUIET: Duration = Duration::from_millis(300);

impl Pair {
    /// Sends a command to both servers and asserts the raw replies are byte-identical; returns the reply.
    pub fn run<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<u8> {
        let expected = self.redis.call(args);
        let actual = self.strata.call(args);
        if expected != actual {
            panic!(
                "reply mismatch for: {}\n  redis : {}\n  strata: {}",
                describe_command(args),
                describe(&expected),
                describe(&actual)
            );
        }
        expected
    }

    /// [`Pair::run`] for each command in turn.
    pub fn run_all<A: AsRef<[u8]>>(&mut self, commands: &[&[A]]) {
        for args in commands {
            self.run(args);
        }
    }

    /// For replies whose element order is unspecified (KEYS, SMEMBERS, HKEYS...): compares the top-level
    /// elements as sorted multisets. Non-aggregate replies (errors) must match exactly. Returns the sorted
    /// raw elements.
    pub fn run_unordered<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<Vec<u8>> {
        let expected = self.redis.call(args);
        let actual = self.strata.call(args);
        let sorted = |bytes: &[u8]| -> Option<(u8, Vec<Vec<u8>>)> {
            let mut elements = top_level_elements(bytes)?;
            elements.sort();
            Some((bytes[0], elements))
        };
        match (sorted(&expected), sorted(&actual)) {
            (Some(e), Some(a)) if e == a => e.1,
            (None, None) if expected == actual => Vec::new(),
            _ => panic!(
                "unordered reply mismatch for: {}\n  redis : {}\n  strata: {}",
                describe_command(args),
                describe(&expected),
                describe(&actual)
            ),
        }
    }

    /// Runs a SCAN-family command (`SCAN 0 ...`, `SSCAN key 0 ...`, `HSCAN`, `ZSCAN`) to completion on each
    /// server — cursors are implementation-specific — and asserts both returned the same set of elements
    /// (duplicates allowed by SCAN's contract are removed). `args` must hold the cursor `0` at index
    /// `cursor_at`. Returns the sorted elements.
    pub fn run_scan<A: AsRef<[u8]>>(&mut self, args: &[A], cursor_at: usize) -> Vec<Vec<u8>> {
        let expected = scan_to_end(&mut self.redis, args, cursor_at);
        let actual = scan_to_end(&mut self.strata, args, cursor_at);
        if expected != actual {
            let show = |items: &[Vec<u8>]| {
                items
                    .iter()
                    .map(|i| Reply::decode(i).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            panic!(
                "scan mismatch for: {}\n  redis : [{}]\n  strata: [{}]",
                describe_command(args),
                show(&expected),
                show(&actual)
            );
        }
        expected
    }

    /// Sends bytes verbatim to both servers (malformed protocol, inline commands, pipelines) and asserts that
    /// both answer the same bytes and both close — or both keep open — the connection.
    ///
    /// Redis is the oracle: its output is read until it closes or stays silent for a moment; strata then
    /// has to produce the same number of replies, each within the usual timeout.
    pub fn run_raw(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.redis.send_raw(bytes);
        self.strata.send_raw(bytes);
        self.compare_raw_output(bytes)
    }

    /// [`Pair::run_raw`] writing `chunk` bytes at a time with a short pause in between, so the input arrives
    /// in many partial reads.
    pub fn run_raw_chunked(&mut self, bytes: &[u8], chunk: usize) -> Vec<u8> {
        for piece in bytes.chunks(chunk.max(1)) {
            self.redis.send_raw(piece);
            self.strata.send_raw(piece);
            std::thread::sleep(Duration::from_micros(100));
        }
        self.compare_raw_output(bytes)
    }

    fn compare_raw_output(&mut self, input: &[u8]) -> Vec<u8> {
        let (expected, redis_closed) = self.redis.read_until_quiet(QUIET);
        let reply_count = split_replies(&expected)
            .unwrap_or_else(|why| {
                panic!(
                    "redis sent unparsable output ({why}): {}",
                    escape(&expected)
                )
            })
            .len();
        let mut actual = Vec::new();
        let mut failure = None;
        for _ in 0..reply_count {
            match self.strata.try_read_reply() {
                Ok(reply) => actual.extend_from_slice(&reply),
                Err(e) => {
                    failure = Some(e.to_string());
                    break;
                }
            }
        }
        let strata_closed = match (&failure, redis_closed) {
            (Some(_), _) => self.strata.eof,
            // strata must close too; it gets the full timeout to do so.
            (None, true) => self.strata.is_closed_within(TIMEOUT),
            // strata must stay open and say nothing more. It got the input when redis did, so it has had at
            // least QUIET to answer already.
            (None, false) => self.strata.is_closed_within(QUIET / 4),
        };
        // Anything beyond the replies redis sent (or a partial reply) is part of the difference.
        actual.extend(std::mem::take(&mut self.strata.pending));
        if expected != actual || redis_closed != strata_closed || failure.is_some() {
            let state = |closed: bool| {
                if closed {
                    "closed the connection"
                } else {
                    "kept the connection open"
                }
            };
            let replies_text = |bytes: &[u8]| -> String {
                match split_replies(bytes) {
                    Ok(list) if !list.is_empty() => list
                        .iter()
                        .map(|r| format!("\n      {}", describe(r)))
                        .collect(),
                    _ => format!("\n      {}", escape(bytes)),
                }
            };
            panic!(
                "raw input mismatch for input {}\n  redis  {} after:{}\n  strata {} after:{}{}",
                escape(input),
                state(redis_closed),
                replies_text(&expected),
                state(strata_closed),
                replies_text(&actual),
                failure
                    .map(|f| format!("\n  strata failed: {f}"))
                    .unwrap_or_default()
            );
        }
        expected
    }

    /// Runs `f` against redis and then strata and asserts both results are equal; returns redis's result.
    /// The escape hatch for anything the other methods cannot express.
    pub fn both<T: PartialEq + fmt::Debug>(&mut self, mut f: impl FnMut(&mut Conn) -> T) -> T {
        let expected = f(&mut self.redis);
        let actual = f(&mut self.strata);
        assert_eq!(
            expected, actual,
            "results differ (left: redis, right: strata)"
        );
        expected
    }

    /// For replies with legitimately server-specific content (INFO, CLIENT ID, run ids, HELLO's version):
    /// sends the command to both and asserts `check` accepts each decoded reply. Returns both replies
    /// (redis, strata) for further checks.
    pub fn run_matching<A: AsRef<[u8]>>(
        &mut self,
        args: &[A],
        check: impl Fn(&Reply) -> bool,
    ) -> (Reply, Reply) {
        let expected = Reply::decode(&self.redis.call(args));
        let actual = Reply::decode(&self.strata.call(args));
        for (name, reply) in [("redis", &expected), ("strata", &actual)] {
            assert!(
                check(reply),
                "{name}'s reply to {} rejected by the check:\n  redis : {expected}\n  strata: {actual}",
                describe_command(args)
            );
        }
        (expected, actual)
    }

    /// Sends a command to both and asserts both replies are of the same kind (same RESP type byte, and for
    /// errors the same first word, e.g. `ERR` / `WRONGTYPE`) without comparing contents.
    pub fn run_same_kind<A: AsRef<[u8]>>(&mut self, args: &[A]) -> (Reply, Reply) {
        let expected = self.redis.call(args);
        let actual = self.strata.call(args);
        let kind = |bytes: &[u8]| {
            let reply = Reply::decode(bytes);
            let code = reply
                .error_text()
                .map(|t| t.split(|&b| b == b' ').next().unwrap_or_default().to_vec());
            (bytes[0], code)
        };
        assert!(
            kind(&expected) == kind(&actual),
            "reply kind mismatch for: {}\n  redis : {}\n  strata: {}",
            describe_command(args),
            describe(&expected),
            describe(&actual)
        );
        (Reply::decode(&expected), Reply::decode(&actual))
    }
}

/// Splits a byte stream into complete replies; trailing incomplete bytes are an error.
pub fn split_replies(mut bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    let mut replies = Vec::new();
    while !bytes.is_empty() {
        match frame_len(bytes)? {
            Some(len) => {
                replies.push(bytes[..len].to_vec());
                bytes = &bytes[len..];
            }
            None => return Err(format!("incomplete trailing reply {}", escape(bytes))),
        }
    }
    Ok(replies)
}

/// Raw bytes of each top-level element of an aggregate reply (`*`, `~`, `%` flattened to keys and values);
/// None if the reply is not an aggregate.
fn top_level_elements(bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
    if !matches!(bytes.first(), Some(b'*' | b'~' | b'%')) || bytes.starts_with(b"*-1") {
        return None;
    }
    let header_end = find_crlf(bytes, 0)? + 2;
    split_replies(&bytes[header_end..]).ok()
}

fn scan_to_end<A: AsRef<[u8]>>(conn: &mut Conn, args: &[A], cursor_at: usize) -> Vec<Vec<u8>> {
    const MAX_ROUNDS: usize = 100_000;
    let mut args: Vec<Vec<u8>> = args.iter().map(|a| a.as_ref().to_vec()).collect();
    let mut seen = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let reply = Reply::decode(&conn.call(&args));
        let parts = match reply.as_array() {
            Some([cursor, Reply::Array(Some(items))]) => {
                cursor.as_bytes().map(|c| (c.to_vec(), items.clone()))
            }
            _ => None,
        };
        let Some((cursor, items)) = parts else {
            panic!(
                "{}: unexpected scan reply {reply} to {}",
                conn.label(),
                describe_command(&args)
            );
        };
        for item in items {
            let encoded = encode_reply(&item);
            seen.push(encoded);
        }
        if cursor == b"0" {
            seen.sort();
            seen.dedup();
            return seen;
        }
        args[cursor_at] = cursor;
    }
    panic!(
        "{}: scan did not finish within {MAX_ROUNDS} calls",
        conn.label()
    );
}

/// Re-encodes a reply in RESP (used to compare elements independent of where they came from).
fn encode_reply(reply: &Reply) -> Vec<u8> {
    fn blob(tag: char, data: &[u8]) -> Vec<u8> {
        let mut out = format!("{tag}{}\r\n", data.len()).into_bytes();
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
        out
    }
    fn line(tag: char, data: &[u8]) -> Vec<u8> {
        let mut out = vec![tag as u8];
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
        out
    }
    fn aggregate(tag: char, items: &[Reply]) -> Vec<u8> {
        let mut out = format!("{tag}{}\r\n", items.len()).into_bytes();
        for item in items {
            out.extend(encode_reply(item));
        }
        out
    }
    fn pairs(tag: char, pairs: &[(Reply, Reply)]) -> Vec<u8> {
        let mut out = format!("{tag}{}\r\n", pairs.len()).into_bytes();
        for (k, v) in pairs {
            out.extend(encode_reply(k));
            out.extend(encode_reply(v));
        }
        out
    }
    match reply {
        Reply::Simple(s) => line('+', s),
        Reply::Error(s) => line('-', s),
        Reply::Integer(n) => format!(":{n}\r\n").into_bytes(),
        Reply::Bulk(Some(b)) => blob('$', b),
        Reply::Bulk(None) => b"$-1\r\n".to_vec(),
        Reply::Array(None) => b"*-1\r\n".to_vec(),
        Reply::Array(Some(items)) => aggregate('*', items),
        Reply::Null => b"_\r\n".to_vec(),
        Reply::Double(d) => line(',', d),
        Reply::Boolean(b) => if *b { b"#t\r\n" } else { b"#f\r\n" }.to_vec(),
        Reply::BlobError(s) => blob('!', s),
        Reply::Verbatim(s) => blob('=', s),
        Reply::BigNumber(n) => line('(', n),
        Reply::Map(p) => pairs('%', p),
        Reply::Set(items) => aggregate('~', items),
        Reply::Push(items) => aggregate('>', items),
        Reply::Attribute { attributes, value } => {
            let mut out = pairs('|', attributes);
            out.extend(encode_reply(value));
            out
        }
    }
}

/// A redis-server and a strata started with the same settings, plus a [`Pair`] of connections to them
/// (reachable directly through `Deref`: `diff.run(&["GET", "k"])`).
pub struct Diff {
    pub redis_server: Server,
    pub strata_server: Server,
    conns: Pair,
}

impl Diff {
    /// redis-server and strata (`--threads 2`), default settings.
    pub fn new() -> Diff {
        Diff::start(DEFAULT_THREADS, &[])
    }

    /// strata runs with `--threads threads`.
    pub fn with_threads(threads: usize) -> Diff {
        Diff::start(threads, &[])
    }

    /// Both servers get `config` (redis.conf settings as `--name value`, e.g. `["--requirepass", "pw"]`).
    pub fn with_config(config: &[&str]) -> Diff {
        Diff::start(DEFAULT_THREADS, config)
    }

    pub fn start(threads: usize, config: &[&str]) -> Diff {
        let threads = threads.to_string();
        let mut strata_args = vec!["--threads", threads.as_str()];
        strata_args.extend_from_slice(config);
        // Start both at once: start-up waits dominate short tests.
        let (redis, strata) = std::thread::scope(|s| {
            let redis = s.spawn(|| Server::redis(config));
            let strata = Server::strata(&strata_args);
            (
                redis
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e)),
                strata,
            )
        });
        let conns = Pair {
            redis: redis.conn(),
            strata: strata.conn(),
        };
        Diff {
            redis_server: redis,
            strata_server: strata,
            conns,
        }
    }

    /// A second (third, ...) pair of connections, for tests with several clients.
    pub fn new_conns(&self) -> Pair {
        Pair {
            redis: self.redis_server.conn(),
            strata: self.strata_server.conn(),
        }
    }
}

impl Default for Diff {
    fn default() -> Self {
        Diff::new()
    }
}

impl Deref for Diff {
    type Target = Pair;

    fn deref(&self) -> &Pair {
        &self.conns
    }
}

impl DerefMut for Diff {
    fn deref_mut(&mut self) -> &mut Pair {
        &mut self.conns
    }
}

// ---------------------------------------------------------------------------------------------------------
// Self-tests of the reply framing (no servers)
// ---------------------------------------------------------------------------------------------------------

#[test]
fn harness_frames_resp2_and_resp3_replies() {
    let complete: &[&[u8]] = &[
        b"+OK\r\n",
        b"-ERR x\r\n",
        b":-12\r\n",
        b"$3\r\na\r\n\r\n",
        b"$-1\r\n",
        b"*-1\r\n",
        b"*0\r\n",
        b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
        b"_\r\n",
        b",3.14\r\n",
        b"#t\r\n",
        b"!5\r\nERR x\r\n",
        b"=7\r\ntxt:abc\r\n",
        b"(123456789012345678901234567890\r\n",
        b"%1\r\n+k\r\n~2\r\n:1\r\n:2\r\n",
        b">2\r\n+message\r\n$1\r\nx\r\n",
        b"|1\r\n+ttl\r\n:3\r\n$1\r\nv\r\n",
    ];
    for reply in complete {
        assert_eq!(frame_len(reply), Ok(Some(reply.len())), "{}", escape(reply));
        let mut two = reply.to_vec();
        two.extend_from_slice(reply);
        assert_eq!(
            split_replies(&two).map(|r| r.len()),
            Ok(2),
            "{}",
            escape(reply)
        );
        assert_eq!(
            encode_reply(&Reply::decode(reply)),
            reply.to_vec(),
            "{}",
            escape(reply)
        );
        for cut in 0..reply.len() {
            assert_eq!(
                frame_len(&reply[..cut]),
                Ok(None),
                "prefix {} of {}",
                cut,
                escape(reply)
            );
        }
    }
    for bad in [
        &b"?x\r\n"[..],
        b"$3\r\nabcde",
        b":x\r\n",
        b"$-2\r\n",
        b"#x\r\n",
    ] {
        assert!(
            frame_len(bad).is_err(),
            "{} should be rejected",
            escape(bad)
        );
    }
}

#[test]
fn harness_reply_helpers() {
    let hello = Reply::decode(b"%2\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:7\r\n");
    assert_eq!(hello.get("proto").and_then(Reply::as_int), Some(3));
    assert_eq!(
        hello.to_string(),
        "{\"proto\": (integer) 3, \"id\": (integer) 7}"
    );
    assert_eq!(escape(b"a\r\n\x00\""), "\"a\\r\\n\\x00\\\"\"");
    assert_eq!(
        top_level_elements(b"*2\r\n$1\r\nb\r\n$1\r\na\r\n").map(|e| e.len()),
        Some(2)
    );
    assert_eq!(top_level_elements(b"-ERR x\r\n"), None);
}

// ----- key placement and time helpers shared by the differential suites -----
//
/// A key named `<tag>:<n>` whose hash slot lies in quarter `q` (0..4) of the slot space: with
/// `--threads 4` it lives on shard `q`, with `--threads 2` on shard `q / 2`.
pub fn key_in(q: u16, tag: &str) -> String {
    (0..)
        .map(|n| format!("{tag}:{n}"))
        .find(|k| hash_slot(k) / 4096 == q)
        .expect("some key lands in every quarter")
}

/// COMMAND DOCS of a container on both servers, its subcommands compared as a set (each server
/// lists them in its own order); returns them as sorted `name doc` lines.
pub fn same_doc_subcommands(d: &mut Diff, container: &str) -> Vec<String> {
    let (redis, strata) =
        d.run_matching(&["COMMAND", "DOCS", container], |r| r.as_array().is_some());
    let subcommands = |r: &Reply| -> Vec<String> {
        let doc = r.as_array().unwrap()[1].as_array().unwrap();
        let at = doc
            .iter()
            .position(|f| f.as_bytes() == Some(b"subcommands"))
            .unwrap();
        let mut pairs: Vec<String> = doc[at + 1]
            .as_array()
            .unwrap()
            .chunks(2)
            .map(|p| format!("{} {}", p[0], p[1]))
            .collect();
        pairs.sort();
        pairs
    };
    let (redis, strata) = (subcommands(&redis), subcommands(&strata));
    assert_eq!(redis, strata, "COMMAND DOCS {container}");
    redis
}

/// INFO `blocked_clients` (-1 if the server does not report it).
pub fn blocked_clients(c: &mut Conn) -> i64 {
    let info = c.call_decoded(&["INFO", "clients"]);
    String::from_utf8_lossy(info.as_bytes().unwrap_or_default())
        .lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

/// Waits (bounded, 5 s) until the server reports `n` blocked clients.
pub fn wait_blocked(c: &mut Conn, n: i64) {
    for _ in 0..500 {
        if blocked_clients(c) == n {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the server never reported {n} blocked clients");
}

// The slot function is computed here independently of Strata's own code, as an oracle.

/// CRC16/XMODEM of the key modulo 16384: the hash slot of a key without a hashtag.
pub fn hash_slot(key: &str) -> u16 {
    let mut crc: u16 = 0;
    for &byte in key.as_bytes() {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// The hash slot of `key`, of its `{hashtag}` if it has a non-empty one.
pub fn key_slot(key: &str) -> u16 {
    let tag = key
        .split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'));
    match tag {
        Some((tag, _)) if !tag.is_empty() => hash_slot(tag),
        _ => hash_slot(key),
    }
}

/// The shard owning `key` when strata runs with two threads (slots are split in two halves).
pub fn shard_of(key: &str) -> usize {
    usize::from(hash_slot(key) >= 8192)
}

/// The first key `<tag>:<n>` that lives on `shard` (with two threads).
pub fn key_on(shard: usize, tag: &str) -> String {
    (0..)
        .map(|n| format!("{tag}:{n}"))
        .find(|k| shard_of(k) == shard)
        .expect("some key lands on every shard")
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Asserts both servers report a PTTL for `key` in `(want - 3000, want]` ms.
pub fn pttl_near(d: &mut Diff, key: &str, want: i64) {
    d.run_matching(
        &["PTTL", key],
        |r| matches!(r.as_int(), Some(t) if t <= want && t > want - 3000),
    );
}

/// A small seeded generator (xorshift64*) for the randomized tests: the same seed, the same
/// draws, on every machine.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// The seed and length of a randomized test: `<prefix>_SEED` (mixed with the test's own `seed`,
/// so the tests of one run still differ) and `<prefix>_OPS` from the environment, else `seed` and
/// `default_ops`. For longer runs and other seeds than CI's.
pub fn seed_and_ops(prefix: &str, seed: u64, default_ops: usize) -> (u64, usize) {
    let env = |name: String| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    (
        env(format!("{prefix}_SEED")).map_or(seed, |s| s.wrapping_mul(2).wrapping_add(seed)),
        env(format!("{prefix}_OPS")).map_or(default_ops, |n| n as usize),
    )
}
