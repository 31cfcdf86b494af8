//! Server settings, named as in redis.conf: one declarative table of every setting Strata has, used
//! by the config file, `--name value` flags, CONFIG GET/SET/REWRITE and docs/configuration.md.
//!
//! Values are validated and normalised when stored (`1mb` is kept as `1048576`, `YES` as `yes`), so
//! readers parse nothing but integers. A CONFIG SET of several settings validates all of them before
//! storing any, under one write lock: a reader sees all of the new values or none.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use strata_core::glob::glob_match;
use strata_shard::notify;

/// The type of a setting, which decides how values are parsed and validated.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    Int {
        min: i64,
        max: i64,
    },
    /// A byte size accepting redis.conf units (1k, 5mb, 2gb...).
    Memory,
    Bool,
    Str,
    Enum(&'static [&'static str]),
    /// `client-output-buffer-limit`: `<class> <hard> <soft> <seconds>` groups; a CONFIG SET changes
    /// only the classes it names.
    OutputBufferLimit,
    /// `notify-keyspace-events`: class characters (see `strata_shard::notify`).
    KeyspaceEvents,
    /// `latency-tracking-info-percentiles`: numbers from 0 to 100, space-separated.
    Percentiles,
    /// `maxmemory-clients`: a byte size, or a percentage of `maxmemory` (`10%`).
    MemoryOrPercent,
}

/// One setting.
pub struct ConfigSpec {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: Kind,
    /// Settable at runtime with CONFIG SET.
    pub mutable: bool,
    /// Strata-only settings are documented in `strata --help` and docs/configuration.md.
    pub strata_only: bool,
    pub help: &'static str,
}

const fn spec(
    name: &'static str,
    default: &'static str,
    kind: Kind,
    mutable: bool,
    help: &'static str,
) -> ConfigSpec {
    ConfigSpec {
        name,
        default,
        kind,
        mutable,
        strata_only: false,
        help,
    }
}

/// Every setting Strata knows.
pub static SPECS: &[ConfigSpec] = &[
    spec(
        "port",
        "6379",
        Kind::Int { min: 0, max: 65535 },
        false,
        "TCP port to listen on",
    ),
    spec(
        "bind",
        "127.0.0.1",
        Kind::Str,
        false,
        "addresses to listen on (space separated)",
    ),
    spec(
        "databases",
        "16",
        Kind::Int {
            min: 1,
            max: i32::MAX as i64,
        },
        false,
        "number of databases",
    ),
    spec(
        "requirepass",
        "",
        Kind::Str,
        true,
        "password clients must AUTH with",
    ),
    spec(
        "dir",
        "./data",
        Kind::Str,
        true,
        "working directory for data files",
    ),
    spec(
        "dbfilename",
        "dump.rdb",
        Kind::Str,
        true,
        "snapshot file name",
    ),
    spec(
        "save",
        "",
        Kind::Str,
        true,
        "snapshot schedule; persistence is not implemented yet, so only \"\" (none) is accepted",
    ),
    spec(
        "appendonly",
        "no",
        Kind::Bool,
        true,
        "append-only file; not implemented yet, so only no is accepted",
    ),
    spec(
        "maxmemory",
        "0",
        Kind::Memory,
        true,
        "memory limit (0: none); over it, keys are evicted per maxmemory-policy, else commands that may grow memory are refused",
    ),
    spec(
        "maxmemory-clients",
        "0",
        Kind::MemoryOrPercent,
        true,
        "limit on the memory all clients hold together (bytes, or N% of maxmemory; 0: none); at it, the largest clients are closed, except CLIENT NO-EVICT ones",
    ),
    spec(
        "maxmemory-policy",
        "noeviction",
        Kind::Enum(&[
            "volatile-lru",
            "volatile-lfu",
            "volatile-random",
            "volatile-ttl",
            "allkeys-lru",
            "allkeys-lfu",
            "allkeys-random",
            "noeviction",
        ]),
        true,
        "eviction policy",
    ),
    spec(
        "maxmemory-samples",
        "5",
        Kind::Int {
            min: 1,
            max: i32::MAX as i64,
        },
        true,
        "keys sampled per database per eviction round (LRU, LFU and TTL policies; at most 1024 are used)",
    ),
    spec(
        "maxmemory-eviction-tenacity",
        "10",
        Kind::Int { min: 0, max: 100 },
        true,
        "how long a command may spend evicting before it runs (0..100; 100: no limit)",
    ),
    spec(
        "proto-max-bulk-len",
        "536870912",
        Kind::Memory,
        true,
        "largest bulk string a client may send",
    ),
    spec(
        "client-query-buffer-limit",
        "1073741824",
        Kind::Memory,
        true,
        "largest query buffer per client",
    ),
    spec(
        "client-output-buffer-limit",
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
        Kind::OutputBufferLimit,
        true,
        "per client class (normal, replica, pubsub): output a client has not read yet; beyond the \
         hard limit, or beyond the soft limit for the given seconds, the client is disconnected \
         (0 = no limit)",
    ),
    spec(
        "maxclients",
        "10000",
        Kind::Int {
            min: 1,
            max: u32::MAX as i64,
        },
        true,
        "connection limit",
    ),
    spec(
        "timeout",
        "0",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "close clients idle for more than this many seconds (0 = never; blocked and subscribed \
         clients are exempt)",
    ),
    spec(
        "tcp-keepalive",
        "300",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "TCP keepalive probe interval in seconds for new connections (0 = off)",
    ),
    spec(
        "tcp-backlog",
        "511",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        false,
        "listen backlog",
    ),
    spec(
        "hash-max-listpack-entries",
        "512",
        Kind::Int { min: 0, max: i64::MAX },
        true,
        "a hash with more fields is stored as a hashtable",
    ),
    spec(
        "hash-max-listpack-value",
        "64",
        Kind::Memory,
        true,
        "a hash with a longer field or value is stored as a hashtable",
    ),
    spec(
        "set-max-intset-entries",
        "512",
        Kind::Int { min: 0, max: i64::MAX },
        true,
        "an all-integer set with more members is stored as a hashtable",
    ),
    spec(
        "zset-max-listpack-entries",
        "128",
        Kind::Int { min: 0, max: i64::MAX },
        true,
        "a sorted set with more members is stored as a skiplist",
    ),
    spec(
        "zset-max-listpack-value",
        "64",
        Kind::Memory,
        true,
        "a sorted set with a longer member is stored as a skiplist",
    ),
    spec(
        "list-max-listpack-size",
        "-2",
        Kind::Int {
            min: i32::MIN as i64,
            max: i32::MAX as i64,
        },
        true,
        "entries per list node (positive) or node size class (-1 = 4kb ... -5 = 64kb)",
    ),
    spec(
        "list-compress-depth",
        "0",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "list nodes left uncompressed at each end (0 = no compression)",
    ),
    spec(
        "hll-sparse-max-bytes",
        "3000",
        Kind::Memory,
        true,
        "a sparse HyperLogLog that would grow beyond this many bytes becomes dense",
    ),
    spec(
        "notify-keyspace-events",
        "",
        Kind::KeyspaceEvents,
        true,
        "keyspace notification classes (K E g $ l s h z x e t m d n A)",
    ),
    spec(
        "tracking-table-max-keys",
        "1000000",
        Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        true,
        "keys remembered for CLIENT TRACKING (default mode) before the oldest are invalidated (0 = no limit)",
    ),
    spec(
        "slowlog-log-slower-than",
        "10000",
        Kind::Int {
            min: -1,
            max: i64::MAX,
        },
        true,
        "log commands that run at least this many microseconds in SLOWLOG (0: every command, -1: none)",
    ),
    spec(
        "slowlog-max-len",
        "128",
        Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        true,
        "entries SLOWLOG keeps (the oldest go first)",
    ),
    spec(
        "latency-monitor-threshold",
        "0",
        Kind::Int {
            min: 0,
            max: i64::MAX,
        },
        true,
        "LATENCY samples events that take at least this many milliseconds (0: off)",
    ),
    spec(
        "latency-tracking",
        "yes",
        Kind::Bool,
        true,
        "keep a latency histogram per command (INFO latencystats, LATENCY HISTOGRAM)",
    ),
    spec(
        "latency-tracking-info-percentiles",
        "50 99 99.9",
        Kind::Percentiles,
        true,
        "the percentiles INFO latencystats shows",
    ),
    spec(
        "hz",
        "10",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "background task frequency (clamped to 1..500, as Redis does)",
    ),
    spec(
        "loglevel",
        "notice",
        Kind::Enum(&["debug", "verbose", "notice", "warning"]),
        true,
        "log level",
    ),
    spec(
        "logfile",
        "",
        Kind::Str,
        false,
        "log file, appended to (\"\": standard output)",
    ),
    spec(
        "always-show-logo",
        "no",
        Kind::Bool,
        false,
        "log the ASCII-art logo at start-up instead of the one-line banner",
    ),
    spec(
        "syslog-enabled",
        "no",
        Kind::Bool,
        false,
        "also send log lines to syslog",
    ),
    spec(
        "syslog-ident",
        "redis",
        Kind::Str,
        false,
        "syslog identity",
    ),
    spec(
        "syslog-facility",
        "local0",
        Kind::Enum(&[
            "user", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
        ]),
        false,
        "syslog facility",
    ),
    spec(
        "pidfile",
        "",
        Kind::Str,
        false,
        "file the server writes its pid to at start-up and removes at shutdown (a daemon without one uses /var/run/redis.pid)",
    ),
    spec(
        "crash-log-enabled",
        "yes",
        Kind::Bool,
        true,
        "write a crash report (signal or panic, stack trace) to the log when the server crashes",
    ),
    spec(
        "crash-memcheck-enabled",
        "yes",
        Kind::Bool,
        true,
        "run a memory test after a crash (stored only: Strata has no memory test)",
    ),
    spec(
        "set-proc-title",
        "yes",
        Kind::Bool,
        false,
        "set the process title from proc-title-template (stored only: Strata keeps its command line)",
    ),
    spec(
        "proc-title-template",
        "{title} {listen-addr} {server-mode}",
        Kind::Str,
        true,
        "process title template: {title} {listen-addr} {server-mode} {port} {tls-port} {unixsocket} {config-file} (stored only)",
    ),
    spec(
        "daemonize",
        "no",
        Kind::Bool,
        false,
        "run in the background (double fork, setsid, standard streams to /dev/null, a pidfile)",
    ),
    spec(
        "protected-mode",
        "yes",
        Kind::Bool,
        true,
        "refuse non-loopback clients without a password",
    ),
    spec(
        "lfu-log-factor",
        "10",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "LFU counter log factor",
    ),
    spec(
        "min-replicas-to-write",
        "0",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "refuse writes unless this many replicas are connected (Strata has no replication: any value above 0 refuses writes while min-replicas-max-lag is above 0)",
    ),
    spec(
        "min-replicas-max-lag",
        "10",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "seconds a replica may lag and still count for min-replicas-to-write (0: the check is off)",
    ),
    spec(
        "lfu-decay-time",
        "1",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "LFU decay minutes",
    ),
    spec(
        "enable-debug-command",
        "no",
        Kind::Enum(&["no", "yes", "local"]),
        false,
        "allow DEBUG: no, yes, or local (loopback connections only)",
    ),
    ConfigSpec {
        name: "threads",
        default: "0",
        kind: Kind::Int { min: 0, max: 1024 },
        mutable: false,
        strata_only: true,
        help: "shard threads (0 = one per CPU core)",
    },
    ConfigSpec {
        name: "io-engine",
        default: "epoll",
        kind: Kind::Enum(&["epoll", "auto"]),
        mutable: false,
        strata_only: true,
        help: "event loop driver: epoll, the only one (auto names it too); the io_uring engine was removed (docs/architecture.md, Event loop)",
    },
];

/// A client class of `client-output-buffer-limit`, in Redis's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientClass {
    Normal = 0,
    Replica = 1,
    PubSub = 2,
}

/// The class names CONFIG GET prints, in [`ClientClass`] order.
const CLASS_NAMES: [&str; 3] = ["normal", "slave", "pubsub"];

/// One class's output-buffer limit; 0 disables a bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutputLimit {
    /// Pending output at or above this closes the client at once.
    pub hard: u64,
    /// Pending output at or above this for more than `soft_seconds` closes the client.
    pub soft: u64,
    pub soft_seconds: u64,
}

/// `client-output-buffer-limit` as numbers, readable from any thread without a lock: every push to
/// a client checks it. Updated under the configuration's write lock together with its text.
#[derive(Default)]
pub struct OutputLimits {
    /// hard, soft, seconds for each class in [`ClientClass`] order.
    v: [AtomicU64; 9],
}

impl OutputLimits {
    /// The limit of `class`.
    pub fn get(&self, class: ClientClass) -> OutputLimit {
        let i = class as usize * 3;
        OutputLimit {
            hard: self.v[i].load(Ordering::Relaxed),
            soft: self.v[i + 1].load(Ordering::Relaxed),
            soft_seconds: self.v[i + 2].load(Ordering::Relaxed),
        }
    }

    fn store(&self, canonical: &str) {
        for (slot, n) in self.v.iter().zip(parse_output_limits(canonical)) {
            slot.store(n, Ordering::Relaxed);
        }
    }
}

/// The numbers of a canonical `client-output-buffer-limit` value, in [`OutputLimits`] order.
fn parse_output_limits(canonical: &str) -> Vec<u64> {
    canonical
        .split(' ')
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Redis's `memtoull`: digits, then an optional unit (b, k, kb, m, mb, g, gb in any case); no sign.
/// Too many digits saturate and a unit multiplies with wrap-around, as in C.
pub(crate) fn memtoull(v: &str) -> Option<u64> {
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let mul: u64 = match v[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    // No digits at all reads as 0, as strtoull does ("mb" is 0).
    let n = match &v[..digits] {
        "" => 0,
        d => d.parse::<u64>().unwrap_or(u64::MAX),
    };
    Some(n.wrapping_mul(mul))
}

/// C's `(int) strtoll(v)` with the whole string consumed: an optional sign, digits that saturate,
/// then truncation to 32 bits; the empty string is 0.
fn strtoll_int(v: &str) -> Option<i32> {
    let (neg, digits) = match v.as_bytes().first() {
        Some(b'-') => (true, &v[1..]),
        Some(b'+') => (false, &v[1..]),
        _ => (false, v),
    };
    if v.is_empty() {
        return Some(0);
    }
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i64 = match digits.parse::<i64>() {
        Ok(n) if neg => -n,
        Ok(n) => n,
        Err(_) if neg => i64::MIN,
        Err(_) => i64::MAX,
    };
    Some(n as i32)
}

/// Applies a CONFIG SET value of `client-output-buffer-limit` to `current` (canonical): words
/// split on single spaces as Redis does, in groups of `<class> <hard> <soft> <seconds>`; every
/// group is checked before any applies; the error is Redis's text.
fn normalize_output_limits(value: &str, current: &str) -> Result<String, String> {
    let words: Vec<&str> = if value.is_empty() {
        Vec::new()
    } else {
        value.split(' ').collect()
    };
    if !words.len().is_multiple_of(4) {
        return Err("Wrong number of arguments in buffer limit configuration.".into());
    }
    let mut nums = parse_output_limits(current);
    nums.resize(9, 0);
    for group in words.chunks(4) {
        let class = match group[0].to_ascii_lowercase().as_str() {
            "normal" => ClientClass::Normal,
            "slave" | "replica" => ClientClass::Replica,
            "pubsub" => ClientClass::PubSub,
            _ => {
                return Err("Invalid client class specified in buffer limit configuration.".into())
            }
        };
        let (hard, soft, secs) = (
            memtoull(group[1]),
            memtoull(group[2]),
            strtoll_int(group[3]),
        );
        let (Some(hard), Some(soft), Some(secs)) = (hard, soft, secs.filter(|s| *s >= 0)) else {
            return Err(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.".into(),
            );
        };
        let i = class as usize * 3;
        nums[i..i + 3].copy_from_slice(&[hard, soft, secs as u64]);
    }
    Ok(CLASS_NAMES
        .iter()
        .zip(nums.chunks(3))
        .map(|(name, n)| format!("{name} {} {} {}", n[0], n[1], n[2]))
        .collect::<Vec<_>>()
        .join(" "))
}

/// Values Strata would accept but cannot act on yet: refused with the reason, so that a setting
/// never silently does nothing. The values that mean "off" stay accepted.
fn not_implemented(name: &str, canonical: &str) -> Option<String> {
    let what = match (name, canonical) {
        ("appendonly", "yes") => "appendonly yes",
        ("save", v) if !v.is_empty() => "snapshots (save schedules other than \"\")",
        _ => return None,
    };
    Some(format!("Strata does not implement {what} yet"))
}

/// The live configuration.
pub struct Config {
    values: RwLock<HashMap<&'static str, String>>,
    epoch: AtomicU64,
    /// `client-output-buffer-limit` as numbers; shared with every client's handle.
    output_limits: Arc<OutputLimits>,
    /// The config file given at start-up (absolute), for INFO `config_file` and CONFIG REWRITE.
    file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            values: RwLock::new(
                SPECS
                    .iter()
                    .map(|s| (s.name, s.default.to_string()))
                    .collect(),
            ),
            epoch: AtomicU64::new(0),
            output_limits: Arc::new(OutputLimits::default()),
            file: None,
        }
        .with_limits_loaded()
    }
}

/// Parses a redis.conf memory value ("1gb", "512mb", "100") into bytes.
pub fn parse_memory(v: &str) -> Option<i64> {
    let lower = v.to_ascii_lowercase();
    let (num, mul) = [
        ("gb", 1i64 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1_000_000_000),
        ("m", 1_000_000),
        ("k", 1000),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suffix, mul)| lower.strip_suffix(suffix).map(|n| (n.to_string(), *mul)))
    .unwrap_or((lower.clone(), 1));
    num.parse::<i64>()
        .ok()
        .and_then(|n| n.checked_mul(mul))
        .filter(|n| *n >= 0)
}

/// Parses a memory-or-percent value (`maxmemory-clients`): a memory size, or `N%` with N at most 100. Returns the
/// setting's stored form (bytes, or minus the percentage) or Redis's reason.
pub fn parse_memory_or_percent(value: &str) -> Result<i64, String> {
    if let Some(p) = value.strip_suffix('%') {
        let p: i64 = p
            .parse()
            .ok()
            .filter(|p| *p >= 0)
            .ok_or("argument must be a memory or percent value")?;
        if p > 100 {
            return Err("percentage argument must be less or equal to 100".into());
        }
        return Ok(-p);
    }
    if value.is_empty() {
        return Ok(0);
    }
    parse_memory(value).ok_or_else(|| "argument must be a memory or percent value".into())
}

/// The canonical text of a stored setting (CONFIG GET): bytes, or `N%`.
pub fn format_memory_or_percent(setting: i64) -> String {
    if setting < 0 {
        format!("{}%", -setting)
    } else {
        setting.to_string()
    }
}

/// Validates `value` for `spec` and returns it in canonical form; the error is Redis's reason text,
/// or why Strata refuses a value it does not implement. `current` is the live value (settings
/// whose new value depends on the old one).
/// Redis's text for `latency-tracking-info-percentiles`: each as `%f` without trailing zeros.
fn normalize_percentiles(value: &str) -> Result<String, String> {
    let mut out = Vec::new();
    for word in value.split(' ').filter(|w| !w.is_empty()) {
        let p = strata_core::num::parse_f64(word.as_bytes())
            .filter(|p| !p.is_nan())
            .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
        if !(0.0..=100.0).contains(&p) {
            return Err(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
                    .into(),
            );
        }
        out.push(trim_percentile(p));
    }
    Ok(out.join(" "))
}

/// `p` as C's `%f` prints it, trailing zeros (and a trailing point) removed: 99.9, 50.
pub fn trim_percentile(p: f64) -> String {
    let text = format!("{p:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn normalize(spec: &ConfigSpec, value: &str, current: &str) -> Result<String, String> {
    let v = normalize_kind(spec, value, current)?;
    if spec.name == "proc-title-template" && !valid_proc_title_template(&v) {
        return Err("template format is invalid or contains unknown variables".into());
    }
    match not_implemented(spec.name, &v) {
        Some(why) => Err(why),
        None => Ok(v),
    }
}

fn normalize_kind(spec: &ConfigSpec, value: &str, current: &str) -> Result<String, String> {
    Ok(match spec.kind {
        Kind::OutputBufferLimit => normalize_output_limits(value, current)?,
        Kind::KeyspaceEvents => {
            notify::flags_to_string(notify::parse_flags(value).ok_or_else(|| {
                "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()
            })?)
        }
        Kind::Int { min, max } => {
            let v: i64 = value
                .parse()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            if v < min || v > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            // Redis keeps hz within 1..500 whatever is asked.
            let v = if spec.name == "hz" {
                v.clamp(1, 500)
            } else {
                v
            };
            v.to_string()
        }
        Kind::Percentiles => normalize_percentiles(value)?,
        Kind::MemoryOrPercent => format_memory_or_percent(parse_memory_or_percent(value)?),
        Kind::Memory => parse_memory(value)
            .ok_or_else(|| "argument must be a memory value".to_string())?
            .to_string(),
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => "yes".into(),
            "no" => "no".into(),
            _ => return Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Enum(options) => {
            let v = value.to_ascii_lowercase();
            if !options.contains(&v.as_str()) {
                return Err(format!(
                    "argument(s) must be one of the following: {}",
                    options.join(", ")
                ));
            }
            v
        }
        Kind::Str => value.to_string(),
    })
}

/// Redis's check of `proc-title-template` (`validateProcTitleTemplate`): `{name}` variables
/// Redis knows, `{{` for a brace, and a title that is not empty once expanded with an empty
/// `{title}` and trimmed of spaces.
fn valid_proc_title_template(template: &str) -> bool {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if after.is_empty() {
            return false;
        }
        if let Some(quoted) = after.strip_prefix('{') {
            out.push('{');
            rest = quoted;
            continue;
        }
        let Some(close) = after.find('}') else {
            return false;
        };
        out.push_str(match &after[..close] {
            "title" | "server-mode" | "unixsocket" | "config-file" => "",
            "listen-addr" | "port" | "tls-port" => "0",
            _ => return false,
        });
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    !out.trim_matches(' ').is_empty()
}

/// Settings whose effect the canonical text does not capture: `notify-keyspace-events` lists
/// 'A' without 'n' (as Redis's CONFIG GET does) though 'n' stays on.
fn apply_raw(spec: &ConfigSpec, raw: &str) {
    if matches!(spec.kind, Kind::KeyspaceEvents) {
        notify::set_flags(notify::parse_flags(raw).unwrap_or(0));
    } else if spec.name == "tracking-table-max-keys" {
        strata_shard::tracking::set_max_keys(raw.parse().unwrap_or(0));
    }
}

/// Pushes a validated (normalized) value to the process-wide state that acts on it.
fn apply_live(spec: &ConfigSpec, value: &str) {
    use strata_shard::evict;
    match spec.name {
        "maxmemory" => evict::set_maxmemory(value.parse().unwrap_or(0)),
        "maxmemory-clients" => {
            crate::settings::set_maxmemory_clients(parse_memory_or_percent(value).unwrap_or(0))
        }
        "maxmemory-policy" => {
            evict::set_policy(evict::Policy::parse(value).unwrap_or(evict::Policy::NoEviction))
        }
        "maxmemory-samples" => evict::set_samples(value.parse().unwrap_or(5)),
        "maxmemory-eviction-tenacity" => evict::set_tenacity(value.parse().unwrap_or(10)),
        "slowlog-log-slower-than" => {
            crate::settings::set_slowlog_slower_than(value.parse().unwrap_or(10_000))
        }
        "slowlog-max-len" => crate::settings::set_slowlog_max_len(value.parse().unwrap_or(128)),
        "latency-tracking" => strata_shard::set_latency_tracking(value == "yes"),
        "latency-monitor-threshold" => {
            crate::settings::set_latency_threshold(value.parse().unwrap_or(0))
        }
        "loglevel" => crate::log::set_level(
            crate::log::Level::parse(value).unwrap_or(crate::log::Level::Notice),
        ),
        "crash-log-enabled" => crate::log::set_crash_log(value == "yes"),
        _ => {}
    }
}

fn find(name: &str) -> Option<&'static ConfigSpec> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map_or(name, |(_, canonical)| canonical);
    SPECS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// Old names Redis 7.0 still accepts (and lists in CONFIG GET), with the setting each stands for.
const ALIASES: &[(&str, &str)] = &[
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("min-slaves-to-write", "min-replicas-to-write"),
    ("min-slaves-max-lag", "min-replicas-max-lag"),
];

/// `min-replicas-to-write` and `min-replicas-max-lag` are both above 0: as Strata has no
/// replicas, write commands are refused (Redis's checkGoodReplicasStatus with no good replica).
static WRITES_NEED_REPLICAS: AtomicBool = AtomicBool::new(false);

/// Whether write commands are refused with NOREPLICAS (one load; see [`WRITES_NEED_REPLICAS`]).
#[inline]
pub fn writes_need_replicas() -> bool {
    WRITES_NEED_REPLICAS.load(Ordering::Relaxed)
}

impl Config {
    /// Builds a configuration from `strata [config-file] [--name value ...]`, like redis-server.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let mut cfg = Config::default();
        let mut rest = args;
        if let Some(first) = rest.first().filter(|a| !a.starts_with("--")) {
            let text = std::fs::read_to_string(first)
                .map_err(|e| format!("can't open config file '{first}': {e}"))?;
            cfg.load_text(&text)?;
            cfg.file = Some(std::path::absolute(first).unwrap_or_else(|_| PathBuf::from(first)));
            rest = &rest[1..];
        }
        let mut i = 0;
        while i < rest.len() {
            let name = rest[i]
                .strip_prefix("--")
                .ok_or_else(|| format!("unexpected argument '{}'", rest[i]))?;
            let mut vals = Vec::new();
            i += 1;
            while i < rest.len() && !rest[i].starts_with("--") {
                vals.push(rest[i].clone());
                i += 1;
            }
            cfg.set_startup(name, &vals.join(" "))?;
        }
        Ok(cfg)
    }

    /// Applies redis.conf text: `name value...` lines, `#` comments, quoted values.
    pub fn load_text(&self, text: &str) -> Result<(), String> {
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
            let value = value.trim().trim_matches('"');
            self.set_startup(name, value)
                .map_err(|e| format!("config file line {}: {e}", n + 1))?;
        }
        Ok(())
    }

    fn set_startup(&self, name: &str, value: &str) -> Result<(), String> {
        let spec = find(name)
            .ok_or_else(|| format!("Bad directive or wrong number of arguments: '{name}'"))?;
        // A config line or flag may space its words freely; CONFIG SET splits on single spaces.
        let value = match spec.kind {
            Kind::OutputBufferLimit => value.split_whitespace().collect::<Vec<_>>().join(" "),
            _ => value.to_string(),
        };
        self.store(spec, &value)
            .map_err(|why| format!("'{} {value}': {why}", spec.name))
    }

    fn store(&self, spec: &'static ConfigSpec, value: &str) -> Result<(), String> {
        let mut table = self.values.write().unwrap_or_else(|e| e.into_inner());
        let current = table.get(spec.name).cloned().unwrap_or_default();
        let normalized = normalize(spec, value, &current)?;
        self.apply(&mut table, spec, normalized);
        apply_raw(spec, value);
        self.epoch.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Stores a validated value, keeping the numeric caches in step (under the write lock).
    fn apply(
        &self,
        table: &mut HashMap<&'static str, String>,
        spec: &'static ConfigSpec,
        value: String,
    ) {
        if matches!(spec.kind, Kind::OutputBufferLimit) {
            self.output_limits.store(&value);
        }
        if let (Some(limit), Ok(v)) = (strata_core::limits::by_name(spec.name), value.parse()) {
            limit.set(v);
        }
        apply_live(spec, &value);
        table.insert(spec.name, value);
        if spec.name.starts_with("min-replicas-") {
            let positive = |name| {
                table
                    .get(name)
                    .is_some_and(|v| v.parse().unwrap_or(0) > 0i64)
            };
            WRITES_NEED_REPLICAS.store(
                positive("min-replicas-to-write") && positive("min-replicas-max-lag"),
                Ordering::Relaxed,
            );
        }
    }

    fn with_limits_loaded(self) -> Config {
        if let Some(v) = self.get("client-output-buffer-limit") {
            self.output_limits.store(&v);
        }
        for limit in strata_core::limits::ALL {
            if let Some(v) = self.get(limit.name()).and_then(|v| v.parse().ok()) {
                limit.set(v);
            }
        }
        self
    }

    /// `client-output-buffer-limit` as numbers, live: the handle every client shares.
    pub fn output_limits(&self) -> &Arc<OutputLimits> {
        &self.output_limits
    }

    /// Changes a mutable setting at runtime (CONFIG SET). The error is the reason only; the caller
    /// wraps it in Redis's CONFIG SET message.
    pub fn set(&self, name: &str, value: &str) -> Result<(), ConfigSetError> {
        self.set_many(&[(name, value)]).map_err(|(_, e)| e)
    }

    /// CONFIG SET of several settings, all or nothing. On failure returns the index of the pair
    /// Redis would name in its error and why: the first unknown, immutable or repeated name, else
    /// the first invalid value.
    pub fn set_many(&self, pairs: &[(&str, &str)]) -> Result<(), (usize, ConfigSetError)> {
        let mut specs: Vec<&'static ConfigSpec> = Vec::with_capacity(pairs.len());
        for (i, (name, _)) in pairs.iter().enumerate() {
            let spec = find(name).ok_or((i, ConfigSetError::Unknown))?;
            if !spec.mutable {
                return Err((i, ConfigSetError::Immutable(spec.name)));
            }
            if specs.iter().any(|s| s.name == spec.name) {
                return Err((i, ConfigSetError::Duplicate(spec.name)));
            }
            specs.push(spec);
        }
        // Validated under the write lock: a value may depend on the live one
        // (client-output-buffer-limit changes only the classes it names).
        let mut table = self.values.write().unwrap_or_else(|e| e.into_inner());
        let mut values = Vec::with_capacity(pairs.len());
        for (i, (spec, (_, value))) in specs.iter().zip(pairs).enumerate() {
            let current = table.get(spec.name).map(String::as_str).unwrap_or("");
            let v = normalize(spec, value, current)
                .map_err(|why| (i, ConfigSetError::Invalid(spec.name, why)))?;
            values.push(v);
        }
        for ((spec, v), (_, raw)) in specs.iter().zip(values).zip(pairs) {
            self.apply(&mut table, spec, v);
            apply_raw(spec, raw);
        }
        self.epoch.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// The value of `name` (canonical spelling), if it is a known setting.
    pub fn get(&self, name: &str) -> Option<String> {
        let spec = find(name)?;
        self.values
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(spec.name)
            .cloned()
    }

    /// Integer (or memory) setting; 0 if unknown or not numeric.
    pub fn get_i64(&self, name: &str) -> i64 {
        self.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    /// Boolean setting.
    pub fn get_bool(&self, name: &str) -> bool {
        self.get(name).as_deref() == Some("yes")
    }

    /// Settings whose names match `pattern` (CONFIG GET), sorted by name.
    pub fn matching(&self, pattern: &[u8]) -> Vec<(&'static str, String)> {
        let values = self.values.read().unwrap_or_else(|e| e.into_inner());
        let named = SPECS
            .iter()
            .map(|s| (s.name, s.name))
            .chain(ALIASES.iter().copied());
        let mut out: Vec<_> = named
            .filter(|(name, _)| glob_match(pattern, name.as_bytes(), true))
            .map(|(name, canonical)| (name, values.get(canonical).cloned().unwrap_or_default()))
            .collect();
        out.sort_by_key(|(n, _)| *n);
        out
    }

    /// Bumped on every change, so threads can cache settings and reload only when it moves.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The canonical name of setting `name` (any case), if Strata has it.
    pub fn canonical_name(name: &str) -> Option<&'static str> {
        find(name).map(|s| s.name)
    }

    /// The config file the server started with (absolute path), if any.
    pub fn config_file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// CONFIG REWRITE: rewrites the start-up config file so that it yields the live settings.
    /// Comments, blank lines and the order of lines are kept; each setting's first line gets the
    /// live value and its repeats are dropped; settings that differ from their default but have no
    /// line are appended. The file is replaced atomically (written aside, then renamed). The error is
    /// Redis's text.
    pub fn rewrite(&self) -> Result<(), String> {
        let path = self
            .file
            .as_deref()
            .ok_or_else(|| "The server is running without a config file".to_string())?;
        let old = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("Rewriting config file: {e}")),
        };
        let text = self.rewritten(&old);
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                format!("Rewriting config file: {e}")
            })
    }

    /// The text [`Config::rewrite`] writes, given the file's current text.
    fn rewritten(&self, old: &str) -> String {
        let values = self.values.read().unwrap_or_else(|e| e.into_inner());
        let line_for = |spec: &ConfigSpec| {
            let v = values.get(spec.name).map(String::as_str).unwrap_or("");
            // A line's value is the rest of the line, so only the empty value needs quotes.
            if v.is_empty() {
                format!("{} \"{v}\"", spec.name)
            } else {
                format!("{} {v}", spec.name)
            }
        };
        let mut out = String::new();
        let mut written: Vec<&str> = Vec::new();
        for line in old.lines() {
            let trimmed = line.trim();
            let name = trimmed.split_whitespace().next().unwrap_or("");
            match find(name).filter(|_| !trimmed.starts_with('#')) {
                Some(spec) if written.contains(&spec.name) => continue,
                Some(spec) => {
                    written.push(spec.name);
                    out.push_str(&line_for(spec));
                }
                None => out.push_str(line),
            }
            out.push('\n');
        }
        let missing: Vec<&ConfigSpec> = SPECS
            .iter()
            .filter(|s| !written.contains(&s.name))
            .filter(|s| values.get(s.name).map(String::as_str) != Some(s.default))
            .filter(|s| {
                normalize(s, s.default, s.default).ok().as_deref()
                    != values.get(s.name).map(String::as_str)
            })
            .collect();
        if !missing.is_empty() {
            out.push_str("# Generated by CONFIG REWRITE\n");
            for spec in missing {
                out.push_str(&line_for(spec));
                out.push('\n');
            }
        }
        out
    }
}

/// Why CONFIG SET refused a setting.
#[derive(Debug, PartialEq, Eq)]
pub enum ConfigSetError {
    Unknown,
    Immutable(&'static str),
    /// The same setting twice in one CONFIG SET.
    Duplicate(&'static str),
    Invalid(&'static str, String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_settings_validate_as_redis() {
        let c = Config::default();
        assert_eq!(c.get("syslog-ident").as_deref(), Some("redis"));
        assert_eq!(
            c.get("proc-title-template").as_deref(),
            Some("{title} {listen-addr} {server-mode}")
        );
        for bad in ["{foo}", "{title}", "{title", "x{", ""] {
            assert!(
                matches!(
                    c.set("proc-title-template", bad),
                    Err(ConfigSetError::Invalid(_, ref why))
                        if why == "template format is invalid or contains unknown variables"
                ),
                "{bad:?}"
            );
        }
        for good in ["x", "{title} {port}", "{{literal {listen-addr}"] {
            assert_eq!(c.set("proc-title-template", good), Ok(()), "{good:?}");
        }
        assert_eq!(
            c.set("pidfile", "/tmp/p"),
            Err(ConfigSetError::Immutable("pidfile"))
        );
        assert!(c.load_text("syslog-facility local9\n").is_err());
        assert!(c.load_text("syslog-facility LOCAL3\n").is_ok());
        assert_eq!(c.get("syslog-facility").as_deref(), Some("local3"));
        assert_eq!(c.set("crash-log-enabled", "no"), Ok(()));
        assert_eq!(c.set("crash-log-enabled", "yes"), Ok(()));
    }

    #[test]
    fn args_and_file() {
        let dir = std::env::temp_dir().join(format!("strata-conf-{}", std::process::id()));
        std::fs::write(&dir, "# comment\nport 7000\nrequirepass \"secret\"\n").unwrap();
        let args: Vec<String> = [
            dir.to_str().unwrap(),
            "--port",
            "7001",
            "--save",
            "",
            "--maxmemory",
            "0",
            "--client-output-buffer-limit",
            "pubsub",
            "1mb",
            "2",
            "3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let c = Config::from_args(&args).unwrap();
        assert_eq!(c.get_i64("port"), 7001);
        assert_eq!(c.get("requirepass").as_deref(), Some("secret"));
        assert_eq!(c.get_i64("maxmemory"), 0);
        assert_eq!(
            c.output_limits().get(ClientClass::PubSub),
            OutputLimit {
                hard: 1 << 20,
                soft: 2,
                soft_seconds: 3
            }
        );
        assert!(Config::from_args(&["--nope".into(), "1".into()]).is_err());
        // Settings Strata cannot act on are refused at start-up too, naming the setting.
        let Err(err) = Config::from_args(&["--appendonly".into(), "yes".into()]) else {
            panic!("appendonly yes was accepted");
        };
        assert!(
            err.contains("appendonly") && err.contains("does not implement"),
            "{err}"
        );
        assert!(Config::from_args(&["--save".into(), "60".into(), "1".into()]).is_err());
        assert_eq!(
            Config::from_args(&["--maxmemory".into(), "1mb".into()])
                .map(|c| c.get_i64("maxmemory")),
            Ok(1 << 20)
        );
        assert!(Config::default()
            .load_text("daemonize yes\nlogfile /tmp/x.log\npidfile /tmp/x.pid\n")
            .is_ok());
        assert!(Config::default()
            .load_text("appendonly no\nsave \"\"\nmaxmemory 0\nlogfile \"\"\n")
            .is_ok());
        assert_eq!(c.set("port", "1"), Err(ConfigSetError::Immutable("port")));
        assert!(matches!(
            c.set("maxmemory-policy", "bogus"),
            Err(ConfigSetError::Invalid(..))
        ));
        std::fs::remove_file(dir).ok();
    }

    #[test]
    fn set_many_is_all_or_nothing_with_redis_precedence() {
        let c = Config::default();
        // The first bad name is reported, whatever is wrong with it.
        assert_eq!(
            c.set_many(&[("timeout", "1"), ("nope", "1"), ("port", "1")]),
            Err((1, ConfigSetError::Unknown))
        );
        assert_eq!(
            c.set_many(&[("port", "1"), ("nope", "1")]),
            Err((0, ConfigSetError::Immutable("port")))
        );
        assert_eq!(
            c.set_many(&[("maxmemory", "0"), ("MAXMEMORY", "0")]),
            Err((1, ConfigSetError::Duplicate("maxmemory")))
        );
        assert_eq!(
            c.set_many(&[("timeout", "5"), ("hz", "x")]),
            Err((
                1,
                ConfigSetError::Invalid("hz", "argument couldn't be parsed into an integer".into())
            ))
        );
        assert_eq!(
            c.get("timeout").as_deref(),
            Some("0"),
            "nothing was applied"
        );
        let epoch = c.epoch();
        assert_eq!(
            c.set_many(&[("timeout", "5"), ("Appendonly", "NO")]),
            Ok(())
        );
        assert_eq!(c.get("timeout").as_deref(), Some("5"));
        assert_eq!(c.get("appendonly").as_deref(), Some("no"));
        assert!(c.epoch() > epoch);
    }

    #[test]
    fn values_are_normalised_as_redis_does() {
        let c = Config::default();
        c.set("hz", "100000").unwrap();
        assert_eq!(c.get_i64("hz"), 500);
        c.set("hz", "0").unwrap();
        assert_eq!(c.get_i64("hz"), 1);
        c.set("maxmemory", "0GB").unwrap();
        assert_eq!(c.get_i64("maxmemory"), 0);
        assert_eq!(
            c.set("maxmemory", "-1"),
            Err(ConfigSetError::Invalid(
                "maxmemory",
                "argument must be a memory value".into()
            ))
        );
        assert_eq!(
            c.set("loglevel", "x"),
            Err(ConfigSetError::Invalid(
                "loglevel",
                "argument(s) must be one of the following: debug, verbose, notice, warning".into()
            ))
        );
        assert_eq!(Config::canonical_name("MaxMemory"), Some("maxmemory"));
        assert_eq!(Config::canonical_name("nope"), None);
    }

    #[test]
    fn rewrite_keeps_the_file_and_updates_values() {
        let c = Config::default();
        c.set("proto-max-bulk-len", "2mb").unwrap();
        c.set("timeout", "7").unwrap();
        let old =
            "# my settings\nport 6379\ntimeout 0\nsave 60 1\nsave 300 10\n\nunknown-line stays\n";
        let new = c.rewritten(old);
        assert_eq!(
            new,
            "# my settings\nport 6379\ntimeout 7\nsave \"\"\n\nunknown-line stays\n\
             # Generated by CONFIG REWRITE\nproto-max-bulk-len 2097152\n"
        );
        // The rewritten text loads back to the same settings.
        let back = Config::default();
        back.load_text(&new.replace("unknown-line stays", ""))
            .unwrap();
        assert_eq!(back.get_i64("proto-max-bulk-len"), 2 << 20);
        assert_eq!(back.get_i64("timeout"), 7);
        assert!(Config::default().rewrite().is_err());
    }

    #[test]
    fn settings_strata_does_not_implement_are_refused_except_off() {
        let c = Config::default();
        for (name, value) in [("appendonly", "yes"), ("save", "3600 1")] {
            match c.set(name, value) {
                Err(ConfigSetError::Invalid(n, why)) => {
                    assert_eq!(n, name);
                    assert!(why.starts_with("Strata does not implement"), "{why}");
                }
                other => panic!("{name} {value}: {other:?}"),
            }
        }
        for (name, value) in [("appendonly", "no"), ("save", ""), ("maxmemory", "0")] {
            assert_eq!(c.set(name, value), Ok(()), "{name} {value}");
        }
        // The refusal is all-or-nothing with the rest of the CONFIG SET.
        assert!(c
            .set_many(&[("timeout", "9"), ("appendonly", "yes")])
            .is_err());
        assert_eq!(c.get_i64("timeout"), 0);
    }

    #[test]
    fn output_buffer_limits_parse_as_redis_does() {
        let c = Config::default();
        let get = || c.get("client-output-buffer-limit").unwrap();
        assert_eq!(
            get(),
            "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        assert_eq!(c.output_limits().get(ClientClass::Replica).hard, 256 << 20);
        c.set("client-output-buffer-limit", "normal 1mb 512kb 1")
            .unwrap();
        assert_eq!(
            c.output_limits().get(ClientClass::Normal),
            OutputLimit {
                hard: 1 << 20,
                soft: 512 << 10,
                soft_seconds: 1
            }
        );
        // Later groups override earlier ones; units are case-insensitive; k is 1000, kb 1024.
        c.set(
            "client-output-buffer-limit",
            "replica 1k 1K 5 slave 2 3 4 Normal 1g 2GB 007",
        )
        .unwrap();
        assert_eq!(
            get(),
            "normal 1000000000 2147483648 7 slave 2 3 4 pubsub 33554432 8388608 60"
        );
        c.set("client-output-buffer-limit", "").unwrap();
        c.set("client-output-buffer-limit", "replica mb 0 0")
            .unwrap();
        assert!(get().contains(" slave 0 0 0 "));
        c.set(
            "client-output-buffer-limit",
            "pubsub 99999999999999999999 0 +5",
        )
        .unwrap();
        assert!(get().ends_with("pubsub 18446744073709551615 0 5"));
        let why = |v: &str| match c.set("client-output-buffer-limit", v) {
            Err(ConfigSetError::Invalid(_, why)) => why,
            other => panic!("{v}: {other:?}"),
        };
        for v in ["normal 1 1", "normal 1 1  "] {
            assert_eq!(
                why(v),
                "Wrong number of arguments in buffer limit configuration."
            );
        }
        for v in ["master 1 1 1", "foo 1 1 1"] {
            assert_eq!(
                why(v),
                "Invalid client class specified in buffer limit configuration."
            );
        }
        for v in [
            "normal 1x 1 1",
            "normal -1 1 1",
            "normal +5 1 1",
            "normal 1.5mb 1 1",
            "normal 1 1 -1",
            "normal 1 1 1.5",
            "normal 1 1 9223372036854775807",
        ] {
            assert_eq!(
                why(v),
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
                "{v}"
            );
        }
        // Nothing of a refused value was applied.
        assert!(get().starts_with("normal 1000000000 2147483648 7 "));
    }

    #[test]
    fn settings_parse_as_redis_accepts_them() {
        assert_eq!(parse_memory_or_percent("10%"), Ok(-10));
        assert_eq!(parse_memory_or_percent("0%"), Ok(0));
        assert_eq!(parse_memory_or_percent("100%"), Ok(-100));
        assert_eq!(
            parse_memory_or_percent("101%"),
            Err("percentage argument must be less or equal to 100".into())
        );
        assert_eq!(parse_memory_or_percent("1mb"), Ok(1 << 20));
        assert_eq!(parse_memory_or_percent(""), Ok(0));
        for bad in ["-1", "abc", "-5%", "x%"] {
            assert_eq!(
                parse_memory_or_percent(bad),
                Err("argument must be a memory or percent value".into()),
                "{bad}"
            );
        }
        assert_eq!(format_memory_or_percent(-7), "7%");
        assert_eq!(format_memory_or_percent(1 << 20), "1048576");
    }
}
