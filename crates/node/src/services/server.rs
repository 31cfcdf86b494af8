//! Server commands: COMMAND, CONFIG, INFO, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, TIME, LASTSAVE,
//! SHUTDOWN and DEBUG (Redis's server.c, config.c, db.c and debug.c).
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
        Handler::Conn(shutdown),
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

// =====================================================================================
// COMMAND
// =====================================================================================

pub fn shown_flags(spec: &CommandSpec) -> Vec<&'static str> {
    spec.flag_names()
}

/// One COMMAND INFO entry: name, arity, flags, first/last/step, ACL categories, tips, key specs,
/// subcommands.
fn write_command_info(out: &mut ReplyBuf, spec: &CommandSpec, name: &str) {
    out.array(10);
    out.bulk(name.as_bytes());
    out.int(spec.arity as i64);
    let flags = shown_flags(spec);
    out.set(flags.len());
    for f in flags {
        out.simple(f);
    }
    let ((first, last, step), _) = spec.key_specs().legacy_range();
    out.int(first);
    out.int(last);
    out.int(step);
    let cats = spec.acl_categories();
    out.set(cats.len());
    for c in cats {
        out.simple(c);
    }
    out.set(spec.tips.len());
    for t in spec.tips {
        out.bulk(t.as_bytes());
    }
    // Redis 7.0 sends key specs and subcommands as sets in RESP3.
    out.set(spec.keys.len());
    for k in spec.keys {
        write_key_spec(out, k);
    }
    out.set(spec.subcommands.len());
    for sub in spec.subcommands {
        write_command_info(out, sub, &format!("{name}|{}", sub.name));
    }
}

/// One key spec as COMMAND INFO shows it: [notes], flags, begin_search, find_keys.
fn write_key_spec(out: &mut ReplyBuf, k: &KeySpec) {
    out.map(3 + !k.notes.is_empty() as usize);
    if !k.notes.is_empty() {
        out.bulk(b"notes");
        out.bulk(k.notes.as_bytes());
    }
    out.bulk(b"flags");
    write_key_flags(out, k.flags);
    out.bulk(b"begin_search");
    out.map(2);
    out.bulk(b"type");
    match k.begin_search {
        BeginSearch::Index(index) => {
            out.bulk(b"index");
            out.bulk(b"spec");
            out.map(1);
            out.bulk(b"index");
            out.int(index as i64);
        }
        BeginSearch::Keyword { keyword, startfrom } => {
            out.bulk(b"keyword");
            out.bulk(b"spec");
            out.map(2);
            out.bulk(b"keyword");
            out.bulk(keyword.as_bytes());
            out.bulk(b"startfrom");
            out.int(startfrom as i64);
        }
        BeginSearch::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
    out.bulk(b"find_keys");
    out.map(2);
    out.bulk(b"type");
    match k.find_keys {
        FindKeys::Range {
            lastkey,
            step,
            limit,
        } => {
            out.bulk(b"range");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"lastkey");
            out.int(lastkey as i64);
            out.bulk(b"keystep");
            out.int(step as i64);
            out.bulk(b"limit");
            out.int(limit as i64);
        }
        FindKeys::Keynum {
            keynumidx,
            firstkey,
            step,
        } => {
            out.bulk(b"keynum");
            out.bulk(b"spec");
            out.map(3);
            out.bulk(b"keynumidx");
            out.int(keynumidx as i64);
            out.bulk(b"firstkey");
            out.int(firstkey as i64);
            out.bulk(b"keystep");
            out.int(step as i64);
        }
        FindKeys::Unknown => {
            out.bulk(b"unknown");
            out.bulk(b"spec");
            out.map(0);
        }
    }
}

/// Key-spec flags as a set of simple strings (COMMAND INFO, COMMAND GETKEYSANDFLAGS).
fn write_key_flags(out: &mut ReplyBuf, flags: KeyFlags) {
    let names: Vec<&str> = flags.names().collect();
    out.set(names.len());
    for n in names {
        out.simple(n);
    }
}

/// One COMMAND DOCS entry (the value; the caller writes the name), fields in Redis's order.
fn write_command_docs(out: &mut ReplyBuf, spec: &CommandSpec, name: &str) {
    let docs = &spec.docs;
    let subs = !spec.subcommands.is_empty();
    out.map(
        4 + 3 * docs.deprecated.is_some() as usize
            + !docs.history.is_empty() as usize
            + !docs.args.is_empty() as usize
            + subs as usize,
    );
    for (k, v) in [
        ("summary", spec.summary),
        ("since", spec.since),
        ("group", spec.group),
        ("complexity", spec.complexity),
    ] {
        out.bulk(k.as_bytes());
        out.bulk(v.as_bytes());
    }
    if let Some((since, replaced_by)) = docs.deprecated {
        out.bulk(b"doc_flags");
        out.set(1);
        out.simple("deprecated");
        out.bulk(b"deprecated_since");
        out.bulk(since.as_bytes());
        out.bulk(b"replaced_by");
        out.bulk(replaced_by.as_bytes());
    }
    if !docs.history.is_empty() {
        out.bulk(b"history");
        out.set(docs.history.len());
        for (version, change) in docs.history {
            out.array(2);
            out.bulk(version.as_bytes());
            out.bulk(change.as_bytes());
        }
    }
    if !docs.args.is_empty() {
        out.bulk(b"arguments");
        write_args(out, docs.args);
    }
    if subs {
        out.bulk(b"subcommands");
        out.map(spec.subcommands.len());
        for sub in spec.subcommands {
            let full = format!("{name}|{}", sub.name);
            out.bulk(full.as_bytes());
            write_command_docs(out, sub, &full);
        }
    }
}

/// COMMAND DOCS's `arguments`: one map per argument, nested for oneof/block.
fn write_args(out: &mut ReplyBuf, args: &[Arg]) {
    out.array(args.len());
    for a in args {
        let flags = [
            ("optional", a.optional),
            ("multiple", a.multiple),
            ("multiple_token", a.multiple_token),
        ];
        let nflags = flags.iter().filter(|(_, on)| *on).count();
        let sub = match a.kind {
            ArgKind::OneOf(sub) | ArgKind::Block(sub) => Some(sub),
            _ => None,
        };
        out.map(
            2 + matches!(a.kind, ArgKind::Key(_) | ArgKind::PatternKey(_)) as usize
                + !a.token.is_empty() as usize
                + !a.since.is_empty() as usize
                + (nflags > 0) as usize
                + sub.is_some() as usize,
        );
        out.bulk(b"name");
        out.bulk(a.name.as_bytes());
        out.bulk(b"type");
        out.bulk(a.kind.name().as_bytes());
        if let ArgKind::Key(i) | ArgKind::PatternKey(i) = a.kind {
            out.bulk(b"key_spec_index");
            out.int(i as i64);
        }
        if !a.token.is_empty() {
            out.bulk(b"token");
            out.bulk(a.token.as_bytes());
        }
        if !a.since.is_empty() {
            out.bulk(b"since");
            out.bulk(a.since.as_bytes());
        }
        if nflags > 0 {
            out.bulk(b"flags");
            out.set(nflags);
            for (f, _) in flags.iter().filter(|(_, on)| *on) {
                out.simple(f);
            }
        }
        if let Some(sub) = sub {
            out.bulk(b"arguments");
            write_args(out, sub);
        }
    }
}

/// The table entry a `COMMAND INFO/DOCS` name designates ("get", "CLIENT|LIST").
fn lookup(name: &[u8]) -> Option<crate::table::Resolved> {
    std::str::from_utf8(name)
        .ok()
        .and_then(|n| crate::table::process().get(&n.to_ascii_lowercase()))
}

/// COMMAND → COMMAND INFO of every command.
fn command(cx: &mut ConnCtx<'_>) -> CmdResult {
    let top = crate::table::process().commands();
    cx.out.array(top.len());
    for spec in top {
        write_command_info(cx.out, spec, spec.name);
    }
    Ok(())
}

fn command_count(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.out.int(crate::table::process().commands().len() as i64);
    Ok(())
}

/// COMMAND INFO [name ...] → one entry per name (null for unknown names); all commands if none.
fn command_info(cx: &mut ConnCtx<'_>) -> CmdResult {
    let names = &cx.args[2..];
    if names.is_empty() {
        return command(cx);
    }
    cx.out.array(names.len());
    for n in names {
        match lookup(n) {
            Some(r) => write_command_info(cx.out, r.spec, r.name),
            None => cx.out.null(),
        }
    }
    Ok(())
}

/// COMMAND DOCS [name ...] → a map of command name to its documentation; unknown names are left
/// out; every command if no name is given.
fn command_docs(cx: &mut ConnCtx<'_>) -> CmdResult {
    let found: Vec<(&'static CommandSpec, &'static str)> = if cx.args.len() == 2 {
        crate::table::process()
            .commands()
            .iter()
            .map(|s| (*s, s.name))
            .collect()
    } else {
        cx.args[2..]
            .iter()
            .filter_map(|n| lookup(n))
            .map(|r| (r.spec, r.name))
            .collect()
    };
    cx.out.map(found.len());
    for (spec, name) in found {
        cx.out.bulk(name.as_bytes());
        write_command_docs(cx.out, spec, name);
    }
    Ok(())
}

/// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern] → command names,
/// subcommands included ("client|list").
fn command_list(cx: &mut ConnCtx<'_>) -> CmdResult {
    let mut a = cx.args_from(2);
    let mut filter = None;
    while let Ok(opt) = a.next_bytes() {
        if !(eq_ci(opt, "filterby") && a.remaining() == 2) {
            return Err(CmdError::Syntax);
        }
        let (kind, arg) = (a.next_bytes()?, a.next_bytes()?);
        filter = Some(if eq_ci(kind, "module") {
            ListFilter::Module
        } else if eq_ci(kind, "aclcat") {
            let cat = format!("@{}", String::from_utf8_lossy(arg).to_ascii_lowercase());
            ListFilter::AclCat(ACL_ORDER.iter().find(|c| **c == cat).copied())
        } else if eq_ci(kind, "pattern") {
            ListFilter::Pattern(arg.clone())
        } else {
            return Err(CmdError::Syntax);
        });
    }
    let names: Vec<&str> = crate::table::process()
        .entries()
        .iter()
        .filter(|e| match &filter {
            None => true,
            // Strata has no modules.
            Some(ListFilter::Module) => false,
            Some(ListFilter::AclCat(cat)) => {
                cat.is_some_and(|c| e.spec.acl_categories().contains(&c))
            }
            Some(ListFilter::Pattern(p)) => glob_match(p, e.name.as_bytes(), true),
        })
        .map(|e| e.name)
        .collect();
    cx.out.array(names.len());
    for n in names {
        cx.out.bulk(n.as_bytes());
    }
    Ok(())
}

enum ListFilter {
    Module,
    /// The category, or None if Redis has no such category (nothing matches).
    AclCat(Option<&'static str>),
    Pattern(Bytes),
}

/// COMMAND GETKEYS / GETKEYSANDFLAGS command [arg ...] → the key arguments of that command line
/// (with their key-spec flags for GETKEYSANDFLAGS).
fn command_getkeys(cx: &mut ConnCtx<'_>) -> CmdResult {
    let with_flags = eq_ci(&cx.args[1], "getkeysandflags");
    let line = &cx.args[2..];
    let invalid = || CmdError::msg("ERR Invalid command specified");
    // The command line names a command, then possibly its subcommand ("client|list" names neither).
    if line[0].contains(&b'|') {
        return Err(invalid());
    }
    let base = lookup(&line[0]).ok_or_else(invalid)?;
    let cmd = if base.spec.subcommands.is_empty() || line.len() == 1 {
        base
    } else {
        let sub = [&line[0][..], b"|", &line[1][..]].concat();
        lookup(&sub).ok_or_else(invalid)?
    };
    if !cmd.spec.has_keys() {
        return Err(CmdError::msg("ERR The command has no key arguments"));
    }
    if !cmd.spec.arity_ok(line.len()) {
        return Err(CmdError::msg(
            "ERR Invalid number of arguments specified for command",
        ));
    }
    let mut keys: Vec<(usize, KeyFlags)> = Vec::new();
    let mut specs = cmd.spec.key_specs();
    if cmd.spec.getkeys_routing_only {
        specs.getkeys = None;
    }
    specs.each(line, with_flags, |i, f| keys.push((i, f)));
    if keys.is_empty() && !cmd.spec.flags.has(Flags::NO_MANDATORY_KEYS) {
        return Err(CmdError::msg("ERR Invalid arguments specified for command"));
    }
    cx.out.array(keys.len());
    for (i, flags) in keys {
        if with_flags {
            cx.out.array(2);
            cx.out.bulk(&line[i]);
            write_key_flags(cx.out, flags);
        } else {
            cx.out.bulk(&line[i]);
        }
    }
    Ok(())
}

fn command_help(cx: &mut ConnCtx<'_>) -> CmdResult {
    reply_help(
        cx.out,
        &cx.args[0],
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}

// =====================================================================================
// CONFIG
// =====================================================================================

/// CONFIG GET pattern [pattern ...] → a map of matching settings. An exact name is echoed as the
/// client spelled it; each setting appears once.
fn config_get(cx: &mut ConnCtx<'_>) -> CmdResult {
    let config = &cx.server.config;
    let mut found: Vec<(String, &'static str, String)> = Vec::new();
    for pattern in &cx.args[2..] {
        let text = String::from_utf8_lossy(pattern);
        if !text.contains(['[', '*', '?']) {
            if let Some(name) = Config::canonical_name(&text) {
                if !found.iter().any(|(_, n, _)| *n == name) {
                    let value = config.get(name).unwrap_or_default();
                    found.push((text.into_owned(), name, value));
                }
            }
            continue;
        }
        for (name, value) in config.matching(pattern) {
            if !found.iter().any(|(_, n, _)| *n == name) {
                found.push((name.to_string(), name, value));
            }
        }
    }
    cx.out.map(found.len());
    for (shown, _, value) in found {
        cx.out.bulk(shown.as_bytes());
        cx.out.bulk(value.as_bytes());
    }
    Ok(())
}

/// CONFIG SET name value [name value ...] → OK, atomically; settings the shards act on (the access
/// policy behind OBJECT FREQ/IDLETIME) are pushed to every shard before the reply, and every
/// connection is woken to re-read those it acts on (`timeout`).
fn config_set<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        config_set_values(cx)?;
        cx.server.wake_clients();
        let server = cx.server.clone();
        cx.shards()
            .call_all(move |s| crate::access::apply_access_policy(s, &server.config))
            .await;
        // A lower `maxmemory-clients` (or `maxmemory`, for a percentage) evicts clients at once;
        // if this client is one of them, it gets no reply, as in Redis.
        if !crate::services::client_evict::configured(cx.server, Some(&cx.session.info)) {
            cx.out.ok();
        }
        Ok(())
    })
}

fn config_set_values(cx: &mut ConnCtx<'_>) -> CmdResult {
    let args = &cx.args[2..];
    if !args.len().is_multiple_of(2) {
        return Err(CmdError::Syntax);
    }
    let text: Vec<String> = args
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let pairs: Vec<(&str, &str)> = text
        .chunks(2)
        .map(|p| (p[0].as_str(), p[1].as_str()))
        .collect();
    let failed = |arg: &str, why: &str| {
        CmdError::Msg(
            format!("ERR CONFIG SET failed (possibly related to argument '{arg}') - {why}").into(),
        )
    };
    match cx.server.config.set_many(&pairs) {
        Ok(()) => Ok(()),
        Err((i, ConfigSetError::Unknown)) => Err(CmdError::Msg(
            format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                pairs[i].0
            )
            .into(),
        )),
        Err((i, ConfigSetError::Immutable(_))) => {
            Err(failed(pairs[i].0, "can't set immutable config"))
        }
        Err((i, ConfigSetError::Duplicate(_))) => Err(failed(pairs[i].0, "duplicate parameter")),
        Err((_, ConfigSetError::Invalid(name, why))) => Err(failed(name, &why)),
    }
}

/// CONFIG RESETSTAT → OK: zeroes every thread's counters (commands, connections, network bytes,
/// per-command stats, keyspace hits/misses, expired keys) and the memory peak.
fn config_resetstat<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        cx.shards()
            .call_all(|s| {
                let st = &mut s.stats;
                st.commands = 0;
                st.connections_received = 0;
                st.rejected_connections = 0;
                st.net_input_bytes = 0;
                st.net_output_bytes = 0;
                st.cmd.clear();
                st.latency.clear();
                st.errors.clear();
                st.errors_untracked = 0;
                for db in s.dbs_mut() {
                    db.reset_stats();
                }
            })
            .await;
        PEAK_MEMORY.store(crate::memory::used_memory(), Ordering::Relaxed);
        strata_shard::evict::reset_stats();
        crate::clients::reset_stats();
        *RATES.lock().unwrap_or_else(|e| e.into_inner()) = None;
        cx.out.ok();
        Ok(())
    })
}

fn config_rewrite(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.server
        .config
        .rewrite()
        .map_err(|e| CmdError::Msg(format!("ERR {e}").into()))?;
    cx.out.ok();
    Ok(())
}

fn config_help(cx: &mut ConnCtx<'_>) -> CmdResult {
    reply_help(
        cx.out,
        &cx.args[0],
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}

// =====================================================================================
// INFO
// =====================================================================================

/// INFO sections in Redis's output order, and whether a bare INFO includes them; `strata` is
/// Strata's own.
const SECTIONS: [(&str, bool); 14] = [
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
    /// Key modifications since start (no persistence yet, so "since the last save").
    pub dirty: u64,
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
                field!(out, "loading", "0");
                field!(out, "async_loading", "0");
                field!(out, "rdb_changes_since_last_save", "{}", d.dirty);
                field!(out, "rdb_bgsave_in_progress", "0");
                field!(out, "rdb_last_save_time", "{}", d.last_save);
                field!(out, "rdb_last_bgsave_status", "ok");
                field!(out, "rdb_saves", "0");
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
const ALLOCATOR: &str = "mimalloc";

/// The highest `used_memory` INFO has seen since start (or CONFIG RESETSTAT).
static PEAK_MEMORY: AtomicUsize = AtomicUsize::new(0);

/// The last sample of the traffic counters and the rates computed from the one before, for INFO's
/// `instantaneous_*` fields. Redis samples every 100 ms from its cron; Strata samples when INFO
/// runs (at most every 100 ms), so a rate is the average since the previous sample.
struct Rates {
    at: Instant,
    commands: u64,
    net_in: u64,
    net_out: u64,
    ops_per_sec: u64,
    input_kbps: f64,
    output_kbps: f64,
}

static RATES: Mutex<Option<Rates>> = Mutex::new(None);

fn sample_rates(commands: u64, net_in: u64, net_out: u64) -> (u64, f64, f64) {
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
struct ShardInfo {
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

/// A 40-hex-digit replication id, fixed for the life of the process.
fn replid() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(|| {
        let mut seed =
            ((std::process::id() as u64) << 20) ^ (strata_shard::now_ms() as u64) ^ 0x5DEE_CE66D;
        (0..40)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from_digit((seed >> 32) as u32 % 16, 16).unwrap_or('0')
            })
            .collect()
    })
}

fn os_name() -> String {
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

fn cpu_times() -> CpuTimes {
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

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE).max(0) as usize }
}

fn rss_bytes() -> usize {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<usize>().ok())
        .map_or(0, |pages| pages * page_size())
}

fn total_system_memory() -> usize {
    // SAFETY: sysconf has no preconditions.
    let pages = unsafe { libc::sysconf(libc::_SC_PHYS_PAGES) };
    pages.max(0) as usize * page_size()
}

async fn gather_info(cx: &ConnCtx<'_>) -> InfoData {
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
    let now = cx.now;
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
    d.used_memory = used_memory;
    d.used_memory_peak = PEAK_MEMORY
        .fetch_max(d.used_memory, Ordering::Relaxed)
        .max(d.used_memory);
    d.used_memory_rss = rss_bytes();
    d.total_system_memory = total_system_memory();
    d.maxmemory = config.get_i64("maxmemory");
    d.maxmemory_policy = config.get("maxmemory-policy").unwrap_or_default();
    d.last_save = server.started_ms / 1000;
    d.replid = replid().to_string();
    d.cpu = cpu_times();
    d
}

/// INFO [section ...] → the report as text (a verbatim string in RESP3).
fn info<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
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

// =====================================================================================
// Databases: DBSIZE, FLUSHDB, FLUSHALL, SWAPDB
// =====================================================================================

fn dbsize<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let db = cx.session.db;
        let sizes = cx.shards().call_all(move |s| s.db_mut(db).len()).await;
        cx.out.int(sizes.iter().sum::<usize>() as i64);
        Ok(())
    })
}

/// FLUSHDB/FLUSHALL's optional ASYNC|SYNC: true for SYNC, which is also the default (Redis's
/// `lazyfree-lazy-user-flush no`).
fn parse_flush_mode(args: &[Bytes]) -> Result<bool, CmdError> {
    match args {
        [_] => Ok(true),
        [_, mode] if eq_ci(mode, "sync") => Ok(true),
        [_, mode] if eq_ci(mode, "async") => Ok(false),
        _ => Err(CmdError::Syntax),
    }
}

/// Empties databases `dbs` on every shard, under database locks so that no multi-key command
/// runs half before and half after. Each shard swaps its tables out in O(1); their memory is freed
/// by each shard's background tick in slices. With `sync`, this returns once that is done (the
/// wait blocks no thread); otherwise at once.
async fn flush(cx: &ConnCtx<'_>, dbs: Vec<u32>, sync: bool) {
    let set = cx.shards().clone();
    let lock = set
        .lock_dbs_as(cx.lock_owner(), &dbs, strata_shard::Mode::Exclusive)
        .await;
    let parts = lock.shards().map(|shard| {
        let dbs: Vec<usize> = dbs.iter().map(|&d| d as usize).collect();
        lock.run(shard, move |s| s.flush(&dbs))
    });
    let freed = join_all(parts).await;
    lock.release();
    if sync {
        join_all(freed).await;
    }
}

/// FLUSHDB [ASYNC|SYNC] → OK.
fn flushdb<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let sync = parse_flush_mode(cx.args)?;
        flush(cx, vec![cx.session.db as u32], sync).await;
        cx.out.ok();
        Ok(())
    })
}

/// FLUSHALL [ASYNC|SYNC] → OK.
fn flushall<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let sync = parse_flush_mode(cx.args)?;
        let n = cx.server.config.get_i64("databases") as u32;
        flush(cx, (0..n).collect(), sync).await;
        cx.out.ok();
        Ok(())
    })
}

/// SWAPDB index1 index2 → OK: the two databases trade contents on every shard at once.
fn swapdb<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let index = |arg: &Bytes, msg: &'static str| {
            strata_core::num::parse_i64(arg)
                .filter(|v| i32::try_from(*v).is_ok())
                .ok_or(CmdError::msg(msg))
        };
        let a = index(&cx.args[1], "ERR invalid first DB index")?;
        let b = index(&cx.args[2], "ERR invalid second DB index")?;
        let n = cx.server.config.get_i64("databases");
        if a < 0 || a >= n || b < 0 || b >= n {
            return Err(CmdError::DbIndexOutOfRange);
        }
        if a != b {
            let (a, b) = (a as u32, b as u32);
            let set = cx.shards().clone();
            let lock = set
                .lock_dbs_as(cx.lock_owner(), &[a, b], strata_shard::Mode::Exclusive)
                .await;
            let parts = lock.shards().map(|shard| {
                lock.run(shard, move |s| {
                    s.swap_dbs(a as usize, b as usize, shard == 0)
                })
            });
            join_all(parts).await;
            lock.release();
        } else {
            // Nothing moves, but Redis counts the command as a change (a `save` point sees it).
            let db = a as usize;
            cx.shards()
                .call(0, move |s| s.db_mut(db).count_change())
                .await;
        }
        cx.out.ok();
        Ok(())
    })
}

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

/// LASTSAVE → unix time of the last save; with no persistence yet, the start time (which is what
/// Redis reports before its first save).
fn lastsave(cx: &mut ConnCtx<'_>) -> CmdResult {
    cx.out.int(cx.server.started_ms / 1000);
    Ok(())
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT] → no reply: the server stops. Strata cannot save
/// yet, so a shutdown that Redis would save before (SAVE, or a `save` schedule without NOSAVE) is
/// refused unless FORCE says to exit anyway.
fn shutdown(cx: &mut ConnCtx<'_>) -> CmdResult {
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
        // A shutdown here is immediate, so none is ever in progress.
        return Err(CmdError::msg("ERR No shutdown in progress."));
    }
    let scheduled = !cx.server.config.get("save").unwrap_or_default().is_empty();
    if (save || (scheduled && !nosave)) && !force {
        return Err(CmdError::msg(
            "ERR Errors trying to SHUTDOWN. Strata cannot save the dataset (persistence is not \
             implemented yet): use SHUTDOWN NOSAVE, or FORCE to exit without saving.",
        ));
    }
    cx.server.exit_code.store(0, Ordering::SeqCst);
    cx.server.request_shutdown();
    Ok(())
}

// =====================================================================================
// DEBUG
// =====================================================================================

/// Whether `enable-debug-command` lets this connection run DEBUG (`local`: loopback only).
fn debug_allowed(cx: &ConnCtx<'_>) -> bool {
    match cx
        .server
        .config
        .get("enable-debug-command")
        .unwrap_or_default()
        .as_str()
    {
        "yes" => true,
        "local" => {
            let addr = &cx.session.info.addr;
            addr.starts_with("127.0.0.1:") || addr.starts_with("[::1]:")
        }
        _ => false,
    }
}

/// DEBUG SLEEP seconds | OBJECT key | SET-ACTIVE-EXPIRE 0|1 | PAUSE-CRON 0|1 | ERROR message |
/// LOG message | HELP (and the other subcommands below).
fn debug<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        if !debug_allowed(cx) {
            return Err(CmdError::msg(
                "ERR DEBUG command not allowed. If the enable-debug-command option is set to \
                 \"local\", you can run it from a local connection, otherwise you need to set \
                 this option in the configuration file, and then restart the server.",
            ));
        }
        let sub = String::from_utf8_lossy(&cx.args[1]).to_ascii_lowercase();
        match (sub.as_str(), cx.args.len()) {
            ("help", 2) => debug_help(cx),
            ("sleep", 3) => {
                // SLEEP suspends this connection only; Redis stops the whole server.
                let secs = c_strtod(&cx.args[2]);
                if secs > 0.0 && secs.is_finite() {
                    (cx.server.sleep)(Duration::from_secs_f64(secs.min(1e9))).await;
                }
                cx.out.ok();
            }
            ("object", 3) => {
                let key = cx.args[2].clone();
                let (db, now) = (cx.session.db, cx.now);
                let shard = cx.shards().shard_of_key(&key);
                let text = cx
                    .shards()
                    .call(shard, move |s| {
                        s.db_mut(db).peek(&key, now).map(|e| debug_object(e, now))
                    })
                    .await
                    .ok_or(CmdError::NoSuchKey)?;
                cx.out.simple(&text);
            }
            ("digest-value", _) => {
                let db = cx.session.db;
                let keys = cx.args[2..].to_vec();
                cx.out.array(keys.len());
                for key in keys {
                    let shard = cx.shards().shard_of_key(&key);
                    let d = cx
                        .shards()
                        .call(shard, move |s| {
                            // As Redis: logically expired keys count until they are removed.
                            s.db(db)
                                .stored(&key)
                                .map_or([0; 20], crate::services::digest::value_digest)
                        })
                        .await;
                    cx.out.simple(&crate::services::digest::hex(&d));
                }
            }
            ("digest", 2) => {
                let per_shard = cx
                    .shards()
                    .call_all(move |s| {
                        (0..s.db_count())
                            .map(|i| {
                                let mut keys = [0u8; 20];
                                let mut any = false;
                                for e in s.db(i).iter_stored() {
                                    any = true;
                                    crate::services::digest::xor(
                                        &mut keys,
                                        &crate::services::digest::key_digest(e),
                                    );
                                }
                                (any, keys)
                            })
                            .collect::<Vec<_>>()
                    })
                    .await;
                let mut dbs = vec![(false, [0u8; 20]); per_shard.first().map_or(0, Vec::len)];
                for shard in per_shard {
                    for (acc, (any, keys)) in dbs.iter_mut().zip(shard) {
                        acc.0 |= any;
                        acc.1.iter_mut().zip(keys).for_each(|(a, b)| *a ^= b);
                    }
                }
                cx.out.simple(&crate::services::digest::hex(
                    &crate::services::digest::dataset_digest(&dbs),
                ));
            }
            ("set-active-expire", 3) => {
                // Redis reads it with atoi: (int) strtol.
                let on = crate::args::c_strtol(&cx.args[2]) as i32 != 0;
                cx.shards().call_all(move |s| s.active_expire = on).await;
                cx.out.ok();
            }
            ("pause-cron", 3) => {
                strata_shard::pause_cron(crate::args::c_strtol(&cx.args[2]) as i32 != 0);
                cx.out.ok();
            }
            ("error", 3) => {
                // The argument is the whole error line, code included.
                cx.out.error(&String::from_utf8_lossy(&cx.args[2]));
            }
            ("quicklist-packed-threshold", 3) => {
                let ok = std::str::from_utf8(&cx.args[2])
                    .ok()
                    .and_then(crate::config::memtoull)
                    .is_some_and(strata_core::list::set_packed_threshold);
                if !ok {
                    return Err(CmdError::msg(
                        "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
                    ));
                }
                cx.out.ok();
            }
            ("log", 3) => {
                eprintln!("DEBUG LOG: {}", String::from_utf8_lossy(&cx.args[2]));
                cx.out.ok();
            }
            ("protocol", 3) => debug_protocol(cx)?,
            _ => return Err(subcommand_syntax_error(cx.args)),
        }
        Ok(())
    })
}

/// DEBUG PROTOCOL <type>: one reply of each RESP type, as Redis sends them (for client tests).
fn debug_protocol(cx: &mut ConnCtx<'_>) -> CmdResult {
    let resp3 = cx.out.proto == strata_resp::Protocol::Resp3;
    let out = &mut *cx.out;
    match String::from_utf8_lossy(&cx.args[2])
        .to_ascii_lowercase()
        .as_str()
    {
        "string" => out.bulk(b"Hello World"),
        "integer" => out.int(12345),
        "double" => out.double_text("3.141"),
        "bignum" => {
            let n = "1234567999999999999999999999999999999";
            if resp3 {
                out.buf.extend_from_slice(format!("({n}\r\n").as_bytes());
            } else {
                out.bulk(n.as_bytes());
            }
        }
        "null" => out.null(),
        "array" => {
            out.array(3);
            (0..3).for_each(|j| out.int(j));
        }
        "set" => {
            out.set(3);
            (0..3).for_each(|j| out.int(j));
        }
        "map" => {
            out.map(3);
            for j in 0..3 {
                out.int(j);
                out.boolean(j == 1);
            }
        }
        "attrib" => {
            // An attribute is not a reply: a real one follows it (RESP2 gets only that).
            if resp3 {
                out.buf.extend_from_slice(b"|1\r\n");
                out.bulk(b"key-popularity");
                out.array(2);
                out.bulk(b"key:123");
                out.int(90);
            }
            out.bulk(b"Some real reply following the attribute");
        }
        "push" => {
            if !resp3 {
                return Err(CmdError::msg("ERR RESP2 is not supported by this command"));
            }
            out.push(2);
            out.bulk(b"server-cpu-usage");
            out.int(42);
            out.bulk(b"Some real reply following the push reply");
        }
        "verbatim" => out.verbatim("txt", b"This is a verbatim\nstring"),
        "true" => out.boolean(true),
        "false" => out.boolean(false),
        _ => {
            return Err(CmdError::msg(
                "ERR Wrong protocol type name. Please use one of the following: \
                 string|integer|double|bignum|null|array|set|map|attrib|push|verbatim|true|false",
            ))
        }
    }
    Ok(())
}

fn debug_help(cx: &mut ConnCtx<'_>) {
    reply_help(
        cx.out,
        &cx.args[0],
        &[
            "DIGEST",
            "    Output a hex signature representing the current DB content.",
            "DIGEST-VALUE <key> [<key> ...]",
            "    Output a hex signature of the values of all the specified keys.",
            "ERROR <string>",
            "    Return a Redis protocol error with <string> as message. Useful for clients",
            "    unit tests to simulate Redis errors.",
            "LOG <message>",
            "    Write <message> to the server log.",
            "OBJECT <key>",
            "    Show low level info about `key` and associated value.",
            "QUICKLIST-PACKED-THRESHOLD <size>",
            "    Sets the threshold for elements to be inserted as plain vs packed nodes",
            "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
            "PROTOCOL <type>",
            "    Reply with a test value of the specified type. <type> can be: string,",
            "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
            "    true, false.",
            "SET-ACTIVE-EXPIRE <0|1>",
            "    Setting it to 0 disables expiring keys in background when they are not",
            "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
            "    default.",
            "SLEEP <seconds>",
            "    Stop the server for <seconds>. Decimals allowed.",
            "PAUSE-CRON <0|1>",
            "    Stop periodic cron job processing.",
        ],
    );
}

/// DEBUG OBJECT's line, in Redis's format.
fn debug_object(e: &strata_core::Entry, now: i64) -> String {
    let v = e.value();
    let refcount = if crate::value::is_shared_int(e) {
        i32::MAX
    } else {
        1
    };
    let lru = e.lru();
    let idle = strata_shard::db::lru_idle(lru_clock(now), lru);
    format!(
        "Value at:{:p} refcount:{refcount} encoding:{} serializedlength:{} lru:{lru} \
         lru_seconds_idle:{idle}",
        e as *const strata_core::Entry,
        crate::value::encoding_name(v),
        serialized_len(v)
    )
}

/// The length of a value in an RDB file (Redis's rdbSavedObjectLen), with `rdbcompression` on.
fn serialized_len(v: ValueRef<'_>) -> usize {
    match v {
        ValueRef::Int(i) => int_encoded_len(i).unwrap_or_else(|| {
            let digits = i.to_string().len();
            rdb_len_size(digits) + digits
        }),
        ValueRef::Inline(s) => rdb_string_len(s),
        ValueRef::Obj(Object::Str(s)) => rdb_string_len(s),
        // Collections: their heap size stands in until the RDB encodings land with persistence.
        ValueRef::Obj(o) => o.heap_size(),
    }
}

/// Bytes of an RDB length prefix.
fn rdb_len_size(len: usize) -> usize {
    match len {
        0..=63 => 1,
        64..=16383 => 2,
        _ if len <= u32::MAX as usize => 5,
        _ => 9,
    }
}

/// Bytes of an integer stored in RDB's integer encodings (8, 16 or 32 bits), if it fits one.
fn int_encoded_len(i: i64) -> Option<usize> {
    if i8::try_from(i).is_ok() {
        Some(2)
    } else if i16::try_from(i).is_ok() {
        Some(3)
    } else if i32::try_from(i).is_ok() {
        Some(5)
    } else {
        None
    }
}

/// Bytes of a string in RDB: as an integer when it is a short canonical one, LZF-compressed when
/// longer than 20 bytes and compression saves at least 4 bytes, raw otherwise.
fn rdb_string_len(s: &[u8]) -> usize {
    if s.len() <= 11 {
        if let Some(n) = strata_core::num::parse_i64(s)
            .filter(|i| i.to_string().as_bytes() == s)
            .and_then(int_encoded_len)
        {
            return n;
        }
    }
    if s.len() > 20 {
        if let Some(c) = lzf_compressed_len(s, s.len() - 4) {
            return 1 + rdb_len_size(c) + rdb_len_size(s.len()) + c;
        }
    }
    rdb_len_size(s.len()) + s.len()
}

/// The size liblzf's `lzf_compress` (as built into Redis: HLOG 16, VERY_FAST) produces for
/// `input` with `out_len` bytes of room, or None where it gives up (returns 0). Only the size is
/// computed; the algorithm's decisions are replayed exactly so the size matches Redis's.
fn lzf_compressed_len(input: &[u8], out_len: usize) -> Option<usize> {
    const HLOG: u32 = 16;
    const HSIZE: usize = 1 << HLOG;
    const MAX_LIT: usize = 1 << 5;
    const MAX_OFF: usize = 1 << 13;
    const MAX_REF: usize = (1 << 8) + (1 << 3);
    let idx = |h: u32| ((h >> (24 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1);
    let frst = |p: usize| (u32::from(input[p]) << 8) | u32::from(input[p + 1]);
    let next = |v: u32, p: usize| (v << 8) | u32::from(input[p + 2]);

    let in_len = input.len();
    if in_len == 0 || out_len == 0 {
        return None;
    }
    // Positions + 1 (0 = empty slot), like the C version's NULL pointers.
    let mut htab = vec![0usize; HSIZE];
    let (mut ip, mut op, mut lit) = (0usize, 1usize, 0usize);
    let mut hval = frst(ip);
    while ip + 2 < in_len {
        hval = next(hval, ip);
        let slot = idx(hval);
        let reference = htab[slot];
        htab[slot] = ip + 1;
        let matched = reference > 1 && {
            let r = reference - 1;
            r < ip
                && ip - r - 1 < MAX_OFF
                && input[r + 2] == input[ip + 2]
                && input[r] == input[ip]
                && input[r + 1] == input[ip + 1]
        };
        if matched {
            let r = reference - 1;
            let mut len = 2usize;
            let maxlen = (in_len - ip - len).min(MAX_REF);
            if op + 3 + 1 >= out_len && op - (lit == 0) as usize + 3 + 1 >= out_len {
                return None;
            }
            op -= (lit == 0) as usize;
            let mut mismatch = false;
            if maxlen > 16 {
                for _ in 0..16 {
                    len += 1;
                    if input[r + len] != input[ip + len] {
                        mismatch = true;
                        break;
                    }
                }
            }
            if !mismatch {
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2;
            ip += 1;
            op += if len < 7 { 1 } else { 2 };
            op += 1; // the low offset byte
            lit = 0;
            op += 1; // start a literal run
            ip += len + 1;
            if ip + 2 >= in_len {
                break;
            }
            ip -= 2;
            hval = frst(ip);
            hval = next(hval, ip);
            htab[idx(hval)] = ip + 1;
            ip += 1;
            hval = next(hval, ip);
            htab[idx(hval)] = ip + 1;
            ip += 1;
        } else {
            if op >= out_len {
                return None;
            }
            lit += 1;
            op += 1;
            ip += 1;
            if lit == MAX_LIT {
                lit = 0;
                op += 1;
            }
        }
    }
    if op + 3 > out_len {
        return None;
    }
    while ip < in_len {
        lit += 1;
        op += 1;
        ip += 1;
        if lit == MAX_LIT {
            lit = 0;
            op += 1;
        }
    }
    op -= (lit == 0) as usize;
    Some(op)
}

/// C's strtod on the longest numeric prefix (0 when there is none), as DEBUG SLEEP parses.
fn c_strtod(arg: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(&arg[..arg.len().min(64)]);
    let text = text.trim_start();
    (1..=text.len())
        .rev()
        .filter(|&n| text.is_char_boundary(n))
        .find_map(|n| text[..n].parse::<f64>().ok())
        .unwrap_or(0.0)
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
