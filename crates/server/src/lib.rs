//! The server: threads, listeners, connections and dispatch.
//!
//! `run` starts one thread per shard. Each thread runs its own event loop (strata-rt, on epoll),
//! owns one shard of the keyspace, listens on the same port through SO_REUSEPORT (the kernel
//! spreads connections over threads), serves the connections it accepted, runs jobs other threads
//! send to its inbox, and expires keys in the background. See docs/architecture.md.

mod aof_load;
pub mod conn;
pub mod dispatch;
mod moving;
pub mod process;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use strata_commands::table;
use strata_node::config::Config;
use strata_node::server_log;
use strata_node::services::persist;
use strata_node::state::ServerStats;
use strata_node::ServerState;
use strata_rt::net::{Stream, TcpListener, UnixListener};
use strata_shard::{install, now_ms, with_shard, Inbox, Shard, ShardSet};

fn random_run_id() -> String {
    let mut seed = now_ms() as u64 ^ ((std::process::id() as u64) << 32);
    (0..40)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from_digit((seed % 16) as u32, 16).unwrap_or('0')
        })
        .collect()
}

/// An OS error's text as C's `strerror` gives it (Redis's log lines carry that), without Rust's
/// " (os error N)".
fn os_error_text(e: &std::io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error ") {
        Some(i) => text[..i].to_string(),
        None => text,
    }
}

/// The TCP addresses to listen on, as Redis's `listenToPort` settles them: each `bind` address
/// (`*` is every IPv4 address, `::*` every IPv6 one, a name is resolved) is tried in turn; one
/// that cannot be bound is logged, then skipped when its protocol is unsupported or when it is
/// optional (`-addr`) and not available on this host, and is fatal otherwise. Each shard thread
/// then binds its own listener with SO_REUSEPORT; the probe here binds without it, so an address
/// another process (another Strata included) listens on fails as Redis's own bind does. (Two
/// processes starting in the same instant can still both pass: the window is between this probe
/// and the threads' binds.) `port 0`: no TCP at all.
fn tcp_addrs(config: &Config) -> Result<Vec<SocketAddr>, ()> {
    let port = config.get_i64("port") as u16;
    if port == 0 {
        return Ok(Vec::new());
    }
    let bind = config.get("bind").unwrap_or_default();
    let backlog = config.get_i64("tcp-backlog") as i32;
    let mut addrs = Vec::new();
    for word in bind.split_whitespace() {
        let optional = word.starts_with('-');
        let host = word.strip_prefix('-').unwrap_or(word);
        let v6 = host.contains(':');
        let resolved = match host {
            "*" => Ok(SocketAddr::from(([0u8; 4], port))),
            "::*" => Ok(SocketAddr::from(([0u16; 8], port))),
            _ => (host, port)
                .to_socket_addrs()
                .map_err(|e| os_error_text(&e))
                .and_then(|mut found| {
                    found
                        .find(|a| a.is_ipv6() == v6)
                        .ok_or_else(|| "Name or service not known".to_string())
                }),
        };
        let failure = match resolved {
            Ok(addr) => match strata_rt::net::tcp_listen_socket(addr, backlog, false) {
                Ok(_) => {
                    addrs.push(addr);
                    continue;
                }
                Err(e) => (format!("bind: {}", os_error_text(&e)), e.raw_os_error()),
            },
            Err(why) => (why, None),
        };
        server_log!(
            Warning,
            "Warning: Could not create server TCP listening socket {host}:{port}: {}",
            failure.0
        );
        let skip = match failure.1 {
            Some(libc::EADDRNOTAVAIL) => optional,
            Some(
                libc::ENOPROTOOPT
                | libc::EPROTONOSUPPORT
                | libc::ESOCKTNOSUPPORT
                | libc::EPFNOSUPPORT
                | libc::EAFNOSUPPORT,
            ) => true,
            _ => optional && failure.1.is_none(),
        };
        if !skip {
            return Err(());
        }
    }
    Ok(addrs)
}

/// The Unix-domain socket `unixsocket` names, bound and listening (any file already there is
/// removed first, as Redis does), or None without one. The shard threads each accept on it.
fn unix_listener(config: &Config) -> Result<Option<(String, std::os::fd::OwnedFd)>, String> {
    let path = config.get("unixsocket").unwrap_or_default();
    if path.is_empty() {
        return Ok(None);
    }
    let _ = std::fs::remove_file(&path);
    let perm =
        u32::from_str_radix(&config.get("unixsocketperm").unwrap_or_default(), 8).unwrap_or(0);
    let backlog = config.get_i64("tcp-backlog") as i32;
    match strata_rt::net::unix_listen_socket(std::path::Path::new(&path), backlog, perm) {
        Ok(fd) => Ok(Some((path, fd))),
        Err(e) => Err(format!(
            "Failed opening Unix socket: bind: {}",
            os_error_text(&e)
        )),
    }
}

/// What each shard thread listens on.
#[derive(Clone)]
struct Listen {
    tcp: Vec<SocketAddr>,
    /// The Unix socket's path as configured (what CLIENT LIST shows) and the listening socket.
    unix: Option<(Arc<str>, Arc<std::os::fd::OwnedFd>)>,
}

/// Runs the server until SHUTDOWN or SIGTERM/SIGINT; returns the process exit code. Call it before
/// any other thread exists: with `daemonize yes` it forks first.
pub fn run(config: Config) -> i32 {
    if let Err(e) = process::open_log(&config) {
        eprintln!("{e}");
        return 1;
    }
    let supervisor = process::Supervisor::start(&config);
    if config.get_bool("daemonize") && !supervisor.supervised() {
        if let Err(e) = process::daemonize() {
            server_log!(Warning, "Can't daemonize: {e}");
            return 1;
        }
    }
    process::log_starting(&config);
    strata_node::log::set_server_pid(std::process::id());
    strata_node::log::install_crash_handlers();
    let threads = match config.get_i64("threads") {
        // One per core, within the setting's own maximum (1024: eviction keeps a slot per shard).
        0 => std::thread::available_parallelism()
            .map(|n| n.get().min(1024))
            .unwrap_or(1),
        n => n as usize,
    };
    let port = config.get_i64("port") as u16;
    // The clock's one-off calibration (a 2 ms wait) happens here, not in a shard's first command.
    strata_shard::clock::init();
    let Ok(tcp) = tcp_addrs(&config) else {
        server_log!(Warning, "Failed listening on port {port} (TCP), aborting.");
        return 1;
    };
    let unix = match unix_listener(&config) {
        Ok(u) => u,
        Err(e) => {
            server_log!(Warning, "{e}");
            return 1;
        }
    };
    if tcp.is_empty() && unix.is_none() {
        server_log!(Warning, "Configured to not listen anywhere, exiting.");
        return 1;
    }
    let unix_path = unix.as_ref().map(|(p, _)| p.clone());
    let listen = Listen {
        tcp,
        unix: unix.map(|(p, fd)| (Arc::from(p.as_str()), Arc::new(fd))),
    };
    let remove_socket = || {
        if let Some(path) = &unix_path {
            server_log!(Notice, "Removing the unix socket file.");
            if let Err(e) = std::fs::remove_file(path) {
                server_log!(
                    Warning,
                    "Error removing the unix socket file: {}",
                    os_error_text(&e)
                );
            }
        }
    };
    let pidfile = process::PidFile::create(&config);
    process::log_banner(&config, port, threads);
    process::log_inert_settings(&config);
    server_log!(Warning, "Server initialized");
    if let Some(values) = config.get("oom-score-adj-values") {
        strata_node::oom::warn_if_unordered(&values);
    }
    // As Redis, a score the kernel refuses at start-up is logged and start-up goes on.
    let _ = config.apply_oom_score();
    let databases = config.get_i64("databases") as usize;
    let (shards, inboxes) = ShardSet::new(threads);
    strata_shard::evict::set_shards(threads);
    let state = Arc::new(ServerState {
        shards,
        config,
        table: table(),
        clients: Mutex::new(Default::default()),
        next_client_id: AtomicU64::new(1),
        stats: ServerStats::default(),
        pubsub: Default::default(),
        started_ms: now_ms(),
        run_id: random_run_id(),
        shutting_down: AtomicBool::new(false),
        exit_code: AtomicI64::new(0),
        sleep: |d| Box::pin(strata_rt::sleep(d)),
        pause: Default::default(),
        io_engine: "epoll",
    });

    strata_node::services::server::crash::install(&state);
    persist::init(state.started_ms);
    // A dataset to load: clients are answered -LOADING from the first moment they can connect.
    let rdb = persist::rdb_path(&state.config);
    let appendonly = state.config.get_bool("appendonly");
    if rdb.exists() || appendonly {
        persist::mark_loading();
    }
    // Before any thread listens: a client may be served, and signal us, as soon as one does (a
    // SIGTERM that came first used to kill the process outright).
    let signalled = state.clone();
    let handler = ctrlc::set_handler(move || {
        // The handler runs on ctrlc's own thread, not in signal context: it may log.
        server_log!(
            Warning,
            "Received SIGTERM or SIGINT, scheduling shutdown..."
        );
        signalled.request_shutdown()
    });
    if let Err(e) = handler {
        server_log!(Warning, "Can't install the SIGTERM/SIGINT handlers: {e}");
    }
    // After ctrlc's, whose "termination" handlers take SIGHUP for a shutdown too.
    process::install_sighup();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    for (id, inbox) in inboxes.into_iter().enumerate() {
        let (state, ready, listen) = (state.clone(), ready_tx.clone(), listen.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("strata-shard-{id}"))
            .spawn(move || thread_main(id, databases, inbox, state, listen, ready));
        if let Err(e) = spawned {
            server_log!(Warning, "Can't start shard thread {id}: {e}");
            pidfile.remove();
            remove_socket();
            return 1;
        }
    }
    drop(ready_tx);
    for _ in 0..threads {
        let failure = match ready_rx.recv() {
            Ok(Ok(())) => continue,
            Ok(Err(e)) => e,
            Err(_) => "a shard thread died during start-up".to_string(),
        };
        server_log!(Warning, "{failure}");
        server_log!(Warning, "Failed listening on port {port} (TCP), aborting.");
        pidfile.remove();
        remove_socket();
        return 1;
    }
    // With the AOF on, the dataset is the AOF's (Redis's loadDataFromDisk); appending starts
    // once it is loaded, so its replay is not appended again.
    strata_node::services::aof::set_reloader(aof_load::reload);
    let loaded = if appendonly {
        if !aof_load::load_at_startup(&state) {
            // Redis exits on the spot (its last log line is the reason), pidfile and all.
            std::process::exit(1);
        }
        match strata_node::services::aof::start(&state.config) {
            Ok(()) => true,
            Err(e) => {
                server_log!(Warning, "{e}");
                false
            }
        }
    } else {
        persist::load_at_startup(&state)
    };
    persist::end_loading();
    if !loaded {
        pidfile.remove();
        remove_socket();
        return 1;
    }
    if !listen.tcp.is_empty() {
        server_log!(Notice, "Ready to accept connections");
    }
    if let Some(path) = &unix_path {
        server_log!(
            Notice,
            "The server is now ready to accept connections at {path}"
        );
    }
    supervisor.ready();

    loop {
        while !state.shutting_down.load(Ordering::SeqCst) {
            process::reopen_log_if_asked();
            std::thread::sleep(Duration::from_millis(20));
        }
        if persist::is_shutdown_prepared() || final_save(&state) {
            break;
        }
        // The save failed: Redis keeps running.
        state.shutting_down.store(false, Ordering::SeqCst);
    }
    supervisor.stopping();
    // Connections were shut down by request_shutdown; give in-flight replies a moment to flush.
    std::thread::sleep(Duration::from_millis(50));
    pidfile.remove();
    remove_socket();
    server_log!(Warning, "Strata is now ready to exit, bye bye...");
    state.exit_code.load(Ordering::SeqCst) as i32
}

/// A shutdown by signal: Redis's prepareForShutdown (the log line, the final save when save
/// points exist). Returns false if the save failed and the server must keep running.
fn final_save(state: &Arc<ServerState>) -> bool {
    server_log!(Warning, "User requested shutdown...");
    if persist::cancel_background() {
        server_log!(Warning, "There is a child saving an .rdb. Killing it!");
    }
    if persist::save_points(&state.config).is_empty() {
        return true;
    }
    server_log!(Notice, "Saving the final RDB snapshot before exiting.");
    let (tx, rx) = mpsc::channel();
    let st = state.clone();
    state.shards.post(
        0,
        Box::new(move || {
            strata_rt::spawn(async move {
                persist::wait_idle().await;
                let r = persist::save(&st, strata_shard::new_owner()).await;
                let _ = tx.send(r);
            });
        }),
    );
    match rx.recv() {
        Ok(Ok(())) => true,
        _ => {
            server_log!(Warning, "Error trying to save the DB, can't exit.");
            false
        }
    }
}

/// The server's cron for persistence, on shard 0's thread: save points, BGSAVE SCHEDULE.
async fn persist_cron(state: Arc<ServerState>) {
    loop {
        strata_rt::sleep(Duration::from_millis(100)).await;
        persist::cron(&state).await;
    }
}

fn thread_main(
    id: usize,
    databases: usize,
    inbox: Inbox,
    state: Arc<ServerState>,
    listen: Listen,
    ready: mpsc::Sender<Result<(), String>>,
) {
    let fut = thread_loop(id, databases, inbox, state, listen, ready.clone());
    if let Err(e) = strata_rt::block_on(fut) {
        let _ = ready.send(Err(format!("can't start the event loop: {e}")));
    }
}

async fn thread_loop(
    id: usize,
    databases: usize,
    inbox: Inbox,
    state: Arc<ServerState>,
    listen: Listen,
    ready: mpsc::Sender<Result<(), String>>,
) {
    let mut shard = Shard::new(id, databases);
    if let Some(versions) = state.shards.versions(id) {
        shard.attach_versions(versions.clone());
    }
    strata_node::access::apply_access_policy(&mut shard, &state.config);
    install(shard);
    dispatch::set_thread_state(state.clone());
    let pubsub = state.pubsub.clone();
    strata_shard::notify::install_sink(Box::new(move |notes| pubsub.publish_notes(notes)));
    strata_rt::spawn(strata_shard::rounds());
    strata_rt::spawn(state.shards.flusher());
    strata_rt::spawn(inbox.run());
    strata_rt::spawn(expire_loop(state.clone()));
    if id == 0 {
        strata_rt::spawn(persist_cron(state.clone()));
    }
    let backlog = state.config.get_i64("tcp-backlog") as i32;
    let mut listeners = Vec::new();
    for addr in &listen.tcp {
        match TcpListener::bind(*addr, backlog, true) {
            Ok(l) => listeners.push(l),
            Err(e) => {
                let _ = ready.send(Err(format!("could not bind {addr}: {e}")));
                return;
            }
        }
    }
    let unix = match &listen.unix {
        Some((path, fd)) => match fd.try_clone().and_then(UnixListener::from_fd) {
            Ok(l) => Some((path.clone(), l)),
            Err(e) => {
                let _ = ready.send(Err(format!("could not listen on {path}: {e}")));
                return;
            }
        },
        None => None,
    };
    let _ = ready.send(Ok(()));
    for l in listeners {
        strata_rt::spawn(accept_loop(l, state.clone()));
    }
    if let Some((path, l)) = unix {
        strata_rt::spawn(unix_accept_loop(l, path, state.clone()));
    }
    // The loop runs while the spawned tasks do; this one only keeps it going.
    std::future::pending::<()>().await;
}

/// Whether a new connection may be served: not while shutting down, and not beyond `maxclients`
/// (the client is told so, and the connection counted as rejected).
fn admit(stream: Stream, state: &ServerState) -> Option<Stream> {
    if state.shutting_down.load(Ordering::Relaxed) {
        return None;
    }
    let max = state.config.get_i64("maxclients").max(1) as u64;
    if state.stats.connected_clients.load(Ordering::Relaxed) >= max {
        with_shard(|s| s.stats.rejected_connections += 1);
        strata_rt::spawn(reject(stream));
        return None;
    }
    Some(stream)
}

async fn accept_loop(listener: TcpListener, state: Arc<ServerState>) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                server_log!(Verbose, "Accepted {peer}");
                let Some(stream) = admit(stream, &state) else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let laddr = stream
                    .local_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                let peer = conn::Peer {
                    addr: peer.to_string(),
                    laddr,
                    unix: false,
                };
                strata_rt::spawn(conn::serve(stream, peer, state.clone()));
            }
            Err(e) => {
                server_log!(Warning, "Accepting client connection: {e}");
                strata_rt::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// Accepts on the Unix socket: a client there is addressed as `<path>:0` on both ends, as Redis
/// shows it.
async fn unix_accept_loop(listener: UnixListener, path: Arc<str>, state: Arc<ServerState>) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                server_log!(Verbose, "Accepted connection to {path}");
                let Some(stream) = admit(stream, &state) else {
                    continue;
                };
                let addr = format!("{path}:0");
                let peer = conn::Peer {
                    laddr: addr.clone(),
                    addr,
                    unix: true,
                };
                strata_rt::spawn(conn::serve(stream, peer, state.clone()));
            }
            Err(e) => {
                server_log!(Warning, "Accepting client connection: {e}");
                strata_rt::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

async fn reject(stream: Stream) {
    let _ = stream
        .write_all(b"-ERR max number of clients reached\r\n")
        .await;
}

/// Background work per shard: active expiry and incremental rehashing, every 1000/hz ms (sooner
/// while a backlog remains), and once a second the allocator's purge of this thread's free memory.
async fn expire_loop(state: Arc<ServerState>) {
    let mut last_release = now_ms();
    loop {
        let now = now_ms();
        let began = strata_shard::now_us();
        let backlog = !strata_shard::cron_paused() && with_shard(|s| s.cron(now));
        conn::sweep_idle_inputs(now);
        let took = (strata_shard::now_us() - began).max(0) as u64;
        if strata_node::services::latency::monitors(took) {
            strata_node::services::latency::add_sample("expire-cycle", took);
        }
        if !backlog && now - last_release >= 1000 {
            last_release = now;
            strata_node::memory::release_free_memory();
        }
        let pause = if backlog {
            1
        } else {
            1000 / state.config.get_i64("hz").clamp(1, 500) as u64
        };
        strata_rt::sleep(Duration::from_millis(pause)).await;
    }
}
