//! Server settings, named as in redis.conf: one declarative table of every setting Strata has, used
//! by the config file, `--name value` flags, CONFIG GET/SET/REWRITE and docs/configuration.md.
//!
//! Values are validated and normalised when stored (`1mb` is kept as `1048576`, `YES` as `yes`), so
//! readers parse nothing but integers. A CONFIG SET of several settings validates all of them before
//! storing any, under one write lock: a reader sees all of the new values or none.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use strata_core::glob::glob_match;
use strata_shard::notify;

mod parse;
mod rewrite;
mod specs;

pub use parse::{split_args, ConfigFileError, REDIS_VERSION};
use specs::DEPRECATED;
pub use specs::{ConfigSpec, Kind, ALIASES, SPECS};

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

/// Makes `dir` the process's working directory, as Redis's CONFIG SET dir does (so relative file
/// names, as a `logfile` given later, are inside it); returns the absolute path CONFIG GET shows,
/// or Redis's reason (the system's error text).
fn change_dir(dir: &str) -> Result<String, String> {
    let strerror = |e: std::io::Error| {
        let text = e.to_string();
        match text.find(" (os error") {
            Some(at) => text[..at].to_string(),
            None => text,
        }
    };
    std::env::set_current_dir(dir).map_err(strerror)?;
    let cwd = std::env::current_dir().map_err(strerror)?;
    Ok(cwd.to_string_lossy().into_owned())
}

/// The range Redis allows a byte-size setting: `maxmemory` is unsigned, the others are signed
/// 64-bit with the lower bounds Redis's config table gives them.
fn memory_bounds(name: &str) -> (u64, u64) {
    let max = i64::MAX as u64;
    match name {
        "maxmemory" => (0, u64::MAX),
        "proto-max-bulk-len" | "client-query-buffer-limit" => (1 << 20, max),
        "repl-backlog-size" | "active-defrag-ignore-bytes" => (1, max),
        _ => (0, max),
    }
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

/// The live configuration.
pub struct Config {
    values: RwLock<HashMap<&'static str, String>>,
    epoch: AtomicU64,
    /// `client-output-buffer-limit` as numbers; shared with every client's handle.
    output_limits: Arc<OutputLimits>,
    /// The config file given at start-up (absolute), for INFO `config_file` and CONFIG REWRITE.
    file: Option<PathBuf>,
    /// `rename-command` lines read at start-up, in order: (command, new name; "" removes it).
    renames: Vec<(String, String)>,
    /// `user` lines read at start-up, in order (the words after `user`).
    users: Vec<String>,
}

/// A setting Strata stores but cannot act on yet, set to a value other than its default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InertSetting {
    pub name: &'static str,
    pub value: String,
    /// The feature Strata does not have yet.
    pub feature: &'static str,
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
            renames: Vec::new(),
            users: Vec::new(),
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
    if spec.name == "oom-score-adj-values" {
        check_oom_score_adj_values(&v)?;
    }
    // Redis's enum names `relative` by its first spelling, `yes`.
    if spec.name == "oom-score-adj" && v == "relative" {
        return Ok("yes".into());
    }
    Ok(v)
}

/// Redis's check of `oom-score-adj-values`: three integers (master, replica, background child),
/// split on single spaces as Redis splits them, each within -2000..=2000.
fn check_oom_score_adj_values(v: &str) -> Result<(), String> {
    let parts: Vec<&str> = v.split(' ').collect();
    if parts.len() != 3 {
        return Err("wrong number of arguments".into());
    }
    for p in parts {
        match strata_core::num::parse_i64(p.as_bytes()) {
            Some(n) if (-2000..=2000).contains(&n) => {}
            _ => {
                return Err(
                    "Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into(),
                )
            }
        }
    }
    Ok(())
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

fn normalize_kind(spec: &ConfigSpec, value: &str, current: &str) -> Result<String, String> {
    Ok(match spec.kind {
        Kind::OutputBufferLimit => normalize_output_limits(value, current)?,
        Kind::KeyspaceEvents => {
            notify::flags_to_string(notify::parse_flags(value).ok_or_else(|| {
                "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()
            })?)
        }
        Kind::Int { min, max } => {
            // Redis's string2ll: no '+', no leading zeros or blanks.
            let v = strata_core::num::parse_i64(value.as_bytes())
                .ok_or_else(|| "argument couldn't be parsed into an integer".to_string())?;
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
        Kind::Octal { max } => {
            let v = i64::from_str_radix(value, 8)
                .map_err(|_| "argument couldn't be parsed as an octal number".to_string())?;
            if !(0..=max).contains(&v) {
                return Err(format!("argument must be between 0 and {max:o} inclusive"));
            }
            format!("{v:o}")
        }
        Kind::Percentiles => normalize_percentiles(value)?,
        Kind::MemoryOrPercent => format_memory_or_percent(parse_memory_or_percent(value)?),
        Kind::Memory => {
            let v = memtoull(value).ok_or_else(|| "argument must be a memory value".to_string())?;
            let (min, max) = memory_bounds(spec.name);
            if v < min || v > max {
                return Err(format!(
                    "argument must be between {min} and {max} inclusive"
                ));
            }
            v.to_string()
        }
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
        Kind::Save => normalize_save(value)?,
        Kind::ReplicaOf => normalize_replicaof(value)?,
        Kind::ShutdownFlags => normalize_shutdown_flags(value)?,
    })
}

/// C's `strtoll(v, &end, 10)` with the whole string consumed: leading blanks, a sign, digits that
/// saturate; the empty string is 0.
fn strtoll(v: &str) -> Option<i64> {
    let t = v.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if v.is_empty() {
        return Some(0);
    }
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(match digits.parse::<i64>() {
        Ok(n) if neg => -n,
        Ok(n) => n,
        Err(_) if neg => i64::MIN,
        Err(_) => i64::MAX,
    })
}

/// `save`: `""` (no snapshots) or `<seconds> <changes>` pairs, seconds at least 1 and changes at
/// least 0, words split on single spaces; stored as Redis prints it.
pub(super) fn normalize_save(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Ok(String::new());
    }
    let bad = || "Invalid save parameters".to_string();
    let words: Vec<&str> = value.split(' ').collect();
    if !words.len().is_multiple_of(2) {
        return Err(bad());
    }
    let mut out = Vec::with_capacity(words.len());
    for pair in words.chunks(2) {
        let seconds = strtoll(pair[0]).filter(|s| *s >= 1).ok_or_else(bad)?;
        let changes = strtoll(pair[1]).filter(|c| *c >= 0).ok_or_else(bad)?;
        out.push(format!("{seconds} {}", changes as i32));
    }
    Ok(out.join(" "))
}

/// `replicaof`: `<host> <port>`, or `no one` (stored as `""`, none).
fn normalize_replicaof(value: &str) -> Result<String, String> {
    if value.is_empty() {
        return Ok(String::new());
    }
    let words: Vec<&str> = value.split(' ').collect();
    let [host, port] = words[..] else {
        return Err("wrong number of arguments".into());
    };
    if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
        return Ok(String::new());
    }
    match strtoll(port) {
        Some(p) if (0..=65535).contains(&p) && !port.is_empty() => Ok(format!("{host} {p}")),
        _ => Err("Invalid master port".into()),
    }
}

/// `shutdown-on-sigint`/`-sigterm`: `default` or SHUTDOWN flags, printed in Redis's order.
fn normalize_shutdown_flags(value: &str) -> Result<String, String> {
    const FLAGS: [&str; 4] = ["save", "nosave", "now", "force"];
    let mut set = [false; 4];
    for word in value.split(' ') {
        let word = word.to_ascii_lowercase();
        if word == "default" {
            continue;
        }
        let i = FLAGS.iter().position(|f| *f == word).ok_or_else(|| {
            "argument(s) must be one of the following: default, save, nosave, now, force"
                .to_string()
        })?;
        set[i] = true;
    }
    if set[0] && set[1] {
        return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
    }
    let names: Vec<&str> = FLAGS
        .iter()
        .zip(set)
        .filter(|(_, on)| *on)
        .map(|(f, _)| *f)
        .collect();
    Ok(if names.is_empty() {
        "default".into()
    } else {
        names.join(" ")
    })
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
        "appendfsync" => crate::settings::set_aof_fsync(match value {
            "always" => 2,
            "no" => 0,
            _ => 1,
        }),
        _ => {}
    }
}

/// Rebinds the server's TCP listeners to `port` and `bind` (CONFIG SET): installed by the
/// server, which owns them. Arguments: port, bind, tcp-backlog.
pub type ListenHook = fn(u16, &str, i32) -> Result<(), BindFailed>;

/// An address could not be bound (the reason has been logged); nothing changed.
#[derive(Debug)]
pub struct BindFailed;

static LISTEN_HOOK: std::sync::OnceLock<ListenHook> = std::sync::OnceLock::new();

/// Installs the rebinding CONFIG SET `port`/`bind` runs (the server does, at start-up).
pub fn set_listen_hook(hook: ListenHook) {
    let _ = LISTEN_HOOK.set(hook);
}

/// CONFIG SET `port`/`bind` as the table holds them; Ok without a server (tests).
fn apply_listen(table: &HashMap<&'static str, String>) -> Result<(), BindFailed> {
    let Some(hook) = LISTEN_HOOK.get() else {
        return Ok(());
    };
    let get = |name| table.get(name).map(String::as_str).unwrap_or("");
    hook(
        get("port").parse().unwrap_or(0),
        get("bind"),
        get("tcp-backlog").parse().unwrap_or(511),
    )
}

/// The process title from the template and the settings it names (`crate::proctitle`).
fn set_proc_title(table: &HashMap<&'static str, String>) {
    let get = |name| table.get(name).map(String::as_str).unwrap_or("");
    let file = PROCESS_CONFIG_FILE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    crate::proctitle::set(
        get("proc-title-template"),
        &crate::proctitle::Vars {
            port: get("port").parse().unwrap_or(0),
            tls_port: get("tls-port").parse().unwrap_or(0),
            bind: get("bind"),
            unixsocket: get("unixsocket"),
            config_file: &file,
            cluster: get("cluster-enabled") == "yes",
        },
    );
}

/// The server's config file as `{config-file}` names it (set by [`Config::apply_proc_title`]'s
/// caller at start-up through [`Config::config_file`]).
static PROCESS_CONFIG_FILE: Mutex<String> = Mutex::new(String::new());

/// `oom-score-adj` as the table holds it, for the process's class (a replica when `replicaof` is
/// set, as Redis decides by its master host).
fn apply_oom_score(table: &HashMap<&'static str, String>) -> Result<(), crate::oom::Refused> {
    let get = |name| table.get(name).map(String::as_str).unwrap_or("");
    let class = if get("replicaof").is_empty() {
        crate::oom::Class::Master
    } else {
        crate::oom::Class::Replica
    };
    crate::oom::apply(get("oom-score-adj"), get("oom-score-adj-values"), class)
}

fn find(name: &str) -> Option<&'static ConfigSpec> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| alias.eq_ignore_ascii_case(name))
        .map_or(name, |(_, canonical)| canonical);
    SPECS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

/// `min-replicas-to-write` and `min-replicas-max-lag` are both above 0: as Strata has no
/// replicas, write commands are refused (Redis's checkGoodReplicasStatus with no good replica).
static WRITES_NEED_REPLICAS: AtomicBool = AtomicBool::new(false);

/// Whether write commands are refused with NOREPLICAS (one load; see [`WRITES_NEED_REPLICAS`]).
#[inline]
pub fn writes_need_replicas() -> bool {
    WRITES_NEED_REPLICAS.load(Ordering::Relaxed)
}

impl Config {
    /// Builds a configuration from `strata [config-file] [--name value ...]` as redis-server
    /// reads its own: the file's lines, then the options as more lines of the same text.
    /// `command_exists` says whether a command name is in the command table (`rename-command`).
    pub fn from_args(
        args: &[String],
        command_exists: &dyn Fn(&str) -> bool,
    ) -> Result<Config, ConfigFileError> {
        let mut cfg = Config::default();
        let (file, rest) = match args.split_first() {
            Some((first, rest)) if !first.starts_with('-') => (Some(first), rest),
            _ => (None, args),
        };
        let options = parse::options_text(rest);
        let mut loader = parse::Loader {
            config: &mut cfg,
            command_exists,
            save_loaded: false,
            depth: 0,
        };
        match file {
            Some(path) => loader.load_file(path, Some(&options))?,
            None => loader.load_text(&format!("\n{options}"))?,
        }
        if let Some(path) = file {
            cfg.file = Some(std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path)));
        }
        Ok(cfg)
    }

    /// Applies redis.conf text (any command may be renamed). For tests and tools.
    pub fn load_text(&mut self, text: &str) -> Result<(), ConfigFileError> {
        parse::Loader {
            config: self,
            command_exists: &|_| true,
            save_loaded: false,
            depth: 0,
        }
        .load_text(text)
    }

    /// The `rename-command` lines read at start-up, in order: (command, new name; "" removes it).
    pub fn renames(&self) -> &[(String, String)] {
        &self.renames
    }

    /// The settings Strata stores without acting on them yet that are set to a value other than
    /// their default, plus the `user` lines (there is no ACL yet): what start-up warns about.
    pub fn inert_settings(&self) -> Vec<InertSetting> {
        let values = self.values.read().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<InertSetting> = SPECS
            .iter()
            .filter_map(|spec| {
                let feature = spec.inert?;
                let value = values.get(spec.name)?;
                let default = normalize_kind(spec, spec.default, spec.default).ok()?;
                (*value != default).then(|| InertSetting {
                    name: spec.name,
                    value: value.clone(),
                    feature,
                })
            })
            .collect();
        out.extend(self.users.iter().map(|user| InertSetting {
            name: "user",
            value: user.clone(),
            feature: "ACL",
        }));
        out
    }

    pub(super) fn store(&self, spec: &'static ConfigSpec, value: &str) -> Result<(), String> {
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
        // `dir` is where the process works, as in Redis (which chdir()s to it): the old one, to
        // go back to if this CONFIG SET fails.
        let mut old_dir: Option<String> = None;
        for (i, (spec, (_, value))) in specs.iter().zip(pairs).enumerate() {
            let current = table.get(spec.name).map(String::as_str).unwrap_or("");
            // Redis names the setting as it was asked for: an old name stays the old name.
            let asked = ALIASES
                .iter()
                .find(|(alias, _)| alias.eq_ignore_ascii_case(pairs[i].0))
                .map_or(spec.name, |(alias, _)| *alias);
            let mut v = normalize(spec, value, current);
            if let (Ok(dir), "dir") = (&v, spec.name) {
                v = change_dir(dir);
                if v.is_ok() {
                    old_dir = Some(current.to_string());
                }
            }
            match v {
                Ok(v) => values.push(v),
                Err(why) => {
                    if let Some(old) = &old_dir {
                        let _ = std::env::set_current_dir(old);
                    }
                    return Err((i, ConfigSetError::Invalid(asked, why)));
                }
            }
        }
        let before: Vec<Option<String>> =
            specs.iter().map(|s| table.get(s.name).cloned()).collect();
        for ((spec, v), (_, raw)) in specs.iter().zip(values).zip(pairs) {
            self.apply(&mut table, spec, v);
            apply_raw(spec, raw);
        }
        // Settings whose effect can fail once stored (the kernel refusing an OOM score, an
        // address that cannot be bound): on failure every setting of this CONFIG SET goes back
        // and is applied again, as Redis rolls back.
        let mut failed = None;
        let oom = specs
            .iter()
            .position(|s| s.name.starts_with("oom-score-adj"));
        if let Some(i) = oom {
            if specs.iter().any(|s| s.name == "oom-score-adj-values") {
                if let Some(values) = table.get("oom-score-adj-values") {
                    crate::oom::warn_if_unordered(values);
                }
            }
            if apply_oom_score(&table).is_err() {
                failed = Some((i, "Failed to set current oom_score_adj. Check server logs."));
            }
        }
        let listen = specs.iter().position(|s| matches!(s.name, "port" | "bind"));
        if let (None, Some(i)) = (failed, listen) {
            if apply_listen(&table).is_err() {
                failed = Some(match specs[i].name {
                    "port" => (i, "Unable to listen on this port. Check server logs."),
                    _ => (i, "Failed to bind to specified addresses."),
                });
            }
        }
        if failed.is_none() && specs.iter().any(|s| s.name == "proc-title-template") {
            set_proc_title(&table);
        }
        if let Some((i, why)) = failed {
            for (spec, old) in specs.iter().zip(before) {
                let raw = old.unwrap_or_default();
                self.apply(&mut table, spec, raw.clone());
                apply_raw(spec, &raw);
            }
            if oom.is_some() {
                let _ = apply_oom_score(&table);
            }
            if let Some(old) = &old_dir {
                let _ = std::env::set_current_dir(old);
            }
            self.epoch.fetch_add(1, Ordering::Release);
            return Err((i, ConfigSetError::Invalid(specs[i].name, why.into())));
        }
        self.epoch.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Sets the process title from `proc-title-template` if `set-proc-title` says so (start-up;
    /// CONFIG SET of the template sets it always, as Redis does).
    pub fn apply_proc_title(&self) {
        if let Some(file) = self.config_file() {
            *PROCESS_CONFIG_FILE
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = file.display().to_string();
        }
        let table = self.values.read().unwrap_or_else(|e| e.into_inner());
        if table.get("set-proc-title").map(String::as_str) == Some("yes") {
            set_proc_title(&table);
        }
    }

    /// Sets the process's OOM score from `oom-score-adj` and its values (start-up; CONFIG SET
    /// does it itself). A failure has been logged.
    pub fn apply_oom_score(&self) -> Result<(), crate::oom::Refused> {
        let table = self.values.read().unwrap_or_else(|e| e.into_inner());
        apply_oom_score(&table)
    }

    /// A value the server itself settles at start-up, immutable settings included (the pidfile
    /// a daemon started without one uses, which CONFIG GET then shows, as Redis does).
    pub fn set_at_startup(&self, name: &str, value: &str) -> Result<(), ConfigSetError> {
        let spec = find(name).ok_or(ConfigSetError::Unknown)?;
        let mut table = self.values.write().unwrap_or_else(|e| e.into_inner());
        let current = table.get(spec.name).map(String::as_str).unwrap_or("");
        let v = normalize(spec, value, current)
            .map_err(|why| ConfigSetError::Invalid(spec.name, why))?;
        self.apply(&mut table, spec, v);
        apply_raw(spec, value);
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
        let is_pattern = pattern.iter().any(|c| matches!(c, b'*' | b'?' | b'['));
        let mut out: Vec<_> = named
            .filter(|(_, canonical)| !(is_pattern && find(canonical).is_some_and(|s| s.hidden())))
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
        let mut c = Config::default();
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
        let any = |_: &str| true;
        let from = |a: &[&str]| {
            Config::from_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &any)
        };
        let c = Config::from_args(&args, &any).unwrap();
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
        let err = from(&["--nope", "1"]).err().unwrap();
        assert_eq!(
            err.report(),
            "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, \
             at line 2\n>>> 'nope \"1\"'\nBad directive or wrong number of arguments\n"
        );
        // Settings of features Strata lacks are stored, and listed as inert.
        let c2 = from(&[
            "--lazyfree-lazy-eviction",
            "yes",
            "--save",
            "60",
            "1",
            "--save",
            "10",
            "2",
        ])
        .unwrap();
        assert_eq!(c2.get("save").as_deref(), Some("60 1 10 2"));
        let inert: Vec<_> = c2.inert_settings().into_iter().map(|s| s.name).collect();
        assert_eq!(inert, ["lazyfree-lazy-eviction"]);
        assert!(Config::default().inert_settings().is_empty());
        assert_eq!(
            from(&["--maxmemory", "1mb"]).map(|c| c.get_i64("maxmemory")),
            Ok(1 << 20)
        );
        assert!(Config::default()
            .load_text("daemonize yes\nlogfile /tmp/x.log\npidfile /tmp/x.pid\n")
            .is_ok());
        assert!(Config::default()
            .load_text("appendonly no\nsave \"\"\nmaxmemory 0\nlogfile \"\"\n")
            .is_ok());
        assert_eq!(
            c.set("databases", "1"),
            Err(ConfigSetError::Immutable("databases"))
        );
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
            c.set_many(&[("timeout", "1"), ("nope", "1"), ("databases", "1")]),
            Err((1, ConfigSetError::Unknown))
        );
        assert_eq!(
            c.set_many(&[("databases", "1"), ("nope", "1")]),
            Err((0, ConfigSetError::Immutable("databases")))
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
            c.set_many(&[("timeout", "5"), ("Lazyfree-Lazy-Eviction", "NO")]),
            Ok(())
        );
        assert_eq!(c.get("timeout").as_deref(), Some("5"));
        assert_eq!(c.get("lazyfree-lazy-eviction").as_deref(), Some("no"));
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
        let new = c.rewritten(old, false);
        assert_eq!(
            new,
            "# my settings\nport 6379\ntimeout 7\nsave \"\"\n\n# ??? unknown-line stays\n\
             # Generated by CONFIG REWRITE\ndir \"./data\"\nproto-max-bulk-len 2mb\n"
        );
        // A default the rewrite had appended goes again; the user's own lines stay.
        c.set("proto-max-bulk-len", "512mb").unwrap();
        c.set("timeout", "0").unwrap();
        assert_eq!(
            c.rewritten(&new, false),
            "# my settings\nport 6379\ntimeout 0\nsave \"\"\n\n# ??? unknown-line stays\n\
             # Generated by CONFIG REWRITE\ndir \"./data\"\n"
        );
        // Several save pairs take one line each, reusing the old lines in order.
        c.set("save", "900 1 300 10").unwrap();
        assert_eq!(
            c.rewritten("save 1 1\n#x\n", false),
            "save 900 1\n#x\n# Generated by CONFIG REWRITE\ndir \"./data\"\nsave 300 10\n"
        );
        // The rewritten text loads back to the same settings.
        let mut back = Config::default();
        back.load_text(&new.replace("unknown-line stays", ""))
            .unwrap();
        assert_eq!(back.get_i64("proto-max-bulk-len"), 2 << 20);
        assert_eq!(back.get_i64("timeout"), 7);
        assert!(Config::default().rewrite().is_err());
    }

    /// DEBUG CONFIG-REWRITE-FORCE-ALL's text: every setting, and it loads back to the same values.
    #[test]
    fn a_forced_rewrite_writes_every_setting_and_loads_back() {
        let c = Config::default();
        c.set("timeout", "7").unwrap();
        let text = c.rewritten("", true);
        for spec in SPECS {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("{} ", spec.name))),
                "{} not written",
                spec.name
            );
        }
        let mut back = Config::default();
        back.load_text(&text).unwrap();
        for spec in SPECS {
            assert_eq!(back.get(spec.name), c.get(spec.name), "{}", spec.name);
        }
        assert_eq!(
            Config::default().rewrite_force_all(),
            Err("Bad address".into())
        );
    }

    #[test]
    fn settings_of_missing_features_are_validated_and_stored() {
        let c = Config::default();
        for (name, value, stored) in [
            ("lazyfree-lazy-eviction", "YES", "yes"),
            ("save", "3600 1 300 +100", "3600 1 300 100"),
            ("tls-port", "6380", "6380"),
            ("slave-read-only", "no", "no"),
            ("shutdown-on-sigterm", "NOW force", "now force"),
            ("repl-backlog-size", "2mb", "2097152"),
        ] {
            assert_eq!(c.set(name, value), Ok(()), "{name} {value}");
            assert_eq!(c.get(name).as_deref(), Some(stored), "{name}");
        }
        let inert: Vec<_> = c.inert_settings().into_iter().map(|s| s.name).collect();
        assert_eq!(
            inert,
            [
                "lazyfree-lazy-eviction",
                "repl-backlog-size",
                "replica-read-only",
                "shutdown-on-sigterm",
                "tls-port"
            ]
        );
        let why = |name: &str, value: &str| match c.set(name, value) {
            Err(ConfigSetError::Invalid(_, why)) => why,
            other => panic!("{name} {value}: {other:?}"),
        };
        for bad in ["1", "0 1", "1 -1", "a 1", "1 1 2"] {
            assert_eq!(why("save", bad), "Invalid save parameters", "{bad}");
        }
        assert_eq!(
            why("appendfsync", "sometimes"),
            "argument(s) must be one of the following: everysec, always, no"
        );
        assert_eq!(
            why("tls-port", "70000"),
            "argument must be between 0 and 65535 inclusive"
        );
        assert_eq!(c.set("save", ""), Ok(()));
        assert_eq!(
            c.set("cluster-enabled", "yes"),
            Err(ConfigSetError::Immutable("cluster-enabled"))
        );
    }

    #[test]
    fn config_file_lines_as_redis_reads_them() {
        let mut c = Config::default();
        c.load_text(
            "  # comment\n\n save 900 1\nsave 300 10\r\nlist-max-ziplist-entries 5\n\
             slaveof 127.0.0.1 6390\nrequirepass \"a b\\x41\"\nuser default on nopass ~* +@all\n\
             rename-command flushall \"\"\n",
        )
        .unwrap();
        assert_eq!(c.get("save").as_deref(), Some("900 1 300 10"));
        assert_eq!(c.get("replicaof").as_deref(), Some("127.0.0.1 6390"));
        assert_eq!(c.get("requirepass").as_deref(), Some("a bA"));
        let inert: Vec<_> = c
            .inert_settings()
            .into_iter()
            .map(|s| format!("{} {}", s.name, s.value))
            .collect();
        assert_eq!(
            inert,
            [
                "replicaof 127.0.0.1 6390",
                "user default on nopass ~* +@all"
            ]
        );
        assert_eq!(c.renames(), [("flushall".to_string(), String::new())]);
        let report = |text: &str| {
            Config::default()
                .load_text(text)
                .unwrap_err()
                .report()
                .to_string()
        };
        assert_eq!(
            report("port 1\n  hz   abc  \n"),
            "\n*** FATAL CONFIG FILE ERROR (Redis 7.0.15) ***\nReading the configuration file, \
             at line 2\n>>> 'hz   abc'\nargument couldn't be parsed into an integer\n"
        );
        assert!(report("include /nonexistent/strata.conf\n").starts_with(
            "Fatal error, can't open config file '/nonexistent/strata.conf': No such file or directory"
        ));
        assert!(report("port 1 2\n").ends_with("\nwrong number of arguments\n"));
        assert!(report("user\n").ends_with("\nBad directive or wrong number of arguments\n"));
        assert!(report("list-max-ziplist-entries\n").ends_with("wrong number of arguments\n"));
        assert!(report("maxmemory 'x\n").ends_with("\nUnbalanced quotes in configuration line\n"));
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
