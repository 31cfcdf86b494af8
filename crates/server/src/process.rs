//! The process's outer shell, in the order `run` uses it: the log set up from the configuration,
//! `daemonize`, the start-up lines and banner (Redis's `main` and `redisAsciiArt` in server.c),
//! and the pidfile. Each line keeps Redis 7.0's wording where a log scraper or Redis's test suite
//! looks for it (` PID: <pid>`, `Ready to accept`, `Failed listening on port`, `ready to exit, bye
//! bye`), and says Strata where Redis's text names the server.

use std::io;
use std::path::PathBuf;

use strata_node::config::Config;
use strata_node::log::{self, Level, REDIS_VERSION};
use strata_node::server_log;

/// Where a daemon without a `pidfile` writes its pid (Redis's `CONFIG_DEFAULT_PID_FILE`).
const DEFAULT_PIDFILE: &str = "/var/run/redis.pid";

/// Points the log where the configuration says: `loglevel`, `logfile` (opened here, before any
/// fork, so an unwritable path is reported on the terminal), `syslog-*`, `crash-log-enabled`.
pub fn open_log(config: &Config) -> Result<(), String> {
    let level = config.get("loglevel").unwrap_or_default();
    log::set_level(Level::parse(&level).unwrap_or(Level::Notice));
    log::set_crash_log(config.get_bool("crash-log-enabled"));
    let file = config.get("logfile").unwrap_or_default();
    log::open_file(&file).map_err(|e| format!("Can't open the log file: {e}"))?;
    if config.get_bool("syslog-enabled") {
        log::open_syslog(
            &config.get("syslog-ident").unwrap_or_default(),
            &config.get("syslog-facility").unwrap_or_default(),
        )?;
    }
    Ok(())
}

/// Detaches from the terminal: fork, `setsid`, fork again (the daemon can never reacquire a
/// terminal), standard streams to /dev/null. Must run before any thread is started: only the
/// calling thread survives a fork. The parents exit 0 at once.
pub fn daemonize() -> io::Result<()> {
    // SAFETY: single-threaded here (the caller's contract); the children go on with this process's
    // memory, the parents leave with _exit (no destructors, no flushing of shared buffers).
    unsafe {
        for round in 0..2 {
            match libc::fork() {
                -1 => return Err(io::Error::last_os_error()),
                0 => {}
                _ => libc::_exit(0),
            }
            if round == 0 && libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
        }
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if fd != -1 {
            libc::dup2(fd, 0);
            libc::dup2(fd, 1);
            libc::dup2(fd, 2);
            if fd > 2 {
                libc::close(fd);
            }
        }
    }
    Ok(())
}

/// `supervised`: how the server tells a supervisor it is ready, settled at start-up as Redis's
/// `redisIsSupervised` settles it. `auto` picks upstart when `UPSTART_JOB` is set, else systemd
/// when `NOTIFY_SOCKET` is. Under systemd the server sends sd_notify's datagrams to
/// `$NOTIFY_SOCKET` (a path, or `@name` in the abstract namespace) itself: a loading status now,
/// then the ready status and `READY=1` once it listens, `STOPPING=1` at shutdown. Under upstart it
/// stops itself (SIGSTOP), which is how upstart's `expect stop` learns it is up. A supervised
/// server does not daemonize.
pub struct Supervisor {
    systemd: Option<String>,
}

impl Supervisor {
    /// Reads the mode and the environment; logs as Redis does when a mode asked for cannot be
    /// used (the server then runs unsupervised).
    pub fn start(config: &Config) -> Supervisor {
        let mut mode = config.get("supervised").unwrap_or_default();
        if mode == "auto" {
            if std::env::var_os("UPSTART_JOB").is_some() {
                server_log!(Verbose, "Upstart supervision detected.");
                mode = "upstart".into();
            } else if std::env::var_os("NOTIFY_SOCKET").is_some() {
                server_log!(Verbose, "Systemd supervision detected.");
                mode = "systemd".into();
            }
        }
        match mode.as_str() {
            "upstart" => {
                if std::env::var_os("UPSTART_JOB").is_none() {
                    server_log!(
                        Warning,
                        "upstart supervision requested, but UPSTART_JOB not found!"
                    );
                    return Supervisor { systemd: None };
                }
                server_log!(
                    Notice,
                    "supervised by upstart, will stop to signal readiness."
                );
                // SAFETY: raise has no preconditions; upstart resumes the process.
                unsafe { libc::raise(libc::SIGSTOP) };
                // SAFETY: no other thread exists yet (run's contract), so none reads the
                // environment meanwhile.
                unsafe { std::env::remove_var("UPSTART_JOB") };
                Supervisor { systemd: None }
            }
            "systemd" => {
                let Some(socket) = std::env::var("NOTIFY_SOCKET")
                    .ok()
                    .filter(|s| !s.is_empty())
                else {
                    server_log!(
                        Warning,
                        "systemd supervision error: NOTIFY_SOCKET not found!"
                    );
                    return Supervisor { systemd: None };
                };
                let supervisor = Supervisor {
                    systemd: Some(socket),
                };
                if !supervisor.notify("STATUS=Strata is loading...\n") {
                    return Supervisor { systemd: None };
                }
                server_log!(
                    Notice,
                    "Supervised by systemd. Please make sure you set appropriate values for TimeoutStartSec and TimeoutStopSec in your service unit."
                );
                supervisor
            }
            _ => Supervisor { systemd: None },
        }
    }

    /// Whether a supervisor was found (then `daemonize` is ignored, as Redis ignores it).
    pub fn supervised(&self) -> bool {
        self.systemd.is_some()
    }

    /// Sends one sd_notify message to systemd, if supervised by it; false (logged) on failure.
    pub fn notify(&self, message: &str) -> bool {
        let Some(socket) = &self.systemd else {
            return true;
        };
        match sd_notify(socket, message) {
            Ok(()) => true,
            Err(e) => {
                server_log!(
                    Warning,
                    "systemd supervision error: sd_notify: -{}",
                    e.raw_os_error().unwrap_or(libc::EIO)
                );
                false
            }
        }
    }

    /// The server listens: systemd hears it.
    pub fn ready(&self) {
        self.notify("STATUS=Ready to accept connections\n");
        self.notify("READY=1\n");
    }

    /// The server is shutting down.
    pub fn stopping(&self) {
        self.notify("STOPPING=1\n");
    }
}

/// One datagram of sd_notify's protocol to `socket` (`NOTIFY_SOCKET`: a path, or `@name` for
/// Linux's abstract namespace).
fn sd_notify(socket: &str, message: &str) -> io::Result<()> {
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let sock = UnixDatagram::unbound()?;
    let addr = match socket.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())?
        }
        None => SocketAddr::from_pathname(socket)?,
    };
    sock.send_to_addr(message.as_bytes(), &addr)?;
    Ok(())
}

/// The first lines, written before the server is up (role `C`, as Redis's are).
pub fn log_starting(config: &Config) {
    let pid = std::process::id();
    server_log!(Warning, "oO0OoO0OoO0Oo Strata is starting oO0OoO0OoO0Oo");
    server_log!(
        Warning,
        "Strata version={}, redis_version={REDIS_VERSION}, bits={}, commit=00000000, modified=0, pid={pid}, just started",
        env!("CARGO_PKG_VERSION"),
        usize::BITS
    );
    match config.config_file() {
        Some(_) => server_log!(Warning, "Configuration loaded"),
        None => server_log!(
            Warning,
            "Warning: no config file specified, using the default config. In order to specify a config file use strata /path/to/redis.conf"
        ),
    }
}

/// Redis 7.0's logo, the version line naming Strata, and the last line naming the shard threads
/// where Redis has its web address.
const LOGO: &str = r#"                _._                                                  
           _.-``__ ''-._                                             
      _.-``    `.  `_.  ''-._           {version}
  .-`` .-```.  ```\/    _.,_ ''-._                                  
 (    '      ,       .-`  | `,    )     Running in standalone mode
 |`-._`-...-` __...-.``-._|'` _.-'|     Port: {port}
 |    `-._   `._    /     _.-'    |     PID: {pid}
  `-._    `-._  `-./  _.-'    _.-'                                   
 |`-._`-._    `-.__.-'    _.-'_.-'|                                  
 |    `-._`-._        _.-'_.-'    |           {threads}
  `-._    `-._`-.__.-'_.-'    _.-'                                   
 |`-._`-._    `-.__.-'    _.-'_.-'|                                  
 |    `-._`-._        _.-'_.-'    |                                  
  `-._    `-._`-.__.-'_.-'    _.-'                                   
      `-._    `-.__.-'    _.-'                                       
          `-._        _.-'                                           
              `-.__.-'                                               

"#;

/// The banner, once the server listens: the logo with `always-show-logo yes` (or a terminal on
/// stdout with no logfile nor syslog, as Redis decides), else Redis's one line and a second one
/// that names Strata and carries ` PID: <pid>`, which Redis's test suite waits for.
pub fn log_banner(config: &Config, port: u16, threads: usize) {
    let pid = std::process::id();
    let version = format!(
        "Strata {} (Redis {REDIS_VERSION} compatible) {} bit",
        env!("CARGO_PKG_VERSION"),
        usize::BITS
    );
    let threads = format!("{threads} shard threads, epoll");
    // SAFETY: isatty has no preconditions.
    let tty = unsafe { libc::isatty(1) } == 1;
    let show_logo = config.get_bool("always-show-logo")
        || (tty
            && !config.get_bool("syslog-enabled")
            && config.get("logfile").unwrap_or_default().is_empty());
    if show_logo {
        let logo = LOGO
            .replace("{version}", &version)
            .replace("{port}", &port.to_string())
            .replace("{pid}", &pid.to_string())
            .replace("{threads}", &threads);
        log::raw(Level::Notice, &logo);
    } else {
        server_log!(Notice, "Running mode=standalone, port={port}.");
        server_log!(Notice, "{version}, {threads}, PID: {pid}");
    }
}

/// Start-up's warning for each setting Strata stores but cannot act on yet (set to a value other
/// than its default, it would otherwise be silently ignored), after the banner as Redis logs its
/// start-up warnings.
pub fn log_inert_settings(config: &Config) {
    for s in config.inert_settings() {
        server_log!(
            Warning,
            "WARNING: '{} {}' is stored but has no effect: Strata does not have {} yet.",
            s.name,
            s.value,
            s.feature
        );
    }
}

static HANGUP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_sighup(_: libc::c_int) {
    HANGUP.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// SIGHUP asks for the log file to be opened again (after a log rotation moved it): the handler
/// only raises a flag, which [`reopen_log_if_asked`] reads. (Redis 7.0 ignores SIGHUP; it opens
/// its log file anew for every line, so a rotated file is left at once. Strata keeps the file
/// open, and takes SIGHUP as the signal to let go of it, as most daemons do.)
pub fn install_sighup() {
    // SAFETY: installs a handler that only stores to an atomic.
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_sighup as *const () as usize;
        act.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut act.sa_mask);
        libc::sigaction(libc::SIGHUP, &act, std::ptr::null_mut());
    }
}

/// Reopens the log file if SIGHUP came since the last call, logging it in the new file.
pub fn reopen_log_if_asked() {
    if !HANGUP.swap(false, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    server_log!(Warning, "Received SIGHUP, reopening logfile");
    if let Err(e) = log::reopen_file() {
        server_log!(Warning, "Failed to reopen the log file: {e}");
        return;
    }
    server_log!(Notice, "Log file reopened.");
}

/// The pidfile: `pidfile`, or Redis's default path for a daemon without one. Written at start-up,
/// removed at a clean shutdown.
pub struct PidFile(Option<PathBuf>);

impl PidFile {
    /// Writes the pid where the configuration asks. A failure is logged and start-up goes on, as
    /// Redis's does.
    pub fn create(config: &Config) -> PidFile {
        let mut path = config.get("pidfile").unwrap_or_default();
        let daemon = config.get_bool("daemonize");
        if path.is_empty() && daemon {
            // Shown by CONFIG GET afterwards, as Redis does.
            let _ = config.set_at_startup("pidfile", DEFAULT_PIDFILE);
            path = DEFAULT_PIDFILE.to_string();
        }
        if path.is_empty() {
            return PidFile(None);
        }
        if let Err(e) = std::fs::write(&path, format!("{}\n", std::process::id())) {
            server_log!(Warning, "Failed to write PID file: {e}");
            return PidFile(None);
        }
        if daemon {
            log::remove_on_crash(&path);
        }
        PidFile(Some(PathBuf::from(path)))
    }

    /// Removes the file at a clean shutdown.
    pub fn remove(&self) {
        if let Some(path) = &self.0 {
            server_log!(Notice, "Removing the pid file.");
            let _ = std::fs::remove_file(path);
        }
    }
}
