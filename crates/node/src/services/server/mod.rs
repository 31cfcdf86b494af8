//! Server commands: COMMAND, CONFIG, INFO, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, TIME, LASTSAVE,
//! SHUTDOWN and DEBUG (Redis's server.c, config.c, db.c and debug.c). This file holds their table
//! entries and TIME, LASTSAVE and SHUTDOWN; each other command has its file: `command.rs`,
//! `config_cmd.rs`, `info.rs`, `databases.rs`, `debug.rs`.
//!
//! COMMAND's replies are generated from the command table alone, in Redis 7.0's shapes: flags and
//! ACL categories in Redis's order, the legacy (first, last, step) key triple and the equivalent
//! key spec, tips, subcommands. INFO gathers per-thread counters with one message per shard
//! ([`ShardSet::call_all`](strata_shard::ShardSet::call_all)) and renders them with a pure
//! function ([`render_info`]) using Redis's section and field names.
//!
//! Whole-database writes (FLUSHDB, FLUSHALL, SWAPDB) take the database locks on every shard first
//! ([`ShardSet::lock_dbs`](strata_shard::ShardSet::lock_dbs)), so a multi-key command never sees
//! one shard flushed and another not.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::future::{join_all, LocalBoxFuture};
use strata_core::glob::glob_match;
use strata_core::{Object, ValueRef};
use strata_resp::ReplyBuf;
use strata_shard::{lru_clock, CmdStat};

use crate::args::eq_ci;
use crate::config::{Config, ConfigSetError};
use crate::ctx::ConnCtx;
use crate::error::{CmdError, CmdResult};
use crate::reply::{reply_help, subcommand_syntax_error};
use crate::services::persist;
use crate::state::ServerState;
use crate::table::server_command as cmd;
use crate::table::{
    Arg, ArgKind, BeginSearch, CommandSpec, FindKeys, Flags, Handler, KeyFlags, KeySpec, ACL_ORDER,
};

/// The Redis version Strata answers to (INFO `redis_version`, HELLO `version`), so that clients
/// enable their Redis 7 features.
pub const REDIS_VERSION: &str = "7.0.15";

const LOADING_STALE: Flags = Flags::LOADING.or(Flags::STALE);
/// Administrative commands: CONFIG GET/SET/..., SHUTDOWN, DEBUG.
const ADMIN: Flags = Flags::ADMIN.or(Flags::NOSCRIPT).or(LOADING_STALE);

const ORDER_TIP: &[&str] = &["nondeterministic_output_order"];
const OUTPUT_TIP: &[&str] = &["nondeterministic_output"];
const ALL_SHARDS_OK: &[&str] = &["request_policy:all_shards", "response_policy:all_succeeded"];

/// The server family.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        subcommands: COMMAND_SUBCOMMANDS,
        ..cmd(
            "command",
            -1,
            LOADING_STALE,
            "Get array of Redis command details",
            "2.8.13",
            "O(N) where N is the total number of Redis commands",
            &["@connection"],
            ORDER_TIP,
            Handler::Conn(command),
        )
    },
    CommandSpec {
        subcommands: CONFIG_SUBCOMMANDS,
        ..cmd(
            "config",
            -2,
            Flags::NONE,
            "A container for server configuration commands",
            "2.0.0",
            "Depends on subcommand.",
            &[],
            &[],
            Handler::Container,
        )
    },
    cmd(
        "info",
        -1,
        LOADING_STALE,
        "Get information and statistics about the server",
        "1.0.0",
        "O(1)",
        &["@dangerous"],
        &[
            "nondeterministic_output",
            "request_policy:all_shards",
            "response_policy:special",
        ],
        Handler::Async(info),
    ),
    cmd(
        "dbsize",
        1,
        Flags::READONLY.or(Flags::FAST),
        "Return the number of keys in the selected database",
        "1.0.0",
        "O(1)",
        &["@keyspace"],
        &["request_policy:all_shards", "response_policy:agg_sum"],
        Handler::Async(dbsize),
    ),
    cmd(
        "flushdb",
        -1,
        Flags::WRITE,
        "Remove all keys from the current database",
        "1.0.0",
        "O(N) where N is the number of keys in the selected database",
        &["@keyspace", "@dangerous"],
        ALL_SHARDS_OK,
        Handler::Async(flushdb),
    ),
    cmd(
        "flushall",
        -1,
        Flags::WRITE,
        "Remove all keys from all databases",
        "1.0.0",
        "O(N) where N is the total number of keys in all databases",
        &["@keyspace", "@dangerous"],
        ALL_SHARDS_OK,
        Handler::Async(flushall),
    ),
    cmd(
        "swapdb",
        3,
        Flags::WRITE.or(Flags::FAST),
        "Swaps two Redis databases",
        "4.0.0",
        "O(N) where N is the count of clients watching or blocking on keys from both databases.",
        &["@keyspace", "@dangerous"],
        &[],
        Handler::Async(swapdb),
    ),
    cmd(
        "time",
        1,
        LOADING_STALE.or(Flags::FAST),
        "Return the current server time",
        "2.6.0",
        "O(1)",
        &[],
        OUTPUT_TIP,
        Handler::Conn(time),
    ),
    cmd(
        "lastsave",
        1,
        LOADING_STALE.or(Flags::FAST),
        "Get the UNIX time stamp of the last successful save to disk",
        "1.0.0",
        "O(1)",
        &["@admin", "@dangerous"],
        OUTPUT_TIP,
        Handler::Conn(lastsave),
    ),
    cmd(
        "shutdown",
        -1,
        ADMIN.or(Flags::NO_MULTI).or(Flags::ALLOW_BUSY),
        "Synchronously save the dataset to disk and then shut down the server",
        "1.0.0",
        "O(N) when saving, where N is the total number of keys in all databases when saving \
         data, otherwise O(1)",
        &[],
        &[],
        Handler::Async(shutdown),
    ),
    cmd(
        "save",
        1,
        Flags::ADMIN.or(Flags::NOSCRIPT).or(Flags::NO_MULTI),
        "Synchronously save the dataset to disk",
        "1.0.0",
        "O(N) where N is the total number of keys in all databases",
        &[],
        &[],
        Handler::Async(save),
    ),
    cmd(
        "bgsave",
        -1,
        Flags::ADMIN.or(Flags::NOSCRIPT),
        "Asynchronously save the dataset to disk",
        "1.0.0",
        "O(1)",
        &[],
        &[],
        Handler::Async(bgsave),
    ),
    cmd(
        "debug",
        -2,
        ADMIN,
        "A container for debugging commands",
        "1.0.0",
        "Depends on subcommand.",
        &[],
        &[],
        Handler::Async(debug),
    ),
];

static COMMAND_SUBCOMMANDS: &[CommandSpec] = &[
    cmd(
        "count",
        2,
        LOADING_STALE,
        "Get total number of Redis commands",
        "2.8.13",
        "O(1)",
        &["@connection"],
        &[],
        Handler::Conn(command_count),
    ),
    cmd(
        "docs",
        -2,
        LOADING_STALE,
        "Get array of specific Redis command documentation",
        "7.0.0",
        "O(N) where N is the number of commands to look up",
        &["@connection"],
        ORDER_TIP,
        Handler::Conn(command_docs),
    ),
    cmd(
        "getkeys",
        -4,
        LOADING_STALE,
        "Extract keys given a full Redis command",
        "2.8.13",
        "O(N) where N is the number of arguments to the command",
        &["@connection"],
        &[],
        Handler::Conn(command_getkeys),
    ),
    cmd(
        "getkeysandflags",
        -4,
        LOADING_STALE,
        "Extract keys and access flags given a full Redis command",
        "7.0.0",
        "O(N) where N is the number of arguments to the command",
        &["@connection"],
        &[],
        Handler::Conn(command_getkeys),
    ),
    cmd(
        "help",
        2,
        LOADING_STALE,
        "Show helpful text about the different subcommands",
        "5.0.0",
        "O(1)",
        &["@connection"],
        &[],
        Handler::Conn(command_help),
    ),
    cmd(
        "info",
        -2,
        LOADING_STALE,
        "Get array of specific Redis command details, or all when no argument is given.",
        "2.8.13",
        "O(N) where N is the number of commands to look up",
        &["@connection"],
        ORDER_TIP,
        Handler::Conn(command_info),
    ),
    cmd(
        "list",
        -2,
        LOADING_STALE,
        "Get an array of Redis command names",
        "7.0.0",
        "O(N) where N is the total number of Redis commands",
        &["@connection"],
        ORDER_TIP,
        Handler::Conn(command_list),
    ),
];

static CONFIG_SUBCOMMANDS: &[CommandSpec] = &[
    cmd(
        "get",
        -3,
        ADMIN,
        "Get the values of configuration parameters",
        "2.0.0",
        "O(N) when N is the number of configuration parameters provided",
        &[],
        &[],
        Handler::Conn(config_get),
    ),
    cmd(
        "set",
        -4,
        ADMIN,
        "Set configuration parameters to the given values",
        "2.0.0",
        "O(N) when N is the number of configuration parameters provided",
        &[],
        &["request_policy:all_nodes", "response_policy:all_succeeded"],
        Handler::Async(config_set),
    ),
    cmd(
        "resetstat",
        2,
        ADMIN,
        "Reset the stats returned by INFO",
        "2.0.0",
        "O(1)",
        &[],
        &[],
        Handler::Async(config_resetstat),
    ),
    cmd(
        "rewrite",
        2,
        ADMIN,
        "Rewrite the configuration file with the in memory configuration",
        "2.8.0",
        "O(1)",
        &[],
        &[],
        Handler::Conn(config_rewrite),
    ),
    cmd(
        "help",
        2,
        LOADING_STALE,
        "Show helpful text about the different subcommands",
        "5.0.0",
        "O(1)",
        &[],
        &[],
        Handler::Conn(config_help),
    ),
];

mod command;
mod config_cmd;
pub mod crash;
mod databases;
mod debug;
mod info;

use command::*;
use config_cmd::*;
use info::*;

pub use command::shown_flags;
use databases::*;
use debug::*;
pub use info::{bytes_to_human, info_sections, render_info, CpuTimes, InfoData};

// =====================================================================================
// TIME, LASTSAVE, SHUTDOWN
// =====================================================================================

/// TIME → [unix seconds, microseconds], as bulk strings.
fn time(cx: &mut ConnCtx<'_>) -> CmdResult {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    cx.out.array(2);
    cx.out.bulk_int(now.as_secs() as i64);
    cx.out.bulk_int(now.subsec_micros() as i64);
    Ok(())
}

/// LASTSAVE → unix time of the last successful save (the start time before any, as Redis).
fn lastsave(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.out.int(persist::status().last_save);
    Ok(())
}

/// A shutdown asked for by SIGTERM or SIGINT, carried out by the next cron tick (Redis's
/// `shutdown_asap`): SHUTDOWN ABORT may call it off meanwhile, and DEBUG PAUSE-CRON holds it.
static SHUTDOWN_ASAP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// SIGTERM/SIGINT: schedules the shutdown; false if one was already scheduled.
pub fn schedule_shutdown() -> bool {
    !SHUTDOWN_ASAP.swap(true, Ordering::SeqCst)
}

/// The cron's look at a scheduled shutdown: true (and the schedule taken) if one is due now.
pub fn due_shutdown() -> bool {
    !strata_shard::cron_paused() && SHUTDOWN_ASAP.swap(false, Ordering::SeqCst)
}

/// SAVE → OK once the dataset is on disk (a snapshot as BGSAVE's, which this caller waits for;
/// other clients are served meanwhile). -ERR if it failed.
fn save<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        if persist::in_progress() {
            return Err(CmdError::msg("ERR Background save already in progress"));
        }
        persist::count_save();
        match persist::save(cx.server, cx.lock_owner()).await {
            Ok(()) => cx.out.ok(),
            Err(_) => cx.out.error("ERR"),
        }
        Ok(())
    })
}

/// BGSAVE [SCHEDULE] → "Background saving started" (the file is written while the server
/// serves); "-ERR Background save already in progress" while one runs, SCHEDULE or not, as Redis
/// (which schedules only behind an AOF rewrite).
fn bgsave<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let schedule = match &cx.args[1..] {
            [] => false,
            [a] if eq_ci(a, "schedule") => true,
            _ => return Err(CmdError::Syntax),
        };
        // SCHEDULE waits for another kind of child in Redis (an AOF rewrite; Strata has none):
        // with an RDB save running it is refused the same.
        let _ = schedule;
        if persist::in_progress() {
            return Err(CmdError::msg("ERR Background save already in progress"));
        }
        // Inside EXEC, as Redis, the save is scheduled (the cron starts it after the
        // transaction, whose locks the save's own would wait for).
        if cx.session.txn_owner.is_some() {
            persist::status().scheduled = true;
            cx.out.simple("Background saving scheduled");
            return Ok(());
        }
        match persist::start(cx.server, cx.lock_owner(), persist::Kind::Background).await {
            Ok(_) => cx.out.simple("Background saving started"),
            Err(_) => return Err(CmdError::msg("ERR Background save already in progress")),
        }
        Ok(())
    })
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT] → no reply: the server stops, after saving the
/// dataset if SAVE says so or save points exist (without NOSAVE). A failed save keeps the server
/// running ("-ERR Errors trying to SHUTDOWN. Check logs.") unless FORCE.
fn shutdown<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(shutdown_cmd(cx))
}

async fn shutdown_cmd(cx: &mut ConnCtx<'_>) -> CmdResult {
    let (mut nosave, mut save, mut force, mut abort, mut now) = (false, false, false, false, false);
    for a in &cx.args[1..] {
        if eq_ci(a, "nosave") {
            nosave = true;
        } else if eq_ci(a, "save") {
            save = true;
        } else if eq_ci(a, "now") {
            now = true;
        } else if eq_ci(a, "force") {
            force = true;
        } else if eq_ci(a, "abort") {
            abort = true;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if (abort && (nosave || save || now || force)) || (nosave && save) {
        return Err(CmdError::Syntax);
    }
    if abort {
        // A SHUTDOWN command's shutdown is immediate; only a signal's, waiting for the cron,
        // can be called off.
        if !SHUTDOWN_ASAP.swap(false, Ordering::SeqCst) {
            return Err(CmdError::msg("ERR No shutdown in progress."));
        }
        crate::server_log!(Warning, "Shutdown manually aborted.");
        cx.out.ok();
        return Ok(());
    }
    let _ = now;
    let scheduled = !cx.server.config.get("save").unwrap_or_default().is_empty();
    crate::server_log!(Warning, "User requested shutdown...");
    if persist::cancel_background() {
        crate::server_log!(Warning, "There is a child saving an .rdb. Killing it!");
        persist::wait_idle().await;
    }
    if save || (scheduled && !nosave) {
        crate::server_log!(Notice, "Saving the final RDB snapshot before exiting.");
        if persist::save(cx.server, cx.lock_owner()).await.is_err() {
            if force {
                crate::server_log!(Warning, "Error trying to save the DB. Exit anyway.");
            } else {
                crate::server_log!(Warning, "Error trying to save the DB, can't exit.");
                return Err(CmdError::msg("ERR Errors trying to SHUTDOWN. Check logs."));
            }
        }
    }
    persist::shutdown_prepared();
    cx.server.exit_code.store(0, Ordering::SeqCst);
    cx.server.request_shutdown();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Bytes> {
        words
            .iter()
            .map(|w| Bytes::copy_from_slice(w.as_bytes()))
            .collect()
    }

    #[test]
    fn info_section_selection_follows_redis() {
        let default = info_sections(&[]);
        assert_eq!(
            default,
            [
                "server",
                "clients",
                "memory",
                "persistence",
                "stats",
                "replication",
                "cpu",
                "modules",
                "errorstats",
                "cluster",
                "keyspace",
                "strata"
            ]
        );
        assert_eq!(info_sections(&args(&["DEFAULT"])), default);
        assert_eq!(
            info_sections(&args(&["keyspace", "CPU"])),
            ["cpu", "keyspace"]
        );
        assert_eq!(info_sections(&args(&["module_list"])), ["modules"]);
        assert!(info_sections(&args(&["nope"])).is_empty());
        let all = info_sections(&args(&["all"]));
        assert!(all.contains(&"commandstats") && all.len() == SECTIONS.len());
    }

    #[test]
    fn info_text_has_redis_shape() {
        let d = InfoData {
            used_memory: 1_238_848,
            used_memory_peak: 1_238_848,
            used_memory_rss: 12_337_152,
            commandstats: vec![(
                "client|list",
                CmdStat {
                    calls: 7,
                    usec: 53,
                    rejected_calls: 0,
                    failed_calls: 4,
                },
            )],
            keyspace: vec![(0, 2, 1), (3, 5, 0)],
            ..InfoData::default()
        };
        let text = render_info(&["memory", "commandstats", "keyspace"], &d);
        assert!(text.starts_with("# Memory\r\nused_memory:1238848\r\nused_memory_human:1.18M\r\n"));
        assert!(text.contains("\r\nused_memory_rss_human:11.77M\r\n"));
        assert!(text.contains("\r\nused_memory_peak_perc:100.00%\r\n"));
        assert!(text.contains(
            "\r\n\r\n# Commandstats\r\ncmdstat_client|list:calls=7,usec=53,usec_per_call=7.57,\
             rejected_calls=0,failed_calls=4\r\n\r\n# Keyspace\r\n"
        ));
        assert!(text.ends_with(
            "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0\r\ndb3:keys=5,expires=0,avg_ttl=0\r\n"
        ));
        assert_eq!(render_info(&[], &d), "");
        assert_eq!(render_info(&["modules"], &d), "# Modules\r\n");
    }

    #[test]
    fn human_sizes_match_bytes_to_human() {
        assert_eq!(bytes_to_human(0), "0B");
        assert_eq!(bytes_to_human(1023), "1023B");
        assert_eq!(bytes_to_human(1024), "1.00K");
        assert_eq!(bytes_to_human(32768), "32.00K");
        assert_eq!(bytes_to_human(25_276_514_304), "23.54G");
        assert_eq!(bytes_to_human(1 << 40), "1.00T");
    }

    #[test]
    fn rdb_lengths_match_redis() {
        // Values checked against DEBUG OBJECT on redis-server 7.0.
        assert_eq!(serialized_len(ValueRef::Inline(b"v")), 2);
        assert_eq!(serialized_len(ValueRef::Int(12)), 2);
        assert_eq!(serialized_len(ValueRef::Int(1000)), 3);
        assert_eq!(serialized_len(ValueRef::Int(100_000)), 5);
        assert_eq!(serialized_len(ValueRef::Int(1 << 40)), 14);
        assert_eq!(serialized_len(ValueRef::Inline(b"007")), 4);
        assert_eq!(serialized_len(ValueRef::Int(-12_345_678_901)), 13);
        // Incompressible 21+ bytes stay raw; repetitive ones are LZF-compressed.
        assert_eq!(rdb_string_len(b"abcdefghijklmnopqrstu"), 22);
        assert_eq!(rdb_string_len(&[b'a'; 100]), 13);
        assert_eq!(rdb_string_len("ab".repeat(30).as_bytes()), 13);
        assert_eq!(
            rdb_string_len(b"hello_world,_hello_world!_hello_world,_hello_world!"),
            32
        );
    }

    #[test]
    fn c_number_prefixes() {
        assert_eq!(c_strtod(b"1.5"), 1.5);
        assert_eq!(c_strtod(b" 0.25xyz"), 0.25);
        assert_eq!(c_strtod(b"x"), 0.0);
    }
}
