//! Key-space commands that work on keys of any type (Redis's db.c, expire.c, and OBJECT and MEMORY
//! USAGE from object.c): DEL, UNLINK, EXISTS, TYPE, TOUCH, RENAME, RENAMENX, COPY, MOVE, KEYS, SCAN,
//! RANDOMKEY, the EXPIRE and TTL families, PERSIST, OBJECT, MEMORY USAGE, and DUMP/RESTORE (a
//! value as Redis's serialized payload and back, through `strata-rdb`).
//!
//! None of them knows how a type is represented: TYPE and SCAN ... TYPE ask the object its type
//! name, OBJECT ENCODING its encoding, MEMORY USAGE its heap size (kept as a running count by every
//! type, so MEMORY USAGE's SAMPLES is parsed but has nothing to sample), and the lazy-free path in
//! the shard its element count.
//!
//! Where they run:
//! * single-key commands (TYPE, EXPIRE, TTL, MOVE, OBJECT ENCODING...) run on the key's shard;
//! * multi-key commands (DEL, EXISTS, RENAME, COPY...) run on the shard when every key lives there,
//!   otherwise a coordinator on the connection's thread takes intent locks on all keys, runs one part
//!   per shard (moving owned values between shards for RENAME and COPY), then releases the locks, so
//!   no other command observes the operation half done;
//! * KEYS, SCAN and RANDOMKEY visit every shard. KEYS takes the database lock on every shard so its
//!   answer is one consistent snapshot, as a single-threaded server's would be; SCAN and RANDOMKEY
//!   promise no snapshot and take no lock;
//! * OBJECT FREQ / IDLETIME / REFCOUNT depend on `maxmemory` settings that live in the server's
//!   configuration, so they run on the connection's thread and read the key with one shard call.
//!
//! The SCAN cursor walks the shards in order and each shard's dictionary with Redis's
//! reverse-binary cursor; both fit in one u64 (see [`ScanCursor`]), so a key present for the whole
//! iteration is returned at least once, as Redis guarantees.

use bytes::Bytes;
use futures_util::future::{join_all, LocalBoxFuture};
use strata_core::glob::glob_match;
use strata_core::{Entry, Value};
use strata_shard::db::{lfu_decayed, Access};
use strata_shard::{lru_clock, notify, Db, Mode, MultiLock, Shard};

use strata_node::access::access_for;
use strata_node::args::{eq_ci, Args};
use strata_node::args::{parse_scan, ScanFilter};
use strata_node::ctx::{ConnCtx, ShardCtx};
use strata_node::error::{CmdError, CmdResult};
use strata_node::keyed::KeysCtx;
use strata_node::reply::reply_help;
use strata_node::table::{Arg, CommandSpec, Flags, Handler, KeyFlags, KeySpec};
use strata_node::value::{encoding_name, is_shared_int, type_name};

const R: Flags = Flags::READONLY;
const W: Flags = Flags::WRITE;
const FAST: Flags = Flags::FAST;

// Key specs, as Redis 7.0 declares them for each command.
const RO: KeyFlags = KeyFlags::RO;
const RW: KeyFlags = KeyFlags::RW;
const OW: KeyFlags = KeyFlags::OW;
const ACCESS: KeyFlags = KeyFlags::ACCESS;
const UPDATE: KeyFlags = KeyFlags::UPDATE;
const DELETE: KeyFlags = KeyFlags::DELETE;
/// Every argument is a key that is deleted (DEL, UNLINK).
const DELETED: &[KeySpec] = &[KeySpec::range(1, -1, 1, KeyFlags::RM.or(DELETE))];
/// Every argument is a key whose existence is checked (EXISTS, TOUCH).
const CHECKED: &[KeySpec] = &[KeySpec::range(1, -1, 1, RO)];
/// Only the key's metadata is read (TYPE).
const PEEK: &[KeySpec] = &[KeySpec::at(1, RO)];
/// The key's TTL is read and returned (TTL, EXPIRETIME).
const READ: &[KeySpec] = &[KeySpec::at(1, RO.or(ACCESS))];
/// The key's TTL is changed (EXPIRE, PERSIST).
const TTL_UPDATE: &[KeySpec] = &[KeySpec::at(1, RW.or(UPDATE))];
const RENAME_KEYS: &[KeySpec] = &[
    KeySpec::at(1, RW.or(ACCESS).or(DELETE)),
    KeySpec::at(2, OW.or(UPDATE)),
];
const RENAMENX_KEYS: &[KeySpec] = &[
    KeySpec::at(1, RW.or(ACCESS).or(DELETE)),
    KeySpec::at(2, OW.or(KeyFlags::INSERT)),
];
const COPY_KEYS: &[KeySpec] = &[KeySpec::at(1, RO.or(ACCESS)), KeySpec::at(2, OW.or(UPDATE))];
const MOVE_KEYS: &[KeySpec] = &[KeySpec::at(1, RW.or(ACCESS).or(UPDATE))];
const RESTORE_KEYS: &[KeySpec] = &[KeySpec::at(1, OW.or(UPDATE))];
/// The key of an OBJECT subcommand, after the subcommand name.
const SUB_KEY: &[KeySpec] = &[KeySpec::at(2, RO)];
const MULTI_SHARD_SUM: &[&str] = &["request_policy:multi_shard", "response_policy:agg_sum"];
const NONDETERMINISTIC: &[&str] = &["nondeterministic_output"];

// COMMAND DOCS: arguments and history, as Redis 7.0 documents them.
const MULTIPLE_KEYS: &[Arg] = &[Arg::key("key", 0).multiple()];
const EXISTS_HISTORY: &[(&str, &str)] = &[("3.0.3", "Accepts multiple `key` arguments.")];
const KEY_ONLY: &[Arg] = &[Arg::key("key", 0)];
const RENAME_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::key("newkey", 1)];
const RENAMENX_HISTORY: &[(&str, &str)] = &[(
    "3.2.0",
    "The command no longer returns an error when source and destination names are the same.",
)];
const COPY_ARGS: &[Arg] = &[
    Arg::key("source", 0),
    Arg::key("destination", 1),
    Arg::integer("destination-db").with_token("DB").optional(),
    Arg::pure_token("replace", "REPLACE").optional(),
];
const MOVE_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::integer("db")];
const EXPIRE_ARGS_CONDITION: &[Arg] = &[
    Arg::pure_token("nx", "NX"),
    Arg::pure_token("xx", "XX"),
    Arg::pure_token("gt", "GT"),
    Arg::pure_token("lt", "LT"),
];
const EXPIRE_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("seconds"),
    Arg::oneof("condition", EXPIRE_ARGS_CONDITION)
        .since("7.0.0")
        .optional(),
];
const EXPIRE_HISTORY: &[(&str, &str)] = &[("7.0.0", "Added options: `NX`, `XX`, `GT` and `LT`.")];
const PEXPIRE_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("milliseconds"),
    Arg::oneof("condition", EXPIRE_ARGS_CONDITION)
        .since("7.0.0")
        .optional(),
];
const EXPIREAT_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::unix_time("unix-time-seconds"),
    Arg::oneof("condition", EXPIRE_ARGS_CONDITION)
        .since("7.0.0")
        .optional(),
];
const PEXPIREAT_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::unix_time("unix-time-milliseconds"),
    Arg::oneof("condition", EXPIRE_ARGS_CONDITION)
        .since("7.0.0")
        .optional(),
];
const TTL_REPLY_HISTORY: &[(&str, &str)] = &[("2.8.0", "Added the -2 reply.")];
const RESTORE_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("ttl"),
    Arg::string("serialized-value"),
    Arg::pure_token("replace", "REPLACE")
        .since("3.0.0")
        .optional(),
    Arg::pure_token("absttl", "ABSTTL")
        .since("5.0.0")
        .optional(),
    Arg::integer("seconds")
        .with_token("IDLETIME")
        .since("5.0.0")
        .optional(),
    Arg::integer("frequency")
        .with_token("FREQ")
        .since("5.0.0")
        .optional(),
];
const RESTORE_HISTORY: &[(&str, &str)] = &[
    ("3.0.0", "Added the `REPLACE` modifier."),
    ("5.0.0", "Added the `ABSTTL` modifier."),
    ("5.0.0", "Added the `IDLETIME` and `FREQ` options."),
];

#[allow(clippy::too_many_arguments)]
const fn cmd(
    name: &'static str,
    arity: i32,
    flags: Flags,
    keys: &'static [KeySpec],
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: Handler,
) -> CommandSpec {
    CommandSpec::new(
        "generic", name, arity, flags, keys, summary, since, complexity, handler,
    )
}

/// The generic (keyspace) family. Summaries, flags and tips are Redis 7.0's.
pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        tips: MULTI_SHARD_SUM,
        ..cmd(
            "del",
            -2,
            W,
            DELETED,
            "Delete a key",
            "1.0.0",
            "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).",
            Handler::Keys(del),
        ).with_args(MULTIPLE_KEYS)
    },
    CommandSpec {
        tips: MULTI_SHARD_SUM,
        ..cmd(
            "unlink",
            -2,
            W.or(FAST),
            DELETED,
            "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.",
            "4.0.0",
            "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.",
            Handler::Keys(del),
        ).with_args(MULTIPLE_KEYS)
    },
    CommandSpec {
        tips: MULTI_SHARD_SUM,
        ..cmd(
            "exists",
            -2,
            R.or(FAST),
            CHECKED,
            "Determine if a key exists",
            "1.0.0",
            "O(N) where N is the number of keys to check.",
            Handler::Keys(exists),
        ).with_args(MULTIPLE_KEYS).with_history(EXISTS_HISTORY)
    },
    cmd(
        "type",
        2,
        R.or(FAST),
        PEEK,
        "Determine the type stored at key",
        "1.0.0",
        "O(1)",
        Handler::Shard(type_),
    ).with_args(KEY_ONLY),
    CommandSpec {
        tips: MULTI_SHARD_SUM,
        ..cmd(
            "touch",
            -2,
            R.or(FAST),
            CHECKED,
            "Alters the last access time of a key(s). Returns the number of existing keys specified.",
            "3.2.1",
            "O(N) where N is the number of keys that will be touched.",
            Handler::Keys(touch),
        ).with_args(MULTIPLE_KEYS)
    },
    cmd(
        "rename",
        3,
        W,
        RENAME_KEYS,
        "Rename a key",
        "1.0.0",
        "O(1)",
        Handler::Keys(rename),
    ).with_args(RENAME_ARGS),
    cmd(
        "renamenx",
        3,
        W.or(FAST),
        RENAMENX_KEYS,
        "Rename a key, only if the new key does not exist",
        "1.0.0",
        "O(1)",
        Handler::Keys(renamenx),
    ).with_args(RENAME_ARGS).with_history(RENAMENX_HISTORY),
    cmd(
        "copy",
        -3,
        W.or(Flags::DENYOOM),
        COPY_KEYS,
        "Copy a key",
        "6.2.0",
        "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.",
        Handler::Keys(copy),
    ).with_args(COPY_ARGS)
    .with_other_db_key(copy_other_db_key),
    cmd(
        "move",
        3,
        W.or(FAST),
        MOVE_KEYS,
        "Move a key to another database",
        "1.0.0",
        "O(1)",
        Handler::Shard(move_),
    ).with_args(MOVE_ARGS)
    .with_other_db_key(move_other_db_key),
    CommandSpec {
        acl: &["@dangerous"],
        tips: &["request_policy:all_shards", "nondeterministic_output_order"],
        ..cmd(
            "keys",
            2,
            R,
            &[],
            "Find all keys matching the given pattern",
            "1.0.0",
            "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.",
            Handler::Async(keys),
        )
    },
    CommandSpec {
        tips: &["nondeterministic_output", "request_policy:special"],
        ..cmd(
            "scan",
            -2,
            R,
            &[],
            "Incrementally iterate the keys space",
            "2.8.0",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
            Handler::Async(scan),
        )
    },
    CommandSpec {
        tips: &["request_policy:all_shards", "nondeterministic_output"],
        ..cmd(
            "randomkey",
            1,
            R,
            &[],
            "Return a random key from the keyspace",
            "1.0.0",
            "O(1)",
            Handler::Async(randomkey),
        )
    },
    cmd(
        "expire",
        -3,
        W.or(FAST),
        TTL_UPDATE,
        "Set a key's time to live in seconds",
        "1.0.0",
        "O(1)",
        Handler::Shard(expire),
    ).with_args(EXPIRE_ARGS).with_history(EXPIRE_HISTORY),
    cmd(
        "pexpire",
        -3,
        W.or(FAST),
        TTL_UPDATE,
        "Set a key's time to live in milliseconds",
        "2.6.0",
        "O(1)",
        Handler::Shard(pexpire),
    ).with_args(PEXPIRE_ARGS).with_history(EXPIRE_HISTORY),
    cmd(
        "expireat",
        -3,
        W.or(FAST),
        TTL_UPDATE,
        "Set the expiration for a key as a UNIX timestamp",
        "1.2.0",
        "O(1)",
        Handler::Shard(expireat),
    ).with_args(EXPIREAT_ARGS).with_history(EXPIRE_HISTORY),
    cmd(
        "pexpireat",
        -3,
        W.or(FAST),
        TTL_UPDATE,
        "Set the expiration for a key as a UNIX timestamp specified in milliseconds",
        "2.6.0",
        "O(1)",
        Handler::Shard(pexpireat),
    ).with_args(PEXPIREAT_ARGS).with_history(EXPIRE_HISTORY),
    CommandSpec {
        tips: NONDETERMINISTIC,
        ..cmd(
            "ttl",
            2,
            R.or(FAST),
            READ,
            "Get the time to live for a key in seconds",
            "1.0.0",
            "O(1)",
            Handler::Shard(ttl),
        ).with_args(KEY_ONLY).with_history(TTL_REPLY_HISTORY)
    },
    CommandSpec {
        tips: NONDETERMINISTIC,
        ..cmd(
            "pttl",
            2,
            R.or(FAST),
            READ,
            "Get the time to live for a key in milliseconds",
            "2.6.0",
            "O(1)",
            Handler::Shard(pttl),
        ).with_args(KEY_ONLY).with_history(TTL_REPLY_HISTORY)
    },
    cmd(
        "expiretime",
        2,
        R.or(FAST),
        READ,
        "Get the expiration Unix timestamp for a key",
        "7.0.0",
        "O(1)",
        Handler::Shard(expiretime),
    ).with_args(KEY_ONLY),
    cmd(
        "pexpiretime",
        2,
        R.or(FAST),
        READ,
        "Get the expiration Unix timestamp for a key in milliseconds",
        "7.0.0",
        "O(1)",
        Handler::Shard(pexpiretime),
    ).with_args(KEY_ONLY),
    cmd(
        "persist",
        2,
        W.or(FAST),
        TTL_UPDATE,
        "Remove the expiration from a key",
        "2.2.0",
        "O(1)",
        Handler::Shard(persist),
    ).with_args(KEY_ONLY),
    CommandSpec {
        tips: NONDETERMINISTIC,
        ..cmd(
            "dump",
            2,
            R,
            READ,
            "Return a serialized version of the value stored at the specified key.",
            "2.6.0",
            "O(1) to access the key and additional O(N*M) to serialize it, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1).",
            Handler::Shard(dump),
        ).with_args(KEY_ONLY)
    },
    cmd(
        "restore",
        -4,
        W.or(Flags::DENYOOM),
        RESTORE_KEYS,
        "Create a key using the provided serialized value, previously obtained using DUMP.",
        "2.6.0",
        "O(1) to create the new key and additional O(N*M) to reconstruct the serialized value, where N is the number of Redis objects composing the value and M their average size. For small string values the time complexity is thus O(1)+O(1*M) where M is small, so simply O(1). However for sorted set values the complexity is O(N*M*log(N)) because inserting values into sorted sets is O(log(N)).",
        Handler::Shard(restore),
    ).with_args(RESTORE_ARGS).with_history(RESTORE_HISTORY).with_acl(&["@dangerous"]),
    CommandSpec {
        subcommands: OBJECT_SUBCOMMANDS,
        ..cmd(
            "object",
            -2,
            Flags::NONE,
            &[],
            "A container for object introspection commands",
            "2.2.3",
            "Depends on subcommand.",
            Handler::Container,
        )
    },
    MEMORY,
];

/// MEMORY, listed in the server family's table (Redis's "server" group); declared here with its
/// subcommands because USAGE is a key command over values of any type.
const MEMORY: CommandSpec = CommandSpec {
    subcommands: MEMORY_SUBCOMMANDS,
    ..CommandSpec::new(
        "server",
        "memory",
        -2,
        Flags::NONE,
        &[],
        "A container for memory diagnostics commands",
        "4.0.0",
        "Depends on subcommand.",
        Handler::Container,
    )
};

const MEMORY_USAGE_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("count").with_token("SAMPLES").optional(),
];

/// MEMORY's subcommands (USAGE and HELP so far; DOCTOR, MALLOC-STATS, PURGE and STATS are not
/// implemented and answer "unknown subcommand").
const MEMORY_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new(
        "server",
        "usage",
        -3,
        R,
        SUB_KEY,
        "Estimate the memory usage of a key",
        "4.0.0",
        "O(N) where N is the number of samples.",
        Handler::Shard(memory_usage),
    )
    .with_args(MEMORY_USAGE_ARGS),
    CommandSpec::new(
        "server",
        "help",
        2,
        Flags::LOADING.or(Flags::STALE),
        &[],
        "Show helpful text about the different subcommands",
        "4.0.0",
        "O(1)",
        Handler::Conn(memory_help),
    ),
];

/// OBJECT's subcommands; arities count from OBJECT itself (`OBJECT ENCODING key` = 3).
static OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec {
        tips: NONDETERMINISTIC,
        ..cmd(
            "encoding",
            3,
            R,
            SUB_KEY,
            "Inspect the internal encoding of a Redis object",
            "2.2.3",
            "O(1)",
            Handler::Shard(object_encoding),
        )
        .with_args(KEY_ONLY)
    },
    CommandSpec {
        tips: NONDETERMINISTIC,
        ..cmd(
            "freq",
            3,
            R,
            SUB_KEY,
            "Get the logarithmic access frequency counter of a Redis object",
            "4.0.0",
            "O(1)",
            Handler::Async(object_freq),
        )
        .with_args(KEY_ONLY)
    },
    CommandSpec {
        tips: NONDETERMINISTIC,
        ..cmd(
            "idletime",
            3,
            R,
            SUB_KEY,
            "Get the time since a Redis object was last accessed",
            "2.2.3",
            "O(1)",
            Handler::Async(object_idletime),
        )
        .with_args(KEY_ONLY)
    },
    CommandSpec {
        tips: NONDETERMINISTIC,
        ..cmd(
            "refcount",
            3,
            R,
            SUB_KEY,
            "Get the number of references to the value of the key",
            "2.2.3",
            "O(1)",
            Handler::Async(object_refcount),
        )
        .with_args(KEY_ONLY)
    },
    cmd(
        "help",
        2,
        Flags::LOADING.or(Flags::STALE),
        &[],
        "Show helpful text about the different subcommands",
        "6.2.0",
        "O(1)",
        Handler::Conn(object_help),
    ),
];

// ----- types and encodings -----

/// An entry taken out of one database to be put into another (RENAME, MOVE), possibly on another
/// shard: owned, `Send`, keeping the TTL, the access clock and whether an integer is a shared one,
/// as Redis keeps the object.
pub struct Detached {
    value: Value,
    expire: Option<i64>,
    clock: u32,
    unshared: bool,
}

impl Detached {
    /// Removes `key` from `db`; None if it does not exist.
    pub fn take(db: &mut Db, key: &[u8], now: i64) -> Option<Detached> {
        let e = db.remove(key, now)?;
        let (expire, clock, unshared) = (e.expire(), e.lru(), e.is_unshared());
        Some(Detached {
            value: e.into_value(),
            expire,
            clock,
            unshared,
        })
    }

    /// The entry to insert under `key`.
    pub fn into_entry(self, key: &[u8]) -> Entry {
        let mut e = Entry::new(key, self.value, self.expire, self.clock);
        e.set_unshared(self.unshared);
        e
    }
}

// ----- DEL / UNLINK / EXISTS / TOUCH -----

/// Deletes `keys`, returning how many existed.
pub fn op_del(db: &mut Db, keys: &[Bytes], now: i64) -> i64 {
    keys.iter()
        .filter(|k| {
            let deleted = db.delete(k, now);
            if deleted {
                db.notify(notify::GENERIC, "del", k);
            }
            deleted
        })
        .count() as i64
}

/// How many of `keys` exist; a key named twice counts twice.
pub fn op_exists(db: &mut Db, keys: &[Bytes], now: i64) -> i64 {
    keys.iter()
        .filter(|k| db.get_untouched(k, now).is_some())
        .count() as i64
}

/// Records an access to each of `keys`; returns how many exist.
pub fn op_touch(db: &mut Db, keys: &[Bytes], now: i64) -> i64 {
    keys.iter().filter(|k| db.get(k, now).is_some()).count() as i64
}

/// A counting command (DEL, UNLINK, EXISTS, TOUCH): `op` on each shard's keys, summed.
fn count<'a>(
    cx: &'a mut KeysCtx<'_>,
    op: fn(&mut Db, &[Bytes], i64) -> i64,
) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (db, now, args) = (cx.db, cx.now, cx.args);
        let parts = cx
            .scatter(
                &args[1..],
                |k| k,
                move |s, part| op(s.db_mut(db), part, now),
            )
            .await;
        let n: i64 = parts.into_iter().map(|(_, n)| n).sum();
        cx.out.int(n);
        Ok(())
    })
}

/// DEL/UNLINK key [key ...] → number of keys removed.
fn del<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    count(cx, op_del)
}

/// EXISTS key [key ...] → number of keys that exist.
fn exists<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    count(cx, op_exists)
}

/// TOUCH key [key ...] → number of keys that exist.
fn touch<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    count(cx, op_touch)
}

// ----- TYPE -----

/// The type name of `key`, "none" if it does not exist.
pub fn op_type(db: &mut Db, key: &[u8], now: i64) -> &'static str {
    db.get_untouched(key, now)
        .map_or("none", |e| type_name(e.value()))
}

/// TYPE key → simple string.
fn type_(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let t = op_type(cx.db(), &args[1], now);
    cx.out.simple(t);
    Ok(())
}

// ----- RENAME / RENAMENX -----

fn rename_reply(cx_out: &mut strata_resp::ReplyBuf, nx: bool, done: bool) {
    if nx {
        cx_out.int(done as i64);
    } else {
        cx_out.ok();
    }
}

/// What RENAME's source shard did.
enum Taken {
    /// Source and destination are the same key: nothing to move.
    Same,
    /// RENAMENX found the destination taken.
    Refused,
    Moved(Detached),
}

/// RENAME(NX): for NX the destination is checked first (on its shard); the entry is then taken out
/// on the source's shard and inserted on the destination's.
fn rename_cmd<'a>(cx: &'a mut KeysCtx<'_>, nx: bool) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (db, now) = (cx.db, cx.now);
        let (src, dst) = (cx.args[1].clone(), cx.args[2].clone());
        let dst_taken = if nx && src != dst {
            let d = dst.clone();
            cx.on(&dst, move |s| s.db_mut(db).contains(&d, now)).await
        } else {
            false
        };
        let same = src == dst;
        let s_key = src.clone();
        let taken = cx
            .on(&src, move |s| {
                let db = s.db_mut(db);
                if db.modify(&s_key, now).is_none() {
                    return Err(CmdError::NoSuchKey);
                }
                Ok(if same {
                    Taken::Same
                } else if dst_taken {
                    Taken::Refused
                } else {
                    // Redis counts a rename as one change: the destination's insertion.
                    let mark = db.dirty();
                    let taken = Detached::take(db, &s_key, now);
                    db.count_changes_since(mark, 0);
                    taken.map_or(Taken::Refused, Taken::Moved)
                })
            })
            .await?;
        let done = match taken {
            Taken::Same => !nx,
            Taken::Refused => false,
            Taken::Moved(moved) => {
                let d = dst.clone();
                cx.on(&dst, move |s| {
                    let db = s.db_mut(db);
                    // Redis deletes a taken destination and adds the key anew ("new" either way);
                    // both events are raised here so they follow the insertion in Redis's order.
                    if db.insert_entry(moved.into_entry(&d), now) {
                        db.notify(notify::NEW, "new", &d);
                    }
                    db.notify(notify::GENERIC, "rename_from", &src);
                    db.notify(notify::GENERIC, "rename_to", &d);
                })
                .await;
                true
            }
        };
        rename_reply(cx.out, nx, done);
        Ok(())
    })
}

/// RENAME key newkey → OK.
fn rename<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    rename_cmd(cx, false)
}

/// RENAMENX key newkey → 1 if renamed, 0 if newkey exists.
fn renamenx<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    rename_cmd(cx, true)
}

// ----- COPY / MOVE -----

/// A `DB` argument: an integer that fits Redis's `int` and names an existing database.
fn parse_db_index(a: &mut Args<'_>, databases: usize) -> Result<usize, CmdError> {
    let id = a.next_i64()?;
    if i32::try_from(id).is_err() {
        return Err(CmdError::msg(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    usize::try_from(id)
        .ok()
        .filter(|&id| id < databases)
        .ok_or(CmdError::DbIndexOutOfRange)
}

const SAME_OBJECT: CmdError = CmdError::msg("ERR source and destination objects are the same");

/// MOVE key db: the key is also written in `db`.
fn move_other_db_key(args: &[Bytes]) -> Option<(usize, usize)> {
    let db = strata_core::num::parse_i64(args.get(2)?)?;
    Some((usize::try_from(db).ok()?, 1))
}

/// COPY source destination DB n: the destination key lives in database `n` (the last DB wins).
fn copy_other_db_key(args: &[Bytes]) -> Option<(usize, usize)> {
    let mut db = None;
    let mut i = 3;
    while i < args.len() {
        if eq_ci(&args[i], "db") && i + 1 < args.len() {
            db = strata_core::num::parse_i64(&args[i + 1]).and_then(|d| usize::try_from(d).ok());
            i += 2;
        } else {
            i += 1;
        }
    }
    Some((db?, 2))
}

/// COPY's options, already validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CopyOpts {
    pub dst_db: usize,
    pub replace: bool,
}

/// Parses `COPY source destination [DB destination-db] [REPLACE]` as Redis does (the last DB wins),
/// then rejects copying a key onto itself.
pub fn parse_copy(args: &[Bytes], db: usize, databases: usize) -> Result<CopyOpts, CmdError> {
    let mut a = Args::new(args, 3);
    let mut opts = CopyOpts {
        dst_db: db,
        replace: false,
    };
    while let Some(arg) = a.peek() {
        if eq_ci(arg, "replace") {
            a.next_bytes()?;
            opts.replace = true;
        } else if eq_ci(arg, "db") && a.remaining() >= 2 {
            a.next_bytes()?;
            opts.dst_db = parse_db_index(&mut a, databases)?;
        } else {
            return Err(CmdError::Syntax);
        }
    }
    if opts.dst_db == db && args[1] == args[2] {
        return Err(SAME_OBJECT);
    }
    Ok(opts)
}

/// The value and TTL of `key` for COPY (recording a read access); None if missing.
pub fn op_copy_out(db: &mut Db, key: &[u8], now: i64) -> Option<(Value, Option<i64>)> {
    db.get(key, now).map(|e| (e.clone_value(), e.expire()))
}

/// Stores a copied value under `key` unless it exists and `replace` is off. Returns whether it did.
pub fn op_copy_in(
    db: &mut Db,
    key: &[u8],
    (value, expire): (Value, Option<i64>),
    replace: bool,
    now: i64,
) -> bool {
    if !replace && db.contains(key, now) {
        return false;
    }
    if db.set_copy(key, value, expire, now) {
        db.notify(notify::NEW, "new", key);
    }
    db.notify(notify::GENERIC, "copy_to", key);
    true
}

/// COPY source destination [DB destination-db] [REPLACE] → 1 if copied, else 0. The source is read
/// on its shard and the copy stored on the destination's (the same shard, in another database, when
/// the keys share a shard).
fn copy<'a>(cx: &'a mut KeysCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (db, now) = (cx.db, cx.now);
        let opts = parse_copy(cx.args, db, cx.databases)?;
        let (src, dst) = (cx.args[1].clone(), cx.args[2].clone());
        let s_key = src.clone();
        let copied = cx
            .on(&src, move |s| op_copy_out(s.db_mut(db), &s_key, now))
            .await;
        let done = match copied {
            None => false,
            Some(copied) => {
                let (dst_db, replace, d) = (opts.dst_db, opts.replace, dst.clone());
                cx.on(&dst, move |s| {
                    op_copy_in(s.db_mut(dst_db), &d, copied, replace, now)
                })
                .await
            }
        };
        cx.out.int(done as i64);
        Ok(())
    })
}

/// MOVE within one shard (a key's shard does not depend on its database): 1 if moved, 0 if the key
/// is missing or already exists in `dst`.
pub fn op_move(dbs: &mut [Db], src: usize, dst: usize, key: &[u8], now: i64) -> bool {
    if dbs[src].modify(key, now).is_none() || dbs[dst].contains(key, now) {
        return false;
    }
    // Redis counts a move as one change: the insertion into `dst`.
    let mark = dbs[src].dirty();
    let taken = Detached::take(&mut dbs[src], key, now);
    dbs[src].count_changes_since(mark, 0);
    match taken {
        Some(moved) => {
            dbs[dst].insert_entry(moved.into_entry(key), now);
            dbs[src].notify(notify::GENERIC, "move_from", key);
            dbs[dst].notify(notify::GENERIC, "move_to", key);
            true
        }
        None => false,
    }
}

/// MOVE key db → 1 if moved, else 0.
fn move_(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args, db) = (cx.now, cx.args, cx.db);
    let mut a = cx.args();
    a.next_bytes()?;
    let dst = parse_db_index(&mut a, cx.shard.db_count())?;
    if dst == db {
        return Err(SAME_OBJECT);
    }
    let moved = op_move(cx.shard.dbs_mut(), db, dst, &args[1], now);
    cx.out.int(moved as i64);
    Ok(())
}

// ----- EXPIRE family -----

/// EXPIRE's NX / XX / GT / LT conditions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireCond {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
}

impl ExpireCond {
    /// Parses the options after the time argument, with Redis's errors and their order.
    pub fn parse(opts: &[Bytes]) -> Result<ExpireCond, CmdError> {
        let mut c = ExpireCond::default();
        for o in opts {
            if eq_ci(o, "nx") {
                c.nx = true;
            } else if eq_ci(o, "xx") {
                c.xx = true;
            } else if eq_ci(o, "gt") {
                c.gt = true;
            } else if eq_ci(o, "lt") {
                c.lt = true;
            } else {
                return Err(CmdError::Msg(
                    format!("ERR Unsupported option {}", strata_node::error::echo(o)).into(),
                ));
            }
        }
        if c.nx && (c.xx || c.gt || c.lt) {
            return Err(CmdError::msg(
                "ERR NX and XX, GT or LT options at the same time are not compatible",
            ));
        }
        if c.gt && c.lt {
            return Err(CmdError::msg(
                "ERR GT and LT options at the same time are not compatible",
            ));
        }
        Ok(c)
    }

    /// Whether a key whose deadline is `current` may get the deadline `when`. No TTL counts as an
    /// infinite one: GT always fails on it, LT always passes.
    pub fn allows(self, current: Option<i64>, when: i64) -> bool {
        !((self.nx && current.is_some())
            || (self.xx && current.is_none())
            || (self.gt && current.is_none_or(|c| when <= c))
            || (self.lt && current.is_some_and(|c| when >= c)))
    }
}

/// Sets `key`'s deadline to `when` (unix ms) if `cond` allows; a deadline not in the future deletes
/// the key. Returns whether the key was changed (EXPIRE's 1 / 0).
pub fn op_expire(db: &mut Db, key: &[u8], when: i64, cond: ExpireCond, now: i64) -> bool {
    let Some(current) = db.modify(key, now).map(|e| e.expire()) else {
        return false;
    };
    if !cond.allows(current, when) {
        return false;
    }
    if when <= now {
        db.delete(key, now);
        db.notify(notify::GENERIC, "del", key);
    } else {
        db.set_expire(key, Some(when), now);
        db.notify(notify::GENERIC, "expire", key);
    }
    true
}

/// The absolute deadline in ms for a time argument in seconds (`unit_s`) or ms, relative to `base`
/// (now, or 0 for the *AT forms), or `invalid expire time` if it overflows.
pub fn deadline(when: i64, unit_s: bool, base: i64, cmd: &'static str) -> Result<i64, CmdError> {
    let when = if unit_s {
        when.checked_mul(1000).ok_or(CmdError::InvalidExpire(cmd))?
    } else {
        when
    };
    if when > i64::MAX - base {
        return Err(CmdError::InvalidExpire(cmd));
    }
    Ok(when + base)
}

fn expire_generic(cx: &mut ShardCtx<'_>, name: &'static str, unit_s: bool, at: bool) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let cond = ExpireCond::parse(&args[3..])?;
    let when = Args::new(args, 2).next_i64()?;
    let when = deadline(when, unit_s, if at { 0 } else { now }, name)?;
    let changed = op_expire(cx.db(), &args[1], when, cond, now);
    cx.out.int(changed as i64);
    Ok(())
}

/// EXPIRE key seconds [NX|XX|GT|LT] → 1 if set, 0 if not.
fn expire(cx: &mut ShardCtx<'_>) -> CmdResult {
    expire_generic(cx, "expire", true, false)
}

/// PEXPIRE key milliseconds [NX|XX|GT|LT] → 1 if set, 0 if not.
fn pexpire(cx: &mut ShardCtx<'_>) -> CmdResult {
    expire_generic(cx, "pexpire", false, false)
}

/// EXPIREAT key unix-time-seconds [NX|XX|GT|LT] → 1 if set, 0 if not.
fn expireat(cx: &mut ShardCtx<'_>) -> CmdResult {
    expire_generic(cx, "expireat", true, true)
}

/// PEXPIREAT key unix-time-milliseconds [NX|XX|GT|LT] → 1 if set, 0 if not.
fn pexpireat(cx: &mut ShardCtx<'_>) -> CmdResult {
    expire_generic(cx, "pexpireat", false, true)
}

/// PERSIST's work: 1 if a TTL was removed, 0 if the key is missing or has none.
pub fn op_persist(db: &mut Db, key: &[u8], now: i64) -> bool {
    if db.modify(key, now).and_then(|e| e.expire()).is_none() {
        return false;
    }
    db.set_expire(key, None, now);
    db.notify(notify::GENERIC, "persist", key);
    true
}

/// PERSIST key → 1 or 0.
fn persist(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let done = op_persist(cx.db(), &args[1], now);
    cx.out.int(done as i64);
    Ok(())
}

// ----- TTL family -----

/// `key`'s deadline: None if the key is missing, Some(None) if it has no TTL.
pub fn op_deadline(db: &mut Db, key: &[u8], now: i64) -> Option<Option<i64>> {
    db.get_untouched(key, now).map(Entry::expire)
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 missing, -1 no TTL, else the remaining time (or the
/// deadline with `abs`) in ms, or in seconds rounded to nearest.
fn ttl_generic(cx: &mut ShardCtx<'_>, ms: bool, abs: bool) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let reply = match op_deadline(cx.db(), &args[1], now) {
        None => -2,
        Some(None) => -1,
        Some(Some(at)) => {
            let t = if abs { at } else { at - now }.max(0);
            if ms {
                t
            } else {
                ((t as i128 + 500) / 1000) as i64
            }
        }
    };
    cx.out.int(reply);
    Ok(())
}

/// TTL key → seconds to live, -1 without TTL, -2 if missing.
fn ttl(cx: &mut ShardCtx<'_>) -> CmdResult {
    ttl_generic(cx, false, false)
}

/// PTTL key → milliseconds to live, -1 without TTL, -2 if missing.
fn pttl(cx: &mut ShardCtx<'_>) -> CmdResult {
    ttl_generic(cx, true, false)
}

/// EXPIRETIME key → deadline in unix seconds, -1 without TTL, -2 if missing.
fn expiretime(cx: &mut ShardCtx<'_>) -> CmdResult {
    ttl_generic(cx, false, true)
}

/// PEXPIRETIME key → deadline in unix ms, -1 without TTL, -2 if missing.
fn pexpiretime(cx: &mut ShardCtx<'_>) -> CmdResult {
    ttl_generic(cx, true, true)
}

// ----- KEYS -----

/// Scan steps (buckets, more while a resize is in progress) of one shard's table per KEYS slice
/// (about a millisecond of work); the thread serves other work between slices.
pub const KEYS_SLICE_BUCKETS: usize = 4096;

/// One slice of KEYS: up to `buckets` scan steps of `db` from `cursor`, appending the live keys
/// matching `pattern` (a lone `*` matches every key, the empty one included) to `out`. Returns the
/// next cursor, 0 when the walk is complete.
pub fn op_keys_slice(
    db: &Db,
    pattern: &[u8],
    mut cursor: u64,
    buckets: usize,
    now: i64,
    out: &mut Vec<Bytes>,
) -> u64 {
    let all = pattern == b"*";
    for _ in 0..buckets {
        cursor = db.scan(cursor, now, |e| {
            if all || glob_match(pattern, e.key(), false) {
                out.push(Bytes::copy_from_slice(e.key()));
            }
        });
        if cursor == 0 {
            break;
        }
    }
    cursor
}

/// The live keys of `db` matching `pattern`, walked in one go (tests).
pub fn op_keys(db: &Db, pattern: &[u8], now: i64) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = op_keys_slice(db, pattern, cursor, usize::MAX, now, &mut out);
        if cursor == 0 {
            return out;
        }
    }
}

/// KEYS on one shard, a slice at a time, pausing between slices. The pause is a zero-length timer
/// (`pause`, the server's sleep), not a mere task yield: a sleep completes only after the event
/// loop's next look at readiness, so the other connections' input is read between slices, not
/// only the tasks already queued. The caller holds the database
/// lock, so no command changes the table meanwhile; the background tick may still resize it (or
/// expire keys, which may start a shrink), and a cursor walk across a resize can return a key
/// twice, so the shard's keys are deduplicated when the table changed size.
async fn keys_on_shard(
    lock: &MultiLock,
    shard: usize,
    db: usize,
    pattern: Bytes,
    now: i64,
    pause: fn(std::time::Duration) -> LocalBoxFuture<'static, ()>,
) -> Vec<Bytes> {
    let (mut keys, mut cursor) = (Vec::new(), 0);
    let (mut table, mut resized) = (None, false);
    loop {
        let pattern = pattern.clone();
        let (part, next, size) = lock
            .run(shard, move |s| {
                let d = s.db(db);
                let mut out = Vec::new();
                let next = op_keys_slice(d, &pattern, cursor, KEYS_SLICE_BUCKETS, now, &mut out);
                (out, next, d.table_bytes())
            })
            .await;
        resized |= table.is_some_and(|t| t != size);
        table = Some(size);
        keys.extend(part);
        if next == 0 {
            break;
        }
        cursor = next;
        pause(std::time::Duration::ZERO).await;
    }
    if resized {
        let mut seen = std::collections::HashSet::with_capacity(keys.len());
        keys.retain(|k| seen.insert(k.clone()));
    }
    keys
}

/// KEYS pattern → every matching key, from every shard, under the database lock so the answer is
/// a consistent snapshot. Each shard's table is walked in slices, so a large keyspace does not stop
/// the thread from serving other databases, connections and shards meanwhile.
fn keys<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (db, now) = (cx.db(), cx.now);
        let pattern = cx.args[1].clone();
        let set = cx.shards().clone();
        let lock = set
            .lock_dbs_as(cx.lock_owner(), &[db as u32], Mode::Shared)
            .await;
        let parts = lock
            .shards()
            .map(|shard| keys_on_shard(&lock, shard, db, pattern.clone(), now, cx.sleeper()));
        let parts = join_all(parts).await;
        lock.release();
        cx.out.array(parts.iter().map(Vec::len).sum());
        for k in parts.iter().flatten() {
            cx.out.bulk(k);
        }
        Ok(())
    })
}

// ----- SCAN -----

/// The SCAN cursor: which shard, and where in that shard's dictionary.
///
/// Encoding: `cursor = (dict_cursor << shard_bits) | shard`, where `shard_bits` is the number of
/// bits needed for the largest shard index (0 with one shard, so the cursor is then exactly Redis's).
/// A dictionary cursor never exceeds its table size, so the shift loses nothing for any table that
/// fits in memory. Cursor 0 is shard 0 at its start, and the iteration ends when the last shard's
/// dictionary cursor wraps to 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScanCursor {
    pub shard: usize,
    pub dict: u64,
}

fn shard_bits(shards: usize) -> u32 {
    usize::BITS - shards.saturating_sub(1).leading_zeros()
}

impl ScanCursor {
    /// Splits a client's cursor for a set of `shards` shards.
    pub fn decode(cursor: u64, shards: usize) -> ScanCursor {
        let bits = shard_bits(shards);
        ScanCursor {
            shard: (cursor & ((1u64 << bits) - 1)) as usize,
            dict: cursor >> bits,
        }
    }

    /// The cursor handed to the client.
    pub fn encode(self, shards: usize) -> u64 {
        (self.dict << shard_bits(shards)) | self.shard as u64
    }
}

/// One shard's share of a SCAN call.
#[derive(Debug, Default)]
pub struct ScanPart {
    /// The dictionary cursor to continue from (0 = this shard is done).
    pub next: u64,
    /// Keys that passed the filters.
    pub keys: Vec<Bytes>,
    /// Live keys visited (filtered or not): what COUNT counts, as in Redis.
    pub visited: usize,
    /// Buckets visited: what bounds a call over a sparse table.
    pub steps: usize,
}

/// Scans `db` from `cursor` until `want` keys were visited, `budget` buckets were visited or the
/// table ends (at least one bucket is always visited).
pub fn op_scan(
    db: &mut Db,
    cursor: u64,
    want: usize,
    budget: usize,
    filter: &ScanFilter,
    now: i64,
) -> ScanPart {
    let mut part = ScanPart {
        next: cursor,
        ..ScanPart::default()
    };
    // Expired keys the walk passes whose names MATCH are deleted, as Redis's SCAN deletes them
    // (its TYPE filter looks the key up, which expires it, so TYPE does not spare them).
    let mut expired: Vec<Bytes> = Vec::new();
    loop {
        part.next = db.scan_with_expired(part.next, now, |e, gone| {
            if gone {
                if filter.matches_name(e.key()) {
                    expired.push(Bytes::copy_from_slice(e.key()));
                }
                return;
            }
            part.visited += 1;
            if filter.accepts(e) {
                part.keys.push(Bytes::copy_from_slice(e.key()));
            }
        });
        part.steps += 1;
        if part.next == 0 || part.steps >= budget || part.visited >= want {
            break;
        }
    }
    for key in expired {
        db.reclaim_if_expired(&key, now);
    }
    part
}

/// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] → [next cursor, keys]. Walks the shards in
/// order from the cursor's, visiting about COUNT keys (at most 10×COUNT buckets) per call.
fn scan<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let sa = parse_scan(cx.args)?;
        let (db, now) = (cx.db(), cx.now);
        let set = cx.shards().clone();
        let shards = set.len();
        let mut at = ScanCursor::decode(sa.cursor, shards);
        let mut found = Vec::new();
        let mut want = sa.count;
        let mut budget = sa.count.saturating_mul(10);
        let next = loop {
            if at.shard >= shards {
                break 0;
            }
            let filter = sa.filter.clone();
            let (cursor, w, b) = (at.dict, want, budget);
            let part = set
                .call(at.shard, move |s| {
                    op_scan(s.db_mut(db), cursor, w, b, &filter, now)
                })
                .await;
            found.extend(part.keys);
            want = want.saturating_sub(part.visited);
            budget = budget.saturating_sub(part.steps);
            at = if part.next == 0 {
                ScanCursor {
                    shard: at.shard + 1,
                    dict: 0,
                }
            } else {
                ScanCursor {
                    shard: at.shard,
                    dict: part.next,
                }
            };
            if at.shard >= shards {
                break 0;
            }
            if want == 0 || budget == 0 {
                break at.encode(shards);
            }
        };
        cx.out.array(2);
        cx.out.bulk(next.to_string().as_bytes());
        cx.out.array(found.len());
        for k in &found {
            cx.out.bulk(k);
        }
        Ok(())
    })
}

// ----- RANDOMKEY -----

/// A random live key of the shard's database `db`.
pub fn op_random_key(s: &mut Shard, db: usize, now: i64) -> Option<Bytes> {
    let mut x = s.rand() | 1;
    s.db_mut(db).random_key(now, || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    })
}

/// How many rounds RANDOMKEY tries when the shard it picked has only expired keys left.
const RANDOMKEY_ROUNDS: usize = 16;

/// RANDOMKEY → a random key, or null when the database is empty. A shard is picked with probability
/// proportional to its key count, so every key is about equally likely.
fn randomkey<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let (db, now) = (cx.db(), cx.now);
        let set = cx.shards().clone();
        for _ in 0..RANDOMKEY_ROUNDS {
            let sizes = set.call_all(move |s| (s.db_mut(db).len(), s.rand())).await;
            let total: usize = sizes.iter().map(|(n, _)| n).sum();
            if total == 0 {
                break;
            }
            let mut pick = (sizes[0].1 % total as u64) as usize;
            let shard = sizes
                .iter()
                .position(|&(n, _)| {
                    if pick < n {
                        true
                    } else {
                        pick -= n;
                        false
                    }
                })
                .unwrap_or(0);
            if let Some(k) = set.call(shard, move |s| op_random_key(s, db, now)).await {
                cx.out.bulk(&k);
                return Ok(());
            }
        }
        cx.out.null();
        Ok(())
    })
}

// ----- DUMP / RESTORE -----

/// DUMP key → the value serialized as Redis does (RDB encoding, RDB version, CRC64), or null.
fn dump(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    match cx.db().get(&args[1], now) {
        Some(e) => {
            let payload = strata_rdb::dump(e.value());
            cx.out.bulk(&payload);
        }
        None => cx.out.null(),
    }
    Ok(())
}

/// RESTORE's options after the payload.
#[derive(Debug, Default, PartialEq, Eq)]
struct RestoreOpts {
    replace: bool,
    absttl: bool,
    idle_secs: Option<i64>,
    freq: Option<u8>,
}

/// Parses `REPLACE`, `ABSTTL`, `IDLETIME seconds`, `FREQ frequency` as Redis's restoreCommand
/// does: IDLETIME and FREQ exclude each other (the second is a syntax error), and a value's
/// error comes as soon as it is read.
fn parse_restore_opts(args: &[Bytes]) -> Result<RestoreOpts, CmdError> {
    let mut o = RestoreOpts::default();
    let mut j = 4;
    while j < args.len() {
        let more = j + 1 < args.len();
        let a = &args[j];
        if eq_ci(a, "replace") {
            o.replace = true;
        } else if eq_ci(a, "absttl") {
            o.absttl = true;
        } else if eq_ci(a, "idletime") && more && o.freq.is_none() {
            let v = strata_core::num::parse_i64(&args[j + 1]).ok_or(CmdError::NotInteger)?;
            if v < 0 {
                return Err(CmdError::msg("ERR Invalid IDLETIME value, must be >= 0"));
            }
            o.idle_secs = Some(v);
            j += 1;
        } else if eq_ci(a, "freq") && more && o.idle_secs.is_none() {
            let v = strata_core::num::parse_i64(&args[j + 1]).ok_or(CmdError::NotInteger)?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::msg(
                    "ERR Invalid FREQ value, must be >= 0 and <= 255",
                ));
            }
            o.freq = Some(v as u8);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// The access field of a restored key: IDLETIME under an LRU clock, FREQ under an LFU policy
/// (Redis's objectSetLRUOrLFU), else a fresh one.
fn restored_clock(access: Access, now: i64, o: &RestoreOpts) -> u32 {
    const LRU_CLOCK_MAX: i64 = (1 << 24) - 1;
    match (access, o.idle_secs, o.freq) {
        (Access::Lfu { .. }, _, Some(f)) => (access.fresh(now) & !0xFF) | u32::from(f),
        (Access::Lru, Some(idle), _) => {
            let clock = i64::from(lru_clock(now));
            let mut abs = clock - idle.min(LRU_CLOCK_MAX);
            if abs < 0 {
                abs = (clock + LRU_CLOCK_MAX / 2) % LRU_CLOCK_MAX;
            }
            abs as u32
        }
        _ => access.fresh(now),
    }
}

/// RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency] → OK.
/// Checks in Redis's order: options, an existing key (BUSYKEY), the TTL, the payload's version
/// and checksum, its data. A TTL already past (ABSTTL) creates nothing, deleting the replaced
/// key, and still answers OK.
fn restore(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    let o = parse_restore_opts(args)?;
    let key = &args[1];
    if !o.replace && cx.db().contains(key, now) {
        return Err(CmdError::msg("BUSYKEY Target key name already exists."));
    }
    let ttl = strata_core::num::parse_i64(&args[2]).ok_or(CmdError::NotInteger)?;
    if ttl < 0 {
        return Err(CmdError::msg("ERR Invalid TTL value, must be >= 0"));
    }
    let skip = strata_rdb::skip_checksum_validation();
    let value = strata_rdb::restore_explained(&args[3], skip).map_err(|(e, why)| {
        if let Some(why) = why {
            // Redis logs a corrupt payload's reason at verbose level in RESTORE's context.
            strata_node::server_log!(
                Verbose,
                "Internal error in RDB reading offset 0, function at rdb.c:0 -> {why}"
            );
        }
        CmdError::msg(e.message())
    })?;
    let db = cx.db();
    let deleted = o.replace && db.delete(key, now);
    let expire = match ttl {
        0 => None,
        t if o.absttl => Some(t),
        t => Some(t.saturating_add(now)),
    };
    if expire.is_some_and(|at| at <= now) {
        if deleted {
            db.notify(notify::GENERIC, "del", key);
        }
        cx.out.ok();
        return Ok(());
    }
    let mut entry = Entry::new(key, value, expire, restored_clock(db.access(), now, &o));
    if !db.share_ints() {
        entry.set_unshared(true);
    }
    db.insert_entry(entry, now);
    db.notify(notify::GENERIC, "restore", key);
    cx.out.ok();
    Ok(())
}

// ----- OBJECT -----

/// OBJECT ENCODING key → the encoding name, or null.
fn object_encoding(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    match cx.db().get_unnotified(&args[2], now) {
        Some(e) => {
            let name = encoding_name(e.value());
            cx.out.bulk(name.as_bytes());
        }
        None => cx.out.null(),
    }
    Ok(())
}

/// What OBJECT FREQ / IDLETIME / REFCOUNT need of a key: its access field and whether Redis would
/// hold its value as one of its shared integers.
#[derive(Clone, Copy, Debug)]
struct Probe {
    clock: u32,
    shared: bool,
}

/// Reads `cx.args[2]` on its shard without recording an access (null reply if missing).
async fn probe(cx: &mut ConnCtx<'_>) -> Option<Probe> {
    let (db, now) = (cx.db(), cx.now);
    let key = cx.args[2].clone();
    let shard = cx.shards().shard_of_key(&key);
    cx.shards()
        .call(shard, move |s| {
            s.db_mut(db).get_unnotified(&key, now).map(|e| Probe {
                clock: e.lru(),
                shared: is_shared_int(e),
            })
        })
        .await
}

fn policy(cx: &ConnCtx<'_>) -> String {
    cx.config().get("maxmemory-policy").unwrap_or_default()
}

/// OBJECT FREQ key → the key's logarithmic access counter (LFU policies only).
fn object_freq<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let Some(p) = probe(cx).await else {
            cx.out.null();
            return Ok(());
        };
        let access = access_for(
            &policy(cx),
            cx.config().get_i64("lfu-log-factor"),
            cx.config().get_i64("lfu-decay-time"),
        );
        let Access::Lfu { decay_time, .. } = access else {
            return Err(CmdError::msg("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
        };
        cx.out.int(lfu_decayed(p.clock, cx.now, decay_time) as i64);
        Ok(())
    })
}

/// OBJECT IDLETIME key → seconds since the key was last accessed (not under LFU policies).
fn object_idletime<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let Some(p) = probe(cx).await else {
            cx.out.null();
            return Ok(());
        };
        if policy(cx).ends_with("-lfu") {
            return Err(CmdError::msg("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
        }
        cx.out
            .int(strata_shard::db::lru_idle(lru_clock(cx.now), p.clock) as i64);
        Ok(())
    })
}

/// OBJECT REFCOUNT key → 2147483647 for a value Redis holds as one of its shared integers
/// ([`is_shared_int`]), else 1 (Strata never shares a value between keys).
fn object_refcount<'a>(cx: &'a mut ConnCtx<'_>) -> LocalBoxFuture<'a, CmdResult> {
    Box::pin(async move {
        let Some(p) = probe(cx).await else {
            cx.out.null();
            return Ok(());
        };
        cx.out.int(if p.shared { i32::MAX as i64 } else { 1 });
        Ok(())
    })
}

/// OBJECT HELP → the help lines.
fn object_help(cx: &mut ConnCtx<'_>) -> CmdResult {
    reply_help(
        cx.out,
        b"object",
        &[
            "ENCODING <key>",
            "    Return the kind of internal representation used in order to store the value",
            "    associated with a <key>.",
            "FREQ <key>",
            "    Return the access frequency index of the <key>. The returned integer is",
            "    proportional to the logarithm of the recent access frequency of the key.",
            "IDLETIME <key>",
            "    Return the idle time of the <key>, that is the approximated number of",
            "    seconds elapsed since the last access to the key.",
            "REFCOUNT <key>",
            "    Return the number of references of the value associated with the specified",
            "    <key>.",
        ],
    );
    Ok(())
}

// ----- MEMORY -----

/// Parses MEMORY USAGE's options after the key as Redis does: `SAMPLES <count>` any number of times
/// (the last wins), a negative count or anything else is a syntax error; checked before the key is
/// looked up. Returns the sample count (0 = all), which Strata does not need: every type keeps its
/// heap size as a running count, so the answer is the same whatever is sampled.
fn memory_usage_samples(args: &[Bytes]) -> Result<i64, CmdError> {
    let mut a = Args::new(args, 3);
    let mut samples = 5;
    while !a.is_empty() {
        if a.remaining() >= 2 && a.eat("samples") {
            samples = a.next_i64()?;
            if samples < 0 {
                return Err(CmdError::Syntax);
            }
        } else {
            return Err(CmdError::Syntax);
        }
    }
    Ok(samples)
}

/// MEMORY USAGE key [SAMPLES count] → bytes the key and its value take (the entry's allocation and
/// everything the value owns), or null. Like Redis, it neither counts a hit nor touches the key.
fn memory_usage(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (now, args) = (cx.now, cx.args);
    memory_usage_samples(args)?;
    match cx.db().peek(&args[2], now) {
        Some(e) => {
            let bytes = e.heap_size();
            cx.out.int(bytes as i64);
        }
        None => cx.out.null(),
    }
    Ok(())
}

/// MEMORY HELP → the help lines of the subcommands Strata has.
fn memory_help(cx: &mut ConnCtx<'_>) -> CmdResult {
    reply_help(
        cx.out,
        b"memory",
        &[
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{run, run_at, shard};

    const T: i64 = 1_700_000_000_000;

    fn at(s: &mut Shard, cmd: &[&str]) -> String {
        run_at(s, 0, T, cmd)
    }

    #[test]
    fn restore_options_as_redis_parses_them() {
        let parse = |w: &[&str]| {
            let mut all = vec!["restore", "k", "0", "payload"];
            all.extend_from_slice(w);
            parse_restore_opts(&crate::testing::args(&all))
        };
        assert_eq!(parse(&[]), Ok(RestoreOpts::default()));
        let o = parse(&["REPLACE", "absttl", "idletime", "10"]).unwrap();
        assert!(o.replace && o.absttl && o.idle_secs == Some(10) && o.freq.is_none());
        assert_eq!(parse(&["freq", "255"]).unwrap().freq, Some(255));
        for (w, err) in [
            (
                &["idletime", "-1"][..],
                "ERR Invalid IDLETIME value, must be >= 0",
            ),
            (
                &["freq", "256"],
                "ERR Invalid FREQ value, must be >= 0 and <= 255",
            ),
            (
                &["freq", "-1"],
                "ERR Invalid FREQ value, must be >= 0 and <= 255",
            ),
            (
                &["idletime", "x"],
                "ERR value is not an integer or out of range",
            ),
            (&["idletime"], "ERR syntax error"),
            (&["idletime", "1", "freq", "1"], "ERR syntax error"),
            (&["freq", "1", "idletime", "1"], "ERR syntax error"),
            (&["bogus"], "ERR syntax error"),
        ] {
            assert_eq!(parse(w).unwrap_err().message(), err, "{w:?}");
        }
    }

    #[test]
    fn restored_access_clock() {
        let now = T;
        let idle = RestoreOpts {
            idle_secs: Some(100),
            ..RestoreOpts::default()
        };
        let clock = restored_clock(Access::Lru, now, &idle);
        assert_eq!(strata_shard::db::lru_idle(lru_clock(now), clock), 100);
        let lfu = Access::Lfu {
            log_factor: 10,
            decay_time: 1,
        };
        let freq = RestoreOpts {
            freq: Some(42),
            ..RestoreOpts::default()
        };
        assert_eq!(lfu_decayed(restored_clock(lfu, now, &freq), now, 1), 42);
        // The option of the other policy is ignored.
        assert_eq!(restored_clock(lfu, now, &idle), lfu.fresh(now));
        assert_eq!(restored_clock(Access::Lru, now, &freq), lru_clock(now));
    }

    #[test]
    fn del_unlink_exists_touch_type() {
        let mut s = shard();
        assert_eq!(at(&mut s, &["set", "a", "1"]), "+OK");
        assert_eq!(at(&mut s, &["set", "b", "x"]), "+OK");
        assert_eq!(at(&mut s, &["exists", "a", "a", "b", "zz"]), ":3");
        assert_eq!(at(&mut s, &["touch", "a", "zz", "b"]), ":2");
        assert_eq!(at(&mut s, &["type", "a"]), "+string");
        assert_eq!(at(&mut s, &["type", "zz"]), "+none");
        assert_eq!(at(&mut s, &["del", "a", "a", "zz"]), ":1");
        assert_eq!(at(&mut s, &["unlink", "b", "a"]), ":1");
        assert_eq!(at(&mut s, &["exists", "a", "b"]), ":0");
        assert_eq!(
            at(&mut s, &["exists"]),
            "-ERR wrong number of arguments for 'exists' command"
        );
        // EXISTS and TYPE count hits and misses but do not touch the clock.
        let db = s.db(0);
        assert!(db.stats().hits >= 3 && db.stats().misses >= 3);
    }

    #[test]
    fn rename_and_renamenx() {
        let mut s = shard();
        assert_eq!(at(&mut s, &["rename", "a", "b"]), "-ERR no such key");
        assert_eq!(at(&mut s, &["renamenx", "a", "a"]), "-ERR no such key");
        at(&mut s, &["set", "a", "1"]);
        assert_eq!(at(&mut s, &["rename", "a", "a"]), "+OK");
        assert_eq!(at(&mut s, &["renamenx", "a", "a"]), ":0");
        at(&mut s, &["set", "b", "2"]);
        assert_eq!(at(&mut s, &["renamenx", "a", "b"]), ":0");
        at(&mut s, &["pexpire", "a", "5000"]);
        assert_eq!(at(&mut s, &["rename", "a", "b"]), "+OK");
        assert_eq!(at(&mut s, &["get", "b"]), "$1:1");
        assert_eq!(at(&mut s, &["pttl", "b"]), ":5000");
        assert_eq!(at(&mut s, &["exists", "a"]), ":0");
        assert_eq!(at(&mut s, &["renamenx", "b", "c"]), ":1");
        assert_eq!(at(&mut s, &["pttl", "c"]), ":5000");
        // An expired source is missing.
        assert_eq!(
            run_at(&mut s, 0, T + 5000, &["rename", "c", "d"]),
            "-ERR no such key"
        );
    }

    #[test]
    fn copy_options_and_errors() {
        let mut s = shard();
        assert_eq!(
            at(&mut s, &["copy", "a", "a"]),
            "-ERR source and destination objects are the same"
        );
        assert_eq!(at(&mut s, &["copy", "a", "b"]), ":0");
        at(&mut s, &["set", "a", "hello"]);
        at(&mut s, &["pexpire", "a", "9000"]);
        assert_eq!(at(&mut s, &["copy", "a", "b"]), ":1");
        assert_eq!(at(&mut s, &["pttl", "b"]), ":9000");
        assert_eq!(at(&mut s, &["copy", "a", "b"]), ":0");
        at(&mut s, &["set", "a", "world"]);
        assert_eq!(at(&mut s, &["copy", "a", "b", "REPLACE"]), ":1");
        assert_eq!(at(&mut s, &["get", "b"]), "$5:world");
        assert_eq!(at(&mut s, &["pttl", "b"]), ":-1");
        assert_eq!(at(&mut s, &["copy", "a", "a", "db", "1"]), ":1");
        assert_eq!(run_at(&mut s, 1, T, &["get", "a"]), "$5:world");
        assert_eq!(
            at(&mut s, &["copy", "a", "c", "db", "0", "replace", "db", "2"]),
            ":1"
        );
        assert_eq!(run_at(&mut s, 2, T, &["get", "c"]), "$5:world");
        for (args, err) in [
            (
                &["copy", "a", "b", "db", "16"][..],
                "-ERR DB index is out of range",
            ),
            (
                &["copy", "a", "b", "db", "-1"],
                "-ERR DB index is out of range",
            ),
            (
                &["copy", "a", "b", "db", "x"],
                "-ERR value is not an integer or out of range",
            ),
            (
                &["copy", "a", "b", "db", "4294967296"],
                "-ERR value is out of range, value must between -2147483648 and 2147483647",
            ),
            (&["copy", "a", "b", "db"], "-ERR syntax error"),
            (&["copy", "a", "b", "foo"], "-ERR syntax error"),
            (
                &["copy", "a", "a", "db", "0"],
                "-ERR source and destination objects are the same",
            ),
        ] {
            assert_eq!(at(&mut s, args), err, "{args:?}");
        }
    }

    #[test]
    fn move_between_databases() {
        let mut s = shard();
        assert_eq!(at(&mut s, &["move", "k", "1"]), ":0");
        assert_eq!(
            at(&mut s, &["move", "k", "0"]),
            "-ERR source and destination objects are the same"
        );
        assert_eq!(
            at(&mut s, &["move", "k", "16"]),
            "-ERR DB index is out of range"
        );
        assert_eq!(
            at(&mut s, &["move", "k", "-1"]),
            "-ERR DB index is out of range"
        );
        assert_eq!(
            at(&mut s, &["move", "k", "x"]),
            "-ERR value is not an integer or out of range"
        );
        at(&mut s, &["set", "k", "v"]);
        at(&mut s, &["expire", "k", "100"]);
        assert_eq!(at(&mut s, &["move", "k", "1"]), ":1");
        assert_eq!(at(&mut s, &["exists", "k"]), ":0");
        assert_eq!(run_at(&mut s, 1, T, &["ttl", "k"]), ":100");
        at(&mut s, &["set", "k", "w"]);
        assert_eq!(at(&mut s, &["move", "k", "1"]), ":0");
        assert_eq!(at(&mut s, &["get", "k"]), "$1:w");
    }

    #[test]
    fn expire_options_and_errors() {
        let mut s = shard();
        assert_eq!(at(&mut s, &["expire", "k", "10"]), ":0");
        assert_eq!(
            at(&mut s, &["expire", "k", "10", "foo"]),
            "-ERR Unsupported option foo"
        );
        assert_eq!(
            at(&mut s, &["expire", "k", "x", "foo"]),
            "-ERR Unsupported option foo"
        );
        assert_eq!(
            at(&mut s, &["expire", "k", "x"]),
            "-ERR value is not an integer or out of range"
        );
        let nx_err = "-ERR NX and XX, GT or LT options at the same time are not compatible";
        assert_eq!(at(&mut s, &["expire", "k", "1", "nx", "xx"]), nx_err);
        assert_eq!(at(&mut s, &["expire", "k", "1", "lt", "NX"]), nx_err);
        assert_eq!(
            at(&mut s, &["expire", "k", "1", "gt", "lt"]),
            "-ERR GT and LT options at the same time are not compatible"
        );
        for (cmd, t) in [
            ("expire", "9223372036854775"),
            ("expire", "-9223372036854776"),
            ("pexpire", "9223372036854775807"),
            ("expireat", "9223372036854776"),
        ] {
            assert_eq!(
                at(&mut s, &[cmd, "k", t]),
                format!("-ERR invalid expire time in '{cmd}' command")
            );
        }
        at(&mut s, &["set", "k", "v"]);
        assert_eq!(at(&mut s, &["expire", "k", "10", "xx"]), ":0");
        assert_eq!(at(&mut s, &["expire", "k", "10", "gt"]), ":0");
        assert_eq!(at(&mut s, &["expire", "k", "100", "xx", "gt"]), ":0");
        assert_eq!(at(&mut s, &["expire", "k", "100", "lt"]), ":1");
        assert_eq!(at(&mut s, &["expire", "k", "50", "NX"]), ":0");
        assert_eq!(at(&mut s, &["expire", "k", "200", "lt"]), ":0");
        assert_eq!(at(&mut s, &["expire", "k", "200", "gt"]), ":1");
        assert_eq!(at(&mut s, &["expire", "k", "150", "xx", "lt"]), ":1");
        assert_eq!(at(&mut s, &["ttl", "k"]), ":150");
        assert_eq!(at(&mut s, &["pexpire", "k", "1499"]), ":1");
        assert_eq!(at(&mut s, &["ttl", "k"]), ":1");
        assert_eq!(at(&mut s, &["pttl", "k"]), ":1499");
        assert_eq!(
            at(&mut s, &["expiretime", "k"]),
            format!(":{}", (T + 1499 + 500) / 1000)
        );
        assert_eq!(at(&mut s, &["pexpiretime", "k"]), format!(":{}", T + 1499));
        assert_eq!(at(&mut s, &["persist", "k"]), ":1");
        assert_eq!(at(&mut s, &["persist", "k"]), ":0");
        assert_eq!(at(&mut s, &["ttl", "k"]), ":-1");
        assert_eq!(at(&mut s, &["expiretime", "k"]), ":-1");
        assert_eq!(at(&mut s, &["pexpiretime", "nokey"]), ":-2");
        assert_eq!(at(&mut s, &["ttl", "nokey"]), ":-2");
        assert_eq!(at(&mut s, &["persist", "nokey"]), ":0");
        // A deadline in the past deletes the key (after the conditions pass).
        assert_eq!(at(&mut s, &["expire", "k", "-1", "gt"]), ":0");
        assert_eq!(at(&mut s, &["expire", "k", "-1", "lt"]), ":1");
        assert_eq!(at(&mut s, &["exists", "k"]), ":0");
        at(&mut s, &["set", "k", "v"]);
        assert_eq!(at(&mut s, &["pexpireat", "k", &T.to_string()]), ":1");
        assert_eq!(at(&mut s, &["exists", "k"]), ":0");
        // Huge deadlines are kept; the seconds view rounds without overflowing.
        at(&mut s, &["set", "k", "v"]);
        assert_eq!(at(&mut s, &["pexpireat", "k", "9223372036854775807"]), ":1");
        assert_eq!(at(&mut s, &["expiretime", "k"]), ":9223372036854776");
        assert_eq!(at(&mut s, &["expireat", "k", "9223372036854775"]), ":1");
        assert_eq!(at(&mut s, &["expiretime", "k"]), ":9223372036854775");
    }

    #[test]
    fn memory_usage_counts_the_entry_and_parses_samples_as_redis_does() {
        let mut s = shard();
        let usage = |s: &mut Shard, cmd: &[&str]| -> i64 {
            let r = at(s, cmd);
            r.strip_prefix(':').and_then(|n| n.parse().ok()).expect(&r)
        };
        at(&mut s, &["set", "i", "12"]);
        at(&mut s, &["set", "r", &"x".repeat(1000)]);
        let small = usage(&mut s, &["memory", "usage", "i"]);
        let big = usage(&mut s, &["MEMORY", "USAGE", "r"]);
        assert!(small > 0 && big > 1000, "{small} {big}");
        for opts in [&["samples", "0"][..], &["SAMPLES", "5", "samples", "100"]] {
            let mut cmd = vec!["memory", "usage", "r"];
            cmd.extend_from_slice(opts);
            assert_eq!(usage(&mut s, &cmd), big);
        }
        assert_eq!(at(&mut s, &["memory", "usage", "none"]), "$-1");
        assert_eq!(
            at(&mut s, &["memory", "usage", "none", "samples", "x"]),
            "-ERR value is not an integer or out of range"
        );
        for bad in [
            &["samples"][..],
            &["samples", "-1"],
            &["samples", "1", "samples"],
            &["count", "1"],
            &["1"],
        ] {
            let mut cmd = vec!["memory", "usage", "none"];
            cmd.extend_from_slice(bad);
            assert_eq!(at(&mut s, &cmd), "-ERR syntax error", "{bad:?}");
        }
        assert_eq!(
            at(&mut s, &["memory", "usage"]),
            "-ERR wrong number of arguments for 'memory|usage' command"
        );
    }

    #[test]
    fn keys_expire_lazily_with_time() {
        let mut s = shard();
        at(&mut s, &["set", "k", "v"]);
        assert_eq!(at(&mut s, &["expire", "k", "2"]), ":1");
        assert_eq!(run_at(&mut s, 0, T + 1999, &["exists", "k"]), ":1");
        assert_eq!(run_at(&mut s, 0, T + 1999, &["ttl", "k"]), ":0");
        assert_eq!(run_at(&mut s, 0, T + 2000, &["exists", "k"]), ":0");
        assert_eq!(run_at(&mut s, 0, T + 2000, &["ttl", "k"]), ":-2");
        assert_eq!(s.db_mut(0).len(), 0);
    }

    #[test]
    fn object_encoding_and_arity() {
        let mut s = shard();
        at(&mut s, &["set", "i", "12345"]);
        at(&mut s, &["set", "e", "hello"]);
        let long = "x".repeat(45);
        at(&mut s, &["set", "r", &long]);
        assert_eq!(at(&mut s, &["object", "encoding", "i"]), "$3:int");
        assert_eq!(at(&mut s, &["object", "encoding", "e"]), "$6:embstr");
        assert_eq!(at(&mut s, &["OBJECT", "ENCODING", "r"]), "$3:raw");
        assert_eq!(at(&mut s, &["object", "encoding", "none"]), "$-1");
        assert_eq!(
            at(&mut s, &["object", "encoding"]),
            "-ERR wrong number of arguments for 'object|encoding' command"
        );
        assert_eq!(
            at(&mut s, &["object", "foo", "i"]),
            "-ERR unknown subcommand 'foo'. Try OBJECT HELP."
        );
    }

    #[test]
    fn scan_cursor_encoding_round_trips() {
        for shards in [1, 2, 3, 4, 7, 8, 1024] {
            for shard in [0, shards / 2, shards - 1] {
                for dict in [0u64, 1, 5, 1 << 40] {
                    let c = ScanCursor { shard, dict };
                    assert_eq!(ScanCursor::decode(c.encode(shards), shards), c);
                }
            }
        }
        assert_eq!(
            ScanCursor::decode(12345, 1),
            ScanCursor {
                shard: 0,
                dict: 12345
            }
        );
        assert_eq!(ScanCursor { shard: 0, dict: 0 }.encode(4), 0);
    }

    fn b(v: &[&str]) -> Vec<Bytes> {
        v.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn scan_options_and_errors() {
        let ok = parse_scan(&b(&[
            "scan", "0", "MATCH", "a*", "count", "5", "type", "STRING",
        ]));
        let ok = ok.expect("valid options");
        assert_eq!((ok.cursor, ok.count), (0, 5));
        assert_eq!(ok.filter.pattern.as_deref(), Some(&b"a*"[..]));
        assert!(parse_scan(&b(&["scan", "0", "match", "*"]))
            .expect("valid")
            .filter
            .pattern
            .is_none());
        for (args, err) in [
            (&["scan", "x"][..], "ERR invalid cursor"),
            (&["scan", "x", "count", "0"], "ERR invalid cursor"),
            (&["scan", "0", "count", "0"], "ERR syntax error"),
            (&["scan", "0", "count", "-1"], "ERR syntax error"),
            (
                &["scan", "0", "count", "x"],
                "ERR value is not an integer or out of range",
            ),
            (&["scan", "0", "match"], "ERR syntax error"),
            (&["scan", "0", "foo", "bar"], "ERR syntax error"),
            (
                &["scan", "0", "count", "x", "foo"],
                "ERR value is not an integer or out of range",
            ),
        ] {
            assert_eq!(
                parse_scan(&b(args))
                    .map(|_| ())
                    .map_err(|e| e.message().into_owned()),
                Err(err.to_string()),
                "{args:?}"
            );
        }
    }

    #[test]
    fn scan_visits_every_key_with_filters() {
        let mut s = shard();
        for i in 0..300 {
            at(&mut s, &["set", &format!("k{i}"), "v"]);
        }
        at(&mut s, &["set", "other", "v"]);
        at(&mut s, &["set", "gone", "v"]);
        at(&mut s, &["pexpire", "gone", "1"]);
        let db = s.db_mut(0);
        let mut scan_all = |filter: &ScanFilter| {
            let mut seen = std::collections::BTreeSet::new();
            let mut cursor = 0;
            let mut calls = 0;
            loop {
                let part = op_scan(db, cursor, 7, 70, filter, T + 10);
                assert!(part.visited >= 7 || part.next == 0 || part.steps >= 70);
                seen.extend(part.keys);
                cursor = part.next;
                calls += 1;
                if cursor == 0 {
                    return (seen, calls);
                }
            }
        };
        let (all, calls) = scan_all(&ScanFilter::default());
        assert_eq!(all.len(), 301);
        assert!(calls > 10);
        let only_k = ScanFilter {
            pattern: Some(Bytes::from_static(b"k1*")),
            type_name: Some(Bytes::from_static(b"String")),
        };
        assert_eq!(scan_all(&only_k).0.len(), 111);
        let lists = ScanFilter {
            pattern: None,
            type_name: Some(Bytes::from_static(b"list")),
        };
        assert!(scan_all(&lists).0.is_empty());
    }

    #[test]
    fn scan_deletes_the_expired_keys_its_pattern_matches() {
        let mut s = shard();
        for k in ["gone", "k-gone", "k-live"] {
            at(&mut s, &["set", k, "v"]);
        }
        at(&mut s, &["pexpire", "gone", "1"]);
        at(&mut s, &["pexpire", "k-gone", "1"]);
        // Looked at with a clock before the deadline: nothing is reclaimed by looking.
        let present = |s: &mut Shard, k: &str| s.db_mut(0).peek(k.as_bytes(), 0).is_some();
        let k_only = ScanFilter {
            pattern: Some(Bytes::from_static(b"k*")),
            type_name: None,
        };
        let part = op_scan(s.db_mut(0), 0, 100, 1000, &k_only, T + 10);
        assert_eq!(
            (part.next, part.keys),
            (0, vec![Bytes::from_static(b"k-live")])
        );
        assert!(!present(&mut s, "k-gone") && present(&mut s, "gone"));
    }

    #[test]
    fn scan_type_filters_every_type_by_its_name() {
        use strata_core::Object;
        let mut s = shard();
        at(&mut s, &["set", "str", "v"]);
        // Empty collections stand in for real ones: the filter only asks the object its type name.
        let objects = [
            ("h", Object::Hash(Default::default())),
            ("l", Object::List(Box::default())),
            ("s", Object::Set(Default::default())),
            ("z", Object::ZSet(Default::default())),
        ];
        for (key, o) in objects {
            s.db_mut(0).set(key.as_bytes(), Value::Obj(o), None, T);
        }
        for (ty, key) in [
            ("hash", "h"),
            ("LIST", "l"),
            ("Set", "s"),
            ("zset", "z"),
            ("string", "str"),
        ] {
            assert_eq!(
                at(&mut s, &["type", key]),
                format!("+{}", ty.to_lowercase())
            );
            let filter = ScanFilter {
                pattern: None,
                type_name: Some(Bytes::copy_from_slice(ty.as_bytes())),
            };
            let part = op_scan(s.db_mut(0), 0, 100, 1000, &filter, T);
            assert_eq!((part.next, part.keys), (0, vec![Bytes::from(key)]), "{ty}");
        }
        let none = ScanFilter {
            pattern: None,
            type_name: Some(Bytes::from_static(b"stream")),
        };
        assert!(op_scan(s.db_mut(0), 0, 100, 1000, &none, T).keys.is_empty());
    }

    #[test]
    fn keys_matches_patterns_and_the_empty_key() {
        let mut s = shard();
        for k in ["", "hello", "hallo", "hxllo", "foo"] {
            at(&mut s, &["set", k, "v"]);
        }
        let sorted = |mut v: Vec<Bytes>| {
            v.sort();
            v
        };
        assert_eq!(op_keys(s.db(0), b"*", T).len(), 5);
        assert_eq!(
            sorted(op_keys(s.db(0), b"h[ae]llo", T)),
            vec![Bytes::from("hallo"), Bytes::from("hello")]
        );
        assert_eq!(op_keys(s.db(0), b"*o", T).len(), 4);
        assert_eq!(op_keys(s.db(0), b"", T), vec![Bytes::new()]);
    }

    #[test]
    fn keys_in_slices_returns_every_key_across_resizes() {
        let mut s = shard();
        let db = s.db_mut(0);
        for i in 0..5000 {
            db.set(format!("k{i}").as_bytes(), Value::Int(i), None, T);
        }
        for i in 0..40_000 {
            db.set(format!("x{i}").as_bytes(), Value::Int(i), None, T);
        }
        let buckets = db.table_bytes();
        let mut out = Vec::new();
        let mut cursor = 0;
        let mut slices = 0;
        loop {
            cursor = op_keys_slice(db, b"k*", cursor, 16, T, &mut out);
            slices += 1;
            if cursor == 0 {
                break;
            }
            // Between slices (as active expiry may do), other keys go and the table shrinks.
            if slices == 40 {
                for i in 0..40_000 {
                    db.delete(format!("x{i}").as_bytes(), T);
                }
            }
            db.rehash(64);
        }
        assert!(slices > 100 && db.table_bytes() < buckets);
        let got: std::collections::HashSet<_> = out.into_iter().collect();
        let all: std::collections::HashSet<_> = op_keys(db, b"*", T).into_iter().collect();
        assert_eq!((all.len(), got), (5000, all));
    }

    #[test]
    fn random_key_skips_expired_keys() {
        let mut s = shard();
        assert_eq!(op_random_key(&mut s, 0, T), None);
        at(&mut s, &["set", "a", "1"]);
        at(&mut s, &["set", "b", "1"]);
        at(&mut s, &["pexpire", "b", "1"]);
        for _ in 0..20 {
            assert_eq!(op_random_key(&mut s, 0, T + 5), Some(Bytes::from("a")));
        }
    }

    #[test]
    fn idle_time_wraps_with_the_clock() {
        assert_eq!(strata_shard::db::lru_idle(100, 40), 60);
        assert_eq!(strata_shard::db::lru_idle(5, 0x00FF_FFFF - 10), 15);
        let c = lru_clock(T);
        assert_eq!(strata_shard::db::lru_idle(lru_clock(T + 7_000), c), 7);
    }

    #[test]
    fn lfu_counter_starts_at_five_and_grows() {
        let mut s = shard();
        s.db_mut(0).set_access(access_for("allkeys-lfu", 10, 1));
        at(&mut s, &["set", "k", "v"]);
        let field = |s: &mut Shard| s.db_mut(0).get_untouched(b"k", T).map(Entry::lru);
        let f = field(&mut s).expect("key exists");
        assert_eq!(lfu_decayed(f, T, 1), 5);
        at(&mut s, &["get", "k"]);
        let f = field(&mut s).expect("key exists");
        assert_eq!(lfu_decayed(f, T, 1), 6);
        // One decay step per minute of inactivity with lfu-decay-time 1.
        assert_eq!(lfu_decayed(f, T + 3 * 60_000, 1), 3);
        assert_eq!(lfu_decayed(f, T + 3 * 60_000, 0), 6);
        for _ in 0..1000 {
            at(&mut s, &["get", "k"]);
        }
        let f = field(&mut s).expect("key exists");
        let n = lfu_decayed(f, T, 1);
        assert!((7..255).contains(&n), "counter {n}");
        assert_eq!(access_for("allkeys-lru", 10, 1), Access::Lru);
    }

    #[test]
    fn generic_commands_reject_wrong_arity() {
        let mut s = shard();
        for (cmd, name) in [
            (&["rename", "a"][..], "rename"),
            (&["copy", "a"], "copy"),
            (&["move", "a"], "move"),
            (&["expire", "a"], "expire"),
            (&["ttl"], "ttl"),
            (&["persist", "a", "b"], "persist"),
            (&["type"], "type"),
        ] {
            assert_eq!(
                run(&mut s, cmd),
                format!("-ERR wrong number of arguments for '{name}' command")
            );
        }
    }
}
