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
