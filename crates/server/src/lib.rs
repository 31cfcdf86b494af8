//! The server: threads, listeners, connections and dispatch.
//!
//! `run` starts one thread per shard. Each thread runs its own event loop (strata-rt, on epoll),
//! owns one shard of the keyspace, listens on the same port through SO_REUSEPORT (the kernel
//! spreads connections over threads), serves the connections it accepted, runs jobs other threads
//! send to its inbox, and expires keys in the background. See docs/architecture.md.

mod aof_load;
pub mod conn;
pub mod dispatch;
mod listen;
mod moving;
pub mod process;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use strata_commands::table;
use strata_node::config::Config;
use strata_node::server_log;
use strata_node::services::persist;
use strata_node::state::ServerStats;
use strata_node::ServerState;
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
    // SAFETY: no other thread exists yet (run's contract), and the arguments were read.
    unsafe { strata_node::proctitle::init() };
    config.apply_proc_title();
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
    let Ok(tcp) = listen::tcp_addrs(
        port,
        &config.get("bind").unwrap_or_default(),
        config.get_i64("tcp-backlog") as i32,
        &[],
    ) else {
        server_log!(Warning, "Failed listening on port {port} (TCP), aborting.");
        return 1;
    };
    let unix = match listen::unix_listener(&config) {
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
    let listen = listen::Listen {
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
                    listen::os_error_text(&e)
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

    persist::init(state.started_ms);
    // A dataset to load: clients are answered -LOADING from the first moment they can connect.
    let rdb = persist::rdb_path(&state.config);
    let appendonly = state.config.get_bool("appendonly");
    if rdb.exists() || appendonly {
        persist::mark_loading();
    }
    strata_node::services::server::crash::install(&state);
    // Before any thread listens: a client may be served, and signal us, as soon as one does (a
    // SIGTERM that came first used to kill the process outright).
    let handler = ctrlc::set_handler(move || {
        // The handler runs on ctrlc's own thread, not in signal context: it may log. As Redis,
        // the shutdown waits for the next cron tick (SHUTDOWN ABORT may call it off); a second
        // signal before then exits at once.
        if strata_node::services::server::schedule_shutdown() {
            server_log!(
                Warning,
                "Received SIGTERM or SIGINT, scheduling shutdown..."
            );
        } else {
            server_log!(Warning, "You insist... exiting now.");
            std::process::exit(1);
        }
    });
    if let Err(e) = handler {
        server_log!(Warning, "Can't install the SIGTERM/SIGINT handlers: {e}");
    }
    // After ctrlc's, whose "termination" handlers take SIGHUP for a shutdown too.
    process::install_sighup();
    listen::init(threads, &listen.tcp);
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
            if strata_node::services::server::due_shutdown() {
                state.request_shutdown();
                break;
            }
            process::reopen_log_if_asked();
            std::thread::sleep(Duration::from_millis(20));
        }
        // SHUTDOWN did its own log line and save; a signal's shutdown saves here (with save
        // points), and a failed save keeps the server running, as Redis.
        if persist::is_shutdown_prepared() || final_save(&state) {
            break;
        }
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
    listen: listen::Listen,
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
    listen: listen::Listen,
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
    if let Err(e) = listen::start_thread(id, &listen, &state) {
        let _ = ready.send(Err(e));
        return;
    }
    let _ = ready.send(Ok(()));
    // The loop runs while the spawned tasks do; this one only keeps it going.
    std::future::pending::<()>().await;
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
