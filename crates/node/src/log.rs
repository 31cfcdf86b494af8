//! Redis's log: one line per event, `pid:role dd Mon yyyy hh:mm:ss.mmm <level> message`, where the
//! role is `M` (the server), `C` (a child, or the process before the server has started) or `X`
//! (sentinel), and the level mark is `.` debug, `-` verbose, `*` notice, `#` warning (Redis's
//! `serverLogRaw` in server.c). Operators' scrapers and Redis's own test suite read these lines.
//!
//! The log is process-wide state of its own, set up once by whoever starts the server (this module
//! knows nothing of the configuration): [`open_file`] (`logfile`; stdout until then),
//! [`open_syslog`], [`set_level`] (also on CONFIG SET `loglevel`), [`set_server_pid`] (from then on
//! lines of this process are the server's, `M`). Every field is an atomic, so a line costs one
//! level check when it is filtered out and one `write(2)` when it is not: lines from several
//! threads never interleave (the file is opened `O_APPEND`).
//!
//! **Crash reports.** [`install_crash_handlers`] installs a panic hook and handlers for SIGSEGV,
//! SIGBUS, SIGABRT, SIGFPE and SIGILL. Each writes Redis's bug report (`=== REDIS BUG REPORT START`,
//! what happened, `------ STACK TRACE ------`, `=== REDIS BUG REPORT END`) to the log and ends the
//! process non-zero: a panic by `abort()` (SIGABRT), a signal by itself, re-raised with its default
//! action, as Redis does. [`crash_report`] is the same report for a caller that decides to crash
//! (DEBUG PANIC may use it, or simply panic).
//!
//! What the signal handler does is async-signal-safe as far as practical: it formats into a stack
//! buffer (`core::fmt`, no allocation), reads the clock with `clock_gettime`, writes with `write(2)`
//! and walks the stack with glibc's `backtrace` and `backtrace_symbols_fd`, which write frames to
//! the fd without allocating (`backtrace` is called once at installation, so its lazy loading of
//! libgcc is done before any crash). Not safe, and documented as such: the local time offset is the
//! one cached by the last ordinary log line (no `localtime_r`, which locks), and the frames are
//! addresses in the binary (`strata(+0x1a2b3c)`) rather than names — resolve them with
//! `addr2line -e strata`; the panic path, which runs in an ordinary context, prints a symbolized
//! `std::backtrace` instead. The handler runs on the thread's alternate signal stack (std installs
//! one per thread), so a stack overflow is reported too.

use std::ffi::CString;
use std::fmt::{self, Write as _};
use std::io;
use std::os::fd::IntoRawFd;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU8, Ordering};
use std::sync::OnceLock;

/// The version Strata speaks for, as Redis's log and INFO print it.
pub const REDIS_VERSION: &str = "7.0.15";

/// A log level, lowest first; a line is written when its level is at least the configured one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Debug = 0,
    Verbose = 1,
    Notice = 2,
    Warning = 3,
    /// As a configured level: log nothing.
    Nothing = 4,
}

impl Level {
    /// A `loglevel` value (`debug`, `verbose`, `notice`, `warning`, `nothing`), any case.
    pub fn parse(name: &str) -> Option<Level> {
        Some(match name.to_ascii_lowercase().as_str() {
            "debug" => Level::Debug,
            "verbose" => Level::Verbose,
            "notice" => Level::Notice,
            "warning" => Level::Warning,
            "nothing" => Level::Nothing,
            _ => return None,
        })
    }

    fn from_u8(v: u8) -> Level {
        match v {
            0 => Level::Debug,
            1 => Level::Verbose,
            2 => Level::Notice,
            3 => Level::Warning,
            _ => Level::Nothing,
        }
    }

    /// The character a line of this level carries.
    fn mark(self) -> char {
        match self {
            Level::Debug => '.',
            Level::Verbose => '-',
            Level::Notice => '*',
            Level::Warning | Level::Nothing => '#',
        }
    }

    /// syslog's priority for this level (Redis's `syslogLevelMap`).
    fn syslog_priority(self) -> c_int {
        match self {
            Level::Debug => libc::LOG_DEBUG,
            Level::Verbose => libc::LOG_INFO,
            Level::Notice => libc::LOG_NOTICE,
            Level::Warning | Level::Nothing => libc::LOG_WARNING,
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Notice as u8);
/// Where lines go: stdout until `open_file` names a file.
static FD: AtomicI32 = AtomicI32::new(1);
static SYSLOG: AtomicBool = AtomicBool::new(false);
/// The server process's pid; lines from any other pid (a fork child) carry role `C`.
static SERVER_PID: AtomicI32 = AtomicI32::new(0);
static ROLE: AtomicU8 = AtomicU8::new(b'M');
/// Seconds east of UTC, as the last ordinary line found it (read by the crash path).
static UTC_OFFSET: AtomicI64 = AtomicI64::new(0);
static CRASH_LOG: AtomicBool = AtomicBool::new(true);
/// Set by the first crash report: a second fault (or the abort that ends a panic) dies at once.
static CRASHING: AtomicBool = AtomicBool::new(false);
/// A file to remove when the process crashes (Redis removes a daemon's pidfile).
static REMOVE_ON_CRASH: OnceLock<CString> = OnceLock::new();
/// The `logfile` path ("" for stdout), for [`reopen_file`].
static LOG_PATH: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
/// What the server adds to a crash report after the stack trace (see [`set_crash_extras`]).
static CRASH_EXTRAS: OnceLock<CrashExtras> = OnceLock::new();
/// The reporter thread's wake-up pipe (write end), -1 until it runs.
static REPORTER_PIPE: AtomicI32 = AtomicI32::new(-1);
/// What the crashing thread captured for the reporter ([`CrashExtras::capture`]).
static CRASH_TOKEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// The reporter has written its sections.
static REPORTED: AtomicBool = AtomicBool::new(false);

/// Sets the lowest level written (`loglevel`).
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// The configured level.
pub fn level() -> Level {
    Level::from_u8(LEVEL.load(Ordering::Relaxed))
}

/// Whether a line of `level` would be written.
pub fn enabled(level: Level) -> bool {
    level != Level::Nothing && level as u8 >= LEVEL.load(Ordering::Relaxed)
}

/// Sends the log to `path`, appended to (created mode 0644 if missing), or to stdout for `""`
/// (Redis's `logfile`). The file stays open until [`reopen_file`].
pub fn open_file(path: &str) -> io::Result<()> {
    *LOG_PATH.lock().unwrap_or_else(|e| e.into_inner()) = path.to_string();
    let fd = if path.is_empty() {
        1
    } else {
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)?
            .into_raw_fd()
    };
    let old = FD.swap(fd, Ordering::SeqCst);
    if old > 2 {
        // SAFETY: `old` came from `into_raw_fd` above and nothing else owns it.
        unsafe { libc::close(old) };
    }
    Ok(())
}

/// Opens the log file again by its name (SIGHUP, after a log rotation moved it away): lines go
/// to a file of that name from now on. The new file takes the old one's descriptor number
/// (`dup2`, atomic), so a line being written meanwhile by another thread lands in one file or the
/// other, never in a descriptor that was closed or reused. Nothing to do for stdout.
pub fn reopen_file() -> io::Result<()> {
    let path = LOG_PATH.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let fd = FD.load(Ordering::SeqCst);
    if path.is_empty() || fd <= 2 {
        return Ok(());
    }
    let new = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&path)?
        .into_raw_fd();
    // SAFETY: both descriptors are open; dup2 replaces `fd` with the new file atomically, and
    // `new`, ours alone, is closed after.
    let done = unsafe { libc::dup2(new, fd) };
    let err = io::Error::last_os_error();
    // SAFETY: as above.
    unsafe { libc::close(new) };
    if done < 0 {
        return Err(err);
    }
    Ok(())
}

/// Also sends every line to syslog (`syslog-enabled yes`) with `ident` and `facility` (`user`,
/// `local0`…`local7`, as `syslog-facility`).
pub fn open_syslog(ident: &str, facility: &str) -> Result<(), String> {
    let facility = syslog_facility(facility).ok_or_else(|| format!("bad facility {facility}"))?;
    let ident = CString::new(ident).map_err(|_| "ident contains a NUL byte".to_string())?;
    // openlog keeps the pointer: the string lives as long as the process.
    let ident: &'static CString = Box::leak(Box::new(ident));
    // SAFETY: `ident` is a valid C string that is never freed.
    unsafe {
        libc::openlog(
            ident.as_ptr(),
            libc::LOG_PID | libc::LOG_NDELAY | libc::LOG_NOWAIT,
            facility,
        )
    };
    SYSLOG.store(true, Ordering::Relaxed);
    Ok(())
}

/// The syslog facility named by a `syslog-facility` value.
pub fn syslog_facility(name: &str) -> Option<c_int> {
    Some(match name.to_ascii_lowercase().as_str() {
        "user" => libc::LOG_USER,
        "local0" => libc::LOG_LOCAL0,
        "local1" => libc::LOG_LOCAL1,
        "local2" => libc::LOG_LOCAL2,
        "local3" => libc::LOG_LOCAL3,
        "local4" => libc::LOG_LOCAL4,
        "local5" => libc::LOG_LOCAL5,
        "local6" => libc::LOG_LOCAL6,
        "local7" => libc::LOG_LOCAL7,
        _ => return None,
    })
}

/// Marks the calling process as the server: its lines carry the role (`M`) from now on, lines of
/// any other process (a fork child) `C`. Until this is called every line carries `C`, as Redis's
/// first start-up lines do.
pub fn set_server_pid(pid: u32) {
    SERVER_PID.store(pid as i32, Ordering::Relaxed);
}

/// The server's role character: `M` (master, the default), `S` (replica), `X` (sentinel).
pub fn set_role(role: u8) {
    ROLE.store(role, Ordering::Relaxed);
}

/// Whether a crash writes its report (`crash-log-enabled`).
pub fn set_crash_log(on: bool) {
    CRASH_LOG.store(on, Ordering::Relaxed);
}

/// A file the crash path removes before the process dies (a daemon's pidfile, as Redis does).
pub fn remove_on_crash(path: &str) {
    if let Ok(c) = CString::new(path) {
        let _ = REMOVE_ON_CRASH.set(c);
    }
}

/// Logs one line at `level` (see [`server_log!`](crate::server_log)).
pub fn log(level: Level, args: fmt::Arguments<'_>) {
    if !enabled(level) {
        return;
    }
    let now = wall_clock();
    UTC_OFFSET.store(local_offset(now.0), Ordering::Relaxed);
    let mut line = String::with_capacity(128);
    let _ = write_prefix(&mut line, level, now);
    let start = line.len();
    let _ = line.write_fmt(args);
    if SYSLOG.load(Ordering::Relaxed) {
        to_syslog(level, &line[start..]);
    }
    line.push('\n');
    write_fd(line.as_bytes());
}

/// Writes `text` as it is, without the line prefix (Redis's `LL_RAW`: the ASCII-art logo).
pub fn raw(level: Level, text: &str) {
    if !enabled(level) {
        return;
    }
    if SYSLOG.load(Ordering::Relaxed) {
        to_syslog(level, text);
    }
    write_fd(text.as_bytes());
}

/// `server_log!(Warning, "Failed listening on port {} (TCP), aborting.", port)`: one log line at
/// a [`Level`](crate::log::Level) named by its variant, formatted only when the level is on.
#[macro_export]
macro_rules! server_log {
    ($level:ident, $($arg:tt)+) => {
        if $crate::log::enabled($crate::log::Level::$level) {
            $crate::log::log($crate::log::Level::$level, format_args!($($arg)+))
        }
    };
}

fn to_syslog(level: Level, msg: &str) {
    if let Ok(c) = CString::new(msg) {
        // SAFETY: a constant "%s" format with one valid C string argument.
        unsafe { libc::syslog(level.syslog_priority(), c"%s".as_ptr(), c.as_ptr()) };
    }
}

/// Writes all of `bytes` to the log fd: one `write(2)` unless the kernel takes less. Errors are
/// dropped, as Redis drops them (there is nowhere left to report them).
fn write_fd(mut bytes: &[u8]) {
    let fd = FD.load(Ordering::Relaxed);
    while !bytes.is_empty() {
        // SAFETY: writes from a valid slice; `fd` is ours or stdout.
        let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
        if n > 0 {
            bytes = &bytes[n as usize..];
        } else if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        } else {
            return;
        }
    }
}

/// (seconds, milliseconds) since the epoch, by `clock_gettime` (async-signal-safe).
fn wall_clock() -> (i64, u32) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    (ts.tv_sec, (ts.tv_nsec / 1_000_000) as u32)
}

/// The local time zone's offset from UTC at `secs`, in seconds.
fn local_offset(secs: i64) -> i64 {
    let t = secs as libc::time_t;
    // SAFETY: `tm` is plain data, filled by localtime_r from a valid time.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&t, &mut tm).is_null() {
            return 0;
        }
        tm.tm_gmtoff
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// The civil date of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `pid:role dd Mon yyyy hh:mm:ss.mmm <mark> ` for a line written now. Allocation-free: the crash
/// path formats into a stack buffer with it.
fn write_prefix(out: &mut impl fmt::Write, level: Level, (secs, ms): (i64, u32)) -> fmt::Result {
    // SAFETY: getpid has no preconditions and is async-signal-safe.
    let pid = unsafe { libc::getpid() };
    let role = if pid == SERVER_PID.load(Ordering::Relaxed) {
        ROLE.load(Ordering::Relaxed) as char
    } else {
        'C'
    };
    let local = secs + UTC_OFFSET.load(Ordering::Relaxed);
    let (year, month, day) = civil_from_days(local.div_euclid(86_400));
    let tod = local.rem_euclid(86_400);
    write!(
        out,
        "{pid}:{role} {day:02} {} {year} {:02}:{:02}:{:02}.{ms:03} {} ",
        MONTHS[(month - 1) as usize],
        tod / 3600,
        tod / 60 % 60,
        tod % 60,
        level.mark()
    )
}

// ---------------------------------------------------------------------------------------------
// Crash reports
// ---------------------------------------------------------------------------------------------

const REPORT_START: &str = "\n\n=== REDIS BUG REPORT START: Cut & paste starting from here ===\n";
const REPORT_END: &str =
    "\n=== REDIS BUG REPORT END. Make sure to include from START to END. ===\n\n\
       This is Strata, a Redis-compatible server: please report the crash to its maintainers\n\
       with the report above and the command that was running.\n\n";

/// A fixed buffer that `core::fmt` writes into without allocating; what does not fit is dropped.
struct StackBuf {
    buf: [u8; 1024],
    len: usize,
}

impl StackBuf {
    fn new() -> StackBuf {
        StackBuf {
            buf: [0; 1024],
            len: 0,
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// One warning line, formatted without allocating (the crash path's `server_log!`).
fn crash_line(args: fmt::Arguments<'_>) {
    let mut line = StackBuf::new();
    let _ = write_prefix(&mut line, Level::Warning, wall_clock());
    let _ = line.write_fmt(args);
    let _ = line.write_str("\n");
    write_fd(line.bytes());
}

extern "C" {
    // glibc's execinfo.h; not bound by the libc crate.
    fn backtrace(buffer: *mut *mut c_void, size: c_int) -> c_int;
    fn backtrace_symbols_fd(buffer: *const *mut c_void, size: c_int, fd: c_int);
}

/// The calling thread's name, by `prctl(PR_GET_NAME)` (async-signal-safe), into `buf`.
fn thread_name(buf: &mut [u8; 16]) -> &str {
    // SAFETY: PR_GET_NAME writes at most 16 bytes, NUL included, into `buf`.
    unsafe { libc::prctl(libc::PR_GET_NAME, buf.as_mut_ptr()) };
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    std::str::from_utf8(&buf[..len]).unwrap_or("?")
}

/// Installs the panic hook and the fatal-signal handlers that write a crash report. Call once,
/// after the log is opened and before the server's threads start.
pub fn install_crash_handlers() {
    // The first backtrace() loads libgcc's unwinder (it allocates): do it now, not in a handler.
    let mut frames = [std::ptr::null_mut::<c_void>(); 4];
    // SAFETY: the buffer holds 4 frames.
    unsafe { backtrace(frames.as_mut_ptr(), 4) };
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| info.payload().downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(a panic without a message)");
        let place = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        report_panic(msg, &place);
    }));
    for sig in [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGABRT,
    ] {
        // SAFETY: installs a handler with a valid function pointer and an empty mask.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_fatal_signal as *const () as usize;
            act.sa_flags =
                libc::SA_SIGINFO | libc::SA_NODEFER | libc::SA_RESETHAND | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
}

/// What a crash report carries after the stack trace: Redis's `------ INFO OUTPUT ------`,
/// `------ CLIENT LIST OUTPUT ------` and `------ CURRENT CLIENT INFO ------` sections, made by
/// whoever knows the server (this module does not). `capture` runs on the crashing thread, maybe
/// in a signal handler, and must only read (a thread-local, say); `report` gets what it returned.
#[derive(Clone, Copy)]
pub struct CrashExtras {
    pub capture: fn() -> usize,
    pub report: fn(usize) -> String,
}

/// Registers the crash report's extra sections and starts the thread that makes them. Making
/// them allocates and takes locks, which the crashing thread must not (it may have been stopped
/// inside the allocator, or holding a lock): a reporter thread, waiting on a pipe from now on,
/// makes them in an ordinary context, while the crashing thread waits for it at most 5 seconds.
pub fn set_crash_extras(extras: CrashExtras) {
    if CRASH_EXTRAS.set(extras).is_err() {
        return;
    }
    let mut fds = [0 as c_int; 2];
    // SAFETY: `fds` has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return;
    }
    let (read_end, write_end) = (fds[0], fds[1]);
    let spawned = std::thread::Builder::new()
        .name("strata-crash".into())
        .spawn(move || {
            let mut byte = 0u8;
            // SAFETY: reads one byte into `byte`.
            while unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) } != 1 {}
            write_fd((extras.report)(CRASH_TOKEN.load(Ordering::SeqCst)).as_bytes());
            REPORTED.store(true, Ordering::SeqCst);
        });
    if spawned.is_ok() {
        REPORTER_PIPE.store(write_end, Ordering::SeqCst);
    }
}

/// Has the reporter thread write the extra sections, waiting for it at most 5 seconds
/// (async-signal-safe: a pipe write and sleeps).
fn write_crash_extras() {
    let (Some(extras), pipe) = (CRASH_EXTRAS.get(), REPORTER_PIPE.load(Ordering::SeqCst)) else {
        return;
    };
    if pipe < 0 {
        return;
    }
    CRASH_TOKEN.store((extras.capture)(), Ordering::SeqCst);
    // SAFETY: writes one byte from a live buffer; write(2) is async-signal-safe.
    if unsafe { libc::write(pipe, b"x".as_ptr().cast(), 1) } != 1 {
        return;
    }
    let pause = libc::timespec {
        tv_sec: 0,
        tv_nsec: 10_000_000,
    };
    for _ in 0..500 {
        if REPORTED.load(Ordering::SeqCst) {
            return;
        }
        // SAFETY: nanosleep is async-signal-safe; `pause` is a valid timespec.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
}

/// Writes a crash report for a failure the caller detected (`msg`, as a panic's message) and ends
/// the process with SIGABRT. What DEBUG PANIC or an assertion reports through.
pub fn crash_report(msg: &str) -> ! {
    report_panic(msg, "");
    std::process::abort()
}

/// A panic's report: Redis's `_serverPanic` lines and a symbolized backtrace, then the process
/// aborts (also in builds that unwind: a thread of the server that died would leave its shard's
/// keys unreachable).
fn report_panic(msg: &str, place: &str) {
    if CRASHING.swap(true, Ordering::SeqCst) {
        return;
    }
    if CRASH_LOG.load(Ordering::Relaxed) {
        write_fd(REPORT_START.as_bytes());
        crash_line(format_args!(
            "------------------------------------------------"
        ));
        crash_line(format_args!(
            "!!! Software Failure. Press left mouse button to continue"
        ));
        if place.is_empty() {
            crash_line(format_args!("Guru Meditation: {msg}"));
        } else {
            crash_line(format_args!("Guru Meditation: {msg} #{place}"));
        }
        let mut name = [0u8; 16];
        crash_line(format_args!(
            "Strata {} (Redis {REDIS_VERSION} compatible) panicked in thread {}",
            env!("CARGO_PKG_VERSION"),
            thread_name(&mut name)
        ));
        let trace = std::backtrace::Backtrace::force_capture();
        write_fd(format!("\n------ STACK TRACE ------\n\nBacktrace:\n{trace}\n").as_bytes());
        write_crash_extras();
        write_fd(REPORT_END.as_bytes());
    }
    remove_crash_file();
    std::process::abort();
}

fn remove_crash_file() {
    if let Some(path) = REMOVE_ON_CRASH.get() {
        // SAFETY: a valid C string; unlink is async-signal-safe.
        unsafe { libc::unlink(path.as_ptr()) };
    }
}

/// The fatal-signal handler: Redis's `sigsegvHandler` report, then the signal again with its
/// default action (the handler was installed SA_RESETHAND), so the process dies of it.
extern "C" fn on_fatal_signal(sig: c_int, info: *mut libc::siginfo_t, _ctx: *mut c_void) {
    if !CRASHING.swap(true, Ordering::SeqCst) && CRASH_LOG.load(Ordering::Relaxed) {
        write_fd(REPORT_START.as_bytes());
        // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
        let info = unsafe { &*info };
        crash_line(format_args!(
            "Strata {} (Redis {REDIS_VERSION} compatible) crashed by signal: {sig}, si_code: {}",
            env!("CARGO_PKG_VERSION"),
            info.si_code
        ));
        if matches!(
            sig,
            libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGILL
        ) {
            // SAFETY: si_addr is valid for these signals.
            crash_line(format_args!("Accessing address: {:p}", unsafe {
                info.si_addr()
            }));
        }
        if info.si_code == libc::SI_USER {
            // SAFETY: si_pid and si_uid are valid for a signal sent by kill(2).
            let (pid, uid) = unsafe { (info.si_pid(), info.si_uid()) };
            crash_line(format_args!("Killed by PID: {pid}, UID: {uid}"));
        }
        let mut name = [0u8; 16];
        crash_line(format_args!("Crashed thread: {}", thread_name(&mut name)));
        write_fd(b"\n------ STACK TRACE ------\n\nBacktrace:\n");
        let mut frames = [std::ptr::null_mut::<c_void>(); 64];
        // SAFETY: the buffer holds 64 frames; backtrace_symbols_fd writes them to the log fd.
        unsafe {
            let n = backtrace(frames.as_mut_ptr(), frames.len() as c_int);
            backtrace_symbols_fd(frames.as_ptr(), n, FD.load(Ordering::Relaxed));
        }
        write_crash_extras();
        write_fd(REPORT_END.as_bytes());
    }
    remove_crash_file();
    // SAFETY: restores the default action and raises the signal again: the process dies of it.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_filter() {
        assert_eq!(Level::parse("VERBOSE"), Some(Level::Verbose));
        assert_eq!(Level::parse("nothing"), Some(Level::Nothing));
        assert_eq!(Level::parse("loud"), None);
        let marks: String = [Level::Debug, Level::Verbose, Level::Notice, Level::Warning]
            .iter()
            .map(|l| l.mark())
            .collect();
        assert_eq!(marks, ".-*#");
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn prefix_has_redis_shape() {
        let mut s = String::new();
        // 2020-05-25 17:37:14.652 UTC, with no offset cached.
        UTC_OFFSET.store(0, Ordering::Relaxed);
        write_prefix(&mut s, Level::Notice, (1_590_428_234, 652)).unwrap();
        let pid = std::process::id();
        assert_eq!(s, format!("{pid}:C 25 May 2020 17:37:14.652 * "));
    }

    #[test]
    fn stack_buffer_truncates() {
        let mut b = StackBuf::new();
        for _ in 0..200 {
            let _ = b.write_str("0123456789");
        }
        assert_eq!(b.bytes().len(), 1024);
    }

    /// A panic writes the report with its message and a symbolized backtrace, then the process
    /// dies of SIGABRT. Runs in a child (this test binary again): the report ends the process.
    #[test]
    fn a_panic_writes_a_report_and_aborts() {
        const CHILD: &str = "STRATA_LOG_PANIC_CHILD";
        if let Some(path) = std::env::var_os(CHILD) {
            open_file(path.to_str().unwrap()).unwrap();
            set_server_pid(std::process::id());
            install_crash_handlers();
            panic!("the answer is {}", 42);
        }
        let path = std::env::temp_dir().join(format!("strata-log-panic-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "log::tests::a_panic_writes_a_report_and_aborts"])
            .env(CHILD, &path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        let log = std::fs::read_to_string(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}\n{log}");
        let mut at = 0;
        for needle in [
            "=== REDIS BUG REPORT START: Cut & paste starting from here ===",
            ":M ",
            "# Guru Meditation: the answer is 42 #crates/node/src/log.rs:",
            "------ STACK TRACE ------",
            "a_panic_writes_a_report_and_aborts",
            "=== REDIS BUG REPORT END. Make sure to include from START to END. ===",
        ] {
            let found = log[at..]
                .find(needle)
                .unwrap_or_else(|| panic!("{needle:?} missing or out of order:\n{log}"));
            at += found + needle.len();
        }
        // The abort that ends the panic is not reported a second time.
        assert_eq!(log.matches("BUG REPORT START").count(), 1, "{log}");
    }

    #[test]
    fn syslog_facilities() {
        assert_eq!(syslog_facility("LOCAL3"), Some(libc::LOG_LOCAL3));
        assert_eq!(syslog_facility("kern"), None);
    }
}
