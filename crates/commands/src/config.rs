//! Server settings, named as in redis.conf: one declarative table of every setting Strata has, used
//! by the config file, `--name value` flags, CONFIG GET/SET and docs/configuration.md.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::RwLock;

use strata_core::glob::glob_match;

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
        "snapshot schedule (persistence is not implemented yet)",
    ),
    spec(
        "appendonly",
        "no",
        Kind::Bool,
        true,
        "append-only file (not implemented yet)",
    ),
    spec(
        "maxmemory",
        "0",
        Kind::Memory,
        true,
        "memory limit (not enforced yet)",
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
        "maxclients",
        "10000",
        Kind::Int {
            min: 1,
            max: i32::MAX as i64,
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
        "idle client timeout in seconds",
    ),
    spec(
        "tcp-keepalive",
        "300",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "TCP keepalive seconds",
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
        "hz",
        "10",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "background task frequency",
    ),
    spec(
        "loglevel",
        "notice",
        Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"]),
        true,
        "log level",
    ),
    spec("logfile", "", Kind::Str, false, "log file (empty: stdout)"),
    spec(
        "daemonize",
        "no",
        Kind::Bool,
        false,
        "run in the background (not supported; must be no)",
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
        "lfu-decay-time",
        "1",
        Kind::Int {
            min: 0,
            max: i32::MAX as i64,
        },
        true,
        "LFU decay minutes",
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
        default: "auto",
        kind: Kind::Enum(&["auto", "io_uring", "epoll"]),
        mutable: false,
        strata_only: true,
        help: "event loop driver: io_uring, epoll, or auto (io_uring when the kernel allows it)",
    },
];

/// The live configuration.
pub struct Config {
    values: RwLock<HashMap<&'static str, String>>,
    epoch: AtomicU64,
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
        }
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

fn find(name: &str) -> Option<&'static ConfigSpec> {
    SPECS.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

impl Config {
    /// Builds a configuration from `strata [config-file] [--name value ...]`, like redis-server.
    pub fn from_args(args: &[String]) -> Result<Config, String> {
        let cfg = Config::default();
        let mut rest = args;
        if let Some(first) = rest.first().filter(|a| !a.starts_with("--")) {
            let text = std::fs::read_to_string(first)
                .map_err(|e| format!("can't open config file '{first}': {e}"))?;
            cfg.load_text(&text)?;
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
        self.store(spec, value)
    }

    fn store(&self, spec: &'static ConfigSpec, value: &str) -> Result<(), String> {
        let normalized = match spec.kind {
            Kind::Int { min, max } => {
                let v: i64 = value
                    .parse()
                    .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
                if v < min || v > max {
                    return Err(format!(
                        "argument must be between {min} and {max} inclusive"
                    ));
                }
                v.to_string()
            }
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
        };
        self.values
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(spec.name, normalized);
        self.epoch.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Changes a mutable setting at runtime (CONFIG SET). The error is the reason only; the caller
    /// wraps it in Redis's CONFIG SET message.
    pub fn set(&self, name: &str, value: &str) -> Result<(), ConfigSetError> {
        let spec = find(name).ok_or(ConfigSetError::Unknown)?;
        if !spec.mutable {
            return Err(ConfigSetError::Immutable(spec.name));
        }
        self.store(spec, value)
            .map_err(|reason| ConfigSetError::Invalid(spec.name, reason))
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
        let mut out: Vec<_> = SPECS
            .iter()
            .filter(|s| glob_match(pattern, s.name.as_bytes(), true))
            .map(|s| (s.name, values.get(s.name).cloned().unwrap_or_default()))
            .collect();
        out.sort_by_key(|(n, _)| *n);
        out
    }

    /// Bumped on every change, so threads can cache settings and reload only when it moves.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }
}

/// Why CONFIG SET refused a setting.
#[derive(Debug, PartialEq, Eq)]
pub enum ConfigSetError {
    Unknown,
    Immutable(&'static str),
    Invalid(&'static str, String),
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "1mb",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let c = Config::from_args(&args).unwrap();
        assert_eq!(c.get_i64("port"), 7001);
        assert_eq!(c.get("requirepass").as_deref(), Some("secret"));
        assert_eq!(c.get_i64("maxmemory"), 1 << 20);
        assert!(Config::from_args(&["--nope".into(), "1".into()]).is_err());
        assert_eq!(c.set("port", "1"), Err(ConfigSetError::Immutable("port")));
        assert!(matches!(
            c.set("maxmemory-policy", "bogus"),
            Err(ConfigSetError::Invalid(..))
        ));
        std::fs::remove_file(dir).ok();
    }
}
