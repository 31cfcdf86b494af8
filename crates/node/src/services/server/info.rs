//! INFO: per-thread counters gathered with one message per shard and rendered with a pure
//! function ([`render_info`]) in Redis's section and field names.

use super::*;

/// INFO sections in Redis's output order, and whether a bare INFO includes them; `strata` is
/// Strata's own.
pub(super) const SECTIONS: [(&str, bool); 14] = [
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
    ("strata", true),
];

/// The sections INFO's arguments ask for (case-insensitive; `default`, `all`, `everything`;
/// `module_list` is another name for `modules`; unknown names ask for nothing).
pub fn info_sections(args: &[Bytes]) -> Vec<&'static str> {
    let mut wanted = vec![false; SECTIONS.len()];
    let mut mark = |pred: &dyn Fn(&str, bool) -> bool| {
        for (i, (name, default)) in SECTIONS.iter().enumerate() {
            if pred(name, *default) {
                wanted[i] = true;
            }
        }
    };
    if args.is_empty() {
        mark(&|_, default| default);
    }
    for a in args {
        let a = String::from_utf8_lossy(crate::args::c_string(a)).to_ascii_lowercase();
        match a.as_str() {
            "default" => mark(&|_, default| default),
            "all" | "everything" => mark(&|_, _| true),
            "module_list" => mark(&|name, _| name == "modules"),
            other => mark(&|name, _| name == other),
        }
    }
    SECTIONS
        .iter()
        .zip(wanted)
        .filter(|(_, w)| *w)
        .map(|((name, _), _)| *name)
        .collect()
}

/// Everything INFO reports, gathered from the server state, every shard and the OS.
#[derive(Default, Clone, Debug)]
pub struct InfoData {
    pub os: String,
    pub multiplexing_api: String,
    pub process_id: u32,
    pub run_id: String,
    pub tcp_port: i64,
    pub server_time_usec: i64,
    pub uptime_secs: i64,
    pub hz: i64,
    pub lru_clock: u32,
    pub executable: String,
    pub config_file: String,
    pub connected_clients: usize,
    pub maxclients: i64,
    pub max_input_buffer: u64,
    pub max_output_buffer: u64,
    pub blocked_clients: usize,
    pub used_memory: usize,
    pub used_memory_rss: usize,
    pub used_memory_peak: usize,
    pub total_system_memory: usize,
    pub maxmemory: i64,
    pub maxmemory_policy: String,
    pub last_save: i64,
    /// Key modifications since the last save (`rdb_changes_since_last_save`).
    pub dirty: u64,
    /// INFO persistence's other fields.
    pub persist: PersistInfo,
    pub lazyfree_pending_objects: usize,
    pub connections_received: u64,
    pub commands_processed: u64,
    pub ops_per_sec: u64,
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    pub input_kbps: f64,
    pub output_kbps: f64,
    pub rejected_connections: u64,
    pub expired_keys: u64,
    pub evicted_keys: u64,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub pubsub_channels: usize,
    pub pubsub_patterns: usize,
    pub pubsubshard_channels: usize,
    pub error_replies: u64,
    /// Error replies per code (INFO errorstats), by code.
    pub errorstats: Vec<(String, u64)>,
    pub replid: String,
    pub cpu: CpuTimes,
    /// (full command name, counters) of every command run at least once.
    pub commandstats: Vec<(&'static str, CmdStat)>,
    /// INFO latencystats's lines (gathered only when asked for).
    pub latencystats: Vec<String>,
    /// (database, keys, keys with a TTL) of every non-empty database.
    pub keyspace: Vec<(usize, usize, usize)>,
    pub threads: usize,
    /// Per shard: message batches its mailbox received and wake-ups they cost (`ShardSet`).
    pub hops: Vec<(u64, u64)>,
    /// Reads across shards run without locks, and those of them run again the locked way.
    pub unlocked_reads: (u64, u64),
    pub io_engine: String,
    /// Reply buffers shrunk and expanded by the clients' cron (`settings::reply_buffer`).
    pub reply_buffer_resizes: (u64, u64),
}

/// INFO persistence's fields beyond the change count and the last save time.
#[derive(Default, Clone, Debug)]
pub struct PersistInfo {
    pub loading: bool,
    pub loading_start_time: i64,
    pub loading_total_bytes: u64,
    pub loading_loaded_bytes: u64,
    pub loading_loaded_perc: f64,
    pub loading_eta_seconds: i64,
    pub loading_loaded_keys: u64,
    pub bgsave_in_progress: bool,
    pub last_bgsave_ok: bool,
    pub last_bgsave_time_sec: i64,
    pub current_bgsave_time_sec: i64,
    pub saves: u64,
    pub last_cow_size: u64,
    pub last_load_loaded: u64,
    pub last_load_expired: u64,
    /// The running save: copy-on-write bytes so far, keys written, keys at the start.
    pub current_cow: u64,
    pub current_keys_done: u64,
    pub current_keys_total: u64,
}

/// CPU seconds from getrusage(2): the process and its waited-for children.
#[derive(Default, Clone, Copy, Debug)]
pub struct CpuTimes {
    pub sys: (i64, i64),
    pub user: (i64, i64),
    pub sys_children: (i64, i64),
    pub user_children: (i64, i64),
}

/// Redis's bytesToHuman: `123B`, `1.18M`, `23.54G`...
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: [(&str, u32); 5] = [("K", 1), ("M", 2), ("G", 3), ("T", 4), ("P", 5)];
    if n < 1024 {
        return format!("{n}B");
    }
    for (unit, power) in UNITS {
        if n < 1024u64.pow(power + 1) {
            return format!("{:.2}{unit}", n as f64 / 1024f64.powi(power as i32));
        }
    }
    format!("{n}B")
}

/// Renders INFO's text: `# Section` headers, `field:value` lines, sections separated by a blank
/// line, every line ending in CRLF.
pub fn render_info(sections: &[&str], d: &InfoData) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let mut first = true;
    let mut section = |out: &mut String, title: &str| {
        if !first {
            out.push_str("\r\n");
        }
        first = false;
        out.push_str("# ");
        out.push_str(title);
        out.push_str("\r\n");
    };
    macro_rules! field {
        ($out:expr, $name:expr, $($v:tt)*) => {{
            let _ = write!($out, "{}:", $name);
            let _ = write!($out, $($v)*);
            $out.push_str("\r\n");
        }};
    }
    let secs = |(s, us): (i64, i64)| format!("{s}.{us:06}");
    for &name in sections {
        match name {
            "server" => {
                section(&mut out, "Server");
                field!(out, "redis_version", "{REDIS_VERSION}");
                field!(out, "redis_git_sha1", "00000000");
                field!(out, "redis_git_dirty", "0");
                field!(out, "redis_mode", "standalone");
                field!(out, "os", "{}", d.os);
                field!(out, "arch_bits", "{}", usize::BITS);
                field!(out, "monotonic_clock", "POSIX clock_gettime");
                field!(out, "multiplexing_api", "{}", d.multiplexing_api);
                field!(out, "process_id", "{}", d.process_id);
                field!(out, "process_supervised", "no");
                field!(out, "run_id", "{}", d.run_id);
                field!(out, "tcp_port", "{}", d.tcp_port);
                field!(out, "server_time_usec", "{}", d.server_time_usec);
                field!(out, "uptime_in_seconds", "{}", d.uptime_secs);
                field!(out, "uptime_in_days", "{}", d.uptime_secs / 86400);
                field!(out, "hz", "{}", d.hz);
                field!(out, "configured_hz", "{}", d.hz);
                field!(out, "lru_clock", "{}", d.lru_clock);
                field!(out, "executable", "{}", d.executable);
                field!(out, "config_file", "{}", d.config_file);
                field!(out, "io_threads_active", "0");
            }
            "clients" => {
                section(&mut out, "Clients");
                field!(out, "connected_clients", "{}", d.connected_clients);
                field!(out, "cluster_connections", "0");
                field!(out, "maxclients", "{}", d.maxclients);
                field!(
                    out,
                    "client_recent_max_input_buffer",
                    "{}",
                    d.max_input_buffer
                );
                field!(
                    out,
                    "client_recent_max_output_buffer",
                    "{}",
                    d.max_output_buffer
                );
                field!(out, "blocked_clients", "{}", d.blocked_clients);
                field!(
                    out,
                    "tracking_clients",
                    "{}",
                    strata_shard::tracking::active()
                );
            }
            "memory" => {
                section(&mut out, "Memory");
                let human = |n: usize| bytes_to_human(n as u64);
                field!(out, "used_memory", "{}", d.used_memory);
                field!(out, "used_memory_human", "{}", human(d.used_memory));
                field!(out, "used_memory_rss", "{}", d.used_memory_rss);
                field!(out, "used_memory_rss_human", "{}", human(d.used_memory_rss));
                field!(out, "used_memory_peak", "{}", d.used_memory_peak);
                field!(
                    out,
                    "used_memory_peak_human",
                    "{}",
                    human(d.used_memory_peak)
                );
                let peak_perc = if d.used_memory_peak == 0 {
                    0.0
                } else {
                    d.used_memory as f64 * 100.0 / d.used_memory_peak as f64
                };
                field!(out, "used_memory_peak_perc", "{peak_perc:.2}%");
                field!(out, "total_system_memory", "{}", d.total_system_memory);
                field!(
                    out,
                    "total_system_memory_human",
                    "{}",
                    human(d.total_system_memory)
                );
                field!(out, "maxmemory", "{}", d.maxmemory);
                field!(
                    out,
                    "maxmemory_human",
                    "{}",
                    bytes_to_human(d.maxmemory.max(0) as u64)
                );
                field!(out, "maxmemory_policy", "{}", d.maxmemory_policy);
                let frag = if d.used_memory == 0 {
                    0.0
                } else {
                    d.used_memory_rss as f64 / d.used_memory as f64
                };
                field!(out, "mem_fragmentation_ratio", "{frag:.2}");
                field!(
                    out,
                    "mem_fragmentation_bytes",
                    "{}",
                    d.used_memory_rss as i64 - d.used_memory as i64
                );
                // Nothing is left out of the count maxmemory is checked against (no replica
                // buffers, no AOF buffer).
                field!(out, "mem_not_counted_for_evict", "0");
                field!(out, "mem_allocator", "{ALLOCATOR}");
                field!(
                    out,
                    "lazyfree_pending_objects",
                    "{}",
                    d.lazyfree_pending_objects
                );
            }
            "persistence" => {
                section(&mut out, "Persistence");
                let p = &d.persist;
                field!(out, "loading", "{}", u8::from(p.loading));
                field!(out, "async_loading", "0");
                field!(out, "current_cow_peak", "{}", p.current_cow);
                field!(out, "current_cow_size", "{}", p.current_cow);
                field!(out, "current_cow_size_age", "0");
                let perc = if p.current_keys_total > 0 {
                    p.current_keys_done as f64 * 100.0 / p.current_keys_total as f64
                } else {
                    0.0
                };
                field!(out, "current_fork_perc", "{perc:.2}");
                field!(
                    out,
                    "current_save_keys_processed",
                    "{}",
                    p.current_keys_done
                );
                field!(out, "current_save_keys_total", "{}", p.current_keys_total);
                if p.loading {
                    field!(out, "loading_start_time", "{}", p.loading_start_time);
                    field!(out, "loading_total_bytes", "{}", p.loading_total_bytes);
                    field!(out, "loading_rdb_used_mem", "0");
                    field!(out, "loading_loaded_bytes", "{}", p.loading_loaded_bytes);
                    field!(out, "loading_loaded_perc", "{:.2}", p.loading_loaded_perc);
                    field!(out, "loading_eta_seconds", "{}", p.loading_eta_seconds);
                }
                field!(out, "rdb_changes_since_last_save", "{}", d.dirty);
                field!(
                    out,
                    "rdb_bgsave_in_progress",
                    "{}",
                    u8::from(p.bgsave_in_progress)
                );
                field!(out, "rdb_last_save_time", "{}", d.last_save);
                field!(
                    out,
                    "rdb_last_bgsave_status",
                    "{}",
                    if p.last_bgsave_ok { "ok" } else { "err" }
                );
                field!(
                    out,
                    "rdb_last_bgsave_time_sec",
                    "{}",
                    p.last_bgsave_time_sec
                );
                field!(
                    out,
                    "rdb_current_bgsave_time_sec",
                    "{}",
                    p.current_bgsave_time_sec
                );
                field!(out, "rdb_saves", "{}", p.saves);
                field!(out, "rdb_last_cow_size", "{}", p.last_cow_size);
                field!(out, "rdb_last_load_keys_expired", "{}", p.last_load_expired);
                field!(out, "rdb_last_load_keys_loaded", "{}", p.last_load_loaded);
                field!(out, "aof_enabled", "0");
                field!(out, "aof_rewrite_in_progress", "0");
                field!(out, "aof_last_bgrewrite_status", "ok");
                field!(out, "aof_last_write_status", "ok");
            }
            "stats" => {
                section(&mut out, "Stats");
                field!(
                    out,
                    "total_connections_received",
                    "{}",
                    d.connections_received
                );
                field!(out, "total_commands_processed", "{}", d.commands_processed);
                field!(out, "instantaneous_ops_per_sec", "{}", d.ops_per_sec);
                field!(out, "total_net_input_bytes", "{}", d.net_input_bytes);
                field!(out, "total_net_output_bytes", "{}", d.net_output_bytes);
                field!(out, "instantaneous_input_kbps", "{:.2}", d.input_kbps);
                field!(out, "instantaneous_output_kbps", "{:.2}", d.output_kbps);
                field!(out, "rejected_connections", "{}", d.rejected_connections);
                field!(out, "expired_keys", "{}", d.expired_keys);
                field!(out, "evicted_keys", "{}", d.evicted_keys);
                field!(out, "evicted_clients", "{}", crate::clients::evicted());
                let (total, current) = strata_shard::evict::exceeded_ms(strata_shard::now_us());
                field!(out, "total_eviction_exceeded_time", "{}", total);
                field!(out, "current_eviction_exceeded_time", "{}", current);
                field!(out, "keyspace_hits", "{}", d.keyspace_hits);
                field!(out, "keyspace_misses", "{}", d.keyspace_misses);
                field!(out, "pubsub_channels", "{}", d.pubsub_channels);
                field!(out, "pubsub_patterns", "{}", d.pubsub_patterns);
                field!(out, "pubsubshard_channels", "{}", d.pubsubshard_channels);
                let (keys, items, prefixes) = strata_shard::tracking::totals();
                field!(out, "tracking_total_keys", "{}", keys);
                field!(out, "tracking_total_items", "{}", items);
                field!(out, "tracking_total_prefixes", "{}", prefixes);
                // Errors in what a master sends or an AOF replays: Strata has neither yet.
                field!(out, "unexpected_error_replies", "0");
                field!(out, "total_error_replies", "{}", d.error_replies);
                field!(out, "reply_buffer_shrinks", "{}", d.reply_buffer_resizes.0);
                field!(out, "reply_buffer_expands", "{}", d.reply_buffer_resizes.1);
            }
            "replication" => {
                section(&mut out, "Replication");
                field!(out, "role", "master");
                field!(out, "connected_slaves", "0");
                field!(out, "master_failover_state", "no-failover");
                field!(out, "master_replid", "{}", d.replid);
                field!(out, "master_replid2", "{}", "0".repeat(40));
                field!(out, "master_repl_offset", "0");
                field!(out, "second_repl_offset", "-1");
                field!(out, "repl_backlog_active", "0");
                field!(out, "repl_backlog_size", "1048576");
                field!(out, "repl_backlog_first_byte_offset", "0");
                field!(out, "repl_backlog_histlen", "0");
            }
            "cpu" => {
                section(&mut out, "CPU");
                field!(out, "used_cpu_sys", "{}", secs(d.cpu.sys));
                field!(out, "used_cpu_user", "{}", secs(d.cpu.user));
                field!(out, "used_cpu_sys_children", "{}", secs(d.cpu.sys_children));
                field!(
                    out,
                    "used_cpu_user_children",
                    "{}",
                    secs(d.cpu.user_children)
                );
            }
            "modules" => section(&mut out, "Modules"),
            "errorstats" => {
                section(&mut out, "Errorstats");
                for (code, n) in &d.errorstats {
                    field!(out, format!("errorstat_{code}"), "count={n}");
                }
            }
            "latencystats" => {
                section(&mut out, "Latencystats");
                for line in &d.latencystats {
                    out.push_str(line);
                    out.push_str("\r\n");
                }
            }
            "commandstats" => {
                section(&mut out, "Commandstats");
                for (cmd, st) in &d.commandstats {
                    let per_call = if st.calls == 0 {
                        0.0
                    } else {
                        st.usec as f64 / st.calls as f64
                    };
                    let _ = write!(
                        out,
                        "cmdstat_{cmd}:calls={},usec={},usec_per_call={per_call:.2},\
                         rejected_calls={},failed_calls={}\r\n",
                        st.calls, st.usec, st.rejected_calls, st.failed_calls
                    );
                }
            }
            "cluster" => {
                section(&mut out, "Cluster");
                field!(out, "cluster_enabled", "0");
            }
            "keyspace" => {
                section(&mut out, "Keyspace");
                for (db, keys, expires) in &d.keyspace {
                    let _ = write!(out, "db{db}:keys={keys},expires={expires},avg_ttl=0\r\n");
                }
            }
            "strata" => {
                section(&mut out, "Strata");
                field!(out, "strata_version", "{}", env!("CARGO_PKG_VERSION"));
                field!(out, "threads", "{}", d.threads);
                field!(out, "io_engine", "{}", d.io_engine);
                for (i, (batches, wakeups)) in d.hops.iter().enumerate() {
                    let _ = write!(out, "shard{i}:batches={batches},wakeups={wakeups}\r\n");
                }
                field!(out, "unlocked_reads", "{}", d.unlocked_reads.0);
                field!(out, "unlocked_reads_rerun", "{}", d.unlocked_reads.1);
            }
            _ => {}
        }
    }
    out
}

/// The allocator the strata binary installs as its global allocator (crates/strata/src/main.rs).
pub(super) const ALLOCATOR: &str = "mimalloc";

/// The highest `used_memory` INFO has seen since start (or CONFIG RESETSTAT).
pub(super) static PEAK_MEMORY: AtomicUsize = AtomicUsize::new(0);

/// The last sample of the traffic counters and the rates computed from the one before, for INFO's
/// `instantaneous_*` fields. Redis samples every 100 ms from its cron; Strata samples when INFO
/// runs (at most every 100 ms), so a rate is the average since the previous sample.
pub(super) struct Rates {
    at: Instant,
    commands: u64,
    net_in: u64,
    net_out: u64,
    ops_per_sec: u64,
    input_kbps: f64,
    output_kbps: f64,
}

pub(super) static RATES: Mutex<Option<Rates>> = Mutex::new(None);

pub(super) fn sample_rates(commands: u64, net_in: u64, net_out: u64) -> (u64, f64, f64) {
    let mut guard = RATES.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    let next = match guard.take() {
        Some(prev) if now.duration_since(prev.at) < Duration::from_millis(100) => prev,
        Some(prev) => {
            let secs = now.duration_since(prev.at).as_secs_f64();
            let rate = |now: u64, before: u64| now.saturating_sub(before) as f64 / secs;
            Rates {
                at: now,
                commands,
                net_in,
                net_out,
                ops_per_sec: rate(commands, prev.commands).round() as u64,
                input_kbps: rate(net_in, prev.net_in) / 1024.0,
                output_kbps: rate(net_out, prev.net_out) / 1024.0,
            }
        }
        None => Rates {
            at: now,
            commands,
            net_in,
            net_out,
            ops_per_sec: 0,
            input_kbps: 0.0,
            output_kbps: 0.0,
        },
    };
    let rates = (next.ops_per_sec, next.input_kbps, next.output_kbps);
    *guard = Some(next);
    rates
}

/// What one shard contributes to INFO.
pub(super) struct ShardInfo {
    commands: u64,
    connections_received: u64,
    rejected_connections: u64,
    net_in: u64,
    net_out: u64,
    cmd: Vec<CmdStat>,
    keys: Vec<(usize, usize)>,
    expired: u64,
    evicted: u64,
    hits: u64,
    misses: u64,
    dirty: u64,
    lazyfree_pending: usize,
    errors: Vec<(Box<[u8]>, u64)>,
    errors_untracked: u64,
    unlocked_reads: (u64, u64),
}

/// The replication id: 40 hex digits drawn at start-up, drawn again by DEBUG CHANGE-REPL-ID.
static REPLID: Mutex<String> = Mutex::new(String::new());

/// The current replication id (INFO's `master_replid`).
pub(super) fn replid() -> String {
    let mut id = REPLID.lock().unwrap_or_else(|e| e.into_inner());
    if id.is_empty() {
        *id = new_replid();
    }
    id.clone()
}

/// Replaces the replication id with a fresh one (Redis's changeReplicationId). `master_replid2`
/// stays all zeros: Strata keeps no previous id yet (Redis's clearReplicationId2 leaves it so).
pub(super) fn change_replid() {
    *REPLID.lock().unwrap_or_else(|e| e.into_inner()) = new_replid();
}

/// 40 pseudo-random hex digits seeded by the pid and the clock.
fn new_replid() -> String {
    let mut seed = ((std::process::id() as u64) << 20)
        ^ (strata_shard::now_us() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ 0x5DEE_CE66D;
    (0..40)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from_digit((seed >> 32) as u32 % 16, 16).unwrap_or('0')
        })
        .collect()
}

pub(super) fn os_name() -> String {
    // SAFETY: uname(2) fills the zeroed struct; its fields are NUL-terminated strings.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return String::new();
        }
        let field = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!(
            "{} {} {}",
            field(&u.sysname),
            field(&u.release),
            field(&u.machine)
        )
    }
}

pub(super) fn cpu_times() -> CpuTimes {
    let usage = |who| {
        // SAFETY: getrusage(2) fills the zeroed struct.
        unsafe {
            let mut r: libc::rusage = std::mem::zeroed();
            libc::getrusage(who, &mut r);
            (
                (r.ru_stime.tv_sec as i64, r.ru_stime.tv_usec as i64),
                (r.ru_utime.tv_sec as i64, r.ru_utime.tv_usec as i64),
            )
        }
    };
    let (sys, user) = usage(libc::RUSAGE_SELF);
    let (sys_children, user_children) = usage(libc::RUSAGE_CHILDREN);
    CpuTimes {
        sys,
        user,
        sys_children,
        user_children,
    }
}

pub(super) fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE).max(0) as usize }
}

pub(super) fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * page_size())
}

pub(super) fn total_system_memory() -> usize {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    pages.max(0) as usize * page_size()
}

pub(super) async fn gather_info(cx: &ConnCtx<'_>) -> InfoData {
    let server: &ServerState = cx.server;
    // Read before the gathering below allocates its copies of every shard's statistics (tens of
    // KB at the peak): the report is of what the server holds, not of the report's own scratch.
    let used_memory = crate::memory::used_memory();
    let shards = cx
        .shards()
        .call_all(|s| ShardInfo {
            commands: s.stats.commands,
            connections_received: s.stats.connections_received,
            rejected_connections: s.stats.rejected_connections,
            net_in: s.stats.net_input_bytes,
            net_out: s.stats.net_output_bytes,
            cmd: s.stats.cmd.clone(),
            errors: s.stats.errors.clone(),
            errors_untracked: s.stats.errors_untracked,
            keys: s
                .dbs()
                .iter()
                .map(|d| (d.len(), d.volatile_len()))
                .collect(),
            expired: s.dbs().iter().map(|d| d.stats().expired_keys).sum(),
            evicted: s.dbs().iter().map(|d| d.stats().evicted_keys).sum(),
            hits: s.dbs().iter().map(|d| d.stats().hits).sum(),
            misses: s.dbs().iter().map(|d| d.stats().misses).sum(),
            dirty: s.dbs().iter().map(|d| d.dirty()).sum(),
            lazyfree_pending: s.lazyfree_pending(),
            unlocked_reads: (s.stats.unlocked_reads, s.stats.unlocked_reads_rerun),
        })
        .await;
    let mut d = InfoData {
        used_memory,
        threads: shards.len(),
        hops: cx.shards().hop_counters(),
        ..InfoData::default()
    };
    let entries = crate::table::process().entries();
    let mut cmd = vec![CmdStat::default(); entries.len()];
    let mut keys: Vec<(usize, usize)> = Vec::new();
    for s in &shards {
        d.commands_processed += s.commands;
        d.connections_received += s.connections_received;
        d.rejected_connections += s.rejected_connections;
        d.net_input_bytes += s.net_in;
        d.net_output_bytes += s.net_out;
        d.expired_keys += s.expired;
        d.evicted_keys += s.evicted;
        d.keyspace_hits += s.hits;
        d.keyspace_misses += s.misses;
        d.dirty += s.dirty;
        d.lazyfree_pending_objects += s.lazyfree_pending;
        d.unlocked_reads.0 += s.unlocked_reads.0;
        d.unlocked_reads.1 += s.unlocked_reads.1;
        for (total, st) in cmd.iter_mut().zip(&s.cmd) {
            total.calls += st.calls;
            total.usec += st.usec;
            total.rejected_calls += st.rejected_calls;
            total.failed_calls += st.failed_calls;
        }
        if keys.len() < s.keys.len() {
            keys.resize(s.keys.len(), (0, 0));
        }
        for (total, (n, v)) in keys.iter_mut().zip(&s.keys) {
            total.0 += n;
            total.1 += v;
        }
    }
    // Values handed to the process's freer thread belong to no shard.
    d.lazyfree_pending_objects += strata_shard::db::background_free_pending();
    // Every error reply, by code (Redis's errorstats, in its order: by code).
    let mut errors: std::collections::BTreeMap<Box<[u8]>, u64> = Default::default();
    let mut untracked = 0;
    for s in &shards {
        for (code, n) in &s.errors {
            *errors.entry(code.clone()).or_default() += n;
        }
        untracked += s.errors_untracked;
    }
    d.error_replies = errors.values().sum::<u64>() + untracked;
    d.errorstats = errors
        .into_iter()
        .map(|(code, n)| (String::from_utf8_lossy(&code).into_owned(), n))
        .collect();
    d.commandstats = entries
        .iter()
        .zip(cmd)
        .filter(|(_, st)| st.calls + st.failed_calls + st.rejected_calls > 0)
        .map(|(e, st)| (e.name, st))
        .collect();
    d.keyspace = keys
        .into_iter()
        .enumerate()
        .filter(|(_, (n, _))| *n > 0)
        .map(|(db, (n, v))| (db, n, v))
        .collect();
    (d.ops_per_sec, d.input_kbps, d.output_kbps) =
        sample_rates(d.commands_processed, d.net_input_bytes, d.net_output_bytes);

    let clients = server.client_list();
    process_info(server, &clients, cx.now, &mut d);
    d
}

/// INFO's fields that need no shard: clients, pub/sub, the server's identity and settings,
/// memory and CPU. Synchronous, so a crash report can fill them too.
pub(super) fn process_info(
    server: &ServerState,
    clients: &[std::sync::Arc<crate::ClientInfo>],
    now: i64,
    d: &mut InfoData,
) {
    let live = clients.iter().filter(|c| !c.killed.load(Ordering::Relaxed));
    for c in live {
        d.connected_clients += 1;
        // The read buffer's size, as Redis counts its query buffer's allocation.
        let input = c.qbuf.load(Ordering::Relaxed) + c.qbuf_free.load(Ordering::Relaxed);
        d.max_input_buffer = d.max_input_buffer.max(input);
        d.max_output_buffer = d.max_output_buffer.max(c.omem.load(Ordering::Relaxed));
        d.blocked_clients += c.blocked.load(Ordering::Relaxed) as usize;
    }

    d.pubsub_channels = server.pubsub.count(crate::pubsub::Kind::Channel);
    d.pubsub_patterns = server.pubsub.count(crate::pubsub::Kind::Pattern);
    d.pubsubshard_channels = server.pubsub.count(crate::pubsub::Kind::Shard);

    let config = &server.config;
    d.os = os_name();
    d.multiplexing_api = server.io_engine.to_string();
    d.io_engine = server.io_engine.to_string();
    d.process_id = std::process::id();
    d.run_id = server.run_id.clone();
    d.tcp_port = config.get_i64("port");
    d.server_time_usec = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |t| t.as_micros() as i64);
    d.uptime_secs = (now - server.started_ms).max(0) / 1000;
    d.hz = config.get_i64("hz");
    d.lru_clock = lru_clock(now);
    d.executable = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    d.config_file = config
        .config_file()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    d.maxclients = config.get_i64("maxclients");
    if d.used_memory == 0 {
        d.used_memory = crate::memory::used_memory();
    }
    d.used_memory_peak = PEAK_MEMORY
        .fetch_max(d.used_memory, Ordering::Relaxed)
        .max(d.used_memory);
    d.used_memory_rss = rss_bytes();
    d.total_system_memory = total_system_memory();
    d.maxmemory = config.get_i64("maxmemory");
    d.maxmemory_policy = config.get("maxmemory-policy").unwrap_or_default();
    {
        let st = crate::services::persist::status();
        d.last_save = st.last_save;
        d.dirty = d.dirty.saturating_sub(st.dirty_base);
        let now = strata_shard::now_ms();
        let l = crate::services::persist::loading();
        let total = l.total_bytes.load(Ordering::Relaxed);
        let loaded = l.loaded_bytes.load(Ordering::Relaxed);
        let start = l.start_ms.load(Ordering::Relaxed) as i64;
        let perc = if total > 0 {
            loaded as f64 * 100.0 / total as f64
        } else {
            0.0
        };
        let elapsed = (now - start).max(0) as f64 / 1000.0;
        d.persist = PersistInfo {
            loading: crate::services::persist::is_loading(),
            loading_start_time: start / 1000,
            loading_total_bytes: total,
            loading_loaded_bytes: loaded,
            loading_loaded_perc: perc,
            loading_eta_seconds: if loaded > 0 {
                (elapsed * (total.saturating_sub(loaded)) as f64 / loaded as f64) as i64
            } else {
                1
            },
            loading_loaded_keys: l.loaded_keys.load(Ordering::Relaxed),
            bgsave_in_progress: st.running.is_some(),
            last_bgsave_ok: st.last_bgsave_ok,
            last_bgsave_time_sec: st.last_bgsave_secs,
            current_bgsave_time_sec: st
                .running
                .as_ref()
                .map_or(-1, |r| (now - r.started_ms) / 1000),
            saves: st.saves,
            last_cow_size: st.last_cow_bytes,
            last_load_loaded: l.last_loaded.load(Ordering::Relaxed),
            current_cow: st.running.as_ref().map_or(0, |r| r.sink.cow_bytes()),
            current_keys_done: st
                .running
                .as_ref()
                .map_or(0, |r| r.keys_done.load(Ordering::Relaxed)),
            current_keys_total: st.running.as_ref().map_or(0, |r| r.keys_total),
            last_load_expired: l.last_expired.load(Ordering::Relaxed),
        };
    }
    d.replid = replid();
    d.cpu = cpu_times();
    d.reply_buffer_resizes = crate::settings::reply_buffer::counts();
}

/// INFO [section ...] → the report as text (a verbatim string in RESP3).
pub(super) fn info<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let sections = info_sections(&cx.args[1..]);
        let mut data = gather_info(cx).await;
        if sections.contains(&"latencystats") {
            data.latencystats = crate::services::latency::info_lines(cx).await;
        }
        let text = render_info(&sections, &data);
        cx.out.verbatim("txt", text.as_bytes());
        Ok(())
    })
}
