//! Hash commands (Redis's t_hash.c): HSET, HSETNX, HMSET, HGET, HMGET, HGETALL, HDEL, HEXISTS, HLEN,
//! HSTRLEN, HKEYS, HVALS, HINCRBY, HINCRBYFLOAT, HRANDFIELD and HSCAN.
//!
//! The value is a [`Hash`] (strata_core::hash: a packed "listpack" while small, a hash table beyond;
//! conversions happen inside its writes, following `hash-max-listpack-*`).
//!
//! Invariants:
//! * every write goes through [`Db`] (`modify` for in-place changes, `set` for a new key, `delete`
//!   when the last field goes), and a command that changes nothing (HDEL of absent fields, HSETNX of
//!   an existing field, a failed HINCRBY) does not touch the value, so it emits no key event;
//! * arguments are checked in Redis's order (e.g. HINCRBY's increment before the key's type,
//!   HSCAN's cursor before the key and its options after), so the same input fails the same way;
//! * no reply is sized by a client's number before it is checked: HRANDFIELD's counts are capped by
//!   the hash's size, or for repeated picks by [`MAX_RANDOM_PICKS`].

use bytes::Bytes;
use strata_core::long_double::LongDouble;
use strata_core::num::parse_i64;
use strata_core::{Hash, Object, Value, ValueRef};
use strata_resp::{Protocol, ReplyBuf};
use strata_shard::{notify, Db};

use strata_node::args::parse_cursor;
use strata_node::args::picks_allowed;
use strata_node::args::{eq_ci, Args};
use strata_node::ctx::ShardCtx;
use strata_node::error::{CmdError, CmdResult};
use strata_node::table::{Arg, CommandSpec, Flags, Handler, KeyFlags, KeySpec, Parts};

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
        "hash", name, arity, flags, keys, summary, since, complexity, handler,
    )
}

// Key specs and COMMAND DOCS, as Redis 7.0 declares them (scripts/gen_commands.py).

const HSET_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::UPDATE))];
const HSET_FIELD_VALUE_ARGS: &[Arg] = &[Arg::string("field"), Arg::string("value")];
const HSET_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::block("field_value", HSET_FIELD_VALUE_ARGS).multiple(),
];
const HSET_HISTORY: &[(&str, &str)] =
    &[("4.0.0", "Accepts multiple `field` and `value` arguments.")];
const HSETNX_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::INSERT))];
const HSETNX_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("field"),
    Arg::string("value"),
];
const HMSET_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::UPDATE))];
const HMSET_FIELD_VALUE_ARGS: &[Arg] = &[Arg::string("field"), Arg::string("value")];
const HMSET_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::block("field_value", HMSET_FIELD_VALUE_ARGS).multiple(),
];
const HGET_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const HGET_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("field")];
const HMGET_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const HMGET_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("field").multiple()];
const HGETALL_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const HGETALL_ARGS: &[Arg] = &[Arg::key("key", 0)];
const HDEL_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RW.or(KeyFlags::DELETE))];
const HDEL_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("field").multiple()];
const HDEL_HISTORY: &[(&str, &str)] = &[("2.4.0", "Accepts multiple `field` arguments.")];
const HEXISTS_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO)];
const HEXISTS_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("field")];
const HLEN_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO)];
const HLEN_ARGS: &[Arg] = &[Arg::key("key", 0)];
const HSTRLEN_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO)];
const HSTRLEN_ARGS: &[Arg] = &[Arg::key("key", 0), Arg::string("field")];
const HKEYS_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const HKEYS_ARGS: &[Arg] = &[Arg::key("key", 0)];
const HVALS_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const HVALS_ARGS: &[Arg] = &[Arg::key("key", 0)];
const HINCRBY_KEYS: &[KeySpec] = &[KeySpec::at(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::UPDATE),
)];
const HINCRBY_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("field"),
    Arg::integer("increment"),
];
const HINCRBYFLOAT_KEYS: &[KeySpec] = &[KeySpec::at(
    1,
    KeyFlags::RW.or(KeyFlags::ACCESS).or(KeyFlags::UPDATE),
)];
const HINCRBYFLOAT_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::string("field"),
    Arg::double("increment"),
];
const HRANDFIELD_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const HRANDFIELD_OPTIONS_ARGS: &[Arg] = &[
    Arg::integer("count"),
    Arg::pure_token("withvalues", "WITHVALUES").optional(),
];
const HRANDFIELD_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::block("options", HRANDFIELD_OPTIONS_ARGS).optional(),
];
const HSCAN_KEYS: &[KeySpec] = &[KeySpec::at(1, KeyFlags::RO.or(KeyFlags::ACCESS))];
const HSCAN_ARGS: &[Arg] = &[
    Arg::key("key", 0),
    Arg::integer("cursor"),
    Arg::pattern("pattern").with_token("MATCH").optional(),
    Arg::integer("count").with_token("COUNT").optional(),
];

/// The hash family.
#[rustfmt::skip]
pub static COMMANDS: &[CommandSpec] = &[
    cmd("hset", -4, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), HSET_KEYS,
        "Set the string value of a hash field", "2.0.0",
        "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.",
        Handler::Shard(hset))
        .with_args(HSET_ARGS)
        .with_parts(Parts::Members { first: 2, step: 2 })
        .with_history(HSET_HISTORY),
    cmd("hsetnx", 4, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), HSETNX_KEYS,
        "Set the value of a hash field, only if the field does not exist", "2.0.0",
        "O(1)",
        Handler::Shard(hsetnx))
        .with_args(HSETNX_ARGS)
        .with_parts(Parts::Members { first: 2, step: 2 }),
    cmd("hmset", -4, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), HMSET_KEYS,
        "Set multiple hash fields to multiple values", "2.0.0",
        "O(N) where N is the number of fields being set.",
        Handler::Shard(hmset))
        .with_args(HMSET_ARGS)
        .with_parts(Parts::Members { first: 2, step: 2 })
        .deprecated("4.0.0", "`HSET` with multiple field-value pairs"),
    cmd("hget", 3, Flags::READONLY.or(Flags::FAST), HGET_KEYS,
        "Get the value of a hash field", "2.0.0",
        "O(1)",
        Handler::Shard(hget))
        .with_args(HGET_ARGS)
        .with_parts(Parts::Members { first: 2, step: 1 }),
    cmd("hmget", -3, Flags::READONLY.or(Flags::FAST), HMGET_KEYS,
        "Get the values of all the given hash fields", "2.0.0",
        "O(N) where N is the number of fields being requested.",
        Handler::Shard(hmget))
        .with_args(HMGET_ARGS)
        .with_parts(Parts::Members { first: 2, step: 1 }),
    cmd("hgetall", 2, Flags::READONLY, HGETALL_KEYS,
        "Get all the fields and values in a hash", "2.0.0",
        "O(N) where N is the size of the hash.",
        Handler::Shard(hgetall))
        .with_args(HGETALL_ARGS)
        .with_parts(Parts::Whole)
        .with_tips(&["nondeterministic_output_order"]),
    cmd("hdel", -3, Flags::WRITE.or(Flags::FAST), HDEL_KEYS,
        "Delete one or more hash fields", "2.0.0",
        "O(N) where N is the number of fields to be removed.",
        Handler::Shard(hdel))
        .with_args(HDEL_ARGS)
        .with_parts(Parts::Members { first: 2, step: 1 })
        .with_history(HDEL_HISTORY),
    cmd("hexists", 3, Flags::READONLY.or(Flags::FAST), HEXISTS_KEYS,
        "Determine if a hash field exists", "2.0.0",
        "O(1)",
        Handler::Shard(hexists))
        .with_args(HEXISTS_ARGS)
        .with_parts(Parts::Members { first: 2, step: 1 }),
    cmd("hlen", 2, Flags::READONLY.or(Flags::FAST), HLEN_KEYS,
        "Get the number of fields in a hash", "2.0.0",
        "O(1)",
        Handler::Shard(hlen))
        .with_args(HLEN_ARGS)
        .with_parts(Parts::Meta),
    cmd("hstrlen", 3, Flags::READONLY.or(Flags::FAST), HSTRLEN_KEYS,
        "Get the length of the value of a hash field", "3.2.0",
        "O(1)",
        Handler::Shard(hstrlen))
        .with_args(HSTRLEN_ARGS)
        .with_parts(Parts::Members { first: 2, step: 1 }),
    cmd("hkeys", 2, Flags::READONLY, HKEYS_KEYS,
        "Get all the fields in a hash", "2.0.0",
        "O(N) where N is the size of the hash.",
        Handler::Shard(hkeys))
        .with_args(HKEYS_ARGS)
        .with_parts(Parts::Whole)
        .with_tips(&["nondeterministic_output_order"]),
    cmd("hvals", 2, Flags::READONLY, HVALS_KEYS,
        "Get all the values in a hash", "2.0.0",
        "O(N) where N is the size of the hash.",
        Handler::Shard(hvals))
        .with_args(HVALS_ARGS)
        .with_parts(Parts::Whole)
        .with_tips(&["nondeterministic_output_order"]),
    cmd("hincrby", 4, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), HINCRBY_KEYS,
        "Increment the integer value of a hash field by the given number", "2.0.0",
        "O(1)",
        Handler::Shard(hincrby))
        .with_args(HINCRBY_ARGS)
        .with_parts(Parts::Members { first: 2, step: 2 }),
    cmd("hincrbyfloat", 4, Flags::WRITE.or(Flags::DENYOOM).or(Flags::FAST), HINCRBYFLOAT_KEYS,
        "Increment the float value of a hash field by the given amount", "2.6.0",
        "O(1)",
        Handler::Shard(hincrbyfloat))
        .with_args(HINCRBYFLOAT_ARGS)
        .with_parts(Parts::Members { first: 2, step: 2 }),
    cmd("hrandfield", -2, Flags::READONLY, HRANDFIELD_KEYS,
        "Get one or multiple random fields from a hash", "6.2.0",
        "O(N) where N is the number of fields returned",
        Handler::Shard(hrandfield))
        .with_args(HRANDFIELD_ARGS)
        .with_parts(Parts::Whole)
        .with_tips(&["nondeterministic_output"]),
    cmd("hscan", -3, Flags::READONLY, HSCAN_KEYS,
        "Incrementally iterate hash fields and associated values", "2.8.0",
        "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection..",
        Handler::Shard(hscan))
        .with_args(HSCAN_ARGS)
        .with_parts(Parts::Whole)
        .with_tips(&["nondeterministic_output"]),
];

// ===== access =====

/// The hash in `v`, or WRONGTYPE.
pub fn as_hash(v: ValueRef<'_>) -> Result<&Hash, CmdError> {
    match v {
        ValueRef::Obj(Object::Hash(h)) => Ok(h),
        _ => Err(CmdError::WrongType),
    }
}

/// The hash at `key` for reading (counts as an access): None if absent, WRONGTYPE if not a hash.
pub fn op_read<'a>(db: &'a mut Db, key: &[u8], now: i64) -> Result<Option<&'a Hash>, CmdError> {
    match db.get(key, now) {
        None => Ok(None),
        Some(e) => as_hash(e.value()).map(Some),
    }
}

/// The hash at `key` for a write command's checks: like [`op_read`] but, as Redis's
/// lookupKeyWrite, counting no keyspace hit or miss.
fn op_peek<'a>(db: &'a mut Db, key: &[u8], now: i64) -> Result<Option<&'a Hash>, CmdError> {
    match db.peek(key, now) {
        None => Ok(None),
        Some(e) => as_hash(e.value()).map(Some),
    }
}

/// Runs `f` on the hash at `key` (an empty one, stored afterwards, if the key is absent) and deletes
/// the key if `f` left the hash empty. Callers check the type first (see [`op_read`]) and call this
/// only for a change they know will happen, which is announced as `event` (then "del" if the key
/// went), as Redis does.
fn write<R>(
    db: &mut Db,
    key: &[u8],
    now: i64,
    event: &'static str,
    f: impl FnOnce(&mut Hash) -> R,
) -> R {
    let done = match db.modify(key, now) {
        Some(mut e) => {
            let Some(Object::Hash(h)) = e.object_mut() else {
                unreachable!("the caller checked the key holds a hash")
            };
            Ok((f(h), h.is_empty()))
        }
        None => Err(f),
    };
    match done {
        Ok((r, empty)) => {
            db.notify(notify::HASH, event, key);
            if empty {
                db.delete(key, now);
                db.notify(notify::GENERIC, "del", key);
            }
            r
        }
        Err(f) => {
            let mut h = Hash::new();
            let r = f(&mut h);
            if !h.is_empty() {
                db.set(key, Value::Obj(Object::Hash(h)), None, now);
                db.notify(notify::HASH, event, key);
            }
            r
        }
    }
}

// ===== HSET / HSETNX / HMSET =====

/// HSET/HMSET: sets each (field, value) pair in order; returns how many fields were new. Every
/// argument is checked against `hash-max-listpack-value` before anything is written, as Redis does.
/// Counts one change per pair, new field or not, as Redis does.
pub fn op_hset(db: &mut Db, key: &[u8], pairs: &[Bytes], now: i64) -> Result<usize, CmdError> {
    op_peek(db, key, now)?;
    let longest = pairs.iter().map(|a| a.len()).max().unwrap_or(0);
    let mark = db.dirty();
    let added = write(db, key, now, "hset", |h| {
        h.convert_for_len(longest);
        pairs
            .chunks_exact(2)
            .filter(|fv| h.insert(&fv[0], &fv[1]))
            .count()
    });
    db.count_changes_since(mark, (pairs.len() / 2) as u64);
    Ok(added)
}

/// The field/value arguments of HSET/HMSET, or the arity error for an odd count.
fn field_values<'a>(cx: &ShardCtx<'a>, name: &str) -> Result<&'a [Bytes], CmdError> {
    let pairs = &cx.args[2..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(CmdError::WrongArity(name.into()));
    }
    Ok(pairs)
}

/// HSET key field value [field value ...] → the number of new fields.
fn hset(cx: &mut ShardCtx<'_>) -> CmdResult {
    let pairs = field_values(cx, "hset")?;
    let now = cx.now;
    let n = op_hset(cx.shard.db_mut(cx.db), &cx.args[1], pairs, now)?;
    cx.out.int(n as i64);
    Ok(())
}

/// HMSET key field value [field value ...] → OK.
fn hmset(cx: &mut ShardCtx<'_>) -> CmdResult {
    let pairs = field_values(cx, "hmset")?;
    let now = cx.now;
    op_hset(cx.shard.db_mut(cx.db), &cx.args[1], pairs, now)?;
    cx.out.ok();
    Ok(())
}

/// HSETNX: sets the field only if it does not exist; true if it was set.
pub fn op_hsetnx(
    db: &mut Db,
    key: &[u8],
    field: &[u8],
    value: &[u8],
    now: i64,
) -> Result<bool, CmdError> {
    if op_peek(db, key, now)?.is_some_and(|h| h.contains(field)) {
        return Ok(false);
    }
    Ok(write(db, key, now, "hset", |h| h.insert(field, value)))
}

/// HSETNX key field value → 1 if set, 0 if the field existed.
fn hsetnx(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, field, value, now) = (&cx.args[1], &cx.args[2], &cx.args[3], cx.now);
    let set = op_hsetnx(cx.shard.db_mut(cx.db), key, field, value, now)?;
    cx.out.int(i64::from(set));
    Ok(())
}

// ===== HGET / HMGET / HEXISTS / HSTRLEN / HLEN =====

/// HGET key field → the value, or null.
fn hget(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, field, now) = (&cx.args[1], &cx.args[2], cx.now);
    match op_read(cx.shard.db_mut(cx.db), key, now)?.and_then(|h| h.get(field)) {
        Some(v) => cx.out.bulk(v),
        None => cx.out.null(),
    }
    Ok(())
}

/// HMGET key field [field ...] → the values, null for absent fields (all null if the key is absent).
fn hmget(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, fields, now) = (&cx.args[1], &cx.args[2..], cx.now);
    let h = op_read(cx.shard.db_mut(cx.db), key, now)?;
    cx.out.array(fields.len());
    for f in fields {
        match h.and_then(|h| h.get(f)) {
            Some(v) => cx.out.bulk(v),
            None => cx.out.null(),
        }
    }
    Ok(())
}

/// HEXISTS key field → 1 or 0.
fn hexists(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, field, now) = (&cx.args[1], &cx.args[2], cx.now);
    let found = op_read(cx.shard.db_mut(cx.db), key, now)?.is_some_and(|h| h.contains(field));
    cx.out.int(i64::from(found));
    Ok(())
}

/// HSTRLEN key field → the value's length (0 if absent).
fn hstrlen(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, field, now) = (&cx.args[1], &cx.args[2], cx.now);
    let h = op_read(cx.shard.db_mut(cx.db), key, now)?;
    cx.out
        .int(h.and_then(|h| h.get(field)).map_or(0, |v| v.len()) as i64);
    Ok(())
}

/// HLEN key → the number of fields.
fn hlen(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, now) = (&cx.args[1], cx.now);
    let h = op_read(cx.shard.db_mut(cx.db), key, now)?;
    cx.out.int(h.map_or(0, Hash::len) as i64);
    Ok(())
}

// ===== HGETALL / HKEYS / HVALS =====

/// HGETALL key → a map of fields to values (RESP2: a flat array), in the hash's order.
fn hgetall(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, now) = (&cx.args[1], cx.now);
    let h = op_read(cx.shard.db_mut(cx.db), key, now)?;
    cx.out.map(h.map_or(0, Hash::len));
    for (k, v) in h.iter().flat_map(|h| h.iter()) {
        cx.out.bulk(k);
        cx.out.bulk(v);
    }
    Ok(())
}

/// HKEYS key → the fields.
fn hkeys(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, now) = (&cx.args[1], cx.now);
    let h = op_read(cx.shard.db_mut(cx.db), key, now)?;
    cx.out.array(h.map_or(0, Hash::len));
    for (k, _) in h.iter().flat_map(|h| h.iter()) {
        cx.out.bulk(k);
    }
    Ok(())
}

/// HVALS key → the values.
fn hvals(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, now) = (&cx.args[1], cx.now);
    let h = op_read(cx.shard.db_mut(cx.db), key, now)?;
    cx.out.array(h.map_or(0, Hash::len));
    for (_, v) in h.iter().flat_map(|h| h.iter()) {
        cx.out.bulk(v);
    }
    Ok(())
}

// ===== HDEL =====

/// HDEL: removes the fields; returns how many existed. The key goes with its last field. Counts
/// one change per field removed, as Redis does.
pub fn op_hdel(db: &mut Db, key: &[u8], fields: &[Bytes], now: i64) -> Result<usize, CmdError> {
    match op_peek(db, key, now)? {
        Some(h) if fields.iter().any(|f| h.contains(f)) => {}
        _ => return Ok(0),
    }
    let mark = db.dirty();
    let removed = write(db, key, now, "hdel", |h| {
        fields.iter().filter(|f| h.remove(f)).count()
    });
    db.count_changes_since(mark, removed as u64);
    Ok(removed)
}

/// HDEL key field [field ...] → the number of fields removed.
fn hdel(cx: &mut ShardCtx<'_>) -> CmdResult {
    let now = cx.now;
    let n = op_hdel(cx.shard.db_mut(cx.db), &cx.args[1], &cx.args[2..], now)?;
    cx.out.int(n as i64);
    Ok(())
}

// ===== HINCRBY / HINCRBYFLOAT =====

/// HINCRBY: adds `by` to the integer in `field` (0 if absent) and returns the result.
pub fn op_hincrby(
    db: &mut Db,
    key: &[u8],
    field: &[u8],
    by: i64,
    now: i64,
) -> Result<i64, CmdError> {
    let cur = match op_peek(db, key, now)?.and_then(|h| h.get(field)) {
        Some(v) => parse_i64(v).ok_or(CmdError::msg("ERR hash value is not an integer"))?,
        None => 0,
    };
    let new = cur.checked_add(by).ok_or(CmdError::Overflow)?;
    write(db, key, now, "hincrby", |h| {
        h.insert(field, new.to_string().as_bytes())
    });
    Ok(new)
}

/// HINCRBY key field increment → the new value.
fn hincrby(cx: &mut ShardCtx<'_>) -> CmdResult {
    let by = Args::new(cx.args, 3).next_i64()?;
    let (key, field, now) = (&cx.args[1], &cx.args[2], cx.now);
    let n = op_hincrby(cx.shard.db_mut(cx.db), key, field, by, now)?;
    cx.out.int(n);
    Ok(())
}

/// HINCRBYFLOAT: adds the float `by` to the number in `field` (0 if absent), stores the result as
/// a string and returns it. The arithmetic is Redis's `long double` one, emulated exactly
/// ([`LongDouble`]), so the result prints digit for digit as Redis prints it.
pub fn op_hincrbyfloat(
    db: &mut Db,
    key: &[u8],
    field: &[u8],
    by: &[u8],
    now: i64,
) -> Result<String, CmdError> {
    let inc = LongDouble::parse(by).ok_or(CmdError::NotFloat)?;
    if inc.is_infinite() {
        return Err(CmdError::msg("ERR value is NaN or Infinity"));
    }
    let cur = match op_peek(db, key, now)?.and_then(|h| h.get(field)) {
        Some(v) => LongDouble::parse(v).ok_or(CmdError::msg("ERR hash value is not a float"))?,
        None => LongDouble::from_i64(0),
    };
    let sum = cur + inc;
    if sum.is_infinite() {
        return Err(CmdError::msg("ERR increment would produce NaN or Infinity"));
    }
    let text = sum.to_human();
    write(db, key, now, "hincrbyfloat", |h| {
        h.insert(field, text.as_bytes())
    });
    Ok(text)
}

/// HINCRBYFLOAT key field increment → the new value as a bulk string.
fn hincrbyfloat(cx: &mut ShardCtx<'_>) -> CmdResult {
    let (key, field, by, now) = (&cx.args[1], &cx.args[2], &cx.args[3], cx.now);
    let text = op_hincrbyfloat(cx.shard.db_mut(cx.db), key, field, by, now)?;
    // Propagated as the value it set (HSET), so a replay does not depend on float formatting.
    cx.propagate_as(|| {
        vec![
            Bytes::from_static(b"HSET"),
            key.clone(),
            field.clone(),
            Bytes::copy_from_slice(text.as_bytes()),
        ]
    });
    cx.out.bulk(text.as_bytes());
    Ok(())
}

// ===== HRANDFIELD =====

/// A small xorshift generator seeded from the shard's, so the hash can be borrowed meanwhile.
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    }
}

/// One (field, value) pair of HRANDFIELD's reply: RESP3 nests each pair in an array.
fn reply_pair(out: &mut ReplyBuf, k: &[u8], v: &[u8], withvalues: bool) {
    if withvalues {
        if out.proto == Protocol::Resp3 {
            out.array(2);
        }
        out.bulk(k);
        out.bulk(v);
    } else {
        out.bulk(k);
    }
}

/// The header of an HRANDFIELD reply of `n` picks.
fn reply_picks(out: &mut ReplyBuf, n: usize, withvalues: bool) {
    out.array(if withvalues && out.proto == Protocol::Resp2 {
        2 * n
    } else {
        n
    });
}

/// HRANDFIELD key [count [WITHVALUES]] → a random field (null if absent); with a count, up to
/// `count` distinct fields, or with a negative count exactly `-count` fields, repeats allowed.
fn hrandfield(cx: &mut ShardCtx<'_>) -> CmdResult {
    let mut rand = rng(cx.shard.rand());
    let (key, now) = (&cx.args[1], cx.now);
    if cx.args.len() == 2 {
        let h = op_read(cx.shard.db_mut(cx.db), key, now)?;
        match h.and_then(|h| h.random(&mut rand)) {
            Some((k, _)) => cx.out.bulk(k),
            None => cx.out.null(),
        }
        return Ok(());
    }
    let count = parse_i64(&cx.args[2]).ok_or(CmdError::NotInteger)?;
    if count == i64::MIN {
        return Err(CmdError::msg(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let withvalues = match &cx.args[3..] {
        [] => false,
        [w] if eq_ci(w, "withvalues") => true,
        _ => return Err(CmdError::Syntax),
    };
    if withvalues && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::msg("ERR value is out of range"));
    }
    let out = &mut *cx.out;
    let Some(h) = op_read(cx.shard.db_mut(cx.db), key, now)? else {
        out.array(0);
        return Ok(());
    };
    let (picks, distinct) = (count.unsigned_abs(), count >= 0);
    if picks == 0 {
        out.array(0);
    } else if !distinct {
        if !picks_allowed(picks, out) {
            return Err(CmdError::msg("ERR value is out of range"));
        }
        reply_picks(out, picks as usize, withvalues);
        h.random_repeated(picks as usize, &mut rand, |k, v| {
            reply_pair(out, k, v, withvalues);
            !out.over_room()
        });
    } else if picks >= h.len() as u64 {
        reply_picks(out, h.len(), withvalues);
        for (k, v) in h.iter() {
            reply_pair(out, k, v, withvalues);
        }
    } else {
        let chosen = h.random_distinct(picks as usize, &mut rand);
        reply_picks(out, chosen.len(), withvalues);
        for (k, v) in chosen {
            reply_pair(out, k, v, withvalues);
        }
    }
    Ok(())
}

// ===== HSCAN =====

/// HSCAN key cursor [MATCH pattern] [COUNT count] → [next cursor, [field, value, ...]]. A listpack
/// answers whole in one call (cursor 0), as Redis does; a table about COUNT fields per call.
fn hscan(cx: &mut ShardCtx<'_>) -> CmdResult {
    let cursor = parse_cursor(&cx.args[2]).ok_or(CmdError::msg("ERR invalid cursor"))?;
    let (key, now) = (&cx.args[1], cx.now);
    let Some(h) = op_read(cx.shard.db_mut(cx.db), key, now)? else {
        cx.out.array(2);
        cx.out.bulk(b"0");
        cx.out.array(0);
        return Ok(());
    };
    let (mut count, mut pattern) = (10usize, None);
    let mut a = Args::new(cx.args, 3);
    while let Some(opt) = a.peek() {
        if a.remaining() < 2 {
            return Err(CmdError::Syntax);
        }
        a.next_bytes()?;
        if eq_ci(opt, "count") {
            let n = a.next_i64()?;
            if n < 1 {
                return Err(CmdError::Syntax);
            }
            count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if eq_ci(opt, "match") {
            let p = a.next_bytes()?;
            pattern = (p.as_ref() != b"*").then_some(p);
        } else {
            return Err(CmdError::Syntax);
        }
    }
    let mut found: Vec<(&[u8], &[u8])> = Vec::new();
    let next = h.scan(cursor, count, |k, v| {
        if pattern.is_none_or(|p| strata_core::glob::glob_match(p, k, false)) {
            found.push((k, v));
        }
    });
    cx.out.array(2);
    cx.out.bulk(next.to_string().as_bytes());
    cx.out.array(2 * found.len());
    for (k, v) in found {
        cx.out.bulk(k);
        cx.out.bulk(v);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::testing::{run, shard};

    #[test]
    fn set_get_delete_round_trip() {
        let mut s = shard();
        assert_eq!(
            run(&mut s, &["hset", "h", "a", "1", "b", "2", "a", "3"]),
            ":2"
        );
        assert_eq!(run(&mut s, &["hget", "h", "a"]), "$1:3");
        assert_eq!(run(&mut s, &["hlen", "h"]), ":2");
        assert_eq!(run(&mut s, &["hsetnx", "h", "a", "x"]), ":0");
        assert_eq!(run(&mut s, &["hdel", "h", "a", "b", "zz"]), ":2");
        assert_eq!(run(&mut s, &["exists", "h"]), ":0");
    }

    #[test]
    fn increments_and_their_errors() {
        let mut s = shard();
        assert_eq!(run(&mut s, &["hincrby", "h", "n", "5"]), ":5");
        assert_eq!(run(&mut s, &["hincrbyfloat", "h", "n", "0.5"]), "$3:5.5");
        assert_eq!(
            run(&mut s, &["hincrby", "h", "n", "1"]),
            "-ERR hash value is not an integer"
        );
        run(&mut s, &["hset", "h", "m", "9223372036854775807"]);
        assert_eq!(
            run(&mut s, &["hincrby", "h", "m", "1"]),
            "-ERR increment or decrement would overflow"
        );
    }
}
